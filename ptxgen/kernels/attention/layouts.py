"""The attention kernel's shared-memory layouts: Q's tile and the K and V rings, each over the global tensors'
(batch, head, row, column) modes so that one TMA box of a rank-4 map writes 64 columns of a tile, and the rank-2
views wgmma reads (``operand_view``).

Q, K and V are rank-4 tensors (B, H, S, D) (FlashAttention's (B, S, H, D) seen through a permuted view: any strides,
unit stride along D). A tile of ``rows`` rows × D columns is K-major SW128 GMMA atoms (``gmma_smem_layout``) whose
two leading modes are the batch's and the head's, of extent 1. K's and V's rings are the same bytes: K is wgmma's B
operand as (N = rows, K = D) (K-major), V as (N = D, K = rows) — the same tile permuted, MN-major."""
from __future__ import annotations

import layoutc as lc
from layoutc.hopper import gmma_smem_layout

from ptxgen.ir.builder import i32
from ptxgen.ir.ops.smem import stage_sliced, tile_split

from .config import BOX_COLUMNS


def _batch_head_modes(layout):
    """``layout`` (a GMMA layout over (rows, columns, …)) with two leading modes of extent 1: the (batch, head)
    coordinates of a rank-4 TMA box."""
    inner = layout.inner
    modes = [lc.Layout(1, 0), lc.Layout(1, 0)] + [inner[i] for i in range(lc.rank(inner))]
    return lc.ComposedLayout(layout.outer, layout.offset, lc.make_layout(*modes))


def tile_layout(dtype: str, rows: int, head_dim: int):
    """A (1, 1, rows, D) tile in shared memory (Q's). ``tile_layout("bf16", 128, 64)`` =
    ``Sw<3,4,3> o 0 o (1,1,(8,16),(64,1)):(0,0,(64,512),(1,0))``."""
    return _batch_head_modes(gmma_smem_layout("K", "SW128", dtype, (rows, head_dim)))


def ring_layout(dtype: str, rows: int, head_dim: int, stages: int):
    """``stages`` (1, 1, rows, D) tiles, the stage the last mode (K's and V's rings)."""
    return _batch_head_modes(gmma_smem_layout("K", "SW128", dtype, (rows, head_dim, stages)))


def box_layout(tile):
    """The TMA box of a tile (``tile_layout`` or a ring's stage): 64 columns of it, one 128-byte row per tile row."""
    return tile_split(tile, 3, BOX_COLUMNS)[0]


def ring_box(ring):
    return box_layout(stage_sliced(ring))


def operand_view(b, tile, order, name: str):
    """The rank-2 view wgmma reads of a (1, 1, rows, D) smem tile: modes ``order`` (``(2, 3)``: (rows, D), K-major
    for Q and K; ``(3, 2)``: (D, rows), MN-major for V), the extent-1 (batch, head) modes moved last and sliced at 0.
    → the view (its layout is the GMMA layout the tile was made of, or its transpose)."""
    permuted = b.smem.permute(tile, order=tuple(order) + (0, 1), name=f"{name}_p")
    zero = b.const(0, i32, name=f"{name}_z")
    return b.smem.slice(b.smem.slice(permuted, zero, name=f"{name}_s"), zero, name=name)
