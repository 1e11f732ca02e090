"""The block-scaled mainloop's options (``GemmConfig.scale_prefetch``, ``pingpong``, ``late_scales``, ``overlap = 1``)
and the straddling tiles' column scales (one load per B scale block, a select per boundary): names, the IR's order
(the prefetched scales are multiplied after the wgmmas are waited for), the interpreter against float64 products of
the dequantized operands (dense, contiguous and masked), the PTX (no serialized wgmma, no spill at the heuristic's
width, a few loads per k-tile whatever BN), the validation rules, and the GPU against float64."""
import re

import numpy as np
import pytest

from ptxgen.ir.core import walk
from ptxgen.kernels import (
    GemmConfig, fp8_gemm_nt, get_mn_major_tma_aligned_tensor, m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import block_scales

from test_fp8_blockscaled import check
from test_fp8_grouped import BF16, E4M3, cdiv, product, rel_err


def config(name, grouped="none"):
    return GemmConfig.from_name(name, "e4m3").replace(grouped=grouped).validate()


# -- names and rules ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fields", [
    ("h128x128s6tBf", dict(scale_prefetch=True)),
    ("h128x128s6tBw", dict(pingpong=True)),
    ("h128x128s6to1BfwGc", dict(overlap=1, scale_prefetch=True, pingpong=True, grouped="contiguous")),
    ("h128x192s4to1BfGm", dict(bn=192, stages=4, overlap=1, scale_prefetch=True, grouped="masked")),
    ("h128x128s6to1BwlGc", dict(overlap=1, pingpong=True, late_scales=True, grouped="contiguous")),
])
def test_names_read_back(name, fields):
    base = dict(bn=128, stages=6, epilogue="tma", scales="block")
    base.update(fields)
    want = GemmConfig("e4m3", **base).validate()
    assert want.name == name
    assert GemmConfig.from_name(name, "e4m3") == want


# -- the IR ------------------------------------------------------------------------------------------------------------

def _block_loop(name):
    kernel = fp8_module.kernel_module(config(name)).kernels[0]
    loop = next(op for op in walk(kernel.body) if op.name == "scf.for"
                and any(arg.name == "kt_b" for arg in op.regions[0].args))
    return loop, loop.regions[0].ops


@pytest.mark.parametrize("name, order", [("h128x128s6tB", "product first"), ("h128x128s6tBf", "prefetched"),
                                         ("h128x192s4to1Bfw", "prefetched"), ("h128x128s6tBl", "late"),
                                         ("h128x192s4tBwl", "late"), ("h128x64s8xBl", "late")])
def test_where_the_scales_are_read(name, order):
    """Without options the scale product precedes the wgmmas' issue (where ptxas leaves it, waiting for the loads);
    ``scale_prefetch`` carries the scales in the loop (arguments beyond (kt, total, counter)) and loads k-tile
    kt + 1's; ``late_scales``: every op that reads a scale load comes after the wgmmas' wait."""
    loop, ops = _block_loop(name)
    names = [op.name for op in ops]
    wait = names.index("wgmma.wait")
    mma = names.index("wgmma.mma")
    products = [i for i, op in enumerate(ops) if op.name == "frag.mul" and op.results[0].name == "scale"]
    tiles = [op for op in ops if op.name == "gmem.tile"]
    loaded = {id(op.results[0]) for op in ops if op.name == "gmem.load"}
    readers = [i for i, op in enumerate(ops) if any(id(v) in loaded for v in op.operands)]
    if order == "product first":
        assert len(loop.regions[0].args) == 3 and products and products[0] < mma
    elif order == "prefetched":
        assert len(loop.regions[0].args) > 3
        assert tiles and all(any(v.name == "kt_next" for v in op.operands) for op in tiles)
    else:
        assert len(loop.regions[0].args) == 3 and not products
        assert readers and min(readers) > wait


def test_pingpong_orders_the_warpgroups_issues():
    """``pingpong``: the k-tile's wgmmas sit between two branches on the warpgroup, each holding the turn's named
    barrier (warpgroup 1 waits before its issue, warpgroup 0 arrives after its own)."""
    _loop, ops = _block_loop("h128x128s6tBfw")
    names = [op.name for op in ops]
    mma = names.index("wgmma.mma")
    branches = [i for i, n in enumerate(names) if n == "scf.if"
                and any(inner.name == "barrier.named" for inner in walk(ops[i].regions[0]))]
    assert len(branches) == 2 and branches[0] < mma < branches[1]
    barriers = [inner for i in branches for inner in walk(ops[i].regions[0]) if inner.name == "barrier.named"]
    assert {(int(op.attrs["id"]), int(op.attrs["threads"])) for op in barriers} == {(2, 256)}


# -- the interpreter ---------------------------------------------------------------------------------------------------

DENSE = ["h128x128s6tBw", "h128x128s6to1B", "h128x128s6to1Bfw", "h128x192s4to1Bfw", "h128x176s5Bf", "h128x224s3Bfw",
         "h128x112s6Bf", "h128x160s5Bw", "h256x64s4to1B", "h128x128s6c2to1Bf", "h128x32s8xBfw", "h128x128s6tBl",
         "h128x128s6to1Bwl", "h128x192s4to1Bwl", "h128x176s5Bl", "h256x64s4Bl", "h128x32s8xBl"]
# Each variant with one A-scale layout, the two layouts alternating: every variant reads %row_scales (or, swapped,
# %col_scales) through the same gmem.tile of block_scales.scale_loads, whose strides are the tensor's, so the layout
# is a property of that one read, not of the variant. Both layouts still meet the prefetched (f), pingpong (w), late
# (l), overlapped (o1), BM = 256 and swapped (x) variants.
DENSE_LAYOUT = {name: ("row-major", "m-major")[i % 2] for i, name in enumerate(DENSE)}
DENSE_LAYOUT["h128x32s8xBl"] = "m-major"     # the other swapped variant is row-major


@pytest.mark.parametrize("name, layout", list(DENSE_LAYOUT.items()))
def test_dense_variants_match_float64(name, layout):
    """Ragged M, N (tiles starting at several offsets into B's scale blocks: BN = 176's tile at column 352 spans
    three), a partial last K block, 3 CTAs with several tiles each (the overlapped epilogue stores a held tile)."""
    rng = np.random.default_rng()
    c = config(name)
    m, n, k = (29 if c.swap_ab else 300), 400, 400
    a = (rng.standard_normal((m, k)) * 3).astype(E4M3)
    b = (rng.standard_normal((n, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (m, cdiv(k, 128))).astype(np.float32)
    sb = rng.uniform(0.25, 4.0, (cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    scales = get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa
    out = fp8_gemm_nt(a, scales, b, sb, config=c, sm_count=3)
    check(out, product(a, sa, b, sb))


@pytest.mark.parametrize("name", ["h128x128s6to1Bfw", "h128x192s4to1Bf", "h128x176s5Bw", "h128x128s6to1Bwl",
                                  "h128x176s5Bl"])
def test_contiguous_variants_match_float64(name):
    rng = np.random.default_rng()
    sizes, n, k = [100, 0, 200, 3], 400, 272
    groups = len(sizes)
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    idx = []
    for g, s in enumerate(sizes):
        idx += [g] * s + [-1] * (cdiv(s, 128) * 128 - s)
    idx = np.array(idx + [-1] * 128, np.int32)                      # and a whole padding tile
    m = idx.size
    a = (rng.standard_normal((m, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (m, cdiv(k, 128))).astype(np.float32)
    out = np.full((m, n), 5, BF16)
    m_grouped_fp8_gemm_nt_contiguous(a, sa, b, sb, out, idx, config=config(name, "contiguous"), sm_count=3)
    want = np.zeros((m, n))
    for i in np.nonzero(idx >= 0)[0]:
        want[i] = product(a[i:i + 1], sa[i:i + 1], b[idx[i]], sb[idx[i]])[0]
    assert rel_err(out, want) < 4e-3
    assert not np.any(out[idx < 0].astype(np.float32))


@pytest.mark.parametrize("name", ["h128x128s6to1Bfw", "h128x192s4to1Bf", "h128x128s6to1Bwl"])
def test_masked_variants_match_float64(name):
    rng = np.random.default_rng()
    counts, m_max, n, k = [0, 130, 256], 256, 400, 272
    groups = len(counts)
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    a = (rng.standard_normal((groups, m_max, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (groups, m_max, cdiv(k, 128))).astype(np.float32)
    out = np.full((groups, m_max, n), 5, BF16)
    m_grouped_fp8_gemm_nt_masked(a, get_mn_major_tma_aligned_tensor(sa), b, sb, out, np.array(counts, np.int32), 128,
                                 config=config(name, "masked"), sm_count=3)
    for g, c in enumerate(counts):
        assert not np.any(out[g, c:].astype(np.float32))
        if c:
            assert rel_err(out[g, :c], product(a[g, :c], sa[g, :c], b[g], sb[g])) < 4e-3


# -- PTX ---------------------------------------------------------------------------------------------------------------

def _compiled(c):
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    specs = {"row_scales": TensorSpec(2 if c.grouped == "masked" else 1, True, 4),
             "col_scales": TensorSpec(1, True, 4)}
    if c.epilogue != "tma":
        specs["c"] = TensorSpec(1, True, 16)
    return compile_kernel(fp8_module.kernel_module(c).kernels[0], Specialization.of(**specs))


@pytest.mark.parametrize("name", ["h128x128s6tBfw", "h128x128s6to1Bf", "h128x128s6to1BfwGc", "h128x128s6to1BfwGm",
                                  "h128x128s6to1Bwl", "h128x128s6to1BwlGc", "h128x128s6to1BwlGm"])
def test_variants_at_the_heuristics_width_compile_without_spills(name):
    """BN = 128 with every option fits ptxas's 168-register compile budget (nvJitLink ignores setmaxnreg) with no
    wgmma serialized (C7514)."""
    compiled = _compiled(config(name))
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes == 0


@pytest.mark.parametrize("bn", [112, 160, 176, 192, 224])
def test_straddling_column_scales_are_one_load_per_block(bn):
    """A straddling tile's k-tile reads its rows' 2 scales and one scale per B block it touches (the first k-tile's
    before the loop, the next one's in it), where the repeated-view windows took one load per 8-column group."""
    c = GemmConfig("e4m3", bn=bn, stages=3, scales="block", scale_prefetch=True).validate()
    compiled = _compiled(c)
    assert "C7514" not in compiled.info_log
    loads = len(re.findall(r"\bld\.global\.b32\b", compiled.ptx))
    assert loads == 2 * (2 + block_scales.column_windows(bn))


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s6tB", "h128x128s6tBl", "h128x128s6tBwl", "h128x128s6to1Bwl",
                                  "h128x128s6tBfw", "h128x192s4to1Bwl", "h128x176s5Bl", "h128x224s3Bwl",
                                  "h128x128s6c2to1Bwl"])
@pytest.mark.parametrize("m, n, k", [(4096, 2112, 7168), (1000, 2112, 512), (333, 7168, 2048)])
def test_gpu_variants_match_float64(name, m, n, k):
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    from ptxgen.kernels import per_block_cast_to_fp8, per_token_cast_to_fp8

    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a, sa = per_token_cast_to_fp8(x, tma_aligned_scales=True)
    b, sb = per_block_cast_to_fp8(w)
    ea = sa.double().repeat_interleave(128, dim=1)[:, :k]
    eb = sb.double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    want = (a.double() * ea) @ (b.double() * eb).T
    got = fp8_gemm_nt(a, sa, b, sb, config=config(name))
    torch.cuda.synchronize()
    err = (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()
    assert err < 2e-3


@pytest.mark.parametrize("name", [None, "h128x128s6to1BfwGm", "h128x128s6to1BGm", "h128x128s6to1BwlGm"])
def test_masked_tiles_past_their_rows_stay_zero_whatever_their_scales(name):
    """A masked tile wholly past its group's count runs no k-tile; with the overlapped epilogue its (empty) first
    promotion must not read those rows' scales either: NaN scales there still give zeros."""
    rng = np.random.default_rng()
    counts, m_max, n, k = [0, 128, 256], 256, 144, 272
    groups = len(counts)
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    a = (rng.standard_normal((groups, m_max, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (groups, m_max, cdiv(k, 128))).astype(np.float32)
    sa[0] = np.nan
    sa[1, 128:] = np.nan
    out = np.full((groups, m_max, n), 5, BF16)
    m_grouped_fp8_gemm_nt_masked(a, sa, b, sb, out, np.array(counts, np.int32), 128,
                                 config=config(name, "masked") if name else None, sm_count=2)
    assert np.all(out[0].astype(np.float32) == 0) and np.all(out[1, 128:].astype(np.float32) == 0)
    assert rel_err(out[1, :128], product(a[1, :128], sa[1, :128], b[1], sb[1])) < 4e-3
    assert rel_err(out[2], product(a[2], sa[2], b[2], sb[2])) < 4e-3


# -- the benchmark's sweep -----------------------------------------------------------------------------------------------

def test_bench_fp8_variants_are_checked_before_they_are_timed():
    """``bench_fp8.py --variants``: a name becomes the case's grouping; a per-tensor name or a grouping the rules
    refuse is recorded as refused, a failing build as refused, a wrong result as wrong — none of them timed."""
    import pathlib
    import sys
    import types

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import bench_fp8
    finally:
        sys.path.pop(0)
    assert bench_fp8.variant_config("h128x128s6to1Bfw", "contiguous").name == "h128x128s6to1BfwGc"
    with pytest.raises(ValueError, match="^variant h128x128s6t: block-scaled configurations end in B"):
        bench_fp8.variant_config("h128x128s6t")
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    args = types.SimpleNamespace(variants=["h128x128s6tBf", "h128x192s4tBf", "h128x128s6c2tBf", "h128x64s8tBf"])
    errors = {"h128x128s6tBfGm": 1e-3, "h128x192s4tBfGm": 0.5}

    def make_site(c):
        if c.bn == 64:
            raise RuntimeError("ptxas failed\nmore")
        return f"site {c.name}", c.name

    row, fns = {}, {}
    bench_fp8.add_variants(torch, row, fns, args, make_site, lambda out: errors[out], "masked")
    assert fns == {"v:h128x128s6tBf": "site h128x128s6tBfGm"}
    entries = row["variants"]
    assert entries["h128x192s4tBf"]["wrong"] and entries["h128x192s4tBf"]["err"] == 0.5
    assert entries["h128x128s6c2tBf"]["refused"].startswith("GemmConfig.cluster = 2")
    assert entries["h128x64s8tBf"]["refused"] == "RuntimeError: ptxas failed"


def test_contiguous_without_groups_writes_zeros():
    """B of 0 groups: every row of A is padding, so ``out`` is all zeros (no launch; the op allocates C with
    ``empty``, the kernels writing every element otherwise)."""
    a = np.ones((128, 256), E4M3)
    sa = np.ones((128, 2), np.float32)
    out = np.full((128, 32), 5, BF16)
    got = m_grouped_fp8_gemm_nt_contiguous(a, sa, np.zeros((0, 32, 256), E4M3), np.zeros((0, 1, 2), np.float32), out,
                                           np.full(128, -1, np.int32))
    assert got is out and not np.any(out.astype(np.float32))
