"""CuTe notation: printing (``to_str``, ``tiler_to_str``) and parsing (``parse``, ``parse_layout``, ``parse_tiler``).

The grammar is ``layoutc/cute.lark`` (LALR(1)); the parser is built on first use and kept for the process.
Static markers are optional on input (``(_8,_64):(_64,_1)`` is ``(8,64):(64,1)``) and never printed.
Law: ``parse(to_str(x)) == x`` and ``parse(tiler_to_str(t)) == t`` for every Layout, Swizzle, ComposedLayout and tiler.
"""
from __future__ import annotations

import re
import sys
from functools import lru_cache

from .errors import LayoutError
from .int_tuple import MAX_DEPTH, is_tuple


def to_str(obj) -> str:
    """CuTe's printed form without static underscores: ``(4,(2,3)):(2,(1,8))``, ``8:1``,
    ``Sw<3,4,3> o 0 o (8,64):(64,1)``; a tiler tuple prints as ``(3:4,_,5)``. Post: ``parse(to_str(x)) == x`` for every
    x that ``parse`` accepts. Works at any nesting depth (no recursion) and for integers of any size."""
    return _print(obj, "(", ")")


def tiler_to_str(tiler) -> str:
    """A tiler in the docs' notation: ``(Layout(3,4), Layout((2,4),(1,8)))`` → ``<3:4,(2,4):(1,8)>``;
    nested tuples print as ``<...>`` too (``(4,(2,3))`` → ``<4,<2,3>>``), ints and ``_`` as themselves.

    Pre: ``tiler`` is an int, ``_``, a Layout or a non-empty tuple of those (nested). Post: ``parse(tiler_to_str(t)) == t``.
    """
    from .layout import Layout, Underscore
    stack = [tiler]
    while stack:
        t = stack.pop()
        if type(t) is tuple:
            if not t:
                raise LayoutError("tiler_to_str", (tiler,), "an empty tuple is not a tiler")
            stack.extend(t)
        elif not (isinstance(t, (Layout, Underscore)) or type(t) is int):
            raise LayoutError("tiler_to_str", (tiler,),
                              "a tiler element must be an int, '_', a Layout or a tuple of those")
    return _print(tiler, "<", ">")


class _Text(str):
    """A piece of output text on the printing stack (as opposed to a ``str`` object to be printed, shown by repr)."""


_COMMA, _COLON, _O, _LPAR, _RPAR = _Text(","), _Text(":"), _Text(" o "), _Text("("), _Text(")")


def _print(obj, open_bracket: str, close_bracket: str) -> str:
    """Print with an explicit stack, so that nesting depth is bounded by memory, not by Python's recursion limit.
    Tuples that are not a layout's shape or stride use ``open_bracket``/``close_bracket`` (``<>`` for tilers)."""
    from .basis import ScaledBasis
    from .layout import Layout, Underscore
    from .swizzle import ComposedLayout, Swizzle
    opening, closing = _Text(open_bracket), _Text(close_bracket)
    out = []
    stack = [(obj, opening, closing)]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            out.append(item)
            continue
        x, lb, rb = item
        if type(x) is int:
            out.append(_decimal(x))
        elif type(x) is tuple:
            stack.append(rb)
            for i in range(len(x) - 1, -1, -1):
                stack.append((x[i], lb, rb))
                if i:
                    stack.append(_COMMA)
            out.append(lb)
        elif isinstance(x, Layout):
            # shape and stride are int tuples: always parentheses
            stack.append((x.stride, _LPAR, _RPAR))
            stack.append(_COLON)
            stack.append((x.shape, _LPAR, _RPAR))
        elif isinstance(x, ComposedLayout):
            stack.append((x.inner, _LPAR, _RPAR))
            stack.append(_O)
            stack.append((x.offset, _LPAR, _RPAR))
            stack.append(_O)
            stack.append((x.outer, _LPAR, _RPAR))
        elif isinstance(x, (Swizzle, ScaledBasis)):
            out.append(str(x))
        elif isinstance(x, Underscore):
            out.append("_")
        else:
            out.append(repr(x))
    return "".join(out)


def _decimal(n: int) -> str:
    """``str(n)``, also past Python's limit on int-to-str conversion (4300 digits by default), which guards str()
    against quadratic time; splitting at a power of ten keeps every str() call under the limit."""
    try:
        return str(n)
    except ValueError:
        pass
    if n < 0:
        return "-" + _decimal(-n)
    half = len(bin(n)) * 3 // 20  # about half the decimal digits of n (log10(2) ≈ 0.3)
    high, low = divmod(n, 10 ** half)
    return _decimal(high) + _decimal(low).zfill(half)


# -- parsing -------------------------------------------------------------------------------------------------------

class _Located(Exception):
    """A constructor's LayoutError raised inside a parser callback, with the text position it belongs to.

    The callbacks cannot see the text, so ``parse`` turns this into a LayoutError that shows it.
    """

    def __init__(self, pos: int, error: LayoutError, find_layout_start: bool = False):
        super().__init__(pos, error)
        self.pos = pos
        self.error = error
        self.find_layout_start = find_layout_start


def _int(token) -> int:
    # The regex guarantees at most one leading '_' (CuTe's static marker) followed by a valid int literal.
    return int(token[1:] if token[0] == "_" else token)


_TUPLE_ITEM = re.compile(r"[()]|-?[0-9]+")


def _tuple_literal(token: str):
    """The value of an ITUPLE token: ``(_8,(2, 4))`` → ``(8, (2, 4))``.

    The token's regex already guarantees a well-formed int tuple, so this only has to build it; commas and
    whitespace carry no information once the parentheses are known, and '_' is only ever a static marker.
    """
    stack = [[]]
    for item in _TUPLE_ITEM.findall(token.replace("_", "")):
        if item == "(":
            stack.append([])
        elif item == ")":
            done = tuple(stack.pop())
            stack[-1].append(done)
        else:
            stack[-1].append(int(item))
    return stack[0][0]


def _make_builder():
    """The callbacks lark runs at each reduction (inline, so no parse tree is ever built)."""
    from lark import Transformer

    from .basis import ScaledBasis
    from .layout import Layout, _
    from .swizzle import ComposedLayout, Swizzle

    class Build(Transformer):
        def integer(self, c):
            return _int(c[0])

        def basis(self, c):
            # CuTe prints v·E<n0,n1,...> as v@...@n1@n0: the mode path read right to left
            value, *path = c[0].split("@")
            return ScaledBasis(_int(value), tuple(int(m) for m in reversed(path)))

        def underscore(self, c):
            return _

        def list_one(self, c):
            return [c[0]]

        def list_more(self, c):
            # Left recursion hands back the list built so far; appending keeps a long tuple linear, not quadratic.
            c[0].append(c[1])
            return c[0]

        def ituple(self, c):
            return _tuple_literal(c[0])

        def group(self, c):
            return tuple(c[0])

        def layout(self, c):
            shape, colon, stride = c
            try:
                return Layout(shape, stride)
            except LayoutError as e:
                raise _Located(colon.start_pos, e, find_layout_start=True) from None

        def swizzle(self, c):
            sw, b, m, s = c
            try:
                return Swizzle(_int(b), _int(m), _int(s))
            except LayoutError as e:
                raise _Located(sw.start_pos, e) from None

        def offset_int(self, c):
            return _int(c[0])

        def offset_smem(self, c):
            return 0

        def composed(self, c):
            return ComposedLayout(c[0], c[1], c[2])

        def composed_at_zero(self, c):
            return ComposedLayout(c[0], 0, c[1])

    return Build()


_GRAMMAR = None
_PARSER = None      # the fast parser: inline callbacks build the values directly
_DIAGNOSER = None   # a plain tree-building parser over the same grammar, only used to explain syntax errors


def _grammar() -> str:
    global _GRAMMAR
    if _GRAMMAR is None:
        from importlib.resources import files
        _GRAMMAR = files(__package__).joinpath("cute.lark").read_text(encoding="utf-8")
    return _GRAMMAR


def _parser():
    global _PARSER
    if _PARSER is None:
        from lark import Lark
        # cache=True: the analysed tables are kept in a temp file keyed by grammar and lark version, so a new process
        # does not rebuild them
        _PARSER = Lark(_grammar(), parser="lalr", lexer="basic", transformer=_make_builder(),
                       maybe_placeholders=False, cache=True)
    return _PARSER


@lru_cache(maxsize=4096)
def _parse_cached(text: str):
    # Every parse result is immutable (ints, tuples, Layout, Swizzle, ComposedLayout), so sharing one is safe, and
    # code that names the same layouts over and over (tests, the compiler's tables) skips lark's per-token work.
    # Failures are not cached: lru_cache stores only returned values.
    _check_limits(text)
    return _parser().parse(text)


_BRACKET = re.compile(r"[()<>]")
_DIGITS = re.compile(r"[0-9]+")


def _check_limits(text: str) -> None:
    """Refuse, at its column, what the grammar would accept but layoutc cannot hold: tuples nested deeper than
    MAX_DEPTH (every recursive algorithm of the algebra stays far from Python's recursion limit below it) and
    integer literals longer than Python's limit on text-to-int conversion (``sys.get_int_max_str_digits()``, 4300 by
    default)."""
    if text.count("(") + text.count("<") > MAX_DEPTH:
        level = 0
        for m in _BRACKET.finditer(text):
            if m.group() in "(<":
                level += 1
                if level > MAX_DEPTH:
                    place, caret = _where(text, m.start())
                    raise LayoutError("parse", (text,), f"{place}: tuples nested more than {MAX_DEPTH} levels deep "
                                      f"(layoutc's nesting limit){caret}")
            elif level > 0:
                level -= 1
    limit = sys.get_int_max_str_digits()
    if limit and len(text) > limit:
        for m in _DIGITS.finditer(text):
            if m.end() - m.start() > limit:
                place, caret = _where(text, m.start())
                raise LayoutError("parse", (text,), f"{place}: an integer of {m.end() - m.start()} digits exceeds "
                                  f"Python's limit of {limit} digits for reading an int{caret}")


def _diagnoser():
    global _DIAGNOSER
    if _DIAGNOSER is None:
        from lark import Lark
        _DIAGNOSER = Lark(_grammar(), parser="lalr", lexer="contextual", maybe_placeholders=False, cache=True)
    return _DIAGNOSER


# Human names for the grammar's terminals, in the order an expectation lists them.
_TERMINAL_WORDS = {
    "COMMA": "','",
    "RPAR": "')'",
    "MORETHAN": "'>'",
    "COLON": "':'",
    "INT": "an integer",
    "BASIS": "a basis stride like 1@0",
    "UNDERSCORE": "'_'",
    "LPAR": "'('",
    "LESSTHAN": "'<'",
    "SW": "'Sw'",
    "O": "'o'",
    "SMEM_PTR": "'smem_ptr[..b](unset)'",
    "$END": "end of text",
}
_TERMINAL_ORDER = {name: i for i, name in enumerate(_TERMINAL_WORDS)}


def _words(names) -> str:
    # ITUPLE (a whole shallow int tuple) is only ever expected together with '(', and would only repeat it.
    names = set(names) - {"ITUPLE"}
    if "INT" in names:
        # a basis stride (1@0) starts with an integer: "an integer" already says where it may come
        names.discard("BASIS")
    names = sorted(names, key=lambda n: (_TERMINAL_ORDER.get(n, len(_TERMINAL_ORDER)), n))
    words = [_TERMINAL_WORDS.get(n, n) for n in names]
    if not words:
        return "nothing"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


_SHOWN = 60  # characters shown on each side of the column when a line is too long to echo whole


def _where(text: str, pos: int) -> tuple[str, str]:
    """('column C' or 'line L, column C', the offending line with a caret under position ``pos``). Each side of the
    column is cut to ``_SHOWN`` characters, marked with ``...``, so a huge text gives a readable message."""
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    line = text[line_start:] if line_end < 0 else text[line_start:line_end]
    column = pos - line_start + 1
    place = f"column {column}" if "\n" not in text else f"line {text.count(chr(10), 0, pos) + 1}, column {column}"
    before = line[:column - 1]
    after = line[column - 1:]
    if len(before) > _SHOWN:
        before = "..." + before[-_SHOWN:]
    if len(after) > _SHOWN:
        after = after[:_SHOWN] + "..."
    # Tabs are copied into the caret line so that the caret stays under the character on any tab width.
    pad = "".join(ch if ch == "\t" else " " for ch in before)
    return place, f"\n    {before}{after}\n    {pad}^"


def _expected_at(text: str, pos: int) -> set:
    """The terminals that may come at ``pos``, found by replaying the (valid) prefix in the diagnosing parser.

    The fast parser's own error sets are unreliable: LALR merges states, so its lookahead sets are unions over
    contexts, and its contextual lexer reports lexable-but-unexpected tokens without ``$END``. The replay has no
    callbacks, so it cannot raise the constructor errors that the fast parser's callbacks would.
    """
    try:
        interactive = _diagnoser().parse_interactive(text[:pos])
        interactive.exhaust_lexer()
        return set(interactive.accepts())
    except Exception:  # a diagnosis must never replace the error it explains
        return set()


def _syntax_error(text: str, err) -> LayoutError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken
    if isinstance(err, UnexpectedToken):
        token = err.token
        if token.type == "$END":
            pos, found = len(text), "end of text"
        else:
            pos, found = token.start_pos, repr(str(token))
    elif isinstance(err, UnexpectedCharacters):
        pos, found = err.pos_in_stream, repr(err.char)
    elif isinstance(err, UnexpectedEOF):
        pos, found = len(text), "end of text"
    else:
        pos, found = len(text), "something unparsable"
    place, caret = _where(text, pos)
    expected = _words(_expected_at(text, pos))
    return LayoutError("parse", (text,), f"{place}: expected {expected} but found {found}{caret}")


def _layout_start(text: str, colon: int) -> int:
    """Where the layout whose ':' is at ``colon`` starts: the matching '(' of its shape, or its integer's first char."""
    i = colon - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    if i < 0:
        return colon
    if text[i] == ")":
        depth = 0
        while i >= 0:
            if text[i] == ")":
                depth += 1
            elif text[i] == "(":
                depth -= 1
                if depth == 0:
                    return i
            i -= 1
        return colon
    while i > 0 and text[i - 1] in "_-0123456789":
        i -= 1
    return i


def parse(text: str):
    """Parse CuTe notation into the object it denotes.

    ``((2,4),3):((1,2),8)`` → ``Layout(((2,4),3), ((1,2),8))``; ``(3):(236)`` → ``Layout((3,), (236,))`` (rank-1 tuple
    layout) while ``3:236`` → ``Layout(3, 236)``; ``Sw<3,4,3>`` → ``Swizzle(3,4,3)``;
    ``Sw<3,4,3> o 0 o (8,64):(64,1)``, ``Sw<3,4,3> o (8,64):(64,1)`` and
    ``Sw<3,4,3> o smem_ptr[16b](unset) o (8,64):(64,1)`` and CuTe DSL's spelling ``S<3,4,3> o 0 o (8,64):(64,1)`` →
    ``ComposedLayout(Swizzle(3,4,3), 0, Layout((8,64),(64,1)))``; basis strides as CuTe prints them:
    ``(4,8):(1@0,1@1)`` → the identity layout (``1@1@0`` is ``E<0,1>``), a lone ``3@1`` → ``ScaledBasis(3, (1,))``;
    ``<3:4,(2,4):(1,8)>`` and ``(3:4,(2,4):(1,8))`` → ``(Layout(3,4), Layout((2,4),(1,8)))``; ``(3,8)`` → ``(3, 8)``;
    ``7`` → ``7``; ``_`` → ``layoutc._``. CuTe's static markers are optional: ``(_8,_64):(_64,_1)``, ``_-1``.

    Post: ``parse(to_str(x)) == x``. Any text that is not CuTe notation, or that names an invalid layout or swizzle,
    raises LayoutError with op ``parse``, e.g. ``parse('(2,3):(1:2)'): column 9: expected ',' or ')' but found ':'``
    followed by the text and a caret under the column. A non-str argument raises TypeError.
    Results are cached by text (they are immutable), so a repeated parse costs a dictionary lookup.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse expects a str of CuTe notation, not {type(text).__name__}")
    from lark.exceptions import LarkError, UnexpectedInput
    try:
        return _parse_cached(text)
    except _Located as located:
        pos = _layout_start(text, located.pos) if located.find_layout_start else located.pos
        place, caret = _where(text, pos)
        raise LayoutError("parse", (text,), f"{place}: {located.error}{caret}") from located.error
    except UnexpectedInput as err:
        raise _syntax_error(text, err) from None
    except LarkError as err:  # defensive: no lark exception may leave this module
        raise LayoutError("parse", (text,), f"unparsable: {err}") from None
    except RecursionError:
        # Validation and printing recurse over the tuple tree; absurd nesting must still fail as a LayoutError.
        raise LayoutError("parse", (text,), "tuples are nested too deeply") from None


def parse_layout(text: str):
    """Parse a layout: ``(8,64):(64,1)`` → ``Layout((8,64),(64,1))``, ``Sw<3,4,3> o 0 o 8:1`` → a ComposedLayout.

    Post: the result is a Layout or a ComposedLayout and ``parse_layout(to_str(L)) == L``; any other notation
    (an int tuple like ``(3,8)``, a tiler, a bare Swizzle, an int, ``_``) raises LayoutError.
    """
    from .layout import Layout
    from .swizzle import ComposedLayout
    result = parse(text)
    if isinstance(result, (Layout, ComposedLayout)):
        return result
    raise LayoutError("parse", (text,), f"expected a layout shape:stride (or a composed layout) but found "
                                        f"{_kind(result)} {to_str(result)}")


def parse_tiler(text: str):
    """Parse a tiler: ``<3:4,(2,4):(1,8)>`` or ``(3:4,(2,4):(1,8))`` → ``(Layout(3,4), Layout((2,4),(1,8)))``,
    ``(_,3:4,5)`` → ``(_, Layout(3,4), 5)``, ``(3,8)`` → ``(3, 8)``, ``8:1`` → ``Layout(8,1)``, ``4`` → ``4``.

    Post: the result is a tuple, an int, a Layout or ``_`` and ``parse_tiler(tiler_to_str(t)) == t``; a Swizzle or a
    ComposedLayout raises LayoutError.
    """
    from .layout import Layout, Underscore
    result = parse(text)
    if is_tuple(result) or type(result) is int or isinstance(result, (Layout, Underscore)):
        return result
    raise LayoutError("parse", (text,), f"expected a tiler (a layout, an int, '_' or a tuple of those) but found "
                                        f"{_kind(result)} {to_str(result)}")


def _kind(obj) -> str:
    from .basis import ScaledBasis
    from .layout import Layout, Underscore
    from .swizzle import ComposedLayout, Swizzle
    if isinstance(obj, ScaledBasis):
        return "the basis stride"
    if isinstance(obj, ComposedLayout):
        return "the composed layout"
    if isinstance(obj, Swizzle):
        return "the swizzle"
    if isinstance(obj, Layout):
        return "the layout"
    if isinstance(obj, Underscore):
        return "the underscore"
    if is_tuple(obj):
        return "the tuple"
    return "the integer"
