"""The launcher's argument binding (ptxgen/runtime/binding.py): the per-signature binding cache and its generated fast
path pack exactly the bytes the checked path packs, re-bind when a tensor's shape, strides, type or alignment class
changes, keep every check, and never launch with a stale tensor map.

The CPU tests replace the driver by a recorder that decodes the argument block of every launch into per-slot bytes;
tensors are stand-ins (torch-like, ``__cuda_array_interface__``, DLPack-only) at chosen addresses. The GPU tests run
the cached path with torch tensors against numpy.
"""
from __future__ import annotations

import ctypes
import gc
import hashlib
import pathlib
import struct
import weakref
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from lower_cases import copy_scale
from ptxgen.ir.text import parse_module
from ptxgen.runtime import LaunchError, jit
from ptxgen.runtime import binding
from test_dlpack import OnlyDLPack
from ptxgen.runtime import kernel_launch as launch
from ptxgen.runtime.kernel_launch import ArgumentLayout
from ptxgen.runtime.tensor_map import encode_tensor_map

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def example(name: str):
    return parse_module((EXAMPLES / name).read_text(), file=f"examples/{name}")


# -- stand-ins -----------------------------------------------------------------------------------------------------

class Device:
    """A torch.device stand-in: equal and hashed by (type, index)."""

    def __init__(self, type_: str = "cuda", index: int = 0):
        self.type, self.index = type_, index

    def __eq__(self, other):
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return f"{self.type}:{self.index}"


class DType:
    """A torch.dtype stand-in: one object per name, printed as torch prints its dtypes."""

    _made = {}

    def __new__(cls, name: str):
        if name not in cls._made:
            cls._made[name] = super().__new__(cls)
            cls._made[name].name = name
        return cls._made[name]

    def __str__(self):
        return f"torch.{self.name}"


def c_strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


class TorchLike:
    """A CUDA tensor read the way the launcher reads torch tensors: data_ptr(), shape, stride(), dtype, device."""

    def __init__(self, ptr, shape, strides=None, dtype="float32", device=None):
        self._ptr, self.shape = ptr, tuple(shape)
        self._strides = tuple(strides) if strides is not None else c_strides(shape)
        self.dtype = DType(dtype)
        self.device = device or Device()
        self.is_cuda = self.device.type == "cuda"

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides


class CudaArray:
    """A ``__cuda_array_interface__`` tensor (strides in bytes, None when C-contiguous)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape), "typestr": typestr,
                                         "strides": strides, "version": 3}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_CAPSULE_NAME = b"dltensor"
_NEW_CAPSULE = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))


class DLPackOnly:
    """A CUDA tensor seen only through DLPack (no data_ptr, no __cuda_array_interface__); ``dlpack_calls`` counts
    the capsules handed out."""

    def __init__(self, ptr, shape, code_bits=(2, 32), device_id=0):
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*c_strides(shape))
        self._t = _DLTensor(ptr, _DLDevice(2, device_id), len(shape), _DLDataType(code_bits[0], code_bits[1], 1),
                            self._shape, self._strides, 0)
        self.device_id = device_id
        self.dlpack_calls = 0

    def __dlpack__(self, stream=None):
        self.dlpack_calls += 1
        return _NEW_CAPSULE(ctypes.addressof(self._t), _CAPSULE_NAME, None)

    def __dlpack_device__(self):
        return (2, self.device_id)


# -- the recording driver ------------------------------------------------------------------------------------------

class Recorder:
    """Stands in for cuda.bindings.driver: cuLaunchKernelEx records (function handle, grid, per-slot bytes of the
    argument block) decoded with ``layout``; every other name is the real module's (launch configs, streams)."""

    def __init__(self):
        from cuda.bindings import driver

        self._real = driver
        self.launches = []
        self.layout = None

    def __getattr__(self, name):
        return getattr(self._real, name)

    def cuLaunchKernelEx(self, cfg, handle, params, extra):
        slots = self.layout.slots
        pointers = (ctypes.c_void_p * max(1, len(slots))).from_address(params)
        data = [ctypes.string_at(pointers[i], 128 if s.abi == "tmap" else 8) for i, s in enumerate(slots)]
        self.launches.append(SimpleNamespace(handle=handle, grid=(cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                                             stream=int(cfg.hStream), slots=data))
        return (0,)


def packed_slots(layout: ArgumentLayout, values) -> list:
    """Per-slot bytes of ``values`` packed as the checked path packs them (one struct.pack of the whole block)."""
    block = layout.packer.pack(*values)
    return [block[o:o + (128 if s.abi == "tmap" else 8)] for o, s in zip(layout.offsets, layout.slots)]


def fake_blob(ptr, shape, strides) -> bytes:
    """The 128 bytes the fake encoder gives a map over (ptr, shape, strides): distinct for distinct tensors."""
    return hashlib.sha256(repr((ptr, tuple(shape), tuple(strides))).encode()).digest() * 4


@pytest.fixture
def driver(monkeypatch):
    """The driver replaced by a Recorder; modules 'load' any image; tensor maps are checked by the real rule and
    'encoded' as ``fake_blob`` (``driver.encodes`` lists every encode)."""
    rec = Recorder()
    rec.encodes = []

    class FakeModule:
        def __init__(self, image):
            self.image = bytes(image[:4]) if not isinstance(image, str) else "ptx"

        def function(self, name):
            return SimpleNamespace(handle=f"{name}@{id(self)}")

    def encode(kernel, name, ptr, shape, strides, t, static, encode=True):
        encode_tensor_map(kernel, name, ptr, shape, strides, t, static, encode=False)  # the real checks
        if not encode:
            return bytes(128)
        rec.encodes.append((name, ptr, tuple(shape), tuple(strides)))
        return fake_blob(ptr, shape, strides)

    monkeypatch.setattr(launch, "_cu", lambda: rec)
    monkeypatch.setattr(launch, "Module", FakeModule)
    monkeypatch.setattr(launch, "context", lambda: None)
    monkeypatch.setattr(launch, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "set_max_dynamic_smem", lambda f, n: None)
    monkeypatch.setattr(binding, "encode_tensor_map", encode)
    return rec


def jitted(driver, module):
    k = jit(module)
    driver.layout = ArgumentLayout(k.abi)
    return k


def spy_checked_path(monkeypatch, k) -> list:
    """Count the calls of ``k`` that take the checked path (the fast path declined)."""
    calls = []
    checked = k._call

    def counting(kwargs, stream):
        calls.append(sorted(kwargs))
        return checked(kwargs, stream)
    monkeypatch.setattr(k, "_call", counting)
    return calls


def uncached_slots(driver, k, **args) -> list:
    """The bytes the checked path packs for these arguments (``argument_values``: no cache, no device)."""
    return packed_slots(driver.layout, k.argument_values(**args))


# -- the cache packs what the checked path packs ---------------------------------------------------------------------

MAKERS = {
    "torch": lambda ptr, shape, dtype="float32", strides=None: TorchLike(ptr, shape, strides, dtype),
    "cuda array interface": lambda ptr, shape, dtype="float32", strides=None: CudaArray(
        ptr, shape, {"float32": "<f4", "bfloat16": "<V2", "float16": "<f2", "float8_e4m3fn": "|u1",
                     "bool": "|b1", "uint32": "<u4"}[dtype], strides),
    "dlpack": lambda ptr, shape, dtype="float32", strides=None: DLPackOnly(
        ptr, shape, {"float32": (2, 32), "bfloat16": (4, 16), "float16": (2, 16), "float8_e4m3fn": (10, 8),
                     "bool": (6, 8), "uint32": (1, 32)}[dtype]),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_the_fast_path_packs_the_checked_paths_bytes(driver, monkeypatch, kind):
    make = MAKERS[kind]
    k = jitted(driver, example("sqrt_sin.tile"))
    checked = spy_checked_path(monkeypatch, k)
    for i, (px, pz) in enumerate([(0x10000, 0x20000), (0x30000, 0x40000), (0x50000, 0x10000)]):
        x, z = make(px, (1000,)), make(pz, (1000,))
        k(x=x, z=z, n=1000 + i)
        assert driver.launches[-1].slots == uncached_slots(driver, k, x=x, z=z, n=1000 + i)
        assert driver.launches[-1].grid == (1, 1, 1)
    assert len(checked) == 1  # the first call bound the signature; the others only rewrote pointers and n
    assert len(driver.launches) == 3 and len(k._binder.bindings) == 1


@pytest.mark.parametrize("dtype, torch_name, scales", [
    ("bf16", "bfloat16", [0.375, 1.0 / 3.0, -2.5e38, float("inf"), 0.0, -0.0, 0.0, 1.0 / 3.0]),
    ("f16", "float16", [0.375, 1.0 / 3.0, 65504.0, -0.0, 0.0, -0.0]),
    ("e4m3", "float8_e4m3fn", [0.375, 500.0, -1e9, 0.1, -0.0, 0.0]),
    ("i1", "bool", [True, 0, 3, False]),
    ("u32", "uint32", [7, 2 ** 31, 2 ** 32 - 1, 0]),
    ("f32", "float32", [0.375, 1e-40, -3.5, 3.4e38]),
])
def test_scalars_of_every_width_are_packed_as_the_checked_path_packs_them(driver, monkeypatch, dtype, torch_name,
                                                                          scales):
    k = jitted(driver, parse_module(copy_scale(dtype)))
    checked = spy_checked_path(monkeypatch, k)
    x, z = TorchLike(0x10000, (64,), dtype=torch_name), TorchLike(0x20000, (64,), dtype=torch_name)
    for s in scales:
        k(x=x, z=z, n=64, s=s)
        assert driver.launches[-1].slots == uncached_slots(driver, k, x=x, z=z, n=64, s=s), s
    assert len(checked) == 1


def test_positional_and_keyword_calls_share_the_binding(driver, monkeypatch):
    k = jitted(driver, example("sqrt_sin.tile"))
    checked = spy_checked_path(monkeypatch, k)
    x, z = TorchLike(0x10000, (4096,)), TorchLike(0x20000, (4096,))
    k(x, z, 4096)
    k(x, z=z, n=4096)
    k(z=z, n=4096, x=x)
    assert len(checked) == 1 and len(driver.launches) == 3
    assert driver.launches[0].slots == driver.launches[1].slots == driver.launches[2].slots


def test_a_rank_2_kernel_with_an_f32_scalar_and_strided_rows(driver, monkeypatch):
    """l2norm: (M, N) tensors, strides packed at bind time; a row-pitched view is another signature."""
    k = jitted(driver, example("l2norm.tile"))
    checked = spy_checked_path(monkeypatch, k)
    x, y = TorchLike(0x100000, (64, 1000)), TorchLike(0x200000, (64, 1000))
    k(x=x, y=y, m=64, eps=1e-6)
    k(x=TorchLike(0x300000, (64, 1000)), y=y, m=64, eps=0.5)
    pitched = TorchLike(0x400000, (64, 1000), strides=(1024, 1))
    k(x=pitched, y=y, m=64, eps=0.5)
    assert len(checked) == 2
    assert driver.launches[1].slots == uncached_slots(driver, k, x=TorchLike(0x300000, (64, 1000)), y=y, m=64,
                                                      eps=0.5)
    assert driver.launches[2].slots == uncached_slots(driver, k, x=pitched, y=y, m=64, eps=0.5)
    assert struct.unpack("<q", driver.launches[2].slots[3])[0] == 1024  # x's row stride


# -- re-binding --------------------------------------------------------------------------------------------------

def test_a_new_shape_stride_type_or_alignment_class_binds_again(driver, monkeypatch):
    k = jitted(driver, example("sqrt_sin.tile"))
    checked = spy_checked_path(monkeypatch, k)
    z = TorchLike(0x20000, (1000,))
    k(x=TorchLike(0x10000, (1000,)), z=z, n=1000)
    aligned = driver.launches[-1].handle
    k(x=TorchLike(0x10010, (1000,)), z=z, n=1000)          # another aligned address: the same binding
    assert len(checked) == 1 and driver.launches[-1].handle == aligned
    k(x=TorchLike(0x10004, (1000,)), z=z, n=1000)          # misaligned: another signature, another specialization
    assert len(checked) == 2 and driver.launches[-1].handle != aligned
    assert driver.launches[-1].slots == uncached_slots(driver, k, x=TorchLike(0x10004, (1000,)), z=z, n=1000)
    k(x=TorchLike(0x10020, (1000,)), z=z, n=1000)          # aligned again: the first binding, its pointer rewritten
    assert len(checked) == 2 and driver.launches[-1].handle == aligned
    assert struct.unpack("<Q", driver.launches[-1].slots[0])[0] == 0x10020
    k(x=TorchLike(0x10000, (3001,)), z=TorchLike(0x20000, (3001,)), n=3001)  # a new shape
    assert len(checked) == 3 and driver.launches[-1].grid == (3, 1, 1)
    assert [struct.unpack("<i", s[:4])[0] for s in driver.launches[-1].slots[1:2]] == [3001]
    k(x=TorchLike(0x10000, (2000,), strides=(2,)), z=TorchLike(0x20000, (2000,)), n=2000)  # new strides
    assert len(checked) == 4
    assert driver.launches[-1].slots == uncached_slots(driver, k, x=TorchLike(0x10000, (2000,), strides=(2,)),
                                                       z=TorchLike(0x20000, (2000,)), n=2000)
    assert len(k._binder.bindings) == 4


def test_errors_after_a_cache_hit_are_the_checked_paths(driver):
    """The same messages as a fresh kernel's: a bound signature never lets a bad argument through."""
    k = jitted(driver, example("sqrt_sin.tile"))
    fresh = jit(example("sqrt_sin.tile"))
    x, z = TorchLike(0x10000, (1000,)), TorchLike(0x20000, (1000,))
    k(x=x, z=z, n=1000)
    k(x=x, z=z, n=1000)
    bad = [
        (dict(x=TorchLike(0x10000, (1000,), dtype="float16"), z=z, n=1000),
         r"^@sqrt_sin: argument %x: the kernel wants f32; .* not torch\.float16$"),
        (dict(x=TorchLike(0x10000, (10, 100)), z=z, n=1000), r"^@sqrt_sin: argument x has rank 2, the kernel wants 1$"),
        (dict(x=x, z=z), r"^@sqrt_sin: missing argument n$"),
        (dict(x=x, z=z, n=1000, m=3), r"^@sqrt_sin: unknown arguments m$"),
        (dict(x=x, z=z, n=1 << 40), r"^@sqrt_sin: an argument does not fit its parameter type: %n = 1099511627776 "
                                    r"is out of range for i32 \(.*\)$"),
        (dict(x=x, z=z, n="many"),
         r"^@sqrt_sin: argument %n = 'many' is not a number for its i32 parameter: invalid literal"),
        (dict(x=x, z=3, n=1000), r"^@sqrt_sin: argument z must be an array \(numpy, torch, cupy\), not int$"),
        (dict(x=CudaArray(0x10000, (1000,), "<f8"), z=z, n=1000),
         r"^@sqrt_sin: argument %x: the kernel wants f32; .* not typestr '<f8' \(CUDA array interface\)$"),
        (dict(x=CudaArray(0x10000, (1000,), "<f4", strides=(6,)), z=z, n=1000),
         r"^@sqrt_sin: argument x: its byte strides are not multiples of the f32 element size 4"),
        (dict(x=DLPackOnly(0x10000, (1000,), (2, 16)), z=z, n=1000),
         r"^@sqrt_sin: argument %x: the kernel wants f32; .* not DLPack type \(code, bits\) \(2, 16\)$"),
        (dict(x=TorchLike(0x10000, (1000,), device=Device("cuda", 1)), z=z, n=1000),
         r"^@sqrt_sin: argument x is on cuda:1, but the kernel runs on device 0 \(cuda:0\): move it there first$"),
        (dict(x=DLPackOnly(0x10000, (1000,), device_id=2), z=z, n=1000),
         r"^@sqrt_sin: argument x is on \(2, 2\), but the kernel runs on device 0"),
    ]
    for args, message in bad:
        for kernel in (k, fresh):
            with pytest.raises(LaunchError, match=message) as e:
                kernel(**args)
            # raised by the checked path alone: no "during handling of the above exception" from the fast path
            assert e.value.__context__ is None or e.value.__suppress_context__
    with pytest.raises(LaunchError, match=r"^@sqrt_sin: takes 3 arguments, got 4$"):
        k(x, z, 1000, 5)
    with pytest.raises(TypeError, match=r"got multiple values for argument 'x'"):  # Python's own rule
        k(x, x=x, z=z, n=1000)
    n = len(driver.launches)
    k(x=x, z=z, n=1000)  # the binding is intact after every refusal
    assert len(driver.launches) == n + 1 and driver.launches[-1].slots == driver.launches[0].slots


def test_a_refused_value_leaves_the_binding_whole(driver):
    """A pack that fails writes nothing: the bound extents survive for the next call of the signature."""
    k = jitted(driver, parse_module(copy_scale("f32")))
    x, z = TorchLike(0x10000, (1000,)), TorchLike(0x20000, (1000,))
    k(x=x, z=z, n=1000, s=2.0)
    good = driver.launches[-1].slots
    with pytest.raises(LaunchError, match=r"^@copy_scale_f32: an argument does not fit its parameter type: %s = 1e\+39 "
                                          r"is out of range for f32 \(float too large to pack with f format\)$"):
        k(x=x, z=z, n=1000, s=1e39)
    k(x=x, z=z, n=1000, s=2.0)
    assert driver.launches[-1].slots == good and len(driver.launches) == 2


def test_an_empty_or_invalid_grid_takes_the_checked_path(driver):
    k = jitted(driver, example("sqrt_sin.tile"))
    x, z = TorchLike(0x10000, (1000,)), TorchLike(0x20000, (1000,))
    k(x=x, z=z, n=1000)
    k(x=x, z=z, n=0)  # an empty problem: nothing launched, not even from the bound block
    assert len(driver.launches) == 1
    with pytest.raises(LaunchError, match=r"^@sqrt_sin: grid = \(cdiv\(%n, 1024\), 1, 1\): "
                                          r"x = cdiv\(%n, 1024\) is -1 "):
        k(x=x, z=z, n=-2000)
    assert len(driver.launches) == 1


def test_bindings_are_bounded(driver, monkeypatch):
    monkeypatch.setattr(binding, "MAX_BINDINGS", 3)
    k = jitted(driver, example("sqrt_sin.tile"))
    for n in range(1, 8):
        k(x=TorchLike(0x10000, (n,)), z=TorchLike(0x20000, (n,)), n=n)
        assert len(k._binder.bindings) <= 3
    assert [struct.unpack("<i", launch.slots[1][:4])[0] for launch in driver.launches] == list(range(1, 8))


def test_any_parameter_list_gets_a_fast_path(driver, monkeypatch):
    """The generated binder for no parameters, and for parameter names that are Python keywords (they appear in
    it only as string literals)."""
    import re

    empty = jitted(driver, parse_module("kernel @empty() {grid = (2, 1, 1), block = (32, 1, 1)} {\n}\n"))
    checked = spy_checked_path(monkeypatch, empty)
    empty()
    empty()
    assert len(checked) == 1 and [launch_.grid for launch_ in driver.launches] == [(2, 1, 1)] * 2
    text = re.sub(r"%z\b", "%lambda", re.sub(r"%x\b", "%in", (EXAMPLES / "sqrt_sin.tile").read_text()))
    k = jitted(driver, parse_module(text))
    checked = spy_checked_path(monkeypatch, k)
    for ptr in (0x10000, 0x30000):
        args = {"in": TorchLike(ptr, (1000,)), "lambda": TorchLike(0x20000, (1000,)), "n": 1000}
        k(**args)
        assert driver.launches[-1].slots == uncached_slots(driver, k, **args)
    assert len(checked) == 1


def test_the_entry_is_what_k_calls_and_what_inspect_shows():
    import inspect

    k = jit(example("sqrt_sin.tile"))
    assert callable(k) and k.__call__ is k._entry
    assert str(inspect.signature(k)) == "(x=MISSING, z=MISSING, n=MISSING, *args, stream=0, **extra)"
    entry, alive = k.__call__, weakref.ref(k)
    del k
    gc.collect()
    assert alive() is None  # the entry does not keep its kernel (nor its loaded modules) alive
    with pytest.raises(LaunchError, match=r"^@sqrt_sin: this entry outlived its JitKernel; call the JitKernel$"):
        entry(x=np.zeros(4, np.float32), z=np.zeros(4, np.float32), n=4)


def test_dlpack_is_read_once_per_call(driver):
    """A DLPack-only tensor has no cheaper reading: one capsule per call, none kept."""
    k = jitted(driver, example("sqrt_sin.tile"))
    x, z = DLPackOnly(0x10000, (512,)), DLPackOnly(0x20000, (512,))
    for _ in range(3):
        k(x=x, z=z, n=512)
    assert x.dlpack_calls == 3 + 1  # the first call reads it twice: the fast path, then the checked path binding it


# -- tensor maps ---------------------------------------------------------------------------------------------------

def tma_slots(x, y, m, n):
    return [fake_blob(x.data_ptr(), x.shape, x.stride()), fake_blob(y.data_ptr(), y.shape, y.stride()),
            struct.pack("<i4x", m), struct.pack("<i4x", n)]


def test_tensor_maps_follow_the_pointer_and_are_encoded_once_per_tensor(driver, monkeypatch):
    """tma_copy: a map is encoded once per (address, shape, strides); a tensor at a new address with the same
    signature gets its own map (never the previous tensor's); an address seen before gets its cached map."""
    k = jitted(driver, example("tma_copy.tile"))
    checked = spy_checked_path(monkeypatch, k)
    m, n = 100, 300
    x1, y1 = TorchLike(0x100000, (m, n), (304, 1)), TorchLike(0x200000, (m, n), (304, 1))
    x2 = TorchLike(0x300000, (m, n), (304, 1))
    k(x=x1, y=y1, m=m, n=n)
    assert driver.launches[-1].slots == tma_slots(x1, y1, m, n) and len(driver.encodes) == 2
    k(x=x1, y=y1, m=m, n=n)
    assert driver.launches[-1].slots == tma_slots(x1, y1, m, n)
    assert len(driver.encodes) == 2 and len(checked) == 1
    k(x=x2, y=y1, m=m, n=n)  # only the pointer changed: a new map (the checked path encodes it once)
    assert driver.launches[-1].slots == tma_slots(x2, y1, m, n)
    assert driver.encodes[-1] == ("x", 0x300000, (m, n), (304, 1)) and len(checked) == 2
    k(x=x1, y=y1, m=m, n=n)  # back to x1: its map from the binding's cache, on the fast path
    assert driver.launches[-1].slots == tma_slots(x1, y1, m, n)
    assert len(driver.encodes) == 3 and len(checked) == 2
    k(x=x2, y=y1, m=m, n=n)
    assert driver.launches[-1].slots == tma_slots(x2, y1, m, n) and len(checked) == 2
    wide, wide_y = TorchLike(0x100000, (m, 600), (608, 1)), TorchLike(0x200000, (m, 600), (608, 1))
    k(x=wide, y=wide_y, m=m, n=600)  # the same address, another shape: another map, another binding
    assert driver.launches[-1].slots == tma_slots(wide, wide_y, m, 600) and len(checked) == 3
    assert len(driver.encodes) == 5


def test_a_tensor_map_argument_breaking_tmas_rules_is_refused_after_a_cache_hit(driver):
    k = jitted(driver, example("tma_copy.tile"))
    y = TorchLike(0x200000, (64, 256))
    k(x=TorchLike(0x100000, (64, 256)), y=y, m=64, n=256)
    with pytest.raises(LaunchError, match=r"^@tma_copy: argument x: .*16"):  # rows 1020 bytes apart
        k(x=TorchLike(0x100000, (64, 255), (255, 1)), y=y, m=64, n=255)


# -- prepared call sites -------------------------------------------------------------------------------------------

def test_a_prepared_site_rewrites_pointers_and_checks_what_it_was_bound_for(driver):
    k = jitted(driver, example("sqrt_sin.tile"))
    x, z = TorchLike(0x10000, (1000,)), TorchLike(0x20000, (1000,))
    site = k.prepare(x=x, z=z, n=1000)
    site()
    assert driver.launches[-1].slots == uncached_slots(driver, k, x=x, z=z, n=1000)
    x2 = TorchLike(0x80000, (1000,))
    site(x=x2)
    assert driver.launches[-1].slots == uncached_slots(driver, k, x=x2, z=z, n=1000)
    refused = [
        (dict(x=TorchLike(0x80004, (1000,))),
         r"x differs from the prepared call's tensor \(shape \(1000,\), strides \(1,\), type torch.float32, "
         r"address 0x80004; prepared: .*16-byte aligned"),
        (dict(x=TorchLike(0x80000, (1000,), dtype="float16")), r"x differs .* type torch.float16"),
        (dict(x=TorchLike(0x80000, (999,))), r"x differs .*shape \(999,\)"),
        (dict(z=CudaArray(0x90000, (1000,))), r"z differs .*type <f4"),
        (dict(x=TorchLike(0x80000, (1000,), device=Device("cuda", 1))), r"x differs"),
        (dict(x=np.zeros(1000, np.float32)), r"x is not a device tensor; a prepared call takes device tensors, not "
                                             r"ndarray"),
        (dict(n=5), r"n is not a tensor parameter"),
    ]
    for args, message in refused:
        with pytest.raises(LaunchError, match=r"^@sqrt_sin: " + message):
            site(**args)
    assert len(driver.launches) == 2


def test_a_prepared_site_keeps_the_tensors_it_launches_with_alive(driver):
    k = jitted(driver, example("sqrt_sin.tile"))
    site = k.prepare(x=TorchLike(0x10000, (1000,)), z=TorchLike(0x20000, (1000,)), n=1000)
    inline = TorchLike(0x30000, (1000,))
    alive = weakref.ref(inline)
    site(x=inline)
    del inline
    gc.collect()
    assert alive() is not None and site.arguments["x"] is alive()
    del site
    gc.collect()
    assert alive() is None


def test_prepare_refuses_host_arrays(driver):
    k = jitted(driver, example("sqrt_sin.tile"))
    with pytest.raises(LaunchError, match=r"^@sqrt_sin: prepare\(\) needs device tensors; x is a host array$"):
        k.prepare(x=np.zeros(8, np.float32), z=TorchLike(0x20000, (8,)), n=8)


# -- host arrays and streams -----------------------------------------------------------------------------------------

class FakeBuffer:
    """DeviceBuffer.from_numpy without a device: 'device memory' is a copy at a made-up address; to_numpy gives it
    back doubled, as if the kernel had written 2x."""

    next_ptr = [0x7000000]
    made = []

    def __init__(self, host):
        self.host = host.copy()
        self.ptr = self.next_ptr[0]
        self.next_ptr[0] += 0x100000
        self.made.append(self)

    @classmethod
    def from_numpy(cls, a):
        return cls(np.ascontiguousarray(a))

    def to_numpy(self, dtype, shape):
        return (self.host.astype(np.float64) * 2).astype(dtype).reshape(shape)


def test_host_arrays_are_copied_every_call_and_never_bound(driver, monkeypatch):
    """ml_dtypes bf16 numpy arrays: copied in, launched with the copy's address and the checked path's bytes, the
    stored one copied back; a signature with host arrays is never cached."""
    monkeypatch.setattr(binding, "DeviceBuffer", FakeBuffer)
    k = jitted(driver, parse_module(copy_scale("bf16")))
    checked = spy_checked_path(monkeypatch, k)
    x = np.arange(64).astype(ml_dtypes.bfloat16)
    z = np.zeros(64, ml_dtypes.bfloat16)
    for _ in range(2):
        FakeBuffer.made.clear()
        k(x=x, z=z, n=64, s=0.375)
        xb, zb = FakeBuffer.made
        values = k.argument_values(x=x, z=z, n=64, s=0.375)
        values[0], values[3] = xb.ptr, zb.ptr
        assert driver.launches[-1].slots == packed_slots(driver.layout, values)
        assert z.dtype == ml_dtypes.bfloat16 and np.array_equal(z.astype(np.float64), np.zeros(64))  # 2 x 0
    assert len(checked) == 2 and not k._binder.bindings
    with pytest.raises(LaunchError, match=r"the kernel wants bf16; pass a numpy array of dtype ml_dtypes.bfloat16"):
        k(x=x.astype(np.float32), z=z, n=64, s=0.375)


def test_a_stream_object_is_launched_on_by_its_handle(driver):
    k = jitted(driver, example("sqrt_sin.tile"))
    x, z = TorchLike(0x10000, (1000,)), TorchLike(0x20000, (1000,))
    k(x=x, z=z, n=1000)
    k(x=x, z=z, n=1000, stream=SimpleNamespace(cuda_stream=0x1234))
    k(x=x, z=z, n=1000, stream=0x5678)
    k(x=x, z=z, n=1000)
    assert [launch_.stream for launch_ in driver.launches] == [0, 0x1234, 0x5678, 0]


# -- on the GPU: the cached path with torch tensors ------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch_cuda():
    from ptxgen.runtime import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return pytest.importorskip("torch")


def close_to_sqrt_sin(z, x) -> bool:
    """z = sqrt(sin(x)) within f32 accuracy of the float64 reference (rtol 1e-5, atol 1e-6: sqrt near 0)."""
    return np.allclose(z.double().cpu().numpy(), np.sqrt(np.sin(x.double().cpu().numpy())), rtol=1e-5, atol=1e-6)


class OnlyInterface:
    """A torch CUDA tensor seen only through ``__cuda_array_interface__`` (as a cupy array is)."""

    def __init__(self, t):
        self._t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


@pytest.mark.gpu
def test_gpu_cached_calls_with_torch_tensors_match_numpy(torch_cuda, monkeypatch):
    """sqrt_sin: several calls with different tensors of one signature (the cached path rewrites the pointers),
    then a ragged shape, a misaligned view and the first shape again — every result against float64 numpy."""
    torch = torch_cuda
    k = jit(example("sqrt_sin.tile"))
    checked = spy_checked_path(monkeypatch, k)

    def run(n, offset=0):
        base = torch.rand(n + offset, device="cuda") * 3.0
        x = base[offset:]
        z = torch.full((n,), -1.0, device="cuda")
        k(x=x, z=z, n=n)
        torch.cuda.synchronize()
        assert close_to_sqrt_sin(z, x), (n, offset)

    for _ in range(4):
        run(4096)
    assert len(checked) == 1
    run(3001)
    run(4096, offset=1)  # 4 bytes past an aligned address: another specialization
    run(4096)
    assert len(checked) == 3 and len(k._binder.bindings) == 3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_gpu_scalars_rewritten_per_call(torch_cuda, dtype):
    """copy_scale: the scale changes every call (only its slot is rewritten): z = round(x · s) each time."""
    torch = torch_cuda
    kind = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    host = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}[dtype]
    k = jit(parse_module(copy_scale(dtype)))
    n = 5000
    x = (torch.rand(n, device="cuda") * 8 - 4).to(kind)
    xs = x.float().cpu().numpy()
    for s in (0.375, 2.0, -1.5, 0.0):
        z = torch.full((n,), 7.0, device="cuda").to(kind)
        k(x=x, z=z, n=n, s=s)
        torch.cuda.synchronize()
        want = (xs * np.float32(np.float32(s).astype(host))).astype(host).astype(np.float64)
        assert np.array_equal(z.float().cpu().numpy().astype(np.float64), want), s


@pytest.mark.gpu
def test_gpu_every_framework_path_on_the_cache(torch_cuda):
    """The same kernel fed torch tensors, __cuda_array_interface__ views and DLPack-only views of fresh tensors,
    interleaved, each path's signature bound once."""
    torch = torch_cuda
    k = jit(example("sqrt_sin.tile"))
    n = 2048
    for wrap in (lambda t: t, OnlyInterface, OnlyDLPack) * 2:
        x = torch.rand(n, device="cuda") * 3.0
        z = torch.zeros(n, device="cuda")
        k(x=wrap(x), z=wrap(z), n=n)
        torch.cuda.synchronize()
        assert close_to_sqrt_sin(z, x)
    assert len(k._binder.bindings) == 3


@pytest.mark.gpu
def test_gpu_tensor_maps_follow_the_tensor(torch_cuda):
    """tma_copy on torch tensors: new tensors of one shape (a map per address), then another shape; exact copies."""
    torch = torch_cuda
    k = jit(example("tma_copy.tile"))
    for m, n in ((100, 300), (100, 300), (100, 300), (64, 1024), (100, 300)):
        x = torch.randn(m, n, device="cuda")
        y = torch.zeros(m, n, device="cuda")
        k(x=x, y=y, m=m, n=n)
        torch.cuda.synchronize()
        assert torch.equal(x, y), (m, n)


@pytest.mark.gpu
def test_gpu_prepared_site_swaps_tensors_and_runs_on_a_stream(torch_cuda):
    torch = torch_cuda
    k = jit(example("sqrt_sin.tile"))
    n = 4096
    stream = torch.cuda.Stream()
    x, z = torch.rand(n, device="cuda") * 3.0, torch.zeros(n, device="cuda")
    site = k.prepare(x=x, z=z, n=n, stream=stream)
    for _ in range(3):
        x2, z2 = torch.rand(n, device="cuda") * 3.0, torch.zeros(n, device="cuda")
        torch.cuda.synchronize()
        site(x=x2, z=z2)
        stream.synchronize()
        assert close_to_sqrt_sin(z2, x2)
    x3, z3 = torch.rand(n, device="cuda") * 3.0, torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    k(x=x3, z=z3, n=n, stream=stream)
    stream.synchronize()
    assert close_to_sqrt_sin(z3, x3)
