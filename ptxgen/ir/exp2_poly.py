"""exp2 in software on the FP32 pipe (``frag.exp2 {ftz = true, poly = (k, n)}``): 2^x = 2^j · 2^f with j = round(x)
and a minimax polynomial for 2^f on [−0.5, 0.5], written once over a small arithmetic interface so that the SAME
steps run on numpy float32 (``NumpyF32``: the interpreter) and emit LLVM IR (``LLVMF32``: the lowering).

The steps, each one f32 (or i32) operation, so interpreter and GPU agree to the last bit (the fma's to within 1 ulp:
numpy rounds a·b + c once from float64):

1. ``x = min(max(x, −127), 128)``: beyond, 2^x is below the flush threshold or overflows (NaN gives 0: max.f32
   returns its non-NaN operand).
2. ``t = x + 1.5·2^23``: one rounding to an integer (ties to even), which sits in t's low mantissa bits;
   ``j = t − 1.5·2^23`` (exact), ``f = x − j`` in [−0.5, 0.5] (exact).
3. ``p = 1 + f·(c1 + f·(c2 + …))``: Horner by fma, c0 = 1 exactly, so p(0) = 1 and 2^j comes out exact.
4. ``2^j = bits((t ≪ 23) + (127 ≪ 23))``: t's low bits shifted into the exponent field (j = −127 gives +0, j = 128
   gives +inf), and ``r = p · 2^j`` by ``mul.rn.ftz``: a result below 2^-126 is +0, as ``ex2.approx.ftz``'s is.

Per value: 2 min/max, 3 fadd, ``degree`` fma, 1 shift-add, 1 fmul (degree 3: 10 instructions, no MUFU).
Accuracy (the f32 steps against float64 2^x over dense sweeps of [−0.5, 0.5] and [−126, 127.5), 4·10^6 points
each): max relative error 1.014e-4 (degree 3), 2.9e-6 (4), 1.7e-7 (5) for x in [−126, 127.5); 0 below −126 where
2^x < 2^-126; +inf from 127.5 (2^j overflows first).
``exp2(NumpyF32(), np.float32([0, -1, -0.25]), 3)`` → [1, 0.5, 0.8409…]; post: same shape, float32, ≥ 0.
"""
from __future__ import annotations

import numpy as np

from .types import F32, I32

ROUND = 12582912.0            # 1.5·2^23: x + ROUND rounds x to an integer held in the low mantissa bits
EXPONENT_ONE = 127 << 23      # the bits of 1.0: 2^j's bits are (j ≪ 23) + this
LOWEST, HIGHEST = -127.0, 128.0
# c1 … c_degree of p(f) = 1 + c1·f + … ≈ 2^f on [−0.5, 0.5], relative minimax (Lawson) with c0 = 1 fixed, as f32
COEFFICIENTS = {
    3: (0.6932829022407532, 0.2422109991312027, 0.05500893294811249),
    4: (0.6931241750717163, 0.24024099111557007, 0.05590642988681793, 0.009582854807376862),
    5: (0.6931470036506653, 0.24022242426872253, 0.05550733581185341, 0.009671512991189957,
        0.0013264728477224708),
}
DEGREES = tuple(COEFFICIENTS)
DEFAULT_DEGREE = 3
MAX_RELATIVE_ERROR = {3: 1.1e-4, 4: 3.5e-6, 5: 2.5e-7}   # the bounds the tests hold the f32 steps to


def exp2(o, x, degree: int = DEFAULT_DEGREE):
    """2^x by the steps of the module docstring on ``o``'s arithmetic (``NumpyF32`` or ``LLVMF32``).
    ``exp2(NumpyF32(), np.float32([-126.0]))`` → [2^-126]; ``exp2(NumpyF32(), np.float32([-np.inf]))`` → [0].
    Post: ``o``'s f32 value(s)."""
    x = o.minimum(o.maximum(x, o.f(LOWEST)), o.f(HIGHEST))
    t = o.add(x, o.f(ROUND))
    f = o.sub(x, o.sub(t, o.f(ROUND)))
    coefficients = COEFFICIENTS[degree]
    p = o.f(coefficients[-1])
    for c in coefficients[-2::-1]:
        p = o.fma(p, f, o.f(c))
    p = o.fma(p, f, o.f(1.0))
    scale = o.from_bits(o.shift_add(o.bits(t), 23, EXPONENT_ONE))
    return o.mul_ftz(p, scale)


def takes_poly(index: int, poly) -> bool:
    """Whether value ``index`` of the fragment takes the polynomial under ``poly = (k, n)``: index mod n < k.
    ``[takes_poly(i, (1, 4)) for i in range(8)]`` → [T, F, F, F, T, F, F, F]."""
    k, n = poly
    return index % n < k


class NumpyF32:
    """The steps on float32/int32 numpy arrays, each rounded to f32 (fma: exact product in float64, one rounding)."""

    @staticmethod
    def f(c):
        return np.float32(c)

    @staticmethod
    def maximum(a, b):
        return np.fmax(np.asarray(a, np.float32), b).astype(np.float32)

    @staticmethod
    def minimum(a, b):
        return np.fmin(np.asarray(a, np.float32), b).astype(np.float32)

    @staticmethod
    def add(a, b):
        return (np.asarray(a, np.float32) + np.float32(b)).astype(np.float32)

    @staticmethod
    def sub(a, b):
        return (np.asarray(a, np.float32) - np.asarray(b, np.float32)).astype(np.float32)

    @staticmethod
    def fma(a, b, c):
        return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.float64(c)).astype(np.float32)

    @staticmethod
    def bits(a):
        return np.asarray(a, np.float32).view(np.uint32)

    @staticmethod
    def shift_add(i, shift, addend):
        return ((np.asarray(i, np.uint64) << np.uint64(shift)) + np.uint64(addend)).astype(np.uint32)

    @staticmethod
    def from_bits(i):
        return np.asarray(i, np.uint32).view(np.float32)

    @staticmethod
    def mul_ftz(a, b):
        with np.errstate(over="ignore", invalid="ignore"):
            r = (np.asarray(a, np.float32) * np.asarray(b, np.float32)).astype(np.float32)
        return np.where(np.abs(r) < np.finfo(np.float32).tiny, np.float32(0), r).astype(np.float32)


class LLVMF32:
    """The steps as LLVM IR at the lowering context's insertion point (``lx.b``, ``lx.call``): ``llvm.maxnum`` and
    ``llvm.minnum`` (max.f32, min.f32), plain fadd/fsub (no fast-math flags: nothing reassociates the rounding
    step), ``llvm.fma.f32``, bitcasts, shl + add, ``llvm.nvvm.mul.rn.ftz.f``."""

    def __init__(self, lx):
        self.lx, self.b = lx, lx.b
        self.float_type, self.int_type = lx.llvm_type(F32), lx.llvm_type(I32)

    def f(self, c):
        return self.lx.const(F32, float(c))

    def maximum(self, a, b):
        return self.lx.call("llvm.maxnum.f32", self.float_type, [a, b])

    def minimum(self, a, b):
        return self.lx.call("llvm.minnum.f32", self.float_type, [a, b])

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def fma(self, a, b, c):
        return self.lx.call("llvm.fma.f32", self.float_type, [a, b, c])

    def bits(self, a):
        return self.b.bitcast(a, self.int_type)

    def shift_add(self, i, shift, addend):
        return self.b.add(self.b.shl(i, self.lx.i32(shift)), self.lx.i32(addend))

    def from_bits(self, i):
        return self.b.bitcast(i, self.float_type)

    def mul_ftz(self, a, b):
        return self.lx.call("llvm.nvvm.mul.rn.ftz.f", self.float_type, [a, b])
