"""The simple wgmma GEMM from the library (examples/gemm.tile is its default configuration printed): one 128 × BN
tile per CTA, a TMA producer warpgroup and two wgmma consumer warpgroups on a 4-stage mbarrier pipeline.

    python examples/gemm.py                   # the kernel of examples/gemm.tile, printed
    python examples/gemm.py f16 256 3         # another dtype, N tile and depth

``ptxgen.kernels.gemm.simple.build(SimpleGemmConfig(dtype, bn, stages))`` computes every smem layout, TMA box, byte
count and accumulator TV layout from layoutc; the kernel runs as ``jit(module)(a=A, b=B, c=C, m=M, n=N, k=K)`` on the
GPU, or ``interpret(module, {...})`` on the CPU.
"""
from __future__ import annotations

import sys

from ptxgen.ir.text import print_module
from ptxgen.kernels.gemm.simple import SimpleGemmConfig, build

if __name__ == "__main__":
    dtype, bn, stages = (sys.argv[1:] + [None] * 3)[:3]
    config = SimpleGemmConfig(dtype or "bf16", int(bn or 128), int(stages or 4))
    print(print_module(build(config)))
