"""arith: constants, scalar arithmetic, comparisons, selects and casts."""
from __future__ import annotations

from math import gcd

import numpy as np

from ..types import F32, I1, I32
from . import (
    INT_TYPES, NUM_TYPES, OpDef, const_int, convert, describe_threads, numpy_dtype, register, round_to,
    value_problem,
)


@register
class Const(OpDef):
    name = "arith.const"
    summary = "a constant scalar"
    required_attrs = ("value",)
    num_operands = 0
    num_results = 1

    def verify(self, op, v):
        t = op.results[0].type
        v.scalar(op, t, "result")
        value = v.attr(op, "value", (int, float, bool))
        if value is not None and isinstance(t, type(I32)):
            problem = value_problem(value, t)
            if problem:
                v.error(op, problem)

    def interpret(self, op, ix):
        t = op.results[0].type
        value = op.attrs["value"]
        ix.set(op.results[0], np.full(ix.nthreads, convert(np.array(value), F32 if isinstance(value, float) else I32
                                                                 if not isinstance(value, bool) else I1, t)))

    def lower(self, op, lx):
        t = op.results[0].type
        value = op.attrs["value"]
        multiple = int(value) if t.is_int and isinstance(value, int) and not isinstance(value, bool) else 1
        lx.set(op.results[0], lx.const(t, value), multiple=multiple)


class _Binary(OpDef):
    fn = None
    int_only = False
    shown = ""  # how the integer operands read in a run-time error ("{a} / {b}"); set where operand_problem is
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        a, b = op.operands
        t = op.results[0].type
        allowed = INT_TYPES + (I1,) if self.int_only else NUM_TYPES
        if a.type not in allowed:
            v.error(op, f"operand type {a.type} is not one of {', '.join(map(str, allowed))}")
        v.same_type(op, [a.type, b.type, t], "operands and result")
        c = const_int(b)
        if c is not None and t in INT_TYPES + (I1,):
            # a constant divisor or shift amount that is wrong for every dividend
            problem = self.operand_problem(np.zeros(1, np.int64), np.full(1, c, np.int64), t)
            if problem is not None:
                v.error(op, f"{problem[0]}: %{b.name} is the constant {c}")

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    @staticmethod
    def operand_problem(a, b, t):
        """(message, mask) for the integer operands (int64 arrays over the active threads) on which the op is
        undefined — its LLVM instruction is undefined behaviour or poison there, so the GPU's result would be
        arbitrary — or None when it is defined for all."""
        return None

    def interpret(self, op, ix):
        a, b = (ix.get(x) for x in op.operands)
        t = op.results[0].type
        if not t.is_float and self.shown:
            act = np.nonzero(ix.mask)[0]
            exact = object if t.name == "u64" else np.int64  # u64 values past 2^63 stay positive
            a64, b64 = (np.broadcast_to(np.asarray(x).astype(exact), (ix.nthreads,))[act] for x in (a, b))
            problem = self.operand_problem(a64, b64, t)
            if problem is not None:
                message, bad = problem
                k = int(np.argmax(bad))
                names = self.shown.format(a=f"%{op.operands[0].name}", b=f"%{op.operands[1].name}")
                values = self.shown.format(a=int(a64[k]), b=int(b64[k]))
                ix.fail(op, f"{message}: {names} is {values} in {describe_threads(act[bad])}")
        with np.errstate(all="ignore"):
            r = self.compute(a, b, t)
        ix.set(op.results[0], round_to(r, t) if t.is_float else r.astype(numpy_dtype(t)))

    def lower(self, op, lx):
        a, b = op.operands
        t = op.results[0].type
        kind = self.name.split(".")[1]
        r = lx.scalar_op(kind, [lx.get(a), lx.get(b)], t)
        # a known divisor of the result, from the operands' (proves vector alignment of gmem origins)
        ma, mb = lx.multiple(a), lx.multiple(b)
        multiple = 1
        if t.is_int:
            if kind in ("add", "sub", "min", "max"):
                multiple = gcd(ma, mb)
            elif kind == "mul":
                multiple = ma * mb
            elif kind == "shl" and const_int(b) is not None and 0 <= const_int(b) < t.bits:
                multiple = ma << const_int(b)
        lx.set(op.results[0], r, multiple=multiple)


def _binary(name, compute, int_only=False, shown="", operand_problem=None):
    members = {"name": name, "summary": f"elementwise {name.split('.')[1]} of two scalars", "int_only": int_only,
               "compute": staticmethod(compute), "shown": shown}
    if operand_problem is not None:
        members["operand_problem"] = staticmethod(operand_problem)
    cls = type(name.replace(".", "_").title(), (_Binary,), members)
    register(cls)
    return cls


def _signed_min(t) -> int:
    return -(1 << (t.bits - 1)) if t.kind == "int" else None


def division_problem(a, b, t):
    """Integer division and remainder: a zero divisor, or the one signed quotient that overflows (MIN / -1)."""
    if np.any(b == 0):
        return "division by zero", b == 0
    low = _signed_min(t)
    overflow = (a == low) & (b == -1) if low is not None else np.zeros(a.shape, bool)
    if np.any(overflow):
        return f"the quotient overflows {t}", overflow
    return None


def _shift_problem(a, b, t):
    """Shifts by a negative amount or by the width of the type or more (poison in LLVM)."""
    bad = (b < 0) | (b >= t.bits)
    if np.any(bad):
        return f"shift amount outside 0 … {t.bits - 1} for {t}", bad
    return None


def _int_div(a, b, t):
    if t.is_float:
        return a / b
    q = np.abs(a.astype(np.int64)) // np.maximum(np.abs(b.astype(np.int64)), 1)
    return np.where((a < 0) != (b < 0), -q, q)


def _int_rem(a, b, t):
    if t.is_float:
        return np.fmod(a, b)
    return a.astype(np.int64) - _int_div(a, b, t) * b.astype(np.int64)


_binary("arith.add", lambda a, b, t: a + b)
_binary("arith.sub", lambda a, b, t: a - b)
_binary("arith.mul", lambda a, b, t: a * b)
_binary("arith.div", _int_div, shown="{a} / {b}", operand_problem=division_problem)
_binary("arith.rem", _int_rem, shown="{a} % {b}", operand_problem=division_problem)
_binary("arith.min", lambda a, b, t: np.minimum(a, b))
_binary("arith.max", lambda a, b, t: np.maximum(a, b))
_binary("arith.and", lambda a, b, t: a & b, int_only=True)
_binary("arith.or", lambda a, b, t: a | b, int_only=True)
_binary("arith.xor", lambda a, b, t: a ^ b, int_only=True)
_binary("arith.shl", lambda a, b, t: a << b, int_only=True, shown="{a} << {b}", operand_problem=_shift_problem)
_binary("arith.shr", lambda a, b, t: a >> b, int_only=True, shown="{a} >> {b}", operand_problem=_shift_problem)


@register
class CDiv(_Binary):
    name = "arith.cdiv"
    summary = "ceiling division of integers"
    int_only = True

    shown = "cdiv({a}, {b})"

    def verify(self, op, v):
        super().verify(op, v)
        if op.operands and op.operands[0].type == I1:
            v.error(op, "cdiv of predicates")

    @staticmethod
    def operand_problem(a, b, t):
        """⌈a/b⌉ is defined for a >= 0 and b > 0 (spec §4.1), where a + b - 1 fits the type (the lowering's
        (a + b - 1) / b)."""
        if np.any(b <= 0):
            return "⌈a/b⌉ needs a divisor > 0", b <= 0
        if np.any(a < 0):
            return "⌈a/b⌉ needs a dividend >= 0", a < 0
        top = (1 << (t.bits - 1)) - 1 if t.kind == "int" else (1 << t.bits) - 1
        overflow = (a.astype(object) + b.astype(object) - 1 > top).astype(bool)
        if np.any(overflow):
            return f"a + b - 1 overflows {t}", overflow
        return None

    @staticmethod
    def compute(a, b, t):
        return -((-a.astype(np.int64)) // b.astype(np.int64))


@register
class Cmp(OpDef):
    name = "arith.cmp"
    summary = "compare two scalars"
    required_attrs = ("pred",)
    PREDICATES = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                  "gt": np.greater, "ge": np.greater_equal}
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        a, b = op.operands
        t = op.results[0].type
        v.same_type(op, [a.type, b.type], "operands")
        v.scalar(op, a.type, "operand")
        if t != I1:
            v.error(op, f"result type must be i1, not {t}")
        v.word(op, "pred", tuple(self.PREDICATES))

    def result_types(self, operand_types, attrs):
        return [I1]

    def interpret(self, op, ix):
        a, b = (ix.get(x) for x in op.operands)
        ix.set(op.results[0], self.PREDICATES[str(op.attrs["pred"])](a, b))

    SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

    def lower(self, op, lx):
        a, b = op.operands
        lx.set(op.results[0], compare(lx, str(op.attrs["pred"]), lx.get(a), lx.get(b), a.type))


def compare(lx, pred: str, x, y, t):
    """The i1 ``x pred y`` of two LLVM values of scalar type ``t`` (arith.cmp's meaning; frag.cmp per value): floats
    ordered except ``ne`` (NaN != anything, as numpy), signed or unsigned integers by the type; fp8 compared as f32.
    ``compare(lx, "lt", a, b, I32)`` → ``icmp slt`` (PTX ``setp.lt.s32``). Post: an LLVM i1."""
    symbol = Cmp.SYMBOLS[pred]
    if t.is_float and t.bits == 8:  # fp8 is a storage type in LLVM (i8): compare as f32, exactly
        x, y = (lx.convert(value, t, F32) for value in (x, y))
    if t.is_float:
        return lx.b.fcmp_unordered(symbol, x, y) if symbol == "!=" else lx.b.fcmp_ordered(symbol, x, y)
    if t.kind == "int":
        return lx.b.icmp_signed(symbol, x, y)
    return lx.b.icmp_unsigned(symbol, x, y)


@register
class Select(OpDef):
    name = "arith.select"
    summary = "choose between two scalars by a predicate"
    num_operands = 3
    num_results = 1

    def verify(self, op, v):
        p, a, b = op.operands
        t = op.results[0].type
        if p.type != I1:
            v.error(op, f"the condition must be i1, not {p.type}")
        v.same_type(op, [a.type, b.type, t], "choices and result")

    def result_types(self, operand_types, attrs):
        return [operand_types[1]]

    def interpret(self, op, ix):
        p, a, b = (ix.get(x) for x in op.operands)
        ix.set(op.results[0], np.where(p, a, b))

    def lower(self, op, lx):
        p, a, b = op.operands
        lx.set(op.results[0], lx.b.select(lx.get(p), lx.get(a), lx.get(b)), multiple=gcd(lx.multiple(a), lx.multiple(b)))


@register
class Cast(OpDef):
    name = "arith.cast"
    summary = "convert a scalar to another scalar type"
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (a,) = op.operands
        t = op.results[0].type
        v.scalar(op, a.type, "operand")
        v.scalar(op, t, "result")

    def interpret(self, op, ix):
        a = op.operands[0]
        ix.set(op.results[0], convert(ix.get(a), a.type, op.results[0].type))

    def lower(self, op, lx):
        a = op.operands[0]
        t = op.results[0].type
        multiple = lx.multiple(a) if a.type.is_int and t.is_int and t.bits >= a.type.bits else 1
        lx.set(op.results[0], lx.convert(lx.get(a), a.type, t), multiple=multiple)
