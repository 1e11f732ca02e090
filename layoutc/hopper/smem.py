"""Physical byte addresses of a shared-memory layout.

A smem layout is a Layout (element offsets) or ``Sw o offset o L`` whose Swizzle acts on absolute byte addresses
(CuTe's smem convention, also TMA's and wgmma's): ``byte(c) = Sw(base + elem_bytes·(offset + L(c)))``.
"""
from __future__ import annotations

from ..errors import LayoutError
from ..layout import Layout
from ..swizzle import ComposedLayout, Swizzle
from .dtypes import dtype


def split_smem_layout(layout):
    """(byte swizzle or None, element offset, inner Layout) of a smem layout: ``Sw<3,4,3> o 0 o L`` → (Sw, 0, L).

    Pre: a Layout or a ComposedLayout whose outer function is a Swizzle.
    """
    if isinstance(layout, Layout):
        return None, 0, layout
    if isinstance(layout, ComposedLayout) and isinstance(layout.outer, Swizzle):
        return layout.outer, layout.offset, layout.inner
    raise LayoutError("smem layout", (layout,), "a shared-memory layout is a Layout or Swizzle o offset o Layout")


def byte_address(layout, element, coord, base: int = 0) -> int:
    """Byte address of one coordinate: ``byte_address(Sw<3,4,3> o 0 o (8,64):(64,1), 'bf16', (1,0))`` → 144
    (row 1 starts at byte 128, its first 16-byte chunk swaps with chunk 1).

    Post: the swizzle is applied to ``base + bytes`` (absolute address), so a base that is not a multiple of the
    swizzle's repeat changes the pattern, as on the hardware. Sub-byte elements give the byte holding them.
    """
    sw, offset, inner = split_smem_layout(layout)
    bits = dtype(element).bits
    addr = base + ((offset + inner(coord)) * bits) // 8
    return sw(addr) if sw is not None else addr


def byte_addresses(layout, element, base: int = 0) -> list:
    """Byte addresses of every 1-D coordinate 0..size-1 in order: ``byte_addresses(4:1, 'f32')`` → [0, 4, 8, 12]."""
    sw, offset, inner = split_smem_layout(layout)
    bits = dtype(element).bits
    out = []
    for i in range(inner.size):
        addr = base + ((offset + inner(i)) * bits) // 8
        out.append(sw(addr) if sw is not None else addr)
    return out
