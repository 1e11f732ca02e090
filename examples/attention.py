"""Attention forward from the library: the FA3-structured kernel's tile IR, printed, and the op run on a small
problem in the CPU interpreter against float64.

    python examples/attention.py                   # the IR of build(AttentionConfig(causal=True)) (bf16, D = 128)
    python examples/attention.py 64 [--causal] [--overlap] [--pingpong] [--tma]   # head dim 64, FA3's options
    python examples/attention.py --run             # attention() on q (1, 200, 4, 64), k, v (1, 300, 2, 64)

Reading the IR (top to bottom):

1. The signature: ``%q``, ``%k``, ``%v`` are rank-4 TMA maps over (B, H, S, D) — the caller's (B, S, H, D) with modes
   1 and 2 swapped, so a box ``(1,1,rows,64)`` is 64 head-dim columns of ``rows`` sequence rows of one (batch, head);
   ``%out`` (B, H, Sq, D) and ``%lse`` (B, H, Sq) are plain global tensors; ``grid = (cdiv(%sq, 128), dim(%q, 1),
   dim(%q, 0))``: one CTA per 128 query rows, query head and batch.
2. Shared memory: ``%sq_tile`` (Q's 128 × D tile), ``%sk_ring`` and ``%sv_ring`` (the K and V stages: the same
   K-major SW128 layout, each with two leading extent-1 modes for the box's batch and head), the Q mbarrier ``%qbar``
   and the K and V pipelines ``%pk``, ``%pv``; thread 0 initialises them before ``barrier.cta``.
3. The KV loop bound ``%n_end``: all ⌈Sk/bn⌉ tiles, or (causal) up to the tile holding the last query row's last
   visible key column — the tiles above the diagonal are never touched.
4. ``gpu.roles``, region 1 (the producer, 24 registers): thread 0 ``arrive_expect_tx`` + ``tma.load`` of Q's boxes,
   then per KV tile ``pipeline.acquire`` + the K boxes into ``%pk``, the V boxes into ``%pv``.
5. Region 2 (the two consumer warpgroups, 240 registers, 64 rows each): wait for Q, take the warpgroup's rows
   (``smem.permute``/``smem.slice`` drop the extent-1 modes, ``smem.tile`` takes 64 rows). The ``scf.for`` carries
   O, m (row max) and l (row sum) — f32 fragments in the wgmma accumulator layout. Per tile: ``wgmma.mma`` S = Q·Kᵀ,
   ``wgmma.wait``, release K; ``scf.if %need_mask`` → ``frag.coords`` + ``frag.cmp`` + ``frag.select`` (−inf past Sk
   and above the diagonal); ``frag.reduce … kind = max`` (the row max across the 4 threads of a row), ``frag.fma`` +
   ``frag.exp2`` (P and the rescale α with scale·log₂e folded into one FMA), ``frag.reduce … kind = add``,
   ``frag.cast`` P → 16 bits (already the RS A fragment: no data moves), ``wgmma.mma_rs`` O += P·V with V seen MN-major (``order = [(3,2,0,1)]``),
   ``wgmma.wait``, release V.
6. The epilogue: O / max(l, 1) → 16 bits → ``gmem.store`` through the accumulator's TV layout; lse = m·scale + ln l,
   stored by each quad's first thread for its rows r and r + 8.

With ``--overlap`` the loop queues S_j and P_{j-1}·V_{j-1} together and waits with ``wgmma.wait {pending = 1}``
before the softmax (tile 0 and the last P·V sit in ``scf.if %any_tile`` branches); ``--pingpong`` adds the
turns that alternate the two warpgroups' wgmma sections: warpgroup w waits on ``barrier.named {id = w + 1, threads =
256}`` before a section and hands over with ``barrier.arrive`` on the other's id after it; ``--tma`` stores O
through ``smem.stmatrix`` into Q's tile and ``tma.store`` (the library's choice for D = 64 and 128 is all three:
``choose_config``). The causal kernel takes its query tile as ``gridDim.x − 1 − blockIdx.x`` (``%m_tile``): the
longest tiles first.
"""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from ptxgen.ir.text import print_module
from ptxgen.kernels import AttentionConfig, attention
from ptxgen.kernels.attention import build


def main(argv) -> int:
    if "--run" in argv:
        rng = np.random.default_rng()
        q = rng.standard_normal((1, 200, 4, 64)).astype(ml_dtypes.bfloat16)
        k = rng.standard_normal((1, 300, 2, 64)).astype(ml_dtypes.bfloat16)
        v = rng.standard_normal((1, 300, 2, 64)).astype(ml_dtypes.bfloat16)
        out, lse = attention(q, k, v, causal=True)
        qd, kd, vd = (np.repeat(x.astype(np.float64), 2 if x is not q else 1, axis=2) for x in (q, k, v))
        s = np.einsum("bqhd,bkhd->bhqk", qd, kd) / 8.0
        s = np.where(np.arange(300)[None, :] > np.arange(200)[:, None] + 100, -np.inf, s)
        p = np.exp(s - s.max(-1, keepdims=True))
        want = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), vd)
        err = np.linalg.norm(out.astype(np.float64) - want) / np.linalg.norm(want)
        print(f"attention(q {q.shape}, k {k.shape}, v, causal=True) in the interpreter: out {out.shape} {out.dtype}, "
              f"lse {lse.shape}; relative error against float64 {err:.2e}")
        return 0 if err < 1e-2 else 1
    head_dim = int(argv[0]) if argv and argv[0].isdigit() else 128
    config = AttentionConfig(head_dim=head_dim, bn=64 if head_dim == 256 else 128,
                             causal="--causal" in argv or not argv, overlap="--overlap" in argv or "--pingpong" in argv,
                             pingpong="--pingpong" in argv, epilogue="tma" if "--tma" in argv else "direct")
    print(f"// {config}")
    print(print_module(build(config)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
