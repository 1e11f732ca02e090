"""The tile IR text form (spec/tile-ir.md §3): parser, printer, locations, errors, host expressions, and the
round-trip properties ``parse(print(m)) ≅ m`` and ``print(parse(print(m))) == print(m)`` on random modules."""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import layoutc as lc
from ptxgen.ir.core import Kernel, Location, Module, Op, Region, Value, walk
from ptxgen.ir.hostexpr import Add, CDiv, Const, Dim, HostExprError, Mul, ParamRef, TupleAttr, Word
from ptxgen.ir.text import (IRSyntaxError, first_difference, parse_module, parse_type, print_module, print_type,
                            structurally_equal)
from ptxgen.ir.types import (SCALARS, BarrierType, FragmentType, GlobalTensorType, GlobalViewType, TensorMapType,
                             TensorType)

F32, I32, I1 = SCALARS["f32"], SCALARS["i32"], SCALARS["i1"]
REPO = Path(__file__).resolve().parents[2]

SPEC_EXAMPLE = """\
// comment
kernel @name(%x: gtensor<f32, 1>, %z: gtensor<f32, 1>, %n: i32, %lo: i32, %hi: i32, %st: i32, %init: frag<f32>[(4)], %a: i32, %b: i32, %p: i1) {grid = (cdiv(%n, 1024), 1, 1), block = (256, 1, 1)} {
  %bid = gpu.block_id {dim = x} : i32
  %c = arith.const {value = 1024} : i32
  %base = arith.mul %bid, %c : i32
  %v = gmem.tile %x, %base {shape = [(1024)]} : gview<f32>[(1024)]
  %t = gpu.thread_id {dim = x} : i32
  %f = gmem.load %v, %t {tv = [(256,4):(4,1)], other = 0.0} : frag<f32>[(4)]
  %o = scf.for %lo, %hi, %st, %init {unroll = 2} : frag<f32>[(4)] (%i: i32, %acc: frag<f32>[(4)]) {
    %a2 = frag.add %acc, %f : frag<f32>[(4)]
    scf.yield %a2
  }
  %r = scf.if %p : i32 {
    scf.yield %a
  } {
    scf.yield %b
  }
  gmem.store %v, %t, %o {tv = [(256,4):(4,1)]}
}
"""


def roundtrip(text: str, file: str = "t.tile") -> str:
    """Parse, print, reparse: the print is a fixed point and the reparse is structurally equal. Returns the print."""
    m = parse_module(text, file)
    printed = print_module(m)
    m2 = parse_module(printed, file)
    assert first_difference(m, m2) is None, first_difference(m, m2)
    assert print_module(m2) == printed
    return printed


# --------------------------------------------------------------------------------------------------------------
# Parsing and printing

def test_spec_example_parses_prints_and_is_stable():
    printed = roundtrip(SPEC_EXAMPLE)
    # the example is already canonical except for its comment
    assert printed == SPEC_EXAMPLE.split("\n", 1)[1]
    m = parse_module(SPEC_EXAMPLE, "ex.tile")
    k = m.kernel("name")
    assert [p.name for p in k.params][:3] == ["x", "z", "n"]
    assert k.params[0].type == GlobalTensorType(F32, 1)
    assert k.attrs["grid"] == (CDiv(ParamRef("n"), Const(1024)), Const(1), Const(1))
    assert k.attrs["block"] == (256, 1, 1)
    ops = list(walk(k.body))
    assert [o.name for o in ops] == ["gpu.block_id", "arith.const", "arith.mul", "gmem.tile", "gpu.thread_id",
                                     "gmem.load", "scf.for", "frag.add", "scf.yield", "scf.if", "scf.yield",
                                     "scf.yield", "gmem.store"]
    tile = ops[3]
    assert tile.attrs == {"shape": (1024,)} and type(tile.attrs["shape"]) is tuple
    assert tile.result.type == GlobalViewType(F32, (1024,))
    load = ops[5]
    assert load.attrs["tv"] == lc.Layout((256, 4), (4, 1)) and load.attrs["other"] == 0.0
    assert isinstance(load.attrs["other"], float)
    assert ops[0].attrs == {"dim": Word("x")}
    loop = ops[6]
    assert [v.name for v in loop.operands] == ["lo", "hi", "st", "init"]
    assert [(a.name, a.type) for a in loop.regions[0].args] == [("i", I32), ("acc", FragmentType(F32, (4,)))]
    assert loop.regions[0].ops[0].operands[0] is loop.regions[0].args[1]
    assert loop.regions[0].ops[0].operands[1] is load.result
    assert loop.regions[0].ops[1].operands == [loop.regions[0].ops[0].result]
    assert ops[-1].operands[2] is loop.result
    if_op = ops[9]
    assert len(if_op.regions) == 2 and if_op.results[0].owner is if_op


def test_locations_of_kernel_ops_and_values():
    m = parse_module(SPEC_EXAMPLE, "ex.tile")
    k = m.kernels[0]
    assert k.loc == Location("ex.tile", 2, 1)
    assert k.params[0].loc == Location("ex.tile", 2, 14)
    ops = list(walk(k.body))
    assert ops[0].loc == Location("ex.tile", 3, 3)
    assert ops[0].result.loc == Location("ex.tile", 3, 3)
    assert ops[6].loc == Location("ex.tile", 9, 3)                 # %o = scf.for
    assert ops[6].regions[0].args[1].loc == Location("ex.tile", 9, 77)   # %acc
    assert ops[7].loc == Location("ex.tile", 10, 5)                # nested op
    assert ops[8].loc == Location("ex.tile", 11, 5)                # scf.yield (no results: its name)
    assert ops[-1].loc == Location("ex.tile", 18, 3)
    assert str(ops[-1].loc) == "ex.tile:18:3"


def test_multiple_results_over_lines_no_operand_ops_and_comments():
    text = """
// leading comment

kernel @k(%n: i32) {
  gpu.barrier          // no operands, then an op with results: `%r =` starts a new op
  %a,
      %b = foo.pair %n {k = 1} : i32, f32   // comment after an op
  foo.use %a, %b
  gpu.barrier
  %c = foo.zero : i32

  foo.use %c
}
// trailing comment
"""
    m = parse_module(text, "m.tile")
    ops = m.kernels[0].body.ops
    assert [o.name for o in ops] == ["gpu.barrier", "foo.pair", "foo.use", "gpu.barrier", "foo.zero", "foo.use"]
    assert ops[0].operands == [] and ops[3].operands == []
    pair = ops[1]
    assert [r.name for r in pair.results] == ["a", "b"] and [r.type for r in pair.results] == [I32, F32]
    assert pair.loc == Location("m.tile", 6, 3)
    assert pair.results[1].loc == Location("m.tile", 7, 7)
    assert ops[2].operands == pair.results
    printed = roundtrip(text)
    assert "  %a, %b = foo.pair %n {k = 1} : i32, f32\n" in printed
    assert "//" not in printed


def test_nested_regions_and_empty_regions():
    text = """kernel @k(%n: i32) {
  %o = scf.for %n, %n, %n, %n : i32 (%i: i32, %acc: i32) {
    %p = arith.cmp %i, %acc {pred = lt} : i1
    %q = scf.if %p : i32 {
      %w = scf.for %i, %n, %n, %acc : i32 (%j: i32, %in: i32) {
        %s = arith.add %j, %in : i32
        scf.yield %s
      }
      scf.yield %w
    } {
      scf.yield %acc
    }
    scf.yield %q
  }
  foo.empty {
  } {
  }
  foo.args (%e: i32) {
  }
  foo.flat {}
}
"""
    printed = roundtrip(text)
    m = parse_module(text)
    ops = m.kernels[0].body.ops
    assert len(ops[1].regions) == 2 and all(r.ops == [] and r.args == [] for r in ops[1].regions)
    assert ops[1].attrs == {}
    assert ops[2].regions[0].args[0].name == "e"
    assert ops[3].attrs == {} and len(ops[3].regions) == 1
    assert "  foo.flat {\n  }\n" in printed
    assert "      %w = scf.for %i, %n, %n, %acc : i32 (%j: i32, %in: i32) {\n        %s = arith.add" in printed


def test_all_attribute_kinds():
    text = """kernel @k() {
  foo.attrs {i = 42, neg = -7, big = 123456789012345678901234567890, f = 0.0, g = -1.5e-3, h = 1e5, pinf = inf, ninf = -inf, nan = nan, s = "a \\"q\\" \\n \\u00e9 é", t = true, u = false, w = lt, w2 = info, tup = (1, (2, 3), "x", add), one = (1024), empty = (), shape = [(1024)], shape2 = [(64,64)], n = [1024], lay = [(256,4):(4,1)], sw = [Sw<3,4,3> o 0 o (8,64):(64,1)], tiler = [(3:4,(2,4):(1,8))], under = [_]}
}
"""
    a = parse_module(text).kernels[0].body.ops[0].attrs
    assert a["i"] == 42 and a["neg"] == -7 and a["big"] == 123456789012345678901234567890
    assert type(a["f"]) is float and a["f"] == 0.0 and a["g"] == -1.5e-3 and a["h"] == 1e5
    assert a["pinf"] == math.inf and a["ninf"] == -math.inf and math.isnan(a["nan"])
    assert a["s"] == 'a "q" \n é é'
    assert a["t"] is True and a["u"] is False
    assert a["w"] == Word("lt") and a["w2"] == Word("info")
    assert type(a["tup"]) is TupleAttr and a["tup"] == (1, (2, 3), "x", Word("add"))
    assert type(a["tup"][1]) is TupleAttr
    assert type(a["one"]) is TupleAttr and a["one"] == (1024,)
    assert a["empty"] == () and type(a["empty"]) is TupleAttr
    assert type(a["shape"]) is tuple and a["shape"] == (1024,)
    assert a["shape2"] == (64, 64) and a["n"] == 1024
    assert a["lay"] == lc.Layout((256, 4), (4, 1))
    assert isinstance(a["sw"], lc.ComposedLayout)
    assert a["tiler"] == (lc.Layout(3, 4), lc.Layout((2, 4), (1, 8)))
    assert a["under"] is lc._
    printed = roundtrip(text)
    # brackets and parentheses stay apart; the bracketed int prints bare; floats print with repr
    for piece in ["one = (1024)", "shape = [(1024)]", "tup = (1, (2, 3), \"x\", add)", "n = 1024", "h = 100000.0",
                  "g = -0.0015", "nan = nan", "ninf = -inf", "under = [_]", "empty = ()",
                  "sw = [Sw<3,4,3> o 0 o (8,64):(64,1)]", "tiler = [(3:4,(2,4):(1,8))]"]:
        assert piece in printed, piece


def test_value_keywords_are_attribute_keys_too():
    """One lexer for the whole grammar: `true false inf nan kernel` are keywords as values, yet any of them may name
    an attribute (of an op or of a kernel), and words that merely start with one (`info`, `kernels`) are words."""
    text = """kernel @k() {grid = (1, 1, 1), block = (32, 1, 1), kernel = 3} {
  foo.attrs {true = false, false = true, inf = -inf, nan = 1, kernel = kernels, w = info, x = truth}
}
"""
    k = parse_module(text).kernels[0]
    a = k.body.ops[0].attrs
    assert a["true"] is False and a["false"] is True and a["inf"] == -math.inf and a["nan"] == 1
    assert a["kernel"] == Word("kernels") and a["w"] == Word("info") and a["x"] == Word("truth")
    assert k.attrs["kernel"] == 3
    assert "true = false, false = true" in roundtrip(text)


def test_all_types_parse_and_print():
    texts = {
        **{name: t for name, t in SCALARS.items()},
        "gtensor<f32, 2>": GlobalTensorType(F32, 2),
        "gview<bf16>[(64,64)]": GlobalViewType(SCALARS["bf16"], (64, 64)),
        "gview<f32>[1024]": GlobalViewType(F32, 1024),
        "frag<f32>[(4)]": FragmentType(F32, (4,)),
        "frag<e4m3>[(2,(2,4))]": FragmentType(SCALARS["e4m3"], (2, (2, 4))),
        "smem<bf16>[Sw<3,4,3> o 0 o (8,64):(64,1)]": TensorType("smem", SCALARS["bf16"],
                                                                lc.parse("Sw<3,4,3> o 0 o (8,64):(64,1)")),
        "rmem<f32>[(4,8):(1,4)]": TensorType("rmem", F32, lc.Layout((4, 8), (1, 4))),
        "gmem<u64>[8:1]": TensorType("gmem", SCALARS["u64"], lc.Layout(8, 1)),
        "tmap<bf16, 2>[Sw<3,4,3> o 0 o (64,64):(64,1)]": TensorMapType(SCALARS["bf16"], 2,
                                                                       lc.parse("Sw<3,4,3> o 0 o (64,64):(64,1)")),
        "mbarrier<3>": BarrierType(3),
    }
    for text, t in texts.items():
        parsed = parse_type(text)
        assert parsed == t and type(parsed) is type(t), text
        assert print_type(parsed) == text
    assert parse_type(" frag < f32 > [ (4) ] ") == FragmentType(F32, (4,))
    with pytest.raises(IRSyntaxError, match=r"<type>:1:1: unknown type 'tensor'"):
        parse_type("tensor<f32>")


def test_host_expression_forms():
    text = ("kernel @k(%n: i32, %m: i32, %x: gtensor<f32, 2>) {grid = (cdiv(%n, 1024), dim(%x, 1), 1), "
            "block = (128, 1, 1), cluster = (2, 1, 1), g2 = (%n + %m * 2, (%n + %m) * 2, %n * (%m * 2)), "
            "g3 = %n + (%m + 1), g4 = cdiv(%n + 7, 2 * %m) * -1, name = \"x\", lay = [8:1], w = dim} {\n}\n")
    k = parse_module(text).kernels[0]
    n, mm = ParamRef("n"), ParamRef("m")
    assert k.attrs["grid"] == (CDiv(n, Const(1024)), Dim("x", 1), Const(1))
    assert k.attrs["block"] == (128, 1, 1) and k.attrs["cluster"] == (2, 1, 1)
    assert k.attrs["g2"] == (Add(n, Mul(mm, Const(2))), Mul(Add(n, mm), Const(2)), Mul(n, Mul(mm, Const(2))))
    assert k.attrs["g3"] == Add(n, Add(mm, Const(1)))
    assert k.attrs["g4"] == Mul(CDiv(Add(n, Const(7)), Mul(Const(2), mm)), Const(-1))
    assert k.attrs["lay"] == lc.Layout(8, 1) and k.attrs["w"] == Word("dim")
    printed = roundtrip(text)
    assert ("{grid = (cdiv(%n, 1024), dim(%x, 1), 1), block = (128, 1, 1), cluster = (2, 1, 1), "
            "g2 = (%n + %m * 2, (%n + %m) * 2, %n * (%m * 2)), g3 = %n + (%m + 1), "
            "g4 = cdiv(%n + 7, 2 * %m) * -1, name = \"x\", lay = [8:1], w = dim}") in printed
    env = {"n": 5000, "m": 3, "x": np.zeros((7, 9))}
    assert [e.evaluate(env) for e in k.attrs["grid"]] == [5, 9, 1]
    assert k.attrs["g4"].evaluate(env) == -((5000 + 7 + 5) // 6)
    assert [e.evaluate(env) for e in k.attrs["g2"]] == [5006, 10006, 30000]
    assert k.attrs["g2"][0].params() == {"n", "m"} and Dim("x", 0).params() == {"x"}


def test_host_expression_text_forms():
    assert str(CDiv(ParamRef("n"), Const(1024))) == "cdiv(%n, 1024)"
    assert str(Mul(Add(Const(1), Const(2)), Const(3))) == "(1 + 2) * 3"
    assert str(Add(Const(1), Mul(Const(2), Const(3)))) == "1 + 2 * 3"
    assert str(Add(Add(Const(1), Const(2)), Const(3))) == "1 + 2 + 3"
    assert str(Add(Const(1), Add(Const(2), Const(3)))) == "1 + (2 + 3)"
    assert str(Dim("x", 0)) == "dim(%x, 0)"
    assert CDiv(Const(7), Const(2)).evaluate({}) == 4 and CDiv(Const(8), Const(2)).evaluate({}) == 4
    assert CDiv(Const(0), Const(2)).evaluate({}) == 0
    assert Dim("x", 1).evaluate({"x": np.zeros((3, 5))}) == 5


def test_examples_are_stable(tmp_path):
    for path in sorted((REPO / "examples").glob("*.tile")):
        roundtrip(path.read_text(), str(path))


def test_builder_twins_of_examples_are_structurally_equal():
    """The Python builder makes, op for op, the IR of every examples/X.tile: the library's kernel of each
    (ptxgen.kernels: the GEMMs with the configuration the text spells out, the TMA copy, sqrt_sin, l2norm)."""
    from ptxgen.kernels import elementwise, l2norm, tma_copy
    from ptxgen.kernels.gemm import TILE_FILE, build
    from ptxgen.kernels.gemm.simple import SimpleGemmConfig
    from ptxgen.kernels.gemm.simple import build as build_simple

    library = {"gemm": lambda: build_simple(SimpleGemmConfig()), "gemm_hopper": lambda: build(TILE_FILE),
               "tma_copy": tma_copy.build, "sqrt_sin": elementwise.build, "l2norm": l2norm.build}
    tiles = sorted((REPO / "examples").glob("*.tile"))
    assert {t.stem for t in tiles} == set(library)
    for tile in tiles:
        built = library[tile.stem]()
        parsed = parse_module(tile.read_text(), str(tile))
        assert structurally_equal(parsed, built), first_difference(parsed, built)
        assert print_module(built) == print_module(parsed)


def test_builder_refuses_a_value_name_defined_twice():
    """The text form defines a name once per kernel, sibling regions included: the builder says so at the second
    definition instead of building IR that cannot print; its generated names avoid the names given."""
    from ptxgen.ir.builder import KernelBuilder, i32

    kb = KernelBuilder("k", n=i32)
    b = kb.b
    b.const(1, i32, name="v1")
    assert b.const(2, i32).name == "v2"        # v1 is taken
    with pytest.raises(ValueError, match="%n is already defined"):
        b.const(3, i32, name="n")               # a parameter's name
    with b.scf.for_(b.const(0, i32, name="lo"), kb["n"], b.const(1, i32, name="one"), args=("i",)):
        b.scf.yield_()
    with pytest.raises(ValueError, match="%i is already defined"):
        b.const(4, i32, name="i")


def test_printer_canonical_form_for_builder_values():
    x = Value("x", GlobalTensorType(F32, 1))
    n = Value("n", I32)
    c = Value("c", I32)
    acc = Value("acc", F32)
    i = Value("i", I32)
    body = Region([i, acc], [Op("scf.yield", [acc])])
    ops = [
        Op("arith.const", [], {"value": 3, "f": np.float32(0.5), "k": np.int64(4)}, [c]),
        Op("scf.for", [n, n, n, c], {}, [Value("o", F32)], [body]),
        Op("foo.t", [], {"shape": (4, 8), "mixed": (1, 2.5), "tup": TupleAttr((4, 8)), "lay": lc.Layout(4, 1)}),
    ]
    k = Kernel("k", [x, n], {"grid": (CDiv(ParamRef("n"), Const(4)), 1, 1), "block": (128, 1, 1)}, Region([], ops))
    text = print_module(Module([k]))
    assert text == (
        "kernel @k(%x: gtensor<f32, 1>, %n: i32) {grid = (cdiv(%n, 4), 1, 1), block = (128, 1, 1)} {\n"
        "  %c = arith.const {value = 3, f = 0.5, k = 4} : i32\n"
        "  %o = scf.for %n, %n, %n, %c : f32 (%i: i32, %acc: f32) {\n"
        "    scf.yield %acc\n"
        "  }\n"
        "  foo.t {shape = [(4,8)], mixed = (1, 2.5), tup = (4, 8), lay = [4:1]}\n"
        "}\n")
    back = parse_module(text)
    assert structurally_equal(back, Module([k])), first_difference(back, Module([k]))
    assert back.kernels[0].attrs["grid"] == (CDiv(ParamRef("n"), Const(4)), Const(1), Const(1))


def test_printer_refuses_what_the_text_form_cannot_write():
    n = Value("n", I32)
    cases = [
        Kernel("k", [n, Value("n", I32)], {}, Region()),                        # a name twice
        Kernel("k", [Value("bad name", I32)], {}, Region()),
        Kernel("k", [], {}, Region([], [Op("nodot", [])])),
        Kernel("k", [], {}, Region([], [Op("a.b", [], {"w": Word("true")})])),
        Kernel("k", [], {}, Region([], [Op("a.b", [], {"o": object()})])),
        Kernel("k", [], {}, Region([], [Op("a.b", [], {"h": ParamRef("n")})])),  # host expr in an op
        Kernel("k", [], {}, Region([], [Op("a.b", [], {"bad key": 1})])),
    ]
    for k in cases:
        with pytest.raises(ValueError):
            print_module(Module([k]))


def test_structural_difference_messages():
    a = parse_module(SPEC_EXAMPLE)
    b = parse_module(SPEC_EXAMPLE.replace("{unroll = 2}", "{unroll = 3}"))
    d = first_difference(a, b)
    assert d is not None and "scf.for" in d and "unroll" in d
    c = parse_module(SPEC_EXAMPLE.replace("frag.add %acc, %f", "frag.add %f, %acc"))
    assert "operand 0: %acc vs %f" in first_difference(a, c)
    e = parse_module(SPEC_EXAMPLE.replace("shape = [(1024)]", "shape = (1024)"))
    assert "attribute 'shape'" in first_difference(a, e)
    f = parse_module(SPEC_EXAMPLE.replace("other = 0.0", "other = 0"))
    assert "attribute 'other'" in first_difference(a, f)
    assert structurally_equal(a, parse_module(SPEC_EXAMPLE))


# --------------------------------------------------------------------------------------------------------------
# Errors

H = "kernel @k(%x: gtensor<f32, 1>, %n: i32) {\n"

ERRORS = [
    # (name, text, location, message (the start of it))
    ("undefined value", H + "  %a = arith.add %n, %q : i32\n}\n", "2:22", "undefined value %q"),
    ("redefinition", H + "  %a = foo.a %n : i32\n  %a = foo.a %n : i32\n}\n", "3:3",
     "redefinition of %a (first defined at 2:3)"),
    ("redefinition of a parameter", H + "  %n = foo.a %n : i32\n}\n", "2:3",
     "redefinition of %n (first defined at 1:32)"),
    ("redefinition in a sibling region", H + "  foo.r {\n    %a = foo.a : i32\n  } {\n    %a = foo.a : i32\n  }\n}\n",
     "5:5", "redefinition of %a (first defined at 3:5)"),
    ("redefinition by a block argument", H + "  foo.r (%n: i32) {\n  }\n}\n", "2:10",
     "redefinition of %n (first defined at 1:32)"),
    ("value used after its region", H + "  foo.r (%i: i32) {\n    %b = foo.a %i : i32\n  }\n  foo.use %b\n}\n",
     "5:11", "value %b is not visible here (it is defined at 3:5)"),
    ("block argument used after its region", H + "  foo.r (%i: i32) {\n  }\n  foo.use %i\n}\n",
     "4:11", "value %i is not visible here (it is defined at 2:10)"),
    ("own result inside its region", H + "  %r = scf.if %n : i32 {\n    scf.yield %r\n  }\n}\n",
     "3:15", "value %r is not visible here (it is defined at 2:3)"),
    ("use before definition", H + "  foo.use %later\n  %later = foo.a : i32\n}\n", "2:11", "undefined value %later"),
    ("too few result types", H + "  %a, %b = foo.bar %n : i32\n}\n", "2:3", "foo.bar has 2 results but 1 result type"),
    ("no result types", H + "  %a = foo.bar %n\n}\n", "2:3", "foo.bar has 1 result but 0 result types"),
    ("types without results", H + "  foo.bar %n : i32, i32\n}\n", "2:3", "foo.bar has 0 results but 2 result types"),
    ("unknown type", H + "  %a = foo.bar %n : f33\n}\n", "2:21", "unknown type 'f33'"),
    ("unknown element type", "kernel @k(%x: gtensor<f33, 1>) {\n}\n", "1:23", "unknown element type 'f33'"),
    ("wrong type form", "kernel @k(%x: gtensor<f32>) {\n}\n", "1:15", "type gtensor is written gtensor<T, rank>"),
    ("scalar with parameters", H + "  %a = foo.bar : i32<4>\n}\n", "2:21", "scalar type i32 takes no parameters"),
    ("frag shape that is a layout", H + "  %a = foo.bar : frag<f32>[4:1]\n}\n", "2:28",
     "the shape of frag must be an int tuple, not 4:1"),
    ("smem without a layout", H + "  %a = foo.bar : smem<f32>[(4,8)]\n}\n", "2:28",
     "smem needs a layout (shape:stride), not (4,8)"),
    ("bad layout in an attribute", H + "  %a = foo.bar %n {tv = [(2,3):(1:2)]} : i32\n}\n", "2:34",
     "bad CuTe notation [(2,3):(1:2)]: expected ',' or ')' but found ':'"),
    ("bad layout in a type", H + "  %a = foo.bar %n : frag<f32>[(2,3]\n}\n", "2:35",
     "bad CuTe notation [(2,3]: expected ',', ')' or ':' but found end of text"),
    ("invalid layout", H + "  foo.bar {tv = [(2,3):(1,2,3)]}\n}\n", "2:18", "bad CuTe notation [(2,3):(1,2,3)]"),
    ("unterminated region", H + "  foo.r (%i: i32) {\n    %b = foo.a %i : i32\n", "3:24",
     "expected results ('%r ='), an op name (dialect.op)"),
    ("unterminated kernel", H + "  %b = foo.a %n : i32\n", "2:22", "expected results ('%r ='), an op name"),
    ("missing comma", H + "  %a = foo.bar %n %n : i32\n}\n", "2:19", "expected results ('%r ='), an op name"),
    ("stray character", H + "  %a = foo.bar %n $ : i32\n}\n", "2:19", "expected results"),
    ("no op name", H + "  %a = %n\n}\n", "2:8", "expected an op name (dialect.op) but found '%n'"),
    ("empty attribute dict", H + "  %a = foo.bar %n {} : i32\n}\n", "2:22",
     "expected results ('%r ='), an op name (dialect.op), '(', '{' or '}' but found ':' (an empty '{}' is an empty "
     "region"),
    ("duplicate attribute", H + "  %a = foo.bar %n {k = 1, k = 2} : i32\n}\n", "2:27", "duplicate attribute 'k'"),
    ("bad string escape", H + '  foo.bar {s = "\\q"}\n}\n', "2:16", 'bad string literal "\\q"'),
    ("bad host function arity", "kernel @k(%n: i32) {grid = (cdiv(%n), 1, 1)} {\n}\n", "1:29",
     "cdiv takes 2 arguments, not 1"),
    ("unknown host function", "kernel @k(%n: i32) {grid = (foo(%n, 2), 1, 1)} {\n}\n", "1:29",
     "unknown host function 'foo' (expected dim, cdiv or min)"),
    ("host expression on a non-parameter", "kernel @k(%n: i32) {grid = (%m * 2, 1, 1)} {\n}\n", "1:29",
     "%m in a host expression is not a parameter of the kernel"),
    ("host expression on a string", "kernel @k(%n: i32) {grid = (%n * \"s\", 1, 1)} {\n}\n", "1:34",
     "expected a host expression"),
    ("bad dim", "kernel @k(%x: gtensor<f32, 1>) {grid = (dim(%x), 1, 1)} {\n}\n", "1:41",
     "dim is written dim(%tensor_param, mode)"),
    ("dangling operator", "kernel @k(%n: i32) {grid = (%n * , 1, 1)} {\n}\n", "1:34", "expected an attribute value"),
    ("duplicate kernel", "kernel @k() {\n}\nkernel @k() {\n}\n", "3:1", "redefinition of kernel @k (first defined at 1:1)"),
    ("not a kernel", "hello\n", "1:1", "expected 'kernel', a name (#name) or end of input but found 'hello'"),
]


@pytest.mark.parametrize("name,text,where,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, text, where, message):
    with pytest.raises(IRSyntaxError) as info:
        parse_module(text, "f.tile")
    e = info.value
    line, column = map(int, where.split(":"))
    assert e.loc == Location("f.tile", line, column)
    assert str(e).startswith(f"f.tile:{where}: {message}"), str(e)
    assert e.message.startswith(message)
    assert isinstance(e, ValueError)
    # the source line and a caret under the column
    _, source, caret = str(e).split("\n")
    assert source == text.split("\n")[line - 1]
    assert caret == " " * (column - 1) + "^"


def test_error_count():
    assert len(ERRORS) >= 15


@given(st.data())
def test_mutated_text_raises_only_irsyntaxerror(data):
    """Random edits of a valid program either parse or raise IRSyntaxError — never a lark exception."""
    text = SPEC_EXAMPLE
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        piece = data.draw(st.sampled_from(list("{}()[]%,:=<>*+@\"0a.-/ \n") + ["kernel", "//", "%q", "foo.b"]))
        if edit == "delete":
            text = text[:pos] + text[pos + data.draw(st.integers(1, 5)):]
        elif edit == "insert":
            text = text[:pos] + piece + text[pos:]
        else:
            text = text[:pos] + piece + text[pos + 1:]
    try:
        m = parse_module(text, "fuzz.tile")
    except IRSyntaxError as e:
        assert e.loc.file == "fuzz.tile" and e.loc.line >= 1 and e.loc.column >= 1
        return
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed


# --------------------------------------------------------------------------------------------------------------
# Random modules: parse(print(m)) ≅ m and print is stable

dtypes = st.sampled_from(sorted(SCALARS)).map(SCALARS.__getitem__)
int_tuples = st.recursive(st.integers(1, 64), lambda ch: st.lists(ch, min_size=1, max_size=3).map(tuple),
                          max_leaves=6).filter(lambda t: isinstance(t, tuple))
shapes = st.one_of(st.integers(1, 4096), int_tuples)


def _strides_like(shape, draw):
    if isinstance(shape, int):
        return draw(st.integers(-8, 64))
    return tuple(_strides_like(s, draw) for s in shape)


@st.composite
def layouts(draw):
    shape = draw(shapes)
    return lc.Layout(shape, _strides_like(shape, draw))


COMPOSED = [lc.parse(t) for t in ("Sw<3,4,3> o 0 o (8,64):(64,1)", "Sw<2,4,3> o 0 o (8,32):(32,1)",
                                  "Sw<1,4,3> o 16 o (4,8):(8,1)")]
any_layouts = st.one_of(layouts(), st.sampled_from(COMPOSED))
types = st.one_of(
    dtypes,
    st.builds(GlobalTensorType, dtypes, st.integers(0, 4)),
    st.builds(GlobalViewType, dtypes, shapes),
    st.builds(FragmentType, dtypes, shapes),
    st.builds(TensorType, st.sampled_from(["smem", "rmem", "gmem"]), dtypes, any_layouts),
    st.builds(TensorMapType, dtypes, st.integers(1, 5), any_layouts),
    st.builds(BarrierType, st.integers(1, 8)),
)
RESERVED = {"true", "false", "inf", "nan"}
idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda w: w not in RESERVED)
cute_values = st.one_of(int_tuples, any_layouts, st.just(lc._),
                        st.lists(layouts(), min_size=1, max_size=3).map(tuple))
scalar_values = st.one_of(
    st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(max_size=8), idents.map(Word), cute_values)
op_values = st.recursive(
    scalar_values,
    lambda ch: st.one_of(st.lists(ch, max_size=3).map(TupleAttr),
                         # plain tuples that CuTe cannot write print (and read back) as tuple attributes
                         st.tuples(ch, st.floats(allow_nan=False))),
    max_leaves=6)
OP_NAMES = ["arith.add", "scf.for", "scf.if", "scf.yield", "gmem.load", "frag.reduce", "gpu.barrier", "x.y.z",
            "my_dialect.op_2"]
PREFIXES = ["v", "acc", "x.y", "_t", "0", "a_"]


def host_exprs(params, tensors=None):
    """Host expressions over ``params`` (for %p) and ``tensors`` (for dim(%t, m); default: ``params``)."""
    tensors = params if tensors is None else tensors
    base = st.integers(-5, 5000).map(Const)
    if params:
        base = st.one_of(base, st.sampled_from(params).map(ParamRef))
    if tensors:
        base = st.one_of(base, st.builds(Dim, st.sampled_from(tensors), st.integers(0, 3)))
    return st.recursive(base, lambda ch: st.one_of(st.builds(CDiv, ch, ch), st.builds(Mul, ch, ch),
                                                   st.builds(Add, ch, ch)), max_leaves=8)


def kernel_values(params):
    leaf = st.one_of(scalar_values, host_exprs(params))
    return st.recursive(leaf, lambda ch: st.lists(ch, max_size=3).map(tuple), max_leaves=6)


@st.composite
def modules(draw):
    kernels = []
    for kid in range(draw(st.integers(0, 2))):
        counter = itertools.count()

        def fresh():
            return draw(st.sampled_from(PREFIXES)) + str(next(counter))

        params = [Value(fresh(), draw(types)) for _ in range(draw(st.integers(0, 3)))]
        names = [p.name for p in params]
        attrs = {}
        if draw(st.booleans()):
            attrs["grid"] = tuple(draw(st.lists(host_exprs(names), min_size=1, max_size=3)))
        if draw(st.booleans()):
            attrs["block"] = tuple(draw(st.lists(st.integers(1, 1024), min_size=3, max_size=3)))
        for key in draw(st.lists(idents.filter(lambda k: k not in ("grid", "block")), max_size=2, unique=True)):
            attrs[key] = draw(kernel_values(names))

        def ops(visible, depth):
            out = []
            for _ in range(draw(st.integers(0, 4 if depth == 0 else 2))):
                operands = draw(st.lists(st.sampled_from(visible), max_size=3)) if visible else []
                op_attrs = draw(st.dictionaries(idents, op_values, max_size=3))
                results = [Value(fresh(), draw(types)) for _ in range(draw(st.integers(0, 2)))]
                regions = []
                if depth < 2:
                    for _ in range(draw(st.integers(0, 2))):
                        args = [Value(fresh(), draw(types)) for _ in range(draw(st.integers(0, 2)))]
                        regions.append(Region(args, ops(visible + args, depth + 1)))
                out.append(Op(draw(st.sampled_from(OP_NAMES)), operands, op_attrs, results, regions))
                visible = visible + results
            return out

        kernels.append(Kernel(f"k{kid}", params, attrs, Region([], ops(list(params), 0))))
    return Module(kernels)


# whole random modules (several kernels of nested regions) are the suite's slowest examples: at most 200 a run (the
# dev profile's 100 stay); the CI profile is not derandomized, so each run draws new ones
@given(modules())
@settings(max_examples=min(200, settings.default.max_examples))
def test_random_modules_round_trip(m):
    text = print_module(m)
    back = parse_module(text, "rand.tile")
    assert first_difference(m, back) is None, first_difference(m, back) + "\n" + text
    assert print_module(back) == text
    # every op and value got the location of its text
    lines = text.split("\n")
    for k in back.kernels:
        assert lines[k.loc.line - 1].startswith("kernel @")
        for op in walk(k.body):
            assert lines[op.loc.line - 1][op.loc.column - 1:].startswith(
                f"%{op.results[0].name}" if op.results else op.name)
            for r in op.results:
                assert lines[r.loc.line - 1][r.loc.column - 1:].startswith(f"%{r.name}")


@given(host_exprs(["a", "b"], ["x"]))
def test_host_expressions_print_parse_and_evaluate(e):
    text = f"kernel @k(%a: i32, %b: i32, %x: gtensor<f32, 4>) {{grid = ({e}, 1)}} {{\n}}\n"
    back = parse_module(text).kernels[0].attrs["grid"][0]
    assert back == e
    # the text, read as Python with the same precedence, gives the same value as evaluate
    env = {"a": 37, "b": 5, "x": np.zeros((2, 3, 4, 5))}
    py = str(e).replace("%", "")
    try:
        expected = eval(py, {"cdiv": lambda p, q: -(-p // q), "dim": lambda t, m: t.shape[m], **env})
    except ZeroDivisionError:  # the host expression names the division instead (HostExprError, a ValueError)
        with pytest.raises(HostExprError, match=r"divides by"):
            e.evaluate(env)
        return
    assert e.evaluate(env) == expected


@given(types)
def test_types_round_trip(t):
    text = print_type(t)
    back = parse_type(text)
    assert back == t and type(back) is type(t)
    assert print_type(back) == text


@given(op_values)
def test_attribute_values_round_trip(v):
    m = Module([Kernel("k", [], {}, Region([], [Op("a.b", [], {"v": v})]))])
    back = parse_module(print_module(m))
    assert structurally_equal(m, back), first_difference(m, back)
