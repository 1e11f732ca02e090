"""examples/gemm.tile: the warp-specialized wgmma GEMM runs in the CPU interpreter and matches a float64 reference
on fresh random inputs, for M, N, K that are not multiples of the tile (TMA zero fill, skipped stores); its builder
(ptxgen.kernels.gemm.simple) makes f16, other N tiles and pipeline depths; each planted bug (examples/bugs/gemm_*.tile) is caught with its
message."""
import pathlib

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import HangError, RaceError, interpret
from ptxgen.ir.text import parse_module
from ptxgen.kernels.gemm.simple import SimpleGemmConfig
from ptxgen.kernels.gemm.simple import build as build_simple
from ptxgen.verify import VerifyError

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(path):
    return parse_module((EXAMPLES / path).read_text(), file=f"examples/{path}")


HOST = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}  # the host dtypes of the kernels' element types


def operands(m, n, k, dtype="bf16", rng=None):
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(HOST[dtype])
    b = rng.standard_normal((n, k)).astype(HOST[dtype])
    return a, b


def run_gemm(kernel, a, b, **kw):
    """C = A·Bᵀ in the interpreter; C has the operands' element type, as the kernels' c parameters."""
    m, n, k = a.shape[0], b.shape[0], a.shape[1]
    c = np.full((m, n), -7.0, dtype=a.dtype)
    interpret(kernel, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k}, **kw)
    return c


def rel_err(got, want):
    return np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)


@pytest.mark.parametrize("m, n, k", [(128, 128, 64), (150, 136, 200), (1, 8, 8), (129, 257, 72), (64, 300, 520)])
def test_gemm_matches_float64(m, n, k):
    a, b = operands(m, n, k)
    c = run_gemm(load("gemm.tile"), a, b)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    # bf16 output: each element is rounded to 8 mantissa bits (relative error about 2^-9 / sqrt(3))
    assert c.dtype == ml_dtypes.bfloat16 and rel_err(c, want) < 1e-2


@pytest.mark.parametrize("dtype, bn, stages, m, n, k", [
    ("f16", 128, 4, 100, 120, 136),
    ("bf16", 256, 3, 130, 260, 200),
    ("bf16", 64, 2, 70, 100, 328),
])
def test_builder_variants(dtype, bn, stages, m, n, k):
    a, b = operands(m, n, k, dtype)
    c = run_gemm(build_simple(SimpleGemmConfig(dtype, bn, stages)), a, b)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert rel_err(c, want) < 1e-2


def test_a_random_copy_schedule_gives_the_same_product():
    a, b = operands(140, 130, 264)
    want = run_gemm(load("gemm.tile"), a, b)
    for seed in (1, 2):
        assert np.array_equal(run_gemm(load("gemm.tile"), a, b, schedule=seed), want)


def test_a_random_schedule_varies_the_order_the_warpgroups_run_in(monkeypatch):
    """gpu.roles runs each warpgroup as its own stream; the lazy schedule steps them in role order, a seeded one in a
    random order after each round of waits (more interleavings for the hang and race checks), and the product is
    the same. The order the streams first start in is recorded through the interpreter's ``steps`` (each
    warpgroup's first masked region)."""
    import ptxgen.interp as interp

    a, b = operands(64, 64, 128)
    inner = interp._CTA.steps
    starts = []

    def recorded(self, region, mask=None):
        if mask is not None:
            starts.append(int(np.flatnonzero(mask)[0]) // 128)
        return inner(self, region, mask)

    monkeypatch.setattr(interp._CTA, "steps", recorded)
    want = run_gemm(load("gemm.tile"), a, b)
    orders = {tuple(dict.fromkeys(starts))}   # each warpgroup's first masked region: its stream's start
    assert orders == {(0, 1, 2)}
    for seed in range(8):
        starts.clear()
        assert np.array_equal(run_gemm(load("gemm.tile"), a, b, schedule=seed), want)
        orders.add(tuple(dict.fromkeys(starts)))
    assert len(orders) > 1, orders


# -- planted bugs -------------------------------------------------------------------------------------------------

def test_bug_wrong_expect_tx_is_a_verifier_error():
    with pytest.raises(VerifyError) as e:
        run_gemm(load("bugs/gemm_wrong_expect_tx.tile"), *operands(64, 64, 64))
    assert str(e.value) == (
        "examples/bugs/gemm_wrong_expect_tx.tile:43:9: pipeline.acquire: expect_tx of 16384 bytes on %pipe.full[%s] "
        "but the tma.loads that complete on it deliver 32768 bytes (2 × 16384)")


def test_bug_swizzle_mismatch_is_a_verifier_error():
    with pytest.raises(VerifyError) as e:
        run_gemm(load("bugs/gemm_swizzle_mismatch.tile"), *operands(64, 64, 64))
    assert str(e.value) == (
        "examples/bugs/gemm_swizzle_mismatch.tile:48:9: tma.load: the smem layout Sw<3,4,3> o 0 o "
        "((8,16),(64,1)):((64,512),(1,0)) is swizzled SW128 (Sw<3,4,3>) but the TMA map does not swizzle")


def test_bug_wrong_parity_hangs_naming_roles_barriers_and_phases():
    with pytest.raises(HangError) as e:
        run_gemm(load("bugs/gemm_wrong_parity.tile"), *operands(64, 64, 64))
    first, *details = str(e.value).splitlines()
    assert first == ("examples/bugs/gemm_wrong_parity.tile:46:9: pipeline.acquire: hang: role producer (thread 0, "
                     "warp 0) waits on %pipe.empty[0] for parity 0 (phase 0) at iteration 4 (stage 0), but no TMA in "
                     "flight or arrive can complete it: 8 of 8 arrivals pending")
    assert details[:2] == [
        "  every role is blocked:",
        "  role producer at examples/bugs/gemm_wrong_parity.tile:46:9 (pipeline.acquire): iteration 4 (stage 0): "
        "thread 0 waits on %pipe.empty[0] for the phase of parity 0 to complete, but %pipe.empty[0] is in phase 0 "
        "(parity 0) with 8 of 8 arrivals pending and tx-count 0 bytes (wait(P) returns once the barrier's current "
        "phase parity differs from P)"]
    for line, (wg, threads) in zip(details[2:], ((1, "128..255"), (2, "256..383"))):   # a stream per warpgroup
        assert line.startswith(f"  role consumer (warpgroup {wg}) at examples/bugs/gemm_wrong_parity.tile:61:7 "
                               f"(pipeline.wait): iteration 0 (stage 0): threads {threads} wait on %pipe.full[0] for "
                               "the phase of parity 0"), line


def test_bug_missing_release_hangs_once_the_ring_is_full():
    a, b = operands(64, 64, 256)       # 4 k-tiles: exactly the ring, no stage is reused: no hang
    run_gemm(load("bugs/gemm_missing_release.tile"), a, b)
    with pytest.raises(HangError) as e:
        run_gemm(load("bugs/gemm_missing_release.tile"), *operands(64, 64, 320))
    first = str(e.value).splitlines()[0]
    assert first == ("examples/bugs/gemm_missing_release.tile:43:9: pipeline.acquire: hang: role producer (thread 0, "
                     "warp 0) waits on %pipe.empty[0] for parity 0 (phase 0) at iteration 4 (stage 0), but no TMA in "
                     "flight or arrive can complete it: 8 of 8 arrivals pending")


def test_bug_early_release_is_a_race_with_the_wgmma_in_flight():
    with pytest.raises(RaceError) as e:
        run_gemm(load("bugs/gemm_early_release.tile"), *operands(64, 64, 320))
    assert str(e.value) == (
        "examples/bugs/gemm_early_release.tile:47:9: tma.load: writes shared memory bytes [1024, 9216) of %sa[%s] that "
        "the wgmma.mma issued at examples/bugs/gemm_early_release.tile:63:7 by warpgroup 1 may still be reading: "
        "wgmma.wait for its group first")
