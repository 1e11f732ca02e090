"""cpasync: per-thread asynchronous copies from global to shared memory (``cp.async``), without registers, and their
commit groups.

``cpasync.copy %gtile, %thread, %view {tv = T}`` means ``smem.store(view, thread, gmem.load(gtile, thread, tv), tv)``
(``{smem_tv = S}``: the shared side's own TV layout, value v of thread t going from the tile's element T(t, v) to the
view's element S(t, v)), but each contiguous run of a thread's values — consecutive along the gtensor's last
(contiguous) mode AND at consecutive shared addresses — moves as one ``cp.async`` of 4, 8 or 16 bytes that never
passes through registers; elements outside the tensor arrive as zeros (``src-size``). The copies only start at the
op: ``cpasync.commit`` closes the thread's copies issued since the last commit into a group, ``cpasync.wait {pending
= N}`` blocks until at most the N most recent groups of the thread are still in flight.

The rule the verifier cannot prove: shared memory written by copies is read only after a ``cpasync.wait`` that
covers them (by the issuing thread) AND a CTA barrier (``barrier.cta``, for every other thread). The interpreter
performs each copy at the op (a valid execution of that order), so it cannot catch a missing wait either.
"""
from __future__ import annotations

import numpy as np

import layoutc as lc
from layoutc.hopper import split_smem_layout, swizzle_chunk_bytes, vector_groups

from ..layout_table import layout_values, tv_index
from ..types import I32, FragmentType, GlobalViewType, TensorType
from . import OpDef, element_bytes, numpy_dtype, register, to_bytes, tv_attr, verify_tv
from .gmem import GLoad
from .smem import _SmemAccess

COPY_BYTES = (4, 8, 16)     # cp.async's cp-size; 16 alone may bypass L1 (.cg)
L2_PREFETCH = (64, 128, 256)  # cp.async's .L2::64B/128B/256B prefetch sizes
MAX_PENDING_GROUPS = 7       # what the CUDA runtime exposes of cp.async.wait_group's immediate (PTX takes any .u32;
                             # more than 8 groups in flight per thread buys nothing on sm_90: the LSU queue is shorter)


def copy_runs(tv, smem_tv, tile_shape, smem_layout, esize: int, smem_aligned: bool = True) -> tuple:
    """``(k, groups)``: how one thread's values of a ``cpasync.copy`` group into copies. ``groups`` partitions the
    value indices into runs of k (a power of two) that, in EVERY thread, lie at k consecutive elements of the tile's
    last mode starting at a multiple of k (relative to the tile's origin) AND at k consecutive shared-memory
    elements (the view's layout before its swizzle) starting at a multiple of k, inside one block the swizzle moves
    whole; k·esize ≤ 16. ``k = 1`` when no such grouping exists. ``smem_aligned`` False drops "starting at a multiple
    of k" on the shared side (``{vector_check = true}`` tests the shared address at run time: a view moved by a
    run-time offset that the program keeps aligned with the global rows).

    Example: a (8, 64) bf16 tile, ``tv = ((8,4),16):((1,128),8)`` (thread (r, q) holds columns 16·q … 16·q + 15 of
    row r): into a row-major ``(8,64):(64,1)`` view → (8, ((0, …, 7), (8, …, 15))), two 16-byte copies per thread;
    into ``(8,64):(66,1)`` (rows padded by 2 elements: a row starts 4 bytes past a 16-byte boundary) → 2 (4-byte
    copies); into the column-major ``(8,64):(1,8)`` → 1 (no two values adjacent in both). Post: ``k · esize``
    divides 16 and every group has k values."""
    modes = tile_shape if isinstance(tile_shape, tuple) else (tile_shape,)
    sizes = [lc.product(m) for m in modes]
    index = tv_index(tv)
    limit = max(1, 16 // esize)
    # the tile's element offset along its last mode, rows a limit-rounded length apart (a run never crosses a row)
    row = -(-sizes[-1] // limit) * limit
    coords, prefix = [], 1
    for s in sizes:
        coords.append((index // prefix) % s)
        prefix *= s
    offset, scale = coords[-1].copy(), row
    for m in range(len(sizes) - 1):
        offset = offset + scale * coords[m]
        scale *= sizes[m]
    k, groups = vector_groups(offset.tolist(), limit)
    sw, _offset, inner = split_smem_layout(smem_layout)
    shared = layout_values(inner)[tv_index(smem_tv)]
    chunk = max(1, min(16, swizzle_chunk_bytes(sw)) // esize)
    while k > 1:
        if k <= chunk:
            runs = tuple(tuple(g[i:i + k]) for g in groups for i in range(0, len(g), k))
            if all(_consecutive(shared[:, list(r)], k, smem_aligned) for r in runs):
                return k, runs
        k //= 2
    return 1, tuple((v,) for v in range(index.shape[1]))


def _consecutive(block: np.ndarray, k: int, aligned: bool) -> bool:
    """Whether every row of ``block`` (threads × k offsets) is first, first + 1, … (with ``aligned``: first a
    multiple of k)."""
    first = block[:, :1]
    return bool(np.all(block == first + np.arange(k)[None, :]) and (not aligned or np.all(first % k == 0)))


@register
class Copy(OpDef):
    name = "cpasync.copy"
    summary = "each thread copies its values of a global tile into a smem view asynchronously (cp.async, zero fill)"
    required_attrs = ("tv",)
    optional_attrs = ("smem_tv", "vector_check", "l2_prefetch")
    num_operands = 3
    num_results = 0

    def verify(self, op, v):
        gtile, thread, view = op.operands
        if not isinstance(gtile.type, GlobalViewType):
            v.error(op, f"the first operand must be a gview, not {gtile.type}")
            return
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        if not isinstance(view.type, TensorType) or view.type.space != "smem":
            v.error(op, f"the third operand must be a smem view, not {view.type}")
            return
        dtype = gtile.type.dtype
        if view.type.dtype != dtype:
            v.error(op, f"the view's element type {view.type.dtype} differs from the tile's {dtype}")
            return
        tv = tv_attr(op, v)
        smem_tv = tv_attr(op, v, "smem_tv") if "smem_tv" in op.attrs else tv
        if tv is None or smem_tv is None:
            return
        values = (lc.size(tv[1]),) if lc.rank(tv) == 2 else (1,)
        if not verify_tv(op, v, tv, values, gtile.type.size):
            return
        if not verify_tv(op, v, smem_tv, values, view.type.size, what="view"):
            return
        if lc.size(smem_tv[0]) != lc.size(tv[0]):
            v.error(op, f"smem_tv {lc.to_str(smem_tv)} has {lc.size(smem_tv[0])} threads but tv {lc.to_str(tv)} has "
                        f"{lc.size(tv[0])}: one thread mode for both sides")
            return
        if "vector_check" in op.attrs:
            v.attr(op, "vector_check", bool)
        if "l2_prefetch" in op.attrs:
            size = v.attr(op, "l2_prefetch", int)
            if size is not None and size not in L2_PREFETCH:
                v.error(op, f"l2_prefetch must be 64, 128 or 256 (bytes: cp.async's .L2::64B/128B/256B), not {size}")
        esize = element_bytes(dtype)
        checked = op.attrs.get("vector_check") is True
        k, _groups = copy_runs(tv, smem_tv, gtile.type.shape, view.type.layout, esize, smem_aligned=not checked)
        if k * esize < COPY_BYTES[0]:
            v.error(op, f"tv {lc.to_str(tv)} (smem_tv {lc.to_str(smem_tv)}) moves runs of {k} {dtype} element"
                        f"{'s' if k > 1 else ''} ({k * esize} bytes) contiguous in both the tile's last mode and the "
                        f"view{'' if checked else ' (aligned)'}; cp.async copies 4, 8 or 16 bytes: give each thread aligned runs of at least "
                        f"{COPY_BYTES[0] // esize} elements, or use gmem.load and smem.store")

    def interpret(self, op, ix):
        """The copy at the op: every active thread's values read as gmem.load reads them (0 outside the tensor) and
        written as smem.store writes them."""
        gtile_v, thread, view_v = op.operands
        tv = op.attrs["tv"]
        smem_tv = op.attrs.get("smem_tv", tv)
        tile = ix.get(gtile_v)
        glob, inside = GLoad._addresses(ix, op, tile, thread, tv)
        safe = np.where(inside[..., None], glob, 0)
        dtype = gtile_v.type.dtype
        values = tile.array[tuple(safe[..., k] for k in range(safe.shape[-1]))].astype(numpy_dtype(dtype))
        values = np.where(inside, values, 0).astype(numpy_dtype(dtype))
        view = ix.get(view_v)
        act, addr = _SmemAccess._addresses(ix, op, view, thread, smem_tv)
        ix.smem_write(op, view.name, addr, to_bytes(values[act], view.dtype), act)

    def lower(self, op, lx):
        """``cp.async.cg.shared.global [dst], [src], 16, src-size`` per 16-byte run (``.ca`` with 4 or 8 bytes;
        ``{l2_prefetch = 128}`` adds ``.L2::128B``), ``src-size`` the bytes of the run inside the tensor (the rest
        zero-filled; 0 where its row is outside). Runs come from ``copy_runs`` limited to what the specialization
        proves aligned; ``{vector_check = true}``: the widest runs anyway, each taken only where both addresses are
        aligned at run time and the run does not start before column 0, else element by element. An element path
        copies 4- and 8-byte elements by cp.async and narrower ones by ``ld.global`` + ``st.shared`` (cp.async's
        minimum is 4 bytes). See ``ptxgen.lower.cpasync``."""
        gtile, thread, view = op.operands
        tv = op.attrs["tv"]
        lx.cpasync_copy(lx.get(gtile), lx.get(thread), lx.get(view), tv, op.attrs.get("smem_tv", tv),
                        gtile.type.dtype, vector_check=op.attrs.get("vector_check") is True,
                        l2_prefetch=op.attrs.get("l2_prefetch"))


@register
class Commit(OpDef):
    name = "cpasync.commit"
    summary = "close this thread's cp.async copies issued since the last commit into a group"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        """Nothing: every copy was performed at its op."""

    def lower(self, op, lx):
        """``cp.async.commit_group``."""
        lx.inline_ptx("cp.async.commit_group", [])


@register
class Wait(OpDef):
    name = "cpasync.wait"
    summary = "block until at most the `pending` most recent cp.async groups of this thread are in flight"
    required_attrs = ("pending",)
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        n = v.attr(op, "pending", int)
        if n is not None and not 0 <= n <= MAX_PENDING_GROUPS:
            v.error(op, f"pending must be 0..{MAX_PENDING_GROUPS} (cp.async.wait_group's immediate: groups still in "
                        f"flight), not {n}")

    def interpret(self, op, ix):
        """Nothing: the copies were performed at their ops (their writes are as ordered as smem.store's)."""

    def lower(self, op, lx):
        """``cp.async.wait_group N`` (``cp.async.wait_all`` would also commit: this op never commits)."""
        lx.inline_ptx("cp.async.wait_group", [op.attrs["pending"]])
