"""build(config, loads_only=True): the GEMM's load pipeline without its wgmmas (the diagnostic behind
``benchmarks/bench_gemm.py --loads-only``)."""
import numpy as np
import pytest
from ml_dtypes import bfloat16, float8_e4m3fn

from ptxgen.interp import interpret
from ptxgen.ir.text import print_module
from ptxgen.kernels.gemm import GemmConfig, build, streamk_buffers
from ptxgen.kernels.gemm.run import kernel_arguments


@pytest.mark.parametrize("name, dtype", [("h128x96s5t", "bf16"), ("h128x64s3c2nt", "bf16"),
                                         ("h128x192s3k4tez", "e4m3"), ("h128x64s3tska", "bf16")])
def test_no_wgmma_and_the_same_loads(name, dtype):
    """The loads-only kernel keeps every TMA load, wait and release of the GEMM and has no wgmma.mma; without the flag
    the IR is the GEMM's (the flag changes nothing else)."""
    config = GemmConfig.from_name(name, dtype)
    gemm, loads = print_module(build(config)), print_module(build(config, loads_only=True))
    assert "wgmma.mma" in gemm and "wgmma.mma" not in loads
    for op in ("tma.load", "pipeline.acquire", "pipeline.wait", "pipeline.release"):
        assert loads.count(op) == gemm.count(op), op
    assert print_module(build(config)) == gemm


@pytest.mark.parametrize("name, dtype, ctas", [("h128x64s3tez", "bf16", 6), ("h128x64s3c2nt", "bf16", 4),
                                               ("h128x64s3k4t", "e4m3", 3)])
def test_runs_in_the_interpreter(name, dtype, ctas):
    """The load pipeline alone runs to the end in the interpreter (no hang, no race: every stage filled, waited for
    and released as in the GEMM), on a ragged problem; C is whatever the empty accumulators give — zeros."""
    config = GemmConfig.from_name(name, dtype).validate()
    m, n, k = 200, 150, 700
    element = float8_e4m3fn if config.fp8 else bfloat16
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(element)
    b = rng.standard_normal((n, k)).astype(element)
    c = np.full((m, n), -7.0, bfloat16)
    args = kernel_arguments(config, a, b, c, None, m, n, k, lambda x: x.T, None)
    args["sms"] = ctas
    if config.fp8:
        args["scale_a"], args["scale_b"] = 0.5, 0.25
    if config.partial_sums:
        shapes = streamk_buffers(config, ctas)
        args["work"] = np.zeros(shapes["work"], np.float32)
        args["flags"] = np.zeros(shapes["flags"], np.int32)
    interpret(build(config, loads_only=True), args)
    assert not c.astype(np.float32).any()


def test_refused_where_the_wgmmas_bypass_issue():
    """Block scales and fp8 promotion every k-tile queue their wgmmas outside mainloop.issue: refused by name."""
    for config in (GemmConfig.from_name("h128x128s4tB", "e4m3"), GemmConfig("e4m3", bn=128, stages=4, promote=1)):
        with pytest.raises(ValueError, match="loads_only=True.*not those of block scales"):
            build(config, loads_only=True)
