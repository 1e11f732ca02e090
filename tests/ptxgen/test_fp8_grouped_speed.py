"""The grouped GEMMs' speed options against the dense kernel's code (issue 19): ``zero_rows_late`` (``z`` after
``Gc``/``Gm``: rows outside their group zeroed by one select on the tile's total, no validity multiply per k-tile)
and ``group_ahead`` (``n``: the producer reads its next tile's group a tile early) — in the CPU interpreter against
float64 products of the dequantized operands (ragged groups, padding rows and tiles, an empty group, NaN in padding
rows), their names and rules, the PTX and the GPU."""
import re

import numpy as np
import pytest

from ptxgen.kernels import (
    GemmConfig, get_mn_major_tma_aligned_tensor, m_grouped_fp8_gemm_nt_contiguous, m_grouped_fp8_gemm_nt_masked,
)
from test_fp8_blockscaled import compiled_block_scaled as _compiled, torch_or_skip
from test_fp8_grouped import BF16, E4M3, cdiv, product, rel_err


def config(name, grouped=None):
    return GemmConfig.from_name(name, "e4m3")


def contiguous_case(sizes, n, k, rng, padding_tiles=1):
    """Operands of a contiguous grouped GEMM: each group's rows then -1 up to a multiple of 128, then whole padding
    tiles; the padding rows of A hold NaN codes and their scales NaN (they must not reach C)."""
    idx = []
    for g, s in enumerate(sizes):
        idx += [g] * s + [-1] * (cdiv(s, 128) * 128 - s)
    idx = np.array(idx + [-1] * (128 * padding_tiles), np.int32)
    m = idx.size
    b = (rng.standard_normal((len(sizes), n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (len(sizes), cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    a = (rng.standard_normal((m, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (m, cdiv(k, 128))).astype(np.float32)
    return idx, a, sa, b, sb


def want_contiguous(idx, a, sa, b, sb):
    want = np.zeros((idx.size, b.shape[1]))
    for g in range(b.shape[0]):
        rows = np.nonzero(idx == g)[0]
        if rows.size:
            want[rows] = product(a[rows], sa[rows], b[g], sb[g])
    return want


# -- names and rules ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fields", [
    ("h128x128s5to1BSGcz", dict(zero_rows_late=True)),
    ("h128x128s5to1BSGcn", dict(group_ahead=True)),
    ("h128x128s5to1BSGczn", dict(zero_rows_late=True, group_ahead=True)),
    ("h128x128s6tBlGmzn", dict(zero_rows_late=True, group_ahead=True)),
    ("h128x128s5to1BSGcznR40-232", dict(zero_rows_late=True, group_ahead=True, registers=(40, 232))),
])
def test_names_read_back(name, fields):
    c = GemmConfig.from_name(name, "e4m3")
    assert c.name == name
    for field, value in fields.items():
        assert getattr(c, field) == value
    assert GemmConfig.from_name(c.name, "e4m3") == c


@pytest.mark.parametrize("name", ["h128x128s5to1BSz", "h128x128s5to1BSGnz", "h128x128s5to1BSGcnz"])
def test_options_without_their_grouping_are_no_name(name):
    with pytest.raises(ValueError, match=r"\[Gc\|Gm\[z\]\[n\]\]"):
        GemmConfig.from_name(name, "e4m3")


@pytest.mark.parametrize("field", ["zero_rows_late", "group_ahead"])
def test_rule_needs_a_grouping(field):
    with pytest.raises(ValueError) as info:
        GemmConfig("e4m3", bn=128, scales="block", **{field: True}).validate()
    assert str(info.value) == (f"GemmConfig.{field} = True: it concerns the groups of a grouped GEMM (grouped = "
                               "'contiguous' or 'masked'), not grouped = 'none'")


# -- the interpreter ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["h128x128s5to1BSGcz", "h128x128s5to1BSGcn", "h128x128s5to1BSGczn",
                                  "h128x64s4BGcz", "h128x192s3to1BwlSGczn"])
def test_contiguous_matches_float64(name):
    """Ragged groups (100, 0, 200, 3 rows), padding rows at each segment's end and a whole padding tile, whose A rows
    hold NaN codes and scales NaN: with ``z`` those rows are exact zeros; the others match float64."""
    check_contiguous(config(name), 272)


def check_contiguous(c, k: int) -> None:
    """``c`` on ragged groups of 100, 0, 200 and 3 rows (N = 144, K = ``k``) with padding rows at each segment's end
    and a whole padding tile, 3 CTAs, fresh random operands; with ``zero_rows_late`` the padding rows' A and scales
    NaN: padding rows exact zeros, the others within 4e-3 of float64."""
    rng = np.random.default_rng()
    idx, a, sa, b, sb = contiguous_case([100, 0, 200, 3], 144, k, rng)
    if c.zero_rows_late:
        a[idx < 0] = np.float32("nan")
        sa[idx < 0] = np.nan
    out = np.full((idx.size, 144), 5, BF16)
    m_grouped_fp8_gemm_nt_contiguous(a, get_mn_major_tma_aligned_tensor(sa), b, sb, out, idx, config=c, sm_count=3)
    got = out.astype(np.float64)
    assert not np.any(got[idx < 0])                             # padding rows and the padding tile: zeros
    want = want_contiguous(idx, a, sa, b, sb)
    assert rel_err(got[idx >= 0], want[idx >= 0]) < 4e-3


def test_zero_rows_late_changes_nothing_else():
    """``z`` gives the same C, bit for bit, as the per-k-tile validity where the inputs are finite (x · 1 = x)."""
    rng = np.random.default_rng(7)
    idx, a, sa, b, sb = contiguous_case([130, 5], 128, 384, rng, padding_tiles=0)
    outs = []
    for name in ("h128x128s5to1BSGc", "h128x128s5to1BSGczn"):
        out = np.zeros((idx.size, 128), BF16)
        m_grouped_fp8_gemm_nt_contiguous(a, get_mn_major_tma_aligned_tensor(sa), b, sb, out, idx,
                                         config=config(name), sm_count=2)
        outs.append(out.astype(np.float32))
    assert np.array_equal(outs[0], outs[1])
    assert np.count_nonzero(outs[0][idx >= 0]) > 0.9 * outs[0][idx >= 0].size


def check_masked(config, k):
    """A masked grouped GEMM with ``config`` in the interpreter, counts 0, partial and M_max (M_max 256, N 144, 3
    CTAs): rows past a group's count are zeros (their A rows NaN, so ``z`` must keep them out), the others match
    float64."""
    rng = np.random.default_rng()
    counts, m_max, n = [0, 130, 256], 256, 144
    groups = len(counts)
    b = (rng.standard_normal((groups, n, k)) * 3).astype(E4M3)
    sb = rng.uniform(0.25, 4.0, (groups, cdiv(n, 128), cdiv(k, 128))).astype(np.float32)
    a = (rng.standard_normal((groups, m_max, k)) * 3).astype(E4M3)
    sa = rng.uniform(0.25, 4.0, (groups, m_max, cdiv(k, 128))).astype(np.float32)
    for g, c in enumerate(counts):
        a[g, c:] = np.float32("nan")
    out = np.full((groups, m_max, n), 5, BF16)
    m_grouped_fp8_gemm_nt_masked(a, sa, b, sb, out, np.array(counts, np.int32), 128, config=config, sm_count=3)
    for g, c in enumerate(counts):
        assert not np.any(out[g, c:].astype(np.float32))
        if c:
            assert rel_err(out[g, :c], product(a[g, :c], sa[g, :c], b[g], sb[g])) < 4e-3


@pytest.mark.parametrize("name", ["h128x128s6tBlGmzn", "h128x128s3tBSGmz"])
def test_masked_matches_float64(name):
    """Counts 0, partial and M_max; rows past a group's count are zeros (their A rows NaN with ``z``)."""
    check_masked(config(name), 272)


# -- PTX ---------------------------------------------------------------------------------------------------------------


def _f32_multiplies(ptx: str) -> int:
    return len(re.findall(r"\bmul\.(?:rn\.)?f32\b", ptx))


@pytest.mark.parametrize("name", ["h128x128s5to1BSGcz", "h128x128s5to1BSGcn", "h128x128s5to1BSGczn"])
def test_ptx_against_the_default_and_the_dense_kernel(name):
    """nvJitLink assembles each variant with no serialized wgmma (C7514) and no spill, within the registers of the
    default grouped kernel (measured 153-158 against its 158 under ptxas's compile budget). With ``z`` the
    promotions (the peeled first k-tile's and the k-loop's) have the dense kernel's f32 multiplies, 2 + 2 (the scale
    product), where the default has 4 + 4 (row · validity, then · column); with ``n`` the producer's read of the
    next tile's group is one more global load than the default's 3 (the producer's and the two rows of a consumer
    thread)."""
    default, dense = _compiled(config("h128x128s5to1BSGc")), _compiled(config("h128x128s5to1BS"))
    compiled = _compiled(config(name))
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes == default.spill_bytes == 0
    assert compiled.registers <= default.registers
    loads = len(re.findall(r"\bld\.global\b", compiled.ptx))
    assert len(re.findall(r"\bld\.global\b", default.ptx)) == 3
    assert loads == 3 + (name.endswith("n"))
    assert _f32_multiplies(dense.ptx) == 4 and _f32_multiplies(default.ptx) == 8
    assert _f32_multiplies(compiled.ptx) == (4 if "Gcz" in name else 8)


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s5to1BSGcz", "h128x128s5to1BSGcn", "h128x128s5to1BSGczn"])
@pytest.mark.parametrize("sizes, n, k", [([1000, 0, 3000, 77, 2048], 2112, 7168), ([8192, 8192], 4096, 2048)])
def test_gpu_contiguous_matches_float64(name, sizes, n, k):
    """Fresh random operands; ragged groups with padding rows (NaN codes in A there) and an empty group: each
    group's rows against float64, padding rows exact zeros; a second launch gives the same bits."""
    torch = torch_or_skip()
    groups = len(sizes)
    b = (torch.randn(groups, n, k, device="cuda") * 3).to(torch.float8_e4m3fn)
    sb = torch.rand(groups, cdiv(n, 128), cdiv(k, 128), device="cuda") + 0.25
    idx = torch.tensor(sum(([g] * s + [-1] * (cdiv(s, 128) * 128 - s) for g, s in enumerate(sizes)), []),
                       dtype=torch.int32, device="cuda")
    m = idx.numel()
    a = torch.randn(m, k, device="cuda") * 3
    if config(name).zero_rows_late:
        a[idx < 0] = float("nan")
    a = a.to(torch.float8_e4m3fn)
    sa = torch.rand(m, cdiv(k, 128), device="cuda") + 0.25
    sa_aligned = get_mn_major_tma_aligned_tensor(sa)
    got = m_grouped_fp8_gemm_nt_contiguous(a, sa_aligned, b, sb, None, idx, config=config(name))
    again = m_grouped_fp8_gemm_nt_contiguous(a, sa_aligned, b, sb, None, idx, config=config(name))
    torch.cuda.synchronize()
    assert torch.equal(got, again)
    assert not torch.any(got[idx < 0].float() != 0)
    for g in range(groups):
        rows = torch.nonzero(idx == g).flatten()
        if rows.numel():
            ea = sa[rows].double().repeat_interleave(128, dim=1)[:, :k]
            eb = sb[g].double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
            want = (a[rows].double() * ea) @ (b[g].double() * eb).T
            err = (torch.linalg.norm(got[rows].double() - want) / torch.linalg.norm(want)).item()
            assert err < 2e-3
