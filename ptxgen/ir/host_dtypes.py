"""Host data types: the numpy dtype each element type of the tile IR has at the host boundary, one convention for the
interpreter and the launcher alike.

A numpy array passed for a ``gtensor<T, R>`` or ``tmap<T, R>[box]`` parameter has exactly ``host_dtype(T)``:

====== ========================== ==================
T      numpy dtype                torch dtype
====== ========================== ==================
f32    ``numpy.float32``          ``torch.float32``
f16    ``numpy.float16``          ``torch.float16``
bf16   ``ml_dtypes.bfloat16``     ``torch.bfloat16``
e4m3   ``ml_dtypes.float8_e4m3fn`` ``torch.float8_e4m3fn``
e5m2   ``ml_dtypes.float8_e5m2``  ``torch.float8_e5m2``
i32    ``numpy.int32``            ``torch.int32``
u32    ``numpy.uint32``           ``torch.uint32``
i64    ``numpy.int64``            ``torch.int64``
u64    ``numpy.uint64``           ``torch.uint64``
i1     ``numpy.bool_``            ``torch.bool``
====== ========================== ==================

Inputs and outputs alike: the kernel reads the array's values and writes values of ``T`` into it. Nothing else is
converted silently: a float32 array for a bf16 parameter would have to be rounded (and a bf16 output would come back
widened), and a uint16 array may hold bf16 bit patterns or integers. Such arrays are refused with the conversion to
write (``x.astype(ml_dtypes.bfloat16)``, or ``x.view(ml_dtypes.bfloat16)`` for bit patterns). Device tensors
(torch, DLPack, the CUDA array interface) carry their element type themselves; the launcher maps those.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .types import ScalarType

__all__ = ["HOST_DTYPES", "TORCH_DTYPES", "host_dtype", "host_dtype_name", "host_dtype_mismatch"]

HOST_DTYPES = {
    "f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "i32": np.dtype(np.int32), "u32": np.dtype(np.uint32), "i64": np.dtype(np.int64), "u64": np.dtype(np.uint64),
    "i1": np.dtype(np.bool_),
}
TORCH_DTYPES = {
    "f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16", "e4m3": "torch.float8_e4m3fn",
    "e5m2": "torch.float8_e5m2", "i32": "torch.int32", "u32": "torch.uint32", "i64": "torch.int64",
    "u64": "torch.uint64", "i1": "torch.bool",
}


def _name(t) -> str:
    return t.name if isinstance(t, ScalarType) else str(t)


def host_dtype(t) -> np.dtype:
    """The numpy dtype of a host array of element type ``t`` (a ScalarType or its name): ``host_dtype(BF16)`` →
    ``dtype(bfloat16)`` (ml_dtypes). Post: ``np.zeros(n, host_dtype(t)).itemsize`` is the element's size in memory."""
    return HOST_DTYPES[_name(t)]


def host_dtype_name(t) -> str:
    """How to spell ``host_dtype(t)`` in Python: ``ml_dtypes.bfloat16``, ``numpy.float32``, ``numpy.bool_``."""
    dt = host_dtype(t)
    module = "ml_dtypes" if dt.type.__module__.startswith("ml_dtypes") else "numpy"
    return f"{module}.{'bool_' if dt == np.bool_ else dt.name}"


def host_dtype_mismatch(name: str, got, t, torch: bool = True) -> str | None:
    """None when an array of dtype ``got`` is what parameter ``%name`` of element type ``t`` takes, else the message
    that says what to pass instead (``torch``: mention the torch tensor too, as the launcher takes one), e.g.
    ``host_dtype_mismatch('x', np.float32, BF16)`` → ``argument %x: the kernel wants bf16; pass a numpy array of dtype
    ml_dtypes.bfloat16 (e.g. x.astype(ml_dtypes.bfloat16)) or a torch.bfloat16 tensor, not float32``.

    ``got`` is a numpy dtype (or anything ``np.dtype`` takes) or, for tensors that are not numpy arrays, the text to
    show (``'torch.float32'``). An unsigned integer array of the element's width (uint16 for bf16/f16, uint8 for fp8)
    gets the hint to view its bits as the element type."""
    tname = _name(t)
    want = host_dtype(tname)
    shown = got
    if not isinstance(got, str):
        try:
            got = np.dtype(got)
        except TypeError:
            got = None
        if got is not None and got == want:
            return None
        # a byte-swapped float32 is named by its typestr ('>f4'), so the message does not read "not float32"
        shown = str(shown) if got is None else got.name if got.isnative else f"{got.name} ({got.str})"
    spelled = host_dtype_name(tname)
    text = (f"argument %{name}: the kernel wants {tname}; pass a numpy array of dtype {spelled} "
            f"(e.g. {name}.astype({spelled}))")
    if torch:
        text += f" or a {TORCH_DTYPES[tname]} tensor"
    text += f", not {shown}"
    if (tname in ("bf16", "f16", "e4m3", "e5m2") and isinstance(got, np.dtype) and got.kind == "u"
            and got.itemsize == want.itemsize):
        text += f" (if it holds the bits of {tname} values: {name}.view({spelled}))"
    return text
