"""The ops' array arguments, read and checked once for every op of the kernel library (GEMMs, block-scaled fp8,
attention, row-wise ops, quantizers, transpose): which framework an argument comes from, its element type in the
tile IR's names, shape and element strides, and the CUDA state a GPU call needs (torch's current stream, the SM
count).

An argument is a numpy array (run in the CPU interpreter; bf16 and fp8 as ``ml_dtypes`` arrays) or a CUDA tensor:
torch, or any DLPack array (cupy, JAX), read as a torch tensor. Every error names the op and the argument:
``matmul: a has dtype torch.float32; matmul takes bf16 (torch.bfloat16, ml_dtypes.bfloat16) or f16 (torch.float16,
numpy.float16)``.
"""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

ITEM_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "e4m3": 1, "e5m2": 1}
NUMPY_NAMES = {np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
               np.dtype(ml_dtypes.float8_e4m3fn): "e4m3", np.dtype(ml_dtypes.float8_e5m2): "e5m2"}
NUMPY_TYPES = {name: dtype for dtype, name in NUMPY_NAMES.items()}
TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32",
               "torch.float8_e4m3fn": "e4m3", "torch.float8_e5m2": "e5m2"}
SPELLED = {"bf16": "bf16 (torch.bfloat16, ml_dtypes.bfloat16)", "f16": "f16 (torch.float16, numpy.float16)",
           "f32": "f32 (torch.float32, numpy.float32)",
           "e4m3": "e4m3 (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn)",
           "e5m2": "e5m2 (torch.float8_e5m2, ml_dtypes.float8_e5m2)"}

# the tensor types of the ops' fast paths (torch.Tensor, torch.nn.Parameter), torch.empty and the current raw CUDA
# stream's getter, once a call has seen a torch tensor (torch is imported by the caller, never here); empty before
TORCH = [frozenset(), None, None]
SMS = []   # the device's SM count, once asked


def remember_torch() -> None:
    """Fill ``TORCH`` from the imported torch. Post: ``TORCH[0]`` holds torch.Tensor (and nn.Parameter),
    ``TORCH[1]`` is torch.empty, ``TORCH[2](0)`` is the current raw stream of cuda:0."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    TORCH[1] = torch.empty
    TORCH[2] = raw if raw is not None else (lambda device: torch.cuda.current_stream(device).cuda_stream)
    nn = getattr(torch, "nn", None)
    # a weight is usually an nn.Parameter: a Tensor whose data_ptr, shape, stride, dtype and device are the tensor's
    TORCH[0] = frozenset(t for t in (torch.Tensor, getattr(nn, "Parameter", None)) if t is not None)


class Arg:
    """One array argument, described once: ``kind`` "numpy" or "torch", element type ``dtype`` (the IR's name: bf16,
    f16, f32, e4m3, e5m2; None for any other, with ``shown`` the caller's spelling), ``shape``, element ``strides``
    (None where a numpy stride is not a whole number of elements), ``aligned`` (16-byte aligned base), ``value`` (the
    array; DLPack objects as torch tensors), ``producer`` (the framework of a DLPack array, else None).

    A (4, 8) row-major bf16 numpy array reads as dtype "bf16", shape (4, 8), strides (8, 1): the layout (4,8):(8,1).
    Post: a CUDA argument is a torch tensor on cuda:0; anything else raised TypeError (not an array, a CPU tensor) or
    ValueError (another device), naming the op and the argument."""

    __slots__ = ("name", "kind", "dtype", "shown", "shape", "strides", "aligned", "value", "producer")

    def __init__(self, op: str, name: str, x):
        self.name, self.producer = name, None
        if isinstance(x, np.ndarray):
            self.kind, self.value = "numpy", x
            self.dtype, self.shown = NUMPY_NAMES.get(x.dtype), f"numpy {x.dtype}"
            self.shape = tuple(x.shape)
            self.strides = tuple(s // x.itemsize for s in x.strides) if all(s % x.itemsize == 0
                                                                           for s in x.strides) else None
            if x.size == 0:
                self.strides = row_major(self.shape)
            self.aligned = True
            return
        module = type(x).__module__
        if not module.startswith("torch") and hasattr(x, "__dlpack__"):
            try:
                import torch
            except ImportError:
                raise TypeError(f"{op}: {name} is a {type(x).__name__} (a DLPack array of {module.split('.')[0]}); "
                                "reading one needs torch, which is not installed: pass a numpy array (run in the CPU "
                                "interpreter)") from None

            self.producer = module.split(".")[0]
            x = torch.from_dlpack(x)
            module = "torch"
        if not (module.startswith("torch") and hasattr(x, "data_ptr")):
            raise TypeError(f"{op}: {name} must be a CUDA tensor (torch, or any DLPack array: cupy, JAX) or a numpy "
                            f"array, not {type(x).__name__}")
        if not x.is_cuda:
            raise TypeError(f"{op}: {name} is a CPU torch tensor; pass CUDA tensors (or numpy arrays, run in the CPU "
                            "interpreter)")
        if x.device.index not in (None, 0):
            raise ValueError(f"{op}: {name} is on {x.device}; the ptxgen runtime runs on cuda:0")
        self.kind, self.value = "torch", x
        if not TORCH[0]:
            remember_torch()
        self.dtype, self.shown = TORCH_NAMES.get(str(x.dtype)), str(x.dtype)
        self.shape, self.strides = tuple(x.shape), tuple(x.stride())
        if x.numel() == 0:
            self.strides = row_major(self.shape)
        self.aligned = x.data_ptr() % 16 == 0

    def check_dtype(self, op: str, allowed) -> str:
        """The element type, one of ``allowed`` (IR names), else TypeError: ``matmul: a has dtype torch.float32;
        matmul takes bf16 (torch.bfloat16, ml_dtypes.bfloat16) or f16 (…)``. Post: the result is in ``allowed``."""
        if self.dtype not in allowed:
            raise TypeError(f"{op}: {self.name} has dtype {self.shown}; {op} takes "
                            + " or ".join(SPELLED[d] for d in allowed))
        return self.dtype

    def check_rank(self, op: str, rank: int, what: str) -> None:
        """ValueError unless the argument has ``rank`` modes: ``matmul: a must be 2-D (M, K), not of shape (3,)``.
        Post: ``len(self.shape) == rank``."""
        if len(self.shape) != rank:
            raise ValueError(f"{op}: {self.name} must be {rank}-D {what}, not of shape {self.shape}")


def row_major(shape: tuple) -> tuple:
    """The element strides of a row-major array of ``shape``: (3, 5) → (5, 1), the layout (3,5):(5,1). An empty array
    (a 0 extent) is read with these whatever strides its framework gave it (ml_dtypes' empty arrays have strides
    (0, 0)): it holds no element, so every layout describes it. Post: the last stride is 1 (for a rank ≥ 1)."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def check_sm_count(op: str, sm_count) -> None:
    """``sm_count`` is None (the device's SMs; the interpreter's default 132) or an int ≥ 1, else TypeError /
    ValueError: ``matmul: sm_count must be an int ≥ 1 (the CTAs of the persistent grid) or None, not 0``.
    Post: ``sm_count`` is None or a positive int (a bool is refused: it is no count)."""
    if sm_count is None:
        return
    if isinstance(sm_count, bool) or not isinstance(sm_count, (int, np.integer)):
        raise TypeError(f"{op}: sm_count must be an int ≥ 1 (the CTAs of the persistent grid) or None, not "
                        f"{type(sm_count).__name__} {sm_count!r}")
    if sm_count < 1:
        raise ValueError(f"{op}: sm_count must be an int ≥ 1 (the CTAs of the persistent grid) or None, not "
                         f"{sm_count}")


def same_kind(op: str, args) -> str:
    """The backend of a call: "numpy" when every Arg is a numpy array, "torch" when every one is a CUDA tensor; a mix
    is a TypeError naming one of each (``matmul: a is a numpy array but b is a CUDA tensor: …``). Post: every arg's
    ``kind`` is the result."""
    kinds = {arg.kind for arg in args}
    if len(kinds) > 1:
        numpy_arg = next(arg for arg in args if arg.kind == "numpy")
        device_arg = next(arg for arg in args if arg.kind == "torch")
        raise TypeError(f"{op}: {numpy_arg.name} is a numpy array but {device_arg.name} is a CUDA tensor: pass all "
                        "of them on the GPU, or all as numpy arrays")
    return kinds.pop()


def overlaps(a: Arg, b: Arg) -> bool:
    """Whether two arguments may share memory: their byte spans (from the lowest to the highest element address)
    intersect — exact for contiguous tensors, conservative for interleaved views (e.g. the even and odd columns of one
    matrix count as overlapping). An op whose kernel reads one while it writes the other (``out`` given) copies the
    input first where they do: a CTA may read what another has already overwritten. A (4, 8) array and its
    ``[2:, :]`` slice overlap; two separate allocations do not. Post: False only where no element is shared."""
    if a.kind != b.kind:
        return False
    if a.kind == "numpy":
        return bool(np.may_share_memory(a.value, b.value))
    spans = []
    for arg in (a, b):
        if 0 in arg.shape:
            return False
        first = arg.value.data_ptr()
        low = sum(min(0, s * (n - 1)) for n, s in zip(arg.shape, arg.strides))
        high = sum(max(0, s * (n - 1)) for n, s in zip(arg.shape, arg.strides))
        size = arg.value.element_size()
        spans.append((first + low * size, first + (high + 1) * size))
    return spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]


def private_copy(op: str, arg: Arg) -> Arg:
    """A copy of ``arg``'s elements in memory of their own (numpy ``copy``, torch ``clone``), as the same argument:
    what an op reads instead of an input its ``out`` overlaps. Post: shares no memory with ``arg``."""
    return Arg(op, arg.name, arg.value.clone() if arg.kind == "torch" else arg.value.copy())


def writable(op: str, out: Arg) -> None:
    """A numpy ``out`` the op writes into must be writeable (a ``np.broadcast_to`` view or a read-only buffer is not):
    ``transpose: out is a read-only numpy array; pass a writeable one``. Post: returns only for a writeable (or a
    CUDA) out."""
    if out.kind == "numpy" and not out.value.flags.writeable:
        raise ValueError(f"{op}: {out.name} is a read-only numpy array; pass a writeable one")


def as_callers(result, args):
    """``result`` (a numpy array or a torch tensor) in the caller's kind: for DLPack arrays of another framework
    (cupy, JAX), that framework's ``from_dlpack`` of it; else as it is. ``args``: the call's Args (None entries are
    skipped). Post: a cupy caller gets a cupy array viewing the same memory."""
    producer = next((arg.producer for arg in args if arg is not None and arg.producer), None)
    if producer:
        convert = getattr(sys.modules.get(producer), "from_dlpack", None)
        if convert is not None:
            return convert(result)
    return result


def torch_dtype(name: str):
    """The torch dtype of an IR element type: ``torch_dtype("bf16")`` is torch.bfloat16. Post: ``TORCH_NAMES`` maps
    its ``str`` back to ``name``."""
    import torch

    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[name]


def device_sms() -> int:
    """The SM count of cuda:0 (132 on an H100 SXM), asked once per process. Post: > 0."""
    if not SMS:
        from ptxgen.runtime import multiprocessor_count

        SMS.append(multiprocessor_count())
    return SMS[0]


def stream() -> int:
    """torch's current CUDA stream on cuda:0 (its raw handle; the getter the fast paths' keys use). Post: the handle
    a launch on torch's current stream takes."""
    if TORCH[2] is None:
        remember_torch()
    return TORCH[2](0)


# -- operands in the GEMM kernels' forms (TMA-readable views) -------------------------------------------------------

def tma_ok(arg: Arg, outer: int, inner: int, outer_stride, inner_stride) -> bool:
    """Whether a 2-D view (outer, inner) with these strides is one TMA describes in place: unit stride along inner
    (or inner of extent 1), the outer pitch a positive multiple of 16 bytes (or outer of extent 1: a broadcast row
    is copied), a 16-byte aligned base. Numpy arrays always are (the launcher and the interpreter copy them into
    pitched buffers). A bf16 (64, 100) view of strides (104, 1), the layout (64,100):(104,1), is (208-byte pitch);
    strides (100, 1) are not (200 bytes). Post: True only where a tensor map can address the view as it lies."""
    if arg.kind == "numpy":
        return True
    if arg.strides is None or not arg.aligned:
        return False
    itemsize = ITEM_BYTES[arg.dtype]
    return (inner_stride == 1 or inner == 1) and (outer == 1 or (outer_stride > 0 and
                                                                 (outer_stride * itemsize) % 16 == 0))


def in_place(arg: Arg, transposed: bool, major: str) -> bool:
    """Whether the operand of logical form (rows, K) — ``arg`` itself, or its transpose when ``transposed`` — lies
    in memory as the ``major`` form the kernel reads through TMA: "K" (K contiguous: a (rows, K) view) or "MN" (rows
    contiguous: a (K, rows) view). A (M, K):(K, 1) operand with K·itemsize a multiple of 16 is in place as "K".
    Post: True only where ``kernel_operand`` returns a view, not a copy."""
    if arg.strides is None:
        return False
    (rows, k), (s_rows, s_k) = (arg.shape[::-1], arg.strides[::-1]) if transposed else (arg.shape, arg.strides)
    if major == "K":
        return (s_k == 1 or k == 1) and tma_ok(arg, rows, k, s_rows, s_k)
    return (s_rows == 1 or rows == 1) and tma_ok(arg, k, rows, s_k, s_rows)


def natural_major(arg: Arg, transposed: bool) -> str | None:
    """The major an operand lies in ("K" first), or None: neither (it is copied). (M, K):(K, 1) → "K",
    (M, K):(1, M) → "MN" (16-byte pitches). Post: a result r has ``in_place(arg, transposed, r)``."""
    return next((major for major in ("K", "MN") if in_place(arg, transposed, major)), None)


def kernel_operand(arg: Arg, transposed: bool, major: str):
    """The operand of logical form (rows, K) (``arg``, or its transpose when ``transposed``) as the kernel takes it:
    ``major`` "K" → a (rows, K) view, "MN" → a (K, rows) view. On the GPU an operand that does not lie so is copied
    into a buffer of that form whose row pitch is padded to 16 bytes; the interpreter reads numpy arrays logically,
    whatever their strides. Post: a (rows, K) array for "K", (K, rows) for "MN", equal elementwise to the logical
    operand, whose layout TMA describes ((rows, K):(pitch, 1) with pitch·itemsize a multiple of 16 for "K")."""
    numpy = arg.kind == "numpy"
    flip = (lambda v: v.T) if numpy else (lambda v: v.t())
    logical = flip(arg.value) if transposed else arg.value
    view = logical if major == "K" else flip(logical)
    if numpy or in_place(arg, transposed, major):
        return view
    import torch

    outer, inner = view.shape
    itemsize = ITEM_BYTES[arg.dtype]
    buffer = torch.empty((outer, -(-inner * itemsize // 16) * 16 // itemsize), device=view.device, dtype=view.dtype)
    buffer[:, :inner].copy_(view)
    return buffer[:, :inner]
