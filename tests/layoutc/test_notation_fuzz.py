"""Robustness of CuTe notation and of the algebra (issue 16, item 8): nothing but LayoutError comes out.

- ``parse`` on random text, on valid notation and on structured mutations of it (deep nesting, huge and negative
  ints, stray ``_``, swizzle and tiler variants, unicode): only LayoutError (op ``parse``, with a column), or
  TypeError for a non-str argument; whatever parses prints back to text that parses to an equal object.
- The nesting limit (``MAX_DEPTH``): accepted up to it, refused past it at the right column, and every algebra
  operation works on layouts that deep even when called from a deep stack; printing works at any depth.
- Every algebra operation on strategy-drawn layouts and arbitrary (often invalid) other arguments raises only
  LayoutError, and every Layout it returns is valid and round-trips through the notation.

The parse properties follow the hypothesis profile (tests/conftest.py); the per-operation algebra properties run 60
examples each. For a long local session set ``LAYOUTC_FUZZ_EXAMPLES``, e.g.
``LAYOUTC_FUZZ_EXAMPLES=20000 pytest tests/layoutc/test_notation_fuzz.py``.
"""
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import layoutc as lc
from layoutc import ComposedLayout, Layout, LayoutError, Swizzle, _
from layoutc.int_tuple import MAX_DEPTH
from layoutc.strategies import composed_layouts, layouts, swizzles, tilers_for

_EXAMPLES = os.environ.get("LAYOUTC_FUZZ_EXAMPLES")
fuzz = (settings(max_examples=int(_EXAMPLES), deadline=None, suppress_health_check=list(HealthCheck))
        if _EXAMPLES else (lambda f: f))
# One property per algebra operation (about 60 of them): a modest default keeps the suite quick under the CI
# profile's 500 examples; LAYOUTC_FUZZ_EXAMPLES raises it like the others.
fuzz_op = fuzz if _EXAMPLES else settings(max_examples=60, deadline=None)


def check_text(text):
    """The fuzz property for one text."""
    try:
        x = lc.parse(text)
    except LayoutError as e:
        assert e.op == "parse" and e.operands == (text,)
        assert "column" in e.condition, e.condition
        return None
    assert lc.parse(lc.to_str(x)) == x
    if isinstance(x, (tuple, int, Layout)) or x is _:
        assert lc.parse(lc.tiler_to_str(x)) == x
    if isinstance(x, (Layout, ComposedLayout)):
        assert lc.parse_layout(lc.to_str(x)) == x
    return x


# ---------------------------------------------------------------------------------------------------------------
# text strategies

TOKENS = ["(", ")", "<", ">", ",", ":", "_", "-", " ", "o", " o ", "Sw", "Sw<", "Sw<3,4,3>", "Sw<0,4,3>", "Sw<-1,2,3>",
          "Sw<1,2,0>", "smem_ptr[16b](unset)", "smem_ptr[b](unset)", "0", "1", "-1", "_8", "_-1", "__8", "8_",
          "9" * 30, "-" + "7" * 25, "4" * 5000, "()", "(,)", "::", "é", "∘", "\u00a0", "\u200b", "\x00", "\t", "\n",
          "𝟘", "ｏ", "(1)", "1:0", "(2,3):(1,2)", "<2,_>", "(_,2:1)"]

ALPHABET = "()<>,:_- 0123456789oSw[]bsmemptrunset\t\n" + "é∘→ｏ𝟘\u00a0\u200b\x00"

random_text = st.text(alphabet=st.one_of(st.sampled_from(ALPHABET), st.characters()), max_size=60)
token_text = st.lists(st.sampled_from(TOKENS), max_size=25).map("".join)


def _with_static_markers(draw, text):
    """CuTe's own spelling: some ints get the ``_`` static marker, some gaps get whitespace."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if (ch.isdigit() or ch == "-") and (i == 0 or text[i - 1] in "(,:< ") and draw(st.booleans()):
            out.append("_")
        out.append(ch)
        if ch in ",:" and draw(st.integers(0, 5)) == 0:
            out.append(" ")
        i += 1
    return "".join(out)


@st.composite
def valid_text(draw):
    kind = draw(st.integers(0, 4))
    if kind == 0:
        text = lc.to_str(draw(layouts(max_size=256, allow_negative_strides=True)))
    elif kind == 1:
        text = lc.to_str(draw(composed_layouts()))
    elif kind == 2:
        L = draw(layouts(max_size=256))
        text = lc.tiler_to_str(draw(tilers_for(L)))
    elif kind == 3:
        text = lc.to_str(draw(swizzles()))
    else:
        L = draw(layouts(max_size=256))
        text = lc.to_str(draw(tilers_for(L)))
    return _with_static_markers(draw, text) if draw(st.booleans()) else text


@st.composite
def mutated_text(draw):
    text = draw(valid_text())
    for _i in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, n))
        op = draw(st.integers(0, 7))
        if op == 0:      # delete a span
            text = text[:i] + text[j:]
        elif op == 1:    # insert a token
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif op == 2:    # replace a span by a token
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
        elif op == 3:    # duplicate a span
            text = text[:j] + text[i:j] + text[j:]
        elif op == 4:    # nest a span deeply, balanced or not
            k = draw(st.sampled_from([1, 2, MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, 300]))
            lb, rb = draw(st.sampled_from([("(", ")"), ("<", ">"), ("(", ""), ("", ")")]))
            text = text[:i] + lb * k + text[i:j] + rb * k + text[j:]
        elif op == 5:    # a huge, negative or zero int in place of a span
            text = text[:i] + draw(st.sampled_from(["0", "-3", "2" * 40, "-" + "5" * 80, "1" * 4301])) + text[j:]
        elif op == 6:    # an arbitrary character
            text = text[:i] + draw(st.characters()) + text[i:]
        else:            # swap the two halves
            text = text[i:] + text[:i]
    return text


# ---------------------------------------------------------------------------------------------------------------
# parse fuzz


@fuzz
@given(random_text)
def test_parse_random_text(text):
    check_text(text)


@fuzz
@given(token_text)
def test_parse_token_soup(text):
    check_text(text)


@fuzz
@given(valid_text())
def test_parse_valid_notation_round_trips(text):
    assert check_text(text) is not None


@fuzz
@given(mutated_text())
def test_parse_mutated_notation(text):
    check_text(text)


@pytest.mark.parametrize("arg", [None, 8, 8.0, b"8:1", ["8:1"], Layout(8, 1)])
def test_parse_non_str_is_type_error(arg):
    with pytest.raises(TypeError, match="parse expects a str of CuTe notation"):
        lc.parse(arg)


# ---------------------------------------------------------------------------------------------------------------
# the nesting limit


def nested(k, leaf="2"):
    return "(" * k + leaf + ")" * k


def test_parse_accepts_the_nesting_limit_and_round_trips():
    text = nested(MAX_DEPTH) + ":" + nested(MAX_DEPTH, "1")
    L = lc.parse(text)
    assert lc.depth(L) == MAX_DEPTH and lc.to_str(L) == text and lc.parse(lc.to_str(L)) == L
    tiler = "<" * MAX_DEPTH + "3" + ">" * MAX_DEPTH
    assert lc.tiler_to_str(lc.parse(tiler)) == tiler


def test_parse_refuses_deeper_nesting_at_its_column():
    text = nested(MAX_DEPTH + 1) + ":" + nested(MAX_DEPTH + 1, "1")
    with pytest.raises(LayoutError) as info:
        lc.parse(text)
    e = info.value
    assert e.op == "parse" and e.operands == (text,)
    # the echo keeps 60 characters on each side of the column: "..." + 60 × "(" | "(2" + 58 × ")" + "..."
    assert e.condition == (f"column {MAX_DEPTH + 1}: tuples nested more than {MAX_DEPTH} levels deep (layoutc's "
                           "nesting limit)\n    ..." + "(" * 60 + "(2" + ")" * 58 + "...\n    " + " " * 63 + "^")


def test_parse_refuses_deep_tilers_and_unbalanced_text():
    for text in ["<" * (MAX_DEPTH + 1) + "3", "(" * 5000, "(8:1," * 200 + ")"]:
        with pytest.raises(LayoutError, match=r"column \d+: tuples nested more than 100 levels deep"):
            lc.parse(text)


def test_parse_refuses_too_long_integers():
    digits = "1" * (sys.get_int_max_str_digits() + 1)
    with pytest.raises(LayoutError) as info:
        lc.parse(f"(4,{digits}):(1,4)")
    assert info.value.condition.startswith(f"column 4: an integer of {len(digits)} digits exceeds Python's limit of "
                                           f"{sys.get_int_max_str_digits()} digits for reading an int\n")
    ok = "9" * 300
    assert lc.to_str(lc.parse(f"({ok},2):(1,{ok})")) == f"({ok},2):(1,{ok})"


def test_constructor_refuses_deeper_nesting():
    shape = 2
    for _i in range(MAX_DEPTH + 1):
        shape = (shape,)
    with pytest.raises(LayoutError, match=f"shape nested more than {MAX_DEPTH} levels deep"):
        Layout(shape)
    with pytest.raises(LayoutError, match=f"shape nested more than {MAX_DEPTH} levels deep"):
        lc.make_layout(shape, lc.LayoutRight)


def test_printing_works_at_any_depth():
    L = Layout(4, 1)
    for _i in range(5000):  # make_layout(L) wraps: past the limit only by building it in Python
        L = lc.make_layout(L)
    text = lc.to_str(L)
    assert text == "(" * 5000 + "4" + ")" * 5000 + ":" + "(" * 5000 + "1" + ")" * 5000
    with pytest.raises(LayoutError, match="tuples nested more than 100 levels deep"):
        lc.parse(text)
    # the algebra's operations on such a layout give a result or a LayoutError, never a RecursionError
    assert str(lc.coalesce(L)) == "4:1"
    for op in (lambda: lc.composition(L, L), lambda: lc.logical_divide(L, (2,)), lambda: lc.complement(L, 8)):
        try:
            op()
        except LayoutError as e:
            assert "nested too deeply" in e.condition


def test_printing_huge_integers():
    n = 7 ** 20000  # 16902 digits, past Python's str() limit
    text = lc.to_str(Layout(2, n))
    assert text.startswith("2:") and len(text) == 2 + 16902 and text.endswith(str(n % 10 ** 100).zfill(100))


def _deep_stack(fn, frames):
    """Call ``fn`` with ``frames`` extra Python frames below it (a caller that is itself deep in a stack)."""
    return fn() if frames == 0 else _deep_stack(fn, frames - 1)


DEEP = lc.parse(nested(MAX_DEPTH, "2,3") + ":" + nested(MAX_DEPTH, "1,2"))   # depth MAX_DEPTH

DEEP_OPS = {
    "to_str": lambda: lc.to_str(DEEP),
    "str": lambda: str(DEEP),
    "repr": lambda: repr(DEEP),
    "hash and ==": lambda: hash(DEEP) == hash(lc.parse(lc.to_str(DEEP))) and DEEP == lc.parse(lc.to_str(DEEP)),
    "Layout": lambda: Layout(DEEP.shape, DEEP.stride),
    "call": lambda: DEEP(5),
    "idx2crd": lambda: lc.idx2crd(5, DEEP.shape),
    "crd2idx": lambda: lc.crd2idx(lc.idx2crd(5, DEEP.shape), DEEP.shape, DEEP.stride),
    "flatten": lambda: lc.flatten(DEEP),
    "coalesce": lambda: lc.coalesce(DEEP),
    "filter": lambda: lc.filter(DEEP),
    "congruent": lambda: lc.congruent(DEEP.shape, DEEP.stride),
    "compatible": lambda: lc.compatible(DEEP.shape, DEEP.shape),
    "weakly_congruent": lambda: lc.weakly_congruent(DEEP.shape, DEEP.shape),
    "composition": lambda: lc.composition(DEEP, DEEP),
    "composition(6, deep)": lambda: lc.composition(Layout(6, 1), DEEP),
    "complement": lambda: lc.complement(DEEP, 24),
    "right_inverse": lambda: lc.right_inverse(DEEP),
    "left_inverse": lambda: lc.left_inverse(DEEP),
    "logical_divide": lambda: lc.logical_divide(DEEP, 2),
    "zipped_divide": lambda: lc.zipped_divide(DEEP, Layout(2, 1)),
    "logical_product": lambda: lc.logical_product(DEEP, 2),
    "blocked_product": lambda: lc.blocked_product(DEEP, Layout((2,), (1,))),
    "raked_product": lambda: lc.raked_product(DEEP, Layout(2, 1)),
    "tile_to_shape": lambda: lc.tile_to_shape(DEEP, (12,)),
    "make_layout_like": lambda: lc.make_layout_like(DEEP),
    "make_ordered_layout": lambda: lc.make_ordered_layout(DEEP.shape, DEEP.stride),
    "make_layout": lambda: lc.make_layout(DEEP.shape),
    "make_layout(L, L)": lambda: lc.make_layout(DEEP, DEEP),
    "nullspace": lambda: lc.nullspace(DEEP),
    "cosize": lambda: lc.cosize(DEEP),
    "upcast": lambda: lc.upcast(DEEP, 2),
    "downcast": lambda: lc.downcast(DEEP, 2),
    "slice": lambda: DEEP(_),
    "dice": lambda: lc.dice(0, DEEP),
    "max_common_vector": lambda: lc.max_common_vector(DEEP, DEEP),
    "max_common_layout": lambda: lc.max_common_layout(DEEP, DEEP),
    "composed": lambda: lc.logical_divide(ComposedLayout(Swizzle(1, 0, 1), 0, DEEP), 2),
    "picture": lambda: lc.to_str(lc.composition(DEEP, (_,))),
}


@pytest.mark.parametrize("name", list(DEEP_OPS))
def test_every_operation_works_at_the_nesting_limit(name):
    assert lc.depth(DEEP) == MAX_DEPTH
    _deep_stack(DEEP_OPS[name], 250)


# ---------------------------------------------------------------------------------------------------------------
# the algebra raises only LayoutError

ints = st.integers(-4, 40)
any_layouts = st.one_of(layouts(max_size=256, allow_negative_strides=True), layouts(max_size=64, max_depth=1))
layoutish = st.one_of(any_layouts, composed_layouts(inner=layouts(max_size=256)))
int_tuples = st.recursive(ints, lambda t: st.lists(t, min_size=0, max_size=4).map(tuple), max_leaves=8)
coords = st.recursive(st.one_of(ints, st.just(_)), lambda t: st.lists(t, min_size=1, max_size=4).map(tuple),
                      max_leaves=8)
tilers = st.recursive(st.one_of(ints, st.just(_), layouts(max_size=32, max_depth=1)),
                      lambda t: st.lists(t, min_size=0, max_size=4).map(tuple), max_leaves=8)
orders = st.one_of(st.just(lc.LayoutLeft), st.just(lc.LayoutRight), int_tuples)


def _op(name, fn, *strategies):
    return name, fn, strategies


OPS = [
    _op("composition", lc.composition, layoutish, st.one_of(tilers, layoutish, swizzles())),
    _op("composition(Sw, L)", lc.composition, swizzles(), st.one_of(layoutish, swizzles())),
    _op("composition(Sw, offset, L)", lc.composition, st.one_of(swizzles(), any_layouts), ints, any_layouts),
    _op("complement", lc.complement, layoutish),
    _op("complement(T)", lc.complement, layoutish, st.one_of(int_tuples, any_layouts)),
    *[_op(name, getattr(lc, name), layoutish, tilers) for name in (
        "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
        "logical_product", "zipped_product", "tiled_product", "flat_product")],
    _op("blocked_product", lc.blocked_product, layoutish, st.one_of(any_layouts, tilers)),
    _op("raked_product", lc.raked_product, layoutish, st.one_of(any_layouts, tilers)),
    _op("tile_to_shape", lc.tile_to_shape, layoutish, int_tuples, orders),
    _op("coalesce", lc.coalesce, layoutish, int_tuples),
    _op("filter", lc.filter, layoutish, int_tuples),
    _op("right_inverse", lc.right_inverse, layoutish),
    _op("left_inverse", lc.left_inverse, layoutish),
    _op("max_common_vector", lc.max_common_vector, layoutish, layoutish),
    _op("max_common_layout", lc.max_common_layout, layoutish, layoutish),
    _op("upcast", lc.upcast, st.one_of(layoutish, swizzles()), ints),
    _op("downcast", lc.downcast, st.one_of(layoutish, swizzles()), ints),
    _op("recast_layout", lc.recast_layout, layoutish, ints, ints),
    _op("dice", lc.dice, coords, any_layouts),
    _op("slice_layout", lc.slice_layout, coords, layoutish),
    _op("slice_offset", lc.slice_offset, coords, any_layouts),
    _op("call", lambda L, c: L(c), layoutish, coords),
    _op("get", lambda L, i: L[i], layoutish, ints),
    _op("take", lc.take, layoutish, ints, ints),
    _op("select", lc.select, layoutish, ints, ints),
    _op("group", lc.group, layoutish, ints, ints),
    _op("append", lambda L, n: lc.append(L, rank_to=n), layoutish, ints),
    _op("append mode", lc.append, layoutish, any_layouts),
    _op("prepend", lc.prepend, layoutish, any_layouts),
    _op("flatten", lc.flatten, layoutish),
    _op("modes", lc.modes, layoutish),
    _op("zip_layouts", lc.zip_layouts, any_layouts, any_layouts),
    _op("make_layout", lc.make_layout, int_tuples),
    _op("make_layout(shape, stride)", lc.make_layout, int_tuples, int_tuples),
    _op("make_layout(shape, order)", lc.make_layout, int_tuples, st.sampled_from([lc.LayoutLeft, lc.LayoutRight])),
    _op("make_layout(L, L)", lc.make_layout, any_layouts, any_layouts),
    _op("make_ordered_layout", lc.make_ordered_layout, int_tuples, orders),
    _op("make_layout_like", lc.make_layout_like, layoutish),
    _op("nullspace", lc.nullspace, layoutish),
    _op("Layout", Layout, int_tuples, int_tuples),
    _op("crd2idx", lc.crd2idx, int_tuples, int_tuples, int_tuples),
    _op("crd2idx(c, shape)", lc.crd2idx, int_tuples, int_tuples),
    _op("idx2crd", lc.idx2crd, int_tuples, int_tuples),
    _op("ceil_div", lc.ceil_div, int_tuples, int_tuples),
    _op("shape_div", lc.shape_div, int_tuples, int_tuples),
    _op("evenly_divides", lc.evenly_divides, int_tuples, int_tuples),
    _op("compatible", lc.compatible, int_tuples, int_tuples),
    _op("congruent", lc.congruent, int_tuples, int_tuples),
    _op("weakly_congruent", lc.weakly_congruent, int_tuples, int_tuples),
    _op("product_each", lc.product_each, int_tuples),
    _op("size/cosize/rank/depth", lambda L: (lc.size(L), lc.cosize(L), lc.rank(L), lc.depth(L)), layoutish),
    _op("Swizzle", Swizzle, ints, ints, ints),
    _op("make_swizzle", lc.make_swizzle, st.integers(-4, 1 << 12), st.integers(-4, 1 << 12)),
    _op("ComposedLayout", ComposedLayout, st.one_of(swizzles(), any_layouts), ints, any_layouts),
]


def check_result(result):
    """A Layout result is valid (its shape and stride pass the constructor) and round-trips through the notation."""
    if isinstance(result, Layout):
        assert Layout(result.shape, result.stride) == result
        assert lc.parse(lc.to_str(result)) == result
    elif isinstance(result, ComposedLayout):
        assert Layout(result.inner.shape, result.inner.stride) == result.inner
        assert lc.parse(lc.to_str(result)) == result


@pytest.mark.parametrize("name, fn, strategies", OPS, ids=[o[0] for o in OPS])
@fuzz_op
@given(data=st.data())
def test_algebra_raises_only_layout_errors(name, fn, strategies, data):
    args = [data.draw(s) for s in strategies]
    try:
        result = fn(*args)
    except LayoutError:
        return
    if isinstance(result, list):
        for r in result:
            check_result(r)
    else:
        check_result(result)
