"""ptxgen.kernels.softmax / norms: the interpreter against float64 (ragged M, N not a multiple of the vector), the
argument errors, the PTX of each kernel configuration (CPU), and the GPU against torch."""
import dataclasses
import re

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from ptxgen.kernels import norms, softmax as softmax_module
from ptxgen.kernels.norms import layer_norm, rms_norm
from ptxgen.kernels.rowwise import CHOSEN_CACHE, RowConfig, choose_row_config
from ptxgen.kernels.softmax import softmax
from ptxgen.lower import compile_kernel

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOLERANCE = {"f32": 1e-6, "bf16": 8e-3, "f16": 1e-3}


def relative(got, want) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


def inputs(m, n, dtype, offset=0.0):
    rng = np.random.default_rng()
    return (rng.standard_normal((m, n)) * 2 + offset).astype(DTYPES[dtype])


def global_vectors(ptx: str, access: str) -> int:
    """The 16-byte global accesses (``ld`` or ``st``) in ``ptx``, whatever their cache qualifiers."""
    return len(re.findall(rf"\b{access}\.global(?:\.[\w:]+)*?\.v4\.", ptx))


# -- the configuration --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, dtype, max_values, want", [
    (16384, "bf16", 16, RowConfig("bf16", 1024, 2, 1, 1)), (16384, "f32", 16, RowConfig("f32", 1024, 4, 1, 1)),
    (16384, "bf16", 32, RowConfig("bf16", 512, 4, 1, 2)), (16384, "f32", 32, RowConfig("f32", 512, 8, 1, 2)),
    (1024, "bf16", 16, RowConfig("bf16", 64, 2, 4, 4)), (1000, "f32", 16, RowConfig("f32", 64, 4, 4, 4)),
    (5, "f32", 16, RowConfig("f32", 32, 1, 8, 4)),
])
def test_choose_row_config(n, dtype, max_values, want):
    got = choose_row_config(n, dtype, max_values)
    assert got == dataclasses.replace(want, cache=CHOSEN_CACHE) and got.cols >= n and got.vectors * got.vec <= max_values
    assert got.ctas_per_sm * got.block <= 1024          # 64 registers per thread


def test_the_tv_layout_is_make_layout_tv_repeated_along_the_columns():
    config = RowConfig("bf16", 64, 2, 4)
    tile, tv = config.layouts()
    assert tile == (4, 1024)
    values = sorted(tv((t, v)) for t in range(lc.size(tv[0])) for v in range(lc.size(tv[1])))
    assert values == list(range(4 * 1024))                       # a bijection onto the tile
    # thread t: row t // 64, 8 contiguous columns (one 16-byte vector) at 8·(t % 64), again 512 columns further
    for t in (0, 5, 64, 255):
        cols = [tv((t, v)) // 4 for v in range(16)]
        rows = {tv((t, v)) % 4 for v in range(16)}
        assert rows == {t // 64}
        assert cols == [8 * (t % 64) + i for i in range(8)] + [512 + 8 * (t % 64) + i for i in range(8)]


# -- the interpreter against float64 ------------------------------------------------------------------------------------

def softmax_reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layer_reference(x, w, b, eps):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1.0 if w is None else w.astype(np.float64)) + (0.0 if b is None else b.astype(np.float64))


def rms_reference(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1.0 if w is None else w.astype(np.float64))


# ragged M (not a multiple of the rows per CTA), N not a multiple of the vector width, rows across warps
SHAPES = [(5, 100), (9, 333), (3, 1024), (2, 2500)]


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("m, n", SHAPES)
def test_softmax_in_the_interpreter(m, n, dtype):
    x = inputs(m, n, dtype)
    y = softmax(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert relative(y, softmax_reference(x)) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("m, n", SHAPES)
def test_norms_in_the_interpreter(m, n, dtype):
    x = inputs(m, n, dtype, offset=3.0)   # a mean far from 0: padding must not leak into the variance
    rng = np.random.default_rng()
    w = rng.uniform(0.5, 1.5, n).astype(DTYPES[dtype])
    b = rng.standard_normal(n).astype(DTYPES[dtype])
    assert relative(layer_norm(x, w, b, 1e-5), layer_reference(x, w, b, 1e-5)) < TOLERANCE[dtype]
    assert relative(layer_norm(x), layer_reference(x, None, None, 1e-5)) < TOLERANCE[dtype]
    assert relative(rms_norm(x, w, 1e-6), rms_reference(x, w, 1e-6)) < TOLERANCE[dtype]
    eps = {"f32": 2.0 ** -23, "bf16": 2.0 ** -7}[dtype]    # torch's default: the dtype's machine epsilon
    assert relative(rms_norm(x), rms_reference(x, None, eps)) < TOLERANCE[dtype]


def test_leading_dimensions_are_rows():
    x = inputs(6, 40, "f32").reshape(2, 3, 40)
    np.testing.assert_allclose(softmax(x), softmax_reference(x), rtol=1e-5)
    assert rms_norm(x).shape == (2, 3, 40)


def test_a_forced_config():
    x = inputs(3, 200, "f32")
    y = softmax(x, config=RowConfig("f32", 64, 1, 2))
    assert relative(y, softmax_reference(x)) < 1e-6


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_norms_with_32_values_per_thread_store_in_chunks(dtype):
    # 32 values per thread: the epilogue runs in two chunks of 16 (columns 0 … 511 and 512 … 1023 of each row)
    config = norms.NormConfig(dtype, 32, 32 // (16 // np.dtype(DTYPES[dtype]).itemsize), 2, 1, epilogue_values=16)
    assert config.cols == 1024
    x = inputs(3, 1000, dtype, offset=1.0)
    rng = np.random.default_rng()
    w = rng.uniform(0.5, 1.5, 1000).astype(DTYPES[dtype])
    b = rng.standard_normal(1000).astype(DTYPES[dtype])
    got = layer_norm(x, w, b, 1e-5, config=config)
    assert relative(got, layer_reference(x, w, b, 1e-5)) < TOLERANCE[dtype]
    assert relative(rms_norm(x, w, 1e-6, config=config), rms_reference(x, w, 1e-6)) < TOLERANCE[dtype]
    module = norms.build(config, "layer", True, True)
    stores = [op for op in module.kernels[0].body.ops if op.name == "gmem.store"]
    assert len(stores) == 2


# -- argument errors ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, message", [
    (lambda: softmax(np.zeros((2, 8))), TypeError,
     "softmax: x has dtype numpy float64; softmax takes bf16 (torch.bfloat16, ml_dtypes.bfloat16), f16 "
     "(torch.float16, numpy.float16) or f32 (torch.float32, numpy.float32)"),
    (lambda: softmax([1.0, 2.0]), TypeError,
     "softmax: x must be a CUDA tensor (torch, or any DLPack array: cupy, JAX) or a numpy array, not list"),
    (lambda: softmax(np.zeros((2, 8), np.float32), dim=0), ValueError,
     "softmax: dim must be the last dimension (-1 or 1), not 0"),
    (lambda: softmax(np.zeros((2, 16385), np.float32)), ValueError,
     "softmax: x's rows have 16385 elements; softmax holds a row in one CTA's registers: at most 16384"),
    (lambda: softmax(np.zeros((2, 8), np.float32), dim=-1.0), TypeError, "softmax: dim must be an int, not float"),
    (lambda: rms_norm(np.zeros((2, 64), np.float32), np.zeros(32, np.float32)), ValueError,
     "rms_norm: weight must have shape (64,) (x's last dimension), not (32,)"),
    (lambda: rms_norm(np.zeros((2, 64), np.float32), np.zeros(64, np.float16)), TypeError,
     "rms_norm: weight has dtype numpy float16 but x is f32: pass it in x's dtype"),
    (lambda: layer_norm(np.zeros((2, 64), np.float32), None, np.zeros((64, 1), np.float32)), ValueError,
     "layer_norm: bias must have shape (64,) (x's last dimension), not (64, 1)"),
    (lambda: layer_norm(np.zeros((2, 64), np.float32), eps=-1.0), ValueError,
     "layer_norm: eps must be a number >= 0, not -1.0"),
    (lambda: layer_norm(np.zeros((2, 64), np.float32), config=RowConfig("bf16", 32, 1, 1)), ValueError,
     "layer_norm: config is for bf16 but x is f32"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value).startswith(message), str(info.value)


def test_a_config_too_short_for_the_row():
    with pytest.raises(ValueError, match=r"^softmax: config holds rows of up to 128 elements but x's have 200$"):
        softmax(np.zeros((2, 200), np.float32), config=RowConfig("f32", 32, 1, 1))


def test_an_invalid_config():
    with pytest.raises(ValueError, match=r"^RowConfig: threads must be a power of two from 1 to 1024, not 48$"):
        softmax(np.zeros((2, 20), np.float32), config=RowConfig("f32", 48, 1, 1))


# -- PTX for each kernel configuration (no GPU needed) ------------------------------------------------------------------

KERNELS = [(op, n, dtype) for op in ("softmax", "rms", "layer", "layer-plain") for dtype in ("bf16", "f32")
           for n in (1000, 1024, 4096, 16384)]


@pytest.mark.parametrize("op, n, dtype", KERNELS)
def test_every_kernel_config_compiles_within_64_registers(op, n, dtype):
    """The PTX of the config each op picks, specialized for row-major 16-byte aligned rows (torch's contiguous
    tensors), through nvJitLink to a cubin: 16-byte vectors, a named barrier per reduction across warps, and at most
    64 registers (what ``ctas_per_sm`` asks for) with no spill for the softmax."""
    from ptxgen.runtime import jit
    if op == "softmax":
        config = choose_row_config(n, dtype, softmax_module.MAX_VALUES)
        module = softmax_module.build(config)
    else:
        config = norms.choose_norm_config(n, dtype, "rms" if op == "rms" else "layer")
        module = norms.build(config, op[:5].rstrip("-"), op == "rms" or op == "layer", op == "layer")
    kern = jit(module)
    x = np.zeros((config.rows, config.cols), DTYPES[dtype])
    args = {"x": x, "y": x.copy(), "m": config.rows}
    for name in ("w", "b"):
        if any(p.name == name for p in module.kernels[0].params):
            args[name] = np.zeros(config.cols, DTYPES[dtype])
    if op != "softmax":
        args["eps"] = 1e-5
    compiled = kern.compile(kern.specialization(**args))
    ptx = compiled.ptx
    reductions = {"softmax": 2, "rms": 1, "layer": 2, "layer-plain": 2}[op]
    assert global_vectors(ptx, "ld") >= config.vectors and global_vectors(ptx, "st") == config.vectors
    barriers = ptx.count("bar.sync 15, %d;" % config.block)
    assert barriers == (reductions if config.threads > 32 else 0) and ".minnctapersm %d" % config.ctas_per_sm in ptx
    # softmax and both norms (32 values, two-pass from registers; the norms' 1/n an approximate reciprocal, no
    # IEEE slow-path call at the register peak) fit 64 registers exactly
    assert compiled.registers <= 64 and compiled.spill_bytes == 0, (compiled.registers, compiled.spill_bytes)
    if op == "softmax":
        assert "ex2.approx" in ptx and ptx.count("rcp.rn.f32") == 1


# -- on the GPU, against torch ------------------------------------------------------------------------------------------

def _torch():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return pytest.importorskip("torch")


GPU_SHAPES = [(4096, 1024), (1000, 4096), (257, 16384), (33, 1000), (7, 333)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("m, n", GPU_SHAPES)
def test_softmax_on_the_gpu(m, n, dtype):
    torch = _torch()
    tdtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = (torch.randn(m, n, device="cuda") * 3).to(tdtype)
    y = softmax(x)
    want = torch.softmax(x.double(), dim=-1)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert float((y.double() - want).norm() / want.norm()) < TOLERANCE[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("m, n", GPU_SHAPES)
def test_norms_on_the_gpu(m, n, dtype):
    torch = _torch()
    tdtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = (torch.randn(m, n, device="cuda") + 2).to(tdtype)
    w = torch.rand(n, device="cuda").add_(0.5).to(tdtype)
    b = torch.randn(n, device="cuda").to(tdtype)
    want = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    got = layer_norm(x, w, b, 1e-5)
    assert float((got.double() - want).norm() / want.norm()) < TOLERANCE[dtype]
    want = torch.nn.functional.rms_norm(x.double(), (n,), w.double(), 1e-6)
    got = rms_norm(x, w, 1e-6)
    assert float((got.double() - want).norm() / want.norm()) < TOLERANCE[dtype]


# -- the examples -------------------------------------------------------------------------------------------------------

def _example(name):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_softmax_example(capsys):
    y = _example("softmax").main(300, 3)
    np.testing.assert_allclose(y.sum(1), 1.0, rtol=1e-5)
    assert "kernel @softmax" in capsys.readouterr().out


def test_the_layernorm_example():
    example = _example("layernorm")
    rng = np.random.default_rng(0)   # main's own inputs, seed 0
    y = example.main(200, 3)
    assert y.shape == (3, 200)
    x = (rng.standard_normal((3, 200)) + 1).astype(np.float32)
    w, b, g = (rng.uniform(0.5, 1.5, 200).astype(np.float32) for _ in range(3))
    assert relative(y, example.reference(x, w, b, g)) < 1e-6
