"""Bandwidth of the TMA multistage copy (examples/tma_copy.tile, ptxgen.kernels.tma_copy.build() variants) against
a device-to-device
copy (torch ``y.copy_(x)``) on a large f32 matrix, measured in the same run.

    python benchmarks/bench_tma_copy.py [--m 16384] [--n 16384] [--runs 20] [--json out.json]

Each variant copies a fresh random matrix, is checked to equal it exactly, then is timed with CUDA events: the
median of ``--runs`` launches (prepared call sites, so the host adds nothing) after three warm-up launches. GB/s
counts the bytes read plus the bytes written (2·M·N·4), as for the copy. The issue's goal: ≥ 90% of copy.
Writes JSON to ``--json`` or, when $OUT is set, ``$OUT/bench_tma_copy.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (label, build() keyword arguments): the example's defaults (16 x 256 f32 boxes, no swizzle, 8 stages) first, then
# other box shapes and depths of the same kernel text, and the SW128 form (64 x 32 boxes: 128-byte rows) that the
# example used before (2 stages: 70% of copy on 2026-11-24)
VARIANTS = [("tma_copy 16x256 s8 (example)", {}),
            ("tma_copy 16x256 s4", dict(stages=4)), ("tma_copy 32x256 s4", dict(bm=32, stages=4)),
            ("tma_copy 8x256 s8", dict(bm=8)), ("tma_copy 64x128 s4", dict(bm=64, bn=128, stages=4)),
            ("sw128 64x32 s2 (former example)", dict(bm=64, stages=2, swizzle=True)),
            ("sw128 64x32 s8", dict(bm=64, stages=8, swizzle=True))]


def _time_ms(torch, fn, runs: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv=None) -> dict:
    import torch

    from ptxgen.runtime import jit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    m, n = args.m, args.n
    nbytes = 2 * m * n * 4
    x = torch.randn((m, n), device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    copy_ms = _time_ms(torch, lambda: y.copy_(x), args.runs)
    rows = [("torch y.copy_(x)", copy_ms, None)]
    from ptxgen.ir.text import parse_module

    from ptxgen.kernels import tma_copy

    example = parse_module((ROOT / "examples" / "tma_copy.tile").read_text(), file="examples/tma_copy.tile")
    kernels = [(label, example if not kw else tma_copy.build(**kw)) for label, kw in VARIANTS]
    for label, module in kernels:
        k = jit(module)
        x.copy_(torch.randn_like(x))  # fresh input per variant
        y.fill_(-7.0)
        site = k.prepare(x=x, y=y, m=m, n=n)
        site()
        torch.cuda.synchronize()
        if not torch.equal(y, x):
            raise SystemExit(f"{label}: the copy differs from its input")
        ms = _time_ms(torch, site, args.runs)
        rows.append((label, ms, k.smem_bytes))
    print(f"device: {torch.cuda.get_device_name()}   torch: {torch.__version__}   matrix {m}x{n} f32 "
          f"({nbytes / 2**30:.2f} GiB moved per copy: read + write)")
    print(f"{'kernel':<30}{'median ms':>10}{'GB/s':>9}{'of copy':>9}{'smem B':>9}")
    result = {"m": m, "n": n, "bytes": nbytes, "device": torch.cuda.get_device_name(), "rows": []}
    for label, ms, smem in rows:
        gbs = nbytes / ms / 1e6
        ratio = copy_ms / ms
        print(f"{label:<30}{ms:>10.3f}{gbs:>9.0f}{100 * ratio:>8.1f}%{'' if smem is None else smem:>9}")
        result["rows"].append({"kernel": label, "median_ms": ms, "gb_s": gbs, "ratio_to_copy": ratio,
                               "smem_bytes": smem})
    example = result["rows"][1]
    best = max(result["rows"][1:], key=lambda r: r["ratio_to_copy"])
    print(f"example (examples/tma_copy.tile: 16x256, 8 stages): {example['gb_s']:.0f} GB/s = "
          f"{100 * example['ratio_to_copy']:.1f}% of copy bandwidth (goal >= 90%); best variant "
          f"{best['kernel']}: {100 * best['ratio_to_copy']:.1f}%")
    out = args.json or (os.path.join(os.environ["OUT"], "bench_tma_copy.json") if os.environ.get("OUT") else None)
    if out:
        pathlib.Path(out).write_text(json.dumps(result, indent=2))
        print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
