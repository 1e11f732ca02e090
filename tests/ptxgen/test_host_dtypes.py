"""Host data (issue 16, item 7): numpy arguments hold the element type's host dtype — ``ml_dtypes.bfloat16``,
``ml_dtypes.float8_e4m3fn``, ``ml_dtypes.float8_e5m2``, ``numpy.float16``, ... — in the interpreter and the launcher
alike, inputs and outputs; any other dtype is refused with what to pass; device tensors map their own types (torch,
DLPack codes of dlpack.h).

The kernel is ``copy_scale`` (tests/ptxgen/lower_cases.py): z = cast<T>(cast<f32>(x) · s), a one-rounding map whose exact
result numpy computes as ``(x.astype(float32) * s).astype(T's host dtype)`` (ml_dtypes rounds to nearest even).
"""
from __future__ import annotations

import ctypes
import pathlib

import ml_dtypes
import numpy as np
import pytest

from lower_cases import copy_scale
from test_dlpack import OnlyDLPack
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.host_dtypes import HOST_DTYPES, host_dtype, host_dtype_mismatch, host_dtype_name
from ptxgen.ir.ops import element_bytes, round_to
from ptxgen.ir.text import parse_module
from ptxgen.ir.types import SCALARS
from ptxgen.runtime import LaunchError, jit

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
HOST = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
        "e5m2": ml_dtypes.float8_e5m2}
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32}
SCALE = 0.375   # exact in every float type here, so x·s is exact in f32 and the cast rounds once


def kernel(dtype):
    return parse_module(copy_scale(dtype), file=f"copy_scale_{dtype}.tile")


def bits(a):
    return a.view(BITS[a.itemsize])


def inputs(dtype, n, rng=None):
    """Fresh random values of the host dtype, of magnitude 0.5..8 and either sign: scaled by SCALE they stay normal
    numbers of every format (one rounding is then within half an ulp, a relative bound) and far from overflow."""
    rng = rng or np.random.default_rng()
    return (rng.uniform(0.5, 8.0, n) * rng.choice([-1.0, 1.0], n)).astype(HOST[dtype])


def expected(x):
    return (x.astype(np.float32) * np.float32(SCALE)).astype(x.dtype)


# -- the convention ----------------------------------------------------------------------------------------------------

def test_every_element_type_has_a_host_dtype_of_its_size():
    assert set(HOST_DTYPES) == set(SCALARS)
    for name, t in SCALARS.items():
        assert host_dtype(t) == host_dtype(name) and host_dtype(t).itemsize == element_bytes(t)
    assert host_dtype("bf16") == np.dtype(ml_dtypes.bfloat16)
    assert host_dtype("e4m3") == np.dtype(ml_dtypes.float8_e4m3fn)
    assert host_dtype("e5m2") == np.dtype(ml_dtypes.float8_e5m2)
    assert [host_dtype_name(n) for n in ("bf16", "e4m3", "f16", "i1")] == [
        "ml_dtypes.bfloat16", "ml_dtypes.float8_e4m3fn", "numpy.float16", "numpy.bool_"]


@pytest.mark.parametrize("dtype", ["bf16", "e4m3", "e5m2"])
def test_the_interpreters_rounding_is_the_host_dtypes(dtype):
    """Values the interpreter computes (f32, rounded with round_to) are exactly what ml_dtypes makes of them, so a
    result stored into a host array is never rounded a second time. Ties and subnormals included."""
    t = SCALARS[dtype]
    rng = np.random.default_rng()
    limit = {"bf16": 1e30, "e4m3": 440.0, "e5m2": 57000.0}[dtype]
    x = np.concatenate([rng.uniform(-limit, limit, 5000), rng.standard_normal(5000) * 2.0 ** -10,
                        rng.standard_normal(5000)]).astype(np.float32)
    grid = host_dtype(t).type(1.0).astype(np.float32)
    ties = (np.arange(1, 200, dtype=np.float32) + np.float32(0.5)) * grid   # halfway cases in the 1..2 binade range
    x = np.concatenate([x, ties[np.abs(ties) < limit]]).astype(np.float32)
    assert np.array_equal(bits(round_to(x, t).astype(host_dtype(t))), bits(x.astype(host_dtype(t))))
    assert np.array_equal(round_to(x, t), x.astype(host_dtype(t)).astype(np.float32))


# -- the interpreter ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bf16", "e4m3", "e5m2", "f16", "f32"])
def test_interpreter_round_trip(dtype):
    x = inputs(dtype, 3000)
    z = np.full(3000, -7.0, HOST[dtype])
    interpret(kernel(dtype), {"x": x, "z": z, "n": 3000, "s": SCALE})
    assert z.dtype == HOST[dtype]
    assert np.array_equal(bits(z), bits(expected(x)))


@pytest.mark.parametrize("dtype", ["bf16", "e4m3", "e5m2", "f16"])
def test_a_number_for_a_narrow_float_parameter_is_rounded_to_it(dtype):
    """s = 0.3 is s = 0.30078125 for a bf16 parameter (the launcher packs those bits), so 3·s = 0.90234375, not
    the 0.8984375 an unrounded 0.3 would give."""
    x = np.full(4, 3.0, HOST[dtype])
    z = np.zeros(4, HOST[dtype])
    interpret(kernel(dtype), {"x": x, "z": z, "n": 4, "s": 0.3})
    s = np.float32(HOST[dtype](0.3))
    assert np.array_equal(bits(z), bits((np.float32(3.0) * np.full(4, s)).astype(HOST[dtype])))
    if dtype == "bf16":
        assert z[0] == 0.90234375


def test_interpreter_tma_copy_of_bf16():
    from ptxgen.kernels import tma_copy as module

    x = np.random.default_rng().standard_normal((70, 200)).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, -7.0)
    interpret(module.build("bf16", 64, 3, swizzle=True), {"x": x, "y": y, "m": 70, "n": 200})
    assert np.array_equal(bits(y), bits(x))


@pytest.mark.parametrize("dtype, given, message", [
    ("bf16", np.float32, "argument %x: the kernel wants bf16; pass a numpy array of dtype ml_dtypes.bfloat16 "
                         "(e.g. x.astype(ml_dtypes.bfloat16)), not float32"),
    ("bf16", np.uint16, "argument %x: the kernel wants bf16; pass a numpy array of dtype ml_dtypes.bfloat16 "
                        "(e.g. x.astype(ml_dtypes.bfloat16)), not uint16 (if it holds the bits of bf16 values: "
                        "x.view(ml_dtypes.bfloat16))"),
    ("e4m3", np.uint8, "argument %x: the kernel wants e4m3; pass a numpy array of dtype ml_dtypes.float8_e4m3fn "
                       "(e.g. x.astype(ml_dtypes.float8_e4m3fn)), not uint8 (if it holds the bits of e4m3 values: "
                       "x.view(ml_dtypes.float8_e4m3fn))"),
    ("e5m2", ml_dtypes.float8_e4m3fn, "argument %x: the kernel wants e5m2; pass a numpy array of dtype "
                                      "ml_dtypes.float8_e5m2 (e.g. x.astype(ml_dtypes.float8_e5m2)), "
                                      "not float8_e4m3fn"),
    ("f16", np.float32, "argument %x: the kernel wants f16; pass a numpy array of dtype numpy.float16 "
                        "(e.g. x.astype(numpy.float16)), not float32"),
    ("f32", np.float64, "argument %x: the kernel wants f32; pass a numpy array of dtype numpy.float32 "
                        "(e.g. x.astype(numpy.float32)), not float64"),
    ("f32", ">f4", "argument %x: the kernel wants f32; pass a numpy array of dtype numpy.float32 "
                   "(e.g. x.astype(numpy.float32)), not float32 (>f4)"),      # byte-swapped
])
def test_interpreter_names_what_to_pass(dtype, given, message):
    x = np.zeros(8, given)
    with pytest.raises(InterpreterError) as info:
        interpret(kernel(dtype), {"x": x, "z": np.zeros(8, HOST[dtype]), "n": 8, "s": SCALE})
    assert str(info.value) == f"@copy_scale_{dtype}: {message}"


def test_interpreter_names_what_to_pass_for_a_tensor_map():
    from ptxgen.kernels import tma_copy as module

    x = np.zeros((64, 64), np.float32)
    with pytest.raises(InterpreterError) as info:
        interpret(module.build("bf16", 64, 3, swizzle=True), {"x": x, "y": x.astype(ml_dtypes.bfloat16), "m": 64,
                                                              "n": 64})
    assert str(info.value) == ("@tma_copy: argument %x: the kernel wants bf16; pass a numpy array of dtype "
                               "ml_dtypes.bfloat16 (e.g. x.astype(ml_dtypes.bfloat16)), not float32")


def test_an_output_array_of_the_wrong_dtype_is_refused_too():
    with pytest.raises(InterpreterError, match=r"argument %z: the kernel wants bf16; .* not float32$"):
        interpret(kernel("bf16"), {"x": inputs("bf16", 8), "z": np.zeros(8, np.float32), "n": 8, "s": SCALE})


# -- the launcher, without a device ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bf16", "e4m3", "e5m2", "f16"])
def test_launcher_packs_host_arrays_and_scalars(dtype):
    """numpy arguments of the host dtype bind (address 0 without a device), and the scalar s is packed as the bits
    ml_dtypes gives it."""
    k = jit(kernel(dtype))
    x, z = inputs(dtype, 100), np.zeros(100, HOST[dtype])
    s_bits = int(bits(np.array([SCALE], HOST[dtype]))[0])
    assert k.argument_values(x=x, z=z, n=100, s=SCALE) == [0, 100, 1, 0, 100, 1, 100, s_bits]
    assert k.specialization(x=x, z=z, n=100, s=SCALE)["x"].contiguous == 0


@pytest.mark.parametrize("dtype, given", [("bf16", np.float32), ("bf16", np.uint16), ("e4m3", np.uint8),
                                          ("e5m2", np.float32), ("f16", np.float32)])
def test_launcher_names_what_to_pass(dtype, given):
    k = jit(kernel(dtype))
    with pytest.raises(LaunchError) as info:
        k.argument_values(x=np.zeros(8, given), z=np.zeros(8, HOST[dtype]), n=8, s=SCALE)
    wrong = host_dtype_mismatch("x", given, dtype)
    assert str(info.value) == f"@copy_scale_{dtype}: {wrong}"
    spelled = host_dtype_name(dtype)
    torch_name = {"bf16": "torch.bfloat16", "e4m3": "torch.float8_e4m3fn", "e5m2": "torch.float8_e5m2",
                  "f16": "torch.float16"}[dtype]
    assert wrong.startswith(f"argument %x: the kernel wants {dtype}; pass a numpy array of dtype {spelled} (e.g. "
                            f"x.astype({spelled})) or a {torch_name} tensor, not {np.dtype(given).name}")


class _DLTensorBuffer(ctypes.Structure):
    """A DLManagedTensor: the DLTensor the launcher reads, then manager_ctx and deleter."""

    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_CAPSULE_NAME = b"dltensor"   # the capsule keeps a pointer to its name: a constant that lives as long as the module


class DLPackOnly:
    """A CUDA tensor seen only through DLPack, with the type code and bits dlpack.h gives the element type."""

    def __init__(self, ptr, n, code, bits_):
        self._shape = (ctypes.c_int64 * 1)(n)
        self._strides = (ctypes.c_int64 * 1)(1)
        self._t = _DLTensorBuffer(ptr, 2, 0, 1, code, bits_, 1, self._shape, self._strides, 0, None, None)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._t), _CAPSULE_NAME, None)

    def __dlpack_device__(self):
        return (2, 0)   # kDLCUDA


@pytest.mark.parametrize("dtype, code_bits", [("bf16", (4, 16)), ("e4m3", (10, 8)), ("e5m2", (12, 8)),
                                              ("f16", (2, 16)), ("f32", (2, 32))])
def test_launcher_maps_dlpack_type_codes(dtype, code_bits):
    """dlpack.h's codes: 4 bfloat, 10 float8_e4m3fn, 12 float8_e5m2 (6 is bool, not fp8)."""
    k = jit(kernel(dtype))
    x, z = DLPackOnly(0x10000, 64, *code_bits), DLPackOnly(0x20000, 64, *code_bits)
    assert k.argument_values(x=x, z=z, n=64, s=SCALE)[:6] == [0x10000, 64, 1, 0x20000, 64, 1]
    other = (2, 32) if dtype != "f32" else (4, 16)
    with pytest.raises(LaunchError, match=rf"@copy_scale_{dtype}: argument %x: the kernel wants {dtype}; .*, not "
                                          rf"DLPack type \(code, bits\) \({other[0]}, {other[1]}\)$"):
        k.argument_values(x=DLPackOnly(0x10000, 64, *other), z=z, n=64, s=SCALE)


def test_dlpack_bool_is_i1_not_fp8():
    k = jit(kernel("i1"))
    with pytest.raises(LaunchError, match=r"the kernel wants i1; .*, not DLPack type \(code, bits\) \(10, 8\)$"):
        k.argument_values(x=DLPackOnly(0x10000, 8, 10, 8), z=DLPackOnly(0x20000, 8, 6, 8), n=8, s=True)
    assert k.argument_values(x=DLPackOnly(0x10000, 8, 6, 8), z=DLPackOnly(0x20000, 8, 6, 8), n=8, s=True)[:3] == [
        0x10000, 8, 1]


# -- on the GPU --------------------------------------------------------------------------------------------------------

TOLERANCE = {"bf16": 2.0 ** -8, "e4m3": 2.0 ** -4, "e5m2": 2.0 ** -3, "f16": 2.0 ** -11}  # one rounding, relative


@pytest.fixture(scope="module")
def gpu():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")


def rel_err(got, want):
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "e4m3", "e5m2", "f16"])
def test_gpu_launcher_takes_and_returns_host_dtypes(gpu, dtype):
    """ml_dtypes arrays in and out of the GPU: the result is within one rounding of float64 and bit for bit the
    interpreter's (both round x·s to nearest even once)."""
    k = jit(kernel(dtype))
    for n in (1, 1000, 4096 + 3):
        x = inputs(dtype, n)
        z = np.full(n, -7.0, HOST[dtype])
        k(x=x, z=z, n=n, s=SCALE)
        want = x.astype(np.float64) * SCALE
        assert z.dtype == HOST[dtype]
        assert rel_err(z, want) <= TOLERANCE[dtype]
        z_cpu = np.full(n, -7.0, HOST[dtype])
        interpret(kernel(dtype), {"x": x, "z": z_cpu, "n": n, "s": SCALE})
        assert np.array_equal(bits(z), bits(z_cpu))


@pytest.mark.gpu
def test_gpu_gemm_with_bf16_numpy_operands(gpu):
    """examples/gemm.tile (TMA maps of bf16 A and B, a bf16 gtensor C) from ml_dtypes.bfloat16 numpy arrays."""
    m, n, k = 300, 264, 200
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), -7.0, ml_dtypes.bfloat16)
    jit(parse_module((EXAMPLES / "gemm.tile").read_text(), file="examples/gemm.tile"))(a=a, b=b, c=c, m=m, n=n, k=k)
    assert c.dtype == ml_dtypes.bfloat16
    assert rel_err(c, a.astype(np.float64) @ b.astype(np.float64).T) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_gpu_fp8_gemm_with_numpy_operands(gpu, name):
    """gemm_hopper's fp8 form from ml_dtypes fp8 numpy arrays, a bf16 numpy C, per-tensor scales."""
    from ptxgen.kernels.gemm import GemmConfig, build

    m, n, k = 300, 264, 512
    rng = np.random.default_rng()
    a = (rng.standard_normal((m, k)) * 2).astype(HOST[name])
    b = (rng.standard_normal((n, k)) * 2).astype(HOST[name])
    c = np.full((m, n), -7.0, ml_dtypes.bfloat16)
    jit(build(GemmConfig(name, bn=128, stages=3)))(a=a, b=b, c=c, m=m, n=n, k=k, sms=4, scale_a=0.5, scale_b=0.25)
    assert rel_err(c, a.astype(np.float64) @ b.astype(np.float64).T * 0.125) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "e4m3", "e5m2"])
def test_gpu_torch_tensors_directly_and_through_dlpack(gpu, dtype):
    """torch.bfloat16 / float8 CUDA tensors, as themselves and through DLPack alone (codes 4, 10, 12)."""
    torch = pytest.importorskip("torch")
    kind = {"bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[dtype]
    k = jit(kernel(dtype))
    n = 5000
    x = torch.from_numpy(inputs("f32", n)).to("cuda").to(kind)
    want = x.double().cpu().numpy() * SCALE
    z = torch.full((n,), -7.0, device="cuda").to(kind)
    k(x=x, z=z, n=n, s=SCALE)
    torch.cuda.synchronize()
    assert rel_err(z.float().cpu().numpy(), want) <= TOLERANCE[dtype]
    try:
        x.__dlpack__()
    except (BufferError, RuntimeError, TypeError) as exc:
        pytest.skip(f"this torch exports no {kind} through DLPack: {exc}")

    z2 = torch.full((n,), -7.0, device="cuda").to(kind)
    k(x=OnlyDLPack(x), z=OnlyDLPack(z2), n=n, s=SCALE)
    torch.cuda.synchronize()
    assert torch.equal(z2.view(torch.uint8) if z2.element_size() == 1 else z2.view(torch.int16),
                       z.view(torch.uint8) if z.element_size() == 1 else z.view(torch.int16))
