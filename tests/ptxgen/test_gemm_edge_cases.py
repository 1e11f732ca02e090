"""A fresh user's edge cases of the GEMM-family ops (matmul, linear, scaled_mm, the block-scaled fp8 GEMMs, the
quantizers and the scale-layout helpers): empty operands, inf/NaN, out= aliasing an operand, bad sm_count / scale /
helper arguments. CPU tests run the interpreter on numpy arrays; the @pytest.mark.gpu twins take torch tensors of fresh
random data against float64."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import (choose_block_scaled_config, choose_config, fp8_gemm_nt, get_mn_major_tma_aligned_tensor,
                            get_tma_aligned_size, m_grouped_fp8_gemm_nt_contiguous, m_grouped_fp8_gemm_nt_masked,
                            matmul, per_block_cast_to_fp8, per_token_cast_to_fp8, scaled_mm)
from ptxgen.kernels.quantize import dequantize_per_block, dequantize_per_token, per_token_cast_to_fp8_reference
from gpu_torch import torch_or_skip

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
RNG = np.random.default_rng(18)


def rand(*shape, dtype=BF16):
    return RNG.standard_normal(shape).astype(dtype)


def f64(x):
    return np.asarray(x, np.float64)


def rel_err(got, want):
    return np.linalg.norm(f64(got) - want) / np.linalg.norm(want)


# -- empty operands: ml_dtypes' empty arrays have strides (0, 0), which the stride checks refused ----------------------

def test_empty_fp8_operands_give_empty_results():
    a0 = np.zeros((0, 32), E4M3)
    assert a0.strides == (0, 0)      # what made the row-major checks refuse an empty operand
    b = rand(3, 32, dtype=E4M3)
    assert scaled_mm(a0, b.T, 1.0, 1.0).shape == (0, 3)
    assert scaled_mm(rand(4, 32, dtype=E4M3), a0.T, 1.0, 1.0).shape == (4, 0)
    b16, sb = np.zeros((16, 32), E4M3), np.ones((1, 1), np.float32)
    assert fp8_gemm_nt(a0, np.zeros((0, 1), np.float32), b16, sb).shape == (0, 16)
    c = fp8_gemm_nt(rand(5, 32, dtype=E4M3), np.ones((5, 1), np.float32), np.zeros((0, 32), E4M3),
                    np.zeros((0, 1), np.float32))
    assert c.shape == (5, 0)
    c = m_grouped_fp8_gemm_nt_contiguous(a0, np.zeros((0, 1), np.float32), np.zeros((2, 16, 32), E4M3),
                                         np.ones((2, 1, 1), np.float32), None, np.zeros(0, np.int32))
    assert c.shape == (0, 16)


def test_grouped_k_zero_gives_zeros():
    """K = 0: every product is the empty sum (torch's zeros); before, reshaping the (G, NB, 0) scales failed."""
    out = np.full((128, 32), 7, BF16)
    c = m_grouped_fp8_gemm_nt_contiguous(np.zeros((128, 0), E4M3), np.zeros((128, 0), np.float32),
                                         np.zeros((2, 32, 0), E4M3), np.zeros((2, 1, 0), np.float32), out,
                                         np.zeros(128, np.int32))
    assert c is out and np.array_equal(f64(c), np.zeros((128, 32)))
    c = m_grouped_fp8_gemm_nt_masked(np.zeros((2, 128, 0), E4M3), np.zeros((2, 128, 0), np.float32),
                                     np.zeros((2, 32, 0), E4M3), np.zeros((2, 1, 0), np.float32), None,
                                     np.array([5, 128], np.int32), 64)
    assert c.shape == (2, 128, 32) and np.array_equal(f64(c), np.zeros((2, 128, 32)))


# -- torch.matmul's shapes: 1-D and (≥ 3)-D a, 1-D b (were refused: "matmul: a must be 2-D (M, K)") -------------------

@pytest.mark.parametrize("a_shape, b_shape", [((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,)), ((2, 3, 5), (5, 3)),
                                              ((2, 1, 3, 5), (5,)), ((0, 3, 5), (5, 3))])
def test_matmul_takes_torch_matmul_shapes(a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape)
    want = f64(a) @ f64(b)
    c = matmul(a, b, sm_count=1)
    assert c.shape == want.shape and c.dtype == BF16
    assert np.allclose(f64(c), want, rtol=1e-2, atol=1e-2)


def test_matmul_reshaped_out_and_errors():
    a, b = rand(2, 3, 5)[:, ::-1], rand(5, 3)
    out = np.zeros((2, 3, 3), BF16)
    assert matmul(a, b, out=out, sm_count=1) is out and rel_err(out, f64(a) @ f64(b)) < 1e-2
    with pytest.raises(ValueError) as e:
        matmul(a, b, out=np.zeros((6, 3), BF16))
    assert str(e.value) == "matmul: out must have shape (2, 3, 3), not (6, 3)"
    with pytest.raises(ValueError) as e:
        matmul(rand(4, 5), rand(2, 5, 3))
    assert str(e.value) == ("matmul: b must be 2-D (K, N) or 1-D (K,) (a batched b is not supported), not of shape "
                            "(2, 5, 3)")
    with pytest.raises(ValueError) as e:
        matmul(np.zeros((), BF16), b)
    assert str(e.value) == "matmul: a must have at least 1 dimension (..., K), not shape ()"
    with pytest.raises(ValueError) as e:
        matmul(rand(4), b)
    assert str(e.value) == "matmul: b has 5 rows but a has 4 columns: a (M, K) @ b (K, N) needs b.shape[0] == K"


# -- out= aliasing an operand ------------------------------------------------------------------------------------------

def test_matmul_out_aliasing_a_gives_the_product_of_the_old_values():
    """C's tiles used to be stored over A while other tiles still read it (relative error 146 on this shape)."""
    a, b = rand(4, 300), rand(300, 300)
    want = f64(a) @ f64(b)
    c = matmul(a, b, out=a, sm_count=1)
    assert c is a and rel_err(a, want) < 1e-2


def test_scaled_mm_out_aliasing_bias():
    a, w = rand(4, 32, dtype=E4M3), rand(8, 32, dtype=E4M3)
    bias = np.zeros((1, 8), BF16)
    bias[0] = rand(8)
    want = f64(a) @ f64(w).T * 0.5 + f64(bias[0])
    c = scaled_mm(a, w.T, 0.5, 1.0, bias=bias[0], out=np.broadcast_to(bias, (4, 8)).copy(), sm_count=1)
    assert rel_err(c, want) < 1e-2
    out = np.zeros((4, 8), BF16)
    out[0] = bias[0]
    c = scaled_mm(a, w.T, 0.5, 1.0, bias=out[0], out=out, sm_count=1)
    assert c is out and rel_err(out, want) < 1e-2


def test_out_of_any_strides_takes_the_product():
    """torch's out= takes a transposed or strided view (this out was refused: "out must have unit stride along N")."""
    a, b = rand(4, 5), rand(5, 3)
    want = f64(a) @ f64(b)
    for out in (np.zeros((3, 4), BF16).T, np.zeros((4, 6), BF16)[:, ::2], np.zeros((4, 3), BF16)[::-1, ::-1]):
        assert matmul(a, b, out=out, sm_count=1) is out and rel_err(out, want) < 1e-2
    qa, qw = rand(4, 32, dtype=E4M3), rand(3, 32, dtype=E4M3)
    out = np.zeros((3, 4), BF16).T
    assert scaled_mm(qa, qw.T, 0.5, 1.0, out=out, sm_count=1) is out
    assert rel_err(out, f64(qa) @ f64(qw).T * 0.5) < 1e-2


def test_numpy_views_of_odd_byte_strides():
    """Views at an odd byte offset or with a pitch that is no whole number of elements: read as they lie (operands),
    stored through a copy (out), copied (block scales: were refused, "… strides that are whole elements, not None")."""
    a = np.ndarray((4, 5), dtype=BF16, buffer=np.zeros(64, np.uint8), offset=1, strides=(11, 2))
    a[...] = rand(4, 5)
    b = rand(5, 3)
    out = np.ndarray((4, 3), dtype=BF16, buffer=np.zeros(40, np.uint8), offset=1, strides=(7, 2))
    assert matmul(a, b, out=out, sm_count=1) is out and rel_err(out, f64(a) @ f64(b)) < 1e-2
    q = np.ndarray((4, 32), dtype=E4M3, buffer=np.zeros(160, np.uint8), offset=3, strides=(33, 1))
    q[...] = rand(4, 32, dtype=E4M3)
    scales = np.ndarray((4, 1), dtype=np.float32, buffer=np.zeros(32, np.uint8), offset=2, strides=(6, 4))
    scales[...] = [[0.5], [1.0], [2.0], [0.25]]
    w = rand(16, 32, dtype=E4M3)
    want = f64(q) * f64(scales) @ f64(w).T
    assert rel_err(fp8_gemm_nt(q, scales, w, np.ones((1, 1), np.float32), sm_count=1), want) < 1e-2


# -- inf / NaN: values, not numpy warnings -----------------------------------------------------------------------------

def test_inf_nan_and_overflow_propagate_without_warnings():
    a, b = rand(4, 7), rand(7, 3)
    a[0, 0], a[0, 1], a[2, 3] = np.inf, -np.inf, np.nan
    a[1, 0] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # the interpreter's numpy RuntimeWarnings used to surface here
        c = f64(matmul(a, b, sm_count=1))
        big = matmul(np.full((2, 4), 3e38, BF16), np.full((4, 2), 2, BF16), sm_count=1)
        q, scales = per_token_cast_to_fp8(np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, -1.0]], np.float32))
        ref_q, ref_scales = per_token_cast_to_fp8_reference(np.array([[1.0, np.inf, 2.0]], np.float32))
    with np.errstate(all="ignore"):
        want = f64(a) @ f64(b)
    assert np.array_equal(np.isnan(c), np.isnan(want))
    assert np.array_equal(c[1], want[1])      # row 1: ±inf as float64 gives
    assert np.all(np.isnan(c[2]))               # row 2 holds a NaN
    assert np.all(np.isinf(f64(big)))         # 2.4e39 rounds to bf16's inf, as torch's would
    assert np.isnan(scales[0, 0]) and np.isinf(scales[1, 0])
    assert np.isinf(ref_scales[0, 0]) and np.isnan(f64(ref_q[0, 1])) and f64(ref_q[0, 0]) == 0


# -- argument checks ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, error, shown", [(0, ValueError, "0"), (-1, ValueError, "-1"),
                                                 (True, TypeError, "bool True"), (2.5, TypeError, "float 2.5"),
                                                 ("2", TypeError, "str '2'")])
def test_sm_count_must_be_a_positive_int(value, error, shown):
    a, b = rand(3, 5), rand(5, 2)
    with pytest.raises(error) as e:
        matmul(a, b, sm_count=value)
    assert str(e.value) == ("matmul: sm_count must be an int ≥ 1 (the CTAs of the persistent grid) or None, not "
                            + shown)
    with pytest.raises(error) as e:
        fp8_gemm_nt(rand(3, 32, dtype=E4M3), np.ones((3, 1), np.float32), rand(16, 32, dtype=E4M3),
                    np.ones((1, 1), np.float32), sm_count=value)
    assert str(e.value).startswith("fp8_gemm_nt: sm_count must be an int ≥ 1")


def test_sm_count_numpy_int_runs():
    a, b = rand(3, 5), rand(5, 2)
    assert rel_err(matmul(a, b, sm_count=np.int64(1)), f64(a) @ f64(b)) < 1e-2


@pytest.mark.parametrize("scale, shown", [(None, "NoneType None"), ("1", "str '1'"), (True, "bool True")])
def test_scaled_mm_scale_that_is_no_number(scale, shown):
    a, w = rand(4, 32, dtype=E4M3), rand(3, 32, dtype=E4M3)
    with pytest.raises(TypeError) as e:
        scaled_mm(a, w.T, scale, 1.0)
    assert str(e.value) == ("scaled_mm: scale_a must be a number or a 1-element float32 tensor (a per-tensor scale), "
                            f"not {shown}")


def test_scaled_mm_scales_any_float_and_out_dtype_message():
    a, w = rand(4, 32, dtype=E4M3), rand(3, 32, dtype=E4M3)
    exact = f64(a) @ f64(w).T
    for sa, sb in ((0.0, 1.0), (-1.5, 2.0), (np.float32(2), np.float64(0.25)), (np.array(2.0, np.float32),
                                                                                 np.array([0.5], np.float32))):
        c = scaled_mm(a, w.T, sa, sb, sm_count=1)
        want = exact * float(np.asarray(sa).item()) * float(np.asarray(sb).item())
        assert np.allclose(f64(c), want, rtol=1e-2, atol=1e-2)
    assert np.all(np.isnan(f64(scaled_mm(a, w.T, np.nan, 1.0, sm_count=1))))
    with pytest.raises(TypeError) as e:
        scaled_mm(a, w.T, 1.0, 1.0, out_dtype=np.float32)
    assert str(e.value) == "scaled_mm: out_dtype must be bf16 or f16 (torch.bfloat16, torch.float16), not float32"


@pytest.mark.parametrize("call, error, message", [
    (lambda: choose_config(5, 5, 5, "bf16", 0), ValueError,
     "choose_config: sm_count must be ≥ 1 (the SMs the persistent grid fills), not 0"),
    (lambda: choose_config(True, 5, 5, "bf16"), TypeError, "choose_config: m must be an int, not bool True"),
    (lambda: choose_config(5, 5.5, 5, "bf16"), TypeError, "choose_config: n must be an int, not float 5.5"),
    (lambda: choose_config(5, 5, 5, "bf16", out_dtype="f32"), ValueError,
     "choose_config: GemmConfig.out_dtype = 'f32': a bf16 GEMM writes bf16"),
    (lambda: choose_config(5, 5, 5, "e4m3", out_dtype="e4m3"), ValueError,
     "choose_config: GemmConfig.out_dtype = 'e4m3': an fp8 GEMM writes bf16 or f16"),
    (lambda: choose_block_scaled_config(None, 16, 16), TypeError,
     "choose_block_scaled_config: m must be an int, not NoneType None"),
    (lambda: choose_block_scaled_config(5, 16, 16, -2), ValueError,
     "choose_block_scaled_config: sm_count must be ≥ 1 (the SMs the persistent grid fills), not -2"),
])
def test_heuristics_check_the_problem(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert str(e.value) == message


def test_heuristics_take_numpy_ints_and_empty_problems():
    assert choose_config(np.int64(300), 200, 64, "bf16", np.int32(4)) == choose_config(300, 200, 64, "bf16", 4)
    assert choose_block_scaled_config(0, 0, 0).scales == "block"


class _ForeignDLPack:
    """A DLPack array of another framework (what cupy or JAX arrays look like to ``Arg``)."""
    __module__ = "foreign.core"

    def __dlpack__(self, **kwargs):
        raise AssertionError("not read")


def test_foreign_dlpack_array_without_torch_is_a_type_error():
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed: the DLPack array would be read through it")
    with pytest.raises(TypeError) as e:       # was ModuleNotFoundError: No module named 'torch'
        matmul(rand(2, 2), _ForeignDLPack())
    assert str(e.value) == ("matmul: b is a _ForeignDLPack (a DLPack array of foreign); reading one needs torch, which "
                            "is not installed: pass a numpy array (run in the CPU interpreter)")


def test_deepgemm_alignment_query_under_both_names():
    import ptxgen.kernels as kernels

    assert kernels.get_mk_alignment_for_contiguous_layout is kernels.get_m_alignment_for_contiguous_layout
    assert kernels.get_mk_alignment_for_contiguous_layout() == 128


def test_tma_helpers_check_their_arguments():
    assert get_tma_aligned_size(17, 4) == 20 and get_tma_aligned_size(0, 4) == 0 and get_tma_aligned_size(17, 2) == 24
    with pytest.raises(ValueError) as e:
        get_tma_aligned_size(17, 3)
    assert str(e.value) == ("get_tma_aligned_size: element_size = 3 bytes must divide 16 (1, 2, 4, 8 or 16: whole "
                            "elements per 16-byte TMA row)")
    with pytest.raises(ValueError, match="element_size = 0 bytes must divide 16"):
        get_tma_aligned_size(17, 0)
    with pytest.raises(ValueError) as e:
        get_tma_aligned_size(-1, 4)
    assert str(e.value) == "get_tma_aligned_size: x = -1 must be ≥ 0 (an extent)"
    with pytest.raises(TypeError) as e:
        get_tma_aligned_size(17.0, 4)
    assert str(e.value) == "get_tma_aligned_size: x must be an int, not float 17.0"
    with pytest.raises(ValueError) as e:
        get_mn_major_tma_aligned_tensor(np.zeros(5, np.float32))
    assert str(e.value) == ("get_mn_major_tma_aligned_tensor: x must be 2-D (MN, KB) or 3-D (G, MN, KB), not of "
                            "shape (5,)")
    with pytest.raises(TypeError) as e:
        get_mn_major_tma_aligned_tensor([[1.0]])
    assert str(e.value) == ("get_mn_major_tma_aligned_tensor: x must be a numpy array or a torch tensor of scales, "
                            "not list")
    x = rand(17, 3, dtype=np.float64)
    y = get_mn_major_tma_aligned_tensor(x)   # padded in x's own element size (DeepGEMM's): 18 × 8 bytes
    assert y.strides == (8, 144) and np.array_equal(y, x)


# -- block-scaled values ---------------------------------------------------------------------------------------------

def _operands(m, n, k):
    a, sa = per_token_cast_to_fp8(rand(m, k, dtype=np.float32))
    b, sb = per_block_cast_to_fp8(rand(n, k, dtype=np.float32))
    return a, sa, b, sb


def test_fp8_gemm_nt_reversed_numpy_scales_and_rows():
    """A reversed numpy view (negative strides) of the scales was refused; its operand's rows were not."""
    a, sa, b, sb = _operands(5, 16, 32)
    want = dequantize_per_token(a[::-1], sa[::-1]) @ dequantize_per_block(b, sb).T
    assert rel_err(fp8_gemm_nt(a[::-1], sa[::-1], b, sb, sm_count=1), want) < 1e-2


def test_fp8_gemm_nt_special_scales():
    """Scales of 0, negative and NaN act as DeepGEMM's promotion total += chunk · a_scale · b_scale does."""
    a, sa, b, sb = _operands(5, 16, 32)
    for value in (0.0, -1.0, np.nan):
        s = sa.copy()
        s[1, 0] = value
        want = dequantize_per_token(a, s) @ dequantize_per_block(b, sb).T
        got = f64(fp8_gemm_nt(a, s, b, sb, sm_count=1))
        assert np.allclose(got, want, rtol=1e-2, atol=1e-2, equal_nan=True)


def test_contiguous_nan_in_padding_row_stays_there():
    a, sa = per_token_cast_to_fp8(rand(256, 32, dtype=np.float32))
    pairs = [per_block_cast_to_fp8(rand(32, 32, dtype=np.float32)) for _ in range(2)]
    b, sb = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    indices = np.array([0] * 100 + [-1] * 28 + [1] * 128, np.int32)
    a[110, 0] = np.nan
    c = f64(m_grouped_fp8_gemm_nt_contiguous(a, sa, b, sb, None, indices, sm_count=2))
    assert np.array_equal(np.unique(np.nonzero(np.isnan(c))[0]), [110])   # documented: 0 · NaN in its own row
    valid = indices >= 0
    want = np.stack([dequantize_per_token(a[i:i + 1], sa[i:i + 1])[0] @ dequantize_per_block(b[g], sb[g]).T
                     if g >= 0 else np.zeros(32) for i, g in enumerate(indices)])
    assert rel_err(c[valid], want[valid]) < 1e-2


# -- GPU twins ---------------------------------------------------------------------------------------------------------


def torch_rel_err(torch, got, want):
    return (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()


@pytest.mark.gpu
def test_gpu_matmul_out_aliasing_a():
    torch = torch_or_skip()
    a = torch.randn(300, 1000, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
    want = a.double() @ b.double()
    c = matmul(a, b, out=a)
    torch.cuda.synchronize()
    assert c.data_ptr() == a.data_ptr() and torch_rel_err(torch, a, want) < 1e-2


@pytest.mark.gpu
def test_gpu_empty_operands_and_grouped_k_zero():
    torch = torch_or_skip()
    e4 = torch.float8_e4m3fn
    b = torch.randn(16, 256, device="cuda").to(e4)
    sb = torch.rand(1, 2, device="cuda") + 0.5
    assert fp8_gemm_nt(torch.empty(0, 256, device="cuda", dtype=e4), torch.empty(0, 2, device="cuda"), b, sb).shape \
        == (0, 16)
    assert scaled_mm(torch.empty(0, 32, device="cuda", dtype=e4), b[:, :32].T, 1.0, 1.0).shape == (0, 16)
    out = torch.full((2, 128, 32), 7.0, device="cuda", dtype=torch.bfloat16)
    c = m_grouped_fp8_gemm_nt_masked(torch.empty(2, 128, 0, device="cuda", dtype=e4),
                                     torch.empty(2, 128, 0, device="cuda"), torch.empty(2, 32, 0, device="cuda", dtype=e4),
                                     torch.empty(2, 1, 0, device="cuda"), out,
                                     torch.tensor([5, 128], device="cuda", dtype=torch.int32), 64)
    torch.cuda.synchronize()
    assert bool((c == 0).all())


@pytest.mark.gpu
def test_gpu_inf_nan_propagate():
    torch = torch_or_skip()
    a = torch.randn(200, 300, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(300, 256, device="cuda", dtype=torch.bfloat16)
    a[0, 0], a[1, 0], a[2, 5] = float("inf"), float("nan"), -float("inf")
    c = matmul(a, b).double()
    want = a.double() @ b.double()
    torch.cuda.synchronize()
    assert torch.equal(torch.isnan(c), torch.isnan(want))
    finite = torch.isfinite(want)
    assert torch_rel_err(torch, c[finite], want[finite]) < 1e-2
    assert torch.equal(c[~finite & ~torch.isnan(want)], want[~finite & ~torch.isnan(want)])


@pytest.mark.gpu
def test_gpu_matmul_torch_matmul_shapes():
    torch = torch_or_skip()
    w = torch.randn(300, 520, device="cuda", dtype=torch.bfloat16)
    for a_shape in ((520,), (2, 70, 520), (3, 1, 9, 520)):
        a = torch.randn(*a_shape, device="cuda", dtype=torch.bfloat16)
        for b in (w.T, w.T.contiguous(), w[0]):
            c = matmul(a, b)
            want = a.double() @ b.double()
            torch.cuda.synchronize()
            assert c.shape == want.shape and torch_rel_err(torch, c, want) < 1e-2
