"""Bandwidth of ptxgen's transpose (``ptxgen.kernels.transpose``: swizzled thread maps, conflict-free smem) against a
device-to-device copy of the same bytes (torch ``y.copy_(x)``) and torch's own transpose (``x.t().contiguous()``),
measured in the same run.

    python benchmarks/bench_transpose.py [--shapes 8192x8192,16384x16384,8191x12289] [--dtypes bf16,f32]
                                         [--variants 256/2,128/2,256/1,256/1/s,128/1/s,64/1/s,256/1/sector,...]
                                         [--runs 30]
                                         [--json out.json]

For each dtype and shape: every candidate's result is checked first (ours and torch's equal ``x.t()`` exactly, the
copy equals x), then timed with CUDA events two ways — a SEPARATE window per candidate (``--runs`` launches back to
back after three warm-ups, the median) and an INTERLEAVED window (``--runs`` rounds of copy, ours, torch, each launch
timed on its own, the medians), so a clock or thermal drift between windows shows as a difference between the two.
GB/s counts the bytes read plus the bytes written (2·M·N·esize), as for the copy. Ours runs through a prepared call
site (no host work per launch beyond the driver call). The issue's goal: ≥ 90% of copy bandwidth. A variant is
``threads/pair`` (``access="vector"``: 16-byte accesses where rows are 16-byte aligned, element accesses otherwise) or
``threads/1/s`` (``access="scalar"``: element accesses by warps on contiguous elements, what ``transpose`` picks for
rows that are not 16-byte aligned when out's rows start on 32-byte sectors) or ``threads/1/sector``
(``access="sector"``: the same accesses, each CTA's window of an out row starting on a 32-byte sector, what
``transpose`` picks when out's rows do not) or ``threads/1/sectorv`` (``access="sector_vector"``: those windows
stored as 16-byte vectors, x read as 16-byte vectors where its rows allow) or ``threads/1/sectorvs``
(``sector_vector_scalar``: the same with x read element-wise) or ``threads/1/sectorva``
(``sector_vector_aligned_x``: x's rows read as 16-byte vectors from a window moved onto 16-byte boundaries per row,
whatever x's pitch; 256 threads for 16-bit types, 128 for f32) or ``threads/1/sectorvasync`` (``sector_vector_async_x``:
those windows copied by cp.async into a row-major tile whose pitch follows x's (``x_residue`` set per shape), no x
value in registers; its transposed smem reads are 4-way bank conflicted, reported, not refused) or
``threads/1/sectorvp`` (``sector_vector_pair_x``, 16-bit types only, 256 threads: x's rows read as ALIGNED 4-byte
pairs of elements from a window moved per row, two values packed per register) or ``threads/1/sectorvq`` (the same
with 8-byte pieces of four elements, ``x_piece_bytes = 8``); ``sectorv``, ``sectorvs``, ``sectorva``,
``sectorvasync``, ``sectorvp`` and ``sectorvq`` take the
tile's rows after them (``TransposeConfig.rows``: 8, 16 or 32 16-byte vectors, e.g. ``256/1/sectorva64``,
``256/1/sectorv128``, ``256/1/sectorvp128``, ``256/1/sectorvq64`` for bf16, ``128/1/sectorva32`` for f32; none: 32
vectors), and optionally cache hints after a further ``/``: x's loads, then out's stores
(``TransposeConfig.x_cache``/``out_cache``, gmem.load/store's ``cache``: ``256/1/sectorvp64/evict_first`` or
``256/1/sectorvp64/evict_first+streaming``; "+", since "," separates the variants); each row names the one ``transpose`` would pick for the shape.
Writes JSON to ``--json`` or, when $OUT is set, ``$OUT/bench_transpose.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
from dataclasses import replace

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL = 0.90


def _event_ms(torch, fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def separate(torch, fn, runs: int) -> float:
    """Median ms of ``runs`` launches of ``fn`` timed one by one, after three warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return statistics.median(_event_ms(torch, fn) for _ in range(runs))


def interleaved(torch, fns: dict, runs: int) -> dict:
    """Median ms of each of ``fns`` timed in rounds (one launch of each per round, in order)."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            times[name].append(_event_ms(torch, fn))
    return {name: statistics.median(t) for name, t in times.items()}


ACCESS_SUFFIXES = {"": "vector", "s": "scalar", "sector": "sector", "sectorv": "sector_vector",
                   "sectorvs": "sector_vector_scalar", "sectorva": "sector_vector_aligned_x",
                   "sectorvasync": "sector_vector_async_x", "sectorvp": "sector_vector_pair_x"}
LABEL_SUFFIXES = {access: f"/{suffix}" if suffix else "" for suffix, access in ACCESS_SUFFIXES.items()}
# sector_vector_pair_x with 8-byte pieces (TransposeConfig.x_piece_bytes = 8): its own name
PIECE_SUFFIXES = {"sectorvq": 8}
# they take the tile's rows as a number after them
SECTOR_VECTOR_SUFFIXES = ("sectorv", "sectorvs", "sectorva", "sectorvasync", "sectorvp", "sectorvq")


def label_suffix(config) -> str:
    """The variant's name after ``threads/pair`` (without the rows): ``/sectorvp`` for ``sector_vector_pair_x``,
    ``/sectorvq`` for it with ``x_piece_bytes = 8``. Post: ``variant_config`` of the name gives the config back."""
    pieces = {v: k for k, v in PIECE_SUFFIXES.items()}
    return f"/{pieces[config.x_piece_bytes]}" if config.x_piece_bytes in pieces else LABEL_SUFFIXES[config.access]


def hints_suffix(config) -> str:
    """The variant's cache hints after its rows: ``/evict_first+streaming`` for x_cache ``evict_first`` and
    out_cache ``streaming``, ``/evict_first`` for x's alone, none without hints. Post: ``variant_config`` of the
    name gives the config back."""
    if (config.x_cache, config.out_cache) == ("normal", "normal"):
        return ""
    return f"/{config.x_cache}" + ("" if config.out_cache == "normal" else f"+{config.out_cache}")


def variant_config(dtype: str, variant: str):
    """The TransposeConfig a ``--variants`` entry names: ``threads/pair`` (vector), ``threads/pair/s`` (scalar),
    ``threads/pair/sector``, ``threads/pair/sectorv`` (sector_vector), ``threads/pair/sectorvs``
    (sector_vector_scalar), ``threads/pair/sectorva`` (sector_vector_aligned_x), ``threads/pair/sectorvasync``,
    ``threads/pair/sectorvp`` (sector_vector_pair_x) or ``threads/pair/sectorvq`` (the same, ``x_piece_bytes = 8``),
    the sector_vector ones optionally followed by the tile's rows (``TransposeConfig.rows``; none: 32·V):
    ``variant_config("bf16", "256/1/sector")`` → ``TransposeConfig('bf16', 256, 1, 'sector')``,
    ``variant_config("bf16", "256/1/sectorva64")`` → ``TransposeConfig('bf16', 256, 1, 'sector_vector_aligned_x',
    64)``, ``variant_config("bf16", "256/1/sectorvq128")`` → ``TransposeConfig('bf16', 256, 1,
    'sector_vector_pair_x', 128, x_piece_bytes=8)``. SystemExit for a malformed entry, ValueError (``validate``'s) for
    one invalid for ``dtype``."""
    from ptxgen.kernels.transpose import TransposeConfig

    threads, pair, *access = variant.split("/") + ([] if variant.count("/") > 1 else [""])
    hints = access.pop().split("+") if len(access) == 2 else ["normal"]
    if len(hints) == 1:
        hints.append("normal")
    rows = None
    if len(access) == 1:
        suffix = access[0].rstrip("0123456789")
        if suffix in SECTOR_VECTOR_SUFFIXES and suffix != access[0]:
            rows, access = int(access[0][len(suffix):]), [suffix]
    piece = PIECE_SUFFIXES.get(access[0]) if len(access) == 1 else None
    if piece:
        access = ["sectorvp"]
    if len(access) != 1 or access[0] not in ACCESS_SUFFIXES or not (threads.isdigit() and pair.isdigit()):
        raise SystemExit(f"--variants: {variant!r} is not threads/pair, threads/pair/s, threads/pair/sector, "
                         "threads/pair/sectorv, threads/pair/sectorvs, threads/pair/sectorva, "
                         "threads/pair/sectorvasync, threads/pair/sectorvp or threads/pair/sectorvq (the sectorv ones "
                         "optionally followed by the tile's rows, e.g. threads/pair/sectorva64)")
    if len(hints) != 2:
        raise SystemExit(f"--variants: {variant!r}: the cache hints are x_cache[+out_cache], e.g. /evict_first+streaming")
    config = TransposeConfig(dtype, int(threads), int(pair), ACCESS_SUFFIXES[access[0]], rows,
                             x_piece_bytes=piece, x_cache=hints[0], out_cache=hints[1]).validate()
    # the default tile spelled out is the default config (one kernel, one row)
    return replace(config, rows=None) if rows == config.vector * 32 else config


def main(argv=None) -> dict:
    import torch

    from ptxgen.kernels.transpose import (
        TransposeConfig, bank_reports, jit_kernel, out_rows_on_sectors, rows_aligned,
    )

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="8192x8192,16384x16384,8191x12289")
    ap.add_argument("--dtypes", default="bf16,f32")
    ap.add_argument("--variants", default="256/2,128/2,256/1,256/1/s,128/1/s,64/1/s,256/1/sector,128/1/sector",
                    help="TransposeConfig threads/pair[/s|/sector|/sectorv|/sectorvs|/sectorva|/sectorvasync|/sectorvp|"
                         "/sectorvq][rows] variants to time "
                         "(those invalid for a dtype are skipped)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch_types = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "goal": GOAL, "rows": []}
    print(f"device: {result['device']}   torch: {result['torch']}")
    print(f"{'dtype':<6}{'shape':>13}{'kernel':>26}{'sep ms':>9}{'sep GB/s':>10}{'of copy':>9}{'int ms':>9}"
          f"{'int GB/s':>10}{'of copy':>9}{'vs torch':>9}")
    for dtype in args.dtypes.split(","):
        configs = []
        for variant in args.variants.split(","):
            try:
                configs.append(variant_config(dtype, variant))
            except ValueError:
                continue
        for config in configs:
            if config.access == "sector_vector_async_x":
                # cp.async keeps x's 16-byte alignment in smem, so a warp's transposed reads share one word position
                # of 16 bytes: 4-way for 16-bit types (bank_reports; tests/ptxgen/test_transpose_async.py), timed
                print(f"note: {config}: its transposed smem reads are bank conflicted (4-way for 16-bit types)")
                continue
            reports = bank_reports(config)
            ways = {name: max(r.ways for r in rs) for name, rs in reports.items()}
            # the smaller sector_vector tiles (rows set) keep the transposed read conflict-free but not every x-side
            # store (their column pitch serves the read first), nor sector_vector_pair_x's head and tail stores (its
            # pitch serves the x pieces' stores): reported, timed; anything else must be conflict-free
            if ways["load"] != 1 or (ways["store"] != 1 and config.rows is None
                                     and config.access != "sector_vector_pair_x"):
                raise SystemExit(f"{config}: layoutc reports a {max(ways.values())}-way bank conflict")
            if ways["store"] != 1:
                print(f"note: {config}: layoutc reports {ways['store']}-way bank conflicts in its smem stores")
        for shape in args.shapes.split(","):
            m, n = (int(s) for s in shape.split("x"))
            x = torch.randn((m, n), device="cuda", dtype=torch.float32).to(torch_types[dtype])
            nbytes = 2 * x.numel() * x.element_size()
            copy_dst = torch.empty_like(x)
            candidates = {"copy": lambda: copy_dst.copy_(x)}
            torch_out = {}
            candidates["torch x.t().contiguous()"] = lambda: torch_out.__setitem__("y", x.t().contiguous())
            outs = {}
            picked = TransposeConfig.default(dtype, rows_aligned(x, None, m, n), out_rows_on_sectors(x, None, m),
                                             rows_aligned(x, None, 0, n))
            # the op's own choice is always timed (what a caller gets), beside the variants asked for
            for config in [c.for_columns(n) for c in configs] + ([picked] if picked not in configs else []):
                out = torch.full((n, m), -7.0, device="cuda", dtype=x.dtype)
                suffix = label_suffix(config) + (str(config.rows) if config.rows else "") + hints_suffix(config)
                label = f"ptxgen t{config.threads}/p{config.pair}{suffix}{'*' if config == picked else ''}"
                outs[label] = out
                candidates[label] = jit_kernel(config).prepare(x=x, out=out)
            # results first
            for fn in candidates.values():
                fn()
            torch.cuda.synchronize()
            want = x.t()
            if not torch.equal(copy_dst, x):
                raise SystemExit(f"{dtype} {shape}: the copy differs from its input")
            if not torch.equal(torch_out["y"], want):
                raise SystemExit(f"{dtype} {shape}: torch's transpose differs from x.t()")
            for label, out in outs.items():
                if not torch.equal(out, want):
                    bad = (out != want).nonzero()[:3].tolist()
                    raise SystemExit(f"{dtype} {shape}: {label} differs from x.t() at {bad}")
            sep = {name: separate(torch, fn, args.runs) for name, fn in candidates.items()}
            inter = interleaved(torch, candidates, args.runs)
            for name in candidates:
                row = {"dtype": dtype, "m": m, "n": n, "bytes": nbytes, "kernel": name,
                       "separate_ms": sep[name], "separate_gb_s": nbytes / sep[name] / 1e6,
                       "separate_of_copy": sep["copy"] / sep[name],
                       "interleaved_ms": inter[name], "interleaved_gb_s": nbytes / inter[name] / 1e6,
                       "interleaved_of_copy": inter["copy"] / inter[name],
                       "vs_torch": inter["torch x.t().contiguous()"] / inter[name]}
                result["rows"].append(row)
                print(f"{dtype:<6}{shape:>13}{name:>26}{row['separate_ms']:>9.3f}{row['separate_gb_s']:>10.0f}"
                      f"{100 * row['separate_of_copy']:>8.1f}%{row['interleaved_ms']:>9.3f}"
                      f"{row['interleaved_gb_s']:>10.0f}{100 * row['interleaved_of_copy']:>8.1f}%"
                      f"{row['vs_torch']:>8.2f}x")
            del x, copy_dst, outs, torch_out
            torch.cuda.empty_cache()
    ours = [r for r in result["rows"] if r["kernel"].startswith("ptxgen")]
    worst = min(max(r["separate_of_copy"], r["interleaved_of_copy"]) for r in ours) if ours else 0.0
    best_per_case = {}
    for r in ours:
        key = (r["dtype"], r["m"], r["n"])
        best_per_case[key] = max(best_per_case.get(key, 0.0), r["interleaved_of_copy"])
    result["best_of_copy_per_case"] = {f"{k[0]} {k[1]}x{k[2]}": v for k, v in best_per_case.items()}
    result["goal_met"] = all(v >= GOAL for v in best_per_case.values())
    print("* = the configuration transpose() picks for the shape")
    print(f"best configuration per case, of copy (interleaved): "
          + ", ".join(f"{k}: {100 * v:.1f}%" for k, v in result["best_of_copy_per_case"].items())
          + f"; goal >= {100 * GOAL:.0f}%: {'met' if result['goal_met'] else 'NOT met'} (worst variant {100 * worst:.1f}%)")
    out = args.json or (os.path.join(os.environ["OUT"], "bench_transpose.json") if os.environ.get("OUT") else None)
    if out:
        pathlib.Path(out).write_text(json.dumps(result, indent=2))
        print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
