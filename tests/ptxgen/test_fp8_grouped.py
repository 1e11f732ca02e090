"""DeepGEMM's MoE grouped GEMMs (m_grouped_fp8_gemm_nt_contiguous / _masked) in the CPU interpreter against float64
products of the dequantized operands: padding rows and whole padding tiles (written as zeros), empty groups, masked
counts of 0, partial and M_max, both A-scale layouts, straddling tiles; the errors; the PTX; the GPU."""
import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import (
    GemmConfig, choose_block_scaled_config, get_m_alignment_for_contiguous_layout, get_mn_major_tma_aligned_tensor,
    m_grouped_fp8_gemm_nt_contiguous, m_grouped_fp8_gemm_nt_masked,
)
from ptxgen.kernels import fp8 as fp8_module
from gpu_torch import torch_or_skip

E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16


def cdiv(x, y):
    return -(-x // y)


def product(a, sa, b, sb):
    """float64 (A·scale) @ (B·scale)ᵀ of one group: a (M, K), sa (M, KB), b (N, K), sb (NB, KB)."""
    k, n = a.shape[1], b.shape[0]
    ea = np.repeat(sa.astype(np.float64), 128, axis=1)[:, :k]
    eb = np.repeat(np.repeat(sb.astype(np.float64), 128, axis=0)[:n], 128, axis=1)[:, :k]
    return (a.astype(np.float64) * ea) @ (b.astype(np.float64) * eb).T


def weights(groups, n, k, rng):
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    return b, sb


def rel_err(got, want):
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


def contiguous_indices(sizes, extra_padding_tiles=0):
    """Each group's rows then -1 up to the next multiple of 128; then whole padding tiles."""
    align = get_m_alignment_for_contiguous_layout()
    idx = []
    for g, s in enumerate(sizes):
        idx += [g] * s + [-1] * (cdiv(s, align) * align - s)
    idx += [-1] * (align * extra_padding_tiles)
    return np.array(idx, np.int32)


@pytest.mark.parametrize("sizes, extra, config", [
    ([100, 0, 200], 1, None),                                                              # an empty group
    ([128, 17], 0, GemmConfig("e4m3", bn=192, stages=4, scales="block", grouped="contiguous")),  # straddling BN
    ([5], 2, GemmConfig("e4m3", bn=64, stages=8, epilogue="tma", scales="block", grouped="contiguous")),
])
@pytest.mark.parametrize("layout", ["row-major", "m-major"])
def test_contiguous_matches_float64(sizes, extra, config, layout):
    rng = np.random.default_rng()
    n, k = 144, 272
    b, sb = weights(len(sizes), n, k, rng)
    idx = contiguous_indices(sizes, extra)
    m = idx.size
    a = (rng.standard_normal((m, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (m, cdiv(k, 128))).astype(np.float32)
    out = np.full((m, n), 5, BF16)
    got = m_grouped_fp8_gemm_nt_contiguous(a, get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa,
                                           b, sb, out, idx, config=config, sm_count=3)
    assert got is out
    want = np.zeros((m, n))
    for i in np.nonzero(idx >= 0)[0]:
        want[i] = product(a[i:i + 1], sa[i:i + 1], b[idx[i]], sb[idx[i]])[0]
    assert rel_err(out, want) < 4e-3
    assert not np.any(out[idx < 0].astype(np.float32))          # padding rows and tiles: zeros


@pytest.mark.parametrize("counts, config", [
    ([0, 130, 256], None),                                                                # 0, partial, M_max
    ([256, 1, 0], GemmConfig("e4m3", bn=112, stages=4, scales="block", grouped="masked")),  # straddling BN
    ([0, 0, 0], None),                                                                    # nothing to compute
])
@pytest.mark.parametrize("layout", ["row-major", "m-major"])
def test_masked_matches_float64(counts, config, layout):
    rng = np.random.default_rng()
    groups, m_max, n, k = len(counts), 256, 144, 272
    b, sb = weights(groups, n, k, rng)
    a = (rng.standard_normal((groups, m_max, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (groups, m_max, cdiv(k, 128))).astype(np.float32)
    masked_m = np.array(counts, np.int32)
    out = np.full((groups, m_max, n), 5, BF16)
    m_grouped_fp8_gemm_nt_masked(a, get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa, b, sb, out,
                                 masked_m, 128, config=config, sm_count=3)
    for g, c in enumerate(counts):
        assert not np.any(out[g, c:].astype(np.float32))        # rows past the count: zeros
        if c:
            assert rel_err(out[g, :c], product(a[g, :c], sa[g, :c], b[g], sb[g])) < 4e-3


def test_heuristic_for_groups():
    assert choose_block_scaled_config(16384, 4096, 7168, grouped="contiguous").name == "h128x192s4to1BSGc"
    assert choose_block_scaled_config(32768, 4096, 7168, grouped="contiguous").name == "h128x192s4to1BSGc"
    assert choose_block_scaled_config(4 * 256, 7168, 2048, grouped="masked").name == "h128x128s5to1BSAGm"
    assert choose_block_scaled_config(16, 7168, 2048, grouped="masked").name == "h128x128s5to1BSAGm"   # never swapped


@pytest.mark.parametrize("fields, message", [
    (dict(grouped="ragged"), "GemmConfig.grouped = 'ragged': the grouping is 'none', 'contiguous' or 'masked'"),
    (dict(grouped="masked", scales="tensor", promote=1), "GemmConfig.grouped = 'masked': the grouped GEMMs are "
                                                          "block-scaled (scales = 'block')"),
    (dict(grouped="contiguous", swap_ab=True), "GemmConfig.swap_ab = True: a contiguous grouped GEMM groups A's rows, "
                                               "which swapping would make columns"),
    (dict(grouped="masked", cluster=2), "GemmConfig.cluster = 2: the CTAs of a cluster share B by multicast, but "
                                        "neighbouring tiles of a grouped GEMM may belong to different groups: "
                                        "cluster = 1"),
    (dict(grouped="masked", bm=256), "GemmConfig.bm = 256: a grouped GEMM's tiles are the 128-row M block its groups "
                                     "are aligned to: bm = 128"),
])
def test_grouped_rules(fields, message):
    base = dict(dtype="e4m3", bn=128, scales="block")
    base.update(fields)
    with pytest.raises(ValueError) as info:
        GemmConfig(**base).validate()
    assert str(info.value) == message
    config = GemmConfig("e4m3", bn=128, scales="block", grouped="masked")
    assert GemmConfig.from_name(config.name, "e4m3") == config


def _contiguous_args():
    rng = np.random.default_rng(0)
    b, sb = weights(2, 32, 256, rng)
    idx = contiguous_indices([3, 130])
    a = (rng.standard_normal((idx.size, 256))).astype(E4M3)
    sa = np.ones((idx.size, 2), np.float32)
    return [a, sa, b, sb, None, idx]


def _masked_args():
    rng = np.random.default_rng(0)
    b, sb = weights(2, 32, 256, rng)
    a = (rng.standard_normal((2, 128, 256))).astype(E4M3)
    sa = np.ones((2, 128, 2), np.float32)
    return [a, sa, b, sb, None, np.array([3, 128], np.int32), 64]


@pytest.mark.parametrize("change, error, message", [
    (lambda x: x.__setitem__(5, np.r_[x[5][:-1], 2].astype(np.int32)), ValueError,
     r"m_grouped_fp8_gemm_nt_contiguous: m_indices\[383\] = 2 is neither -1 \(padding\) nor a group of b \(0 … 1\)"),
    (lambda x: x.__setitem__(5, np.r_[1, x[5][1:]].astype(np.int32)), ValueError,
     r"m_grouped_fp8_gemm_nt_contiguous: rows 0 … 127 of m_indices hold groups 0, 1: each group's segment starts on "
     r"a multiple of 128 rows and its padding \(-1\) follows it"),
    (lambda x: x.__setitem__(5, x[5].astype(np.int64)), TypeError,
     r"m_grouped_fp8_gemm_nt_contiguous: m_indices has dtype numpy int64; it is int32 \(torch.int32, numpy.int32\)"),
    (lambda x: (x.__setitem__(0, x[0][:200]), x.__setitem__(1, x[1][:200]), x.__setitem__(5, x[5][:200])),
     ValueError, r"m_grouped_fp8_gemm_nt_contiguous: a has 200 rows; each group's segment is padded to "
                 r"get_m_alignment_for_contiguous_layout\(\) = 128 rows, so M is a multiple of it"),
    (lambda x: x.__setitem__(3, x[3][:1]), ValueError,
     r"m_grouped_fp8_gemm_nt_contiguous: b_scales must have shape \(2, 1, 2\) \(G, ⌈N/128⌉, ⌈K/128⌉: one per group "
     r"and 128 × 128 block\), not \(1, 1, 2\)"),
    (lambda x: x.__setitem__(2, x[2][:, :, :128]), ValueError,
     r"m_grouped_fp8_gemm_nt_contiguous: b has 128 columns but a has 256: a and b \(G, N, K\) share K"),
])
def test_contiguous_errors(change, error, message):
    args = _contiguous_args()
    change(args)
    with pytest.raises(error, match="^" + message + "$"):
        m_grouped_fp8_gemm_nt_contiguous(*args, sm_count=2)


@pytest.mark.parametrize("change, error, message", [
    (lambda x: x.__setitem__(5, np.array([3, 129], np.int32)), ValueError,
     r"m_grouped_fp8_gemm_nt_masked: masked_m\[1\] = 129 is outside 0 … M_max = 128"),
    (lambda x: x.__setitem__(5, np.array([3, 1, 1], np.int32)), ValueError,
     r"m_grouped_fp8_gemm_nt_masked: masked_m must have shape \(2,\) \(each group's rows\), not \(3,\)"),
    (lambda x: x.__setitem__(6, -1), ValueError,
     r"m_grouped_fp8_gemm_nt_masked: expected_m must be an int ≥ 0 \(a hint of the rows per group\), not -1"),
    (lambda x: (x.__setitem__(0, x[0][:, :100]), x.__setitem__(1, x[1][:, :100])), ValueError,
     r"m_grouped_fp8_gemm_nt_masked: M_max = 100 \(a.shape\[1\]\) must be a multiple of 128 \(the M block\)"),
    (lambda x: x.__setitem__(0, x[0][:1]), ValueError, r"m_grouped_fp8_gemm_nt_masked: a has 1 groups but b has 2"),
    (lambda x: x.__setitem__(4, np.zeros((2, 128, 31), BF16)), ValueError,
     r"m_grouped_fp8_gemm_nt_masked: out must have shape \(2, 128, 32\), not \(2, 128, 31\)"),
    (lambda x: None, None, None),
])
def test_masked_errors(change, error, message):
    args = _masked_args()
    change(args)
    if error is None:
        out = m_grouped_fp8_gemm_nt_masked(*args, sm_count=2)
        assert out.shape == (2, 128, 32) and not np.any(out[0, 3:].astype(np.float32))
        return
    with pytest.raises(error, match="^" + message + "$"):
        m_grouped_fp8_gemm_nt_masked(*args, sm_count=2)


@pytest.mark.parametrize("config", [GemmConfig("e4m3", bn=bn, stages=s, epilogue="tma", scales="block", grouped=gr)
                                    for bn, s in ((128, 6), (64, 8)) for gr in ("contiguous", "masked")],
                         ids=lambda c: c.name)
def test_grouped_configs_compile_pipelined_without_spills(config):
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    specs = {"row_scales": TensorSpec(2 if config.grouped == "masked" else 1, True, 4),
             "col_scales": TensorSpec(1, True, 4)}
    compiled = compile_kernel(fp8_module.kernel_module(config).kernels[0], Specialization.of(**specs))
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes == 0


# -- the GPU -----------------------------------------------------------------------------------------------------------


def torch_product(torch, a, sa, b, sb):
    k, n = a.shape[1], b.shape[0]
    ea = sa.double().repeat_interleave(128, dim=1)[:, :k]
    eb = sb.double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    return (a.double() * ea) @ (b.double() * eb).T


@pytest.mark.gpu
@pytest.mark.parametrize("groups, tokens, n, k", [(4, 8192, 4096, 7168), (8, 4096, 7168, 2048), (3, 300, 2112, 272)])
def test_gpu_contiguous_matches_float64(groups, tokens, n, k):
    torch = torch_or_skip()
    from ptxgen.kernels import per_block_cast_to_fp8, per_token_cast_to_fp8

    sizes = [max(tokens + (g - groups // 2) * 37, 0) for g in range(groups)]
    idx = torch.from_numpy(contiguous_indices(sizes, 1)).cuda()
    a, sa = per_token_cast_to_fp8(torch.randn(idx.numel(), k, device="cuda", dtype=torch.bfloat16),
                                  tma_aligned_scales=True)
    bs = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(groups)]
    b, sb = torch.stack([x[0] for x in bs]), torch.stack([x[1] for x in bs])
    out = m_grouped_fp8_gemm_nt_contiguous(a, sa, b, sb, None, idx)
    torch.cuda.synchronize()
    for g in range(groups):
        rows = (idx == g).nonzero().squeeze(1)
        want = torch_product(torch, a[rows], sa[rows], b[g], sb[g])
        assert (torch.linalg.norm(out[rows].double() - want) / torch.linalg.norm(want)).item() < 2e-3
    assert not out[idx < 0].any()


@pytest.mark.gpu
@pytest.mark.parametrize("groups, expected, n, k", [(1, 1024, 4096, 7168), (2, 512, 7168, 2048), (4, 256, 4096, 7168)])
def test_gpu_masked_matches_float64(groups, expected, n, k):
    torch = torch_or_skip()
    from ptxgen.kernels import per_block_cast_to_fp8, per_token_cast_to_fp8

    m_max = cdiv(expected * 3 // 2, 128) * 128
    a, sa = per_token_cast_to_fp8(torch.randn(groups * m_max, k, device="cuda", dtype=torch.bfloat16))
    a, sa = a.view(groups, m_max, k), sa.view(groups, m_max, -1)
    bs = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(groups)]
    b, sb = torch.stack([x[0] for x in bs]), torch.stack([x[1] for x in bs])
    counts = torch.tensor([min(expected + 7 * g, m_max) if g else 0 for g in range(groups)][::-1], device="cuda",
                          dtype=torch.int32)
    out = m_grouped_fp8_gemm_nt_masked(a, sa, b, sb, None, counts, expected)
    torch.cuda.synchronize()
    for g, c in enumerate(counts.tolist()):
        assert not out[g, c:].any()
        if c:
            want = torch_product(torch, a[g, :c], sa[g, :c], b[g], sb[g])
            assert (torch.linalg.norm(out[g, :c].double() - want) / torch.linalg.norm(want)).item() < 2e-3
