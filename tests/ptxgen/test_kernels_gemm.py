"""ptxgen.kernels' GEMM: GemmConfig's rules and names, the heuristic's choices, the builder's IR (byte-identical to the
examples' text and to recorded prints), and matmul / linear / scaled_mm against float64 — in the CPU interpreter for
every configuration the heuristic can pick, and on the GPU with torch tensors."""
from __future__ import annotations

import hashlib
import itertools
import pathlib

import ml_dtypes
import numpy as np
import pytest

from ptxgen.ir.ops import smem_plan
from ptxgen.ir.text import parse_module, print_module
from ptxgen.kernels import GemmConfig, choose_config, linear, matmul, scaled_mm
from ptxgen.kernels.gemm import TILE_FILE, build, streamk_ktiles_saved
from ptxgen.kernels.gemm import run as gemm_run
from ptxgen.kernels.gemm.config import STREAMK_MIN_SAVING
from ptxgen.kernels.gemm.heuristic import (DEEP_STAGES, choice_without_narrow_split, deep_one_wave,
                                           estimated_cost)
from ptxgen.kernels.gemm.simple import SimpleGemmConfig
from ptxgen.kernels.gemm.simple import build as build_simple
from ptxgen.verify import verify
from gpu_torch import torch_or_skip

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
BF16, F16, E4M3, E5M2 = (np.dtype(t) for t in (ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn,
                                                ml_dtypes.float8_e5m2))
HOST = {"bf16": BF16, "f16": F16, "e4m3": E4M3, "e5m2": E5M2}


def rel_err(c, want):
    return np.linalg.norm(np.asarray(c, np.float64) - want) / max(np.linalg.norm(want), 1e-300)


def rand(shape, dtype, rng, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(HOST[dtype])


# -- GemmConfig: the rules, each with its message ---------------------------------------------------------------------

@pytest.mark.parametrize("fields, message", [
    (dict(dtype="f32"), "GemmConfig.dtype = 'f32': the operands are bf16, f16, e4m3 or e5m2"),
    (dict(dtype="e4m3", out_dtype="f32"), "GemmConfig.out_dtype = 'f32': an fp8 GEMM writes bf16 or f16"),
    (dict(dtype="bf16", out_dtype="f16"), "GemmConfig.out_dtype = 'f16': a bf16 GEMM writes bf16"),
    (dict(bm=64), "GemmConfig.bm = 64: the two consumer warpgroups take BM/2 rows each in 64-row wgmma blocks, "
                  "and a TMA box has at most 256 rows: BM is 128 or 256"),
    (dict(bn=12), "GemmConfig.bn = 12: BN is wgmma's N, a multiple of 8 from 8 to 256"),
    (dict(bn=264), "GemmConfig.bn = 264: BN is wgmma's N"),
    (dict(stages=0), "GemmConfig.stages = 0: the pipeline needs at least 1 stage"),
    (dict(group=0), "GemmConfig.group = 0: a rasterization group has at least 1 tile row"),
    (dict(pending=2), "GemmConfig.pending = 2: a k-tile's stage is released once the wgmma group after it is "
                      "queued, so at most 1 group may stay in flight"),
    (dict(a_major="M"), "GemmConfig.a_major = 'M': an operand is 'K'-major"),
    (dict(dtype="e4m3", b_major="MN", bn=128), "GemmConfig.b_major = 'MN': fp8 wgmma reads K-major shared memory"),
    (dict(b_major="MN", bn=96), "GemmConfig.bn = 96: an MN-major B is loaded in boxes of 64 columns"),
    (dict(cluster=16), "GemmConfig.cluster = 16: clusters of 1 to 8 CTAs"),
    (dict(cluster=2, a_major="MN"), r"GemmConfig.cluster = 2: clusters \(B multicast\) are built for K-major operands"),
    (dict(cluster=4, bn=48), "GemmConfig.cluster = 4: each CTA of a cluster loads BN/4 rows of B, a multiple of 8"),
    (dict(dtype="e4m3", promote=0), "GemmConfig.promote = 0: promote must be at least 1"),
    (dict(promote=4), "GemmConfig.promote = 4: promotion is fp8's"),
    (dict(registers=(20, 240)), r"GemmConfig.registers = \(20, 240\): the producer's 20 is not a multiple of 8"),
    (dict(registers=(24, 248)), r"GemmConfig.registers = \(24, 248\): 128 × 24 \+ 256 × 248 = 66560 registers exceed"),
    # within the SM's 65536 but not the 384 × 168 = 64512 a CTA of 384 threads launches with (setmaxnreg's pool)
    (dict(registers=(32, 240)), r"GemmConfig.registers = \(32, 240\): 128 × 32 \+ 256 × 240 = 65536 registers exceed "
                                r"the 64512 a CTA of 384 threads launches with \(168 per thread\): setmaxnreg.inc would "
                                r"wait forever"),
    (dict(epilogue="smem"), "GemmConfig.epilogue = 'smem': the epilogue is 'direct', 'rows' or 'tma'"),
    (dict(epilogue_split=2), "GemmConfig.epilogue_split = 2: column blocks are staged by the 'tma' or 'rows' "
                             "epilogue, not 'direct'"),
    (dict(bn=184, epilogue="rows"), "GemmConfig.bn = 184: BN = 184 must split into 1 block of a multiple of 16 "
                                    "columns"),
    (dict(bn=256, epilogue="tma", epilogue_split=3), "GemmConfig.epilogue_split = 3: BN = 256 must split into 3 "
                                                     "blocks of a multiple of 8"),
    (dict(bm=256, bn=128, stages=2, epilogue="tma", epilogue_split=3),
     "GemmConfig.epilogue_split = 3: with BM = 256 a warpgroup's 128 rows are staged as its 2 64-row wgmma blocks in "
     "turn"),
    (dict(bm=256, bn=128, stages=2, epilogue="rows", epilogue_split=2), "by the 'tma' epilogue of a row-major C"),
    (dict(epilogue="tma", swap_ab=True), "GemmConfig.swap_ab = True: C is written through its transposed view, by "
                                         "the 'direct' epilogue or by the 'tma' epilogue with c_major = 'M' \\(not "
                                         "epilogue = 'tma', c_major = 'N'\\)"),
    (dict(epilogue="rows", swap_ab=True), "GemmConfig.swap_ab = True: .*not epilogue = 'rows'"),
    (dict(c_major="K"), "GemmConfig.c_major = 'K': C's contiguous mode is 'N' \\(row-major\\) or 'M'"),
    (dict(c_major="M"), "GemmConfig.c_major = 'M': a column-major C is stored by the 'tma' epilogue's transposed "
                        "boxes, not 'direct'"),
    (dict(bn=120, c_major="M", epilogue="tma", epilogue_split=2), "GemmConfig.epilogue_split = 2: BN = 120 must "
                                                                  "split into 2 blocks of a multiple of 8 columns"),
    (dict(dtype="e4m3", streamk=True, bn=128, scales="block", grouped="masked"),
     "GemmConfig.streamk = True: a masked grouped GEMM finds each tile's group \\(and, masked, whether it has rows\\) on "
     "the device, while stream-K shares out k-tiles as if every tile had them all: streamk = False"),
    (dict(streamk=True, streamk_min_saving=-1), "GemmConfig.streamk_min_saving = -1"),
    (dict(streamk_every_sm=True), "GemmConfig.streamk_every_sm = True: .* streamk = True"),
    (dict(epilogue="tma", overlap=-1), "GemmConfig.overlap = -1: 0 \\(no overlap\\)"),
    (dict(overlap=2), "GemmConfig.overlap = 2: the epilogue behind the next tile's wgmmas is built for the "
                      "TMA-store epilogue"),
    (dict(epilogue="tma", overlap=2, streamk=True), "overlap = 2: .* data-parallel tiles"),
    (dict(epilogue="tma", overlap=2, pending=0), "overlap = 2: .*pending=1"),
    (dict(dtype="e4m3", bn=128, epilogue="tma", overlap=1), "overlap = 1: .*fp8: promote > 1"),
    (dict(stages=8), "GemmConfig.stages = 8: 8 stages of \\(BM \\+ BN\\) × 128 bytes need 393344 bytes of shared "
                     "memory, over the 232448 a Hopper CTA can have"),
])
def test_validate_names_the_broken_rule(fields, message):
    with pytest.raises(ValueError, match=message):
        GemmConfig(**fields).validate()
    with pytest.raises(ValueError, match=message):
        build(GemmConfig(**fields))    # the builder validates first


@pytest.mark.parametrize("config", [GemmConfig(), TILE_FILE, GemmConfig(bn=128, stages=6, epilogue="tma"),
                                    GemmConfig(bn=16, stages=8, swap_ab=True, bias=True),
                                    GemmConfig("e4m3", bn=192, promote=4, epilogue="tma"),
                                    GemmConfig(bn=192, cluster=2, epilogue="rows", epilogue_split=3),
                                    GemmConfig(cluster=4, bn=128, stages=3)])
def test_shared_memory_is_the_verifiers(config):
    """``smem_bytes`` is the shared-memory plan's total, the number the verifier holds to 227 KiB."""
    assert smem_plan(build(config).kernels[0].body.ops).total == config.smem_bytes()


@pytest.mark.parametrize("config, stages", [(GemmConfig(bm=256, bn=56, stages=6, swap_ab=True), 5),
                                            (GemmConfig(bm=256, bn=40, stages=6, swap_ab=True), 6),
                                            (GemmConfig(bn=224, stages=9, epilogue="tma"), 3),
                                            (GemmConfig(bn=224, stages=9, epilogue="tma", epilogue_split=2), 4)])
def test_stages_that_fit_are_the_deepest_that_validate(config, stages):
    fitted = config.with_stages_that_fit()
    assert fitted.stages == stages and fitted.replace(stages=stages).validate() == fitted
    with pytest.raises(ValueError, match="shared memory"):
        fitted.replace(stages=stages + 1).validate()


# problems whose picks the grid below does not reach: fp8's 128 x 80 and 128 x 136 wave fillers, the swapped split-K
# of fp8 and of one 192-wide tile in two long slices (s34), mid-M swapped split-K tiles (s39) and rule 10's deep
# one-wave tiles (s40), decode stream-K past one wave (s41), decode widths of 40-56, one-tile splits halved and
# one-wave swapped tiles (s42)
EXTRA_PROBLEMS = [("e4m3", 256, 5120, 13824), ("e4m3", 256, 53248, 16384), ("e4m3", 72, 5120, 13824),
                  ("e4m3", 188, 5120, 24576), ("bf16", 192, 8192, 28672), ("bf16", 388, 1024, 57344),
                  ("e4m3", 291, 1280, 18432), ("bf16", 1124, 1024, 16384), ("bf16", 1002, 1280, 28672),
                  ("e4m3", 792, 1536, 13824), ("e4m3", 741, 1024, 13824), ("bf16", 31, 18432, 14336),
                  ("e4m3", 31, 18432, 14336), ("bf16", 24, 24576, 28672), ("e4m3", 24, 24576, 28672),
                  ("bf16", 50, 18432, 4096), ("bf16", 44, 3072, 7168), ("e4m3", 42, 9216, 3584),
                  ("bf16", 135, 2048, 12288), ("e4m3", 146, 1536, 18432), ("bf16", 775, 4096, 57344),
                  ("e4m3", 1053, 2560, 57344), ("bf16", 87, 2048, 8192)]


def heuristic_configs(dtypes=("bf16", "e4m3")) -> list:
    """Every configuration ``choose_config`` gives over transformer-like shapes (M 1 … 16384, N and K 1024 … 57344,
    odd sizes) and ``EXTRA_PROBLEMS``, every operand major of the 16-bit types, with and without a bias, on an H100's
    132 SMs."""
    found = set()
    for dtype in dtypes:
        majors = [("K", "K")] if dtype in ("e4m3", "e5m2") else list(itertools.product(("K", "MN"), repeat=2))
        problems = itertools.product((1, 16, 33, 64, 65, 128, 200, 448, 512, 2048, 8192, 16384),
                                     (1024, 3001, 4096, 14336, 57344), (1024, 2999, 8192, 16384))
        problems = [*problems, *((m, n, k) for kind, m, n, k in EXTRA_PROBLEMS if kind == dtype)]
        for (a_major, b_major), (m, n, k), bias in itertools.product(majors, problems, (False, True)):
            found.add(choose_config(m, n, k, dtype, 132, a_major=a_major, b_major=b_major, bias=bias))
    return sorted(found, key=lambda c: (c.dtype, c.name))


HEURISTIC_CONFIGS = heuristic_configs()


@pytest.mark.parametrize("config", HEURISTIC_CONFIGS + [TILE_FILE, GemmConfig(a_major="MN", bn=128, stages=2),
                                                         GemmConfig("e5m2", bn=128, promote=3, out_dtype="f16")],
                         ids=lambda c: f"{c.dtype}-{c.name}")
def test_names_read_back(config):
    assert GemmConfig.from_name(config.name, config.dtype) == config
    config.validate()


def test_unknown_name_gives_the_grammar():
    with pytest.raises(ValueError, match=r"unknown GEMM variant 'h128x256q4': h<BM>x<BN>s<stages>\[C\]\[p<pending>\]"):
        GemmConfig.from_name("h128x256q4")


# -- the heuristic -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dtype, extra, name", [
    # rule 4: data-parallel, the TMA-store epilogue behind the next tile's first k-tile (measured winners)
    ((4096, 4096, 4096), "bf16", {}, "h128x256s4t2o1"),
    ((8192, 8192, 1024), "f16", {}, "h128x256s4t2o1"),
    # rule 3: stream-K where the last wave shrinks by >= 20 k-tiles; clusters of 2 for K >= 2 max(M, N)
    ((8192, 8192, 8192), "bf16", {}, "h128x256s4t2sk"),
    ((4096, 4608, 4096), "bf16", {}, "h128x192s4t3"),       # stream-K's shared k-tiles dearer: 644 both (s20)
    ((1536, 4096, 11008), "bf16", {}, "h128x192s4t3"),      # 688 against 630 for h128x256s4c2t2sk (s20)
    ((384, 14336, 18432), "bf16", {}, "h128x176s4t"),       # 599 against 550 for h128x256s4t2sk (s20)
    ((4096, 4352, 4096), "bf16", {}, "h128x160s4t"),         # 28 x 32 tiles of 128 x 160: 636 against 615 (s15)
    ((4096, 4096, 16384), "bf16", {}, "h128x256s4c2t2sk"),
    # C rows not 16-byte aligned: the rows epilogue
    ((3001, 2999, 2016), "bf16", {}, "h128x192s4c2r3"),
    ((3001, 2999, 2016), "e4m3", {}, "h128x128s4c2k4r"),
    # rule 2 for fp8: the wave quantization picks 128 x 192 or 128 x 128
    ((8192, 8192, 8192), "e4m3", {}, "h128x192s4k4t"),
    ((4096, 5120, 4096), "e4m3", {}, "h128x160s4k4t"),       # 1210 against 1165 for 128 x 192 (s31 log section 7)
    ((4096, 4096, 4096), "e4m3", {}, "h128x176s4k4t"),      # 6 waves (5.8) of 128 x 176 against 8 (7.8) of 128²
    ((4096, 4096, 16384), "e4m3", {}, "h128x192s4k4tsk"),    # fp8 stream-K: 1218 against 1192 (s33 section 7)
    # the wave-filling widths (s13 section 4): the last wave nearly full where 64-column steps leave it short
    ((384, 4096, 4096), "bf16", {}, "h128x96s7t"),           # 129 tiles
    ((384, 6144, 4096), "bf16", {}, "h128x144s4t"),          # 129 tiles
    ((640, 4096, 14336), "bf16", {}, "h128x160s4t"),         # 130 tiles
    ((256, 14336, 4096), "e4m3", {}, "h128x112s6k4t"),       # 256 tiles: two full waves
    # fp8 256 x 112 where the 128 x 112 tile is picked, M in (192, 256], K >= 8192 (s20 section 5)
    ((256, 14336, 8192), "e4m3", {}, "h256x112s3k4t"),       # 990 against 969 TFLOP/s
    ((224, 28672, 14336), "e5m2", {}, "h256x112s3k4t"),
    ((256, 14336, 6144), "e4m3", {}, "h128x112s6k4t"),       # K = 6144: 927 against 950
    ((256, 7168, 8192), "e4m3", {}, "h128x112s6k4t"),        # 64 tiles of 256 x 112: half the SMs
    # fp8's 128 x 80 and 128 x 136 wave fillers, up to 7 / 6 row tiles (s34 log sections 5-6)
    ((256, 5120, 13824), "e4m3", {}, "h128x80s7k4t"),        # 128 tiles: 940 against 729 for h128x128s4k4t
    ((887, 1280, 11008), "e4m3", {}, "h128x80s7k4t"),        # 929 against 780
    ((395, 2560, 9216), "e4m3", {}, "h128x80s6g1k4txT"),       # not for a swapped pick: 800 against 471
    ((1630, 1024, 9216), "e4m3", {}, "h128x112s4k4t"),       # 13 row tiles: past 128 x 80's bound
    ((256, 53248, 16384), "e4m3", {}, "h128x136s4k4t"),      # 1095 (5 stages) against 1005 for h128x192s4k4t
    ((862, 12288, 14336), "e4m3", {}, "h128x176s4k4t"),      # 7 row tiles: 1137 against 990 for 128 x 136
    ((192, 14336, 8192), "e4m3", {}, "h128x192s5k4t2xT"),    # M = 192: swapped
    # 16-bit 128 x 224 (C staged in two blocks of 112) below 8 row tiles (s19 sections 1-4)
    ((256, 14336, 4096), "bf16", {}, "h128x224s4t2"),        # 128 tiles: 569 against 547 TFLOP/s for 128 x 256
    ((512, 14336, 14336), "f16", {}, "h128x224s4t2"),
    ((1024, 14336, 4096), "bf16", {}, "h128x176s4t"),        # 8 row tiles: not 128 x 224
    ((8192, 4352, 1024), "bf16", {}, "h128x256s4t2o1"),
    # rule 5: a narrow tile's deep pipeline while M spans fewer than 8 tiles, 4 stages from there (128 x 96: 5)
    ((256, 18432, 14336), "bf16", {}, "h128x144s4t"),        # 2 row tiles: 584 against 551 for 128 x 128 stream-K
    ((3072, 1024, 1024), "bf16", {}, "h128x96s5t"),          # 24 row tiles: 5 stages, not 7
    ((512, 4096, 4096), "e4m3", {}, "h128x128s4k4t"),
    ((1024, 1024, 1024), "bf16", {}, "h128x64s8t"),          # 128 x 96's 88 tiles fill two thirds: not taken
    # fewer 128 x 256 tiles than SMs: 128 x 128 tiles where they fill a wave, 128 x 64 where they leave SMs idle
    ((512, 4096, 4096), "bf16", {}, "h128x128s6p0t"),        # one wave: no next tile to overlap the store with;
    # rule 4: the data-parallel 16-bit 128 x 128 tile waits for each k-tile's wgmmas (p0)
    ((256, 8192, 4096), "f16", {}, "h128x128s6p0t"),
    ((128, 4096, 4096), "bf16", {}, "h128x64s8t"),
    # 16-bit 128 x 192 tiles where the waves of 128 x 256 and 128 x 128 fit badly (data-parallel, no overlap)
    ((768, 4096, 4096), "bf16", {}, "h128x192s4t3"),
    ((512, 6144, 4096), "f16", {}, "h128x192s4t3"),
    ((3072, 7168, 2048), "bf16", {}, "h192x176s4Ct3"),     # rule 8: 5.0 waves of 192 x 176 against 6.9 (s32)
    ((128, 7168, 18432), "bf16", {}, "h128x64s8t"),         # one row tile: not split-K (343 against 327)
    ((128, 7168, 18432), "e4m3", {}, "h128x64s8k4t"),
    # split-K by k-slices (16-bit, K >= 8192, M > 128) where the tiles leave room for 2+ slices (s20 sections 7-8)
    ((640, 1536, 13824), "bf16", {}, "h128x128s6tez"),       # 533 against 435 for h128x64s8t
    ((768, 1536, 12288), "f16", {}, "h128x256s4t2ez"),       # 496 against 421 for h128x128s6p0t
    ((320, 2048, 57344), "bf16", {}, "h128x160s4g1tzxT"),    # 542 against 240; swapped split since s39 (below)
    ((384, 1536, 5120), "bf16", {}, "h128x64s8t"),           # K = 5120: 308 against 266 split
    ((1024, 2048, 14336), "bf16", {}, "h128x128s4p0t"),      # 128 tiles: one slice each
    ((640, 1536, 13824), "e4m3", {}, "h128x64s8k4t"),        # fp8: not split (960 against 908)
    # ... from K = 16384 split-K costs 0.8 of that against data-parallel tiles (s22 section 3)
    ((1024, 1536, 18432), "bf16", {}, "h128x192s4t3ez"),     # 606 against 577 for h128x96s5t
    ((1184, 1024, 28672), "bf16", {}, "h128x256s4t2ez"),     # 573 against 427
    ((1024, 1536, 8192), "bf16", {}, "h128x96s5t"),          # K = 8192: 562 against 541 split
    ((544, 1536, 24576), "bf16", {}, "h128x184s4g1tzxT"),    # swapped split since s39 (below)
    # ... 16-bit from K = 10240 (s29 section 5), fp8 from 16384
    ((753, 2048, 11008), "bf16", {}, "h128x192s4t3ez"),      # 604 against 439 for h128x96s7t
    ((929, 1280, 10240), "bf16", {}, "h128x256s4t2ez"),      # 483 against 402 for h128x96s5t
    ((1462, 1024, 10240), "bf16", {}, "h128x96s5t"),         # one whole wave of 128 x 96 tiles: 540 against 490
    ((753, 1024, 13824), "e4m3", {}, "h128x64s8k4t"),        # 799 against 703 split
    # fp8's split tile is 128 x 192 (s22 section 4)
    ((1024, 1536, 18432), "e4m3", {}, "h128x192s4k4tez"),    # 1146 against 1023 for h128x112s4k4t
    ((416, 2048, 16384), "e4m3", {}, "h128x192s4k4tez"),     # 811 against 464 for h128x64s8k4t
    # ... and the swapped mid-M tiles of M <= 192 in 3+ slices (s21 section 6)
    ((96, 4096, 14336), "bf16", {}, "h128x48s6g1tzxT"),      # 2 slices: rule 3c yields to the swapped halves
                                                              # (95x4096x16384 230 -> 291, s42 section 9)
    ((80, 5120, 13824), "bf16", {}, "h128x80s6tzxT"),        # 187 against 139 for h128x64s8t (one 80-wide tile)
    ((96, 7168, 8192), "bf16", {}, "h128x96s6txT"),          # 2 slices: 223 against 219 split
    ((256, 1024, 28672), "bf16", {}, "h128x128s6tez"),       # M = 2 x 128, no padding: unswapped split-K
    # ... up to M = 672 (s39 log section 4: 28 of 30 changed picks faster, two within 1%)
    ((388, 1024, 57344), "bf16", {}, "h128x200s4g1tzxT"),    # 532 against 446 for h128x128s6tez
    ((223, 8192, 28672), "bf16", {}, "h128x224s4t2zxT"),     # 608 against 540 for h128x256s4t2ez
    ((420, 2048, 57344), "bf16", {}, "h128x216s4g1tzxT"),    # 623 against 532 for h128x256s4t2ez
    ((291, 1280, 18432), "e4m3", {}, "h128x104s6g1k4tzxT"),  # 647 against 519 for h128x192s4k4tez
    ((402, 3072, 57344), "bf16", {}, "h128x192s4t3ez"),      # unswapped: 560 against 522 for h128x208s4t2zxT
    ((700, 2560, 16384), "bf16", {}, "h128x128s6p0t"),       # over SWAP_SPLITK_MAX_M: unswapped
    # ... fp8 too, and both widths in 2 slices where each has at least 112 k-tiles (s34 log section 4)
    ((72, 5120, 13824), "e4m3", {}, "h128x72s6k4tzxT"),      # 40 tiles, 3 slices: 319 against 283 data-parallel
    ((80, 8192, 28672), "bf16", {}, "h128x80s6tzxT"),        # 64 tiles, 2 slices of 224: 227 against 215
    ((192, 8192, 28672), "bf16", {}, "h128x192s5t2zxT"),     # one 192-wide tile in 2 slices: 498 against 419
    ((188, 5120, 24576), "e4m3", {}, "h128x192s5k4t2zxT"),   # 766 against 673 for h128x192s4k4tez
    ((80, 7168, 10240), "bf16", {}, "h128x80s6txT"),         # 2 slices of 80 k-tiles: data-parallel (196 against 191)
    ((80, 7168, 18432), "e4m3", {}, "h128x80s6k4txT"),       # 2 slices of 72: 389 against 380
    # ... and an M under 96 always takes its one swapped tile (s21 section 9)
    ((72, 6144, 12288), "bf16", {}, "h128x72s6txT"),         # 169 against 129 for h128x64s8t
    ((66, 8192, 8192), "bf16", {}, "h128x72s6txT"),          # 166 against 134
    ((72, 6144, 12288), "e4m3", {}, "h128x72s6k4txT"),       # fp8 from SMs/4 swapped tiles: 308 against 235
    ((96, 7168, 12288), "e4m3", {}, "h128x96s6k4txT"),       # ... up to M = 96: 424 against 389
    ((95, 2048, 16384), "e4m3", {}, "h128x64s8k4tz"),        # rule 3c: 254 against 175 data-parallel
    # ... and an M at most 24 rows past 128, from SMs / 4 swapped tiles (s29 section 6)
    # ... a stream-K pick of 1-2 waves: the widest width whose data-parallel tiles fill one wave (s42 section 6)
    ((775, 4096, 57344), "bf16", {}, "h128x200s4g1txT"),     # 665 against 567 for h128x160s4g1tskxT
    ((1053, 2560, 57344), "e4m3", {}, "h128x176s4g1k4txT"),  # 1237 against 1057 for h128x136s4g1k4tskxT
    ((580, 5120, 57344), "bf16", dict(bias=True), "h128x200s4g1txbT"),
    ((146, 11008, 5120), "bf16", {}, "h128x152s5txT"),       # 86 tiles: no room for two k-slices
    ((146, 11008, 5120), "e4m3", {}, "h128x152s5k4txT"),
    ((141, 11008, 6144), "bf16", {}, "h128x144s5txT"),       # 171 -> 337 TFLOP/s against h128x128s6p0t (s29 §6)
    # ... split into k-slices where they hold at most half the SMs, from K = 3072, 8 k-tiles a slice (s30 §3)
    ((145, 5120, 28672), "bf16", {}, "h128x152s5tzxT"),      # 40 tiles, 3 slices (s30: 376 against 279 d.-p. at
    ((145, 5120, 28672), "e4m3", {}, "h128x152s5k4tzxT"),    # 145x6144x28672, 684 against 510)
    # ... in two tiles of half the width where those keep >= 90% of its CTAs at work (s42 section 4)
    ((135, 2048, 12288), "bf16", {}, "h128x72s6g1tzxT"),     # 16 tiles in 8 slices -> 32 in 4: 264 against 257
    ((146, 1536, 18432), "e4m3", {}, "h128x80s6g1k4tzxT"),   # 132 CTAs -> 120: 469 against 350
    ((145, 6144, 28672), "bf16", {}, "h128x80s6g1tzxT"),     # 48 tiles in 2 slices -> 96 unsplit
    ((87, 2048, 8192), "bf16", {}, "h128x48s6g1tzxT"),       # M <= 128 from 4 slices: 8 -> 4, 140 against 118
    ((97, 6144, 14336), "bf16", {}, "h128x104s6tzxT"),       # ... not at 2 (290 against 303)
    ((141, 3072, 6144), "bf16", {}, "h128x144s5tzxT"),       # 24 tiles: 197 against 110 for h128x64s8t
    ((130, 1024, 4096), "bf16", {}, "h128x64s8t"),           # 8 tiles in 16 slices of 4 k-tiles: 57 against 46
    ((152, 2048, 3072), "e4m3", {}, "h128x64s8k4t"),         # 16 tiles in 8 slices of 3 k-tiles: 141 against 86
    # ... and the two tiles split so past two row tiles, M 257-280 (s30 §7)
    ((266, 2560, 13824), "e4m3", {}, "h128x136s4g1k4tzxT"),    # 722 against 368 for h128x64s8k4t
    ((257, 1536, 18432), "bf16", {}, "h128x136s4g1tzxT"),      # 354 against 286 for h128x128s6tez
    ((227, 1024, 11008), "bf16", {}, "h128x128s6tez"),       # 217-232 rows: not taken (222 against 206)
    # ... and from there up to two 128-row tiles (10% padding at least: M <= 232) two swapped tiles of ceil(M / 2),
    # split where they hold at most half the SMs, where they fit one wave (s30 log section 1)
    ((160, 4096, 4096), "bf16", {}, "h128x80s6g1tzxT"),        # 267 against 151 for h128x64s8t
    ((160, 7168, 8192), "bf16", {}, "h128x80s6g1txT"),         # 112 tiles: data-parallel, 373 against 236
    ((184, 5120, 6144), "bf16", {}, "h128x96s6g1txT"),         # 343 against 219 for h128x96s7t
    ((184, 3072, 2048), "bf16", {}, "h128x96s6g1txT"),         # K under 3072: data-parallel
    ((160, 7168, 4096), "e4m3", {}, "h128x80s6g1k4txT"),       # 636 against 373 for h128x112s6k4t
    ((200, 4096, 12288), "e4m3", {}, "h128x104s6g1k4tzxT"),    # 666 against 467 for h128x64s8k4t
    ((160, 4096, 4096), "bf16", dict(bias=True), "h128x64s8tb"),     # a bias: no split form, so not the rule
    ((160, 7168, 4096), "bf16", dict(bias=True), "h128x80s6g1txbT"),   # ... where the tiles fill a wave it is
    ((160, 14336, 4096), "bf16", {}, "h128x160s5txT"),       # 224 two-tile tiles: past one wave, the cost model
    ((240, 4096, 4096), "bf16", {}, "h128x64s8t"),           # 7% padding: unswapped
    # ... swapped widths from 80 where N spans at least 16 row tiles (s30 log section 5)
    ((258, 5120, 3072), "bf16", {}, "h128x88s6g1txT"),         # three 88-wide tiles: 370 against 242 (h128x128s6p0t)
    ((528, 2560, 7168), "bf16", {}, "h128x88s6g1txT"),         # 552 against 325 for h128x112s6t
    ((688, 2048, 8192), "e4m3", {}, "h128x88s6g1k4txT"),       # 998 against 719 for h128x112s6k4t
    ((425, 1024, 6144), "bf16", {}, "h128x64s8t"),           # 8 row tiles of N: not under 96 (220 against 183)
    # ... and up to M = 2048 from 5% padding: M just past a multiple of 128 in swapped tiles that cover it (s32 §5)
    ((1044, 14336, 57344), "bf16", {}, "h128x216s4g1tskxT"),   # 5 x 216 = 1080 rows against 9 x 128 = 1152
    ((1028, 6144, 6144), "bf16", {}, "h128x208s4g1t2xT"),      # 623 against 489 for h128x144s4t
    ((1400, 14336, 8192), "bf16", {}, "h128x256s4t2sk"),     # 0.6% padding: unswapped
    ((3100, 14336, 8192), "bf16", {}, "h128x256s4t2sk"),     # over SWAP_MID_MAX_M
    # ... from M = 1024 at any N, up to M = 3072 (s38 log sections 2-3; H200)
    ((1713, 2048, 5120), "bf16", {}, "h128x216s4g1txT"),       # 661 against 600 for h192x160s4Ct3
    ((2326, 1536, 11008), "bf16", {}, "h128x216s4g1txT"),      # 669 against 605 for h192x160s4Ct3
    ((2601, 3072, 9216), "bf16", {}, "h128x240s4g1t2xT"),      # 687 against 644 for h128x256s4t2o1
    ((1287, 2560, 12288), "e4m3", {}, "h128x168s4g1k4tskxT"),  # 1035 against 971 for h128x112s4k4t
    ((708, 1280, 7168), "bf16", {}, "h128x64s8t"),           # under M = 1024 N >= 2M holds (540 against 377)
    # ... and from M = 1024 at the unswapped tiles' cost per k-tile, from 3% padding (s33 log sections 1-3)
    ((1174, 18432, 2112), "bf16", {}, "h128x168s4g1txT"),      # 645 against 569 for h128x176s4t
    ((1598, 18432, 3072), "bf16", {}, "h128x200s4g1txT"),      # 4% padding: 672 against 616 for h128x192s4t3
    ((1043, 24576, 10240), "bf16", {}, "h128x176s4g1tskxT"),   # 684 against 575 for h128x256s4t2sk
    ((1093, 11008, 11008), "e4m3", {}, "h128x184s4g1k4txT"),   # 1270 against 1140 for h128x192s4k4t
    ((1505, 6144, 6144), "bf16", {}, "h128x192s4t3"),        # 2.1% padding: unswapped (677 against 652)
    ((1333, 18432, 10240), "e4m3", {}, "h128x192s4k4t"),     # fp8 swapped at most 184 wide: 1232 against 1179
    # under 1024 the slowdown holds, but not for the tiles rule 9 rasters from 136 columns (s37 log sections 2, 6;
    # s38 section 7)
    ((602, 1536, 7168), "bf16", {}, "h128x64s8t"),           # 445 against 366 for h128x104s6g1txT
    ((296, 9216, 10240), "bf16", {}, "h128x152s4g1tskxT"),    # 566 against 491 for h128x224s4t2 (H200)
    ((816, 11008, 5120), "bf16", {}, "h128x136s4g1txT"),      # 662 against 615 for h128x208s4g1t2skxT (H200)
    ((402, 6144, 24576), "e4m3", {}, "h128x136s4g1k4tskxT"),  # 1097 against 994 for h128x192s4k4t (H200)
    # rule 9's 4 stages from 136 columns, rastered and not split (s38 sections 5-6)
    ((1201, 28672, 28672), "bf16", {}, "h128x152s4g1tskxT"),  # 686 against 602 with 5 stages (H200)
    ((131, 11008, 7168), "bf16", {}, "h128x136s5txT"),        # one tile column: 5 (391 against 380)
    ((2112, 1536, 8192), "bf16", {}, "h128x192s4g1t2xT"),     # 673 against 667 for h192x128s4Ct (H200)
    ((607, 12288, 28672), "bf16", {}, "h128x152s4g1tskxT"),   # 672 against 644 for h128x208s4g1t2skxT (H200)
    ((150, 4096, 2048), "bf16", {}, "h128x64s8t"),           # 32 swapped tiles, under SMs / 4
    # 256-row swapped tiles of 112-144 columns, rated at the 128-row width of as many bytes per flop (s37 §7-10)
    ((428, 11008, 13824), "bf16", {}, "h256x144s4g1t3xT"),    # 663 against 598 for h128x216s4g1tskxT
    ((274, 16384, 16384), "f16", {}, "h256x144s4g1t3xT"),     # 596 against 532 for h128x144s5g1txT
    ((352, 10240, 8192), "bf16", {}, "h256x120s4g1t3xT"),     # 594 against 545 for h128x176s4g1tskxT
    ((1091, 8192, 8192), "f16", {}, "h128x184s4g1txT"),       # from 1024 none: 697 against 667 for 256 x 144
    # rule 1: M <= 64 swaps A and B (M rounded up to 16 / 32, past 32 to a multiple of 8, as the wgmma's N);
    # split-K below
    # a third of the SMs' tiles (32 tiles of N = 4096 on 132 SMs), data-parallel from there (44 of 132)
    ((16, 4096, 4096), "bf16", {}, "h128x16s8zx"),          # split-K (s30 log section 6)
    ((1, 4096, 4096), "f16", {}, "h128x16s8zx"),
    ((20, 14336, 4096), "bf16", {}, "h128x32s8x"),
    ((64, 57344, 8192), "bf16", {}, "h128x64s8x"),
    ((16, 5504, 4096), "bf16", {}, "h128x16s8zx"),          # 43 tiles
    ((16, 5632, 4096), "bf16", {}, "h128x16s8x"),           # 44 tiles
    ((16, 4096, 4096), "e4m3", {}, "h128x16s8k4zx"),
    ((16, 4096, 14336), "e4m3", {}, "h128x16s8k4zx"),
    ((16, 4096, 4096), "bf16", dict(bias=True), "h128x16s8ska1xb"),   # a bias: stream-K on every SM
    ((64, 28672, 4096), "e4m3", {}, "h128x64s8k4x"),
    ((34, 8192, 8192), "bf16", {}, "h128x40s8x"),            # 121 TFLOP/s against 113 at BN 64 (s42 section 2)
    ((33, 6144, 18432), "bf16", {}, "h128x40s8x"),           # 116 against 100
    ((44, 3072, 7168), "bf16", {}, "h128x48s8zx"),
    ((54, 2112, 57344), "f16", {}, "h128x56s8zx"),
    ((57, 57344, 4096), "bf16", {}, "h128x64s8x"),
    ((42, 9216, 3584), "e4m3", {}, "h128x48s8k4x"),          # 202 against 182 at BN 64
    ((34, 8192, 8192), "bf16", dict(a_major="MN"), "h128x64s8mknx"),   # an MN-major A: the kernel's B, 64 wide
    # fp8 128 x 224 where its tiles use >= 90% of their waves' SMs, 5 points more than the pick's (s41 sections 6-7)
    ((987, 7168, 6144), "e4m3", {}, "h128x224s3k4t"),        # 1154 against 1114 for h128x160s4k4t
    ((1235, 2560, 3584), "e4m3", {}, "h128x224s3k4t"),       # 973 against 817 for h128x128s4k4t
    ((2587, 1280, 11008), "e4m3", {}, "h128x112s4k4t"),      # 128 x 112 uses its two waves as well (95%)
    ((256, 14336, 4096), "e4m3", {}, "h128x112s6k4t"),       # two row tiles: not (876 against 940, s19)
    ((987, 7168, 6144), "e4m3", dict(out_dtype="f16", bias=True), "h128x224s3k4tb_f16"),
    # just past one wave (<= 1.15 waves of 128-row tiles, K-major, no bias): one wave of 256-row tiles (s41 §10)
    ((31, 18432, 14336), "e4m3", {}, "h256x32s6k4x"),        # 144 tiles
    ((37, 18432, 4096), "bf16", {}, "h256x40s6x"),           # at BN 64 128 TFLOP/s against 113 data-parallel
    ((50, 18432, 4096), "bf16", {}, "h256x56s5x"),           # as deep as shared memory holds
    ((16, 19328, 4096), "bf16", {}, "h256x16s6x"),           # 151 tiles
    ((16, 19456, 4096), "bf16", {}, "h128x16s8skax"),        # 152 tiles: stream-K below (9.7 k-tiles per SM)
    # past one wave with under 80% of the waves' SMs in use, >= 48 k-tiles and >= 7 of the last wave's k-tiles per
    # SM: the last wave shared by stream-K on every SM
    ((24, 24576, 28672), "e4m3", {}, "h128x32s8k4skax"),     # 192 tiles (73%)
    ((21, 24576, 3072), "bf16", {}, "h128x32s8skax"),        # 48 k-tiles, 21.8 of them per SM
    ((30, 24576, 2048), "e4m3", {}, "h128x32s8k4x"),         # 16 k-tiles: data-parallel
    ((22, 28672, 14336), "e4m3", {}, "h128x32s8k4x"),        # 224 tiles: 85% of two waves
    ((24, 24576, 28672), "bf16", dict(bias=True), "h128x32s8skaxb"),
    ((31, 18432, 14336), "bf16", dict(bias=True), "h128x32s8skaxb"),   # a bias: no 256-row tile; 20.4 per SM
    ((37, 18432, 4096), "bf16", dict(bias=True), "h128x40s8xb"),       # 5.8 k-tiles per SM: data-parallel
    ((16, 4096, 4096), "bf16", dict(a_major="MN"), "h128x64s8ska5mknx"),   # an MN-major A: the kernel's B, 64 wide
    ((16, 4096, 4096), "bf16", dict(b_major="MN"), "h128x16s8ska1mnkx"),
    # rule 6: MN-major operands in clusters of 1; the bias is a flag of the config
    ((4096, 4096, 16384), "bf16", dict(b_major="MN"), "h128x256s4t2skmkn"),
    ((4096, 4096, 4096), "bf16", dict(bias=True), "h128x256s4t2o1b"),
    ((4096, 4096, 4096), "e4m3", dict(out_dtype="f16"), "h128x176s4k4t_f16"),
    # rule 7: mid M padded by 128-row tiles: swapped, M split into tiles of any multiple of 8, C stored by TMA as
    # its transpose (measured faster: s17 log section 3)
    ((448, 11008, 4096), "bf16", {}, "h128x152s4g1txT"),
    ((192, 14336, 14336), "bf16", {}, "h128x192s5t2xT"),
    ((288, 28672, 8192), "bf16", {}, "h128x144s4g1tskxT"),
    ((320, 57344, 14336), "e4m3", {}, "h128x160s4g1k4tskxT"),
    ((192, 7168, 4096), "e4m3", {}, "h128x96s6g1k4txT"),
    ((384, 14336, 8192), "bf16", {}, "h128x176s4t"),          # no padding: unswapped
    ((464, 49152, 5120), "bf16", {}, "h128x160s4g1tskxT"),    # rule 9's 160 columns: 590 against 607 (s37 section 6)
    ((448, 11008, 4096), "bf16", dict(b_major="MN"), "h128x152s4g1tmnkxT"),  # a row-major B: the kernel's MN-major A
    ((448, 11008, 4096), "bf16", dict(a_major="MN"), "h128x176s4tmnk"),    # an MN-major A: unswapped
    # rule 3c: one row of 128 x 64 tiles at most half the SMs, K >= 8192: split into k-slices (before rule 7)
    ((101, 1024, 24576), "bf16", {}, "h128x64s8tez"),        # 16 tiles, 8 slices
    ((101, 1024, 24576), "e4m3", {}, "h128x64s8k4tz"),       # fp8: stages released per CTA
    ((75, 2560, 18432), "bf16", {}, "h128x40s6g1tzxT"),      # 16-bit under 88 rows: rule 7's swapped split, 6 slices
                                                              # of one 80-wide tile -> 3 of two 40-wide (s42)
    ((72, 1024, 20480), "bf16", {}, "h128x64s8tez"),         # ... but 8 slices: the narrow split
    ((75, 2560, 18432), "e4m3", {}, "h128x40s6g1k4tzxT"),    # 3 slices: rule 3c yields (77x3584x11008 230 -> 384)
    ((128, 4096, 16384), "bf16", {}, "h128x64s8tez"),        # 64 tiles, 2 slices: no swapped pick after 3c
    ((123, 4096, 24576), "bf16", {}, "h128x64s8tez"),        # (386 against 308 for h128x64s8t, s42 section 9)
    ((102, 3072, 57344), "bf16", {}, "h128x104s6tzxT"),      # 2 slices: the swapped split, 337 against 232
    ((109, 3072, 12288), "e4m3", {}, "h128x112s6k4tzxT"),    # 407 against 363
    ((128, 8192, 16384), "bf16", {}, "h128x64s8t"),          # 128 tiles: data-parallel
    ((101, 1024, 4096), "e4m3", {}, "h128x64s8k4t"),         # K under 8192
    ((96, 5120, 24576), "bf16", {}, "h128x96s6tzxT"),        # 80 tiles: rule 7's swapped split
    ((101, 1024, 24576), "bf16", dict(bias=True), "h128x64s8tb"),   # a bias: no split-K form
])
def test_heuristic_choices(shape, dtype, extra, name):
    """The rules' picks; where rule 10's deep one-wave tile takes the problem, the pick it replaced (the rule's own
    picks: ``test_deep_one_wave_picks``)."""
    pick = choose_config(*shape, dtype, 132, **extra)
    shallow = choice_without_narrow_split(*shape, dtype, sm_count=132, deep=False, **extra)
    if pick != shallow and pick == choice_without_narrow_split(*shape, dtype, sm_count=132, **extra):
        assert pick.stages == DEEP_STAGES and pick.epilogue == "direct", pick.name
        pick = shallow
    assert pick.name == name


def test_fp8_wide_fill_over_a_grid():
    """fp8's 128 x 224 (``FP8_WIDE_FILL``) is picked only where its tiles use >= 90% of their waves' SMs, 5 points
    more than the data-parallel 128-row pick it replaced, over >= 4 row tiles (two SM counts, M 256-12000, N
    1024-28672, K 1024-16384); every pick validates."""
    from ptxgen.kernels.gemm import heuristic

    replaced = 0
    for sms in (132, 114):
        for m, n, k in itertools.product((256, 500, 987, 1235, 2587, 4106, 12000),
                                         (1024, 2560, 6144, 7168, 14336, 28672), (1024, 4096, 16384)):
            pick = choose_config(m, n, k, "e4m3", sms).validate()
            old = choice_without_narrow_split(m, n, k, "e4m3", sm_count=sms, wave_fills=False)   # what it replaces
            if pick == old or old.swap_ab:   # (a swapped one: test_swapped_one_wave_over_a_grid)
                continue
            replaced += 1
            assert pick.name == "h128x224s3k4t", (m, n, k, sms, pick.name)
            assert old.bm == 128 and not (old.streamk or old.splitk or old.swap_ab) and -(-m // 128) >= 4, old.name
            wide = heuristic.wave_use(-(-m // 128) * -(-n // 224), sms)
            assert wide >= 0.9 and wide >= heuristic.wave_use(-(-m // 128) * -(-n // old.bn), sms) + 0.05
    assert replaced >= 10     # the grid holds such problems


def test_swapped_one_wave_over_a_grid():
    """Rule 7's one-wave tile replaces exactly the mid-M swapped stream-K picks of one to two waves of tiles, by the
    widest swapped width whose data-parallel tiles fill one wave to >= 85% (two SM counts, both dtypes)."""
    from ptxgen.kernels.gemm import heuristic

    replaced = 0
    for dtype, sms in itertools.product(("bf16", "e4m3"), (132, 114)):
        for m, n, k in itertools.product((200, 580, 655, 775, 925, 1070, 1205), (2560, 3072, 4096, 5120, 8192),
                                         (8192, 57344)):
            pick = choose_config(m, n, k, dtype, sms).validate()
            old = choice_without_narrow_split(m, n, k, dtype, sm_count=sms, wave_fills=False)
            if pick == old or not old.swap_ab:
                continue
            replaced += 1
            rows = -(-n // 128)
            assert old.streamk and old.c_major == "M" and sms < rows * -(-m // old.bn) < 2 * sms, old.name
            fills = [bn for bn in heuristic.swapped_mid_widths(m, dtype) if bn != old.bn and
                     0.85 * sms <= rows * -(-m // bn) <= sms and heuristic.swapped_mid_tile(bn, dtype) is not None]
            assert pick.swap_ab and not (pick.streamk or pick.splitk) and pick.bn == max(fills), (m, n, k, pick.name)
    assert replaced >= 10     # the grid holds such problems


def test_decode_past_one_wave_over_a_grid():
    """Rule 1 past a third of the SMs: a decode pick (M <= 64, swapped) takes one wave of 256-row tiles exactly where
    its 128-row tiles outnumber the SMs by at most ``SWAP_TALL_DECODE_MAX_WAVES`` (no bias); else it shares its last
    wave by stream-K on every SM exactly where its 128-row tiles outnumber the SMs, use under
    ``SWAP_STREAMK_MAX_WAVE_USE`` of their waves' SMs, K holds ``SWAP_STREAMK_MIN_KTILES`` k-tiles and each SM
    takes ``SWAP_STREAMK_MIN_SHARED_KTILES`` of the last wave's; otherwise 128-row data-parallel (two SM counts, both
    element widths, a bias or not)."""
    from ptxgen.kernels.gemm.heuristic import (SWAP_STREAMK_MAX_WAVE_USE, SWAP_STREAMK_MIN_KTILES,
                                               SWAP_STREAMK_MIN_SHARED_KTILES, SWAP_TALL_DECODE_MAX_WAVES, wave_use)

    shared = tall = 0
    for dtype, sms, bias in itertools.product(("bf16", "e4m3"), (132, 114), (False, True)):
        bias = bias and dtype == "bf16"
        for m, n, k in itertools.product((1, 16, 31, 33, 64), (6144, 16384, 18432, 19328, 24576, 28672, 57344),
                                         (1024, 2048, 3072, 6144, 16384)):
            pick = choose_config(m, n, k, dtype, sms, bias=bias).validate()
            tiles = -(-n // 128)
            assert pick.swap_ab and not pick.splitk, (m, n, k, dtype, sms, pick.name)
            want_tall = sms < tiles <= SWAP_TALL_DECODE_MAX_WAVES * sms and not bias
            assert (pick.bm == 256) == want_tall, (m, n, k, dtype, sms, pick.name)
            if want_tall:
                assert not pick.streamk
                tall += 1
                continue
            ktiles = -(-k // pick.k_tile)
            want = tiles > sms and wave_use(tiles, sms) < SWAP_STREAMK_MAX_WAVE_USE and \
                ktiles >= SWAP_STREAMK_MIN_KTILES and tiles % sms * ktiles / sms >= SWAP_STREAMK_MIN_SHARED_KTILES
            assert (pick.streamk, pick.streamk_every_sm) == (want, want), (m, n, k, dtype, sms, pick.name)
            if want:
                assert pick.streamk_min_saving == STREAMK_MIN_SAVING
                shared += 1
    assert shared >= 30 and tall >= 30     # the grid holds such problems


@pytest.mark.parametrize("shape, dtype, name, replaced", [
    # rule 10 (s40 log sections 5-6, H200 TFLOP/s against the pick it replaced)
    ((1124, 1024, 16384), "bf16", "h64x144s8Cg1x", "h128x256s4t2ez"),     # 605 against 473
    ((1053, 1024, 8192), "bf16", "h64x144s8Cg1x", "h128x96s5t"),          # 551 against 399
    ((361, 3584, 16384), "bf16", "h128x88s8", "h128x256s4t2ez"),          # 548 against 505: unswapped
    ((1002, 1280, 28672), "bf16", "h64x160s8C", "h128x256s4t2ez"),        # 624 against 565
    ((659, 1024, 16384), "bf16", "h64x96s8C", "h128x256s4t2ez"),          # 470 against 403: less work per CTA
    ((409, 2560, 18432), "e4m3", "h64x144s8Cg1k4x", "h128x192s4k4tez"),   # 902 against 753
    ((792, 1536, 13824), "e4m3", "h128x72s8g1k4x", "h128x128s4k4t"),      # 1060 against 781
    ((741, 1024, 13824), "e4m3", "h64x96s8Cg1k4x", "h128x64s8k4t"),       # 711 against 652
    # not taken: a swapped split-K pick, the same swapped tile, 64 x 96 with as much work as the split's CTAs
    ((348, 2048, 14336), "e4m3", "h128x176s4g1k4tzxT", None),             # 786 against 758 for h64x96s8Ck4x
    ((324, 4096, 8192), "e4m3", "h128x88s6g1k4txT", None),                # 762 against 699 for h128x88s8k4x
    ((342, 2112, 16384), "bf16", "h128x192s4t3ez", None),                 # 457 against 421 for h64x96s8Cx
    ((779, 1280, 36864), "bf16", "h64x128s8C", "h128x256s4t2ez"),         # 16-bit any K: 605 against 464
    ((343, 2112, 7168), "bf16", "h64x96s8Cg1x", "h128x88s6g1txT"),        # from K = 2048: 451 against 286
    ((763, 1280, 57344), "e4m3", "h128x192s4k4tez", None),                # fp8 K over 32768: 1106 against 979
    ((1124, 1024, 1536), "bf16", "h128x96s5t", None),                     # K under 2048
])
def test_deep_one_wave_picks(shape, dtype, name, replaced):
    """Rule 10: where one wave of 128 x 64-96 or 64 x 96-160 tiles fills >= 85% of the SMs, that tile with 8 stages
    and the direct epilogue — the smallest per CTA, then the 64-row one, then swapped — replaces the pick (given as
    ``replaced``), rastered by rule 9 where swapped."""
    pick = choose_config(*shape, dtype, 132)
    assert pick.name == name
    shallow = choice_without_narrow_split(*shape, dtype, sm_count=132, deep=False)
    assert shallow.name == (replaced or name)
    if replaced:
        rows, columns = (shape[1], shape[0]) if pick.swap_ab else shape[:2]
        tiles = -(-rows // pick.bm) * -(-columns // pick.bn)
        assert 0.85 * 132 <= tiles <= 132 and pick.stages == DEEP_STAGES and pick.epilogue == "direct"


def test_deep_one_wave_picks_keep_the_rule_over_a_grid():
    """Wherever rule 10 replaces a pick (two SM counts, both element widths, M 200-2600, N 1024-6144, K 1024-65536):
    the replacement is one wave filling >= 85% of the SMs with 8 stages and the direct epilogue, inside the rule's
    bounds, and what it replaced is no swapped split-K tile; every pick validates."""
    from ptxgen.kernels.gemm.heuristic import DEEP_MAX_K, DEEP_MIN_FILL, DEEP_MIN_K, DEEP_MIN_M

    replaced = 0
    for dtype, sms in itertools.product(("bf16", "e4m3"), (132, 114)):
        for m, n, k in itertools.product((200, 256, 390, 640, 1000, 1124, 1500, 2600), (1024, 1536, 2112, 3072, 6144),
                                         (1024, 2048, 8192, 16384, 40960, 65536)):
            pick = choose_config(m, n, k, dtype, sms).validate()
            shallow = choice_without_narrow_split(m, n, k, dtype, sm_count=sms, deep=False)
            if pick == shallow:
                continue
            replaced += 1
            rows, columns = (n, m) if pick.swap_ab else (m, n)
            tiles = -(-rows // pick.bm) * -(-columns // pick.bn)
            assert DEEP_MIN_FILL * sms <= tiles <= sms, (m, n, k, dtype, sms, pick.name)
            assert (pick.stages, pick.epilogue, pick.splitk, pick.streamk) == (DEEP_STAGES, "direct", False, False)
            most = DEEP_MAX_K[8 if dtype == "e4m3" else 16]
            assert m >= DEEP_MIN_M and k >= DEEP_MIN_K and (most is None or k <= most), (m, n, k, dtype)
            assert not (shallow.swap_ab and shallow.splitk), (m, n, k, dtype, shallow.name)
    assert replaced >= 20     # the grid holds such problems


def test_deep_one_wave_holds_only_for_its_class():
    """No deep tile for MN-major operands, M under 256, a bias-free rule's bounds aside: a bias is carried."""
    assert deep_one_wave(choose_config(1124, 1024, 16384, "bf16", 132, b_major="MN"), 1124, 1024, 16384,
                         b_major="MN") is None
    assert deep_one_wave(GemmConfig(bn=64, stages=8, epilogue="tma"), 200, 8192, 16384) is None
    pick = choose_config(1124, 1024, 16384, "bf16", 132, bias=True)
    assert pick.bias and pick.stages == DEEP_STAGES, pick.name


def test_heuristic_is_deterministic_and_valid_everywhere():
    for dtype, m, n, k, sms in itertools.product(("bf16", "f16", "e4m3", "e5m2"), (1, 7, 64, 100, 300, 4096),
                                                 (1, 7, 64, 300, 4096), (1, 64, 1000, 8192), (1, 4, 114, 132)):
        config = choose_config(m, n, k, dtype, sms)
        assert config == choose_config(m, n, k, dtype, sms)
        config.validate()
        assert config.epilogue != "tma" or n * 2 % 16 == 0


def test_pipeline_depth_follows_the_row_tiles():
    """Rule 5: a tile's deep pipeline stands while M spans fewer than 8 tiles; from 8 on, 4 stages (16-bit 128 x 96:
    5); never deeper than the tile's own, and the 128 x 64 tile keeps its 8."""
    from ptxgen.kernels.gemm.heuristic import pipeline_stages

    deep = GemmConfig(bn=128, stages=6, epilogue="tma")
    assert pipeline_stages(deep, 512, 4096) == 6
    assert pipeline_stages(deep, 896, 57344) == 6           # 7 row tiles, however many columns
    assert pipeline_stages(deep, 897, 4096) == 4            # 8 row tiles
    assert pipeline_stages(deep, 8192, 7680) == 4
    assert pipeline_stages(GemmConfig(bn=96, stages=7, epilogue="tma"), 8192, 7680) == 5
    assert pipeline_stages(GemmConfig("e4m3", bn=112, stages=6, promote=4), 8192, 7680) == 4
    assert pipeline_stages(GemmConfig(bn=64, stages=8, epilogue="tma"), 8192, 7680) == 8
    assert pipeline_stages(GemmConfig(bn=256, stages=3), 8192, 7680) == 3


def test_wave_filling_tiles_short_of_a_full_last_wave():
    """A wave-filling width whose last wave holds under 3/4 of the SMs is left out below two waves or with at most 3
    row tiles; in a problem of more the cost model alone weighs it."""
    from ptxgen.kernels.gemm.heuristic import _wave_fill_refused

    tile = GemmConfig(bn=144, stages=4, epilogue="tma")
    assert _wave_fill_refused(tile, 384, 4096, 132)            # 87 tiles: 0.66 of the SMs
    assert not _wave_fill_refused(tile, 384, 6144, 132)        # 129 tiles: 0.98
    assert not _wave_fill_refused(tile, 1536, 8960, 132)       # 756 tiles, 12 row tiles: last wave 0.73
    assert _wave_fill_refused(tile, 384, 28672, 132)           # 600 tiles but 3 row tiles: last wave 0.55
    assert choose_config(1536, 8960, 1536, "bf16").name == "h128x176s4t"
    assert choose_config(256, 28672, 4096, "bf16").name == "h128x224s4t2"   # 593 against 539 for h128x256s4t2o1


def test_streamk_host_rule_is_the_kernels():
    """The host's stream-K test is the kernel's ``streamk_split``: 8192³ on 132 CTAs saves 62 k-tiles (the kernel's
    rule then takes stream-K), 4096³ 7 (it does not)."""
    sk = GemmConfig(epilogue="tma", epilogue_split=2, streamk=True)
    assert streamk_ktiles_saved(8192, 8192, 8192, sk, 132) == 62
    assert streamk_ktiles_saved(4096, 4096, 4096, sk, 132) == 7
    assert streamk_ktiles_saved(4096, 4096, 4096, sk, 128) == 0         # whole waves
    assert estimated_cost(GemmConfig(), 4096, 4096, 4096, 132) == 256
    assert STREAMK_MIN_SAVING == 20


@pytest.mark.parametrize("dtype, shape, name", [
    ("bf16", (384, 14336, 8192), "h128x176s4t"),       # 3 row tiles: stream-K's 128 x 256 costs 1.08x its k-tiles
    ("bf16", (512, 12288, 14336), "h128x192s4t3"),     # 4 row tiles
    # 6 row tiles: stream-K's shared k-tiles dearer (STREAMK_SHARED_SLOWDOWN), 128 x 224 data-parallel wins the
    # model: 654 against 645 TFLOP/s (s20 section 3)
    ("bf16", (768, 14336, 8192), "h128x224s4t2"),
    ("e4m3", (384, 14336, 8192), "h128x176s4k4t"),     # fp8: unchanged
    ("bf16", (1536, 8192, 28672), "h128x256s4c2t2sk"),  # stream-K in clusters of 2 (B by multicast): 733 against 719
    ("bf16", (256, 28672, 14336), "h128x224s4t2"),     # 636 against 620 for h128x256s4c2t2sk (s20 section 3)
    ("bf16", (256, 57344, 8192), "h128x224s4t2"),
    ("bf16", (128, 57344, 14336), "h128x224s4t2"),     # 381 against 366 for h128x256s4t2sk (s20 section 4)
    # where 128 x 224 fills the waves it runs data-parallel instead (s19 sections 1 and 5, TFLOP/s against the pick
    # before it): 480x14336x5120 651 / 605 (128 x 160), 256x28672x8192 615 / 587 and 256x28672x5120 582 / 539
    # (128 x 256 stream-K in pairs), 256x14336x14336 623 / 568 (128 x 128 stream-K in pairs), 128x28672x8192 363 / 358
    ("bf16", (480, 14336, 5120), "h128x240s4g1t2skxT"),   # since s37 rastered swapped tiles: 610 against 615
    ("bf16", (256, 28672, 8192), "h128x224s4t2"),
    ("bf16", (256, 14336, 14336), "h128x224s4t2"),
    ("bf16", (128, 28672, 8192), "h128x224s4t2"),
    # fp8 takes stream-K by the same test, its 128 x 192 TMA-store tile in clusters of 1 from 8 row tiles (s33 log
    # sections 6-7)
    ("e4m3", (4695, 3072, 24576), "h128x192s4k4tsk"),  # 1260 against 1170 for h128x192s4k4t
    ("e4m3", (3249, 2048, 24576), "h128x192s4k4tsk"),  # K >= 2 max(M, N), yet no pair: 1181 against 1168 in pairs
    ("e4m3", (7516, 1024, 11008), "h128x176s4k4t"),    # not 128 x 128's stream-K: 1073 against 1057
    ("e4m3", (1000, 28672, 24576), "h128x192s4k4tsk"),  # 8 row tiles
    ("e4m3", (896, 28672, 24576), "h128x192s4k4t"),     # 7: data-parallel (stream-K unmeasured there)
])
def test_streamk_at_few_row_tiles(dtype, shape, name):
    """16-bit stream-K costs 1.08x its k-tiles at 3-4 row tiles, its shared last-wave k-tiles 1.3x (1.14x in pairs),
    and it takes clusters of 2 at exactly 2 row tiles or K >= 2 max(M, N)."""
    assert choose_config(*shape, dtype).name == name


def test_bad_heuristic_arguments():
    with pytest.raises(ValueError, match="choose_config: dtype must be one of bf16, f16, e4m3, e5m2, not 'f32'"):
        choose_config(1, 1, 1, "f32")
    with pytest.raises(ValueError, match="choose_config: m, n, k must be >= 0"):
        choose_config(-1, 1, 1)


# -- the IR: byte-identical to the text forms and to the prints recorded before the library ---------------------------

def test_tile_file_config_prints_the_tile_text():
    text = parse_module((EXAMPLES / "gemm_hopper.tile").read_text(), file="examples/gemm_hopper.tile")
    verify(text)
    assert print_module(build(TILE_FILE)) == print_module(text)
    simple = parse_module((EXAMPLES / "gemm.tile").read_text(), file="examples/gemm.tile")
    assert print_module(build_simple(SimpleGemmConfig())) == print_module(simple)


# sha256 of print_module of examples/gemm_hopper.py's build(**fields) before the library (2026-11-26, commit dcbe090):
# build(config) must keep printing exactly this IR. One deliberate change since: stream-K clamps a cluster's
# data-parallel tiles left at 0 before its cdiv (cdiv is defined for dividends >= 0), so the sk entry is re-recorded.
# Issue 18 re-recorded every entry: the epilogue's TV layouts are now named by their partition functions
# (tv = wgmma_acc(m = 64, n = 256), copy(threads = (2, 64), ...)) instead of written out; the same element maps.
# Issue 17 (s12) re-recorded e5m2-h128x192s4t: promote = 1's k-tile chunk is %ktile_chunk (was %whole, the name of
# stream-K's joined tile sum, which fp8 now takes too); nothing else differs. Issue 17 (s16) re-recorded the sk entry:
# the workspace's partial sums are stored and loaded {unchecked = true}; nothing else differs. Issue 17 (s35)
# re-recorded every entry: data-parallel and split-K tiles move a last tile row / column back to end at M / N
# (schedule.tile_origin: the edges from %m, %n and their arith.min), C's first row is added after both origins,
# and fp8's promotion offset is its row block's parity (schedule.promotion_stagger).
RECORDED = {
    "bf16-h128x256s4": "4187fb3c854cf44bb65c3d26bf28a8c84c181c117f7ff71789f5baaeff152749",
    "f16-h128x256s4t2o1": "f41dec670b24946ef43e5851702494fb1683d460826af912700c6fdc8172be72",
    "bf16-h128x256s4c2t2sk": "a9a110cce20a54cf0f7efa00fc8e5f466c3c9b539b7b8ad8ac0746c45cdc02b3",
    "e4m3-h128x192s4k4t": "34bfd474f1fba1c705f710f17b65a8f1d96cb097e21be022174d4f4a4e025e89",
    "e4m3-h128x128s4c2k4r": "014cffa3d309ea468a0eabfbc0ff3de4c5e2dc761b48199358797039e9725fb8",
    "e5m2-h128x192s4t": "e3a525ca81bcbf92f0f067cecbb7ad15f5be18e4e3b30110671a5ca45d385835",
    "bf16-h128x192s4c2r3": "6af35d27b7c29e5534f424774563a9e20ceff802f0d3ea927212bff4af4dfc40",
    "bf16-h128x128s2mnn": "c8d19e361cd73c8dfa770d9c470c3b10905d20185edc63f734bd02239064c225",
}


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_builder_prints_the_recorded_ir(key):
    dtype, name = key.split("-")
    printed = print_module(build(GemmConfig.from_name(name, dtype)))
    assert hashlib.sha256(printed.encode()).hexdigest() == RECORDED[key]


def test_swap_ab_and_bias_free_configs_share_the_kernel():
    """swap_ab changes the arguments, not the kernel: both configs run one Module."""
    plain = GemmConfig(bn=16, stages=8, streamk=True, streamk_every_sm=True, streamk_min_saving=1)
    assert gemm_run.kernel_module(plain.replace(swap_ab=True)) is gemm_run.kernel_module(plain)
    assert "%bias" not in print_module(build(plain)) and "%bias" in print_module(build(plain.replace(bias=True)))


def test_a_new_shape_of_a_tma_config_needs_no_new_specialization():
    """Every tensor of a TMA-store configuration is a tensor map: the compiled kernel depends on the config alone
    (the launch grid is a host expression of %m, %n, %sms), so a new shape reuses it."""
    kern = gemm_run.jit_kernel(choose_config(4096, 4096, 4096, "bf16"))
    specs = set()
    for m, n, k in ((4096, 4096, 4096), (1000, 1032, 520), (129, 264, 72)):
        specs.add(kern.specialization(a=np.zeros((m, k), BF16), b=np.zeros((n, k), BF16), c=np.zeros((m, n), BF16),
                                      m=m, n=n, k=k, sms=132))
    assert len(specs) == 1


def test_simple_config_rules():
    with pytest.raises(ValueError, match="SimpleGemmConfig.bn = 12: BN is wgmma's N"):
        build_simple(SimpleGemmConfig(bn=12))
    with pytest.raises(ValueError, match="SimpleGemmConfig.dtype = 'e4m3': the simple GEMM is bf16 or f16"):
        build_simple(SimpleGemmConfig(dtype="e4m3"))


# the bias's code is one whatever the operands' majors: the CPU runs it with K-major operands
CPU_CONFIGS = [c for c in HEURISTIC_CONFIGS if not c.bias or (c.a_major, c.b_major) == ("K", "K")]


@pytest.mark.parametrize("config", CPU_CONFIGS, ids=lambda c: f"{c.dtype}-{c.name}")
def test_every_heuristic_config_keeps_wgmma_pipelined(config):
    """Each configuration the heuristic gives compiles, for the tensors the ops pass (C and the bias through their
    transposed, stride-0 views when swapped), with no wgmma serialized by ptxas (C7514)."""
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    mode = 0 if config.swap_ab else 1                     # the unit-stride mode of C (and of the bias view)
    specs = {}
    if config.epilogue != "tma":
        specs["c"] = TensorSpec(mode, True, 1 if config.epilogue == "rows" else 16)
    if config.bias:
        specs["bias"] = TensorSpec(mode, True, 16)
    if config.streamk:
        specs.update(work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
    compiled = compile_kernel(gemm_run.kernel_module(config).kernels[0], Specialization.of(**specs))
    assert "C7514" not in compiled.info_log


# -- the ops in the CPU interpreter ------------------------------------------------------------------------------------

def problem_for(config: GemmConfig, rng):
    """A ragged problem for ``config``: M within the swapped kernel's N tile (swap_ab), else several tiles; N odd
    where C's rows are not TMA-stored; K ragged."""
    n = 200 if config.epilogue == "tma" else 203
    # a decode kernel (rule 1): M within its N tile; a mid-M swapped kernel (C by TMA as its transpose): M over two
    # of its N tiles, the second ragged
    decode_m = {64: 45}.get(config.bn, config.bn - 3)
    m = (decode_m if config.c_major == "N" else config.bn + 13) if config.swap_ab else 150
    k = 328 if config.fp8 else 136
    return m, n, k


def run_op(config: GemmConfig, m: int, n: int, k: int, rng, sm_count=3):
    """Run the op that ``config`` serves on fresh operands lying as its majors say (a (K, M) A for an MN-major A,
    a row-major (K, N) B for an MN-major B; a swapped config's majors are the kernel's: its A is the problem's B) →
    (result, float64 reference)."""
    a_major, b_major = (config.b_major, config.a_major) if config.swap_ab else (config.a_major, config.b_major)
    if config.fp8:
        a = rand((m, k), config.dtype, rng, 2)
        w = rand((n, k), config.dtype, rng, 2)
        bias = rand(n, config.out_dtype, rng) if config.bias else None
        got = scaled_mm(a, w.T, 0.5, 0.25, config.out_dtype, bias=bias, config=config, sm_count=sm_count)
        want = a.astype(np.float64) @ w.astype(np.float64).T * 0.125
    else:
        a = rand((m, k), config.dtype, rng)
        a = a if a_major == "K" else np.asfortranarray(a)
        w = rand((n, k), config.dtype, rng)
        if config.bias:     # linear's weight (N, K): row-major, or column-major for an MN-major B
            bias = rand(n, config.dtype, rng)
            got = linear(a, w if b_major == "K" else np.asfortranarray(w), bias, config=config, sm_count=sm_count)
        else:
            bias = None
            got = matmul(a, w.T if b_major == "K" else np.ascontiguousarray(w.T), config=config, sm_count=sm_count)
        want = a.astype(np.float64) @ w.astype(np.float64).T
    if bias is not None:
        want = want + bias.astype(np.float64)
    return got, want


@pytest.mark.parametrize("config", CPU_CONFIGS, ids=lambda c: f"{c.dtype}-{c.name}")
def test_every_heuristic_config_matches_float64(config):
    """Each configuration the heuristic gives, forced on a small ragged problem (3 CTAs: several tiles per CTA)."""
    rng = np.random.default_rng()
    got, want = run_op(config, *problem_for(config, rng), rng)
    assert got.dtype == HOST[config.out_dtype]
    assert rel_err(got, want) < 1e-2


@pytest.mark.parametrize("config, shape, sms", [
    # stream-K on every SM actually taken: one or two tiles, their k-tiles shared over 4 CTAs
    (GemmConfig(bn=128, stages=6, epilogue="tma", streamk=True, streamk_every_sm=True, streamk_min_saving=0),
     (100, 200, 640), 4),
    (GemmConfig(bn=16, stages=8, streamk=True, streamk_every_sm=True, streamk_min_saving=1, swap_ab=True, bias=True),
     (13, 130, 1000), 5),
    (GemmConfig(bn=192, cluster=2, epilogue="rows", epilogue_split=3, streamk=True, streamk_min_saving=0),
     (300, 389, 520), 4),
])
def test_streamk_paths_taken(config, shape, sms):
    rng = np.random.default_rng()
    got, want = run_op(config, *shape, rng, sm_count=sms)
    assert rel_err(got, want) < 1e-2


@pytest.mark.parametrize("config, shape, moved", [
    (GemmConfig(bn=128, stages=6, epilogue="tma"), (300, 200, 128), True),
    (GemmConfig("e4m3", bn=112, stages=6, promote=4, epilogue="tma"), (131, 248, 256), True),
    (GemmConfig(bn=96, stages=6, epilogue="tma", splitk=True, overlap=0), (150, 200, 512), True),
    (GemmConfig(bn=128, stages=6, epilogue="tma", streamk=True, streamk_min_saving=0), (300, 200, 128), False),
])
def test_last_tiles_load_rows_of_the_tensor(monkeypatch, config, shape, moved):
    """Data-parallel and split-K tiles move a last tile row / column back to end at M / N (``schedule.tile_origin``),
    so no A or B box reaches as many rows past the tensor as the moved tile's alignment (TMA fills those slowly);
    stream-K keeps the tile grid (its boxes reach past); every result still matches float64."""
    from ptxgen.ir.ops import tma
    from ptxgen.kernels.gemm.schedule import edge_alignment

    starts = {"a": set(), "b": set()}
    check = tma._check_box_start

    def recording(ix, op, m, origin):
        if m.name in starts:
            starts[m.name].add(int(origin[0]))
        return check(ix, op, m, origin)

    monkeypatch.setattr(tma, "_check_box_start", recording)
    m, n, k = shape
    got, want = run_op(config, m, n, k, np.random.default_rng(), sm_count=3)
    assert rel_err(got, want) < 1e-2
    row_align, column_align = edge_alignment(config)
    within = max(starts["a"]) + config.bm - m < row_align and max(starts["b"]) + config.bn - n < column_align
    assert within == moved, (sorted(starts["a"]), sorted(starts["b"]))


@pytest.mark.parametrize("name, m", [("h128x128s4k4t", 150), ("h128x64s8k4t", 190), ("h256x112s3k4t", 300)])
def test_moved_fp8_tile_gives_shared_rows_their_own_bits(name, m):
    """An fp8 kernel's moved last tile row promotes each of C's row blocks at the offset the tile grid gives it
    (``schedule.promotion_stagger``): its rows equal bit for bit those of the same A rows in a problem of whole
    tiles, whichever of the two tiles computing a shared row stores last."""
    rng = np.random.default_rng()
    config = GemmConfig.from_name(name, "e4m3")
    n, k = 64, 1536
    whole = -(-m // config.bm) * config.bm
    # small products around a large one in k-tile 0 and its negative in k-tile 3: what of the small ones survives
    # in f32 depends on which of them share a promotion chunk with the large ones, so C's bits show the chunking
    a, w = rng.standard_normal((whole, k)) / 16, rng.standard_normal((n, k)) / 16
    a[:, 0], w[:, 0], a[:, 3 * 128], w[:, 3 * 128] = 448, 448, 448, -448
    a, w = a.astype(HOST["e4m3"]), w.astype(HOST["e4m3"])
    ragged = scaled_mm(a[:m], w.T, 1.0, 1.0, config=config, sm_count=3)
    padded = scaled_mm(a, w.T, 1.0, 1.0, config=config, sm_count=3)
    assert np.array_equal(ragged.view(np.uint16), padded[:m].view(np.uint16))


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (7, 9, 3), (64, 130, 20), (65, 300, 72), (200, 8, 64), (3, 257, 129)])
def test_ops_choose_and_match_float64(m, n, k):
    """The configuration the heuristic picks for odd shapes (2 SMs), through each op; linear on a 3-D x."""
    rng = np.random.default_rng()
    a, b, w = rand((m, k), "bf16", rng), rand((k, n), "f16", rng), rand((n, k), "bf16", rng)
    bias = rand(n, "bf16", rng)
    assert rel_err(matmul(a.astype(F16), b, sm_count=2), a.astype(np.float64) @ b.astype(np.float64)) < 1e-2
    y = linear(a.reshape(1, m, k), w, bias, sm_count=2)
    assert y.shape == (1, m, n)
    assert rel_err(y[0], a.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)) < 1e-2
    a8, w8 = rand((m, k), "e4m3", rng, 2), rand((n, k), "e4m3", rng, 2)
    got = scaled_mm(a8, w8.T, np.float32(0.5), np.array([0.25], np.float32), sm_count=2)
    want = a8.astype(np.float64) @ w8.astype(np.float64).T * 0.125
    assert got.dtype == BF16 and (rel_err(got, want) < 1e-2 or np.abs(want).max() == 0)


def test_out_and_degenerate_shapes():
    rng = np.random.default_rng()
    a, b = rand((70, 40), "bf16", rng), rand((40, 24), "bf16", rng)
    out = np.full((70, 24), -7.0, BF16)
    assert matmul(a, b, out=out, sm_count=2) is out
    assert rel_err(out, a.astype(np.float64) @ b.astype(np.float64)) < 1e-2
    assert matmul(np.zeros((0, 5), BF16), np.zeros((5, 3), BF16)).shape == (0, 3)
    bias = np.arange(3).astype(BF16)
    y = linear(np.zeros((2, 4, 0), BF16), np.zeros((3, 0), BF16), bias)      # K = 0: the bias alone
    assert y.shape == (2, 4, 3) and np.array_equal(y, np.broadcast_to(bias, (2, 4, 3)))


@pytest.mark.parametrize("call, error, message", [
    (lambda: matmul(np.zeros((4, 5), np.float32), np.zeros((5, 3), np.float32)), TypeError,
     r"matmul: a has dtype numpy float32; matmul takes bf16 \(torch.bfloat16, ml_dtypes.bfloat16\) or f16"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((5, 3), F16)), TypeError,
     "matmul: b has dtype numpy float16 but a has numpy bfloat16: both must have one dtype"),
    (lambda: matmul(np.zeros((), BF16), np.zeros((5, 3), BF16)), ValueError,
     r"matmul: a must have at least 1 dimension \(..., K\), not shape \(\)"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((2, 5, 3), BF16)), ValueError,
     r"matmul: b must be 2-D \(K, N\) or 1-D \(K,\) \(a batched b is not supported\), not of shape \(2, 5, 3\)"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((6, 3), BF16)), ValueError,
     r"matmul: b has 6 rows but a has 5 columns: a \(M, K\) @ b \(K, N\) needs b.shape\[0\] == K"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((5, 3), BF16), out=np.zeros((4, 4), BF16)), ValueError,
     r"matmul: out must have shape \(4, 3\), not \(4, 4\)"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((5, 3), BF16), out=np.zeros((4, 3), F16)), TypeError,
     "matmul: out has dtype numpy float16; the result is bf16"),
    (lambda: matmul([[1.0]], np.zeros((1, 1), BF16)), TypeError,
     "matmul: a must be a CUDA tensor .* or a numpy array, not list"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((5, 3), BF16), config="h128x256s4"), TypeError,
     "matmul: config must be a GemmConfig, not str"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((5, 3), BF16), config=GemmConfig("f16")), ValueError,
     r"matmul: config is a f16 → f16 GEMM \(h128x256s4\), the operands are bf16 → bf16"),
    (lambda: matmul(np.zeros((4, 5), BF16), np.zeros((5, 3), BF16), config=GemmConfig(epilogue="tma")), ValueError,
     "matmul: config h128x256s4t stores C by TMA, which needs C's rows 16-byte aligned"),
    (lambda: linear(np.zeros((4, 5), BF16), np.zeros((3, 6), BF16)), ValueError,
     r"linear: w has 6 columns but x has 5 \(its last dimension\)"),
    (lambda: linear(np.zeros((4, 5), BF16), np.zeros((3, 5), BF16), np.zeros(4, BF16)), ValueError,
     r"linear: bias must have shape \(3,\) \(w's rows\), not \(4,\)"),
    (lambda: linear(np.zeros((4, 5), BF16), np.zeros((3, 5), BF16), np.zeros(3, np.float32)), TypeError,
     "linear: bias has dtype numpy float32 but x has numpy bfloat16"),
    (lambda: linear(np.zeros((4, 5), BF16), np.zeros(5, BF16)), ValueError,
     r"linear: w must be 2-D \(N, K\), not of shape \(5,\)"),
    (lambda: scaled_mm(np.zeros((4, 32), BF16), np.zeros((32, 3), BF16), 1.0, 1.0), TypeError,
     r"scaled_mm: a has dtype numpy bfloat16; scaled_mm takes e4m3 .* or e5m2"),
    (lambda: scaled_mm(np.zeros((4, 32), E4M3), np.zeros((32, 3), E4M3), 1.0, 1.0), ValueError,
     r"scaled_mm: b must be column-major \(unit stride along K: the transpose of an \(N, K\) row-major tensor\)"),
    (lambda: scaled_mm(np.zeros((32, 4), E4M3).T, np.zeros((3, 32), E4M3).T, 1.0, 1.0), ValueError,
     r"scaled_mm: a must be row-major \(unit stride along K\)"),
    (lambda: scaled_mm(np.zeros((4, 32), E4M3), np.zeros((3, 32), E4M3).T, np.ones(2, np.float32), 1.0), ValueError,
     "scaled_mm: scale_a must be a number or a 1-element tensor .* not ndarray of 2 elements"),
    (lambda: scaled_mm(np.zeros((4, 32), E4M3), np.zeros((3, 32), E4M3).T, np.ones(1), 1.0), TypeError,
     "scaled_mm: scale_a must be float32"),
    (lambda: scaled_mm(np.zeros((4, 32), E4M3), np.zeros((3, 32), E4M3).T, 1.0, 1.0, "f32"), TypeError,
     r"scaled_mm: out_dtype must be bf16 or f16 \(torch.bfloat16, torch.float16\), not f32"),
    (lambda: scaled_mm(np.zeros((4, 32), E4M3), np.zeros((3, 32), E4M3).T, 1.0, 1.0, bias=np.zeros(3, F16)),
     TypeError, "scaled_mm: bias has dtype numpy float16; it must be out_dtype's, bf16"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- the ops on the GPU ------------------------------------------------------------------------------------------------


def torch_rel_err(torch, got, want):
    return (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()


GPU_SHAPES = [(4096, 4096, 4096), (8192, 8192, 1024), (3001, 2999, 2016), (1000, 1064, 1040), (129, 264, 72),
              (1, 4096, 4096), (16, 4096, 4096), (45, 14336, 4096), (64, 1024, 8192), (128, 4096, 4096),
              (512, 4096, 4096), (300, 520, 200), (7, 9, 3), (1000, 1000, 1001), (31, 18432, 6144)]


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", GPU_SHAPES)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_gpu_matmul_and_linear_match_float64(m, n, k, dtype):
    """matmul with a row-major B (MN-major path) and with a weight's transposed view (K-major), linear with a bias
    on a 3-D x: each against float64 (K not a multiple of 8 goes through padded copies)."""
    torch = torch_or_skip()
    kind = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    a = torch.randn(m, k, device="cuda", dtype=kind)
    w = torch.randn(n, k, device="cuda", dtype=kind)
    bias = torch.randn(n, device="cuda", dtype=kind)
    want = a.double() @ w.double().T
    for b in (w.T, w.T.contiguous()):
        c = matmul(a, b)
        torch.cuda.synchronize()
        assert c.dtype == kind and c.shape == (m, n)
        assert torch_rel_err(torch, c, want) < 1e-2, choose_config(m, n, k, dtype).name
    y = linear(a.reshape(1, m, k), w, bias)
    torch.cuda.synchronize()
    assert y.shape == (1, m, n)
    assert torch_rel_err(torch, y[0], want + bias.double()) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", GPU_SHAPES)
def test_gpu_scaled_mm_matches_float64(m, n, k):
    torch = torch_or_skip()
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    scale_a, scale_b = torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda")
    c = scaled_mm(a, w.T, scale_a, scale_b, out_dtype=torch.bfloat16, bias=bias)
    torch.cuda.synchronize()
    want = a.double() @ w.double().T * 0.125 + bias.double()
    assert c.dtype == torch.bfloat16 and torch_rel_err(torch, c, want) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("config", HEURISTIC_CONFIGS, ids=lambda c: f"{c.dtype}-{c.name}")
def test_gpu_every_heuristic_config_matches_float64(config):
    """Each configuration the heuristic gives, forced, on a ragged problem of several waves (or the swapped
    kernel's small M), with torch tensors lying as the config's majors say."""
    torch = torch_or_skip()
    decode_m = {64: 45}.get(config.bn, config.bn - 3)   # rule 1's M within its N tile
    m = (decode_m if config.c_major == "N" else 2 * config.bn + 17) if config.swap_ab else 1000
    n, k = (1064 if config.epilogue == "tma" else 1063), 2000
    a_major, b_major = (config.b_major, config.a_major) if config.swap_ab else (config.a_major, config.b_major)
    if config.fp8:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = scaled_mm(a, w.T, 0.5, 0.25, config=config)
        want = a.double() @ w.double().T * 0.125
    else:
        kind = {"bf16": torch.bfloat16, "f16": torch.float16}[config.dtype]
        a = torch.randn(m, k, device="cuda", dtype=kind)
        w = torch.randn(n, k, device="cuda", dtype=kind)
        a_in = a if a_major == "K" else a.T.contiguous().T
        b_in = w.T if b_major == "K" else w.T.contiguous()
        if config.bias:
            bias = torch.randn(n, device="cuda", dtype=kind)
            c = linear(a_in, w if b_major == "K" else w.T.contiguous().T, bias, config=config)
            want = a.double() @ w.double().T + bias.double()
        else:
            c = matmul(a_in, b_in, config=config)
            want = a.double() @ w.double().T
    torch.cuda.synchronize()
    assert torch_rel_err(torch, c, want) < 1e-2


@pytest.mark.gpu
def test_gpu_unaligned_operands_and_out():
    """Operands TMA cannot describe in place (an odd base offset, a row pitch of 2 bytes too many) and an out view
    whose rows TMA cannot store: copies and the rows epilogue, never a wrong answer; the out's neighbours untouched."""
    torch = torch_or_skip()
    m, n, k = 1000, 1024, 1032
    big = torch.randn(m * k + 1, device="cuda", dtype=torch.bfloat16)
    a = big[1:].view(m, k)                                  # base 2 bytes past an aligned address
    w = torch.randn(n, k + 1, device="cuda", dtype=torch.bfloat16)[:, :k]   # pitch (k + 1) · 2 bytes
    frame = torch.full((m, n + 3), -7.0, device="cuda", dtype=torch.bfloat16)
    out = frame[:, 1:n + 1]
    matmul(a, w.T, out=out)
    torch.cuda.synchronize()
    assert torch_rel_err(torch, out, a.double() @ w.double().T) < 1e-2
    assert bool((frame[:, 0] == -7).all()) and bool((frame[:, n + 1:] == -7).all())


@pytest.mark.gpu
def test_gpu_a_new_shape_compiles_nothing():
    """After one call of a configuration, calls of other shapes with it (forced) load no new kernel."""
    torch = torch_or_skip()
    config = choose_config(4096, 4096, 4096, "bf16")
    kern = gemm_run.jit_kernel(config)
    for m, n, k in ((4096, 4096, 4096), (1000, 1064, 1040), (129, 264, 72)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        matmul(a, w.T, config=config)
        if m == 4096:
            before = kern.specialization(a=a, b=w, c=torch.empty(m, n, device="cuda", dtype=torch.bfloat16), m=m,
                                         n=n, k=k, sms=132)
        else:
            assert kern.specialization(a=a, b=w, c=torch.empty(m, n, device="cuda", dtype=torch.bfloat16), m=m, n=n,
                                       k=k, sms=132) == before
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(16, 4096, 4096), (1000, 1064, 1040), (300, 520, 200)])
def test_gpu_repeated_calls_take_the_plan_and_stay_right(m, n, k):
    """A second call with fresh tensors of the first call's signature goes through the fast path (no checks,
    no choice): each op's results stay right, on the default stream and on another one."""
    torch = torch_or_skip()
    import ptxgen.kernels.linalg as linalg

    def fresh():
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        return a, w, torch.randn(n, device="cuda", dtype=torch.bfloat16)

    for stream in (torch.cuda.current_stream(), torch.cuda.Stream()):
        with torch.cuda.stream(stream):
            for call in range(3):
                a, w, bias = fresh()
                want = a.double() @ w.double().T
                c = matmul(a, w.T)
                y = linear(a.reshape(1, m, k), w, bias)
                a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
                c8 = scaled_mm(a8, w8.T, 0.5, 0.25)
                stream.synchronize()
                assert torch_rel_err(torch, c, want) < 1e-2, (call, stream)
                assert torch_rel_err(torch, y[0], want + bias.double()) < 1e-2, (call, stream)
                assert torch_rel_err(torch, c8, a8.double() @ w8.double().T * 0.125) < 1e-2, (call, stream)
    assert linalg._FAST       # the repeated calls took the fast path
