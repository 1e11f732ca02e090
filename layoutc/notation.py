"""CuTe notation: printing (and, below, parsing with the package's lark grammar)."""
from __future__ import annotations

from .errors import LayoutError
from .int_tuple import is_tuple


def to_str(obj) -> str:
    """CuTe's printed form without static underscores: ``(4,(2,3)):(2,(1,8))``, ``8:1``,
    ``Sw<3,4,3> o 0 o (8,64):(64,1)``; a tiler tuple prints as ``(3:4,_,5)``. Post: ``parse(to_str(x)) == x``."""
    from .layout import Layout, Underscore
    from .swizzle import ComposedLayout, Swizzle
    if isinstance(obj, Layout):
        return f"{to_str(obj.shape)}:{to_str(obj.stride)}"
    if isinstance(obj, ComposedLayout):
        return f"{to_str(obj.outer)} o {obj.offset} o {to_str(obj.inner)}"
    if isinstance(obj, Swizzle):
        return str(obj)
    if isinstance(obj, Underscore):
        return "_"
    if is_tuple(obj):
        return "(" + ",".join(to_str(e) for e in obj) + ")"
    if type(obj) is int:
        return str(obj)
    return repr(obj)


def parse(text: str):
    raise LayoutError("parse", (text,), "the CuTe notation parser is not built yet")
