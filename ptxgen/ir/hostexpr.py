"""Host expressions of kernel launch attributes, and the attribute value classes of the text form.

A kernel's ``grid`` is computed on the host from its integer parameters and tensor extents:
``grid = (cdiv(%n, 1024), dim(%x, 0), 1)``. A host expression is a tree of

- ``Const(7)`` — an integer (text ``7``),
- ``ParamRef("n")`` — an integer kernel parameter (text ``%n``),
- ``Dim("x", 0)`` — the runtime extent of mode 0 of tensor parameter ``x`` (text ``dim(%x, 0)``),
- ``CDiv(a, b)`` — ⌈a/b⌉ (text ``cdiv(a, b)``), ``Min(a, b)`` (text ``min(a, b)``), ``Mul(a, b)`` (text ``a * b``), ``Add(a, b)`` (text ``a + b``).

``evaluate(env)`` computes the value from ``env``, a mapping from parameter names to ints (for ``%n``) or to
array-likes with ``.shape`` (for ``dim``); a division by zero or a mode the array does not have raises
``HostExprError`` naming the sub-expression (the launch attribute's user wraps it with the attribute's name). ``str(e)`` is the text form, with the parentheses the usual precedence
(``*`` binds tighter than ``+``, both left-associative) needs, so that parsing it gives ``e`` back.

Attribute value classes (see ``ptxgen.ir.text``): ``Word("lt")`` is a bare word (text ``lt``, distinct from the
string ``"lt"``); ``TupleAttr((1, 2))`` is a parenthesised tuple attribute (text ``(1, 2)``, distinct from the
CuTe int tuple ``[(1,2)]``, which is a plain Python tuple).
"""
from __future__ import annotations

from dataclasses import dataclass


class HostExprError(ValueError):
    """A host expression cannot be evaluated for the given arguments: ``cdiv(%n, %m) divides by %m = 0``."""


def _text(x) -> str:
    """An operand in the text form's notation (``true``, ``256.0``), also for values a builder user put where an
    integer belongs, so that errors about them show what the user wrote."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, float)):
        return repr(x)
    return str(x)


class HostExpr:
    """Base of the host expression classes; each defines ``evaluate(env) -> int`` and ``__str__``."""

    __slots__ = ()

    def params(self) -> frozenset:
        """The names of the kernel parameters the expression reads (``%n`` and ``dim(%x, ...)``)."""
        return frozenset()


def _wrap(e: HostExpr, parent_prec: int, right: bool) -> str:
    """``e``'s text as an operand of an operator of precedence ``parent_prec`` (+: 1, *: 2); the right operand of a
    left-associative operator needs parentheses at equal precedence too."""
    prec = _PREC.get(type(e), 3)
    text = str(e)
    if prec < parent_prec or (right and prec == parent_prec):
        return f"({text})"
    return text


@dataclass(frozen=True)
class Const(HostExpr):
    """An integer constant: ``Const(256)`` prints ``256``."""

    value: int

    def evaluate(self, env) -> int:
        return int(self.value)

    def __str__(self) -> str:
        return _text(self.value)


@dataclass(frozen=True)
class ParamRef(HostExpr):
    """An integer kernel parameter: ``ParamRef("n")`` prints ``%n`` and evaluates to ``int(env["n"])``."""

    name: str

    def evaluate(self, env) -> int:
        if self.name not in env:
            raise HostExprError(f"%{self.name} has no value")
        return int(env[self.name])

    def params(self) -> frozenset:
        return frozenset((self.name,))

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class Dim(HostExpr):
    """The runtime extent of mode ``mode`` of tensor parameter ``param``: ``Dim("x", 0)`` prints ``dim(%x, 0)`` and
    evaluates to ``env["x"].shape[0]``."""

    param: str
    mode: int

    def evaluate(self, env) -> int:
        shape = getattr(env.get(self.param), "shape", None)
        if shape is None or not 0 <= self.mode < len(shape):
            raise HostExprError(f"{self}: the argument for %{self.param} has no mode {_text(self.mode)} "
                                f"(shape {tuple(shape) if shape is not None else 'none'})")
        return int(shape[self.mode])

    def params(self) -> frozenset:
        return frozenset((self.param,))

    def __str__(self) -> str:
        return f"dim(%{self.param}, {_text(self.mode)})"


@dataclass(frozen=True)
class CDiv(HostExpr):
    """⌈a/b⌉: ``CDiv(ParamRef("n"), Const(256))`` prints ``cdiv(%n, 256)``. ``evaluate`` raises HostExprError
    when b evaluates to 0."""

    a: HostExpr
    b: HostExpr

    def evaluate(self, env) -> int:
        a, b = self.a.evaluate(env), self.b.evaluate(env)
        if b == 0:
            shown = "" if isinstance(self.b, Const) else " = 0"
            raise HostExprError(f"{self} divides by {self.b}{shown}")
        return -(-a // b)

    def params(self) -> frozenset:
        return self.a.params() | self.b.params()

    def __str__(self) -> str:
        return f"cdiv({self.a}, {self.b})"


@dataclass(frozen=True)
class Mul(HostExpr):
    """a · b: prints ``a * b``."""

    a: HostExpr
    b: HostExpr

    def evaluate(self, env) -> int:
        return self.a.evaluate(env) * self.b.evaluate(env)

    def params(self) -> frozenset:
        return self.a.params() | self.b.params()

    def __str__(self) -> str:
        return f"{_wrap(self.a, 2, False)} * {_wrap(self.b, 2, True)}"


@dataclass(frozen=True)
class Add(HostExpr):
    """a + b: prints ``a + b``."""

    a: HostExpr
    b: HostExpr

    def evaluate(self, env) -> int:
        return self.a.evaluate(env) + self.b.evaluate(env)

    def params(self) -> frozenset:
        return self.a.params() | self.b.params()

    def __str__(self) -> str:
        return f"{_wrap(self.a, 1, False)} + {_wrap(self.b, 1, True)}"


@dataclass(frozen=True)
class Min(HostExpr):
    """min(a, b): prints ``min(a, b)`` (a persistent kernel's grid: ``min(tiles, %sms)``)."""

    a: HostExpr
    b: HostExpr

    def evaluate(self, env) -> int:
        return min(self.a.evaluate(env), self.b.evaluate(env))

    def params(self) -> frozenset:
        return self.a.params() | self.b.params()

    def __str__(self) -> str:
        return f"min({self.a}, {self.b})"


_PREC = {Add: 1, Mul: 2}

HOST_EXPRS = (Const, ParamRef, Dim, CDiv, Min, Mul, Add)


@dataclass(frozen=True)
class Word:
    """A bare-word attribute value: ``{pred = lt}`` holds ``Word("lt")``; ``str(Word("lt")) == "lt"``.

    Pre (printing): ``name`` is an identifier (letters, digits, ``_``; not starting with a digit) other than the
    reserved ``true``, ``false``, ``inf`` and ``nan``."""

    name: str

    def __str__(self) -> str:
        return self.name


class TupleAttr(tuple):
    """A parenthesised tuple attribute ``(a, b, ...)``. A tuple subclass, so it iterates and indexes like one; it
    is kept apart from CuTe int tuples (plain tuples, written ``[(a,b)]``) so that the two print differently."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"TupleAttr({tuple.__repr__(self)})"
