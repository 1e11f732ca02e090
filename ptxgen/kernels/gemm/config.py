"""The GEMM's configuration: one frozen dataclass naming every choice the builder makes, and the rules that hold
between them (``GemmConfig.validate``), so that a bad combination is refused before any IR is built.

C = A·Bᵀ with A (M, K), B (N, K) (K contiguous, "K-major") or their (K, M) / (K, N) forms (M / N contiguous,
"MN-major"); f32 accumulation; C (M, N) row-major in ``out_dtype``. A config also has a short name, the benchmark's
variant notation: ``GemmConfig(bn=256, stages=4, epilogue="tma", epilogue_split=2, overlap=1).name`` is
``h128x256s4t2o1`` (see ``GemmConfig.name`` for the grammar; ``GemmConfig.from_name`` reads it back).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ptxgen.ir.ops.roles import launch_pool, launch_registers

SWIZZLE_ROW = 128  # bytes of K per k-tile: one SW128 row (64 f16/bf16, 128 e4m3/e5m2)
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "e4m3": 1, "e5m2": 1}
FP8 = ("e4m3", "e5m2")
EPILOGUES = ("direct", "rows", "tma")
SCALES = ("tensor", "block")
GROUPINGS = ("none", "contiguous", "masked")
GROUPINGS = ("none", "contiguous", "masked")
SCALE_BLOCK = 128  # elements of K (and of B's N) per block scale: one e4m3 k-tile
# ``scales_smem``: bytes per pipeline stage of B's scales in shared memory — one TMA box of at most 3 B scale blocks ×
# 4 k-blocks (16 bytes each), its slot a TMA destination's 128-byte alignment
B_SCALE_SLOT = 128
TMA_SMEM_ALIGN = 128  # bytes: a TMA load's shared-memory destination starts on this boundary
MAJORS = ("K", "MN")
# Stream-K's partial sums cost a launch the time of several k-tiles (each CTA writes and reads 128 KiB of f32 and
# waits on its flags); it pays where it shortens the last wave by more
# (docs/gpu-runs/2026-11-25-s8-streamk-timing.log, section 6).
STREAMK_MIN_SAVING = 20
SMEM_BYTES = 227 * 1024  # the dynamic shared memory a Hopper CTA can have
# mbarrier bytes per pipeline stage (a full and an empty barrier of 8 bytes each)
PIPELINE_STAGE_BYTES = 16
# bytes of C's row in the narrowest atom the staged epilogue tiles its column blocks from (SW32: 16 bf16/f16 columns;
# wider blocks take SW64's 64-byte or SW128's 128-byte rows where they divide them: ``epilogue.staged_c_swizzle``);
# the TMA-store epilogue also blocks of 16-byte runs (8 columns: a column-split tile's 88-column half), in plain rows
STAGED_ROW_BYTES = 32
TMA_STAGED_ROW_BYTES = 16


def k_tile(dtype: str) -> int:
    """Elements of K per k-tile: one 128-byte swizzle row. ``k_tile("bf16")`` = 64, ``k_tile("e4m3")`` = 128."""
    return SWIZZLE_ROW // ELEMENT_BYTES[dtype]


@dataclass(frozen=True)
class GemmConfig:
    """Every choice of the persistent warp-specialized GEMM (``ptxgen.kernels.gemm.build``). The defaults are the
    old ``build()``'s: bf16, 128 × 256 tiles, 4 stages, raster groups of 8 tile rows, one wgmma group in flight, no
    cluster, C stored from the registers.

    - ``dtype``: A's and B's element type, ``bf16``/``f16`` or fp8 ``e4m3``/``e5m2``; ``out_dtype``: C's (default:
      ``dtype`` for 16-bit inputs, ``bf16`` for fp8, which may also give ``f16``).
    - ``bm``, ``bn``: the tile; BM rows are split between the two consumer warpgroups (BM/2 = 64·P rows each), BN is
      the wgmma's N. ``warpgroups_along = "n"`` (name ``C`` after the stages, cuBLAS's "coopB"): the warpgroups split
      the columns instead, each all BM rows (64, 128, 192 or 256: BM/64 wgmma row blocks of the whole A stage) × BN/2
      columns (its half of the B stage), so that a 192-row tile exists (``h192x176s4Ct3``); 16-bit at most 132 f32
      accumulator values a thread, fp8 144 (chunk and total), per-tensor scales, K-major B, the ``tma`` or ``direct``
      epilogue of a row-major C, or swapped (``swap_ab``) the ``direct`` epilogue of C's transposed view.
      ``stages``: the smem pipeline's depth. ``group``: tile rows per rasterization group.
    - ``pending``: wgmma groups left in flight at each k-tile's wait (0: each waited for; 1: the next one queued).
    - ``cluster``: CTAs per cluster sharing an operand by TMA multicast; ``cluster_along``: ``"m"`` — the cluster
      tile is (cluster·BM) × BN, CTA ``rank`` takes BM-row part ``rank`` and the CTAs share B (each loads
      BN/cluster rows of it, multicast); ``"n"`` — the cluster tile is BM × (cluster·BN), CTA ``rank`` takes
      BN-column part ``rank`` and the CTAs share A (each loads BM/cluster rows of it, multicast; B unicast), cuBLAS's
      form for a few row tiles over a wide N (``h128x112s6c2nk4t``). ``cluster = (cm, cn)``: the two-dimensional
      cluster (``c2x4``; ``cluster_along`` stays ``"m"``), cm CTAs along M × cn along N, CTA rank = i + cm·j taking
      tile (tm·cm + i, tn·cn + j) of the (cm·BM) × (cn·BN) cluster tile: the CTAs of a grid column (same j) share B
      (each loads BN/cm rows of the B box, multicast to its column), those of a grid row (same i) share A (BM/cn
      rows of the A box, multicast to its row) — cuBLAS's clusters of 2 × 4 for few tiles with a long K. The 1-D
      forms are its special cases: ``cluster = C`` is (C, 1) along M and (1, C) along N (a grid of one row or
      column is stored as that int: ``GemmConfig(cluster=(2, 1)) == GemmConfig(cluster=2)``).
    - ``epilogue``: ``"direct"`` (st.global from the registers, any N), ``"rows"`` (staged in smem, stored by warps
      along rows: any N), ``"tma"`` (staged in smem, TMA stores: C's rows 16-byte aligned); ``epilogue_split`` stages
      the tile in that many column blocks of BN/epilogue_split columns each, a multiple of 16 (32 bytes of C); with
      BM = 256 (``tma``, row-major C) in that many blocks of each warpgroup's two 64-row wgmma blocks in turn, each
      cut into epilogue_split/2 column blocks (``staged_block``: a 256 × 128 tile with epilogue_split = 2 stages
      half its C, room for a fourth stage). A block is staged by stmatrix in K-major atoms of the widest swizzle whose
      row divides it — SW128 (64 columns: BN 128, 192, 256), SW64 (32: BN 96, 160, 224), SW32 (16: BN 112, 144,
      176) — and stored by TMA one atom row wide (so 3 stores of 64 × 32 per warpgroup for BN 96, 7 of 64 × 16 for
      BN 112); for the TMA store a block that none divides (a multiple of 8 columns: BN 104) in plain unswizzled
      rows, stored by one TMA box the whole block wide (``epilogue.staged_c_swizzle``'s ``"ROW"``).
    - ``a_major``, ``b_major``: ``"K"`` (A (M, K), B (N, K)) or ``"MN"`` (A (K, M), B (K, N)).
    - ``promote`` (fp8): k-tiles whose wgmma products are summed before they join the f32 total.
    - ``registers``: the (producer, consumer) setmaxnreg budgets.
    - ``streamk``: share the last partial wave out by k-tiles where that saves ``streamk_min_saving`` k-tiles;
      ``streamk_every_sm``: launch ``sms`` CTAs even when there are fewer tiles, so that a problem of few tiles is
      shared out by k-tiles over every SM (split-K where the tiles alone leave SMs idle). With block scales (dense,
      not grouped, no ``overlap``) each piece promotes its own k-tiles, so the partial sums are promoted totals.
    - ``splitk``: split-K by k-slices that run together, for problems of fewer tiles than SMs with a long K: each
      tile's k-tiles are cut into S = max(1, min(⌊%sms/tiles⌋, k-tiles)) slices, and unit u = s·tiles + t (tile
      t, slice s) takes k-tiles [s·k-tiles/S, (s+1)·k-tiles/S) of its tile, so that the CTAs running at the same
      time read the SAME k-slice of A and B (stream-K's runs sit at different k offsets of their tiles and share
      little through L2). The last slice's unit joins: it waits for the other S − 1 partial sums and adds them in
      slice order (deterministic), then runs the epilogue (fp8: the per-tensor scales applied once, to the sum).
      ``%sms`` CTAs are launched; with S = 1 (as many tiles as SMs or more) it is the data-parallel persistent loop.
    - ``overlap``: the epilogue runs behind the next tile's first ``overlap`` k-tiles of wgmmas.
    - ``bias``: C = A·Bᵀ + bias, the kernel taking ``%bias`` (``out_dtype``, rank 2: an (M, N) addend, in practice a
      per-column vector seen through a stride-0 view) added to the f32 accumulator before the conversion.
    - ``swap_ab``: for the ops (``ptxgen.kernels.linalg``): the kernel computes Cᵀ = B·Aᵀ (its M is the problem's N),
      storing C through its transposed view (the ``direct`` epilogue) or by TMA with ``c_major = "M"``; the kernel itself is the unswapped one (but with block scales, whose
      granularity differs between A and B: see ``scales``).
    - ``c_major``: which mode of the kernel's C (M, N) is contiguous in memory for the ``tma`` epilogue: ``"N"``
      (C row-major) or ``"M"`` (C column-major: its transpose, an (N, M) row-major tensor, is what ``%c`` maps —
      a swapped problem's own C). With ``"M"`` each consumer warpgroup stages a column block transposed
      (``stmatrix.trans``) into K-major SW128 atoms of 64 of its rows and stores it by TMA as (block columns, 64)
      boxes of C's transpose.
    - ``scales`` (fp8): ``"tensor"``, C = (A·Bᵀ)·scale_a·scale_b with two f32 parameters; ``"block"``, DeepGEMM's
      fine-grained scales: A per (row, 128-wide K block), B per 128 × 128 block, each k-tile's wgmma product
      promoted into the f32 total times its row's and column's scales (``ptxgen.kernels.fp8``). With ``swap_ab``
      the kernel's rows are B's (one scale per 128 rows) and its columns A's (one scale per column).
      With BM = 256 (unswapped) each consumer warpgroup's 128 rows are two 64-row wgmma blocks promoted ONE AFTER
      THE OTHER (DeepGEMM's scheme, ``row_blocks_in_turn``): per k-tile, row block 0's wgmmas (its 64 rows of the
      stage's A, the whole B stage) accumulate into a chunk from zero, are waited for and promoted into block 0's
      total, then row block 1's into the same chunk registers and block 1's total; the stage is released after
      block 1's wait. A consumer thread holds one chunk of BN/2 and two totals of BN/2 f32 registers (192 for
      BN = 128), so BN ≤ 128; the two warpgroups drift apart, one promoting while the other's wgmmas run. Built with
      ``overlap`` 0 or 1, ``late_scales``, ``scales_smem`` or scales from global memory, clusters; not with
      ``streamk``, ``scale_prefetch``, ``pingpong``, ``chunk_ahead`` (refused by ``validate``).
    - ``grouped`` (block scales): DeepGEMM's MoE GEMMs, groups along M sharing N and K: ``"contiguous"`` (A's rows of
      all groups concatenated, ``%m_indices`` giving each row's group, B (G·N, K)) or ``"masked"`` (A (G·M_max, K),
      ``%masked_m`` the rows of each group; ``ptxgen.kernels.fp8``).
    - ``scale_prefetch`` (block scales): each k-tile's scales are loaded one k-tile ahead (during the previous
      k-tile's wgmmas). In the SASS the loop's copies of the loaded values still precede the wgmmas' issue (and wait
      for the loads): kept to be measured against ``late_scales``.
    - ``pingpong`` (block scales): the two consumer warpgroups take turns on the tensor cores — warpgroup 1 issues a
      k-tile's wgmmas only after warpgroup 0 has issued its own (a named barrier) — so that each one's promotion runs
      while the other's wgmmas are executing.
    - ``late_scales`` (block scales): a k-tile's promotion is total += (chunk × column scale) × row scale, whose two
      operations both read the waited chunk, so ptxas cannot place an instruction reading a scale load before the
      k-tile's wgmmas (one more multiply per value; not with ``scale_prefetch``).
    - ``load_batch``: the producer acquires this many stages, then issues their TMA loads back to back, so that the
      k-tiles of one row of A or B that follow each other in memory are requested together (1: each k-tile's loads
      as soon as its stage is free).
    - ``prefetch_maps``: the first thread fetches the TMA descriptors (``tma.prefetch_map``) before it sets up the
      barriers, so that the first loads do not wait for them.
    - ``overlap`` with block scales (1): the previous tile's epilogue runs behind the next tile's first k-tile of
      wgmmas.
    - ``scales_smem`` (block scales; DeepGEMM's design): the producer's TMA loads each k-tile's scales WITH its stage,
      on the stage's mbarrier — A's BM row scales (from the M-major TMA-aligned layout, seen as (⌈K/128⌉, M)) into a
      ring of BM × 4 bytes per stage and B's scale blocks (from a (⌈N/128⌉, ⌈K/128⌉) layout whose rows are 16-byte
      aligned) into one of ``B_SCALE_SLOT`` bytes per stage — so that the consumers read every scale with ld.shared
      from the stage they already waited for (``block_scales.stage_scale_loads``). Swapped (``swap_ab``) the roles
      turn: the kernel's rows take B's scale blocks (the (⌈N/128⌉, ⌈K/128⌉) box, in a ``B_SCALE_SLOT``-byte slot)
      and its columns A's per-token scales (a box BN wide of the (⌈K/128⌉, M) view, in a slot of BN × 4 bytes
      rounded up to 128). Not with ``scale_prefetch``.
    - ``zero_rows_late`` (grouped): the rows outside their group (contiguous: ``%m_indices`` -1; masked: past
      ``%masked_m``) are zeroed by ONE select on the tile's f32 total, instead of a zero row scale in every k-tile's
      promotion — each k-tile's scale is the dense kernel's (row · column, no validity multiply), so its promotion
      and the place ptxas gives its scale reads are the dense kernel's, and the rows' group reads are first needed
      after the tile's last k-tile (they were waited for before its first wgmmas). Such rows are zeros whatever A or
      its scales hold there (NaN included; without it a NaN in a padding row of A gives NaN).
    - ``group_ahead`` (grouped): the producer reads the group of its NEXT tile (contiguous ``%m_indices[tm·BM]``,
      masked ``%masked_m[group]``) while it issues the current tile's loads, so that no global load lies between a
      tile's last TMA load and the next tile's first.
    - ``release_per_warpgroup``: each consumer warpgroup releases a stage with ONE arrival per CTA whose empty barrier
      it signals (from its first warp: ``pipeline.alloc {per_warpgroup = true}``, 2 consumers), not one per warp
      (8): a wgmma's reads of the stage complete for the whole warpgroup at once; with a cluster the remote
      arrivals per stage fall from 8 to 2 per CTA signalled.

    Post (``validate``): the builder accepts the config; any violated rule is a ValueError naming the field."""

    dtype: str = "bf16"
    bm: int = 128
    bn: int = 256
    stages: int = 4
    group: int = 8
    pending: int = 1
    cluster: int | tuple = 1
    epilogue: str = "direct"
    epilogue_split: int = 1
    a_major: str = "K"
    b_major: str = "K"
    promote: int = 1
    registers: tuple = (24, 240)
    streamk: bool = False
    streamk_min_saving: int = STREAMK_MIN_SAVING
    streamk_every_sm: bool = False
    splitk: bool = False
    overlap: int = 0
    out_dtype: str | None = None
    bias: bool = False
    swap_ab: bool = False
    c_major: str = "N"
    scales: str = "tensor"
    grouped: str = "none"
    scale_prefetch: bool = False
    pingpong: bool = False
    late_scales: bool = False
    load_batch: int = 1
    prefetch_maps: bool = False
    scales_smem: bool = False
    zero_rows_late: bool = False
    group_ahead: bool = False
    release_per_warpgroup: bool = False
    chunk_ahead: bool = False
    cluster_along: str = "m"
    warpgroups_along: str = "m"

    def __post_init__(self):
        if self.out_dtype is None:
            object.__setattr__(self, "out_dtype", "bf16" if self.dtype in FP8 else self.dtype)
        if isinstance(self.registers, list):
            object.__setattr__(self, "registers", tuple(self.registers))
        if isinstance(self.cluster, (list, tuple)):
            grid = tuple(self.cluster)
            # a grid of one column (C, 1) or one row (1, C) is the 1-D form, stored as it always was
            if len(grid) == 2 and grid[1] == 1:
                object.__setattr__(self, "cluster", grid[0])
            elif len(grid) == 2 and grid[0] == 1:
                object.__setattr__(self, "cluster", grid[1])
                object.__setattr__(self, "cluster_along", "n")
            else:
                object.__setattr__(self, "cluster", grid)

    # -- derived quantities --------------------------------------------------------------------------------------
    @property
    def fp8(self) -> bool:
        return self.dtype in FP8

    @property
    def k_tile(self) -> int:
        """Elements of K per k-tile (one 128-byte SW128 row)."""
        return k_tile(self.dtype)

    @property
    def rows(self) -> int:
        """Rows of the tile per consumer warpgroup: BM/2, or BM where the warpgroups split the columns
        (``warpgroups_along = "n"``)."""
        return self.bm // 2 if self.warpgroups_along == "m" else self.bm

    @property
    def columns(self) -> int:
        """Columns of the tile per consumer warpgroup (its wgmma's N): BN, or BN/2 where the warpgroups split the
        columns. ``GemmConfig(bm=192, bn=176, warpgroups_along="n")``: rows 192, columns 88."""
        return self.bn if self.warpgroups_along == "m" else self.bn // 2

    @property
    def staged_row_blocks(self) -> int:
        """The 64-row blocks a consumer warpgroup's rows are staged in one after the other by a split epilogue: its
        rows/64 wgmma row blocks where ``epilogue_split`` > 1 (BM = 256: 2, so that its staged C is half the
        tile; a column-split 192-row tile: 3), else 1 (the warpgroup's rows staged whole; a column-major C,
        ``c_major = "M"``, always: its column blocks are staged transposed across all the warpgroup's rows).
        ``GemmConfig(bm=256, bn=128, stages=4, epilogue="tma", epilogue_split=2).staged_row_blocks`` = 2;
        ``GemmConfig(epilogue_split=2)``'s 1."""
        return self.rows // 64 if self.epilogue_split > 1 and self.c_major == "N" else 1

    @property
    def staged_block(self) -> tuple:
        """(rows, columns) of one staged block of a consumer warpgroup's accumulator: ``epilogue_split`` blocks in
        all, ``staged_row_blocks`` row blocks each cut into column blocks. ``GemmConfig(epilogue="tma",
        epilogue_split=2).staged_block`` = (64, 128); ``GemmConfig(bm=256, bn=128, epilogue="tma",
        epilogue_split=4).staged_block`` = (64, 64). Post: rows · columns · ``epilogue_split`` = ``rows`` ·
        ``columns`` (the warpgroup's part of the tile)."""
        row_blocks = self.staged_row_blocks
        return self.rows // row_blocks, self.columns * row_blocks // max(self.epilogue_split, 1)

    @property
    def row_blocks_in_turn(self) -> bool:
        """Block scales with BM = 256, unswapped: each consumer warpgroup promotes its two 64-row wgmma blocks one
        after the other from one chunk of BN/2 registers (see ``scales``). ``GemmConfig("e4m3", bm=256, bn=128,
        scales="block").row_blocks_in_turn`` is True; BM = 128, or swapped (its rows' blocks are B's, with small BN),
        False."""
        return self.scales == "block" and self.bm == 256 and not self.swap_ab

    @property
    def cluster_grid(self) -> tuple:
        """(cm, cn): the cluster's CTAs along M and along N. ``GemmConfig(cluster=2).cluster_grid`` = (2, 1),
        ``GemmConfig(cluster=4, cluster_along="n")`` → (1, 4), ``GemmConfig(cluster=(2, 4))`` → (2, 4)."""
        if isinstance(self.cluster, tuple):
            return self.cluster
        return (1, self.cluster) if self.cluster_along == "n" else (self.cluster, 1)

    @property
    def cluster_ctas(self) -> int:
        """CTAs per cluster, cm · cn: what the grid, the resident-CTA count, the heuristic's waves and the stream-K
        workspace count in. ``GemmConfig(cluster=(2, 4)).cluster_ctas`` = 8, ``GemmConfig().cluster_ctas`` = 1."""
        cm, cn = self.cluster_grid
        return cm * cn

    @property
    def cluster_tile(self) -> tuple:
        """(rows, columns) of the work item a cluster computes, (cm·BM, cn·BN): ``GemmConfig(cluster=2).cluster_tile``
        = (256, 256), ``GemmConfig(bn=112, cluster=2, cluster_along="n").cluster_tile`` = (128, 224),
        ``GemmConfig(bn=64, cluster=(2, 4)).cluster_tile`` = (256, 256); (BM, BN) without a cluster."""
        cm, cn = self.cluster_grid
        return self.bm * cm, self.bn * cn

    @property
    def partial_sums(self) -> bool:
        """Whether the kernel adds partial sums of a tile through ``%work`` and ``%flags`` (stream-K or split-K:
        ``schedule.streamk_buffers``). ``GemmConfig(splitk=True).partial_sums`` is True, ``GemmConfig()``'s False."""
        return self.streamk or self.splitk

    @property
    def staged(self) -> bool:
        """Whether C goes through shared memory (the ``rows`` and ``tma`` epilogues)."""
        return self.epilogue in ("tma", "rows")

    def smem_bytes(self) -> int:
        """The shared memory the kernel allocates: the A and B rings, the staged C (``rows``/``tma``) and the
        pipeline's barriers. ``GemmConfig().smem_bytes()`` = 4 · (128 + 256) · 128 + 64 = 196672."""
        ring = (self.bm + self.bn) * SWIZZLE_ROW * self.stages
        staged = 2 * self.staged_block[0] * self.staged_block[1] * ELEMENT_BYTES[self.out_dtype] if self.staged \
            else 0
        return ring + staged + self.scale_ring_bytes() + PIPELINE_STAGE_BYTES * self.stages

    def with_stages_that_fit(self) -> "GemmConfig":
        """This config with as many of its stages as a CTA's shared memory holds (``SMEM_BYTES``; at least 1):
        ``GemmConfig(bm=256, bn=56, stages=6, swap_ab=True).with_stages_that_fit().stages`` = 5. Post:
        ``smem_bytes() ≤ SMEM_BYTES`` unless one stage is over it; unchanged where all stages fit."""
        config = self
        while config.stages > 1 and config.smem_bytes() > SMEM_BYTES:
            config = config.replace(stages=config.stages - 1)
        return config

    def scale_ring_bytes(self) -> int:
        """The shared memory of ``scales_smem``'s scale rings: ``stages`` × the two slots of ``scale_slot_bytes``
        (the plan gives the last stage's second slot only its box, a few bytes less); 0 without. ``GemmConfig("e4m3",
        bn=128, stages=5, scales="block", scales_smem=True).scale_ring_bytes()`` = 5 · (128 · 4 + 128) = 3200."""
        return self.stages * sum(self.scale_slot_bytes()) if self.scales_smem else 0

    def scale_slot_bytes(self) -> tuple:
        """``scales_smem``: the bytes per stage of the kernel's (row scale, column scale) rings, each a multiple of
        128 (TMA's destination alignment): unswapped (BM × 4: A's per-row scales, ``B_SCALE_SLOT``: B's blocks),
        swapped (``B_SCALE_SLOT``: B's blocks of the kernel's rows, BN × 4 rounded up to 128: A's per-token scales
        of its columns). ``GemmConfig("e4m3", bn=16, swap_ab=True, scales="block", scales_smem=True)
        .scale_slot_bytes()`` = (128, 128)."""
        if self.swap_ab:
            return B_SCALE_SLOT, -(-self.bn * 4 // TMA_SMEM_ALIGN) * TMA_SMEM_ALIGN
        return self.bm * 4, B_SCALE_SLOT

    def replace(self, **changes) -> "GemmConfig":
        """A copy with ``changes``; ``out_dtype`` follows a new fp8/16-bit ``dtype`` unless given."""
        if "dtype" in changes and "out_dtype" not in changes:
            changes["out_dtype"] = None
        return dataclasses.replace(self, **changes)

    # -- the rules -----------------------------------------------------------------------------------------------
    def validate(self) -> "GemmConfig":
        """Raise ValueError naming the field for the first rule the config breaks; → the config. E.g.
        ``GemmConfig(epilogue_split=2).validate()`` raises ``GemmConfig.epilogue_split = 2: column blocks are staged
        by the 'tma' or 'rows' epilogue, not 'direct'``."""
        for rule in _RULES:
            message = rule(self)
            if message:
                raise ValueError(f"GemmConfig.{message}")
        return self

    # -- the benchmark's variant names ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``h<BM>x<BN>s<stages>`` then, where not the default: ``p<pending>``, ``g<group>``, ``c<cluster>``
        (``c<cluster>n``: ``cluster_along = "n"``; ``c<cm>x<cn>``: ``cluster = (cm, cn)``), ``k<promote>``, ``t``/``r`` (TMA-store / rows epilogue) with ``<split>`` when > 1, ``o<overlap>``, ``q<load_batch>``, ``d`` (``prefetch_maps``), ``e`` (``release_per_warpgroup``), ``sk``
        (stream-K; ``ska``: on every SM; a number after it: ``streamk_min_saving``), ``z`` (``splitk``),
        ``m<a><b>`` (majors, ``k`` or ``n`` each: ``mkn`` = A K-major, B MN-major), ``x`` (swap_ab), ``b`` (bias), ``T`` (``c_major = "M"``), ``B`` (block scales),
        ``f`` (block scales loaded a k-tile ahead: ``scale_prefetch``), ``w`` (``pingpong``), ``l`` (``late_scales``),
        ``S`` (``scales_smem``), ``A`` (``chunk_ahead``), ``Gc``/``Gm``
        (grouped: contiguous / masked) followed by its own options ``z`` (``zero_rows_late``) and ``n``
        (``group_ahead``: the next tile's group) — ``h128x128s5to1BSGczn`` —, ``R<producer>-<consumer>``
        (registers), ``_<out_dtype>`` (fp8 with an f16 C). The dtype is not part of the name.
        ``GemmConfig(cluster=2, epilogue="tma", epilogue_split=2).name`` = ``h128x256s4c2t2``."""
        parts = [f"h{self.bm}x{self.bn}s{self.stages}" + ("C" if self.warpgroups_along == "n" else "")]
        if self.pending != 1:
            parts.append(f"p{self.pending}")
        if self.group != 8:
            parts.append(f"g{self.group}")
        if isinstance(self.cluster, tuple):
            parts.append(f"c{self.cluster[0]}x{self.cluster[1]}")
        elif self.cluster != 1:
            parts.append(f"c{self.cluster}" + ("n" if self.cluster_along == "n" else ""))
        if self.promote != 1:
            parts.append(f"k{self.promote}")
        if self.epilogue != "direct":
            parts.append({"tma": "t", "rows": "r"}[self.epilogue] + (str(self.epilogue_split)
                                                                    if self.epilogue_split != 1 else ""))
        if self.overlap:
            parts.append(f"o{self.overlap}")
        if self.load_batch != 1:
            parts.append(f"q{self.load_batch}")
        if self.prefetch_maps:
            parts.append("d")
        if self.release_per_warpgroup:
            parts.append("e")
        if self.streamk:
            parts.append("sk" + ("a" if self.streamk_every_sm else "")
                         + (str(self.streamk_min_saving) if self.streamk_min_saving != STREAMK_MIN_SAVING else ""))
        if self.splitk:
            parts.append("z")
        if (self.a_major, self.b_major) != ("K", "K"):
            parts.append("m" + "".join("k" if major == "K" else "n" for major in (self.a_major, self.b_major)))
        if self.swap_ab:
            parts.append("x")
        if self.bias:
            parts.append("b")
        if self.c_major == "M":
            parts.append("T")
        if self.scales == "block":
            parts.append("B")
        if self.scale_prefetch:
            parts.append("f")
        if self.pingpong:
            parts.append("w")
        if self.late_scales:
            parts.append("l")
        if self.scales_smem:
            parts.append("S")
        if self.chunk_ahead:
            parts.append("A")
        if self.grouped != "none":
            parts.append("G" + self.grouped[0] + ("z" if self.zero_rows_late else "")
                         + ("n" if self.group_ahead else ""))
        if tuple(self.registers) != (24, 240):
            parts.append(f"R{self.registers[0]}-{self.registers[1]}")
        if self.out_dtype != ("bf16" if self.fp8 else self.dtype):
            parts.append(f"_{self.out_dtype}")
        return "".join(parts)

    @classmethod
    def from_name(cls, name: str, dtype: str = "bf16") -> "GemmConfig":
        """The config a variant name (``GemmConfig.name``) stands for, of element type ``dtype``:
        ``GemmConfig.from_name("h128x192s4k4t", "e4m3")`` = GemmConfig("e4m3", bn=192, promote=4, epilogue="tma").
        Post: ``from_name(c.name, c.dtype) == c``; an unknown name is a ValueError that gives the grammar."""
        m = _NAME.fullmatch(name)
        if not m:
            raise ValueError(f"unknown GEMM variant {name!r}: h<BM>x<BN>s<stages>[C][p<pending>][g<group>]"
                             "[c<cluster>[n]|c<cm>x<cn>]"
                             "[k<promote>][t|r[<split>]][o<overlap>][q<load batch>][d][e][sk[a][<min saving>]][z][m<a><b>][x][b][T][B][f][w]"
                             "[l][S][A][Gc|Gm[z][n]]"
                             "[R<producer>-<consumer>][_<out dtype>]")
        g = m.groupdict()
        return cls(
            dtype=dtype, bm=int(g["bm"]), bn=int(g["bn"]), stages=int(g["stages"]),
            pending=int(g["pending"] or 1), group=int(g["group"] or 8),
            cluster=(int(g["cluster"]), int(g["cluster_n"])) if g["cluster_n"] else int(g["cluster"] or 1),
            cluster_along="n" if g["along"] else "m", warpgroups_along="n" if g["columns"] else "m",
            promote=int(g["promote"] or 1), epilogue={"t": "tma", "r": "rows", None: "direct"}[g["epi"]],
            epilogue_split=int(g["split"] or 1), overlap=int(g["overlap"] or 0), load_batch=int(g["batch"] or 1),
            prefetch_maps=bool(g["maps"]), release_per_warpgroup=bool(g["wg_release"]),
            streamk=bool(g["sk"]),
            streamk_every_sm=bool(g["every"]),
            streamk_min_saving=int(g["saving"]) if g["saving"] else STREAMK_MIN_SAVING,
            splitk=bool(g["splitk"]),
            a_major="MN" if g["majors"] and g["majors"][0] == "n" else "K",
            b_major="MN" if g["majors"] and g["majors"][1] == "n" else "K",
            swap_ab=bool(g["swap"]), bias=bool(g["bias"]), c_major="M" if g["ctrans"] else "N", scales="block" if g["block"] else "tensor",
            scale_prefetch=bool(g["prefetch"]), pingpong=bool(g["pingpong"]), late_scales=bool(g["late"]),
            scales_smem=bool(g["smem"]), chunk_ahead=bool(g["ahead_chunk"]),
            grouped={"c": "contiguous", "m": "masked", None: "none"}[g["grouped"]],
            zero_rows_late=bool(g["zero_late"]), group_ahead=bool(g["ahead"]),
            registers=(int(g["rp"]), int(g["rc"])) if g["rp"] else (24, 240), out_dtype=g["out"])


_NAME = re.compile(r"h(?P<bm>\d+)x(?P<bn>\d+)s(?P<stages>\d+)(?P<columns>C)?(?:p(?P<pending>\d+))?(?:g(?P<group>\d+))?"
                   r"(?:c(?P<cluster>\d+)(?:(?P<along>n)|x(?P<cluster_n>\d+))?)?(?:k(?P<promote>\d+))?(?:(?P<epi>[tr])(?P<split>\d)?)?(?:o(?P<overlap>\d+))?"
                   r"(?:q(?P<batch>\d+))?(?P<maps>d)?(?P<wg_release>e)?"
                   r"(?:(?P<sk>sk)(?P<every>a)?(?P<saving>\d+)?)?(?P<splitk>z)?(?:m(?P<majors>[kn]{2}))?(?P<swap>x)?(?P<bias>b)?(?P<ctrans>T)?"
                   r"(?P<block>B)?(?P<prefetch>f)?(?P<pingpong>w)?(?P<late>l)?(?P<smem>S)?(?P<ahead_chunk>A)?(?:G(?P<grouped>[cm])(?P<zero_late>z)?(?P<ahead>n)?)?(?:R(?P<rp>\d+)-(?P<rc>\d+))?(?:_(?P<out>bf16|f16))?")


# -- the rules, in the order they are checked: each → None, or "field = value: what is wrong" --------------------------

def _dtypes(c: GemmConfig):
    if c.dtype not in ELEMENT_BYTES:
        return f"dtype = {c.dtype!r}: the operands are bf16, f16, e4m3 or e5m2"
    if c.fp8 and c.out_dtype not in ("bf16", "f16"):
        return f"out_dtype = {c.out_dtype!r}: an fp8 GEMM writes bf16 or f16"
    if not c.fp8 and c.out_dtype != c.dtype:
        return f"out_dtype = {c.out_dtype!r}: a {c.dtype} GEMM writes {c.dtype}"
    return None


def _tile(c: GemmConfig):
    if c.warpgroups_along not in ("m", "n"):
        return (f"warpgroups_along = {c.warpgroups_along!r}: the two consumer warpgroups split the tile's rows ('m') "
                "or its columns ('n')")
    if c.warpgroups_along == "n":
        return _columns_split(c) or _pipeline(c)
    if c.bm not in (128, 256):
        return (f"bm = {c.bm}: the two consumer warpgroups take BM/2 rows each in 64-row wgmma blocks, and a TMA box "
                "has at most 256 rows: BM is 128 or 256")
    if not (isinstance(c.bn, int) and 8 <= c.bn <= 256 and c.bn % 8 == 0):
        return f"bn = {c.bn}: BN is wgmma's N, a multiple of 8 from 8 to 256"
    return _pipeline(c)


def _pipeline(c: GemmConfig):
    """The rules of the pipeline's stages, raster groups, load batches and wgmma groups in flight."""
    if c.stages < 1:
        return f"stages = {c.stages}: the pipeline needs at least 1 stage"
    if c.group < 1:
        return f"group = {c.group}: a rasterization group has at least 1 tile row"
    if not 1 <= c.load_batch <= c.stages:
        return (f"load_batch = {c.load_batch}: the producer issues the loads of 1 to stages = {c.stages} k-tiles "
                "together (it holds that many stages before loading)")
    if c.pending not in (0, 1):
        return (f"pending = {c.pending}: a k-tile's stage is released once the wgmma group after it is queued, so at "
                "most 1 group may stay in flight (0 or 1)")
    return None


# the f32 accumulator values per consumer thread a column-split tile may hold within the 240 registers setmaxnreg
# gives a consumer (16-bit: its accumulator; fp8 with promotion: a chunk and a total): bf16 192 x 176 (132 values)
# ran 774 TFLOP/s at 2046x2112x12288, 192 x 192 (144) and 192 x 208 (156) 119-133; e4m3 192 x 96 (2 x 72) 1107 at
# 2199x2112x57344, 192 x 128 (2 x 96) 619 (docs/gpu-runs/2026-11-27-s31.log section 2)
COLUMN_SPLIT_MAX_VALUES = {16: 132, 8: 144}


def _columns_split(c: GemmConfig):
    """The rules of ``warpgroups_along = "n"`` (each consumer warpgroup all BM rows, BN/2 columns)."""
    why = "with warpgroups_along = 'n' each consumer warpgroup computes all BM rows × BN/2 columns"
    if c.bm not in (64, 128, 192, 256):
        return (f"bm = {c.bm}: {why}, in 64-row wgmma blocks of one TMA box (at most 256 rows): BM is 64, 128, 192 "
                "or 256")
    if not (isinstance(c.bn, int) and 16 <= c.bn <= 256 and c.bn % 16 == 0):
        return f"bn = {c.bn}: {why}, BN/2 its wgmma's N (a multiple of 8): BN a multiple of 16 from 16 to 256"
    values = c.bm * c.bn // 2 // 128 * (2 if c.fp8 and c.promote > 1 else 1)
    most = COLUMN_SPLIT_MAX_VALUES[8 if c.fp8 else 16]
    if values > most:
        return (f"bn = {c.bn}: {why}: {values} f32 accumulator values per thread"
                + (" (a chunk and a total: promote > 1)" if c.fp8 and c.promote > 1 else "")
                + f", over the {most} that fit beside the rest of the consumer's 240 registers")
    for field, value, allowed in (("scales", c.scales, "tensor"), ("b_major", c.b_major, "K"),
                                  ("c_major", c.c_major, "N"), ("grouped", c.grouped, "none")):
        if value != allowed:
            return f"{field} = {value!r}: {why}; built for {field} = {allowed!r}"
    if c.epilogue == "rows":
        return f"epilogue = 'rows': {why}; built for the 'tma' and 'direct' epilogues"
    if c.swap_ab and c.epilogue != "direct":
        return (f"epilogue = {c.epilogue!r}: {why}; swapped (swap_ab), C's transposed view is stored by the 'direct' "
                "epilogue (the TMA store of a column-major C is built for warpgroups_along = 'm')")
    return None


def _majors(c: GemmConfig):
    for field, major in (("a_major", c.a_major), ("b_major", c.b_major)):
        if major not in MAJORS:
            return f"{field} = {major!r}: an operand is 'K'-major (K contiguous) or 'MN'-major"
        if major == "MN" and c.fp8:
            return f"{field} = 'MN': fp8 wgmma reads K-major shared memory only"
    if c.b_major == "MN" and c.bn % 64:
        return f"bn = {c.bn}: an MN-major B is loaded in boxes of 64 columns (one SW128 row): BN a multiple of 64"
    return None


def _cluster(c: GemmConfig):
    if isinstance(c.cluster, tuple):
        return _cluster_2d(c)
    if not 1 <= c.cluster <= 8:
        return f"cluster = {c.cluster}: clusters of 1 to 8 CTAs (the portable cluster size)"
    if c.cluster_along not in ("m", "n"):
        return (f"cluster_along = {c.cluster_along!r}: a cluster's CTAs pair tiles along 'm' (sharing B) or 'n' "
                "(sharing A)")
    if c.cluster_along == "n":
        return _cluster_along_n(c)
    if c.cluster > 1 and (c.a_major, c.b_major) != ("K", "K"):
        return f"cluster = {c.cluster}: clusters (B multicast) are built for K-major operands; use cluster = 1"
    if c.bn % (8 * c.cluster):
        return (f"cluster = {c.cluster}: each CTA of a cluster loads BN/{c.cluster} rows of B, a multiple of 8; "
                f"BN = {c.bn} does not split so")
    return None


def _cluster_2d(c: GemmConfig):
    """The rules of ``cluster = (cm, cn)`` (cm CTAs along M sharing B × cn along N sharing A): what its producer
    and schedule are built for."""
    grid = c.cluster
    if len(grid) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in grid):
        return f"cluster = {grid}: a cluster is C CTAs or a grid (cm, cn) of CTAs along M and N, integers ≥ 1"
    cm, cn = grid
    why = f"cluster = ({cm}, {cn})"
    if cm * cn > 8:
        return f"{why}: {cm} × {cn} = {cm * cn} CTAs, more than the portable cluster size of 8"
    if c.cluster_along != "m":
        return (f"cluster_along = {c.cluster_along!r}: {why} sets the CTAs along M and along N itself: leave "
                "cluster_along = 'm'")
    if c.a_major != "K" or c.b_major != "K":
        return (f"a_major = {c.a_major!r}, b_major = {c.b_major!r}: with {why} each CTA multicasts BM/{cn} rows of A's "
                f"and BN/{cm} rows of B's K-major box (an MN-major operand is loaded in 64-column boxes): "
                "a_major = 'K', b_major = 'K'")
    if c.bm % (8 * cn):
        return (f"bm = {c.bm}: with {why} each CTA of a grid row loads BM/{cn} rows of A, a multiple of 8 (TMA box "
                "rows of the SW128 atom)")
    if c.bn % (8 * cm):
        return (f"bn = {c.bn}: with {why} each CTA of a grid column loads BN/{cm} rows of B, a multiple of 8 (TMA "
                "box rows of the SW128 atom)")
    if c.splitk and not c.streamk:
        return (f"splitk = True: {why}: split-K's units are single CTAs (a slice's partial sums and flags count "
                "tiles of one CTA): splitk = False")
    return _cluster_builds(c, why)


def _cluster_builds(c: GemmConfig, why: str):
    """The rules shared by the clusters along N and in two dimensions (``why`` names the form in the message):
    data-parallel, dense, per-tensor scales. Swapped configs qualify: ``swap_ab`` exchanges the kernel's arguments,
    not the kernel."""
    if c.streamk:
        return (f"streamk = True: {why} is built for data-parallel tiles (stream-K's pieces and partial sums count "
                "cluster tiles along M): streamk = False")
    if c.grouped != "none":
        return (f"grouped = {c.grouped!r}: {why} is built for dense GEMMs (a grouped GEMM's tiles take clusters of 1): "
                "grouped = 'none'")
    if c.scales == "block":
        return f"scales = 'block': {why} is built for per-tensor scales (scales = 'tensor')"
    return None


def _cluster_along_n(c: GemmConfig):
    """The rules of ``cluster_along = "n"`` (the CTAs of a cluster take BN-column parts and share A): what its
    producer and schedule are built for."""
    why = "cluster_along = 'n'"
    if c.cluster == 1:
        return f"{why}: the CTAs of a cluster share A, so it needs cluster > 1 (cluster = 1)"
    if c.a_major != "K" or c.b_major != "K":
        return (f"a_major = {c.a_major!r}, b_major = {c.b_major!r}: with {why} each CTA multicasts BM/{c.cluster} rows "
                "of A's K-major box (an MN-major A is loaded in 64-column boxes): a_major = 'K', b_major = 'K'")
    if c.bm % (8 * c.cluster):
        return (f"cluster = {c.cluster}: with {why} each CTA of a cluster loads BM/{c.cluster} rows of A, a multiple "
                f"of 8 (TMA box rows of the SW128 atom); BM = {c.bm} does not split so")
    return _cluster_builds(c, why)


def _promotion(c: GemmConfig):
    if c.promote < 1:
        return f"promote = {c.promote}: promote must be at least 1 (k-tiles per promotion)"
    if not c.fp8 and c.promote != 1:
        return (f"promote = {c.promote}: promotion is fp8's ({c.dtype} wgmma accumulates in f32 throughout): "
                "promote = 1")
    return None


def _scales(c: GemmConfig):
    if c.scales not in SCALES:
        return f"scales = {c.scales!r}: the scales are 'tensor' (one per operand) or 'block' (DeepGEMM's)"
    if c.scales == "block":
        if not c.fp8:
            return f"scales = 'block': block scales are fp8's (e4m3, e5m2), not {c.dtype}'s"
        if c.promote != 1:
            return (f"promote = {c.promote}: block scales promote every k-tile (the {SCALE_BLOCK}-deep scale block): "
                    "promote = 1")
        if c.bias:
            return "bias = True: the block-scaled GEMM (DeepGEMM's fp8_gemm_nt) has no bias"
        if c.streamk and c.overlap:
            return (f"overlap = {c.overlap}: stream-K's pieces end in a partial sum or a join, not a held tile whose "
                    "epilogue could run behind the next tile's wgmmas: overlap = 0 with streamk = True")
        if c.overlap > 1:
            return (f"overlap = {c.overlap}: block scales promote every k-tile, so the epilogue hides behind the next "
                    "tile's first k-tile only: overlap = 0 or 1")
        if c.late_scales and c.scale_prefetch:
            return ("late_scales = True: the scales are read after the k-tile's wait; loading them a k-tile ahead "
                    "(scale_prefetch) is the other way: choose one")
        if c.overlap and c.epilogue != "tma":
            return (f"overlap = 1: the epilogue behind the next tile's wgmmas is built for the TMA-store epilogue, "
                    f"not {c.epilogue!r}")
        if c.scales_smem and c.scale_prefetch:
            return ("scales_smem = True: the scales arrive with their stage, so there is nothing to load a k-tile "
                    "ahead (scale_prefetch): choose one")
        if c.chunk_ahead and not c.scales_smem:
            return ("chunk_ahead = True: the second chunk's k-tile reads its scales from its stage (scales_smem), "
                    "loaded with it: scales_smem = True")
        if c.chunk_ahead and c.pingpong:
            return ("chunk_ahead = True: each warpgroup keeps its next k-tile's wgmmas queued while it promotes; "
                    "pingpong's turns hold them back until the other warpgroup has issued: choose one")
    elif c.scale_prefetch or c.pingpong or c.late_scales or c.scales_smem or c.chunk_ahead:
        field = ("scale_prefetch" if c.scale_prefetch else "pingpong" if c.pingpong else "late_scales"
                 if c.late_scales else "scales_smem" if c.scales_smem else "chunk_ahead")
        return (f"{field} = True: it orders the promotion of block scales; a config with scales = {c.scales!r} has "
                "none")
    if c.grouped not in GROUPINGS:
        return f"grouped = {c.grouped!r}: the grouping is 'none', 'contiguous' or 'masked'"
    if c.grouped == "none" and (c.zero_rows_late or c.group_ahead):
        field = "zero_rows_late" if c.zero_rows_late else "group_ahead"
        return (f"{field} = True: it concerns the groups of a grouped GEMM (grouped = 'contiguous' or 'masked'), "
                "not grouped = 'none'")
    if c.grouped != "none":
        if c.scales != "block":
            return f"grouped = {c.grouped!r}: the grouped GEMMs are block-scaled (scales = 'block')"
        if c.swap_ab:
            return f"swap_ab = True: a {c.grouped} grouped GEMM groups A's rows, which swapping would make columns"
        if c.cluster != 1:
            return (f"cluster = {c.cluster}: the CTAs of a cluster share B by multicast, but neighbouring tiles of a "
                    "grouped GEMM may belong to different groups: cluster = 1")
        if c.streamk:
            return (f"streamk = True: a {c.grouped} grouped GEMM finds each tile's group (and, masked, whether it has "
                    "rows) on the device, while stream-K shares out k-tiles as if every tile had them all: "
                    "streamk = False")
        if c.bm != 128:
            return (f"bm = {c.bm}: a grouped GEMM's tiles are the 128-row M block its groups are aligned to: "
                    "bm = 128")
    return None


def _row_blocks(c: GemmConfig):
    """The rules of ``row_blocks_in_turn`` (block scales, BM = 256, unswapped): what its loop does not build."""
    if not c.row_blocks_in_turn:
        return None
    why = "BM = 256 with block scales promotes each warpgroup's two 64-row blocks in turn"
    if c.bn > SCALE_BLOCK:
        return (f"bn = {c.bn}: {why}, holding one chunk and two totals of BN/2 f32 registers per thread (3 × BN/2 "
                f"of the consumer's 240): BN ≤ {SCALE_BLOCK}")
    if c.streamk:
        return (f"streamk = True: {why}, each k-tile's stage read by both blocks; stream-K's partial sums are not "
                "built for it: streamk = False (or bm = 128)")
    for field in ("chunk_ahead", "pingpong", "scale_prefetch"):
        if getattr(c, field):
            return f"{field} = True: {why} from one chunk; {field} is built for bm = 128 only"
    return None


def setmaxnreg_problem(registers, consumer_warpgroups: int = 2) -> str | None:
    """What is wrong with the (producer, consumer) setmaxnreg budgets of a kernel of one producer and
    ``consumer_warpgroups`` consumer warpgroups, or None: ``setmaxnreg_problem((24, 240))`` → None; ``(24, 250)`` →
    "registers = (24, 250): the consumer's 250 is not a multiple of 8 from 24 to 256 (setmaxnreg)"; ``(32, 240)`` →
    "registers = (32, 240): 128 × 32 + 256 × 240 = 65536 registers exceed the 64512 a CTA of 384 threads launches
    with (168 per thread): setmaxnreg.inc would wait forever". Post: None iff both are multiples of 8 in 24 … 256
    and 128·producer + 128·w·consumer fit the CTA's launch pool (``launch_pool``: the registers setmaxnreg moves
    between its warps)."""
    if len(registers) != 2:
        return f"registers = {registers}: (producer, consumer) setmaxnreg budgets"
    for role, count in zip(("producer", "consumer"), registers):
        if not (isinstance(count, int) and 24 <= count <= 256 and count % 8 == 0):
            return f"registers = {registers}: the {role}'s {count} is not a multiple of 8 from 24 to 256 (setmaxnreg)"
    threads = 128 * (1 + consumer_warpgroups)
    total = 128 * registers[0] + 128 * consumer_warpgroups * registers[1]
    if total > launch_pool(threads):
        return (f"registers = {registers}: 128 × {registers[0]} + {128 * consumer_warpgroups} × {registers[1]} = "
                f"{total} registers exceed the {launch_pool(threads)} a CTA of {threads} threads launches with "
                f"({launch_registers(threads)} per thread): setmaxnreg.inc would wait forever")
    return None


def _registers(c: GemmConfig):
    return setmaxnreg_problem(c.registers)


def _epilogue(c: GemmConfig):
    if c.epilogue not in EPILOGUES:
        return f"epilogue = {c.epilogue!r}: the epilogue is 'direct', 'rows' or 'tma'"
    if c.epilogue_split < 1:
        return f"epilogue_split = {c.epilogue_split}: at least 1 column block"
    if c.epilogue_split > 1 and not c.staged:
        return (f"epilogue_split = {c.epilogue_split}: column blocks are staged by the 'tma' or 'rows' epilogue, not "
                f"{c.epilogue!r}")
    if c.c_major not in ("N", "M"):
        return f"c_major = {c.c_major!r}: C's contiguous mode is 'N' (row-major) or 'M' (column-major)"
    if c.c_major == "M" and c.scales == "block":
        return ("c_major = 'M': the block-scaled kernels store a row-major C, or a swapped one's through its transposed "
                "view (epilogue = 'direct')")
    if c.c_major == "M" and c.epilogue != "tma":
        return (f"c_major = 'M': a column-major C is stored by the 'tma' epilogue's transposed boxes, not "
                f"{c.epilogue!r}")
    # a staged column block is whole rows of C's transpose in an SW128 atom (c_major 'M': 8 of them) or whole rows of
    # the narrowest atom, SW32, of C itself
    if c.c_major == "M":
        unit, why = 8, "the rows of C's transpose in an SW128 atom, c_major = 'M'"
    elif c.epilogue == "tma":
        unit = TMA_STAGED_ROW_BYTES // ELEMENT_BYTES[c.out_dtype]
        why = f"whole {TMA_STAGED_ROW_BYTES}-byte rows of {c.out_dtype}: the narrowest a TMA box's row may be"
    else:
        unit = STAGED_ROW_BYTES // ELEMENT_BYTES[c.out_dtype]
        why = (f"whole {STAGED_ROW_BYTES}-byte rows of {c.out_dtype}: the narrowest swizzle atom, SW32, of the staged "
               "epilogue")
    row_blocks = c.staged_row_blocks
    if c.epilogue_split > 1 and row_blocks > 1 and (c.epilogue_split % row_blocks or c.epilogue != "tma"):
        return (f"epilogue_split = {c.epilogue_split}: with BM = {c.bm} a warpgroup's {c.rows} rows are staged as its "
                f"{row_blocks} 64-row wgmma blocks in turn (each block a run of the accumulator's values), each cut "
                f"into column blocks: a multiple of {row_blocks}, by the 'tma' epilogue of a row-major C "
                f"(c_major = 'N')")
    columns = c.columns * row_blocks // c.epilogue_split
    if c.staged and (c.columns * row_blocks % c.epilogue_split or columns % unit):
        whose = f"BN = {c.bn}" if c.warpgroups_along == "m" else f"a warpgroup's BN/2 = {c.columns} columns"
        return (("bn = " if c.epilogue_split == 1 else "epilogue_split = ")
                + f"{c.bn if c.epilogue_split == 1 else c.epilogue_split}: {whose} must split into "
                f"{c.epilogue_split // row_blocks} block{'s' if c.epilogue_split > row_blocks else ''} of a multiple "
                f"of {unit} columns ({why})")
    if c.swap_ab and (c.epilogue == "rows" or (c.epilogue == "tma") != (c.c_major == "M")):
        return (f"swap_ab = True: C is written through its transposed view, by the 'direct' epilogue or by the "
                f"'tma' epilogue with c_major = 'M' (not epilogue = {c.epilogue!r}, c_major = {c.c_major!r})")
    return None


def _streamk(c: GemmConfig):
    if c.streamk_min_saving < 0:
        return f"streamk_min_saving = {c.streamk_min_saving}: a number of k-tiles, at least 0"
    if c.streamk_every_sm and not c.streamk:
        return "streamk_every_sm = True: sharing a few tiles over every SM is stream-K's: streamk = True"
    return None


def _splitk(c: GemmConfig):
    """The rules of ``splitk``: what its units (one tile's k-slice each, on one CTA) are not built with."""
    if not c.splitk:
        return None
    if c.streamk:
        return ("splitk = True: split-K's k-slices and stream-K's runs are two ways to share out a tile's k-tiles: "
                "choose one (streamk = False)")
    if c.cluster != 1:
        return (f"cluster = {c.cluster}: split-K's units are single CTAs (a slice's partial sums and flags count "
                "tiles of one CTA): cluster = 1")
    if c.overlap:
        return (f"overlap = {c.overlap}: split-K's units end in a partial sum or a join, not a held tile whose "
                "epilogue could run behind the next tile's wgmmas: overlap = 0 with splitk = True")
    if c.grouped != "none":
        return (f"grouped = {c.grouped!r}: a grouped GEMM finds each tile's group (and, masked, whether it has rows) "
                "on the device, while split-K slices every tile's k-tiles alike: grouped = 'none'")
    if c.row_blocks_in_turn:
        return ("bm = 256: BM = 256 with block scales promotes each warpgroup's two 64-row blocks in turn, each "
                "k-tile's stage read by both blocks; split-K's partial sums are not built for it: bm = 128")
    return None


def _overlap(c: GemmConfig):
    if c.overlap < 0:
        return f"overlap = {c.overlap}: 0 (no overlap) or the k-tiles queued before the epilogue"
    if c.overlap and c.scales != "block" and (c.epilogue != "tma" or c.streamk or (c.fp8 and c.promote == 1)
                                              or c.pending != 1):
        return (f"overlap = {c.overlap}: the epilogue behind the next tile's wgmmas is built for the TMA-store "
                "epilogue of data-parallel tiles with one k-tile in flight: epilogue='tma', streamk=False, pending=1 "
                "(fp8: promote > 1)")
    return None


def _shared_memory(c: GemmConfig):
    need = c.smem_bytes()
    if need > SMEM_BYTES:
        return (f"stages = {c.stages}: {c.stages} stages of (BM + BN) × 128 bytes"
                + ((f" and {B_SCALE_SLOT} + BN × 4 bytes (rounded up to {TMA_SMEM_ALIGN}) of scales (scales_smem, "
                    "swapped)" if c.swap_ab else f" and BM × 4 + {B_SCALE_SLOT} bytes of scales (scales_smem)")
                   if c.scales_smem else "")
                + (" and the staged C" if c.staged else "") + f" need {need} bytes of shared memory, over the "
                f"{SMEM_BYTES} a Hopper CTA can have")
    return None


_RULES = (_dtypes, _tile, _majors, _cluster, _promotion, _scales, _row_blocks, _registers, _epilogue, _streamk, _splitk,
          _overlap, _shared_memory)

# the configuration examples/gemm_hopper.tile spells out (bf16, 128 x 256, 4 stages, clusters of 2 sharing B by
# multicast, C through stmatrix and TMA stores in two column halves)
TILE_FILE = GemmConfig(cluster=2, epilogue="tma", epilogue_split=2)
