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
    ("const does not fit f32", "  %r = arith.const {value = 1e39} : f32", "value 1e+39 does not fit f32: it rounds to inf"),
    ("attribute of another kind", "  %r = gpu.thread_id {dim = (x)} : i32", "attribute 'dim' must be one of x, y, z, not (x)"),
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
    ("slice past the end", "  %a = frag.splat %s : frag<f32>[8]\n  %b = frag.slice %a {offset = 6} : frag<f32>[4]",
     "values 6 … 9 are not all inside the operand's 8 values", BODY_LINE + 1),
    ("slice element type", "  %a = frag.splat %s : frag<f32>[8]\n  %b = frag.slice %a {offset = 0} : frag<bf16>[4]",
     "the result's element type bf16 differs from the operand's f32", BODY_LINE + 1),
    ("slice offset", "  %a = frag.splat %s : frag<f32>[8]\n  %b = frag.slice %a : frag<f32>[4]",
     "missing attribute 'offset'", BODY_LINE + 1),
    ("reduce across warps in a branch", "  %a = frag.splat %s : frag<f32>[8]\n  scf.if %p {\n"
                            "    %r = frag.reduce %a, %t {tv = [(128,8):(1,128)], tile = [(8,128)], mode = 1, kind = add} : frag<f32>[8]\n"
                            "    scf.yield\n  }",
     "a reduction across warps synchronizes the whole CTA, but it is inside scf.if at", BODY_LINE + 2),
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


# -- shared memory, mbarriers and TMA (the second increment) ---------------------------------------------------------

CORPUS_SMEM = [
    ("smem alloc type", "  %b = smem.alloc : rmem<f32>[(8,8):(8,1)]", "result type must be a smem tensor smem<T>[layout]"),
    ("smem alloc align below the swizzle repeat",
     "  %b = smem.alloc {align = 128} : smem<bf16>[Sw<3,4,3> o 0 o (8,64):(64,1)]",
     "align 128 is below the 1024-byte repeat of the layout's swizzle Sw<3,4,3>"),
    ("smem alloc align", "  %b = smem.alloc {align = 100} : smem<f32>[64:1]",
     "align must be a power of two from 16 to 1024, not 100"),
    ("smem alloc nested", "  scf.if %p {\n    %b = smem.alloc : smem<f32>[64:1]\n  }",
     "smem.alloc must be at the top level of the kernel body", BODY_LINE + 1),
    ("mbarrier alloc nested", "  scf.for %c0, %n, %c1 (%i: i32) {\n    %b = mbarrier.alloc {count = 1} : mbarrier<1>\n"
                              "    scf.yield\n  }",
     "mbarrier.alloc must be at the top level of the kernel body", BODY_LINE + 1),
    ("smem budget", "  %a = smem.alloc : smem<f32>[51200:1]\n  %b = smem.alloc : smem<f32>[10240:1]",
     "the CTA's shared memory needs 245760 bytes (alignment padding included), over the 232448 bytes (227 KiB) a "
     "Hopper CTA can have; the biggest allocations: %a 204800 B, %b 40960 B", BODY_LINE + 1),
    ("smem budget counts barriers",
     "  %a = smem.alloc : smem<f32>[58112:1]\n  %b = mbarrier.alloc {count = 1} : mbarrier<1>",
     "the CTA's shared memory needs 232456 bytes", BODY_LINE + 1),
    ("smem slice rank", "  %b = smem.alloc : smem<f32>[64:1]\n  %v = smem.slice %b, %c0 : smem<f32>[64:1]",
     "the view's layout 64:1 has rank 1: slicing its last mode needs rank >= 2", BODY_LINE + 1),
    ("smem slice type", "  %b = smem.alloc : smem<f32>[(8,8,2):(8,1,64)]\n"
                        "  %v = smem.slice %b, %t : smem<f32>[(8,8):(1,8)]",
     "result type must be smem<f32>[(8,8):(8,1)] (the layout sliced at (_, ..., _, i)), not smem<f32>[(8,8):(1,8)]",
     BODY_LINE + 1),
    ("smem slice keeps the swizzle", "  %b = smem.alloc : smem<f32>[Sw<3,4,3> o 0 o (64,32,2):(32,1,2048)]\n"
                                     "  %v = smem.slice %b, %t : smem<f32>[(64,32):(32,1)]",
     "result type must be smem<f32>[Sw<3,4,3> o 0 o (64,32):(32,1)]", BODY_LINE + 1),
    ("smem slice index", "  %b = smem.alloc : smem<f32>[(8,8,2):(8,1,64)]\n  %two = arith.add %c1, %c1 : i32\n"
                         "  %v = smem.slice %b, %s : smem<f32>[(8,8):(8,1)]",
     "the index must be i32, not f32", BODY_LINE + 2),
    ("smem slice constant index", "  %b = smem.alloc : smem<f32>[(8,8,1):(8,1,64)]\n"
                                  "  %v = smem.slice %b, %c1 : smem<f32>[(8,8):(8,1)]",
     "index 1 is outside the last mode's 1 entries", BODY_LINE + 1),
    ("smem load element type", "  %b = smem.alloc : smem<f32>[(16,8):(8,1)]\n"
                               "  %f = smem.load %b, %t {tv = [(128,1):(1,0)]} : frag<bf16>[1]",
     "fragment element type bf16 differs from the view's f32", BODY_LINE + 1),
    ("smem load tv outside", "  %b = smem.alloc : smem<f32>[(8,8):(8,1)]\n"
                             "  %f = smem.load %b, %t {tv = [(128,1):(1,0)]} : frag<f32>[1]",
     "tv (128,1):(1,0) reaches index 127 outside the view of 64 elements", BODY_LINE + 1),
    ("smem store of a scalar", "  %b = smem.alloc : smem<f32>[(16,8):(8,1)]\n"
                               "  smem.store %b, %t, %s {tv = [(128,1):(1,0)]}",
     "the stored value must be a frag, not f32", BODY_LINE + 1),
    ("mbarrier alloc count", "  %b = mbarrier.alloc {count = 3} : mbarrier<2>",
     "count 3 differs from the result type's 2 barriers"),
    ("mbarrier init arrivals", "  %b = mbarrier.alloc {count = 1} : mbarrier<1>\n  mbarrier.init %b, %c0 {arrivals = 0}",
     "arrivals must be from 1 to 1048575, not 0", BODY_LINE + 1),
    ("mbarrier index type", "  %b = mbarrier.alloc {count = 1} : mbarrier<1>\n  mbarrier.arrive %b, %s",
     "the barrier index must be i32, not f32", BODY_LINE + 1),
    ("mbarrier constant index", "  %b = mbarrier.alloc {count = 1} : mbarrier<1>\n  mbarrier.arrive %b, %c1",
     "barrier index 1 is outside %b's 1 barriers", BODY_LINE + 1),
    ("mbarrier wait parity type", "  %b = mbarrier.alloc {count = 1} : mbarrier<1>\n  mbarrier.wait %b, %c0, %s",
     "the parity must be i32 or i1, not f32", BODY_LINE + 1),
    ("mbarrier expect_tx bytes", "  %b = mbarrier.alloc {count = 1} : mbarrier<1>\n"
                                 "  mbarrier.arrive_expect_tx %b, %c0 {bytes = 0}",
     "bytes must be from 1 to 1048575 (a phase's tx range), not 0", BODY_LINE + 1),
    ("mbarrier operand", "  mbarrier.arrive %y, %c0", "the first operand must be an mbarrier array, not gtensor<f32, 2>"),
    ("store_wait read", "  tma.store_wait {pending = 0}", "missing attribute 'read'"),
    ("store_wait pending", "  tma.store_wait {pending = -1, read = true}", "pending must be >= 0, not -1"),
]


@pytest.mark.parametrize("case", CORPUS_SMEM, ids=[c[0] for c in CORPUS_SMEM])
def test_bad_smem_and_mbarrier_kernel_is_reported_at_its_op(case):
    test_bad_kernel_is_reported_at_its_op(case)


TMA_HEADER = ("kernel @k(%m: tmap<f32, 2>[Sw<3,4,3> o 0 o (64,32):(32,1)], %q: tmap<f32, 2>[(64,32):(32,1)], "
              "%s: f32) {grid = (1, 1, 1), block = (128, 1, 1)} {\n")
TMA_PRELUDE = """  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %bars = mbarrier.alloc {count = 1} : mbarrier<1>
  %sw = smem.alloc : smem<f32>[Sw<3,4,3> o 0 o (64,32):(32,1)]
  %pl = smem.alloc : smem<f32>[(64,32):(32,1)]
"""
TMA_LINE = 7
EXPECT = "  mbarrier.arrive_expect_tx %bars, %c0 {bytes = 8192}\n"

CORPUS_TMA = [
    ("tma dtype", "  %h = smem.alloc : smem<bf16>[Sw<3,4,3> o 0 o (64,32):(32,1)]\n" + EXPECT +
     "  tma.load %m, %h, %bars, %c0, %c0, %c0", "the smem view holds bf16 but the TMA map copies f32", TMA_LINE + 2),
    ("tma map swizzles, smem does not", EXPECT + "  tma.load %m, %pl, %bars, %c0, %c0, %c0",
     "the TMA map swizzles SW128 (Sw<3,4,3>) but the smem layout (64,32):(32,1) is not swizzled", TMA_LINE + 1),
    ("tma smem swizzles, map does not", "  tma.store %q, %sw, %c0, %c0",
     "the smem layout Sw<3,4,3> o 0 o (64,32):(32,1) is swizzled SW128 (Sw<3,4,3>) but the TMA map does not swizzle"),
    ("tma box layout", "  %cm = smem.alloc : smem<f32>[(64,32):(1,64)]\n  tma.store %q, %cm, %c0, %c0",
     "the smem layout (64,32):(1,64) differs from the TMA map's box (64,32):(32,1): a copy writes exactly the box "
     "layout", TMA_LINE + 1),
    ("tma coordinate count", "  tma.store %m, %sw, %c0", "a rank-2 map needs 2 coordinates (one per global mode), got 1"),
    ("tma coordinate type", "  tma.store %m, %sw, %c0, %s", "coordinates must be i32, not f32"),
    ("tma stage alignment", "  %ring = smem.alloc : smem<f32>[Sw<3,4,3> o 0 o (64,32,2):(32,1,2080)]\n"
                            "  %st = smem.slice %ring, %c1 : smem<f32>[Sw<3,4,3> o 0 o (64,32):(32,1)]\n" + EXPECT +
     "  tma.load %m, %st, %bars, %c0, %c0, %c0",
     "%st is only known to be 128-byte aligned but the TMA map needs 1024 (the SW128 pattern must start at phase 0)",
     TMA_LINE + 3),
    ("tma load barrier operand", "  tma.load %m, %sw, %s, %c0, %c0, %c0",
     "the third operand must be an mbarrier array or a pipeline (its full barriers), not f32"),
    ("expect_tx short of two loads", EXPECT + "  tma.load %m, %sw, %bars, %c0, %c0, %c0\n"
                                              "  tma.load %m, %sw, %bars, %c0, %c0, %c1",
     "expect_tx of 8192 bytes on %bars[%c0] but the tma.loads that complete on it deliver 16384 bytes (2 × 8192)"),
    ("tma load without expect_tx", "  tma.load %m, %sw, %bars, %c0, %c0, %c0",
     "tma.load completes on %bars[%c0] but no mbarrier.arrive_expect_tx on %bars[%c0] precedes it in this region"),
    ("expect_tx in another region", EXPECT + "  scf.if %p {\n    tma.load %m, %sw, %bars, %c0, %c0, %c0\n  }",
     "expect_tx of 8192 bytes on %bars[%c0] but no tma.load in this region completes on it", TMA_LINE),
    ("expect_tx without loads", EXPECT, "but no tma.load in this region completes on it"),
    ("tma prefetch coordinate count", "  tma.prefetch %m, %c0", "a rank-2 map needs 2 coordinates (one per global "
                                                                "mode), got 1"),
    ("tma prefetch coordinate type", "  tma.prefetch %m, %c0, %s", "coordinates must be i32, not f32"),
    ("tma prefetch of a smem view", "  tma.prefetch %sw, %c0, %c0",
     "the first operand must be a TMA map tmap<T, R>[box], not smem<f32>"),
    ("tma prefetch result", "  %r = tma.prefetch %m, %c0, %c0 : i32", "expects 0 results, got 1"),
]


def assert_reported_at(module, message: str, line: int) -> None:
    """verify(module) raises, and the first error holding ``message`` is at ``bad.tile:<line>:``."""
    with pytest.raises(VerifyError) as info:
        verify(module)
    errors = str(info.value).splitlines()
    hit = [e for e in errors if message in e]
    assert hit, errors
    assert hit[0].startswith(f"bad.tile:{line}:"), hit[0]


@pytest.mark.parametrize("case", CORPUS_TMA, ids=[c[0] for c in CORPUS_TMA])
def test_bad_tma_kernel_is_reported_at_its_op(case):
    _name, body, message, *line = case
    line = line[0] if line else TMA_LINE
    prelude = TMA_PRELUDE + ("  %t = gpu.thread_id {dim = x} : i32\n  %p = arith.cmp %t, %c0 {pred = eq} : i1\n"
                             if "%p" in body else "")
    line += 2 if "%p" in body else 0
    module = parse_module(TMA_HEADER + prelude + body + "\n}\n", file="bad.tile")
    assert_reported_at(module, message, line)


@pytest.mark.parametrize("box, message", [
    ("Sw<3,4,3> o 0 o (64,64):(64,1)", "the smem tile is 256 bytes along the contiguous global mode 1, more than one "
                                       "128-byte row of CU_TENSOR_MAP_SWIZZLE_128B"),
    ("64:1", "the box 64:1 has rank 1 but the map's global tensor has rank 2"),
    ("Sw<3,4,3> o 0 o (64,32):(64,1)", "the smem layout is not what TMA writes"),
    ("(8,300):(300,1)", "box dim 0 would be 300, over 256"),
])
def test_bad_tensor_map_parameter_is_reported_at_the_parameter(box, message):
    text = f"kernel @k(%n: i32,\n          %w: tmap<f32, 2>[{box}]) {{grid = (1, 1, 1), block = (32, 1, 1)}} {{\n}}\n"
    with pytest.raises(VerifyError) as info:
        verify(parse_module(text, file="bad.tile"))
    first = str(info.value).splitlines()[0]
    assert first.startswith("bad.tile:2:11: @k: parameter %w: "), first
    assert message in first, first


def test_the_tma_prelude_alone_verifies():
    verify(parse_module(TMA_HEADER + TMA_PRELUDE + "}\n", file="good.tile"))


# -- wgmma, warpgroup roles, pipelines (the third increment) -------------------------------------------------------

WG_HEADER = ("kernel @k(%x: gtensor<f32, 1>, %s: f32) {grid = (1, 1, 1), block = (384, 1, 1)} {\n")
WG_PRELUDE = """  %c0 = arith.const {value = 0} : i32
  %c1 = arith.const {value = 1} : i32
  %sa = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))]
  %sb = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))]
  %acc = frag.splat %s : frag<f32>[32]
  %pipe = pipeline.alloc {stages = 2, consumers = 4} : pipeline<2>
"""
WG_LINE = 8
A64 = "  %a = smem.tile %sa, %c0 {mode = 0, size = 64} : smem<bf16>[Sw<3,4,3> o 0 o (64,(64,1)):(64,(1,0))]\n"

CORPUS_WGMMA = [
    ("wgmma operands swapped in space", "  %d = wgmma.mma %acc, %sb, %acc : frag<f32>[32]",
     "A must be a smem view, not frag<f32>[32]"),
    ("wgmma dtype mix", "  %h = smem.alloc {align = 1024} : smem<f16>[Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))]\n"
                        + A64 + "  %d = wgmma.mma %a, %h, %acc : frag<f32>[32]",
     "A holds bf16 but B holds f16: PTX's wgmma multiplies operands of one type (only e4m3 and e5m2 mix)", WG_LINE + 2),
    ("wgmma f32 operands", "  %f = smem.alloc : smem<f32>[(64,16):(16,1)]\n  %d = wgmma.mma %f, %f, %acc : frag<f32>[32]",
     "A holds f32; wgmma reads f16, bf16, e4m3, e5m2 from shared memory", WG_LINE + 1),
    ("wgmma M not 64-row blocks",
     "  %a = smem.tile %sa, %c0 {mode = 0, size = 32} : smem<bf16>[Sw<3,4,3> o 0 o (32,(64,1)):(64,(1,0))]\n"
     "  %d = wgmma.mma %a, %sb, %acc : frag<f32>[32]",
     "A has M = 32 rows; wgmma computes 64-row blocks", WG_LINE + 1),
    ("wgmma accumulator size", A64 + "  %z = frag.splat %s : frag<f32>[16]\n  %d = wgmma.mma %a, %sb, %z : frag<f32>[16]",
     "the accumulator frag<f32>[16] has 16 values per thread but an 64 x 64 tile needs 32 (N/2 = 32 per 64-row "
     "block, 1 blocks)", WG_LINE + 2),
    ("wgmma accumulator type", A64 + "  %i = arith.const {value = 0} : i32\n  %z = frag.splat %i : frag<i32>[32]\n"
                                     "  %d = wgmma.mma %a, %sb, %z : frag<i32>[32]",
     "bf16 inputs accumulate in frag<f32> (PTX's wgmma), not frag<i32>[32]", WG_LINE + 3),
    ("wgmma K mismatch", "  %k = smem.alloc {align = 1024} : smem<bf16>[Sw<2,4,3> o 0 o ((8,8),(32,1)):((32,256),(1,0))]\n"
                         + A64 + "  %d = wgmma.mma %a, %k, %acc : frag<f32>[32]", "A has K = 64 but B has K = 32",
     WG_LINE + 2),
    ("wgmma N not legal", "  %n = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o ((4,1),(64,1)):((64,256),(1,0))]\n"
                          + A64 + "  %z = frag.splat %s : frag<f32>[2]\n  %d = wgmma.mma %a, %n, %z : frag<f32>[2]",
     "B has N = 4 rows; wgmma's N is a multiple of 8 from 8 to 256", WG_LINE + 3),
    ("wgmma layout no descriptor", "  %r = smem.alloc : smem<bf16>[(64,64):(64,1)]\n"
                                   "  %d = wgmma.mma %r, %sb, %acc : frag<f32>[32]",
     "A's layout (64,64):(64,1) is no wgmma operand: K-major:", WG_LINE + 1),
    ("wgmma misaligned base", "  %u = smem.alloc {align = 128} : smem<bf16>[(64,16):(16,1)]\n"
                              "  %v = smem.alloc {align = 128} : smem<bf16>[Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))]",
     "align 128 is below the 1024-byte repeat of the layout's swizzle", WG_LINE + 1),
    ("wgmma wait pending", "  wgmma.wait {pending = 9}", "pending must be from 0 to 7"),
    ("wgmma wait operand", "  %w = wgmma.wait %s {pending = 0} : f32",
     "the operands are accumulator fragments (frag<f32> / frag<f16>), not f32"),
    ("wgmma wait result", "  %w = wgmma.wait %acc {pending = 0} : frag<f32>[16]",
     "result type frag<f32>[16] must be its operand's frag<f32>[32]: the values pass through"),
    ("smem.tile size", "  %a = smem.tile %sa, %c0 {mode = 0, size = 48} : smem<bf16>[(48):(1)]",
     "size 48 does not divide mode 0's 128 entries"),
    ("smem.tile mode", "  %a = smem.tile %sa, %c0 {mode = 2, size = 8} : smem<bf16>[(8):(1)]",
     "mode 2 is outside the view's 2 modes"),
    ("smem.permute order", "  %p = smem.permute %sa {order = (0, 0)} : smem<bf16>[(8):(1)]",
     "order (0, 0) is not a permutation of the view's 2 modes"),
    ("smem.permute type", "  %p = smem.permute %sa {order = (1, 0)} : smem<bf16>[Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))]",
     "result type must be smem<bf16>[Sw<3,4,3> o 0 o ((64,1),(8,16)):((1,0),(64,512))]"),
    ("roles count mismatch", "  gpu.roles {names = (p, c), warpgroups = (1, 1), maxnreg = (40, 232)} {\n  } {\n  }",
     "the roles span 2 warpgroups = 256 threads but the CTA has 384"),
    ("roles entries", "  gpu.roles {names = (p, c), warpgroups = (1, 2), maxnreg = (40)} {\n  } {\n  }",
     "maxnreg has 1 entries but the op has 2 role regions"),
    ("roles register step", "  gpu.roles {names = (p, c), warpgroups = (1, 2), maxnreg = (41, 232)} {\n  } {\n  }",
     "maxnreg 41 is not a multiple of 8 from 24 to 256"),
    ("roles register file", "  gpu.roles {names = (p, c), warpgroups = (1, 2), maxnreg = (240, 240)} {\n  } {\n  }",
     "the roles ask for 128 threads × 240 + 256 threads × 240 = 92160 registers, more than the 64512 a CTA of 384 "
     "threads launches with (168 per thread)"),
    # the SM's 65536, over what 384 threads launch with (168 each): the consumers' inc would wait forever
    ("roles launch pool", "  gpu.roles {names = (p, c), warpgroups = (1, 2), maxnreg = (32, 240)} {\n  } {\n  }",
     "the roles ask for 128 threads × 32 + 256 threads × 240 = 65536 registers, more than the 64512 a CTA of 384 "
     "threads launches with (168 per thread): setmaxnreg.inc would wait forever"),
    ("roles names", "  gpu.roles {names = (p, p), warpgroups = (1, 2), maxnreg = (40, 232)} {\n  } {\n  }",
     "names must be 2 distinct words"),
    ("barrier.cta in a role",
     "  gpu.roles {names = (p, c), warpgroups = (1, 2), maxnreg = (40, 232)} {\n    barrier.cta\n  } {\n  }",
     "barrier.cta inside a gpu.roles region waits for threads of other roles", WG_LINE + 1),
    ("named barrier id", "  barrier.named {id = 0, threads = 256}", "id must be from 1 to 15 (0 is the CTA barrier)"),
    ("named barrier threads", "  barrier.named {id = 1, threads = 100}", "threads must be a positive multiple of 32"),
    ("pipeline stages", "  %q = pipeline.alloc {stages = 3, consumers = 4} : pipeline<2>",
     "stages 3 differs from the result type's 2"),
    ("pipeline acquire bytes", "  %st = pipeline.acquire %pipe, %c0 {bytes = 0} : i32",
     "bytes must be from 1 to 1048575"),
    ("pipeline wait index type", "  %st = pipeline.wait %pipe, %s : i32", "the iteration index must be i32, not f32"),
    ("pipeline release stage", "  %c5 = arith.const {value = 5} : i32\n  pipeline.release %pipe, %c5",
     "stage 5 is outside the pipeline's 2 stages", WG_LINE + 1),
    ("pipeline operand", "  %st = pipeline.wait %sa, %c0 : i32", "the first operand must be a pipeline<S>"),
    ("wgmma K-half at an unknown offset", A64 + "  %t = gpu.thread_id {dim = x} : i32\n"
     "  %ah = smem.tile %a, %c0 {mode = 1, size = 32} : smem<bf16>[Sw<3,4,3> o 0 o (64,32):(64,1)]\n"
     "  %bh = smem.tile %sb, %t {mode = 1, size = 32} : smem<bf16>[Sw<3,4,3> o 0 o ((8,8),32):((64,512),1)]\n"
     "  %z = frag.splat %s : frag<f32>[32]\n  %d = wgmma.mma %ah, %bh, %z : frag<f32>[32]",
     "%bh is only known to be 64-byte aligned but its wgmma descriptors need 1024", WG_LINE + 5),
]


@pytest.mark.parametrize("case", CORPUS_WGMMA, ids=[c[0] for c in CORPUS_WGMMA])
def test_bad_wgmma_roles_pipeline_kernel_is_reported_at_its_op(case):
    _name, body, message, *line = case
    line = line[0] if line else WG_LINE
    module = parse_module(WG_HEADER + WG_PRELUDE + body + "\n}\n", file="bad.tile")
    assert_reported_at(module, message, line)


def test_a_k_half_inside_the_swizzle_row_verifies():
    """The second K-half of a K-major SW128 tile starts 64 bytes into each 128-byte row: its descriptors carry the
    offset in the start field (base_offset 0), as CUTLASS advances K inside an atom."""
    body = (A64 + "  %ah = smem.tile %a, %c1 {mode = 1, size = 32} : smem<bf16>[Sw<3,4,3> o 0 o (64,32):(64,1)]\n"
            "  %bh = smem.tile %sb, %c1 {mode = 1, size = 32} : smem<bf16>[Sw<3,4,3> o 0 o ((8,8),32):((64,512),1)]\n"
            "  wgmma.fence\n  %d = wgmma.mma %ah, %bh, %acc : frag<f32>[32]\n")
    verify(parse_module(WG_HEADER + WG_PRELUDE + body + "}\n", file="good.tile"))


def test_the_wgmma_prelude_alone_verifies():
    verify(parse_module(WG_HEADER + WG_PRELUDE + A64 + "  wgmma.fence\n  %d = wgmma.mma %a, %sb, %acc : frag<f32>[32]\n}\n",
                        file="good.tile"))


# -- the RS form of wgmma (A in registers) ---------------------------------------------------------------------------

RS_A = "  %h = arith.cast %s : bf16\n  %fa = frag.splat %h : frag<bf16>[32]\n"
RS_LINE = WG_LINE + 2  # the first line after RS_A

CORPUS_WGMMA_RS = [
    ("rs A in smem", RS_A + "  %d = wgmma.mma_rs %sb, %sb, %acc : frag<f32>[32]",
     "A must be a register fragment frag<T>[S] (the RS form), not smem<bf16>"),
    ("rs A f32", RS_A + "  %d = wgmma.mma_rs %acc, %sb, %acc : frag<f32>[32]",
     "A holds f32; wgmma takes f16, bf16, e4m3, e5m2 A fragments"),
    ("rs dtype mix", RS_A + "  %g = arith.cast %s : f16\n  %fg = frag.splat %g : frag<f16>[32]\n"
                            "  %d = wgmma.mma_rs %fg, %sb, %acc : frag<f32>[32]",
     "A holds f16 but B holds bf16: PTX's wgmma multiplies operands of one type (only e4m3 and e5m2 mix)", RS_LINE + 2),
    ("rs B in registers", RS_A + "  %d = wgmma.mma_rs %fa, %fa, %acc : frag<f32>[32]",
     "B must be a smem view, not frag<bf16>[32]"),
    ("rs K not whole k-steps", RS_A + "  %k8 = smem.alloc : smem<bf16>[(64,8):(8,1)]\n"
                                      "  %d = wgmma.mma_rs %fa, %k8, %acc : frag<f32>[32]",
     "K = 8 is not a multiple of the 16-element k-step of bf16 wgmma", RS_LINE + 1),
    ("rs fragment size", RS_A + "  %f24 = frag.splat %h : frag<bf16>[24]\n"
                                "  %d = wgmma.mma_rs %f24, %sb, %acc : frag<f32>[32]",
     "the A fragment frag<bf16>[24] has 24 values per thread but a 64 x 64 block of bf16 takes 32 (8 per k-step, 4 "
     "k-steps): the fragment must hold whole 64-row blocks", RS_LINE + 1),
    ("rs accumulator of one block for two", RS_A + "  %f64 = frag.splat %h : frag<bf16>[64]\n"
                                                   "  %d = wgmma.mma_rs %f64, %sb, %acc : frag<f32>[32]",
     "the accumulator frag<f32>[32] has 32 values per thread but an 128 x 64 tile needs 64 (N/2 = 32 per 64-row "
     "block, 2 blocks)", RS_LINE + 1),
    ("rs accumulator type", RS_A + "  %z = frag.splat %c0 : frag<i32>[32]\n"
                                   "  %d = wgmma.mma_rs %fa, %sb, %z : frag<i32>[32]",
     "bf16 inputs accumulate in frag<f32> (PTX's wgmma), not frag<i32>[32]", RS_LINE + 1),
    ("rs result type", RS_A + "  %d = wgmma.mma_rs %fa, %sb, %acc : frag<f32>[16]",
     "the result type frag<f32>[16] must be the accumulator's frag<f32>[32]"),
    ("rs B layout no descriptor", RS_A + "  %r = smem.alloc : smem<bf16>[(64,64):(64,1)]\n"
                                         "  %d = wgmma.mma_rs %fa, %r, %acc : frag<f32>[32]",
     "B's layout (64,64):(64,1) is no wgmma operand: K-major:", RS_LINE + 1),
    ("rs fp8 B MN-major", "  %e = arith.cast %s : e4m3\n  %fe = frag.splat %e : frag<e4m3>[32]\n"
                          "  %b8 = smem.alloc {align = 1024} : smem<e4m3>[Sw<3,4,3> o 0 o ((128,1),(8,8)):((1,0),(128,1024))]\n"
                          "  %a64 = frag.splat %s : frag<f32>[64]\n"
                          "  %d = wgmma.mma_rs %fe, %b8, %a64 : frag<f32>[64]",
     "B's layout Sw<3,4,3> o 0 o ((128,1),(8,8)):((1,0),(128,1024)) is no wgmma operand: K-major:", WG_LINE + 4),
    ("rs B misaligned stage", RS_A + "  %ring = smem.alloc {align = 1024} : "
                                     "smem<bf16>[Sw<3,4,3> o 0 o ((8,8),(64,1),2):((64,512),(1,0),4160)]\n"
                                     "  %st = smem.slice %ring, %c1 : smem<bf16>[Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))]\n"
                                     "  %d = wgmma.mma_rs %fa, %st, %acc : frag<f32>[32]",
     "%st is only known to be 128-byte aligned but its wgmma descriptors need 1024", RS_LINE + 2),
]


@pytest.mark.parametrize("case", CORPUS_WGMMA_RS, ids=[c[0] for c in CORPUS_WGMMA_RS])
def test_bad_wgmma_rs_kernel_is_reported_at_its_op(case):
    _name, body, message, *line = case
    line = line[0] if line else RS_LINE
    module = parse_module(WG_HEADER + WG_PRELUDE + body + "\n}\n", file="bad.tile")
    assert_reported_at(module, message, line)


def test_the_wgmma_rs_prelude_alone_verifies():
    verify(parse_module(WG_HEADER + WG_PRELUDE + RS_A + "  wgmma.fence\n  %d = wgmma.mma_rs %fa, %sb, %acc : frag<f32>[32]\n}\n",
                        file="good.tile"))


# -- smem.stmatrix ---------------------------------------------------------------------------------------------------

ST_PRELUDE = """  %row = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o (64,64):(64,1)]
  %h = arith.cast %s : bf16
  %f = frag.splat %h : frag<bf16>[32]
  %t = gpu.thread_id {dim = x} : i32
"""
ST_LINE = 6
ACC = "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))"   # accumulator_tv(64)

CORPUS_STMATRIX = [
    ("stmatrix 32-bit", "  %w = smem.alloc : smem<f32>[(64,64):(64,1)]\n  %g = frag.splat %s : frag<f32>[32]\n"
                        f"  smem.stmatrix %w, %t, %g {{tv = [{ACC}], num = 4, trans = false}}",
     "stmatrix stores 16-bit elements (.b16), not f32", ST_LINE + 2),
    ("stmatrix element type", f"  %g = frag.splat %s : frag<f32>[32]\n"
                              f"  smem.stmatrix %row, %t, %g {{tv = [{ACC}], num = 4, trans = false}}",
     "fragment element type f32 differs from the view's bf16", ST_LINE + 1),
    ("stmatrix num", f"  smem.stmatrix %row, %t, %f {{tv = [{ACC}], num = 8, trans = false}}",
     "num must be 1, 2 or 4 (stmatrix .x1, .x2, .x4), not 8"),
    ("stmatrix trans missing", f"  smem.stmatrix %row, %t, %f {{tv = [{ACC}], num = 4}}", "missing attribute 'trans'"),
    ("stmatrix tv values", "  smem.stmatrix %row, %t, %f {tv = [(128,16):(16,1)], num = 4, trans = false}",
     "tv's value mode 16:1 has 16 values but the fragment 32 has 32"),
    ("stmatrix whole instructions", "  %g = frag.splat %h : frag<bf16>[12]\n"
                                    "  smem.stmatrix %row, %t, %g {tv = [(128,12):(12,1)], num = 4, trans = false}",
     "tv's value mode has 12 values per thread but stmatrix.x4 stores 8 per lane and instruction", ST_LINE + 1),
    ("stmatrix whole warps", "  %g = frag.splat %h : frag<bf16>[8]\n"
                             "  smem.stmatrix %row, %t, %g {tv = [(16,8):(8,1)], num = 4, trans = false}",
     "has 16 threads; stmatrix is executed by whole warps (a multiple of 32)", ST_LINE + 1),
    ("stmatrix rows not contiguous", "  %col = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o (64,64):(1,64)]\n"
                                     f"  smem.stmatrix %col, %t, %f {{tv = [{ACC}], num = 4, trans = false}}",
     "is no stmatrix.x4 tiling of Sw<3,4,3> o 0 o (64,64):(1,64): warp 0, stmatrix 0: row 0 of matrix 0 is not 16 "
     "contiguous bytes", ST_LINE + 1),
    ("stmatrix rows misaligned", "  %pad = smem.alloc : smem<bf16>[(64,64):(68,1)]\n"
                                 f"  smem.stmatrix %pad, %t, %f {{tv = [{ACC}], num = 4, trans = false}}",
     "warp 0, stmatrix 0: row 1 of matrix 0 starts at byte 136, not on a 16-byte boundary", ST_LINE + 1),
    ("stmatrix view alignment", "  %ring = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o (64,64,2):(64,1,4160)]\n"
                                "  %st = smem.slice %ring, %t : smem<bf16>[Sw<3,4,3> o 0 o (64,64):(64,1)]\n"
                                f"  smem.stmatrix %st, %t, %f {{tv = [{ACC}], num = 4, trans = false}}",
     "%st is only known to be 128-byte aligned but stmatrix rows need 1024", ST_LINE + 2),
]


@pytest.mark.parametrize("case", CORPUS_STMATRIX, ids=[c[0] for c in CORPUS_STMATRIX])
def test_bad_stmatrix_kernel_is_reported_at_its_op(case):
    _name, body, message, *line = case
    line = line[0] if line else ST_LINE
    module = parse_module(WG_HEADER + ST_PRELUDE + body + "\n}\n", file="bad.tile")
    assert_reported_at(module, message, line)


def test_the_stmatrix_prelude_alone_verifies():
    verify(parse_module(WG_HEADER + ST_PRELUDE + f"  smem.stmatrix %row, %t, %f {{tv = [{ACC}], num = 4, "
                        "trans = false}\n}\n", file="good.tile"))
