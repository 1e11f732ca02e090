"""The interpreter's asynchronous model (spec/tile-ir.md §6): mbarrier phases, the parity rule, arrival and tx
counting, when TMA copies happen (lazily, eagerly, at random), shared-memory addresses through swizzled layouts,
race and proxy-fence checks, hang reports and lock-step divergence errors."""
import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import byte_address
from ptxgen.interp import HangError, InterpreterError, RaceError, interpret, run_cta
from ptxgen.ir.ops import SMEM_BASE, describe_threads, distinct_sorted, from_bytes, to_bytes
from ptxgen.ir.ops.mbarrier import BarrierArray
from ptxgen.ir.ops.smem import byte_offsets, physical
from ptxgen.ir.text import parse_module
from ptxgen.ir.types import BF16, F16, F32, I32

PLAIN = "(8,16):(16,1)"
SW64 = "Sw<2,4,3> o 0 o (8,16):(16,1)"


def kernel(body, box=PLAIN, smem_layout=None, block=128):
    """A one-CTA kernel with an (8,16) f32 map %x (box ``box``), a map %y of the same box, a gtensor %out, the smem
    tile %s of ``smem_layout`` (default: the box), and a barrier array %bar of 2; ``body`` follows a prelude."""
    smem_layout = smem_layout or box
    text = (f"kernel @k(%x: tmap<f32, 2>[{box}], %y: tmap<f32, 2>[{box}], %out: gtensor<f32, 2>) "
            f"{{grid = (1, 1, 1), block = ({block}, 1, 1)}} {{\n"
            f"  %s = smem.alloc : smem<f32>[{smem_layout}]\n"
            "  %bar = mbarrier.alloc {count = 2} : mbarrier<2>\n"
            "  %t = gpu.thread_id {dim = x} : i32\n"
            "  %c0 = arith.const {value = 0} : i32\n"
            "  %c1 = arith.const {value = 1} : i32\n"
            "  %leader = arith.cmp %t, %c0 {pred = eq} : i1\n"
            + body + "}\n")
    return parse_module(text, file="async.tile")


INIT = """  scf.if %leader {
    mbarrier.init %bar, %c0 {arrivals = ARRIVALS}
    mbarrier.init %bar, %c1 {arrivals = 1}
    fence.mbarrier_init
  }
  barrier.cta
"""


def init(arrivals=1):
    return INIT.replace("ARRIVALS", str(arrivals))


LOAD = """  scf.if %leader {
    mbarrier.arrive_expect_tx %bar, %c0 {bytes = 512}
    tma.load %x, %s, %bar, %c0, %c0, %c0
  }
"""

READ_OUT = """  %f = smem.load %s, %t {tv = [(128,1):(1,0)]} : frag<f32>[1]
  %o = gmem.tile %out, %c0, %c0 {shape = [(8,16)]} : gview<f32>[(8,16)]
  gmem.store %o, %t, %f {tv = [(128,1):(1,0)]}
"""


def args(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    return {"x": x, "y": np.full((8, 16), -7.0, np.float32), "out": np.full((8, 16), -7.0, np.float32)}


def bar(cta, i=0, name="bar"):
    arr = next(a for a in cta.state["barriers"] if a.name == name)
    return arr.states[i]


# -- the barrier model ---------------------------------------------------------------------------------------------

def test_wait_for_parity_1_on_a_fresh_barrier_returns_at_once():
    cta = run_cta(kernel(init() + "  mbarrier.wait %bar, %c0, %c1\n"), args())
    st = bar(cta)
    assert (st.phase, st.pending, st.expected, st.tx) == (0, 1, 1, 0)


def test_wait_for_parity_0_on_a_fresh_barrier_hangs():
    with pytest.raises(HangError) as info:
        run_cta(kernel(init() + "  mbarrier.wait %bar, %c0, %c0\n"), args())
    message = str(info.value)
    first, *details = message.splitlines()
    assert first == ("async.tile:14:3: mbarrier.wait: hang: threads 0..127 (warps 0-3) wait on %bar[0] for parity 0 "
                     "(phase 0), but no TMA in flight or arrive can complete it: 1 of 1 arrivals pending")
    assert details[0].startswith("  threads 0..127 wait on %bar[0] for the phase of parity 0 to complete, but %bar[0] "
                                 "is in phase 0 (parity 0) with 1 of 1 arrivals pending and tx-count 0 bytes")
    assert details[-1] == "  no asynchronous copy is in flight"


@pytest.mark.parametrize("arrivals, phase, pending", [(128, 1, 128), (64, 2, 64), (100, 1, 72), (129, 0, 1)])
def test_every_active_thread_arrives_once(arrivals, phase, pending):
    cta = run_cta(kernel(init(arrivals) + "  mbarrier.arrive %bar, %c0\n"), args())
    st = bar(cta)
    assert (st.phase, st.pending, st.tx) == (phase, pending, 0)


def test_phase_parity_flips_and_waits_follow_it():
    """Two phases completed (parity 0 again): wait(1) returns, wait(0) now waits for phase 2."""
    body = init(64) + "  mbarrier.arrive %bar, %c0\n  mbarrier.wait %bar, %c0, %c1\n"
    assert bar(run_cta(kernel(body), args())).phase == 2
    with pytest.raises(HangError, match=r"phase 2 \(parity 0\) with 64 of 64 arrivals pending"):
        run_cta(kernel(body + "  mbarrier.wait %bar, %c0, %c0\n"), args())


class _Ix:
    def fail(self, op, message):
        raise InterpreterError(message)

    def release(self, threads, into):   # no happens-before order in these unit tests
        return into


class _Op:
    name, loc = "test", "here"


def _fresh(arrivals):
    arr = BarrierArray("full", 1, SMEM_BASE)
    st = arr.states[0]
    st.initialised, st.expected, st.pending = True, arrivals, arrivals
    st.init_threads, st.init_op, st.fenced, st.published = {0}, _Op(), True, True
    return arr, st


def test_tx_count_holds_the_phase_until_the_bytes_land():
    ix, op = _Ix(), _Op()
    arr, st = _fresh(1)
    arr.expect_tx(ix, op, 0, 100, 0)
    arr.arrive(ix, op, 0, 0)
    assert (st.phase, st.pending, st.tx) == (0, 0, 100)
    arr.complete_tx(ix, op, 0, 60)
    assert (st.phase, st.tx) == (0, 40)
    arr.complete_tx(ix, op, 0, 40)
    assert (st.phase, st.pending, st.tx) == (1, 1, 0)


def test_bytes_may_land_before_they_are_expected():
    ix, op = _Ix(), _Op()
    arr, st = _fresh(1)
    arr.complete_tx(ix, op, 0, 512)
    assert (st.phase, st.tx) == (0, -512)
    arr.expect_tx(ix, op, 0, 512, 0)
    arr.arrive(ix, op, 0, 0)
    assert (st.phase, st.pending, st.tx) == (1, 1, 0)


def test_an_arrival_beyond_the_phase_is_an_error():
    ix, op = _Ix(), _Op()
    arr, _st = _fresh(1)
    arr.expect_tx(ix, op, 0, 512, 0)
    arr.arrive(ix, op, 0, 0)
    with pytest.raises(InterpreterError, match=r"thread 3 arrives on %full\[0\], which is in phase 0 \(parity 0\) "
                                               r"with 0 of 1 arrivals pending and tx-count 512 bytes: more arrivals "
                                               r"than its phase expects \(the phase still waits for 512 bytes"):
        arr.arrive(ix, op, 0, 3)


def test_barriers_must_be_initialised_and_published():
    with pytest.raises(InterpreterError, match=r"%bar\[0\] is used before mbarrier.init"):
        run_cta(kernel("  mbarrier.arrive %bar, %c0\n"), args())
    unpublished = """  scf.if %leader {
    mbarrier.init %bar, %c0 {arrivals = 1}
    fence.mbarrier_init
  }
  %second = arith.cmp %t, %c1 {pred = eq} : i1
  scf.if %second {
    mbarrier.arrive %bar, %c0
  }
"""
    with pytest.raises(InterpreterError, match=r"thread 1 uses %bar\[0\] before its init \(at async.tile:9:5, by "
                                               r"thread 0\) was made visible: fence.mbarrier_init, then barrier.cta"):
        run_cta(kernel(unpublished), args())
    unfenced = """  scf.if %leader {
    mbarrier.init %bar, %c0 {arrivals = 1}
    mbarrier.arrive_expect_tx %bar, %c0 {bytes = 512}
    tma.load %x, %s, %bar, %c0, %c0, %c0
  }
"""
    with pytest.raises(InterpreterError, match=r"%bar\[0\] is handed to the TMA unit before fence.mbarrier_init"):
        run_cta(kernel(unfenced), args())


def test_parity_must_be_a_bit():
    body = init() + "  %two = arith.const {value = 2} : i32\n  %p = arith.add %two, %c0 : i32\n" \
                    "  mbarrier.wait %bar, %c0, %p\n"
    with pytest.raises(InterpreterError, match=r"parity 2 is not 0 or 1"):
        run_cta(kernel(body), args())


# -- when copies happen --------------------------------------------------------------------------------------------

def test_a_tma_load_lands_only_when_a_wait_needs_it():
    cta = run_cta(kernel(init() + LOAD), args(), finish=False)
    assert len(cta.inflight) == 1 and cta.inflight[0].kind == "load"
    st = bar(cta)
    assert (st.phase, st.pending, st.tx) == (0, 0, 512)
    assert not cta.smem.any()
    a = args()
    cta = run_cta(kernel(init() + LOAD + "  mbarrier.wait %bar, %c0, %c0\n" + READ_OUT), a)
    assert not cta.inflight and (bar(cta).phase, bar(cta).tx) == (1, 0)
    assert np.array_equal(a["out"], a["x"])


@pytest.mark.parametrize("box", [PLAIN, SW64])
def test_tma_writes_the_box_layout_and_smem_load_reads_it_back(box):
    a = args(3)
    cta = run_cta(kernel(init() + LOAD + "  mbarrier.wait %bar, %c0, %c0\n" + READ_OUT, box=box), a)
    assert np.array_equal(a["out"], a["x"])
    # the bytes sit where layoutc says: element (r, c) at byte_address(box, f32, (r, c), base)
    layout = lc.parse(box)
    for r, c in [(0, 0), (1, 0), (3, 5), (7, 15)]:
        addr = byte_address(layout, "f32", (r, c), SMEM_BASE)
        assert from_bytes(cta.smem[addr:addr + 4][None, :], F32)[0] == a["x"][r, c]
    if box == SW64:  # rows are 64 bytes apart; row 2's first 16-byte chunk is swapped with its second
        assert byte_address(layout, "f32", (2, 0), SMEM_BASE) == SMEM_BASE + 128 + 16


def test_reading_a_stage_before_its_wait_is_a_race_or_stale_data():
    body = init() + LOAD + READ_OUT + "  mbarrier.wait %bar, %c0, %c0\n"
    with pytest.raises(RaceError, match=r"smem.load: reads shared memory bytes \[1024, 1536\) of %s that the "
                                        r"tma.load issued at async.tile:\d+:5 by thread 0 \(completing on %bar\[0\]\) "
                                        r"may still be writing: wait on its barrier first"):
        interpret(kernel(body), args())
    a = args()
    interpret(kernel(body), a, races="ignore")            # lazy: the load has not landed yet
    assert np.all(a["out"] == 0.0)
    a = args()
    interpret(kernel(body), a, races="ignore", schedule="eager")   # eager: it landed at issue
    assert np.array_equal(a["out"], a["x"])


STORE_THEN_OVERWRITE = """  %one = arith.const {value = 1.0} : f32
  %two = arith.const {value = 2.0} : f32
  %a = frag.splat %one : frag<f32>[1]
  %b = frag.splat %two : frag<f32>[1]
  smem.store %s, %t, %a {tv = [(128,1):(1,0)]}
  fence.proxy_async
  barrier.cta
  scf.if %leader {
    tma.store %y, %s, %c0, %c0
    tma.store_commit
  }
  smem.store %s, %t, %b {tv = [(128,1):(1,0)]}
  scf.if %leader {
    tma.store_wait {pending = 0, read = true}
  }
"""


def test_a_tma_store_reads_its_source_when_it_happens():
    with pytest.raises(RaceError, match=r"smem.store: writes shared memory bytes \[1024, 1536\) of %s that the "
                                        r"tma.store issued at .* by thread 0 may still be reading: "
                                        r"tma.store_wait \{read = true\} first"):
        interpret(kernel(STORE_THEN_OVERWRITE), args())
    a = args()
    interpret(kernel(STORE_THEN_OVERWRITE), a, races="ignore")
    assert np.all(a["y"] == 2.0)      # lazy: the store read the source at its store_wait
    a = args()
    interpret(kernel(STORE_THEN_OVERWRITE), a, races="ignore", schedule="eager")
    assert np.all(a["y"] == 1.0)


STORE = """  %one = arith.const {value = 1.0} : f32
  %a = frag.splat %one : frag<f32>[1]
  smem.store %s, %t, %a {tv = [(128,1):(1,0)]}
  FENCE
  barrier.cta
  scf.if %leader {
    tma.store %y, %s, %c0, %c0
    tma.store_commit
    tma.store_wait {pending = 0, read = READ}
  }
"""


def test_store_wait_read_leaves_the_global_write_in_flight():
    a = args()
    cta = run_cta(kernel(STORE.replace("FENCE", "fence.proxy_async").replace("READ", "true")), a, finish=False)
    assert len(cta.inflight) == 1 and cta.inflight[0].state == "read"
    assert np.all(a["y"] == -7.0)
    cta.finish()
    assert np.all(a["y"] == 1.0)
    a = args()
    cta = run_cta(kernel(STORE.replace("FENCE", "fence.proxy_async").replace("READ", "false")), a, finish=False)
    assert not cta.inflight and np.all(a["y"] == 1.0)


def test_a_tma_store_of_unfenced_generic_writes_is_an_error():
    with pytest.raises(RaceError, match=r"tma.store: reads bytes of %s \(from byte 1024\) that threads 0..127 wrote "
                                        r"with smem.store and did not order with fence.proxy_async"):
        interpret(kernel(STORE.replace("FENCE", "").replace("READ", "true")), args())


def test_store_wait_pending_keeps_the_most_recent_groups_in_flight():
    body = """  %one = arith.const {value = 1.0} : f32
  %a = frag.splat %one : frag<f32>[1]
  smem.store %s, %t, %a {tv = [(128,1):(1,0)]}
  fence.proxy_async
  barrier.cta
  %c8 = arith.const {value = 8} : i32
  %c16 = arith.const {value = 16} : i32
  scf.if %leader {
    tma.store %y, %s, %c0, %c0
    tma.store_commit
    tma.store %y, %s, %c8, %c0
    tma.store %y, %s, %c0, %c16
    tma.store_commit
    tma.store_wait {pending = 1, read = false}
  }
"""
    a = args()
    a["y"] = np.full((16, 32), -7.0, np.float32)
    cta = run_cta(kernel(body), a, finish=False)
    assert np.all(a["y"][:8, :16] == 1.0) and np.all(a["y"][8:, :] == -7.0) and np.all(a["y"][:, 16:] == -7.0)
    assert [c.state for c in cta.inflight] == ["issued", "issued"]
    with pytest.raises(InterpreterError, match="may still be reading shared memory"):
        cta.finish()


def test_random_schedules_perform_copies_at_random_times_but_never_wrong():
    racy = init() + LOAD + READ_OUT + "  mbarrier.wait %bar, %c0, %c0\n"
    correct = init() + LOAD + "  mbarrier.wait %bar, %c0, %c0\n" + READ_OUT
    outcomes = set()
    for seed in range(20):
        a = args(seed)
        interpret(kernel(racy), a, schedule=seed, races="ignore")
        outcomes.add("landed" if np.array_equal(a["out"], a["x"]) else "stale" if np.all(a["out"] == 0) else "?")
        a = args(seed)
        interpret(kernel(correct), a, schedule=seed)
        assert np.array_equal(a["out"], a["x"])
    assert outcomes == {"landed", "stale"}


def test_the_cta_may_not_end_with_copies_in_flight():
    with pytest.raises(InterpreterError, match=r"the CTA ends while the tma.load issued at .* by thread 0 \(completing "
                                               r"on %bar\[0\]\) is still in flight: nothing waited for it"):
        interpret(kernel(init() + LOAD), args())
    no_wait = STORE.replace("FENCE", "fence.proxy_async").replace("    tma.store_wait {pending = 0, read = READ}\n", "")
    with pytest.raises(InterpreterError, match=r"the CTA ends while the tma.store issued at .* may still be reading "
                                               r"shared memory"):
        interpret(kernel(no_wait), args())


# -- hangs and lock-step divergence --------------------------------------------------------------------------------

def test_too_many_expected_bytes_hang_with_the_tx_count():
    body = init() + LOAD.replace("512", "1024") + "  mbarrier.wait %bar, %c0, %c0\n"
    with pytest.raises(HangError) as info:
        interpret(kernel(body), args(), check=False)
    first, *details = str(info.value).splitlines()
    assert first.endswith(": mbarrier.wait: hang: threads 0..127 (warps 0-3) wait on %bar[0] for parity 0 (phase 0), "
                          "but no TMA in flight or arrive can complete it: 0 of 1 arrivals, 512 expect-tx bytes pending")
    assert ("%bar[0] is in phase 0 (parity 0) with 0 of 1 arrivals pending and tx-count 512 bytes") in details[0]
    assert details[-1] == "  no asynchronous copy is in flight"


def test_copies_on_other_barriers_are_named_in_a_hang():
    body = init() + LOAD.replace("%bar, %c0 {", "%bar, %c1 {").replace("%bar, %c0, %c0, %c0", "%bar, %c1, %c0, %c0") \
        + "  mbarrier.wait %bar, %c0, %c0\n"
    with pytest.raises(HangError, match=r"in flight, but unable to help: the tma.load issued at .* \(completing on "
                                        r"%bar\[1\]\)"):
        interpret(kernel(body), args())


def test_threads_of_one_wait_must_agree():
    body = init() + "  %c2 = arith.const {value = 2} : i32\n  %i = arith.rem %t, %c2 : i32\n" \
                    "  mbarrier.wait %bar, %i, %c1\n"
    with pytest.raises(InterpreterError, match=r"the waiting threads disagree on \(barrier, parity\): \[\(0, 1\), "
                                               r"\(1, 1\)\]"):
        interpret(kernel(body), args())


def test_a_cta_barrier_in_divergent_code_is_an_error():
    with pytest.raises(InterpreterError, match=r"barrier.cta: reached by thread 0 only: threads 1..127 never arrive"):
        interpret(kernel("  scf.if %leader {\n    barrier.cta\n  }\n"), args())


# -- shared-memory addresses ---------------------------------------------------------------------------------------

class _Cache:
    def __init__(self):
        self.cache = {}

    def cached(self, key, compute):
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]


@pytest.mark.parametrize("layout, dtype", [
    ("Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))", BF16), ("Sw<2,4,3> o 3 o (16,32):(32,1)", F16),
    ("(8,16):(1,8)", F32), ("Sw<1,4,3> o 0 o (8,8,2):(8,1,64)", F32),
])
@pytest.mark.parametrize("base", [0, 1024, 1024 + 128, 2048 + 384])
def test_vectorised_addresses_equal_layoutc(layout, dtype, base):
    L = lc.parse(layout)
    got = physical(L, base + byte_offsets(_Cache(), L, dtype))
    name = {"bf16": "bf16", "f16": "f16", "f32": "f32"}[dtype.name]
    want = [byte_address(L, name, i, base) for i in range(lc.size(L))]
    assert got.tolist() == want


def test_smem_slice_moves_the_runtime_base_by_the_stage_stride():
    body = """  %buf = smem.alloc {align = 512} : smem<f32>[Sw<2,4,3> o 0 o (8,16,3):(16,1,128)]
  %c2 = arith.const {value = 2} : i32
  %stage = smem.slice %buf, %c2 : smem<f32>[Sw<2,4,3> o 0 o (8,16):(16,1)]
  %tf = arith.cast %t : f32
  %v = frag.splat %tf : frag<f32>[1]
  smem.store %stage, %t, %v {tv = [(128,1):(1,0)]}
"""
    cta = run_cta(kernel(body), args())
    # %s (512 B) sits at 1024; %bar (16 B) at 1536; %buf at the next 512-aligned address, 2048; stage 2 at +1024
    stage = lc.parse("Sw<2,4,3> o 0 o (8,16):(16,1)")
    for i in (0, 1, 9, 127):
        addr = byte_address(stage, "f32", i, 2048 + 2 * 128 * 4)
        assert from_bytes(cta.smem[addr:addr + 4][None, :], F32)[0] == i


def test_smem_slice_index_out_of_range_is_an_error():
    body = """  %buf = smem.alloc : smem<f32>[(8,16,3):(16,1,128)]
  %c3 = arith.add %c1, %c1 : i32
  %c4 = arith.add %c3, %c1 : i32
  %stage = smem.slice %buf, %c4 : smem<f32>[(8,16):(16,1)]
"""
    with pytest.raises(InterpreterError, match=r"smem.slice: index 3 \(thread 0\) is outside the last mode's 3 entries "
                                               r"of %buf"):
        interpret(kernel(body), args())


@pytest.mark.parametrize("t", [F32, BF16, F16, I32])
def test_element_bytes_round_trip(t):
    x = np.array([0.0, 1.5, -2.25, 384.0], dtype=np.float32) if t.is_float else np.array([0, 1, -5, 1 << 30])
    raw = to_bytes(x, t)
    assert raw.shape == (4, t.bits // 8)
    assert np.array_equal(from_bytes(raw, t), x.astype(from_bytes(raw, t).dtype))


def test_describe_threads():
    assert describe_threads([0]) == "thread 0"
    assert describe_threads(range(128)) == "threads 0..127"
    assert describe_threads([0, 32, 33, 34, 64]) == "threads 0, 32..34, 64"


@pytest.mark.parametrize("shape, high", [((0,), 5), ((1,), 5), ((2, 3), 2), ((128, 16, 2), 40000), ((4096,), 10)])
def test_distinct_sorted_is_numpys_unique(shape, high):
    """The interpreter's byte-address sets: the flattened distinct values, ascending, as ``np.unique`` gives them
    (empty, single, all-repeated and sparse arrays, any rank)."""
    values = np.random.default_rng().integers(0, high, size=shape).astype(np.int64)
    got = distinct_sorted(values)
    assert got.dtype == np.int64 and np.array_equal(got, np.unique(values))


def test_a_tma_load_over_unfenced_generic_writes_is_an_error():
    def body(fence):
        return init() + f"""  %one = arith.const {{value = 1.0}} : f32
  %a = frag.splat %one : frag<f32>[1]
  smem.store %s, %t, %a {{tv = [(128,1):(1,0)]}}
{fence}  barrier.cta
""" + LOAD + "  mbarrier.wait %bar, %c0, %c0\n" + READ_OUT
    with pytest.raises(RaceError, match=r"tma.load: writes bytes of %s \(from byte 1024\) that threads 0..127 wrote "
                                        r"with smem.store and did not order with fence.proxy_async"):
        interpret(kernel(body("")), args())
    a = args()
    interpret(kernel(body("  fence.proxy_async\n")), a)
    assert np.array_equal(a["out"], a["x"])


def test_if_yielding_a_fragment_defined_in_a_branch_no_thread_takes():
    """A branch no thread takes yields placeholders for the values defined inside it; the merge takes the shape of
    the other branch (regression: a frag result crashed when every thread took the else branch)."""
    from ptxgen.interp import interpret
    from ptxgen.ir.text import parse_module

    text = """kernel @k(%x: gtensor<f32, 1>, %n: i32) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %big = arith.const {value = 100} : i32
  %p = arith.cmp %n, %big {pred = gt} : i1
  %v = gmem.tile %x, %c0 {shape = [64]} : gview<f32>[64]
  %z = arith.const {value = 0.5} : f32
  %half = frag.splat %z : frag<f32>[2]
  %f = scf.if %p : frag<f32>[2] {
    %l = gmem.load %v, %t {tv = [(32,2):(2,1)]} : frag<f32>[2]
    %d = frag.add %l, %l : frag<f32>[2]
    scf.yield %d
  } {
    scf.yield %half
  }
  gmem.store %v, %t, %f {tv = [(32,2):(2,1)]}
}"""
    m = parse_module(text, file="if.tile")
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    y = x.copy()
    interpret(m, {"x": y, "n": 200})
    assert np.array_equal(y, 2 * x)
    interpret(m, {"x": y, "n": 1})
    assert np.all(y == 0.5)
