"""Causal query tiles aligned to the bottom (``AttentionConfig.align_bottom``, ``build.bottom_aligned_rows``): the rows
the tiling leaves over, in whole warpgroups, come off the first tile (whose rows see the fewest keys) instead of the
last. In the CPU interpreter out and lse match float64 (2 and 3 warpgroups, D = 64, 128 and 256, persistent and grid,
Sq above and below Sk) under random copy schedules with no arrival left on a named barrier; the first tile's
warpgroups past its rows store nothing; the host's tile lengths agree; the config rule and choose_config's pick; on
a GPU (``-m gpu``) the same bits as top-aligned tiles (each row sees the same KV tiles in the same order)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ptxgen.kernels import attention
from ptxgen.kernels.attention import choose_config
from ptxgen.kernels.attention.schedule import kv_tiles_of
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_turn_ring import run_ctas_checking_barriers

CONFIGS = {
    "wg3_persistent": choose_config("bf16", 64, True, seqlens=(2048, 2048)),
    "wg2_persistent": dataclasses.replace(choose_config("bf16", 64, True, seqlens=(1024, 1024)),
                                          consumer_warpgroups=2),
    "d128": choose_config("bf16", 128, True, seqlens=(1024, 1024)),
    "wg3_grid": dataclasses.replace(choose_config("bf16", 64, True, seqlens=(2048, 2048)), persistent=False,
                                    o_buffer=False, continuous_turns=False, item_table=False, q_tiles=1),
    "d256_grid": choose_config("bf16", 256, True),
}
SHAPES = [(1, 4, 2, 300, 300, 3), (2, 2, 1, 200, 150, 4), (1, 3, 3, 260, 500, 5), (1, 2, 1, 64, 90, 2)]


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[3]}x{s[4]}" for s in SHAPES])
def test_interpreter_matches_float64(name, shape):
    config = CONFIGS[name]
    assert config.align_bottom
    b, hq, hkv, sq, sk, ctas = shape
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, "bf16", seed=sq * sk + config.head_dim)
    want = reference(q, k, v, True, config.head_dim ** -0.5)
    if config.persistent:
        out, lse, left = run_ctas_checking_barriers(config, q, k, v, ctas, 3)
        assert left == {}
    else:
        out, lse = attention(q, k, v, causal=True, config=config)
    assert_matches(out, lse, *want, "bf16")


def test_first_tile_stores_only_its_rows():
    """Sq = 300 in 192-row tiles: 84 rows left over, shift 64, tile 0 holds rows 0 … 127 (warpgroups 0 and 1) and
    tile 1 rows 128 … 299. Running tile 0 of head 0 alone (a one-item table) writes rows 0 … 127 and nothing else:
    its warpgroup 2, whose rows 128 … 191 are tile 1's, stores neither O nor lse."""
    from ptxgen.interp import interpret
    from ptxgen.kernels.attention import run

    config = CONFIGS["wg3_persistent"]
    q, k, v = random_problem(1, 1, 1, 300, 300, 64, "bf16", seed=5)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.full((1, 1, 300), np.nan, np.float32)
    args = run.kernel_arguments(q, k, v, out, lse, 0.125, lambda x: x.transpose(0, 2, 1, 3), config, ctas=1)
    args["item_rounds"] = np.array([1], np.int32)
    args["item_list"] = np.array([[1]], np.int32)   # item 1: m_index 1, query tile 0 (causal longest first)
    interpret(run.kernel_module(config), args)
    want, want_lse = reference(q, k, v, True, 0.125)
    assert np.isnan(out[0, 128:].astype(np.float32)).all() and np.isnan(lse[0, 0, 128:]).all()
    assert np.abs(out[0, :128].astype(np.float32) - want[0, :128]).max() < 2e-2
    assert np.abs(lse[0, 0, :128] - want_lse[0, 0, :128]).max() < 1e-4


@pytest.mark.parametrize("sq, bm", [(300, 192), (1024, 192), (2048, 192), (1000, 128), (64, 192), (4096, 128)])
def test_host_tiles_cover_the_rows_once(sq, bm):
    """``kv_tiles_of`` with ``align_bottom``: the tiles' KV counts are those of rows [0, bm − shift), then bm-row
    tiles ending at Sq (shift = 64·⌊(⌈Sq/bm⌉·bm − Sq) / 64⌋)."""
    tiles_m = -(-sq // bm)
    shift = (tiles_m * bm - sq) // 64 * 64
    ends = [min((m + 1) * bm - shift, sq) for m in range(tiles_m)]
    assert ends[-1] == sq and all(b - a <= bm for a, b in zip([0] + ends, ends)) and ends[0] > 0
    got = kv_tiles_of(np.arange(tiles_m), bm, 128, sq, sq, True, align_bottom=True)
    assert got.tolist() == [-(-e // 128) for e in ends]


def test_rule_and_choice():
    with pytest.raises(ValueError, match=r"AttentionConfig.align_bottom = True: .* it needs causal = True$"):
        dataclasses.replace(choose_config("bf16", 64, False), align_bottom=True).validate()
    with pytest.raises(ValueError, match=r"it needs varlen = False$"):
        dataclasses.replace(choose_config("bf16", 64, True, varlen=True), align_bottom=True).validate()
    for d in (64, 128, 256):
        for causal in (False, True):
            for varlen in (False, True):
                config = choose_config("bf16", d, causal, varlen=varlen, seqlens=(2048, 2048))
                assert config.align_bottom is (causal and not varlen)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["wg3_persistent", "wg2_persistent", "wg3_grid"])
def test_gpu_same_bits_as_top_aligned(name):
    torch = torch_or_skip()
    config = CONFIGS[name]
    q = torch.randn(2, 1000, 8, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 1100, 4, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 1100, 4, 64, device="cuda", dtype=torch.bfloat16)
    out, lse = attention(q, k, v, causal=True, config=config)
    top = dataclasses.replace(config, align_bottom=False)
    ref_out, ref_lse = attention(q, k, v, causal=True, config=top)
    torch.cuda.synchronize()
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
