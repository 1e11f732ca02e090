"""wgmma shared-memory matrix descriptors, derived from (and checked against) CuTe smem layouts.

A wgmma operand in shared memory is described by one 64-bit word (PTX ISA "Matrix Descriptor Format"):

====== ===== ====================================================================
bits   width field
====== ===== ====================================================================
0-13   14    start address: ``(addr & 0x3FFFF) >> 4``
16-29  14    leading-dimension byte offset (LBO) ``>> 4``
32-45  14    stride-dimension byte offset (SBO) ``>> 4``
49-51  3     base offset
62-63  2     layout type: 0 = INTERLEAVE (no swizzle), 1 = 128B, 2 = 64B, 3 = 32B
====== ===== ====================================================================

Conventions (those of ``layoutc.hopper``): a smem layout is ``Sw<B,4,3> o off o L`` (or a plain Layout ``L``), its
coordinates are (MN, K[, stage modes...]), ``L`` gives element offsets and the swizzle acts on ABSOLUTE byte addresses:
``byte_address(layout, dtype, c, base) = Sw(base + elem_bytes * (off + L(c)))``.  ``base`` (``base_address`` here)
is the smem address of element offset 0.

Derivation (what CUTLASS's ``make_gmma_desc`` does, re-done here on layoutc's algebra):

1. cut the tile one wgmma reads out of the layout with ``zipped_divide`` by ``(mn, k)``: ``k`` = 32 bytes of K
   (16 f16/bf16, 32 e4m3/e5m2/s8/u8, 8 tf32), ``mn`` = 64 for A, N for B (see :func:`wgmma_tiles`);
2. recast the element tile to 16-byte units (``upcast``), after checking that the 16 bytes of a core-matrix row
   are contiguous (K for K-major, MN for MN-major), so every stride is then in the descriptor's ``>> 4`` units;
3. match the canonical forms (in 16-byte units, W = swizzle width / 16 B):

   - K-major:             ``((8,m),2) : ((W,SBO),LBO)``; swizzled modes need LBO = 1 (the K chunks are adjacent in
     the swizzle row; wgmma ignores the field, CUTLASS writes 1 and so do we);
   - MN-major, swizzled:  ``((W,m),(8,2)) : ((1,LBO),(W,SBO))``;
   - MN-major, INTER:     ``(m,(8,2)) : (SBO,(1,LBO))`` -- LBO and SBO swap roles against the swizzled modes;

4. the start address is the PRE-swizzle byte address of the tile's (0,0) element: ``base + bytes(off + L(origin))``
   (the hardware applies the swizzle itself, as on every address it forms).

Design decisions:

- ``base_offset`` is always 0.  A swizzled layout whose base is not on the pattern's repeat (1024/512/256 B), or a
  tile whose start is not in row 0 of a repeat, is REFUSED rather than described with a non-zero base_offset: the
  PTX definition ``(addr >> 7) & 7`` is unverified on hardware (reference §2.4), CUTLASS never emits it, and a base
  such as 0x410 (not even a 128-byte row boundary) has no base_offset at all.  Refusing never yields a wrong
  descriptor.  ``WgmmaDescriptor`` still encodes/decodes the field.
- Every field is CUTLASS's ``make_gmma_desc`` value, bit for bit, including the ones wgmma ignores: a field that the
  tile never uses (SBO when the tile has one 8-row group or one 16-byte MN chunk, LBO of a swizzled MN-major tile at
  most one swizzle row wide) is 0 -- CUTLASS divides the tile by the canonical (8 or W) block and a size-1 rest mode
  has stride 0 -- and the LBO of a swizzled K-major tile is 1 (16 B), the stride CUTLASS asserts.
- A swizzled MN-major tile narrower than one swizzle row (N = 8..56 of a SW128 B) is accepted as CUTLASS does: its
  chunks are the first (or, for a later tile, the next) ones of each K row.
- With a larger layout (a (128,64) stage, a (128,64,3) buffer), :func:`make_descriptor` takes the tile of the first
  wgmma: MN rows ``[0, mn)``, K ``[0, k)``, stage index 0; :class:`DescriptorIterator` gives all the others.  ``mn``
  defaults to 64, CuTe's warpgroup atom (the whole MN extent when that is below 64): pass ``mn=N`` for a B tile.
- :func:`descriptor_fragment` gives CuTe's own view: the tensor of descriptors ``make_fragment_A(partition_A(sA))``
  indexed by CuTe's (MMA, MMA_M, MMA_K, PIPE) coordinates.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import LayoutError
from ..algebra import composition
from ..int_tuple import idx2crd, is_int, leaves
from ..layout import Layout, _, has_underscore, coalesce, make_layout, modes, slice_layout, slice_offset
from ..notation import to_str
from ..recast import upcast
from ..swizzle import ComposedLayout
from ..tiling import logical_divide, zipped_divide
from .dtypes import DType, dtype as _dtype
from .fragments import wgmma_n_values
from .gmma import Major, SwizzleMode
from .smem import split_smem_layout

__all__ = [
    "DescriptorError", "WgmmaDescriptor", "DescriptorVerdict", "WgmmaStep", "DescriptorIterator",
    "descriptor_verdict", "make_descriptor", "wgmma_tiles", "wgmma_k", "core_matrix_addresses",
    "DescriptorFragment", "descriptor_fragment",
]

_FIELD = (1 << 14) - 1  # the three 14-bit fields
_ADDR_MASK = 0x3FFFF  # 18 bits: the CTA-local smem window (cluster ranks sit in bits 24+)
# layout type (bits 62-63) per swizzle mode; note the order: 128B is 1, 32B is 3
_LAYOUT_TYPE = {SwizzleMode.INTER: 0, SwizzleMode.SW128: 1, SwizzleMode.SW64: 2, SwizzleMode.SW32: 3}
_MODE_OF_TYPE = {v: k for k, v in _LAYOUT_TYPE.items()}
# CuTe's GMMA::LayoutType names, as its print(GmmaDescriptor) shows them
_CUTE_LAYOUT_TYPE = {SwizzleMode.INTER: "INTERLEAVE", SwizzleMode.SW128: "B128", SwizzleMode.SW64: "B64",
                     SwizzleMode.SW32: "B32"}
_RESERVED = (0b11 << 14) | (0b11 << 30) | (0b111 << 46) | (((1 << 10) - 1) << 52)
# wgmma smem operand types (sm_90): 16-bit floats, tf32, fp8, 8-bit ints.  Only f16/bf16 may be MN-major.
_WGMMA_TYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
_TRANSPOSABLE = ("f16", "bf16")
_K_BYTES = 32  # one wgmma k-step reads 32 bytes of K: k16 for 16-bit, k32 for 8-bit, k8 for tf32
_MAX_N = 256


class DescriptorError(LayoutError):
    """A wgmma descriptor that cannot be built or encoded; ``condition`` says exactly why."""


# ----------------------------------------------------------------------------------------------------------------
# The 64-bit word
# ----------------------------------------------------------------------------------------------------------------

class _Field(str):
    """A descriptor field shown as written (``start=0x408``) in error messages, not as a quoted string."""

    def __repr__(self) -> str:
        return str(self)


def _check_bytes(name: str, value, limit: int | None, operands) -> None:
    if not is_int(value) or isinstance(value, bool):
        raise DescriptorError("WgmmaDescriptor", operands, f"{name} must be an int, got {value!r}")
    if value < 0:
        raise DescriptorError("WgmmaDescriptor", operands, f"{name} = {value} is negative")
    if value % 16:
        raise DescriptorError("WgmmaDescriptor", operands,
                              f"{name} = {value:#x} is not 16-byte aligned (the field drops 4 bits, silently)")
    if limit is not None and value >> 4 > limit:
        raise DescriptorError("WgmmaDescriptor", operands,
                              f"{name} = {value} B does not fit the 14-bit field (max {limit << 4} B)")


@dataclass(frozen=True)
class WgmmaDescriptor:
    """The fields of a wgmma smem matrix descriptor, in bytes.

    ``WgmmaDescriptor(0x400, 16, 1024, 0, SwizzleMode.SW128).encode()`` → ``0x4000004000010040`` (the K-major SW128
    bf16 tile at 0x400: start field 0x40, LBO field 1, SBO field 64, layout type 1).

    Pre (checked at construction, DescriptorError otherwise): ``start_address``, ``lbo``, ``sbo`` are non-negative
    multiples of 16; ``lbo``/``sbo`` fit 14 bits after ``>> 4``; ``base_offset`` in 0..7; ``swizzle`` a SwizzleMode
    (or anything ``SwizzleMode.of`` accepts).  ``start_address`` may exceed 256 KiB (a cluster-mapped address):
    ``encode`` masks it with ``0x3FFFF`` as the hardware field requires.
    Post: ``decode(encode(d)) == d`` whenever ``start_address < 2**18``.
    """

    start_address: int
    lbo: int
    sbo: int
    base_offset: int = 0
    swizzle: SwizzleMode = SwizzleMode.INTER

    def __post_init__(self):
        ops = tuple(_Field(f"{name}={hex(v) if is_int(v) and not isinstance(v, bool) else repr(v)}") for name, v in
                    (("start", self.start_address), ("lbo", self.lbo), ("sbo", self.sbo),
                     ("base_offset", self.base_offset))) + (_Field(getattr(self.swizzle, "name", self.swizzle)),)
        _check_bytes("start_address", self.start_address, None, ops)
        _check_bytes("LBO", self.lbo, _FIELD, ops)
        _check_bytes("SBO", self.sbo, _FIELD, ops)
        if not is_int(self.base_offset) or isinstance(self.base_offset, bool) or not 0 <= self.base_offset <= 7:
            raise DescriptorError("WgmmaDescriptor", ops, f"base_offset {self.base_offset!r} is not in 0..7 (3 bits)")
        if not isinstance(self.swizzle, SwizzleMode):
            object.__setattr__(self, "swizzle", SwizzleMode.of(self.swizzle))

    @property
    def layout_type(self) -> int:
        """Bits 62-63: 0 INTERLEAVE, 1 128B, 2 64B, 3 32B."""
        return _LAYOUT_TYPE[self.swizzle]

    def fields(self) -> dict:
        """The encoded field values: ``{'start': 0x40, 'lbo': 1, 'sbo': 64, 'base_offset': 0, 'layout_type': 1}``."""
        return {"start": (self.start_address & _ADDR_MASK) >> 4, "lbo": self.lbo >> 4, "sbo": self.sbo >> 4,
                "base_offset": self.base_offset, "layout_type": self.layout_type}

    def encode(self) -> int:
        """The 64-bit descriptor word (see the module table).  Post: ``0 <= result < 2**64``, reserved bits 0."""
        f = self.fields()
        return (f["start"] | f["lbo"] << 16 | f["sbo"] << 32 | f["base_offset"] << 49 | f["layout_type"] << 62)

    def __int__(self) -> int:
        return self.encode()

    @classmethod
    def decode(cls, value: int) -> "WgmmaDescriptor":
        """Fields of a 64-bit descriptor word: ``decode(0x4000004000010040)`` → start 0x400, LBO 16, SBO 1024,
        base_offset 0, SW128.  Pre: ``0 <= value < 2**64`` with the reserved bits (14-15, 30-31, 46-48, 52-61) 0
        (DescriptorError names the set bits otherwise).  Post: ``decode(v).encode() == v``."""
        if not is_int(value) or isinstance(value, bool) or not 0 <= value < 1 << 64:
            raise DescriptorError("WgmmaDescriptor.decode", (value,), "a descriptor is an int in [0, 2**64)")
        if value & _RESERVED:
            bits = [i for i in range(64) if (value & _RESERVED) >> i & 1]
            raise DescriptorError("WgmmaDescriptor.decode", (hex(value),),
                                  f"reserved bits {bits} are set (sm_90 requires 0 there)")
        return cls(start_address=(value & _FIELD) << 4, lbo=((value >> 16) & _FIELD) << 4,
                   sbo=((value >> 32) & _FIELD) << 4, base_offset=(value >> 49) & 7,
                   swizzle=_MODE_OF_TYPE[(value >> 62) & 3])

    def with_start(self, start_address: int) -> "WgmmaDescriptor":
        """The same descriptor at another start address (LBO, SBO, swizzle kept)."""
        return WgmmaDescriptor(start_address, self.lbo, self.sbo, self.base_offset, self.swizzle)

    def cute_str(self) -> str:
        """The descriptor as CuTe's ``print(GmmaDescriptor)`` prints it (field values, not bytes)::

            GmmaDescriptor: 0x4000004000010040
              start_addr :  0x0040
              leading_off:  0x0001 (1)
              stride_off :  0x0040 (64)
              base_offset:  0x0
              layout_type:  0x1 (B128)
        """
        f = self.fields()
        return (f"GmmaDescriptor: 0x{self.encode():016x}\n"
                f"  start_addr :  0x{f['start']:04x}\n"
                f"  leading_off:  0x{f['lbo']:04x} ({f['lbo']})\n"
                f"  stride_off :  0x{f['sbo']:04x} ({f['sbo']})\n"
                f"  base_offset:  0x{f['base_offset']:01x}\n"
                f"  layout_type:  0x{f['layout_type']:01x} ({_CUTE_LAYOUT_TYPE[self.swizzle]})")

    def __str__(self) -> str:
        f = self.fields()
        return (f"WgmmaDescriptor(start=0x{self.start_address:x}, LBO={self.lbo} B, SBO={self.sbo} B, "
                f"base_offset={self.base_offset}, swizzle={self.swizzle.name}) = 0x{self.encode():016x} "
                f"[start>>4=0x{f['start']:x}, lbo>>4={f['lbo']}, sbo>>4={f['sbo']}, type={f['layout_type']}]")


# ----------------------------------------------------------------------------------------------------------------
# Tiles of one instruction
# ----------------------------------------------------------------------------------------------------------------

def wgmma_k(element) -> int:
    """Elements of K one wgmma reads (32 bytes): ``wgmma_k('bf16')`` → 16, ``'e4m3'`` → 32, ``'tf32'`` → 8.

    Pre: a wgmma smem operand type (f16, bf16, tf32, e4m3, e5m2, s8, u8); DescriptorError otherwise.
    """
    t = _dtype(element)
    reason = _dtype_reason(t, Major.K)
    if reason:
        raise DescriptorError("wgmma_k", (t.name,), reason)
    return _K_BYTES * 8 // t.bits


def _dtype_reason(t: DType, major: Major) -> str | None:
    if t.name not in _WGMMA_TYPES:
        hint = " (use 'tf32': same 32-bit storage)" if t.name == "f32" else ""
        return (f"dtype {t.name} is not a wgmma smem operand type{hint}; wgmma reads "
                f"{', '.join(_WGMMA_TYPES)}")
    if major is Major.MN and t.name not in _TRANSPOSABLE:
        return (f"MN-major operand with {t.name}: only f16/bf16 support the transpose (imm-trans); "
                f"{t.name} operands must be K-major")
    return None


def _with_stage_mode(inner: Layout) -> Layout:
    """(MN, K, S): all modes past K grouped into one stage mode S (``1:0`` when there are none), so that one int
    indexes the stages of a (MN, K, stage...) buffer colexicographically, as CuTe does for a hierarchical mode."""
    ms = modes(inner)
    if len(ms) == 2:
        return make_layout(ms[0], ms[1], Layout(1, 0))
    if len(ms) == 3:
        return inner
    return make_layout(ms[0], ms[1], make_layout(*ms[2:]))


_WARPGROUP_M = 64  # CuTe's SM90 GMMA atoms are 64 x N x K: the A tile of one warpgroup is 64 rows


def _default_mn(mn_extent: int) -> int:
    # CuTe's warpgroup atom: an A tile is 64 rows (and so is the descriptor CUTLASS's make_gmma_desc sees for A).
    # A layout of fewer rows can only be a B operand of N = its extent.  A B tile of N >= 64 rows needs mn=N.
    return _WARPGROUP_M if mn_extent >= _WARPGROUP_M else mn_extent


def wgmma_tiles(layout, element, major, mn: int | None = None):
    """The layout divided into per-instruction tiles: ``zipped_divide((MN, K, S), (mn, k))`` →
    ``((tile_mn, tile_k), (mn_blocks, k_steps, S))``, the swizzle and offset kept.

    ``wgmma_tiles(Sw<3,4,3> o 0 o ((8,16),(64,1),(1,3)):((64,512),(1,0),(0,8192)), 'bf16', 'K', mn=64)`` →
    ``Sw<3,4,3> o 0 o ((64,16),(2,4,(1,3))):((64,1),(4096,16,(0,8192)))``: tile (64 rows, k16), rest
    (2 m64 blocks, 4 k-steps, 3 stages).  Modes past K are grouped into the one stage mode S (``1:0`` if none).
    ``mn`` = 64 for A, N for B; default 64 (CuTe's warpgroup atom), or the whole MN extent when that is below 64.
    Post: ``tiles((_,_),(i,j,s))`` is the (mn, k) tile of m-block i, k-step j, stage s (colex index over the stage
    modes), with the same function as the layout on those coordinates.
    Pre: rank >= 2; ``mn`` divides the MN extent and ``k`` the K extent (DescriptorError otherwise).
    """
    t = _dtype(element)
    maj = Major.of(major)
    reason = _dtype_reason(t, maj)
    if reason:
        raise DescriptorError("wgmma_tiles", (layout, t.name, maj.value), reason)
    sw, off, inner = split_smem_layout(layout)
    tiles, reason = _tiles(inner, t, mn)
    if reason:
        raise DescriptorError("wgmma_tiles", (layout, t.name, maj.value), reason)
    return tiles if sw is None else ComposedLayout(sw, off, tiles)


def _tiles(inner: Layout, t: DType, mn: int | None):
    """(zipped tiles, None) or (None, reason)."""
    if inner.rank < 2:
        return None, (f"the layout {inner} has rank {inner.rank}; a wgmma operand layout has (MN, K[, stage...]) "
                      "modes")
    k = _K_BYTES * 8 // t.bits
    mn_extent, k_extent = inner[0].size, inner[1].size
    if k_extent < k:
        return None, (f"K tile too narrow: the layout has K = {k_extent} {t.name} ({k_extent * t.bits // 8} B) but "
                      f"one wgmma k-step reads K = {k} {t.name} ({_K_BYTES} B)")
    if k_extent % k:
        return None, (f"dtype/K mismatch: K extent {k_extent} is not a multiple of the wgmma k-step of "
                      f"{k} {t.name} ({_K_BYTES} B)")
    default = mn is None
    if default:
        mn = _default_mn(mn_extent)
    if not is_int(mn) or isinstance(mn, bool) or mn <= 0 or mn % 8:
        return None, f"core-matrix shape: the MN tile {mn!r} is not a positive multiple of 8 rows"
    if mn > _MAX_N:
        return None, f"MN tile {mn} is larger than any wgmma operand (A: 64 rows, B: N <= 256)"
    if mn_extent % mn:
        hint = (f" (the default tile is CuTe's {_WARPGROUP_M}-row warpgroup atom of A; for a B operand pass "
                f"mn=N)") if default else ""
        return None, f"MN extent {mn_extent} of the layout is not a multiple of the MN tile {mn}{hint}"
    try:
        return zipped_divide(_with_stage_mode(inner), (mn, k)), None
    except LayoutError as e:  # a layout the divide cannot cut (e.g. a hierarchical mode that does not split)
        return None, f"cannot cut a ({mn}, {k}) tile out of the layout: {e}"


# ----------------------------------------------------------------------------------------------------------------
# Verdict
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class DescriptorVerdict:
    """Whether (and why not) a smem layout is one wgmma operand tile.

    ``ok``: a descriptor exists; ``reasons``: what is wrong, the FIRST one the blocking cause (empty when ok);
    ``descriptor``: the WgmmaDescriptor when ok, else None; ``tile``: the (mn, k) tile examined, in CuTe notation;
    ``notes``: facts worth knowing that are not errors (an unused field and the value emitted for it).
    ``bool(verdict)`` is ``verdict.ok``.
    """

    ok: bool
    reasons: list = field(default_factory=list)
    descriptor: WgmmaDescriptor | None = None
    tile: str | None = None
    notes: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            text = f"ok: {self.descriptor}"
        else:
            text = "not a wgmma operand: " + "; ".join(self.reasons)
        if self.tile:
            text += f" (tile {self.tile})"
        for n in self.notes:
            text += f"\n  note: {n}"
        return text


class _Reject(Exception):
    """Internal: the first structural reason a tile is not canonical."""


def _leaf_pairs(layout: Layout):
    return list(zip(leaves(layout.shape), leaves(layout.stride)))


def _one_stride(layout: Layout):
    """(size, stride) of a layout that is a single stride after coalescing, else None."""
    c = coalesce(layout)
    if is_int(c.shape):
        return c.shape, (c.stride if c.shape > 1 else 0)
    return None


def _units(n: int) -> str:
    return f"{n * 16} B"


def _analyze_tile(tile: Layout, t: DType, major: Major, mode: SwizzleMode):
    """(lbo_units, sbo_units, notes) of an element tile (rank 2: MN, K), or _Reject(reason).
    Post: a fresh notes list each call (the analysis itself is memoized)."""
    lbo, sbo, notes = _analyzed_tile(tile, t, major, mode)
    return lbo, sbo, list(notes)


@functools.lru_cache(maxsize=1024)
def _analyzed_tile(tile: Layout, t: DType, major: Major, mode: SwizzleMode):
    # memoized: a DescriptorIterator asks for every (stage, MN block, k-step) tile, and those tiles differ only in
    # their offset (taken apart by the caller), so one buffer's 20 steps are one analysis (which enumerates every
    # 16-byte row of the tile to rule out aliasing)
    T = 128 // t.bits  # elements per 16 bytes
    W = mode.width_bytes // 16  # swizzle width in 16-byte units
    eb = t.bits // 8
    notes = []
    names = ("MN", "K")
    # Every element needs its own address: a broadcast (stride 0) mode cannot be described.
    for i, m in enumerate(modes(tile)):
        for s, d in _leaf_pairs(m):
            if s > 1 and d == 0:
                raise _Reject(f"broadcast stride: the {names[i]} mode {m} of the tile has a stride-0 sub-mode of "
                              f"size {s}; wgmma reads every element of a tile from its own smem address")
            if d < 0:
                raise _Reject(f"stride wgmma cannot express: the {names[i]} mode {m} has the negative stride {d}")
    c = coalesce(tile, (1, 1))
    # The 16 bytes of a core-matrix row must be contiguous: K elements for K-major, MN elements for MN-major.
    vec_mode = 1 if major is Major.K else 0
    s0, d0 = _leaf_pairs(c[vec_mode])[0]
    if d0 != 1 or s0 % T:
        other = 1 - vec_mode
        hint = ""
        if any(d == 1 for _s, d in _leaf_pairs(c[other])):
            # suggest the transpose only where wgmma has one (imm-trans: 16-bit types); fp8/tf32/int8 must be K-major
            hint = (f" (the {names[other]} mode is the contiguous one: major={names[other]!r}?)"
                    if vec_mode == 0 or t.name in _TRANSPOSABLE else
                    f" (the MN mode is the contiguous one, but {t.name} operands must be K-major: only f16/bf16 "
                    "have the transpose; lay the tile out with K contiguous, e.g. a K-major GMMA atom)")
        raise _Reject(f"core-matrix shape: not {major.value}-major: the tile's {names[vec_mode]} mode {c[vec_mode]} "
                      f"does not start with {T} contiguous {t.name} (16 B, one core-matrix row){hint}")
    for i, m in enumerate(modes(c)):
        for j, (s, d) in enumerate(_leaf_pairs(m)):
            if (i, j) != (vec_mode, 0) and d % T:
                raise _Reject(f"stride wgmma cannot express: the {names[i]} stride {d} {t.name} = {d * eb} B is not a "
                              "multiple of 16 B (descriptor offsets are in 16-byte units)")
    # Exact now: the contiguous leaf is a multiple of T at stride 1, every other stride a multiple of T.
    u = upcast(c, T)
    pairs = _leaf_pairs(u)
    strides = [d for _s, d in pairs]
    offsets = [sum(x * d for x, d in zip(idx, strides)) for idx in itertools.product(*[range(s) for s, _d in pairs])]
    if len(set(offsets)) != len(offsets):
        raise _Reject(f"aliasing: the tile {tile} maps two 16-byte core-matrix rows to the same smem bytes; "
                      "in 16-byte units it is " + str(u))
    mn_u, k_u = u[0], u[1]
    if major is Major.K:
        lead = _one_stride(logical_divide(mn_u, 8)[0])
        if lead is None or lead[1] != W:
            got = (f"{_units(lead[1])} apart" if lead else f"not evenly spaced ({logical_divide(mn_u, 8)[0]} "
                   "in 16-B units)")
            why = ("the 8 rows of a core matrix are 128 contiguous bytes" if mode is SwizzleMode.INTER
                   else f"one {mode.width_bytes}-byte swizzle row per row")
            raise _Reject(f"8-row stride: rows 0..7 of the tile are {got}, but {mode.name} K-major needs "
                          f"consecutive rows {_units(W)} apart ({why})")
        rest = _one_stride(logical_divide(mn_u, 8)[1])
        if rest is None:
            raise _Reject(f"stride wgmma cannot express: the 8-row groups of the tile are not evenly spaced "
                          f"({logical_divide(mn_u, 8)[1]} in 16-B units); SBO is a single stride "
                          "(not an atom tiling?)")
        if rest[0] == 1:
            sbo = 0
            notes.append("SBO unused (one 8-row group); emitted 0, as CUTLASS does")
        else:
            sbo = rest[1]
        kk = _one_stride(k_u)
        lbo = kk[1]
        if mode is not SwizzleMode.INTER and lbo != 1:
            raise _Reject(f"stride wgmma cannot express: the two 16-B K chunks of a k-step are {_units(lbo)} apart; "
                          f"in a {mode.name} K-major row they must be adjacent (16 B)")
        if mode is not SwizzleMode.INTER:
            notes.append("LBO is ignored by wgmma for swizzled K-major; emitted 16 B (field 1) as CUTLASS does")
        return lbo, sbo, notes
    # MN-major (16-bit only).
    k_split = logical_divide(k_u, 8)
    lead = _one_stride(k_split[0])
    if lead is None or lead[1] != W:
        got = f"{_units(lead[1])} apart" if lead else f"not evenly spaced ({k_split[0]} in 16-B units)"
        why = ("the 8 K-rows of a core matrix are 128 contiguous bytes" if mode is SwizzleMode.INTER
               else f"one {mode.width_bytes}-byte swizzle row per K-row")
        raise _Reject(f"8-row stride: K rows 0..7 of the tile are {got}, but {mode.name} MN-major needs consecutive "
                      f"K rows {_units(W)} apart ({why})")
    k_rest = _one_stride(k_split[1])
    if k_rest is None:
        raise _Reject(f"stride wgmma cannot express: the two 8-row K groups are not one stride ({k_split[1]})")
    if mode is SwizzleMode.INTER:
        # ((T,1,m),(8,k)) : ((1,T,SBO),(T,LBO)): MN core matrices at SBO, K groups at LBO.
        mn_rest = _one_stride(mn_u)
        if mn_rest is None:
            raise _Reject(f"stride wgmma cannot express: the 16-B MN chunks of the tile are not evenly spaced "
                          f"({mn_u} in 16-B units); SBO is a single stride (not an atom tiling?)")
        if mn_rest[0] == 1:
            sbo = 0
            notes.append("SBO unused (one 16-B MN chunk); emitted 0, as CUTLASS does")
        else:
            sbo = mn_rest[1]
        return k_rest[1], sbo, notes
    # Swizzled: ((T,W,m),(8,k)) : ((1,T,LBO),(W*T,SBO)): W-unit MN rows at LBO, K groups at SBO.
    if mn_u.size < W:
        # A tile narrower than one swizzle row (N = 8..56 of a SW128 B): its 16-B chunks are the first ones of each
        # K row, wgmma never steps to a next MN row, and CUTLASS's divide by W leaves a size-1 rest (LBO 0).
        run = _one_stride(mn_u)
        if run is None or (run[0] > 1 and run[1] != 1):
            raise _Reject(f"core-matrix shape: the {mn_u.size} 16-B MN chunks of the tile ({mn_u} in 16-B units) "
                          f"are not contiguous inside the {mode.width_bytes}-byte {mode.name} row")
        notes.append(f"LBO unused (the tile is narrower than one {mode.width_bytes}-byte MN row); emitted 0, "
                     "as CUTLASS does")
        return 0, k_rest[1], notes
    if mn_u.size % W:
        raise _Reject(f"core-matrix shape: the MN tile ({mn_u.size * T} {t.name} = {mn_u.size * 16} B) is not a "
                      f"multiple of the {mode.width_bytes}-byte {mode.name} row ({W * T} {t.name})")
    mn_split = logical_divide(mn_u, W)
    row = _one_stride(mn_split[0])
    if row is None or row[1] != 1:
        raise _Reject(f"core-matrix shape: the {W * T} MN elements of one {mode.name} row are not contiguous "
                      f"({mn_split[0]} in 16-B units)")
    mn_rest = _one_stride(mn_split[1])
    if mn_rest is None:
        raise _Reject(f"stride wgmma cannot express: the {mode.width_bytes}-byte MN rows are not evenly spaced "
                      f"({mn_split[1]} in 16-B units); LBO is a single stride (not an atom tiling?)")
    if mn_rest[0] == 1:
        lbo = 0
        notes.append(f"LBO unused (one {mode.width_bytes}-byte MN row); emitted 0, as CUTLASS does")
    else:
        lbo = mn_rest[1]
    return lbo, k_rest[1], notes


def _prechecks(layout, element, major, base_address):
    """(t, major, sw, mode, off, inner, reasons): the checks that do not need the tile."""
    reasons = []
    try:
        t = _dtype(element)
    except LayoutError as e:
        return None, None, None, None, None, None, [f"dtype: {e.condition}"]
    try:
        maj = Major.of(major)
    except LayoutError as e:
        return t, None, None, None, None, None, [f"major: {e.condition}"]
    r = _dtype_reason(t, maj)
    if r:
        reasons.append(r)
    try:
        sw, off, inner = split_smem_layout(layout)
    except LayoutError:
        return t, maj, None, None, None, None, reasons + [
            f"not a smem layout: expected a Layout or Sw<B,4,3> o offset o Layout, got {layout!r}"]
    mode = SwizzleMode.INTER
    if sw is not None:
        try:
            mode = SwizzleMode.from_swizzle(sw)
        except LayoutError:
            hint = ""
            if sw.shift == 3 and sw.bits <= 3 and sw.base < 4:
                hint = (f"; {sw} looks like an element-offset swizzle, the smem convention puts the byte-address "
                        f"Sw<{sw.bits},4,3> outside")
            reasons.append(f"swizzle {sw} is not a wgmma swizzle: wgmma/TMA patterns are Sw<B,4,3> (B = 0..3) on "
                           f"byte addresses{hint}")
            mode = None
    if not is_int(base_address) or base_address < 0:
        reasons.append(f"base address {base_address!r} is not a non-negative int")
    elif base_address % 16:
        reasons.append(f"misaligned base: 0x{base_address:x} is not 16-byte aligned (descriptor addresses drop "
                       "4 bits)")
    elif mode is not None and mode is not SwizzleMode.INTER and base_address % mode.repeat_bytes:
        reasons.append(f"misaligned base: 0x{base_address:x} is not on the {mode.name} swizzle repeat "
                       f"({mode.repeat_bytes} B); it would need a non-zero base_offset, which is refused "
                       f"(unverified on hardware) -- align the buffer to {mode.repeat_bytes} B")
    return t, maj, sw, mode, off, inner, reasons


def _tile_verdict(t, maj, mode, off, tiles, coord, base_address) -> DescriptorVerdict:
    """Verdict of one tile of the zipped layout ``tiles`` at rest coordinate ``coord`` = (mn_block, k, stage)."""
    sel = ((_, _), coord)
    try:
        tile = slice_layout(sel, tiles)
        tile_off = off + slice_offset(sel, tiles)
    except LayoutError as e:
        return DescriptorVerdict(False, [f"cannot take tile {coord}: {e}"])
    return _described(t, maj, mode, tile, tile_off, base_address)


def _described(t, maj, mode, tile: Layout, tile_off: int, base_address: int) -> DescriptorVerdict:
    """Verdict of one (MN, K) element tile whose (0,0) element is at element offset ``tile_off`` from the base."""
    shown = str(tile) if not tile_off else f"{tile_off} o {tile}"
    try:
        lbo_u, sbo_u, notes = _analyze_tile(tile, t, maj, mode)
    except _Reject as r:
        return DescriptorVerdict(False, [str(r)], tile=shown)
    eb8 = tile_off * t.bits
    if eb8 % 128:
        return DescriptorVerdict(False, [f"misaligned tile: its start is element {tile_off} = {eb8 / 8:g} B, not a "
                                         "multiple of 16 B"], tile=shown)
    start = base_address + eb8 // 8
    if mode is not SwizzleMode.INTER:
        # base is on the repeat (prechecked), so the tile's place in its pattern is (start % repeat).
        rel = start % mode.repeat_bytes
        row, chunk = divmod(rel, mode.width_bytes)
        chunk //= 16
        W = mode.width_bytes // 16
        if row:
            return DescriptorVerdict(False, [
                f"misaligned tile: it starts in row {row} of a {mode.repeat_bytes}-byte {mode.name} pattern (byte "
                f"{rel}); that needs base_offset != 0, which is refused"], tile=shown)
        # the 16-B chunks one core-matrix row reads inside its swizzle row: the two K chunks of a K-major k-step,
        # the MN chunks of an MN-major tile (a whole row, or the narrow tile's chunks)
        chunks = 2 if maj is Major.K else min(W, tile[0].size * t.bits // 128)
        if chunk + chunks > W:
            return DescriptorVerdict(False, [
                f"misaligned tile: it starts at 16-B chunk {chunk} of a {mode.width_bytes}-byte swizzle row, so its "
                "core-matrix rows would run past the row"], tile=shown)
    for name, v in (("LBO", lbo_u), ("SBO", sbo_u)):
        if v > _FIELD:
            return DescriptorVerdict(False, [f"stride wgmma cannot express: {name} = {v * 16} B does not fit the "
                                             f"14-bit field (max {_FIELD * 16} B)"], tile=shown)
    desc = WgmmaDescriptor(start, lbo_u * 16, sbo_u * 16, 0, mode)
    return DescriptorVerdict(True, [], desc, shown, notes)


def descriptor_verdict(layout, element, major, base_address: int = 0, *, mn: int | None = None) -> DescriptorVerdict:
    """Can wgmma read this smem layout (its first tile) through a descriptor, and with which one?

    ``descriptor_verdict(Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0)), 'bf16', 'K', 0x400)`` → ok, descriptor
    start 0x400, LBO 16, SBO 1024, SW128;  ``descriptor_verdict((64,64):(64,1), 'bf16', 'K')`` → not ok, first reason
    ``8-row stride: rows 0..7 of the tile are 128 B apart, but INTER K-major needs consecutive rows 16 B apart ...``.

    The tile examined is that of the first wgmma: MN rows ``[0, mn)`` (``mn`` = 64 for A, N for B; default 64, CuTe's
    warpgroup atom, or the whole MN extent when that is below 64), K ``[0, 32 bytes)``, stage 0 of any further modes.
    ``base_address`` is the smem byte address of the layout's element offset 0.
    Post: never raises for a bad layout; ``ok`` iff ``descriptor`` is a descriptor whose addressing
    (:func:`core_matrix_addresses`) equals ``byte_address(layout, element, coord, base_address)`` on the tile;
    otherwise ``reasons[0]`` names the first thing wrong (type, swizzle, base alignment, K/MN extents, broadcast,
    contiguity, 8-row stride, uneven strides, tile start).
    """
    t, maj, sw, mode, off, inner, reasons = _prechecks(layout, element, major, base_address)
    if inner is None or maj is None:
        return DescriptorVerdict(False, reasons)
    tiles, reason = _tiles(inner, t, mn)
    if reason:
        reasons.append(reason)
    if reasons:
        return DescriptorVerdict(False, reasons)
    return _tile_verdict(t, maj, mode, off, tiles, (0, 0, 0), base_address)


def make_descriptor(layout, element, major, base_address: int = 0, *, mn: int | None = None) -> WgmmaDescriptor:
    """The descriptor of the first wgmma tile of a smem layout (see :func:`descriptor_verdict` for the tile taken).

    ``make_descriptor(gmma_smem_layout('K','SW128','bf16',(128,64)), 'bf16', 'K', 0x400).encode()`` →
    ``0x4000004000010040``;  ``make_descriptor(gmma_smem_layout('MN','SW128','bf16',(128,64)), 'bf16', 'MN', mn=128)``
    → start 0, LBO 1024 (next 64-element MN row), SBO 2048 (next 8 K-rows), SW128; with the default 64-row tile the
    tile is one 128-byte MN row, so LBO is unused and 0 (CUTLASS's value).
    Post: addressing equals the layout's on the tile; raises DescriptorError carrying the verdict's first reason.
    """
    v = descriptor_verdict(layout, element, major, base_address, mn=mn)
    if not v.ok:
        raise DescriptorError("make_descriptor", (layout, str(element), str(major), base_address), v.reasons[0])
    return v.descriptor


# ----------------------------------------------------------------------------------------------------------------
# Stepping through a stage / buffer
# ----------------------------------------------------------------------------------------------------------------

class WgmmaStep(NamedTuple):
    """One wgmma of a mainloop: its coordinates, descriptor, the 64-bit word and ``delta`` = the start-address
    field difference (16-B units) from the first step's word, i.e. what a mainloop adds to the low 32 bits."""

    stage: int
    mn_block: int
    k: int
    descriptor: WgmmaDescriptor
    value: int
    delta: int


class DescriptorIterator:
    """Descriptors of every wgmma tile of a smem buffer: K-steps, MN blocks (m64 blocks of A, N sub-blocks of B) and
    stages, each derived FROM the layout (the tile is cut with ``zipped_divide`` and its start is the layout's
    offset of the tile origin), and each checked like :func:`descriptor_verdict`.

    ``it = DescriptorIterator(Sw<3,4,3> o 0 o ((8,16),(64,1),(1,3)):((64,512),(1,0),(0,8192)), 'bf16', 'K', 0x400,
    mn=64)``: ``it.shape`` → (3 stages, 2 m-blocks, 4 k-steps); ``it.descriptor(k=1).start_address`` → 0x420 (+32 B
    inside the 128-B swizzle row); ``it.descriptor(mn_block=1)`` → start 0x2400 (8 atoms of 1024 B further);
    ``it.descriptor(stage=2)`` → 0x400 + 2·16384.
    Post: every descriptor's addressing equals ``byte_address(layout, dtype, coord, base)`` on its tile; ``uniform``
    says whether LBO, SBO and swizzle agree across all steps (so advancing the start field alone is enough).
    Raises DescriptorError with the first reason of the first bad step.
    """

    def __init__(self, layout, element, major, base_address: int = 0, *, mn: int | None = None):
        t, maj, sw, mode, off, inner, reasons = _prechecks(layout, element, major, base_address)
        tiles = None
        if inner is not None and maj is not None and not reasons:
            tiles, reason = _tiles(inner, t, mn)
            if reason:
                reasons.append(reason)
        if reasons:
            raise DescriptorError("DescriptorIterator", (layout, str(element), str(major), base_address), reasons[0])
        self.layout = layout
        self.dtype = t
        self.major = maj
        self.base_address = base_address
        self.tiles = tiles
        rest = tiles[1]
        self.mn = tiles[0][0].size
        self.k = tiles[0][1].size
        self.mn_blocks, self.k_steps, self.stages = rest[0].size, rest[1].size, rest[2].size
        self._steps = {}
        first = None
        for s in range(self.stages):
            for m in range(self.mn_blocks):
                for k in range(self.k_steps):
                    v = _tile_verdict(t, maj, mode, off, tiles, (m, k, s), base_address)
                    if not v.ok:
                        raise DescriptorError("DescriptorIterator", (layout, t.name, maj.value, base_address),
                                              f"step (stage {s}, mn_block {m}, k {k}): {v.reasons[0]}")
                    first = first or v.descriptor
                    self._steps[(s, m, k)] = v.descriptor
        self.first = first
        self.uniform = all((d.lbo, d.sbo, d.swizzle) == (first.lbo, first.sbo, first.swizzle)
                           for d in self._steps.values())

    @property
    def shape(self) -> tuple:
        """(stages, mn_blocks, k_steps)."""
        return self.stages, self.mn_blocks, self.k_steps

    def __len__(self) -> int:
        return len(self._steps)

    def descriptor(self, k: int = 0, mn_block: int = 0, stage: int = 0) -> WgmmaDescriptor:
        """The descriptor of k-step ``k`` of MN block ``mn_block`` in stage ``stage`` (IndexError when out of range)."""
        try:
            return self._steps[(stage, mn_block, k)]
        except KeyError:
            raise IndexError(f"(stage {stage}, mn_block {mn_block}, k {k}) is outside {self.shape}") from None

    __call__ = descriptor

    def tile_origin(self, k: int = 0, mn_block: int = 0, stage: int = 0) -> tuple:
        """The layout coordinate of the tile's (0,0) element: (mn_block·mn, k·k_elems, stage) (1-D per mode)."""
        return (mn_block * self.mn, k * self.k, stage)

    def step(self, k: int = 0, mn_block: int = 0, stage: int = 0) -> WgmmaStep:
        """One step as a WgmmaStep: ``it.step(k=1).delta`` → 2 for bf16 SW128 K-major (+32 B = 2 units).
        Post: ``step.value == it.first.encode() + step.delta`` whenever ``it.uniform``."""
        d = self.descriptor(k, mn_block, stage)
        return WgmmaStep(stage, mn_block, k, d, d.encode(),
                         ((d.start_address & _ADDR_MASK) - (self.first.start_address & _ADDR_MASK)) >> 4)

    def __iter__(self):
        """Steps in mainloop order: stage, then MN block, then k-step (innermost)."""
        for (s, m, k) in sorted(self._steps):
            yield self.step(k, m, s)

    def k_descriptors(self, mn_block: int = 0, stage: int = 0) -> list:
        """The descriptors of all k-steps of one MN block of one stage, in order."""
        return [self.descriptor(k, mn_block, stage) for k in range(self.k_steps)]


# ----------------------------------------------------------------------------------------------------------------
# Simulator
# ----------------------------------------------------------------------------------------------------------------

def core_matrix_addresses(desc, element, major, mn: int, k: int | None = None) -> list:
    """Byte address wgmma reads for each (mn, k) element of its tile, from the descriptor ALONE.

    ``core_matrix_addresses(WgmmaDescriptor(0x400, 16, 1024, 0, 'SW128'), 'bf16', 'K', 64)[1][0]`` → 0x490
    (row 1 at +128 B, its chunk 0 XOR row 1 → chunk 1).

    Model (the fields are read back from ``desc.encode()``, so the address is the 18-bit field's), with
    ``start``, ``LBO``, ``SBO`` in bytes, W = swizzle width in bytes, eb = element bytes:

    - K-major, element (i, j), K byte ``b = j·eb``:  INTER ``start + (i//8)·SBO + (i%8)·16 + (b//16)·LBO + b%16``;
      swizzled ``start + (i//8)·SBO + (i%8)·W + b``;
    - MN-major, MN byte ``b = i·eb``, chunk ``c = b//16``:  INTER ``start + c·SBO + (j%8)·16 + (j//8)·LBO + b%16``;
      swizzled ``start + (c % (W/16))·16 + (c // (W/16))·LBO + (j%8)·W + (j//8)·SBO + b%16``;

    then the byte-address ``Sw<B,4,3>`` of the layout type is applied to that ABSOLUTE address, as the hardware's
    pattern is a function of address bits (verified on H100 for SW128 K-major with k-steps, reference §2.3).
    Pre: base_offset 0 (a non-zero one is not modelled); ``k <= `` the instruction's K (default: all of it);
    MN-major only for f16/bf16.  Post: a list of ``mn`` rows of ``k`` ints.
    """
    d = WgmmaDescriptor.decode(desc if is_int(desc) else desc.encode())
    t = _dtype(element)
    maj = Major.of(major)
    reason = _dtype_reason(t, maj)
    if reason:
        raise DescriptorError("core_matrix_addresses", (str(desc), t.name, maj.value), reason)
    kmax = _K_BYTES * 8 // t.bits
    k = kmax if k is None else k
    if not (is_int(k) and 0 < k <= kmax) or not (is_int(mn) and mn > 0):
        raise DescriptorError("core_matrix_addresses", (str(desc), t.name, maj.value, mn, k),
                              f"tile ({mn}, {k}) is not within one wgmma (K <= {kmax})")
    if d.base_offset:
        raise DescriptorError("core_matrix_addresses", (str(desc),), "base_offset != 0 is not modelled")
    eb = t.bits // 8
    wb = d.swizzle.width_bytes
    sw = d.swizzle.swizzle
    swizzled = d.swizzle is not SwizzleMode.INTER
    out = []
    for i in range(mn):
        row = []
        for j in range(k):
            if maj is Major.K:
                b = j * eb
                if swizzled:
                    lin = d.start_address + (i // 8) * d.sbo + (i % 8) * wb + b
                else:
                    lin = d.start_address + (i // 8) * d.sbo + (i % 8) * 16 + (b // 16) * d.lbo + b % 16
            else:
                b = i * eb
                c = b // 16
                if swizzled:
                    w = wb // 16
                    lin = (d.start_address + (c % w) * 16 + (c // w) * d.lbo + (j % 8) * wb + (j // 8) * d.sbo
                           + b % 16)
                else:
                    lin = d.start_address + c * d.sbo + (j % 8) * 16 + (j // 8) * d.lbo + b % 16
            row.append(sw(lin))
        out.append(row)
    return out


# ----------------------------------------------------------------------------------------------------------------
# CuTe's view: the descriptor fragment of a TiledMMA partition
# ----------------------------------------------------------------------------------------------------------------

_LOW_WORD = (1 << 32) - 1


def _cutlass_advance(value: int, offset: int) -> int:
    """CUTLASS's ``DescriptorIterator + offset``: the offset (16-byte units) is added to the low 32-bit word only
    (start address and LBO live there; the high word, SBO and layout type, is copied)."""
    return (value & ~_LOW_WORD) | (((value & _LOW_WORD) + offset) & _LOW_WORD)


def _kept_mode0(coord):
    """A fragment slice coordinate as a partition slice coordinate: the fragment's mode 0 is the whole (MN, K)
    tile of the partition, so it stays ``_`` (its one coordinate, 0, names the tile)."""
    if isinstance(coord, tuple) and coord:
        return (_,) + tuple(coord[1:])
    return coord


class DescriptorFragment:
    """CuTe's ``make_fragment_A(thr_mma.partition_A(sA))`` (or ``_B``) for an SS wgmma: a tensor of 64-bit wgmma
    descriptors indexed by CuTe's ``(MMA, MMA_M, MMA_K, PIPE...)`` coordinates.

    Built by :func:`descriptor_fragment`.  ``layout`` is CuTe's fragment layout, offsets in 16-byte units, mode 0
    (the MMA mode) ``1:0``; ``origin`` is the word at offset 0 (CUTLASS's ``*tCrA.data()``, the ``make_gmma_desc`` of
    the partition's first tile); element ``c`` is ``origin`` advanced by ``layout(c)`` as CUTLASS's
    ``DescriptorIterator`` does (added to the low 32-bit word).  ``partition`` is the element layout of
    ``thr_mma.partition_A(sA)`` (its mode 0 the (MN, K) tile of one wgmma).

    ``frag(0, 1, 2, 3)``, ``frag[(0, 1, 2, 3)]`` and ``frag(i)`` (1-D, colexicographic) give the 64-bit int;
    ``frag.descriptor_at(...)`` the decoded WgmmaDescriptor; a coordinate with ``_`` gives the sub-fragment
    (``frag(_, _, k, p)``, as CuTe's ``tCrA(_,_,k_block,read_stage)``).  ``str(frag)`` is CuTe's ``print(tCrA)``:
    ``GMMA::DescriptorIterator o (1,2,4,4):(0,512,2,1024)``; ``print_tensor()`` lays the words out as CuTe's
    ``print_tensor`` does.
    Post: ``frag.shape`` equals CuTe's fragment shape and every element equals CUTLASS's descriptor there.
    """

    def __init__(self, layout: Layout, origin: int, *, dtype: DType, major: Major, operand: str,
                 partition: Layout, thread: int):
        self.layout = layout
        self.origin = origin
        self.dtype = dtype
        self.major = major
        self.operand = operand
        self.partition = partition
        self.thread = thread

    @property
    def descriptor(self) -> WgmmaDescriptor:
        """The descriptor at offset 0 (what CUTLASS passes to the fragment's first wgmma)."""
        return WgmmaDescriptor.decode(self.origin)

    @property
    def shape(self):
        return self.layout.shape

    @property
    def stride(self):
        return self.layout.stride

    @property
    def rank(self) -> int:
        return self.layout.rank

    @property
    def size(self) -> int:
        return self.layout.size

    def __len__(self) -> int:
        return self.layout.size

    def value(self, *coord) -> int:
        """The 64-bit descriptor word at a CuTe coordinate (or 1-D index)."""
        return _cutlass_advance(self.origin, self.layout(*coord))

    def descriptor_at(self, *coord) -> WgmmaDescriptor:
        """The descriptor at a CuTe coordinate, decoded."""
        return WgmmaDescriptor.decode(self.value(*coord))

    def __call__(self, *coord):
        """``frag(c)``: the word at ``c``; with ``_`` in ``c`` the sub-fragment (CuTe's tensor slicing)."""
        c = coord[0] if len(coord) == 1 else coord
        if has_underscore(c):
            return DescriptorFragment(slice_layout(c, self.layout),
                                      _cutlass_advance(self.origin, slice_offset(c, self.layout)),
                                      dtype=self.dtype, major=self.major, operand=self.operand,
                                      partition=slice_layout(_kept_mode0(c), self.partition), thread=self.thread)
        return self.value(c)

    def __getitem__(self, coord):
        return self(coord)

    def __iter__(self):
        """Words in 1-D index order (CuTe's ``tCrA(i)`` for i = 0..size-1)."""
        for i in range(self.layout.size):
            yield self.value(i)

    def items(self):
        """(CuTe coordinate, word) pairs in 1-D index order; the coordinate is ``idx2crd(i, shape)``."""
        for i in range(self.layout.size):
            yield idx2crd(i, self.layout.shape), self.value(i)

    def __str__(self) -> str:
        return f"GMMA::DescriptorIterator o {self.layout}"

    def __repr__(self) -> str:
        return f"DescriptorFragment({self}, {self.operand}, {self.dtype.name}, {self.major.value}-major)"

    def print_tensor(self) -> str:
        """The words laid out as CuTe's ``print_tensor(tCrA)``: a header ``print(tCrA):``, then rank 1 one word per
        line, rank 2 rows of mode 0 by columns of mode 1, rank 3 the rank-2 slices of mode 2 between ``-`` rules,
        rank 4 the rank-3 slices of mode 3 between ``=`` rules (a rank above 4 lists ``coordinate: word``, which
        CuTe's print_tensor does not lay out).  Each word prints as ``0x%016x`` (CuTe would print each
        GmmaDescriptor as a block: ``descriptor_at(c).cute_str()``)."""
        lines = [f"{self}:"]
        sizes = [self.layout[i].size for i in range(self.rank)] if self.rank > 1 else [self.size]

        def block(fixed):
            """Lines of the slice whose trailing modes are fixed at ``fixed`` (a tuple of mode coordinates)."""
            r = len(sizes) - len(fixed)
            if r == 1:
                return [f"0x{self.value((m,) + fixed if self.rank > 1 else m):016x}" for m in range(sizes[0])]
            if r == 2:
                return [" ".join(f"0x{self.value((m, n) + fixed):016x}" for n in range(sizes[1]))
                        for m in range(sizes[0])]
            rule = ("-" if r == 3 else "=") * (20 * sizes[1] - 1)
            out = []
            for q in range(sizes[r - 1]):
                if q:
                    out.append(rule)
                out.extend(block((q,) + fixed))
            return out

        if len(sizes) <= 4:
            lines.extend(block(()))
        else:
            lines.extend(f"{c}: 0x{v:016x}" for c, v in self.items())
        return "\n".join(lines)


def descriptor_fragment(layout, element, major, operand: str = "A", *, n: int | None = None,
                        base_address: int = 0, atom_layout=(1, 1, 1), thread: int = 0) -> DescriptorFragment:
    """CuTe's descriptor fragment of an SS wgmma operand: what ``thr_mma.make_fragment_A(thr_mma.partition_A(sA))``
    (``operand='A'``) or ``make_fragment_B(partition_B(sB))`` (``'B'``) holds in CUTLASS, element by element.

    ``descriptor_fragment(gmma_smem_layout('K', 'SW128', 'bf16', (128, 64, 4)), 'bf16', 'K', 'A', base_address=0x400)``
    → ``GMMA::DescriptorIterator o (1,2,4,(1,4)):(0,512,2,(0,1024))``: MMA mode 1, 2 m64 blocks 512 x 16 B apart,
    4 k16 steps 32 B apart, 4 stages 16 KiB apart; ``frag(0, 1, 3, 2)`` → ``0x4000004000010a46`` (start field
    0x40 + 512 + 3·2 + 2·1024).

    The TiledMMA is ``make_tiled_mma(SM90_64xNxK_..._SS<major...>{}, Layout<Shape<am,an,ak>>{})`` with
    ``atom_layout = (am, an, ak)`` warpgroups (default one) and no permutation; the atom is 64 x ``n`` x K with
    K = 32 bytes of the element type (``wgmma_k``).  The partition is CuTe's ``thrfrg_A`` (or ``_B``) re-done on
    layoutc's algebra -- ``logical_divide`` by the TiledMMA tile, ``zipped_divide`` by the atom, the atom's
    ``ABLayout`` thread-value composition, the warpgroup split -- sliced at ``thread``; the fragment is that partition
    recast to 16-byte units with its MMA mode replaced by ``1:0`` (``MakeTensor<smem_desc>``), and its words are
    ``make_gmma_desc`` of the first tile advanced by the fragment's offsets (``DescriptorIterator``).

    ``layout``: the smem layout (``Sw<B,4,3> o off o L``, coordinates (MN, K, stage...)), ``base_address`` the smem
    byte address of its element offset 0; ``n``: the atom's N (a legal wgmma N), for B by default the layout's N
    extent divided by ``an``; it does not change A's partition.
    Post: ``frag.shape`` is CuTe's fragment shape; every element equals the descriptor CUTLASS's fragment holds there
    and is checked to address exactly the layout's bytes of its tile (as :func:`descriptor_verdict` checks).
    Raises DescriptorError naming the first tile that cannot be described (or a TiledMMA tile that does not divide
    the layout).
    """
    op_name = "descriptor_fragment"
    operands = (layout, str(element), str(major), str(operand))
    t, maj, sw, mode, off, inner, reasons = _prechecks(layout, element, major, base_address)
    if not reasons and inner is not None and inner.rank < 2:
        reasons.append(f"the layout {inner} has rank {inner.rank}; a wgmma operand layout has (MN, K[, stage...]) "
                       "modes")
    if reasons:
        raise DescriptorError(op_name, operands, reasons[0])
    which = str(operand).upper()
    if which not in ("A", "B"):
        raise DescriptorError(op_name, operands, f"operand {operand!r} is not 'A' or 'B' (an SS wgmma's smem operands)")
    if (not isinstance(atom_layout, (tuple, list)) or len(atom_layout) != 3
            or not all(is_int(x) and not isinstance(x, bool) and x > 0 for x in atom_layout)):
        raise DescriptorError(op_name, operands, f"atom_layout {atom_layout!r} is not 3 positive ints (warpgroups "
                              "along M, N, K: CuTe's AtomLayoutMNK shape)")
    am, an, ak = atom_layout
    k = _K_BYTES * 8 // t.bits
    mn_extent, k_extent = inner[0].size, inner[1].size
    integer = t.kind in ("int", "uint")
    legal_n = wgmma_n_values("s32" if integer else "f32")
    default_n = n is None and which == "B"
    if default_n:
        n = mn_extent // an
    if n is not None and n not in legal_n:
        rule = "8, 16, 24, then 32..256 step 16" if integer else "8..256 step 8"
        hint = f" (the default N is the layout's N extent {mn_extent} / {an} warpgroups: pass n=)" if default_n else ""
        raise DescriptorError(op_name, operands, f"N = {n!r} is not a legal wgmma N for {t.name} operands "
                              f"({rule}){hint}")
    atom_mn, thr_mn, dim = (_WARPGROUP_M, am, "M") if which == "A" else (n, an, "N")
    if mn_extent % (atom_mn * thr_mn):
        raise DescriptorError(op_name, operands, f"the layout's {dim} extent {mn_extent} is not a multiple of the "
                              f"TiledMMA's {dim} tile {atom_mn * thr_mn} ({thr_mn} x the atom's {dim} = {atom_mn})")
    if k_extent % (k * ak):
        raise DescriptorError(op_name, operands, f"the layout's K extent {k_extent} is not a multiple of the "
                              f"TiledMMA's K tile {k * ak} ({ak} x the atom's K = {k} {t.name})")
    threads = 128 * am * an * ak
    if not is_int(thread) or isinstance(thread, bool) or not 0 <= thread < threads:
        raise DescriptorError(op_name, operands, f"thread {thread!r} is not in 0..{threads - 1} (the TiledMMA's "
                              f"{threads} threads)")
    # thr_layout_vmnk = (128, am, an, ak) column-major: thread -> (v, m, n, k)
    v, wg = thread % 128, thread // 128
    thr_coord = (wg % am) if which == "A" else (wg // am) % an
    k_coord = wg // (am * an)
    try:
        tiled = logical_divide(inner, (Layout(atom_mn * thr_mn), Layout(k * ak)))
        atoms = zipped_divide(tiled, (Layout(atom_mn), Layout(k)))
        tv = composition(atoms[0], Layout((128, (atom_mn, k)), (0, (1, atom_mn))))
        rest = modes(logical_divide(atoms[1], (Layout(thr_mn), Layout(ak))))
        # zip2_by: ((ThrV,(ThrMN,ThrK)),(FrgV,(RestMN,RestK,extra...)))
        thr = make_layout(make_layout(tv[0], make_layout(rest[0][0], rest[1][0])),
                          make_layout(tv[1], make_layout(rest[0][1], rest[1][1], *rest[2:])))
        sel = ((v, (thr_coord, k_coord)), (_, tuple(_ for _m in rest)))
        partition = slice_layout(sel, thr)
        thread_off = slice_offset(sel, thr)
        recast = upcast(partition, 128 // t.bits)
        frag_layout = make_layout(Layout(1, 0), *modes(recast)[1:])
    except LayoutError as e:
        raise DescriptorError(op_name, operands, f"CuTe's partition of the layout fails: {e}") from None
    tile = partition[0]
    tile_rest = make_layout(*modes(partition)[1:])
    first = _described(t, maj, mode, tile, off + thread_off, base_address)
    if not first.ok:
        raise DescriptorError(op_name, operands, f"the first tile: {first.reasons[0]}")
    origin = first.descriptor.encode()
    for i in range(frag_layout.size):
        coord = to_str(idx2crd(i, frag_layout.shape))
        units = frag_layout(i)
        if (origin & _FIELD) + units > _FIELD:
            raise DescriptorError(op_name, operands, f"element {coord}: the start field 0x{origin & _FIELD:x} + "
                                  f"{units} (16-B units) overflows 14 bits; CUTLASS would carry into the reserved "
                                  "bits (the tile lies past 256 KiB of shared memory)")
        word = _cutlass_advance(origin, units)
        verdict = _described(t, maj, mode, tile, off + thread_off + tile_rest(i), base_address)
        if not verdict.ok:
            raise DescriptorError(op_name, operands, f"element {coord}: {verdict.reasons[0]}")
        if verdict.descriptor.encode() != word:
            raise DescriptorError(op_name, operands, f"element {coord}: CUTLASS's fragment holds 0x{word:016x} "
                                  f"(the first descriptor + {units} in 16-B units) but the tile there is "
                                  f"{verdict.descriptor}: the layout's offsets are not 16-byte units there")
    return DescriptorFragment(frag_layout, origin, dtype=t, major=maj, operand=which, partition=partition,
                              thread=thread)
