"""The GEMM's staged epilogues (``tma``, ``rows``) for BN (and BN/epilogue_split) any multiple of 16, not only of 64:
the rule and its message, the staged C's swizzle (SW128 / SW64 / SW32: the widest whose row divides a column block),
its TMA boxes checked against layoutc's TMA parameters, the stmatrix writes and the rows epilogue's reads free of bank
conflicts (layoutc.hopper.bank_conflicts), the shared-memory plan against ``smem_bytes``, the IR's stores, the
interpreter through ``matmul``/``linear``/``scaled_mm``/``fp8_gemm_nt`` against float64 products (ragged M and N,
overlap, stream-K, cluster, bias, split), the PTX through nvJitLink, and the GPU."""
import layoutc as lc
import numpy as np
import pytest
from layoutc.hopper import bank_conflicts, make_tma_params

from ptxgen.ir.core import walk
from ptxgen.ir.ops import smem_plan
from ptxgen.ir.ops.smem import stmatrix_row_tv, tile_split
from ptxgen.kernels import (
    GemmConfig, fp8_gemm_nt, get_mn_major_tma_aligned_tensor, linear, m_grouped_fp8_gemm_nt_contiguous, matmul,
    scaled_mm,
)
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import block_scales, epilogue
from ptxgen.kernels.gemm import run as gemm_run
from ptxgen.kernels.gemm.config import SMEM_BYTES

from test_fp8_blockscaled import gpu_operands, operands, torch_or_skip
from test_fp8_grouped import BF16, E4M3, cdiv, product, rel_err

F16 = np.float16

# the tiles of the task: bf16 128 x 96 (whole waves at 384 x 4096 x 4096) and 128 x 176, DeepGEMM's N tiles
BF16_NAMES = ["h128x96s6t", "h128x96s6to1", "h128x176s4t"]
BLOCK_NAMES = ["h128x160s4to1BS", "h128x112s5to1BS", "h128x144s4to1BS"]


def gemm(name, dtype="bf16"):
    return GemmConfig.from_name(name, dtype).validate()


def module_of(c):
    return fp8_module.kernel_module(c) if c.scales == "block" else gemm_run.kernel_module(c)


# -- the rule ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dtype, swizzle, box_columns", [
    ("h128x96s6t", "bf16", "SW64", 32), ("h128x96s6to1", "bf16", "SW64", 32), ("h128x176s4t", "bf16", "SW32", 16),
    ("h128x160s4to1BS", "e4m3", "SW64", 32), ("h128x112s5to1BS", "e4m3", "SW32", 16),
    ("h128x144s4to1BS", "e4m3", "SW32", 16), ("h128x96s6t2", "bf16", "SW32", 16), ("h128x224s3t", "f16", "SW64", 32),
    ("h128x256s3t2", "bf16", "SW128", 64), ("h128x192s4to1BS", "e4m3", "SW128", 64), ("h128x96s6r", "bf16", "SW64", 32),
])
def test_the_narrow_tiles_validate_and_stage_in_the_widest_dividing_swizzle(name, dtype, swizzle, box_columns):
    c = gemm(name, dtype)
    assert GemmConfig.from_name(c.name, dtype) == c
    assert epilogue.staged_c_swizzle(c) == swizzle
    assert epilogue.staged_c_columns(c) == box_columns
    staged = epilogue.staged_c_layout(c)
    block = c.bn // c.epilogue_split
    assert lc.size(staged) == lc.cosize(staged.inner) == c.bm * block   # dense: smem_bytes counts exactly it
    assert c.smem_bytes() <= SMEM_BYTES


@pytest.mark.parametrize("fields, message", [
    (dict(bn=104, epilogue="rows"),
     "GemmConfig.bn = 104: BN = 104 must split into 1 block of a multiple of 16 columns (whole 32-byte rows of bf16: "
     "the narrowest swizzle atom, SW32, of the staged epilogue)"),
    (dict(bn=200, epilogue="rows", stages=3),
     "GemmConfig.bn = 200: BN = 200 must split into 1 block of a multiple of 16 columns (whole 32-byte rows of bf16: "
     "the narrowest swizzle atom, SW32, of the staged epilogue)"),
    (dict(bn=96, epilogue="rows", epilogue_split=4),
     "GemmConfig.epilogue_split = 4: BN = 96 must split into 4 blocks of a multiple of 16 columns (whole 32-byte rows "
     "of bf16: the narrowest swizzle atom, SW32, of the staged epilogue)"),
    (dict(bn=96, epilogue="tma", epilogue_split=5),
     "GemmConfig.epilogue_split = 5: BN = 96 must split into 5 blocks of a multiple of 8 columns (whole 16-byte rows "
     "of bf16: the narrowest a TMA box's row may be)"),
    (dict(bn=96, epilogue="tma", epilogue_split=8),
     "GemmConfig.epilogue_split = 8: BN = 96 must split into 8 blocks of a multiple of 8 columns (whole 16-byte rows "
     "of bf16: the narrowest a TMA box's row may be)"),
    (dict(dtype="e4m3", out_dtype="f16", bn=120, epilogue="rows", promote=4),
     "GemmConfig.bn = 120: BN = 120 must split into 1 block of a multiple of 16 columns (whole 32-byte rows of f16: "
     "the narrowest swizzle atom, SW32, of the staged epilogue)"),
])
def test_a_block_that_is_no_whole_sw32_row_is_refused(fields, message):
    with pytest.raises(ValueError) as info:
        GemmConfig(**fields).validate()
    assert str(info.value) == message


def test_direct_keeps_any_multiple_of_8():
    assert GemmConfig(bn=104, stages=4).validate().bn == 104


# -- the staged C: TMA boxes and banks ---------------------------------------------------------------------------------

def _boxes(c):
    """(box layout, byte offset in the staged C) of every TMA store of a column block: warpgroup w's rows, atom row j."""
    mine, rows_rest = tile_split(epilogue.staged_c_layout(c), 0, c.rows)
    box, cols_rest = tile_split(mine, 1, epilogue.staged_c_columns(c))
    boxes = (c.bn // c.epilogue_split) // epilogue.staged_c_columns(c)
    return [(box, 2 * (rows_rest(w) + cols_rest(j))) for w in range(2) for j in range(boxes)]


@pytest.mark.parametrize("name, dtype", [(n, "bf16") for n in BF16_NAMES + ["h128x96s6t2", "h128x256s3t2"]]
                         + [(n, "e4m3") for n in BLOCK_NAMES])
def test_every_tma_store_box_is_a_valid_tensor_map_of_c(name, dtype):
    """``%c``'s box (one warpgroup's rows × one atom row) encodes for a row-major C whose N is no multiple of BN, and
    TMA's byte address of every box element is layoutc's swizzled one at each box's place in the staged C (the
    staged C is 1024-byte aligned): the swizzle TMA writes is the one stmatrix wrote."""
    c = gemm(name, dtype)
    box = epilogue.c_parameter(c).box
    assert lc.size(box) == c.rows * epilogue.staged_c_columns(c)
    for layout, offset in _boxes(c):
        assert lc.size(layout) == lc.size(box)
        params = make_tma_params(lc.Layout((77, 2112), (2112, 1)), "bf16", box, base=offset)
        assert params.box_dims == (epilogue.staged_c_columns(c), c.rows)
        assert params.swizzle.name.endswith({"SW128": "128B", "SW64": "64B", "SW32": "32B"}[
            epilogue.staged_c_swizzle(c)])
    assert len(_boxes(c)) * c.epilogue_split * lc.size(box) == c.bm * c.bn


def _stmatrix_rows(c):
    """stmatrix.x4's 16-byte row accesses (thread, (element of the row, instruction)) over the warpgroup's block."""
    cols = c.bn // c.epilogue_split
    _, rows = stmatrix_row_tv(epilogue.accumulator_block_tv(c.rows, cols).value, 4, False)
    return lc.make_layout(rows[0], lc.make_layout(lc.Layout(8, c.rows), rows[1]))


@pytest.mark.parametrize("bn, split", [(bn, split) for bn in (16, 48, 96, 112, 160, 176, 224, 256)
                                       for split in (1, 2) if (bn // split) % 16 == 0])
def test_staged_writes_and_row_reads_are_conflict_free(bn, split):
    """Every warp's stmatrix writes (8 rows × 16 bytes per phase) and the rows epilogue's ld.shared along rows reach
    32 distinct banks, for both warpgroups' rows (the swizzle sees absolute addresses); ``tma`` and ``rows`` stage
    the same layout."""
    c = GemmConfig(bn=bn, stages=1, epilogue="rows", epilogue_split=split).validate()
    assert epilogue.staged_c_layout(c) == epilogue.staged_c_layout(c.replace(epilogue="tma"))
    writes = _stmatrix_rows(c)
    reads = epilogue.row_tv(c.rows, bn // split).value
    mine, rows_rest = tile_split(epilogue.staged_c_layout(c), 0, c.rows)
    for w in range(2):
        for warp in range(4):
            assert bank_conflicts(writes, mine, "bf16", access_bytes=16, base=2 * rows_rest(w), warp=warp).ways == 1
            assert bank_conflicts(reads, mine, "bf16", base=2 * rows_rest(w), warp=warp).ways == 1


def test_the_same_writes_to_a_row_major_buffer_conflict():
    """The check sees conflicts: unswizzled, the 96-column block's rows are 192 bytes apart, so a phase's 8 rows
    fall on 2 of the 8 16-byte bank groups (4-way)."""
    c = gemm("h128x96s6t")
    assert bank_conflicts(_stmatrix_rows(c), lc.Layout((64, 96), (96, 1)), "bf16", access_bytes=16).ways == 4


# -- the kernel --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dtype", [(n, "bf16") for n in BF16_NAMES + ["h128x96s6r", "h128x96s6t2"]]
                         + [(n, "e4m3") for n in BLOCK_NAMES])
def test_the_plan_is_smem_bytes_and_each_block_goes_out_in_atom_rows(name, dtype):
    c = gemm(name, dtype)
    kernel = module_of(c).kernels[0]
    # scales_smem: validate counts the last stage's B slot whole, the plan ends at its box
    slack = 128 - block_scales.column_blocks(c) * 16 if c.scales_smem else 0
    assert smem_plan(kernel.body.ops).total == c.smem_bytes() - slack
    ops = list(walk(kernel.body))
    stores = [op for op in ops if op.name == "tma.store"]
    boxes = (c.bn // c.epilogue_split) // epilogue.staged_c_columns(c)
    assert len(stores) == (boxes * c.epilogue_split if c.epilogue == "tma" else 0)
    assert sum(op.name == "smem.stmatrix" for op in ops) == c.epilogue_split


# -- the interpreter ---------------------------------------------------------------------------------------------------

def _operands(m, n, k, dtype, rng):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    return a, b


def _close(got, want, bound=4e-3):
    assert rel_err(got, want) < bound


@pytest.mark.parametrize("name, dtype, m, n, k", [
    ("h128x96s6t", "bf16", 77, 2112, 128),        # N = 22 tiles of 96, M ragged
    ("h128x96s6to1", "bf16", 200, 400, 256),      # overlap 1: the next tile's first k-tile behind the epilogue
    ("h128x176s4t", "bf16", 77, 600, 136),        # SW32: 11 boxes per warpgroup; N past the last whole tile
    ("h128x160s4t", "bf16", 130, 2112, 64),       # SW64, N = 13.2 tiles
    ("h128x96s6t2", "bf16", 130, 296, 64),        # two 48-column blocks (SW32)
    ("h128x112s4t", "f16", 77, 344, 72),          # f16, K ragged
    ("h128x96s6r", "bf16", 77, 203, 64),          # rows: N odd (no TMA store possible)
    ("h128x160s4r2", "bf16", 77, 365, 64),        # rows, two 80-column blocks (SW32, two rows of 16 per warp)
    ("h128x96s6tsk", "bf16", 300, 400, 512),      # stream-K's partial tiles
    ("h128x96s4c2to1", "bf16", 300, 400, 128),    # a cluster of 2 multicasting B
])
def test_matmul_matches_float64(name, dtype, m, n, k):
    rng = np.random.default_rng()
    np_dtype = BF16 if dtype == "bf16" else F16
    a, b = _operands(m, n, k, np_dtype, rng)
    got = matmul(a, b, config=gemm(name, dtype), sm_count=3)
    assert got.dtype == np.dtype(np_dtype) and got.shape == (m, n)
    _close(got, a.astype(np.float64) @ b.astype(np.float64))


def check_interpreter_matmul(config, m, n, k):
    """``matmul`` of fresh random bf16 (m, k) · (k, n) numpy arrays in the CPU interpreter (3 SMs) with ``config``:
    the (m, n) result within 4e-3 of float64 by relative norm."""
    rng = np.random.default_rng()
    a, b = _operands(m, n, k, BF16, rng)
    got = matmul(a, b, config=config, sm_count=3)
    assert got.shape == (m, n)
    _close(got, a.astype(np.float64) @ b.astype(np.float64))


def check_interpreter_linear_bias(config):
    """``linear`` of a random bf16 x (77, 96), w (336, 96) and bias (336,) in the CPU interpreter (3 SMs) with
    ``config``: within 4e-3 of float64 x·wᵀ + bias by relative norm."""
    rng = np.random.default_rng()
    x = rng.standard_normal((77, 96)).astype(BF16)
    w = rng.standard_normal((336, 96)).astype(BF16)
    bias = rng.standard_normal(336).astype(BF16)
    got = linear(x, w, bias, config=config, sm_count=3)
    _close(got, x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64))


def test_linear_with_bias_matches_float64():
    check_interpreter_linear_bias(gemm("h128x112s5tb"))


def test_scaled_mm_per_tensor_fp8_matches_float64():
    """fp8 with per-tensor scales, f16 out, overlapped (promote 4), a 96-column tile staged in SW64."""
    rng = np.random.default_rng()
    a = (rng.standard_normal((77, 512)) * 2).astype(E4M3)
    b = (rng.standard_normal((400, 512)) * 2).astype(E4M3)
    c = gemm("h128x96s4k4to1_f16", "e4m3")
    got = scaled_mm(a, b.T, np.float32(0.5), np.float32(1.5), out_dtype="f16", config=c, sm_count=3)
    assert got.dtype == np.dtype(F16)
    _close(got, a.astype(np.float64) @ b.astype(np.float64).T * 0.75)



@pytest.mark.parametrize("name, m, n, k", [
    ("h128x160s4to1BS", 77, 2112, 256),      # N = 2112: 13.2 tiles of 160, each straddling B scale blocks
    ("h128x112s5to1BS", 77, 400, 384),
    ("h128x144s4to1BS", 130, 432, 256),
    ("h128x176s4to1BwlS", 77, 400, 256),
    ("h128x112s5to1B", 200, 336, 272),       # scales from global memory
])
def test_fp8_gemm_nt_matches_float64(name, m, n, k):
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    got = fp8_gemm_nt(a, get_mn_major_tma_aligned_tensor(sa), b, sb, config=gemm(name, "e4m3"), sm_count=3)
    assert got.dtype == np.dtype(BF16)
    _close(got, product(a, sa, b, sb))


def test_contiguous_grouped_with_a_narrow_tile_matches_float64():
    rng = np.random.default_rng()
    sizes, n, k = [100, 0, 60], 336, 256
    b = (rng.standard_normal((len(sizes), n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (len(sizes), cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    idx = []
    for g, s in enumerate(sizes):
        idx += [g] * s + [-1] * (cdiv(s, 128) * 128 - s)
    idx = np.array(idx, np.int32)
    a = (rng.standard_normal((idx.size, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (idx.size, cdiv(k, 128))).astype(np.float32)
    out = np.full((idx.size, n), 5, BF16)
    c = gemm("h128x112s5to1BS", "e4m3").replace(grouped="contiguous").validate()
    m_grouped_fp8_gemm_nt_contiguous(a, get_mn_major_tma_aligned_tensor(sa), b, sb, out, idx, config=c, sm_count=3)
    want = np.zeros((idx.size, n))
    for i in np.nonzero(idx >= 0)[0]:
        want[i] = product(a[i:i + 1], sa[i:i + 1], b[idx[i]], sb[idx[i]])[0]
    _close(out, want)
    assert not np.any(out[idx < 0].astype(np.float32))


# -- PTX ---------------------------------------------------------------------------------------------------------------

def _compiled(c):
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    specs = {}
    if c.epilogue != "tma":
        specs["c"] = TensorSpec(1, True, 1 if c.epilogue == "rows" else 16)
    if c.streamk:
        specs.update(work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
    if c.scales == "block" and not c.scales_smem:
        specs.update(row_scales=TensorSpec(1, True, 4), col_scales=TensorSpec(1, True, 4))
    return compile_kernel(module_of(c).kernels[0], Specialization.of(**specs))


@pytest.mark.parametrize("name, dtype, reference", [
    ("h128x96s6t", "bf16", "h128x128s6t"), ("h128x96s6to1", "bf16", "h128x128s6to1"),
    ("h128x176s4t", "bf16", "h128x192s4t"), ("h128x96s6r", "bf16", "h128x128s6r"),
    ("h128x160s4to1BS", "e4m3", "h128x192s4to1BS"), ("h128x112s5to1BS", "e4m3", "h128x128s5to1BS"),
    ("h128x144s4to1BS", "e4m3", "h128x192s4to1BS"),
])
def test_ptx_assembles_like_the_64_column_tiles(name, dtype, reference):
    """nvJitLink assembles each with no serialized wgmma (C7514), and with no more spilled bytes than a wider tile of
    the old rule (nvJitLink ignores setmaxnreg and compiles for 168 registers: the block-scaled BN 192 reports
    696-1072 bytes; ptxas with setmaxnreg's 240, like the driver's JIT, spills none of these: 160 → 0, 176 → 0);
    each box is one ``cp.async.bulk.tensor`` store."""
    compiled = _compiled(gemm(name, dtype))
    wider = _compiled(gemm(reference, dtype))
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes <= wider.spill_bytes
    c = gemm(name, dtype)
    if c.epilogue == "tma":
        stores = compiled.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta")
        assert stores == (c.bn // epilogue.staged_c_columns(c))


# -- the GPU -----------------------------------------------------------------------------------------------------------


def _gpu_err(torch, got, want):
    return (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()


def check_gpu_matmul(config, m, n, k):
    """``matmul`` of fresh random bf16 (m, k) · (k, n) on the GPU with ``config``: within 4e-3 of float64 by relative
    norm, and the same bits when called again."""
    torch = torch_or_skip()
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    got = matmul(a, b, config=config)
    again = matmul(a, b, config=config)
    torch.cuda.synchronize()
    assert _gpu_err(torch, got, a.double() @ b.double()) < 4e-3
    assert torch.equal(got, again)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x96s6t", "h128x96s6to1", "h128x176s4t", "h128x160s4to1", "h128x112s5t",
                                  "h128x96s6r", "h128x96s6t2", "h128x96s6tsk", "h128x96s4c2to1"])
@pytest.mark.parametrize("m, n, k", [(384, 4096, 4096), (77, 2112, 1000), (1000, 6144, 4096), (4096, 1120, 512)])
def test_gpu_matmul_matches_float64(name, m, n, k):
    check_gpu_matmul(gemm(name), m, n, k)


@pytest.mark.gpu
def test_gpu_linear_bias_matches_float64():
    torch = torch_or_skip()
    x = torch.randn(333, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2112, 1024, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(2112, device="cuda", dtype=torch.bfloat16)
    got = linear(x, w, bias, config=gemm("h128x96s6to1b"))
    torch.cuda.synchronize()
    assert _gpu_err(torch, got, x.double() @ w.double().T + bias.double()) < 4e-3


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x160s4to1BS", "h128x112s5to1BS", "h128x144s4to1BS", "h128x176s4to1BwlS",
                                  "h128x160s4to1BwlS"])
@pytest.mark.parametrize("m, n, k", [(4096, 2112, 7168), (77, 2112, 512), (333, 7168, 2048), (128, 24576, 1536)])
def test_gpu_fp8_gemm_nt_matches_float64(name, m, n, k):
    torch = torch_or_skip()
    a, sa, b, sb, want = gpu_operands(torch, m, n, k)
    got = fp8_gemm_nt(a, sa, b, sb, config=gemm(name, "e4m3"))
    again = fp8_gemm_nt(a, sa, b, sb, config=gemm(name, "e4m3"))
    torch.cuda.synchronize()
    assert _gpu_err(torch, got, want) < 2e-3
    assert torch.equal(got, again)
