"""A prepared call site of a kernel (``JitKernel.prepare``): arguments bound, specialization resolved, grid evaluated
and every parameter packed once into the site's own argument block.

>>> site = k.prepare(x=x, z=z, n=n)      # doctest: +SKIP
>>> site()                               # only cuLaunchKernelEx                        # doctest: +SKIP
>>> site(x=x2, z=z2)                     # rewrites the pointer slots of x and z       # doctest: +SKIP
"""
from __future__ import annotations

from .binding import ITEMSIZE, SCALAR, TMAP, read_tensor
from .kernel_launch import TMAP_BYTES, LaunchError

__all__ = ["BoundLaunch"]


class BoundLaunch:
    """A prepared call site of a JitKernel (see ``JitKernel.prepare``). ``arguments``: name → the object each
    parameter launches with (the site holds them: their device memory lives as long as the site). ``site()``
    relaunches; ``site(x=x2, ...)`` swaps device tensors of the same type, device, shape, strides and — when the
    kernel was specialized for an aligned one — 16-byte alignment, rewriting only their slots (a tensor map's 128
    bytes re-derived, from the kernel's cache per address). Anything else is a LaunchError: "prepare() again"."""

    def __init__(self, jk, ck, bound, grid, stream, arguments):
        self.kernel, self.compiled, self._binder = jk, ck, jk._binder
        self.grid, self.stream = grid, stream
        # the packed block holds raw device addresses: the site keeps the tensors they belong to alive, so that a
        # caller dropping its own reference (a workspace made inline) cannot free memory the kernel still uses
        self.arguments = dict(arguments)
        # the argument block is private to this call site: pack it once, launch from it
        self._launch = ck.new_launch()
        self._launch.pack(bound.values)
        offsets = ck.layout.offsets
        # tensor parameter -> (kind, element size, byte offset, (shape, strides, type, place) bound, aligned kernel)
        self._slots = {}
        slot, tensor = 0, 0
        for name, kind, dtype, rank in jk.params:
            if kind == SCALAR:
                slot += 1
                continue
            aligned = False
            if kind != TMAP:
                key = bound.keys[tensor]
                aligned = key is not None and key[1]
                tensor += 1
            reading = bound.readings[name]
            self._slots[name] = (kind, ITEMSIZE[dtype], offsets[slot], reading[1:], aligned)
            slot += 1 if kind == TMAP else 1 + 2 * rank
        self._launch.configure(grid, stream)

    @property
    def block_launch(self):
        """The site's ``BlockLaunch``: its argument block (``bytes``, ``u64``), launch config and ``cu_launch``. A
        caller that rewrites slots itself (``tensor_slot``) launches with ``cu_launch(cfg, handle, address, 0)``."""
        return self._launch

    def tensor_slot(self, name: str) -> tuple:
        """(kind, byte offset) of tensor parameter ``name`` in the argument block: kind ``"gtensor"`` (its 8-byte
        pointer at the offset; extents and strides after it stay as bound) or ``"tmap"`` (its 128-byte map). E.g.
        a GEMM site's ``tensor_slot("a")`` → ``("tmap", 0)``. Raises LaunchError for a name that is not one."""
        try:
            kind, _itemsize, offset, _bound, _aligned = self._slots[name]
        except KeyError:
            raise LaunchError(f"@{self.kernel.name}: {name} is not a tensor parameter") from None
        return kind, offset

    def tensor_map(self, name: str, ptr: int) -> bytes:
        """The 128 bytes of tmap parameter ``name``'s map over the tensor the site was prepared with (its shape and
        strides) moved to address ``ptr``: what ``site(name=t)`` writes for a tensor ``t`` at ``ptr`` of the same
        signature (encoded once per address, the kernel's cache)."""
        _kind, _itemsize, _offset, bound, _aligned = self._slots[name]
        return self._binder.tensor_map(name, ptr, bound[0], bound[1], False)

    def __call__(self, **tensors) -> None:
        if not (self.grid[0] and self.grid[1] and self.grid[2]):  # an empty problem: nothing to launch
            return
        for name, a in tensors.items():
            try:
                kind, itemsize, offset, bound, aligned = self._slots[name]
            except KeyError:
                raise LaunchError(f"@{self.kernel.name}: {name} is not a tensor parameter") from None
            reading = read_tensor(a, itemsize)
            if reading is None:
                raise LaunchError(f"@{self.kernel.name}: {name} is not a device tensor; a prepared call takes "
                                  f"device tensors, not {type(a).__name__}")
            ptr, shape, strides, token, place = reading
            # the prepared kernel holds for the same type, place, shape and strides, and, if it was specialized for
            # a 16-byte aligned tensor, an aligned address
            if (shape, strides, token, place) != bound or (aligned and ptr & 15):
                raise LaunchError(f"@{self.kernel.name}: {name} differs from the prepared call's tensor (shape "
                                  f"{tuple(shape)}, strides {tuple(strides)}, type {token}, address {ptr:#x}; "
                                  f"prepared: shape {tuple(bound[0])}, strides {tuple(bound[1])}, type {bound[2]}"
                                  f"{', 16-byte aligned' if aligned else ''}); prepare() again")
            if kind == TMAP:
                blob = self._binder.tensor_map(name, ptr, shape, strides, False)
                self._launch.bytes[offset:offset + TMAP_BYTES] = blob
            else:
                self._launch.u64[offset // 8] = ptr
            self.arguments[name] = a
        b = self._launch
        err = b.cu_launch(b.cfg, b.handle, b.address, 0)[0]
        if err:
            b.failed(err)
