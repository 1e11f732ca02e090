"""TMA tensor maps from CuTe layouts: the arguments of ``cuTensorMapEncodeTiled``, checked before the driver sees them.

Pure data: nothing here imports CUDA. The enums mirror the driver's (names and integer values of ``cuda.h`` in CUDA
12.x/13.x, the same as ``cuda.bindings.driver`` 13.x enumerates them; ``tests/layoutc/test_tma.py`` compares the two).

The model of what one TMA copy writes to shared memory (read on an H100, driver 580, with a probe kernel that loaded
boxes of every swizzle mode and dumped the shared memory it landed in; see ``tma_write_address``):

- the box is written densely, driver dim 0 (the contiguous global dim) innermost, then dims 1, 2, ... as "rows";
- a row is ``box_dims[0]·elem_bytes`` bytes long; rows lie that many bytes apart without swizzle, and exactly the
  swizzle span (32/64/128 B) apart with a swizzle, even when the row is shorter (the rest of the span is untouched);
- the swizzle (``Sw<1,4,3>``, ``Sw<2,4,3>``, ``Sw<3,4,3>``, as in the GMMA atoms) acts on the absolute shared byte
  address, so the pattern's phase follows the destination address, not the box;
- the destination must be 128-byte aligned (16-, 32- and 64-byte aligned destinations faulted with "misaligned
  address", for every swizzle mode);
- with element strides, ``ceil(box/stride)`` elements per dim are loaded and written densely (checked for (1,2) and
  (1,3)); the transaction count is those elements' bytes.

So a CuTe smem layout ``Sw o off o L`` (Sw on byte addresses, as in ``layoutc.hopper.smem``) is what one TMA copy
writes exactly when ``byte_address(layout, dtype, c, base) == tma_write_address(c, base + off·elem_bytes)`` for every
box coordinate ``c``; ``make_tma_params`` checks precisely that.

>>> from layoutc import Layout
>>> from layoutc.hopper import gmma_smem_layout
>>> p = make_tma_params(Layout((4096, 4096), (4096, 1)), 'bf16', gmma_smem_layout('K', 'SW128', 'bf16', (128, 64)))
>>> p.global_dims, p.global_strides, p.box_dims, p.swizzle.name, p.box_bytes
((4096, 4096), (8192,), (64, 128), 'CU_TENSOR_MAP_SWIZZLE_128B', 16384)
"""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

from ..errors import LayoutError, operand_text
from ..int_tuple import flatten as flatten_tuple, is_tuple, product
from ..layout import Layout, _, coalesce, modes, slice_layout, slice_offset
from ..swizzle import ComposedLayout, Swizzle
from ..tiling import logical_divide
from .dtypes import DType, dtype as lookup_dtype
from .gmma import SwizzleMode
from .smem import split_smem_layout

__all__ = [
    "TmaError", "TmaDataType", "TmaInterleave", "TmaSwizzle", "TmaL2Promotion", "TmaOobFill", "TmaParams", "TmaBox",
    "TmaBoxes", "tma_data_type", "check_global_address", "check_tma_params", "make_tma_params", "tma_boxes",
    "TMA_MAX_RANK", "TMA_MAX_BOX_DIM", "TMA_MAX_ELEMENT_STRIDE", "TMA_SMEM_MIN_ALIGN",
]

TMA_MAX_RANK = 5
TMA_MAX_BOX_DIM = 256
TMA_MAX_ELEMENT_STRIDE = 8
TMA_MAX_GLOBAL_DIM = 1 << 32      # inclusive
TMA_GLOBAL_STRIDE_LIMIT = 1 << 40  # exclusive
TMA_SMEM_MIN_ALIGN = 128           # what the hardware accepts as a destination (H100: 64-aligned faults)


class TmaError(LayoutError):
    """A tensor-map parameter the driver (or the hardware) would reject, or an smem layout TMA cannot write.

    The message is one line, ``op: reason`` or ``op(operands): reason``, e.g.
    ``cuTensorMapEncodeTiled: global stride 6932 bytes of dim 1 is not a multiple of 16``.
    """

    def __init__(self, reason: str, op: str = "cuTensorMapEncodeTiled", operands=()):
        self.op = op
        self.operands = tuple(operands)
        self.condition = reason
        if self.operands:
            text = f"{op}({', '.join(operand_text(o) for o in self.operands)}): {reason}"
        else:
            text = f"{op}: {reason}"
        ValueError.__init__(self, text)


# ---------------------------------------------------------------------------------------------------------------
# Enums: names and values of cuda.h (CUDA 12.x and 13.x; cuda.bindings.driver 13.x has the same members and values).
# ---------------------------------------------------------------------------------------------------------------

class TmaDataType(enum.IntEnum):
    """``CUtensorMapDataType``. There is no fp8 or int8 member: 8-bit types (e4m3, e5m2, s8) travel as UINT8, which
    copies the bytes unchanged (CUTLASS does the same); a consequence is that fp8 cannot use the NaN OOB fill."""

    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0
    CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1
    CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2
    CU_TENSOR_MAP_DATA_TYPE_INT32 = 3
    CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4
    CU_TENSOR_MAP_DATA_TYPE_INT64 = 5
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7
    CU_TENSOR_MAP_DATA_TYPE_FLOAT64 = 8
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ = 10
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 = 11
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ = 12
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B = 13   # packed sub-byte types: Blackwell (sm_100+) formats
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B = 14
    CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B = 15

    @property
    def short(self) -> str:
        """``UINT8``, ``BFLOAT16``, ...: the name without the ``CU_TENSOR_MAP_DATA_TYPE_`` prefix."""
        return self.name[len("CU_TENSOR_MAP_DATA_TYPE_"):]

    @property
    def bits(self) -> int:
        """Bits per element as the driver counts them (4 and 6 for the packed types)."""
        return _DATA_TYPE_BITS[self.value]

    @property
    def is_float(self) -> bool:
        """Whether the driver treats it as floating point (only those may use the NaN OOB fill)."""
        return 6 <= self.value <= 12

    @property
    def is_packed(self) -> bool:
        return self.value >= 13


_DATA_TYPE_BITS = (8, 16, 32, 32, 64, 64, 16, 32, 64, 16, 32, 32, 32, 4, 4, 6)


class TmaInterleave(enum.IntEnum):
    """``CUtensorMapInterleave``: NONE for GEMM tiles; 16B/32B for NC/8HWC8-style global layouts."""

    CU_TENSOR_MAP_INTERLEAVE_NONE = 0
    CU_TENSOR_MAP_INTERLEAVE_16B = 1
    CU_TENSOR_MAP_INTERLEAVE_32B = 2

    @property
    def bytes(self) -> int:
        return (0, 16, 32)[self.value]


class TmaSwizzle(enum.IntEnum):
    """``CUtensorMapSwizzle``. 32B/64B/128B write the byte patterns of the GMMA atoms' ``Sw<1|2|3,4,3>``; the
    ``128B_ATOM_*`` modes (CUDA 12.8+) swizzle 32-/64-byte chunks and are for Blackwell: layoutc models none of them."""

    CU_TENSOR_MAP_SWIZZLE_NONE = 0
    CU_TENSOR_MAP_SWIZZLE_32B = 1
    CU_TENSOR_MAP_SWIZZLE_64B = 2
    CU_TENSOR_MAP_SWIZZLE_128B = 3
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B = 4
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B = 5
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B = 6

    @property
    def span_bytes(self) -> int:
        """Bytes of one swizzled row (0 for NONE): the most a box row may hold, and the row pitch TMA writes."""
        return (0, 32, 64, 128, 128, 128, 128)[self.value]

    @property
    def repeat_bytes(self) -> int:
        """Bytes after which the pattern repeats (8 rows of the span): 256, 512, 1024; 0 for NONE."""
        return 8 * self.span_bytes

    @property
    def swizzle(self) -> Swizzle | None:
        """The byte-address functor: ``Sw<3,4,3>`` for 128B, ``Sw<2,4,3>`` for 64B, ``Sw<1,4,3>`` for 32B; None for
        NONE. Pre: not a ``128B_ATOM_*`` mode."""
        if self.value == 0:
            return None
        if self.value > 3:
            raise TmaError(f"{self.name} is a Blackwell swizzle mode that layoutc does not model", op="TmaSwizzle")
        return Swizzle(self.value, 4, 3)

    @property
    def mode(self) -> SwizzleMode:
        """The GMMA swizzle mode that reads what this TMA mode writes (NONE ↔ INTER)."""
        if self.value > 3:
            raise TmaError(f"{self.name} has no wgmma (sm_90) counterpart", op="TmaSwizzle")
        return (SwizzleMode.INTER, SwizzleMode.SW32, SwizzleMode.SW64, SwizzleMode.SW128)[self.value]

    @property
    def wgmma_layout_type(self) -> int:
        """The wgmma smem descriptor's layout type that must go with it: 128B→1, 64B→2, 32B→3, NONE→0."""
        if self.value > 3:
            raise TmaError(f"{self.name} has no wgmma (sm_90) counterpart", op="TmaSwizzle")
        return {0: 0, 1: 3, 2: 2, 3: 1}[self.value]

    @classmethod
    def of_mode(cls, mode) -> "TmaSwizzle":
        """``TmaSwizzle.of_mode('SW128')`` → CU_TENSOR_MAP_SWIZZLE_128B; INTER → NONE."""
        return cls((SwizzleMode.INTER, SwizzleMode.SW32, SwizzleMode.SW64, SwizzleMode.SW128)
                   .index(SwizzleMode.of(mode)))


class TmaL2Promotion(enum.IntEnum):
    """``CUtensorMapL2promotion``: the granularity in which L2 fills from DRAM."""

    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0
    CU_TENSOR_MAP_L2_PROMOTION_L2_64B = 1
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3


class TmaOobFill(enum.IntEnum):
    """``CUtensorMapFloatOOBfill``: NONE fills out-of-bounds box elements with zeros; NAN_REQUEST_ZERO_FMA with a
    special NaN (floating-point data types only)."""

    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA = 1


# ---------------------------------------------------------------------------------------------------------------
# Element types
# ---------------------------------------------------------------------------------------------------------------

# The driver's flush-to-zero variants are copy modes, not element types, so layoutc.hopper.dtypes does not list them.
_EXTRA_DTYPES = {t.name: t for t in (DType("f32_ftz", 32, "float"), DType("tf32_ftz", 32, "float"))}

_D = TmaDataType
_NAME_TO_TMA = {
    "u8": _D.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "s8": _D.CU_TENSOR_MAP_DATA_TYPE_UINT8,    # no INT8 in the driver: a byte copy is a byte copy
    "e4m3": _D.CU_TENSOR_MAP_DATA_TYPE_UINT8,  # no fp8 in the driver (CUDA 12/13): fp8 travels as UINT8
    "e5m2": _D.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "u16": _D.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    "s16": _D.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    "u32": _D.CU_TENSOR_MAP_DATA_TYPE_UINT32,
    "s32": _D.CU_TENSOR_MAP_DATA_TYPE_INT32,
    "u64": _D.CU_TENSOR_MAP_DATA_TYPE_UINT64,
    "s64": _D.CU_TENSOR_MAP_DATA_TYPE_INT64,
    "f16": _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    "f32": _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    "f64": _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    "bf16": _D.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    "f32_ftz": _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
    "tf32": _D.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    "tf32_ftz": _D.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
}
_TMA_TO_NAME = {
    _D.CU_TENSOR_MAP_DATA_TYPE_UINT8: "u8", _D.CU_TENSOR_MAP_DATA_TYPE_UINT16: "u16",
    _D.CU_TENSOR_MAP_DATA_TYPE_UINT32: "u32", _D.CU_TENSOR_MAP_DATA_TYPE_INT32: "s32",
    _D.CU_TENSOR_MAP_DATA_TYPE_UINT64: "u64", _D.CU_TENSOR_MAP_DATA_TYPE_INT64: "s64",
    _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT16: "f16", _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT32: "f32",
    _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT64: "f64", _D.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: "bf16",
    _D.CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ: "f32_ftz", _D.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: "tf32",
    _D.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: "tf32_ftz",
}


def _element(element) -> tuple:
    """(DType, TmaDataType) of an element type name, a DType or a TmaDataType."""
    if isinstance(element, TmaDataType):
        if element.is_packed:
            raise TmaError(f"{element.name} is a packed sub-byte type for Blackwell (sm_100+); Hopper TMA copies "
                           "whole bytes", op="tma_data_type")
        return _as_dtype(_TMA_TO_NAME[element]), element
    name = element.name if isinstance(element, DType) else str(element)
    t = _EXTRA_DTYPES.get(name)
    if t is None:
        try:
            t = lookup_dtype(element)
        except LayoutError:
            raise TmaError(f"unknown element type {name!r}; TMA knows {', '.join(sorted(_NAME_TO_TMA))}",
                           op="tma_data_type") from None
    if t.name not in _NAME_TO_TMA:
        raise TmaError(f"{t.name} ({t.bits}-bit) has no TMA data type: Hopper TMA copies elements of 1, 2, 4 or 8 "
                       "bytes (the driver's packed 16U4/16U6 types are Blackwell formats)", op="tma_data_type")
    return t, _NAME_TO_TMA[t.name]


def _as_dtype(name: str) -> DType:
    return _EXTRA_DTYPES[name] if name in _EXTRA_DTYPES else lookup_dtype(name)


def tma_data_type(element) -> TmaDataType:
    """The driver data type of an element type: ``tma_data_type('bf16')`` → CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    ``'e4m3'``, ``'e5m2'``, ``'s8'`` → UINT8 (the driver has no fp8/int8 type; TMA copies the bytes unchanged).

    Also knows ``f32_ftz tf32_ftz`` (the driver's flush-to-zero copies, not element types of ``layoutc.hopper.dtypes``).
    Pre: a byte-sized element (TmaError for s4/u4/b1).
    """
    return _element(element)[1]


# ---------------------------------------------------------------------------------------------------------------
# Driver constraints
# ---------------------------------------------------------------------------------------------------------------

def check_global_address(ptr: int, interleave=TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE) -> int:
    """Check a tensor's global base address for ``cuTensorMapEncodeTiled`` and return it.

    Pre: ``ptr`` 16-byte aligned, 32-byte aligned with CU_TENSOR_MAP_INTERLEAVE_32B (TmaError otherwise), e.g.
    ``check_global_address(0x7f0000000008)`` → ``TmaError: global address 0x7f0000000008 is not 16-byte aligned``.
    A tensor view that starts mid-allocation (a slice) has its own address: check that one.
    """
    interleave = TmaInterleave(interleave)
    ptr = int(ptr)
    need = 32 if interleave is TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_32B else 16
    if ptr < 0:
        raise TmaError(f"global address {ptr} is negative")
    if ptr % need:
        why = " (interleave 32B)" if need == 32 else ""
        raise TmaError(f"global address {ptr:#x} is not {need}-byte aligned{why}")
    return ptr


def _enum(cls, value, what):
    try:
        return cls(value)
    except ValueError:
        raise TmaError(f"{what} {value!r} is not a {cls.__name__} value "
                       f"({', '.join(f'{m.name}={m.value}' for m in cls)})") from None


def check_tma_params(data_type, rank, global_dims, global_strides, box_dims, element_strides,
                     interleave=0, swizzle=0, l2_promotion=0, oob_fill=0) -> None:
    """Check every documented ``cuTensorMapEncodeTiled`` constraint (driver API, CUDA 12/13), in the driver's
    argument order, raising TmaError with a one-line reason for the first violation:

    - data type: a CUtensorMapDataType; the packed 16U4/16U6 types are Blackwell formats (rejected for Hopper);
    - rank 1..5, and 3..5 with interleave; ``global_dims``, ``box_dims``, ``element_strides`` have ``rank`` entries,
      ``global_strides`` ``rank-1`` (the innermost stride is the element size and is not passed);
    - global dims 1..2^32; global strides multiples of 16 bytes (32 with interleave 32B) and below 2^40;
    - box dims 1..256; ``box_dims[0]·elem_bytes`` a multiple of 16 (documented without interleave; the H100 driver
      refused it with interleave 16B too) and, without interleave but with a swizzle, at most the swizzle span
      (32/64/128 bytes);
    - element strides 1..8;
    - interleave 32B needs swizzle 32B (documented; the H100 driver did not enforce it); the ``128B_ATOM_*``
      swizzles are Blackwell modes (the H100 driver refuses them);
    - the NaN OOB fill only for floating-point data types (so not for fp8, which travels as UINT8).
    The global address is checked separately (``check_global_address``): it is not known when the map is planned.
    """
    data_type = _enum(TmaDataType, data_type, "data type")
    interleave = _enum(TmaInterleave, interleave, "interleave")
    swizzle = _enum(TmaSwizzle, swizzle, "swizzle")
    _enum(TmaL2Promotion, l2_promotion, "L2 promotion")
    oob_fill = _enum(TmaOobFill, oob_fill, "OOB fill")
    if data_type.is_packed:
        raise TmaError(f"data type {data_type.name} is a packed sub-byte type for Blackwell (sm_100+), not Hopper")
    if not isinstance(rank, int) or not 1 <= rank <= TMA_MAX_RANK:
        raise TmaError(f"tensor rank {rank} is not in 1..{TMA_MAX_RANK}")
    if interleave is not TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE and rank < 3:
        raise TmaError(f"tensor rank {rank} with {interleave.name}: interleaved maps need rank 3..5")
    for name, values, want in (("global_dims", global_dims, rank), ("global_strides", global_strides, rank - 1),
                               ("box_dims", box_dims, rank), ("element_strides", element_strides, rank)):
        if len(values) != want:
            raise TmaError(f"{name} has {len(values)} entries, rank {rank} needs {want}")
    for d, n in enumerate(global_dims):
        if not 1 <= n <= TMA_MAX_GLOBAL_DIM:
            raise TmaError(f"global dim {d} is {n}: each global dim must be in 1..2^32")
    stride_unit = 32 if interleave is TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_32B else 16
    for i, s in enumerate(global_strides):
        d = i + 1  # the driver numbers strides from dim 1: dim 0's stride is the element size
        if s < 0:
            raise TmaError(f"global stride {s} bytes of dim {d} is negative")
        if s % stride_unit:
            why = " (interleave 32B)" if stride_unit == 32 else ""
            raise TmaError(f"global stride {s} bytes of dim {d} is not a multiple of {stride_unit}{why}")
        if s >= TMA_GLOBAL_STRIDE_LIMIT:
            raise TmaError(f"global stride {s} bytes of dim {d} is not below 2^40")
    for d, b in enumerate(box_dims):
        if not 1 <= b <= TMA_MAX_BOX_DIM:
            raise TmaError(f"box dim {d} is {b}: each box dim must be in 1..{TMA_MAX_BOX_DIM}")
    elem_bytes = data_type.bits // 8
    inner = box_dims[0] * elem_bytes
    # Documented for interleave NONE; the H100 driver also refused an 8-byte inner box with interleave 16B.
    if inner % 16:
        raise TmaError(f"inner box {inner} bytes ({box_dims[0]} x {elem_bytes}-byte elements) is not a multiple of 16")
    if interleave is TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE:
        if swizzle.span_bytes and inner > swizzle.span_bytes:
            raise TmaError(f"inner box {inner} bytes ({box_dims[0]} x {elem_bytes}-byte elements) exceeds the "
                           f"{swizzle.span_bytes}-byte span of {swizzle.name}")
    for d, e in enumerate(element_strides):
        if not 1 <= e <= TMA_MAX_ELEMENT_STRIDE:
            raise TmaError(f"element stride {e} of dim {d} is not in 1..{TMA_MAX_ELEMENT_STRIDE}")
    if swizzle.value > 3:
        raise TmaError(f"{swizzle.name} is a Blackwell (sm_100+) swizzle mode; Hopper has NONE, 32B, 64B and 128B")
    # Documented rule; driver 580 on an H100 accepted interleave 32B with other swizzles, but nothing promises that.
    if interleave is TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_32B and swizzle is not TmaSwizzle.CU_TENSOR_MAP_SWIZZLE_32B:
        raise TmaError(f"{interleave.name} requires CU_TENSOR_MAP_SWIZZLE_32B, not {swizzle.name}")
    if oob_fill is TmaOobFill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA and not data_type.is_float:
        raise TmaError(f"{oob_fill.name} needs a floating-point data type, not {data_type.name} (fp8 and int8 "
                       "travel as UINT8, so their out-of-bounds fill is zero)")


# ---------------------------------------------------------------------------------------------------------------
# TmaParams
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TmaParams:
    """The arguments of ``cuTensorMapEncodeTiled`` (all but the output map and the global address), checked.

    Fields in the driver's order: ``data_type`` (TmaDataType), ``rank``, ``global_dims`` (elements, innermost first),
    ``global_strides`` (bytes, ``rank-1`` entries for dims 1..rank-1), ``box_dims``, ``element_strides``,
    ``interleave``, ``swizzle``, ``l2_promotion``, ``oob_fill``; then where it came from: ``dtype`` (the element type
    named, e.g. e4m3 for a UINT8 map), ``smem_box_layout`` (the smem layout one copy writes) and ``mode_order``
    (driver dim ``d`` is mode ``mode_order[d]`` of the global layout; ``tma_coords`` applies it).

    Post (construction): every driver constraint holds (``check_tma_params``), else TmaError. Lists become tuples and
    ints become the enums.
    """

    data_type: TmaDataType
    rank: int
    global_dims: tuple
    global_strides: tuple
    box_dims: tuple
    element_strides: tuple
    interleave: TmaInterleave = TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    swizzle: TmaSwizzle = TmaSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
    l2_promotion: TmaL2Promotion = TmaL2Promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE
    oob_fill: TmaOobFill = TmaOobFill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    dtype: DType | None = None
    smem_box_layout: object = None
    mode_order: tuple | None = None

    def __post_init__(self):
        norm = {
            "global_dims": tuple(int(x) for x in self.global_dims),
            "global_strides": tuple(int(x) for x in self.global_strides),
            "box_dims": tuple(int(x) for x in self.box_dims),
            "element_strides": tuple(int(x) for x in self.element_strides),
        }
        for k, v in norm.items():
            object.__setattr__(self, k, v)
        check_tma_params(self.data_type, self.rank, self.global_dims, self.global_strides, self.box_dims,
                         self.element_strides, self.interleave, self.swizzle, self.l2_promotion, self.oob_fill)
        object.__setattr__(self, "data_type", TmaDataType(self.data_type))
        object.__setattr__(self, "interleave", TmaInterleave(self.interleave))
        object.__setattr__(self, "swizzle", TmaSwizzle(self.swizzle))
        object.__setattr__(self, "l2_promotion", TmaL2Promotion(self.l2_promotion))
        object.__setattr__(self, "oob_fill", TmaOobFill(self.oob_fill))
        if self.dtype is None:
            object.__setattr__(self, "dtype", _as_dtype(_TMA_TO_NAME[self.data_type]))
        elif _element(self.dtype)[1] is not self.data_type:
            raise TmaError(f"element type {self.dtype} travels as {_element(self.dtype)[1].name}, not "
                           f"{self.data_type.name}", op="TmaParams")
        if self.mode_order is None:
            object.__setattr__(self, "mode_order", tuple(range(self.rank)))
        else:
            object.__setattr__(self, "mode_order", tuple(self.mode_order))
            if sorted(self.mode_order) != list(range(self.rank)):
                raise TmaError(f"mode_order {self.mode_order} is not a permutation of 0..{self.rank - 1}",
                               op="TmaParams")

    # -- the driver call -------------------------------------------------------------------------------------------
    def as_driver_args(self) -> tuple:
        """The positional arguments of ``cuTensorMapEncodeTiled`` after ``tensorMap``, without ``globalAddress``:
        ``(tensorDataType, tensorRank, globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle,
        l2Promotion, oobFill)``; enums as the IntEnums here (ints), arrays as tuples of ints. Insert the address at
        index 2: ``args = p.as_driver_args(); cuTensorMapEncodeTiled(*args[:2], addr, *args[2:])``.
        """
        return (self.data_type, self.rank, self.global_dims, self.global_strides, self.box_dims,
                self.element_strides, self.interleave, self.swizzle, self.l2_promotion, self.oob_fill)

    def cuda_bindings_args(self, cu, global_address: int) -> tuple:
        """The full argument tuple for ``cu.cuTensorMapEncodeTiled(*args)`` where ``cu`` is ``cuda.bindings.driver``
        (passed in: this module imports no CUDA). Arrays are wrapped as ``cuuint64_t``/``cuuint32_t`` (plain ints are
        refused by cuda-bindings 13.x) and enums converted by name; the address is checked first. For rank 1 it
        passes one unused stride: cuda-bindings turns an empty list into a null pointer, which the driver refused
        (CUDA_ERROR_INVALID_VALUE on an H100) while the same map with a dummy stride encoded.
        """
        check_global_address(global_address, self.interleave)
        strides = self.global_strides or (-(-self.global_dims[0] * self.elem_bytes // 16) * 16,)
        return (getattr(cu.CUtensorMapDataType, self.data_type.name), self.rank, int(global_address),
                [cu.cuuint64_t(x) for x in self.global_dims], [cu.cuuint64_t(x) for x in strides],
                [cu.cuuint32_t(x) for x in self.box_dims], [cu.cuuint32_t(x) for x in self.element_strides],
                getattr(cu.CUtensorMapInterleave, self.interleave.name),
                getattr(cu.CUtensorMapSwizzle, self.swizzle.name),
                getattr(cu.CUtensorMapL2promotion, self.l2_promotion.name),
                getattr(cu.CUtensorMapFloatOOBfill, self.oob_fill.name))

    # -- smem-side facts -------------------------------------------------------------------------------------------
    @property
    def elem_bytes(self) -> int:
        return self.data_type.bits // 8

    @property
    def box_counts(self) -> tuple:
        """Elements one copy loads (and writes densely) per driver dim: ``ceil(box/elementStride)`` (driver doc;
        seen on H100); dim 0 ignores its element stride without interleave. All-ones strides: ``box_dims``."""
        out = []
        for d, (b, e) in enumerate(zip(self.box_dims, self.element_strides)):
            if d == 0 and self.interleave is TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE:
                e = 1
            out.append(-(-b // e))
        return tuple(out)

    @property
    def box_bytes(self) -> int:
        """Bytes one copy delivers to each destination CTA, out-of-bounds fill included: the mbarrier expect-tx
        count per copy. ``prod(box_counts)·elem_bytes``, e.g. 16384 for a 64×128 bf16 box."""
        return product(self.box_counts) * self.elem_bytes

    @property
    def smem_row_pitch(self) -> int:
        """Bytes between consecutive box rows in smem: ``box_dims[0]·elem_bytes`` without swizzle, the swizzle span
        (32/64/128) with one, even when the row is shorter (measured on H100)."""
        return self.swizzle.span_bytes or self.box_counts[0] * self.elem_bytes

    @property
    def smem_box_span(self) -> int:
        """Bytes of smem one copy spans: rows × row pitch (``box_bytes`` plus the padding of short swizzled rows)."""
        return product(self.box_counts[1:]) * self.smem_row_pitch if self.rank > 1 else self.smem_row_pitch

    @property
    def smem_alignment(self) -> int:
        """Alignment to give the smem destination: 128 bytes without swizzle (the hardware minimum), else the
        pattern's repeat (256/512/1024 for 32B/64B/128B) so the pattern starts at phase 0, as a wgmma descriptor with
        base_offset 0 expects. The hardware itself only needs 128: the swizzle follows the absolute address."""
        return max(TMA_SMEM_MIN_ALIGN, self.swizzle.repeat_bytes)

    @property
    def smem_offset_bytes(self) -> int:
        """Where the box starts relative to the smem layout's origin: ``elem_bytes·offset`` of ``Sw o offset o L``
        (non-zero for a slice such as one pipeline stage ``smem(_,_,s)``); 0 without a layout."""
        if isinstance(self.smem_box_layout, ComposedLayout):
            return self.smem_box_layout.offset * self.elem_bytes
        return 0

    @property
    def swizzle_mode(self) -> SwizzleMode:
        """The GMMA swizzle mode (INTER for NONE) whose descriptor reads what this map writes."""
        return self.swizzle.mode

    # -- coordinates and the write model --------------------------------------------------------------------------
    def tma_coords(self, mode_coord) -> tuple:
        """Per-mode values (a global tile coordinate, a box coordinate) in the driver's dim order, innermost first:
        the coordinate list of ``cp.async.bulk.tensor.Nd``. ``tma_coords((m, k))`` → ``(k, m)`` for a row-major (M,K)
        global. Modes past ``len(mode_coord)`` count as 0."""
        mode_coord = tuple(mode_coord) + (0,) * (self.rank - len(mode_coord))
        return tuple(mode_coord[i] for i in self.mode_order)

    def tma_write_address(self, box_coord, dst: int = 0) -> int:
        """The shared byte address one copy to ``dst`` writes box element ``box_coord`` (driver dim order, innermost
        first, each within ``box_counts``) to; the hardware model of this module:

        ``row = c1 + n1·(c2 + n2·(c3 + ...))``, ``addr = dst + c0·elem_bytes + row·smem_row_pitch``, then the mode's
        ``Sw<B,4,3>`` on the absolute address. E.g. SW128 bf16, box (64,8), dst 0: ``(0,1)`` → 144.
        Pre: interleave NONE; ``dst`` 128-byte aligned (the hardware faults otherwise).
        """
        if self.interleave is not TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE:
            raise TmaError("interleaved boxes are not modelled", op="tma_write_address")
        if dst % TMA_SMEM_MIN_ALIGN:
            raise TmaError(f"destination {dst} is not {TMA_SMEM_MIN_ALIGN}-byte aligned", op="tma_write_address")
        counts = self.box_counts
        if len(box_coord) != self.rank or any(not 0 <= c < n for c, n in zip(box_coord, counts)):
            raise TmaError(f"box coordinate {tuple(box_coord)} is outside the box {counts}", op="tma_write_address")
        row, scale = 0, 1
        for c, n in zip(box_coord[1:], counts[1:]):
            row += c * scale
            scale *= n
        addr = dst + box_coord[0] * self.elem_bytes + row * self.smem_row_pitch
        sw = self.swizzle.swizzle
        return sw(addr) if sw is not None else addr

    def smem_layout(self):
        """What one copy writes, as a CuTe smem layout over the global layout's modes (element offsets, byte-address
        swizzle): ``Sw<3,4,3> o 0 o (64,128):(64,1)`` for a (128 M, 64 K) K-major bf16 SW128 box is printed in mode
        order (M,K) as ``Sw<3,4,3> o 0 o (128,64):(64,1)``. Post: its byte addresses equal ``tma_write_address``."""
        counts = self.box_counts
        pitch_elems = self.smem_row_pitch // self.elem_bytes
        strides = [0] * self.rank
        scale = pitch_elems
        for d, i in enumerate(self.mode_order):
            if d == 0:
                strides[i] = 1
            else:
                strides[i] = scale
                scale *= counts[d]
        shape = [0] * self.rank
        for d, i in enumerate(self.mode_order):
            shape[i] = counts[d]
        inner = Layout(tuple(shape), tuple(strides))
        sw = self.swizzle.swizzle
        return ComposedLayout(sw, 0, inner) if sw is not None else inner


# ---------------------------------------------------------------------------------------------------------------
# From layouts
# ---------------------------------------------------------------------------------------------------------------

def _global_modes(global_layout, esize, err, inner_mode=None):
    """(mode_order, dims by mode, byte strides by mode) of a global tensor layout; see make_tma_params.

    Driver dim 0 is a mode TMA can walk with the element size as its stride: the mode of stride 1, or a mode of
    extent 1, whose only coordinate is 0 so that its stride never moves the address (torch reports any stride for
    a size-1 dim: ``x[:, 3:4]`` of a row-major (M,K) is (M,1):(K,1)). Where both kinds exist, ``inner_mode`` (the
    smem layout's contiguous mode) picks among them, so a (M,1) column written into a row-major box is read along
    its extent-1 mode; otherwise the stride-1 mode wins.

    An extent-1 mode at driver dim d >= 1 gets a stride that is legal and canonical: the bytes the dims before it
    span, rounded up to 16 (dense packing in driver order). Only out-of-bounds box elements (coordinates >= 1 along
    that mode, which TMA fills with zeros and a store skips) ever lie beyond coordinate 0, so it addresses nothing.
    """
    if isinstance(global_layout, ComposedLayout) or not isinstance(global_layout, Layout):
        raise err("the global tensor is a plain Layout (shape:stride in elements), not a swizzled or composed one")
    ms = modes(global_layout)
    if len(ms) > TMA_MAX_RANK:
        raise err(f"the global layout has {len(ms)} modes; TMA maps have at most {TMA_MAX_RANK}")
    dims, strides = [], []
    for i, m in enumerate(ms):
        c = coalesce(m)
        if is_tuple(c.shape):
            # TMA gives every dim one stride; a mode like (4,(2,3)) that does not coalesce has several.
            raise err(f"global mode {i} ({operand_text(m)}) coalesces to {operand_text(c)}, not one strided "
                      "dimension: give each stride its own mode")
        if c.shape > 1 and c.stride < 0:
            raise err(f"global mode {i} has negative stride {c.stride}: TMA strides are unsigned")
        dims.append(c.shape)
        strides.append(c.stride if c.shape > 1 else None)
    contiguous = [i for i, (n, s) in enumerate(zip(dims, strides)) if n > 1 and s == 1]
    if len(contiguous) > 1:
        raise err(f"global modes {contiguous[0]} and {contiguous[1]} both have stride 1 (they alias)")
    single = [i for i, n in enumerate(dims) if n == 1]
    if not contiguous and not single:
        shown = ",".join(str(s) for s in strides)
        raise err(f"no global mode has stride 1 (strides ({shown}) elements): TMA's dim 0 must be contiguous")
    first = inner_mode if inner_mode in single else (contiguous + single)[0]
    order = (first,) + tuple(i for i in range(len(ms)) if i != first)
    byte_strides = [None] * len(ms)
    reach = dims[first] * esize  # bytes the driver dims so far span
    for i in order[1:]:
        if strides[i] is not None:
            byte_strides[i] = strides[i] * esize
        else:
            filler = -(-reach // 16) * 16
            # only a tensor spanning 1 TiB reaches the limit; any legal stride serves a mode that is never walked
            byte_strides[i] = filler if filler < TMA_GLOBAL_STRIDE_LIMIT else 16
        reach = max(reach, byte_strides[i] * dims[i])
    return order, dims, byte_strides


def _tma_swizzle_of(sw, err) -> TmaSwizzle:
    if sw is None or sw.bits == 0:
        return TmaSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
    try:
        return TmaSwizzle.of_mode(SwizzleMode.from_swizzle(sw))
    except LayoutError:
        raise err(f"the smem layout's swizzle {sw} is not a TMA swizzle: TMA writes Sw<1,4,3> (32B), Sw<2,4,3> "
                  "(64B) or Sw<3,4,3> (128B) on byte addresses (Sw<3,3,3> is the 16-bit element-index form)") from None


def _smem_parts(smem_layout, err):
    try:
        return split_smem_layout(smem_layout)
    except LayoutError:
        raise err("the smem layout is a Layout or Sw o offset o Layout (Swizzle on byte addresses)") from None


def _colex_offsets(shape_stride_pairs) -> list:
    """Values of Σ c_k·d_k over all coordinates, first pair fastest (CuTe's colexicographic 1-D order)."""
    offs = [0]
    for s, d in shape_stride_pairs:
        offs = [o + k * d for k in range(s) for o in offs]
    return offs


def _box_strides(counts_by_mode, order, esize, pitch) -> list:
    """Byte stride of each box mode in what TMA writes (before swizzle): the contiguous mode ``esize``, the next
    ``pitch`` (one swizzle row), each later one the product before it."""
    strides = [0] * len(counts_by_mode)
    scale = pitch
    for d, i in enumerate(order):
        if d == 0:
            strides[i] = esize
        else:
            strides[i] = scale
            scale *= counts_by_mode[i]
    return strides


def _same_swizzle(a, b) -> bool:
    return a == b or all(s is None or s.is_identity for s in (a, b))


def _first_mismatch(sw_l, inner_offsets, elem_off, sw_t, tma_offsets, esize, base):
    """Index of the first element where the layout's byte address differs from TMA's, with both addresses."""
    dst = base + elem_off * esize
    for j, (o, t) in enumerate(zip(inner_offsets, tma_offsets)):
        a = dst + o * esize
        a = sw_l(a) if sw_l is not None else a
        b = sw_t(dst + t) if sw_t is not None else dst + t
        if a != b:
            return j, a, b
    return None


def _unflatten_index(j, counts) -> tuple:
    out = []
    for n in counts:
        out.append(j % n)
        j //= n
    return tuple(out)


def _contiguous_mode(inner: Layout):
    """The top-level mode of an smem layout whose first leaf has stride 1 (its contiguous mode), or None."""
    for i, m in enumerate(modes(inner)):
        leaves_s = flatten_tuple(m.shape)
        leaves_d = flatten_tuple(m.stride)
        leaves_s = leaves_s if is_tuple(leaves_s) else (leaves_s,)
        leaves_d = leaves_d if is_tuple(leaves_d) else (leaves_d,)
        for s, d in zip(leaves_s, leaves_d):
            if s > 1:
                if d == 1:
                    return i
                break
    return None


def _mode_extents(inner: Layout, rank: int, err) -> list:
    ext = [product(m.shape) for m in modes(inner)] if is_tuple(inner.shape) else [inner.shape]
    if len(ext) > rank:
        extra = ext[rank:]
        raise err(f"the smem layout has {len(ext)} modes but the global tensor {rank}: extra smem modes of sizes "
                  f"{tuple(extra)} have no global dim (slice a pipeline-stage mode out first: smem(_,_,s))")
    return ext + [1] * (rank - len(ext))


def _prepare(op: str, global_layout, dtype, smem_layout, swizzle):
    """What make_tma_params and tma_boxes both read off their operands: the error maker, element type and size,
    the global modes in driver order with dims and byte strides, the smem layout's parts, the swizzle and the
    smem extent per global mode."""
    ops = (global_layout, dtype if isinstance(dtype, str) else str(dtype), smem_layout)

    def err(reason):
        return TmaError(reason, op=op, operands=ops)

    dt, tdt = _element(dtype)
    esize = dt.bits // 8
    sw_l, off, inner = _smem_parts(smem_layout, err)
    order, dims, byte_strides = _global_modes(global_layout, esize, err, _contiguous_mode(inner))
    rank = len(order)
    tsw = _resolve_swizzle(sw_l, swizzle, err)
    ext = _mode_extents(inner, rank, err)
    return err, dt, tdt, esize, order, dims, byte_strides, rank, sw_l, off, inner, tsw, ext


def make_tma_params(global_layout, dtype, smem_box_layout, *, swizzle=None, element_strides=None,
                    l2_promotion=TmaL2Promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                    oob_fill=TmaOobFill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, base: int = 0) -> TmaParams:
    """Tensor-map parameters for copying one smem box with one TMA instruction, checked against the smem layout.

    - ``global_layout``: the whole global tensor, shape = its logical shape, strides in ELEMENTS, any mode order
      (row-major (M,K):(K,1), column-major (M,K):(1,M), a batch mode (M,K,L):(K,1,M·K), ...). Each mode is one
      strided dim; the mode with stride 1 becomes the driver's dim 0 (TmaError if none), the others follow in mode
      order (``mode_order``). Byte strides are ``stride·elem_bytes``. A mode of extent 1 may have any stride (its
      coordinate is always 0): it can be dim 0 when the smem box is contiguous along it (an (M,1) column read into a
      row-major box: dims (1, M)), and elsewhere it carries the dense stride of the dims before it. So a (1, N) row,
      an (M, 1) column with a 16-byte row pitch, (1, 1) and rank-3 tensors with extent-1 modes all have maps; box
      elements past the extent are out of bounds (zeros loaded, skipped by a store).
    - ``dtype``: element type name (``'bf16'``, ``'e4m3'`` → UINT8, ...), DType or TmaDataType.
    - ``smem_box_layout``: the smem layout one copy fills, over the same modes as the global tensor (missing trailing
      modes are box size 1): a Layout, or ``Sw o offset o L`` with the Swizzle on byte addresses, e.g. the GMMA tile
      ``gmma_smem_layout('K','SW128','bf16',(128,64))`` = ``Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))``.
      Box dim along mode i = the size of smem mode i (times the element stride for dims ≥ 1).
    - ``swizzle``: by default the smem layout's (SW128 → 128B, INTER/none → NONE); given, it must agree.
    - ``base``: the smem byte address of the layout's origin (only its value mod 1024 matters; default 0).

    Example: row-major bf16 (4096,4096):(4096,1) and that (128,64) K-major SW128 tile → dims (4096, 4096), strides
    (8192,), box (64, 128), SWIZZLE_128B, mode_order (1, 0), 16384 bytes per copy, smem alignment 1024.

    Post: ``TmaParams`` satisfying every driver constraint, and for every box coordinate c (in mode order)
    ``byte_address(smem_box_layout, dtype, c, base) == p.tma_write_address(p.tma_coords(c), dst)`` with
    ``dst = base + p.smem_offset_bytes``. Otherwise TmaError naming both sides: e.g. an SW128 smem layout whose rows
    are 64 bytes apart (TMA puts rows 128 bytes apart), an MN-major smem tile for a K-contiguous global, or a swizzle
    different from ``swizzle``. A tile that needs several copies (inner extent over the swizzle span, a box dim over
    256, or boxes that are not dense) is refused with the count: ``tma_boxes`` splits it.
    """
    err, dt, tdt, esize, order, dims, byte_strides, rank, sw_l, off, inner, tsw, ext = _prepare(
        "make_tma_params", global_layout, dtype, smem_box_layout, swizzle)
    if element_strides is None:
        element_strides = (1,) * rank
    element_strides = tuple(int(e) for e in element_strides)
    if len(element_strides) != rank:
        raise err(f"element_strides has {len(element_strides)} entries, the tensor rank is {rank}")
    if element_strides[0] != 1:
        raise err("element stride of dim 0 must be 1: TMA ignores it without interleave")
    counts = [ext[i] for i in order]
    box = tuple(n * e for n, e in zip(counts, element_strides))

    # A tile TMA cannot write in one copy: say so, with the split tma_boxes would make.
    span = tsw.span_bytes
    too_wide = span and counts[0] * esize > span
    too_big = [d for d, b in enumerate(box) if b > TMA_MAX_BOX_DIM]
    if too_wide or too_big:
        if too_wide:
            why = (f"the smem tile is {counts[0] * esize} bytes along the contiguous global mode {order[0]}, more "
                   f"than one {span}-byte row of {tsw.name}")
        else:
            why = f"box dim {too_big[0]} would be {box[too_big[0]]}, over {TMA_MAX_BOX_DIM}"
        raise err(f"{why}: this tile needs several TMA copies; {_split_hint(global_layout, dtype, smem_box_layout, tsw)}")

    try:
        params = TmaParams(tdt, rank, tuple(dims[i] for i in order), tuple(byte_strides[i] for i in order[1:]), box,
                           element_strides, TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, tsw, l2_promotion,
                           oob_fill, dt, smem_box_layout, order)
    except TmaError as e:
        raise err(f"{e.op}: {e.condition}") from e
    _check_box_layout(params, sw_l, off, inner, ext, base, err, (global_layout, dtype, smem_box_layout, tsw))
    return params


def _resolve_swizzle(sw_l, swizzle, err) -> TmaSwizzle:
    tsw = _tma_swizzle_of(sw_l, err)
    if swizzle is None:
        return tsw
    want = TmaSwizzle(swizzle) if not isinstance(swizzle, (str, SwizzleMode)) else TmaSwizzle.of_mode(swizzle)
    if want is not tsw:
        shown = "no swizzle" if sw_l is None else f"{sw_l} ({tsw.name})"
        raise err(f"the TMA swizzle {want.name} does not match the smem layout's swizzle {shown}: the TMA swizzle "
                  "and the wgmma descriptor swizzle must change together")
    return tsw


def _split_hint(global_layout, dtype, smem_layout, tsw) -> str:
    """Advice for a tile one TMA copy cannot write: the largest box TMA writes along the global tensor's contiguous
    mode (the widest inner extent the swizzle row, 16-byte rows and 256 allow; the other extents up to 256), its
    smem layout, bytes and the copies the tile takes, and the tile laid out as those boxes side by side (what
    ``tma_boxes`` splits into them). The SW128 bf16 tile ``Sw<3,4,3> o 0 o (128,128):(128,1)`` →
    ``"the largest box along the contiguous mode 1 is (128,64): Sw<3,4,3> o 0 o (128,64):(64,1), 16384 bytes per
    copy, 2 copies for the (128,128) tile laid out as Sw<3,4,3> o 0 o (128,(64,2)):(64,(1,8192)) (tma_boxes()
    splits that layout; as laid out now the tile takes 256 copies of box_dims (64, 1))"``; a tile already laid out
    as such boxes (the GMMA K-major SW128 tile (128,128)) → ``"tma_boxes() splits it into 2 boxes of (64, 128)
    (16384 bytes each)"`` (box_dims innermost first).
    Post: every layout it names is one ``make_tma_params`` accepts (else it falls back to tma_boxes' own split)."""
    try:
        as_laid_out = tma_boxes(global_layout, dtype, smem_layout, swizzle=tsw)
    except TmaError as e:
        as_laid_out, why_not = None, e.condition
    proposal = _largest_box(global_layout, dtype, smem_layout, tsw)
    if as_laid_out is not None and (proposal is None or len(as_laid_out.boxes) <= proposal[2]):
        return (f"tma_boxes() splits it into {len(as_laid_out.boxes)} boxes of {as_laid_out.params.box_dims} "
                f"({as_laid_out.params.box_bytes} bytes each)")
    if proposal is None:
        return f"tma_boxes() cannot split it either ({why_not})"
    box_layout, params, copies, tile_layout, tile_shape = proposal
    text = (f"the largest box along the contiguous mode {params.mode_order[0]} is {_mode_order_shape(params)}: "
            f"{operand_text(box_layout)}, {params.box_bytes} bytes per copy, {copies} copies for the "
            f"{operand_text(tile_shape)} tile laid out as {operand_text(tile_layout)} (tma_boxes() splits that layout")
    if as_laid_out is None:
        text += f"; as laid out now no box fits: {why_not}"
    else:
        text += (f"; as laid out now the tile takes {len(as_laid_out.boxes)} copies of box_dims "
                 f"{as_laid_out.params.box_dims}")
    return text + ")"


def _mode_order_shape(params) -> str:
    """A box's extents in the global tensor's mode order (``box_dims`` are innermost first): ``(128,64)``."""
    rank = len(params.mode_order)
    extents = [1] * rank
    for dim, mode in enumerate(params.mode_order):
        extents[mode] = params.box_counts[dim]
    return operand_text(tuple(extents))


def _largest_box(global_layout, dtype, smem_layout, tsw):
    """(box layout, its TmaParams, copies, the tile laid out as such boxes, the tile's extents) for the widest box
    TMA writes along the contiguous mode of ``global_layout`` inside the tile of ``smem_layout``'s extents, or None
    when there is no such box (extents that no legal box divides, a global tensor without a contiguous mode)."""
    from ..tiling import tile_to_shape
    try:
        _err, _dt, _tdt, esize, order, _dims, _bs, rank, sw_l, _off, _inner, tsw, ext = _prepare(
            "tma_boxes", global_layout, dtype, smem_layout, tsw)
    except TmaError:
        return None
    span = tsw.span_bytes or TMA_MAX_BOX_DIM * esize
    cap = min(TMA_MAX_BOX_DIM, span // esize)
    box = [max((d for d in range(1, min(e, TMA_MAX_BOX_DIM) + 1) if e % d == 0), default=1) for e in ext]
    inner = [d for d in range(1, min(ext[order[0]], cap) + 1) if ext[order[0]] % d == 0 and (d * esize) % 16 == 0]
    if not inner:
        return None
    box[order[0]] = inner[-1]
    pitch = -(-box[order[0]] * esize // 16) * 16 // esize
    strides, step = [0] * rank, 1
    for k, mode in enumerate(order):
        strides[mode] = step
        step *= pitch if k == 0 else box[mode]
    plain = Layout(tuple(box), tuple(strides))
    box_layout = ComposedLayout(sw_l, 0, plain) if sw_l is not None else plain
    try:
        params = make_tma_params(global_layout, dtype, box_layout, swizzle=tsw)
        tile = tile_to_shape(box_layout, tuple(ext), tuple(order.index(i) for i in range(rank)))
        tile = tile.with_inner(coalesce(tile.inner, (1,) * rank)) if sw_l is not None else coalesce(tile, (1,) * rank)
        copies = len(tma_boxes(global_layout, dtype, tile, swizzle=tsw).boxes)
    except (TmaError, LayoutError):
        return None
    return box_layout, params, copies, tile, tuple(ext)


def _check_box_layout(params, sw_l, off, inner, ext, base, err, split_args) -> None:
    """Raise unless the smem layout's byte addresses are exactly what one copy of ``params`` writes."""
    esize = params.elem_bytes
    dst = base + off * esize
    if dst % TMA_SMEM_MIN_ALIGN:
        raise err(f"the box starts at smem byte {dst}, but TMA destinations must be {TMA_SMEM_MIN_ALIGN}-byte aligned")
    inner_shape = flatten_tuple(inner.shape) if is_tuple(inner.shape) else (inner.shape,)
    inner_stride = flatten_tuple(inner.stride) if is_tuple(inner.stride) else (inner.stride,)
    box_strides = _box_strides(ext, params.mode_order, esize, params.smem_row_pitch)
    if _same_swizzle(sw_l, params.swizzle.swizzle):
        # One bijective swizzle on both sides: the swizzled addresses agree exactly where the plain byte offsets
        # do, and equal coalesced layouts give equal offsets everywhere. This settles the usual tile without
        # listing its elements (which was most of a cached compile of gemm_hopper, for its two maps).
        mine = coalesce(Layout(tuple(inner_shape), tuple(d * esize for d in inner_stride)))
        theirs = coalesce(Layout(tuple(ext), tuple(box_strides)))
        if mine == theirs:
            return
    inner_offs = _colex_offsets(zip(inner_shape, inner_stride))
    tma_offs = _colex_offsets(zip(ext, box_strides))
    miss = _first_mismatch(sw_l, inner_offs, off, params.swizzle.swizzle, tma_offs, esize, base)
    if miss is None:
        return
    j, got, want = miss
    coord = _unflatten_index(j, ext)[:max(1, len(ext))]
    tma_side = (f"{operand_text(params.smem_layout())} (box_dims {params.box_dims} innermost first, "
                f"{params.swizzle.name}")
    if params.swizzle.span_bytes:
        tma_side += f": rows {params.box_counts[0] * esize} bytes long, {params.smem_row_pitch} bytes apart"
    tma_side += ")"
    hint = ""
    cm = _contiguous_mode(inner)
    if cm is not None and cm != params.mode_order[0]:
        hint = (f"; the smem tile is contiguous along mode {cm} but the global tensor along mode "
                f"{params.mode_order[0]}, and TMA does not transpose (K-major vs MN-major)")
    else:
        try:
            boxes = tma_boxes(*split_args[:3], swizzle=split_args[3], base=base)
            if len(boxes.boxes) > 1:
                hint = (f"; it is {len(boxes.boxes)} TMA boxes of {boxes.params.box_dims}: use tma_boxes()")
        except TmaError:
            pass
    raise err(f"the smem layout is not what TMA writes: TMA writes {tma_side}; at coordinate {coord} the smem "
              f"layout has byte {got}, TMA writes byte {want}{hint}")


@dataclass(frozen=True)
class TmaBox:
    """One copy of a tile split by ``tma_boxes``: ``mode_offset`` is the box origin inside the tile, per global mode
    in elements (add it to the tile's global coordinate, then ``params.tma_coords``); ``smem_offset_bytes`` is where
    the box starts relative to the tile layout's origin (the copy's destination is ``tile_base + smem_offset_bytes``)."""

    mode_offset: tuple
    smem_offset_bytes: int


@dataclass(frozen=True)
class TmaBoxes:
    """A tile written by several TMA copies of one tensor map: ``params`` (the map, with the first box's layout as
    ``smem_box_layout``), ``boxes`` in the colexicographic order of the box grid, and the tile layout."""

    params: TmaParams
    boxes: tuple
    tile_layout: object

    @property
    def expect_tx_bytes(self) -> int:
        """Bytes all the copies deliver: the mbarrier expect-tx count for the whole tile."""
        return len(self.boxes) * self.params.box_bytes


def tma_boxes(global_layout, dtype, smem_tile_layout, *, swizzle=None,
              l2_promotion=TmaL2Promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
              oob_fill=TmaOobFill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, base: int = 0) -> TmaBoxes:
    """Split an smem tile into the largest equal TMA boxes that together fill it, one tensor map for all.

    Box dims are divisors of the tile's extents that TMA accepts (≤ 256; the inner one a multiple of 16 bytes and
    within the swizzle span); the largest box (fewest copies; ties: the widest inner dim) wins for which every box of
    ``logical_divide(tile, box_shape)`` is exactly what one copy writes, at a 128-byte aligned destination. E.g. the K-major
    SW128 bf16 tile (128,128) ``Sw<3,4,3> o 0 o ((8,16),(64,2)):((64,512),(1,8192))`` → 2 boxes of (64 K, 128 M) at
    smem bytes 0 and 16384; the MN-major SW128 bf16 tile (128,64) tiled LayoutLeft → 16 boxes of (64 M, 8 K).

    Post: each box satisfies ``make_tma_params``'s post-condition at ``base + smem_offset_bytes``; the boxes' writes
    cover the tile's byte addresses exactly once. TmaError when no split exists (e.g. a transposed tile).
    """
    err, dt, tdt, esize, order, dims, byte_strides, rank, sw_l, off, inner, tsw, ext = _prepare(
        "tma_boxes", global_layout, dtype, smem_tile_layout, swizzle)
    sw_t = tsw.swizzle
    n_inner_modes = len(inner.shape) if is_tuple(inner.shape) else 1

    def split(box_by_mode):
        """(box inner layout, element offsets of the boxes) from logical_divide, or None if it does not divide."""
        tiler = tuple(box_by_mode[:n_inner_modes])
        try:
            src = inner if is_tuple(inner.shape) else Layout((inner.shape,), (inner.stride,))
            divided = logical_divide(src, tiler)
        except LayoutError:
            return None
        tile_crd = tuple((_, 0) for _i in range(n_inner_modes))
        rest_crd = tuple((0, _) for _i in range(n_inner_modes))
        box_inner = slice_layout(tile_crd, divided)
        rest = slice_layout(rest_crd, divided)
        rest_offs = _colex_offsets(zip(_leaves(rest.shape), _leaves(rest.stride)))
        base_off = slice_offset(rest_crd, divided)
        return box_inner, [off + base_off + r for r in rest_offs]

    def valid(box_by_mode):
        got = split(box_by_mode)
        if got is None:
            return None
        box_inner, elem_offs = got
        if any((base + eo * esize) % TMA_SMEM_MIN_ALIGN for eo in elem_offs):
            return None  # every copy's destination must be 128-byte aligned
        pitch = tsw.span_bytes or box_by_mode[order[0]] * esize
        model = _colex_offsets(zip(box_by_mode, _box_strides(box_by_mode, order, esize, pitch)))
        inner_offs = _colex_offsets(zip(_leaves(box_inner.shape), _leaves(box_inner.stride)))
        for eo in elem_offs:
            if _first_mismatch(sw_l, inner_offs, eo, sw_t, model, esize, base) is not None:
                return None
        return box_inner, elem_offs

    # Candidates per driver dim: divisors of the tile's extent that the driver accepts as box dims. Try the
    # combinations largest box first (ties: wider inner dims first); the first whose boxes are all dense copies
    # at aligned destinations wins. Large boxes that are not dense fail at their first misplaced element.
    cands = []
    for d, i in enumerate(order):
        n = ext[i]
        c = [b for b in range(min(n, TMA_MAX_BOX_DIM), 0, -1) if n % b == 0]
        if d == 0:
            c = [b for b in c if (b * esize) % 16 == 0 and not (tsw.span_bytes and b * esize > tsw.span_bytes)]
        cands.append(c)
    combos = sorted(itertools.product(*cands), key=lambda bs: (-product(tuple(bs)), tuple(-b for b in bs)))
    found = None
    for combo in combos:
        box_by_mode = [1] * rank
        for d, i in enumerate(order):
            box_by_mode[i] = combo[d]
        found = valid(box_by_mode)
        if found is not None:
            chosen = box_by_mode
            break
    if found is None:
        i = order[0]
        cm = _contiguous_mode(inner)
        why = (f"the smem tile is contiguous along mode {cm}, the global tensor along mode {i}, and TMA does not "
               "transpose" if cm is not None and cm != i else
               f"no box of whole 16-byte rows along the contiguous mode {i} is dense in the tile at 128-byte aligned "
               "destinations")
        raise err(f"no TMA box fits this tile: {why}")
    box_inner, elem_offs = found
    first = ComposedLayout(sw_l, elem_offs[0], box_inner) if sw_l is not None else box_inner
    box_dims = tuple(chosen[i] for i in order)
    params = TmaParams(tdt, rank, tuple(dims[i] for i in order), tuple(byte_strides[i] for i in order[1:]),
                       box_dims, (1,) * rank, TmaInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, tsw, l2_promotion,
                       oob_fill, dt, first, order)
    grid = [ext[i] // chosen[i] for i in range(rank)]
    boxes = []
    for j, eo in enumerate(elem_offs):
        r = _unflatten_index(j, grid)
        boxes.append(TmaBox(tuple(r[i] * chosen[i] for i in range(rank)), eo * esize))
    return TmaBoxes(params, tuple(boxes), smem_tile_layout)


def _leaves(t) -> tuple:
    f = flatten_tuple(t)
    return f if is_tuple(f) else (f,)
