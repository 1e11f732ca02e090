"""Kernel specializations: what the launcher reads off the actual global-tensor arguments.

Like Triton's specialization on pointer alignment and divisibility, a kernel is compiled once per distinct
``Specialization``. Per ``gtensor`` parameter a ``TensorSpec`` records

- ``contiguous``: the mode whose stride is 1 (among modes of extent > 1), or None: the lowering may then drop that
  mode's stride and vectorize along it;
- ``aligned``: the base address and the byte strides of every other mode of extent > 1 are multiples of 16 bytes,
  so an access whose contiguous-mode coordinate is a multiple of k is (k × element size)-byte aligned;
- ``extent_multiple``: the largest power of two ≤ 16 dividing the contiguous mode's extent: a vector of k elements
  (k | extent_multiple) starting at a multiple of k is either wholly inside or wholly outside the tensor, so one
  predicate per vector is exact even for ragged sizes;
- ``broadcast``: the modes of extent > 1 whose stride is 0 (an expanded view: a bias row repeated down the rows): a
  gmem.load reads each distinct element of such a view once per thread (``lower.gmem``).

``Specialization.generic()`` (every field unknown) compiles a kernel correct for any arguments (scalar accesses).
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_VECTOR_BYTES = 16


@dataclass(frozen=True)
class TensorSpec:
    """What is known about one gtensor argument. The default knows nothing (always correct)."""

    contiguous: int | None = None
    aligned: bool = False
    extent_multiple: int = 1
    broadcast: tuple = ()

    @staticmethod
    def of(address: int, shape, strides, itemsize: int) -> "TensorSpec":
        """The specialization of a tensor at ``address`` (bytes) with ``shape`` and ``strides`` (elements)."""
        contiguous = None
        for m in range(len(shape)):
            if shape[m] > 1 and strides[m] == 1:
                contiguous = m  # the last such mode (row-major innermost) when several qualify
        if contiguous is None:
            return _GENERIC
        aligned = address % MAX_VECTOR_BYTES == 0 and all(
            (strides[m] * itemsize) % MAX_VECTOR_BYTES == 0
            for m in range(len(shape)) if m != contiguous and shape[m] > 1)
        extent = int(shape[contiguous])
        multiple = 1
        while multiple < MAX_VECTOR_BYTES and extent % (multiple * 2) == 0:
            multiple *= 2
        broadcast = tuple(m for m in range(len(shape)) if shape[m] > 1 and strides[m] == 0)
        return TensorSpec(contiguous, aligned, multiple, broadcast)

    def __str__(self) -> str:
        if self.contiguous is None:
            return "generic"
        text = f"c{self.contiguous}{'a' if self.aligned else 'u'}{self.extent_multiple}"
        return text + "".join(f"b{m}" for m in self.broadcast)


_GENERIC = TensorSpec()


@dataclass(frozen=True)
class Specialization:
    """Per gtensor parameter name, its TensorSpec (missing names are generic). Hashable: a cache key."""

    tensors: tuple = ()  # ((name, TensorSpec), ...) in parameter order

    def __getitem__(self, name: str) -> TensorSpec:
        for n, s in self.tensors:
            if n == name:
                return s
        return _GENERIC

    @classmethod
    def generic(cls) -> "Specialization":
        return cls(())

    @classmethod
    def of(cls, **specs) -> "Specialization":
        """``Specialization.of(x=TensorSpec(0, True, 16), z=...)``."""
        return cls(tuple(specs.items()))

    def __str__(self) -> str:
        return ",".join(f"{n}:{s}" for n, s in self.tensors) or "generic"

    def pattern(self) -> "Specialization":
        """This specialization without its extent multiples (each 1): what a kernel's vector accesses depend on. The
        widest access on each tensor (``Compiled.vector_widths``) is the same for every specialization of one
        pattern."""
        return Specialization(tuple((n, TensorSpec(s.contiguous, s.aligned, 1)) for n, s in self.tensors))

    def canonical(self, vector_widths: dict) -> "Specialization":
        """The specialization whose code equals this one's for a kernel whose widest vector access per tensor is
        ``vector_widths`` (``Compiled.vector_widths`` of any specialization of this ``pattern``): each extent
        multiple capped at the tensor's widest access (1 without one). The lowering reads an extent multiple only
        through "is it a multiple of this access's width" (a power of two no wider than the widest), which the cap
        keeps. ``c:c1a16`` with ``{"c": 2}`` → ``c:c1a2``; with ``{}`` → ``c:c1a1``. Post: compiling the result
        gives the same code as compiling ``self``."""
        return Specialization(tuple(
            (n, TensorSpec(s.contiguous, s.aligned, min(s.extent_multiple, vector_widths.get(n, 1))))
            for n, s in self.tensors))


@dataclass(frozen=True)
class Slot:
    """One kernel parameter of the lowered ABI: ``param`` (IR name), ``kind`` (``ptr``, ``extent``, ``stride``,
    ``scalar``, ``tmap``), ``mode`` (for extents/strides), ``abi`` (``ptr`` u64, ``i32``, ``i64``, ``f32``, ``i16``,
    ``tmap``: 128 bytes by value, 64-byte aligned) and the element (scalar) type name."""

    param: str
    kind: str
    mode: int = 0
    abi: str = "i32"
    dtype: str = ""


_SCALAR_ABI = {"i1": "i32", "i32": "i32", "u32": "i32", "i64": "i64", "u64": "i64", "f32": "f32", "f16": "i16",
               "bf16": "i16", "e4m3": "i32", "e5m2": "i32"}


def kernel_abi(kernel) -> list:
    """The lowered kernel's parameters, in order: a ``gtensor<T, R>`` is a global pointer, R i32 extents and R i64
    strides (in elements); a scalar is passed by value (i1 and fp8 widened to i32, f16/bf16 as their 16 bits); a
    ``tmap<T, R>[box]`` is its CUtensorMap, 128 bytes by value (``.param .align 64 .b8 name[128]``).

    Example: ``@tma_copy(%x: tmap<f32, 2>[...], %y: tmap<f32, 2>[...], %m: i32, %n: i32)`` → slots
    ``tmap x, tmap y, i32 m, i32 n``. Post: one slot per LLVM kernel argument, in order."""
    from ..ir.types import GlobalTensorType, ScalarType, TensorMapType

    slots = []
    for p in kernel.params:
        if isinstance(p.type, GlobalTensorType):
            slots.append(Slot(p.name, "ptr", 0, "ptr", p.type.dtype.name))
            slots += [Slot(p.name, "extent", m, "i32") for m in range(p.type.rank)]
            slots += [Slot(p.name, "stride", m, "i64") for m in range(p.type.rank)]
        elif isinstance(p.type, ScalarType):
            slots.append(Slot(p.name, "scalar", 0, _SCALAR_ABI[p.type.name], p.type.name))
        elif isinstance(p.type, TensorMapType):
            slots.append(Slot(p.name, "tmap", 0, "tmap", p.type.dtype.name))
        else:
            slots.append(Slot(p.name, "unsupported", 0, "", str(p.type)))
    return slots
