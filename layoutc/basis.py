"""Basis strides: CuTe's ScaledBasis ``E<i...>`` scaled by an integer, and the arithmetic tuples they add up to.

A layout whose strides are basis elements maps a coordinate to a *coordinate* instead of an index: the identity
layout ``(4,8):(1@0,1@1)`` sends ``(i,j)`` to ``i·E<0> + j·E<1> = (i,j)``. CuTe prints ``v·E<n0,n1,...>`` as
``v@...@n1@n0`` (the mode path read right to left): ``E<1>`` is ``1@1``, ``E<0,1>`` (mode 0, sub-mode 1) is ``1@1@0``.

Values are kept in the forms CuTe computes with: an int, a ScaledBasis, or an *arithmetic tuple* (a plain tuple of
such values that adds elementwise, shorter tuples padded with 0): ``1@0 + 3@1 = (1,3)``.
"""
from __future__ import annotations

from .errors import LayoutError, operand_text


class ScaledBasis:
    """``value·E<modes...>``: the arithmetic tuple with ``value`` at the (nested) position ``modes`` and 0 elsewhere.

    ``ScaledBasis(1, (1,))`` is ``E<1>``, printed ``1@1`` and equal to the arithmetic tuple ``(0,1)``;
    ``ScaledBasis(2, (0, 1))`` is ``2·E<0,1>``, printed ``2@1@0``, the tuple ``((0,2),)``.
    Post: multiplying by an int scales the value (``4 * E<1>`` → ``4@1``); equality needs the same modes and value
    (a basis never equals an int, as in CuTe).
    Pre: ``modes`` is a non-empty tuple of non-negative ints (``E<>`` is the integer itself: use ``basis``).
    """

    __slots__ = ("value", "modes")

    def __init__(self, value: int, modes: tuple):
        if type(value) is not int:
            raise LayoutError("ScaledBasis", (value, modes), f"the scale must be an int, got {value!r}")
        if type(modes) is not tuple or not modes or any(type(m) is not int or m < 0 for m in modes):
            raise LayoutError("ScaledBasis", (value, modes), "the modes must be a non-empty tuple of ints >= 0")
        self.value = value
        self.modes = modes

    def __mul__(self, k):
        if type(k) is int:
            return ScaledBasis(self.value * k, self.modes)
        return NotImplemented

    __rmul__ = __mul__

    def __neg__(self):
        return ScaledBasis(-self.value, self.modes)

    def __abs__(self):
        return ScaledBasis(abs(self.value), self.modes)

    def __eq__(self, other) -> bool:
        return type(other) is ScaledBasis and self.value == other.value and self.modes == other.modes

    def __hash__(self) -> int:
        return hash(("E", self.value, self.modes))

    def __str__(self) -> str:
        return str(self.value) + "".join(f"@{m}" for m in reversed(self.modes))

    def __repr__(self) -> str:
        return f"ScaledBasis({self.value}, {self.modes})"


def basis(*modes: int):
    """CuTe's ``E<modes...>``: ``basis(1)`` → ``1@1``, ``basis(0, 1)`` → ``1@1@0``, ``basis()`` → 1 (``E<>`` is 1).

    Post: ``as_arithmetic_tuple(basis(*m))`` has a 1 at position ``m`` and 0 before it.
    """
    return ScaledBasis(1, modes) if modes else 1


def is_basis(x) -> bool:
    """True for a ScaledBasis leaf: ``is_basis(basis(0))`` → True, ``is_basis(1)`` → False."""
    return type(x) is ScaledBasis


def has_basis(t) -> bool:
    """Whether an IntTuple of strides holds a basis element anywhere: ``has_basis((1, (2, basis(1))))`` → True."""
    if type(t) is tuple:
        return any(has_basis(e) for e in t)
    return type(t) is ScaledBasis


def make_basis_like(shape, _prefix: tuple = ()):
    """CuTe's ``make_basis_like``: the basis element of every leaf of ``shape``, its path in the tree.

    ``make_basis_like((4,8))`` → ``(1@0,1@1)``; ``make_basis_like(((2,3),4))`` → ``((1@0@0,1@1@0),1@1)``;
    ``make_basis_like(8)`` → 1 (an integral shape is its own coordinate).
    Post: congruent to ``shape``.
    """
    if type(shape) is tuple:
        return tuple(make_basis_like(s, _prefix + (i,)) for i, s in enumerate(shape))
    return basis(*_prefix)


def as_arithmetic_tuple(x):
    """A value as an int or an arithmetic tuple: ``as_arithmetic_tuple(3@1)`` → ``(0,3)``,
    ``as_arithmetic_tuple(2@1@0)`` → ``((0,2),)``; ints and tuples of ints are returned as they are, tuples holding
    bases are converted leaf by leaf. Post: no ScaledBasis is left."""
    if type(x) is ScaledBasis:
        result = x.value
        for m in reversed(x.modes):
            result = (0,) * m + (result,)
        return result
    if type(x) is tuple:
        return tuple(as_arithmetic_tuple(e) for e in x)
    return x


def arithmetic_sum(a, b):
    """CuTe's ``operator+`` on ints, bases and arithmetic tuples: ints add; tuples add elementwise, the shorter one
    padded with 0; a basis is its arithmetic tuple: ``arithmetic_sum(1@0, 3@1)`` → ``(1,3)``,
    ``arithmetic_sum((1,2), (0,0,5))`` → ``(1,2,5)``, ``arithmetic_sum(0, (1,2))`` → ``(1,2)``.

    Pre: an int added to a tuple is 0 (CuTe: "Arithmetic tuple op+ error!"; a coordinate has no integer offset).
    Post: commutative and associative; 0 is neutral.
    """
    if type(a) is int and type(b) is int:
        return a + b
    a = as_arithmetic_tuple(a)
    b = as_arithmetic_tuple(b)
    if type(a) is int and type(b) is int:
        return a + b
    if type(a) is int or type(b) is int:
        number, coordinate = (a, b) if type(a) is int else (b, a)
        if number != 0:
            raise LayoutError("arithmetic_sum", (a, b), f"Arithmetic tuple op+ error!: the integer {number} cannot be "
                              f"added to the coordinate {operand_text(coordinate)} (only 0 can)")
        return coordinate
    n = max(len(a), len(b))
    a = a + (0,) * (n - len(a))
    b = b + (0,) * (n - len(b))
    return tuple(arithmetic_sum(x, y) for x, y in zip(a, b))
