"""bench_gemm --sweep (and bench_power, bench_staircase) run a swap-AB variant (``…x``) as the library runs its config:
the kernel's A is the problem's B, its B the problem's A, its C the transposed view of C, its M the problem's N. Before,
the sweep launched the unswapped kernel of the same tile on the problem as given (a 16-row M in 128-row tiles, N in
16-column tiles): a correct C, timed for another problem orientation than the one a caller gets."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels.gemm import GemmConfig, build

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_gemm():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_gemm
    finally:
        sys.path.pop(0)
    return bench_gemm


def test_swapped_variant_gets_the_swapped_arguments(bench_gemm):
    m, n, k = 16, 200, 64
    a = np.zeros((m, k), ml_dtypes.bfloat16)
    b = np.zeros((n, k), ml_dtypes.bfloat16)
    c = np.zeros((m, n), ml_dtypes.bfloat16)
    args = bench_gemm.variant_arguments("h128x16s8ska1x", "bf16", a, b, c, m, n, k)
    assert args["a"] is b and args["b"] is a
    assert args["c"].shape == (n, m) and np.shares_memory(args["c"], c)
    assert (args["m"], args["n"], args["k"]) == (n, m, k)
    plain = bench_gemm.variant_arguments("h128x128s6t", "bf16", a, b, c, m, n, k)
    assert plain["a"] is a and plain["b"] is b and plain["c"] is c and (plain["m"], plain["n"]) == (m, n)


def test_swapped_variant_as_the_sweep_runs_it_computes_c(bench_gemm):
    """The kernel of a swapped variant launched with the sweep's arguments (in the interpreter) writes A·Bᵀ into C."""
    rng = np.random.default_rng()
    m, n, k = 5, 136, 64
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), -7.0, ml_dtypes.bfloat16)
    config = GemmConfig.from_name("h128x16s8x", "bf16")
    args = bench_gemm.variant_arguments(config.name, "bf16", a, b, c, m, n, k)
    interpret(build(config), {**args, "sms": 2})
    want = a.astype(np.float64) @ b.astype(np.float64).T
    err = np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want)
    assert err < 1e-2
