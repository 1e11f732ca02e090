"""``{unchecked = true}`` on gmem.load/gmem.store: the program promises every element inside the tensor, the
lowering compares no bound (plain vector accesses, no branch), the interpreter fails where the promise is broken;
the stream-K workspace of the GEMM uses it."""
import re

import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.builder import KernelBuilder, frag, gtensor, i32
from ptxgen.ir.text import parse_module, print_module
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import VerifyError

TV = lc.Layout(((8, 4), 4), ((16, 1), 4))   # thread t: row t//8 of a (4, 32) tile, 4 consecutive columns 4·(t%8)…


def _copy(unchecked, row=0):
    kb = KernelBuilder("copy", grid=(1, 1, 1), block=(32, 1, 1), x=gtensor("f32", 2), y=gtensor("f32", 2))
    b = kb.b
    t = b.gpu.thread_id(dim="x", name="t")
    zero = b.const(0, i32, name="zero")
    r = b.const(row, i32, name="row")
    xs = b.gmem.load(b.gmem.tile(kb["x"], r, zero, shape=(4, 32)), t, tv=TV, type=frag("f32", 4),
                     unchecked=unchecked, name="xs")
    b.gmem.store(b.gmem.tile(kb["y"], r, zero, shape=(4, 32)), t, xs, tv=TV, unchecked=unchecked)
    return kb.module("test")


def test_unchecked_copy_matches():
    x = np.random.default_rng().standard_normal((8, 32)).astype(np.float32)
    y = np.zeros_like(x)
    interpret(_copy(True, row=4), {"x": x, "y": y})
    assert np.array_equal(y[4:], x[4:]) and not y[:4].any()


@pytest.mark.parametrize("op", ["load", "store"])
def test_broken_promise_fails_in_the_interpreter(op):
    """A tile that reaches past the tensor: the load (or, reading a taller x, the store) names the first element
    outside."""
    x = np.zeros((6 if op == "load" else 8, 32), np.float32)
    y = np.zeros((8 if op == "load" else 6, 32), np.float32)
    with pytest.raises(InterpreterError, match=re.escape(
            f"gmem.{op}: {{unchecked = true}}: thread 16, value 0 is at (6, 0), outside the tensor's (6, 32)")):
        interpret(_copy(True, row=4), {"x": x, "y": y})


def test_unchecked_lowers_without_bounds():
    """Aligned rows: one ld.global.v4 and one st.global.v4, no compare, no branch, no predicated store; the checked
    copy has its bounds' compares and branches."""
    spec = Specialization.of(x=TensorSpec(1, True, 16), y=TensorSpec(1, True, 16))
    plain = compile_kernel(_copy(True).kernels[0], spec).ptx
    checked = compile_kernel(_copy(False).kernels[0], spec).ptx
    body = plain.split("{", 1)[1]
    assert body.count("ld.global.v4") == 1 and body.count("st.global.v4") == 1
    assert "setp" not in body and "bra" not in body and "@%p" not in body
    assert "setp" in checked.split("{", 1)[1]


def test_unchecked_must_be_bool():
    kb = KernelBuilder("copy", grid=(1, 1, 1), block=(32, 1, 1), x=gtensor("f32", 2))
    b = kb.b
    t = b.gpu.thread_id(dim="x", name="t")
    zero = b.const(0, i32, name="zero")
    b.gmem.load(b.gmem.tile(kb["x"], zero, zero, shape=(4, 32)), t, tv=TV, type=frag("f32", 4), unchecked=1,
                name="xs")
    with pytest.raises(VerifyError, match=r"^<builder>:0:0: gmem.load: attribute 'unchecked' must be true or "
                                          r"false, not 1$"):
        interpret(kb.module("test"), {"x": np.zeros((4, 32), np.float32)})


def test_unchecked_prints_and_parses_back():
    text = print_module(_copy(True))
    assert "unchecked = true" in text
    assert print_module(parse_module(text)) == text


def test_streamk_workspace_is_unchecked():
    """The stream-K GEMM stores and loads its partial sums unchecked (``streamk_buffers`` sizes the workspace for
    every block): checked, its fixup was 32 branch diamonds that LLVM's LSR and ptxas spent most of its compile on."""
    from ptxgen.kernels.gemm.config import GemmConfig
    from ptxgen.kernels.gemm.run import kernel_module
    module = kernel_module(GemmConfig.from_name("h128x256s4c2t2sk", "bf16").validate())
    text = print_module(module)
    assert len(re.findall(r"gmem\.(load|store) [^\n]*unchecked = true", text)) == 2
