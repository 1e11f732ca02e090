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
CONSUMER_ROWS = 64       # query rows per consumer warpgroup: one m64 wgmma block
CONSUMER_WARPGROUPS = (2, 3)
BOX_COLUMNS = 64         # head-dim columns per TMA box: one 128-byte SW128 row of 16-bit elements
# the (producer, consumer) setmaxnreg budgets when ``registers`` is not given, per consumer warpgroup count w:
# 128·producer + 128·w·consumer = 64512 (w = 2) and 65536 (w = 3: FA3's 32 and 160) of the SM's 65536
DEFAULT_REGISTERS = {2: (24, 240), 3: (32, 160)}
SHORT_CAUSAL_KV = 1024   # choose_config: a varlen causal KV loop of at most this many keys keeps 128-row query tiles
SERPENTINE_CAUSAL_KV = 4096  # choose_config: varlen (no item table) D = 64 causal loops persistent up to this
LAZY_RESCALE_THRESHOLD = 8.0  # choose_config: D = 128's rescale_threshold (rule 7)
MAX_RESCALE_THRESHOLD = 15  # AttentionConfig.rescale_threshold: P ≤ 2^15 < f16's largest 65504
SHORT_KV = 1024          # choose_config: a D = 64 non-causal loop of at most this many keys runs 3 warpgroups persistent
PERSISTENT_MAX_KV = 16384  # choose_config: the persistent kernel for KV loops shorter than this (see choose_config)
LONG_KV = 4096           # choose_config: a dense non-causal D = 128 KV loop of at least this many keys takes LONG_KV_BN
LONG_KV_BN = 176         # choose_config: KV rows per tile there (FA3's D = 128 non-causal tile)
LONG_KV_WASTE = 0.01     # choose_config: LONG_KV_BN's ragged last tile may pad the keys by this share more than 128's
PACK_STAGES = 5          # choose_config: the pipelines' depth with pack_lone (its minimum for three warpgroups)
SHORT_Q_TILES_KV = 2048  # choose_config: D = 128 causal loops of at most this many keys double-buffer Q (rule 12)


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
    - ``pingpong``: FA3's inter-warpgroup ping-pong (with ``overlap``): the consumer warpgroups' wgmma sections
      take turns (round-robin) through named barriers, one's softmax under the others' GEMMs.
    - ``epilogue``: ``"direct"`` (O stored from the registers), ``"tma"`` (O staged by stmatrix in the warpgroup's
      rows of Q's tile, stored by TMA boxes: the output's rows 16-byte aligned, as TMA needs) or ``"rows"`` (staged
      the same way, read back by rows and stored by threads whose row lies in the sequence: varlen's).
    - ``varlen``: the packed variable-length batch (FlashAttention's ``cu_seqlens`` convention): Q, K, V, the output
      (total, H, D) and lse (H, total_q), each sequence's rows found through ``cu_q``/``cu_k``.
    - ``registers``: the (producer, consumer) setmaxnreg budgets; None: ``DEFAULT_REGISTERS`` of the consumer
      warpgroup count ((24, 240) for 2, FA3's (32, 160) for 3): ``register_budgets``.
    - ``consumer_warpgroups``: 2 or 3 consumer warpgroups of 64 query rows each: a CTA's query tile has ``bm`` = 128
      or 192 rows and 384 or 512 threads (FA3 runs head dim 64 with 3). With ``pingpong`` the warpgroups' wgmma
      sections take turns round-robin (0, 1, 2, 0, …).
    - ``p_in_smem``: O += P·V by SS wgmma with P staged in shared memory (stmatrix into the warpgroup's (64, bn)
      K-major tile, ``fence.proxy_async``, the warpgroup's own barrier) instead of RS from registers: under the overlap
      the registers of P_{j-1} are free while S_j's softmax runs (FA3's choice for D = 64 non-causal with bn = 192
      and 3 consumer warpgroups, where the RS form spills at 160 registers).
    - ``persistent``: FA3's persistent kernel: min(work items, ``%ctas``) CTAs (``ctas``: the SMs), each walking work
      items (batch, head, query tile) in ``schedule``'s serpentine order (query tiles fastest, causal longest first),
      the producer loading the next item's first K/V tile and Q while the consumers finish the current one's softmax
      and epilogue; the K/V pipelines' iteration counter and Q's barrier phase run on across items.
    - ``o_buffer``: the ``tma`` and ``rows`` epilogues stage O in a (bm, D) tile of its own instead of Q's, so that a
      persistent CTA's next Q may load as soon as the current item's last S = Q·Kᵀ has completed (not after its
      epilogue's stores have read O).
    - ``exp2_poly``: (k, n), the share of P's exponentials computed in software on the FP32 pipe instead of the MUFU
      (``frag.exp2 {ftz = true, poly = (k, n)}``: value i of S's fragment where i mod n < k, a degree-3 polynomial,
      ≈ 1e-4 relative, below P's 16-bit rounding); (0, 1): all on the MUFU. At D = 64 a KV iteration's 24576 exp2
      keep the MUFU (16 per clock per SM) as busy as the tensor cores: FlashAttention-4's remedy. α's exp2 (one per
      row) stays on the MUFU.
    - ``continuous_turns``: the ping-pong's turn ring runs on across a persistent CTA's work items instead of
      restarting at each (``softmax.pingpong_turn``): warpgroup 0 queues item i+1's first S = Q·Kᵀ as soon as the
      last warpgroup has queued item i's last P·V, not after that warpgroup's softmax tail and epilogue. Needs
      ``persistent`` and ``pingpong``.
    - ``rescale_threshold``: τ in exp2's units (0: off), FlashAttention-4's conditional rescaling
      (``softmax.lazy_max``): a warp moves its running max, and rescales O and l, only when some row's max has
      risen above it by more than τ; otherwise P = exp2(S·c − m·c) ≤ 2^τ under the old max. From 0 to 15 (2^τ
      within f16's range).
    - ``skip_unseen``: each consumer warpgroup runs the GEMMs and the softmax only for the KV tiles its own 64 rows
      see (``softmax.own_tiles``): none where its first row lies past Sq (a ragged last query tile: 1024 rows in
      192-row tiles leave 128 of the last tile's rows empty), and, causal, none past the tile holding its own last
      row's last visible key (the CTA's loop runs to its last row's). For the tiles it skips it still takes its
      ping-pong turns and releases the K and V stages (``softmax.idle_sections``), so the ring and the pipelines
      run as before. A warpgroup that sees no tile keeps O = 0, l = 0: its rows past Sq are never stored, and a
      causal row that sees no key gets FlashAttention's O = 0, lse = +inf, as it did through fully masked scores.

    - ``pack_lone``: a query tile's rows end within its first warpgroup's 64 (Sq mod bm in 1 … 64: 1024 rows in
      192-row tiles leave a last tile of 64) — the "lone" last tiles of w = ``consumer_warpgroups`` consecutive (batch,
      head) pairs run as one work item, warpgroup v taking pair v's lone 64 rows against that pair's own K and V
      (``schedule``: each group of w pairs' full tiles, then the group's packed item, so their K and V are still in
      L2). A lone tile alone costs a full item (each warpgroup's chain of KV tiles sets an item's time, whether one or
      three of them compute). The packed item's K/V pipelines carry the w streams' tiles interleaved (KV tile j of
      stream v at the item's iteration w·j + v; Q's tile is loaded as w 64-row boxes); each warpgroup releases the
      others' stages of a round once they are full, so every stage still gets every consumer warp's release. Needs
      ``persistent``, not ``varlen`` nor ``causal``, ``skip_unseen`` (the last group's warpgroups without a pair
      compute no tile) and 2w − 1 stages (a warpgroup holds its V stage for a round while the w streams' next tiles
      load: fewer stages would tie one warpgroup's loads to another's softmax).

    - ``item_table``: the persistent CTAs take their work items from a table the host deals (``schedule.item_table``:
      windows of a few rounds' items, each longest first to the least loaded CTA) instead of serpentine rounds: causal
      items of 1 … tiles_m KV tiles balance within ~1% (serpentine: 3-27% on the longest CTA). Needs ``persistent``,
      not ``varlen`` (its items' lengths are on the device) nor ``pack_lone`` (its own numbering).

    - ``align_bottom``: causal query tiles end at row Sq: the rows the tiling leaves over, in whole warpgroups, come
      off the FIRST tile, whose rows see the fewest keys, instead of the last, which sees them all
      (``build.bottom_aligned_rows``; Sq = 1024 in 192-row tiles: a first tile of 64 rows and one KV tile instead of
      a last of 64 rows and 8). The first tile's warpgroups past its rows compute nothing
      (``softmax.own_tiles``) and store nothing (``epilogue.store``). Needs ``causal``, not ``varlen`` nor
      ``pack_lone``.

    - ``q_tiles``: 1, or 2 for a persistent kernel: Q's tile double-buffered by item parity (``%qbar[r mod 2]``,
      ``%qfree[r mod 2]``): item r+1's Q loads as soon as item r − 1's last S = Q·Kᵀ completed, not item r's.

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
    registers: tuple | None = None
    consumer_warpgroups: int = 2
    p_in_smem: bool = False
    persistent: bool = False
    o_buffer: bool = False
    exp2_poly: tuple = (0, 1)
    continuous_turns: bool = False
    rescale_threshold: float = 0.0
    skip_unseen: bool = True
    pack_lone: bool = False
    item_table: bool = False
    align_bottom: bool = False
    q_tiles: int = 1

    def __post_init__(self):
        for field in ("registers", "exp2_poly"):
            if isinstance(getattr(self, field), list):
                object.__setattr__(self, field, tuple(getattr(self, field)))

    @property
    def bm(self) -> int:
        """Query rows per CTA: 64 per consumer warpgroup (``AttentionConfig(consumer_warpgroups=3).bm`` = 192)."""
        return CONSUMER_ROWS * self.consumer_warpgroups

    @property
    def threads(self) -> int:
        """Threads per CTA: the producer warpgroup and the consumers, 128 each (384 or 512)."""
        return 128 * (1 + self.consumer_warpgroups)

    @property
    def register_budgets(self) -> tuple:
        """The (producer, consumer) setmaxnreg budgets: ``registers``, or the default of the consumer warpgroup count
        (``AttentionConfig(consumer_warpgroups=3).register_budgets`` = (32, 160))."""
        if self.registers is not None:
            return self.registers
        return DEFAULT_REGISTERS.get(self.consumer_warpgroups, DEFAULT_REGISTERS[2])

    @property
    def o_block(self) -> int:
        """Columns of each of O's accumulators: min(D, bn) (S's row statistics cover that many columns' values)."""
        return min(self.head_dim, self.bn)

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    def smem_bytes(self) -> int:
        """Q's tile (``bm`` rows; the ``tma`` and ``rows`` epilogues stage O in it), the K and V rings, P's (bm, bn)
        tile with ``p_in_smem``, and the barriers (one Q barrier, 16 bytes per pipeline stage). ``AttentionConfig().smem_bytes()`` = 128·128·2 + 2·2·128·128·2 +
        8 + 2·2·16 = 163912; ``AttentionConfig(head_dim=64, bn=192, consumer_warpgroups=3).smem_bytes()`` = 192·64·2
        + 2·2·192·64·2 + 8 + 64 = 122952."""
        tile = self.head_dim * self.element_bytes
        p_tile = self.bm * self.bn * self.element_bytes if self.p_in_smem else 0
        o_tile = self.bm * tile if self.o_buffer else 0
        q_bars = self.q_tiles * (16 if self.persistent else 8)
        return (self.q_tiles * self.bm * tile + 2 * self.stages * self.bn * tile + p_tile + o_tile + q_bars
                + 2 * 16 * self.stages)

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
    if c.consumer_warpgroups not in CONSUMER_WARPGROUPS:
        return (f"consumer_warpgroups = {c.consumer_warpgroups!r}: a CTA has 2 or 3 consumer warpgroups of 64 query rows "
                "(a 128- or 192-row query tile)")
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
    if c.p_in_smem and c.bn % 64:
        return (f"bn = {c.bn}: with p_in_smem, P's (64, bn) tile is the SS wgmma's A operand in K-major SW128 atoms of "
                "64 columns: bn a multiple of 64")
    if c.o_buffer and c.epilogue == "direct":
        return ("o_buffer = True: O is staged in shared memory only by the 'tma' and 'rows' epilogues, not by "
                "epilogue = 'direct'")
    if not (isinstance(c.exp2_poly, tuple) and len(c.exp2_poly) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in c.exp2_poly)
            and c.exp2_poly[1] >= 1 and 0 <= c.exp2_poly[0] <= c.exp2_poly[1]):
        return (f"exp2_poly = {c.exp2_poly!r}: (k, n), two integers with n ≥ 1 and 0 ≤ k ≤ n (P's value i takes the "
                "polynomial exp2 where i mod n < k; (0, 1): every value on the MUFU)")
    if c.pingpong and not c.overlap:
        return ("pingpong = True: the ping-pong alternates the sections that queue S_j and P_{j-1}·V_{j-1} together: "
                "it needs overlap = True")
    if c.continuous_turns and not (c.persistent and c.pingpong):
        missing = " and ".join(f"{field} = True" for field in ("persistent", "pingpong") if not getattr(c, field))
        return ("continuous_turns = True: the ping-pong's turn ring runs on across the work items of a persistent "
                f"CTA: it needs {missing}")
    if c.pack_lone and (not (c.persistent and c.skip_unseen) or c.varlen or c.causal
                        or c.stages < 2 * c.consumer_warpgroups - 1):
        need = [rule for rule, broken in (("persistent = True", not c.persistent), ("varlen = False", c.varlen),
                                          ("causal = False", c.causal), ("skip_unseen = True", not c.skip_unseen),
                                          (f"stages ≥ {2 * c.consumer_warpgroups - 1}",
                                           c.stages < 2 * c.consumer_warpgroups - 1)) if broken]
        return ("pack_lone = True: the lone last query tiles of consecutive heads are packed into work items of the "
                "persistent dense non-causal kernel, each warpgroup's V stage held a round while the others' load: it "
                f"needs {' and '.join(need)}")
    if c.item_table and (not c.persistent or c.varlen or c.pack_lone):
        need = [rule for rule, broken in (("persistent = True", not c.persistent), ("varlen = False", c.varlen),
                                          ("pack_lone = False", c.pack_lone)) if broken]
        return ("item_table = True: the host deals the work items of the persistent dense kernel by their lengths "
                f"(varlen's are on the device; pack_lone numbers them otherwise): it needs {' and '.join(need)}")
    if c.align_bottom and (not c.causal or c.varlen or c.pack_lone):
        need = [rule for rule, broken in (("causal = True", not c.causal), ("varlen = False", c.varlen),
                                          ("pack_lone = False", c.pack_lone)) if broken]
        return ("align_bottom = True: the dense causal kernel's query tiles end at row Sq, the left-over rows in the "
                f"first tile: it needs {' and '.join(need)}")
    if c.q_tiles not in (1, 2) or isinstance(c.q_tiles, bool):
        return f"q_tiles = {c.q_tiles!r}: Q has 1 tile, or 2 (double-buffered by work item)"
    if c.q_tiles == 2 and not c.persistent:
        return ("q_tiles = 2: Q's tile is double-buffered across the work items of a persistent CTA: it needs "
                "persistent = True")
    if isinstance(c.rescale_threshold, bool) or not isinstance(c.rescale_threshold, (int, float)) \
            or not 0 <= c.rescale_threshold <= MAX_RESCALE_THRESHOLD:
        return (f"rescale_threshold = {c.rescale_threshold!r}: τ is a number from 0 (rescale at every new max) to "
                f"{MAX_RESCALE_THRESHOLD} (P ≤ 2^τ must stay within f16's range)")
    return None


def _registers(c: AttentionConfig):
    """The setmaxnreg rule of the GEMM (``setmaxnreg_problem``: multiples of 8 from 24 to 256, fitting the registers
    a CTA of 1 + w warpgroups launches with)."""
    return setmaxnreg_problem(c.register_budgets, c.consumer_warpgroups)


def _shared_memory(c: AttentionConfig):
    need = c.smem_bytes()
    if need > SMEM_BYTES:
        p_tile = f", P's tile ({c.bm} × {c.bn})" if c.p_in_smem else ""
        p_tile += f", O's tile ({c.bm} × {c.head_dim})" if c.o_buffer else ""
        q_tiles = "two Q tiles" if c.q_tiles == 2 else "Q's tile"
        return (f"stages = {c.stages}: {q_tiles} ({c.bm} × {c.head_dim}){p_tile} and {c.stages} stages of K and V "
                f"tiles ({c.bn} × {c.head_dim}) need {need} bytes of shared memory, over the {SMEM_BYTES} a Hopper CTA can have")
    return None


_RULES = (_dtype, _shape, _registers, _shared_memory)


def padded_keys(sk: int, bn: int) -> int:
    """The keys a KV loop of ⌈Sk/bn⌉ tiles computes (its ragged last tile's masked rows included):
    ``padded_keys(4096, 176)`` = 4224. Post: Sk ≤ result < Sk + bn."""
    return -(-sk // bn) * bn


def last_tile_rows(sq: int, bm: int) -> int:
    """The rows of the last of ⌈Sq/bm⌉ query tiles (bm for an even split, 0 for Sq = 0): ``last_tile_rows(1024,
    192)`` = 64."""
    return sq - (max(-(-sq // bm), 1) - 1) * bm


def choose_config(dtype: str, head_dim: int, causal: bool, varlen: bool = False,
                  seqlens: tuple | None = None) -> AttentionConfig:
    """The configuration the op runs for a problem, deterministic, by the rules measured on the H100
    (docs/gpu-runs/2026-11-26-s11.log sections 3-4, 2026-11-26-s12.log section 4). ``seqlens``: the problem's
    (Sq, Sk), varlen's (max_seqlen_q, max_seqlen_k); None: a problem of short sequences.

    1. D = 64 and 128: FA3's intra-warpgroup overlap and inter-warpgroup ping-pong (round-robin turns), KV tiles of
       128 rows, 2 pipeline stages; D = 256: KV tiles of 64 rows (O's 128 values per thread fill the registers) and
       the plain loop (overlap's second S spills there: 0.67× the plain loop's speed).
    2. D = 64: three consumer warpgroups (FA3's 192-row query tiles, setmaxnreg 32/160): +7% (S = 1k) to +22%
       (S = 8k-16k) non-causal and +5-12% causal from S = 2k, over two — except a causal KV loop of at most
       ``SHORT_CAUSAL_KV`` = 1024 keys (or unknown lengths, causal), where the 192-row tiles' masked diagonal costs
       more than they save (−8% at S = 1k; rule 9) — since rule 12 only varlen's such loops. D = 128 keeps two
       (three spill at 160 registers).
    3. The TMA-store epilogue (varlen: the ``rows`` epilogue, whose stores stop at each sequence's end).
    4. The persistent kernel with O in its own tile (``persistent``, ``o_buffer``) for two consumer warpgroups (D = 128,
       and D = 64's short causal loops) below ``PERSISTENT_MAX_KV`` = 16384 keys: D = 128 non-causal +8% at S = 1k, +5%
       at 2k, +2% at 4k, +1% at 8k; causal +13% / +10% / +7% / +5% (x0.97-1.11 cuDNN); D = 64 causal 1k +10%. Not
       with three warpgroups (-35-40%) nor at 16k causal (450 against 666 TFLOP/s; non-causal even).
    5. D = 128, dense (not varlen), non-causal, at least ``LONG_KV`` = 4096 keys: KV tiles of ``LONG_KV_BN`` = 176 rows
       (FA3's), persistent at every length, O staged in Q's tile (two stages of 176-row K and V tiles leave no room
       for O's own): S = 16k 698 against 654 TFLOP/s (x1.07 cuDNN), 8k 652 against 620, 4k 623 against 614
       (docs/gpu-runs/2026-11-26-s15.log section 1). Below 4k the 128-row tiles stay ahead (1k: 546 against 509);
       causal keeps 128 (176: -5 to -12% at 2k-4k). Where 176-row tiles pad the keys by more than ``LONG_KV_WASTE`` =
       1% of Sk beyond what 128-row ones do (``padded_keys``: Sk = 4096 in 24 tiles of 176 computes 4224 keys, in 32
       of 128 exactly 4096), 128-row tiles with O's own tile: S = 4k 622.1 -> 648.2 TFLOP/s interleaved, 608.0 ->
       629.1 in windows; at 6k, 8k and 16k (padding 0.3-1%) the two are within 1% (docs/gpu-runs/2026-11-27-s26.log
       section 1).
    6. Every persistent kernel runs its turn ring across its work items (``continuous_turns``; s15 section 11: D = 128
       non-causal S = 1k 548 -> 575, 2k 609 -> 627 TFLOP/s, causal 1k 418 -> 440, 4k 596 -> 608; D = 64 causal 1k
       282 -> 292). With it, D = 64 causal loops of up to ``SHORT_CAUSAL_KV`` = 1024 keys take two warpgroups,
       persistent, and D = 64 non-causal loops of up to ``SHORT_KV`` = 1024 keys three warpgroups persistent with O's
       own tile (371 -> 383; at 2k even, at 4k -2%).
    7. D = 128 rescales O lazily (``rescale_threshold`` = ``LAZY_RESCALE_THRESHOLD`` = 8, FlashAttention-4's):
       non-causal +2.5% / +3.5% / +0.5% / +0.4% at S = 1k / 2k / 4k / 8k, causal 0 / +1.2% / +3.4% / +3.5%
       (docs/gpu-runs/2026-11-26-s21.log section 5); D = 64 was 1-2% slower with it at S ≤ 4k (its vote and branches
       cost more than the 32 multiplies they skip) and keeps rescaling at every new max.
    8. D = 64 non-causal, not varlen, with a lone last query tile (Sq − (tiles_m − 1)·192 ≤ 64, e.g. Sq = 1024 or
       4096) and fewer than ``PERSISTENT_MAX_KV`` keys: the persistent kernel of rule 6 with ``pack_lone`` and
       ``PACK_STAGES`` = 5 stages (its minimum, 2w − 1): S = 1k 385.7 -> 424.1 TFLOP/s (x1.03 cuDNN; 5 stages alone
       369.5), 4k 473.7 -> 488.4 (not persistent before; persistent unpacked 465.0); at 16k even (518.0 / 516.2)
       (docs/gpu-runs/2026-11-27-s25.log sections 3 and 6).
    9. D = 64 causal loops of more than ``SHORT_CAUSAL_KV`` = 1024 keys: three warpgroups persistent with O's own
       tile and the turn ring (with the skipping of unseen tiles and the deferred store wait, which came after rule
       6's measurement), against two warpgroups: S = 1152 / 1536 / 1792 / 2048 / 2304 / 2816 / 3072 / 3328 / 3584 /
       3840 / 4096 +4 / +7 / +2 / +2 / +7 / +2 / +10 / +3 / +2 / +11 / +5% with serpentine rounds (S = 1280 and 2560
       −2% and −5%, where serpentine rounds balance worst); at 1k two warpgroups stay ahead (304 against 266)
       (docs/gpu-runs/2026-11-27-s26.log section 4). From 8k, with rule 10's table, against the grid kernel: 8k
       443.0 -> 466.1, 16k 467.9 -> 484.1 (section 5); varlen, which has no table, only up to
       ``SERPENTINE_CAUSAL_KV`` = 4096 keys (serpentine rounds: 8k 398 against the grid's 443).
    10. Every causal dense persistent kernel takes its items from the host's table (``item_table``): D = 64 S = 1k /
       2k / 2560 / 4k 301.3 / 362.0 / 351.0 / 410.8 -> 302.7 / 373.5 / 378.0 / 415.0 TFLOP/s, D = 128 429.6 /
       522.2 / 493.9 / 590.8 -> 420.6 / 529.0 / 552.8 / 591.8, 8k 629.3 -> 637.1 (section 5).
    11. Every causal dense kernel aligns its query tiles to the bottom (``align_bottom``: the left-over rows in the
       first tile, which sees the fewest keys): D = 64 S = 2k / 2560 / 4k / 8k 367.7 / 374.1 / 411.9 / 458.9 ->
       383.9 / 401.1 / 430.8 / 462.5 TFLOP/s interleaved; at 1k (128-row tiles divide Sq) 300.0 / 299.1 (section 7).
    12. Dense causal kernels double-buffer Q (``q_tiles`` = 2: item r+1's Q loads while item r runs, not after its
       last S = Q·Kᵀ) — D = 64 at every length, D = 128 up to ``SHORT_Q_TILES_KV`` = 2048 keys — and D = 64 takes
       three warpgroups down to the shortest loops (rule 9 kept two up to 1024 keys; varlen, which has neither the
       table nor bottom-aligned tiles, still does): D = 64 S = 512 / 768 / 1k 223.6 / 267.1 / 296.9 -> 237.1 /
       288.4 / 322.9 TFLOP/s (two Q tiles with two warpgroups: 233.0 / 275.0 / 304.8), 2k / 4k / 8k +3.3% / +2.3%
       / +1.7%; D = 128 1k / 2k +1.1% / +1.2% (mean of five runs), 4k / 8k −1.4% / −0.8%; non-causal D = 128 even
       (docs/gpu-runs/2026-11-27-s27.log sections 2-4).
    13. Rule 8's packed kernel takes two Q tiles and stages O in the current one (``o_buffer`` off: with 5 stages
       two Q tiles and O's own do not fit in 227 KiB, and the other Q tile already lets the next item's Q load
       early): S = 1k 424.9 / 421.1 -> 431.6 / 426.1 TFLOP/s interleaved / windows (421.7 / 405.7 -> 427.3 / 413.9
       in a second run), 4k even (docs/gpu-runs/2026-11-27-s27.log sections 6-7).
    14. Varlen D = 64 persistent kernels take two Q tiles too (equal-length sequences, one and two Q tiles in
       interleaved rounds): causal S = 1k / 2k / 4k +3.6-4.1% / +2.2-2.3% / +2.5% (two of three runs; the first
       −2.2%), non-causal 1k +0.9-2.0%; varlen D = 128 +0.2-0.3%, not taken (docs/gpu-runs/2026-11-27-s27.log
       section 14).
    Measured and not taken: 192-row KV tiles for D = 64 (spill with three warpgroups; behind them with two), a
    3-stage pipeline for D = 128 (within ±2% at S = 16k), P through shared memory (SS wgmma: −25-40%).

    ``choose_config("bf16", 64, True)`` = AttentionConfig("bf16", 64, 128, 2, True, overlap=True, pingpong=True,
    epilogue="tma", persistent=True, o_buffer=True, continuous_turns=True, item_table=True, align_bottom=True,
    q_tiles=2);
    ``choose_config("bf16", 64, True, seqlens=(1024, 1024)).consumer_warpgroups`` = 3;
    ``choose_config("bf16", 64, False).consumer_warpgroups`` = 3;
    ``choose_config("bf16", 64, True, seqlens=(8192, 8192)).consumer_warpgroups`` = 3;
    ``choose_config("bf16", 64, True, seqlens=(2048, 2048)).persistent`` = True (3 consumer warpgroups);
    ``choose_config("bf16", 64, True, seqlens=(2048, 2048)).item_table`` = True (and ``align_bottom``);
    ``choose_config("bf16", 128, False, seqlens=(8192, 8192)).bn`` = 176;
    ``choose_config("bf16", 128, False, seqlens=(4096, 4096)).bn`` = 128;
    ``choose_config("bf16", 128, True).rescale_threshold`` = 8.0;
    ``choose_config("bf16", 64, False, seqlens=(1024, 1024)).pack_lone`` = True.
    Post: ``validate()`` accepts the result."""
    fa3 = head_dim != 256
    # rule 12: dense causal loops of any length take three warpgroups (with the item table, bottom-aligned tiles and
    # two Q tiles); varlen's and unknown lengths' short loops keep two
    short_causal = causal and (seqlens is None or (varlen and seqlens[1] <= SHORT_CAUSAL_KV))
    warpgroups = 3 if head_dim == 64 and not short_causal else 2
    bn = 64 if head_dim == 256 else 128
    persistent = warpgroups == 2 and head_dim != 256 and (seqlens is None or seqlens[1] < PERSISTENT_MAX_KV)
    pack = (head_dim == 64 and warpgroups == 3 and not (causal or varlen) and seqlens is not None
            and 0 < last_tile_rows(seqlens[0], CONSUMER_ROWS * warpgroups) <= CONSUMER_ROWS
            and seqlens[1] < PERSISTENT_MAX_KV)
    if head_dim == 64 and not causal and (seqlens is None or seqlens[1] <= SHORT_KV or pack):
        persistent = True
    if head_dim == 64 and causal and seqlens is not None \
            and (not varlen or SHORT_CAUSAL_KV < seqlens[1] <= SERPENTINE_CAUSAL_KV):
        persistent = True
    o_buffer = persistent and not pack   # rule 13: the packed kernel stages O in its item's Q tile
    if head_dim == 128 and not (causal or varlen) and seqlens is not None and seqlens[1] >= LONG_KV:
        sk = seqlens[1]
        if padded_keys(sk, LONG_KV_BN) - padded_keys(sk, bn) > LONG_KV_WASTE * sk:
            persistent, o_buffer = True, True
        else:
            bn, persistent, o_buffer = LONG_KV_BN, True, False
    q_tiles = 2 if (pack or persistent and varlen and head_dim == 64 or persistent and causal and not varlen
                    and (head_dim == 64 or seqlens is not None and seqlens[1] <= SHORT_Q_TILES_KV)) else 1
    return AttentionConfig(dtype=dtype, head_dim=head_dim, bn=bn, stages=PACK_STAGES if pack else 2, causal=causal,
                           overlap=fa3, pack_lone=pack,
                           pingpong=fa3, epilogue="rows" if varlen else "tma", varlen=varlen,
                           consumer_warpgroups=warpgroups, persistent=persistent, o_buffer=o_buffer,
                           continuous_turns=persistent and fa3, item_table=persistent and causal and not varlen,
                           align_bottom=causal and not varlen, q_tiles=q_tiles,
                           rescale_threshold=LAZY_RESCALE_THRESHOLD if head_dim == 128 else 0.0)
