"""smem.stmatrix: the interpreter's result is exactly smem.store's with the same TV layout; the verifier accepts the
TV layouts each warp can issue as stmatrix.m8n8 instructions and names the row that breaks the rule otherwise;
the PTX holds stmatrix with the lanes' swizzled row addresses; on a GPU (``-m gpu``) the stored tile, read back with
smem.load, equals the interpreter's bit for bit.

The test kernel loads a 64 × N tile of 16-bit values from global memory into registers through ``tv`` (the wgmma
accumulator layout: the epilogue's case), stores them with ``smem.stmatrix`` (or ``smem.store``) into a smem view,
and after a CTA barrier reads the view back down its rows with smem.load and stores it to global memory.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import accumulator_tv, stmatrix_tv
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.ops.smem import stmatrix_problem, stmatrix_row_tv
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

# (name, smem layout of the 64 x N tile (row, col), tv, num, trans)
ROW_MAJOR = "Sw<3,4,3> o 0 o (64,64):(64,1)"          # D row-major (N contiguous), SW128: the TMA-store epilogue
COL_MAJOR = "Sw<3,4,3> o 0 o (64,64):(1,64)"          # D column-major (M contiguous): rows of the stored matrix are D's columns
PLAIN = "(64,32):(40,1)"                               # padded rows (80 bytes): no swizzle, rows 16-byte aligned
ACC64, ACC32 = lc.to_str(accumulator_tv(64)), lc.to_str(accumulator_tv(32))
CASES = [
    ("x4-row-major-sw128", ROW_MAJOR, 64, ACC64, 4, False),
    ("x4-trans-col-major-sw128", COL_MAJOR, 64, ACC64, 4, True),
    ("x2-padded", PLAIN, 32, ACC32, 2, False),
    ("x1-padded", PLAIN, 32, ACC32, 1, False),
]


def kernel_text(layout, n, tv, num, trans, dtype="bf16", op="stmatrix", name="st"):
    values = lc.size(lc.parse(tv)[1])
    store = (f"smem.stmatrix %s, %t, %f {{tv = [{tv}], num = {num}, trans = {'true' if trans else 'false'}}}"
             if op == "stmatrix" else f"smem.store %s, %t, %f {{tv = [{tv}]}}")
    back = f"(128,{64 * n // 128}):({64 * n // 128},1)"   # read back: thread t holds consecutive view indices
    return f"""
kernel @{name}(%x: gtensor<{dtype}, 2>, %y: gtensor<{dtype}, 2>) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %s = smem.alloc {{align = 1024}} : smem<{dtype}>[{layout}]
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %gx = gmem.tile %x, %c0, %c0 {{shape = [(64,{n})]}} : gview<{dtype}>[(64,{n})]
  %gy = gmem.tile %y, %c0, %c0 {{shape = [(64,{n})]}} : gview<{dtype}>[(64,{n})]
  %f = gmem.load %gx, %t {{tv = [{tv}]}} : frag<{dtype}>[{values}]
  {store}
  barrier.cta
  %g = smem.load %s, %t {{tv = [{back}]}} : frag<{dtype}>[{64 * n // 128}]
  gmem.store %gy, %t, %g {{tv = [{back}]}}
}}
"""


def module(*args, **kw):
    return parse_module(kernel_text(*args, **kw), file="tests/ptxgen/test_stmatrix.py")


def tile(n, dtype="bf16", rng=None):
    """A fresh random 64 x n tile of the element type's host dtype (the interpreter's and the launcher's)."""
    rng = rng or np.random.default_rng()
    return rng.standard_normal((64, n)).astype({"bf16": ml_dtypes.bfloat16, "f16": np.float16}[dtype])


def smem_bytes(kernel, x):
    """Run one CTA; the shared-memory bytes of the tile after the kernel."""
    from ptxgen.interp import run_cta

    cta = run_cta(kernel, {"x": x, "y": np.zeros_like(x)})
    return cta.smem.copy()


@pytest.mark.parametrize("name, layout, n, tv, num, trans", CASES, ids=[c[0] for c in CASES])
def test_interpreter_result_is_smem_stores(name, layout, n, tv, num, trans):
    x = tile(n)
    got = smem_bytes(module(layout, n, tv, num, trans), x)
    want = smem_bytes(module(layout, n, tv, num, trans, op="store"), x)
    assert np.array_equal(got, want)
    y = np.zeros_like(x)
    interpret(module(layout, n, tv, num, trans), {"x": x, "y": y})
    assert np.array_equal(y, x)


def test_row_tv_is_the_lanes_row_start():
    """stmatrix_row_tv(t, r) is the view index of column 0 of the row lane t % 32 addresses in instruction r."""
    for tv_text, num, trans in ((ACC64, 4, False), (ACC64, 4, True), (ACC32, 2, False), (ACC32, 1, True)):
        tv = lc.parse(tv_text)
        m, rows = stmatrix_row_tv(tv, num, trans)
        st = stmatrix_tv(num, trans)
        for t in range(128):
            lane = t % 32 % (8 * num)
            owner = next((l, v) for l in range(32) for v in range(2 * num) if st(l, v) == lane)
            for r in range(lc.size(tv[1]) // (2 * num)):
                want = tv(32 * (t // 32) + owner[0], owner[1] + 2 * num * r)
                assert tv(m(t, r)) == want
                if rows is not None:
                    assert rows(t, r) == want


def test_stmatrix_problem_names_the_row():
    # one warp, x1: lane l's values (0, 1) at row l/4, columns 2(l%4), 2(l%4)+1 of an 8 x 8 matrix 16 bytes per row
    st = stmatrix_tv(1)
    rows = np.array([[st(l, v) % 8 for v in range(2)] for l in range(32)])
    cols = np.array([[st(l, v) // 8 for v in range(2)] for l in range(32)])
    good = 1024 + 16 * rows + 2 * cols
    assert stmatrix_problem(good, 1, False) is None
    assert "starts at byte 1032, not on a 16-byte boundary" in stmatrix_problem(good + 8, 1, False)
    bad = good.copy()
    bad[5, 1] += 64
    assert "row 1 of matrix 0 is not 16 contiguous bytes" in stmatrix_problem(bad, 1, False)


@pytest.mark.parametrize("layout, n, tv, num, trans, message", [
    (COL_MAJOR, 64, ACC64, 4, False, "warp 0, stmatrix 0: row 0 of matrix 0 is not 16 contiguous bytes"),
    (ROW_MAJOR, 64, ACC64, 4, True, "is no stmatrix.x4.trans tiling"),
    ("(64,32):(36,1)", 32, ACC32, 2, False, "not on a 16-byte boundary"),
    (ROW_MAJOR, 64, ACC64, 3, False, "num must be 1, 2 or 4"),
    (ROW_MAJOR, 64, "(128,32):(32,1)", 4, False, "is no stmatrix.x4 tiling"),
])
def test_verifier_rejects_what_stmatrix_cannot_store(layout, n, tv, num, trans, message):
    with pytest.raises(VerifyError) as info:
        verify(module(layout, n, tv, num, trans))
    assert message in str(info.value).splitlines()[0], str(info.value)


def test_thread_operand_must_be_the_lane():
    text = kernel_text(ROW_MAJOR, 64, ACC64, 4, False).replace(
        "  %f = gmem.load", "  %c1 = arith.const {value = 1} : i32\n  %u = arith.xor %t, %c1 : i32\n  %f = gmem.load")
    text = text.replace("smem.stmatrix %s, %t,", "smem.stmatrix %s, %u,")
    with pytest.raises(InterpreterError, match="the operand modulo 32 must be the lane"):
        interpret(parse_module(text, file="lane.tile"), {"x": tile(64), "y": np.zeros((64, 64), ml_dtypes.bfloat16)})


# -- compiled --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, layout, n, tv, num, trans", CASES, ids=[c[0] for c in CASES])
def test_ptx_has_stmatrix(name, layout, n, tv, num, trans):
    ptx = compile_kernel(module(layout, n, tv, num, trans)).ptx
    form = f"stmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"
    count = lc.size(lc.parse(tv)[1]) // (2 * num)
    assert len(re.findall(re.escape(form) + r" \[%r\d+\], \{(%r\d+(, )?){" + str(num) + r"}\};", ptx)) == count
    assert "st.shared" not in ptx.replace("stmatrix", "")   # the tile is stored by stmatrix only


@pytest.fixture
def decode_at_run_time(monkeypatch):
    """Make the lowering take its fallback path (tv(M(t, r)) decoded at run time), as when tv ∘ M is not
    admissible."""
    from ptxgen.ir.ops import smem

    real = smem.stmatrix_row_tv
    monkeypatch.setattr(smem, "stmatrix_row_tv", lambda tv, num, trans: (real(tv, num, trans)[0], None))


def test_ptx_of_the_run_time_decode_path(decode_at_run_time):
    ptx = compile_kernel(module(ROW_MAJOR, 64, ACC64, 4, False, name="st_decode")).ptx
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \[%r\d+\]", ptx)) == 4


# -- on the GPU ------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name, layout, n, tv, num, trans", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_gpu_stmatrix_matches_the_interpreter(name, layout, n, tv, num, trans, dtype):
    from ptxgen.runtime import jit

    x = tile(n, dtype)
    y_cpu = np.zeros_like(x)
    interpret(module(layout, n, tv, num, trans, dtype), {"x": x, "y": y_cpu})
    y_gpu = np.full_like(x, -7.0)
    jit(module(layout, n, tv, num, trans, dtype))(x=x, y=y_gpu)
    assert np.array_equal(y_gpu.view(np.uint16), y_cpu.view(np.uint16))   # bit for bit
    assert np.array_equal(y_cpu, x)


@pytest.mark.gpu
@pytest.mark.parametrize("name, layout, n, tv, num, trans", CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_gpu_run_time_decode_path_matches_the_interpreter(name, layout, n, tv, num, trans, decode_at_run_time):
    from ptxgen.runtime import jit

    x = tile(n)
    y_gpu = np.full_like(x, -7.0)
    # another kernel name: the compile cache (keyed by the IR text) must not hand back the composed path's cubin
    jit(module(layout, n, tv, num, trans, name="st_decode"))(x=x, y=y_gpu)
    assert np.array_equal(y_gpu.view(np.uint16), x.view(np.uint16))


def test_thread_within_a_warpgroup_keeps_its_lane():
    """``thread % 128`` (a thread's index in its warpgroup, as an epilogue passes it) is a valid stmatrix thread
    operand: a divisor that is a multiple of 32 keeps the lane. ``thread % 48`` is not."""
    def text(divisor):
        return kernel_text(ROW_MAJOR, 64, ACC64, 4, False).replace(
            "  %f = gmem.load", f"  %cd = arith.const {{value = {divisor}}} : i32\n  %u = arith.rem %t, %cd : i32\n"
                                "  %f = gmem.load").replace("smem.stmatrix %s, %t,", "smem.stmatrix %s, %u,")

    ptx = compile_kernel(parse_module(text(128), file="lane128.tile")).ptx
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx)) == 4
    with pytest.raises(Exception, match="stmatrix's lanes are the hardware lanes"):
        compile_kernel(parse_module(text(48), file="lane48.tile"))


def test_pairs_are_packed_as_vectors():
    """Each stmatrix register is a ``<2 x b16>`` vector bitcast to i32 (no 16-bit shifts and ors), the form NVPTX
    turns into one ``cvt.rn.bf16x2.f32`` where the pair comes from f32 values converted in the same block (the GEMM
    epilogue's case: tests/ptxgen/test_gemm_hopper.py)."""
    llvm_ir = compile_kernel(module(ROW_MAJOR, 64, ACC64, 4, False, name="st_pairs"), defer_assembly=True).llvm_ir
    assert llvm_ir.count("bitcast <2 x bfloat>") == 16
    assert not re.search(r"shl i32 .*, 16", llvm_ir)
