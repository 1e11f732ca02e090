"""The TMA multistage copy from the library (examples/tma_copy.tile is ``build()`` printed): one CTA per band of
rows, a producer thread loading boxes into a ring of stages, a consumer thread storing them; run here in the CPU
interpreter (post-condition: ``y == x`` exactly, for any shape).

    python examples/tma_copy.py               # the kernel of examples/tma_copy.tile, printed
    python examples/tma_copy.py --run         # a 20 x 300 f32 copy in the interpreter
"""
from __future__ import annotations

import sys

import numpy as np

from ptxgen.interp import interpret
from ptxgen.ir.text import print_module
from ptxgen.kernels.tma_copy import build

if __name__ == "__main__":
    if "--run" in sys.argv:
        x = np.random.default_rng(0).standard_normal((20, 300)).astype(np.float32)
        y = np.zeros_like(x)
        interpret(build(), {"x": x, "y": y, "m": 20, "n": 300})
        print("y == x:", bool(np.array_equal(y, x)))
        sys.exit(0 if np.array_equal(y, x) else 1)
    print(print_module(build()))
