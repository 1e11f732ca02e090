"""The attention kernel's configuration: one frozen dataclass naming every choice the builder makes, and the rules that
hold between them (``AttentionConfig.validate``), so that a bad combination is refused before any IR is built.

out = softmax(scale · Q·Kᵀ (+ causal mask)) · V per (batch, query head), Q (Sq, D), K and V (Sk, D) of the query
head's KV head (GQA: query head h reads KV head h / (Hq/Hkv)); lse = the rows' log-sum-exp of the scaled scores.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..gemm.config import SMEM_BYTES, setmaxnreg_problem

ELEMENT_BYTES = {"bf16": 2, "f16": 2}
HEAD_DIMS = (64, 128, 256)
HEAD_DIMS_TEXT = "64, 128 and 256"
EPILOGUES = ("direct", "tma", "rows")
BM = 128                 # query rows per CTA: two consumer warpgroups of 64 rows (one m64 wgmma block each)
CONSUMER_ROWS = 64
BOX_COLUMNS = 64         # head-dim columns per TMA box: one 128-byte SW128 row of 16-bit elements


@dataclass(frozen=True)
class AttentionConfig:
    """Every choice of the FA3-structured forward kernel (``ptxgen.kernels.attention.build``).

    - ``dtype``: Q's, K's, V's and the output's element type, ``bf16`` or ``f16`` (f32 accumulation, f32 lse).
    - ``head_dim``: D, 64, 128 or 256 (the wgmma K of S = Q·Kᵀ and the N of O += P·V).
    - ``bn``: key/value rows per KV tile (the wgmma N of S, the K of P·V), a multiple of 16 up to 256; below D a
      multiple of 64 that divides D: O is kept in D/o_block accumulators of o_block = min(D, bn) columns; the running row statistics
      live in S's accumulator layout, whose first o_block/2 values hold the rows of a block's (a value's row depends
      only on its index mod 4), so each block takes them by ``frag.slice``.
    - ``stages``: depth of each of the K and V pipelines.
    - ``causal``: the bottom-right-aligned causal mask (FlashAttention's for Sq ≠ Sk): KV tiles entirely above the
      diagonal are never loaded, the tiles crossing it are masked.
    - ``overlap``: FA3's intra-warpgroup overlap — the next tile's S = Q·Kᵀ and this tile's P·V are queued together
      and the softmax runs while P·V is on the tensor cores (``wgmma.wait {pending = 1}``).
    - ``pingpong``: FA3's inter-warpgroup ping-pong (with ``overlap``): the two consumer warpgroups' wgmma sections
      alternate through named barriers, one's softmax under the other's GEMMs.
    - ``epilogue``: ``"direct"`` (O stored from the registers), ``"tma"`` (O staged by stmatrix in the warpgroup's
      rows of Q's tile, stored by TMA boxes: the output's rows 16-byte aligned, as TMA needs) or ``"rows"`` (staged
      the same way, read back by rows and stored by threads whose row lies in the sequence: varlen's).
    - ``varlen``: the packed variable-length batch (FlashAttention's ``cu_seqlens`` convention): Q, K, V, the output
      (total, H, D) and lse (H, total_q), each sequence's rows found through ``cu_q``/``cu_k``.
    - ``registers``: the (producer, consumer) setmaxnreg budgets.

    Post (``validate``): the builder accepts the config; a violated rule is a ValueError naming the field."""

    dtype: str = "bf16"
    head_dim: int = 128
    bn: int = 128
    stages: int = 2
    causal: bool = False
    overlap: bool = False
    pingpong: bool = False
    epilogue: str = "direct"
    varlen: bool = False
    registers: tuple = (24, 240)

    def __post_init__(self):
        if isinstance(self.registers, list):
            object.__setattr__(self, "registers", tuple(self.registers))

    @property
    def o_block(self) -> int:
        """Columns of each of O's accumulators: min(D, bn) (S's row statistics cover that many columns' values)."""
        return min(self.head_dim, self.bn)

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    def smem_bytes(self) -> int:
        """Q's tile, the K and V rings and the barriers (one Q barrier, 16 bytes per pipeline stage).
        ``AttentionConfig().smem_bytes()`` = 128·128·2 + 2·2·128·128·2 + 8 + 2·2·16 = 163912."""
        tile = self.head_dim * self.element_bytes
        return BM * tile + 2 * self.stages * self.bn * tile + 8 + 2 * 16 * self.stages

    def validate(self) -> "AttentionConfig":
        """Raise ValueError naming the field of the first rule the config breaks; → the config. E.g.
        ``AttentionConfig(head_dim=96).validate()`` raises ``AttentionConfig.head_dim = 96: the kernel is built for
        head dims 64, 128 and 256``."""
        for rule in _RULES:
            message = rule(self)
            if message:
                raise ValueError(f"AttentionConfig.{message}")
        return self


def _dtype(c: AttentionConfig):
    if c.dtype not in ELEMENT_BYTES:
        return f"dtype = {c.dtype!r}: Q, K and V are bf16 or f16"
    return None


def _shape(c: AttentionConfig):
    if c.head_dim not in HEAD_DIMS:
        return f"head_dim = {c.head_dim}: the kernel is built for head dims {HEAD_DIMS_TEXT}"
    if not (isinstance(c.bn, int) and c.bn % 16 == 0 and 16 <= c.bn <= 256):
        return f"bn = {c.bn}: a KV tile has a multiple of 16 rows (the k16 steps of P·V), at most 256 (wgmma's largest N)"
    if c.bn < c.head_dim and (c.bn % 64 or c.head_dim % c.bn):
        return (f"bn = {c.bn}: below head_dim = {c.head_dim}, O is kept in blocks of bn columns (each taking S's row "
                "statistics), and each block of V is a wgmma operand of whole 64-column SW128 rows: bn a multiple "
                "of 64 dividing head_dim")
    if c.stages < 1:
        return f"stages = {c.stages}: each pipeline needs at least 1 stage"
    if c.epilogue not in EPILOGUES:
        return (f"epilogue = {c.epilogue!r}: O is stored 'direct' (from the registers), by 'tma' or by 'rows' "
                "(through smem)")
    if c.varlen and c.epilogue != "rows":
        return (f"epilogue = {c.epilogue!r}: a varlen sequence's rows end inside the packed output, where no tensor "
                "bound stops a store: varlen takes epilogue = 'rows'")
    if c.pingpong and not c.overlap:
        return ("pingpong = True: the ping-pong alternates the sections that queue S_j and P_{j-1}·V_{j-1} together: "
                "it needs overlap = True")
    return None


def _registers(c: AttentionConfig):
    return setmaxnreg_problem(c.registers)


def _shared_memory(c: AttentionConfig):
    need = c.smem_bytes()
    if need > SMEM_BYTES:
        return (f"stages = {c.stages}: Q's tile and {c.stages} stages of K and V tiles ({c.bn} × {c.head_dim}) need "
                f"{need} bytes of shared memory, over the {SMEM_BYTES} a Hopper CTA can have")
    return None


_RULES = (_dtype, _shape, _registers, _shared_memory)


def choose_config(dtype: str, head_dim: int, causal: bool, varlen: bool = False) -> AttentionConfig:
    """The configuration the op runs for a problem (deterministic), the fastest measured on the H100
    (docs/gpu-runs/2026-11-26-s11.log, sections 3 and 4): for D = 64 and 128 FA3's intra-warpgroup overlap and
    inter-warpgroup ping-pong, KV tiles of 128 rows (S's accumulator then holds 64 f32 values per thread); for
    D = 256 KV tiles of 64 rows (O's 128 values per thread fill the registers) and the plain loop (overlap's second S
    spills there: 0.67× the plain loop's speed); the TMA-store epilogue (varlen: the ``rows`` epilogue, whose stores
    stop at each sequence's end); a 2-stage K and a 2-stage V pipeline.
    ``choose_config("bf16", 64, True)`` = AttentionConfig("bf16", 64, 128, 2, True, overlap=True, pingpong=True,
    epilogue="tma")."""
    fa3 = head_dim != 256
    return AttentionConfig(dtype=dtype, head_dim=head_dim, bn=64 if head_dim == 256 else 128, stages=2, causal=causal,
                           overlap=fa3, pingpong=fa3, epilogue="rows" if varlen else "tma", varlen=varlen)
