"""scalar: one element of a global tensor read into a scalar (per-sequence offsets of a varlen batch, …).

``%x = scalar.load %t, %i0, %i1, … : T``: every active thread reads element (i0, i1, …) of gtensor ``%t`` (one
``i32`` coordinate per mode, each thread its own); an element outside the tensor reads 0, as ``gmem.load``'s
``other``. The result type is the tensor's element type.
"""
from __future__ import annotations

import layoutc as lc
import numpy as np

from ..types import I32, GlobalTensorType
from . import OpDef, numpy_dtype, register


@register
class Load(OpDef):
    name = "scalar.load"
    summary = "each active thread reads one element of a global tensor (0 outside it)"

    def verify(self, op, v):
        if not op.operands:
            v.error(op, "expects a gtensor and one i32 coordinate per mode")
            return
        x, *coords = op.operands
        if not isinstance(x.type, GlobalTensorType):
            v.error(op, f"the first operand must be a gtensor, not {x.type}")
            return
        if len(coords) != x.type.rank:
            v.error(op, f"%{x.name} has rank {x.type.rank}: give {x.type.rank} coordinates, not {len(coords)}")
        for c in coords:
            if c.type != I32:
                v.error(op, f"coordinate %{c.name} must be i32, not {c.type}")
        if len(op.results) != 1:
            v.error(op, f"expects 1 result, got {len(op.results)}")
        elif op.results[0].type != x.type.dtype:
            v.error(op, f"the result type must be the tensor's element type {x.type.dtype}, not {op.results[0].type}")

    def result_types(self, operand_types, attrs):
        return [operand_types[0].dtype] if operand_types and isinstance(operand_types[0], GlobalTensorType) else []

    def interpret(self, op, ix):
        x, *coords = op.operands
        array = ix.get(x)
        idx = np.stack([ix.get(c).astype(np.int64) for c in coords], axis=1)
        inside = np.all((idx >= 0) & (idx < np.array(array.shape, dtype=np.int64)), axis=1)
        safe = np.where(inside[:, None], idx, 0)
        values = array[tuple(safe[:, k] for k in range(safe.shape[1]))].astype(numpy_dtype(op.results[0].type))
        ix.set(op.results[0], np.where(inside, values, 0).astype(numpy_dtype(op.results[0].type)))

    def lower(self, op, lx):
        """``gmem.load``'s path for a one-element tile at the coordinates: one bounds-guarded scalar load."""
        x, *coords = op.operands
        rank = len(coords)
        view = lx.GView(lx.get(x), [lx.get(c) for c in coords], [lx.multiple(c) for c in coords], (1,) * rank)
        (value,) = lx.gmem_load(view, lx.i32(0), lc.Layout((1, 1), (0, 0)), op.results[0].type)
        lx.set(op.results[0], value)
