"""Run tile-IR kernels from Python: ``k = jit(module); k(x=x, z=z, n=n)``.

``JitKernel`` is the public face of four concerns, each in its own module:

- ``binding``: the arguments — numpy arrays (of the element type's host dtype, ``ptxgen.ir.host_dtypes``:
  ``ml_dtypes.bfloat16`` for bf16, ``ml_dtypes.float8_e4m3fn`` for e4m3, ..., the interpreter's convention too)
  copied to the device and, when the kernel stores to them, back; torch CUDA tensors (``data_ptr()/shape/
  stride()``), ``__cuda_array_interface__`` (cupy), DLPack and ``DeviceBuffer.from_numpy`` buffers used in place;
  scalars by value; the checks (type, rank, device), the specialization key, and the per-signature binding cache
  with its generated fast path;
- ``tensor_map``: a ``tmap<T, R>[box]`` argument's CUtensorMap, derived from the tensor passed (torch CUDA tensors,
  the CUDA array interface, numpy arrays copied into a buffer whose rows are padded to 16 bytes) and encoded by the
  driver, cached per (address, shape, strides);
- ``grid``: the grid's host expressions (``cdiv(%n, 1024)``) compiled once to Python; a grid the arguments make
  invalid raises LaunchError naming the attribute (``@k: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m) divides by
  %m = 0``); a zero entry launches nothing;
- ``kernel_cache``: specialization → compiled kernel (process memory, the disk cache ``cache.py``, else lowering
  and nvJitLink; cache key: hash of the printed IR, specialization, arch, options, toolchain) → loaded kernel;
- ``kernel_launch``: the loaded ``CompiledKernel``, its argument blocks and ``cuLaunchKernelEx`` (cluster attribute,
  dynamic shared memory above 48 KiB opted in, the plan's bytes plus 1 KiB slack for the window's alignment);
  ``call_site``: ``prepare()``'s ``BoundLaunch``.

A call whose arguments have the signature of an earlier call (per tensor: type, device, shape, strides, 16-byte
alignment) costs the attribute reads, one dict lookup, the grid expressions and the writes of the pointer and scalar
slots before ``cuLaunchKernelEx``; everything else is checked once per signature.

Launch failures raise ``LaunchError`` naming the kernel. Launches are asynchronous (numpy arguments synchronize
through their copy back); a fault shows at the next synchronizing call. Not thread-safe (one caller at a time per
JitKernel).
"""
from __future__ import annotations

import hashlib
import operator
import weakref

from .binding import SCALAR, TENSOR, TMAP, ArgumentBinder
from .call_site import BoundLaunch
from .driver import CudaError
from .grid import LaunchGrid
from .kernel_cache import KernelCache, LaunchShape
from .kernel_launch import CompiledKernel, LaunchError, argument_layout, dynamic_smem_bytes

# defined here before the launcher was split by concern: importers of ptxgen.runtime.launcher still find them
from .dlpack import dlpack_view  # noqa: F401,E402
from .kernel_cache import _COMPILED  # noqa: F401,E402
from .kernel_launch import load_image  # noqa: F401,E402
from .tensor_map import encode_tensor_map  # noqa: F401,E402

__all__ = ["BoundLaunch", "LaunchError", "JitKernel", "CompiledKernel", "jit", "jit_text", "parse_verified"]


class JitKernel:
    """A tile-IR kernel callable from Python. ``k(**args)`` launches; ``k.compile(spec)`` gives the compiled
    kernel (``.ptx``, ``.cubin``, ``.registers``); ``k.specialization(**args)`` the one a call would use;
    ``k.prepare(**args)`` a call site."""

    def __init__(self, kernel, arch: str = "sm_90a", options=None, *, _verified: bool = False,
                 _ir_hash: str | None = None):
        from ..ir import launch
        from ..ir.core import walk
        from ..ir.ops.tma import map_params
        from ..ir.types import GlobalTensorType, ScalarType, TensorMapType
        from ..lower import DEFAULT_OPTIONS
        from ..lower.specialize import Specialization, TensorSpec, kernel_abi

        # The verifier and the printer are imported only when needed: a cache hit through jit_text has neither to
        # do, and importing the printer (json, importlib.resources, the grammar module) would be a large part of it.
        if not _verified:  # jit_text's modules verified before they were cached; verifying is most of __init__
            from ..verify import verify

            verify(kernel)
        self._Specialization, self._TensorSpec = Specialization, TensorSpec
        self.kernel = kernel
        self.name = kernel.name
        self.arch = arch
        self.options = tuple(options) if options is not None else DEFAULT_OPTIONS
        # jit_text passes the hash stored with its cached Module: printing a kernel costs a fresh process far more than
        # the rest of a cache hit (the printer builds layoutc's CuTe parser to check layout attributes)
        if _ir_hash is None:
            from ..ir.text import print_kernel

            _ir_hash = hashlib.sha256(print_kernel(kernel).encode()).hexdigest()
        self.ir_hash = _ir_hash
        self.abi = kernel_abi(kernel)
        self.params = []  # (name, kind: "gtensor" / "tmap" / "scalar", element type, rank)
        self.tmaps = {}   # tmap parameter name -> (its TensorMapType, the static TmaParams the lowering assumed)
        for p in kernel.params:
            if isinstance(p.type, GlobalTensorType):
                self.params.append((p.name, TENSOR, p.type.dtype.name, p.type.rank))
            elif isinstance(p.type, ScalarType):
                self.params.append((p.name, SCALAR, p.type.name, 0))
            elif isinstance(p.type, TensorMapType):
                self.params.append((p.name, TMAP, p.type.dtype.name, p.type.rank))
                self.tmaps[p.name] = (p.type, map_params(p.type))
            else:
                raise LaunchError(f"@{self.name}: parameter %{p.name} of type {p.type} cannot be passed yet")
        try:
            self.block = launch.block_dims(kernel)
            self.cluster = launch.cluster_dims(kernel)
        except launch.LaunchAttributeError as exc:  # only an unverified kernel (the verifier reports these)
            raise LaunchError(str(exc)) from None
        self.non_portable_cluster = launch.non_portable_cluster(kernel)
        self._grid = LaunchGrid(kernel, self.cluster)
        self.grid_source = self._grid.source
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
        self._kernels = KernelCache(kernel, self.ir_hash, arch, self.options,
                                    LaunchShape(self.abi, self.block, self.cluster, self.smem_bytes,
                                                self.non_portable_cluster))
        self._loaded = self._kernels.loaded  # Specialization -> CompiledKernel
        me, name = weakref.ref(self), self.name  # the entry's way back, not keeping the kernel alive

        def checked(kwargs, stream):
            jk = me()
            if jk is None:  # k.__call__ kept, k itself dropped
                raise LaunchError(f"@{name}: this entry outlived its JitKernel; call the JitKernel")
            return jk._call(kwargs, stream)
        self._binder = ArgumentBinder(self.name, self.params, self.tmaps, self._grid, argument_layout(self.abi)[1],
                                      checked)
        self._entry = self._binder.entry
        self._by_key = {}      # tuple of per-tensor spec keys -> CompiledKernel

    # -- compilation -----------------------------------------------------------------------------------------
    def compile(self, spec=None):
        """The compiled kernel (``ptxgen.lower.Compiled``) for ``spec`` (default generic), no device needed.

        Looked up in the process-wide dict, then in the disk cache (``ptxgen.runtime.cache``: a hit neither lowers
        nor runs nvJitLink, and says so with ``.from_cache``), and only then lowered, compiled and stored in both.
        Post: the same object for the same (IR, spec, arch, options) for the rest of the process."""
        return self._kernels.compile(spec if spec is not None else self._Specialization.generic())

    def _specialization_of(self, keys):
        names = [p[0] for p in self.params if p[1] == TENSOR]
        return self._Specialization(tuple(
            (n, self._TensorSpec(*k) if k is not None else self._TensorSpec()) for n, k in zip(names, keys)))

    def _load(self, spec) -> CompiledKernel:
        return self._kernels.load(spec)

    def _load_keys(self, keys) -> CompiledKernel:
        ck = self._by_key.get(keys)
        if ck is None:
            ck = self._by_key[keys] = self._kernels.load(self._specialization_of(keys))
        return ck

    # -- inspection (no device needed) ---------------------------------------------------------------------------
    def specialization(self, *args, **kwargs):
        """The Specialization a call with these arguments would compile for (no device needed)."""
        bound = self._binder.bind(self._binder.arguments(args, kwargs), dry=True)
        return self._specialization_of(bound.keys)

    def argument_values(self, *args, **kwargs) -> list:
        """The kernel parameter values a call would pass, in ABI order (no device needed; numpy arrays get 0)."""
        return self._binder.bind(self._binder.arguments(args, kwargs), dry=True).values

    def grid(self, *args, **kwargs) -> tuple:
        """The grid a call with these arguments would launch (no device needed)."""
        kwargs = self._binder.arguments(args, kwargs)
        return self._grid.of(kwargs, self._binder.bind(kwargs, dry=True).shapes)

    # -- launch ----------------------------------------------------------------------------------------------
    def prepare(self, *args, stream=0, **kwargs) -> BoundLaunch:
        """A call site: the arguments bound, the specialization resolved, the grid evaluated and every parameter
        packed once. ``site()`` relaunches with the same arguments (only ``cuLaunchKernelEx``);
        ``site(x=x2, ...)`` swaps device tensors of the same type, device, shape, strides and 16-byte alignment
        class, rewriting only their slots. Device tensors only (numpy arrays would need a copy per call)."""
        kwargs = self._binder.arguments(args, kwargs)
        bound = self._binder.bind(kwargs, host="prepare() needs device tensors")
        grid = self._grid.of(kwargs, bound.shapes)
        ck = self._load_keys(bound.keys)
        self._binder.check_devices(bound, ck.device)
        if stream:
            stream = getattr(stream, "cuda_stream", stream)
        return BoundLaunch(self, ck, bound, grid, stream, kwargs)

    # ``k(x=..., z=..., n=...)`` runs the kernel's generated entry (``binding.ArgumentBinder.entry``: parameters
    # named as the kernel's, ``stream=`` a CUstream, its handle or a torch.cuda.Stream) with no frame in between: a
    # ``def __call__(self, *args, **kwargs)`` would rebuild the keywords into a dict and look each one up again, a
    # noticeable part of a cached call's host time
    __call__ = property(operator.attrgetter("_entry"), doc="The kernel's entry: k(x=..., n=..., stream=0) launches.")

    @property
    def __signature__(self):
        """What ``inspect.signature(k)`` shows (it cannot see through the ``__call__`` property): the entry's, the
        kernel's parameters then ``*args, stream=0, **extra``."""
        import inspect

        return inspect.signature(self._entry)

    def _call(self, kwargs, stream) -> None:
        """The checked path of a call: bind and check every argument, evaluate and check the grid, load the
        specialization, launch (through the signature's binding, made or refreshed here, or — with host arrays —
        from the kernel's own block) and copy host arrays the kernel stores to back."""
        binder = self._binder
        kwargs = binder.arguments((), kwargs)
        bound = binder.bind(kwargs)
        grid = self._grid.of(kwargs, bound.shapes)
        if not (grid[0] and grid[1] and grid[2]):  # an empty problem: nothing to launch
            return
        ck = self._load_keys(bound.keys)
        binder.check_devices(bound, ck.device)
        try:
            if bound.signature is None:
                ck.launch(bound.values, grid, stream)
            else:
                binder.binding(bound, ck).launch(grid, stream)
        except (CudaError, OverflowError, TypeError) as exc:
            raise LaunchError(f"@{self.name}: launch failed: {exc}") from exc
        for name, host, buf, device_shape in bound.copies:
            if name not in self.written:
                continue
            try:
                out = buf.to_numpy(host.dtype, device_shape)
            except CudaError as exc:
                raise LaunchError(f"@{self.name}: the kernel faulted (seen copying {name} back): {exc}") from exc
            host[...] = out[..., :host.shape[-1]] if device_shape != host.shape else out


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
    lark and the verifier (most of a cold parse's time).

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
