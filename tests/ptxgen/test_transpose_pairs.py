"""ptxgen.kernels.transpose with ``access="sector_vector_pair_x"``: ``sector_vector``'s out side (sector windows,
16-byte out stores) with x's rows read as ALIGNED 4-byte pairs (or 8-byte quads, ``x_piece_bytes = 8``) of 16-bit
elements from a window moved per row (warp q on the rows ≡ q mod 8, all of one start parity). The layouts, the bank
reports for every shift, the interpreter against numpy on ragged doubly unaligned shapes (and a strided x), the PTX
(packed ``ld.global.b32`` pair loads) assembled by nvJitLink with no spill at the chosen residency, and the GPU."""
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
    TransposeConfig, bank_reports, build, layouts, residue_tail_tv, sector_vector_residency, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify

from gpu_torch import torch_or_skip

NUMPY = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
ACCESS = "sector_vector_pair_x"
ROWS = (64, 128, 256)


def config_of(dtype: str, rows: int | None, piece_bytes: int | None = None) -> TransposeConfig:
    return TransposeConfig(dtype, 256, 1, ACCESS, rows, x_piece_bytes=piece_bytes)


CONFIGS = [config_of("bf16", r, p) for r in ROWS for p in (None, 8)]


def test_layouts():
    """bf16, BM = 128, pairs: 16 lanes along a row (2 rows of 64 bytes per warp instruction), the window one column
    of origin and two after the tile's 64; BM = 256: 32 lanes (one row's 128 bytes), pitch ≡ 4 mod 8."""
    ls = layouts(config_of("bf16", 128))
    assert {k: str(ls[k]) for k in ("load", "tail", "smem", "store", "passes", "origin", "pitch")} == {
        "load": "(((16,2),8),(2,(8,2))):(((256,8),1),(128,(16,4096)))", "tail": "(((16,2),8),2):(((8,0),1),128)",
        "smem": "Sw<2,2,5> o 0 o (144,67):(1,152)", "store": "(((16,2),8),8):(((192,16),1),24)", "passes": "4",
        "origin": "1", "pitch": "152"}
    ls = layouts(config_of("bf16", None))
    assert (str(ls["load"]), str(ls["tail"]), str(ls["smem"])) == (
        "((32,8),(2,(32,1))):((512,1),(256,(8,16384)))", "((32,8),2):((8,1),256)", "Sw<2,2,5> o 0 o (272,67):(1,284)")
    ls = layouts(config_of("bf16", 64, 8))
    assert (str(ls["load"]), str(ls["tail"]), ls["origin"]) == (
        "(((16,2),8),(4,(4,1))):(((256,8),1),(64,(16,4096)))", "(((8,4),8),4):(((8,0),1),64)", 3)
    # fewer tail rows (64 / 8 warps) than lanes: a lane holds a whole piece, lanes 8-31 repeat lanes 0-7
    assert str(residue_tail_tv(64, 2, 8)) == "(((8,4),8),2):(((8,0),1),64)"
    # the A = 16 head rows in pieces too (2 rows per warp, 32 lanes along a row), their tail as the x rows'
    ls = layouts(config_of("bf16", 64))
    assert (str(ls["head"]), str(ls["head_tail"])) == ("((32,8),(2,(2,1))):((32,1),(16,(8,1024)))",
                                                       "(((2,16),8),2):(((8,0),1),16)")
    # where no split of a warp's lanes over 2 head rows is conflict-free (BM = 128 quads), element loads
    assert "head_tail" not in layouts(config_of("bf16", 128, 8))


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_each_warp_reads_aligned_pieces_of_one_residue(config):
    """``load`` is a bijection onto the (BM, BN) tile, ``tail`` onto the (BM, P) tile; warp q's values lie in rows
    ≡ q (mod 8); a thread's values come in whole pieces of P consecutive columns starting at a multiple of P (aligned
    once the window starts at an aligned column)."""
    ls = layouts(config)
    bm, bn = config.tile
    p = config.x_piece
    warps = np.arange(config.threads)[:, None] // 32
    index = tv_index(ls["load"])
    assert sorted(index.ravel().tolist()) == list(range(bm * bn))
    rows, columns = index % bm, index // bm
    assert np.all(rows % 8 == warps)
    pieces = columns.reshape(config.threads, -1, p)
    assert np.all(pieces == pieces[:, :, :1] + np.arange(p)) and np.all(pieces[:, :, 0] % p == 0)
    tail = tv_index(ls["tail"])
    assert set(tail.ravel().tolist()) == set(range(bm * p)) and np.all(tail % bm % 8 == warps)


@pytest.mark.parametrize("rows, piece_bytes, lanes", [(64, None, 32), (128, None, 16), (256, None, 32),
                                                      (64, 8, 16), (128, 8, 8), (256, 8, 16)])
def test_a_warp_instruction_reads_128_contiguous_bytes_per_row_group(rows, piece_bytes, lanes):
    """One value index of warp 0: 32/lanes rows 8 apart, ``lanes`` pieces (lanes·P·2 contiguous bytes) of each — 128
    bytes of one row for pairs at BM = 64 and 256."""
    config = config_of("bf16", rows, piece_bytes)
    p = config.x_piece
    idx = tv_index(layouts(config)["load"])[:32, 0]
    row, col = idx % rows, idx // rows
    assert sorted(set(row.tolist())) == [8 * k for k in range(32 // lanes)]
    for r in set(row.tolist()):
        assert sorted(col[row == r].tolist()) == [p * k for k in range(lanes)]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_bank_reports(config):
    """Every smem access 1-way: the x pieces' and their tail's stores at every shift s in [0, P), the head rows'
    (pieces and tail at every s, or element stores), and the transposed read at every pass and out shift in [0, A);
    every access 2 bytes (element stores and reads)."""
    reports = bank_reports(config)
    warps = config.threads // 32
    p = config.x_piece
    heads = 2 * p * warps if "head_tail" in layouts(config) else warps
    assert len(reports["store"]) == 2 * p * warps + heads
    assert len(reports["load"]) == layouts(config)["passes"] * config.sector * warps
    assert {r.ways for rs in reports.values() for r in rs} == {1}
    assert {r.access_bytes for rs in reports.values() for r in rs} == {2}


SHAPES = [(37, 45), (130, 67), (257, 129), (45, 37), (1, 13), (17, 1), (300, 1001), (513, 131)]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("piece_bytes", [None, 8])
def test_interpreter_matches_numpy(dtype, rows, piece_bytes):
    """Odd M and odd N (both x's and out's rows unaligned), one tile and several in each direction."""
    config = config_of(dtype, rows, piece_bytes)
    for m, n in SHAPES:
        x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[dtype])
        out = transpose(x, config=config)
        assert out.shape == (n, m) and np.array_equal(out, x.T), (m, n)


@pytest.mark.parametrize("piece_bytes", [None, 8])
def test_strided_x_and_out(piece_bytes):
    """x a column slice of a wider array starting at column 3 (not 16-byte, not even 4-byte aligned; its pitch ≠ N,
    so the shifts computed from N are off and the run-time check sends pieces down the element path) and out a
    column slice of another: the same result, the rest of out untouched."""
    m, n = 45, 77
    wide_x = np.random.default_rng(7).standard_normal((m, n + 9)).astype(ml_dtypes.bfloat16)
    x = wide_x[:, 3:3 + n]
    wide = np.full((n, m + 3), -7, ml_dtypes.bfloat16)
    interpret(build(config_of("bf16", 128, piece_bytes)), {"x": x, "out": wide[:, :m]})
    assert np.array_equal(wide[:, :m], x.T) and np.all(wide[:, m:] == -7)


def global_accesses(config):
    spec = Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    return Counter(re.findall(r"(?:ld|st)\.(?:global|shared)\S*", compiled.ptx)), compiled


# (registers at most, CTAs per SM asked): nvJitLink with no spill under .minnctapersm
BOUNDS = {64: (32, 8), 128: (32, 8), 256: (48, 5)}


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_ptx_packed_pieces_and_no_spill(config):
    """x's and out's rows unaligned: one ``ld.global.b32`` (pairs) or ``ld.global.v2.b32`` (quads) per piece of a
    thread — the 16-bit values stay packed, not ``v2.b16`` — and one ``st.global.v4.b32`` per pass; nvJitLink
    assembles it with no spill in ``BOUNDS``' registers at ``BOUNDS``' CTAs per SM."""
    verify(build(config))
    bm, bn = config.tile
    p = config.x_piece
    counts, compiled = global_accesses(config)
    piece = "ld.global.b32" if p == 2 else "ld.global.v2.b32"
    # a thread's pieces of the (BM, BN) tile and one of the (BM, P) tail, the same for the A head rows where they
    # are read in pieces (else element loads)
    heads = config.sector * bn // (p * config.threads) + 1 if "head_tail" in layouts(config) else 0
    assert counts[piece] == bm * bn // (p * config.threads) + 1 + heads
    assert counts["ld.global.v2.b16"] == 0 and counts["ld.global.v4.b16"] == 0
    assert counts["st.global.v4.b32"] == layouts(config)["passes"]
    registers, ctas = BOUNDS[bm]
    assert sector_vector_residency(config) == ctas
    assert f".minnctapersm {ctas}" in compiled.ptx
    assert compiled.spill_bytes == 0 and compiled.registers <= registers


def test_bad_config():
    with pytest.raises(ValueError, match=r"^TransposeConfig.dtype = 'f32' with access = 'sector_vector_pair_x' must "
                                         r"be bf16 or f16 \(pieces of 2 or 4 16-bit elements; f32's rows are aligned "
                                         r"to its 4-byte elements already\)$"):
        TransposeConfig("f32", 256, 1, ACCESS).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 128 with access = 'sector_vector_pair_x' must "
                                         r"be 256 \(one warp per residue of x's rows mod 8\), with pair = 1 \(not 1\)$"):
        TransposeConfig("bf16", 128, 1, ACCESS).validate()
    with pytest.raises(ValueError, match=r"with pair = 1 \(not 2\)$"):
        TransposeConfig("f16", 256, 2, ACCESS).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.x_piece_bytes = 16 applies to access = "
                                         r"'sector_vector_pair_x' only, as 4 or 8 \(bytes of the aligned pieces x's "
                                         r"rows are read in\)$"):
        config_of("bf16", 128, 16).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.x_piece_bytes = 8 applies to access = "
                                         r"'sector_vector_pair_x' only"):
        TransposeConfig("bf16", 256, 1, "sector_vector_aligned_x", x_piece_bytes=8).validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.rows = 100 must be 64, 128 or 256 for bf16"):
        config_of("bf16", 100).validate()
    with pytest.raises(ValueError, match=r"did you mean 'sector_vector_pair_x'"):
        TransposeConfig("bf16", 256, 1, "sector_vector_pairx").validate()


def test_piece_elements():
    assert [config_of("bf16", 128, b).x_piece for b in (None, 4, 8)] == [2, 2, 4]
    assert TransposeConfig("bf16", 256, 1, "sector_vector_aligned_x").x_piece == 8


def test_the_default_choice():
    """transpose() picks it, with 64-row tiles and pairs, for 16-bit tensors whose x rows and out rows are both
    unaligned (faster than sector_vector_scalar's 128-row tiles at every shape timed, s20 log section 6), nowhere
    else."""
    for dtype in ("bf16", "f16", "f32"):
        for flags in ((True, True, True), (False, True, False), (False, False, False), (False, False, True)):
            doubly = flags == (False, False, False) and dtype != "f32"
            want = config_of(dtype, 64) if doubly else None
            got = TransposeConfig.default(dtype, *flags)
            assert got == want if doubly else got.access != ACCESS


def test_benchmark_variant_names():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    assert bench_transpose.variant_config("bf16", "256/1/sectorvp128") == config_of("bf16", 128)
    assert bench_transpose.variant_config("f16", "256/1/sectorvq64") == config_of("f16", 64, 8)
    assert bench_transpose.variant_config("bf16", "256/1/sectorvp256") == config_of("bf16", None)
    assert bench_transpose.label_suffix(config_of("bf16", 64, 8)) == "/sectorvq"
    assert bench_transpose.label_suffix(config_of("bf16", 64)) == "/sectorvp"
    with pytest.raises(ValueError):
        bench_transpose.variant_config("f32", "256/1/sectorvp128")       # skipped by the benchmark for f32


GPU_CONFIGS = [config_of(d, r, p) for d in ("bf16", "f16") for r in ROWS for p in (None, 8)]


@pytest.mark.gpu
@pytest.mark.parametrize("config", GPU_CONFIGS, ids=str)
def test_gpu_matches_torch(config):
    torch = torch_or_skip()
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[config.dtype]
    for m, n in ((8191, 12289), (1000, 1001), (37, 45), (257, 129)):
        x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
        out = transpose(x, config=config)
        torch.cuda.synchronize()
        assert torch.equal(out, x.t().contiguous()), (m, n)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", ROWS)
def test_gpu_strided_views(rows):
    """x a column slice (from column 3: base not 4-byte aligned) of a wider tensor, out a column slice of another:
    the run-time alignment check sends the misaligned pieces down the element path; the same result, the rest of out
    untouched."""
    torch = torch_or_skip()
    m, n = 1999, 3001
    x = torch.randn((m, n + 8), device="cuda", dtype=torch.float32).to(torch.bfloat16)[:, 3:3 + n]
    wide = torch.full((n, m + 3), -7.0, device="cuda", dtype=torch.bfloat16)
    transpose(x, wide[:, :m], config=config_of("bf16", rows))
    torch.cuda.synchronize()
    assert torch.equal(wide[:, :m], x.t()) and bool((wide[:, m:] == -7).all())
