"""Types of the tile IR: scalars, tensors (dtype × memory space × layoutc layout), global tensors with runtime
shapes, TMA tensor maps and mbarrier arrays.

Text forms: ``i32``, ``f32``, ``smem<bf16>[Sw<3,4,3> o 0 o (8,64):(64,1)]``, ``rmem<f32>[(4,8):(1,4)]``,
``gtensor<f32, 2>``, ``tmap<bf16, 2>[Sw<3,4,3> o 0 o (64,64):(64,1)]``, ``mbarrier<3>``.
"""
from __future__ import annotations

from dataclasses import dataclass

import layoutc as lc
from layoutc.notation import to_str

from .core import MAX_NESTING, too_deep


@dataclass(frozen=True)
class ScalarType:
    """A scalar: ``i1`` (predicate), ``i32``, ``u32``, ``i64``, ``u64``, ``f16``, ``bf16``, ``f32``, ``e4m3``, ``e5m2``."""

    name: str
    bits: int
    kind: str  # "int", "uint", "float", "pred"

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")


SCALARS = {t.name: t for t in (
    ScalarType("i1", 1, "pred"), ScalarType("i32", 32, "int"), ScalarType("u32", 32, "uint"),
    ScalarType("i64", 64, "int"), ScalarType("u64", 64, "uint"), ScalarType("f16", 16, "float"),
    ScalarType("bf16", 16, "float"), ScalarType("f32", 32, "float"), ScalarType("e4m3", 8, "float"),
    ScalarType("e5m2", 8, "float"),
)}
I1, I32, U32, I64, U64 = (SCALARS[n] for n in ("i1", "i32", "u32", "i64", "u64"))
F16, BF16, F32 = (SCALARS[n] for n in ("f16", "bf16", "f32"))

SPACES = ("gmem", "smem", "rmem")


@dataclass(frozen=True)
class TensorType:
    """A tensor with a static layout in a memory space: ``smem<bf16>[(64,64):(64,1)]``.

    The layout maps coordinates to element offsets from the tensor's (possibly runtime) base; in smem its outer
    Swizzle acts on absolute byte addresses (layoutc.hopper's convention). Post: ``shape`` is the layout's shape.
    """

    space: str
    dtype: ScalarType
    layout: object  # lc.Layout or lc.ComposedLayout

    def __str__(self) -> str:
        return f"{self.space}<{self.dtype}>[{to_str(self.layout)}]"

    @property
    def shape(self):
        return self.layout.shape

    @property
    def size(self) -> int:
        return lc.size(self.layout)

    @property
    def cosize(self) -> int:
        inner = self.layout.inner if isinstance(self.layout, lc.ComposedLayout) else self.layout
        return lc.cosize(inner)

    @property
    def bytes(self) -> int:
        """Bytes spanned by the tensor's elements (cosize × element bytes, rounded up)."""
        return (self.cosize * self.dtype.bits + 7) // 8


@dataclass(frozen=True)
class GlobalTensorType:
    """A global-memory tensor parameter with a runtime shape and strides (in elements): ``gtensor<f32, 2>``."""

    dtype: ScalarType
    rank: int

    def __str__(self) -> str:
        return f"gtensor<{self.dtype}, {self.rank}>"


@dataclass(frozen=True)
class TensorMapType:
    """A TMA tensor map parameter over a rank-``rank`` global tensor, writing ``box`` in shared memory:
    ``tmap<bf16, 2>[Sw<3,4,3> o 0 o (64,64):(64,1)]``. The host encodes it with layoutc.hopper.make_tma_params."""

    dtype: ScalarType
    rank: int
    box: object

    def __str__(self) -> str:
        return f"tmap<{self.dtype}, {self.rank}>[{to_str(self.box)}]"


@dataclass(frozen=True)
class BarrierType:
    """An array of ``count`` mbarriers in shared memory (8 bytes each): ``mbarrier<3>``."""

    count: int

    def __str__(self) -> str:
        return f"mbarrier<{self.count}>"


@dataclass(frozen=True)
class PipelineType:
    """A ring of ``stages`` smem stages guarded by a full and an empty mbarrier per stage (16 bytes each):
    ``pipeline<4>``. Producers acquire a stage (wait until it is empty, expect its TMA bytes); consumers wait until
    it is full and release it."""

    stages: int

    def __str__(self) -> str:
        return f"pipeline<{self.stages}>"


MAX_GLOBAL_RANK = 8          # modes of a gtensor (each passes an extent and a stride)
MAX_TMA_RANK = 5             # modes of a tensor map (cuTensorMapEncodeTiled's limit)
MAX_FRAGMENT_REGISTERS = 255  # 32-bit registers one thread may have; a fragment lives in registers
MAX_ELEMENTS = (1 << 31) - 1  # elements of a tile or tensor layout, and its largest offset: indices are i32


def shape_problem(shape) -> str | None:
    """Why ``shape`` is not an int tuple of positive extents, nested at most MAX_NESTING levels, or None:
    ``shape_problem((64, 0))`` → ``'has the extent 0: extents are positive'``. Found without recursion."""
    if too_deep(shape):
        return f"nests deeper than {MAX_NESTING} levels"
    stack = [shape]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            if not item:
                return "has an empty mode ()"
            stack.extend(item)
        elif type(item) is not int:  # bool is no extent
            return f"holds {item!r}, not a positive integer"
        elif item < 1:
            return f"has the extent {item}: extents are positive"
    return None


def _shape_text(shape) -> str:
    return "(…)" if too_deep(shape) else to_str(shape)


def _size_problem(size: int) -> str | None:
    if size > MAX_ELEMENTS:
        return f"has {size} elements: indices are i32, at most {MAX_ELEMENTS}"
    return None


def _layout_problem(what: str, layout) -> str | None:
    """Why ``layout`` cannot be a tensor's layout (a Layout or ComposedLayout of positive extents whose size and
    offsets fit i32 indices), or None."""
    inner = layout.inner if isinstance(layout, lc.ComposedLayout) else layout
    if not isinstance(inner, lc.Layout):
        return f"the {what} must be a layout (shape:stride), not {type(layout).__name__}"
    problem = shape_problem(inner.shape) or _size_problem(lc.size(inner))
    if problem is None:
        flat = lc.flatten(inner)
        shapes = flat.shape if isinstance(flat.shape, tuple) else (flat.shape,)
        strides = flat.stride if isinstance(flat.stride, tuple) else (flat.stride,)
        reach = sum((n - 1) * abs(d) for n, d in zip(shapes, strides))
        if reach > MAX_ELEMENTS:
            problem = f"reaches offset {reach}: indices are i32, at most {MAX_ELEMENTS}"
    return f"the {what} {to_str(layout)} {problem}" if problem else None


def type_problem(t) -> str | None:
    """Why ``t`` is not a well-formed type, or None: shapes of positive extents, fragments that fit a thread's
    registers (``frag<f32>[512]`` needs 512 of the 255), ranks a global tensor (1…8) or a tensor map (1…5) can
    have, at least one mbarrier or stage. ``type_problem(FragmentType(F32, (0,)))`` →
    ``'the shape 0 has the extent 0: extents are positive'``. Post: None for every type the ops can use."""
    if isinstance(t, ScalarType):
        return None if SCALARS.get(t.name) == t else f"{t} is not a scalar type"
    if isinstance(t, (FragmentType, GlobalViewType)):
        if not isinstance(t.dtype, ScalarType):
            return f"the element type {t.dtype!r} is not a scalar type"
        problem = shape_problem(t.shape) or _size_problem(lc.product(t.shape))
        if problem:
            return f"the shape {_shape_text(t.shape)} {problem}"
        if isinstance(t, FragmentType):
            registers = -(-t.size * t.dtype.bits // 32)
            if registers > MAX_FRAGMENT_REGISTERS:
                return (f"{t} holds {t.size} values per thread, {registers} 32-bit registers: a thread has at most "
                        f"{MAX_FRAGMENT_REGISTERS}")
        return None
    if isinstance(t, TensorType):
        if t.space not in SPACES:
            return f"{t.space!r} is not a memory space ({', '.join(SPACES)})"
        if not isinstance(t.dtype, ScalarType):
            return f"the element type {t.dtype!r} is not a scalar type"
        return _layout_problem("layout", t.layout)
    if isinstance(t, GlobalTensorType):
        if type(t.rank) is not int or not 1 <= t.rank <= MAX_GLOBAL_RANK:
            return f"a gtensor has rank 1 to {MAX_GLOBAL_RANK}, not {t.rank}"
        return None
    if isinstance(t, TensorMapType):
        if type(t.rank) is not int or not 1 <= t.rank <= MAX_TMA_RANK:
            return f"a tmap has rank 1 to {MAX_TMA_RANK} (TMA's limit), not {t.rank}"
        return _layout_problem("box", t.box)
    if isinstance(t, BarrierType):
        return None if type(t.count) is int and t.count >= 1 else f"an mbarrier array holds at least 1, not {t.count}"
    if isinstance(t, PipelineType):
        return None if type(t.stages) is int and t.stages >= 1 else f"a pipeline has at least 1 stage, not {t.stages}"
    return f"{type(t).__name__} is not a type of the tile IR"


def scalar(name: str) -> ScalarType:
    """The scalar type named ``name``: ``scalar('i32')``. Pre: a known name."""
    return SCALARS[name]


@dataclass(frozen=True)
class GlobalViewType:
    """A static-shape window of a global tensor at a runtime origin: ``gview<f32>[(64,64)]``."""

    dtype: ScalarType
    shape: object  # an IntTuple

    def __str__(self) -> str:
        return f"gview<{self.dtype}>[{to_str(self.shape)}]"

    @property
    def size(self) -> int:
        return lc.product(self.shape)


@dataclass(frozen=True)
class FragmentType:
    """A thread's register tile: ``frag<f32>[(2,4)]`` holds size(shape) values per thread, indexed by the
    coordinates of ``shape`` (colexicographic)."""

    dtype: ScalarType
    shape: object  # an IntTuple

    def __str__(self) -> str:
        return f"frag<{self.dtype}>[{to_str(self.shape)}]"

    @property
    def size(self) -> int:
        return lc.product(self.shape)
