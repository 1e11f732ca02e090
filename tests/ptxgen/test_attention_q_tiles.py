"""Q's tile double-buffered across a persistent CTA's work items (``AttentionConfig.q_tiles`` = 2): the producer loads
item r's Q into tile r mod 2 once item r − 2's consumers released it (``%qfree[r mod 2]``), the consumers wait on
``%qbar[r mod 2]`` at use r / 2. In the CPU interpreter out and lse match float64 with several items per CTA (each
tile reused), under random copy schedules, no arrival left on a named barrier, for the configs that take it and for
the paths it shares (O staged in Q's tile, packed lone tiles), and the varlen kernels against each sequence's float64;
the rules; on a GPU (``-m gpu``) the same bits as one Q tile (the same arithmetic in the same order), dense and
varlen."""
from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

from ptxgen.ir.text import print_module
from ptxgen.kernels import attention, attention_varlen
from ptxgen.kernels.attention import AttentionConfig, build, choose_config
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_turn_ring import run_ctas_checking_barriers
from test_attention_varlen import assert_sequences_match, packed_problem

CONFIGS = {
    # the choices: D = 64 causal (three warpgroups at every length), D = 128 causal up to 2048 keys
    "d64_causal": choose_config("bf16", 64, True, seqlens=(1024, 1024)),
    "d128_causal": choose_config("bf16", 128, True, seqlens=(1024, 1024)),
    # two warpgroups; non-causal with O staged in Q's tile (released after the epilogue)
    "d64_wg2": dataclasses.replace(choose_config("bf16", 64, True, seqlens=(1024, 1024)), consumer_warpgroups=2),
    "d64_q_staging": dataclasses.replace(choose_config("bf16", 64, False, seqlens=(2048, 2048)), persistent=True,
                                         continuous_turns=True, q_tiles=2),
    # the packed lone tiles' choice (three warpgroups, 5 stages, O staged in Q's tile), and with two warpgroups
    "d64_pack": choose_config("bf16", 64, False, seqlens=(1024, 1024)),
    "d64_pack_wg2": dataclasses.replace(choose_config("bf16", 64, False, seqlens=(1024, 1024)),
                                        consumer_warpgroups=2, stages=3),
}
# (batch, Hq, Hkv, Sq, Sk, CTAs): 3-8 items per CTA, ragged tiles, Sq > Sk (items that see no key)
SHAPES = [(1, 4, 2, 300, 300, 2), (2, 2, 1, 200, 150, 3), (1, 3, 3, 260, 500, 2), (1, 2, 1, 300, 100, 2)]


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[3]}x{s[4]}" for s in SHAPES])
def test_interpreter_matches_float64(name, shape):
    config = CONFIGS[name].validate()
    assert config.q_tiles == 2 and config.persistent
    b, hq, hkv, sq, sk, ctas = shape
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, "bf16", seed=sq * sk + 7 * config.head_dim)
    want = reference(q, k, v, config.causal, config.head_dim ** -0.5)
    out, lse, left = run_ctas_checking_barriers(config, q, k, v, ctas, 4)
    assert left == {}
    assert_matches(out, lse, *want, "bf16")


# (q lengths, k lengths, D, causal): an empty query sequence, a one-token one, a sequence with no key, Sq > Sk
VARLEN_CASES = [([100, 1, 130, 0, 64, 200], [150, 30, 70, 5, 64, 210], 64, True),
                ([300, 260], [300, 120], 64, False), ([70, 200, 33], [300, 20, 40], 128, True)]


@pytest.mark.parametrize("q_lens, k_lens, d, causal", VARLEN_CASES)
def test_varlen_interpreter_matches_each_sequence(q_lens, k_lens, d, causal):
    """The persistent varlen kernel with two Q tiles (rule 14's D = 64 picks, and D = 128 made so) on 3 CTAs."""
    config = choose_config("bf16", d, causal, varlen=True, seqlens=(max(q_lens), max(k_lens)))
    config = dataclasses.replace(config, q_tiles=2).validate()
    assert config.persistent
    q, k, v, cu_q, cu_k = packed_problem(q_lens, k_lens, 2, 1, d, "bf16", seed=len(q_lens), extra_rows=3)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal, config=config, ctas=3)
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, "bf16", d ** -0.5)


def test_two_tiles_and_barriers_in_the_kernel():
    """Two Q tiles are one (2, bm, D) ring and two barriers of each kind; one tile keeps the single ones."""
    text = print_module(build(CONFIGS["d64_causal"]))
    assert "%qbar = mbarrier.alloc {count = 2}" in text and "%qfree = mbarrier.alloc {count = 2}" in text
    assert re.search(r"%sq_ring = smem.alloc .*\(1,2\)\):\(0,0,\(64,512\),\(1,0\),\(0,12288\)\)\]", text)
    one = print_module(build(dataclasses.replace(CONFIGS["d64_causal"], q_tiles=1)))
    assert "%sq_ring" not in one and "%qbar = mbarrier.alloc {count = 1}" in one


def test_rules():
    with pytest.raises(ValueError, match=r"AttentionConfig.q_tiles = 3: Q has 1 tile, or 2"):
        AttentionConfig(q_tiles=3).validate()
    with pytest.raises(ValueError, match=r"AttentionConfig.q_tiles = 2: .* it needs persistent = True$"):
        AttentionConfig(q_tiles=2).validate()
    # the bytes: two Q tiles of 192 × 64 beside O's tile and two K/V stages
    config = CONFIGS["d64_causal"]
    assert config.smem_bytes() == 2 * 192 * 128 + 192 * 128 + 2 * 2 * 128 * 128 + 2 * 16 + 2 * 2 * 16
    too_big = dataclasses.replace(choose_config("bf16", 128, True, seqlens=(1024, 1024)), stages=3)
    with pytest.raises(ValueError, match=r"AttentionConfig.stages = 3: two Q tiles \(128 × 128\), O's tile"):
        too_big.validate()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["d64_causal", "d128_causal", "d64_q_staging", "d64_pack"])
def test_gpu_same_bits_as_one_tile(name):
    torch = torch_or_skip()
    config = CONFIGS[name]
    q = torch.randn(2, 1000, 8, config.head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 1100, 4, config.head_dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 1100, 4, config.head_dim, device="cuda", dtype=torch.bfloat16)
    out, lse = attention(q, k, v, causal=config.causal, config=config)
    ref_out, ref_lse = attention(q, k, v, causal=config.causal, config=dataclasses.replace(config, q_tiles=1))
    torch.cuda.synchronize()
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False])
def test_gpu_varlen_same_bits_as_one_tile(causal):
    torch = torch_or_skip()
    lens = [1000, 1, 517, 1024, 64]
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens), 8, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q[:, :4]), torch.randn_like(q[:, :4])
    config = choose_config("bf16", 64, causal, varlen=True, seqlens=(max(lens), max(lens)))
    assert config.q_tiles == 2
    out, lse = attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=causal, config=config)
    ref_out, ref_lse = attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=causal,
                                        config=dataclasses.replace(config, q_tiles=1))
    torch.cuda.synchronize()
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
