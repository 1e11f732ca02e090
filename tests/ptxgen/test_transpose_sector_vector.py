"""ptxgen.kernels.transpose with ``access="sector_vector"`` / ``"sector_vector_scalar"``: ``access="sector"``'s
windows (each CTA's window of an out row starts on a 32-byte sector) stored as 16-byte vectors. The layouts, zero bank
conflicts in layoutc's report for every pass and run-time shift (and conflicts without the swizzle), the interpreter
against numpy on ragged shapes, the sectors each CTA writes, the PTX's vector accesses assembled by nvJitLink, and the
GPU against torch."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import bank_conflicts
from ptxgen.interp import interpret, run_cta
from ptxgen.kernels.transpose import (
    TransposeConfig, bank_reports, build, layouts, out_rows_on_sectors, row_vector_tv, rows_aligned,
    sector_vector_layouts, sector_vector_tv, transpose,
)
from ptxgen.ir.layout_table import tv_index
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
ACCESSES = ("sector_vector", "sector_vector_scalar")
CONFIGS = [TransposeConfig(dtype, threads, 1, access) for access in ACCESSES for dtype in ("bf16", "f32")
           for threads in (64, 128, 256) if not (dtype != "f32" and threads < 64)]


def test_layouts():
    ls = sector_vector_layouts(TransposeConfig("bf16", 256, 1, "sector_vector"))
    assert {k: str(v) for k, v in ls.items() if k in ("load", "head", "smem", "smem_t", "store", "passes")} == {
        "load": "((4,8,2,4),(8,8)):((2048,8,8192,64),(1,256))", "head": "((64,4),4):((16,1),4)",
        "smem": "Sw<2,2,5> o 0 o (272,64):(1,280)", "smem_t": "Sw<2,2,5> o 0 o (64,272):(280,1)",
        "store": "((32,8),8):((64,1),8)", "passes": "8"}
    ls = layouts(TransposeConfig("f32", 128, 1, "sector_vector_scalar"))
    assert (str(ls["load"]), str(ls["smem"]), ls["pitch"]) == ("((32,4),32):((128,1),4)",
                                                               "Sw<2,2,5> o 0 o (136,32):(1,140)", 140)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_layouts_cover_their_tiles(config):
    """``load`` and ``head`` are bijections onto the x rows and the A rows above; the passes of ``store`` cover the
    (BN, BM) out tile once, each thread's values one 16-byte vector of one out row."""
    ls = layouts(config)
    bm, bn = config.tile
    a, v = config.sector, config.vector
    assert sorted(tv_index(ls["load"]).ravel().tolist()) == list(range(bm * bn))
    assert sorted(tv_index(ls["head"]).ravel().tolist()) == list(range(a * bn))
    warps = config.threads // 32
    store = tv_index(ls["store"])                     # (threads, V) indices of the (warps, BM) pass tile
    rows, cols = store % warps, store // warps
    assert np.all(rows == rows[:, :1]) and np.all(cols == cols[:, :1] + np.arange(v)) and np.all(cols[:, 0] % v == 0)
    assert sorted(store.ravel().tolist()) == list(range(warps * bm)) and ls["passes"] * warps == bn


def test_sector_vector_tv_warp_rows():
    """One instruction of a warp (a value index) reads V rows V apart, 16·32/V contiguous bytes of each."""
    for dtype, v in (("bf16", 8), ("f32", 4)):
        tv = sector_vector_tv(32 * v, 8 * v, v, 256)
        idx = tv_index(tv)[:32, 0]
        rows, cols = idx % (32 * v), idx // (32 * v)
        assert sorted(set(rows.tolist())) == [v * k for k in range(v)]
        for r in set(rows.tolist()):
            assert sorted(cols[rows == r].tolist()) == [v * k for k in range(32 // v)]
    assert str(row_vector_tv(4, 128, 4)) == "((32,4),4):((16,1),4)"


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_bank_reports_are_conflict_free(config):
    """Every warp, the x rows' and head rows' stores, and the transposed read at every pass and shift s in [0, A)."""
    reports = bank_reports(config)
    warps = config.threads // 32
    esize = 4 if config.dtype == "f32" else 2
    assert len(reports["store"]) == 2 * warps
    assert len(reports["load"]) == layouts(config)["passes"] * config.sector * warps
    assert {(r.ways, r.replays) for rs in reports.values() for r in rs} == {(1, 0)}
    assert {r.access_bytes for r in reports["load"]} == {esize}


def test_the_swizzle_is_what_makes_it_conflict_free():
    """The same transposed read over the unswizzled column-major window: lanes V rows apart fall in a few banks."""
    for dtype, ways in (("bf16", 4), ("f32", 4)):
        config = TransposeConfig(dtype, 256, 1, "sector_vector")
        ls = layouts(config)
        plain = lc.Layout(lc.shape(ls["smem_t"].inner), lc.stride(ls["smem_t"].inner))
        report = bank_conflicts(ls["store_smem"], plain, dtype, 4 if dtype == "f32" else 2)
        assert report.ways == ways


@pytest.mark.parametrize("access", ACCESSES)
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("m, n", [(7, 13), (31, 33), (45, 37), (300, 70), (17, 130), (1, 101), (33, 1), (257, 65)])
def test_interpreter_matches_numpy(dtype, access, m, n):
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[dtype])
    out = transpose(x, config=TransposeConfig(dtype, 128 if dtype == "f32" else 256, 1, access))
    assert out.shape == (n, m) and np.array_equal(out, x.T)


@pytest.mark.parametrize("config", [TransposeConfig("bf16", 64, 1, "sector_vector"),
                                    TransposeConfig("f32", 256, 1, "sector_vector_scalar")], ids=str)
def test_other_thread_counts_and_a_strided_out(config):
    """More passes (64 threads) or fewer, and out a column slice of a wider array (pitch ≠ M: the shifts are computed
    from M, so the vectors' alignment is off and the run-time check takes the element path, never a wrong result)."""
    m, n = 45, 77
    x = np.random.default_rng(5).standard_normal((m, n)).astype(NUMPY[config.dtype])
    wide = np.full((n, m + 3), -7, NUMPY[config.dtype])
    interpret(build(config), {"x": x, "out": wide[:, :m]})
    assert np.array_equal(wide[:, :m], x.T) and np.all(wide[:, m:] == -7)


@pytest.mark.parametrize("m, n", [(45, 70), (300, 37)])
def test_every_cta_writes_whole_sectors(m, n):
    """f32 (A = 8): run each CTA alone: its window of every out row starts and ends on a sector of the row (or at its
    ends) and is contiguous, and the windows cover out exactly once."""
    config = TransposeConfig("f32", 128, 1, "sector_vector")
    module = build(config)
    bm, bn = config.tile
    a = config.sector
    x = np.random.default_rng(1).standard_normal((m, n)).astype(np.float32)
    count = np.zeros((n, m), int)
    broken = []
    for bx in range(-(-n // bn)):
        for by in range(-(-(m + a - 1) // bm)):
            out = np.full((n, m), np.nan, np.float32)
            run_cta(module, {"x": x, "out": out}, block=(bx, by, 0))
            for c in range(n):
                cols = np.nonzero(~np.isnan(out[c]))[0]
                if not len(cols):
                    continue
                assert np.array_equal(out[c, cols], x[cols, c])
                count[c, cols] += 1
                lo, hi = int(cols[0]), int(cols[-1]) + 1
                broken += [(c, "gap")] if hi - lo != len(cols) else []
                broken += [(c, e) for e in (lo, hi) if 0 < e < m and (c * m + e) % a]
    assert broken == [] and np.all(count == 1)


def global_accesses(config, x_aligned: bool):
    spec = Specialization.of(x=TensorSpec(1, x_aligned, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    return Counter(re.findall(r"(?:ld|st)\.(?:global|shared)\S*", compiled.ptx)), compiled


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_ptx_vectors(dtype):
    """out's rows unaligned (pitch M·esize, M odd): one ``st.global.v4.b32`` per pass (its element path for the rows'
    ends beside it); x's rows 16-byte aligned: ``ld.global.v4.b32`` for the x rows of the window (``sector_vector``),
    none when they are not or with ``sector_vector_scalar``. nvJitLink assembles each with no spill."""
    esize = 4 if dtype == "f32" else 2
    threads = 256 if dtype == "bf16" else 128
    config = TransposeConfig(dtype, threads, 1, "sector_vector")
    verify(build(config))
    bm, bn = config.tile
    passes = layouts(config)["passes"]
    x_vectors = bm * bn // config.vector // threads
    counts, compiled = global_accesses(config, True)
    assert counts["st.global.v4.b32"] == passes and counts["ld.global.v4.b32"] == x_vectors
    assert compiled.spill_bytes == 0
    counts, _ = global_accesses(config, False)
    assert counts["st.global.v4.b32"] == passes and counts["ld.global.v4.b32"] == 0
    scalar_x = TransposeConfig(dtype, threads, 1, "sector_vector_scalar")
    counts, compiled = global_accesses(scalar_x, True)
    assert counts["st.global.v4.b32"] == passes and counts["ld.global.v4.b32"] == 0
    assert counts[f"ld.shared.b{8 * esize}"] == passes * config.vector   # one element load per out value
    assert compiled.spill_bytes == 0


def test_benchmark_variant_names():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    assert bench_transpose.variant_config("bf16", "256/1/sectorv") == TransposeConfig("bf16", 256, 1, "sector_vector")
    assert (bench_transpose.variant_config("f32", "128/1/sectorvs")
            == TransposeConfig("f32", 128, 1, "sector_vector_scalar"))
    assert bench_transpose.LABEL_SUFFIXES["sector_vector"] == "/sectorv"


def test_bad_config():
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 96 with access = 'sector_vector' must be a "
                                         r"multiple of the tile's 64 columns with a power-of-two number of warps, at "
                                         r"most 256 \(8 warps\), with pair = 1 \(not 1\)$"):
        TransposeConfig("bf16", 96, 1, "sector_vector").validate()
    with pytest.raises(ValueError, match=r"with pair = 1 \(not 2\)$"):
        TransposeConfig("f32", 128, 2, "sector_vector_scalar").validate()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("m, n", [(8191, 8192), (8191, 12289), (8192, 8191), (1000, 1001)])
@pytest.mark.parametrize("access", ACCESSES)
def test_gpu_matches_torch(dtype, m, n, access):
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    out = transpose(x, config=TransposeConfig(dtype, 256 if dtype == "bf16" else 128, 1, access))
    torch.cuda.synchronize()
    assert torch.equal(out, x.t().contiguous())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("access", ACCESSES)
def test_gpu_strided_views(dtype, access):
    """x a column slice of a wider tensor, out a column slice of another (pitch ≠ M: the run-time alignment check
    sends the misaligned vectors down the element path): the same result, the rest of out untouched."""
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    m, n = 1999, 3001
    x = torch.randn((m, n + 5), device="cuda", dtype=torch.float32).to(torch_dtype)[:, :n]
    wide = torch.full((n, m + 3), -7.0, device="cuda", dtype=torch_dtype)
    transpose(x, wide[:, :m], config=TransposeConfig(dtype, 256 if dtype == "bf16" else 128, 1, access))
    torch.cuda.synchronize()
    assert torch.equal(wide[:, :m], x.t()) and bool((wide[:, m:] == -7).all())


def test_the_default_takes_sector_vector_where_x_rows_are_aligned():
    """Out rows off their sectors: 16-bit types whose x rows are 16-byte aligned take ``sector_vector`` (8 warps),
    those whose x rows are not ``sector_vector_pair_x`` with 64-row tiles; f32 ``sector`` with 8 warps; out rows on
    sectors keep ``scalar``."""
    assert TransposeConfig.default("bf16", False, False, True) == TransposeConfig("bf16", 256, 1, "sector_vector")
    assert TransposeConfig.default("f16", False, False, True).access == "sector_vector"
    assert TransposeConfig.default("bf16", False, False, False) == TransposeConfig("bf16", 256, 1, "sector_vector_pair_x",
                                                                                  rows=64)
    assert TransposeConfig.default("f16", False, False, False).rows == 64
    assert TransposeConfig.default("f32", False, False, True) == TransposeConfig("f32", 256, 1, "sector")
    assert TransposeConfig.default("bf16", False, True, True).access == "scalar"
    x = np.zeros((8191, 8192), ml_dtypes.bfloat16)           # x rows 16384 bytes, out rows 16382
    assert rows_aligned(x, None, 0, 8192) and not out_rows_on_sectors(x, None, 8191)
