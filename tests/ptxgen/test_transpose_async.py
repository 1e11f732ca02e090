"""ptxgen.kernels.transpose with ``access="sector_vector_async_x"``: ``sector_vector_aligned_x``'s per-row 16-byte
windows of x copied by ``cpasync.copy`` (no x value in registers) into a row-major tile whose row pitch ≡ N mod V, then
``sector_vector``'s out side. The layouts, the interpreter against numpy (exactly x.T) on ragged shapes whose x and
out rows are both unaligned, the cp.async forms in the PTX with registers and spills from nvJitLink, layoutc's bank
reports (reads 4-way for 16-bit types: stated, not hidden), the benchmark's variant name, and the GPU against torch."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels.transpose import (
    TransposeConfig, bank_reports, build, layouts, sector_vector_residency, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
ACCESS = "sector_vector_async_x"


def config_of(dtype: str, rows=None, n: int = 12289) -> TransposeConfig:
    v = 4 if dtype == "f32" else 8
    return TransposeConfig(dtype, 32 * v, 1, ACCESS, rows).for_columns(n).validate()


def test_config_rules_and_layouts():
    """x_residue = N mod V from ``for_columns``; only this access takes it; the tile is row-major with pitch ≡ N mod
    V and BN + 3V − 2 columns."""
    assert config_of("bf16", 128, 8191).x_residue == 7
    assert TransposeConfig("bf16", 256, 1, "sector_vector", 128).for_columns(8191).x_residue is None
    with pytest.raises(ValueError, match=r"TransposeConfig.x_residue = 3 applies to access = 'sector_vector_async_x' "
                                         r"only, as N mod 8 \(0 … 7\)"):
        TransposeConfig("bf16", 256, 1, "sector_vector", x_residue=3).validate()
    with pytest.raises(ValueError, match=r"TransposeConfig.threads = 128 with access = 'sector_vector_async_x' must "
                                         r"be 32 x the 8 bf16 elements"):
        TransposeConfig("bf16", 128, 1, ACCESS).validate()
    ls = layouts(config_of("bf16", 128, 12289))
    assert (str(ls["smem"]), str(ls["smem_t"]), ls["pitch"], ls["origin"]) == (
        "(144,86):(89,1)", "(86,144):(1,89)", 89, 7)
    assert layouts(config_of("bf16", 128, 8191))["pitch"] == 87
    assert layouts(config_of("f32", None, 12289))["smem"] == layouts(config_of("f32", None, 1))["smem"]


SHAPES = [(70, 45), (37, 141), (300, 65), (129, 257), (17, 9), (1, 1)]


@pytest.mark.parametrize("dtype, rows", [("bf16", 128), ("f16", 64), ("bf16", None), ("f32", None), ("f32", 64)])
@pytest.mark.parametrize("shape", SHAPES)
def test_interpreter_is_exact_transpose(dtype, rows, shape):
    """out == x.T exactly, with the config's x_residue both matching N (the copies' fast path) and not (the
    interpreter's meaning does not depend on it; the lowering takes element copies then)."""
    m, n = shape
    rng = np.random.default_rng(m * 1000 + n)
    x = rng.standard_normal((m, n)).astype(NUMPY[dtype])
    for residue_n in (n, n + 1):
        out = np.full((n, m), -7, NUMPY[dtype])
        transpose(x, out, config=config_of(dtype, rows, residue_n))
        assert np.array_equal(out.astype(np.float32), x.T.astype(np.float32))


@pytest.mark.parametrize("dtype, rows", [("bf16", 128), ("bf16", 64), ("bf16", None), ("f32", None)])
def test_ptx_copies_and_registers(dtype, rows):
    """Both pitches unaligned: every x row's window goes by 16-byte ``cp.async.cg`` (the tail by 4, 8 or 16 bytes),
    one commit and one ``wait_group 0``; nvJitLink assembles it with no spill at ``.minnctapersm`` =
    sector_vector_residency (8 CTAs of 256 threads for bf16 BM = 128: ≤ 32 registers, against sector_vector_scalar's
    40 at 6) — the point of the mode."""
    config = config_of(dtype, rows)
    compiled = compile_kernel(build(config).kernels[0],
                              Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1)))
    ptx = compiled.ptx
    bm, bn = config.tile
    v = config.vector
    values = bm * bn // config.threads
    assert len(re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", ptx)) >= values // v
    assert ptx.count("cp.async.commit_group;") == 1 and ptx.count("cp.async.wait_group 0;") == 1
    assert compiled.cubin is not None and compiled.spill_bytes == 0
    resident = sector_vector_residency(config)
    assert compiled.registers * config.threads * resident <= 65536
    if (dtype, rows) == ("bf16", 128):
        assert resident == 8 and compiled.registers <= 32


def test_bank_reports_f32():
    """Reports for every shift of the CTA and warp (bf16's take ~10 s of CPU, f32's one): a warp's transposed reads
    share one 4-byte word position in 16 bytes, so they reach 8 banks at most: 4-way, as the layouts' docstring
    says; the x-side writes at most 4-way."""
    reports = bank_reports(config_of("f32", 32))
    assert reports["load"] and reports["store"]
    assert max(r.ways for r in reports["load"]) == 4
    assert max(r.ways for r in reports["store"]) <= 4


def test_bench_variant_name():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose
    assert bench_transpose.variant_config("bf16", "256/1/sectorvasync128") == TransposeConfig(
        "bf16", 256, 1, ACCESS, 128)
    assert bench_transpose.variant_config("f32", "128/1/sectorvasync").access == ACCESS


def _gpu_torch():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, rows", [("bf16", 128), ("f16", 128), ("bf16", 64), ("bf16", None), ("f32", None)])
@pytest.mark.parametrize("m, n", [(8191, 12289), (12289, 8191), (1000, 1003), (37, 141), (1, 9), (9, 1)])
def test_gpu_against_torch(dtype, rows, m, n):
    """Fresh random inputs each run; the result equals x.t() exactly (a transpose moves bits)."""
    torch = _gpu_torch()
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float64).to(torch_dtype)
    out = transpose(x, config=config_of(dtype, rows, n))
    torch.cuda.synchronize()
    assert torch.equal(out, x.t().contiguous())


@pytest.mark.gpu
def test_gpu_residue_mismatch_and_strided_x():
    """A config built for another N (element copies at run time) and x a column slice (base off 16 bytes): still
    exactly x.T."""
    torch = _gpu_torch()
    x = torch.randn((999, 2051 + 8), device="cuda", dtype=torch.float64).to(torch.bfloat16)[:, 3:3 + 2051]
    for config in (config_of("bf16", 128, 2052), config_of("bf16", 128, 2051)):
        out = transpose(x, config=config)
        torch.cuda.synchronize()
        assert torch.equal(out, x.t().contiguous())
