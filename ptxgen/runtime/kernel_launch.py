"""Launching one loaded specialization of a kernel: its argument block and ``cuLaunchKernelEx``.

A ``CompiledKernel`` is one specialization of a kernel, loaded into the current context: the module (nvJitLink's
cubin, or the PTX for the driver's JIT: ``load_image``), its function with the shared-memory and cluster attributes
set once (``MAX_DYNAMIC_SHARED_SIZE_BYTES`` above 48 KiB, ``NON_PORTABLE_CLUSTER_SIZE_ALLOWED`` for clusters of 9 to
16 CTAs).

An ``ArgumentBlock`` is the memory ``cuLaunchKernelEx`` reads the parameters from: 8 bytes per pointer or scalar
slot, 128 bytes at a 128-aligned offset per tensor map (``argument_layout``), and the ``void*[]`` array pointing at
each slot, both built once. ``pack(values)`` writes every slot with one ``struct.pack``; a caller that knows
which slots changed writes only those through the typed views (``u64[i] = pointer``). The driver copies the
parameters when the launch is enqueued, so a block may be rewritten as soon as ``launch`` returns.

A ``BlockLaunch`` is an argument block of one CompiledKernel with a ``CUlaunchConfig`` of its own (block, cluster
attribute, dynamic shared memory) whose grid and stream are rewritten only when they change: the kernel's own one
(``launch(values, grid)``), one per call signature (the launcher's bindings), one per prepared call site.

>>> ck = CompiledKernel("sqrt_sin", compiled, abi, (256, 1, 1), (1, 1, 1))        # doctest: +SKIP
>>> ck.launch([x_ptr, 1000, 1, z_ptr, 1000, 1, 1000], grid=(1, 1, 1))            # doctest: +SKIP
"""
from __future__ import annotations

import ctypes
import re
import struct

from .driver import (CudaError, Module, _cu, _error_string, _result_name, allow_non_portable_cluster, context,
                     current_device, launch_config, resident_ctas, set_max_dynamic_smem)

__all__ = ["ArgumentBlock", "ArgumentLayout", "BlockLaunch", "CompiledKernel", "LaunchError", "argument_layout",
           "dynamic_smem_bytes", "load_image", "STATIC_SMEM_LIMIT", "TMAP_BYTES", "WINDOW_SLACK"]


class LaunchError(RuntimeError):
    """A kernel could not be launched, or its arguments are wrong: the message starts with ``@name:``."""


# each scalar/pointer slot takes 8 bytes of the argument block (struct code + padding to 8); a tensor map 128 bytes
# at a 128-byte aligned offset (the driver copies the .param's 128 bytes; CUDA 13 wants CUtensorMaps 128-aligned)
_SLOT_FORMAT = {"ptr": "Q", "i32": "i4x", "i64": "q", "f32": "f4x", "i16": "H6x", "tmap": "128s"}
_SLOT_SIZE = {"tmap": (128, 128)}  # abi -> (bytes, alignment); every other slot (8, 8)
TMAP_BYTES = 128
BLOCK_ALIGNMENT = 128
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory a launch may use without opting in
WINDOW_SLACK = 1024  # the lowering rounds the window up to 1024 bytes (ptxgen.lower.shared.emit_window)


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


class ArgumentLayout:
    """``argument_layout`` of a kernel's ABI, with the ``struct.Struct`` that packs it and the slots (``Slot`` of
    ``ptxgen.lower.specialize.kernel_abi``) to name a value that does not fit. Built once per kernel."""

    def __init__(self, abi):
        self.slots = list(abi)
        fmt, self.offsets, self.size = argument_layout(self.slots)
        self.packer = struct.Struct(fmt)

    def misfit(self, kernel: str, values) -> str:
        """The LaunchError text for ``values`` that ``packer`` refused: the first slot whose value does not fit,
        e.g. ``@sqrt_sin: an argument does not fit its parameter type: %n = 1099511627776 is out of range for i32
        (...)``."""
        for slot, value in zip(self.slots, values):
            try:
                struct.pack("<" + _SLOT_FORMAT[slot.abi], value)
            except (struct.error, OverflowError, TypeError) as exc:
                what = {"extent": f"extent {slot.mode} of %{slot.param}",
                        "stride": f"stride {slot.mode} of %{slot.param}"}.get(slot.kind, f"%{slot.param}")
                wanted = slot.dtype if slot.kind == "scalar" else slot.abi
                return (f"@{kernel}: an argument does not fit its parameter type: {what} = {value!r} is out of "
                        f"range for {wanted} ({exc})")
        return f"@{kernel}: an argument does not fit its parameter type"


class ArgumentBlock:
    """One argument block of a kernel (see the module docstring): ``address`` is the ``void**`` kernelParams of
    ``cuLaunchKernelEx``; ``bytes`` (unsigned bytes), ``u64``/``i64``/``i32``/``u32``/``u16`` are typed views of the
    block (a slot at byte offset o is ``u64[o // 8]``, ``i32[o // 4]``, ``u16[o // 2]``; a view refuses a value out
    of its type's range with ValueError). Post: ``address`` and the views stay valid as long as the block lives."""

    __slots__ = ("layout", "bytes", "u64", "i64", "i32", "u32", "u16", "address", "_buffer", "_pointers")

    def __init__(self, layout: ArgumentLayout):
        self.layout = layout
        self._buffer = ctypes.create_string_buffer(layout.size + BLOCK_ALIGNMENT)
        start = (-ctypes.addressof(self._buffer)) % BLOCK_ALIGNMENT
        self.bytes = memoryview(self._buffer).cast("B")[start:start + layout.size]
        self.u64, self.i64 = self.bytes.cast("Q"), self.bytes.cast("q")
        self.i32, self.u32, self.u16 = self.bytes.cast("i"), self.bytes.cast("I"), self.bytes.cast("H")
        base = ctypes.addressof(self._buffer) + start
        offsets = layout.offsets or [0]
        self._pointers = (ctypes.c_void_p * len(offsets))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self._pointers)

    def pack(self, kernel: str, values) -> None:
        """Write every slot: ``values`` in ABI order (ints, floats, 128-byte tensor maps). Raises LaunchError naming
        the first value that does not fit its slot, and then leaves the block as it was."""
        try:
            packed = self.layout.packer.pack(*values)
        except (struct.error, OverflowError, TypeError):
            raise LaunchError(self.layout.misfit(kernel, values)) from None
        self.bytes[:len(packed)] = packed  # whole or not at all: pack_into would leave a block half written

    def values(self) -> list:
        """The slot values as the kernel will read them (tensor maps as 128 bytes): ``packer.unpack`` of the
        block. Post: ``pack(v)`` then ``values()`` gives ``v`` for every v that fits."""
        return list(self.layout.packer.unpack(self.bytes))


def dynamic_smem_bytes(kernel) -> int:
    """Dynamic shared memory a launch of ``kernel`` requests: its smem plan's total plus ``WINDOW_SLACK`` (capped at
    the 227 KiB a Hopper CTA may have, where the window's declared 1024-byte alignment holds anyway); 0 without
    allocations. ``examples/tma_copy.tile``: 16416 + 1024 = 17440."""
    from ..ir.ops import SMEM_LIMIT, smem_plan

    plan = smem_plan(kernel.body.ops)
    if not plan.ops:
        return 0
    return min(plan.total + WINDOW_SLACK, max(plan.total, SMEM_LIMIT))


_SETMAXNREG = re.compile(r"^\s*setmaxnreg\.", re.M)


def load_image(compiled) -> str:
    """Which image of a compiled kernel the driver loads: ``"cubin"`` (nvJitLink's), or ``"ptx"`` (the driver's own
    whole-program JIT) for a kernel whose PTX re-sizes registers with ``setmaxnreg``: nvJitLink's relocatable compile
    ignores that instruction (ptxas info C7504), so a warp-specialized kernel would be held to the launch budget and
    spill. The driver JIT honours setmaxnreg (H100: gemm_hopper's TMA epilogue 168 registers and no local memory,
    against 152 bytes of spills from the nvJitLink cubin; the driver's cuLink* path spills alike) and caches its
    result across processes (``CUDA_CACHE_PATH``), so such a kernel never waits for nvJitLink to be loaded.

    Post: "ptx" exactly when a PTX instruction line is ``setmaxnreg``."""
    return "ptx" if _SETMAXNREG.search(compiled.ptx) else "cubin"


class CompiledKernel:
    """One specialization of a kernel, loaded: ``compiled`` (ptx, cubin, registers...), ``function``, ``device``
    (the ordinal of the context it is loaded in), ``layout`` (its ``ArgumentLayout``). ``launch(values, grid,
    stream)`` packs the values into the kernel's own ``BlockLaunch`` and launches; ``new_launch()`` gives a caller
    one of its own (a call signature's binding, a prepared call site)."""

    def __init__(self, name, compiled, abi, block, cluster, smem_bytes: int = 0, non_portable_cluster: bool = False):
        self.name = name
        self.compiled = compiled
        self.loaded_from = load_image(compiled)
        context()
        try:
            self.module = Module(compiled.ptx if self.loaded_from == "ptx" else compiled.cubin)
        except CudaError:
            if self.loaded_from == "ptx":
                compiled.cubin  # the driver's JIT refused it: nvJitLink's error names the IR ops of the bad lines
            raise
        self.function = self.module.function(name)
        self.device = current_device()
        self.abi = abi
        self.layout = ArgumentLayout(abi)
        self.smem_bytes = int(smem_bytes)
        if self.smem_bytes > STATIC_SMEM_LIMIT:  # opt in once per loaded function
            set_max_dynamic_smem(self.function, self.smem_bytes)
        if non_portable_cluster:  # the kernel's non_portable_cluster = true: clusters of 9 to 16 CTAs
            allow_non_portable_cluster(self.function)
        cu = _cu()
        self.stream_type = cu.CUstream
        self.cu_launch = cu.cuLaunchKernelEx
        self.block = tuple(block)
        self.cluster = tuple(cluster)
        self.handle = self.function.handle
        self.arguments = BlockLaunch(self)

    def launch_config(self, grid=(1, 1, 1), stream=0):
        """A new ``CUlaunchConfig`` of this kernel: ``grid``, its block, dynamic shared memory and cluster."""
        return launch_config(grid, self.block, self.smem_bytes, stream, self.cluster)

    def new_launch(self) -> "BlockLaunch":
        """A ``BlockLaunch`` of this kernel with a fresh (zero) argument block and a launch config of its own."""
        return BlockLaunch(self)

    def resident_ctas(self) -> int:
        """CTAs of this kernel the device runs at once (``driver.resident_ctas``: whole clusters × cluster size):
        the most a persistent kernel's grid should hold, e.g. 120 for an H100 GEMM in clusters of 4, 132 alone."""
        return resident_ctas(self.function, self.block, self.smem_bytes, self.cluster)

    def launch(self, values, grid, stream=0) -> None:
        """Pack ``values`` (ABI order) into this kernel's own block and launch ``grid`` CTAs on ``stream`` (a
        CUstream or its handle)."""
        self.arguments.pack(values)
        self.arguments.launch(grid, stream)


class BlockLaunch:
    """Launches of one ``CompiledKernel`` from one argument block: the block's typed views and ``address`` (see
    ``ArgumentBlock``), and a ``CUlaunchConfig`` (``cfg``) of its own whose grid and stream are rewritten only when
    they differ from the last launch's (``grid``, ``stream``). The generated fast path of the launcher launches with
    ``cu_launch(b.cfg, b.handle, b.address, 0)`` directly when grid and stream are the last ones; ``launch(grid,
    stream)`` does the same after updating the config."""

    __slots__ = ("compiled", "block", "address", "bytes", "u64", "i64", "i32", "u32", "u16", "cfg", "grid",
                 "stream", "handle", "cu_launch", "maps")

    def __init__(self, compiled: CompiledKernel):
        self.compiled = compiled
        self.block = b = ArgumentBlock(compiled.layout)
        self.address, self.bytes, self.u64, self.i64 = b.address, b.bytes, b.u64, b.i64
        self.i32, self.u32, self.u16 = b.i32, b.u32, b.u16
        self.cfg = compiled.launch_config()
        self.grid, self.stream = (1, 1, 1), 0
        self.handle, self.cu_launch = compiled.handle, compiled.cu_launch
        self.maps = []

    def pack(self, values) -> None:
        """Write every slot of the block (``ArgumentBlock.pack``)."""
        self.block.pack(self.compiled.name, values)

    def configure(self, grid, stream=0) -> None:
        """Make the launch config's grid ``grid`` and its stream ``stream`` (a CUstream or its handle), writing only
        what differs from the last launch's."""
        cfg = self.cfg
        if grid != self.grid:
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
            self.grid = grid
        if stream is not self.stream and stream != self.stream:
            st = self.compiled.stream_type
            cfg.hStream = stream if isinstance(stream, st) else st(int(stream))
            self.stream = stream

    def launch(self, grid, stream=0) -> None:
        """``cuLaunchKernelEx`` of ``grid`` CTAs on ``stream`` (a CUstream or its handle) from this block. Raises
        LaunchError naming the kernel, the grid and the block when the driver refuses."""
        self.configure(grid, stream)
        err = self.cu_launch(self.cfg, self.handle, self.address, 0)[0]
        if err:
            self.failed(err)

    def failed(self, err) -> None:
        """Raise the LaunchError of a launch the driver refused with CUresult ``err``."""
        raise LaunchError(f"@{self.compiled.name}: cuLaunchKernelEx failed: {_result_name(err)} ({int(err)}) "
                          f"{_error_string(err)} [grid {self.grid}, block {self.compiled.block}]")
