#!/usr/bin/env python3
"""Is the PTX of the default kernels byte-identical to an earlier tree's? A check for changes meant to make compiling
faster without changing what it produces.

    python benchmarks/ptx_identity.py --write /tmp/ptx_before     # on the tree before the change
    python benchmarks/ptx_identity.py --check /tmp/ptx_before     # after it: exit status 1 and the files that differ

The kernels: the GEMM configs ``choose_config`` picks for a set of shapes in bf16 and e4m3 (decode, mid, large,
unaligned, a bias), the block-scaled FP8 GEMM's picks, attention (non-causal and causal) and every kernel of
``examples/*.tile``, each compiled (no disk cache, no nvJitLink) for the generic specialization and for the aligned one
(every gtensor contiguous in its last mode, 16-byte aligned, extent a multiple of 16). One ``<name>.<spec>.ptx`` file
per kernel and specialization.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPES = ((4096, 4096, 14336), (1024, 57344, 8192), (16, 4096, 4096), (640, 8192, 4096), (8192, 8192, 8192),
          (3001, 2999, 2016), (128, 7168, 18432))
BLOCK_SCALED_SHAPES = ((4096, 4096, 4096), (64, 7168, 2048))


def kernels() -> dict:
    """{file stem: tile-IR Kernel} of every kernel checked."""
    from ptxgen.kernels import AttentionConfig, choose_block_scaled_config, choose_config
    from ptxgen.kernels import fp8
    from ptxgen.kernels.gemm import run
    from ptxgen.runtime.launcher import parse_verified

    attention_build = importlib.import_module("ptxgen.kernels.attention.build")   # the package exports the function
    modules = {}
    for dtype in ("bf16", "e4m3"):
        for m, n, k in SHAPES:
            config = choose_config(m, n, k, dtype, 132)
            modules[f"{dtype}-{m}x{n}x{k}-{config.name}"] = run.kernel_module(run.kernel_config(config))
    config = choose_config(4096, 4096, 4096, "bf16", 132, bias=True)
    modules[f"bias-{config.name}"] = run.kernel_module(run.kernel_config(config))
    for m, n, k in BLOCK_SCALED_SHAPES:
        config = choose_block_scaled_config(m, n, k, 132)
        modules[f"blockscaled-{m}x{n}x{k}-{config.name}"] = fp8.kernel_module(config)
    for causal in (False, True):
        modules[f"attention-causal{causal}"] = attention_build.build(AttentionConfig(causal=causal))
    found = {name: module.kernels[0] for name, module in modules.items()}
    for path in sorted((ROOT / "examples").glob("*.tile")):
        for kernel in parse_verified(path.read_text(), f"examples/{path.name}").kernels:
            found[f"tile-{path.stem}-{kernel.name}"] = kernel
    return found


def ptx_files() -> dict:
    """{file name: PTX text} of every kernel and specialization."""
    from ptxgen.ir.types import GlobalTensorType
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    out = {}
    for name, kernel in kernels().items():
        aligned = Specialization(tuple((p.name, TensorSpec(p.type.rank - 1, True, 16)) for p in kernel.params
                                       if isinstance(p.type, GlobalTensorType)))
        for tag, spec in (("generic", Specialization.generic()), ("aligned", aligned)):
            out[f"{name}.{tag}.ptx"] = compile_kernel(kernel, spec, defer_assembly=True).ptx
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="DIR", help="write the PTX files into DIR")
    mode.add_argument("--check", metavar="DIR", help="compare with the PTX files in DIR")
    args = ap.parse_args()
    os.environ["PTXGEN_CACHE"] = "0"   # compiled here, never read from the disk cache
    sys.path.insert(0, str(ROOT))
    files = ptx_files()
    if args.write:
        folder = pathlib.Path(args.write)
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
        print(f"wrote {len(files)} PTX files to {folder}")
        return 0
    folder = pathlib.Path(args.check)
    differ = [name for name, text in files.items() if not (folder / name).is_file() or (folder / name).read_text() != text]
    for name in differ:
        print(f"differs: {name}" if (folder / name).is_file() else f"missing in {folder}: {name}")
    print(f"{len(files) - len(differ)} of {len(files)} PTX files identical to {folder}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
