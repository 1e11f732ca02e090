"""ptxgen.kernels.transpose with ``TransposeConfig.rows``: the sector_vector accesses (``sector_vector``,
``sector_vector_scalar``, ``sector_vector_aligned_x``) on tiles of 8·V and 16·V rows (64 / 128 bf16, 32 / 64 f32)
besides today's 32·V. A warp then writes 32·V/BM out rows A apart (one sector shift per warp) with 16-byte vectors;
the layouts, the passes covering the out tile once, the transposed smem read conflict-free for every shift, the
interpreter against numpy on ragged shapes whose x and out rows are both unaligned, the PTX's vectors assembled by
nvJitLink without spills under the chosen CTA bounds, the validate() error, the benchmark's spelling and the GPU."""
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
    SECTOR_VECTOR, TransposeConfig, bank_reports, build, layouts, out_rows, sector_vector_residency, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
VECTOR = {"f32": 4, "bf16": 8, "f16": 8}


def config_of(dtype: str, access: str, vectors: int, threads: int | None = None) -> TransposeConfig:
    """The config of ``access`` on a tile of ``vectors`` 16-byte vectors per row (8 or 16: the new tiles)."""
    v = VECTOR[dtype]
    if threads is None:
        threads = 32 * v if access in ("sector_vector_aligned_x", "sector_vector_async_x") or dtype != "f32" else 128
    return TransposeConfig(dtype, threads, 1, access, vectors * v)


# sector_vector_pair_x (16-bit types, 8 warps) has its own tests: test_transpose_pairs.py
WINDOWED = tuple(a for a in SECTOR_VECTOR if a != "sector_vector_pair_x")
NEW = [config_of(d, a, k) for d in ("bf16", "f32") for a in WINDOWED for k in (8, 16)]
# sector_vector_async_x's row-major tile trades the conflict-free transposed read for cp.async (test_transpose_async)
CONFLICT_FREE_READS = [c for c in NEW if c.access != "sector_vector_async_x"]


def test_layouts_bf16_sector_vector_aligned_x_64_rows():
    """bf16, 256 threads, BM = 64: lane l of warp w stores vector l % 8 of out rows w + 16·(l/8) (a 56-row pass
    tile, two passes from out rows 0 and 8), the column pitch 92 (≡ 4 mod 8: the warp's 4 rows, 16 columns apart,
    fall in different swizzle groups), each row's 16-byte tail in 4 pieces of 2 elements."""
    ls = layouts(config_of("bf16", "sector_vector_aligned_x", 8))
    assert {k: str(ls[k]) for k in ("load", "tail", "head", "smem", "store", "store_smem", "passes", "pass_rows",
                                     "pitch", "origin")} == {
        "load": "(((8,4),8),(8,(2,1))):(((512,8),1),(64,(32,4096)))", "tail": "(((4,8),8),2):(((128,8),1),64)",
        "head": "((64,4),4):((16,1),4)", "smem": "Sw<2,2,5> o 0 o (80,79):(1,92)",
        "store": "(((8,4),8),8):(((448,16),1),56)", "store_smem": "(((8,4),8),8):(((632,16),1),79)",
        "passes": "2", "pass_rows": "[0, 8]", "pitch": "92", "origin": "7"}
    ls = layouts(config_of("f32", "sector_vector_aligned_x", 8))
    assert (str(ls["store"]), str(ls["tail"]), str(ls["smem"]), ls["pass_rows"]) == (
        "(((8,4),4),4):(((112,8),1),28)", "(((4,8),4),1):(((32,4),1),0)", "Sw<2,2,5> o 0 o (40,39):(1,44)", [0, 4])


def test_default_tile_is_unchanged():
    """rows = None is 32·V, and its layouts are the same as rows = 32·V spelled out."""
    for dtype in ("bf16", "f32"):
        for access in WINDOWED:
            default = config_of(dtype, access, 8)
            default = TransposeConfig(dtype, default.threads, 1, access)
            assert default.tile == (32 * VECTOR[dtype], 8 * VECTOR[dtype])
            spelled = TransposeConfig(dtype, default.threads, 1, access, 32 * VECTOR[dtype])
            assert {k: str(v) for k, v in layouts(default).items()} == {k: str(v) for k, v in layouts(spelled).items()}
    ls = layouts(TransposeConfig("bf16", 256, 1, "sector_vector"))
    assert (str(ls["store"]), str(ls["smem"]), ls["pass_rows"]) == (
        "((32,8),8):((64,1),8)", "Sw<2,2,5> o 0 o (272,64):(1,280)", list(range(0, 64, 8)))


@pytest.mark.parametrize("config", NEW, ids=str)
def test_passes_cover_the_out_tile_once_one_shift_per_warp(config):
    """The passes' stores (pass k's tile starts at out row pass_rows[k]) cover the (BN, BM) out tile exactly once;
    a warp's values of a pass lie in out rows ≡ mod A (one shift), R·16 contiguous bytes per row; the x side's
    ``load`` (and ``tail``) and ``head`` are bijections onto their tiles."""
    ls = layouts(config)
    bm, bn = config.tile
    a, v = config.sector, config.vector
    warps = config.threads // 32
    tile_rows = out_rows(warps, bm, v, a)
    seen = []
    for first in ls["pass_rows"]:
        index = tv_index(ls["store"])                 # (threads, values), column-major over (tile_rows, BM)
        r, c = index % tile_rows, index // tile_rows
        seen += ((first + r) * bm + c).ravel().tolist()
        warp_rows = (first + r).reshape(warps, -1)
        assert np.all(warp_rows % a == warp_rows[:, :1] % a)
        assert len(set(r.ravel().tolist())) == 32 * v // bm * warps
        assert np.all(c == c[:, :1] + np.arange(v)) and np.all(c[:, 0] % v == 0)   # whole 16-byte vectors
    assert sorted(seen) == list(range(bn * bm)) and len(ls["pass_rows"]) == ls["passes"]
    for name, shape in (("load", (bm, bn)), ("head", (a, bn)), ("tail", (bm, v))):
        if name in ls:
            assert sorted(tv_index(ls[name]).ravel().tolist()) == list(range(shape[0] * shape[1]))


# the largest bank conflict (ways) of the smem stores (x rows, head, tail) per config; the transposed read is 1-way
# for every new tile. The column pitch serves the read: x-side stores of some small tiles stay 2-way (4-way for f32
# sector_vector with 256 threads), see sector_vector_layouts
STORE_WAYS = {
    ("bf16", "sector_vector", 64): 2, ("bf16", "sector_vector", 128): 2,
    ("bf16", "sector_vector_scalar", 64): 2, ("bf16", "sector_vector_scalar", 128): 1,
    ("bf16", "sector_vector_aligned_x", 64): 2, ("bf16", "sector_vector_aligned_x", 128): 2,
    ("f32", "sector_vector", 32): 2, ("f32", "sector_vector", 64): 2,
    ("f32", "sector_vector_scalar", 32): 1, ("f32", "sector_vector_scalar", 64): 2,
    ("f32", "sector_vector_aligned_x", 32): 2, ("f32", "sector_vector_aligned_x", 64): 2,
}


@pytest.mark.parametrize("config", CONFLICT_FREE_READS, ids=str)
def test_transposed_read_is_conflict_free_for_every_shift(config):
    """The out side's smem read — every warp, pass and shift s in [0, A) — is 1-way at the element width; the
    stores' worst case is the recorded one."""
    reports = bank_reports(config)
    warps = config.threads // 32
    assert len(reports["load"]) == layouts(config)["passes"] * config.sector * warps
    assert {(r.ways, r.replays) for r in reports["load"]} == {(1, 0)}
    assert max(r.ways for r in reports["store"]) == STORE_WAYS[(config.dtype, config.access, config.tile[0])]


def test_default_tiles_stay_conflict_free():
    for config in (TransposeConfig("bf16", 256, 1, "sector_vector"), TransposeConfig("f32", 128, 1, "sector_vector"),
                   TransposeConfig("bf16", 256, 1, "sector_vector_aligned_x")):
        assert {r.ways for rs in bank_reports(config).values() for r in rs} == {1}


@pytest.mark.parametrize("config", NEW, ids=str)
@pytest.mark.parametrize("m, n", [(37, 45), (129, 77), (300, 1001), (64, 128)])
def test_interpreter_matches_numpy(config, m, n):
    """N odd and M odd: x's and out's rows both unaligned (every row's window starts elsewhere); 64 x 128 aligned."""
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[config.dtype])
    out = transpose(x, config=config)
    assert out.shape == (n, m) and np.array_equal(out, x.T)


@pytest.mark.parametrize("access", WINDOWED)
def test_interpreter_128_threads_and_strided(access):
    """128 threads (sector_vector, sector_vector_scalar) and a strided x and out (column slices)."""
    threads = 256 if access in ("sector_vector_aligned_x", "sector_vector_async_x") else 128
    config = config_of("bf16", access, 8, threads)
    wide_x = np.random.default_rng(5).standard_normal((45, 86)).astype(ml_dtypes.bfloat16)
    x = wide_x[:, 3:80]
    wide = np.full((77, 48), -7, ml_dtypes.bfloat16)
    interpret(build(config), {"x": x, "out": wide[:, :45]})
    assert np.array_equal(wide[:, :45], x.T) and np.all(wide[:, 45:] == -7)


def global_accesses(config):
    spec = Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    return Counter(re.findall(r"(?:ld|st)\.global\S*", compiled.ptx)), compiled


@pytest.mark.parametrize("config", [c for c in NEW if c.access != "sector_vector_scalar"], ids=str)
def test_ptx_vectors_with_both_pitches_unaligned_and_no_spill(config):
    """x's and out's rows unaligned: one ``st.global.v4.b32`` per pass; for sector_vector_aligned_x one
    ``ld.global.v4.b32`` per x vector of a thread and the tail piece (4 or 8 bytes: ``b32``/``v2.b32``, bf16 pairs packed);
    nvJitLink assembles it with no spill under the chosen CTA bound."""
    verify(build(config))
    bm, bn = config.tile
    counts, compiled = global_accesses(config)
    assert counts["st.global.v4.b32"] == layouts(config)["passes"]
    if config.access == "sector_vector_aligned_x":
        assert counts["ld.global.v4.b32"] == bm * bn // config.vector // config.threads
        piece = {("bf16", 64): "ld.global.b32", ("bf16", 128): "ld.global.v2.b32", ("f32", 32): "ld.global.b32",
                 ("f32", 64): "ld.global.v2.b32"}[(config.dtype, bm)]
        assert counts[piece] >= 1
    assert compiled.spill_bytes == 0
    assert f".minnctapersm {sector_vector_residency(config)}" in compiled.ptx


def test_residency_of_the_small_tiles():
    """More CTAs per SM than the 32·V tile (3 for bf16 sector_vector_aligned_x): 8 at BM = 64, 5 at 128."""
    assert [sector_vector_residency(config_of("bf16", "sector_vector_aligned_x", k)) for k in (8, 16)] == [8, 5]
    assert sector_vector_residency(TransposeConfig("bf16", 256, 1, "sector_vector_aligned_x")) == 3
    assert sector_vector_residency(TransposeConfig("bf16", 256, 1, "sector_vector")) is None
    assert [sector_vector_residency(config_of("bf16", "sector_vector_scalar", k)) for k in (8, 16)] == [8, 6]


def test_bad_rows():
    with pytest.raises(ValueError, match=r"^TransposeConfig.rows = 100 must be 64, 128 or 256 for bf16 \(8, 16 or 32 "
                                         r"16-byte vectors: the tile's rows, one out row's window\)$"):
        TransposeConfig("bf16", 256, 1, "sector_vector", 100).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.rows = 16 must be 32, 64 or 128 for f32 "):
        TransposeConfig("f32", 128, 1, "sector_vector_aligned_x", 16).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.rows = 64 applies to access = 'sector_vector', "
                                         r"'sector_vector_scalar', 'sector_vector_aligned_x', 'sector_vector_async_x' "
                                         r"or 'sector_vector_pair_x' only, not 'sector'$"):
        TransposeConfig("bf16", 256, 1, "sector", 64).validate()


def test_the_default_takes_64_rows_only_where_both_rows_are_unaligned():
    """``transpose`` gives 16-bit tensors whose x rows and out rows are both unaligned the 64-row
    ``sector_vector_pair_x`` tile (s20 log section 6); every other choice keeps its tile."""
    for dtype in ("bf16", "f16", "f32"):
        for flags in ((True, True, True), (False, True, False), (False, False, False), (False, False, True)):
            doubly = flags == (False, False, False) and dtype != "f32"
            assert TransposeConfig.default(dtype, *flags).rows == (64 if doubly else None)


def test_benchmark_variant_names():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    assert bench_transpose.variant_config("bf16", "256/1/sectorva64") == config_of("bf16", "sector_vector_aligned_x", 8)
    assert bench_transpose.variant_config("bf16", "256/1/sectorv128") == config_of("bf16", "sector_vector", 16)
    assert bench_transpose.variant_config("f32", "128/1/sectorvs32") == config_of("f32", "sector_vector_scalar", 8)
    assert bench_transpose.variant_config("bf16", "256/1/sectorv256") == TransposeConfig("bf16", 256, 1,
                                                                                          "sector_vector")
    with pytest.raises(ValueError):
        bench_transpose.variant_config("bf16", "256/1/sectorva32")      # skipped by the benchmark for bf16
    with pytest.raises(SystemExit):
        bench_transpose.variant_config("bf16", "256/1/sector64")


def _gpu_torch():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch
    return torch


GPU_CASES = [(c, m, n) for c in NEW if c.dtype == "bf16" for m, n in ((8191, 12289), (16383, 16385))] + [
    (c, 8191, 12289) for c in NEW if c.dtype == "f32"]


@pytest.mark.gpu
@pytest.mark.parametrize("config, m, n", GPU_CASES, ids=str)
def test_gpu_matches_torch(config, m, n):
    torch = _gpu_torch()
    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[config.dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    out = transpose(x, config=config)
    torch.cuda.synchronize()
    want = x.double().t()
    assert torch.linalg.norm(out.double() - want) / torch.linalg.norm(want) == 0
    assert torch.equal(out, x.t().contiguous())
