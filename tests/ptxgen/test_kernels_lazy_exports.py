"""ptxgen.kernels imports the GEMM ops and attention with the package and the other kernel families on first use
(``ptxgen.kernels.LAZY``): a process that only calls ``matmul`` does not import them (issue 17's cold first call)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import ptxgen.kernels as kernels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAZY_MODULES = ("ptxgen.kernels.fp8", "ptxgen.kernels.norms", "ptxgen.kernels.quantize", "ptxgen.kernels.rowwise",
                "ptxgen.kernels.gemm.autotune")


def _fresh(code: str):
    """``code``'s last printed line (JSON) from a fresh interpreter importing this tree."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_matmul_imports_no_other_kernel_family():
    loaded = _fresh("import json, sys, numpy as np, ml_dtypes\n"
                    "import ptxgen.kernels as k\n"
                    "a = np.ones((3, 5), ml_dtypes.bfloat16); b = np.ones((5, 4), ml_dtypes.bfloat16)\n"
                    "assert (np.asarray(k.matmul(a, b), np.float32) == 5).all()\n"
                    "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ptxgen.kernels'))))")
    assert "ptxgen.kernels.linalg" in loaded and "ptxgen.kernels.gemm.run" in loaded
    assert [m for m in LAZY_MODULES if m in loaded] == []


@pytest.mark.parametrize("name", sorted(kernels.LAZY))
def test_lazy_export_is_the_module_object(name):
    import importlib

    module = importlib.import_module(kernels.LAZY[name], "ptxgen.kernels")
    assert getattr(kernels, name) is getattr(module, name)
    assert name in kernels.__all__ and name in dir(kernels)


def test_from_import_of_a_lazy_name_in_a_fresh_process():
    names = _fresh("import json\n"
                   "from ptxgen.kernels import rms_norm, fp8_gemm_nt, RowConfig, per_token_cast_to_fp8\n"
                   "import ptxgen.kernels.norms as n, ptxgen.kernels.fp8 as f\n"
                   "print(json.dumps([rms_norm is n.rms_norm, fp8_gemm_nt is f.fp8_gemm_nt, RowConfig.__name__,\n"
                   "                  per_token_cast_to_fp8.__name__]))")
    assert names == [True, True, "RowConfig", "per_token_cast_to_fp8"]


def test_every_export_resolves_and_unknown_names_raise():
    for name in kernels.__all__:
        assert getattr(kernels, name) is not None
    with pytest.raises(AttributeError, match="module 'ptxgen.kernels' has no attribute 'rms_nrom'"):
        kernels.rms_nrom  # noqa: B018
    # a submodule that is no export is still imported by name (the row softmax lives in its module)
    from ptxgen.kernels import softmax

    assert callable(softmax.softmax)
