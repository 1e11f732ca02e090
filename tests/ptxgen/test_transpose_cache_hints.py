"""ptxgen.kernels.transpose's cache hints (``TransposeConfig.x_cache`` / ``out_cache``): gmem.load/store's ``cache``
on x's loads and out's stores of the ``sector_vector*`` accesses. A hint changes the PTX qualifiers only: the IR of a
config without hints has no ``cache`` attribute, the interpreter's result is the same, and the rules name the field."""
from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels.transpose import TransposeConfig, build, transpose
from ptxgen.lower import Specialization, TensorSpec, compile_kernel

from gpu_torch import torch_or_skip

PAIRS = TransposeConfig("bf16", 256, 1, "sector_vector_pair_x", 64)
HINTED = replace(PAIRS, x_cache="evict_first", out_cache="streaming")


def global_accesses(config):
    spec = Specialization.of(x=TensorSpec(1, False, 1), out=TensorSpec(1, False, 1))
    compiled = compile_kernel(build(config).kernels[0], spec)
    return Counter(re.findall(r"\b(?:ld|st)\.global\S*", compiled.ptx)), compiled


def test_hints_change_the_qualifiers_only():
    """Every x load gets ``.L1::evict_first`` and every out store ``.cs``, in the same numbers and widths as without
    hints (packed pair loads, 16-byte stores), at the same registers and no spill."""
    plain, plain_compiled = global_accesses(PAIRS)
    hinted, hinted_compiled = global_accesses(HINTED)
    assert plain["ld.global.b32"] > 0 and plain["st.global.v4.b32"] > 0
    expected = Counter({k.replace("ld.global.", "ld.global.L1::evict_first.").replace("st.global.", "st.global.cs."): v
                        for k, v in plain.items()})
    assert hinted == expected
    assert hinted_compiled.registers == plain_compiled.registers and hinted_compiled.spill_bytes == 0


def test_no_hint_no_attribute():
    """``normal`` (the default) leaves the IR as it was: no gmem access carries ``cache``."""
    ops = [op for op in build(PAIRS).kernels[0].body.ops if op.name in ("gmem.load", "gmem.store")]
    assert ops and all("cache" not in op.attrs for op in ops)
    hinted = [op for op in build(HINTED).kernels[0].body.ops if op.name in ("gmem.load", "gmem.store")]
    assert {str(op.attrs["cache"]) for op in hinted if op.name == "gmem.load"} == {"evict_first"}
    assert {str(op.attrs["cache"]) for op in hinted if op.name == "gmem.store"} == {"streaming"}


@pytest.mark.parametrize("config", [HINTED, replace(HINTED, access="sector_vector_scalar", rows=128),
                                    replace(HINTED, x_cache="no_allocate", out_cache="normal")], ids=str)
def test_interpreter_same_result(config):
    x = np.random.default_rng(3).standard_normal((131, 67)).astype(ml_dtypes.bfloat16)
    out = np.zeros((67, 131), ml_dtypes.bfloat16)
    interpret(build(config), {"x": x, "out": out})
    assert np.array_equal(out, x.T)


def test_rules():
    with pytest.raises(ValueError, match=r"^TransposeConfig.x_cache = 'evict_frst' must be one of normal, evict_first, "
                                         r"evict_last, no_allocate, streaming, l2_evict_first, l2_evict_last "
                                         r"\(did you mean 'evict_first'\?\)$"):
        replace(PAIRS, x_cache="evict_frst").validate()
    with pytest.raises(ValueError, match=r"^TransposeConfig.out_cache = 'streaming' applies to the sector_vector "
                                         r"accesses only \('sector_vector', .*\), not 'sector'$"):
        TransposeConfig("bf16", 256, 1, "sector", out_cache="streaming").validate()


def test_bench_names_round_trip():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_transpose

    for name, (x_cache, out_cache) in {"256/1/sectorvp64/evict_first": ("evict_first", "normal"),
                                       "256/1/sectorvp64/evict_first+streaming": ("evict_first", "streaming"),
                                       "256/1/sectorvp64": ("normal", "normal")}.items():
        config = bench_transpose.variant_config("bf16", name)
        assert (config.x_cache, config.out_cache) == (x_cache, out_cache)
        assert "/256/1" + bench_transpose.label_suffix(config) + "64" + bench_transpose.hints_suffix(config) == \
            "/" + name
    with pytest.raises(SystemExit, match="the cache hints are x_cache"):
        bench_transpose.variant_config("bf16", "256/1/sectorvp64/a+b+c")


@pytest.mark.gpu
@pytest.mark.parametrize("config", [HINTED, replace(HINTED, x_cache="no_allocate", out_cache="normal"),
                                    replace(HINTED, dtype="f16", rows=128)], ids=str)
def test_gpu_matches_torch(config):
    torch = torch_or_skip()
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[config.dtype]
    for m, n in ((8191, 12289), (257, 129)):
        x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_dtype)
        out = transpose(x, config=config)
        torch.cuda.synchronize()
        assert torch.equal(out, x.t().contiguous()), (m, n)
