"""The GPU tests' entry: torch on a CUDA GPU the driver sees, or the test skipped."""
import pytest


def torch_or_skip():
    """torch, where a CUDA GPU is present (``ptxgen.runtime.gpu_available``); else the calling test is skipped (no
    torch: skipped too). Post: the returned module can allocate CUDA tensors."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return torch
