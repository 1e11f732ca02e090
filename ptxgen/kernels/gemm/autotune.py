"""Autotuning a GEMM (``matmul(..., autotune=True)``, ``linear``, ``scaled_mm``): the heuristic's pick and a few of
its neighbours timed once per problem and device on the GPU, the fastest kept — in memory and in the disk cache beside
the compiled kernels (``ptxgen.runtime.cache.store_choice``) — so that later calls, and later processes, use it with
no timing at all.

**Candidates** (``candidates``), in this order, each one validated (a neighbour the rules refuse, or whose C store the
output cannot take, is left out) and the duplicates dropped:

1. the heuristic's pick (``choose_config``; ties keep it);
1b. split-K toggled: for a split pick what the heuristic picks without split-K (``heuristic.unsplit_choice``; a
   swapped split pick: its data-parallel form, after rule 1's stream-K on every SM for a small-M one
   (``heuristic.swapped_streamk``), then a mid-M one's unswapped split tile (``heuristic.split_forms``' cheapest,
   the pick before s39 widened the swapped split-K); a narrow split of rule 3c: what the rules after 3c pick,
   ``heuristic.choice_without_narrow_split``; a column-split pick of rule 8: what the rules pick without rule 8,
   ``choice_without_narrow_split(..., column_split=False)``; a deep one-wave pick of rule 10: what the rules pick
   without it, ``choice_without_narrow_split(..., deep=False)``; a 256-row decode tile of rule 1 or fp8's 128 × 224
   wave fill: what the rules pick without them, ``choice_without_narrow_split(..., wave_fills=False)``, a decode
   tile's also in its other schedule), for a data-parallel pick with K ≥ ``SPLITK_MIN_K``
   the cheapest split tile of the problem (``heuristic.split_forms``) — the rules between them fit a few measured shapes
   (of the changed picks measured, bf16 1 of 31 and fp8 3 of 30 lost, by up to 14%; rule 8: 2 of 60, by under 1%), so
   this alternative comes first;
2. its tile N neighbours: for a mid-M swapped pick (C stored by TMA as its transpose) the other widths that split M
   into whole tiles (``heuristic.swapped_mid_widths``, rastered by the heuristic's rule 9; a split pick's in k-slices
   where they take at least two), else BN halved and
   doubled (unswapped 64 to 256; swapped 16 to 128; a swapped width of 40-56 also 64, rule 1's width before s42),
   the staged epilogue's column blocks kept whole; unswapped, also
   the next narrower and wider of the heuristic's widths (``TILE_WIDTHS``: 64, 96, 112, 128, 144, 160, 176, 192, 224,
   256 — the wave-filling ones included, where a wave of tiles fits the SMs better), with as many stages as shared
   memory holds, up to 8;
3. its pipeline neighbours: one stage fewer (not under ``MIN_NEIGHBOUR_STAGES`` = 4: 3 stages ran slower than 4 at
   all 10 problems measured, swapped and unswapped, docs/gpu-runs/2026-11-28-s38.log section 10) and one more (where
   shared memory holds them);
4. stream-K toggled (bf16/f16, and swapped fp8): on → off (with the TMA-store epilogue's overlap where the pick has
   that epilogue), off → on (unswapped and mid-M swapped: the last wave shared out; small-M swapped: every SM);
5. swap-AB toggled where M ≤ ``SWAP_MAX_M`` = 128: the swapped form of an unswapped pick (BN = rule 1's
   ``heuristic.swapped_bn`` for M ≤ 64, else 128, 8 stages or as many as shared memory holds, direct epilogue), or the unswapped 128 × 128 tile of a
   swapped pick (TMA-store epilogue, or the rows epilogue for a C whose rows TMA cannot store);
6. the tall form of a 16-bit 128 × 256 TMA-store pick of M over 256: the 256 × 128 tile with 4 stages, its C staged
   in each warpgroup's two 64-row blocks in turn (``epilogue_split`` = 2, ``GemmConfig.staged_block``), the pick's
   cluster, stream-K and overlap kept — cuBLAS's tile at large M, within ±3% of the pick where measured
   (docs/gpu-runs/2026-11-27-s31.log section 1).

E.g. ``candidates(choose_config(4096, 4096, 4096), 4096, 4096, 4096)`` = ``h128x256s4t2o1`` (the pick),
``h128x128s6t2o1`` (BN halved), ``h128x224s4t2o1`` (the next narrower width; no stage neighbour: 3 is under the
bound and 5 does not fit), ``h128x256s4t2sk`` (stream-K), ``h256x128s4t2o1`` (the tall form);
``candidates(choose_config(16, 4096, 4096), 16, 4096, 4096)`` starts ``h128x16s8zx`` (the pick: split-K), then
``h128x16s8ska1x`` (stream-K on every SM), ``h128x16s8x`` (neither), ``h128x32s8zx`` (BN doubled), ``h128x16s7zx``,
``h128x16s9zx`` (stages) and ``h128x128s6t`` (unswapped).

**Timing** (``time_candidates``): each candidate's prepared call site on fresh random inputs of the call's shapes,
strides and dtypes, ``WARMUP`` launches, then ``REPEATS`` launches each between a pair of CUDA events; the median.
A candidate that fails to compile or launch is left out (its error kept in the record).

**Keys**: the problem (M, N, K, dtypes, operand majors, bias, whether C's rows take TMA stores) and the device (its
name, SM count and driver version); the disk key adds ptxgen's toolchain and sources (``cache.choice_key``), so a new
device, driver or kernel source tree times again.
"""
from __future__ import annotations

import dataclasses
import statistics

from .config import GemmConfig
from .heuristic import (H100_SMS, choice_without_narrow_split, narrow_split, split_forms, swapped_mid_tile,
                        swapped_bn, swapped_mid_widths, swapped_pipeline_stages, swapped_raster, swapped_streamk,
                        unsplit_choice)
from .schedule import splitk_slices

SWAP_MAX_M = 128
MIN_NEIGHBOUR_STAGES = 4
WARMUP = 5
REPEATS = 25
MAX_CANDIDATES = 8
TILE_WIDTHS = (64, 96, 112, 128, 144, 160, 176, 192, 224, 256)   # the unswapped widths of the heuristic's candidates

_CHOICES = {}   # (problem, device) -> GemmConfig, this process's


def _split_toggle(pick: GemmConfig, m: int, n: int, k: int, sms: int) -> list:
    """Rule 1b of the module docstring: [what the heuristic picks without split-K, for a split pick] or [the cheapest
    split form of the problem, for a data-parallel pick] or []. ``_split_toggle(h128x192s4t3ez, 1024, 1536, 18432,
    132)`` = [h128x96s5t]; ``_split_toggle(h128x96s5t, 1024, 1536, 8192, 132)`` = [h128x192s4t3ez]; a swapped split
    pick's toggle is its data-parallel form, after rule 1's stream-K form for a small-M one (``_split_toggle(
    h128x16s8zx, 16, 4096, 4096, 132)`` = [h128x16s8ska1x, h128x16s8x]); a narrow split (rule 3c) pick's what the
    rules after 3c choose
    (``_split_toggle(h128x64s8tez, 101, 1024, 24576, 132)`` = [h128x56s6g1tzxT]), and a swapped split pick that rule
    3c yielded to (2-3 slices) that narrow split after its data-parallel form (``_split_toggle(h128x104s6tzxT, 102,
    3072, 57344, 132)`` = [h128x104s6txT, h128x64s8tez, …]); a deep one-wave pick (rule 10) the
    pick it replaced (``_split_toggle(h128x96s8g1x, 1024, 1536, 18432, 132)`` = [h128x192s4t3ez]); a 256-row decode
    tile of rule 1 the 128-row tile in both schedules (``_split_toggle(h256x32s6k4x, 31, 18432, 14336, 132)`` =
    [h128x32s8k4skax, h128x32s8k4x]); fp8's wide fill the pick it replaced (``_split_toggle(h128x224s3k4t, 987,
    7168, 6144, 132)`` = [h128x160s4k4t]); rule 7's one-wave swapped tile the stream-K pick it replaced
    (``_split_toggle(h128x200s4g1txT, 775, 4096, 57344, 132)`` = [h128x160s4g1tskxT])."""
    rules = (m, n, k, pick.dtype, pick.out_dtype, pick.a_major, pick.b_major, pick.bias, sms)
    shallow = choice_without_narrow_split(*rules, deep=False)
    if pick != shallow and pick == choice_without_narrow_split(*rules):
        return [shallow]
    unfilled = choice_without_narrow_split(*rules, wave_fills=False)
    if pick != unfilled and pick == choice_without_narrow_split(*rules):
        # a 256-row decode tile: the 128-row pick it replaced and that tile's other schedule; a wide fp8 fill or a
        # one-wave swapped tile: the pick it replaced
        if pick.swap_ab and pick.bm == 256:
            other = unfilled.replace(streamk=not unfilled.streamk, streamk_every_sm=not unfilled.streamk)
            return [unfilled, other]
        return [unfilled]
    if pick.warpgroups_along == "n":
        return [choice_without_narrow_split(m, n, k, pick.dtype, pick.out_dtype, pick.a_major, pick.b_major, pick.bias,
                                            sms, column_split=False)]
    if pick.splitk and pick.swap_ab and pick.c_major == "N":
        return [swapped_streamk(pick), pick.replace(splitk=False)]
    if pick.splitk and pick.swap_ab:
        # the problem's majors are the kernel's swapped; rule 3c's narrow split where it yielded to this pick
        narrow = narrow_split(m, n, k, pick.dtype, pick.out_dtype, pick.b_major, pick.a_major, pick.bias, sms)
        return [pick.replace(splitk=False), *([narrow] if narrow is not None else []),
                *split_forms(m, n, k, pick.dtype, pick.out_dtype, pick.b_major, pick.a_major, pick.bias, sms)[:1]]
    if pick.splitk and pick == narrow_split(m, n, k, pick.dtype, pick.out_dtype, pick.a_major, pick.b_major, pick.bias,
                                            sms):
        return [choice_without_narrow_split(m, n, k, pick.dtype, pick.out_dtype, pick.a_major, pick.b_major,
                                            pick.bias, sms)]
    if pick.splitk:
        return [unsplit_choice(m, n, k, pick.dtype, pick.out_dtype, pick.a_major, pick.b_major, pick.bias, sms)]
    if pick.swap_ab or pick.streamk or pick.grouped != "none" or pick.scales != "tensor":
        return []
    forms = split_forms(m, n, k, pick.dtype, pick.out_dtype, pick.a_major, pick.b_major, pick.bias, sms)
    return forms[:1]


def _neighbours(pick: GemmConfig, m: int, n: int, k: int, c_row_ok: bool, sms: int):
    """Rules 2 to 5 of the module docstring, unvalidated."""
    if pick.swap_ab and pick.c_major == "M":
        # a mid-M swapped pick: the other widths that split M into whole tiles (a 256-row pick: its own width too),
        # a split pick's in k-slices where they take two or more
        for bn in swapped_mid_widths(m, pick.dtype):
            tile = swapped_mid_tile(bn, pick.dtype, pick.bias, pick.out_dtype) if bn != pick.bn or pick.bm != 128 \
                else None
            if tile is None:
                continue
            tile = swapped_pipeline_stages(swapped_raster(tile.replace(streamk=pick.streamk, a_major=pick.a_major), m))
            split = tile.replace(splitk=True, overlap=0)
            yield split if pick.splitk and splitk_slices(n, m, k, split, sms) >= 2 else tile
    lo, hi = (16, 128) if pick.swap_ab else (64, 256)
    widths = [pick.bn * 2, pick.bn // 2] if pick.c_major == "N" else []
    if pick.swap_ab and pick.c_major == "N" and pick.bn & (pick.bn - 1):
        widths.append(1 << pick.bn.bit_length())   # rule 1's 40-56 against the 64 it took before
    if not pick.swap_ab:
        narrower = [w for w in TILE_WIDTHS if w < pick.bn]
        wider = [w for w in TILE_WIDTHS if w > pick.bn]
        widths += narrower[-1:] + wider[:1]
    for bn in widths:
        if lo <= bn <= hi:
            split = pick.epilogue_split if pick.staged and bn % (16 * pick.epilogue_split) == 0 else 1
            stages = pick.stages if bn >= pick.bn else 8
            yield pick.replace(bn=bn, epilogue_split=split, stages=stages).with_stages_that_fit()
    if pick.stages > MIN_NEIGHBOUR_STAGES:
        yield pick.replace(stages=pick.stages - 1)
    yield pick.replace(stages=pick.stages + 1)
    if not pick.fp8 or pick.swap_ab:
        if pick.streamk:
            yield pick.replace(streamk=False, streamk_every_sm=False,
                               overlap=1 if pick.epilogue == "tma" and pick.pending == 1 else 0)
        else:
            yield pick.replace(streamk=True, streamk_every_sm=pick.swap_ab and pick.c_major == "N", overlap=0)
    if pick.swap_ab:
        yield GemmConfig(dtype=pick.dtype, bn=128, stages=4 if pick.fp8 else 6, epilogue="tma" if c_row_ok else "rows",
                         promote=pick.promote, a_major=pick.b_major, b_major=pick.a_major, bias=pick.bias,
                         out_dtype=pick.out_dtype)
    elif m <= SWAP_MAX_M:
        bn = 128 if m > 64 else 64 if pick.a_major == "MN" else swapped_bn(m, pick.dtype)   # as rule 1 takes it
        yield GemmConfig(dtype=pick.dtype, bn=bn, stages=8, promote=pick.promote, swap_ab=True, a_major=pick.b_major,
                         b_major=pick.a_major, bias=pick.bias, out_dtype=pick.out_dtype).with_stages_that_fit()
    if not pick.fp8 and not pick.swap_ab and (pick.bm, pick.bn) == (128, 256) and pick.epilogue == "tma" and m > 256:
        yield pick.replace(bm=256, bn=128, stages=4, epilogue_split=2)


def candidates(pick: GemmConfig, m: int, n: int, k: int, c_row_ok: bool = True, sms: int = H100_SMS) -> list:
    """The configurations ``autotune`` times for the problem C (m, n) = A (m, k)·Bᵀ whose heuristic pick is ``pick``
    (see the module docstring); ``c_row_ok``: C's rows take TMA stores (16-byte aligned base and pitch); ``sms``: the
    device's SMs (split-K's slices). Post: starts with ``pick``; every entry validates, stores C as the output allows,
    and appears once; at most ``MAX_CANDIDATES``."""
    out = [pick]
    for config in [*_split_toggle(pick, m, n, k, sms), *_neighbours(pick, m, n, k, c_row_ok, sms)]:
        if len(out) >= MAX_CANDIDATES:
            break
        if config.epilogue == "tma" and not c_row_ok:
            continue
        try:
            config.validate()
        except ValueError:
            continue
        if config not in out:
            out.append(config)
    return out


def problem_key(m: int, n: int, k: int, dtype: str, out_dtype: str, a_major: str, b_major: str, bias: bool,
                c_row_ok: bool) -> tuple:
    """What a tuned choice is for: ``("gemm", m, n, k, dtype, out_dtype, a_major, b_major, bias, c_row_ok)``."""
    return ("gemm", int(m), int(n), int(k), dtype, out_dtype, a_major, b_major, bool(bias), bool(c_row_ok))


def device_key() -> tuple:
    """What a choice was timed on: (the device's name, its SM count, the driver's version), e.g. ("NVIDIA H100 80GB
    HBM3", 132, 13000). Post: equal on one machine across processes (the disk cache's key)."""
    from ptxgen.runtime import device_name, driver_version, multiprocessor_count

    return device_name(), multiprocessor_count(), driver_version()


def stored(problem: tuple, device: tuple) -> GemmConfig | None:
    """The choice for ``problem`` on ``device``: this process's, else the disk cache's (then remembered), else
    None."""
    config = _CHOICES.get((problem, device))
    if config is not None:
        return config
    from ptxgen.runtime import cache

    value = cache.lookup_choice(cache.choice_key(problem, device)) if cache.enabled() else None
    if not isinstance(value, dict) or not isinstance(value.get("config"), dict):
        return None
    try:
        config = GemmConfig(**value["config"]).validate()
    except (TypeError, ValueError):   # a field renamed since: time again
        return None
    _CHOICES[(problem, device)] = config
    return config


def remember(problem: tuple, device: tuple, config: GemmConfig, times_ms: dict) -> None:
    """Keep ``config`` as the choice for ``problem`` on ``device`` in memory and on disk, with the timings
    (``times_ms``: config name → median ms, or the error of a candidate that failed) for the record."""
    _CHOICES[(problem, device)] = config
    from ptxgen.runtime import cache

    if cache.enabled():
        cache.store_choice(cache.choice_key(problem, device),
                           {"config": dataclasses.asdict(config), "times_ms": dict(times_ms)})


def time_candidates(configs, launcher, torch) -> tuple:
    """Median ms of each of ``configs`` on the GPU: ``launcher(config)`` → a zero-argument callable that launches it
    on fresh inputs (the site is prepared, compiled and loaded by that call); ``WARMUP`` launches, then ``REPEATS``
    each between two CUDA events on the current stream. → (the fastest config, {name: ms or the error text}).
    Raises RuntimeError when every candidate failed."""
    times, best, best_ms = {}, None, None
    for config in configs:
        try:
            launch = launcher(config)
            for _ in range(WARMUP):
                launch()
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(REPEATS)]
            for start, end in events:
                start.record()
                launch()
                end.record()
            torch.cuda.synchronize()
        except Exception as exc:   # a candidate that does not compile or launch: the others decide
            times[config.name] = f"{type(exc).__name__}: {exc}"
            continue
        ms = statistics.median(start.elapsed_time(end) for start, end in events)
        times[config.name] = ms
        if best_ms is None or ms < best_ms:
            best, best_ms = config, ms
    if best is None:
        raise RuntimeError("autotune: every candidate failed: " + "; ".join(f"{k}: {v}" for k, v in times.items()))
    return best, times
