"""The README's main job, examples/quickstart.py, runs end to end (here without a GPU: the interpreter path) and
reports success only when the result matches float64."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_quickstart_runs_and_checks_its_result():
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"), "130", "72", "136"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "descriptor addressing == layout addressing on the 64 x 16 tile: ok" in out
    assert "4 wgmma.mma_async in the PTX" in out
    assert "relative error vs float64" in out and out.rstrip().endswith("all steps ok")
    assert "configuration for this shape: h128x64s8t" in out and "matmul on the " in out
