"""Element types the Hopper layer knows, by name, with their bit widths.

Every function of ``layoutc.hopper`` (and the ``layoutc`` command line) that takes an element type looks it up here,
so each of these spellings works everywhere: layoutc's short names (``bf16``, ``e4m3``, ``s8``), a few numpy/torch
style aliases (``bfloat16``, ``float8_e4m3fn``, ``int8``) and CuTe's C++ type names (``bfloat16_t``, ``half_t``,
``float_e4m3_t``, ``int8_t``), optionally prefixed with ``cute::`` or ``cutlass::`` (CuTe re-exports CUTLASS's numeric
types, so C++ code spells them either way).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..errors import LayoutError


@dataclass(frozen=True)
class DType:
    """An element type: ``DType('bf16', 16, 'float')``. ``bytes`` is fractional for sub-byte types."""

    name: str
    bits: int
    kind: str  # "float", "int", "uint" or "bits"

    @property
    def bytes(self) -> float:
        return self.bits / 8

    def __str__(self) -> str:
        return self.name


_TYPES = {
    t.name: t
    for t in (
        DType("f64", 64, "float"), DType("f32", 32, "float"), DType("tf32", 32, "float"),
        DType("f16", 16, "float"), DType("bf16", 16, "float"),
        DType("e4m3", 8, "float"), DType("e5m2", 8, "float"),
        DType("s64", 64, "int"), DType("u64", 64, "uint"),
        DType("s32", 32, "int"), DType("u32", 32, "uint"),
        DType("s16", 16, "int"), DType("u16", 16, "uint"),
        DType("s8", 8, "int"), DType("u8", 8, "uint"),
        DType("s4", 4, "int"), DType("u4", 4, "uint"), DType("b1", 1, "bits"),
    )
}
_ALIASES = {"float32": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16", "float64": "f64",
            "fp8": "e4m3", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "int8": "s8", "uint8": "u8",
            "int16": "s16", "uint16": "u16", "int32": "s32", "uint32": "u32", "int64": "s64", "uint64": "u64",
            "int4": "s4", "uint4": "u4", "fp16": "f16", "fp32": "f32"}
# CuTe's C++ names (cute/numeric/numeric_types.hpp re-exporting cutlass/numeric_types.h, plus <cstdint>).  tf32 data
# is CuTe's tfloat32_t; its `float` is f32 (which wgmma does not read: it reads tf32, see descriptor.py).
_CUTE_NAMES = {"half_t": "f16", "bfloat16_t": "bf16", "tfloat32_t": "tf32", "float": "f32", "double": "f64",
               "float_e4m3_t": "e4m3", "float_e5m2_t": "e5m2",
               "int8_t": "s8", "uint8_t": "u8", "int16_t": "s16", "uint16_t": "u16",
               "int32_t": "s32", "uint32_t": "u32", "int64_t": "s64", "uint64_t": "u64",
               "int4b_t": "s4", "uint4b_t": "u4", "uint1b_t": "b1", "bin1_t": "b1"}
_PREFIXES = ("cute::", "cutlass::")


def _key(name: str) -> str:
    for prefix in _PREFIXES:
        if name.startswith(prefix) and name[len(prefix):] in _CUTE_NAMES:
            return _CUTE_NAMES[name[len(prefix):]]
    return _CUTE_NAMES.get(name) or _ALIASES.get(name, name)


def _did_you_mean(word: str) -> str:
    """`` (did you mean 'bf16'?)`` for the closest accepted spelling, compared case-blind and without a ``cute::`` or
    ``cutlass::`` prefix, else ``""``."""
    for prefix in _PREFIXES:
        word = word[len(prefix):] if word.startswith(prefix) else word
    spellings = sorted(set(_TYPES) | set(_ALIASES) | set(_CUTE_NAMES))
    by_lower = {s.lower(): s for s in spellings}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean '{by_lower[close[0]]}'?)" if close else ""


def dtype(name) -> DType:
    """Look up an element type by name: ``dtype('bf16').bits`` → 16; ``dtype('bfloat16_t')``,
    ``dtype('cute::half_t')`` and ``dtype('bfloat16')`` work too (see the module docstring).

    Pre: a known spelling; otherwise LayoutError with a did-you-mean and both lists, e.g. ``dtype('bf61')`` →
    ``dtype('bf61'): unknown element type (did you mean 'bf16'?); layoutc names: b1, bf16, ...; CuTe names: bfloat16_t,
    ...``. A DType is returned as is.  Post: the result's ``name`` is layoutc's short name.
    """
    if isinstance(name, DType):
        return name
    key = _key(str(name))
    try:
        return _TYPES[key]
    except KeyError:
        raise LayoutError("dtype", (str(name),),
                          f"unknown element type{_did_you_mean(str(name))}; layoutc names: "
                          f"{', '.join(sorted(_TYPES))}; CuTe names: {', '.join(sorted(_CUTE_NAMES))}") from None


def known_dtypes() -> list:
    """layoutc's names of all known element types, sorted."""
    return sorted(_TYPES)


def cute_names() -> dict:
    """CuTe's C++ element-type names and the layoutc name each one means: ``cute_names()['bfloat16_t']`` → 'bf16'.
    Each also works with a ``cute::`` or ``cutlass::`` prefix."""
    return dict(_CUTE_NAMES)
