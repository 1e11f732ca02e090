"""ptxgen.lower: tile IR → LLVM IR (llvmlite) → PTX (LLVM's NVPTX backend) → cubin (nvJitLink).

>>> llvm_ir = lower_kernel(kernel, Specialization.of(x=TensorSpec(0, True, 1)))    # doctest: +SKIP
>>> ptx, cubin = compile_kernel(kernel, spec)                                       # doctest: +SKIP

One backend: the PTX comes from LLVM; what LLVM cannot express is inline PTX from ``ptx_table``. Each op lowers
itself (``lower(op, lx)`` next to its ``verify`` and ``interpret`` in ``ptxgen.ir.ops``); ``LoweringContext`` is
``lx``. See ``spec/lowering.md``.
"""
from __future__ import annotations

import re

from .. import nvjitlink
from ..gc_pause import gc_paused
from ..ir.core import Kernel, Module
from ..ir.types import GlobalTensorType, ScalarType, TensorMapType
from . import target
from .context import LoweringContext, LoweringError
from .sourcemap import explain, llvm_origin, op_locations
from .specialize import Specialization, TensorSpec, kernel_abi

DEFAULT_ARCH = "sm_90a"
DEFAULT_OPTIONS = ("-O3", "-Xptxas=-v")


def _kernel(ir, name=None) -> Kernel:
    if isinstance(ir, Kernel):
        return ir
    if isinstance(ir, Module):
        return ir.kernel(name or None)
    raise TypeError(f"expected a Kernel or Module, got {type(ir).__name__}")


def lower_kernel(kernel, specialization: Specialization | None = None, arch: str = DEFAULT_ARCH,
                 verify: bool = True, vector_widths: dict | None = None) -> str:
    """The LLVM IR text (unoptimized) of ``kernel`` for ``specialization`` (default: generic, correct for any
    arguments). Pre: the kernel verifies (checked unless ``verify=False``: VerifyError). Raises LoweringError naming
    the op; a Module without the kernel asked for is a ValueError. ``vector_widths``: a dict that receives, per
    gtensor parameter with a vector access, the widest one (elements), e.g. ``{"z": 4}`` for sqrt_sin aligned."""
    kernel = _kernel(kernel)
    if verify:
        from ..verify import verify as _verify
        _verify(kernel)
    for p in kernel.params:
        if not isinstance(p.type, (GlobalTensorType, ScalarType, TensorMapType)):
            raise LoweringError(None, f"{kernel.loc}: @{kernel.name}: parameter %{p.name} of type {p.type} "
                                      "has no lowering yet")
    lx = LoweringContext(kernel, specialization or Specialization.generic(), target.data_layout(arch),
                         op_locations(kernel))
    lx.lower_ops(kernel.body.ops)
    lx.b.debug_metadata = None
    lx.b.ret_void()
    if vector_widths is not None:
        vector_widths.update(lx.vector_widths)
    return str(lx.module)


def _invalid_module(kernel, llvm_ir: str, error) -> LoweringError:
    """The LoweringError for lowered LLVM IR that LLVM's verifier rejects: a defect of the lowering (the IR verifier
    should have refused the kernel), named at the op the offending instruction came from when LLVM's message shows
    it (``!dbg !N``), else at the kernel."""
    text = error.llvm_message.strip()
    op = llvm_origin(text, llvm_ir, kernel)
    where = "" if op is not None else f"{kernel.loc}: @{kernel.name}: "
    first = "; ".join(line.strip() for line in text.splitlines()[:3])
    return LoweringError(op, f"{where}LLVM's verifier rejects the lowered module (please report it with the kernel): "
                             f"{first}")


class KernelCompileError(RuntimeError):
    """nvJitLink refused the PTX of a kernel: the message quotes ptxas' log and, per offending PTX line, the IR op
    (``frag.sqrt at examples/sqrt_sin.tile:11:3``) it was emitted for. ``.log``, ``.ptx``, ``.origins``."""

    def __init__(self, message, log="", ptx="", origins=()):
        super().__init__(message)
        self.log, self.ptx, self.origins = log, ptx, tuple(origins)


def assemble(ptx: str, kernel, arch: str = DEFAULT_ARCH, options=DEFAULT_OPTIONS):
    """PTX → cubin with nvJitLink; a ptxas error raises KernelCompileError naming the IR ops of the bad lines."""
    kernel = _kernel(kernel)
    name = f"{kernel.name}.ptx"
    try:
        return nvjitlink.compile_ptx(ptx, arch=arch, options=options, name=name)
    except nvjitlink.CompileError as exc:
        origins = explain(ptx, exc.log, kernel, name)
        text = f"@{kernel.name}: PTX → cubin failed for {arch}\n{exc}"
        if origins:
            text += "\nfrom the IR:\n" + "\n".join(origins)
        raise KernelCompileError(text, exc.log, ptx, origins) from None


class Compiled:
    """A compiled kernel: ``ptx``, ``cubin`` (ptxgen.nvjitlink.Cubin), ``llvm_ir``, ``spec``, ``arch``, ``name``,
    ``info_log`` and ``registers``/``spill_bytes`` read from it (None when absent). Unpacks as ``(ptx, cubin)``.
    ``from_cache``: True when it was read from the disk cache (``ptxgen.runtime.cache``) instead of compiled.
    ``vector_widths``: per gtensor parameter, its widest vector access (``lower_kernel``); None when unknown (an entry
    cached before it was recorded).

    The cubin may be assembled on first use (``assembler``, a no-argument callable returning it): a kernel the driver
    loads from its PTX (``setmaxnreg``: see ``ptxgen.runtime.launcher.load_image``) then never waits for nvJitLink
    unless someone reads ``cubin``, ``info_log``, ``registers`` or ``spill_bytes``. ``assembled`` says whether it
    has been."""

    from_cache = False
    vector_widths = None

    def __init__(self, name, spec, arch, llvm_ir, ptx, cubin=None, *, assembler=None):
        if cubin is None and assembler is None:
            raise ValueError(f"Compiled({name!r}): give the cubin or an assembler that makes it")
        self.name, self.spec, self.arch = name, spec, arch
        self.llvm_ir, self.ptx = llvm_ir, ptx
        self._cubin = cubin
        self.assembler = assembler

    @property
    def assembled(self) -> bool:
        return self._cubin is not None

    @property
    def cubin(self):
        if self._cubin is None:
            self._cubin = self.assembler()
            self.assembler = None
        return self._cubin

    @property
    def info_log(self) -> str:
        return getattr(self.cubin, "info_log", "")

    @property
    def registers(self):
        m = re.search(r"Used (\d+) registers", self.info_log)
        return int(m.group(1)) if m else None

    @property
    def spill_bytes(self):
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", self.info_log)]
        return sum(spills) if spills else None

    def __iter__(self):
        return iter((self.ptx, self.cubin))

    def ptx_instructions(self) -> list:
        """The PTX instruction lines of the kernel body (no directives, labels, comments or braces)."""
        out = []
        for line in self.ptx.splitlines():
            s = line.strip()
            if not s or s.startswith(("//", ".", "{", "}", "$")) or s.endswith(":") or s.startswith(")"):
                continue
            out.append(s)
        return out


@gc_paused
def compile_kernel(kernel, specialization: Specialization | None = None, arch: str = DEFAULT_ARCH,
                   options=DEFAULT_OPTIONS, verify: bool = True, defer_assembly: bool = False) -> Compiled:
    """Lower, optimize, emit PTX and assemble: a ``Compiled`` (unpacks as ``(ptx, cubin)``). ``verify=False`` for a
    kernel the caller has verified (``JitKernel`` does at construction; verifying a GEMM twice is a noticeable share of
    a cold compile).
    ``defer_assembly=True``: nvJitLink runs when the cubin is first read (a ptxas error is raised then), not here.

    >>> compile_kernel(kernel).registers          # doctest: +SKIP
    90

    Errors: VerifyError (the check), LoweringError (also for a module LLVM's verifier rejects — never a process
    abort), KernelCompileError (ptxas), ValueError / TypeError for arguments.
    Post: ``ptx`` is the PTX of the lowered kernel; ``cubin`` (now or once read) is nvJitLink's assembly of it."""
    kernel = _kernel(kernel)
    spec = specialization or Specialization.generic()
    widths = {}
    llvm_ir = lower_kernel(kernel, spec, arch, verify=verify, vector_widths=widths)
    try:
        ptx = target.emit_ptx(llvm_ir, arch)
    except target.InvalidModule as e:
        raise _invalid_module(kernel, llvm_ir, e) from None
    if defer_assembly:
        compiled = Compiled(kernel.name, spec, arch, llvm_ir, ptx,
                            assembler=lambda: assemble(ptx, kernel, arch, options))
    else:
        compiled = Compiled(kernel.name, spec, arch, llvm_ir, ptx, assemble(ptx, kernel, arch, options))
    compiled.vector_widths = widths
    return compiled


__all__ = [
    "Compiled", "KernelCompileError", "LoweringContext", "LoweringError", "Specialization", "TensorSpec",
    "assemble", "compile_kernel", "kernel_abi", "lower_kernel",
]
