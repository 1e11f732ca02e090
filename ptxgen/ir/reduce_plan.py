"""The plan of a ``frag.reduce``: which of a thread's values share a line, which lane and warp bits move along a line,
and the shared-memory scratch a reduction across warps needs (a pure function of the TV layout and the tile).

The line of (t, v) is the row (``mode = 1``) or column (``mode = 0``) of tile element ``tv(t, v)``. A reduction runs
in three steps, each derived here from the layout, never written by hand:

1. per thread, the values of one line (a *group*, the same partition in every thread) are combined;
2. across lanes, a butterfly over the lane bits j < 5 with ``line(t ⊕ 2^j, v) = line(t, v)`` (``lane_masks``);
3. across warps (only when a line spans several warps): the warp bits with ``line(t ⊕ 32·2^j, v) = line(t, v)``
   (``warp_masks``). Each warp's partial of a line goes to a scratch slot in shared memory, a barrier, then every
   thread combines the partials of its line's warps, in the same order in every warp (so all agree bit for bit).

Both butterflies are exact only when every line is held by exactly one coset ``t ⊕ span(lane and warp masks)``
contributing the same value group; ``plan_reduce`` raises ReducePlanError otherwise.

Example: the row of a (1, 4096) tile spread over 256 threads, ``(256,16):(1,256)`` → one group of 16 values, lane
masks 1, 2, 4, 8, 16, warp masks 1, 2, 4 (8 warps), scratch of 8 slots (one per warp).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import layoutc as lc

from .layout_table import tv_index

WARP = 32


class ReducePlanError(ValueError):
    """The TV layout's rows (columns) are not a butterfly over lane and warp bits (the message says why)."""


def line_table(tv, tile_shape, mode: int) -> np.ndarray:
    """(threads, values) array: the line (row index for ``mode = 1``, column index for ``mode = 0``) of each (t, v)
    of ``tv`` over a rank-2 tile. ``line_table((4,2):(2,1), (2,4), 1)`` → rows ``[[0,1],[0,1],[0,1],[0,1]]``."""
    index = tv_index(tv)
    rows = lc.product(tile_shape[0])
    return index % rows if mode == 1 else index // rows


@dataclass(frozen=True)
class ReducePlan:
    """``groups``: a thread's values that lie in one line (the same for every thread); ``lane_masks``: xor masks
    (powers of two < 32) of the lane bits that keep the line, in butterfly order; ``warp_masks``: the same for the
    warp index (powers of two; empty when every line lies in one warp); ``threads``: the size of the TV's thread
    mode."""

    groups: tuple
    lane_masks: tuple
    warp_masks: tuple = ()
    threads: int = WARP

    @property
    def across_warps(self) -> bool:
        """Whether a line spans several warps (a reduction through shared memory and a barrier): True for the row of
        a (1, 4096) tile over ``(256,16):(1,256)``. Post: equal to ``bool(warp_masks)``."""
        return bool(self.warp_masks)

    @property
    def warps(self) -> int:
        """Warps of the TV's thread mode, rounded up: 8 for ``(256,16):(1,256)``. Post: ``warps · 32 ≥ threads``."""
        return -(-self.threads // WARP)

    @property
    def kept_lane_bits(self) -> tuple:
        """The lane bits (0..4) the butterfly does NOT move along: lanes differing there hold different lines.
        ``(32,1):(1,0)`` over a (4, 8) tile (lane t = element t, row t mod 4): lane masks 4, 8, 16, kept bits
        (0, 1). Post: disjoint from the bits of ``lane_masks``, ascending."""
        moved = sum(self.lane_masks)
        return tuple(j for j in range(5) if not moved >> j & 1)

    @property
    def scratch_slots(self) -> int:
        """Slots of the cross-warp scratch: one per (warp, group, lane that writes its warp's partial); the writing
        lanes are those whose moved lane bits are 0, so the lane part has ``2^len(kept_lane_bits)`` slots."""
        if not self.across_warps:
            return 0
        return self.warps * len(self.groups) * (1 << len(self.kept_lane_bits))

    def slot(self, warp: int, group: int, lane: int) -> int:
        """The scratch slot of warp ``warp``'s partial of group ``group``, written by lane ``lane`` (its moved bits
        0): ``(warp·groups + group)·2^k + the kept lane bits of lane, packed``."""
        packed = sum(((lane >> bit) & 1) << i for i, bit in enumerate(self.kept_lane_bits))
        return (warp * len(self.groups) + group) * (1 << len(self.kept_lane_bits)) + packed


@functools.lru_cache(maxsize=256)
def plan_reduce(tv, tile_shape, mode: int) -> ReducePlan:
    """The reduction plan of ``frag.reduce`` for TV layout ``tv`` over the rank-2 ``tile_shape`` (see the module
    docstring). Raises ReducePlanError when the threads sharing a line are not one coset ``t ⊕ span(lane and warp
    bits)`` contributing the same value group (then no butterfly computes it).

    ``plan_reduce((256,16):(1,256), (1,4096), 1)`` → groups ``((0, …, 15),)``, lane masks (1, 2, 4, 8, 16), warp
    masks (1, 2, 4). Post: ``len(groups)`` distinct lines per thread; every line is combined from exactly
    ``2^(len(lane_masks) + len(warp_masks))`` threads."""
    nt, nv = lc.size(tv[0]), lc.size(tv[1])
    line = line_table(tv, tile_shape, mode)
    first = line[0]
    groups = {}
    for v in range(nv):
        groups.setdefault(int(first[v]), []).append(v)
    groups = [tuple(g) for g in groups.values()]
    for g in groups:  # the same partition for every thread
        if not np.all(line[:, list(g)] == line[:, [g[0]]]):
            raise ReducePlanError(f"values {list(g)} share a line in thread 0 but not in every thread")
    heads = [g[0] for g in groups]
    if any(len(np.unique(line[t, heads])) != len(heads) for t in range(nt)):
        raise ReducePlanError("two value groups of one thread lie in the same line")
    t = np.arange(nt)
    masks, warp_masks = [], []
    for bit in range(10):
        m = 1 << bit
        if nt % (2 * m):
            continue
        if np.array_equal(line[t ^ m], line):
            (masks if bit < 5 else warp_masks).append(m)
    holders = {}
    for tt in range(nt):
        for h in heads:
            holders.setdefault(int(line[tt, h]), set()).add(tt)
    want = 1 << (len(masks) + len(warp_masks))
    for ln, ts in holders.items():
        if len(ts) != want:
            bits = [m.bit_length() - 1 for m in masks] + [m.bit_length() - 1 for m in warp_masks]
            raise ReducePlanError(
                f"line {ln} is held by threads {sorted(ts)[:8]}{'...' if len(ts) > 8 else ''}, which are not one "
                f"coset of the thread bits {bits} that keep the line")
    return ReducePlan(tuple(groups), tuple(masks), tuple(m >> 5 for m in warp_masks), nt)
