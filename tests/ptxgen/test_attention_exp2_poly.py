"""The attention kernel with a share of P's exponentials on the FP32 pipe (``AttentionConfig.exp2_poly = (k, n)``:
``frag.exp2 {ftz = true, poly = (k, n)}``, FlashAttention-4's remedy for a softmax bound by the MUFU at D = 64): the
CPU interpreter against float64 (non-causal and causal, GQA, ragged tiles, 2 and 3 consumer warpgroups, bf16 and
f16, every exponential by the polynomial), the configuration rule, the PTX (MUFU ex2 replaced share for share, no
spill beyond the default kernel's under the consumers' setmaxnreg budget), the benchmark's variant words; on a GPU
(``-m gpu``) against float64."""
from __future__ import annotations

import dataclasses
import re
import sys

import numpy as np
import pytest

from ptxgen.kernels import AttentionConfig, attention
from ptxgen.kernels.attention import build, choose_config
from test_attention import (assert_matches, assert_matches_torch, random_problem, reference, torch_or_skip,
                            torch_reference)
from test_attention_three_warpgroups import registers_at, wg3


# (B, Hq, Hkv, Sq, Sk, config): ragged query and KV tiles, several KV tiles (the overlapped loop runs), GQA
CASES = [
    (1, 2, 1, 250, 400, wg3(exp2_poly=(1, 4))),
    (1, 2, 1, 300, 200, wg3(causal=True, exp2_poly=(1, 2))),
    (1, 2, 1, 100, 300, dataclasses.replace(choose_config("bf16", 64, True), exp2_poly=(3, 8))),
    (1, 1, 1, 130, 300, AttentionConfig("bf16", 128, 128, 2, False, overlap=True, pingpong=True,
                                        exp2_poly=(1, 3))),
    (1, 1, 1, 70, 150, wg3(dtype="f16", bn=64, exp2_poly=(1, 1))),      # every P by the polynomial
    (1, 1, 1, 100, 200, AttentionConfig("f16", 64, 64, 2, True, exp2_poly=(1, 2))),   # the plain loop
]


def assert_poly_matches(out, lse, want_out, want_lse, dtype):
    """``assert_matches`` with lse held to 1e-4 of max(|lse|, 1) (the GPU tests' bound) instead of 1e-5 relative: the
    polynomial's relative error (≤ 1.02e-4, P = 1 exact at the row's maximum) is the row sum's, so lse's absolute
    error is up to ~1e-4 · (l − 1)/l — on random scores ~1e-5 to 5e-5."""
    assert_matches(out, lse, want_out, want_lse, dtype, lse_rtol=1.0)
    finite = np.isfinite(want_lse)
    assert (np.abs(lse[finite] - want_lse[finite]) / np.maximum(np.abs(want_lse[finite]), 1.0)).max() < 1e-4


@pytest.mark.parametrize("b, hq, hkv, sq, sk, config", CASES)
def test_interpreter_matches_float64(b, hq, hkv, sq, sk, config):
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, config.dtype, seed=sq * 3 + sk)
    out, lse = attention(q, k, v, causal=config.causal, config=config)
    assert_poly_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), config.dtype)


def test_the_share_changes_p():
    """The polynomial's P differs from the MUFU's in the last bits (the test above is not the default kernel's):
    out with every P by the polynomial is not bit for bit the default's, yet both match float64."""
    config = wg3(bn=64)
    q, k, v = random_problem(1, 1, 1, 64, 128, 64, "bf16", seed=4)
    out, lse = attention(q, k, v, config=config)
    out_poly, lse_poly = attention(q, k, v, config=dataclasses.replace(config, exp2_poly=(1, 1)))
    assert not (out == out_poly).all() or not (lse == lse_poly).all()
    assert_poly_matches(out_poly, lse_poly, *reference(q, k, v, False, 0.125), "bf16")


@pytest.mark.parametrize("share", [(5, 4), (1, 0), (-1, 2), (1, 2, 3), (True, 2), 2])
def test_config_rule_names_the_field(share):
    with pytest.raises(ValueError, match=re.escape(f"AttentionConfig.exp2_poly = {share!r}: (k, n), two integers "
                                                   "with n ≥ 1 and 0 ≤ k ≤ n (P's value i takes the polynomial exp2 "
                                                   "where i mod n < k; (0, 1): every value on the MUFU)")):
        AttentionConfig(exp2_poly=share).validate()
    assert AttentionConfig(exp2_poly=[1, 4]).validate().exp2_poly == (1, 4)
    assert AttentionConfig().exp2_poly == (0, 1) and choose_config("bf16", 64, False).exp2_poly == (0, 1)


def ptx_of(config) -> str:
    from ptxgen.lower import compile_kernel

    return compile_kernel(build(config), defer_assembly=True).ptx


def test_default_kernel_is_unchanged():
    """exp2_poly = (0, 1) builds no poly attribute: the kernel text is today's."""
    from ptxgen.ir.text import print_module

    config = choose_config("bf16", 64, False)
    text = print_module(build(config))
    assert "poly" not in text and text == print_module(build(dataclasses.replace(config, exp2_poly=(0, 4))))


@pytest.mark.parametrize("causal", [False, True])
def test_ptx_replaces_mufu_share_for_share_without_new_spills(causal):
    """D = 64, 3 consumer warpgroups (setmaxnreg 160): of each softmax step's 64 P exponentials per thread, the share
    k/n is the polynomial's (one mul.rn.ftz.f32 each, no ex2), the rest and α's stay ex2.approx.ftz.f32; nvJitLink
    at the consumers' 160 registers spills no more than the default kernel."""
    base = choose_config("bf16", 64, causal, seqlens=(8192, 8192))
    assert base.consumer_warpgroups == 3
    default = ptx_of(base)
    ex2 = default.count("ex2.approx.ftz.f32")
    steps = 2   # tile 0's softmax and the loop's (overlap): 64 P values each
    default_spill = registers_at(default, 160)[1]
    for share, taken in (((1, 4), 16), ((1, 2), 32), ((3, 8), 24)):
        ptx = ptx_of(dataclasses.replace(base, exp2_poly=share))
        assert ptx.count("mul.rn.ftz.f32") == steps * taken
        assert ptx.count("ex2.approx.ftz.f32") == ex2 - steps * taken
        assert registers_at(ptx, 160)[1] <= default_spill, share


def test_bench_variant_words():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_attention import variant_fields

    assert variant_fields("poly1of4") == {"exp2_poly": (1, 4)}
    assert variant_fields("wg3-poly3of8") == {"consumer_warpgroups": 3, "exp2_poly": (3, 8)}
    with pytest.raises(SystemExit, match="unknown variant word 'polyof4'"):
        variant_fields("polyof4")


GPU_CASES = [(2, 16, 16, 1024, 1024, 64), (1, 8, 2, 1000, 3001, 64), (3, 6, 2, 193, 257, 64),
             (2, 8, 8, 2048, 2048, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, share", [("bf16", (1, 4)), ("bf16", (1, 2)), ("bf16", (1, 1)), ("f16", (1, 2))])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, hq, hkv, sq, sk, d", GPU_CASES)
def test_gpu_matches_float64(b, hq, hkv, sq, sk, d, causal, dtype, share):
    """Fresh random inputs each run, the configuration the op chooses with the share: out within 1e-2 relative of
    float64, lse within 1e-4 relative, the rows that see no key 0 and +inf."""
    torch = torch_or_skip()
    kind = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    config = dataclasses.replace(choose_config(dtype, d, causal, seqlens=(sq, sk)), exp2_poly=share)
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=kind)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=kind)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=kind)
    out, lse = attention(q, k, v, causal=causal, config=config)
    torch.cuda.synchronize()
    want, want_lse = torch_reference(torch, q, k, v, causal, d ** -0.5)
    assert_matches_torch(torch, out, lse, want, want_lse)
