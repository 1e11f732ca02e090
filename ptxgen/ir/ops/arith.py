"""arith: constants, scalar arithmetic, comparisons, selects and casts."""
from __future__ import annotations

from math import gcd

import numpy as np


from ..text import attribute_text
from ..types import F32, I1, I32
from . import (
    INT_TYPES, NUM_TYPES, OpDef, convert, numpy_dtype, register, round_to,
)


@register
class Const(OpDef):
    name = "arith.const"
    summary = "a constant scalar"
    required_attrs = ("value",)

    def verify(self, op, v):
        v.operands(op, 0)
        (t,) = v.results(op, 1)
        v.scalar(op, t, "result")
        value = v.attr(op, "value", (int, float, bool))
        if t.is_int and not isinstance(value, int):
            v.error(op, f"value {attribute_text(value)} is not an integer but the type is {t}")
        if t.is_int and isinstance(value, int) and not isinstance(value, bool):
            lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.kind == "int" else (0, (1 << t.bits) - 1)
            if not lo <= value <= hi:
                v.error(op, f"value {value} does not fit {t} ([{lo}, {hi}])")

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

    def verify(self, op, v):
        a, b = v.operands(op, 2)
        (t,) = v.results(op, 1)
        allowed = INT_TYPES + (I1,) if self.int_only else NUM_TYPES
        if a.type not in allowed:
            v.error(op, f"operand type {a.type} is not one of {', '.join(map(str, allowed))}")
        v.same_type(op, [a.type, b.type, t], "operands and result")

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def interpret(self, op, ix):
        a, b = (ix.get(x) for x in op.operands)
        t = op.results[0].type
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
            elif kind == "shl" and b.owner is not None and b.owner.name == "arith.const":
                multiple = ma << int(b.owner.attrs["value"])
        lx.set(op.results[0], r, multiple=multiple)


def _binary(name, compute, int_only=False):
    cls = type(name.replace(".", "_").title(), (_Binary,), {
        "name": name, "summary": f"elementwise {name.split('.')[1]} of two scalars", "int_only": int_only,
        "compute": staticmethod(compute)})
    register(cls)
    return cls


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
_binary("arith.div", _int_div)
_binary("arith.rem", _int_rem)
_binary("arith.min", lambda a, b, t: np.minimum(a, b))
_binary("arith.max", lambda a, b, t: np.maximum(a, b))
_binary("arith.and", lambda a, b, t: a & b, int_only=True)
_binary("arith.or", lambda a, b, t: a | b, int_only=True)
_binary("arith.xor", lambda a, b, t: a ^ b, int_only=True)
_binary("arith.shl", lambda a, b, t: a << b, int_only=True)
_binary("arith.shr", lambda a, b, t: a >> b, int_only=True)


@register
class CDiv(_Binary):
    name = "arith.cdiv"
    summary = "ceiling division of integers"
    int_only = True

    def verify(self, op, v):
        super().verify(op, v)
        if op.operands and op.operands[0].type == I1:
            v.error(op, "cdiv of predicates")

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

    def verify(self, op, v):
        a, b = v.operands(op, 2)
        (t,) = v.results(op, 1)
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
        pred = self.SYMBOLS[str(op.attrs["pred"])]
        x, y = lx.get(a), lx.get(b)
        if a.type.is_float:  # ordered, except ne (NaN != anything), as numpy
            r = lx.b.fcmp_unordered(pred, x, y) if pred == "!=" else lx.b.fcmp_ordered(pred, x, y)
        elif a.type.kind == "int":
            r = lx.b.icmp_signed(pred, x, y)
        else:
            r = lx.b.icmp_unsigned(pred, x, y)
        lx.set(op.results[0], r)


@register
class Select(OpDef):
    name = "arith.select"
    summary = "choose between two scalars by a predicate"

    def verify(self, op, v):
        p, a, b = v.operands(op, 3)
        (t,) = v.results(op, 1)
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

    def verify(self, op, v):
        (a,) = v.operands(op, 1)
        (t,) = v.results(op, 1)
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
