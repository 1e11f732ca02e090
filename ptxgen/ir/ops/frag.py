"""frag: register fragments: elementwise math, casts, slices, concatenation, splats, row/column reductions (within a
warp or across the warps of the CTA), single values as scalars, reciprocals, each value's tile coordinates,
comparisons and selects (masking)."""
from __future__ import annotations

import numpy as np

import layoutc as lc

from .. import exp2_poly, launch
from ..core import walk
from ..reduce_plan import ReducePlanError, line_table, plan_reduce
from ..text import attribute_text
from ..types import F32, I1, I32, FragmentType
from . import (
    NUM_TYPES, OpDef, convert, describe_threads, is_tv, kernel_rule, numpy_dtype, register, round_to, tv_attr, tv_parts, tv_rows,
    tv_table, layout_values, tile_coordinates, verify_tv,
)
from .arith import Cmp, compare, division_problem


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
_frag_op("frag.log", 1, np.log, float_only=True)
_frag_op("frag.sqrt", 1, np.sqrt, float_only=True)
_frag_op("frag.rsqrt", 1, lambda a: 1.0 / np.sqrt(a), float_only=True)
_frag_op("frag.sin", 1, np.sin, float_only=True)
_frag_op("frag.cos", 1, np.cos, float_only=True)


@register
class Exp2(_FragElementwise):
    """``frag.exp2 {ftz = true}``: results below 2^-126 (subnormal) flush to zero — ``ex2.approx.ftz.f32``, one
    MUFU.EX2. Without it (``ex2.approx.f32``) ptxas guards each value for subnormal results with a compare and two
    predicated multiplies around the MUFU: an exp-bound softmax pays 4 instructions per value instead of 1.

    ``poly = (k, n)`` (with ftz): value i of the fragment (its flat value order) takes the software exp2 of
    ``ptxgen.ir.exp2_poly`` (FP32-pipe instructions, a polynomial of degree ``poly_degree``, 3 by default) where
    i mod n < k, the MUFU otherwise — FlashAttention-4's split of a softmax's exponentials between the MUFU
    (16 per clock per SM) and the FMA pipe. ``{ftz = true, poly = (1, 4)}`` on frag<f32>[(64)]: values 0, 4, 8, …
    by the polynomial."""
    name = "frag.exp2"
    num_operands = 1
    float_only = True
    optional_attrs = ("ftz", "poly", "poly_degree")
    summary = "elementwise exp2 on fragments (ftz: subnormal results flushed to zero; poly: a share in software)"

    @staticmethod
    def compute(a):
        return np.exp2(a)

    def verify(self, op, v):
        super().verify(op, v)
        if "ftz" in op.attrs:
            v.attr(op, "ftz", bool)
        poly = op.attrs.get("poly")
        if "poly" in op.attrs and not _is_share(poly):
            v.error(op, f"attribute 'poly' must be a tuple (k, n) of integers with n ≥ 1 and 0 ≤ k ≤ n (value i takes "
                        f"the polynomial where i mod n < k), not {attribute_text(poly)}")
        elif "poly" in op.attrs and op.attrs.get("ftz") is not True:
            v.error(op, "attribute 'poly' needs ftz = true (the polynomial flushes results below 2^-126 to zero, as "
                        "ex2.approx.ftz does)")
        if "poly_degree" in op.attrs:
            degree = op.attrs["poly_degree"]
            if "poly" not in op.attrs:
                v.error(op, "attribute 'poly_degree' needs attribute 'poly' (the share of values the polynomial takes)")
            elif isinstance(degree, bool) or degree not in exp2_poly.DEGREES:
                v.error(op, f"attribute 'poly_degree' must be one of {', '.join(map(str, exp2_poly.DEGREES))}, not "
                            f"{attribute_text(degree)}")

    def interpret(self, op, ix):
        """ftz: the correctly rounded 2^x with results below 2^-126 flushed; the ``poly`` share: the f32 steps of
        ``exp2_poly.exp2`` on numpy (the lowering's, step for step)."""
        super().interpret(op, ix)
        if op.attrs.get("ftz") is True:
            r = ix.get(op.results[0])
            r = np.where(np.abs(r) < np.finfo(np.float32).tiny, np.float32(0), r).astype(r.dtype)
            poly = op.attrs.get("poly")
            if poly is not None:
                chosen = [i for i in range(r.shape[1]) if exp2_poly.takes_poly(i, poly)]
                x = ix.get(op.operands[0]).astype(np.float32)[:, chosen]
                with np.errstate(all="ignore"):
                    r[:, chosen] = exp2_poly.exp2(exp2_poly.NumpyF32(), x, self.degree(op))
            ix.set(op.results[0], r)

    @staticmethod
    def degree(op) -> int:
        return op.attrs.get("poly_degree", exp2_poly.DEFAULT_DEGREE)

    def lower(self, op, lx):
        """``llvm.nvvm.ex2.approx.ftz.f`` per value with ``ftz`` (the ``poly`` share: ``exp2_poly.exp2``'s FP32
        steps instead), else the shared scalar exp2 (mathlib)."""
        if op.attrs.get("ftz") is not True:
            return super().lower(op, lx)
        f32 = lx.llvm_type(F32)
        poly = op.attrs.get("poly", (0, 1))
        steps = exp2_poly.LLVMF32(lx)
        lx.set(op.results[0], [exp2_poly.exp2(steps, x, self.degree(op)) if exp2_poly.takes_poly(i, poly)
                               else lx.call("llvm.nvvm.ex2.approx.ftz.f", f32, [x])
                               for i, x in enumerate(lx.get(op.operands[0]))])


def _is_share(poly) -> bool:
    """Whether ``poly`` is (k, n): two integers, n ≥ 1, 0 ≤ k ≤ n (``(1, 4)`` is; ``(5, 4)``, ``(1, 0)`` are not)."""
    return (isinstance(poly, tuple) and len(poly) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                               for x in poly)
            and poly[1] >= 1 and 0 <= poly[0] <= poly[1])


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
class Concat(OpDef):
    """``%h = frag.concat %f, %g : frag<T>[S]``: the values of ``%f`` then those of ``%g`` (each in its flat value
    order) as one fragment, the inverse of two ``frag.slice`` ops: with the wgmma accumulator of two m64 blocks
    (values v + (BN/2)·p of block p) the two blocks' fragments of BN/2 values join into the (128, BN) one. The
    result type defaults to ``frag<T>[(size_f + size_g)]``; a given shape must have that size."""
    name = "frag.concat"
    summary = "two fragments' values, one after the other, as one fragment"
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        first, second = op.operands
        t = op.results[0].type
        if not all(isinstance(x, FragmentType) for x in (first.type, second.type, t)):
            v.error(op, f"operands and result must be frags, got {first.type}, {second.type} and {t}")
            return
        if first.type.dtype != second.type.dtype or t.dtype != first.type.dtype:
            v.error(op, f"the element types differ: {first.type}, {second.type} and the result's {t}")
        elif t.size != first.type.size + second.type.size:
            v.error(op, f"the result's {t.size} values are not the operands' {first.type.size} + "
                        f"{second.type.size}")

    def result_types(self, operand_types, attrs):
        first, second = operand_types
        return [FragmentType(first.dtype, (first.size + second.size,))]

    def interpret(self, op, ix):
        ix.set(op.results[0], np.concatenate([ix.get(x) for x in op.operands], axis=1))

    def lower(self, op, lx):
        """No code: the result is the first operand's registers followed by the second's."""
        lx.set(op.results[0], list(lx.get(op.operands[0])) + list(lx.get(op.operands[1])))


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
        tv = tv_attr(op, v)
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
        try:
            plan = plan_reduce(tv, tile, mode)
        except ReducePlanError as exc:
            v.error(op, f"tv {lc.to_str(tv)} cannot be reduced over {'rows' if mode == 1 else 'columns'} of the "
                        f"{lc.to_str(tile)} tile: {exc}")
            return
        if plan.across_warps:
            self._verify_across_warps(op, v, tv, tile, mode)

    def _verify_across_warps(self, op, v, tv, tile, mode):
        """A line spanning warps is combined through shared memory behind a named barrier that counts every thread
        of the CTA: the TV's thread mode must be the CTA (whole warps)."""
        what = "row" if mode == 1 else "column"
        line = line_table(tv, tile, mode)
        warps = sorted(set((np.nonzero(line == line[0, 0])[0] // 32).tolist()))
        spread = f"{what} {int(line[0, 0])} spans warps {_ranges(warps)}"
        threads = lc.size(tv[0])
        block = getattr(v, "kernel_block", None)
        if threads % 32:
            v.error(op, f"{spread}, so every warp must be whole, but tv's thread mode {lc.to_str(tv[0])} has "
                        f"{threads} threads, not a multiple of 32")
        elif block is not None and threads != block:
            v.error(op, f"{spread}: a reduction across warps synchronizes the whole CTA, so tv's thread mode "
                        f"{lc.to_str(tv[0])} must have the block's {block} threads, not {threads}")

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def smem_scratch(self, op):
        """(bytes, align) of the partials of a reduction across warps (``ReducePlan.scratch_slots`` slots of the
        combining type: f32 for f16/bf16, else the element's), None for one within warps or a malformed op."""
        plan = _plan_of(op)
        if plan is None or not plan.across_warps:
            return None
        dtype = op.operands[0].type.dtype
        slot = 8 if dtype.bits == 64 else 4
        return plan.scratch_slots * slot, 16

    def interpret(self, op, ix):
        x, thread = op.operands
        tv = op.attrs["tv"]
        tile = op.attrs["tile"]
        if not ix.mask.all():
            plan = ix.cached(("reduce-plan", tv, tile, op.attrs["mode"]), lambda: _plan_of(op))
            if plan is not None and plan.across_warps:
                ix.fail(op, f"a reduction across warps needs every thread of the CTA, but only "
                            f"{describe_threads(np.nonzero(ix.mask)[0])} reach it (its barrier would wait forever)")
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
        """Per thread, reduce the values of each line (``reduce_plan.plan_reduce`` groups them, from tv and the
        tile); then a butterfly of shfl.sync.bfly over exactly the lane bits that move along the line without leaving
        it; a line spanning warps then goes through the op's shared-memory scratch: one lane per warp and line
        stores its partial, ``bar.sync id, threads`` (the CTA), every thread combines its line's partials (and,
        inside an scf.for, a second ``bar.sync`` before the next iteration may overwrite them). Every value of the
        line gets the result. Must be reached by whole warps (no divergent scf.if around it)."""
        x, thread = op.operands
        scratch = None
        if lx.smem_plan.address.get(id(op)) is not None:
            address, _align = lx.smem_address(op)
            scratch = (address, reduce_barrier_id(lx.kernel), in_loop(lx.kernel, op))
        lx.set(op.results[0], lx.frag_reduce(lx.get(x), thread, op.attrs["tv"], op.attrs["tile"],
                                             op.attrs["mode"], str(op.attrs["kind"]), x.type.dtype, scratch))


def _plan_of(op):
    """The ReducePlan of a well-formed frag.reduce (None when its attributes are not what the verifier accepts)."""
    tv, tile, mode = op.attrs.get("tv"), op.attrs.get("tile"), op.attrs.get("mode")
    if not is_tv(tv) or lc.rank(tv_parts(tv)[2]) != 2 or not isinstance(tile, tuple) or len(tile) != 2 \
            or mode not in (0, 1) or isinstance(mode, bool):
        return None
    try:
        return plan_reduce(tv, tile, mode)
    except (ReducePlanError, lc.LayoutError, ValueError, TypeError):
        return None


def _ranges(ids) -> str:
    """``0-15`` for consecutive ids, else a comma list: the warps of a message."""
    ids = sorted(ids)
    if len(ids) > 1 and ids[-1] - ids[0] + 1 == len(ids):
        return f"{ids[0]}-{ids[-1]}"
    return ", ".join(map(str, ids))


def reduce_barrier_id(kernel) -> int | None:
    """The named barrier (bar.sync id) the kernel's reductions across warps use: the highest id from 1 to 15 that
    no ``barrier.named`` of the kernel uses (a reduction's barrier counts the whole CTA, so all of them can share
    it: every thread reaches them in the same order). None when every id is taken."""
    from .roles import NAMED_BARRIERS

    taken = {op.attrs.get("id") for op in walk(kernel.body) if op.name in ("barrier.named", "barrier.arrive")}
    free = [i for i in range(NAMED_BARRIERS - 1, 0, -1) if i not in taken]
    return free[0] if free else None


def in_loop(kernel, target) -> bool:
    """Whether op ``target`` is nested (at any depth) in an ``scf.for`` of ``kernel``."""
    def visit(ops, looping):
        for op in ops:
            if op is target:
                return looping
            for region in op.regions:
                found = visit(region.ops, looping or op.name == "scf.for")
                if found is not None:
                    return found
        return None
    return bool(visit(kernel.body.ops, False))


@kernel_rule
def _reductions_across_warps(kernel, v):
    """A frag.reduce whose lines span warps synchronizes the CTA (a named barrier counting every thread): it must
    be reached by all of them, so it sits at the top level of the body or in scf.for loops (whose trip counts must
    then agree between threads: the interpreter checks that every thread reaches it), never in a branch
    (scf.if) or a warpgroup role (gpu.roles); and a named barrier id must be free for it."""
    try:
        block = launch.block_dims(kernel)
    except launch.LaunchAttributeError:
        block = None

    def visit(ops, around):
        for op in ops:
            if op.name == "frag.reduce":
                plan = _plan_of(op)
                thread = op.operands[1].owner if len(op.operands) == 2 else None
                if plan is not None and plan.across_warps and not (
                        thread is not None and thread.name == "gpu.thread_id" and str(thread.attrs.get("dim")) == "x"
                        and block is not None and block[1] == block[2] == 1):
                    v.error(op, "a reduction across warps indexes its scratch by the thread operand, which must be "
                                "gpu.thread_id {dim = x} of a block (N, 1, 1): each thread's own index")
                elif plan is not None and plan.across_warps and around:
                    v.error(op, f"a reduction across warps synchronizes the whole CTA, but it is inside "
                                f"{around.name} at {around.loc}, where not every thread of the CTA reaches it (its "
                                "barrier would wait forever)")
                elif plan is not None and plan.across_warps and reduce_barrier_id(kernel) is None:
                    v.error(op, "a reduction across warps needs a named barrier, but barrier.named uses every id "
                                "from 1 to 15")
            for region in op.regions:
                visit(region.ops, around if op.name == "scf.for" else (around or op))
    visit(kernel.body.ops, None)


@register
class Extract(OpDef):
    name = "frag.extract"
    summary = "one value of a fragment (its flat value order) as a per-thread scalar"
    required_attrs = ("index",)
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the operand must be a frag, not {x.type}")
            return
        if t != x.type.dtype:
            v.error(op, f"result type must be the fragment's element type {x.type.dtype}, not {t}")
        index = v.attr(op, "index", int)
        if index is not None and not 0 <= index < x.type.size:
            v.error(op, f"index {index} is outside the fragment's {x.type.size} values (0 … {x.type.size - 1})")

    def result_types(self, operand_types, attrs):
        return [operand_types[0].dtype]

    def interpret(self, op, ix):
        ix.set(op.results[0], ix.get(op.operands[0])[:, op.attrs["index"]].copy())

    def lower(self, op, lx):
        """No code: the value's register."""
        lx.set(op.results[0], lx.get(op.operands[0])[op.attrs["index"]])


@register
class Rcp(OpDef):
    name = "frag.rcp"
    summary = "elementwise reciprocal 1/x of an f32 fragment, approximate (rcp.approx.ftz.f32) or IEEE (rcp.rn.f32)"
    required_attrs = ("rounding",)
    ROUNDINGS = ("approx", "rn")
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (x,) = op.operands
        t = op.results[0].type
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the operand must be a frag, not {x.type}")
            return
        if x.type.dtype != F32:
            v.error(op, f"frag.rcp is defined for f32 fragments, not {x.type.dtype}: frag.cast to f32 first")
        if t != x.type:
            v.error(op, f"result type must be {x.type}, not {t}")
        v.word(op, "rounding", self.ROUNDINGS)

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def interpret(self, op, ix):
        """``rn``: 1/x correctly rounded. ``approx``: subnormal inputs and results flushed to signed zero (ftz),
        otherwise the correctly rounded 1/x (the hardware's is within 1 ulp of it)."""
        x = ix.get(op.operands[0]).astype(np.float32)
        tiny = np.finfo(np.float32).tiny
        if str(op.attrs["rounding"]) == "approx":
            x = np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x)
        with np.errstate(divide="ignore", over="ignore"):
            r = (np.float32(1) / x).astype(np.float32)
        if str(op.attrs["rounding"]) == "approx":
            r = np.where(np.abs(r) < tiny, np.copysign(np.float32(0), r), r).astype(np.float32)
        ix.set(op.results[0], r)

    def lower(self, op, lx):
        """``llvm.nvvm.rcp.approx.ftz.f`` (``rcp.approx.ftz.f32``) or ``llvm.nvvm.rcp.rn.f`` (``rcp.rn.f32``), one
        per distinct register: a reduction's result is one register per line, so a row's reciprocal is computed
        once (LLVM merges the calls on one value)."""
        name = "llvm.nvvm.rcp.approx.ftz.f" if str(op.attrs["rounding"]) == "approx" else "llvm.nvvm.rcp.rn.f"
        f32 = lx.llvm_type(F32)
        done = {}
        out = []
        for x in lx.get(op.operands[0]):
            if id(x) not in done:
                done[id(x)] = lx.call(name, f32, [x])
            out.append(done[id(x)])
        lx.set(op.results[0], out)


# -- coordinates and masking ---------------------------------------------------------------------------------------

def value_coordinates(ix, op, thread) -> np.ndarray:
    """The tile coordinate of each thread's values under ``op``'s ``tv`` and ``tile`` attributes (``frag.coords``,
    ``frag.mask_past``): an int64 array (threads of the CTA, values, modes of the tile)."""
    tv = op.attrs["tv"]
    table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
    return tile_coordinates(op.attrs["tile"], tv_rows(ix, op, thread, table))


@register
class Coords(OpDef):
    name = "frag.coords"
    summary = "each value's tile coordinate, one i32 fragment per tile mode, from the TV layout"
    required_attrs = ("tv", "tile")
    num_operands = 1
    num_results = None   # one per mode of the tile (checked by the rule)

    def verify(self, op, v):
        (thread,) = op.operands
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        tile = v.shape_attr(op, "tile")
        tv = tv_attr(op, v)
        if tile is None or tv is None:
            return
        modes = lc.rank(tile) if isinstance(tile, tuple) else 1
        if len(op.results) != modes:
            v.error(op, f"tile {lc.to_str(tile)} has {modes} mode{'s' if modes != 1 else ''}, so frag.coords gives "
                        f"{modes} fragment{'s' if modes != 1 else ''} (one per mode), not {len(op.results)}")
            return
        for r in op.results:
            if not isinstance(r.type, FragmentType) or r.type.dtype != I32:
                v.error(op, f"every result is an i32 fragment (frag<i32>[S]), not {r.type}")
                return
        shape = op.results[0].type.shape
        if any(r.type.shape != shape for r in op.results):
            v.error(op, f"the results' shapes differ: {', '.join(str(r.type) for r in op.results)}")
            return
        verify_tv(op, v, tv, shape, lc.product(tile))

    def result_types(self, operand_types, attrs):
        tile, tv = attrs["tile"], attrs["tv"]
        modes = lc.rank(tile) if isinstance(tile, tuple) else 1
        return [FragmentType(I32, lc.shape(tv[1]))] * modes

    def interpret(self, op, ix):
        (thread,) = op.operands
        coords = value_coordinates(ix, op, thread)
        for m, r in enumerate(op.results):
            ix.set(r, coords[:, :, m].astype(np.int32))

    def lower(self, op, lx):
        """Per mode, the coordinate's thread part once plus a constant per value (``plans.tile_coordinates``; a
        mode no thread moves is constants only), else each value's tile index decoded at run time."""
        (thread,) = op.operands
        for r, values in zip(op.results, lx.frag_coords(lx.get(thread), op.attrs["tv"], op.attrs["tile"])):
            lx.set(r, values)


@register
class FragCmp(OpDef):
    name = "frag.cmp"
    summary = "elementwise comparison of fragments (a scalar operand broadcasts): an i1 fragment"
    required_attrs = ("pred",)
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        a, b = op.operands
        t = op.results[0].type
        frags = [x.type for x in (a, b) if isinstance(x.type, FragmentType)]
        if not frags:
            v.error(op, "at least one operand must be a frag")
            return
        ref = frags[0]
        for x in (a, b):
            if isinstance(x.type, FragmentType) and x.type != ref:
                v.error(op, f"fragment operands differ: {ref} and {x.type}")
                return
            if not isinstance(x.type, FragmentType) and x.type != ref.dtype:
                v.error(op, f"a scalar operand must have the fragment's element type {ref.dtype}, not {x.type}")
                return
        v.word(op, "pred", tuple(Cmp.PREDICATES))
        want = FragmentType(I1, ref.shape)
        if t != want:
            v.error(op, f"result type must be {want}, not {t}")

    def result_types(self, operand_types, attrs):
        ref = next(t for t in operand_types if isinstance(t, FragmentType))
        return [FragmentType(I1, ref.shape)]

    def interpret(self, op, ix):
        a, b = (ix.get(x) if isinstance(x.type, FragmentType) else ix.get(x)[:, None] for x in op.operands)
        r = Cmp.PREDICATES[str(op.attrs["pred"])](a, b)
        ix.set(op.results[0], np.broadcast_to(r, (ix.nthreads, op.results[0].type.size)).copy())

    def lower(self, op, lx):
        t = op.results[0].type
        a, b = op.operands
        dtype = next(x.type for x in (a, b) if isinstance(x.type, FragmentType)).dtype
        xs, ys = (lx.get(x) if isinstance(x.type, FragmentType) else [lx.get(x)] * t.size for x in (a, b))
        pred = str(op.attrs["pred"])
        lx.set(op.results[0], [compare(lx, pred, x, y, dtype) for x, y in zip(xs, ys)])


@register
class FragSelect(OpDef):
    name = "frag.select"
    summary = "per value, a where the i1 fragment (or scalar) holds, else b (fragments or scalars of one type)"
    num_operands = 3
    num_results = 1

    def verify(self, op, v):
        p, a, b = op.operands
        t = op.results[0].type
        frags = [x.type for x in (a, b) if isinstance(x.type, FragmentType)]
        if not isinstance(t, FragmentType):
            v.error(op, f"result must be a frag, not {t}")
            return
        if isinstance(p.type, FragmentType):
            if p.type != FragmentType(I1, t.shape):
                v.error(op, f"the condition must be frag<i1> of the result's shape ({FragmentType(I1, t.shape)}) "
                            f"or an i1, not {p.type}")
        elif p.type != I1:
            v.error(op, f"the condition must be frag<i1> of the result's shape or an i1, not {p.type}")
        for x in (a, b):
            if isinstance(x.type, FragmentType) and x.type != t:
                v.error(op, f"operand %{x.name} is {x.type} but the result is {t}")
            elif not isinstance(x.type, FragmentType) and x.type != t.dtype:
                v.error(op, f"a scalar operand must have the result's element type {t.dtype}, not {x.type}")
        if not frags and not isinstance(p.type, FragmentType):
            v.error(op, "at least one operand must be a frag (arith.select chooses between scalars)")

    def result_types(self, operand_types, attrs):
        _p, a, b = operand_types
        return [a if isinstance(a, FragmentType) else b]

    def interpret(self, op, ix):
        t = op.results[0].type
        p, a, b = (ix.get(x) if isinstance(x.type, FragmentType) else ix.get(x)[:, None] for x in op.operands)
        ix.set(op.results[0], np.broadcast_to(np.where(p, a, b), (ix.nthreads, t.size)).copy())

    def lower(self, op, lx):
        t = op.results[0].type
        p, a, b = (lx.get(x) if isinstance(x.type, FragmentType) else [lx.get(x)] * t.size for x in op.operands)
        lx.set(op.results[0], [lx.b.select(c, x, y) for c, x, y in zip(p, a, b)])


@register
class MaskPast(OpDef):
    """``%y = frag.mask_past %x, %thread, %limit, %fill {tv = TV, tile = (R, C), slope = k}``: ``%x`` with every
    value whose tile coordinate (row, col) — as ``frag.coords`` gives it for ``%thread``, ``tv`` and the two-mode
    ``tile`` — lies past the column limit, ``col > limit + k·row``, replaced by ``%fill``; the others unchanged.
    The masks of attention: causal (``k = 1``, ``limit`` = the diagonal's offset) and the key bound of a ragged
    tile (``k = 0``, ``limit`` = the last valid column). E.g. over the m64n8 accumulator
    ``((4,8,4),(2,2,1)):((128,1,16),(64,8,512))`` with ``limit = 0, slope = 1``, the values above the diagonal of
    the (64, 8) tile become ``%fill``. Lowered without a compare per value where the TV layout splits into a thread
    part and a constant per value and each row's columns are runs of ``w`` at a power-of-two stride (the wgmma
    accumulators: pairs every 8 columns): per row a count of visible values and a bit mask, then per value a bit
    test (ptxas: R2P, 7 predicates per instruction) and a select. The lowering computes in i32: |limit| +
    |slope|·(R − 1) + C must stay below 2^31 (the interpreter fails otherwise). Post: the result has ``%x``'s
    type."""
    name = "frag.mask_past"
    summary = "values past a per-row column limit (col > limit + slope·row) replaced by a fill value"
    required_attrs = ("tv", "tile")
    optional_attrs = ("slope",)
    num_operands = 4
    num_results = 1

    def verify(self, op, v):
        x, thread, limit, fill = op.operands
        t = op.results[0].type
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the masked operand must be a frag, not {x.type}")
            return
        if t != x.type:
            v.error(op, f"result type must be {x.type}, not {t}")
        for value, what in ((thread, "thread"), (limit, "limit")):
            if value.type != I32:
                v.error(op, f"the {what} operand must be i32, not {value.type}")
        if fill.type != x.type.dtype:
            v.error(op, f"the fill operand must be a scalar of the fragment's element type {x.type.dtype}, "
                        f"not {fill.type}")
        if "slope" in op.attrs:
            v.attr(op, "slope", int)
        tile = v.shape_attr(op, "tile")
        tv = tv_attr(op, v)
        if tile is None or tv is None:
            return
        if not isinstance(tile, tuple) or lc.rank(tile) != 2:
            v.error(op, f"tile {lc.to_str(tile)} must have two modes (rows, columns)")
            return
        verify_tv(op, v, tv, x.type.shape, lc.product(tile))

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def interpret(self, op, ix):
        x, thread, limit, fill = op.operands
        coords = value_coordinates(ix, op, thread)
        slope, limits = int(op.attrs.get("slope", 0)), ix.get(limit).astype(np.int64)
        rows, cols = (lc.product(m) for m in op.attrs["tile"])
        reach = np.abs(limits) + abs(slope) * (rows - 1) + cols
        if (ix.mask & (reach >= 2 ** 31)).any():
            first = int(np.nonzero(ix.mask & (reach >= 2 ** 31))[0][0])
            ix.fail(op, f"thread {first}'s limit {int(limits[first])} with slope {slope} over the ({rows}, {cols}) "
                        f"tile leaves i32: |limit| + |slope|·{rows - 1} + {cols} must stay below 2^31")
        bound = limits[:, None] + slope * coords[:, :, 0]
        past = coords[:, :, 1] > bound
        values = ix.get(x)
        ix.set(op.results[0], np.where(past, ix.get(fill)[:, None], values).astype(values.dtype))

    def lower(self, op, lx):
        """``LoweringContext.mask_past``: per row a bit mask of its visible values and per value a bit test, or
        (a layout whose columns are not regular runs) a compare of each value's constant column offset."""
        x, thread, limit, fill = op.operands
        lx.set(op.results[0], lx.mask_past(lx.get(x), lx.get(thread), lx.get(limit), lx.get(fill), op.attrs["tv"],
                                           op.attrs["tile"], int(op.attrs.get("slope", 0))))
