"""Binding a call's arguments to a kernel's parameters: reading tensors of any framework, checking them, packing
them, and the per-signature binding cache that makes a repeated call cheap.

A tensor argument (of a ``gtensor`` or ``tmap`` parameter) is read as ``(pointer, shape, element strides, type,
place)``:

- a torch tensor through ``data_ptr()``, ``shape``, ``stride()``, ``dtype``, ``device`` (a CPU one as its numpy
  view, copied like a numpy array);
- a ``DeviceBuffer.from_numpy`` buffer through its address, shape and dtype;
- anything else on the device through ``__cuda_array_interface__`` (cupy, numba) or, failing that, its DLPack
  capsule (``__dlpack__`` with a CUDA ``__dlpack_device__``, e.g. JAX; ``dlpack.dlpack_view``);
- a numpy array (of exactly its element type's host dtype, ``ptxgen.ir.host_dtypes``) is copied to a new device
  buffer and, when the kernel stores to it, back (``copies``).

The **signature** of a call is, per tensor argument, (type, place, shape, strides, 16-byte aligned address); scalars
are not part of it. Everything that depends only on the signature is checked and computed once, the first time a
signature is seen (``ArgumentBinder.bind``): the element type against the parameter's, the rank, the device, the
specialization key (``spec_key``: ``TensorSpec.of`` as a tuple), the compiled kernel, and a binding: a
``BlockLaunch`` (an argument block and a launch config of its own) with every extent and stride packed. A call
whose signature has been seen runs the binder's generated ``entry``: per tensor the five attribute reads (torch)
or one interface read, one dict lookup, the grid expressions, and writes of the pointer and scalar slots only; a
tensor map's 128 bytes come from the binding's cache per address. Anything else — an unseen signature, a host
array, an invalid or empty grid, a value that does not fit its slot — takes the checked path, which raises the
errors. The entry is what ``k(...)`` calls: its parameters are the kernel's, so keywords bind without a dict.
"""
from __future__ import annotations

import functools
import keyword
import re
import struct

from .dlpack import DL_CUDA, DL_CUDA_MANAGED, DLPACK_DTYPE, c_strides, dlpack_view
from .driver import DeviceBuffer
from .kernel_launch import TMAP_BYTES, LaunchError
from .tensor_map import encode_tensor_map

__all__ = ["ArgumentBinder", "BoundArguments", "ITEMSIZE", "read_device_tensor", "read_tensor",
           "scalar_value", "spec_key"]

# typestr of a CUDA-array-interface tensor (cupy, numba): the interface has no bf16 or fp8 type, so producers offer
# bf16 as 2 opaque bytes and fp8 as bytes; numpy arrays are checked against ptxgen.ir.host_dtypes instead
NUMPY_TYPESTR = {"f32": "f4", "f16": "f2", "i32": "i4", "u32": "u4", "i64": "i8", "u64": "u8", "i1": "b1",
                 "e4m3": "u1", "e5m2": "u1", "bf16": "V2"}
TORCH_DTYPE = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.int32": "i32",
               "torch.int64": "i64", "torch.uint32": "u32", "torch.uint64": "u64", "torch.bool": "i1",
               "torch.float8_e4m3fn": "e4m3", "torch.float8_e5m2": "e5m2"}
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8, "i1": 1, "e4m3": 1,
            "e5m2": 1}
CUDA_ARRAY_INTERFACE = "cuda array interface"  # the place of a __cuda_array_interface__ tensor
DEVICE_BUFFER = "device buffer"                # the place of a DeviceBuffer.from_numpy buffer
BYTE_STRIDES = "byte strides"                  # the type of a CUDA-array-interface view strided in part elements
SCALAR, TENSOR, TMAP = "scalar", "gtensor", "tmap"
_INTEGER_SCALARS = ("i32", "u32", "i64", "u64")
MAX_BINDINGS = 1024       # signatures kept per kernel: a caller of ever new shapes must not grow memory unbounded
MAX_MAPS = 64             # tensor maps kept per binding (per address) and per tmap parameter (per address, shape)
_TORCH_TYPES = set()      # tensor types read as torch tensors (data_ptr / shape / stride() / dtype / device)
_PACK_F32 = struct.Struct("<f").pack_into
_MISSING = type("Missing", (), {"__repr__": lambda self: "MISSING"})()  # a parameter the call did not give
_GENERATED_NAME = re.compile(r"[apstkdvm][0-9]+|g[xyz]?|[rb]|bad|err|kw|args|extra|stream|call")  # the entry's locals


def scalar_value(value, dtype: str):
    """The ABI value of a scalar argument of element type ``dtype`` (see ``ptxgen.lower.specialize.kernel_abi``):
    ints for the integer types, the float for f32, ``1``/``0`` for i1, the rounded-to-nearest-even bits for f16,
    bf16 and (saturating) fp8. ``scalar_value(1.0, "bf16")`` → ``0x3f80``; ``scalar_value(2**32 - 1, "u32")`` →
    ``-1`` (the slot is a signed i32: same bits)."""
    if dtype == "i32" or dtype == "i64":
        return int(value)
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


# rounding a number to bf16/f16/fp8 bits goes through numpy: a kernel called with the same scale every time pays
# for it once
_remembered_bits = functools.lru_cache(maxsize=256)(scalar_value)


def _cached_scalar_bits(value, dtype: str) -> int:
    if value == 0:  # 0.0 and -0.0 are equal and hash alike, but their bits differ
        return scalar_value(value, dtype)
    return _remembered_bits(value, dtype)


def spec_key(ptr, shape, strides, itemsize):
    """``TensorSpec.of`` as a plain tuple (contiguous mode, aligned, extent multiple, broadcast modes), or None for
    generic: a (1000,) f32 tensor at 0x10000 with stride 1 → ``(0, True, 8, ())``; a bias row expanded to (64, 1000)
    (strides (0, 1)) → ``(1, True, 8, (0,))``."""
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
    broadcast = tuple(m for m in range(len(shape)) if shape[m] > 1 and strides[m] == 0)
    return c, aligned, (16 if low == 0 or low > 16 else low), broadcast


def _is_torch_like(a) -> bool:
    """A torch tensor, or anything read like one: data_ptr(), stride(), shape, dtype, device and is_cuda."""
    t = type(a)
    return (t in _TORCH_TYPES or (hasattr(t, "data_ptr") and hasattr(t, "stride") and hasattr(a, "is_cuda")
                                  and hasattr(a, "device") and hasattr(a, "dtype") and hasattr(a, "shape")))


def _torch_cpu_numpy(t):
    """The numpy view (sharing memory) of a CPU torch tensor. torch hands no bf16 or fp8 tensor to numpy, so those
    come as ml_dtypes views of their bits: a CPU ``torch.bfloat16`` tensor → an ``ml_dtypes.bfloat16`` array."""
    ours = TORCH_DTYPE.get(str(t.dtype))
    if ours in ("bf16", "e4m3", "e5m2"):
        import torch

        from ..ir.host_dtypes import host_dtype

        return t.view(torch.int16 if ours == "bf16" else torch.uint8).numpy().view(host_dtype(ours))
    return t.numpy()


def read_device_tensor(a, itemsize: int):
    """(pointer, shape, element strides, type, place) of a device tensor that is not read like a torch tensor, or
    None (a host array, or not an array at all). ``type`` is what the tensor says its elements are (a numpy dtype
    for a DeviceBuffer, the typestr of a CUDA-array-interface tensor, DLPack's (code, bits)) and ``place`` says how
    it was read (``DEVICE_BUFFER``, ``CUDA_ARRAY_INTERFACE``, or DLPack's (device type, device id)): a cupy f32
    (4, 8) array → ``(ptr, (4, 8), (8, 1), '<f4', 'cuda array interface')``. ``itemsize``: the parameter's element
    size, to turn byte strides into element strides."""
    if isinstance(a, DeviceBuffer):
        shape = getattr(a, "shape", None)
        if shape is None:
            return None
        shape = tuple(shape)
        return a.ptr, shape, c_strides(shape), a.dtype, DEVICE_BUFFER
    try:
        cai = getattr(a, "__cuda_array_interface__", None)
    except (KeyError, TypeError, ValueError):
        # the interface has no typestr for some element types (torch's float8 raises KeyError): DLPack has codes
        cai = None
    if cai is not None:
        shape = tuple(cai["shape"])
        st = cai.get("strides")
        typestr = cai["typestr"]
        if st is None:
            strides = c_strides(shape)
        elif any(x % itemsize for x in st):  # a view no element stride describes: its type says so, refused
            return int(cai["data"][0]), shape, tuple(st), (BYTE_STRIDES, typestr), CUDA_ARRAY_INTERFACE
        else:
            strides = tuple(x // itemsize for x in st)
        return int(cai["data"][0]), shape, strides, typestr, CUDA_ARRAY_INTERFACE
    device = getattr(a, "__dlpack_device__", None)
    if device is not None:
        where = tuple(device())
        if where[0] in (DL_CUDA, DL_CUDA_MANAGED):
            ptr, shape, strides, code_bits = dlpack_view(a)
            return ptr, shape, strides, code_bits, where
    return None


def read_tensor(a, itemsize: int):
    """``read_device_tensor``, or for a tensor of a type already read as torch its five attributes (data_ptr(),
    shape, stride(), dtype, device): the reading the fast path compares with a bound one. None for a host array."""
    if type(a) in _TORCH_TYPES:
        return a.data_ptr(), a.shape, a.stride(), a.dtype, a.device
    return read_device_tensor(a, itemsize)


class BoundArguments:
    """One call's arguments, bound and checked (``ArgumentBinder.bind``): ``values`` (ABI order), ``keys`` (per
    gtensor, its ``spec_key``), ``shapes`` (name → shape of every tensor argument), ``copies`` (host arrays: (name,
    array, DeviceBuffer, device shape)), ``signature`` (None when there are copies), ``places`` ((name, place) per
    device tensor, for the device check), ``maps`` ((tmap index, pointer, 128 bytes) per tensor map) and
    ``readings`` (name → (pointer, shape, strides, type, place))."""

    __slots__ = ("values", "keys", "shapes", "copies", "signature", "places", "maps", "readings")

    def __init__(self, values, keys, shapes, copies, signature, places, maps, readings):
        self.values, self.keys, self.shapes, self.copies = values, keys, shapes, copies
        self.signature, self.places, self.maps, self.readings = signature, places, maps, readings


class ArgumentBinder:
    """The argument binding of one kernel: ``params`` ((name, kind, element type, rank) per parameter: kind
    ``gtensor``, ``tmap`` or ``scalar``), ``tmaps`` (name → (TensorMapType, the static TmaParams the lowering
    assumed)), ``bindings`` (signature → its ``BlockLaunch``) and ``entry(*args, stream=0, **kwargs)`` (generated from
    ``grid``, a ``LaunchGrid``, and ``abi_offsets``, the byte offset of each ABI slot; ``checked(kwargs, stream)``
    is the caller's checked path, which the entry takes for anything but a known signature)."""

    def __init__(self, name: str, params, tmaps, grid, abi_offsets, checked):
        self.name = name
        self.params = list(params)
        self.tmaps = tmaps
        self.order = tuple(p[0] for p in self.params)
        self.names = frozenset(self.order)
        self.bindings = {}
        self._tmap_cache = {n: {} for n in tmaps}  # name -> {(ptr, shape, strides): 128 bytes}
        self._tmap_index = {n: j for j, n in enumerate(p[0] for p in self.params if p[1] == TMAP)}
        scope = {"torch_types": _TORCH_TYPES, "read_device": read_device_tensor, "bindings": self.bindings,
                 "pack_f32": _PACK_F32, "scalar_bits": _cached_scalar_bits, "int": int, "float": float, "min": min,
                 "type": type, "KeyError": KeyError, "Exception": Exception, "len": len, "getattr": getattr,
                 "MISSING": _MISSING, "checked": checked, "unusual": self._unusual_call, "positional": self.positional}
        # keyword arguments bind straight to the parameters' names where Python can spell them; otherwise (a name
        # that is a Python keyword, or one the generated code uses itself) they come as a dict
        self.named = all(n.isidentifier() and not keyword.iskeyword(n) and not _GENERATED_NAME.fullmatch(n)
                         and n not in scope for n in self.order)
        self.entry_source = self._entry_source(grid, abi_offsets, self.named)
        exec(compile(self.entry_source, f"<ptxgen binder of @{name}>", "exec"), scope)  # from the IR's params only
        self.entry = scope["call"]
        self._checked = checked

    def _unusual_call(self, values, args, extra, stream):
        """The named entry's way to the checked path for a call it cannot bind itself: more positional arguments
        than parameters, a parameter not given (``values``: MISSING), an unknown keyword (``extra``)."""
        if args:
            raise LaunchError(f"@{self.name}: takes {len(self.order)} arguments, got {len(self.order) + len(args)}")
        kwargs = {name: v for name, v in zip(self.order, values) if v is not _MISSING}
        kwargs.update(extra)
        return self._checked(kwargs, stream)

    # -- names ------------------------------------------------------------------------------------------------
    def positional(self, args, kwargs) -> dict:
        """name → argument of ``k(*args, **kwargs)`` (positional arguments in parameter order, keywords over
        them); names unchecked but for too many (``arguments`` checks the rest). Raises LaunchError for too many."""
        if len(args) > len(self.order):
            raise LaunchError(f"@{self.name}: takes {len(self.order)} arguments, got {len(args)}")
        named = dict(zip(self.order, args))
        if kwargs:
            named.update(kwargs)
        return named

    def arguments(self, args, kwargs) -> dict:
        """name → argument of a call ``k(*args, **kwargs)`` (positional arguments in parameter order). Raises
        LaunchError for too many, missing or unknown arguments."""
        if args:
            kwargs = self.positional(args, kwargs)
        if len(kwargs) != len(self.params) or not self.names.issuperset(kwargs):
            missing = sorted(self.names - set(kwargs))
            if missing:
                raise LaunchError(f"@{self.name}: missing argument {', '.join(missing)}")
            raise LaunchError(f"@{self.name}: unknown arguments {', '.join(sorted(set(kwargs) - self.names))}")
        return kwargs

    # -- the checked path ---------------------------------------------------------------------------------------
    def bind(self, kwargs, dry: bool = False, host: str | None = None) -> BoundArguments:
        """Read and check every argument of ``kwargs`` (names already checked: ``arguments``). Host arrays are
        copied to the device (``copies``) or, when ``dry``, given address 0 (cuMemAlloc's alignment) without
        touching the device; ``dry`` tensor maps are checked, not encoded (128 zero bytes). ``host``: refuse host
        arrays instead, with this LaunchError text after ``@name:`` and before ``; x is a host array``."""
        values, keys, shapes, copies, signature, places, maps, readings = [], [], {}, [], [], [], [], {}
        for name, kind, dtype, rank in self.params:
            a = kwargs[name]
            if kind == SCALAR:
                try:
                    values.append(scalar_value(a, dtype))
                except (TypeError, ValueError, OverflowError) as exc:
                    raise LaunchError(f"@{self.name}: argument %{name} = {a!r} is not a number for its {dtype} "
                                      f"parameter: {exc}") from None
                continue
            reading = self.read(name, a, dtype, rank, copies, dry, pitch=kind == TMAP, host=host)
            ptr, shape, strides, token, place = readings[name] = reading
            signature += (token, place, shape, strides, not ptr & 15)
            if place is not None and not isinstance(place, str):  # a torch device or DLPack's (type, id)
                places.append((name, place))
            shapes[name] = shape
            if kind == TMAP:
                blob = self.tensor_map(name, ptr, shape, strides, dry)
                values.append(blob)
                maps.append((self._tmap_index[name], ptr, blob))
            else:
                values.append(ptr)
                values.extend(shape)
                values.extend(strides)
                keys.append(spec_key(ptr, shape, strides, ITEMSIZE[dtype]))
        return BoundArguments(values, tuple(keys), shapes, copies, None if copies else tuple(signature), places,
                              maps, readings)

    def read(self, name, a, dtype, rank, copies, dry, pitch=False, host=None):
        """(pointer, shape, element strides, type, place) of tensor argument ``a`` of parameter ``name``, its type
        checked against ``dtype`` and its rank against ``rank``. A host array is copied to a new device buffer
        (recorded in ``copies``; place None) or, when ``dry``, given address 0; with ``pitch`` (a tensor map's
        tensor) the device copy's rows are padded to a multiple of 16 bytes; with ``host`` it is refused."""
        reading = None
        if _is_torch_like(a):
            if a.is_cuda:
                if TORCH_DTYPE.get(str(a.dtype)) != dtype:
                    self._wrong_dtype(name, str(a.dtype), dtype)
                _TORCH_TYPES.add(type(a))
                reading = a.data_ptr(), a.shape, a.stride(), a.dtype, a.device
            elif type(a).__module__.startswith("torch"):  # a CPU tensor: its numpy view (shares memory)
                a = _torch_cpu_numpy(a)
        else:
            reading = read_device_tensor(a, ITEMSIZE[dtype])
            if reading is not None:
                self._check_type(name, reading[3], reading[4], dtype)
        if reading is None:
            reading = self._host(name, a, dtype, copies, dry, pitch, host)
        if len(reading[1]) != rank:
            raise LaunchError(f"@{self.name}: argument {name} has rank {len(reading[1])}, the kernel wants {rank}")
        return reading

    def _host(self, name, a, dtype, copies, dry, pitch, refuse):
        import numpy as np

        if not isinstance(a, np.ndarray):
            raise LaunchError(f"@{self.name}: argument {name} must be an array (numpy, torch, cupy), "
                              f"not {type(a).__name__}")
        if refuse:
            raise LaunchError(f"@{self.name}: {refuse}; {name} is a host array")
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
        return ptr, tuple(host.shape), c_strides(device_shape), host.dtype, None

    def _check_type(self, name, token, place, dtype) -> None:
        """Raise unless a device tensor read through ``place`` with element type ``token`` suits ``dtype``."""
        if place == DEVICE_BUFFER:
            self._check_host_dtype(name, token, dtype)
        elif place == CUDA_ARRAY_INTERFACE:
            if isinstance(token, tuple):  # (BYTE_STRIDES, typestr)
                raise LaunchError(f"@{self.name}: argument {name}: its byte strides are not multiples of the "
                                  f"{dtype} element size {ITEMSIZE[dtype]} (CUDA array interface)")
            if token[1:] != NUMPY_TYPESTR[dtype]:
                self._wrong_dtype(name, f"typestr {token!r} (CUDA array interface)", dtype)
        elif DLPACK_DTYPE.get(token) != dtype:
            self._wrong_dtype(name, f"DLPack type (code, bits) {token}", dtype)

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

    def check_devices(self, bound: BoundArguments, device: int) -> None:
        """Raise unless every device tensor of ``bound`` lives on device ``device`` (the loaded kernel's): a torch
        tensor on ``cuda:1`` or a DLPack tensor of device id 1 for a kernel loaded on device 0 is refused (its
        memory is not this context's). CUDA-array-interface tensors and DeviceBuffers say no device."""
        for name, place in bound.places:
            index = place[1] if isinstance(place, tuple) else getattr(place, "index", None)
            if index is None:  # a device that names no index: the current one
                continue
            if index != device:
                raise LaunchError(f"@{self.name}: argument {name} is on {place}, but the kernel runs on device "
                                  f"{device} (cuda:{device}): move it there first")

    def tensor_map(self, name, ptr, shape, strides, dry):
        """The 128 bytes of the CUtensorMap for tmap parameter ``name`` over the tensor at ``ptr`` with ``shape``
        and ``strides``: cached per (address, shape, strides); ``dry``: derived and checked, not encoded."""
        cache = self._tmap_cache[name]
        key = (ptr, tuple(shape), tuple(strides))
        blob = cache.get(key)
        if blob is None:
            blob = encode_tensor_map(self.name, name, ptr, key[1], key[2], *self.tmaps[name], encode=not dry)
            if not dry:
                if len(cache) >= MAX_MAPS:
                    cache.clear()
                cache[key] = blob
        return blob

    def binding(self, bound: BoundArguments, compiled):
        """The binding of ``bound``'s signature — a ``BlockLaunch`` of ``compiled`` with ``maps`` (per tmap
        parameter, address → 128 bytes) — made on its first call, its block packed with ``bound.values`` and
        ``bound``'s tensor maps remembered: later calls of this signature take the entry's fast path. A pack that fails
        (LaunchError) leaves the binding as it was."""
        binding = self.bindings.get(bound.signature)
        if binding is None:
            binding = compiled.new_launch()
            binding.maps = [{} for _ in self._tmap_index]
            binding.pack(bound.values)
            if len(self.bindings) >= MAX_BINDINGS:
                self.bindings.clear()
            self.bindings[bound.signature] = binding
        else:
            binding.pack(bound.values)
        for index, ptr, blob in bound.maps:
            maps = binding.maps[index]
            if len(maps) >= MAX_MAPS:
                maps.clear()
            maps[ptr] = blob
        return binding

    # -- the generated entry ----------------------------------------------------------------------------------
    def _entry_source(self, grid, offsets, named: bool) -> str:
        """Python source of ``call``, the function ``k(...)`` runs: the fast path of a known signature, or — for
        anything else — the checked path (``checked(kwargs, stream)``). With ``named`` its parameters are the
        kernel's (``call(x=MISSING, z=MISSING, n=MISSING, *args, stream=0, **extra)``), else ``call(*args,
        stream=0, **kw)``. E.g. for ``@sqrt_sin(%x: gtensor<f32, 1>, %z: gtensor<f32, 1>, %n: i32)`` it reads x and
        z, looks up ``(k0, d0, s0, t0, not p0 & 15, k1, d1, s1, t1, not p1 & 15)``, evaluates ``v2 = int(a2)``,
        ``gx = (-(-(v2) // (1024)))``, checks ``0 < gx <= 2147483647``, writes ``b.u64[0] = p0``, ``b.u64[3] =
        p1``, ``b.i32[12] = v2`` and launches ``b.address`` with the binding's launch config (``BlockLaunch``)."""
        index = {p[0]: i for i, p in enumerate(self.params)}
        first_slot, slot = [], 0  # the first ABI slot of each parameter
        for _, kind, _, rank in self.params:
            first_slot.append(slot)
            slot += 1 + 2 * rank if kind == TENSOR else 1
        if named:
            given = ", ".join(f"{n}=MISSING" for n in self.order)
            missing = " or ".join(f"{n} is MISSING" for n in self.order)
            lines = [f"def call({given}{', ' if given else ''}*args, stream=0, **extra):",
                     "    if stream:",
                     "        stream = getattr(stream, 'cuda_stream', stream)",  # a torch.cuda.Stream: its handle
                     f"    if args or extra{' or ' if missing else ''}{missing}:",
                     f"        return unusual(({''.join(f'{n}, ' for n in self.order)}), args, extra, stream)"]
            lines += [f"    a{i} = {n}" for i, n in enumerate(self.order)]
            checked = "return checked({" + ", ".join(f"{n!r}: a{i}" for i, n in enumerate(self.order)) + "}, stream)"
        else:
            lines = ["def call(*args, stream=0, **kw):",
                     "    if stream:",
                     "        stream = getattr(stream, 'cuda_stream', stream)",
                     "    if args:",
                     "        kw = positional(args, kw)",
                     f"    if len(kw) != {len(self.params)}:",
                     "        return checked(kw, stream)"]
            if self.params:
                lines.append("    try:")
                lines += [f"        a{i} = kw[{p[0]!r}]" for i, p in enumerate(self.params)]
                lines += ["    except KeyError:", "        return checked(kw, stream)"]
            checked = "return checked(kw, stream)"
        tensors = [i for i, p in enumerate(self.params) if p[1] != SCALAR]
        for i in tensors:
            lines += [f"    if type(a{i}) in torch_types:",
                      f"        p{i} = a{i}.data_ptr(); s{i} = a{i}.shape; t{i} = a{i}.stride(); k{i} = a{i}.dtype; "
                      f"d{i} = a{i}.device",
                      "    else:",
                      f"        r = read_device(a{i}, {ITEMSIZE[self.params[i][2]]})",
                      "        if r is None:",
                      f"            {checked}",
                      f"        p{i}, s{i}, t{i}, k{i}, d{i} = r"]
        key = "".join(f"k{i}, d{i}, s{i}, t{i}, not p{i} & 15, " for i in tensors)
        lines += [f"    b = bindings.get(({key}))",
                  "    if b is None:",
                  f"        {checked}",
                  # the checked path is never called from inside a try (nor an except: its errors would be
                  # chained to the one that sent the call there)
                  "    try:"]
        integers = [i for i, p in enumerate(self.params) if p[1] == SCALAR and p[2] in _INTEGER_SCALARS]
        lines += [f"        v{i} = int(a{i})" for i in integers]  # once, for the grid and the slot
        axes = []
        for axis, e in zip("xyz", grid.exprs):
            src = _expr(e, index, integers)
            if src.lstrip("-").isdigit():  # a constant entry: checked once, by runnable_source
                axes.append(src)
            else:
                lines.append(f"        g{axis} = {src}")
                axes.append(f"g{axis}")
        lines += [f"        bad = not ({grid.runnable_source(axes)})",
                  "    except Exception:",   # a division by zero, a scalar that is not a number
                  "        bad = True",
                  "    if bad:",
                  f"        {checked}",
                  f"    g = ({', '.join(axes)})"]
        maps = [i for i, p in enumerate(self.params) if p[1] == TMAP]
        for i in maps:
            lines += [f"    m{i} = b.maps[{self._tmap_index[self.params[i][0]]}].get(p{i})",
                      f"    if m{i} is None:",
                      f"        {checked}"]
        writes = []
        for i, (name, kind, dtype, rank) in enumerate(self.params):
            off = offsets[first_slot[i]]
            if kind == TENSOR:
                writes.append(f"        b.u64[{off // 8}] = p{i}")
            elif kind == TMAP:
                writes.append(f"        b.bytes[{off}:{off + TMAP_BYTES}] = m{i}")
            else:
                writes.append("        " + _scalar_write(f"v{i}" if i in integers else f"a{i}", dtype, off))
        if writes:
            lines += ["    try:", *writes,
                      "    except Exception:",   # a value that does not fit its slot
                      "        bad = True",
                      "    if bad:",
                      f"        {checked}"]
        lines += ["    if g != b.grid or stream is not b.stream:",
                  "        b.launch(g, stream)",
                  "    else:",
                  "        err = b.cu_launch(b.cfg, b.handle, b.address, 0)[0]",
                  "        if err:",
                  "            b.failed(err)"]
        return "\n".join(lines) + "\n"


def _expr(e, index, integers) -> str:
    from .grid import host_expr_source

    def value(n):
        i = index[n]
        return f"v{i}" if i in integers else f"int(a{i})"
    return host_expr_source(e, value, lambda n, m: f"s{index[n]}[{m}]")


def _scalar_write(arg: str, dtype: str, off: int) -> str:
    """The statement of the generated fast path that writes scalar ``arg`` of element type ``dtype`` into its slot
    at byte offset ``off`` — the bytes ``scalar_value`` packs, through a view that raises for a value out of the
    slot's range (the checked path then names it)."""
    if dtype in ("i32", "u32"):  # arg: the int() of the argument already
        return f"b.{'i32' if dtype == 'i32' else 'u32'}[{off // 4}] = {arg}"
    if dtype in ("i64", "u64"):
        return f"b.{'i64' if dtype == 'i64' else 'u64'}[{off // 8}] = {arg}"
    if dtype == "f32":
        return f"pack_f32(b.bytes, {off}, float({arg}))"
    if dtype == "i1":
        return f"b.i32[{off // 4}] = 1 if {arg} else 0"
    if dtype in ("f16", "bf16"):
        return f"b.u16[{off // 2}] = scalar_bits({arg}, {dtype!r})"
    return f"b.i32[{off // 4}] = scalar_bits({arg}, {dtype!r})"
