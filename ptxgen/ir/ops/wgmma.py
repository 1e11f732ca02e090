"""wgmma: warpgroup matrix multiply-accumulate on shared-memory operands (the SS form of ``wgmma.mma_async``).

``%d = wgmma.mma %a, %b, %c : frag<f32>[S]`` computes ``D = A·Bᵀ + C`` for one warpgroup: ``%a`` is a smem view of
shape (M, K) with M = 64·P, ``%b`` a smem view of shape (N, K) (CuTe's convention: B is N×K), ``%c`` and ``%d`` the
accumulator fragments. Thread t of the warpgroup holds value ``v + (N/2)·p`` = element ``accumulator_tv(N)(t, v)``
(= m + 64·n) of m-block p (rows 64p..64p+63): CuTe's ``CLayout_64xN``, stacked over the P blocks. The op stands for
P × K/k wgmma instructions (k = 32 bytes of K: 16 for f16/bf16, 32 for fp8); each one's operand descriptors are
derived from the views' layouts by ``layoutc.hopper.DescriptorIterator`` (major-ness, LBO, SBO, swizzle), at the
view's runtime base address.

``{fence = true}`` on either form: the op begins with a ``wgmma.fence`` lowered into the wgmmas' own asm statement,
where nothing can be scheduled between them (a separate fence followed by a pipeline wait or a copy of an operand makes
ptxas inject a ``warpgroup.arrive``, C7519, and in a divergent path serialize every wgmma, C7520).

wgmma is asynchronous: ``wgmma.fence`` orders earlier register writes of the accumulator before the first wgmma,
``wgmma.commit`` closes the warpgroup's issued wgmmas into a group and ``wgmma.wait {pending = N}`` waits until all
but the N most recent groups completed. The interpreter computes D when the op is issued, reading the operands
through the descriptors (so data that has not arrived yet is a race with the TMA copy still writing it), and keeps
the wgmma "in flight" until a wait retires its group: until then a write of its smem bytes (a TMA load into a stage
released too early, an smem.store) is a race.

``%d = wgmma.mma_rs %a, %b, %c`` is the RS form: ``%a`` is a register fragment holding each thread's values of the
(64·P, K) A tile (``rs_a_tv``: ``layoutc.hopper.a_fragment_tv`` per m64 × k-step block, value ``v + V·(j + S·p)``
for block p, k-step j of S, V values per block), ``%b`` and ``%c`` as in the SS form. Both forms share their
verifier rules for B and the accumulator, the interpreter's reads of smem operands through descriptors and its
bookkeeping of wgmmas in flight, and the lowering's loop over m-blocks and k-steps; only A differs.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

import layoutc as lc
from layoutc.hopper import (
    DescriptorError, DescriptorIterator, a_fragment_register, a_fragment_tv, accumulator_tv, core_matrix_addresses,
)
from layoutc.hopper.fragments import wgmma_n_values

from ..core import walk
from ..types import F16, F32, FragmentType, TensorType
from . import (
    AsyncOp, OpDef, describe_threads, distinct_sorted, element_bytes, from_bytes, kernel_rule, layoutc_dtype, register,
    round_to, tv_table,
)
from .smem import _inner, alignment_advice, swizzle_of, swizzle_repeat, view_alignment, view_phase

OPERAND_TYPES = ("f16", "bf16", "e4m3", "e5m2")
# the accumulator types PTX's wgmma.mma_async allows for each input type (hopper-ptx §1.1): bf16 only f32
ACCUMULATORS = {"f16": (F32, F16), "bf16": (F32,), "e4m3": (F32, F16), "e5m2": (F32, F16)}
FP8_TYPES = ("e4m3", "e5m2")
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


def rs_block_values(t) -> int:
    """Values per thread of one m64 × k-step block of the RS A fragment: 64·k/128 = 8 for f16/bf16, 16 for fp8."""
    return 64 * k_step(t) // 128


def rs_a_tv(t, m: int, k: int) -> lc.Layout:
    """The RS A fragment as a TV layout over the (m, k) A tile (index ``row + m·col``, the gmem/smem tile order):
    (128 threads, m·k/128 values). Value ``v + V·(j + S·p)`` (V = ``rs_block_values``, S = k / k-step) of thread t
    is element ``a_fragment_tv(t)(t, v)`` of the 64 × k-step block of m-block p (rows 64p..) and k-step j.

    Derived by algebra: ``a_fragment_tv(T, k)`` (the k-steps already appended as its last value mode) indexes a
    64 × k tile; composing it with the embedding ``(64, k):(1, m)`` re-indexes it into the m × k tile (block 0),
    and an outermost value mode ``P:64`` steps the 64-row blocks.

    ``rs_a_tv(BF16, 128, 32)`` → ``((4,8,4),((2,2,2,2),2)):((256,1,16),((128,8,1024,2048),64))``.
    Pre: m a multiple of 64, k of the k-step. Post: a bijection onto [0, m·k); size(mode 0) = 128."""
    per_block = lc.composition(lc.Layout((64, k), (1, m)), a_fragment_tv(layoutc_dtype(t), k))
    return lc.make_layout(per_block[0], lc.make_layout(per_block[1], lc.Layout(m // 64, 64)))


# -- the interpreter's view of wgmma in flight ----------------------------------------------------------------------

class WgmmaInFlight(AsyncOp):
    """The wgmmas of one ``wgmma.mma`` (or ``wgmma.mma_rs``) op for one warpgroup, from issue until a ``wgmma.wait`` retires their group.
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
        return f"the {self.op.name} issued at {self.op.loc} by warpgroup {self.warpgroup}"


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


def _mixed_types(ta, tb) -> str:
    """Why A of type ``ta`` and B of type ``tb`` (different) make no wgmma here."""
    if ta.name in FP8_TYPES and tb.name in FP8_TYPES:
        return (f"A holds {ta} but B holds {tb}: PTX allows mixing e4m3 and e5m2, but this wgmma op takes one "
                "element type for both operands")
    return f"A holds {ta} but B holds {tb}: PTX's wgmma multiplies operands of one type (only e4m3 and e5m2 mix)"


def _verify_k(op, v, t, k_total) -> bool:
    """K is whole k-steps of the element type."""
    k = k_step(t)
    if k_total % k:
        v.error(op, f"K = {k_total} is not a multiple of the {k}-element k-step of {t} wgmma")
        return False
    return True


def _verify_accumulator(op, v, c, d, m: int, n: int, t) -> bool:
    """The rules on C and D shared by both forms: a fragment of an accumulator type PTX allows for inputs of type
    ``t`` (``ACCUMULATORS``), N/2 values per 64-row block, N legal, D of C's type (the ``m`` × ``n`` tile)."""
    acc = c.type
    allowed = ACCUMULATORS[t.name]
    if not isinstance(acc, FragmentType):
        v.error(op, f"the accumulator must be a register fragment frag<f32>[S], not {acc}")
        return False
    if acc.dtype not in allowed:
        if acc.dtype == F16:
            v.error(op, f"{t} inputs need an f32 accumulator (frag<f32>), not {acc}: PTX's wgmma takes an f16 "
                        f"accumulator only with f16, e4m3 or e5m2 inputs")
        else:
            kinds = " or ".join(f"frag<{a}>" for a in allowed)
            v.error(op, f"{t} inputs accumulate in {kinds} (PTX's wgmma), not {acc}")
        return False
    if n not in wgmma_n_values(acc.dtype.name):
        v.error(op, f"B has N = {n} rows; wgmma's N is a multiple of 8 from 8 to 256")
        return False
    want = accumulator_size(n, m // 64)
    if acc.size != want:
        v.error(op, f"the accumulator {acc} has {acc.size} values per thread but an {m} x {n} tile needs "
                    f"{want} (N/2 = {n // 2} per 64-row block, {m // 64} blocks)")
        return False
    if d != acc:
        v.error(op, f"the result type {d} must be the accumulator's {acc}")
    return True


def _verify_smem_descriptors(op, v, value, t, mn: int, what: str) -> None:
    """A smem operand (``mn`` rows) has wgmma descriptors (K-major, or MN-major for 16-bit types; fp8 K-major only)
    and its view is known to start on its swizzle repeat."""
    major, it = operand_major(t.layout, t.dtype, mn)
    if major is None:
        v.error(op, f"{what}'s layout {lc.to_str(t.layout)} is no wgmma operand: {it}")
        return
    rep = swizzle_repeat(t.layout) or 16
    have = view_alignment(value)
    if have is not None and have < rep and not k_offset_in_row(t.layout, t.dtype, major, view_phase(value, rep)):
        v.error(op, f"%{value.name} is only known to be {have}-byte aligned but its wgmma descriptors need "
                    f"{rep} (the swizzle pattern must start at phase 0): {alignment_advice(value, rep)}")
    if t.dtype.bits == 8 and major != "K":
        v.error(op, f"{what}: fp8 operands must be K-major")


def k_offset_in_row(layout, dtype, major: str, phase) -> bool:
    """Whether a K-major swizzled operand may start ``phase`` bytes past its swizzle repeat: a multiple of 16 inside
    the pattern's first row with the operand's K extent still inside that row. The descriptors' start field then
    carries the distance and base_offset stays 0 (hopper-ptx §2.3: advancing K inside a 128B atom adds
    k_bytes >> 4 to the start; checked on an H100), e.g. the second K-half of an fp8 k-tile, 64 bytes into each
    128-byte row. ``phase`` None (unknown) is not allowed."""
    if major != "K" or swizzle_of(layout) is None or phase is None:
        return False
    row = swizzle_repeat(layout) // 8          # the swizzle span in bytes: 8 rows make the repeat
    return phase % 16 == 0 and phase + _extents(layout)[1] * element_bytes(dtype) <= row


def _runtime_descriptor(lx, base, desc):
    """The 64-bit descriptor ``desc`` (derived at base 0) for a view whose origin is at the i32 shared address
    ``base``: the start field becomes ``(base >> 4) + (desc.start >> 4)``, every other field is constant. That is
    hopper-ptx §2.3's ``((base + start) & 0x3FFFF) >> 4`` for the 16-byte aligned bases a wgmma operand has (the
    interpreter refuses others): a CTA's shared addresses lie below 2^18 (228 KB of shared memory at most), so the
    14-bit field never wraps and needs no mask. Written so, every k-step's descriptor of one view is one addition
    to the same ``base >> 4`` (ptxas otherwise repeats add, shift and mask per wgmma)."""
    from llvmlite import ir

    b = lx.b
    field = b.lshr(base, lx.i32(4))
    if desc.start_address >> 4:
        field = b.add(field, lx.i32(desc.start_address >> 4), flags=("nuw",))
    high = desc.encode() & ~0x3FFF
    return b.or_(b.zext(field, ir.IntType(64)), ir.Constant(ir.IntType(64), high))


# -- the interpreter's and the lowering's shared paths ----------------------------------------------------------------

def _smem_tiles(ix, op, w: int, view, major_it, mn: int, blocks: int, ksteps: int, name: str):
    """Warpgroup ``w``'s tiles of smem operand ``view`` read through the descriptors the lowering builds:
    ``{(block, k-step): float64 (mn, k) array}`` and the sorted unique smem bytes they occupy (what the wgmma in
    flight holds). Fails unless the warpgroup sees one base, on the swizzle repeat, and the tiles stay inside the
    view's allocation."""
    major, it = major_it
    threads = np.arange(128 * w, 128 * (w + 1))
    base = distinct_sorted(view.base[threads])
    if base.size != 1:
        ix.fail(op, f"the threads of warpgroup {w} see different base addresses of {view.name}: a "
                    "wgmma operand is one smem tile per warpgroup")
    base = int(base[0])
    rep = swizzle_repeat(view.layout) or 16
    esize = element_bytes(view.dtype)
    phase = base % rep
    if phase and not k_offset_in_row(view.layout, view.dtype, major, phase):
        ix.fail(op, f"{view.name} starts at byte {base}, not on its {rep}-byte swizzle repeat (nor a K offset "
                    "inside the first row of a K-major pattern)")
    tiles, keys = {}, []
    for blk in range(blocks):
        for j in range(ksteps):
            d0 = it.descriptor(k=j, mn_block=blk)
            desc = d0.with_start(d0.start_address + base)
            key = ("wgmma-addr", desc.encode(), view.dtype, major, mn)
            addr = ix.cached(key, lambda d=desc, mj=major, r=mn, t=view.dtype: _descriptor_addresses(
                d.encode(), t, mj, r))
            if addr.min() < view.lo or addr.max() + esize > view.hi:
                ix.fail(op, f"the {name} tile of k-step {j} reaches bytes outside {view.name}'s "
                            f"allocation [{view.lo}, {view.hi})")
            raw = ix.smem_read(op, view.name, addr, esize, group=threads)
            tiles[(blk, j)] = from_bytes(raw, view.dtype).astype(np.float64)
            keys.append(key)
    # the bytes the tiles occupy depend only on their descriptors: sorted once per set of descriptors, not per wgmma
    held = ix.cached(("wgmma-bytes", tuple(keys), esize), lambda: distinct_sorted(np.concatenate(
        [(ix.cached(k, None)[..., None] + np.arange(esize)).ravel() for k in keys])))
    return tiles, held


@lru_cache(maxsize=4096)
def _descriptor_addresses(encoded: int, dtype, major, mn: int) -> np.ndarray:
    """``core_matrix_addresses`` of a descriptor (its 64-bit encoding) as a read-only int64 array, kept for the
    process: every interpreter run of a kernel walks the same few descriptors (stages × k-steps × MN blocks)."""
    addresses = np.array(core_matrix_addresses(encoded, layoutc_dtype(dtype), major, mn), dtype=np.int64)
    addresses.setflags(write=False)
    return addresses


def _accumulate(ix, op, w: int, a_tiles, b_tiles, out, acc, n: int, blocks: int, ksteps: int, smem_bytes) -> None:
    """Write warpgroup ``w``'s ``D = Σ_j A(p, j)·B(j)ᵀ + C`` (float64 products, rounded to f32) into ``out`` through
    the accumulator layout, and put the wgmma in flight holding ``smem_bytes`` until a wgmma.wait retires it."""
    threads = np.arange(128 * w, 128 * (w + 1))
    tv = ix.cached(("tv", accumulator_tv(n)), lambda: tv_table(accumulator_tv(n), 128))
    for blk in range(blocks):
        d = sum(a_tiles[(blk, j)] @ b_tiles[(0, j)].T for j in range(ksteps))   # (64, n)
        flat = d.ravel(order="F")                                                # index m + 64·n
        cols = slice(blk * (n // 2), (blk + 1) * (n // 2))
        out[threads, cols] = (acc[threads, cols].astype(np.float64) + flat[tv]).astype(np.float32)
    inflight = WgmmaInFlight(op, w, smem_bytes)
    wgmma_groups(ix, w)["open"].append(inflight)
    ix.inflight.append(inflight)


def _verify_fence_attr(op, v) -> None:
    if "fence" in op.attrs:
        v.attr(op, "fence", bool)


def _fenced(op) -> bool:
    """``{fence = true}``: the op begins with ``wgmma.fence`` (lowered into the wgmmas' own asm statement)."""
    return op.attrs.get("fence") is True


def _discards_c(op) -> bool:
    """``wgmma.mma {discard_c = true}``: D = A·Bᵀ, the accumulator operand's values ignored (scale-d 0) but its
    registers tied to D's, so that successive chunks of one warpgroup share registers."""
    return op.attrs.get("discard_c") is True


def _lower_mma(op, lx, name_of, blocks: int, ksteps: int, a_operands) -> None:
    """The P × S instructions of either form (m-block outer, k-step inner), the accumulator registers threaded
    through them: per m-block ONE asm statement ``name_of(ksteps)`` holding the S chained instructions;
    ``a_operands(block, j)`` gives the A operands of one instruction (a descriptor, or 4 registers), B's descriptor
    is its layout's (DescriptorIterator at base 0) with the view's runtime base in the start field. ``name_of(ksteps,
    fenced)``: with ``{fence = true}`` each statement begins with its wgmma.fence."""
    b_v, c_v = op.operands[1], op.operands[2]
    tb = b_v.type
    n = _extents(tb.layout)[0]
    _major_b, it_b = operand_major(tb.layout, tb.dtype, n)
    rb = lx.get(b_v)
    acc = list(lx.get(c_v))
    h = n // 2
    name = name_of(ksteps, _fenced(op))
    descriptors_b = [_runtime_descriptor(lx, rb.base, it_b.descriptor(k=j)) for j in range(ksteps)]
    for blk in range(blocks):
        steps = [x for j in range(ksteps) for x in (*a_operands(blk, j), descriptors_b[j])]
        c_in = acc[blk * h:(blk + 1) * h]
        # C = 0: scale-d 0 ignores the inputs, which are left undefined — zeroing them would write the accumulator's
        # registers between wgmma.fence and the wgmma, where ptxas then injects a warpgroup.arrive (C7519)
        zero_c = lx.is_zero(c_in)
        if zero_c:
            c_in = [lx.undefined(x) for x in c_in]
        # discard_c: scale-d 0 on the operand's own registers (tied to D's), so D takes them over where the operand
        # dies here — ptxas otherwise may give each chunk from zero registers of its own
        zero_c = zero_c or _discards_c(op)
        out = lx.inline_ptx(name, [*steps, 0 if zero_c else 1, *c_in])
        acc[blk * h:(blk + 1) * h] = [lx.b.extract_value(out, i) for i in range(h)]
    lx.set(op.results[0], acc)


def _b_major(lx, tb):
    n = _extents(tb.layout)[0]
    major_b, it_b = operand_major(tb.layout, tb.dtype, n)
    if major_b is None:
        lx.error(f"no wgmma descriptors for B's layout: {it_b}")
    return major_b


@register
class Mma(OpDef):
    name = "wgmma.mma"
    summary = "D = A·Bᵀ + C for one warpgroup: A (M, K) and B (N, K) in shared memory, C/D accumulator fragments"
    num_operands = 3
    num_results = 1
    optional_attrs = ("fence", "discard_c")

    def verify(self, op, v):
        _verify_fence_attr(op, v)
        if "discard_c" in op.attrs:
            v.attr(op, "discard_c", bool)
        a, b, c = op.operands
        d = op.results[0].type
        ta, tb = _verify_operand(op, v, a, "A"), _verify_operand(op, v, b, "B")
        if ta is None or tb is None:
            return
        if ta.dtype != tb.dtype:
            v.error(op, _mixed_types(ta.dtype, tb.dtype))
            return
        (m, ka), (n, kb) = _extents(ta.layout), _extents(tb.layout)
        if ka != kb:
            v.error(op, f"A has K = {ka} but B has K = {kb}")
            return
        if not _verify_k(op, v, ta.dtype, ka):
            return
        if m % 64:
            v.error(op, f"A has M = {m} rows; wgmma computes 64-row blocks (M must be a multiple of 64)")
            return
        if not _verify_accumulator(op, v, c, d, m, n, ta.dtype):
            return
        for value, t, mn, what in ((a, ta, 64, "A"), (b, tb, n, "B")):
            _verify_smem_descriptors(op, v, value, t, mn, what)

    def result_types(self, operand_types, attrs):
        return [operand_types[2]]

    def lower(self, op, lx):
        """P × K/k ``wgmma.mma_async`` instructions (m-block outer, k-step inner), the accumulator registers threaded
        through them; each descriptor is the layout's (DescriptorIterator at base 0) with the view's runtime base
        added to its start-address field: ``(base >> 4) + (tile start >> 4)`` (``_runtime_descriptor``)."""
        a_v, b_v = op.operands[0], op.operands[1]
        ta, tb = a_v.type, b_v.type
        if op.results[0].type.dtype != F32:
            lx.error("only f32 accumulators are lowered (f16 accumulators pack two values per register)")
        (m, kk), (n, _) = _extents(ta.layout), _extents(tb.layout)
        major_a, it_a = operand_major(ta.layout, ta.dtype, 64)
        if major_a is None:
            lx.error(f"no wgmma descriptors for A's layout: {it_a}")
        major_b = _b_major(lx, tb)
        ra = lx.get(a_v)
        trans_a, trans_b = int(major_a == "MN"), int(major_b == "MN")
        _lower_mma(op, lx, lambda steps, fenced: lx.ptx_table.wgmma_mma(n, ta.dtype.name, trans_a, trans_b, steps, fenced),
                   m // 64,
                   kk // k_step(ta.dtype),
                   lambda blk, j: [_runtime_descriptor(lx, ra.base, it_a.descriptor(k=j, mn_block=blk))])

    def interpret(self, op, ix):
        a_v, b_v, c_v = op.operands
        va, vb = ix.get(a_v), ix.get(b_v)
        ta, tb = a_v.type, b_v.type
        (m, kk), (n, _) = _extents(ta.layout), _extents(tb.layout)
        blocks, ksteps = m // 64, kk // k_step(ta.dtype)
        it_a = ix.cached(("wgmma-it", ta.layout, ta.dtype, 64), lambda: operand_major(ta.layout, ta.dtype, 64))
        it_b = ix.cached(("wgmma-it", tb.layout, tb.dtype, n), lambda: operand_major(tb.layout, tb.dtype, n))
        acc = np.array(ix.get(c_v), dtype=np.float32, copy=True)
        if _discards_c(op):
            acc[:] = 0
        out = acc.copy()
        for w in _warpgroups(ix, op):
            a_tiles, a_bytes = _smem_tiles(ix, op, w, va, it_a, 64, blocks, ksteps, "A")
            b_tiles, b_bytes = _smem_tiles(ix, op, w, vb, it_b, n, 1, ksteps, "B")
            _accumulate(ix, op, w, a_tiles, b_tiles, out, acc, n, blocks, ksteps,
                        distinct_sorted(np.concatenate((a_bytes, b_bytes))))
        if op.results[0].type.dtype == F16:
            out = out.astype(np.float16).astype(np.float32)
        ix.set(op.results[0], out)


@register
class MmaRS(OpDef):
    name = "wgmma.mma_rs"
    summary = "D = A·Bᵀ + C for one warpgroup: A (M, K) a register fragment (rs_a_tv), B (N, K) in shared memory"
    num_operands = 3
    num_results = 1
    optional_attrs = ("fence",)

    def verify(self, op, v):
        _verify_fence_attr(op, v)
        a, b, c = op.operands
        d = op.results[0].type
        ta = a.type
        if not isinstance(ta, FragmentType):
            v.error(op, f"A must be a register fragment frag<T>[S] (the RS form), not {ta}")
            return
        if ta.dtype.name not in OPERAND_TYPES:
            v.error(op, f"A holds {ta.dtype}; wgmma takes {', '.join(OPERAND_TYPES)} A fragments")
            return
        tb = _verify_operand(op, v, b, "B")
        if tb is None:
            return
        if ta.dtype != tb.dtype:
            v.error(op, _mixed_types(ta.dtype, tb.dtype))
            return
        n, kk = _extents(tb.layout)
        if not _verify_k(op, v, ta.dtype, kk):
            return
        per_block = rs_block_values(ta.dtype) * (kk // k_step(ta.dtype))
        if ta.size == 0 or ta.size % per_block:
            v.error(op, f"the A fragment {ta} has {ta.size} values per thread but a 64 x {kk} block of "
                        f"{ta.dtype} takes {per_block} ({rs_block_values(ta.dtype)} per k-step, "
                        f"{kk // k_step(ta.dtype)} k-steps): the fragment must hold whole 64-row blocks")
            return
        if not _verify_accumulator(op, v, c, d, 64 * (ta.size // per_block), n, ta.dtype):
            return
        _verify_smem_descriptors(op, v, b, tb, n, "B")

    def result_types(self, operand_types, attrs):
        return [operand_types[2]]

    def interpret(self, op, ix):
        a_v, b_v, c_v = op.operands
        vb, tb, t = ix.get(b_v), b_v.type, a_v.type.dtype
        n, kk = _extents(tb.layout)
        k = k_step(t)
        ksteps = kk // k
        blocks = a_v.type.size // (rs_block_values(t) * ksteps)
        m = 64 * blocks
        it_b = ix.cached(("wgmma-it", tb.layout, tb.dtype, n), lambda: operand_major(tb.layout, tb.dtype, n))
        table = ix.cached(("tv", ("rs-a", t, m, kk)), lambda: tv_table(rs_a_tv(t, m, kk), 128))
        frag = round_to(ix.get(a_v), t)
        acc = np.array(ix.get(c_v), dtype=np.float32, copy=True)
        out = acc.copy()
        for w in _warpgroups(ix, op):
            flat = np.empty(m * kk, dtype=np.float64)
            flat[table] = frag[128 * w:128 * (w + 1)]
            a = flat.reshape((m, kk), order="F")                  # the A tile, index row + m·col
            a_tiles = {(blk, j): a[64 * blk:64 * (blk + 1), k * j:k * (j + 1)]
                       for blk in range(blocks) for j in range(ksteps)}
            b_tiles, b_bytes = _smem_tiles(ix, op, w, vb, it_b, n, 1, ksteps, "B")
            _accumulate(ix, op, w, a_tiles, b_tiles, out, acc, n, blocks, ksteps, b_bytes)
        if op.results[0].type.dtype == F16:
            out = out.astype(np.float16).astype(np.float32)
        ix.set(op.results[0], out)

    def lower(self, op, lx):
        """P × K/k ``wgmma.mma_async`` RS instructions: A as four ``.b32`` registers per instruction, fragment values
        ``V·(j + S·p) ..`` packed by ``a_fragment_register`` (value v → register, byte lane; the lower-index value
        in the low bits), B through its descriptors as in the SS form."""
        from llvmlite import ir

        a_v, b_v = op.operands[0], op.operands[1]
        t, tb = a_v.type.dtype, b_v.type
        if op.results[0].type.dtype != F32:
            lx.error("only f32 accumulators are lowered (f16 accumulators pack two values per register)")
        n, kk = _extents(tb.layout)
        ksteps = kk // k_step(t)
        per = rs_block_values(t)
        blocks = a_v.type.size // (per * ksteps)
        major_b = _b_major(lx, tb)
        values = lx.get(a_v)
        b = lx.b
        bits = ir.IntType(t.bits)
        i32 = ir.IntType(32)

        def registers(blk, j):
            first = per * (j + ksteps * blk)
            halves = [[None, None] for _ in range(4)]
            words = [None] * 4
            for v in range(per):
                reg, byte = a_fragment_register(layoutc_dtype(t), v)
                x = values[first + v]
                if t.bits == 16:
                    halves[reg][byte // 2] = x
                    continue
                raw = x if isinstance(x.type, ir.IntType) else b.bitcast(x, bits)
                part = b.zext(raw, i32)
                part = b.shl(part, lx.i32(8 * byte)) if byte else part
                words[reg] = part if words[reg] is None else b.or_(words[reg], part)
            if t.bits == 16:
                # a vector bitcast, not shifts and ors: a pair that a cvt.rn.bf16x2.f32 packed (P of attention) is
                # then that register itself, with no unpacking and repacking
                words = [lx.pack_pair(low, high) for low, high in halves]
            return words

        _lower_mma(op, lx, lambda steps, fenced: lx.ptx_table.wgmma_mma_rs(n, t.name, int(major_b == "MN"), steps, fenced),
                   blocks, ksteps, registers)


@register
class Fence(OpDef):
    name = "wgmma.fence"
    summary = "order the warpgroup's earlier register (accumulator) writes before the wgmmas that follow"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        _warpgroups(ix, op)

    def lower(self, op, lx):
        """``wgmma.fence.sync.aligned``."""
        lx.inline_ptx("wgmma.fence", [])


@register
class Commit(OpDef):
    name = "wgmma.commit"
    summary = "close the warpgroup's issued, uncommitted wgmmas into one group"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        for w in _warpgroups(ix, op):
            g = wgmma_groups(ix, w)
            g["groups"].append(g["open"])
            g["open"] = []

    def lower(self, op, lx):
        """``wgmma.commit_group.sync.aligned``."""
        lx.inline_ptx("wgmma.commit_group", [])


@register
class WaitGroups(OpDef):
    name = "wgmma.wait"
    summary = "wait until all but the `pending` most recent wgmma groups completed; passes accumulators through"
    required_attrs = ("pending",)

    def verify(self, op, v):
        types = v.results(op, len(op.operands))
        for x, t in zip(op.operands, types):
            if not isinstance(x.type, FragmentType) or x.type.dtype not in (F32, F16):
                v.error(op, f"the operands are accumulator fragments (frag<f32> / frag<f16>), not {x.type}")
                return
            if t != x.type:
                v.error(op, f"result type {t} must be its operand's {x.type}: the values pass through")
        n = v.attr(op, "pending", int)
        if n is not None and not 0 <= n <= 7:
            v.error(op, f"pending must be from 0 to 7 (wgmma.wait_group's immediate), not {n}")

    def result_types(self, operand_types, attrs):
        return list(operand_types)

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
        for x, r in zip(op.operands, op.results):
            ix.set(r, ix.get(x))

    def lower(self, op, lx):
        """``wgmma.wait_group.sync.aligned N``. Accumulator operands go through the same asm as tied in/out registers
        (as CUTLASS's warpgroup_fence_operand): their results are new values defined BY the wait, so LLVM cannot move
        a read of them (a cast of the epilogue) above it — such a read makes ptxas serialize every wgmma (C7514)."""
        n = op.attrs["pending"]
        values = [v for x in op.operands for v in lx.get(x)]
        if not values:
            lx.inline_ptx("wgmma.wait_group", [n])
            return
        out = lx.inline_ptx(lx.ptx_table.wgmma_wait_fenced(len(values), n), values)
        flat = [lx.b.extract_value(out, i) for i in range(len(values))] if len(values) > 1 else [out]
        k = 0
        for x, r in zip(op.operands, op.results):
            size = x.type.size
            lx.set(r, flat[k:k + size])
            k += size


# -- kernel-level rule: wgmma.fence before the wgmmas that need it --------------------------------------------------

class _FenceState:
    """What the fence rule knows at one program point: ``fenced`` — a wgmma.fence was executed on every path from
    the kernel's start; ``touched`` — the fragments (by value id) whose registers an instruction other than a wgmma
    wrote or read after the last wgmma.fence on some path, each with (the access, the op that made it)."""

    __slots__ = ("fenced", "touched")

    def __init__(self, fenced=False, touched=None):
        self.fenced = fenced
        self.touched = dict(touched or {})

    def copy(self):
        return _FenceState(self.fenced, self.touched)

    def join(self, other):
        """The state where two paths meet: fenced only if on both, touched if on either."""
        touched = dict(self.touched)
        for k, why in other.touched.items():
            touched.setdefault(k, why)
        return _FenceState(self.fenced and other.fenced, touched)

    def same(self, other) -> bool:
        return self.fenced == other.fenced and self.touched.keys() == other.touched.keys()

    def route(self, pairs) -> None:
        """Values that take over another's registers (a loop's block argument from its init or yield, a branch's
        result from its yields, wgmma.wait's pass-through): touched where the source is."""
        for dst, src in pairs:
            if id(src) in self.touched:
                self.touched[id(dst)] = self.touched[id(src)]
            else:
                self.touched.pop(id(dst), None)


# ops that only route fragment registers (no instruction reads or writes them); wgmma ops are handled apart
_ROUTING = ("scf.yield", "scf.for", "scf.if")
_WGMMA_MMA = ("wgmma.mma", "wgmma.mma_rs")


class _FenceRule:
    """The wgmma.fence rule of PTX (hopper-ptx §1.4) over a kernel's structured control flow: a wgmma.fence must
    come before the first wgmma of the warpgroup, and between any register access by another instruction (a
    ``frag.splat`` of the initial accumulator, a cast, an add, an ``scf.if`` merge is none) of its accumulator or RS
    A fragment and the wgmma that uses it. Wgmmas that accumulate into each other's result need no fence between
    them (a commit, a ``wgmma.wait`` and the loop's back edge do not touch the registers), so a fence before a loop
    covers a chain of wgmmas through its iterations."""

    def __init__(self, v):
        self.v = v
        self.reported = set()

    def region(self, region, state: _FenceState, report: bool) -> _FenceState:
        for op in region.ops:
            state = self.op(op, state, report)
        return state

    def op(self, op, state: _FenceState, report: bool) -> _FenceState:
        if op.name == "wgmma.fence":
            return _FenceState(True, {})
        if op.name in _WGMMA_MMA:
            if _fenced(op):
                state = _FenceState(True, {})
            if report:
                self.check(op, state)
            for r in op.results:
                state.touched.pop(id(r), None)
            return state
        if op.name == "wgmma.wait":
            state.route(zip(op.results, op.operands))
            return state
        if op.name == "scf.for" and len(op.regions) == 1:
            return self.loop(op, state, report)
        if op.regions:
            return self.branches(op, state, report)
        if op.name not in _ROUTING:
            for x in op.operands:
                if isinstance(x.type, FragmentType):
                    state.touched[id(x)] = ("read", op)
            for r in op.results:
                if isinstance(r.type, FragmentType):
                    state.touched[id(r)] = ("written", op)
        return state

    def loop(self, op, state: _FenceState, report: bool) -> _FenceState:
        """A counted loop: the body's entry state is the join of the entry (block arguments from the inits) and of
        every back edge (from the yields), to a fixed point; the results come from the inits (no trip) or the
        last yields. Reports only on the final pass."""
        body = op.regions[0]
        inits, carried = op.operands[3:], body.args[1:]
        entry = state.copy()
        entry.route(zip(carried, inits))
        start = entry
        while True:
            end = self.region(body, start.copy(), False)
            back = end.copy()
            back.route(zip(carried, _yielded(body)))
            nxt = entry.join(back)
            if nxt.same(start):
                break
            start = nxt
        end = self.region(body, start.copy(), report)
        after_trips = end.copy()
        after_trips.route(zip(op.results, _yielded(body)))
        no_trip = state.copy()
        no_trip.route(zip(op.results, inits))
        return no_trip.join(after_trips)

    def branches(self, op, state: _FenceState, report: bool) -> _FenceState:
        """Regions of which each thread runs one (scf.if; gpu.roles gives each warpgroup one): the join of their end
        states (an scf.if without else also joins the state that skips it); results from each region's yields."""
        ends = []
        for region in op.regions:
            end = self.region(region, state.copy(), report)
            end.route(zip(op.results, _yielded(region)))
            ends.append(end)
        if op.name == "scf.if" and len(op.regions) < 2:
            ends.append(state.copy())
        out = ends[0]
        for end in ends[1:]:
            out = out.join(end)
        return out

    def check(self, op, state: _FenceState) -> None:
        if id(op) in self.reported:
            return
        if not state.fenced:
            self.reported.add(id(op))
            self.v.error(op, "no wgmma.fence is executed before it on some path from the kernel's start: the first "
                             "wgmma of a sequence needs one (after the last register write of its accumulator)")
            return
        operands = [(op.operands[2], "accumulator")] if len(op.operands) > 2 else []
        if op.name == "wgmma.mma_rs" and op.operands:
            operands.append((op.operands[0], "A fragment"))
        for value, what in operands:
            why = state.touched.get(id(value))
            if why is None:
                continue
            access, by = why
            self.reported.add(id(op))
            self.v.error(op, f"its {what} %{value.name} was {access} by {by.name} at {by.loc} after the last "
                             f"wgmma.fence: a wgmma.fence must come between that register access and the wgmma "
                             "(only wgmmas accumulating into each other's result need none)")
            return


def _yielded(region) -> list:
    """The operands of the region's final scf.yield (empty without one)."""
    last = region.ops[-1] if region.ops else None
    return list(last.operands) if last is not None and last.name == "scf.yield" else []


@kernel_rule
def _wgmma_fences(kernel, v):
    """Every wgmma.mma / wgmma.mma_rs has the wgmma.fence PTX requires before it (``_FenceRule``)."""
    if any(op.name in _WGMMA_MMA for op in walk(kernel.body)):
        _FenceRule(v).region(kernel.body, _FenceState(), True)
