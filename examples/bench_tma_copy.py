"""Bandwidth of the TMA multistage copy (examples/tma_copy.tile and its build() variants) against a device-to-device
copy (torch ``y.copy_(x)``) on a large f32 matrix.

    python examples/bench_tma_copy.py [--m 16384] [--n 16384] [--runs 20] [--json out.json]

Each variant copies a fresh random matrix, is checked to equal it exactly, then is timed with CUDA events: the
median of ``--runs`` launches (prepared call sites, so the host adds nothing) after three warm-up launches. GB/s
counts the bytes read plus the bytes written (2·M·N·4), as for the copy. The issue's goal: ≥ 90% of copy.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics

HERE = pathlib.Path(__file__).resolve().parent

# (label, build(dtype, bm, stages) arguments): the example's 64x32 SW128 tile with 2 stages, then deeper rings and
# taller bands (same IR design: one producer and one consumer thread per CTA, a band of bm rows per CTA)
VARIANTS = [("tma_copy 64x32 s2 (example)", ("f32", 64, 2)), ("tma_copy 64x32 s4", ("f32", 64, 4)),
            ("tma_copy 64x32 s8", ("f32", 64, 8)), ("tma_copy 128x32 s8", ("f32", 128, 8))]
# wide_variant(bm, bn, stages): the same kernel text with unswizzled bm x bn boxes (rows of bn·4 contiguous bytes:
# fewer, longer DRAM bursts per box than the 128-byte rows of SW128)
WIDE = [(32, 256, 4), (16, 256, 4), (16, 256, 8), (8, 256, 8), (64, 128, 4)]


def wide_variant(bm: int, bn: int, stages: int):
    """examples/tma_copy.tile with its tile parameters replaced: box ``(bm,bn):(bn,1)`` (no swizzle), a ring of
    ``stages``, expect-tx of bm·bn·4 bytes; every op and the producer/consumer protocol unchanged."""
    from ptxgen.ir.text import parse_module

    text = (HERE / "tma_copy.tile").read_text()
    subs = [("Sw<3,4,3> o 0 o (64,32,2):(32,1,2048)", f"({bm},{bn},{stages}):({bn},1,{bm * bn})"),
            ("Sw<3,4,3> o 0 o (64,32):(32,1)", f"({bm},{bn}):({bn},1)"),
            ("%stages = arith.const {value = 2}", f"%stages = arith.const {{value = {stages}}}"),
            ("%lead = arith.const {value = 1}", f"%lead = arith.const {{value = {stages - 1}}}"),
            ("%bm = arith.const {value = 64}", f"%bm = arith.const {{value = {bm}}}"),
            ("%bn = arith.const {value = 32}", f"%bn = arith.const {{value = {bn}}}"),
            ("%full = mbarrier.alloc {count = 2} : mbarrier<2>",
             f"%full = mbarrier.alloc {{count = {stages}}} : mbarrier<{stages}>"),
            ("%empty = mbarrier.alloc {count = 2} : mbarrier<2>",
             f"%empty = mbarrier.alloc {{count = {stages}}} : mbarrier<{stages}>"),
            ("cdiv(%m, 64)", f"cdiv(%m, {bm})"), ("{bytes = 8192}", f"{{bytes = {bm * bn * 4}}}")]
    for old, new in subs:
        if old not in text:
            raise SystemExit(f"examples/tma_copy.tile changed: {old!r} not found")
        text = text.replace(old, new)
    return parse_module(text, file=f"tma_copy[{bm}x{bn} s{stages}]")


def _twin():
    spec = importlib.util.spec_from_file_location("example_tma_copy", HERE / "tma_copy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    twin = _twin()
    kernels = [(label, twin.build(*a)) for label, a in VARIANTS]
    kernels += [(f"wide {bm}x{bn} s{st} (no swizzle)", wide_variant(bm, bn, st)) for bm, bn, st in WIDE]
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
    print(f"example (64x32, 2 stages): {100 * example['ratio_to_copy']:.1f}% of copy bandwidth; best variant "
          f"{best['kernel']}: {100 * best['ratio_to_copy']:.1f}% (goal >= 90%)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return result


if __name__ == "__main__":
    main()
