"""Every op of the tile IR, each defined once: operands, result types, verifier rule and interpreter meaning.

An op definition is a class registered under the op's name. ``verify(op, v)`` checks the op against the rules of
``spec/tile-ir.md`` through the verifier's helpers; ``result_types(...)`` gives the builder the types of its results;
``interpret(op, ix)`` executes it on the CPU interpreter's state ``ix`` (all threads of a CTA at once: a scalar is a
numpy array over threads, a fragment an array of shape (threads, values)). The definitions depend on no module
further down the pipeline: the verifier and the interpreter pass themselves in.
"""
from __future__ import annotations

import numpy as np

import layoutc as lc

from .types import (
    F32, I1, I32, SCALARS, FragmentType, GlobalTensorType, GlobalViewType, ScalarType,
)

OPS: dict = {}


def register(cls):
    """Class decorator: instantiate the definition and register it under ``cls.name``.

    Pre: the class defines its verifier rule and its interpreter meaning (``verify`` and ``interpret``).
    """
    inst = cls()
    if inst.name in OPS:
        raise ValueError(f"op {inst.name} defined twice")
    for method in ("verify", "interpret"):
        if not callable(getattr(inst, method, None)):
            raise TypeError(f"op {inst.name} does not define {method}")
    OPS[inst.name] = inst
    return cls


def lookup(name: str):
    """The definition of op ``name`` (KeyError if none)."""
    return OPS[name]


class OpDef:
    """Base of op definitions. ``name``: the op's text name; ``summary``: one line for the spec.

    Subclasses define ``verify(op, v)``, ``interpret(op, ix)`` and, where the builder can infer them,
    ``result_types(operand_types, attrs)``.
    """

    name = ""
    summary = ""


# -- helpers ---------------------------------------------------------------------------------------------------

INT_TYPES = tuple(SCALARS[n] for n in ("i32", "u32", "i64", "u64"))
NUM_TYPES = INT_TYPES + tuple(SCALARS[n] for n in ("f16", "bf16", "f32"))


def numpy_dtype(t: ScalarType):
    """The numpy type the interpreter computes ``t`` in (narrow floats are computed in f32 after rounding)."""
    return {
        "i1": np.bool_, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
        "f32": np.float32, "f16": np.float32, "bf16": np.float32, "e4m3": np.float32, "e5m2": np.float32,
    }[t.name]


def round_to(values, t: ScalarType):
    """Round float values to the precision of ``t`` (nearest even), kept in float32: bf16 keeps 8 mantissa bits."""
    x = np.asarray(values, dtype=np.float32)
    if t.name == "f16":
        return x.astype(np.float16).astype(np.float32)
    if t.name == "bf16":
        bits = x.view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        out = rounded.astype(np.uint32).view(np.float32)
        return np.where(np.isnan(x), x, out)
    if t.name in ("e4m3", "e5m2"):
        mant = 3 if t.name == "e4m3" else 2
        m, e = np.frexp(x.astype(np.float64))
        scale = 2.0 ** (mant + 1)
        q = np.round(m * scale) / scale
        out = np.ldexp(q, e)
        limit = 448.0 if t.name == "e4m3" else 57344.0
        return np.clip(out, -limit, limit).astype(np.float32)
    return x


def convert(values, src: ScalarType, dst: ScalarType):
    """``arith.cast`` semantics on numpy arrays: float→int truncates toward zero, narrow floats round to nearest."""
    x = np.asarray(values)
    if dst.kind == "pred":
        return x != 0
    if dst.is_float:
        return round_to(x.astype(np.float64), dst)
    if src.is_float:
        x = np.trunc(x.astype(np.float64))
    with np.errstate(over="ignore"):
        return x.astype(np.int64).astype(numpy_dtype(dst))


def tile_coordinates(shape) -> np.ndarray:
    """For a tile shape of rank R, an (size, R) array: row i is the per-mode coordinate of the tile's i-th element
    (colexicographic; a nested mode's coordinate is linearised within that mode)."""
    modes = shape if isinstance(shape, tuple) else (shape,)
    sizes = [lc.product(m) for m in modes]
    total = int(np.prod(sizes))
    idx = np.arange(total)
    out = np.empty((total, len(sizes)), dtype=np.int64)
    for k, s in enumerate(sizes):
        out[:, k] = idx % s
        idx = idx // s
    return out


def tv_table(tv: lc.Layout, threads: int) -> np.ndarray:
    """(threads, values) array of ``tv(t, v)``: the tile index of each thread's values."""
    nvals = lc.size(tv[1])
    table = np.empty((threads, nvals), dtype=np.int64)
    for t in range(threads):
        for v in range(nvals):
            table[t, v] = tv((t, v))
    return table


def is_layout(x) -> bool:
    return isinstance(x, lc.Layout)


# -- constants and arithmetic -----------------------------------------------------------------------------------

@register
class Const(OpDef):
    name = "arith.const"
    summary = "a constant scalar"

    def verify(self, op, v):
        v.operands(op, 0)
        (t,) = v.results(op, 1)
        v.scalar(op, t, "result")
        value = v.attr(op, "value", (int, float, bool))
        if t.is_int and not isinstance(value, int):
            v.error(op, f"value {value!r} is not an integer but the type is {t}")
        if t.is_int and isinstance(value, int) and not isinstance(value, bool):
            lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.kind == "int" else (0, (1 << t.bits) - 1)
            if not lo <= value <= hi:
                v.error(op, f"value {value} does not fit {t} ([{lo}, {hi}])")

    def interpret(self, op, ix):
        t = op.results[0].type
        value = op.attrs["value"]
        ix.set(op.results[0], np.full(ix.nthreads, convert(np.array(value), F32 if isinstance(value, float) else I32
                                                                 if not isinstance(value, bool) else I1, t)))


class _Binary(OpDef):
    fn = None
    int_only = False

    def verify(self, op, v):
        a, b = v.operands(op, 2)
        (t,) = v.results(op, 1)
        allowed = INT_TYPES + (I1,) if self.int_only else NUM_TYPES
        if a.type not in allowed:
            v.error(op, f"operand type {a.type} is not one of {', '.join(map(str, allowed))}")
        v.same_type(op, [a.type, b.type, t], "operands and result")

    def result_types(self, operand_types, attrs):
        return [operand_types[0]]

    def interpret(self, op, ix):
        a, b = (ix.get(x) for x in op.operands)
        t = op.results[0].type
        with np.errstate(all="ignore"):
            r = self.compute(a, b, t)
        ix.set(op.results[0], round_to(r, t) if t.is_float else r.astype(numpy_dtype(t)))


def _binary(name, compute, int_only=False):
    cls = type(name.replace(".", "_").title(), (_Binary,), {
        "name": name, "summary": f"elementwise {name.split('.')[1]} of two scalars", "int_only": int_only,
        "compute": staticmethod(compute)})
    register(cls)
    return cls


def _int_div(a, b, t):
    if t.is_float:
        return a / b
    q = np.abs(a.astype(np.int64)) // np.maximum(np.abs(b.astype(np.int64)), 1)
    return np.where((a < 0) != (b < 0), -q, q)


def _int_rem(a, b, t):
    if t.is_float:
        return np.fmod(a, b)
    return a.astype(np.int64) - _int_div(a, b, t) * b.astype(np.int64)


_binary("arith.add", lambda a, b, t: a + b)
_binary("arith.sub", lambda a, b, t: a - b)
_binary("arith.mul", lambda a, b, t: a * b)
_binary("arith.div", _int_div)
_binary("arith.rem", _int_rem)
_binary("arith.min", lambda a, b, t: np.minimum(a, b))
_binary("arith.max", lambda a, b, t: np.maximum(a, b))
_binary("arith.and", lambda a, b, t: a & b, int_only=True)
_binary("arith.or", lambda a, b, t: a | b, int_only=True)
_binary("arith.xor", lambda a, b, t: a ^ b, int_only=True)
_binary("arith.shl", lambda a, b, t: a << b, int_only=True)
_binary("arith.shr", lambda a, b, t: a >> b, int_only=True)


@register
class CDiv(_Binary):
    name = "arith.cdiv"
    summary = "ceiling division of integers"
    int_only = True

    def verify(self, op, v):
        super().verify(op, v)
        if op.operands and op.operands[0].type == I1:
            v.error(op, "cdiv of predicates")

    @staticmethod
    def compute(a, b, t):
        return -((-a.astype(np.int64)) // b.astype(np.int64))


@register
class Cmp(OpDef):
    name = "arith.cmp"
    summary = "compare two scalars"
    PREDICATES = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                  "gt": np.greater, "ge": np.greater_equal}

    def verify(self, op, v):
        a, b = v.operands(op, 2)
        (t,) = v.results(op, 1)
        v.same_type(op, [a.type, b.type], "operands")
        v.scalar(op, a.type, "operand")
        if t != I1:
            v.error(op, f"result type must be i1, not {t}")
        pred = v.word(op, "pred", tuple(self.PREDICATES))

    def result_types(self, operand_types, attrs):
        return [I1]

    def interpret(self, op, ix):
        a, b = (ix.get(x) for x in op.operands)
        ix.set(op.results[0], self.PREDICATES[str(op.attrs["pred"])](a, b))


@register
class Select(OpDef):
    name = "arith.select"
    summary = "choose between two scalars by a predicate"

    def verify(self, op, v):
        p, a, b = v.operands(op, 3)
        (t,) = v.results(op, 1)
        if p.type != I1:
            v.error(op, f"the condition must be i1, not {p.type}")
        v.same_type(op, [a.type, b.type, t], "choices and result")

    def result_types(self, operand_types, attrs):
        return [operand_types[1]]

    def interpret(self, op, ix):
        p, a, b = (ix.get(x) for x in op.operands)
        ix.set(op.results[0], np.where(p, a, b))


@register
class Cast(OpDef):
    name = "arith.cast"
    summary = "convert a scalar to another scalar type"

    def verify(self, op, v):
        (a,) = v.operands(op, 1)
        (t,) = v.results(op, 1)
        v.scalar(op, a.type, "operand")
        v.scalar(op, t, "result")

    def interpret(self, op, ix):
        a = op.operands[0]
        ix.set(op.results[0], convert(ix.get(a), a.type, op.results[0].type))


# -- thread and block indices -------------------------------------------------------------------------------------

class _Index(OpDef):
    has_dim = True

    def verify(self, op, v):
        v.operands(op, 0)
        (t,) = v.results(op, 1)
        if t != I32:
            v.error(op, f"result type must be i32, not {t}")
        if self.has_dim:
            v.word(op, "dim", ("x", "y", "z"))

    def result_types(self, operand_types, attrs):
        return [I32]

    def interpret(self, op, ix):
        dim = "xyz".index(str(op.attrs["dim"])) if self.has_dim else 0
        ix.set(op.results[0], self.compute(ix, dim).astype(np.int32))


def _index(name, compute, has_dim=True, summary=""):
    cls = type(name.replace(".", "_").title(), (_Index,), {
        "name": name, "summary": summary, "has_dim": has_dim, "compute": staticmethod(compute)})
    register(cls)


_index("gpu.thread_id", lambda ix, d: ix.thread_index[d], summary="the thread's index in the CTA")
_index("gpu.block_id", lambda ix, d: np.full(ix.nthreads, ix.block_index[d]), summary="the CTA's index in the grid")
_index("gpu.block_dim", lambda ix, d: np.full(ix.nthreads, ix.block_dim[d]), summary="threads per CTA")
_index("gpu.grid_dim", lambda ix, d: np.full(ix.nthreads, ix.grid_dim[d]), summary="CTAs per grid")
_index("gpu.lane_id", lambda ix, d: ix.linear_thread % 32, has_dim=False, summary="the lane in the warp")
_index("gpu.warp_id", lambda ix, d: ix.linear_thread // 32, has_dim=False, summary="the warp in the CTA")
_index("gpu.warpgroup_id", lambda ix, d: ix.linear_thread // 128, has_dim=False,
       summary="the warpgroup (4 warps) in the CTA")


# -- structured control flow --------------------------------------------------------------------------------------

@register
class For(OpDef):
    name = "scf.for"
    summary = "a counted loop with loop-carried values"

    def verify(self, op, v):
        if len(op.operands) < 3:
            v.error(op, f"expects lower bound, upper bound and step (and initial carried values), got "
                        f"{len(op.operands)} operands")
            return
        lo, hi, step, *inits = op.operands
        for name, x in (("lower bound", lo), ("upper bound", hi), ("step", step)):
            if x.type != I32:
                v.error(op, f"the {name} must be i32, not {x.type}")
        unroll = op.attrs.get("unroll", 1)
        if not isinstance(unroll, int) or isinstance(unroll, bool) or unroll < 1:
            v.error(op, f"unroll must be an integer >= 1, not {unroll!r}")
        v.results(op, len(inits))
        region = v.regions(op, 1)[0]
        if region is None:
            return
        if len(region.args) != 1 + len(inits):
            v.error(op, f"the body needs {1 + len(inits)} block arguments (the induction variable and one per "
                        f"carried value), got {len(region.args)}")
            return
        if region.args[0].type != I32:
            v.error(op, f"the induction variable must be i32, not {region.args[0].type}")
        for k, (init, arg, res) in enumerate(zip(inits, region.args[1:], op.results)):
            if not init.type == arg.type == res.type:
                v.error(op, f"carried value {k}: initial {init.type}, block argument {arg.type} and result "
                            f"{res.type} must be the same type")
        v.yields(op, region, [r.type for r in op.results], optional=not op.results)

    def interpret(self, op, ix):
        lo, hi, step, *inits = op.operands
        lo_v, hi_v, step_v = (ix.uniform(x, op) for x in (lo, hi, step))
        if step_v <= 0:
            ix.fail(op, f"step {step_v} is not positive")
        region = op.regions[0]
        carried = [ix.get(x) for x in inits]
        i = lo_v
        while i < hi_v:
            ix.set(region.args[0], np.full(ix.nthreads, i, dtype=np.int32))
            for arg, val in zip(region.args[1:], carried):
                ix.set(arg, val)
            carried = ix.run_region(region)
            i += step_v
        for res, val in zip(op.results, carried):
            ix.set(res, val)


@register
class If(OpDef):
    name = "scf.if"
    summary = "a two-way branch, per thread"

    def verify(self, op, v):
        (p,) = v.operands(op, 1)
        if p.type != I1:
            v.error(op, f"the condition must be i1, not {p.type}")
        if len(op.regions) not in (1, 2):
            v.error(op, f"expects a then region and an optional else region, got {len(op.regions)}")
            return
        if op.results and len(op.regions) != 2:
            v.error(op, "an scf.if with results needs an else region")
        for region in op.regions:
            if region.args:
                v.error(op, "the regions of scf.if take no block arguments")
            v.yields(op, region, [r.type for r in op.results], optional=not op.results)

    def interpret(self, op, ix):
        p = ix.get(op.operands[0]).astype(bool)
        then_vals = ix.run_region(op.regions[0], mask=p)
        else_vals = ix.run_region(op.regions[1], mask=~p) if len(op.regions) == 2 else []
        for k, res in enumerate(op.results):
            a, b = then_vals[k], else_vals[k]
            cond = p.reshape((-1,) + (1,) * (np.ndim(a) - 1))
            ix.set(res, np.where(cond, a, b))


@register
class Yield(OpDef):
    name = "scf.yield"
    summary = "the values a region of scf.for / scf.if hands back"

    def verify(self, op, v):
        v.results(op, 0)  # placement and types are checked by the parent op

    def interpret(self, op, ix):
        ix.yielded = [ix.get(x) for x in op.operands]


# -- global tensors and tiles -------------------------------------------------------------------------------------

@register
class GDim(OpDef):
    name = "gtensor.dim"
    summary = "the runtime extent of a mode of a global tensor"

    def verify(self, op, v):
        (x,) = v.operands(op, 1)
        (t,) = v.results(op, 1)
        if not isinstance(x.type, GlobalTensorType):
            v.error(op, f"operand must be a gtensor, not {x.type}")
            return
        mode = v.attr(op, "mode", int)
        if isinstance(mode, int) and not 0 <= mode < x.type.rank:
            v.error(op, f"mode {mode} is out of range for rank {x.type.rank}")
        if t != I32:
            v.error(op, f"result type must be i32, not {t}")

    def result_types(self, operand_types, attrs):
        return [I32]

    def interpret(self, op, ix):
        arr = ix.get(op.operands[0])
        ix.set(op.results[0], np.full(ix.nthreads, arr.shape[op.attrs["mode"]], dtype=np.int32))


class TileView:
    """Interpreter value of a gview: the global array, the per-thread origin coordinates and the tile shape."""

    def __init__(self, array, origin, shape):
        self.array = array
        self.origin = origin  # (threads, rank) int64
        self.shape = shape


@register
class GTile(OpDef):
    name = "gmem.tile"
    summary = "a static-shape window of a global tensor at a runtime origin"

    def verify(self, op, v):
        if not op.operands:
            v.error(op, "expects a gtensor and one origin coordinate per mode")
            return
        x, *coords = op.operands
        (t,) = v.results(op, 1)
        if not isinstance(x.type, GlobalTensorType):
            v.error(op, f"the first operand must be a gtensor, not {x.type}")
            return
        if len(coords) != x.type.rank:
            v.error(op, f"a rank-{x.type.rank} gtensor needs {x.type.rank} origin coordinates, got {len(coords)}")
        for c in coords:
            if c.type != I32:
                v.error(op, f"origin coordinates must be i32, not {c.type}")
        shape = v.shape_attr(op, "shape")
        if shape is None:
            return
        if lc.rank(shape) != x.type.rank:
            v.error(op, f"tile shape {lc.to_str(shape)} has rank {lc.rank(shape)} but the gtensor has rank "
                        f"{x.type.rank}")
        if t != GlobalViewType(x.type.dtype, shape):
            v.error(op, f"result type must be {GlobalViewType(x.type.dtype, shape)}, not {t}")

    def result_types(self, operand_types, attrs):
        return [GlobalViewType(operand_types[0].dtype, attrs["shape"])]

    def interpret(self, op, ix):
        x, *coords = op.operands
        origin = np.stack([ix.get(c).astype(np.int64) for c in coords], axis=1)
        ix.set(op.results[0], TileView(ix.get(x), origin, op.attrs["shape"]))


def _verify_tv(op, v, tv, fragment_shape, tile_size, what="tile"):
    """The rules shared by every op that distributes a tile over threads with a TV layout."""
    if not is_layout(tv):
        v.error(op, "tv must be a layout (threads, values)")
        return False
    if lc.rank(tv) != 2:
        v.error(op, f"tv {lc.to_str(tv)} must have rank 2: (threads, values)")
        return False
    if lc.size(tv[1]) != lc.product(fragment_shape):
        v.error(op, f"tv's value mode {lc.to_str(tv[1])} has {lc.size(tv[1])} values but the fragment "
                    f"{lc.to_str(fragment_shape)} has {lc.product(fragment_shape)}")
        return False
    image = [tv(i) for i in range(lc.size(tv))]
    if min(image) < 0 or max(image) >= tile_size:
        v.error(op, f"tv {lc.to_str(tv)} reaches index {max(image)} outside the {what} of {tile_size} elements")
        return False
    return True


class _GmemAccess(OpDef):
    def _check_view_and_thread(self, op, v, view, thread):
        if not isinstance(view.type, GlobalViewType):
            v.error(op, f"the first operand must be a gview, not {view.type}")
            return False
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        return True

    @staticmethod
    def _addresses(ix, op, view: TileView, thread, tv):
        """Per (thread, value): global coordinates and whether they are in bounds."""
        table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
        t = ix.get(thread).astype(np.int64)
        if np.any((t < 0) | (t >= table.shape[0])):
            ix.fail(op, f"thread operand outside tv's thread mode of {table.shape[0]} threads")
        tile_idx = table[t]  # (threads, values)
        coords = ix.cached(("coords", view.shape), lambda: tile_coordinates(view.shape))[tile_idx]
        glob = view.origin[:, None, :] + coords  # (threads, values, rank)
        inside = np.all((glob >= 0) & (glob < np.array(view.array.shape)), axis=-1)
        return glob, inside


@register
class GLoad(_GmemAccess):
    name = "gmem.load"
    summary = "each thread reads its values of a global tile (out-of-bounds values read `other`)"

    def verify(self, op, v):
        view, thread = v.operands(op, 2)
        (t,) = v.results(op, 1)
        if not self._check_view_and_thread(op, v, view, thread):
            return
        if not isinstance(t, FragmentType):
            v.error(op, f"result must be a frag, not {t}")
            return
        if t.dtype != view.type.dtype:
            v.error(op, f"fragment element type {t.dtype} differs from the tile's {view.type.dtype}")
        tv = v.attr(op, "tv", lc.Layout)
        if tv is not None:
            _verify_tv(op, v, tv, t.shape, view.type.size)
        if "other" in op.attrs and not isinstance(op.attrs["other"], (int, float)):
            v.error(op, f"other must be a number, not {op.attrs['other']!r}")

    def interpret(self, op, ix):
        view, thread = op.operands
        tile = ix.get(view)
        glob, inside = self._addresses(ix, op, tile, thread, op.attrs["tv"])
        safe = np.where(inside[..., None], glob, 0)
        values = tile.array[tuple(safe[..., k] for k in range(safe.shape[-1]))]
        dtype = op.results[0].type.dtype
        other = convert(np.array(op.attrs.get("other", 0)), F32, dtype)
        ix.set(op.results[0], np.where(inside, values, other).astype(numpy_dtype(dtype)))


@register
class GStore(_GmemAccess):
    name = "gmem.store"
    summary = "each thread writes its values of a global tile (out-of-bounds values are skipped)"

    def verify(self, op, v):
        view, thread, frag = v.operands(op, 3)
        v.results(op, 0)
        if not self._check_view_and_thread(op, v, view, thread):
            return
        if not isinstance(frag.type, FragmentType):
            v.error(op, f"the stored value must be a frag, not {frag.type}")
            return
        if frag.type.dtype != view.type.dtype:
            v.error(op, f"fragment element type {frag.type.dtype} differs from the tile's {view.type.dtype}")
        tv = v.attr(op, "tv", lc.Layout)
        if tv is not None:
            _verify_tv(op, v, tv, frag.type.shape, view.type.size)

    def interpret(self, op, ix):
        view, thread, frag = op.operands
        tile = ix.get(view)
        glob, inside = self._addresses(ix, op, tile, thread, op.attrs["tv"])
        write = inside & ix.mask[:, None]
        values = ix.get(frag)
        idx = tuple(glob[..., k][write] for k in range(glob.shape[-1]))
        tile.array[idx] = values[write]


# -- fragments ------------------------------------------------------------------------------------------------------

class _FragElementwise(OpDef):
    arity = 2
    float_only = False

    def verify(self, op, v):
        xs = v.operands(op, self.arity)
        (t,) = v.results(op, 1)
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
        with np.errstate(all="ignore"):
            r = self.compute(*[np.asarray(a, dtype=np.float64) if t.dtype.is_float else a for a in args])
        r = round_to(r, t.dtype) if t.dtype.is_float else np.asarray(r).astype(numpy_dtype(t.dtype))
        ix.set(op.results[0], np.broadcast_to(r, (ix.nthreads, t.size)).copy())


def _frag_op(name, arity, compute, float_only=False):
    cls = type(name.replace(".", "_").title(), (_FragElementwise,), {
        "name": name, "arity": arity, "float_only": float_only, "compute": staticmethod(compute),
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

    def verify(self, op, v):
        (x,) = v.operands(op, 1)
        (t,) = v.results(op, 1)
        if not isinstance(x.type, FragmentType) or not isinstance(t, FragmentType):
            v.error(op, f"operand and result must be frags, got {x.type} and {t}")
            return
        if x.type.shape != t.shape:
            v.error(op, f"shapes differ: {lc.to_str(x.type.shape)} and {lc.to_str(t.shape)}")

    def interpret(self, op, ix):
        x = op.operands[0]
        ix.set(op.results[0], convert(ix.get(x), x.type.dtype, op.results[0].type.dtype))


@register
class Splat(OpDef):
    name = "frag.splat"
    summary = "a fragment whose values all equal a scalar"

    def verify(self, op, v):
        (x,) = v.operands(op, 1)
        (t,) = v.results(op, 1)
        if not isinstance(t, FragmentType):
            v.error(op, f"result must be a frag, not {t}")
            return
        if x.type != t.dtype:
            v.error(op, f"the scalar's type {x.type} differs from the fragment's element type {t.dtype}")

    def interpret(self, op, ix):
        t = op.results[0].type
        ix.set(op.results[0], np.repeat(ix.get(op.operands[0])[:, None], t.size, axis=1))


@register
class Reduce(OpDef):
    name = "frag.reduce"
    summary = "replace each value by the reduction over its tile row (or column), across values and threads"
    KINDS = {"add": np.add, "max": np.maximum, "min": np.minimum}

    def verify(self, op, v):
        x, thread = v.operands(op, 2)
        (t,) = v.results(op, 1)
        if not isinstance(x.type, FragmentType):
            v.error(op, f"the reduced operand must be a frag, not {x.type}")
            return
        if thread.type != I32:
            v.error(op, f"the thread operand must be i32, not {thread.type}")
        if t != x.type:
            v.error(op, f"result type must be {x.type}, not {t}")
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
            v.error(op, f"mode must be 0 (columns) or 1 (rows), not {mode!r}")
            return
        if not _verify_tv(op, v, tv, x.type.shape, lc.product(tile)):
            return
        image = sorted(tv(i) for i in range(lc.size(tv)))
        if image != list(range(lc.product(tile))):
            v.error(op, f"tv {lc.to_str(tv)} must hold every element of the {lc.to_str(tile)} tile exactly once")
            return
        rows = lc.product(tile[0])
        line_of = (lambda i: i % rows) if mode == 1 else (lambda i: i // rows)
        threads_of = {}
        for t_ in range(lc.size(tv[0])):
            for val in range(lc.size(tv[1])):
                threads_of.setdefault(line_of(tv((t_, val))), set()).add(t_ // 32)
        for line, warps in threads_of.items():
            if len(warps) > 1:
                what = "row" if mode == 1 else "column"
                v.error(op, f"{what} {line} is spread over warps {sorted(warps)}: a reduction must stay inside one "
                            f"warp (it lowers to shuffles)")
                return

    def interpret(self, op, ix):
        x, thread = op.operands
        tv = op.attrs["tv"]
        tile = op.attrs["tile"]
        rows = lc.product(tile[0])
        table = ix.cached(("tv", tv), lambda: tv_table(tv, lc.size(tv[0])))
        t = ix.get(thread).astype(np.int64)
        idx = table[t]
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
