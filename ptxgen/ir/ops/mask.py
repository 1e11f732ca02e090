"""mask: setting the values of a register fragment by their tile coordinates (attention's causal and ragged masks).

``%r = mask.fill %f, %t, %diag, %bound {tv = [TV], tile = [(M,N)], value = -inf} : frag<f32>[S]``: with the fragment
distributed over the (M, N) tile by ``TV`` (as in ``gmem.load``: value v of thread t is tile element
``i = tv(t, v)``, row ``i mod M``, column ``i div M``), every value whose column is at least ``bound`` or lies more
than ``diag`` columns right of its row (``col - row > diag``) becomes ``value``; the others are kept. One op covers
the masks an attention score tile needs: the key columns past the sequence's end (``bound``) and the causal upper
triangle, aligned anywhere (``diag``: FlashAttention's bottom-right alignment of query row r and key column c of a
tile at (q0, k0) masks ``c - r > q0 - k0 + Sk - Sq``); a huge ``diag`` masks no triangle, a huge ``bound`` no column.
"""
from __future__ import annotations

import numpy as np

import layoutc as lc

from ..types import I32, FragmentType
from . import NUM_TYPES, OpDef, register, round_to, tv_rows, tv_table, value_problem, verify_tv


def masked(rows: np.ndarray, cols: np.ndarray, diag, bound) -> np.ndarray:
    """Whether tile element (row, col) is masked: ``col >= bound`` or ``col - row > diag`` (elementwise, numpy
    broadcasting). ``masked(np.array([0]), np.array([3]), 2, 64)`` → [True]."""
    return (cols >= bound) | (cols - rows > diag)


@register
class Fill(OpDef):
    name = "mask.fill"
    summary = "set the values of a fragment whose tile (row, col) has col ≥ bound or col − row > diag to a constant"
    required_attrs = ("tv", "tile", "value")
    num_operands = 4
    num_results = 1

    def verify(self, op, v):
        x, thread, diag, bound = op.operands
        t = op.results[0].type
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the masked operand must be a frag, not {x.type}")
            return
        for what, s in (("thread", thread), ("diag", diag), ("bound", bound)):
            if s.type != I32:
                v.error(op, f"the {what} operand must be i32, not {s.type}")
        if t != x.type:
            v.error(op, f"result type must be {x.type}, not {t}")
        if x.type.dtype not in NUM_TYPES:
            v.error(op, f"the fragment needs a numeric element type, not {x.type.dtype}")
            return
        value = v.attr(op, "value", (int, float))
        problem = value_problem(value, x.type.dtype) if value is not None else None
        if problem:
            v.error(op, problem)
        tile = v.shape_attr(op, "tile")
        tv = v.attr(op, "tv", lc.Layout)
        if tile is None or tv is None:
            return
        if lc.rank(tile) != 2:
            v.error(op, f"tile {lc.to_str(tile)} must have rank 2 (rows, columns)")
            return
        verify_tv(op, v, tv, x.type.shape, lc.product(tile))

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def interpret(self, op, ix):
        x, thread, diag, bound = op.operands
        tv, tile = op.attrs["tv"], op.attrs["tile"]
        rows = lc.product(tile[0])
        table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
        idx = tv_rows(ix, op, thread, table)
        hit = masked(idx % rows, idx // rows, ix.get(diag).astype(np.int64)[:, None],
                     ix.get(bound).astype(np.int64)[:, None])
        fill = round_to(np.array(float(op.attrs["value"])), x.type.dtype) if x.type.dtype.is_float \
            else op.attrs["value"]
        values = ix.get(x)
        ix.set(op.results[0], np.where(hit, np.asarray(fill, dtype=values.dtype), values))

    def lower(self, op, lx):
        """Per value: the tile index ``tv(t, v)`` = the thread's part (``emit_layout`` of the thread mode at t, once)
        plus the value's constant part; row and column by an unsigned remainder and quotient by the constant M; two
        compares and a select. Values of a tile whose mask is known to be empty cost nothing because the caller
        branches around the op."""
        x, thread, diag, bound = op.operands
        tv, tile = op.attrs["tv"], op.attrs["tile"]
        rows = lc.product(tile[0])
        b = lx.b
        base = lx.emit_layout(tv[0], lx.get(thread))
        fill = lx.const(x.type.dtype, op.attrs["value"])
        d, n = lx.get(diag), lx.get(bound)
        out = []
        for i, value in enumerate(lx.get(x)):
            idx = b.add(base, lx.i32(tv[1](i)))
            row = b.urem(idx, lx.i32(rows))
            col = b.udiv(idx, lx.i32(rows))
            past = b.icmp_signed(">=", col, n)
            above = b.icmp_signed(">", b.sub(col, row), d)
            out.append(b.select(b.or_(past, above), fill, value))
        lx.set(op.results[0], out)
