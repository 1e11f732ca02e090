"""Element types the Hopper layer knows, by name, with their bit widths."""
from __future__ import annotations

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
        DType("s32", 32, "int"), DType("u32", 32, "uint"),
        DType("s8", 8, "int"), DType("u8", 8, "uint"),
        DType("s4", 4, "int"), DType("u4", 4, "uint"), DType("b1", 1, "bits"),
    )
}
_ALIASES = {"float32": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16", "float64": "f64",
            "fp8": "e4m3", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "int8": "s8", "uint8": "u8",
            "int32": "s32", "uint32": "u32", "fp16": "f16", "fp32": "f32"}


def dtype(name) -> DType:
    """Look up an element type by name: ``dtype('bf16').bits`` → 16; aliases like ``'bfloat16'`` work.

    Pre: a known name (LayoutError lists the known ones otherwise). A DType is returned as is.
    """
    if isinstance(name, DType):
        return name
    key = _ALIASES.get(str(name), str(name))
    try:
        return _TYPES[key]
    except KeyError:
        raise LayoutError("dtype", (str(name),), f"unknown element type; known: {', '.join(sorted(_TYPES))}") from None


def known_dtypes() -> list:
    """Names of all known element types, sorted."""
    return sorted(_TYPES)
