"""frag: register fragments: elementwise math, casts, slices, extracts, splats and row/column reductions."""
from __future__ import annotations

import numpy as np

import layoutc as lc

from ..text import attribute_text
from ..types import F32, I32, FragmentType
from . import (
    NUM_TYPES, OpDef, convert, numpy_dtype, register, round_to, tv_rows, tv_table,
    layout_values, verify_tv,
)
from .arith import division_problem


class _FragElementwise(OpDef):
    num_operands = 2
    num_results = 1
    float_only = False

    def verify(self, op, v):
        xs = op.operands
        t = op.results[0].type
        frags = [x.type for x in xs if isinstance(x.type, FragmentType)]
        if not frags:
            v.error(op, "at least one operand must be a frag")
            return
        ref = frags[0]
        for x in xs:
            if isinstance(x.type, FragmentType):
                if x.type != ref:
                    v.error(op, f"fragment operands differ: {ref} and {x.type}")
            elif x.type != ref.dtype:
                v.error(op, f"a scalar operand must have the fragment's element type {ref.dtype}, not {x.type}")
        if t != ref:
            v.error(op, f"result type must be {ref}, not {t}")
        if self.float_only and ref.dtype != F32:
            v.error(op, f"{self.name} is defined for f32 fragments, not {ref.dtype}")
        if not self.float_only and not (ref.dtype in NUM_TYPES):
            v.error(op, f"{self.name} needs a numeric element type, not {ref.dtype}")

    def result_types(self, operand_types, attrs):
        return [next(t for t in operand_types if isinstance(t, FragmentType))]

    def interpret(self, op, ix):
        t = op.results[0].type
        args = []
        for x in op.operands:
            a = ix.get(x)
            args.append(a[:, None] if not isinstance(x.type, FragmentType) else a)
        if self.name == "frag.div" and not t.dtype.is_float:
            self._check_division(op, ix, t, *args)
        with np.errstate(all="ignore"):
            r = self.compute(*[np.asarray(a, dtype=np.float64) if t.dtype.is_float else a for a in args])
        r = round_to(r, t.dtype) if t.dtype.is_float else np.asarray(r).astype(numpy_dtype(t.dtype))
        ix.set(op.results[0], np.broadcast_to(r, (ix.nthreads, t.size)).copy())

    def lower(self, op, lx):
        """One scalar op per value (a scalar operand broadcasts); see LoweringContext.scalar_op and mathlib."""
        t = op.results[0].type
        kind = self.name.split(".")[1]
        args = [lx.get(x) if isinstance(x.type, FragmentType) else [lx.get(x)] * t.size for x in op.operands]
        lx.set(op.results[0], [lx.scalar_op(kind, [a[i] for a in args], t.dtype) for i in range(t.size)])


    @staticmethod
    def _check_division(op, ix, t, a, b):
        """Integer fragment division is arith.div per value: a zero divisor (or MIN / -1) among the active threads'
        values is an error, as the GPU's result would be arbitrary."""
        shape = (ix.nthreads, t.size)
        act = np.nonzero(ix.mask)[0]
        a, b = (np.broadcast_to(np.asarray(x).astype(np.int64), shape)[act] for x in (a, b))
        problem = division_problem(a, b, t.dtype)
        if problem is not None:
            message, bad = problem
            thread, value = (int(i[0]) for i in np.nonzero(bad))
            ix.fail(op, f"{message}: value {value} of %{op.operands[0].name} / %{op.operands[1].name} is "
                        f"{int(a[thread, value])} / {int(b[thread, value])} in thread {int(act[thread])}")


def _frag_op(name, arity, compute, float_only=False):
    cls = type(name.replace(".", "_").title(), (_FragElementwise,), {
        "name": name, "num_operands": arity, "float_only": float_only, "compute": staticmethod(compute),
        "summary": f"elementwise {name.split('.')[1]} on fragments"})
    register(cls)


_frag_op("frag.add", 2, lambda a, b: a + b)
_frag_op("frag.sub", 2, lambda a, b: a - b)
_frag_op("frag.mul", 2, lambda a, b: a * b)
_frag_op("frag.div", 2, lambda a, b: a / b)
_frag_op("frag.max", 2, np.maximum)
_frag_op("frag.min", 2, np.minimum)
_frag_op("frag.fma", 3, lambda a, b, c: a * b + c)
_frag_op("frag.neg", 1, lambda a: -a)
_frag_op("frag.abs", 1, np.abs)
_frag_op("frag.exp", 1, np.exp, float_only=True)
_frag_op("frag.exp2", 1, np.exp2, float_only=True)
_frag_op("frag.log", 1, np.log, float_only=True)
_frag_op("frag.sqrt", 1, np.sqrt, float_only=True)
_frag_op("frag.rsqrt", 1, lambda a: 1.0 / np.sqrt(a), float_only=True)
_frag_op("frag.sin", 1, np.sin, float_only=True)
_frag_op("frag.cos", 1, np.cos, float_only=True)


@register
class FragCast(OpDef):
    name = "frag.cast"
    summary = "elementwise conversion of a fragment"
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        if not isinstance(x.type, FragmentType) or not isinstance(t, FragmentType):
            v.error(op, f"operand and result must be frags, got {x.type} and {t}")
            return
        if x.type.shape != t.shape:
            v.error(op, f"shapes differ: {lc.to_str(x.type.shape)} and {lc.to_str(t.shape)}")

    def interpret(self, op, ix):
        x = op.operands[0]
        ix.set(op.results[0], convert(ix.get(x), x.type.dtype, op.results[0].type.dtype))

    def lower(self, op, lx):
        x = op.operands[0]
        lx.set(op.results[0], [lx.convert(v, x.type.dtype, op.results[0].type.dtype) for v in lx.get(x)])


@register
class Slice(OpDef):
    name = "frag.slice"
    summary = "a run of consecutive values of a fragment (in its flat value order) as a smaller fragment"
    required_attrs = ("offset",)
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        offset = v.attr(op, "offset", int)
        if not isinstance(x.type, FragmentType) or not isinstance(t, FragmentType):
            v.error(op, f"operand and result must be frags, got {x.type} and {t}")
            return
        if x.type.dtype != t.dtype:
            v.error(op, f"the result's element type {t.dtype} differs from the operand's {x.type.dtype}")
        if offset is not None and (offset < 0 or offset + t.size > x.type.size):
            v.error(op, f"values {offset} … {offset + t.size - 1} are not all inside the operand's "
                        f"{x.type.size} values")

    def interpret(self, op, ix):
        start = op.attrs["offset"]
        ix.set(op.results[0], ix.get(op.operands[0])[:, start:start + op.results[0].type.size].copy())

    def lower(self, op, lx):
        """No code: the result is the operand's registers ``offset`` … ``offset + size - 1``."""
        start = op.attrs["offset"]
        lx.set(op.results[0], lx.get(op.operands[0])[start:start + op.results[0].type.size])


@register
class Extract(OpDef):
    name = "frag.extract"
    summary = "one value of a fragment (in its flat value order) as a scalar"
    required_attrs = ("index",)
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        index = v.attr(op, "index", int)
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the operand must be a frag, not {x.type}")
            return
        if t != x.type.dtype:
            v.error(op, f"the result's type {t} differs from the fragment's element type {x.type.dtype}")
        if index is not None and not 0 <= index < x.type.size:
            v.error(op, f"index {index} is not inside the operand's {x.type.size} values")

    def result_types(self, operand_types, attrs):
        return [operand_types[0].dtype]

    def interpret(self, op, ix):
        ix.set(op.results[0], ix.get(op.operands[0])[:, op.attrs["index"]].copy())

    def lower(self, op, lx):
        """No code: the result is the operand's register ``index``."""
        lx.set(op.results[0], lx.get(op.operands[0])[op.attrs["index"]])


@register
class Splat(OpDef):
    name = "frag.splat"
    summary = "a fragment whose values all equal a scalar"
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        if not isinstance(t, FragmentType):
            v.error(op, f"result must be a frag, not {t}")
            return
        if x.type != t.dtype:
            v.error(op, f"the scalar's type {x.type} differs from the fragment's element type {t.dtype}")

    def interpret(self, op, ix):
        t = op.results[0].type
        ix.set(op.results[0], np.repeat(ix.get(op.operands[0])[:, None], t.size, axis=1))

    def lower(self, op, lx):
        lx.set(op.results[0], [lx.get(op.operands[0])] * op.results[0].type.size)


@register
class Reduce(OpDef):
    name = "frag.reduce"
    summary = "replace each value by the reduction over its tile row (or column), across values and threads"
    required_attrs = ("tv", "tile", "mode", "kind")
    KINDS = {"add": np.add, "max": np.maximum, "min": np.minimum}
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        x, thread = op.operands
        t = op.results[0].type
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the reduced operand must be a frag, not {x.type}")
            return
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        if t != x.type:
            v.error(op, f"result type must be {x.type}, not {t}")
        if x.type.dtype not in NUM_TYPES:
            v.error(op, f"the fragment needs a numeric element type ({', '.join(map(str, NUM_TYPES))}), not "
                        f"{x.type.dtype}: frag.cast to f32 first")
            return
        v.word(op, "kind", tuple(self.KINDS))
        mode = v.attr(op, "mode", int)
        tile = v.shape_attr(op, "tile")
        tv = v.attr(op, "tv", lc.Layout)
        if tile is None or tv is None:
            return
        if lc.rank(tile) != 2:
            v.error(op, f"tile {lc.to_str(tile)} must have rank 2 (rows, columns)")
            return
        if mode not in (0, 1):
            v.error(op, f"mode must be 0 (columns) or 1 (rows), not {attribute_text(mode)}")
            return
        if not verify_tv(op, v, tv, x.type.shape, lc.product(tile)):
            return
        values = layout_values(tv)
        if values.size != lc.product(tile) or not np.array_equal(np.sort(values), np.arange(values.size)):
            v.error(op, f"tv {lc.to_str(tv)} must hold every element of the {lc.to_str(tile)} tile exactly once")
            return
        rows = lc.product(tile[0])
        threads = lc.size(tv[0])
        table = values.reshape(-1, threads).T            # (thread, value) → tile index, tv's colexicographic order
        lines = table % rows if mode == 1 else table // rows
        warps = np.broadcast_to((np.arange(threads) // 32)[:, None], lines.shape)
        # a line is one warp's when its smallest and largest warp agree
        order = np.argsort(lines, axis=None, kind="stable")
        line_sorted, warp_sorted = lines.ravel()[order], warps.ravel()[order]
        starts = np.r_[0, np.nonzero(np.diff(line_sorted))[0] + 1]
        lo, hi = np.minimum.reduceat(warp_sorted, starts), np.maximum.reduceat(warp_sorted, starts)
        spread = np.nonzero(lo != hi)[0]
        if spread.size:
            k = int(spread[0])
            line = int(line_sorted[starts[k]])
            end = starts[k + 1] if k + 1 < len(starts) else len(line_sorted)
            what = "row" if mode == 1 else "column"
            v.error(op, f"{what} {line} is spread over warps {sorted(set(warp_sorted[starts[k]:end].tolist()))}: a "
                        "reduction must stay inside one warp (it lowers to shuffles)")
            return

    def interpret(self, op, ix):
        x, thread = op.operands
        tv = op.attrs["tv"]
        tile = op.attrs["tile"]
        rows = lc.product(tile[0])
        table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
        idx = tv_rows(ix, op, thread, table)
        line = idx % rows if op.attrs["mode"] == 1 else idx // rows
        nlines = rows if op.attrs["mode"] == 1 else lc.product(tile) // rows
        values = ix.get(x).astype(np.float64)
        active = np.broadcast_to(ix.mask[:, None], values.shape)
        kind = self.KINDS[str(op.attrs["kind"])]
        init = {"add": 0.0, "max": -np.inf, "min": np.inf}[str(op.attrs["kind"])]
        acc = np.full(nlines, init)
        kind.at(acc, line[active], values[active])
        ix.set(op.results[0], round_to(acc[line], x.type.dtype) if x.type.dtype.is_float
               else acc[line].astype(numpy_dtype(x.type.dtype)))

    def lower(self, op, lx):
        """Per thread, reduce the values of each line (plans.plan_reduce groups them, from tv and the tile); then a
        butterfly of shfl.sync.bfly over exactly the lane bits that move along the line without leaving it;
        every value of the line gets the result. Must be reached by whole warps (no divergent scf.if around it)."""
        x, thread = op.operands
        lx.set(op.results[0], lx.frag_reduce(lx.get(x), thread, op.attrs["tv"], op.attrs["tile"],
                                             op.attrs["mode"], str(op.attrs["kind"]), x.type.dtype))
