"""IntTuple: an int or a (nested) tuple of IntTuples, with CuTe's helpers.

Integers stand for CuTe's static ``Int<N>``; integer division follows C++ (truncation toward zero).
"""
from __future__ import annotations

from functools import reduce
from typing import Union

from .basis import arithmetic_sum
from .errors import LayoutError, operand_text

IntTuple = Union[int, tuple]

# The deepest tuple nesting layoutc accepts from text or in a constructed layout. CuTe layouts nest a handful of levels;
# the limit keeps every recursive algorithm of the algebra (and CPython's own recursive tuple hashing and comparison)
# far below Python's recursion limit, so that too-deep input is a LayoutError and never a RecursionError or a crash.
MAX_DEPTH = 100


def is_int(x) -> bool:
    """True for a plain integer leaf (bool excluded). ``is_int(3)`` → True, ``is_int((3,))`` → False."""
    return type(x) is int


def is_tuple(x) -> bool:
    """True for a tuple node. ``is_tuple((3,))`` → True; post: exactly one of is_int/is_tuple holds for an IntTuple."""
    return type(x) is tuple


def cpp_div(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero): ``cpp_div(-3, 2)`` → -1."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def cpp_mod(a: int, b: int) -> int:
    """C++ remainder (sign of the dividend): ``cpp_mod(-3, 2)`` → -1; post: a == cpp_div(a,b)*b + cpp_mod(a,b)."""
    return a - cpp_div(a, b) * b


def signum(a: int) -> int:
    """-1, 0 or 1: ``signum(-8)`` → -1."""
    return (a > 0) - (a < 0)


def rank(t: IntTuple) -> int:
    """Number of top-level modes: ``rank((2,(3,4)))`` → 2, ``rank(8)`` → 1."""
    return len(t) if is_tuple(t) else 1


def depth(t: IntTuple) -> int:
    """Nesting depth: ``depth(8)`` → 0, ``depth((2,(3,4)))`` → 2. Iterative, so any depth can be measured."""
    if type(t) is not tuple:
        return 0
    deepest = 1
    stack = [(t, 1)]
    while stack:
        node, level = stack.pop()
        if level > deepest:
            deepest = level
        for e in node:
            if type(e) is tuple:
                stack.append((e, level + 1))
    return deepest


def product(t: IntTuple) -> int:
    """Product of all leaves (CuTe ``size``): ``product((2,(3,4)))`` → 24, ``product(())`` → 1."""
    if type(t) is tuple:
        p = 1
        for e in t:
            p *= e if type(e) is int else product(e)
        return p
    return t


def product_each(t: IntTuple) -> tuple:
    """Tuple of each top mode's product: ``product_each((2,(3,4)))`` → (2,12); an int is wrapped: ``(6)``."""
    if is_tuple(t):
        return tuple(product(e) for e in t)
    return (t,)


def flatten(t: IntTuple) -> IntTuple:
    """Leaves left to right; an int stays an int: ``flatten((2,(3,4)))`` → (2,3,4), ``flatten(5)`` → 5."""
    if is_tuple(t):
        return tuple(leaves(t))
    return t


def leaves(t: IntTuple) -> list:
    """The leaves as a list (an int gives [int]): ``leaves((2,(3,4)))`` → [2,3,4]. Iterative (any depth)."""
    if type(t) is not tuple:
        return [t]
    out = []
    # A stack of iterators walks the tree left to right without recursion.
    stack = [iter(t)]
    while stack:
        for e in stack[-1]:
            if type(e) is tuple:
                stack.append(iter(e))
                break
            out.append(e)
        else:
            stack.pop()
    return out


def unflatten(flat, profile: IntTuple) -> IntTuple:
    """Rebuild ``profile``'s tree from a flat sequence: ``unflatten((1,2,3), (0,(0,0)))`` → (1,(2,3)).

    Post: ``leaves(result) == list(flat)``; the leaf counts must match.
    """
    flat = list(flat)
    pos = 0

    def build(p):
        nonlocal pos
        if is_tuple(p):
            return tuple(build(e) for e in p)
        v = flat[pos]
        pos += 1
        return v

    result = build(profile)
    if pos != len(flat):
        raise LayoutError("unflatten", (tuple(flat), profile), "leaf counts differ")
    return result


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree shape: ``congruent((1,(2,3)), (4,(5,6)))`` → True, ``congruent(1,(1,))`` → False."""
    if is_tuple(a) and is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not is_tuple(a) and not is_tuple(b)


def weakly_congruent(a: IntTuple, b: IntTuple) -> bool:
    """a's tree is a prefix of b's: ``weakly_congruent(1, (2,3))`` → True, ``weakly_congruent((1,2), 3)`` → False."""
    if not is_tuple(a):
        return True
    if not is_tuple(b):
        return False
    return len(a) == len(b) and all(weakly_congruent(x, y) for x, y in zip(a, b))


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """a's coordinates are valid in b: ``compatible(24, ((2,3),4))`` → True, ``compatible((24,), 24)`` → False."""
    if not is_tuple(a):
        return a == product(b)
    if not is_tuple(b):
        return False
    return len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))


def ceil_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe ceil_div on shapes: ``ceil_div((3,5), 2)`` → (2,5); ``ceil_div((7,5,3),(2,))`` → (4,5,3).

    A tuple divided by an int folds left to right (the divisor is consumed by each mode in turn).
    """
    if is_tuple(a):
        if is_tuple(b):
            if len(a) < len(b):
                raise LayoutError("ceil_div", (a, b), "Mismatched ranks: rank(a) must be >= rank(b)")
            b = b + (1,) * (len(a) - len(b))
            return tuple(ceil_div(x, y) for x, y in zip(a, b))
        return _fold_by_int(a, b, ceil_div)
    if is_tuple(b):
        return ceil_div(a, product(b))
    if b == 0:
        raise LayoutError("ceil_div", (a, b), "division by zero: the divisor is 0")
    return cpp_div(a + b - 1, b)


def _fold_by_int(a: tuple, divisor: int, divide) -> tuple:
    """CuTe's left fold of a tuple by an int: each mode takes its share of ``divisor`` in turn."""
    out = []
    for x in a:
        out.append(divide(x, divisor))
        divisor = divide(divisor, product(x))
    return tuple(out)


def round_up(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe's round_up: ``a`` rounded up to a multiple of ``b``, elementwise for tuples (missing modes of ``b`` are
    1): ``round_up(7, 4)`` → 8, ``round_up((7,5,3), (4,2))`` → (8,6,3).

    Pre: positive divisors; an int with an int or a tuple with a tuple of no larger rank ("Mismatched ranks").
    Post: every leaf of the result is the least multiple of its divisor that is >= the leaf of ``a``.
    """
    if is_tuple(a):
        if is_tuple(b):
            if len(a) < len(b):
                raise LayoutError("round_up", (a, b), f"Mismatched ranks: rank(a) = {len(a)} < rank(b) = {len(b)}")
            b = b + (1,) * (len(a) - len(b))
            return tuple(round_up(x, y) for x, y in zip(a, b))
    if is_tuple(a) or is_tuple(b):
        raise LayoutError("round_up", (a, b), "Mismatched ranks: an integer and a tuple (CuTe rounds an int to an "
                          "int, or a tuple to a tuple by mode)")
    if b <= 0:
        raise LayoutError("round_up", (a, b), f"the divisor {b} is not positive")
    return cpp_div(a + b - 1, b) * b


def shape_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe shape_div: ``shape_div((4,5,6), 40)`` → (1,1,3); ``shape_div(3, 6)`` → 1.

    Pre: at int/int leaves one divides the other (else LayoutError "Divisibility Condition").
    """
    if is_tuple(a):
        if is_tuple(b):
            if len(a) != len(b):
                raise LayoutError("shape_div", (a, b), "Mismatched ranks")
            return tuple(shape_div(x, y) for x, y in zip(a, b))
        return _fold_by_int(a, b, shape_div)
    if is_tuple(b):
        return shape_div(a, product(b))
    if b == 0:
        raise LayoutError("shape_div", (a, b), "division by zero: the divisor is 0")
    if not (a % b == 0 or b % a == 0):
        raise LayoutError("shape_div", (a, b), f"Divisibility Condition: neither {a} nor {b} divides the other")
    return ceil_div(a, b)


def evenly_divides(shape: IntTuple, tiler: IntTuple) -> bool:
    """Whether ``tiler`` tiles ``shape`` exactly: ``evenly_divides((8,6),(4,3))`` → True, ``(8,6),(3,3)`` → False."""
    if is_tuple(tiler):
        if not is_tuple(shape) or len(tiler) > len(shape):
            return False
        return all(evenly_divides(s, t) for s, t in zip(shape, tiler))
    return product(shape) == product(tiler) * product(ceil_div(shape, tiler))


def inner_product(a: IntTuple, b: IntTuple) -> int:
    """Sum of leafwise products: ``inner_product((2,(3,4)), (1,(2,6)))`` → 32. Pre: congruent trees."""
    if is_tuple(a):
        if not is_tuple(b) or len(a) != len(b):
            raise LayoutError("inner_product", (a, b), "Mismatched ranks")
        return sum(inner_product(x, y) for x, y in zip(a, b))
    if is_tuple(b):
        raise LayoutError("inner_product", (a, b), "Mismatched ranks")
    return a * b


def crd2idx(coord: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> int:
    """Coordinate → index. ``crd2idx((1,5), (3,(2,3)), (3,(12,1)))`` → 17; an int coordinate is split colexicographically
    and the last mode takes the remaining quotient unbounded: ``crd2idx(9, (4,2), (1,10))`` → 21.

    Without ``stride`` the coordinate is linearised colexicographically in ``shape`` (an int is returned as is).
    The split uses C++ division, so a negative coordinate goes where CuTe sends it: ``crd2idx(-1, (4,2), (1,10))`` → -1.
    Basis strides (``1@0``) make the result a coordinate, summed as CuTe's arithmetic tuples:
    ``crd2idx((2,5), (4,8), (1@0,1@1))`` → (2,5).
    Pre: at every tuple level the coordinate, shape and stride have equal ranks ("Mismatched Ranks"); a tuple
    coordinate needs a tuple shape ("Invalid parameters").
    """
    if stride is None:
        if not is_tuple(coord):
            return coord
        return crd2idx(coord, shape, compact_col_major_strict(shape))
    if is_tuple(shape) and (not is_tuple(stride) or len(stride) != len(shape)):
        raise LayoutError("crd2idx", (coord, shape, stride), "Mismatched Ranks: shape and stride ranks differ")
    if is_tuple(coord):
        if not is_tuple(shape):
            raise LayoutError("crd2idx", (coord, shape), "Invalid parameters: a tuple coordinate for an integral shape")
        if len(coord) != len(shape):
            raise LayoutError("crd2idx", (coord, shape), f"Mismatched Ranks: coordinate rank {len(coord)} "
                              f"but shape rank {len(shape)}")
        result = 0
        for c, s, d in zip(coord, shape, stride):
            term = crd2idx(c, s, d)
            # basis strides give coordinates, which add as CuTe's arithmetic tuples
            result = result + term if type(term) is int and type(result) is int else arithmetic_sum(result, term)
        return result
    if is_tuple(shape):
        result = 0
        last = len(shape) - 1
        for i, (s, d) in enumerate(zip(shape, stride)):
            if i == last:
                term = crd2idx(coord, s, d)
            else:
                n = product(s)
                if n == 0:
                    raise LayoutError("crd2idx", (coord, shape, stride), "division by zero: a shape mode has size 0")
                term = crd2idx(cpp_mod(coord, n), s, d)
                coord = cpp_div(coord, n)
            result = result + term if type(term) is int and type(result) is int else arithmetic_sum(result, term)
        return result
    if is_tuple(stride):
        raise LayoutError("crd2idx", (coord, shape, stride), "Mismatched Ranks: a tuple stride for an integral shape")
    return coord * stride


def idx2crd(index: IntTuple, shape: IntTuple) -> IntTuple:
    """Index → natural coordinate (colexicographic, last mode unbounded): ``idx2crd(16, (3,(2,3)))`` → (1,(1,2)).
    C++ division splits a negative index as CuTe does."""
    if is_tuple(index):
        if not is_tuple(shape):
            raise LayoutError("idx2crd", (index, shape), "Invalid parameters: a tuple index for an integral shape")
        if len(index) != len(shape):
            raise LayoutError("idx2crd", (index, shape), "Mismatched Ranks")
        return tuple(idx2crd(i, s) for i, s in zip(index, shape))
    if is_tuple(shape):
        out = []
        last = len(shape) - 1
        for i, s in enumerate(shape):
            if i == last:
                out.append(idx2crd(index, s))
            else:
                n = product(s)
                if n == 0:
                    raise LayoutError("idx2crd", (index, shape), "division by zero: a shape mode has size 0")
                out.append(idx2crd(cpp_mod(index, n), s))
                index = cpp_div(index, n)
        return tuple(out)
    return index


def compact_col_major(shape: IntTuple, start: int = 1) -> IntTuple:
    """CuTe LayoutLeft strides: ``compact_col_major((2,(3,1),5))`` → (1,(2,0),6). Shape-1 leaves get stride 0 and do
    not advance the running product."""
    cur = start

    def walk(s):
        nonlocal cur
        if is_tuple(s):
            return tuple(walk(e) for e in s)
        if s == 1:
            return 0
        d = cur
        cur *= s
        return d

    return walk(shape)


def compact_col_major_strict(shape: IntTuple) -> IntTuple:
    """Exclusive prefix products over all leaves (shape-1 leaves included), for linearising coordinates:
    ``compact_col_major_strict((2,1,3))`` → (1,2,2)."""
    cur = 1

    def walk(s):
        nonlocal cur
        if is_tuple(s):
            return tuple(walk(e) for e in s)
        d = cur
        cur *= s
        return d

    return walk(shape)


def compact_row_major(shape: IntTuple, start: int = 1) -> IntTuple:
    """CuTe LayoutRight strides: ``compact_row_major((2,(3,4),5))`` → (60,(20,5),1); shape-1 leaves get 0."""
    cur = start

    def walk(s):
        nonlocal cur
        if is_tuple(s):
            return tuple(reversed([walk(e) for e in reversed(s)]))
        if s == 1:
            return 0
        d = cur
        cur *= s
        return d

    return walk(shape)


def filter_zeros(a: IntTuple, b: IntTuple) -> IntTuple:
    """Replace by 1s every sub-tree of ``b`` paired with a 0 leaf of ``a``: ``filter_zeros((0,2),(3,4))`` → (1,4)."""
    if is_tuple(a):
        return tuple(filter_zeros(x, y) for x, y in zip(a, b))
    if a == 0:
        return _ones_like(b)
    return b


def _ones_like(t: IntTuple) -> IntTuple:
    return tuple(_ones_like(e) for e in t) if is_tuple(t) else 1


def product_like(shape: IntTuple, profile: IntTuple) -> IntTuple:
    """Products of ``shape``'s sub-trees under each leaf of ``profile``: ``product_like((2,(3,4),5),(0,0,0))`` → (2,12,5)."""
    if is_tuple(profile):
        return tuple(product_like(s, p) for s, p in zip(shape, profile))
    return product(shape)


def replace_leaves(t: IntTuple, fn) -> IntTuple:
    """Map every leaf through ``fn`` keeping the tree: ``replace_leaves((1,(2,3)), lambda x: 2*x)`` → (2,(4,6))."""
    if is_tuple(t):
        return tuple(replace_leaves(e, fn) for e in t)
    return fn(t)


def prod(values) -> int:
    """Product of an iterable of ints (1 when empty)."""
    return reduce(lambda x, y: x * y, values, 1)


def idx2crd_strided(index: int, shape: IntTuple, stride: IntTuple) -> IntTuple:
    """CuTe's three-argument ``idx2crd(i, shape, stride)``: the coordinate of index ``i`` in a *compact* layout, each
    leaf ``(i / d) % s`` (a size-1 leaf gives 0): ``idx2crd_strided(17, (2,16), (16,1))`` → (1,1), the row-major
    thread 17 of a 2×16 thread layout. An int stride against a tuple shape is the start of its column-major strides.

    Pre: the layout is compact (else the result is not L's preimage); ranks match ("Mismatched Ranks"); a stride
    0 only on size-1 leaves. Post: for compact L, ``crd2idx(result, shape, stride) == i`` for i < size(shape).
    """
    if is_tuple(index):
        if not is_tuple(shape):
            raise LayoutError("idx2crd", (index, shape, stride), "Invalid parameters: a tuple index for an integral shape")
        if len(index) != len(shape) or not is_tuple(stride) or len(stride) != len(shape):
            raise LayoutError("idx2crd", (index, shape, stride), "Mismatched Ranks")
        return tuple(idx2crd_strided(i, s, d) for i, s, d in zip(index, shape, stride))
    if is_tuple(shape):
        if not is_tuple(stride):
            stride = compact_col_major(shape, stride)
        if len(stride) != len(shape):
            raise LayoutError("idx2crd", (index, shape, stride), "Mismatched Ranks")
        return tuple(idx2crd_strided(index, s, d) for s, d in zip(shape, stride))
    if is_tuple(stride):
        raise LayoutError("idx2crd", (index, shape, stride), "Mismatched Ranks: a tuple stride for an integral shape")
    if shape == 1:
        return 0
    if type(stride) is not int or stride == 0:
        raise LayoutError("idx2crd", (index, shape, stride), f"the stride {stride} of a mode of size {shape} cannot "
                          "be inverted (a compact layout has nonzero integer strides)")
    return cpp_mod(cpp_div(index, stride), shape)


def crd2crd(coord: IntTuple, src_shape: IntTuple, dst_shape: IntTuple) -> IntTuple:
    """CuTe's crd2crd: a coordinate of ``src_shape`` as the coordinate of the same colexicographic position in
    ``dst_shape``, mode by mode where all three are tuples: ``crd2crd((1,(1,2)), (3,(2,3)), (3,6))`` → (1,5),
    ``crd2crd(5, 6, (2,3))`` → (1,2).

    Pre: where all three are tuples their ranks are equal ("Mismatched Ranks"). Post: ``crd2idx(result, dst_shape)
    == crd2idx(coord, src_shape)`` whenever the sizes agree.
    """
    if is_tuple(coord) and is_tuple(src_shape) and is_tuple(dst_shape):
        if not len(coord) == len(src_shape) == len(dst_shape):
            raise LayoutError("crd2crd", (coord, src_shape, dst_shape), f"Mismatched Ranks: the coordinate has rank "
                              f"{len(coord)}, the shapes {len(src_shape)} and {len(dst_shape)}")
        return tuple(crd2crd(c, s, d) for c, s, d in zip(coord, src_shape, dst_shape))
    return idx2crd(crd2idx(coord, src_shape), dst_shape)


def elem_less(a: IntTuple, b: IntTuple) -> bool:
    """CuTe's elem_less: every leaf of ``a`` is below the matching leaf of ``b`` (the bounds check of a coordinate
    against a shape): ``elem_less((1,7), (4,8))`` → True, ``elem_less((1,8), (4,8))`` → False. A shorter ``a`` is
    compared on its modes only (``elem_less((1,), (4,8))`` → True); a longer one is never less.

    Pre: an int is compared with an int, a tuple with a tuple. Post: ``elem_less(c, shape)`` holds exactly for the
    natural coordinates ``c`` inside ``shape``.
    """
    if is_tuple(a) and is_tuple(b):
        if len(a) > len(b):
            return False
        return all(elem_less(x, y) for x, y in zip(a, b))
    if is_tuple(a) or is_tuple(b):
        raise LayoutError("elem_less", (a, b), "an integer and a tuple cannot be compared element by element")
    return a < b


def elem_leq(a: IntTuple, b: IntTuple) -> bool:
    """CuTe's elem_leq, ``not elem_less(b, a)``: ``elem_leq((4,8), (4,8))`` → True, ``elem_leq((1,9), (4,8))`` → True
    (9 > 8 but 1 < 4: CuTe's definition is the negation, not "every leaf <="). Post: ``elem_leq(a, b) == not
    elem_less(b, a)``."""
    return not elem_less(b, a)


def _is_underscore(c) -> bool:
    # Local import: the Underscore type lives with the Layout type, which builds on this module.
    from .layout import _
    return c is _


def slice_tuple(coord, t):
    """CuTe's ``slice`` on a plain tuple: keep the elements of ``t`` paired with ``_`` in ``coord``, splicing the ones
    found inside a nested coordinate into the parent: ``slice_tuple((_,(1,_)), (2,(3,4)))`` → (2,4),
    ``slice_tuple(_, (2,3))`` → (2,3), ``slice_tuple(1, (2,3))`` → ().

    Pre: at every tuple level of ``coord``, ``t`` is a tuple of the same rank ("Mismatched Ranks").
    Post: the result holds the kept elements of ``t`` left to right (``slice_tuple(c, shape(L)) == shape(L(c))``).
    """
    if _is_underscore(coord):
        return t
    if not is_tuple(coord):
        return ()
    return tuple(_lift(coord, t, keep_underscore=True, whole=(coord, t), op="slice"))


def dice_tuple(coord, t):
    """CuTe's ``dice`` on a plain tuple, the dual of slice: keep the elements of ``t`` paired with an int (or any
    non-``_`` value) in ``coord``: ``dice_tuple((1,_,1), (32,64,4))`` → (32,4) (CuTe's projection ``Step<_1,X,_1>``),
    ``dice_tuple(1, (2,3))`` → (2,3), ``dice_tuple(_, (2,3))`` → ().

    Pre: at every tuple level of ``coord``, ``t`` is a tuple of the same rank ("Mismatched Ranks").
    Post: ``dice_tuple(c, t)`` and ``slice_tuple(c, t)`` together hold every element of ``t`` once.
    """
    if _is_underscore(coord):
        return ()
    if not is_tuple(coord):
        return t
    return tuple(_lift(coord, t, keep_underscore=False, whole=(coord, t), op="dice"))


def _lift(coord, t, keep_underscore: bool, whole, op: str) -> list:
    if is_tuple(coord):
        if not is_tuple(t) or len(t) != len(coord):
            raise LayoutError(op, whole, f"Mismatched Ranks: the coordinate {operand_text(coord)} does not match "
                              f"{operand_text(t)}")
        out = []
        for c, x in zip(coord, t):
            out.extend(_lift(c, x, keep_underscore, whole, op))
        return out
    if _is_underscore(coord) == keep_underscore:
        return [t]
    return []

