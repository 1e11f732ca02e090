"""tma: tensor-map copies between global and shared memory (cp.async.bulk.tensor), their bulk-group completion, and
the async-proxy fence.

A ``tmap<T, R>[box]`` kernel parameter is a TMA tensor map over a rank-R global tensor whose LAST mode is contiguous
(row-major, numpy's C order); ``box`` is the smem layout one copy writes, over the global tensor's modes (checked
with ``layoutc.hopper.make_tma_params``). In the interpreter the parameter receives the numpy global array (of
``host_dtype(T)``) and is encoded with ``make_tma_params`` as the launcher encodes it: over the pitched device copy
of the array (``pitched_shape``). A mode of extent 1 (a (1, N) row, an (M, 1) column) is fine: it may be TMA's dim 0.

A copy is asynchronous: ``tma.load`` and ``tma.store`` only issue it; the interpreter's scheduler performs it later
(a load reads global memory, writes the box into shared memory and completes its bytes on the barrier in one step;
a store first reads its smem source, then writes global memory).
"""
from __future__ import annotations

import functools
import math

import numpy as np

import layoutc as lc
from layoutc.hopper import TmaError, make_tma_params

from ..core import Kernel, Site
from ..launch import static_triple
from ..text import attribute_text
from ..types import I32, BarrierType, PipelineType, TensorMapType, TensorType
from . import (
    AsyncOp, OpDef, Wait, const_int, describe_threads, describe_waiters, distinct_sorted, element_bytes, from_bytes,
    kernel_rule, layoutc_dtype, numpy_dtype, register, tile_coordinates, to_bytes, waits_verb,
)
from .mbarrier import check_cluster_visible, note_remote_access, peer_array
from .pipeline import multicast_ranks, pipeline_grid
from .smem import alignment_advice, byte_offsets, physical, swizzle_of, view_alignment

MAX_PENDING_GROUPS = 63  # cp.async.bulk.wait_group N takes N = 0..63

_SW_NAMES = {lc.Swizzle(1, 4, 3): "SW32", lc.Swizzle(2, 4, 3): "SW64", lc.Swizzle(3, 4, 3): "SW128"}


def _sw_name(sw) -> str:
    return _SW_NAMES.get(sw, str(sw))


# -- the tensor map of a type ----------------------------------------------------------------------------------------

@functools.cache
def map_params(t: TensorMapType):
    """``make_tma_params`` for a row-major global tensor of rank ``t.rank`` (each mode as long as the box's, the
    last rounded up to 16 elements so that every row pitch is a multiple of 16 bytes) and the box ``t.box``.
    Raises TmaError when TMA cannot write the box in one copy, ValueError when the box has the wrong rank."""
    box = t.box
    if lc.rank(box) != t.rank:
        raise ValueError(f"the box {lc.to_str(box)} has rank {lc.rank(box)} but the map's global tensor has rank "
                         f"{t.rank}: give the box one mode per global mode")
    extents = [lc.product(m) for m in (box.shape if isinstance(box.shape, tuple) else (box.shape,))]
    extents[-1] = -(-extents[-1] // 16) * 16
    strides, s = [], 1
    for n in reversed(extents):
        strides.append(s)
        s *= n
    glob = lc.Layout(tuple(extents), tuple(reversed(strides)))
    return make_tma_params(glob, layoutc_dtype(t.dtype), box)


def box_bytes(t: TensorMapType) -> int:
    """Bytes one copy of a map delivers (out-of-bounds fill included): size(box) · element bytes."""
    return lc.size(t.box) * element_bytes(t.dtype)


class TensorMapValue:
    """Interpreter value of a ``tmap`` parameter: the global numpy array, its encoded TmaParams, the element type."""

    def __init__(self, array, params, dtype, name):
        self.array = array
        self.params = params
        self.dtype = dtype
        self.name = name


def pitched_shape(shape, itemsize: int) -> tuple:
    """The shape of the device buffer the host copies a numpy argument of a tmap parameter into: the last extent
    rounded up so that every row pitch is a multiple of 16 bytes (TMA's stride rule), as cudaMallocPitch would; the
    argument is the leading ``shape`` view of it. (8,37) f32 → (8,40); (20,1) f32 → (20,4); (1,300) f32 and every
    rank-1 shape unchanged. Post: C-order strides of the result, times ``itemsize``, are multiples of 16 past dim 0."""
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2:
        return shape
    unit = 16 // math.gcd(16, int(itemsize))
    return shape[:-1] + (-(-shape[-1] // unit) * unit,)


def encode_tensor_map(array, t: TensorMapType, name: str) -> TensorMapValue:
    """Encode the map of parameter ``name`` over a numpy ``array`` as the launcher does: the array holds
    ``host_dtype(t.dtype)`` (``ml_dtypes.bfloat16`` for bf16, ...), and the map describes the pitched device copy the
    launcher makes of it (``pitched_shape``: C order, rows padded to a multiple of 16 bytes), so its own strides and
    address do not matter. E.g. a (20, 1) f32 column: dims (1, 20), strides (16,). Raises ValueError with the
    reason (the box does not fit the array's mode order, a wrong dtype, a wrong rank)."""
    from ..host_dtypes import host_dtype_mismatch  # ml_dtypes: only where host arrays are bound, not for jit()

    if not isinstance(array, np.ndarray) or array.ndim != t.rank:
        raise ValueError(f"argument {name} must be a rank-{t.rank} numpy array for {t}")
    wrong = host_dtype_mismatch(name, array.dtype, t.dtype, torch=False)
    if wrong:
        raise ValueError(wrong)
    if array.size == 0:
        # an empty tensor has no map (the driver refuses zero extents); the host passes a blank one, as the launcher
        # does, and a copy through it is an error
        return TensorMapValue(array, None, t.dtype, name)
    row_major = lc.make_layout(pitched_shape(array.shape, array.itemsize), lc.LayoutRight)
    glob = lc.Layout(tuple(array.shape), row_major.stride)
    try:
        params = make_tma_params(glob, layoutc_dtype(t.dtype), t.box)
    except TmaError as e:
        raise ValueError(f"argument {name}: cannot encode {t} for a {array.shape} array (its device copy has element "
                         f"strides {glob.stride}): {e}") from None
    return TensorMapValue(array, params, t.dtype, name)


# -- copies in flight --------------------------------------------------------------------------------------------------

def _box_geometry(ix, m: TensorMapValue):
    """(box coordinates per element (n, rank), byte offsets before the swizzle (n,), TMA's smem layout)."""
    layout = m.params.smem_layout()
    coords = ix.cached(("box-coords", layout.shape), lambda: tile_coordinates(layout.shape))
    return coords, byte_offsets(ix, layout, m.dtype), layout


class TmaCopy(AsyncOp):
    """One TMA copy in flight. A load has one step (read global, write smem, complete_tx on its barrier); a store
    has two ("read": snapshot its smem source; "write": write the in-bounds elements to global memory)."""

    def __init__(self, kind, op, thread, tmap, origin, addresses, byteset, barrier=None):
        self.kind = kind
        self.op = op
        self.thread = thread
        self.tmap = tmap
        self.origin = origin          # (rank,) global coordinates of the box's first element
        self.addresses = addresses    # (n,) absolute smem byte address of each box element
        self.byteset = byteset        # sorted unique bytes touched in smem
        self.barrier = barrier        # (BarrierArray, index) for a load
        self.targets = None           # a multicast load: [(CTA, (BarrierArray, index))] of every destination
        self.state = "issued"
        self.values = None
        self.done = False

    def _global(self, ix):
        coords, _pre, _layout = _box_geometry(ix, self.tmap)
        glob = self.origin[None, :] + coords
        inside = np.all((glob >= 0) & (glob < np.array(self.tmap.array.shape)), axis=1)
        return glob, inside

    def step(self, ix) -> None:
        arr = self.tmap.array
        esize = element_bytes(self.tmap.dtype)
        if self.kind == "load":
            glob, inside = self._global(ix)
            safe = np.where(inside[:, None], glob, 0)
            # the host array holds host_dtype (ml_dtypes.bfloat16, ...); the interpreter computes in numpy_dtype
            values = arr[tuple(safe[:, k] for k in range(safe.shape[1]))] if arr.size else np.zeros(len(glob))
            values = np.where(inside, values.astype(numpy_dtype(self.tmap.dtype)), 0)
            raw = to_bytes(values, self.tmap.dtype)
            for cta, (bars, i) in self.targets or [(ix, self.barrier)]:
                cta.smem_dma_write(self.addresses, raw)
                bars.complete_tx(cta, self.op, i, self.tmap.params.box_bytes)
            self.done = True
        elif self.state == "issued":
            raw = ix.smem[self.addresses[:, None] + np.arange(esize)]
            self.values = from_bytes(raw, self.tmap.dtype)
            self.state = "read"
        else:
            glob, inside = self._global(ix)
            arr[tuple(glob[inside][:, k] for k in range(glob.shape[1]))] = self.values[inside]
            self.state = "written"
            self.done = True

    def writes(self, ix):
        return self.byteset if self.kind == "load" and not self.done else None

    def reads(self, ix):
        return self.byteset if self.kind == "store" and self.state == "issued" else None

    def describe(self) -> str:
        where = f"the {self.op.name} issued at {self.op.loc} by thread {self.thread}"
        if self.kind == "load":
            bars, i = self.barrier
            return f"{where} (completing on {bars.label(i)})"
        return where


def _check_box_start(ix, op, m: TensorMapValue, origin) -> None:
    """A copy's box must start on a 16-byte boundary along the map's contiguous mode (TMA's dim 0): the hardware
    reads and writes global memory in 16-byte units from the box's first element — an f32 box at element 1 of its
    row faults with an illegal instruction (the map's base address and row pitches are 16-byte aligned, so this is
    the start coordinate along that mode times the element size). A negative start is fine as long as it is aligned:
    the elements before the tensor are out of bounds."""
    mode = m.params.mode_order[0]
    start = int(origin[mode])
    esize = element_bytes(m.dtype)
    if start * esize % 16:
        ix.fail(op, f"the box of {m.name} starts at element {start} of its contiguous mode {mode} ({start} × "
                    f"{esize} bytes = {start * esize}, not a multiple of 16): TMA copies start 16-byte aligned "
                    f"along the contiguous mode (TMA faults: illegal instruction); start at a multiple of "
                    f"{16 // math.gcd(16, esize)} elements")


def _copy_addresses(ix, op, m: TensorMapValue, view, thread: int):
    """Absolute smem byte addresses TMA touches for a copy of ``m``'s box at ``view``'s base for ``thread``."""
    if m.params is None:
        ix.fail(op, f"copies through the map of {m.name}, an empty {m.array.shape} tensor (no map can describe it)")
    dst = int(view.base[thread])
    if dst % 128:
        ix.fail(op, f"the smem box starts at byte {dst}, which is not 128-byte aligned (TMA faults: misaligned "
                    "address)")
    _coords, pre, layout = _box_geometry(ix, m)
    addresses = physical(layout, dst + pre)
    esize = element_bytes(m.dtype)
    if addresses.min() < view.lo or addresses.max() + esize > view.hi:
        ix.fail(op, f"the box reaches bytes [{int(addresses.min())}, {int(addresses.max()) + esize}), outside "
                    f"{view.name}'s allocation [{view.lo}, {view.hi})")
    byteset = distinct_sorted(addresses[:, None] + np.arange(esize))
    return addresses, byteset


def bulk_groups(ix, thread: int) -> dict:
    """A thread's TMA store bookkeeping: ``open`` (stores not yet committed), ``groups`` (committed, oldest first; a
    fully written prefix is dropped) and ``unsettled`` (stores whose smem reads no tma.store_wait of the thread has
    seen done yet: the race check orders them only from that wait on)."""
    return ix.state.setdefault(("bulk", thread), {"open": [], "groups": [], "unsettled": []})


# -- verifier helpers --------------------------------------------------------------------------------------------------

def _verify_map_and_view(op, v, tmap, view, what: str) -> bool:
    if not isinstance(tmap.type, TensorMapType):
        v.error(op, f"the first operand must be a TMA map tmap<T, R>[box], not {tmap.type}")
        return False
    if not isinstance(view.type, TensorType) or view.type.space != "smem":
        v.error(op, f"the {what} must be a smem view, not {view.type}")
        return False
    mt, vt = tmap.type, view.type
    if vt.dtype != mt.dtype:
        v.error(op, f"the smem view holds {vt.dtype} but the TMA map copies {mt.dtype}")
        return False
    msw, vsw = swizzle_of(mt.box), swizzle_of(vt.layout)
    if msw != vsw:
        if vsw is None:
            v.error(op, f"the TMA map swizzles {_sw_name(msw)} ({msw}) but the smem layout "
                        f"{lc.to_str(vt.layout)} is not swizzled")
        elif msw is None:
            v.error(op, f"the smem layout {lc.to_str(vt.layout)} is swizzled {_sw_name(vsw)} ({vsw}) but the TMA "
                        "map does not swizzle")
        else:
            v.error(op, f"the TMA map swizzles {_sw_name(msw)} ({msw}) but the smem layout {_sw_name(vsw)} ({vsw})")
        return False
    if vt.layout != mt.box:
        v.error(op, f"the smem layout {lc.to_str(vt.layout)} differs from the TMA map's box {lc.to_str(mt.box)}: a "
                    "copy writes exactly the box layout")
        return False
    try:
        need = map_params(mt).smem_alignment
    except (lc.LayoutError, ValueError):
        return True  # the parameter's own rule reports the box
    have = view_alignment(view)
    if have is not None and have < need:
        why = f"the {_sw_name(msw)} pattern must start at phase 0" if msw is not None else "TMA's minimum"
        v.error(op, f"%{view.name} is only known to be {have}-byte aligned but the TMA map needs {need} ({why}): "
                    f"{alignment_advice(view, need)}")
    return True


def _verify_coords(op, v, mt: TensorMapType, coords) -> None:
    if len(coords) != mt.rank:
        v.error(op, f"a rank-{mt.rank} map needs {mt.rank} coordinates (one per global mode), got {len(coords)}")
    for c in coords:
        if c.type != I32:
            v.error(op, f"coordinates must be i32, not {c.type}")
            return


def _coords_of(ix, coords, act):
    return np.stack([ix.get(c).astype(np.int64)[act] for c in coords], axis=1)


# -- ops ---------------------------------------------------------------------------------------------------------------

def _verify_multicast_mode(op, v, bars, mode: int) -> None:
    """``multicast = 0 | 1``: a mode of the CTA grid of the pipeline the load completes on."""
    if mode not in (0, 1):
        v.error(op, f"multicast = {mode}: a multicast mode of the pipeline's CTA grid (cm, cn) is 0 (the CTAs of "
                    "the issuing CTA's grid column) or 1 (those of its grid row); true writes every CTA")
        return
    if not isinstance(bars.type, PipelineType):
        if isinstance(bars.type, BarrierType):
            v.error(op, f"multicast = {mode} names a mode of a pipeline's CTA grid, but %{bars.name} is an mbarrier "
                        "array (no grid): complete on a pipeline allocated with cluster = (cm, cn), or multicast = "
                        "true (every CTA of the cluster)")
        return
    grid = pipeline_grid(bars)
    if grid is not None and grid[0] * grid[1] < 2:
        v.error(op, f"multicast = {mode} names a mode of %{bars.name}'s CTA grid, but %{bars.name} belongs to one "
                    "CTA: allocate it with cluster = (cm, cn) (or cluster = C)")


def multicast_count(load) -> int:
    """CTAs a ``tma.load`` op writes its box into: 1; with ``multicast = true`` the kernel's whole cluster (given
    as -1 here: the caller knows the size); with ``multicast = 0`` / ``1`` cm / cn of its pipeline's grid (1 when
    the grid is unknown: the verifier reports that). ``{multicast = 1}`` on a (2, 4) pipeline → 4."""
    mode = load.attrs.get("multicast", False)
    if mode is True:
        return -1
    if isinstance(mode, int) and not isinstance(mode, bool) and mode in (0, 1):
        grid = pipeline_grid(load.operands[2]) if len(load.operands) > 2 else None
        return grid[mode] if grid is not None else 1
    return 1


@register
class Load(OpDef):
    name = "tma.load"
    summary = "one asynchronous TMA copy of the map's box from global to shared memory, completing on a barrier"
    optional_attrs = ("multicast",)

    def verify(self, op, v):
        if len(op.operands) < 4:
            v.error(op, "expects a tensor map, a smem view, an mbarrier array, a barrier index and one coordinate "
                        f"per global mode, got {len(op.operands)} operands")
            return
        tmap, dst, bars, index, *coords = op.operands
        v.results(op, 0)
        if not _verify_map_and_view(op, v, tmap, dst, "destination"):
            return
        if not isinstance(bars.type, (BarrierType, PipelineType)):
            v.error(op, f"the third operand must be an mbarrier array or a pipeline (its full barriers), not "
                        f"{bars.type}")
        else:
            c = const_int(index)
            count = bars.type.count if isinstance(bars.type, BarrierType) else bars.type.stages
            if c is not None and not 0 <= c < count:
                v.error(op, f"barrier index {c} is outside %{bars.name}'s {count} barriers")
        if index.type != I32:
            v.error(op, f"the barrier index must be i32, not {index.type}")
        _verify_coords(op, v, tmap.type, coords)
        mode = op.attrs.get("multicast", False)
        if isinstance(mode, int) and not isinstance(mode, bool):
            _verify_multicast_mode(op, v, bars, mode)
        elif "multicast" in op.attrs and v.attr(op, "multicast", (bool, int)):
            size = getattr(v, "kernel_cluster", 1)
            if size is not None and size < 2:
                v.error(op, "multicast needs a kernel launched in clusters of 2 or more CTAs (cluster = (2, 1, 1)): "
                            "it writes the box into every CTA of the cluster")

    def interpret(self, op, ix):
        tmap_v, dst_v, bars_v, index_v, *coords = op.operands
        m, view, pipe = ix.get(tmap_v), ix.get(dst_v), ix.get(bars_v)
        bars = getattr(pipe, "full", pipe)  # a pipeline: its stage's full barrier
        multicast = op.attrs.get("multicast", False)
        act = np.nonzero(ix.mask)[0]
        idx = ix.get(index_v)[act]
        origin = _coords_of(ix, coords, act)
        for k, t in enumerate(act.tolist()):
            i = int(idx[k])
            bars.state(ix, op, i, t, by_tma=True)
            addresses, byteset = _copy_addresses(ix, op, m, view, t)
            _check_box_start(ix, op, m, origin[k])
            copy = TmaCopy("load", op, t, m, origin[k], addresses, byteset, (bars, i))
            if multicast is not False:
                # the same smem offset and the barrier at the same offset in every CTA of the cluster, or of the
                # issuing CTA's grid column (mode 0) or row (mode 1)
                grid = (len(ix.cluster), 1) if multicast is True else pipe.grid
                copy.targets = []
                for rank in multicast_ranks(ix.rank, grid, multicast):
                    cta = ix.cluster[rank]
                    peer = bars if cta is ix else peer_array(ix, op, bars, rank)
                    peer.state(cta, op, i, by_tma=True)
                    if cta is not ix:
                        check_cluster_visible(ix, op, peer, i, rank, "multicasts into")
                        note_remote_access(ix, op, f"multicasts into the shared memory of CTA rank {rank}")
                    copy.targets.append((cta, (peer, i)))
                copy.ctas = [cta for cta, _ in copy.targets]
            for cta in getattr(copy, "ctas", [ix]):
                cta.check_generic_writes(op, byteset, view.name, "write")
                cta.check_async_access(op, byteset, "write", view.name)
            ix.check_issue_order(op, byteset, view.name, t, "write")
            ix.issue(copy)

    def lower(self, op, lx):
        """``cp.async.bulk.tensor.Rd.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map, {c...}], [bar]``
        per executing thread: the coordinates innermost first (the map's mode order), the map's generic address.
        A multicast load's CTA mask: every rank (``true``), or from ``%cluster_ctarank`` r = i + cm·j of the
        pipeline's grid (cm, cn), its column ``((1 << cm) − 1) << cm·j`` (mode 0) or its row, bits i, i + cm, …,
        i + cm·(cn − 1) (mode 1); a mode spanning the whole cluster is the constant all-ranks mask."""
        tmap_v, dst_v, bars_v, index_v, *coords = op.operands
        pipe = lx.get(bars_v)
        bars = getattr(pipe, "full", pipe)  # a pipeline: its stage's full barrier
        lx.tma_copy("load", lx.get(tmap_v), lx.get(dst_v), [lx.get(c) for c in coords],
                    bars.address(lx, lx.get(index_v)), multicast=_multicast_mask(op, lx, pipe))


def _multicast_mask(op, lx, pipe):
    """The 16-bit CTA mask of a multicast ``tma.load`` (an int when known at compile time, else an i32 value), or
    None for a load into this CTA only."""
    mode = op.attrs.get("multicast", False)
    if mode is False:
        return None
    everyone = (1 << lx.cluster_size) - 1
    if mode is True:
        return everyone
    cm, cn = pipe.grid
    if (cm if mode == 0 else cn) == cm * cn:
        return everyone
    b = lx.b
    rank = lx.sreg("cluster.ctarank")
    if mode == 0:
        j = b.udiv(rank, lx.i32(cm))
        return b.shl(lx.i32((1 << cm) - 1), b.mul(j, lx.i32(cm)))
    row = sum(1 << (cm * jj) for jj in range(cn))
    return b.shl(lx.i32(row), b.urem(rank, lx.i32(cm)))


@register
class Store(OpDef):
    name = "tma.store"
    summary = "one asynchronous TMA copy of a smem box to global memory (out-of-bounds elements are not written)"

    def verify(self, op, v):
        if len(op.operands) < 2:
            v.error(op, f"expects a tensor map, a smem view and one coordinate per global mode, got "
                        f"{len(op.operands)} operands")
            return
        tmap, src, *coords = op.operands
        v.results(op, 0)
        if not _verify_map_and_view(op, v, tmap, src, "source"):
            return
        _verify_coords(op, v, tmap.type, coords)

    def interpret(self, op, ix):
        tmap_v, src_v, *coords = op.operands
        m, view = ix.get(tmap_v), ix.get(src_v)
        act = np.nonzero(ix.mask)[0]
        origin = _coords_of(ix, coords, act)
        for k, t in enumerate(act.tolist()):
            addresses, byteset = _copy_addresses(ix, op, m, view, t)
            _check_box_start(ix, op, m, origin[k])
            ix.check_generic_writes(op, byteset, view.name)
            ix.check_issue_order(op, byteset, view.name, t, "read")
            ix.check_async_access(op, byteset, "read", view.name)
            copy = TmaCopy("store", op, t, m, origin[k], addresses, byteset)
            bulk_groups(ix, t)["open"].append(copy)
            bulk_groups(ix, t)["unsettled"].append(copy)
            ix.read_async(op, byteset, t)
            ix.issue(copy)

    def lower(self, op, lx):
        """``cp.async.bulk.tensor.Rd.global.shared::cta.bulk_group [map, {c...}], [src]`` per executing thread."""
        tmap_v, src_v, *coords = op.operands
        lx.tma_copy("store", lx.get(tmap_v), lx.get(src_v), [lx.get(c) for c in coords])


@register
class StoreCommit(OpDef):
    name = "tma.store_commit"
    summary = "close this thread's uncommitted TMA stores into a bulk group"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        for t in np.nonzero(ix.mask)[0].tolist():
            g = bulk_groups(ix, t)
            g["groups"].append(g["open"])
            g["open"] = []

    def lower(self, op, lx):
        """``cp.async.bulk.commit_group``."""
        lx.inline_ptx("cp.async.bulk.commit_group", [])


class StoreWait(Wait):
    """Threads waiting until all but their ``pending`` most recent bulk groups have finished reading smem
    (``read``) or have completed."""

    def __init__(self, op, threads, pending, read):
        super().__init__(op, threads)
        self.pending, self.read = pending, read

    def _older(self, ix, t):
        g = bulk_groups(ix, t)
        while g["groups"] and all(c.done for c in g["groups"][0]):
            g["groups"].pop(0)
        groups = g["groups"]
        return groups[:max(len(groups) - self.pending, 0)]

    def _finished(self, c) -> bool:
        return c.state != "issued" if self.read else c.done

    def ready(self, ix) -> bool:
        return all(self._finished(c) for t in self.threads.tolist() for grp in self._older(ix, t) for c in grp)

    def helps(self, ix, aop) -> bool:
        if getattr(aop, "kind", None) != "store" or aop.thread not in set(self.threads.tolist()):
            return False
        return any(aop is c for grp in self._older(ix, aop.thread) for c in grp) and not self._finished(aop)

    def headline(self, ix, role: str | None = None) -> str:
        who = describe_waiters(self.threads, role)
        what = "finish reading shared memory" if self.read else "complete"
        return (f"{who} {waits_verb(who)} for all but its {self.pending} most recent TMA store groups to {what}, "
                "but no store in flight can")

    def hang(self, ix) -> str:
        return f"{describe_threads(self.threads)} wait for TMA stores that can never finish"


@register
class StoreWaitOp(OpDef):
    name = "tma.store_wait"
    summary = "block until all but the `pending` most recent bulk groups of this thread finished (reading smem)"
    required_attrs = ("pending", "read")
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        n = v.attr(op, "pending", int)
        if n is not None and n < 0:
            v.error(op, f"pending must be >= 0, not {n}")
        elif n is not None and n > MAX_PENDING_GROUPS:
            v.error(op, f"pending must be at most {MAX_PENDING_GROUPS} (cp.async.bulk.wait_group's immediate), "
                        f"not {n}")
        v.attr(op, "read", bool)

    def interpret(self, op, ix):
        act = np.nonzero(ix.mask)[0]
        yield StoreWait(op, act, op.attrs["pending"], op.attrs["read"])
        for t in act.tolist():
            g = bulk_groups(ix, t)
            for copy in g["unsettled"]:
                if copy.state != "issued":
                    ix.settle_async_read(copy.byteset, t)
            g["unsettled"] = [c for c in g["unsettled"] if c.state == "issued"]

    def lower(self, op, lx):
        """``cp.async.bulk.wait_group.read N`` (``read = true``) or ``cp.async.bulk.wait_group N``."""
        n, read = op.attrs.get("pending"), op.attrs.get("read")
        if (not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_PENDING_GROUPS
                or not isinstance(read, bool)):
            lx.error(f"needs pending = 0..63 (an immediate of cp.async.bulk.wait_group) and read = true|false, got "
                     f"pending = {attribute_text(n)}, read = {attribute_text(read)}")
        lx.inline_ptx("cp.async.bulk.wait_group.read" if read else "cp.async.bulk.wait_group", [n])


@register
class FenceProxyAsync(OpDef):
    name = "fence.proxy_async"
    summary = "order this thread's generic-proxy smem writes before later async-proxy (TMA) reads"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        ix.fence_generic_writes(np.nonzero(ix.mask)[0])

    def lower(self, op, lx):
        """``fence.proxy.async.shared::cta``."""
        lx.inline_ptx("fence.proxy.async.shared", [])


@register
class Prefetch(OpDef):
    name = "tma.prefetch"
    summary = "hint: bring the map's box at (c0, c1, ...) into L2 (no smem, no barrier, nothing to wait for)"
    num_results = 0

    def verify(self, op, v):
        """``tma.prefetch %x, %c0, %c1, ...``: a tmap and one i32 coordinate per global mode, as tma.load's.

        Example: ``tma.prefetch %a, %row, %k0`` on a ``tmap<bf16, 2>``. Post: no result, no smem operand."""
        if not op.operands:
            v.error(op, "expects a tensor map and one coordinate per global mode, got no operands")
            return
        tmap, *coords = op.operands
        if not isinstance(tmap.type, TensorMapType):
            v.error(op, f"the first operand must be a TMA map tmap<T, R>[box], not {tmap.type}")
            return
        _verify_coords(op, v, tmap.type, coords)

    def interpret(self, op, ix):
        """No effect on any memory: a prefetch only warms L2. What the hardware needs is still checked: the map
        must have been encodable (an empty tensor has none). Any coordinates are legal (out-of-bounds boxes too,
        as for a TMA copy)."""
        m = ix.get(op.operands[0])
        if ix.mask.any() and m.params is None:
            ix.fail(op, f"prefetches through the map of {m.name}, an empty {m.array.shape} tensor (no map can "
                        "describe it)")

    def lower(self, op, lx):
        """``cp.async.bulk.prefetch.tensor.Rd.L2.global.tile [map, {c...}]`` per executing thread, the coordinates
        innermost first (the map's mode order, as ``tma.load``)."""
        tmap_v, *coords = op.operands
        tmap = lx.get(tmap_v)
        ordered = [lx.get(coords[i]) for i in tmap.params.mode_order]
        lx.inline_ptx(lx.ptx_table.tma_prefetch(tmap.type.rank), [tmap.address, *ordered])


@register
class PrefetchMap(OpDef):
    name = "tma.prefetch_map"
    summary = "hint: fetch the map's descriptor itself, so that the first copy through it does not wait for it"
    num_operands = 1
    num_results = 0

    def verify(self, op, v):
        """``tma.prefetch_map %x``: one tmap operand. Example: ``tma.prefetch_map %a`` at a kernel's start, before
        the barriers are set up. Post: no result."""
        (tmap,) = op.operands
        if not isinstance(tmap.type, TensorMapType):
            v.error(op, f"the operand must be a TMA map tmap<T, R>[box], not {tmap.type}")

    def interpret(self, op, ix):
        """No effect on any memory; the map must have been encodable (an empty tensor has none)."""
        m = ix.get(op.operands[0])
        if ix.mask.any() and m.params is None:
            ix.fail(op, f"prefetches the map of {m.name}, an empty {m.array.shape} tensor (no map can describe it)")

    def lower(self, op, lx):
        """``prefetch.tensormap [map]`` per executing thread (the map's generic address, a grid constant)."""
        lx.inline_ptx("prefetch.tensormap", [lx.get(op.operands[0]).address])


# -- kernel-level rules ------------------------------------------------------------------------------------------------

@kernel_rule
def _tensor_map_params(kernel: Kernel, v):
    """Every tmap parameter's box is one TMA can write from a row-major global tensor in one copy."""
    for p in kernel.params:
        if not isinstance(p.type, TensorMapType):
            continue
        at = Site(p.loc, f"@{kernel.name}")
        if p.type.dtype.bits < 8:
            v.error(at, f"parameter %{p.name}: TMA copies whole bytes, not {p.type.dtype}")
            continue
        try:
            map_params(p.type)
        except (lc.LayoutError, ValueError) as e:
            v.error(at, f"parameter %{p.name}: {p.type} is not a box TMA writes in one copy: "
                        f"{getattr(e, 'condition', str(e))}")


def _regions(region):
    yield region
    for op in region.ops:
        for r in op.regions:
            yield from _regions(r)


def cluster_size(kernel: Kernel) -> int:
    """CTAs per cluster of ``kernel``: ``cluster = (2, 1, 1)`` → 2; 1 without a ``cluster`` attribute or with one
    the verifier refuses (reported at the attribute, ``ptxgen.ir.launch``)."""
    dims = static_triple(kernel.attrs.get("cluster"))
    return dims[0] * dims[1] * dims[2] if dims is not None else 1


def _expects_tx(op):
    """(barrier array or pipeline, index value) when ``op`` makes a barrier expect TMA bytes, else None:
    ``mbarrier.arrive_expect_tx %bars, %i`` and ``%s = pipeline.acquire %p, %k`` (on %p's full barrier %s)."""
    if op.name == "mbarrier.arrive_expect_tx" and len(op.operands) == 2:
        return tuple(op.operands)
    if op.name == "pipeline.acquire" and len(op.operands) == 2 and len(op.results) == 1:
        return op.operands[0], op.results[0]
    return None


def _bar_key(bars, index):
    c = const_int(index)
    return id(bars), (("const", c) if c is not None else id(index))


@kernel_rule
def _expect_tx_matches_loads(kernel: Kernel, v):
    """An arrive_expect_tx expects exactly the bytes of the tma.loads that follow it in its region and complete on
    the same barrier (same array, same index value), up to the next arrive_expect_tx on that barrier."""
    def close(open_, key):
        expect, loads = open_.pop(key)
        want = expect.attrs.get("bytes")
        if not isinstance(want, int):
            return
        bars, index = _expects_tx(expect)
        label = f"%{bars.name}{'.full' if isinstance(bars.type, PipelineType) else ''}[%{index.name}]"
        # a multicast load is issued by every CTA of the cluster (of its grid column / row) for its own part, and
        # each copy lands in every CTA of it
        sizes = [box_bytes(ld.operands[0].type) * (cluster if multicast_count(ld) < 0 else multicast_count(ld))
                 for ld in loads]
        if not loads:
            v.error(expect, f"expect_tx of {want} bytes on {label} but no tma.load in this region completes on "
                            "it (before the next expect_tx on it or the region's end)")
        elif sum(sizes) != want:
            how = (f"{len(sizes)} × {sizes[0]}" if len(set(sizes)) == 1
                   else " + ".join(str(s) for s in sizes))
            v.error(expect, f"expect_tx of {want} bytes on {label} but the tma.loads that complete on it deliver "
                            f"{sum(sizes)} bytes ({how})")

    cluster = cluster_size(kernel)
    for region in _regions(kernel.body):
        open_ = {}
        for op in region.ops:
            expects = _expects_tx(op)
            if expects is not None:
                key = _bar_key(*expects)
                if key in open_:
                    close(open_, key)
                open_[key] = (op, [])
            elif (op.name == "tma.load" and len(op.operands) >= 4 and isinstance(op.operands[0].type, TensorMapType)
                  and isinstance(op.operands[2].type, (BarrierType, PipelineType))):
                key = _bar_key(op.operands[2], op.operands[3])
                if key in open_:
                    open_[key][1].append(op)
                else:
                    bars, index = op.operands[2], op.operands[3]
                    v.error(op, f"tma.load completes on %{bars.name}[%{index.name}] but no "
                                f"mbarrier.arrive_expect_tx on %{bars.name}[%{index.name}] precedes it in this region: "
                                "the barrier's phase would not wait for its bytes")
        for key in list(open_):
            close(open_, key)
