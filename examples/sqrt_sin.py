"""z = sqrt(sin(x)) from the library (examples/sqrt_sin.tile is ``ptxgen.kernels.elementwise.build()`` printed):
run in the CPU interpreter, or on the GPU when one is present (post-condition: ``z = sqrt(sin(x))``).

    python examples/sqrt_sin.py            # 1000 elements, interpreter (or GPU), checked against numpy
    python examples/sqrt_sin.py --print    # the kernel's IR, as examples/sqrt_sin.tile spells it
"""
import sys

import numpy as np

from ptxgen.ir.text import print_module
from ptxgen.kernels.elementwise import build

if __name__ == "__main__":
    if "--print" in sys.argv:
        print(print_module(build()))
        sys.exit(0)
    n = 1000
    x = np.random.default_rng().uniform(0.0, 3.14159, n).astype(np.float32)
    z = np.zeros_like(x)
    from ptxgen.runtime import gpu_available

    if gpu_available():
        from ptxgen.runtime import jit

        jit(build())(x=x, z=z, n=n)
        where = "GPU"
    else:
        from ptxgen.interp import interpret

        interpret(build(), {"x": x, "z": z, "n": n})
        where = "CPU interpreter"
    err = float(np.max(np.abs(z - np.sqrt(np.sin(x.astype(np.float64))))))
    print(f"sqrt(sin(x)) on the {where}: max abs error {err:.2e}")
    sys.exit(0 if err < 1e-6 else 1)
