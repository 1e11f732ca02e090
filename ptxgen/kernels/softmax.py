"""Row softmax with torch's semantics: ``softmax(x)`` = ``torch.softmax(x, dim=-1)`` for bf16, f16 and f32, computed in
f32 and rounded once to x's dtype.

One CTA holds ``config.rows`` rows in registers (``rowwise.RowConfig``; rows up to 16384 elements): each row is read
once, its maximum and the sum of ``exp(x - max)`` are ``frag.reduce``s over the row (across the CTA's warps for long
rows), the reciprocal of the sum is taken once per row (``frag.rcp``), and the row is written once.
``exp(x - max)`` is ``exp2((x - max)·log2 e)``: a subtraction, a multiplication and one ``ex2.approx.f32`` per value
(``SoftmaxConfig.exponent``; the one-fma form ``exp2(x·log2 e - max·log2 e)`` is the ``"fma"`` variant).

Example (the CPU interpreter; post-condition ``y == softmax(x)`` to f32 rounding, each row summing to 1)::

    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((3, 100)).astype(np.float32)
    >>> y = softmax(x)
    >>> want = np.exp(x - x.max(1, keepdims=True)); want /= want.sum(1, keepdims=True)
    >>> bool(np.abs(y - want).max() < 1e-6), y.shape
    (True, (3, 100))
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import layoutc as lc
from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32
from ptxgen.ir.suggest import did_you_mean

from .arguments import as_callers
from .rowwise import (Operand, RowConfig, cache_attrs, check_config, choose_row_config, empty_like, rows_of,
                      run)

LOG2E = 1.4426950408889634
MAX_VALUES = 32   # values per thread: softmax fits them in 64 registers, so 16384 bf16 takes 2 CTAs of 512 per SM
EXPONENTS = ("difference", "fma")


@dataclass(frozen=True)
class SoftmaxConfig(RowConfig):
    """A ``RowConfig`` with the softmax's own choice, ``exponent``: how ``exp(x - max)`` is formed —

    - ``"difference"`` (default): ``exp2((x - max)·log2 e)``. ``x - max`` is exact for the values near the maximum
      (Sterbenz) and ≤ 0 for every value, so the row's largest term is exactly 1 at any magnitude of x, as torch's
      ``exp(x - max)``;
    - ``"fma"``: ``exp2(fma(x, log2 e, -max·log2 e))``, one FP32 operation fewer per value. ``max·log2 e`` is rounded
      to f32; the rounding δ is common to the row and cancels in the quotient while ``2^|δ|`` stays in range, but
      δ reaches ulp(max·log2 e)/2, so from |max| ≈ 2^30 on the row's terms overflow to inf (a row of magnitude 1e10
      gave NaN), and ``max·log2 e`` itself overflows for |max| > 2.36e38.

    ``SoftmaxConfig("bf16", 512, 4, 1, 2)`` is RowConfig's tiling with the ``"difference"`` exponent."""

    exponent: str = "difference"

    def validate(self) -> None:
        """RowConfig's rules and a known exponent: ``SoftmaxConfig("f32", 32, 1, exponent="exp")`` →
        ``ValueError: SoftmaxConfig: exponent must be one of difference, fma, not 'exp'``."""
        super().validate()
        if self.exponent not in EXPONENTS:
            raise ValueError(f"SoftmaxConfig: exponent must be one of {', '.join(EXPONENTS)}, not {self.exponent!r}"
                             f"{did_you_mean(str(self.exponent), EXPONENTS)}")


def as_softmax_config(config: RowConfig) -> SoftmaxConfig:
    """A RowConfig as the SoftmaxConfig of the same tiling and cache hints with the default exponent (a
    SoftmaxConfig unchanged). Post: ``result.layouts() == config.layouts()``."""
    if isinstance(config, SoftmaxConfig):
        return config
    return SoftmaxConfig(config.dtype, config.threads, config.vectors, config.rows, config.ctas_per_sm,
                         cache=config.cache)


def choose_softmax_config(n: int, dtype: str, **variant) -> SoftmaxConfig:
    """``rowwise.choose_row_config(n, dtype, MAX_VALUES)`` as a SoftmaxConfig with the given variant fields
    (``cache``, ``exponent``): ``choose_softmax_config(16384, "bf16", exponent="fma")`` →
    ``SoftmaxConfig("bf16", 512, 4, 1, 2, cache="stream_evict_first", exponent="fma")``. Pre: 1 ≤ n ≤ 16384."""
    row = choose_row_config(n, dtype, MAX_VALUES, **({"cache": variant.pop("cache")} if "cache" in variant else {}))
    return SoftmaxConfig(row.dtype, row.threads, row.vectors, row.rows, row.ctas_per_sm, cache=row.cache, **variant)


def build(config: RowConfig):
    """The softmax kernel of ``config`` (a RowConfig takes SoftmaxConfig's default exponent): ``@softmax(%x, %y:
    gtensor<T, 2>, %m: i32)``, grid ⌈m / rows⌉ CTAs. Post: ``y[r] = exp(x[r] - max x[r]) / Σ exp(x[r] - max x[r])``
    for r < m, columns < dim(x, 1) ≤ config.cols."""
    config = as_softmax_config(config)
    config.validate()
    tile, tv = config.layouts()
    dtype = config.dtype
    values = lc.shape(tv[1])
    kb = KernelBuilder("softmax", grid=(cdiv("m", config.rows), 1, 1), block=(config.block, 1, 1),
                       min_ctas_per_sm=config.ctas_per_sm, x=gtensor(dtype, 2), y=gtensor(dtype, 2), m=i32)
    b = kb.b
    block = b.gpu.block_id(dim="x", name="block")
    thread = b.gpu.thread_id(dim="x", name="thread")
    zero = b.const(0, i32, name="zero")
    rows = b.const(config.rows, i32, name="rows")
    row0 = b.arith.mul(block, rows, name="row0")
    x_tile = b.gmem.tile(kb["x"], row0, zero, shape=tile, name="x_tile")
    y_tile = b.gmem.tile(kb["y"], row0, zero, shape=tile, name="y_tile")
    # columns past the row's end read -inf: they change neither the maximum nor (exp(-inf) = 0) the sum
    hints = config.hints
    xs = b.gmem.load(x_tile, thread, tv=tv, other=-math.inf, type=frag(dtype, values), name="xs",
                     **cache_attrs(hints.x))
    x32 = xs if dtype == "f32" else b.frag.cast(xs, type=frag("f32", values), name="x32")
    reduce = {"tv": tv, "tile": tile, "mode": 1}
    top = b.frag.reduce(x32, thread, kind="max", **reduce, name="top")
    log2e = b.const(LOG2E, f32, name="log2e")
    if config.exponent == "fma":
        shift = b.frag.mul(top, b.const(-LOG2E, f32, name="minus_log2e"), name="shift")
        exps = b.frag.exp2(b.frag.fma(x32, log2e, shift, name="scaled"), name="exps")
    else:
        exps = b.frag.exp2(b.frag.mul(b.frag.sub(x32, top, name="below_max"), log2e, name="scaled"), name="exps")
    total = b.frag.reduce(exps, thread, kind="add", **reduce, name="total")
    inverse = b.frag.rcp(total, rounding="rn", name="inverse")
    y32 = b.frag.mul(exps, inverse, name="y32")
    ys = y32 if dtype == "f32" else b.frag.cast(y32, type=frag(dtype, values), name="ys")
    b.gmem.store(y_tile, thread, ys, tv=tv, **cache_attrs(hints.y))
    variant = ("" if config.cache == "default" else f",{config.cache}") + (
        "" if config.exponent == "difference" else f",{config.exponent}")
    return kb.module(f"ptxgen/kernels/softmax[{config.dtype},{config.threads}x{config.vectors}x{config.rows}{variant}]")


def softmax(x, dim: int = -1, *, config: RowConfig | None = None):
    """``torch.softmax(x, dim=-1)``: x of any shape (bf16, f16 or f32; its last dimension the row, up to 16384
    elements), the result of x's shape and dtype (a new array or tensor of x's kind). ``dim`` must be the last
    dimension (a 0-d x is one row of one element, as torch: 1, or NaN for ±inf and NaN). ``config`` forces a RowConfig
    or SoftmaxConfig (its dtype x's, its cols ≥ the row length). A row whose maximum is +inf, or that holds a NaN, is
    NaN; a row of -inf only is NaN (0/0), both as torch's; a row of finite values of any magnitude sums to 1
    (``SoftmaxConfig.exponent``).

    Errors (before anything runs): TypeError for an array of another dtype or kind (``softmax: x has dtype
    numpy float64; softmax takes bf16 (...), f16 (...) or f32 (...)``), ValueError for another ``dim`` or a row too
    long (``softmax: x's rows have 40000 elements; softmax holds a row in one CTA's registers: at most 16384``)."""
    arg = Operand("softmax", "x", x)
    rank = len(arg.shape)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"softmax: dim must be an int, not {type(dim).__name__}")
    if dim not in (-1, max(rank - 1, 0)):
        raise ValueError(f"softmax: dim must be the last dimension (-1 or {max(rank - 1, 0)}), not {dim}")
    rows = Operand("softmax", "x", arg.value.reshape(1)) if rank == 0 else arg   # torch's 0-d softmax: one row
    x2d, m, n = rows_of("softmax", rows)
    dtype = arg.dtype
    config = config or choose_softmax_config(max(n, 1), dtype)
    check_config("softmax", config, dtype, n)
    config = as_softmax_config(config)
    y2d = empty_like(x2d, arg.kind)
    if m and n:
        run(lambda: build(config), ("softmax", config), {"x": x2d, "y": y2d, "m": m}, arg.kind)
    return as_callers(y2d.reshape(arg.shape), [arg])

