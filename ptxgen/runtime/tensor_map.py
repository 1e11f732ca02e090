"""The CUtensorMap of a ``tmap<T, R>[box]`` argument: derived from the tensor the caller passes, encoded by the
driver.

``encode_tensor_map`` applies ``layoutc.hopper.make_tma_params`` to the argument's real shape, element strides and
type (the rules of the interpreter's ``encode_tensor_map``), checks the result against what the kernel was lowered
for (``map_params(t)``: its mode order and box) and encodes it with ``cuTensorMapEncodeTiled``. The launcher keeps
the 128 bytes per (address, shape, strides), so a call with the same tensor reuses them and a tensor at another
address or of another shape gets its own map.
"""
from __future__ import annotations

import ctypes

from .driver import _cu, _error_string, _result_name, context
from .kernel_launch import TMAP_BYTES, LaunchError

__all__ = ["encode_tensor_map"]


def encode_tensor_map(kernel: str, name: str, ptr: int, shape, strides, t, static, encode: bool = True) -> bytes:
    """The 128 bytes of the CUtensorMap of tmap parameter ``name`` (type ``t``) over the tensor at ``ptr`` with
    ``shape`` and element ``strides``: ``make_tma_params`` on ``Layout(shape, strides)`` and the box, as the
    interpreter's ``encode_tensor_map``, then the driver's ``cuTensorMapEncodeTiled``.

    The kernel was lowered for ``static`` (``map_params(t)``: a row-major global), so the map must agree with it in
    mode order (the coordinates' order in the instruction) and box. E.g. a (1000, 336)-pitched f32 view
    ``(1000,333):(336,1)`` with box ``Sw<3,4,3> o 0 o (64,32):(32,1)`` → dims (333, 1000), strides (1344,), box
    (32, 64), SWIZZLE_128B, L2 promotion 256 bytes. ``encode=False``: checked only, 128 zero bytes. Raises
    LaunchError with the reason.
    """
    import layoutc as lc
    from layoutc.hopper import TmaError, TmaL2Promotion, make_tma_params

    from ..ir.ops import layoutc_dtype

    shape, strides = tuple(int(x) for x in shape), tuple(int(x) for x in strides)
    if any(n == 0 for n in shape):  # an empty tensor: the kernel issues no copy from it (nothing to describe)
        return bytes(TMAP_BYTES)
    try:
        # L2 fills in 256-byte sectors (CuTe's make_tma_copy, layoutc's default, asks 128): memory-bound kernels
        # stream +1.5-3.5% faster (decode GEMMs, block-scaled M = 64/128), compute-bound ones the same (s13 section 6)
        params = make_tma_params(lc.Layout(shape, strides), layoutc_dtype(t.dtype), t.box,
                                 l2_promotion=TmaL2Promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
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
