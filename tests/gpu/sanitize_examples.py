"""Run every example kernel once on the GPU on small, ragged, fresh random inputs and check each result, for
compute-sanitizer (memcheck, racecheck, synccheck):

    compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu/sanitize_examples.py

Exits 0 when every example ran and matched its reference (the sanitizer's own exit code reports its findings).
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptxgen.ir.text import parse_module  # noqa: E402
from ptxgen.kernels import linear, matmul, scaled_mm  # noqa: E402
from ptxgen.kernels.gemm import GemmConfig, build, streamk_buffers  # noqa: E402
from ptxgen.runtime import jit  # noqa: E402


def load(name):
    return parse_module((ROOT / "examples" / f"{name}.tile").read_text(), file=f"examples/{name}.tile")


def gemm(dtype: str = "bf16", **fields):
    """The library's persistent GEMM of ``GemmConfig(dtype, **fields)``."""
    return build(GemmConfig(dtype, **fields))


def check(name, ok):
    print(f"{name:<44} {'ok' if ok else 'MISMATCH'}", flush=True)
    return ok


def main() -> int:
    import torch

    rng = np.random.default_rng()
    results = []
    x = rng.uniform(0.0, 3.14159, 5000).astype(np.float32)
    z = np.zeros_like(x)
    jit(load("sqrt_sin"))(x=x, z=z, n=x.size)
    results.append(check("sqrt_sin 5000", np.allclose(z, np.sqrt(np.sin(x.astype(np.float64))), rtol=1e-5)))

    x = rng.standard_normal((37, 1000)).astype(np.float32)
    y = np.zeros_like(x)
    jit(load("l2norm"))(x=x, y=y, m=37, eps=1e-6)
    want = x / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True) + 1e-6)
    results.append(check("l2norm 37x1000", np.allclose(y, want, rtol=1e-5, atol=1e-7)))

    x = torch.randn(100, 600, device="cuda")
    y = torch.full_like(x, -7.0)
    jit(load("tma_copy"))(x=x, y=y, m=100, n=600)
    torch.cuda.synchronize()
    results.append(check("tma_copy 100x600", bool(torch.equal(x, y))))

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = [("gemm", "bf16", load("gemm"), {}), ("gemm_hopper", "bf16", load("gemm_hopper"), {"sms": sms}),
             ("gemm_hopper cluster=2", "bf16", gemm("bf16", cluster=2), {"sms": sms}),
             ("gemm_hopper tma-epilogue halves", "bf16", gemm("bf16", epilogue="tma", epilogue_split=2),
              {"sms": sms}),
             ("gemm_hopper c2 halves", "bf16", gemm("bf16", cluster=2, epilogue="tma", epilogue_split=2),
              {"sms": sms}),
             ("gemm_hopper e4m3 128x192 c2 k4", "e4m3",
              gemm("e4m3", bn=192, cluster=2, epilogue="tma", epilogue_split=3, promote=4),
              {"sms": sms, "scale_a": 0.5, "scale_b": 0.25}),
             ("gemm_hopper e4m3 128x192 c2 k1 halves", "e4m3",
              gemm("e4m3", bn=192, cluster=2, epilogue="tma", epilogue_split=3, promote=1),
              {"sms": sms, "scale_a": 0.5, "scale_b": 0.25}),
             ("gemm_hopper e4m3 128x224 s5 c2 k1", "e4m3", gemm("e4m3", bn=224, stages=5, cluster=2),
              {"sms": sms, "scale_a": 0.5, "scale_b": 0.25}),
             # the epilogue behind the next tile's first wgmmas: few CTAs, several tiles each
             ("gemm_hopper overlap halves", "bf16",
              gemm("bf16", epilogue="tma", epilogue_split=2, overlap=1), {"sms": 3}),
             ("gemm_hopper c2 overlap 2 halves", "bf16",
              gemm("bf16", cluster=2, epilogue="tma", epilogue_split=2, overlap=2), {"sms": 4}),
             ("gemm_hopper e4m3 128x192 k4 overlap", "e4m3",
              gemm("e4m3", bn=192, epilogue="tma", promote=4, overlap=1),
              {"sms": 3, "scale_a": 0.5, "scale_b": 0.25}),
             # C staged in plain rows and stored by one box a block wide, past N's edge in the last tile: the
             # column-split 192 x 176 (each warpgroup's three 64-row blocks in turn) and 192 x 144 (staged whole),
             # the row-split 128 x 104
             ("gemm_hopper 192x176 column split rows", "bf16",
              gemm("bf16", bm=192, bn=176, epilogue="tma", epilogue_split=3, warpgroups_along="n"), {"sms": sms}),
             ("gemm_hopper 192x144 column split whole", "bf16",
              gemm("bf16", bm=192, bn=144, epilogue="tma", warpgroups_along="n"), {"sms": 3}),
             ("gemm_hopper 128x104 rows", "bf16", gemm("bf16", bn=104, epilogue="tma"), {"sms": sms})]
    # stream-K: few CTAs, so that 300 x 520 leaves a partial last wave (9 tiles on 4 CTAs; 6 cluster tiles on 4)
    for cluster, ctas in ((1, 4), (2, 8)):
        shapes = streamk_buffers(GemmConfig(cluster=cluster), ctas)
        buffers = {"work": torch.empty(shapes["work"], device="cuda"),
                   "flags": torch.zeros(shapes["flags"], device="cuda", dtype=torch.int32)}
        cases.append((f"gemm_hopper stream-K c{cluster} halves", "bf16",
                      gemm("bf16", cluster=cluster, epilogue="tma", epilogue_split=2, streamk=True,
                                   streamk_min_saving=0),
                      {"sms": ctas, **buffers}))
    for name, dtype, kernel, extra in cases:
        m, n, k = 300, 520, 200 if dtype == "bf16" else 272
        kind = torch.bfloat16 if dtype == "bf16" else torch.float8_e4m3fn
        a = torch.randn(m, k, device="cuda").to(kind)
        b = torch.randn(n, k, device="cuda").to(kind)
        c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
        jit(kernel)(a=a, b=b, c=c, m=m, n=n, k=k, **extra)
        torch.cuda.synchronize()
        want = a.double() @ b.double().T * (0.125 if dtype == "e4m3" else 1.0)
        err = (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item()
        results.append(check(f"{name} {m}x{n}x{k}", err < 1e-2))
    # the ops (ptxgen.kernels): swapped A and B with C through its transposed view and stream-K on every SM
    # (M = 13), 128 x 128 tiles shared over every SM, the bias in the epilogue, an odd K through a padded copy, fp8
    for m, n, k in ((13, 1000, 2048), (128, 2048, 4096), (300, 520, 201)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        for name, got, want in (("matmul", lambda: matmul(a, w.T), a.double() @ w.double().T),
                                ("linear", lambda: linear(a, w, bias), a.double() @ w.double().T + bias.double())):
            c = got()
            torch.cuda.synchronize()
            err = (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item()
            results.append(check(f"{name} {m}x{n}x{k}", err < 1e-2))
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        c = scaled_mm(a8, w8.T, 0.5, 0.25)
        torch.cuda.synchronize()
        want = a8.double() @ w8.double().T * 0.125
        err = (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item()
        results.append(check(f"scaled_mm {m}x{n}x{k}", err < 1e-2))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
