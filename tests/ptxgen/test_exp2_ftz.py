"""``frag.exp2 {ftz = true}`` (spec/tile-ir.md §4.5): subnormal results flush to zero, lowered to one
``ex2.approx.ftz.f32`` per value (ptxas guards the plain ``ex2.approx.f32`` with a compare and two predicated
multiplies per value: the attention kernel's softmax loses 3 of its instructions per score with ftz)."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify


def kernel(attrs: str) -> str:
    return f"""kernel @k(%x: gtensor<f32, 1>, %y: gtensor<f32, 1>) {{grid = (1, 1, 1), block = (32, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %xv = gmem.tile %x, %c0 {{shape = [64]}} : gview<f32>[64]
  %yv = gmem.tile %y, %c0 {{shape = [64]}} : gview<f32>[64]
  %a = gmem.load %xv, %t {{tv = [(32,2):(2,1)]}} : frag<f32>[2]
  %e = frag.exp2 %a{attrs} : frag<f32>[2]
  gmem.store %yv, %t, %e {{tv = [(32,2):(2,1)]}}
}}
"""


def run(attrs: str, x):
    y = np.zeros(64, np.float32)
    interpret(parse_module(kernel(attrs), file="e.tile"), {"x": x, "y": y})
    return y


def test_ftz_flushes_subnormal_results_only():
    x = np.linspace(-140, 10, 64).astype(np.float32)
    plain, flushed = run("", x), run(" {ftz = true}", x)
    want = np.exp2(x.astype(np.float64)).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    assert np.array_equal(plain, want)
    assert np.array_equal(flushed, np.where(want < tiny, 0, want).astype(np.float32))
    assert (plain[want < tiny] > 0).any() and (flushed[want < tiny] == 0).all()


def test_ftz_must_be_a_bool():
    with pytest.raises(VerifyError, match=r"e\.tile:7:3: frag\.exp2: attribute 'ftz' must be true or false, not 1"):
        verify(parse_module(kernel(" {ftz = 1}"), file="e.tile"))
    with pytest.raises(VerifyError, match="unknown attribute 'flush'"):
        verify(parse_module(kernel(" {flush = true}"), file="e.tile"))


def test_ftz_lowers_to_ex2_approx_ftz():
    ftz = compile_kernel(parse_module(kernel(" {ftz = true}"), file="e.tile")).ptx
    plain = compile_kernel(parse_module(kernel(""), file="e.tile")).ptx
    assert ftz.count("ex2.approx.ftz.f32") == 2 and "ex2.approx.f32" not in ftz
    assert plain.count("ex2.approx.f32") == 2 and "ftz" not in plain
