"""gmem.signal / gmem.wait: flags in global memory that order one CTA's global writes before another CTA's reads
(release / acquire at gpu scope): interpreter meaning, hang report, verifier rules, PTX, and a chain of CTAs on the
GPU."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.interp import HangError, InterpreterError, interpret
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

# CTA b waits for CTA b-1's flags (thread by thread), reads what it wrote, adds 1 and passes it on: data[32b + t]
# ends at b + 1. ``%step`` = -1 turns the chain around (CTA b waits for CTA b+1).
CHAIN = """kernel @chain(%flags: gtensor<i32, 1>, %data: gtensor<f32, 1>, %step: i32) {grid = (8, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %blk = gpu.block_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %c7 = arith.const {value = 7} : i32
  %c32 = arith.const {value = 32} : i32
  %one = arith.const {value = 1.0} : f32
  %zero = arith.const {value = 0.0} : f32
  %base = arith.mul %blk, %c32 : i32
  %mine = arith.add %base, %t : i32
  %from = arith.sub %blk, %step : i32
  %pos = arith.cmp %step, %c0 {pred = gt} : i1
  %first = arith.select %pos, %c0, %c7 : i32
  %waits = arith.cmp %blk, %first {pred = ne} : i1
  %from_base = arith.mul %from, %c32 : i32
  %theirs = arith.add %from_base, %t : i32
  %got = scf.if %waits : frag<f32>[1] {
    gmem.wait %flags, %theirs, %c1
    %pv = gmem.tile %data, %from_base {shape = [32]} : gview<f32>[32]
    %x = gmem.load %pv, %t {tv = [(32,1):(1,0)]} : frag<f32>[1]
    scf.yield %x
  } {
    %z = frag.splat %zero : frag<f32>[1]
    scf.yield %z
  }
  %next = frag.add %got, %one : frag<f32>[1]
  %mv = gmem.tile %data, %base {shape = [32]} : gview<f32>[32]
  gmem.store %mv, %t, %next {tv = [(32,1):(1,0)]}
  gmem.signal %flags, %mine, %c1
}
"""


def chain():
    return parse_module(CHAIN, file="chain.tile")


def test_a_chain_of_ctas_passes_data_through_flags():
    flags = np.zeros(256, np.int32)
    data = np.full(256, np.nan, np.float32)
    interpret(chain(), {"flags": flags, "data": data, "step": 1})
    assert np.array_equal(data, np.repeat(np.arange(1, 9, dtype=np.float32), 32))
    assert np.array_equal(flags, np.ones(256, np.int32))


def test_waiting_for_a_later_cta_is_reported_as_a_hang():
    """The interpreter runs CTAs (clusters) in grid order: a flag only a later CTA signals never comes."""
    flags = np.zeros(256, np.int32)
    with pytest.raises(HangError) as e:
        interpret(chain(), {"flags": flags, "data": np.zeros(256, np.float32), "step": -1})
    message = str(e.value)
    assert "chain.tile:" in message and "gmem.wait" in message
    assert "wait for flag 32 to reach 1, but it holds 0 and no thread still running adds to it" in message


def test_a_flag_index_outside_the_tensor_fails():
    with pytest.raises(InterpreterError, match="thread 0: flag index 224 is outside the 224 flags"):
        interpret(chain(), {"flags": np.zeros(224, np.int32), "data": np.zeros(256, np.float32), "step": 1})


def test_verifier_rules():
    text = """kernel @k(%f: gtensor<f32, 1>, %g: gtensor<i32, 2>, %i: i32, %x: f32) {grid = (1, 1, 1), block = (32, 1, 1)} {
  gmem.signal %f, %i, %i
  gmem.wait %g, %x, %i
  gmem.signal %g, %i, %x
}
"""
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, file="bad.tile"))
    message = str(e.value)
    assert "bad.tile:2:3: gmem.signal: the flags must be a gtensor<i32, 1>, not gtensor<f32, 1>" in message
    assert "bad.tile:3:3: gmem.wait: the flags must be a gtensor<i32, 1>, not gtensor<i32, 2>" in message
    assert "bad.tile:3:3: gmem.wait: the index must be i32, not f32" in message
    assert "bad.tile:4:3: gmem.signal: the amount must be i32, not f32" in message


def test_ptx_releases_and_acquires_at_gpu_scope():
    """signal: one ``red.release.gpu`` add; wait: a loop around ``ld.acquire.gpu`` (the loads of the data it guards
    come after the loop)."""
    ptx = compile_kernel(chain()).ptx
    lines = [" ".join(line.split()) for line in ptx.splitlines()]
    red = [i for i, line in enumerate(lines) if line.startswith("red.release.gpu.global.add.s32")]
    acquire = [i for i, line in enumerate(lines) if line.startswith("ld.acquire.gpu.global.b32")]
    assert len(red) == 1 and len(acquire) == 1
    loop_label = next(lines[i].rstrip(":") for i in range(acquire[0], -1, -1) if lines[i].endswith(":"))
    assert any(line.startswith("@") and line.endswith(f"bra {loop_label};") for line in lines[acquire[0]:acquire[0] + 6])
    data_load = next(i for i, line in enumerate(lines) if line.startswith("ld.global"))
    assert data_load > acquire[0]


@pytest.mark.gpu
def test_gpu_chain_of_ctas():
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    kern = jit(chain())
    for _launch in range(3):
        flags = torch.zeros(256, device="cuda", dtype=torch.int32)
        data = torch.full((256,), float("nan"), device="cuda")
        kern(flags=flags, data=data, step=1)
        torch.cuda.synchronize()
        assert torch.equal(data.cpu(), torch.arange(1, 9, dtype=torch.float32).repeat_interleave(32))
