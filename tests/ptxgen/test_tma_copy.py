"""examples/tma_copy.tile: the TMA multistage copy runs in the CPU interpreter and matches numpy exactly (fresh random
inputs, ragged shapes, padded row pitches, every schedule), its builder (ptxgen.kernels.tma_copy) makes other element types and ring
depths, and each planted bug (examples/bugs/tma_copy_*.tile) is caught with its message."""
import pathlib

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import HangError, RaceError, interpret
from ptxgen.ir.text import parse_module
from ptxgen.kernels import tma_copy
from ptxgen.verify import VerifyError, verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(path):
    return parse_module((EXAMPLES / path).read_text(), file=f"examples/{path}")


def padded(m, n, pitch, fill, rng=None):
    """An (m, n) f32 view of an (m, pitch) array (TMA needs row pitches that are multiples of 16 bytes)."""
    base = np.full((m, pitch), fill, dtype=np.float32)
    view = base[:, :n]
    if rng is not None:
        view[:] = rng.standard_normal((m, n))
    return base, view


def run_copy(kernel, x, **kw):
    y = np.full_like(x, -7.0)
    interpret(kernel, {"x": x, "y": y, "m": x.shape[0], "n": x.shape[1]}, **kw)
    return y


@pytest.mark.parametrize("m, n", [(64, 32), (1, 4), (100, 100), (130, 200), (64, 256), (257, 68), (33, 2600)])
def test_copy_matches_numpy(m, n):
    x = np.random.default_rng().standard_normal((m, n)).astype(np.float32)
    y = run_copy(load("tma_copy.tile"), x)
    assert np.array_equal(y, x)


@pytest.mark.parametrize("m, n, pitch", [(77, 37, 40), (5, 3, 4), (65, 33, 36)])
def test_ragged_columns_through_a_padded_pitch(m, n, pitch):
    """N that makes no 16-byte row pitch: the host pads each row (as cudaMallocPitch would) and the map covers the
    (m, n) view; TMA's out-of-bounds rule keeps the padding untouched."""
    rng = np.random.default_rng()
    _xb, x = padded(m, n, pitch, 0.0, rng)
    yb, y = padded(m, n, pitch, -7.0)
    interpret(load("tma_copy.tile"), {"x": x, "y": y, "m": m, "n": n})
    assert np.array_equal(y, x)
    assert np.all(yb[:, n:] == -7.0)


def test_an_unpadded_ragged_pitch_is_encoded_over_the_launchers_pitched_copy():
    """A (8, 37) f32 array has 148-byte rows, which TMA cannot walk; the launcher copies it to a buffer with 160-byte
    rows, and the interpreter encodes the map of that copy (dims (37, 8), stride 160), so the kernel runs."""
    x = np.random.default_rng().standard_normal((8, 37)).astype(np.float32)
    assert np.array_equal(run_copy(load("tma_copy.tile"), x), x)


@pytest.mark.parametrize("schedule", ["eager", 0, 1, 2, 3, 4])
def test_every_schedule_gives_the_same_copy(schedule):
    x = np.random.default_rng().standard_normal((70, 100)).astype(np.float32)
    assert np.array_equal(run_copy(load("tma_copy.tile"), x, schedule=schedule), x)


@pytest.mark.parametrize("dtype, bm, stages, swizzle, m, n", [
    ("bf16", 64, 3, True, 150, 296), ("f32", 128, 4, True, 300, 132), ("f16", 32, 2, True, 33, 200),
    ("f32", 64, 5, True, 64, 400), ("f32", 64, 2, True, 70, 100),    # the SW128 form (the former example)
    ("bf16", 16, 4, False, 40, 600), ("f32", 8, 3, False, 20, 1000),  # plain wide boxes, other depths
])
def test_builder_variants(dtype, bm, stages, swizzle, m, n):
    kernel = tma_copy.build(dtype, bm, stages, swizzle=swizzle)
    verify(kernel)
    x = np.random.default_rng().standard_normal((m, n))
    x = x.astype({"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}[dtype])
    assert np.array_equal(run_copy(kernel, x), x)
    assert np.array_equal(run_copy(kernel, x, schedule=7), x)


def test_a_ring_over_the_smem_budget_is_refused():
    with pytest.raises(VerifyError) as info:
        verify(tma_copy.build("f32", 256, 8, swizzle=True))
    message = str(info.value)
    assert "the CTA's shared memory needs 262272 bytes" in message
    assert "over the 232448 bytes (227 KiB)" in message
    assert "the biggest allocations: %buf 262144 B, %full 64 B, %empty 64 B" in message


# -- planted bugs -------------------------------------------------------------------------------------------------

def test_bug_wrong_expect_tx_is_a_verifier_error():
    with pytest.raises(VerifyError) as info:
        verify(load("bugs/tma_copy_wrong_expect_tx.tile"))
    first = str(info.value).splitlines()[0]
    assert first.startswith("examples/bugs/tma_copy_wrong_expect_tx.tile:")
    assert ("mbarrier.arrive_expect_tx: expect_tx of 8192 bytes on %full[%ps] but the tma.loads that complete on it "
            "deliver 16384 bytes (1 × 16384)") in first


def test_bug_wrong_parity_hangs_naming_barrier_and_phase():
    x = np.zeros((64, 64), dtype=np.float32)
    with pytest.raises(HangError) as info:
        run_copy(load("bugs/tma_copy_wrong_parity.tile"), x)
    message = str(info.value)
    assert message.startswith("examples/bugs/tma_copy_wrong_parity.tile:")
    assert message.splitlines()[0].endswith(": mbarrier.wait: hang: thread 0 (warp 0) waits on %empty[0] for parity 0 "
                                            "(phase 0), but no TMA in flight or arrive can complete it: 1 of 1 "
                                            "arrivals pending")
    assert "%empty[0] is in phase 0 (parity 0) with 1 of 1 arrivals pending and tx-count 0 bytes" in message


def test_bug_swizzle_mismatch_is_a_verifier_error():
    with pytest.raises(VerifyError) as info:
        verify(load("bugs/tma_copy_swizzle_mismatch.tile"))
    lines = str(info.value).splitlines()
    assert len(lines) == 2  # the store and the load
    for line, op in zip(lines, ("tma.store", "tma.load")):
        assert (f"{op}: the smem layout Sw<3,4,3> o 0 o (16,256):(256,1) is swizzled SW128 (Sw<3,4,3>) but the TMA "
                "map does not swizzle") in line


def test_bug_early_store_is_a_race():
    """The consumer's parity is off by one: on the first pass its wait returns at once and the store reads a stage
    whose load has not landed."""
    x = np.ones((16, 512), dtype=np.float32)
    with pytest.raises(RaceError, match=r"tma.store: reads shared memory bytes \[1024, 17408\) of %buf\[%cs\] that the "
                                        r"tma.load issued at .* by thread 0 \(completing on %full\[0\]\) may still be "
                                        r"writing: wait on its barrier first"):
        run_copy(load("bugs/tma_copy_early_store.tile"), x)


def test_bug_early_release_is_a_race_and_wrong_data():
    """The consumer hands a stage back before its store has read it; the next load overwrites it. Deterministic:
    the lazy schedule performs the store's read only at the final store_wait. 16 tiles of 256 columns through 8
    stages: every stage is read after holding its second tile."""
    x = np.random.default_rng().standard_normal((16, 4096)).astype(np.float32)
    kernel = load("bugs/tma_copy_early_release.tile")
    with pytest.raises(RaceError, match=r"tma.load: writes shared memory bytes .* that the tma.store issued at .* "
                                        r"by thread 32 may still be reading: tma.store_wait \{read = true\} first"):
        run_copy(kernel, x)
    y = run_copy(kernel, x, races="ignore")
    assert not np.array_equal(y, x)
    assert np.array_equal(y[:, 2048:], x[:, 2048:])  # the last eight tiles are right ...
    assert np.array_equal(y[:, :2048], x[:, 2048:])  # ... the first eight were overwritten by them before being read
    assert np.array_equal(run_copy(kernel, x, races="ignore"), y)  # and it is the same every time


def test_the_correct_kernel_has_no_race_under_any_schedule():
    x = np.random.default_rng().standard_normal((40, 2500)).astype(np.float32)   # 10 tiles a band: the ring wraps
    kernel = load("tma_copy.tile")
    for schedule in ("lazy", "eager", 11, 12):
        assert np.array_equal(run_copy(kernel, x, schedule=schedule), x)
