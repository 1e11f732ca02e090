"""f32 transcendentals for the lowering, written once over a small arithmetic interface so that the SAME code
emits LLVM IR (``LLVMOps``) and runs on numpy (``NumpyOps``, used by tests to measure the algorithms' error).

| function | algorithm | accuracy (f32 inputs) |
|---|---|---|
| ``sqrt`` | ``llvm.sqrt.f32`` → ``sqrt.rn.f32`` | correctly rounded (IEEE) |
| ``rsqrt`` | ``rsqrt.approx.f32`` | ≈ 2^-22.9 relative (PTX ISA; ~1-2 ulp) |
| ``sin``, ``cos`` | quadrant reduction x − q·π/2 with a 3-part π/2 and fma (Cody–Waite), then Cephes' minimax polynomials on [−π/4, π/4] | ≤ 2 ulp or 2^-24 absolute for abs(x) ≤ 2^17; no Payne–Hanek: beyond that the reduction loses accuracy |
| ``exp`` | j = rint(x·log2 e), f = x − j·ln2 (two-part ln 2, fma), ``ex2.approx.f32``(f·log2 e) · 2^j (two exact scalings) | ≈ 2-3 ulp; +inf above 88.72, 0 below −103.9, NaN propagates |
| ``exp2`` | ``ex2.approx.f32`` | ≈ 2 ulp (PTX ISA: 2^-22.5 relative) |
| ``log`` | frexp, m in [√½, √2), Cephes' degree-9 polynomial for log(1+m), e·ln 2 in two parts | ≤ 2 ulp; log(0) = −inf, log(x<0) = NaN, log(+inf) = +inf |

The ``approx`` PTX instructions come from NVVM intrinsics (no inline asm needed). NumpyOps emulates them with
correctly rounded float64 results, so the numpy measurement covers the reduction and the polynomials only.
"""
from __future__ import annotations

import math

import numpy as np

TWO_OVER_PI = 0.636619772367581343
PIO2_HI, PIO2_MID, PIO2_LO = 1.5707962513e+00, 7.5497894159e-08, 5.3903029534e-15
S1, S2, S3 = -1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1
C1, C2, C3 = 2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2
LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693145751953125, 1.428606765330187e-06
LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
         -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
SQRTHF = 0.707106781186547524


def _quadrant(o, x):
    q = o.rint(o.mul(x, o.f(TWO_OVER_PI)))
    r = o.fma(q, o.f(-PIO2_HI), x)
    r = o.fma(q, o.f(-PIO2_MID), r)
    r = o.fma(q, o.f(-PIO2_LO), r)
    z = o.mul(r, r)
    s = o.fma(o.mul(o.fma(o.fma(o.f(S1), z, o.f(S2)), z, o.f(S3)), z), r, r)
    c = o.fma(o.mul(o.fma(o.fma(o.f(C1), z, o.f(C2)), z, o.f(C3)), z), z, o.fma(o.f(-0.5), z, o.f(1.0)))
    return o.i_and(o.to_int(q), 3), s, c


def _by_quadrant(o, k, a, b, c, d):
    """a, b, c, d for quadrant k = 0, 1, 2, 3."""
    lo = o.select(o.i_eq(k, 0), a, b)
    hi = o.select(o.i_eq(k, 2), c, d)
    return o.select(o.i_lt(k, 2), lo, hi)


def sin(o, x):
    k, s, c = _quadrant(o, x)
    return _by_quadrant(o, k, s, c, o.neg(s), o.neg(c))


def cos(o, x):
    k, s, c = _quadrant(o, x)
    return _by_quadrant(o, k, c, o.neg(s), o.neg(c), s)


def exp(o, x):
    xc = o.maximum(o.minimum(x, o.f(88.8)), o.f(-104.0))
    j = o.rint(o.mul(xc, o.f(LOG2E)))
    f = o.fma(j, o.f(-LN2_HI), xc)
    f = o.fma(j, o.f(-LN2_LO), f)
    e = o.ex2(o.mul(f, o.f(LOG2E)))
    ji = o.to_int(j)
    j1 = o.i_ashr(ji, 1)
    j2 = o.i_sub(ji, j1)
    s1 = o.from_bits(o.i_shl(o.i_add(j1, 127), 23))
    s2 = o.from_bits(o.i_shl(o.i_add(j2, 127), 23))
    return o.mul(o.mul(e, s1), s2)


def exp2(o, x):
    return o.ex2(x)


def log(o, x):
    tiny = o.lt(x, o.f(1.1754943508222875e-38))  # subnormal (or <= 0): scale up by 2^23 first
    xs = o.select(tiny, o.mul(x, o.f(8388608.0)), x)
    bits = o.bits(xs)
    e = o.i_sub(o.i_and(o.i_ashr(bits, 23), 0xFF), o.select(tiny, o.int_(126 + 23), o.int_(126)))
    m = o.from_bits(o.i_or(o.i_and(bits, 0x007FFFFF), 0x3F000000))  # in [0.5, 1)
    small = o.lt(m, o.f(SQRTHF))
    e = o.select(small, o.i_sub(e, 1), e)
    m = o.select(small, o.sub(o.add(m, m), o.f(1.0)), o.sub(m, o.f(1.0)))
    fe = o.to_float(e)
    z = o.mul(m, m)
    p = o.f(LOG_P[0])
    for coef in LOG_P[1:]:
        p = o.fma(p, m, o.f(coef))
    y = o.mul(o.mul(m, z), p)
    y = o.fma(fe, o.f(-2.12194440e-4), y)
    y = o.fma(o.f(-0.5), z, y)
    r = o.add(m, y)
    r = o.fma(fe, o.f(0.693359375), r)
    r = o.select(o.eq(x, o.f(0.0)), o.f(-math.inf), r)
    r = o.select(o.eq(x, o.f(math.inf)), x, r)
    return o.select(o.lt(x, o.f(0.0)), o.f(math.nan), o.select(o.isnan(x), x, r))


def sqrt(o, x):
    return o.sqrt(x)


def rsqrt(o, x):
    return o.rsqrt(x)


# ---------------------------------------------------------------------------------------------------- backends


class LLVMOps:
    """Builds LLVM IR at ``lx``'s insertion point."""

    def __init__(self, lx):
        from llvmlite import ir

        self.lx, self.b, self.ir = lx, lx.b, ir
        self.F32, self.I32 = ir.FloatType(), ir.IntType(32)

    def f(self, c):
        return self.ir.Constant(self.F32, float(c))

    def int_(self, n):
        return self.ir.Constant(self.I32, int(n))

    def _i(self, n):
        return n if not isinstance(n, int) else self.int_(n)

    def _call(self, name, ret, *args):
        return self.lx.call(name, ret, list(args))

    def fma(self, a, b, c):
        return self._call("llvm.fma.f32", self.F32, a, b, c)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def rint(self, a):
        return self._call("llvm.rint.f32", self.F32, a)

    def minimum(self, a, b):
        return self._call("llvm.minimum.f32", self.F32, a, b)

    def maximum(self, a, b):
        return self._call("llvm.maximum.f32", self.F32, a, b)

    def to_int(self, a):  # cvt.rzi.s32.f32: saturating, NaN -> 0 (defined for every input, unlike fptosi)
        return self._call("llvm.nvvm.f2i.rz", self.I32, a)

    def to_float(self, i):
        return self.b.sitofp(i, self.F32)

    def bits(self, a):
        return self.b.bitcast(a, self.I32)

    def from_bits(self, i):
        return self.b.bitcast(i, self.F32)

    def i_and(self, i, n):
        return self.b.and_(i, self._i(n))

    def i_or(self, i, n):
        return self.b.or_(i, self._i(n))

    def i_add(self, i, n):
        return self.b.add(i, self._i(n))

    def i_sub(self, i, n):
        return self.b.sub(i, self._i(n))

    def i_shl(self, i, n):
        return self.b.shl(i, self._i(n))

    def i_ashr(self, i, n):
        return self.b.ashr(i, self._i(n))

    def i_eq(self, i, n):
        return self.b.icmp_signed("==", i, self._i(n))

    def i_lt(self, i, n):
        return self.b.icmp_signed("<", i, self._i(n))

    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, c, a, b):
        return self.b.select(c, a, b)

    def ex2(self, a):
        return self._call("llvm.nvvm.ex2.approx.f", self.F32, a)

    def sqrt(self, a):
        return self._call("llvm.sqrt.f32", self.F32, a)

    def rsqrt(self, a):
        return self._call("llvm.nvvm.rsqrt.approx.f", self.F32, a)


class NumpyOps:
    """The same operations on float32/int32 numpy arrays (fma: exact product in float64, one rounding to f32
    after a float64 sum; approx instructions: correctly rounded)."""

    F = np.float32
    I = np.int32

    def f(self, c):
        return np.float32(c)

    def int_(self, n):
        return np.int32(n)

    def fma(self, a, b, c):
        return (np.float64(a) * np.float64(b) + np.float64(c)).astype(self.F)

    def mul(self, a, b):
        return (np.asarray(a, self.F) * np.asarray(b, self.F)).astype(self.F)

    def add(self, a, b):
        return (np.asarray(a, self.F) + np.asarray(b, self.F)).astype(self.F)

    def sub(self, a, b):
        return (np.asarray(a, self.F) - np.asarray(b, self.F)).astype(self.F)

    def neg(self, a):
        return (-np.asarray(a, self.F)).astype(self.F)

    def rint(self, a):
        return np.rint(np.asarray(a, self.F)).astype(self.F)

    def minimum(self, a, b):
        return np.minimum(np.asarray(a, self.F), b).astype(self.F)

    def maximum(self, a, b):
        return np.maximum(np.asarray(a, self.F), b).astype(self.F)

    def to_int(self, a):
        a = np.nan_to_num(np.asarray(a, np.float64), nan=0.0)
        return np.clip(np.trunc(a), -2**31, 2**31 - 1).astype(self.I)

    def to_float(self, i):
        return np.asarray(i, self.I).astype(self.F)

    def bits(self, a):
        return np.asarray(a, self.F).view(self.I)

    def from_bits(self, i):
        return np.asarray(i, self.I).view(self.F)

    def i_and(self, i, n):
        return (np.asarray(i, self.I) & np.int32(n if n < 2**31 else n - 2**32)).astype(self.I)

    def i_or(self, i, n):
        return (np.asarray(i, self.I) | np.int32(n)).astype(self.I)

    def i_add(self, i, n):
        return (np.asarray(i, self.I) + np.asarray(n, self.I)).astype(self.I)

    def i_sub(self, i, n):
        return (np.asarray(i, self.I) - np.asarray(n, self.I)).astype(self.I)

    def i_shl(self, i, n):
        return (np.asarray(i, self.I) << n).astype(self.I)

    def i_ashr(self, i, n):
        return (np.asarray(i, self.I) >> n).astype(self.I)

    def i_eq(self, i, n):
        return np.asarray(i) == n

    def i_lt(self, i, n):
        return np.asarray(i) < n

    def lt(self, a, b):
        return np.asarray(a, self.F) < b

    def eq(self, a, b):
        return np.asarray(a, self.F) == b

    def isnan(self, a):
        return np.isnan(a)

    def select(self, c, a, b):
        return np.where(c, a, b).astype(np.result_type(a, b))

    def ex2(self, a):
        with np.errstate(over="ignore"):
            return np.exp2(np.asarray(a, np.float64)).astype(self.F)

    def sqrt(self, a):
        return np.sqrt(np.asarray(a, self.F))

    def rsqrt(self, a):
        return (1.0 / np.sqrt(np.asarray(a, np.float64))).astype(self.F)
