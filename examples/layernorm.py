"""LayerNorm and RMSNorm forward with ptxgen.kernels.norms, composed: ``rms_norm(layer_norm(x, w, b), g)`` on a
(tokens, hidden) activation, against numpy (CPU interpreter) and, with a GPU, against torch.

    python examples/layernorm.py [hidden]

Each row is read once and written once; the weight and bias are read through ``layoutc.broadcast_tv`` of the row's
TV layout (each value gets its column's entry), so the kernels contain no hand-written layout.
"""
import sys

import numpy as np

from ptxgen.kernels.norms import layer_norm, rms_norm


def reference(x, w, b, g, eps=1e-5, rms_eps=1e-6):
    x = x.astype(np.float64)
    h = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b
    return h / np.sqrt((h * h).mean(-1, keepdims=True) + rms_eps) * g


def main(hidden: int = 768, tokens: int = 5):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((tokens, hidden)) + 1).astype(np.float32)
    w, b, g = (rng.uniform(0.5, 1.5, hidden).astype(np.float32) for _ in range(3))
    y = rms_norm(layer_norm(x, w, b, 1e-5), g, 1e-6)     # the CPU interpreter: numpy in, numpy out
    want = reference(x, w, b, g)
    print(f"interpreter ({tokens}, {hidden}): relative error {np.linalg.norm(y - want) / np.linalg.norm(want):.2e}")
    try:
        import torch
        from ptxgen.runtime import gpu_available
    except ImportError:
        return y
    if gpu_available():
        F = torch.nn.functional
        xt = torch.randn(8192, hidden, device="cuda", dtype=torch.bfloat16)
        wt, bt, gt = (torch.rand(hidden, device="cuda", dtype=torch.bfloat16) + 0.5 for _ in range(3))
        got = rms_norm(layer_norm(xt, wt, bt), gt, 1e-6).float()
        ref = F.rms_norm(F.layer_norm(xt.float(), (hidden,), wt.float(), bt.float()), (hidden,), gt.float(), 1e-6)
        print(f"GPU bf16 (8192, {hidden}): max |y - torch| = {(got - ref).abs().max().item():.2e}")
    return y


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 768)
