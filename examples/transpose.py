"""2-D transpose through shared memory with swizzled thread maps (``ptxgen.kernels.transpose``): every TV layout
comes from ``layoutc.make_layout_tv``, the smem store and load take it composed with a swizzle of the tile index
(``Sw<3,3,-6> o 0 o TV`` and ``Sw<3,3,6> o 0 o TV`` for bf16), and layoutc reports both accesses conflict-free.

    python examples/transpose.py               # the bf16 kernel, printed, with layoutc's bank report
    python examples/transpose.py --run         # a ragged 70 x 45 f32 transpose in the CPU interpreter

Example (post-condition: ``out == x.T`` exactly, for any M, N)::

    >>> import numpy as np
    >>> from ptxgen.kernels.transpose import transpose
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> transpose(x).tolist()
    [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
"""
from __future__ import annotations

import sys

import numpy as np

from ptxgen.ir.text import print_module
from ptxgen.kernels.transpose import TransposeConfig, bank_reports, build, transpose

if __name__ == "__main__":
    if "--run" in sys.argv:
        x = np.random.default_rng(0).standard_normal((70, 45)).astype(np.float32)
        out = transpose(x)
        print("out == x.T:", bool(np.array_equal(out, x.T)))
        sys.exit(0 if np.array_equal(out, x.T) else 1)
    config = TransposeConfig("bf16")
    print(print_module(build(config)))
    for name, reports in bank_reports(config).items():
        print(f"// smem {name}, warp 0: {reports[0]}".splitlines()[0])
