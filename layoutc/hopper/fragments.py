"""Register fragments of Hopper's wgmma, ldmatrix and stmatrix as CuTe thread-value (TV) layouts.

Convention (CuTe's, as in ``CLayout_64xN`` / ``ALayout_64x16`` of ``mma_traits_sm90_gmma.hpp``): a fragment is a rank-2
Layout ``(thread, value) -> index`` whose index is the **column-major** position ``m + M*n`` of the element in the
fragment's logical M x N tile. ``idx2crd(index, (M, N))`` turns the index back into ``(row, col)``, so the table
"which thread holds which element in which register slot" is one Layout, and the algebra (composition,
logical_divide, inverses) answers questions about it exactly.

>>> str(accumulator_tv(64))                     # D of m64n64, f32: T = 128 threads, V = 32 values
'((4,8,4),(2,2,8)):((128,1,16),(64,8,512))'
>>> idx2crd(accumulator_tv(64)(37, 5), (64, 64))  # thread 37 (warp 1, lane 5), value 5 -> (row, col)
(17, 11)

Thread modes are (lane%4, lane/4, warp) = (4,8,4) for a warpgroup and (4,8) for one warp; value modes are listed
fastest first, so ``value v`` is register/element v of the instruction's register vector (see the register helpers:
``accumulator_register``, ``a_fragment_register``, ``ldmatrix_register``).

Sources: the PTX ISA's wgmma register-fragment figures and ldmatrix/stmatrix description, as summarised (and for the
accumulator and 16-bit A, checked on an H100) in the project's Hopper PTX reference §1 and §3.
"""
from __future__ import annotations

from ..errors import LayoutError
from ..int_tuple import idx2crd
from ..layout import Layout, _, make_layout, slice_layout, slice_offset
from ..algebra import composition, left_inverse
from ..tiling import logical_divide
from .dtypes import dtype

__all__ = [
    "WARPGROUP_THREADS", "WARP_THREADS",
    "wgmma_n_values", "accumulator_tv", "accumulator_num_registers", "accumulator_register", "accumulator_coords",
    "a_fragment_tv", "a_fragment_k", "a_fragment_register",
    "ldmatrix_tile_shape", "ldmatrix_tv", "ldmatrix_register", "ldmatrix_address_lanes", "ldmatrix_address_coords",
    "stmatrix_tv", "stmatrix_address_lanes",
    "accumulator_warp_tv", "accumulator_block_tv",
    "tv_coord", "tv_coords", "tv_owners", "tv_table",
]

WARPGROUP_THREADS = 128
WARP_THREADS = 32

# Accumulator element types wgmma writes: f32 (all float inputs), f16 (f16 and fp8 inputs), s32 (s8/u8, b1).
_ACC_TYPES = ("f32", "f16", "s32")
# Dense integer wgmma (s8/u8 and b1) allows fewer N than the float forms: 8, 16, 24, then 32..256 step 16
# (ptxas rejects e.g. m64n40k32; reference §1.1).
_FLOAT_N = tuple(range(8, 257, 8))
_INT_N = (8, 16, 24) + tuple(range(32, 257, 16))


# ---------------------------------------------------------------------------------------------------------------
# wgmma accumulator D (64 x N)
# ---------------------------------------------------------------------------------------------------------------

def _acc_type(acc_dtype):
    t = dtype(acc_dtype)
    if t.name not in _ACC_TYPES:
        raise LayoutError("accumulator_tv", (t.name,), f"wgmma accumulates into {', '.join(_ACC_TYPES)}, "
                          f"not {t.name}")
    return t


def wgmma_n_values(acc_dtype="f32") -> tuple:
    """The legal N of a dense ``wgmma.m64nNk*`` with this accumulator type.

    ``wgmma_n_values('f32')`` → (8, 16, ..., 256) (32 values, also 'f16');
    ``wgmma_n_values('s32')`` → (8, 16, 24, 32, 48, 64, ..., 256) (18 values: integer wgmma skips N = 40, 56, ...).
    """
    t = _acc_type(acc_dtype)
    return _INT_N if t.name == "s32" else _FLOAT_N


def _check_n(n, acc_dtype, op):
    t = _acc_type(acc_dtype)
    legal = wgmma_n_values(t.name)
    if not isinstance(n, int) or isinstance(n, bool) or n not in legal:
        rule = "8, 16, 24, then 32..256 step 16" if t.name == "s32" else "8..256 step 8"
        raise LayoutError(op, (n, t.name), f"N={n!r} is not a legal wgmma N for {t.name} accumulators ({rule})")
    return t


def accumulator_tv(n: int, acc_dtype="f32") -> Layout:
    """CuTe's ``CLayout_64xN``: the wgmma accumulator D (64 x N) as (128 threads, N/2 values) -> m + 64·n.

    ``accumulator_tv(256)`` → ``((4,8,4),(2,2,32)):((128,1,16),(64,8,512))``;
    ``accumulator_tv(8)``   → ``((4,8,4),(2,2,1)):((128,1,16),(64,8,512))`` (CuTe keeps the N/8 = 1 mode).

    Reading the strides: thread t = (l%4, l/4, w) with l = t%32 and w = t/32 moves (2 cols, 1 row, 16 rows) =
    (128, 1, 16); value i = (i%2, (i/2)%2, i/4) moves (1 col, 8 rows, 8 cols) = (64, 8, 512). Hence
    row = 16w + l/4 + 8·((i/2)%2), col = 8·(i/4) + 2·(l%4) + i%2: the PTX ISA's figure (H100-checked, reference §3.1).

    The layout is the same for every accumulator type because it is element-level: value i is element i of D's
    register vector for f32/s32. For **f16** accumulators the N/2 elements are packed two per ``.b32`` register
    (N/4 registers); value i still names element i and ``accumulator_register(i, 'f16')`` → (i//2, i%2) gives
    the register and half (0 = low 16 bits), the packing PTX uses.

    Pre: N legal for ``acc_dtype`` (``wgmma_n_values``), acc_dtype in f32, f16, s32.
    Post: size(mode 0) = 128, size(mode 1) = N/2, and the layout is a bijection onto [0, 64·N).
    """
    _check_n(n, acc_dtype, "accumulator_tv")
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


def accumulator_num_registers(n: int, acc_dtype="f32") -> int:
    """``.b32``/``.f32``/``.s32`` registers in D's vector: N/2 for f32 and s32, N/4 for f16 (pairs packed).

    ``accumulator_num_registers(256)`` → 128; ``accumulator_num_registers(256, 'f16')`` → 64.
    """
    t = _check_n(n, acc_dtype, "accumulator_num_registers")
    return n // 4 if t.bits == 16 else n // 2


def accumulator_register(value: int, acc_dtype="f32") -> tuple:
    """Value (element) index of ``accumulator_tv`` → (register index in D's vector, half).

    f32/s32: one element per register, ``(value, 0)``. f16: ``(value // 2, value % 2)``, half 0 = the low 16 bits,
    which holds the even element (reference §3.1): ``accumulator_register(5, 'f16')`` → (2, 1).
    """
    t = _acc_type(acc_dtype)
    if value < 0:
        raise LayoutError("accumulator_register", (value,), "a value index is not negative")
    if t.bits == 16:
        return value // 2, value % 2
    return value, 0


def accumulator_coords(n: int, acc_dtype="f32") -> tuple:
    """``coords[t][v]`` = (row, col) in the 64 x N tile of D for thread t (0..127), value v (0..N/2-1).

    Derived from the TV layout only (``idx2crd(accumulator_tv(n)(t, v), (64, n))``), never from a second formula:
    ``accumulator_coords(8)[37][2]`` → (25, 2) (warp 1, lane 5, the second row group).
    """
    return tv_coords(accumulator_tv(n, acc_dtype), (64, n))


# ---------------------------------------------------------------------------------------------------------------
# wgmma A operand in registers (RS form)
# ---------------------------------------------------------------------------------------------------------------

# Per element width: (instruction K, elements per .b32 register). 16-bit: m64k16, 8-bit: m64k32, tf32: m64k8.
_A_FORMS = {16: (16, 2), 8: (32, 4), 32: (8, 1)}
_A_TYPES = ("f16", "bf16", "e4m3", "e5m2", "s8", "u8", "tf32")


def _a_type(element, op):
    t = dtype(element)
    if t.name not in _A_TYPES:
        raise LayoutError(op, (t.name,), f"the RS A fragment is defined for {', '.join(_A_TYPES)} "
                          f"(16-bit m64k16, 8-bit m64k32, tf32 m64k8), not {t.name}")
    return t


def a_fragment_k(element) -> int:
    """K of one wgmma for this A type: 16 (f16/bf16), 32 (e4m3/e5m2/s8/u8), 8 (tf32)."""
    return _A_FORMS[_a_type(element, "a_fragment_k").bits][0]


def a_fragment_tv(element, k=None) -> Layout:
    """The RS-form A fragment (64 x K) as (128 threads, values) -> m + 64·k, values = elements of ``{a0..a3}``.

    - 16-bit (f16, bf16), m64k16: ``ALayout_64x16`` = ``((4,8,4),(2,2,2)):((128,1,16),(64,8,512))``, the
      accumulator layout at N = 16. Element e sits in register e//2 (low half if e even).
    - 8-bit (e4m3, e5m2, s8, u8), m64k32: ``ALayout_64x32`` = ``((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))``.
      Register j holds 4 consecutive K bytes of one row: j = 0/1 rows r, r+8 (r = 16w + l/4) at K = 4(l%4)..+3,
      j = 2/3 the same at K + 16.
    - tf32, m64k8: ``ALayout_64x8`` = ``((4,8,4),(2,2)):((64,1,16),(8,256))``; register j holds
      (16w + l/4 + 8(j%2), l%4 + 4(j/2)).

    One pattern explains all three (E = elements per register = 32/bits): a thread's register holds E consecutive K
    elements (value stride 64 = one column), lane%4 steps K by E (stride 64·E), registers 1 and 3 step 8 rows
    (stride 8) and registers 2/3 step K by 4E = K/2 (stride 64·K/2).

    ``k``: None or the instruction K gives one instruction's fragment. A multiple of the instruction K gives the
    fragment of a 64 x k tile fed by k/K consecutive wgmmas, appending a k-step mode to the values:
    ``a_fragment_tv('bf16', 64)`` → ``((4,8,4),(2,2,2,4)):((128,1,16),(64,8,512,1024))``; value v of k-step s is
    v + 8s, i.e. register ``4s + v//2`` when the steps' registers are laid out one after another.

    Pre: an A type above; k a positive multiple of the instruction K. Post: a bijection onto [0, 64·k); size(mode 0)
    = 128; 4 registers per k-step.
    """
    t = _a_type(element, "a_fragment_tv")
    k_inst, per_reg = _A_FORMS[t.bits]
    if k is None:
        k = k_inst
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0 or k % k_inst:
        raise LayoutError("a_fragment_tv", (t.name, k), f"k must be a positive multiple of the instruction K "
                          f"= {k_inst} for {t.name}")
    thr = ((4, 8, 4), (64 * per_reg, 1, 16))
    if per_reg == 1:
        # tf32: CuTe writes ((4,8,4),(2,2)) without the size-1 element-in-register mode.
        val_shape, val_stride = (2, 2), (8, 64 * k_inst // 2)
    else:
        val_shape, val_stride = (per_reg, 2, 2), (64, 8, 64 * k_inst // 2)
    if k != k_inst:
        val_shape, val_stride = val_shape + (k // k_inst,), val_stride + (64 * k_inst,)
    return Layout((thr[0], val_shape), (thr[1], val_stride))


def a_fragment_register(element, value: int) -> tuple:
    """Value index of ``a_fragment_tv`` → (register, byte lane) in the ``.b32`` vector ``{a0, a1, a2, a3}``
    (continuing a4.. for later k-steps). The byte lane is the element's first byte, little-endian (lane 0 = bits 0-7).

    ``a_fragment_register('bf16', 3)`` → (1, 2) (high half of a1); ``a_fragment_register('e4m3', 6)`` → (1, 2);
    ``a_fragment_register('tf32', 3)`` → (3, 0).
    """
    t = _a_type(element, "a_fragment_register")
    if value < 0:
        raise LayoutError("a_fragment_register", (value,), "a value index is not negative")
    per_reg = _A_FORMS[t.bits][1]
    return value // per_reg, (value % per_reg) * (t.bits // 8)


# ---------------------------------------------------------------------------------------------------------------
# ldmatrix / stmatrix (.m8n8, b16): one warp, 1, 2 or 4 matrices of 8 x 8
# ---------------------------------------------------------------------------------------------------------------

_ARRANGEMENTS = ("rows", "cols", "grid")


def _check_ldsm(num, arrangement, op):
    if num not in (1, 2, 4) or isinstance(num, bool):
        raise LayoutError(op, (num,), "ldmatrix/stmatrix move 1, 2 or 4 matrices (.x1, .x2, .x4)")
    if arrangement not in _ARRANGEMENTS:
        raise LayoutError(op, (num, str(arrangement)), f"arrangement must be one of {', '.join(_ARRANGEMENTS)}")


def _placement(num, arrangement, m_rows):
    """(shape, stride) of the matrix index j -> tile index of matrix j's (0, 0) element, or None for one matrix."""
    if num == 1:
        return None
    if arrangement == "rows":
        return num, 8
    if arrangement == "cols":
        return num, 8 * m_rows
    # grid: matrix j at block (j%2, j//2), column-major over 8x8 blocks
    return ((2, 8) if num == 2 else ((2, 2), (8, 8 * m_rows)))


def ldmatrix_tile_shape(num: int, arrangement="rows") -> tuple:
    """(M, N) of the tile the ``num`` matrices are arranged in (``ldmatrix_tv`` indexes it column-major).

    - ``'rows'``: matrix j is rows 8j..8j+7 of an (8·num, 8) tile (stacked vertically).
    - ``'cols'``: matrix j is cols 8j..8j+7 of an (8, 8·num) tile (side by side).
    - ``'grid'``: matrix j is block (j%2, j//2) of 8 x 8 blocks: (8,8), (16,8), (16,16) for x1, x2, x4. This is
      the order of the accumulator's / 16-bit A fragment's registers, so ``stmatrix.x4`` writes a warp's 16 x 16
      slab of D (matrices: rows 0-7 / 8-15 of cols 0-7, then of cols 8-15; reference §3.3).
    """
    _check_ldsm(num, arrangement, "ldmatrix_tile_shape")
    if arrangement == "rows":
        return 8 * num, 8
    if arrangement == "cols":
        return 8, 8 * num
    return (8, 8) if num == 1 else (16, 8 * (num // 2))


def ldmatrix_tv(num: int, trans: bool = False, arrangement="rows") -> Layout:
    """``ldmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16`` as (32 lanes, 2·num values) -> tile index.

    Value v is element v%2 (v%2 = 0: the low half) of destination register v//2, and register j receives matrix j.
    Without ``.trans`` register j of lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix j; with
    ``.trans`` it holds rows 2(l%4), 2(l%4)+1 of column l/4 (rows and columns swap). Rows are always the rows
    whose addresses the lanes supply (``ldmatrix_address_lanes``), i.e. the matrix as stored in shared memory.

    ``ldmatrix_tv(1)``                 → ``((4,8),2):((16,1),8)``          (8 x 8)
    ``ldmatrix_tv(4)``                 → ``((4,8),(2,4)):((64,1),(32,8))`` (32 x 8, matrix j = rows 8j..)
    ``ldmatrix_tv(4, arrangement='grid')`` → ``((4,8),(2,2,2)):((32,1),(16,8,128))`` (16 x 16; equals a warp's
    part of the accumulator at N = 16, see ``accumulator_block_tv``)
    ``ldmatrix_tv(1, trans=True)``     → ``((4,8),2):((2,8),1)``

    Pre: num in {1, 2, 4}; arrangement in 'rows', 'cols', 'grid' (``ldmatrix_tile_shape``).
    Post: size(mode 0) = 32; a bijection onto [0, 64·num); non-trans and trans differ by the tile transpose of each
    matrix. (CuTe's ``SM75_U32x{1,2,4}_LDSM_N`` atoms state the same facts at bit level in a different reference
    order; these layouts are element-level over a column-major tile, like the MMA layouts.)
    """
    _check_ldsm(num, arrangement, "ldmatrix_tv")
    m_rows, _n = ldmatrix_tile_shape(num, arrangement)
    if trans:
        # lane%4 picks a row pair, lane/4 a column; value%2 is the second row of the pair
        lane, elem = (2, m_rows), 1
    else:
        # lane%4 picks a column pair, lane/4 a row; value%2 is the second column of the pair
        lane, elem = (2 * m_rows, 1), m_rows
    place = _placement(num, arrangement, m_rows)
    if place is None:
        val_shape, val_stride = 2, elem
    elif isinstance(place[0], tuple):
        val_shape, val_stride = (2,) + place[0], (elem,) + place[1]
    else:
        val_shape, val_stride = (2, place[0]), (elem, place[1])
    return Layout(((4, 8), val_shape), (lane, val_stride))


def ldmatrix_register(value: int) -> tuple:
    """Value of ``ldmatrix_tv``/``stmatrix_tv`` → (register, half): ``(value // 2, value % 2)``, half 0 = low 16 bits."""
    if value < 0:
        raise LayoutError("ldmatrix_register", (value,), "a value index is not negative")
    return value // 2, value % 2


def ldmatrix_address_lanes(num: int, arrangement="rows") -> Layout:
    """Which lane supplies which row address: lane a (0..8·num-1) → tile index of the first element of the 16-byte
    row it points to. Lanes 8j..8j+7 give rows 0..7 of matrix j; the addresses of lanes 8·num..31 are not used.

    ``ldmatrix_address_lanes(4)`` → ``(8,4):(1,8)`` (row a of the 32 x 8 tile);
    ``ldmatrix_address_lanes(4, 'grid')`` → ``(8,(2,2)):(1,(8,128))`` (lane 8j+r: row 8(j%2)+r, col 8(j//2)).

    The same for ``.trans`` (addresses are rows of the stored matrix) and for ``stmatrix``. Each row is 8 contiguous
    b16 elements (16 bytes, 16-byte aligned) in shared memory: the tile index of the lane's row start plus 0..7
    columns.
    """
    _check_ldsm(num, arrangement, "ldmatrix_address_lanes")
    m_rows, _n = ldmatrix_tile_shape(num, arrangement)
    place = _placement(num, arrangement, m_rows)
    if place is None:
        return Layout(8, 1)
    return Layout((8, place[0]), (1, place[1]))


def ldmatrix_address_coords(num: int, arrangement="rows") -> tuple:
    """(row, col) of each address lane's row start: ``ldmatrix_address_coords(2, 'cols')[9]`` → (1, 8)."""
    addr = ldmatrix_address_lanes(num, arrangement)
    shape = ldmatrix_tile_shape(num, arrangement)
    return tuple(idx2crd(addr(a), shape) for a in range(addr.size))


def stmatrix_tv(num: int, trans: bool = False, arrangement="rows") -> Layout:
    """``stmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16``: the same (lane, value) -> tile index mapping as
    ``ldmatrix_tv`` (stmatrix is the inverse data movement: register j of lane l is *written* to the element that
    ldmatrix would have *read* into it). Lanes supply row addresses as in ``ldmatrix_address_lanes``."""
    return ldmatrix_tv(num, trans, arrangement)


def stmatrix_address_lanes(num: int, arrangement="rows") -> Layout:
    """Same as ``ldmatrix_address_lanes``: lanes 8j..8j+7 address the rows of matrix j."""
    return ldmatrix_address_lanes(num, arrangement)


# ---------------------------------------------------------------------------------------------------------------
# Warp-level views of the accumulator, by algebra
# ---------------------------------------------------------------------------------------------------------------

def accumulator_warp_tv(n: int, warp: int = 0, acc_dtype="f32") -> Layout:
    """Warp ``warp``'s part of D: (32 lanes, N/2 values) -> index m' + 16·n in that warp's 16 x N slab
    (rows 16·warp .. 16·warp+15 of D).

    Derived, not restated: fix the warp coordinate of the thread mode (a slice, whose offset is 16·warp = the slab's
    first row), then re-index from the 64 x N tile to the 16 x N slab by composing with the left inverse of the
    slab's embedding ``(16,N):(1,64)``.
    ``accumulator_warp_tv(64, 2)`` → ``((4,8),(2,2,8)):((32,1),(16,8,128))`` for every warp.

    Post: ``accumulator_tv(n)(32·warp + l, v)`` = ``(16·warp + m', n')`` with ``(m', n') = idx2crd(result(l, v), (16, N))``.
    """
    tv = accumulator_tv(n, acc_dtype)
    if warp not in range(4):
        raise LayoutError("accumulator_warp_tv", (warp,), "a warpgroup has warps 0..3")
    lanes = slice_layout((_, _, warp), tv[0])          # (4,8):(128,1); slice offset 16·warp = the slab's first row
    assert slice_offset((_, _, warp), tv[0]) == 16 * warp
    embed = Layout((16, n), (1, 64))                   # slab (m', n') -> D index m' + 64·n'
    return composition(left_inverse(embed), make_layout(lanes, tv[1]))


def accumulator_block_tv(n: int, block: int, warp: int = 0, half=None, acc_dtype="f32") -> Layout:
    """One warp's values of D's 8-column block ``block`` (cols 8·block..8·block+7), re-indexed to the block.

    ``half=None``: the 16 x 8 block of the warp's slab, (32 lanes, 4 values) -> m' + 16·c. It equals
    ``ldmatrix_tv(2)`` = ``((4,8),(2,2)):((32,1),(16,8))``: values (0,1) are matrix 0 (rows 0-7), values (2,3)
    matrix 1 (rows 8-15), so after packing value pairs (D registers 4j,4j+1 and 4j+2,4j+3) one ``stmatrix.x2``
    stores the block. ``half = 0`` or ``1``: rows 8·half..+7 only, an 8 x 8 tile, which equals ``ldmatrix_tv(1)``
    = ``((4,8),2):((16,1),8)`` (the reference's "per-8-column block of the accumulator is the ldmatrix fragment").

    By algebra: ``logical_divide`` the warp view's value mode by 4 → ((2,2), N/8) = (values in a block, blocks);
    slicing block j leaves offset 128·j, which is exactly the block's start in the column-major 16 x N slab, so
    the block layout is that slice. For a half, divide the block's values by 2 → (2, 2) = (cols, row halves),
    slice the half (offset 8·half) and compose with the left inverse of the half's embedding ``(8,8):(1,16)``.
    """
    if block not in range(n // 8):
        raise LayoutError("accumulator_block_tv", (n, block), f"block must be in 0..{n // 8 - 1} (8-column blocks)")
    w = accumulator_warp_tv(n, warp, acc_dtype)
    per_block = logical_divide(w, (_, 4))                      # ((4,8),((2,2),N/8))
    blk = slice_layout((_, (_, block)), per_block)              # lanes, (2,2); flattened by the slice
    assert slice_offset((_, (_, block)), per_block) == 128 * block
    blk = make_layout(blk[0], blk[1])
    if half is None:
        return blk
    if half not in (0, 1):
        raise LayoutError("accumulator_block_tv", (half,), "half is 0 (rows 0-7) or 1 (rows 8-15) or None")
    halves = logical_divide(blk, (_, 2))                        # ((4,8),(2,2)) with value mode (cols, halves)
    sub = slice_layout((_, (_, half)), halves)
    assert slice_offset((_, (_, half)), halves) == 8 * half
    return composition(left_inverse(Layout((8, 8), (1, 16))), make_layout(sub[0], sub[1]))


# ---------------------------------------------------------------------------------------------------------------
# Generic helpers: coordinates, owners and a text picture
# ---------------------------------------------------------------------------------------------------------------

def _check_tv(tv, op):
    if not isinstance(tv, Layout) or tv.rank != 2:
        raise LayoutError(op, (tv,), "a TV layout is a rank-2 Layout (thread, value) -> index")


def tv_coord(tv: Layout, tile_shape, thread: int, value: int) -> tuple:
    """(row, col) of (thread, value): ``idx2crd(tv(thread, value), tile_shape)``."""
    _check_tv(tv, "tv_coord")
    return idx2crd(tv(thread, value), tile_shape)


def tv_coords(tv: Layout, tile_shape) -> tuple:
    """``coords[t][v]`` = ``idx2crd(tv(t, v), tile_shape)`` for every thread and value."""
    _check_tv(tv, "tv_coords")
    nt, nv = tv[0].size, tv[1].size
    return tuple(tuple(idx2crd(tv(t, v), tile_shape) for v in range(nv)) for t in range(nt))


def tv_owners(tv: Layout, m: int, n: int) -> dict:
    """Tile index → list of (thread, value) holding it, in (thread, value) order. For a bijective fragment every
    index of [0, m·n) has exactly one owner; replicated (stride-0) fragments have several.

    Pre: every index of ``tv`` lies in [0, m·n).
    """
    _check_tv(tv, "tv_owners")
    owners = {}
    for t in range(tv[0].size):
        for v in range(tv[1].size):
            idx = tv(t, v)
            if not 0 <= idx < m * n:
                raise LayoutError("tv_table", (tv, m, n), f"T{t}V{v} maps to {idx}, outside the {m}x{n} tile")
            owners.setdefault(idx, []).append((t, v))
    return owners


def tv_table(tv: Layout, m: int, n: int) -> str:
    """A text grid of the m x n tile with ``T{t}V{v}`` in each cell (index = row + m·col, column-major).

    >>> print(tv_table(ldmatrix_tv(1), 8, 8).splitlines()[1])
    0  T0V0  T0V1  T1V0  T1V1  T2V0  T2V1  T3V0  T3V1

    The first line holds column numbers and each row starts with its row number. A cell nobody holds shows ``.``;
    a cell several threads hold (a broadcast fragment) shows its first owner followed by ``+``.
    """
    owners = tv_owners(tv, m, n)
    cells = []
    for r in range(m):
        row = []
        for c in range(n):
            who = owners.get(r + m * c)
            if not who:
                row.append(".")
            else:
                t, v = who[0]
                row.append(f"T{t}V{v}" + ("+" if len(who) > 1 else ""))
        cells.append(row)
    width = max([len(x) for row in cells for x in row] + [len(str(n - 1))])
    label = len(str(m - 1))
    lines = [" " * label + " " + " ".join(str(c).rjust(width) for c in range(n))]
    for r, row in enumerate(cells):
        lines.append(str(r).rjust(label) + " " + " ".join(x.rjust(width) for x in row))
    return "\n".join(lines)
