"""The ``tma`` epilogue of a 256-row tile split into its row blocks (``GemmConfig.staged_row_blocks``): each consumer
warpgroup's 128 rows are two 64-row wgmma blocks, staged and stored one after the other (each cut into column blocks
for ``epilogue_split`` = 4), so the staged C is half the tile and a fourth pipeline stage fits (bf16 256 × 128). The
rule and its messages, the staged layout and shared-memory plan, the TMA boxes against layoutc's tensor-map
parameters, the stmatrix writes free of bank conflicts, the IR's stores, the interpreter against float64 (bf16, fp8
per-tensor and block-scaled, overlap, stream-K, clusters), the PTX through nvJitLink, and the GPU."""
import layoutc as lc
import numpy as np
import pytest
from layoutc.hopper import bank_conflicts, make_tma_params

from ptxgen.ir.core import walk
from ptxgen.ir.ops import smem_plan
from ptxgen.ir.ops.smem import stmatrix_row_tv, tile_split
from ptxgen.kernels import GemmConfig, fp8_gemm_nt, get_mn_major_tma_aligned_tensor, scaled_mm
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import epilogue
from ptxgen.kernels.gemm import run as gemm_run
from ptxgen.kernels.gemm.config import SMEM_BYTES

from test_fp8_blockscaled import gpu_operands, operands, torch_or_skip
from test_fp8_grouped import E4M3, product, rel_err
from test_gemm_narrow_epilogue import _gpu_err, check_gpu_matmul, check_interpreter_matmul


def gemm(name, dtype="bf16"):
    return GemmConfig.from_name(name, dtype).validate()


def module_of(c):
    return fp8_module.kernel_module(c) if c.scales == "block" else gemm_run.kernel_module(c)


# -- the rule ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dtype, block, swizzle", [
    ("h256x128s4t2", "bf16", (64, 128), "SW128"),     # the two row blocks, whole width
    ("h256x128s4t4", "bf16", (64, 64), "SW128"),      # each row block in two column halves
    ("h256x112s4t2", "bf16", (64, 112), "SW32"),
    ("h256x144s3t2", "bf16", (64, 144), "SW32"),
    ("h256x160s3t4", "bf16", (64, 80), "SW32"),
    ("h256x112s4k4t2", "e4m3", (64, 112), "SW32"),
    ("h256x128s3t2BS", "e4m3", (64, 128), "SW128"),
    ("h256x128s3t", "bf16", (128, 128), "SW128"),     # unsplit: the warpgroup's rows whole, as before
    ("h128x256s4t2", "bf16", (64, 128), "SW128"),     # BM = 128: column blocks, as before
])
def test_the_staged_block_and_its_swizzle(name, dtype, block, swizzle):
    c = gemm(name, dtype)
    assert GemmConfig.from_name(c.name, dtype) == c
    assert c.staged_block == block
    rows, columns = block
    assert rows * columns * c.epilogue_split == c.rows * c.bn
    assert epilogue.staged_c_swizzle(c) == swizzle
    staged = epilogue.staged_c_layout(c)
    assert lc.size(staged) == lc.cosize(staged.inner) == c.bm * c.bn // c.epilogue_split
    assert c.smem_bytes() <= SMEM_BYTES


def test_the_split_256_row_tile_fits_a_fourth_stage():
    """Staged whole, the bf16 256 × 128 tile's C (64 KB) leaves room for 3 stages of 48 KB; in row blocks (32 KB), 4."""
    whole = GemmConfig(bm=256, bn=128, stages=4, epilogue="tma")
    with pytest.raises(ValueError, match="stages = 4: 4 stages .* need 262208 bytes"):
        whole.validate()
    split = whole.replace(epilogue_split=2).validate()
    assert split.smem_bytes() == 4 * 384 * 128 + 128 * 128 * 2 + 4 * 16 == 229440
    assert lc.to_str(epilogue.staged_c_layout(split)) == "Sw<3,4,3> o 0 o ((8,16),(64,2)):((64,512),(1,8192))"


@pytest.mark.parametrize("fields, message", [
    (dict(bm=256, bn=128, stages=3, epilogue="tma", epilogue_split=3),
     "GemmConfig.epilogue_split = 3: with BM = 256 a warpgroup's 128 rows are staged as its 2 64-row wgmma blocks in "
     "turn (each block a run of the accumulator's values), each cut into column blocks: a multiple of 2, by the "
     "'tma' epilogue of a row-major C (c_major = 'N')"),
    (dict(bm=256, bn=128, stages=3, epilogue="rows", epilogue_split=2),
     "GemmConfig.epilogue_split = 2: with BM = 256 a warpgroup's 128 rows are staged as its 2 64-row wgmma blocks in "
     "turn (each block a run of the accumulator's values), each cut into column blocks: a multiple of 2, by the "
     "'tma' epilogue of a row-major C (c_major = 'N')"),
    # a column-major C stages each column block across all the warpgroup's rows: no row blocks, but 8-column blocks
    (dict(bm=256, bn=120, stages=3, epilogue="tma", epilogue_split=2, c_major="M", swap_ab=True),
     "GemmConfig.epilogue_split = 2: BN = 120 must split into 2 blocks of a multiple of 8 columns (the rows of C's "
     "transpose in an SW128 atom, c_major = 'M')"),
    (dict(bm=256, bn=120, stages=3, epilogue="tma", epilogue_split=4),
     "GemmConfig.epilogue_split = 4: BN = 120 must split into 2 blocks of a multiple of 8 columns"),
])
def test_what_the_row_blocks_refuse(fields, message):
    with pytest.raises(ValueError) as info:
        GemmConfig(**fields).validate()
    assert message in str(info.value)


# -- the staged C: TMA boxes and banks ---------------------------------------------------------------------------------

SPLIT_NAMES = [("h256x128s4t2", "bf16"), ("h256x128s4t4", "bf16"), ("h256x112s4t2", "bf16"), ("h256x144s3t2", "bf16"),
               ("h256x160s3t4", "bf16"), ("h256x128s3t2BS", "e4m3")]


@pytest.mark.parametrize("name, dtype", SPLIT_NAMES)
def test_every_tma_store_box_is_a_valid_tensor_map_of_c(name, dtype):
    """``%c``'s box is one warpgroup's 64 staged rows × one atom row; TMA's byte address of every box element is
    layoutc's swizzled one at each box's place in the staged C: the swizzle TMA reads is the one stmatrix wrote."""
    c = gemm(name, dtype)
    rows, columns = c.staged_block
    box = epilogue.c_parameter(c).box
    box_columns = epilogue.staged_c_columns(c)
    assert lc.size(box) == rows * box_columns
    mine, rows_rest = tile_split(epilogue.staged_c_layout(c), 0, rows)
    boxes, cols_rest = tile_split(mine, 1, box_columns)
    count = 0
    for w in range(2):
        for j in range(columns // box_columns):
            params = make_tma_params(lc.Layout((77, 2112), (2112, 1)), "bf16", boxes,
                                     base=2 * (rows_rest(w) + cols_rest(j)))
            assert params.box_dims == (box_columns, rows)
            count += 1
    assert count * c.epilogue_split * lc.size(box) == c.bm * c.bn


@pytest.mark.parametrize("name, dtype", SPLIT_NAMES)
def test_staged_writes_are_conflict_free(name, dtype):
    """Every warp's stmatrix.x4 writes of a 64-row block (8 rows × 16 bytes per phase) reach 32 distinct banks in
    both warpgroups' halves of the staged C."""
    c = gemm(name, dtype)
    rows, columns = c.staged_block
    _, row_access = stmatrix_row_tv(epilogue.accumulator_block_tv(rows, columns).value, 4, False)
    writes = lc.make_layout(row_access[0], lc.make_layout(lc.Layout(8, rows), row_access[1]))
    mine, rows_rest = tile_split(epilogue.staged_c_layout(c), 0, rows)
    for w in range(2):
        for warp in range(4):
            assert bank_conflicts(writes, mine, "bf16", access_bytes=16, base=2 * rows_rest(w), warp=warp).ways == 1


@pytest.mark.parametrize("name, dtype", SPLIT_NAMES)
def test_the_plan_is_smem_bytes_and_each_block_goes_out_in_atom_rows(name, dtype):
    c = gemm(name, dtype)
    kernel = module_of(c).kernels[0]
    slack = 128 - 16 if c.scales_smem else 0   # validate counts the last stage's B scale slot whole
    assert smem_plan(kernel.body.ops).total == c.smem_bytes() - slack
    ops = list(walk(kernel.body))
    stores = [op for op in ops if op.name == "tma.store"]
    assert len(stores) == c.epilogue_split * c.staged_block[1] // epilogue.staged_c_columns(c)
    assert sum(op.name == "smem.stmatrix" for op in ops) == c.epilogue_split


# -- the interpreter ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, m, n, k", [
    ("h256x128s4t2", 300, 200, 128),      # M ragged in the second row block of warpgroup 1, N past one tile
    ("h256x128s4t4", 513, 136, 64),       # three tile rows, the last of one row; column halves
    ("h256x112s4t2", 257, 240, 64),       # SW32: 7 boxes per row block
    ("h256x144s3t2", 270, 296, 64),
    ("h256x128s4t2o1", 600, 304, 128),    # overlap: the next tile's first k-tile behind the two row blocks
    ("h256x128s4t2sk", 600, 304, 512),    # stream-K's partial tiles
    ("h256x128s4c2t2", 700, 136, 128),    # a cluster of 2 multicasting B
])
def test_matmul_matches_float64(name, m, n, k):
    check_interpreter_matmul(gemm(name), m, n, k)


def test_scaled_mm_per_tensor_fp8_matches_float64():
    rng = np.random.default_rng()
    a = (rng.standard_normal((300, 256)) * 2).astype(E4M3)
    b = (rng.standard_normal((248, 256)) * 2).astype(E4M3)
    got = scaled_mm(a, b.T, np.float32(0.5), np.float32(1.5), config=gemm("h256x112s4k4t2", "e4m3"), sm_count=3)
    assert rel_err(got, a.astype(np.float64) @ b.astype(np.float64).T * 0.75) < 4e-3


@pytest.mark.parametrize("name", ["h256x128s3t2BS", "h256x128s4t2o1B"])
def test_fp8_gemm_nt_matches_float64(name):
    rng = np.random.default_rng()
    a, sa, b, sb = operands(300, 272, 384, rng)
    got = fp8_gemm_nt(a, get_mn_major_tma_aligned_tensor(sa), b, sb, config=gemm(name, "e4m3"), sm_count=3)
    assert rel_err(got, product(a, sa, b, sb)) < 4e-3


# -- PTX ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dtype", [("h256x128s4t2", "bf16"), ("h256x128s4t2o1", "bf16"),
                                         ("h256x112s4t2", "bf16")])
def test_ptx_assembles_with_one_bulk_store_per_box(name, dtype):
    from ptxgen.lower import Specialization, compile_kernel

    c = gemm(name, dtype)
    compiled = compile_kernel(module_of(c).kernels[0], Specialization.of())
    assert "C7514" not in compiled.info_log
    boxes = c.epilogue_split * c.staged_block[1] // epilogue.staged_c_columns(c)
    assert compiled.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == boxes


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h256x128s4t2", "h256x128s4t4", "h256x128s4t2o1", "h256x128s4t2sk",
                                  "h256x112s4t2", "h256x144s3t2", "h256x128s4c2nt2"])
@pytest.mark.parametrize("m, n, k", [(4096, 4096, 1024), (300, 2112, 1000), (1000, 1120, 4096)])
def test_gpu_matmul_matches_float64(name, m, n, k):
    check_gpu_matmul(gemm(name), m, n, k)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h256x128s3t2BS", "h256x128s3c2t2BS"])
@pytest.mark.parametrize("m, n, k", [(4096, 2112, 7168), (333, 7168, 2048)])
def test_gpu_fp8_gemm_nt_matches_float64(name, m, n, k):
    torch = torch_or_skip()
    a, sa, b, sb, want = gpu_operands(torch, m, n, k)
    got = fp8_gemm_nt(a, sa, b, sb, config=gemm(name, "e4m3"))
    torch.cuda.synchronize()
    assert _gpu_err(torch, got, want) < 2e-3
