"""The flagship GEMM from the library: how ``ptxgen.kernels`` puts it together and how it is called.

    python examples/gemm_hopper.py            # the kernel of examples/gemm_hopper.tile, printed
    python examples/gemm_hopper.py 300 264 200 [--run]

A configuration (``GemmConfig``) names every choice of the persistent, warp-specialized wgmma GEMM — tile, pipeline
stages, cluster, epilogue, stream-K, … — and ``build(config)`` makes its tile IR from the parts in
``ptxgen/kernels/gemm/``: ``schedule`` (the persistent grid, rasterized tiles, stream-K), ``mainloop`` (TMA loads by a
producer warpgroup, wgmmas by two consumer warpgroups), ``epilogue`` (C from the f32 accumulators, through smem and
TMA stores). ``choose_config`` picks the configuration for a shape by documented rules, and ``matmul`` / ``linear`` /
``scaled_mm`` run it: on the GPU for torch tensors, in the CPU interpreter for numpy arrays.
"""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from ptxgen.ir.text import print_module
from ptxgen.kernels import choose_config, matmul
from ptxgen.kernels.gemm import TILE_FILE, build


def main(argv) -> int:
    if len(argv) < 3:
        # the configuration the .tile spells out: bf16, 128 x 256 tiles, 4 stages, clusters of 2 sharing B by
        # multicast, C through stmatrix and TMA stores in two column halves
        print(f"// {TILE_FILE.name}: {TILE_FILE}")
        print(print_module(build(TILE_FILE)))
        return 0
    m, n, k = (int(x) for x in argv[:3])
    config = choose_config(m, n, k, "bf16")
    print(f"C ({m}, {n}) = A ({m}, {k}) @ B ({k}, {n}), bf16: {config.name}\n  {config}")
    if "--run" not in argv:
        return 0
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    try:
        import torch
        on_gpu = torch.cuda.is_available()
    except ImportError:
        on_gpu = False
    if on_gpu:
        c = matmul(torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16),
                   torch.from_numpy(w.view(np.int16)).cuda().view(torch.bfloat16).T)
        c = c.float().cpu().numpy()
    else:   # the interpreter: the same kernel, 4 CTAs
        c = matmul(a, w.T, sm_count=4)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    error = np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want)
    print(f"{'GPU' if on_gpu else 'interpreter'}: relative error against float64 {error:.2e}")
    return 0 if error < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
