"""frag.extract: a fragment's value as a scalar — text round trip, verifier errors at the op, the interpreter, and
the lowering (no code: the value is the register)."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module, print_module
from ptxgen.verify import VerifyError, verify

KERNEL = """\
kernel @k(%x: gtensor<i32, 1>, %y: gtensor<i32, 1>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %w = gmem.tile %x, %c0 {shape = [(4)]} : gview<i32>[(4)]
  %f = gmem.load %w, %t {tv = [(32,4):(0,1)]} : frag<i32>[4]
  %s = frag.extract %f {index = 2} : i32
  %o = gmem.tile %y, %s {shape = [(32)]} : gview<i32>[(32)]
  %g = frag.splat %t : frag<i32>[1]
  gmem.store %o, %t, %g {tv = [(32,1):(1,0)]}
}
"""


def test_round_trip_and_meaning():
    """Value 2 of the loaded fragment (x[2]) becomes the store's origin: y[x[2] + t] = t."""
    module = parse_module(KERNEL)
    assert print_module(module) == KERNEL
    x = np.array([9, 9, 3, 9], np.int32)
    y = np.full(40, -1, np.int32)
    interpret(module, {"x": x, "y": y})
    assert np.array_equal(y[3:35], np.arange(32)) and np.all(y[:3] == -1) and np.all(y[35:] == -1)


@pytest.mark.parametrize("old, new, message", [
    ("{index = 2} : i32", "{index = 4} : i32", "k.tile:6:3: frag.extract: index 4 is outside the fragment's 4 values (0 … 3)"),
    ("{index = 2} : i32", "{index = 2} : f32",
     "k.tile:6:3: frag.extract: result type must be the fragment's element type i32, not f32"),
    ("frag.extract %f {index = 2}", "frag.extract %c0 {index = 2}", "k.tile:6:3: frag.extract: the operand must be a "
                                                                    "frag, not i32"),
])
def test_errors_at_the_op(old, new, message):
    with pytest.raises(VerifyError) as info:
        verify(parse_module(KERNEL.replace(old, new), file="k.tile"))
    assert str(info.value).splitlines()[0] == message


def test_lowers_to_the_register():
    from ptxgen.lower import Specialization, compile_kernel

    compiled = compile_kernel(parse_module(KERNEL).kernels[0], Specialization.of())
    assert "ld.global" in compiled.ptx
