"""GPU tests of lowered kernels (``pytest -m gpu``; skipped without a GPU): fresh random inputs each run, ragged
sizes that leave partial tiles and partial vectors, compared with numpy in float64 (and ALLOPS with the CPU
interpreter). Tolerances follow the lowering's stated accuracy (spec/lowering.md): sin ≤ 2 ulp then sqrt.rn;
rsqrt.approx ≈ 2^-22.9 relative after an f32 sum of squares; exp/exp2 through ex2.approx ≈ 2 ulp.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module
from ptxgen.lower import Specialization, TensorSpec
from ptxgen.runtime import LaunchError, jit

from lower_cases import ALLOPS, copy_scale

pytestmark = pytest.mark.gpu

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name):
    return parse_module((EXAMPLES / f"{name}.tile").read_text(), file=f"examples/{name}.tile")


@pytest.fixture(scope="module")
def sqrt_sin():
    return jit(load("sqrt_sin"))


@pytest.fixture(scope="module")
def l2norm():
    return jit(load("l2norm"))


def ulps(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32))))


@pytest.mark.parametrize("n", [1, 3, 1000, 1024, 4096 + 17, (1 << 20) + 5])
def test_sqrt_sin_numpy(sqrt_sin, n):
    rng = np.random.default_rng()
    x = rng.uniform(0.0, 3.14159, n).astype(np.float32)
    z = np.full(n, -7.0, dtype=np.float32)
    sqrt_sin(x=x, z=z, n=n)
    want = np.sqrt(np.sin(x.astype(np.float64)))
    np.testing.assert_allclose(z, want, rtol=1e-6, atol=1e-7)
    print(f"sqrt_sin n={n}: max error {ulps(z, want):.2f} ulp")


@pytest.mark.parametrize("m, n", [(4, 256), (5, 300), (1, 1), (9, 1000), (33, 4097), (1000, 512), (3, 7),
                                  (64, 16384), (7, 16383), (3, 16385), (5, 40000), (2, 8193)])
def test_l2norm_numpy(l2norm, m, n):
    rng = np.random.default_rng()
    x = rng.standard_normal((m, n)).astype(np.float32)
    y = np.full((m, n), -7.0, dtype=np.float32)
    eps = 1e-6
    l2norm(x=x, y=y, m=m, eps=eps)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).sum(axis=1, keepdims=True) + eps)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
    print(f"l2norm {m}x{n}: max error {ulps(y, want):.2f} ulp")


def test_allops_matches_the_interpreter():
    module = parse_module(ALLOPS, file="tests/ptxgen/lower_cases.py")
    k = jit(module)
    rng = np.random.default_rng()
    for m, n in [(5, 200), (6, 256), (1, 3)]:
        x = rng.uniform(-2.0, 2.0, (m, n)).astype(np.float32)
        g = -(-m // 2)
        args_gpu = {"x": x, "y": np.zeros((m, n), np.float32), "ix": np.zeros(g * 64, np.int32),
                    "h": np.zeros(g * 128, np.float16), "m": m, "s": 0.75}
        args_cpu = {k_: (v.copy() if isinstance(v, np.ndarray) else v) for k_, v in args_gpu.items()}
        k(**args_gpu)
        interpret(module, args_cpu)
        np.testing.assert_allclose(args_gpu["y"], args_cpu["y"], rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(args_gpu["ix"], args_cpu["ix"])
        np.testing.assert_allclose(args_gpu["h"].astype(np.float32), args_cpu["h"].astype(np.float32), rtol=1e-3)


@pytest.mark.parametrize("dtype, np_dtype, scale", [("f32", np.float32, 0.37), ("f16", np.float16, 0.375),
                                                     ("i32", np.int32, 3), ("u32", np.uint32, 3),
                                                     ("i64", np.int64, -3)])
def test_copy_scale_matches_the_interpreter(dtype, np_dtype, scale):
    module = parse_module(copy_scale(dtype), file=f"copy_scale_{dtype}.tile")
    k = jit(module)
    rng = np.random.default_rng()
    for n in (1, 1000, 4096 + 3, 8192):
        lo = 0 if dtype == "u32" else -1000
        x = (rng.uniform(lo, 1000, n) if dtype.startswith("f") else rng.integers(lo, 1000, n)).astype(np_dtype)
        z_gpu, z_cpu = np.zeros(n, np_dtype), np.zeros(n, np_dtype)
        k(x=x, z=z_gpu, n=n, s=scale)
        interpret(module, {"x": x, "z": z_cpu, "n": n, "s": scale})
        np.testing.assert_array_equal(z_gpu, z_cpu)


def test_launch_error_names_the_kernel():
    k = jit(parse_module("""\
kernel @too_many_rows(%x: gtensor<f32, 1>, %n: i32) {grid = (1, %n, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %zero = arith.const {value = 0} : i32
  %v = gmem.tile %x, %zero {shape = [32]} : gview<f32>[32]
  %f = gmem.load %v, %t {tv = [(32,1):(1,1)]} : frag<f32>[1]
  gmem.store %v, %t, %f {tv = [(32,1):(1,1)]}
}
"""))
    with pytest.raises(LaunchError, match="@too_many_rows"):
        k(x=np.zeros(32, np.float32), n=1 << 17)  # gridDim.y is at most 65535


# -- in place on device tensors (torch): alignment / stride specializations, memory past n untouched -----------


def test_sqrt_sin_torch_in_place_every_specialization(sqrt_sin):
    torch = pytest.importorskip("torch")
    n = (1 << 16) + 3
    for offset, step in [(0, 1), (1, 1), (0, 2)]:  # aligned, misaligned base, strided (generic)
        full_x = torch.rand(offset + step * n + 64, device="cuda", dtype=torch.float32) * 3.14159
        full_z = torch.full_like(full_x, -7.0)
        x, z = full_x[offset:offset + step * n:step], full_z[offset:offset + step * n:step]
        spec = sqrt_sin.specialization(x=x, z=z, n=n)
        want_spec = {(0, 1): TensorSpec(0, True, 1), (1, 1): TensorSpec(0, False, 1), (0, 2): TensorSpec()}
        assert spec["z"] == want_spec[(offset, step)]
        sqrt_sin(x=x, z=z, n=n)
        torch.cuda.synchronize()
        want = np.sqrt(np.sin(x.cpu().numpy().astype(np.float64)))
        np.testing.assert_allclose(z.cpu().numpy(), want, rtol=1e-6, atol=1e-7)
        untouched = torch.ones_like(full_z, dtype=torch.bool)
        untouched[offset:offset + step * n:step] = False
        assert bool((full_z[untouched] == -7.0).all()), f"memory outside z written (offset {offset}, step {step})"


@pytest.mark.parametrize("m, n", [(257, 1031), (300, 16384), (40, 20000)])   # one pass, one pass full, two passes
def test_l2norm_torch_matches(l2norm, m, n):
    torch = pytest.importorskip("torch")
    x = torch.randn(m, n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    l2norm(x=x, y=y, m=m, eps=1e-6)
    torch.cuda.synchronize()
    x64 = x.double()
    want = (x64 / torch.sqrt((x64 ** 2).sum(dim=1, keepdim=True) + 1e-6)).cpu().numpy()
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-5, atol=1e-7)


def test_specialized_kernels_report_registers(sqrt_sin, l2norm):
    for k, spec in [(sqrt_sin, Specialization.of(x=TensorSpec(0, True, 1), z=TensorSpec(0, True, 1))),
                    (l2norm, Specialization.of(x=TensorSpec(1, True, 4), y=TensorSpec(1, True, 4)))]:
        c = k.compile(spec)
        loaded = k._load(spec)
        regs = loaded.function.num_regs
        assert 0 < regs <= 255
        # ptxas's own count, when this nvJitLink's info log carries it (the device's 13.0 omitted it for l2norm)
        assert c.registers in (None, regs)
        print(f"{k.name} [{spec}]: {regs} registers, {len(c.ptx_instructions())} PTX instructions")


def test_prepared_call_site_keeps_its_tensors_alive(sqrt_sin):
    """A site packs raw device addresses; the tensors behind them live as long as the site, even when the caller
    made them inline (torch's caching allocator would otherwise hand their memory to the next allocation)."""
    torch = pytest.importorskip("torch")
    n = 1 << 20
    x = torch.rand(n, device="cuda") * 3.0
    site = sqrt_sin.prepare(x=x, z=torch.zeros(n, device="cuda"), n=n)
    _others = [torch.full((n,), -1.0, device="cuda") for _ in range(4)]   # would reuse a freed z's block
    site()
    torch.cuda.synchronize()
    z = site.arguments["z"]
    assert torch.allclose(z, torch.sqrt(torch.sin(x)), rtol=1e-5, atol=1e-6)
    assert all(bool((o == -1.0).all()) for o in _others)


def test_prepared_call_site_relaunches_and_swaps_pointers(sqrt_sin):
    from ptxgen.runtime import DeviceBuffer, synchronize

    rng = np.random.default_rng()
    n = 5000
    xs = [rng.uniform(0, 3.14159, n).astype(np.float32) for _ in range(2)]
    bx = [DeviceBuffer.from_numpy(x) for x in xs]
    bz = [DeviceBuffer.from_numpy(np.zeros(n, np.float32)) for _ in range(2)]
    site = sqrt_sin.prepare(x=bx[0], z=bz[0], n=n)
    site()
    site(x=bx[1], z=bz[1])
    synchronize()
    for x, z in zip(xs, bz):
        np.testing.assert_allclose(z.to_numpy(), np.sqrt(np.sin(x.astype(np.float64))), rtol=1e-6, atol=1e-7)
    with pytest.raises(LaunchError, match="@sqrt_sin: x differs from the prepared call"):
        site(x=DeviceBuffer.from_numpy(np.zeros(n + 1, np.float32)))
