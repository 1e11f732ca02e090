"""``GemmConfig.c_major = "M"``: the TMA-store epilogue of a column-major C — each consumer warpgroup stages its
column block transposed (``stmatrix.trans``) in SW128 atoms of 64 of its rows and stores (block, 64) boxes of C's
transpose — which lets a swapped problem (``swap_ab``: Cᵀ = B·Aᵀ) store its C by TMA. Checked in the CPU interpreter
against float64 (swapped and unswapped, 16-bit and fp8, stream-K, clusters, column blocks, BM = 256, bias, widths that
are an odd number of 8-column matrices), in the PTX (stmatrix .trans, TMA stores, no serialized wgmma) and on the
GPU."""
import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import linear, matmul, scaled_mm
from ptxgen.kernels.gemm import run as gemm_run
from ptxgen.kernels.gemm.config import GemmConfig
from ptxgen.kernels.gemm.epilogue import c_parameter, staged_c_layout

from test_kernels_gemm import rel_err, torch_or_skip, torch_rel_err

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn

SWAPPED = [
    ("bf16", "h128x152s4txT", (150, 200, 136)),     # 152 = 19 matrices of 8 columns: stmatrix.x2
    ("bf16", "h128x160s5c2txT", (40, 304, 64)),
    ("bf16", "h128x64s8txT", (29, 136, 200)),
    ("bf16", "h128x128s6t2xT", (200, 296, 136)),    # two column blocks
    ("bf16", "h256x128s3txT", (150, 296, 136)),     # 128 rows per warpgroup: two boxes
    ("bf16", "h128x192s4t3skxT", (300, 264, 520)),  # stream-K
    ("e4m3", "h128x176s4k4txT", (100, 264, 328)),
    ("e4m3", "h128x224s4k4t2skxT", (230, 272, 640)),
    ("bf16", "h128x80s6g1txT", (319, 304, 200)),     # rule 9's raster: 4 tile columns of the kernel, rows first
    ("bf16", "h128x152s5g1tskxT", (300, 264, 520)),  # ... with stream-K
    ("e4m3", "h128x88s6g1k4txT", (347, 296, 400)),
    # rule 7's 256-row tiles: each warpgroup's two 64-row blocks staged transposed per column block
    ("bf16", "h256x144s4g1t3xT", (300, 600, 200)),   # three 48-column blocks, 3 tile columns rastered
    ("bf16", "h256x120s4t3xT", (250, 520, 136)),     # 40-column blocks: stmatrix.x2
    ("f16", "h256x128s4t2xT", (200, 264, 72)),
]


def operands(dtype, m, n, k, rng):
    kind = {"bf16": BF16, "f16": np.float16}.get(dtype, E4M3)
    return rng.standard_normal((m, k)).astype(kind), rng.standard_normal((n, k)).astype(kind)


@pytest.mark.parametrize("dtype, name, shape", SWAPPED, ids=[s[1] for s in SWAPPED])
def test_swapped_problems_store_c_by_tma(dtype, name, shape):
    """Ragged problems (M, N, K not multiples of the tiles) on 3 CTAs: several tiles per CTA."""
    rng = np.random.default_rng()
    config = GemmConfig.from_name(name, dtype)
    m, n, k = shape
    a, w = operands(dtype, m, n, k, rng)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    if dtype in ("bf16", "f16"):
        got = matmul(a, w.T, config=config, sm_count=3)
    else:
        got, want = scaled_mm(a, w.T, 0.5, 0.25, "bf16", config=config, sm_count=3), want * 0.125
    assert got.shape == (m, n) and rel_err(got, want) < 1e-2


def test_swapped_linear_with_bias():
    rng = np.random.default_rng()
    x, w = operands("bf16", 90, 136, 72, rng)
    bias = rng.standard_normal(136).astype(BF16)
    got = linear(x, w, bias, config=GemmConfig(bn=96, stages=6, epilogue="tma", swap_ab=True, bias=True, c_major="M"),
                 sm_count=3)
    want = x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)
    assert rel_err(got, want) < 1e-2


def test_unswapped_column_major_c():
    """An unswapped kernel writing a column-major C: its %c is C's transpose, a row-major (N, M) array."""
    rng = np.random.default_rng()
    m, n, k = 136, 100, 72
    a, b = operands("bf16", m, n, k, rng)
    c_t = np.zeros((n, m), BF16)
    config = GemmConfig(bn=96, stages=6, epilogue="tma", c_major="M")
    gemm_run.run_numpy(config, a, b, c_t.T, m, n, k, sm_count=3)
    assert rel_err(c_t.T, a.astype(np.float64) @ b.astype(np.float64).T) < 1e-2


def test_staged_layout_and_map():
    """The staged C is (BN, BM) in SW128 atoms of 64 rows; %c maps one (BN, 64) box of C's transpose."""
    import layoutc as lc
    config = GemmConfig.from_name("h128x152s4txT")
    assert lc.to_str(staged_c_layout(config)) == "Sw<3,4,3> o 0 o ((8,19),(64,2)):((64,512),(1,9728))"
    assert str(c_parameter(config)) == "tmap<bf16, 2>[Sw<3,4,3> o 0 o ((8,19),64):((64,512),1)]"
    assert GemmConfig.from_name(config.name) == config and config.c_major == "M" and config.swap_ab


@pytest.mark.parametrize("dtype, name", [("bf16", "h128x152s4txT"), ("bf16", "h128x160s4txT"),
                                         ("e4m3", "h128x160s4k4txT"), ("bf16", "h128x192s4t3skxT")])
def test_ptx_stores_transposed_boxes(dtype, name):
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel
    config = GemmConfig.from_name(name, dtype)
    specs = dict(work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16)) if config.streamk else {}
    compiled = compile_kernel(gemm_run.kernel_module(config).kernels[0], Specialization.of(**specs))
    x = "x4" if (config.bn // config.epilogue_split) % 16 == 0 else "x2"
    assert f"stmatrix.sync.aligned.m8n8.{x}.trans.shared.b16" in compiled.ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in compiled.ptx
    assert "C7514" not in compiled.info_log


def test_f16_and_a_given_out():
    """f16 (rule 7 serves 16-bit types alike), and ``out=`` a row-major C: TMA-stored where its rows allow it, else
    the swapped config falls back to the direct epilogue through C's transposed view."""
    from ptxgen.kernels.gemm.heuristic import choose_config
    rng = np.random.default_rng()
    m, n, k = 100, 512, 72
    a = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    config = GemmConfig(dtype="f16", bn=104, stages=6, epilogue="tma", swap_ab=True, c_major="M")
    out = np.zeros((m, n), np.float16)
    assert matmul(a, w.T, out=out, config=config, sm_count=3) is out and rel_err(out, want) < 1e-2
    assert choose_config(100, 16384, 3072, "f16").name == "h128x104s6txT"
    assert rel_err(matmul(a, w.T, sm_count=3), want) < 1e-2


@pytest.mark.parametrize("dtype", ["bf16", "e4m3"])
def test_swapped_picks_of_several_columns_raster_along_them(dtype):
    """Rule 9 over a grid of problems: a swapped pick whose kernel spans two or more tile columns (⌈M / BN⌉ ≥ 2)
    has raster groups of one tile row; a one-column swapped pick and every unswapped pick keep the default 8, and
    the rule changes nothing but the group and, for rastered tiles of 136 columns or more, the stages (4)."""
    from ptxgen.kernels.gemm.heuristic import _choice_by_rules, choice_without_narrow_split

    out_dtype = "bf16"
    rastered = 0
    for m in (16, 64, 100, 158, 208, 319, 448, 562, 839, 1229, 1630):
        for n, k in ((1536, 7168), (4096, 7168), (11008, 4096), (18432, 16384), (128256, 8192)):
            pick = choice_without_narrow_split(m, n, k, dtype, out_dtype, deep=False)   # rule 10 aside
            before = _choice_by_rules(m, n, k, dtype, out_dtype, "K", "K", False, 132, True)
            columns = -(-m // pick.bn)
            assert pick == before.replace(group=pick.group, stages=pick.stages), (m, n, k)
            assert pick.stages == (min(before.stages, 4) if pick.group == 1 and pick.bm == 128 and pick.bn >= 136
                                   else before.stages), (m, n, k, pick.name)
            assert pick.group == (1 if pick.swap_ab and 2 <= columns <= 16 else 8), (m, n, k, pick.name)
            rastered += pick.group == 1
    assert rastered >= 5     # the grid holds such picks


def test_swapped_raster_leaves_one_column_and_wide_grids_alone():
    """Rule 9's bounds on a forced config: 1 tile column (m ≤ BN) and more than 16 keep group 8; 2 and 16 take 1."""
    from ptxgen.kernels.gemm.heuristic import swapped_raster

    swapped = GemmConfig.from_name("h128x64s8txT")
    assert [swapped_raster(swapped, m).group for m in (64, 65, 1024, 1025)] == [8, 1, 1, 8]
    assert swapped_raster(GemmConfig.from_name("h128x64s8t"), 319).group == 8


def test_tall_swapped_tiles_stage_each_row_block_of_a_column_block():
    """A 256-row swapped tile's column-major C is staged whole rows at a time (``staged_row_blocks`` 1): a column
    block is (BN/S) × 256 of the staged C, which beside 4 stages fits only in blocks (256 × 144: 3 blocks of 48), and
    the IR stages each warpgroup's two 64-row blocks of it apart (two stmatrix.trans per block)."""
    import layoutc as lc
    from ptxgen.ir.core import walk
    from ptxgen.kernels.gemm.heuristic import SMEM_BYTES, swapped_tall_tile

    tall = swapped_tall_tile(144, "bf16")
    assert tall.name == "h256x144s4t3xT" and tall.staged_row_blocks == 1 and tall.staged_block == (128, 48)
    assert tall.smem_bytes() <= SMEM_BYTES < tall.replace(epilogue_split=1).smem_bytes()
    assert lc.size(staged_c_layout(tall)) == 48 * 256
    kernel = gemm_run.kernel_module(tall).kernels[0]
    trans = [op for op in walk(kernel.body) if op.name == "smem.stmatrix" and op.attrs.get("trans")]
    assert len(trans) == 3 * 2
    assert swapped_tall_tile(136, "bf16") is None and swapped_tall_tile(152, "bf16") is None   # no 8-column blocks
    assert swapped_tall_tile(144, "e4m3") is None and swapped_tall_tile(104, "bf16") is None


@pytest.mark.parametrize("dtype, name, m, slowdown", [
    ("bf16", "h128x128s6txT", 602, 1.06),      # rastered, under 136 columns
    ("bf16", "h128x136s4txT", 602, 1.0),       # rastered, 136 columns
    ("bf16", "h128x152s5txT", 602, 1.0),
    ("bf16", "h128x200s4txT", 190, 1.06),      # one column: not rastered
    ("bf16", "h128x200s4txT", 1100, 1.0),      # from SWAP_MID_LARGE_M
    ("bf16", "h128x64s8txT", 1025, 1.0),       # 17 columns: not rastered, but past 1024
    ("e4m3", "h128x104s6k4txT", 201, 1.0),     # fp8 data-parallel: any width
    ("e4m3", "h128x128s6k4tskxT", 582, 1.05),  # fp8 stream-K under 136 columns
    ("e4m3", "h128x136s4k4tskxT", 582, 1.0),
    ("e4m3", "h128x184s4k4tskxT", 582, 1.0),
])
def test_swapped_slowdown_spares_the_rastered_wide_tiles(dtype, name, m, slowdown):
    from ptxgen.kernels.gemm.heuristic import swapped_slowdown

    assert swapped_slowdown(GemmConfig.from_name(name, dtype), m) == slowdown


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, name, shape", [
    ("bf16", "h128x152s4txT", (448, 11008, 1000)), ("bf16", "h128x160s5c2txT", (330, 4104, 2000)),
    ("bf16", "h128x192s4t3skxT", (200, 2056, 3000)), ("bf16", "h256x128s3txT", (500, 1032, 700)),
    ("e4m3", "h128x160s4k4txT", (450, 3000, 1000)), ("e4m3", "h128x224s4k4t2skxT", (190, 2056, 2048)),
    ("bf16", "h128x80s6g1txT", (319, 4096, 2000)), ("bf16", "h128x152s5g1tskxT", (448, 11008, 1000)),
    ("e4m3", "h128x88s6g1k4txT", (347, 4096, 2048)),
    ("bf16", "h256x144s4g1t3xT", (428, 11008, 1000)), ("bf16", "h256x120s4g1t3xT", (250, 2056, 700)),
    ("f16", "h256x128s4t2xT", (300, 4104, 520)),
])
def test_gpu_swapped_tma_store_matches_float64(dtype, name, shape):
    torch = torch_or_skip()
    config = GemmConfig.from_name(name, dtype)
    m, n, k = shape
    if dtype in ("bf16", "f16"):
        kind = torch.bfloat16 if dtype == "bf16" else torch.float16
        a = torch.randn(m, k, device="cuda", dtype=kind)
        w = torch.randn(n, k, device="cuda", dtype=kind)
        c = matmul(a, w.T, config=config)
        again = matmul(a, w.T, config=config)     # the prepared call site
        want = a.double() @ w.double().T
    else:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = scaled_mm(a, w.T, 0.5, 0.25, config=config)
        again = scaled_mm(a, w.T, 0.5, 0.25, config=config)
        want = a.double() @ w.double().T * 0.125
    torch.cuda.synchronize()
    assert torch_rel_err(torch, c, want) < 1e-2
    assert torch.equal(c, again)


@pytest.mark.gpu
def test_gpu_picks_autotune_and_unaligned_out():
    """The ops' own mid-M picks (swapped, C by TMA) on torch tensors, f16 and bf16 with a bias; autotune=True around
    such a pick; an ``out`` whose rows TMA cannot store (a column slice of a wider C) takes the direct epilogue."""
    from ptxgen.kernels.gemm.heuristic import choose_config
    torch = torch_or_skip()
    m, n, k = 448, 11008, 1024
    assert choose_config(m, n, k, "bf16").c_major == "M"
    for kind in (torch.bfloat16, torch.float16):
        x = torch.randn(2, m // 2, k, device="cuda", dtype=kind)
        w = torch.randn(n, k, device="cuda", dtype=kind)
        bias = torch.randn(n, device="cuda", dtype=kind)
        want = x.double() @ w.double().T + bias.double()
        assert torch_rel_err(torch, linear(x, w, bias), want) < 1e-2
        assert torch_rel_err(torch, matmul(x.reshape(m, k), w.T, autotune=True),
                             (want - bias.double()).reshape(m, n)) < 1e-2
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    wide = torch.full((m, n + 3), -7.0, device="cuda", dtype=torch.bfloat16)
    matmul(a, w.T, out=wide[:, 1:n + 1])
    torch.cuda.synchronize()
    assert torch_rel_err(torch, wide[:, 1:n + 1], a.double() @ w.double().T) < 1e-2
    assert bool((wide[:, 0] == -7).all()) and bool((wide[:, n + 1:] == -7).all())
