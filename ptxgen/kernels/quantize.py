"""fp8 e4m3 quantization with DeepGEMM's fine-grained scales, written in the tile IR, and its numpy references.

- ``per_token_cast_to_fp8(x)`` → (q, scales): ``x`` (M, K) bf16/f16/f32, one scale per (row, 128-wide K block),
  scales (M, ⌈K/128⌉) float32 = amax / 448 with amax = max(|x| over the block, 1e-4) (DeepGEMM's clamp: an all-zero
  block gets a tiny scale, not 0), q = e4m3(x · (448 / amax)) rounded to nearest even — the operand A of
  ``fp8_gemm_nt``.
- ``per_block_cast_to_fp8(x)`` → (q, scales): one scale per 128 × 128 block, scales (⌈M/128⌉, ⌈K/128⌉) — the weight
  operand B.
- ``per_token_cast_to_fp8_reference``, ``per_block_cast_to_fp8_reference``: the same in numpy (f32 arithmetic, the
  kernels' bits); ``dequantize_per_token``, ``dequantize_per_block``: q · scale in float64 (tests' references).

Kernels: ``build_per_token(dtype)`` — CTAs of 128 threads over tiles of 16 rows × 128 columns, warp w holding rows w,
w + 4, w + 8, w + 12, each lane 4 consecutive columns of them; the row's amax is a ``frag.reduce`` (max) over the
warp; ``build_per_block(dtype)`` — one CTA per 128 × 128 block, warp w holding rows 32w … 32w + 31: each warp's
maximum is a ``frag.reduce`` over the warp seen as one row, the four meet in shared memory. Elements past M or K
read 0 (no effect on a maximum) and are not stored, so any M, K ≥ 0 run. Their ``variant="wide"`` forms
(``build_per_token_wide``, ``build_per_block_wide``): 16-byte loads (8 bf16) and 8-byte e4m3 stores, per token 32-row
tiles (fewer for short inputs), per block 256 threads at 3 CTAs per SM; ``OP_VARIANTS`` picks the ops' kernels
on the GPU (wide by default).

A repeated GPU call of a torch tensor with the signature of an earlier one (shape, strides, dtype, device, address mod
16, the scale layout, the variant, torch's stream) takes the remembered call site (``QuantizeCall``): no checks, the
outputs allocated by ``torch.empty`` / ``torch.empty_strided``, three addresses written, one launch.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

import layoutc as lc

from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32, smem
from ptxgen.ir.suggest import did_you_mean

from . import arguments
from .arguments import Arg, as_callers, row_major, stream
from .fast_call import remember

BLOCK = 128           # columns (and, per block, rows) per scale
FP8_MAX = 448.0       # e4m3's largest finite value
AMAX_FLOOR = 1e-4     # DeepGEMM's clamp of a block's maximum
TOKEN_ROWS = 16       # rows per CTA of the per-token kernel
INPUT_TYPES = ("bf16", "f16", "f32")

# per token: thread l + 32w, value e + 4r → row w + 4r, column 4l + e of the (16, 128) tile (index row + 16·column)
TOKEN_TV = lc.Layout(((32, 4), (4, TOKEN_ROWS // 4)), ((4 * TOKEN_ROWS, 1), (TOKEN_ROWS, 4)))
# the scale of each value's row in a (16, 1) window
TOKEN_SCALE_TV = lc.Layout(((32, 4), (4, TOKEN_ROWS // 4)), ((0, 1), (0, 4)))
# per block: thread l + 32w, value e + 4r → row 32w + r, column 4l + e of the (128, 128) block
BLOCK_TV = lc.Layout(((32, 4), (4, 32)), ((4 * BLOCK, 32), (BLOCK, 1)))
# the same values seen as a (4, 4096) tile whose row w is warp w's: a frag.reduce over it is each warp's maximum
WARP_ROW_TV = lc.Layout(((32, 4), (4, 32)), ((4 * 128, 1), (4, 16)))
# every thread's 128 values as one row of a (128, 128) tile: a frag.reduce over it is each thread's maximum
THREAD_ROW_TV = lc.Layout(((32, 4), 128), ((1, 32), 128))


def _quantize(b, x, amax):
    """(q, scale) of the f32 values ``x`` whose block maximum |x| is ``amax``: amax clamped to 1e-4, q = e4m3(x ·
    (448 / amax)), scale = amax / 448 (f32 arithmetic, DeepGEMM's)."""
    floor = b.const(AMAX_FLOOR, f32, name="floor")
    top = b.const(FP8_MAX, f32, name="top")
    amax = b.frag.max(amax, floor, name="amax")
    inverse = b.frag.div(top, amax, name="inverse")
    scaled = b.frag.mul(x, inverse, name="scaled")
    q = b.frag.cast(scaled, type=frag("e4m3", x.type.shape), name="q_values")
    return q, b.frag.div(amax, top, name="scale")


def _token_tile_start(dtype: str, rows: int):
    """The opening of both per-token kernels, CTAs of 128 threads over tiles of ``rows`` × 128 columns: → (kb, b,
    %thread, %row0 (the tile's first row), %block (its 128-column block), %col0)."""
    kb = KernelBuilder("per_token_cast_to_fp8", grid=(cdiv("m", rows), cdiv("k", BLOCK), 1), block=(128, 1, 1),
                       x=gtensor(dtype, 2), q=gtensor("e4m3", 2), scales=gtensor("f32", 2), m=i32, k=i32)
    b = kb.b
    thread = b.gpu.thread_id(dim="x", name="thread")
    row0 = b.arith.mul(b.gpu.block_id(dim="x", name="row_tile"), b.const(rows, i32, name="rows"), name="row0")
    block = b.gpu.block_id(dim="y", name="block")
    col0 = b.arith.mul(block, b.const(BLOCK, i32, name="cols"), name="col0")
    return kb, b, thread, row0, block, col0


def build_per_token(dtype: str = "bf16", variant: str = "narrow", rows_per_thread: int = 4):
    """``variant`` "wide": ``build_per_token_wide(dtype, rows_per_thread)``; "narrow" (below). The per-token kernel
    ``@per_token_cast_to_fp8(%x, %q, %scales, %m, %k)``: ``%x`` (M, K) ``dtype``, ``%q``
    (M, K) e4m3, ``%scales`` (M, ⌈K/128⌉) f32 (any strides: DeepGEMM's M-major layout too); grid (⌈M/16⌉, ⌈K/128⌉).
    Post: ``%q``, ``%scales`` = ``per_token_cast_to_fp8_reference(x)``."""
    _check_dtype(dtype)
    if _check_variant(variant) == "wide":
        return build_per_token_wide(dtype, rows_per_thread)
    kb, b, thread, row0, block, col0 = _token_tile_start(dtype, TOKEN_ROWS)
    values = frag("f32", (4, TOKEN_ROWS // 4))
    x = b.gmem.load(b.gmem.tile(kb["x"], row0, col0, shape=(TOKEN_ROWS, BLOCK), name="x_tile"), thread, tv=TOKEN_TV,
                    type=frag(dtype, values.shape), name="x_values")
    xf = x if dtype == "f32" else b.frag.cast(x, type=values, name="xf")
    magnitude = b.frag.abs(xf, name="magnitude")
    amax = b.frag.reduce(magnitude, thread, tv=TOKEN_TV, tile=(TOKEN_ROWS, BLOCK), mode=1, kind="max", type=values,
                         name="row_amax")
    q, scale = _quantize(b, xf, amax)
    b.gmem.store(b.gmem.tile(kb["q"], row0, col0, shape=(TOKEN_ROWS, BLOCK), name="q_tile"), thread, q, tv=TOKEN_TV)
    lane0 = b.arith.cmp(b.gpu.lane_id(name="lane"), b.const(0, i32, name="c0"), pred="eq", name="lane0")
    with b.scf.if_(lane0).then:
        window = b.gmem.tile(kb["scales"], row0, block, shape=(TOKEN_ROWS, 1), name="scale_tile")
        b.gmem.store(window, thread, scale, tv=TOKEN_SCALE_TV)
        b.scf.yield_()
    return kb.module("ptxgen/kernels/quantize")


def build_per_block(dtype: str = "bf16", variant: str = "narrow"):
    """``variant`` "wide": ``build_per_block_wide(dtype)``; "narrow" (below). The per-block kernel
    ``@per_block_cast_to_fp8(%x, %q, %scales, %m, %k)``: ``%x`` (M, K) ``dtype``, ``%q``
    (M, K) e4m3, ``%scales`` (⌈M/128⌉, ⌈K/128⌉) f32; grid (⌈K/128⌉, ⌈M/128⌉), one CTA per block.
    Post: ``%q``, ``%scales`` = ``per_block_cast_to_fp8_reference(x)``."""
    _check_dtype(dtype)
    if _check_variant(variant) == "wide":
        return build_per_block_wide(dtype)
    kb = KernelBuilder("per_block_cast_to_fp8", grid=(cdiv("k", BLOCK), cdiv("m", BLOCK), 1), block=(128, 1, 1),
                       x=gtensor(dtype, 2), q=gtensor("e4m3", 2), scales=gtensor("f32", 2), m=i32, k=i32)
    b = kb.b
    values = frag("f32", (4, 32))
    maxima = b.smem.alloc(type=smem("f32", "4:1"), align=16, name="maxima")
    thread = b.gpu.thread_id(dim="x", name="thread")
    warp = b.gpu.warp_id(name="warp")
    block_k = b.gpu.block_id(dim="x", name="block_k")
    block_m = b.gpu.block_id(dim="y", name="block_m")
    c_block = b.const(BLOCK, i32, name="c_block")
    row0 = b.arith.mul(block_m, c_block, name="row0")
    col0 = b.arith.mul(block_k, c_block, name="col0")
    x = b.gmem.load(b.gmem.tile(kb["x"], row0, col0, shape=(BLOCK, BLOCK), name="x_tile"), thread, tv=BLOCK_TV,
                    type=frag(dtype, values.shape), name="x_values")
    xf = x if dtype == "f32" else b.frag.cast(x, type=values, name="xf")
    magnitude = b.frag.abs(xf, name="magnitude")
    warp_max = b.frag.reduce(magnitude, thread, tv=WARP_ROW_TV, tile=(4, 32 * 128), mode=1, kind="max", type=values,
                             name="warp_max")
    c0 = b.const(0, i32, name="c0")
    lane0 = b.arith.cmp(b.gpu.lane_id(name="lane"), c0, pred="eq", name="lane0")
    with b.scf.if_(lane0).then:
        one = b.frag.slice(warp_max, offset=0, type=frag("f32", 1), name="warp_max0")
        b.smem.store(maxima, warp, one, tv=lc.Layout((4, 1), (1, 0)))
        b.scf.yield_()
    b.barrier.cta()
    # value e + 4r of every thread reads warp e's maximum: the thread's maximum over its values is the block's
    gathered = b.smem.load(maxima, thread, tv=lc.Layout(((32, 4), (4, 32)), ((0, 0), (1, 0))), type=values,
                           name="gathered")
    amax = b.frag.reduce(gathered, thread, tv=THREAD_ROW_TV, tile=(128, 128), mode=1, kind="max", type=values,
                         name="block_amax")
    q, scale = _quantize(b, xf, amax)
    b.gmem.store(b.gmem.tile(kb["q"], row0, col0, shape=(BLOCK, BLOCK), name="q_tile"), thread, q, tv=BLOCK_TV)
    first = b.arith.cmp(thread, c0, pred="eq", name="first")
    with b.scf.if_(first).then:
        one = b.frag.slice(scale, offset=0, type=frag("f32", 1), name="scale0")
        window = b.gmem.tile(kb["scales"], block_m, block_k, shape=(1, 1), name="scale_tile")
        b.gmem.store(window, thread, one, tv=lc.Layout((128, 1), (0, 0)))
        b.scf.yield_()
    return kb.module("ptxgen/kernels/quantize")


# -- the wide kernels: 16-byte loads, more bytes in flight per SM -----------------------------------------------------

VARIANTS = ("narrow", "wide")   # the kernels: the first ones (8-byte loads), the wide ones (16-byte loads)
WIDE_LANES = 16                 # lanes sharing a row of 128 columns, 8 consecutive columns each
WIDE_BLOCK_THREADS = 256        # threads of the wide per-block kernel's CTA
WIDE_BLOCK_CTAS = 3             # its CTAs per SM (≤ 85 registers): 96 KiB of input in flight per SM


def wide_token_tv(rows_per_thread: int) -> lc.Layout:
    """The wide per-token kernel's TV over its (R, 128) tile, R = 8·rows_per_thread (tile index row + R·column):
    lane l0 + 16·l1 of warp w, value e + 8·r → row l1 + 2w + 8r, column 8·l0 + e. ``wide_token_tv(4)`` =
    ((16,2,4),(8,4)):((256,1,2),(32,8)). Post: a bijection onto the tile; each thread's 8 values of a row are
    consecutive columns (one 16-byte bf16 load, one 8-byte e4m3 store) and a warp's access covers 2 whole rows."""
    rows = 8 * rows_per_thread
    return lc.Layout(((WIDE_LANES, 2, 4), (8, rows_per_thread)), ((8 * rows, 1, 2), (rows, 8)))


def wide_token_scale_tv(rows_per_thread: int) -> lc.Layout:
    """The rows of ``wide_token_tv``'s threads in the (R, 1) window of scales, one value per row a thread holds:
    ``wide_token_scale_tv(4)`` = ((16,2,4),4):((0,1,2),8). The 16 lanes of a row store the same scale to the same
    address (one transaction). Post: value r of thread t is the row of its values 8r … 8r + 7."""
    return lc.Layout(((WIDE_LANES, 2, 4), rows_per_thread), ((0, 1, 2), 8))


# the wide per-block kernel's TV over a (128, 128) block: lane l0 + 16·l1 of warp w (8 warps), value e + 8·r → row
# l1 + 2w + 16r, column 8·l0 + e; over the block seen as one (1, 16384) row it is a TV whose single row is the block
WIDE_BLOCK_TV = lc.Layout(((WIDE_LANES, 2, 8), (8, 8)), ((8 * BLOCK, 1, 2), (BLOCK, 16)))


def build_per_token_wide(dtype: str = "bf16", rows_per_thread: int = 4):
    """The wide per-token kernel ``@per_token_cast_to_fp8(%x, %q, %scales, %m, %k)``, the arguments and result of
    ``build_per_token``'s: CTAs of 128 threads over tiles of R = 8·rows_per_thread rows × 128 columns (32 × 128 for
    4), grid (⌈M/R⌉, ⌈K/128⌉), ``wide_token_tv``: each thread loads 8 consecutive columns of a row at once (16
    bytes of bf16) and stores their 8 e4m3 codes at once; the row's amax is a ``frag.reduce`` over its 8 values and
    the 16 lanes sharing it (4 shuffles). Post: ``%q``, ``%scales`` = ``per_token_cast_to_fp8_reference(x)``."""
    _check_dtype(dtype)
    if rows_per_thread not in (1, 2, 4, 8):
        raise ValueError(f"quantize: rows_per_thread must be 1, 2, 4 or 8, not {rows_per_thread!r}")
    rows = 8 * rows_per_thread
    tv = wide_token_tv(rows_per_thread)
    kb, b, thread, row0, block, col0 = _token_tile_start(dtype, rows)
    values = frag("f32", (8, rows_per_thread))
    x = b.gmem.load(b.gmem.tile(kb["x"], row0, col0, shape=(rows, BLOCK), name="x_tile"), thread, tv=tv,
                    type=frag(dtype, values.shape), name="x_values")
    amax = b.frag.reduce(b.frag.abs(x, name="magnitude"), thread, tv=tv, tile=(rows, BLOCK), mode=1, kind="max",
                         type=x.type, name="row_amax")
    q, scale = _quantize(b, _as_f32(b, x, values, "xf"), _as_f32(b, amax, values, "amax_f32"))
    b.gmem.store(b.gmem.tile(kb["q"], row0, col0, shape=(rows, BLOCK), name="q_tile"), thread, q, tv=tv)
    # value 8r is row r's scale: one per row the thread holds
    per_row = b.frag.slice(scale, offset=0, type=frag("f32", 1), name="scale_row0")
    for r in range(1, rows_per_thread):
        nxt = b.frag.slice(scale, offset=8 * r, type=frag("f32", 1), name=f"scale_row{r}")
        per_row = b.frag.concat(per_row, nxt, type=frag("f32", r + 1), name=f"scale_rows{r}")
    window = b.gmem.tile(kb["scales"], row0, block, shape=(rows, 1), name="scale_tile")
    b.gmem.store(window, thread, per_row, tv=wide_token_scale_tv(rows_per_thread))
    return kb.module("ptxgen/kernels/quantize")


def build_per_block_wide(dtype: str = "bf16"):
    """The wide per-block kernel ``@per_block_cast_to_fp8(%x, %q, %scales, %m, %k)``, the arguments, grid and result
    of ``build_per_block``'s: one CTA of 256 threads per 128 × 128 block, ``WIDE_BLOCK_TV``: each thread loads 8
    rows of 8 consecutive columns (16 bytes of bf16 each, 64 values: half the narrow kernel's registers) and stores
    8 bytes of e4m3 per row; the block's amax is one ``frag.reduce`` over the block seen as a single row (per thread,
    then a warp butterfly, then the 8 warps' partials through shared memory). Post: ``%q``, ``%scales`` =
    ``per_block_cast_to_fp8_reference(x)``."""
    _check_dtype(dtype)
    kb = KernelBuilder("per_block_cast_to_fp8", grid=(cdiv("k", BLOCK), cdiv("m", BLOCK), 1),
                       block=(WIDE_BLOCK_THREADS, 1, 1), min_ctas_per_sm=WIDE_BLOCK_CTAS,
                       x=gtensor(dtype, 2), q=gtensor("e4m3", 2), scales=gtensor("f32", 2), m=i32, k=i32)
    b = kb.b
    values = frag("f32", (8, 8))
    thread = b.gpu.thread_id(dim="x", name="thread")
    block_k = b.gpu.block_id(dim="x", name="block_k")
    block_m = b.gpu.block_id(dim="y", name="block_m")
    c_block = b.const(BLOCK, i32, name="c_block")
    row0 = b.arith.mul(block_m, c_block, name="row0")
    col0 = b.arith.mul(block_k, c_block, name="col0")
    x = b.gmem.load(b.gmem.tile(kb["x"], row0, col0, shape=(BLOCK, BLOCK), name="x_tile"), thread,
                    tv=WIDE_BLOCK_TV, type=frag(dtype, values.shape), name="x_values")
    amax = b.frag.reduce(b.frag.abs(x, name="magnitude"), thread, tv=WIDE_BLOCK_TV, tile=(1, BLOCK * BLOCK), mode=1,
                         kind="max", type=x.type, name="block_amax")
    q, scale = _quantize(b, _as_f32(b, x, values, "xf"), _as_f32(b, amax, values, "amax_f32"))
    b.gmem.store(b.gmem.tile(kb["q"], row0, col0, shape=(BLOCK, BLOCK), name="q_tile"), thread, q,
                 tv=WIDE_BLOCK_TV)
    first = b.arith.cmp(thread, b.const(0, i32, name="c0"), pred="eq", name="first")
    with b.scf.if_(first).then:
        one = b.frag.slice(scale, offset=0, type=frag("f32", 1), name="scale0")
        window = b.gmem.tile(kb["scales"], block_m, block_k, shape=(1, 1), name="scale_tile")
        b.gmem.store(window, thread, one, tv=lc.Layout((WIDE_BLOCK_THREADS, 1), (0, 0)))
        b.scf.yield_()
    return kb.module("ptxgen/kernels/quantize")


def _as_f32(b, x, values, name: str):
    """``x`` as the f32 fragment ``values`` (itself when it is one). The wide kernels take the amax of the input's
    own type — |x| and max are exact in bf16/f16, so the same bits as in f32 — and widen afterwards: the packed
    input is what stays live across the reduction, not its f32 copy."""
    return x if x.type.dtype == values.dtype else b.frag.cast(x, type=values, name=name)


def _check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"quantize: variant must be one of {', '.join(VARIANTS)}, not {variant!r}"
                         f"{did_you_mean(str(variant), VARIANTS)}")
    return variant


def _check_dtype(dtype: str) -> None:
    if dtype not in INPUT_TYPES:
        raise ValueError(f"quantize: dtype must be one of {', '.join(INPUT_TYPES)}, not {dtype!r}")


# -- the ops -----------------------------------------------------------------------------------------------------------

_KERNELS = {}   # (kind, dtype, variant, rows per thread) -> Module
_JIT = {}       # (kind, dtype, variant, rows per thread) -> JitKernel
# the kernels the ops launch on the GPU, per kind ("token", "block"): a name of VARIANTS. The interpreter runs the
# narrow ones (the same bits). The benchmark sets them to time one against the other. Wide, kernel time ÷ copy's
# (docs/gpu-runs/2026-11-26-s18.log section 12): per token 0.92-0.94 against 0.86-0.91 (4096-32768 rows x 7168,
# 7168 x 16384), 0.87 against 0.72 at 4096 x 2048; per block 0.88-0.98 against 0.71-0.75 (0.74 against 0.79 at
# 4096 x 2048)
OP_VARIANTS = {"token": "wide", "block": "wide"}
WIDE_TOKEN_CTAS = 264   # the wide per-token kernel's fewest CTAs (2 per SM) before its tiles shrink


def _module(kind: str, dtype: str, variant: str = "narrow", rows_per_thread: int = 4):
    key = (kind, dtype, variant, rows_per_thread)
    if key not in _KERNELS:
        _KERNELS[key] = (build_per_token(dtype, variant, rows_per_thread) if kind == "token"
                         else build_per_block(dtype, variant))
    return _KERNELS[key]


def _device_kernel(kind: str, dtype: str, m: int, k: int) -> tuple:
    """(kind, dtype, variant, rows per thread) of the GPU kernel for an (m, k) input: ``OP_VARIANTS[kind]``; the wide
    per-token kernel's tiles shrink (32 → 16 → 8 rows) while they give fewer than WIDE_TOKEN_CTAS CTAs, so that a
    short input still fills the SMs: (128, 7168) → 16-row tiles, 448 CTAs. Post: ``_module(*result)`` is it."""
    variant = OP_VARIANTS[kind]
    rows_per_thread = 4
    if kind == "token" and variant == "wide":
        blocks = -(-k // BLOCK)
        while rows_per_thread > 1 and -(-m // (8 * rows_per_thread)) * blocks < WIDE_TOKEN_CTAS:
            rows_per_thread //= 2
    return kind, dtype, variant, rows_per_thread


def _input(op: str, x):
    """``x`` read and checked (``Arg``): 2-D, bf16/f16/f32, numpy or a CUDA tensor (a DLPack array as torch's).
    Post: the Arg's dtype is in INPUT_TYPES and its shape (M, K)."""
    arg = Arg(op, "x", x)
    arg.check_dtype(op, INPUT_TYPES)
    arg.check_rank(op, 2, "(M, K)")
    return arg


def _run(kind: str, op: str, x, scale_shape, scales_out=None, fast_key=None):
    """(q, scales) of ``x`` by the ``kind`` kernel: numpy in the interpreter; a CUDA tensor through the prepared call
    site of its signature, remembered under ``fast_key`` (``_fast_key``'s) for the repeated call (``QuantizeCall``).
    ``scales_out``: (strides of) the scales (default row-major ``scale_shape``)."""
    arg = _input(op, x)
    dtype, where, x = arg.dtype, arg.kind, arg.value
    m, k = x.shape
    if where == "numpy":
        q = np.zeros((m, k), ml_dtypes.float8_e4m3fn)
        scales = np.zeros(scale_shape, np.float32) if scales_out is None else scales_out
        if m and k:
            from ptxgen.interp import interpret

            interpret(_module(kind, dtype), {"x": x, "q": q, "scales": scales, "m": m, "k": k})
        return q, scales
    import torch

    q = torch.empty((m, k), dtype=torch.float8_e4m3fn, device=x.device)
    strides = scales_out or row_major(scale_shape)
    scales = torch.empty_strided(scale_shape, strides, dtype=torch.float32, device=x.device)
    if m and k:
        choice = _device_kernel(kind, dtype, m, k)
        kern = _JIT.get(choice)
        if kern is None:
            from ptxgen.runtime import jit

            kern = _JIT[choice] = jit(_module(*choice))
        site = kern.prepare(x=x, q=q, scales=scales, m=m, k=k, stream=stream())
        site()
        if fast_key is not None:
            remember(_FAST, fast_key, QuantizeCall(site, (m, k), scale_shape, strides, x.device))
    return q, scales


def per_token_cast_to_fp8(x, *, tma_aligned_scales: bool = False):
    """``x`` (M, K) bf16/f16/f32 (numpy: the interpreter; a CUDA tensor: the GPU) → (q (M, K) e4m3, scales
    (M, ⌈K/128⌉) float32): one scale per (row, 128-wide K block), ``amax / 448`` with amax = max(|x|, 1e-4) over the
    block, q = e4m3(x · (448 / amax)). ``tma_aligned_scales``: the scales stored M-major with M padded to a multiple
    of 4 (DeepGEMM's layout, ``fp8.get_mn_major_tma_aligned_tensor``'s), strides (1, aligned M).
    Post: bit-identical to ``per_token_cast_to_fp8_reference(x)``; ``dequantize_per_token(q, scales)`` ≈ x."""
    op = "per_token_cast_to_fp8"
    key = _fast_key("token", x, tma_aligned_scales)
    if key is not None:
        call = _FAST.get(key)
        if call is not None:
            return call(x.data_ptr())
    arg = _input(op, x)
    x = arg.value
    m, k = x.shape
    kb = -(-k // BLOCK)
    out = None
    if tma_aligned_scales:
        aligned = -(-m // 4) * 4
        # numpy: the scales array itself (the interpreter writes into it); torch: the strides of the one allocated
        out = np.zeros((kb, aligned), np.float32).T[:m] if isinstance(x, np.ndarray) else (1, aligned)
    return tuple(as_callers(r, [arg]) for r in _run("token", op, x, (m, kb), out, key))


def per_block_cast_to_fp8(x):
    """``x`` (M, K) bf16/f16/f32 → (q (M, K) e4m3, scales (⌈M/128⌉, ⌈K/128⌉) float32): one scale per 128 × 128 block
    (DeepGEMM's weight quantization), amax / 448 with amax = max(|x|, 1e-4) over the block.
    Post: bit-identical to ``per_block_cast_to_fp8_reference(x)``; ``dequantize_per_block(q, scales)`` ≈ x."""
    op = "per_block_cast_to_fp8"
    key = _fast_key("block", x, False)
    if key is not None:
        call = _FAST.get(key)
        if call is not None:
            return call(x.data_ptr())
    arg = _input(op, x)
    m, k = arg.shape
    return tuple(as_callers(r, [arg]) for r in _run("block", op, arg.value, (-(-m // BLOCK), -(-k // BLOCK)),
                                                    fast_key=key))


# -- the repeated GPU call ---------------------------------------------------------------------------------------------

_FAST = {}      # _fast_key(...) -> QuantizeCall


def _fast_key(kind: str, x, tma_aligned_scales) -> tuple | None:
    """The signature of a GPU call (``fast_call.signature_key``'s per tensor: shape, strides, dtype, device, address
    mod 16), with the kind, the scale layout, the kernel variant and torch's current stream; None unless ``x`` is a
    torch tensor (numpy and DLPack arrays take the checked path). Post: equal keys pass every check alike and launch
    the same kernel on the same stream."""
    if type(x) not in arguments.TORCH[0]:
        return None
    return (kind, x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15, bool(tma_aligned_scales),
            OP_VARIANTS[kind], arguments.TORCH[2](0))


class QuantizeCall:
    """A quantizer's GPU call of one signature after its first call: the prepared call site, its three pointer slots
    (x, q, scales) and what allocates the outputs. ``call(address of x)`` → (q, scales), fresh ``torch.empty`` /
    ``torch.empty_strided`` tensors of the first call's shapes and strides, written by one launch of the site with
    the new addresses (m, k and the grid as packed: the signature fixes them). ``calls`` counts the launches.
    Post: the launch's argument block equals the one the checked path packs for the same tensors."""

    __slots__ = ("site", "block", "x_slot", "q_slot", "scales_slot", "q_shape", "scales_shape", "scales_strides",
                 "device", "empty", "empty_strided", "fp8", "f32", "calls")

    def __init__(self, site, q_shape, scales_shape, scales_strides, device):
        import torch

        self.site, self.block = site, site.block_launch
        self.x_slot, self.q_slot, self.scales_slot = (site.tensor_slot(name)[1] // 8 for name in ("x", "q", "scales"))
        self.q_shape, self.scales_shape = tuple(q_shape), tuple(scales_shape)
        self.scales_strides = tuple(scales_strides)
        self.device, self.empty, self.empty_strided = device, torch.empty, torch.empty_strided
        self.fp8, self.f32 = torch.float8_e4m3fn, torch.float32
        self.calls = 0
        # every call swaps in all three addresses: the site need not keep the first call's tensors alive
        site.arguments.clear()

    def __call__(self, x_address: int):
        q = self.empty(self.q_shape, dtype=self.fp8, device=self.device)
        scales = self.empty_strided(self.scales_shape, self.scales_strides, dtype=self.f32, device=self.device)
        block = self.block
        u64 = block.u64
        u64[self.x_slot] = x_address
        u64[self.q_slot] = q.data_ptr()
        u64[self.scales_slot] = scales.data_ptr()
        err = block.cu_launch(block.cfg, block.handle, block.address, 0)[0]
        if err:
            block.failed(err)
        self.calls += 1
        return q, scales


# -- numpy references --------------------------------------------------------------------------------------------------

def _blocked(x, rows: int):
    """``x`` as f32, zero-padded to whole blocks, viewed (M/rows, rows, K/128, 128)."""
    m, k = x.shape
    mp, kp = -(-m // rows) * rows, -(-k // BLOCK) * BLOCK
    padded = np.zeros((mp, kp), np.float32)
    padded[:m, :k] = np.asarray(x, dtype=np.float32)
    return padded.reshape(mp // rows, rows, kp // BLOCK, BLOCK)


def _cast(blocks, amax, m: int, k: int):
    amax = np.maximum(amax, np.float32(AMAX_FLOOR)).astype(np.float32)
    with np.errstate(invalid="ignore"):   # inf · (448 / inf) = NaN, as on the GPU: a value, not a warning
        scaled = blocks * (np.float32(FP8_MAX) / amax)
    q = scaled.astype(ml_dtypes.float8_e4m3fn).reshape(blocks.shape[0] * blocks.shape[1], -1)[:m, :k]
    return q, amax


def per_token_cast_to_fp8_reference(x):
    """numpy: (q, scales) of ``per_token_cast_to_fp8`` (f32 arithmetic, as the kernel and DeepGEMM's
    ``per_token_cast_to_fp8``). ``per_token_cast_to_fp8_reference(np.full((1, 3), 2.0))`` → q [[448, 448, 448]],
    scales [[2/448]]."""
    m, k = x.shape
    blocks = _blocked(x, 1)
    amax = np.abs(blocks).max(axis=3, keepdims=True)
    q, amax = _cast(blocks, amax, m, k)
    return q, (amax / np.float32(FP8_MAX)).reshape(-(-m // 1), -1).astype(np.float32)


def per_block_cast_to_fp8_reference(x):
    """numpy: (q, scales) of ``per_block_cast_to_fp8`` (DeepGEMM's ``per_block_cast_to_fp8``): a (200, 300) x gives
    q (200, 300) e4m3 and scales (2, 3) float32. Post: ``per_block_cast_to_fp8(x)`` equals it bit for bit."""
    m, k = x.shape
    blocks = _blocked(x, BLOCK)
    amax = np.abs(blocks).max(axis=(1, 3), keepdims=True)
    q, amax = _cast(blocks, amax, m, k)
    return q, (amax / np.float32(FP8_MAX)).reshape(blocks.shape[0], blocks.shape[2]).astype(np.float32)


def dequantize_per_token(q, scales):
    """float64 q · scale of its (row, 128-wide K block): the value an (M, K) e4m3 operand with (M, ⌈K/128⌉) scales
    stands for. Post: shape q.shape."""
    k = q.shape[1]
    return np.asarray(q).astype(np.float64) * np.repeat(np.asarray(scales, np.float64), BLOCK, axis=1)[:, :k]


def dequantize_per_block(q, scales):
    """float64 q · scale of its 128 × 128 block (an (N, K) operand with (⌈N/128⌉, ⌈K/128⌉) scales): element (r, c)
    times ``scales[r // 128, c // 128]``. Post: shape q.shape."""
    m, k = q.shape
    full = np.repeat(np.repeat(np.asarray(scales, np.float64), BLOCK, axis=0), BLOCK, axis=1)[:m, :k]
    return np.asarray(q).astype(np.float64) * full
