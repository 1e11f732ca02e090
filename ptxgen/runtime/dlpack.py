"""Reading a DLPack tensor (dlpack.h) without taking ownership: the pointer, shape, strides and type of any
``__dlpack__`` producer (JAX, cupy, torch, numpy …).

>>> dlpack_view(np.zeros((4, 8), np.float32))[1:]          # doctest: +SKIP
((4, 8), (8, 1), (2, 32))
"""
from __future__ import annotations

import ctypes
import functools

__all__ = ["DL_CUDA", "DL_CUDA_MANAGED", "DLPACK_DTYPE", "c_strides", "dlpack_view"]

DL_CUDA, DL_CUDA_MANAGED = 2, 13        # DLDeviceType of CUDA device memory and managed memory
# (DLDataTypeCode, bits) → our type (dlpack.h: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool, 10 float8_e4m3fn,
# 12 float8_e5m2; torch exports its bool, bfloat16 and float8 tensors with these codes)
DLPACK_DTYPE = {(0, 32): "i32", (0, 64): "i64", (1, 32): "u32", (1, 64): "u64", (2, 16): "f16", (2, 32): "f32",
                (4, 16): "bf16", (6, 8): "i1", (10, 8): "e4m3", (12, 8): "e5m2"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


# a private prototype: setting restype/argtypes on the shared ctypes.pythonapi attribute would change it for every
# other user of PyCapsule_GetPointer in the process
_GET_POINTER = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@functools.lru_cache(maxsize=1024)
def c_strides(shape: tuple) -> tuple:
    """The element strides of a C-contiguous (row-major) tensor of ``shape`` (a tuple): ``(4, 8)`` → ``(8, 1)``
    (remembered per shape: a CUDA-array-interface tensor without strides is read on every call)."""
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= extent
    return tuple(reversed(strides))


def dlpack_view(a):
    """(device pointer, shape, element strides, (type code, bits)) of any object with ``__dlpack__`` (JAX, cupy,
    torch …), read from its DLPack capsule without taking ownership: the capsule keeps its name, so its producer's
    deleter runs when it is collected, and ``a`` itself keeps the memory alive for the launch.
    E.g. a contiguous (4, 8) f32 CUDA array → (ptr, (4, 8), (8, 1), (2, 32)). Pre: ``a`` is in device memory."""
    capsule = a.__dlpack__()
    managed = _GET_POINTER(capsule, b"dltensor")
    t = _DLTensor.from_address(managed)   # DLManagedTensor starts with its DLTensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else c_strides(shape)
    return (t.data or 0) + t.byte_offset, shape, strides, (t.dtype.code, t.dtype.bits)
