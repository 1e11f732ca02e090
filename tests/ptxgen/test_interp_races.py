"""Generic shared-memory races between threads (spec/tile-ir.md §6, ``ptxgen.happens_before``) and the first line of
hang reports: a read of what another thread wrote, a write of what another read or wrote, a TMA store of what other
threads wrote and a write of what a TMA store read are races unless a barrier.cta, a barrier.named both threads
reach, or an mbarrier arrive → wait orders them; the same thread never races with itself."""
import pathlib

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import HangError, RaceError, interpret
from ptxgen.ir.text import parse_module
from ptxgen.kernels.gemm import GemmConfig, build

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
FIX = "a barrier.cta, a barrier.named both reach, or an mbarrier arrive then wait must come between them"


def two_groups(first: str, second: str, sync: str = "") -> str:
    """A CTA of 128 threads and a 32-float smem buffer %s: threads 0..31 do ``first`` on element t (``ACCESS`` with
    thread operand %t), then ``sync``, then threads [lo, lo + 32) do ``second`` on element t - lo (thread operand %u;
    ``%lo`` is a parameter). Line 14 is the first access, the second follows ``sync``."""
    return f"""kernel @k(%out: gtensor<f32, 1>, %lo: i32) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %s = smem.alloc : smem<f32>[32:1]
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %c32 = arith.const {{value = 32}} : i32
  %hi = arith.add %lo, %c32 : i32
  %u = arith.sub %t, %lo : i32
  %mine = arith.cmp %t, %c32 {{pred = lt}} : i1
  %ge = arith.cmp %t, %lo {{pred = ge}} : i1
  %lt = arith.cmp %t, %hi {{pred = lt}} : i1
  %theirs = arith.and %ge, %lt : i1
  %tf = arith.cast %t : f32
  %v = frag.splat %tf : frag<f32>[1]
  scf.if %mine {{
{access(first, "%t")}
  }}
{sync}  scf.if %theirs {{
{access(second, "%u")}
  }}
}}
"""


def access(kind: str, thread: str) -> str:
    if kind == "store":
        return f"    smem.store %s, {thread}, %v {{tv = [(32,1):(1,0)]}}"
    return (f"    %r{thread[1]} = smem.load %s, {thread} {{tv = [(32,1):(1,0)]}} : frag<f32>[1]\n"
            f"    %o{thread[1]} = gmem.tile %out, %c0 {{shape = [128]}} : gview<f32>[128]\n"
            f"    gmem.store %o{thread[1]}, %t, %r{thread[1]} {{tv = [(128,1):(1,0)]}}")


def run(text: str, lo: int):
    """Run ``two_groups`` text; → what the threads that loaded read (element t - lo at out[t])."""
    out = np.full(128, -1.0, np.float32)
    interpret(parse_module(text, file="races.tile"), {"out": out, "lo": lo})
    return out[lo:lo + 32]


# -- read after write ------------------------------------------------------------------------------------------------

def test_a_load_of_what_another_thread_stored_without_a_barrier_is_a_race():
    with pytest.raises(RaceError) as e:
        run(two_groups("store", "load"), 64)
    assert str(e.value) == (
        "races.tile:18:5: smem.load: reads shared memory bytes [1024, 1028) of %s that thread 0 (warp 0) wrote with "
        f"smem.store at races.tile:15:5, and nothing orders that write before this read by thread 64 (warp 2): {FIX}")


def test_a_cta_barrier_orders_the_store_before_the_load():
    assert np.array_equal(run(two_groups("store", "load", "  barrier.cta\n"), 64), np.arange(32, dtype=np.float32))


def test_the_same_thread_never_races_with_itself():
    assert np.array_equal(run(two_groups("store", "load"), 0), np.arange(32, dtype=np.float32))


NAMED_LOW = "  %in_named = arith.cmp %t, %c64 {pred = lt} : i1\n  scf.if %in_named {\n" \
            "    barrier.named {id = 1, threads = 64}\n  }\n"


def test_a_named_barrier_orders_only_the_threads_that_reach_it():
    text = two_groups("store", "load", "  %c64 = arith.const {value = 64} : i32\n" + NAMED_LOW)
    # warps 0 and 1 meet at barrier 1: warp 1 reads warp 0's values safely
    assert np.array_equal(run(text, 32), np.arange(32, dtype=np.float32))
    # warp 2 never reached it: its read is not ordered after warp 0's writes
    with pytest.raises(RaceError, match=r"reads shared memory bytes \[1024, 1028\) of %s that thread 0 \(warp 0\) "
                                        r"wrote with smem.store at races.tile:15:5, and nothing orders that write "
                                        r"before this read by thread 64 \(warp 2\)"):
        run(text, 64)


def test_a_named_barrier_of_every_thread_orders_them_all():
    assert np.array_equal(run(two_groups("store", "load", "  barrier.named {id = 2, threads = 128}\n"), 96),
                          np.arange(32, dtype=np.float32))


# -- write after read, write after write -----------------------------------------------------------------------------

def test_a_store_over_what_another_thread_read_is_a_race():
    with pytest.raises(RaceError) as e:
        run(two_groups("load", "store"), 32)
    assert str(e.value) == (
        "races.tile:20:5: smem.store: writes shared memory bytes [1024, 1028) of %s that thread 0 (warp 0) read with "
        f"smem.load at races.tile:15:5, and nothing orders that read before this write by thread 32 (warp 1): {FIX}")
    run(two_groups("load", "store", "  barrier.cta\n"), 32)


def test_two_stores_of_one_byte_by_two_threads_are_a_race():
    with pytest.raises(RaceError) as e:
        run(two_groups("store", "store"), 32)
    assert str(e.value) == (
        "races.tile:18:5: smem.store: writes shared memory bytes [1024, 1028) of %s that thread 0 (warp 0) wrote "
        f"with smem.store at races.tile:15:5, and nothing orders that write before this write by thread 32 (warp 1): "
        f"{FIX}")
    run(two_groups("store", "store", "  barrier.cta\n"), 32)


# -- mbarriers order what their arrivals released ----------------------------------------------------------------------

def mbarrier_kernel(store_then_arrive: bool) -> str:
    """Thread 0 stores element 0 and arrives on %bar[0] (in that order, or arrives first); every thread waits for
    the phase and reads element 0."""
    store = "    smem.store %s, %t, %v {tv = [(1,1):(0,0)]}\n"
    arrive = "    mbarrier.arrive %bar, %c0\n"
    first = store + arrive if store_then_arrive else arrive + store
    return f"""kernel @k(%out: gtensor<f32, 1>) {{grid = (1, 1, 1), block = (64, 1, 1)}} {{
  %s = smem.alloc : smem<f32>[1:1]
  %bar = mbarrier.alloc {{count = 1}} : mbarrier<1>
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %leader = arith.cmp %t, %c0 {{pred = eq}} : i1
  %v = frag.splat %c0 : frag<i32>[1]
  %w = frag.cast %v : frag<f32>[1]
  scf.if %leader {{
    mbarrier.init %bar, %c0 {{arrivals = 1}}
    fence.mbarrier_init
  }}
  barrier.cta
  scf.if %leader {{
{first.replace("%v", "%w")}  }}
  mbarrier.wait %bar, %c0, %c0
  %r = smem.load %s, %t {{tv = [(64,1):(0,0)]}} : frag<f32>[1]
  %o = gmem.tile %out, %c0 {{shape = [1]}} : gview<f32>[1]
  gmem.store %o, %t, %r {{tv = [(64,1):(0,0)]}}
}}
"""


def test_an_mbarrier_arrival_releases_the_writes_before_it_to_the_waiters():
    out = np.full(1, -1.0, np.float32)
    interpret(parse_module(mbarrier_kernel(True), file="mbar.tile"), {"out": out})
    assert out[0] == 0.0


def test_a_write_after_the_arrival_is_not_released():
    with pytest.raises(RaceError, match=r"^mbar.tile:19:3: smem.load: reads shared memory bytes \[1024, 1028\) of "
                                        r"%s that thread 0 \(warp 0\) wrote with smem.store at mbar.tile:16:5, and "
                                        r"nothing orders that write before this read by thread 1 \(warp 0\)"):
        interpret(parse_module(mbarrier_kernel(False), file="mbar.tile"), {"out": np.zeros(1, np.float32)})


# -- TMA stores: their source is read by the issuing thread, asynchronously --------------------------------------------

def tma_store_kernel(before_store: str, after_wait: str) -> str:
    """Every thread stores its element of the (8,16) tile %s, fences, ``before_store``; thread 0 stores the tile to
    %y with TMA and waits for the read; ``after_wait``; every thread stores its element again."""
    return f"""kernel @k(%y: tmap<f32, 2>[(8,16):(16,1)]) {{grid = (1, 1, 1), block = (128, 1, 1)}} {{
  %s = smem.alloc : smem<f32>[(8,16):(16,1)]
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %leader = arith.cmp %t, %c0 {{pred = eq}} : i1
  %tf = arith.cast %t : f32
  %v = frag.splat %tf : frag<f32>[1]
  smem.store %s, %t, %v {{tv = [(128,1):(1,0)]}}
  fence.proxy_async
{before_store}  scf.if %leader {{
    tma.store %y, %s, %c0, %c0
    tma.store_commit
    tma.store_wait {{pending = 0, read = true}}
  }}
{after_wait}  smem.store %s, %t, %v {{tv = [(128,1):(1,0)]}}
}}
"""


def test_a_tma_store_of_what_other_threads_wrote_needs_a_barrier_before_it():
    with pytest.raises(RaceError) as e:
        interpret(parse_module(tma_store_kernel("", "  barrier.cta\n"), file="store.tile"),
                  {"y": np.zeros((8, 16), np.float32)})
    assert str(e.value) == (
        "store.tile:11:5: tma.store: reads shared memory bytes [1028, 1032) of %s that thread 8 (warp 0) wrote with "
        "smem.store at store.tile:8:3, and nothing orders that write before this read by thread 0 (warp 0): " + FIX)


def test_a_write_over_a_tma_store_source_needs_the_issuer_wait_and_a_barrier():
    with pytest.raises(RaceError) as e:
        interpret(parse_module(tma_store_kernel("  barrier.cta\n", ""), file="store.tile"),
                  {"y": np.zeros((8, 16), np.float32)})
    assert str(e.value) == (
        "store.tile:16:3: smem.store: writes shared memory bytes [1088, 1092) of %s that thread 0 (warp 0) read with "
        "tma.store at store.tile:12:5, and nothing orders that read before this write by thread 1 (warp 0): thread 0 "
        "must wait for that store to read (tma.store_wait {read = true}), then a barrier both reach must come before "
        "the write")
    y = np.zeros((8, 16), np.float32)
    interpret(parse_module(tma_store_kernel("  barrier.cta\n", "  barrier.cta\n"), file="store.tile"), {"y": y})
    assert np.array_equal(y.ravel(order="F"), np.arange(128, dtype=np.float32))   # element t at (t % 8, t // 8)


def test_races_ignore_skips_the_generic_check():
    out = np.full(128, -1.0, np.float32)
    interpret(parse_module(two_groups("store", "load"), file="races.tile"), {"out": out, "lo": 64}, races="ignore")
    assert np.array_equal(out[64:96], np.arange(32, dtype=np.float32))


# -- the examples without their barriers --------------------------------------------------------------------------------

WARP_SUMS = """
kernel @warp_sums(%x: gtensor<f32, 1>, %y: gtensor<f32, 1>) {grid = (1, 1, 1), block = (512, 1, 1)} {
  %parts = smem.alloc : smem<f32>[16:1]
  %thread = gpu.thread_id {dim = x} : i32
  %lane = gpu.lane_id : i32
  %zero = arith.const {value = 0} : i32
  %v = gmem.tile %x, %zero {shape = [512]} : gview<f32>[512]
  %f = gmem.load %v, %thread {tv = [(512,1):(1,0)]} : frag<f32>[1]
  %warp = frag.reduce %f, %thread {tv = [((32,16),1):((16,1),0)], tile = [(16,32)], mode = 1, kind = add} : frag<f32>[1]
  %is_lead = arith.cmp %lane, %zero {pred = eq} : i1
  scf.if %is_lead {
    smem.store %parts, %thread, %warp {tv = [((32,16),1):((0,1),0)]}
    scf.yield
  }
  barrier.cta
  %all = smem.load %parts, %thread {tv = [(512,16):(0,1)]} : frag<f32>[16]
  %sums = frag.reduce %all, %thread {tv = [(512,16):(1,512)], tile = [(512,16)], mode = 1, kind = add} : frag<f32>[16]
  %total = frag.extract %sums {index = 0} : f32
  %w = gmem.tile %y, %zero {shape = [512]} : gview<f32>[512]
  %out = frag.splat %total : frag<f32>[1]
  gmem.store %w, %thread, %out {tv = [(512,1):(1,0)]}
}
"""


def test_warp_sums_exchange_without_its_cta_barrier_races():
    """The two-level sum the l2norm example wrote by hand before frag.reduce went across warps: lane 0 of each warp
    publishes the warp's sum, every thread reads all 16; without the barrier between, the read races."""
    x = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    y = np.zeros_like(x)
    interpret(parse_module(WARP_SUMS, file="sums.tile"), {"x": x, "y": y})
    np.testing.assert_allclose(y, np.full(512, x.astype(np.float64).sum()), rtol=1e-5)
    module = parse_module(WARP_SUMS.replace("  barrier.cta\n", ""), file="sums.tile")
    with pytest.raises(RaceError, match=r"^sums.tile:\d+:\d+: smem.load: reads shared memory bytes \[\d+, \d+\) of "
                                        r"%parts that thread \d+ \(warp \d+\) wrote with smem.store at sums.tile:"):
        interpret(module, {"x": x, "y": np.zeros_like(x)})


def test_gemm_tma_epilogue_without_the_barrier_before_its_stores_races():
    kernel = build(GemmConfig("bf16", bn=128, stages=2, epilogue="tma"))
    body = kernel.kernels[0].body if hasattr(kernel, "kernels") else kernel.body

    def regions(r):
        yield r
        for op in r.ops:
            for inner in op.regions:
                yield from regions(inner)

    # the named barrier between the warpgroup's stmatrix (after fence.proxy_async) and its leader's TMA stores
    region, index = next((r, i) for r in regions(body) for i, op in enumerate(r.ops)
                         if op.name == "barrier.named" and i and r.ops[i - 1].name == "fence.proxy_async")
    del region.ops[index]
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16), rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    with pytest.raises(RaceError, match=r"tma.store: reads shared memory bytes \[\d+, \d+\) of %sc.tile\[%cw\]"
                                        r"\S* that thread \d+ \(warp \d+\) wrote with smem.stmatrix at"):
        interpret(kernel, {"a": a, "b": b, "c": np.zeros((128, 128), ml_dtypes.bfloat16), "m": 128, "n": 128, "k": 64,
                           "sms": 1})


# -- hang reports: one short first line ----------------------------------------------------------------------------------

def gemm_text():
    return (EXAMPLES / "gemm.tile").read_text()


def run_gemm_text(text, check=True):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16), rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    interpret(parse_module(text, file="gemm.tile"), {"a": a, "b": b, "c": np.zeros((64, 64), ml_dtypes.bfloat16),
                                                     "m": 64, "n": 64, "k": 64}, check=check)


def test_a_hang_on_bytes_no_copy_brings_leads_with_the_waiting_consumer():
    text = gemm_text().replace("{bytes = 32768}", "{bytes = 40960}")
    with pytest.raises(HangError) as e:
        run_gemm_text(text, check=False)
    first, *details = str(e.value).splitlines()
    assert first == ("gemm.tile:55:7: pipeline.wait: hang: role consumer (warps 4-7) waits on %pipe.full[0] for "
                     "parity 0 (phase 0) at iteration 0 (stage 0), but no TMA in flight or arrive can complete it: 0 "
                     "of 1 arrivals, 8192 expect-tx bytes pending")
    assert details[0] == "  every role is blocked:"
    assert details[-1] == "  no asynchronous copy is in flight"


def test_a_missing_release_hang_leads_with_the_producer_role():
    text = gemm_text().replace("      pipeline.release %pipe, %s2\n", "")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 320)).astype(ml_dtypes.bfloat16), rng.standard_normal((64, 320)).astype(ml_dtypes.bfloat16)
    with pytest.raises(HangError) as e:
        interpret(parse_module(text, file="gemm.tile"), {"a": a, "b": b, "c": np.zeros((64, 64), ml_dtypes.bfloat16),
                                                         "m": 64, "n": 64, "k": 320})
    first = str(e.value).splitlines()[0]
    assert first == ("gemm.tile:40:9: pipeline.acquire: hang: role producer (thread 0, warp 0) waits on %pipe.empty[0] "
                     "for parity 0 (phase 0) at iteration 4 (stage 0), but no TMA in flight or arrive can complete it: "
                     "8 of 8 arrivals pending")


def test_a_named_barrier_hang_says_how_many_arrived():
    text = two_groups("store", "load", "  %c64 = arith.const {value = 64} : i32\n" + NAMED_LOW.replace(
        "threads = 64", "threads = 96"))
    with pytest.raises(HangError) as e:
        run(text, 32)
    assert str(e.value).splitlines()[0] == (
        "races.tile:20:5: barrier.named: hang: threads 0..63 (warps 0-1) wait at named barrier 1 (threads), but only "
        "64 of 96 arrived and no one else can arrive")


def test_a_cluster_hang_leads_with_one_cta():
    text = """kernel @w(%x: gtensor<f32, 1>) {grid = (2, 1, 1), block = (64, 1, 1), cluster = (2, 1, 1)} {
  %bar = mbarrier.alloc {count = 1} : mbarrier<1>
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %leader = arith.cmp %t, %c0 {pred = eq} : i1
  scf.if %leader {
    mbarrier.init %bar, %c0 {arrivals = 64}
    fence.mbarrier_init
  }
  barrier.cluster
  mbarrier.wait %bar, %c0, %c0
  barrier.cluster
}
"""
    with pytest.raises(HangError) as e:
        interpret(parse_module(text, file="cl.tile"), {"x": np.zeros(1, np.float32)})
    first, *details = str(e.value).splitlines()
    assert first == ("cl.tile:11:3: mbarrier.wait: hang: CTA rank 0: threads 0..63 (warps 0-1) wait on %bar[0] for "
                     "parity 0 (phase 0), but no TMA in flight or arrive can complete it: 64 of 64 arrivals pending")
    assert details[0] == "  every CTA of the cluster is blocked:"
    assert [d.split(" at ")[0] for d in details[1:3]] == ["  CTA rank 0 (block (0, 0, 0))",
                                                          "  CTA rank 1 (block (1, 0, 0))"]
