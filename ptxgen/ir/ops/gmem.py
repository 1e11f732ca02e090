"""gtensor / gmem: global tensors, static-shape tiles at runtime origins, TV-layout loads and stores, and flags that
order the global writes of one CTA before the reads of another (gmem.signal / gmem.wait)."""
from __future__ import annotations

import numpy as np

import layoutc as lc

from ..hostexpr import Word
from ..suggest import did_you_mean
from ..text import attribute_text
from ..types import F32, I32, I64, FragmentType, GlobalTensorType, GlobalViewType
from . import (
    TABLE_LIMIT,
    OpDef,
    Wait,
    convert,
    describe_threads,
    describe_waiters,
    numpy_dtype,
    register,
    tile_coordinates,
    tv_attr,
    tv_rows,
    tv_table,
    value_problem,
    verify_tv,
    waits_verb,
)


@register
class GDim(OpDef):
    name = "gtensor.dim"
    summary = "the runtime extent of a mode of a global tensor"
    required_attrs = ("mode",)
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        if not isinstance(x.type, GlobalTensorType):
            v.error(op, f"operand must be a gtensor, not {x.type}")
            return
        mode = v.attr(op, "mode", int)
        if isinstance(mode, int) and not 0 <= mode < x.type.rank:
            v.error(op, f"mode {mode} is out of range for rank {x.type.rank}")
        if t != I32:
            v.error(op, f"result type must be i32, not {t}")

    def result_types(self, operand_types, attrs):
        return [I32]

    def interpret(self, op, ix):
        arr = ix.get(op.operands[0])
        ix.set(op.results[0], np.full(ix.nthreads, arr.shape[op.attrs["mode"]], dtype=np.int32))

    def lower(self, op, lx):
        tensor = lx.get(op.operands[0])
        mode = op.attrs["mode"]
        multiple = tensor.spec.extent_multiple if mode == tensor.spec.contiguous else 1
        lx.set(op.results[0], tensor.extents[mode], multiple=multiple)


class TileView:
    """Interpreter value of a gview: the global array, the per-thread origin coordinates and the tile shape."""

    def __init__(self, array, origin, shape):
        self.array = array
        self.origin = origin  # (threads, rank) int64
        self.shape = shape


@register
class GTile(OpDef):
    name = "gmem.tile"
    summary = "a static-shape window of a global tensor at a runtime origin"
    required_attrs = ("shape",)

    def verify(self, op, v):
        if not op.operands:
            v.error(op, "expects a gtensor and one origin coordinate per mode")
            return
        x, *coords = op.operands
        (t,) = v.results(op, 1)
        if not isinstance(x.type, GlobalTensorType):
            v.error(op, f"the first operand must be a gtensor, not {x.type}")
            return
        if len(coords) != x.type.rank:
            v.error(op, f"a rank-{x.type.rank} gtensor needs {x.type.rank} origin coordinates, got {len(coords)}")
        for c in coords:
            if c.type != I32:
                v.error(op, f"origin coordinates must be i32, not {c.type}")
        shape = v.shape_attr(op, "shape")
        if shape is None:
            return
        if lc.rank(shape) != x.type.rank:
            v.error(op, f"tile shape {lc.to_str(shape)} has rank {lc.rank(shape)} but the gtensor has rank "
                        f"{x.type.rank}")
        if t != GlobalViewType(x.type.dtype, shape):
            v.error(op, f"result type must be {GlobalViewType(x.type.dtype, shape)}, not {t}")

    def result_types(self, operand_types, attrs):
        return [GlobalViewType(operand_types[0].dtype, attrs["shape"])]

    def interpret(self, op, ix):
        x, *coords = op.operands
        origin = np.stack([ix.get(c).astype(np.int64) for c in coords], axis=1)
        ix.set(op.results[0], TileView(ix.get(x), origin, op.attrs["shape"]))

    def lower(self, op, lx):
        """No code: a view is the tensor, its origin values (with their known multiples) and the tile shape."""
        x, *coords = op.operands
        lx.set(op.results[0], lx.GView(lx.get(x), [lx.get(c) for c in coords], [lx.multiple(c) for c in coords],
                                       op.attrs["shape"]))




# gmem.load/store's ``cache`` hints: how the accesses of a tile read once, or re-read by every CTA, may treat the
# caches (PTX's cache operators and eviction priorities; spec/tile-ir.md §4.4). ``normal`` is the unqualified access.
# Each maps to one PTX qualifier (the lowering's table of cache qualifiers). A performance hint only: the values
# read and written are the same, so the interpreter ignores it.
CACHE_HINTS = ("normal", "evict_first", "evict_last", "no_allocate", "streaming", "l2_evict_first", "l2_evict_last")


class _GmemAccess(OpDef):
    optional_attrs = ("cache", "vector_check", "unchecked")

    def _check_cache(self, op, v):
        """``cache``, when present, is one of CACHE_HINTS: ``gmem.load: attribute 'cache' must be one of normal,
        evict_first, …, not evict_frist (did you mean 'evict_first'?)``."""
        if "cache" not in op.attrs:
            return
        value = op.attrs["cache"]
        if not isinstance(value, (Word, str)) or str(value) not in CACHE_HINTS:
            hint = did_you_mean(str(value), CACHE_HINTS) if isinstance(value, (Word, str)) else ""
            v.error(op, f"attribute 'cache' must be one of {', '.join(CACHE_HINTS)}, not {attribute_text(value)}"
                        f"{hint}")

    @staticmethod
    def cache(op) -> str:
        """The op's cache hint (``normal`` when absent)."""
        return str(op.attrs.get("cache", "normal"))

    def _verify_vector_check(self, op, v):
        """``{vector_check = true}`` (optional, a bool): vectors whose alignment is checked at run time;
        ``{unchecked = true}`` (optional, a bool): the program guarantees every element inside the tensor."""
        if "vector_check" in op.attrs:
            v.attr(op, "vector_check", bool)
        if "unchecked" in op.attrs:
            v.attr(op, "unchecked", bool)

    @staticmethod
    def unchecked(op) -> bool:
        """``{unchecked = true}``: no bounds compared in the lowering."""
        return op.attrs.get("unchecked") is True

    def _check_inside(self, op, ix, glob, inside, shape):
        """``{unchecked = true}`` promises that every active thread's elements lie inside the tensor; the
        interpreter holds the program to it: ``gmem.load {unchecked = true}: thread 5, value 3 is at (16, 0),
        outside the tensor's (16, 512)``."""
        if not self.unchecked(op):
            return
        bad = ~inside & ix.mask[:, None]
        if bad.any():
            t, val = (int(x) for x in np.argwhere(bad)[0])
            at = ", ".join(str(int(c)) for c in glob[t, val])
            ix.fail(op, f"{{unchecked = true}}: thread {t}, value {val} is at ({at}), outside the tensor's "
                        f"({', '.join(str(d) for d in shape)})")

    def _check_view_and_thread(self, op, v, view, thread):
        if not isinstance(view.type, GlobalViewType):
            v.error(op, f"the first operand must be a gview, not {view.type}")
            return False
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        return True

    @staticmethod
    def _addresses(ix, op, view: TileView, thread, tv):
        """Per (thread, value): global coordinates and whether they are in bounds."""
        table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
        tile_idx = tv_rows(ix, op, thread, table)  # (threads, values)
        if lc.product(view.shape) <= TABLE_LIMIT:
            # np.take: ~8x numpy's fancy indexing of the (size, rank) table by a 2-D index array
            coords = np.take(ix.cached(("coords", view.shape), lambda: tile_coordinates(view.shape)), tile_idx, axis=0)
        else:
            coords = tile_coordinates(view.shape, tile_idx)
        glob = view.origin[:, None, :] + coords  # (threads, values, rank)
        # one mode at a time: numpy's reduction over the short last axis costs ~6x these elementwise ands
        inside = np.ones(glob.shape[:-1], dtype=bool)
        for mode, extent in enumerate(view.array.shape):
            at = glob[..., mode]
            inside &= (at >= 0) & (at < extent)
        return glob, inside


@register
class GLoad(_GmemAccess):
    name = "gmem.load"
    summary = "each thread reads its values of a global tile (out-of-bounds values read `other`)"
    required_attrs = ("tv",)
    optional_attrs = ("other", "cache", "vector_check", "unchecked")
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        view, thread = op.operands
        t = op.results[0].type
        if not self._check_view_and_thread(op, v, view, thread):
            return
        if not isinstance(t, FragmentType):
            v.error(op, f"result must be a frag, not {t}")
            return
        if t.dtype != view.type.dtype:
            v.error(op, f"fragment element type {t.dtype} differs from the tile's {view.type.dtype}")
        tv = tv_attr(op, v)
        if tv is not None:
            verify_tv(op, v, tv, t.shape, view.type.size)
        if "other" in op.attrs:
            other = v.attr(op, "other", (int, float))
            problem = value_problem(other, t.dtype) if other is not None else None
            if problem:
                v.error(op, f"other: {problem}")
        self._check_cache(op, v)
        self._verify_vector_check(op, v)

    def interpret(self, op, ix):
        view, thread = op.operands
        tile = ix.get(view)
        glob, inside = self._addresses(ix, op, tile, thread, op.attrs["tv"])
        self._check_inside(op, ix, glob, inside, tile.array.shape)
        safe = np.where(inside[..., None], glob, 0)
        dtype = op.results[0].type.dtype
        # the host array holds host_dtype (ml_dtypes.bfloat16, ...); the interpreter computes in numpy_dtype
        values = tile.array[tuple(safe[..., k] for k in range(safe.shape[-1]))].astype(numpy_dtype(dtype))
        other = convert(np.array(op.attrs.get("other", 0)), F32, dtype)
        ix.set(op.results[0], np.where(inside, values, other).astype(numpy_dtype(dtype)))

    def lower(self, op, lx):
        """Per the access plan (plans.plan_access from tv and the tile shape): vectors of up to 16 bytes along the
        specialization's contiguous mode, one bounds predicate per vector (exact when the extent is a multiple of
        the width, else a per-element edge path), scalar predicated loads otherwise; out of bounds reads `other`.
        ``{vector_check = true}``: where the specialization cannot prove a vector aligned (row pitches not multiples
        of 16 bytes, origins of unknown divisibility), vectors of up to 16 bytes anyway, each taken only where its
        address is aligned at run time and it lies inside the tensor, else element by element (the interpreter's
        semantics are the same with or without it). ``{unchecked = true}``: plain (vector) loads, no bound compared
        and no branch — the program guarantees every element inside (the interpreter fails where one is not)."""
        view, thread = op.operands
        values = lx.gmem_load(lx.get(view), lx.get(thread), op.attrs["tv"], op.results[0].type.dtype,
                              other=op.attrs.get("other", 0), cache=self.cache(op),
                              vector_check=op.attrs.get("vector_check") is True, unchecked=self.unchecked(op))
        lx.set(op.results[0], values)


@register
class GStore(_GmemAccess):
    name = "gmem.store"
    summary = "each thread writes its values of a global tile (out-of-bounds values are skipped)"
    required_attrs = ("tv",)
    num_operands = 3
    num_results = 0

    def verify(self, op, v):
        view, thread, frag = op.operands
        if not self._check_view_and_thread(op, v, view, thread):
            return
        if not isinstance(frag.type, FragmentType):
            v.error(op, f"the stored value must be a frag, not {frag.type}")
            return
        if frag.type.dtype != view.type.dtype:
            v.error(op, f"fragment element type {frag.type.dtype} differs from the tile's {view.type.dtype}")
        tv = tv_attr(op, v)
        if tv is not None:
            verify_tv(op, v, tv, frag.type.shape, view.type.size)
        self._check_cache(op, v)
        self._verify_vector_check(op, v)

    def interpret(self, op, ix):
        view, thread, frag = op.operands
        tile = ix.get(view)
        glob, inside = self._addresses(ix, op, tile, thread, op.attrs["tv"])
        self._check_inside(op, ix, glob, inside, tile.array.shape)
        write = inside & ix.mask[:, None]
        values = ix.get(frag)
        idx = tuple(glob[..., k][write] for k in range(glob.shape[-1]))
        tile.array[idx] = values[write]

    def lower(self, op, lx):
        """The inverse of gmem.load's lowering: vector stores where the plan allows, predicated; out of bounds skipped.
        ``{vector_check = true}`` and ``{unchecked = true}`` as in gmem.load."""
        view, thread, frag = op.operands
        lx.gmem_store(lx.get(view), lx.get(thread), op.attrs["tv"], frag.type.dtype, lx.get(frag),
                      cache=self.cache(op), vector_check=op.attrs.get("vector_check") is True,
                      unchecked=self.unchecked(op))


class _Flag(OpDef):
    """``op %flags, %index, %value``: ``flags`` a ``gtensor<i32, 1>``, ``index`` and ``value`` i32, per thread."""

    verb = ""
    num_operands = 3
    num_results = 0

    def verify(self, op, v):
        flags, index, value = op.operands
        if flags.type != GlobalTensorType(I32, 1):
            v.error(op, f"the flags must be a gtensor<i32, 1>, not {flags.type}")
        for what, x in (("index", index), (self.verb, value)):
            if x.type != I32:
                v.error(op, f"the {what} must be i32, not {x.type}")

    @staticmethod
    def _elements(op, ix):
        """(the flag array, the active threads, their flag indices, their values); an index outside the array fails."""
        flags = ix.get(op.operands[0])
        act = np.nonzero(ix.mask)[0]
        index = ix.get(op.operands[1]).astype(np.int64)[act]
        value = ix.get(op.operands[2]).astype(np.int64)[act]
        bad = (index < 0) | (index >= flags.shape[0])
        if bad.any():
            k = int(np.nonzero(bad)[0][0])
            ix.fail(op, f"thread {int(act[k])}: flag index {int(index[k])} is outside the {flags.shape[0]} flags")
        return flags, act, index, value

    @staticmethod
    def _address(op, lx):
        """The i64 global address of each thread's flag (``flags + index``)."""
        tensor, index = lx.get(op.operands[0]), lx.get(op.operands[1])
        i64 = lx.llvm_type(I64)
        offset = lx.b.mul(lx.b.sext(index, i64), tensor.stride(0))
        return lx.b.ptrtoint(lx.b.gep(tensor.ptr, [offset], source_etype=lx.llvm_type(I32)), i64)


@register
class Signal(_Flag):
    name = "gmem.signal"
    summary = "add to a flag in global memory after every earlier memory access of the thread (release, gpu scope)"
    verb = "amount"

    def interpret(self, op, ix):
        flags, _act, index, value = self._elements(op, ix)
        np.add.at(flags, index, value.astype(flags.dtype))

    def lower(self, op, lx):
        """``red.release.gpu.global.add.s32 [flags + index], value``: the thread's earlier global writes are visible
        (gpu scope) to a thread whose acquiring read sees the addition."""
        lx.inline_ptx("red.release.gpu.add", [self._address(op, lx), lx.get(op.operands[2])])


class FlagWait(Wait):
    """Threads waiting for their flags to reach their targets."""

    def __init__(self, op, threads, flags, index, target):
        super().__init__(op, threads)
        self.flags, self.index, self.target = flags, index, target

    def ready(self, ix) -> bool:
        return bool(np.all(self.flags[self.index] >= self.target))

    def headline(self, ix, role: str | None = None) -> str:
        short = self.flags[self.index] < self.target
        k = int(np.nonzero(short)[0][0])
        who = describe_waiters(self.threads, role)
        return (f"{who} {waits_verb(who)} for flag {int(self.index[k])} to reach {int(self.target[k])}, but it holds "
                f"{int(self.flags[self.index[k]])} and no thread still running adds to it")

    def hang(self, ix) -> str:
        short = self.flags[self.index] < self.target
        k = int(np.nonzero(short)[0][0])
        return (f"{describe_threads(self.threads)} wait for flag {int(self.index[k])} to reach "
                f"{int(self.target[k])}, but it holds {int(self.flags[self.index[k]])} and no thread still running "
                "adds to it (the interpreter runs clusters one after another in grid order, so a flag may be "
                "signalled only by an earlier cluster or by this one)")


@register
class WaitOp(_Flag):
    name = "gmem.wait"
    summary = ("block until a flag in global memory holds at least a value; later memory accesses of the thread "
               "are ordered after it (acquire, gpu scope)")
    verb = "target"

    def interpret(self, op, ix):
        flags, act, index, target = self._elements(op, ix)
        yield FlagWait(op, act, flags, index, target)

    def lower(self, op, lx):
        """A loop around ``ld.acquire.gpu.global.b32`` until the flag (signed) is at least the target."""
        b = lx.b
        address, target = self._address(op, lx), lx.get(op.operands[2])
        probe, done = lx.block("flag.wait"), lx.block("flag.ready")
        b.branch(probe)
        b.position_at_end(probe)
        value = lx.inline_ptx("ld.acquire.gpu", [address])
        b.cbranch(b.icmp_signed(">=", value, target), done, probe)
        b.position_at_end(done)
