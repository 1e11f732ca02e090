"""SASS of a cubin, through ``nvdisasm`` from the optional pip wheel ``nvidia-cuda-nvdisasm`` (``pip install
".[sass]"``); never a system toolkit.

>>> "HGMMA" in disassemble(compile_kernel(gemm).cubin)      # doctest: +SKIP
True
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import tempfile


class SassUnavailable(RuntimeError):
    """The nvdisasm wheel is not installed."""


def nvdisasm_path() -> str | None:
    """The ``nvdisasm`` binary of the installed ``nvidia-cuda-nvdisasm`` wheel (any CUDA major), or None.
    Post: the path exists and is executable."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for candidate in sorted(pathlib.Path(root).glob("*/bin/nvdisasm"), reverse=True):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def disassemble(cubin: bytes) -> str:
    """The SASS listing of every kernel in ``cubin`` (``nvdisasm -c``: code sections only).
    Raises SassUnavailable without the wheel, RuntimeError with nvdisasm's message if it fails."""
    tool = nvdisasm_path()
    if tool is None:
        raise SassUnavailable('nvdisasm is not installed: pip install ".[sass]" (nvidia-cuda-nvdisasm)')
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(bytes(cubin))
        f.flush()
        run = subprocess.run([tool, "-c", f.name], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"nvdisasm failed: {run.stderr.strip()}")
    return run.stdout


def instruction_counts(sass: str, opcodes) -> dict:
    """How many SASS instructions start with each opcode prefix: ``{'HGMMA': 8, 'LDL': 0}``."""
    counts = {op: 0 for op in opcodes}
    for line in sass.splitlines():
        text = line.split("*/", 1)[-1].strip().lstrip("{").strip()
        if text.startswith("@"):
            text = text.split(None, 1)[1] if " " in text else ""
        for op in opcodes:
            if text.startswith(op):
                counts[op] += 1
    return counts
