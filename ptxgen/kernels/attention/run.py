"""Running an ``AttentionConfig`` on tensors: the kernel built and compiled once per config, the kernel's arguments
(Q, K, V and the output as (B, H, S, D) views of FlashAttention's (B, S, H, D) tensors: a permutation of the strides,
no copy), and the launch — on the GPU for torch CUDA tensors, in the CPU interpreter for numpy arrays.

Arguments arrive checked (``ptxgen.kernels.attention.api``): q (B, Sq, Hq, D), k and v (B, Sk, Hkv, D), out like q,
all of one 16-bit dtype with unit stride along D; lse (B, Hq, Sq) f32 contiguous. A persistent config
(``AttentionConfig.persistent``) also takes the head and batch counts and ``ctas``, the CTAs of its grid at most:
by default the device's SM count (one CTA per SM: every config's registers fill the SM), ``INTERPRETER_CTAS`` in the
interpreter.
"""
from __future__ import annotations

from .build import build
from .config import AttentionConfig
from .schedule import item_table

INTERPRETER_CTAS = 132   # the interpreter's default persistent grid bound: an H100 SXM's SMs
_MODULES = {}   # config -> built Module
_JIT = {}       # config -> JitKernel
_TABLES = {}    # (config, heads, batches, sq, sk, ctas, device) -> the item table's arrays (item_table)
_TABLE_LIMIT = 64


def kernel_module(config: AttentionConfig):
    """``build(config)`` once per process. Post: the same Module object for equal configs."""
    module = _MODULES.get(config)
    if module is None:
        module = _MODULES[config] = build(config)
    return module


def jit_kernel(config: AttentionConfig):
    """The JitKernel of ``config`` (verified once, compiled once per specialization through the launcher's caches)."""
    kern = _JIT.get(config)
    if kern is None:
        from ptxgen.runtime import jit

        kern = _JIT[config] = jit(kernel_module(config))
    return kern


def table_arguments(config: AttentionConfig, heads: int, batches: int, sq: int, sk: int, ctas: int,
                    device) -> dict:
    """``item_table``'s ``item_rounds`` and ``item_list`` (``schedule.item_table``), dealt once per problem and kept:
    numpy arrays, or torch int32 tensors on ``device`` (a torch device; None: numpy), one set per torch stream — the
    stream the op launches on — so that a table dropped from the cache returns to the allocator in the order of the
    launches that read it."""
    stream = None
    if device is not None:
        import torch

        stream = torch.cuda.current_stream(device).cuda_stream
    key = (config, heads, batches, sq, sk, ctas, str(device), stream)
    table = _TABLES.get(key)
    if table is None:
        rounds, items = item_table(config, heads, batches, sq, sk, ctas)
        if device is not None:
            rounds, items = (torch.from_numpy(x).to(device) for x in (rounds, items))
        if len(_TABLES) >= _TABLE_LIMIT:
            _TABLES.clear()
        table = _TABLES[key] = {"item_rounds": rounds, "item_list": items}
    return table


def persistent_arguments(config: AttentionConfig, heads: int, batches: int | None, ctas: int | None,
                         device: bool) -> dict:
    """The persistent kernel's extra arguments (none for a non-persistent config): ``heads``, ``batches`` (dense;
    varlen passes its own) and ``ctas`` (None: the SMs of cuda:0 on the device, ``INTERPRETER_CTAS`` on numpy);
    ``item_table``: the table (``table_arguments``, added by ``kernel_arguments``)."""
    if not config.persistent:
        return {}
    if ctas is None:
        if device:
            from ..arguments import device_sms

            ctas = device_sms()
        else:
            ctas = INTERPRETER_CTAS
    extra = {"heads": int(heads), "ctas": int(ctas)}
    if batches is not None:
        extra["batches"] = int(batches)
    return extra


def kernel_arguments(q, k, v, out, lse, scale: float, heads_view, config: AttentionConfig | None = None,
                     ctas: int | None = None, device: bool = False) -> dict:
    """The kernel's arguments: ``heads_view(x)`` is x (B, S, H, D) seen as (B, H, S, D) (modes 1 and 2 swapped);
    ``config`` persistent: with ``persistent_arguments``."""
    args = {"q": heads_view(q), "k": heads_view(k), "v": heads_view(v), "out": heads_view(out), "lse": lse,
            "sq": int(q.shape[1]), "sk": int(k.shape[1]), "group": int(q.shape[2] // k.shape[2]),
            "scale": float(scale)}
    if config is not None:
        args.update(persistent_arguments(config, q.shape[2], q.shape[0], ctas, device))
        if config.item_table:
            args.update(table_arguments(config, int(q.shape[2]), int(q.shape[0]), int(q.shape[1]), int(k.shape[1]),
                                        args["ctas"], q.device if device else None))
    return args


def run_numpy(config: AttentionConfig, q, k, v, out, lse, scale: float, ctas: int | None = None) -> None:
    """Run ``config`` in the CPU interpreter on numpy arrays (``ml_dtypes.bfloat16`` / ``numpy.float16``), writing
    ``out`` and ``lse`` (small sizes: the interpreter runs every CTA; ``ctas``: the persistent grid's bound)."""
    from ptxgen.interp import interpret

    interpret(kernel_module(config), kernel_arguments(q, k, v, out, lse, scale, lambda x: x.transpose(0, 2, 1, 3),
                                                      config, ctas))


def run_device(config: AttentionConfig, q, k, v, out, lse, scale: float, stream=0, ctas: int | None = None) -> None:
    """Launch ``config`` on torch CUDA tensors on ``stream`` (a raw CUDA stream handle), writing ``out`` and ``lse``."""
    args = kernel_arguments(q, k, v, out, lse, scale, lambda x: x.transpose(1, 2), config, ctas, device=True)
    jit_kernel(config)(**args, stream=stream)


def prepared_site(config: AttentionConfig, q, k, v, out, lse, scale: float, stream=0, ctas: int | None = None):
    """The prepared call site (``BoundLaunch``) of these torch tensors: ``site()`` computes out and lse again, exactly
    as the op does, with only ``cuLaunchKernelEx`` on the host (benchmarks time it)."""
    args = kernel_arguments(q, k, v, out, lse, scale, lambda x: x.transpose(1, 2), config, ctas, device=True)
    return jit_kernel(config).prepare(**args, stream=stream)


def varlen_arguments(q, k, v, out, lse, cu_q, cu_k, max_sq: int, scale: float, heads_view,
                     config: AttentionConfig | None = None, ctas: int | None = None, device: bool = False) -> dict:
    """The varlen kernel's arguments: ``heads_view(x)`` is x (total, H, D) seen as (H, total, D); ``config``
    persistent: with ``persistent_arguments``."""
    args = {"q": heads_view(q), "k": heads_view(k), "v": heads_view(v), "out": heads_view(out), "lse": lse,
            "cu_q": cu_q, "cu_k": cu_k, "max_sq": int(max_sq), "batches": int(cu_q.shape[0] - 1),
            "group": int(q.shape[1] // k.shape[1]), "scale": float(scale)}
    if config is not None:
        args.update(persistent_arguments(config, q.shape[1], None, ctas, device))
    return args


def run_varlen_numpy(config: AttentionConfig, q, k, v, out, lse, cu_q, cu_k, max_sq: int, scale: float,
                     ctas: int | None = None) -> None:
    """The varlen kernel in the CPU interpreter on numpy arrays."""
    from ptxgen.interp import interpret

    interpret(kernel_module(config), varlen_arguments(q, k, v, out, lse, cu_q, cu_k, max_sq, scale,
                                                      lambda x: x.transpose(1, 0, 2), config, ctas))


def run_varlen_device(config: AttentionConfig, q, k, v, out, lse, cu_q, cu_k, max_sq: int, scale: float,
                      stream=0, ctas: int | None = None) -> None:
    """The varlen kernel on torch CUDA tensors."""
    args = varlen_arguments(q, k, v, out, lse, cu_q, cu_k, max_sq, scale, lambda x: x.transpose(0, 1), config, ctas,
                            device=True)
    jit_kernel(config)(**args, stream=stream)
