"""A cold first compile does no one-time work it does not need: printing a kernel (the JitKernel's IR hash, computed
on every first compile) writes the plain CuTe values of its attributes — int tuples, Layouts of int shape and stride
— without parsing them back, so a GEMM's first compile neither imports lark nor builds the CuTe grammar; the
printer's verdict on those values is the one the parse-back check gives."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from hypothesis import given, strategies as st

import layoutc as lc
from layoutc.notation import to_str
from ptxgen.ir.text import _cute_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parsed_back(v) -> str | None:
    """The printer's rule by definition: ``to_str(v)`` when CuTe's parser reads it back as ``v``, else None."""
    try:
        text = to_str(v)
        back = lc.parse(text)
    except Exception:
        return None
    return text if type(back) is type(v) and back == v else None


ints = st.one_of(st.integers(-300, 300), st.integers(-2**70, 2**70), st.booleans())
int_trees = st.recursive(ints, lambda inner: st.lists(inner, min_size=0, max_size=4).map(tuple), max_leaves=12)


@given(int_trees)
def test_plain_tuples_print_as_the_parse_back_check_says(value):
    assert _cute_text(value) == parsed_back(value)


@st.composite
def layouts(draw):
    shape = draw(st.recursive(st.integers(1, 9), lambda inner: st.lists(inner, min_size=1, max_size=3).map(tuple),
                              max_leaves=6))

    def strides(s):
        if isinstance(s, tuple):
            return tuple(strides(e) for e in s)
        return draw(st.integers(-2**66, 2**66) if draw(st.booleans()) else st.integers(-64, 64))
    return lc.Layout(shape, strides(shape))


@given(layouts())
def test_plain_layouts_print_as_the_parse_back_check_says(layout):
    assert _cute_text(layout) == parsed_back(layout)


def test_deep_and_odd_values_still_take_the_parse_back_check():
    deep = 1
    for _ in range(12):
        deep = (deep, 2)
    for value in (deep, (), ((), 1), (True, 2), (1.5, 2), ("a", 1), (lc._, 2), (2**5000, 1)):
        assert _cute_text(value) == parsed_back(value)


def test_first_gemm_compile_builds_no_cute_grammar():
    """A fresh process (disk cache off) builds, verifies, hashes and lowers a GEMM config's kernel to PTX without
    importing lark: nothing on that path reads CuTe text."""
    script = textwrap.dedent("""
        import sys
        from ptxgen.kernels.gemm import choose_config, run
        from ptxgen.lower import Specialization, TensorSpec
        config = choose_config(16, 6144, 4096)
        spec = Specialization.of(c=TensorSpec(0, True, 16), work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
        compiled = run.jit_kernel(config).compile(spec)
        assert "wgmma.mma_async" in compiled.ptx
        print(sorted(m for m in sys.modules if m == "lark" or m.startswith("lark.")))
    """)
    env = {**os.environ, "PYTHONPATH": ROOT, "PTXGEN_CACHE": "0"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[]"
