"""RMSNorm's register figures at N = 16384 (issue 18): with 1/n an IEEE reciprocal, LLVM sinks ``rcp.rn.f32`` to
its first use after the reduction, where x and the cross-warp partial sums are live, and ptxas's slow-path call
there spilled (96 bytes with nvJitLink; 96-128 bytes of local memory on the driver) where LayerNorm, doing strictly
more, spilled nothing. ``NormConfig.inverse_n = "approx"`` (the default) forms 1/n with ``rcp.approx.ftz.f32``: no
call, no spill. Each kernel is assembled by nvJitLink on the CPU; the GPU tests compare both reciprocals against
float64."""
import numpy as np
import pytest

from ptxgen.kernels.norms import NormConfig, choose_norm_config, layer_norm, rms_norm

from test_norm_variants import DTYPES, compiled

TOLERANCE = {"f32": 1e-6, "bf16": 8e-3}


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_rms_norm_spills_no_more_than_layer_norm_at_16384(dtype):
    rms = compiled(choose_norm_config(16384, dtype, "rms"), "rms")
    layer = compiled(choose_norm_config(16384, dtype, "layer"), "layer")
    assert rms.spill_bytes is not None and layer.spill_bytes is not None, rms.info_log
    assert rms.spill_bytes <= layer.spill_bytes, (rms.info_log, layer.info_log)
    assert rms.registers <= 64


def test_the_ieee_reciprocal_is_the_spill():
    """The same kernel with ``inverse_n="rn"`` is the s11 one: its PTX forms 1/n with rcp.rn.f32 after the
    cross-warp barrier, and nvJitLink reports spills; the default has one rcp.approx.ftz.f32 and none."""
    default = choose_norm_config(16384, "bf16", "rms")
    ieee = choose_norm_config(16384, "bf16", "rms", inverse_n="rn")
    assert default.inverse_n == "approx" and ieee == NormConfig("bf16", 512, 4, 1, 2, inverse_n="rn",
                                                                 cache=default.cache)
    fast, slow = compiled(default, "rms"), compiled(ieee, "rms")
    assert fast.ptx.count("rcp.approx.ftz.f32") == 1 and "rcp.rn.f32" not in fast.ptx
    assert slow.ptx.count("rcp.rn.f32") == 1 and "rcp.approx" not in slow.ptx
    assert slow.ptx.index("rcp.rn.f32") > slow.ptx.index("bar.sync 15, 512;")   # sunk past the reduction
    assert fast.spill_bytes == 0 and slow.spill_bytes > 0, (fast.info_log, slow.info_log)


def test_bad_inverse():
    with pytest.raises(ValueError) as info:
        rms_norm(np.zeros((2, 64), np.float32), config=NormConfig("f32", 32, 1, inverse_n="exact"))
    assert str(info.value) == "NormConfig: inverse_n must be one of approx, rn, not 'exact'"


@pytest.mark.parametrize("inverse", ["approx", "rn"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("m, n", [(5, 333), (2, 4100)])
def test_both_reciprocals_match_float64(m, n, dtype, inverse):
    rng = np.random.default_rng()
    x = (rng.standard_normal((m, n)) * 2 + 1).astype(DTYPES[dtype])
    w = rng.uniform(0.5, 1.5, n).astype(DTYPES[dtype])
    b = rng.standard_normal(n).astype(DTYPES[dtype])
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    want_rms = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w64
    want_layer = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * w64 + b64
    for got, want in [(rms_norm(x, w, 1e-6, config=choose_norm_config(n, dtype, "rms", inverse_n=inverse)), want_rms),
                      (layer_norm(x, w, b, 1e-5, config=choose_norm_config(n, dtype, inverse_n=inverse)), want_layer)]:
        error = np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)
        assert error < TOLERANCE[dtype], error


@pytest.mark.gpu
@pytest.mark.parametrize("inverse", ["approx", "rn"])
@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("m, n", [(257, 16384), (300, 8192), (7, 1000)])
def test_both_reciprocals_on_the_gpu(m, n, kind, inverse):
    import torch
    import torch.nn.functional as F

    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
    w = (torch.rand(n, device="cuda") + 0.5).to(torch.bfloat16)
    b = torch.randn(n, device="cuda").to(torch.bfloat16)
    config = choose_norm_config(n, "bf16", kind, inverse_n=inverse)
    if kind == "rms":
        got = rms_norm(x, w, 1e-6, config=config)
        want = F.rms_norm(x.double(), (n,), w.double(), 1e-6)
    else:
        got = layer_norm(x, w, b, 1e-5, config=config)
        want = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    torch.cuda.synchronize()
    assert float((got.double() - want).norm() / want.norm()) < 8e-3
