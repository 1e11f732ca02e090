"""A stand-in ``torch`` module for timing the GEMM ops' host path without a GPU (``bench_launch.py --cpu``) and for
CPU tests of that path: CUDA-looking tensors that are only metadata (shape, strides, dtype, device, an address), and
the few functions ``ptxgen.kernels.linalg`` and ``ptxgen.kernels.gemm.run`` call on the GPU path (``empty``,
``zeros``, the current raw stream). Nothing is ever read or written through an address: the driver is stubbed too
(``stub_driver``), so a launch only receives the packed argument block.

``install()`` puts the module in ``sys.modules["torch"]`` (refused when the real torch is imported already: the ops
import torch themselves, so the two cannot be told apart). ``empty`` hands out addresses from a small ring per size,
512-byte aligned, the way torch's caching allocator reuses a freed block for the next allocation of its size.
"""
from __future__ import annotations

import struct
import sys
import types


class DType:
    def __init__(self, name: str, itemsize: int):
        self.name, self.itemsize = name, itemsize

    def __str__(self):
        return f"torch.{self.name}"

    __repr__ = __str__


class Device:
    def __init__(self, index: int = 0):
        self.type, self.index = ("cuda", index) if index >= 0 else ("cpu", None)

    def __str__(self):
        return f"cuda:{self.index}" if self.type == "cuda" else "cpu"

    def __eq__(self, other):
        return isinstance(other, Device) and other.index == self.index

    def __hash__(self):
        return hash(("cuda", self.index))


DEVICE = Device(0)
DTYPES = {name: DType(name, size) for name, size in (("bfloat16", 2), ("float16", 2), ("float8_e4m3fn", 1),
                                                     ("float8_e5m2", 1), ("float32", 4), ("int32", 4))}
FLOAT32 = DTYPES["float32"]
_RING = 4                      # addresses per allocation size before they repeat
_NEXT = {}                     # bytes -> allocations so far
_BASE = [0x7F0000000000]       # the next fresh region


def _address(nbytes: int) -> int:
    """An address for a new tensor of ``nbytes``: one of ``_RING`` per size, in turn (a freed block reused)."""
    count = _NEXT.get(nbytes, 0)
    _NEXT[nbytes] = count + 1
    region = _REGIONS.get(nbytes)
    if region is None:
        region = _REGIONS[nbytes] = _BASE[0]
        _BASE[0] += _RING * (-(-max(nbytes, 1) // 512) * 512) + 4096
    return region + (count % _RING) * (-(-max(nbytes, 1) // 512) * 512)


_REGIONS = {}


def _contiguous(shape) -> tuple:
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= extent
    return tuple(reversed(strides))


class Tensor:
    """A CUDA tensor's metadata: ``shape``, ``stride()``, ``dtype``, ``device``, ``data_ptr()``."""

    is_cuda = True

    def __init__(self, shape, strides, dtype: DType, ptr: int, device: Device = DEVICE):
        self.shape, self._strides, self.dtype, self._ptr, self.device = tuple(shape), tuple(strides), dtype, ptr, device

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple:
        return self._strides

    def get_device(self) -> int:
        return self.device.index

    def dim(self) -> int:
        return len(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for extent in self.shape:
            n *= extent
        return n

    def is_contiguous(self) -> bool:
        return all(s == c for s, c, e in zip(self._strides, _contiguous(self.shape), self.shape) if e > 1)

    def t(self) -> "Tensor":
        return Tensor(self.shape[::-1], self._strides[::-1], self.dtype, self._ptr, self.device)

    @property
    def T(self) -> "Tensor":
        return self.t()

    def unsqueeze(self, dim: int) -> "Tensor":
        shape, strides = list(self.shape), list(self._strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return Tensor(shape, strides, self.dtype, self._ptr, self.device)

    def expand(self, *shape) -> "Tensor":
        strides = tuple(s if e == n else 0 for s, e, n in zip(self._strides, self.shape, shape))
        return Tensor(shape, strides, self.dtype, self._ptr, self.device)

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], tuple):
            shape = shape[0]
        total = self.numel()
        if -1 in shape:
            known = 1
            for extent in shape:
                if extent != -1:
                    known *= extent
            shape = tuple(total // known if extent == -1 else extent for extent in shape)
        if self.is_contiguous():
            return Tensor(shape, _contiguous(shape), self.dtype, self._ptr, self.device)
        return empty(shape, dtype=self.dtype, device=self.device)   # a copy: another address

    view = reshape

    def __getitem__(self, key) -> "Tensor":
        """A view of slices with unit step and integer indices (``x[:1]``, ``buffer[:, :n]``, ``view[0]``): its
        address moved to the first element, an indexed mode dropped."""
        key = key if isinstance(key, tuple) else (key,)
        shape, strides, ptr, kept = list(self.shape), list(self._strides), self._ptr, []
        for dim, part in enumerate(key):
            if isinstance(part, int):
                ptr += (part % shape[dim]) * strides[dim] * self.dtype.itemsize
                continue
            if not isinstance(part, slice) or part.step not in (None, 1):
                raise TypeError("the stand-in tensor takes integers and slices of unit step only")
            start, stop, _ = part.indices(shape[dim])
            ptr += start * strides[dim] * self.dtype.itemsize
            shape[dim] = max(stop - start, 0)
            kept.append(dim)
        kept += list(range(len(key), len(shape)))
        return Tensor(tuple(shape[d] for d in kept), tuple(strides[d] for d in kept), self.dtype, ptr, self.device)

    def copy_(self, other) -> "Tensor":
        return self

    def permute(self, *dims) -> "Tensor":
        """torch's view with the modes in ``dims`` order (no data moves)."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        return Tensor(tuple(self.shape[d] for d in dims), tuple(self._strides[d] for d in dims), self.dtype,
                      self._ptr, self.device)

    def transpose(self, d0: int, d1: int) -> "Tensor":
        dims = list(range(len(self.shape)))
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return self.permute(*dims)

    def contiguous(self) -> "Tensor":
        """Itself where row-major already, else a row-major copy at another address (as torch's)."""
        return self if self.is_contiguous() else empty(self.shape, dtype=self.dtype, device=self.device)

    def __repr__(self):
        return f"Tensor(shape={self.shape}, strides={self._strides}, {self.dtype}, {self._ptr:#x})"


Tensor.__module__ = "torch"
Tensor.__qualname__ = Tensor.__name__ = "Tensor"


def empty(shape, *, dtype, device=None) -> Tensor:
    shape = tuple(shape)
    count = 1
    for extent in shape:
        count *= extent
    return Tensor(shape, _contiguous(shape), dtype, _address(count * dtype.itemsize), device or DEVICE)


zeros = empty


def empty_strided(shape, strides, *, dtype, device=None) -> Tensor:
    span = 1 + sum((e - 1) * s for e, s in zip(shape, strides) if e > 0)
    return Tensor(shape, strides, dtype, _address(span * dtype.itemsize), device or DEVICE)


def randn(shape, *, device=None, dtype=None) -> Tensor:
    return empty(shape, dtype=dtype or FLOAT32, device=device)


def tensor(shape, strides, dtype: DType, ptr: int) -> Tensor:
    """A tensor at a chosen address (operands of a test: aligned or not, any strides)."""
    return Tensor(shape, strides, dtype, ptr)


def module() -> types.ModuleType:
    """The stand-in torch module."""
    torch = types.ModuleType("torch")
    torch.__version__ = "stand-in"
    torch.Tensor, torch.empty, torch.zeros, torch.device = Tensor, empty, zeros, Device
    torch.empty_strided, torch.randn = empty_strided, randn
    for dtype in DTYPES.values():
        setattr(torch, dtype.name, dtype)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
    return torch


def cpu_tensor(shape, dtype: DType) -> Tensor:
    """A tensor on the CPU (``is_cuda`` False, ``get_device()`` -1, as torch's)."""
    t = Tensor(shape, _contiguous(tuple(shape)), dtype, _address(1), Device(-1))
    t.is_cuda = False
    t.get_device = lambda: -1
    return t


def install() -> types.ModuleType:
    """``sys.modules["torch"]`` = the stand-in (→ it). Raises RuntimeError when the real torch is imported."""
    current = sys.modules.get("torch")
    if current is not None:
        if getattr(current, "__version__", None) == "stand-in":
            return current
        raise RuntimeError("the real torch is imported already; the stand-in needs a process of its own")
    torch = sys.modules["torch"] = module()
    return torch


def stub_driver(launches=None, patch=setattr) -> None:
    """Replace the CUDA driver calls of ``ptxgen.runtime`` by stubs that succeed at once (no GPU needed): loading a
    module, the device's SM count (132) and resident CTAs, the dynamic shared memory opt-in, tensor-map encoding
    (checked; its bytes the address, shape and strides) and ``cuLaunchKernelEx`` — which, with ``launches`` a list,
    appends the address of the launched ``void*`` parameter array (a ``BlockLaunch.address``) to it.
    ``patch(module, name, value)`` makes each replacement (a test passes ``monkeypatch.setattr``, which undoes them
    afterwards)."""
    from types import SimpleNamespace

    import ptxgen.runtime as runtime
    from ptxgen.runtime import binding
    from ptxgen.runtime import kernel_launch as launch

    class Driver:
        """cuda.bindings.driver with cuLaunchKernelEx returning success at once."""

        def __init__(self):
            from cuda.bindings import driver

            self._real = driver

        def __getattr__(self, name):
            return getattr(self._real, name)

        if launches is None:
            @staticmethod
            def cuLaunchKernelEx(cfg, handle, params, extra):
                return (0,)
        else:
            @staticmethod
            def cuLaunchKernelEx(cfg, handle, params, extra):
                launches.append(params)
                return (0,)

    driver = Driver()

    class Module:
        def __init__(self, image):
            pass

        def function(self, name):
            return SimpleNamespace(handle=name)

    patch(launch, "_cu", lambda: driver)
    patch(launch, "Module", Module)
    patch(launch, "context", lambda: None)
    patch(launch, "current_device", lambda: 0)
    patch(launch, "resident_ctas", lambda function, block, smem_bytes, cluster: 132 // cluster[0] * cluster[0])
    patch(launch, "set_max_dynamic_smem", lambda function, nbytes: None)
    patch(launch, "allow_non_portable_cluster", lambda function: None)
    patch(runtime, "multiprocessor_count", lambda: 132)
    checked = binding.encode_tensor_map

    def encode_tensor_map(kernel, name, ptr, shape, strides, t, static, encode=True):
        """The map checked as the driver's would be, its 128 bytes a stand-in naming what it maps: the address,
        then the shape and the strides (so that a map written for the wrong tensor shows in the block)."""
        checked(kernel, name, ptr, shape, strides, t, static, encode=False)
        words = [ptr, *shape, *strides]
        return struct.pack(f"<{len(words)}q", *words).ljust(128, b"\0")
    patch(binding, "encode_tensor_map", encode_tensor_map)
