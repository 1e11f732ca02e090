#!/usr/bin/env python3
"""Compile latency: IR text → ready-to-load cubin (→ loaded kernel on a GPU), cold and through the disk cache.

    python benchmarks/bench_compile.py [--examples gemm,sqrt_sin,l2norm,tma_copy] [--repeat 3]
    python benchmarks/bench_compile.py --gemm [--shapes 4096x4096x14336] [--dtypes bf16] [--compileall]

Per example, each in FRESH Python processes (``python -c``) against a private, initially EMPTY cache directory:

- ``cold``: the first ``jit_text(text, file).compile(spec)`` of a new process (lark grammars built, LLVM's NVPTX
  target initialised, nvJitLink loaded — all inside the call), split into parse / verify / lower / PTX (LLVM O3 +
  NVPTX) / cubin (nvJitLink) by timing wrappers around those functions; the imports are timed separately;
- ``warm-cold``: the same compile again in that process with the disk cache off and the process dict emptied: the
  steady-state cost of a cache miss (median of ``--repeat``);
- ``cached``: a NEW process with the now-filled cache: the first ``jit_text(...).compile(spec)`` (this includes
  the once-per-process toolchain digest) and, after emptying the process dict, the steady-state hit (median); the
  process reported is the median of ``--processes`` (a first call is one sample per process; ``cold`` too, each of
  its processes with empty caches of its own);
- with a GPU: text → loaded kernel (``cuModuleLoadData`` of the image the launcher loads — the cubin, or for a
  setmaxnreg kernel the PTX through the driver's JIT, whose disk cache ``CUDA_CACHE_PATH`` is private to the run —
  after the CUDA context exists) cold and cached, and the launch overhead per call of sqrt_sin on tiny torch
  tensors: a prepared site ``site()``, ``k(x=, z=, n=)`` and torch's own ``torch.add(a, b, out=c)``, host wall time over 10000 calls after a
  synchronize (no CUDA events), median of 5.

``--gemm``: the cold first ``ptxgen.kernels.matmul`` of a new configuration instead (issue 17's "cold first call of a
new config"), per shape (``--shapes``, default 4096x4096x14336: h128x256s4c2t2sk) and dtype, each in ``--processes``
fresh processes with empty caches (``PTXGEN_CACHE_DIR``, ``CUDA_CACHE_PATH``), torch imported and its CUDA context
created first where there is a GPU (numpy otherwise), then ``import ptxgen.kernels`` (timed), then the first call
split into exclusive phases: ``imports`` (modules imported during the call: llvmlite, ptxgen.lower/runtime, cuda
bindings), ``choose``, ``build`` (the IR of the config), ``verify``, ``hash`` (printing the IR for the cache key),
``lower`` (IR → LLVM IR text, Python), ``llvm`` (LLVM parse, passes, NVPTX emission), ``store`` (the disk cache),
``load`` (cuModuleLoadData: the driver's PTX JIT; GPU only) and ``other`` (the rest: argument checks, JitKernel,
binding, launch). ``--warm``: each process first compiles and runs the configuration of 256x512x512 (another one),
so the call measured is a new configuration in a process whose toolchain is loaded. With a GPU the call is ``matmul(a, b)`` on torch tensors plus a synchronize; without one the same path
up to the image handed to the driver (``jit_kernel(config).compile(spec)`` with the call's specialization).
``--compileall`` byte-compiles layoutc and ptxgen first into a private ``PYTHONPYCACHEPREFIX`` (what ``pip install``
does; a checkout run with ``PYTHONDONTWRITEBYTECODE`` compiles every source again in every process), then runs one
untimed first call (its own empty caches, bytecode writes on) so that the standard library's and the third-party
modules the call imports (llvmlite, cuda.bindings) have their bytecode in the prefix too: Python reads every ``.pyc``
from the prefix once it is set, so without this each measured process compiled llvmlite's sources again (49 of the 73
ms of ``imports`` on a 2-core CPU host) — not what an installed environment, whose packages carry their bytecode, pays.
``compiled_from_source`` (count, ms) reports the modules the measured call still compiled from source.

``spec``: every gtensor parameter contiguous in its last mode, 16-byte aligned, extent a multiple of 16 (what a
launch with ordinary torch tensors gets). Writes JSON to ``$OUT/bench_compile.json`` (else ./bench_compile.json).
``PYTHONDONTWRITEBYTECODE`` is reported: set, every import compiles the sources again (import times ≈ 2×).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

_CHILD = r'''
import json, os, statistics, sys, time
t0 = time.perf_counter()
import ptxgen.runtime, ptxgen.ir.text, ptxgen.verify, ptxgen.lower, ptxgen.lower.target
from ptxgen.ir.types import GlobalTensorType
from ptxgen.lower import Specialization, TensorSpec
from ptxgen.runtime import cache, jit_text, launcher
t1 = time.perf_counter()
name, mode, repeat, gpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
file = f"examples/{name}.tile"
text = open(file).read()
stages = {}
def timed(mod, attr, stage):
    fn = getattr(mod, attr)
    def wrapped(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            stages[stage] = stages.get(stage, 0.0) + time.perf_counter() - s
    setattr(mod, attr, wrapped)
timed(ptxgen.ir.text, "parse_module", "parse")
timed(ptxgen.verify, "verify", "verify")
timed(ptxgen.lower, "lower_kernel", "lower")
timed(ptxgen.lower.target, "emit_ptx", "ptx")
timed(ptxgen.lower, "assemble", "cubin")
timed(cache, "toolchain", "toolchain")
def spec_of(kernel):
    return Specialization(tuple((p.name, TensorSpec(p.type.rank - 1, True, 16)) for p in kernel.params
                                if isinstance(p.type, GlobalTensorType)))
def once():
    k = jit_text(text, file)
    return k, k.compile(spec_of(k.kernel))
out = {"imports_s": t1 - t0}
s = time.perf_counter(); k, c = once(); out["first_s"] = time.perf_counter() - s
out["first_stages_s"] = dict(stages)
out["from_cache"] = c.from_cache
out["registers"] = c.registers
if gpu:
    from ptxgen.runtime import context
    from ptxgen.runtime.driver import Module
    from ptxgen.runtime.launcher import load_image
    # the image the launcher loads: nvJitLink's cubin, or the PTX through the driver's JIT for setmaxnreg kernels
    # (its own disk cache is CUDA_CACHE_PATH, private to this run: empty for "cold", filled for "cached")
    image = load_image(c)
    out["image"] = image
    s = time.perf_counter(); context(); out["context_s"] = time.perf_counter() - s
    s = time.perf_counter(); Module(c.ptx if image == "ptx" else c.cubin); out["module_load_s"] = time.perf_counter() - s
    out["loaded_s"] = out["first_s"] + out["module_load_s"]
    loads = []
    for _ in range(repeat):
        s = time.perf_counter(); Module(c.ptx if image == "ptx" else c.cubin); loads.append(time.perf_counter() - s)
    out["module_load_steady_s"] = statistics.median(loads)
steady = []
if mode == "cold":
    os.environ["PTXGEN_CACHE"] = "0"   # a miss every time, in a process where everything is initialised
for _ in range(repeat):
    launcher._COMPILED.clear()
    stages.clear()
    s = time.perf_counter(); k, c = once(); steady.append(time.perf_counter() - s)
out["steady_s"] = statistics.median(steady)
out["steady_stages_s"] = dict(stages)
out["steady_from_cache"] = c.from_cache
print("RESULT " + json.dumps(out))
'''

_LAUNCH = r'''
import json, statistics, sys, time
import torch
from ptxgen.runtime import jit_text, synchronize
text = open("examples/sqrt_sin.tile").read()
k = jit_text(text, "examples/sqrt_sin.tile")
n = 1024
x = torch.rand(n, device="cuda"); z = torch.empty_like(x); a = torch.rand(n, device="cuda"); c = torch.empty_like(a)
k(x=x, z=z, n=n); torch.cuda.synchronize()
ref = torch.sqrt(torch.sin(x))
assert torch.allclose(z, ref, rtol=1e-5, atol=1e-6, equal_nan=True), "sqrt_sin result wrong"
site = k.prepare(x=x, z=z, n=n)
calls = 10000
def per_call(fn):
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        s = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - s) / calls)
        torch.cuda.synchronize()
    return statistics.median(times)
res = {"site()": per_call(site), "k(x=, z=, n=)": per_call(lambda: k(x=x, z=z, n=n)),
       "torch.add(a, b, out=c)": per_call(lambda: torch.add(a, a, out=c))}
print("RESULT " + json.dumps({name: v * 1e6 for name, v in res.items()}))
'''


_GEMM = r'''
import importlib, json, os, sys, time
import importlib._bootstrap as bootstrap
import importlib.machinery
m, n, k = (int(x) for x in sys.argv[1].split("x"))
dtype, gpu = sys.argv[2], sys.argv[3] == "1"
WARM = (256, 512, 512)   # --warm: this shape's configuration first (a 128 x 64 tile, not the measured one)
t0 = time.perf_counter()
if gpu:
    import torch
    torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()   # torch's CUDA context, as a caller has
else:
    import numpy
pre_s = time.perf_counter() - t0
t0 = time.perf_counter()
import ptxgen.kernels
import_s = time.perf_counter() - t0
phases = {}
compiled = [0, 0.0]                     # modules compiled from source during the call (no bytecode found), seconds
source_to_code = importlib.machinery.SourceFileLoader.source_to_code
def counted_source_to_code(self, *a, **kw):
    s = time.perf_counter()
    try:
        return source_to_code(self, *a, **kw)
    finally:
        compiled[0] += 1
        compiled[1] += time.perf_counter() - s
imports = [0.0, 0]                      # seconds inside top-level imports during the call, nesting depth
find_and_load = bootstrap._find_and_load
PATCHES = [("ptxgen.kernels.linalg", "choose_config", "choose"), ("ptxgen.kernels.gemm.run", "build", "build"),
           ("ptxgen.verify", "verify", "verify"), ("ptxgen.ir.text", "print_kernel", "hash"),
           ("ptxgen.lower", "lower_kernel", "lower"), ("ptxgen.lower.target", "emit_ptx", "llvm"),
           ("ptxgen.runtime.cache", "store", "store"), ("ptxgen.runtime.kernel_launch", "Module", "load")]
def timed(mod, attr, phase):
    fn = getattr(mod, attr)
    def wrapped(*a, **kw):
        s, before = time.perf_counter(), imports[0]
        try:
            return fn(*a, **kw)
        finally:   # exclusive of the imports made inside (charged to "imports")
            phases[phase] = phases.get(phase, 0.0) + time.perf_counter() - s - (imports[0] - before)
    setattr(mod, attr, wrapped)
def patch():
    """wrap the phases' functions of the modules imported so far (the others once the call imports them)"""
    for entry in list(PATCHES):
        if entry[0] in sys.modules:
            timed(sys.modules[entry[0]], entry[1], entry[2])
            PATCHES.remove(entry)
def timed_import(*a, **kw):
    imports[1] += 1
    s = time.perf_counter()
    try:
        return find_and_load(*a, **kw)
    finally:
        imports[1] -= 1
        if not imports[1]:
            imports[0] += time.perf_counter() - s
            patch()
from ptxgen.kernels.gemm import heuristic, run
sms = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 132
config = heuristic.choose_config(m, n, k, dtype, sms)
if gpu:
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}[dtype]
    def call(m, n, k):
        a = torch.randn(m, k, device="cuda").to(tdt)
        b = torch.randn(n, k, device="cuda").to(tdt).T
        torch.cuda.synchronize()
        def run_it():
            if dtype == "e4m3":
                ptxgen.kernels.scaled_mm(a, b, 1.0, 1.0)
            else:
                ptxgen.kernels.matmul(a, b)
            torch.cuda.synchronize()
        return run_it
else:
    import numpy as np
    from numpy.lib.stride_tricks import as_strided
    from ptxgen.kernels.gemm.schedule import streamk_buffers
    import ml_dtypes
    def stand_in(shape, host_dtype):   # the call's strides without the memory (only the specialization reads them)
        base = np.zeros(64, host_dtype)
        return as_strided(base, shape, (shape[1] * base.itemsize, base.itemsize))
    def call(m, n, k):
        return lambda: compile_for(m, n, k)
    def compile_for(m, n, k):
        cfg = ptxgen.kernels.linalg.choose_config(m, n, k, dtype, sms)
        host = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn}[dtype]
        out = ml_dtypes.bfloat16 if dtype == "e4m3" else host
        args = run.kernel_arguments(cfg, stand_in((m, k), host), stand_in((n, k), host), stand_in((m, n), out), None,
                                    m, n, k, lambda x: x.T, None)
        args["sms"] = sms
        if cfg.fp8:
            args["scale_a"] = args["scale_b"] = 1.0
        if cfg.streamk:
            shapes = streamk_buffers(run.kernel_config(cfg), sms)
            args["work"] = np.zeros(shapes["work"], np.float32)
            args["flags"] = np.zeros(shapes["flags"], np.int32)
        kern = run.jit_kernel(cfg)
        compiled = kern.compile(kern.specialization(**args))
        from ptxgen.runtime.kernel_launch import load_image
        return load_image(compiled)
warm = None
if sys.argv[4] == "1":   # the process has compiled and run another configuration first: the toolchain is loaded
    warm = heuristic.choose_config(WARM[0], WARM[1], WARM[2], dtype, sms).name
    assert warm != config.name, (warm, config.name)
    call(*WARM)()
first_call = call(m, n, k)
patch()
bootstrap._find_and_load = timed_import
importlib.machinery.SourceFileLoader.source_to_code = counted_source_to_code
s = time.perf_counter()
image = first_call()
first_s = time.perf_counter() - s
bootstrap._find_and_load = find_and_load
importlib.machinery.SourceFileLoader.source_to_code = source_to_code
phases["imports"] = imports[0]
phases["other"] = first_s - sum(phases.values())
print("RESULT " + json.dumps({"config": config.name, "warm_config": warm, "pre_s": pre_s, "import_s": import_s, "first_s": first_s,
                              "phases": phases, "image": image, "compiled_from_source": [compiled[0], compiled[1]],
                              "bytecode_writes": not sys.flags.dont_write_bytecode,
                              "pycache_prefix": sys.pycache_prefix}))
'''


def _run(code: str, args, env) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"child failed ({args}):\n{out.stderr[-3000:]}")
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _gpu() -> bool:
    try:
        from ptxgen.runtime import gpu_available

        return bool(gpu_available())
    except Exception:
        return False


GEMM_PHASES = ("imports", "choose", "build", "verify", "hash", "lower", "llvm", "store", "load", "other")


def gemm_first_calls(args, gpu: bool, env: dict) -> dict:
    """``--gemm``: the cold first matmul per shape and dtype, the median process of ``args.processes`` (each with
    empty caches of its own) and every phase's median over them. → the results (JSON)."""
    results = {}
    if args.compileall:
        prefix = tempfile.mkdtemp(prefix="ptxgen-bench-pycache-")
        env = {**env, "PYTHONPYCACHEPREFIX": prefix}
        subprocess.run([sys.executable, "-m", "compileall", "-q", "layoutc", "ptxgen"], cwd=ROOT, env=env, check=True)
        # the modules from outside the tree (stdlib, llvmlite, cuda.bindings) get their bytecode in the prefix from one
        # untimed first call with bytecode writes on (an installed environment has theirs already)
        writes = {key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"}
        for dtype in args.dtypes.split(","):
            with tempfile.TemporaryDirectory(prefix="ptxgen-bench-bytecode-") as d:
                _run(_GEMM, [args.shapes.split(",")[0], dtype, int(gpu), int(args.warm)],
                     {**writes, "PTXGEN_CACHE_DIR": d, "CUDA_CACHE_PATH": os.path.join(d, "driver-jit")})
    ms = lambda s: f"{s * 1e3:7.1f}"  # noqa: E731
    print(f"{'dtype':<5} {'shape':<18} {'config':<20} {'import':>7} {'first':>7} " +
          " ".join(f"{p:>7}" for p in GEMM_PHASES) + "   ms, median of processes")
    for dtype in args.dtypes.split(","):
        for shape in args.shapes.split(","):
            runs = []
            for _ in range(args.processes):
                with tempfile.TemporaryDirectory(prefix="ptxgen-bench-gemm-") as d:
                    runs.append(_run(_GEMM, [shape, dtype, int(gpu), int(args.warm)],
                                     {**env, "PTXGEN_CACHE_DIR": d, "CUDA_CACHE_PATH": os.path.join(d, "driver-jit")}))
            med = lambda key: statistics.median(key(r) for r in runs)  # noqa: E731
            row = {"config": runs[0]["config"], "image": runs[0]["image"], "import_s": med(lambda r: r["import_s"]),
                   "first_s": med(lambda r: r["first_s"]), "first_s_all": [r["first_s"] for r in runs],
                   "import_s_all": [r["import_s"] for r in runs],
                   "phases": {p: med(lambda r: r["phases"].get(p, 0.0)) for p in GEMM_PHASES},
                   "compiled_from_source_all": [r["compiled_from_source"] for r in runs],
                   "bytecode_writes": runs[0]["bytecode_writes"], "pycache_prefix": runs[0]["pycache_prefix"]}
            results[f"{dtype} {shape}"] = row
            print(f"{dtype:<5} {shape:<18} {row['config']:<20} {ms(row['import_s'])} {ms(row['first_s'])} " +
                  " ".join(ms(row["phases"][p]) for p in GEMM_PHASES))
    print("import = import ptxgen.kernels (after torch / numpy); first = the first matmul (a new config, empty caches"
          + (f"; the process compiled and ran {runs[0]['warm_config']} first" if args.warm else "") + "), "
          "split into exclusive phases;\nfirst calls per process (ms): " + "; ".join(
              f"{key}: " + ", ".join(f"{t * 1e3:.0f}" for t in r["first_s_all"]) for key, r in results.items()) +
          "\nmodules compiled from source during the call (count/ms per process): " + "; ".join(
              f"{key}: " + ", ".join(f"{n}/{t * 1e3:.0f}" for n, t in r["compiled_from_source_all"])
              for key, r in results.items()))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", default="gemm_hopper,gemm,sqrt_sin,l2norm,tma_copy")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--processes", type=int, default=5,
                    help="fresh processes for the cold and for the cached first call (the median is reported)")
    ap.add_argument("--gemm", action="store_true",
                    help="time the cold first matmul of a new config instead of the examples' compiles")
    ap.add_argument("--shapes", default="4096x4096x14336", help="--gemm: MxNxK shapes, comma-separated")
    ap.add_argument("--dtypes", default="bf16", help="--gemm: bf16, f16, e4m3, comma-separated")
    ap.add_argument("--warm", action="store_true",
                    help="--gemm: each process first compiles and runs another configuration (256x512x512)")
    ap.add_argument("--compileall", action="store_true",
                    help="byte-compile layoutc and ptxgen first (as an installed package is), into a private prefix")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    gpu = _gpu()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PTXGEN_CACHE", None)
    if args.gemm:
        results = {"gpu": gpu, "python": sys.version.split()[0],
                   "PYTHONDONTWRITEBYTECODE": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
                   "compileall": args.compileall, "gemm": gemm_first_calls(args, gpu, env)}
        out_dir = os.environ.get("OUT")
        path = pathlib.Path(out_dir) / "bench_compile_gemm.json" if out_dir else pathlib.Path("bench_compile_gemm.json")
        path.write_text(json.dumps(results, indent=1))
        print(f"wrote {path}")
        return
    results = {"gpu": gpu, "python": sys.version.split()[0],
               "PYTHONDONTWRITEBYTECODE": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")), "examples": {}}
    if gpu:
        from ptxgen.runtime import device_name

        results["device"] = device_name()
    ms = lambda s: f"{s * 1e3:8.1f}"  # noqa: E731
    print(f"{'example':<10} {'imports':>8} {'cold':>8} {'(parse':>7} {'verify':>7} {'lower':>7} {'ptx':>7} "
          f"{'cubin)':>7} {'warm-cold':>9} {'cached1':>8} {'cached':>7} {'load':>6}   ms")
    # One throwaway process first: on a fresh machine the first Python process that imports llvmlite, lark and
    # cuda-bindings also pays for reading them from disk (and for building lark's grammar cache once per machine),
    # which would otherwise be charged to whichever example comes first.
    with tempfile.TemporaryDirectory(prefix="ptxgen-bench-warmup-") as d:
        _run(_CHILD, ["sqrt_sin", "cold", 1, int(gpu)], {**env, "PTXGEN_CACHE_DIR": d,
                                                        "CUDA_CACHE_PATH": os.path.join(d, "driver-jit")})
    def median_process(runs):
        return sorted(runs, key=lambda r: r.get("loaded_s", r["first_s"]))[len(runs) // 2]

    for name in args.examples.split(","):
        # a first call's time is one sample per process: take the median process of several, each cold one with
        # caches of its own (ours and the driver's), empty
        colds = []
        for _ in range(args.processes - 1):
            with tempfile.TemporaryDirectory(prefix="ptxgen-bench-cold-") as d:
                colds.append(_run(_CHILD, [name, "cold", args.repeat, int(gpu)],
                                  {**env, "PTXGEN_CACHE_DIR": d, "CUDA_CACHE_PATH": os.path.join(d, "driver-jit")}))
        with tempfile.TemporaryDirectory(prefix="ptxgen-bench-cache-") as d:
            e = {**env, "PTXGEN_CACHE_DIR": d, "CUDA_CACHE_PATH": os.path.join(d, "driver-jit")}
            colds.append(_run(_CHILD, [name, "cold", args.repeat, int(gpu)], e))   # this one fills the cache
            cold = median_process(colds)
            cold["loaded_s_all"] = [r.get("loaded_s", r["first_s"]) for r in colds]
            # every cold process's stages (the driver JIT as "load"): a median process hides which stage varies
            cold["stages_all"] = [{**r["first_stages_s"], **({"load": r["module_load_s"]} if "module_load_s" in r
                                                             else {})} for r in colds]
            runs = [_run(_CHILD, [name, "cached", args.repeat, int(gpu)], e) for _ in range(args.processes)]
            cached = median_process(runs)
            cached["first_s_all"] = [r["first_s"] for r in runs]
        assert not cold["from_cache"] and cached["from_cache"] and cached["steady_from_cache"]
        results["examples"][name] = {"cold_process": cold, "cached_process": cached}
        st = cold["first_stages_s"]
        load = cached.get("module_load_steady_s")
        print(f"{name:<10} {ms(cold['imports_s'])} {ms(cold['first_s'])} {ms(st.get('parse', 0)):>7} "
              f"{ms(st.get('verify', 0)):>7} {ms(st.get('lower', 0)):>7} {ms(st.get('ptx', 0)):>7} "
              f"{ms(st.get('cubin', 0)):>7} {ms(cold['steady_s']):>9} {ms(cached['first_s'])} "
              f"{ms(cached['steady_s']):>7} {(f'{load * 1e3:6.2f}' if load is not None else '-'):>6}")
    print("cold = first call in a fresh process with an empty cache (imports excluded, listed first); warm-cold = "
          "a miss once everything is initialised;\ncached1 = first call of a new process on a filled cache "
          "(incl. the toolchain digest); cached = steady hit; load = cuModuleLoadData")
    for name, r in results["examples"].items():
        runs = r["cold_process"]["stages_all"]
        keys = [k for k in ("parse", "verify", "lower", "ptx", "cubin", "load") if any(k in x for x in runs)]
        print(f"  cold {name}, each stage's median [min, max] over {len(runs)} processes: " + ", ".join(
            f"{k} {statistics.median(x.get(k, 0) for x in runs) * 1e3:.1f} "
            f"[{min(x.get(k, 0) for x in runs) * 1e3:.0f}, {max(x.get(k, 0) for x in runs) * 1e3:.0f}]"
            for k in keys) + " ms; total " + ", ".join(f"{t * 1e3:.0f}" for t in r["cold_process"]["loaded_s_all"]))
    for name, r in results["examples"].items():
        s = r["cold_process"]["steady_stages_s"]
        print(f"  warm-cold {name}: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in s.items()) + " ms")
    if gpu:
        for name, r in results["examples"].items():
            cold, cached = r["cold_process"], r["cached_process"]
            print(f"  text -> loaded kernel {name} ({cold['image']} image): cold {cold['loaded_s'] * 1e3:.1f} ms, "
                  f"cached first call {cached['loaded_s'] * 1e3:.1f} ms (module load {cold['module_load_s'] * 1e3:.1f}"
                  f" / {cached['module_load_s'] * 1e3:.1f} ms)")
        try:
            results["launch_overhead_us"] = _run(_LAUNCH, [], {**env, "PTXGEN_CACHE_DIR": tempfile.mkdtemp()})
            print("launch overhead per call (µs, host wall time, 10000 calls, median of 5): " +
                  ", ".join(f"{k} {v:.2f}" for k, v in results["launch_overhead_us"].items()))
        except Exception as exc:  # no torch on this machine: the compile numbers stand alone
            results["launch_overhead_error"] = str(exc)[-500:]
            print(f"launch overhead not measured: {str(exc)[-300:]}")
    out_dir = os.environ.get("OUT")
    path = pathlib.Path(out_dir) / "bench_compile.json" if out_dir else pathlib.Path("bench_compile.json")
    path.write_text(json.dumps(results, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
