"""The compile cache of a kernel: specialization → compiled kernel (process memory, then the disk cache, else lowering
and nvJitLink) → loaded ``CompiledKernel``.

>>> kc = KernelCache(kernel, ir_hash, "sm_90a", DEFAULT_OPTIONS, launch_shape)     # doctest: +SKIP
>>> kc.compile(Specialization.generic()).from_cache      # True when an earlier process compiled it   # doctest: +SKIP
>>> kc.load(spec)                                        # the CompiledKernel, loaded once             # doctest: +SKIP

Compiled kernels are kept process-wide per (sha256 of the printed IR, Specialization, arch, options) — two
``JitKernel``s of the same IR share them — and on disk under ``cache.kernel_key`` of the same (plus the toolchain);
a loaded kernel is kept per ``KernelCache`` (per JitKernel), so the module is loaded once per specialization.

Specializations whose code is the same share one compiled kernel: a tensor's extent multiple (the power of two ≤ 16
dividing its contiguous extent: N's divisibility for a GEMM's C) matters to the code only up to the widest vector
access the kernel makes on that tensor. The first compile of a specialization's ``pattern`` (extent multiples
erased) records those widths (``Compiled.vector_widths``, kept in memory and, as a choice entry, on disk); every
specialization of the pattern is then looked up, compiled and loaded as its ``canonical`` form. A GEMM's C written by
the ``direct`` epilogue (2-element vectors) thus has two compiled forms per alignment, N odd and N even; by the
``rows`` epilogue (scalar stores) one.
"""
from __future__ import annotations

from .kernel_launch import CompiledKernel, load_image

__all__ = ["KernelCache", "LaunchShape"]

_COMPILED = {}  # (ir hash, Specialization, arch, options) -> ptxgen.lower.Compiled, process-wide
_WIDTHS = {}    # (ir hash, Specialization.pattern(), arch, options) -> vector widths, process-wide


class LaunchShape:
    """What every specialization of a kernel launches with: ``abi`` (its parameter slots), ``block``, ``cluster``,
    ``smem_bytes`` (dynamic shared memory) and ``non_portable_cluster``."""

    def __init__(self, abi, block, cluster, smem_bytes: int, non_portable_cluster: bool):
        self.abi, self.block, self.cluster = abi, block, cluster
        self.smem_bytes, self.non_portable_cluster = smem_bytes, non_portable_cluster


class KernelCache:
    """The specializations of one kernel: ``compile(spec)`` gives the ``ptxgen.lower.Compiled`` (no device needed),
    ``load(spec)`` the ``CompiledKernel`` (``loaded``: Specialization → CompiledKernel)."""

    def __init__(self, kernel, ir_hash: str, arch: str, options: tuple, shape: LaunchShape):
        self.kernel = kernel
        self.ir_hash = ir_hash
        self.arch = arch
        self.options = options
        self.shape = shape
        self.loaded = {}

    def compile(self, spec):
        """The compiled kernel (``ptxgen.lower.Compiled``) for ``spec``, no device needed.

        Looked up in the process-wide dict, then in the disk cache (``ptxgen.runtime.cache``: a hit neither lowers
        nor runs nvJitLink, and says so with ``.from_cache``), and only then lowered, compiled and stored in both.
        Post: the same object for the same (IR, spec, arch, options) for the rest of the process."""
        from . import cache

        widths = self.vector_widths(spec)
        if widths is not None:
            spec = spec.canonical(widths)
        key = (self.ir_hash, spec, self.arch, self.options)
        c = _COMPILED.get(key)
        if c is None:
            disk_key = cache.kernel_key(self.ir_hash, spec, self.arch, self.options) if cache.enabled() else None
            c = cache.lookup(disk_key) if disk_key else None
            if c is None:
                from ..lower import compile_kernel

                # verified when its JitKernel was made (or, through jit_text, before its Module was cached); a kernel
                # the driver loads from PTX is assembled by nvJitLink only once its cubin is read
                c = compile_kernel(self.kernel, spec, self.arch, self.options, verify=False, defer_assembly=True)
                if load_image(c) == "cubin":
                    c.cubin  # assembled now: the one image this kernel loads, stored with it
                if widths is None and c.vector_widths is not None:
                    # the first of its pattern: filed under its canonical form, where every later one looks
                    canonical = spec.canonical(self._learn(spec, c.vector_widths))
                    _COMPILED[(self.ir_hash, canonical, self.arch, self.options)] = c
                    disk_key = cache.kernel_key(self.ir_hash, canonical, self.arch, self.options) if disk_key else None
                if disk_key:
                    cache.store(disk_key, c, self.options)
            elif widths is None and c.vector_widths is not None:   # the pattern's widths lost from the disk
                self._learn(spec, c.vector_widths)
            if not c.assembled:
                c.assembler = self._assembler(c, disk_key)
            _COMPILED[key] = c
        return c

    def vector_widths(self, spec):
        """The widest vector access per tensor of this kernel's specializations of ``spec``'s pattern: in memory,
        else from the disk cache, else None (not compiled yet)."""
        pattern = (self.ir_hash, spec.pattern(), self.arch, self.options)
        widths = _WIDTHS.get(pattern)
        if widths is None:
            from . import cache

            if cache.enabled():
                found = cache.lookup_choice(cache.choice_key(("vector widths",) + pattern, ()))
                if isinstance(found, dict):
                    widths = _WIDTHS[pattern] = found
        return widths

    def _learn(self, spec, widths: dict) -> dict:
        """Record ``widths`` (a compiled kernel's ``vector_widths``) for ``spec``'s pattern, in memory and on disk.
        → the widths."""
        from . import cache

        pattern = (self.ir_hash, spec.pattern(), self.arch, self.options)
        widths = _WIDTHS[pattern] = dict(widths)
        if cache.enabled():
            cache.store_choice(cache.choice_key(("vector widths",) + pattern, ()), widths)
        return widths

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

    def load(self, spec) -> CompiledKernel:
        """The ``CompiledKernel`` of ``spec``, compiled (``compile``) and loaded into the current context on first
        use (``loaded`` is keyed by canonical specializations). Post: the same object for specializations of one
        canonical form for the life of this cache."""
        ck = self.loaded.get(spec)
        if ck is None:
            compiled = self.compile(spec)
            widths = self.vector_widths(spec)
            if widths is not None:
                spec = spec.canonical(widths)   # loaded once per canonical form
            ck = self.loaded.get(spec)
            if ck is None:
                s = self.shape
                ck = CompiledKernel(self.kernel.name, compiled, s.abi, s.block, s.cluster, s.smem_bytes,
                                    s.non_portable_cluster)
                self.loaded[spec] = ck
        return ck
