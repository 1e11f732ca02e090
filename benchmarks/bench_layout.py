"""Benchmark layoutc against pycute on GMMA-sized layouts.

    python benchmarks/bench_layout.py [--json FILE] [--repeat N] [--target-s SECONDS] [--no-profile]

Each case runs the same operation on the same inputs in both libraries, in one process. Inputs are built once,
before any timing, and every case first checks that both libraries return exactly the same shape and stride
(nothing is normalised). The inputs avoid the places where pycute deviates from CuTe (tuple tilers shorter than
the layout's rank in composition, size-1 modes, int tilers in logical_product, shape-divisibility violations,
left_inverse).

Timing: ``time.perf_counter`` around a loop of many calls (the count is calibrated once per case so a loop lasts
about ``--target-s``), repeated ``--repeat`` times with the garbage collector off; the median is reported. Within a
case the loops of pycute and layoutc are interleaved, repeat by repeat, so that changes in machine load hit both.

layoutc memoises its pure operations. With identical inputs every timed call after the first is a cache hit, so
the "cached" column measures a lookup, not the algebra. When the library exposes ``layoutc.clear_caches()`` the
script also reports an "uncached" column: each call is preceded by ``clear_caches()`` and the cost of a loop of
``clear_caches()`` alone is subtracted, so every call (and every helper call it makes) starts cold. Ratios are
pycute time / layoutc time: above 1 means layoutc is faster.

pycute has neither ``blocked_product`` nor ``tile_to_shape``. They are emulated in pycute with CuTe's own
definitions: blocked_product(A, B) = zip of the two modes of logical_product(A, B), and tile_to_shape(atom, T) =
that blocked product of the atom padded with ``1:0`` modes to rank(T) and the column-major layout of the repeat
counts. The output says so next to those rows.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import platform
import pstats
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import layoutc as lc

try:
    import pycute as pc
except ImportError:  # pragma: no cover - the benchmark needs both libraries
    sys.exit("pycute is not installed: pip install nvidia-cutlass")


# -- pycute emulations of what it lacks --------------------------------------------------------------------

def pc_blocked_product(block, tiler):
    """CuTe's blocked_product for equal-rank layouts, built from pycute's logical_product:
    mode i of the result is (block_i, (complement(block) o tiler)_i)."""
    assert len(block) == len(tiler), "this emulation handles equal ranks only"
    p = pc.logical_product(block, tiler)
    return pc.make_layout(pc.make_layout(p[0][i], p[1][i]) for i in range(len(block)))


def pc_tile_to_shape(atom, target):
    """CuTe's tile_to_shape (column-major order) in pycute: pad the atom with 1:0 modes up to rank(target), then
    blocked_product with the column-major layout of target/atom repeats."""
    modes = [atom[i] for i in range(len(atom))] + [pc.Layout(1, 0)] * (len(target) - len(atom))
    padded = pc.make_layout(*modes)
    repeats = tuple(t // pc.size(m) for t, m in zip(target, modes))
    assert all(t % pc.size(m) == 0 for t, m in zip(target, modes))
    assert all(r > 1 for r in repeats), "pycute's column-major strides differ from CuTe's on size-1 repeats"
    return pc_blocked_product(padded, pc.Layout(repeats))


# -- the cases ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    op: str
    label: str
    run_lc: Callable[[], object]
    run_pc: Callable[[], object]
    note: str = ""
    result: str = ""
    numbers: dict = field(default_factory=dict)


def _pc(layout: lc.Layout):
    return pc.Layout(layout.shape, layout.stride)


def _pc_tiler(tiler):
    if isinstance(tiler, lc.Layout):
        return _pc(tiler)
    if isinstance(tiler, tuple):
        return tuple(_pc_tiler(t) for t in tiler)
    return tiler


def build_cases() -> list[Case]:
    L = lc.Layout
    cases: list[Case] = []

    def add(op, label, lc_fn, pc_fn, lc_args, pc_args, note=""):
        cases.append(Case(op, label, lambda: lc_fn(*lc_args), lambda: pc_fn(*pc_args), note))

    # Shared-memory tiles of a 128x64 (16-bit) GMMA operand.
    k_major = L((128, 64), (64, 1))                                  # row-major, K contiguous
    smem_2d = lc.tile_to_shape(L((8, 64), (64, 1)), (128, 64))       # ((8,16),(64,1)):((64,512),(1,0))
    smem_3d = lc.tile_to_shape(L((8, 64), (64, 1)), (128, 64, 3))    # 3 pipeline stages
    tv = L(((4, 8, 4), (2, 2, 8)), ((256, 1, 16), (128, 8, 1024)))  # a thread-value map over 128x64

    # composition
    b = L((64, 32), (1, 128))
    add("composition", "(128,64):(64,1) o (64,32):(1,128)", lc.composition, pc.composition,
        (k_major, b), (_pc(k_major), _pc(b)))
    tiler = (L(64, 1), L(16, 1))
    add("composition", "(128,64):(64,1) o <64:1,16:1>", lc.composition, pc.composition,
        (k_major, tiler), (_pc(k_major), _pc_tiler(tiler)))
    add("composition", "smem((8,16),(64,1)) o TV((4,8,4),(2,2,8))", lc.composition, pc.composition,
        (smem_2d, tv), (_pc(smem_2d), _pc(tv)))

    # complement
    c1 = L(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512)))
    add("complement", "((4,8,4),(2,2,2)):((128,1,16),(64,8,512)), 8192", lc.complement, pc.complement,
        (c1, 8192), (_pc(c1), 8192))
    c2 = L((8, (4, 8)), (64, (1, 1024)))
    add("complement", "(8,(4,8)):(64,(1,1024)), 16384", lc.complement, pc.complement,
        (c2, 16384), (_pc(c2), 16384))

    # logical_divide
    add("logical_divide", "smem (128,64,3) / (64,16)", lc.logical_divide, pc.logical_divide,
        (smem_3d, (64, 16)), (_pc(smem_3d), (64, 16)))
    t2 = L((64, 16), (1, 128))
    add("logical_divide", "smem (128,64) / (64,16):(1,128)", lc.logical_divide, pc.logical_divide,
        (smem_2d, t2), (_pc(smem_2d), _pc(t2)))

    # blocked_product
    blk, rep = L((64, 8), (1, 64)), L((2, 8), (1, 2))
    add("blocked_product", "(64,8):(1,64) x (2,8):(1,2)", lc.blocked_product, pc_blocked_product,
        (blk, rep), (_pc(blk), _pc(rep)), note="pycute: emulated via logical_product + zip")

    # tile_to_shape
    k_atom, mn_atom = L((8, 64), (64, 1)), L((64, 8), (1, 64))
    add("tile_to_shape", "K atom (8,64):(64,1) -> (128,128,4)", lc.tile_to_shape, pc_tile_to_shape,
        (k_atom, (128, 128, 4)), (_pc(k_atom), (128, 128, 4)),
        note="pycute: emulated via blocked_product(padded atom, col-major repeats)")
    add("tile_to_shape", "MN atom (64,8):(1,64) -> (128,256,2)", lc.tile_to_shape, pc_tile_to_shape,
        (mn_atom, (128, 256, 2)), (_pc(mn_atom), (128, 256, 2)),
        note="pycute: emulated via blocked_product(padded atom, col-major repeats)")
    return cases


def check_agreement(cases: list[Case]) -> None:
    """Both libraries must give exactly the same shape and stride, else the comparison is meaningless."""
    for c in cases:
        a, b = c.run_lc(), c.run_pc()
        if not (a.shape == b.shape and a.stride == b.stride):
            raise SystemExit(f"results differ on {c.op} [{c.label}]: layoutc {a} vs pycute {b}")
        c.result = str(a)


# -- timing ------------------------------------------------------------------------------------------------

def _loop(fn: Callable[[], object], n: int, before: Callable[[], None] | None = None) -> float:
    """Seconds for n calls of fn (each preceded by ``before`` when given)."""
    if before is None:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        before()
        fn()
    return time.perf_counter() - t0


def _noop() -> None:
    return None


def calibrate(fn: Callable[[], object], target_s: float, before=None) -> int:
    n = 1
    while True:
        t = _loop(fn, n, before)
        if t >= target_s / 4 or n >= 1 << 22:
            return max(1, int(n * target_s / max(t, 1e-9)))
        n *= 4


def time_case(c: Case, repeat: int, target_s: float, clear) -> None:
    """Median µs/call of each series. The series are interleaved (one loop of each per repeat) so that a change in
    machine load during the run affects pycute and layoutc alike."""
    series = {"pycute_us": (c.run_pc, None), "layoutc_cached_us": (c.run_lc, None)}
    if clear is not None:
        series["cold_with_clear_us"] = (c.run_lc, clear)
        series["clear_caches_us"] = (_noop, clear)
    counts = {k: calibrate(fn, target_s, before) for k, (fn, before) in series.items()}
    if clear is not None:  # the subtraction needs both loops at the same count
        counts["clear_caches_us"] = counts["cold_with_clear_us"]
    samples = {k: [] for k in series}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for k, (fn, before) in series.items():
                samples[k].append(_loop(fn, counts[k], before) / counts[k] * 1e6)
    finally:
        if gc_was_enabled:
            gc.enable()
    med = {k: statistics.median(v) for k, v in samples.items()}
    c.numbers["pycute_us"] = med["pycute_us"]
    c.numbers["layoutc_cached_us"] = med["layoutc_cached_us"]
    if clear is not None:
        c.numbers["layoutc_uncached_us"] = max(med["cold_with_clear_us"] - med["clear_caches_us"], 1e-3)
        c.numbers["clear_caches_us"] = med["clear_caches_us"]
    c.numbers["ratio_cached"] = c.numbers["pycute_us"] / c.numbers["layoutc_cached_us"]
    if "layoutc_uncached_us" in c.numbers:
        c.numbers["ratio_uncached"] = c.numbers["pycute_us"] / c.numbers["layoutc_uncached_us"]


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# -- output ------------------------------------------------------------------------------------------------

def print_table(cases: list[Case], uncached: bool) -> None:
    head = f"{'op':<16} {'case':<50} {'layoutc us/op':>13}"
    if uncached:
        head += f" {'uncached us':>12}"
    head += f" {'pycute us/op':>13} {'ratio':>7}"
    if uncached:
        head += f" {'ratio unc.':>10}"
    print(head)
    print("-" * len(head))
    for c in cases:
        n = c.numbers
        row = f"{c.op:<16} {c.label[:50]:<50} {n['layoutc_cached_us']:>13.2f}"
        if uncached:
            row += f" {n['layoutc_uncached_us']:>12.2f}"
        row += f" {n['pycute_us']:>13.2f} {n['ratio_cached']:>6.2f}x"
        if uncached:
            row += f" {n['ratio_uncached']:>9.2f}x"
        if c.note:
            row += f"   [{c.note}]"
        print(row)
    print("-" * len(head))
    gm = geomean([c.numbers["ratio_cached"] for c in cases])
    line = f"{'geometric mean':<67} {'':>13}"
    if uncached:
        line += f" {'':>12}"
    line += f" {'':>13} {gm:>6.2f}x"
    if uncached:
        line += f" {geomean([c.numbers['ratio_uncached'] for c in cases]):>9.2f}x"
    print(line)


def per_op_geomeans(cases: list[Case], key: str) -> dict:
    ops: dict[str, list[float]] = {}
    for c in cases:
        ops.setdefault(c.op, []).append(c.numbers[key])
    return {op: geomean(v) for op, v in ops.items()}


def profile_case(c: Case, clear, calls: int = 2000, top: int = 15) -> str:
    """cProfile of ``calls`` cold calls (caches cleared before each, when possible), top functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        if clear is not None:
            clear()
        c.run_lc()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON to FILE")
    ap.add_argument("--repeat", type=int, default=7, help="timed repeats per measurement; the median is kept")
    ap.add_argument("--target-s", type=float, default=0.05, help="approximate seconds per timed loop")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile of the slowest case")
    args = ap.parse_args(argv)

    clear = lc.clear_caches if hasattr(lc, "clear_caches") else None
    cases = build_cases()
    check_agreement(cases)
    for c in cases:
        time_case(c, args.repeat, args.target_s, clear)

    print(f"layoutc vs pycute, {platform.python_implementation()} {platform.python_version()}, "
          f"median of {args.repeat} repeats; ratio = pycute time / layoutc time (> 1: layoutc faster)")
    if clear is None:
        print("layoutc exposes no clear_caches(): only the (possibly cached) timing is reported")
    else:
        print("layoutc memoises results: 'layoutc us/op' repeats identical calls (cache hits); 'uncached' clears "
              "every cache before each call and subtracts the cost of clear_caches() itself")
    print("pycute has no blocked_product / tile_to_shape: both are emulated with CuTe's definitions on top of "
          "pycute's logical_product (see the notes)")
    print()
    print_table(cases, clear is not None)

    key = "ratio_uncached" if clear is not None else "ratio_cached"
    by_op = per_op_geomeans(cases, key)
    print()
    print(f"per-op geometric mean of {key.replace('_', ' ')} (slowest relative to pycute first):")
    for op, r in sorted(by_op.items(), key=lambda kv: kv[1]):
        flag = "" if r >= 3.0 else "   < 3x goal"
        print(f"  {op:<16} {r:6.2f}x{flag}")
    slowest = min(cases, key=lambda c: c.numbers[key])
    profile_text = ""
    if not args.no_profile:
        profile_text = profile_case(slowest, clear)
        print()
        print(f"cProfile of the slowest case relative to pycute ({slowest.op} [{slowest.label}], "
              f"{'cold' if clear is not None else 'as called'}, 2000 calls), top functions by own time:")
        print(profile_text)

    if args.json:
        payload = {
            "python": platform.python_version(),
            "repeat": args.repeat,
            "target_s": args.target_s,
            "uncached_available": clear is not None,
            "ratio": "pycute_us / layoutc_us",
            "cases": [{"op": c.op, "case": c.label, "note": c.note, "result": c.result, **c.numbers}
                      for c in cases],
            "geomean_ratio_cached": geomean([c.numbers["ratio_cached"] for c in cases]),
            "per_op_geomean": by_op,
            "per_op_geomean_key": key,
            "per_op_geomean_cached": per_op_geomeans(cases, "ratio_cached"),
            "slowest_case": {"op": slowest.op, "case": slowest.label},
            "profile": profile_text,
        }
        if clear is not None:
            payload["geomean_ratio_uncached"] = geomean([c.numbers["ratio_uncached"] for c in cases])
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
