"""The block-scaled GEMM with BM = 256 (``GemmConfig.row_blocks_in_turn``, DeepGEMM's scheme): each consumer
warpgroup promotes its two 64-row wgmma blocks one after the other from one chunk. Its rules, the IR of its k-tile
loop, ``frag.concat`` and ``wgmma.mma {discard_c}`` (the two ops it needs), the interpreter against float64 products
of the dequantized operands (ragged M, N and K, straddling B scales, both overlap forms, several tiles per CTA), the
PTX assembled by nvJitLink, and the GPU."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.core import walk
from ptxgen.ir.text import parse_module, print_module
from ptxgen.kernels import GemmConfig, choose_block_scaled_config, fp8_gemm_nt, get_mn_major_tma_aligned_tensor
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

from test_fp8_blockscaled import (
    check, check_on_gpu, compiled_block_scaled, operands, reference, torch_or_skip,
)


def config(name):
    return GemmConfig.from_name(name, "e4m3")


# -- the rules ---------------------------------------------------------------------------------------------------------

WHY = "BM = 256 with block scales promotes each warpgroup's two 64-row blocks in turn"


@pytest.mark.parametrize("fields, message", [
    (dict(bn=192), f"GemmConfig.bn = 192: {WHY}, holding one chunk and two totals of BN/2 f32 registers per thread "
                   "(3 × BN/2 of the consumer's 240): BN ≤ 128"),
    (dict(bn=256, stages=2), f"GemmConfig.bn = 256: {WHY}, holding one chunk and two totals of BN/2 f32 registers "
                             "per thread (3 × BN/2 of the consumer's 240): BN ≤ 128"),
    (dict(streamk=True), f"GemmConfig.streamk = True: {WHY}, each k-tile's stage read by both blocks; stream-K's "
                         "partial sums are not built for it: streamk = False (or bm = 128)"),
    (dict(scales_smem=True, chunk_ahead=True),
     f"GemmConfig.chunk_ahead = True: {WHY} from one chunk; chunk_ahead is built for bm = 128 only"),
    (dict(pingpong=True), f"GemmConfig.pingpong = True: {WHY} from one chunk; pingpong is built for bm = 128 only"),
    (dict(scale_prefetch=True),
     f"GemmConfig.scale_prefetch = True: {WHY} from one chunk; scale_prefetch is built for bm = 128 only"),
])
def test_what_is_not_built_is_refused(fields, message):
    fields = {"bn": 128, "stages": 3, **fields}
    with pytest.raises(ValueError) as err:
        GemmConfig("e4m3", bm=256, scales="block", **fields).validate()
    assert str(err.value) == message


def test_which_configs_promote_row_blocks_in_turn():
    assert config("h256x128s3tBS").row_blocks_in_turn
    assert config("h256x112s3to1B").row_blocks_in_turn
    assert not config("h128x128s5to1BSA").row_blocks_in_turn        # BM = 128: one block per warpgroup
    assert not config("h256x32s4xBSA").row_blocks_in_turn           # swapped: small BN, the 128-row form
    assert not GemmConfig("e4m3", bm=256, bn=128, promote=4).row_blocks_in_turn   # tensor scales
    # the swapped BM = 256 form keeps chunk_ahead; grouped GEMMs keep BM = 128
    config("h256x32s4xBSA").validate()
    with pytest.raises(ValueError, match=r"^GemmConfig.bm = 256: a grouped GEMM's tiles are the 128-row M block"):
        config("h256x128s3tBSGc").validate()


# -- the IR ------------------------------------------------------------------------------------------------------------

def _k_loop(name):
    kernel = fp8_module.kernel_module(config(name)).kernels[0]
    loop = next(op for op in walk(kernel.body) if op.name == "scf.for"
                and any(arg.name == "kt_rb" for arg in op.regions[0].args))
    return kernel, loop


@pytest.mark.parametrize("name", ["h256x128s3tBS", "h256x128s3to1BS", "h256x112s3to1B"])
def test_each_k_tile_takes_the_row_blocks_in_turn(name):
    """Per k-tile: block 0's wgmmas from zero, waited (pending 0) and promoted, the promotion pinned by a wait on the
    new total, then block 1's wgmmas on block 0's finished chunk with ``discard_c`` (the same registers), waited and
    promoted; the stage released last. Each chunk is one m64 block (BN/2 values); the totals (carried by the loop
    beside the counter) join by ``frag.concat`` into the (128, BN) accumulator."""
    kernel, loop = _k_loop(name)
    bn = config(name).bn
    ops = loop.regions[0].ops
    seq = [op.name for op in ops if op.name in ("wgmma.mma", "wgmma.wait", "pipeline.release")
           or (op.name == "frag.fma" and op.results[0].name.startswith("total"))]   # the promotions
    assert seq == ["wgmma.mma", "wgmma.wait", "frag.fma", "wgmma.wait", "wgmma.mma", "wgmma.wait", "frag.fma",
                   "pipeline.release"]
    mmas = [op for op in ops if op.name == "wgmma.mma"]
    waits = [op for op in ops if op.name == "wgmma.wait"]
    assert all(op.results[0].type.size == bn // 2 for op in mmas)
    assert "discard_c" not in mmas[0].attrs and mmas[1].attrs["discard_c"] is True
    assert mmas[1].operands[2] is waits[0].results[0]          # block 0's waited chunk
    assert all(int(op.attrs["pending"]) == 0 for op in waits)
    assert len(loop.results) == 3                               # two totals and the counter
    concat = [op for op in walk(kernel.body) if op.name == "frag.concat"]
    assert len(concat) == 1 and list(concat[0].operands) == list(loop.results[:2])
    assert concat[0].results[0].type.size == bn


# -- frag.concat and wgmma.mma {discard_c} -----------------------------------------------------------------------------

CONCAT = """\
kernel @join(%x: gtensor<f32, 1>, %z: gtensor<f32, 1>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %two = arith.const {value = 2.0} : f32
  %xv = gmem.tile %x, %c0 {shape = [128]} : gview<f32>[128]
  %f = gmem.load %xv, %t {tv = [(32,4):(4,1)]} : frag<f32>[4]
  %lo = frag.slice %f {offset = 0} : frag<f32>[1]
  %hi = frag.slice %f {offset = 1} : frag<f32>[3]
  %d = frag.mul %hi, %two : frag<f32>[3]
  %j = frag.concat %d, %lo : frag<f32>[4]
  %zv = gmem.tile %z, %c0 {shape = [128]} : gview<f32>[128]
  gmem.store %zv, %t, %j {tv = [(32,4):(4,1)]}
}
"""


def concat_expected(x):
    """Thread t's values (x[4t+1]·2, x[4t+2]·2, x[4t+3]·2, x[4t]) stored to 4t … 4t+3."""
    rows = x.reshape(32, 4)
    return np.concatenate([2 * rows[:, 1:], rows[:, :1]], axis=1).reshape(128)


def test_concat_in_the_interpreter():
    x = np.random.default_rng().standard_normal(128).astype(np.float32)
    z = np.full(128, -1.0, np.float32)
    interpret(parse_module(CONCAT), {"x": x, "z": z})
    np.testing.assert_array_equal(z, concat_expected(x))


def test_concat_lowers_to_the_operands_registers():
    ptx = compile_kernel(parse_module(CONCAT).kernels[0]).ptx
    # three doublings (LLVM writes 2x as x + x), no other arithmetic: the join itself is no code
    assert sum(ptx.count(f"{op}.rn.f32") for op in ("add", "mul")) == 3
    assert ptx.count("ld.global") == 4 and ptx.count("st.global") == 4


@pytest.mark.parametrize("line, message", [
    ("%j = frag.concat %d, %lo : frag<f32>[5]", "frag.concat: the result's 5 values are not the operands' 3 + 1"),
    ("%j = frag.concat %d, %lo : frag<i32>[4]",
     "frag.concat: the element types differ: frag<f32>[3], frag<f32>[1] and the result's frag<i32>[4]"),
])
def test_concat_errors(line, message):
    text = CONCAT.replace("%j = frag.concat %d, %lo : frag<f32>[4]", line)
    with pytest.raises(VerifyError) as err:
        verify(parse_module(text))
    assert message in str(err.value)


def test_discard_c_must_be_a_bool():
    """``wgmma.mma {discard_c = 1}`` is refused; the GEMMs' interpreter tests below show its meaning (block 1's
    chunk would otherwise add block 0's to row block 1)."""
    text = print_module(fp8_module.kernel_module(config("h256x64s3tBS")))
    assert text.count("discard_c = true") == 1                  # block 1 in the loop (no hook: no peeled k-tile)
    assert print_module(fp8_module.kernel_module(config("h256x64s3to1BS"))).count("discard_c = true") == 2
    with pytest.raises(VerifyError) as err:
        verify(parse_module(text.replace("discard_c = true", "discard_c = 1", 1)))
    assert "wgmma.mma: attribute 'discard_c' must be true or false, not 1" in str(err.value)


# -- the interpreter ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, m, n, k, sms, layout", [
    ("h256x128s3tBS", 200, 144, 272, 1, "row-major"),    # ragged M, N (a second tile of 16 columns), K % 128 ≠ 0
    ("h256x128s3to1BS", 300, 400, 272, 2, "m-major"),    # overlap: 4 tiles per CTA, the epilogue behind k-tile 0
    ("h256x112s3to1BS", 200, 400, 400, 1, "row-major"),  # straddling B scales (tiles at 112, 224, 336)
    ("h256x96s3tBlS", 300, 288, 272, 1, "row-major"),    # straddling, late scales
    ("h256x128s3to1B", 300, 144, 400, 1, "m-major"),     # scales from global memory, overlap
    ("h256x64s4tB", 260, 144, 128, 2, "row-major"),      # global scales, one k-tile, a 4-row last tile row
    ("h256x128s2c2tBS", 600, 144, 272, 2, "row-major"),  # clusters of 2 multicasting B
])
def test_matches_float64(name, m, n, k, sms, layout):
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    given = get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa
    got = fp8_gemm_nt(a, given, b, sb, config=config(name), sm_count=sms)
    check(got, reference(a, sa, b, sb))


def test_each_row_block_takes_its_own_row_scales():
    """Doubling the k-block-1 scale of one row in each of the four 64-row blocks of a tile changes exactly those rows
    (the others are the same bits): a block promoted with another block's row scales, or its chunk added to the
    other block's total, would move the change."""
    rng = np.random.default_rng(3)
    a, sa, b, sb = operands(256, 128, 256, rng)
    c = config("h256x128s3tBS")
    base = fp8_gemm_nt(a, sa, b, sb, config=c, sm_count=1).astype(np.float64)
    changed = sa.copy()
    rows = [5, 64 + 7, 128 + 9, 192 + 11]
    changed[rows, 1] *= 2
    got = fp8_gemm_nt(a, changed, b, sb, config=c, sm_count=1)
    check(got, reference(a, changed, b, sb))
    assert list(np.nonzero(np.any(got.astype(np.float64) != base, axis=1))[0]) == rows


# -- PTX ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["h256x128s3tBS", "h256x128s3to1BS", "h256x112s3to1BS", "h256x96s3to1BS",
                                  "h256x128s3to1BlS"])
def test_ptx_assembles_without_serialized_wgmmas(name):
    """nvJitLink assembles the kernel with no wgmma serialized (C7514) or warpgroup.arrive injected (C7519/C7520).
    (nvJitLink ignores setmaxnreg (C7504), so its spill figure is that of 168 registers per thread and says nothing
    of the 240 the consumers run with; the system ptxas, which honours setmaxnreg, assembles these without spills.)
    Per k-tile and row block: one m64 wgmma statement of 4 k-steps — 2 in the loop, 2 more peeled with
    ``overlap``."""
    compiled = compiled_block_scaled(config(name))
    for code in ("C7514", "C7519", "C7520"):
        assert code not in compiled.info_log
    bn = config(name).bn
    assert compiled.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k32") == 4 * (4 if "o1" in name else 2)


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h256x128s3tBS", "h256x128s3c2tBS", "h256x128s3to1BS", "h256x112s3to1BS",
                                  "h256x128s3to1BlS", "h256x128s3to1B"])
@pytest.mark.parametrize("m, n, k", [(4096, 4096, 7168), (4096, 2112, 7168), (1000, 2112, 512), (333, 7168, 2064),
                                     (77, 256, 400)])
def test_gpu_matches_float64(name, m, n, k):
    torch = torch_or_skip()
    check_on_gpu(torch, config(name), m, n, k, aligned=m != 333)


@pytest.mark.parametrize("m, n, k, name", [
    # area-waves (waves x BM x BN) as small as the 128 x 128 tiles': 4 waves of 256 x 128 against 8 of 128 x 128
    # (16 row tiles of 256, 512 tiles on 132 SMs: in clusters of 2 along M; K = 512: not)
    (4096, 4096, 7168, "h256x128s3c2tBS"), (4096, 7168, 16384, "h256x128s3c2tBS"),
    (4096, 32768, 512, "h256x128s3tBS"),
    # where both hold, in place of 128 x 192 (8192 x 4096: 8 waves x 32768 against 11 x 24576)
    (8192, 4096, 7168, "h256x128s3c2tBS"),
    # 3 waves of 256 x 128 against 5 of 128 x 128 and 3 of 128 x 192: the wide tile stays
    (4096, 2112, 7168, "h128x192s4to1BS"),
    # the stream-K rule comes first where the wide one does not hold
    (3072, 2304, 18432, "h128x128s5tskaBS"), (640, 11008, 7168, "h128x128s5tskaBS"),
    # from 129 rows (184 x 14336: 2 row tiles of 128 or one of 256, 112 tiles against 224)
    (184, 14336, 18432, "h256x128s3tBS"),
    # at most 128 rows (one row of 128 tiles) or K = 256: not taken
    (128, 16384, 4096, "h128x128s5to1BSA"), (4096, 4096, 256, "h128x128s5to1BSA"),
])
def test_tall_rule(m, n, k, name):
    assert choose_block_scaled_config(m, n, k).name == name


@pytest.mark.parametrize("m, n, k, cluster", [
    (4096, 4096, 7168, 2), (1456, 11008, 16384, 2), (20848, 24576, 2048, 2),
    (864, 4096, 6144, 1),      # 4 x 32 = 128 tiles: one per SM
    (3280, 24576, 2048, 1),    # 13 row tiles: the last cluster's second CTA would have no rows
    (4096, 24576, 1536, 1),    # K under 2048
])
def test_tall_tiles_in_clusters_of_two(m, n, k, cluster):
    pick = choose_block_scaled_config(m, n, k)
    assert (pick.bm, pick.cluster, pick.cluster_along) == (256, cluster, "m")


@pytest.mark.parametrize("grouped", ["contiguous", "masked"])
def test_tall_rule_not_for_groups(grouped):
    # a grouped GEMM's tiles are its 128-row M block
    assert choose_block_scaled_config(4096, 4096, 7168, grouped=grouped).bm == 128
