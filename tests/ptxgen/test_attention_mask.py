"""Attention's score mask from the general ops (what ``mask.fill`` was): a fragment's values set to −inf by their tile
coordinates (col ≥ bound or col − row > diag) with ``frag.coords`` + ``frag.cmp`` + ``frag.select`` over the wgmma
accumulator's TV layout — the interpreter against numpy over many (diag, bound), the lowering to PTX, and on a GPU
(``-m gpu``) the compiled kernel against the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module

TV = "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"   # the wgmma accumulator of a 64 x 16 tile
TEXT = f"""
kernel @masked(%x: gtensor<f32, 2>, %diag: i32, %bound: i32) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %v = gmem.tile %x, %c0, %c0 {{shape = [(64,16)]}} : gview<f32>[(64,16)]
  %f = gmem.load %v, %t {{tv = [{TV}]}} : frag<f32>[8]
  %rows, %cols = frag.coords %t {{tv = [{TV}], tile = [(64,16)]}} : frag<i32>[8], frag<i32>[8]
  %past = frag.cmp %cols, %bound {{pred = ge}} : frag<i1>[8]
  %offdiag = frag.sub %cols, %rows : frag<i32>[8]
  %above = frag.cmp %offdiag, %diag {{pred = gt}} : frag<i1>[8]
  %ninf = arith.const {{value = -inf}} : f32
  %kept = frag.select %past, %ninf, %f : frag<f32>[8]
  %g = frag.select %above, %ninf, %kept : frag<f32>[8]
  gmem.store %v, %t, %g {{tv = [{TV}]}}
}}
"""


def module(text=TEXT):
    return parse_module(text, file="mask.tile")


def expected(x, diag, bound):
    rows, cols = np.indices(x.shape)
    return np.where((cols >= bound) | (cols - rows > diag), -np.inf, x)


@pytest.mark.parametrize("diag, bound", [(0, 16), (-1, 16), (5, 10), (-70, 100), (100, 0), (100, 16), (1 << 30, 7),
                                         (-3, -2), (63, 16)])
def test_interpreter_masks_by_row_and_column(diag, bound):
    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    want = expected(x, diag, bound)
    interpret(module(), {"x": x, "diag": diag, "bound": bound})
    np.testing.assert_array_equal(x, want)


def test_lowers_to_ptx():
    from ptxgen.lower import compile_kernel

    ptx = compile_kernel(module()).ptx
    assert "0fFF800000" in ptx          # -inf, the fill
    assert "selp.f32" in ptx or "setp" in ptx
    assert "__local_depot" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("diag, bound", [(0, 16), (5, 10), (-70, 100), (-3, -2)])
def test_gpu_matches_the_interpreter(diag, bound):
    from ptxgen.runtime import gpu_available, jit_text

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    x = np.random.default_rng(diag + 100).standard_normal((64, 16)).astype(np.float32)
    want = expected(x, diag, bound)
    jit_text(TEXT)(x=x, diag=diag, bound=bound)
    np.testing.assert_array_equal(x, want)
