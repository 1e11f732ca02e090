"""Run every example kernel once on the GPU on small, ragged, fresh random inputs and check each result, for
compute-sanitizer (memcheck, racecheck, synccheck):

    compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu/sanitize_examples.py

Exits 0 when every example ran and matched its reference (the sanitizer's own exit code reports its findings).
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptxgen.ir.text import parse_module  # noqa: E402
from ptxgen.runtime import jit  # noqa: E402


def load(name):
    return parse_module((ROOT / "examples" / f"{name}.tile").read_text(), file=f"examples/{name}.tile")


def builder(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    hopper = builder("gemm_hopper")
    cases = [("gemm", "bf16", load("gemm"), {}), ("gemm_hopper", "bf16", load("gemm_hopper"), {"sms": sms}),
             ("gemm_hopper cluster=2", "bf16", hopper.build("bf16", cluster=2), {"sms": sms}),
             ("gemm_hopper tma-epilogue halves", "bf16", hopper.build("bf16", epilogue="tma", epilogue_split=2),
              {"sms": sms}),
             ("gemm_hopper c2 halves", "bf16", hopper.build("bf16", cluster=2, epilogue="tma", epilogue_split=2),
              {"sms": sms}),
             ("gemm_hopper e4m3 128x192 c2 k4", "e4m3",
              hopper.build("e4m3", bn=192, cluster=2, epilogue="tma", epilogue_split=3, promote=4),
              {"sms": sms, "scale_a": 0.5, "scale_b": 0.25}),
             ("gemm_hopper e4m3 128x192 c2 k1 halves", "e4m3",
              hopper.build("e4m3", bn=192, cluster=2, epilogue="tma", epilogue_split=3, promote=1),
              {"sms": sms, "scale_a": 0.5, "scale_b": 0.25}),
             ("gemm_hopper e4m3 128x224 s5 c2 k1", "e4m3", hopper.build("e4m3", bn=224, stages=5, cluster=2),
              {"sms": sms, "scale_a": 0.5, "scale_b": 0.25}),
             # the epilogue behind the next tile's first wgmmas: few CTAs, several tiles each
             ("gemm_hopper overlap halves", "bf16",
              hopper.build("bf16", epilogue="tma", epilogue_split=2, overlap=1), {"sms": 3}),
             ("gemm_hopper c2 overlap 2 halves", "bf16",
              hopper.build("bf16", cluster=2, epilogue="tma", epilogue_split=2, overlap=2), {"sms": 4}),
             ("gemm_hopper e4m3 128x192 k4 overlap", "e4m3",
              hopper.build("e4m3", bn=192, epilogue="tma", promote=4, overlap=1),
              {"sms": 3, "scale_a": 0.5, "scale_b": 0.25})]
    # stream-K: few CTAs, so that 300 x 520 leaves a partial last wave (9 tiles on 4 CTAs; 6 cluster tiles on 4)
    for cluster, ctas in ((1, 4), (2, 8)):
        shapes = hopper.streamk_buffers(128, 256, cluster, ctas)
        buffers = {"work": torch.empty(shapes["work"], device="cuda"),
                   "flags": torch.zeros(shapes["flags"], device="cuda", dtype=torch.int32)}
        cases.append((f"gemm_hopper stream-K c{cluster} halves", "bf16",
                      hopper.build("bf16", cluster=cluster, epilogue="tma", epilogue_split=2, streamk=True,
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
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
