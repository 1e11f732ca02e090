"""benchmarks/bench_compile.py --gemm: the measured first call compiles no Python module from source once
``--compileall`` has filled the private bytecode prefix (the tree's modules and, through one untimed first call, the
standard library's and llvmlite's), and the count it reports is a real one (a run without --compileall under
PYTHONDONTWRITEBYTECODE reports the tree's modules compiled during the call)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAPE = "256x512x512"   # a small configuration: the phases, not the kernel, are under test


def bench(tmp_path, *flags, env_extra=None) -> dict:
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PYTHONDONTWRITEBYTECODE": "1", **(env_extra or {})}
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_compile.py"), "--gemm", "--shapes", SHAPE,
                          "--processes", "1", *flags], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "modules compiled from source during the call" in run.stdout, run.stdout
    return json.loads((out / "bench_compile_gemm.json").read_text())["gemm"][f"bf16 {SHAPE}"]


def test_compileall_leaves_nothing_to_compile_in_the_call(tmp_path):
    row = bench(tmp_path, "--compileall")
    (count, seconds), = row["compiled_from_source_all"]
    assert count == 0 and seconds == 0.0, row
    assert row["pycache_prefix"] and not row["bytecode_writes"]


def test_without_bytecode_the_call_compiles_sources(tmp_path):
    # an empty bytecode prefix: whatever __pycache__ the checkout or site-packages hold, no module has bytecode
    empty = tmp_path / "no-bytecode"
    empty.mkdir()
    row = bench(tmp_path, env_extra={"PYTHONPYCACHEPREFIX": str(empty)})
    (count, seconds), = row["compiled_from_source_all"]
    # the call imports ptxgen.lower and ptxgen.runtime (dozens of modules), none with bytecode under the variable
    assert count >= 10 and seconds > 0.0, row
    assert row["pycache_prefix"] == str(empty) and not row["bytecode_writes"]
