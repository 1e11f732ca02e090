"""RMSNorm and LayerNorm forward with torch's semantics, over the last dimension, for bf16, f16 and f32 (f32 math, one
rounding to x's dtype):

- ``rms_norm(x, weight=None, eps=None)`` = ``torch.nn.functional.rms_norm(x, (N,), weight, eps)``:
  ``x / sqrt(mean(x²) + eps) · weight`` (``eps`` None: ``torch.finfo(x.dtype).eps``);
- ``layer_norm(x, weight=None, bias=None, eps=1e-5)`` = ``torch.nn.functional.layer_norm(x, (N,), weight, bias, eps)``:
  ``(x - mean) / sqrt(var + eps) · weight + bias`` (biased variance).

One CTA holds ``config.rows`` rows in registers (``rowwise.RowConfig``): x is read once and y written once; the
row's sums are ``frag.reduce``s over the row (across the CTA's warps for long rows); the weight and bias are read
through ``layoutc.broadcast_tv`` of the row's TV layout (each value gets its column's entry). LayerNorm's variance is
the mean of ``(x - mean)²`` over the row's columns only: where the tile is wider than the row, the columns past its
end are masked by a second read of x whose out-of-bounds value is 1 instead of 0 (their difference is 1 there, 0
inside), so that no padding enters the sum.

Example (the CPU interpreter)::

    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((4, 300)).astype(np.float32)
    >>> w = np.linspace(0.5, 1.5, 300).astype(np.float32)
    >>> y = layer_norm(x, w, None, 1e-5)
    >>> want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w
    >>> bool(np.abs(y - want).max() < 1e-4)
    True
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

import layoutc as lc
from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32

from .arguments import as_callers
from .rowwise import (Operand, RowConfig, check_config, choose_row_config, empty_like, rows_of, run,
                      vector_of)

MAX_VALUES = 16        # values per thread: 32 would spill at 64 registers (the softmax holds 32)
EPILOGUE_VALUES = 16   # values per thread of one epilogue chunk (see build)
FLOAT_EPS = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f32": 2.0 ** -23}  # torch.finfo(dtype).eps


def build(config: RowConfig, kind: str, weight: bool, bias: bool = False):
    """The ``kind`` ("rms" or "layer") norm of ``config``: ``@rms_norm`` / ``@layer_norm`` with parameters ``%x, %y:
    gtensor<T, 2>``, ``%w`` / ``%b: gtensor<T, 1>`` when ``weight`` / ``bias``, ``%m: i32``, ``%eps: f32``; grid
    ⌈m / rows⌉. Post: every row r < m of y is the norm of row r of x (columns < dim(x, 1) ≤ config.cols)."""
    config.validate()
    if kind not in ("rms", "layer"):
        raise ValueError(f"norms.build: kind must be 'rms' or 'layer', not {kind!r}")
    tile, tv = config.layouts()
    dtype = config.dtype
    values = lc.shape(tv[1])
    vectors = {"x": gtensor(dtype, 2), "y": gtensor(dtype, 2)}
    if weight:
        vectors["w"] = gtensor(dtype, 1)
    if bias:
        vectors["b"] = gtensor(dtype, 1)
    kb = KernelBuilder(f"{kind}_norm", grid=(cdiv("m", config.rows), 1, 1), block=(config.block, 1, 1),
                       min_ctas_per_sm=config.ctas_per_sm, **vectors, m=i32, eps=f32)
    b = kb.b
    f32_frag, io_frag = frag("f32", values), frag(dtype, values)

    def to_f32(x, name):
        return x if dtype == "f32" else b.frag.cast(x, type=f32_frag, name=name)

    block = b.gpu.block_id(dim="x", name="block")
    thread = b.gpu.thread_id(dim="x", name="thread")
    zero = b.const(0, i32, name="zero")
    row0 = b.arith.mul(block, b.const(config.rows, i32, name="rows"), name="row0")
    n = b.gtensor.dim(kb["x"], mode=1, name="n")
    inverse_n = b.arith.div(b.const(1.0, f32, name="one"), b.arith.cast(n, type=f32, name="n_f32"), name="inverse_n")
    x_tile = b.gmem.tile(kb["x"], row0, zero, shape=tile, name="x_tile")
    loaded = b.gmem.load(x_tile, thread, tv=tv, type=io_frag, name="loaded")   # columns past the row read 0
    x32 = to_f32(loaded, "x32")
    reduce = {"tv": tv, "tile": tile, "mode": 1, "kind": "add"}
    if kind == "rms":
        squares = b.frag.mul(x32, x32, name="squares")
        centred = x32
    else:
        total = b.frag.reduce(x32, thread, **reduce, name="total")
        mean = b.frag.mul(total, inverse_n, name="mean")
        padded = b.arith.cmp(n, b.const(config.cols, i32, name="cols"), pred="lt", name="padded")
        branch = b.scf.if_(padded, types=(f32_frag,), names=("squares",))
        # x - mean is formed in each branch and again for y (not kept across the reductions: fewer live registers)
        with branch.then:  # the tile is wider than the row: mask the columns past its end out of the variance
            ones = b.gmem.load(x_tile, thread, tv=tv, other=1.0, type=io_frag, name="ones")
            outside = b.frag.sub(to_f32(ones, "ones32"), x32, name="outside")
            inside = b.frag.sub(b.const(1.0, f32, name="one_f32"), outside, name="inside")
            masked = b.frag.mul(b.frag.sub(x32, mean, name="deviation"), inside, name="masked")
            b.scf.yield_(b.frag.mul(masked, masked, name="masked_squares"))
        with branch.otherwise:
            deviation = b.frag.sub(x32, mean, name="deviation_all")
            b.scf.yield_(b.frag.mul(deviation, deviation, name="all_squares"))
        squares = branch.results[0]
        centred = b.frag.sub(x32, mean, name="centred")
    sum_squares = b.frag.reduce(squares, thread, **reduce, name="sum_squares")
    mean_square = b.frag.mul(sum_squares, inverse_n, name="mean_square")
    scale = b.frag.rsqrt(b.frag.add(mean_square, kb["eps"], name="shifted"), name="scale")
    # the epilogue in chunks of at most EPILOGUE_VALUES values per thread (vectors j·per … j·per + per - 1 of the
    # row: columns j·chunk … of the tile, the same TV over a narrower tile): each chunk's stores come before the next
    # chunk's weight loads (y may alias w for all LLVM knows), so at most one chunk of weights is live at a time
    per = max(1, min(config.vectors, EPILOGUE_VALUES // config.vec))
    chunk = replace(config, vectors=per)
    chunk_tile, chunk_tv = chunk.layouts()
    line_tv = lc.broadcast_tv(chunk_tv, chunk_tile, 1)   # value (t, v) → its column: weight and bias over the rows
    chunk_values = lc.shape(chunk_tv[1])
    size = lc.size(chunk_tv[1])
    for j in range(config.vectors // per):
        col = b.const(j * chunk.cols, i32, name=f"col{j}")
        part = b.frag.slice(centred, offset=j * size, type=frag("f32", chunk_values), name=f"centred{j}")
        y32 = b.frag.mul(part, b.frag.slice(scale, offset=j * size, type=frag("f32", chunk_values),
                                           name=f"scale{j}"), name=f"normalized{j}")
        for name in ("w", "b"):
            if name not in vectors:
                continue
            view = b.gmem.tile(kb[name], col, shape=(chunk.cols,), name=f"{name}_tile{j}")
            entry = b.gmem.load(view, thread, tv=line_tv, type=frag(dtype, chunk_values), name=f"{name}s{j}")
            if dtype != "f32":
                entry = b.frag.cast(entry, type=frag("f32", chunk_values), name=f"{name}32_{j}")
            y32 = (b.frag.mul(y32, entry, name=f"weighted{j}") if name == "w"
                   else b.frag.add(y32, entry, name=f"biased{j}"))
        ys = y32 if dtype == "f32" else b.frag.cast(y32, type=frag(dtype, chunk_values), name=f"ys{j}")
        y_chunk = b.gmem.tile(kb["y"], row0, col, shape=chunk_tile, name=f"y_tile{j}")
        b.gmem.store(y_chunk, thread, ys, tv=chunk_tv)
    flags = ("w" if weight else "") + ("b" if bias else "")
    return kb.module(f"ptxgen/kernels/norms[{kind},{dtype},{config.threads}x{config.vectors}x{config.rows},{flags}]")


def _norm(op: str, kind: str, x, weight, bias, eps, config):
    arg = Operand(op, "x", x)
    x2d, m, n = rows_of(op, arg)
    dtype = arg.dtype
    if eps is None:
        eps = FLOAT_EPS[dtype]
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)) or not eps >= 0:
        raise ValueError(f"{op}: eps must be a number >= 0, not {eps!r}")
    args = {"x": x2d}
    if weight is not None:
        args["w"] = vector_of(op, "weight", weight, n, dtype, arg.kind)
    if bias is not None:
        args["b"] = vector_of(op, "bias", bias, n, dtype, arg.kind)
    config = config or choose_row_config(n, dtype, MAX_VALUES)
    check_config(op, config, dtype, n)
    y2d = empty_like(x2d, arg.kind)
    args.update(y=y2d, m=m, eps=float(eps))
    if m:
        run(lambda: build(config, kind, weight is not None, bias is not None),
            (op, config, weight is not None, bias is not None), args, arg.kind)
    return as_callers(y2d.reshape(arg.shape), [arg])


def rms_norm(x, weight=None, eps=None, *, config: RowConfig | None = None):
    """``torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)``: x of any shape (bf16, f16 or f32; rows up to
    16384 elements), ``weight`` None or (N,) of x's dtype and kind, ``eps`` None (x's dtype's machine epsilon, as
    torch) or a number ≥ 0. → an array or tensor of x's shape, dtype and kind. ``config`` forces a RowConfig.

    Errors (before anything runs): TypeError for a wrong dtype or kind (``rms_norm: weight has dtype torch.float32
    but x is bf16: pass it in x's dtype``), ValueError for a wrong shape (``rms_norm: weight must have shape (64,)
    (x's last dimension), not (32,)``), a row too long or a negative eps."""
    return _norm("rms_norm", "rms", x, weight, None, eps, config)


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5, *, config: RowConfig | None = None):
    """``torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)``: x of any shape (bf16, f16 or f32;
    rows up to 16384 elements), ``weight`` and ``bias`` None or (N,) of x's dtype and kind, ``eps`` ≥ 0 (default
    1e-5, torch's). → an array or tensor of x's shape, dtype and kind. Errors as ``rms_norm``'s, naming the
    argument."""
    return _norm("layer_norm", "layer", x, weight, bias, eps, config)
