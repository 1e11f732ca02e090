"""Every example kernel: its text parses and verifies, its Python-builder twin builds the same IR, and the CPU
interpreter's result matches numpy (float64 reference, relative error) on fresh random inputs, including ragged
sizes that leave partial tiles (tma_copy's runs and planted bugs are in tests/ptxgen/test_tma_copy.py)."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module, print_module, structurally_equal
from ptxgen.kernels import elementwise, l2norm, tma_copy
from ptxgen.kernels.gemm import TILE_FILE, build
from ptxgen.kernels.gemm.simple import SimpleGemmConfig
from ptxgen.kernels.gemm.simple import build as build_simple
from ptxgen.verify import verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name):
    text = (EXAMPLES / f"{name}.tile").read_text()
    return parse_module(text, file=f"examples/{name}.tile")


def builder_twin(name):
    """The Python-built IR of examples/<name>.tile: the library's kernel (ptxgen.kernels) of each example."""
    library = {"gemm": lambda: build_simple(SimpleGemmConfig()), "gemm_hopper": lambda: build(TILE_FILE),
               "tma_copy": tma_copy.build, "sqrt_sin": elementwise.build, "l2norm": l2norm.build}
    return library[name]()


def rel_err(got, want):
    return np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-300)


@pytest.mark.parametrize("name", ["sqrt_sin", "l2norm", "tma_copy", "gemm", "gemm_hopper"])
def test_text_verifies_prints_stably_and_equals_builder_twin(name):
    module = load(name)
    verify(module)
    printed = print_module(module)
    assert print_module(parse_module(printed)) == printed
    twin = builder_twin(name)
    verify(twin)
    assert structurally_equal(module, twin), print_module(twin)


@pytest.mark.parametrize("n", [1, 1000, 1024, 4096 + 17])
def test_sqrt_sin_matches_numpy(n):
    rng = np.random.default_rng()
    # below float32(pi), which rounds above pi: sin would be negative there and both results NaN
    x = rng.uniform(0.0, 3.14159, n).astype(np.float32)
    z = np.full(n, -7.0, dtype=np.float32)
    interpret(load("sqrt_sin"), {"x": x, "z": z, "n": n})
    want = np.sqrt(np.sin(x.astype(np.float64)))
    assert rel_err(z, want) < 1e-6


# N = 16384 is the register tile (one pass); 16385 and 40000 take the two-pass path; ragged N leave partial vectors
@pytest.mark.parametrize("m, n", [(4, 256), (5, 300), (1, 1), (9, 1000), (2, 16384), (3, 16385), (1, 40000),
                                  (2, 8193)])
def test_l2norm_matches_numpy(m, n):
    rng = np.random.default_rng()
    x = rng.standard_normal((m, n)).astype(np.float32)
    y = np.full((m, n), -7.0, dtype=np.float32)
    eps = 1e-6
    interpret(load("l2norm"), {"x": x, "y": y, "m": m, "eps": eps})
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).sum(axis=1, keepdims=True) + eps)
    assert rel_err(y, want) < 1e-6


@pytest.mark.parametrize("path", sorted(p.name for p in (EXAMPLES / "bugs").glob("*.tile")))
def test_planted_bug_twins_parse_and_print_stably(path):
    """examples/bugs/*.tile (checked for their diagnoses in tests/ptxgen/test_tma_copy.py) are well-formed IR."""
    module = parse_module((EXAMPLES / "bugs" / path).read_text(), file=f"examples/bugs/{path}")
    printed = print_module(module)
    assert print_module(parse_module(printed)) == printed
    assert structurally_equal(parse_module(printed), module)


def test_sqrt_sin_leaves_memory_past_n_untouched():
    n = 1000
    x = np.full(1100, 1.0, dtype=np.float32)
    z = np.full(1100, -7.0, dtype=np.float32)
    interpret(load("sqrt_sin"), {"x": x[:n], "z": z[:n], "n": n})
    assert np.all(z[n:] == -7.0)


def test_l2norm_lowers_to_16_byte_vectors_in_at_most_64_registers():
    """The one-pass path loads and stores x/y as ld/st.global.v4 (no edge path when N is a multiple of 4) and the
    kernel needs <= 64 registers, so two 512-thread CTAs fit an SM (65536 registers) and overlap their phases."""
    import re
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    spec = Specialization.of(x=TensorSpec(1, True, 4), y=TensorSpec(1, True, 4))
    compiled = compile_kernel(load("l2norm").kernels[0], spec)
    accesses = re.findall(r"(?:ld|st)\.global\S*", compiled.ptx)
    assert set(accesses) == {"ld.global.v4.b32", "st.global.v4.b32"}
    assert accesses.count("ld.global.v4.b32") == 12   # 8 in the first loop, 4 in the two-pass loop
    if compiled.registers is not None:                 # ptxas's count, where this nvJitLink's info log has it
        assert compiled.registers <= 64


@pytest.mark.parametrize("name", ["sqrt_sin", "l2norm"])
def test_example_scripts_run_and_check_their_result(name):
    """examples/sqrt_sin.py and examples/l2norm.py are short callers of the library's kernels: each runs (the CPU
    interpreter without a GPU), checks its result against numpy and prints the error; --print gives the .tile's IR."""
    root = EXAMPLES.parent
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True, text=True, env=env,
                         cwd=root, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "error" in run.stdout
    printed = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--print"], capture_output=True,
                             text=True, env=env, cwd=root, timeout=600)
    assert printed.returncode == 0, printed.stderr
    assert structurally_equal(parse_module(printed.stdout), load(name))
