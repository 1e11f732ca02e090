"""Attention with FlashAttention-4's conditional rescaling (``AttentionConfig.rescale_threshold``): O and l are
rescaled only in the warps where a row's max rose by more than τ (exp2 units); the results stay FlashAttention's.
Checked in the CPU interpreter against float64 on scores whose max keeps rising (so both branches run), and on the
GPU."""
from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

from ptxgen.ir.ops import OPS
from ptxgen.kernels import attention
from ptxgen.kernels.attention import choose_config
from test_attention import assert_matches, random_problem, reference

CASES = [  # (head dim, causal, Sq, Sk, Hq, Hkv, τ)
    (64, True, 200, 200, 2, 1, 8.0),
    (64, False, 300, 150, 2, 2, 8.0),
    (128, False, 130, 333, 2, 1, 8.0),
    (128, True, 97, 260, 4, 2, 3.0),
    (64, False, 256, 1024, 2, 1, 15.0),
]


def rising_keys(k, scale_to: float = 4.0):
    """K scaled by 1 … ``scale_to`` along the keys: later scores are larger, so each row's max rises tile after tile,
    by steps small and large."""
    sk = k.shape[1]
    ramp = (1 + (scale_to - 1) * np.arange(sk) / sk)[None, :, None, None]
    return (k.astype(np.float32) * ramp).astype(k.dtype)


def lazy_config(d, causal, sq, sk, tau):
    return dataclasses.replace(choose_config("bf16", d, causal, seqlens=(sq, sk)), rescale_threshold=tau)


@pytest.mark.parametrize("d, causal, sq, sk, hq, hkv, tau", CASES)
def test_interpreter_matches_float64(d, causal, sq, sk, hq, hkv, tau):
    q, k, v = random_problem(1, hq, hkv, sq, sk, d, "bf16", seed=5)
    k = rising_keys(k)
    out, lse = attention(q, k, v, causal=causal, config=lazy_config(d, causal, sq, sk, tau))
    assert_matches(out, lse, *reference(q, k, v, causal, d ** -0.5), "bf16")


def test_both_branches_run(monkeypatch):
    """On rising scores some warps move their max (the vote true) and most keep it (false)."""
    votes = collections.Counter()
    vote = OPS["gpu.vote_any"]
    interpret = vote.interpret

    def counting(op, ix):
        interpret(op, ix)
        result = ix.get(op.results[0])[ix.mask]
        votes.update(result[::32].tolist())   # one per warp
    monkeypatch.setattr(vote, "interpret", counting)
    q, k, v = random_problem(1, 2, 1, 256, 1024, 64, "bf16", seed=6)
    out, lse = attention(q, k, v, config=lazy_config(64, False, 256, 1024, 8.0))
    assert_matches(out, lse, *reference(q, k, v, False, 64 ** -0.5), "bf16")
    assert votes[True] > 0 and votes[False] > votes[True]


def test_a_large_jump_after_a_stale_max():
    """Keys whose scores jump by far more than 2^τ late in the row: the warp must move its max there (a P of
    exp2(rise) would overflow otherwise)."""
    q, k, v = random_problem(1, 2, 2, 64, 512, 64, "bf16", seed=7)
    k = k.astype(np.float32)
    k[:, 400:] *= 12.0
    k = k.astype(q.dtype)
    out, lse = attention(q, k, v, config=lazy_config(64, False, 64, 512, 8.0))
    assert np.all(np.isfinite(out.astype(np.float32)))
    assert_matches(out, lse, *reference(q, k, v, False, 64 ** -0.5), "bf16")


@pytest.mark.parametrize("tau, shown", [(-1.0, "-1.0"), (16.0, "16.0"), (True, "True"), ("8", "'8'")])
def test_bad_threshold(tau, shown):
    config = dataclasses.replace(choose_config("bf16", 64, False), rescale_threshold=tau)
    with pytest.raises(ValueError, match=rf"rescale_threshold = {shown}: τ is a number from 0 \(rescale at every new "
                                         r"max\) to 15 \(P ≤ 2\^τ must stay within f16's range\)"):
        config.validate()


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlens", [(1024, 1024), (700, 1900)])
def test_gpu_matches_float64(d, causal, seqlens):
    from test_attention import assert_matches_torch, torch_or_skip, torch_reference
    torch = torch_or_skip()
    sq, sk = seqlens
    q = torch.randn(2, sq, 4, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, sk, 2, d, device="cuda", dtype=torch.bfloat16)
    k = k * torch.linspace(1.0, 4.0, sk, device="cuda", dtype=torch.bfloat16)[None, :, None, None]
    v = torch.randn(2, sk, 2, d, device="cuda", dtype=torch.bfloat16)
    out, lse = attention(q, k, v, causal=causal, config=lazy_config(d, causal, sq, sk, 8.0))
    torch.cuda.synchronize()
    assert_matches_torch(torch, out, lse, *torch_reference(torch, q, k, v, causal, d ** -0.5))
