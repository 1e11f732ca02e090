"""A small CUDA driver layer over ``cuda.bindings.driver``: lazy init, modules, launches, device buffers.

Everything is lazy: importing this module touches no driver. The first call that needs the GPU runs ``cuInit``,
retains device 0's primary context and makes it current. Every failing driver call raises ``CudaError`` naming the
call and the CUresult (``cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200): device kernel image is invalid``).

>>> mod = Module(compile_ptx(ptx))                      # doctest: +SKIP
>>> f = mod.function("my_kernel")                       # doctest: +SKIP
>>> buf = DeviceBuffer.from_numpy(x)                    # doctest: +SKIP
>>> launch(f, grid=1, block=128, args=(buf, 7, b"\\0" * 8), smem_bytes=4096); synchronize()   # doctest: +SKIP
"""
from __future__ import annotations

import ctypes
import threading

__all__ = [
    "CudaError", "gpu_available", "device_count", "compute_capability", "device_name", "driver_version", "context",
    "current_device",
    "synchronize",
    "Module", "Function", "set_max_dynamic_smem", "allow_non_portable_cluster", "launch", "pack_args", "DeviceBuffer",
]


class CudaError(RuntimeError):
    """A driver call failed: ``.call`` (``'cuLaunchKernelEx'``), ``.result_name`` (``'CUDA_ERROR_INVALID_VALUE'``),
    ``.code`` (int, or None when the driver library itself could not be loaded)."""

    def __init__(self, call: str, result_name: str, code=None, detail: str = ""):
        self.call = call
        self.result_name = result_name
        self.code = code
        self.detail = detail
        text = f"{call} failed: {result_name}"
        if code is not None:
            text += f" ({code})"
        if detail:
            text += f": {detail}"
        super().__init__(text)


_CU = None
_LOCK = threading.RLock()
_STATE = {"initialized": False, "device": None, "ctx": None}


def _cu():
    """The ``cuda.bindings.driver`` module (imported on first use)."""
    global _CU
    if _CU is None:
        try:
            from cuda.bindings import driver
        except Exception as exc:
            raise CudaError("import cuda.bindings.driver", "CUDA_BINDINGS_UNAVAILABLE", None, str(exc)) from exc
        _CU = driver
    return _CU


def _result_name(err) -> str:
    return getattr(err, "name", None) or str(err)


def _error_string(err) -> str:
    try:
        res, text = _cu().cuGetErrorString(err)
        if int(res) == 0 and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        pass
    return ""


def _call(name: str, *args):
    """Run ``driver.<name>(*args)``; return its outputs (None, one value, or a tuple); raise CudaError on failure."""
    cu = _cu()
    fn = getattr(cu, name)
    try:
        out = fn(*args)
    except CudaError:
        raise
    except Exception as exc:  # e.g. the driver library is missing (cuda.pathfinder DynamicLibNotFoundError)
        raise CudaError(name, type(exc).__name__, None, str(exc)) from exc
    if isinstance(out, tuple):
        err, rest = out[0], out[1:]
    else:
        err, rest = out, ()
    if int(err) != 0:
        raise CudaError(name, _result_name(err), int(err), _error_string(err))
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def gpu_available() -> bool:
    """True when a CUDA driver loads, initialises and reports at least one device. Never raises."""
    try:
        _call("cuInit", 0)
        return (_call("cuDeviceGetCount") or 0) > 0
    except Exception:  # noqa: BLE001 - the contract is "never raises" (KeyboardInterrupt still propagates)
        return False


def device_count() -> int:
    """Number of CUDA devices (raises CudaError when there is no driver)."""
    _call("cuInit", 0)
    return int(_call("cuDeviceGetCount"))


def context(device: int = 0):
    """Make device ``device``'s primary context current (retaining it once) and return it (a ``CUcontext``)."""
    with _LOCK:
        if not _STATE["initialized"]:
            _call("cuInit", 0)
            _STATE["initialized"] = True
        if _STATE["ctx"] is None:
            dev = _call("cuDeviceGet", device)
            ctx = _call("cuDevicePrimaryCtxRetain", dev)
            _STATE["device"], _STATE["ctx"] = dev, ctx
        elif _STATE["device"] is not None and int(_STATE["device"]) != device:
            raise CudaError("context", "MULTI_DEVICE_NOT_SUPPORTED", None,
                            f"primary context of device {int(_STATE['device'])} is already in use")
        ctx = _STATE["ctx"]
        current = _call("cuCtxGetCurrent")
        if current is None or int(current) != int(ctx):
            _call("cuCtxSetCurrent", ctx)
        return ctx


def _device():
    context()
    return _STATE["device"]


def current_device() -> int:
    """The ordinal of the device whose primary context ``context()`` made current: 0 unless ``context(device)``
    chose another. It is the index torch and DLPack give that device (both count the visible devices in the same
    order), so a tensor on ``cuda:1`` is not this context's memory when this returns 0."""
    return int(_device())


def compute_capability() -> tuple:
    """(major, minor) of the current device: ``(9, 0)`` on H100/H200."""
    cu = _cu()
    dev = _device()
    major = _call("cuDeviceGetAttribute", cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    minor = _call("cuDeviceGetAttribute", cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return int(major), int(minor)


def device_name() -> str:
    """The current device's name, e.g. ``'NVIDIA H100 80GB HBM3'``."""
    raw = _call("cuDeviceGetName", 256, _device())
    raw = bytes(raw) if not isinstance(raw, bytes) else raw
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def driver_version() -> int:
    """The CUDA driver's version as ``cuDriverGetVersion`` gives it (major·1000 + minor·10): 13000 for CUDA 13.0."""
    return int(_call("cuDriverGetVersion"))


def multiprocessor_count() -> int:
    """Streaming multiprocessors of the current device: 132 on an H100 SXM."""
    cu = _cu()
    attr = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(_call("cuDeviceGetAttribute", attr, _device()))


def resident_ctas(func, block, smem_bytes: int = 0, cluster=None) -> int:
    """How many CTAs of ``func`` launched with ``block`` threads, ``smem_bytes`` of dynamic shared memory and
    ``cluster`` the device runs at once: whole clusters (``cuOccupancyMaxActiveClusters``) times the cluster size,
    or blocks per SM (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) times the SMs without clusters. A cluster
    lives in one GPC, so on an H100 (132 SMs) a 1-CTA-per-SM kernel in clusters of 4 runs 30 clusters = 120 CTAs,
    not 132 (measured). Post: a persistent grid of at most this many CTAs starts all at once."""
    context()
    bx, by, bz = _dim3(block)
    cx, cy, cz = _dim3(cluster) if cluster is not None else (1, 1, 1)
    if (cx, cy, cz) == (1, 1, 1):
        per_sm = _call("cuOccupancyMaxActiveBlocksPerMultiprocessor", _func_handle(func), bx * by * bz,
                       int(smem_bytes))
        return int(per_sm) * multiprocessor_count()
    # a grid of one cluster: the query is about how many such clusters fit, not about this grid
    cfg = launch_config((cx, cy, cz), block, smem_bytes, 0, (cx, cy, cz))
    clusters = _call("cuOccupancyMaxActiveClusters", _func_handle(func), cfg)
    return int(clusters) * cx * cy * cz


def synchronize() -> None:
    """``cuCtxSynchronize``: wait for all work; asynchronous kernel faults surface here as CudaError."""
    context()
    _call("cuCtxSynchronize")


# ------------------------------------------------------------------------------------------------ modules


class Function:
    """A kernel of a loaded Module. ``.name``, ``.handle`` (CUfunction), ``.num_regs``, ``attribute(attr)``."""

    def __init__(self, module: "Module", name: str, handle):
        self.module = module  # keeps the module loaded
        self.name = name
        self.handle = handle

    def attribute(self, attr) -> int:
        """``cuFuncGetAttribute``; ``attr`` is a ``CUfunction_attribute`` or its name without the prefix
        (``'NUM_REGS'``, ``'MAX_DYNAMIC_SHARED_SIZE_BYTES'``)."""
        cu = _cu()
        if isinstance(attr, str):
            attr = getattr(cu.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + attr.upper())
        context()
        return int(_call("cuFuncGetAttribute", attr, self.handle))

    @property
    def num_regs(self) -> int:
        return self.attribute("NUM_REGS")

    def __repr__(self) -> str:
        return f"Function({self.name!r})"


class Module:
    """A loaded module: ``Module(cubin_bytes)``, or PTX text (``str``, JIT-compiled by the driver).

    ``function(name)`` looks up an ``.entry`` by name (cached). ``unload()`` releases it (also on garbage collection).
    """

    def __init__(self, image):
        context()
        if isinstance(image, str):
            image = image.encode()
        data = bytes(image)
        if not data.startswith(b"\x7fELF") and not data.endswith(b"\0"):
            data += b"\0"  # PTX text must be NUL-terminated
        self._image = data
        self.handle = _call("cuModuleLoadData", data)
        self._functions = {}

    def function(self, name: str) -> Function:
        if self.handle is None:
            raise CudaError("cuModuleGetFunction", "MODULE_UNLOADED", None, name)
        f = self._functions.get(name)
        if f is None:
            context()
            f = Function(self, name, _call("cuModuleGetFunction", self.handle, name.encode()))
            self._functions[name] = f
        return f

    def unload(self) -> None:
        if getattr(self, "handle", None) is not None:
            handle, self.handle = self.handle, None
            self._functions = {}
            _call("cuModuleUnload", handle)

    def __del__(self):
        try:
            self.unload()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unload()


def _func_handle(func):
    return func.handle if isinstance(func, Function) else func


def set_max_dynamic_smem(func, nbytes: int) -> None:
    """Allow launches of ``func`` with up to ``nbytes`` of dynamic shared memory (required above 48 KiB; H100 ≤ 232448)."""
    cu = _cu()
    context()
    _call("cuFuncSetAttribute", _func_handle(func),
          cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes))


def allow_non_portable_cluster(func) -> None:
    """Allow launches of ``func`` in clusters of more than the portable 8 CTAs (up to 16 on an H100):
    ``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)``, what a kernel's
    ``non_portable_cluster = true`` asks for. Post: ``cuLaunchKernelEx`` accepts cluster sizes up to the device's."""
    cu = _cu()
    context()
    _call("cuFuncSetAttribute", _func_handle(func),
          cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)


# ------------------------------------------------------------------------------------------------ launch


def _dim3(d) -> tuple:
    if isinstance(d, int):
        return (d, 1, 1)
    d = tuple(int(x) for x in d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"a launch dimension has 1 to 3 entries, got {d}")
    return d + (1,) * (3 - len(d))


_CTYPES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)


def _arg_storage(arg):
    """A ctypes object whose bytes are the kernel parameter's value (the driver copies the param's size from it)."""
    if isinstance(arg, DeviceBuffer):
        return ctypes.c_uint64(arg.ptr)
    if isinstance(arg, _CTYPES):
        return arg
    if isinstance(arg, (bytes, bytearray, memoryview)):
        raw = bytes(arg)
        if not raw:
            raise ValueError("an empty bytes kernel argument")
        return (ctypes.c_char * len(raw)).from_buffer_copy(raw)
    if isinstance(arg, bool):
        return ctypes.c_uint32(int(arg))
    if isinstance(arg, int):
        # 8 little-endian bytes: correct for .u64/.s64 params, and for .u32/.s32 params (the driver reads the low 4).
        if arg < 0:
            return ctypes.c_int64(arg)
        return ctypes.c_uint64(arg)
    if isinstance(arg, float):
        return ctypes.c_float(arg)  # .f32; pass ctypes.c_double for .f64
    try:  # numpy scalars / 0-d arrays: their own bytes
        import numpy as np

        if isinstance(arg, (np.generic, np.ndarray)):
            raw = np.ascontiguousarray(arg).tobytes()
            return (ctypes.c_char * len(raw)).from_buffer_copy(raw)
    except ImportError:  # pragma: no cover
        pass
    cu = _cu()
    if isinstance(arg, cu.CUdeviceptr):
        return ctypes.c_uint64(int(arg))
    get_ptr = getattr(arg, "getPtr", None)
    if callable(get_ptr):  # a cuda-bindings struct (e.g. CUtensorMap), copied by value from its storage
        return arg
    raise TypeError(f"cannot pass {type(arg).__name__} as a kernel argument: use a DeviceBuffer, int, float, bytes, "
                    "a numpy scalar, a ctypes value or a cuda-bindings struct")


def pack_args(args) -> tuple:
    """(address of a ``void*[n]`` array, keep-alive list) for ``kernelParams``; None for no args."""
    keep = []
    ptrs = (ctypes.c_void_p * max(1, len(args)))()
    for i, arg in enumerate(args):
        store = _arg_storage(arg)
        keep.append(store)
        if not isinstance(store, _CTYPES):  # a cuda-bindings struct: its own storage
            ptrs[i] = int(store.getPtr())
        else:
            ptrs[i] = ctypes.addressof(store)
    keep.append(ptrs)
    return (ctypes.addressof(ptrs) if args else None), keep


def launch_config(grid, block, smem_bytes: int = 0, stream=0, cluster=None):
    """The ``CUlaunchConfig`` of a ``cuLaunchKernelEx`` (or an occupancy query): ``grid``/``block``/``cluster`` int
    or 1-3 tuple, ``stream`` a CUstream or its handle; a cluster other than 1×1×1 becomes its launch attribute.

    >>> launch_config((264, 1, 1), (384, 1, 1), 200_000, 0, (2, 1, 1)).numAttrs   # doctest: +SKIP
    1

    Post: the config launches ``grid`` CTAs of ``block`` threads with ``smem_bytes`` of dynamic shared memory."""
    cu = _cu()
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = _dim3(grid)
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = _dim3(block)
    cfg.sharedMemBytes = int(smem_bytes)
    cfg.hStream = stream if isinstance(stream, cu.CUstream) else cu.CUstream(int(stream))
    attrs = []
    if cluster is not None and _dim3(cluster) != (1, 1, 1):
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = _dim3(cluster)
        attrs.append(attr)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    return cfg


def launch(func, grid, block, args=(), smem_bytes: int = 0, stream=0, cluster=None) -> None:
    """Launch ``func`` (Function or CUfunction) with ``cuLaunchKernelEx``.

    ``grid``/``block``/``cluster``: int or 1-3 tuple. ``args`` in the kernel's parameter order: DeviceBuffer or
    CUdeviceptr (u64 pointer), int (8 little-endian bytes; fine for u32/s32/u64/s64 params), float (f32),
    bytes (raw param bytes), numpy scalar (its bytes), ctypes value, or a cuda-bindings struct such as CUtensorMap.
    The launch is asynchronous; call ``synchronize()`` to see faults.
    """
    context()
    params, keep = pack_args(tuple(args))
    cfg = launch_config(grid, block, smem_bytes, stream, cluster)
    try:
        _call("cuLaunchKernelEx", cfg, _func_handle(func), params if params is not None else 0, 0)
    finally:
        del keep  # the driver has copied the parameters once the call returns


# ------------------------------------------------------------------------------------------------ memory


class DeviceBuffer:
    """Device memory from ``cuMemAlloc``: ``DeviceBuffer(nbytes)``, ``DeviceBuffer.from_numpy(a)``,
    ``buf.to_numpy(dtype, shape)``, ``buf.copy_from_host(a)``, ``buf.zero()``, ``buf.free()``; ``int(buf)`` and
    ``buf.ptr`` give the device address. Freed on garbage collection or at the end of a ``with`` block."""

    def __init__(self, nbytes: int):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError(f"DeviceBuffer needs a positive size, got {nbytes}")
        context()
        self.nbytes = nbytes
        self._dptr = _call("cuMemAlloc", nbytes)

    @classmethod
    def from_numpy(cls, array) -> "DeviceBuffer":
        """A new buffer holding a copy of ``array``'s bytes (C order); remembers dtype and shape for ``to_numpy()``."""
        import numpy as np

        host = np.ascontiguousarray(array)
        buf = cls(max(1, host.nbytes))
        buf.dtype, buf.shape = host.dtype, host.shape
        if host.nbytes:
            buf.copy_from_host(host)
        return buf

    @property
    def ptr(self) -> int:
        if self._dptr is None:
            raise CudaError("DeviceBuffer", "BUFFER_FREED", None, "use after free")
        return int(self._dptr)

    def __int__(self) -> int:
        return self.ptr

    def copy_from_host(self, array) -> None:
        import numpy as np

        host = np.ascontiguousarray(array)
        if host.nbytes > self.nbytes:
            raise ValueError(f"{host.nbytes} bytes do not fit a {self.nbytes}-byte DeviceBuffer")
        context()
        _call("cuMemcpyHtoD", self._dptr, host.ctypes.data, host.nbytes)

    def to_numpy(self, dtype=None, shape=None):
        """Copy back to a new numpy array (default: the dtype/shape given to ``from_numpy``, else raw uint8)."""
        import numpy as np

        dtype = np.dtype(dtype if dtype is not None else getattr(self, "dtype", np.uint8))
        if shape is None:
            shape = getattr(self, "shape", None) if dtype == getattr(self, "dtype", None) else None
            if shape is None:
                shape = (self.nbytes // dtype.itemsize,)
        out = np.empty(shape, dtype=dtype)
        if out.nbytes > self.nbytes:
            raise ValueError(f"{out.nbytes} bytes requested from a {self.nbytes}-byte DeviceBuffer")
        if out.nbytes:
            context()
            _call("cuMemcpyDtoH", out.ctypes.data, self._dptr, out.nbytes)
        return out

    def zero(self) -> None:
        context()
        _call("cuMemsetD8", self._dptr, 0, self.nbytes)

    def fill_byte(self, value: int) -> None:
        context()
        _call("cuMemsetD8", self._dptr, int(value) & 0xFF, self.nbytes)

    def free(self) -> None:
        if getattr(self, "_dptr", None) is not None:
            dptr, self._dptr = self._dptr, None
            _call("cuMemFree", dptr)

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __repr__(self) -> str:
        state = f"0x{int(self._dptr):x}" if self._dptr is not None else "freed"
        return f"DeviceBuffer({self.nbytes} B at {state})"
