"""Two-dimensional clusters: a cluster of C CTAs seen as a cm × cn grid (rank = i + cm·j). The IR ops
(``pipeline.alloc {cluster = (cm, cn)}``: empty barriers expecting the consumers of the grid row and column,
``pipeline.release`` arriving on exactly those CTAs, one lane per CTA; ``tma.load {multicast = 0 | 1}``: the issuing
CTA's grid column / row) on a hand-written 2 × 2 kernel, their verifier errors, and the GEMM in clusters of
cm CTAs along M (sharing B) × cn along N (sharing A), variant ``c<cm>x<cn>`` — cuBLAS's ``_4x2`` form — against
float64 on the interpreter, its PTX against the 1-D form's registers, and on the GPU."""
from __future__ import annotations

import re

import numpy as np
import pytest

from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.text import parse_module, print_module
from ptxgen.kernels import GemmConfig
from ptxgen.kernels.gemm import build
from ptxgen.kernels.gemm.schedule import grid, streamk_buffers
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

from test_attention_three_warpgroups import registers_at
from test_gemm_cluster_n import assert_forced_gemm_matches, assert_interpreted_gemm_matches, assert_refused


# -- the IR ops on a hand-written 2 x 2 cluster ------------------------------------------------------------------------

# CTA (i, j) of a 2 x 2 cluster loads rows 16i + 8j … of x into part j of %bufa, multicast to its grid ROW (mode 1:
# CTAs (i, 0), (i, 1)), and rows 16j + 8i … into part i of %bufb, multicast to its grid COLUMN (mode 0: (0, j),
# (1, j)); so every CTA ends with x[16i : 16i + 16] in %bufa and x[16j : 16j + 16] in %bufb, and writes both out.
GRID2X2 = """kernel @mc2(%x: tmap<f32, 2>[(8,32):(32,1)], %y: gtensor<f32, 2>) {grid = (8, 1, 1), block = (128, 1, 1), cluster = (4, 1, 1)} {
  %bufa = smem.alloc {align = 128} : smem<f32>[(16,32):(32,1)]
  %bufb = smem.alloc {align = 128} : smem<f32>[(16,32):(32,1)]
  %pipe = pipeline.alloc {stages = 1, consumers = 4, cluster = (2, 2)} : pipeline<1>
  %t = gpu.thread_id {dim = x} : i32
  %rank = gpu.cluster_rank : i32
  %blk = gpu.block_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %c2 = arith.const {value = 2} : i32
  %c8 = arith.const {value = 8} : i32
  %c16 = arith.const {value = 16} : i32
  %c32 = arith.const {value = 32} : i32
  %i = arith.rem %rank, %c2 : i32
  %j = arith.div %rank, %c2 : i32
  %leader = arith.cmp %t, %c0 {pred = eq} : i1
  scf.if %leader {
    pipeline.init %pipe
  }
  barrier.cluster
  scf.if %leader {
    %s = pipeline.acquire %pipe, %c0 {bytes = 4096} : i32
    %i16 = arith.mul %i, %c16 : i32
    %j8 = arith.mul %j, %c8 : i32
    %rowa = arith.add %i16, %j8 : i32
    %parta = smem.tile %bufa, %j {mode = 0, size = 8} : smem<f32>[(8,32):(32,1)]
    tma.load %x, %parta, %pipe, %s, %rowa, %c0 {multicast = 1}
    %j16 = arith.mul %j, %c16 : i32
    %i8 = arith.mul %i, %c8 : i32
    %rowb = arith.add %j16, %i8 : i32
    %partb = smem.tile %bufb, %i {mode = 0, size = 8} : smem<f32>[(8,32):(32,1)]
    tma.load %x, %partb, %pipe, %s, %rowb, %c0 {multicast = 0}
  }
  %s2 = pipeline.wait %pipe, %c0 : i32
  %va = smem.load %bufa, %t {tv = [(128,4):(4,1)]} : frag<f32>[4]
  %vb = smem.load %bufb, %t {tv = [(128,4):(4,1)]} : frag<f32>[4]
  %w = arith.mul %blk, %c32 : i32
  %ga = gmem.tile %y, %w, %c0 {shape = [(16,32)]} : gview<f32>[(16,32)]
  gmem.store %ga, %t, %va {tv = [(128,4):(4,1)]}
  %w16 = arith.add %w, %c16 : i32
  %gb = gmem.tile %y, %w16, %c0 {shape = [(16,32)]} : gview<f32>[(16,32)]
  gmem.store %gb, %t, %vb {tv = [(128,4):(4,1)]}
  pipeline.release %pipe, %s2
  barrier.cluster
}
"""

# CTA WITHHELD does not release its stage; then CTA 0 acquires the stage again (its empty barrier's phase 0): that
# completes only once the consumers of CTA 0's grid row and column — CTAs 0, 1 and 2 — released it
WITHHOLD = """  %c_withheld = arith.const {value = WITHHELD} : i32
  %gives = arith.cmp %rank, %c_withheld {pred = ne} : i1
  scf.if %gives {
    pipeline.release %pipe, %s2
  }
  %first = arith.cmp %rank, %c0 {pred = eq} : i1
  scf.if %first {
    scf.if %leader {
      %s3 = pipeline.acquire %pipe, %c1 {bytes = 1024} : i32
      %again = smem.tile %bufa, %c0 {mode = 0, size = 8} : smem<f32>[(8,32):(32,1)]
      tma.load %x, %again, %pipe, %s3, %c0, %c0
      %s4 = pipeline.wait %pipe, %c1 : i32
    }
  }
"""


def run_grid2x2(text):
    x = np.random.default_rng(7).standard_normal((32, 32)).astype(np.float32)
    y = np.full((256, 32), -7.0, np.float32)
    interpret(parse_module(text, file="mc2.tile"), {"x": x, "y": y})
    return x, y


def test_modes_land_in_the_grid_column_and_row():
    x, y = run_grid2x2(GRID2X2)
    for blk in range(8):
        i, j = blk % 4 % 2, blk % 4 // 2
        assert np.array_equal(y[32 * blk:32 * blk + 16], x[16 * i:16 * i + 16]), blk       # row-multicast A
        assert np.array_equal(y[32 * blk + 16:32 * blk + 32], x[16 * j:16 * j + 16]), blk  # column-multicast B


def test_a_release_reaches_exactly_the_row_and_column():
    """CTA 0's stage waits for the releases of CTAs 0, 1 (its column) and 2 (its row) — 3 × 4 warps = its 12
    arrivals — and not for CTA 3's (neither): CTA 3 withholding its release leaves CTA 0's second acquire free, CTA
    1 withholding it hangs it (were CTA 3's release to reach CTA 0, that would have completed the phase instead)."""
    released = GRID2X2.replace("  pipeline.release %pipe, %s2\n", WITHHOLD)
    run_grid2x2(released.replace("WITHHELD", "3"))
    for peer in (1, 2):
        with pytest.raises(InterpreterError) as e:
            run_grid2x2(released.replace("WITHHELD", str(peer)))
        assert "%pipe.empty[0]" in str(e.value) and "iteration 1 (stage 0)" in str(e.value), str(e.value)


def test_a_release_needs_the_lanes_that_arrive():
    """Lane l of each warp arrives on CTA l: a release with lane 3 of its warps inactive is reported (on the GPU CTA
    3's barrier would never hear from them)."""
    partial = GRID2X2.replace("  pipeline.release %pipe, %s2\n", """  %lane = gpu.lane_id : i32
  %c3 = arith.const {value = 3} : i32
  %not3 = arith.cmp %lane, %c3 {pred = ne} : i1
  scf.if %not3 {
    pipeline.release %pipe, %s2
  }
""")
    with pytest.raises(InterpreterError) as e:
        run_grid2x2(partial)
    assert ("pipeline.release: lane 3 of warp 0 is not active: a pipeline shared by a cluster of 4 CTAs is released by "
            "lanes 0 … 3 of each warp, lane l arriving on CTA l's barrier") in str(e.value), str(e.value)


def test_release_lowers_to_one_lane_per_peer():
    ptx = compile_kernel(parse_module(GRID2X2, file="mc2.tile")).ptx
    # one mapa + remote arrive in the release (issued by the lanes whose CTA shares the row or column), no loop
    assert len(re.findall(r"mbarrier\.arrive\.shared::cluster\.b64", ptx)) == 1
    assert len(re.findall(r"mapa\.shared::cluster\.u32", ptx)) == 1
    assert len(re.findall(r"\.multicast::cluster", ptx)) == 2
    assert "%cluster_ctarank" in ptx
    # the empty barriers expect 4 consumers x (2 + 2 - 1) CTAs
    assert re.search(r"mbarrier\.init\.shared(::cta)?\.b64 \[%r\d+\], 12;", ptx), ptx[:2000]


def test_expect_tx_counts_each_modes_ctas():
    bad = GRID2X2.replace("{bytes = 4096}", "{bytes = 3072}")
    with pytest.raises(VerifyError) as e:
        verify(parse_module(bad, file="mc2.tile"))
    assert ("pipeline.acquire: expect_tx of 3072 bytes on %pipe.full[%s] but the tma.loads that complete on it "
            "deliver 4096 bytes (2 × 2048)") in str(e.value)


@pytest.mark.parametrize("old, new, message", [
    ("cluster = (2, 2)} : pipeline<1>", "cluster = (2, 3)} : pipeline<1>",
     "mc2.tile:4:3: pipeline.alloc: cluster = (2, 3): the grid's 2 × 3 = 6 CTAs must be the kernel's cluster of 4 "
     "CTAs"),
    ("cluster = (2, 2)} : pipeline<1>", "cluster = (4, 0)} : pipeline<1>",
     "mc2.tile:4:3: pipeline.alloc: cluster = (4, 0): a pipeline's CTA grid is (cm, cn), two integers ≥ 1 (CTA rank "
     "= i + cm·j)"),
    ("{multicast = 1}", "{multicast = 2}",
     "mc2.tile:27:5: tma.load: multicast = 2: a multicast mode of the pipeline's CTA grid (cm, cn) is 0 (the CTAs of "
     "the issuing CTA's grid column) or 1 (those of its grid row); true writes every CTA"),
])
def test_grid_errors(old, new, message):
    with pytest.raises(VerifyError) as e:
        verify(parse_module(GRID2X2.replace(old, new), file="mc2.tile"))
    assert message in str(e.value).splitlines(), str(e.value)


def test_a_mode_needs_a_pipeline_grid():
    one_cta = GRID2X2.replace(", cluster = (2, 2)}", "}")
    with pytest.raises(VerifyError) as e:
        verify(parse_module(one_cta, file="mc2.tile"))
    assert ("mc2.tile:27:5: tma.load: multicast = 1 names a mode of %pipe's CTA grid, but %pipe belongs to one CTA: "
            "allocate it with cluster = (cm, cn) (or cluster = C)") in str(e.value).splitlines()


PLAIN_BARRIER = """kernel @k(%x: tmap<f32, 2>[(8,32):(32,1)]) {grid = (2, 1, 1), block = (128, 1, 1), cluster = (2, 1, 1)} {
  %buf = smem.alloc {align = 128} : smem<f32>[(8,32):(32,1)]
  %bar = mbarrier.alloc {count = 1} : mbarrier<1>
  %c0 = arith.const {value = 0} : i32
  mbarrier.arrive_expect_tx %bar, %c0 {bytes = 2048}
  tma.load %x, %buf, %bar, %c0, %c0, %c0 {multicast = 0}
}
"""


def test_a_mode_on_a_plain_barrier_array_is_an_error():
    with pytest.raises(VerifyError) as e:
        verify(parse_module(PLAIN_BARRIER, file="k.tile"))
    assert ("k.tile:6:3: tma.load: multicast = 0 names a mode of a pipeline's CTA grid, but %bar is an mbarrier array "
            "(no grid): complete on a pipeline allocated with cluster = (cm, cn), or multicast = true (every CTA of "
            "the cluster)") in str(e.value).splitlines()


# -- the GEMM: names and rules -----------------------------------------------------------------------------------------

# cuBLAS's "_4x2" kernels compute Cᵀ: 4 CTAs along our N × 2 along our M, our c2x4. 4 x 2 of a 128 x 80 tile does
# not exist: B's 80 rows do not split into 4 parts of a multiple of 8 rows (validate refuses it)
TIMED_BF16 = ["h128x64s8c2x4t", "h128x64s8c4x2t", "h128x64s8c2x2t", "h128x80s7c2x4t", "h128x80s7c2x2t"]
TIMED_E4M3 = ["h128x128s4c2x4k4t", "h128x128s4c2x2k4t", "h128x96s7c2x4k4t", "h128x96s7c2x2k4t"]


@pytest.mark.parametrize("dtype, name", [("bf16", n) for n in TIMED_BF16] + [("e4m3", n) for n in TIMED_E4M3]
                         + [("bf16", "h256x128s3c2x2r"), ("bf16", "h128x64s4c2x2to1")])
def test_names_read_back(dtype, name):
    config = GemmConfig.from_name(name, dtype).validate()
    assert isinstance(config.cluster, tuple) and config.cluster_ctas == config.cluster[0] * config.cluster[1]
    assert config.name == name
    assert GemmConfig.from_name(config.name, config.dtype) == config


def test_the_1d_forms_are_the_grids_special_cases():
    assert GemmConfig(cluster=(2, 1)) == GemmConfig(cluster=2)
    assert GemmConfig(bn=112, cluster=(1, 4)) == GemmConfig(bn=112, cluster=4, cluster_along="n")
    assert GemmConfig(cluster=(1, 1)) == GemmConfig()
    for name, grid_ in (("h128x256s4c2t2", (2, 1)), ("h128x112s6c4nk4t", (1, 4)), ("h128x64s8c2x4t", (2, 4)),
                        ("h128x256s4", (1, 1))):
        config = GemmConfig.from_name(name)
        assert config.cluster_grid == grid_ and config.name == name
    c = GemmConfig(bn=64, cluster=(2, 4))
    assert c.cluster_tile == (256, 256) and c.cluster_ctas == 8
    assert GemmConfig(bn=80, cluster=(4, 2)).cluster_tile == (512, 160)


def test_grid_and_workspace_count_every_cta_of_the_cluster():
    config = GemmConfig(bn=64, cluster=(2, 4), epilogue="tma")
    assert str(grid(config)[0]) == "min(cdiv(%m, 256) * cdiv(%n, 256), cdiv(%sms, 8)) * 8"
    text = print_module(build(config))
    assert "grid = (min(cdiv(%m, 256) * cdiv(%n, 256), cdiv(%sms, 8)) * 8, 1, 1)" in text
    assert "cluster = (8, 1, 1)" in text
    assert streamk_buffers(GemmConfig(streamk=True, cluster=2), 132) == {"work": (16896, 512), "flags": (33792,)}


@pytest.mark.parametrize("fields, message", [
    (dict(cluster=(4, 4), bn=128),
     "GemmConfig.cluster = (4, 4): 4 × 4 = 16 CTAs, more than the portable cluster size of 8"),
    (dict(cluster=(2, 0)),
     "GemmConfig.cluster = (2, 0): a cluster is C CTAs or a grid (cm, cn) of CTAs along M and N, integers ≥ 1"),
    (dict(cluster=(2, 2), cluster_along="n"),
     "GemmConfig.cluster_along = 'n': cluster = (2, 2) sets the CTAs along M and along N itself: leave "
     "cluster_along = 'm'"),
    (dict(cluster=(2, 2), b_major="MN", bn=128),
     "GemmConfig.a_major = 'K', b_major = 'MN': with cluster = (2, 2) each CTA multicasts BM/2 rows of A's and BN/2 "
     "rows of B's K-major box (an MN-major operand is loaded in 64-column boxes): a_major = 'K', b_major = 'K'"),
    (dict(cluster=(2, 3), bn=96),
     "GemmConfig.bm = 128: with cluster = (2, 3) each CTA of a grid row loads BM/3 rows of A, a multiple of 8 (TMA "
     "box rows of the SW128 atom)"),
    (dict(cluster=(4, 2), bn=80),
     "GemmConfig.bn = 80: with cluster = (4, 2) each CTA of a grid column loads BN/4 rows of B, a multiple of 8 (TMA "
     "box rows of the SW128 atom)"),
    (dict(cluster=(2, 2), streamk=True),
     "GemmConfig.streamk = True: cluster = (2, 2) is built for data-parallel tiles (stream-K's pieces and partial "
     "sums count cluster tiles along M): streamk = False"),
    (dict(cluster=(2, 2), splitk=True),
     "GemmConfig.splitk = True: cluster = (2, 2): split-K's units are single CTAs (a slice's partial sums and flags "
     "count tiles of one CTA): splitk = False"),
    (dict(dtype="e4m3", cluster=(2, 2), bn=128, scales="block", grouped="contiguous"),
     "GemmConfig.grouped = 'contiguous': cluster = (2, 2) is built for dense GEMMs (a grouped GEMM's tiles take "
     "clusters of 1): grouped = 'none'"),
    (dict(dtype="e4m3", cluster=(2, 2), bn=128, scales="block"),
     "GemmConfig.scales = 'block': cluster = (2, 2) is built for per-tensor scales (scales = 'tensor')"),
])
def test_validate_names_the_broken_rule(fields, message):
    assert_refused(fields, message)


def test_boxes_and_multicasts():
    """A's map has BM/cn-row boxes multicast to the grid row (mode 1), B's BN/cm-row boxes to the grid column (mode
    0); the pipeline is the (cm, cn) grid."""
    text = print_module(build(GemmConfig.from_name("h128x80s7c2x4t")))
    assert "%a: tmap<bf16, 2>[Sw<3,4,3> o 0 o (32,(64,1)):(64,(1,0))]" in text
    assert "%b: tmap<bf16, 2>[Sw<3,4,3> o 0 o (40,(64,1)):(64,(1,0))]" in text
    assert "%pipe = pipeline.alloc {stages = 7, consumers = 8, cluster = (2, 4)} : pipeline<7>" in text
    assert [line.strip() for line in text.splitlines() if "tma.load" in line] == [
        "tma.load %a, %a_part_dst, %pipe, %s, %m_part, %kc {multicast = 1}",
        "tma.load %b, %b_part_dst, %pipe, %s, %n_part, %kc {multicast = 0}"]
    assert "%tm_own = arith.add %tmc, %rank_i : i32" in text and "%tn_own = arith.add %tnc, %rank_j : i32" in text
    assert "%tiles_m = arith.cdiv %m, %bmc : i32" in text and "%tiles_n = arith.cdiv %n, %bnc : i32" in text


# -- the GEMM on the interpreter against float64 -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype, name, shape", [
    ("bf16", "h128x64s4c2x2t", (300, 200, 70)),      # cluster tile 256 x 128: parts past M and N
    ("bf16", "h128x80s4c2x4t", (200, 328, 64)),      # 256 x 320: the second cluster's columns mostly past N
    ("bf16", "h128x128s4c4x2", (600, 250, 72)),      # 512 x 256, direct epilogue: rows wholly past M
    ("bf16", "h128x64s4c4x2r", (130, 120, 40)),      # rows epilogue, one cluster, 3 of its 4 row parts past M
    ("e4m3", "h128x128s4c2x2k4t", (260, 296, 300)),  # promote 4 over 3 k-tiles
    ("e4m3", "h128x80s4c2x4k4t", (140, 504, 200)),
    ("e4m3", "h128x64s4c4x2t", (520, 104, 130)),
])
def test_interpreter_matches_float64(dtype, name, shape):
    assert_interpreted_gemm_matches(name, dtype, shape, sm_count=16)


# -- the PTX -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, name, one_d", [("bf16", "h128x80s7c2x4t", "h128x80s7c4nt"),
                                                ("bf16", "h128x64s8c4x2t", "h128x64s8c4nt"),
                                                ("e4m3", "h128x128s4c2x4k4t", "h128x128s4c4nk4t")])
def test_ptx_registers_as_the_1d_form(dtype, name, one_d):
    """nvJitLink assembles the kernel; at the consumers' setmaxnreg budget of 240 it needs no more spill and at most
    a few more registers than the same tile in clusters of 4 along N (two multicast loads per stage, one of them
    with a mask computed from %cluster_ctarank)."""
    ptx = compile_kernel(build(GemmConfig.from_name(name, dtype))).ptx
    base = compile_kernel(build(GemmConfig.from_name(one_d, dtype))).ptx
    assert len(re.findall(r"\.multicast::cluster", ptx)) == 2
    assert len(re.findall(r"\.multicast::cluster", base)) == 1
    registers, spill = registers_at(ptx, 240)
    base_registers, base_spill = registers_at(base, 240)
    assert spill <= base_spill and registers <= base_registers + 2, (registers, spill, base_registers, base_spill)


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype, name", [("bf16", "h128x64s8c2x4t"), ("bf16", "h128x80s7c2x4t"),
                                         ("bf16", "h128x128s4c2x2"), ("e4m3", "h128x128s4c2x4k4t"),
                                         ("e4m3", "h128x96s7c2x2k4t"), ("e4m3", "h128x64s6c4x2k4t")])
@pytest.mark.parametrize("m, n, k", [(768, 1536, 4096), (300, 1064, 2000), (1000, 2000, 520), (129, 120, 4096)])
def test_gpu_matches_float64(dtype, name, m, n, k):
    """Forced through matmul / scaled_mm on fresh random inputs, against float64 by relative norm; M and N leave
    the last cluster tile's parts partly or wholly past M and N at several shapes."""
    assert_forced_gemm_matches(name, dtype, m, n, k)


def test_cost_model_counts_cluster_tiles_of_the_grid():
    """The heuristic's cost model counts a cm × cn cluster as one (cm·BM) × (cn·BN) work item on clusters of cm·cn
    CTAs: 768 × 1536 in 128 × 64 tiles is 6 × 24 = 144 tiles; in 2 × 4 clusters 3 × 6 = 18 cluster tiles on 16
    clusters of 132 CTAs (2 waves), the same critical path as 144 single tiles on 132 CTAs."""
    from ptxgen.kernels.gemm.heuristic import estimated_cost

    single = GemmConfig(bn=64, epilogue="tma")
    assert estimated_cost(single.replace(cluster=(2, 4)), 768, 1536, 12288, 132) == \
        estimated_cost(single, 768, 1536, 12288, 132)
    # 128 CTAs: 16 clusters of 8 take the 18 cluster tiles in 2 waves, 128 single CTAs the 144 tiles in 2 as well
    assert estimated_cost(single.replace(cluster=(2, 4)), 768, 1536, 12288, 128) == \
        estimated_cost(single, 768, 1536, 12288, 128)
