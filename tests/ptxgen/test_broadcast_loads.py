"""Vectorized broadcast loads: a gmem.load of a view with stride-0 modes (``TensorSpec.broadcast``: a bias row
expanded over a tile's rows) reads each distinct address once per thread, as vectors — the GEMM epilogue's bias
is one bf16x2 load per column pair, not one per column pair and row."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.runtime.binding import spec_key

# thread t: columns 4·(t%8) … +3 of rows t//8 + 4k (k = 0..3) of an (16, 32) f32 tile: 4 16-byte vectors per thread
ADD_ROW = """
kernel @add_row(%x: gtensor<f32, 2>, %bias: gtensor<f32, 2>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %vx = gmem.tile %x, %z, %z {shape = [(16,32)]} : gview<f32>[(16,32)]
  %vb = gmem.tile %bias, %z, %z {shape = [(16,32)]} : gview<f32>[(16,32)]
  %f = gmem.load %vx, %t {tv = [((8,4),(4,4)):((64,1),(16,4))]} : frag<f32>[(4,4)]
  %b = gmem.load %vb, %t {tv = [((8,4),(4,4)):((64,1),(16,4))], other = 100.0} : frag<f32>[(4,4)]
  %g = frag.add %f, %b : frag<f32>[(4,4)]
  gmem.store %vx, %t, %g {tv = [((8,4),(4,4)):((64,1),(16,4))]}
}
"""


def test_the_specialization_records_stride_0_modes():
    assert TensorSpec.of(0, (64, 1000), (0, 1), 4) == TensorSpec(1, True, 8, (0,))
    assert str(TensorSpec.of(0, (64, 1000), (0, 1), 4)) == "c1a8b0"
    assert TensorSpec.of(0, (64, 1000), (1000, 1), 4) == TensorSpec(1, True, 8)
    assert TensorSpec.of(0, (1, 1000), (0, 1), 4).broadcast == ()          # an extent-1 mode is no broadcast
    assert spec_key(0, (64, 1000), (0, 1), 4) == (1, True, 8, (0,))
    assert TensorSpec(*spec_key(0, (64, 1000), (0, 1), 4)) == TensorSpec.of(0, (64, 1000), (0, 1), 4)


def _global_loads(text, bias_spec):
    module = parse_module(text, file="add_row.tile")
    spec = Specialization.of(x=TensorSpec(1, True, 16), bias=bias_spec)
    return Counter(re.findall(r"ld\.global\S*", compile_kernel(module.kernels[0], spec).ptx))


def test_a_broadcast_view_is_read_once_per_column_vector():
    """The thread's 4 vectors lie on 4 rows of the same 4 columns: one ld.global.v4 where the rows are one row."""
    assert _global_loads(ADD_ROW, TensorSpec(1, True, 16)) == Counter({"ld.global.v4.b32": 8})
    assert _global_loads(ADD_ROW, TensorSpec(1, True, 16, (0,))) == Counter({"ld.global.v4.b32": 5})


@pytest.mark.parametrize("rows", [16, 5])
def test_interpreter_semantics_are_unchanged(rows):
    """Rows of the tile outside the (expanded) bias read ``other``, as for any view."""
    x = np.zeros((16, 32), np.float32)
    row = np.arange(32, dtype=np.float32)
    bias = np.broadcast_to(row, (rows, 32))
    interpret(parse_module(ADD_ROW, file="add_row.tile"), {"x": x, "bias": bias})
    want = np.where(np.arange(16)[:, None] < rows, row[None, :], 100.0)
    assert np.array_equal(x, want)


def test_gemm_bias_loads_once_per_column_pair():
    """The epilogue's bias through the accumulator's TV layout (64 rows × 256 columns per consumer warpgroup: each
    thread holds 2 rows × 32 column pairs): 32 bf16x2 loads with the broadcast specialization, 64 without, and no
    scalar 16-bit load either way."""
    from ptxgen.kernels.gemm import build
    from ptxgen.kernels.gemm.config import GemmConfig

    kernel = build(GemmConfig(bias=True, epilogue="direct")).kernels[0]
    counts = {}
    for broadcast in ((), (0,)):
        spec = Specialization.of(c=TensorSpec(1, True, 16), bias=TensorSpec(1, True, 16, broadcast))
        counts[broadcast] = Counter(re.findall(r"ld\.global\S*", compile_kernel(kernel, spec).ptx))
    # a bf16x2 pair is one 32-bit register (gmem.load's vector phi), so the 4-byte load reads as ld.global.b32
    assert counts[()] == Counter({"ld.global.b32": 64})
    assert counts[(0,)] == Counter({"ld.global.b32": 32})


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [16, 5])
def test_broadcast_load_on_the_gpu(rows):
    import torch

    from ptxgen.runtime import jit

    x = torch.randn((16, 32), device="cuda", dtype=torch.float32)
    row = torch.randn(32, device="cuda", dtype=torch.float32)
    bias = row.unsqueeze(0).expand(rows, 32)
    want = x.clone()
    want[:rows] += row
    want[rows:] += 100.0
    jit(parse_module(ADD_ROW, file="add_row.tile"))(x=x, bias=bias)
    torch.cuda.synchronize()
    assert torch.equal(x, want)
