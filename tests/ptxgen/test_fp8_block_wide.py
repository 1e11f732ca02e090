"""Block-scaled tiles whose BN straddles B's 128-column scale blocks (``block_scales.later_blocks`` /
``pick_scale``: groups on a fixed side of a boundary take their block's factor, the others a tile-constant f32
weight's FMA), and the 128 x 192 tile the heuristic chooses (``BLOCK_SCALED_WIDE``): the CPU interpreter against
float64 products of the dequantized operands, every offset a tile can start at inside a scale block; the PTX
assembled by nvJitLink without predicate-heavy promotion (no select per value)."""
import numpy as np
import pytest

from ptxgen.kernels import fp8_gemm_nt
from ptxgen.kernels.gemm import block_scales
from ptxgen.kernels.gemm.heuristic import BLOCK_SCALED_WIDE

from test_fp8_blockscaled import check
from test_fp8_mainloop_variants import config, product
from test_fp8_grouped_speed import check_contiguous
from test_fp8_scales_smem import _compiled, operands


@pytest.mark.parametrize("name, m, n, k", [
    ("h128x192s4to1BS", 130, 400, 640),     # tiles at n0 = 0, 192, 384: 0 and 64 columns into a block; a ragged edge
    ("h128x160s3to1BS", 77, 800, 384),      # n0 % 128 = 0, 32, 64, 96, 0: each of BN = 160's four offsets
    ("h128x224s2tBS", 64, 672, 256),        # three windows: two boundaries per tile
])
def test_straddling_tiles_match_float64(name, m, n, k):
    c = config(name)
    assert block_scales.straddles(c)
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    # scale blocks of very different sizes, so a value given its neighbour block's scale is far off
    sb *= np.float32(2.0) ** rng.integers(-6, 7, size=sb.shape).astype(np.float32)
    got = fp8_gemm_nt(a, sa, b, sb, config=c, sm_count=3)
    want = product(a, sa, b, sb)
    check(got, want)


def test_wide_tile_contiguous_groups():
    check_contiguous(BLOCK_SCALED_WIDE.replace(grouped="contiguous"), 272)


def test_wide_tile_ptx():
    """The chosen 128 x 192 tile assembles without serialized wgmmas; its promotion blends with FMAs: the only
    selects build the tile-constant weights, one per 8-column group whose side of the boundary depends on the tile
    (64 columns: 8), none per k-tile (the predicate selects did 2 per group and k-tile: 48 in the PTX)."""
    compiled = _compiled(config(BLOCK_SCALED_WIDE.name))
    for code in ("C7509", "C7512", "C7514", "C7519", "C7520"):
        assert code not in compiled.info_log
    assert compiled.ptx.count("selp.f32") <= (128 - 64) // 8


@pytest.mark.gpu
@pytest.mark.parametrize("name, m, n, k", [
    ("h128x192s4to1BS", 1000, 2112, 1040),    # ragged M and K, N not a multiple of 192: both block offsets, an edge
    ("h128x192s4to1BS", 4096, 2112, 7168),    # the heuristic's choice here
    ("h128x160s4to1BS", 333, 800, 384),       # every offset of BN = 160
])
def test_gpu_straddling_tiles(name, m, n, k):
    """On the GPU: within 2e-3 of float64 of the dequantized operands, the same bits twice (M-major and row-major
    A scales)."""
    from test_fp8_blockscaled import check_on_gpu, torch_or_skip
    torch = torch_or_skip()
    check_on_gpu(torch, config(name), m, n, k)
    check_on_gpu(torch, config(name), m, n, k, aligned=False)
