"""frag.mask_past (values past a per-row column limit, col > limit + slope·row, replaced by a fill value): the
interpreter against numpy over several TV layouts (the wgmma accumulator, a thread-and-value split, a swizzled map, a
map that does not split), the lowering's closed-form row counts (runs of columns), the verifier's messages, and on
the GPU against the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import accumulator_tv
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.text import parse_module, print_module
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.lower.context import _column_runs
from ptxgen.runtime.sass import disassemble, instruction_counts, nvdisasm_path
from ptxgen.verify import VerifyError, verify

KERNEL = """
kernel @mask(%x: gtensor<f32, 2>, %limit: i32) {grid = (1, 1, 1), block = (BLOCK, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %v = gmem.tile %x, %z, %z {shape = [(M,N)]} : gview<f32>[(M,N)]
  %f = gmem.load %v, %t {tv = [TVX]} : frag<f32>[S]
  %fill = arith.const {value = -7.5} : f32
  %g = frag.mask_past %f, %t, %limit, %fill {tv = [TVX], tile = [(M,N)], slope = SLOPE} : frag<f32>[S]
  gmem.store %v, %t, %g {tv = [TVX]}
}
"""

ACCUMULATOR = lc.to_str(accumulator_tv(128))      # ((4,8,4),(2,2,16)):((128,1,16),(64,8,512)) over (64, 128)
LAYOUTS = [
    (ACCUMULATOR, 64, 128, 128),                                 # rows of pairs every 8 columns: bit masks
    (lc.to_str(accumulator_tv(256)), 64, 256, 128),              # 64 values a row: two mask words
    ("((4,8),(2,8)):((16,1),(8,64))", 8, 64, 32),                # one column per row and value: runs of 1
    ("Sw<3,3,6> o 0 o (((8,4),8),(8,2)):(((512,1),8),(64,4))", 64, 64, 256),   # swizzled: split by the thread
    ("Sw<2,0,5> o 0 o ((4,8),(4,4)):((128,1),(32,8))", 32, 16, 32),              # no split: coordinates decoded
    ("(32,(3,2)):(3,(1,96))", 96, 2, 32),                        # columns 0 1 per row: runs of 2
]


def kernel_text(tv: str, m: int, n: int, block: int, slope: int) -> str:
    layout = lc.parse(tv)
    shape = lc.to_str(lc.shape(layout.inner if isinstance(layout, lc.ComposedLayout) else layout)[1])
    return (KERNEL.replace("TVX", tv).replace("(M,N)", f"({m},{n})").replace("BLOCK", str(block))
            .replace("[S]", f"[{shape}]").replace("SLOPE", str(slope)))


def expected(x, limit, slope):
    rows, cols = np.indices(x.shape)
    return np.where(cols > limit + slope * rows, np.float32(-7.5), x)


@pytest.mark.parametrize("tv, m, n, block", LAYOUTS)
@pytest.mark.parametrize("slope", [0, 1, -1, 2])
def test_interpreter_matches_numpy(tv, m, n, block, slope):
    module = parse_module(kernel_text(tv, m, n, block, slope), file="mask.tile")
    verify(module)
    rng = np.random.default_rng(m * n + slope)
    for limit in (-3, 0, 5, n // 2 + 1, n + 40):
        x = rng.standard_normal((m, n)).astype(np.float32)
        want = expected(x, limit, slope)
        interpret(module, {"x": x, "limit": limit})
        assert np.array_equal(x, want), (tv, slope, limit)


def test_column_runs():
    """The closed-form count needs runs of w columns every s (a power of two ≥ w); others are compared per value."""
    assert _column_runs(list(range(0, 128, 8)) + list(range(1, 128, 8))) is None    # unsorted is not a run
    assert _column_runs(sorted(list(range(0, 128, 8)) + list(range(1, 128, 8)))) == (2, 8)
    assert _column_runs([5]) == (1, 1)
    assert _column_runs([0, 1, 2, 3]) == (1, 1)
    assert _column_runs([0, 2, 4]) == (1, 2)
    assert _column_runs([0, 3, 6]) is None
    assert _column_runs([0, 1, 5]) is None


def _compile(text):
    module = parse_module(text, file="mask.tile")
    spec = Specialization.of(x=TensorSpec(1, True, 16))
    return compile_kernel(module.kernels[0], spec)


@pytest.mark.parametrize("tv, m, n, block", LAYOUTS)
def test_every_layout_lowers_and_assembles(tv, m, n, block):
    compiled = _compile(kernel_text(tv, m, n, block, 1))
    assert compiled.spill_bytes in (0, None)


@pytest.mark.skipif(nvdisasm_path() is None, reason="the nvidia-cuda-nvdisasm wheel is not installed")
def test_attention_masks_become_bit_tests():
    """In the causal attention kernel (its S accumulator's rows masked on the diagonal and at the key bound) ptxas
    moves the row masks' bits into predicates with R2P, 7 a time, and the kernel compares far fewer values than it
    masks: 2 masks × 64 values a thread would be 128 ISETP."""
    from ptxgen.kernels.attention import choose_config
    from ptxgen.kernels.attention.build import build

    sass = disassemble(compile_kernel(build(choose_config("bf16", 64, True, seqlens=(1024, 1024)))).cubin)
    counts = instruction_counts(sass, ["R2P", "ISETP"])
    assert counts["R2P"] >= 16
    assert counts["ISETP"] < 128


def test_text_round_trip():
    module = parse_module(kernel_text(ACCUMULATOR, 64, 128, 128, 1), file="mask.tile")
    assert print_module(parse_module(print_module(module))) == print_module(module)


@pytest.mark.parametrize("old, new, message", [
    ("%fill = arith.const {value = -7.5} : f32", "%fill = arith.const {value = 7} : i32",
     "mask.tile:8:3: frag.mask_past: the fill operand must be a scalar of the fragment's element type f32, not i32"),
    ("tile = [(64,128)]", "tile = [8192]",
     "mask.tile:8:3: frag.mask_past: tile 8192 must have two modes (rows, columns)"),
    ("slope = 1}", "slope = 1.5}",
     "mask.tile:8:3: frag.mask_past: attribute 'slope' must be an integer, not 1.5"),
    ("frag.mask_past %f, %t, %limit,", "frag.mask_past %f, %t, %fill,",
     "mask.tile:8:3: frag.mask_past: the limit operand must be i32, not f32"),
    ("tile = [(64,128)], slope", "tile = [(64,64)], slope",
     "mask.tile:8:3: frag.mask_past: tv ((4,8,4),(2,2,16)):((128,1,16),(64,8,512)) reaches index 8191 outside the "
     "tile of 4096 elements"),
])
def test_verifier_messages(old, new, message):
    text = kernel_text(ACCUMULATOR, 64, 128, 128, 1)
    assert old in text
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text.replace(old, new), file="mask.tile"))
    assert message in str(e.value).splitlines()


@pytest.mark.gpu
@pytest.mark.parametrize("tv, m, n, block", LAYOUTS)
@pytest.mark.parametrize("slope", [0, 1, -1])
def test_gpu_matches_the_interpreter(tv, m, n, block, slope):
    import torch

    from ptxgen.runtime import jit

    kernel = jit(parse_module(kernel_text(tv, m, n, block, slope), file="mask.tile"))
    for limit in (-9, -1, 0, 3, 7, 8, n // 2 + 1, n - 1, n + 40):
        x = torch.randn((m, n), device="cuda", dtype=torch.float32)
        host = x.cpu().numpy().copy()
        kernel(x=x, limit=limit)
        torch.cuda.synchronize()
        assert np.array_equal(x.cpu().numpy(), expected(host, limit, slope)), (tv, slope, limit)


def test_a_limit_that_leaves_i32_fails_in_the_interpreter():
    """The lowering computes limit + slope·row − col in i32; a limit near 2^31 would wrap there, so the interpreter
    refuses it, naming the thread."""
    module = parse_module(kernel_text(ACCUMULATOR, 64, 128, 128, 1), file="mask.tile")
    with pytest.raises(InterpreterError) as e:
        interpret(module, {"x": np.zeros((64, 128), np.float32), "limit": 2 ** 31 - 100})
    assert "thread 0's limit 2147483548 with slope 1 over the (64, 128) tile leaves i32" in str(e.value)
