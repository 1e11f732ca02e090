"""``GemmConfig.scales_smem`` (DeepGEMM's design: the block scales travel with the pipeline's stages): its name and
rules, the shared-memory plan, the row-scale TV layout against layoutc's wgmma accumulator, the IR (the producer's
TMA loads of the scales on the stage's barrier, the consumers' ld.shared), the scale views the ops pass, the
interpreter against float64 products of the dequantized operands (dense with ragged M, N = 2112-like, straddling BN,
several k-blocks and both A-scale layouts; contiguous and masked grouped), the PTX against the default kernel's
registers, and the GPU."""
import re

import layoutc as lc
import numpy as np
import pytest

from ptxgen.ir.core import walk
from ptxgen.ir.ops import smem_plan
from ptxgen.kernels import (
    GemmConfig, fp8_gemm_nt, get_mn_major_tma_aligned_tensor, m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from ptxgen.kernels import fp8 as fp8_module
from ptxgen.kernels.gemm import block_scales
from ptxgen.kernels.gemm.config import SMEM_BYTES

from test_fp8_blockscaled import check, check_on_gpu, compiled_block_scaled as _compiled, operands, torch_or_skip
from test_fp8_mainloop_variants import BF16, E4M3, cdiv, config, product, rel_err


# -- name, rules, shared memory ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fields", [
    ("h128x128s5to1BwlS", dict(stages=5, overlap=1, pingpong=True, late_scales=True)),
    ("h128x128s6t2o1BwlS", dict(epilogue_split=2, overlap=1, pingpong=True, late_scales=True)),
    ("h128x192s4tBSGc", dict(bn=192, stages=4, grouped="contiguous")),
    ("h128x128s5to1BlSGm", dict(stages=5, overlap=1, late_scales=True, grouped="masked")),
])
def test_names_read_back(name, fields):
    base = dict(bn=128, stages=6, epilogue="tma", scales="block", scales_smem=True)
    base.update(fields)
    want = GemmConfig("e4m3", **base).validate()
    assert want.name == name
    assert GemmConfig.from_name(name, "e4m3") == want
    assert GemmConfig.from_name(name.replace("S", ""), "e4m3") == want.replace(scales_smem=False)


@pytest.mark.parametrize("fields, message", [
    (dict(scales="tensor", promote=2), "GemmConfig.scales_smem = True: it orders the promotion of block scales; a "
                                       "config with scales = 'tensor' has none"),
    (dict(scale_prefetch=True), "GemmConfig.scales_smem = True: the scales arrive with their stage, so there is "
                                "nothing to load a k-tile ahead (scale_prefetch): choose one"),
    (dict(overlap=1, late_scales=True, pingpong=True),
     "GemmConfig.stages = 6: 6 stages of (BM + BN) × 128 bytes and BM × 4 + 128 bytes of scales (scales_smem) and "
     "the staged C need 233312 bytes of shared memory, over the 232448 a Hopper CTA can have"),
])
def test_rules(fields, message):
    base = dict(dtype="e4m3", bn=128, stages=6, epilogue="tma", scales="block", scales_smem=True)
    base.update(fields)
    with pytest.raises(ValueError) as info:
        GemmConfig(**base).validate()
    assert str(info.value) == message


@pytest.mark.parametrize("name", ["h128x128s5to1BwlS", "h128x128s6t2o1BwlS", "h128x192s4tBS", "h256x128s3tBS",
                                  "h128x224s3BS"])
def test_shared_memory_plan_is_what_validate_counts(name):
    c = config(name)
    kernel = fp8_module.kernel_module(c).kernels[0]
    # validate counts the last stage's B slot whole; the plan ends at its box (W · 16 of the 128 bytes)
    slack = 128 - block_scales.column_blocks(c) * 16
    assert smem_plan(kernel.body.ops).total == c.smem_bytes() - slack
    assert c.smem_bytes() <= SMEM_BYTES
    assert c.smem_bytes() - c.replace(scales_smem=False).smem_bytes() == c.stages * (c.bm * 4 + 128)


@pytest.mark.parametrize("rows", [64, 128])
@pytest.mark.parametrize("bn", [16, 112, 128, 192, 256])
def test_row_scales_tv_is_the_accumulators_row(rows, bn):
    """``accumulator_rows_tv`` (derived from layoutc's wgmma accumulator) gives each (thread, value) the row of the
    accumulator element it holds: layoutc's (t, v) → m + rows·n, taken mod rows; the hand-written ``row_tv`` agrees."""
    from layoutc.hopper import wgmma_accumulator_tv

    acc = wgmma_accumulator_tv(rows, bn)
    tv = block_scales.accumulator_rows_tv(rows, bn)
    assert lc.size(tv) == lc.size(acc) == rows * bn
    assert all(tv(i) == acc(i) % rows for i in range(lc.size(acc)))
    assert all(tv(i) == block_scales.row_tv(rows, bn)(i) for i in range(lc.size(acc)))


# -- the IR ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, blocks", [("h128x128s5to1BwlS", 1), ("h128x256s3tBS", 2), ("h128x192s4tBS", 2),
                                          ("h128x224s3BS", 3), ("h128x64s8tBS", 1)])
def test_scales_ride_the_stage(name, blocks):
    """The producer's acquire expects the A and B tiles plus BM × 4 bytes of row scales and 16 bytes per B scale
    block; the scales are TMA loads in the producer and ld.shared (smem.load) in the consumers, never gmem.load."""
    c = config(name)
    kernel = fp8_module.kernel_module(c).kernels[0]
    ops = list(walk(kernel.body))
    acquire = next(op for op in ops if op.name == "pipeline.acquire")
    assert acquire.attrs["bytes"] == (c.bm + c.bn) * 128 + c.bm * 4 + blocks * 16
    loaded = [op.operands[0].name for op in ops if op.name == "tma.load"]
    assert loaded == ["a", "b", "row_scales", "col_scales"]
    assert not any(op.name == "gmem.load" for op in ops)
    reads = [op.results[0].name for op in ops if op.name == "smem.load"]
    per_k_tile = 1 + (blocks if block_scales.straddles(c) else 1)
    assert len(reads) == per_k_tile * (2 if c.overlap else 1)


# -- the ops' scale views ----------------------------------------------------------------------------------------------

def test_tma_views_of_the_scales():
    rng = np.random.default_rng(0)
    sa = rng.uniform(size=(17, 3)).astype(np.float32)
    for given in (sa, get_mn_major_tma_aligned_tensor(sa)):
        view = fp8_module.tma_row_scales(given)
        assert view.shape == (3, 17) and np.array_equal(view.T, sa)
        # either layout reaches the kernel as the same strided tensor (what lets the interpreter tests below run
        # most configurations with one layout)
        assert view.strides == (20 * 4, 4)
    given = get_mn_major_tma_aligned_tensor(sa)
    assert np.shares_memory(fp8_module.tma_row_scales(given), given)   # DeepGEMM's layout, transposed: no copy
    masked = rng.uniform(size=(2, 128, 3)).astype(np.float32)
    for given in (masked, get_mn_major_tma_aligned_tensor(masked)):
        view = fp8_module.tma_row_scales(given)     # group g's k-block kb is row g·KB + kb
        assert view.shape == (6, 128) and np.array_equal(view.reshape(2, 3, 128), masked.transpose(0, 2, 1))
        assert view.strides == (128 * 4, 4)
    given = get_mn_major_tma_aligned_tensor(masked)
    assert np.shares_memory(fp8_module.tma_row_scales(given), given)   # DeepGEMM's masked layout: no copy either
    sb = rng.uniform(size=(5, 3)).astype(np.float32)
    assert fp8_module.tma_col_scales(sb) is sb


# -- the interpreter ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, m, n, k, layout", [
    ("h128x128s5to1BwlS", 200, 2112, 640, "row-major"),    # the candidate: N = 2112 (16.5 blocks), 5 k-blocks, ragged M
    ("h128x128s6t2o1BwlS", 130, 384, 400, "row-major"),    # split epilogue; K % 128 != 0
    ("h128x128s3to1BwS", 300, 256, 512, "row-major"),      # pingpong, the product first
    ("h128x128s3tBS", 129, 272, 384, "row-major"),         # no option; N past the last whole block
    ("h128x192s3tBS", 130, 400, 512, "row-major"),         # straddling: 2 blocks
    ("h128x112s3BlS", 130, 336, 400, "row-major"),         # straddling, late
    ("h128x224s2BS", 64, 480, 256, "row-major"),           # 3 blocks
    ("h128x256s2tBS", 70, 512, 272, "row-major"),          # 2 whole blocks per tile
    ("h128x256s2tBS", 70, 512, 272, "m-major"),
    ("h256x128s2tBlS", 300, 256, 384, "row-major"),        # BM = 256: 2 m64 blocks per warpgroup
    ("h128x64s4to1BS", 129, 192, 1024, "row-major"),       # 8 k-blocks through 4 stages
    ("h128x128s3c2tBlS", 300, 256, 384, "row-major"),      # a cluster multicasting B
])
def test_dense_matches_float64(name, m, n, k, layout):
    rng = np.random.default_rng()
    a, sa, b, sb = operands(m, n, k, rng)
    given = get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa
    got = fp8_gemm_nt(a, given, b, sb, config=config(name), sm_count=3)
    want = product(a, sa, b, sb)
    check(got, want)


def test_a_scale_outside_its_row_and_block_changes_nothing_else():
    """Each row's value takes exactly its own (row, k-block) scale: doubling one scale doubles that row's term of that
    k-block and nothing else (a wrong TV layout or stage would move it)."""
    rng = np.random.default_rng(1)
    m, n, k = 130, 256, 384
    a, sa, b, sb = operands(m, n, k, rng)
    sa2 = sa.copy()
    sa2[77, 1] *= 2
    c = config("h128x128s3to1BlS")
    one = fp8_gemm_nt(a, sa, b, sb, config=c, sm_count=2).astype(np.float64)
    two = fp8_gemm_nt(a, sa2, b, sb, config=c, sm_count=2).astype(np.float64)
    changed = np.nonzero(np.any(one != two, axis=1))[0]
    assert changed.tolist() == [77]
    assert rel_err(two, product(a, sa2, b, sb)) < 4e-3


@pytest.mark.parametrize("name", ["h128x128s5to1BwlS", "h128x176s4BwS", "h128x192s3tBS"])
def test_contiguous_matches_float64(name):
    rng = np.random.default_rng()
    sizes, n, k = [100, 0, 200, 3], 400, 272
    groups = len(sizes)
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    idx = []
    for g, s in enumerate(sizes):
        idx += [g] * s + [-1] * (cdiv(s, 128) * 128 - s)
    idx = np.array(idx + [-1] * 128, np.int32)
    m = idx.size
    a = (rng.standard_normal((m, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (m, cdiv(k, 128))).astype(np.float32)
    out = np.full((m, n), 5, BF16)
    m_grouped_fp8_gemm_nt_contiguous(a, get_mn_major_tma_aligned_tensor(sa), b, sb, out, idx,
                                     config=config(name, "contiguous"), sm_count=3)
    want = np.zeros((m, n))
    for i in np.nonzero(idx >= 0)[0]:
        want[i] = product(a[i:i + 1], sa[i:i + 1], b[idx[i]], sb[idx[i]])[0]
    assert rel_err(out, want) < 4e-3
    assert not np.any(out[idx < 0].astype(np.float32))


@pytest.mark.parametrize("name, layout", [("h128x128s5to1BwlS", "row-major"), ("h128x192s3to1BS", "row-major"),
                                          ("h128x128s3tBS", "row-major"), ("h128x128s3tBS", "m-major")])
def test_masked_matches_float64(name, layout):
    """Counts 0, partial and M_max; the tiles wholly past a group's count run no k-tile and stay zero whatever their
    rows' scales (NaN there)."""
    rng = np.random.default_rng()
    counts, m_max, n, k = [0, 130, 256], 256, 400, 272
    groups = len(counts)
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    a = (rng.standard_normal((groups, m_max, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (groups, m_max, cdiv(k, 128))).astype(np.float32)
    sa[0] = np.nan
    out = np.full((groups, m_max, n), 5, BF16)
    given = get_mn_major_tma_aligned_tensor(sa) if layout == "m-major" else sa
    m_grouped_fp8_gemm_nt_masked(a, given, b, sb, out, np.array(counts, np.int32), 128,
                                 config=config(name, "masked"), sm_count=3)
    for g, c in enumerate(counts):
        assert not np.any(out[g, c:].astype(np.float32))
        if c:
            assert rel_err(out[g, :c], product(a[g, :c], sa[g, :c], b[g], sb[g])) < 4e-3


# -- PTX ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["h128x128s5to1BwlS", "h128x128s6t2o1BwlS", "h128x128s5to1BS", "h128x128s5to1BwlSGc",
                                  "h128x128s5to1BwlSGm", "h128x112s5BlS"])
def test_ptx_reads_every_scale_from_shared_memory(name):
    """nvJitLink assembles the kernel with no serialized wgmma (C7514) and no spill, like the default
    h128x128s6to1Bwl, within 16 registers of it (measured: 154 against 143 under ptxas's 168-register compile
    budget; BN = 192 spills under that budget with or without ``scales_smem``, 696-1088 bytes, which the driver's JIT
    with setmaxnreg's 240 does not); a dense kernel's PTX has no global load at all (every scale an ld.shared)."""
    default = _compiled(config("h128x128s6to1Bwl"))
    compiled = _compiled(config(name))
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes == default.spill_bytes == 0
    assert compiled.registers <= default.registers + 16
    if "G" not in name:
        assert not re.search(r"\bld\.global\b", compiled.ptx)
        assert re.search(r"\bld\.shared\.(b32|f32)\b", compiled.ptx)


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s5to1BwlS", "h128x128s6t2o1BwlS", "h128x128s5to1BS", "h128x192s4to1BwlS",
                                  "h128x112s5BlS", "h128x128s5c2to1BwlS"])
@pytest.mark.parametrize("m, n, k", [(4096, 2112, 7168), (1000, 2112, 512), (333, 7168, 2048), (77, 256, 400)])
@pytest.mark.parametrize("aligned", [True, False])
def test_gpu_matches_float64(name, m, n, k, aligned):
    torch = torch_or_skip()
    check_on_gpu(torch, config(name), m, n, k, aligned)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s5to1BwlS", "h128x192s4tBS"])
def test_gpu_grouped_match_float64(name):
    torch = torch_or_skip()
    groups, n, k, m_max = 3, 2112, 1024, 384
    counts = [0, 200, 384]
    b = (torch.randn(groups, n, k, device="cuda") * 3).to(torch.float8_e4m3fn)
    sb = torch.rand(groups, cdiv(n, 128), cdiv(k, 128), device="cuda") + 0.25
    a = (torch.randn(groups, m_max, k, device="cuda") * 3).to(torch.float8_e4m3fn)
    sa = torch.rand(groups, m_max, cdiv(k, 128), device="cuda") + 0.25
    out = m_grouped_fp8_gemm_nt_masked(a, sa, b, sb, None, torch.tensor(counts, dtype=torch.int32, device="cuda"),
                                       256, config=config(name, "masked"))
    idx = torch.tensor(sum(([g] * c + [-1] * (cdiv(c, 128) * 128 - c) for g, c in enumerate(counts)), []),
                       dtype=torch.int32, device="cuda")
    flat_a = torch.cat([a[g, :cdiv(c, 128) * 128] for g, c in enumerate(counts)])
    flat_sa = torch.cat([sa[g, :cdiv(c, 128) * 128] for g, c in enumerate(counts)])
    contiguous = m_grouped_fp8_gemm_nt_contiguous(flat_a, get_mn_major_tma_aligned_tensor(flat_sa), b, sb, None, idx,
                                                  config=config(name, "contiguous"))
    torch.cuda.synchronize()

    def want(g, rows):
        ea = sa[g, :rows].double().repeat_interleave(128, dim=1)[:, :k]
        eb = sb[g].double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
        return (a[g, :rows].double() * ea) @ (b[g].double() * eb).T

    row = 0
    for g, c in enumerate(counts):
        assert not torch.any(out[g, c:].float() != 0)
        if c:
            w = want(g, c)
            for got in (out[g, :c], contiguous[row:row + c]):
                assert (torch.linalg.norm(got.double() - w) / torch.linalg.norm(w)).item() < 2e-3
            assert not torch.any(contiguous[row + c:row + cdiv(c, 128) * 128].float() != 0)
        row += cdiv(c, 128) * 128
