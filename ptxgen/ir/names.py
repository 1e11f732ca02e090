"""Names in the tile IR text: module-level definitions (``#rows = 64``, ``#stage = [Sw<3,4,3> o 0 o (64,64):(64,1)]``)
and TV layouts named by the partition function that derives them (``wgmma_acc(m = 128, n = 128, warpgroups = 2)``).

Names are spelling, not semantics: the reader (and the builder) resolve every name and partition call to its value
before anything else sees the IR, so the verifier, the interpreter and the lowering meet plain values (a partition
call is a ``layoutc.Layout``). What was written is kept beside the value — ``Op.spelling[key]`` for an attribute,
``Value.spelling`` for a type — as a ``Spelled`` (canonical text, the value it stands for, the definitions it uses),
and the printer writes that text back wherever it still stands for the value (spec/tile-ir.md §3.1).

    >>> partition_value("wgmma_acc", {"m": 128, "n": 128, "warpgroups": 2})
    Layout((((4, 8, 4), 2), (2, 2, 16)), (((256, 1, 16), 64), (128, 8, 1024)))
"""
from __future__ import annotations

from dataclasses import dataclass

import layoutc as lc
from layoutc.hopper import (copy_tv, ldmatrix_tiled_tv, stmatrix_tiled_tv, vector_elements, wgmma_a_tv,
                            wgmma_accumulator_tv)

from .core import UNKNOWN, Location
from .hostexpr import TupleAttr, Word
from .suggest import did_you_mean

__all__ = ["Definition", "Spelled", "PartitionError", "PARTITIONS", "partition_value", "partition_signature"]


@dataclass(frozen=True, eq=False)
class Spelled:
    """How a value was written: ``text`` (canonical, e.g. ``#acc`` or ``wgmma_acc(m = 64, n = 128)``) stands for
    ``value``; ``uses`` are the Definitions the text names (each printed once, before the kernels)."""

    text: str
    value: object
    uses: tuple = ()


@dataclass(frozen=True, eq=False)
class Definition:
    """``#name = text`` at module level: ``text`` is the canonical right-hand side (a value, or a partition call that
    may name earlier definitions), ``value`` what it resolves to. ``spelled`` is how a use of the name is written."""

    name: str
    value: object
    text: str
    uses: tuple = ()
    loc: Location = UNKNOWN

    @property
    def spelled(self) -> Spelled:
        """The definition as a use spells it: ``#acc`` standing for ``(4,(2,2)):(2,(1,8))``. Post: a Spelled whose
        text is ``#name``, its value the definition's, its uses this definition."""
        return Spelled(f"#{self.name}", self.value, (self,))


class PartitionError(ValueError):
    """A partition call that cannot be resolved. ``argument`` names the argument at fault (None: the call as a
    whole) and ``at_key`` whether its key (an unknown one) rather than its value is wrong, so the reader can point
    at it."""

    def __init__(self, message: str, argument: str | None = None, at_key: bool = False):
        super().__init__(message)
        self.message = message
        self.argument = argument
        self.at_key = at_key


# -- the partition functions ------------------------------------------------------------------------------------------

_REQUIRED = object()


def _int(value):
    return value if type(value) is int and value >= 1 else None


def _pair(value):
    if isinstance(value, tuple) and len(value) == 2 and all(type(x) is int and x >= 1 for x in value):
        return tuple(value)
    return None


def _pair_or_layout(value):
    return value if isinstance(value, lc.Layout) else _pair(value)


def _int_or_layout(value):
    return value if isinstance(value, lc.Layout) else _int(value)


def _element(value):
    return value.name if isinstance(value, Word) and value.name in _ELEMENTS else None


def _bool(value):
    return value if isinstance(value, bool) else None


_A_ELEMENTS = ("f16", "bf16", "e4m3", "e5m2", "s8", "u8", "tf32")
_ELEMENTS = ("i32", "u32", "i64", "u64", "f16", "bf16", "f32", "e4m3", "e5m2")   # the tile IR's element types


def _a_element(value):
    return value.name if isinstance(value, Word) and value.name in _A_ELEMENTS else None


# kind → (reader, what it must be, as the message says it)
_KINDS = {
    "int": (_int, "a positive integer"),
    "pair": (_pair, "a pair of positive integers like (4, 1)"),
    "pair|layout": (_pair_or_layout, "a pair of positive integers like (32, 8) or a thread layout like [(32,8):(8,1)]"),
    "int|layout": (_int_or_layout, "a positive integer (elements per vector) or a value layout like [(1,8):(1,1)]"),
    "bool": (_bool, "true or false"),
    "element": (_element, f"an element type of the tile IR: {', '.join(_ELEMENTS)}"),
    "a_element": (_a_element, f"an element type wgmma takes in registers: {', '.join(_A_ELEMENTS)}"),
}


@dataclass(frozen=True)
class PartitionFunction:
    """A partition function of the text form: its parameters (name, kind, default or required, in canonical order)
    and the layoutc derivation it calls."""

    name: str
    params: tuple
    derive: object
    summary: str

    def signature(self) -> str:
        """The function as the text form's help spells it: each parameter ``key = kind``, optional ones in brackets
        with their default: ``wgmma_acc(m = int, n = int, [warpgroups = 1], [warpgroups_n = 1])`` (whose result is a
        TV layout such as ``((4,8,4),(2,2,8)):((128,1,16),(64,8,512))``). Post: one entry per parameter, in
        canonical order."""
        parts = []
        for key, kind, default in self.params:
            if default is _REQUIRED:
                parts.append(f"{key} = {kind}")
            else:
                parts.append(f"[{key} = {kind if default is None else _default_text(default)}]")
        return f"{self.name}({', '.join(parts)})"


def _default_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "(" + ", ".join(str(x) for x in value) + ")"
    return str(value)


def _copy_vector(arguments: dict):
    """copy's vector: ``vector`` elements, or ``bytes`` of ``type`` (``layoutc.hopper.vector_elements``)."""
    by_bytes = arguments["bytes"] is not None or arguments["type"] is not None
    if arguments["vector"] is not None and by_bytes:
        raise PartitionError("copy: give the vector in elements (vector = 8) or in bytes of a type (bytes = 16, "
                             "type = bf16), not both")
    if arguments["vector"] is not None:
        return arguments["vector"]
    if arguments["bytes"] is None or arguments["type"] is None:
        raise PartitionError("copy: missing the vector: vector = elements, or bytes = B and type = T")
    return vector_elements(arguments["bytes"], {"i32": "s32", "i64": "s64"}.get(arguments["type"],
                                                                                arguments["type"]))


PARTITIONS = {f.name: f for f in (
    PartitionFunction(
        "wgmma_acc", (("m", "int", _REQUIRED), ("n", "int", _REQUIRED), ("warpgroups", "int", 1),
                      ("warpgroups_n", "int", 1)),
        lambda a: wgmma_accumulator_tv(a["m"], a["n"], a["warpgroups"], a["warpgroups_n"]),
        "the wgmma accumulator of an (m, n) tile over warpgroups (layoutc.hopper.wgmma_accumulator_tv)"),
    PartitionFunction(
        "wgmma_a", (("type", "a_element", _REQUIRED), ("m", "int", _REQUIRED), ("k", "int", _REQUIRED),
                    ("warpgroups", "int", 1)),
        lambda a: wgmma_a_tv(a["type"], a["m"], a["k"], a["warpgroups"]),
        "the RS-form A fragment of an (m, k) tile over warpgroups (layoutc.hopper.wgmma_a_tv)"),
    PartitionFunction(
        "copy", (("threads", "pair|layout", _REQUIRED), ("vector", "int|layout", None), ("tile", "pair", _REQUIRED),
                 ("bytes", "int", None), ("type", "element", None)),
        lambda a: copy_tv(a["threads"], _copy_vector(a), a["tile"])[1],
        "a vectorized copy of a row-major tile (layoutc.hopper.copy_tv); the vector in elements, or bytes of a type"),
    PartitionFunction(
        "ldmatrix", (("num", "int", _REQUIRED), ("tile", "pair", _REQUIRED), ("warps", "pair", (1, 1)),
                     ("trans", "bool", False)),
        lambda a: ldmatrix_tiled_tv(a["num"], a["tile"], a["warps"], a["trans"]),
        "ldmatrix.x{num} over a tile by warps (layoutc.hopper.ldmatrix_tiled_tv)"),
    PartitionFunction(
        "stmatrix", (("num", "int", _REQUIRED), ("tile", "pair", _REQUIRED), ("warps", "pair", (1, 1)),
                     ("trans", "bool", False)),
        lambda a: stmatrix_tiled_tv(a["num"], a["tile"], a["warps"], a["trans"]),
        "stmatrix.x{num} over a tile by warps (layoutc.hopper.stmatrix_tiled_tv)"),
)}


def partition_signature(name: str) -> str:
    """How the partition function ``name`` is called: ``wgmma_acc(m = int, n = int, [warpgroups = 1],
    [warpgroups_n = 1])``. Pre: a known name."""
    return PARTITIONS[name].signature()


def canonical_arguments(name: str, keys) -> list:
    """``keys`` in the function's parameter order (the order the canonical text writes them). Pre: known keys."""
    order = {key: i for i, (key, _kind, _default) in enumerate(PARTITIONS[name].params)}
    return sorted(keys, key=order.__getitem__)


def partition_value(name: str, arguments: dict, shown=None) -> lc.Layout:
    """The TV layout ``name(**arguments)`` stands for, from layoutc.hopper's derivations.

    ``arguments`` maps each argument to its resolved value (ints, ``TupleAttr`` pairs, ``Word`` element types,
    bools, Layouts); ``shown`` maps it to its text for messages (default: as given).
    ``partition_value("copy", {"threads": (32, 8), "vector": 8, "tile": (64, 64)})`` →
    ``((8,32),(8,2)):((512,1),(64,32))``.

    Raises PartitionError: an unknown function (with a did-you-mean), an unknown or missing argument, an argument
    of the wrong kind (naming it), or the derivation's own LayoutError (the call as written, then its condition).
    Post: a Layout of rank 2 (thread, value), a bijection onto the tile the call describes.
    """
    shown = shown or {}
    function = PARTITIONS.get(name)
    if function is None:
        raise PartitionError(f"unknown partition function '{name}'{did_you_mean(name, PARTITIONS)}: the partition "
                             f"functions are {', '.join(PARTITIONS)}")
    known = {key for key, _kind, _default in function.params}
    for key in arguments:
        if key not in known:
            hint = did_you_mean(key, sorted(known - set(arguments)))
            raise PartitionError(f"{name} takes no argument '{key}'{hint}: {function.signature()}", key, True)
    resolved = {}
    for key, kind, default in function.params:
        if key not in arguments:
            if default is _REQUIRED:
                raise PartitionError(f"{name}: missing argument '{key}': {function.signature()}")
            resolved[key] = default
            continue
        read, wanted = _KINDS[kind]
        value = arguments[key]
        plain = tuple(value) if isinstance(value, TupleAttr) else value
        got = read(plain)
        if got is None:
            text = shown.get(key, _default_text(value))
            hint = did_you_mean(value.name, _A_ELEMENTS) if kind == "a_element" and isinstance(value, Word) else ""
            raise PartitionError(f"{name}: argument {key} = {text} must be {wanted}{hint}", key)
        resolved[key] = got
    try:
        return function.derive(resolved)
    except lc.LayoutError as e:
        written = ", ".join(f"{key} = {shown.get(key, _default_text(arguments[key]))}"
                            for key in canonical_arguments(name, arguments))
        raise PartitionError(f"{name}({written}): {e.condition}") from None
