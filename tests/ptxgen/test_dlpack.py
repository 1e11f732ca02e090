"""Arguments through DLPack: ``dlpack_view`` reads pointer, shape, strides and type from any ``__dlpack__`` producer
without taking ownership; on a GPU a kernel accepts an object that offers nothing but ``__dlpack__`` (as JAX arrays)."""
import numpy as np
import pytest

from ptxgen.runtime.launcher import dlpack_view


@pytest.mark.parametrize("dtype, code_bits", [(np.float32, (2, 32)), (np.float16, (2, 16)), (np.int32, (0, 32)),
                                              (np.uint64, (1, 64))])
def test_dlpack_view_of_a_strided_numpy_array(dtype, code_bits):
    base = np.arange(6 * 10).astype(dtype).reshape(6, 10)
    view = base[1:, ::3]
    ptr, shape, strides, cb = dlpack_view(view)
    assert ptr == view.ctypes.data
    assert shape == view.shape and strides == tuple(s // view.itemsize for s in view.strides)
    assert cb == code_bits


class OnlyDLPack:
    """Exposes a tensor through DLPack alone (no __cuda_array_interface__, no data_ptr)."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__()

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@pytest.mark.gpu
def test_gpu_kernel_takes_dlpack_only_arguments():
    torch = pytest.importorskip("torch")
    from ptxgen.ir.text import parse_module
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import pathlib
    text = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "sqrt_sin.tile").read_text()
    x = torch.rand(5000, device="cuda") * 3.0
    z = torch.zeros_like(x)
    jit(parse_module(text))(x=OnlyDLPack(x), z=OnlyDLPack(z), n=5000)
    torch.cuda.synchronize()
    assert torch.allclose(z, torch.sqrt(torch.sin(x)), rtol=1e-5)


@pytest.mark.gpu
def test_gpu_fp8_torch_tensor_is_read_through_dlpack():
    """torch's float8 tensors raise KeyError from __cuda_array_interface__ (no typestr): read through DLPack."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available
    from ptxgen.runtime.binding import read_device_tensor
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    q = torch.empty(4, 48, dtype=torch.float8_e4m3fn, device="cuda")[:, 16:]
    ptr, shape, strides, _type, place = read_device_tensor(q, 1)
    assert (ptr, shape, strides) == (q.data_ptr(), (4, 32), (48, 1))
    assert place[0] == 2   # kDLCUDA
