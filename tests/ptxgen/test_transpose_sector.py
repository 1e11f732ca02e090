"""ptxgen.kernels.transpose with ``access="sector"`` (out rows whose pitch is not a multiple of 32 bytes): each CTA's
window of an out row starts on a 32-byte sector. The layouts, zero bank conflicts in layoutc's report for every pass and
every run-time shift, the interpreter against numpy on odd shapes (and a strided out), the sectors each CTA writes (run
one CTA at a time), the choice ``transpose`` makes, the PTX assembled by nvJitLink, and the GPU against torch."""
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
    TransposeConfig, bank_reports, build, layouts, out_rows_on_sectors, sector_layouts, sector_pass_tv, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify

from test_transpose import bank_report_configs

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
SECTOR = [TransposeConfig(dtype, threads, 1, "sector") for dtype in ("bf16", "f16", "f32")
          for threads in (64, 128, 256) if not (dtype != "f32" and threads < 64)]


def test_layouts():
    ls = sector_layouts(TransposeConfig("bf16", 256, 1, "sector"))
    assert {k: str(v) for k, v in ls.items()} == {
        "load": "((64,4),20):((80,1),4)", "smem": "(80,64):(66,1)", "smem_t": "(64,80):(1,66)",
        "store": "((64,4),4):((64,1),16)", "passes": "4"}
    ls = layouts(TransposeConfig("f32", 128, 1, "sector"))
    assert (str(ls["smem"]), str(ls["store"]), ls["passes"]) == ("(40,32):(33,1)", "((32,4),4):((32,1),8)", 2)
    for config in SECTOR:
        bm, bn = config.tile
        ls = sector_layouts(config)
        load = ls["load"]                              # a bijection onto the (BM + A, BN) window
        assert sorted(load(i) for i in range(lc.size(load))) == list(range((bm + config.sector) * bn))
        down = config.threads // bm                    # the passes, each `down` rows further, cover the tile once
        store = sector_pass_tv(bn, bm, config.threads, config.sector)
        covered = sorted(store(i) + k * down for k in range(ls["passes"]) for i in range(lc.size(store)))
        assert covered == list(range(bn * bm))
        for t in range(config.threads):                # a thread's values of a pass: one residue of its rows mod A
            assert len({store(t, q) % bn % config.sector for q in range(lc.size(store[1]))}) == 1


@pytest.mark.parametrize("config", bank_report_configs(SECTOR), ids=str)
def test_zero_bank_conflicts_at_every_shift(config):
    """layoutc's reports: the x window's element stores, and the out passes' element loads for every pass, every
    shift s in [0, A) and every warp (the origin a warp can meet at run time), all 1-way."""
    reports = bank_reports(config.validate())
    warps = config.threads // 32
    assert len(reports["store"]) == warps
    assert len(reports["load"]) == sector_layouts(config)["passes"] * config.sector * warps
    esize = 4 if config.dtype == "f32" else 2
    assert {(r.access_bytes, r.ways, r.replays) for rs in reports.values() for r in rs} == {(esize, 1, 0)}


def test_the_padding_is_what_makes_it_conflict_free():
    """The same transposed read over the unpadded tile (pitch BN: 128 bytes per row): a warp's 32 rows of one column
    fall in one bank, 32-way (so the report can fail)."""
    for dtype, ways in (("bf16", 32), ("f32", 32)):
        config = TransposeConfig.default(dtype, aligned=False, out_sectors=False)
        bm, bn = config.tile
        rows = bm + config.sector
        plain = lc.Layout((bn, rows), (1, bn))
        report = bank_conflicts(sector_layouts(config)["store"], plain, dtype)
        assert report.ways == ways


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("m, n", [(7, 13), (31, 33), (129, 257), (257, 1000), (1, 101), (33, 1), (70, 45), (64, 64)])
def test_interpreter_matches_numpy(dtype, m, n):
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[dtype])
    out = transpose(x, config=TransposeConfig.default(dtype, aligned=False, out_sectors=False))
    assert out.shape == (n, m) and np.array_equal(out, x.T)


@pytest.mark.parametrize("config", [TransposeConfig("bf16", 64, 1, "sector"), TransposeConfig("f32", 256, 1, "sector"),
                                    TransposeConfig("f16", 128, 1, "sector")], ids=str)
def test_other_thread_counts_and_a_strided_out(config):
    """Fewer or more passes (threads/BM rows per pass), and out a column slice of a wider array (pitch ≠ M: the shift
    is computed from M, so only the sectors' alignment is off, never the result); the rest of the array is untouched."""
    m, n = 45, 77
    x = np.random.default_rng(5).standard_normal((m, n)).astype(NUMPY[config.dtype])
    wide = np.full((n, m + 3), -7, NUMPY[config.dtype])
    interpret(build(config), {"x": x, "out": wide[:, :m]})
    assert np.array_equal(wide[:, :m], x.T) and np.all(wide[:, m:] == -7)


def written_windows(config, m: int, n: int) -> list:
    """Run each CTA alone on an out full of NaN: per CTA and out row, the columns it wrote (a list of (cta, row,
    columns))."""
    module = build(config)
    bm, bn = config.tile
    a = config.sector if config.access == "sector" else 0
    grid = (-(-n // bn), -(-(m + max(a - 1, 0)) // bm))
    x = np.random.default_rng(1).standard_normal((m, n)).astype(np.float32)
    windows = []
    for bx in range(grid[0]):
        for by in range(grid[1]):
            out = np.full((n, m), np.nan, np.float32)
            run_cta(module, {"x": x, "out": out}, block=(bx, by, 0))
            for c in range(n):
                cols = np.nonzero(~np.isnan(out[c]))[0]
                if len(cols):
                    assert np.array_equal(out[c, cols], x[cols, c])
                    windows.append(((bx, by), c, cols))
    return windows


def sector_boundaries_broken(windows, m: int, a: int) -> list:
    """The (row, column) where a CTA's window of an out row starts or ends inside a 32-byte sector (not at the row's
    ends), or is not contiguous."""
    broken = []
    for _cta, c, cols in windows:
        lo, hi = int(cols[0]), int(cols[-1]) + 1
        if hi - lo != len(cols):
            broken.append((c, "gap"))
        broken += [(c, e) for e in (lo, hi) if 0 < e < m and (c * m + e) % a]
    return broken


@pytest.mark.parametrize("m, n", [(45, 70), (100, 37)])
def test_every_cta_writes_whole_sectors(m, n):
    """f32 (A = 8): every CTA's window of every out row starts and ends on a sector of the row (or at its ends), and
    the windows cover out exactly once; the scalar path's windows (t·BM … (t+1)·BM − 1 in every row) do not."""
    windows = written_windows(TransposeConfig("f32", 128, 1, "sector"), m, n)
    assert sector_boundaries_broken(windows, m, 8) == []
    count = np.zeros((n, m), int)
    for _cta, c, cols in windows:
        count[c, cols] += 1
    assert np.all(count == 1)
    assert sector_boundaries_broken(written_windows(TransposeConfig("f32", 128, 1, "scalar"), m, n), m, 8)


def test_transpose_picks_sector_for_out_rows_off_sectors():
    bf16 = ml_dtypes.bfloat16
    assert out_rows_on_sectors(np.zeros((64, 3), bf16), None, 64)                   # out pitch 128 bytes
    assert not out_rows_on_sectors(np.zeros((63, 3), bf16), None, 63)               # 126
    assert not out_rows_on_sectors(np.zeros((20, 3), np.float32), None, 20)         # 80: 16-byte but not 32-byte
    assert TransposeConfig.default("f32", aligned=False, out_sectors=False) == TransposeConfig("f32", 256, 1, "sector")
    assert TransposeConfig.default("f32", aligned=False, out_sectors=True) == TransposeConfig("f32", 128, 1, "scalar")
    assert TransposeConfig.default("f32", aligned=True, out_sectors=False) == TransposeConfig("f32", 128, 2)
    x = np.arange(9 * 7, dtype=np.float32).reshape(9, 7)
    assert np.array_equal(transpose(x), x.T)


def test_bad_config():
    with pytest.raises(ValueError, match=r"^TransposeConfig.access must be 'vector', 'scalar', 'sector', "
                                         r"'sector_vector', 'sector_vector_scalar', 'sector_vector_aligned_x', "
                                         r"'sector_vector_async_x' or 'sector_vector_pair_x', not "
                                         r"'sectors' \(did you mean 'sector'\?\)$"):
        TransposeConfig("bf16", 256, 1, "sectors").validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 32 with access = 'sector' must be the tile's 64 "
                                         r"columns times a power of two"):
        TransposeConfig("bf16", 32, 1, "sector").validate()


@pytest.mark.parametrize("dtype, width", [("bf16", "b16"), ("f32", "b32")])
def test_ptx_of_unaligned_rows(dtype, width):
    """Unaligned tensors: one element access per value (the x window's BM + A rows, the out tile's BN·BM elements),
    assembled by nvJitLink with no spill and no more registers than the scalar path's kernel."""
    spec = Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1))
    config = TransposeConfig(dtype, 256, 1, "sector")
    verify(build(config))
    compiled = compile_kernel(build(config).kernels[0], spec)
    scalar = compile_kernel(build(TransposeConfig.default(dtype, aligned=False)).kernels[0], spec)
    bm, bn = config.tile
    loads, stores = (bm + config.sector) * bn // config.threads, bm * bn // config.threads
    assert Counter(re.findall(r"(?:ld|st)\.(?:global|shared)\S*", compiled.ptx)) == Counter({
        f"ld.global.{width}": loads, f"st.shared.{width}": loads, f"ld.shared.{width}": stores,
        f"st.global.{width}": stores})
    assert compiled.spill_bytes == 0 and compiled.registers <= scalar.registers


def test_benchmark_variant_names():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    assert bench_transpose.variant_config("bf16", "256/1/sector") == TransposeConfig("bf16", 256, 1, "sector")
    assert bench_transpose.variant_config("f32", "128/1/s") == TransposeConfig("f32", 128, 1, "scalar")
    assert bench_transpose.variant_config("f32", "128/2") == TransposeConfig("f32", 128, 2)
    with pytest.raises(SystemExit, match="'256/1/w' is not threads/pair, threads/pair/s, threads/pair/sector, "):
        bench_transpose.variant_config("bf16", "256/1/w")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("m, n", [(8191, 8192), (8191, 12289), (8192, 8191), (1000, 1001)])
@pytest.mark.parametrize("access", ["sector", "default"])
def test_gpu_matches_torch(dtype, m, n, access):
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    config = TransposeConfig.default(dtype, aligned=False, out_sectors=False) if access == "sector" else None
    out = transpose(x, config=config)
    torch.cuda.synchronize()
    assert torch.equal(out, x.t().contiguous())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_gpu_strided_views(dtype):
    """x a column slice of a wider tensor, out a column slice of another (pitch ≠ M): the same result."""
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    m, n = 1999, 3001
    x = torch.randn((m, n + 5), device="cuda", dtype=torch.float32).to(torch_dtype)[:, :n]
    wide = torch.full((n, m + 3), -7.0, device="cuda", dtype=torch_dtype)
    transpose(x, wide[:, :m], config=TransposeConfig.default(dtype, aligned=False, out_sectors=False))
    torch.cuda.synchronize()
    assert torch.equal(wide[:, :m], x.t()) and bool((wide[:, m:] == -7).all())
