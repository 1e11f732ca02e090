"""A fresh user's edge cases of attention, attention_varlen, softmax, rms_norm, layer_norm and transpose: each test
asserts the exact result (or bits, or message) in the CPU interpreter against float64 / torch's rules; the defects
found are marked "was:" with what happened before. ``-m gpu`` runs the twins of the fixed cases with torch tensors."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import attention, attention_varlen, layer_norm, rms_norm
from ptxgen.kernels.softmax import SoftmaxConfig, choose_softmax_config, softmax
from ptxgen.kernels.transpose import transpose
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_varlen import packed_problem

BF16 = ml_dtypes.bfloat16


def softmax64(x):
    """torch.softmax's rule in float64: exp(x - max) / sum (NaN for a row of -inf only or one holding +inf or NaN)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


def bits(x):
    return np.asarray(x).view(np.uint16 if np.asarray(x).dtype.itemsize == 2 else np.uint32)


# -- the interpreter: inf and NaN are values, not warnings --------------------------------------------------------

def test_nan_inputs_raise_no_numpy_warning_and_propagate():
    """was: RuntimeWarning 'invalid value encountered in maximum' (frag.reduce) / 'in matmul' (wgmma) /
    'overflow encountered in cast' from inside the interpreter."""
    x = np.array([[1.0, np.nan, 2.0], [0.0, 1.0, 2.0]], np.float32)
    q, k, v = random_problem(1, 1, 1, 3, 5, 64, "bf16", seed=1)
    q[0, 1, 0, 3] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = softmax(x)
        out, lse = attention(q, k, v)
    assert np.isnan(y[0]).all()
    np.testing.assert_allclose(y[1], softmax64(x[1]), rtol=1e-6)
    want, want_lse = reference(q, k, v, False, 0.125)
    assert np.isnan(out[0, 1].astype(np.float32)).all() and np.isnan(lse[0, 0, 1])
    keep = [0, 2]
    assert not np.isnan(out[0, keep].astype(np.float32)).any()
    np.testing.assert_allclose(lse[0, 0, keep], want_lse[0, 0, keep], rtol=1e-5)


# -- attention ----------------------------------------------------------------------------------------------------

def test_attention_zero_heads_is_an_empty_result():
    """was: ValueError 'q has 0 heads, not a multiple of k's 0' (torch's SDPA returns empty tensors)."""
    q, k, v = (np.zeros(shape, BF16) for shape in ((2, 3, 0, 64), (2, 5, 0, 64), (2, 5, 0, 64)))
    out, lse = attention(q, k, v)
    assert out.shape == (2, 3, 0, 64) and lse.shape == (2, 0, 3)
    q, k, v, cu_q, cu_k = packed_problem([3, 2], [4, 1], 1, 1, 64, "bf16", seed=2)
    out, lse = attention_varlen(q[:, :0], k[:, :0], v[:, :0], cu_q, cu_k, 3, 4)
    assert out.shape == (5, 0, 64) and lse.shape == (0, 5)


def test_attention_head_dim_without_unit_stride_is_copied():
    """was: ValueError 'q must have unit stride along head_dim' (torch's SDPA takes any strides). The result is the
    one of the contiguous copy, bit for bit."""
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((1, 40, 2, 128)).astype(BF16)
    q = wide[..., ::2]                                # strides (10240, 256, 128, 2)
    k = rng.standard_normal((1, 50, 1, 64)).astype(BF16)[..., ::-1]   # unit stride -1
    v = rng.standard_normal((1, 50, 1, 64)).astype(BF16)
    out, lse = attention(q, k, v, causal=True)
    dense = attention(np.ascontiguousarray(q), np.ascontiguousarray(k), v, causal=True)
    assert np.array_equal(bits(out), bits(dense[0])) and np.array_equal(lse, dense[1])
    assert_matches(out, lse, *reference(q, k, v, True, 0.125), "bf16")
    cq, ck, cv, cu_q, cu_k = packed_problem([30, 10], [20, 25], 2, 1, 64, "bf16", seed=4)
    out, lse = attention_varlen(np.ascontiguousarray(cq[..., ::-1])[..., ::-1], ck, cv, cu_q, cu_k, 30, 25)
    want = attention_varlen(cq, ck, cv, cu_q, cu_k, 30, 25)
    assert np.array_equal(bits(out), bits(want[0])) and np.array_equal(lse, want[1])


@pytest.mark.parametrize("target", ["k", "v"])
def test_attention_out_aliasing_k_or_v_reads_them_first(target):
    """was: out = k (or v) gave CTAs after the first K/V rows that earlier CTAs had overwritten (two query tiles of
    128 rows here); now the inputs are copied first and the result is the non-aliased one, bit for bit."""
    q, k, v = random_problem(1, 1, 1, 200, 200, 64, "bf16", seed=5)
    want = attention(q, k, v)
    alias = {"k": k, "v": v}[target]
    out, lse = attention(q, k, v, out=alias)
    assert out is alias
    assert np.array_equal(bits(out), bits(want[0])) and np.array_equal(lse, want[1])


def test_attention_out_is_q_in_place():
    q, k, v = random_problem(1, 2, 1, 150, 90, 64, "bf16", seed=6)
    want = attention(q.copy(), k, v, causal=True)
    out, lse = attention(q, k, v, causal=True, out=q)
    assert out is q and np.array_equal(bits(q), bits(want[0])) and np.array_equal(lse, want[1])


def test_attention_out_read_only_is_named():
    """was: numpy's 'ValueError: assignment destination is read-only' from inside the interpreter."""
    q, k, v = random_problem(1, 1, 1, 4, 4, 64, "bf16", seed=7)
    frozen = np.zeros_like(q)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"^attention: out is a read-only numpy array; pass a writeable one$"):
        attention(q, k, v, out=frozen)


def test_varlen_negative_max_seqlen_is_a_value_error():
    """was: TypeError for a value of the right type."""
    q, k, v, cu_q, cu_k = packed_problem([3], [4], 1, 1, 64, "bf16", seed=8)
    with pytest.raises(ValueError, match=r"^attention_varlen: max_seqlen_q must be a non-negative int, not -1$"):
        attention_varlen(q, k, v, cu_q, cu_k, -1, 4)
    with pytest.raises(TypeError, match=r"^attention_varlen: max_seqlen_k must be a non-negative int, not 4.0$"):
        attention_varlen(q, k, v, cu_q, cu_k, 3, 4.0)
    with pytest.raises(TypeError, match=r"^attention_varlen: cu_seqlens_q must hold int32 offsets \(FlashAttention's "
                                        r"cu_seqlens\), not numpy int64$"):
        attention_varlen(q, k, v, cu_q.astype(np.int64), cu_k, 3, 4)


def test_attention_masked_inf_key_does_not_leak():
    """Already right: causal with Sq = 3, Sk = 5 — key 4 (k = +inf) is seen by row 2 only: rows 0 and 1 match the
    reference without it, row 2 is NaN (torch: a +inf score, inf - inf). A NaN in v at that key reaches every row of
    its KV tile, as in torch's math SDPA and FlashAttention: P = 0 there, and 0 · NaN = NaN in P·V."""
    q, k, v = random_problem(1, 1, 1, 3, 5, 64, "bf16", seed=9)
    k[0, 4] = np.inf
    out, lse = attention(q, k, v, causal=True)
    want, want_lse = reference(q[:, :2], k[:, :4], v[:, :4], True, 0.125)
    np.testing.assert_allclose(out[0, :2].astype(np.float64), want[0], atol=2e-2)
    np.testing.assert_allclose(lse[0, 0, :2], want_lse[0, 0], rtol=1e-5)
    assert np.isnan(out[0, 2].astype(np.float32)).all() and np.isnan(lse[0, 0, 2])
    k[0, 4] = 0
    v[0, 4] = np.nan
    out, lse = attention(q, k, v, causal=True)
    with np.errstate(invalid="ignore"):
        want, _ = reference(q, k, v, True, 0.125)
    assert np.isnan(want).all() and np.isnan(out.astype(np.float32)).all()
    assert np.isfinite(lse).all()


def test_attention_equal_scores_average_v():
    """Already right: all scores equal → out = mean of v's rows, lse = score + ln Sk."""
    q = np.ones((1, 3, 1, 64), BF16)
    k = np.ones((1, 5, 1, 64), BF16)
    v = np.random.default_rng(10).standard_normal((1, 5, 1, 64)).astype(BF16)
    out, lse = attention(q, k, v)
    np.testing.assert_allclose(out[0, :, 0].astype(np.float64), np.broadcast_to(
        v[0, :, 0].astype(np.float64).mean(0), (3, 64)), atol=4e-3)
    np.testing.assert_allclose(lse, np.full((1, 1, 3), 8 + np.log(5)), rtol=1e-6)


@pytest.mark.parametrize("scale", [1e4, 1e-30])
def test_attention_extreme_finite_scales(scale):
    """Already right: 1e4 (scores ~1e5, a near one-hot softmax) and 1e-30 (uniform) match float64."""
    q, k, v = random_problem(1, 2, 1, 70, 90, 64, "bf16", seed=11)
    out, lse = attention(q, k, v, softmax_scale=scale)
    assert_matches(out, lse, *reference(q, k, v, False, scale), "bf16")


# -- softmax and the norms -----------------------------------------------------------------------------------------

def large_rows(magnitude, n=40, seed=12):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, n)) * magnitude / 10 + magnitude).astype(np.float32)


@pytest.mark.parametrize("magnitude", [1e10, 1e20, 1e37, -1e37])
def test_softmax_rows_of_any_magnitude(magnitude):
    """was: NaN (max·log2 e rounded to f32: its rounding, ~ulp/2, overflowed exp2 from |max| ≈ 2^30 on)."""
    x = large_rows(magnitude)
    y = softmax(x)
    np.testing.assert_allclose(y, softmax64(x), atol=1e-7)
    np.testing.assert_allclose(y.sum(1), 1.0, rtol=1e-6)


def test_softmax_values_near_f32_max():
    """was: NaN (max·log2 e overflowed f32 for |max| > 2.36e38)."""
    x = np.array([[3.0e38, 2.9e38, -3.0e38], [3.0e38, 3.0e38, 1.0]], np.float32)
    np.testing.assert_array_equal(softmax(x), np.array([[1, 0, 0], [0.5, 0.5, 0]], np.float32))


def test_softmax_fma_variant_is_selectable_and_kept_on_ordinary_rows():
    """The one-fma exponent stays a variant (``exponent="fma"``): the same result on ordinary rows, its documented
    NaN on rows near 1e10."""
    x = np.random.default_rng(13).standard_normal((3, 300)).astype(np.float32)
    fma = choose_softmax_config(300, "f32", exponent="fma")
    np.testing.assert_allclose(softmax(x, config=fma), softmax64(x), rtol=2e-6)
    assert np.isnan(softmax(large_rows(1e10), config=fma)).any()
    with pytest.raises(ValueError, match=r"^SoftmaxConfig: exponent must be one of difference, fma, not 'fmaa' "
                                         r"\(did you mean 'fma'\?\)$"):
        softmax(x, config=SoftmaxConfig("f32", 32, 3, exponent="fmaa"))


def test_softmax_of_a_0d_array_is_one():
    """was: ValueError 'dim must be the last dimension (-1 or -1), not -1' (torch: softmax of a 0-d tensor is 1)."""
    assert softmax(np.array(3.0, np.float32)).shape == ()
    assert softmax(np.array(3.0, np.float32)) == 1.0
    assert softmax(np.array(3.0, np.float32), dim=0) == 1.0
    assert np.isnan(softmax(np.array(-np.inf, np.float32)))
    with pytest.raises(ValueError, match=r"^softmax: dim must be the last dimension \(-1 or 0\), not 1$"):
        softmax(np.array(3.0, np.float32), dim=1)


def test_rows_of_no_element_are_an_empty_result():
    """was: ValueError 'x has 0 elements in the last dimension; a row needs at least 1' (torch returns empty)."""
    x = np.zeros((3, 0), BF16)
    for y in (softmax(x), rms_norm(x), layer_norm(x, np.zeros(0, BF16), np.zeros(0, BF16))):
        assert y.shape == (3, 0) and y.dtype == BF16
    assert rms_norm(np.zeros(0, np.float32)).shape == (0,)


def test_softmax_special_rows_as_torch():
    """Already right: a row of -inf only is NaN (0/0), one with +inf or NaN is NaN, -inf entries beside finite ones
    are 0, equal values are uniform."""
    x = np.array([[-np.inf] * 4, [1, np.inf, 2, 3], [1, np.nan, 2, 3], [-np.inf, 0, -np.inf, 0], [5, 5, 5, 5]],
                 np.float32)
    y = softmax(x)
    assert np.isnan(y[:3]).all()
    np.testing.assert_array_equal(y[3], [0, 0.5, 0, 0.5])
    np.testing.assert_allclose(y[4], 0.25, rtol=1e-7)


def test_norms_special_rows_as_torch():
    """Already right: eps = 0 on an all-zero row (RMSNorm) or a constant row (LayerNorm) is NaN (0·inf, torch's);
    f16 rows of 60000 are squared in f32 (no overflow); N = 1, odd N, rank 1 and rank 3 as a 2-D x."""
    assert np.isnan(rms_norm(np.zeros((2, 8), np.float32), eps=0.0)).all()
    assert np.isnan(layer_norm(np.full((2, 8), 5.0, np.float32), eps=0.0)).all()
    np.testing.assert_array_equal(rms_norm(np.full((1, 4096), 60000, np.float16)), np.ones((1, 4096), np.float16))
    np.testing.assert_array_equal(layer_norm(np.full((2, 8), 5.0, np.float32)), np.zeros((2, 8), np.float32))
    x = np.random.default_rng(14).standard_normal((3, 37)).astype(np.float32)
    ms = (x.astype(np.float64) ** 2).mean(1, keepdims=True)
    want = x / np.sqrt(ms + 2.0 ** -23)
    np.testing.assert_allclose(rms_norm(x), want, rtol=2e-6)
    np.testing.assert_allclose(rms_norm(x[0]), want[0], rtol=2e-6)
    np.testing.assert_allclose(rms_norm(x.reshape(1, 3, 37)), want.reshape(1, 3, 37), rtol=2e-6)
    np.testing.assert_allclose(rms_norm(x[:, :1], eps=0.0), np.sign(x[:, :1]), rtol=2e-7)


# -- transpose -----------------------------------------------------------------------------------------------------

def test_transpose_in_place_square_reads_x_first():
    """was: out = x (70 x 70 f32: 3 x 3 CTAs of 32 x 32) read tiles other CTAs had already overwritten."""
    x = np.random.default_rng(15).standard_normal((70, 70)).astype(np.float32)
    want = x.T.copy()
    assert transpose(x, out=x) is x
    np.testing.assert_array_equal(x, want)


def test_transpose_ranks_0_and_1_are_their_own_transpose():
    """was: ValueError 'x must be 2-D (M, N)' (torch's and numpy's x.T of a 0-d or 1-d x is x)."""
    v = np.arange(5, dtype=np.float32)
    y = transpose(v)
    assert y is not v and np.array_equal(y, v)
    out = np.zeros(5, np.float32)
    assert transpose(v, out=out) is out and np.array_equal(out, v)
    assert transpose(np.array(2.0, BF16)) == 2.0
    with pytest.raises(ValueError, match=r"^transpose: out has shape \(4,\), but x.T has shape \(5,\)$"):
        transpose(v, out=np.zeros(4, np.float32))


def test_transpose_out_is_checked_before_launch():
    """was: InterpreterError from the launch (another dtype), AttributeError 'list' object has no attribute 'stride'
    (a non-array), numpy's 'assignment destination is read-only'."""
    x = np.zeros((5, 7), np.float32)
    with pytest.raises(TypeError, match=r"^transpose: out has dtype numpy float16 but x has numpy float32: out has "
                                        r"x's dtype$"):
        transpose(x, out=np.zeros((7, 5), np.float16))
    with pytest.raises(TypeError, match=r"^transpose: out must be a CUDA tensor \(torch, or any DLPack array: cupy, "
                                        r"JAX\) or a numpy array, not list$"):
        transpose(x, out=[[0.0] * 5] * 7)
    with pytest.raises(ValueError, match=r"^transpose: out is a read-only numpy array; pass a writeable one$"):
        transpose(x, out=np.broadcast_to(np.zeros((1, 5), np.float32), (7, 5)))


def test_transpose_edges_already_right():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((9, 13)).astype(BF16)
    for view in (x[:1], x[:, :1], x[::2, ::3], x[::-1], x.T, x[:0], x[:, :0]):
        y = transpose(view)
        assert y.shape == view.T.shape and y.flags.c_contiguous and np.array_equal(bits(y), bits(view.T))
    wide = np.zeros((13, 20), BF16)
    transpose(x, out=wide[:, 3:12])
    assert np.array_equal(bits(wide[:, 3:12]), bits(x.T)) and not wide[:, :3].any() and not wide[:, 12:].any()


# -- the GPU twins of the fixed cases ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_attention_edges():
    torch = torch_or_skip()
    from test_attention import assert_matches_torch, torch_reference
    empty = torch.zeros(2, 3, 0, 64, device="cuda", dtype=torch.bfloat16)
    out, lse = attention(empty, empty[:, :2], empty[:, :2])
    assert out.shape == (2, 3, 0, 64) and lse.shape == (2, 0, 3)
    wide = torch.randn(2, 700, 4, 256, device="cuda", dtype=torch.bfloat16)
    q = wide[..., ::2]
    k = torch.randn(2, 900, 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 900, 2, 128, device="cuda", dtype=torch.bfloat16)
    out, lse = attention(q, k, v, causal=True)
    torch.cuda.synchronize()
    assert_matches_torch(torch, out, lse, *torch_reference(torch, q, k, v, True, 128 ** -0.5))
    # out aliasing k, v (copied first) or q (in place): (B, S, H, D) of one shape, many CTAs
    for target in ("k", "v", "q"):
        q, k, v = (torch.randn(2, 2048, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        want, want_lse = torch_reference(torch, q, k, v, False, 128 ** -0.5)
        alias = {"q": q, "k": k, "v": v}[target]
        out, lse = attention(q, k, v, out=alias)
        torch.cuda.synchronize()
        assert out.data_ptr() == alias.data_ptr()
        assert_matches_torch(torch, out, lse, want, want_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_gpu_softmax_and_norm_edges(dtype):
    torch = torch_or_skip()
    tdtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    for n in (1000, 16384):
        x = (torch.randn(64, n, device="cuda") * 1e9 + 1e10).to(tdtype)
        y = softmax(x)
        want = torch.softmax(x.double(), dim=-1)
        assert not torch.isnan(y).any()
        assert (y.double() - want).abs().max().item() < (1e-2 if dtype == "bf16" else 1e-6)
    assert softmax(torch.tensor(3.0, device="cuda", dtype=tdtype)).item() == 1.0
    empty = torch.zeros(3, 0, device="cuda", dtype=tdtype)
    for y in (softmax(empty), rms_norm(empty), layer_norm(empty)):
        assert y.shape == (3, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_gpu_transpose_edges(dtype):
    torch = torch_or_skip()
    tdtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = torch.randn(1000, 1000, device="cuda", dtype=tdtype)
    want = x.t().contiguous()
    assert transpose(x, out=x) is x
    torch.cuda.synchronize()
    assert torch.equal(x, want)
    v = torch.randn(77, device="cuda", dtype=tdtype)
    assert torch.equal(transpose(v), v)
    with pytest.raises(TypeError, match=r"^transpose: out has dtype torch.float16 but x has "):
        transpose(x, out=torch.empty(1000, 1000, device="cuda", dtype=torch.float16))
