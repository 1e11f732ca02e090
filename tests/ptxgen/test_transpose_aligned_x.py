"""ptxgen.kernels.transpose with ``access="sector_vector_aligned_x"``: ``sector_vector``'s out side (sector windows,
16-byte out stores) with x's rows read as 16-byte vectors even where they are not 16-byte aligned — each row's window
starts on the 16-byte boundary before column n0 and is stored back shifted by the row's offset. The layouts (one
residue of x's rows mod V per warp), zero bank conflicts for every shift, the interpreter against numpy on ragged
shapes whose x and out rows are both unaligned, a strided x, the PTX's vectors with both pitches unaligned assembled by
nvJitLink (registers near sector_vector's), and the GPU against torch."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.layout_table import tv_index
from ptxgen.kernels.transpose import (
    TransposeConfig, bank_reports, build, layouts, residue_lanes_per_row, residue_vector_tv, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify
from layoutc.hopper import bank_conflicts
import layoutc as lc

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
ACCESS = "sector_vector_aligned_x"


def config_of(dtype: str) -> TransposeConfig:
    return TransposeConfig(dtype, 128 if dtype == "f32" else 256, 1, ACCESS)


CONFIGS = [config_of(d) for d in ("bf16", "f16", "f32")]


def test_layouts():
    ls = layouts(config_of("bf16"))
    assert {k: str(ls[k]) for k in ("load", "tail", "smem", "smem_t", "store", "passes", "origin")} == {
        "load": "(((4,8),8),(8,(4,2))):(((2048,8),1),(256,(64,8192)))", "tail": "((32,8),8):((8,1),256)",
        "smem": "Sw<2,2,5> o 0 o (272,79):(1,280)", "smem_t": "Sw<2,2,5> o 0 o (79,272):(280,1)",
        "store": "((32,8),8):((64,1),8)", "passes": "8", "origin": "7"}
    ls = layouts(config_of("f32"))
    assert (str(ls["load"]), str(ls["smem"]), ls["origin"]) == (
        "(((8,4),4),(4,(8,1))):(((512,4),1),(128,(16,4096)))", "Sw<2,2,5> o 0 o (136,39):(1,140)", 3)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_each_warp_reads_one_residue_of_x_rows(config):
    """``load`` and ``tail`` are bijections onto the (BM, BN) and (BM, V) tiles; every value of warp q lies in a row
    ≡ q (mod V) (one shift per warp); a thread's values come in whole 16-byte vectors of one row."""
    ls = layouts(config)
    bm, bn = config.tile
    v = config.vector
    for tv, cols in ((ls["load"], bn), (ls["tail"], v)):
        index = tv_index(tv)                               # (threads, values), column-major over (BM, cols)
        assert sorted(index.ravel().tolist()) == list(range(bm * cols))
        rows, columns = index % bm, index // bm
        warps = np.arange(config.threads)[:, None] // 32
        assert np.all(rows % v == warps)
        vectors = columns.reshape(config.threads, -1, v)
        assert np.all(vectors == vectors[:, :, :1] + np.arange(v)) and np.all(vectors[:, :, 0] % v == 0)
        assert np.all(rows.reshape(config.threads, -1, v) == rows.reshape(config.threads, -1, v)[:, :, :1])


def test_a_warp_instruction_reads_contiguous_row_segments():
    """One value index of a warp: 32/lanes rows V apart, 16·lanes contiguous bytes of each (lanes = 4 for bf16, 8 for
    f32: 64 and 128 bytes)."""
    for dtype, lanes in (("bf16", 4), ("f32", 8)):
        config = config_of(dtype)
        bm, bn = config.tile
        v = config.vector
        assert residue_lanes_per_row(v, layouts(config)["pitch"] * 16 // v) == lanes
        idx = tv_index(layouts(config)["load"])[:32, 0]
        rows, cols = idx % bm, idx // bm
        assert sorted(set(rows.tolist())) == [v * k for k in range(32 // lanes)]
        for r in set(rows.tolist()):
            assert sorted(cols[rows == r].tolist()) == [v * k for k in range(lanes)]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_bank_reports_are_conflict_free_for_every_shift(config):
    """The x rows' stores at every shift s in [0, V) (main and tail), the head rows' stores, and the transposed read
    at every pass and out shift in [0, A): all 1-way."""
    reports = bank_reports(config)
    warps = config.threads // 32
    esize = 4 if config.dtype == "f32" else 2
    assert len(reports["store"]) == 2 * config.vector * warps + warps
    assert len(reports["load"]) == layouts(config)["passes"] * config.sector * warps
    assert {(r.ways, r.replays) for rs in reports.values() for r in rs} == {(1, 0)}
    assert {r.access_bytes for rs in reports.values() for r in rs} == {esize}


def test_the_lane_split_is_what_makes_the_x_stores_conflict_free():
    """bf16 with 8 lanes along a row (the f32 split) puts two lanes' chunks 4 apart on one bank: 2-way at some shift."""
    config = config_of("bf16")
    ls = layouts(config)
    bm, bn = config.tile
    v, rows, pitch = config.vector, bm + config.sector, ls["pitch"]
    wide = lc.composition(lc.Layout((bm, bn), (1, rows)), residue_vector_tv(bm, bn, v, 8))
    ways = {bank_conflicts(wide, ls["smem"], "bf16", warp=w, base=2 * (config.sector + (v - 1 - s) * pitch)).ways
            for s in range(v) for w in range(8)}
    assert max(ways) == 2


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("m, n", [(37, 45), (129, 77), (300, 1001), (45, 37), (1, 13), (17, 1), (257, 131)])
def test_interpreter_matches_numpy(dtype, m, n):
    """Both x's rows (N odd) and out's rows (M odd) unaligned: every row's window starts at a different offset."""
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[dtype])
    out = transpose(x, config=config_of(dtype))
    assert out.shape == (n, m) and np.array_equal(out, x.T)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_strided_x_and_out(dtype):
    """x a column slice of a wider array starting at column 3 (pitch ≠ N: the shifts computed from N are off, so the
    run-time check sends the vectors down the element path) and out a column slice of another: the same result, the
    rest of out untouched."""
    m, n = 45, 77
    wide_x = np.random.default_rng(7).standard_normal((m, n + 9)).astype(NUMPY[dtype])
    x = wide_x[:, 3:3 + n]
    wide = np.full((n, m + 3), -7, NUMPY[dtype])
    interpret(build(config_of(dtype)), {"x": x, "out": wide[:, :m]})
    assert np.array_equal(wide[:, :m], x.T) and np.all(wide[:, m:] == -7)


def global_accesses(config, x_aligned: bool = False):
    spec = Specialization.of(x=TensorSpec(1, x_aligned, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    return Counter(re.findall(r"(?:ld|st)\.(?:global|shared)\S*", compiled.ptx)), compiled


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_ptx_vectors_with_both_pitches_unaligned(dtype):
    """x's and out's rows unaligned: ``ld.global.v4.b32`` for each of a thread's BN·BM/(threads·V) x vectors and its
    tail vector (sector_vector has none there), ``st.global.v4.b32`` once per pass; nvJitLink assembles it with no
    spill in at most 80 registers (sector_vector: 78 unbounded; this kernel unbounded: 118 for bf16)."""
    config = config_of(dtype)
    verify(build(config))
    bm, bn = config.tile
    passes = layouts(config)["passes"]
    counts, compiled = global_accesses(config)
    assert counts["ld.global.v4.b32"] == bm * bn // config.vector // config.threads + 1
    assert counts["st.global.v4.b32"] == passes
    assert compiled.spill_bytes == 0 and compiled.registers <= 80
    assert ".minnctapersm 3" in compiled.ptx if dtype == "bf16" else ".minnctapersm 6" in compiled.ptx
    old, _ = global_accesses(TransposeConfig(dtype, config.threads, 1, "sector_vector"))
    assert old["ld.global.v4.b32"] == 0 and old["st.global.v4.b32"] == passes


def test_bad_config():
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 128 with access = 'sector_vector_aligned_x' "
                                         r"must be 32 x the 8 bf16 elements of a 16-byte vector \(256: one warp per "
                                         r"residue of x's rows mod 8\), with pair = 1 \(not 1\)$"):
        TransposeConfig("bf16", 128, 1, ACCESS).validate()
    with pytest.raises(ValueError, match=r"\(128: one warp per residue of x's rows mod 4\), with pair = 1 \(not 2\)$"):
        TransposeConfig("f32", 128, 2, ACCESS).validate()
    with pytest.raises(ValueError, match=r"did you mean 'sector_vector_aligned_x'"):
        TransposeConfig("bf16", 256, 1, "sector_vector_aligned").validate()


def test_the_default_choice_is_unchanged():
    """transpose() never picks it by itself (the lead times it against sector first)."""
    for dtype in ("bf16", "f16", "f32"):
        for flags in ((True, True, True), (False, True, False), (False, False, False), (False, False, True)):
            assert TransposeConfig.default(dtype, *flags).access != ACCESS


def test_benchmark_variant_name():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    assert bench_transpose.variant_config("bf16", "256/1/sectorva") == config_of("bf16")
    assert bench_transpose.variant_config("f32", "128/1/sectorva") == config_of("f32")
    with pytest.raises(ValueError):
        bench_transpose.variant_config("f32", "256/1/sectorva")      # skipped by the benchmark for f32
    assert bench_transpose.LABEL_SUFFIXES[ACCESS] == "/sectorva"


def _gpu_torch():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, m, n", [("bf16", 8191, 12289), ("bf16", 16383, 16385), ("bf16", 1000, 1001),
                                         ("f16", 8191, 12289), ("f32", 8191, 12289), ("bf16", 8191, 8192)])
def test_gpu_matches_torch(dtype, m, n):
    torch = _gpu_torch()
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    out = transpose(x, config=config_of(dtype))
    torch.cuda.synchronize()
    assert torch.equal(out, x.t().contiguous())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_gpu_strided_views(dtype):
    """x a column slice (from column 3) of a wider tensor, out a column slice of another: the run-time alignment check
    sends the misaligned vectors down the element path; the same result, the rest of out untouched."""
    torch = _gpu_torch()
    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    m, n = 1999, 3001
    x = torch.randn((m, n + 8), device="cuda", dtype=torch.float32).to(torch_dtype)[:, 3:3 + n]
    wide = torch.full((n, m + 3), -7.0, device="cuda", dtype=torch_dtype)
    transpose(x, wide[:, :m], config=config_of(dtype))
    torch.cuda.synchronize()
    assert torch.equal(wide[:, :m], x.t()) and bool((wide[:, m:] == -7).all())
