"""The staircase: the flagship GEMM one technique at a time, every step timed together with cuBLAS on one shape.

    python benchmarks/bench_staircase.py [--shape 8192x8192x8192] [--dtype bf16] [--rounds 3]

The steps (bench_gemm variant names; CTAs launched in brackets), each adding one thing to the one before:

  1. warp-specialized, one tile per CTA: the simple GEMM (ptxgen.kernels.gemm.simple), a TMA producer warpgroup and two wgmma consumer warpgroups
     on a 4-stage mbarrier pipeline, 128 × 256 tiles (``s128x256s4``) [one CTA per tile];
  2. the flagship (ptxgen.kernels.gemm), still one tile per CTA, each k-tile's wgmmas waited for (``h128x256s4p0``) [one CTA per tile];
  3. persistent: one CTA per SM walking tiles with an iteration counter that runs across them (same variant) [SMs];
  4. one wgmma group kept in flight across k-tiles, the previous stage released (``h128x256s4``);
  5. clusters of 2 along M sharing B by TMA multicast (``h128x256s4c2``);
  6. C by stmatrix into swizzled smem halves and TMA stores (``h128x256s4c2t2``);
  7. that epilogue behind the next tile's first k-tile of wgmmas (``h128x256s4c2t2o1``);
  8. stream-K for the last partial wave (``h128x256s4c2t2sk``).

The well-known staircase for this kernel begins with one warpgroup issuing both the loads and the wgmmas (~490
TFLOP/s at 8192³ bf16 on an H100); ours are warp-specialized from the first kernel, so step 1 is its second rung.
Every kernel is checked against float64 on fresh random inputs first; then in each of ``--rounds`` rounds all of them
alternate launch by launch (bench_gemm.time_interleaved) and the median over the rounds is reported: TFLOP/s, the
ratio to cuBLAS and to the step before. JSON to $OUT/bench_staircase.json (or ./bench_staircase.json).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics

# (step, what it adds, variant, one CTA per tile?)
STEPS = [
    (1, "warp-specialized producer/consumers, one tile per CTA (the simple GEMM)", "s128x256s4", True),
    (2, "the flagship, one tile per CTA, every k-tile waited for", "h128x256s4p0", True),
    (3, "persistent (a CTA per SM, tiles in raster groups)", "h128x256s4p0", False),
    (4, "one wgmma group in flight, previous stage released", "h128x256s4", False),
    (5, "clusters of 2, B multicast", "h128x256s4c2", False),
    (6, "C by stmatrix + TMA stores (halves)", "h128x256s4c2t2", False),
    (7, "epilogue behind the next tile's first k-tile", "h128x256s4c2t2o1", False),
    (8, "stream-K for the last partial wave", "h128x256s4c2t2sk", False),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="8192x8192x8192")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--warmup-ms", type=float, default=25.0)
    args = ap.parse_args(argv)

    import bench_gemm as bg  # this script's own directory is on sys.path (it puts the repository first)
    import torch

    from ptxgen.runtime import jit

    m, n, k = (int(x) for x in args.shape.split("x"))
    kind = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn(m, k, device="cuda").to(kind)
    b = torch.randn(n, k, device="cuda").to(kind)
    c = torch.empty(m, n, device="cuda", dtype=kind)
    want = a.double() @ b.double().T
    flops = 2.0 * m * n * k
    runners = {"cuBLAS": lambda: torch.matmul(a, b.T, out=c)}
    ctas = {"cuBLAS": None}
    kernels = {}
    for step, _what, variant, per_tile in STEPS:
        if variant not in kernels:
            module, needs_sms = bg.variant_kernel(variant, args.dtype)
            kernels[variant] = (jit(module), needs_sms)
        kern, needs_sms = kernels[variant]
        if needs_sms:
            tiles = -(-m // 128) * -(-n // 256)
            extra = {"sms": tiles if per_tile else sms, **bg.variant_buffers(torch, variant, sms, args.dtype)}
            operands = bg.variant_arguments(variant, args.dtype, a, b, c, m, n, k)
            site = (kern.prepare(**operands, **extra) if per_tile else bg.prepare_persistent(kern, extra, **operands))
            ctas[step] = extra["sms"]
        else:
            site = kern.prepare(a=a, b=b, c=c, m=m, n=n, k=k)
            ctas[step] = -(-m // 128) * -(-n // 256)
        runners[step] = site
    bg.check_all(torch, {f"step {name}" if name != "cuBLAS" else name: fn for name, fn in runners.items()}, c, want)
    samples = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, ms in bg.time_interleaved(torch, dict(runners), args.warmup_ms, args.rep_ms).items():
            samples[name].append(ms)
    tflops = {name: flops / statistics.median(ms) / 1e9 for name, ms in samples.items()}

    print(f"\n{args.dtype} {args.shape}: TFLOP/s, median of {args.rounds} interleaved rounds "
          f"(cuBLAS {tflops['cuBLAS']:.1f})")
    print(f"{'step':>4}  {'variant':18s} {'CTAs':>6s} {'TFLOP/s':>8s} {'/cuBLAS':>8s} {'/prev':>6s}  adds")
    rows, previous = [], None
    for step, what, variant, _per_tile in STEPS:
        t = tflops[step]
        row = {"step": step, "adds": what, "variant": variant, "ctas": ctas[step], "tflops": t,
               "ratio_to_cublas": t / tflops["cuBLAS"], "ratio_to_previous": t / previous if previous else None}
        rows.append(row)
        print(f"{step:4d}  {variant:18s} {ctas[step]:6d} {t:8.1f} {row['ratio_to_cublas']:8.3f} "
              f"{(t / previous if previous else float('nan')):6.3f}  {what}")
        previous = t
    out = pathlib.Path(os.environ.get("OUT", ".")) / "bench_staircase.json"
    out.write_text(json.dumps({"dtype": args.dtype, "shape": args.shape, "rounds": args.rounds,
                               "cublas_tflops": tflops["cuBLAS"], "steps": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
