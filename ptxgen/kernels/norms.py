"""RMSNorm and LayerNorm forward with torch's semantics, over the last dimension, for bf16, f16 and f32 (f32 math, one
rounding to x's dtype):

- ``rms_norm(x, weight=None, eps=None)`` = ``torch.nn.functional.rms_norm(x, (N,), weight, eps)``:
  ``x / sqrt(mean(x²) + eps) · weight`` (``eps`` None: ``torch.finfo(x.dtype).eps``);
- ``layer_norm(x, weight=None, bias=None, eps=1e-5)`` = ``torch.nn.functional.layer_norm(x, (N,), weight, bias, eps)``:
  ``(x - mean) / sqrt(var + eps) · weight + bias`` (biased variance).

One CTA holds ``config.rows`` rows in registers (``NormConfig``, a ``rowwise.RowConfig`` with the norms' variant
fields): x is read once and y written once; the row's sums are ``frag.reduce``s over the row (across the CTA's warps
for long rows); the weight and bias are read through ``layoutc.broadcast_tv`` of the row's TV layout (each value gets
its column's entry). LayerNorm's variance comes from the values in registers: the mean of ``(x - mean)²`` (two
passes, the default) or both sums of ``x - x[row, 0]`` in one (``variance="shifted"``); where the tile is wider than
the row, the columns past its end are masked by their coordinates (``frag.coords``), so that no padding enters the
sums.

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

from dataclasses import dataclass, replace

import numpy as np

import layoutc as lc
from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32

from .arguments import as_callers
from .rowwise import (CHOSEN_CACHE, Operand, RowConfig, cache_attrs, check_config, choose_row_config, empty_like,
                      rows_of, run, vector_of)

MAX_VALUES = 32        # values per thread of both norms (see choose_norm_config)
# values per thread of one epilogue chunk (see build): what fits 64 registers without spilling (ptxas, sm_90a) —
# LayerNorm at 32 values spills nothing with 8 or 16, RMSNorm nothing with 8
EPILOGUE_VALUES = {"layer": 8, "rms": 8}
FLOAT_EPS = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f32": 2.0 ** -23}  # torch.finfo(dtype).eps
VARIANCES = ("two-pass", "shifted", "merged")
PARAMS = ("late", "early")
SOURCES = ("registers", "reload")
INVERSES = ("approx", "rn")


@dataclass(frozen=True)
class NormConfig(RowConfig):
    """A ``RowConfig`` with the norms' own choices (each one a variant the benchmark times):

    - ``variance`` (LayerNorm): ``"two-pass"`` — the mean (one reduction), then the sum of ``(x - mean)²`` over the
      values already in registers (a second reduction; columns past the row's end masked by their coordinates, no
      second read of x); ``"shifted"`` — both sums in one pass over ``d = x - x[row, 0]`` (``var = Σd²/n -
      (Σd/n)²``, exact up to f32 rounding while ``(mean - x[row, 0])² / var`` is moderate: the shift is a value of
      the row), two independent reductions with no arithmetic between them; ``"merged"`` — the same sums through
      one reduction across the row's threads (each thread's own sums first, then the pair of them: one barrier);
    - ``epilogue_values``: values per thread of one epilogue chunk (weights and bias loaded per chunk: at most this
      many live at once);
    - ``params``: ``"late"`` — the weight and bias of each chunk are loaded after the reductions, behind the previous
      chunk's stores; ``"early"`` — all of them before the first reduction, so their latency hides behind the
      reductions (they hold ``values`` more registers across them);
    - ``x_source``: ``"registers"`` — the epilogue scales the x held in registers since the load; ``"reload"`` — it
      reads each chunk of x again (from L2: the CTA read it a moment before), so no x is live across the
      reductions (fewer registers: RMSNorm fits 32 values per thread without spilling) at the price of a second,
      on-chip read;
    - ``inverse_n``: how ``1/n`` (the mean's factor) is formed: ``"approx"`` — ``rcp.approx.ftz.f32``, one MUFU
      instruction (within 1 ulp: the scale's ``rsqrt.approx`` is of the same class); ``"rn"`` — the IEEE
      ``rcp.rn.f32``, whose slow path ptxas emits as a subroutine call: LLVM sinks the reciprocal to its first use,
      after the reduction, where every value of x and the cross-warp partial sums are live, and the call's clobbered
      registers then spill (RMSNorm bf16 at N = 16384: 48 bytes with nvJitLink 13.0, 96-128 bytes local on the
      driver; LayerNorm's first use comes earlier, at lower pressure).
    - ``cache`` (RowConfig's, keyword only): the cache hints of x, y and the weight and bias
      (``rowwise.CACHE_POLICIES``); with ``x_source="reload"`` the first read of x keeps the default (the epilogue
      reads it again from L2) and the re-read takes x's hint.

    ``NormConfig("bf16", 512, 4)`` is a (1, 16384) tile of 512 threads × 32 values, two-pass, chunks of 8, late."""

    variance: str = "two-pass"
    epilogue_values: int = EPILOGUE_VALUES["layer"]
    params: str = "late"
    x_source: str = "registers"
    inverse_n: str = "approx"

    def validate(self) -> None:
        """RowConfig's rules, a known variance and params, and epilogue_values a positive multiple of the vector's
        elements."""
        super().validate()
        if self.variance not in VARIANCES:
            raise ValueError(f"NormConfig: variance must be one of {', '.join(VARIANCES)}, not {self.variance!r}")
        if self.params not in PARAMS:
            raise ValueError(f"NormConfig: params must be one of {', '.join(PARAMS)}, not {self.params!r}")
        if self.x_source not in SOURCES:
            raise ValueError(f"NormConfig: x_source must be one of {', '.join(SOURCES)}, not {self.x_source!r}")
        if self.inverse_n not in INVERSES:
            raise ValueError(f"NormConfig: inverse_n must be one of {', '.join(INVERSES)}, not {self.inverse_n!r}")
        if self.epilogue_values < 1 or self.epilogue_values % self.vec:
            raise ValueError(f"NormConfig: epilogue_values must be a positive multiple of {self.vec} (one 16-byte "
                             f"vector of {self.dtype}), not {self.epilogue_values}")

    @property
    def chunk_vectors(self) -> int:
        """Vectors per thread of one epilogue chunk: the most, up to epilogue_values values, that divide vectors."""
        most = min(self.vectors, self.epilogue_values // self.vec)
        return max(d for d in range(1, most + 1) if self.vectors % d == 0)


def choose_norm_config(n: int, dtype: str, kind: str = "layer", max_values: int | None = None,
                       **variant) -> NormConfig:
    """``rowwise.choose_row_config(n, dtype, max_values)`` as a NormConfig with the given variant fields (defaults:
    two-pass, chunks of ``EPILOGUE_VALUES[kind]``, late, cache hints ``CHOSEN_CACHE``). ``max_values`` None: ``MAX_VALUES`` = 32 (the softmax's)
    for both: 16384 bf16 is 2 CTAs of 512 threads per SM, twice the bytes in flight of the 1024-thread CTA that 16
    values need (one per SM: 64 registers × 1024 threads fill the register file). LayerNorm then fits 64 registers
    without spilling (two-pass from registers, 8-value epilogue chunks), and so does RMSNorm with 1/n an
    approximate reciprocal (``inverse_n="approx"``, the default; with the IEEE one it spilled 96-128 bytes at 16384:
    see NormConfig) — the faster tiling on the H100 at every N (docs/gpu-runs/2026-11-26-s11.log section 5).
    ``choose_norm_config(16384, "bf16")`` → ``NormConfig("bf16", 512, 4, 1, 2, cache="stream_evict_first")``.
    Pre: 1 ≤ n ≤ 16384.
    Post: the config holds rows of n elements (cols ≥ n) and validates."""
    if kind not in EPILOGUE_VALUES:
        raise ValueError(f"choose_norm_config: kind must be 'rms' or 'layer', not {kind!r}")
    if max_values is None:
        max_values = MAX_VALUES
    variant.setdefault("epilogue_values", EPILOGUE_VALUES[kind])
    variant.setdefault("cache", CHOSEN_CACHE)
    row = choose_row_config(n, dtype, max_values)
    return NormConfig(row.dtype, row.threads, row.vectors, row.rows, row.ctas_per_sm, **variant)


def as_norm_config(config: RowConfig, kind: str = "layer") -> NormConfig:
    """A RowConfig as the NormConfig of the same tiling with ``kind``'s default variant fields (a NormConfig
    unchanged)."""
    if isinstance(config, NormConfig):
        return config
    return NormConfig(config.dtype, config.threads, config.vectors, config.rows, config.ctas_per_sm,
                      epilogue_values=EPILOGUE_VALUES.get(kind, EPILOGUE_VALUES["layer"]), cache=config.cache)


def build(config: RowConfig, kind: str, weight: bool, bias: bool = False):
    """The ``kind`` ("rms" or "layer") norm of ``config`` (a RowConfig takes the NormConfig defaults):
    ``@rms_norm`` / ``@layer_norm`` with parameters ``%x, %y: gtensor<T, 2>``, ``%w`` / ``%b: gtensor<T, 1>`` when
    ``weight`` / ``bias``, ``%m: i32``, ``%eps: f32``; grid ⌈m / rows⌉. Post: every row r < m of y is the norm of
    row r of x (columns < dim(x, 1) ≤ config.cols)."""
    config = as_norm_config(config, kind)
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
    n_f32 = b.arith.cast(n, type=f32, name="n_f32")
    if config.inverse_n == "rn":
        inverse_n = b.arith.div(b.const(1.0, f32, name="one"), n_f32, name="inverse_n")
    else:
        inverse_n = b.frag.extract(b.frag.rcp(b.frag.splat(n_f32, type=frag("f32", 1), name="n_frag"),
                                              rounding="approx", name="inverse_n_frag"), index=0, name="inverse_n")
    x_tile = b.gmem.tile(kb["x"], row0, zero, shape=tile, name="x_tile")
    hints = config.hints
    # x is read once, unless the epilogue reads it again (x_source="reload": then the second read is the last)
    x_hint = hints.x if config.x_source == "registers" else "normal"
    loaded = b.gmem.load(x_tile, thread, tv=tv, type=io_frag, name="loaded",  # columns past the row read 0
                         **cache_attrs(x_hint))
    x32 = to_f32(loaded, "x32")

    # the epilogue's chunks: vectors j·per … j·per + per - 1 of each thread, columns j·chunk.cols … of the tile
    # (the same TV over a narrower tile); their weight and bias through broadcast_tv (each value its column's entry)
    per = config.chunk_vectors
    chunk = replace(config, vectors=per)
    chunk_tile, chunk_tv = chunk.layouts()
    line_tv = lc.broadcast_tv(chunk_tv, chunk_tile, 1)   # value (t, v) → its column: weight and bias over the rows
    chunk_values = lc.shape(chunk_tv[1])
    size = lc.size(chunk_tv[1])

    def params_of(j):
        entries = {}
        for name in ("w", "b"):
            if name in vectors:
                view = b.gmem.tile(kb[name], b.const(j * chunk.cols, i32, name=f"{name}_col{j}"),
                                   shape=(chunk.cols,), name=f"{name}_tile{j}")
                entries[name] = b.gmem.load(view, thread, tv=line_tv, type=frag(dtype, chunk_values),
                                            name=f"{name}s{j}", **cache_attrs(hints.params))
        return entries

    early = [params_of(j) for j in range(config.vectors // per)] if config.params == "early" else None
    reduce = {"tv": tv, "tile": tile, "mode": 1, "kind": "add"}
    if kind == "rms":
        sum_squares = b.frag.reduce(b.frag.mul(x32, x32, name="squares"), thread, **reduce, name="sum_squares")
        mean_square = b.frag.mul(sum_squares, inverse_n, name="mean_square")
        centred, subtract = x32, None
    elif config.variance == "two-pass":
        total = b.frag.reduce(x32, thread, **reduce, name="total")
        mean = b.frag.mul(total, inverse_n, name="mean")
        deviation = _inside_row(b, config, thread, n, b.frag.sub(x32, mean, name="deviation"))
        sum_squares = b.frag.reduce(b.frag.mul(deviation, deviation, name="deviation_squares"), thread, **reduce,
                                    name="sum_squares")
        mean_square = b.frag.mul(sum_squares, inverse_n, name="variance")
        centred = b.frag.sub(x32, mean, name="centred")   # formed again: not kept across the second reduction
        subtract = mean
    else:
        # shift by the row's first element (every thread of a row reads the same address: one transaction)
        first_tv = lc.make_layout(lc.broadcast_tv(tv, tile, 0)[0], lc.Layout(1, 0))   # (t, 0) → (row of t, 0)
        first = b.gmem.load(x_tile, thread, tv=first_tv, type=frag(dtype, 1), name="first")
        shift = b.frag.extract(_first_as_f32(b, dtype, first), index=0, name="shift")
        shifted = _inside_row(b, config, thread, n, b.frag.sub(x32, shift, name="shifted"))
        squared = b.frag.mul(shifted, shifted, name="shifted_square")
        if config.variance == "shifted":
            shifted_sum = b.frag.reduce(shifted, thread, **reduce, name="shifted_sum")
            shifted_squares = b.frag.reduce(squared, thread, **reduce, name="shifted_squares")
        else:
            shifted_sum, shifted_squares = _merged_sums(b, config, thread, shifted, squared)
        offset = b.frag.mul(shifted_sum, inverse_n, name="offset")          # mean - shift
        mean_square = b.frag.sub(b.frag.mul(shifted_squares, inverse_n, name="shifted_mean_square"),
                                 b.frag.mul(offset, offset, name="offset_square"), name="variance")
        centred = b.frag.sub(shifted, offset, name="centred")
        subtract = b.frag.add(offset, shift, name="mean")
    scale = b.frag.rsqrt(b.frag.add(mean_square, kb["eps"], name="shifted_variance"), name="scale")
    # each chunk's stores come before the next chunk's late weight loads (y may alias w for all LLVM knows), so at
    # most one chunk of weights is live at a time
    for j in range(config.vectors // per):
        if config.x_source == "registers":
            part = b.frag.slice(centred, offset=j * size, type=frag("f32", chunk_values), name=f"centred{j}")
        else:
            view = b.gmem.tile(kb["x"], row0, b.const(j * chunk.cols, i32, name=f"x_col{j}"), shape=chunk_tile,
                               name=f"x_again{j}")
            part = b.gmem.load(view, thread, tv=chunk_tv, type=frag(dtype, chunk_values), name=f"xs{j}",
                               **cache_attrs(hints.x))
            if dtype != "f32":
                part = b.frag.cast(part, type=frag("f32", chunk_values), name=f"x32_{j}")
            if subtract is not None:
                part = b.frag.sub(part, b.frag.slice(subtract, offset=j * size, type=frag("f32", chunk_values),
                                                     name=f"mean{j}"), name=f"centred{j}")
        y32 = b.frag.mul(part, b.frag.slice(scale, offset=j * size, type=frag("f32", chunk_values),
                                           name=f"scale{j}"), name=f"normalized{j}")
        entries = early[j] if early is not None else params_of(j)
        for name, entry in entries.items():
            if dtype != "f32":
                entry = b.frag.cast(entry, type=frag("f32", chunk_values), name=f"{name}32_{j}")
            y32 = (b.frag.mul(y32, entry, name=f"weighted{j}") if name == "w"
                   else b.frag.add(y32, entry, name=f"biased{j}"))
        ys = y32 if dtype == "f32" else b.frag.cast(y32, type=frag(dtype, chunk_values), name=f"ys{j}")
        y_chunk = b.gmem.tile(kb["y"], row0, b.const(j * chunk.cols, i32, name=f"col{j}"), shape=chunk_tile,
                              name=f"y_tile{j}")
        b.gmem.store(y_chunk, thread, ys, tv=chunk_tv, **cache_attrs(hints.y))
    flags = ("w" if weight else "") + ("b" if bias else "")
    variant = f"{config.variance},{config.epilogue_values},{config.params},{config.x_source},{config.inverse_n}"
    variant += "" if config.cache == "default" else f",{config.cache}"
    return kb.module(f"ptxgen/kernels/norms[{kind},{dtype},{config.threads}x{config.vectors}x{config.rows},{flags},"
                     f"{variant}]")


def _merged_sums(b, config: NormConfig, thread, a, c):
    """The row sums of ``a`` and of ``c`` (f32 fragments of the row TV) through ONE reduction across the row's
    threads (one barrier for a row spanning warps): each thread first sums its own values (a ``frag.reduce`` over
    the (block, values) tile whose lines are threads: no shuffle), then the pair (Σa, Σc) of every thread is a
    2-value fragment over a (2·rows, threads) tile — thread t = r·threads + j holds (r, j) and (r + rows, j), TV
    ``((threads,rows),2):((2·rows,1),rows)`` — reduced over its rows. → (Σa, Σc) as fragments of a's shape, each
    value its row's sum."""
    tile, tv = config.layouts()
    values = lc.shape(tv[1])
    block, rows, threads = config.block, config.rows, config.threads
    own_tv = lc.make_layout(lc.Layout(block, 1), lc.Layout(values, (block, block * config.vec)))
    own = {"tv": own_tv, "tile": (block, config.vectors * config.vec), "mode": 1, "kind": "add"}
    sums = [b.frag.extract(b.frag.reduce(x, thread, **own, name=f"own_{x.name}"), index=0, name=f"own_sum_{x.name}")
            for x in (a, c)]
    pair_tv = lc.make_layout(lc.Layout((threads, rows), (2 * rows, 1)), lc.Layout(2, rows))
    pair_tile = (2 * rows, threads)
    pair_rows, _cols = b.frag.coords(thread, tv=pair_tv, tile=pair_tile, name=["pair_rows", "pair_cols"])
    second = b.frag.cmp(pair_rows, b.const(rows, i32, name="pair_half"), pred="ge", name="pair_second")
    pair = b.frag.select(second, sums[1], b.frag.splat(sums[0], type=frag("f32", 2), name="pair_first"),
                         name="pair")
    total = b.frag.reduce(pair, thread, tv=pair_tv, tile=pair_tile, mode=1, kind="add", name="pair_sums")
    return tuple(b.frag.splat(b.frag.extract(total, index=k, name=f"pair_sum{k}"), type=frag("f32", values),
                              name=f"row_sum{k}") for k in (0, 1))


def _first_as_f32(b, dtype, values):
    """A one-value fragment in f32."""
    return values if dtype == "f32" else b.frag.cast(values, type=frag("f32", 1), name="first32")


def _inside_row(b, config: NormConfig, thread, n, values):
    """``values`` with the tile's columns at or past ``n`` (the row's end) set to 0, by each value's column
    coordinate (``frag.coords``): a constant per value beside one thread part, so one compare and one select per
    value (where the row fills the tile it keeps every value)."""
    tile, tv = config.layouts()
    _rows, cols = b.frag.coords(thread, tv=tv, tile=tile, name=[f"{values.name}_rows", f"{values.name}_cols"])
    inside = b.frag.cmp(cols, n, pred="lt", name=f"{values.name}_inside")
    return b.frag.select(inside, values, b.const(0.0, f32, name=f"{values.name}_zero"), name=f"{values.name}_masked")


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
    config = config or choose_norm_config(max(n, 1), dtype, kind)
    check_config(op, config, dtype, n)
    config = as_norm_config(config, kind)
    y2d = empty_like(x2d, arg.kind)
    args.update(y=y2d, m=m, eps=float(eps))
    if m and n:
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
