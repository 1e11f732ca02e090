"""Tiles whose two consumer warpgroups split the columns (``GemmConfig.warpgroups_along = "n"``, cuBLAS's "coopB"):
each warpgroup computes all BM rows (64, 128, 192 or 256: BM/64 wgmma row blocks) × BN/2 columns, so a 192-row tile
exists. The rules and their messages, the staged C of an 88-column half in unswizzled 16-byte rows (TMA boxes and
banks), the interpreter against float64 (bf16, fp8 per-tensor; TMA and direct epilogues, row blocks staged in turn,
overlap, stream-K, split-K, clusters, bias), the PTX through nvJitLink, the heuristic's rule 8, and the GPU."""
import layoutc as lc
import numpy as np
import pytest
from layoutc.hopper import bank_conflicts, make_tma_params

from ptxgen.ir.core import walk
from ptxgen.ir.ops import smem_plan
from ptxgen.ir.ops.smem import stmatrix_row_tv, tile_split
from ptxgen.kernels import GemmConfig, matmul, scaled_mm
from ptxgen.kernels.gemm import epilogue, heuristic
from ptxgen.kernels.gemm import run as gemm_run
from ptxgen.kernels.gemm.config import SMEM_BYTES

from test_fp8_blockscaled import torch_or_skip
from test_fp8_grouped import BF16, E4M3, rel_err
from test_gemm_narrow_epilogue import (
    _gpu_err, check_gpu_matmul, check_interpreter_linear_bias, check_interpreter_matmul,
)


def gemm(name, dtype="bf16"):
    return GemmConfig.from_name(name, dtype).validate()


# -- the rules ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, rows, columns, block", [
    ("h192x176s4Ct3", 192, 88, (64, 88)),      # three 64-row blocks in turn, each whole
    ("h192x128s4Ct", 192, 64, (192, 64)),      # staged whole
    ("h192x96s4C", 192, 48, (192, 48)),        # direct: nothing staged
    ("h64x128s4Ct", 64, 64, (64, 64)),
    ("h256x128s3Ct4", 256, 64, (64, 64)),
])
def test_each_warpgroup_holds_all_rows_and_half_the_columns(name, rows, columns, block):
    c = gemm(name)
    assert GemmConfig.from_name(c.name) == c and c.warpgroups_along == "n"
    assert (c.rows, c.columns) == (rows, columns)
    assert c.staged_block == block
    assert c.smem_bytes() <= SMEM_BYTES
    if c.staged:
        assert c.smem_bytes() == c.stages * (c.bm + c.bn) * 128 + 2 * block[0] * block[1] * 2 + 16 * c.stages


@pytest.mark.parametrize("fields, message", [
    (dict(bm=160, bn=128), "GemmConfig.bm = 160: with warpgroups_along = 'n' each consumer warpgroup computes all BM "
                           "rows × BN/2 columns, in 64-row wgmma blocks of one TMA box \\(at most 256 rows\\): BM is "
                           "64, 128, 192 or 256"),
    (dict(bm=192, bn=120), "GemmConfig.bn = 120: with warpgroups_along = 'n' each consumer warpgroup computes all BM "
                           "rows × BN/2 columns, BN/2 its wgmma's N \\(a multiple of 8\\): BN a multiple of 16 "
                           "from 16 to 256"),
    (dict(bm=192, bn=192), "GemmConfig.bn = 192: with warpgroups_along = 'n' each consumer warpgroup computes all BM "
                           "rows × BN/2 columns: 144 f32 accumulator values per thread, over the 132 that fit beside "
                           "the rest of the consumer's 240 registers"),
    (dict(dtype="e4m3", bm=192, bn=128, promote=4), "GemmConfig.bn = 128: .*: 192 f32 accumulator values per thread "
                                                    "\\(a chunk and a total: promote > 1\\), over the 144"),
    (dict(dtype="e4m3", bm=192, bn=96, scales="block"), "GemmConfig.scales = 'block': .*; built for scales = 'tensor'"),
    (dict(bm=192, bn=96, b_major="MN"), "GemmConfig.b_major = 'MN': .*; built for b_major = 'K'"),
    (dict(bm=192, bn=96, epilogue="tma", c_major="M"), "GemmConfig.c_major = 'M': .*; built for c_major = 'N'"),
    (dict(bm=192, bn=96, swap_ab=True, epilogue="tma"), "GemmConfig.epilogue = 'tma': .*; swapped \\(swap_ab\\), "
                                                        "C's transposed view is stored by the 'direct' epilogue"),
    (dict(bm=192, bn=96, epilogue="rows"), "GemmConfig.epilogue = 'rows': .*; built for the 'tma' and 'direct' "
                                           "epilogues"),
    (dict(bm=192, bn=96, stages=0), "GemmConfig.stages = 0: the pipeline needs at least 1 stage"),
    (dict(bm=192, bn=176, epilogue="tma", epilogue_split=2), "GemmConfig.epilogue_split = 2: with BM = 192 a "
                                                             "warpgroup's 192 rows are staged as its 3 64-row wgmma "
                                                             "blocks in turn"),
    (dict(bm=192, bn=176, stages=4, epilogue="tma"), "GemmConfig.stages = 4: 4 stages .* need 256064 bytes"),
])
def test_what_the_column_split_refuses(fields, message):
    with pytest.raises(ValueError, match=message):
        GemmConfig(warpgroups_along="n", **fields).validate()


def test_an_unknown_split_direction_is_refused():
    with pytest.raises(ValueError, match="GemmConfig.warpgroups_along = 'k': the two consumer warpgroups split the "
                                         "tile's rows \\('m'\\) or its columns \\('n'\\)"):
        GemmConfig(warpgroups_along="k").validate()


# -- the staged C: an 88-column half in plain rows ---------------------------------------------------------------------

@pytest.mark.parametrize("name, swizzle, box_columns", [
    ("h192x176s4Ct3", "ROW", 88), ("h192x144s4Ct", "ROW", 72), ("h192x160s4Ct3", "SW32", 16),
    ("h192x128s4Ct", "SW128", 64), ("h128x104s4t", "ROW", 104),
])
def test_the_staged_half_takes_the_widest_dividing_atom(name, swizzle, box_columns):
    c = gemm(name)
    assert epilogue.staged_c_swizzle(c) == swizzle
    assert epilogue.staged_c_columns(c) == box_columns
    staged = epilogue.staged_c_layout(c)
    assert lc.size(staged) == lc.cosize(staged.inner) == 2 * c.staged_block[0] * c.staged_block[1]


@pytest.mark.parametrize("name", ["h192x176s4Ct3", "h192x144s4Ct", "h192x160s4Ct3", "h128x104s4t"])
def test_every_box_is_a_valid_tensor_map_and_the_writes_are_conflict_free(name):
    c = gemm(name)
    rows, columns = c.staged_block
    box_columns = epilogue.staged_c_columns(c)
    mine, rows_rest = tile_split(epilogue.staged_c_layout(c), 0, rows)
    box, cols_rest = tile_split(mine, 1, box_columns)
    assert lc.size(epilogue.c_parameter(c).box) == rows * box_columns
    _, row_access = stmatrix_row_tv(epilogue.accumulator_block_tv(rows, columns).value, 4 if columns % 16 == 0 else 2,
                                    False)
    writes = lc.make_layout(row_access[0], lc.make_layout(lc.Layout(8, rows), row_access[1]))
    for w in range(2):
        for j in range(columns // box_columns):
            params = make_tma_params(lc.Layout((300, 2112), (2112, 1)), "bf16", box,
                                     base=2 * (rows_rest(w) + cols_rest(j)))
            assert params.box_dims == (box_columns, rows)
        for warp in range(4):
            assert bank_conflicts(writes, mine, "bf16", access_bytes=16, base=2 * rows_rest(w), warp=warp).ways == 1


@pytest.mark.parametrize("name", ["h192x176s4Ct3", "h192x128s4Ct"])
def test_the_plan_and_the_stores(name):
    c = gemm(name)
    kernel = gemm_run.kernel_module(c).kernels[0]
    assert smem_plan(kernel.body.ops).total == c.smem_bytes()
    ops = list(walk(kernel.body))
    stores = sum(op.name == "tma.store" for op in ops)
    assert stores == c.epilogue_split * c.staged_block[1] // epilogue.staged_c_columns(c)
    tiles = [op for op in ops if op.name == "smem.tile" and op.results[0].name.startswith("b_cols")]
    assert tiles and not any(op.results[0].name.startswith("a_rows") for op in ops if op.name == "smem.tile")


# -- the interpreter ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, m, n, k", [
    ("h192x176s4Ct3", 250, 360, 128),     # 88-column halves staged in plain rows, three row blocks in turn; ragged M, N
    ("h192x128s4Ct", 300, 200, 64),       # staged whole; the second warpgroup's half past N in the last tile
    ("h192x96s4C", 200, 100, 72),         # direct; K ragged
    ("h64x128s4Ct", 70, 136, 64),
    ("h256x128s3Ct4", 300, 264, 64),      # four row blocks of 64 in turn
    ("h192x160s4Ct3o1", 500, 336, 128),   # overlap: the next tile's first k-tile behind the epilogue
    ("h192x144s4Ctsk", 600, 400, 512),    # stream-K: a warpgroup's partial sums are its own columns'
    ("h192x128s4Ct3ez", 300, 200, 1024),  # split-K
    ("h192x128s4Cc2t", 500, 200, 128),    # clusters of 2 along M sharing B (each CTA loads 64 of its rows)
    ("h192x128s4Cc2nt", 250, 400, 128),   # clusters of 2 along N sharing A (each CTA loads 96 of its rows)
])
def test_matmul_matches_float64(name, m, n, k):
    check_interpreter_matmul(gemm(name), m, n, k)


def test_linear_with_bias_matches_float64():
    check_interpreter_linear_bias(gemm("h192x160s4Ct3b"))


@pytest.mark.parametrize("name", ["h192x96s4Ck4t", "h128x128s4Ck4t", "h192x80s5Ck4t"])   # the last: 40-column ROW
def test_scaled_mm_per_tensor_fp8_matches_float64(name):
    rng = np.random.default_rng()
    a = (rng.standard_normal((300, 512)) * 2).astype(E4M3)
    b = (rng.standard_normal((248, 512)) * 2).astype(E4M3)
    got = scaled_mm(a, b.T, np.float32(0.5), np.float32(1.5), config=gemm(name, "e4m3"), sm_count=3)
    assert rel_err(got, a.astype(np.float64) @ b.astype(np.float64).T * 0.75) < 4e-3


def test_a_128_row_tile_staged_in_plain_rows_matches_float64():
    """The plain-row staging also serves a 128-row tile whose BN is no multiple of 16 (104: one box 104 wide)."""
    rng = np.random.default_rng()
    a = rng.standard_normal((130, 64)).astype(BF16)
    b = rng.standard_normal((64, 216)).astype(BF16)
    got = matmul(a, b, config=gemm("h128x104s4t"), sm_count=3)
    assert rel_err(got, a.astype(np.float64) @ b.astype(np.float64)) < 4e-3


# -- PTX ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["h192x176s4Ct3", "h192x128s4Ct", "h192x96s4C"])
def test_ptx_assembles_with_three_m64_wgmmas_per_k_step(name):
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    c = gemm(name)
    specs = {} if c.epilogue == "tma" else {"c": TensorSpec(1, True, 16)}
    compiled = compile_kernel(gemm_run.kernel_module(c).kernels[0], Specialization.of(**specs))
    assert "C7514" not in compiled.info_log
    # 3 row blocks x 4 k16 steps of one k-tile, each m64 n(BN/2) k16
    assert compiled.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{c.columns}k16") == 12


# -- the heuristic: rule 8 ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, name", [
    ((2112, 1920, 8192), "h192x160s4Ct3"),     # 132 tiles of 192 x 160: one whole wave (128-row tiles: 1.8 waves)
    ((2260, 1536, 4096), "h192x144s4Ct"),       # 132 tiles; 128-row tiles pad M by 2.6%, too little for rule 7
    ((2046, 2112, 12288), "h192x176s4Ct3"),
    ((2112, 2112, 1024), "h128x144s4t"),        # K under COLUMN_SPLIT_MIN_K
    ((2199, 2112, 57344), "h128x200s4g1tskxT"),  # K over COLUMN_SPLIT_MAX_K: rule 7's swapped tile
    ((6204, 2112, 8192), "h192x176s4Ct3"),      # 2.5 waves of 192-row tiles, 3.8 of 128 x 176
    ((4224, 2112, 4096), "h128x176s4t"),        # 2 whole waves either way: the 128-row tile's cost is lower
])
def test_rule_8_picks(shape, name):
    assert heuristic.choose_config(*shape, "bf16").name == name


def test_the_library_runs_its_rule_8_pick_in_the_interpreter():
    """On 2 SMs a 130 × 240 problem fits one wave of 192 × 128 column-split tiles (two 128-row tiles would pad M)."""
    assert heuristic.choose_config(130, 240, 4096, "bf16", 2).name == "h192x128s4Ct"
    rng = np.random.default_rng()
    a = rng.standard_normal((130, 4096)).astype(BF16)
    b = rng.standard_normal((4096, 240)).astype(BF16)
    got = matmul(a, b, sm_count=2)
    assert rel_err(got, a.astype(np.float64) @ b.astype(np.float64)) < 4e-3


def test_rule_8_is_16_bit_k_major_with_a_bounded_k():
    assert heuristic.column_split_tiles(1920, 8192, "e4m3", "bf16") == []
    assert heuristic.column_split_tiles(1920, 8192, "bf16", "bf16", b_major="MN") == []
    assert heuristic.column_split_tiles(1922, 8192, "bf16", "bf16") == []   # C rows not TMA-storable
    assert heuristic.column_split_tiles(1920, heuristic.COLUMN_SPLIT_MIN_K - 64, "bf16", "bf16") == []
    assert heuristic.column_split_tiles(1920, heuristic.COLUMN_SPLIT_MAX_K + 64, "bf16", "bf16") == []
    found = heuristic.column_split_tiles(1920, 8192, "bf16", "bf16")
    assert [c.bn for c in found] == list(heuristic.COLUMN_SPLIT_WIDTHS[16])
    for c in found:
        assert c.warpgroups_along == "n" and c.bm == 192 and c.smem_bytes() <= SMEM_BYTES


# -- swapped (Cᵀ = B·Aᵀ, C through its transposed view: the direct epilogue) ----------------------------------------

@pytest.mark.parametrize("name, m, n, k", [
    ("h64x32s4Cx", 77, 200, 300),          # 2 x 4 tiles of the swapped problem, ragged both ways
    ("h64x48s6Cg1x", 150, 130, 256),       # rastered by columns (rule 9's order)
    ("h128x32s4Cx", 33, 300, 200),
    ("h64x32s4Czx", 50, 130, 2048),        # split-K
    ("h64x32s4Cskax", 50, 130, 1024),      # stream-K on every SM
])
def test_swapped_column_split_matches_float64(name, m, n, k):
    check_interpreter_matmul(gemm(name), m, n, k)


def test_swapped_column_split_linear_bias_and_fp8():
    check_interpreter_linear_bias(gemm("h64x48s8Cg1xb"))
    rng = np.random.default_rng()
    a = (rng.standard_normal((40, 512)) * 2).astype(E4M3)
    b = (rng.standard_normal((130, 512)) * 2).astype(E4M3)
    got = scaled_mm(a, b.T, np.float32(0.5), np.float32(2.0), config=gemm("h64x48s8Ck4x", "e4m3"), sm_count=3)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert rel_err(got, want) < 4e-3


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h64x144s8Cg1x", "h64x96s8Cx", "h64x160s8C", "h64x128s8Czx", "h128x80s8g1x",
                                  "h64x112s8Cskax"])
@pytest.mark.parametrize("m, n, k", [(1124, 1024, 16384), (77, 2112, 1000), (1000, 1120, 2048)])
def test_gpu_deep_and_swapped_column_split_match_float64(name, m, n, k):
    """Rule 10's deep one-wave tiles (8 stages, direct epilogue), swapped column-split tiles among them."""
    check_gpu_matmul(gemm(name), m, n, k)


@pytest.mark.gpu
@pytest.mark.parametrize("name, m, n, k", [("h64x144s8Cg1k4x", 409, 2560, 18432), ("h128x72s8g1k4x", 792, 1536, 1000),
                                           ("h64x160s8Ck4", 1002, 1280, 4096)])
def test_gpu_deep_fp8_matches_float64(name, m, n, k):
    torch = torch_or_skip()
    a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    got = scaled_mm(a, b.T, torch.tensor(0.5, device="cuda"), torch.tensor(1.5, device="cuda"),
                    config=gemm(name, "e4m3"))
    torch.cuda.synchronize()
    assert _gpu_err(torch, got, a.double() @ b.double().T * 0.75) < 4e-3


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h192x176s4Ct3", "h192x160s4Ct3", "h192x144s4Ct", "h192x128s4Ct", "h192x96s4C",
                                  "h192x160s4Ct3o1", "h192x144s4Ctsk", "h192x128s4Ct3ez", "h192x128s4Cc2nt",
                                  "h256x128s4Ct4", "h128x104s4t"])
@pytest.mark.parametrize("m, n, k", [(2046, 2112, 4096), (300, 1000, 1000), (1000, 1120, 2048)])
def test_gpu_matmul_matches_float64(name, m, n, k):
    check_gpu_matmul(gemm(name), m, n, k)


@pytest.mark.gpu
def test_gpu_scaled_mm_fp8_matches_float64():
    torch = torch_or_skip()
    a = (torch.randn(2199, 4096, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(2112, 4096, device="cuda") * 2).to(torch.float8_e4m3fn)
    got = scaled_mm(a, b.T, torch.tensor(0.5, device="cuda"), torch.tensor(1.5, device="cuda"),
                    config=gemm("h192x96s4Ck4t", "e4m3"))
    torch.cuda.synchronize()
    want = a.double() @ b.double().T * 0.75
    assert _gpu_err(torch, got, want) < 4e-3


@pytest.mark.gpu
def test_gpu_the_library_picks_rule_8_and_matches_float64():
    torch = torch_or_skip()
    a = torch.randn(2112, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 1920, device="cuda", dtype=torch.bfloat16)
    assert heuristic.choose_config(2112, 1920, 8192, "bf16").name == "h192x160s4Ct3"
    got = matmul(a, b)
    torch.cuda.synchronize()
    assert _gpu_err(torch, got, a.double() @ b.double()) < 4e-3
