"""fp8 in the interpreter's memory: the OCP E4M3FN / E5M2 codes, nearest-even rounding including subnormals, and the
byte round trip smem and TMA use."""
import numpy as np
import pytest

from ptxgen.ir.ops import fp8_encode, fp8_table, from_bytes, round_to, to_bytes
from ptxgen.ir.types import SCALARS


@pytest.mark.parametrize("name, code, value", [
    ("e4m3", 0x38, 1.0), ("e4m3", 0x7E, 448.0), ("e4m3", 0x08, 2.0 ** -6), ("e4m3", 0x01, 2.0 ** -9),
    ("e4m3", 0xB8, -1.0), ("e4m3", 0x00, 0.0),
    ("e5m2", 0x3C, 1.0), ("e5m2", 0x7B, 57344.0), ("e5m2", 0x04, 2.0 ** -14), ("e5m2", 0x01, 2.0 ** -16),
    ("e5m2", 0x7C, np.inf), ("e5m2", 0xFC, -np.inf),
])
def test_known_codes(name, code, value):
    assert fp8_table(name)[code] == np.float32(value)


@pytest.mark.parametrize("name, nans", [("e4m3", {0x7F, 0xFF}), ("e5m2", {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})])
def test_nan_codes(name, nans):
    assert set(np.nonzero(np.isnan(fp8_table(name)))[0].tolist()) == nans


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_rounding_is_to_the_nearest_code_and_bytes_round_trip(name):
    t = SCALARS[name]
    table = fp8_table(name)
    finite = np.sort(np.unique(table[np.isfinite(table)]))
    rng = np.random.default_rng()
    x = np.concatenate([rng.standard_normal(3000) * 40, rng.standard_normal(3000) * 1e-3]).astype(np.float32)
    x = np.clip(x, finite[0], finite[-1])
    r = round_to(x, t)
    distance = np.abs(finite[None, :] - x[:, None].astype(np.float64))
    assert np.allclose(np.abs(r - x), distance.min(axis=1))        # nearest (ties: either neighbour is nearest)
    raw = to_bytes(r, t)
    assert raw.shape == x.shape + (1,)
    assert np.array_equal(from_bytes(raw, t), r)
    codes = fp8_encode(r, name)
    assert np.array_equal(table[codes], r)
