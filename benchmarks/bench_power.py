"""Sustained throughput with the power and SM clock it runs at, each kernel for seconds: the GEMM against cuBLAS, or
attention against cuDNN's and FlashAttention-2's SDPA.

    python benchmarks/bench_power.py [--dtypes bf16,e4m3] [--shape 8192x8192x8192] [--variants h128x256s4t2,...]
                                   [--seconds 2.5] [--passes 2]
    python benchmarks/bench_power.py --attention 64:1024:causal,64:8192,128:16384 [--seconds 2] [--passes 2]

An H100 SXM running a large GEMM sits at its power limit (700 W): the driver lowers the SM clock until the board
draws no more. Throughput is then TC work per clock × the clock the power allows, and two kernels compare by
energy per FLOP, not by cycles alone. Per kernel (cuBLAS through torch, then each variant (GemmConfig name) of
bench_gemm's naming, every one checked against float64 first): back-to-back launches for ``--seconds`` while
``nvidia-smi`` samples power.draw and clocks.sm every 20 ms; the first 30% of each window (the clock settling) is
left out of both the timing (CUDA events per launch, median) and the samples (median). ``--passes`` repeats the
whole sequence. Prints TFLOP/s, W, MHz, TFLOP/s per GHz (work per clock) and GFLOP/J; JSON to
$OUT/bench_power.json (or ./bench_power.json).

``--attention D:S[:causal],...``: bench_attention's problems (16k tokens, hidden 2048: B = 16384 / S, H = 2048 / D,
bf16), ``ptxgen.kernels.attention``'s choice against SDPA's cuDNN and FlashAttention-2 backends, ours checked against
float64 on sampled rows first. Attention's separate-window column moves with these clocks: a kernel that draws more
power per cycle runs at a lower clock once it has the GPU to itself, where interleaved timing shares the clock.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

DEFAULT_VARIANTS = {"bf16": "h128x256s4t2,h128x256s4c2t2", "f16": "h128x256s4t2,h128x256s4c2t2",
                    "e4m3": "h128x192s4k4t"}


def sample_clock_and_power(log):
    """A running ``nvidia-smi`` that writes ``timestamp, power.draw, clocks.sm`` every 20 ms to the open file ``log``
    (a file, not a pipe: nobody reads a pipe until the end, and its buffer fills within a minute, stopping the
    sampler)."""
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,power.draw,clocks.sm",
                             "--format=csv,noheader,nounits", "-lms", "20"], stdout=log, text=True)


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


def gemm_runners(torch, args) -> dict:
    """name → (callable, FLOPs of one call, problem): cuBLAS and the variants on ``args.shape``, each checked against
    float64 first."""
    import bench_gemm as bg  # this script's own directory is on sys.path (it puts the repository first)

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
        runners.update({name: (fn, 2.0 * m * n * k, args.shape) for name, fn in candidates.items()})
    return runners


def attention_runners(torch, cases: str) -> dict:
    """name → (callable, FLOPs, problem) for ``D:S[:causal]`` cases: ``ptxgen.kernels.attention``'s choice (its
    prepared site) checked against float64 on 256 sampled rows (out within 1e-2, lse within 1e-4 relative), and
    SDPA's cuDNN and FlashAttention-2 backends, on bench_attention's problem of 16k tokens, hidden 2048."""
    import math

    import bench_attention as ba
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from ptxgen.kernels.attention import attention, choose_config
    from ptxgen.kernels.attention import run as attention_run

    runners = {}
    for case in cases.split(","):
        fields = case.split(":")
        d, s, causal = int(fields[0]), int(fields[1]), fields[2:] == ["causal"]
        if fields[2:] not in ([], ["causal"]):
            raise SystemExit(f"bench_power: --attention cases are D:S or D:S:causal, not {case!r}")
        h, b = 2048 // d, max(1, 16384 // s)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.empty(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        config = choose_config("bf16", d, causal, seqlens=(s, s))
        rows = torch.randperm(s, device="cuda")[:256].sort().values
        want, want_lse = ba.sampled_reference(torch, q, k, v, causal, rows)
        got, got_lse = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal, config=config)
        got = got.transpose(1, 2)[0, :2, rows]
        err = (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()
        lse_err = ((got_lse[0, :2, rows].double() - want_lse).abs() / want_lse.abs()).max().item()
        if err > 1e-2 or lse_err > 1e-4:
            raise SystemExit(f"ptxgen attention {case}: relative error {err:.2e}, lse {lse_err:.2e}; not timing it")

        def sdpa(backend, q=q, k=k, v=v, causal=causal):
            def call():
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return call

        work = ba.flops(b, h, s, d, causal)
        site = attention_run.prepared_site(config, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), out, lse,
                                           1 / math.sqrt(d))
        for name, fn in (("ptxgen", site), ("cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
                         ("fa2", sdpa(SDPBackend.FLASH_ATTENTION))):
            runners[f"{name} {case}"] = (fn, work, case)
    return runners


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="bf16,e4m3")
    ap.add_argument("--shape", default="8192x8192x8192")
    ap.add_argument("--variants", default=None, help="bench_gemm variant names (default: DEFAULT_VARIANTS per dtype)")
    ap.add_argument("--attention", default=None, help="D:S[:causal] cases, comma-separated: attention instead of GEMM")
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args(argv)

    import torch

    runners = attention_runners(torch, args.attention) if args.attention else gemm_runners(torch, args)

    with tempfile.TemporaryFile("w+") as log:
        smi = sample_clock_and_power(log)
        time.sleep(0.5)
        windows = []
        for _ in range(args.passes):
            for name, (fn, _work, _problem) in runners.items():
                fn()
                torch.cuda.synchronize()
                ms, span = sustained_window(torch, fn, args.seconds)
                windows.append((name, ms, span))
                time.sleep(0.3)
        smi.terminate()
        smi.wait()
        log.seek(0)
        samples = parse_samples(log.read())

    rows = []
    print(f"\n{args.seconds} s per window, {args.passes} passes (settled 70% of each window)")
    print(f"{'kernel':28s} {'TFLOP/s':>8s} {'W':>6s} {'MHz':>6s} {'TFLOP/s/GHz':>12s} {'GFLOP/J':>8s}")
    for name, ms, (t0, t1) in windows:
        _fn, work, problem = runners[name]
        inside = [s for s in samples if t0 <= s[0] <= t1]
        watts = statistics.median(s[1] for s in inside) if inside else float("nan")
        mhz = statistics.median(s[2] for s in inside) if inside else float("nan")
        tflops = work / ms / 1e9
        row = {"kernel": name, "problem": problem, "ms": ms, "tflops": tflops, "watts": watts, "mhz": mhz,
               "samples": len(inside), "tflops_per_ghz": tflops / mhz * 1e3, "gflop_per_joule": tflops * 1e3 / watts}
        rows.append(row)
        print(f"{name:28s} {tflops:8.1f} {watts:6.1f} {mhz:6.0f} {row['tflops_per_ghz']:12.1f} "
              f"{row['gflop_per_joule']:8.0f}")
    out = pathlib.Path(os.environ.get("OUT", ".")) / "bench_power.json"
    out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
