"""ptxgen.kernels.attention: the FA3-structured forward kernel against a float64 reference in the CPU interpreter
(non-causal and causal, GQA, Sq ≠ Sk, ragged last tiles, a single row, bf16 and f16), the layout facts the kernel
rests on (P's accumulator fragment is the RS A fragment; O takes S's row statistics as a prefix), its PTX through
the real lowering, the op's argument errors, and on a GPU (``-m gpu``) against float64 and torch's SDPA."""
from __future__ import annotations

import re
import time

import ml_dtypes
import numpy as np
import pytest

from layoutc.hopper import accumulator_tv
from ptxgen.ir.ops.wgmma import rs_a_tv
from ptxgen.ir.types import SCALARS
from ptxgen.kernels import AttentionConfig, attention
from ptxgen.kernels.attention import build, choose_config
from ptxgen.kernels.attention.epilogue import quad_row_tv
from gpu_torch import torch_or_skip

HOST = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
# out is rounded once to 16 bits and P once before P·V: the relative error of a correct kernel is ~2^-9 (bf16)
OUT_TOLERANCE = {"bf16": 6e-3, "f16": 1e-3}


def reference(q, k, v, causal: bool, scale: float):
    """(out, lse) in float64: q (B, Sq, Hq, D), k and v (B, Sk, Hkv, D); causal aligned to the bottom-right corner;
    a row that sees no key has out 0 and lse +inf (FlashAttention's convention)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    sq, hq, sk, hkv = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    k, v = np.repeat(k, hq // hkv, axis=2), np.repeat(v, hq // hkv, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq, -np.inf, s)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", p / np.where(l == 0, 1.0, l), v)
    lse = np.where(l[..., 0] == 0, np.inf, np.log(np.where(l[..., 0] == 0, 1.0, l[..., 0])) + m[..., 0])
    return out, lse


def random_problem(b, hq, hkv, sq, sk, d, dtype, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(HOST[dtype])
                 for shape in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d)))


def assert_matches(out, lse, want_out, want_lse, dtype, lse_rtol=1e-5):
    err = np.linalg.norm(out.astype(np.float64) - want_out) / max(np.linalg.norm(want_out), 1e-30)
    assert err < OUT_TOLERANCE[dtype], err
    empty = np.isinf(want_lse)
    assert np.array_equal(np.isposinf(lse), empty)
    assert not np.any(out[np.moveaxis(empty, 1, 2)].astype(np.float64))   # rows that see no key are 0
    np.testing.assert_allclose(lse[~empty], want_lse[~empty], rtol=lse_rtol, atol=0)


# (B, Hq, Hkv, Sq, Sk, D, causal, bn, dtype): the smallest shapes that still cover ragged Q and KV tiles, several
# tiles of each, GQA, Sq < Sk and Sq > Sk (causal: whole rows with no key), D < bn (O's statistics a prefix of S's)
CASES = [
    (1, 2, 1, 100, 192, 64, False, 64, "bf16"),
    (2, 2, 1, 192, 100, 128, False, 128, "bf16"),
    (1, 2, 1, 100, 192, 64, True, 64, "bf16"),
    (1, 2, 1, 192, 100, 128, True, 128, "bf16"),
    (1, 2, 2, 64, 192, 128, True, 128, "bf16"),
    (1, 2, 1, 100, 300, 64, False, 128, "bf16"),
    (1, 2, 1, 300, 200, 64, True, 128, "bf16"),
    (1, 1, 1, 1, 1, 64, False, 64, "bf16"),
    (1, 1, 1, 1, 1, 128, True, 128, "bf16"),
    (1, 2, 1, 64, 100, 64, True, 64, "f16"),
    (1, 1, 1, 100, 64, 128, False, 128, "f16"),
    (1, 2, 1, 100, 150, 256, True, 64, "bf16"),      # D = 256: O in four 64-column accumulators
    (1, 1, 1, 130, 100, 128, False, 64, "bf16"),     # D = 128 with bn = 64: two
]


OVERLAP_CASES = [
    (1, 2, 1, 100, 192, 64, False, 64, "bf16"),     # 3 KV tiles: the loop runs twice
    (1, 2, 1, 300, 100, 128, True, 128, "bf16"),    # CTAs with rows that see no key; one KV tile: no loop trip
    (1, 2, 1, 100, 300, 64, True, 128, "f16"),
    (1, 1, 1, 1, 1, 64, True, 64, "bf16"),
    (1, 1, 1, 100, 150, 256, True, 64, "bf16"),
]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, d, causal, bn, dtype, overlap, stages",
                         [c + (False, 2) for c in CASES] + [c + (True, 2) for c in OVERLAP_CASES]
                         + [OVERLAP_CASES[0] + (True, 1)])
def test_interpreter_matches_float64(b, hq, hkv, sq, sk, d, causal, bn, dtype, overlap, stages):
    q, k, v = random_problem(b, hq, hkv, sq, sk, d, dtype, seed=sq * 1000 + sk)
    start = time.perf_counter()
    out, lse = attention(q, k, v, causal=causal, config=AttentionConfig(dtype, d, bn, stages, causal, overlap))
    assert time.perf_counter() - start < 60   # CI budget: each case takes about a second
    assert out.shape == q.shape and out.dtype == q.dtype and lse.shape == (b, hq, sq) and lse.dtype == np.float32
    assert_matches(out, lse, *reference(q, k, v, causal, 1 / np.sqrt(d)), dtype)


@pytest.mark.parametrize("case", OVERLAP_CASES[:3])
@pytest.mark.parametrize("schedule", ["lazy", 11])
def test_interpreter_pingpong_matches_float64(case, schedule):
    """overlap + pingpong: the consumer warpgroups' wgmma sections alternate through named barriers; with a random
    schedule of the copies (``schedule = 11``) and races reported, the result is still the reference's."""
    from ptxgen.interp import interpret
    from ptxgen.kernels.attention import run

    b, hq, hkv, sq, sk, d, causal, bn, dtype = case
    q, k, v = random_problem(b, hq, hkv, sq, sk, d, dtype, seed=5)
    out = np.zeros(q.shape, q.dtype)
    lse = np.zeros((b, hq, sq), np.float32)
    config = AttentionConfig(dtype, d, bn, 2, causal, overlap=True, pingpong=True)
    interpret(run.kernel_module(config), run.kernel_arguments(q, k, v, out, lse, d ** -0.5,
                                                              lambda x: x.transpose(0, 2, 1, 3)),
              schedule=schedule)
    assert_matches(out, lse, *reference(q, k, v, causal, d ** -0.5), dtype)


@pytest.mark.parametrize("case, overlap", [(case, overlap) for case in OVERLAP_CASES[:3] for overlap in (False, True)]
                         + [(OVERLAP_CASES[4], True)])
def test_interpreter_tma_epilogue_matches_float64(case, overlap):
    """epilogue = "tma": O staged by stmatrix in the warpgroup's rows of Q's tile and stored by TMA (rows past Sq
    clipped), alone and with overlap + ping-pong."""
    b, hq, hkv, sq, sk, d, causal, bn, dtype = case
    q, k, v = random_problem(b, hq, hkv, sq, sk, d, dtype, seed=9)
    config = AttentionConfig(dtype, d, bn, 2, causal, overlap=overlap, pingpong=overlap, epilogue="tma")
    out, lse = attention(q, k, v, causal=causal, config=config)
    assert_matches(out, lse, *reference(q, k, v, causal, d ** -0.5), dtype)


def test_interpreter_long_kv_config_matches_float64():
    """The configuration chosen for long non-causal D = 128 loops (176-row KV tiles, persistent, O staged in Q's
    tile) on a problem whose KV loop ends in a ragged 48-row tile and whose query tiles outnumber the CTAs."""
    config = choose_config("bf16", 128, False, seqlens=(8192, 8192))
    assert (config.bn, config.persistent, config.o_buffer) == (176, True, False)
    from ptxgen.kernels.attention import run

    q, k, v = random_problem(1, 3, 1, 150, 400, 128, "bf16", seed=17)
    out = np.zeros(q.shape, q.dtype)
    lse = np.zeros((1, 3, 150), np.float32)
    run.run_numpy(config, q, k, v, out, lse, 128 ** -0.5, ctas=2)   # 6 work items on 2 CTAs
    assert_matches(out, lse, *reference(q, k, v, False, 128 ** -0.5), "bf16")


def test_interpreter_scale_out_and_transposed_inputs():
    """A given softmax_scale and ``out``, and q, k, v that are (B, H, S, D) arrays seen as (B, S, H, D)."""
    rng = np.random.default_rng(7)
    bhsd = [rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for shape in ((1, 2, 70, 64), (1, 1, 90, 64),
                                                                                 (1, 1, 90, 64))]
    q, k, v = (x.transpose(0, 2, 1, 3) for x in bhsd)
    out = np.full((1, 70, 2, 64), 7, ml_dtypes.bfloat16)
    got, lse = attention(q, k, v, causal=True, softmax_scale=0.3, out=out)
    assert got is out
    assert_matches(out, lse, *reference(q, k, v, True, 0.3), "bf16")


def test_empty_problems():
    q, k, v = random_problem(1, 2, 1, 5, 0, 64, "bf16", 1)
    out, lse = attention(q, k, v)
    assert not np.any(out.astype(np.float32)) and np.all(np.isposinf(lse))
    q, k, v = random_problem(1, 2, 1, 0, 5, 64, "bf16", 1)
    out, lse = attention(q, k, v)
    assert out.shape == (1, 0, 2, 64) and lse.shape == (1, 2, 0)


# -- the layout facts --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("n", [16, 64, 128, 176, 256])
def test_p_accumulator_fragment_is_the_rs_a_fragment(dtype, n):
    """S's f32 accumulator (64 × N, m64nNk16) and P's 16-bit RS A fragment (64 × N, N/16 k-steps) place every (row,
    column) of the tile in the same thread and value: frag.cast of S is P's A operand with no data movement."""
    acc, a = accumulator_tv(n), rs_a_tv(SCALARS[dtype], 64, n)
    for t in range(128):
        assert [acc((t, v)) for v in range(n // 2)] == [a((t, v)) for v in range(n // 2)]


@pytest.mark.parametrize("d, bn", [(64, 64), (64, 128), (128, 128), (64, 256), (128, 256)])
def test_o_rows_are_a_prefix_of_s_rows(d, bn):
    """Value v < D/2 of O's accumulator (64 × D) lies in the same row as value v of S's (64 × bn): O's rescale and
    division take S's row statistics through frag.slice."""
    o, s = accumulator_tv(d), accumulator_tv(bn)
    for t in range(128):
        assert [o((t, v)) % 64 for v in range(d // 2)] == [s((t, v)) % 64 for v in range(d // 2)]


def test_lse_rows_are_the_quad_leaders_values_0_and_2():
    acc = accumulator_tv(64)
    tv = quad_row_tv()
    assert sorted(tv((t, 0)) for t in range(32)) == sorted(set(tv((t, 0)) for t in range(32)))
    for t in range(0, 128, 4):
        assert acc((t, 0)) % 64 == tv((t // 4, 0))
        assert acc((t, 2)) % 64 == tv((t // 4, 0)) + 8
    assert sorted([tv((t, 0)) for t in range(32)] + [tv((t, 0)) + 8 for t in range(32)]) == list(range(64))


# -- the kernel's text and PTX -----------------------------------------------------------------------------------------

def test_kernel_text_round_trips_and_builds_deterministically():
    from ptxgen.ir.text import parse_module, print_module

    text = print_module(build(AttentionConfig(causal=True)))
    assert print_module(parse_module(text)) == text
    assert print_module(build(AttentionConfig(causal=True))) == text
    for form in ("wgmma.mma %q_rows, %k_nk", "wgmma.mma_rs %p16, %v_nk", "frag.mask_past %s", "kind = max", "kind = add",
                 "frag.exp2", "gpu.roles"):
        assert form in text, form


@pytest.mark.parametrize("config", [AttentionConfig(causal=True), AttentionConfig("f16", 64, 128)])
def test_ptx_through_the_real_lowering(config):
    from ptxgen.lower import compile_kernel

    compiled = compile_kernel(build(config))
    ptx = compiled.ptx
    d, bn, t = config.head_dim, config.bn, config.dtype
    # S: one m64n{bn}k16 per 16 columns of D; P·V: one m64n{D}k16 per 16 rows of the KV tile, A in registers
    wgmma = rf"wgmma\.mma_async\.sync\.aligned\.m64n{{}}k16\.f32\.{t}\.{t} \{{{{[^}}}}]*\}}}}, "
    assert len(re.findall(wgmma.format(bn) + "%rd", ptx)) == d // 16       # A through its descriptor (SS)
    assert len(re.findall(wgmma.format(d) + r"\{", ptx)) == bn // 16      # A as four registers (RS)
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global", ptx)) == 3 * d // 64
    assert len(re.findall(r"ex2\.approx", ptx)) >= bn // 2
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 8      # two row reductions: 2 rows × xor 1, xor 2
    for form in ("setmaxnreg.inc.sync.aligned.u32 240", "setmaxnreg.dec.sync.aligned.u32 24",
                 "wgmma.wait_group.sync.aligned 0", "mbarrier.try_wait.parity.shared::cta.b64"):
        assert form in ptx, form
    assert "__local_depot" not in ptx
    assert compiled.spill_bytes in (0, None)
    assert "C7509" not in compiled.info_log and "C7512" not in compiled.info_log   # no wgmma serialized


def test_overlap_ptx_keeps_the_pv_group_in_flight():
    """overlap: one ``wgmma.wait 1`` (S_j done, P_{j-1}·V_{j-1} in flight); no call (ptxas would serialize the
    wgmmas). nvJitLink's relocatable compile holds the kernel to the launch budget of 168 registers (setmaxnreg
    ignored, C7504; the launcher JIT-compiles such kernels from PTX on the GPU), so its register use is not judged
    here."""
    from ptxgen.lower import compile_kernel

    compiled = compile_kernel(build(AttentionConfig(causal=True, overlap=True)))
    assert compiled.ptx.count("wgmma.wait_group.sync.aligned 1;") == 1
    assert "C7509" not in compiled.info_log
    assert " call" not in compiled.ptx


def test_pingpong_ptx():
    """D = 64 with ping-pong: within the launch budget even for nvJitLink (no spill, no wgmma serialized); warpgroup
    w waits for its turn on named barrier w + 1 (256 threads) before each of its three wgmma sections (tile 0's S,
    the loop's, the last P·V) — three instructions, hence the unaligned ``barrier.sync`` — and hands the turn over
    with ``bar.arrive`` on the other's (warpgroup 1 once more before its first section, not after its last). Built
    without ``skip_unseen``, whose sections of unseen tiles repeat each wait and arrival
    (tests/ptxgen/test_attention_skip_unseen.py)."""
    from ptxgen.lower import compile_kernel

    compiled = compile_kernel(build(AttentionConfig(head_dim=64, overlap=True, pingpong=True, skip_unseen=False)))
    ptx = compiled.ptx
    for ident in (1, 2):
        assert len(re.findall(rf"\bbarrier\.sync\s+{ident}, 256;", ptx)) == 3
        assert len(re.findall(rf"\bbar\.arrive\s+{ident}, 256;", ptx)) == 3
    assert not re.findall(r"\bbar\.sync\s+[12],", ptx)
    assert compiled.spill_bytes in (0, None)
    for code in ("C7509", "C7512", "C7514"):
        assert code not in compiled.info_log, code


def test_tma_epilogue_ptx():
    """epilogue = "tma", D = 128: 8 stmatrix.x4 per thread (64 values), two 64-column TMA stores (one per
    warpgroup's leader, the loop unrolled), the proxy fence and each consumer warpgroup's own barrier (3 or 4, 128
    threads) between them."""
    from ptxgen.lower import compile_kernel

    compiled = compile_kernel(build(AttentionConfig(head_dim=128, epilogue="tma")))
    ptx = compiled.ptx
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx)) == 128 // 16
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.global\.shared::cta", ptx)) == 2
    assert "fence.proxy.async.shared::cta" in ptx
    assert re.search(r"\bbar\.sync\s+3, 128;", ptx) and re.search(r"\bbar\.sync\s+4, 128;", ptx)
    assert compiled.spill_bytes in (0, None)
    for code in ("C7509", "C7512", "C7514"):
        assert code not in compiled.info_log, code


def test_choose_config():
    assert choose_config("bf16", 64, True) == AttentionConfig("bf16", 64, 128, 2, True, overlap=True, pingpong=True,
                                                              epilogue="tma", persistent=True, o_buffer=True,
                                                              continuous_turns=True, item_table=True,
                                                              align_bottom=True, q_tiles=2)
    assert choose_config("bf16", 256, False) == AttentionConfig("bf16", 256, 64, 2, False, epilogue="tma")
    assert choose_config("f16", 128, False, varlen=True) == AttentionConfig(
        "f16", 128, 128, 2, False, overlap=True, pingpong=True, epilogue="rows", varlen=True, persistent=True,
        o_buffer=True, continuous_turns=True, rescale_threshold=8.0)
    # lazy rescaling for D = 128 only (D = 64 ran 1-2% slower with it)
    assert choose_config("bf16", 128, True, seqlens=(2048, 2048)).rescale_threshold == 8.0
    assert choose_config("bf16", 64, False, seqlens=(2048, 2048)).rescale_threshold == 0.0
    assert choose_config("bf16", 256, True).rescale_threshold == 0.0
    # the persistent kernel below 16384 keys (its turn ring across the items); three warpgroups persistent only for
    # D = 64 non-causal loops of at most 1024 keys and dense causal ones of any length (varlen's of more than 1024)
    assert not choose_config("bf16", 128, True, seqlens=(16384, 16384)).persistent
    short = choose_config("bf16", 64, False, seqlens=(1024, 1024))
    assert (short.consumer_warpgroups, short.persistent, short.o_buffer, short.continuous_turns, short.q_tiles) == \
        (3, True, False, True, 2)   # packed lone tiles (rules 8 and 13)
    assert not choose_config("bf16", 64, False, seqlens=(1025, 1025)).persistent
    causal = choose_config("bf16", 64, True, varlen=True, seqlens=(1024, 1024))
    assert (causal.consumer_warpgroups, causal.persistent, causal.continuous_turns) == (2, True, True)
    for sk in (64, 512, 1024, 1025, 2048, 4096):
        causal = choose_config("bf16", 64, True, seqlens=(sk, sk))
        assert (causal.consumer_warpgroups, causal.persistent, causal.o_buffer, causal.continuous_turns,
                causal.q_tiles) == (3, True, True, True, 2), sk
    # two Q tiles: dense causal persistent kernels, D = 128 up to 2048 keys
    assert [choose_config("bf16", 128, True, seqlens=(sk, sk)).q_tiles for sk in (1024, 2048, 2049, 8192)] == \
        [2, 2, 1, 1]
    assert choose_config("bf16", 128, False, seqlens=(1024, 1024)).q_tiles == 1
    # ... and varlen D = 64's persistent kernels (rule 14), not varlen D = 128's
    assert [choose_config("bf16", 64, causal, varlen=True, seqlens=(sk, sk)).q_tiles
            for causal, sk in ((True, 1024), (True, 4096), (False, 1024), (True, 8192), (False, 2048))] == [2, 2, 2, 1, 1]
    assert choose_config("bf16", 128, True, varlen=True, seqlens=(1024, 1024)).q_tiles == 1
    long_causal = choose_config("bf16", 64, True, seqlens=(16384, 16384))   # with the item table at every length
    assert (long_causal.consumer_warpgroups, long_causal.persistent, long_causal.item_table) == (3, True, True)
    assert choose_config("bf16", 256, False).o_block == 64
    # D = 128 dense non-causal from 4096 keys: 176-row KV tiles, persistent at any length, O staged in Q's tile
    long = choose_config("bf16", 128, False, seqlens=(16384, 16384))
    assert (long.bn, long.persistent, long.o_buffer) == (176, True, False)
    assert choose_config("bf16", 128, False, seqlens=(4095, 4095)).bn == 128
    # ... unless 176-row tiles pad the keys by over 1% more than 128-row ones: then 128-row tiles with O's own tile
    exact = choose_config("bf16", 128, False, seqlens=(4096, 4096))
    assert (exact.bn, exact.persistent, exact.o_buffer) == (128, True, True)
    for sk in range(4096, 20000, 16):
        config = choose_config("bf16", 128, False, seqlens=(1024, sk)).validate()
        waste = {bn: -(-sk // bn) * bn - sk for bn in (128, 176)}
        assert config.bn == (128 if waste[176] - waste[128] > sk / 100 else 176), sk
        assert (config.persistent, config.o_buffer) == (True, config.bn == 128), sk
    assert choose_config("bf16", 128, True, seqlens=(8192, 8192)).bn == 128
    assert choose_config("bf16", 128, False, varlen=True, seqlens=(8192, 8192)).bn == 128
    for d in (64, 128, 256):
        assert choose_config("f16", d, False).validate().head_dim == d


@pytest.mark.parametrize("config, message", [
    (AttentionConfig(head_dim=96), "AttentionConfig.head_dim = 96: the kernel is built for head dims 64, 128 and 256"),
    (AttentionConfig(dtype="e4m3"), "AttentionConfig.dtype = 'e4m3': Q, K and V are bf16 or f16"),
    (AttentionConfig(head_dim=128, bn=72), "AttentionConfig.bn = 72: a KV tile has a multiple of 16 rows"),
    (AttentionConfig(head_dim=128, bn=32), "AttentionConfig.bn = 32: below head_dim = 128, O is kept in blocks of bn "
                                           "columns"),
    (AttentionConfig(stages=4, bn=256), r"AttentionConfig.stages = 4: Q's tile \(128 × 128\) and 4 stages of K and V "
                                        r"tiles \(256 × 128\) need 557192 bytes"),
    (AttentionConfig(registers=(24, 248)), r"AttentionConfig.registers = \(24, 248\): 128 × 24 \+ 256 × 248"),
    (AttentionConfig(pingpong=True), r"AttentionConfig.pingpong = True: the ping-pong alternates the sections that "
                                     r"queue S_j and P_\{j-1\}·V_\{j-1\} together: it needs overlap = True"),
])
def test_config_rules(config, message):
    with pytest.raises(ValueError, match=message):
        config.validate()


# -- bad arguments -----------------------------------------------------------------------------------------------------

def _bf16(*shape):
    return np.zeros(shape, ml_dtypes.bfloat16)


Q, KV = _bf16(1, 3, 4, 64), _bf16(1, 5, 2, 64)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"k": _bf16(1, 5, 2, 32)}, ValueError, "attention: k has head dim 32 but q has 64: q, k and v must have one "
                                            "head dim"),
    ({"q": _bf16(1, 3, 3, 64)}, ValueError, r"attention: q has 3 heads, not a multiple of k's 2: each KV head serves "
                                            r"Hq/Hkv query heads \(GQA\), so Hq must be a multiple of Hkv"),
    ({"q": _bf16(1, 3, 4, 96), "k": _bf16(1, 5, 2, 96), "v": _bf16(1, 5, 2, 96)}, ValueError,
     "attention: q has head dim 96; the kernel supports head dims 64, 128 and 256"),
    ({"q": _bf16(2, 3, 4, 64)}, ValueError, "attention: k has batch 1 but q has 2: q, k and v must have one batch "
                                            "size"),
    ({"v": _bf16(1, 6, 2, 64)}, ValueError, r"attention: v has shape \(1, 6, 2, 64\) but k has \(1, 5, 2, 64\)"),
    ({"q": _bf16(3, 4, 64)}, ValueError, r"attention: q must be 4-D \(batch, seqlen, heads, head_dim\), not of shape "
                                         r"\(3, 4, 64\)"),
    ({"q": np.zeros((1, 3, 4, 64), np.float32)}, TypeError, r"attention: q has dtype numpy float32; attention takes "
                                                            r"bf16 \(torch.bfloat16, ml_dtypes.bfloat16\) or f16"),
    ({"v": np.zeros((1, 5, 2, 64), np.float16)}, TypeError, "attention: v has dtype numpy float16 but q has numpy "
                                                            "bfloat16: q, k and v must have one dtype"),
    ({"k": [[1.0]]}, TypeError, "attention: k must be a CUDA tensor"),
    ({"softmax_scale": "0.1"}, TypeError, "attention: softmax_scale must be a number or None"),
    ({"softmax_scale": float("nan")}, ValueError, "attention: softmax_scale must be finite, not nan"),
    ({"causal": 1}, TypeError, "attention: causal must be a bool, not int"),
    ({"out": _bf16(1, 3, 4, 128)}, ValueError, r"attention: out must have q's shape \(1, 3, 4, 64\), not "
                                               r"\(1, 3, 4, 128\)"),
    ({"out": np.zeros((1, 3, 4, 64), np.float16)}, TypeError, "attention: out has dtype numpy float16 but q has "
                                                              "numpy bfloat16"),
    ({"out": _bf16(1, 3, 4, 128)[..., ::2]}, ValueError, "attention: out must have unit stride along head_dim"),
    ({"config": AttentionConfig(head_dim=128)}, ValueError, "attention: config is for bf16, head_dim 128, causal "
                                                            "False, but the call is bf16, head_dim 64, causal False"),
])
def test_bad_arguments_are_named(kwargs, error, message):
    args = {"q": Q, "k": KV, "v": KV}
    args.update(kwargs)
    with pytest.raises(error, match=message):
        attention(**args)


# -- on the GPU --------------------------------------------------------------------------------------------------------


def torch_reference(torch, q, k, v, causal, scale):
    """float64 (out, lse) on the GPU: q (B, Sq, Hq, D), k, v (B, Sk, Hkv, D); bottom-right causal."""
    sq, hq, sk, hkv = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
    kd, vd = kd.repeat_interleave(hq // hkv, dim=1), vd.repeat_interleave(hq // hkv, dim=1)
    s = (qd @ kd.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))[..., None])
    p = torch.where(torch.isfinite(lse)[..., None], p, torch.zeros_like(p))
    return (p @ vd).transpose(1, 2), torch.where(torch.isfinite(lse), lse, torch.full_like(lse, float("inf")))


def assert_matches_torch(torch, out, lse, want, want_lse) -> None:
    """out within 1e-2 relative (Frobenius) of the float64 ``want``; lse +inf exactly where ``want_lse`` is, and
    elsewhere within 1e-4 of max(|lse|, 1): an error δ in lse is a relative error δ of the row's softmax denominator
    exp(lse); a row of one key (causal) has lse = its one score, which can be ~0, where f32's rounding of that score
    alone (~1e-7 absolute) is not small relative to |lse|."""
    assert (torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)).item() < 1e-2
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isinf(lse), ~finite)
    assert ((lse[finite].double() - want_lse[finite]).abs() / want_lse[finite].abs().clamp_min(1.0)).max() < 1e-4


GPU_CASES = [(2, 16, 16, 1024, 1024, 128), (1, 16, 2, 2048, 2048, 128), (4, 8, 8, 512, 512, 64),
             (2, 8, 2, 1000, 1000, 256), (1, 4, 4, 300, 700, 256),
             (1, 4, 1, 1000, 3001, 64), (1, 4, 4, 3001, 1000, 128), (3, 6, 2, 129, 257, 128), (1, 2, 1, 1, 1, 64),
             (1, 2, 2, 77, 77, 64), (2, 4, 2, 500, 4500, 128),   # 176-row KV tiles when non-causal
             (1, 8, 4, 2560, 2560, 64)]   # causal: three warpgroups persistent (choose_config rule 9)


@pytest.mark.gpu
@pytest.mark.parametrize("b, hq, hkv, sq, sk, d", GPU_CASES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_gpu_matches_float64(b, hq, hkv, sq, sk, d, causal, dtype):
    """Fresh random inputs each run; out within 1.1× SDPA's own error against float64 (its FLASH or cuDNN backend,
    whichever torch picks), never worse than 1e-2 relative; lse within 1e-4 of max(|lse|, 1) (a relative bound on exp(lse))."""
    torch = torch_or_skip()
    kind = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=kind)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=kind)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=kind)
    scale = d ** -0.5
    out, lse = attention(q, k, v, causal=causal)
    torch.cuda.synchronize()
    want, want_lse = torch_reference(torch, q, k, v, causal, scale)
    assert_matches_torch(torch, out, lse, want, want_lse)
    err = (torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)).item()
    if sq == sk or not causal:   # SDPA's is_causal aligns to the top-left corner: compare where both agree
        sdpa = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, scale=scale,
            enable_gqa=hq != hkv).transpose(1, 2)
        sdpa_err = (torch.linalg.norm(sdpa.double() - want) / torch.linalg.norm(want)).item()
        assert err <= 1.1 * sdpa_err + 1e-4, (err, sdpa_err)


@pytest.mark.gpu
def test_gpu_torch_bhsd_views_and_out():
    """torch's (B, H, S, D) tensors passed as transposed views, and ``out``: no copy needed, same results."""
    torch = torch_or_skip()
    q = torch.randn(2, 8, 300, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 500, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 2, 500, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(2, 300, 8, 128, device="cuda", dtype=torch.bfloat16)
    got, lse = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, out=out)
    torch.cuda.synchronize()
    assert got.data_ptr() == out.data_ptr()
    want, want_lse = torch_reference(torch, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), True,
                                     128 ** -0.5)
    assert (torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)).item() < 1e-2


@pytest.mark.gpu
def test_gpu_out_that_tma_cannot_store_into():
    """An ``out`` whose rows are not 16-byte aligned (a (B, S, H, 68)[..., :64] slice: 136-byte rows): the chosen TMA
    epilogue gives way to the direct store (same results); a config forcing ``tma`` is refused before launch."""
    torch = torch_or_skip()
    q = torch.randn(1, 200, 4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 300, 2, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, 300, 2, 64, device="cuda", dtype=torch.bfloat16)
    out = torch.zeros(1, 200, 4, 68, device="cuda", dtype=torch.bfloat16)[..., :64]
    attention(q, k, v, causal=True, out=out)
    torch.cuda.synchronize()
    want, _ = torch_reference(torch, q, k, v, True, 64 ** -0.5)
    assert (torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)).item() < 1e-2
    with pytest.raises(ValueError, match=r"attention: config stores out by TMA \(epilogue = 'tma'\), but out's base "
                                         r"or strides .* are not 16-byte aligned: pass another out or epilogue "
                                         r"'direct'"):
        attention(q, k, v, causal=True, out=out, config=choose_config("bf16", 64, True))


def test_example_prints_the_kernel_and_runs(capsys):
    import importlib.util
    import pathlib

    from ptxgen.ir.text import print_module

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "attention.py"
    spec = importlib.util.spec_from_file_location("example_attention", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main([]) == 0
    printed = capsys.readouterr().out
    assert print_module(build(AttentionConfig(causal=True))) in printed
    assert example.main(["--run"]) == 0
    assert "relative error against float64" in capsys.readouterr().out


@pytest.mark.parametrize("config", [AttentionConfig(), AttentionConfig(head_dim=64, epilogue="tma"),
                                    AttentionConfig(head_dim=256, bn=64, epilogue="tma")])
def test_torch_layouts_encode_the_kernels_maps(config):
    """What the launcher does with a torch argument, without a GPU: the tensor maps of FlashAttention's (B, S, H, D)
    tensors — contiguous, and torch's (B, H, S, D) tensors transposed — seen as (B, H, S, D) have the mode order and
    box the kernel was compiled for (``encode_tensor_map`` checks both, not encoding)."""
    from ptxgen.ir.ops.tma import map_params
    from ptxgen.runtime.kernel_launch import LaunchError
    from ptxgen.runtime.tensor_map import encode_tensor_map

    kernel = build(config).kernels[0]
    maps = {p.name: p.type for p in kernel.params if p.type.__class__.__name__ == "TensorMapType"}
    assert set(maps) == ({"q", "k", "v", "out"} if config.epilogue == "tma" else {"q", "k", "v"})
    b, s, h, d = 2, 300, 4, config.head_dim
    bshd = (s * h * d, h * d, d, 1)        # contiguous (B, S, H, D), modes 1 and 2 swapped: (B, H, S, D)
    bhsd = (h * s * d, s * d, d, 1)        # torch's contiguous (B, H, S, D), passed as x.transpose(1, 2) and back
    for name, t in maps.items():
        for strides in ((bshd[0], bshd[2], bshd[1], 1), bhsd):
            assert encode_tensor_map("attention_fwd", name, 0, (b, h, s, d), strides, t, map_params(t),
                                     encode=False) == bytes(128)
        with pytest.raises(LaunchError, match=f"argument {name}: cannot encode"):   # no unit stride along D
            encode_tensor_map("attention_fwd", name, 0, (b, h, s, d), (2 * s * h * d, 2 * d, 2 * h * d, 2), t,
                              map_params(t), encode=False)
