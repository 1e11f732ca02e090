"""CuTe notation: exact parses, printing, errors, and the round-trip law ``parse(to_str(x)) == x``."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from layoutc import ComposedLayout, Layout, LayoutError, Swizzle, _
from layoutc.notation import parse, parse_layout, parse_tiler, tiler_to_str, to_str

# -- strategies (local on purpose: layoutc/strategies.py is written in parallel) ------------------------------------


def shapes(depth: int = 3):
    """Positive int tuples nested at most ``depth`` deep; depth 3 reaches past the lexer's two-deep ITUPLE token."""
    leaf = st.integers(1, 12)
    if depth == 0:
        return leaf
    return st.one_of(leaf, st.lists(shapes(depth - 1), min_size=1, max_size=3).map(tuple))


def strides_like(shape):
    """Strides congruent to ``shape``, negative and zero included."""
    if isinstance(shape, int):
        return st.integers(-70, 70)
    return st.tuples(*(strides_like(s) for s in shape))


@st.composite
def layouts(draw, depth: int = 3):
    shape = draw(shapes(depth))
    return Layout(shape, draw(strides_like(shape)))


@st.composite
def swizzles(draw):
    bits = draw(st.integers(0, 4))
    shift = draw(st.integers(bits, 8)) * draw(st.sampled_from([1, -1]))
    return Swizzle(bits, draw(st.integers(0, 6)), shift)


composed_layouts = st.builds(ComposedLayout, st.one_of(swizzles(), layouts(depth=2)), st.integers(-4096, 4096),
                             layouts())

tiler_leaves = st.one_of(layouts(depth=2), st.integers(1, 16), st.just(_))
tilers = st.recursive(tiler_leaves, lambda inner: st.lists(inner, min_size=1, max_size=4).map(tuple), max_leaves=8)

anything = st.one_of(layouts(), swizzles(), composed_layouts, tilers)


def cute_style(text: str, data) -> str:
    """``text`` as CuTe might print it: every integer may carry the static marker ``_`` and whitespace may separate
    any two tokens (``(8,64):(64,1)`` → ``( _8,64 ) :(_64 , 1)``)."""
    out = []
    for token in re.findall(r"-?[0-9]+|smem_ptr\[[0-9]+b\]\(unset\)|Sw|[^\s]", text):
        if re.fullmatch(r"-?[0-9]+", token) and data.draw(st.booleans()):
            token = "_" + token
        out.append(token)
        out.append(data.draw(st.sampled_from(["", "", " ", "  ", "\t", "\n"])))
    return "".join(out)


# -- exact parses ---------------------------------------------------------------------------------------------------

KNOWN = [
    ("8:1", Layout(8, 1)),
    ("3:236", Layout(3, 236)),
    ("(3):(236)", Layout((3,), (236,))),
    ("((3)):((236))", Layout(((3,),), ((236,),))),
    ("((2,4),3):((1,2),8)", Layout(((2, 4), 3), ((1, 2), 8))),
    ("(2,3):(-1,-2)", Layout((2, 3), (-1, -2))),
    ("(4,2):(0,1)", Layout((4, 2), (0, 1))),
    ("((2,2),(4,(2,2))):((1,16),(2,(8,64)))", Layout(((2, 2), (4, (2, 2))), ((1, 16), (2, (8, 64))))),
    ("(((2,3),4),5):(((1,2),6),24)", Layout((((2, 3), 4), 5), (((1, 2), 6), 24))),
    ("  ( 8 , 64 )\t:\n( 64 , 1 )  ", Layout((8, 64), (64, 1))),
    ("Sw<3,4,3>", Swizzle(3, 4, 3)),
    ("Sw<0,0,0>", Swizzle(0, 0, 0)),
    ("Sw<2,1,-3>", Swizzle(2, 1, -3)),
    ("Sw < 3 , 4 , 3 >", Swizzle(3, 4, 3)),
    ("Sw<3,4,3> o 0 o (8,64):(64,1)", ComposedLayout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1)))),
    ("Sw<3,4,3> o (8,64):(64,1)", ComposedLayout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1)))),
    ("Sw<3,4,3> o smem_ptr[16b](unset) o (8,64):(64,1)", ComposedLayout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1)))),
    ("Sw<2,4,3> o 32 o ((8,2),(8,4)):((64,8),(1,512))",
     ComposedLayout(Swizzle(2, 4, 3), 32, Layout(((8, 2), (8, 4)), ((64, 8), (1, 512))))),
    ("Sw<3,4,3> o -8 o 8:1", ComposedLayout(Swizzle(3, 4, 3), -8, Layout(8, 1))),
    ("(4,2):(1,4) o 0 o 8:1", ComposedLayout(Layout((4, 2), (1, 4)), 0, Layout(8, 1))),
    ("8:2 o 8:1", ComposedLayout(Layout(8, 2), 0, Layout(8, 1))),
    ("7", 7),
    ("-7", -7),
    ("_", _),
    ("(3,8)", (3, 8)),
    ("(3)", (3,)),
    ("(4,(2,3))", (4, (2, 3))),
    ("<4,<2,3>>", (4, (2, 3))),
    ("<3:4,(2,4):(1,8)>", (Layout(3, 4), Layout((2, 4), (1, 8)))),
    ("(3:4,(2,4):(1,8))", (Layout(3, 4), Layout((2, 4), (1, 8)))),
    ("(_,3:4,5)", (_, Layout(3, 4), 5)),
    ("<_,3:4,5>", (_, Layout(3, 4), 5)),
    ("(3:4)", (Layout(3, 4),)),
    ("<_>", (_,)),
    ("((2,3),4:1)", ((2, 3), Layout(4, 1))),
    ("((2,3):(1,2),4)", (Layout((2, 3), (1, 2)), 4)),
    ("(3,(4,_))", (3, (4, _))),
    ("<(2,2):(1,8),<4,_>>", (Layout((2, 2), (1, 8)), (4, _))),
]

STATIC = [  # CuTe's static markers are optional everywhere
    ("(_8,_64):(_64,_1)", Layout((8, 64), (64, 1))),
    ("_8:_1", Layout(8, 1)),
    ("(_3):(_236)", Layout((3,), (236,))),
    ("((_2,_4),_3):((_1,_2),_8)", Layout(((2, 4), 3), ((1, 2), 8))),
    ("(_2,_3):(_-1,_-2)", Layout((2, 3), (-1, -2))),
    ("_-1", -1),
    ("_8", 8),
    ("Sw<_3,_4,_3>", Swizzle(3, 4, 3)),
    ("Sw<3,4,3> o _0 o (_8,_64):(_64,_1)", ComposedLayout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1)))),
    ("(_,_3:_4,_5)", (_, Layout(3, 4), 5)),
    ("<_4,<_2,_>>", (4, (2, _))),
]


@pytest.mark.parametrize("text, expected", KNOWN + STATIC)
def test_known_parse(text, expected):
    result = parse(text)
    assert result == expected
    assert type(result) is type(expected)


def test_underscore_is_the_singleton():
    assert parse("_") is _
    assert parse("(_,4)")[0] is _


def test_rank1_tuple_layout_is_not_the_integral_layout():
    tuple_layout, int_layout = parse("(3):(236)"), parse("3:236")
    assert tuple_layout == Layout((3,), (236,)) and int_layout == Layout(3, 236)
    assert tuple_layout != int_layout
    assert to_str(tuple_layout) == "(3):(236)" and to_str(int_layout) == "3:236"


@pytest.mark.parametrize("text", [
    "(8,64):(64,1)", "((2,4),3):((1,2),8)", "(((2,3),4),5):(((1,2),6),24)", "(3,(4,(5,6)))",
])
def test_one_token_and_rule_paths_agree(text):
    # Int tuples up to two deep are lexed as one ITUPLE token; inside a tiler with '_' they go through the rules.
    direct = parse(text)
    via_rules = parse(f"(_,{text})")[1]
    assert direct == via_rules


# -- printing -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("obj, text", [
    (Layout(8, 1), "8:1"),
    (Layout((3,), (236,)), "(3):(236)"),
    (Layout(((2, 4), 3), ((1, 2), 8)), "((2,4),3):((1,2),8)"),
    (Layout((2, 3), (-1, -2)), "(2,3):(-1,-2)"),
    (Swizzle(3, 4, 3), "Sw<3,4,3>"),
    (ComposedLayout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1))), "Sw<3,4,3> o 0 o (8,64):(64,1)"),
    (ComposedLayout(Layout((4, 2), (1, 4)), 5, Layout(8, 1)), "(4,2):(1,4) o 5 o 8:1"),
    ((Layout(3, 4), _, 5), "(3:4,_,5)"),
    ((4, (2, 3)), "(4,(2,3))"),
    (_, "_"),
    (7, "7"),
])
def test_to_str(obj, text):
    assert to_str(obj) == text
    assert parse(text) == obj


@pytest.mark.parametrize("tiler, text", [
    ((Layout(3, 4), Layout((2, 4), (1, 8))), "<3:4,(2,4):(1,8)>"),
    ((4, (2, 3)), "<4,<2,3>>"),
    ((_, Layout(3, 4), 5), "<_,3:4,5>"),
    (((Layout(2, 1), _), 4), "<<2:1,_>,4>"),
    (Layout((2, 4), (1, 8)), "(2,4):(1,8)"),
    (8, "8"),
    (_, "_"),
])
def test_tiler_to_str(tiler, text):
    assert tiler_to_str(tiler) == text
    assert parse_tiler(text) == tiler


@pytest.mark.parametrize("bad", [(), Swizzle(3, 4, 3), (4, Swizzle(3, 4, 3)), "8:1", 2.0])
def test_tiler_to_str_rejects_non_tilers(bad):
    with pytest.raises(LayoutError, match="tiler_to_str"):
        tiler_to_str(bad)


# -- parse_layout / parse_tiler -------------------------------------------------------------------------------------

def test_parse_layout():
    assert parse_layout("(8,64):(64,1)") == Layout((8, 64), (64, 1))
    assert parse_layout("Sw<3,4,3> o 0 o 8:1") == ComposedLayout(Swizzle(3, 4, 3), 0, Layout(8, 1))


@pytest.mark.parametrize("text, kind", [
    ("(3,8)", "the tuple (3,8)"), ("8", "the integer 8"), ("_", "the underscore _"),
    ("Sw<3,4,3>", "the swizzle Sw<3,4,3>"), ("<3:4,_>", "the tuple (3:4,_)"),
])
def test_parse_layout_rejects_non_layouts(text, kind):
    with pytest.raises(LayoutError, match="expected a layout") as info:
        parse_layout(text)
    assert kind in str(info.value)


@pytest.mark.parametrize("text, expected", [
    ("<3:4,(2,4):(1,8)>", (Layout(3, 4), Layout((2, 4), (1, 8)))),
    ("(_,3:4,5)", (_, Layout(3, 4), 5)),
    ("(3,8)", (3, 8)),
    ("8:1", Layout(8, 1)),
    ("4", 4),
    ("_", _),
])
def test_parse_tiler(text, expected):
    assert parse_tiler(text) == expected


@pytest.mark.parametrize("text", ["Sw<3,4,3>", "Sw<3,4,3> o 0 o 8:1"])
def test_parse_tiler_rejects_swizzles(text):
    with pytest.raises(LayoutError, match="expected a tiler"):
        parse_tiler(text)


# -- errors ---------------------------------------------------------------------------------------------------------

SYNTAX_ERRORS = [  # (text, column, the message's "expected ... but found ..." part)
    ("", 1, "expected an integer, '_', '(', '<' or 'Sw' but found end of text"),
    ("   ", 4, "expected an integer, '_', '(', '<' or 'Sw' but found end of text"),
    ("(2,3):(1:2)", 9, "expected ',' or ')' but found ':'"),
    ("(2,3", 5, "expected ',', ')' or ':' but found end of text"),
    ("(2,3)x", 6, "expected ':' or end of text but found 'x'"),
    ("(2,3):(1,2) junk", 13, "expected 'o' or end of text but found 'j'"),
    ("(2,3):(1,2)(4,5)", 12, "expected 'o' or end of text but found '(4,5)'"),
    ("3:4:5", 4, "expected 'o' or end of text but found ':'"),
    ("Sw<1,2>", 7, "expected ',' but found '>'"),
    ("Sw<3,4,3", 9, "expected '>' but found end of text"),
    ("Sw<3,4,3> o", 12, "expected an integer, '(' or 'smem_ptr[..b](unset)' but found end of text"),
    ("Sw<3,4,3> o 0 o Sw<3,4,3>", 17, "expected an integer or '(' but found 'Sw'"),
    ("Sw<3,4,3> o 0", 14, "expected ':' or 'o' but found end of text"),
    ("(2,_):(1,2)", 6, "expected end of text but found ':'"),
    ("(2,3):(1,_)", 10, "expected an integer or '(' but found '_'"),
    ("()", 2, "expected an integer, '_', '(' or '<' but found ')'"),
    ("<2,3)", 5, "expected ',', '>' or ':' but found ')'"),
    ("<>", 2, "expected an integer, '_', '(' or '<' but found '>'"),
    ("(2,3):", 7, "expected an integer or '(' but found end of text"),
    ("_ 8", 3, "expected end of text but found '8'"),
    ("8:1 o 0 o", 10, "expected an integer or '(' but found end of text"),
    ("smem_ptr[16b](unset)", 1, "found 'smem_ptr[16b](unset)'"),
    ("Sw<3,4,3> o smem_ptr[16b](0x10) o 8:1", 13, "found 's'"),
    ("2.5", 2, "expected ':' or end of text but found '.'"),
    ("--1", 1, "but found '-'"),
    ("(2,,3)", 4, "expected an integer, '_', '(' or '<' but found ','"),
]


@pytest.mark.parametrize("text, column, expectation", SYNTAX_ERRORS)
def test_syntax_errors(text, column, expectation):
    with pytest.raises(LayoutError) as info:
        parse(text)
    err = info.value
    assert err.op == "parse" and err.operands == (text,)
    message = str(err)
    assert f"column {column}: " in message
    assert expectation in message
    # The message ends with the text and a caret under the column.
    assert message.endswith("\n    " + text + "\n    " + " " * (column - 1) + "^")


def test_caret_sits_under_the_column():
    with pytest.raises(LayoutError) as info:
        parse("(2,3):(1:2)")
    assert str(info.value).endswith("    (2,3):(1:2)\n            ^")
    assert str(info.value).startswith("parse('(2,3):(1:2)'): column 9: expected ',' or ')' but found ':'")


def test_multiline_text_names_the_line():
    with pytest.raises(LayoutError, match=r"line 2, column 3: expected ',' or '\)' but found ':'") as info:
        parse("(2,3):\n(1:2)")
    assert str(info.value).endswith("\n    (1:2)\n      ^")


CONSTRUCTOR_ERRORS = [  # (text, column of the offending layout or swizzle, part of the constructor's message)
    ("Sw<3,4,2>", 1, "|S| = 2 must be >= B = 3"),
    ("Sw<3,-1,3>", 1, "MBase must be positive"),
    ("(2,3):(1)", 1, "not congruent"),
    ("((2,3),4):((1,2),(3,4))", 1, "not congruent"),
    ("(8,64:(64,1))", 4, "not congruent"),
    ("0:1", 1, "shape 0 is not positive"),
    ("(4,-2):(1,4)", 1, "shape -2 is not positive"),
    ("Sw<3,4,3> o 0 o (8, 0):(1,8)", 17, "shape 0 is not positive"),
    ("  (2, 3):(1)", 3, "not congruent"),
    ("<4:1,(2,3):(1)>", 6, "not congruent"),
]


@pytest.mark.parametrize("text, column, detail", CONSTRUCTOR_ERRORS)
def test_constructor_errors_name_the_text_and_column(text, column, detail):
    with pytest.raises(LayoutError) as info:
        parse(text)
    message = str(info.value)
    assert info.value.op == "parse" and info.value.operands == (text,)
    assert message.startswith(f"parse({text!r}): column {column}: ")
    assert detail in message
    assert message.endswith("\n    " + text + "\n    " + " " * (column - 1) + "^")


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        parse("(2,3):(1)")


@pytest.mark.parametrize("bad", [None, b"8:1", 8, Layout(8, 1)])
def test_non_str_is_a_type_error(bad):
    with pytest.raises(TypeError):
        parse(bad)


def test_deep_nesting():
    deep = "(" * 40 + "2" + ")" * 40
    layout = parse(f"{deep}:{deep}")
    assert layout.shape == layout.stride and layout.depth == 40
    absurd = "(" * 20000 + "2" + ")" * 20000
    with pytest.raises(LayoutError):
        parse(f"{absurd}:{absurd}")


@given(st.text(alphabet="()<>,:_-0123456789Swo []smem_ptr16b(unset)x\n", max_size=30))
def test_arbitrary_text_parses_or_raises_layout_error(text):
    try:
        parse(text)
    except LayoutError as err:
        assert err.op == "parse" and err.operands == (text,)
        assert re.search(r"column \d+: ", str(err))


@given(st.text(max_size=20))
def test_any_unicode_text_parses_or_raises_layout_error(text):
    try:
        parse(text)
    except LayoutError:
        pass


# -- the round-trip law ---------------------------------------------------------------------------------------------

@given(layouts())
def test_layout_round_trip(layout):
    text = to_str(layout)
    assert parse(text) == layout
    assert parse_layout(text) == layout
    assert "_" not in text


@given(swizzles())
def test_swizzle_round_trip(sw):
    assert parse(to_str(sw)) == sw


@given(composed_layouts)
def test_composed_layout_round_trip(cl):
    assert parse(to_str(cl)) == cl
    assert parse_layout(to_str(cl)) == cl


@given(composed_layouts)
def test_smem_flag_offset_is_zero(cl):
    text = f"{to_str(cl.outer)} o smem_ptr[16b](unset) o {to_str(cl.inner)}"
    # parse builds what the text shows (CuTe's make_composed_layout), an identity swizzle included
    assert parse(text) == ComposedLayout(cl.outer, 0, cl.inner)


@given(tilers)
def test_tiler_round_trip(tiler):
    assert parse(to_str(tiler)) == tiler
    assert parse_tiler(to_str(tiler)) == tiler
    assert parse_tiler(tiler_to_str(tiler)) == tiler


@given(anything, st.data())
def test_static_markers_and_whitespace_are_optional(obj, data):
    assert parse(cute_style(to_str(obj), data)) == obj
