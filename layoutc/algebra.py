"""Composition, complement, right/left inverse and max_common_* — CuTe's exact rules (static integers)."""
from __future__ import annotations

from .basis import has_basis
from .errors import LayoutError
from .memo import pure
from .int_tuple import ceil_div, cpp_mod, is_int, is_tuple, leaves, product, signum
from .layout import (
    Layout, _, _validate_shape, coalesce, coalesce_x, cosize, filter, make_layout, modes, require_integer_strides,
)
from .swizzle import ComposedLayout, Swizzle, composed, make_swizzle


# -- composition -----------------------------------------------------------------------------------------

def _compose_mode(lhs: Layout, rhs_shape, rhs_stride, operands):
    """CuTe's composition_impl for one (possibly nested) rhs mode against coalesce_x(lhs); returns (shape, stride)."""
    if is_tuple(rhs_shape):
        parts = [_compose_mode(lhs, s, d, operands) for s, d in zip(rhs_shape, rhs_stride)]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    if rhs_stride == 0:
        return rhs_shape, 0
    lhs_shape, lhs_stride = lhs.shape, lhs.stride
    if is_int(lhs_shape):
        return rhs_shape, rhs_stride * lhs_stride
    rest_shape, rest_stride = rhs_shape, rhs_stride
    out_shape, out_stride = [], []
    last = len(lhs_shape) - 1
    for i in range(last):
        c, e = lhs_shape[i], lhs_stride[i]
        if not (cpp_mod(rest_stride, c) == 0 or rest_stride < c):
            raise LayoutError("composition", operands,
                              f"Stride Divisibility Condition: stride {rest_stride} reaching lhs mode {c}:{e} "
                              f"neither is a multiple of {c} nor smaller than it")
        next_shape = ceil_div(c, abs(rest_stride))
        next_stride = ceil_div(abs(rest_stride), c) * signum(rest_stride)
        if next_shape == 1 or rest_shape == 1:
            rest_stride = next_stride
            continue
        m = min(next_shape, rest_shape)
        if rest_shape % m != 0:
            raise LayoutError("composition", operands,
                              f"Shape Divisibility Condition: remaining shape {rest_shape} is not a multiple of "
                              f"{m}, the part of lhs mode {c}:{e} it covers")
        out_shape.append(m)
        out_stride.append(rest_stride * e)
        rest_shape //= m
        rest_stride = next_stride
    tail = rest_stride * lhs_stride[last]
    if not out_shape:
        return rest_shape, tail
    if rest_shape == 1:
        if len(out_shape) == 1:
            return out_shape[0], out_stride[0]
        return tuple(out_shape), tuple(out_stride)
    return tuple(out_shape) + (rest_shape,), tuple(out_stride) + (tail,)


def _compose_layout(lhs: Layout, rhs: Layout) -> Layout:
    s, d = _compose_mode(coalesce_x(lhs), rhs.shape, rhs.stride, (lhs, rhs))
    return Layout._make(s, d)


def _compose_tiler(lhs: Layout, tiler) -> Layout:
    if tiler is _:
        return lhs
    if isinstance(tiler, Layout):
        return _compose_layout(lhs, tiler)
    if is_int(tiler):
        if tiler <= 0:
            raise LayoutError("composition", (lhs, tiler), f"tiler size {tiler} is not positive")
        return _compose_layout(lhs, Layout._make(tiler, 1))
    if is_tuple(tiler):
        ms = modes(lhs)
        if len(tiler) == 0:
            raise LayoutError("composition", (lhs, tiler), "empty tiler")
        if len(tiler) > len(ms):
            raise LayoutError("composition", (lhs, tiler),
                              f"tiler rank {len(tiler)} exceeds layout rank {len(ms)}")
        return make_layout(*[_compose_tiler(m, t) for m, t in zip(ms, tiler)])
    raise LayoutError("composition", (lhs, tiler), f"a tiler is a Layout, an int, _ or a tuple of those, not {tiler!r}")


@pure
def composition(lhs, rhs, *more):
    """Functional composition ``lhs ∘ rhs`` with CuTe's structure.

    - ``composition((6,2):(8,2), (4,3):(3,1))`` → ``((2,2),3):((24,2),8)``; ``composition(1:2, 2:64)`` → ``2:128``;
    - a tiler applies by mode and drops untouched modes: ``(12,(4,8)):(59,(13,1)) ∘ <3:4>`` → ``(3):(236)``;
    - ``composition(Swizzle, Layout)`` → ``Sw o 0 o L`` (the plain L for B = 0); ``composition(Sw, offset, L)`` is the
      3-part form (the plain L for B = 0 at offset 0); ``composition(L, Sw)`` → ``make_swizzle(L(Y), L(Z)) o 0 o L``
      (the plain L when that swizzle is the identity); a ComposedLayout composed with a tiler rewraps its composed
      inner layout, dropping an identity swizzle at offset 0.
    Post: ``(lhs∘rhs)(i) == lhs(rhs(i))`` for i < size(rhs) whenever rhs addresses lhs's modes exactly, and
    ``compatible(shape(rhs), shape(lhs∘rhs))`` for a Layout rhs.
    Pre: CuTe's stride and shape divisibility conditions (LayoutError names which one).
    """
    if more:
        if len(more) != 1:
            raise TypeError("composition(lhs, rhs) or composition(outer, offset, inner)")
        offset, inner = rhs, more[0]
        return composed(lhs, offset, inner)
    if isinstance(lhs, Swizzle):
        if isinstance(rhs, Swizzle):
            if lhs.shift != rhs.shift:
                raise LayoutError("composition", (lhs, rhs), "Can only merge swizzles of the same shift.")
            return make_swizzle(lhs.yyy_mask ^ rhs.yyy_mask, lhs.zzz_mask ^ rhs.zzz_mask)
        if isinstance(rhs, Layout):
            return composed(lhs, 0, rhs)
        if isinstance(rhs, ComposedLayout):
            raise LayoutError("composition", (lhs, rhs), "a Swizzle composed with a ComposedLayout is not supported")
        raise LayoutError("composition", (lhs, rhs), "a Swizzle composes with a Layout or a Swizzle")
    if isinstance(lhs, ComposedLayout):
        return lhs.with_inner(composition(lhs.inner, rhs))
    if not isinstance(lhs, Layout):
        raise LayoutError("composition", (lhs, rhs), f"lhs must be a Layout, Swizzle or ComposedLayout, not {lhs!r}")
    if isinstance(rhs, ComposedLayout):
        if rhs.offset != 0:
            raise LayoutError("composition", (lhs, rhs), f"Require offset == 0: the rhs offset is {rhs.offset}")
        return composition(composition(lhs, rhs.outer), rhs.inner)
    if isinstance(rhs, Layout) and has_basis(rhs.stride):
        # the lhs may map to coordinates (basis strides); the rhs must map to the lhs's indices
        raise LayoutError("composition", (lhs, rhs), "the rhs has basis strides: it must map to indices of the lhs "
                          "(only the lhs of a composition may map to coordinates)")
    if isinstance(rhs, Swizzle):
        # CuTe: composition(make_swizzle<L(Y), L(Z)>, L), so a swizzle whose bits L maps to 0 leaves L itself
        return composed(make_swizzle(lhs(rhs.yyy_mask), lhs(rhs.zzz_mask)), 0, lhs)
    return _compose_tiler(lhs, rhs)


# -- complement -----------------------------------------------------------------------------------------

@pure
def complement(layout, cotarget=None) -> Layout:
    """The layout of the offsets ``layout`` does not reach, up to ``cotarget`` (default: cosize of filter(L)).

    ``complement(4:2, 24)`` → ``(2,3):(1,8)``; ``complement((2,2):(1,6), 24)`` → ``(3,2):(2,12)``; a tuple cotarget
    folds: ``complement(3:1, (4,6))`` → ``12:3``.
    Post: for complementable L, ``make_layout(L, complement(L, T))`` is injective and its image covers [0, size(T))
    rounded up to a whole tile; ``complement`` and L meet only at 0.
    Pre: after sorting by stride each stride is at least the span of the smaller ones (else "Non-injective Layout
    detected in complement."), strides are not negative; the cotarget is a shape (positive int leaves) or a Layout,
    which stands for its shape (CuTe takes ``shape(cotarget)``).
    """
    if isinstance(layout, ComposedLayout):
        return complement(layout.inner, cotarget)
    if not isinstance(layout, Layout):
        raise LayoutError("complement", (layout,), "complement takes a Layout")
    require_integer_strides("complement", layout, (layout,) if cotarget is None else (layout, cotarget))
    if isinstance(cotarget, Layout):
        cotarget = cotarget.shape
    elif cotarget is not None:
        _validate_shape(cotarget, "complement", (layout, cotarget))
    flat_strides = leaves(layout.stride)
    if min(flat_strides) < 0:
        raise LayoutError("complement", (layout,) if cotarget is None else (layout, cotarget),
                          "negative strides have no complement")
    f = filter(layout)
    if cotarget is None:
        cotarget = cosize(f)
    operands = (layout, cotarget)
    if type(f.stride) is int and f.stride == 0:
        n = product(cotarget)
        return Layout._make(n, 1 if n != 1 else 0)
    shapes = leaves(f.shape)
    strides = leaves(f.stride)
    # CuTe picks the smallest remaining stride each time, the first one on ties: a stable ascending sort.
    order = sorted(range(len(strides)), key=strides.__getitem__)
    rs, rd = [], [1]
    for m in order:
        q = strides[m] // rd[-1]  # strides are non-negative here, so // is C++ division
        if q == 0:
            raise LayoutError("complement", operands,
                              f"Non-injective Layout detected in complement.: stride {strides[m]} is smaller than "
                              f"the span {rd[-1]} of the modes with smaller strides")
        rs.append(q)
        rd.append(strides[m] * shapes[m])
    new_stride = rd.pop()
    rest = product(ceil_div(cotarget, new_stride))
    rest_stride = new_stride if rest != 1 else 0
    return coalesce(Layout._make(tuple(rs) + (rest,), tuple(rd) + (rest_stride,)))


# -- inverses ---------------------------------------------------------------------------------------------

def _exchange_sort_order(keys: list) -> list:
    """CuTe's (unstable) exchange sort: for i < j swap when key_j < key_i. Keys [2,2,1] give [2,1,0]."""
    order = list(range(len(keys)))
    k = list(keys)
    n = len(k)
    for i in range(n):
        for j in range(i + 1, n):
            if k[j] < k[i]:
                k[i], k[j] = k[j], k[i]
                order[i], order[j] = order[j], order[i]
    return order


def _coalesced_lists(layout: Layout):
    c = coalesce(layout)
    shapes = leaves(c.shape)
    strides = leaves(c.stride)
    prefix = []
    p = 1
    for s in shapes:
        prefix.append(p)
        p *= s
    return shapes, strides, prefix


@pure
def right_inverse(layout):
    """R with ``L(R(i)) == i`` for i < size(R), R as large as possible: ``right_inverse((4,2):(2,1))`` → ``(2,4):(4,1)``.

    ``right_inverse(_)`` is ``_``. Swizzled layouts have no layout inverse here (LayoutError).
    """
    if layout is _:
        return _
    if isinstance(layout, ComposedLayout):
        raise LayoutError("right_inverse", (layout,), "the inverse of a ComposedLayout is not a layout; "
                          "invert its inner layout and compose with the outer function instead")
    require_integer_strides("right_inverse", layout)
    shapes, strides, prefix = _coalesced_lists(layout)
    out_s, out_d = [1], [0]
    current = 1
    for i in _exchange_sort_order(strides):
        if strides[i] == current:
            out_s.append(shapes[i])
            out_d.append(prefix[i])
            current = shapes[i] * strides[i]
    return coalesce(Layout._make(tuple(out_s), tuple(out_d)))


@pure
def left_inverse(layout):
    """Li with ``Li(L(i)) == i`` for injective L: ``left_inverse((2,3):(1,4))`` → ``(4,3):(1,2)``.

    Pre: "Left inverse divisibility condition" (each sorted stride divisible by the shape built so far); strides
    are not negative.
    """
    if layout is _:
        return _
    if isinstance(layout, ComposedLayout):
        raise LayoutError("left_inverse", (layout,), "the inverse of a ComposedLayout is not a layout; "
                          "invert its inner layout and compose with the outer function instead")
    require_integer_strides("left_inverse", layout)
    if any(d < 0 for d in leaves(layout.stride)):
        raise LayoutError("left_inverse", (layout,), "negative strides have no left inverse layout")
    shapes, strides, prefix = _coalesced_lists(layout)
    order = _exchange_sort_order(strides)
    out_s, out_d = [], [0]
    for i in order:
        if strides[i] == 0:
            continue
        z = 1
        for s in out_s:
            z *= s
        if strides[i] % z != 0:
            raise LayoutError("left_inverse", (layout,),
                              f"Left inverse divisibility condition: stride {strides[i]} is not a multiple of {z}")
        out_s.append(strides[i] // z)
        out_d.append(prefix[i])
    out_s.append(shapes[order[-1]])
    return coalesce(Layout._make(tuple(out_s), tuple(out_d)))


# -- max_common_* -----------------------------------------------------------------------------------------

def _swizzle_cap(a, b):
    sa = a.outer if isinstance(a, ComposedLayout) and isinstance(a.outer, Swizzle) else None
    sb = b.outer if isinstance(b, ComposedLayout) and isinstance(b.outer, Swizzle) else None
    if sa is not None and sb is not None:
        return None if sa == sb else min(1 << sa.base, 1 << sb.base)
    if sa is not None:
        return 1 << sa.base
    if sb is not None:
        return 1 << sb.base
    return None


def _inner(x):
    return x.inner if isinstance(x, ComposedLayout) else x


@pure
def max_common_vector(a, b) -> int:
    """Number of leading elements both layouts keep contiguous: ``max_common_vector((4,8):(1,8), (4,8):(1,4))`` → 4.

    With a swizzled side the result is capped at 2^M (no cap when both share the same swizzle).
    Post: ``a(i) - a(0) == b(i) - b(0) == i`` for i < result, on the inner layouts.
    """
    require_integer_strides("max_common_vector", _inner(a), (a, b))
    require_integer_strides("max_common_vector", _inner(b), (a, b))
    c = coalesce(composition(_inner(a), right_inverse(_inner(b))))
    first = modes(c)[0]
    result = first.shape if first.stride == 1 and is_int(first.shape) else 1
    cap = _swizzle_cap(a, b)
    return result if cap is None else min(result, cap)


@pure
def max_common_layout(a, b) -> Layout:
    """The layout of b's indices where a and b agree contiguously: ``max_common_layout((8,4):(4,1), (8,4):(4,1))`` →
    ``(4,8):(8,1)``; none → ``1:0``. Post: composing a and b with it gives the same contiguous run."""
    require_integer_strides("max_common_layout", _inner(a), (a, b))
    require_integer_strides("max_common_layout", _inner(b), (a, b))
    ai, bi = _inner(a), _inner(b)
    inv_b = right_inverse(bi)
    c = coalesce(composition(ai, inv_b))
    first = modes(c)[0]
    if first.stride == 1 and is_int(first.shape):
        result = composition(inv_b, first)
        cap = _swizzle_cap(a, b)
        if cap is not None and product(result.shape) > cap:
            result = composition(inv_b, Layout._make(min(first.shape, cap), 1))
        return result
    return Layout._make(1, 0)
