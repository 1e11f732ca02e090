"""Lone last query tiles packed into shared work items (``AttentionConfig.pack_lone``): where a head's last query tile
holds at most 64 rows, w consecutive (batch, head) pairs' lone tiles run as one item, warpgroup v on pair v's rows
against pair v's K and V. In the CPU interpreter the kernel's out and lse match float64 (GQA, a last group of fewer
pairs, every tile lone, a last tile that is not lone at run time); it runs fewer items; under random copy schedules no
arrival is left on a named barrier; the config rules and choose_config's pick; on a GPU (``-m gpu``) the same
against float64 and against the unpacked kernel."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ptxgen.ir.ops import OPS
from ptxgen.kernels import attention
from ptxgen.kernels.attention import build, choose_config
from ptxgen.kernels.attention.config import last_tile_rows
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_turn_ring import run_ctas_checking_barriers


def packed(stages=5, **fields):
    """choose_config's D = 64 non-causal persistent kernel (three warpgroups, O in its own tile, the turn ring across
    items) with ``pack_lone``."""
    base = choose_config("bf16", 64, False, seqlens=(1024, 1024))
    return dataclasses.replace(base, pack_lone=True, stages=stages, **fields)


def items_packed(b, hq, sq, w=3) -> int:
    """The work items of ``schedule.packed_items``: each pair's full tiles, and one item per group of w pairs' lone
    tiles."""
    tiles = -(-sq // (64 * w))
    lone = int(last_tile_rows(sq, 64 * w) <= 64)
    pairs = b * hq
    return pairs * (tiles - lone) + lone * -(-pairs // w)


def count_items(monkeypatch):
    """{"items": Q loads the interpreter runs from now on (one ``mbarrier.arrive_expect_tx`` on Q's barrier per
    item; the K/V pipelines' loads go through ``pipeline.acquire``)}."""
    counts = {"items": 0}
    definition = OPS["mbarrier.arrive_expect_tx"]
    inner = type(definition).interpret

    def counted(self, op, ix):
        counts["items"] += 1
        return inner(self, op, ix)

    monkeypatch.setattr(type(definition), "interpret", counted)
    return counts


# (B, Hq, Hkv, Sq, Sk, ctas): lone last tiles of 8 … 64 rows, ragged KV tiles, GQA, a last group of 1 or 2 pairs
CASES = [
    (1, 4, 2, 200, 300, 3),     # 4 pairs: a group of 3 and one of 1; lone tile of 8 rows; GQA
    (2, 2, 2, 60, 130, 2),      # Sq < 64: every tile lone, 4 pairs = 3 + 1
    (1, 3, 1, 448, 128, 4),     # a lone tile of exactly 64 rows, one full group; 3 query heads on 1 KV head
    (1, 5, 5, 250, 200, 5),     # 5 pairs = 3 + 2
    (1, 2, 2, 300, 200, 2),     # last tile of 108 rows: not lone, the unpacked items alone
]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, ctas", CASES)
def test_matches_float64(monkeypatch, b, hq, hkv, sq, sk, ctas):
    """out and lse against float64, and the items run: a group of pairs' lone tiles is one item."""
    from ptxgen.kernels.attention import run

    q, k, v = random_problem(b, hq, hkv, sq, sk, 64, "bf16", seed=sq + sk)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.zeros((b, hq, sq), np.float32)
    items = count_items(monkeypatch)
    run.run_numpy(packed(), q, k, v, out, lse, 64 ** -0.5, ctas=ctas)
    assert_matches(out, lse, *reference(q, k, v, False, 64 ** -0.5), "bf16")
    assert items["items"] == items_packed(b, hq, sq)


def test_fewer_items_than_unpacked(monkeypatch):
    """Sq = 200 in 192-row tiles, 4 pairs: 4 full items and 2 packed ones, against 8 items unpacked (4 of them a lone
    tile of 8 rows)."""
    q, k, v = random_problem(1, 4, 4, 200, 150, 64, "bf16", seed=3)
    counts = []
    for c in (packed(), dataclasses.replace(packed(), pack_lone=False)):
        items = count_items(monkeypatch)
        attention(q, k, v, config=c)
        counts.append(items["items"])
    assert counts == [6, 8]


@pytest.mark.parametrize("schedule", ["lazy", 5, 23])
@pytest.mark.parametrize("shape, ctas", [((1, 4, 2, 200, 300), 2), ((2, 2, 1, 60, 260), 3)],
                         ids=["partial_group", "all_lone"])
def test_random_schedules_leave_no_arrival(shape, ctas, schedule):
    """Copies completing lazily or in random orders, races reported (a hang raises): the packed items' interleaved
    streams and the releases of the other streams' stages leave every pipeline and turn barrier consistent, no
    arrival left when a CTA exits, and the result is float64's."""
    b, hq, hkv, sq, sk = shape
    config = packed()
    q, k, v = random_problem(b, hq, hkv, sq, sk, 64, "bf16", seed=sq * sk)
    out, lse, left = run_ctas_checking_barriers(config, q, k, v, ctas, schedule)
    assert left == {}
    assert_matches(out, lse, *reference(q, k, v, False, 64 ** -0.5), "bf16")


@pytest.mark.parametrize("fields, words", [
    ({"persistent": False, "o_buffer": False, "continuous_turns": False}, ["persistent = True"]),
    ({"causal": True}, ["causal = False"]),
    ({"stages": 4}, ["stages ≥ 5"]),
    ({"consumer_warpgroups": 2, "stages": 2}, ["stages ≥ 3"]),
    ({"skip_unseen": False, "varlen": True, "epilogue": "rows"}, ["skip_unseen = True", "varlen = False"]),
])
def test_rules(fields, words):
    """pack_lone needs the persistent dense non-causal kernel, skip_unseen (a packed item's warpgroup without a pair
    computes no tile: without skipping it would wait for tiles no stream loads) and 2w − 1 stages: the error names
    what is missing."""
    config = dataclasses.replace(packed(), **fields)
    with pytest.raises(ValueError) as err:
        config.validate()
    assert str(err.value).startswith("AttentionConfig.pack_lone = True")
    for word in words:
        assert word in str(err.value)


def test_two_warpgroups_pack_pairs_with_three_stages():
    """w = 2 packs pairs of lone 64-row tiles of 128-row query tiles (Sq = 190: 128 + 62)."""
    config = dataclasses.replace(packed(), consumer_warpgroups=2, stages=3, registers=None)
    config.validate()
    q, k, v = random_problem(1, 3, 3, 190, 140, 64, "bf16", seed=11)
    out, lse = attention(q, k, v, config=config)
    assert_matches(out, lse, *reference(q, k, v, False, 64 ** -0.5), "bf16")


@pytest.mark.parametrize("seqlens, causal, want", [
    ((1024, 1024), False, True), ((1000, 800), False, True), ((50, 50), False, True),
    ((1100, 1024), False, False),   # last tile of 140 rows
    ((1152, 1024), False, False),   # 6 full tiles
    ((2048, 2048), False, False),   # last tile of 128 rows
    ((4096, 4096), False, True),    # persistent for the packing (rule 8)
    ((16384, 16384), False, False),   # from PERSISTENT_MAX_KV keys, not persistent
    ((1024, 1024), True, False), (None, False, False),
])
def test_choose_config_packs_lone_tiles(seqlens, causal, want):
    config = choose_config("bf16", 64, causal, seqlens=seqlens)
    assert config.pack_lone is want
    assert config.stages == (5 if want else 2)
    if want:
        # rule 13: two Q tiles, O staged in the item's own (no room for O's tile beside 5 stages)
        assert config.persistent and config.q_tiles == 2 and not config.o_buffer and config.continuous_turns
    config.validate()


def test_builds_the_same_ir_without_packing():
    """pack_lone = False builds the IR of the kernel before the option (no packed-item values in it)."""
    from ptxgen.ir.text import print_module

    text = print_module(build(dataclasses.replace(packed(), pack_lone=False)))
    assert "packed" not in text and "stream" not in text
    assert "%packed_c" in print_module(build(packed()))


def test_bench_variant_words():
    from test_attention_persistent import bench_variant_fields

    variant_fields = bench_variant_fields()
    assert variant_fields("pack-s5") == {"pack_lone": True, "stages": 5}
    assert variant_fields("nopack") == {"pack_lone": False}


# -- GPU ---------------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("b, hq, hkv, sq, sk", [(4, 8, 8, 1024, 1024), (2, 7, 1, 1000, 1000), (3, 5, 5, 60, 700),
                                                 (1, 16, 4, 1024, 517)])
def test_gpu_matches_float64_and_the_unpacked_kernel(b, hq, hkv, sq, sk):
    """choose_config's packed kernel (the op's own pick) on random inputs: out and lse against float64, and equal to
    the unpacked kernel's (the same arithmetic per row, bit for bit)."""
    from test_attention import assert_matches_torch

    torch = torch_or_skip()
    q = torch.randn(b, sq, hq, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, sk, hkv, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, sk, hkv, 64, device="cuda", dtype=torch.bfloat16)
    config = choose_config("bf16", 64, False, seqlens=(sq, sk))
    assert config.pack_lone
    out, lse = attention(q, k, v)
    ref_out, ref_lse = attention(q, k, v, config=dataclasses.replace(config, pack_lone=False, stages=2))
    torch.cuda.synchronize()
    scale = 64 ** -0.5
    kk, vv = (x.double().repeat_interleave(hq // hkv, dim=2) for x in (k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), kk) * scale
    want = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vv)
    assert_matches_torch(torch, out, lse, want, torch.logsumexp(s, dim=-1))
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
