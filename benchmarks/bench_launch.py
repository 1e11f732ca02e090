#!/usr/bin/env python3
"""Host cost per call of launching a ptxgen kernel from Python, against torch's own ops in the same run.

    python3 benchmarks/bench_launch.py [--calls 10000] [--rounds 5] [--json out.json]     # on a GPU, with torch
    python3 benchmarks/bench_launch.py --cpu                                             # no GPU: the binding path

On the GPU it measures host wall time per call (``time.perf_counter`` around ``--calls`` back-to-back calls, no
synchronization inside; the median over ``--rounds`` rounds, the cases interleaved round by round) of

- ``torch.add``: ``x.add_(1)`` on a 1024-element f32 CUDA tensor (torch's own op: dispatch + its launch);
- ``k(x=, z=, n=)``: examples/sqrt_sin.tile called the natural way with torch tensors (the launcher's cached
  binding: read the tensors, one signature lookup, the grid, pointer and scalar slots, ``cuLaunchKernelEx``);
- ``k(x=, z=, n=) new tensors``: the same, alternating between two pairs of tensors of one signature;
- ``site()`` and ``site(x=, z=)``: a prepared call site (``k.prepare``), as is and with its tensors swapped;
- ``cuLaunchKernelEx``: the driver call alone (cuda-bindings) with the binding's pre-packed ``void**`` — the floor;
- ``cuLaunchKernelEx (ctypes)``: the same call through ctypes on libcuda, for comparison with cuda-bindings;
- with ``ptxgen.kernels`` present: ``matmul(a, b)`` against ``torch.matmul(a, b)``, ``linear(x, w)`` against
  ``torch.nn.functional.linear`` and ``linear(x, weight, bias)`` (an ``nn.Parameter`` weight) against the same, on
  small bf16 shapes (where the GPU finishes each call before the host issues
  the next, so host time is what is measured; ``device_us`` says how long the GPU took per call).

Results are checked against torch first (sqrt_sin, matmul, linear; float64 references). It prints each case's µs
per call and its ratio to torch's op (``k(...)`` / ``torch.add``, ``matmul`` / ``torch.matmul``), and writes JSON
(``$OUT/bench_launch.json``, else ``./bench_launch.json``).

``--cpu`` (no GPU needed): the launcher's binding path with the driver replaced by a stub that returns at once,
with stand-in tensors (torch-like, ``__cuda_array_interface__``, DLPack-only; a real CPU torch tensor on the fast
path when torch is importable) — the µs the launcher spends before the driver call (the minimum over the rounds:
on a shared machine other processes only ever add time). Then, in a process of its own, ``matmul``/``linear``
called the natural way on stand-in CUDA tensors (benchmarks/torch_standin.py: metadata only, whose ``empty`` is a
Python object rather than torch's allocator) for an unswapped and a swapped (small-M) configuration, and the
block-scaled fp8 ops (``fp8_gemm_nt`` at 4096x2112x7168 and 64x7168x2048, the contiguous and masked grouped GEMMs):
the ops' host path per call after the first (their fast path), everything before the driver call.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SQRT_SIN = ROOT / "examples" / "sqrt_sin.tile"
SMALL_GEMMS = [(64, 64, 64), (128, 256, 128), (256, 256, 256), (16, 1024, 1024)]  # (M, N, K)
CPU_GEMMS = [(128, 256, 128), (16, 1024, 1024)]   # an unswapped and a swapped (small-M) configuration
CPU_FP8_GEMMS = [(4096, 2112, 7168), (64, 7168, 2048)]   # block-scaled: a straddling N, a swapped small M


def per_call_us(cases: dict, calls: int, rounds: int, sync, statistic=statistics.median) -> dict:
    """µs per call of each case (name → zero-argument callable): ``statistic`` (the median; the minimum on a shared
    CPU, where other processes only ever add time) over ``rounds`` rounds of ``calls`` calls, the cases interleaved
    within each round; each round starts and ends synchronized (``sync``)."""
    times = {name: [] for name in cases}
    for fn in cases.values():  # warm: first calls bind, compile, load
        for _ in range(10):
            fn()
    sync()
    for _ in range(rounds):
        for name, fn in cases.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    sync()
    return {name: statistic(t) for name, t in times.items()}


def device_us(fn, torch, reps: int = 200) -> float:
    """GPU time per call of ``fn`` (CUDA events around ``reps`` back-to-back calls)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def raw_ctypes_launch(binding):
    """A zero-argument callable launching ``binding`` (a BlockLaunch) through ctypes on libcuda's cuLaunchKernelEx,
    or None when libcuda or the symbol is not found."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernelEx
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    cfg, handle, params = int(binding.cfg.getPtr()), int(binding.handle), binding.address
    if fn(cfg, handle, params, None):  # refused: leave the row out rather than stop the benchmark
        return None

    def launch():
        fn(cfg, handle, params, None)
    return launch


def gpu(args) -> dict:
    import numpy as np
    import torch

    from ptxgen.ir.text import parse_module
    from ptxgen.runtime import device_name, jit

    k = jit(parse_module(SQRT_SIN.read_text(), file="examples/sqrt_sin.tile"))
    n = 1024
    x = torch.rand(n, device="cuda") * 3.0
    z = torch.empty_like(x)
    x2, z2 = torch.rand(n, device="cuda") * 3.0, torch.empty_like(x)
    k(x=x, z=z, n=n)
    k(x=x2, z=z2, n=n)
    torch.cuda.synchronize()
    for a, b in ((x, z), (x2, z2)):
        want = np.sqrt(np.sin(a.double().cpu().numpy()))
        err = float(np.max(np.abs(b.double().cpu().numpy() - want)))
        if not err <= 1e-5:
            raise SystemExit(f"sqrt_sin result wrong: max abs error {err}")
    (binding,) = k._binder.bindings.values()
    site = k.prepare(x=x, z=z, n=n)
    a = torch.rand(n, device="cuda")
    pairs = [(x, z), (x2, z2)]
    flip = [0]

    def new_tensors():
        flip[0] ^= 1
        xa, za = pairs[flip[0]]
        k(x=xa, z=za, n=n)

    def raw():
        binding.cu_launch(binding.cfg, binding.handle, binding.address, 0)

    cases = {
        "torch.add": lambda: a.add_(1.0),
        "k(x=, z=, n=)": lambda: k(x=x, z=z, n=n),
        "k(x=, z=, n=) new tensors": new_tensors,
        "site()": site,
        "site(x=, z=)": lambda: site(x=x, z=z),
        "cuLaunchKernelEx": raw,
    }
    ctypes_launch = raw_ctypes_launch(binding)
    if ctypes_launch is not None:
        cases["cuLaunchKernelEx (ctypes)"] = ctypes_launch
    results = {"device": device_name(), "torch": torch.__version__, "calls": args.calls, "rounds": args.rounds,
               "launch_us": per_call_us(cases, args.calls, args.rounds, torch.cuda.synchronize)}
    lu = results["launch_us"]
    results["ratios"] = {"k(x=, z=, n=) / torch.add": lu["k(x=, z=, n=)"] / lu["torch.add"],
                         "site() / torch.add": lu["site()"] / lu["torch.add"],
                         "k(x=, z=, n=) / cuLaunchKernelEx": lu["k(x=, z=, n=)"] / lu["cuLaunchKernelEx"]}
    results["gemm"] = gemm_overhead(args, torch)
    return results


def gemm_overhead(args, torch) -> dict:
    """matmul / linear of ptxgen.kernels against torch's on small bf16 shapes (host µs per call), or why not."""
    try:
        from ptxgen import kernels
    except ImportError as exc:
        return {"skipped": f"ptxgen.kernels is not importable: {exc}"}
    out = {}
    for m, n_, kk in SMALL_GEMMS:
        try:
            out[f"{m}x{n_}x{kk}"] = gemm_shape(args, torch, kernels, m, n_, kk)
        except Exception as exc:  # a shape the library refuses or gets wrong: reported, the others still run
            out[f"{m}x{n_}x{kk}"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def gemm_shape(args, torch, kernels, m, n_, kk) -> dict:
    """One small shape of ``gemm_overhead``: results checked, host and device µs per call, ratios to torch."""
    a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(kk, n_, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n_, kk, device="cuda", dtype=torch.bfloat16)
    cases, checks = {}, []
    if hasattr(kernels, "matmul"):
        cases["matmul"] = lambda: kernels.matmul(a, b)
        cases["torch.matmul"] = lambda: torch.matmul(a, b)
        checks.append(("matmul", kernels.matmul(a, b), a.double() @ b.double()))
    if hasattr(kernels, "linear"):
        bias = torch.randn(n_, device="cuda", dtype=torch.bfloat16)
        weight = torch.nn.Parameter(w, requires_grad=False)   # a layer's weight, as callers pass it
        cases["linear"] = lambda: kernels.linear(a, w)
        cases["torch linear"] = lambda: torch.nn.functional.linear(a, w)
        cases["linear bias"] = lambda: kernels.linear(a, weight, bias)
        cases["torch linear bias"] = lambda: torch.nn.functional.linear(a, weight, bias)
        checks.append(("linear", kernels.linear(a, w), a.double() @ w.double().T))
        checks.append(("linear bias", kernels.linear(a, weight, bias), a.double() @ w.double().T + bias.double()))
    torch.cuda.synchronize()
    entry = {"rel_errors": {}}
    for name, got, want in checks:
        rel = float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))
        entry["rel_errors"][name] = rel
        if not rel < 2e-2:
            raise ValueError(f"{name} wrong: relative error {rel} against float64")
    entry["host_us"] = per_call_us(cases, args.calls, args.rounds, torch.cuda.synchronize)
    entry["device_us"] = {name: device_us(fn, torch) for name, fn in cases.items()}
    h = entry["host_us"]
    entry["ratios"] = {}
    if "matmul" in h:
        entry["ratios"]["matmul / torch.matmul"] = h["matmul"] / h["torch.matmul"]
    if "linear" in h:
        entry["ratios"]["linear / torch linear"] = h["linear"] / h["torch linear"]
        entry["ratios"]["linear bias / torch linear bias"] = h["linear bias"] / h["torch linear bias"]
    return entry


# -- the binding path on the CPU ----------------------------------------------------------------------------------

def cpu(args) -> dict:
    """µs per call before the driver call, with the driver replaced by a stub (no GPU): see the module docstring."""
    from types import SimpleNamespace

    import numpy as np

    from ptxgen.ir.text import parse_module
    from ptxgen.runtime import binding as binding_module
    from ptxgen.runtime import jit
    from ptxgen.runtime import kernel_launch as launch

    class Stub:
        """cuda.bindings.driver with cuLaunchKernelEx returning success at once."""

        def __init__(self):
            from cuda.bindings import driver

            self._real = driver

        def __getattr__(self, name):
            return getattr(self._real, name)

        @staticmethod
        def cuLaunchKernelEx(cfg, handle, params, extra):
            return (0,)

    stub = Stub()

    class Module:
        def __init__(self, image):
            pass

        def function(self, name):
            return SimpleNamespace(handle=name)

    launch._cu, launch.Module = (lambda: stub), Module
    launch.context, launch.current_device = (lambda: None), (lambda: 0)

    class Device:
        type, index = "cuda", 0

    class DType:
        def __str__(self):
            return "torch.float32"

    f32, dev = DType(), Device()

    class TorchLike:
        def __init__(self, ptr, n):
            self._ptr, self.shape, self.dtype, self.device, self.is_cuda = ptr, (n,), f32, dev, True

        def data_ptr(self):
            return self._ptr

        def stride(self):
            return (1,)

    class CudaArray:
        def __init__(self, ptr, n):
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": "<f4", "strides": None,
                                             "version": 3}

    class DLPackOnly:
        def __init__(self, n):
            self._a = np.zeros(n, np.float32)

        def __dlpack__(self, stream=None):
            return self._a.__dlpack__()

        def __dlpack_device__(self):
            return (2, 0)

    k = jit(parse_module(SQRT_SIN.read_text(), file="examples/sqrt_sin.tile"))
    n = 1024
    x, z = TorchLike(0x10000, n), TorchLike(0x20000, n)
    xc, zc = CudaArray(0x10000, n), CudaArray(0x20000, n)
    xd, zd = DLPackOnly(n), DLPackOnly(n)
    site = k.prepare(x=x, z=z, n=n)
    k(x=x, z=z, n=n)
    (bound,) = k._binder.bindings.values()
    cases = {
        "cuLaunchKernelEx stub": lambda: bound.cu_launch(bound.cfg, bound.handle, bound.address, 0),
        "k(x=, z=, n=) torch-like": lambda: k(x=x, z=z, n=n),
        "k(x, z, n) torch-like": lambda: k(x, z, n),
        "k(x=, z=, n=) cuda array interface": lambda: k(x=xc, z=zc, n=n),
        "k(x=, z=, n=) DLPack": lambda: k(x=xd, z=zd, n=n),
        "site()": site,
        "site(x=, z=)": lambda: site(x=x, z=z),
    }
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:  # real tensor attribute costs: a CPU tensor put on the fast path by hand
        torch.set_num_threads(1)  # idle intra-op workers spinning on a small machine would slow every case
        tx, tz = torch.zeros(n), torch.zeros(n)
        binding_module._TORCH_TYPES.add(type(tx))
        key = tuple(v for t in (tx, tz) for v in (t.dtype, t.device, t.shape, t.stride(), not t.data_ptr() & 15))
        k._binder.bindings[key] = bound
        cases["k(x=, z=, n=) torch CPU tensors"] = lambda: k(x=tx, z=tz, n=n)
        cases["torch.add (CPU, 1024)"] = lambda: torch.add(tx, tz, out=tx)
    results = {"launch_us": per_call_us(cases, args.calls, args.rounds, lambda: None, min), "statistic": "min",
               "torch": getattr(torch, "__version__", None)}
    results["gemm"] = gemm_cpu_subprocess(args)
    return results


def gemm_cpu_subprocess(args) -> dict:
    """``gemm_cpu`` in a process of its own (the stand-in torch must be the only torch it imports)."""
    import subprocess

    run = subprocess.run([sys.executable, __file__, "--cpu-gemm", "--calls", str(args.calls), "--rounds",
                          str(args.rounds)], capture_output=True, text=True)
    if run.returncode:
        return {"skipped": f"the CPU gemm run failed: {run.stderr.strip().splitlines()[-1:]}"}
    return json.loads(run.stdout.strip().splitlines()[-1])


def gemm_cpu(args) -> dict:
    """The host path of ``matmul``/``linear`` per call on the CPU: the ops called the natural way with stand-in CUDA
    tensors (benchmarks/torch_standin.py: metadata only; its ``empty`` is a Python object, not torch's allocator)
    and a stub driver, after a first call per signature (which compiles the configuration's kernel, or reads it
    from the disk cache). What is timed is everything the ops do in Python before the driver would launch."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch_standin

    torch = torch_standin.install()
    torch_standin.stub_driver()
    from ptxgen import kernels

    out = {}
    for m, n_, kk in CPU_GEMMS:
        a = torch.empty((m, kk), dtype=torch.bfloat16)
        b = torch.empty((kk, n_), dtype=torch.bfloat16)
        w = torch.empty((n_, kk), dtype=torch.bfloat16)
        bias = torch.empty((n_,), dtype=torch.bfloat16)
        x3 = torch.empty((1, m, kk), dtype=torch.bfloat16)
        cases = {"matmul(a, b)": lambda: kernels.matmul(a, b), "matmul(a, w.T)": lambda: kernels.matmul(a, w.t()),
                 "linear(x, w)": lambda: kernels.linear(a, w),
                 "linear(x3, w, bias)": lambda: kernels.linear(x3, w, bias)}
        out[f"{m}x{n_}x{kk}"] = per_call_us(cases, args.calls, args.rounds, lambda: None, min)
    out.update(fp8_cpu(args, torch, kernels))
    return out


def fp8_cpu(args, torch, kernels) -> dict:
    """The host path per call of the block-scaled fp8 ops on stand-in tensors (DeepGEMM's conventions: A's scales
    M-major and TMA-aligned, B's row-major): ``fp8_gemm_nt`` unswapped (a straddling N = 2112) and swapped (M = 64),
    and the contiguous and masked grouped GEMMs (4 groups)."""
    e4m3, f32, i32 = torch.float8_e4m3fn, torch.float32, torch.int32

    def operands(m, n, k):
        kb, nb, ma = -(-k // 128), -(-n // 128), -(-m // 4) * 4
        return (torch.empty((m, k), dtype=e4m3), torch.empty_strided((m, kb), (1, ma), dtype=f32),
                torch.empty((n, k), dtype=e4m3), torch.empty((nb, kb), dtype=f32))

    out = {}
    for m, n_, kk in CPU_FP8_GEMMS:
        x = operands(m, n_, kk)
        out[f"fp8 {m}x{n_}x{kk}"] = per_call_us({"fp8_gemm_nt": lambda: kernels.fp8_gemm_nt(*x)}, args.calls,
                                                args.rounds, lambda: None, min)
    g, m_max, n_, kk = 4, 256, 4096, 7168
    kb = kk // 128
    b, sb = torch.empty((g, n_, kk), dtype=e4m3), torch.empty((g, n_ // 128, kb), dtype=f32)
    a, sa = torch.empty((g * m_max, kk), dtype=e4m3), torch.empty_strided((g * m_max, kb), (1, g * m_max), dtype=f32)
    indices = torch.empty((g * m_max,), dtype=i32)
    a3 = torch.empty((g, m_max, kk), dtype=e4m3)
    sa3 = torch.empty_strided((g, m_max, kb), (m_max * kb, 1, m_max), dtype=f32)
    counts = torch.empty((g,), dtype=i32)
    cases = {"contiguous": lambda: kernels.m_grouped_fp8_gemm_nt_contiguous(a, sa, b, sb, None, indices),
             "masked": lambda: kernels.m_grouped_fp8_gemm_nt_masked(a3, sa3, b, sb, None, counts, m_max)}
    out[f"fp8 grouped {g}x{m_max}x{n_}x{kk}"] = per_call_us(cases, args.calls, args.rounds, lambda: None, min)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", help="the binding path with a stub driver (no GPU needed)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--cpu-gemm", action="store_true", help=argparse.SUPPRESS)  # gemm_cpu_subprocess's child
    args = ap.parse_args(argv)
    if args.cpu_gemm:
        print(json.dumps(gemm_cpu(args)))
        return None
    results = cpu(args) if args.cpu else gpu(args)
    results["mode"] = "cpu" if args.cpu else "gpu"
    if "device" in results:
        print(f"device: {results['device']}   torch: {results['torch']}")
    print(f"host µs per call ({results.get('statistic', 'median')} of rounds, cases interleaved):")
    for name, us in results["launch_us"].items():
        print(f"  {name:<36} {us:8.2f}")
    for name, r in results.get("ratios", {}).items():
        print(f"  {name:<36} {r:8.2f}")
    for shape, entry in (results.get("gemm") or {}).items() if results["mode"] == "cpu" else ():
        if shape == "skipped":
            print(f"gemm: skipped ({entry})")
            continue
        print(f"gemm {shape} (stand-in tensors, stub driver): "
              + ", ".join(f"{name} {us:.2f}" for name, us in entry.items()))
    for shape, entry in (results.get("gemm") or {}).items() if results["mode"] == "gpu" else ():
        if shape == "skipped":
            print(f"gemm: skipped ({entry})")
            continue
        if "error" in entry:
            print(f"gemm {shape}: {entry['error']}")
            continue
        host = ", ".join(f"{n} {v:.2f}" for n, v in entry["host_us"].items())
        ratios = ", ".join(f"{n} {v:.2f}" for n, v in entry["ratios"].items())
        print(f"gemm {shape}: host µs {host}; {ratios}; device µs "
              + ", ".join(f"{n} {v:.2f}" for n, v in entry["device_us"].items()))
    out_path = pathlib.Path(args.json or os.path.join(os.environ.get("OUT", "."), "bench_launch.json"))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2))
    print(f"wrote {out_path}")
    wrong = [shape for shape, entry in (results.get("gemm") or {}).items()
             if isinstance(entry, dict) and "wrong" in entry.get("error", "")]
    if wrong:
        raise SystemExit(f"wrong results for {', '.join(wrong)}")
    return results


if __name__ == "__main__":
    main()
