"""frag.coords (each value's tile coordinates from its TV layout), frag.cmp and frag.select: masking ragged edges and
causal attention on fragments — verified, interpreted against numpy, lowered (constants where no thread moves a
mode), and on the GPU against the interpreter."""
from __future__ import annotations

import re

import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import interpret
from ptxgen.ir.ops import tile_coordinates, tv_table
from ptxgen.ir.text import parse_module, print_module
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import VerifyError, verify

TV = "((4,8),(2,8)):((16,1),(8,64))"   # over (8, 64): rows from the thread, columns from thread and value

# a causal mask (column <= row) and a ragged edge (column < %n), applied to the tile where it is loaded
MASK = f"""
kernel @mask(%x: gtensor<f32, 2>, %n: i32) {{grid = (1, 1, 1), block = (32, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %z = arith.const {{value = 0}} : i32
  %v = gmem.tile %x, %z, %z {{shape = [(8,64)]}} : gview<f32>[(8,64)]
  %f = gmem.load %v, %t {{tv = [{TV}]}} : frag<f32>[(2,8)]
  %rows, %cols = frag.coords %t {{tv = [{TV}], tile = [(8,64)]}} : frag<i32>[(2,8)], frag<i32>[(2,8)]
  %causal = frag.cmp %cols, %rows {{pred = le}} : frag<i1>[(2,8)]
  %inside = frag.cmp %cols, %n {{pred = lt}} : frag<i1>[(2,8)]
  %zero = arith.const {{value = 0.0}} : f32
  %g = frag.select %causal, %f, %zero : frag<f32>[(2,8)]
  %h = frag.select %inside, %g, %zero : frag<f32>[(2,8)]
  gmem.store %v, %t, %h {{tv = [{TV}]}}
}}
"""

# every value's coordinates written out: rows into %r, columns into %c (a (8, 64) i32 tile each)
COORDS = """
kernel @coords(%r: gtensor<i32, 2>, %c: gtensor<i32, 2>) {grid = (1, 1, 1), block = (BLOCK, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %vr = gmem.tile %r, %z, %z {shape = [(M,N)]} : gview<i32>[(M,N)]
  %vc = gmem.tile %c, %z, %z {shape = [(M,N)]} : gview<i32>[(M,N)]
  %rows, %cols = frag.coords %t {tv = [TVX], tile = [(M,N)]} : frag<i32>[S], frag<i32>[S]
  gmem.store %vr, %t, %rows {tv = [TVX]}
  gmem.store %vc, %t, %cols {tv = [TVX]}
}
"""


def coords_text(tv: str, m: int, n: int, block: int) -> str:
    tv_layout = lc.parse(tv)
    shape = lc.to_str(lc.shape(tv_layout.inner if isinstance(tv_layout, lc.ComposedLayout) else tv_layout)[1])
    return (COORDS.replace("TVX", tv).replace("(M,N)", f"({m},{n})").replace("BLOCK", str(block))
            .replace("[S]", f"[{shape}]"))


def coords_kernel(tv: str, m: int, n: int, block: int):
    return parse_module(coords_text(tv, m, n, block), file="coords.tile")


@pytest.mark.parametrize("tv, m, n, block", [
    (TV, 8, 64, 32),
    ("((4,8),4):((32,1),8)", 8, 16, 32),            # make_layout_tv((8,4):(4,1), (1,4)): 16-byte vectors
    ("Sw<3,3,6> o 0 o (((8,4),8),(8,2)):(((512,1),8),(64,4))", 64, 64, 256),   # the transpose's swizzled read
    ("(32,(2,2)):(1,(32,64))", 64, 2, 32),                        # columns from the values only
    ("Sw<2,0,5> o 0 o ((4,8),(4,4)):((128,1),(32,8))", 32, 16, 32),  # no thread part + constants: decoded per value
])
def test_coords_are_each_values_tile_coordinate(tv, m, n, block):
    """Written through the same TV layout, the row fragment fills the tile with its row indices and the column
    fragment with its column indices: every (thread, value) names the element it holds. The kernel lowers (and
    assembles) too."""
    module = coords_kernel(tv, m, n, block)
    verify(module)
    r, c = np.full((m, n), -1, np.int32), np.full((m, n), -1, np.int32)
    interpret(module, {"r": r, "c": c})
    rows, cols = np.indices((m, n))
    assert np.array_equal(r, rows) and np.array_equal(c, cols)
    _compiled_ir(coords_text(tv, m, n, block))


def test_coords_agree_with_the_tv_table():
    """The interpreter's coordinates are tile_coordinates of tv(t, v), the colexicographic tile index."""
    tv = lc.parse(TV)
    idx = tv_table(tv, 32)
    want = tile_coordinates((8, 64), idx)
    assert want.shape == (32, 16, 2)
    assert want[5, 3].tolist() == [(16 * (5 % 4) + 5 // 4 + 8 * 1 + 64 * 1) % 8,
                                    (16 * (5 % 4) + 5 // 4 + 8 * 1 + 64 * 1) // 8]


@pytest.mark.parametrize("n", [64, 40, 1, 0])
def test_causal_and_ragged_masks_match_numpy(n):
    x = np.random.default_rng(n).standard_normal((8, 64)).astype(np.float32)
    want = np.where(np.greater_equal(*np.indices((8, 64))) & (np.indices((8, 64))[1] < n), x, 0)
    module = parse_module(MASK, file="mask.tile")
    verify(module)
    interpret(module, {"x": x, "n": n})
    assert np.array_equal(x, want)


def test_text_round_trip():
    module = parse_module(MASK, file="mask.tile")
    assert print_module(parse_module(print_module(module))) == print_module(module)


ONE_RESULT = [("%rows, %cols = frag.coords", "%rows = frag.coords"),
              ("frag<i32>[(2,8)], frag<i32>[(2,8)]", "frag<i32>[(2,8)]"),
              ("frag.cmp %cols, %rows", "frag.cmp %rows, %rows"), ("frag.cmp %cols, %n", "frag.cmp %rows, %n")]


@pytest.mark.parametrize("edits, message", [
    (ONE_RESULT,
     "mask.tile:7:3: frag.coords: tile (8,64) has 2 modes, so frag.coords gives 2 fragments (one per mode), not 1"),
    ([("frag<i32>[(2,8)], frag<i32>[(2,8)]", "frag<i32>[(2,8)], frag<f32>[(2,8)]")],
     "mask.tile:7:3: frag.coords: every result is an i32 fragment (frag<i32>[S]), not frag<f32>[(2,8)]"),
    ([("tile = [(8,64)]} : frag<i32>", "tile = [(8,32)]} : frag<i32>")],
     "mask.tile:7:3: frag.coords: tv ((4,8),(2,8)):((16,1),(8,64)) reaches index 511 outside the tile of 256 "
     "elements"),
    ([("tile = [(8,64)]} : frag<i32>", "tile = [(8,64)], tv2 = 1} : frag<i32>")],
     "mask.tile:7:3: frag.coords: unknown attribute 'tv2' (frag.coords takes tv, tile)"),
    ([("frag.cmp %cols, %n {pred = lt}", "frag.cmp %cols, %n {pred = below}")],
     "mask.tile:9:3: frag.cmp: attribute 'pred' must be one of eq, ne, lt, le, gt, ge, not below"),
    ([("frag.cmp %cols, %rows {pred = le} : frag<i1>[(2,8)]", "frag.cmp %cols, %rows {pred = le} : frag<i32>[(2,8)]")],
     "mask.tile:8:3: frag.cmp: result type must be frag<i1>[(2,8)], not frag<i32>[(2,8)]"),
    ([("frag.cmp %cols, %n {pred = lt}", "frag.cmp %cols, %zero {pred = lt}"),
      ("  %zero = arith.const {value = 0.0} : f32\n", ""),
      ("  %inside =", "  %zero = arith.const {value = 0.0} : f32\n  %inside =")],
     "mask.tile:10:3: frag.cmp: a scalar operand must have the fragment's element type i32, not f32"),
    ([("frag.select %causal, %f, %zero", "frag.select %rows, %f, %zero")],
     "mask.tile:11:3: frag.select: the condition must be frag<i1> of the result's shape (frag<i1>[(2,8)]) or an "
     "i1, not frag<i32>[(2,8)]"),
    ([("frag.select %inside, %g, %zero", "frag.select %inside, %g, %n")],
     "mask.tile:12:3: frag.select: a scalar operand must have the result's element type f32, not i32"),
])
def test_verifier_messages(edits, message):
    text = MASK
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, file="mask.tile"))
    assert message in str(e.value).splitlines()


def _compiled_ir(text):
    module = parse_module(text, file="coords.tile")
    spec = Specialization.of(**{p.name: TensorSpec(1, True, 16) for p in module.kernels[0].params
                                if str(p.type).startswith("gtensor")})
    return compile_kernel(module.kernels[0], spec)


def test_lowering_folds_thread_independent_coordinates():
    """With tv (32,(2,2)):(1,(32,64)) over (64, 2) the column of a value is its value index alone: the column
    fragment is the constants 0, 1 (one st.global.v2 of immediates per row pair), the rows the thread index plus 0
    or 32 (its two stores take %tid.x's register twice)."""
    ptx = _compiled_ir(coords_text("(32,(2,2)):(1,(32,64))", 64, 2, 32)).ptx
    immediate = dict(re.findall(r"mov\.b32\s+(%r\d+),\s*(-?\d+);", ptx))
    stores = re.findall(r"st\.global\.v2\.b32 \[%rd\d+\], \{(%r\d+), (%r\d+)\}", ptx)
    assert len(stores) == 4
    constant = [(immediate.get(a), immediate.get(b)) for a, b in stores if a in immediate and b in immediate]
    assert constant == [("0", "1"), ("0", "1")]
    (tid,) = re.findall(r"mov\.u32\s+(%r\d+), %tid\.x;", ptx)
    assert stores[0] == (tid, tid)


def test_mask_kernel_lowers_and_assembles():
    compiled = _compiled_ir(MASK)
    assert "setp" in compiled.ptx and ("selp" in compiled.ptx or "@%p" in compiled.ptx)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [64, 37])
def test_mask_on_the_gpu_matches_the_interpreter(n):
    import torch

    from ptxgen.runtime import jit

    x = torch.randn((8, 64), device="cuda", dtype=torch.float32)
    host = x.cpu().numpy().copy()
    module = parse_module(MASK, file="mask.tile")
    interpret(module, {"x": host, "n": n})
    jit(module)(x=x, n=n)
    torch.cuda.synchronize()
    assert np.array_equal(x.cpu().numpy(), host)


@pytest.mark.gpu
@pytest.mark.parametrize("tv, m, n, block", [
    ("Sw<3,3,6> o 0 o (((8,4),8),(8,2)):(((512,1),8),(64,4))", 64, 64, 256),
    ("Sw<2,0,5> o 0 o ((4,8),(4,4)):((128,1),(32,8))", 32, 16, 32),
    (TV, 8, 64, 32),
])
def test_coords_on_the_gpu(tv, m, n, block):
    import torch

    from ptxgen.runtime import jit

    module = coords_kernel(tv, m, n, block)
    r = torch.full((m, n), -1, device="cuda", dtype=torch.int32)
    c = torch.full((m, n), -1, device="cuda", dtype=torch.int32)
    jit(module)(r=r, c=c)
    torch.cuda.synchronize()
    rows, cols = np.indices((m, n))
    assert np.array_equal(r.cpu().numpy(), rows) and np.array_equal(c.cpu().numpy(), cols)
