"""Block-scaled fp8 (``scales="block"``) under stream-K: each piece [lo, hi) of a tile promotes its own k-tiles with
their scales, the workspace holds promoted partial totals and the finishing piece adds them. In the CPU interpreter
against float64 products of the dequantized operands, on a few CTAs whose runs cut tiles at several k-tiles (with
``scales_smem`` at each column of B's 4-k-block scale box), ragged M, N and K, unswapped and swapped, a cluster of 2;
the names and rules; the PTX assembled by nvJitLink beside the data-parallel default; and the GPU at M = 64, 77, 128
up to K = 16384."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels import GemmConfig, fp8_gemm_nt, get_mn_major_tma_aligned_tensor
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import streamk_buffers

from test_fp8_blockscaled import check, compiled_block_scaled as _compiled, gpu_operands, operands, torch_or_skip
from test_fp8_grouped import BF16, cdiv, product, rel_err
from test_fp8_streamk import streamk_runs


def config(name):
    return GemmConfig.from_name(name, "e4m3").validate()



def piece_starts(c: GemmConfig, m: int, n: int, k: int, ctas: int) -> list:
    """The k-tiles (within their tile) at which a cluster's run starts inside a tile: where a piece of one CTA
    begins after another's. [] where the kernel runs data-parallel."""
    km, kn = (n, m) if c.swap_ab else (m, n)
    tiles = cdiv(km, c.bm * c.cluster) * cdiv(kn, c.bn)
    ktiles = cdiv(k, 128)
    runs = streamk_runs(c, tiles, ktiles, ctas // c.cluster)
    return sorted({start % ktiles for start, _end in runs if start % ktiles})


# (name, (m, n, k), CTAs, the k-tiles at which pieces start inside a tile)
CASES = [
    # 3 tiles (N = 320: 2.5 scale blocks) of 9 k-tiles (K = 1040: the last block 16 deep) over 5 CTAs: runs of 5-6
    # k-tiles cut tiles at k-tiles 5, 1, 7 and 3 — every column of a 4-k-block B scale box
    ("h128x128s3tska0B", (77, 320, 1040), 5, [1, 3, 5, 7]),
    ("h128x128s3tska0BS", (77, 320, 1040), 5, [1, 3, 5, 7]),
    ("h128x128s3tska0BwlS", (77, 320, 1040), 4, [2, 4, 6]),
    # few k-tiles: 3 tiles of 2 k-tiles over 7 CTAs — a piece of 1 k-tile each, the 7th CTA without a run
    ("h128x128s2tska0BS", (64, 384, 256), 7, [1]),
    # not every SM: 6 tiles on 4 CTAs, 4 data-parallel, the last 2 shared (a CTA's data-parallel tile, then pieces)
    ("h128x128s3tsk0Bl", (300, 256, 1040), 4, [4]),
    # straddling BN = 192 (a tile reads 2 scale blocks): runs of 3 cut at k-tiles 3, 1, 4, 2
    ("h128x192s3ska0BlS", (77, 400, 640), 5, [1, 2, 3, 4]),
    # swapped (the kernel's rows are B's, its columns A's: M = 37 its N), the direct epilogue
    ("h128x64s4ska0xB", (37, 320, 1040), 4, [2, 4, 6]),
    # a cluster of 2 multicasting B: 2 cluster tiles of 9 k-tiles over 3 clusters, cut at k-tiles 6 and 3
    ("h128x128s3c2tska0BS", (130, 256, 1040), 6, [3, 6]),
]


@pytest.mark.parametrize("name, shape, ctas, starts", CASES, ids=[case[0] for case in CASES])
def test_streamk_matches_float64(name, shape, ctas, starts):
    """The kernel on ``ctas`` CTAs, the workspace NaN before (a partial sum read before it is written would show):
    C within bf16 rounding of float64, partial sums written, the flags zero after; the scales in DeepGEMM's M-major
    TMA-aligned layout for ``scales_smem``, row-major otherwise."""
    c = config(name)
    m, n, k = shape
    assert piece_starts(c, m, n, k, ctas) == starts
    interpret_with_workspace(c, m, n, k, ctas)


def interpret_with_workspace(c: GemmConfig, m: int, n: int, k: int, ctas: int) -> None:
    """The block-scaled kernel of ``c`` (stream-K or split-K) in the interpreter on ``ctas`` CTAs with fresh random
    operands and a NaN workspace: C within bf16 rounding of float64, partial sums written, the flags zero after."""
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    given = get_mn_major_tma_aligned_tensor(sa) if c.scales_smem else sa
    out = np.full((m, n), -7.0, BF16)
    args = fp8_module.kernel_arguments(c, a, given, b, sb, out, m, n, k, "numpy")
    shapes = streamk_buffers(c, ctas)
    work = np.full(shapes["work"], np.nan, np.float32)
    flags = np.zeros(shapes["flags"], np.int32)
    interpret(fp8_module.kernel_module(c), {**args, "sms": ctas, "work": work, "flags": flags})
    check(out, product(a, sa, b, sb))
    assert (~np.isnan(work)).any()
    assert not flags.any()


def test_op_runs_streamk_with_its_workspace():
    """``fp8_gemm_nt`` with a stream-K config allocates the workspace itself (numpy: zeros per call); a piece's k-tile
    scale doubled changes exactly its 128 × 128 block of C's columns (rows all), twice over."""
    rng = np.random.default_rng(7)
    m, n, k = 77, 320, 1040
    a, sa, b, sb = operands(m, n, k, rng)
    c = config("h128x128s3tska0BS")
    one = fp8_gemm_nt(a, sa, b, sb, config=c, sm_count=5).astype(np.float64)
    assert rel_err(one, product(a, sa, b, sb)) < 4e-3
    sb2 = sb.copy()
    sb2[1, 5] *= 2          # tile 1's k-tile 5: inside the run [5, 10) of tiles 0 and 1, box column 1
    two = fp8_gemm_nt(a, sa, b, sb2, config=c, sm_count=5).astype(np.float64)
    changed = np.nonzero(np.any(one != two, axis=0))[0]
    assert changed.min() >= 128 and changed.max() < 256
    assert rel_err(two, product(a, sa, b, sb2)) < 4e-3


# -- names and rules ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fields", [
    ("h128x128s5tskaBS", dict()),
    ("h128x128s5tskaBwlS", dict(pingpong=True, late_scales=True)),
    ("h128x128s5tskaB", dict(scales_smem=False)),
    ("h128x128s5tsk0BS", dict(streamk_every_sm=False, streamk_min_saving=0)),
])
def test_names_read_back(name, fields):
    base = dict(bn=128, stages=5, epilogue="tma", scales="block", scales_smem=True, streamk=True,
                streamk_every_sm=True)
    base.update(fields)
    want = GemmConfig("e4m3", **base).validate()
    assert want.name == name
    assert GemmConfig.from_name(name, "e4m3") == want


@pytest.mark.parametrize("fields, message", [
    (dict(grouped="contiguous"), "GemmConfig.streamk = True: a contiguous grouped GEMM finds each tile's group (and, "
                                 "masked, whether it has rows) on the device, while stream-K shares out k-tiles as if "
                                 "every tile had them all: streamk = False"),
    (dict(grouped="masked", scales_smem=True), "GemmConfig.streamk = True: a masked grouped GEMM finds each tile's "
                                               "group (and, masked, whether it has rows) on the device, while "
                                               "stream-K shares out k-tiles as if every tile had them all: "
                                               "streamk = False"),
    (dict(overlap=1), "GemmConfig.overlap = 1: stream-K's pieces end in a partial sum or a join, not a held tile "
                      "whose epilogue could run behind the next tile's wgmmas: overlap = 0 with streamk = True"),
])
def test_rules(fields, message):
    base = dict(dtype="e4m3", bn=128, stages=5, epilogue="tma", scales="block", streamk=True, streamk_every_sm=True)
    base.update(fields)
    with pytest.raises(ValueError) as info:
        GemmConfig(**base).validate()
    assert str(info.value) == message


# -- PTX ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["h128x128s5tskaBS", "h128x128s5tskaBwl"])
def test_ptx_assembles_beside_the_data_parallel_kernel(name):
    """nvJitLink assembles the stream-K kernel with no serialized wgmma (C7514) and no spill, like the data-parallel
    h128x128s5to1BS, within 24 registers of it under nvJitLink's 168-register budget (measured: 161 with
    ``scales_smem``, 150 without, against 142; the system ptxas with setmaxnreg's 240: no spill either); the partial
    sums go out as 16-byte stores."""
    default = _compiled(config("h128x128s5to1BS"))
    compiled = _compiled(config(name))
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes == default.spill_bytes == 0
    assert compiled.registers <= default.registers + 24
    assert "st.global.v4.f32" in compiled.ptx or "st.global.v4.b32" in compiled.ptx


# -- the GPU -----------------------------------------------------------------------------------------------------------



def _check_twice(torch, name, m, n, k, sms):
    """``fp8_gemm_nt`` with config ``name`` twice on one workspace: within 2e-3 of float64 in relative norm, and
    bitwise equal (the join adds the partial sums in k order, so the result is deterministic, and the first launch
    left the flags zero)."""
    a, sa, b, sb, want = gpu_operands(torch, m, n, k)
    got = fp8_gemm_nt(a, sa, b, sb, config=config(name), sm_count=sms)
    again = fp8_gemm_nt(a, sa, b, sb, config=config(name), sm_count=sms)
    torch.cuda.synchronize()
    err = (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()
    assert err < 2e-3
    assert torch.equal(got, again)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s5tskaBS", "h128x128s5tskaBwlS", "h128x128s5tskaB"])
@pytest.mark.parametrize("m, n, k", [(64, 7168, 16384), (128, 7168, 16384), (128, 2112, 7168), (77, 4096, 7168),
                                     (128, 24576, 1536)], ids=str)
def test_gpu_matches_float64(name, m, n, k):
    """On every SM: 56 tiles of 128 k-tiles (K = 16384) over 132 CTAs in runs of 54-55, 17 tiles of 56 in runs of
    7-8, 32 tiles in runs of 13-14; 192 tiles of 12 k-tiles stay data-parallel (the last wave's saving is 6 < 20)."""
    _check_twice(torch_or_skip(), name, m, n, k, None)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s5tska0BS", "h128x128s5tska0BwlS", "h128x128s5tska0B"])
@pytest.mark.parametrize("m, n, k, sms", [(77, 2112, 1040, 6), (128, 7168, 16384, 20), (64, 320, 256, 7)], ids=str)
def test_gpu_few_ctas_match_float64(name, m, n, k, sms):
    """A few CTAs, stream-K wherever the last wave is ragged (min saving 0): 17 tiles of 9 k-tiles on 6 CTAs (12
    data-parallel, 5 shared in runs of 7-8), 56 tiles of 128 on 20 (40 data-parallel, 16 in runs of 102-103), 3 tiles
    of 2 on 7 (a k-tile each, a CTA idle)."""
    _check_twice(torch_or_skip(), name, m, n, k, sms)
