"""frag.slice: a run of a fragment's values, in the interpreter, through the lowering, and on the GPU."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel

# Thread t holds x[4t … 4t+3] (tv (32,4):(4,1)); values 2 and 3 are elements 4t+2 and 4t+3, i.e. the TV layout
# (32,2):(4,1) over the tile that starts 2 elements later. The slice writes exactly those, doubled.
SLICE = """\
kernel @slice_half(%x: gtensor<f32, 1>, %z: gtensor<f32, 1>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c2 = arith.const {value = 2} : i32
  %two = arith.const {value = 2.0} : f32
  %xv = gmem.tile %x, %c0 {shape = [128]} : gview<f32>[128]
  %f = gmem.load %xv, %t {tv = [(32,4):(4,1)]} : frag<f32>[4]
  %h = frag.slice %f {offset = 2} : frag<f32>[2]
  %d = frag.mul %h, %two : frag<f32>[2]
  %zv = gmem.tile %z, %c2 {shape = [126]} : gview<f32>[126]
  gmem.store %zv, %t, %d {tv = [(32,2):(4,1)]}
}
"""


def expected(x):
    z = np.full(128, -1.0, np.float32)
    idx = np.array([4 * t + 2 + j for t in range(32) for j in range(2)])
    z[idx] = 2 * x[idx]
    return z


def test_slice_in_the_interpreter():
    x = np.random.default_rng().standard_normal(128).astype(np.float32)
    z = np.full(128, -1.0, np.float32)
    interpret(parse_module(SLICE), {"x": x, "z": z})
    np.testing.assert_array_equal(z, expected(x))


def test_slice_lowers_to_the_operand_registers():
    ptx = compile_kernel(parse_module(SLICE).kernels[0]).ptx
    # only the two sliced values are doubled (LLVM writes 2x as x + x) and, the others being dead, only they load
    assert sum(ptx.count(f"{op}.rn.f32") for op in ("add", "mul")) == 2
    assert ptx.count("ld.global") == 2 and ptx.count("st.global") == 2


@pytest.mark.gpu
def test_slice_on_the_gpu():
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    x = np.random.default_rng().standard_normal(128).astype(np.float32)
    z = np.full(128, -1.0, np.float32)
    jit(parse_module(SLICE))(x=x, z=z)
    np.testing.assert_array_equal(z, expected(x))
