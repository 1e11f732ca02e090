"""tma.prefetch (an L2 hint through a tensor map) and tma.prefetch_map (the descriptor itself): an L2 hint through a tensor map. In the interpreter it changes no memory (in-bounds and
out-of-bounds boxes alike) but needs an encodable map; it lowers to cp.async.bulk.prefetch.tensor with the
coordinates innermost first; on a GPU (``-m gpu``) a kernel that prefetches (also far out of bounds) and then copies
the tensor runs and copies it exactly."""
from __future__ import annotations

import re

import numpy as np
import pytest

from ptxgen.interp import InterpreterError, interpret, run_cta
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel

BOX = "Sw<3,4,3> o 0 o (64,32):(32,1)"
KERNEL = f"""
kernel @pf(%x: tmap<f32, 2>[{BOX}], %g: gtensor<f32, 2>, %y: gtensor<f32, 2>) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %row = arith.const {{value = 7}} : i32
  %far = arith.const {{value = 1000000}} : i32
  %neg = arith.const {{value = -64}} : i32
  %leader = arith.cmp %t, %c0 {{pred = eq}} : i1
  scf.if %leader {{
    tma.prefetch %x, %row, %c0
    tma.prefetch %x, %neg, %far
    tma.prefetch_map %x
    scf.yield
  }}
  %gv = gmem.tile %g, %c0, %c0 {{shape = [(64,32)]}} : gview<f32>[(64,32)]
  %yv = gmem.tile %y, %c0, %c0 {{shape = [(64,32)]}} : gview<f32>[(64,32)]
  %f = gmem.load %gv, %t {{tv = [(128,16):(1,128)]}} : frag<f32>[16]
  gmem.store %yv, %t, %f {{tv = [(128,16):(1,128)]}}
}}
"""


def module():
    return parse_module(KERNEL, file="tests/ptxgen/test_tma_prefetch.py")


def test_interpreter_prefetch_changes_nothing():
    x = np.random.default_rng().standard_normal((100, 40)).astype(np.float32)
    before = x.copy()
    y = np.zeros_like(x)
    cta = run_cta(module(), {"x": x, "g": x, "y": y})
    assert not cta.smem.any()          # no shared memory touched (the kernel allocates none)
    assert not cta.inflight            # nothing asynchronous issued
    assert np.array_equal(x, before)
    assert np.array_equal(y[:64, :32], x[:64, :32])


def test_interpreter_refuses_a_map_that_cannot_exist():
    x = np.zeros((0, 32), dtype=np.float32)
    with pytest.raises(InterpreterError, match="prefetches through the map of x, an empty"):
        interpret(module(), {"x": x, "g": np.zeros((64, 32), np.float32), "y": np.zeros((64, 32), np.float32)})


def test_ptx_has_the_prefetch():
    ptx = compile_kernel(module()).ptx
    found = re.findall(r"cp\.async\.bulk\.prefetch\.tensor\.2d\.L2\.global\.tile \[%rd\d+, \{([^}]*)\}\];", ptx)
    assert len(found) == 2
    # innermost (column) first: (row 7, column 0) is {0, 7}, (row -64, column 1000000) is {1000000, -64}
    consts = dict(re.findall(r"mov\.b32\s+(%r\d+), (-?\d+);", ptx))
    assert [[int(consts[r.strip()]) for r in regs.split(",")] for regs in found] == [[0, 7], [1000000, -64]]
    assert "__local_depot" not in ptx   # the map is used in place (grid constant), never copied
    assert len(re.findall(r"prefetch\.tensormap \[%rd\d+\];", ptx)) == 1


def test_prefetch_map_needs_a_map():
    from ptxgen.verify import VerifyError, verify

    bad = KERNEL.replace("tma.prefetch_map %x", "tma.prefetch_map %row")
    with pytest.raises(VerifyError, match=r"tma.prefetch_map: the operand must be a TMA map tmap<T, R>\[box\], not i32"):
        verify(parse_module(bad, file="t"))


@pytest.mark.gpu
def test_gpu_prefetch_smoke():
    from ptxgen.runtime import jit

    x = np.random.default_rng().standard_normal((100, 40)).astype(np.float32)
    y = np.full_like(x, -7.0)
    jit(module())(x=x, g=x, y=y)
    assert np.array_equal(y[:64, :32], x[:64, :32])
    assert (y[64:] == -7.0).all() and (y[:, 32:] == -7.0).all()
