"""The block-scaled fp8 GEMM (DeepGEMM's fp8_gemm_nt): GemmConfig(scales="block")'s rules and names, the heuristic's
choices, the scale-layout helpers, the op in the CPU interpreter against float64 products of the dequantized operands
(ragged M, N, K; both scale layouts; straddling tiles; swap-AB), its errors, the PTX of the main configurations, and
the GPU against float64 and cuBLAS's block-scaled torch._scaled_mm."""
import re

import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import (
    GemmConfig, choose_block_scaled_config, fp8_gemm_nt, get_col_major_tma_aligned_tensor,
    get_mn_major_tma_aligned_tensor, get_tma_aligned_size,
)
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import block_scales
from ptxgen.kernels.gemm.heuristic import BLOCK_SCALED_CANDIDATES
from gpu_torch import torch_or_skip

E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16


def cdiv(x, y):
    return -(-x // y)


def operands(m, n, k, rng):
    """Random e4m3 A (M, K), B (N, K) and scales in [0.25, 4) (fp32; a wrong scale is a large error)."""
    a = (rng.standard_normal((m, k)) * 3).astype(E4M3)
    b = (rng.standard_normal((n, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (m, cdiv(k, 128))).astype(np.float32)
    sb = rng.uniform(0.25, 4.0, (cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    return a, sa, b, sb


def reference(a, sa, b, sb):
    """float64 (A · scale_a) @ (B · scale_b)ᵀ of the dequantized operands."""
    m, k = a.shape
    n = b.shape[0]
    ea = np.repeat(sa.astype(np.float64), 128, axis=1)[:, :k]
    eb = np.repeat(np.repeat(sb.astype(np.float64), 128, axis=0)[:n], 128, axis=1)[:, :k]
    return (a.astype(np.float64) * ea) @ (b.astype(np.float64) * eb).T


def rel_err(got, want):
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))


def check(got, want):
    """bf16 output of an f32 sum: within a few bf16 ulps of the float64 product, elementwise and in norm."""
    assert got.dtype == np.dtype(BF16)
    got = got.astype(np.float64)
    assert rel_err(got, want) < 4e-3
    assert np.all(np.abs(got - want) <= 2 ** -7 * np.abs(want) + 1e-2 * np.abs(want).max())


# -- the configuration ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, message", [
    (dict(scales="row"), "GemmConfig.scales = 'row': the scales are 'tensor' (one per operand) or 'block' "
                         "(DeepGEMM's)"),
    (dict(dtype="bf16", scales="block"), "GemmConfig.scales = 'block': block scales are fp8's (e4m3, e5m2), not "
                                         "bf16's"),
    (dict(promote=4), "GemmConfig.promote = 4: block scales promote every k-tile (the 128-deep scale block): "
                      "promote = 1"),
    (dict(bias=True), "GemmConfig.bias = True: the block-scaled GEMM (DeepGEMM's fp8_gemm_nt) has no bias"),
    (dict(streamk=True, epilogue="tma", overlap=1),
     "GemmConfig.overlap = 1: stream-K's pieces end in a partial sum or a join, not a held tile whose epilogue could "
     "run behind the next tile's wgmmas: overlap = 0 with streamk = True"),
    (dict(epilogue="tma", overlap=2), "GemmConfig.overlap = 2: block scales promote every k-tile, so the epilogue "
                                      "hides behind the next tile's first k-tile only: overlap = 0 or 1"),
    (dict(overlap=1), "GemmConfig.overlap = 1: the epilogue behind the next tile's wgmmas is built for the TMA-store "
                      "epilogue, not 'direct'"),
    (dict(scales="tensor", scale_prefetch=True), "GemmConfig.scale_prefetch = True: it orders the promotion of block "
                                                 "scales; a config with scales = 'tensor' has none"),
    (dict(scales="tensor", pingpong=True), "GemmConfig.pingpong = True: it orders the promotion of block scales; a "
                                           "config with scales = 'tensor' has none"),
    (dict(scales="tensor", late_scales=True), "GemmConfig.late_scales = True: it orders the promotion of block "
                                              "scales; a config with scales = 'tensor' has none"),
    (dict(late_scales=True, scale_prefetch=True), "GemmConfig.late_scales = True: the scales are read after the "
                                                  "k-tile's wait; loading them a k-tile ahead (scale_prefetch) is the "
                                                  "other way: choose one"),
])
def test_validate_names_the_broken_rule(fields, message):
    base = dict(dtype="e4m3", bn=128, scales="block")
    base.update(fields)
    with pytest.raises(ValueError) as info:
        GemmConfig(**base).validate()
    assert str(info.value) == message


@pytest.mark.parametrize("config", [
    GemmConfig("e4m3", bn=128, stages=6, epilogue="tma", scales="block"),
    GemmConfig("e4m3", bn=32, stages=8, swap_ab=True, scales="block"),
    GemmConfig("e4m3", bn=192, cluster=2, epilogue="rows", epilogue_split=3, scales="block"),
], ids=lambda c: c.name)
def test_names_read_back(config):
    assert config.name.endswith("B")
    assert GemmConfig.from_name(config.name, "e4m3") == config


def test_heuristic_choices():
    names = {(m, n, k): choose_block_scaled_config(m, n, k).name
             for m, n, k in [(4096, 7168, 2048), (4096, 2112, 7168), (64, 7168, 2048), (16, 4096, 7168),
                             (1, 2112, 7168), (32, 2112, 7168), (33, 2112, 7168), (128, 7168, 2048), (100, 64, 128),
                             (128, 24576, 1536), (64, 7168, 16384), (1024, 2112, 7168), (2048, 2112, 7168),
                             (128, 32768, 512), (128, 4096, 7168)]}
    # 128 x 192 tiles where their waves fill the SMs nearly as well: 2.7 waves against 4.1 of 128 x 128
    # 256 x 128 tiles where their area-waves are as small: 4 waves against 8 of 128 x 128
    assert names == {(4096, 7168, 2048): "h256x128s3c2tBS", (4096, 2112, 7168): "h128x192s4to1BS",
                     # M <= 64 swapped (the kernel's N is M), scales by TMA; where stream-K's rule holds (under a
                     # third of the SMs hold a tile) and the tiles leave room for two k-slices each, split-K
                     (64, 7168, 2048): "h128x64s8xBSA", (16, 4096, 7168): "h128x16s8zxBSA",
                     (1, 2112, 7168): "h128x16s8zxBSA", (32, 2112, 7168): "h128x32s8zxBSA",
                     (33, 2112, 7168): "h128x64s8zxBSA", (128, 7168, 2048): "h128x64s8to1BSA",
                     (100, 64, 128): "h128x64s8to1BSA",
                     # stream-K on every SM only where it saves 20 k-tiles: 192 tiles of 12 k-tiles do not
                     (128, 24576, 1536): "h128x64s8to1BSA", (64, 7168, 16384): "h128x64s8xBSA",
                     # one row of tiles above M = 64: 64-wide tiles where 128-wide ones leave the last wave under 3/4
                     (128, 32768, 512): "h128x128s5to1BSA", (128, 4096, 7168): "h128x64s8tzBSA",
                     # 136 tiles (one to two waves): no stream-K; 272 tiles (two full waves, 3% in the last): stream-K
                     (1024, 2112, 7168): "h256x128s3tBS", (2048, 2112, 7168): "h128x128s5tskaBS"}
    assert choose_block_scaled_config(4096, 7168, 2048, grouped="contiguous").name == "h128x128s5to1BSAGc"
    assert choose_block_scaled_config(4096, 7168, 2048, grouped="masked").name == "h128x128s5to1BSAGm"
    assert choose_block_scaled_config(40, 24576, 1536).name == "h128x64s8xBSA"


@pytest.mark.parametrize("m, n, k, form", [
    (64, 2112, 7168, "split"),        # swapped, 17 tiles: 7 slices
    (24, 1536, 32768, "split"),       # swapped, 12 tiles: 11 slices
    (112, 2048, 16384, "split"),      # 64-wide tiles, 32 of them: 4 slices
    (224, 2048, 7168, "split"),       # 128 x 128, 32 tiles
    (128, 24576, 1536, "neither"),    # 192 tiles of 12 k-tiles: stream-K saves too little
    (2048, 2112, 7168, "streamk"),    # 272 tiles: one k-slice each, stream-K on every SM
])
def test_split_k_replaces_stream_k_where_each_tile_gets_two_slices(m, n, k, form):
    """Where the stream-K rules hold and ⌊132 / tiles⌋ ≥ 2, the same tile split into k-slices with two chunks in
    flight; with fewer slices than two, stream-K on every SM."""
    pick = choose_block_scaled_config(m, n, k, 132)
    kernel_m, kernel_n = (n, m) if pick.swap_ab else (m, n)
    tiles = -(-kernel_m // pick.bm) * -(-kernel_n // pick.bn)
    got = "split" if pick.splitk else "streamk" if pick.streamk else "neither"
    assert got == form, pick.name
    if pick.splitk:
        assert pick.chunk_ahead and not pick.streamk_every_sm and 132 // tiles >= 2
    if pick.streamk:
        assert pick.streamk_every_sm and 132 // tiles < 2


@pytest.mark.parametrize("m, n, k, wide", [
    (4096, 24576, 1536, True),     # 0.970 of the waves filled against 0.990: within the margin
    (8192, 2112, 7168, True),      # 0.889 against 0.916
    (4096, 5120, 5120, False),     # 0.935 against 0.970: beyond it
    (4096, 4096, 7168, False),     # 0.889 against 0.970
    (4096, 32768, 512, False),     # 4 k-tiles
    (128, 24576, 1536, False),     # one row of tiles: the narrow rules decide
    (256, 11008, 4096, True),      # 0.977 (2 x 58 tiles, one wave) against 0.659 (2 x 86): from 129 rows
    (2048, 2112, 7168, False),     # 176 tiles: 0.67 of two waves (stream-K)
])
def test_wide_tile_rule(m, n, k, wide):
    """128 x 192 tiles (one chunk per warpgroup) where their waves fill the SMs at least 0.8 and at most 0.03 less
    than 128 x 128 tiles', from 129 rows and 8 k-tiles; the same for contiguous groups, never for masked ones."""
    dense = choose_block_scaled_config(m, n, k)
    # dense: the 256 x 128 tile takes its place where its own rule holds too (test_fp8_block_tall.test_tall_rule)
    assert (dense.name in ("h128x192s4to1BS", "h256x128s3tBS") if wide else dense.bn != 192)
    assert (choose_block_scaled_config(m, n, k, grouped="contiguous").name == "h128x192s4to1BSGc") == wide
    assert choose_block_scaled_config(m, n, k, grouped="masked").bn == 128
    for config in BLOCK_SCALED_CANDIDATES:
        assert config.validate().scales == "block"


@pytest.mark.parametrize("bn, windows", [(16, 1), (64, 1), (128, 1), (112, 2), (144, 2), (160, 2), (192, 2),
                                         (224, 3), (256, 2)])
def test_column_windows_cover_every_tile_start(bn, windows):
    """The B scale blocks a tile touches, over every tile start n0 = tn·BN: at most column_windows(BN)."""
    assert block_scales.column_windows(bn) == windows
    worst = max((tn * bn + bn - 1) // 128 - (tn * bn) // 128 + 1 for tn in range(128))
    assert worst == windows
    assert block_scales.straddles(GemmConfig("e4m3", bn=bn, scales="block")) == (128 % bn != 0 and bn % 128 != 0)


# -- the scale layouts -------------------------------------------------------------------------------------------------

def test_tma_aligned_helpers():
    assert [get_tma_aligned_size(x, 4) for x in (1, 4, 17, 20)] == [4, 4, 20, 20]
    assert get_tma_aligned_size(17, 2) == 24
    x = np.arange(17 * 3, dtype=np.float32).reshape(17, 3)
    y = get_mn_major_tma_aligned_tensor(x)
    assert y.shape == (17, 3) and tuple(s // 4 for s in y.strides) == (1, 20)
    assert np.array_equal(y, x)
    assert get_mn_major_tma_aligned_tensor(y) is y
    assert get_col_major_tma_aligned_tensor is get_mn_major_tma_aligned_tensor
    g = np.arange(2 * 5 * 2, dtype=np.float32).reshape(2, 5, 2)
    gy = get_mn_major_tma_aligned_tensor(g)
    assert tuple(s // 4 for s in gy.strides) == (16, 1, 8) and np.array_equal(gy, g)


# -- the op in the interpreter -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [1, 17, 133])
@pytest.mark.parametrize("n", [16, 144, 272])
@pytest.mark.parametrize("k", [128, 272, 384])
def test_heuristic_config_matches_float64(m, n, k):
    """The configuration the heuristic picks (swapped for M ≤ 64 < N), 2 CTAs; the M-major TMA-aligned A scales on
    every other shape."""
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    a_scales = get_mn_major_tma_aligned_tensor(sa) if (m + n + k) % 2 else sa
    out = fp8_gemm_nt(a, a_scales, b, sb, sm_count=2)
    assert out.shape == (m, n)
    check(out, reference(a, sa, b, sb))


@pytest.mark.parametrize("m, n, width", [
    (128, 8192, 64),     # 64 tiles 128 wide: their 128 tiles 64 wide still fit in one wave
    (128, 8448, 64),     # 66: exactly half the SMs
    (128, 8576, 128),    # 67: 134 tiles 64 wide would put two on some SM, as long as one 128-wide tile
    (96, 14336, 128),    # 112 tiles in one wave
    (128, 24576, 64),    # 192 tiles: the second wave holds 45% of the SMs
    (128, 32768, 128),   # 256 tiles: the second wave holds 94%
    (64, 8192, 64),      # M <= 64: swapped, the kernel's N is M
])
def test_narrow_tiles_where_they_fill_the_waves_better(m, n, width):
    """64 < M ≤ 128: 64-wide tiles where the 128-wide ones fill at most half the SMs in one wave, or leave a later
    wave under 3/4 full; 128-wide tiles otherwise (132 SMs, K = 7168)."""
    assert choose_block_scaled_config(m, n, 7168, 132).bn == width


@pytest.mark.parametrize("k", [384, 1040])
def test_the_narrow_tile_the_heuristic_picks_matches_float64(k):
    """64 < M ≤ 128 with 128-wide tiles leaving a part wave: the 64-wide chunk_ahead tile (``BLOCK_SCALED_NARROW``)."""
    assert choose_block_scaled_config(100, 272, k, 2).name == "h128x64s8to1BSA"
    rng = np.random.default_rng()
    a, sa, b, sb = operands(100, 272, k, rng)
    check(fp8_gemm_nt(a, get_mn_major_tma_aligned_tensor(sa), b, sb, sm_count=2), reference(a, sa, b, sb))


FORCED = [
    GemmConfig("e4m3", bn=112, stages=4, scales="block"),                                    # straddles 2 blocks
    GemmConfig("e4m3", bn=160, stages=4, scales="block"),
    GemmConfig("e4m3", bn=128, stages=4, epilogue="rows", scales="block"),                   # rows epilogue
    GemmConfig("e4m3", bn=192, stages=4, epilogue="tma", epilogue_split=3, scales="block"),  # TMA store in thirds
    GemmConfig("e4m3", bn=224, stages=3, scales="block"),                                    # up to 3 blocks
    GemmConfig("e4m3", bn=256, stages=3, scales="block"),                                    # 2 blocks, static
    GemmConfig("e4m3", bn=64, stages=8, epilogue="tma", scales="block"),
    GemmConfig("e4m3", bm=256, bn=64, stages=4, scales="block"),                             # 2 m64 blocks each
    GemmConfig("e4m3", bn=128, cluster=2, epilogue="tma", scales="block"),                   # B multicast
    GemmConfig("e4m3", bn=16, stages=8, swap_ab=True, scales="block"),
    GemmConfig("e4m3", bn=64, stages=8, swap_ab=True, scales="block"),
    GemmConfig("e4m3", bm=256, bn=32, stages=4, swap_ab=True, scales="block"),
]


# Each configuration with one A-scale layout, alternating: the scales are read by the same gmem.tile (strides the
# tensor's) whatever the configuration, so both layouts still meet the unswapped (A's scales as rows) and the swapped
# (as columns) paths, the straddling widths and the direct and TMA epilogues, without every pairing twice.
FORCED_LAYOUT = [(config, ("row-major", "m-major")[i % 2]) for i, config in enumerate(FORCED)]


@pytest.mark.parametrize("config, layout", FORCED_LAYOUT, ids=lambda x: x if isinstance(x, str) else x.name)
def test_forced_configs_match_float64(config, layout):
    """Ragged problems of several tiles per CTA (3 CTAs); swapped configs with M inside the kernel's N tile."""
    rng = np.random.default_rng()
    m = {16: 13, 32: 29, 64: 45}[config.bn] if config.swap_ab else 300
    n, k = 400, 400
    a, sa, b, sb = operands(m, n, k, rng)
    a_scales = get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa
    out = fp8_gemm_nt(a, a_scales, b, sb, config=config, sm_count=3)
    check(out, reference(a, sa, b, sb))


def test_out_is_written_and_returned_and_degenerate_shapes():
    rng = np.random.default_rng()
    a, sa, b, sb = operands(20, 48, 160, rng)
    out = np.full((20, 48), 7, BF16)
    assert fp8_gemm_nt(a, sa, b, sb, out, sm_count=2) is out
    check(out, reference(a, sa, b, sb))
    empty = fp8_gemm_nt(a[:0], sa[:0], b, sb, sm_count=2)
    assert empty.shape == (0, 48)
    zeros = fp8_gemm_nt(a[:, :0], np.zeros((20, 0), np.float32), b[:, :0], np.zeros((1, 0), np.float32), sm_count=2)
    assert zeros.shape == (20, 48) and not np.any(zeros.astype(np.float32))


def test_a_strided_out_view_takes_the_direct_epilogue():
    """An out view whose rows TMA cannot store (a pitch of 50 bf16): the TMA-store configuration falls back to the
    direct epilogue; the columns past N are untouched."""
    rng = np.random.default_rng()
    a, sa, b, sb = operands(100, 48, 256, rng)
    wide = np.full((100, 50), 3, BF16)
    out = wide[:, :48]
    fp8_gemm_nt(a, sa, b, sb, out, sm_count=2)
    check(out, reference(a, sa, b, sb))
    assert np.all(wide[:, 48:].astype(np.float32) == 3)


def _args(m=17, n=32, k=256):
    rng = np.random.default_rng(0)
    return list(operands(m, n, k, rng))


@pytest.mark.parametrize("change, error, message", [
    (lambda x: x.__setitem__(0, x[0].astype(np.float32)), TypeError,
     r"fp8_gemm_nt: a has dtype numpy float32; fp8_gemm_nt takes e4m3 \(torch.float8_e4m3fn, "
     r"ml_dtypes.float8_e4m3fn\)$"),
    (lambda x: x.__setitem__(2, x[2].astype(ml_dtypes.float8_e5m2)), TypeError,
     "fp8_gemm_nt: b has dtype numpy float8_e5m2; fp8_gemm_nt takes e4m3"),
    (lambda x: x.__setitem__(0, x[0][None]), ValueError, r"fp8_gemm_nt: a must be 2-D \(M, K\), not of shape "
                                                         r"\(1, 17, 256\)"),
    (lambda x: x.__setitem__(0, np.asfortranarray(x[0])), ValueError,
     r"fp8_gemm_nt: a must be row-major \(unit stride along K: \(M, K\) K-major, DeepGEMM's NT\), not strides "
     r"\(1, 17\)"),
    (lambda x: x.__setitem__(2, x[2][:, :128]), ValueError,
     "fp8_gemm_nt: b has 128 columns but a has 256: a \\(M, K\\) and b \\(N, K\\) share K"),
    (lambda x: x.__setitem__(1, x[1].astype(np.float64)), TypeError,
     r"fp8_gemm_nt: a_scales has dtype numpy float64; the scales are float32 \(torch.float32, numpy.float32\)"),
    (lambda x: x.__setitem__(1, x[1][:, :1]), ValueError,
     r"fp8_gemm_nt: a_scales must have shape \(17, 2\) \(M, ⌈K/128⌉: one per row and 128-wide K block\), not "
     r"\(17, 1\)"),
    (lambda x: x.__setitem__(3, x[3].T.copy()), ValueError,
     r"fp8_gemm_nt: b_scales must have shape \(1, 2\) \(⌈N/128⌉, ⌈K/128⌉: one per 128 × 128 block\), not \(2, 1\)"),
])
def test_bad_arguments_are_named(change, error, message):
    args = _args()
    change(args)
    with pytest.raises(error, match="^" + message):
        fp8_gemm_nt(*args, sm_count=2)


def test_bad_sizes_outputs_and_configs():
    a, sa, b, sb = _args(17, 32, 256)
    with pytest.raises(ValueError, match="^fp8_gemm_nt: K = 200 must be a multiple of 16 "):
        fp8_gemm_nt(a[:, :200], sa, b[:, :200], sb)
    with pytest.raises(ValueError, match=r"^fp8_gemm_nt: N = 24 must be a multiple of 16 \(b's rows, as DeepGEMM "
                                         r"requires\)$"):
        fp8_gemm_nt(a, sa, b[:24], sb)
    with pytest.raises(TypeError, match=r"^fp8_gemm_nt: out has dtype numpy float16; the result is bf16 "):
        fp8_gemm_nt(a, sa, b, sb, np.zeros((17, 32), np.float16))
    with pytest.raises(ValueError, match=r"^fp8_gemm_nt: out must have shape \(17, 32\), not \(17, 31\)$"):
        fp8_gemm_nt(a, sa, b, sb, np.zeros((17, 31), BF16))
    with pytest.raises(ValueError, match=r"^fp8_gemm_nt: config must be an e4m3 → bf16 GEMM with scales='block', "
                                         r"not grouped, not e4m3 → bf16 with scales='tensor' \(h128x128s4k4\)$"):
        fp8_gemm_nt(a, sa, b, sb, config=GemmConfig("e4m3", bn=128, promote=4))
    with pytest.raises(ValueError, match=r"\(h128x128s4BGc\)$"):
        fp8_gemm_nt(a, sa, b, sb, config=GemmConfig("e4m3", bn=128, scales="block", grouped="contiguous"))
    with pytest.raises(TypeError, match="^fp8_gemm_nt: config must be a GemmConfig, not str$"):
        fp8_gemm_nt(a, sa, b, sb, config="h128x128s6tB")
    with pytest.raises(TypeError, match="^fp8_gemm_nt: a must be a CUDA tensor"):
        fp8_gemm_nt([[1]], sa, b, sb)


# -- PTX ---------------------------------------------------------------------------------------------------------------

def compiled_block_scaled(config):
    """The block-scaled kernel of ``config`` lowered and assembled by nvJitLink, specialized as the op launches it:
    scales from global memory unless ``scales_smem`` (a masked A's scales rank 2), C's unit stride for a non-TMA
    epilogue (mode 0 when swapped), stream-K's workspace and flags."""
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    specs = {} if config.scales_smem else {"row_scales": TensorSpec(2 if config.grouped == "masked" else 1, True, 4),
                                           "col_scales": TensorSpec(1, True, 4)}
    if config.epilogue != "tma":
        specs["c"] = TensorSpec(0 if config.swap_ab else 1, True, 16)
    if config.streamk:
        specs.update(work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
    return compile_kernel(fp8_module.kernel_module(config).kernels[0], Specialization.of(**specs))


_compiled = compiled_block_scaled


MAIN = list(BLOCK_SCALED_CANDIDATES) + [GemmConfig("e4m3", bn=bn, stages=8, swap_ab=True, scales="block",
                                                   late_scales=True) for bn in (16, 32, 64)]


@pytest.mark.parametrize("config", MAIN, ids=lambda c: c.name)
def test_main_configs_compile_pipelined_without_spills(config):
    """The heuristic's configurations assemble (LLVM NVPTX → ptxas through nvJitLink) with no wgmma serialized
    (C7514) and nothing spilled; each k-tile's scales are a few loads (one per distinct row and column block: the
    lowering loads a broadcast element once: 2 rows + 1 column block unswapped, 1 row block + BN/4 column pairs
    swapped), its promotion (``late_scales``) one multiply by the column scale and one FMA by the row scale per
    accumulator value."""
    compiled = _compiled(config)
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes == 0
    loads = len(re.findall(r"\bld\.global\.b32\b", compiled.ptx))
    fmas = len(re.findall(r"\bfma\.rn\.f32\b", compiled.ptx))
    muls = len(re.findall(r"\bmul\.rn\.f32\b", compiled.ptx))
    assert loads == (3 if not config.swap_ab else 1 + config.bn // 4)
    assert fmas == config.bn // 2 * (config.bm // 128)
    assert muls == fmas


@pytest.mark.parametrize("bn", [112, 160])
def test_straddling_configs_compile(bn):
    compiled = _compiled(GemmConfig("e4m3", bn=bn, stages=4, scales="block"))
    assert "C7514" not in compiled.info_log


# -- the GPU -----------------------------------------------------------------------------------------------------------


def gpu_operands(torch, m, n, k, aligned=True):
    """Fresh random operands quantized as DeepGEMM's tests do (bf16 activations per token, weights per block, by
    our quantization kernels) → (a, a_scales (M-major TMA-aligned; ``aligned`` False: row-major), b, b_scales,
    float64 reference)."""
    from ptxgen.kernels import per_block_cast_to_fp8, per_token_cast_to_fp8

    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a, sa = per_token_cast_to_fp8(x, tma_aligned_scales=aligned)
    b, sb = per_block_cast_to_fp8(w)
    ea = sa.double().repeat_interleave(128, dim=1)[:, :k]
    eb = sb.double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    want = (a.double() * ea) @ (b.double() * eb).T
    return a, sa, b, sb, want


def check_on_gpu(torch, config, m, n, k, aligned=True):
    """``fp8_gemm_nt`` with ``config`` on fresh ``gpu_operands``: within 2e-3 of float64, the same bits twice."""
    a, sa, b, sb, want = gpu_operands(torch, m, n, k, aligned)
    got = fp8_gemm_nt(a, sa, b, sb, config=config)
    again = fp8_gemm_nt(a, sa, b, sb, config=config)
    torch.cuda.synchronize()
    assert torch_rel_err(torch, got, want) < 2e-3
    assert torch.equal(got, again)


def torch_rel_err(torch, got, want):
    return (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()


GPU_SHAPES = [(m, n, k) for m in (64, 128, 4096) for n, k in ((2112, 7168), (24576, 1536), (32768, 512),
                                                              (7168, 16384), (4096, 7168), (7168, 2048))]
GPU_SHAPES += [(1, 2112, 7168), (17, 4096, 7168), (133, 272, 384), (1000, 1040, 1040), (300, 2112, 272),
               (100, 11008, 2048),   # one row of 86 tiles, 128 wide
               (168, 14336, 2048), (280, 7168, 2048)]   # 256 x 128 and 128 x 192 tiles at mid M


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", GPU_SHAPES)
def test_gpu_matches_float64_and_cublas(m, n, k):
    """Against float64 of the dequantized operands (bf16 output rounding: ~1e-3), both scale layouts, and against
    cuBLAS's block-scaled torch._scaled_mm where this torch has it: our error ≤ 1.05 × cuBLAS's (issue 19)."""
    torch = torch_or_skip()
    a, sa, b, sb, want = gpu_operands(torch, m, n, k)
    out = fp8_gemm_nt(a, sa, b, sb)
    natural = fp8_gemm_nt(a, sa.contiguous(), b, sb)
    torch.cuda.synchronize()
    ours = torch_rel_err(torch, out, want)
    assert ours < 2e-3, choose_block_scaled_config(m, n, k).name
    assert torch.equal(out, natural)
    try:
        theirs = torch._scaled_mm(a, b.T, scale_a=sa, scale_b=sb.T, out_dtype=torch.bfloat16)
    except (RuntimeError, TypeError, ValueError):
        return
    torch.cuda.synchronize()
    assert ours <= 1.05 * torch_rel_err(torch, theirs, want) + 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("config", FORCED, ids=lambda c: c.name)
def test_gpu_forced_configs_match_float64(config):
    torch = torch_or_skip()
    m = {16: 13, 32: 29, 64: 45}[config.bn] if config.swap_ab else 1000
    a, sa, b, sb, want = gpu_operands(torch, m, 2112, 2064)
    out = fp8_gemm_nt(a, sa, b, sb, config=config)
    torch.cuda.synchronize()
    assert torch_rel_err(torch, out, want) < 2e-3
