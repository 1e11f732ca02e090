"""DeepGEMM's block-scaled fp8 GEMM with DeepGEMM's conventions: ``fp8_gemm_nt(a, a_scales, b, b_scales, out)`` =
``out = (A·Bᵀ)`` in bf16, A (M, K) e4m3 scaled per (row, 128-wide K block), B (N, K) e4m3 scaled per 128 × 128
block, and the scale-layout helpers (``get_tma_aligned_size``, ``get_mn_major_tma_aligned_tensor``).

The kernel is the persistent warp-specialized GEMM (``ptxgen.kernels.gemm``) with ``GemmConfig(scales="block")``:
each k-tile (128 of K, one scale block) is accumulated by wgmma into a fresh f32 chunk, then promoted on the CUDA
cores, ``total += chunk · a_scale[row, kb] · b_scale[nb, kb]`` (``gemm.block_scales``). Arguments are torch CUDA
tensors (DLPack arrays as torch tensors) run on torch's current stream, or numpy arrays (``ml_dtypes``) run in the
CPU interpreter. Every check happens before anything launches, each error naming the argument.
"""
from __future__ import annotations

import numpy as np

from .gemm.block_scales import GROUPS, straddles
from .gemm.build import build
from .gemm.config import SCALE_BLOCK, GemmConfig
from .gemm.heuristic import H100_SMS, choose_block_scaled_config
from .linalg import _Arg, _device_sms, _operand, _same_kind, _stream, _torch_dtype, _NUMPY_TYPES

OP = "fp8_gemm_nt"
_F32 = ("numpy float32", "torch.float32")
_MODULES = {}   # config -> Module
_JIT = {}       # config -> JitKernel
_SITES = {}     # (config, signature, stream) -> BoundLaunch
_SITE_LIMIT = 512


def ceil_div(x: int, y: int) -> int:
    """⌈x / y⌉ for x ≥ 0, y > 0. ``ceil_div(7168, 128)`` = 56."""
    return -(-x // y)


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """``x`` rounded up so that ``x`` elements of ``element_size`` bytes are a multiple of 16 bytes (TMA's row pitch),
    DeepGEMM's helper. ``get_tma_aligned_size(17, 4)`` = 20. Post: a multiple of 16 / element_size, ≥ x."""
    alignment = 16 // element_size
    return ceil_div(x, alignment) * alignment


def get_mn_major_tma_aligned_tensor(x):
    """DeepGEMM's layout of the A scales: ``x`` (MN, KB) or (G, MN, KB) float32 (numpy or torch) → an array of the same
    shape and values stored MN-major ("transposed": MN contiguous) with the MN extent padded to a multiple of 4 (16
    bytes), i.e. strides (1, aligned MN) (and aligned MN · KB for the group). A (17, 3) ``x`` gives strides (1, 20);
    in CuTe notation the layout (17,3):(1,20). An array already so is returned as it is. Post: ``result == x``
    elementwise; ``fp8_gemm_nt`` takes either form."""
    squeeze = x.ndim == 2
    mn, kb = x.shape[-2:]
    aligned = get_tma_aligned_size(mn, 4)
    groups = 1 if squeeze else x.shape[0]
    if isinstance(x, np.ndarray):
        elem = x.itemsize
        strides = tuple(s // elem for s in x.strides)
        want = (1, aligned) if squeeze else (aligned * kb, 1, aligned)
        if strides == want or (mn <= 1 and kb <= 1):
            return x
        buffer = np.zeros((groups, kb, aligned), dtype=x.dtype)
        buffer[:, :, :mn] = np.swapaxes(x.reshape(groups, mn, kb), 1, 2)
        view = np.swapaxes(buffer, 1, 2)[:, :mn, :]
        return view[0] if squeeze else view
    want = (1, aligned) if squeeze else (aligned * kb, 1, aligned)
    if tuple(x.stride()) == want:
        return x
    import torch

    buffer = torch.zeros((groups, kb, aligned), dtype=x.dtype, device=x.device)
    buffer[:, :, :mn].copy_(x.reshape(groups, mn, kb).transpose(1, 2))
    view = buffer.transpose(1, 2)[:, :mn, :]
    return view[0] if squeeze else view


# DeepGEMM's older name of the same helper
get_col_major_tma_aligned_tensor = get_mn_major_tma_aligned_tensor


def _check_scales(arg: _Arg, name: str, shape: tuple, what: str) -> None:
    if arg.shown not in _F32:
        raise TypeError(f"{OP}: {name} has dtype {arg.shown}; the scales are float32 (torch.float32, numpy.float32)")
    if arg.shape != shape:
        raise ValueError(f"{OP}: {name} must have shape {shape} ({what}), not {arg.shape}")
    if arg.strides is None or any(s < 0 for s in arg.strides):
        raise ValueError(f"{OP}: {name} must have non-negative strides that are whole elements, not "
                         f"{arg.strides}")


def _check_operand(arg: _Arg, name: str, what: str) -> None:
    arg.check_dtype(OP, ("e4m3",))
    arg.check_rank(OP, 2, what)
    if arg.strides is None or not (arg.strides[1] == 1 or arg.shape[1] <= 1):
        raise ValueError(f"{OP}: {name} must be row-major (unit stride along K: {what} K-major, DeepGEMM's NT), not "
                         f"strides {arg.strides}")


def fp8_gemm_nt(a, a_scales, b, b_scales, out=None, *, config: GemmConfig | None = None,
                sm_count: int | None = None):
    """DeepGEMM's ``fp8_gemm_nt``: ``out`` (M, N) bf16 = (A·Bᵀ) with A = ``a`` (M, K) e4m3 times ``a_scales``
    (M, ⌈K/128⌉) float32 — one scale per (row, 128-wide K block), in its natural row-major layout or DeepGEMM's
    M-major TMA-aligned one (``get_mn_major_tma_aligned_tensor``); any strides are read as they are — and B = ``b``
    (N, K) e4m3 times ``b_scales`` (⌈N/128⌉, ⌈K/128⌉) float32, one per 128 × 128 block. ``a`` and ``b`` row-major
    (K contiguous); N and K multiples of 16 (TMA's 16-byte rows); any M ≥ 0. ``out``: (M, N) bf16 with unit stride
    along N, or None (allocated). ``config`` forces a ``GemmConfig`` (e4m3, ``scales="block"``); ``sm_count`` the
    SMs of the persistent grid (numpy: the interpreter's CTAs). → ``out``.

    Each 128-deep K block is one wgmma chunk promoted into the f32 total with its two scales; the last partial block
    (K % 128 ≠ 0) takes its scale (TMA reads zeros past K). Example (numpy, interpreter)::

        a, sa = per_token_cast_to_fp8(x)         # ptxgen.kernels.quantize: (M, K) e4m3, (M, ⌈K/128⌉)
        b, sb = per_block_cast_to_fp8(w)         # (N, K) e4m3, (⌈N/128⌉, ⌈K/128⌉)
        c = fp8_gemm_nt(a, sa, b, sb, sm_count=2)  # ≈ x @ w.T in bf16

    Post: ``out`` equals the float64 product of the dequantized operands up to fp8 wgmma's accumulation within one
    128-deep block, f32 promotion and one rounding to bf16. Errors (before launch): TypeError for a wrong dtype or
    device, ValueError for a wrong rank, shape, stride or K, N not multiples of 16, each naming the argument."""
    return _gemm(a, a_scales, b, b_scales, out, config, sm_count)[0]


def prepared_site(a, a_scales, b, b_scales, out, *, config: GemmConfig | None = None, sm_count: int | None = None):
    """GPU: compute ``fp8_gemm_nt(a, a_scales, b, b_scales, out)`` once and give the call site it launched
    (``BoundLaunch``, holding these tensors): ``site()`` computes ``out`` again, exactly as the op does, with no host
    work but the launch (what benchmarks time as the kernel). None for numpy arrays or an empty problem."""
    _c, site, tensors = _gemm(a, a_scales, b, b_scales, out, config, sm_count)
    if site is not None:
        site.arguments.update(tensors)   # the site holds the tensors its packed addresses point at
    return site


def _gemm(a, a_scales, b, b_scales, out, config, sm_count):
    """(C, the GPU call site or None, the kernel's tensors it launched with) of ``fp8_gemm_nt``'s arguments."""
    args = [_Arg(OP, "a", a), _Arg(OP, "a_scales", a_scales), _Arg(OP, "b", b), _Arg(OP, "b_scales", b_scales)]
    out_arg = _Arg(OP, "out", out) if out is not None else None
    a_arg, sa_arg, b_arg, sb_arg = args
    kind = _same_kind(OP, args + ([out_arg] if out_arg else []))
    _check_operand(a_arg, "a", "(M, K)")
    _check_operand(b_arg, "b", "(N, K)")
    (m, k), (n, k2) = a_arg.shape, b_arg.shape
    if k2 != k:
        raise ValueError(f"{OP}: b has {k2} columns but a has {k}: a (M, K) and b (N, K) share K")
    if k % 16:
        raise ValueError(f"{OP}: K = {k} must be a multiple of 16 (TMA reads rows of 16-byte multiples)")
    if n % 16:
        raise ValueError(f"{OP}: N = {n} must be a multiple of 16 (b's rows, as DeepGEMM requires)")
    kb = ceil_div(k, SCALE_BLOCK)
    _check_scales(sa_arg, "a_scales", (m, kb), "M, ⌈K/128⌉: one per row and 128-wide K block")
    _check_scales(sb_arg, "b_scales", (ceil_div(n, SCALE_BLOCK), kb), "⌈N/128⌉, ⌈K/128⌉: one per 128 × 128 block")
    if out_arg is not None:
        if out_arg.dtype != "bf16":
            raise TypeError(f"{OP}: out has dtype {out_arg.shown}; the result is bf16 (torch.bfloat16, "
                            "ml_dtypes.bfloat16)")
        if out_arg.shape != (m, n):
            raise ValueError(f"{OP}: out must have shape {(m, n)}, not {out_arg.shape}")
        if out_arg.strides is None or not (out_arg.strides[1] == 1 or n <= 1):
            raise ValueError(f"{OP}: out must have unit stride along N (a row-major (M, N) view), not strides "
                             f"{out_arg.strides}")
        c = out_arg.value
        c_row_ok = out_arg.aligned and (m <= 1 or out_arg.strides[0] * 2 % 16 == 0)
    else:
        if kind == "numpy":
            c = np.empty((m, n), dtype=_NUMPY_TYPES["bf16"])
        else:
            import torch

            c = torch.empty((m, n), device=a_arg.value.device, dtype=_torch_dtype("bf16"))
        c_row_ok = True
    if m == 0 or n == 0:
        return c, None, {}
    if k == 0:
        c[...] = 0
        return c, None, {}
    sms = sm_count or (H100_SMS if kind == "numpy" else _device_sms())
    if config is None:
        config = choose_block_scaled_config(m, n, k, sms)
    else:
        config = _forced(config)
    if config.epilogue == "tma" and not c_row_ok:
        config = config.replace(epilogue="direct", epilogue_split=1).validate()
    a_view, b_view = _operand(a_arg, False, "K"), _operand(b_arg, False, "K")
    arguments = kernel_arguments(config, a_view, sa_arg.value, b_view, sb_arg.value, c, m, n, k, kind)
    if kind == "numpy":
        from ptxgen.interp import interpret

        arguments["sms"] = sms
        interpret(kernel_module(config), arguments)
        return c, None, {}
    return (c,) + _launch(config, arguments, sm_count)


def _forced(config) -> GemmConfig:
    if not isinstance(config, GemmConfig):
        raise TypeError(f"{OP}: config must be a GemmConfig, not {type(config).__name__}")
    if config.dtype != "e4m3" or config.out_dtype != "bf16" or config.scales != "block":
        raise ValueError(f"{OP}: config must be an e4m3 → bf16 GEMM with scales='block', not {config.dtype} → "
                         f"{config.out_dtype} with scales={config.scales!r} ({config.name})")
    return config.validate()


def kernel_arguments(config: GemmConfig, a, a_scales, b, b_scales, c, m: int, n: int, k: int, kind: str) -> dict:
    """The kernel's arguments for C = A·Bᵀ: unswapped, rows are A's (``%row_scales`` = a_scales) and columns B's
    (``%col_scales`` = b_scales, or its repeated rank-3 view (16, ⌈N/128⌉, ⌈K/128⌉) with strides (0, s_N, s_K) where
    tiles straddle scale blocks: ``gemm.block_scales``); swapped (``swap_ab``), the kernel's A is B, its rows B's, its
    C Cᵀ."""
    numpy = kind == "numpy"

    def repeated(x):
        if numpy:
            return np.broadcast_to(x[None], (GROUPS,) + x.shape)
        return x.unsqueeze(0).expand(GROUPS, *x.shape)

    if config.swap_ab:
        return {"a": b, "b": a, "c": c.T if numpy else c.t(), "m": n, "n": m, "k": k,
                "row_scales": b_scales, "col_scales": a_scales}
    return {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "row_scales": a_scales,
            "col_scales": repeated(b_scales) if straddles(config) else b_scales}


def kernel_module(config: GemmConfig):
    """``build(config)`` once per process (the block-scaled kernel of a swapped config is its own: its rows and
    columns take the other operand's scale granularity)."""
    module = _MODULES.get(config)
    if module is None:
        module = _MODULES[config] = build(config)
    return module


def jit_kernel(config: GemmConfig):
    """The JitKernel of ``config``, verified and compiled once (through the launcher's memory and disk caches)."""
    kern = _JIT.get(config)
    if kern is None:
        from ptxgen.runtime import jit

        kern = _JIT[config] = jit(kernel_module(config))
    return kern


def _signature(x) -> tuple:
    return tuple(x.shape), tuple(x.stride()), x.data_ptr() % 16 == 0


def _launch(config: GemmConfig, arguments: dict, sm_count):
    """Launch on the GPU through the call site of the arguments' signature: a site's later calls only write the
    tensors' addresses; the persistent grid is the CTAs the device holds at once. → (the site, the tensors)."""
    stream = _stream()
    tensors = {name: arguments[name] for name in ("a", "b", "c", "row_scales", "col_scales")}
    key = (config, stream, tuple(_signature(t) for t in tensors.values()))
    site = _SITES.get(key)
    if site is not None:
        site(**tensors)
        _release(site, tensors)
        return site, tensors
    kern = jit_kernel(config)
    arguments["sms"] = sm_count or _device_sms()
    site = kern.prepare(**arguments, stream=stream)
    resident = site.compiled.resident_ctas()
    if resident < arguments["sms"]:
        arguments["sms"] = resident
        site = kern.prepare(**arguments, stream=stream)
    if len(_SITES) >= _SITE_LIMIT:
        _SITES.clear()
    _SITES[key] = site
    site()
    _release(site, tensors)
    return site, tensors


def _release(site, tensors: dict) -> None:
    """The site need not keep the call's tensors alive: every call swaps all of them in."""
    for name in tensors:
        site.arguments.pop(name, None)
