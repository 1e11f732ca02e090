"""The persistent attention kernel (``AttentionConfig.persistent``: min(work items, %ctas) CTAs walking (batch, head,
query tile) items in serpentine rounds) and ``o_buffer`` (O staged in its own tile): the CPU interpreter against
float64 with more work items than CTAs (causal and not, GQA, ragged Sq and Sk, D = 64 with 2 and 3 consumer
warpgroups, D = 128, varlen, every epilogue and mainloop form), under random copy schedules with races reported, the
schedule's item assignment, the configuration rules and the op's ``ctas`` argument, the PTX assembled by nvJitLink
(no more spills than the non-persistent kernel), the benchmark's variant words; on a GPU (``-m gpu``) against
float64."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ptxgen.ir.text import print_module
from ptxgen.kernels import AttentionConfig, attention, attention_varlen
from ptxgen.kernels.attention import build, choose_config, run
from ptxgen.kernels.gemm.config import SMEM_BYTES
from test_attention import (assert_matches, assert_matches_torch, random_problem, reference, torch_or_skip,
                            torch_reference)
from test_attention_three_warpgroups import registers_at
from test_attention_varlen import assert_sequences_match, packed_problem


def persistent(d=128, causal=False, warpgroups=2, bn=128, **fields):
    fields.setdefault("overlap", True)
    fields.setdefault("pingpong", fields["overlap"])
    fields.setdefault("epilogue", "tma")
    return AttentionConfig("bf16", d, bn, 2, causal, consumer_warpgroups=warpgroups, persistent=True, **fields)


# (B, Hq, Hkv, Sq, Sk, config, ctas): every case has more work items than CTAs and a partial last round
CASES = [
    (1, 2, 1, 300, 200, persistent(), 4),                                   # 3 tiles × 2 heads = 6 items
    (2, 2, 1, 200, 150, persistent(d=64, causal=True), 3),                  # Sq > Sk: rows that see no key
    (1, 3, 1, 260, 400, persistent(causal=True, o_buffer=True), 4),         # Sq < Sk, 9 items
    (1, 2, 2, 300, 450, persistent(d=64, causal=True, warpgroups=3), 3),    # 192-row tiles: 4 items
    (1, 2, 1, 250, 130, persistent(d=64, warpgroups=3, bn=192, pingpong=False, p_in_smem=True, o_buffer=True), 3),
    (1, 2, 1, 200, 190, persistent(d=64, causal=True, overlap=False, epilogue="direct"), 3),
    (2, 1, 1, 130, 70, persistent(d=64, epilogue="direct"), 3),
    (1, 3, 1, 400, 380, choose_config("bf16", 64, True, seqlens=(2048, 2048)), 4),   # rule 9's: 3 warpgroups, Sq > Sk
]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, config, ctas", CASES)
def test_interpreter_matches_float64(b, hq, hkv, sq, sk, config, ctas):
    """Every row of every item written once, out and lse equal to float64's (``out`` starts as NaN: a row no CTA
    wrote fails)."""
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, config.dtype, seed=sq + 3 * sk)
    items = -(-sq // config.bm) * hq * b
    assert items > ctas and items % ctas
    out = np.full(q.shape, np.nan, q.dtype)
    out, lse = attention(q, k, v, causal=config.causal, out=out, config=config, ctas=ctas)
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), config.dtype)


@pytest.mark.parametrize("schedule", ["lazy", 5])
@pytest.mark.parametrize("config", [persistent(d=64, causal=True), persistent(d=64, causal=True, o_buffer=True),
                                    persistent(d=64, warpgroups=3, epilogue="rows")],
                         ids=["q_staging", "o_buffer", "rows_wg3"])
def test_items_reuse_shared_memory_without_races(schedule, config):
    """With copies completing lazily or in a random order and races reported, a CTA's next Q (TMA) never overwrites
    the O staged in Q's tile before the TMA store read it, the next item's O never overwrites the O staged in O's
    own tile before that, and every turn and epilogue barrier's generation completes across items."""
    from ptxgen.interp import interpret

    q, k, v = random_problem(2, 2, 1, 150, 260, 64, "bf16", seed=4)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.zeros((2, 2, 150), np.float32)
    interpret(run.kernel_module(config), run.kernel_arguments(q, k, v, out, lse, 0.125,
                                                              lambda x: x.transpose(0, 2, 1, 3), config, ctas=3),
              schedule=schedule)
    assert_matches(out, lse, *reference(q, k, v, config.causal, 0.125), "bf16")


@pytest.mark.parametrize("causal, o_buffer", [(False, False), (True, True)])
def test_varlen(causal, o_buffer):
    """The persistent varlen kernel (items of the longest sequence's query tiles: a CTA's items past its sequence
    compute nothing): a sequence across two query tiles, an empty one, one of one token, one with no key."""
    q, k, v, cu_q, cu_k = packed_problem([200, 0, 1, 40], [300, 20, 64, 0], 2, 1, 64, "bf16", seed=8, extra_rows=2)
    config = persistent(d=64, causal=causal, epilogue="rows", varlen=True, o_buffer=o_buffer)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 200, 300, causal=causal, config=config, ctas=3)
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, "bf16", 64 ** -0.5)


def serpentine_items(items: int, ctas: int) -> list:
    """The host's copy of ``schedule.rounds`` and ``work_item``: each CTA's items, round by round."""
    grid = min(items, ctas)
    full, rest = divmod(items, grid)
    owned = []
    for c in range(grid):
        last = (grid - 1 - c) if full % 2 else c
        rounds = full + (last < rest)
        owned.append([r * grid + ((grid - 1 - c) if r % 2 else c) for r in range(rounds)])
    return owned


@pytest.mark.parametrize("items, ctas", [(10, 4), (2048, 132), (7, 7), (5, 132), (133, 132), (264, 132)])
def test_serpentine_rounds_deal_every_item_once(items, ctas):
    owned = serpentine_items(items, ctas)
    dealt = sorted(t for mine in owned for t in mine)
    assert dealt == list(range(items))
    assert max(map(len, owned)) - min(map(len, owned)) <= 1


def test_serpentine_balances_causal_tiles():
    """Causal S = 1k, D = 128 (8 query tiles of 1 … 8 KV tiles, 256 heads × batches) on 132 CTAs: the longest CTA's
    KV tiles within 5% of the average, where a plain stride (CTA c: items c, c + 132, …) gives 1.3×."""
    tiles_m, items = 8, 8 * 256
    length = [tiles_m - t % tiles_m for t in range(items)]
    average = sum(length) / 132
    assert max(sum(length[t] for t in mine) for mine in serpentine_items(items, 132)) < 1.05 * average
    assert max(sum(length[t] for t in range(c, items, 132)) for c in range(132)) > 1.3 * average


def test_kernel_text():
    """The persistent grid and parameters; the non-persistent kernel is the one it was (no %ctas)."""
    printed = print_module(build(persistent(causal=True)))
    assert "{grid = (min(cdiv(%sq, 128) * %heads * %batches, %ctas), 1, 1), block = (384, 1, 1)}" in printed
    assert "%qfree = mbarrier.alloc" in printed and "arrivals = 256" in printed
    varlen = print_module(build(persistent(d=64, warpgroups=3, epilogue="rows", varlen=True)))
    assert "{grid = (min(cdiv(%max_sq, 192) * %heads * %batches, %ctas), 1, 1), block = (512, 1, 1)}" in varlen
    plain = print_module(build(choose_config("bf16", 128, True, seqlens=(16384, 16384))))   # chosen non-persistent
    assert "%ctas" not in plain and "qfree" not in plain


@pytest.mark.parametrize("config, message", [
    (AttentionConfig(o_buffer=True), r"AttentionConfig.o_buffer = True: O is staged in shared memory only by the "
                                     r"'tma' and 'rows' epilogues, not by epilogue = 'direct'"),
    (AttentionConfig(head_dim=256, bn=64, epilogue="tma", persistent=True, o_buffer=True),
     r"AttentionConfig.stages = 2: Q's tile \(128 × 256\), O's tile \(128 × 256\) and 2 stages of K and V tiles "
     r"\(64 × 256\) need 262224 bytes of shared memory, over the 232448 a Hopper CTA can have"),
])
def test_config_rules(config, message):
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_smem_bytes():
    base = AttentionConfig(epilogue="tma")
    assert dataclasses.replace(base, persistent=True).smem_bytes() == base.smem_bytes() + 8
    assert dataclasses.replace(base, o_buffer=True).smem_bytes() == base.smem_bytes() + 128 * 128 * 2


@pytest.mark.parametrize("ctas, error, message", [
    (0, ValueError, "attention: ctas must be a positive int (the persistent kernel's CTA count) or None, not 0"),
    ("4", TypeError, "attention: ctas must be a positive int (the persistent kernel's CTA count) or None, not '4'"),
])
def test_bad_ctas(ctas, error, message):
    q, k, v = random_problem(1, 1, 1, 8, 8, 64, "bf16", seed=1)
    with pytest.raises(error) as info:
        attention(q, k, v, config=persistent(d=64), ctas=ctas)
    assert str(info.value) == message


# -- PTX ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [choose_config("bf16", 128, False), choose_config("bf16", 128, True),
                                    choose_config("bf16", 64, True),
                                    dataclasses.replace(choose_config("bf16", 64, False, seqlens=(4096, 4096)),
                                                        q_tiles=1),
                                    choose_config("bf16", 64, True, varlen=True, seqlens=(4096, 4096)),
                                    choose_config("bf16", 64, True, seqlens=(8192, 8192))],
                         ids=["d128", "d128_causal", "d64_causal_wg2", "d64_wg3", "d64_varlen_wg3", "d64_causal_wg3"])
def test_ptx_registers_as_the_non_persistent_kernel(config, request):
    """nvJitLink assembles the persistent kernel (with and without o_buffer) of each chosen configuration; under the
    consumers' setmaxnreg budget it spills no more than the non-persistent kernel — the three-warpgroup dense one at
    most 16 bytes more (the driver loads it with 16 B of local memory, s13 section 1) — the mainloop's wgmmas are not duplicated, and no wgmma is serialized."""
    import re

    from ptxgen.lower import compile_kernel

    budget = config.register_budgets[1]
    base = compile_kernel(build(config), defer_assembly=True).ptx
    base_spill = registers_at(base, budget)[1]
    wgmma = r"wgmma\.mma_async\.sync\.aligned"
    for fields in ({"persistent": True}, {"persistent": True, "o_buffer": True}):
        ptx = compile_kernel(build(dataclasses.replace(config, **fields)), defer_assembly=True).ptx
        assert len(re.findall(wgmma, ptx)) == len(re.findall(wgmma, base)), fields
        assert " call" not in ptx
        allowance = 16 if request.node.callspec.id == "d64_wg3" else 0
        assert registers_at(ptx, budget)[1] <= base_spill + allowance, fields


# -- the benchmark's variant words -------------------------------------------------------------------------------------

def bench_variant_fields():
    """benchmarks/bench_attention.py's ``variant_fields`` (the benchmarks folder is not a package)."""
    import pathlib
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        from bench_attention import variant_fields
    finally:
        sys.path.remove(str(root / "benchmarks"))
    return variant_fields


def test_bench_variant_words():
    variant_fields = bench_variant_fields()
    assert variant_fields("persist") == {"persistent": True}
    assert variant_fields("persist-obuf") == {"persistent": True, "o_buffer": True}
    for d, causal in ((128, False), (64, True)):
        base = choose_config("bf16", d, causal, seqlens=(1024, 1024))
        dataclasses.replace(base, **variant_fields("persist-obuf")).validate()


# -- GPU ---------------------------------------------------------------------------------------------------------------

GPU_CASES = [   # (B, Hq, Hkv, Sq, Sk, D): the benchmark's S = 1k shape at D = 128 and 64, GQA with ragged lengths
    (16, 16, 16, 1024, 1024, 128),
    (32, 32, 32, 512, 512, 64),
    (3, 8, 2, 1000, 1537, 128),
    (2, 12, 4, 1537, 1000, 64),
]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["persist", "persist-obuf", "persist-ctas7"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, hq, hkv, sq, sk, d", GPU_CASES)
def test_gpu_matches_float64(b, hq, hkv, sq, sk, d, causal, variant):
    """Fresh random bf16 inputs each run, choose_config's kernel made persistent (one CTA per SM, or 7 CTAs: dozens
    of items each): out within 1e-2 relative of float64, lse within 1e-4 relative, rows with no key 0 and +inf."""
    torch = torch_or_skip()
    config = dataclasses.replace(choose_config("bf16", d, causal, seqlens=(sq, sk)), persistent=True,
                                 o_buffer="obuf" in variant)
    if config.smem_bytes() > SMEM_BYTES:   # O's own tile beside the packed kernel's two Q tiles and 5 stages
        config = dataclasses.replace(config, q_tiles=1)
    check_persistent_on_gpu(torch, config, (b, hq, hkv, sq, sk, d), causal, ctas=7 if "ctas7" in variant else None)


def check_persistent_on_gpu(torch, config, shape, causal, ctas=None) -> None:
    """Fresh random bf16 q, k, v of ``shape`` (B, Hq, Hkv, Sq, Sk, D), ``out`` filled with NaN first, ``config`` on
    ``ctas`` CTAs (None: one per SM): out and lse as ``assert_matches_torch`` wants against float64."""
    b, hq, hkv, sq, sk, d = shape
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    out, lse = attention(q, k, v, causal=causal, out=out, config=config, ctas=ctas)
    torch.cuda.synchronize()
    want, want_lse = torch_reference(torch, q, k, v, causal, d ** -0.5)
    assert_matches_torch(torch, out, lse, want, want_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_persistent_equals_the_grid_kernel(d, causal):
    """Same inputs: the persistent kernel (with and without o_buffer, dense and varlen) computes out and lse bit for
    bit as the non-persistent one (the same per-item arithmetic)."""
    torch = torch_or_skip()
    q_lens, k_lens = [1000, 1, 513, 0, 2048, 77], [1200, 64, 300, 9, 2048, 77]
    cu_q = torch.tensor([0] + list(np.cumsum(q_lens)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(np.cumsum(k_lens)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(q_lens), 8, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(k_lens), 2, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(k_lens), 2, d, device="cuda", dtype=torch.bfloat16)
    grid = choose_config("bf16", d, causal, varlen=True, seqlens=(2048, 2048))
    want, want_lse = attention_varlen(q, k, v, cu_q, cu_k, 2048, 2048, causal=causal, config=grid)
    for fields in ({"persistent": True}, {"persistent": True, "o_buffer": True}):
        out, lse = attention_varlen(q, k, v, cu_q, cu_k, 2048, 2048, causal=causal,
                                    config=dataclasses.replace(grid, **fields), ctas=11)
        torch.cuda.synchronize()
        assert torch.equal(out, want) and torch.equal(lse, want_lse), fields
    dense_q, dense_k, dense_v = q[:2048][None], k[:2048][None], v[:2048][None]
    dense = choose_config("bf16", d, causal, seqlens=(2048, 2048))
    want, want_lse = attention(dense_q, dense_k, dense_v, causal=causal, config=dense)
    out, lse = attention(dense_q, dense_k, dense_v, causal=causal, config=dataclasses.replace(dense, persistent=True))
    torch.cuda.synchronize()
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
