"""sched: the tile scheduler of persistent kernels: which output tile a CTA computes for a linear work index.

A persistent kernel launches about one CTA per SM and loops ``for t = block_id; t < tiles; t += grid_dim``; the order
in which tiles are handed out decides how often the A and B panels they read are still in L2. ``sched.tile``
rasterizes in GROUPS of ``group`` tile rows: consecutive work indices walk down the rows of a group first, then move
one tile column right, so the CTAs running at the same time share a few A row panels and a few B column panels
(Triton's GROUP_M ordering; CUTLASS's swizzled raster along M).
"""
from __future__ import annotations

import numpy as np

from ..types import I32
from . import OpDef, register

I32_MAX = (1 << 31) - 1


def grouped_tile(t, tiles_m, tiles_n, group):
    """(tile_m, tile_n) of work index ``t`` (numpy or Python ints, elementwise).

    ``group = 2``, 3 × 2 tiles: t = 0..5 → (0,0) (1,0) (0,1) (1,1) (2,0) (2,1). Post: a bijection from
    ``[0, tiles_m·tiles_n)`` onto the tile grid; each group of ``group`` rows is finished before the next starts."""
    per_group = group * tiles_n
    g = t // per_group
    first = g * group
    rows = np.minimum(tiles_m - first, group)
    within = t % per_group
    return first + within % rows, within // rows


@register
class Tile(OpDef):
    name = "sched.tile"
    summary = "the (m, n) tile of a linear work index, grouped `group` tile rows at a time for L2 reuse"
    required_attrs = ("group",)
    num_operands = 3
    num_results = 2

    def verify(self, op, v):
        t, tiles_m, tiles_n = op.operands
        types = [r.type for r in op.results]
        for what, x in (("work index", t), ("tile rows", tiles_m), ("tile columns", tiles_n)):
            if x.type != I32:
                v.error(op, f"the {what} must be i32, not {x.type}")
        if any(r != I32 for r in types):
            v.error(op, f"the results (tile m, tile n) are i32, not {', '.join(map(str, types))}")
        g = v.attr(op, "group", int)
        if g is not None and g < 1:
            v.error(op, f"group must be >= 1, not {g}")
        elif g is not None and g > I32_MAX:
            v.error(op, f"group must be at most {I32_MAX} (an i32), not {g}")

    def result_types(self, operand_types, attrs):
        return [I32, I32]

    def interpret(self, op, ix):
        t, tm, tn = (ix.get(x).astype(np.int64) for x in op.operands)
        act = ix.mask
        bad = act & ((tm < 1) | (tn < 1) | (t < 0) | (t >= tm * tn))
        if bad.any():
            k = int(np.nonzero(bad)[0][0])
            ix.fail(op, f"work index {int(t[k])} (thread {k}) is outside the {int(tm[k])} x {int(tn[k])} tiles")
        safe_m, safe_n = np.maximum(tm, 1), np.maximum(tn, 1)
        m, n = grouped_tile(np.where(act, t, 0), safe_m, safe_n, op.attrs["group"])
        ix.set(op.results[0], m.astype(np.int32))
        ix.set(op.results[1], n.astype(np.int32))

    def lower(self, op, lx):
        """Unsigned div/rem by the group sizes (the division by ``group`` constant-folds to shifts when it is a
        power of two) and one ``min``."""
        b = lx.b
        t, tiles_m, tiles_n = (lx.get(x) for x in op.operands)
        group = lx.i32(op.attrs["group"])
        per_group = b.mul(group, tiles_n)
        first = b.mul(b.udiv(t, per_group), group)
        left = b.sub(tiles_m, first)
        rows = b.select(b.icmp_unsigned("<", left, group), left, group)
        within = b.urem(t, per_group)
        lx.set(op.results[0], b.add(first, b.urem(within, rows)))
        lx.set(op.results[1], b.udiv(within, rows))
