"""ptxgen.runtime: run compiled kernels through the CUDA driver (cuda-bindings).

``compile_ptx`` (nvJitLink's PTX → cubin, defined in ``ptxgen.nvjitlink`` below both the lowering and this package
and re-exported here) works without a GPU; the driver layer initialises lazily on first use and ``gpu_available()`` never
raises. ``jit_text(text, file)`` and ``JitKernel.compile`` go through the disk compile cache (``cache``).
"""
from ..nvjitlink import CompileError, Cubin, compile_ptx, nvjitlink_version
from .driver import (
    CudaError, DeviceBuffer, Function, Module, compute_capability, context, device_count, device_name,
    driver_version, gpu_available, launch, multiprocessor_count, pack_args, resident_ctas, set_max_dynamic_smem,
    synchronize,
)
from .launcher import BoundLaunch, CompiledKernel, JitKernel, LaunchError, jit, jit_text, parse_verified
from . import cache

__all__ = [
    "CompileError", "Cubin", "compile_ptx", "nvjitlink_version",
    "CudaError", "DeviceBuffer", "Function", "Module", "compute_capability", "context", "device_count",
    "device_name", "driver_version", "gpu_available", "launch", "multiprocessor_count", "pack_args", "resident_ctas",
    "set_max_dynamic_smem", "synchronize",
    "BoundLaunch", "CompiledKernel", "JitKernel", "LaunchError", "jit", "jit_text", "parse_verified", "cache",
]
