"""smem.offset (CuTe's domain_offset on a shared-memory view): the verifier's messages, the interpreter's meaning (the
view's element x is the parent's element at L(x) + L(c), per thread) against numpy, its run-time range check, the text
form's round trip, and the lowering (per-thread base, assembled to a cubin by nvJitLink)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.builder import KernelBuilder, frag, gtensor, i32, smem
from ptxgen.ir.ops.smem import view_alignment
from ptxgen.ir.text import parse_module, print_module
from ptxgen.lower import Specialization, compile_kernel
from ptxgen.verify import VerifyError, verify

HEADER = ("kernel @k(%x: gtensor<f32, 1>) {grid = (1, 1, 1), block = (32, 1, 1)} {\n"
          "  %c0 = arith.const {value = 0} : i32\n"
          "  %c9 = arith.const {value = 9} : i32\n"
          "  %s = smem.alloc : smem<f32>[(8,5):(6,1)]\n")


def errors(body: str) -> list:
    with pytest.raises(VerifyError) as e:
        verify(parse_module(HEADER + body + "}\n", file="m.tile"))
    return str(e.value).splitlines()


@pytest.mark.parametrize("body, message", [
    ("  %o = smem.offset %s, %c0 : smem<f32>[(8,5):(6,1)]\n",
     "m.tile:5:3: smem.offset: a view of layout (8,5):(6,1) has 2 modes, so smem.offset takes 2 coordinates (one i32 "
     "per mode), not 1"),
    ("  %o = smem.offset %s, %c0, %c9 : smem<f32>[(8,5):(6,1)]\n",
     "m.tile:5:3: smem.offset: coordinate 1 = 9 is outside mode 1's 5 entries"),
    ("  %o = smem.offset %s, %c0, %c0 : smem<f32>[(8,5):(5,1)]\n",
     "m.tile:5:3: smem.offset: result type must be the view's own smem<f32>[(8,5):(6,1)], not smem<f32>[(8,5):(5,1)]"),
    ("  %o = smem.offset %x, %c0 : smem<f32>[(8,5):(6,1)]\n",
     "m.tile:5:3: smem.offset: the first operand must be a smem view, not gtensor<f32, 1>"),
    ("  %f = arith.const {value = 1.0} : f32\n  %o = smem.offset %s, %c0, %f : smem<f32>[(8,5):(6,1)]\n",
     "m.tile:6:3: smem.offset: coordinate 1 must be i32, not f32"),
])
def test_verifier_messages(body, message):
    assert errors(body) == [message]


def moved_rows_kernel(shift_mod: int = 3):
    """20 threads: the (8, 5) f32 tile of x (rows padded to 6 in shared memory), then thread t reads element
    (t % 4, t // 4) of the view moved by (t % shift_mod, 0) rows and writes it to y's (4, 5) tile at (t % 4, t // 4)."""
    kb = KernelBuilder("k", grid=(1, 1, 1), block=(20, 1, 1), x=gtensor("f32", 2), y=gtensor("f32", 2))
    b = kb.b
    tile = b.smem.alloc(type=smem("f32", lc.Layout((8, 5), (6, 1))), name="tile")
    t = b.gpu.thread_id(dim="x", name="t")
    zero = b.const(0, i32, name="zero")
    fill = lc.Layout((20, 2), (1, 20))              # thread t, value v → element t + 20v of the (8, 5) tile
    b.smem.store(tile, t, b.gmem.load(b.gmem.tile(kb["x"], zero, zero, shape=(8, 5)), t, tv=fill,
                                      type=frag("f32", 2)), tv=fill)
    b.barrier.cta()
    shift = b.arith.rem(t, b.const(shift_mod, i32), name="shift")
    moved = b.smem.offset(tile, shift, zero, name="moved")
    one = lc.Layout(((4, 5), 1), ((1, 8), 0))       # thread t → (row t % 4, column t // 4) of the (8, 5) view
    ys = b.smem.load(moved, t, tv=one, type=frag("f32", 1), name="ys")
    b.gmem.store(b.gmem.tile(kb["y"], zero, zero, shape=(4, 5)), t, ys, tv=lc.Layout(((4, 5), 1), ((1, 4), 0)))
    return kb.module()


def test_interpreter_is_the_parent_at_x_plus_c():
    """Each thread reads element (r + s_t, c) of the parent through element (r, c) of the moved view (a linear
    layout: L(x) + L(c) = L(x + c)), s_t = t % 3 differing between threads; the text form prints it back."""
    module = moved_rows_kernel()
    verify(module)
    text = print_module(module)
    assert "%moved = smem.offset %tile, %shift, %zero : smem<f32>[(8,5):(6,1)]" in text
    assert print_module(parse_module(text)) == text
    x = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    y = np.zeros((4, 5), np.float32)
    interpret(module, {"x": x, "y": y})
    want = np.array([[x[r + (r + 4 * c) % 3, c] for c in range(5)] for r in range(4)], np.float32)
    assert np.array_equal(y, want)


def test_a_coordinate_outside_its_mode_fails_at_run_time():
    """t % 9 reaches 8, one past mode 0's 8 rows: the interpreter names the coordinate, its value and thread."""
    with pytest.raises(InterpreterError, match=r"smem\.offset: coordinate 0 \(%shift = 8, thread 8\) is outside "
                                               r"mode 0's 8 entries of %tile"):
        interpret(moved_rows_kernel(9), {"x": np.zeros((8, 5), np.float32), "y": np.zeros((4, 5), np.float32)})


def test_lowering_moves_the_base_per_thread():
    """The moved view's base is the allocation's plus 4·6·shift bytes (mode 0's stride in bytes; mode 1's is 4): its
    known alignment drops to 4 bytes, the loads stay 4-byte scalars, and nvJitLink assembles the PTX."""
    module = moved_rows_kernel()
    kernel = module.kernels[0]
    moved = next(op.results[0] for op in kernel.body.ops if op.name == "smem.offset")
    assert view_alignment(moved) == 4
    compiled = compile_kernel(kernel, Specialization.generic())
    assert re.findall(r"(?:ld|st)\.shared\S*", compiled.ptx) == ["st.shared.b32", "st.shared.b32", "ld.shared.b32"]
    assert compiled.cubin is not None and compiled.spill_bytes == 0
