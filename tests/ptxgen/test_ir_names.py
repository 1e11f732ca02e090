"""Named values and partition attributes in the tile IR text (spec/tile-ir.md §3.1): round trips keep the names,
partition calls resolve to layoutc's TV layouts before the verifier, errors are located at the name or argument."""
from __future__ import annotations

import pathlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import layoutc as lc
from layoutc.hopper import copy_tv, ldmatrix_tiled_tv, stmatrix_tiled_tv, wgmma_a_tv, wgmma_accumulator_tv
from ptxgen.interp import interpret
from ptxgen.ir.builder import KernelBuilder, define, frag, gtensor, gview, i32, partition, pipeline, smem
from ptxgen.ir.core import walk
from ptxgen.ir.names import PartitionError
from ptxgen.ir.text import IRSyntaxError, parse_module, print_kernel, print_module, structurally_equal
from ptxgen.verify import VerifyError, verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

CANONICAL = """\
#swz = [Sw<3,4,3> o 0 o (8,64):(64,1)]
#stages = 2
#rows = 32
#tile = [(64,64)]
#cp = copy(threads = (#rows, 8), vector = 8, tile = (64, 64))

kernel @copy2d(%x: gtensor<bf16, 2>, %y: gtensor<bf16, 2>) {grid = (1, 1, 1), block = (256, 1, 1)} {
  %s = smem.alloc : smem<bf16>[#swz]
  %p = pipeline.alloc {stages = #stages, consumers = 1} : pipeline<#stages>
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %r = arith.const {value = #rows} : i32
  %v = gmem.tile %x, %z, %z {shape = #tile} : gview<bf16>[#tile]
  %w = gmem.tile %y, %z, %z {shape = #tile} : gview<bf16>[#tile]
  %f = gmem.load %v, %t {tv = #cp} : frag<bf16>[(8,2)]
  gmem.store %w, %t, %f {tv = copy(threads = (32, 8), vector = 8, tile = (64, 64))}
}
"""


def ops(module):
    return {op.name: op for op in walk(module.kernels[0].body)}


def test_round_trip_keeps_every_name():
    module = parse_module(CANONICAL, file="n.tile")
    assert print_module(module) == CANONICAL
    assert print_module(parse_module(print_module(module))) == CANONICAL
    verify(module)


def test_non_canonical_spelling_prints_canonically_and_definitions_move_to_the_top():
    text = CANONICAL.replace("copy(threads = (32, 8), vector = 8, tile = (64, 64))",
                             "copy(tile=(64,64), vector=8, threads=(32,8))")
    # a definition after the kernels (none uses it) prints with the others, before the kernels
    module = parse_module(text + "\n#unused = 5\n", file="n.tile")
    assert print_module(module) == CANONICAL.replace("\n\nkernel", "\n#unused = 5\n\nkernel")


def test_names_resolve_before_the_verifier_sees_the_ir():
    module = parse_module(CANONICAL, file="n.tile")
    found = ops(module)
    assert found["gmem.load"].attrs["tv"] == copy_tv((32, 8), 8, (64, 64))[1]
    assert found["gmem.store"].attrs["tv"] == copy_tv((32, 8), 8, (64, 64))[1]
    assert found["pipeline.alloc"].attrs["stages"] == 2
    assert found["arith.const"].attrs["value"] in (0, 32)
    assert found["gmem.tile"].attrs["shape"] == (64, 64)
    assert str(found["smem.alloc"].results[0].type) == "smem<bf16>[Sw<3,4,3> o 0 o (8,64):(64,1)]"
    # print_kernel alone (what the compile cache hashes) writes every value out: names are spelling, not semantics
    written_out = print_kernel(module.kernels[0])
    assert "#" not in written_out and "copy(" not in written_out
    assert structurally_equal(parse_module(written_out), module)


def test_the_copy_kernel_runs():
    module = parse_module(CANONICAL, file="n.tile")
    x = np.random.default_rng().standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y})
    assert np.array_equal(x, y)


@pytest.mark.parametrize("call, want", [
    ("wgmma_acc(m = 128, n = 256, warpgroups = 2)", wgmma_accumulator_tv(128, 256, 2)),
    ("wgmma_acc(m = 256, n = 256, warpgroups = 2, warpgroups_n = 2)", wgmma_accumulator_tv(256, 256, 2, 2)),
    ("wgmma_a(type = bf16, m = 128, k = 64, warpgroups = 2)", wgmma_a_tv("bf16", 128, 64, 2)),
    ("copy(threads = [(32,8):(1,32)], vector = 8, tile = (64, 64))", copy_tv(lc.Layout((32, 8), (1, 32)), 8, (64, 64))[1]),
    ("copy(threads = (32, 8), tile = (64, 64), bytes = 16, type = bf16)", copy_tv((32, 8), 8, (64, 64))[1]),
    ("copy(threads = (16, 16), tile = (64, 64), bytes = 16, type = f32)", copy_tv((16, 16), 4, (64, 64))[1]),
    ("ldmatrix(num = 4, tile = (64, 16), warps = (4, 1))", ldmatrix_tiled_tv(4, (64, 16), (4, 1))),
    ("stmatrix(num = 2, tile = (16, 16), trans = true)", stmatrix_tiled_tv(2, (16, 16), (1, 1), True)),
])
def test_partition_attribute_equals_the_layoutc_result(call, want):
    text = f"""kernel @k(%x: gtensor<f32, 2>) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %z = arith.const {{value = 0}} : i32
  %v = gmem.tile %x, %z, %z {{shape = [(64,64)]}} : gview<f32>[(64,64)]
  gpu.marker {{tv = {call}}}
}}
"""
    module = parse_module(text, file="p.tile")
    op = ops(module)["gpu.marker"]
    assert op.attrs["tv"] == want
    assert op.spelling["tv"].text == call
    assert print_module(module) == text


# -- errors ---------------------------------------------------------------------------------------------------------

KERNEL = """kernel @k(%x: gtensor<bf16, 2>) {grid = (1, 1, 1), block = (256, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %v = gmem.tile %x, %z, %z {shape = [(64,64)]} : gview<bf16>[(64,64)]
  %f = gmem.load %v, %t {tv = TV} : frag<bf16>[(8,2)]
}
"""
CP = "#cp = copy(threads = (32, 8), vector = 8, tile = (64, 64))\n"
SIG = "wgmma_acc(m = int, n = int, [warpgroups = 1], [warpgroups_n = 1])"


@pytest.mark.parametrize("text, message", [
    (CP + KERNEL.replace("TV", "#cpp"), "n.tile:6:31: undefined name #cpp (did you mean '#cp'?)"),
    (CP + "#cp = 3\n" + KERNEL.replace("TV", "#cp"), "n.tile:2:1: redefinition of #cp (first defined at 1:1)"),
    (KERNEL.replace("TV", "#cp") + CP, "n.tile:5:31: #cp is used before its definition at 7:1 (a name is defined "
                                       "above its first use)"),
    (KERNEL.replace("TV", "wgmma_accum(m = 64, n = 64)"),
     "n.tile:5:31: unknown partition function 'wgmma_accum' (did you mean 'wgmma_acc'?): the partition functions "
     "are wgmma_acc, wgmma_a, copy, ldmatrix, stmatrix"),
    (KERNEL.replace("TV", "wgmma_acc(m = 64, n = 64, warpgroup = 2)"),
     f"n.tile:5:57: wgmma_acc takes no argument 'warpgroup' (did you mean 'warpgroups'?): {SIG}"),
    (KERNEL.replace("TV", "wgmma_acc(m = 64)"), f"n.tile:5:31: wgmma_acc: missing argument 'n': {SIG}"),
    (KERNEL.replace("TV", "wgmma_acc(m = (64, 2), n = 64)"),
     "n.tile:5:45: wgmma_acc: argument m = (64, 2) must be a positive integer"),
    (KERNEL.replace("TV", "wgmma_acc(m = 96, n = 64)"),
     "n.tile:5:31: wgmma_acc(m = 96, n = 64): m = 96 is not a multiple of 64 rows per warpgroup x 1 warpgroups "
     "along M"),
    (KERNEL.replace("TV", "copy(threads = (32, 8), vector = 8, tile = (48, 64))"),
     "n.tile:5:31: copy(threads = (32, 8), vector = 8, tile = (48, 64)): one pass of the threads covers (32,64), "
     "which does not divide the 48x64 tile"),
    (KERNEL.replace("TV", "copy(threads = (32, 8), vector = 8, tile = (64, 64), bytes = 16, type = bf16)"),
     "n.tile:5:31: copy: give the vector in elements (vector = 8) or in bytes of a type (bytes = 16, type = bf16), "
     "not both"),
    (KERNEL.replace("TV", "copy(threads = (32, 8), tile = (64, 64), bytes = 12, type = f32)"),
     "n.tile:5:31: copy(threads = (32, 8), tile = (64, 64), bytes = 12, type = f32): a vector access is 1, 2, 4, 8 or "
     "16 bytes"),
    (KERNEL.replace("TV", "copy(threads = (32, 8), vector = 8, vector = 4, tile = (64, 64))"),
     "n.tile:5:67: duplicate argument 'vector' of copy"),
    (KERNEL.replace("TV", "wgmma_a(type = bf61, m = 64, k = 16)"),
     "n.tile:5:46: wgmma_a: argument type = bf61 must be an element type wgmma takes in registers: f16, bf16, e4m3, "
     "e5m2, s8, u8, tf32 (did you mean 'bf16'?)"),
    ("#n = 64\n" + KERNEL.replace("TV", "wgmma_acc(m = #n, n = #nn)"),
     "n.tile:6:53: undefined name #nn (did you mean '#n'?)"),
    (KERNEL.replace("gview<bf16>[(64,64)]", "gview<bf16>[#tl]"), "n.tile:4:63: undefined name #tl"),
    ("#s = [Sw<3,4,3> o 0 o (8,64):(64,1)]\n" + KERNEL.replace("gview<bf16>[(64,64)]", "gview<bf16>[#s]"),
     "n.tile:5:63: the shape of gview must be an int tuple, not Sw<3,4,3> o 0 o (8,64):(64,1)"),
    ("#t = (64, 64)\n" + KERNEL.replace("gview<bf16>[(64,64)]", "gview<bf16>[#t]"),
     "n.tile:5:63: the shape of gview must be an int tuple, not (64, 64) (#t is a tuple attribute; a shape is "
     "written in brackets: #t = [(64,64)])"),
    ("#s = 2\n" + KERNEL.replace("{grid = (1, 1, 1)", "{grid = (#s, 1, 1)"),
     "n.tile:2:42: #s: a kernel attribute is written out, not named (names stand for op attribute values and type "
     "parameters)"),
    ("#s = 2\n" + KERNEL.replace("gtensor<bf16, 2>", "gtensor<#s, 2>"),
     "n.tile:2:23: #s = 2 cannot stand for the element type of gtensor<...>: gtensor<T, rank>"),
    ("#s = [(2,2)]\n" + KERNEL.replace("gtensor<bf16, 2>", "gtensor<bf16, #s>"),
     "n.tile:2:29: #s = [(2,2)] cannot stand for the integer of gtensor<...>: gtensor<T, rank>"),
    (KERNEL.replace("gview<bf16>[(64,64)]", "gview<bf16>[#s x]"),
     "n.tile:4:63: bad name [#s x]: brackets hold CuTe notation or one name (#name) alone"),
])
def test_errors(text, message):
    with pytest.raises(IRSyntaxError) as info:
        parse_module(text.replace("TV", "[(256,(8,2)):(8,(1,2048))]"), file="n.tile")
    assert str(info.value).splitlines()[0] == message


def test_a_name_of_the_wrong_kind_is_the_verifiers_to_report():
    text = "#rows = 64\n" + KERNEL.replace("TV", "#rows")
    with pytest.raises(VerifyError, match=r"n.tile:6:3: gmem.load: attribute 'tv' must be a layout like "
                                          r"\[\(4,2\):\(2,1\)\], not 64"):
        verify(parse_module(text, file="n.tile"))


# -- the printer and the builder --------------------------------------------------------------------------------------

def test_a_spelling_that_no_longer_stands_for_its_value_is_not_printed():
    module = parse_module(CANONICAL, file="n.tile")
    load = ops(module)["gmem.load"]
    load.attrs["tv"] = lc.Layout((256, (8, 2)), (8, (1, 2048)))
    printed = print_module(module)
    assert "%f = gmem.load %v, %t {tv = [(256,(8,2)):(8,(1,2048))]}" in printed
    assert "#cp = copy(" in printed     # the module's own definition stays


def builder_module():
    tile, stages, rows = define("tile", (64, 64)), define("stages", 2), define("rows", 32)
    swz = define("swz", lc.parse("Sw<3,4,3> o 0 o (8,64):(64,1)"))
    cp = define("cp", partition("copy", threads=(rows, 8), vector=8, tile=(64, 64)))
    kb = KernelBuilder("copy2d", grid=(1, 1, 1), block=(256, 1, 1), x=gtensor("bf16", 2), y=gtensor("bf16", 2))
    b = kb.b
    b.smem.alloc(type=smem("bf16", swz), name="s")
    b.pipeline.alloc(stages=stages, consumers=1, type=pipeline(stages), name="p")
    t = b.gpu.thread_id(dim="x", name="t")
    z = b.const(0, i32, name="z")
    b.const(rows, i32, name="r")
    v = b.gmem.tile(kb["x"], z, z, shape=tile, type=gview("bf16", tile), name="v")
    w = b.gmem.tile(kb["y"], z, z, shape=tile, type=gview("bf16", tile), name="w")
    f = b.gmem.load(v, t, tv=cp, type=frag("bf16", (8, 2)), name="f")
    b.gmem.store(w, t, f, tv=partition("copy", threads=(32, 8), vector=8, tile=(64, 64)))
    return kb.module()


def test_builder_names_print_as_the_text_form_writes_them():
    """The builder's definitions print in the order of their first use (the text's in text order)."""
    module = builder_module()
    assert print_module(module) == CANONICAL
    assert structurally_equal(module, parse_module(CANONICAL))
    verify(module)


def test_builder_partition_errors_are_the_readers():
    with pytest.raises(PartitionError, match=r"^wgmma_acc: missing argument 'n': wgmma_acc\(m = int"):
        partition("wgmma_acc", m=64)
    assert partition("wgmma_acc", m=64, n=8).value == wgmma_accumulator_tv(64, 8)


def test_two_definitions_of_one_name_cannot_be_printed():
    kb = KernelBuilder("k", grid=(1, 1, 1), block=(32, 1, 1))
    kb.b.const(define("n", 1), i32, name="a")
    kb.b.const(define("n", 2), i32, name="b")
    with pytest.raises(ValueError, match=r"cannot print: #n is defined twice, as 1 and as 2"):
        print_module(kb.module())


# -- the examples ---------------------------------------------------------------------------------------------------------

def test_gemm_tile_stores_through_the_tiled_mma_partition():
    module = parse_module((EXAMPLES / "gemm.tile").read_text(), file="examples/gemm.tile")
    store = ops(module)["gmem.store"]
    assert store.spelling["tv"].text == "wgmma_acc(m = 128, n = 128, warpgroups = 2)"
    assert store.attrs["tv"] == wgmma_accumulator_tv(128, 128, warpgroups=2)
    hopper = parse_module((EXAMPLES / "gemm_hopper.tile").read_text(), file="examples/gemm_hopper.tile")
    stmatrix = ops(hopper)["smem.stmatrix"]
    assert stmatrix.attrs["tv"] == wgmma_accumulator_tv(64, 128)


# -- property: any definitions, used anywhere an attribute value goes, print back as written ----------------------------


_leaf = st.one_of(st.integers(-5, 300), st.sampled_from(["[(64,64)]", "[(4,2):(2,1)]", "x", "true", "1.5"]))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_leaf, min_size=1, max_size=5), picks=st.lists(st.integers(0, 4), min_size=1, max_size=6))
def test_any_names_round_trip(values, picks):
    definitions = "".join(f"#n{i} = {v}\n" for i, v in enumerate(values))
    uses = [f"#n{p % len(values)}" for p in picks]
    attrs = ", ".join(f"a{i} = {u}" for i, u in enumerate(uses[:-1])) or "a0 = 1"
    text = (f"{definitions}\nkernel @k() {{grid = (1, 1, 1), block = (32, 1, 1)}} {{\n"
            f"  gpu.marker {{{attrs}, t = ({', '.join(uses)})}}\n}}\n")
    module = parse_module(text, file="p.tile")
    assert print_module(module) == text
    op = module.kernels[0].body.ops[0]
    resolved = {d.name: d.value for d in module.definitions}
    assert tuple(op.attrs["t"]) == tuple(resolved[u[1:]] for u in uses)
