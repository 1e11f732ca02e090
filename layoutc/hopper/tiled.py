"""TiledCopy / TiledMMA-style TV layouts: the thread-value layout of a copy or MMA atom repeated over a whole tile.

A kernel asks for "the TV layout of this copy (or MMA) over this tile" instead of writing one. Every function here
returns a rank-2 Layout ``(thread, value) -> index`` whose index is the **column-major** position ``m + M·n`` of the
element in the (M, N) tile (the convention of ``fragments.py`` and of the tile IR's TV attributes); ``tv_coords``
turns it into (row, col).

One construction serves every atom (``tiled_tv``): the tile is ``zipped_divide``-d by the atom's tile into
(atom tile, blocks); the blocks are split among the thread groups (warps, warpgroups) **blocked** — thread group
``(gm, gn)`` owns the contiguous band of ``Pm × Pn`` blocks starting at block ``(gm·Pm, gn·Pn)``, the way a kernel
hands each consumer warpgroup its own rows (``smem.tile`` per warpgroup) — and every group repeats the atom over
its band. So:

- **thread** ``t = t_atom + T_atom·(gm + Gm·gn)`` (the atom's threads fastest, then the groups along M, then N);
- **value** ``v = v_atom + V_atom·(pm + Pm·pn)`` (the atom's values fastest, then the repeats down M, then along
  N) — CuTe's ``((ThrV,(ThrM,ThrN)),(FrgV,(RestM,RestN)))`` order, with size-1 modes (one group, one repeat, an
  atom of one value) left out.

CuTe's ``TiledMMA`` with the default permutation *interleaves* repeats instead (block ``g + G·p``); the blocked
order here is what the tile IR's per-warpgroup views give (``wgmma.mma`` on warpgroup ``w``'s rows), so the
accumulator returned by ``wgmma.mma`` is exactly ``wgmma_accumulator_tv``'s values of that warpgroup's threads.

>>> str(wgmma_accumulator_tv(128, 128, warpgroups=2))
'(((4,8,4),2),(2,2,16)):(((256,1,16),64),(128,8,1024))'
>>> tiler, tv = copy_tv((32, 8), 8, (64, 64))   # 256 threads, 16-byte bf16 vectors, two passes down M
>>> str(tiler), str(tv)
('(32,64)', '((8,32),(8,2)):((512,1),(64,32))')
"""
from __future__ import annotations

from ..errors import LayoutError
from ..notation import to_str
from ..layout import Layout, LayoutRight, make_layout, size
from ..algebra import composition
from ..tiling import zipped_divide
from ..partition import make_layout_tv
from .dtypes import dtype as _dtype
from .fragments import (_check_n, a_fragment_k, a_fragment_tv, accumulator_tv,
                        ldmatrix_tile_shape, ldmatrix_tv)

__all__ = [
    "tiled_tv", "copy_tv", "vector_elements", "ldmatrix_tiled_tv", "stmatrix_tiled_tv", "wgmma_accumulator_tv", "wgmma_a_tv",
]


def _pair(op, what, value, operands):
    """``value`` as an (m, n) pair of positive ints (an int n is (n, 1))."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, 1)
    if (not isinstance(value, tuple) or len(value) != 2
            or any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in value)):
        raise LayoutError(op, operands, f"{what} must be a pair (m, n) of positive ints, not {value!r}")
    return value


def _mode(layout: Layout, keep) -> Layout:
    """The modes of rank-2 ``layout`` whose ``keep`` flag is set: both (the layout), one (that mode), or none
    (``1:0``)."""
    kept = [layout[i] for i in range(2) if keep[i]]
    if len(kept) == 2:
        return layout
    return kept[0] if kept else Layout(1, 0)


def tiled_tv(atom_tv: Layout, atom_shape, tile, groups=(1, 1), op: str = "tiled_tv") -> Layout:
    """The TV layout of ``atom_tv`` (a TV layout over the column-major ``atom_shape`` tile) repeated over ``tile``
    by ``groups = (Gm, Gn)`` thread groups of ``size(atom_tv[0])`` threads each, blocked (module docstring):
    thread ``t_atom + T·(gm + Gm·gn)``, value ``v_atom + V·(pm + Pm·pn)``.

    ``tiled_tv(accumulator_tv(64), (64,64), (128,64), (2,1))`` → ``(((4,8,4),2),(2,2,8)):(((256,1,16),64),(128,8,1024))``
    (two warpgroups, one m64n64 each); ``tiled_tv(ldmatrix_tv(1), (8,8), (16,8))`` → one warp, two repeats down M:
    ``((4,8),(2,2)):((32,1),(16,8))``.

    By algebra: ``D = zipped_divide((M,N):(1,M), atom_shape)`` = (atom tile, (Bm, Bn) blocks); the atom part is
    ``composition(D[0], atom_tv)`` (the atom's index re-read in the big tile); the blocks ``zipped_divide(D[1],
    (Pm, Pn))`` = ((Pm,Pn) repeats, (Gm,Gn) groups), P = B / G.

    Pre: ``atom_tv`` rank 2 with image in [0, size(atom_shape)); ``atom_shape`` divides ``tile`` mode by mode; the
    groups divide the block counts (Bm = M/am by Gm, Bn = N/an by Gn).
    Post: size(mode 0) = size(atom_tv[0])·Gm·Gn, size(mode 1) = size(atom_tv[1])·M·N/(am·an·Gm·Gn); when ``atom_tv``
    is a bijection onto its tile, the result is a bijection onto [0, M·N).
    """
    operands = (atom_tv, atom_shape, tile, groups)
    if not isinstance(atom_tv, Layout) or atom_tv.rank != 2:
        raise LayoutError(op, operands, "the atom's TV layout must be a rank-2 Layout (thread, value) -> index")
    am, an = _pair(op, "the atom's tile", atom_shape, operands)
    m, n = _pair(op, "the tile", tile, operands)
    gm, gn = _pair(op, "the thread groups", groups, operands)
    if m % am or n % an:
        raise LayoutError(op, operands, f"the atom's {am}x{an} tile does not divide the {m}x{n} tile")
    bm, bn = m // am, n // an
    if bm % gm or bn % gn:
        raise LayoutError(op, operands, f"{gm}x{gn} thread groups cannot share the {bm}x{bn} atom blocks of the "
                                        f"{m}x{n} tile evenly (each group owns an equal band of blocks)")
    pm, pn = bm // gm, bn // gn
    divided = zipped_divide(Layout((m, n)), (am, an))
    atom = composition(divided[0], atom_tv)
    blocks = zipped_divide(divided[1], (pm, pn))             # ((Pm,Pn) repeats, (Gm,Gn) groups)
    group_mode = _mode(blocks[1], (gm > 1, gn > 1))
    repeat_mode = _mode(blocks[0], (pm > 1, pn > 1))
    return make_layout(_joined(atom[0], group_mode), _joined(atom[1], repeat_mode))


def _joined(atom_mode: Layout, more: Layout) -> Layout:
    """``(atom_mode, more)`` without a size-1 side (one thread per atom or one value: the other side alone)."""
    if size(more) == 1:
        return atom_mode
    if size(atom_mode) == 1:
        return more
    return make_layout(atom_mode, more)


def _thread_layout(op, threads, operands) -> Layout:
    if isinstance(threads, Layout):
        return threads
    tm, tn = _pair(op, "threads", threads, operands)
    return make_layout((tm, tn), LayoutRight)


def vector_elements(vector_bytes: int, element) -> int:
    """Elements of ``element`` in one vector access of ``vector_bytes`` bytes: ``vector_elements(16, 'bf16')`` → 8,
    ``vector_elements(16, 'f32')`` → 4 (the ``vector`` of ``copy_tv``).

    Pre: ``vector_bytes`` is a power of two from 1 to 16 (the widths of ld/st.global and ld/st.shared) and a whole
    number of elements. Post: ``result · bits(element) == 8 · vector_bytes``.
    """
    t = _dtype(element)
    if (not isinstance(vector_bytes, int) or isinstance(vector_bytes, bool) or vector_bytes not in (1, 2, 4, 8, 16)):
        raise LayoutError("vector_elements", (vector_bytes, t.name), "a vector access is 1, 2, 4, 8 or 16 bytes")
    if (8 * vector_bytes) % t.bits:
        raise LayoutError("vector_elements", (vector_bytes, t.name), f"{vector_bytes} bytes are no whole number of "
                                                                     f"{t.bits}-bit {t.name} elements")
    return 8 * vector_bytes // t.bits


def copy_tv(threads, vector, tile) -> tuple:
    """A vectorized copy of a row-major (N-contiguous) (M, N) tile: (tiler, TV over the whole tile).

    ``threads``: a thread Layout over (M, N) positions, or a pair (Tm, Tn) meaning ``(Tm,Tn):(Tn,1)`` (thread index
    running along N first, so consecutive threads touch consecutive vectors: coalesced). ``vector``: elements per
    vector along N (an int v means the value Layout ``(1,v):(1,1)``; ``vector_elements(16, 'bf16')`` = 8 for 16-byte
    accesses), or a value Layout.
    One pass of the threads covers ``tiler`` (``make_layout_tv(threads, value)``, CuTe's); it is repeated over the
    tile as a TiledCopy partitions a larger tile, so each thread owns several vectors. **Value order**: the v
    elements of a vector first, then the repeats down M, then along N.

    ``copy_tv((32,8), 8, (64,64))`` → tiler ``(32,64)``, TV ``((8,32),(8,2)):((512,1),(64,32))``: thread t holds
    row t//8 (+32 for its second vector) and columns 8·(t%8)..8·(t%8)+7.

    Pre: positive sizes; the tiler divides the tile mode by mode. Post: a bijection from [0, threads·values) onto
    the column-major indices of the tile; size(mode 0) = size(threads).
    """
    operands = (threads, vector, tile)
    thread_layout = _thread_layout("copy_tv", threads, operands)
    if isinstance(vector, Layout):
        value_layout = vector
    elif isinstance(vector, int) and not isinstance(vector, bool) and vector >= 1:
        value_layout = Layout((1, vector), (1, 1))
    else:
        raise LayoutError("copy_tv", operands, f"vector must be a positive element count or a value Layout, "
                                               f"not {vector!r}")
    m, n = _pair("copy_tv", "the tile", tile, operands)
    tiler, atom = make_layout_tv(thread_layout, value_layout)
    if len(tiler) != 2 or m % tiler[0] or n % tiler[1]:
        raise LayoutError("copy_tv", operands, f"one pass of the threads covers {to_str(tiler)}, which does not divide the "
                                               f"{m}x{n} tile")
    return tiler, tiled_tv(atom, tiler, (m, n), op="copy_tv")


def ldmatrix_tiled_tv(num: int, tile, warps=(1, 1), trans: bool = False, arrangement: str = "grid") -> Layout:
    """``ldmatrix.m8n8.x{num}{.trans}`` over a (M, N) tile: each of ``warps = (Wm, Wn)`` warps owns a blocked band of
    ``ldmatrix_tile_shape(num, arrangement)`` tiles and issues one instruction per tile; thread ``lane + 32·(wm +
    Wm·wn)``, value ``v + 2·num·r`` = value v of instruction r (its tiles down M first, then along N).

    ``ldmatrix_tiled_tv(4, (64,16), warps=(4,1))`` → ``(((4,8),4),(2,2,2)):(((128,1),16),(64,8,512))``: the
    16-bit A fragment of one k16 step (the element map of ``a_fragment_tv('bf16')``).

    Pre: as ``ldmatrix_tv`` and ``tiled_tv``. Post: a bijection onto the tile; values of instruction r are the
    registers ``r·num .. r·num + num - 1`` two halves each (``ldmatrix_register``).
    """
    atom_shape = ldmatrix_tile_shape(num, arrangement)
    return tiled_tv(ldmatrix_tv(num, trans, arrangement), atom_shape, tile, warps, op="ldmatrix_tiled_tv")


def stmatrix_tiled_tv(num: int, tile, warps=(1, 1), trans: bool = False, arrangement: str = "grid") -> Layout:
    """``stmatrix.m8n8.x{num}{.trans}`` over a tile: the same mapping as ``ldmatrix_tiled_tv`` (stmatrix writes what
    ldmatrix reads). ``stmatrix_tiled_tv(4, (64,16), warps=(4,1))`` is the wgmma accumulator's 64 x 16 slab.
    Post: equal to ``ldmatrix_tiled_tv`` with the same arguments."""
    atom_shape = ldmatrix_tile_shape(num, arrangement)
    return tiled_tv(ldmatrix_tv(num, trans, arrangement), atom_shape, tile, warps, op="stmatrix_tiled_tv")


def _warpgroup_split(op, m, n, warpgroups, warpgroups_n, operands):
    if any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in (m, n, warpgroups, warpgroups_n)):
        raise LayoutError(op, operands, "m, n and the warpgroup counts are positive ints")
    if m % (64 * warpgroups):
        raise LayoutError(op, operands, f"m = {m} is not a multiple of 64 rows per warpgroup x {warpgroups} "
                                        f"warpgroups along M")
    if n % warpgroups_n:
        raise LayoutError(op, operands, f"n = {n} does not split over {warpgroups_n} warpgroups along N")


def wgmma_accumulator_tv(m: int, n: int, warpgroups: int = 1, warpgroups_n: int = 1, acc_dtype="f32") -> Layout:
    """The wgmma accumulator D of an (m, n) tile computed by a TiledMMA of ``warpgroups`` × ``warpgroups_n``
    warpgroups: warpgroup (wm, wn) owns rows ``m/W·wm ..`` (blocked) and columns ``n/Wn·wn ..`` and runs
    ``wgmma.m64n{n/Wn}`` on each of its ``P = m/(64·W)`` m-blocks. Thread ``t + 128·(wm + W·wn)`` (t in its
    warpgroup), value ``v + (n/Wn/2)·p`` = value v of ``accumulator_tv(n/Wn)`` of m-block p — the tile IR's
    ``wgmma.mma`` fragment of that warpgroup.

    ``wgmma_accumulator_tv(64, 256)`` = ``accumulator_tv(256)`` = ``((4,8,4),(2,2,32)):((128,1,16),(64,8,512))``;
    ``wgmma_accumulator_tv(128, 128, warpgroups=2)`` → ``(((4,8,4),2),(2,2,16)):(((256,1,16),64),(128,8,1024))``.

    Pre: m a multiple of 64·W; n/Wn a legal wgmma N for ``acc_dtype`` (``wgmma_n_values``).
    Post: a bijection onto [0, m·n); size(mode 0) = 128·W·Wn; size(mode 1) = m·n / (128·W·Wn).
    """
    operands = (m, n, warpgroups, warpgroups_n)
    _warpgroup_split("wgmma_accumulator_tv", m, n, warpgroups, warpgroups_n, operands)
    n_atom = n // warpgroups_n
    _check_n(n_atom, acc_dtype, "wgmma_accumulator_tv")
    return tiled_tv(accumulator_tv(n_atom, acc_dtype), (64, n_atom), (m, n), (warpgroups, warpgroups_n),
                    op="wgmma_accumulator_tv")


def wgmma_a_tv(element, m: int, k: int, warpgroups: int = 1) -> Layout:
    """The RS-form A fragment of an (m, k) A tile over ``warpgroups`` warpgroups along M (blocked, as
    ``wgmma_accumulator_tv``): thread ``t + 128·w``, value ``v + V·(j + S·p)`` = element v of the k-step j of m-block
    p of ``a_fragment_tv(element)`` (V values per k-step, S = k / instruction K) — the tile IR's ``wgmma.mma_rs`` A
    operand of that warpgroup (``ptxgen.ir.ops.wgmma.rs_a_tv`` for one warpgroup).

    ``wgmma_a_tv('bf16', 64, 16)`` = ``a_fragment_tv('bf16')`` = ``((4,8,4),(2,2,2)):((128,1,16),(64,8,512))``.
    With k = n, the 16-bit A fragment holds each thread's elements at the same (row, col) as the f32 accumulator
    of ``wgmma_accumulator_tv(m, n, warpgroups)``, value for value (FlashAttention-3 keeps P in registers so).

    Pre: m a multiple of 64·W; k a multiple of the instruction K (16 for 16-bit, 32 for 8-bit, 8 for tf32).
    Post: a bijection onto [0, m·k); size(mode 0) = 128·W.
    """
    operands = (element, m, k, warpgroups)
    _warpgroup_split("wgmma_a_tv", m, k, warpgroups, 1, operands)
    k_inst = a_fragment_k(element)
    if k % k_inst:
        raise LayoutError("wgmma_a_tv", operands, f"k = {k} is not a multiple of the instruction K = {k_inst}")
    return tiled_tv(a_fragment_tv(element, k), (64, k), (m, k), (warpgroups, 1), op="wgmma_a_tv")

