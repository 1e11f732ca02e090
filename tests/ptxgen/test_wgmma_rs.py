"""wgmma.mma_rs (A in registers): the fragment's TV layout, the interpreter against a float64 product, the compiled
PTX (the RS form, A packed into four .b32 registers) and SASS (HGMMA), and on a GPU (``-m gpu``) the same kernel
against float64 on fresh random inputs.

The test kernel is one warpgroup: A (64·P × K) is loaded from global memory straight into the RS fragment with
``gmem.load`` through ``rs_a_tv``; B (N × K) is loaded into registers and ``smem.store``d into a GMMA-atom smem
layout (K-major SW128/SW64 or MN-major SW128); C is loaded through the stacked accumulator layout; D = A·Bᵀ + C is
stored back through it.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import a_fragment_tv, accumulator_tv, gmma_smem_layout
from layoutc.int_tuple import idx2crd
from ptxgen.interp import interpret
from ptxgen.ir.ops.wgmma import rs_a_tv, rs_block_values
from ptxgen.ir.text import parse_module
from ptxgen.ir.types import BF16, F16
from ptxgen.lower import compile_kernel
from ptxgen.runtime.sass import disassemble, instruction_counts, nvdisasm_path

TYPES = {"bf16": BF16, "f16": F16}
HOST = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}  # the host dtypes (interpreter and launcher)


def stacked_accumulator_tv(n: int, m: int) -> lc.Layout:
    """The accumulator of an m × n tile as a TV layout over it (value v + (N/2)·p of m-block p), by algebra: the
    64 × n ``accumulator_tv`` embedded into the m × n tile, plus an outer value mode stepping 64 rows."""
    block = lc.composition(lc.Layout((64, n), (1, m)), accumulator_tv(n))
    return lc.make_layout(block[0], lc.make_layout(block[1], lc.Layout(m // 64, 64)))


def rs_kernel(dtype="bf16", blocks=1, n=64, k=64, major="K", swizzle="SW128"):
    m = 64 * blocks
    b_layout = lc.to_str(gmma_smem_layout(major, swizzle, dtype, (n, k)))
    a_tv = lc.to_str(rs_a_tv(TYPES[dtype], m, k))
    b_tv = f"(128,{n * k // 128}):(1,128)"
    c_tv = lc.to_str(stacked_accumulator_tv(n, m))
    fa, fb, fc = m * k // 128, n * k // 128, n // 2 * blocks
    text = f"""
kernel @rs(%a: gtensor<{dtype}, 2>, %b: gtensor<{dtype}, 2>, %c: gtensor<f32, 2>, %d: gtensor<f32, 2>) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %sb = smem.alloc {{align = 1024}} : smem<{dtype}>[{b_layout}]
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %ga = gmem.tile %a, %c0, %c0 {{shape = [({m},{k})]}} : gview<{dtype}>[({m},{k})]
  %gb = gmem.tile %b, %c0, %c0 {{shape = [({n},{k})]}} : gview<{dtype}>[({n},{k})]
  %gc = gmem.tile %c, %c0, %c0 {{shape = [({m},{n})]}} : gview<f32>[({m},{n})]
  %gd = gmem.tile %d, %c0, %c0 {{shape = [({m},{n})]}} : gview<f32>[({m},{n})]
  %fa = gmem.load %ga, %t {{tv = [{a_tv}]}} : frag<{dtype}>[{fa}]
  %fb = gmem.load %gb, %t {{tv = [{b_tv}]}} : frag<{dtype}>[{fb}]
  smem.store %sb, %t, %fb {{tv = [{b_tv}]}}
  fence.proxy_async
  barrier.cta
  %acc = gmem.load %gc, %t {{tv = [{c_tv}]}} : frag<f32>[{fc}]
  wgmma.fence
  %r = wgmma.mma_rs %fa, %sb, %acc : frag<f32>[{fc}]
  wgmma.commit
  wgmma.wait {{pending = 0}}
  gmem.store %gd, %t, %r {{tv = [{c_tv}]}}
}}
"""
    return parse_module(text, file="tests/ptxgen/test_wgmma_rs.py")


def operands(dtype, blocks, n, k, rng=None):
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((64 * blocks, k)).astype(HOST[dtype])
    b = rng.standard_normal((n, k)).astype(HOST[dtype])
    c = rng.standard_normal((64 * blocks, n)).astype(np.float32)
    return a, b, c


def reference(a, b, c):
    return a.astype(np.float64) @ b.astype(np.float64).T + c


CASES = [("bf16", 1, 64, 64, "K", "SW128"), ("bf16", 2, 128, 64, "K", "SW128"), ("f16", 1, 32, 32, "K", "SW64"),
         ("bf16", 1, 64, 64, "MN", "SW128"), ("f16", 3, 8, 64, "K", "SW128")]
IDS = ["bf16-m64n64k64", "bf16-m128n128k64", "f16-m64n32k32-sw64", "bf16-mn-major-b", "f16-m192n8k64"]


# -- the fragment ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, m, k", [("bf16", 64, 16), ("bf16", 128, 64), ("f16", 192, 32)])
def test_rs_a_tv_is_a_fragment_tv_per_block(dtype, m, k):
    """Value v + V·(j + S·p) of thread t is element a_fragment_tv(t, v) of block (p, j): a bijection onto the tile."""
    t = TYPES[dtype]
    tv = rs_a_tv(t, m, k)
    per, steps = rs_block_values(t), k // 16
    block = a_fragment_tv(dtype)
    seen = set()
    for thread in range(128):
        for p in range(m // 64):
            for j in range(steps):
                for v in range(per):
                    row, col = idx2crd(tv(thread, v + per * (j + steps * p)), (m, k))
                    r0, c0 = idx2crd(block(thread, v), (64, 16))
                    assert (row, col) == (64 * p + r0, 16 * j + c0)
                    seen.add((row, col))
    assert len(seen) == m * k


# -- the interpreter ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, blocks, n, k, major, swizzle", CASES, ids=IDS)
def test_interpreter_matches_float64(dtype, blocks, n, k, major, swizzle):
    a, b, c = operands(dtype, blocks, n, k)
    d = np.full_like(c, -7.0)
    interpret(rs_kernel(dtype, blocks, n, k, major, swizzle), {"a": a, "b": b, "c": c, "d": d})
    np.testing.assert_allclose(d, reference(a, b, c), rtol=1e-5, atol=1e-5)


def test_rs_equals_the_ss_form_on_the_same_operands():
    """The RS and SS forms share the B path: with A also stored to smem, the SS wgmma gives the same D bit for bit."""
    a, b, c = operands("bf16", 1, 64, 64)
    d_rs = np.zeros_like(c)
    interpret(rs_kernel(), {"a": a, "b": b, "c": c, "d": d_rs})
    a_layout = lc.to_str(gmma_smem_layout("K", "SW128", "bf16", (64, 64)))
    d_ss = np.zeros_like(c)
    interpret(parse_module(rs_kernel_text_ss(a_layout), file="ss.tile"), {"a": a, "b": b, "c": c, "d": d_ss})
    assert "wgmma.mma %sa" in rs_kernel_text_ss(a_layout)
    assert np.array_equal(d_rs, d_ss)


def rs_kernel_text_ss(a_layout):
    """The SS twin of ``rs_kernel()``: A goes through registers into a K-major SW128 smem tile."""
    from ptxgen.ir.text import print_module

    text = print_module(rs_kernel())
    a_tv = "(128,32):(1,128)"
    text = text.replace("  %t = gpu.thread_id", f"  %sa = smem.alloc {{align = 1024}} : smem<bf16>[{a_layout}]\n"
                                                 "  %t = gpu.thread_id", 1)
    text = re.sub(r"%fa = gmem.load %ga, %t \{tv = \[[^\]]*\]\}", f"%fa = gmem.load %ga, %t {{tv = [{a_tv}]}}", text)
    text = text.replace("  smem.store %sb", f"  smem.store %sa, %t, %fa {{tv = [{a_tv}]}}\n  smem.store %sb", 1)
    return text.replace("wgmma.mma_rs %fa, %sb", "wgmma.mma %sa, %sb")


def test_b_in_flight_until_wait():
    """Like the SS form, the RS wgmma holds B's smem bytes until wgmma.wait: an smem.store into them is a race."""
    from ptxgen.interp import RaceError
    from ptxgen.ir.text import print_module

    text = print_module(rs_kernel())
    text = text.replace("  wgmma.commit\n", "  wgmma.commit\n  smem.store %sb, %t, %fb {tv = [(128,32):(1,128)]}\n")
    a, b, c = operands("bf16", 1, 64, 64)
    with pytest.raises(RaceError, match="wgmma.mma_rs issued at .* may still be reading"):
        interpret(parse_module(text, file="race.tile"), {"a": a, "b": b, "c": c, "d": np.zeros_like(c)})


# -- compiled --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compiled():
    return compile_kernel(rs_kernel("bf16", 2, 128, 64))


def test_ptx_has_the_rs_form(compiled):
    # 2 m-blocks × 4 k16 steps; A is a braced vector of four 32-bit registers, B a 64-bit descriptor register, and
    # only imm-trans-b follows the scales
    rs = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16 \{[^}]*\}, "
                    r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %(?:scale_d|acc), 1, 1, 0;", compiled.ptx)
    assert len(rs) == 8
    assert "__local_depot" not in compiled.ptx
    assert compiled.spill_bytes in (0, None)


def test_f16_and_mn_major_b_compile():
    ptx = compile_kernel(rs_kernel("f16", 1, 32, 32, "K", "SW64")).ptx
    assert len(re.findall(r"m64n32k16\.f32\.f16\.f16 \{[^}]*\}, \{[^}]*\}, %rd\d+, %(?:scale_d|acc), 1, 1, 0;", ptx)) == 2
    ptx = compile_kernel(rs_kernel("bf16", 1, 64, 64, "MN", "SW128")).ptx
    assert len(re.findall(r"m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{[^}]*\}, %rd\d+, %(?:scale_d|acc), 1, 1, 1;", ptx)) == 4


@pytest.mark.skipif(nvdisasm_path() is None, reason="the nvidia-cuda-nvdisasm wheel is not installed")
def test_sass_has_hgmma(compiled):
    counts = instruction_counts(disassemble(compiled.cubin), ["HGMMA.64x128x16.F32.BF16", "LDL", "STL"])
    assert counts["HGMMA.64x128x16.F32.BF16"] == 8
    assert counts["LDL"] == counts["STL"] == 0


# -- on the GPU ------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype, blocks, n, k, major, swizzle", CASES, ids=IDS)
def test_gpu_matches_float64(dtype, blocks, n, k, major, swizzle):
    from ptxgen.runtime import jit

    a, b, c = operands(dtype, blocks, n, k)
    d = np.full_like(c, -7.0)
    jit(rs_kernel(dtype, blocks, n, k, major, swizzle))(a=a, b=b, c=c, d=d)
    want = reference(a, b, c)
    # the tensor core sums K products in f32 (order unspecified): a few f32 ulps of the sum of |products|
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64).T + np.abs(c)
    assert np.all(np.abs(d - want) <= 1e-5 * scale + 1e-6), np.max(np.abs(d - want) / scale)
