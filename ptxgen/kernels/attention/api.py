"""The attention op users call, with FlashAttention's conventions: ``attention(q, k, v, causal, softmax_scale)`` →
``(out, lse)`` for q (B, Sq, Hq, D), k and v (B, Sk, Hkv, D).

Arguments are torch CUDA tensors (other frameworks' CUDA arrays through DLPack), run on the GPU on torch's current
stream, or numpy arrays (``ml_dtypes.bfloat16`` / ``numpy.float16``), run in the CPU interpreter (small sizes: what CI
tests); the results are of the same kind. Every check happens before anything launches: a wrong dtype or device is
a TypeError, a wrong rank, shape or head count a ValueError, each naming the argument, e.g. ``attention: q has 6
heads, not a multiple of k's 4: each KV head serves Hq/Hkv query heads (GQA), so Hq must be a multiple of Hkv``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..arguments import Arg as _Arg, overlaps as _overlaps, same_kind as _same_kind, stream as _stream
from ..arguments import private_copy as _private_copy, writable as _writable
from . import run
from .config import ELEMENT_BYTES, HEAD_DIMS, HEAD_DIMS_TEXT, AttentionConfig, choose_config

_LAYOUT = "(batch, seqlen, heads, head_dim)"


def _check_tensors(op: str, q: _Arg, k: _Arg, v: _Arg, layout: str = _LAYOUT) -> str:
    """The checks of q, k, v laid out as ``layout`` — (batch, seqlen, heads, head_dim), or varlen's packed
    (total_tokens, heads, head_dim) without a batch mode: dtypes, ranks, head dims, batch, heads (Hq = Hkv = 0 is an
    empty problem, as torch's). → the dtype name. ``_check_tensors("attention", q, k, v)`` of bf16 (2, 128, 8, 64) q and (2, 256, 2, 64)
    k, v → "bf16". Post: each violated rule raised TypeError/ValueError naming the argument."""
    rank = layout.count(",") + 1
    dtype = q.check_dtype(op, tuple(ELEMENT_BYTES))
    for arg in (k, v):
        if arg.dtype != dtype:
            raise TypeError(f"{op}: {arg.name} has dtype {arg.shown} but q has {q.shown}: q, k and v must have one "
                            "dtype")
    for arg in (q, k, v):
        arg.check_rank(op, rank, layout)
    d = q.shape[rank - 1]
    for arg in (k, v):
        if arg.shape[rank - 1] != d:
            raise ValueError(f"{op}: {arg.name} has head dim {arg.shape[rank - 1]} but q has {d}: q, k and v must "
                             "have one head dim")
    if d not in HEAD_DIMS:
        raise ValueError(f"{op}: q has head dim {d}; the kernel supports head dims "
                         f"{HEAD_DIMS_TEXT}")
    if v.shape != k.shape:
        keys = " of the keys" if rank == 4 else ""
        raise ValueError(f"{op}: v has shape {v.shape} but k has {k.shape}: k and v are both {layout}{keys}")
    if rank == 4 and k.shape[0] != q.shape[0]:
        raise ValueError(f"{op}: k has batch {k.shape[0]} but q has {q.shape[0]}: q, k and v must have one batch size")
    hq, hkv = q.shape[rank - 2], k.shape[rank - 2]
    if (hkv == 0 and hq != 0) or (hkv != 0 and hq % hkv):
        raise ValueError(f"{op}: q has {hq} heads, not a multiple of k's {hkv}: each KV head serves Hq/Hkv query "
                         "heads (GQA), so Hq must be a multiple of Hkv")
    return dtype


def _head_dim_major(op: str, arg: _Arg) -> _Arg:
    """``arg`` itself where its head_dim (last) mode has unit stride, else a copy that has (torch's SDPA takes any
    strides; the kernel's TMA boxes need unit stride along D): q[..., ::-1] of layout (1,20,2,64):(2560,128,64,-1)
    becomes a contiguous (1,20,2,64):(2560,128,64,1) copy. Post: the result has unit stride along head_dim (or a
    mode of extent ≤ 1, or no element)."""
    if arg.strides is not None and (arg.strides[-1] == 1 or arg.shape[-1] <= 1 or 0 in arg.shape):
        return arg
    value = arg.value.contiguous() if arg.kind == "torch" else np.ascontiguousarray(arg.value)
    return _Arg(op, arg.name, value)


def _same_view(a: _Arg, b: _Arg) -> bool:
    """Whether two arguments are the same elements in the same places: one base address, shape and strides."""
    if a.kind != b.kind or a.shape != b.shape or a.strides != b.strides:
        return False
    if a.kind == "numpy":
        return a.value.__array_interface__["data"][0] == b.value.__array_interface__["data"][0]
    return a.value.data_ptr() == b.value.data_ptr()


def _apart_from_out(op: str, out: _Arg | None, q: _Arg, k: _Arg, v: _Arg):
    """(q, k, v) none of which shares memory with ``out`` (given): an input that overlaps it is copied first — the
    kernel's CTAs read K and V (and, for a partial overlap, Q rows) that other CTAs may already have overwritten.
    ``out`` exactly ``q`` (the same view: attention in place) keeps q: each CTA reads its Q rows once, before it
    stores the O rows of the same positions, and no other CTA reads them. Post: each returned input is the caller's
    or a private copy of it; a numpy out is writeable (else ValueError naming out)."""
    if out is None:
        return q, k, v
    _writable(op, out)
    kept = []
    for arg in (q, k, v):
        if _overlaps(out, arg) and not (arg is q and _same_view(out, q)):
            arg = _private_copy(op, arg)
        kept.append(arg)
    return tuple(kept)


def _check_out(op: str, out: _Arg, q: _Arg, dtype: str) -> None:
    """``out`` is laid out as q (dense or packed): q's dtype and shape, unit stride along head_dim (the last mode).
    Post: a mismatch raised TypeError/ValueError naming out."""
    if out.dtype != dtype:
        raise TypeError(f"{op}: out has dtype {out.shown} but q has {q.shown}: out has q's dtype")
    if out.shape != q.shape:
        raise ValueError(f"{op}: out must have q's shape {q.shape}, not {out.shape}")
    if out.strides is None or (out.strides[-1] != 1 and q.shape[-1] > 1):
        raise ValueError(f"{op}: out must have unit stride along head_dim, not strides {out.strides}")


GRID_YZ = 65535   # CUDA's limit on a grid's y and z extents: the kernels put heads on y, batch entries on z


def _check_grid(op: str, batch_what: str, batch: int, heads_what: str, heads: int) -> None:
    if batch > GRID_YZ:
        raise ValueError(f"{op}: {batch_what} {batch} entries; the kernel's grid holds at most {GRID_YZ}")
    if heads > GRID_YZ:
        raise ValueError(f"{op}: {heads_what} {heads} heads; the kernel's grid holds at most {GRID_YZ}")


def _scale(op: str, softmax_scale, d: int) -> float:
    if softmax_scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float, np.floating, np.integer)):
        raise TypeError(f"{op}: softmax_scale must be a number or None (1/sqrt(head_dim)), not "
                        f"{type(softmax_scale).__name__}")
    scale = float(softmax_scale)
    if not math.isfinite(scale):
        raise ValueError(f"{op}: softmax_scale must be finite, not {scale}")
    return scale


# the scale a zero softmax_scale runs with: every scaled score of magnitude under 2^75 is then under 2^-24, so exp2
# rounds it to exactly the 1 of a zero scale (and the masked scores' -inf stays -inf, where -inf · 0 would be NaN)
ZERO_SCALE_STAND_IN = 2.0 ** -100


def _kernel_scale(op: str, k, k_arg, scale: float):
    """(k, its argument, scale > 0) for the kernel, whose row maximum is taken over the unscaled scores (the scale and
    log2 e folded into one FMA after it): a negative scale runs on −K with |scale| (scale·q·k = |scale|·q·(−k), one
    elementwise pass over K), a zero scale with ``ZERO_SCALE_STAND_IN``. ``_kernel_scale(op, k, arg, -0.125)`` →
    (-k, its argument, 0.125)."""
    if scale > 0:
        return k, k_arg, scale
    if scale == 0:
        return k, k_arg, ZERO_SCALE_STAND_IN
    negated = -k
    return negated, _Arg(op, "k", negated), -scale


def _check_ctas(op: str, ctas) -> None:
    """``ctas`` is None or a positive int (the persistent grid's bound). ``_check_ctas("attention", 0)`` raises
    ``attention: ctas must be a positive int (the persistent kernel's CTA count) or None, not 0``."""
    if ctas is None:
        return
    if isinstance(ctas, bool) or not isinstance(ctas, (int, np.integer)) or ctas < 1:
        raise (ValueError if isinstance(ctas, (int, np.integer)) and not isinstance(ctas, bool) else TypeError)(
            f"{op}: ctas must be a positive int (the persistent kernel's CTA count) or None, not {ctas!r}")


def _tma_able(arg: _Arg) -> bool:
    """Whether TMA describes the tensor in place: a 16-byte aligned base and 16-byte multiples as strides."""
    return bool(arg.aligned) and all((s * ELEMENT_BYTES[arg.dtype]) % 16 == 0 for s in arg.strides[:-1])


def _tma_view(arg: _Arg):
    """A torch tensor TMA describes in place (``_tma_able``), else a contiguous copy."""
    return arg.value if _tma_able(arg) else arg.value.contiguous()


def attention(q, k, v, causal: bool = False, softmax_scale=None, out=None, *, config: AttentionConfig | None = None,
              ctas: int | None = None):
    """Attention forward, FlashAttention's ``flash_attn_func`` convention: q (B, Sq, Hq, D), k and v (B, Sk, Hkv, D),
    all bf16 or all f16, D ∈ {64, 128, 256}, Hq a multiple of Hkv (query head h reads KV head h / (Hq/Hkv)); ``causal``
    masks key j for query i where j > i + Sk − Sq (aligned to the bottom-right corner, as FlashAttention for Sq ≠ Sk);
    ``softmax_scale`` defaults to 1/√D (any finite number: ``_kernel_scale``). → ``(out, lse)``: out (B, Sq, Hq, D) of q's dtype (into ``out`` if given:
    that shape and dtype, unit stride along D), lse (B, Hq, Sq) float32, the natural-log log-sum-exp of each query
    row's scaled scores. A query row that sees no key (causal, Sq > Sk) gets out 0 and lse +inf; B, Sq or Hq = Hkv = 0
    is an empty result. Any strides (torch's (B, H, S, D) tensors passed as ``x.transpose(1, 2)`` are read in place; a
    q, k or v without unit stride along D is copied first; ``out`` must have it). An ``out`` that overlaps k or v (or q
    other than as q itself) gets them copied first; ``out=q`` runs in place. NaN in q, k or v propagates as torch's
    (a key masked by ``causal`` never reaches a row, whatever it holds). The scores are f32 and the scale is folded
    into the exponent (``exp2(s·c − m·c)``, c = scale·log2 e, as FlashAttention): where |c·max score| nears 2^20 the
    rounding of m·c costs accuracy (as the f32 scores of any f32 attention), and from 2^31 on it exceeds f32's
    exponent range and the row is NaN (softmax_scale 1e30 on unit scores). ``config`` forces a configuration;
    ``ctas`` bounds a persistent config's grid (default: the SMs; the interpreter's 132).

    >>> q = np.ones((1, 3, 2, 64), ml_dtypes.bfloat16); k = v = np.ones((1, 5, 1, 64), ml_dtypes.bfloat16)  # doctest: +SKIP
    >>> out, lse = attention(q, k, v)                       # doctest: +SKIP
    >>> float(out[0, 0, 0, 0]), float(lse[0, 0, 0])         # doctest: +SKIP
    (1.0, 9.609...)                                         # 64/8 + ln 5

    Post: out = softmax(scale·Q·Kᵀ + mask)·V up to f32 accumulation, exp2 and P's rounding to 16 bits, and one
    rounding to the output type; lse = log Σ_j exp(scale·q·k_j) in f32."""
    op = "attention"
    q_arg, k_arg, v_arg = _Arg(op, "q", q), _Arg(op, "k", k), _Arg(op, "v", v)
    out_arg = _Arg(op, "out", out) if out is not None else None
    args = [q_arg, k_arg, v_arg] + ([out_arg] if out_arg else [])
    kind = _same_kind(op, args)
    dtype = _check_tensors(op, q_arg, k_arg, v_arg)
    q_arg, k_arg, v_arg = (_head_dim_major(op, arg) for arg in (q_arg, k_arg, v_arg))
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"{op}: causal must be a bool, not {type(causal).__name__}")
    b, sq, hq, d = q_arg.shape
    sk = k_arg.shape[1]
    _check_grid(op, "q has batch", b, "q has", hq)
    _check_ctas(op, ctas)
    scale = _scale(op, softmax_scale, d)
    if out_arg is not None:
        _check_out(op, out_arg, q_arg, dtype)
    q_arg, k_arg, v_arg = _apart_from_out(op, out_arg, q_arg, k_arg, v_arg)
    q, v = q_arg.value, v_arg.value
    k, k_arg, scale = _kernel_scale(op, k_arg.value, k_arg, scale)
    if config is None:
        config = choose_config(dtype, d, bool(causal), seqlens=(sq, sk))
        if config.epilogue == "tma" and out_arg is not None and kind != "numpy" and not _tma_able(out_arg):
            # a given out TMA cannot store into (unaligned base or strides): stored from the registers instead (no
            # staging tile for O then)
            config = dataclasses.replace(config, epilogue="direct", o_buffer=False)
    elif not isinstance(config, AttentionConfig):
        raise TypeError(f"{op}: config must be an AttentionConfig, not {type(config).__name__}")
    else:
        config.validate()
        if (config.dtype, config.head_dim, config.causal) != (dtype, d, bool(causal)):
            raise ValueError(f"{op}: config is for {config.dtype}, head_dim {config.head_dim}, causal "
                             f"{config.causal}, but the call is {dtype}, head_dim {d}, causal {bool(causal)}")
        if config.epilogue == "tma" and out_arg is not None and kind != "numpy" and not _tma_able(out_arg):
            raise ValueError(f"{op}: config stores out by TMA (epilogue = 'tma'), but out's base or strides "
                             f"{out_arg.strides} are not 16-byte aligned: pass another out or epilogue 'direct'")
    if kind == "numpy":
        o = out if out is not None else np.empty((b, sq, hq, d), dtype=q.dtype)
        lse = np.empty((b, hq, sq), dtype=np.float32)
    else:
        import torch

        o = out_arg.value if out_arg is not None else torch.empty((b, sq, hq, d), device=q_arg.value.device,
                                                                  dtype=q_arg.value.dtype)
        lse = torch.empty((b, hq, sq), device=q_arg.value.device, dtype=torch.float32)
    if b == 0 or sq == 0 or hq == 0:
        return o, lse
    if sk == 0:
        o[...] = 0
        lse[...] = float("inf")
        return o, lse
    if kind == "numpy":
        run.run_numpy(config, q, k, v, o, lse, scale, ctas=ctas)
        return o, lse
    run.run_device(config, _tma_view(q_arg), _tma_view(k_arg), _tma_view(v_arg), o, lse, scale, stream=_stream(),
                   ctas=ctas)
    return o, lse


_VARLEN_LAYOUT = "(total_tokens, heads, head_dim)"


def _check_cu_seqlens(op: str, name: str, cu: _Arg, total: int, max_name: str, max_len: int) -> None:
    if cu.shown not in ("numpy int32", "torch.int32"):
        raise TypeError(f"{op}: {name} must hold int32 offsets (FlashAttention's cu_seqlens), not {cu.shown}")
    if len(cu.shape) != 1 or cu.shape[0] < 1:
        raise ValueError(f"{op}: {name} must be 1-D of batch + 1 offsets, not of shape {cu.shape}")
    if cu.kind == "numpy":
        # the values are checked where reading them is free (on the GPU it would synchronize)
        offsets = np.asarray(cu.value, dtype=np.int64)
        lengths = np.diff(offsets)
        if offsets[0] != 0 or np.any(lengths < 0) or offsets[-1] > total:
            raise ValueError(f"{op}: {name} must start at 0, never decrease and end at most at the {total} packed "
                             f"tokens, not {offsets.tolist()}")
        if lengths.size and lengths.max() > max_len:
            raise ValueError(f"{op}: {name} holds a sequence of {int(lengths.max())} tokens, longer than "
                             f"{max_name} = {max_len}")


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                     causal: bool = False, softmax_scale=None, out=None, *, config: AttentionConfig | None = None,
                     ctas: int | None = None):
    """Attention forward over a packed batch of sequences of different lengths, FlashAttention's
    ``flash_attn_varlen_func`` convention: q (total_q, Hq, D), k and v (total_k, Hkv, D), sequence b's queries rows
    ``cu_seqlens_q[b] … cu_seqlens_q[b+1]-1`` of q and its keys rows ``cu_seqlens_k[b] …`` of k and v (int32 offsets,
    B + 1 of each); ``max_seqlen_q`` at least the longest query sequence (it sizes the grid), ``max_seqlen_k`` the
    longest key sequence. ``causal`` aligns each sequence's mask to its own bottom-right corner. → ``(out, lse)``:
    out (total_q, Hq, D), lse (Hq, total_q) float32. Each sequence is exactly ``attention`` of its rows. ``config``
    and ``ctas`` as for ``attention``.
    Post: as ``attention`` per sequence; rows of q past ``cu_seqlens_q[-1]`` are not written."""
    op = "attention_varlen"
    q_arg, k_arg, v_arg = _Arg(op, "q", q), _Arg(op, "k", k), _Arg(op, "v", v)
    cu_q, cu_k = _Arg(op, "cu_seqlens_q", cu_seqlens_q), _Arg(op, "cu_seqlens_k", cu_seqlens_k)
    out_arg = _Arg(op, "out", out) if out is not None else None
    kind = _same_kind(op, [q_arg, k_arg, v_arg, cu_q, cu_k] + ([out_arg] if out_arg else []))
    dtype = _check_tensors(op, q_arg, k_arg, v_arg, _VARLEN_LAYOUT)
    q_arg, k_arg, v_arg = (_head_dim_major(op, arg) for arg in (q_arg, k_arg, v_arg))
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"{op}: causal must be a bool, not {type(causal).__name__}")
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{op}: {name} must be a non-negative int, not {value!r}")
        if value < 0:
            raise ValueError(f"{op}: {name} must be a non-negative int, not {value!r}")
    _check_cu_seqlens(op, "cu_seqlens_q", cu_q, q_arg.shape[0], "max_seqlen_q", int(max_seqlen_q))
    _check_cu_seqlens(op, "cu_seqlens_k", cu_k, k_arg.shape[0], "max_seqlen_k", int(max_seqlen_k))
    if cu_k.shape != cu_q.shape:
        raise ValueError(f"{op}: cu_seqlens_k has {cu_k.shape[0]} offsets but cu_seqlens_q has {cu_q.shape[0]}: "
                         "one query and one key sequence per batch entry")
    total_q, hq, d = q_arg.shape
    _check_grid(op, "cu_seqlens_q holds a batch of", cu_q.shape[0] - 1, "q has", hq)
    _check_ctas(op, ctas)
    scale = _scale(op, softmax_scale, d)
    if out_arg is not None:
        _check_out(op, out_arg, q_arg, dtype)
    q_arg, k_arg, v_arg = _apart_from_out(op, out_arg, q_arg, k_arg, v_arg)
    q, v = q_arg.value, v_arg.value
    k, k_arg, scale = _kernel_scale(op, k_arg.value, k_arg, scale)
    if config is None:
        config = choose_config(dtype, d, bool(causal), varlen=True, seqlens=(int(max_seqlen_q), int(max_seqlen_k)))
    elif not isinstance(config, AttentionConfig):
        raise TypeError(f"{op}: config must be an AttentionConfig, not {type(config).__name__}")
    else:
        config.validate()
        if (config.dtype, config.head_dim, config.causal, config.varlen) != (dtype, d, bool(causal), True):
            raise ValueError(f"{op}: config is for {config.dtype}, head_dim {config.head_dim}, causal "
                             f"{config.causal}, varlen {config.varlen}, but the call is {dtype}, head_dim {d}, "
                             f"causal {bool(causal)}, varlen True")
    if kind == "numpy":
        o = out if out is not None else np.zeros((total_q, hq, d), dtype=q.dtype)
        lse = np.full((hq, total_q), np.inf, dtype=np.float32)
    else:
        import torch

        o = out_arg.value if out_arg is not None else torch.zeros((total_q, hq, d), device=q_arg.value.device,
                                                                  dtype=q_arg.value.dtype)
        lse = torch.full((hq, total_q), float("inf"), device=q_arg.value.device, dtype=torch.float32)
    batch = cu_q.shape[0] - 1
    if batch == 0 or total_q == 0 or hq == 0 or max_seqlen_q == 0 or k_arg.shape[0] == 0:
        return o, lse   # no query row, or no key for any: out 0, lse +inf
    if kind == "numpy":
        run.run_varlen_numpy(config, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), scale,
                             ctas=ctas)
        return o, lse
    run.run_varlen_device(config, _tma_view(q_arg), _tma_view(k_arg), _tma_view(v_arg), o, lse, cu_seqlens_q,
                          cu_seqlens_k, int(max_seqlen_q), scale, stream=_stream(), ctas=ctas)
    return o, lse
