"""Block-scaled fp8 GEMM benchmark: ``ptxgen.kernels.fp8_gemm_nt`` (DeepGEMM's conventions) against cuBLAS's
block-scaled path (``torch._scaled_mm`` with (M, ⌈K/128⌉) M-major A scales and (⌈N/128⌉, ⌈K/128⌉)ᵀ B scales) in the
same run, with DeepGEMM's own figures (issue 19's anchors, measured on the same H100 model) printed beside; and the
quantizers' bandwidth against a device copy.

    python benchmarks/bench_fp8.py [--shapes 4096x2112x7168,...] [--rounds 3] [--rep-ms 100] [--warmup-ms 25]
                                   [--timing both|interleaved|windows] [--dobench] [--no-quantize] [--variants a,b,c]
                                   [--quantize-only] [--quantize-variants narrow,wide] [--quantize-shapes 4096x7168,...]

Shapes: DeepSeek-V3's, M ∈ {64, 128, 4096} × (N, K) ∈ {(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384),
(4096, 7168), (7168, 2048)}; the grouped GEMMs on issue 19's MoE cases (contiguous 4 × 8192 and 8 × 4096 tokens,
masked 1 × 1024, 2 × 512, 4 × 256 expected rows; N × K 4096 × 7168 and 7168 × 2048) against a loop of cuBLAS
block-scaled calls per group and (contiguous) our dense GEMM of the same total M, interleaved. Per shape: fresh bf16
activations and weights, quantized by our kernels (per token, the scales in DeepGEMM's M-major TMA-aligned layout;
weights per 128 × 128 block); the results of both GEMMs are CHECKED
FIRST against float64 of the dequantized operands (relative Frobenius error; ours must be within 1e-2 or the shape is
reported and not timed; the ratio of our error to cuBLAS's is printed: the issue asks ≤ 1.05). Timing (see
benchmarks/bench_gemm.py's ``time_interleaved`` / ``time_ms``): CUDA events around every launch, medians after
warm-up, the kernels alternating launch by launch (``interleaved``) and in separate windows (``windows``), the median
over ``--rounds`` rounds; ours is its prepared call site (``fp8.prepared_site``: the op's own launch). For M ≤ 128
the kernels run 10–50 µs, so the benchmark also gives each one's KERNEL time — one event pair around 200 back-to-back
launches enqueued while the GPU is held busy by ``torch.cuda._sleep`` (the host ahead) — and the HOST time per call
of the ops (``fp8_gemm_nt`` and ``torch._scaled_mm`` called in a loop, wall clock per call). ``--dobench`` also
times ours and cuBLAS (grouped: ours and the cuBLAS loop) with ``triton.testing.do_bench`` medians — the method the
anchors were measured with (it clears the L2 between launches, so the GPU runs below its sustained power limit) — and
compares ours with the anchors that way too. TFLOP/s = 2·M·N·K / time. Per M: the geometric mean of our/cuBLAS ratios and the smallest. JSON to $OUT/bench_fp8.json (or
./bench_fp8.json); the table is printed last.

``--variants h128x128s6tBf,h128x192s4to1Bfw,...`` (``GemmConfig`` names, e4m3; see ``GemmConfig.name``) also times
those configurations of the kernel on every shape (the grouped cases take each variant with their grouping; a
variant the shape or grouping refuses is listed as such), each checked against float64 first and timed interleaved
with ours (the heuristic's choice) and cuBLAS; a table per shape gives each variant's TFLOP/s and its ratio to cuBLAS
(grouped: to DeepGEMM's anchor), the best marked — the sweep from which the heuristic's choice is set.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import random
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gemm import time_interleaved, time_ms  # noqa: E402

from ptxgen.kernels import GemmConfig, choose_block_scaled_config, fp8_gemm_nt  # noqa: E402
from ptxgen.kernels import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from ptxgen.kernels import get_mn_major_tma_aligned_tensor  # noqa: E402
from ptxgen.kernels.fp8 import prepared_grouped_site, prepared_site  # noqa: E402

NK = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))
DEFAULT_SHAPES = ",".join(f"{m}x{n}x{k}" for m in (64, 128, 4096) for n, k in NK)
# issue 19 / reference/fp8-attention.md: H100 80GB HBM3, 2026-11-25, triton.testing.do_bench medians, TFLOP/s
DEEPGEMM_4096 = {(2112, 7168): 1086, (24576, 1536): 1181, (32768, 512): 903, (7168, 16384): 1270, (4096, 7168): 1318,
                 (7168, 2048): 1050}
CUBLAS_4096 = {(2112, 7168): 1000, (24576, 1536): 1021, (32768, 512): 779, (7168, 16384): 1130, (4096, 7168): 1149,
               (7168, 2048): 1079}
# grouped: (layout, groups, tokens per group, N, K) -> DeepGEMM's TFLOP/s (issue 19's anchors; masked: expected M)
GROUPED = {("contiguous", 4, 8192, 4096, 7168): 1232, ("contiguous", 4, 8192, 7168, 2048): 1103,
           ("contiguous", 8, 4096, 4096, 7168): 1162, ("contiguous", 8, 4096, 7168, 2048): 1074,
           ("masked", 1, 1024, 4096, 7168): 528, ("masked", 1, 1024, 7168, 2048): 498,
           ("masked", 2, 512, 4096, 7168): 645, ("masked", 2, 512, 7168, 2048): 587,
           ("masked", 4, 256, 4096, 7168): 509, ("masked", 4, 256, 7168, 2048): 343}
BATCH = 200   # back-to-back launches of one kernel-time measurement


def rel_err(torch, got, want):
    return (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()


def dequantized(torch, q, scales, rows_per_scale: int):
    """float64 q · scale: (M, K) e4m3 with per-token (rows_per_scale 1) or per-block (128) scales."""
    m, k = q.shape
    s = scales.double().repeat_interleave(128, dim=1)[:, :k]
    if rows_per_scale > 1:
        s = s.repeat_interleave(rows_per_scale, dim=0)[:m]
    return q.double() * s


def kernel_ms(torch, fn, batch: int = BATCH) -> float:
    """GPU time of one ``fn()`` with the host ahead: a spin kernel holds the GPU while ``batch`` launches are
    enqueued after a start event; → (end - start) / batch in ms."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(2e8))
    start.record()
    for _ in range(batch):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / batch


def host_us(torch, fn, calls: int = 300) -> float:
    """Wall-clock µs per call of ``fn`` in a loop (the op's host cost where the GPU keeps up), after 20 calls."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def variant_config(name: str, grouped: str = "none") -> GemmConfig:
    """The configuration of a ``--variants`` name, with the grouping of the case (ValueError: the rules refuse it)."""
    config = GemmConfig.from_name(name, "e4m3")
    if config.scales != "block":
        raise ValueError(f"variant {name}: block-scaled configurations end in B (scales='block')")
    return config.replace(grouped=grouped).validate()


def add_variants(torch, row, fns, args, make_site, check, grouped="none") -> None:
    """Each ``--variants`` configuration as ``fns["v:<name>"]`` (its prepared call site, from ``make_site(config)``
    → (site, its output)), its relative error (``check(output)``) in ``row["variants"][name]``; a refused or wrong
    variant is recorded there and not timed."""
    row["variants"] = {}
    for name in args.variants:
        entry = row["variants"][name] = {}
        try:
            config = variant_config(name, grouped)
        except ValueError as exc:
            entry["refused"] = str(exc)
            continue
        entry["config"] = config.name
        try:
            site, output = make_site(config)
            torch.cuda.synchronize()
        except Exception as exc:   # a build, compile or launch failure of one variant must not end the sweep
            entry["refused"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        entry["err"] = check(output)
        if entry["err"] > 1e-2:
            entry["wrong"] = True
            continue
        fns[f"v:{name}"] = site


def variant_results(row, timings, flop, reference: str) -> None:
    """Each timed variant's TFLOP/s (median over rounds) and its ratio to ``row[reference]`` (TFLOP/s)."""
    for name, entry in row.get("variants", {}).items():
        for timing in ("interleaved", "windows", "kernel", None):
            key = (timing, f"v:{name}") if timing else f"v:{name}"
            if key in timings:
                tflops = flop / statistics.median(timings[key]) / 1e9
                entry[f"{timing or 'interleaved'}_tflops"] = tflops
        if "interleaved_tflops" in entry and row.get(reference):
            entry["ratio"] = entry["interleaved_tflops"] / row[reference]


def bench_shape(torch, m, n, k, args) -> dict:
    row = {"m": m, "n": n, "k": k, "config": choose_block_scaled_config(m, n, k).name}
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a, sa = per_token_cast_to_fp8(x, tma_aligned_scales=True)
    b, sb = per_block_cast_to_fp8(w)
    want = dequantized(torch, a, sa, 1) @ dequantized(torch, b, sb, 128).T
    del x, w
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    out.fill_(-7.0)
    site = prepared_site(a, sa, b, sb, out)
    torch.cuda.synchronize()
    row["err_ours"] = rel_err(torch, out, want)
    out.fill_(-7.0)
    site()
    torch.cuda.synchronize()
    row["err_site"] = rel_err(torch, out, want)

    def cublas():
        return torch._scaled_mm(a, b.T, scale_a=sa, scale_b=sb.T, out_dtype=torch.bfloat16)

    try:
        theirs = cublas()
        torch.cuda.synchronize()
        row["err_cublas"] = rel_err(torch, theirs, want)
    except (RuntimeError, TypeError, ValueError) as exc:
        row["cublas_error"] = str(exc).splitlines()[0][:200]
        cublas = None
    del want
    if max(row["err_ours"], row["err_site"]) > 1e-2:
        row["wrong"] = True
        print(f"{m}x{n}x{k}: ours has relative error {row['err_ours']:.2e} against float64; not timed", flush=True)
        return row
    fns = {"ours": site}
    if cublas is not None:
        fns["cublas"] = cublas
    if args.variants:
        def make_site(config):
            out_v = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            out_v.fill_(-7.0)
            return prepared_site(a, sa, b, sb, out_v, config=config), out_v

        want = dequantized(torch, a, sa, 1) @ dequantized(torch, b, sb, 128).T
        add_variants(torch, row, fns, args, make_site, lambda got: rel_err(torch, got, want))
        del want
    flop = 2.0 * m * n * k
    timings = {}
    for r in range(args.rounds):
        names = list(fns)
        random.shuffle(names)
        if args.timing in ("interleaved", "both"):
            for name, ms in time_interleaved(torch, {nm: fns[nm] for nm in names}, args.warmup_ms,
                                             args.rep_ms).items():
                timings.setdefault(("interleaved", name), []).append(ms)
        if args.timing in ("windows", "both"):
            for name in names:
                timings.setdefault(("windows", name), []).append(time_ms(torch, fns[name], args.warmup_ms,
                                                                         args.rep_ms))
        if m <= 128:
            for name in names:
                timings.setdefault(("kernel", name), []).append(kernel_ms(torch, fns[name]))
        if args.dobench:
            for name in names:
                timings.setdefault(("dobench", name), []).append(dobench_ms(fns[name], args))
    for (timing, name), values in timings.items():
        ms = statistics.median(values)
        row[f"{timing}_{name}_ms"] = ms
        row[f"{timing}_{name}_tflops"] = flop / ms / 1e9
    for timing in ("interleaved", "windows", "kernel", "dobench"):
        if f"{timing}_cublas_ms" in row and f"{timing}_ours_ms" in row:
            row[f"{timing}_ratio"] = row[f"{timing}_cublas_ms"] / row[f"{timing}_ours_ms"]
    variant_results(row, timings, flop, "interleaved_cublas_tflops")
    if m <= 128:
        row["host_us_ours"] = host_us(torch, lambda: fp8_gemm_nt(a, sa, b, sb, out))
        if cublas is not None:
            row["host_us_cublas"] = host_us(torch, cublas)
        # the bytes that must move (weights dominate): A, B, their scales and C once
        moved = m * k + n * k + 4 * (sa.numel() + sb.numel()) + 2 * m * n
        if "kernel_ours_ms" in row:
            row["kernel_ours_tbps"] = moved / row["kernel_ours_ms"] / 1e9
    if m == 4096 and (n, k) in DEEPGEMM_4096:
        row["deepgemm_anchor_tflops"] = DEEPGEMM_4096[(n, k)]
        row["cublas_anchor_tflops"] = CUBLAS_4096[(n, k)]
    if cublas is not None and "err_cublas" in row:
        row["err_ratio"] = row["err_ours"] / row["err_cublas"]
    return row


def dobench_ms(fn, args) -> float:
    """Median milliseconds of ``fn()`` by ``triton.testing.do_bench`` — how issue 19's anchors (DeepGEMM's and cuBLAS's
    figures) were measured: events around each launch, the L2 cleared between launches (so the GPU also idles a
    little between them, below its sustained power limit)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median")


def bench_grouped(torch, layout, groups, tokens, n, k, args) -> dict:
    """One grouped case: ours (its prepared call site) against a loop of cuBLAS block-scaled calls, one per group, and
    (contiguous) our dense GEMM of the same total M; checked first against float64 per group. Masked: each group's
    count is ``tokens`` (the expected M), M_max = ⌈1.5·tokens/128⌉·128."""
    row = {"layout": layout, "groups": groups, "tokens": tokens, "n": n, "k": k,
           "deepgemm_anchor_tflops": GROUPED[(layout, groups, tokens, n, k)]}
    bs = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(groups)]
    b, sb = torch.stack([x[0] for x in bs]), torch.stack([x[1] for x in bs])
    m_max = tokens if layout == "contiguous" else -(-(tokens * 3 // 2) // 128) * 128
    x = torch.randn(groups * m_max, k, device="cuda", dtype=torch.bfloat16)
    a, sa = per_token_cast_to_fp8(x, tma_aligned_scales=(layout == "contiguous"))
    del x
    if layout == "contiguous":
        idx = torch.arange(groups, device="cuda", dtype=torch.int32).repeat_interleave(tokens)
        out = torch.empty(groups * tokens, n, device="cuda", dtype=torch.bfloat16)
        site = prepared_grouped_site("contiguous", a, sa, b, sb, out, idx)
        segments = [(a[g * tokens:(g + 1) * tokens], get_mn_major_tma_aligned_tensor(sa[g * tokens:(g + 1) * tokens]),
                     out[g * tokens:(g + 1) * tokens]) for g in range(groups)]
    else:
        a, sa = a.view(groups, m_max, k), sa.view(groups, m_max, -1)
        counts = torch.full((groups,), tokens, device="cuda", dtype=torch.int32)
        out = torch.empty(groups, m_max, n, device="cuda", dtype=torch.bfloat16)
        site = prepared_grouped_site("masked", a, sa, b, sb, out, counts, tokens)
        segments = [(a[g, :tokens], get_mn_major_tma_aligned_tensor(sa[g, :tokens].contiguous()), out[g, :tokens])
                    for g in range(groups)]
    torch.cuda.synchronize()
    errors = []
    for g, (ag, sag, og) in enumerate(segments):
        want = dequantized(torch, ag, sag, 1) @ dequantized(torch, b[g], sb[g], 128).T
        errors.append(rel_err(torch, og, want))
    row["err_ours"] = max(errors)
    if row["err_ours"] > 1e-2:
        row["wrong"] = True
        return row
    scratch = torch.empty(tokens, n, device="cuda", dtype=torch.bfloat16)

    def cublas_loop():
        for g, (ag, sag, _og) in enumerate(segments):
            torch._scaled_mm(ag, b[g].T, scale_a=sag, scale_b=sb[g].T, out_dtype=torch.bfloat16, out=scratch)

    fns = {"ours": site}
    try:
        cublas_loop()
        fns["cublas_loop"] = cublas_loop
    except (RuntimeError, TypeError, ValueError) as exc:
        row["cublas_error"] = str(exc).splitlines()[0][:200]
    if layout == "contiguous":
        dense_out = torch.empty(groups * tokens, n, device="cuda", dtype=torch.bfloat16)
        fns["dense"] = prepared_site(a, sa, b[0], sb[0], dense_out)
    if args.variants:
        def make_site(config):
            out_v = torch.empty_like(out)
            if layout == "contiguous":
                return prepared_grouped_site("contiguous", a, sa, b, sb, out_v, idx, config=config), out_v
            return prepared_grouped_site("masked", a, sa, b, sb, out_v, counts, tokens, config=config), out_v

        def check(got):
            worst = 0.0
            for g, (ag, sag, _og) in enumerate(segments):
                rows_g = got[g * tokens:(g + 1) * tokens] if layout == "contiguous" else got[g, :tokens]
                want = dequantized(torch, ag, sag, 1) @ dequantized(torch, b[g], sb[g], 128).T
                worst = max(worst, rel_err(torch, rows_g, want))
            return worst

        add_variants(torch, row, fns, args, make_site, check, layout)
    flop = 2.0 * groups * tokens * n * k
    timings = {}
    dobench = {}
    for _ in range(args.rounds):
        for name, ms in time_interleaved(torch, dict(fns), args.warmup_ms, args.rep_ms).items():
            timings.setdefault(name, []).append(ms)
        if args.dobench:
            for name in ("ours", "cublas_loop"):
                if name in fns:
                    dobench.setdefault(name, []).append(dobench_ms(fns[name], args))
    for name, values in timings.items():
        row[f"{name}_tflops"] = flop / statistics.median(values) / 1e9
    for name, values in dobench.items():
        row[f"dobench_{name}_tflops"] = flop / statistics.median(values) / 1e9
    if "dobench_ours_tflops" in row:
        row["dobench_of_deepgemm"] = row["dobench_ours_tflops"] / row["deepgemm_anchor_tflops"]
    if "cublas_loop_tflops" in row:
        row["ratio_cublas_loop"] = row["ours_tflops"] / row["cublas_loop_tflops"]
    if "dense_tflops" in row:
        row["of_dense"] = row["ours_tflops"] / row["dense_tflops"]
    row["of_deepgemm"] = row["ours_tflops"] / row["deepgemm_anchor_tflops"]
    variant_results(row, timings, flop, "deepgemm_anchor_tflops")
    return row


QUANTIZE_SHAPES = ((4096, 7168), (16384, 7168), (7168, 16384), (32768, 7168), (4096, 2048), (128, 7168))


def bench_quantizers(torch, args) -> list:
    """The quantizers on DeepSeek-V3 activations/weights (bf16 input), per kernel variant (``--quantize-variants``,
    ``quantize.OP_VARIANTS``) and op (per token, per token with the TMA-aligned scales, per block): op time (the op
    called back to back, CUDA events: what a user gets, host-bound when the kernel is short), kernel time (200 calls
    with the host ahead, ``kernel_ms``), host µs per call (``host_us``); GB/s on the bytes moved (input + e4m3 output
    + f32 scales) against a device copy of the input (``y.copy_(x)``: read + write, timed both ways too). Each
    variant's results are CHECKED FIRST, bit for bit against the first variant's (the GPU tests check every variant
    against the numpy references); a variant that differs is reported and not timed."""
    from ptxgen.kernels import quantize

    rows = []
    saved = dict(quantize.OP_VARIANTS)
    ops = (("per_token", lambda x: per_token_cast_to_fp8(x), 1),
           ("per_token_tma", lambda x: per_token_cast_to_fp8(x, tma_aligned_scales=True), 1),
           ("per_block", lambda x: per_block_cast_to_fp8(x), 128))
    try:
        for m, k in args.quantize_shapes:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            y = torch.empty_like(x)
            copy = lambda: y.copy_(x)   # noqa: E731
            copy_ms, copy_kernel_ms = time_ms(torch, copy, args.warmup_ms, args.rep_ms), kernel_ms(torch, copy)
            row = {"m": m, "k": k, "copy_gbps": 4 * x.numel() / copy_ms / 1e6,
                   "copy_kernel_gbps": 4 * x.numel() / copy_kernel_ms / 1e6}
            first = {}
            for variant in args.quantize_variants:
                quantize.OP_VARIANTS.update(token=variant, block=variant)
                for name, op, rows_per_scale in ops:
                    tag = f"{variant} {name}"
                    q, scales = op(x)
                    torch.cuda.synchronize()
                    got = (q.view(torch.uint8), scales.contiguous())
                    if name not in first:
                        first[name] = got
                    elif not (torch.equal(got[0], first[name][0]) and torch.equal(got[1], first[name][1])):
                        row[f"{tag} wrong"] = True
                        continue
                    moved = x.numel() * 2 + x.numel() + 4 * scales.numel()
                    fn = lambda: op(x)   # noqa: E731
                    op_ms = time_ms(torch, fn, args.warmup_ms, args.rep_ms)
                    k_ms = kernel_ms(torch, fn)
                    row[tag] = {"op_ms": op_ms, "kernel_ms": k_ms, "host_us": host_us(torch, fn),
                                "op_of_copy": moved / op_ms / 1e6 / row["copy_gbps"],
                                "kernel_of_copy": moved / k_ms / 1e6 / row["copy_kernel_gbps"]}
                    del q, scales, got
            rows.append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    finally:
        quantize.OP_VARIANTS.update(saved)
    return rows


def print_quantizers(quant, variants) -> None:
    print(f"{'M':>6} {'K':>6} {'variant':>8} {'op':>14} {'op/copy':>8} {'kernel/copy':>11} {'host us':>8}")
    for q in quant:
        for variant in variants:
            for name in ("per_token", "per_token_tma", "per_block"):
                r = q.get(f"{variant} {name}")
                shown = ("WRONG (not timed)" if q.get(f"{variant} {name} wrong") else
                         f"{r['op_of_copy']:8.2f} {r['kernel_of_copy']:11.2f} {r['host_us']:8.1f}" if r else "-")
                print(f"{q['m']:>6} {q['k']:>6} {variant:>8} {name:>14} {shown}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxNxK,...")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--warmup-ms", type=float, default=25.0)
    ap.add_argument("--timing", choices=("interleaved", "windows", "both"), default="both")
    ap.add_argument("--dobench", action="store_true",
                    help="also time the GEMMs as the anchors were: triton.testing.do_bench medians")
    ap.add_argument("--no-quantize", action="store_true", help="skip the quantizers' bandwidth")
    ap.add_argument("--no-grouped", action="store_true", help="skip the grouped GEMMs")
    ap.add_argument("--quantize-only", action="store_true", help="only the quantizers' rows (no GEMM, no grouped)")
    ap.add_argument("--quantize-variants", default="narrow,wide",
                    help="quantizer kernels (quantize.VARIANTS) timed against each other, the first the check's")
    ap.add_argument("--quantize-shapes", default=",".join(f"{m}x{k}" for m, k in QUANTIZE_SHAPES), help="MxK,...")
    ap.add_argument("--variants", default="", help="GemmConfig names (block-scaled, e4m3) timed on every shape too")
    args = ap.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    from ptxgen.kernels.quantize import VARIANTS

    args.quantize_variants = [v for v in args.quantize_variants.split(",") if v]
    for name in args.quantize_variants:
        if name not in VARIANTS:
            raise SystemExit(f"bench_fp8: --quantize-variants: {name!r} is not one of {', '.join(VARIANTS)}")
    args.quantize_shapes = [tuple(int(v) for v in s.split("x")) for s in args.quantize_shapes.split(",") if s]
    if args.quantize_only:
        args.shapes, args.no_grouped, args.no_quantize = "", True, False
    for name in args.variants:      # a misspelt name stops the run before any GPU work (each with its own grouping:
        variant_config(name, GemmConfig.from_name(name, "e4m3").grouped)   # a grouped-only option is no misspelling)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench_fp8 needs a CUDA GPU")
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
    rows = []
    for m, n, k in shapes:
        row = bench_shape(torch, m, n, k, args)
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    grouped = []
    if not args.no_grouped:
        for key in GROUPED:
            grouped.append(bench_grouped(torch, *key, args))
            print(json.dumps(grouped[-1]), flush=True)
            torch.cuda.empty_cache()
    quant = [] if args.no_quantize else bench_quantizers(torch, args)
    summary = {}
    for m in sorted({r["m"] for r in rows}):
        group = [r for r in rows if r["m"] == m and not r.get("wrong")]
        for timing in ("interleaved", "windows", "kernel", "dobench"):
            ratios = [r[f"{timing}_ratio"] for r in group if f"{timing}_ratio" in r]
            if ratios:
                summary[f"M={m} {timing}"] = {"geomean": geomean(ratios), "min": min(ratios)}
        for timing, label in (("interleaved", ""), ("dobench", " (do_bench)")):
            anchors = [r[f"{timing}_ours_tflops"] / r["deepgemm_anchor_tflops"] for r in group
                       if "deepgemm_anchor_tflops" in r and f"{timing}_ours_tflops" in r]
            if anchors:
                summary[f"M={m} vs DeepGEMM anchors{label}"] = {"geomean": geomean(anchors), "min": min(anchors)}
            cublas = [r[f"{timing}_cublas_tflops"] / r["cublas_anchor_tflops"] for r in group
                      if "cublas_anchor_tflops" in r and f"{timing}_cublas_tflops" in r]
            if cublas and timing == "dobench":
                summary[f"M={m} cuBLAS vs its anchors{label}"] = {"geomean": geomean(cublas), "min": min(cublas)}
    for layout in ("contiguous", "masked"):
        group = [r for r in grouped if r["layout"] == layout and not r.get("wrong")]
        for key in ("of_deepgemm", "dobench_of_deepgemm", "ratio_cublas_loop", "of_dense"):
            values = [r[key] for r in group if key in r]
            if values:
                summary[f"{layout} {key}"] = {"geomean": geomean(values), "min": min(values)}
    result = {"device": torch.cuda.get_device_name(0), "rows": rows, "grouped": grouped, "quantizers": quant,
              "summary": summary}
    out_dir = os.environ.get("OUT")
    path = pathlib.Path(out_dir) / "bench_fp8.json" if out_dir else pathlib.Path("bench_fp8.json")
    path.write_text(json.dumps(result, indent=1))
    print(f"\n{result['device']}; JSON: {path}")
    print_quantizers(quant, args.quantize_variants)
    for r in grouped:
        print(f"grouped {r['layout']} {r['groups']} x {r['tokens']}, N x K {r['n']} x {r['k']}: "
              + ("WRONG (not timed)" if r.get("wrong") else
                 f"ours {r['ours_tflops']:.0f} TFLOP/s, DeepGEMM {r['deepgemm_anchor_tflops']} "
                 f"({r['of_deepgemm']:.2f}), cuBLAS loop {r.get('cublas_loop_tflops', float('nan')):.0f}, "
                 f"dense {r.get('dense_tflops', float('nan')):.0f}; err {r['err_ours']:.2e}"))
    for name, s in summary.items():
        print(f"{name}: geomean {s['geomean']:.3f}, min {s['min']:.3f}"
              + (" (ours/cuBLAS)" if name.startswith("M=") and "DeepGEMM" not in name else ""))
    header = (f"{'M':>5} {'N':>6} {'K':>6} {'config':>14} {'err ours':>9} {'err cuBLAS':>10} {'ours':>7} {'cuBLAS':>7} "
              f"{'ratio':>6} {'ours w':>7} {'cuBL w':>7} {'ratio w':>7} {'k ours':>7} {'k cuBL':>7} {'k ratio':>7} "
              f"{'host us':>8} {'cuBL us':>8} {'DG':>5} {'cuBL*':>5}")
    if rows:
        print(header)
    for r in rows:
        def f(key, fmt="{:7.0f}"):
            return fmt.format(r[key]) if key in r else " " * len(fmt.format(0))
        print(f"{r['m']:>5} {r['n']:>6} {r['k']:>6} {r['config']:>14} {f('err_ours', '{:9.2e}')} "
              f"{f('err_cublas', '{:10.2e}')} {f('interleaved_ours_tflops')} {f('interleaved_cublas_tflops')} "
              f"{f('interleaved_ratio', '{:6.3f}')} {f('windows_ours_tflops')} {f('windows_cublas_tflops')} "
              f"{f('windows_ratio', '{:7.3f}')} {f('kernel_ours_tflops')} {f('kernel_cublas_tflops')} "
              f"{f('kernel_ratio', '{:7.3f}')} {f('host_us_ours', '{:8.1f}')} {f('host_us_cublas', '{:8.1f}')} "
              f"{f('deepgemm_anchor_tflops', '{:5.0f}')} {f('cublas_anchor_tflops', '{:5.0f}')}")
    print("(TFLOP/s; ours/cuBLAS ratios; 'w': separate windows; 'k': kernel time, host ahead; host us: wall clock per "
          "op call; DG, cuBL*: issue 19's anchors at M = 4096, triton do_bench, 2026-11-25)")
    if args.variants:
        print_variants(rows, grouped)


def print_variants(rows, grouped) -> None:
    """Per shape, each variant's interleaved TFLOP/s and ratio (dense: to cuBLAS in the same run; grouped: to
    DeepGEMM's anchor), the best marked with *; then per variant the geometric mean of its ratios over the shapes
    where it ran."""
    print("\nvariants (interleaved TFLOP/s, ratio to cuBLAS; grouped: to DeepGEMM's anchor; * best of the shape):")
    per_variant = {}
    cases = [(f"{r['m']}x{r['n']}x{r['k']} (ours {r['config']}: {r.get('interleaved_ours_tflops', float('nan')):.0f})",
              r) for r in rows]
    cases += [(f"{r['layout']} {r['groups']}x{r['tokens']} {r['n']}x{r['k']} (ours "
               f"{r.get('ours_tflops', float('nan')):.0f})", r) for r in grouped]
    for title, r in cases:
        entries = r.get("variants", {})
        if not entries:
            continue
        timed = {name: e for name, e in entries.items() if "interleaved_tflops" in e}
        best = max(timed, key=lambda name: timed[name]["interleaved_tflops"]) if timed else None
        parts = []
        for name, e in entries.items():
            if "refused" in e:
                parts.append(f"{name} refused")
            elif e.get("wrong"):
                parts.append(f"{name} WRONG ({e['err']:.1e})")
            elif name in timed:
                parts.append(f"{'*' if name == best else ''}{name} {e['interleaved_tflops']:.0f} "
                             f"({e.get('ratio', float('nan')):.3f})")
                per_variant.setdefault(name, []).append(e.get("ratio"))
        print(f"  {title}: " + ", ".join(parts))
    for name, ratios in per_variant.items():
        print(f"  {name}: geomean ratio {geomean(ratios):.3f} over {len(ratios)} cases")


if __name__ == "__main__":
    main()
