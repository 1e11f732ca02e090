"""The tile IR's text form (spec/tile-ir.md §3): parser, printer and structural equality.

    module = parse_module(text, file="kernels/scale.tile")
    text2 = print_module(module)            # canonical text: print_module(parse_module(text2)) == text2
    assert structurally_equal(parse_module(text2), module)

The grammar is ``ptxgen/ir/tile_ir.lark`` (LALR(1), one basic lexer; its header documents the two lookahead
rules: an attribute dict is never empty, so ``{}`` is always an empty region; ``%r0, %r1 =`` is one token). The
parser knows no op: every op becomes a generic ``Op(name, operands, attrs, results, regions, loc)``.

Attribute values:

============================  ===================================================================
text                          Python value
============================  ===================================================================
``42``, ``-3``                ``int``
``0.0``, ``-1.5e-3``, ``inf`` ``float`` (``-inf``, ``nan`` too); printed with ``repr`` so they round trip
``"s"``                       ``str`` (JSON escapes)
``true`` / ``false``          ``bool``
``lt``                        ``Word("lt")``
``(a, b)``                    ``TupleAttr((a, b))`` in op attributes; a plain ``tuple`` in kernel attributes
``[...]``                     ``layoutc.parse(...)``: a Layout, ComposedLayout, int tuple (plain tuple), int, ...
============================  ===================================================================

Brackets always mean CuTe notation and parentheses a tuple attribute; they print apart: a plain tuple that is CuTe
(an int tuple, a tuple of layouts) prints in brackets ``[(64,64)]``, a ``TupleAttr`` (or a plain tuple holding
anything CuTe notation cannot write) in parentheses ``(64, 64)``. A bracketed int ``[1024]`` is the int 1024,
the same value as ``1024``, and prints as ``1024``. Kernel attributes are host-side launch parameters: their
tuples are plain tuples and print in parentheses (``block = (256, 1, 1)``), and they may hold host expressions
(``ptxgen.ir.hostexpr``); ``grid``'s entries are always host expressions (ints become ``Const``).

Names: value names are defined once per kernel (a second definition is an error even in a sibling region); a
region sees the values of the enclosing scopes defined before its op (not the op's own results), and the values
defined inside a region are not visible after it.

Errors are ``IRSyntaxError`` (a ValueError) with ``.loc`` and the message
``file:line:col: expected X but found Y`` followed by the source line and a caret. Nesting is bounded
(``ptxgen.ir.core.MAX_NESTING``): a parenthesis or region deeper than 64 levels is ``nesting deeper than 64 levels``
at that parenthesis or region, so no input makes the reader (or anything after it) recurse without bound.
"""
from __future__ import annotations

import functools
import json
import numbers
import re
from importlib import resources

import layoutc as lc
from layoutc.notation import to_str

from ..gc_pause import gc_paused
from .core import MAX_NESTING, Kernel, Location, Module, Op, Region, Value, too_deep
from .hostexpr import Add, CDiv, Const, Dim, HostExpr, Min, Mul, ParamRef, TupleAttr, Word
from .names import Definition, PartitionError, Spelled, canonical_arguments, partition_value
from .suggest import did_you_mean
from .types import (SCALARS, BarrierType, FragmentType, GlobalTensorType, GlobalViewType, PipelineType, ScalarType,
                    TensorMapType, TensorType)

__all__ = [
    "IRSyntaxError", "parse_module", "print_module", "parse_type", "print_type", "print_kernel",
    "structurally_equal", "first_difference", "Word", "TupleAttr", "attribute_text", "value_text",
]


class IRSyntaxError(ValueError):
    """A syntax or scoping error in IR text: ``str(e)`` is ``file:line:col: message`` then the source line and a
    caret under the column. ``e.loc`` is the Location, ``e.message`` the message alone."""

    def __init__(self, loc: Location, message: str, source_line: str | None = None):
        self.loc = loc
        self.message = message
        self.source_line = source_line
        text = f"{loc}: {message}"
        if source_line is not None:
            pad = "".join(ch if ch == "\t" else " " for ch in source_line[:max(loc.column - 1, 0)])
            text += f"\n{source_line}\n{pad}^"
        super().__init__(text)


# ----------------------------------------------------------------------------------------------------------------
# The parser (built once)

@functools.lru_cache(maxsize=None)
def _grammar() -> str:
    return resources.files("ptxgen.ir").joinpath("tile_ir.lark").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark
    # cache=True: lark keeps the analysed LALR tables in a temp file keyed by the grammar and its own version, so a
    # new process's first parse does not rebuild them (the cold-compile budget; docs/gpu-runs/notes-from-code.md)
    return Lark(_grammar(), parser="lalr", lexer="basic", start=["start", "type_start"],
                propagate_positions=True, maybe_placeholders=False, cache=True)


_TERMINAL_WORDS = {
    "RESULTS": "results ('%r =')",
    "OPNAME": "an op name (dialect.op)",
    "VALUE": "a value name (%x)",
    "KERNEL": "'kernel'",
    "KERNEL_NAME": "a kernel name (@name)",
    "NAME_REF": "a name (#name)",
    "IDENT": "an identifier",
    "INT": "an integer",
    "FLOAT": "a float",
    "STRING": "a string",
    "BRACKET": "CuTe notation in brackets",
    "$END": "end of input",
}
_VALUE_STARTS = {"INT", "FLOAT", "STRING", "BRACKET", "IDENT", "LPAR", "NAME_REF"}
_VALUE_KEYWORDS = {"'inf'", "'-inf'", "'nan'", "'true'", "'false'"}
_ORDER = ["RESULTS", "OPNAME", "KERNEL", "NAME_REF", "KERNEL_NAME", "VALUE", "IDENT", "INT", "FLOAT", "STRING", "BRACKET"]


def _terminal_word(name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        term = _parser().get_terminal(name)
    except KeyError:
        return name
    return repr(term.pattern.value) if term.pattern.type == "str" else name


def _expected_words(names) -> str:
    """'A, B or C' for a set of terminal names; the many starts of an attribute value read 'an attribute value'."""
    names = set(names)
    words = []
    if {"INT", "FLOAT", "STRING", "BRACKET"} <= names:
        names = {n for n in names if n not in _VALUE_STARTS and _terminal_word(n) not in _VALUE_KEYWORDS}
        words.append("an attribute value")
    order = {n: i for i, n in enumerate(_ORDER)}
    for n in sorted(names, key=lambda n: (order.get(n, len(order)), n == "$END", _terminal_word(n))):
        words.append(_terminal_word(n))
    if not words:
        return "nothing"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _pos_to_line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _expected_at(text: str, pos: int, start: str, fallback) -> set:
    """The terminals that may come at ``pos``, found by replaying the valid prefix (LALR's merged states make the
    error's own expectation sets unions over contexts)."""
    try:
        interactive = _parser().parse_interactive(text[:pos], start=start)
        interactive.exhaust_lexer()
        accepts = set(interactive.accepts())
        if accepts:
            return accepts
    except Exception:  # a diagnosis must never replace the error it explains
        pass
    return set(fallback or ())


def _lark_error(reader: "_Reader", err, start: str) -> IRSyntaxError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken
    text = reader.text
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        token = err.token
        pos = token.start_pos
        shown = re.sub(r"\s+", " ", str(token))
        found = repr(shown if len(shown) <= 40 else shown[:37] + "...")
        fallback = err.expected
    elif isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
        found = repr(err.char)
        fallback = err.allowed
    else:  # end of input
        pos = len(text.rstrip())
        found = "end of input"
        fallback = getattr(err, "expected", None)
    expected = _expected_words(_expected_at(text, pos, start, fallback))
    line, column = _pos_to_line_col(text, pos)
    hint = ""
    if re.search(r"\{\s*\}\s*$", text[:pos]):
        hint = " (an empty '{}' is an empty region; an empty attribute dict is written by omitting it)"
    return reader.error(line, column, f"expected {expected} but found {found}{hint}")


# ----------------------------------------------------------------------------------------------------------------
# Tree → IR

_NAME_RE = re.compile(r"%([A-Za-z0-9_.]+)")
_LAYOUTC_COLUMN = re.compile(r"^(?:line \d+, )?column (\d+): ")


def _is_int_tuple(x) -> bool:
    if type(x) is int:
        return True
    return type(x) is tuple and len(x) > 0 and all(_is_int_tuple(e) for e in x)


# what counts for nesting in the text: parentheses outside string literals and comments, those of CuTe notation in
# brackets counted from the bracket (regions are counted by the reader, which meets them in text order)
_NESTING_MARKS = re.compile(r'"(?:[^"\\\n\r]|\\.)*"|//[^\n]*|\[[^\[\]\n\r]*\]|[()]')
_NESTING_MESSAGE = f"nesting deeper than {MAX_NESTING} levels"


def _paren_too_deep(text: str) -> int | None:
    """The offset of the first '(' of ``text`` that opens a level deeper than MAX_NESTING, or None."""
    if text.count("(") <= MAX_NESTING:
        return None
    depth = 0
    for offset, ch in enumerate(text):
        if ch == "(":
            depth += 1
            if depth > MAX_NESTING:
                return offset
        elif ch == ")":
            depth = max(depth - 1, 0)
    return None


def _too_deep(text: str) -> int | None:
    """The offset of the first '(' that opens a level deeper than MAX_NESTING (as the reader counts: a tuple in a
    tuple, a mode in a mode of CuTe notation), or None."""
    depth = 0
    for m in _NESTING_MARKS.finditer(text):
        mark = m.group()
        if mark == "(":
            depth += 1
            if depth > MAX_NESTING:
                return m.start()
        elif mark == ")":
            depth = max(depth - 1, 0)
        elif mark[0] == "[":
            inside = _paren_too_deep(mark)
            if inside is not None:
                return m.start() + inside
    return None


class _Reader:
    def __init__(self, text: str, file: str):
        self.text = text
        self.file = file
        self.lines = text.split("\n")
        self.defined = {}       # value name → Location of its definition (per kernel)
        self.scopes = [{}]      # visible values, innermost last
        self.params = {}        # the current kernel's parameters, for host expressions
        self.definitions = {}   # module-level names defined so far: name → Definition
        self.later = {}         # every module-level name of the text → Location of its definition

    # -- positions and errors ------------------------------------------------------------------------------------
    def loc(self, node) -> Location:
        line, column = self._line_col(node)
        return Location(self.file, line, column)

    @staticmethod
    def _line_col(node) -> tuple[int, int]:
        from lark import Token
        if isinstance(node, Token):
            return node.line, node.column
        return node.meta.line, node.meta.column

    def error(self, line: int, column: int, message: str) -> IRSyntaxError:
        source = self.lines[line - 1] if 1 <= line <= len(self.lines) else None
        return IRSyntaxError(Location(self.file, line, column), message, source)

    def error_at(self, node, message: str) -> IRSyntaxError:
        return self.error(*self._line_col(node), message)

    # -- scopes ----------------------------------------------------------------------------------------------------
    def declare(self, name: str, loc: Location) -> None:
        if name in self.defined:
            first = self.defined[name]
            raise self.error(loc.line, loc.column,
                             f"redefinition of %{name} (first defined at {first.line}:{first.column})")
        self.defined[name] = loc

    def bind(self, value: Value) -> None:
        self.scopes[-1][value.name] = value

    def define(self, token, type) -> Value:
        name = str(token)[1:]
        loc = self.loc(token)
        self.declare(name, loc)
        value = Value(name, type, None, loc)
        self.bind(value)
        return value

    def use(self, token) -> Value:
        name = str(token)[1:]
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.defined:
            d = self.defined[name]
            raise self.error_at(token, f"value %{name} is not visible here (it is defined at {d.line}:{d.column})")
        raise self.error_at(token, f"undefined value %{name}")

    # -- structure -------------------------------------------------------------------------------------------------
    def module(self, tree) -> Module:
        kernels, seen = [], {}
        definitions = [c for c in tree.children if c.data == "definition"]
        for d in definitions:
            self.later.setdefault(str(d.children[0])[1:], self.loc(d.children[0]))
        for child in tree.children:
            if child.data == "definition":
                self.definition(child)
                continue
            kernel = self.kernel(child)
            if kernel.name in seen:
                first = seen[kernel.name]
                raise self.error(kernel.loc.line, kernel.loc.column,
                                 f"redefinition of kernel @{kernel.name} (first defined at {first.line}:{first.column})")
            seen[kernel.name] = kernel.loc
            kernels.append(kernel)
        return Module(kernels, self.file, list(self.definitions.values()))

    # -- module-level names ----------------------------------------------------------------------------------------
    def definition(self, tree) -> None:
        token, value_tree = tree.children
        name = str(token)[1:]
        if name in self.definitions:
            first = self.definitions[name].loc
            raise self.error_at(token, f"redefinition of #{name} (first defined at {first.line}:{first.column})")
        value, spelled = self.spelled(value_tree)
        text = spelled.text if spelled is not None else _print_value(value, False)
        uses = spelled.uses if spelled is not None else ()
        self.definitions[name] = Definition(name, value, text, uses, self.loc(token))

    def lookup(self, token, name: str | None = None, shift: int = 0) -> Definition:
        """The Definition a ``#name`` refers to; IRSyntaxError at the name (``shift`` columns into ``token``) when it
        is not defined above it."""
        name = str(token)[1:] if name is None else name
        if name in self.definitions:
            return self.definitions[name]
        line, column = self._line_col(token)
        if name in self.later:
            d = self.later[name]
            raise self.error(line, column + shift, f"#{name} is used before its definition at {d.line}:{d.column} "
                                                   f"(a name is defined above its first use)")
        hint = did_you_mean(f"#{name}", [f"#{n}" for n in self.definitions])
        raise self.error(line, column + shift, f"undefined name #{name}{hint}")

    def spelled(self, tree, depth: int = 0) -> tuple:
        """(value, Spelled or None) of an op attribute value: None when it names nothing (no ``#name``, no
        partition call), else its canonical text with the names kept."""
        kind = tree.data
        if kind == "tuple":
            if depth >= MAX_NESTING:
                raise self.nesting_error(tree)
            parts = [self.spelled(c, depth + 1) for c in tree.children]
            value = TupleAttr(v for v, _ in parts)
            if all(sp is None for _, sp in parts):
                return value, None
            text = "(" + ", ".join(sp.text if sp is not None else _print_value(v, False, False)
                                   for v, sp in parts) + ")"
            return value, Spelled(text, value, _uses(sp for _, sp in parts))
        if kind == "name_ref":
            d = self.lookup(tree.children[0])
            return d.value, d.spelled
        if kind == "cute" and str(tree.children[0])[1:-1].strip().startswith("#"):
            d = self.bracket_name(tree.children[0])
            return d.value, d.spelled
        if kind == "partition":
            return self.partition(tree, depth)
        return self.literal(tree), None

    def partition(self, tree, depth: int) -> tuple:
        fn, *args = tree.children
        name = str(fn)
        values, shown, spelled = {}, {}, []
        for arg in args:
            key_token, value_tree = arg.children
            key = str(key_token)
            if key in values:
                raise self.error_at(key_token, f"duplicate argument '{key}' of {name}")
            value, sp = self.spelled(value_tree, depth + 1)
            values[key] = value
            shown[key] = sp.text if sp is not None else _print_value(value, False, False)
            spelled.append(sp)
        try:
            layout = partition_value(name, values, shown)
        except PartitionError as e:
            at = fn
            if e.argument is not None:
                key_token, value_tree = next(a.children for a in args if str(a.children[0]) == e.argument)
                at = key_token if e.at_key else value_tree
            raise self.error_at(at, e.message) from None
        text = f"{name}(" + ", ".join(f"{k} = {shown[k]}" for k in canonical_arguments(name, values)) + ")"
        return layout, Spelled(text, layout, _uses(spelled))

    def bracket_name(self, token) -> Definition:
        """``[#name]``: the bracket holds a name alone (CuTe notation has no names)."""
        content = str(token)[1:-1].strip()
        if not re.fullmatch(r"#[A-Za-z_][A-Za-z0-9_]*", content):
            raise self.error(token.line, token.column + 1, f"bad name [{content}]: brackets hold CuTe notation or "
                                                           f"one name (#name) alone")
        return self.lookup(token, content[1:], str(token).index("#"))

    def kernel(self, tree) -> Kernel:
        keyword, name_token, params_tree, *rest = tree.children
        self.defined, self.scopes = {}, [{}]
        params = self.params_of(params_tree)
        self.params = {p.name: p for p in params}
        attrs, attr_locs = {}, {}
        if rest[0].data == "kattrs":
            attrs, attr_locs = self.kernel_attrs(rest[0])
        body = Region([], self.ops(rest[-1].children))
        return Kernel(str(name_token)[1:], params, attrs, body, self.loc(keyword), attr_locs)

    def params_of(self, tree) -> list:
        values = []
        for p in tree.children:
            t, spelled = self.typed(p.children[1])
            value = self.define(p.children[0], t)
            value.spelling = spelled
            values.append(value)
        return values

    def ops(self, trees) -> list:
        return [self.op(t) for t in trees]

    def op(self, tree) -> Op:
        from lark import Token
        children = list(tree.children)
        results_token = children.pop(0) if isinstance(children[0], Token) and children[0].type == "RESULTS" else None
        name_token = children.pop(0)
        operands = [self.use(t) for t in children.pop(0).children]
        attrs, spelling, types, regions = {}, {}, None, []
        for child in children:
            if child.data == "attrs":
                attrs, spelling = self.attrs(child)
            elif child.data == "types":
                types = child
            else:
                regions.append(child)
        result_types = [self.typed(t) for t in types.children] if types is not None else []
        names = self.result_names(results_token) if results_token is not None else []
        loc = self.loc(results_token if results_token is not None else name_token)
        if len(names) != len(result_types):
            plural = "s" if len(names) != 1 else ""
            tplural = "s" if len(result_types) != 1 else ""
            raise self.error(loc.line, loc.column, f"{str(name_token)} has {len(names)} result{plural} but "
                                                   f"{len(result_types)} result type{tplural}")
        for name, nloc in names:
            self.declare(name, nloc)
        region_objects = [self.region(r) for r in regions]
        results = [Value(name, t, None, nloc, sp) for (name, nloc), (t, sp) in zip(names, result_types)]
        for r in results:
            self.bind(r)
        return Op(str(name_token), operands, attrs, results, region_objects, loc, spelling)

    def result_names(self, token) -> list:
        text = str(token)
        out = []
        for m in _NAME_RE.finditer(text):
            line = token.line + text.count("\n", 0, m.start())
            if line == token.line:
                column = token.column + m.start()
            else:
                column = m.start() - text.rfind("\n", 0, m.start())
            out.append((m.group(1), Location(self.file, line, column)))
        return out

    def region(self, tree) -> Region:
        if len(self.scopes) > MAX_NESTING:  # the base scope plus one per enclosing region
            raise self.nesting_error(tree)
        self.scopes.append({})
        try:
            children = list(tree.children)
            args = []
            if children and getattr(children[0], "data", None) == "region_args":
                args = self.params_of(children.pop(0).children[0])
            return Region(args, self.ops(children))
        finally:
            self.scopes.pop()

    # -- types -----------------------------------------------------------------------------------------------------
    def type(self, tree):
        return self.typed(tree)[0]

    def typed(self, tree) -> tuple:
        """(type, Spelled or None): the Spelled when a parameter or the bracket is a name (``pipeline<#stages>``,
        ``smem<bf16>[#stage]``), whose text is the type as the printer writes it with those names kept."""
        from lark import Token
        name_token = tree.children[0]
        name = str(name_token)
        params_tree = next((c for c in tree.children[1:] if not isinstance(c, Token)), None)
        bracket = next((c for c in tree.children[1:] if isinstance(c, Token)), None)
        params = params_tree.children if params_tree is not None else []
        if name in SCALARS:
            if params or bracket is not None:
                raise self.error_at(params_tree if params_tree is not None else bracket,
                                    f"scalar type {name} takes no parameters")
            return SCALARS[name], None
        # name → (the kinds inside <...>, what the brackets hold or None, how it is written)
        forms = {
            "gtensor": (("dtype", "int"), None, "gtensor<T, rank>"),
            "tmap": (("dtype", "int"), "layout", "tmap<T, rank>[layout]"),
            "gview": (("dtype",), "shape", "gview<T>[shape]"),
            "frag": (("dtype",), "shape", "frag<T>[shape]"),
            "smem": (("dtype",), "layout", "smem<T>[layout]"),
            "rmem": (("dtype",), "layout", "rmem<T>[layout]"),
            "gmem": (("dtype",), "layout", "gmem<T>[layout]"),
            "mbarrier": (("int",), None, "mbarrier<count>"),
            "pipeline": (("int",), None, "pipeline<stages>"),
        }
        if name not in forms:
            raise self.error_at(name_token, f"unknown type '{name}'")
        want_params, want_bracket, written = forms[name]
        if len(params) != len(want_params) or (bracket is None) != (want_bracket is None):
            raise self.error_at(name_token, f"type {name} is written {written}")
        values, texts, uses = [], [], []
        for kind, p in zip(want_params, params):
            text = str(p.children[0])
            if p.data == "tparam_ref":
                d = self.lookup(p.children[0])
                if kind != "int" or type(d.value) is not int:
                    raise self.error_at(p, f"#{d.name} = {d.text} cannot stand for the {'element type' if kind == 'dtype' else 'integer'} "
                                           f"of {name}<...>: {written}")
                values.append(d.value)
                texts.append(f"#{d.name}")
                uses.append(d)
                continue
            if kind == "dtype":
                if p.data != "tparam_name" or text not in SCALARS:
                    raise self.error_at(p, f"unknown element type '{text}' in {name}<...>")
                values.append(SCALARS[text])
            else:
                if p.data != "tparam_int":
                    raise self.error_at(p, f"expected an integer in {name}<...> but found '{text}'")
                values.append(int(text))
            texts.append(str(values[-1]))
        if want_bracket is not None:
            named = str(bracket)[1:-1].strip().startswith("#")
            if named:
                d = self.bracket_name(bracket)
                content = d.value
                texts.append(f"[#{d.name}]")
                uses.append(d)
            else:
                content = self.cute(bracket)
            if want_bracket == "shape" and not _is_int_tuple(content):
                hint = ""
                if named and isinstance(content, TupleAttr) and _is_int_tuple(tuple(content)):
                    hint = f" (#{d.name} is a tuple attribute; a shape is written in brackets: #{d.name} = " \
                           f"[{to_str(tuple(content))}])"
                raise self.error(bracket.line, bracket.column + 1,
                                 f"the shape of {name} must be an int tuple, not {_content_text(content)}{hint}")
            if want_bracket == "layout" and not isinstance(content, (lc.Layout, lc.ComposedLayout)):
                raise self.error(bracket.line, bracket.column + 1,
                                 f"{name} needs a layout (shape:stride), not {_content_text(content)}")
            values.append(content)
            if not named:
                texts.append(f"[{to_str(content)}]")
        t = self._make_type(name, values)
        if not uses:
            return t, None
        params_text = texts[:len(params)]
        text = name + ("<" + ", ".join(params_text) + ">" if params_text else "") + "".join(texts[len(params):])
        return t, Spelled(text, t, tuple(uses))

    @staticmethod
    def _make_type(name: str, values: list):
        if name == "gtensor":
            return GlobalTensorType(*values)
        if name == "tmap":
            return TensorMapType(*values)
        if name == "gview":
            return GlobalViewType(*values)
        if name == "frag":
            return FragmentType(*values)
        if name == "mbarrier":
            return BarrierType(*values)
        if name == "pipeline":
            return PipelineType(*values)
        return TensorType(name, *values)

    # -- attribute values ------------------------------------------------------------------------------------------
    def cute(self, token):
        content = str(token)[1:-1]
        deep = _paren_too_deep(content)  # bounded before layoutc reads it (its parser recurses per level)
        if deep is not None:
            raise self.error(token.line, token.column + 1 + deep, _NESTING_MESSAGE)
        try:
            return lc.parse(content)
        except Exception as e:  # LayoutError (or anything else layoutc may raise): locate it in the IR file
            condition = getattr(e, "condition", str(e)).split("\n")[0]
            m = _LAYOUTC_COLUMN.match(condition)
            column = token.column + 1
            if m:
                column += int(m.group(1)) - 1
                condition = condition[m.end():]
            raise self.error(token.line, column, f"bad CuTe notation [{content}]: {condition}") from None

    def attrs(self, tree) -> tuple:
        """(attribute values, their spellings where they name something)."""
        out, spelling = {}, {}
        for attr in tree.children:
            key, value = attr.children
            if str(key) in out:
                raise self.error_at(key, f"duplicate attribute '{key}'")
            out[str(key)], spelled = self.spelled(value)
            if spelled is not None:
                spelling[str(key)] = spelled
        return out, spelling

    def literal(self, tree):
        kind = tree.data
        token = tree.children[0] if tree.children else None
        if kind == "int":
            return int(token)
        if kind == "float":
            return float(token)
        if kind == "inf":
            return float("inf")
        if kind == "neg_inf":
            return float("-inf")
        if kind == "nan":
            return float("nan")
        if kind == "true":
            return True
        if kind == "false":
            return False
        if kind == "word":
            return Word(str(token))
        if kind == "cute":
            if str(token)[1:-1].strip().startswith("#"):
                raise self.error_at(token, f"{str(token)[1:-1].strip()}: a kernel attribute is written out, not "
                                           "named (names stand for op attribute values and type parameters)")
            return self.cute(token)
        if kind == "name_ref":
            raise self.error_at(token, f"{token}: a kernel attribute is written out, not named (names stand for op "
                                       "attribute values and type parameters)")
        if kind == "string":
            try:
                value = json.loads(str(token), strict=False)
            except ValueError as e:
                raise self.error_at(token, f"bad string literal {token}: {e.msg}") from None
            return value
        raise AssertionError(kind)  # pragma: no cover

    def value(self, tree, depth: int = 0):
        return self.spelled(tree, depth)[0]

    def nesting_error(self, tree) -> IRSyntaxError:
        """``nesting deeper than 64 levels`` at ``tree``: a region, a tuple, or a long chain of ``+`` or ``*`` in a host
        expression (``_parse`` reports deep parentheses before the reader starts)."""
        return self.error_at(tree, _NESTING_MESSAGE)

    def kernel_attrs(self, tree) -> tuple:
        """(attributes, their locations: key → (Location of the key, Locations of the tuple's entries)); the
        verifier checks the launch attributes (``ptxgen.ir.launch``) and reports at these locations."""
        out, locs = {}, {}
        for attr in tree.children:
            key, value = attr.children
            if str(key) in out:
                raise self.error_at(key, f"duplicate attribute '{key}'")
            v = self.hvalue(value)
            if str(key) == "grid":
                v = tuple(self.host(e, value) for e in v) if type(v) is tuple else self.host(v, value)
            out[str(key)] = v
            entries = value.children if value.data == "htuple" else [value]
            locs[str(key)] = (self.loc(key), tuple(self._entry_loc(e, key) for e in entries))
        return out, locs

    def _entry_loc(self, node, fallback) -> Location:
        from lark import Tree
        if isinstance(node, Tree) and getattr(node.meta, "empty", True):
            return self.loc(fallback)
        return self.loc(node)

    def hvalue(self, tree, depth: int = 0):
        kind = tree.data
        if depth >= MAX_NESTING and kind in ("htuple", "hadd", "hmul", "hcall"):
            raise self.nesting_error(tree)
        depth += 1
        if kind == "htuple":
            return tuple(self.hvalue(c, depth) for c in tree.children)
        if kind == "hparam":
            token = tree.children[0]
            name = str(token)[1:]
            if name not in self.params:
                raise self.error_at(token, f"%{name} in a host expression is not a parameter of the kernel")
            return ParamRef(name)
        if kind in ("hadd", "hmul"):
            a, b = (self.host(self.hvalue(c, depth), c) for c in tree.children)
            return Add(a, b) if kind == "hadd" else Mul(a, b)
        if kind == "hcall":
            fn, *args = tree.children
            if str(fn) in ("cdiv", "min"):
                if len(args) != 2:
                    raise self.error_at(fn, f"{fn} takes 2 arguments, not {len(args)}")
                return (CDiv if str(fn) == "cdiv" else Min)(*(self.host(self.hvalue(a, depth), a) for a in args))
            if str(fn) == "dim":
                if len(args) != 2 or args[0].data != "hparam" or args[1].data != "int":
                    raise self.error_at(fn, "dim is written dim(%tensor_param, mode)")
                param = self.hvalue(args[0], depth)
                return Dim(param.name, int(args[1].children[0]))
            raise self.error_at(fn, f"unknown host function '{fn}' (expected dim, cdiv or min)")
        return self.literal(tree)

    def host(self, value, node) -> HostExpr:
        """``value`` as a host expression operand: an int becomes Const, a 1-tuple is parentheses."""
        if isinstance(value, HostExpr):
            return value
        if type(value) is int:
            return Const(value)
        if type(value) is tuple and len(value) == 1:
            return self.host(value[0], node)
        raise self.error_at(node, "expected a host expression (an integer, %param, dim(...), cdiv(...), * or +)"
                                  f" but found {_print_value(value, True) if _printable(value) else repr(value)}")


def _uses(spellings) -> tuple:
    """The Definitions the spellings use, each once, in order (None entries name nothing)."""
    out = []
    for sp in spellings:
        for d in (sp.uses if sp is not None else ()):
            if d not in out:
                out.append(d)
    return tuple(out)


def _content_text(value) -> str:
    """CuTe notation of a bracket's content (a name's value may be no CuTe value: then as an attribute)."""
    text = _cute_text(value) if not isinstance(value, (bool, TupleAttr)) else None
    return text if text is not None else attribute_text(value)


def _printable(value) -> bool:
    try:
        _print_value(value, True)
        return True
    except ValueError:
        return False


def _parse(text: str, file: str, start: str):
    """(the reader, lark's tree) of ``text``; the first error in text order — a syntax error, or a parenthesis
    nested deeper than MAX_NESTING — raises IRSyntaxError."""
    from lark.exceptions import LarkError
    if not isinstance(text, str):
        raise TypeError(f"IR text must be a str, not {type(text).__name__}")
    reader = _Reader(text, file)
    deep = _too_deep(text)
    try:
        tree = _parser().parse(text, start=start)
    except LarkError as e:
        error = _lark_error(reader, e, start)
        if deep is None or (error.loc.line, error.loc.column) < _pos_to_line_col(text, deep):
            raise error from None
        tree = None
    if deep is not None:
        raise reader.error(*_pos_to_line_col(text, deep), _NESTING_MESSAGE)
    return reader, tree


@gc_paused
def parse_module(text: str, file: str = "<text>") -> Module:
    """Parse IR text into a Module. Raises IRSyntaxError (``file:line:col: message``) on any syntax, type or
    scoping error and on nesting deeper than 64 levels (``nesting deeper than 64 levels``); TypeError when ``text``
    is no str. No other exception escapes (no lark exception, no RecursionError). Every Op, Kernel and Value gets the
    Location of its first token."""
    reader, tree = _parse(text, file, "start")
    return reader.module(tree)


def parse_type(text: str, file: str = "<type>"):
    """Parse a type: ``parse_type("frag<f32>[(4)]")`` → ``FragmentType(f32, (4,))``. Raises IRSyntaxError (and
    TypeError when ``text`` is no str), nothing else; whether the type is well formed (positive extents, …) is the
    verifier's ``types.type_problem``."""
    reader, tree = _parse(text, file, "type_start")
    return reader.type(tree.children[0])


# ----------------------------------------------------------------------------------------------------------------
# Printing

_VALUE_NAME = re.compile(r"[A-Za-z0-9_.]+\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
_RESERVED = {"true", "false", "inf", "nan"}
_CUTE_LEAVES = (lc.Layout, lc.ComposedLayout)


def print_type(t) -> str:
    """A type's text form: ``print_type(FragmentType(F32, (4,)))`` → ``frag<f32>[(4)]``."""
    if not isinstance(t, (ScalarType, GlobalTensorType, GlobalViewType, FragmentType, TensorType, TensorMapType,
                          BarrierType, PipelineType)):
        raise ValueError(f"cannot print type {t!r}")
    return str(t)


# Plain values: nested tuples of ints read back by CuTe's parser as themselves (layoutc's law parse(to_str(x)) == x),
# within bounds far from the parser's limits (nesting, digits); the printer needs no parse for them, so printing a
# kernel (JitKernel's IR hash, on every first compile) neither imports lark nor builds the CuTe grammar
_PLAIN_DEPTH = 8
_PLAIN_BITS = 64


def _plain_int_tuple(v, depth: int = 0) -> bool:
    """Whether ``v`` is an int (not a bool) below 2**64 in magnitude, or a non-empty tuple of such values at most
    ``_PLAIN_DEPTH`` levels deep: ``(64, (2, 3))`` yes; ``()``, ``(True, 2)``, ``(np.int64(3),)`` no."""
    if type(v) is int:
        return v.bit_length() <= _PLAIN_BITS
    if type(v) is not tuple or not v or depth >= _PLAIN_DEPTH:
        return False
    return all(_plain_int_tuple(e, depth + 1) for e in v)


def _cute_text(v) -> str | None:
    """``to_str(v)`` when ``v`` (a plain tuple or a layoutc object) reads back as itself, else None. Plain values (a
    tuple of ints, a Layout of int shape and stride: ``_plain_int_tuple``) are known to; anything else is parsed back
    and compared."""
    if type(v) is tuple and _plain_int_tuple(v) or \
            type(v) is lc.Layout and _plain_int_tuple(v.shape) and _plain_int_tuple(v.stride):
        return to_str(v)
    try:
        text = to_str(v)
        back = lc.parse(text)
    except ImportError:
        raise  # lark missing: say so, not "cannot print attribute value"
    except Exception:
        return None
    if type(back) is not type(v) or back != v:
        return None
    return text


def _is_cute_value(v) -> bool:
    if isinstance(v, (bool, TupleAttr)) or type(v) is int:
        return False
    if type(v) is tuple or isinstance(v, _CUTE_LEAVES) or type(v).__module__.startswith("layoutc"):
        return _cute_text(v) is not None
    return False


def attribute_text(value, kernel: bool = False) -> str:
    """An attribute value as the text form writes it, for messages: ``attribute_text(TupleAttr((0,)))`` → ``(0)``,
    ``attribute_text((64, 64))`` → ``[(64,64)]``, ``attribute_text(Word("x"))`` → ``x``. Post: never raises; a value
    the text form cannot write is shown by its Python type (``<set value>``), a long text is cut with ``…``."""
    try:
        text = _print_value(value, kernel)
    except ValueError:
        text = f"<{type(value).__name__} value>"
    return text if len(text) <= 120 else text[:119] + "…"


def value_text(value) -> str:
    """An op attribute value's canonical text, in full (``attribute_text`` shortens for messages):
    ``value_text(TupleAttr((32, 8)))`` → ``(32, 8)``. Raises ValueError for a value the text form cannot write."""
    return _print_value(value, False)


def _print_value(v, kernel: bool, top: bool = True) -> str:
    if top and too_deep(v):
        raise ValueError(f"cannot print an attribute value nested deeper than {MAX_NESTING} levels")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, HostExpr):
        if not kernel:
            raise ValueError(f"host expression {v} outside kernel attributes")
        _check_host(v)
        return str(v)
    if isinstance(v, Word):
        if not isinstance(v.name, str) or not _IDENT.match(v.name) or v.name in _RESERVED:
            raise ValueError(f"cannot print the word {v.name!r}: not an identifier, or a reserved word")
        return v.name
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, tuple) and (kernel or isinstance(v, TupleAttr) or not _is_cute_value(v)):
        return "(" + ", ".join(_print_value(e, kernel, False) for e in v) + ")"
    if _is_cute_value(v):
        return f"[{to_str(v)}]"
    raise ValueError(f"cannot print attribute value {v!r}")


def _check_host(e, depth: int = 0) -> None:
    if depth > MAX_NESTING:
        raise ValueError(f"cannot print a host expression nested deeper than {MAX_NESTING} levels")
    if isinstance(e, ParamRef):
        _check_name(e.name)
    elif isinstance(e, Dim):
        _check_name(e.param)
    elif isinstance(e, (CDiv, Min, Mul, Add)):
        _check_host(e.a, depth + 1)
        _check_host(e.b, depth + 1)
    elif not isinstance(e, Const):
        raise ValueError(f"cannot print host expression {e!r}")


def _check_name(name) -> str:
    if not isinstance(name, str) or not _VALUE_NAME.match(name):
        raise ValueError(f"cannot print value name {name!r} (letters, digits, '_' and '.' only)")
    return name


def _stands_for(spelled, value) -> bool:
    """Whether a spelling still stands for ``value`` (an IR pass may have replaced the value since)."""
    if not isinstance(spelled, Spelled):
        return False
    try:
        return _canon(spelled.value, False) == _canon(value, False)
    except ValueError:
        return False


def _print_attrs(attrs: dict, kernel: bool, spelling=None, uses=None) -> str:
    if not attrs:
        return ""
    items = []
    for k, v in attrs.items():
        if not isinstance(k, str) or not _IDENT.match(k):
            raise ValueError(f"cannot print attribute key {k!r}")
        spelled = (spelling or {}).get(k)
        if uses is not None and _stands_for(spelled, v):
            uses.extend(spelled.uses)
            items.append(f"{k} = {spelled.text}")
        else:
            items.append(f"{k} = {_print_value(v, kernel)}")
    return " {" + ", ".join(items) + "}"


def _value_type_text(value, uses) -> str:
    spelled = getattr(value, "spelling", None)
    if (uses is not None and isinstance(spelled, Spelled) and type(spelled.value) is type(value.type)
            and spelled.value == value.type):
        uses.extend(spelled.uses)
        return spelled.text
    return print_type(value.type)


def _print_params(values, uses=None) -> str:
    return ", ".join(f"%{_check_name(v.name)}: {_value_type_text(v, uses)}" for v in values)


def _print_ops(ops, depth: int, out: list, names: dict, uses=None) -> None:
    if depth > MAX_NESTING + 1:  # the kernel body is depth 1
        raise ValueError(f"cannot print regions nested deeper than {MAX_NESTING} levels")
    pad = "  " * depth
    for op in ops:
        if not isinstance(op.name, str) or not _OP_NAME.match(op.name):
            raise ValueError(f"cannot print op name {op.name!r} (dialect.op)")
        line = pad
        if op.results:
            for r in op.results:
                _define_name(names, r)
            line += ", ".join(f"%{r.name}" for r in op.results) + " = "
        line += op.name
        if op.operands:
            line += " " + ", ".join(f"%{_check_name(v.name)}" for v in op.operands)
        line += _print_attrs(op.attrs, False, getattr(op, "spelling", None), uses)
        if op.results:
            line += " : " + ", ".join(_value_type_text(r, uses) for r in op.results)
        for region in op.regions:
            line += " "
            if region.args:
                for a in region.args:
                    _define_name(names, a)
                line += f"({_print_params(region.args, uses)}) "
            line += "{"
            out.append(line + "\n")
            _print_ops(region.ops, depth + 1, out, names, uses)
            line = pad + "}"
        out.append(line + "\n")


def _define_name(names: dict, value) -> None:
    _check_name(value.name)
    if value.name in names and names[value.name] is not value:
        raise ValueError(f"cannot print: value name %{value.name} is defined twice in one kernel")
    names[value.name] = value


def print_kernel(kernel: Kernel, uses: list | None = None) -> str:
    """One kernel's canonical text (ends with a newline). With ``uses`` (a list) the names the kernel's spellings
    use are kept (``tv = #acc``) and their Definitions appended to ``uses``; without, every value is written out
    (the text then stands alone, without the module's definitions)."""
    if not isinstance(kernel.name, str) or not _VALUE_NAME.match(kernel.name):
        raise ValueError(f"cannot print kernel name {kernel.name!r}")
    if kernel.body.args:
        raise ValueError(f"kernel @{kernel.name}: the body region cannot have block arguments")
    names = {}
    for p in kernel.params:
        _define_name(names, p)
    out = [f"kernel @{kernel.name}({_print_params(kernel.params, uses)}){_print_attrs(kernel.attrs, True)} {{\n"]
    _print_ops(kernel.body.ops, 1, out, names, uses)
    out.append("}\n")
    return "".join(out)


def print_module(module: Module) -> str:
    """Canonical text: one op per line, two spaces per region level, attributes in insertion order (empty dicts
    omitted), floats with repr, layouts with layoutc.to_str, kernels separated by a blank line. Post:
    ``print_module(parse_module(print_module(m))) == print_module(m)`` and the parse is structurally equal to ``m``.
    Module-level definitions come first, one per line (``#acc = wgmma_acc(m = 64, n = 128)``), then a blank line:
    the module's own (text order) and then any other that the kernels' spellings use (builder names), each after
    the names it uses. Raises ValueError for IR the text form cannot write (bad names, a value name defined twice,
    two different definitions of one #name, unknown value kinds)."""
    uses = []
    kernels = "\n".join(print_kernel(k, uses) for k in module.kernels)
    ordered = []
    for d in list(getattr(module, "definitions", None) or []) + uses:
        _add_definition(d, ordered, 0)
    if not ordered:
        return kernels
    lines = "".join(f"#{d.name} = {d.text}\n" for d in ordered)
    return lines + ("\n" + kernels if kernels else "")


def _add_definition(d, ordered: list, depth: int) -> None:
    """Append Definition ``d`` to ``ordered`` after the definitions it uses; one per name."""
    if depth > MAX_NESTING:
        raise ValueError(f"cannot print definitions nested deeper than {MAX_NESTING} levels")
    if not isinstance(d, Definition) or not isinstance(d.name, str) or not _IDENT.match(d.name):
        raise ValueError(f"cannot print definition {d!r}")
    for other in ordered:
        if other.name == d.name:
            if other is not d and (other.text != d.text or _canon(other.value, False) != _canon(d.value, False)):
                raise ValueError(f"cannot print: #{d.name} is defined twice, as {other.text} and as {d.text}")
            return
    for used in d.uses:
        _add_definition(used, ordered, depth + 1)
    ordered.append(d)


# ----------------------------------------------------------------------------------------------------------------
# Structural equality

def _canon(v, kernel: bool, top: bool = True):
    """A comparable form of an attribute value that is equal exactly when the printed forms are. Raises ValueError
    for a value nested deeper than MAX_NESTING (which the text form cannot write either)."""
    if top and too_deep(v):
        raise ValueError(f"cannot compare attribute values nested deeper than {MAX_NESTING} levels")
    if isinstance(v, HostExpr) and _host_too_deep(v):
        raise ValueError(f"cannot compare host expressions nested deeper than {MAX_NESTING} levels")
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, Const) and kernel:
        return ("int", int(v.value))
    if isinstance(v, HostExpr):
        return ("host", str(v)) if kernel else ("host-outside-kernel", repr(v))
    if isinstance(v, Word):
        return ("word", v.name)
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, numbers.Integral):
        return ("int", int(v))
    if isinstance(v, numbers.Real):
        return ("float", repr(float(v)))
    if isinstance(v, tuple) and (kernel or isinstance(v, TupleAttr) or not _is_cute_value(v)):
        return ("tuple", tuple(_canon(e, kernel, False) for e in v))
    if _is_cute_value(v):
        return ("cute", to_str(v))
    return ("other", repr(v))


def _host_too_deep(e) -> bool:
    """Whether host expression ``e`` nests deeper than MAX_NESTING operations (found without recursion)."""
    stack = [(e, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return True
        stack.extend((getattr(item, side), depth + 1) for side in ("a", "b") if hasattr(item, side))
    return False


def _attrs_difference(a: dict, b: dict, kernel: bool) -> str | None:
    if set(a) != set(b):
        return f"attribute keys {sorted(a)} vs {sorted(b)}"
    for k in a:
        if _canon(a[k], kernel) != _canon(b[k], kernel):
            return f"attribute '{k}': {a[k]!r} vs {b[k]!r}"
    return None


def _type_difference(ta, tb) -> bool:
    return type(ta) is not type(tb) or ta != tb


def _values_difference(va, vb, vmap: dict, what: str) -> str | None:
    if len(va) != len(vb):
        return f"{len(va)} {what} vs {len(vb)}"
    for i, (x, y) in enumerate(zip(va, vb)):
        if x.name != y.name:
            return f"{what} {i}: %{x.name} vs %{y.name}"
        if _type_difference(x.type, y.type):
            return f"{what} {i} (%{x.name}): type {x.type} vs {y.type}"
        vmap[id(x)] = y
    return None


def _region_difference(ra: Region, rb: Region, vmap: dict, path: str, depth: int = 1) -> str | None:
    if depth > MAX_NESTING + 1:
        raise ValueError(f"cannot compare regions nested deeper than {MAX_NESTING} levels")
    d = _values_difference(ra.args, rb.args, vmap, "block arguments")
    if d:
        return f"{path}: {d}"
    if len(ra.ops) != len(rb.ops):
        return f"{path}: {len(ra.ops)} ops vs {len(rb.ops)}"
    for i, (x, y) in enumerate(zip(ra.ops, rb.ops)):
        here = f"{path}/op {i} ({x.name} at {x.loc})"
        if x.name != y.name:
            return f"{here}: op name {x.name} vs {y.name}"
        if len(x.operands) != len(y.operands):
            return f"{here}: {len(x.operands)} operands vs {len(y.operands)}"
        for j, (u, w) in enumerate(zip(x.operands, y.operands)):
            mapped = vmap.get(id(u))
            same = mapped is w if mapped is not None else (u.name == w.name and not _type_difference(u.type, w.type))
            if not same:
                return f"{here}: operand {j}: %{u.name} vs %{w.name}"
        d = _attrs_difference(x.attrs, y.attrs, False)
        if d:
            return f"{here}: {d}"
        d = _values_difference(x.results, y.results, vmap, "results")
        if d:
            return f"{here}: {d}"
        if len(x.regions) != len(y.regions):
            return f"{here}: {len(x.regions)} regions vs {len(y.regions)}"
        for k, (p, q) in enumerate(zip(x.regions, y.regions)):
            d = _region_difference(p, q, vmap, f"{here}/region {k}", depth + 1)
            if d:
                return d
    return None


def _kernel_difference(a: Kernel, b: Kernel) -> str | None:
    path = f"kernel @{a.name}"
    if a.name != b.name:
        return f"kernel name @{a.name} vs @{b.name}"
    vmap = {}
    d = _values_difference(a.params, b.params, vmap, "parameters")
    if d:
        return f"{path}: {d}"
    d = _attrs_difference(a.attrs, b.attrs, True)
    if d:
        return f"{path}: {d}"
    return _region_difference(a.body, b.body, vmap, f"{path}: body")


def first_difference(a, b) -> str | None:
    """The first structural difference between two Modules (or two Kernels) as a message, or None when they are
    structurally equal: the same kernels, names, types, attributes (compared as the text form writes them),
    operand wiring, regions and nesting. Locations and the module's file are not compared."""
    if isinstance(a, Kernel) and isinstance(b, Kernel):
        return _kernel_difference(a, b)
    if not (isinstance(a, Module) and isinstance(b, Module)):
        return f"cannot compare {type(a).__name__} with {type(b).__name__}"
    if len(a.kernels) != len(b.kernels):
        return f"{len(a.kernels)} kernels vs {len(b.kernels)}"
    for x, y in zip(a.kernels, b.kernels):
        d = _kernel_difference(x, y)
        if d:
            return d
    return None


def structurally_equal(a, b) -> bool:
    """True when ``first_difference(a, b)`` finds none. Both raise ValueError for IR nested deeper than the text
    form allows (``ptxgen.ir.core.MAX_NESTING``)."""
    return first_difference(a, b) is None
