"""Row L2 normalization from the library (examples/l2norm.tile is ``ptxgen.kernels.l2norm.build()`` printed, with
comments): run in the CPU interpreter, or on the GPU when one is present (post-condition: ``y[r] = x[r] /
sqrt(sum(x[r]**2) + eps)`` for every row, any N).

    python examples/l2norm.py              # a 4 x 3000 row normalization, checked against numpy
    python examples/l2norm.py --print      # the kernel's IR, as examples/l2norm.tile spells it
"""
import sys

import numpy as np

from ptxgen.ir.text import print_module
from ptxgen.kernels.l2norm import build

if __name__ == "__main__":
    if "--print" in sys.argv:
        print(print_module(build()))
        sys.exit(0)
    m, n, eps = 4, 3000, 1e-6
    x = np.random.default_rng().standard_normal((m, n)).astype(np.float32)
    y = np.zeros_like(x)
    from ptxgen.runtime import gpu_available

    if gpu_available():
        from ptxgen.runtime import jit

        jit(build())(x=x, y=y, m=m, eps=eps)
        where = "GPU"
    else:
        from ptxgen.interp import interpret

        interpret(build(), {"x": x, "y": y, "m": m, "eps": eps})
        where = "CPU interpreter"
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).sum(axis=1, keepdims=True) + eps)
    err = float(np.linalg.norm(y - want) / np.linalg.norm(want))
    print(f"l2norm on the {where}: relative error {err:.2e}")
    sys.exit(0 if err < 1e-6 else 1)
