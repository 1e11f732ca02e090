"""fp8 with per-tensor scales under stream-K (ptxgen.kernels.gemm): the k-tiles of the last wave shared out in runs
that start and end inside a promotion chunk (promote = 4) or a staggered K-half (promote = 1), the partial sums left
unscaled in the f32 workspace and the per-tensor scales applied once, to the joined sum, in the epilogue; swapped
(the decode configuration, ``streamk_every_sm``) and unswapped tiles, in the CPU interpreter against float64; the
decode configuration assembled by nvJitLink beside the data-parallel one it replaces."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels.gemm import GemmConfig, build, choose_config, streamk_buffers
from ptxgen.kernels.gemm.run import kernel_arguments, kernel_config
from gpu_torch import torch_or_skip

E4M3 = ml_dtypes.float8_e4m3fn
SCALE_A, SCALE_B = 0.5, 0.25


def streamk_runs(config: GemmConfig, tiles: int, ktiles: int, ctas: int) -> list:
    """The host's view of ``schedule.streamk_split``: the [start, end) k-tile runs (numbered across the stream-K
    tiles) of the clusters that share the last wave, or [] where the kernel runs data-parallel."""
    step = ctas if config.streamk_every_sm else min(tiles, ctas)
    rest = tiles % step
    if not rest or ktiles - -(-(rest * ktiles) // max(min(step, rest * ktiles), 1)) < config.streamk_min_saving:
        return []
    total = rest * ktiles
    units = max(min(step, total), 1)
    return [(c * total // units, (c + 1) * total // units) for c in range(units)]


def run_streamk(config: GemmConfig, m: int, n: int, k: int, ctas: int):
    """C (m, n) = (A·Bᵀ)·scale_a·scale_b of fresh e4m3 A (m, k), B (n, k) through ``config`` on ``ctas`` CTAs
    (swapped as the ops run it for ``swap_ab``), the workspace NaN before → (relative error against float64, whether
    any partial sum was written, the flags after)."""
    rng = np.random.default_rng()
    a = (rng.standard_normal((m, k)) * 2).astype(E4M3)
    b = (rng.standard_normal((n, k)) * 2).astype(E4M3)
    c = np.full((m, n), -7.0, ml_dtypes.bfloat16)
    args = kernel_arguments(config, a, b, c, None, m, n, k, lambda x: x.T, None)
    buffers = streamk_buffers(kernel_config(config), ctas)
    work = np.full(buffers["work"], np.nan, np.float32)
    flags = np.zeros(buffers["flags"], np.int32)
    interpret(build(kernel_config(config)), {**args, "sms": ctas, "scale_a": SCALE_A, "scale_b": SCALE_B,
                                             "work": work, "flags": flags})
    want = a.astype(np.float64) @ b.astype(np.float64).T * (SCALE_A * SCALE_B)
    err = np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want)
    return err, bool((~np.isnan(work)).any()), flags


CASES = [
    # unswapped: 3 tiles on 2 CTAs, the last one's 11 k-tiles in runs [0, 5) and [5, 11): the second starts inside
    # the first chunk of 4
    (GemmConfig("e4m3", bn=128, stages=3, promote=4, streamk=True, streamk_min_saving=0), (300, 128, 1300), 2),
    (GemmConfig("e4m3", bn=128, stages=3, promote=1, streamk=True, streamk_min_saving=0), (300, 128, 1300), 2),
    # unswapped on every SM: 2 tiles of 11 k-tiles over 3 CTAs in runs [0, 7), [7, 14), [14, 22) (pieces from
    # k-tiles 7 and 3 of their tiles), N ragged
    (GemmConfig("e4m3", bn=128, stages=4, promote=4, streamk=True, streamk_every_sm=True, streamk_min_saving=0),
     (200, 120, 1400), 3),
    (GemmConfig("e4m3", bn=64, stages=4, promote=1, streamk=True, streamk_every_sm=True, streamk_min_saving=0),
     (37, 100, 1100), 3),
    # swapped (the decode configuration): the kernel's M is N = 300 (3 tiles), its N is M = 16 or 37 (BN 16, 64);
    # 3 tiles of 12 k-tiles over 4 CTAs in runs of 9: pieces start at k-tiles 9, 6 and 3 of their tiles
    (GemmConfig("e4m3", bn=16, stages=8, promote=4, swap_ab=True, streamk=True, streamk_every_sm=True,
                streamk_min_saving=1), (16, 300, 1500), 4),
    (GemmConfig("e4m3", bn=64, stages=8, promote=4, swap_ab=True, streamk=True, streamk_every_sm=True,
                streamk_min_saving=1), (37, 310, 1200), 4),
    (GemmConfig("e4m3", bn=16, stages=8, promote=1, swap_ab=True, streamk=True, streamk_every_sm=True,
                streamk_min_saving=1), (13, 300, 1500), 4),
    # the wave fits whole (4 tiles on 4 CTAs): data-parallel, the workspace untouched
    (GemmConfig("e4m3", bn=16, stages=8, promote=4, swap_ab=True, streamk=True, streamk_every_sm=True,
                streamk_min_saving=1), (16, 512, 1500), 4),
]


@pytest.mark.parametrize("config, shape, ctas", CASES, ids=lambda x: x.name if isinstance(x, GemmConfig) else None)
def test_fp8_streamk_matches_float64(config, shape, ctas):
    m, n, k = shape
    km, kn = (n, m) if config.swap_ab else (m, n)    # the kernel's problem
    tiles, ktiles = -(-km // config.bm) * -(-kn // config.bn), -(-k // config.k_tile)
    runs = streamk_runs(config, tiles, ktiles, ctas)
    if runs:
        # the case is one it claims: some run starts inside a promotion chunk (promote 4) of its tile
        assert any((start % ktiles) % 4 for start, _end in runs)
    err, partial_sums, flags = run_streamk(config, m, n, k, ctas)
    assert err < 2e-2
    assert partial_sums == bool(runs)
    assert not flags.any()


def test_block_scales_refuse_grouped_streamk():
    """Block scales take stream-K dense (tests/ptxgen/test_fp8_block_streamk.py), not grouped."""
    with pytest.raises(ValueError, match=r"GemmConfig.streamk = True: a contiguous grouped GEMM finds each tile's "
                                         r"group \(and, masked, whether it has rows\) on the device"):
        GemmConfig("e4m3", bn=128, streamk=True, scales="block", grouped="contiguous").validate()


def test_fp8_streamk_names_round_trip():
    config = GemmConfig("e4m3", bn=16, stages=8, promote=4, swap_ab=True, streamk=True, streamk_every_sm=True,
                        streamk_min_saving=1)
    assert config.name == "h128x16s8k4ska1x"
    assert GemmConfig.from_name(config.name, "e4m3") == config


def test_decode_config_assembles_like_the_data_parallel_one():
    """The fp8 decode configurations (the pick, split-K, and its stream-K-on-every-SM alternative) through
    nvJitLink, beside the data-parallel h128x16s8k4x: no wgmma serialized (C7514) and no more spills than that
    kernel (nvJitLink compiles without the setmaxnreg budgets; the driver's figure is the GPU's to check)."""
    from ptxgen.kernels.gemm.heuristic import swapped_streamk
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    split = choose_config(16, 4096, 14336, "e4m3")
    streamk = swapped_streamk(split)
    old = GemmConfig.from_name("h128x16s8k4x", "e4m3")
    assert split.splitk and split.swap_ab and streamk.streamk and streamk.streamk_every_sm
    figures = {}
    for config in (old, split, streamk):
        specs = {"c": TensorSpec(0, True, 16)}
        if config.streamk or config.splitk:
            specs.update(work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
        compiled = compile_kernel(build(kernel_config(config)).kernels[0], Specialization.of(**specs))
        assert "C7514" not in compiled.info_log
        assert "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3" in compiled.ptx
        figures[config.name] = (compiled.registers, compiled.spill_bytes or 0)
    for new in (split, streamk):
        assert figures[new.name][1] <= figures[old.name][1], figures
    print(figures)



@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(16, 4096, 14336), (16, 6144, 4096), (64, 28672, 4096), (32, 7168, 2048),
                                   (37, 5000, 3000)], ids=str)
def test_gpu_scaled_mm_decode_matches_float64(shape):
    """scaled_mm of the decode shapes through the heuristic's pick (split-K below a third of the SMs' tiles:
    16x4096x14336, 37x5000x3000; data-parallel from there), called twice (the second call on the flags the first left
    zero): each result within 1e-2 of float64 in relative norm."""
    from ptxgen.kernels import scaled_mm

    torch = torch_or_skip()
    m, n, k = shape
    config = choose_config(m, n, k, "e4m3")
    assert config.splitk == (-(-n // 128) * 3 < 132) and not config.streamk
    for _call in range(2):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = scaled_mm(a, w.T, SCALE_A, SCALE_B)
        torch.cuda.synchronize()
        want = a.double() @ w.double().T * (SCALE_A * SCALE_B)
        assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("config, shape, ctas", [
    (GemmConfig("e4m3", bn=16, stages=8, promote=1, swap_ab=True, streamk=True, streamk_every_sm=True,
                streamk_min_saving=1), (16, 4096, 14336), 132),
    (GemmConfig("e4m3", bn=128, stages=4, promote=4, epilogue="tma", streamk=True, streamk_min_saving=0),
     (1000, 1064, 1040), 6),
    (GemmConfig("e4m3", bn=128, stages=4, promote=1, epilogue="tma", streamk=True, streamk_min_saving=0),
     (1000, 1064, 1040), 6),
    (GemmConfig("e4m3", bn=64, stages=8, promote=4, swap_ab=True, streamk=True, streamk_every_sm=True,
                streamk_min_saving=0), (37, 1000, 1504), 10),
], ids=lambda x: x.name if isinstance(x, GemmConfig) else str(x))
def test_gpu_fp8_streamk_kernel_matches_float64(config, shape, ctas):
    """The kernel launched on ``ctas`` CTAs (a few: the last wave split into pieces that start inside promotion
    chunks), swapped as the ops run it, twice on one workspace: each C within 1e-2 of float64, the flags zero
    after each launch."""
    from ptxgen.runtime import jit

    torch = torch_or_skip()
    m, n, k = shape
    kern = jit(build(kernel_config(config)))
    shapes = streamk_buffers(kernel_config(config), ctas)
    work = torch.empty(shapes["work"], device="cuda", dtype=torch.float32)
    flags = torch.zeros(shapes["flags"], device="cuda", dtype=torch.int32)
    for _launch in range(2):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
        args = kernel_arguments(config, a, b, c, None, m, n, k, lambda x: x.t(), None)
        kern(**args, sms=ctas, scale_a=SCALE_A, scale_b=SCALE_B, work=work, flags=flags)
        torch.cuda.synchronize()
        want = a.double() @ b.double().T * (SCALE_A * SCALE_B)
        assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2
        assert not bool(flags.any())
