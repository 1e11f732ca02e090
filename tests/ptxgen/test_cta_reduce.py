"""frag.reduce across the warps of a CTA (shared-memory scratch + named barrier), frag.extract and frag.rcp: the plan,
the verifier's rules, the interpreter against float64, the shared-memory plan, and the PTX (CPU); the GPU run."""
import re

import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.ops import SMEM_BASE, smem_plan
from ptxgen.ir.reduce_plan import ReducePlanError, plan_reduce
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify


def kernel(body: str, block: int = 256, extra: str = "") -> str:
    return f"""kernel @k(%x: gtensor<f32, 2>, %y: gtensor<f32, 2>, %n: i32) {{grid = (2, 1, 1), block = ({block}, 1, 1)}} {{
{extra}  %row = gpu.block_id {{dim = x}} : i32
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %c1 = arith.const {{value = 1}} : i32
{body}
}}
"""


# one row of 2048 columns over 256 threads (8 warps): thread t holds columns t + 256 v
ROW = """  %v = gmem.tile %x, %row, %c0 {shape = [(1,2048)]} : gview<f32>[(1,2048)]
  %w = gmem.tile %y, %row, %c0 {shape = [(1,2048)]} : gview<f32>[(1,2048)]
  %f = gmem.load %v, %t {tv = [(256,8):(1,256)], other = 0.0} : frag<f32>[8]
  %s = frag.reduce %f, %t {tv = [(256,8):(1,256)], tile = [(1,2048)], mode = 1, kind = KIND} : frag<f32>[8]
  gmem.store %w, %t, %s {tv = [(256,8):(1,256)]}"""


# -- the plan ---------------------------------------------------------------------------------------------------------

def test_plan_of_a_row_across_eight_warps():
    p = plan_reduce(lc.parse("(256,8):(1,256)"), (1, 2048), 1)
    assert p.groups == (tuple(range(8)),)
    assert p.lane_masks == (1, 2, 4, 8, 16) and p.warp_masks == (1, 2, 4)
    assert p.across_warps and p.kept_lane_bits == () and p.scratch_slots == 8
    assert [p.slot(w, 0, 0) for w in range(8)] == list(range(8))


def test_plan_of_columns_across_warps_keeps_lane_bits():
    # a (8, 128) tile, thread t holds column t: a column is one thread (no mask); a row spans all 4 warps
    tv = lc.parse("(128,8):(8,1)")
    assert plan_reduce(tv, (8, 128), 0).warp_masks == ()
    p = plan_reduce(tv, (8, 128), 1)
    assert p.lane_masks == (1, 2, 4, 8, 16) and p.warp_masks == (1, 2) and len(p.groups) == 8
    assert p.scratch_slots == 4 * 8
    # two rows per warp pair: thread t holds row (t // 64) of a (2, 64)-thread split: lanes keep nothing, warp bit 0
    p = plan_reduce(lc.parse("((64,2),4):((2,1),128)"), (2, 256), 1)
    assert p.warp_masks == (1,) and p.scratch_slots == 4 * 1


def test_plan_refuses_lines_that_are_no_coset_of_thread_bits():
    # thread t holds elements 2t, 2t+1 of a (3,4) tile: row 0 is value 0 of some threads, value 1 of others
    with pytest.raises(ReducePlanError, match="line 0 is held by threads"):
        plan_reduce(lc.parse("(6,2):(2,1)"), (3, 4), 1)


@pytest.mark.parametrize("tv, tile, mode", [
    ("(256,8):(1,256)", (1, 2048), 1), ("(128,8):(8,1)", (8, 128), 1), ("((64,2),4):((2,1),128)", (2, 256), 1),
    ("((64,4),4):((16,1),4)", (4, 256), 0),            # columns: 4 groups, all lane bits kept, warp masks 2, 4
    ("((8,32),(2,2)):((2,32),(1,16))", (16, 64), 1),   # rows: 2 groups, lanes 8, 16 moved, warp masks 1, 2, 4
])
def test_the_scratch_scheme_combines_exactly_the_warps_of_each_line(tv, tile, mode):
    """The lowering's scheme, step 3, on the plan: the writer of each (warp, group, lane coset) has its own slot, and
    every thread reads, for each of its groups, the slots of exactly the warps holding its line (in the same order
    in every warp of the line)."""
    from ptxgen.ir.reduce_plan import line_table
    tv = lc.parse(tv)
    plan = plan_reduce(tv, tile, mode)
    assert plan.across_warps
    line = line_table(tv, tile, mode)
    moved_lanes, moved_warps = sum(plan.lane_masks), sum(plan.warp_masks)
    span = [s for s in range(moved_warps + 1) if s & ~moved_warps == 0]
    written = {}
    for t in range(plan.threads):
        warp, lane = t // 32, t % 32
        if lane & moved_lanes == 0:
            for g, group in enumerate(plan.groups):
                slot = plan.slot(warp, g, lane)
                assert slot not in written and 0 <= slot < plan.scratch_slots
                written[slot] = int(line[t, group[0]])
    for t in range(plan.threads):
        warp, lane = t // 32, t % 32
        for g, group in enumerate(plan.groups):
            reads = [plan.slot((warp & ~moved_warps) | s, g, lane & ~moved_lanes) for s in span]
            assert all(written.get(slot) == line[t, group[0]] for slot in reads)
            holders = {u // 32 for u in range(plan.threads) for v in group if line[u, v] == line[t, group[0]]}
            assert {((warp & ~moved_warps) | s) for s in span} == holders


# -- the interpreter and the PTX --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, reference", [("add", np.sum), ("max", np.max), ("min", np.min)])
def test_a_row_across_warps_in_the_interpreter(kind, reference):
    module = parse_module(kernel(ROW.replace("KIND", kind)), file="row.tile")
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 2000)).astype(np.float32)   # ragged: columns 2000 … 2047 read 0
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y, "n": 2000})
    padded = np.concatenate([x.astype(np.float64), np.zeros((2, 48))], axis=1)
    want = reference(padded, axis=1, keepdims=True)
    assert np.abs(y - want).max() <= 1e-5 * np.abs(x).sum(1).max()


def test_a_row_across_warps_lowers_to_shuffles_a_scratch_and_one_named_barrier():
    module = parse_module(kernel(ROW.replace("KIND", "add")), file="row.tile")
    ptx = compile_kernel(module).ptx
    assert ptx.count("shfl.sync.bfly.b32") == 5
    assert re.findall(r"bar\.sync\s+(\d+), (\d+);", ptx) == [("15", "256")]
    assert len(re.findall(r"st\.shared\.b32", ptx)) == 1
    assert len(re.findall(r"ld\.shared\.v4\.b32", ptx)) == 2       # 8 partials as two 16-byte vectors
    plan = smem_plan(module.kernels[0].body.ops)
    assert plan.total == 8 * 4 and plan.address[id(module.kernels[0].body.ops[-2])] == SMEM_BASE


def test_inside_a_loop_a_second_barrier_guards_the_scratch():
    body = """  %init = arith.const {value = 0.0} : f32
  %zero = frag.splat %init : frag<f32>[8]
  %acc = scf.for %c0, %n, %c1, %zero : frag<f32>[8] (%i: i32, %a: frag<f32>[8]) {
    %v = gmem.tile %x, %i, %c0 {shape = [(1,2048)]} : gview<f32>[(1,2048)]
    %f = gmem.load %v, %t {tv = [(256,8):(1,256)]} : frag<f32>[8]
    %s = frag.reduce %f, %t {tv = [(256,8):(1,256)], tile = [(1,2048)], mode = 1, kind = max} : frag<f32>[8]
    %b = frag.add %a, %s : frag<f32>[8]
    scf.yield %b
  }
  %w = gmem.tile %y, %row, %c0 {shape = [(1,2048)]} : gview<f32>[(1,2048)]
  gmem.store %w, %t, %acc {tv = [(256,8):(1,256)]}"""
    module = parse_module(kernel(body), file="loop.tile")
    x = np.random.default_rng().standard_normal((3, 2048)).astype(np.float32)
    y = np.zeros((2, 2048), np.float32)
    interpret(module, {"x": x, "y": y, "n": 3})
    np.testing.assert_allclose(y, np.full((2, 2048), x.max(1).sum()), rtol=1e-6)
    assert re.findall(r"bar\.sync\s+(\d+), (\d+);", compile_kernel(module).ptx) == [("15", "256")] * 2


def test_the_barrier_id_avoids_those_barrier_named_uses():
    body = ROW.replace("KIND", "add") + "\n  barrier.named {id = 15, threads = 256}"
    ptx = compile_kernel(parse_module(kernel(body), file="ids.tile")).ptx
    assert sorted(re.findall(r"bar\.sync\s+(\d+), 256;", ptx)) == ["14", "15"]


def test_two_rows_per_cta_each_across_two_warps():
    # 128 threads, 2 rows of 256 columns: threads 0..63 hold row 0, 64..127 row 1, 4 columns each
    tiler, tv = lc.make_layout_tv(lc.Layout((2, 64), (64, 1)), lc.Layout((1, 4)))
    assert tiler == (2, 256)
    text = f"""  %r0 = arith.mul %row, %c1 : i32
  %v = gmem.tile %x, %r0, %c0 {{shape = [(2,256)]}} : gview<f32>[(2,256)]
  %w = gmem.tile %y, %r0, %c0 {{shape = [(2,256)]}} : gview<f32>[(2,256)]
  %f = gmem.load %v, %t {{tv = [{tv}]}} : frag<f32>[4]
  %s = frag.reduce %f, %t {{tv = [{tv}], tile = [(2,256)], mode = 1, kind = add}} : frag<f32>[4]
  gmem.store %w, %t, %s {{tv = [{tv}]}}"""
    module = parse_module(kernel(text, block=128), file="two.tile")
    x = np.random.default_rng().standard_normal((2, 256)).astype(np.float32)
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y, "n": 2}, grid=(1, 1, 1))
    np.testing.assert_allclose(y, np.repeat(x.astype(np.float64).sum(1, keepdims=True), 256, 1), rtol=1e-5)
    assert re.findall(r"bar\.sync\s+(\d+), (\d+);", compile_kernel(module).ptx) == [("15", "128")]


# -- the verifier and the interpreter's check ------------------------------------------------------------------------

def verify_error(text: str) -> str:
    with pytest.raises(VerifyError) as info:
        verify(parse_module(text, file="bad.tile"))
    return str(info.value).splitlines()[0]


def test_a_reduction_across_warps_inside_a_branch_is_refused():
    body = ("  %p = arith.cmp %t, %c1 {pred = lt} : i1\n  scf.if %p {\n"
            + "\n".join("  " + line for line in ROW.replace("KIND", "add").splitlines()) + "\n    scf.yield\n  }")
    assert verify_error(kernel(body)) == (
        "bad.tile:11:5: frag.reduce: a reduction across warps synchronizes the whole CTA, but it is inside scf.if at "
        "bad.tile:7:3, where not every thread of the CTA reaches it (its barrier would wait forever)")


def test_a_reduction_across_warps_needs_the_whole_block():
    assert verify_error(kernel(ROW.replace("KIND", "add"), block=512)) == (
        "bad.tile:9:3: frag.reduce: row 0 spans warps 0-7: a reduction across warps synchronizes the whole CTA, so "
        "tv's thread mode 256:1 must have the block's 512 threads, not 256")


def test_a_reduction_across_warps_needs_each_threads_own_index():
    # the lane as thread operand: every warp would claim warp 0's scratch slots
    body = "  %l = gpu.lane_id : i32\n" + ROW.replace("KIND", "add").replace(
        "%s = frag.reduce %f, %t", "%s = frag.reduce %f, %l")
    assert verify_error(kernel(body)) == (
        "bad.tile:10:3: frag.reduce: a reduction across warps indexes its scratch by the thread operand, which must "
        "be gpu.thread_id {dim = x} of a block (N, 1, 1): each thread's own index")


def test_a_layout_no_butterfly_reduces_is_a_verifier_error():
    body = ("  %a = arith.const {value = 1.0} : f32\n  %f = frag.splat %a : frag<f32>[2]\n"
            "  %s = frag.reduce %f, %t {tv = [(6,2):(2,1)], tile = [(3,4)], mode = 1, kind = add} : frag<f32>[2]")
    message = verify_error(kernel(body, block=6))
    assert message == ("bad.tile:8:3: frag.reduce: tv (6,2):(2,1) cannot be reduced over rows of the (3,4) tile: "
                       "line 0 is held by threads [0, 1, 3, 4], which are not one coset of the thread bits [] that "
                       "keep the line")


def test_threads_that_diverge_around_a_reduction_across_warps_fail_in_the_interpreter():
    # warp 0 runs one iteration more than the others: the GPU's barrier would hang
    body = """  %w = gpu.warp_id : i32
  %z = arith.const {value = 0} : i32
  %is0 = arith.cmp %w, %z {pred = eq} : i1
  %extra = arith.select %is0, %c1, %z : i32
  %hi = arith.add %n, %extra : i32
  scf.for %c0, %hi, %c1 (%i: i32) {
    %v = gmem.tile %x, %c0, %c0 {shape = [(1,2048)]} : gview<f32>[(1,2048)]
    %f = gmem.load %v, %t {tv = [(256,8):(1,256)]} : frag<f32>[8]
    %s = frag.reduce %f, %t {tv = [(256,8):(1,256)], tile = [(1,2048)], mode = 1, kind = add} : frag<f32>[8]
    scf.yield
  }"""
    x = np.ones((1, 2048), np.float32)
    with pytest.raises(InterpreterError, match=r"div.tile:14:5: frag.reduce: a reduction across warps needs every "
                                               r"thread of the CTA, but only threads 0\.\.31 reach it"):
        interpret(parse_module(kernel(body), file="div.tile"), {"x": x, "y": x.copy(), "n": 1})


def test_the_scratch_counts_in_the_budget():
    big = "  %big = smem.alloc : smem<f32>[58104:1]\n"  # 232416 bytes: 32 left, the scratch needs 32 more at 16-aligned
    text = kernel(ROW.replace("KIND", "add"), extra=big)
    plan = smem_plan(parse_module(text).kernels[0].body.ops)
    assert plan.total == 232416 + 32
    verify(parse_module(text))
    over = kernel(ROW.replace("KIND", "add"), extra="  %big = smem.alloc : smem<f32>[58105:1]\n")
    assert verify_error(over) == (
        "bad.tile:10:3: frag.reduce: the CTA's shared memory needs 232464 bytes (alignment padding included), over the "
        "232448 bytes (227 KiB) a Hopper CTA can have; the biggest allocations: %big 232420 B, %s 32 B")


# -- frag.extract and frag.rcp ------------------------------------------------------------------------------------------

RCP = """  %v = gmem.tile %x, %c0, %c0 {shape = [(1,1024)]} : gview<f32>[(1,1024)]
  %w = gmem.tile %y, %c0, %c0 {shape = [(1,1024)]} : gview<f32>[(1,1024)]
  %f = gmem.load %v, %t {tv = [(256,4):(4,1)]} : frag<f32>[4]
  %r = frag.rcp %f {rounding = ROUNDING} : frag<f32>[4]
  %e = frag.extract %r {index = 3} : f32
  %g = frag.splat %e : frag<f32>[4]
  %h = frag.sub %r, %g : frag<f32>[4]
  gmem.store %w, %t, %h {tv = [(256,4):(4,1)]}"""


@pytest.mark.parametrize("rounding, instruction", [("rn", "rcp.rn.f32"), ("approx", "rcp.approx.ftz.f32")])
def test_rcp_and_extract(rounding, instruction):
    module = parse_module(kernel(RCP.replace("ROUNDING", rounding)), file="rcp.tile")
    x = np.random.default_rng().uniform(0.5, 4.0, (1, 1024)).astype(np.float32)
    x[0, 0] = 1e-40                                     # subnormal: flushed to zero by approx → 1/0 = inf
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y, "n": 1}, grid=(1, 1, 1))
    with np.errstate(over="ignore"):
        r = (np.float32(1) / x).astype(np.float32)
    if rounding == "approx":
        r[0, 0] = np.inf
    np.testing.assert_array_equal(y, r - np.repeat(r[:, 3::4], 4, axis=1))
    ptx = compile_kernel(module).ptx
    assert ptx.count(instruction) == 4


def test_rcp_of_a_reduction_is_one_instruction_per_row():
    body = ROW.replace("KIND", "add").replace(
        "  gmem.store %w, %t, %s", "  %r = frag.rcp %s {rounding = rn} : frag<f32>[8]\n  gmem.store %w, %t, %r")
    assert compile_kernel(parse_module(kernel(body))).ptx.count("rcp.rn.f32") == 1


@pytest.mark.parametrize("line, message", [
    ("  %e = frag.extract %f {index = 4} : f32", "index 4 is outside the fragment's 4 values (0 … 3)"),
    ("  %e = frag.extract %f {index = 0} : i32", "result type must be the fragment's element type f32, not i32"),
    ("  %e = frag.extract %t {index = 0} : i32", "the operand must be a frag, not i32"),
    ("  %r = frag.rcp %f {rounding = fast} : frag<f32>[4]", "attribute 'rounding' must be one of approx, rn, not fast"),
    ("  %r = frag.rcp %f : frag<f32>[4]", "missing attribute 'rounding'"),
    ("  %b = frag.cast %f : frag<bf16>[4]\n  %r = frag.rcp %b {rounding = rn} : frag<bf16>[4]",
     "frag.rcp is defined for f32 fragments, not bf16: frag.cast to f32 first"),
])
def test_extract_and_rcp_errors(line, message):
    body = "  %a = arith.const {value = 1.0} : f32\n  %f = frag.splat %a : frag<f32>[4]\n" + line
    error = verify_error(kernel(body))
    assert error.endswith(message), error


# -- on the GPU ---------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["add", "max"])
def test_a_row_across_warps_on_the_gpu(kind):
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    module = parse_module(kernel(ROW.replace("KIND", kind)), file="row.tile")
    x = np.random.default_rng().standard_normal((2, 2048)).astype(np.float32)
    y = np.zeros_like(x)
    jit(module)(x=x, y=y, n=2)
    want = x.astype(np.float64).sum(1, keepdims=True) if kind == "add" else x.max(1, keepdims=True)
    assert np.abs(y - want).max() <= 1e-5 * np.abs(x).sum(1).max()


def tile_kernel(tv: str, tile, mode: int, kind: str = "add") -> str:
    """A kernel reducing one (rows, cols) tile of x into y with ``tv`` (block = tv's threads)."""
    layout = lc.parse(tv)
    values = lc.size(layout[1])
    shape = f"({tile[0]},{tile[1]})"
    return f"""kernel @t(%x: gtensor<f32, 2>, %y: gtensor<f32, 2>) {{grid = (1, 1, 1), block = ({lc.size(layout[0])}, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %v = gmem.tile %x, %c0, %c0 {{shape = [{shape}]}} : gview<f32>[{shape}]
  %w = gmem.tile %y, %c0, %c0 {{shape = [{shape}]}} : gview<f32>[{shape}]
  %f = gmem.load %v, %t {{tv = [{tv}]}} : frag<f32>[{values}]
  %s = frag.reduce %f, %t {{tv = [{tv}], tile = [{shape}], mode = {mode}, kind = {kind}}} : frag<f32>[{values}]
  gmem.store %w, %t, %s {{tv = [{tv}]}}
}}
"""


MULTI = [("((64,4),4):((16,1),4)", (4, 256), 0), ("((8,32),(2,2)):((2,32),(1,16))", (16, 64), 1)]


def tile_reference(x, mode, kind):
    reduce = {"add": np.sum, "max": np.max}[kind]
    axis = 0 if mode == 0 else 1
    return np.broadcast_to(reduce(x.astype(np.float64), axis=axis, keepdims=True), x.shape)


@pytest.mark.parametrize("tv, tile, mode", MULTI)
def test_several_lines_per_thread_across_warps(tv, tile, mode):
    module = parse_module(tile_kernel(tv, tile, mode), file="multi.tile")
    x = np.random.default_rng().standard_normal(tile).astype(np.float32)
    y = np.zeros_like(x)
    interpret(module, {"x": x, "y": y})
    np.testing.assert_allclose(y, tile_reference(x, mode, "add"), rtol=1e-5, atol=1e-5)
    ptx = compile_kernel(module).ptx
    assert re.findall(r"bar\.sync\s+(\d+), (\d+);", ptx) == [("15", "256")]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["add", "max"])
@pytest.mark.parametrize("tv, tile, mode", MULTI)
def test_several_lines_per_thread_across_warps_on_the_gpu(tv, tile, mode, kind):
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    module = parse_module(tile_kernel(tv, tile, mode, kind), file="multi.tile")
    x = np.random.default_rng().standard_normal(tile).astype(np.float32)
    y = np.zeros_like(x)
    jit(module)(x=x, y=y)
    np.testing.assert_allclose(y, tile_reference(x, mode, kind), rtol=1e-5, atol=1e-5)
