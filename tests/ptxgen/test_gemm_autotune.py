"""autotune=True (ptxgen.kernels.gemm.autotune): the candidate list, the keys, the disk round trip of a choice, and
that only a GPU call with autotune=True ever times (CPU: the timing replaced by a spy; GPU: the real timing)."""
import itertools
import uuid

import ml_dtypes
import numpy as np
import pytest

from ptxgen.kernels import matmul
from ptxgen.kernels.gemm import GemmConfig, autotune, choose_config
from ptxgen.kernels.gemm.heuristic import choice_without_narrow_split
from ptxgen.runtime import cache
from standin_torch import standin_torch

SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (64, 28672, 4096), (100, 200, 300), (128, 7168, 18432),
          (448, 11008, 4096), (512, 4096, 4096), (3001, 2999, 2016), (4096, 4096, 4096), (8192, 8192, 8192)]


@pytest.mark.parametrize("dtype, c_row_ok, majors", [
    (dtype, ok, majors) for dtype, ok, majors in itertools.product(
        ["bf16", "f16", "e4m3"], [True, False], [("K", "K"), ("K", "MN"), ("MN", "K")])
    if dtype != "e4m3" or majors == ("K", "K")])   # fp8 wgmma reads K-major operands only
def test_candidates_start_with_the_pick_validate_and_store_c_as_allowed(dtype, c_row_ok, majors):
    for m, n, k in SHAPES:
        pick = choose_config(m, n, k, dtype, a_major=majors[0], b_major=majors[1])
        if pick.epilogue == "tma" and not c_row_ok:   # as the ops do: rows, or a swapped pick's direct epilogue
            pick = pick.replace(epilogue="direct", epilogue_split=1, c_major="N") if pick.swap_ab else \
                pick.replace(epilogue="rows", overlap=0)
        found = autotune.candidates(pick, m, n, k, c_row_ok)
        assert found[0] == pick
        assert len(found) == len(set(found)) <= autotune.MAX_CANDIDATES
        for config in found:
            assert config.validate() is config
            assert c_row_ok or config.epilogue != "tma", config.name
            assert not config.swap_ab or config.epilogue == "direct" or config.c_major == "M"
            assert config.dtype == pick.dtype and config.out_dtype == pick.out_dtype and config.bias == pick.bias
        swapped = [c for c in found if c.swap_ab != pick.swap_ab]
        assert (m <= autotune.SWAP_MAX_M) == bool(swapped) or pick.swap_ab, (m, [c.name for c in found])


def test_candidates_of_an_unswapped_pick_take_the_adjacent_widths():
    """BN halved and doubled, then the next narrower and wider of the heuristic's widths (the wave-filling ones
    included) with as many stages as fit; last the 16-bit 128 × 256 pick's tall form (256 × 128, C in row blocks)."""
    pick = choose_config(4096, 4096, 4096, "bf16")
    assert [c.name for c in autotune.candidates(pick, 4096, 4096, 4096)] == [
        "h128x256s4t2o1", "h128x128s6t2o1", "h128x224s4t2o1", "h128x256s4t2sk", "h256x128s4t2o1"]
    pick = choice_without_narrow_split(384, 4096, 4096, "bf16", deep=False)   # the wave-filling pick under rule 10
    assert [c.name for c in autotune.candidates(pick, 384, 4096, 4096)][:4] == [
        "h128x96s7t", "h128x192s4t", "h128x64s8t", "h128x112s6t"]


def test_candidates_of_a_column_split_pick_start_with_the_rules_without_it():
    """Rule 8's 192-row pick, then what the rules pick without rule 8 (here rule 7's swapped tile), then its own
    neighbours: the other column-split widths and stream-K."""
    pick = choose_config(2112, 1920, 8192, "bf16")
    names = [c.name for c in autotune.candidates(pick, 2112, 1920, 8192)]
    assert names[:2] == ["h192x160s4Ct3", "h128x176s4g1tskxT"]
    assert "h192x144s4Ct3" in names and "h192x160s4Ct3sk" in names
    assert all(GemmConfig.from_name(name).validate() for name in names)


def test_candidates_of_a_mid_m_swapped_pick_are_the_other_widths_that_split_m():
    """Rule 7's pick (C stored by TMA as its transpose): the other widths of ``swapped_mid_widths``, then stages (no
    3-stage neighbour: ``MIN_NEIGHBOUR_STAGES``) and stream-K as for any pick, last the unswapped 128 x 128 tile;
    every swapped one rastered along its columns (rule 9: 448 rows are 2 to 6 tile columns), those from 136 columns
    in 4 stages."""
    pick = choose_config(448, 11008, 4096, "bf16")
    assert [c.name for c in autotune.candidates(pick, 448, 11008, 4096)] == [
        "h128x152s4g1txT", "h128x224s4g1t2xT", "h128x112s6g1txT", "h128x96s6g1txT", "h128x80s6g1txT",
        "h128x152s5g1txT", "h128x152s4g1tskxT", "h128x128s6t"]


def test_candidates_of_a_mid_m_swapped_split_pick_split_their_widths_too():
    """Rule 7's split pick at an M of a few row tiles and a long K: its data-parallel form, the unswapped split tile
    (the pick before s39), then the other widths in k-slices (s39 log section 3: at 388x1024x57344 the 136-, 104- and
    80-wide splits ran 500-507 TFLOP/s against 446 for the unswapped split)."""
    pick = choose_config(388, 1024, 57344, "bf16")
    assert [c.name for c in autotune.candidates(pick, 388, 1024, 57344)] == [
        "h128x200s4g1tzxT", "h128x200s4g1txT", "h128x128s6tez", "h128x136s4g1tzxT", "h128x104s6g1tzxT",
        "h128x80s6g1tzxT", "h128x128s6t"]
    # a width whose tiles leave no room for two slices stays data-parallel
    pick = choose_config(648, 2560, 16384, "bf16")
    names = [c.name for c in autotune.candidates(pick, 648, 2560, 16384)]
    assert names[:4] == ["h128x216s4g1tzxT", "h128x216s4g1txT", "h128x256s4t2ez", "h128x168s4g1txT"]


def test_candidates_of_a_tall_swapped_pick_hold_the_128_row_tile_of_its_width():
    """Rule 7's 256-row pick: the 128-row swapped tiles of every width that splits M, its own first."""
    pick = choose_config(428, 11008, 13824, "bf16")
    names = [c.name for c in autotune.candidates(pick, 428, 11008, 13824)]
    assert names[:3] == ["h256x144s4g1t3xT", "h128x216s4g1txT", "h128x144s4g1txT"]
    assert "h256x144s4g1t3skxT" in names


def test_candidates_of_a_decode_gemm_are_the_documented_ones():
    pick = choose_config(16, 4096, 4096, "bf16")
    assert [c.name for c in autotune.candidates(pick, 16, 4096, 4096)] == [
        "h128x16s8zx", "h128x16s8ska1x", "h128x16s8x", "h128x32s8zx", "h128x16s7zx", "h128x16s9zx", "h128x128s6t"]
    # a C whose rows TMA cannot store: the unswapped neighbour stores by rows
    assert autotune.candidates(pick, 16, 4095, 4096, c_row_ok=False)[-1].name == "h128x128s6r"
    # a 16-bit decode width of 40-56 (M rounded up to 8): BN doubled, then the 64 columns fp8 takes
    pick = choose_config(34, 8192, 8192, "bf16")
    assert [c.name for c in autotune.candidates(pick, 34, 8192, 8192)][:3] == ["h128x40s8x", "h128x80s8x", "h128x64s8x"]


def test_choice_keys_change_with_the_problem_the_device_and_the_toolchain(monkeypatch):
    problem = autotune.problem_key(16, 4096, 4096, "bf16", "bf16", "K", "K", False, True)
    device = ("NVIDIA H100 80GB HBM3", 132, 13000)
    key = cache.choice_key(problem, device)
    assert key == cache.choice_key(problem, device) and len(key) == 64
    assert cache.choice_key(autotune.problem_key(16, 4096, 4096, "bf16", "bf16", "K", "K", True, True), device) != key
    assert cache.choice_key(problem, ("NVIDIA H200", 132, 13000)) != key
    assert cache.choice_key(problem, ("NVIDIA H100 80GB HBM3", 132, 12080)) != key   # another driver
    assert cache.choice_key(problem, ("NVIDIA H100 80GB HBM3", 114, 13000)) != key   # another SM count
    monkeypatch.setattr(cache, "_TOOLCHAIN", {**cache.toolchain(), "sources": "0" * 64})   # edited kernel sources
    assert cache.choice_key(problem, device) != key


def test_a_choice_round_trips_through_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_CHOICES", {})
    problem = autotune.problem_key(16, 4096, 4096, "bf16", "bf16", "K", "K", False, True)
    device = ("stand-in GPU", 132, 13000)
    assert autotune.stored(problem, device) is None
    chosen = GemmConfig.from_name("h128x32s8ska1x")
    autotune.remember(problem, device, chosen, {"h128x16s8ska1x": 0.031, "h128x32s8ska1x": 0.027})
    autotune._CHOICES.clear()                        # a later process: only the disk knows
    assert autotune.stored(problem, device) == chosen
    assert autotune.stored(problem, ("another GPU", 132, 13000)) is None
    (entry,) = tmp_path.glob("*/*.choice")
    entry.write_bytes(entry.read_bytes()[:-3])       # truncated: a miss, never an exception
    autotune._CHOICES.clear()
    assert autotune.stored(problem, device) is None
    assert cache.clear() == 1


def _no_timing(*args, **kwargs):
    raise AssertionError("timed")


@pytest.mark.parametrize("tune", [False, True])
def test_numpy_calls_never_time(monkeypatch, tune):
    """The interpreter's time says nothing about a GPU's: numpy calls run the heuristic's configuration."""
    monkeypatch.setattr(autotune, "time_candidates", _no_timing)
    rng = np.random.default_rng()
    a = rng.standard_normal((3, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 8)).astype(ml_dtypes.bfloat16)
    c = matmul(a, b, sm_count=1, autotune=tune)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want) < 1e-2


def test_config_and_autotune_exclude_each_other():
    a = np.zeros((3, 64), ml_dtypes.bfloat16)
    b = np.zeros((64, 8), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=r"matmul: config=h128x64s8t forces a configuration; autotune=True would "
                                         r"choose one: pass one of them"):
        matmul(a, b, config=GemmConfig.from_name("h128x64s8t"), autotune=True)


def test_gpu_path_times_once_per_problem_and_device_then_reads_the_choice(monkeypatch, tmp_path):
    """With the stand-in torch and a stub driver: autotune=False never times; autotune=True times on its first call,
    runs the chosen configuration, and neither a repeated call nor a later process (memory cleared) times again."""
    from ptxgen.kernels import linalg
    from ptxgen.kernels.gemm import run

    torch, standin, _ = standin_torch(monkeypatch)
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "choices"))
    monkeypatch.setattr(autotune, "device_key", lambda: ("stand-in GPU", 132, 13000))
    timed, ran = [], []

    def time_candidates(configs, launcher, torch_module):
        timed.append([c.name for c in configs])
        chosen = configs[1]
        launcher(chosen)()        # the candidate's site prepared and launched, as the real timing does
        return chosen, {c.name: float(i) for i, c in enumerate(configs)}
    monkeypatch.setattr(autotune, "time_candidates", time_candidates)
    launch = run.run_device

    def recording(config, *args, **kwargs):
        ran.append(config.name)
        return launch(config, *args, **kwargs)
    monkeypatch.setattr(run, "run_device", recording)
    t = standin.tensor
    a = t((128, 128), (128, 1), torch.bfloat16, 0x10000000)
    w = t((256, 128), (128, 1), torch.bfloat16, 0x20000000)
    pick = choose_config(128, 256, 128, "bf16")
    matmul(a, w.t())
    assert timed == [] and ran == [pick.name]
    matmul(a, w.t(), autotune=True)
    second = autotune.candidates(pick, 128, 256, 128)[1]
    assert timed == [[c.name for c in autotune.candidates(pick, 128, 256, 128)]]
    assert ran[-1] == second.name
    matmul(t(a.shape, a.stride(), a.dtype, 0x30000000), w.t(), autotune=True)     # the fast path: nothing chosen
    linalg._FAST.clear()
    autotune._CHOICES.clear()                        # a later process
    matmul(a, w.t(), autotune=True)
    assert len(timed) == 1 and ran[-1] == second.name


@pytest.mark.gpu
def test_gpu_autotune_times_the_candidates_once_and_stays_right():
    """On the GPU: the first autotune=True call of a problem times every candidate with CUDA events (a positive
    median each), the result is right, and a repeated call and a call after the in-memory choice is dropped (a later
    process) time nothing."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    from ptxgen.kernels import linalg

    nonce = uuid.uuid4().hex          # a device key no earlier run stored a choice under
    real_device, real_timing = autotune.device_key, autotune.time_candidates
    records = []

    def timing(configs, launcher, torch_module):
        best, times = real_timing(configs, launcher, torch_module)
        records.append(times)
        return best, times
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(autotune, "device_key", lambda: real_device() + (nonce,))
        mp.setattr(autotune, "time_candidates", timing)
        m, n, k = 16, 4096, 4096
        for call in range(3):
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            c = linalg.linear(a, w, autotune=True)
            want = a.double() @ w.double().T
            torch.cuda.synchronize()
            assert float(torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)) < 1e-2
            if call == 1:
                linalg._FAST.clear()
                autotune._CHOICES.clear()
        assert len(records) == 1
        (times,) = records
        pick = choose_config(m, n, k, "bf16")
        assert set(times) == {cfg.name for cfg in autotune.candidates(pick, m, n, k)}
        assert all(isinstance(ms, float) and ms > 0 for ms in times.values()), times
    finally:
        mp.undo()


@pytest.mark.parametrize("shape, dtype, second", [
    ((1024, 1536, 18432), "bf16", "h128x192s4t3ez"),    # a deep one-wave pick (rule 10): the pick without rule 10
    ((640, 1280, 57344), "e4m3", "h128x64s8k4t"),        # a split pick: what the heuristic picks without split-K
    ((1024, 2048, 18432), "bf16", "h128x256s4t2ez"),    # a data-parallel pick with K >= 8192: the cheapest split
    ((80, 5120, 13824), "bf16", "h128x80s6txT"),         # a swapped split pick: its data-parallel form
    ((101, 1024, 24576), "bf16", "h128x56s6g1tzxT"),     # a narrow split pick (rule 3c): the rules after 3c
    ((987, 7168, 6144), "e4m3", "h128x160s4k4t"),        # fp8's 128 x 224 wave fill: the pick it replaced
    ((31, 18432, 14336), "e4m3", "h128x32s8k4skax"),     # a 256-row decode tile: the 128-row pick it replaced
    ((775, 4096, 57344), "bf16", "h128x160s4g1tskxT"),   # a one-wave swapped tile: the stream-K pick it replaced
    ((135, 2048, 12288), "bf16", "h128x72s6g1txT"),      # two halves of one split tile: their data-parallel form
])
def test_candidates_toggle_split_k_first(shape, dtype, second):
    """Rule 1b: right after the pick, its split-K alternative (the rule between the two fits a few measured shapes)."""
    pick = choose_config(*shape, dtype)
    assert [c.name for c in autotune.candidates(pick, *shape)][1] == second


def test_candidates_of_a_swapped_split_that_rule_3c_yielded_to_hold_the_narrow_split():
    """Rule 3c's narrow split in 2-3 slices yields to the swapped split of the rules after it; autotune times it
    right after the pick's data-parallel form."""
    pick = choose_config(102, 3072, 57344, "bf16")
    assert [c.name for c in autotune.candidates(pick, 102, 3072, 57344)][:3] == [
        "h128x104s6tzxT", "h128x104s6txT", "h128x64s8tez"]


def test_candidates_of_a_tall_decode_pick_hold_both_128_row_schedules():
    """A 256-row decode tile (rule 1 just past one wave) is timed against the 128-row tile it replaced, stream-K on
    every SM and data-parallel, right after the pick."""
    for shape, dtype in (((31, 18432, 14336), "e4m3"), ((37, 18432, 4096), "bf16"), ((16, 19328, 4096), "bf16")):
        pick = choose_config(*shape, dtype)
        assert pick.bm == 256 and pick.swap_ab and not pick.streamk, pick.name
        second, third = autotune.candidates(pick, *shape)[1:3]
        assert (second.bm, third.bm) == (128, 128) and {second.streamk, third.streamk} == {True, False}
        assert second.replace(streamk=False, streamk_every_sm=False) == third.replace(streamk=False,
                                                                                      streamk_every_sm=False)


def test_no_split_alternative_below_the_rule():
    """K under SPLITK_MIN_K, stream-K picks and M of one row tile: no split form joins the candidates."""
    for shape in ((1024, 1536, 4096), (4096, 4096, 16384), (128, 7168, 18432)):
        pick = choose_config(*shape, "bf16")
        assert not any(c.splitk for c in autotune.candidates(pick, *shape)), (shape, pick.name)


def test_unsplit_choice_never_splits():
    """``unsplit_choice`` is the heuristic's unswapped rules without split-K: equal to the pick before rule 10 (the
    deep one-wave tiles) wherever that is no split tile, never a split tile itself."""
    from ptxgen.kernels.gemm.heuristic import unsplit_choice

    for m in (256, 640, 1024, 2048):
        for n in (1280, 1536, 4096):
            for k in (4096, 16384, 28672):
                for dtype in ("bf16", "e4m3"):
                    pick = choice_without_narrow_split(m, n, k, dtype, deep=False)
                    unsplit = unsplit_choice(m, n, k, dtype)
                    assert not unsplit.splitk
                    if not pick.splitk and not pick.swap_ab:
                        assert unsplit == pick, (m, n, k, dtype)
