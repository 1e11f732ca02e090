"""Run the attention kernels once each on the GPU on small, ragged, fresh random inputs and check each result against
float64, for compute-sanitizer (memcheck, racecheck, synccheck):

    compute-sanitizer --tool racecheck --error-exitcode 9 python3 tests/gpu/sanitize_attention.py
    compute-sanitizer --tool synccheck --error-exitcode 9 python3 tests/gpu/sanitize_attention.py
    compute-sanitizer --tool synccheck --error-exitcode 9 python3 tests/gpu/sanitize_attention.py --ring

Configurations: the chosen ones (overlap + ping-pong; TMA-store epilogue) for D = 64, 128, 256, causal and not, the
plain loop (no overlap, direct epilogue) for D = 128 and 256, 3 consumer warpgroups at D = 64 (causal with the
round-robin ping-pong; non-causal with 192-row KV tiles and P staged in shared memory), the persistent kernel on 3 CTAs
(D = 128 causal with O staged in Q's tile, D = 64 with 3 consumer warpgroups and O's own tile), and varlen (the
chosen one: ping-pong, rows epilogue), and the persistent kernel with the turn ring running on across its items
(``continuous_turns``: D = 128 causal with O in Q's tile, D = 64 with 3 consumer warpgroups and O's own tile, causal
(its items dealt by the host's table, its tiles aligned to the bottom) and not, on 3 CTAs, the causal ones with Q
double-buffered by item (``q_tiles`` = 2); ``--ring`` runs only these), and D = 64's lone query tiles packed into shared items (``pack_lone``: Sq = 200,
8 (batch, head) pairs in groups of 3, 3 and 2, on 3 CTAs; two Q tiles, O staged in the item's). Exits 0 when every run matched (the sanitizer's own exit code reports its findings).
"""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptxgen.kernels import AttentionConfig, attention, attention_varlen  # noqa: E402
from ptxgen.kernels.attention import choose_config  # noqa: E402


def reference(torch, q, k, v, causal):
    """float64 out of q (B, Sq, Hq, D), k, v (B, Sk, Hkv, D), bottom-right causal."""
    sq, hq, sk, hkv, d = q.shape[1], q.shape[2], k.shape[1], k.shape[2], q.shape[3]
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
    kd, vd = kd.repeat_interleave(hq // hkv, dim=1), vd.repeat_interleave(hq // hkv, dim=1)
    s = (qd @ kd.transpose(-1, -2)) * d ** -0.5
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        s = s.masked_fill(torch.arange(sk, device=q.device)[None, :] > i + sk - sq, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1))
    return (p @ vd).transpose(1, 2)


def rel(torch, got, want):
    return (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()


# the persistent kernel with the continuous turn ring, on 3 CTAs (5-8 items each); "sk": the KV length (457 unless
# given): 100 gives causal items with no KV tile (the first query tile's rows all above the first key)
RING = [(128, True, {"overlap": True, "pingpong": True, "epilogue": "tma", "persistent": True,
                     "continuous_turns": True, "ctas": 3}),
        (64, True, {"overlap": True, "pingpong": True, "epilogue": "tma", "persistent": True, "o_buffer": True,
                    "continuous_turns": True, "q_tiles": 2, "ctas": 3, "sk": 100}),
        (64, False, {"consumer_warpgroups": 3, "overlap": True, "pingpong": True, "epilogue": "tma",
                     "persistent": True, "o_buffer": True, "continuous_turns": True, "ctas": 3}),
        (64, True, {"consumer_warpgroups": 3, "overlap": True, "pingpong": True, "epilogue": "tma",
                    "persistent": True, "o_buffer": True, "continuous_turns": True, "item_table": True, "align_bottom": True,
                    "q_tiles": 2, "ctas": 3})]
CONFIGS = [(128, False, None), (128, True, None), (64, False, None), (256, True, None),
           (128, True, {}), (256, False, {"bn": 64}),
           (64, True, {"consumer_warpgroups": 3, "overlap": True, "pingpong": True, "epilogue": "tma"}),
           (64, False, {"bn": 192, "consumer_warpgroups": 3, "overlap": True, "epilogue": "tma", "p_in_smem": True}),
           (128, True, {"overlap": True, "pingpong": True, "epilogue": "tma", "persistent": True, "ctas": 3}),
           (64, False, {"consumer_warpgroups": 3, "overlap": True, "pingpong": True, "epilogue": "tma",
                        "persistent": True, "o_buffer": True, "ctas": 3}),
           (64, False, {"consumer_warpgroups": 3, "overlap": True, "pingpong": True, "epilogue": "tma",
                        "persistent": True, "continuous_turns": True, "pack_lone": True, "q_tiles": 2,
                        "stages": 5, "ctas": 3, "sq": 200})] + RING


def main() -> int:
    import torch

    ok = True
    only_ring = "--ring" in sys.argv[1:]
    for d, causal, fields in RING if only_ring else CONFIGS:
        fields = None if fields is None else dict(fields)
        sk = 457 if fields is None else fields.pop("sk", 457)
        sq = 300 if fields is None else fields.pop("sq", 300)
        q = torch.randn(2, sq, 4, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(2, sk, 2, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(2, sk, 2, d, device="cuda", dtype=torch.bfloat16)
        ctas = None if fields is None else fields.pop("ctas", None)
        config = (choose_config("bf16", d, causal) if fields is None
                  else AttentionConfig("bf16", d, fields.pop("bn", 128), fields.pop("stages", 2), causal, **fields))
        out, _lse = attention(q, k, v, causal=causal, config=config, ctas=ctas)
        torch.cuda.synchronize()
        err = rel(torch, out, reference(torch, q, k, v, causal))
        print(f"attention D={d} causal={causal} {config}: rel err {err:.2e}", flush=True)
        ok &= err < 1e-2
    if only_ring:
        print("all ok" if ok else "MISMATCH")
        return 0 if ok else 1
    lens_q, lens_k = [300, 1, 129], [200, 64, 500]
    cu_q = torch.tensor([0, 300, 301, 430], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 200, 264, 764], dtype=torch.int32, device="cuda")
    q = torch.randn(430, 4, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(764, 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(764, 2, 128, device="cuda", dtype=torch.bfloat16)
    out, _lse = attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    torch.cuda.synchronize()
    for b in range(3):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        err = rel(torch, out[qs], reference(torch, q[qs][None], k[ks][None], v[ks][None], True)[0])
        print(f"attention_varlen sequence {b}: rel err {err:.2e}", flush=True)
        ok &= err < 1e-2
    print("all ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
