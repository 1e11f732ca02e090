"""What IR values lower to: the LLVM type of each scalar type (``bfloat`` included), 16-bit pairs packed in an i32,
the known power-of-two multiple of an integer, and the lowered ``gtensor`` parameter and ``gview``.

>>> llvm_type(SCALARS["bf16"]), memory_type(SCALARS["i1"])     # doctest: +SKIP
(bfloat, i8)

Shared by the lowering context and the access emitters (``ptxgen.lower.gmem``, ``ptxgen.lower.shared``); it imports
no other module of the lowering.
"""
from __future__ import annotations

import math
import struct

from llvmlite import ir

from ..ir.types import ScalarType

BIG_MULTIPLE = 1 << 30  # the "multiple" of the constant 0


class BFloatType(ir.types._BaseFloatType):
    """LLVM's ``bfloat`` (llvmlite has no such type); constants print as ``0xR....`` (round to nearest even)."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        if math.isnan(value):
            return "0xR7FC0"
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return f"0xR{bits & 0xFFFF:04X}"


BFloatType._create_instance()

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, BF16, F32 = ir.HalfType(), BFloatType(), ir.FloatType()
GPTR = ir.PointerType(addrspace=1)

_LLVM = {"i1": I1, "i32": I32, "u32": I32, "i64": I64, "u64": I64, "f16": F16, "bf16": BF16, "f32": F32,
         "e4m3": I8, "e5m2": I8}


def llvm_type(t: ScalarType):
    """The LLVM register type of a scalar type (fp8 values are kept as their i8 bits)."""
    return _LLVM[t.name]


def memory_type(t: ScalarType):
    """The LLVM type of an element in memory (i1 is one byte)."""
    return I8 if t.name == "i1" else _LLVM[t.name]


def pack_pair(b, low, high):
    """Two 16-bit values as one i32: a ``<2 x T>`` vector (``low`` in the low half) bitcast, not shifts and ors of
    the halves, so that NVPTX converts an f32 pair with one ``cvt.rn.{bf16x2,f16x2}.f32`` into one register and
    ptxas keeps the pair packed (F2FP.PACK_AB). Post: ``unpack_pair(b, pack_pair(b, x, y)) == (x, y)``."""
    vec = ir.Constant(ir.VectorType(low.type, 2), None)
    vec = b.insert_element(b.insert_element(vec, low, ir.Constant(I32, 0)), high, ir.Constant(I32, 1))
    return b.bitcast(vec, I32)


def unpack_pair(b, word, scalar):
    """The inverse of ``pack_pair``: the (low, high) values of LLVM type ``scalar`` in the i32 ``word``."""
    vec = b.bitcast(word, ir.VectorType(scalar, 2))
    return b.extract_element(vec, ir.Constant(I32, 0)), b.extract_element(vec, ir.Constant(I32, 1))


def pow2_divisor(n: int) -> int:
    """The largest power of two dividing ``n`` (``BIG_MULTIPLE`` for 0)."""
    n = abs(int(n))
    return (n & -n) if n else BIG_MULTIPLE


class TensorArg:
    """A gtensor parameter in the kernel: ``ptr`` (addrspace 1), ``extents`` (i32), ``strides`` (i64, elements)."""

    def __init__(self, name, dtype, rank, ptr, extents, strides, spec):
        self.name, self.dtype, self.rank = name, dtype, rank
        self.ptr, self.extents, self.strides, self.spec = ptr, extents, strides, spec

    def stride(self, m):
        """Mode ``m``'s stride (the constant 1 for the specialization's contiguous mode)."""
        return ir.Constant(I64, 1) if m == self.spec.contiguous else self.strides[m]


class GView:
    """A gview: the tensor, the per-mode i32 origin and its known multiples, the static tile shape."""

    def __init__(self, tensor, origin, multiples, shape):
        self.tensor, self.origin, self.multiples, self.shape = tensor, origin, multiples, shape
