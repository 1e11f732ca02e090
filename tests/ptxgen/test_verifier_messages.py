"""Verifier rules the spec states and their messages (spec/tile-ir.md §4.10, §5): the wgmma.fence rule, each input /
accumulator pair PTX's wgmma refuses, attribute keys (a misspelt key is named at the typo, with a did-you-mean), hints
that never suggest something illegal, attribute values and types printed in the IR's own notation, and TMA tiling
advice that proposes a box."""
import pathlib

import pytest

import layoutc as lc
from layoutc.hopper import DescriptorError, DescriptorIterator, TmaError, gmma_smem_layout, make_tma_params
from ptxgen.ir.core import walk
from ptxgen.ir.ops import OPS
from ptxgen.ir.ops.smem import alignment_advice
from ptxgen.ir.text import parse_module
from ptxgen.kernels import tma_copy
from ptxgen.kernels.gemm import TILE_FILE, GemmConfig, build
from ptxgen.kernels.gemm.simple import SimpleGemmConfig
from ptxgen.kernels.gemm.simple import build as build_simple
from ptxgen.verify import VerifyError, verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
GEMM = (EXAMPLES / "gemm.tile").read_text()
FENCE = "      wgmma.fence\n"


def errors(text: str, file: str = "m.tile") -> list:
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, file=file))
    return str(e.value).splitlines()


def gemm_kernel(dtype: str = "bf16", **fields):
    """The library's persistent GEMM of ``GemmConfig(dtype, **fields)``."""
    return build(GemmConfig(dtype, **fields))


# -- the wgmma.fence rule ------------------------------------------------------------------------------------------------

def test_the_examples_fence_inside_their_loops_and_verify():
    verify(parse_module(GEMM, file="gemm.tile"))
    verify(parse_module((EXAMPLES / "gemm_hopper.tile").read_text(), file="gemm_hopper.tile"))


def test_a_wgmma_without_any_fence_is_named():
    assert errors(GEMM.replace(FENCE, ""), "gemm.tile") == [
        "gemm.tile:59:7: wgmma.mma: no wgmma.fence is executed before it on some path from the kernel's start: the "
        "first wgmma of a sequence needs one (after the last register write of its accumulator)"]


def test_a_fence_before_the_accumulator_is_written_does_not_count():
    text = GEMM.replace(FENCE, "").replace("    %init = frag.splat", "    wgmma.fence\n    %init = frag.splat")
    assert errors(text, "gemm.tile") == [
        "gemm.tile:60:7: wgmma.mma: its accumulator %acc_in was written by frag.splat at gemm.tile:54:5 after the "
        "last wgmma.fence: a wgmma.fence must come between that register access and the wgmma (only wgmmas "
        "accumulating into each other's result need none)"]


def test_a_fence_before_the_loop_covers_the_chain_of_wgmmas_through_it():
    """PTX: wgmmas accumulating into each other's result need no fence between them (commit, wait and the back edge
    touch no register), so one fence after the accumulator's init covers every iteration."""
    verify(parse_module(GEMM.replace(FENCE, "").replace("    %acc = scf.for", "    wgmma.fence\n    %acc = scf.for"),
                        file="gemm.tile"))


def test_a_fence_in_one_branch_only_is_not_enough():
    text = GEMM.replace(FENCE, "      %first = arith.cmp %kt2, %c0 {pred = eq} : i1\n"
                               "      scf.if %first {\n        wgmma.fence\n      }\n")
    assert errors(text, "gemm.tile")[0].startswith(
        "gemm.tile:63:7: wgmma.mma: no wgmma.fence is executed before it on some path from the kernel's start")


def test_a_read_of_the_accumulator_between_chained_wgmmas_needs_a_fence():
    """Between the loop's wgmmas, the carried accumulator is cast (a register read by another instruction): the next
    iteration's wgmma needs a fence after it; the example's fence inside the loop is after it."""
    text = GEMM.replace(FENCE, "").replace("    %acc = scf.for", "    wgmma.fence\n    %acc = scf.for").replace(
        "      pipeline.release %pipe, %s2\n",
        "      pipeline.release %pipe, %s2\n      %peek = frag.cast %acc_done : frag<bf16>[64]\n")
    assert errors(text, "gemm.tile") == [
        "gemm.tile:60:7: wgmma.mma: its accumulator %acc_in was read by frag.cast at gemm.tile:64:7 after the last "
        "wgmma.fence: a wgmma.fence must come between that register access and the wgmma (only wgmmas accumulating "
        "into each other's result need none)"]
    verify(parse_module(GEMM.replace("      pipeline.release %pipe, %s2\n",
                                     "      pipeline.release %pipe, %s2\n      %peek = frag.cast %acc_done : "
                                     "frag<bf16>[64]\n"), file="gemm.tile"))


RS = """kernel @k(%s: f32) {grid = (1, 1, 1), block = (128, 1, 1)} {
  %b = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))]
  %acc = frag.splat %s : frag<f32>[32]
  %h = arith.cast %s : bf16
FIRST
  %d = wgmma.mma_rs %fa, %b, %acc : frag<f32>[32]
}
"""


def test_an_rs_a_fragment_written_after_the_fence_is_named():
    assert errors(RS.replace("FIRST", "  wgmma.fence\n  %fa = frag.splat %h : frag<bf16>[32]")) == [
        "m.tile:7:3: wgmma.mma_rs: its A fragment %fa was written by frag.splat at m.tile:6:3 after the last "
        "wgmma.fence: a wgmma.fence must come between that register access and the wgmma (only wgmmas accumulating "
        "into each other's result need none)"]
    verify(parse_module(RS.replace("FIRST", "  %fa = frag.splat %h : frag<bf16>[32]\n  wgmma.fence"), file="m.tile"))


def _regions(region):
    yield region
    for op in region.ops:
        for inner in op.regions:
            yield from _regions(inner)


@pytest.mark.parametrize("args", [dict(), dict(dtype="e4m3", bn=128, promote=1), dict(dtype="e4m3", promote=4),
                                  dict(bn=128, epilogue="tma", overlap=2, stages=2), dict(streamk=True, stages=2),
                                  dict(a_major="MN", b_major="MN", bn=128), dict(cluster=2, epilogue="tma", bn=128)],
                         ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()) or "default")
def test_every_fence_of_the_flagship_builder_is_needed(args):
    """Each builder variant verifies, and without any one of its wgmma.fences it does not."""
    kernel = gemm_kernel(**args)
    verify(kernel)
    body = (kernel.kernels[0] if hasattr(kernel, "kernels") else kernel).body
    sites = [(r, i) for r in _regions(body) for i, op in enumerate(r.ops) if op.name == "wgmma.fence"]
    assert sites
    for region, index in sites:
        fence = region.ops.pop(index)
        with pytest.raises(VerifyError, match="wgmma.fence"):
            verify(kernel)
        region.ops.insert(index, fence)


# -- input and accumulator types (PTX ISA, wgmma.mma_async shapes and types) ----------------------------------------------

def wgmma_kernel(dtype: str, acc: str, form: str = "ss") -> str:
    k = 64 if dtype in ("f16", "bf16") else 128
    layout = lc.to_str(gmma_smem_layout("K", "SW128", dtype, (64, k)))
    a = (f"  %a = smem.alloc {{align = 1024}} : smem<{dtype}>[{layout}]\n" if form == "ss" else
         f"  %x = arith.cast %s : {dtype}\n  %a = frag.splat %x : frag<{dtype}>[{64 * k // 128}]\n")
    op = "wgmma.mma" if form == "ss" else "wgmma.mma_rs"
    return (f"kernel @k(%s: f32) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{\n{a}"
            f"  %b = smem.alloc {{align = 1024}} : smem<{dtype}>[{layout}]\n"
            f"  %z = arith.cast %s : {acc}\n  %c = frag.splat %z : frag<{acc}>[32]\n  wgmma.fence\n"
            f"  %d = {op} %a, %b, %c : frag<{acc}>[32]\n}}\n")


LEGAL = [("f16", "f32"), ("f16", "f16"), ("bf16", "f32"), ("e4m3", "f32"), ("e4m3", "f16"), ("e5m2", "f32"),
         ("e5m2", "f16")]
ILLEGAL = [
    ("bf16", "f16", "bf16 inputs need an f32 accumulator (frag<f32>), not frag<f16>[32]: PTX's wgmma takes an f16 "
                    "accumulator only with f16, e4m3 or e5m2 inputs"),
    ("bf16", "bf16", "bf16 inputs accumulate in frag<f32> (PTX's wgmma), not frag<bf16>[32]"),
    ("bf16", "i32", "bf16 inputs accumulate in frag<f32> (PTX's wgmma), not frag<i32>[32]"),
    ("f16", "bf16", "f16 inputs accumulate in frag<f32> or frag<f16> (PTX's wgmma), not frag<bf16>[32]"),
    ("f16", "i32", "f16 inputs accumulate in frag<f32> or frag<f16> (PTX's wgmma), not frag<i32>[32]"),
    ("e4m3", "bf16", "e4m3 inputs accumulate in frag<f32> or frag<f16> (PTX's wgmma), not frag<bf16>[32]"),
    ("e5m2", "i32", "e5m2 inputs accumulate in frag<f32> or frag<f16> (PTX's wgmma), not frag<i32>[32]"),
]


@pytest.mark.parametrize("form", ["ss", "rs"])
@pytest.mark.parametrize("dtype, acc", LEGAL)
def test_the_pairs_ptx_allows_verify(dtype, acc, form):
    verify(parse_module(wgmma_kernel(dtype, acc, form), file="m.tile"))


@pytest.mark.parametrize("form", ["ss", "rs"])
@pytest.mark.parametrize("dtype, acc, message", ILLEGAL, ids=[f"{d}-{a}" for d, a, _m in ILLEGAL])
def test_each_pair_ptx_refuses_says_why(dtype, acc, message, form):
    line = 7 if form == "ss" else 8
    op = "wgmma.mma" if form == "ss" else "wgmma.mma_rs"
    assert errors(wgmma_kernel(dtype, acc, form)) == [f"m.tile:{line}:3: {op}: {message}"]


def test_mixed_operand_types_say_what_ptx_allows():
    text = wgmma_kernel("bf16", "f32").replace("%b = smem.alloc {align = 1024} : smem<bf16>",
                                               "%b = smem.alloc {align = 1024} : smem<f16>")
    assert errors(text) == ["m.tile:7:3: wgmma.mma: A holds bf16 but B holds f16: PTX's wgmma multiplies operands of "
                            "one type (only e4m3 and e5m2 mix)"]
    text = wgmma_kernel("e4m3", "f32").replace("%b = smem.alloc {align = 1024} : smem<e4m3>",
                                               "%b = smem.alloc {align = 1024} : smem<e5m2>")
    assert errors(text) == ["m.tile:7:3: wgmma.mma: A holds e4m3 but B holds e5m2: PTX allows mixing e4m3 and e5m2, "
                            "but this wgmma op takes one element type for both operands"]


# -- attribute keys ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, message", [
    ("{bytes = 32768}", "{byte = 32768}",
     "gemm.tile:40:9: pipeline.acquire: unknown attribute 'byte' (did you mean 'bytes'?)"),
    ("{stages = 4, consumers = 8}", "{stages = 4, consumer = 8}",
     "gemm.tile:18:3: pipeline.alloc: unknown attribute 'consumer' (did you mean 'consumers'?)"),
    ("%sa = smem.alloc {align = 1024}", "%sa = smem.alloc {aling = 1024}",
     "gemm.tile:16:3: smem.alloc: unknown attribute 'aling' (did you mean 'align'?)"),
    ("%thread = gpu.thread_id {dim = x}", "%thread = gpu.thread_id {dimm = x}",
     "gemm.tile:19:3: gpu.thread_id: unknown attribute 'dimm' (did you mean 'dim'?)"),
    ("{mode = 0, size = 64}", "{mode = 0, sizes = 64}",
     "gemm.tile:57:7: smem.tile: unknown attribute 'sizes' (did you mean 'size'?)"),
    ("{pending = 0} : frag<f32>[64]", "{pendng = 0} : frag<f32>[64]",
     "gemm.tile:62:7: wgmma.wait: unknown attribute 'pendng' (did you mean 'pending'?)"),
    ("{pending = 0} : frag<f32>[64]", "{pending = 0, read = true} : frag<f32>[64]",
     "gemm.tile:62:7: wgmma.wait: unknown attribute 'read' (wgmma.wait takes pending)"),
    ("      wgmma.fence\n", "      wgmma.fence {pending = 0}\n",
     "gemm.tile:59:7: wgmma.fence: unknown attribute 'pending' (wgmma.fence takes no attributes)"),
    ("      wgmma.commit\n", "      wgmma.comit\n",
     "gemm.tile:61:7: wgmma.comit: unknown op 'wgmma.comit' (did you mean 'wgmma.commit'?)"),
    ("{tv = wgmma_acc(m = 128, n = 128, warpgroups = 2)}", "{tvv = wgmma_acc(m = 128, n = 128, warpgroups = 2)}",
     "gemm.tile:70:5: gmem.store: unknown attribute 'tvv' (did you mean 'tv'?)"),
])
def test_a_misspelt_key_is_named_at_the_typo_and_nothing_else(old, new, message):
    assert GEMM.count(old) == 1
    assert errors(GEMM.replace(old, new), "gemm.tile") == [message]


def test_a_missing_required_key_without_a_typo_is_named():
    assert errors(GEMM.replace("{bytes = 32768}", ""), "gemm.tile") == [
        "gemm.tile:40:9: pipeline.acquire: missing attribute 'bytes'"]


def test_every_op_of_every_example_uses_declared_keys_only():
    """The declarations are complete: no key of any example's op (text or builder) is unknown."""
    kernels = [parse_module(p.read_text(), file=p.name) for p in sorted(EXAMPLES.glob("*.tile"))]
    kernels += [build(TILE_FILE), gemm_kernel("e4m3", promote=4), gemm_kernel(streamk=True, stages=2),
                gemm_kernel(bn=192, cluster=2, epilogue="rows", epilogue_split=3),
                gemm_kernel(bn=16, stages=8, streamk=True, streamk_every_sm=True, bias=True),
                tma_copy.build("bf16"), build_simple(SimpleGemmConfig("f16", 64, 2))]
    for module in kernels:
        for k in getattr(module, "kernels", [module]):
            for op in walk(k.body):
                d = OPS[op.name]
                assert set(op.attrs) <= set(d.required_attrs + d.optional_attrs), (op.name, op.attrs)
                assert set(d.required_attrs) <= set(op.attrs), (op.name, op.attrs)


# -- hints never suggest something illegal -----------------------------------------------------------------------------

def test_an_fp8_mn_major_operand_is_not_told_to_use_major_mn():
    layout = gmma_smem_layout("MN", "SW128", "e4m3", (128, 128))
    with pytest.raises(DescriptorError) as e:
        DescriptorIterator(layout, "e4m3", "K", 0, mn=64)
    assert "major='MN'" not in e.value.condition
    assert e.value.condition.endswith("(the MN mode is the contiguous one, but e4m3 operands must be K-major: only "
                                      "f16/bf16 have the transpose; lay the tile out with K contiguous, e.g. a "
                                      "K-major GMMA atom)")
    text = wgmma_kernel("e4m3", "f32").replace(
        "%b = smem.alloc {align = 1024} : smem<e4m3>[" + lc.to_str(gmma_smem_layout("K", "SW128", "e4m3", (64, 128))),
        "%b = smem.alloc {align = 1024} : smem<e4m3>[" + lc.to_str(layout)).replace("frag<f32>[32]", "frag<f32>[64]")
    (line,) = errors(text)
    assert line.startswith("m.tile:7:3: wgmma.mma: B's layout Sw<3,4,3> o 0 o ((128,1),(8,16)):((1,0),(128,1024)) is "
                           "no wgmma operand: K-major:")
    assert "major='MN'" not in line and "e4m3 operands must be K-major" in line


def test_a_16_bit_mn_major_operand_is_told_about_major_mn():
    layout = gmma_smem_layout("MN", "SW128", "bf16", (64, 64))
    with pytest.raises(DescriptorError, match=r"the MN mode is the contiguous one: major='MN'\?"):
        DescriptorIterator(layout, "bf16", "K", 0, mn=64)
    DescriptorIterator(layout, "bf16", "MN", 0, mn=64)   # and the hint is right


def test_alignment_advice_names_what_breaks_the_alignment():
    low_alloc = GEMM.replace("%sa = smem.alloc {align = 1024}", "%sa = smem.alloc {align = 512}")
    # the alloc is the root cause and is reported once, at the alloc (the ops using it are not checked again)
    assert errors(low_alloc, "gemm.tile") == [
        "gemm.tile:16:3: smem.alloc: align 512 is below the 1024-byte repeat of the layout's swizzle Sw<3,4,3>: the "
        "pattern must start at phase 0 (align >= 1024)"]
    # blocks of 4 rows (512 bytes) of a SW128 stage: the block index's step breaks the 1024-byte pattern
    narrow = parse_module(GEMM.replace(
        "%a_rows = smem.tile %a_stage, %cw {mode = 0, size = 64} : smem<bf16>[Sw<3,4,3> o 0 o (64,(64,1)):(64,(1,0))]",
        "%a_rows = smem.tile %a_stage, %cw {mode = 0, size = 4} : smem<bf16>[Sw<3,4,3> o 0 o (4,(64,1)):(64,(1,0))]"),
        file="gemm.tile")
    rows = next(op.results[0] for op in walk(narrow.kernels[0].body) if op.name == "smem.tile")
    assert alignment_advice(rows, 1024) == ("make the step of smem.tile %a_rows (a multiple of 512 bytes per index) a "
                                            "multiple of 1024 bytes")
    assert alignment_advice(rows, 512) == "start the view on a 512-byte boundary"   # nothing breaks 512


# -- values and types in the IR's notation ------------------------------------------------------------------------------

HEADER = "kernel @k(%x: gtensor<f32, 2>, %s: f32) {grid = (1, 1, 1), block = (256, 1, 1)} {\n" \
         "  %c0 = arith.const {value = 0} : i32\n"


@pytest.mark.parametrize("body, message", [
    ("  %v = gmem.tile %x, %c0, %c0 {shape = (1024, 4)} : gview<f32>[(1024,4)]",
     "m.tile:3:3: gmem.tile: attribute 'shape' must be a shape of positive ints like [(64,64)], not (1024, 4) (a shape "
     "is written in brackets: [(1024,4)])"),
    ("  %v = gmem.tile %x, %c0, %c0 {shape = [(8,8)]} : gview<f32>[(8,8)]\n"
     "  %f = gmem.load %v, %c0 {tv = (4, 2)} : frag<f32>[2]",
     "m.tile:4:3: gmem.load: attribute 'tv' must be a layout like [(4,2):(2,1)], not (4, 2)"),
    ("  %c = arith.const {value = 1.5} : i32", "m.tile:3:3: arith.const: value 1.5 is not an integer but the type is i32"),
    ("  gpu.roles {names = (producer, producer), warpgroups = (1, 1), maxnreg = (40, 232)} {\n  } {\n  }",
     "m.tile:3:3: gpu.roles: names must be 2 distinct words, not (producer, producer)"),
    ("  gpu.roles {names = (producer, consumer), warpgroups = (1, 1), maxnreg = (40, \"x\")} {\n  } {\n  }",
     "m.tile:3:3: gpu.roles: maxnreg \"x\" is not a multiple of 8 from 24 to 256 (setmaxnreg)"),
    ("  %t = gpu.thread_id {dim = (x)} : i32", "m.tile:3:3: gpu.thread_id: attribute 'dim' must be one of x, y, z, not (x)"),
    ("  barrier.named {id = 1, threads = (32)}",
     "m.tile:3:3: barrier.named: attribute 'threads' must be an integer, not (32)"),
    ("  %sa = smem.alloc : smem<f32>[(4,8):(8,1)]\n  %p = smem.permute %sa {order = (0)} : smem<f32>[(4,8):(8,1)]",
     "m.tile:4:3: smem.permute: order (0) is not a permutation of the view's 2 modes"),
    ("  scf.for %c0, %c0, %c0 {unroll = 0.5} (%i: i32) {\n  }",
     "m.tile:3:3: scf.for: unroll must be an integer >= 1, not 0.5"),
])
def test_values_print_as_the_text_form_writes_them(body, message):
    lines = errors(HEADER + body + "\n}\n")
    assert message in lines
    assert not any("TupleAttr" in line or "Word(" in line for line in lines), lines


# -- TMA tiling advice -------------------------------------------------------------------------------------------------

def test_a_too_wide_tile_gets_a_box_that_fits_not_a_split_into_rows():
    text = ("kernel @k(%a: tmap<bf16, 2>[Sw<3,4,3> o 0 o (128,128):(128,1)]) {grid = (1, 1, 1), "
            "block = (128, 1, 1)} {\n}\n")
    (line,) = errors(text)
    assert line == (
        "m.tile:1:11: @k: parameter %a: tmap<bf16, 2>[Sw<3,4,3> o 0 o (128,128):(128,1)] is not a box TMA writes in "
        "one copy: the smem tile is 256 bytes along the contiguous global mode 1, more than one 128-byte row of "
        "CU_TENSOR_MAP_SWIZZLE_128B: this tile needs several TMA copies; the largest box along the contiguous mode 1 "
        "is (128,64): Sw<3,4,3> o 0 o (128,64):(64,1), 16384 bytes per copy, 2 copies for the (128,128) tile laid out "
        "as Sw<3,4,3> o 0 o (128,(64,2)):(64,(1,8192)) (tma_boxes() splits that layout; as laid out now the tile takes "
        "256 copies of box_dims (64, 1))")
    # the proposed box is a legal map
    verify(parse_module(text.replace("(128,128):(128,1)", "(128,64):(64,1)"), file="m.tile"))


@pytest.mark.parametrize("tile, dtype", [("Sw<3,4,3> o 0 o (64,64):(64,1)", "f32"),
                                         ("(128,512):(512,1)", "bf16"), ("Sw<2,4,3> o 0 o (128,64):(64,1)", "f32"),
                                         ("(2,4,512):(2048,512,1)", "bf16")])
def test_the_proposed_box_and_tile_are_what_tma_accepts(tile, dtype):
    """The advice's box is accepted by make_tma_params and its tile is split by tma_boxes into the copies it says."""
    from layoutc.hopper import tma_boxes

    layout = lc.parse(tile)
    rank = lc.rank(layout.inner if isinstance(layout, lc.ComposedLayout) else layout)
    extents = [4096] * rank
    strides, s = [], 1
    for n in reversed(extents):
        strides.append(s)
        s *= n
    glob = lc.Layout(tuple(extents), tuple(reversed(strides)))
    with pytest.raises(TmaError) as e:
        make_tma_params(glob, dtype, layout)
    advice = e.value.condition.split("the largest box along the contiguous mode ")[1]
    box_text = advice.split(": ", 1)[1].split(", ")[0]
    copies = int(advice.split(" bytes per copy, ")[1].split(" copies")[0])
    tile_text = advice.split(" tile laid out as ")[1].split(" (tma_boxes()")[0]
    make_tma_params(glob, dtype, lc.parse(box_text))
    assert len(tma_boxes(glob, dtype, lc.parse(tile_text)).boxes) == copies
