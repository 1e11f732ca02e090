"""attention / attention_varlen with a negative or zero softmax_scale: the kernel takes its row maximum over the
unscaled scores, so the op runs a negative scale on −K with |scale|; a zero scale is a uniform softmax. Checked in the
CPU interpreter against float64 and, with ``-m gpu``, on the GPU."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.kernels import attention, attention_varlen
from test_attention import assert_matches, random_problem, reference
from test_attention_varlen import assert_sequences_match, packed_problem


@pytest.mark.parametrize("scale", [-0.125, -1.0, 0.0])
@pytest.mark.parametrize("causal", [False, True])
def test_interpreter_scale_sign(scale, causal):
    q, k, v = random_problem(1, 2, 1, 70, 90, 64, "bf16", seed=11)
    k_before = k.copy()
    out, lse = attention(q, k, v, causal=causal, softmax_scale=scale)
    assert_matches(out, lse, *reference(q, k, v, causal, scale), "bf16")
    assert np.array_equal(k.view(np.uint16), k_before.view(np.uint16))   # the caller's k is not touched


def test_interpreter_negative_scale_is_the_mirror_of_the_positive_one():
    """scale·q·k = (−scale)·q·(−k): the outputs agree bit for bit with the positive scale on −K."""
    q, k, v = random_problem(1, 2, 2, 40, 70, 64, "bf16", seed=12)
    negative = attention(q, k, v, softmax_scale=-0.2)
    mirrored = attention(q, -k, v, softmax_scale=0.2)
    for got, want in zip(negative, mirrored):
        assert np.array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_varlen_interpreter_negative_scale():
    q, k, v, cu_q, cu_k = packed_problem([50, 1, 80], [90, 7, 60], 2, 1, 64, "bf16", seed=13)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 80, 90, causal=True, softmax_scale=-0.3)
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, True, "bf16", -0.3)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("sign", [-1.0, 0.0])
def test_gpu_scale_sign(causal, d, sign):
    from test_attention import assert_matches_torch, torch_or_skip, torch_reference
    torch = torch_or_skip()
    q = torch.randn(2, 700, 4, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 900, 2, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 900, 2, d, device="cuda", dtype=torch.bfloat16)
    k_before = k.clone()
    scale = sign * d ** -0.5
    out, lse = attention(q, k, v, causal=causal, softmax_scale=scale)
    torch.cuda.synchronize()
    assert_matches_torch(torch, out, lse, *torch_reference(torch, q, k, v, causal, scale))
    assert torch.equal(k, k_before)
