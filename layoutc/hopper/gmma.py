"""GMMA shared-memory layout atoms (CuTe's ``GMMA::Layout_{MN,K}_{INTER,SW32,SW64,SW128}_Atom<T>``).

Convention (CuTe's, for shared memory): the outer Swizzle of a smem layout acts on **byte** addresses; the inner
layout maps (MN, K) coordinates to element offsets. CuTe prints the GMMA atoms' offset as ``smem_ptr[16b](unset)``;
layoutc prints ``0`` (``Sw<3,4,3> o 0 o (8,64):(64,1)`` for the 16-bit K-major SW128 atom).
"""
from __future__ import annotations

import enum

from ..errors import LayoutError
from ..layout import Layout, LayoutLeft
from ..recast import upcast
from ..swizzle import ComposedLayout, Swizzle
from ..tiling import tile_to_shape
from .dtypes import dtype


class Major(enum.Enum):
    """Which dimension is contiguous in shared memory: K (K-major) or MN (MN-major)."""

    K = "K"
    MN = "MN"

    @classmethod
    def of(cls, value) -> "Major":
        """``Major.of('k')`` → Major.K; accepts a Major, 'K', 'MN' (any case)."""
        if isinstance(value, Major):
            return value
        key = str(value).upper()
        if key in ("K", "MN"):
            return cls(key)
        raise LayoutError("Major", (str(value),), "major must be 'K' or 'MN'")


class SwizzleMode(enum.Enum):
    """wgmma/TMA swizzle modes with their swizzle width in bytes and CuTe swizzle bits."""

    INTER = 16
    SW32 = 32
    SW64 = 64
    SW128 = 128

    @property
    def width_bytes(self) -> int:
        """Bytes per swizzle row: 16 (INTER), 32, 64, 128."""
        return self.value

    @property
    def swizzle_bits(self) -> int:
        """B of the byte-address Swizzle<B,4,3>: 0, 1, 2, 3."""
        return {16: 0, 32: 1, 64: 2, 128: 3}[self.value]

    @property
    def swizzle(self) -> Swizzle:
        """The byte-address swizzle: ``SwizzleMode.SW128.swizzle`` → ``Sw<3,4,3>``."""
        return Swizzle(self.swizzle_bits, 4, 3)

    @property
    def repeat_bytes(self) -> int:
        """Bytes after which the pattern repeats (8 rows): 128, 256, 512, 1024."""
        return 8 * self.value

    @classmethod
    def of(cls, value) -> "SwizzleMode":
        """``SwizzleMode.of('sw128')``, ``SwizzleMode.of(128)``, ``SwizzleMode.of('INTER')`` (also 'none', 0, 16)."""
        if isinstance(value, SwizzleMode):
            return value
        text = str(value).upper().replace("B", "")
        names = {"INTER": cls.INTER, "INTERLEAVE": cls.INTER, "NONE": cls.INTER, "0": cls.INTER, "16": cls.INTER,
                 "SW32": cls.SW32, "32": cls.SW32, "SW64": cls.SW64, "64": cls.SW64,
                 "SW128": cls.SW128, "128": cls.SW128}
        if text in names:
            return names[text]
        raise LayoutError("SwizzleMode", (str(value),), "swizzle must be INTER, SW32, SW64 or SW128")

    @classmethod
    def from_swizzle(cls, sw: Swizzle) -> "SwizzleMode":
        """The mode of a byte-address swizzle ``Sw<B,4,3>`` (B = 0..3); anything else is not a wgmma swizzle."""
        if sw.bits == 0:
            return cls.INTER
        if sw.base != 4 or sw.shift != 3 or sw.bits > 3:
            raise LayoutError("SwizzleMode", (sw,), "not a wgmma/TMA swizzle: expected Sw<B,4,3> with B in 0..3 "
                              "acting on byte addresses")
        return {1: cls.SW32, 2: cls.SW64, 3: cls.SW128}[sw.bits]


def gmma_atom(major, swizzle, element) -> ComposedLayout:
    """CuTe's GMMA smem atom for an element type: ``gmma_atom('K', 'SW128', 'bf16')`` → ``Sw<3,4,3> o 0 o (8,64):(64,1)``;
    ``gmma_atom('MN', 'SW128', 'bf16')`` → ``Sw<3,4,3> o 0 o (64,8):(1,64)``.

    Defined in bits as CuTe does (K: ``(8,W):(W,1)``, MN: ``(W,8):(1,W)`` with W = 8·width bytes) and recast to the
    element width; the swizzle stays a byte-address ``Sw<B,4,3>`` (``Sw<0,4,3>`` for INTER).
    Post: 8 rows of ``width`` bytes; coordinates are (MN, K).
    """
    major = Major.of(major)
    mode = SwizzleMode.of(swizzle)
    t = dtype(element)
    width_bits = mode.width_bytes * 8
    if width_bits % t.bits:
        raise LayoutError("gmma_atom", (str(major.value), mode.name, t.name),
                          f"{t.bits}-bit elements do not fill a {mode.width_bytes}-byte row")
    if major is Major.K:
        bits_layout = Layout((8, width_bits), (width_bits, 1))
    else:
        bits_layout = Layout((width_bits, 8), (1, width_bits))
    return ComposedLayout(mode.swizzle, 0, upcast(bits_layout, t.bits))


def gmma_smem_layout(major, swizzle, element, shape, order=LayoutLeft) -> ComposedLayout:
    """The atom tiled to a (MN, K[, stages...]) shape: ``gmma_smem_layout('MN','SW128','bf16',(128,64,3))`` →
    ``Sw<3,4,3> o 0 o ((64,2),(8,8),(1,3)):((1,512),(64,1024),(0,8192))``.

    Post: ``atom.outer o atom.offset o tile_to_shape(atom.inner, shape, order)`` for ``atom = gmma_atom(...)``,
    which is ``tile_to_shape(atom, shape, order)`` for the swizzled atoms. The INTER atom keeps its ``Sw<0,4,3>``:
    in CuTe its offset is the smem_ptr flag, not 0, so CuTe's ``tile_to_shape`` keeps the composed form that
    layoutc's would fold away at offset 0 (``Sw<0,4,3> o 0 o ((8,8),(8,8)):((8,64),(1,512))`` for a K-major bf16
    (64,64) tile).
    """
    atom = gmma_atom(major, swizzle, element)
    return ComposedLayout(atom.outer, atom.offset, tile_to_shape(atom.inner, shape, order))
