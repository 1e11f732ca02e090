"""Lowering of shared memory, mbarriers and TMA: the values the ops bind and the emitters their ``lower`` calls.

- The CTA's shared memory is ONE dynamic window: ``@__smem = external addrspace(3) global [0 x i8], align 1024``
  (PTX ``.extern .shared .align 1024 .b8 __smem[]``). ``smem_window(lx)`` is its 32-bit shared address, rounded up
  to 1024 at run time (LLVM folds the rounding away because the symbol is declared 1024-aligned; the launcher
  still requests 1 KiB of slack where the budget allows, so the rounding could never step outside the request).
  The static plan (``ptxgen.ir.ops.smem_plan``) places allocations from the interpreter's ``SMEM_BASE`` (1024);
  the lowering never assumes that value: an allocation planned at ``a`` lives at ``window + (a - SMEM_BASE)``.
  Swizzles act on absolute shared addresses, and the window is 1024-aligned, so ``window + x`` and the
  interpreter's ``SMEM_BASE + x`` have the same low 10 bits: every Swizzle of a Hopper smem layout (SW32/64/128
  read bits < 10) permutes both identically.
- ``SmemRef``: a smem view: its runtime base (i32 shared address of the layout's origin), layout, element type and
  the largest power of two known to divide the base. ``BarrierRef``: an mbarrier array (i32 address of barrier 0;
  barrier i is 8·i bytes further). ``TmapArg``: a ``tmap`` parameter: the i64 generic address of the by-value
  128-byte ``.param`` (``cvta.param``), its type and the static ``TmaParams`` of its box (mode order, box dims).
- ``smem_access``: smem.load/store through the physical byte addresses, from ``plans.plan_smem_access``.
"""
from __future__ import annotations

import layoutc as lc
from layoutc.hopper import split_smem_layout, swizzle_chunk_bytes
from llvmlite import ir

from . import ptx_table
from .plans import plan_smem_access
from .values import memory_type

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
SPTR = ir.PointerType(addrspace=3)
WINDOW_ALIGN = 1024
SMEM_SYMBOL = "__smem"


class SmemRef:
    """A lowered smem view: ``base`` (i32 shared address of the layout's origin), ``layout`` (Sw o offset o inner or
    a Layout), ``dtype``, ``align`` (a power of two dividing ``base``, in bytes)."""

    def __init__(self, base, layout, dtype, align: int):
        self.base, self.layout, self.dtype, self.align = base, layout, dtype, int(align)


class BarrierRef:
    """A lowered ``mbarrier<N>``: ``base`` (i32 shared address of barrier 0) and ``count``."""

    def __init__(self, base, count: int):
        self.base, self.count = base, count

    def address(self, lx, index):
        """The shared address of barrier ``index`` (i32): base + 8·index."""
        return lx.b.add(self.base, lx.b.shl(index, lx.i32(3)))


class TmapArg:
    """A lowered ``tmap`` parameter: ``address`` (i64 generic address of its 128 bytes), ``type`` and ``params``
    (the static ``TmaParams`` of the box over a row-major global: ``mode_order``, ``box_dims``, ``swizzle``)."""

    def __init__(self, name, address, type_, params):
        self.name, self.address, self.type, self.params = name, address, type_, params


def lowbit(x: int) -> int:
    """The largest power of two dividing ``x`` (``WINDOW_ALIGN`` for 0: the window's own alignment bounds it)."""
    x = abs(int(x))
    return min(x & -x, WINDOW_ALIGN) if x else WINDOW_ALIGN


def smem_symbol(lx):
    """The module's one dynamic shared-memory array (declared on first use)."""
    g = lx.module.globals.get(SMEM_SYMBOL)
    if g is None:
        g = ir.GlobalVariable(lx.module, ir.ArrayType(I8, 0), SMEM_SYMBOL, addrspace=3)
        g.linkage = "external"
        g.align = WINDOW_ALIGN
    return g


def emit_window(lx):
    """The i32 shared address of the 1024-aligned window, emitted at the current point (the kernel's entry):
    ``(ptrtoint @__smem + 1023) & -1024``. Post: a multiple of 1024, ≥ the symbol's address."""
    b = lx.b
    raw = b.ptrtoint(smem_symbol(lx), I32)
    return b.and_(b.add(raw, lx.i32(WINDOW_ALIGN - 1)), lx.i32(-WINDOW_ALIGN))


def swizzle_address(lx, sw, addr):
    """``sw(addr)`` on an i32 shared address at run time, as ``layoutc.Swizzle.__call__``:
    ``addr ^ ((addr & yyy_mask) >> shift)`` (``<<`` for a negative shift). ``Sw<3,4,3>`` on 0x480 → 0x4C0."""
    if sw is None or sw.bits == 0:
        return addr
    b = lx.b
    y = b.and_(addr, lx.i32(sw.yyy_mask))
    y = b.lshr(y, lx.i32(sw.shift)) if sw.shift >= 0 else b.shl(y, lx.i32(-sw.shift))
    return b.xor(addr, y)


def smem_pointer(lx, addr):
    """An ``addrspace(3)`` pointer from an i32 shared address."""
    return lx.b.inttoptr(lx.b.zext(addr, I64), SPTR)


def smem_access(lx, ref: SmemRef, thread, tv, store=None):
    """smem.load (``store`` None: returns the values, value order) or smem.store (``store``: the values).

    Element ``i = tv(t, v)`` of the view sits at the physical address ``Sw(base + esize·(offset + inner(i)))``.
    With ``G = inner ∘ tv`` (``plans.plan_smem_access``) that is ``Sw(base + esize·(offset + G0(t) + G1(v)))``: the
    thread part is emitted once, each value adds a constant, then the swizzle is applied to the absolute address.
    Groups of ``width`` values at consecutive addresses inside one swizzle chunk become one vector access. Example:
    ``Sw<3,4,3> o 0 o (64,32):(32,1)`` f32 with tv ``(128,16):(16,1)``: thread t's 16 values are one 64-byte row
    segment, 4 chunks of 16 bytes → four ``ld.shared.v4.b32`` at swizzled addresses.
    """
    b = lx.b
    esize = max(1, ref.dtype.bits // 8)
    plan, address = smem_addresses(lx, ref, thread, tv)
    mem_t = memory_type(ref.dtype)
    nv = lc.size(tv[1])
    results = [None] * nv
    k = plan.width
    for group in plan.groups:
        ptr = smem_pointer(lx, address(group[0]))
        if k == 1:
            (v,) = group
            if store is None:
                results[v] = b.load(ptr, typ=mem_t, align=esize)
            else:
                b.store(store[v], ptr, align=esize)
            continue
        vt = ir.VectorType(mem_t, k)
        if store is None:
            vec = b.load(ptr, typ=vt, align=k * esize)
            for j, v in enumerate(group):
                results[v] = b.extract_element(vec, lx.i32(j))
        else:
            vec = ir.Constant(vt, None)
            for j, v in enumerate(group):
                vec = b.insert_element(vec, store[v], lx.i32(j))
            b.store(vec, ptr, align=k * esize)
    return results if store is None else None


def smem_addresses(lx, ref: SmemRef, thread, tv, base_align: int | None = None):
    """(``plans.plan_smem_access``'s plan, ``address``): ``address(v)`` emits the i32 physical shared address of the
    thread's value ``v`` of view ``ref`` through ``tv`` — ``Sw(base + esize·(offset + inner(tv(t, v))))``, the thread
    part emitted once. ``base_align`` (bytes) overrides the alignment the plan may assume of the view's origin (a
    caller that checks it at run time, ``cpasync.copy {vector_check = true}``). Post: ``address(v)`` is the address
    smem.load/store access for value v."""
    b = lx.b
    sw, offset, inner = split_smem_layout(ref.layout)
    esize = max(1, ref.dtype.bits // 8)
    if base_align is None:
        base_align = ref.align if not offset else min(ref.align, lowbit(offset * esize))
    plan = plan_smem_access(tv, inner, esize, swizzle_chunk_bytes(sw), base_align)
    origin = ref.base if not offset else b.add(ref.base, lx.i32(offset * esize))
    if plan.thread is not None:
        toff = lx.emit_layout(plan.thread, thread)
        thread_addr = b.add(origin, b.mul(toff, lx.i32(esize)) if esize != 1 else toff)

        def linear(v):
            c = plan.values[v] * esize
            return b.add(thread_addr, lx.i32(c)) if c else thread_addr
    else:  # composition not admissible: decode each value's view index at run time
        def linear(v):
            idx = lx.emit_tv_index(tv, thread, v)
            off = lx.emit_layout(inner, idx)
            return b.add(origin, b.mul(off, lx.i32(esize)) if esize != 1 else off)

    return plan, lambda v: swizzle_address(lx, sw, linear(v))


def view_origin(lx, ref: SmemRef):
    """The i32 shared address of the view's first element before the swizzle: base + esize·offset (what TMA takes as
    its destination or source: the box's origin)."""
    _sw, offset, _inner = split_smem_layout(ref.layout)
    esize = max(1, ref.dtype.bits // 8)
    return ref.base if not offset else lx.b.add(ref.base, lx.i32(offset * esize))


def tma_copy(lx, kind: str, tmap: TmapArg, view: SmemRef, coords, barrier=None, multicast=None) -> None:
    """Emit one TMA tile copy. ``coords``: i32 values in the global tensor's mode order; the instruction takes them
    innermost first (driver order: ``params.mode_order``). ``barrier``: the i32 barrier address of a load;
    ``multicast``: the CTA mask of a load written into several CTAs of the cluster, an int or an i32 value computed
    at run time (None: this CTA only)."""
    rank = tmap.type.rank
    if len(coords) != rank:
        lx.error(f"a rank-{rank} map takes {rank} coordinates, got {len(coords)}")
    ordered = [coords[i] for i in tmap.params.mode_order]
    smem = view_origin(lx, view)
    if kind == "load" and multicast is not None:
        mask = (ir.Constant(ir.IntType(16), multicast) if isinstance(multicast, int)
                else lx.b.trunc(multicast, ir.IntType(16)))
        ptx_table.emit(lx, ptx_table.tma_load_multicast(rank), [smem, tmap.address, *ordered, barrier, mask])
    elif kind == "load":
        ptx_table.emit(lx, ptx_table.tma_load(rank), [smem, tmap.address, *ordered, barrier])
    else:
        ptx_table.emit(lx, ptx_table.tma_store(rank), [tmap.address, *ordered, smem])


def barrier_wait(lx, address, parity) -> None:
    """Block until the phase of parity ``parity`` (i32 0/1) of the barrier at ``address`` has completed: an LLVM
    loop around one ``mbarrier.try_wait.parity`` probe (each probe may suspend the thread for a while)."""
    b = lx.b
    probe, done = lx.block("mbar.wait"), lx.block("mbar.ready")
    b.branch(probe)
    b.position_at_end(probe)
    ready = ptx_table.emit(lx, "mbarrier.try_wait.parity", [address, parity])
    b.cbranch(b.icmp_unsigned("!=", ready, lx.i32(0)), done, probe)
    b.position_at_end(done)
