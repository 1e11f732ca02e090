"""The ping-pong's turn ring running on across a persistent CTA's work items (``AttentionConfig.continuous_turns``):
the CPU interpreter against float64 with few CTAs walking many items (2 and 3 consumer warpgroups, causal with items
of no KV tile and rows that see no key, O staged in Q's tile and in its own, varlen), under random copy schedules
with races reported and every named barrier checked empty when each CTA exits (an arrival nobody took fails), the
configuration rule, the PTX (registers and spills as the per-item ring's), the benchmark's ``ring`` word; on a GPU
(``-m gpu``) against float64."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from ptxgen.interp import run_cta
from ptxgen.ir.text import print_module
from ptxgen.kernels import AttentionConfig, attention, attention_varlen
from ptxgen.kernels.attention import build, choose_config, run, softmax
from ptxgen.kernels.gemm.config import SMEM_BYTES
from test_attention import assert_matches, random_problem, reference, torch_or_skip
from test_attention_persistent import bench_variant_fields, check_persistent_on_gpu, persistent
from test_attention_three_warpgroups import registers_at
from test_attention_varlen import assert_sequences_match, packed_problem


def ring(d=64, causal=False, warpgroups=2, **fields):
    return persistent(d=d, causal=causal, warpgroups=warpgroups, continuous_turns=True, **fields)


def items_of(config, b, hq, sq) -> int:
    return -(-sq // config.bm) * hq * b


# (B, Hq, Hkv, Sq, Sk, config, ctas): 2 or 3 CTAs, each walking 3-5 items; causal Sq > Sk has items of no KV tile
# (their query tile's rows all above the first key), some of them a CTA's last
CASES = [
    (1, 2, 1, 300, 200, ring(d=128), 2),                                          # Q staging, 6 items
    (1, 2, 1, 400, 100, ring(causal=True, bn=64, o_buffer=True), 3),             # 8 items, 4 of no KV tile
    (1, 2, 1, 400, 100, ring(causal=True, bn=64), 2),                            # the same, O staged in Q's tile
    (1, 3, 1, 260, 400, ring(d=128, causal=True, o_buffer=True), 2),             # Sq < Sk: 9 items of 3 lengths
    (1, 2, 2, 600, 150, ring(causal=True, warpgroups=3, epilogue="rows"), 3),    # 192-row tiles, 8 items
    (2, 1, 1, 400, 260, ring(warpgroups=3, o_buffer=True), 2),                   # 6 items
    (1, 2, 1, 400, 130, ring(warpgroups=3, bn=192, p_in_smem=True, o_buffer=True), 2),       # P in smem
]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, config, ctas", CASES)
def test_interpreter_matches_float64(b, hq, hkv, sq, sk, config, ctas):
    """Every row of every item written once (``out`` starts as NaN), out and lse equal to float64's."""
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, config.dtype, seed=sq + 7 * sk)
    assert items_of(config, b, hq, sq) >= 3 * ctas - 1
    out = np.full(q.shape, np.nan, q.dtype)
    out, lse = attention(q, k, v, causal=config.causal, out=out, config=config, ctas=ctas)
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), config.dtype)


def run_ctas_checking_barriers(config, q, k, v, ctas, schedule):
    """Run each CTA of the persistent grid on its own (``run_cta``) under ``schedule`` with races reported; → (out,
    lse, the arrivals left on named barriers when the CTAs exited: {(block, barrier id): threads})."""
    b, sq, hq = q.shape[0], q.shape[1], q.shape[2]
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.zeros((b, hq, sq), np.float32)
    scale = config.head_dim ** -0.5
    args = run.kernel_arguments(q, k, v, out, lse, scale, lambda x: x.transpose(0, 2, 1, 3), config, ctas=ctas)
    module = build(config)
    left = {}
    for block in range(min(items_of(config, b, hq, sq), ctas)):
        cta = run_cta(module, args, block=(block, 0, 0), schedule=schedule)
        for key, state in cta.state.items():
            if isinstance(key, tuple) and key[0] == "named-barrier" and state["arrived"]:
                left[(block, key[1])] = state["arrived"]
    return out, lse, left


@pytest.mark.parametrize("schedule", ["lazy", 3, 8])
@pytest.mark.parametrize("config, shape, ctas", [
    (ring(causal=True, bn=64, o_buffer=True), (1, 2, 1, 400, 100), 3),
    (ring(causal=True, bn=64), (1, 2, 1, 400, 100), 2),
    (ring(causal=True, warpgroups=3, epilogue="rows"), (1, 2, 2, 600, 150), 3),
    (ring(warpgroups=3, o_buffer=True), (2, 1, 1, 400, 260), 2),
], ids=["wg2_obuf", "wg2_q_staging", "wg3_rows", "wg3_obuf"])
def test_random_schedules_leave_no_arrival(config, shape, ctas, schedule):
    """Copies completing lazily or in random orders, races reported (a hang or a race raises): the result is the
    reference's and every turn and epilogue barrier's generations completed — no arrival left when a CTA exits,
    also where a CTA's last items have no KV tile (causal Sq > Sk)."""
    b, hq, hkv, sq, sk = shape
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, "bf16", seed=sq + sk)
    out, lse, left = run_ctas_checking_barriers(config, q, k, v, ctas, schedule)
    assert left == {}
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), "bf16")


def test_without_the_drain_an_arrival_is_left(monkeypatch):
    """The check above sees a leftover: with warpgroup 0's drain taken out, each CTA exits with the last warpgroup's
    final hand-over (128 threads) on warpgroup 0's turn barrier 1, and the results are still right (so only the
    barrier check can tell)."""
    turn = softmax.pingpong_turn
    monkeypatch.setattr(softmax, "pingpong_turn",
                        lambda g, point, more=None: None if point == "drain" else turn(g, point, more))
    config = ring(causal=True, bn=64, o_buffer=True)
    q, k, v = random_problem(1, 2, 1, 400, 100, 64, "bf16", seed=500)
    out, lse, left = run_ctas_checking_barriers(config, q, k, v, 3, "lazy")
    assert left == {(0, 1): 128, (1, 1): 128, (2, 1): 128}
    assert_matches(out, lse, *reference(q, k, v, True, 0.125), "bf16")


def test_varlen():
    """The persistent varlen kernel with the ring: items past a sequence's rows have no KV tile (no sections)."""
    q, k, v, cu_q, cu_k = packed_problem([200, 0, 1, 40], [300, 20, 64, 0], 2, 1, 64, "bf16", seed=12, extra_rows=2)
    config = ring(causal=True, epilogue="rows", varlen=True, o_buffer=True)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 200, 300, causal=True, config=config, ctas=3)
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, True, "bf16", 64 ** -0.5)


@pytest.mark.parametrize("config, message", [
    (AttentionConfig(overlap=True, pingpong=True, epilogue="tma", continuous_turns=True),
     "AttentionConfig.continuous_turns = True: the ping-pong's turn ring runs on across the work items of a persistent "
     "CTA: it needs persistent = True"),
    (AttentionConfig(overlap=True, epilogue="tma", persistent=True, continuous_turns=True),
     "AttentionConfig.continuous_turns = True: the ping-pong's turn ring runs on across the work items of a persistent "
     "CTA: it needs pingpong = True"),
    (AttentionConfig(continuous_turns=True),
     "AttentionConfig.continuous_turns = True: the ping-pong's turn ring runs on across the work items of a persistent "
     "CTA: it needs persistent = True and pingpong = True"),
])
def test_config_rule(config, message):
    with pytest.raises(ValueError) as info:
        config.validate()
    assert str(info.value) == message


def test_kernel_text_starts_once_and_drains_once():
    """The ring's IR: the last warpgroup's first arrival on barrier 1 before the items' loop (none inside it), every
    warpgroup's hand-over after its item's last section (2 + 2 + 2 + start = 7 arrivals, the per-item ring's 6), one
    more wait on barrier 1 after the loop; the default kernel is unchanged by the field's existence. (Both without
    ``skip_unseen``, whose sections of unseen tiles have arrivals of their own.)"""
    text = print_module(build(ring(d=128, o_buffer=True, skip_unseen=False)))
    default = print_module(build(persistent(d=128, o_buffer=True, skip_unseen=False)))
    def count(op, kernel):
        return len(re.findall(rf"^ *{op} ", kernel, re.M))

    assert count(r"barrier\.arrive", text) == 7 and count(r"barrier\.arrive", default) == 6
    assert text.count("barrier.named {id = 1,") == default.count("barrier.named {id = 1,") + 1
    loop = text.index("scf.for", text.index("%c_round") - 200)
    assert text.rfind("barrier.arrive {id = 1", 0, loop) > text.index("%cw")    # the start, before the items
    assert text.rindex("barrier.named {id = 1") > text.rindex("c_it_next")       # the drain, after them


@pytest.mark.parametrize("config", [dataclasses.replace(choose_config("bf16", 128, False), persistent=True,
                                                        o_buffer=True),
                                    dataclasses.replace(choose_config("bf16", 128, False), persistent=True,
                                                        o_buffer=False),
                                    choose_config("bf16", 64, True),
                                    dataclasses.replace(choose_config("bf16", 64, False), persistent=True,
                                                        o_buffer=True)],
                         ids=["d128_obuf", "d128_q_staging", "d64_causal", "d64_wg3_obuf"])
def test_ptx_registers_as_the_per_item_ring(config):
    """nvJitLink assembles the ring kernel; under the consumers' setmaxnreg budget it uses no more registers and
    spills no more than the per-item ring, with as many wgmmas and no call (both without ``skip_unseen``: this
    compares the rings; with it, every default kernel spills none under its budget either,
    tests/ptxgen/test_attention_skip_unseen.py)."""
    from ptxgen.lower import compile_kernel

    config = dataclasses.replace(config, skip_unseen=False)
    budget = config.register_budgets[1]
    base = compile_kernel(build(dataclasses.replace(config, continuous_turns=False)), defer_assembly=True).ptx
    ptx = compile_kernel(build(dataclasses.replace(config, continuous_turns=True)), defer_assembly=True).ptx
    wgmma = r"wgmma\.mma_async\.sync\.aligned"
    assert len(re.findall(wgmma, ptx)) == len(re.findall(wgmma, base))
    assert " call" not in ptx
    assert len(re.findall(r"bar\.arrive", ptx)) == len(re.findall(r"bar\.arrive", base)) + 1
    registers, spills = registers_at(ptx, budget)
    base_registers, base_spills = registers_at(base, budget)
    assert registers <= base_registers and spills <= base_spills, (registers, spills, base_registers, base_spills)


def test_bench_variant_word():
    variant_fields = bench_variant_fields()
    assert variant_fields("persist-obuf-ring") == {"persistent": True, "o_buffer": True, "continuous_turns": True}
    assert variant_fields("wg3-persist-obuf-ring") == {"consumer_warpgroups": 3, "persistent": True,
                                                       "o_buffer": True, "continuous_turns": True}
    for d, causal in ((128, False), (128, True), (64, True), (64, False)):
        base = choose_config("bf16", d, causal, seqlens=(1024, 1024))
        dataclasses.replace(base, **variant_fields("persist-obuf-ring-q1")).validate()
    dataclasses.replace(choose_config("bf16", 64, False, seqlens=(1024, 1024)),
                        **variant_fields("wg3-persist-obuf-ring-q1")).validate()


# -- GPU ---------------------------------------------------------------------------------------------------------------

GPU_CASES = [   # (B, Hq, Hkv, Sq, Sk, D): the benchmark's S = 1k shapes, GQA with ragged lengths, Sq > Sk
    (16, 16, 16, 1024, 1024, 128),
    (16, 32, 32, 1024, 1024, 64),
    (3, 8, 2, 1000, 1537, 128),
    (2, 12, 4, 1537, 1000, 64),
]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["persist-ring", "persist-obuf-ring", "persist-obuf-ring-ctas7",
                                     "wg3-persist-obuf-ring"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, hq, hkv, sq, sk, d", GPU_CASES)
def test_gpu_matches_float64(b, hq, hkv, sq, sk, d, causal, variant):
    """Fresh random bf16 inputs each run, choose_config's kernel made persistent with the continuous ring (one CTA per
    SM, or 7 CTAs: dozens of items each; three consumer warpgroups at D = 64): out within 1e-2 relative of float64,
    lse within 1e-4, rows with no key 0 and +inf."""
    torch = torch_or_skip()
    if variant.startswith("wg3") and d != 64:
        pytest.skip("three consumer warpgroups are D = 64's")
    config = dataclasses.replace(choose_config("bf16", d, causal, seqlens=(sq, sk)), bn=128, persistent=True,
                                 o_buffer="obuf" in variant, continuous_turns=True,
                                 consumer_warpgroups=3 if variant.startswith("wg3") else 2)
    if config.smem_bytes() > SMEM_BYTES:   # O's own tile beside the packed kernel's two Q tiles and 5 stages
        config = dataclasses.replace(config, q_tiles=1)
    check_persistent_on_gpu(torch, config, (b, hq, hkv, sq, sk, d), causal, ctas=7 if "ctas7" in variant else None)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_ring_equals_the_per_item_ring(d, causal):
    """Same inputs: the continuous ring computes out and lse bit for bit as the per-item ring (only the order of the
    warpgroups' sections across items changes, not any item's arithmetic)."""
    torch = torch_or_skip()
    q = torch.randn(4, 2048, 8, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(4, 1500, 2, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(4, 1500, 2, d, device="cuda", dtype=torch.bfloat16)
    base = dataclasses.replace(choose_config("bf16", d, causal, seqlens=(2048, 1500)), consumer_warpgroups=2,
                               persistent=True, o_buffer=True)
    want, want_lse = attention(q, k, v, causal=causal, config=base)
    out, lse = attention(q, k, v, causal=causal, config=dataclasses.replace(base, continuous_turns=True))
    torch.cuda.synchronize()
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
