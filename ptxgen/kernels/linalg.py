"""The GEMM ops users call, with torch's semantics: ``matmul(a, b)`` = ``a @ b``, ``linear(x, w, bias)`` =
``x @ w.T + bias``, ``scaled_mm(a, b, scale_a, scale_b)`` = ``torch._scaled_mm``'s per-tensor-scaled fp8 product.

Arguments are torch CUDA tensors (other frameworks' CUDA arrays through DLPack: cupy, JAX, …), run on the GPU on torch's
current stream, or numpy arrays (bf16 and fp8 as ``ml_dtypes`` arrays), run in the CPU interpreter (small sizes: what CI
tests); the result is of the same kind. The configuration is ``choose_config``'s for the shape (or ``config=``, forced;
or, with ``autotune=True`` on the GPU, the fastest of the heuristic's pick and its neighbours, timed once per problem
and device and kept in memory and the disk cache: ``ptxgen.kernels.gemm.autotune``); the kernel of a configuration is
built and compiled once per process (and kept in the disk cache), so a new shape of a configuration already used
compiles nothing. Every check happens before anything launches: a wrong dtype or device is a TypeError, a wrong rank,
shape or stride a ValueError, each naming the argument, e.g. ``matmul: b has 300 rows but a has 200 columns: a (M, K) @
b (K, N) needs b.shape[0] == K``.

Any M, N, K runs: an operand whose layout TMA cannot describe (a row pitch that is not a multiple of 16 bytes,
an unaligned base, no unit stride) is copied first into a padded K-major buffer; a C whose rows TMA cannot store
gets a configuration that stores it without TMA; M = 0 or N = 0 returns an empty result, K = 0 zeros (plus the bias).

A repeated GPU call of torch tensors with the signature of an earlier one (each tensor's shape, strides, dtype, device
and address mod 16, the stream, fp8's scales and output type) takes the fast path (``fast_call.FastCall``): no checks (its
first call passed them, and they depend on nothing else), no choice, only C allocated, the addresses written into the
prepared call site's argument block, and the launch.
"""
from __future__ import annotations

import numpy as np

from .gemm.config import ELEMENT_BYTES, FP8, GemmConfig
from .gemm.heuristic import H100_SMS, choose_config
from .gemm import run
from . import arguments
from .fast_call import FastCall, call_mode, remember, signature_key
from .arguments import (NUMPY_NAMES, NUMPY_TYPES, SPELLED, TORCH_NAMES, Arg, as_callers, device_sms, in_place,
                        kernel_operand, natural_major, same_kind, torch_dtype)

# -- operands in the kernel's forms ------------------------------------------------------------------------------------

def _scale(op: str, name: str, s, kind: str) -> float:
    """A per-tensor scale: a number or a 1-element array/tensor (a CUDA tensor is read with a synchronizing copy)."""
    if isinstance(s, (int, float, np.floating, np.integer)) and not isinstance(s, bool):
        return float(s)
    size = getattr(s, "size", None)
    count = s.numel() if hasattr(s, "numel") else (size if isinstance(size, int) else None)
    if count is None or isinstance(s, bool):
        raise TypeError(f"{op}: {name} must be a number or a 1-element float32 tensor (a per-tensor scale), not "
                        f"{type(s).__name__} {s!r}")
    if count != 1:
        raise ValueError(f"{op}: {name} must be a number or a 1-element tensor (a per-tensor scale), not "
                         f"{type(s).__name__} of {count} elements")
    dtype = str(getattr(s, "dtype", ""))
    if dtype not in ("torch.float32", "float32"):
        raise TypeError(f"{op}: {name} must be float32 (torch._scaled_mm's scales are), not {dtype}")
    return float(s.item() if hasattr(s, "item") else s)


# -- the shared path ---------------------------------------------------------------------------------------------------

def _gemm(op: str, a: Arg, a_t: bool, b: Arg, b_t: bool, m: int, n: int, k: int, dtype: str, out_dtype: str,
          out, bias: Arg | None, scales, config, sm_count, fp8_majors: bool = False, fast_key=None,
          c_shape=None, autotune: bool = False):
    """C (m, n) = A·Bᵀ (+ bias) with A the logical (m, k) form of ``a`` (its transpose if ``a_t``) and B the (n, k)
    form of ``b`` (``b_t``) → C (``out`` if given), every argument already checked but C's stride. ``fast_key``: the
    signature (``fast_call.signature_key``) under which a GPU call whose operands need no copy is remembered as a
    ``FastCall`` allocating C of ``c_shape`` (default (m, n))."""
    arguments.check_sm_count(op, sm_count)
    kind = a.kind
    if out is not None and (out.strides is None or not (out.strides[1] == 1 or n <= 1) or
                            any(arguments.overlaps(out, x) for x in (a, b, bias) if x is not None)):
        # an out the kernel cannot store into (no unit stride along N: a transposed or strided view, as torch's out=
        # takes), or one sharing memory with an operand (C's tiles would be stored while other CTAs still read A and
        # B; numpy's and torch's out= give the product of the operands as they were): a fresh C, then one copy
        c = _gemm(op, a, a_t, b, b_t, m, n, k, dtype, out_dtype, None, bias, scales, config, sm_count,
                  fp8_majors=fp8_majors, autotune=autotune)
        out.value[...] = c
        return out.value
    if out is None:
        if kind == "numpy":
            c = np.empty((m, n), dtype=NUMPY_TYPES[out_dtype])
        else:
            import torch

            c = torch.empty((m, n), device=a.value.device, dtype=torch_dtype(out_dtype))
        c_row_ok = n * ELEMENT_BYTES[out_dtype] % 16 == 0
    else:
        c = out.value
        c_row_ok = out.aligned and (m <= 1 or out.strides[0] * ELEMENT_BYTES[out_dtype] % 16 == 0) and \
            n * ELEMENT_BYTES[out_dtype] % 16 == 0
    if m == 0 or n == 0:
        return c
    if k == 0:
        c[...] = 0
        if bias is not None:
            c += bias.value
        return c
    a_major = natural_major(a, a_t) or "K"
    b_major = natural_major(b, b_t) or "K"
    if fp8_majors:
        a_major = b_major = "K"
    sms = sm_count or (H100_SMS if kind == "numpy" else device_sms())
    if config is None:
        config = choose_config(m, n, k, dtype, sms, a_major=a_major, b_major=b_major, bias=bias is not None,
                               out_dtype=out_dtype)
        if config.epilogue == "tma" and not c_row_ok:
            config = _without_tma_store(config)
        if autotune and kind == "torch":
            config = _autotuned(config, a, a_t, b, b_t, m, n, k, out_dtype, bias, scales, c_row_ok, a_major, b_major,
                                sm_count, sms)
    else:
        if autotune:
            raise ValueError(f"{op}: config={config.name} forces a configuration; autotune=True would choose one: "
                             "pass one of them")
        config = _forced(op, config, dtype, out_dtype, bias is not None, c_row_ok)
    a_view = kernel_operand(a, a_t, config.a_major if not config.swap_ab else config.b_major)
    b_view = kernel_operand(b, b_t, config.b_major if not config.swap_ab else config.a_major)
    bias_value = bias.value if bias is not None else None
    if kind == "numpy":
        run.run_numpy(config, a_view, b_view, c, m, n, k, bias=bias_value, scales=scales, sm_count=sms)
    else:
        stream = arguments.stream()
        site = run.run_device(config, a_view, b_view, c, m, n, k, bias=bias_value, scales=scales, stream=stream,
                              sm_count=sm_count)
        if fast_key is not None and in_place(a, a_t, _kernel_major(config, "a")) and \
                in_place(b, b_t, _kernel_major(config, "b")):
            remember(_FAST, fast_key + (stream,), _fast_call(site, config.swap_ab, bias is not None,
                                                              c_shape or (m, n), c.dtype, c.device))
    return c


def _autotuned(pick: GemmConfig, a: Arg, a_t: bool, b: Arg, b_t: bool, m: int, n: int, k: int, out_dtype: str,
               bias: Arg | None, scales, c_row_ok: bool, a_major: str, b_major: str, sm_count,
               sms: int) -> GemmConfig:
    """The configuration ``autotune`` chose for this problem on this device (``ptxgen.kernels.gemm.autotune``): the
    stored one, or — the first time — the fastest of the candidates around ``pick``, timed here on fresh random
    operands of the call's shapes, strides and dtypes, and stored."""
    from .gemm import autotune as tuner   # only autotune=True calls need it: not imported with the op

    problem = tuner.problem_key(m, n, k, pick.dtype, out_dtype, a_major, b_major, bias is not None, c_row_ok)
    device = tuner.device_key()
    chosen = tuner.stored(problem, device)
    if chosen is not None:
        return chosen
    import torch

    fresh_a, fresh_b = _fresh(a, torch), _fresh(b, torch)
    fresh_bias = _fresh(bias, torch) if bias is not None else None
    c = torch.empty((m, n), device=a.value.device, dtype=torch_dtype(out_dtype))
    stream = arguments.stream()

    sites = []

    def launcher(config):
        a_view = kernel_operand(fresh_a, a_t, _kernel_major(config, "a"))
        b_view = kernel_operand(fresh_b, b_t, _kernel_major(config, "b"))
        site = run.prepared_site(config, a_view, b_view, c, m, n, k,
                                 bias=fresh_bias.value if fresh_bias is not None else None, scales=scales,
                                 stream=stream, sm_count=sm_count)
        sites.append(site)
        return site

    try:
        chosen, times = tuner.time_candidates(tuner.candidates(pick, m, n, k, c_row_ok, sms), launcher, torch)
    finally:
        for site in sites:   # the cached sites need not keep the timing's operands alive
            run.release(site, ("a", "b", "c", "bias"))
    tuner.remember(problem, device, chosen, times)
    return chosen


def _fresh(arg: Arg, torch) -> Arg:
    """An operand like ``arg`` (shape, strides, dtype, device) holding fresh random values, for timing; a broadcast
    operand (a stride 0), which no random tensor can share, is the caller's own (the timed kernels only read it)."""
    x = arg.value
    if arg.strides is None or 0 in arg.strides:
        return arg
    fresh = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    fresh.copy_(torch.randn(x.shape, device=x.device))
    return Arg("autotune", arg.name, fresh)


def _kernel_major(config: GemmConfig, operand: str) -> str:
    """The major the kernel reads the problem's ``operand`` ("a" or "b") in (swapped: the other operand's field)."""
    if config.swap_ab:
        return config.b_major if operand == "a" else config.a_major
    return config.a_major if operand == "a" else config.b_major


# -- the repeated GPU call ---------------------------------------------------------------------------------------------

_FAST = {}          # (op, autotune, each tensor's signature, extras, stream) -> fast_call.FastCall


def _fast_call(site, swap: bool, bias: bool, shape, dtype, device) -> FastCall:
    """The FastCall of a matmul/linear/scaled_mm call: its addresses are (the problem's A, its B, the bias or 0),
    then the allocated C's; the kernel's A is the problem's B when ``swap``."""
    slots = [("a", 1 if swap else 0), ("b", 0 if swap else 1), ("c", 3)] + ([("bias", 2)] if bias else [])
    return FastCall(site, slots, arguments.TORCH[1], shape, dtype, device)


def _without_tma_store(config: GemmConfig) -> GemmConfig:
    """``config`` storing C by rows instead of TMA (an output whose rows TMA cannot store: an unaligned base or
    pitch): the same tile and schedule, the rows epilogue has no overlap; a swapped config stores through C's
    transposed view (``direct``)."""
    if config.swap_ab:
        return config.replace(epilogue="direct", epilogue_split=1, c_major="N", overlap=0).validate()
    return config.replace(epilogue="rows", overlap=0).validate()


def _forced(op: str, config, dtype: str, out_dtype: str, bias: bool, c_row_ok: bool) -> GemmConfig:
    if not isinstance(config, GemmConfig):
        raise TypeError(f"{op}: config must be a GemmConfig, not {type(config).__name__}")
    if config.dtype != dtype or config.out_dtype != out_dtype:
        raise ValueError(f"{op}: config is a {config.dtype} → {config.out_dtype} GEMM ({config.name}), the operands "
                         f"are {dtype} → {out_dtype}")
    if config.epilogue == "tma" and not c_row_ok:
        raise ValueError(f"{op}: config {config.name} stores C by TMA, which needs C's rows 16-byte aligned; this C's "
                         "are not: use the 'rows' or 'direct' epilogue")
    return config.replace(bias=bias).validate()


# -- the ops -----------------------------------------------------------------------------------------------------------

def matmul(a, b, out=None, *, config: GemmConfig | None = None, sm_count: int | None = None,
           autotune: bool = False):
    """``a @ b`` for 2-D bf16/f16 ``a`` (M, K) and ``b`` (K, N): ``b`` row-major (the MN-major B path) or the
    transposed view of an (N, K) row-major weight (``w.T``: K-major); f32 accumulation, C (M, N) of the inputs' type
    (into ``out`` if given: (M, N), the same dtype, any strides: one without unit stride along N, or sharing memory
    with an operand, gets the product through a fresh C and one copy). As torch.matmul, ``a`` may also be 1-D (K,)
    (→ (N,)) or of more dimensions (..., K) (its leading ones flattened to M rows → (..., N)), and ``b`` 1-D (K,)
    (→ the N mode dropped; both 1-D: a 0-d dot product); a batched ``b`` (3-D or more) is refused. ``out`` then has
    the result's shape (the product is copied into it). ``config`` forces a configuration;
    ``sm_count`` the SMs the persistent grid assumes (numpy: the interpreter's CTAs, default 132); ``autotune``
    (GPU): time the candidate configurations once for this problem and device and use the fastest (numpy arrays run
    the heuristic's: the interpreter's time says nothing about a GPU's).

    >>> a = np.ones((3, 5), ml_dtypes.bfloat16); b = np.ones((5, 2), ml_dtypes.bfloat16)    # doctest: +SKIP
    >>> matmul(a, b, sm_count=1)                                                             # doctest: +SKIP
    array([[5, 5], [5, 5], [5, 5]], dtype=bfloat16)

    Post: the result equals ``a @ b`` up to f32 accumulation and one rounding to C's type."""
    op = "matmul"
    tensors = arguments.TORCH[0]
    mode = call_mode(autotune, config)   # a forced config's calls are remembered under it
    if type(a) in tensors and type(b) in tensors and out is None and sm_count is None:
        pa, pb = a.data_ptr(), b.data_ptr()
        fast = _FAST.get((op, mode, a.shape, a.stride(), a.dtype, a.get_device(), pa & 15, b.shape, b.stride(),
                          b.dtype, b.get_device(), pb & 15, arguments.TORCH[2](0)))
        if fast is not None:
            return fast((pa, pb, 0))
    args = [Arg(op, "a", a), Arg(op, "b", b)]
    a_arg, b_arg = args
    out_arg = Arg(op, "out", out) if out is not None else None
    kind = same_kind(op, args + ([out_arg] if out_arg else []))
    dtype = a_arg.check_dtype(op, ("bf16", "f16"))
    if not a_arg.shape:
        raise ValueError(f"{op}: a must have at least 1 dimension (..., K), not shape ()")
    if len(b_arg.shape) not in (1, 2):
        raise ValueError(f"{op}: b must be 2-D (K, N) or 1-D (K,) (a batched b is not supported), not of shape "
                         f"{b_arg.shape}")
    if b_arg.dtype != dtype:
        raise TypeError(f"{op}: b has dtype {b_arg.shown} but a has {a_arg.shown}: both must have one dtype")
    k, k2 = a_arg.shape[-1], b_arg.shape[0]
    if k2 != k:
        raise ValueError(f"{op}: b has {k2} rows but a has {k} columns: a (M, K) @ b (K, N) needs b.shape[0] == K")
    if len(a_arg.shape) != 2 or len(b_arg.shape) != 2:
        return _matmul_reshaped(op, a_arg, b_arg, out_arg, kind, dtype, config, sm_count, autotune)
    m, n = a_arg.shape[0], b_arg.shape[1]
    _check_out(op, out_arg, (m, n), dtype)
    fast_key = signature_key(op, mode, (a, b)) if out is None and sm_count is None and k else None
    c = _gemm(op, a_arg, False, b_arg, True, m, n, k, dtype, dtype, out_arg, None, (1.0, 1.0), config, sm_count,
              fast_key=fast_key, autotune=autotune)
    return c if kind == "numpy" else as_callers(c, args)


def _matmul_reshaped(op: str, a: Arg, b: Arg, out: Arg | None, kind: str, dtype: str, config, sm_count, autotune):
    """``matmul`` of a 1-D or (≥ 3)-D ``a`` (…, K) and/or a 1-D ``b`` (K,), torch.matmul's shapes: the product of
    the (M, K) = ``a`` flattened and the (K, N) = ``b`` (a 1-D b: N = 1), reshaped to ``a.shape[:-1]`` (+ (N,) for a
    2-D b). An (8,) @ (8, 3) gives (3,); (2, 4, 8) @ (8,) gives (2, 4). Post: the result (``out`` if given) has
    that shape; no fast path is remembered (its calls take the checked path)."""
    lead, k = a.shape[:-1], a.shape[-1]
    n = b.shape[1] if len(b.shape) == 2 else 1
    shape = tuple(lead) + ((n,) if len(b.shape) == 2 else ())
    _check_out(op, out, shape, dtype)
    m = int(np.prod(lead, dtype=np.int64)) if lead else 1
    a2, b2 = Arg(op, "a", a.value.reshape(m, k)), Arg(op, "b", b.value.reshape(k, n))
    a2.producer = b2.producer = a.producer or b.producer
    c = _gemm(op, a2, False, b2, True, m, n, k, dtype, dtype, None, None, (1.0, 1.0), config, sm_count,
              autotune=autotune).reshape(shape)
    if out is not None:
        out.value[...] = c
        c = out.value
    return c if kind == "numpy" else as_callers(c, [a, b])


def linear(x, w, bias=None, *, config: GemmConfig | None = None, sm_count: int | None = None,
           autotune: bool = False):
    """``x @ w.T + bias`` (torch.nn.functional.linear): ``x`` (..., K) of any leading shape (flattened to M rows),
    ``w`` (N, K), ``bias`` (N,) or None, all bf16 or all f16; the bias is added to the f32 accumulator in the kernel's
    epilogue, before the one rounding to the output type. → (..., N). ``config``, ``sm_count``, ``autotune``: as
    ``matmul``'s.

    Post: the result equals ``x @ w.T + bias`` up to f32 accumulation and one rounding."""
    op = "linear"
    tensors = arguments.TORCH[0]
    mode = call_mode(autotune, config)
    if type(x) in tensors and type(w) in tensors and sm_count is None:
        px, pw = x.data_ptr(), w.data_ptr()
        if bias is None:
            fast = _FAST.get((op, mode, x.shape, x.stride(), x.dtype, x.get_device(), px & 15, w.shape, w.stride(),
                              w.dtype, w.get_device(), pw & 15, arguments.TORCH[2](0)))
            if fast is not None:
                return fast((px, pw, 0))
        elif type(bias) in tensors:
            pbias = bias.data_ptr()
            fast = _FAST.get((op, mode, x.shape, x.stride(), x.dtype, x.get_device(), px & 15, w.shape, w.stride(),
                              w.dtype, w.get_device(), pw & 15, bias.shape, bias.stride(), bias.dtype,
                              bias.get_device(), pbias & 15, arguments.TORCH[2](0)))
            if fast is not None:
                return fast((px, pw, pbias))
    x_arg, w_arg = Arg(op, "x", x), Arg(op, "w", w)
    bias_arg = Arg(op, "bias", bias) if bias is not None else None
    args = [x_arg, w_arg] + ([bias_arg] if bias_arg else [])
    kind = same_kind(op, args)
    dtype = x_arg.check_dtype(op, ("bf16", "f16"))
    if len(x_arg.shape) < 1:
        raise ValueError(f"{op}: x must have at least 1 dimension (..., K), not shape {x_arg.shape}")
    w_arg.check_rank(op, 2, "(N, K)")
    for arg in args[1:]:
        if arg.dtype != dtype:
            raise TypeError(f"{op}: {arg.name} has dtype {arg.shown} but x has {x_arg.shown}: all must have one "
                            "dtype")
    k = x_arg.shape[-1]
    n, k2 = w_arg.shape
    if k2 != k:
        raise ValueError(f"{op}: w has {k2} columns but x has {k} (its last dimension): x (..., K) @ w.T needs "
                         "w.shape[1] == K")
    if bias_arg is not None and bias_arg.shape != (n,):
        raise ValueError(f"{op}: bias must have shape ({n},) (w's rows), not {bias_arg.shape}")
    lead = x_arg.shape[:-1]
    m = int(np.prod(lead, dtype=np.int64)) if lead else 1
    flat = x_arg.value.reshape(m, k)
    x2 = Arg(op, "x", flat)
    if x_arg.producer:
        x2.producer = x_arg.producer
    fast_key = None
    if sm_count is None and k and m and kind == "torch" and flat.data_ptr() == x_arg.value.data_ptr():
        # the flattened x is a view of x (a copy would have another address): the kernel reads x itself
        fast_key = signature_key(op, mode, (x, w) if bias is None else (x, w, bias))
    c = _gemm(op, x2, False, w_arg, False, m, n, k, dtype, dtype, None, bias_arg, (1.0, 1.0), config, sm_count,
              fast_key=fast_key, c_shape=tuple(lead) + (n,), autotune=autotune)
    c = c.reshape(*lead, n)
    return c if kind == "numpy" else as_callers(c, args)


def scaled_mm(a, b, scale_a, scale_b, out_dtype="bf16", *, bias=None, out=None, config: GemmConfig | None = None,
              sm_count: int | None = None, autotune: bool = False):
    """``torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=...)`` with per-tensor scales: C = (a·scale_a) @
    (b·scale_b) (+ bias), ``a`` (M, K) row-major e4m3/e5m2, ``b`` (K, N) column-major (the transposed view of an
    (N, K) row-major tensor, as torch requires), ``scale_a``/``scale_b`` numbers or 1-element float32 tensors (a CUDA
    tensor is read with a synchronizing copy), ``out_dtype`` bf16 or f16 (a torch dtype or its name), ``bias`` (N,)
    of ``out_dtype``; ``config``, ``sm_count``, ``autotune``: as ``matmul``'s. The scales multiply the f32
    accumulator once, in the epilogue; the products of every 4
    k-tiles (512 deep) are promoted into an f32 total (see ``GemmConfig.promote``).

    Post: the result equals the float64 product of the fp8 values times the scales up to f32 accumulation, fp8
    wgmma's accumulation within a promotion interval, and one rounding to ``out_dtype``."""
    op = "scaled_mm"
    fast_key = None
    mode = call_mode(autotune, config)
    repeatable = out is None and sm_count is None and type(scale_a) is float and type(scale_b) is float
    if repeatable:
        fast_key = signature_key(op, mode, (a, b) if bias is None else (a, b, bias), (scale_a, scale_b, str(out_dtype)))
        if fast_key is not None:
            fast = _FAST.get(fast_key + (arguments.TORCH[2](0),))
            if fast is not None:
                return fast((a.data_ptr(), b.data_ptr(), bias.data_ptr() if bias is not None else 0))
    a_arg, b_arg = Arg(op, "a", a), Arg(op, "b", b)
    bias_arg = Arg(op, "bias", bias) if bias is not None else None
    out_arg = Arg(op, "out", out) if out is not None else None
    args = [a_arg, b_arg] + [x for x in (bias_arg, out_arg) if x is not None]
    kind = same_kind(op, args)
    dtype = a_arg.check_dtype(op, FP8)
    a_arg.check_rank(op, 2, "(M, K)")
    b_arg.check_rank(op, 2, "(K, N)")
    if b_arg.dtype != dtype:
        raise TypeError(f"{op}: b has dtype {b_arg.shown} but a has {a_arg.shown}: both must have one dtype")
    out_name = _out_dtype_name(out_dtype)
    if out_name not in ("bf16", "f16"):
        shown = out_dtype if isinstance(out_dtype, str) else (TORCH_NAMES.get(str(out_dtype))
                                                               or _numpy_name(out_dtype) or repr(out_dtype))
        raise TypeError(f"{op}: out_dtype must be bf16 or f16 (torch.bfloat16, torch.float16), not {shown}")
    (m, k), (k2, n) = a_arg.shape, b_arg.shape
    if k2 != k:
        raise ValueError(f"{op}: b has {k2} rows but a has {k} columns: a (M, K) @ b (K, N) needs b.shape[0] == K")
    if a_arg.strides is None or not (a_arg.strides[1] == 1 or k <= 1):
        raise ValueError(f"{op}: a must be row-major (unit stride along K), as torch._scaled_mm's mat1, not strides "
                         f"{a_arg.strides}")
    if b_arg.strides is None or not (b_arg.strides[0] == 1 or k <= 1):
        raise ValueError(f"{op}: b must be column-major (unit stride along K: the transpose of an (N, K) row-major "
                         f"tensor), as torch._scaled_mm's mat2, not strides {b_arg.strides}")
    if bias_arg is not None:
        if bias_arg.dtype != out_name:
            raise TypeError(f"{op}: bias has dtype {bias_arg.shown}; it must be out_dtype's, {SPELLED[out_name]}")
        if bias_arg.shape != (n,):
            raise ValueError(f"{op}: bias must have shape ({n},) (b's columns), not {bias_arg.shape}")
    _check_out(op, out_arg, (m, n), out_name)
    scales = (_scale(op, "scale_a", scale_a, kind), _scale(op, "scale_b", scale_b, kind))
    if repeatable and fast_key is None:   # the first torch tensor this process has seen
        fast_key = signature_key(op, mode, (a, b) if bias is None else (a, b, bias), (scale_a, scale_b, str(out_dtype)))
    c = _gemm(op, a_arg, False, b_arg, True, m, n, k, dtype, out_name, out_arg, bias_arg, scales, config, sm_count,
              fp8_majors=True, fast_key=fast_key if k else None, autotune=autotune)
    return c if kind == "numpy" else as_callers(c, args)


def _out_dtype_name(x) -> str | None:
    """A GEMM element type (bf16, f16, e4m3, e5m2) from a name, a torch dtype or a numpy dtype; None for anything
    else (f32 included: no GEMM writes it)."""
    if isinstance(x, str) and x in ("bf16", "f16"):
        return x
    name = TORCH_NAMES.get(str(x))
    if name is None:
        try:
            name = NUMPY_NAMES.get(np.dtype(x))
        except TypeError:
            return None
    return name if name in ELEMENT_BYTES else None


def _numpy_name(x) -> str | None:
    """numpy's name of a dtype-like ``x`` (``np.float32`` → "float32"), None for anything that is no dtype."""
    try:
        return np.dtype(x).name
    except TypeError:
        return None


def _check_out(op: str, out: Arg | None, shape: tuple, dtype: str) -> None:
    if out is None:
        return
    if out.dtype != dtype:
        raise TypeError(f"{op}: out has dtype {out.shown}; the result is {SPELLED[dtype]}")
    if out.shape != shape:
        raise ValueError(f"{op}: out must have shape {shape}, not {out.shape}")
