"""ptxgen.kernels.transpose with ``access="sector_vector_pairs"``: the 16-bit transpose whose x rows and out rows are
both unaligned, x read as 2-element vectors (``pairs_tv``: lanes on 2 consecutive columns of one x row, one 4-byte
load where the pair is 4-byte aligned at run time, element loads otherwise) into sector_vector's column-major window,
out stored as 16-byte vectors. The TV layout's value and bijection, the arrangement layoutc picks (one row per warp
where conflict-free, two rows 8 apart where the pitch makes one row 2-way), bank reports, the interpreter against
numpy, the PTX's 4-byte loads and 16-byte stores assembled by nvJitLink without spills, the validate() errors, the
benchmark's spelling and the GPU."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import layoutc as lc
import ml_dtypes
import numpy as np
import pytest
from layoutc.hopper import bank_conflicts

from ptxgen.interp import interpret
from ptxgen.ir.layout_table import tv_index
from ptxgen.kernels.transpose import (
    TransposeConfig, bank_reports, build, layouts, pairs_arrangement, pairs_tv, sector_vector_residency, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
CONFIGS = [TransposeConfig(dtype, threads, 1, "sector_vector_pairs", rows)
           for dtype in ("bf16", "f16") for threads, rows in ((256, 64), (256, 128), (256, None), (128, 128))]


def test_pairs_tv_value_and_coordinates():
    """``pairs_tv(128, 64, 256, 16, 8)``: thread t = lane + 32·(r + 4·h), value (j, (i, b)) → row r + 8·(lane/16) +
    4·i + 16·b, column 32·h + 2·(lane%16) + j of the (128, 64) tile; one 64-column row per warp with 32 lanes."""
    tv = pairs_tv(128, 64, 256, 16, 8)
    assert str(tv) == "(((16,2),(4,2)),(2,(2,8))):(((256,8),(1,4096)),(128,(4,16)))"
    index = tv_index(tv)                                       # (threads, values), column-major over (128, 64)
    rows, cols = index % 128, index // 128
    t = np.arange(256)[:, None]
    lane, r, h = t % 32, (t // 32) % 4, t // 128
    v = np.arange(32)[None, :]
    j, i, b = v % 2, (v // 2) % 2, v // 4
    assert np.array_equal(rows, r + 8 * (lane // 16) + 4 * i + 16 * b)
    assert np.array_equal(cols, 32 * h + 2 * (lane % 16) + j)
    assert str(pairs_tv(64, 64, 256, 32, 8)) == "((32,(8,1)),(2,(1,8))):((128,(1,4096)),(64,(8,8)))"


@pytest.mark.parametrize("rows, cols, threads, lanes, spacing",
                         [(128, 64, 256, 16, 8), (64, 64, 256, 32, 8), (256, 64, 256, 16, 8), (128, 64, 128, 16, 8),
                          (64, 64, 128, 32, 4), (16, 64, 256, 16, 8), (16, 64, 256, 32, 8)])
def test_pairs_tv_is_a_bijection_with_pairs_along_one_row(rows, cols, threads, lanes, spacing):
    """Every element of the tile once; each thread's values in pairs of consecutive columns of one row; a warp's
    rows at one value share their parity (uniform 4-byte alignment for an odd pitch) and it covers
    4·lanes contiguous bytes per row."""
    tv = pairs_tv(rows, cols, threads, lanes, spacing)
    index = tv_index(tv)
    assert sorted(index.ravel().tolist()) == list(range(rows * cols))
    r, c = index % rows, index // rows
    assert np.array_equal(r[:, 0::2], r[:, 1::2]) and np.array_equal(c[:, 1::2], c[:, 0::2] + 1)
    assert np.all(c[:, 0::2] % 2 == 0)
    for w in range(threads // 32):
        warp_r, warp_c = r[32 * w:32 * w + 32, 0], c[32 * w:32 * w + 32, 0]
        assert len(set((warp_r % 2).tolist())) == 1
        for row in set(warp_r.tolist()):
            on_row = sorted(warp_c[warp_r == row].tolist())
            assert on_row == list(range(on_row[0], on_row[0] + 2 * lanes, 2))


def test_arrangement_and_layouts():
    """bf16/f16, 256 threads: one row per warp at BM = 64 (pitch 92), two rows 8 apart at BM = 128 and 256 (pitch
    152 / 280 ≡ 8 mod 16, where one row's columns c and c + 32 share a bank); the head rows take the same TV."""
    assert [pairs_arrangement(TransposeConfig("bf16", 256, 1, "sector_vector_pairs", r)) for r in (64, 128, None)] == [
        (32, 8), (16, 8), (16, 8)]
    assert pairs_arrangement(TransposeConfig("f16", 128, 1, "sector_vector_pairs", 64)) == (32, 4)
    ls = layouts(TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 128))
    assert {k: str(ls[k]) for k in ("load", "head", "smem", "store", "pitch", "pass_rows")} == {
        "load": "(((16,2),(4,2)),(2,(2,8))):(((256,8),(1,4096)),(128,(4,16)))",
        "head": "(((16,2),(4,2)),(2,(2,1))):(((32,8),(1,512)),(16,(4,16)))",
        "smem": "Sw<2,2,5> o 0 o (144,64):(1,152)", "store": "(((16,2),8),8):(((192,16),1),24)",
        "pitch": "152", "pass_rows": "[0, 8, 32, 40]"}


def test_one_row_per_warp_is_two_way_where_the_pitch_is_8_mod_16():
    """What the arrangement avoids: 32 lanes on one row at BM = 128 (pitch 152) put columns c and c + 32 in one bank
    (layoutc: 2-way on every warp); 16 lanes on each of two rows 8 apart fill 32 banks."""
    config = TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 128)
    ls = layouts(config)
    for (lanes, spacing), ways in (((32, 8), 2), ((16, 8), 1)):
        tv = pairs_tv(128, 64, 256, lanes, spacing)
        smem_tv = lc.ComposedLayout(lc.Swizzle(0, 0, 0), 16, lc.composition(lc.Layout((128, 64), (1, 144)), tv))
        assert {bank_conflicts(smem_tv, ls["smem"], "bf16", warp=w).ways for w in range(8)} == {ways}


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_bank_reports_are_conflict_free(config):
    """x rows, head rows and the transposed read (every warp, pass and shift): 1-way, no replay."""
    reports = bank_reports(config)
    assert len(reports["store"]) == 2 * config.threads // 32
    assert {(r.ways, r.replays) for rs in reports.values() for r in rs} == {(1, 0)}


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("m, n", [(37, 45), (129, 77), (300, 1001), (64, 130), (64, 128)])
def test_interpreter_matches_numpy(config, m, n):
    """M and N odd (or N ≡ 2 mod 8): x's and out's rows both unaligned; 64 x 128: both aligned."""
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[config.dtype])
    out = transpose(x, config=config)
    assert out.shape == (n, m) and np.array_equal(out, x.T)


def test_interpreter_strided():
    """A strided x and out (column slices of wider arrays, odd pitches): out's other columns untouched."""
    config = TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 128)
    wide_x = np.random.default_rng(5).standard_normal((45, 87)).astype(ml_dtypes.bfloat16)
    x = wide_x[:, 3:80]
    wide = np.full((77, 49), -7, ml_dtypes.bfloat16)
    interpret(build(config), {"x": x, "out": wide[:, :45]})
    assert np.array_equal(wide[:, :45], x.T) and np.all(wide[:, 45:] == -7)


@pytest.mark.parametrize("config, registers", [(TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 64), 32),
                                               (TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 128), 40),
                                               (TransposeConfig("f16", 256, 1, "sector_vector_pairs", 128), 40)],
                         ids=str)
def test_ptx_pairs_and_vectors_no_spill(config, registers):
    """x's and out's pitches unaligned: one ``ld.global.v2.b16`` per x pair of a thread (32 values at BM = 128,
    plus the head's 4), each with its two element loads on the unaligned path, one ``st.global.v4.b32`` per pass;
    nvJitLink assembles it under the CTA bound (8 at BM = 64, 6 at 128) in the expected registers, no spill."""
    verify(build(config))
    spec = Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    counts = Counter(re.findall(r"(?:ld|st)\.global\S*", compiled.ptx))
    bm, bn = config.tile
    pairs = (bm + config.sector) * bn // config.threads // 2
    assert counts["ld.global.v2.b16"] == pairs and counts["ld.global.b16"] == 2 * pairs
    assert counts["st.global.v4.b32"] == layouts(config)["passes"]
    assert f".minnctapersm {sector_vector_residency(config)}" in compiled.ptx
    assert compiled.spill_bytes == 0 and compiled.registers <= registers


def test_residency():
    """bf16, 256 threads: 8 CTAs per SM at BM = 64 (32 registers), 6 at 128 (40), 3 at 256 (80)."""
    assert [sector_vector_residency(TransposeConfig("bf16", 256, 1, "sector_vector_pairs", r))
            for r in (64, 128, None)] == [8, 6, 3]


def test_validate_errors():
    with pytest.raises(ValueError, match=r"^TransposeConfig.dtype = 'f32' with access = 'sector_vector_pairs' must be "
                                         r"bf16 or f16 \(two-element x loads of 4 bytes; f32's element loads already "
                                         r"move 128 bytes per warp instruction\)$"):
        TransposeConfig("f32", 128, 1, "sector_vector_pairs").validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.rows = 96 must be 64, 128 or 256 for bf16 "):
        TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 96).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 96 with access = 'sector_vector_pairs' must be a "
                                         r"multiple of the tile's 64 columns"):
        TransposeConfig("bf16", 96, 1, "sector_vector_pairs").validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.access must be .* not 'sector_vector_pair' \(did you mean "
                                         r"'sector_vector_pairs'\?\)$"):
        TransposeConfig("bf16", 256, 1, "sector_vector_pair").validate()


def test_the_default_is_unchanged():
    assert TransposeConfig.default("bf16", False, False) == TransposeConfig("bf16", 256, 1, "sector_vector_scalar",
                                                                            rows=128)


def test_benchmark_variant_names():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    assert bench_transpose.variant_config("bf16", "256/1/sectorvp128") == CONFIGS[1]
    assert bench_transpose.variant_config("f16", "128/1/sectorvp128") == CONFIGS[7]
    assert bench_transpose.variant_config("bf16", "256/1/sectorvp256") == CONFIGS[2]
    assert bench_transpose.variant_config("bf16", "256/1/sectorvp") == CONFIGS[2]
    with pytest.raises(ValueError):
        bench_transpose.variant_config("f32", "128/1/sectorvp")          # skipped by the benchmark for f32


def _gpu_torch():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch
    return torch


GPU_CASES = [("bf16", 8191, 12289), ("bf16", 16383, 16385), ("f16", 12289, 8191)]


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [64, 128])
@pytest.mark.parametrize("dtype, m, n", GPU_CASES)
def test_gpu_matches_torch(dtype, m, n, rows):
    torch = _gpu_torch()
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    out = transpose(x, config=TransposeConfig(dtype, 256, 1, "sector_vector_pairs", rows))
    torch.cuda.synchronize()
    want = x.double().t()
    assert torch.linalg.norm(out.double() - want) / torch.linalg.norm(want) == 0
    assert torch.equal(out, x.t().contiguous())


@pytest.mark.gpu
def test_gpu_strided_view():
    """x a column slice of a wider tensor starting at an odd column, out a slice of a wider one."""
    torch = _gpu_torch()
    wide_x = torch.randn((4097, 6011), device="cuda", dtype=torch.float32).to(torch.bfloat16)
    x = wide_x[:, 3:6004]
    wide = torch.full((6001, 4101), -7.0, device="cuda", dtype=torch.bfloat16)
    out = wide[:, :4097]
    transpose(x, out, config=TransposeConfig("bf16", 256, 1, "sector_vector_pairs", 128))
    torch.cuda.synchronize()
    want = x.double().t()
    assert torch.linalg.norm(out.double() - want) / torch.linalg.norm(want) == 0
    assert torch.equal(out, x.t()) and bool((wide[:, 4097:] == -7).all())
