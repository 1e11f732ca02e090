"""ptxgen.kernels.attention_varlen (FlashAttention's cu_seqlens convention) in the CPU interpreter: every sequence of
a packed batch equals the float64 reference of its own rows (non-causal and causal, GQA, empty and one-token
sequences, Sq ≠ Sk per sequence), rows past the last sequence untouched; the op's argument errors; the kernel's PTX;
one element per thread (``load_element``'s ops); and on a GPU (``-m gpu``) against the dense op per sequence."""
from __future__ import annotations

import dataclasses
import re

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module
from ptxgen.kernels import AttentionConfig, attention_varlen
from ptxgen.kernels.attention import build, choose_config
from test_attention import HOST, OUT_TOLERANCE, reference


def packed_problem(q_lens, k_lens, hq, hkv, d, dtype, seed, extra_rows=0):
    rng = np.random.default_rng(seed)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1] + extra_rows, hq, d)).astype(HOST[dtype])
    k = rng.standard_normal((cu_k[-1], hkv, d)).astype(HOST[dtype])
    v = rng.standard_normal((cu_k[-1], hkv, d)).astype(HOST[dtype])
    return q, k, v, cu_q, cu_k


def assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, dtype, scale):
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if qs.stop == qs.start:
            continue
        want, want_lse = reference(q[None, qs], k[None, ks], v[None, ks], causal, scale)
        got = out[qs].astype(np.float64)
        err = np.linalg.norm(got - want[0]) / max(np.linalg.norm(want[0]), 1e-30)
        assert err < OUT_TOLERANCE[dtype] or not np.any(want), (b, err)
        empty = np.isinf(want_lse[0])
        assert np.array_equal(np.isposinf(lse[:, qs]), empty), b
        np.testing.assert_allclose(lse[:, qs][~empty], want_lse[0][~empty], rtol=1e-5)
    assert not np.any(out[cu_q[-1]:].astype(np.float32))


# (q lengths, k lengths, Hq, Hkv, D, causal, dtype): several 128-row query tiles in one sequence, a ragged KV
# tile, an empty query sequence, a one-token sequence, a sequence with no key, Sq > Sk (causal rows with no key)
CASES = [
    ([100, 1, 130, 0, 64], [150, 30, 70, 5, 64], 2, 1, 64, False, "bf16"),
    ([100, 1, 130, 0, 64], [150, 30, 70, 5, 64], 2, 1, 64, True, "bf16"),
    ([70, 200], [300, 20], 2, 2, 128, True, "bf16"),
    ([33, 5], [0, 40], 2, 1, 64, False, "f16"),
]


@pytest.mark.parametrize("q_lens, k_lens, hq, hkv, d, causal, dtype", CASES)
def test_varlen_interpreter_matches_each_sequence(q_lens, k_lens, hq, hkv, d, causal, dtype):
    q, k, v, cu_q, cu_k = packed_problem(q_lens, k_lens, hq, hkv, d, dtype, seed=len(q_lens), extra_rows=3)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal)
    assert out.shape == q.shape and lse.shape == (hq, q.shape[0]) and lse.dtype == np.float32
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, causal, dtype, d ** -0.5)


def test_varlen_overlap_pingpong_and_scale():
    q, k, v, cu_q, cu_k = packed_problem([100, 140], [260, 90], 2, 1, 64, "bf16", seed=4)
    config = AttentionConfig("bf16", 64, 64, 2, True, overlap=True, pingpong=True, epilogue="rows", varlen=True)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 140, 260, causal=True, softmax_scale=0.2, config=config)
    assert_sequences_match(q, k, v, cu_q, cu_k, out, lse, True, "bf16", 0.2)


def test_dense_rows_epilogue():
    """The dense kernel with the varlen's row-predicated store."""
    from ptxgen.kernels import attention
    from test_attention import assert_matches, random_problem

    q, k, v = random_problem(1, 2, 1, 100, 150, 64, "bf16", seed=2)
    out, lse = attention(q, k, v, causal=True, config=AttentionConfig(head_dim=64, causal=True, epilogue="rows"))
    assert_matches(out, lse, *reference(q, k, v, True, 64 ** -0.5), "bf16")


def test_no_key_or_no_query_launches_nothing():
    q, k, v, cu_q, cu_k = packed_problem([3, 4], [0, 0], 2, 1, 64, "bf16", seed=1)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, 4, 0)
    assert not np.any(out.astype(np.float32)) and np.all(np.isposinf(lse))


def _i32(*values):
    return np.array(values, np.int32)


QV, KV = np.zeros((10, 4, 64), ml_dtypes.bfloat16), np.zeros((12, 2, 64), ml_dtypes.bfloat16)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"cu_seqlens_q": np.array([0, 10], np.int64)}, TypeError, "attention_varlen: cu_seqlens_q must hold int32 "
                                                               r"offsets \(FlashAttention's cu_seqlens\), not numpy "
                                                               "int64"),
    ({"cu_seqlens_k": _i32(0, 12, 5)}, ValueError, r"attention_varlen: cu_seqlens_k must start at 0, never decrease "
                                                   r"and end at most at the 12 packed tokens, not \[0, 12, 5\]"),
    ({"cu_seqlens_q": _i32(0, 11)}, ValueError, "attention_varlen: cu_seqlens_q must start at 0, never decrease and "
                                                "end at most at the 10 packed tokens"),
    ({"max_seqlen_q": 5}, ValueError, "attention_varlen: cu_seqlens_q holds a sequence of 10 tokens, longer than "
                                      "max_seqlen_q = 5"),
    ({"max_seqlen_k": -1}, ValueError, "attention_varlen: max_seqlen_k must be a non-negative int, not -1"),
    ({"cu_seqlens_k": _i32(0, 6, 12)}, ValueError, "attention_varlen: cu_seqlens_k has 3 offsets but cu_seqlens_q "
                                                   "has 2"),
    ({"q": np.zeros((1, 10, 4, 64), ml_dtypes.bfloat16)}, ValueError, r"attention_varlen: q must be 3-D "
                                                                      r"\(total_tokens, heads, head_dim\)"),
    ({"k": np.zeros((12, 3, 64), ml_dtypes.bfloat16), "v": np.zeros((12, 3, 64), ml_dtypes.bfloat16)}, ValueError,
     "attention_varlen: q has 4 heads, not a multiple of k's 3"),
    ({"v": np.zeros((12, 2, 128), ml_dtypes.bfloat16)}, ValueError, "attention_varlen: v has head dim 128 but q has "
                                                                    "64"),
    ({"config": AttentionConfig(head_dim=64)}, ValueError, "attention_varlen: config is for bf16, head_dim 64, causal "
                                                           "False, varlen False, but the call is bf16, head_dim 64, "
                                                           "causal False, varlen True"),
])
def test_varlen_bad_arguments_are_named(kwargs, error, message):
    args = {"q": QV, "k": KV, "v": KV, "cu_seqlens_q": _i32(0, 10), "cu_seqlens_k": _i32(0, 12), "max_seqlen_q": 10,
            "max_seqlen_k": 12}
    args.update(kwargs)
    with pytest.raises(error, match=message):
        attention_varlen(**args)


def test_varlen_config_rule():
    with pytest.raises(ValueError, match="AttentionConfig.epilogue = 'direct': a varlen sequence's rows end inside "
                                         "the packed output, where no tensor bound stops a store: varlen takes "
                                         "epilogue = 'rows'"):
        AttentionConfig(varlen=True).validate()
    assert choose_config("f16", 128, False, varlen=True).epilogue == "rows"


def test_varlen_ptx():
    """The chosen varlen kernel (overlap + ping-pong): 3-d TMA loads, the cu_seqlens loads, no wgmma serialized; it
    re-sizes registers, so the GPU loads it from PTX (the driver's JIT honours setmaxnreg; nvJitLink's compile here
    holds it to the 168-register launch budget). Without overlap it fits those 168 registers with no spill."""
    import dataclasses

    from ptxgen.lower import compile_kernel
    from ptxgen.runtime.kernel_launch import load_image

    # the grid kernel's loads (the persistent one, chosen below 16384 keys, adds the next item's: test_attention_persistent)
    config = dataclasses.replace(choose_config("bf16", 128, True, varlen=True), persistent=False, o_buffer=False,
                                 continuous_turns=False)
    compiled = compile_kernel(build(config))
    ptx = compiled.ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d\.shared::cluster\.global", ptx)) == 6
    assert len(re.findall(r"ld\.global[.\w]*\.[bsu]32", ptx)) >= 4      # the four cu_seqlens offsets
    assert load_image(compiled) == "ptx"
    assert "C7509" not in compiled.info_log
    plain = compile_kernel(build(dataclasses.replace(config, overlap=False, pingpong=False)))
    assert plain.spill_bytes in (0, None)
    assert "C7509" not in plain.info_log and "C7512" not in plain.info_log


# -- one element per thread from the general ops (what scalar.load was) -----------------------------------------------

SCALAR = """
kernel @s(%cu: gtensor<i32, 2>, %y: gtensor<i32, 1>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %c1 = arith.const {value = 1} : i32
  %c0 = arith.const {value = 0} : i32
  %w = gmem.tile %cu, %c1, %t {shape = [(1,1)]} : gview<i32>[(1,1)]
  %af = gmem.load %w, %c0 {tv = [(1,1):(0,0)]} : frag<i32>[1]
  %a = frag.extract %af {index = 0} : i32
  %v = gmem.tile %y, %c0 {shape = [32]} : gview<i32>[32]
  %f = frag.splat %a : frag<i32>[1]
  gmem.store %v, %t, %f {tv = [(32,1):(1,0)]}
}
"""


def test_one_element_per_thread_reads_each_threads_element_and_zero_outside():
    """``gmem.tile`` of one element at the thread's coordinates, ``gmem.load`` through ``(1,1):(0,0)``,
    ``frag.extract``: thread t reads cu[1, t], 0 past the tensor (``load_element``'s form)."""
    cu = np.arange(40, dtype=np.int32).reshape(2, 20) + 1
    y = np.full(32, -1, np.int32)
    interpret(parse_module(SCALAR, file="s.tile"), {"cu": cu, "y": y})
    np.testing.assert_array_equal(y, np.r_[cu[1], np.zeros(12, np.int32)])


def test_one_element_per_thread_lowers_to_one_scalar_load():
    from ptxgen.lower import compile_kernel

    ptx = compile_kernel(parse_module(SCALAR, file="s.tile")).ptx
    assert len(re.findall(r"ld\.global[.\w]*\.[bsu]32", ptx)) == 1


# -- on the GPU --------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_varlen_matches_dense_per_sequence(causal, d):
    torch = pytest.importorskip("torch")
    from ptxgen.kernels import attention
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    q_lens, k_lens = [1000, 1, 513, 0, 2048, 77], [1200, 64, 300, 9, 2048, 77]
    cu_q = torch.tensor([0] + list(np.cumsum(q_lens)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(np.cumsum(k_lens)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(q_lens), 8, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(k_lens), 2, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(k_lens), 2, d, device="cuda", dtype=torch.bfloat16)
    out, lse = attention_varlen(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal)
    torch.cuda.synchronize()
    # the dense reference runs varlen's configuration (the choice sees the lengths: max_seqlen_k there, each
    # sequence's own Sk here, and a causal D = 64 loop of <= 1024 keys takes two warpgroups, a longer one three)
    chosen = choose_config("bf16", d, causal, varlen=True, seqlens=(max(q_lens), max(k_lens)))
    dense = dataclasses.replace(chosen, varlen=False, epilogue="tma")
    for b in range(len(q_lens)):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        if not q_lens[b]:
            continue
        want, want_lse = attention(q[qs][None].contiguous(), k[ks][None].contiguous(), v[ks][None].contiguous(),
                                   causal=causal, config=dense)
        torch.cuda.synchronize()
        assert torch.equal(out[qs], want[0]), b
        assert torch.equal(lse[:, qs], want_lse[0]), b
