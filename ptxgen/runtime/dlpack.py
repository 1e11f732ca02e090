"""Reading a DLPack tensor (dlpack.h) without taking ownership: the pointer, shape, strides and type of any
``__dlpack__`` producer (JAX, cupy, torch, numpy …).

>>> dlpack_view(np.zeros((4, 8), np.float32))[1:]          # doctest: +SKIP
((4, 8), (8, 1), (2, 32))
"""
from __future__ import annotations

import ctypes
import functools
import struct

__all__ = ["DL_CUDA", "DL_CUDA_MANAGED", "DLPACK_DTYPE", "c_strides", "dlpack_view"]

DL_CUDA, DL_CUDA_MANAGED = 2, 13        # DLDeviceType of CUDA device memory and managed memory
# (DLDataTypeCode, bits) → our type (dlpack.h: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool, 10 float8_e4m3fn,
# 12 float8_e5m2; torch exports its bool, bfloat16 and float8 tensors with these codes)
DLPACK_DTYPE = {(0, 32): "i32", (0, 64): "i64", (1, 32): "u32", (1, 64): "u64", (2, 16): "f16", (2, 32): "f32",
                (4, 16): "bf16", (6, 8): "i1", (10, 8): "e4m3", (12, 8): "e5m2"}


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


_DLTENSOR = struct.Struct("<QiiiBBHQQQ")  # DLTensor: data, device (type, id), ndim, dtype (code, bits, lanes),
#                                            shape*, strides*, byte_offset — 48 bytes on every 64-bit platform
_DLTENSOR_BYTES = ctypes.c_char * _DLTENSOR.size
_INT64S = [ctypes.c_int64 * n for n in range(9)]  # the array types of shape and strides, by rank


def dlpack_view(a):
    """(device pointer, shape, element strides, (type code, bits)) of any object with ``__dlpack__`` (JAX, cupy,
    torch …), read from its DLPack capsule without taking ownership: the capsule keeps its name, so its producer's
    deleter runs when it is collected, and ``a`` itself keeps the memory alive for the launch.
    E.g. a contiguous (4, 8) f32 CUDA array → (ptr, (4, 8), (8, 1), (2, 32)). Pre: ``a`` is in device memory."""
    capsule = a.__dlpack__()
    managed = _GET_POINTER(capsule, b"dltensor")   # DLManagedTensor starts with its DLTensor
    data, _, _, ndim, code, bits, _, shape_at, strides_at, offset = _DLTENSOR.unpack_from(
        _DLTENSOR_BYTES.from_address(managed))
    # read while the capsule (which owns both arrays) is alive
    int64s = _INT64S[ndim] if ndim < len(_INT64S) else ctypes.c_int64 * ndim
    shape = tuple(int64s.from_address(shape_at)) if ndim else ()
    strides = tuple(int64s.from_address(strides_at)) if strides_at and ndim else c_strides(shape)
    return data + offset, shape, strides, (code, bits)
