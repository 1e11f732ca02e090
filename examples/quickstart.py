"""Quickstart: layout → descriptor → kernel → cubin → run (on the GPU when there is one, else in the CPU interpreter).

    python examples/quickstart.py [M N K]

1. layoutc builds the K-major SW128 GMMA shared-memory layout of one pipeline stage and derives the wgmma
   descriptor that reads it (and checks that the descriptor addresses exactly what the layout says);
2. ptxgen parses examples/gemm.tile (a warp-specialized TMA + mbarrier + wgmma GEMM whose smem tensors carry that
   layout), verifies it, lowers it to PTX with llvmlite and assembles a cubin with nvJitLink (no CUDA toolkit needed);
3. it runs C = A·Bᵀ on fresh random bf16 inputs — on the GPU through the CUDA driver when one is present, otherwise
   in the numpy interpreter (which reads the operands through the same descriptors) — and checks the result against
   a float64 reference;
4. the library: ``ptxgen.kernels.matmul(a, w.T)`` picks the persistent GEMM's configuration for the shape
   (``choose_config``) and runs it, on torch tensors on the GPU or numpy arrays in the interpreter, checked alike.
Exit status 0 means every step held.
"""
from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

import layoutc as lc
from layoutc.hopper import DescriptorIterator, byte_address, core_matrix_addresses, gmma_smem_layout

HERE = pathlib.Path(__file__).resolve().parent


def step(title):
    print(f"\n== {title}")


def main(argv) -> int:
    m, n, k = (int(x) for x in argv[:3]) if len(argv) >= 3 else (200, 136, 192)

    step("1. layout and descriptor (layoutc)")
    stage = gmma_smem_layout("K", "SW128", "bf16", (128, 64))
    print("A/B stage layout:", lc.to_str(stage))
    it = DescriptorIterator(stage, "bf16", "K", 0x400, mn=64)
    desc = it.descriptor(k=1)
    print("wgmma descriptor of k-step 1 at base 0x400:", desc, f"= {desc.encode():#018x}")
    # the descriptor alone addresses exactly the elements the layout places (row i, k column 16 + j)
    addresses = core_matrix_addresses(desc, "bf16", "K", 64)
    assert all(addresses[i][j] == byte_address(stage, "bf16", (i, 16 + j), 0x400) for i in range(64) for j in range(16))
    print("descriptor addressing == layout addressing on the 64 x 16 tile: ok")

    step("2. kernel → verified IR → PTX → cubin (ptxgen)")
    from ptxgen.ir.text import parse_module
    from ptxgen.lower import compile_kernel
    from ptxgen.verify import verify

    t0 = time.perf_counter()
    module = parse_module((HERE / "gemm.tile").read_text(), file="examples/gemm.tile")
    verify(module)
    t1 = time.perf_counter()
    compiled = compile_kernel(module)
    t2 = time.perf_counter()
    wgmma = sum("wgmma.mma_async" in line for line in compiled.ptx.splitlines())
    print(f"parse + verify {1e3 * (t1 - t0):.0f} ms, lower + PTX + cubin {1e3 * (t2 - t1):.0f} ms; "
          f"{wgmma} wgmma.mma_async in the PTX, {compiled.registers} registers, cubin {len(compiled.cubin)} bytes")

    step(f"3. run C = A·Bᵀ for M, N, K = {m}, {n}, {k}")
    from ptxgen.runtime import gpu_available

    rng = np.random.default_rng()
    want = None
    if gpu_available():
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None and torch.cuda.is_available():
            from ptxgen.runtime import jit

            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            jit(module)(a=a, b=b, c=c, m=m, n=n, k=k)
            torch.cuda.synchronize()
            want = a.double().cpu().numpy() @ b.double().cpu().numpy().T
            got = c.double().cpu().numpy()
            where = "GPU (" + torch.cuda.get_device_name() + ")"
    if want is None:
        import ml_dtypes

        from ptxgen.interp import interpret

        # host data of a bf16 parameter is ml_dtypes.bfloat16, for the interpreter as for the GPU launcher
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
        c = np.full((m, n), np.nan, dtype=ml_dtypes.bfloat16)
        interpret(module, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k})
        want = a.astype(np.float64) @ b.astype(np.float64).T
        got = c.astype(np.float64)
        where = "CPU interpreter (no GPU found)"
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"ran on the {where}: relative error vs float64 = {err:.2e} (bf16 output)")
    if not err < 1e-2:
        print("FAILED: the result does not match the reference")
        return 1

    step(f"4. the library: ptxgen.kernels.matmul(a, w.T), M, N, K = {m}, {n}, {k}")
    from ptxgen.kernels import choose_config, matmul

    print("configuration for this shape:", choose_config(m, n, k, "bf16").name)
    if where.startswith("GPU"):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        got = matmul(a, w.T).double().cpu().numpy()
        want = a.double().cpu().numpy() @ w.double().cpu().numpy().T
    else:
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        w = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
        got = matmul(a, w.T, sm_count=2).astype(np.float64)   # the interpreter: a persistent grid of 2 CTAs
        want = a.astype(np.float64) @ w.astype(np.float64).T
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"matmul on the {where}: relative error vs float64 = {err:.2e}")
    if not err < 1e-2:
        print("FAILED: the result does not match the reference")
        return 1
    print("\nall steps ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
