"""The attention kernel's shared-memory layouts: Q's tile and the K and V rings, each over the global tensors' modes
so that one TMA box writes 64 columns of a tile, and the rank-2 views wgmma reads (``operand_view``).

Dense Q, K and V are rank-4 tensors (B, H, S, D) (FlashAttention's (B, S, H, D) seen through a permuted view: any
strides, unit stride along D); varlen ones rank-3 (H, total, D). A tile of ``rows`` rows × D columns is K-major SW128
GMMA atoms (``gmma_smem_layout``) after ``lead`` leading modes of extent 1 (the box's batch and head: 2 dense, 1
varlen), so its row mode is ``lead`` and its column mode ``lead + 1``. K's and V's rings are the same bytes: K is
wgmma's B operand as (N = rows, K = D) (K-major), V as (N = D, K = rows) — the same tile permuted, MN-major."""
from __future__ import annotations

import layoutc as lc
from layoutc.hopper import gmma_smem_layout

from ptxgen.ir.builder import i32
from ptxgen.ir.ops.smem import stage_sliced, tile_split

from .config import BOX_COLUMNS


def _leading_modes(layout, lead: int):
    """``layout`` (a GMMA layout over (rows, columns, …)) after ``lead`` modes of extent 1."""
    inner = layout.inner
    modes = [lc.Layout(1, 0)] * lead + [inner[i] for i in range(lc.rank(inner))]
    return lc.ComposedLayout(layout.outer, layout.offset, lc.make_layout(*modes))


def tile_layout(dtype: str, rows: int, head_dim: int, lead: int = 2):
    """A (1, …, rows, D) tile in shared memory (Q's). ``tile_layout("bf16", 128, 64)`` =
    ``Sw<3,4,3> o 0 o (1,1,(8,16),(64,1)):(0,0,(64,512),(1,0))``."""
    return _leading_modes(gmma_smem_layout("K", "SW128", dtype, (rows, head_dim)), lead)


def p_layout(dtype: str, rows: int, bn: int):
    """The (rows, bn) tile of P in shared memory (``p_in_smem``), K-major SW128 GMMA atoms: each consumer warpgroup's
    64 rows are the A operand (M = 64, K = bn) of its SS wgmma O += P·V. ``p_layout("bf16", 192, 192)`` =
    ``Sw<3,4,3> o 0 o ((8,24),(64,3)):((64,512),(1,12288))``."""
    return gmma_smem_layout("K", "SW128", dtype, (rows, bn))


def ring_layout(dtype: str, rows: int, head_dim: int, stages: int, lead: int = 2):
    """``stages`` (1, …, rows, D) tiles, the stage the last mode (K's and V's rings)."""
    return _leading_modes(gmma_smem_layout("K", "SW128", dtype, (rows, head_dim, stages)), lead)


def box_layout(tile, lead: int = 2):
    """The TMA box of a tile (``tile_layout`` or a ring's stage): 64 columns of it, one 128-byte row per tile row."""
    return tile_split(tile, lead + 1, BOX_COLUMNS)[0]


def ring_box(ring, lead: int = 2):
    return box_layout(stage_sliced(ring), lead)


def operand_view(b, tile, order, name: str, lead: int = 2):
    """The rank-2 view wgmma reads of a (1, …, rows, D) smem tile: ``order`` ``(0, 1)`` gives (rows, D), K-major for
    Q and K; ``(1, 0)`` gives (D, rows), MN-major for V. The extent-1 leading modes are moved last and sliced at 0.
    → the view (its layout is the GMMA layout the tile was made of, or its transpose)."""
    permuted = b.smem.permute(tile, order=tuple(lead + o for o in order) + tuple(range(lead)), name=f"{name}_p")
    zero = b.const(0, i32, name=f"{name}_z")
    view = permuted
    for j in range(lead):
        view = b.smem.slice(view, zero, name=name if j == lead - 1 else f"{name}_s{j}")
    return view
