"""Split-K by k-slices that run together (``GemmConfig.splitk``, variant token ``z``): unit u = s·tiles + t takes
slice s of tile t, S = max(1, min(⌊%sms/tiles⌋, k-tiles)) slices computed in the kernel, the last slice's unit adding
the others' partial sums. In the CPU interpreter against float64 on a few CTAs where S = 1 (the persistent
data-parallel loop, with and without idle CTAs) and S ≥ 2 occur, ragged M, N, K, K shorter than the slices the SMs
would allow, bf16, e4m3 with per-tensor scales (promote 1 and 4) and block scales, swapped; the flags zero after
every launch; the names and rules; the PTX assembled by nvJitLink beside stream-K on every SM (``ska``); and the GPU
at the few-tiles, long-K shapes of issue 17."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels.gemm import GemmConfig, build, splitk_slices, streamk_buffers
from ptxgen.kernels.gemm.run import kernel_arguments, kernel_config
from gpu_torch import torch_or_skip

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
SCALE_A, SCALE_B = 0.5, 0.25


def run_splitk(config: GemmConfig, m: int, n: int, k: int, ctas: int, launches: int = 1, rng=None):
    """C (m, n) = A·Bᵀ (fp8: times SCALE_A·SCALE_B) of fresh random A (m, k), B (n, k) through ``config`` on ``ctas``
    CTAs (swapped as the ops run it), ``launches`` times on one workspace (NaN before the first launch, so that a
    partial sum read before it is written shows) and one set of flags → (the relative errors against float64, one
    per launch, fresh operands each; whether any partial sum was written; the flags after each launch)."""
    rng = rng or np.random.default_rng()
    kc = kernel_config(config)
    buffers = streamk_buffers(kc, ctas)
    work = np.full(buffers["work"], np.nan, np.float32)
    flags = np.zeros(buffers["flags"], np.int32)
    errors, flags_after = [], []
    for _launch in range(launches):
        dtype = E4M3 if config.fp8 else BF16
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((n, k)).astype(dtype)
        c = np.full((m, n), -7.0, BF16)
        args = kernel_arguments(config, a, b, c, None, m, n, k, lambda x: x.T, None)
        scales = {"scale_a": SCALE_A, "scale_b": SCALE_B} if config.fp8 else {}
        interpret(build(kc), {**args, **scales, "sms": ctas, "work": work, "flags": flags})
        want = a.astype(np.float64) @ b.astype(np.float64).T * ((SCALE_A * SCALE_B) if config.fp8 else 1.0)
        errors.append(float(np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want)))
        flags_after.append(flags.copy())
    return errors, bool((~np.isnan(work)).any()), flags_after


def kernel_problem(config: GemmConfig, m: int, n: int) -> tuple:
    return (n, m) if config.swap_ab else (m, n)


# (variant, dtype, (m, n, k), CTAs, the slices S the kernel makes)
CASES = [
    # 4 tiles (200 × 100 of 128 × 64: M and N ragged) of 8 k-tiles (K = 453 ragged): on 3 CTAs S = 1, the
    # persistent loop (CTA 0 takes tiles 0 and 3); on 5 S = 1 with an idle CTA; on 8, 13 S = 2, 3 (slices of 2-3
    # k-tiles, CTA 12 idle); on 40 ⌊40/4⌋ = 10 is capped at the 8 k-tiles: 8 slices of one k-tile
    ("h128x64s3z", "bf16", (200, 100, 453), 3, 1),
    ("h128x64s3z", "bf16", (200, 100, 453), 5, 1),
    ("h128x64s3tz", "bf16", (200, 100, 453), 8, 2),
    ("h128x64s3z", "bf16", (200, 100, 453), 13, 3),
    ("h128x64s3tz", "bf16", (200, 100, 453), 40, 8),
    ("h128x64s3tez", "bf16", (200, 100, 453), 13, 3),   # released once per consumer warpgroup (the heuristic's form)
    # K shorter than the slices the SMs allow: 2 tiles of 2 k-tiles on 9 CTAs → S = 2, 5 CTAs idle
    ("h128x128s2tz", "bf16", (130, 120, 100), 9, 2),
    # fp8 with per-tensor scales: 3 tiles of 11 k-tiles on 9 CTAs, slices [0, 3), [3, 7), [7, 11) — the later ones
    # start inside a promotion chunk of 4; the scales applied once, to the joined sum
    ("h128x128s3k4tz", "e4m3", (300, 128, 1300), 9, 3),
    ("h128x128s3tz", "e4m3", (300, 128, 1300), 9, 3),
    # 2 tiles (N = 100 ragged) of 9 k-tiles on 8 CTAs: 4 slices [0, 2), [2, 4), [4, 6), [6, 9)
    ("h128x64s4k4z", "e4m3", (37, 100, 1100), 8, 4),
    # the heuristic's fp8 split tile (128 x 192, released per warpgroup): 4 tiles (M = 200, N = 380 ragged) of 9
    # k-tiles on 9 CTAs, 2 slices [0, 4), [4, 9): the second starts a promotion chunk of its own at k-tile 4
    ("h128x192s3k4tez", "e4m3", (200, 380, 1100), 9, 2),
    # rule 3c's narrow split of one row of tiles (M = 101 ragged in its 128-row tile): 4 tiles (N = 200) on 13 CTAs,
    # 3 slices; fp8 [0, 3), [3, 6), [6, 9) of 9 k-tiles, each slice's promotion chunks its own
    ("h128x64s8tez", "bf16", (101, 200, 1100), 13, 3),
    ("h128x64s8k4tz", "e4m3", (101, 200, 1100), 13, 3),
    # swapped (the kernel's M is N = 300: 3 tiles, its N is M = 37): 4 slices of 3 k-tiles on 12 CTAs
    ("h128x64s4zx", "bf16", (37, 300, 700), 12, 4),
    # ... rule 1's fp8 decode form (M = 10 in a 16-wide tile): 4 slices [0, 2), [2, 4), [4, 6), [6, 9) of 9 k-tiles
    ("h128x16s3k4zx", "e4m3", (10, 300, 1100), 12, 4),
    # the heuristic's swapped mid-M form: C stored by TMA through its transpose (c_major = M), M = 70 one 72-wide tile
    ("h128x72s2tzxT", "bf16", (70, 300, 700), 12, 4),
    # ... fp8's (s34), and one 192-wide tile of M = 187 whose C is stored in two column blocks
    ("h128x72s2k4tzxT", "e4m3", (70, 300, 1100), 12, 4),
    ("h128x192s2t2zxT", "bf16", (187, 300, 700), 12, 4),
    # ... and rule 7's two swapped tiles past one 128-row tile: M = 170 in two 88-wide tiles (the second ragged), 6
    # tiles in 2 slices; fp8 [0, 4), [4, 9) of 9 k-tiles, the second slice starting a promotion chunk of its own
    ("h128x88s2tzxT", "bf16", (170, 300, 700), 12, 2),
    ("h128x88s2k4tzxT", "e4m3", (170, 300, 1100), 12, 2),
    # ... rastered along the kernel's two columns as the heuristic's rule 9 picks them (raster groups of one row)
    ("h128x88s2g1tzxT", "bf16", (170, 300, 700), 12, 2),
    ("h128x88s2g1k4tzxT", "e4m3", (170, 300, 1100), 12, 2),
]


@pytest.mark.parametrize("name, dtype, shape, ctas, slices", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[3]}ctas" for c in CASES])
def test_splitk_matches_float64(name, dtype, shape, ctas, slices):
    """C within bf16 rounding of float64; partial sums written exactly where S ≥ 2; the flags zero after."""
    config = GemmConfig.from_name(name, dtype).validate()
    m, n, k = shape
    km, kn = kernel_problem(config, m, n)
    assert splitk_slices(km, kn, k, config, ctas) == slices
    errors, partial_sums, flags = run_splitk(config, m, n, k, ctas)
    assert errors[0] < (2e-2 if config.fp8 else 8e-3)
    assert partial_sums == (slices > 1)
    assert not flags[0].any()


def test_splitk_twice_on_one_workspace():
    """Two launches on the same workspace and flags (as the GPU's call sites share them): the second launch's joins
    wait for its own partial sums (the first left every flag zero), both results right."""
    config = GemmConfig.from_name("h128x64s3tz").validate()
    errors, partial_sums, flags = run_splitk(config, 200, 100, 453, 13, launches=2)
    assert max(errors) < 8e-3
    assert partial_sums
    assert not flags[0].any() and not flags[1].any()


def test_splitk_bias_added_once():
    """The bias joins the sum once, in the joining unit's epilogue (3 slices: added per slice it would be 3×)."""
    from ptxgen.kernels.gemm.run import run_numpy

    config = GemmConfig(bn=64, stages=3, epilogue="tma", splitk=True, bias=True).validate()
    m, n, k = 200, 100, 453
    assert splitk_slices(m, n, k, config, 13) == 3
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((n, k)).astype(BF16)
    bias = (rng.standard_normal(n) * 10).astype(BF16)
    c = np.full((m, n), -7.0, BF16)
    run_numpy(config, a, b, c, m, n, k, bias=bias, sm_count=13)
    want = a.astype(np.float64) @ b.astype(np.float64).T + bias.astype(np.float64)
    assert np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want) < 8e-3


def test_splitk_block_scales_match_float64():
    """Block-scaled fp8 under split-K: each slice promotes its own k-tiles with their scales (scales_smem: the
    scales ride each slice's stages), the join adds promoted totals. 3 tiles (N = 320) of 9 k-tiles (K = 1040) on 7
    CTAs: S = 2, slices [0, 4) and [4, 9) — the second starts at column 0 of a 4-k-block B scale box."""
    from test_fp8_block_streamk import interpret_with_workspace

    m, n, k, ctas = 77, 320, 1040, 7
    for name in ("h128x128s3tzB", "h128x128s3tzBS"):
        config = GemmConfig.from_name(name, "e4m3").validate()
        assert splitk_slices(m, n, k, config, ctas) == 2
        interpret_with_workspace(config, m, n, k, ctas)


@pytest.mark.parametrize("name, m, n, k, ctas, slices", [
    ("h128x64s8zxBSA", 45, 272, 1040, 7, 2),    # swapped: the kernel's 3 row tiles are B's 272 rows, its columns A's 45
    ("h128x16s8zxBSA", 5, 400, 1040, 13, 3),    # swapped, 16 columns for 5 tokens: 4 tiles in 3 slices of 3 k-tiles
    ("h128x64s8tzBSA", 100, 200, 1040, 9, 2),   # unswapped 64-wide tiles: 4 of them, slices [0, 4) and [4, 9)
])
def test_block_scaled_split_picks_match_float64(name, m, n, k, ctas, slices):
    """The split-K forms ``choose_block_scaled_config`` takes for few tiles (two chunks in flight, swapped or not):
    each slice's chunk in flight is promoted before its slice ends, the join adds promoted totals."""
    from test_fp8_block_streamk import interpret_with_workspace

    config = GemmConfig.from_name(name, "e4m3").validate()
    kernel_m, kernel_n = (n, m) if config.swap_ab else (m, n)
    assert config.chunk_ahead and splitk_slices(kernel_m, kernel_n, k, config, ctas) == slices
    interpret_with_workspace(config, m, n, k, ctas)


def test_slices_on_132_sms():
    """The S of issue 17's shapes on an H100's 132 SMs (what the benchmark's ``…z`` variants run)."""
    big, mid = GemmConfig(bn=256, splitk=True), GemmConfig(bn=128, splitk=True)
    assert [splitk_slices(m, n, k, big, 132) for m, n, k in
            [(640, 1536, 13824), (512, 2048, 16384), (768, 1536, 12288), (1024, 2048, 14336), (640, 3072, 8192)]] \
        == [4, 4, 3, 2, 2]
    assert [splitk_slices(m, n, k, mid, 132) for m, n, k in
            [(640, 1536, 13824), (512, 2048, 16384), (768, 1536, 12288), (1024, 2048, 14336), (640, 3072, 8192)]] \
        == [2, 2, 1, 1, 1]
    assert splitk_slices(128, 128, 64, mid, 132) == 1        # one k-tile: never sliced


# -- names and rules ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dtype, fields", [
    ("h128x256s4t2z", "bf16", dict(epilogue="tma", epilogue_split=2)),
    ("h128x128s4tz", "bf16", dict(bn=128, epilogue="tma")),
    ("h128x128s6k4tz", "e4m3", dict(bn=128, stages=6, promote=4, epilogue="tma")),
    ("h128x64s4zx", "bf16", dict(bn=64, swap_ab=True)),
    ("h128x128s3tzBS", "e4m3", dict(bn=128, stages=3, epilogue="tma", scales="block", scales_smem=True)),
])
def test_names_read_back(name, dtype, fields):
    want = GemmConfig(dtype, splitk=True, **fields).validate()
    assert want.name == name
    assert GemmConfig.from_name(name, dtype) == want


def test_unknown_name_gives_the_grammar_with_z():
    with pytest.raises(ValueError, match=r"\[sk\[a\]\[<min saving>\]\]\[z\]\[m<a><b>\]"):
        GemmConfig.from_name("h128x128s4tzz")


@pytest.mark.parametrize("fields, message", [
    (dict(streamk=True), "GemmConfig.splitk = True: split-K's k-slices and stream-K's runs are two ways to share out "
                         "a tile's k-tiles: choose one (streamk = False)"),
    (dict(cluster=2), "GemmConfig.cluster = 2: split-K's units are single CTAs (a slice's partial sums and flags "
                      "count tiles of one CTA): cluster = 1"),
    (dict(overlap=1), "GemmConfig.overlap = 1: split-K's units end in a partial sum or a join, not a held tile whose "
                      "epilogue could run behind the next tile's wgmmas: overlap = 0 with splitk = True"),
    (dict(dtype="e4m3", scales="block", grouped="contiguous"),
     "GemmConfig.grouped = 'contiguous': a grouped GEMM finds each tile's group (and, masked, whether it has rows) on "
     "the device, while split-K slices every tile's k-tiles alike: grouped = 'none'"),
    (dict(dtype="e4m3", bm=256, scales="block"),
     "GemmConfig.bm = 256: BM = 256 with block scales promotes each warpgroup's two 64-row blocks in turn, each "
     "k-tile's stage read by both blocks; split-K's partial sums are not built for it: bm = 128"),
])
def test_rules(fields, message):
    base = dict(bn=128, epilogue="tma", splitk=True)
    base.update(fields)
    with pytest.raises(ValueError) as info:
        GemmConfig(**base).validate()
    assert str(info.value) == message


def test_default_configs_unchanged():
    """splitk defaults off: the default kernel's IR has no workspace (its text names neither %work nor %flags)."""
    assert not GemmConfig().splitk and not GemmConfig().partial_sums
    text = str(build(GemmConfig()))
    assert "%work" not in text and "%flags" not in text


# -- PTX ---------------------------------------------------------------------------------------------------------------

def compiled(config: GemmConfig):
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    specs = {} if config.epilogue == "tma" else {"c": TensorSpec(0, True, 16)}
    if config.partial_sums:
        specs.update(work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
    return compile_kernel(build(config).kernels[0], Specialization.of(**specs))


# (split-K variant, the stream-K-on-every-SM variant of its tile, dtype, (registers, spill bytes) measured by
# nvJitLink for split-K, which ignores setmaxnreg — the system ptxas with the 240-register budget: no spill for the
# bf16 kernels, 3.7 KB for e4m3 128 × 256 k4 as for its ska; re-measured in s35, when split-K tiles began to move a
# last tile row / column back to end at M / N: 3704 -> 3736 bytes, its ska 3728)
PTX_CASES = [
    ("h128x256s4t2z", "h128x256s4t2ska", "bf16", (168, 0)),
    ("h128x128s4tz", "h128x128s4tska", "bf16", (154, 0)),
    ("h128x128s6t2z", "h128x128s6t2ska", "bf16", (154, 0)),
    ("h128x128s6k4tz", "h128x128s6k4tska", "e4m3", (160, 0)),
    ("h128x256s4k4t2z", "h128x256s4k4t2ska", "e4m3", (168, 3736)),
]


@pytest.mark.parametrize("name, streamk, dtype, figures", PTX_CASES, ids=[c[0] + "-" + c[2] for c in PTX_CASES])
def test_ptx_assembles_beside_streamk(name, streamk, dtype, figures):
    """nvJitLink assembles the split-K kernel with no serialized wgmma (C7514), its registers and spills as measured
    and no more spill than stream-K on every SM of the same tile (within 1%); partial sums go out and come in as 16-byte
    accesses, and the join's wait is an acquire load."""
    ours = compiled(GemmConfig.from_name(name, dtype))
    theirs = compiled(GemmConfig.from_name(streamk, dtype))
    assert "C7514" not in ours.info_log
    assert (ours.registers, ours.spill_bytes or 0) == figures
    # within 1%: under nvJitLink's 168-register view tens of bytes come and go with the code's layout (e4m3 128 x 192
    # split-K 1664 bytes against its ska's 1656 before s35's moved edge tiles as after)
    assert (ours.spill_bytes or 0) <= 1.01 * (theirs.spill_bytes or 0)
    assert "st.global.v4.b32" in ours.ptx and "ld.global.v4.b32" in ours.ptx
    assert "ld.acquire.gpu.global.b32" in ours.ptx and "red.release.gpu.global.add.s32" in ours.ptx


# -- GPU ---------------------------------------------------------------------------------------------------------------

# the ragged one keeps every row 16-byte aligned (N, K multiples of 16), as TMA loads and stores need
GPU_SHAPES = [(640, 1536, 13824), (512, 2048, 16384), (768, 1536, 12288), (600, 1504, 13008)]


# rule 3c's narrow split: one ragged row of 128 x 64 tiles, 16-64 tiles in 2-8 slices
NARROW_GPU_CASES = [("h128x64s8tez", "bf16", (101, 1024, 24576)), ("h128x64s8k4tz", "e4m3", (101, 1024, 24576)),
                    ("h128x64s8tez", "bf16", (128, 4096, 16384)), ("h128x64s8k4tz", "e4m3", (72, 2048, 32768))]

SWAPPED_GPU_CASES = [("h128x96s6tzxT", "bf16", (96, 4096, 14336)), ("h128x72s6tzxT", "bf16", (72, 1024, 20480)),
                     ("h128x80s6tzxT", "bf16", (80, 1504, 10240)),
                     # fp8's one swapped tile, split (s34); one 192-wide tile of a ragged M = 187 in 2 slices
                     ("h128x72s6k4tzxT", "e4m3", (72, 5120, 13824)), ("h128x192s5t2zxT", "bf16", (187, 4096, 28672)),
                     ("h128x192s5k4t2zxT", "e4m3", (189, 2560, 24576)),
                     # rule 7's two swapped tiles past one 128-row tile, split (the second tile ragged: M = 166, 197)
                     ("h128x80s6tzxT", "bf16", (160, 4096, 4096)), ("h128x104s6tzxT", "bf16", (197, 1536, 7168)),
                     ("h128x88s6k4tzxT", "e4m3", (166, 4096, 6144)), ("h128x104s6k4tzxT", "e4m3", (199, 1024, 18432)),
                     # ... and the one swapped tile of M just past 128, split (48 tiles in 2 slices)
                     ("h128x152s5tzxT", "bf16", (145, 6144, 28672)), ("h128x152s5k4tzxT", "e4m3", (145, 6144, 28672)),
                     # ... and the two past two row tiles (M = 266: two 136-wide tiles, the second ragged)
                     ("h128x136s5tzxT", "bf16", (266, 2560, 13824)), ("h128x136s5k4tzxT", "e4m3", (266, 2560, 13824)),
                     # rule 9's raster of such splits (these three checked against float64 in s36 log sections 9-10)
                     ("h128x104s6g1tzxT", "bf16", (199, 4096, 7168)), ("h128x136s5g1tzxT", "bf16", (272, 1536, 7168)),
                     ("h128x88s6g1k4tzxT", "e4m3", (166, 1536, 7168)),
                     # rule 1's decode split (8-32 tiles of the kernel's 128 rows, 4-16 slices)
                     ("h128x16s8zx", "bf16", (16, 4096, 4096)), ("h128x16s8k4zx", "e4m3", (16, 4096, 14336)),
                     ("h128x64s8zx", "bf16", (49, 1024, 24576)), ("h128x32s8k4zx", "e4m3", (30, 2560, 13824))]


@pytest.mark.gpu
@pytest.mark.parametrize("name, dtype, shape", [(n, d, s) for n, d in [
    ("h128x256s4t2z", "bf16"), ("h128x128s4tz", "bf16"), ("h128x256s4k4t2z", "e4m3"), ("h128x128s6k4tz", "e4m3"),
    ("h128x128s6tez", "bf16"), ("h128x192s4t3ez", "bf16"), ("h128x192s4k4tez", "e4m3")]
    for s in GPU_SHAPES] + SWAPPED_GPU_CASES + NARROW_GPU_CASES, ids=str)
def test_gpu_splitk_matches_float64(name, dtype, shape):
    """The split-K variant on the device's SMs, twice in a row through one call site (the second launch on the flags
    the first left zero), fresh random operands each time: each C within 1e-2 of float64 in relative norm."""
    from ptxgen.kernels.gemm.run import run_device

    torch = torch_or_skip()
    config = GemmConfig.from_name(name, dtype).validate()
    m, n, k = shape
    for _call in range(2):
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(n, k, device="cuda")
        if config.fp8:
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        else:
            a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        run_device(config, a, b, c, m, n, k, scales=(SCALE_A, SCALE_B))
        torch.cuda.synchronize()
        want = a.double() @ b.double().T * ((SCALE_A * SCALE_B) if config.fp8 else 1.0)
        assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2
