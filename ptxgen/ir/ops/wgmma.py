"""wgmma: warpgroup matrix multiply-accumulate on shared-memory operands (the SS form of ``wgmma.mma_async``).

``%d = wgmma.mma %a, %b, %c : frag<f32>[S]`` computes ``D = A·Bᵀ + C`` for one warpgroup: ``%a`` is a smem view of
shape (M, K) with M = 64·P, ``%b`` a smem view of shape (N, K) (CuTe's convention: B is N×K), ``%c`` and ``%d`` the
accumulator fragments. Thread t of the warpgroup holds value ``v + (N/2)·p`` = element ``accumulator_tv(N)(t, v)``
(= m + 64·n) of m-block p (rows 64p..64p+63): CuTe's ``CLayout_64xN``, stacked over the P blocks. The op stands for
P × K/k wgmma instructions (k = 32 bytes of K: 16 for f16/bf16, 32 for fp8); each one's operand descriptors are
derived from the views' layouts by ``layoutc.hopper.DescriptorIterator`` (major-ness, LBO, SBO, swizzle), at the
view's runtime base address.

wgmma is asynchronous: ``wgmma.fence`` orders earlier register writes of the accumulator before the first wgmma,
``wgmma.commit`` closes the warpgroup's issued wgmmas into a group and ``wgmma.wait {pending = N}`` waits until all
but the N most recent groups completed. The interpreter computes D when the op is issued, reading the operands
through the descriptors (so data that has not arrived yet is a race with the TMA copy still writing it), and keeps
the wgmma "in flight" until a wait retires its group: until then a write of its smem bytes (a TMA load into a stage
released too early, an smem.store) is a race.
"""
from __future__ import annotations

import numpy as np

import layoutc as lc
from layoutc.hopper import DescriptorError, DescriptorIterator, accumulator_tv, core_matrix_addresses
from layoutc.hopper.fragments import wgmma_n_values

from ..types import F16, F32, FragmentType, TensorType
from . import AsyncOp, OpDef, describe_threads, element_bytes, from_bytes, layoutc_dtype, register, tv_table
from .smem import _inner, swizzle_repeat, view_alignment

OPERAND_TYPES = ("f16", "bf16", "e4m3", "e5m2")
K_BYTES = 32  # one wgmma instruction reads 32 bytes of K


def k_step(t) -> int:
    """K elements one wgmma instruction reads: 16 for f16/bf16, 32 for e4m3/e5m2."""
    return K_BYTES * 8 // t.bits


def _extents(layout):
    inner = _inner(layout)
    return tuple(lc.size(inner[i]) for i in range(lc.rank(inner)))


def operand_major(layout, dtype, mn: int):
    """(major, DescriptorIterator) for a wgmma smem operand of ``mn``-row tiles, or (None, reason): K-major when its
    descriptors exist, else MN-major (16-bit types only). The iterator is built at base 0 (bases are checked to sit on
    the swizzle repeat, so a runtime base only shifts the start field)."""
    reasons = []
    for major in ("K", "MN"):
        if major == "MN" and dtype.bits != 16:
            continue
        try:
            return major, DescriptorIterator(layout, layoutc_dtype(dtype), major, 0, mn=mn)
        except DescriptorError as e:
            reasons.append(f"{major}-major: {e.condition}")
    return None, "; ".join(reasons)


def accumulator_size(n: int, blocks: int) -> int:
    """Values per thread of the accumulator of an (64·blocks) × n tile."""
    return n // 2 * blocks


# -- the interpreter's view of wgmma in flight ----------------------------------------------------------------------

class WgmmaInFlight(AsyncOp):
    """The wgmmas of one ``wgmma.mma`` op for one warpgroup, from issue until a ``wgmma.wait`` retires their group.
    Their result is already computed; what stays in flight is their claim on the smem bytes they read."""

    schedulable = False   # only wgmma.wait retires it, never the copy scheduler
    fix = "wgmma.wait for its group first"

    def __init__(self, op, warpgroup: int, byteset):
        self.op = op
        self.warpgroup = warpgroup
        self.thread = 128 * warpgroup
        self.byteset = byteset
        self.done = False

    def step(self, ix) -> None:
        raise AssertionError("wgmma in flight is retired by wgmma.wait only")

    def reads(self, ix):
        return None if self.done else self.byteset

    def describe(self) -> str:
        return f"the wgmma.mma issued at {self.op.loc} by warpgroup {self.warpgroup}"


def wgmma_groups(ix, warpgroup: int) -> dict:
    """A warpgroup's wgmma bookkeeping: ``open`` (issued, not committed) and ``groups`` (committed, oldest first)."""
    return ix.state.setdefault(("wgmma", warpgroup), {"open": [], "groups": []})


def _warpgroups(ix, op) -> list:
    """The active warpgroups; each must be active as a whole (wgmma is .sync.aligned over 128 threads)."""
    act = np.nonzero(ix.mask)[0]
    groups = sorted(set((act // 128).tolist()))
    for w in groups:
        lanes = ix.mask[128 * w:128 * (w + 1)]
        if lanes.size != 128 or not lanes.all():
            ix.fail(op, f"warpgroup {w} executes it with {describe_threads(np.nonzero(lanes)[0] + 128 * w)} only: "
                        "wgmma ops are executed by all 128 threads of a warpgroup together")
    return groups


# -- ops ------------------------------------------------------------------------------------------------------------

def _verify_operand(op, v, value, what):
    t = value.type
    if not isinstance(t, TensorType) or t.space != "smem":
        v.error(op, f"{what} must be a smem view, not {t}")
        return None
    if t.dtype.name not in OPERAND_TYPES:
        v.error(op, f"{what} holds {t.dtype}; wgmma reads {', '.join(OPERAND_TYPES)} from shared memory")
        return None
    if lc.rank(_inner(t.layout)) != 2:
        v.error(op, f"{what}'s layout {lc.to_str(t.layout)} must have rank 2: ({'M' if what == 'A' else 'N'}, K)")
        return None
    return t


def _runtime_descriptor(lx, base, desc):
    """The 64-bit descriptor ``desc`` (derived at base 0) for a view whose origin is at the i32 shared address
    ``base``: the start field becomes ``((base + desc.start) >> 4) & 0x3FFF``, every other field is constant."""
    from llvmlite import ir

    b = lx.b
    start = b.add(base, lx.i32(desc.start_address)) if desc.start_address else base
    field = b.and_(b.lshr(start, lx.i32(4)), lx.i32(0x3FFF))
    high = desc.encode() & ~0x3FFF
    return b.or_(b.zext(field, ir.IntType(64)), ir.Constant(ir.IntType(64), high))


@register
class Mma(OpDef):
    name = "wgmma.mma"
    summary = "D = A·Bᵀ + C for one warpgroup: A (M, K) and B (N, K) in shared memory, C/D accumulator fragments"

    def verify(self, op, v):
        a, b, c = v.operands(op, 3)
        (d,) = v.results(op, 1)
        ta, tb = _verify_operand(op, v, a, "A"), _verify_operand(op, v, b, "B")
        if ta is None or tb is None:
            return
        if ta.dtype != tb.dtype:
            v.error(op, f"A holds {ta.dtype} but B holds {tb.dtype}: wgmma multiplies one element type")
            return
        (m, ka), (n, kb) = _extents(ta.layout), _extents(tb.layout)
        k = k_step(ta.dtype)
        if ka != kb:
            v.error(op, f"A has K = {ka} but B has K = {kb}")
            return
        if ka % k:
            v.error(op, f"K = {ka} is not a multiple of the {k}-element k-step of {ta.dtype} wgmma")
            return
        if m % 64:
            v.error(op, f"A has M = {m} rows; wgmma computes 64-row blocks (M must be a multiple of 64)")
            return
        acc = c.type
        if not isinstance(acc, FragmentType) or acc.dtype not in (F32, F16):
            v.error(op, f"the accumulator must be a frag<f32> or frag<f16>, not {acc}")
            return
        if acc.dtype == F16 and ta.dtype.bits == 8:
            pass  # fp8 with f16 accumulators is legal
        if n not in wgmma_n_values(acc.dtype.name):
            v.error(op, f"B has N = {n} rows; wgmma's N is a multiple of 8 from 8 to 256")
            return
        want = accumulator_size(n, m // 64)
        if acc.size != want:
            v.error(op, f"the accumulator {acc} has {acc.size} values per thread but an {m} x {n} tile needs "
                        f"{want} (N/2 = {n // 2} per 64-row block, {m // 64} blocks)")
            return
        if d != acc:
            v.error(op, f"the result type {d} must be the accumulator's {acc}")
        for value, t, mn, what in ((a, ta, 64, "A"), (b, tb, n, "B")):
            major, it = operand_major(t.layout, t.dtype, mn)
            if major is None:
                v.error(op, f"{what}'s layout {lc.to_str(t.layout)} is no wgmma operand: {it}")
                continue
            rep = swizzle_repeat(t.layout) or 16
            have = view_alignment(value)
            if have is not None and have < rep:
                v.error(op, f"%{value.name} is only known to be {have}-byte aligned but its wgmma descriptors need "
                            f"{rep} (the swizzle pattern must start at phase 0): raise the smem.alloc align")
            if ta.dtype.bits == 8 and major != "K":
                v.error(op, f"{what}: fp8 operands must be K-major")

    def result_types(self, operand_types, attrs):
        return [operand_types[2]]

    def lower(self, op, lx):
        """P × K/k ``wgmma.mma_async`` instructions (m-block outer, k-step inner), the accumulator registers threaded
        through them; each descriptor is the layout's (DescriptorIterator at base 0) with the view's runtime base
        added to its start-address field: ``((base + tile start) >> 4) & 0x3FFF``."""
        from ...lower import ptx_table

        a_v, b_v, c_v = op.operands
        ta, tb = a_v.type, b_v.type
        if op.results[0].type.dtype != F32:
            lx.error("only f32 accumulators are lowered (f16 accumulators pack two values per register)")
        (m, kk), (n, _) = _extents(ta.layout), _extents(tb.layout)
        major_a, it_a = operand_major(ta.layout, ta.dtype, 64)
        major_b, it_b = operand_major(tb.layout, tb.dtype, n)
        if major_a is None or major_b is None:
            lx.error(f"no wgmma descriptors for these layouts: {it_a if major_a is None else it_b}")
        name = ptx_table.wgmma_mma(n, ta.dtype.name, int(major_a == "MN"), int(major_b == "MN"))
        ra, rb = lx.get(a_v), lx.get(b_v)
        acc = list(lx.get(c_v))
        h = n // 2
        for blk in range(m // 64):
            regs = acc[blk * h:(blk + 1) * h]
            for j in range(kk // k_step(ta.dtype)):
                da = _runtime_descriptor(lx, ra.base, it_a.descriptor(k=j, mn_block=blk))
                db = _runtime_descriptor(lx, rb.base, it_b.descriptor(k=j))
                out = ptx_table.emit(lx, name, [da, db, 1, *regs])
                regs = [lx.b.extract_value(out, i) for i in range(h)]
            acc[blk * h:(blk + 1) * h] = regs
        lx.set(op.results[0], acc)


    def interpret(self, op, ix):
        a_v, b_v, c_v = op.operands
        va, vb = ix.get(a_v), ix.get(b_v)
        ta, tb = a_v.type, b_v.type
        (m, kk), (n, _) = _extents(ta.layout), _extents(tb.layout)
        blocks = m // 64
        k = k_step(ta.dtype)
        it_a = ix.cached(("wgmma-it", ta.layout, ta.dtype, 64), lambda: operand_major(ta.layout, ta.dtype, 64))
        it_b = ix.cached(("wgmma-it", tb.layout, tb.dtype, n), lambda: operand_major(tb.layout, tb.dtype, n))
        acc = np.array(ix.get(c_v), dtype=np.float32, copy=True)
        tv = ix.cached(("tv", accumulator_tv(n)), lambda: tv_table(accumulator_tv(n), 128))
        out = acc.copy()
        for w in _warpgroups(ix, op):
            threads = np.arange(128 * w, 128 * (w + 1))
            reads = []
            tiles = {}
            for name, view, (major, it), mn in (("A", va, it_a, 64), ("B", vb, it_b, n)):
                base = np.unique(view.base[threads])
                if base.size != 1:
                    ix.fail(op, f"the threads of warpgroup {w} see different base addresses of {view.name}: a "
                                "wgmma operand is one smem tile per warpgroup")
                base = int(base[0])
                rep = swizzle_repeat(view.layout) or 16
                if base % rep:
                    ix.fail(op, f"{view.name} starts at byte {base}, not on its {rep}-byte swizzle repeat")
                for blk in range(blocks if name == "A" else 1):
                    for j in range(kk // k):
                        d0 = it.descriptor(k=j, mn_block=blk)
                        desc = d0.with_start(d0.start_address + base)
                        addr = ix.cached(("wgmma-addr", desc.encode(), view.dtype, major, mn),
                                         lambda d=desc, mj=major, r=mn, t=view.dtype: np.array(
                                             core_matrix_addresses(d, layoutc_dtype(t), mj, r), dtype=np.int64))
                        esize = element_bytes(view.dtype)
                        if addr.min() < view.lo or addr.max() + esize > view.hi:
                            ix.fail(op, f"the {name} tile of k-step {j} reaches bytes outside {view.name}'s "
                                        f"allocation [{view.lo}, {view.hi})")
                        raw = ix.smem_read(op, view.name, addr, esize)
                        tiles[(name, blk, j)] = from_bytes(raw, view.dtype).astype(np.float64)
                        reads.append(np.unique((addr[..., None] + np.arange(esize)).ravel()))
            for blk in range(blocks):
                d = sum(tiles[("A", blk, j)] @ tiles[("B", 0, j)].T for j in range(kk // k))   # (64, n)
                flat = d.ravel(order="F")                                                   # index m + 64·n
                cols = slice(blk * (n // 2), (blk + 1) * (n // 2))
                out[threads, cols] = (acc[threads, cols].astype(np.float64) + flat[tv]).astype(np.float32)
            inflight = WgmmaInFlight(op, w, np.unique(np.concatenate(reads)))
            wgmma_groups(ix, w)["open"].append(inflight)
            ix.inflight.append(inflight)
        if op.results[0].type.dtype == F16:
            out = out.astype(np.float16).astype(np.float32)
        ix.set(op.results[0], out)


@register
class Fence(OpDef):
    name = "wgmma.fence"
    summary = "order the warpgroup's earlier register (accumulator) writes before the wgmmas that follow"

    def verify(self, op, v):
        v.operands(op, 0)
        v.results(op, 0)

    def interpret(self, op, ix):
        _warpgroups(ix, op)

    def lower(self, op, lx):
        """``wgmma.fence.sync.aligned``."""
        from ...lower import ptx_table

        ptx_table.emit(lx, "wgmma.fence", [])


@register
class Commit(OpDef):
    name = "wgmma.commit"
    summary = "close the warpgroup's issued, uncommitted wgmmas into one group"

    def verify(self, op, v):
        v.operands(op, 0)
        v.results(op, 0)

    def interpret(self, op, ix):
        for w in _warpgroups(ix, op):
            g = wgmma_groups(ix, w)
            g["groups"].append(g["open"])
            g["open"] = []

    def lower(self, op, lx):
        """``wgmma.commit_group.sync.aligned``."""
        from ...lower import ptx_table

        ptx_table.emit(lx, "wgmma.commit_group", [])


@register
class WaitGroups(OpDef):
    name = "wgmma.wait"
    summary = "wait until all but the `pending` most recent wgmma groups of the warpgroup completed"

    def verify(self, op, v):
        v.operands(op, 0)
        v.results(op, 0)
        n = v.attr(op, "pending", int)
        if n is not None and not 0 <= n <= 7:
            v.error(op, f"pending must be from 0 to 7 (wgmma.wait_group's immediate), not {n}")

    def interpret(self, op, ix):
        keep = op.attrs["pending"]
        for w in _warpgroups(ix, op):
            g = wgmma_groups(ix, w)
            retire = g["groups"][:max(len(g["groups"]) - keep, 0)]
            g["groups"] = g["groups"][len(retire):]
            for group in retire:
                for inflight in group:
                    inflight.done = True
                    ix.inflight.remove(inflight)

    def lower(self, op, lx):
        """``wgmma.wait_group.sync.aligned N``."""
        from ...lower import ptx_table

        ptx_table.emit(lx, "wgmma.wait_group", [op.attrs["pending"]])
