"""The Layout type (shape:stride), its construction and mode manipulation, coalesce and filter.

A Layout maps coordinates to indices: ``L(c) = inner_product(c, stride)`` for a natural coordinate ``c`` of ``shape``.
Integral layouts (``8:1``) have int shape and stride; tuple layouts (``(8):(1)``, ``(4,2):(1,4)``) are distinct.
"""
from __future__ import annotations

from .basis import ScaledBasis, arithmetic_sum, as_arithmetic_tuple, has_basis, make_basis_like
from .errors import LayoutError, operand_text
from .memo import pure
from .int_tuple import (
    MAX_DEPTH, IntTuple, compact_col_major, compact_row_major, congruent, crd2idx, depth as tuple_depth, filter_zeros,
    flatten as flatten_tuple, is_int, is_tuple, leaves, product, product_like, rank as tuple_rank, replace_leaves,
)


class Underscore:
    """CuTe's ``_``: keep this mode (in slices) or leave it untouched (in tilers). Printed ``_``."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "_"

    def __reduce__(self):
        return (Underscore, ())


_ = Underscore()


class _Order:
    """A named stride order for ``make_layout``: LayoutLeft (column-major) or LayoutRight (row-major)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


LayoutLeft = _Order("LayoutLeft")
LayoutRight = _Order("LayoutRight")


def _validate_shape(shape, op, operands) -> None:
    """Positive int leaves, no empty tuple, nesting at most MAX_DEPTH (checked without recursion, so a too-deep shape is
    reported and never overflows the stack)."""
    if is_int(shape):
        if shape <= 0:
            raise LayoutError(op, operands, f"shape {shape} is not positive: every shape leaf must be >= 1")
        return
    stack = [(shape, 1)]
    while stack:
        node, level = stack.pop()
        if not is_tuple(node):
            raise LayoutError(op, operands, f"shape {operand_text(node)} is neither an int nor a tuple of ints")
        if len(node) == 0:
            raise LayoutError(op, operands, "empty tuple in shape: CuTe has no empty layouts")
        if level > MAX_DEPTH:
            raise LayoutError(op, operands, f"shape nested more than {MAX_DEPTH} levels deep: layoutc's nesting limit "
                              f"is {MAX_DEPTH}")
        for s in node:
            if is_int(s):
                if s <= 0:
                    raise LayoutError(op, operands, f"shape {s} is not positive: every shape leaf must be >= 1")
            else:
                stack.append((s, level + 1))


def _validate_stride(stride, op, operands) -> None:
    stack = [stride]
    while stack:
        node = stack.pop()
        if is_tuple(node):
            stack.extend(node)
        elif not (is_int(node) or type(node) is ScaledBasis):
            raise LayoutError(op, operands, f"stride {node!r} is neither an int, a basis stride like 1@0 nor a tuple "
                              "of those")


class Layout:
    """A CuTe layout ``shape:stride``.

    ``Layout((4,2),(1,4))`` prints ``(4,2):(1,4)``; ``Layout((4,2))`` is column-major ``(4,2):(1,4)``.
    ``L(5)`` → 5 (index of the 1-D coordinate 5), ``L(1,1)`` → 5, ``L(_,1)`` → ``4:1`` (a slice), ``L[1]`` → ``2:4``.
    Stride leaves may be CuTe's basis elements (``Layout((4,8), (basis(0), basis(1)))`` is ``(4,8):(1@0,1@1)``);
    such a layout maps coordinates to coordinates (arithmetic tuples).
    Post: shape has positive leaves and stride is congruent to it, else LayoutError.
    """

    __slots__ = ("shape", "stride", "_hash")

    def __init__(self, shape: IntTuple, stride: IntTuple | None = None):
        if type(shape) is int and type(stride) is int and shape > 0:
            self.shape, self.stride, self._hash = shape, stride, None
            return
        _validate_shape(shape, "Layout", (shape,) if stride is None else (shape, stride))
        if stride is None:
            stride = compact_col_major(shape)
        else:
            _validate_stride(stride, "Layout", (shape, stride))
            if not congruent(shape, stride):
                raise LayoutError("Layout", (shape, stride), "shape and stride are not congruent "
                                  "(they must have the same tuple tree)")
        self.shape = shape
        self.stride = stride
        self._hash = None

    @classmethod
    def _make(cls, shape: IntTuple, stride: IntTuple) -> "Layout":
        # Results of the algebra are correct by construction: skip validation on the hot path.
        obj = object.__new__(cls)
        obj.shape = shape
        obj.stride = stride
        obj._hash = None
        return obj

    def __reduce__(self):
        # shape and stride only: ``_hash`` is a per-process cache, and a layout that was valid when pickled needs no
        # re-validation (ptxgen's disk cache unpickles thousands of them per kernel)
        return (Layout._make, (self.shape, self.stride))

    # -- structure ---------------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        return type(other) is Layout and self.shape == other.shape and self.stride == other.stride

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.shape, self.stride))
        return self._hash

    def __str__(self) -> str:
        from .notation import to_str
        return to_str(self)

    def __repr__(self) -> str:
        return f"Layout({self.shape!r}, {self.stride!r})"

    def _repr_svg_(self) -> str:
        from .picture import layout_svg
        return layout_svg(self)

    def __len__(self) -> int:
        return tuple_rank(self.shape)

    def __iter__(self):
        raise TypeError("a Layout is not iterable; use modes(L) for its top-level modes")

    def __getitem__(self, index) -> "Layout":
        """Mode ``i`` (CuTe ``get<i>``); a tuple index walks down: ``L[1, 0]`` is ``get<1,0>(L)``."""
        if is_tuple(index):
            result = self
            for i in index:
                result = result[i]
            return result
        if not is_int(index):
            raise TypeError(f"Layout index must be an int or a tuple of ints, not {type(index).__name__}")
        if is_int(self.shape):
            if index != 0:
                raise LayoutError("get", (self, index), "Index out of range: an integral layout has only mode 0")
            return self
        if not 0 <= index < len(self.shape):
            raise LayoutError("get", (self, index), f"Index out of range: rank is {len(self.shape)}")
        return Layout._make(self.shape[index], self.stride[index])

    def __call__(self, *coord):
        """Index of a coordinate, or a slice when the coordinate contains ``_``; with basis strides a coordinate:
        ``(4,8):(1@0,1@1)`` at 13 → (1,3)."""
        if len(coord) == 1:
            coord = coord[0]
        elif len(coord) == 0:
            raise TypeError("a Layout is called with a coordinate")
        if has_underscore(coord):
            return slice_layout(coord, self)
        _validate_coordinate(coord, self)
        index = crd2idx(coord, self.shape, self.stride)
        # a basis-stride layout maps to a coordinate, given as an arithmetic tuple even when only one basis is hit
        return index if type(index) is int else as_arithmetic_tuple(index)

    # -- convenience properties --------------------------------------------------------------------
    @property
    def size(self) -> int:
        return product(self.shape)

    @property
    def cosize(self) -> int:
        return cosize(self)

    @property
    def rank(self) -> int:
        return tuple_rank(self.shape)

    @property
    def depth(self) -> int:
        return tuple_depth(self.shape)


def layout_values(layout, n: int | None = None) -> list:
    """``[L(0), L(1), ..., L(n-1)]`` for the 1-D coordinates of ``L`` (default ``n = size(L)``).

    Computed from the flat leaves (colexicographic, the last leaf takes the unbounded quotient, as CuTe's
    ``crd2idx``), independently of ``Layout.__call__``. A ComposedLayout is evaluated as
    ``outer(offset + inner(i))``.

    >>> layout_values(Layout((2, 3), (3, 1)))
    [0, 3, 1, 4, 2, 5]
    >>> layout_values(Layout((4, 2), (1, 10)), 10)  # past the end: the last mode keeps walking
    [0, 1, 2, 3, 10, 11, 12, 13, 20, 21]
    """
    from .swizzle import ComposedLayout   # swizzle builds on this module

    if isinstance(layout, ComposedLayout):
        inner = layout_values(layout.inner, n)
        outer, off = layout.outer, layout.offset
        if isinstance(outer, Layout):
            ov = layout_values(outer, max(off + v for v in inner) + 1) if inner else []
            return [ov[off + v] for v in inner]
        return [outer(off + v) for v in inner]
    shp = leaves(layout.shape)
    strd = leaves(layout.stride)
    size = product(layout.shape)
    if n is None:
        n = size
    vals = [0]
    prefix = 1
    for s, d in zip(shp[:-1], strd[:-1]):
        vals = [v + c * d for c in range(s) for v in vals]
        prefix *= s
    s_last, d_last = shp[-1], strd[-1]
    count = max(s_last, -(-n // prefix))
    vals = [v + c * d_last for c in range(count) for v in vals]
    return vals[:n]


def has_underscore(c) -> bool:
    """Whether the coordinate ``c`` holds CuTe's ``_`` anywhere (a slice, not a point): ``(1, (_, 2))`` → True,
    ``(1, 2)`` → False."""
    if c is _:
        return True
    return is_tuple(c) and any(has_underscore(e) for e in c)


def _validate_coordinate(coord, layout: Layout) -> None:
    def check(c, s):
        if is_tuple(c):
            if not is_tuple(s):
                raise LayoutError("crd2idx", (coord, layout), "Invalid parameters: a tuple coordinate for an integral mode")
            if len(c) != len(s):
                raise LayoutError("crd2idx", (coord, layout),
                                  f"Mismatched Ranks: coordinate {c} has rank {len(c)}, mode {s} has rank {len(s)}")
            for x, y in zip(c, s):
                check(x, y)
        elif not is_int(c):
            raise TypeError(f"coordinate leaves must be ints, got {c!r}")

    check(coord, layout.shape)


# -- free functions on layouts and IntTuples ---------------------------------------------------------

def _acts_on_inner(fn):
    """A mode function applied to ``outer o offset o inner`` acts on ``inner`` and keeps outer and offset (CuTe)."""
    def wrapper(layout, *args, **kwargs):
        if type(layout) is Layout:
            return fn(layout, *args, **kwargs)
        from .swizzle import ComposedLayout
        if isinstance(layout, ComposedLayout):
            result = fn(layout.inner, *args, **kwargs)
            if isinstance(result, list):
                return [layout.with_inner(r) for r in result]
            return layout.with_inner(result)
        raise LayoutError(fn.__name__, (layout,), f"expected a Layout or a ComposedLayout, got {type(layout).__name__}")

    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


def require_integer_strides(op: str, layout, operands=None) -> None:
    """Refuse a layout with basis strides (``(4,8):(1@0,1@1)``) in an operation CuTe defines for integer strides
    only (it orders, divides or inverts strides): ``right_inverse((4,8):(1@0,1@1))`` raises LayoutError
    ``right_inverse((4,8):(1@0,1@1)): defined for integer strides; (1@0,1@1) has basis strides``.
    Post: returns only when every stride leaf of a plain Layout is an int."""
    if type(layout) is Layout and has_basis(layout.stride):
        raise LayoutError(op, (layout,) if operands is None else operands,
                          f"defined for integer strides; {operand_text(layout.stride)} has basis strides (a layout of "
                          "coordinates, like make_identity_layout's)")


def _plain_only(op: str, layout) -> None:
    if type(layout) is not Layout:
        raise LayoutError(op, (layout,), "defined for plain layouts only: a ComposedLayout has no stride; "
                          "apply it to the inner layout")

def shape(x):
    """Shape of a layout (or the IntTuple itself): ``shape((4,2):(1,4))`` → (4,2)."""
    return x.shape if hasattr(x, "shape") else x


def stride(x: Layout):
    """Stride of a layout: ``stride((4,2):(1,4))`` → (1,4). Pre: a plain Layout."""
    _plain_only("stride", x)
    return x.stride


def size(x) -> int:
    """Number of coordinates: ``size((4,(2,3)):(1,(4,8)))`` → 24; works on IntTuples and composed layouts too."""
    return product(shape(x))


def rank(x) -> int:
    """Number of top-level modes: ``rank(8:1)`` → 1, ``rank((4,(2,3)):(1,(4,8)))`` → 2."""
    return tuple_rank(shape(x))


def depth(x) -> int:
    """Nesting depth: ``depth(8:1)`` → 0, ``depth((4,(2,3)):(1,(4,8)))`` → 2."""
    return tuple_depth(shape(x))


def cosize(layout) -> int:
    """One past the largest |index|: ``cosize((4,2):(1,0))`` → 4, ``cosize((4,2):(-1,4))`` → 8.

    Post: Σ (s-1)·|d| + 1 over leaves (absolute strides, as CuTe).
    """
    if isinstance(layout, Layout):
        if has_basis(layout.stride):
            return product(coshape(layout))
        return sum((s - 1) * abs(d) for s, d in zip(leaves(layout.shape), leaves(layout.stride))) + 1
    return layout.cosize


def coshape(layout):
    """CuTe's coshape, the shape of L's codomain: one past L's largest value per coordinate mode (absolute strides):
    ``coshape((4,2):(1,8))`` → 12, ``coshape((4,8):(1@0,1@1))`` → (4,8) (an identity layout's codomain is its
    shape), ``coshape((4,8):(8@1,1@0))`` → (8,25).

    Post: ``size(coshape(L)) == cosize(L)``; ``elem_less(L(c), coshape(L))`` for every coordinate c of a layout with
    non-negative strides. Pre: a plain Layout.
    """
    _plain_only("coshape", layout)
    top = 0
    for s, d in zip(leaves(layout.shape), leaves(layout.stride)):
        term = (s - 1) * abs(d)
        top = top + term if type(term) is int and type(top) is int else arithmetic_sum(top, term)
    return replace_leaves(as_arithmetic_tuple(top), lambda c: c + 1)


def make_identity_layout(shp) -> Layout:
    """CuTe's make_identity_layout: the layout sending each coordinate of ``shp`` to itself, with basis strides:
    ``make_identity_layout((4,8))`` → ``(4,8):(1@0,1@1)``, whose value at (2,5) is (2,5) (and at the index 13 is
    (1,3)); ``make_identity_layout(((2,3),4))`` → ``((2,3),4):((1@0@0,1@1@0),1@1)``.

    Post: ``L(c) == c`` for every natural coordinate c of ``shp`` (``L(i) == idx2crd(i, shp)`` for an index);
    ``coshape(L) == shp``. Composing it with a layout ``A`` into ``shp``'s indices gives each of ``A``'s coordinates
    as a coordinate of ``shp``: ``composition(make_identity_layout((M,N)), tv)(t, v)`` is (row, col) of (t, v).
    Pre: ``shp`` is a shape (positive int leaves).
    """
    _validate_shape(shp, "make_identity_layout", (shp,))
    return Layout._make(shp, make_basis_like(shp))


def make_layout(*args) -> Layout:
    """CuTe ``make_layout``.

    - ``make_layout((2,(3,1),5))`` → ``(2,(3,1),5):(1,(2,0),6)`` (LayoutLeft, shape-1 leaves get stride 0);
    - ``make_layout((2,4), LayoutRight)`` → ``(2,4):(4,1)``; ``make_layout((2,4),(1,8))`` → ``(2,4):(1,8)``;
    - ``make_layout(L0, L1, ...)`` concatenates layouts into modes; one layout is wrapped: ``make_layout(3:1)`` → ``(3):(1)``.
    """
    if args and type(args[0]) is Layout:
        for a in args:
            if type(a) is not Layout:
                break
        else:
            return Layout._make(tuple(a.shape for a in args), tuple(a.stride for a in args))
    if len(args) == 1:
        return Layout(args[0])
    if len(args) == 2:
        shp, order = args
        if order is LayoutLeft:
            _validate_shape(shp, "make_layout", (shp,))
            return Layout._make(shp, compact_col_major(shp))
        if order is LayoutRight:
            _validate_shape(shp, "make_layout", (shp,))
            return Layout._make(shp, compact_row_major(shp))
        return Layout(shp, order)
    raise TypeError("make_layout(shape[, stride | LayoutLeft | LayoutRight]) or make_layout(layout, layout, ...)")


@_acts_on_inner
def modes(layout: Layout) -> list:
    """Top-level modes as layouts: ``modes((4,2):(1,4))`` → [4:1, 2:4]; an integral layout is its own only mode."""
    if type(layout.shape) is tuple:
        return [Layout._make(s, d) for s, d in zip(layout.shape, layout.stride)]
    return [layout]


@_acts_on_inner
def flatten(layout: Layout) -> Layout:
    """Flatten shape and stride: ``flatten((4,(2,3)):(1,(4,8)))`` → ``(4,2,3):(1,4,8)``; integral stays integral."""
    return Layout._make(flatten_tuple(layout.shape), flatten_tuple(layout.stride))


@_acts_on_inner
def select(layout: Layout, *indices: int) -> Layout:
    """Modes at ``indices`` as a tuple layout: ``select((2,3,5,7):(1,2,6,30), 2)`` → ``(5):(6)``."""
    ms = modes(layout)
    for i in indices:
        if not 0 <= i < len(ms):
            raise LayoutError("select", (layout, i), f"Index out of range: rank is {len(ms)}")
    return make_layout(*[ms[i] for i in indices])


@_acts_on_inner
def take(layout: Layout, begin: int, end: int) -> Layout:
    """Modes [begin, end) as a tuple layout: ``take((2,3,5):(1,2,6), 1, 3)`` → ``(3,5):(2,6)``.

    Pre: 0 <= begin < end <= rank.
    """
    r = rank(layout)
    if not begin < end:
        raise LayoutError("take", (layout, begin, end), "take: empty range error (begin must be < end)")
    if not (0 <= begin and end <= r):
        raise LayoutError("take", (layout, begin, end), f"take: range out of bounds for rank {r}")
    return make_layout(*modes(layout)[begin:end])


@_acts_on_inner
def group(layout: Layout, begin: int, end: int) -> Layout:
    """Make modes [begin, end) one mode: ``group((2,3,5):(1,2,6), 0, 2)`` → ``((2,3),5):((1,2),6)``; an empty range
    groups nothing (CuTe's ``group<B,B>``): a tuple layout is unchanged, an integral one becomes its rank-1 tuple
    (``group(8:1, 1, 1)`` → ``(8):(1)``).

    Pre: ``0 <= begin <= end <= rank`` (CuTe: ``static_assert(B <= E)``).
    """
    ms = modes(layout)
    r = len(ms)
    if not (0 <= begin <= end <= r):
        raise LayoutError("group", (layout, begin, end), f"need 0 <= begin <= end <= rank {r} (CuTe: "
                          "static_assert(B <= E))")
    if begin == end:
        return make_layout(*ms)
    return make_layout(*ms[:begin], make_layout(*ms[begin:end]), *ms[end:])


@_acts_on_inner
def append(layout: Layout, mode: Layout | None = None, rank_to: int | None = None) -> Layout:
    """Append ``mode`` (default ``1:0``): ``append(4:1)`` → ``(4,1):(1,0)``.

    With ``rank_to=N`` (CuTe's ``append<N>``) pad with copies of ``mode`` up to rank N; a layout of rank N is
    returned unchanged, so an integral layout stays integral at N = 1. Pre: ``N >= rank`` (CuTe's
    ``static_assert(N > tuple_size<T>::value)`` refuses a smaller N).
    """
    mode = Layout._make(1, 0) if mode is None else mode
    if rank_to is None:
        return make_layout(*modes(layout), mode)
    r = rank(layout)
    if not is_int(rank_to) or rank_to < r:
        raise LayoutError("append", (layout, rank_to), f"append<N> needs N >= rank: N = {rank_to!r} but the rank is "
                          f"{r} (CuTe: static_assert(N > tuple_size<T>::value))")
    if rank_to == r:
        return layout
    return make_layout(*modes(layout), *([mode] * (rank_to - r)))


@_acts_on_inner
def prepend(layout: Layout, mode: Layout | None = None) -> Layout:
    """Prepend ``mode`` (default ``1:0``): ``prepend(4:1)`` → ``(1,4):(0,1)``."""
    mode = Layout._make(1, 0) if mode is None else mode
    return make_layout(mode, *modes(layout))


def zip_layouts(*layouts: Layout) -> Layout:
    """CuTe's zip on layouts (shape and stride transposed alike): ``zip_layouts((a0,a1), (b0,b1))`` →
    ``((a0,b0),(a1,b1))``. When the first layout is integral CuTe does not transpose: it wraps the whole tuple,
    so ``zip_layouts(4:1, (2):(4))`` → ``((4,(2))):((1,(4)))``.

    Pre: when the first layout is a tuple, every layout is a tuple of the same rank ("Mismatched Ranks"; CuTe does
    not compile an integral layout there, it has no ``tuple_size``).
    """
    for L in layouts:
        _plain_only("zip", L)
    first = layouts[0]
    if type(first.shape) is not tuple:
        return make_layout(make_layout(*layouts))
    r = len(first.shape)
    for L in layouts[1:]:
        if type(L.shape) is not tuple:
            raise LayoutError("zip", layouts, f"Mismatched Ranks: {L} is integral but the first layout is a rank-{r} "
                              "tuple")
        if len(L.shape) != r:
            raise LayoutError("zip", layouts, f"Mismatched Ranks: {L} has rank {len(L.shape)} but the first layout "
                              f"has rank {r}")
    return make_layout(*[make_layout(*[L[i] for L in layouts]) for i in range(r)])


# -- slicing -------------------------------------------------------------------------------------------

def slice_layout(coord, layout: Layout) -> Layout:
    """Keep the modes marked ``_``: ``(2,(3,4)):(1,(2,6))`` sliced by ``(_,(1,_))`` → ``(2,4):(1,6)``.

    Post: kept modes found in a nested coordinate are spliced flat into the parent (CuTe ``slice``); an int
    coordinate gives the empty result and is not allowed at the top (use ``L(c)``).
    """
    def lift(c, s, d):
        if c is _:
            return [(s, d)]
        if is_tuple(c):
            if not is_tuple(s):
                raise LayoutError("slice", (coord, layout), "Invalid parameters: a tuple coordinate for an integral mode")
            if len(c) != len(s):
                raise LayoutError("slice", (coord, layout), "Mismatched Ranks")
            out = []
            for ci, si, di in zip(c, s, d):
                out.extend(lift(ci, si, di))
            return out
        return []

    if type(layout) is not Layout:
        return layout(coord) if has_underscore(coord) else _plain_only("slice", layout)
    if coord is _:
        return layout
    if not is_tuple(coord):
        raise LayoutError("slice", (coord, layout), "a slice coordinate needs at least one _")
    kept = lift(coord, layout.shape, layout.stride)
    if not kept:
        raise LayoutError("slice", (coord, layout), "a slice coordinate needs at least one _ (CuTe's result would be "
                          "the empty layout, which layoutc does not have)")
    return Layout._make(tuple(s for s, _d in kept), tuple(d for _s, d in kept))


def slice_offset(coord, layout: Layout) -> int:
    """Index of the sliced coordinate's fixed part (``_`` read as 0): ``slice_offset((_,1), (4,2):(1,4))`` → 4; for
    basis strides a coordinate: ``slice_offset((_,3), (4,8):(1@0,1@1))`` → (0,3)."""
    _plain_only("slice_offset", layout)

    def zeroed(c):
        if c is _:
            return 0
        if is_tuple(c):
            return tuple(zeroed(e) for e in c)
        return c

    offset = crd2idx(zeroed(coord), layout.shape, layout.stride)
    return offset if type(offset) is int else as_arithmetic_tuple(offset)


def slice_and_offset(coord, layout):
    """CuTe's slice_and_offset: ``(L(coord) with _ kept, offset of the fixed part)``, what slicing a tensor does to
    its layout and its pointer: ``slice_and_offset((_,1), (4,2):(1,4))`` → ``(4:1, 4)``;
    ``slice_and_offset((_,3), (4,8):(1@0,1@1))`` → ``(4:1@0, (0,3))``. A ComposedLayout keeps the offset inside
    (added before its swizzle) and returns 0: ``slice_and_offset((_,3), Sw<3,4,3> o 0 o (8,64):(64,1))`` →
    ``(Sw<3,4,3> o 3 o (8):(64), 0)``.

    Post: ``L(c) == offset + sliced(c')`` (arithmetic sum for coordinates) for every c agreeing with ``coord`` on
    its fixed part, c' the ``_`` part of c. Pre: ``coord`` holds at least one ``_``.
    """
    if type(layout) is not Layout:
        return layout(coord), 0
    return slice_layout(coord, layout), slice_offset(coord, layout)


def domain_offset(coord, layout):
    """CuTe's domain_offset: the layout whose domain starts at ``coord``, as ``(layout, offset)``: a plain layout is
    kept and the offset is ``L(coord)``: ``domain_offset((1,1), (4,2):(1,4))`` → ``((4,2):(1,4), 5)``; a
    ComposedLayout takes the offset into itself (before its swizzle) and returns 0:
    ``domain_offset((0,1), Sw<3,4,3> o 0 o (8,64):(64,1))`` → ``(Sw<3,4,3> o 1 o (8,64):(64,1), 0)``.

    Post: ``offset + result(c) == L(coord + c)`` for a layout whose strides are its function's slopes (every
    plain layout, on coordinates whose sum stays in the shape). Pre: ``coord`` is a coordinate of L (no ``_``).
    """
    if has_underscore(coord):
        raise LayoutError("domain_offset", (coord, layout), "the coordinate has a _: domain_offset takes a point")
    if type(layout) is Layout:
        return layout, layout(coord)
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.with_inner(layout.inner, layout.offset + layout.inner(coord)), 0
    raise LayoutError("domain_offset", (coord, layout), "expected a Layout or a ComposedLayout")


def dice(coord, layout: Layout) -> Layout:
    """Keep the modes paired with ints (the dual of slice): ``dice((1,_), (4,2):(1,4))`` → ``(4):(1)``.

    An int coordinate keeps the whole layout, unchanged (CuTe: ``dice(1, L) == L``): ``dice(3, (4,2):(1,4))`` →
    ``(4,2):(1,4)``. Inside a tuple coordinate an int keeps its mode whole and kept modes are spliced flat.
    Pre: tuple ranks match ("Mismatched Ranks"); something is kept (CuTe would return an empty layout, which layoutc
    does not have).
    """
    _plain_only("dice", layout)
    if is_int(coord):
        return layout

    def lift(c, s, d):
        if c is _:
            return []
        if is_tuple(c):
            if not is_tuple(s) or len(c) != len(s):
                raise LayoutError("dice", (coord, layout), "Mismatched Ranks")
            out = []
            for ci, si, di in zip(c, s, d):
                out.extend(lift(ci, si, di))
            return out
        return [(s, d)]

    kept = lift(coord, layout.shape, layout.stride)
    if not kept:
        raise LayoutError("dice", (coord, layout), "the coordinate keeps no mode")
    return Layout._make(tuple(s for s, _d in kept), tuple(d for _s, d in kept))


# -- coalesce and filter -------------------------------------------------------------------------------

def _coalesce_flat(shapes: list, strides: list, keep_trailing_one: bool):
    """CuTe's backward merge over flat leaves; returns (shape, stride) as ints or flat tuples."""
    n = len(shapes)
    last_s, last_d = shapes[-1], strides[-1]
    if keep_trailing_one and last_s == 1:
        last_s = 2  # composition's coalesce_x: a trailing size-1 mode keeps its stride as if it went on
    ns = [last_s]
    nd = [last_d]
    for i in range(n - 2, -1, -1):
        s, d = shapes[i], strides[i]
        if s == 1:
            continue
        if len(ns) == 1 and ns[0] == 1:
            ns[0], nd[0] = s, d
        elif s * d == nd[0]:
            ns[0] *= s
            nd[0] = d
        else:
            ns.insert(0, s)
            nd.insert(0, d)
    if len(ns) == 1:
        if ns[0] == 1:
            return 1, 0
        return ns[0], nd[0]
    return tuple(ns), tuple(nd)


def _on_inner(op, layout, *args):
    """Apply ``op`` to a ComposedLayout's inner layout, keeping its outer function and offset."""
    from .swizzle import ComposedLayout
    if isinstance(layout, ComposedLayout):
        return layout.with_inner(op(layout.inner, *args))
    raise LayoutError(op.__name__, (layout,), f"expected a Layout or a ComposedLayout, got {type(layout).__name__}")


@pure
def coalesce(layout, profile=None):
    """Merge modes without changing the function on the domain.

    ``coalesce((2,(1,6)):(1,(6,2)))`` → ``12:1``; by mode with a tuple profile:
    ``coalesce((2,(1,6)):(1,(6,2)), (1,1))`` → ``(2,6):(1,2)``.
    Post: ``coalesce(L)(i) == L(i)`` for ``i < size(L)``; depth ≤ 1; integral when one mode survives;
    with a profile of rank r the result has rank(L) modes, modes past r copied verbatim.
    Pre: rank(profile) ≤ rank(L) at every level.
    """
    if type(layout) is not Layout:
        return _on_inner(coalesce, layout, profile)
    if profile is not None and is_tuple(profile):
        return _by_profile(coalesce, layout, profile)
    s, d = _coalesce_flat(leaves(layout.shape), leaves(layout.stride), keep_trailing_one=False)
    return Layout._make(s, d)


def _by_profile(op, layout: Layout, profile: tuple) -> Layout:
    """Apply ``op`` to each mode with its sub-profile; modes past the profile are kept verbatim (CuTe)."""
    ms = modes(layout)
    if len(profile) > len(ms):
        raise LayoutError(op.__name__, (layout, profile), f"profile rank {len(profile)} exceeds layout rank {len(ms)}")
    return make_layout(*[op(m, p) for m, p in zip(ms, profile)], *ms[len(profile):])


def coalesce_x(layout: Layout) -> Layout:
    """Composition's coalesce: like coalesce, but a trailing size-1 mode keeps its stride (``1:2`` → ``2:2``,
    ``(4,1):(1,4)`` → ``8:1``); never ``1:0``. Post: agrees with ``layout`` on its domain."""
    s, d = _coalesce_flat(leaves(layout.shape), leaves(layout.stride), keep_trailing_one=True)
    return Layout._make(s, d)


def filter_zeros_layout(layout: Layout) -> Layout:
    """Give stride-0 leaves shape 1: ``(2,3):(0,4)`` → ``(1,3):(0,4)``."""
    return Layout._make(filter_zeros(layout.stride, layout.shape), layout.stride)


@pure
def filter(layout, profile=None):
    """Remove stride-0 and size-1 modes, then coalesce: ``filter((2,1,3):(0,7,2))`` → ``3:2``; nothing left → ``1:0``.

    By mode with a tuple profile: ``filter((2,1,3):(0,7,2), (1,1,1))`` → ``(1,1,3):(0,0,2)``.
    Post: ``filter(L)`` is injective on its domain iff L is injective on its non-broadcast modes; its image is L's image.
    """
    if type(layout) is not Layout:
        return _on_inner(filter, layout, profile)
    if profile is not None and is_tuple(profile):
        return _by_profile(filter, layout, profile)
    return coalesce(filter_zeros_layout(layout))


# -- compact and ordered layouts -------------------------------------------------------------------------

def compact_order(shp: IntTuple, order: IntTuple) -> IntTuple:
    """Strides that make ``shp`` compact with modes ranked by ``order``: ``compact_order((2,3,4),(1,1,0))`` → (4,4,1).

    Equal orders share the same start (not an error; the result overlaps). Pre: at each tuple level of ``order``,
    equal ranks of shape and order.
    """
    def check(s, o):
        if is_tuple(o):
            if not is_tuple(s) or len(s) != len(o):
                raise LayoutError("make_ordered_layout", (shp, order), "Need equal rank of shape and order")
            for x, y in zip(s, o):
                check(x, y)

    check(shp, order)
    ref_shape = leaves(product_like(shp, order))
    ref_order = leaves(order)

    def build(s, o):
        if is_tuple(o):
            return tuple(build(x, y) for x, y in zip(s, o))
        start = 1
        for rs, ro in zip(ref_shape, ref_order):
            if ro < o:
                start *= rs
        return compact_col_major(s, start)

    return build(shp, order)


@pure
def make_ordered_layout(shp: IntTuple, order) -> Layout:
    """Compact layout with modes ordered by ``order``: ``make_ordered_layout((2,2,2,2),(0,2,3,1))`` →
    ``(2,2,2,2):(1,4,8,2)``. ``order`` may also be LayoutLeft or LayoutRight. Post: size-1 leaves get stride 0."""
    if order is LayoutLeft or order is LayoutRight:
        return make_layout(shp, order)
    _validate_shape(shp, "make_ordered_layout", (shp, order))
    return Layout._make(shp, compact_order(shp, order))


@pure
def make_layout_like(layout: Layout) -> Layout:
    """Same shape, compact strides ordered like the original's: ``(2,(3,4)):(12,(0,1))`` → ``(2,(3,4)):(4,(0,1))``.

    Post: stride-0 and size-1 leaves get stride 0; equal original strides get equal new strides.
    """
    _plain_only("make_layout_like", layout)
    require_integer_strides("make_layout_like", layout)
    return Layout._make(layout.shape, compact_order(filter_zeros(layout.stride, layout.shape), layout.stride))


@pure
def nullspace(layout: Layout) -> Layout:
    """The 1-D coordinates of L's stride-0 leaves: ``nullspace((2,3,4):(0,1,0))`` → ``(2,4):(1,6)``; none → ``1:0``.

    Post: ``L(nullspace(L)(i)) == L(0)`` for every i.
    """
    _plain_only("nullspace", layout)
    flat_s = leaves(layout.shape)
    flat_d = leaves(layout.stride)
    idx = [i for i, d in enumerate(flat_d) if d == 0]
    if not idx:
        return Layout._make(1, 0)
    compact = leaves(compact_col_major(tuple(flat_s)))
    if len(idx) == 1:
        return Layout._make(flat_s[idx[0]], compact[idx[0]])
    return Layout._make(tuple(flat_s[i] for i in idx), tuple(compact[i] for i in idx))
