#!/usr/bin/env python3
"""Bandwidth of the lowered sqrt_sin and l2norm kernels, against torch and a device-to-device copy in the same run.

    python benchmarks/bench_elementwise.py [--n 268435456] [--rows 16384 --cols 16384] [--reps 50] [--json out.json]

Fresh random inputs; each kernel's result is checked against a float64 reference FIRST, then it is timed with CUDA
events (driver cuEventRecord / cuEventElapsedTime around every repetition of 5 back-to-back calls, after warm-up)
and the median per call is reported with the achieved bandwidth of its compulsory traffic (bytes read + written
once: sqrt_sin 8n bytes, l2norm 8·rows·cols; rows longer than l2norm's 16384-column register tile read x twice, so
their actual traffic, ``traffic GB/s``, is 1.5× that). With torch importable the tensors are torch CUDA tensors
used in place, and the run also times torch's equivalent and ``Tensor.copy_`` of the same bytes (the bandwidth
ceiling: ``copy`` for the vector, ``copy_2d`` for the matrix); each kernel's ratio to it is printed and written.
Without torch, DeviceBuffers (no ratios). The launch overhead
(host µs per call of a tiny launch: a full ``k(...)`` call, the compiled kernel's packed launch, a prepared call
site ``k.prepare(...)()`` and the same site given new tensors) is measured too.
Writes JSON (default ``$OUT/bench_elementwise.json`` or ``./bench_elementwise.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from ptxgen.ir.text import parse_module  # noqa: E402
from ptxgen.runtime import DeviceBuffer, context, device_name, jit, synchronize  # noqa: E402


def _check(out):
    err = out[0] if isinstance(out, tuple) else out
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver call failed: {err}")
    return out[1] if isinstance(out, tuple) and len(out) > 1 else None


class EventTimer:
    """Median kernel time (ms) of ``fn`` on the legacy default stream, measured with CUDA events."""

    def __init__(self):
        from cuda.bindings import driver as cu

        self.cu = cu
        context()
        self.start = _check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT))
        self.end = _check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT))
        self.stream = cu.CUstream(0)

    def time(self, fn, warmup: int, reps: int, inner: int = 5) -> dict:
        """Each repetition: event, ``inner`` back-to-back calls (the queue stays busy, so host launch cost
        between them is hidden), event; the time per call is the elapsed time / inner."""
        cu = self.cu
        for _ in range(warmup):
            fn()
        synchronize()
        times = []
        for _ in range(reps):
            _check(cu.cuEventRecord(self.start, self.stream))
            for _ in range(inner):
                fn()
            _check(cu.cuEventRecord(self.end, self.stream))
            _check(cu.cuEventSynchronize(self.end))
            times.append(float(_check(cu.cuEventElapsedTime(self.start, self.end))) / inner)
        return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "reps": reps,
                "calls_per_rep": inner}


def host_us_per_call(fn, calls: int) -> float:
    fn()
    synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    synchronize()
    return (t1 - t0) / calls * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 28, help="sqrt_sin elements (f32)")
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=16384)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--calls", type=int, default=2000, help="calls for the launch-overhead measurement")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    out_path = args.json or os.path.join(os.environ.get("OUT", "."), "bench_elementwise.json")

    try:
        import torch
    except ImportError:
        torch = None

    context()
    timer = EventTimer()
    rng = np.random.default_rng()
    sqrt_sin = jit(parse_module((ROOT / "examples/sqrt_sin.tile").read_text(), file="examples/sqrt_sin.tile"))
    l2norm = jit(parse_module((ROOT / "examples/l2norm.tile").read_text(), file="examples/l2norm.tile"))
    n, rows, cols = args.n, args.rows, args.cols
    if torch is not None:
        x = torch.rand(n, device="cuda", dtype=torch.float32) * float(np.pi)
        z = torch.empty_like(x)
        a = torch.randn(rows, cols, device="cuda", dtype=torch.float32)
        b = torch.empty_like(a)
    else:
        x = DeviceBuffer.from_numpy(rng.uniform(0, np.pi, n).astype(np.float32))
        z = DeviceBuffer.from_numpy(np.zeros(n, np.float32))
        a = DeviceBuffer.from_numpy(rng.standard_normal((rows, cols)).astype(np.float32))
        b = DeviceBuffer.from_numpy(np.zeros((rows, cols), np.float32))

    results = {"device": device_name(), "torch": getattr(torch, "__version__", None), "n": n, "rows": rows,
               "cols": cols, "kernels": {}}

    def record(name, fn, nbytes, traffic=None, extra=None):
        r = timer.time(fn, args.warmup, args.reps)
        r["bytes"] = nbytes
        r["gbps"] = nbytes / (r["median_ms"] * 1e-3) / 1e9
        if traffic:
            r["traffic_gbps"] = traffic / (r["median_ms"] * 1e-3) / 1e9
        r.update(extra or {})
        results["kernels"][name] = r
        return r

    # -- correctness first (float64 references on these fresh inputs) -------------------------------------------
    if torch is not None:
        sqrt_sin(x=x, z=z, n=n)
        torch.cuda.synchronize()
        ref = torch.sqrt(torch.sin(x.double()))
        results["sqrt_sin_max_abs_err"] = float((z.double() - ref).abs().max())
        l2norm(x=a, y=b, m=rows, eps=1e-6)
        ref = a.double() / torch.sqrt((a.double() ** 2).sum(1, keepdim=True) + 1e-6)
        results["l2norm_max_abs_err"] = float((b.double() - ref).abs().max())
        if results["sqrt_sin_max_abs_err"] > 1e-5 or results["l2norm_max_abs_err"] > 1e-5:
            raise SystemExit(f"wrong results: {results}")

    # -- ours ------------------------------------------------------------------------------------------------
    spec = sqrt_sin.specialization(x=x, z=z, n=n)
    c = sqrt_sin.compile(spec)
    record("sqrt_sin", lambda: sqrt_sin(x=x, z=z, n=n), 8 * n,
           extra={"spec": str(spec), "registers": c.registers, "ptx_instructions": len(c.ptx_instructions())})
    spec = l2norm.specialization(x=a, y=b, m=rows, eps=1e-6)
    c = l2norm.compile(spec)
    record("l2norm", lambda: l2norm(x=a, y=b, m=rows, eps=1e-6), 8 * rows * cols,
           (8 if cols <= 16384 else 12) * rows * cols,
           extra={"spec": str(spec), "registers": c.registers, "ptx_instructions": len(c.ptx_instructions())})

    # -- torch and the copy ceiling ---------------------------------------------------------------------------
    if torch is not None:
        def torch_sqrt_sin():
            torch.sin(x, out=z)
            z.sqrt_()

        def torch_l2norm():
            torch.mul(a, torch.rsqrt(a.square().sum(dim=1, keepdim=True).add_(1e-6)), out=b)

        record("torch_sqrt_sin", torch_sqrt_sin, 8 * n)
        record("torch_l2norm", torch_l2norm, 8 * rows * cols)
        record("copy", lambda: z.copy_(x), 8 * n)
        record("copy_2d", lambda: b.copy_(a), 8 * rows * cols)
        for name, ceiling in (("sqrt_sin", "copy"), ("l2norm", "copy_2d")):
            results["kernels"][name]["ratio_to_copy"] = results["kernels"][name]["gbps"] / results["kernels"][ceiling]["gbps"]
    # -- launch overhead ----------------------------------------------------------------------------------------
    small = 1024
    if torch is not None:
        xs = torch.rand(small, device="cuda")
        zs = torch.empty_like(xs)
    else:
        xs = DeviceBuffer.from_numpy(np.zeros(small, np.float32))
        zs = DeviceBuffer.from_numpy(np.zeros(small, np.float32))
    sqrt_sin(x=xs, z=zs, n=small)
    ck = sqrt_sin._load(sqrt_sin.specialization(x=xs, z=zs, n=small))
    values = sqrt_sin.argument_values(x=xs, z=zs, n=small)
    site = sqrt_sin.prepare(x=xs, z=zs, n=small)
    overhead = {
        "jit_call_us": host_us_per_call(lambda: sqrt_sin(x=xs, z=zs, n=small), args.calls),
        "compiled_launch_us": host_us_per_call(lambda: ck.launch(values, (1, 1, 1)), args.calls),
        "prepared_site_us": host_us_per_call(site, args.calls),
        "prepared_site_new_pointers_us": host_us_per_call(lambda: site(x=xs, z=zs), args.calls),
    }
    if torch is not None:
        overhead["torch_add_us"] = host_us_per_call(lambda: xs.add_(1.0), args.calls)
    results["launch_overhead"] = overhead

    # -- report -------------------------------------------------------------------------------------------------
    ks = results["kernels"]
    print(f"device: {results['device']}   torch: {results['torch']}")
    print(f"{'kernel':<16} {'median ms':>10} {'GB/s':>8} {'traffic GB/s':>13}  notes")
    for name, r in ks.items():
        note = []
        if "spec" in r:
            note.append(f"spec {r['spec']}, {r['registers']} regs, {r['ptx_instructions']} PTX instrs")
        base = name.replace("torch_", "")
        if name.startswith("torch_") and base in ks:
            note.append(f"ours is {r['median_ms'] / ks[base]['median_ms']:.2f}x faster")
        if "ratio_to_copy" in r:
            note.append(f"{r['ratio_to_copy']:.1%} of {'copy' if name == 'sqrt_sin' else 'copy_2d'}")
        print(f"{name:<16} {r['median_ms']:>10.3f} {r['gbps']:>8.0f} {r.get('traffic_gbps', r['gbps']):>13.0f}  "
              + "; ".join(note))
    print("launch overhead (host µs per call): " + ", ".join(f"{k} {v:.2f}" for k, v in overhead.items()))
    for key in ("sqrt_sin_max_abs_err", "l2norm_max_abs_err"):
        if key in results:
            print(f"{key}: {results[key]:.3g}")
    pathlib.Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {out_path}")
    return results


if __name__ == "__main__":
    main()
