"""Run tile-IR kernels from Python: ``k = jit(module); k(x=x, z=z, n=n)``.

Per call the launcher

1. binds the arguments: numpy arrays, of the element type's host dtype (``ptxgen.ir.host_dtypes``:
   ``ml_dtypes.bfloat16`` for bf16, ``ml_dtypes.float8_e4m3fn`` for e4m3, ..., the interpreter's convention too),
   are copied to the device (and the ones the kernel stores to are copied back into the array afterwards); a
   numpy array of any other dtype is a LaunchError that says what to pass; CUDA tensors (torch:
   ``data_ptr()/shape/stride()``; anything else through ``__cuda_array_interface__``, e.g. cupy, or DLPack;
   ``DeviceBuffer.from_numpy`` buffers) are used in place; scalars by value;
2. reads the specialization off the tensors (the rules of ``TensorSpec.of``: contiguous mode, 16-byte alignment,
   extent divisibility) as a compact key and looks up — in the process, then in the disk cache (``cache.py``), else
   lowering and compiling with nvJitLink — and loads the kernel specialized for it (cache key: hash of the printed
   IR, specialization, arch, options, toolchain);
3. evaluates the grid's host expressions (``cdiv(%n, 1024)``) through a Python function generated from them once
   (a grid the arguments make invalid — a negative or too large entry, a division by zero, not a multiple of the
   cluster — raises LaunchError naming the attribute: ``@k: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m) divides by
   %m = 0``; a zero entry launches nothing);
4. packs every parameter value with ONE ``struct.pack_into`` into that compiled kernel's argument block — the block
   and the ``void*[]`` array pointing into it are built once per compiled kernel — and calls ``cuLaunchKernelEx``
   with a launch config also built once (its grid rewritten only when it changes).

A ``tmap<T, R>[box]`` parameter takes the same tensor arguments as a gtensor (torch CUDA tensors, the CUDA array
interface, numpy arrays copied in and, when the kernel TMA-stores to them, back). Its CUtensorMap is derived with
``layoutc.hopper.make_tma_params`` from the argument's real shape, element strides and type (the rules of the
interpreter's ``encode_tensor_map``), encoded by the driver's ``cuTensorMapEncodeTiled`` and cached per
(address, shape, strides): the hot path is a dict lookup and 128 bytes copied into the argument block. A numpy array
is copied to a device buffer whose row pitch is padded to a multiple of 16 bytes (TMA's rule; ``pitched_shape``), as
cudaMallocPitch would, so any (M, N) array works, an (M, 1) column included. A device tensor is described in place:
a mode of extent 1 may have any stride (torch's ``x[:, :1]``), the others must meet TMA's rules. Kernels with shared
memory launch with the plan's bytes (plus 1 KiB slack for the window's 1024-byte alignment, where the 227 KiB budget
allows) and ``MAX_DYNAMIC_SHARED_SIZE_BYTES`` raised above 48 KiB.

Launch failures raise ``LaunchError`` naming the kernel. Launches are asynchronous (numpy arguments synchronize
through their copy back); a fault shows at the next synchronizing call. Not thread-safe (one caller at a time per
JitKernel).
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import struct

from .driver import (CudaError, DeviceBuffer, Module, _cu, _error_string, _result_name, allow_non_portable_cluster,
                     context, launch_config, resident_ctas, set_max_dynamic_smem)

__all__ = ["BoundLaunch", "LaunchError", "JitKernel", "CompiledKernel", "jit", "jit_text", "parse_verified"]


class LaunchError(RuntimeError):
    """A kernel could not be launched, or its arguments are wrong: the message starts with ``@name:``."""


# typestr of a CUDA-array-interface tensor (cupy, numba): the interface has no bf16 or fp8 type, so producers offer
# bf16 as 2 opaque bytes and fp8 as bytes; numpy arrays are checked against ptxgen.ir.host_dtypes instead
_NUMPY_TYPESTR = {"f32": "f4", "f16": "f2", "i32": "i4", "u32": "u4", "i64": "i8", "u64": "u8", "i1": "b1",
                  "e4m3": "u1", "e5m2": "u1", "bf16": "V2"}
_TORCH_DTYPE = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.int32": "i32",
                "torch.int64": "i64", "torch.uint32": "u32", "torch.uint64": "u64", "torch.bool": "i1",
                "torch.float8_e4m3fn": "e4m3", "torch.float8_e5m2": "e5m2"}
_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8, "i1": 1, "e4m3": 1,
             "e5m2": 1}
# each scalar/pointer slot takes 8 bytes of the argument block (struct code + padding to 8); a tensor map 128 bytes
# at a 128-byte aligned offset (the driver copies the .param's 128 bytes; CUDA 13 wants CUtensorMaps 128-aligned)
_SLOT_FORMAT = {"ptr": "Q", "i32": "i4x", "i64": "q", "f32": "f4x", "i16": "H6x", "tmap": "128s"}
_SLOT_SIZE = {"tmap": (128, 128)}  # abi -> (bytes, alignment); every other slot (8, 8)
TMAP_BYTES = 128
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory a launch may use without opting in
WINDOW_SLACK = 1024  # the lowering rounds the window up to 1024 bytes (ptxgen.lower.shared.emit_window)
_UNSIGNED_32 = {"u32"}
_TORCH_TYPES = {}  # tensor types seen to be torch tensors (data_ptr / shape / stride / is_cuda / dtype)
_COMPILED = {}  # (ir hash, Specialization, arch, options) -> ptxgen.lower.Compiled, process-wide


def _scalar_bits(value, dtype: str):
    """The ABI value of a scalar argument (see ptxgen.lower.specialize.kernel_abi)."""
    if dtype == "f32":
        return float(value)
    if dtype == "i1":
        return int(bool(value))
    if dtype in ("f16", "bf16", "e4m3", "e5m2"):
        import numpy as np

        from ..ir.ops import fp8_encode, round_to
        from ..ir.types import SCALARS

        if dtype == "f16":
            return int(np.float16(value).view(np.uint16))
        x = float(round_to(np.array([float(value)], np.float32), SCALARS[dtype])[0])
        if dtype == "bf16":
            return int(np.float32(x).view(np.uint32)) >> 16
        return int(fp8_encode(x, dtype))
    v = int(value)
    if dtype == "u32" and v >= 1 << 31:  # the slot is a signed i32: same bits
        v -= 1 << 32
    elif dtype == "u64" and v >= 1 << 63:
        v -= 1 << 64
    return v


def argument_layout(abi) -> tuple:
    """(struct format, byte offset of each slot, total bytes) of a kernel's argument block: 8 bytes per pointer or
    scalar slot, 128 bytes at a 128-aligned offset per tensor map. ``[ptr, i32, tmap]`` → ``("<Qi4x128s", [0, 8,
    128], 256)``. Post: ``struct.calcsize(format) == total`` and every slot's offset is aligned to its size."""
    fmt, offsets, off = "<", [], 0
    for slot in abi:
        size, align = _SLOT_SIZE.get(slot.abi, (8, 8))
        pad = (-off) % align
        if pad:
            fmt += f"{pad}x"
            off += pad
        offsets.append(off)
        fmt += _SLOT_FORMAT[slot.abi]
        off += size
    return fmt, offsets, max(off, 8)


def _aligned_block(nbytes: int, align: int = 128):
    """(a ctypes buffer, the offset inside it of an ``align``-aligned region of ``nbytes``)."""
    buf = ctypes.create_string_buffer(nbytes + align)
    return buf, (-ctypes.addressof(buf)) % align


def dynamic_smem_bytes(kernel) -> int:
    """Dynamic shared memory a launch of ``kernel`` requests: its smem plan's total plus ``WINDOW_SLACK`` (capped at
    the 227 KiB a Hopper CTA may have, where the window's declared 1024-byte alignment holds anyway); 0 without
    allocations. ``examples/tma_copy.tile``: 16416 + 1024 = 17440."""
    from ..ir.ops import SMEM_LIMIT, smem_plan

    plan = smem_plan(kernel.body.ops)
    if not plan.ops:
        return 0
    return min(plan.total + WINDOW_SLACK, max(plan.total, SMEM_LIMIT))


def encode_tensor_map(kernel: str, name: str, ptr: int, shape, strides, t, static, encode: bool = True) -> bytes:
    """The 128 bytes of the CUtensorMap of tmap parameter ``name`` (type ``t``) over the tensor at ``ptr`` with
    ``shape`` and element ``strides``: ``make_tma_params`` on ``Layout(shape, strides)`` and the box, as the
    interpreter's ``encode_tensor_map``, then the driver's ``cuTensorMapEncodeTiled``.

    The kernel was lowered for ``static`` (``map_params(t)``: a row-major global), so the map must agree with it in
    mode order (the coordinates' order in the instruction) and box. E.g. a (1000, 336)-pitched f32 view
    ``(1000,333):(336,1)`` with box ``Sw<3,4,3> o 0 o (64,32):(32,1)`` → dims (333, 1000), strides (1344,), box
    (32, 64), SWIZZLE_128B. ``encode=False``: checked only, 128 zero bytes. Raises LaunchError with the reason.
    """
    import layoutc as lc
    from layoutc.hopper import TmaError, make_tma_params

    from ..ir.ops import layoutc_dtype

    shape, strides = tuple(int(x) for x in shape), tuple(int(x) for x in strides)
    if any(n == 0 for n in shape):  # an empty tensor: the kernel issues no copy from it (nothing to describe)
        return bytes(TMAP_BYTES)
    try:
        params = make_tma_params(lc.Layout(shape, strides), layoutc_dtype(t.dtype), t.box)
    except TmaError as exc:
        raise LaunchError(f"@{kernel}: argument {name}: cannot encode {t} for shape {shape} with element strides "
                          f"{strides}: {getattr(exc, 'condition', exc)}") from None
    if params.mode_order != static.mode_order or params.box_dims != static.box_dims:
        raise LaunchError(f"@{kernel}: argument {name}: shape {shape} with element strides {strides} gives TMA mode "
                          f"order {params.mode_order} and box {params.box_dims}, but the kernel was compiled for "
                          f"{static.mode_order} and {static.box_dims} (a row-major tensor: last mode contiguous)")
    if not encode:
        return bytes(TMAP_BYTES)
    cu = _cu()
    try:
        args = params.cuda_bindings_args(cu, ptr)
    except TmaError as exc:
        raise LaunchError(f"@{kernel}: argument {name}: {getattr(exc, 'condition', exc)}") from None
    context()
    out = cu.cuTensorMapEncodeTiled(*args)
    if int(out[0]):
        raise LaunchError(f"@{kernel}: argument {name}: cuTensorMapEncodeTiled failed: {_result_name(out[0])} "
                          f"({int(out[0])}) {_error_string(out[0])} [{params.as_driver_args()}]")
    return ctypes.string_at(out[1].getPtr(), TMAP_BYTES)


_DL_CUDA, _DL_CUDA_MANAGED = 2, 13        # DLDeviceType of CUDA device memory and managed memory
# (DLDataTypeCode, bits) → our type (dlpack.h: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool, 10 float8_e4m3fn,
# 12 float8_e5m2; torch exports its bool, bfloat16 and float8 tensors with these codes)
_DLPACK_DTYPE = {(0, 32): "i32", (0, 64): "i64", (1, 32): "u32", (1, 64): "u64", (2, 16): "f16", (2, 32): "f32",
                 (4, 16): "bf16", (6, 8): "i1", (10, 8): "e4m3", (12, 8): "e5m2"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def dlpack_view(a):
    """(device pointer, shape, element strides, (type code, bits)) of any object with ``__dlpack__`` (JAX, cupy,
    torch …), read from its DLPack capsule without taking ownership: the capsule keeps its name, so its producer's
    deleter runs when it is collected, and ``a`` itself keeps the memory alive for the launch.
    E.g. a contiguous (4, 8) f32 CUDA array → (ptr, (4, 8), (8, 1), (2, 32)). Pre: ``a`` is in device memory."""
    capsule = a.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = get(capsule, b"dltensor")
    t = _DLTensor.from_address(managed)   # DLManagedTensor starts with its DLTensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else _c_strides(shape)
    return (t.data or 0) + t.byte_offset, shape, strides, (t.dtype.code, t.dtype.bits)


def _c_strides(shape) -> tuple:
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= extent
    return tuple(reversed(strides))


def _torch_cpu_numpy(t):
    """The numpy view (sharing memory) of a CPU torch tensor. torch hands no bf16 or fp8 tensor to numpy, so those
    come as ml_dtypes views of their bits: a CPU ``torch.bfloat16`` tensor → an ``ml_dtypes.bfloat16`` array."""
    ours = _TORCH_DTYPE.get(str(t.dtype))
    if ours in ("bf16", "e4m3", "e5m2"):
        import torch

        from ..ir.host_dtypes import host_dtype

        return t.view(torch.int16 if ours == "bf16" else torch.uint8).numpy().view(host_dtype(ours))
    return t.numpy()


def _spec_key(ptr, shape, strides, itemsize):
    """``TensorSpec.of`` as a plain tuple (contiguous, aligned, extent_multiple), or None for generic."""
    c = -1
    for m in range(len(shape)):
        if shape[m] > 1 and strides[m] == 1:
            c = m
    if c < 0:
        return None
    aligned = ptr % 16 == 0
    if aligned:
        for m in range(len(shape)):
            if m != c and shape[m] > 1 and (strides[m] * itemsize) % 16:
                aligned = False
                break
    e = shape[c]
    low = e & -e
    return c, aligned, (16 if low == 0 or low > 16 else low)


def load_image(compiled) -> str:
    """Which image of a compiled kernel the driver loads: ``"cubin"`` (nvJitLink's), or ``"ptx"`` (the driver's own
    whole-program JIT) for a kernel whose PTX re-sizes registers with ``setmaxnreg``: nvJitLink's relocatable compile
    ignores that instruction (ptxas info C7504), so a warp-specialized kernel would be held to the launch budget and
    spill. The driver JIT honours setmaxnreg (H100: gemm_hopper's TMA epilogue 168 registers and no local memory,
    against 152 bytes of spills from the nvJitLink cubin; the driver's cuLink* path spills alike) and caches its
    result across processes (``CUDA_CACHE_PATH``), so such a kernel never waits for nvJitLink to be loaded.

    Post: "ptx" exactly when a PTX instruction line is ``setmaxnreg``."""
    return "ptx" if _SETMAXNREG.search(compiled.ptx) else "cubin"


_SETMAXNREG = re.compile(r"^\s*setmaxnreg\.", re.M)


class CompiledKernel:
    """One specialization of a kernel, loaded: ``compiled`` (ptx, cubin, registers...), ``function``. The argument
    block (8 bytes per parameter), the ``void*[]`` array into it and the launch config are built once;
    ``launch(values, grid, stream)`` packs the values with one ``struct.pack_into`` and launches."""

    def __init__(self, name, compiled, abi, block, cluster, smem_bytes: int = 0, non_portable_cluster: bool = False):
        self.name = name
        self.compiled = compiled
        self.loaded_from = load_image(compiled)
        try:
            self.module = Module(compiled.ptx if self.loaded_from == "ptx" else compiled.cubin)
        except CudaError:
            if self.loaded_from == "ptx":
                compiled.cubin  # the driver's JIT refused it: nvJitLink's error names the IR ops of the bad lines
            raise
        self.function = self.module.function(name)
        self.abi = abi
        n = max(1, len(abi))
        fmt, self.offsets, self.block_size = argument_layout(abi)
        self.packer = struct.Struct(fmt)
        self.block_bytes, self.block_offset = _aligned_block(self.block_size)
        base = ctypes.addressof(self.block_bytes) + self.block_offset
        offsets = self.offsets or [0]
        self.params = (ctypes.c_void_p * n)(*[base + offsets[i] for i in range(n)])
        self.params_address = ctypes.addressof(self.params)
        self.smem_bytes = int(smem_bytes)
        if self.smem_bytes > STATIC_SMEM_LIMIT:  # opt in once per loaded function
            set_max_dynamic_smem(self.function, self.smem_bytes)
        if non_portable_cluster:  # the kernel's non_portable_cluster = true: clusters of 9 to 16 CTAs
            allow_non_portable_cluster(self.function)
        cu = _cu()
        self._cu = cu
        self.cfg = launch_config((1, 1, 1), block, self.smem_bytes, 0, cluster)
        self.block = tuple(block)
        self.cluster = tuple(cluster)
        self._grid = (1, 1, 1)
        self._stream = 0
        self._handle = self.function.handle
        self._launch = cu.cuLaunchKernelEx

    def resident_ctas(self) -> int:
        """CTAs of this kernel the device runs at once (``driver.resident_ctas``: whole clusters × cluster size):
        the most a persistent kernel's grid should hold, e.g. 120 for an H100 GEMM in clusters of 4, 132 alone."""
        return resident_ctas(self.function, self.block, self.smem_bytes, self.cluster)

    def launch(self, values, grid, stream=0) -> None:
        try:
            self.packer.pack_into(self.block_bytes, self.block_offset, *values)
        except struct.error as exc:
            raise LaunchError(f"@{self.name}: an argument does not fit its parameter type: {exc}") from None
        cfg = self.cfg
        if grid != self._grid:
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
            self._grid = grid
        if stream is not self._stream and stream != self._stream:
            cfg.hStream = stream if isinstance(stream, self._cu.CUstream) else self._cu.CUstream(int(stream))
            self._stream = stream
        err = self._launch(cfg, self._handle, self.params_address, 0)
        err = err[0] if isinstance(err, tuple) else err
        if int(err):
            raise LaunchError(f"@{self.name}: cuLaunchKernelEx failed: {_result_name(err)} ({int(err)}) "
                              f"{_error_string(err)} [grid {grid}, block {self.block}]")


def _grid_source(expr, params) -> str:
    """Python source of a host expression over ``a`` (the arguments) and ``s`` (tensor shapes)."""
    from ..ir.hostexpr import Add, CDiv, Const, Dim, Min, Mul, ParamRef

    if isinstance(expr, int):
        return str(int(expr))
    if isinstance(expr, Const):
        return str(int(expr.value))
    if isinstance(expr, ParamRef):
        return f"int(a[{expr.name!r}])"
    if isinstance(expr, Dim):
        return f"s[{expr.param!r}][{int(expr.mode)}]"
    if isinstance(expr, CDiv):
        return f"(-(-({_grid_source(expr.a, params)}) // ({_grid_source(expr.b, params)})))"
    if isinstance(expr, Min):
        return f"min({_grid_source(expr.a, params)}, {_grid_source(expr.b, params)})"
    if isinstance(expr, Mul):
        return f"(({_grid_source(expr.a, params)}) * ({_grid_source(expr.b, params)}))"
    if isinstance(expr, Add):
        return f"(({_grid_source(expr.a, params)}) + ({_grid_source(expr.b, params)}))"
    raise LaunchError(f"cannot evaluate host expression {expr!r}")


class JitKernel:
    """A tile-IR kernel callable from Python. ``k(**args)`` launches; ``k.compile(spec)`` gives the compiled
    kernel (``.ptx``, ``.cubin``, ``.registers``); ``k.specialization(**args)`` the one a call would use."""

    def __init__(self, kernel, arch: str = "sm_90a", options=None, *, _verified: bool = False,
                 _ir_hash: str | None = None):
        from ..ir.core import walk
        from ..ir.ops.tma import map_params
        from ..ir.types import GlobalTensorType, ScalarType, TensorMapType
        from ..lower import DEFAULT_OPTIONS
        from ..lower.specialize import Specialization, TensorSpec, kernel_abi

        # The verifier and the printer are imported only when needed: a cache hit through jit_text has neither to
        # do, and importing the printer (json, importlib.resources, the grammar module) costs it ≈ 5 ms.
        if not _verified:  # jit_text's modules verified before they were cached; verifying is most of __init__
            from ..verify import verify

            verify(kernel)
        self._Specialization, self._TensorSpec = Specialization, TensorSpec
        self.kernel = kernel
        self.name = kernel.name
        self.arch = arch
        self.options = tuple(options) if options is not None else DEFAULT_OPTIONS
        # jit_text passes the hash stored with its cached Module: printing gemm.tile costs a fresh process ≈ 90 ms
        # (the printer builds layoutc's CuTe parser to check layout attributes), the rest of a cache hit ≈ 3 ms
        if _ir_hash is None:
            from ..ir.text import print_kernel

            _ir_hash = hashlib.sha256(print_kernel(kernel).encode()).hexdigest()
        self.ir_hash = _ir_hash
        self.abi = kernel_abi(kernel)
        self.params = []  # (name, is_tensor (a gtensor), dtype, rank)
        self.tmaps = {}   # tmap parameter name -> (its TensorMapType, the static TmaParams the lowering assumed)
        for p in kernel.params:
            if isinstance(p.type, GlobalTensorType):
                self.params.append((p.name, True, p.type.dtype.name, p.type.rank))
            elif isinstance(p.type, ScalarType):
                self.params.append((p.name, False, p.type.name, 0))
            elif isinstance(p.type, TensorMapType):
                self.params.append((p.name, False, p.type.dtype.name, p.type.rank))
                self.tmaps[p.name] = (p.type, map_params(p.type))
            else:
                raise LaunchError(f"@{self.name}: parameter %{p.name} of type {p.type} cannot be passed yet")
        self._names = frozenset(p[0] for p in self.params)
        from ..ir import launch

        try:
            grid = launch.grid_exprs(kernel)
            self.block = launch.block_dims(kernel)
            self.cluster = launch.cluster_dims(kernel)
        except launch.LaunchAttributeError as exc:  # only an unverified kernel (the verifier reports these)
            raise LaunchError(str(exc)) from None
        self.non_portable_cluster = launch.non_portable_cluster(kernel)
        self._grid_limits = launch.GRID_LIMITS
        source = "lambda a, s: (" + ", ".join(_grid_source(e, self.params) for e in grid) + ",)"
        self._grid_fn = eval(source, {"int": int})  # generated from the IR's host expressions only
        self.grid_source = source
        written = set()
        for op in walk(kernel.body):
            if op.name == "gmem.store":
                tile = op.operands[0].owner
                if tile is not None and tile.operands:
                    written.add(tile.operands[0].name)
            elif op.name == "tma.store" and op.operands:
                written.add(op.operands[0].name)
        self.written = written
        self.smem_bytes = dynamic_smem_bytes(kernel)
        self._tmap_cache = {name: {} for name in self.tmaps}  # name -> {(ptr, shape, strides): 128 bytes}
        self._loaded = {}      # Specialization -> CompiledKernel
        self._by_key = {}      # tuple of per-tensor spec keys -> CompiledKernel
        self._torch_ok = {}    # (param, dtype object) -> True once validated
        self._key_cache = {}   # (address % 16, shape, strides) -> spec key

    # -- compilation -----------------------------------------------------------------------------------------
    def compile(self, spec=None):
        """The compiled kernel (``ptxgen.lower.Compiled``) for ``spec`` (default generic), no device needed.

        Looked up in the process-wide dict, then in the disk cache (``ptxgen.runtime.cache``: a hit neither lowers
        nor runs nvJitLink, and says so with ``.from_cache``), and only then lowered, compiled and stored in both.
        Post: the same object for the same (IR, spec, arch, options) for the rest of the process."""
        from . import cache

        spec = spec if spec is not None else self._Specialization.generic()
        key = (self.ir_hash, spec, self.arch, self.options)
        c = _COMPILED.get(key)
        if c is None:
            disk_key = cache.kernel_key(self.ir_hash, spec, self.arch, self.options) if cache.enabled() else None
            c = cache.lookup(disk_key) if disk_key else None
            if c is None:
                from ..lower import compile_kernel

                # verified when this JitKernel was made (or, through jit_text, before its Module was cached); a
                # kernel the driver loads from PTX is assembled by nvJitLink only once its cubin is read
                c = compile_kernel(self.kernel, spec, self.arch, self.options, verify=False, defer_assembly=True)
                if load_image(c) == "cubin":
                    c.cubin  # assembled now: the one image this kernel loads, stored with it
                if disk_key:
                    cache.store(disk_key, c, self.options)
            if not c.assembled:
                c.assembler = self._assembler(c, disk_key)
            _COMPILED[key] = c
        return c

    def _assembler(self, c, disk_key):
        """nvJitLink for a compiled kernel whose cubin was deferred: errors name this kernel's IR ops, and the disk
        entry is rewritten with the cubin so that later processes read it instead of assembling again."""
        from ..lower import assemble

        def run():
            cubin = assemble(c.ptx, self.kernel, self.arch, self.options)
            if disk_key:
                from . import cache

                c._cubin = cubin
                cache.store(disk_key, c, self.options)
            return cubin
        return run

    def _specialization_of(self, keys):
        names = [p[0] for p in self.params if p[1]]
        return self._Specialization(tuple(
            (n, self._TensorSpec(*k) if k is not None else self._TensorSpec()) for n, k in zip(names, keys)))

    def _load(self, spec) -> CompiledKernel:
        ck = self._loaded.get(spec)
        if ck is None:
            context()
            ck = CompiledKernel(self.name, self.compile(spec), self.abi, self.block, self.cluster, self.smem_bytes,
                                self.non_portable_cluster)
            self._loaded[spec] = ck
        return ck

    # -- arguments -------------------------------------------------------------------------------------------
    def _tensor(self, name, a, dtype, rank, copies, dry, pitch=False):
        """(ptr, shape, strides) of a tensor argument; numpy arrays are copied to a new device buffer (recorded in
        ``copies``) or, when ``dry``, given address 0 (cuMemAlloc's alignment) without touching the device. With
        ``pitch`` (a TMA map's tensor) the device copy's rows are padded to a multiple of 16 bytes."""
        if getattr(a, "is_cuda", False) and hasattr(a, "data_ptr"):  # torch
            if (name, a.dtype) not in self._torch_ok:
                if _TORCH_DTYPE.get(str(a.dtype)) != dtype:
                    self._wrong_dtype(name, str(a.dtype), dtype)
                self._torch_ok[(name, a.dtype)] = True
                _TORCH_TYPES[type(a)] = True
            out = a.data_ptr(), a.shape, a.stride()
        elif isinstance(a, DeviceBuffer) and getattr(a, "shape", None) is not None:  # DeviceBuffer.from_numpy
            self._check_host_dtype(name, a.dtype, dtype)
            out = a.ptr, tuple(a.shape), _c_strides(a.shape)
        elif hasattr(a, "__cuda_array_interface__"):
            cai = a.__cuda_array_interface__
            typestr = cai["typestr"]
            if typestr[1:] != _NUMPY_TYPESTR[dtype]:
                self._wrong_dtype(name, f"typestr {typestr!r} (CUDA array interface)", dtype)
            shape = tuple(cai["shape"])
            st = cai.get("strides")
            itemsize = _ITEMSIZE[dtype]
            out = int(cai["data"][0]), shape, (_c_strides(shape) if st is None else tuple(x // itemsize for x in st))
        elif hasattr(a, "__dlpack_device__") and a.__dlpack_device__()[0] in (_DL_CUDA, _DL_CUDA_MANAGED):
            ptr, shape, strides, code_bits = dlpack_view(a)
            if _DLPACK_DTYPE.get(code_bits) != dtype:
                self._wrong_dtype(name, f"DLPack type (code, bits) {code_bits}", dtype)
            out = ptr, shape, strides
        else:
            import numpy as np

            if type(a).__module__.startswith("torch"):  # a CPU tensor: its numpy view (shares memory)
                a = _torch_cpu_numpy(a)
            if not isinstance(a, np.ndarray):
                raise LaunchError(f"@{self.name}: argument {name} must be an array (numpy, torch, cupy), "
                                  f"not {type(a).__name__}")
            self._check_host_dtype(name, a.dtype, dtype)
            host = np.ascontiguousarray(a)
            device_shape = tuple(host.shape)
            if pitch:  # TMA needs every byte stride but the innermost to be a multiple of 16
                from ..ir.ops.tma import pitched_shape

                device_shape = pitched_shape(device_shape, host.itemsize)
            ptr = 0
            if not dry:
                if device_shape != host.shape:
                    padded = np.zeros(device_shape, dtype=host.dtype)
                    padded[..., :host.shape[-1]] = host
                    buf = DeviceBuffer.from_numpy(padded)
                else:
                    buf = DeviceBuffer.from_numpy(host)
                ptr = buf.ptr
                copies.append((name, a, buf, device_shape))
            out = ptr, tuple(host.shape), _c_strides(device_shape)
        if len(out[1]) != rank:
            raise LaunchError(f"@{self.name}: argument {name} has rank {len(out[1])}, the kernel wants {rank}")
        return out

    def _check_host_dtype(self, name, got, dtype) -> None:
        """Raise unless ``got`` (a numpy dtype) is the host dtype of element type ``dtype`` (ptxgen.ir.host_dtypes)."""
        from ..ir.host_dtypes import host_dtype_mismatch

        wrong = host_dtype_mismatch(name, got, dtype)
        if wrong:
            raise LaunchError(f"@{self.name}: {wrong}")

    def _wrong_dtype(self, name, shown: str, dtype) -> None:
        """Raise the wrong-dtype LaunchError for a device tensor whose element type is ``shown``."""
        from ..ir.host_dtypes import host_dtype_mismatch

        raise LaunchError(f"@{self.name}: {host_dtype_mismatch(name, shown, dtype)}")

    def _tmap(self, name, a, dtype, rank, copies, dry):
        """(the 128 bytes of the CUtensorMap for tensor argument ``a`` of tmap parameter ``name``, its shape). Cached
        per (address, shape, strides); ``dry``: derived and checked, not encoded (128 zero bytes)."""
        if _TORCH_TYPES.get(type(a)) and a.is_cuda and (name, a.dtype) in self._torch_ok:
            ptr, shape, strides = a.data_ptr(), a.shape, a.stride()
            if len(shape) != rank:
                raise LaunchError(f"@{self.name}: argument {name} has rank {len(shape)}, the kernel wants {rank}")
        else:
            ptr, shape, strides = self._tensor(name, a, dtype, rank, copies, dry, pitch=True)
        cache = self._tmap_cache[name]
        key = (ptr, tuple(shape), tuple(strides))
        blob = cache.get(key)
        if blob is None:
            blob = encode_tensor_map(self.name, name, ptr, key[1], key[2], *self.tmaps[name], encode=not dry)
            if not dry:
                cache[key] = blob
        return blob, shape

    def _bind(self, args, kwargs, dry=False):
        """(values in ABI order, spec keys, shapes, copies, kwargs). The hot path: torch CUDA tensors are read
        through data_ptr()/shape/stride() (dtype validated once per dtype object), spec keys are memoised on
        (address mod 16, shape, strides)."""
        if args:
            names = [p[0] for p in self.params]
            if len(args) > len(names):
                raise LaunchError(f"@{self.name}: takes {len(names)} arguments, got {len(args)}")
            kwargs = {**dict(zip(names, args)), **kwargs}
        if len(kwargs) != len(self.params) or not self._names.issuperset(kwargs):
            missing = sorted(self._names - set(kwargs))
            if missing:
                raise LaunchError(f"@{self.name}: missing argument {', '.join(missing)}")
            raise LaunchError(f"@{self.name}: unknown arguments {', '.join(sorted(set(kwargs) - self._names))}")
        values, keys, shapes, copies = [], [], {}, []
        torch_ok, key_cache = self._torch_ok, self._key_cache
        tmaps = self.tmaps
        for name, is_tensor, dtype, rank in self.params:
            a = kwargs[name]
            if not is_tensor:
                if name in tmaps:
                    blob, shapes[name] = self._tmap(name, a, dtype, rank, copies, dry)
                    values.append(blob)
                    continue
                values.append(int(a) if dtype == "i32" or dtype == "i64" else _scalar_bits(a, dtype))
                continue
            if _TORCH_TYPES.get(type(a)) and a.is_cuda and (name, a.dtype) in torch_ok:
                ptr, shape, strides = a.data_ptr(), a.shape, a.stride()
                if len(shape) != rank:
                    raise LaunchError(f"@{self.name}: argument {name} has rank {len(shape)}, the kernel wants {rank}")
            else:
                ptr, shape, strides = self._tensor(name, a, dtype, rank, copies, dry)
            values.append(ptr)
            values.extend(shape)
            values.extend(strides)
            ck = (ptr & 15, shape, strides)
            key = key_cache.get(ck, False)
            if key is False:
                key = key_cache[ck] = _spec_key(ptr, shape, strides, _ITEMSIZE[dtype])
            keys.append(key)
            shapes[name] = shape
        return values, tuple(keys), shapes, copies, kwargs

    def specialization(self, *args, **kwargs):
        """The Specialization a call with these arguments would compile for (no device needed)."""
        return self._specialization_of(self._bind(args, kwargs, dry=True)[1])

    def argument_values(self, *args, **kwargs) -> list:
        """The kernel parameter values a call would pass, in ABI order (no device needed; numpy arrays get 0)."""
        return self._bind(args, kwargs, dry=True)[0]

    def grid(self, *args, **kwargs) -> tuple:
        """The grid a call with these arguments would launch (no device needed)."""
        _, _, shapes, _, kw = self._bind(args, kwargs, dry=True)
        return self._launch_grid(kw, shapes)

    def _launch_grid(self, kwargs, shapes) -> tuple:
        """The grid (x, y, z) of a call: the generated function's value when it is one the hardware runs (entries
        from 0 to the limits, a multiple of the cluster); otherwise the host expressions evaluated again one by one
        (``ptxgen.ir.launch.evaluate_grid``) to raise a LaunchError that names the attribute and the expression."""
        try:
            grid = self._grid_fn(kwargs, shapes)
            x, y, z = grid
            cx, cy, cz = self.cluster
            lx, ly, lz = self._grid_limits
            if (0 <= x <= lx and 0 <= y <= ly and 0 <= z <= lz
                    and (cx == cy == cz == 1 or not (x % cx or y % cy or z % cz))):
                return grid
        except Exception:  # a division by zero, a missing extent: explained below
            pass
        from types import SimpleNamespace

        from ..ir import launch

        env = dict(kwargs)
        env.update((name, SimpleNamespace(shape=tuple(shape))) for name, shape in shapes.items())
        try:
            return launch.evaluate_grid(self.kernel, env)
        except launch.LaunchAttributeError as exc:
            raise LaunchError(str(exc)) from None
        except Exception as exc:
            raise LaunchError(f"@{self.name}: cannot evaluate grid = {launch.show(self.kernel.attrs.get('grid'))} "
                              f"for these arguments: {exc}") from None

    # -- launch ----------------------------------------------------------------------------------------------
    def prepare(self, *args, stream=0, **kwargs) -> "BoundLaunch":
        """A call site: the arguments bound, the specialization resolved, the grid evaluated and every parameter
        packed once. ``site()`` relaunches with the same arguments (only ``cuLaunchKernelEx``);
        ``site(x=x2, ...)`` swaps device tensors of the same shape, strides and 16-byte alignment class, rewriting
        only their pointer slots. Device tensors only (numpy arrays would need a copy per call)."""
        values, keys, shapes, copies, kwargs = self._bind(args, kwargs)
        if copies:
            raise LaunchError(f"@{self.name}: prepare() needs device tensors; {copies[0][0]} is a host array")
        grid = self._launch_grid(kwargs, shapes)
        ck = self._by_key.get(keys)
        if ck is None:
            ck = self._load(self._specialization_of(keys))
            self._by_key[keys] = ck
        if stream and hasattr(stream, "cuda_stream"):
            stream = stream.cuda_stream
        return BoundLaunch(self, ck, values, grid, stream, keys, shapes, kwargs)

    def __call__(self, *args, stream=0, **kwargs) -> None:
        values, keys, shapes, copies, kwargs = self._bind(args, kwargs)
        grid = self._launch_grid(kwargs, shapes)
        if not (grid[0] and grid[1] and grid[2]):  # an empty problem: nothing to launch
            return
        ck = self._by_key.get(keys)
        if ck is None:
            ck = self._load(self._specialization_of(keys))
            self._by_key[keys] = ck
        if stream and hasattr(stream, "cuda_stream"):
            stream = stream.cuda_stream
        try:
            ck.launch(values, grid, stream)
        except (CudaError, OverflowError, TypeError) as exc:
            raise LaunchError(f"@{self.name}: launch failed: {exc}") from exc
        for name, host, buf, device_shape in copies:
            if name not in self.written:
                continue
            try:
                out = buf.to_numpy(host.dtype, device_shape)
            except CudaError as exc:
                raise LaunchError(f"@{self.name}: the kernel faulted (seen copying {name} back): {exc}") from exc
            host[...] = out[..., :host.shape[-1]] if device_shape != host.shape else out


class BoundLaunch:
    """A prepared call site of a JitKernel (see ``JitKernel.prepare``). ``arguments``: name → the object each
    parameter launches with (the site holds them: their device memory lives as long as the site)."""

    def __init__(self, jk, ck, values, grid, stream, keys, shapes=None, arguments=None):
        self.kernel, self.compiled = jk, ck
        self.grid, self.stream = grid, stream
        # the packed block holds raw device addresses: the site keeps the tensors they belong to alive, so that a
        # caller dropping its own reference (a workspace made inline) cannot free memory the kernel still uses
        self.arguments = dict(arguments or {})
        # the argument block is private to this call site: pack it once, launch from it
        self._block, self._offset = _aligned_block(ck.block_size)
        ck.packer.pack_into(self._block, self._offset, *values)
        base = ctypes.addressof(self._block) + self._offset
        offsets = ck.offsets or [0]
        self._params = (ctypes.c_void_p * len(offsets))(*[base + o for o in offsets])
        self._params_address = ctypes.addressof(self._params)
        self._ptr_slot = {}
        self._shape = {}
        self._tmap_slot = {}
        slot = 0
        tensors = iter(keys)
        for name, is_tensor, dtype, rank in jk.params:
            if is_tensor:
                self._ptr_slot[name] = (self._offset + offsets[slot], next(tensors))
                self._shape[name] = (tuple(values[slot + 1:slot + 1 + rank]),
                                     tuple(values[slot + 1 + rank:slot + 1 + 2 * rank]), dtype)
                slot += 1 + 2 * rank
            else:
                if name in jk.tmaps:
                    self._tmap_slot[name] = (self._offset + offsets[slot], dtype, rank, tuple(shapes[name]))
                slot += 1
        cu = _cu()
        cfg = launch_config(grid, ck.block, ck.smem_bytes, stream, ck.cluster)
        self._cfg = cfg
        self._launch = cu.cuLaunchKernelEx
        self._handle = ck._handle
        self._pack_ptr = struct.Struct("<Q").pack_into

    def __call__(self, **tensors) -> None:
        if not (self.grid[0] and self.grid[1] and self.grid[2]):  # an empty problem: nothing to launch
            return
        for name, a in tensors.items():
            if name in self._tmap_slot:
                offset, dtype, rank, bound_shape = self._tmap_slot[name]
                blob, shape = self.kernel._tmap(name, a, dtype, rank, [], False)
                if tuple(shape) != bound_shape:
                    raise LaunchError(f"@{self.kernel.name}: {name} has shape {tuple(shape)}, the prepared call's "
                                      f"has {bound_shape} (the grid depends on it); prepare() again")
                struct.pack_into("128s", self._block, offset, blob)
                self.arguments[name] = a
                continue
            try:
                slot, key = self._ptr_slot[name]
            except KeyError:
                raise LaunchError(f"@{self.kernel.name}: {name} is not a tensor parameter") from None
            if hasattr(a, "data_ptr"):
                ptr, shape, strides = a.data_ptr(), a.shape, a.stride()
            else:
                ptr, shape, strides = self.kernel._tensor(name, a, self._shape[name][2], len(self._shape[name][0]),
                                                          [], False)
            bound_shape, bound_strides, _ = self._shape[name]
            # the prepared kernel holds for the same shape and strides, and, if it was specialized for a 16-byte
            # aligned tensor, an aligned address
            if shape != bound_shape or strides != bound_strides or (key is not None and key[1] and ptr & 15):
                raise LaunchError(f"@{self.kernel.name}: {name} differs from the prepared call's tensor "
                                  f"(shape {shape}, strides {strides}, address {ptr:#x}); prepare() again")
            self._pack_ptr(self._block, slot, ptr)
            self.arguments[name] = a
        err = self._launch(self._cfg, self._handle, self._params_address, 0)
        err = err[0] if isinstance(err, tuple) else err
        if int(err):
            raise LaunchError(f"@{self.kernel.name}: cuLaunchKernelEx failed: {_result_name(err)} ({int(err)}) "
                              f"{_error_string(err)} [grid {self.grid}]")


def jit(ir, kernel: str | None = None, arch: str = "sm_90a", options=None) -> JitKernel:
    """A callable for a kernel of ``ir`` (a Module — its first kernel, or the one named ``kernel`` — or a Kernel;
    IR text goes through ``jit_text`` with file ``<text>``). Errors: those of ``parse_module``, ``verify`` and
    ``compile_kernel`` (``compile()`` or the first call), LaunchError for arguments and launches, ValueError for a
    kernel name the module lacks (``no kernel @third in two.tile; its kernels: @first, @second``), TypeError for an
    ``ir`` that is no IR."""
    from ..ir.core import Kernel
    from ..ir.core import Module as IRModule

    if isinstance(ir, str):
        return jit_text(ir, kernel=kernel, arch=arch, options=options)
    if not isinstance(ir, (IRModule, Kernel)):
        raise TypeError(f"jit takes IR text, a Module or a Kernel, not {type(ir).__name__}")
    k = ir.kernel(kernel or None) if isinstance(ir, IRModule) else ir
    return JitKernel(k, arch, options)


def parse_verified(text: str, file: str = "<text>"):
    """``parse_module(text, file)`` with every kernel verified, through the disk cache: a hit (the same text and
    file name, the same ptxgen sources) unpickles the Module stored after an earlier successful verify, skipping
    lark and the verifier (gemm.tile: ≈ 1 ms instead of ≈ 90 ms).

    >>> m = parse_verified(open("examples/sqrt_sin.tile").read(), "examples/sqrt_sin.tile")   # doctest: +SKIP

    Post: the Module verified (a miss raises exactly ``parse_module``'s IRSyntaxError or ``verify``'s VerifyError
    and stores nothing; a hit only ever comes from text that verified); structurally equal to ``parse_module``'s,
    with the same locations."""
    return _parse_verified(text, file)[0]


def _parse_verified(text: str, file: str):
    """(the verified Module, {kernel name: sha256 of its printed IR}) — the hashes are stored with the Module so a
    hit needs no printing either."""
    from . import cache

    key = cache.text_key(text, file) if cache.enabled() else None
    entry = cache.lookup_module(key) if key else None
    if entry is not None:
        return entry
    from ..ir.text import parse_module, print_kernel  # lark and the verifier's op table: only on a miss
    from ..verify import verify

    module = parse_module(text, file)
    verify(module)
    hashes = {k.name: hashlib.sha256(print_kernel(k).encode()).hexdigest() for k in module.kernels}
    if key:
        cache.store_module(key, module, hashes)
    return module, hashes


def jit_text(text: str, file: str = "<text>", kernel: str | None = None, arch: str = "sm_90a",
             options=None) -> JitKernel:
    """``jit(parse_module(text, file), kernel, arch, options)`` with the parsed, verified Module and the compiled
    kernels taken from the disk cache when an earlier process (or call) has seen them: IR text → ready-to-load
    cubin without lark, the verifier, LLVM or nvJitLink.

    >>> k = jit_text(open("examples/gemm.tile").read(), file="examples/gemm.tile")   # doctest: +SKIP
    >>> k.compile().from_cache     # True in a second process                        # doctest: +SKIP

    Post: the same kernel, specializations and errors as the uncached path (see ``parse_verified``)."""
    module, hashes = _parse_verified(text, file)
    k = module.kernel(kernel or None)
    return JitKernel(k, arch, options, _verified=True, _ir_hash=hashes.get(k.name))
