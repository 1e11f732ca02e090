"""Every op of the tile IR, each defined once (one module per dialect): operands, result types, verifier rule and interpreter meaning.

An op definition is a class registered under the op's name. ``verify(op, v)`` checks the op against the rules of
``spec/tile-ir.md`` through the verifier's helpers; ``result_types(...)`` gives the builder the types of its results;
``interpret(op, ix)`` executes it on the CPU interpreter's state ``ix`` (all threads of a CTA at once: a scalar is a
numpy array over threads, a fragment an array of shape (threads, values)). The definitions depend on no module
further down the pipeline: the verifier and the interpreter pass themselves in.
"""
from __future__ import annotations

import abc
import functools

import numpy as np

import layoutc as lc

from ..layout_table import layout_values, tv_index, tv_parts  # noqa: F401  (the ops' tables)
from ..suggest import did_you_mean
from ..text import attribute_text
from ..types import SCALARS, ScalarType

OPS: dict = {}


def register(cls):
    """Class decorator: instantiate the definition and register it under ``cls.name``.

    Pre: the class defines its verifier rule and its interpreter meaning (``verify`` and ``interpret``) and
    declares its attribute keys (``required_attrs``, ``optional_attrs``: tuples of names, disjoint).
    """
    inst = cls()
    if inst.name in OPS:
        raise ValueError(f"op {inst.name} defined twice")
    for method in ("verify", "interpret"):
        if not callable(getattr(inst, method, None)):
            raise TypeError(f"op {inst.name} does not define {method}")
    for keys in (inst.required_attrs, inst.optional_attrs):
        if not isinstance(keys, tuple) or not all(isinstance(k, str) for k in keys):
            raise TypeError(f"op {inst.name}: required_attrs and optional_attrs are tuples of attribute names")
    if set(inst.required_attrs) & set(inst.optional_attrs):
        raise ValueError(f"op {inst.name} declares {set(inst.required_attrs) & set(inst.optional_attrs)} both "
                         "required and optional")
    OPS[inst.name] = inst
    return cls


class OpDef:
    """Base of op definitions. ``name``: the op's text name; ``summary``: one line for the spec;
    ``required_attrs`` / ``optional_attrs``: every attribute key the op knows (the verifier refuses any other key
    before the op's rule runs, ``attribute_key_problems``); ``num_operands`` / ``num_results``: the op's signature,
    the exact counts the verifier checks before the rule (``arith.add %a, %b, %c`` → ``expects 2 operands, got 3``,
    and the rule does not run); None where the rule checks the operands itself (variadic ops: scf.for, tma.load).

    Subclasses define ``verify(op, v)``, ``interpret(op, ix)`` and, where the builder can infer them,
    ``result_types(operand_types, attrs)``.
    """

    name = ""
    summary = ""
    required_attrs: tuple = ()
    optional_attrs: tuple = ()
    num_operands: int | None = None
    num_results: int | None = None


def attribute_key_problems(definition: OpDef, op) -> list:
    """What is wrong with the attribute KEYS of ``op`` (its values are the op rule's business): each key the
    definition does not declare, with a did-you-mean among the declared keys it lacks, and each required key that is
    missing and not explained by such a misspelling.

    ``pipeline.acquire %p, %k {byte = 32768}`` → ``["unknown attribute 'byte' (did you mean 'bytes'?)"]``;
    ``wgmma.wait {pending = 0, read = true}`` → ``["unknown attribute 'read' (wgmma.wait takes pending)"]``. Post: empty iff every key is declared and every required key is present.
    """
    known = definition.required_attrs + definition.optional_attrs
    absent = [k for k in known if k not in op.attrs]
    problems, explained = [], set()
    for key in op.attrs:
        if key in known:
            continue
        hint = did_you_mean(key, absent)
        explained.update(k for k in absent if f"'{k}'" in hint)
        if not hint:
            hint = f" ({op.name} takes {', '.join(known)})" if known else f" ({op.name} takes no attributes)"
        problems.append(f"unknown attribute '{key}'{hint}")
    for key in definition.required_attrs:
        if key not in op.attrs and key not in explained:
            problems.append(f"missing attribute '{key}'")
    return problems


# -- helpers ---------------------------------------------------------------------------------------------------

INT_TYPES = tuple(SCALARS[n] for n in ("i32", "u32", "i64", "u64"))
NUM_TYPES = INT_TYPES + tuple(SCALARS[n] for n in ("f16", "bf16", "f32"))


def numpy_dtype(t: ScalarType):
    """The numpy type the interpreter computes ``t`` in (narrow floats are computed in f32 after rounding)."""
    return {
        "i1": np.bool_, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
        "f32": np.float32, "f16": np.float32, "bf16": np.float32, "e4m3": np.float32, "e5m2": np.float32,
    }[t.name]


def distinct_sorted(values) -> np.ndarray:
    """The distinct values of an integer array, flattened and ascending (``np.unique``'s result, found by a sort: the
    interpreter's byte-address sets are its hot path, and numpy's hashed ``np.unique`` is much slower on them).
    ``distinct_sorted([[5, 1], [5, 3]])`` = [1, 3, 5]. Post: strictly increasing."""
    flat = np.sort(np.asarray(values), axis=None)
    if flat.size < 2:
        return flat
    keep = np.empty(flat.size, dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


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
        mant, e_min = (3, -6) if t.name == "e4m3" else (2, -14)
        x64 = x.astype(np.float64)
        _m, e = np.frexp(x64)
        # the spacing of representable values around x: 2^(E - mant) for E = e - 1, never below the subnormals'
        quantum = np.ldexp(1.0, np.maximum(e - 1, e_min) - mant)
        out = np.round(x64 / quantum) * quantum
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


# the smallest magnitude that rounds to infinity in each float type: the largest finite value plus half its ulp
# (e4m3 has no infinity: past 464 it would round beyond its largest finite value, 448)
_FLOAT_OVERFLOW = {"f32": (2 - 2.0 ** -24) * 2.0 ** 127, "bf16": (2 - 2.0 ** -8) * 2.0 ** 127, "f16": 65520.0,
                   "e4m3": 464.0, "e5m2": 61440.0}
_FLOAT_LARGEST = {"f32": float(np.finfo(np.float32).max), "bf16": (2 - 2.0 ** -7) * 2.0 ** 127, "f16": 65504.0,
                  "e4m3": 448.0, "e5m2": 57344.0}


def value_problem(value, t: ScalarType) -> str | None:
    """Why the attribute number ``value`` is not a value of scalar type ``t``, or None: an integer type takes an
    integer in its range, ``i1`` takes true, false, 0 or 1, a float type a number that does not round to infinity
    (``inf``, ``-inf`` and ``nan`` written as such are values). Pre: ``value`` is an int, float or bool (the
    verifier's ``attr`` checked its kind). ``value_problem(1e39, F32)`` →
    ``'value 1e+39 does not fit f32: it rounds to inf (the largest f32 is 3.4028234663852886e+38)'``."""
    if t.kind == "pred":
        if isinstance(value, bool) or (type(value) is int and value in (0, 1)):
            return None
        return f"value {_number_text(value)} is not a predicate (true, false, 0 or 1) but the type is {t}"
    if t.is_int:
        if type(value) is not int:
            return f"value {_number_text(value)} is not an integer but the type is {t}"
        lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.kind == "int" else (0, (1 << t.bits) - 1)
        if not lo <= value <= hi:
            return f"value {value} does not fit {t} ([{lo}, {hi}])"
        return None
    if isinstance(value, bool):
        return f"value {_number_text(value)} is not a number but the type is {t}"
    try:
        magnitude = abs(float(value))
    except OverflowError:
        magnitude = float("inf")
    if magnitude != float("inf") and magnitude == magnitude and magnitude < _FLOAT_OVERFLOW[t.name]:
        return None
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return None  # inf, -inf and nan are written as such
    return (f"value {_number_text(value)} does not fit {t}: it rounds to {'inf' if t.name != 'e4m3' else 'nan'} "
            f"(the largest {t} is {_FLOAT_LARGEST[t.name]!r})")


def _number_text(value) -> str:
    """A number as the text form writes it (a huge integer cut in the middle)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 40 else text[:20] + "…" + text[-8:]


def tile_coordinates(shape, indices=None) -> np.ndarray:
    """For a tile shape of rank R, an (size, R) array: row i is the per-mode coordinate of the tile's i-th element
    (colexicographic; a nested mode's coordinate is linearised within that mode). With ``indices`` (an int array of
    tile indices), the coordinates of those only: shape ``indices.shape + (R,)``."""
    modes = shape if isinstance(shape, tuple) else (shape,)
    sizes = [lc.product(m) for m in modes]
    idx = np.arange(lc.product(shape), dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64)
    out = np.empty(idx.shape + (len(sizes),), dtype=np.int64)
    for k, s in enumerate(sizes):
        out[..., k] = idx % s
        idx = idx // s
    return out


TABLE_LIMIT = 1 << 22  # the interpreter tabulates a layout over its whole domain up to this size, else evaluates per use


def tv_table(tv, threads: int) -> np.ndarray:
    """(threads, values) array of ``tv(t, v)``: the tile index of each thread's values (``tv_index``; with more
    threads than the thread mode, evaluated point by point so that tv raises for the first outside). ``tv`` is a TV layout or a swizzled one
    (``Sw<B,M,S> o offset o TV``: the swizzle acts on the tile index, ``is_tv``)."""
    nthreads, nvals = lc.size(tv[0]), lc.size(tv[1])
    if threads > nthreads:   # coordinates outside the thread mode: tv raises as it would for the caller
        return np.array([[tv((t, v)) for v in range(nvals)] for t in range(threads)], dtype=np.int64)
    return tv_index(tv)[:threads]


def tv_rows(ix, op, thread, table: np.ndarray) -> np.ndarray:
    """Each thread's row of ``table`` (a ``tv_table``): ``table[t]`` for the thread operand's value t of every thread
    of the CTA. Pre: every active thread's t is a thread of the TV layout, else the interpreter fails at ``op``
    naming the first that is not; inactive threads (masked off by a branch) read row 0, whose values nobody uses.
    Post: shape (threads of the CTA, values of the TV layout)."""
    t = ix.get(thread).astype(np.int64)
    outside = ((t < 0) | (t >= table.shape[0])) & ix.mask
    if outside.any():
        first = int(np.nonzero(outside)[0][0])
        ix.fail(op, f"thread {first}'s thread operand is {int(t[first])}, outside the tv's thread mode of "
                    f"{table.shape[0]} threads")
    return table[np.where(ix.mask, t, 0)]


def is_layout(x) -> bool:
    return isinstance(x, lc.Layout)


def is_tv(x) -> bool:
    """Whether ``x`` can be a thread-value map: a Layout ``(threads, values)``, or one composed with a swizzle,
    ``Sw<B,M,S> o offset o TV`` (thread t's value v is tile element ``Sw(offset + TV(t, v))``: an XOR of index bits,
    e.g. a conflict-free transpose's thread map). ``Sw<3,3,-6> o 0 o ((8,32),8):((512,1),32)`` → True."""
    return isinstance(x, lc.Layout) or (isinstance(x, lc.ComposedLayout) and isinstance(x.outer, lc.Swizzle)
                                        and isinstance(x.inner, lc.Layout))


def tv_attr(op, v, name: str = "tv"):
    """The op's TV attribute, which must be a layout or a swizzled one (``is_tv``); reported and None otherwise:
    a non-layout as by ``v.attr`` (``attribute 'tv' must be a layout like [(4,2):(2,1)], not (4, 2)``), a composed
    layout whose outer function is no swizzle as ``attribute 'tv' must be a layout (threads, values) or Sw<B,M,S> o
    offset o layout, not [(4,8):(8,1) o 0 o (32,4):(4,1)]``."""
    value = op.attrs.get(name)
    if isinstance(value, lc.ComposedLayout) and not is_tv(value):
        v.error(op, f"attribute '{name}' must be a layout (threads, values) or Sw<B,M,S> o offset o layout, not "
                    f"{attribute_text(value)}")
        return None
    if isinstance(value, lc.ComposedLayout):
        return value
    return v.attr(op, name, lc.Layout)


MAX_TV_THREADS = 1024  # a TV layout's thread mode: at most the threads of a CTA


def verify_tv(op, v, tv, fragment_shape, tile_size, what="tile"):
    """The rules shared by every op that distributes a tile over threads with a TV layout (plain or swizzled)."""
    if not is_tv(tv):
        v.error(op, "tv must be a layout (threads, values)")
        return False
    if lc.rank(tv) != 2:
        v.error(op, f"tv {lc.to_str(tv)} must have rank 2: (threads, values)")
        return False
    _sw, _offset, modes = tv_parts(tv)
    if lc.size(tv[0]) > MAX_TV_THREADS:
        v.error(op, f"tv's thread mode {lc.to_str(modes[0])} has {lc.size(tv[0])} threads; a CTA has at most "
                    f"{MAX_TV_THREADS}")
        return False
    if lc.size(tv[1]) != lc.product(fragment_shape):
        v.error(op, f"tv's value mode {lc.to_str(modes[1])} has {lc.size(tv[1])} values but the fragment "
                    f"{lc.to_str(fragment_shape)} has {lc.product(fragment_shape)}")
        return False
    low, high = layout_image_bounds(tv)
    if low < 0 or high >= tile_size:
        v.error(op, f"tv {lc.to_str(tv)} reaches index {high if high >= tile_size else low} outside the {what} of "
                    f"{tile_size} elements")
        return False
    return True


def layout_image_bounds(layout) -> tuple:
    """(min, max) of ``layout(i)`` over its domain, from the flattened modes: Σ (s−1)·min(d, 0), Σ (s−1)·max(d, 0).
    ``((4,8,4),(2,2,32)):((128,1,16),(64,8,512))`` → (0, 16383). Exact for any affine layout (the image is every
    Σ cᵢ·dᵢ with 0 ≤ cᵢ < sᵢ), without evaluating the layout point by point. A swizzled map (``is_tv``) is
    evaluated (a TV map has at most 1024 threads' values)."""
    if isinstance(layout, lc.ComposedLayout):
        values = layout_values(layout)
        return int(values.min()), int(values.max())
    flat = lc.flatten(layout)
    shapes = flat.shape if isinstance(flat.shape, tuple) else (flat.shape,)
    strides = flat.stride if isinstance(flat.stride, tuple) else (flat.stride,)
    low = sum((s - 1) * min(d, 0) for s, d in zip(shapes, strides))
    high = sum((s - 1) * max(d, 0) for s, d in zip(shapes, strides))
    return low, high


# -- kernel-level rules ------------------------------------------------------------------------------------------

KERNEL_RULES: list = []


def kernel_rule(fn):
    """Register ``fn(kernel, v)``: a verifier rule over a whole kernel (rules that relate several ops, e.g. an
    expect-tx and the TMA loads completing on its barrier, or the CTA's shared-memory budget)."""
    KERNEL_RULES.append(fn)
    return fn


def const_int(value):
    """The integer a value is statically known to hold (it is the result of a well-formed integer ``arith.const``:
    its value fits its type), else None."""
    owner = getattr(value, "owner", None)
    if owner is not None and owner.name == "arith.const" and len(owner.results) == 1:
        c = owner.attrs.get("value")
        t = owner.results[0].type
        if type(c) is int and isinstance(t, ScalarType) and t.is_int and value_problem(c, t) is None:
            return c
    return None


# -- shared memory: the static allocation plan ---------------------------------------------------------------------

SMEM_BASE = 1024          # the byte address of the dynamic shared-memory window (0x400 on an H100)
SMEM_LIMIT = 232448       # bytes of shared memory one Hopper CTA may have (227 KiB, the opt-in maximum)


class SmemPlan:
    """Where each top-level allocation of a kernel lives: ``address[id(op)]`` (absolute byte address, from
    ``SMEM_BASE``), ``size[id(op)]`` bytes; ``total`` bytes from ``SMEM_BASE`` to the end of the last one."""

    def __init__(self):
        self.address, self.size, self.ops, self.total = {}, {}, [], 0


def smem_plan(body_ops) -> SmemPlan:
    """Offsets of the allocations among ``body_ops`` (a kernel body's top-level ops), in program order, each at
    the next address that is a multiple of its alignment. An op allocates when its definition has
    ``smem_request(op) -> (bytes, align)``; None means the op is malformed (the verifier says why). After them, the
    scratch of the ops at any depth whose definition has ``smem_scratch(op) -> (bytes, align) | None`` (a
    ``frag.reduce`` across warps: its partials), in program order, so that the budget rule and every address count
    it. Post: the allocations' addresses do not depend on the scratch."""
    plan = SmemPlan()
    cursor = SMEM_BASE
    requests = [(op, getattr(OPS.get(op.name), "smem_request", None)) for op in body_ops]
    requests += [(op, getattr(OPS.get(op.name), "smem_scratch", None)) for op in _nested(body_ops)]
    for op, request in requests:
        got = request(op) if request else None
        if got is None:
            continue
        nbytes, align = got
        cursor = -(-cursor // align) * align
        plan.address[id(op)] = cursor
        plan.size[id(op)] = nbytes
        plan.ops.append(op)
        cursor += nbytes
    plan.total = cursor - SMEM_BASE
    return plan


def _nested(ops):
    """Every op of ``ops`` and of their regions, in program order (an explicit stack: any depth)."""
    stack = [iter(ops)]
    while stack:
        op = next(stack[-1], None)
        if op is None:
            stack.pop()
            continue
        yield op
        for region in reversed(op.regions):
            stack.append(iter(region.ops))


def element_bytes(t: ScalarType) -> int:
    """Bytes of one element of ``t`` in memory (``i1`` takes a byte)."""
    return max(t.bits, 8) // 8


_LAYOUTC_NAMES = {"i32": "s32", "i64": "s64", "i1": "u8"}


def layoutc_dtype(t: ScalarType) -> str:
    """The name layoutc.hopper knows the element type by: ``i32`` → ``s32``."""
    return _LAYOUTC_NAMES.get(t.name, t.name)


@functools.lru_cache(maxsize=None)
def fp8_table(name: str) -> np.ndarray:
    """The float32 value of each of the 256 codes of ``e4m3`` (OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN)
    or ``e5m2`` (bias 15, IEEE-like: S.11111.00 is ±inf, the rest of exponent 31 NaN). Subnormals included.
    ``fp8_table('e4m3')[0x7E]`` → 448.0, ``fp8_table('e5m2')[0x7B]`` → 57344.0."""
    exp_bits, man_bits, bias = (4, 3, 7) if name == "e4m3" else (5, 2, 15)
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> man_bits) & ((1 << exp_bits) - 1)
    m = codes & ((1 << man_bits) - 1)
    values = np.where(e == 0, m / 2.0 ** man_bits * 2.0 ** (1 - bias), (1 + m / 2.0 ** man_bits) * 2.0 ** (e - bias))
    values = sign * values
    top = (1 << exp_bits) - 1
    if name == "e4m3":
        values = np.where((e == top) & (m == (1 << man_bits) - 1), np.nan, values)
    else:
        values = np.where(e == top, np.where(m == 0, sign * np.inf, np.nan), values)
    return values.astype(np.float32)


def fp8_encode(values, name: str) -> np.ndarray:
    """The fp8 codes (uint8) of float values already representable in ``name`` (``round_to`` first): the inverse of
    ``fp8_table`` on finite values (+0 → 0x00, −0 → 0x80); NaN → the format's NaN (0x7F)."""
    table = fp8_table(name)
    finite = np.nonzero(np.isfinite(table[:128]))[0]        # non-negative codes, ascending in value
    x = np.asarray(values, dtype=np.float32)
    magnitude = np.abs(x)
    codes = finite[np.clip(np.searchsorted(table[finite], magnitude), 0, len(finite) - 1)].astype(np.uint8)
    codes = np.where(np.signbit(x), codes | 0x80, codes).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), codes).astype(np.uint8)


def to_bytes(values, t: ScalarType) -> np.ndarray:
    """The little-endian bytes of ``values`` (the interpreter's numpy form of ``t``) stored as ``t``: an array of
    shape ``values.shape + (element_bytes(t),)`` of uint8. Narrow floats are rounded to ``t`` first."""
    x = np.asarray(values)
    if t.name == "bf16":
        bits = round_to(x, t).view(np.uint32) >> 16
        raw = bits.astype("<u2")
    elif t.name == "f16":
        raw = x.astype("<f2")
    elif t.name in ("e4m3", "e5m2"):
        raw = fp8_encode(round_to(x, t), t.name)
    else:
        raw = x.astype({"f32": "<f4", "i32": "<i4", "u32": "<u4", "i64": "<i8", "u64": "<u8", "i1": "u1"}[t.name])
    return np.ascontiguousarray(raw).view(np.uint8).reshape(x.shape + (element_bytes(t),))


def from_bytes(raw, t: ScalarType) -> np.ndarray:
    """The inverse of ``to_bytes``: uint8 of shape ``(..., element_bytes(t))`` → values in ``numpy_dtype(t)``."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    shape = raw.shape[:-1]
    if t.name == "bf16":
        bits = raw.view("<u2").reshape(shape).astype(np.uint32) << 16
        return bits.view(np.float32)
    if t.name == "f16":
        return raw.view("<f2").reshape(shape).astype(np.float32)
    if t.name in ("e4m3", "e5m2"):
        return fp8_table(t.name)[raw.reshape(shape)]
    code = {"f32": "<f4", "i32": "<i4", "u32": "<u4", "i64": "<i8", "u64": "<u8", "i1": "u1"}[t.name]
    return raw.view(code).reshape(shape).astype(numpy_dtype(t))


def describe_threads(ids) -> str:
    """``thread 0``, ``threads 0..127``, ``threads 0, 32..63``: a sorted set of thread indices, for messages."""
    if not isinstance(ids, (set, frozenset, list, tuple, range)):
        ids = np.asarray(ids).ravel()
    ids = sorted({int(i) for i in ids})
    if not ids:
        return "no thread"
    runs, start, prev = [], ids[0], ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}..{prev}")
        if i is not None:
            start = prev = i
    return ("thread " if len(ids) == 1 else "threads ") + ", ".join(runs)


# -- the interpreter's asynchronous protocol --------------------------------------------------------------------------

def describe_waiters(threads, role: str | None = None) -> str:
    """Who waits, for the first line of a hang report: ``role consumer (warps 4-7)`` (a role's whole warps),
    ``role producer (thread 0, warp 0)``, ``threads 0..63 (warps 0-1)``, ``thread 0 (warp 0)``."""
    ids = sorted({int(i) for i in np.asarray(threads).ravel()})
    if not ids:
        return f"role {role}" if role is not None else "no thread"
    warps = sorted({i // 32 for i in ids})
    if len(warps) == 1:
        warp_text = f"warp {warps[0]}"
    elif warps[-1] - warps[0] + 1 == len(warps):
        warp_text = f"warps {warps[0]}-{warps[-1]}"
    else:
        warp_text = "warps " + ", ".join(map(str, warps))
    if role is None:
        return f"{describe_threads(ids)} ({warp_text})"
    whole = len(ids) == 32 * len(warps)
    return f"role {role} ({warp_text if whole else describe_threads(ids) + ', ' + warp_text})"


def waits_verb(who: str) -> str:
    """``waits`` after a singular subject (``role …``, ``thread 3 …``, ``CTA …``), else ``wait``."""
    return "wait" if who.startswith("threads ") else "waits"


class Wait(abc.ABC):
    """What a blocking op yields to the interpreter's scheduler (``yield Wait``): the op and the threads that wait.

    ``ready(ix)``: whether the threads may go on; ``helps(ix, aop)``: whether the next step of the in-flight
    asynchronous operation ``aop`` can bring ``ready`` closer. When nothing in flight can, the scheduler raises
    HangError at ``where(ix)`` (the waiting op) with ``headline(ix, role)`` — one short line: who waits on what, with
    which phase and parity, and why it can never complete — followed by the details of ``hang(ix)``.
    """

    def __init__(self, op, threads):
        self.op = op
        self.threads = threads

    @abc.abstractmethod
    def ready(self, ix) -> bool:
        """Whether the waiting threads may go on."""

    def helps(self, ix, aop) -> bool:
        return False

    def where(self, ix):
        """The op whose location heads the hang report."""
        return self.op

    def beyond_threads(self, ix) -> bool:
        """Whether no thread's action could meet this wait any more (only an asynchronous copy could): the report of
        a hang among several streams leads with such a wait."""
        return False

    def headline(self, ix, role: str | None = None) -> str:
        who = describe_waiters(self.threads, role)
        return f"{who} {waits_verb(who)} forever"

    def hang(self, ix) -> str:
        return f"{describe_threads(self.threads)} wait forever"


class CountingWait(Wait):
    """Threads waiting at a counting barrier (a named barrier, the cluster barrier) until its generation moves on:
    ``state`` holds ``arrived``, ``expected`` and ``generation``."""

    def __init__(self, op, threads, state, what: str):
        super().__init__(op, threads)
        self.state, self.generation, self.what = state, state["generation"], what

    def ready(self, ix) -> bool:
        return self.state["generation"] > self.generation

    def headline(self, ix, role: str | None = None) -> str:
        who = describe_waiters(self.threads, role)
        return (f"{who} {waits_verb(who)} at {self.what}, but only {self.state['arrived']} of "
                f"{self.state['expected']} arrived and no one else can arrive")

    def hang(self, ix) -> str:
        return (f"{describe_threads(self.threads)} wait at {self.what} for {self.state['expected']}, but only "
                f"{self.state['arrived']} arrived")


def arrive_counting(op, threads, state: dict, amount: int, what: str):
    """``amount`` arrivals at a counting barrier: the last one (``arrived`` reaches ``expected``) opens the next
    generation and returns None; earlier ones return the CountingWait to yield. Pre: the caller checked that
    ``arrived`` does not overshoot ``expected``."""
    state["arrived"] += amount
    if state["arrived"] == state["expected"]:
        state["arrived"] = 0
        state["generation"] += 1
        return None
    return CountingWait(op, threads, state, what)


class SwitchPoint(Wait):
    """Yielded after an op that may unblock other threads (an arrival): always ready, it lets the scheduler run
    another role before this one goes on, so that what the arrival allows (a producer overwriting a released stage)
    happens as early as the hardware could let it."""

    def ready(self, ix) -> bool:
        return True


class AsyncOp(abc.ABC):
    """An asynchronous operation in flight (a TMA copy), issued by ``thread`` at ``op``, advanced by the scheduler
    one step at a time: ``step(ix)`` performs the next step, ``done`` says when none is left. ``writes(ix)`` and
    ``reads(ix)`` are the shared-memory bytes (sorted unique int64 addresses) it may still write or read, for the
    race checks; ``describe()`` names it in messages."""

    op = None
    thread = 0
    done = False

    @abc.abstractmethod
    def step(self, ix) -> None:
        """Perform the next step (set ``done`` after the last)."""

    def writes(self, ix):
        return None

    def reads(self, ix):
        return None

    def describe(self) -> str:
        return f"{self.op.name} issued at {self.op.loc} by thread {self.thread}"


# The dialects register their ops on import; each op is defined in exactly one of them.
from . import arith, gpu, scf, gmem, frag, smem, mbarrier, tma, pipeline, wgmma, roles, sched, cpasync  # noqa: E402,F401
