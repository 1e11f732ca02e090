"""Every op of the tile IR, each defined once (one module per dialect): operands, result types, verifier rule and interpreter meaning.

An op definition is a class registered under the op's name. ``verify(op, v)`` checks the op against the rules of
``spec/tile-ir.md`` through the verifier's helpers; ``result_types(...)`` gives the builder the types of its results;
``interpret(op, ix)`` executes it on the CPU interpreter's state ``ix`` (all threads of a CTA at once: a scalar is a
numpy array over threads, a fragment an array of shape (threads, values)). The definitions depend on no module
further down the pipeline: the verifier and the interpreter pass themselves in.
"""
from __future__ import annotations

import numpy as np

import layoutc as lc

from ..types import SCALARS, ScalarType

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


def verify_tv(op, v, tv, fragment_shape, tile_size, what="tile"):
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


# The dialects register their ops on import; each op is defined in exactly one of them.
from . import arith, gpu, scf, gmem, frag  # noqa: E402,F401
