"""DeepGEMM's block-scaled fp8 GEMM with DeepGEMM's conventions: ``fp8_gemm_nt(a, a_scales, b, b_scales, out)`` =
``out = (A·Bᵀ)`` in bf16, A (M, K) e4m3 scaled per (row, 128-wide K block), B (N, K) e4m3 scaled per 128 × 128
block, and the scale-layout helpers (``get_tma_aligned_size``, ``get_mn_major_tma_aligned_tensor``).

The kernel is the persistent warp-specialized GEMM (``ptxgen.kernels.gemm``) with ``GemmConfig(scales="block")``:
each k-tile (128 of K, one scale block) is accumulated by wgmma into a fresh f32 chunk, then promoted on the CUDA
cores, ``total += chunk · a_scale[row, kb] · b_scale[nb, kb]`` (``gemm.block_scales``). Arguments are torch CUDA
tensors (DLPack arrays as torch tensors) run on torch's current stream, or numpy arrays (``ml_dtypes``) run in the
CPU interpreter. Every check happens before anything launches, each error naming the argument.

A repeated GPU call of torch tensors with the signature of an earlier one (each tensor's shape, strides, dtype, device
and address mod 16, ``expected_m``, the stream; no ``config``/``sm_count``) takes the fast path (``fast_call.FastCall``, as
``linalg``'s ops do): no checks and no choice (its first call passed them, and they read nothing else), only the output
allocated, the addresses written into the prepared call site's argument block, and the launch.
"""
from __future__ import annotations

import numpy as np

from .gemm.build import build
from .gemm.config import SCALE_BLOCK, GemmConfig
from .gemm.heuristic import H100_SMS, choose_block_scaled_config
from .gemm.schedule import streamk_buffers
from . import arguments
from .arguments import Arg as _Arg, NUMPY_TYPES as _NUMPY_TYPES, check_sm_count as _check_sm_count, \
    device_sms as _device_sms, kernel_operand as _operand, same_kind as _same_kind, stream as _stream, \
    torch_dtype as _torch_dtype
from .fast_call import FastCall, remember, signature_key

OP = "fp8_gemm_nt"
_F32 = ("numpy float32", "torch.float32")
_MODULES = {}   # config -> Module
_JIT = {}       # config -> JitKernel
_SITES = {}     # (config, signature, stream) -> BoundLaunch
_SITE_LIMIT = 512
_FAST = {}      # (op, False, each tensor's signature, extras, stream) -> fast_call.FastCall
_WORKSPACES = {}  # (config, CTAs, stream) -> stream-K's work and flags, shared by the call sites of a stream


def ceil_div(x: int, y: int) -> int:
    """⌈x / y⌉ for x ≥ 0, y > 0. ``ceil_div(7168, 128)`` = 56."""
    return -(-x // y)


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """``x`` rounded up so that ``x`` elements of ``element_size`` bytes are a multiple of 16 bytes (TMA's row pitch),
    DeepGEMM's helper. ``get_tma_aligned_size(17, 4)`` = 20. Post: a multiple of 16 / element_size, ≥ x. Errors:
    ValueError for an ``element_size`` that does not divide 16 or an ``x`` < 0 (TypeError: not ints)."""
    for name, value in (("x", x), ("element_size", element_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"get_tma_aligned_size: {name} must be an int, not {type(value).__name__} {value!r}")
    if element_size not in (1, 2, 4, 8, 16):
        raise ValueError(f"get_tma_aligned_size: element_size = {element_size} bytes must divide 16 (1, 2, 4, 8 or "
                         "16: whole elements per 16-byte TMA row)")
    if x < 0:
        raise ValueError(f"get_tma_aligned_size: x = {x} must be ≥ 0 (an extent)")
    alignment = 16 // element_size
    return ceil_div(x, alignment) * alignment


def get_mn_major_tma_aligned_tensor(x):
    """DeepGEMM's layout of the A scales: ``x`` (MN, KB) or (G, MN, KB) float32 (numpy or torch) → an array of the same
    shape and values stored MN-major ("transposed": MN contiguous) with the MN extent padded to a multiple of 4 (16
    bytes), i.e. strides (1, aligned MN) (and aligned MN · KB for the group). A (17, 3) ``x`` gives strides (1, 20);
    in CuTe notation the layout (17,3):(1,20). An array already so is returned as it is. Post: ``result == x``
    elementwise; ``fp8_gemm_nt`` takes either form. Errors: TypeError for anything but a numpy array or a torch
    tensor, ValueError for a rank other than 2 or 3."""
    op = "get_mn_major_tma_aligned_tensor"
    if not isinstance(x, np.ndarray) and not type(x).__module__.startswith("torch"):
        raise TypeError(f"{op}: x must be a numpy array or a torch tensor of scales, not {type(x).__name__}")
    if x.ndim not in (2, 3):
        raise ValueError(f"{op}: x must be 2-D (MN, KB) or 3-D (G, MN, KB), not of shape {tuple(x.shape)}")
    squeeze = x.ndim == 2
    mn, kb = x.shape[-2:]
    # DeepGEMM's padding: MN elements of x's own size to a multiple of 16 bytes (4 for float32)
    aligned = get_tma_aligned_size(mn, x.dtype.itemsize)   # numpy dtypes and torch dtypes (torch ≥ 2.1) have it
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


def _check_scales(arg: _Arg, name: str, shape: tuple, what: str, op: str = OP) -> None:
    """Check a scales argument; a numpy one with a negative stride (a reversed view: torch has none) or a stride
    that is no whole number of elements is read as its copy."""
    if arg.shown not in _F32:
        raise TypeError(f"{op}: {name} has dtype {arg.shown}; the scales are float32 (torch.float32, numpy.float32)")
    if arg.shape != shape:
        raise ValueError(f"{op}: {name} must have shape {shape} ({what}), not {arg.shape}")
    if arg.kind == "numpy" and (arg.strides is None or any(s < 0 for s in arg.strides)):
        arg.value = np.ascontiguousarray(arg.value)
        arg.strides = tuple(s // arg.value.itemsize for s in arg.value.strides)
    if arg.strides is None or any(s < 0 for s in arg.strides):
        raise ValueError(f"{op}: {name} must have non-negative strides that are whole elements, not "
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
    fast = config is None and sm_count is None
    if fast:
        tensors = (a, a_scales, b, b_scales) if out is None else (a, a_scales, b, b_scales, out)
        key = signature_key(OP, False, tensors)
        if key is not None:
            call = _FAST.get(key + (_stream(),))
            if call is not None:
                return call([t.data_ptr() for t in tensors], out)
    c, site, kernel_tensors, swap = _gemm(a, a_scales, b, b_scales, out, config, sm_count)
    if fast and site is not None:
        _remember(signature_key(OP, False, tensors), site, kernel_tensors, swap, tensors, c, out is None)
    return c


def prepared_site(a, a_scales, b, b_scales, out, *, config: GemmConfig | None = None, sm_count: int | None = None):
    """GPU: compute ``fp8_gemm_nt(a, a_scales, b, b_scales, out)`` once and give the call site it launched
    (``BoundLaunch``, holding these tensors): ``site()`` computes ``out`` again, exactly as the op does, with no host
    work but the launch (what benchmarks time as the kernel). None for numpy arrays or an empty problem."""
    _c, site, tensors, _swap = _gemm(a, a_scales, b, b_scales, out, config, sm_count)
    if site is not None:
        site.arguments.update(tensors)   # the site holds the tensors its packed addresses point at
    return site


def _gemm(a, a_scales, b, b_scales, out, config, sm_count):
    """(C, the GPU call site or None, the kernel's tensors it launched with, whether A and B swapped) of
    ``fp8_gemm_nt``'s arguments."""
    args = [_Arg(OP, "a", a), _Arg(OP, "a_scales", a_scales), _Arg(OP, "b", b), _Arg(OP, "b_scales", b_scales)]
    out_arg = _Arg(OP, "out", out) if out is not None else None
    a_arg, sa_arg, b_arg, sb_arg = args
    kind = _same_kind(OP, args + ([out_arg] if out_arg else []))
    _check_sm_count(OP, sm_count)
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
        return c, None, {}, False
    if k == 0:
        c[...] = 0
        return c, None, {}, False
    sms = sm_count or (H100_SMS if kind == "numpy" else _device_sms())
    if config is None:
        config = choose_block_scaled_config(m, n, k, sms)
    else:
        config = _forced(config)
    if config.epilogue == "tma" and not c_row_ok:
        config = config.replace(epilogue="direct", epilogue_split=1, overlap=0).validate()
    a_view, b_view = _operand(a_arg, False, "K"), _operand(b_arg, False, "K")
    arguments = kernel_arguments(config, a_view, sa_arg.value, b_view, sb_arg.value, c, m, n, k, kind)
    if kind == "numpy":
        from ptxgen.interp import interpret

        arguments["sms"] = sms
        arguments.update(streamk_workspace(config, sms, "numpy"))
        interpret(kernel_module(config), arguments)
        return c, None, {}, False
    return (c,) + _launch(config, arguments, sm_count)


def _forced(config) -> GemmConfig:
    if not isinstance(config, GemmConfig):
        raise TypeError(f"{OP}: config must be a GemmConfig, not {type(config).__name__}")
    if config.dtype != "e4m3" or config.out_dtype != "bf16" or config.scales != "block" or config.grouped != "none":
        raise ValueError(f"{OP}: config must be an e4m3 → bf16 GEMM with scales='block', not grouped, not "
                         f"{config.dtype} → {config.out_dtype} with scales={config.scales!r} ({config.name})")
    return config.validate()


def tma_row_scales(a_scales):
    """``scales_smem``'s view of A's scales for the producer's TMA: (MN, KB) scales (any strides) → the (KB, MN)
    row-major tensor of DeepGEMM's M-major TMA-aligned layout (``get_mn_major_tma_aligned_tensor``, transposed: row
    pitch a multiple of 4 elements); a (G, M_max, KB) masked one → (G·KB, M_max): group g's k-block kb is row
    g·KB + kb (M_max a multiple of 128, so every row starts 16-byte aligned). DeepGEMM's layout costs nothing (a view
    at the same address: strides (KB·P, 1, P) with P ≥ M_max a multiple of 4 are rows of pitch P); any other is one
    small transposing copy (M · ⌈K/128⌉ f32: 0.9 MB at M = 4096, K = 7168). (17, 3) → (3, 17) with element strides
    (20, 1); (2, 128, 3) with strides (384, 1, 128) → (6, 128) with strides (128, 1).
    Post: ``result.T == a_scales``; masked, ``result[g·KB + kb, m] == a_scales[g, m, kb]``."""
    if a_scales.ndim == 3:
        groups, m_max, kb = a_scales.shape
        if isinstance(a_scales, np.ndarray):
            rows = np.swapaxes(a_scales, 1, 2)
            if rows.strides[-1] != rows.itemsize:
                rows = np.ascontiguousarray(rows)
            return rows.reshape(groups * kb, m_max)   # a view where the rows are of one pitch, else a copy
        group_pitch, step, pitch = a_scales.stride()
        rows = a_scales.transpose(1, 2)
        if not (step == 1 and pitch % 4 == 0 and (group_pitch == kb * pitch or groups == 1) and
                a_scales.data_ptr() % 16 == 0):
            rows = rows.contiguous()
        return rows.reshape(groups * kb, m_max)   # (G, KB, M_max) rows of one pitch: a view
    return get_mn_major_tma_aligned_tensor(a_scales).T


def tma_col_scales(b_scales):
    """``scales_smem``'s view of B's (NB, KB) scales (grouped: (G·NB, KB)) for the producer's TMA: row-major with a
    row pitch of a multiple of 4 elements (16 bytes) and a 16-byte aligned start — the scales themselves where they
    are so (KB a multiple of 4, i.e. K a multiple of 512, as from ``per_block_cast_to_fp8``), else a padded copy
    (NB · ⌈KB/4⌉·4 f32). numpy arrays are returned as they are (the interpreter's launcher copies them pitched).
    Post: ``result == b_scales``; a torch result has strides (s, 1), s % 4 == 0."""
    if isinstance(b_scales, np.ndarray):
        return b_scales
    nb, kb = b_scales.shape
    pitch, step = tuple(b_scales.stride())
    if (step == 1 or kb <= 1) and pitch % 4 == 0 and pitch >= kb and b_scales.data_ptr() % 16 == 0:
        return b_scales
    import torch

    buffer = torch.zeros((nb, -(-kb // 4) * 4), dtype=b_scales.dtype, device=b_scales.device)
    buffer[:, :kb].copy_(b_scales)
    return buffer[:, :kb]


def kernel_arguments(config: GemmConfig, a, a_scales, b, b_scales, c, m: int, n: int, k: int, kind: str) -> dict:
    """The kernel's arguments for C = A·Bᵀ: unswapped, rows are A's (``%row_scales`` = a_scales) and columns B's
    (``%col_scales`` = b_scales); swapped (``swap_ab``), the kernel's A is B, its rows B's, its C Cᵀ. With
    ``scales_smem`` the scales are the TMA views ``tma_row_scales`` / ``tma_col_scales``."""
    numpy = kind == "numpy"
    if config.scales_smem:
        a_scales, b_scales = tma_row_scales(a_scales), tma_col_scales(b_scales)
    if config.swap_ab:
        return {"a": b, "b": a, "c": c.T if numpy else c.t(), "m": n, "n": m, "k": k,
                "row_scales": b_scales, "col_scales": a_scales}
    return {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "row_scales": a_scales,
            "col_scales": b_scales}


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


# -- the repeated GPU call ---------------------------------------------------------------------------------------------

# kernel tensor parameter -> the op's argument whose address it takes (a view of it starting at its address), unswapped
# and swapped (``swap_ab``: the kernel's A is the problem's B, its rows B's); "c" is the output
_SOURCES = {False: {"a": "a", "b": "b", "c": "c", "row_scales": "a_scales", "col_scales": "b_scales",
                    "m_indices": "m_indices", "masked_m": "masked_m", "m_window": "masked_m"},
            True: {"a": "b", "b": "a", "c": "c", "row_scales": "b_scales", "col_scales": "a_scales",
                   "m_indices": "m_indices", "masked_m": "masked_m", "m_window": "masked_m"}}
# the op's tensor arguments in the order a fast call receives their addresses (then out's, or the allocated C's)
_ROLES = ("a", "a_scales", "b", "b_scales", "m_indices")
_MASKED_ROLES = ("a", "a_scales", "b", "b_scales", "masked_m")


def _remember(key, site, kernel_tensors: dict, swap: bool, tensors: tuple, c, allocated: bool,
              roles=_ROLES) -> None:
    """Keep the call of signature ``key`` (``signature_key``'s, None: not one of torch tensors) as a ``FastCall`` —
    unless one of the kernel's tensors is not a view starting at its argument's address (a copied operand: a later
    call would need the copy too)."""
    if key is None:
        return
    index = {role: i for i, role in enumerate(roles)}
    index["c"] = len(tensors) if allocated else len(tensors) - 1
    addresses = [t.data_ptr() for t in tensors] + ([c.data_ptr()] if allocated else [])
    slots = []
    for name, view in kernel_tensors.items():
        source = index[_SOURCES[swap][name]]
        if view.data_ptr() != addresses[source]:
            return
        slots.append((name, source))
    call = FastCall(site, slots, arguments.TORCH[1] if allocated else None, c.shape, c.dtype, c.device)
    remember(_FAST, key + (_stream(),), call)


def _signature(x) -> tuple:
    return tuple(x.shape), tuple(x.stride()), x.data_ptr() % 16 == 0


def _launch(config: GemmConfig, arguments: dict, sm_count):
    """Launch on the GPU through the call site of the arguments' signature: a site's later calls only write the
    tensors' addresses; the persistent grid is the CTAs the device holds at once. → (the site, the tensors, whether
    the kernel's A is the problem's B)."""
    stream = _stream()
    tensors = {name: arguments[name] for name in ("a", "b", "c", "row_scales", "col_scales", "m_indices", "masked_m",
                                                  "m_window") if name in arguments}
    key = (config, stream, tuple(_signature(t) for t in tensors.values()))
    site = _SITES.get(key)
    if site is not None:
        site(**tensors)
        _release(site, tensors)
        return site, tensors, config.swap_ab
    kern = jit_kernel(config)
    arguments["sms"] = sm_count or _device_sms()
    # a grid cut to the resident CTAs below needs no more workspace than the one sized for ``sms``
    arguments.update(streamk_workspace(config, arguments["sms"], "torch", arguments["c"].device, stream))
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
    return site, tensors, config.swap_ab


def streamk_workspace(config: GemmConfig, ctas: int, kind: str, device=None, stream=0) -> dict:
    """Stream-K's ``%work`` and ``%flags`` (``schedule.streamk_buffers``) for a grid of at most ``ctas`` CTAs, {}
    without stream-K: numpy zeros for the interpreter; on the GPU one pair per (config, CTAs, stream), which every
    launch of a stream shares — launches on a stream run one after another, and each leaves the flags zero.
    ``streamk_workspace(GemmConfig("e4m3", bn=128, scales="block", streamk=True), 3, "numpy")["flags"].shape`` =
    (768,). Post: the flags are zero before the first launch that uses them."""
    if not config.partial_sums:
        return {}
    shapes = streamk_buffers(config, ctas)
    if kind == "numpy":
        return {"work": np.zeros(shapes["work"], np.float32), "flags": np.zeros(shapes["flags"], np.int32)}
    workspace = _WORKSPACES.get((config, ctas, stream))
    if workspace is None:
        import torch

        workspace = _WORKSPACES[(config, ctas, stream)] = {
            "work": torch.empty(shapes["work"], device=device, dtype=torch.float32),
            "flags": torch.zeros(shapes["flags"], device=device, dtype=torch.int32)}
    return workspace


def _release(site, tensors: dict) -> None:
    """The site need not keep the call's tensors alive: every call swaps all of them in."""
    for name in tensors:
        site.arguments.pop(name, None)


# -- the MoE grouped GEMMs ---------------------------------------------------------------------------------------------

M_ALIGNMENT = 128   # the M block of every grouped configuration (BM)


def get_m_alignment_for_contiguous_layout() -> int:
    """DeepGEMM's query: the rows each group's segment of a contiguous grouped A is padded to (the kernel's M block),
    128. Post: ``m_grouped_fp8_gemm_nt_contiguous`` takes M a multiple of it."""
    return M_ALIGNMENT


# DeepGEMM's newer name of the same query
get_mk_alignment_for_contiguous_layout = get_m_alignment_for_contiguous_layout


def _int32(arg: _Arg, op: str, name: str, shape: tuple, what: str) -> None:
    if arg.shown not in ("numpy int32", "torch.int32"):
        raise TypeError(f"{op}: {name} has dtype {arg.shown}; it is int32 (torch.int32, numpy.int32)")
    if arg.shape != shape:
        raise ValueError(f"{op}: {name} must have shape {shape} ({what}), not {arg.shape}")


def _merged(op: str, arg: _Arg, name: str, what: str):
    """A (G, R, C) array whose (G·R) rows are one (G·R, C) matrix (its group stride = R × its row stride), as that
    matrix (a view)."""
    g, r, c = arg.shape
    s = arg.strides
    if s is None or not ((s[2] == 1 or c <= 1) and (s[0] == r * s[1] or g <= 1)):
        raise ValueError(f"{op}: {name} must be row-major {what} (its groups' rows one matrix), not strides {s}")
    return arg.value.reshape(g * r, c)


def _grouped_common(op, a_arg, b_arg, sb_arg, a_rank):
    """The checks both grouped GEMMs share → (G, N, K, KB)."""
    a_arg.check_dtype(op, ("e4m3",))
    b_arg.check_dtype(op, ("e4m3",))
    what = "(M, K)" if a_rank == 2 else "(G, M_max, K)"
    a_arg.check_rank(op, a_rank, what)
    b_arg.check_rank(op, 3, "(G, N, K)")
    groups, n, k = b_arg.shape
    if a_arg.shape[-1] != k:
        raise ValueError(f"{op}: b has {k} columns but a has {a_arg.shape[-1]}: a and b (G, N, K) share K")
    if k % 16:
        raise ValueError(f"{op}: K = {k} must be a multiple of 16 (TMA reads rows of 16-byte multiples)")
    if n % 16:
        raise ValueError(f"{op}: N = {n} must be a multiple of 16 (b's rows, as DeepGEMM requires)")
    kb = ceil_div(k, SCALE_BLOCK)
    _check_scales(sb_arg, "b_scales", (groups, ceil_div(n, SCALE_BLOCK), kb),
                  "G, ⌈N/128⌉, ⌈K/128⌉: one per group and 128 × 128 block", op)
    return groups, n, k, kb


def _grouped_out(op, out_arg, shape, kind, like):
    if out_arg is None:
        if kind == "numpy":
            return np.zeros(shape, dtype=_NUMPY_TYPES["bf16"])
        import torch

        # every row is written by the kernel (padding rows and rows past a group's count as zeros): no memset
        return torch.empty(shape, device=like.device, dtype=_torch_dtype("bf16"))
    if out_arg.dtype != "bf16":
        raise TypeError(f"{op}: out has dtype {out_arg.shown}; the result is bf16 (torch.bfloat16, ml_dtypes.bfloat16)")
    if out_arg.shape != shape:
        raise ValueError(f"{op}: out must have shape {shape}, not {out_arg.shape}")
    return out_arg.value


def _grouped_run(op, config, arguments, kind, sms, sm_count, c_row_ok):
    """Run a grouped GEMM's kernel → (the GPU call site or None, its tensors, whether A and B swapped)."""
    if config.epilogue == "tma" and not c_row_ok:
        config = config.replace(epilogue="direct", epilogue_split=1, overlap=0).validate()
    if kind == "numpy":
        from ptxgen.interp import interpret

        arguments["sms"] = sms
        interpret(kernel_module(config), arguments)
        return None, {}, False
    return _launch(config, arguments, sm_count)


def _c_row_ok(out_arg, rows_stride_index: int) -> bool:
    return out_arg is None or (out_arg.aligned and out_arg.strides is not None
                               and out_arg.strides[rows_stride_index] * 2 % 16 == 0)


def _forced_grouped(op: str, config, grouped: str) -> GemmConfig:
    if not isinstance(config, GemmConfig):
        raise TypeError(f"{op}: config must be a GemmConfig, not {type(config).__name__}")
    if config.dtype != "e4m3" or config.scales != "block" or config.grouped != grouped:
        raise ValueError(f"{op}: config must be an e4m3 GEMM with scales='block' and grouped={grouped!r}, not "
                         f"{config.name}")
    return config.validate()


def m_grouped_fp8_gemm_nt_contiguous(a, a_scales, b, b_scales, out, m_indices, *, config: GemmConfig | None = None,
                                     sm_count: int | None = None):
    """DeepGEMM's contiguous MoE GEMM: the tokens of all experts concatenated along M, ``out[i] = (A[i]·scale) @
    (B[g]·scale)ᵀ`` with ``g = m_indices[i]``. ``a`` (M, K) e4m3 with ``a_scales`` (M, ⌈K/128⌉) float32 (any strides,
    as ``fp8_gemm_nt``); ``b`` (G, N, K) e4m3 row-major with ``b_scales`` (G, ⌈N/128⌉, ⌈K/128⌉); ``out`` (M, N) bf16
    (None: allocated); ``m_indices`` (M,) int32. Each group's segment starts on a multiple of
    ``get_m_alignment_for_contiguous_layout()`` (128) rows, so M is one too: a 128-row tile belongs to the group of its
    first row, padding rows (``m_indices`` -1, at the end of a segment or whole tiles) are written as ZEROS (their
    rows' scale is 0: 0 · A's row, so a NaN code in a padding row of A gives NaN). One persistent launch for all
    groups. Numpy arguments (the interpreter) are checked: an index outside -1 … G-1 or a tile mixing groups is a
    ValueError before launch; on the GPU the indices are not read by the host (no synchronization): an index ≥ G
    reads B past its end as TMA's zeros (zero rows), never other memory. → ``out``."""
    op = "m_grouped_fp8_gemm_nt_contiguous"
    fast = config is None and sm_count is None
    if fast:
        tensors = (a, a_scales, b, b_scales, m_indices) + (() if out is None else (out,))
        key = signature_key(op, False, tensors)
        if key is not None:
            call = _FAST.get(key + (_stream(),))
            if call is not None:
                return call([t.data_ptr() for t in tensors], out)
    c, site, kernel_tensors, swap = _contiguous(a, a_scales, b, b_scales, out, m_indices, config, sm_count)
    if fast and site is not None:
        _remember(signature_key(op, False, tensors), site, kernel_tensors, swap, tensors, c, out is None)
    return c


def _contiguous(a, a_scales, b, b_scales, out, m_indices, config, sm_count):
    """(C, the GPU call site or None, its tensors, whether A and B swapped) of ``m_grouped_fp8_gemm_nt_contiguous``."""
    op = "m_grouped_fp8_gemm_nt_contiguous"
    names = ("a", "a_scales", "b", "b_scales", "m_indices")
    args = [_Arg(op, name, x) for name, x in zip(names, (a, a_scales, b, b_scales, m_indices))]
    out_arg = _Arg(op, "out", out) if out is not None else None
    a_arg, sa_arg, b_arg, sb_arg, idx_arg = args
    kind = _same_kind(op, args + ([out_arg] if out_arg else []))
    _check_sm_count(op, sm_count)
    groups, n, k, kb = _grouped_common(op, a_arg, b_arg, sb_arg, 2)
    if a_arg.strides is None or not (a_arg.strides[1] == 1 or k <= 1):
        raise ValueError(f"{op}: a must be row-major (unit stride along K), not strides {a_arg.strides}")
    m = a_arg.shape[0]
    if m % M_ALIGNMENT:
        raise ValueError(f"{op}: a has {m} rows; each group's segment is padded to "
                         f"get_m_alignment_for_contiguous_layout() = {M_ALIGNMENT} rows, so M is a multiple of it")
    _check_scales(sa_arg, "a_scales", (m, kb), "M, ⌈K/128⌉: one per row and 128-wide K block", op)
    _int32(idx_arg, op, "m_indices", (m,), "each row's group, -1 for padding")
    if kind == "numpy":
        _check_indices(op, np.asarray(m_indices), groups)
    c = _grouped_out(op, out_arg, (m, n), kind, a_arg.value)
    if out_arg is not None and (out_arg.strides is None or not (out_arg.strides[1] == 1 or n <= 1)):
        raise ValueError(f"{op}: out must have unit stride along N, not strides {out_arg.strides}")
    if m == 0 or n == 0 or groups == 0 or k == 0:
        if groups == 0 or k == 0:
            c[...] = 0   # no group: every row is padding; K = 0: every product is the empty sum (torch's zeros)
        return c, None, {}, False
    sms = sm_count or (H100_SMS if kind == "numpy" else _device_sms())
    config = choose_block_scaled_config(m, n, k, sms, grouped="contiguous") if config is None else \
        _forced_grouped(op, config, "contiguous")
    b2 = _merged(op, b_arg, "b", "(G, N, K)")
    sb2 = sb_arg.value.reshape(-1, kb)
    arguments = kernel_arguments(config, _operand(a_arg, False, "K"), sa_arg.value, b2, sb2, c, m, n, k, kind)
    arguments["m_indices"] = idx_arg.value
    return (c,) + _grouped_run(op, config, arguments, kind, sms, sm_count, _c_row_ok(out_arg, 0))


def _check_indices(op: str, indices, groups: int) -> None:
    bad = np.nonzero((indices < -1) | (indices >= groups))[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{op}: m_indices[{i}] = {int(indices[i])} is neither -1 (padding) nor a group of b "
                         f"(0 … {groups - 1})")
    for t in range(0, indices.size, M_ALIGNMENT):
        tile = indices[t:t + M_ALIGNMENT]
        real = np.unique(tile[tile >= 0])
        if real.size > 1 or (real.size == 1 and tile[0] < 0):
            raise ValueError(f"{op}: rows {t} … {t + M_ALIGNMENT - 1} of m_indices hold groups "
                             f"{', '.join(map(str, real.tolist()))}"
                             f"{' after padding' if real.size == 1 else ''}: each group's segment starts on a "
                             f"multiple of {M_ALIGNMENT} rows and its padding (-1) follows it")


def m_grouped_fp8_gemm_nt_masked(a, a_scales, b, b_scales, out, masked_m, expected_m: int, *,
                                 config: GemmConfig | None = None, sm_count: int | None = None):
    """DeepGEMM's masked MoE GEMM (decode under CUDA graphs: the host does not know the counts): for each group g,
    ``out[g, :masked_m[g]] = (A[g, :masked_m[g]]·scale) @ (B[g]·scale)ᵀ``. ``a`` (G, M_max, K) e4m3 with
    ``a_scales`` (G, M_max, ⌈K/128⌉) float32 (any strides: DeepGEMM's M-major TMA-aligned layout too); ``b``
    (G, N, K) with ``b_scales`` (G, ⌈N/128⌉, ⌈K/128⌉); ``out`` (G, M_max, N) bf16, row-major (None: allocated);
    ``masked_m`` (G,) int32 on the device, read by the kernel only (no host synchronization); ``expected_m`` (an int
    ≥ 0) the configuration's hint of the rows per group. M_max is a multiple of 128 (the M block). Rows ≥ masked_m[g]
    of ``out`` are written as ZEROS (scale 0: a NaN/inf in such a row of A, or in B[g] of a tile that runs, gives NaN
    in those rows only); a tile wholly past them runs no k-tile. Numpy arguments are checked (a count
    outside 0 … M_max is a ValueError); on the GPU a count > M_max computes M_max rows, a negative one none. → out."""
    op = "m_grouped_fp8_gemm_nt_masked"
    fast = config is None and sm_count is None and type(expected_m) is int
    if fast:
        tensors = (a, a_scales, b, b_scales, masked_m) + (() if out is None else (out,))
        key = signature_key(op, False, tensors, (expected_m,))
        if key is not None:
            call = _FAST.get(key + (_stream(),))
            if call is not None:
                return call([t.data_ptr() for t in tensors], out)
    c, site, kernel_tensors, swap = _masked(a, a_scales, b, b_scales, out, masked_m, expected_m, config, sm_count)
    if fast and site is not None:
        _remember(signature_key(op, False, tensors, (expected_m,)), site, kernel_tensors, swap, tensors, c, out is None,
                  _MASKED_ROLES)
    return c


def _masked(a, a_scales, b, b_scales, out, masked_m, expected_m, config, sm_count):
    """(C, the GPU call site or None, its tensors, whether A and B swapped) of ``m_grouped_fp8_gemm_nt_masked``."""
    op = "m_grouped_fp8_gemm_nt_masked"
    names = ("a", "a_scales", "b", "b_scales", "masked_m")
    args = [_Arg(op, name, x) for name, x in zip(names, (a, a_scales, b, b_scales, masked_m))]
    out_arg = _Arg(op, "out", out) if out is not None else None
    a_arg, sa_arg, b_arg, sb_arg, mm_arg = args
    kind = _same_kind(op, args + ([out_arg] if out_arg else []))
    _check_sm_count(op, sm_count)
    groups, n, k, kb = _grouped_common(op, a_arg, b_arg, sb_arg, 3)
    if a_arg.shape[0] != groups:
        raise ValueError(f"{op}: a has {a_arg.shape[0]} groups but b has {groups}")
    m_max = a_arg.shape[1]
    if m_max % M_ALIGNMENT:
        raise ValueError(f"{op}: M_max = {m_max} (a.shape[1]) must be a multiple of {M_ALIGNMENT} (the M block)")
    if isinstance(expected_m, bool) or not isinstance(expected_m, (int, np.integer)) or expected_m < 0:
        raise ValueError(f"{op}: expected_m must be an int ≥ 0 (a hint of the rows per group), not {expected_m!r}")
    _check_scales(sa_arg, "a_scales", (groups, m_max, kb), "G, M_max, ⌈K/128⌉: one per row and 128-wide K block", op)
    _int32(mm_arg, op, "masked_m", (groups,), "each group's rows")
    if kind == "numpy":
        counts = np.asarray(masked_m)
        bad = np.nonzero((counts < 0) | (counts > m_max))[0]
        if bad.size:
            g = int(bad[0])
            raise ValueError(f"{op}: masked_m[{g}] = {int(counts[g])} is outside 0 … M_max = {m_max}")
    c = _grouped_out(op, out_arg, (groups, m_max, n), kind, a_arg.value)
    if groups == 0 or m_max == 0 or n == 0:
        return c, None, {}, False
    if k == 0:
        c[...] = 0   # every product is the empty sum: zeros (the rows past a count are zeros too)
        return c, None, {}, False
    c_arg = out_arg or _Arg(op, "out", c)
    c2 = _merged(op, c_arg, "out", "(G, M_max, N)")
    sms = sm_count or (H100_SMS if kind == "numpy" else _device_sms())
    hint = groups * max(ceil_div(int(expected_m), M_ALIGNMENT), 1) * M_ALIGNMENT
    config = choose_block_scaled_config(hint, n, k, sms, grouped="masked") if config is None else \
        _forced_grouped(op, config, "masked")
    a2 = _merged(op, a_arg, "a", "(G, M_max, K)")
    b2 = _merged(op, b_arg, "b", "(G, N, K)")
    sb2 = sb_arg.value.reshape(-1, kb)
    arguments = kernel_arguments(config, a2, sa_arg.value, b2, sb2, c2, m_max, n, k, kind)
    counts = mm_arg.value
    window = np.broadcast_to(counts[:1], (m_max,)) if kind == "numpy" else counts[:1].expand(m_max)
    arguments.update(groups=groups, masked_m=counts, m_window=window)
    return (c,) + _grouped_run(op, config, arguments, kind, sms, sm_count, _c_row_ok(c_arg, 1))


def prepared_grouped_site(layout: str, *args, config: GemmConfig | None = None, sm_count: int | None = None):
    """GPU: run ``m_grouped_fp8_gemm_nt_contiguous(*args)`` (``layout`` "contiguous") or ``…_masked(*args)``
    ("masked") once and give its call site, holding the tensors: ``site()`` runs it again (benchmarks time it)."""
    run = _contiguous if layout == "contiguous" else _masked
    _c, site, tensors, _swap = run(*args, config, sm_count)
    if site is not None:
        site.arguments.update(tensors)
    return site
