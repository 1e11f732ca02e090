"""Row softmax with ptxgen.kernels.softmax: the kernel the library picks for a row length, printed as tile IR, then run
(on the GPU with torch tensors when there is one, else in the CPU interpreter on a small numpy array).

    python examples/softmax.py [N]

The kernel holds each row in registers: one 16-byte vector per thread and step (the TV layout comes from
``layoutc.make_layout_tv``), a ``frag.reduce`` for the maximum and one for the sum (across the CTA's warps when a row
needs more than 32 threads), one ``frag.rcp`` per row, one multiply per value.
"""
import sys

import numpy as np

from ptxgen.ir.text import print_module
from ptxgen.kernels.rowwise import choose_row_config
from ptxgen.kernels.softmax import build, softmax


def main(n: int = 1000, m: int = 6):
    config = choose_row_config(n, "f32")
    print(f"// rows of {n} f32: {config} (tile {config.tile}, TV {config.layouts()[1]})")
    print(print_module(build(config)))
    x = np.random.default_rng(0).standard_normal((m, n)).astype(np.float32)
    y = softmax(x)                                   # the CPU interpreter: numpy in, numpy out
    want = np.exp(x - x.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    print(f"interpreter: max |y - softmax(x)| = {np.abs(y - want).max():.2e}, row sums {y.sum(1)[:3]}")
    try:
        import torch
        from ptxgen.runtime import gpu_available
    except ImportError:
        return y
    if gpu_available():
        xt = torch.randn(4096, n, device="cuda", dtype=torch.bfloat16)
        err = (softmax(xt).float() - torch.softmax(xt.float(), -1)).abs().max().item()
        print(f"GPU bf16 (4096, {n}): max |y - torch.softmax| = {err:.2e}")
    return y


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
