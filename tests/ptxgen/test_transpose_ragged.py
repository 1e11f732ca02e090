"""ptxgen.kernels.transpose for rows that are not 16-byte aligned (odd pitches such as 8191 x 12289 bf16):
``access="scalar"`` — element accesses with warps on contiguous elements, an element XOR swizzle in shared memory —
against numpy in the interpreter on ragged shapes, zero bank conflicts reported by layoutc, the PTX's accesses for
unaligned tensors, the choice ``transpose`` makes, and the GPU against torch."""
from __future__ import annotations

import re
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from ptxgen.kernels.transpose import (
    TransposeConfig, bank_reports, build, layouts, rows_aligned, scalar_in_swizzle, scalar_out_swizzle, scalar_tv,
    transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel

from test_transpose import bank_report_configs

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
SCALAR = [TransposeConfig(dtype, threads, 1, "scalar") for dtype in ("bf16", "f16", "f32")
          for threads in (64, 128, 256) if not (dtype != "f32" and threads < 64)]


def test_layouts():
    assert str(scalar_tv(64, 64, 256)) == "((64,4),16):((64,1),4)"
    assert str(scalar_tv(32, 32, 128)) == "((32,4),8):((32,1),4)"
    assert str(scalar_in_swizzle(64, 64, 2)) == "Sw<5,0,-7>" and str(scalar_out_swizzle(64, 64, 2)) == "Sw<5,1,5>"
    assert str(scalar_in_swizzle(32, 32, 4)) == "Sw<5,0,-5>" and str(scalar_out_swizzle(32, 32, 4)) == "Sw<5,0,5>"
    for rows, esize in ((64, 2), (32, 4)):
        tv = scalar_tv(rows, rows, 128)
        assert sorted(tv(i) for i in range(lc.size(tv))) == list(range(rows * rows))   # a bijection onto the tile
        sw_in, sw_out = scalar_in_swizzle(rows, rows, esize), scalar_out_swizzle(rows, rows, esize)
        for r in range(rows):
            for c in range(rows):          # one permutation: x's (r, c) and out's (c, r) name one smem element
                si, so = sw_in(r + rows * c), sw_out(c + rows * r)
                assert (si % rows, si // rows) == (so // rows, so % rows)
                assert si % rows == r                                  # rows stay put: only columns move


@pytest.mark.parametrize("config", bank_report_configs(SCALAR), ids=str)
def test_zero_bank_conflicts(config):
    """Every warp's element store (a row's 32 contiguous elements) and element load (one column's 32 rows) is
    1-way in layoutc's report."""
    reports = bank_reports(config.validate())
    assert {(r.ways, r.replays) for rs in reports.values() for r in rs} == {(1, 0)}
    assert {r.access_bytes for r in reports["store"]} == {4 if config.dtype == "f32" else 2}


@pytest.mark.parametrize("config", [TransposeConfig.default(d, aligned=False) for d in ("bf16", "f16", "f32")] +
                         [TransposeConfig("bf16", 128, 1, "scalar"), TransposeConfig("f32", 64, 1, "scalar")], ids=str)
@pytest.mark.parametrize("m, n", [(70, 45), (1, 101), (33, 1), (131, 197), (65, 64)])
def test_interpreter_matches_numpy(config, m, n):
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[config.dtype])
    out = transpose(x, config=config)
    assert np.array_equal(out, x.T)


def test_transpose_picks_element_accesses_for_unaligned_rows():
    assert rows_aligned(np.zeros((64, 128), ml_dtypes.bfloat16), None, 64, 128)
    assert not rows_aligned(np.zeros((64, 127), ml_dtypes.bfloat16), None, 64, 127)     # x's pitch 254 bytes
    assert not rows_aligned(np.zeros((63, 128), ml_dtypes.bfloat16), None, 63, 128)     # out's pitch 126 bytes
    assert not rows_aligned(np.zeros((62, 128), np.float32), None, 62, 128)            # 248 bytes
    assert TransposeConfig.default("bf16", aligned=False) == TransposeConfig("bf16", 256, 1, "scalar")
    x = np.arange(9 * 7, dtype=np.float32).reshape(9, 7)
    assert np.array_equal(transpose(x), x.T)


@pytest.mark.parametrize("config, width", [(TransposeConfig.default("bf16", aligned=False), "b16"),
                                           (TransposeConfig.default("f32", aligned=False), "b32")], ids=str)
def test_ptx_accesses_of_unaligned_rows(config, width):
    """Unaligned tensors (the launcher's specialization without 16-byte alignment): one element access per value on
    each side, no spill."""
    spec = Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    bm, bn = config.tile
    values = bm * bn // config.threads
    assert Counter(re.findall(r"(?:ld|st)\.(?:global|shared)\S*", compiled.ptx)) == Counter({
        f"ld.global.{width}": values, f"st.shared.{width}": values, f"ld.shared.{width}": values,
        f"st.global.{width}": values})
    assert compiled.spill_bytes == 0
    assert len(bank_reports(config)["load"][0].per_access) == values


def test_bad_config():
    with pytest.raises(ValueError, match=r"^TransposeConfig.access must be 'vector', 'scalar', 'sector', "
                                         r"'sector_vector', 'sector_vector_scalar', 'sector_vector_aligned_x', "
                                         r"'sector_vector_async_x' or 'sector_vector_pair_x', not 'tma'$"):
        TransposeConfig("bf16", 256, 1, "tma").validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 32 with access = 'scalar' must be the tile's "
                                         r"64 columns times a power of two, at most 256 \(8 warps\), with pair = 1 "
                                         r"\(not 1\)$"):
        TransposeConfig("bf16", 32, 1, "scalar").validate()
    with pytest.raises(ValueError, match=r"with pair = 1 \(not 2\)$"):
        TransposeConfig("bf16", 256, 2, "scalar").validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.threads = 192 with access"):
        TransposeConfig("bf16", 192, 1, "scalar").validate()
    assert str(layouts(TransposeConfig("f32", 128, 1, "scalar"))["load_smem"]) == \
        "Sw<5,0,5> o 0 o ((32,4),8):((32,1),4)"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("m, n", [(8191, 1229), (1000, 777), (1, 4099), (8191, 3), (129, 65), (64, 127)])
@pytest.mark.parametrize("access", ["vector", "scalar"])
def test_gpu_matches_torch_on_unaligned_rows(dtype, m, n, access):
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    config = TransposeConfig.default(dtype, aligned=access == "vector")
    out = transpose(x, config=config)
    torch.cuda.synchronize()
    assert torch.equal(out, x.t().contiguous())
