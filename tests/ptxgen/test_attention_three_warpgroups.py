"""The attention kernel with 3 consumer warpgroups (``AttentionConfig.consumer_warpgroups = 3``: 192-row query tiles,
512 threads, setmaxnreg 32/160 — FA3's shape for head dim 64): the CPU interpreter against float64 (non-causal and
bottom-right causal with Sq ≠ Sk, GQA, ragged Sq and Sk, varlen, lse), the round-robin ping-pong under a random copy
schedule, the configuration rules, the PTX assembled by nvJitLink (turn barriers, register budgets), the
sequence-length-aware ``choose_config`` and the benchmark's variant words; on a GPU (``-m gpu``) against float64."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from ptxgen.ir.text import print_module
from ptxgen.kernels import AttentionConfig, attention, attention_varlen
from ptxgen.kernels.attention import build, choose_config
from test_attention import (assert_matches, assert_matches_torch, random_problem, reference, torch_or_skip,
                            torch_reference)
from test_attention_varlen import assert_sequences_match, packed_problem


def wg3(d=64, bn=128, causal=False, dtype="bf16", **fields):
    fields.setdefault("overlap", True)
    fields.setdefault("pingpong", fields["overlap"])
    fields.setdefault("epilogue", "tma")
    return AttentionConfig(dtype, d, bn, 2, causal, consumer_warpgroups=3, **fields)


# (B, Hq, Hkv, Sq, Sk, config): Sq across two 192-row query tiles and ragged in the second, Sk ragged in its last KV
# tile; GQA; causal with Sq < Sk and Sq > Sk (rows that see no key), bn = 192 (FA3's non-causal D = 64 tile) and 128
CASES = [
    (1, 2, 1, 250, 400, wg3(bn=192, pingpong=False)),
    (1, 2, 1, 250, 400, wg3(bn=192)),
    (1, 2, 1, 100, 300, wg3(causal=True)),
    (1, 2, 1, 300, 200, wg3(causal=True)),
    (2, 2, 2, 193, 129, wg3(causal=True, epilogue="direct")),
    (1, 2, 1, 200, 150, wg3(d=128, causal=True, overlap=False, epilogue="direct")),
    (1, 1, 1, 70, 90, wg3(dtype="f16", bn=64)),
    (1, 1, 1, 1, 1, wg3(causal=True)),
    # P staged in shared memory for an SS P·V (FA3's non-causal D = 64 form), with and without overlap and turns
    (1, 2, 1, 250, 400, wg3(bn=192, pingpong=False, p_in_smem=True)),
    (1, 2, 1, 300, 200, wg3(causal=True, p_in_smem=True)),
    (1, 1, 1, 130, 200, wg3(d=128, bn=64, overlap=False, p_in_smem=True)),
    (1, 2, 1, 100, 300, AttentionConfig("bf16", 64, 128, 2, True, overlap=True, pingpong=True, epilogue="tma",
                                        p_in_smem=True)),
]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, config", CASES)
def test_interpreter_matches_float64(b, hq, hkv, sq, sk, config):
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, config.dtype, seed=sq * 7 + sk)
    out, lse = attention(q, k, v, causal=config.causal, config=config)
    assert lse.shape == (b, hq, sq) and lse.dtype == np.float32
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), config.dtype)


@pytest.mark.parametrize("schedule", ["lazy", 11])
@pytest.mark.parametrize("p_in_smem", [False, True])
def test_round_robin_pingpong_under_a_random_schedule(schedule, p_in_smem):
    """The three warpgroups' wgmma sections take turns 0, 1, 2, 0, …: with copies completing in a random order and
    races reported (P's tile too: written by stmatrix, read by the next SS wgmma), every turn barrier's generation
    completes and the result is the reference's."""
    from ptxgen.interp import interpret
    from ptxgen.kernels.attention import run

    config = wg3(causal=True, p_in_smem=p_in_smem)
    q, k, v = random_problem(1, 2, 1, 200, 450, 64, "bf16", seed=3)
    out = np.zeros(q.shape, q.dtype)
    lse = np.zeros((1, 2, 200), np.float32)
    interpret(run.kernel_module(config), run.kernel_arguments(q, k, v, out, lse, 0.125,
                                                              lambda x: x.transpose(0, 2, 1, 3)),
              schedule=schedule)
    assert_matches(out, lse, *reference(q, k, v, True, 0.125), "bf16")


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_shares_the_builder(causal):
    """The varlen entry builds the same 192-row kernel: a sequence across two query tiles, an empty one, one of one
    token, one with no key; each equals its own float64 reference, rows past the last sequence untouched."""
    q, k, v, cu_q, cu_k = packed_problem([250, 0, 1, 40], [300, 20, 64, 0], 2, 1, 64, "bf16", seed=6, extra_rows=2)
    config = wg3(causal=causal, epilogue="rows", varlen=True)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 250, 300, causal=causal, config=config)
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, "bf16", 64 ** -0.5)


# -- the configuration -------------------------------------------------------------------------------------------------

def test_config_shape_of_three_warpgroups():
    config = AttentionConfig(head_dim=64, bn=192, consumer_warpgroups=3)
    assert (config.bm, config.threads, config.register_budgets) == (192, 512, (32, 160))
    assert config.smem_bytes() == 192 * 64 * 2 + 2 * 2 * 192 * 64 * 2 + 8 + 2 * 16 * 2 == 122952
    assert (AttentionConfig().bm, AttentionConfig().threads, AttentionConfig().register_budgets) == (128, 384, (24, 240))
    assert AttentionConfig(registers=(40, 152), consumer_warpgroups=3).validate().register_budgets == (40, 152)
    printed = print_module(build(config))
    assert "{grid = (cdiv(%sq, 192), dim(%q, 1), dim(%q, 0)), block = (512, 1, 1)}" in printed
    assert "warpgroups = (1, 3)" in printed and "maxnreg = (32, 160)" in printed


@pytest.mark.parametrize("config, message", [
    (AttentionConfig(consumer_warpgroups=4), r"AttentionConfig.consumer_warpgroups = 4: a CTA has 2 or 3 consumer "
                                             r"warpgroups of 64 query rows \(a 128- or 192-row query tile\)"),
    (AttentionConfig(consumer_warpgroups=3, registers=(24, 240)),
     r"AttentionConfig.registers = \(24, 240\): 128 × 24 \+ 384 × 240 = 95232 registers exceed the 65536 a CTA of "
     r"512 threads launches with \(128 per thread\)"),
    (AttentionConfig(registers=(32, 240)),
     r"AttentionConfig.registers = \(32, 240\): 128 × 32 \+ 256 × 240 = 65536 registers exceed the 64512 a CTA of "
     r"384 threads launches with \(168 per thread\): setmaxnreg.inc would wait forever"),
    (AttentionConfig(consumer_warpgroups=3, registers=(40, 156)),
     r"AttentionConfig.registers = \(40, 156\): the consumer's 156 is not a multiple of 8 from 24 to 256"),
    (AttentionConfig(head_dim=128, stages=3, consumer_warpgroups=3),
     r"AttentionConfig.stages = 3: Q's tile \(192 × 128\) and 3 stages of K and V tiles \(128 × 128\) need 245864 "
     r"bytes of shared memory, over the 232448 a Hopper CTA can have"),
    (AttentionConfig(head_dim=64, bn=256, stages=4, consumer_warpgroups=3, p_in_smem=True),
     r"AttentionConfig.stages = 4: Q's tile \(192 × 64\), P's tile \(192 × 256\) and 4 stages of K and V tiles "
     r"\(256 × 64\) need 385160 bytes of shared memory"),
    (AttentionConfig(head_dim=64, bn=96, p_in_smem=True),
     r"AttentionConfig.bn = 96: with p_in_smem, P's \(64, bn\) tile is the SS wgmma's A operand in K-major SW128 "
     r"atoms of 64 columns: bn a multiple of 64"),
])
def test_config_rules(config, message):
    with pytest.raises(ValueError, match=message):
        config.validate()


# -- PTX ---------------------------------------------------------------------------------------------------------------

def registers_at(ptx: str, budget: int):
    """(registers, spill-store bytes) of ``ptx`` assembled by nvJitLink for a ``budget``-register thread: what the
    driver's JIT gives the consumer warpgroups that setmaxnreg raises to ``budget`` (nvJitLink's relocatable compile
    ignores setmaxnreg, C7504, and holds the kernel to its launch budget: 65536 / 512 = 128 for 3 consumer
    warpgroups), estimated by compiling the whole kernel with ``.maxnreg budget`` after its ``.reqntid`` (ptxas then
    takes the budget, and still knows the warpgroups are whole)."""
    from ptxgen.nvjitlink import compile_ptx

    assert re.search(r"\.reqntid \d+, 1, 1", ptx)
    log = compile_ptx(re.sub(r"(\.reqntid \d+, 1, 1)", rf"\1\n.maxnreg {budget}", ptx),
                      options=("-O3", "-Xptxas=-v")).info_log
    return int(re.search(r"Used (\d+) registers", log).group(1)), int(re.search(r"(\d+) bytes spill stores", log).group(1))


def test_ptx_of_three_warpgroups_with_round_robin_turns():
    """nvJitLink assembles the 3-warpgroup kernel: 512 threads, setmaxnreg 160 up / 32 down; turn barriers 1, 2, 3
    (256 threads) each waited on before each of the warpgroup's three wgmma sections and arrived at three times (by
    the warpgroup before it in the ring); each warpgroup's own epilogue barrier 4, 5, 6 (128 threads); no wgmma
    serialized for a call. Under the consumers' setmaxnreg budget of 160 the bn = 128 kernel needs no spill, as the
    2-warpgroup default needs none under its 240. (Without ``skip_unseen``, whose sections of unseen tiles repeat
    each turn's wait and arrival.)"""
    from ptxgen.lower import compile_kernel

    compiled = compile_kernel(build(wg3(causal=True, skip_unseen=False)))
    ptx = compiled.ptx
    assert ".reqntid 512, 1, 1" in ptx
    for form in ("setmaxnreg.inc.sync.aligned.u32 160", "setmaxnreg.dec.sync.aligned.u32 32"):
        assert form in ptx, form
    for ident in (1, 2, 3):
        assert len(re.findall(rf"\bbarrier\.sync\s+{ident}, 256;", ptx)) == 3, ident
        assert len(re.findall(rf"\bbar\.arrive\s+{ident}, 256;", ptx)) == 3, ident
    for ident in (4, 5, 6):
        assert len(re.findall(rf"\bbar\.sync\s+{ident}, 128;", ptx)) == 1, ident
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.global\.shared::cta", ptx)) == 1   # each wg its 64 × 64 box
    assert " call" not in ptx and "C7509" not in compiled.info_log
    assert compiled.registers <= 128            # nvJitLink's launch budget (see registers_at)
    assert registers_at(ptx, 160)[1] == 0
    assert registers_at(compile_kernel(build(choose_config("bf16", 64, True)), defer_assembly=True).ptx, 240)[1] == 0


def test_ptx_of_p_in_smem():
    """p_in_smem, 3 warpgroups, bn = 192 (FA3's non-causal D = 64 form): P·V is an SS wgmma (A through its
    descriptor, bn/16 k-steps, none from registers), P reaches shared memory by 12 stmatrix.x4 per thread and tile
    (96 values) behind ``fence.proxy_async``; under the consumers' 160 registers it spills under a third of what the RS
    form spills (108 against 420 bytes, every wgmma issued unserialized: before the wgmma statements carried their own
    fence, ptxas serialized them here — C7520 — and this form spilled none)."""
    from ptxgen.lower import compile_kernel

    config = wg3(bn=192, pingpong=False, p_in_smem=True)
    ptx = compile_kernel(build(config), defer_assembly=True).ptx
    wgmma = r"wgmma\.mma_async\.sync\.aligned\.m64n{}k16\.f32\.bf16\.bf16 \{{[^}}]*\}}, "
    # S (bn = 192: 4 k-steps of D) in tile 0 and the loop; P·V (n64, 12 k-steps) in the loop and after it
    assert len(re.findall(wgmma.format(192) + "%rd", ptx)) == 2 * 4
    assert len(re.findall(wgmma.format(64) + "%rd", ptx)) == 2 * 12
    assert not re.findall(wgmma.format(64) + r"\{", ptx)
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx)) == 2 * 12 + 64 // 16
    assert "fence.proxy.async.shared::cta" in ptx
    smem_spill = registers_at(ptx, 160)[1]
    rs = compile_kernel(build(wg3(bn=192, pingpong=False)), defer_assembly=True).ptx
    assert 3 * smem_spill <= registers_at(rs, 160)[1]


def test_two_warpgroup_kernel_keeps_its_barriers():
    """consumer_warpgroups = 2 (the default) builds the kernel it built before: turns 1 and 2, epilogue barriers 3
    and 4, 384 threads (``skip_unseen`` off: its sections of unseen tiles repeat each turn's wait)."""
    from ptxgen.lower import compile_kernel

    grid_kernel = dataclasses.replace(choose_config("bf16", 64, True), persistent=False, o_buffer=False,
                                      continuous_turns=False, item_table=False, skip_unseen=False, q_tiles=1)
    ptx = compile_kernel(build(grid_kernel), defer_assembly=True).ptx
    assert ".reqntid 384, 1, 1" in ptx
    for ident in (1, 2):
        assert len(re.findall(rf"\bbarrier\.sync\s+{ident}, 256;", ptx)) == 3
    assert re.search(r"\bbar\.sync\s+3, 128;", ptx) and re.search(r"\bbar\.sync\s+4, 128;", ptx)
    assert not re.search(r"\b(bar|barrier)\.(sync|arrive)\s+[56],", ptx)


# -- the sequence-length-aware choice ----------------------------------------------------------------------------------

def test_choose_config_sees_the_kv_length():
    """D = 64 takes three consumer warpgroups except for causal unknown lengths and a varlen causal KV loop of at
    most 1024 keys; D = 128 and 256 keep two; every choice has 2 stages (5 where D = 64 packs lone query tiles: non-causal,
    Sq = 1 or 1024), 128-row KV tiles (64 at D = 256; 176 for D = 128 non-causal from 4096
    keys) and validates."""
    for d in (64, 128, 256):
        for causal in (False, True):
            for seqlens in (None, (1, 1024), (1024, 1025), (16384, 16384), (100, 20000)):
                config = choose_config("bf16", d, causal, seqlens=seqlens).validate()
                three = d == 64 and not (causal and seqlens is None)
                assert config.consumer_warpgroups == (3 if three else 2), (d, causal, seqlens)
                varlen = choose_config("bf16", d, causal, varlen=True, seqlens=seqlens).validate()
                three = d == 64 and not (causal and (seqlens is None or seqlens[1] <= 1024))
                assert varlen.consumer_warpgroups == (3 if three else 2), (d, causal, seqlens)
                long_kv = d == 128 and not causal and seqlens is not None and seqlens[1] >= 4096
                packs = d == 64 and not causal and seqlens in ((1, 1024), (1024, 1025))
                assert config.pack_lone is packs, (d, causal, seqlens)
                assert (config.bn, config.stages) == (64 if d == 256 else 176 if long_kv else 128, 5 if packs else 2)
    assert choose_config("bf16", 64, False) == AttentionConfig("bf16", 64, 128, 2, False, overlap=True, pingpong=True,
                                                               epilogue="tma", consumer_warpgroups=3, persistent=True,
                                                               o_buffer=True, continuous_turns=True)
    varlen = choose_config("f16", 64, True, varlen=True, seqlens=(100, 20000))
    assert (varlen.consumer_warpgroups, varlen.epilogue, varlen.varlen) == (3, "rows", True)


def test_ops_pass_their_sequence_lengths(monkeypatch):
    """attention gives choose_config (Sq, Sk); attention_varlen (max_seqlen_q, max_seqlen_k)."""
    from ptxgen.kernels.attention import api, run

    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("seqlens"))
        return choose_config(*args, **kwargs)

    monkeypatch.setattr(api, "choose_config", spy)
    monkeypatch.setattr(run, "run_numpy", lambda *a, **k: None)
    monkeypatch.setattr(run, "run_varlen_numpy", lambda *a, **k: None)
    q, k, v = random_problem(1, 2, 1, 30, 50, 64, "bf16", seed=1)
    attention(q, k, v)
    q, k, v, cu_q, cu_k = packed_problem([10, 20], [35, 5], 2, 1, 64, "bf16", seed=1)
    attention_varlen(q, k, v, cu_q, cu_k, 24, 40)
    assert seen == [(30, 50), (24, 40)]


# -- the benchmark's variant words -------------------------------------------------------------------------------------

def test_bench_variant_words():
    import pathlib
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("bench_attention_words", root / "benchmarks" /
                                                      "bench_attention.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(root / "benchmarks"))
    assert bench.variant_fields("wg3") == {"consumer_warpgroups": 3}
    assert bench.variant_fields("wg3-bn192-nopingpong-psmem") == {"consumer_warpgroups": 3, "bn": 192,
                                                                  "pingpong": False, "p_in_smem": True}
    assert bench.variant_fields("psmem-rs") == {"p_in_smem": False}
    import dataclasses

    config = dataclasses.replace(choose_config("bf16", 64, False), **bench.variant_fields("wg3-bn192"))
    assert config.validate().register_budgets == (32, 160) and config.bm == 192


# -- on the GPU --------------------------------------------------------------------------------------------------------

GPU_CASES = [(2, 16, 16, 1024, 1024), (1, 8, 2, 1000, 3001), (1, 4, 4, 3001, 1000), (3, 6, 2, 193, 257),
             (1, 2, 1, 1, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["bn128", "bn192-psmem", "bn192-nopingpong-psmem", "bn128-psmem", "plain"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, hq, hkv, sq, sk", GPU_CASES)
def test_gpu_matches_float64(b, hq, hkv, sq, sk, causal, variant):
    """Fresh random bf16 inputs each run, D = 64, 3 consumer warpgroups: out within 1e-2 relative of float64, lse
    within 1e-4 relative, the rows that see no key 0 and +inf."""
    torch = torch_or_skip()
    bn = 192 if "bn192" in variant else 128
    config = wg3(bn=bn, causal=causal, overlap=variant != "plain", pingpong="nopingpong" not in variant and
                 variant != "plain", p_in_smem="psmem" in variant)
    q = torch.randn(b, sq, hq, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, sk, hkv, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, sk, hkv, 64, device="cuda", dtype=torch.bfloat16)
    out, lse = attention(q, k, v, causal=causal, config=config)
    torch.cuda.synchronize()
    want, want_lse = torch_reference(torch, q, k, v, causal, 0.125)
    assert_matches_torch(torch, out, lse, want, want_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_varlen_matches_dense_per_sequence(causal):
    """The 3-warpgroup varlen kernel equals the 3-warpgroup dense kernel on each sequence, bit for bit."""
    torch = torch_or_skip()
    q_lens, k_lens = [1000, 1, 513, 0, 2048, 77], [1200, 64, 300, 9, 2048, 77]
    cu_q = torch.tensor([0] + list(np.cumsum(q_lens)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(np.cumsum(k_lens)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(q_lens), 8, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(k_lens), 2, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(k_lens), 2, 64, device="cuda", dtype=torch.bfloat16)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal,
                                config=wg3(causal=causal, epilogue="rows", varlen=True))
    torch.cuda.synchronize()
    for b in range(len(q_lens)):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        if not q_lens[b]:
            continue
        want, want_lse = attention(q[qs][None].contiguous(), k[ks][None].contiguous(), v[ks][None].contiguous(),
                                   causal=causal, config=wg3(causal=causal))
        torch.cuda.synchronize()
        assert torch.equal(out[qs], want[0]), b
        assert torch.equal(lse[:, qs], want_lse[0]), b
