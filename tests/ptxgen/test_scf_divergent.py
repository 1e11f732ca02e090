"""scf.for with bounds that differ between threads: each thread runs its own iterations (SIMT), in the interpreter
and on the GPU — what lets two consumer warpgroups promote fp8 chunks at different k-tiles."""
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module

# warp w counts 2w + 1 iterations starting at -w (a negative start, as gemm_hopper's staggered chunks), summing i
DIVERGENT = """\
kernel @divergent(%z: gtensor<f32, 1>) {grid = (1, 1, 1), block = (64, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %w = gpu.warp_id : i32
  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %c2 = arith.const {value = 2} : i32
  %lo = arith.sub %c0, %w : i32
  %w2 = arith.mul %w, %c2 : i32
  %span = arith.add %w2, %c1 : i32
  %hi = arith.add %lo, %span : i32
  %f0 = arith.const {value = 0.0} : f32
  %init = frag.splat %f0 : frag<f32>[1]
  %sum = scf.for %lo, %hi, %c1, %init : frag<f32>[1] (%i: i32, %acc: frag<f32>[1]) {
    %fi = arith.cast %i : f32
    %one = arith.const {value = 1000.0} : f32
    %term = arith.add %fi, %one : f32
    %next = frag.add %acc, %term : frag<f32>[1]
    scf.yield %next
  }
  %zv = gmem.tile %z, %c0 {shape = [64]} : gview<f32>[64]
  gmem.store %zv, %t, %sum {tv = [(64,1):(1,0)]}
}
"""


def expected():
    # warp 0: i = 0 → 1000; warp 1: i = -1, 0, 1 → 3000
    return np.array([1000.0] * 32 + [3000.0] * 32, np.float32)


def test_divergent_bounds_in_the_interpreter():
    z = np.zeros(64, np.float32)
    interpret(parse_module(DIVERGENT), {"z": z})
    np.testing.assert_array_equal(z, expected())


@pytest.mark.gpu
def test_divergent_bounds_on_the_gpu():
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    z = np.zeros(64, np.float32)
    jit(parse_module(DIVERGENT))(z=z)
    np.testing.assert_array_equal(z, expected())
