"""Swizzled thread maps: a TV layout composed with a swizzle (``Sw<B,M,S> o offset o TV``: thread t's value v is tile
element ``Sw(offset + TV(t, v))``) wherever a TV layout is — gmem.load/store, smem.load/store, frag.reduce — parsed
and printed, verified, interpreted, and lowered with the vector widths the composed map keeps contiguous."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import lowering_access
from ptxgen.interp import interpret
from ptxgen.ir.ops import is_tv, layout_image_bounds, layout_values, tv_table
from ptxgen.ir.text import parse_module, print_module
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.ir.layout_table import tv_index
from ptxgen.lower.plans import plan_access, plan_smem_access, tile_coordinates
from ptxgen.verify import VerifyError, verify

# 32 threads × 4 f32 vectors of a (32, 16) tile (thread t: columns 4·(t%4) … +3 of rows t//4 + 8k); the swizzle
# XORs the column's 4-block (index bits 7-8) with the row's bits 0-1 (index bits 0-1): both bits the thread picks
PLAIN = "((4,8),(4,4)):((128,1),(32,8))"
SWIZZLED = "Sw<2,0,-7> o 0 o ((4,8),(4,4)):((128,1),(32,8))"

COPY = """
kernel @copy(%x: gtensor<f32, 2>, %y: gtensor<f32, 2>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %vx = gmem.tile %x, %z, %z {shape = [(32,16)]} : gview<f32>[(32,16)]
  %vy = gmem.tile %y, %z, %z {shape = [(32,16)]} : gview<f32>[(32,16)]
  %f = gmem.load %vx, %t {tv = [LOAD]} : frag<f32>[(4,4)]
  gmem.store %vy, %t, %f {tv = [STORE]}
}
"""


def table(tv_text):
    tv = lc.parse(tv_text)
    return tv_table(tv, lc.size(tv[0]))


def test_a_swizzled_map_is_the_swizzle_of_the_plain_one():
    plain, swizzled = table(PLAIN), table(SWIZZLED)
    assert np.array_equal(swizzled, lc.Swizzle(2, 0, -7)(plain))
    assert sorted(swizzled.ravel().tolist()) == list(range(512))      # still a bijection onto the tile
    assert not np.array_equal(swizzled, plain)
    assert is_tv(lc.parse(SWIZZLED)) and is_tv(lc.parse(PLAIN))
    assert not is_tv(lc.parse("(4,8):(8,1) o 0 o (32,4):(4,1)"))   # a layout outer function is no thread map
    assert layout_image_bounds(lc.parse(SWIZZLED)) == (0, 511)
    assert np.array_equal(layout_values(lc.parse(SWIZZLED)), lc.Swizzle(2, 0, -7)(layout_values(lc.parse(PLAIN))))


@pytest.mark.parametrize("load, store", [(SWIZZLED, SWIZZLED), (PLAIN, SWIZZLED), (SWIZZLED, PLAIN)])
def test_copy_through_swizzled_maps(load, store):
    """y's element Sw_store(TV(t, v)) receives x's element Sw_load(TV(t, v)): the identity when both maps agree, the
    swizzle's permutation of the tile when one is plain."""
    module = parse_module(COPY.replace("LOAD", load).replace("STORE", store), file="copy.tile")
    verify(module)
    assert print_module(parse_module(print_module(module))) == print_module(module)
    x = np.arange(512, dtype=np.float32).reshape(32, 16)
    y = np.full_like(x, -1)
    interpret(module, {"x": x, "y": y})
    src, dst = table(load).ravel(), table(store).ravel()
    want = np.full(512, -1, np.float32)
    want[dst] = x.ravel(order="F")[src]                     # tile indices are column-major (colexicographic)
    assert np.array_equal(y.ravel(order="F"), want)


def test_the_swizzle_keeps_vectors_whole_in_the_plan_and_the_ptx():
    """The swizzle moves whole 4-column blocks by thread bits only: each mode's coordinate is a thread part
    (a ThreadMap) plus a constant per value, the plan still groups each thread's 4 consecutive columns into one
    16-byte vector, and the PTX has 4 ld/st.global.v4 per thread."""
    tv = lc.parse(SWIZZLED)
    plan = plan_access(tv, (32, 16), 1, 4)
    assert plan.width == 4 and len(plan.groups) == 4
    coords = tile_coordinates(tv, (32, 16))
    index = tv_index(tv)
    for m, size, prefix in ((0, 32, 1), (1, 16, 32)):
        thread = coords[m].thread.table() if hasattr(coords[m].thread, "table") else None
        want = (index // prefix) % size
        got = (thread if thread is not None else want[:, 0])[:, None] + np.array(coords[m].values)[None, :]
        assert np.array_equal(got, want)
    module = parse_module(COPY.replace("LOAD", SWIZZLED).replace("STORE", SWIZZLED), file="copy.tile")
    spec = Specialization.of(x=TensorSpec(1, True, 16), y=TensorSpec(1, True, 16))
    accesses = Counter(re.findall(r"(?:ld|st)\.global\S*", compile_kernel(module.kernels[0], spec).ptx))
    assert accesses == Counter({"ld.global.v4.b32": 4, "st.global.v4.b32": 4})


def test_a_swizzle_splitting_vectors_narrows_them():
    """Sw<1,1,-3> XORs index bit 1 (inside each thread's run of 4) into bit 4 (a thread bit): values 2, 3 move 16
    elements away, so the runs of 4 split into pairs — the smem plan (and layoutc's analysis, the same rule) use
    2-wide vectors, and both agree."""
    tv = lc.parse("Sw<1,1,-3> o 0 o (32,4):(4,1)")     # thread t: tile indices 4t .. 4t+3, bit 4 ^= bit 1
    view = lc.Layout((128,), (1,))
    plan = plan_smem_access(tv, view, 4, 16, 1024)
    assert plan.width == 2
    assert lowering_access(tv, view, "f32") == (8, plan.groups)
    plain = plan_smem_access(lc.parse("(32,4):(4,1)"), view, 4, 16, 1024)
    assert plain.width == 4 and lowering_access(lc.parse("(32,4):(4,1)"), view, "f32")[0] == 16


SMEM = """
kernel @stage(%x: gtensor<f32, 2>, %y: gtensor<f32, 2>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %s = smem.alloc : smem<f32>[(32,16):(16,1)]
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %vx = gmem.tile %x, %z, %z {shape = [(32,16)]} : gview<f32>[(32,16)]
  %vy = gmem.tile %y, %z, %z {shape = [(32,16)]} : gview<f32>[(32,16)]
  %f = gmem.load %vx, %t {tv = [((4,8),(4,4)):((128,1),(32,8))]} : frag<f32>[(4,4)]
  smem.store %s, %t, %f {tv = [SW]}
  barrier.cta
  %g = smem.load %s, %t {tv = [SW]} : frag<f32>[(4,4)]
  gmem.store %vy, %t, %g {tv = [((4,8),(4,4)):((128,1),(32,8))]}
}
"""


def test_smem_round_trip_through_a_swizzled_map_and_vector_ptx():
    module = parse_module(SMEM.replace("SW", SWIZZLED), file="stage.tile")
    verify(module)
    x = np.random.default_rng(1).standard_normal((32, 16)).astype(np.float32)
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y})
    assert np.array_equal(x, y)
    spec = Specialization.of(x=TensorSpec(1, True, 16), y=TensorSpec(1, True, 16))
    accesses = Counter(re.findall(r"(?:ld|st)\.shared\S*", compile_kernel(module.kernels[0], spec).ptx))
    assert accesses == Counter({"st.shared.v4.b32": 4, "ld.shared.v4.b32": 4})


def test_a_map_mixing_value_bits_into_thread_bits_still_lowers():
    """Sw<2,0,5> XORs the value's column bits into the row bits a thread owns: no thread part plus constants, so each
    value's index is computed at run time (scalar accesses) — still the same data as the interpreter's."""
    tv = "Sw<2,0,5> o 0 o ((4,8),(4,4)):((128,1),(32,8))"
    assert tile_coordinates(lc.parse(tv), (32, 16)) is None
    module = parse_module(COPY.replace("LOAD", tv).replace("STORE", tv), file="copy.tile")
    verify(module)
    x = np.arange(512, dtype=np.float32).reshape(32, 16)
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y})
    assert np.array_equal(x, y)
    spec = Specialization.of(x=TensorSpec(1, True, 16), y=TensorSpec(1, True, 16))
    accesses = Counter(re.findall(r"(?:ld|st)\.global\S*", compile_kernel(module.kernels[0], spec).ptx))
    assert accesses == Counter({"ld.global.b32": 16, "st.global.b32": 16})


def test_a_map_that_does_not_split_still_keeps_whole_vectors():
    """Sw<2,3,-4> XORs the rows' value bits (3-4: the thread's row + 8k) into the column block: the coordinates are
    no thread part plus constants (each vector's address is computed at run time), but each thread's 4 columns stay
    one aligned run, so the accesses stay 16-byte vectors."""
    tv = "Sw<2,3,-4> o 0 o ((4,8),(4,4)):((128,1),(32,8))"
    assert tile_coordinates(lc.parse(tv), (32, 16)) is None
    plan = plan_access(lc.parse(tv), (32, 16), 1, 4)
    assert (plan.width, len(plan.groups)) == (4, 4)
    module = parse_module(COPY.replace("LOAD", tv).replace("STORE", PLAIN), file="copy.tile")
    verify(module)
    x = np.arange(512, dtype=np.float32).reshape(32, 16)
    y = np.full_like(x, -1)
    interpret(module, {"x": x, "y": y})
    want = np.full(512, -1, np.float32)
    want[table(PLAIN).ravel()] = x.ravel(order="F")[table(tv).ravel()]
    assert np.array_equal(y.ravel(order="F"), want)
    spec = Specialization.of(x=TensorSpec(1, True, 16), y=TensorSpec(1, True, 16))
    accesses = Counter(re.findall(r"(?:ld|st)\.global\S*", compile_kernel(module.kernels[0], spec).ptx))
    assert accesses == Counter({"ld.global.v4.b32": 4, "st.global.v4.b32": 4})


REDUCE = """
kernel @rowsum(%x: gtensor<f32, 2>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %v = gmem.tile %x, %z, %z {shape = [(32,16)]} : gview<f32>[(32,16)]
  %f = gmem.load %v, %t {tv = [SW]} : frag<f32>[(4,4)]
  %r = frag.reduce %f, %t {tv = [SW], tile = [(32,16)], mode = 1, kind = add} : frag<f32>[(4,4)]
  gmem.store %v, %t, %r {tv = [SW]}
}
"""


def test_frag_reduce_takes_a_swizzled_map():
    """Row sums (mode = 1) through the swizzled map: the swizzle permutes each row's column blocks among the row's
    4 threads (lane bits 0-1), so the shuffles still reduce the row."""
    module = parse_module(REDUCE.replace("SW", SWIZZLED), file="rowsum.tile")
    verify(module)
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)
    want = np.broadcast_to(x.astype(np.float64).sum(axis=1, keepdims=True), x.shape)
    interpret(module, {"x": x})
    assert np.allclose(x, want, rtol=1e-5, atol=1e-5)
    compile_kernel(module.kernels[0], Specialization.of(x=TensorSpec(1, True, 16)))


@pytest.mark.parametrize("tv, message", [
    ("(4,8):(8,1) o 0 o ((4,8),(4,4)):((128,1),(32,8))",
     "copy.tile:7:3: gmem.load: attribute 'tv' must be a layout (threads, values) or Sw<B,M,S> o offset o layout, "
     "not [(4,8):(8,1) o 0 o ((4,8),(4,4)):((128,1),(32,8))]"),
    ("Sw<1,0,-9> o 0 o ((4,8),(4,4)):((128,1),(32,8))",
     "copy.tile:7:3: gmem.load: tv Sw<1,0,-9> o 0 o ((4,8),(4,4)):((128,1),(32,8)) reaches index 1023 outside the tile "
     "of 512 elements"),
    ("Sw<2,0,-7> o 0 o ((4,8),(4,2)):((128,1),(32,8))",
     "copy.tile:7:3: gmem.load: tv's value mode (4,2):(32,8) has 8 values but the fragment (4,4) has 16"),
])
def test_verifier_messages(tv, message):
    text = COPY.replace("LOAD", tv).replace("STORE", PLAIN)
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, file="copy.tile"))
    assert message in str(e.value).splitlines()


@pytest.mark.gpu
def test_swizzled_smem_round_trip_on_the_gpu():
    import torch

    from ptxgen.runtime import jit

    module = parse_module(SMEM.replace("SW", SWIZZLED), file="stage.tile")
    x = torch.randn((32, 16), device="cuda", dtype=torch.float32)
    y = torch.zeros_like(x)
    jit(module)(x=x, y=y)
    torch.cuda.synchronize()
    assert torch.equal(x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("load, store", [(PLAIN, SWIZZLED), ("Sw<2,0,5> o 0 o " + PLAIN, PLAIN),
                                         ("Sw<2,3,-4> o 0 o " + PLAIN, SWIZZLED)])
def test_swizzled_copy_on_the_gpu_matches_the_interpreter(load, store):
    import torch

    from ptxgen.runtime import jit

    module = parse_module(COPY.replace("LOAD", load).replace("STORE", store), file="copy.tile")
    x = torch.randn((32, 16), device="cuda", dtype=torch.float32)
    y = torch.full_like(x, -1)
    hx, hy = x.cpu().numpy().copy(), y.cpu().numpy().copy()
    interpret(module, {"x": hx, "y": hy})
    jit(module)(x=x, y=y)
    torch.cuda.synchronize()
    assert np.array_equal(y.cpu().numpy(), hy)


@pytest.mark.gpu
def test_frag_reduce_with_a_swizzled_map_on_the_gpu():
    import torch

    from ptxgen.runtime import jit

    module = parse_module(REDUCE.replace("SW", SWIZZLED), file="rowsum.tile")
    x = torch.randn((32, 16), device="cuda", dtype=torch.float32)
    want = x.double().sum(dim=1, keepdim=True).expand(32, 16).cpu().numpy()
    jit(module)(x=x)
    torch.cuda.synchronize()
    got = x.cpu().numpy()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6


STMATRIX = """
kernel @st(%x: gtensor<bf16, 2>, %y: gtensor<bf16, 2>) {grid = (1, 1, 1), block = (128, 1, 1)} {
  %s = smem.alloc {align = 1024} : smem<bf16>[Sw<3,4,3> o 0 o (64,64):(64,1)]
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %gx = gmem.tile %x, %c0, %c0 {shape = [(64,64)]} : gview<bf16>[(64,64)]
  %gy = gmem.tile %y, %c0, %c0 {shape = [(64,64)]} : gview<bf16>[(64,64)]
  %f = gmem.load %gx, %t {tv = [TV]} : frag<bf16>[32]
  smem.stmatrix %s, %t, %f {tv = [TV], num = 4, trans = false}
  barrier.cta
  %g = smem.load %s, %t {tv = [(128,32):(32,1)]} : frag<bf16>[32]
  gmem.store %gy, %t, %g {tv = [(128,32):(32,1)]}
}
"""


def test_stmatrix_takes_a_swizzled_map():
    """The wgmma accumulator's TV with its rows XOR-permuted inside each 64 (Sw<3,0,3> on the (64, 64) tile's index:
    row bits 0-2 ^= row bits 3-5): every stmatrix row is still 16 contiguous bytes, so it verifies, stores what
    smem.store would, and lowers to 4 stmatrix.x4 per thread."""
    from layoutc.hopper import accumulator_tv

    tv = "Sw<3,0,3> o 0 o " + lc.to_str(accumulator_tv(64))
    module = parse_module(STMATRIX.replace("TV", tv), file="st.tile")
    verify(module)
    import ml_dtypes
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y})
    assert np.array_equal(x, y)
    spec = Specialization.of(x=TensorSpec(1, True, 16), y=TensorSpec(1, True, 16))
    ptx = compile_kernel(module.kernels[0], spec).ptx
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx)) == 4
