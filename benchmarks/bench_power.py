"""Sustained GEMM throughput with the power and SM clock it runs at: ours against cuBLAS, each for seconds.

    python benchmarks/bench_power.py [--dtypes bf16,e4m3] [--shape 8192x8192x8192] [--variants h128x256s4t2,...]
                                   [--seconds 2.5] [--passes 2]

An H100 SXM running a large GEMM sits at its power limit (700 W): the driver lowers the SM clock until the board
draws no more. Throughput is then TC work per clock × the clock the power allows, and two kernels compare by
energy per FLOP, not by cycles alone. Per kernel (cuBLAS through torch, then each variant (GemmConfig name) of
bench_gemm's naming, every one checked against float64 first): back-to-back launches for ``--seconds`` while
``nvidia-smi`` samples power.draw and clocks.sm every 20 ms; the first 30% of each window (the clock settling) is
left out of both the timing (CUDA events per launch, median) and the samples (median). ``--passes`` repeats the
whole sequence. Prints TFLOP/s, W, MHz, TFLOP/s per GHz (work per clock) and GFLOP/J; JSON to
$OUT/bench_power.json (or ./bench_power.json).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import time

DEFAULT_VARIANTS = {"bf16": "h128x256s4t2,h128x256s4c2t2", "f16": "h128x256s4t2,h128x256s4c2t2",
                    "e4m3": "h128x192s4k4t"}


def sample_clock_and_power():
    """A running ``nvidia-smi`` that prints ``timestamp, power.draw, clocks.sm`` every 20 ms."""
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,power.draw,clocks.sm",
                             "--format=csv,noheader,nounits", "-lms", "20"], stdout=subprocess.PIPE, text=True)


def parse_samples(text: str) -> list:
    """``nvidia-smi`` lines → [(unix time, watts, MHz)]; lines it could not measure (``[N/A]``) are left out."""
    samples = []
    for line in text.strip().splitlines():
        try:
            stamp, watts, mhz = (field.strip() for field in line.split(","))
            when = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((when, float(watts), float(mhz)))
        except ValueError:
            continue
    return samples


def sustained_window(torch, fn, seconds: float):
    """Back-to-back launches of ``fn`` for ``seconds`` → (median ms per launch over the settled 70%, (start,
    end) unix times of that settled part)."""
    start = time.time()
    events = []
    while time.time() - start < seconds:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        events.append((begin, end))
        if len(events) % 64 == 0:
            end.synchronize()          # keep the queue short: the host's clock must track the GPU's
    torch.cuda.synchronize()
    stop = time.time()
    settled = events[int(len(events) * 0.3):]
    return (statistics.median(b.elapsed_time(e) for b, e in settled),
            (start + 0.3 * (stop - start), stop))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="bf16,e4m3")
    ap.add_argument("--shape", default="8192x8192x8192")
    ap.add_argument("--variants", default=None, help="bench_gemm variant names (default: DEFAULT_VARIANTS per dtype)")
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args(argv)

    import bench_gemm as bg  # this script's own directory is on sys.path (it puts the repository first)
    import torch

    from ptxgen.runtime import jit

    m, n, k = (int(x) for x in args.shape.split("x"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}
    runners = {}
    for dtype in args.dtypes.split(","):
        fp8 = dtype == "e4m3"
        a = torch.randn(m, k, device="cuda").to(torch_dtype[dtype])
        b = torch.randn(n, k, device="cuda").to(torch_dtype[dtype])
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16 if fp8 else torch_dtype[dtype])
        want = a.double() @ b.double().T * (0.125 if fp8 else 1.0)
        if fp8:
            scale_a, scale_b = torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda")
            cublas = (lambda a=a, b=b, c=c, sa=scale_a, sb=scale_b:
                      torch._scaled_mm(a, b.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=c))
        else:
            cublas = (lambda a=a, b=b, c=c: torch.matmul(a, b.T, out=c))
        candidates = {f"cublas {dtype}": cublas}
        for variant in (args.variants or DEFAULT_VARIANTS[dtype]).split(","):
            module, needs_sms = bg.variant_kernel(variant, dtype)
            kern = jit(module)
            extra = {"sms": sms, **bg.variant_buffers(torch, variant, sms, dtype)} if needs_sms else {}
            if fp8:
                extra.update(scale_a=0.5, scale_b=0.25)
            candidates[f"{variant} {dtype}"] = bg.prepare_persistent(
                kern, extra, **bg.variant_arguments(variant, dtype, a, b, c, m, n, k))
        bg.check_all(torch, candidates, c, want)
        runners.update(candidates)

    smi = sample_clock_and_power()
    time.sleep(0.5)
    windows = []
    for _ in range(args.passes):
        for name, fn in runners.items():
            ms, span = sustained_window(torch, fn, args.seconds)
            windows.append((name, ms, span))
            time.sleep(0.3)
    smi.terminate()
    samples = parse_samples(smi.communicate()[0])

    rows = []
    flops = 2.0 * m * n * k
    print(f"\n{args.shape}, {args.seconds} s per window, {args.passes} passes (settled 70% of each window)")
    print(f"{'kernel':24s} {'TFLOP/s':>8s} {'W':>6s} {'MHz':>6s} {'TFLOP/s/GHz':>12s} {'GFLOP/J':>8s}")
    for name, ms, (t0, t1) in windows:
        inside = [s for s in samples if t0 <= s[0] <= t1]
        watts = statistics.median(s[1] for s in inside) if inside else float("nan")
        mhz = statistics.median(s[2] for s in inside) if inside else float("nan")
        tflops = flops / ms / 1e9
        row = {"kernel": name, "shape": args.shape, "ms": ms, "tflops": tflops, "watts": watts, "mhz": mhz,
               "samples": len(inside), "tflops_per_ghz": tflops / mhz * 1e3, "gflop_per_joule": tflops * 1e3 / watts}
        rows.append(row)
        print(f"{name:24s} {tflops:8.1f} {watts:6.1f} {mhz:6.0f} {row['tflops_per_ghz']:12.1f} "
              f"{row['gflop_per_joule']:8.0f}")
    out = pathlib.Path(os.environ.get("OUT", ".")) / "bench_power.json"
    out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
