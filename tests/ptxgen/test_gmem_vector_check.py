"""``{vector_check = true}`` on gmem.load/gmem.store: 16-byte vectors on tensors whose row pitch the specialization
cannot prove aligned, each taken only where its address is aligned at run time (element accesses otherwise)."""
import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module, print_module
from ptxgen.ir.builder import KernelBuilder, frag, gtensor, i32
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import VerifyError

TV = lc.Layout(((8, 4), 4), ((16, 1), 4))   # thread t: row t//8 of a (4, 32) tile, 4 consecutive columns 4·(t%8)…


def _copy(vector_check):
    kb = KernelBuilder("copy", grid=(1, 1, 1), block=(32, 1, 1), x=gtensor("f32", 2), y=gtensor("f32", 2))
    b = kb.b
    t = b.gpu.thread_id(dim="x", name="t")
    zero = b.const(0, i32, name="zero")
    xs = b.gmem.load(b.gmem.tile(kb["x"], zero, zero, shape=(4, 32)), t, tv=TV, type=frag("f32", 4),
                     vector_check=vector_check, name="xs")
    b.gmem.store(b.gmem.tile(kb["y"], zero, zero, shape=(4, 32)), t, xs, tv=TV, vector_check=vector_check)
    return kb.module("test")


def test_vector_check_unaligned_rows_keeps_semantics():
    x = np.random.default_rng(0).standard_normal((4, 31)).astype(np.float32)   # 124-byte rows
    y = np.zeros_like(x)
    interpret(_copy(True), {"x": x, "y": y})
    assert np.array_equal(y, x)


@pytest.mark.parametrize("checked, width", [(True, "v4"), (False, None)])
def test_vector_check_emits_checked_vectors(checked, width):
    spec = Specialization.of(x=TensorSpec(1, False, 1), y=TensorSpec(1, False, 1))   # pitch not 16-byte aligned
    ptx = compile_kernel(_copy(checked).kernels[0], spec).ptx
    vector_stores = [line for line in ptx.splitlines() if "st.global.v4" in line]
    vector_loads = [line for line in ptx.splitlines() if "ld.global.v4" in line]
    if width:
        assert vector_stores and vector_loads
        assert "and.b64" in ptx        # the run-time alignment test of each vector's address
    else:
        assert not vector_stores and not vector_loads


def test_vector_check_must_be_bool():
    kb = KernelBuilder("copy", grid=(1, 1, 1), block=(32, 1, 1), x=gtensor("f32", 2))
    b = kb.b
    t = b.gpu.thread_id(dim="x", name="t")
    zero = b.const(0, i32, name="zero")
    b.gmem.load(b.gmem.tile(kb["x"], zero, zero, shape=(4, 32)), t, tv=TV, type=frag("f32", 4),
                vector_check=2, name="xs")
    with pytest.raises(VerifyError, match=r"^<builder>:0:0: gmem.load: attribute 'vector_check' must be true or "
                                          r"false, not 2$"):
        interpret(kb.module("test"), {"x": np.zeros((4, 32), np.float32)})


def test_vector_check_prints_and_parses_back():
    text = print_module(_copy(True))
    assert "vector_check = true}" in text and print_module(parse_module(text)) == text
