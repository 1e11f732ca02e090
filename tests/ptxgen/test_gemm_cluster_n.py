"""GEMM clusters along N (``GemmConfig.cluster_along = "n"``, variant letter ``c<cluster>n``): a cluster tile is
BM × (cluster·BN), CTA ``rank`` takes BN-column part ``rank`` and multicasts BM/cluster rows of A into every CTA's
stage, loading its own B box — cuBLAS's mid-M form. Names, rules, the IR's boxes and multicasts, the interpreter
against float64 on ragged problems (a pair's second tile partly or wholly past N), the PTX's registers against the
``cluster_along = "m"`` form, and the GPU through matmul / scaled_mm."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from ptxgen.ir.text import print_module
from ptxgen.kernels import GemmConfig, matmul, scaled_mm
from ptxgen.kernels.gemm import build

from test_attention_three_warpgroups import registers_at
from gpu_torch import torch_or_skip

HOST = {"bf16": np.dtype(ml_dtypes.bfloat16), "e4m3": np.dtype(ml_dtypes.float8_e4m3fn)}

# the variants the lead times: cuBLAS's e4m3 mid-M tile in pairs along N, and the bf16 tiles' pairs
TIMED = [("e4m3", "h128x112s6c2nk4t"), ("bf16", "h128x176s4c2nt"), ("bf16", "h128x224s4c2nt2")]


def rel_err(got, want):
    return np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want)


# -- names and rules ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, name", TIMED + [("bf16", "h128x128s4c2nr"), ("bf16", "h256x128s3c2nt"),
                                                 ("bf16", "h128x256s4c4nt2o1"), ("e4m3", "h128x128s5c2nk4to2")])
def test_names_read_back(dtype, name):
    config = GemmConfig.from_name(name, dtype).validate()
    assert config.cluster_along == "n" and config.cluster > 1
    assert config.name == name
    assert GemmConfig.from_name(config.name, config.dtype) == config


def test_the_orientations_are_different_configs():
    along_m, along_n = GemmConfig.from_name("h128x112s6c2k4t", "e4m3"), GemmConfig.from_name("h128x112s6c2nk4t", "e4m3")
    assert along_m.cluster_along == "m" and along_m.replace(cluster_along="n") == along_n
    assert along_m.cluster_tile == (256, 112) and along_n.cluster_tile == (128, 224)
    assert GemmConfig().cluster_along == "m"     # the default is unchanged
    # B is not split along N: BN = 120 is not a multiple of 16 but each CTA loads its whole B box
    GemmConfig(bn=120, cluster=2, cluster_along="n").validate()
    with pytest.raises(ValueError, match="loads BN/2 rows of B"):
        GemmConfig(bn=120, cluster=2).validate()


@pytest.mark.parametrize("fields, message", [
    (dict(cluster_along="k", cluster=2),
     "GemmConfig.cluster_along = 'k': a cluster's CTAs pair tiles along 'm' (sharing B) or 'n' (sharing A)"),
    (dict(cluster_along="n"),
     "GemmConfig.cluster_along = 'n': the CTAs of a cluster share A, so it needs cluster > 1 (cluster = 1)"),
    (dict(cluster_along="n", cluster=2, a_major="MN", bn=128),
     "GemmConfig.a_major = 'MN', b_major = 'K': with cluster_along = 'n' each CTA multicasts BM/2 rows of A's K-major "
     "box (an MN-major A is loaded in 64-column boxes): a_major = 'K', b_major = 'K'"),
    (dict(cluster_along="n", cluster=3, bn=96),
     "GemmConfig.cluster = 3: with cluster_along = 'n' each CTA of a cluster loads BM/3 rows of A, a multiple of 8 "
     "(TMA box rows of the SW128 atom); BM = 128 does not split so"),
    (dict(cluster_along="n", cluster=2, streamk=True),
     "GemmConfig.streamk = True: cluster_along = 'n' is built for data-parallel tiles (stream-K's pieces and partial "
     "sums count cluster tiles along M): streamk = False"),
    (dict(dtype="e4m3", cluster_along="n", cluster=2, bn=128, scales="block", grouped="contiguous"),
     "GemmConfig.grouped = 'contiguous': cluster_along = 'n' is built for dense GEMMs (a grouped GEMM's tiles take "
     "clusters of 1): grouped = 'none'"),
    (dict(dtype="e4m3", cluster_along="n", cluster=2, bn=128, scales="block"),
     "GemmConfig.scales = 'block': cluster_along = 'n' is built for per-tensor scales (scales = 'tensor')"),
])
def test_validate_names_the_broken_rule(fields, message):
    assert_refused(fields, message)


def assert_refused(fields: dict, message: str) -> None:
    """``GemmConfig(**fields)``: ``validate`` and ``build`` both refuse it with exactly ``message``."""
    with pytest.raises(ValueError) as error:
        GemmConfig(**fields).validate()
    assert str(error.value) == message
    with pytest.raises(ValueError, match=re.escape(message)):
        build(GemmConfig(**fields))


# -- the kernel's IR ---------------------------------------------------------------------------------------------------

def test_boxes_multicast_and_grid():
    """A's map has BM/2-row boxes, each CTA's loaded with multicast into its rank's row part of the A stage; B's map
    has whole BN-row boxes loaded without; the grid and the schedule count cluster tiles of BM × 2·BN."""
    text = print_module(build(GemmConfig.from_name("h128x112s6c2nk4t", "e4m3")))
    assert "%a: tmap<e4m3, 2>[Sw<3,4,3> o 0 o (64,(128,1)):(128,(1,0))]" in text
    assert "%b: tmap<e4m3, 2>[Sw<3,4,3> o 0 o ((8,14),(128,1)):((128,1024),(1,0))]" in text
    assert "grid = (min(cdiv(%m, 128) * cdiv(%n, 224), cdiv(%sms, 2)) * 2, 1, 1)" in text
    assert [line.strip() for line in text.splitlines() if "tma.load" in line] == [
        "tma.load %a, %a_part_dst, %pipe, %s, %m_part, %kc {multicast = true}",
        "tma.load %b, %b_dst, %pipe, %s, %n0_edge, %kc"]   # the last tile column moved back (schedule.tile_origin)
    assert "%a_part_dst = smem.tile %a_dst, %rank {mode = 0, size = 64}" in text
    assert "%tiles_m = arith.cdiv %m, %bm : i32" in text and "%tiles_n = arith.cdiv %n, %bnc : i32" in text
    assert "%tn_own = arith.add %tnc, %rank : i32" in text and "%tm_own" not in text


# -- the interpreter against float64 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, name, shape", [
    ("bf16", "h128x112s4c2nt", (200, 296, 100)),      # 3 column tiles: the second pair's second tile wholly past N
    ("bf16", "h128x176s4c2nt", (129, 400, 200)),      # pair 1: tile 2 partly past N, tile 3 wholly
    ("bf16", "h128x128s4c2n", (130, 600, 136)),       # direct epilogue: tile 4 partly past, tile 5 wholly
    ("bf16", "h128x128s4c2nr", (70, 260, 64)),        # rows epilogue
    ("bf16", "h128x224s4c2nt2", (260, 504, 72)),
    ("e4m3", "h128x112s6c2nk4t", (300, 352, 700)),    # promote 4 over 6 k-tiles, ragged
    ("e4m3", "h128x128s5c2nk4to2", (257, 392, 1000)),  # overlapped epilogue
    ("bf16", "h128x120s4g1c2ntxT", (370, 200, 136)),    # swapped: the pair shares B's rows, C stored transposed by TMA
    ("e4m3", "h128x104s6c2nk4x", (230, 140, 300)),      # swapped, direct epilogue through C's transposed view
])
def test_interpreter_matches_float64(dtype, name, shape):
    assert_interpreted_gemm_matches(name, dtype, shape, sm_count=4)


def assert_interpreted_gemm_matches(name: str, dtype: str, shape: tuple, sm_count: int) -> None:
    """Config ``name`` forced through ``matmul`` (bf16) or ``scaled_mm`` (e4m3, scales 0.5 and 0.25) in the CPU
    interpreter on ``sm_count`` SMs, random operands of ``shape`` (m, n, k): C within 1e-2 of float64."""
    config = GemmConfig.from_name(name, dtype)
    m, n, k = shape
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(HOST[dtype])
    w = rng.standard_normal((n, k)).astype(HOST[dtype])
    want = a.astype(np.float64) @ w.astype(np.float64).T
    if dtype == "e4m3":
        got = scaled_mm(a, w.T, 0.5, 0.25, config=config, sm_count=sm_count)
        want = want * 0.125
    else:
        got = matmul(a, w.T, config=config, sm_count=sm_count)
    assert got.shape == (m, n)
    assert rel_err(got, want) < 1e-2, name


# -- the PTX -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, name", TIMED)
def test_ptx_registers_as_the_pairs_along_m(dtype, name):
    """nvJitLink assembles the kernel; at the consumers' setmaxnreg budget of 240 it needs no more registers and no
    more spill than the same tile in pairs along M (one multicast load per stage either way)."""
    from ptxgen.lower import compile_kernel

    config = GemmConfig.from_name(name, dtype)
    along_n = compile_kernel(build(config)).ptx
    along_m = compile_kernel(build(config.replace(cluster_along="m"))).ptx
    for ptx in (along_n, along_m):
        assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                              r"\.multicast::cluster", ptx)) == 1
    registers, spill = registers_at(along_n, 240)
    base_registers, base_spill = registers_at(along_m, 240)
    assert spill <= base_spill and registers <= base_registers + 2, (registers, spill, base_registers, base_spill)


# -- the GPU -----------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, name", TIMED + [("bf16", "h128x128s4c2n"), ("e4m3", "h128x128s5c2nk4to2"),
                                                  ("bf16", "h128x152s4g1c2ntxT"), ("e4m3", "h128x120s6g1c2nk4txT")])
@pytest.mark.parametrize("m, n, k", [(256, 14336, 1024), (300, 1064, 2000), (1000, 2000, 520), (129, 120, 4096)])
def test_gpu_matches_float64(dtype, name, m, n, k):
    """Forced through matmul / scaled_mm on fresh random inputs, against float64 by relative norm; N leaves the last
    pair's second tile partly or wholly past N at several shapes."""
    assert_forced_gemm_matches(name, dtype, m, n, k)


def assert_forced_gemm_matches(name: str, dtype: str, m: int, n: int, k: int) -> None:
    """Config ``name`` forced through ``matmul`` (bf16) or ``scaled_mm`` (e4m3, scales 0.5 and 0.25) on fresh random
    (m, k) and (n, k) operands on the GPU: C within 1e-2 of float64 in relative norm (the test skips without a GPU)."""
    torch = torch_or_skip()
    config = GemmConfig.from_name(name, dtype)
    if dtype == "e4m3":
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = scaled_mm(a, w.T, 0.5, 0.25, config=config)
        want = a.double() @ w.double().T * 0.125
    else:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        c = matmul(a, w.T, config=config)
        want = a.double() @ w.double().T
    torch.cuda.synchronize()
    assert c.shape == (m, n)
    assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2


def test_cost_model_counts_cluster_tiles_along_n():
    """The heuristic's cost model (what the benchmark's estimates use) counts a pair along N as one BM × 2·BN work
    item: 256 × 14336 e4m3 in 128 × 112 tiles is 2 × 128 = 256 tiles on 132 CTAs (2 waves), in pairs along N 2 × 64
    = 128 pair tiles on 66 clusters (2 waves) — the same critical path as unpaired."""
    from ptxgen.kernels.gemm.heuristic import estimated_cost

    single = GemmConfig.from_name("h128x112s6k4t", "e4m3")
    pairs = single.replace(cluster=2, cluster_along="n")
    assert estimated_cost(pairs, 256, 14336, 8192, 132) == estimated_cost(single, 256, 14336, 8192, 132)
    assert estimated_cost(pairs.replace(cluster_along="m"), 256, 14336, 8192, 132) == \
        estimated_cost(single, 256, 14336, 8192, 132)
    # 384 rows: 3 row tiles × 128 = 384 tiles (3 waves of 132); paired along N 3 × 64 = 192 on 66 clusters (3 waves),
    # along M ⌈384/256⌉ × 128 = 256 on 66 (4 waves)
    assert estimated_cost(pairs, 384, 14336, 8192, 132) * 4 == \
        estimated_cost(pairs.replace(cluster_along="m"), 384, 14336, 8192, 132) * 3
