"""``GemmConfig.chunk_ahead`` (name letter ``A``): the block-scaled mainloop keeps two chunks per consumer warpgroup,
k-tile j+1's wgmmas queued before k-tile j's promotion, both waited for within one loop trip. Its name and rules; the
CPU interpreter against float64 products of the dequantized operands for 1, 2 and a ragged number of k-tiles (the
peel, whole trips, the remainder), stream-K pieces (0, 1 or several k-tiles each), the overlapped epilogue, grouped;
the PTX assembled by nvJitLink without a serialized wgmma (C7514); the GPU."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels import GemmConfig, fp8_gemm_nt, get_mn_major_tma_aligned_tensor
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import streamk_buffers

from test_fp8_mainloop_variants import BF16, config, product, rel_err
from test_fp8_grouped_speed import check_contiguous, check_masked
from test_fp8_blockscaled import check, check_on_gpu
from test_fp8_scales_smem import _compiled, operands


def test_name_reads_back():
    want = GemmConfig("e4m3", bn=128, stages=5, epilogue="tma", overlap=1, scales="block", scales_smem=True,
                      chunk_ahead=True).validate()
    assert want.name == "h128x128s5to1BSA"
    assert GemmConfig.from_name("h128x128s5to1BSA", "e4m3") == want
    assert GemmConfig.from_name("h128x128s5to1BlSAGczn", "e4m3").chunk_ahead


@pytest.mark.parametrize("fields, message", [
    (dict(scales_smem=False), "GemmConfig.chunk_ahead = True: the second chunk's k-tile reads its scales from its "
                              "stage (scales_smem), loaded with it: scales_smem = True"),
    (dict(pingpong=True), "GemmConfig.chunk_ahead = True: each warpgroup keeps its next k-tile's wgmmas queued while "
                          "it promotes; pingpong's turns hold them back until the other warpgroup has issued: choose "
                          "one"),
    (dict(scales="tensor", scales_smem=False, promote=2),
     "GemmConfig.chunk_ahead = True: it orders the promotion of block scales; a config with scales = 'tensor' has "
     "none"),
])
def test_rules(fields, message):
    base = dict(dtype="e4m3", bn=128, stages=5, epilogue="tma", scales="block", scales_smem=True, chunk_ahead=True)
    base.update(fields)
    with pytest.raises(ValueError) as info:
        GemmConfig(**base).validate()
    assert str(info.value) == message


@pytest.mark.parametrize("name, m, n, k", [
    ("h128x128s5to1BSA", 77, 384, 128),      # 1 k-tile: the peel alone, overlapped epilogue
    ("h128x128s5to1BSA", 77, 2112, 256),     # 2 k-tiles: the peel and the remainder; N = 2112 (16.5 blocks)
    ("h128x128s3to1BSA", 130, 256, 1040),    # 9 k-tiles (the last 16 deep): the peel and 4 trips through 3 stages
    ("h128x128s3to1BSA", 77, 256, 896),      # 7 k-tiles: the peel and 3 trips, no remainder
    ("h128x128s3tBSA", 77, 256, 640),        # 5 k-tiles, no overlap (no peel): 2 trips and the remainder
    ("h128x128s3tBSA", 77, 256, 128),        # 1 k-tile, no overlap: the remainder alone
    ("h128x128s4to1BlSA", 200, 384, 768),    # late_scales: 6 k-tiles, the peel, 2 trips and the remainder
    ("h128x192s3tBSA", 130, 400, 512),       # straddling BN = 192: 2 scale blocks per tile
])
def test_dense_matches_float64(name, m, n, k):
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    got = fp8_gemm_nt(a, sa, b, sb, config=config(name), sm_count=3)
    want = product(a, sa, b, sb)
    check(got, want)


@pytest.mark.parametrize("name, shape, ctas", [
    ("h128x128s3tska0BSA", (77, 320, 1040), 5),   # 3 tiles of 9 k-tiles over 5 CTAs: pieces of 5-6 k-tiles
    ("h128x128s2tska0BSA", (64, 384, 256), 7),    # pieces of 1 k-tile, a CTA without a run
    ("h128x128s3tska0BSA", (77, 2112, 1040), 6),  # 17 tiles on 6 CTAs: data-parallel tiles, then pieces
])
def test_streamk_matches_float64(name, shape, ctas):
    c = config(name)
    m, n, k = shape
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    out = np.full((m, n), -7.0, BF16)
    args = fp8_module.kernel_arguments(c, a, get_mn_major_tma_aligned_tensor(sa), b, sb, out, m, n, k, "numpy")
    shapes = streamk_buffers(c, ctas)
    work = np.full(shapes["work"], np.nan, np.float32)
    flags = np.zeros(shapes["flags"], np.int32)
    interpret(fp8_module.kernel_module(c), {**args, "sms": ctas, "work": work, "flags": flags})
    assert rel_err(out.astype(np.float64), product(a, sa, b, sb)) < 4e-3
    assert not np.any(flags)


@pytest.mark.parametrize("name, k", [("h128x128s5to1BSAGczn", 272), ("h128x128s3to1BlSAGc", 400)])
def test_contiguous_grouped_matches_float64(name, k):
    """Grouped contiguous (ragged groups 100, 0, 200, 3 rows, padding rows and a padding tile): 3 k-tiles (the peel
    and one trip) and 4 (the peel, a trip and the remainder); ``z``: the padding rows' NaN never reaches C."""
    check_contiguous(GemmConfig.from_name(name, "e4m3"), k)


def test_masked_grouped_matches_float64():
    """Grouped masked with ``z`` and no overlap (the peel for the rows' reads): counts 0, partial and M_max."""
    check_masked(GemmConfig.from_name("h128x128s3tBSAGmz", "e4m3"), 400)


@pytest.mark.parametrize("name", ["h128x128s5to1BSA", "h128x128s5tskaBSA", "h128x128s4to1BlSA"])
def test_ptx_has_no_serialized_wgmma(name):
    """nvJitLink assembles the kernel and ptxas serializes no wgmma (C7514: a chunk queued in one iteration and read
    after a wait in the next — the previous structure carried a chunk in flight across the loop's back edge and got
    it); the next chunk's group is queued during a promotion (a wait with pending = 1)."""
    compiled = _compiled(config(name))
    assert compiled.registers > 0
    for code in ("C7509", "C7512", "C7514", "C7519", "C7520"):
        assert code not in compiled.info_log
    assert "wgmma.wait_group.sync.aligned 1" in compiled.ptx


def test_default_unchanged():
    """chunk_ahead off: no wait with pending = 1 in the block-scaled kernel (each k-tile's chunk waited for alone)."""
    compiled = _compiled(config("h128x128s5to1BS"))
    assert "wgmma.wait_group.sync.aligned 1" not in compiled.ptx
    assert "C7514" not in compiled.info_log


# -- the GPU -----------------------------------------------------------------------------------------------------------

def _gpu():
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s5to1BSA", "h128x128s5tskaBSA", "h128x128s5to1BlSA"])
@pytest.mark.parametrize("m, n, k", [(4096, 2112, 7168), (4096, 4096, 7168), (77, 2112, 1040), (128, 7168, 16384),
                                     (333, 256, 256)], ids=str)
def test_gpu_matches_float64(name, m, n, k):
    torch = _gpu()
    check_on_gpu(torch, config(name), m, n, k)
