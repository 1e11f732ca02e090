"""examples/gemm.tile compiled: the PTX holds the wgmma, TMA, mbarrier and setmaxnreg forms, the SASS (when the
nvdisasm wheel is installed) holds HGMMA and no local memory, the descriptors the lowering builds equal layoutc's;
on a GPU (``-m gpu``) the kernel matches a float64 reference on ragged shapes, fresh random inputs each run."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from layoutc.hopper import DescriptorIterator, gmma_smem_layout
from ptxgen.ir.text import parse_module
from ptxgen.kernels.gemm.simple import SimpleGemmConfig
from ptxgen.kernels.gemm.simple import build as build_simple
from ptxgen.lower import compile_kernel
from ptxgen.runtime.sass import disassemble, instruction_counts, nvdisasm_path

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def gemm_module():
    return parse_module((EXAMPLES / "gemm.tile").read_text(), file="examples/gemm.tile")


@pytest.fixture(scope="module")
def compiled():
    return compile_kernel(gemm_module())


def test_ptx_holds_the_hopper_instructions(compiled):
    ptx = compiled.ptx
    # 2 consumer m64 blocks are one op each (the warpgroup's own 64 rows); 4 k16 steps per 64-wide k-tile
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16", ptx)) == 4
    for form in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0",
                 "setmaxnreg.inc.sync.aligned.u32 232", "setmaxnreg.dec.sync.aligned.u32 40",
                 "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                 "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                 "fence.mbarrier_init.release.cluster"):
        assert form in ptx, form
    assert "__local_depot" not in ptx
    assert compiled.spill_bytes in (0, None)


@pytest.mark.skipif(nvdisasm_path() is None, reason="the nvidia-cuda-nvdisasm wheel is not installed")
def test_sass_has_hgmma_and_no_local_memory(compiled):
    counts = instruction_counts(disassemble(compiled.cubin), ["HGMMA.64x128x16.F32.BF16", "UTMALDG", "LDL", "STL"])
    assert counts["HGMMA.64x128x16.F32.BF16"] == 4
    assert counts["UTMALDG"] == 2
    assert counts["LDL"] == counts["STL"] == 0


def test_descriptor_constants_are_layoutcs(compiled):
    """The high bits (LBO, SBO, layout type) of every descriptor in the PTX are those of DescriptorIterator for the
    layouts: K-major SW128 bf16 → LBO 16 B, SBO 1024 B, type 1: 0x4000004000010000."""
    it = DescriptorIterator(gmma_smem_layout("K", "SW128", "bf16", (128, 64)), "bf16", "K", 0, mn=128)
    high = it.first.encode() & ~0x3FFF
    assert high == 0x4000004000010000
    assert str(high) in compiled.ptx or hex(high) in compiled.ptx.lower() or f"{high:X}" in compiled.ptx.upper()


@pytest.mark.parametrize("dtype, bn, stages", [("f16", 256, 3), ("bf16", 64, 2)])
def test_variants_compile(dtype, bn, stages):
    c = compile_kernel(build_simple(SimpleGemmConfig(dtype, bn, stages)))
    assert f"m64n{bn}k16.f32.{dtype}.{dtype}" in c.ptx
    assert c.spill_bytes in (0, None)


# -- on the GPU ------------------------------------------------------------------------------------------------------

def _torch_cuda():
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available
    if not gpu_available() or not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(128, 128, 64), (1000, 1000, 1000), (129, 257, 72), (1, 8, 8), (4096, 4096, 4096),
                                     (333, 4096, 520)])
def test_gpu_gemm_matches_float64(m, n, k):
    torch = _torch_cuda()
    from ptxgen.runtime import jit

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
    jit(gemm_module())(a=a, b=b, c=c, m=m, n=n, k=k)
    torch.cuda.synchronize()
    want = a.double() @ b.double().T
    err = (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item()
    assert err < 1e-2, err


@pytest.mark.gpu
def test_gpu_gemm_f16_and_other_tiles():
    torch = _torch_cuda()
    from ptxgen.runtime import jit

    for dtype, bn, stages, (m, n, k) in (("f16", 256, 3, (300, 700, 264)), ("bf16", 64, 2, (200, 136, 1000))):
        t = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        a = torch.randn(m, k, device="cuda", dtype=t)
        b = torch.randn(n, k, device="cuda", dtype=t)
        c = torch.zeros(m, n, device="cuda", dtype=t)
        jit(build_simple(SimpleGemmConfig(dtype, bn, stages)))(a=a, b=b, c=c, m=m, n=n, k=k)
        torch.cuda.synchronize()
        want = a.double() @ b.double().T
        err = (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item()
        assert err < 1e-2, (dtype, bn, stages, err)
