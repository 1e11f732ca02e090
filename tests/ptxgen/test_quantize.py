"""The fp8 quantizers (ptxgen.kernels.quantize): per token (row × 128 columns) and per 128 × 128 block, in the
interpreter bit for bit against their numpy references (which follow DeepGEMM's per_token_cast_to_fp8 /
per_block_cast_to_fp8), the references' own properties, the errors, the PTX, and the GPU."""
import re

import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import fp8_gemm_nt, per_block_cast_to_fp8, per_token_cast_to_fp8
from ptxgen.kernels.quantize import (
    build_per_block, build_per_token, dequantize_per_block, dequantize_per_token, per_block_cast_to_fp8_reference,
    per_token_cast_to_fp8_reference,
)
from gpu_torch import torch_or_skip

HOST = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}


def sample(shape, dtype, rng):
    """Values over several magnitudes, an all-zero row and a row with one large outlier."""
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-4, 4, (shape[0], 1)))
    if shape[0] > 2:
        x[1] = 0
        x[2, -1] = 1e3
    return x.astype(HOST[dtype])


def same_bits(q, r):
    return q.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and np.array_equal(q.view(np.uint8), r.view(np.uint8))


@pytest.mark.parametrize("shape", [(1, 128), (17, 272), (133, 384), (5, 16), (40, 1000)])
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_per_token_is_the_reference_bit_for_bit(shape, dtype):
    rng = np.random.default_rng()
    x = sample(shape, dtype, rng)
    q, scales = per_token_cast_to_fp8(x)
    qr, sr = per_token_cast_to_fp8_reference(x)
    assert q.shape == shape and scales.shape == (shape[0], -(-shape[1] // 128)) and scales.dtype == np.float32
    assert same_bits(q, qr)
    assert np.array_equal(scales, sr)


@pytest.mark.parametrize("shape", [(1, 128), (17, 272), (133, 384), (130, 16), (200, 300)])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_per_block_is_the_reference_bit_for_bit(shape, dtype):
    rng = np.random.default_rng()
    x = sample(shape, dtype, rng)
    q, scales = per_block_cast_to_fp8(x)
    qr, sr = per_block_cast_to_fp8_reference(x)
    assert scales.shape == (-(-shape[0] // 128), -(-shape[1] // 128))
    assert same_bits(q, qr)
    assert np.array_equal(scales, sr)


def test_tma_aligned_scales_are_m_major():
    rng = np.random.default_rng()
    x = sample((17, 300), "bf16", rng)
    q, scales = per_token_cast_to_fp8(x, tma_aligned_scales=True)
    assert tuple(s // 4 for s in scales.strides) == (1, 20)
    assert np.array_equal(scales, per_token_cast_to_fp8_reference(x)[1])


def test_reference_properties():
    """Each block's largest |value| becomes ±448; scales are amax/448 with amax clamped to 1e-4 (an all-zero block
    gives q = 0 and scale 1e-4/448); dequantization is within e4m3's half ulp (2⁻⁴ relative) of the input."""
    rng = np.random.default_rng()
    x = sample((40, 300), "f32", rng)
    q, s = per_token_cast_to_fp8_reference(x)
    assert np.array_equal(s[1], np.full(3, np.float32(1e-4) / np.float32(448), np.float32))
    assert not np.any(q[1].astype(np.float32))
    blocks = np.abs(q.astype(np.float32)[:, :256]).reshape(40, 2, 128).max(axis=2)
    assert np.all(blocks[[0] + list(range(2, 40))] == 448)
    assert np.allclose(s[0, 0], np.abs(x[0, :128]).max() / 448, rtol=1e-6)
    d = dequantize_per_token(q, s)
    assert np.all(np.abs(d - x) <= 2 ** -4 * np.abs(x) + 2 ** -9 * np.repeat(s, 128, axis=1)[:, :300] * 448 / 2 ** 6)
    qb, sb = per_block_cast_to_fp8_reference(x)
    db = dequantize_per_block(qb, sb)
    assert np.all(np.abs(db - x) <= 2 ** -4 * np.abs(x) + np.repeat(sb, 128, axis=1)[:, :300].max() * 2 ** -9)


def test_quantized_operands_feed_the_gemm():
    """DeepGEMM's usage: activations per token, weights per block, fp8_gemm_nt ≈ x @ w.T (fp8's 2⁻⁴ error)."""
    rng = np.random.default_rng()
    x = rng.standard_normal((33, 272)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((144, 272)).astype(ml_dtypes.bfloat16)
    a, sa = per_token_cast_to_fp8(x, tma_aligned_scales=True)
    b, sb = per_block_cast_to_fp8(w)
    c = fp8_gemm_nt(a, sa, b, sb, sm_count=2)
    exact = dequantize_per_token(a, sa) @ dequantize_per_block(b, sb).T
    assert np.linalg.norm(c.astype(np.float64) - exact) / np.linalg.norm(exact) < 4e-3
    want = x.astype(np.float64) @ w.astype(np.float64).T
    assert np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want) < 0.05


@pytest.mark.parametrize("call, error, message", [
    (lambda: per_token_cast_to_fp8(np.zeros((4, 128), np.float64)), TypeError,
     re.escape("per_token_cast_to_fp8: x has dtype numpy float64; per_token_cast_to_fp8 takes bf16 (torch.bfloat16, "
               "ml_dtypes.bfloat16) or f16 (torch.float16, numpy.float16) or f32 (torch.float32, numpy.float32)")),
    (lambda: per_block_cast_to_fp8(np.zeros((4, 4, 128), np.float32)), ValueError,
     r"per_block_cast_to_fp8: x must be 2-D \(M, K\), not of shape \(4, 4, 128\)"),
    (lambda: per_token_cast_to_fp8([[1.0]]), TypeError,
     re.escape("per_token_cast_to_fp8: x must be a CUDA tensor (torch, or any DLPack array: cupy, JAX) or a numpy "
               "array, not list")),
    (lambda: build_per_token("e4m3"), ValueError, "quantize: dtype must be one of bf16, f16, f32, not 'e4m3'"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match="^" + message + "$"):
        call()


def test_empty_inputs():
    q, s = per_token_cast_to_fp8(np.zeros((0, 256), np.float32))
    assert q.shape == (0, 256) and s.shape == (0, 2)
    q, s = per_block_cast_to_fp8(np.zeros((5, 0), np.float32))
    assert q.shape == (5, 0) and s.shape == (1, 0)


@pytest.mark.parametrize("build", [build_per_token, build_per_block])
def test_kernels_assemble(build):
    """PTX through LLVM's NVPTX backend and ptxas (nvJitLink): no spills, the e4m3 conversions packed in pairs."""
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    spec = Specialization.of(x=TensorSpec(1, True, 16), q=TensorSpec(1, True, 16), scales=TensorSpec(1, True, 4))
    compiled = compile_kernel(build("bf16").kernels[0], spec)
    assert compiled.spill_bytes == 0
    assert "cvt.rn.satfinite.e4m3x2.f32" in compiled.ptx


# -- the GPU -----------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 7168), (128, 1536), (1, 512), (133, 384), (2112, 7168)])
def test_gpu_quantizers_match_the_references(shape):
    """Fresh bf16 inputs on the GPU against the numpy references: scales exactly, codes exactly (IEEE division and
    multiplication in f32 on both sides)."""
    torch = torch_or_skip()
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 3
    host = x.float().cpu().numpy().astype(ml_dtypes.bfloat16)
    for run, ref in ((per_token_cast_to_fp8, per_token_cast_to_fp8_reference),
                     (per_block_cast_to_fp8, per_block_cast_to_fp8_reference)):
        q, s = run(x)
        torch.cuda.synchronize()
        qr, sr = ref(host)
        assert np.array_equal(s.cpu().numpy(), sr)
        assert np.array_equal(q.view(torch.uint8).cpu().numpy(), qr.view(np.uint8))
