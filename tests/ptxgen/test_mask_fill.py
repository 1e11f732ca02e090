"""mask.fill: a fragment's values set by their tile coordinates (col ≥ bound or col − row > diag), through the TV
layout — the interpreter against numpy over many (diag, bound), the verifier's messages, the text round trip, the
lowering to PTX, and on a GPU (``-m gpu``) the compiled kernel against the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module, print_module
from ptxgen.verify import VerifyError, verify

TV = "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"   # the wgmma accumulator of a 64 x 16 tile
TEXT = f"""
kernel @masked(%x: gtensor<f32, 2>, %diag: i32, %bound: i32) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %v = gmem.tile %x, %c0, %c0 {{shape = [(64,16)]}} : gview<f32>[(64,16)]
  %f = gmem.load %v, %t {{tv = [{TV}]}} : frag<f32>[8]
  %g = mask.fill %f, %t, %diag, %bound {{tv = [{TV}], tile = [(64,16)], value = -inf}} : frag<f32>[8]
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


def test_text_round_trips():
    text = print_module(module())
    assert "mask.fill %f, %t, %diag, %bound {tv = [((4,8,4),(2,2,2)):((128,1,16),(64,8,512))], tile = [(64,16)], " \
           "value = -inf} : frag<f32>[8]" in text
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("old, new, message", [
    ("%diag: i32", "%diag: f32", "mask.tile:7:3: mask.fill: the diag operand must be i32, not f32"),
    ("%bound: i32", "%bound: i64", "mask.tile:7:3: mask.fill: the bound operand must be i32, not i64"),
    ("value = -inf", "value = 1e39", r"mask.tile:7:3: mask.fill: value 1e\+39 does not fit f32: it rounds to inf"),
    ("tile = [(64,16)]", "tile = [(64,4,4)]", r"mask.tile:7:3: mask.fill: tile \(64,4,4\) must have rank 2 "
                                              r"\(rows, columns\)"),
    ("tile = [(64,16)]", "tile = [(64,8)]", r"mask.tile:7:3: mask.fill: tv \(\(4,8,4\),\(2,2,2\)\):\(\(128,1,16\),"
                                            r"\(64,8,512\)\) reaches index 1023 outside the tile of 512 elements"),
    (", value = -inf}", "}", "mask.tile:7:3: mask.fill: missing attribute 'value'"),
    ("value = -inf}", "value = -inf, fill = 0}", r"mask.tile:7:3: mask.fill: unknown attribute 'fill' \(mask.fill "
                                                 r"takes tv, tile, value\)"),
    ("mask.fill %f, %t, %diag, %bound", "mask.fill %t, %t, %diag, %bound", "mask.tile:7:3: mask.fill: the masked "
                                                                           "operand must be a frag, not i32"),
])
def test_verifier_messages(old, new, message):
    bad = TEXT.replace(old, new)
    assert bad != TEXT
    with pytest.raises(VerifyError, match=message):
        verify(module(bad))


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
