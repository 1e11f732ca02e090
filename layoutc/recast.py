"""upcast, downcast and recast_layout: reinterpreting a layout of elements as one of wider or narrower elements."""
from __future__ import annotations

from fractions import Fraction
from math import gcd

from .errors import LayoutError
from .memo import pure
from .int_tuple import ceil_div, is_tuple, leaves, signum
from .layout import Layout, coalesce, require_integer_strides, size
from .algebra import right_inverse
from .tiling import logical_divide
from .swizzle import ComposedLayout, Swizzle


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _upcast_swizzle(sw: Swizzle, n: int) -> Swizzle:
    if not _is_power_of_two(n):
        raise LayoutError("upcast", (sw, n), f"N must be a power of two, got {n}")
    m = sw.base - (n.bit_length() - 1)
    if m >= 0:
        return Swizzle(sw.bits, m, sw.shift)
    return Swizzle(max(sw.bits + m, 0), 0, sw.shift)


def _downcast_swizzle(sw: Swizzle, n: int) -> Swizzle:
    if not _is_power_of_two(n):
        raise LayoutError("downcast", (sw, n), f"N must be a power of two, got {n}")
    return Swizzle(sw.bits, sw.base + (n.bit_length() - 1), sw.shift)


@pure
def upcast(layout, n: int):
    """Group ``n`` elements into one: ``upcast((4,8):(1,4), 2)`` → ``(2,8):(1,2)``; ``upcast((6):(1), 4)`` → ``(2):(1)``.

    Per leaf (s,d): d == 0 stays; else ``s' = ceil(s / ceil(n/|d|))``, ``d' = sign(d)·ceil(|d|/n)``.
    Pre: each nonzero stride divides or is divided by n ("Divisibility condition"); n > 0.
    Swizzles drop log2(n) base bits; a ComposedLayout transforms every part (its offset must divide by n).
    """
    if not isinstance(n, int) or n <= 0:
        raise LayoutError("upcast", (layout, n), f"N must be a positive int, got {n!r}")
    if isinstance(layout, Swizzle):
        return _upcast_swizzle(layout, n)
    if isinstance(layout, ComposedLayout):
        if layout.offset % n != 0:
            raise LayoutError("upcast", (layout, n),
                              f"Static safe_div requires t % u == 0: offset {layout.offset} is not a multiple of {n}")
        outer = upcast(layout.outer, n)
        return ComposedLayout(outer, layout.offset // n, upcast(layout.inner, n))
    require_integer_strides("upcast", layout, (layout, n))
    for d in leaves(layout.stride):
        if d != 0 and not (d % n == 0 or n % abs(d) == 0):
            raise LayoutError("upcast", (layout, n),
                              f"Divisibility condition: stride {d} and {n} do not divide one another")

    def walk(s, d):
        if is_tuple(s):
            parts = [walk(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if d == 0:
            return s, 0
        return ceil_div(s, ceil_div(n, abs(d))), signum(d) * ceil_div(abs(d), n)

    s, d = walk(layout.shape, layout.stride)
    return Layout._make(s, d)


@pure
def downcast(layout, n: int):
    """Split each element into ``n``: ``downcast((4,8):(1,4), 2)`` → ``(8,8):(1,8)``.

    Per leaf: stride ±1 gives ``(s·n):d``, other strides ``s:(d·n)``.
    Pre: some stride is exactly +1 ("Downcast requires adjacent elements").
    """
    if not isinstance(n, int) or n <= 0:
        raise LayoutError("downcast", (layout, n), f"N must be a positive int, got {n!r}")
    if isinstance(layout, Swizzle):
        return _downcast_swizzle(layout, n)
    if isinstance(layout, ComposedLayout):
        return ComposedLayout(downcast(layout.outer, n), layout.offset * n, downcast(layout.inner, n))
    require_integer_strides("downcast", layout, (layout, n))
    if 1 not in leaves(layout.stride):
        raise LayoutError("downcast", (layout, n), "Downcast requires adjacent elements: no stride is +1")

    def walk(s, d):
        if is_tuple(s):
            parts = [walk(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if d in (1, -1):
            return s * n, d
        return s, d * n

    s, d = walk(layout.shape, layout.stride)
    return Layout._make(s, d)


@pure
def recast_layout(layout, old_bits: int, new_bits: int):
    """Re-express a layout of ``old_bits``-wide elements in ``new_bits``-wide ones:
    ``recast_layout((4,8):(1,4), 16, 32)`` → ``(2,8):(1,2)``; 48→32 bits: ``(6,4):(1,6)`` → ``(9,4):(1,9)``.
    Post: ``new/old`` reduced to num/den gives ``downcast(upcast(L, num), den)``.
    Pre: both bit widths are positive ints."""
    for bits in (old_bits, new_bits):
        if type(bits) is not int or bits <= 0:
            raise LayoutError("recast_layout", (layout, old_bits, new_bits),
                              f"element widths must be positive ints, got {bits!r}")
    ratio = Fraction(new_bits, old_bits)
    num, den = ratio.numerator, ratio.denominator
    if num == 1 and den == 1:
        return layout
    if num == 1:
        return downcast(layout, den)
    if den == 1:
        return upcast(layout, num)
    return downcast(upcast(layout, num), den)


@pure
def max_alignment(layout) -> int:
    """CuTe's max_alignment: how many consecutive elements L keeps together at aligned positions, computed as CuTe
    does: ``gcd(size<0>(P), stride<1>(P))`` for ``P = logical_divide(F, right_inverse(F))``, ``F = coalesce(L)``.
    ``max_alignment((4,8):(1,4))`` → 32, ``max_alignment((4,8):(1,8))`` → 4, ``max_alignment((8,4):(4,1))`` → 32,
    ``max_alignment(Sw<3,4,3>)`` → 16 (2^M), ``max_alignment(Sw<3,4,3> o 0 o (8,64):(64,1))`` → 16 (the gcd of the
    swizzle's, the offset's and the inner layout's); any other ComposedLayout → 1 (CuTe does not attempt it).

    Post: the result divides size(L) (or 2^M); ``upcast(L, result)`` satisfies upcast's divisibility condition.
    Pre: integer strides.
    """
    if isinstance(layout, Swizzle):
        return 1 << layout.base
    if isinstance(layout, ComposedLayout):
        if not isinstance(layout.outer, Swizzle):
            return 1
        return gcd(max_alignment(layout.outer), layout.offset, max_alignment(layout.inner))
    if not isinstance(layout, Layout):
        raise LayoutError("max_alignment", (layout,), "expected a Layout, a Swizzle or a ComposedLayout")
    require_integer_strides("max_alignment", layout)
    flat = coalesce(layout)
    permuted = logical_divide(flat, right_inverse(flat))
    return gcd(size(permuted[0]), *leaves(permuted[1].stride))
