"""The verifier's error corpus: each bad kernel is reported at its op's file:line:col with its rule's message."""
import pytest

from ptxgen.ir.text import parse_module
from ptxgen.verify import VerifyError, verify

HEADER = "kernel @k(%x: gtensor<f32, 1>, %y: gtensor<f32, 2>, %n: i32, %s: f32) {grid = (1, 1, 1), block = (128, 1, 1)} {\n"
PRELUDE = """  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %p = arith.cmp %t, %c1 {pred = lt} : i1
"""
BODY_LINE = 6  # the first line after the prelude

# (name, body lines, message fragment); the error is expected on the body's first line unless a line is given
CORPUS = [
    ("unknown op", "  %r = arith.frobnicate %t, %c1 : i32", "unknown op 'arith.frobnicate'"),
    ("operand count", "  %r = arith.add %t : i32", "expects 2 operands, got 1"),
    ("result count", "  arith.add %t, %c1", "expects 1 result, got 0"),
    ("mixed operand types", "  %r = arith.add %t, %s : i32", "operands and result must have one type, got i32, f32, i32"),
    ("result type of add", "  %r = arith.add %t, %c1 : f32", "operands and result must have one type"),
    ("bitwise on floats", "  %r = arith.and %s, %s : f32", "operand type f32 is not one of"),
    ("const does not fit", "  %r = arith.const {value = 300} : u32\n  %q = arith.const {value = 5000000000} : i32",
     "value 5000000000 does not fit i32", BODY_LINE + 1),
    ("const float for int", "  %r = arith.const {value = 1.5} : i32", "value 1.5 is not an integer but the type is i32"),
    ("const missing value", "  %r = arith.const : i32", "missing attribute 'value'"),
    ("cmp predicate", "  %r = arith.cmp %t, %c1 {pred = less} : i1", "attribute 'pred' must be one of eq, ne, lt, le, gt, ge"),
    ("cmp result type", "  %r = arith.cmp %t, %c1 {pred = lt} : i32", "result type must be i1, not i32"),
    ("select condition", "  %r = arith.select %t, %c0, %c1 : i32", "the condition must be i1, not i32"),
    ("thread_id dim", "  %r = gpu.thread_id {dim = w} : i32", "attribute 'dim' must be one of x, y, z"),
    ("thread_id type", "  %r = gpu.thread_id {dim = x} : i64", "result type must be i32, not i64"),
    ("for bound type", "  scf.for %c0, %s, %c1 (%i: i32) {\n    scf.yield\n  }", "the upper bound must be i32, not f32"),
    ("for block args", "  scf.for %c0, %n, %c1 {\n    scf.yield\n  }", "the body needs 1 block arguments"),
    ("for carried types",
     "  %o = scf.for %c0, %n, %c1, %c0 : i32 (%i: i32, %a: f32) {\n    scf.yield %a\n  }",
     "carried value 0: initial i32, block argument f32 and result i32 must be the same type"),
    ("for yield types",
     "  %o = scf.for %c0, %n, %c1, %c0 : i32 (%i: i32, %a: i32) {\n    scf.yield %s\n  }",
     "yields (f32) but scf.for expects (i32)", BODY_LINE + 1),
    ("for missing yield",
     "  %o = scf.for %c0, %n, %c1, %c0 : i32 (%i: i32, %a: i32) {\n    %b = arith.add %a, %c1 : i32\n  }",
     "its region must end with scf.yield"),
    ("for unroll", "  scf.for %c0, %n, %c1 {unroll = 0} (%i: i32) {\n    scf.yield\n  }", "unroll must be an integer >= 1"),
    ("yield not last",
     "  scf.for %c0, %n, %c1 (%i: i32) {\n    scf.yield\n    %b = arith.add %i, %c1 : i32\n  }",
     "scf.yield must be the last op of its region", BODY_LINE + 1),
    ("if condition type", "  scf.if %t {\n  }", "the condition must be i1, not i32"),
    ("if results need else", "  %r = scf.if %p : i32 {\n    scf.yield %c0\n  }", "an scf.if with results needs an else region"),
    ("gdim mode", "  %d = gtensor.dim %y {mode = 2} : i32", "mode 2 is out of range for rank 2"),
    ("gdim operand", "  %d = gtensor.dim %n {mode = 0} : i32", "operand must be a gtensor, not i32"),
    ("tile rank", "  %v = gmem.tile %y, %c0, %c0 {shape = [64]} : gview<f32>[64]",
     "tile shape 64 has rank 1 but the gtensor has rank 2"),
    ("tile coordinates", "  %v = gmem.tile %y, %c0 {shape = [(8,8)]} : gview<f32>[(8,8)]",
     "a rank-2 gtensor needs 2 origin coordinates, got 1"),
    ("tile missing shape", "  %v = gmem.tile %x, %c0 : gview<f32>[64]", "missing attribute 'shape'"),
    ("tile result type", "  %v = gmem.tile %x, %c0 {shape = [64]} : gview<f32>[32]", "result type must be gview<f32>[64]"),
    ("load tv rank", "  %v = gmem.tile %x, %c0 {shape = [512]} : gview<f32>[512]\n"
                     "  %f = gmem.load %v, %t {tv = [512:1]} : frag<f32>[4]",
     "tv 512:1 must have rank 2: (threads, values)", BODY_LINE + 1),
    ("load tv values", "  %v = gmem.tile %x, %c0 {shape = [512]} : gview<f32>[512]\n"
                       "  %f = gmem.load %v, %t {tv = [(128,4):(4,1)]} : frag<f32>[8]",
     "tv's value mode 4:1 has 4 values but the fragment 8 has 8", BODY_LINE + 1),
    ("load tv outside tile", "  %v = gmem.tile %x, %c0 {shape = [256]} : gview<f32>[256]\n"
                             "  %f = gmem.load %v, %t {tv = [(128,4):(4,1)]} : frag<f32>[4]",
     "reaches index 511 outside the tile of 256 elements", BODY_LINE + 1),
    ("load element type", "  %v = gmem.tile %x, %c0 {shape = [512]} : gview<f32>[512]\n"
                          "  %f = gmem.load %v, %t {tv = [(128,4):(4,1)]} : frag<bf16>[4]",
     "fragment element type bf16 differs from the tile's f32", BODY_LINE + 1),
    ("store of a scalar", "  %v = gmem.tile %x, %c0 {shape = [512]} : gview<f32>[512]\n"
                          "  gmem.store %v, %t, %s {tv = [(128,4):(4,1)]}",
     "the stored value must be a frag, not f32", BODY_LINE + 1),
    ("frag shape mismatch", "  %a = frag.splat %s : frag<f32>[4]\n  %b = frag.splat %s : frag<f32>[8]\n"
                            "  %c = frag.add %a, %b : frag<f32>[4]",
     "fragment operands differ: frag<f32>[4] and frag<f32>[8]", BODY_LINE + 2),
    ("frag scalar type", "  %a = frag.splat %s : frag<f32>[4]\n  %c = frag.mul %a, %t : frag<f32>[4]",
     "a scalar operand must have the fragment's element type f32, not i32", BODY_LINE + 1),
    ("transcendental on bf16", "  %h = arith.cast %s : bf16\n  %a = frag.splat %h : frag<bf16>[4]\n"
                               "  %c = frag.exp %a : frag<bf16>[4]",
     "frag.exp is defined for f32 fragments, not bf16", BODY_LINE + 2),
    ("splat type", "  %a = frag.splat %t : frag<f32>[4]", "the scalar's type i32 differs from the fragment's element type f32"),
    ("reduce across warps", "  %a = frag.splat %s : frag<f32>[8]\n"
                            "  %r = frag.reduce %a, %t {tv = [(128,8):(1,128)], tile = [(8,128)], mode = 1, kind = add} : frag<f32>[8]",
     "row 0 is spread over warps [0, 1, 2, 3]", BODY_LINE + 1),
    ("reduce coverage", "  %a = frag.splat %s : frag<f32>[4]\n"
                        "  %r = frag.reduce %a, %t {tv = [(128,4):(0,1)], tile = [(4,128)], mode = 1, kind = add} : frag<f32>[4]",
     "must hold every element of the (4,128) tile exactly once", BODY_LINE + 1),
    ("reduce kind", "  %a = frag.splat %s : frag<f32>[4]\n"
                    "  %r = frag.reduce %a, %t {tv = [(128,4):(4,1)], tile = [(4,128)], mode = 1, kind = mean} : frag<f32>[4]",
     "attribute 'kind' must be one of add, max, min", BODY_LINE + 1),
    ("cast to a frag", "  %a = arith.cast %s : frag<f32>[4]", "the result must be a scalar, not frag<f32>[4]"),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_kernel_is_reported_at_its_op(case):
    name, body, message, *line = case
    line = line[0] if line else BODY_LINE
    text = HEADER + PRELUDE + body + "\n}\n"
    module = parse_module(text, file="bad.tile")
    with pytest.raises(VerifyError) as info:
        verify(module)
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"bad.tile:{line}:"), first
    assert message in first, first


def test_the_prelude_alone_verifies():
    verify(parse_module(HEADER + PRELUDE + "}\n", file="good.tile"))
