"""ptxgen.kernels.transpose: out = x.T through shared memory with swizzled thread maps — the interpreter against numpy
on ragged shapes, zero bank conflicts reported by layoutc for its smem store and load, the PTX's accesses (16-byte
global vectors, 16-byte shared stores, conflict-free scalar shared loads), and the GPU against torch."""
from __future__ import annotations

import dataclasses
import re
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import interpret
from ptxgen.kernels.transpose import (
    TransposeConfig, bank_reports, build, in_swizzle, layouts, out_swizzle, tile_tv, transpose,
)
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import verify

NUMPY = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def test_layouts_come_from_make_layout_tv_and_a_swizzle():
    assert str(tile_tv(64, 64, 8, 256)) == "(((8,4),8),(8,2)):(((512,1),8),(64,4))"
    assert str(tile_tv(64, 64, 8, 256, 2)) == "(((8,4),8),(2,8)):(((512,2),8),(1,64))"
    assert str(in_swizzle(64, 64, 8)) == "Sw<3,3,-6>" and str(out_swizzle(64, 64, 8)) == "Sw<3,3,6>"
    ls = layouts(TransposeConfig("bf16"))
    assert str(ls["store_smem"]) == "Sw<3,3,-6> o 0 o (((8,4),8),(2,8)):(((512,2),8),(1,64))"
    for tv in (ls["load"], ls["store"]):     # a bijection onto the (64, 64) tile
        values = sorted(tv(i) for i in range(lc.size(tv)))
        assert values == list(range(64 * 64))
    # the two swizzles are one permutation of the elements: element (r, c) of x sits at the same smem element
    # whether the store (x-tile index r + 64c) or the load (transposed index c + 64r) names it
    sw_in, sw_out = in_swizzle(64, 64, 8), out_swizzle(64, 64, 8)
    for r in range(64):
        for c in range(64):
            si = sw_in(r + 64 * c)
            so = sw_out(c + 64 * r)
            assert (si % 64, si // 64) == (so // 64, so % 64)


CONFIGS = [TransposeConfig(dtype, threads, pair) for dtype in ("bf16", "f16", "f32") for threads in (256, 128)
           for pair in (1, 2) if (dtype, threads, pair) != ("f32", 256, 2)]


def bank_report_configs(configs):
    """``configs`` less the f16 ones: f16 has bf16's layouts (``test_f16_has_the_layouts_of_bf16``) and layoutc's
    bank model reads only an element's width, so an f16 bank report would be the bf16 one computed again."""
    return [config for config in configs if config.dtype != "f16"]


def test_f16_has_the_layouts_of_bf16():
    from test_transpose_ragged import SCALAR
    from test_transpose_sector import SECTOR

    checked = 0
    for config in CONFIGS + SCALAR + SECTOR:
        if config.dtype == "f16":
            twin = dataclasses.replace(config, dtype="bf16")
            assert {k: str(v) for k, v in layouts(config).items()} == {k: str(v) for k, v in layouts(twin).items()}
            checked += 1
    assert checked == 4 + 3 + 3


@pytest.mark.parametrize("config", bank_report_configs(CONFIGS), ids=str)
def test_zero_bank_conflicts(config):
    """layoutc's report for every warp: the smem store as 16-byte vectors, the smem load as ``pair`` elements per
    lane (the two rows of a column), 1-way each (no replays)."""
    reports = bank_reports(config.validate())
    esize = 4 if config.dtype == "f32" else 2
    assert {(r.access_bytes, r.ways, r.replays) for r in reports["store"]} == {(16, 1, 0)}
    assert {(r.access_bytes, r.ways, r.replays) for r in reports["load"]} == {(esize * config.pair, 1, 0)}


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("m, n", [(64, 64), (70, 45), (1, 100), (33, 1), (130, 200)])
def test_interpreter_matches_numpy(dtype, m, n):
    x = np.random.default_rng(m * 1000 + n).standard_normal((m, n)).astype(NUMPY[dtype])
    out = transpose(x)
    assert out.shape == (n, m) and out.dtype == x.dtype
    assert np.array_equal(out, x.T)


def test_verified_and_into_out():
    config = TransposeConfig("f32", 256, 1)
    module = build(config)
    verify(module)
    x = np.arange(40 * 50, dtype=np.float32).reshape(40, 50)
    out = np.full((50, 40), -1, np.float32)
    assert transpose(x, out, config=config) is out
    assert np.array_equal(out, x.T)


@pytest.mark.parametrize("config, shared_loads", [
    (TransposeConfig.default("bf16"), "ld.shared.v2.b16"), (TransposeConfig.default("f32"), "ld.shared.v2.b32"),
    (TransposeConfig("f16", 128, 1), "ld.shared.b16"), (TransposeConfig("f32", 256, 1), "ld.shared.b32")], ids=str)
def test_ptx_accesses(config, shared_loads):
    """Per thread: 16-byte global loads and stores and shared stores (one per vector), and one shared load per
    ``pair`` elements (the two rows of a column) — the widths and counts layoutc's bank report has."""
    spec = Specialization.of(x=TensorSpec(1, True, 16), out=TensorSpec(1, True, 16))
    ptx = compile_kernel(build(config).kernels[0], spec).ptx
    bm, bn = config.tile
    vectors = bm * bn // config.vector // config.threads
    loads = vectors * config.vector // config.pair
    assert Counter(re.findall(r"(?:ld|st)\.(?:global|shared)\S*", ptx)) == Counter({
        "ld.global.v4.b32": vectors, "st.shared.v4.b32": vectors, shared_loads: loads, "st.global.v4.b32": vectors})
    reports = bank_reports(config)
    assert reports["store"][0].access_bytes == 16 and len(reports["store"][0].per_access) == vectors
    assert len(reports["load"][0].per_access) == loads


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"transpose: x has dtype numpy int32; transpose takes f32 \(torch.float32, numpy.float32\) or "
                                          r"bf16 \(torch.bfloat16, ml_dtypes.bfloat16\) or f16"):
        transpose(np.zeros((4, 4), np.int32))
    with pytest.raises(ValueError, match=r"transpose: x must be 2-D \(M, N\) \(or 0-d or 1-d, its own transpose\), "
                                         r"not of shape \(2, 4, 4\)"):
        transpose(np.zeros((2, 4, 4), np.float32))
    with pytest.raises(ValueError, match=r"transpose: out has shape \(4, 4\), but x.T has shape \(5, 4\)"):
        transpose(np.zeros((4, 5), np.float32), np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="TransposeConfig.threads = 96 must be a multiple of 32, at most 256"):
        TransposeConfig("bf16", 96).validate()
    with pytest.raises(ValueError, match="whose product with pair = 2 divides the 256 16-byte vectors of a 32 x 32"):
        TransposeConfig("f32", 256, 2).validate()
    with pytest.raises(ValueError, match="TransposeConfig.pair must be 1 or 2, not 4"):
        TransposeConfig("bf16", 256, 4).validate()
    with pytest.raises(ValueError, match="TransposeConfig.dtype must be one of f32, bf16, f16, not 'e4m3'"):
        TransposeConfig("e4m3").validate()
    assert transpose(np.zeros((0, 3), np.float32)).shape == (3, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("m, n", [(4096, 4096), (1000, 777), (1, 4099), (8191, 3), (129, 65)])
def test_gpu_matches_torch(dtype, m, n):
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
    out = transpose(x)
    torch.cuda.synchronize()
    assert torch.equal(out, x.t().contiguous())


def test_example_and_module_doctests():
    import doctest
    import importlib.util
    import pathlib

    import ptxgen.kernels.transpose as module

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "transpose.py"
    spec = importlib.util.spec_from_file_location("example_transpose", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for m in (example, module):
        failures, tried = doctest.testmod(m)
        assert failures == 0 and tried > 0
