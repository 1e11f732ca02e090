"""Lowering of cpasync.copy: each run of a thread's values that is contiguous in both the global tile and the shared
view (``ptxgen.ir.ops.cpasync.copy_runs``) becomes one ``cp.async`` of 4, 8 or 16 bytes, no register holding the data.

A run's ``src-size`` is the bytes of it inside the tensor: ``min(extent − column, k)·esize`` where its first element
is inside, 0 (all zeros written, the tensor's base given as the address so nothing outside is touched) where it is
not. A run the specialization cannot prove aligned (``{vector_check = true}``) is taken where both addresses are
aligned at run time and it does not start before the row's column 0 (src-size cannot zero leading bytes), else value
by value: 4-, 8- and 16-byte elements by cp.async, narrower ones by a guarded ``ld.global`` and an ``st.shared``
(cp.async moves at least 4 bytes) — synchronous, so ordered before the CTA barrier the copies' rule asks anyway.

Example: a (64, 64) bf16 tile of a row-major tensor whose pitch is a multiple of 16 bytes, each thread 2 runs of 8
columns into a row-major smem tile: two ``cp.async.cg.shared.global [dst], [src], 16, src-size`` per thread.
"""
from __future__ import annotations

from layoutc.hopper import split_smem_layout

from ..ir.ops import element_bytes
from ..ir.ops.cpasync import COPY_BYTES, copy_runs
from ..ir.types import ScalarType
from . import ptx_table
from .gmem import GmemAddresses, _guarded_load
from .shared import SmemRef, lowbit, smem_addresses, smem_pointer
from .values import I64, GView, pow2_divisor


def copy(lx, view: GView, thread, ref: SmemRef, tv, smem_tv, dtype: ScalarType, vector_check: bool = False,
         l2_prefetch: int | None = None) -> None:
    """cpasync.copy (see the module docstring). Post: every value of ``tv`` is either in a cp.async issued here or
    already stored (the element path of types narrower than 4 bytes); elements outside the tensor arrive as 0."""
    from_gmem = GmemAddresses(lx, view, thread, tv, dtype)
    tensor = view.tensor
    spec = tensor.spec
    esize = element_bytes(dtype)
    last = tensor.rank - 1
    k, groups = copy_runs(tv, smem_tv, view.shape, ref.layout, esize, smem_aligned=not vector_check)
    _plan, shared_address = smem_addresses(lx, ref, thread, smem_tv)
    offset = split_smem_layout(ref.layout)[1]
    smem_align = min(ref.align, lowbit(offset * esize)) if offset else ref.align
    proven = 1
    if spec.contiguous == last and spec.aligned:
        proven = min(16 // esize, pow2_divisor(view.multiples[last]), max(1, smem_align // esize))
    if spec.contiguous != last:
        k = 1       # the runs follow the last mode: a tensor contiguous along another mode copies element by element
    # a run's shared start is aligned only as far as its view's base where copy_runs did not prove it (vector_check)
    checked = vector_check and (k > proven or k > 1)
    if not checked:
        k = min(k, proven)
    if k * esize < COPY_BYTES[0]:
        for v in (v for g in groups for v in g):
            _element(lx, from_gmem, shared_address, v, dtype, esize)
        return
    runs = [g[i:i + k] for g in groups for i in range(0, len(g), k)]
    for run in runs:
        _run(lx, from_gmem, shared_address, run, k, dtype, esize, checked, l2_prefetch)


def _run(lx, at: GmemAddresses, shared_address, run, k: int, dtype, esize: int, checked: bool, l2_prefetch) -> None:
    """One run of ``k`` values: a cp.async of k·esize bytes (zero fill past the tensor's edge), or, for a ``checked``
    run whose addresses turn out misaligned or that starts before column 0, its values one by one."""
    b = lx.b
    tensor = at.view.tensor
    last = tensor.rank - 1
    cs = at.coords(run[0])
    src = at.pointer(run[0])
    dst = shared_address(run[0])
    nbytes = k * esize
    if not checked:
        _issue(lx, at, cs, src, dst, k, esize, l2_prefetch)
        return
    low = lx.i64(nbytes - 1)
    src_ok = b.icmp_unsigned("==", b.and_(b.ptrtoint(src, I64), low), lx.i64(0))
    dst_ok = b.icmp_unsigned("==", b.and_(dst, lx.i32(nbytes - 1)), lx.i32(0))
    # a run straddling column 0 would need its LEADING bytes zeroed, which src-size cannot say
    no_straddle = b.or_(b.icmp_signed(">=", cs[last], lx.i32(0)), b.icmp_signed("<=", b.add(cs[last], lx.i32(k)),
                                                                                lx.i32(0)))
    fast, slow, done = lx.block("cp.async"), lx.block("cp.async.edge"), lx.block("cp.async.done")
    b.cbranch(b.and_(b.and_(src_ok, dst_ok), no_straddle), fast, slow)
    b.position_at_end(fast)
    _issue(lx, at, cs, src, dst, k, esize, l2_prefetch)
    b.branch(done)
    b.position_at_end(slow)
    for v in run:
        _element(lx, at, shared_address, v, dtype, esize)
    b.branch(done)
    b.position_at_end(done)


def _issue(lx, at: GmemAddresses, cs, src, dst, k: int, esize: int, l2_prefetch) -> None:
    """``cp.async`` of k elements from ``src`` (coordinates ``cs``) to ``dst``, src-size = the elements inside the
    tensor from the first on (its other modes inside, the first element inside the last mode), else 0."""
    b = lx.b
    tensor = at.view.tensor
    last = tensor.rank - 1
    others = list(range(last))
    inside = at.inside(cs, modes=[last])
    if others:
        inside = b.and_(inside, at.inside(cs, modes=others))
    if k == 1:
        count = lx.i32(1)
    else:
        left = b.sub(tensor.extents[last], cs[last])
        count = b.select(b.icmp_signed("<", left, lx.i32(k)), left, lx.i32(k))
    src_bytes = b.select(inside, b.mul(count, lx.i32(esize)) if esize != 1 else count, lx.i32(0))
    address = b.select(inside, b.ptrtoint(src, I64), b.ptrtoint(tensor.ptr, I64))
    ptx_table.emit(lx, ptx_table.cp_async(k * esize, l2_prefetch), [dst, address, src_bytes])


def _element(lx, at: GmemAddresses, shared_address, v: int, dtype, esize: int) -> None:
    """Value ``v`` alone: a cp.async of its ``esize`` bytes (4, 8, 16), else a guarded load (0 outside) and a shared
    store."""
    if esize in COPY_BYTES:
        _issue(lx, at, at.coords(v), at.pointer(v), shared_address(v), 1, esize, None)
        return
    cs = at.coords(v)
    value = _guarded_load(lx, at.inside(cs), at.pointer(v), at.mem_t, esize, lx.const(dtype, 0), at.from_mem)
    lx.b.store(at.to_mem(value), smem_pointer(lx, shared_address(v)), align=esize)
