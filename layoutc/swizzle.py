"""Swizzle<B,M,S> and ComposedLayout(outer, offset, inner).

``Sw<B,M,S>(x) = x ^ ((x & Y) >> S)`` with ``Y = (2^B-1) << (M + max(0,S))``: bits [M, M+B) are XORed with bits
[M+S, M+S+B). A ComposedLayout maps ``c ↦ outer(offset + inner(c))``.
"""
from __future__ import annotations

from .errors import LayoutError
from .int_tuple import is_int
from .layout import Layout


class Swizzle:
    """CuTe ``Swizzle<B,M,S>``: ``Swizzle(3,4,3)(1000)`` → 920.

    Pre: B ≥ 0, M ≥ 0, |S| ≥ B (the XOR source and target bit ranges do not overlap).
    Post: an involution (``Sw(Sw(x)) == x``) and a bijection on every aligned block of 2^(M+B+|S|).
    Works on Python ints and elementwise on numpy integer arrays.
    """

    __slots__ = ("bits", "base", "shift", "yyy_mask", "zzz_mask")

    def __init__(self, bits: int, base: int, shift: int):
        for name, v in (("B", bits), ("M", base), ("S", shift)):
            if not is_int(v):
                raise LayoutError("Swizzle", (bits, base, shift), f"{name} must be an int, got {v!r}")
        if base < 0:
            raise LayoutError("Swizzle", (bits, base, shift), f"MBase must be positive: M = {base}, must be >= 0")
        if bits < 0:
            raise LayoutError("Swizzle", (bits, base, shift), f"BBits must be positive: B = {bits}, must be >= 0")
        if abs(shift) < bits:
            raise LayoutError("Swizzle", (bits, base, shift),
                              f"abs(SShift) must be more than BBits: |S| = {abs(shift)} must be >= B = {bits}, "
                              "else the XORed bit ranges overlap")
        if base + bits + abs(shift) > 64:
            raise LayoutError("Swizzle", (bits, base, shift),
                              f"M + B + |S| = {base + bits + abs(shift)} exceeds 64: no address has that many bits")
        self.bits = bits
        self.base = base
        self.shift = shift
        mask = (1 << bits) - 1
        self.yyy_mask = mask << (base + max(0, shift))
        self.zzz_mask = mask << (base - min(0, shift))

    def __call__(self, offset):
        if self.shift >= 0:
            return offset ^ ((offset & self.yyy_mask) >> self.shift)
        return offset ^ ((offset & self.yyy_mask) << -self.shift)

    def __eq__(self, other) -> bool:
        return type(other) is Swizzle and (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash(("Sw", self.bits, self.base, self.shift))

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    def __repr__(self) -> str:
        return f"Swizzle({self.bits}, {self.base}, {self.shift})"

    @property
    def span(self) -> int:
        """Size of the aligned block the swizzle permutes: 2^(M+B+|S|) (1024 for Sw<3,4,3>)."""
        return 1 << (self.base + self.bits + abs(self.shift))

    @property
    def is_identity(self) -> bool:
        return self.bits == 0


def _trailing_zeros(x: int) -> int:
    return (x & -x).bit_length() - 1


def make_swizzle(yyy_mask: int, zzz_mask: int) -> Swizzle:
    """The swizzle XORing mask ``zzz`` with mask ``yyy``: ``make_swizzle(0b1110000000, 0b1110000)`` → ``Sw<3,4,3>``.

    Pre: equal popcounts and contiguous masks; two zero masks give the identity ``Sw<0,0,0>``.
    """
    if yyy_mask == 0 and zzz_mask == 0:
        return Swizzle(0, 0, 0)
    if bin(yyy_mask).count("1") != bin(zzz_mask).count("1"):
        raise LayoutError("make_swizzle", (yyy_mask, zzz_mask), "Number of bits in Y and Z don't match")
    if yyy_mask <= 0 or zzz_mask <= 0:
        raise LayoutError("make_swizzle", (yyy_mask, zzz_mask), "masks must be positive")
    bits = bin(yyy_mask).count("1")
    ty, tz = _trailing_zeros(yyy_mask), _trailing_zeros(zzz_mask)
    base = min(ty, tz)
    shift = ty - tz
    try:
        sw = Swizzle(bits, base, shift)
    except LayoutError:
        sw = None
    if sw is None or (sw.yyy_mask | sw.zzz_mask) != (yyy_mask | zzz_mask):
        raise LayoutError("make_swizzle", (yyy_mask, zzz_mask),
                          "Something went wrong: the masks are not contiguous, equal-width, disjoint bit ranges")
    return sw


def composed(outer, offset: int, inner: Layout):
    """CuTe's three-part ``composition(outer, offset, inner)``: ``outer o offset o inner``, except that an identity
    swizzle (``Sw<0,M,S>``) at offset 0 is no function at all and gives ``inner`` itself:
    ``composed(Sw<3,4,3>, 0, 8:1)`` → ``Sw<3,4,3> o 0 o 8:1``, ``composed(Sw<0,4,3>, 0, 8:1)`` → ``8:1``,
    ``composed(Sw<0,4,3>, 64, 8:1)`` → ``Sw<0,4,3> o 64 o 8:1`` (the offset is kept).
    Post: the result computes ``c ↦ outer(offset + inner(c))``.
    """
    if type(outer) is Swizzle and outer.bits == 0 and offset == 0 and isinstance(inner, Layout):
        return inner
    return ComposedLayout(outer, offset, inner)


class ComposedLayout:
    """``outer o offset o inner``: ``c ↦ outer(offset + inner(c))``; CuTe prints ``Sw<3,4,3> o 0 o (8,64):(64,1)``.

    ``outer`` is a Swizzle or a Layout, ``offset`` an int, ``inner`` a Layout. Shape, size, rank, depth and cosize are
    the inner layout's. Equality compares all three parts.
    The constructor is CuTe's ``make_composed_layout``: it keeps whatever it is given, the identity swizzle
    ``Sw<0,M,S>`` included (``Sw<0,4,3> o 0 o 8:1`` is a ComposedLayout, printed so by CuTe too). Every operation on
    a composed layout rebuilds its result with ``composed`` (CuTe's ``composition(outer, offset, inner)``), which
    drops an identity swizzle at offset 0.
    """

    __slots__ = ("outer", "offset", "inner")

    def __init__(self, outer, offset: int, inner: Layout):
        if not isinstance(outer, (Swizzle, Layout)):
            raise LayoutError("ComposedLayout", (outer, offset, inner), "outer must be a Swizzle or a Layout")
        if not is_int(offset):
            raise LayoutError("ComposedLayout", (outer, offset, inner), f"offset must be an int, got {offset!r}")
        if not isinstance(inner, Layout):
            raise LayoutError("ComposedLayout", (outer, offset, inner), "inner must be a Layout")
        self.outer = outer
        self.offset = offset
        self.inner = inner

    def with_inner(self, inner: Layout, offset: int | None = None):
        """The same outer function over a new inner layout (and optionally a new offset), built as CuTe rebuilds the
        result of every operation on a composed layout, with ``composition(outer, offset, inner)``: an identity swizzle
        at offset 0 collapses to the plain inner layout.
        ``(Sw<3,4,3> o 0 o 8:1).with_inner(4:2)`` → ``Sw<3,4,3> o 0 o 4:2``; ``(Sw<0,4,3> o 0 o 8:1).with_inner(4:2)`` →
        ``4:2``."""
        return composed(self.outer, self.offset if offset is None else offset, inner)

    @property
    def shape(self):
        return self.inner.shape

    @property
    def size(self) -> int:
        return self.inner.size

    @property
    def cosize(self) -> int:
        return self.inner.cosize

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def depth(self) -> int:
        return self.inner.depth

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index):
        """Mode ``index`` over the same outer function (CuTe's ``get<i>``; an identity swizzle at offset 0 drops)."""
        return self.with_inner(self.inner[index])

    def __call__(self, *coord):
        """Index of a coordinate through the outer function, or a slice: ``with_inner`` of the sliced inner layout with
        the fixed part's index folded into the offset, so no information is lost (CuTe returns that offset apart and
        may decay the slice to a plain layout: spec §6.1). ``(Sw<3,4,3> o 0 o (8,64):(64,1))(_,3)`` →
        ``Sw<3,4,3> o 3 o (8):(64)``; an identity swizzle at a resulting offset 0 drops:
        ``(Sw<0,4,3> o 0 o (8,64):(64,1))(_,0)`` → ``(8):(64)``."""
        from .layout import has_underscore, slice_layout, slice_offset
        if len(coord) == 1:
            coord = coord[0]
        if has_underscore(coord):
            return self.with_inner(slice_layout(coord, self.inner), self.offset + slice_offset(coord, self.inner))
        return self.outer(self.offset + self.inner(coord))

    def __eq__(self, other) -> bool:
        return (type(other) is ComposedLayout and self.outer == other.outer and self.offset == other.offset
                and self.inner == other.inner)

    def __hash__(self) -> int:
        return hash((self.outer, self.offset, self.inner))

    def __str__(self) -> str:
        from .notation import to_str
        return to_str(self)

    def __repr__(self) -> str:
        return f"ComposedLayout({self.outer!r}, {self.offset!r}, {self.inner!r})"

    def _repr_svg_(self) -> str:
        from .picture import layout_svg
        return layout_svg(self)
