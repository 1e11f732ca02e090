"""``pipeline.alloc {per_warpgroup = true}``: a stage is released with one arrival per consumer warpgroup (from its
first warp) instead of one per warp — the interpreter's meaning (the cluster test kernel still fills every CTA), the
refusal of a warp releasing without the rest of its warpgroup, and the GEMM's ``release_per_warpgroup`` configs on
the interpreter against float64."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import InterpreterError
from ptxgen.ir.text import parse_module, print_module
from ptxgen.kernels import matmul
from ptxgen.kernels.gemm import GemmConfig
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify
from test_cluster import MULTICAST, run_multicast
from test_gemm_cluster_n import assert_forced_gemm_matches

PER_WARPGROUP = MULTICAST.replace("{stages = 1, consumers = 4, cluster = 2}",
                                  "{stages = 1, consumers = 1, cluster = 2, per_warpgroup = true}")


def test_one_arrival_per_warpgroup_releases_the_stage():
    """The cluster of 2 multicast kernel with its one warpgroup releasing once: every CTA still holds the tile, and
    the text prints back."""
    assert PER_WARPGROUP != MULTICAST
    assert print_module(parse_module(PER_WARPGROUP)) == PER_WARPGROUP
    x, y = run_multicast(PER_WARPGROUP)
    for b in range(4):
        assert np.array_equal(y[16 * b:16 * b + 16], x), b


def test_a_warp_alone_is_refused():
    text = PER_WARPGROUP.replace("  pipeline.release %pipe, %s2\n", """\
  %c32 = arith.const {value = 32} : i32
  %warp0 = arith.cmp %t, %c32 {pred = lt} : i1
  scf.if %warp0 {
    pipeline.release %pipe, %s2
  }
""")
    with pytest.raises(InterpreterError, match=r"pipeline.release: warp 0 releases without the rest of warpgroup 0: "
                                               r"%pipe \(per_warpgroup\) is released by whole warpgroups"):
        run_multicast(text)


def test_attribute_must_be_a_bool():
    with pytest.raises(VerifyError) as info:
        verify(parse_module(PER_WARPGROUP.replace("per_warpgroup = true", "per_warpgroup = 1"), file="mc.tile"))
    assert str(info.value) == "mc.tile:3:3: pipeline.alloc: attribute 'per_warpgroup' must be true or false, not 1"


def test_lowers_with_one_arriving_warp_per_warpgroup():
    """The release's branch also tests the warp within the warpgroup (of this kernel's 128 threads, LLVM folds
    thread & 0x60 == 0 into thread < 32); nvJitLink assembles it."""
    plain = compile_kernel(parse_module(MULTICAST).kernels[0])
    ours = compile_kernel(parse_module(PER_WARPGROUP).kernels[0])
    assert re.search(r"setp\.gt\.u32\s+%p\d+, %r\d+, 31;", ours.ptx)
    assert not re.search(r"setp\.gt\.u32\s+%p\d+, %r\d+, 31;", plain.ptx)
    assert ours.registers is not None


@pytest.mark.parametrize("name, shape", [("h128x64s3te", (200, 152, 300)), ("h128x64s3c2te", (300, 152, 200)),
                                         ("h128x64s4c4nte", (130, 600, 200)), ("h128x64s4c2x2te", (300, 304, 200)),
                                         ("h128x64s3tesk", (300, 136, 900)), ("h128x64s3tez", (130, 136, 900))])
def test_gemm_matches_float64(name, shape):
    config = GemmConfig.from_name(name).validate()
    assert config.release_per_warpgroup
    m, n, k = shape
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    c = matmul(a, b.T, config=config)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.linalg.norm(np.asarray(c, np.float64) - want) / np.linalg.norm(want) < 8e-3


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h128x128s4te", "h128x64s8c2te", "h128x64s8c4nte", "h128x80s7c2x4te"])
@pytest.mark.parametrize("shape", [(768, 1536, 4096), (300, 1064, 2000)], ids=str)
def test_gpu_gemm_matches_float64(name, shape):
    """Forced through matmul on fresh random inputs, against float64 by relative norm."""
    assert_forced_gemm_matches(name, "bf16", *shape)
