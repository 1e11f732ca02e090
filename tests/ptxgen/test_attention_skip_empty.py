"""``AttentionConfig.skip_empty_rows``: a consumer warpgroup whose 64 query rows all lie past the sequence's end (the
ragged last query tile) computes nothing and keeps only its synchronisations (``ptxgen.kernels.attention.empty_rows``).
The CPU interpreter against float64 with three and two consumer warpgroups, persistent and not, causal and not, last
tiles with one and two empty warpgroups, Sq ≠ Sk, GQA and varlen, under random copy schedules with races reported;
``out`` and ``lse`` filled with a sentinel first, rows past Sq left untouched; the wgmmas the interpreter runs counted
(an empty warpgroup runs none); the IR and the PTX (nvJitLink; no more registers or spills than the kernel without
it); the benchmark's variant word; on a GPU (``-m gpu``) against float64."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from ptxgen.ir.ops import OPS
from ptxgen.ir.text import print_module
from ptxgen.kernels import AttentionConfig, attention, attention_varlen
from ptxgen.kernels.attention import build, choose_config, run
from test_attention import assert_matches, random_problem, reference, torch_or_skip, torch_reference
from test_attention_persistent import bench_variant_fields, check_persistent_on_gpu
from test_attention_three_warpgroups import registers_at
from test_attention_varlen import assert_sequences_match, packed_problem

SENTINEL = 4096.0   # exactly representable in bf16, f16 and f32; no attention output or lse here reaches it


def skipping(d=64, causal=False, warpgroups=3, bn=128, **fields):
    fields.setdefault("overlap", True)
    fields.setdefault("pingpong", fields["overlap"])
    fields.setdefault("epilogue", "tma")
    return AttentionConfig("bf16", d, bn, 2, causal, consumer_warpgroups=warpgroups, skip_empty_rows=True, **fields)


def persistent(**fields):
    fields.setdefault("continuous_turns", fields.get("pingpong", fields.get("overlap", True)))
    return skipping(persistent=True, **fields)


# (B, Hq, Hkv, Sq, Sk, config): the last query tile leaves one empty warpgroup (Sq = 128 + 192k with three,
# 64 + 128k with two) or two (Sq = 64 + 192k); Sq ≠ Sk both ways, GQA; causal with rows that see no key (Sq > Sk)
CASES = [
    (1, 2, 1, 320, 200, skipping()),                                            # 3 wg, 1 empty
    (1, 2, 2, 64, 300, skipping(causal=True)),                                  # 3 wg, 2 empty, one tile only
    (1, 2, 1, 256, 130, skipping(causal=True, bn=64)),                          # 2 empty; Sq > Sk: rows, no key
    (1, 1, 1, 64, 400, skipping(bn=192, pingpong=False, p_in_smem=True, epilogue="rows")),
    (2, 2, 1, 192, 100, skipping(warpgroups=2, causal=True)),                   # 2 wg, 1 empty
    (1, 2, 1, 64, 200, skipping(d=128, warpgroups=2, epilogue="direct")),
    (1, 2, 1, 320, 250, skipping(d=128, warpgroups=2, overlap=False)),          # the plain loop
    (1, 2, 1, 64, 90, skipping(overlap=False, causal=True, epilogue="direct")),
    (2, 2, 1, 320, 190, persistent()),                                          # persistent, ring across items
    (1, 2, 1, 256, 190, persistent(continuous_turns=False)),                    # the ring restarting per item
    (1, 3, 1, 64, 260, persistent(causal=True, o_buffer=True)),
    (1, 2, 1, 320, 150, persistent(warpgroups=2, causal=True, continuous_turns=False)),
    (1, 2, 2, 192, 200, persistent(d=128, warpgroups=2, o_buffer=True)),
    (1, 2, 1, 200, 130, persistent(overlap=False, epilogue="direct")),
]


def items(config, b, hq, sq, sk):
    """(valid warpgroups, KV tiles) of every work item: the rows of its query tile in 64-row warpgroups, and n_end
    (``build.kv_tiles``)."""
    for _ in range(b * hq):
        for q0 in range(0, sq, config.bm):
            tiles = -(-sk // config.bn)
            if config.causal:
                visible = max(min(q0 + config.bm, sq) + sk - sq, 0)
                tiles = min(tiles, -(-visible // config.bn))
            yield -(-min(config.bm, sq - q0) // 64), tiles


def wgmma_count(config, b, hq, sq, sk, skip: bool) -> int:
    """The warpgroup-wgmmas of the problem: per KV tile of an item one S = Q·Kᵀ and one P·V per column block of O,
    for each of its warpgroups (``skip``: only those with rows)."""
    per_tile = 1 + config.head_dim // config.o_block
    return sum((valid if skip else config.consumer_warpgroups) * tiles * per_tile
               for valid, tiles in items(config, b, hq, sq, sk))


@pytest.fixture
def wgmmas(monkeypatch):
    """A counter of the warpgroup-wgmmas the interpreter runs (active threads / 128 per ``wgmma.mma`` or
    ``wgmma.mma_rs``)."""
    count = [0]

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def interpret(self, op, ix):
            count[0] += int(np.count_nonzero(ix.mask))
            return self.inner.interpret(op, ix)

    for name in ("wgmma.mma", "wgmma.mma_rs"):
        monkeypatch.setitem(OPS, name, Counting(OPS[name]))
    return lambda: count[0] // 128


def run_padded(config, q, k, v, ctas=3, schedule="lazy"):
    """Run ``config`` on q, k, v with ``out`` and ``lse`` views of larger arrays filled with ``SENTINEL`` (8 more
    rows past Sq); → (out, lse, the padding rows of out, of lse)."""
    from ptxgen.interp import interpret

    b, sq, hq, d = q.shape
    out_full = np.full((b, sq + 8, hq, d), SENTINEL, q.dtype)
    lse_full = np.full((b, hq, sq + 8), SENTINEL, np.float32)
    out, lse = out_full[:, :sq], lse_full[:, :, :sq]
    interpret(run.kernel_module(config), run.kernel_arguments(q, k, v, out, lse, config.head_dim ** -0.5,
                                                              lambda x: x.transpose(0, 2, 1, 3), config, ctas=ctas),
              schedule=schedule)
    return out, lse, out_full[:, sq:], lse_full[:, :, sq:]


@pytest.mark.parametrize("b, hq, hkv, sq, sk, config", CASES)
def test_interpreter_matches_float64(b, hq, hkv, sq, sk, config, wgmmas):
    """Every row written once and equal to float64's (no sentinel left), the rows past Sq untouched, and the
    empty warpgroups ran no wgmma: the count is that of the warpgroups with rows only."""
    assert wgmma_count(config, b, hq, sq, sk, True) < wgmma_count(config, b, hq, sq, sk, False)
    q, k, v = random_problem(b, hq, hkv, sq, sk, config.head_dim, config.dtype, seed=sq + 5 * sk)
    out, lse, out_pad, lse_pad = run_padded(config, q, k, v, schedule=sq % 7)
    assert not np.any(out.astype(np.float32) == SENTINEL) and not np.any(lse == SENTINEL)
    assert_matches(out, lse, *reference(q, k, v, config.causal, config.head_dim ** -0.5), config.dtype)
    assert np.all(out_pad.astype(np.float32) == SENTINEL) and np.all(lse_pad == SENTINEL)
    assert wgmmas() == wgmma_count(config, b, hq, sq, sk, True)


@pytest.mark.parametrize("config", [skipping(), persistent(warpgroups=2, causal=True)], ids=["wg3", "wg2_persistent"])
def test_without_skipping_every_warpgroup_computes(config, wgmmas):
    """The counter's control: the same problem with skip_empty_rows off runs the wgmmas of every warpgroup, and the
    result is the same bit for bit (an empty warpgroup's garbage rows never reached out or lse)."""
    q, k, v = random_problem(1, 2, 1, 128 + 192 if config.consumer_warpgroups == 3 else 192, 200, 64, "bf16", seed=2)
    sq = q.shape[1]
    skipped = run_padded(config, q, k, v)
    after_skip = wgmmas()
    computed = run_padded(dataclasses.replace(config, skip_empty_rows=False), q, k, v)
    assert after_skip == wgmma_count(config, 1, 2, sq, 200, True)
    assert wgmmas() - after_skip == wgmma_count(config, 1, 2, sq, 200, False)
    for got, want in zip(skipped, computed):
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("causal, config", [
    (False, skipping(epilogue="rows", varlen=True)),
    (True, skipping(epilogue="rows", varlen=True, causal=True, warpgroups=2)),
    (True, persistent(epilogue="rows", varlen=True, causal=True, o_buffer=True)),
    (False, persistent(epilogue="rows", varlen=True, warpgroups=2)),
], ids=["wg3", "wg2_causal", "wg3_persistent_causal", "wg2_persistent"])
def test_varlen_ragged_sequences(causal, config):
    """Sequences ending 1, 64, 128 and 129 rows into a query tile, an empty one, one with no key; each equals its
    float64 reference, and the rows of the next sequence (and the padding after the last) keep their sentinel."""
    from ptxgen.interp import interpret

    q_lens, k_lens = [64, 0, 129, 1, 200, 30], [100, 20, 70, 64, 150, 0]
    q, k, v, cu_q, cu_k = packed_problem(q_lens, k_lens, 2, 1, 64, "bf16", seed=12, extra_rows=5)
    out = np.full(q.shape, SENTINEL, q.dtype)
    lse = np.full((2, q.shape[0]), SENTINEL, np.float32)
    interpret(run.kernel_module(config), run.varlen_arguments(q, k, v, out, lse, cu_q, cu_k, max(q_lens), 0.125,
                                                              lambda x: x.transpose(1, 0, 2), config, ctas=3),
              schedule=4)
    total = cu_q[-1]
    assert np.all(out[total:].astype(np.float32) == SENTINEL) and np.all(lse[:, total:] == SENTINEL)
    assert not np.any(out[:total].astype(np.float32) == SENTINEL) and not np.any(lse[:, :total] == SENTINEL)
    out[total:] = 0
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, "bf16", 0.125)


def test_attention_ops_take_the_config():
    """The ops run a skipping config as any other (dense and varlen)."""
    config = skipping(causal=True)
    q, k, v = random_problem(1, 2, 1, 70, 90, 64, "bf16", seed=1)
    out, lse = attention(q, k, v, causal=True, config=config)
    assert_matches(out, lse, *reference(q, k, v, True, 0.125), "bf16")
    q, k, v, cu_q, cu_k = packed_problem([70, 5], [90, 40], 2, 1, 64, "bf16", seed=2)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 70, 90, config=skipping(epilogue="rows", varlen=True))
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, False, "bf16", 0.125)


# -- the IR ------------------------------------------------------------------------------------------------------------

def region_after(text: str, head: str) -> str:
    """The text between the braces of the first region opened after ``head`` (nesting followed)."""
    i = text.index("{", text.index(head))
    depth, open_at = 0, i
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1:i]
        i += 1


@pytest.mark.parametrize("config", [skipping(), persistent(warpgroups=2, causal=True), skipping(overlap=False)],
                         ids=["wg3", "wg2_persistent", "plain"])
def test_kernel_text(config):
    """The default kernel is the one it was (no ``%wg_has_rows``); with skip_empty_rows the mainloop runs
    ``%wg_n_end`` tiles (0 for an empty warpgroup), the skeleton ``%skip_n_end`` (0 for the others) with the
    pipelines' waits and releases and (ping-pong) the turn barriers but no wgmma, frag op or store, and the epilogue
    sits under ``scf.if %wg_has_rows``."""
    assert "wg_has_rows" not in print_module(build(dataclasses.replace(config, skip_empty_rows=False)))
    printed = print_module(build(config))
    assert "%wg_has_rows = arith.cmp %row0, %sq {pred = lt} : i1" in printed
    assert re.search(r"%wg_n_end = arith\.select %wg_has_rows, %(seen_tiles|kv_tiles)\w*, %c0 : i32", printed)
    assert re.search(r"%skip_n_end = arith\.select %wg_has_rows, %c0, %(seen_tiles|kv_tiles)\w* : i32", printed)
    assert re.search(r"scf\.for %c[01], %wg_n_end,", printed)
    skeleton = printed[printed.index("%skip_n_end = "):printed.index("scf.if %wg_has_rows")]
    for absent in ("wgmma", "frag.", "tma.store", "gmem.store", "smem.stmatrix"):
        assert absent not in skeleton, absent
    assert skeleton.count("pipeline.wait") == skeleton.count("pipeline.release") == (4 if config.overlap else 2)
    assert ("barrier.named" in skeleton) == config.pingpong
    assert "tma.store" in region_after(printed, "scf.if %wg_has_rows")


def test_config_field_is_off_by_default():
    assert AttentionConfig().skip_empty_rows is False
    for d, causal in ((64, False), (64, True), (128, False), (128, True)):
        assert choose_config("bf16", d, causal, seqlens=(1024, 1024)).skip_empty_rows is False


def test_bench_variant_word():
    variant_fields = bench_variant_fields()
    assert variant_fields("skip") == {"skip_empty_rows": True}
    for d, causal in ((64, False), (64, True), (128, False), (128, True)):
        base = choose_config("bf16", d, causal, seqlens=(1024, 1024))
        dataclasses.replace(base, **variant_fields("skip")).validate()


# -- PTX ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [choose_config("bf16", 64, False, seqlens=(1024, 1024)),
                                    choose_config("bf16", 128, False, seqlens=(1024, 1024)),
                                    choose_config("bf16", 128, True, seqlens=(1024, 1024)),
                                    choose_config("bf16", 64, True, varlen=True, seqlens=(4096, 4096))],
                         ids=["d64_wg3", "d128_wg2", "d128_causal", "d64_varlen_wg3"])
def test_ptx_assembles_without_more_registers(config):
    """nvJitLink assembles the skipping kernel of each chosen configuration: the same wgmmas (the skeleton has none),
    no call, and under the consumers' setmaxnreg budget no more spills than without (D = 64, three warpgroups, S = 1k:
    4 bytes against 16; D = 128: 203 registers against 198 of the 240 setmaxnreg gives, no spills)."""
    from ptxgen.lower import compile_kernel

    budget = config.register_budgets[1]
    base = compile_kernel(build(config), defer_assembly=True).ptx
    ptx = compile_kernel(build(dataclasses.replace(config, skip_empty_rows=True)), defer_assembly=True).ptx
    wgmma = r"wgmma\.mma_async\.sync\.aligned"
    assert len(re.findall(wgmma, ptx)) == len(re.findall(wgmma, base))
    assert " call" not in ptx
    registers, spills = registers_at(ptx, budget)
    assert registers <= budget and spills <= registers_at(base, budget)[1]


# -- GPU ---------------------------------------------------------------------------------------------------------------

GPU_CASES = [   # (B, Hq, Hkv, Sq, Sk, D): ragged last query tiles with one and two empty warpgroups, Sq ≠ Sk, GQA
    (8, 16, 16, 1024, 1024, 64),     # 1024 = 5·192 + 64: two empty warpgroups of three
    (4, 16, 16, 2048, 2048, 64),     # 2048 = 10·192 + 128: one
    (8, 16, 16, 1088, 1088, 128),    # 1088 = 8·128 + 64: one of two
    (3, 8, 2, 1000, 1537, 64),
    (2, 12, 4, 1537, 1000, 128),
]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["chosen", "persist", "nopersist"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, hq, hkv, sq, sk, d", GPU_CASES)
def test_gpu_matches_float64(b, hq, hkv, sq, sk, d, causal, variant):
    """Fresh random bf16 inputs, choose_config's kernel with skip_empty_rows (as chosen, made persistent, made
    non-persistent): out within 1e-2 relative of float64, lse within 1e-4, rows with no key 0 and +inf."""
    torch = torch_or_skip()
    config = dataclasses.replace(choose_config("bf16", d, causal, seqlens=(sq, sk)), skip_empty_rows=True)
    if variant == "persist":
        config = dataclasses.replace(config, persistent=True, continuous_turns=config.pingpong)
    elif variant == "nopersist":
        config = dataclasses.replace(config, persistent=False, o_buffer=False, continuous_turns=False)
    check_persistent_on_gpu(torch, config, (b, hq, hkv, sq, sk, d), causal)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_equals_the_kernel_without_skipping(d, causal):
    """Same inputs, dense and varlen (sequences ending 1, 64, 128, 129 rows into a query tile, an empty one): out
    and lse bit for bit those of the kernel without skip_empty_rows (the same arithmetic for every row with a query),
    the rows past the last sequence untouched."""
    torch = torch_or_skip()
    q_lens, k_lens = [1000, 1, 64, 0, 2048, 129, 128], [1200, 64, 300, 9, 2048, 77, 500]
    cu_q = torch.tensor([0] + list(np.cumsum(q_lens)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(np.cumsum(k_lens)), dtype=torch.int32, device="cuda")
    total = sum(q_lens)
    q = torch.randn(total + 7, 8, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(k_lens), 2, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(k_lens), 2, d, device="cuda", dtype=torch.bfloat16)
    for warpgroups in (2, 3) if d == 64 else (2,):
        base = dataclasses.replace(choose_config("bf16", d, causal, varlen=True, seqlens=(2048, 2048)),
                                   consumer_warpgroups=warpgroups, registers=None)
        want, want_lse = attention_varlen(q, k, v, cu_q, cu_k, 2048, 2048, causal=causal, config=base)
        out = torch.full_like(q, SENTINEL)
        out, lse = attention_varlen(q, k, v, cu_q, cu_k, 2048, 2048, causal=causal, out=out,
                                    config=dataclasses.replace(base, skip_empty_rows=True))
        torch.cuda.synchronize()
        assert torch.equal(out[:total], want[:total]) and torch.equal(lse[:, :total], want_lse[:, :total])
        assert bool((out[total:] == SENTINEL).all())
    dense_q, dense_k, dense_v = q[:1088][None], k[:1088][None], v[:1088][None]
    dense = choose_config("bf16", d, causal, seqlens=(1088, 1088))
    want, want_lse = attention(dense_q, dense_k, dense_v, causal=causal, config=dense)
    out, lse = attention(dense_q, dense_k, dense_v, causal=causal,
                         config=dataclasses.replace(dense, skip_empty_rows=True))
    torch.cuda.synchronize()
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    want_ref, want_ref_lse = torch_reference(torch, dense_q, dense_k, dense_v, causal, d ** -0.5)
    assert float((out.double() - want_ref).norm() / want_ref.norm()) < 1e-2
