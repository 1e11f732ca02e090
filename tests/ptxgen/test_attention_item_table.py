"""The persistent kernel's work items dealt by the host (``AttentionConfig.item_table``, ``schedule.item_table``): every
item once, the CTAs' loads within one item of each other where serpentine rounds are not, the CTAs running together
still on neighbouring heads; in the CPU interpreter out and lse match float64 under random copy schedules with no
arrival left on a named barrier; the config rule, choose_config's pick, the bench word; on a GPU (``-m gpu``) the
same against float64 and, bit for bit, against serpentine rounds."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ptxgen.kernels import attention
from ptxgen.kernels.attention import choose_config
from ptxgen.kernels.attention.schedule import ITEM_COST, item_costs, item_table, kv_tiles_of
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_persistent import bench_variant_fields
from test_attention_turn_ring import run_ctas_checking_barriers


def tabled(d=64, causal=True, seqlens=(2048, 2048), **fields):
    """choose_config's persistent kernel with the item table (D = 64: three warpgroups; D = 128: two)."""
    return dataclasses.replace(choose_config("bf16", d, causal, seqlens=seqlens), item_table=True, **fields)


def serpentine_loads(cost, grid):
    """The CTAs' loads under ``schedule.work_item``'s serpentine rounds."""
    loads = np.zeros(grid)
    for t in range(len(cost)):
        r, position = divmod(t, grid)
        loads[grid - 1 - position if r % 2 else position] += cost[t]
    return loads


def test_item_costs_follow_the_decode():
    """Item t is query tile ⌈Sq/bm⌉ − 1 − t mod ⌈Sq/bm⌉ (causal, longest first) of head-batch t / ⌈Sq/bm⌉: its cost is
    ``ITEM_COST`` + that tile's KV tiles; non-causal every item sees every KV tile."""
    causal = dataclasses.replace(tabled(128, seqlens=(1024, 1024)), align_bottom=False)
    assert item_costs(causal, 1, 1, 300, 300).tolist() == [ITEM_COST + 3, ITEM_COST + 2, ITEM_COST + 1]
    got = item_costs(causal, 2, 3, 1000, 700)
    tiles = kv_tiles_of(np.arange(8)[::-1], 128, 128, 1000, 700, True)
    assert got.tolist() == (ITEM_COST + np.tile(tiles, 6)).tolist()
    plain = tabled(128, causal=False, seqlens=(1024, 1024))
    assert item_costs(plain, 2, 1, 300, 500).tolist() == [ITEM_COST + 4] * 6


@pytest.mark.parametrize("d, seqlens, heads, batches, ctas", [
    (64, (1024, 1024), 32, 16, 132), (64, (2560, 2560), 32, 6, 132), (64, (16384, 16384), 32, 1, 132),
    (128, (4096, 4096), 16, 4, 132), (64, (300, 200), 3, 2, 7), (64, (100, 900), 4, 1, 5), (128, (1, 1), 2, 1, 132),
])
def test_table_deals_every_item_once_and_evenly(d, seqlens, heads, batches, ctas):
    """Every item exactly once; CTA c's row lists its ``rounds[c]`` items, then −1; no CTA's load exceeds the average
    by more than the longest item, and at the DeepSeek-like shapes by at most 1.2% where serpentine rounds give
    3-27%; each CTA's items are in window order, so at any round the CTAs' items lie within a few rounds' worth of
    heads."""
    sq, sk = seqlens
    config = tabled(d, seqlens=seqlens)
    rounds, table = item_table(config, heads, batches, sq, sk, ctas)
    cost = item_costs(config, heads, batches, sq, sk)
    grid = min(len(cost), ctas)
    assert rounds.shape == (grid,) and table.shape == (grid, rounds.max())
    dealt = np.concatenate([table[c, :rounds[c]] for c in range(grid)])
    assert sorted(dealt.tolist()) == list(range(len(cost)))
    assert all((table[c, rounds[c]:] == -1).all() for c in range(grid))
    loads = np.array([cost[table[c, :rounds[c]]].sum() for c in range(grid)])
    assert loads.max() <= loads.mean() + cost.max()
    if ctas == 132 and len(cost) > 4 * ctas:
        assert loads.max() <= 1.012 * loads.mean()
        assert serpentine_loads(cost, grid).max() >= 1.03 * loads.mean()
        tiles_m = -(-sq // config.bm)
        for r in range(int(rounds.min())):
            pairs = table[:, r] // tiles_m
            assert pairs.max() - pairs.min() <= 8 * ctas // tiles_m + 1, r


CASES = [  # (config, B, Hq, Hkv, Sq, Sk, ctas)
    (tabled(), 1, 4, 2, 300, 300, 3),                                  # three warpgroups, GQA
    (tabled(), 2, 2, 1, 200, 150, 4),                                  # Sq > Sk: rows that see no key
    (tabled(128, seqlens=(1024, 1024)), 1, 3, 3, 260, 500, 5),         # two warpgroups, lazy rescaling
    (tabled(128, causal=False, seqlens=(1024, 1024)), 1, 4, 2, 300, 300, 3),   # non-causal: equal items
]


@pytest.mark.parametrize("config, b, hq, hkv, sq, sk, ctas", CASES)
@pytest.mark.parametrize("schedule", ["lazy", 3])
def test_interpreter_matches_float64(config, b, hq, hkv, sq, sk, ctas, schedule):
    """Each CTA of the grid run on its own with races reported: no arrival left on a named barrier, and out and lse
    equal float64's."""
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, "bf16", seed=sq * sk + config.head_dim)
    out, lse, left = run_ctas_checking_barriers(config, q, k, v, ctas, schedule)
    assert left == {}
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), "bf16")


def test_kernel_follows_the_table():
    """A table that deals item 0 to nobody and the rest in reverse to CTA 0 alone: the rows of item 0 (the last query
    tile of head 0, causal longest first: rows 128 … 299 of Sq = 300 in bottom-aligned 192-row tiles) stay as they
    were, every other row is float64's — so the kernel runs what the table says, not its own rounds."""
    from ptxgen.interp import interpret
    from ptxgen.kernels.attention import run

    config = tabled()
    q, k, v = random_problem(1, 2, 1, 300, 300, 64, "bf16", seed=21)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.zeros((1, 2, 300), np.float32)
    args = run.kernel_arguments(q, k, v, out, lse, 0.125, lambda x: x.transpose(0, 2, 1, 3), config, ctas=3)
    assert args["item_rounds"].sum() == 4   # 2 query tiles of 192 rows × 2 heads, on a grid of 3
    args["item_rounds"] = np.array([3, 0, 0], np.int32)
    args["item_list"] = np.full((3, 3), -1, np.int32)
    args["item_list"][0] = [3, 2, 1]
    interpret(run.kernel_module(config), args)
    want, want_lse = reference(q, k, v, True, 0.125)
    assert config.align_bottom
    assert np.isnan(out[0, 128:, 0].astype(np.float32)).all()     # item 0: head 0's rows 128 … 299
    done = np.ones(out.shape, bool)
    done[0, 128:, 0] = False
    got = out.astype(np.float32)[done]
    assert np.abs(got - want[done]).max() < 2e-2


@pytest.mark.parametrize("fields, words", [
    ({"persistent": False, "o_buffer": False, "continuous_turns": False}, ["persistent = True"]),
    ({"varlen": True, "epilogue": "rows"}, ["varlen = False"]),
    ({"causal": False, "pack_lone": True, "stages": 5}, ["pack_lone = False"]),
])
def test_rules(fields, words):
    config = dataclasses.replace(tabled(), **fields)
    with pytest.raises(ValueError) as err:
        config.validate()
    assert str(err.value).startswith("AttentionConfig.item_table = True")
    for word in words:
        assert word in str(err.value)


def test_choose_config_tables_causal_persistent_kernels():
    """Every causal dense persistent kernel takes the table; non-causal, varlen and grid kernels do not; D = 64 causal
    loops of more than 1024 keys are persistent at every length (varlen up to 4096)."""
    for d in (64, 128, 256):
        for causal in (False, True):
            for seqlens in (None, (1024, 1024), (2048, 2048), (8192, 8192), (16384, 16384)):
                for varlen in (False, True):
                    config = choose_config("bf16", d, causal, varlen=varlen, seqlens=seqlens).validate()
                    assert config.item_table is (config.persistent and causal and not varlen), (d, causal, seqlens)
    assert choose_config("bf16", 64, True, seqlens=(16384, 16384)).persistent
    assert not choose_config("bf16", 64, True, varlen=True, seqlens=(8192, 8192)).persistent
    assert choose_config("bf16", 64, True, varlen=True, seqlens=(4096, 4096)).persistent


def test_bench_variant_words():
    variant_fields = bench_variant_fields()
    assert variant_fields("table") == {"item_table": True}
    assert variant_fields("persist-obuf-ring-table") == {"persistent": True, "o_buffer": True,
                                                         "continuous_turns": True, "item_table": True}


@pytest.mark.gpu
@pytest.mark.parametrize("d, seqlens", [(64, (2560, 2560)), (128, (1000, 3001))])
def test_gpu_matches_float64_and_serpentine(d, seqlens):
    """On the GPU: within 1e-2 of float64, and the same bits as serpentine rounds (each item's arithmetic does not
    depend on the CTA that runs it)."""
    torch = torch_or_skip()
    sq, sk = seqlens
    q = torch.randn(2, sq, 8, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, sk, 4, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, sk, 4, d, device="cuda", dtype=torch.bfloat16)
    config = tabled(d, seqlens=seqlens)
    out, lse = attention(q, k, v, causal=True, config=config)
    ref_out, ref_lse = attention(q, k, v, causal=True, config=dataclasses.replace(config, item_table=False))
    torch.cuda.synchronize()
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    from test_attention import assert_matches_torch, torch_reference

    want, want_lse = torch_reference(torch, q, k, v, True, d ** -0.5)
    assert_matches_torch(torch, out, lse, want, want_lse)
