"""The stand-in torch (benchmarks/torch_standin.py) and the stub driver for CPU tests of the ops' GPU host path: a
fixture that installs both for one test and undoes everything afterwards (the ops' and the runtime's caches that
would otherwise keep stand-in tensors, stub-loaded kernels or stand-in functions)."""
import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def standin_torch(monkeypatch):
    """(the stand-in torch module, torch_standin, the list of launched block addresses) for this test; skips where the
    real torch is installed (the ops import torch by name: the two cannot live in one process; the GPU tests cover
    the real one there)."""
    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
        pytest.skip("the real torch is installed: the stand-in needs a process without it")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import torch_standin
    finally:
        sys.path.pop(0)
    from ptxgen.kernels import arguments, linalg
    from ptxgen.kernels.gemm import autotune, run
    from ptxgen.runtime import binding

    torch = torch_standin.module()
    monkeypatch.setitem(sys.modules, "torch", torch)
    launches = []
    torch_standin.stub_driver(launches, patch=monkeypatch.setattr)
    for module, name, empty in ((linalg, "_FAST", {}), (arguments, "TORCH", [frozenset(), None, None]),
                                (arguments, "SMS", []), (run, "_JIT", {}), (run, "_SITES", {}), (run, "_CTAS", {}),
                                (run, "_WORKSPACES", {}), (autotune, "_CHOICES", {})):
        monkeypatch.setattr(module, name, empty)
    monkeypatch.setattr(binding, "_TORCH_TYPES", set(binding._TORCH_TYPES))
    return torch, torch_standin, launches
