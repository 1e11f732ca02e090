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
read 0 (no effect on a maximum) and are not stored, so any M, K ≥ 0 run.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

import layoutc as lc

from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, i32, smem

from .arguments import Arg, as_callers, stream

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


def build_per_token(dtype: str = "bf16"):
    """The per-token kernel ``@per_token_cast_to_fp8(%x, %q, %scales, %m, %k)``: ``%x`` (M, K) ``dtype``, ``%q``
    (M, K) e4m3, ``%scales`` (M, ⌈K/128⌉) f32 (any strides: DeepGEMM's M-major layout too); grid (⌈M/16⌉, ⌈K/128⌉).
    Post: ``%q``, ``%scales`` = ``per_token_cast_to_fp8_reference(x)``."""
    _check_dtype(dtype)
    kb = KernelBuilder("per_token_cast_to_fp8", grid=(cdiv("m", TOKEN_ROWS), cdiv("k", BLOCK), 1), block=(128, 1, 1),
                       x=gtensor(dtype, 2), q=gtensor("e4m3", 2), scales=gtensor("f32", 2), m=i32, k=i32)
    b = kb.b
    values = frag("f32", (4, TOKEN_ROWS // 4))
    thread = b.gpu.thread_id(dim="x", name="thread")
    row0 = b.arith.mul(b.gpu.block_id(dim="x", name="row_tile"), b.const(TOKEN_ROWS, i32, name="rows"), name="row0")
    block = b.gpu.block_id(dim="y", name="block")
    col0 = b.arith.mul(block, b.const(BLOCK, i32, name="cols"), name="col0")
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


def build_per_block(dtype: str = "bf16"):
    """The per-block kernel ``@per_block_cast_to_fp8(%x, %q, %scales, %m, %k)``: ``%x`` (M, K) ``dtype``, ``%q``
    (M, K) e4m3, ``%scales`` (⌈M/128⌉, ⌈K/128⌉) f32; grid (⌈K/128⌉, ⌈M/128⌉), one CTA per block.
    Post: ``%q``, ``%scales`` = ``per_block_cast_to_fp8_reference(x)``."""
    _check_dtype(dtype)
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


def _check_dtype(dtype: str) -> None:
    if dtype not in INPUT_TYPES:
        raise ValueError(f"quantize: dtype must be one of {', '.join(INPUT_TYPES)}, not {dtype!r}")


# -- the ops -----------------------------------------------------------------------------------------------------------

_KERNELS = {}   # (kind, dtype) -> Module
_JIT = {}       # (kind, dtype) -> JitKernel


def _module(kind: str, dtype: str):
    key = (kind, dtype)
    if key not in _KERNELS:
        _KERNELS[key] = (build_per_token if kind == "token" else build_per_block)(dtype)
    return _KERNELS[key]


def _input(op: str, x):
    """``x`` read and checked (``Arg``): 2-D, bf16/f16/f32, numpy or a CUDA tensor (a DLPack array as torch's).
    Post: the Arg's dtype is in INPUT_TYPES and its shape (M, K)."""
    arg = Arg(op, "x", x)
    arg.check_dtype(op, INPUT_TYPES)
    arg.check_rank(op, 2, "(M, K)")
    return arg


def _run(kind: str, op: str, x, scale_shape, scales_out=None):
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
    scales = torch.empty(scale_shape, dtype=torch.float32, device=x.device) if scales_out is None else scales_out
    if m and k:
        key = (kind, dtype)
        kern = _JIT.get(key)
        if kern is None:
            from ptxgen.runtime import jit

            kern = _JIT[key] = jit(_module(kind, dtype))
        kern(x=x, q=q, scales=scales, m=m, k=k, stream=stream())
    return q, scales


def per_token_cast_to_fp8(x, *, tma_aligned_scales: bool = False):
    """``x`` (M, K) bf16/f16/f32 (numpy: the interpreter; a CUDA tensor: the GPU) → (q (M, K) e4m3, scales
    (M, ⌈K/128⌉) float32): one scale per (row, 128-wide K block), ``amax / 448`` with amax = max(|x|, 1e-4) over the
    block, q = e4m3(x · (448 / amax)). ``tma_aligned_scales``: the scales stored M-major with M padded to a multiple
    of 4 (DeepGEMM's layout, ``fp8.get_mn_major_tma_aligned_tensor``'s), strides (1, aligned M).
    Post: bit-identical to ``per_token_cast_to_fp8_reference(x)``; ``dequantize_per_token(q, scales)`` ≈ x."""
    op = "per_token_cast_to_fp8"
    arg = _input(op, x)
    x = arg.value
    m, k = x.shape
    kb = -(-k // BLOCK)
    out = None
    if tma_aligned_scales:
        aligned = -(-m // 4) * 4
        if isinstance(x, np.ndarray):
            out = np.zeros((kb, aligned), np.float32).T[:m]
        else:
            import torch

            out = torch.zeros((kb, aligned), dtype=torch.float32, device=x.device).t()[:m]
    return tuple(as_callers(r, [arg]) for r in _run("token", op, x, (m, kb), out))


def per_block_cast_to_fp8(x):
    """``x`` (M, K) bf16/f16/f32 → (q (M, K) e4m3, scales (⌈M/128⌉, ⌈K/128⌉) float32): one scale per 128 × 128 block
    (DeepGEMM's weight quantization), amax / 448 with amax = max(|x|, 1e-4) over the block.
    Post: bit-identical to ``per_block_cast_to_fp8_reference(x)``; ``dequantize_per_block(q, scales)`` ≈ x."""
    op = "per_block_cast_to_fp8"
    arg = _input(op, x)
    m, k = arg.shape
    return tuple(as_callers(r, [arg]) for r in _run("block", op, arg.value, (-(-m // BLOCK), -(-k // BLOCK))))


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
