"""Consumer warpgroups skipping the KV tiles their own rows do not see (``AttentionConfig.skip_unseen``): a ragged last
query tile's empty warpgroups and, causal, each warpgroup's tiles past its own rows' diagonal. In the CPU interpreter
the kernel's out and lse equal, bit for bit, those of the kernel that computes every tile (and float64's), for the
plain loop, the overlap, the ping-pong per item and across a persistent CTA's items, two and three consumer
warpgroups, varlen; the wgmmas it skips are counted; under random copy schedules every turn barrier's arrivals are
taken; the PTX assembles without spills under the consumers' budgets; on a GPU (``-m gpu``) the same equality."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from ptxgen.ir.ops import wgmma
from ptxgen.kernels import AttentionConfig, attention, attention_varlen
from ptxgen.kernels.attention import build, choose_config
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_three_warpgroups import registers_at, wg3
from test_attention_turn_ring import ring, run_ctas_checking_barriers
from test_attention_varlen import assert_sequences_match, packed_problem


def assert_same_up_to_rounding(out, lse, want_out, want_lse):
    """lse within 1e-6 relative (+inf where the other is: rows that see no key), out within one 16-bit rounding."""
    np.testing.assert_allclose(lse, want_lse, rtol=1e-6, atol=0)
    np.testing.assert_allclose(out.astype(np.float32), want_out.astype(np.float32), rtol=2.0 ** -7, atol=1e-30)


def both(config):
    """(config with skip_unseen, without)."""
    return dataclasses.replace(config, skip_unseen=True), dataclasses.replace(config, skip_unseen=False)


# (B, Hq, Hkv, Sq, Sk, config, ctas): ragged last query tiles (a warpgroup or two without rows), causal with Sq < Sk,
# Sq = Sk and Sq > Sk (warpgroups whose rows see fewer KV tiles than the CTA's last row, or none)
CASES = [
    (1, 2, 1, 200, 256, wg3(), None),                                                 # tile 1: warpgroup 0 only
    (1, 2, 1, 330, 300, wg3(causal=True), None),                                     # tile 1: two warpgroups
    (1, 2, 1, 384, 384, wg3(causal=True, pingpong=False), None),                     # overlap, no ping-pong
    (1, 1, 1, 250, 200, wg3(causal=True, overlap=False, epilogue="direct"), None),   # the plain loop
    (1, 2, 1, 100, 300, AttentionConfig("bf16", 64, 64, 2, True, overlap=True, pingpong=True), None),
    (1, 2, 1, 300, 150, AttentionConfig("bf16", 128, 64, 2, True, overlap=True, pingpong=True,
                                        epilogue="tma"), None),                      # rows that see no key
    (1, 1, 1, 70, 200, AttentionConfig("bf16", 256, 64, 2, True), None),              # D = 256's plain loop
    (1, 2, 1, 400, 400, ring(causal=True, warpgroups=3, o_buffer=True), 2),          # the ring across items
    (2, 1, 1, 200, 260, ring(warpgroups=3, o_buffer=True), 2),
    (1, 2, 1, 300, 250, ring(causal=True, bn=64), 2),
    (1, 2, 1, 400, 300, dataclasses.replace(ring(causal=True, warpgroups=3), continuous_turns=False), 2),
]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, config, ctas", CASES)
def test_interpreter_equals_the_kernel_that_computes_every_tile(b, hq, hkv, sq, sk, config, ctas):
    """out and lse as without skipping, and float64's. Not bit for bit: a tile whose scores are all −inf adds P = 0
    and rescales by α = exp2(m·c − m·c), where the FMA against the rounded m·c leaves α = 1 + ε; the skipping
    kernel has no such α (so lse differs by an ulp or two, out within its rounding)."""
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, config.dtype, seed=3 * sq + sk)
    results = []
    for c in both(config):
        out = np.full(q.shape, np.nan, q.dtype)
        results.append(attention(q, k, v, causal=c.causal, out=out, config=c, ctas=ctas))
    assert_same_up_to_rounding(*results[0], *results[1])
    out, lse = results[0]
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), config.dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen(causal):
    """Packed sequences whose last query tiles leave 1 or 2 of the 3 warpgroups without rows."""
    q, k, v, cu_q, cu_k = packed_problem([250, 0, 1, 70], [300, 20, 64, 130], 2, 1, 64, "bf16", seed=9,
                                         extra_rows=2)
    results = []
    for c in both(wg3(causal=causal, epilogue="rows", varlen=True)):
        results.append(attention_varlen(q, k, v, cu_q, cu_k, 250, 300, causal=causal, config=c))
    assert_same_up_to_rounding(*results[0], *results[1])
    out, lse = results[0]
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, "bf16", 64 ** -0.5)


def count_wgmmas(monkeypatch):
    """{op name: warpgroup-executions} of every wgmma the interpreter runs from now on."""
    counts = {"wgmma.mma": 0, "wgmma.mma_rs": 0}
    inner = wgmma._warpgroups

    def counted(ix, op):
        groups = inner(ix, op)
        if op.name in counts:
            counts[op.name] += len(groups)
        return groups

    monkeypatch.setattr(wgmma, "_warpgroups", counted)
    return counts


@pytest.mark.parametrize("sq, sk, causal, skipped, computed", [
    # 2 query tiles × 3 warpgroups × 2 KV tiles; the second tile's 8 rows are warpgroup 0's: 8 of 12
    (200, 256, False, 8, 12),
    # causal, 3 KV tiles of 128 for the second query tile (rows 192 … 383): warpgroup 0 sees 2; the first (rows
    # 0 … 191, 2 tiles): warpgroups 0 and 1 see 1
    (384, 384, True, 12, 15),
])
def test_the_unseen_tiles_run_no_wgmma(monkeypatch, sq, sk, causal, skipped, computed):
    """S = Q·Kᵀ and P·V run once per (warpgroup, tile) it sees, against once per (warpgroup, CTA tile) without."""
    q, k, v = random_problem(1, 1, 1, sq, sk, 64, "bf16", seed=5)
    counts = []
    for c in both(wg3(causal=causal)):
        counted = count_wgmmas(monkeypatch)
        attention(q, k, v, causal=causal, config=c)
        counts.append(dict(counted))
    assert counts == [{"wgmma.mma": skipped, "wgmma.mma_rs": skipped},
                      {"wgmma.mma": computed, "wgmma.mma_rs": computed}]


@pytest.mark.parametrize("schedule", ["lazy", 4, 17])
@pytest.mark.parametrize("config, shape, ctas", [
    (ring(causal=True, warpgroups=3, o_buffer=True), (1, 2, 1, 400, 400), 2),
    (ring(warpgroups=3, epilogue="rows"), (1, 2, 2, 200, 150), 2),
    (ring(causal=True, bn=64), (1, 2, 1, 300, 250), 3),
], ids=["wg3_causal", "wg3_ragged", "wg2_causal"])
def test_random_schedules_leave_no_arrival(config, shape, ctas, schedule):
    """Copies completing lazily or in random orders, races reported: every turn barrier's generations complete (no
    arrival left when a CTA exits) with warpgroups running sections of unseen tiles, and the result is float64's."""
    b, hq, hkv, sq, sk = shape
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, "bf16", seed=sq * sk)
    out, lse, left = run_ctas_checking_barriers(config, q, k, v, ctas, schedule)
    assert left == {}
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), "bf16")


def test_sections_of_unseen_tiles_repeat_the_turns():
    """With ping-pong, each warpgroup's three kinds of section (tile 0's S, the loop's, the last P·V) have a twin
    without wgmmas for the tiles it does not see: twice the turn waits of the kernel that computes every tile, and
    the same wgmmas."""
    from ptxgen.lower import compile_kernel

    skip, every = (compile_kernel(build(c), defer_assembly=True).ptx for c in both(wg3(causal=True)))
    for ident in (1, 2, 3):
        waits = [len(re.findall(rf"\bbarrier\.sync\s+{ident}, 256;", ptx)) for ptx in (skip, every)]
        assert waits == [6, 3], ident
    mma = r"wgmma\.mma_async\.sync\.aligned"
    assert len(re.findall(mma, skip)) == len(re.findall(mma, every))


@pytest.mark.parametrize("d, causal, seqlens", [(64, False, (1024, 1024)), (64, False, (8192, 8192)),
                                                (64, True, (1024, 1024)), (64, True, (8192, 8192)),
                                                (128, False, (1024, 1024)), (128, False, (8192, 8192)),
                                                (128, True, (1024, 1024)), (256, True, (1024, 1024))])
def test_chosen_kernels_do_not_spill(d, causal, seqlens):
    """Under the consumers' setmaxnreg budget the kernels choose_config picks (skip_unseen on) spill nothing."""
    from ptxgen.lower import compile_kernel

    config = choose_config("bf16", d, causal, seqlens=seqlens)
    assert config.skip_unseen
    ptx = compile_kernel(build(config), defer_assembly=True).ptx
    assert registers_at(ptx, config.register_budgets[1])[1] == 0


def test_bench_variant_words():
    from test_attention_persistent import bench_variant_fields

    variant_fields = bench_variant_fields()
    assert variant_fields("noskip") == {"skip_unseen": False}
    assert variant_fields("wg3-nopersist-skip") == {"consumer_warpgroups": 3, "persistent": False, "o_buffer": False,
                                                    "continuous_turns": False, "item_table": False, "q_tiles": 1,
                                                    "skip_unseen": True}


# -- GPU ---------------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("b, hq, hkv, sq, sk, d, causal, warpgroups", [
    (4, 8, 8, 1000, 1000, 64, False, 3), (4, 8, 8, 1000, 1000, 64, True, 3), (2, 8, 2, 1100, 1500, 64, True, 3),
    (2, 8, 2, 1500, 1100, 64, True, 2), (2, 8, 8, 1000, 1000, 128, True, 2), (2, 4, 4, 300, 700, 256, True, 2),
])
def test_gpu_equals_the_kernel_that_computes_every_tile(b, hq, hkv, sq, sk, d, causal, warpgroups):
    """Same random inputs: out and lse as without skipping (up to the rounding of ``assert_same_up_to_rounding``),
    for choose_config's kernel (with the given consumer warpgroups; Sq = 1000 at D = 64 non-causal packs its lone
    query tiles, the kernel without skipping does not)."""
    torch = torch_or_skip()
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
    base = choose_config("bf16", d, causal, seqlens=(sq, sk))
    if d == 64:
        base = dataclasses.replace(base, consumer_warpgroups=warpgroups)
    # the kernel that computes every tile does not pack lone query tiles (pack_lone needs skip_unseen)
    configs = (base, dataclasses.replace(base, skip_unseen=False, pack_lone=False, stages=2))
    results = [attention(q, k, v, causal=causal, config=c) for c in configs]
    torch.cuda.synchronize()
    assert_same_up_to_rounding(*(x.float().cpu().numpy() for pair in results for x in pair))

