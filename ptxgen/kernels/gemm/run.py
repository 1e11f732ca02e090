"""Running a ``GemmConfig`` on operands: the kernels built and compiled once per config, the stream-K workspace, the
kernel's arguments (the swap of A and B, C's transposed view, the bias as a broadcast view), and the launch — through
a prepared call site per argument signature on the GPU, or the CPU interpreter for numpy arrays.

Operands arrive as the kernel wants them, already checked (``ptxgen.kernels.linalg`` checks the user's arguments):
``a`` is A (M, K) K-major, or its (K, M) MN-major form; ``b`` is B (N, K) K-major, or (K, N) MN-major; ``c`` is
C (M, N) with unit stride along N; ``bias`` an (N,) vector of C's type. Every view meets TMA's rules on the GPU (16-byte
aligned base and row pitch).
"""
from __future__ import annotations

from .build import build
from .config import GemmConfig
from .schedule import streamk_buffers
from ..arguments import device_sms

_MODULES = {}      # kernel config -> built Module
_JIT = {}          # kernel config -> JitKernel
_SITES = {}        # (kernel config, signature, stream) -> (BoundLaunch, workspace)
_CTAS = {}         # kernel config -> the CTAs of the persistent grid (resident on the device)
_WORKSPACES = {}   # (kernel config, CTAs, stream) -> stream-K's work and flags, shared by the call sites of a stream
_SITE_LIMIT = 512  # prepared call sites kept (scale values are part of an fp8 site's key)


def kernel_config(config: GemmConfig) -> GemmConfig:
    """The config of the kernel that runs ``config``: swapping A and B changes the arguments, not the kernel."""
    return config.replace(swap_ab=False) if config.swap_ab else config


def kernel_module(config: GemmConfig):
    """``build(config)`` once per process (swap_ab ignored). Post: the same Module object for equal configs."""
    key = kernel_config(config)
    module = _MODULES.get(key)
    if module is None:
        module = _MODULES[key] = build(key)
    return module


def jit_kernel(config: GemmConfig):
    """The JitKernel of ``config`` (verified once; compiled once per specialization through the launcher's memory
    and disk caches, so a new shape of a compiled config compiles nothing)."""
    key = kernel_config(config)
    kern = _JIT.get(key)
    if kern is None:
        from ptxgen.runtime import jit

        kern = _JIT[key] = jit(kernel_module(key))
    return kern


def kernel_arguments(config: GemmConfig, a, b, c, bias, m: int, n: int, k: int, transpose, broadcast) -> dict:
    """The kernel's tensor arguments and sizes for the problem C (m, n) = A·Bᵀ (+ bias): swapped (``swap_ab``: the
    kernel's A is B, its B is A, its C is ``transpose(c)``, its M is n; with ``c_major = "M"`` the kernel takes its
    C's transpose: c itself swapped, ``transpose(c)`` unswapped), the bias as an (M, N) view of the kernel's C
    shape (``broadcast(bias, shape, along)``: stride 0 along the kernel's rows or columns)."""
    # a column-major kernel C (c_major = "M") is passed as its transpose: the swapped problem's C itself
    if config.swap_ab:
        args = {"a": b, "b": a, "c": c if config.c_major == "M" else transpose(c), "m": n, "n": m, "k": k}
        if config.bias:
            args["bias"] = broadcast(bias, (n, m), 0)
    else:
        args = {"a": a, "b": b, "c": transpose(c) if config.c_major == "M" else c, "m": m, "n": n, "k": k}
        if config.bias:
            args["bias"] = broadcast(bias, (m, n), 1)
    return args


def run_numpy(config: GemmConfig, a, b, c, m: int, n: int, k: int, *, bias=None, scales=(1.0, 1.0),
              sm_count: int = 132) -> None:
    """Run ``config`` in the CPU interpreter on numpy arrays (``ml_dtypes`` for bf16 and fp8), writing ``c``; a
    persistent grid of at most ``sm_count`` CTAs (the interpreter's time grows with the CTAs: tests pass a few)."""
    import numpy as np

    from ptxgen.interp import interpret

    args = kernel_arguments(config, a, b, c, bias, m, n, k, lambda x: x.T,
                            lambda v, shape, along: np.broadcast_to(v if along else v[:, None], shape))
    args["sms"] = sm_count
    if config.fp8:
        args["scale_a"], args["scale_b"] = float(scales[0]), float(scales[1])
    if config.partial_sums:
        shapes = streamk_buffers(kernel_config(config), sm_count)
        args["work"] = np.zeros(shapes["work"], np.float32)
        args["flags"] = np.zeros(shapes["flags"], np.int32)
    interpret(kernel_module(config), args)


def _signature(x) -> tuple:
    return tuple(x.shape), tuple(x.stride()), x.data_ptr() % 16 == 0


def run_device(config: GemmConfig, a, b, c, m: int, n: int, k: int, *, bias=None, scales=(1.0, 1.0), stream=0,
               sm_count: int | None = None):
    """Launch ``config`` on torch CUDA tensors, writing ``c``, on ``stream`` (a raw CUDA stream handle): through the
    call site of the arguments' signature (``prepared_site``), only the tensors' addresses swapped in. → the call
    site (its later calls with tensors of the same signature: ``launch(site, tensors)``)."""
    args, tensors, key = _device_arguments(config, a, b, c, bias, m, n, k, scales, stream)
    site = _SITES.get(key)
    if site is None:
        site = _prepare(config, args, key, scales, stream, sm_count)
        site()
        release(site, tensors)
    else:
        launch(site, tensors)
    return site


def launch(site, tensors: dict) -> None:
    """``site(**tensors)``: the kernel on these tensors (the signature the site was prepared for), not kept alive."""
    site(**tensors)
    release(site, tensors)


def release(site, tensors) -> None:
    """Let the call site drop ``tensors``: every call swaps in all of its tensors, so a cached site need not keep them
    alive (torch's allocator reuses their memory only for work ordered after the launch on the stream)."""
    arguments = site.arguments
    for name in tensors:
        arguments.pop(name, None)


def prepared_site(config: GemmConfig, a, b, c, m: int, n: int, k: int, *, bias=None, scales=(1.0, 1.0), stream=0,
                  sm_count: int | None = None):
    """The prepared call site (``BoundLaunch``) that ``run_device`` launches for these arguments, holding them:
    ``site()`` computes C again, exactly as the op does (benchmarks time it). The first call of a signature (shapes,
    strides, 16-byte alignment, stream, and fp8's scale values) prepares it — the persistent grid sized to the CTAs the
    device holds at once, stream-K's workspace allocated."""
    args, tensors, key = _device_arguments(config, a, b, c, bias, m, n, k, scales, stream)
    site = _SITES.get(key)
    if site is None:
        site = _prepare(config, args, key, scales, stream, sm_count)
    else:
        site(**tensors)   # one launch: the site holds these tensors from now on
    return site


def _device_arguments(config, a, b, c, bias, m, n, k, scales, stream):
    """(the kernel's arguments, its tensor arguments, the call site's key)."""
    args = kernel_arguments(config, a, b, c, bias, m, n, k, lambda x: x.t(),
                            lambda v, shape, along: (v.unsqueeze(0) if along else v.unsqueeze(1)).expand(*shape))
    tensors = {name: value for name, value in args.items() if name in ("a", "b", "c", "bias")}
    key = (kernel_config(config), stream, tuple(_signature(t) for t in tensors.values()),
           scales if config.fp8 else None)
    return args, tensors, key


def _prepare(config, args, key, scales, stream, sm_count):
    """The call site of ``key`` (see ``prepared_site``), kept in ``_SITES``."""
    import torch

    kc = key[0]
    kern = jit_kernel(kc)
    extra = {"sms": _CTAS.get(kc) or sm_count or device_sms()}
    if config.fp8:
        extra["scale_a"], extra["scale_b"] = float(scales[0]), float(scales[1])
    device = args["c"].device

    def prepare():
        if config.partial_sums:
            # one workspace per stream: launches on a stream run one after another and leave the flags zero
            workspace = _WORKSPACES.get((kc, extra["sms"], stream))
            if workspace is None:
                shapes = streamk_buffers(kc, extra["sms"])
                workspace = _WORKSPACES[(kc, extra["sms"], stream)] = {
                    "work": torch.empty(shapes["work"], device=device, dtype=torch.float32),
                    "flags": torch.zeros(shapes["flags"], device=device, dtype=torch.int32)}
            extra.update(workspace)
        return kern.prepare(**args, **extra, stream=stream)

    site = prepare()
    resident = site.compiled.resident_ctas()
    if resident != extra["sms"] and kc not in _CTAS:
        # clusters of 2 or 4 fit fewer CTAs than SMs: a persistent grid larger than the device holds at once would
        # leave its last clusters waiting (and stream-K's flags waiting on them)
        extra["sms"] = resident
        site = prepare()
    _CTAS[kc] = extra["sms"]
    if len(_SITES) >= _SITE_LIMIT:
        _SITES.clear()
    _SITES[key] = site
    return site

