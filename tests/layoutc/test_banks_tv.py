"""layoutc.hopper's bank-conflict analysis on any TV layout — swizzled thread maps included — at the access width
ptxgen's lowering emits: one rule (``vector_groups``) decides the vectors of both, and the tests pin that they agree
for the transpose and the GEMM epilogue."""
from __future__ import annotations

import pytest

import layoutc as lc
from layoutc import Layout
from layoutc.hopper import bank_conflicts, lowering_access, split_smem_layout, swizzle_chunk_bytes, vector_groups
from layoutc.errors import LayoutError

ROW_MAJOR_8x64 = Layout((8, 64), (64, 1))
# thread t: row t%8, columns 8·(t//8) … +7 of an (8, 64) bf16 tile, in the value order 0,4,1,5,2,6,3,7 (two runs
# interleaved): the 16 bytes are contiguous, the consecutive VALUES are not
INTERLEAVED = Layout(((8, 4), (2, 4)), ((1, 64), (32, 8)))


def test_vector_groups_follow_addresses_not_value_order():
    assert vector_groups([[0, 1, 2, 3], [4, 5, 6, 7]], 4) == (4, ((0, 1, 2, 3),))
    assert vector_groups([[1, 0, 3, 2]], 4) == (4, ((1, 0, 3, 2),))
    assert vector_groups([[1, 0, 5, 4]], 4) == (2, ((1, 0), (3, 2)))
    assert vector_groups([[0, 4, 1, 5, 2, 6, 3, 7]], 8) == (8, ((0, 2, 4, 6, 1, 3, 5, 7),))
    assert vector_groups([[0, 1, 2, 3], [5, 6, 7, 8]], 4) == (1, ((0,), (1,), (2,), (3,)))   # thread 1 misaligned
    assert vector_groups([[0, 0, 1, 1]], 4) == (1, ((0,), (1,), (2,), (3,)))                   # one element twice
    assert vector_groups([[2, 3, 0, 1]], 1) == (1, ((0,), (1,), (2,), (3,)))


def test_a_16_byte_access_in_any_value_order_is_accepted():
    """The lowering stores these 8 bf16 values as one st.shared.v4 (its groups follow addresses); the analysis used to
    refuse access_bytes=16 because values 0..7 are not consecutive in value order."""
    assert lowering_access(INTERLEAVED, ROW_MAJOR_8x64, "bf16") == (16, ((0, 2, 4, 6, 1, 3, 5, 7),))
    report = bank_conflicts(INTERLEAVED, ROW_MAJOR_8x64, "bf16", access_bytes=16)
    assert (report.access_bytes, len(report.per_access), report.ways, report.wavefronts) == (16, 1, 8, 32)
    assert bank_conflicts(INTERLEAVED, ROW_MAJOR_8x64, "bf16").access_bytes == 16    # the default: the lowering's
    swizzled = bank_conflicts(INTERLEAVED, lc.parse("Sw<3,4,3> o 0 o (8,64):(64,1)"), "bf16")
    assert (swizzled.access_bytes, swizzled.ways, swizzled.wavefronts) == (16, 1, 4)


def test_a_swizzled_thread_map_is_accepted():
    """``Sw<3,3,6> o 0 o TV`` (the transpose's read of a (64, 64) bf16 tile seen transposed): conflict-free, where
    the plain TV is 8-way."""
    tv = lc.parse("(((8,4),8),(8,2)):(((512,1),8),(64,4))")
    view = Layout((64, 64), (1, 64))
    swizzled = lc.ComposedLayout(lc.Swizzle(3, 3, 6), 0, tv)
    plain = bank_conflicts(tv, view, "bf16")
    report = bank_conflicts(swizzled, view, "bf16")
    assert (plain.access_bytes, plain.ways) == (2, 8)
    assert (report.access_bytes, report.ways, report.wavefronts, len(report.per_access)) == (2, 1, 16, 16)


def test_errors_name_the_operands_in_cute_notation():
    with pytest.raises(LayoutError) as e:
        bank_conflicts(lc.parse("(4,8):(8,1) o 0 o (32,4):(4,1)"), ROW_MAJOR_8x64, "bf16")
    assert "must be a Layout (thread, value) or Sw<B,M,S> o offset o Layout" in str(e.value)
    with pytest.raises(LayoutError) as e:
        bank_conflicts(Layout(((8, 4), 8), ((1, 128), 16)), ROW_MAJOR_8x64, "bf16", access_bytes=16)
    assert "values 0..7 are not contiguous in bytes: no 16-byte vector (try access_bytes=" in str(e.value)


def _lowering_plan(tv, view, dtype_bytes):
    """ptxgen's smem.load/store plan of ``tv`` over the view ``view`` at a 1024-byte aligned base."""
    from ptxgen.lower.plans import plan_smem_access

    sw, offset, inner = split_smem_layout(view)
    align = 1024 if not offset else min(1024, (offset * dtype_bytes) & -(offset * dtype_bytes))
    return plan_smem_access(tv, inner, dtype_bytes, swizzle_chunk_bytes(sw), align)


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_the_transpose_lowering_and_analysis_agree(dtype):
    from ptxgen.kernels.transpose import TransposeConfig, bank_reports, layouts

    config = TransposeConfig.default(dtype)
    ls = layouts(config)
    esize = 4 if dtype == "f32" else 2
    for tv, view, name in ((ls["store_smem"], ls["smem"], "store"), (ls["load_smem"], ls["smem_t"], "load")):
        plan = _lowering_plan(tv, view, esize)
        assert lowering_access(tv, view, dtype) == (plan.width * esize, plan.groups)
        assert plan.thread is not None       # a thread part plus constants: one address per thread
        for report in bank_reports(config)[name]:
            assert report.access_bytes == plan.width * esize and report.ways == 1


def test_the_gemm_epilogue_lowering_and_analysis_agree():
    """The 'rows' epilogue reads its staged C (K-major SW128 atoms) with row_tv — each thread one bf16 of a row, a
    warp 32 consecutive columns: 2-byte loads in both, conflict-free."""
    from ptxgen.ir.ops.smem import tile_split
    from ptxgen.kernels.gemm.config import GemmConfig
    from ptxgen.kernels.gemm.epilogue import row_tv, staged_c_layout

    config = GemmConfig(epilogue="rows")
    c_cols = config.bn // config.epilogue_split
    view = tile_split(staged_c_layout(config), 0, config.rows)[0]
    tv = row_tv(config.rows, c_cols).value   # the partition call's layout
    plan = _lowering_plan(tv, view, 2)
    access, groups = lowering_access(tv, view, config.out_dtype)
    assert (access, groups) == (plan.width * 2, plan.groups)
    assert access == 2
    report = bank_conflicts(tv, view, config.out_dtype)
    assert report.access_bytes == access and report.ways == 1
