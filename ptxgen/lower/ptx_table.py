"""The one table of inline-PTX instruction builders: every PTX instruction the lowering emits as inline asm
(because LLVM's NVPTX backend has no intrinsic for it, or none that gives the exact form) is an entry here, and
``emit(lx, name, args)`` is the only place that builds an ``asm`` call. Now: the warp shuffle, fp8 conversions,
the mbarrier forms (init, arrive, arrive.expect_tx, try_wait.parity), the fences (mbarrier init, async proxy), the
CTA barrier, the flags between CTAs (``red.release.gpu.add``, ``ld.acquire.gpu``) and the TMA tile copies with their bulk-group completion (``tma_load(rank)``, ``tma_store(rank)``),
the TMA L2 prefetch (``tma_prefetch(rank)``), per-thread ``cp.async`` copies (``cp_async(bytes, l2_prefetch)``) and
their commit/wait groups, ``stmatrix(num, trans)``, predicated global stores
(``st_global_if(bytes, cache)``), global loads and stores with a cache hint (``ld_global(bytes, cache)``,
``st_global(bytes, cache)``: gmem.load/store's ``cache``, ``CACHE_QUALIFIERS``), and the warpgroup ops further down (wgmma SS
and RS forms: ``wgmma_mma``, ``wgmma_mma_rs``; setmaxnreg; named barriers).

An entry gives the PTX template (``$0`` the result, ``$1…`` the operands), the LLVM constraint string, the result
and operand LLVM types, and flags:

- ``convergent``: the instruction synchronizes lanes (shfl.sync, wgmma, …); LLVM must not move it across
  control flow that changes which threads execute it;
- ``side_effect``: the instruction has effects beyond its result (memory, barriers): ``asm sideeffect`` with a
  ``~{memory}`` clobber, so LLVM neither drops nor reorders it.

Constraint letters (NVPTX): ``h`` 16-bit, ``r`` 32-bit, ``l`` 64-bit, ``f`` f32 registers; ``n`` an immediate.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

I16, I32, I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
VOID = ir.VoidType()
F32 = ir.FloatType()


@dataclass(frozen=True)
class PtxInstr:
    template: str
    constraints: str
    result: object
    operands: tuple
    convergent: bool = False
    side_effect: bool = False
    min_ptx: str = "8.0"
    doc: str = ""


TABLE = {
    # warp butterfly exchange: $1 value, $2 xor lane mask (immediate), $3 member mask (immediate)
    "shfl.bfly": PtxInstr("shfl.sync.bfly.b32 $0, $1, $2, 0x1f, $3;", "=r,r,n,n", I32, (I32, I32, I32),
                          convergent=True, doc="value of the lane whose index is this lane's xor mask"),
    # warp vote: 1 in every lane if $1 is non-zero in any lane of the (whole, converged) warp
    "vote.any": PtxInstr("{ .reg .pred %in, %out; setp.ne.u32 %in, $1, 0; vote.sync.any.pred %out, %in, 0xffffffff; "
                         "selp.u32 $0, 1, 0, %out; }", "=r,r", I32, (I32,), convergent=True,
                         doc="1 if $1 is non-zero in any lane of the warp, else 0 (every lane gets the same)"),
    # fp8 conversions (sm_89+, PTX 7.8): pack two f32 ($1 high, $2 low) into e4m3x2 / e5m2x2, saturating to finite
    "cvt.e4m3x2.f32": PtxInstr("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", I16, (F32, F32)),
    "cvt.e5m2x2.f32": PtxInstr("cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,f,f", I16, (F32, F32)),
    # and back: two fp8 in a b16 to f16x2 in a b32 (exact)
    "cvt.f16x2.e4m3x2": PtxInstr("cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", I32, (I16,)),
    "cvt.f16x2.e5m2x2": PtxInstr("cvt.rn.f16x2.e5m2x2 $0, $1;", "=r,h", I32, (I16,)),

    # -- mbarriers (hopper-ptx §6). Operands named "bar" are 32-bit shared addresses (ptrtoint of addrspace 3).
    # Every form touches shared memory the compiler cannot see: side_effect (asm sideeffect + ~{memory}), so LLVM
    # neither drops an arrive whose state result is unused nor moves smem loads/stores across it.
    "mbarrier.init": PtxInstr("mbarrier.init.shared::cta.b64 [$0], $1;", "r,n", VOID, (I32, I32),
                              side_effect=True, doc="$0 bar, $1 expected arrivals (immediate); phase 0, tx 0"),
    "mbarrier.arrive": PtxInstr("mbarrier.arrive.shared::cta.b64 _, [$0];", "r", VOID, (I32,),
                                side_effect=True, doc="one arrival (release.cta); the state token is discarded"),
    "mbarrier.arrive.expect_tx": PtxInstr("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,n", VOID,
                                          (I32, I32), side_effect=True,
                                          doc="tx-count += $1 bytes (immediate), then one arrival"),
    # one potentially blocking probe: 1 once the phase of parity $2 has completed (the barrier's current parity
    # differs from $2), else 0 after a hardware-chosen suspend; the lowering loops on it in LLVM (hopper-ptx §6.2)
    "mbarrier.try_wait.parity": PtxInstr(
        "{ .reg .pred %ready; mbarrier.try_wait.parity.shared::cta.b64 %ready, [$1], $2; "
        "selp.b32 $0, 1, 0, %ready; }",
        "=r,r,r", I32, (I32, I32), side_effect=True, doc="$1 bar, $2 parity (0/1); acquire.cta on success"),
    "fence.mbarrier_init": PtxInstr("fence.mbarrier_init.release.cluster;", "", VOID, (), side_effect=True,
                                    doc="publish this thread's mbarrier inits (then a CTA barrier)"),
    # -- fences and barriers
    "fence.proxy.async.shared": PtxInstr("fence.proxy.async.shared::cta;", "", VOID, (), side_effect=True,
                                         doc="order generic-proxy smem writes before async-proxy (TMA) accesses"),
    # bar.sync is .aligned: every thread of a warp executes it together, hence convergent
    "bar.sync": PtxInstr("bar.sync 0;", "", VOID, (), convergent=True, side_effect=True,
                         doc="CTA-wide barrier 0 (__syncthreads), a memory barrier for the CTA"),
    # -- TMA bulk-group completion (stores)
    "cp.async.bulk.commit_group": PtxInstr("cp.async.bulk.commit_group;", "", VOID, (), side_effect=True,
                                           doc="close this thread's pending bulk copies into a group"),
    "cp.async.bulk.wait_group.read": PtxInstr("cp.async.bulk.wait_group.read $0;", "n", VOID, (I32,),
                                              side_effect=True,
                                              doc="wait until at most $0 groups still read their smem source"),
    "cp.async.bulk.wait_group": PtxInstr("cp.async.bulk.wait_group $0;", "n", VOID, (I32,), side_effect=True,
                                         doc="wait until at most $0 groups are incomplete (global writes done)"),
    # -- per-thread asynchronous copies (cpasync.commit / cpasync.wait; the copies: ``cp_async``)
    "cp.async.commit_group": PtxInstr("cp.async.commit_group;", "", VOID, (), side_effect=True,
                                      doc="close this thread's cp.async copies since the last commit into a group"),
    "cp.async.wait_group": PtxInstr("cp.async.wait_group $0;", "n", VOID, (I32,), side_effect=True,
                                    doc="wait until at most $0 of this thread's cp.async groups are in flight"),
    # -- flags in global memory between CTAs (gmem.signal / gmem.wait): $0 the element's global address
    "red.release.gpu.add": PtxInstr("red.release.gpu.global.add.s32 [$0], $1;", "l,r", VOID, (I64, I32),
                                    side_effect=True,
                                    doc="flag += $1, ordered after every earlier memory access of the thread (gpu)"),
    "prefetch.tensormap": PtxInstr("prefetch.tensormap [$0];", "l", VOID, (I64,), side_effect=True,
                                   doc="hint: bring a TMA descriptor (its generic address) into the descriptor cache"),
    "ld.acquire.gpu": PtxInstr("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", I32, (I64,), side_effect=True,
                               doc="the flag, ordered before every later memory access of the thread (gpu)"),
}


def _coords(first: int, rank: int) -> str:
    return ", ".join(f"${first + d}" for d in range(rank))


def tma_load(rank: int) -> str:
    """The table entry (added on first use) of a rank-``rank`` TMA tile load global → shared completing on an
    mbarrier: ``$0`` smem destination (32-bit shared address), ``$1`` the tensor map's generic address (a by-value
    ``.param`` made generic with ``cvta.param``), ``$2..`` the coordinates (innermost first), last the barrier.
    Post: ``TABLE[name]`` exists; e.g. ``tma_load(2)`` → ``"tma.load.2d"``."""
    name = f"tma.load.{rank}d"
    if name not in TABLE:
        TABLE[name] = PtxInstr(
            f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"[$0], [$1, {{{_coords(2, rank)}}}], [${2 + rank}];",
            ",".join(["r", "l"] + ["r"] * rank + ["r"]), VOID, (I32, I64) + (I32,) * rank + (I32,),
            side_effect=True, doc="one TMA box copy; its bytes complete_tx on the barrier")
    return name


def tma_store(rank: int) -> str:
    """The table entry of a rank-``rank`` TMA tile store shared → global joining the thread's bulk group: ``$0`` the
    map's generic address, ``$1..`` the coordinates (innermost first), last the smem source. ``tma_store(2)`` →
    ``"tma.store.2d"``."""
    name = f"tma.store.{rank}d"
    if name not in TABLE:
        TABLE[name] = PtxInstr(
            f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [$0, {{{_coords(1, rank)}}}], [${1 + rank}];",
            ",".join(["l"] + ["r"] * rank + ["r"]), VOID, (I64,) + (I32,) * rank + (I32,), side_effect=True,
            doc="one TMA box copy from smem; out-of-bounds elements are not written")
    return name


def tma_prefetch(rank: int) -> str:
    """The table entry of a rank-``rank`` TMA tile prefetch into L2: ``$0`` the map's generic address, ``$1..`` the
    coordinates (innermost first). No smem, no barrier, no completion to wait for; out-of-bounds boxes are legal.
    ``tma_prefetch(2)`` → ``"tma.prefetch.2d"``: ``cp.async.bulk.prefetch.tensor.2d.L2.global.tile [map, {c0, c1}]``.
    Post: ``TABLE[name]`` exists."""
    name = f"tma.prefetch.{rank}d"
    if name not in TABLE:
        TABLE[name] = PtxInstr(
            f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile [$0, {{{_coords(1, rank)}}}];",
            ",".join(["l"] + ["r"] * rank), VOID, (I64,) + (I32,) * rank, side_effect=True,
            doc="hint: bring the box into L2 (side_effect so LLVM keeps it though it has no result)")
    return name


def stmatrix(num: int, trans: bool) -> str:
    """The table entry of ``stmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16 [row], {r0..}``: ``$0`` the 32-bit
    shared address of the row this lane supplies (lanes 8j..8j+7 address matrix j's rows), ``$1..$num`` the
    ``.b32`` registers (two b16 each, the lower-index value in the low half); register j goes to matrix j.
    ``.sync.aligned`` over the warp: convergent. ``stmatrix(4, False)`` → ``"stmatrix.x4"``. Post: ``TABLE[name]``
    exists."""
    name = f"stmatrix.x{num}{'.trans' if trans else ''}"
    if name not in TABLE:
        regs = ", ".join(f"${1 + j}" for j in range(num))
        TABLE[name] = PtxInstr(
            f"stmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 [$0], {{{regs}}};",
            ",".join(["r"] * (1 + num)), VOID, (I32,) * (1 + num), convergent=True, side_effect=True,
            doc="each lane's registers to the 8 x 8 matrices whose rows the lanes address")
    return name


# -- warpgroup ops: wgmma's fence/commit/wait, register re-sizing, named barriers (all .sync.aligned: convergent)
TABLE.update({
    "wgmma.fence": PtxInstr("wgmma.fence.sync.aligned;", "", VOID, (), convergent=True, side_effect=True,
                            doc="order earlier accumulator register writes before the wgmmas that follow"),
    "wgmma.commit_group": PtxInstr("wgmma.commit_group.sync.aligned;", "", VOID, (), convergent=True,
                                   side_effect=True, doc="close the warpgroup's issued wgmmas into a group"),
    "wgmma.wait_group": PtxInstr("wgmma.wait_group.sync.aligned $0;", "n", VOID, (I32,), convergent=True,
                                 side_effect=True, doc="wait until at most $0 wgmma groups are pending"),
    "setmaxnreg.inc": PtxInstr("setmaxnreg.inc.sync.aligned.u32 $0;", "n", VOID, (I32,), convergent=True,
                               side_effect=True, doc="grow the warp's registers per thread to $0 (waits for them)"),
    "setmaxnreg.dec": PtxInstr("setmaxnreg.dec.sync.aligned.u32 $0;", "n", VOID, (I32,), convergent=True,
                               side_effect=True, doc="shrink the warp's registers per thread to $0"),
    "bar.named": PtxInstr("bar.sync $0, $1;", "n,n", VOID, (I32, I32), convergent=True, side_effect=True,
                          doc="named barrier $0 among $1 threads (whole warps)"),
    "barrier.named.unaligned": PtxInstr("barrier.sync $0, $1;", "n,n", VOID, (I32, I32), convergent=True,
                                        side_effect=True, doc="named barrier $0 among $1 threads, waited for at "
                                        "several instructions (unaligned)"),
    "bar.arrive": PtxInstr("bar.arrive $0, $1;", "n,n", VOID, (I32, I32), convergent=True, side_effect=True,
                           doc="arrive at named barrier $0 (of $1 threads) without waiting"),
    # -- clusters
    "barrier.cluster": PtxInstr("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;", "",
                                VOID, (), convergent=True, side_effect=True,
                                doc="every thread of the cluster arrives, then waits for all (release/acquire)"),
    "mapa.shared": PtxInstr("mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", I32, (I32, I32),
                            doc="the shared::cluster address of shared address $1 in the CTA of cluster rank $2"),
    "mbarrier.arrive.cluster": PtxInstr("mbarrier.arrive.shared::cluster.b64 _, [$0];", "r", VOID,
                                        (I32,), side_effect=True,
                                        doc="one arrival on a barrier of any CTA of the cluster ($0 from mapa)"),
})


def tma_load_multicast(rank: int) -> str:
    """The table entry of a rank-``rank`` TMA tile load that writes the box into the same smem offset of every CTA in
    the 16-bit mask (and completes its bytes on the barrier at the same offset in each): ``$0`` smem destination,
    ``$1`` the map's generic address, ``$2..`` coordinates (innermost first), then the barrier, then the CTA mask.
    ``tma_load_multicast(2)`` → ``"tma.load.2d.multicast"``."""
    name = f"tma.load.{rank}d.multicast"
    if name not in TABLE:
        TABLE[name] = PtxInstr(
            f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
            f"[$0], [$1, {{{_coords(2, rank)}}}], [${2 + rank}], ${3 + rank};",
            ",".join(["r", "l"] + ["r"] * rank + ["r", "h"]), VOID, (I32, I64) + (I32,) * rank + (I32, I16),
            side_effect=True, doc="one TMA box copy into every CTA of the mask; each one's barrier gets the bytes")
    return name

_WGMMA_PTX_TYPE = {"f16": "f16", "bf16": "bf16", "e4m3": "e4m3", "e5m2": "e5m2"}


def f32_struct(count: int):
    """The struct of ``count`` floats an accumulator asm returns, as a NAMED type (``%"f32x128"``): a literal
    ``{float, float, …}`` is spelled out in every extractvalue, and for m64n256 that was most of gemm_hopper's LLVM IR
    text, which a cold compile prints and parses."""
    t = ir.global_context.get_identified_type(f"f32x{count}")
    if t.is_opaque:
        t.set_body(*([F32] * count))
    return t


def wgmma_mma(n: int, ab_type: str, trans_a: int, trans_b: int, ksteps: int = 1, fenced: bool = False) -> str:
    """The table entry (added on first use) of ``ksteps`` chained ``wgmma.mma_async`` m64nNk* with an f32
    accumulator and both operands in shared memory, as ONE asm statement: ``$0..$(N/2-1)`` the accumulators
    (outputs tied to the inputs of the same index), then per k-step the A and B descriptors (64-bit), then scale-d
    (0: the first step computes D = A·B, else D = A·B + D; every later step accumulates). ``trans_a``/``trans_b``:
    1 for an MN-major operand (f16/bf16 only; fp8 takes no transpose operands). One statement for the k-steps of
    a k-tile keeps the accumulators out of LLVM between them: m64n256 with 4 k-steps took 4 calls and 512
    extractvalues, a third of gemm_hopper's LLVM IR and of LLVM's time on it.
    ``fenced``: the statement begins with ``wgmma.fence.sync.aligned`` (name suffix ``.fenced``), so that no
    instruction can land between the fence and the first wgmma (see ``_wgmma_chain``).
    ``wgmma_mma(128, 'bf16', 0, 0)`` → ``"wgmma.m64n128.f32.bf16.t00"``; with ``ksteps=4`` ``"….t00.x4"``.
    Post: ``TABLE[name]`` exists."""
    trans = f", {trans_a}, {trans_b}" if _k_of(ab_type) == 16 else ""
    return _wgmma_chain(f"wgmma.m64n{n}.f32.{ab_type}.t{trans_a}{trans_b}", n, ab_type, ["l"], trans, ksteps,
                        "D(64 x N) = A·Bᵀ (+ D): one warpgroup, operands through smem descriptors", fenced)


def wgmma_mma_rs(n: int, ab_type: str, trans_b: int, ksteps: int = 1, fenced: bool = False) -> str:
    """The table entry (added on first use) of ``ksteps`` chained RS ``wgmma.mma_async`` m64nNk* with an f32
    accumulator, as one asm statement: ``$0..$(N/2-1)`` the accumulators (tied as in ``wgmma_mma``), then per k-step
    the four A registers ``{a0, a1, a2, a3}`` (two 16-bit or four 8-bit values each, the lower-index value in the
    low bits) and B's descriptor, then scale-d (as in ``wgmma_mma``). The RS form has no imm-trans-a (hopper-ptx
    §1.2): ``trans_b`` only, and only for f16/bf16 (fp8 takes none). ``fenced`` as in ``wgmma_mma``.
    ``wgmma_mma_rs(64, 'bf16', 0)`` → ``"wgmma.rs.m64n64.f32.bf16.t0"``, whose PTX is
    ``wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {...}, {a0, a1, a2, a3}, descB, p, 1, 1, 0;``.
    Post: ``TABLE[name]`` exists."""
    trans = f", {trans_b}" if _k_of(ab_type) == 16 else ""
    return _wgmma_chain(f"wgmma.rs.m64n{n}.f32.{ab_type}.t{trans_b}", n, ab_type, ["r"] * 4, trans, ksteps,
                        "D(64 x N) = A·Bᵀ (+ D): one warpgroup, A in registers, B through its descriptor", fenced)


def _k_of(ab_type: str) -> int:
    return 16 if ab_type in ("f16", "bf16") else 32


def _wgmma_chain(base: str, n: int, ab_type: str, a_constraints: list, trans: str, ksteps: int, doc: str,
                 fenced: bool = False) -> str:
    name = (base if ksteps == 1 else f"{base}.x{ksteps}") + (".fenced" if fenced else "")
    if name in TABLE:
        return name
    h = n // 2
    regs = ", ".join(f"${i}" for i in range(h))
    t = _WGMMA_PTX_TYPE[ab_type]
    per_step = len(a_constraints) + 1
    scale = h + per_step * ksteps
    # later steps accumulate whatever scale-d says: %acc is true ($S == $S) without an immediate predicate
    lines = [f"setp.ne.b32 %scale_d, ${scale}, 0;"] + ([f"setp.eq.b32 %acc, ${scale}, ${scale};"]
                                                       if ksteps > 1 else [])
    # a fence in the statement itself: a register write LLVM or ptxas places between a separate wgmma.fence and the
    # wgmma (an operand's copy, a branch's join) makes ptxas inject a warpgroup.arrive (C7519), and in a divergent
    # path serialize every wgmma of the kernel (C7520)
    lines = (["wgmma.fence.sync.aligned;"] if fenced else []) + lines
    for j in range(ksteps):
        first = h + per_step * j
        a = (f"${first}" if len(a_constraints) == 1
             else "{" + ", ".join(f"${first + i}" for i in range(len(a_constraints))) + "}")
        lines.append(f"wgmma.mma_async.sync.aligned.m64n{n}k{_k_of(ab_type)}.f32.{t}.{t} {{{regs}}}, {a}, "
                     f"${first + len(a_constraints)}, {'%scale_d' if j == 0 else '%acc'}, 1, 1{trans};")
    preds = ".reg .pred %scale_d, %acc;" if ksteps > 1 else ".reg .pred %scale_d;"
    # one instruction per PTX line, as ptxas reports them and as the source map attributes them
    template = "{ " + preds + (" " if ksteps == 1 else "\n\t") + "\n\t".join(lines) + (" }" if ksteps == 1 else "\n\t}")
    constraints = ",".join(["=f"] * h + (a_constraints + ["l"]) * ksteps + ["r"] + [str(i) for i in range(h)])
    a_types = (I64,) if len(a_constraints) == 1 else (I32,) * len(a_constraints)
    TABLE[name] = PtxInstr(template, constraints, f32_struct(h), (a_types + (I64,)) * ksteps + (I32,) + (F32,) * h,
                           convergent=True, side_effect=True, doc=doc)
    return name


# gmem.load/store's ``cache`` hints (ptxgen.ir.ops.gmem.CACHE_HINTS) → (the qualifier after ``ld.global``/``st.global``,
# the L2 priority of a ``createpolicy.fractional`` policy passed with ``.L2::cache_hint``, or None). Every one assembles
# for sm_90a at PTX 8.0 on loads and stores of 1 to 16 bytes (nvJitLink; tests/ptxgen/test_gmem_cache_hints.py).
# ``.L2::evict_first`` written on ld/st itself needs sm_100 (ptxas: "requires .v8.b32/.v4.b64"), so on sm_90 an L2
# priority of its own goes through a policy register; ``.cs`` is evict-first in L1 and L2 both.
CACHE_QUALIFIERS = {
    "normal": ("", None),
    "evict_first": (".L1::evict_first", None),
    "evict_last": (".L1::evict_last", None),
    "no_allocate": (".L1::no_allocate", None),
    "streaming": (".cs", None),
    "l2_evict_first": (".L2::cache_hint", "evict_first"),
    "l2_evict_last": (".L2::cache_hint", "evict_last"),
}

# one access of ``nbytes`` bytes: its PTX type and register constraint, and how many registers
_ACCESS = {1: (".b8", "h", 1), 2: (".b16", "h", 1), 4: (".b32", "r", 1), 8: (".v2.b32", "r", 2),
           16: (".v4.b32", "r", 4)}
_REG_TYPES = {"h": I16, "r": I32}


def _cached_access(op: str, nbytes: int, cache: str, operands: str, guard: str = "") -> str:
    """The PTX of ``op`` (ld/st) ``.global`` with ``cache``'s qualifier on ``nbytes`` bytes, ``operands`` its operand
    text, ``guard`` its predicate prefix (``"@%p "``); for an L2 hint the policy register ``%policy`` is declared and
    created first (the caller wraps the whole in braces)."""
    qualifier, l2 = CACHE_QUALIFIERS[cache]
    access = f"{guard}{op}.global{qualifier}{_ACCESS[nbytes][0]} {operands}{', %policy' if l2 else ''};"
    if not l2:
        return access
    return f".reg .b64 %policy; createpolicy.fractional.L2::{l2}.b64 %policy, 1.0; {access}"


def _registers(first: int, count: int) -> str:
    regs = ", ".join(f"${first + i}" for i in range(count))
    return regs if count == 1 else f"{{{regs}}}"


def ld_global(nbytes: int, cache: str) -> str:
    """The table entry (added on first use) of a global load of ``nbytes`` (1, 2, 4, 8 or 16) bytes with gmem.load's
    ``cache`` hint: ``$0…`` the value as one b8/b16 register (``h``) or one, two or four b32 words, then the 64-bit
    global address (aligned to ``nbytes``). ``ld_global(16, "streaming")`` → ``"ld.global.streaming.16"``, whose PTX is
    ``ld.global.cs.v4.b32 {w0, w1, w2, w3}, [addr];``. No side effect: LLVM keeps it in order with the other memory
    accesses (an asm call may touch memory), and drops it when its value is unused. Post: ``TABLE[name]`` exists."""
    name = f"ld.global.{cache}.{nbytes}"
    if name not in TABLE:
        _kind, letter, count = _ACCESS[nbytes]
        body = _cached_access("ld", nbytes, cache, f"{_registers(0, count)}, [${count}]")
        template = body if not CACHE_QUALIFIERS[cache][1] else f"{{ {body} }}"
        reg = _REG_TYPES[letter]
        TABLE[name] = PtxInstr(template, ",".join([f"={letter}"] * count + ["l"]),
                               reg if count == 1 else ir.LiteralStructType([reg] * count), (I64,),
                               doc=f"load {nbytes} bytes at ${count} ({cache})")
    return name


def st_global(nbytes: int, cache: str) -> str:
    """The table entry (added on first use) of a global store of ``nbytes`` (1, 2, 4, 8 or 16) bytes with
    gmem.store's ``cache`` hint: ``$0`` the 64-bit global address (aligned to ``nbytes``), then the value as one
    b8/b16 register or one, two or four b32 words. ``st_global(16, "streaming")`` → ``"st.global.streaming.16"``:
    ``st.global.cs.v4.b32 [addr], {w0, w1, w2, w3};``. Post: ``TABLE[name]`` exists."""
    name = f"st.global.{cache}.{nbytes}"
    if name not in TABLE:
        _kind, letter, count = _ACCESS[nbytes]
        body = _cached_access("st", nbytes, cache, f"[$0], {_registers(1, count)}")
        template = body if not CACHE_QUALIFIERS[cache][1] else f"{{ {body} }}"
        reg = _REG_TYPES[letter]
        TABLE[name] = PtxInstr(template, ",".join(["l"] + [letter] * count), VOID, (I64,) + (reg,) * count,
                               side_effect=True, doc=f"store {nbytes} bytes at $0 ({cache})")
    return name


def st_global_if(nbytes: int, cache: str = "normal") -> str:
    """The table entry (added on first use) of a predicated global store of ``nbytes`` (4, 8 or 16) bytes with
    gmem.store's ``cache`` hint: ``$0`` the condition (i32, stored where non-zero), ``$1`` the 64-bit global address
    (aligned to ``nbytes``), then the value as one, two or four b32 words. ``st_global_if(8)`` →
    ``"st.global.if.8"``, whose PTX is ``@%p st.global.v2.b32 [addr], {w0, w1};``; ``st_global_if(16, "streaming")``
    → ``"st.global.if.16.streaming"`` (``@%p st.global.cs.v4.b32 …``). Post: ``TABLE[name]`` exists."""
    name = f"st.global.if.{nbytes}" + ("" if cache == "normal" else f".{cache}")
    if name not in TABLE:
        words = nbytes // 4
        body = _cached_access("st", nbytes, cache, f"[$1], {_registers(2, words)}", guard="@%p ")
        TABLE[name] = PtxInstr(f"{{ .reg .pred %p; setp.ne.b32 %p, $0, 0; {body} }}",
                               ",".join(["r", "l"] + ["r"] * words), VOID, (I32, I64) + (I32,) * words,
                               side_effect=True, doc=f"store {nbytes} bytes at $1 where $0 != 0 ({cache})")
    return name


def cp_async(nbytes: int, l2_prefetch: int | None = None) -> str:
    """The entry of one ``cp.async`` of ``nbytes`` (4, 8 or 16) from global to shared memory: ``$0`` the 32-bit
    shared address, ``$1`` the 64-bit global address (both aligned to ``nbytes``), ``$2`` src-size (bytes read; the
    rest of the ``nbytes`` written as zeros). 16 bytes bypass L1 (``.cg``), 4 and 8 cannot (``.ca``);
    ``l2_prefetch`` (64, 128, 256) adds ``.L2::128B`` etc. ``cp_async(16, 128)`` → ``"cp.async.16.L2_128"``:
    ``cp.async.cg.shared.global.L2::128B [$0], [$1], 16, $2;``. Post: ``TABLE[name]`` exists."""
    name = f"cp.async.{nbytes}" + (f".L2_{l2_prefetch}" if l2_prefetch else "")
    if name not in TABLE:
        level = "cg" if nbytes == 16 else "ca"
        hint = f".L2::{l2_prefetch}B" if l2_prefetch else ""
        TABLE[name] = PtxInstr(f"cp.async.{level}.shared.global{hint} [$0], [$1], {nbytes}, $2;", "r,l,r", VOID,
                               (I32, I64, I32), side_effect=True, min_ptx="7.0",
                               doc="asynchronous global → shared copy, zero fill past src-size")
    return name


def wgmma_wait_fenced(count: int, pending: int) -> str:
    """The table entry of ``wgmma.wait_group.sync.aligned N`` that also takes ``count`` f32 accumulator registers as
    tied in/out operands (the asm text does not use them): the values after the wait are its results, so no read of
    them is scheduled before it. ``wgmma_wait_fenced(128, 0)`` → ``"wgmma.wait_group.0.fenced128"``."""
    name = f"wgmma.wait_group.{pending}.fenced{count}"
    if name not in TABLE:
        result = F32 if count == 1 else f32_struct(count)
        TABLE[name] = PtxInstr(f"wgmma.wait_group.sync.aligned {pending};",
                               ",".join(["=f"] * count + [str(i) for i in range(count)]), result, (F32,) * count,
                               convergent=True, side_effect=True,
                               doc="wait for wgmma groups; the accumulators pass through as its results")
    return name


def emit(lx, name: str, args):
    """Build table entry ``name`` as an inline-asm call at ``lx``'s insertion point. ``args`` are LLVM values or
    Python ints (for ``n`` immediates and for ``r``/``l`` operands, turned into constants)."""
    instr = TABLE[name]
    values = []
    for a, t in zip(args, instr.operands):
        values.append(ir.Constant(t, int(a) if int(a) < (1 << 31) else int(a) - (1 << 32))
                      if isinstance(a, int) else a)
    constraints = ",".join(c for c in (instr.constraints, "~{memory}" if instr.side_effect else "") if c)
    asm = ir.InlineAsm(ir.FunctionType(instr.result, [v.type for v in values]), instr.template, constraints,
                       instr.side_effect)
    return lx.b.call(asm, values, attrs=("convergent",) if instr.convergent else ())
