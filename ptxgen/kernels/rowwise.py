"""Row-wise kernels (softmax, RMSNorm, LayerNorm): the tiling of rows over a CTA, the rule that chooses it, the checks
of the users' arguments and the launch — what ``ptxgen.kernels.softmax`` and ``ptxgen.kernels.norms`` share.

A CTA holds ``rows`` rows of at most ``cols`` columns in registers: ``threads`` threads per row, each with
``vectors`` 16-byte vectors of the row (8 bf16/f16 or 4 f32 values each). The TV layout comes from
``layoutc.make_layout_tv`` (threads ``(rows, threads)`` row-major, values ``(1, vec)``: one 16-byte vector per thread,
consecutive threads on consecutive vectors) repeated ``vectors`` times along the columns, so each of a warp's loads
covers 512 contiguous bytes. A row is read once and written once; its reductions are ``frag.reduce`` over the row
(across warps when ``threads > 32``: shared memory and a named barrier).

Example: ``choose_row_config(16384, "bf16")`` → ``RowConfig(dtype="bf16", threads=1024, vectors=2, rows=1,
ctas_per_sm=1)``: a (1, 16384) tile, TV ``(1024,(8,2)):(8,(1,8192))``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import layoutc as lc
from ptxgen.ir.suggest import did_you_mean

from .arguments import Arg, stream

ELEMENT_BYTES = {"bf16": 2, "f16": 2, "f32": 4}
VECTOR_BYTES = 16
MAX_VALUES = 32        # values a thread holds per row (the register budget: see choose_row_config)
MAX_THREADS = 1024     # a CTA's threads
MIN_BLOCK = 256        # short rows: several per CTA, so that a CTA has at least this many threads
SM_THREADS = 2048      # threads one SM holds
LONGEST_ROW = 16384    # the longest row the ops take


@dataclass(frozen=True)
class CachePolicy:
    """The gmem.load/store ``cache`` hints (spec/tile-ir.md §4.4) of a row kernel's three streams: ``x`` (read once),
    ``y`` (written once) and ``params`` (the weight and bias, which every row reads again)."""

    x: str
    y: str
    params: str


# RowConfig.cache → the hints. x is read once and y written once, so both may leave the caches first; the weight and
# bias are re-read by every CTA, so they may stay. The PTX ISA's read-once operator is ``.cs`` (evict-first in L1
# and L2: "streaming"); the L1-only priorities and the L2 policy are the alternatives the benchmark times beside it.
CACHE_POLICIES = {
    "default": CachePolicy("normal", "normal", "normal"),
    "stream": CachePolicy("streaming", "streaming", "evict_last"),
    "stream_evict_first": CachePolicy("evict_first", "streaming", "evict_last"),
    "stream_no_allocate": CachePolicy("no_allocate", "streaming", "evict_last"),
    "stream_l2": CachePolicy("l2_evict_first", "streaming", "evict_last"),
}
# what the ops choose: x read .L1::evict_first, y written .cs, the parameters kept. Against no hints, interleaved on the
# H100, +1.5-3% for RMSNorm and LayerNorm (N = 1k-16k, bf16), softmax within ±0.5%; "stream" (x read .cs) -0.5-2%,
# the L2 policy -2 to -25% (docs/gpu-runs/2026-11-26-s14.log section 2)
CHOSEN_CACHE = "stream_evict_first"


@dataclass(frozen=True)
class RowConfig:
    """A CTA of ``rows`` × ``threads`` threads holding ``rows`` rows of up to ``cols`` elements of ``dtype``;
    ``cache`` (keyword only) names the cache hints of its global accesses (``CACHE_POLICIES``): ``"default"`` none,
    ``"stream"`` x read with ``ld.global.cs``, y written with ``st.global.cs``, the weight and bias read with
    ``.L1::evict_last``; ``"stream_evict_first"`` / ``"stream_no_allocate"`` / ``"stream_l2"`` the same with x read
    ``.L1::evict_first`` / ``.L1::no_allocate`` / with an L2 evict-first policy."""

    dtype: str
    threads: int
    vectors: int
    rows: int = 1
    ctas_per_sm: int = 1
    cache: str = field(default="default", kw_only=True)

    @property
    def hints(self) -> CachePolicy:
        """The cache hints of ``cache``: ``RowConfig("bf16", 512, 4, cache="stream").hints`` →
        ``CachePolicy(x="streaming", y="streaming", params="evict_last")``. Pre: a valid cache name."""
        return CACHE_POLICIES[self.cache]

    @property
    def vec(self) -> int:
        """Elements per 16-byte vector: 8 for bf16 (a value mode ``8:1``), 4 for f32. Post: vec · element bytes = 16."""
        return VECTOR_BYTES // ELEMENT_BYTES[self.dtype]

    @property
    def cols(self) -> int:
        """The longest row the CTA holds: threads · vectors · vec (``RowConfig("f32", 256, 4).cols`` = 4096). Post:
        ``tile[1] == cols``."""
        return self.threads * self.vectors * self.vec

    @property
    def block(self) -> int:
        """Threads of the CTA: rows · threads (``RowConfig("f32", 256, 4, rows=2).block`` = 512). Post: ≤ 1024 for
        a valid config."""
        return self.threads * self.rows

    @property
    def tile(self) -> tuple:
        """The CTA's (rows, cols) tile: (2, 4096) for ``RowConfig("f32", 256, 4, rows=2)``, whose TV layout is
        ``layouts()[1]``. Post: ``tile[1] == cols``."""
        return (self.rows, self.cols)

    def validate(self) -> None:
        """The rules: a known dtype; threads a power of two from 1 to 1024; the block at most 1024 threads; at most
        MAX_VALUES values per thread; ctas_per_sm CTAs fit an SM's 2048 threads; a known cache policy.
        ``RowConfig("f32", 96, 1)`` →
        ``ValueError: RowConfig: threads must be a power of two from 1 to 1024, not 96``. Post: returns None only
        when every rule holds."""
        if self.dtype not in ELEMENT_BYTES:
            raise ValueError(f"RowConfig: dtype must be one of {', '.join(ELEMENT_BYTES)}, not {self.dtype!r}")
        if self.threads < 1 or self.threads & (self.threads - 1) or self.threads > MAX_THREADS:
            raise ValueError(f"RowConfig: threads must be a power of two from 1 to {MAX_THREADS}, not {self.threads}")
        if self.rows < 1 or self.block > MAX_THREADS:
            raise ValueError(f"RowConfig: rows · threads = {self.rows} · {self.threads} must be 1 to {MAX_THREADS}")
        if self.vectors < 1 or self.vectors * self.vec > MAX_VALUES:
            raise ValueError(f"RowConfig: vectors must be 1 to {MAX_VALUES // self.vec} for {self.dtype} (at most "
                             f"{MAX_VALUES} values per thread), not {self.vectors}")
        if self.ctas_per_sm < 1 or self.ctas_per_sm * self.block > SM_THREADS:
            raise ValueError(f"RowConfig: ctas_per_sm must be 1 to {SM_THREADS // self.block} (CTAs of {self.block} "
                             f"threads in an SM's {SM_THREADS}), not {self.ctas_per_sm}")
        if self.cache not in CACHE_POLICIES:
            raise ValueError(f"RowConfig: cache must be one of {', '.join(CACHE_POLICIES)}, not {self.cache!r}"
                             f"{did_you_mean(str(self.cache), CACHE_POLICIES)}")

    def layouts(self):
        """(tile, tv): the (rows, cols) tile and its TV layout ``(threads·rows, (vec, vectors))``, derived with
        ``make_layout_tv`` and repeated ``vectors`` times along the columns (copy j at column offset j·threads·vec,
        i.e. tile index offset j·rows·threads·vec). ``RowConfig("f32", 256, 4).layouts()`` →
        ``((1, 4096), (256,(4,4)):(4,(1,1024)))``. Post: the TV holds every tile element once."""
        tiler, tv = lc.make_layout_tv(lc.Layout((self.rows, self.threads), (self.threads, 1)),
                                      lc.Layout((1, self.vec)))
        repeat = lc.Layout(self.vectors, lc.product(tiler))
        return self.tile, lc.make_layout(tv[0], lc.make_layout(tv[1], repeat))


def cache_attrs(hint: str) -> dict:
    """The builder keyword of gmem.load/store's cache hint ``hint``: ``cache_attrs("streaming")`` →
    ``{"cache": "streaming"}``, ``cache_attrs("normal")`` → ``{}`` (the op's text stays as it was without hints).
    Post: ``b.gmem.load(..., **cache_attrs(h))`` carries ``h`` unless it is the default."""
    return {} if hint == "normal" else {"cache": hint}


def longest_row(dtype: str) -> int:
    """The longest row the row-wise ops take: 16384 elements (a CTA of 1024 threads × 16 values, or 512 × 32, e.g.
    the TV ``(1024,(4,4)):(4,(1,4096))``). Post: ``choose_row_config(dtype, n)`` holds any n up to it."""
    return LONGEST_ROW


def choose_row_config(n: int, dtype: str, max_values: int = 16, cache: str = CHOSEN_CACHE) -> RowConfig:
    """The configuration for rows of ``n`` elements: the fewest threads per row (a power of two, at least a warp)
    that hold the row with at most ``max_values`` values each, vectors = ⌈n / (vec · threads)⌉, rows per CTA so the
    CTA has MIN_BLOCK threads when a row needs fewer, and ``ctas_per_sm`` = max(1, 1024 / block): the register budget
    of 64 per thread (1024 threads per SM), which the kernels fit without spilling (softmax and both norms with 32
    values per thread: ``norms.choose_norm_config``), so that a 512-thread CTA still has a second one
    on its SM loading while it reduces; the cache hints ``cache`` (``CHOSEN_CACHE``). ``choose_row_config(1000,
    "f32")`` → ``RowConfig("f32", threads=64, vectors=4, rows=4, ctas_per_sm=4, cache="stream_evict_first")`` (tile
    (4, 1024)); ``choose_row_config(16384, "bf16", 32)`` → ``RowConfig("bf16", 512, 4, 1, 2, cache=
    "stream_evict_first")``. Pre: 1 ≤ n ≤ longest_row(dtype)."""
    vec = VECTOR_BYTES // ELEMENT_BYTES[dtype]
    vectors_per_row = -(-n // vec)
    per_thread = max(1, max_values // vec)
    threads = 32
    while threads * per_thread < vectors_per_row:
        threads *= 2
    vectors = -(-vectors_per_row // threads)
    rows = max(1, MIN_BLOCK // threads)
    return RowConfig(dtype, threads, vectors, rows, max(1, 1024 // (threads * rows)), cache=cache)


def check_config(op: str, config: RowConfig, dtype: str, n: int) -> None:
    """A forced configuration fits the call: valid, of x's dtype, holding rows of n elements (its tile (rows, cols)
    with cols ≥ n: ``softmax: config holds rows of up to 4096 elements but x's have 5000``). Post: returns only when
    it fits; TypeError/ValueError naming ``op`` otherwise."""
    if not isinstance(config, RowConfig):
        raise TypeError(f"{op}: config must be a RowConfig, not {type(config).__name__}")
    config.validate()
    if config.dtype != dtype:
        raise ValueError(f"{op}: config is for {config.dtype} but x is {dtype}")
    if config.cols < n:
        raise ValueError(f"{op}: config holds rows of up to {config.cols} elements but x's have {n}")


# -- the users' arguments ------------------------------------------------------------------------------------------

ROW_TYPES = ("bf16", "f16", "f32")
SPELLED = "bf16 (torch.bfloat16, ml_dtypes.bfloat16), f16 (torch.float16, numpy.float16) or f32 (torch.float32, " \
          "numpy.float32)"


class Operand(Arg):
    """One array argument of a row-wise op (an ``Arg`` that remembers its op): a (4, 4096) bf16 array reads as dtype
    "bf16", shape (4, 4096). Post: as ``Arg``'s."""

    __slots__ = ("op",)

    def __init__(self, op: str, name: str, x):
        super().__init__(op, name, x)
        self.op = op

    def check_dtype(self, want: str | None = None) -> str:
        """The element type, which must be one of ours (and ``want`` when given): ``softmax: x has dtype
        torch.int32; softmax takes bf16 (…), f16 (…) or f32 (…)``. Post: the result is in ``ROW_TYPES``."""
        if self.dtype not in ROW_TYPES:
            raise TypeError(f"{self.op}: {self.name} has dtype {self.shown}; {self.op} takes {SPELLED}")
        if want is not None and self.dtype != want:
            raise TypeError(f"{self.op}: {self.name} has dtype {self.shown} but x is {want}: pass it in x's dtype")
        return self.dtype


def rows_of(op: str, x: Operand):
    """x as a 2-D (M, N) array over its last dimension (a view where possible), checked: at least 1-D, N at most
    ``longest_row`` (N = 0 is rows of no element: the ops return an empty result, as torch's). → (x2d, M, N)."""
    if len(x.shape) == 0:
        raise ValueError(f"{op}: x must have at least one dimension, not shape ()")
    n = x.shape[-1]
    dtype = x.check_dtype()
    if n > longest_row(dtype):
        raise ValueError(f"{op}: x's rows have {n} elements; {op} holds a row in one CTA's registers: at most "
                         f"{longest_row(dtype)}")
    m = int(np.prod(x.shape[:-1], dtype=np.int64)) if len(x.shape) > 1 else 1
    value = x.value
    if x.kind == "torch" and value.stride(-1) != 1:
        value = value.contiguous()
    return value.reshape(m, n), m, n


def vector_of(op: str, name: str, v, n: int, dtype: str, kind: str):
    """An (N,) weight or bias of x's dtype and kind (numpy with numpy, CUDA with CUDA), as a contiguous 1-D array
    (layout ``N:1``). Post: shape (n,), unit stride, dtype ``dtype``; else TypeError/ValueError naming ``name``."""
    arg = Operand(op, name, v)
    if arg.kind != kind:
        raise TypeError(f"{op}: {name} is a {'numpy array' if arg.kind == 'numpy' else 'CUDA tensor'} but x is "
                        f"{'a numpy array' if kind == 'numpy' else 'a CUDA tensor'}: pass both the same way")
    arg.check_dtype(dtype)
    if arg.shape != (n,):
        raise ValueError(f"{op}: {name} must have shape ({n},) (x's last dimension), not {arg.shape}")
    value = arg.value
    return value.contiguous() if arg.kind == "torch" else np.ascontiguousarray(value)


def empty_like(x2d, kind: str):
    """An uninitialised array of ``x2d``'s shape and dtype, of the kind ``kind`` ("numpy", or "torch": on x2d's
    device), e.g. the (M, N) result of a (M, N):(N, 1) input. Post: same shape and dtype as ``x2d``."""
    if kind == "numpy":
        return np.empty(x2d.shape, x2d.dtype)
    import torch

    return torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)


# -- building once, running ---------------------------------------------------------------------------------------

_JIT = {}


def run(build, key, args: dict, kind: str) -> None:
    """Run the kernel ``build()`` (built, verified and compiled once per ``key``): in the CPU interpreter for numpy
    arguments, else on the GPU on torch's current stream. Post: the kernel has run to completion in the interpreter
    (numpy), or is queued on the stream (GPU); the same ``key`` never builds twice in a process."""
    if kind == "numpy":
        from ptxgen.interp import interpret

        module = _JIT.get(("module",) + key)
        if module is None:
            module = _JIT[("module",) + key] = build()
        interpret(module, args)
        return
    kern = _JIT.get(key)
    if kern is None:
        from ptxgen.runtime import jit

        kern = _JIT[key] = jit(build())
    kern(**args, stream=stream())
