"""smem: shared-memory tensors: static allocations, pipeline-stage slices, and TV-layout loads and stores through
the physical byte addresses of the layout (its outer Swizzle acts on absolute byte addresses, as on the hardware);
``smem.stmatrix`` is a store whose TV layout each warp can issue as ``stmatrix.m8n8`` instructions."""
from __future__ import annotations

import numpy as np

import layoutc as lc
from layoutc.hopper import split_smem_layout, stmatrix_tv

from ..core import walk
from ..text import attribute_text
from ..types import I32, FragmentType, TensorType
from . import (
    OPS, SMEM_BASE, SMEM_LIMIT, TABLE_LIMIT, OpDef, const_int, describe_threads, element_bytes, from_bytes, kernel_rule,
    layout_values, numpy_dtype, register, smem_plan, to_bytes, tv_attr, tv_table, verify_tv,
)

MIN_ALIGN = 128       # default alignment of an allocation (what TMA needs of a destination)
MAX_ALIGN = 1024      # the largest alignment offered (the swizzle repeat of SW128)


# -- layout facts ------------------------------------------------------------------------------------------------

def swizzle_of(layout):
    """The byte-address Swizzle of a smem layout (None for a plain Layout or an identity swizzle)."""
    if isinstance(layout, lc.ComposedLayout) and isinstance(layout.outer, lc.Swizzle) and layout.outer.bits:
        return layout.outer
    return None


def swizzle_repeat(layout) -> int:
    """Bytes after which the layout's swizzle pattern repeats (256/512/1024 for SW32/SW64/SW128); 0 without one."""
    sw = swizzle_of(layout)
    return sw.span if sw is not None else 0


def smem_layout_problem(layout) -> str | None:
    """Why ``layout`` cannot be a shared-memory layout, or None: a Layout or ``Sw o offset o L`` (Swizzle outer) with
    non-negative strides and offset."""
    try:
        _sw, offset, inner = split_smem_layout(layout)
    except lc.LayoutError:
        return "a shared-memory layout is a Layout or Sw<B,M,S> o offset o Layout (the swizzle on byte addresses)"
    strides = lc.flatten(inner).stride
    strides = strides if isinstance(strides, tuple) else (strides,)
    if offset < 0 or any(s < 0 for s in strides):
        return "shared-memory layouts have non-negative strides and offset"
    return None


def smem_bytes(t: TensorType) -> int:
    """Bytes a smem tensor of type ``t`` occupies from its base: ``(offset + cosize) · element bytes``, rounded up to
    the swizzle repeat (the swizzle permutes addresses inside aligned blocks of that size)."""
    _sw, offset, inner = split_smem_layout(t.layout)
    nbytes = (offset + lc.cosize(inner)) * element_bytes(t.dtype)
    rep = swizzle_repeat(t.layout)
    return -(-nbytes // rep) * rep if rep else nbytes


def alloc_alignment(op) -> int | None:
    """The alignment of a ``smem.alloc``: its ``align`` attribute, by default max(128, the swizzle repeat); None when
    the attribute is no power of two from 16 to 1024 (the verifier reports it)."""
    t = op.results[0].type
    align = op.attrs.get("align", max(MIN_ALIGN, swizzle_repeat(t.layout)))
    if type(align) is not int or not 16 <= align <= MAX_ALIGN or align & (align - 1):
        return None
    return align


def stage_sliced(layout):
    """``layout`` with its last mode fixed at 0: what ``smem.slice`` gives (the stage's offset goes to the runtime
    base). A ComposedLayout keeps its swizzle and offset."""
    coord = (lc._,) * (lc.rank(layout) - 1) + (0,)
    return layout(coord) if isinstance(layout, lc.ComposedLayout) else lc.slice_layout(coord, layout)


def _inner(layout):
    return layout.inner if isinstance(layout, lc.ComposedLayout) else layout


def _lowbit(x: int) -> int:
    return x & -x


def view_alignment(value) -> int | None:
    """The largest power of two that every runtime base address of smem view ``value`` is known to be a multiple
    of (following ``smem.slice`` back to its ``smem.alloc``), or None when it cannot be told statically."""
    owner = getattr(value, "owner", None)
    if owner is None:
        return None
    if owner.name == "smem.alloc":
        return alloc_alignment(owner)
    if owner.name == "smem.permute":
        return view_alignment(owner.operands[0])
    if owner.name == "smem.offset":
        parent = view_alignment(owner.operands[0])
        t = owner.operands[0].type
        return None if parent is None else offset_alignment(t.layout, element_bytes(t.dtype), parent, _lowbit)
    if owner.name in ("smem.slice", "smem.tile"):
        parent = view_alignment(owner.operands[0])
        t = owner.operands[0].type
        try:
            _layout, index = offset_view_layouts(owner, t.layout)
        except lc.LayoutError:
            return None
        return None if parent is None else index_alignment(index, element_bytes(t.dtype), parent, _lowbit)
    return None


def alignment_advice(value, need: int) -> str:
    """How smem view ``value`` becomes known to be ``need``-byte aligned (``view_alignment`` ≥ need), for messages:
    raise the align of its ``smem.alloc`` where that is below ``need``, and make the index stride of each
    ``smem.slice``/``smem.tile`` on the way that is not a multiple of ``need`` one: for ``%rows = smem.tile %stage,
    %w {mode = 0, size = 4}`` of a SW128 stage (4 rows of 128 bytes per block), ``alignment_advice(%rows, 1024)`` →
    ``"make the step of smem.tile %rows (a multiple of 512 bytes per index) a multiple of 1024 bytes"``.
    Post: names only changes that are legal (an align of at most 1024; strides, not the hardware's rules)."""
    steps, owner = [], getattr(value, "owner", None)
    while owner is not None and owner.name in ("smem.slice", "smem.tile", "smem.permute"):
        if owner.name != "smem.permute":
            t = owner.operands[0].type
            try:
                _layout, index = offset_view_layouts(owner, t.layout)
                stride = index_alignment(index, element_bytes(t.dtype), 1 << 30, _lowbit)
            except (KeyError, lc.LayoutError):
                stride = None
            if stride is not None and stride % need:
                steps.append(f"make the step of {owner.name} %{owner.results[0].name} (a multiple of {stride} "
                             f"bytes per index) a multiple of {need} bytes")
        owner = getattr(owner.operands[0], "owner", None)
    if owner is not None and owner.name == "smem.alloc":
        align = alloc_alignment(owner)
        if isinstance(align, int) and align < need:
            steps.insert(0, f"raise the align of smem.alloc %{owner.results[0].name} to {need}" if need <= MAX_ALIGN
                         else f"start %{owner.results[0].name} on a {need}-byte boundary")
    return " and ".join(steps) or f"start the view on a {need}-byte boundary"


def view_phase(value, repeat: int) -> int | None:
    """The byte offset of smem view ``value``'s base from the last ``repeat``-byte boundary (its phase in a swizzle
    pattern of that repeat), when it is the same for every run: the ``smem.alloc`` is ``repeat``-aligned and every
    ``smem.slice``/``smem.tile`` on the way moves the base by a multiple of ``repeat`` or by a constant index. None
    when it cannot be told statically. ``view_phase(%a_hi, 1024)`` → 64 for the second K-half (64 bytes) of a K-major
    SW128 tile whose stage starts on a 1024-byte boundary."""
    owner = getattr(value, "owner", None)
    if owner is None:
        return None
    if owner.name == "smem.alloc":
        align = alloc_alignment(owner)
        return 0 if align is not None and align % repeat == 0 else None
    if owner.name == "smem.permute":
        return view_phase(owner.operands[0], repeat)
    if owner.name not in ("smem.slice", "smem.tile"):
        return None
    parent = view_phase(owner.operands[0], repeat)
    if parent is None:
        return None
    t = owner.operands[0].type
    try:
        _layout, index = offset_view_layouts(owner, t.layout)
    except lc.LayoutError:
        return None
    esize = element_bytes(t.dtype)
    known = const_int(owner.operands[1])
    if known is not None and 0 <= known < lc.size(index):
        return (parent + esize * index(known)) % repeat
    if index_alignment(index, esize, repeat, _lowbit) % repeat == 0:
        return parent
    return None


def offset_view_layouts(op, layout):
    """(the sub-view's layout, the layout of its runtime index) of a ``smem.slice`` (the last mode, fixed at the
    index) or a ``smem.tile`` (block ``i`` of ``size`` along ``mode``): the sub-view starts ``index(i)`` elements
    after its parent's base. Raises LayoutError when the op's attributes do not cut ``layout`` (the verifier says
    why at the op)."""
    if op.name == "smem.slice":
        if lc.rank(layout) < 2:
            raise lc.LayoutError(f"smem.slice of {lc.to_str(layout)}: it needs rank >= 2")
        return stage_sliced(layout), _inner(layout)[lc.rank(layout) - 1]
    mode, size = op.attrs.get("mode"), op.attrs.get("size")
    rank = lc.rank(_inner(layout))
    if type(mode) is not int or type(size) is not int or not 0 <= mode < rank or size < 1:
        raise lc.LayoutError(f"smem.tile of {lc.to_str(layout)}: mode {mode!r} and size {size!r} cut no mode")
    return tile_split(layout, mode, size)


def index_alignment(index, esize: int, align: int, lowbit) -> int:
    """The alignment ``align`` of a parent base, lowered to what ``base + esize·index(i)`` keeps for every ``i``:
    the lowest power of two of the index layout's (non-trivial) strides in bytes."""
    shapes, strides = lc.flatten(index).shape, lc.flatten(index).stride
    for n, d in zip(shapes if isinstance(shapes, tuple) else (shapes,),
                    strides if isinstance(strides, tuple) else (strides,)):
        if n > 1 and d:
            align = min(align, lowbit(d * esize))
    return align


def interpret_offset_view(op, ix, what: str) -> None:
    """Interpreter of smem.slice / smem.tile: the parent's per-thread base plus ``esize·index(i)`` (a table per
    layout), the index checked against the index layout's size."""
    view_v, index_v = op.operands
    view = ix.get(view_v)
    layout, index = offset_view_layouts(op, view.layout)
    n = lc.size(index)
    esize = element_bytes(view.dtype)
    i = ix.get(index_v).astype(np.int64)
    bad = ix.mask & ((i < 0) | (i >= n))
    if bad.any():
        domain = f"the last mode's {n} entries" if op.name == "smem.slice" else f"the {n} blocks"
        ix.fail(op, f"{what} {int(i[bad][0])} (thread {int(np.nonzero(bad)[0][0])}) is outside {domain} of "
                    f"{view.name}")
    i = np.clip(i, 0, n - 1)
    if n > TABLE_LIMIT:
        offsets = layout_values(index, i) * esize
    else:
        offsets = ix.cached(("view-offsets", op.name, view.layout, index, view.dtype),
                            lambda: layout_values(index) * esize)[i]
    base = view.base + offsets
    name = f"{view.name}[%{index_v.name}]" if op.name == "smem.slice" else f"{view.name}.tile[%{index_v.name}]"
    ix.set(op.results[0], SmemView(base, layout, view.dtype, name, view.lo, view.hi))


def lower_offset_view(op, lx) -> None:
    """Lowering of smem.slice / smem.tile: ``base + esize·index(i)`` with ``emit_layout`` of the index layout; the
    known alignment drops to ``index_alignment``."""
    view_v, index_v = op.operands
    view = lx.get(view_v)
    layout, index = offset_view_layouts(op, view.layout)
    esize = element_bytes(view.dtype)
    off = lx.emit_layout(index, lx.get(index_v))
    base = lx.b.add(view.base, lx.b.mul(off, lx.i32(esize)) if esize != 1 else off)
    lx.set(op.results[0], lx.SmemRef(base, layout, view.dtype, index_alignment(index, esize, view.align, lx.lowbit)))


def byte_offsets(ix, layout, dtype, indices=None) -> np.ndarray:
    """Byte offsets before the swizzle, from the view's base, of every element of ``layout`` in the colexicographic
    order of its shape: ``offset·esize + byte_addresses(inner)`` (cached per layout). With ``indices`` (element
    indices), those elements' offsets only: a layout of more than TABLE_LIMIT elements is evaluated at them instead of
    tabulated."""
    if indices is not None and lc.size(layout) > TABLE_LIMIT:
        _sw, offset, inner = split_smem_layout(layout)
        return (layout_values(inner, indices) * dtype.bits) // 8 + offset * element_bytes(dtype)

    def compute():
        _sw, offset, inner = split_smem_layout(layout)
        return inner_byte_addresses(inner, dtype) + offset * element_bytes(dtype)
    table = ix.cached(("smem-bytes", layout, dtype), compute)
    return table if indices is None else table[indices]


def inner_byte_addresses(inner, dtype) -> np.ndarray:
    """``layoutc.hopper.byte_addresses(inner, dtype)`` (base 0, no swizzle) with numpy: element i's byte
    ``inner(i)·bits // 8``."""
    return (layout_values(inner) * dtype.bits) // 8


def physical(layout, addresses):
    """Apply the layout's byte-address swizzle to absolute addresses (numpy, elementwise)."""
    sw = swizzle_of(layout)
    return sw(addresses) if sw is not None else addresses


class SmemView:
    """Interpreter value of a smem view: the per-thread absolute byte address of its origin (``base``, int64 over
    threads), its layout and element type, and the byte range ``[lo, hi)`` of the allocation it lies in."""

    def __init__(self, base, layout, dtype, name, lo, hi):
        self.base = base
        self.layout = layout
        self.dtype = dtype
        self.name = name
        self.lo = lo
        self.hi = hi


# -- ops -----------------------------------------------------------------------------------------------------------

@register
class Alloc(OpDef):
    name = "smem.alloc"
    summary = "a statically placed shared-memory tensor of the CTA"
    optional_attrs = ("align",)
    num_operands = 0
    num_results = 1

    def verify(self, op, v):
        t = op.results[0].type
        if not isinstance(t, TensorType) or t.space != "smem":
            v.error(op, f"result type must be a smem tensor smem<T>[layout], not {t}")
            return
        problem = smem_layout_problem(t.layout)
        if problem:
            v.error(op, problem)
            return
        if t.dtype.bits < 8:
            v.error(op, f"shared-memory tensors hold whole bytes: {t.dtype} elements are not addressable")
        rep = swizzle_repeat(t.layout)
        if "align" in op.attrs:
            align = v.attr(op, "align", int)
            if align is None:
                return
            if align < 16 or align > MAX_ALIGN or align & (align - 1):
                v.error(op, f"align must be a power of two from 16 to {MAX_ALIGN}, not {align}")
            elif align < rep:
                v.error(op, f"align {align} is below the {rep}-byte repeat of the layout's swizzle "
                            f"{swizzle_of(t.layout)}: the pattern must start at phase 0 (align >= {rep})")

    def smem_request(self, op):
        t = op.results[0].type if len(op.results) == 1 else None
        if not isinstance(t, TensorType) or t.space != "smem" or smem_layout_problem(t.layout):
            return None
        align = alloc_alignment(op)
        if align is None:
            return None
        return smem_bytes(t), align

    def interpret(self, op, ix):
        t = op.results[0].type
        address = ix.smem_plan.address[id(op)]
        size = ix.smem_plan.size[id(op)]
        ix.set(op.results[0], SmemView(np.full(ix.nthreads, address, dtype=np.int64), t.layout, t.dtype,
                                       f"%{op.results[0].name}", address, address + size))

    def lower(self, op, lx):
        """No code but an add: the window's runtime address plus the allocation's offset in the static plan."""
        t = op.results[0].type
        base, align = lx.smem_address(op)
        lx.set(op.results[0], lx.SmemRef(base, t.layout, t.dtype, align))


def _verify_view_and_index(op, v):
    """(view, index, result type) of smem.slice / smem.tile, after the rules they share: a smem view and an i32
    index; view None when the operand is no smem view (reported)."""
    view, index = v.operands(op, 2)
    (t,) = v.results(op, 1)
    if not isinstance(view.type, TensorType) or view.type.space != "smem":
        v.error(op, f"the first operand must be a smem view, not {view.type}")
        return None, index, t
    if index.type != I32:
        v.error(op, f"the index must be i32, not {index.type}")
    return view, index, t


@register
class Slice(OpDef):
    name = "smem.slice"
    summary = "one index of the last mode of a smem view (a pipeline stage), at a runtime index"

    def verify(self, op, v):
        view, index, t = _verify_view_and_index(op, v)
        if view is None:
            return
        layout = view.type.layout
        if lc.rank(layout) < 2:
            v.error(op, f"the view's layout {lc.to_str(layout)} has rank {lc.rank(layout)}: slicing its last mode "
                        "needs rank >= 2")
            return
        stages = lc.size(_inner(layout)[lc.rank(layout) - 1])
        c = const_int(index)
        if c is not None and not 0 <= c < stages:
            v.error(op, f"index {c} is outside the last mode's {stages} entries")
        want = TensorType("smem", view.type.dtype, stage_sliced(layout))
        if t != want:
            v.error(op, f"result type must be {want} (the layout sliced at (_, ..., _, i)), not {t}")

    def result_types(self, operand_types, attrs):
        t = operand_types[0]
        return [TensorType("smem", t.dtype, stage_sliced(t.layout))]

    def interpret(self, op, ix):
        interpret_offset_view(op, ix, "index")

    def lower(self, op, lx):
        """base + esize·L_last(i): the last mode evaluated at the runtime index (``emit_layout``); the known
        alignment drops to the lowest power of two of the stage strides in bytes."""
        lower_offset_view(op, lx)


def tile_split(layout, mode: int, size: int):
    """(the view's layout with mode ``mode`` cut to its first ``size`` entries, the layout of the block index):
    ``logical_divide`` of that mode by ``size``, CuTe's ``(tile, rest)``. A ComposedLayout keeps its swizzle and
    offset; block i starts ``rest(i)`` elements further (that offset goes to the runtime base).

    ``tile_split(Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0)), 0, 64)`` →
    ``(Sw<3,4,3> o 0 o (64,(64,1)):(64,(1,0)), 2:4096)``. Pre: ``size`` divides the mode's size (LayoutError)."""
    inner = _inner(layout)
    divided = lc.logical_divide(inner[mode], size)
    tile, rest = divided[0], divided[1]
    modes = [tile if k == mode else inner[k] for k in range(lc.rank(inner))]
    new_inner = lc.make_layout(*modes)
    if isinstance(layout, lc.ComposedLayout):
        return lc.ComposedLayout(layout.outer, layout.offset, new_inner), rest
    return new_inner, rest


def _verify_tile_attrs(op, v, t):
    mode = v.attr(op, "mode", int)
    size = v.attr(op, "size", int)
    if mode is None or size is None:
        return None
    rank = lc.rank(_inner(t.layout))
    if not 0 <= mode < rank:
        v.error(op, f"mode {mode} is outside the view's {rank} modes")
        return None
    extent = lc.size(_inner(t.layout)[mode])
    if size < 1 or extent % size:
        v.error(op, f"size {size} does not divide mode {mode}'s {extent} entries")
        return None
    try:
        return tile_split(t.layout, mode, size)
    except lc.LayoutError as e:
        v.error(op, f"cannot cut blocks of {size} out of mode {mode} of {lc.to_str(t.layout)}: {e.condition}")
        return None


@register
class Tile(OpDef):
    name = "smem.tile"
    summary = "block i (a runtime index) of `size` entries along mode `mode` of a smem view"
    required_attrs = ("mode", "size")

    def verify(self, op, v):
        view, index, t = _verify_view_and_index(op, v)
        if view is None:
            return
        split = _verify_tile_attrs(op, v, view.type)
        if split is None:
            return
        layout, rest = split
        c = const_int(index)
        if c is not None and not 0 <= c < lc.size(rest):
            v.error(op, f"block {c} is outside the {lc.size(rest)} blocks of mode {op.attrs['mode']}")
        want = TensorType("smem", view.type.dtype, layout)
        if t != want:
            v.error(op, f"result type must be {want} (mode {op.attrs['mode']} cut to {op.attrs['size']}), not {t}")

    def result_types(self, operand_types, attrs):
        t = operand_types[0]
        return [TensorType("smem", t.dtype, tile_split(t.layout, attrs["mode"], attrs["size"])[0])]

    def interpret(self, op, ix):
        interpret_offset_view(op, ix, "block")

    def lower(self, op, lx):
        """base + esize·rest(i) (``emit_layout`` of the block-index layout); the known alignment drops to the lowest
        power of two of rest's strides in bytes."""
        lower_offset_view(op, lx)


def offset_modes(layout) -> list:
    """The modes of a smem view's layout that ``smem.offset`` takes one coordinate each of (the inner layout's
    top-level modes: the swizzle acts on absolute addresses after the move). ``offset_modes((80,66):(66,1))`` →
    ``[80:66, 66:1]``."""
    inner = _inner(layout)
    return [inner[m] for m in range(lc.rank(inner))]


def offset_alignment(layout, esize: int, align: int, lowbit) -> int:
    """The alignment ``align`` of a parent base, lowered to what ``base + esize·L(c)`` keeps for every coordinate
    ``c`` of ``smem.offset``: the lowest power of two of every mode's (non-trivial) strides in bytes."""
    for mode in offset_modes(layout):
        align = index_alignment(mode, esize, align, lowbit)
    return align


@register
class Offset(OpDef):
    name = "smem.offset"
    summary = "the same smem view with its origin moved to a runtime coordinate (CuTe's domain_offset)"
    num_results = 1

    def verify(self, op, v):
        if not op.operands:
            v.error(op, "expects a smem view and one i32 coordinate per mode of its layout")
            return
        view, *coords = op.operands
        (t,) = v.results(op, 1)
        if not isinstance(view.type, TensorType) or view.type.space != "smem":
            v.error(op, f"the first operand must be a smem view, not {view.type}")
            return
        modes = offset_modes(view.type.layout)
        if len(coords) != len(modes):
            v.error(op, f"a view of layout {lc.to_str(view.type.layout)} has {len(modes)} modes, so smem.offset "
                        f"takes {len(modes)} coordinates (one i32 per mode), not {len(coords)}")
            return
        for m, (c, mode) in enumerate(zip(coords, modes)):
            if c.type != I32:
                v.error(op, f"coordinate {m} must be i32, not {c.type}")
            known = const_int(c)
            if known is not None and not 0 <= known < lc.size(mode):
                v.error(op, f"coordinate {m} = {known} is outside mode {m}'s {lc.size(mode)} entries")
        if t != view.type:
            v.error(op, f"result type must be the view's own {view.type}, not {t}")

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def interpret(self, op, ix):
        view_v, *coords = op.operands
        view = ix.get(view_v)
        offset = np.zeros(ix.nthreads, dtype=np.int64)
        for m, (c_v, mode) in enumerate(zip(coords, offset_modes(view.layout))):
            c = ix.get(c_v).astype(np.int64)
            n = lc.size(mode)
            bad = ix.mask & ((c < 0) | (c >= n))
            if bad.any():
                ix.fail(op, f"coordinate {m} (%{c_v.name} = {int(c[bad][0])}, thread {int(np.nonzero(bad)[0][0])}) "
                            f"is outside mode {m}'s {n} entries of {view.name}")
            offset += layout_values(mode, np.clip(c, 0, n - 1))
        ix.set(op.results[0], SmemView(view.base + offset * element_bytes(view.dtype), view.layout, view.dtype,
                                       f"{view.name}.offset", view.lo, view.hi))

    def lower(self, op, lx):
        """base + esize·Σ L_m(c_m) (``emit_layout`` of each mode at its coordinate); the known alignment drops to
        the lowest power of two of the modes' strides in bytes."""
        view_v, *coords = op.operands
        view = lx.get(view_v)
        esize = element_bytes(view.dtype)
        base = view.base
        for c_v, mode in zip(coords, offset_modes(view.layout)):
            off = lx.emit_layout(mode, lx.get(c_v))
            base = lx.b.add(base, lx.b.mul(off, lx.i32(esize)) if esize != 1 else off)
        lx.set(op.results[0], lx.SmemRef(base, view.layout, view.dtype,
                                         offset_alignment(view.layout, esize, view.align, lx.lowbit)))


def permute_layout(layout, order):
    """The layout with its top-level modes in ``order`` (mode k of the result is mode ``order[k]``): a view of the same
    bytes indexed in another order (no data moves). A ComposedLayout keeps its swizzle and offset.
    ``permute_layout(Sw<3,4,3> o 0 o ((8,8),(64,4)):((64,2048),(1,512)), (1, 0))`` →
    ``Sw<3,4,3> o 0 o ((64,4),(8,8)):((1,512),(64,2048))`` (a (K, N) stage seen as (N, K), MN-major)."""
    inner = _inner(layout)
    new_inner = lc.make_layout(*(inner[k] for k in order))
    if isinstance(layout, lc.ComposedLayout):
        return lc.ComposedLayout(layout.outer, layout.offset, new_inner)
    return new_inner


@register
class Permute(OpDef):
    name = "smem.permute"
    summary = "the same smem view with its modes in another order (a transpose: no data moves)"
    required_attrs = ("order",)
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (view,) = op.operands
        t = op.results[0].type
        if not isinstance(view.type, TensorType) or view.type.space != "smem":
            v.error(op, f"the operand must be a smem view, not {view.type}")
            return
        order = v.attr(op, "order", tuple)
        if order is None:
            return
        rank = lc.rank(_inner(view.type.layout))
        if any(type(k) is not int for k in order):
            v.error(op, f"order must list the view's mode indices 0 … {rank - 1}, each once")
            return
        if sorted(order) != list(range(rank)):
            v.error(op, f"order {attribute_text(order)} is not a permutation of the view's {rank} modes")
            return
        want = TensorType("smem", view.type.dtype, permute_layout(view.type.layout, tuple(order)))
        if t != want:
            v.error(op, f"result type must be {want}, not {t}")

    def result_types(self, operand_types, attrs):
        t = operand_types[0]
        return [TensorType("smem", t.dtype, permute_layout(t.layout, tuple(attrs["order"])))]

    def interpret(self, op, ix):
        view = ix.get(op.operands[0])
        ix.set(op.results[0], SmemView(view.base, permute_layout(view.layout, tuple(op.attrs["order"])), view.dtype,
                                       f"{view.name}.permute", view.lo, view.hi))

    def lower(self, op, lx):
        """No code: the same base, the permuted layout."""
        view = lx.get(op.operands[0])
        lx.set(op.results[0], lx.SmemRef(view.base, permute_layout(view.layout, tuple(op.attrs["order"])), view.dtype,
                                         view.align))


class _SmemAccess(OpDef):
    def _check_view_and_thread(self, op, v, view, thread):
        if not isinstance(view.type, TensorType) or view.type.space != "smem":
            v.error(op, f"the first operand must be a smem view, not {view.type}")
            return False
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        return True

    @staticmethod
    def _addresses(ix, op, view: SmemView, thread, tv):
        """(active thread indices, (active, values) absolute byte addresses of each thread's values)."""
        table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
        act = np.nonzero(ix.mask)[0]
        t = ix.get(thread).astype(np.int64)[act]
        if np.any((t < 0) | (t >= table.shape[0])):
            ix.fail(op, f"thread operand outside tv's thread mode of {table.shape[0]} threads")
        pre = byte_offsets(ix, view.layout, view.dtype, table[t])
        addr = physical(view.layout, view.base[act][:, None] + pre)
        esize = element_bytes(view.dtype)
        outside = (addr < view.lo) | (addr + esize > view.hi)
        if outside.any():
            k = np.argwhere(outside)[0]
            ix.fail(op, f"thread {int(act[k[0]])} reaches byte {int(addr[k[0], k[1]])}, outside {view.name}'s "
                        f"allocation [{view.lo}, {view.hi})")
        return act, addr

    @staticmethod
    def _write(ix, op, view: SmemView, act, addr, frag) -> None:
        """Write the active threads' fragment values at ``addr`` (from ``_addresses``): smem.store's meaning."""
        raw = to_bytes(ix.get(frag)[act], view.dtype)
        ix.smem_write(op, view.name, addr, raw, act)


@register
class Load(_SmemAccess):
    name = "smem.load"
    summary = "each thread reads its values of a smem view (through the layout's physical byte addresses)"
    required_attrs = ("tv",)
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        view, thread = op.operands
        t = op.results[0].type
        if not self._check_view_and_thread(op, v, view, thread):
            return
        if not isinstance(t, FragmentType):
            v.error(op, f"result must be a frag, not {t}")
            return
        if t.dtype != view.type.dtype:
            v.error(op, f"fragment element type {t.dtype} differs from the view's {view.type.dtype}")
        tv = tv_attr(op, v)
        if tv is not None:
            verify_tv(op, v, tv, t.shape, view.type.size, what="view")

    def interpret(self, op, ix):
        view_v, thread = op.operands
        view = ix.get(view_v)
        act, addr = self._addresses(ix, op, view, thread, op.attrs["tv"])
        raw = ix.smem_read(op, view.name, addr, element_bytes(view.dtype), threads=act)
        t = op.results[0].type
        out = np.zeros((ix.nthreads, t.size), dtype=numpy_dtype(t.dtype))
        out[act] = from_bytes(raw, view.dtype)
        ix.set(op.results[0], out)

    def lower(self, op, lx):
        """Per value ``ld.shared`` at the physical address Sw(base + esize·(offset + inner(tv(t, v)))), vectors of up
        to 16 bytes where consecutive values stay inside one swizzle chunk (ptxgen.lower.shared.smem_access)."""
        view, thread = op.operands
        lx.set(op.results[0], lx.smem_access(lx.get(view), lx.get(thread), op.attrs["tv"]))


@register
class Store(_SmemAccess):
    name = "smem.store"
    summary = "each thread writes its values of a smem view (through the layout's physical byte addresses)"
    required_attrs = ("tv",)
    num_operands = 3
    num_results = 0

    def verify(self, op, v):
        view, thread, frag = op.operands
        if not self._check_view_and_thread(op, v, view, thread):
            return
        if not isinstance(frag.type, FragmentType):
            v.error(op, f"the stored value must be a frag, not {frag.type}")
            return
        if frag.type.dtype != view.type.dtype:
            v.error(op, f"fragment element type {frag.type.dtype} differs from the view's {view.type.dtype}")
        tv = tv_attr(op, v)
        if tv is not None:
            verify_tv(op, v, tv, frag.type.shape, view.type.size, what="view")

    def interpret(self, op, ix):
        view_v, thread, frag = op.operands
        view = ix.get(view_v)
        act, addr = self._addresses(ix, op, view, thread, op.attrs["tv"])
        self._write(ix, op, view, act, addr, frag)

    def lower(self, op, lx):
        """The inverse of smem.load's lowering: ``st.shared`` (vectors where the plan allows) at physical addresses."""
        view, thread, frag = op.operands
        lx.smem_access(lx.get(view), lx.get(thread), op.attrs["tv"], store=lx.get(frag))


# -- stmatrix: register → smem, one 8 × 8 b16 matrix row per lane address --------------------------------------------

def _stmatrix_slots(num: int, trans: bool):
    """For ``stmatrix.x{num}[.trans]``: (rows, cols), two (32, 2·num) int arrays: lane l's value v lands in row
    ``rows[l, v]`` (= 8·matrix + row of the matrix, the row lane ``rows`` supplies the address of) at column
    ``cols[l, v]`` (16-bit elements from the row's address). From ``layoutc.hopper.stmatrix_tv`` over its (8·num, 8)
    'rows' tile, whose row r is addressed by lane r (``stmatrix_address_lanes``)."""
    st = stmatrix_tv(num, trans)
    index = tv_table(st, 32)
    return index % (8 * num), index // (8 * num)


def stmatrix_problem(addresses, num: int, trans: bool) -> str | None:
    """Why one warp's values cannot be stored by ``stmatrix.x{num}[.trans]`` instructions, or None.

    ``addresses``: (32, 2·num·R) physical byte addresses of each lane's values (value ``v + 2·num·r`` goes with
    instruction r). Instruction r stores 8·num rows, each 16 contiguous bytes at a 16-byte aligned address that one
    lane supplies; a row holds columns 0..7 at +2·column. Post: None iff every instruction's rows are such rows."""
    rows, cols = _stmatrix_slots(num, trans)
    per = 2 * num
    count = addresses.shape[1] // per
    # all instructions at once: each value's row start, grouped by the row it belongs to (the same slots every time)
    starts = addresses[:, :count * per].reshape(32, count, per) - 2 * cols[:, None, :]
    order = np.argsort(rows.reshape(-1), kind="stable")
    grouped = starts.transpose(1, 0, 2).reshape(count, 32 * per)[:, order].reshape(count, 8 * num, -1)
    if np.all(grouped == grouped[..., :1]) and not np.any(grouped[..., 0] % 16):
        return None
    for r in range(count):   # the first instruction and row that break the rule, named
        start = addresses[:, per * r:per * (r + 1)] - 2 * cols      # each value's row start if the row is whole
        for row in range(8 * num):
            got = start[rows == row]
            if np.any(got != got[0]):
                lanes, vals = np.nonzero(rows == row)
                at = addresses[lanes, per * r + vals]
                shown = ", ".join(f"column {int(cols[l, v])} at byte {int(a)}" for l, v, a in
                                  list(zip(lanes, vals, at))[:3])
                return (f"stmatrix {r}: row {row % 8} of matrix {row // 8} is not 16 contiguous bytes ({shown}, ...): "
                        "each row of an 8 x 8 matrix is 8 consecutive 16-bit elements in one 16-byte chunk")
            if got[0] % 16:
                return (f"stmatrix {r}: row {row % 8} of matrix {row // 8} starts at byte {int(got[0])}, not on a "
                        "16-byte boundary (stmatrix row addresses are 16-byte aligned)")
    return None


def stmatrix_row_tv(tv, num: int, trans: bool):
    """(thread t, instruction r) -> the view index of the first element of the row whose address t's lane supplies
    to instruction r (lane a addresses row a % 8·num; lanes beyond 8·num repeat them, their addresses are unused).

    By algebra: the left inverse of ``stmatrix_tv`` composed with the rows' first column, ``(8·num):1``, gives the
    (lane, value) owning each row's column 0; ``M(t, r)`` = that owner in t's warp at instruction r, as a
    coordinate of ``tv``'s domain (thread + T·value); the result is ``tv ∘ M``. Returns (M, tv ∘ M or None when
    the composition is not admissible or disagrees with the tables: then the lowering decodes tv(M(t, r)) at run
    time)."""
    threads, values = lc.size(tv[0]), lc.size(tv[1])
    owner = lc.composition(lc.left_inverse(stmatrix_tv(num, trans)), lc.Layout(8 * num, 1))
    in_tv = lc.composition(lc.Layout((32, 2 * num), (1, threads)), owner)
    lanes = lc.make_layout(in_tv, lc.Layout(32 // (8 * num), 0), lc.Layout(threads // 32, 32))
    m = lc.make_layout(lanes, lc.Layout(values // (2 * num), 2 * num * threads))
    instructions = values // (2 * num)
    # the tables with numpy: (t, r) is m's (and rows') 1-D coordinate t + threads·r
    want = layout_values(tv)[layout_values(m).reshape(instructions, threads).T]
    try:
        rows = lc.composition(tv, m)
        if lc.rank(rows) != 2 or lc.size(rows[0]) != threads or lc.size(rows[1]) != instructions:
            rows = None
        elif not np.array_equal(layout_values(rows).reshape(instructions, threads).T, want):
            rows = None
    except lc.LayoutError:
        rows = None
    return m, rows


def _base0_addresses(layout, dtype, tv):
    """(threads, values) physical byte addresses of tv's values for a view based at 0 (what every base on the
    swizzle repeat shifts uniformly)."""
    _sw, offset, inner = split_smem_layout(layout)
    pre = inner_byte_addresses(inner, dtype) + offset * element_bytes(dtype)
    return physical(layout, pre[tv_table(tv, lc.size(tv[0]))])


@register
class Stmatrix(_SmemAccess):
    name = "smem.stmatrix"
    summary = "smem.store through stmatrix.m8n8.x{1,2,4}[.trans]: each warp stores 8 x 8 b16 matrices by rows"
    required_attrs = ("tv", "num", "trans")
    num_operands = 3
    num_results = 0

    def verify(self, op, v):
        view, thread, frag = op.operands
        if not self._check_view_and_thread(op, v, view, thread):
            return
        vt = view.type
        if not isinstance(frag.type, FragmentType):
            v.error(op, f"the stored value must be a frag, not {frag.type}")
            return
        if frag.type.dtype != vt.dtype:
            v.error(op, f"fragment element type {frag.type.dtype} differs from the view's {vt.dtype}")
            return
        if vt.dtype.bits != 16:
            v.error(op, f"stmatrix stores 16-bit elements (.b16), not {vt.dtype}")
            return
        num = v.attr(op, "num", int)
        trans = v.attr(op, "trans", bool)
        tv = tv_attr(op, v)
        if num is None or trans is None or tv is None:
            return
        if num not in (1, 2, 4):
            v.error(op, f"num must be 1, 2 or 4 (stmatrix .x1, .x2, .x4), not {num}")
            return
        if not verify_tv(op, v, tv, frag.type.shape, vt.size, what="view"):
            return
        threads, values = lc.size(tv[0]), lc.size(tv[1])
        if threads % 32:
            v.error(op, f"tv's thread mode {lc.to_str(tv[0])} has {threads} threads; stmatrix is executed by whole "
                        "warps (a multiple of 32)")
            return
        if values % (2 * num):
            v.error(op, f"tv's value mode has {values} values per thread but stmatrix.x{num} stores {2 * num} per "
                        "lane and instruction: the values must be whole instructions")
            return
        need = max(16, swizzle_repeat(vt.layout))
        have = view_alignment(view)
        if have is not None and have < need:
            v.error(op, f"%{view.name} is only known to be {have}-byte aligned but stmatrix rows need {need} (16-byte "
                        f"rows; a swizzle pattern starting at phase 0): {alignment_advice(view, need)}")
        addresses = _base0_addresses(vt.layout, vt.dtype, tv)
        for w in range(threads // 32):
            problem = stmatrix_problem(addresses[32 * w:32 * (w + 1)], num, trans)
            if problem:
                v.error(op, f"tv {lc.to_str(tv)} is no stmatrix.x{num}{'.trans' if trans else ''} tiling of "
                            f"{lc.to_str(vt.layout)}: warp {w}, {problem}")
                return

    def interpret(self, op, ix):
        """smem.store's meaning, with stmatrix's run-time conditions: whole warps, the thread operand's lane is the
        hardware lane (its values are that lane's registers), and each instruction's rows whole and aligned at the
        actual addresses."""
        view_v, thread, frag = op.operands
        view = ix.get(view_v)
        num, trans = op.attrs["num"], op.attrs["trans"]
        act = np.nonzero(ix.mask)[0]
        for w in sorted(set((act // 32).tolist())):
            lanes = ix.mask[32 * w:32 * (w + 1)]
            if not lanes.all():
                ix.fail(op, f"warp {w} executes it with {describe_threads(np.nonzero(lanes)[0] + 32 * w)} only: "
                            "stmatrix is .sync.aligned over the 32 lanes of a warp")
        t = ix.get(thread).astype(np.int64)[act]
        if np.any(t % 32 != act % 32):
            k = int(np.nonzero(t % 32 != act % 32)[0][0])
            ix.fail(op, f"thread {int(act[k])} passes thread operand {int(t[k])}: stmatrix's lanes are the hardware "
                        "lanes, so the operand modulo 32 must be the lane (gpu.thread_id {dim = x})")
        act, addr = self._addresses(ix, op, view, thread, op.attrs["tv"])
        for w in range(len(act) // 32):
            problem = stmatrix_problem(addr[32 * w:32 * (w + 1)], num, trans)
            if problem:
                ix.fail(op, f"warp {int(act[32 * w]) // 32} at {view.name}'s base {int(view.base[act[32 * w]])}: "
                            f"{problem}")
        self._write(ix, op, view, act, addr, frag)

    def lower(self, op, lx):
        """Per instruction r (values 2·num·r ..): each lane's (physical, swizzled) row address
        ``Sw(origin + 2·inner(rows(t, r)))`` (``stmatrix_row_tv``: the thread part emitted once, r a constant when the
        composition is admissible, else tv(M(t, r)) decoded at run time), the values packed two per ``.b32`` (the
        lower-index value in the low half, ``ldmatrix_register``), one ``stmatrix.sync.aligned.m8n8.x{num}``."""
        view_v, thread_v, frag_v = op.operands
        if not lx.lane_is_thread_mod_32(thread_v):
            lx.error("stmatrix's lanes are the hardware lanes: its thread operand must be gpu.thread_id {dim = x} "
                     "(or gpu.lane_id), whose value modulo 32 is the lane")
        tv, num, trans = op.attrs["tv"], op.attrs["num"], op.attrs["trans"]
        ref, t, values = lx.get(view_v), lx.get(thread_v), lx.get(frag_v)
        b = lx.b
        sw, _offset, inner = split_smem_layout(ref.layout)
        origin = lx.view_origin(ref)
        m, rows = stmatrix_row_tv(tv, num, trans)
        plan = lx.plan_smem_access(rows, inner, 2, 16, 16) if rows is not None else None
        if plan is not None and plan.thread is not None:
            toff = lx.emit_layout(plan.thread, t)
            thread_addr = b.add(origin, b.mul(toff, lx.i32(2)))

            def row_address(r):
                c = 2 * plan.values[r]
                return b.add(thread_addr, lx.i32(c)) if c else thread_addr
        else:
            coord0 = lx.emit_layout(m[0], t)

            def row_address(r):
                idx = lx.emit_layout(tv, b.add(coord0, lx.i32(m[1](r))))
                return b.add(origin, b.mul(lx.emit_layout(inner, idx), lx.i32(2)))

        name = lx.ptx_table.stmatrix(num, trans)
        per = 2 * num
        for r in range(lc.size(tv[1]) // per):
            regs = [lx.pack_pair(values[per * r + 2 * j], values[per * r + 2 * j + 1]) for j in range(num)]
            lx.inline_ptx(name, [lx.swizzle_address(sw, row_address(r)), *regs])


# -- kernel-level rules ---------------------------------------------------------------------------------------------

@kernel_rule
def _allocations(kernel, v):
    """Allocations sit at the top level of the body; the CTA's shared memory fits the 227 KiB a CTA may have."""
    for op in kernel.body.ops:
        for r in op.regions:
            for inner in walk(r):
                if getattr(OPS.get(inner.name), "smem_request", None):
                    v.error(inner, f"{inner.name} must be at the top level of the kernel body: shared memory is "
                                   "allocated once per CTA, at a static offset")
    plan = smem_plan(kernel.body.ops)
    if plan.total <= SMEM_LIMIT:
        return
    # reported at the allocation that crosses the limit, with the total and the biggest allocations
    crossing = next(op for op in plan.ops if plan.address[id(op)] + plan.size[id(op)] - SMEM_BASE > SMEM_LIMIT)
    biggest = sorted(plan.ops, key=lambda o: -plan.size[id(o)])[:3]
    shown = ", ".join(f"%{o.results[0].name} {plan.size[id(o)]} B" for o in biggest)
    v.error(crossing, f"the CTA's shared memory needs {plan.total} bytes (alignment padding included), over the "
                      f"{SMEM_LIMIT} bytes (227 KiB) a Hopper CTA can have; the biggest allocations: {shown}")
