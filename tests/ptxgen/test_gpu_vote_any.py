"""gpu.vote_any: a warp's vote — text round trip, verifier errors at the op, the interpreter (per warp, whole warps
only) and the lowering (vote.sync.any over the full warp)."""
import numpy as np
import pytest

from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.text import parse_module, print_module
from ptxgen.verify import VerifyError, verify

KERNEL = """\
kernel @k(%x: gtensor<i32, 1>, %y: gtensor<i32, 1>) {grid = (1, 1, 1), block = (96, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %w = gmem.tile %x, %c0 {shape = [(96)]} : gview<i32>[(96)]
  %f = gmem.load %w, %t {tv = [(96,1):(1,0)]} : frag<i32>[1]
  %s = frag.extract %f {index = 0} : i32
  %p = arith.cmp %s, %c0 {pred = ne} : i1
  %any = gpu.vote_any %p : i1
  %r = arith.select %any, %c1, %c0 : i32
  %o = gmem.tile %y, %c0 {shape = [(96)]} : gview<i32>[(96)]
  %g = frag.splat %r : frag<i32>[1]
  gmem.store %o, %t, %g {tv = [(96,1):(1,0)]}
}
"""


def test_round_trip_and_meaning():
    """Warp 0 has no set lane, warp 1 one (lane 7), warp 2 all: every lane of a warp gets its warp's vote."""
    module = parse_module(KERNEL)
    assert print_module(module) == KERNEL
    x = np.zeros(96, np.int32)
    x[32 + 7] = 5
    x[64:] = 1
    y = np.full(96, -1, np.int32)
    interpret(module, {"x": x, "y": y})
    assert np.array_equal(y, np.repeat([0, 1, 1], 32))


@pytest.mark.parametrize("old, new, message", [
    ("gpu.vote_any %p : i1", "gpu.vote_any %s : i1", "k.tile:9:3: gpu.vote_any: the operand must be an i1 predicate, "
                                                      "not i32"),
    ("gpu.vote_any %p : i1", "gpu.vote_any %p : i32", "k.tile:9:3: gpu.vote_any: result type must be i1, not i32"),
])
def test_errors_at_the_op(old, new, message):
    with pytest.raises(VerifyError) as info:
        verify(parse_module(KERNEL.replace(old, new), file="k.tile"))
    assert str(info.value).splitlines()[0] == message


def test_part_of_a_warp_is_refused():
    """vote.sync with the full member mask needs all 32 lanes: a vote inside a branch half a warp takes fails."""
    text = KERNEL.replace("  %any = gpu.vote_any %p : i1\n  %r = arith.select %any, %c1, %c0 : i32\n", """\
  %c16 = arith.const {value = 16} : i32
  %low = arith.cmp %t, %c16 {pred = lt} : i1
  %r = scf.if %low : i32 {
    %any = gpu.vote_any %p : i1
    %v = arith.select %any, %c1, %c0 : i32
    scf.yield %v
  } {
    scf.yield %c0
  }
""")
    with pytest.raises(InterpreterError, match=r"gpu.vote_any: warp 0 runs it with 16 of its 32 lanes: vote.sync "
                                               r"takes the whole warp"):
        interpret(parse_module(text), {"x": np.zeros(96, np.int32), "y": np.zeros(96, np.int32)})


def test_lowers_to_a_full_warp_vote():
    from ptxgen.lower import Specialization, compile_kernel

    compiled = compile_kernel(parse_module(KERNEL).kernels[0], Specialization.of())
    assert "vote.sync.any.pred" in compiled.ptx and "0xffffffff" in compiled.ptx
    assert compiled.registers is not None   # nvJitLink assembled it
