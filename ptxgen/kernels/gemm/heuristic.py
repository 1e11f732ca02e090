"""Which configuration a problem gets: a deterministic rule from (M, N, K, dtype, SM count) to a ``GemmConfig``, no
timing. The rules and the measurements behind them (H100 SXM where not marked H200, bench_gemm interleaved timing,
docs/gpu-runs/):

1. **Swap A and B for small M** (M ≤ ``SWAP_AB_MAX_M`` = 64 < N): the kernel computes Cᵀ = B·Aᵀ, so that the problem's
   N runs along the kernel's 128-row tiles and M is the wgmma's N, rounded up to 16 or 32, past 32 rows to a
   multiple of 8 (``swapped_bn``: 40 for an M of 34; s42 sections 2-3); C is stored through its transposed view by
   the ``direct`` epilogue (no TMA store or row epilogue writes a column-major C). 8 stages (a stage is only
   (128 + BN) × 128 bytes). Where the tiles are fewer
   than a third of the SMs (``SWAP_STREAMK_SHARE``), split-K: ⌊SMs / tiles⌋ k-slices per tile running together,
   joined once (K-major operands, no bias; s30 log section 6: 16 of 16 decode problems faster than stream-K on every
   SM, by 1-31%: bf16 16×1024×16384 26 → 34 TFLOP/s, 24×1536×8192 34 → 44, 60×2048×28672 127 → 136; e4m3
   49×1024×24576 125 → 141, 30×2560×13824 110 → 133); otherwise stream-K on every SM (``swapped_streamk``:
   ``streamk_every_sm``, the few tiles' k-tiles shared out, from a saving of ``STREAMK_MIN_SAVING`` · BN/256
   k-tiles — the partial sums are BN/256 of a 128 × 256 tile's); fp8 alike (promotion every 4 k-tiles within each
   CTA's run; the per-tensor scales applied once, to the joined sum). From a third of the SMs on, data-parallel: a
   memory-bound decode GEMM's tiles then keep DRAM busy without the partial sums (s12 section 5, interleaved TFLOP/s,
   data-parallel / stream-K:
   bf16 16×6144×4096 (48 tiles) 38 / 31, 16×14336×4096 40 / 37, 32×7168×8192 (BN 32) 82 / 74; 32 tiles:
   16×4096×14336 37 / 38, 32×4096×4096 (BN 32) 54 / 60; e4m3 16×6144×4096 58 / 53, 64×8192×8192 284 / 257,
   16×4096×14336 66 / 68). Just past one wave (at most ``SWAP_TALL_DECODE_MAX_WAVES`` = 1.15 waves of 128-row tiles,
   K-major, no bias) one wave of 256-row tiles (``h256x<BN>s5-6x``; H200, s41 log section 10: of 18 changed picks
   13 faster, by up to 39%, geomean +8.2%, 4 slower by 1.6-3.4% at K ≥ 11008). Further past one wave, where the
   tiles use under ``SWAP_STREAMK_MAX_WAVE_USE`` = 80% of their waves' SMs, K spans at least
   ``SWAP_STREAMK_MIN_KTILES`` = 48 k-tiles and each SM takes at least ``SWAP_STREAMK_MIN_SHARED_KTILES`` = 7 of the
   last wave's, the short last wave is shared out by stream-K on every SM (``…skax``; s41 sections 2-4 and 10: of
   18 changed picks the 11 with 48 or more k-tiles faster by 2.6-18%, bf16 26×20480×14336 91 → 106, e4m3
   50×20480×14336 312 → 367 TFLOP/s; under 48 k-tiles 6 of 7 slower by 3.5-9%).
2. **The tile** minimizes a cost model (``estimated_cost``): k-tiles on the critical path × the time of one k-tile of
   the tile, relative to the largest tile, ``(BN / BN_max) / EFFICIENCY``; stream-K's partial sums add
   ``STREAMK_FIXUP`` k-tiles (s8 section 6: ~15 k-tiles of a 128 × 256 tile, ~10 µs) growing with the pieces a
   tile is split into. Candidates (ties go to the earlier):
   - bf16/f16, C rows 16-byte aligned: 128 × 256, 4 stages, TMA-store epilogue in halves (``h128x256s4t2``, the
     winner at 4096³, 8192³, 8192²×1024, 2048³, 4096²×16384: s9 sections 6 and 12); 128 × 192, 4 stages, TMA store
     in thirds, data-parallel without overlap (``h128x192s4t3``: where the waves of 128 × 256 and 128 × 128 fit badly,
     M = 384-3072: 512×6144×4096 628 against 486 TFLOP/s for 128 × 128 stream-K, 768×4096×4096 637 against 491,
     640×14336×4096 637 against 586, 768×8192×8192 652 against 602; its stream-K (32 B of spills) and overlap
     within -3..+3%: s12 section 5; ``EFFICIENCY`` 0.95 estimated); the **wave-filling** widths
     (``WAVE_FILLING``: 16-bit 96, 112, 144, 160, 176, 224; fp8 80, 112, 136, 144, 160, 176 — C staged in SW64/SW32
     atoms, TMA boxes of 32 or 16 columns; 136 in plain rows, one box), data-parallel with the stages of
     ``WAVE_FILLING``, where their last wave holds at least ``WAVE_FILL_MIN`` of the SMs — the tiles cuBLAS picks at
     mid M (its 128 × 96 at 384×4096×4096, 144 × 128 at 384×6144×4096, 128 × 160 at 640×4096×14336): bf16 384×4096×4096
     544 against 464 TFLOP/s (x1.009 cuBLAS), 384×6144×4096 576 against 498 (x0.927), 640×4096×14336 624-652 against
     597; e4m3 640×8192×4096 1050 against 1004; their ``EFFICIENCY`` fitted to those sweeps (s13 section 4); 16-bit
     128 × 224 (4 stages, C staged in two blocks: ``h128x224s4t2``) where N is a multiple of 224 columns' waves — bf16
     256×14336×4096 569 against 547 for 128 × 256 (x1.031 cuBLAS), 512×14336×14336 696 against 640, 640×5120×8192 624
     against 554 (s19 sections 1-2); 128 × 128, 6 stages, TMA store (``h128x128s6t``: more tiles where 128 × 256 leaves
     SMs idle); 128 × 64, 8 stages, TMA store, data-parallel (``h128x64s8t``: 340 against 310 TFLOP/s for 128 × 128 at
     128×7168×18432, whose 56 tiles of 128 × 128 leave half the SMs idle; cuBLAS 317; 2026-11-26 s10 sweep, from which
   its ``EFFICIENCY`` 0.49 comes); - bf16/f16, C rows not 16-byte aligned (N odd, …): 128 × 192 in clusters of 2, the
     rows epilogue in thirds (``h128x192s4c2r3``: 569 TFLOP/s at 3001×2999×2016 against 375 direct, 2026-11-25 s6), and
   128 × 128 (``r``); - fp8: 128 × 192 and 128 × 128, 4 stages, promotion every 4 k-tiles, TMA store (``h128x192s4k4t``
     won 8192³ and 8192²×1024, ``h128x128s4k4t`` 4096³ and 4096²×16384: the wave quantization, which ``EFFICIENCY`` 0.96
     for the 128-wide tile reproduces), and 128 × 64, 8 stages (``h128x64s8k4t``: 632 against 497 TFLOP/s for 128 × 128
     at 128×7168×18432, cuBLAS 637; ``EFFICIENCY`` 0.61 from it); rows epilogue ``h128x128s4c2k4r`` (724 TFLOP/s at
     3001×2999×2016); where the model picks the fp8 128 × 112 tile for M in (192, 256] and K ≥ 8192, the 256 × 112
     tile (``FP8_TALL``: the same column tiles in half the CTAs, each B tile read once: 256x14336x14336 1018 against
     943 TFLOP/s; s20 section 5) if its last wave holds at least ``WAVE_FILL_MIN`` of the SMs; and where a data-parallel
     fp8 pick of M over 4 or more row tiles leaves its waves' SMs less busy than 128 × 224 tiles would, by 5 points,
     and those use at least 90% of theirs, ``FP8_WIDE_FILL`` (``h128x224s3k4t``; H200, s41 sections 6-7: of 38
     changed picks 35 faster, geomean +2.5% and +3.0% in two samples, e4m3 1235×2560×3584 817 → 973 TFLOP/s).
3. **Stream-K** (bf16/f16; fp8's 128 × 192 TMA-store tile in clusters of 1 from 8 row tiles, s33 log sections 6-7:
   e4m3 4695×3072×24576 1170 → 1260 TFLOP/s) where it shortens the last wave by at least ``STREAMK_MIN_SAVING`` = 20
   k-tiles (``schedule.streamk_ktiles_saved``, the kernel's own test): ``…sk`` (8192³: 1.041 × cuBLAS;
   4096×4352×4096 +9.7% over data-parallel), in clusters of 2 where K ≥ 2·max(M, N) (``c2t2sk`` won 4096²×16384 in
   both 16-bit types); the k-tiles a CTA shares out in stream-K's last wave cost ``STREAMK_SHARED_SLOWDOWN`` (1.3
   without clusters, 1.14 in pairs) of a data-parallel k-tile in the cost model, so a data-parallel tile whose waves
   fit wins where stream-K only trims a short last wave (s20 sections 2-4: of 22 changed picks measured afresh 20 as
   fast or faster, up to +10%: 2048x3072x14336 635 -> 699 TFLOP/s; 1024x7168x8192 -2.7%, 1536x8192x14336 -1.2%);
   not stream-K on every SM for unswapped problems: with 128 × 128 tiles it lost to data-parallel at 128×7168×18432
   (302 against 310 TFLOP/s) and 512×4096×4096 (562 against 580; 2026-11-26 s10 sweep), where the narrower tile wins.
3b. **Split-K** (K-major, TMA store, no bias, K ≥ ``SPLITK_MIN_K`` = 8192, M over one row tile): the 16-bit 128 ×
   256 / 192 / 128 tiles and the fp8 128 × 192 (``SPLITK_WIDTHS``) split into S = ⌊SMs / tiles⌋ ≥ 2 k-slices that
   run together (``…z``) are candidates of the cost model, a slice's k-tiles ``SPLITK_SLOWDOWN`` = 1.3 dearer plus
   the partial sums' join: few tiles with long K (bf16 640×1536×13824 533 against 435 TFLOP/s for 128 × 64,
   320×2048×57344 542 against 240; s20 sections 7-8).
   From K = ``SPLITK_LONG_K`` (16-bit 10240, fp8 16384) a split-K candidate costs ``SPLITK_LONG_K_SHARE`` = 0.8
   of that, against the other candidates (the split tiles keep their order among themselves): one wave of narrow
   data-parallel tiles starves on its loads there (bf16 416×3072×32768 336 → 557 TFLOP/s, 1184×1024×28672 427 → 573,
   1024×1536×18432 577 → 606; s22 log section 3). fp8: 27 of 30 changed picks measured faster (e4m3
   416×2048×16384 464 → 811, 1024×1536×18432 1023 → 1146), 3 slower (640×1280×16384 832 → 713; s22 section 4).
3c. **Split-K of one row of narrow tiles** (64 < M ≤ 128, K-major, TMA store, no bias, K ≥ ``SPLITK_MIN_K``): where
   the 128 × 64 tiles over N number at most half the SMs, that tile split into S = ⌊SMs / tiles⌋ k-slices
   (``h128x64s8tez`` / fp8 ``h128x64s8k4tz``), before the cost model and the swapped tiles of rule 7: a handful of
   data-parallel tiles streams the weights through too few SMs, and the swapped split forms of rule 7 lost to it at
   6 of 7 shapes (bf16 101×1024×24576 121 → 166 TFLOP/s, 120×1024×12288 115 → 168 against h128x104s6tzxT; the
   data-parallel picks at e4m3 101×1024×24576 126 → 269, 128×1024×16384 144 → 282; s29 log section 4); 16-bit M
   under ``NARROW_SPLIT_MIN_M_16BIT`` = 88 only from 8 slices (rule 7's swapped split, M padded to 8 rather than
   128, won 65×4096×8192, 76×3072×18432).
4. Otherwise data-parallel; bf16/f16 with the TMA-store epilogue **overlapped** with the next tile's first k-tile
   (``o1``: 4096³ 1.003, 8192²×1024 1.022 × cuBLAS in s9 section 12) where a CTA has more than one tile (one wave:
   nothing to overlap, and o1 measured 1% slower at 512×4096×4096, s12 section 5); without overlap, the 16-bit
   128 × 128 tile waits for each k-tile's wgmmas (``DATA_PARALLEL_PENDING``, ``p0``: +2-6%).
5. **Pipeline depth** (``pipeline_stages``): a tile's stages above stand where M spans fewer than ``MANY_ROW_TILES``
   = 8 tiles; from 8 on (the CTAs at work share each B tile), 4 stages (16-bit 128 × 96: 5) — deeper pipelines lost
   12-30% there (s15 section 3).
6. **MN-major operands** (a (K, M) A or a (K, N) B, M or N contiguous: 16-bit only) run in clusters of 1; an MN-major
   B needs BN a multiple of 64.
7. **Swapped tiles for mid M** (64 < M ≤ ``SWAP_MID_MAX_M`` = 3072, N ≥ 2·M under M = 1024, a K-major A (B
   either way: a row-major (K, N) B becomes the kernel's MN-major A), C rows TMA-storable,
   and 128-row tiles padding M by at least ``SWAP_MID_MIN_PADDING`` = 5%, from M = ``SWAP_MID_LARGE_M`` = 1024
   ``SWAP_MID_LARGE_M_MIN_PADDING`` = 3%): the kernel computes Cᵀ = B·Aᵀ with M split into 1-8 tiles (16-bit from
   M = 1024 also 9-12 of at least 176 columns) of any multiple of 8 (``swapped_mid_widths``: 448 → 224, 152, 112,
   96), C stored by TMA as its
   transpose (``c_major = "M"``), as many stages as fit (4-6; rule 9 sets 4 from 136 columns where it rasters),
   data-parallel or (from 128 columns) stream-K, and
   under M = 1024 those of 112-144 columns also 256 rows tall (``swapped_tall_tile``, rated by ``effective_width``:
   the 25 problems of three samples whose pick they take ran 0.6-26% faster, geomean ×1.060, s37 log sections 9-11,
   which also fixed those limits); they enter
   rule 2's cost model on the kernel's problem (N, M, K) with their k-tiles ``SWAP_MID_SLOWDOWN`` dearer (16-bit 1.06,
   fp8 1.05; as dear as the unswapped ones from M = 1024, and where rule 9 rasters them from 136 columns, fp8's
   data-parallel ones at any width: ``swapped_slowdown``) and win only when strictly cheaper. This is how cuBLAS
   tiles these problems (its 128 × 160 over (N, M) at 448×11008 and 320×14336). Of 68 shapes whose pick changed
   (two samples, s17 log section 3) the new pick was faster at 62, by up to 1.76× (bf16 272×4608×7168 253 → 445
   TFLOP/s; e4m3 192×7168×4096 497 → 681); the 6 slower
   ones fixed the rule's limits (no stream-K under 128 columns, at least 4 stages, ties unswapped, fp8 1.05). On a
   fresh sample of 24 after that: 23 faster (up to 1.78×), one 0.7% slower; widened from M ≤ 640, N ≥ 4·M, its 6
   new picks of a sample were all faster (x1.11-1.24: bf16 770×8192×2048 506 → 608, e4m3 650×4096×4096 908 → 1125);
   with a row-major B too, 14 of 14 (x1.004-1.266: 300×8192×4096 383 → 485, 576×11008×2048 495 → 582). Widened
   from M ≤ 1024 and 10% padding (M just past a multiple of 128, whose last row of 128-row tiles is nearly empty,
   takes tiles of M that cover it with little padding, as cuBLAS's 256 × 152 at 1044×14336×57344): of 49 changed
   picks of two samples, 39 faster by up to 27% (bf16 1044×14336×57344 553 → 713, 1028×6144×6144 489 → 623,
   1284×5120×11008 543 → 652; e4m3 481×2560×13824 745 → 858), 4 even, 6 slower by 2.5-11% (bf16 850×3584×12288
   582 → 516; e4m3 1199×18432×24576 1139 → 1053) (s32 log section 5). From M = 1024 the swapped tiles cost no more
   per k-tile and enter from 3% padding: of 33 random changed picks (M 1043-1699) 27 faster by 2-19% (bf16
   1043×24576×10240 575 → 684, 1558×57344×11008 657 → 726; e4m3 1093×11008×11008 1140 → 1270), 3 even, 3 slower
   by 1-7% (bf16 1452×11008×57344 726 → 676; s33 log sections 1-3); fp8's 192-wide swapped tile, which lost at 4
   of its 5 fresh picks, is left out there (s33 section 4); 16-bit M over 8 × 224 rows, which had no swapped width
   of at most 8 tiles but 240 and 256, also splits into 9-12 tiles of at least 176 columns: 23 of 23 changed picks
   faster or even (bf16 1932×13824×1024 545 → 608, 1939×9216×1280 546 → 611; s33 sections 8-9).
   For M ≤ ``SWAP_SPLITK_MAX_M`` = 672 with K ≥ 8192 whose swapped tiles take at least 3 k-slices each (or 2 of at
   least ``SWAP_SPLITK_TWO_SLICES_MIN_KTILES`` = 112 k-tiles), their split-K form is a candidate too, and the
   one-tile width of an M under 96 (split-K only): such few tiles stream the weights through too few SMs. 16-bit in
   3+ slices: 8 of 8 changed picks of a sample faster (bf16 96×1536×10240 67 → 103, 72×1024×20480 48 → 98,
   96×5120×24576 203 → 238; s21 log section 6); with fp8 and the long 2-slice splits: 42 of 44 changed picks faster
   by 1-19% (bf16 192×8192×28672 419 → 498, 183×8192×24576 396 → 458; e4m3 91×5120×27648 369 → 434), two 1-2%
   slower (e4m3 121×8192×28672 636 → 624, bf16 96×7168×16384 242 → 239; s34 log section 4). An M under 96 (fp8:
   up to 96) takes its one swapped tile (data-parallel, or split-K by the rule above) without the cost model, which
   sees equal waves where the unswapped 128-row tiles, mostly padding, move twice the L2 bytes: bf16 7 of 9 changed
   picks of a sample faster (72×6144×12288 129 → 169, 66×8192×8192 134 → 166, 76×11008×8192 175 → 201), 2 within 2%
   slower (89×28672×5120 246 → 241; s21 log section 9); fp8 where the swapped tiles number at least SMs/4 (72×6144×12288
   235 → 308, 96×7168×12288 389 → 424; 16 tiles lost up to a third; s21 log section 11). So does an M at most
   ``SWAP_ONE_TILE_PAST_ROW`` = 24 rows past one 128-row tile, both widths, from SMs/4 swapped tiles (the second
   unswapped row of tiles is nearly all padding): bf16 9 of 9 changed picks faster (129×8192×8192 191 → 302,
   141×11008×6144 171 → 337, 146×7168×5120 192 → 267), e4m3 6 of 8 (129×8192×8192 356 → 521, 141×11008×6144 317 →
   606), 2 within 2% slower (152×5120×3072 266 → 260); s29 log section 6. Further past, up to
   ``SWAP_TWO_TILES_MAX_M`` = 216 rows (fp8 from K = 3072), M takes two swapped tiles of ⌈M/2⌉ where they fit one
   wave: of 28 random changed picks 24 faster (bf16 164×3584×5120 130 → 224, 161×7168×28672 245 → 367; e4m3
   162×7168×18432 474 → 730), 4 slower by 1.5-8% where ours already ran 1.0-1.8× cuBLAS (s30 log section 2). The
   one tile and the two are split into k-slices where they hold at most half the SMs, from K = 3072 with at least 8
   k-tiles a slice (``_past_row_swapped``; shorter slices: neither form): of 24 random changed picks of M 129-152, 21
   faster (bf16 136×3584×5120 118 → 239, e4m3 152×5120×16384 460 → 623), the 3 slower the short-slice ones the bound
   now leaves alone (s30 log section 3); and the two for M 257-280 (split only): 15 of 15 changed picks faster (e4m3
   266×2560×13824 368 → 722; s30 log section 7). That one split tile takes two of half its width where they keep
   ``SWAP_HALVES_MIN_UNITS`` = 90% of its CTAs at work (H200, s42 log sections 4-5: 15 of 16 fresh changed picks
   faster by up to 27%), so does one of M 65-128 split into at least ``SWAP_HALVES_MIN_SLICES`` = 4 k-slices
   (``_split_in_halves``; s42 section 7). A stream-K pick of these tiles over one to two waves takes instead the
   widest width whose data-parallel tiles fill one wave to ``SWAP_ONE_WAVE_MIN_FILL`` = 85% (``_swapped_one_wave``;
   H200, s42 log section 6: 15 of 16 faster by 3-17%, bf16 775×4096×57344 567 → 665).
8. **Column-split 192-row tiles** (16-bit, K-major, C rows TMA-storable, ``COLUMN_SPLIT_MIN_K`` ≤ K ≤
   ``COLUMN_SPLIT_MAX_K``): ``column_split_tiles`` — 192 × BN, BN 96 … 176, each consumer warpgroup all 192 rows ×
   BN/2 columns (``warpgroups_along = "n"``, cuBLAS's "coopB" tiles) — enter rule 2's cost model, costed as the
   128-row tile of their BN times 192/128; against rule 7's swapped tiles their cost counts
   ``COLUMN_SPLIT_SWAPPED_MARGIN`` = 1.06 times. Where they fit a problem that the 128-row tiles quantize badly: of 60
   random changed picks of one wave, 58 faster by 0.3-33% (bf16 2364×1280×13824 494 → 648 TFLOP/s, 153×18432×4096
   268 → 355), 2 slower by 0.5-0.7% (s31 log sections 2-5); over several waves and from K = 2048, since their staged
   C goes out in full-width rows (s32 log sections 1-2), of 44 more 34 faster by 1-26% (6204×2112×8192 582 → 666,
   2097×5120×24576 623 → 691, 8977×1024×2048 544 → 602), 2 even, 8 slower by 0.6-3.5%, all at K ≤ 3072 (s32 log
   section 4).
9. **Swapped raster** (``swapped_raster``): a swapped pick whose kernel spans 2 to ``SWAPPED_GROUP_MAX_COLUMNS`` = 16
   tile columns (⌈M / BN⌉; the swapped picks span at most 11) rasters its tiles along the columns first
   (``SWAPPED_GROUP`` = 1 tile row per group), so that consecutive CTAs read the same tile of the weights, the larger
   operand, rather than the same tile of the tokens: of 24 random
   swapped picks 17 faster by 0.4-18% (bf16 158×7168×2048 250 → 296 TFLOP/s, 208×4096×7168 364 → 388), 4 even, 3
   slower by 0.9-2.3%, geomean ×1.021; of 20 more ×1.015, 4 slower by 0.4-6.5% (s36 log sections 9-10). The cost
   model does not see the raster: it picks the tile, rule 9 orders it; but the tiles it rasters lose rule 7's
   slowdown as above (``SWAP_RASTERED_FULL_SPEED_MIN_BN``): of 25 fresh problems whose pick that changed, 21 faster by
   up to 15.5% (bf16 900×129280×7168 621 → 717 TFLOP/s, e4m3 263×16384×53248 989 → 1072), 4 slower by 0.8-2.8%,
   geomean ×1.047 (bf16) and ×1.042 (e4m3) (s37 log sections 2-6). Such a rastered tile, split into k-slices or
   not, runs ``SWAP_RASTERED_STAGES`` = 4 stages from ``SWAP_RASTERED_FOUR_STAGES_MIN_BN`` = 136 columns
   (``swapped_pipeline_stages``), as rule 5's 4 stages where the CTAs at work share a tile of the narrower operand:
   of 53 such picks 52 faster by 2-14%, one even, geomean ×1.078 (bf16 790×3072×10240 567 → 619 TFLOP/s,
   1201×28672×28672 602 → 686; e4m3 851×8192×9216 1098 → 1187; H200, s38 log sections 5-6); split into k-slices
   too: 9 of 9 rastered split picks faster by 1.6-8% (bf16 603×1280×57344 557 → 602; s40 log section 11).
10. **Deep one-wave tiles** (``deep_one_wave``, K-major, K ≥ ``DEEP_MIN_K`` = 2048, fp8 up to ``DEEP_MAX_K`` =
   32768, M ≥ ``DEEP_MIN_M`` = 256): where one wave of 128 × 64-96 tiles or 64 × 96-160 column-split tiles (each consumer
   warpgroup 64 × BN/2) covers C, as it is or swapped, filling ``DEEP_MIN_FILL`` = 85% of the SMs or more, that tile
   with ``DEEP_STAGES`` = 8 stages and the direct epilogue (no staged C: all the shared memory is pipeline) replaces
   the pick of the rules above — the smallest per CTA, then the 64-row one, then swapped (rastered by rule 9) —
   unless that pick is a swapped split-K tile or a swapped data-parallel one of the same shape, and a 64-row tile
   whose warpgroups' wgmma N is under 64 only with less work per CTA than a split-K pick's CTAs. Such a wave has
   little wgmma work per k-tile and runs at the pace its stages keep loads in flight; 5-7 stages ran 6-10% slower
   than 8 (bf16 1202×1024×14336, 128 × 80 swapped, 511-532 TFLOP/s against 571; H200, s40 log sections 2-4), and
   not for the division that gives each k-tile's stage: made cheaper it changed nothing (s40 log section 10). Of 30 random changed picks 26 faster by 2-37%
   (bf16 538×2048×8192 389 → 544, 877×1280×10240 441 → 586; e4m3 902×1024×16384 643 → 918), 4 slower by 0.4-8%,
   which set the exceptions (s40 log section 6); of 30 fresh ones with them, 28 faster by 0.4-36% (bf16
   791×1280×16384 452 → 626, e4m3 792×1536×13824 781 → 1060), 2 slower by 0.6-1.6% (s40 log section 7). Widened
   from K 8192-32768: of 24 changed picks at K 1024-7168 and 36864-57344, 21 faster by 1-58% (bf16 343×2112×7168
   286 → 451, 779×1280×36864 464 → 605), fp8 at K = 57344 12% slower, 16-bit at K = 1536 1-4% slower (s40 log
   section 8).

``choose_config(8192, 8192, 8192, "bf16", 132)`` = h128x256s4t2sk; ``choose_config(4096, 4096, 4096, "bf16")`` =
h128x256s4t2o1; ``choose_config(16, 4096, 4096, "bf16")`` = h128x16s8zx (swapped, split into k-slices);
``choose_config(16, 4096, 14336, "e4m3")`` = h128x16s8k4zx. ``autotune``
(``matmul(..., autotune=True)``) times this rule's pick and its neighbours once per problem and device instead.
"""
from __future__ import annotations

import numpy as np

from .config import ELEMENT_BYTES, SMEM_BYTES, STREAMK_MIN_SAVING, GemmConfig
from .schedule import splitk_slices, streamk_ktiles_saved

SWAP_AB_MAX_M = 64
# mid M: swapped tiles (Cᵀ = B·Aᵀ, the kernel's N the problem's M in 1-8 tiles of any multiple of 8, C stored by TMA
# as its transpose) compete in the cost model where N is at least this many times M (from M = SWAP_MID_LARGE_M at any
# N), up to this M; their k-tiles cost this much more than the model's unswapped ones (16-bit 448x11008x14336 632
# TFLOP/s against the model's 660 from the unswapped 128 x 176's 573; fp8 2-4% behind the model at e4m3
# 224x14336x4096 and 448x5120x4096: docs/gpu-runs/2026-11-26-s17.log sections 2-3). cuBLAS tiles these problems so
# (its 128 x 160 over (N, M) at 448x11008 and 320x14336, bf16 and e4m3), and from M = 1024 at any N (its 128 x 208 at
# 2260x1536, 256 x 160 at 1412x3584). Dropping N >= 2M from M = 1024 and raising this bound from 2048 (16-bit: 12
# tiles of 256 reach 3072) changed the picks of 68 sampled problems of M 1032-2834 (H200, s38 log sections 2-3):
# ratio to cuBLAS geomean 1.134 -> 1.166, those under 0.95 27 -> 17 (bf16 1713x2048x5120 600 -> 661 TFLOP/s,
# 2326x1536x11008 605 -> 669; e4m3 1287x2560x12288 971 -> 1035); 10 slower by 0.3-8% (bf16 2055x2048x16384 659 ->
# 606, 1161x2048x24576 614 -> 583). Under M = 1024 the same change lost (bf16 708x1280x7168 540 -> 377)
SWAP_MID_MAX_M = 3072
SWAP_MID_MIN_N_OVER_M = 2
SWAP_MID_SLOWDOWN = {16: 1.06, 8: 1.05}
SWAP_MID_MIN_BN = 96
# ... and the widths M splits into from this one, those under SWAP_MID_MIN_BN only where the kernel's rows (N) span
# at least SWAP_MID_NARROW_MIN_ROW_TILES tiles: 80-88 wide tiles where M is a little over a multiple of them, their
# EFFICIENCY between the 64- and 96-wide tiles'. At M 258-330 the swapped forms led (bf16 258x5120x3072 three 88-wide
# tiles 370 TFLOP/s against 242 for the pick then, h128x128s6p0t). Of 24 random changed picks (M 163-689) 15 faster
# by 2-70% (bf16 528x2560x7168 325 -> 552, 324x2560x6144 256 -> 333; e4m3 257x4096x6144 385 -> 595, 688x2048x8192
# 719 -> 998), 4 within 1%, 5 slower by 6-17%, all at N <= 1536 (425x1024x6144 220 -> 183, e4m3 645x1536x7168 695 ->
# 593), which the row-tile bound leaves as they were (and with them one faster, 520x1536x5120 221 -> 328). On a fresh
# sample of 20 changed picks: 16 faster or even (bf16 260x5120x5120 253 -> 398, 520x2560x4096 306 -> 510; e4m3
# 524x2560x6144 541 -> 700, 314x3072x14336 604 -> 718), 4 slower (e4m3 442x2560x8192 763 -> 678, 408x2560x5120 513 ->
# 487, two within 1%). docs/gpu-runs/2026-11-27-s30.log section 5
SWAP_MID_MIN_WIDTH = 80
SWAP_MID_NARROW_MIN_ROW_TILES = 16
# ... in at most this many tiles (from 4: e4m3 900x8192x2048 896 -> 1043 TFLOP/s, 7 of 8 sampled fp8 picks faster; bf16
# 5 of 8, the 3 slower by 3-4%: s17 log section 10)
SWAP_MID_MAX_TILES = 8
SWAP_MID_MAX_BN = {16: 256, 8: 192}   # fp8's promotion keeps a second accumulator: 192 columns at most (as unswapped)
SWAP_MID_MAX_STAGES = 6
# ... and at least this many (bf16 464x49152x5120: 128 x 232, whose unsplit staged C leaves room for 3, 526 TFLOP/s
# against 619 for the unswapped 128 x 256)
SWAP_MID_MIN_STAGES = 4
# ... and stream-K only from this width (bf16 192x12288x14336: 96 wide with stream-K 367 TFLOP/s against 452 for the
# unswapped 128 x 192; 96x28672x8192 257 against 271), as the unswapped wave-filling tiles run data-parallel
SWAP_MID_MIN_STREAMK_BN = 128
# ... only where 128-row tiles would pad M by at least this share (M = 448: 14%; 320: 20%; 1044: 10%; 1924: 6%; not
# 1300: 3%, nor any multiple of 128, where the unswapped wave-filling tiles already shape the waves). From 10% and
# M <= 1024 (s17, s30) to 5% and M <= 2048 (SWAP_MID_MAX_M): of 49 random changed picks 39 faster, 4 even, 6 slower by
# 2.5-11%, the slower ones at paddings of 5.4-9.8% among faster ones at the same paddings (s32 log section 5)
SWAP_MID_MIN_PADDING = 0.05
# ... and from M = SWAP_MID_LARGE_M on, the swapped tiles' k-tiles cost what the unswapped ones do (no
# SWAP_MID_SLOWDOWN), from a padding of SWAP_MID_LARGE_M_MIN_PADDING: at such M they ran as fast per k-tile as the
# 128-row tiles. A sample at M 1000-2048 found the swapped tiles ahead where the cost model kept the unswapped
# ones (bf16 1174x18432x2112 168 wide 645 TFLOP/s against 569 for the pick, 1598x18432x3072 (4% padding) 200 wide 672
# against 616; s33 log section 1: 15 of 15 changed picks faster, by 0.3-21%). Of 33 random changed picks (M
# 1043-1699, s33 log sections 2-3) 27 faster by 2-19% (bf16 1043x24576x10240 575 -> 684, 1115x28672x28672 655 -> 733,
# 1558x57344x11008 657 -> 726; e4m3 1093x11008x11008 1140 -> 1270), 3 even, 3 slower (bf16 1452x11008x57344 726 ->
# 676, e4m3 1192x28672x9216 1133 -> 1083, bf16 1177x4096x8192 609 -> 603); the padding bound 3% leaves out
# 1505x6144x6144 (2.1%: 677 -> 652). Under M = 1024 the same change was slower at 5 of 8 changed picks (bf16
# 607x12288x28672 633 -> 529, 484x9216x9216 599 -> 558; s33 log section 2)
SWAP_MID_LARGE_M = 1024
SWAP_MID_LARGE_M_MIN_PADDING = 0.03
# ... there fp8's swapped tiles are at most this wide: its 192-wide one (5 stages, C stored in two blocks) was slower
# than the pick it replaced at 4 of 5 fresh changed picks (e4m3 1488x7168x10240 1144 -> 1094 TFLOP/s, 1333x18432x10240
# 1232 -> 1179; 1112x10240x24576 1152 -> 1167), where the 136-184-wide ones were faster at 15 of 16 (1068x9216x12288
# 1034 -> 1165, 1098x16384x5120 1085 -> 1206; s33 log section 4)
SWAP_MID_LARGE_M_MAX_BN = {16: 256, 8: 184}
# ... and 16-bit M splits there into up to SWAP_MID_LARGE_M_MAX_TILES tiles, those past SWAP_MID_MAX_TILES at least
# SWAP_MID_LARGE_M_EXTRA_MIN_BN wide: an M over 8 x 224 rows has no swapped width of at most 8 tiles that holds 4
# stages but 240 and 256. Of 14 random changed picks with up to 12 tiles of any width (s33 log section 8) the 9
# where 176-224-wide tiles replaced the unswapped pick were faster or even (bf16 1932x13824x1024 545 -> 608 TFLOP/s,
# 1969x13824x3072 646 -> 692, 1818x16384x13824 687 -> 718); 144-168-wide ones lost at 4 of 5 (1585x13824x2048 631 ->
# 588), fp8 at 6 of 14 (e4m3 1582x11008x57344 1222 -> 1040)
SWAP_MID_LARGE_M_MAX_TILES = 12
SWAP_MID_LARGE_M_EXTRA_MIN_BN = 176
H100_SMS = 132
# the time of one k-tile of a tile relative to its area share of the largest candidate (1: as efficient per FLOP);
# fp8 128 x 128 within the two measured wave-quantization winners (between 0.92 and 1.02) and the s13 sweeps (0.74-0.93
# relative to 128 x 192 at mid M); the other widths from the s13 sweeps (section 4), 144 and 160 from s15's with 4
# stages (section 3: 16-bit 2048x5120x4096 128 x 160 650 TFLOP/s against 607 for 128 x 256 stream-K, 384x18432x4096
# 128 x 144 588 against 553; e4m3 2048x5120x4096 128 x 160 1157 against 1109 for 128 x 128); 16-bit 256, 192 and 64
# estimated; 16-bit 224 the value between 192 and 256 that its swapped form had been taking, kept for the unswapped
# tile (docs/gpu-runs/2026-11-26-s19.log sections 2 and 4: of 44 sampled picks it changed at M <= 896, 34 faster, up to
# +15%, geomean +2.8% on the second sample; the 10 slower by 0.5-2%, where it replaced a 160-192 wide tile); fp8 160
# 0.97, not s15's 0.93: e4m3 4096x5120x4096 128 x 160 1210 TFLOP/s against 1165 for the pick then, 128 x 192; of 34
# random changed picks (two samples, docs/gpu-runs/2026-11-27-s31.log section 7) 27 faster by 0.2-8% (11520x2048x5120
# 1207 -> 1303, 9459x2560x3584 1178 -> 1248, 810x12288x3072 978 -> 1052), geomean x1.021, 7 slower by 0.4-4.6%
# (457x8192x13824 1007 -> 960, 1811x11008x57344 1196 -> 1168)
EFFICIENCY = {(16, 256): 1.0, (16, 224): 0.975, (16, 192): 0.95, (16, 176): 0.94, (16, 160): 0.95, (16, 144): 0.92,
              (16, 128): 0.90, (16, 112): 0.83, (16, 96): 0.80, (16, 64): 0.49,
              (8, 192): 1.0, (8, 176): 0.95, (8, 160): 0.97, (8, 144): 0.93, (8, 128): 0.92, (8, 112): 0.83,
              (8, 64): 0.61}
# the tiles whose widths fill the SMs' waves where 64-column steps do not (a multiple of 16 columns, C staged in SW64
# or SW32 atoms; the 16-bit 128 x 224 in two blocks of 112, ``_staged_in_fewest_blocks``): data-parallel, no overlap
# (s13 section 4: their stream-K and overlap not measured faster); 16-bit and fp8 widths -> their stages where M spans fewer than ``MANY_ROW_TILES`` tiles (``pipeline_stages``). Deeper is
# not always better (s15 section 3, stages 4-8 swept): 128 x 160 takes 4 (bf16 640x4096x14336 719 TFLOP/s against
# 657 with 5 stages, 640x8192x4096 665 / 616; e4m3 1288 / 1221), 128 x 144 4 (bf16 640x11008x4096 612 / 572,
# 384x18432x4096 588 / 564, 384x6144x4096 563 / 579; e4m3 384x6144x4096 1035 / 1006); the narrower tiles their
# deepest pipelines (bf16 384x4096x4096 128 x 96 552 with 7 stages, 479 with 4; e4m3 256x14336x4096 128 x 112 932
# with 6, 802 with 4)
WAVE_FILLING = {16: {96: 7, 112: 6, 144: 4, 160: 4, 176: 4, 224: 4},
                8: {80: 7, 112: 6, 136: 4, 144: 4, 160: 4, 176: 4}}
# (fp8's 128 x 136 takes 4, not 5: 4 stages were faster at 14 of 16 sampled picks, even at 2, by up to 11%: e4m3
# 379x28672x14336 1046 -> 1146 TFLOP/s, 744x14336x24576 1053 -> 1168; docs/gpu-runs/2026-11-28-s42.log section 1)
# ... and where M spans at least this many tiles (a raster group's rows: the CTAs at work share each B tile), 4 stages,
# 16-bit 128 x 96 5 (bf16 8192x7680x8192: 128 x 128 675 TFLOP/s with 4 stages against 517 with 6, 128 x 144 680 /
# 601 (5), 128 x 160 712 / 590 (5), 128 x 112 612 / 527 (6), 128 x 96 563 (5) / 542 (4) / 512 (7); e4m3 128 x 112
# 1134 / 970 (6), 128 x 160 1275 / 1096)
MANY_ROW_TILES = 8
# ... and these widths only up to this many row tiles: the 16-bit 128 x 224 against the picks without it was faster at
# 6 of 14 sampled shapes of M = 1536-16384 (-3.6% at 8192x4352x1024 to +4.6% at 1536x12288x8192), at 34 of 44 of
# M <= 896 (docs/gpu-runs/2026-11-26-s19.log sections 2-4). fp8's 128 x 80 (7 stages) and 128 x 136 (then 5), measured
# where M spans at most 7 row tiles (s34 log sections 5-6): 128 x 80 against the 128 x 128 pick 11 of 13 changed picks
# faster by 2-19% (887x1280x11008 780 -> 929 TFLOP/s, 256x5120x13824 729 -> 940), 2 within 1%; 128 x 136 up to 6
# row tiles 10 of 12 faster by 0.2-9% (256x53248x16384 1005 -> 1095, 381x28672x1536 851 -> 898), 2 slower by 2-4%; at
# 7 row tiles 2 of 2 slower (862x12288x14336 1137 -> 990)
WAVE_FILL_MAX_ROW_TILES = {16: {224: MANY_ROW_TILES - 1}, 8: {80: 7, 136: 6}}
# ... but the 128 x 80 does not stand in for a swapped mid-M tile (rule 7): against those picks it was slower at 10
# of 14 (395x2560x9216 800 -> 471, 660x1536x7168 711 -> 534), though the cost model has it cheaper; the swapped tiles
# are weighed against the unswapped pick without it (s34 log section 6)
FP8_NARROW_FILL_BN = 80
MANY_ROW_STAGES = {16: {96: 5}, 8: {}}
MANY_ROW_DEFAULT_STAGES = 4
# ... taken only where their last wave holds at least this share of the SMs: with fewer tiles than SMs a problem of
# small M streams its B through fewer SMs (bf16 128x4096x4096: 128 x 64's 64 tiles 264 TFLOP/s, 128 x 96's 43: 198)
WAVE_FILL_MIN = 0.75
# ... a rule for problems of under two waves or of fewer row tiles than this; in the others the cost model alone
# weighs the last wave (s15 section 6, the picks it changes, TFLOP/s before / after: bf16 1536x8960x1536 539 / 578,
# 1024x7168x4096 593 / 622, 512x14336x4096 578 / 600, 2048x11008x1536 563 / 589; e4m3 512x14336x8192 1008 / 1102,
# 1024x7168x4096 1026 / 1113, 384x28672x4096 989 / 1040; with 1-2 row tiles the wider tiles stayed ahead: bf16
# 256x28672x4096 537 / 524, e4m3 128x57344x4096 651 / 641)
WAVE_FILL_FREE_ROW_TILES = 3
# stream-K's partial sums in k-tiles of a 128 x 256 tile (s8 section 6), and the extra per further piece of a tile
STREAMK_FIXUP = 15.0
STREAMK_FIXUP_PER_PIECE = 0.25
# ... and a 16-bit stream-K tile whose M spans 3 or 4 row tiles runs this much slower than the model's k-tiles say
# (bf16 128 x 256 stream-K against the data-parallel wave-filling tiles: 384x14336x8192 537 / 601 (176), 512x11008x14336
# 550 / 643 (176), 448x12288x14336 508 / 585 (192); on 10 further shapes the changed picks were 0.6-17% faster, none
# slower; at 1-2 row tiles the 128 x 256 picks stayed ahead (192x28672x5120: 391 against 337 for 128 x 128 stream-K):
# docs/gpu-runs/2026-11-26-s16.log section 17)
STREAMK_FEW_ROW_TILES = (3, 4)
STREAMK_FEW_ROWS_SLOWDOWN = 1.08
# ... and the k-tiles an unswapped stream-K CTA shares out in the last wave run this much slower than a data-parallel
# k-tile, by cluster size: the CTAs of that wave read disjoint k ranges of few tiles, so they share little through
# L2 (pairs halve their B traffic by multicast). Fitted to the stream-K picks against the next candidate (bf16, 47
# shapes, docs/gpu-runs/2026-11-26-s20.log sections 2-3): without clusters the data-parallel tile was faster at 26 of
# 27 (up to +15%: 768x8192x11008 603 -> 695 TFLOP/s); with pairs 1.14 moves exactly the measured gains of +0.1% to +8%
# (3072x2048x18432 677 -> 732, 512x11008x57344 624 -> 669) and none of the losses (1536x8192x28672 733 against 719)
STREAMK_SHARED_SLOWDOWN = {1: 1.3, 2: 1.14}
# ... and at exactly this many row tiles a 16-bit stream-K tile takes clusters of 2 (the pair shares each B tile by
# multicast: B is nearly all the traffic there): 192x28672x5120 391 -> 431 TFLOP/s, 256x57344x8192 561 -> 597; on 8
# further shapes 256x28672x14336 513 -> 601, 256x14336x14336 490 -> 563 (128 x 128), 192x18432x28672 473 -> 472, the
# others +1..+15% (docs/gpu-runs/2026-11-26-s16.log section 19)
STREAMK_CLUSTER_ROW_TILES = 2
# fp8 (per-tensor scales) takes stream-K by the same test, its TMA-store tiles only and in clusters of 1: of 19 random
# changed picks (M 1013-10732) 12 faster by 0.4-9% where K is long and few column tiles leave the last wave short
# (e4m3 3249x2048x24576 1086 -> 1181 TFLOP/s, 4695x3072x24576 1170 -> 1260, 3092x10240x24576 1167 -> 1215), 5 within
# 0.2%, 2 slower by 1.8-2.1% (1129x5120x57344 1188 -> 1163); in pairs it was slower than in clusters of 1 at 15 of 20
# (1382x28672x13824 1255 against 1062; s33 log section 6). From 8 row tiles, where it was measured (at fewer the
# 128 x 112 and 256 x 112 tiles it would replace are cuBLAS's own)
FP8_STREAMK_MIN_ROW_TILES = 8
# ... and the 128 x 192 tile only: stream-K of 128 x 128 lost at 2 of its 3 picks of a fresh sample (e4m3
# 2068x4096x24576 1147 -> 1017 TFLOP/s, 7516x1024x11008 1073 -> 1057; 2371x1280x57344 924 -> 959) where 128 x 192's
# were faster at 12 of 16 by 0.8-8.5% (2611x4096x57344 1117 -> 1211, 2067x14336x24576 1126 -> 1188), 3 within 0.5%,
# one slower (1940x3072x57344 1234 -> 1200; s33 log section 7)
FP8_STREAMK_BN = 192
SWAP_STAGES = 8
# split-K (16-bit, unswapped, K-major, one CTA per slice): the 128 x 256 / 192 / 128 TMA-store tiles split into
# S = ⌊SMs / tiles⌋ k-slices that run together (``GemmConfig.splitk``) enter the cost model where S ≥ 2, a slice's
# k-tiles SPLITK_SLOWDOWN dearer than a data-parallel tile's, plus stream-K's partial-sum cost per extra slice. Fitted
# to bf16 640x1536x13824, 512x2048x16384, 768x1536x12288 (the data-parallel picks 435 / 471 / 397 TFLOP/s, split-K
# 530 / 573 / 510: few tiles, long K) and 1024x2048x14336, 640x3072x8192, where the data-parallel tiles stayed ahead
# (659 against 635, 575 against 551; docs/gpu-runs/2026-11-26-s20.log section 7).
SPLITK_SLOWDOWN = 1.3
# ... and from K = SPLITK_LONG_K a split-K candidate's whole cost (k-tiles and join) is SPLITK_LONG_K_SHARE of the
# above: a wave of narrow data-parallel tiles with such a long K waits on its loads (the one-wave 128 x 96 tiles at
# bf16 1024x1536x18432 spend ~20% of their consumers' stall samples on the full barrier; s22 log section 1). Scaled
# whole, the split widths keep their order among themselves (a lower slowdown alone moved 128 x 192 to 128 x 128
# picks that lost up to 17%: 544x1536x24576 512 -> 425). Of the 31 data-parallel -> split-K picks it changes among
# those measured old against new (s22 log section 3): 27 faster (+4% to +78%: 1056x1280x28672 344 -> 613,
# 152x8192x32768 248 -> 391, 1280x1024x28672 512 -> 596), 3 even, 1 slower (1504x1280x32768 636 -> 616).
# 16-bit from K = 10240: of 10 random picks the 16384 bound had left data-parallel at K = 10240-13824 (M 225-1377,
# N 1024-5120), 10 ran faster split (+3% to +38%: 753x2048x11008 439 -> 604 TFLOP/s, 433x2560x11008 372 -> 458,
# 929x1280x10240 402 -> 483); fp8 there lost 2 of 6 (753x1024x13824 799 -> 703; s29 log section 5) and keeps 16384
SPLITK_LONG_K = {16: 10240, 8: 16384}
SPLITK_LONG_K_SHARE = 0.8
# The split tiles by element width. fp8's 128 x 192 only: its loads, not its tensor cores, bound the narrower
# one-wave fp8 tiles (the 128 x 112 tile's TMA loads alone, no wgmma, take as long as its whole GEMM at e4m3
# 1024x1536x18432: s22 log section 4), and 128 x 192 moves a fifth fewer bytes per flop. Of 30 changed e4m3 picks
# measured old against new: 27 faster (+8% to +75%: 416x2048x16384 464 -> 811 TFLOP/s, 320x2048x24576 461 -> 802,
# 608x2048x57344 823 -> 1092, 1024x1536x18432 1023 -> 1146), 3 slower where the old 128 x 64 tiles filled their
# rows (640x1280x16384 832 -> 713, 480x1280x12288 510 -> 466, 512x2048x16384 991 -> 940). fp8's 128 x 256 spills
# (200 bytes a thread: 611-732 TFLOP/s) and 128 x 128 was slower (s20 section 7: 768x1536x12288 733 against 783).
SPLITK_WIDTHS = {16: (256, 192, 128), 8: (192,)}
# ... from K = SPLITK_MIN_K and M over one row tile: measured on changed picks (s20 section 8), split-K lost at K <=
# 6144 (128x6144x5120 273 -> 251, 384x1536x5120 308 -> 266) and at M = 128, where the narrow data-parallel tiles share
# A and stream B (128x7168x18432 343 -> 327), and gained up to 2.5x from K = 8192 on (320x2048x57344 240 -> 542).
# A split-K tile releases each stage once per consumer warpgroup (``release_per_warpgroup``): +1.7-4.8% at 8 of 8
# measured (128 x 128 and 128 x 192 at 640x1536x13824 ... 4096x4096x4096; s21 log section 8)
SPLITK_MIN_K = 8192
SPLITK_MIN_M = 129
# rule 3c: one row of 128-row tiles (SWAP_AB_MAX_M < M < SPLITK_MIN_M) splits its 128 x 64 tiles into k-slices where
# they number at most NARROW_SPLIT_MAX_SHARE of the SMs (two slices each at least). Measured against every split and
# stream-K form at hand (bench_gemm --sweep, interleaved; s29 log section 4), the narrow split won 13 of 14 (dtype,
# shape) and tied the 14th: bf16 101x1024x24576 166 TFLOP/s against 121 for the pick (swapped split h128x104s6tzxT), 145
# stream-K on every SM, 136 split 128 x 128; against that swapped split elsewhere 100x2048x24576 209 / 190,
# 80x1536x16384 133 / 110, 72x2048x32768 149 / 149 (split 128 x 128 151); e4m3 101x1024x24576 269 against 126 for the
# pick (data-parallel h128x64s8k4t: 16 CTAs), 100x2048x24576 355 / 223, 120x1024x12288 197 / 124, 72x2048x32768 266 /
# 154
# 154
NARROW_SPLIT_MAX_SHARE = 0.5
# ... but in fewer than this many slices it yields to a swapped pick of the rules after it: at 2-3 slices (43-66
# tiles: N 2560-4096) those swapped tiles were faster at 17 of 18, even at one (H200, s42 log sections 8-9: bf16 102x3072x57344
# 232 -> 337 TFLOP/s, 91x3072x28672 190 -> 264, 92x3584x8192 161 -> 216; e4m3 101x4096x16384 423 -> 535,
# 77x3584x11008 230 -> 384), where an unswapped data-parallel 128 x 64 pick (M 122-128) was 17-28% slower than the
# narrow split (bf16 123x4096x24576 386 -> 308)
NARROW_SPLIT_SWAPPED_MIN_SLICES = 4
# ... and in a second sample of 17 shapes (M 65-128, N 1024-4096, K 8192-57344; s29 log section 4) against the picks
# then: fp8 17 of 17 faster (x1.02-2.9: 100x1024x57344 132 -> 383, 120x2560x16384 325 -> 481), its stages released
# once per CTA (h128x64s8k4tz: 0-26% ahead of releasing per warpgroup); 16-bit 11 of 17 faster (x1.04-1.41:
# 128x2048x8192 135 -> 191, 96x1536x10240 88 -> 120), 3 even, 3 slower where M < NARROW_SPLIT_MIN_M_16BIT and rule 7's
# swapped split, whose tile pads M to a multiple of 8 rather than 128, had fewer slices (65x4096x8192 127 -> 119,
# 76x3072x18432 171 -> 148, 75x2560x18432 155 -> 141). Under that M the 16-bit split is taken only from
# NARROW_SPLIT_MIN_SLICES_16BIT slices, where the swapped tiles would be split twice as many ways (72x1024x20480 89 ->
# 107, 69x1024x28672 99 -> 115)
NARROW_SPLIT_MIN_M_16BIT = 88
NARROW_SPLIT_MIN_SLICES_16BIT = 8
# ... and for the swapped mid-M tiles of a 16-bit problem (``_swapped_mid``), from K = SPLITK_MIN_K where the
# kernel's tiles take at least SWAP_SPLITK_MIN_SLICES k-slices: such few tiles stream the weights (B) through too few
# SMs (bf16 96x4096x14336: 32 tiles, 174 TFLOP/s data-parallel, 213 in 4 slices; 80x5120x13824: 40 tiles, 165 ->
# 188 in 3); at 2 slices it lost (96x7168x8192: 223 -> 219; docs/gpu-runs/2026-11-26-s21.log section 6). Up to
# M = 192 at first (8 of 8 changed picks faster, 192x4096x24576 412 -> 420 the least; widened below).
# fp8 takes it too (e4m3 72x5120x13824: 40 tiles, 283 -> 319 TFLOP/s in 3 slices; 72x5120x27648 313 -> 351), and
# both widths at 2 slices where each slice still has SWAP_SPLITK_TWO_SLICES_MIN_KTILES k-tiles: 6 of 6 such faster by
# 2-13% (bf16 96x6144x57344 238 -> 265, 80x8192x28672 217 -> 229; e4m3 80x6144x28672 387 -> 407), 4 of 4 with
# shorter slices slower by 2-4% (bf16 80x7168x10240 196 -> 191, e4m3 80x7168x18432 389 -> 380; s34 log section 3)
SWAP_SPLITK_MIN_SLICES = 3
SWAP_SPLITK_TWO_SLICES_MIN_KTILES = 112
# fp8 takes the one swapped tile of an M up to 96 (choose_config) only with at least SMs / this many tiles: it has no
# split-K, and 16 tiles lost (86x2048x4096 97 -> 85, 95x2048x16384 219 -> 147) where 40-64 gained 9-31% (s21 section 11)
SWAP_ONE_TILE_FP8_SHARE = 4
# ... and both widths take it for an M at most SWAP_ONE_TILE_PAST_ROW rows past one 128-row tile, from the same SMs / 4
# swapped tiles: the unswapped second row of tiles, nearly all padding, costs as much as the first (bf16 146x7168x5120
# 192 -> 267 TFLOP/s, 150x10240x4096 164 -> 332, 144x8192x6144 144 -> 308; e4m3 381 -> 472, 288 -> 579, 286 -> 514;
# s29 log section 6)
SWAP_ONE_TILE_PAST_ROW = 24
# ... and further past, up to SWAP_TWO_TILES_MAX_M rows, where two swapped tiles of ⌈M/2⌉ (rounded up to 8; under
# SWAP_MID_MIN_BN too) fit one wave and K is at least SWAP_TWO_TILES_MIN_K: those two, split into k-slices where they
# number at most half the SMs (as below), else data-parallel unless the cost model picks a split tile (a long K: one
# wave of data-parallel tiles waits on its loads). The unswapped tiles' second row, mostly padding, left the picks at
# 0.53-0.82 of cuBLAS. A first sweep (24 bf16 problems, M 160-224, N 2048-7168, K 2048-12288): the two tiles the best
# form or within 3% of it at 22 (bf16 160x4096x4096 151 -> 267 TFLOP/s, 184x5120x6144 219 -> 343, 200x4096x4096 221 ->
# 305; e4m3 160x7168x4096 373 -> 636, 200x4096x12288 467 -> 666). Then 28 random changed picks (M 153-232): 18 faster
# by 1-76% (bf16 161x2560x5120 114 -> 200, 164x8192x4096 254 -> 353; e4m3 199x1024x18432 261 -> 377, 161x6144x8192
# 371 -> 526); the slower ones set the bounds: M 225-232 (12% padding or less; 232x8192x7168 510 -> 479,
# 225x2048x2048 100 -> 94), a long-K split pick (210x6144x11008 440 -> 380 data-parallel) and fp8 K <= 2048 (0.5-2.3%
# slower at 5 of 5). docs/gpu-runs/2026-11-27-s30.log sections 1-2
SWAP_TWO_TILES_MAX_M = 216
SWAP_TWO_TILES_MIN_K = {16: 0, 8: 3072}
# The one tile of an M just past 128 (and the two above) split into k-slices where the tiles hold at most half the
# SMs, from K = SWAP_PAST_ROW_SPLIT_MIN_K and at least SWAP_PAST_ROW_MIN_SLICE_KTILES k-tiles a slice; where the
# slices would be shorter, neither form (the picks before the rule). One swapped tile data-parallel starves on a long
# K (bf16 145x6144x28672: 48 CTAs, 279 TFLOP/s; 376 split in 2 slices, cuBLAS 371). Of 24 random changed picks (M
# 129-152) 21 faster by 3-103% (bf16 136x3584x5120 118 -> 239, 141x3072x6144 110 -> 197, 151x6144x14336 283 -> 354;
# e4m3 152x5120x16384 460 -> 623, 146x7168x24576 588 -> 699); the 3 slower had 3-4 k-tiles a slice (e4m3
# 152x2048x3072 141 -> 86, 146x1024x7168 124 -> 83, bf16 130x1024x4096 57 -> 46) and keep their old picks.
# docs/gpu-runs/2026-11-27-s30.log section 3
SWAP_PAST_ROW_SPLIT_MIN_K = 3072
SWAP_PAST_ROW_MIN_SLICE_KTILES = 8
# ... and a swapped split pick of one tile column (M up to 152) in two of half its width, rastered by rule 9, where
# they keep at least this share of its CTAs at work (tiles x slices): each CTA's wgmma work per k-tile halves, and so
# do the partial sums the join adds up, while the two column tiles of a weight tile are read together (the second from
# L2). H200, s42 log section 4: of 20 sampled one-tile split picks of M 101-187, the 14 that keep the CTAs 13 faster by
# 1-34% (bf16 146x1536x18432 264 -> 308 TFLOP/s, 137x4096x5120 234 -> 257, 150x2560x16384 334 -> 356; e4m3
# 147x7168x4096 448 -> 579), one 1.5% slower; of the 6 with fewer CTAs at work 4 were 25-30% slower (bf16
# 135x5120x28672 442 -> 333); of 16 fresh changed picks of M 129-152, 15 faster by up to 27%, one 1.1% slower (section 5)
SWAP_HALVES_MIN_UNITS = 0.9
# ... within one 128-row tile (M 65-128) only from this many k-slices of the pick: at 2-3 the halves gained at most 1%
# or lost up to 4% (bf16 97x6144x14336 303 -> 290); from 4 faster at 5 of 5 by 1-33% (bf16 78x1536x10240 110 -> 146,
# 87x2048x8192 118 -> 140; section 7)
SWAP_HALVES_MIN_SLICES = 4
# a mid-M swapped stream-K pick of 1-2 waves of tiles takes the widest swapped width whose data-parallel tiles fill one
# wave to at least this share: the stream-K pick's shared last wave and its joins cost more than the wider tile's
# lower k-tile rate (the cost model rates them the other way: bf16 580x5120x57344 h128x200 732 against 706 for the
# pick h128x152s4g1tskxT, measured 619 against 551 TFLOP/s). H200, s42 log section 6: of 16 sampled such picks 15
# faster by 3-17% (bf16 775x4096x57344 567 -> 665, 709x4096x57344 547 -> 637, 1070x2560x57344 570 -> 639; e4m3
# 1053x2560x57344 1057 -> 1237), one level
SWAP_ONE_WAVE_MIN_FILL = 0.85
# ... and two tiles split so for M just past two 128-row tiles, up to SWAP_PAST_ROW_SPLIT_MAX_M (split only): bf16
# 274x2048x12288 two 144-wide tiles split 405 TFLOP/s against 347 for the pick then (h128x192s4t3ez). Of 21 random
# changed picks of M 217-280, the 15 over 256 rows all faster, by 1-96% (e4m3 266x2560x13824 368 -> 722, bf16
# 257x1536x18432 286 -> 354, 278x3072x11008 361 -> 417); of the 6 at 217-232 rows 3 slower by 2-7% (227x1024x11008 222
# -> 206): not taken there (docs/gpu-runs/2026-11-27-s30.log sections 5, 7)
SWAP_PAST_ROW_SPLIT_MAX_M = 280
# The swapped split-K candidates reach M = SWAP_SPLITK_MAX_M: an M of 2-6 row tiles with a long K took the unswapped
# split tiles, whose last row of 128-row tiles pads M by up to a half (bf16 388x1024x57344: 4 row tiles for 388 rows,
# 446 TFLOP/s; two 200-wide swapped tiles split 532, cuBLAS 585). Of 30 random changed picks (M 209-667, K 8192-57344)
# 28 faster by 1-25%, two within 1% (bf16 geomean x1.105: 223x8192x28672 540 -> 608, 420x2048x57344 532 -> 623;
# e4m3 x1.124: 291x1280x18432 519 -> 647, 224x1536x28672 583 -> 683); the cost model keeps the unswapped split where
# M has no padding (256x1024x28672) and at 402x3072x57344 (560 against 522 swapped). docs/gpu-runs/2026-11-28-s39.log
# sections 3-4
SWAP_SPLITK_MAX_M = 672
# the wgmma groups a consumer leaves in flight at each k-tile's wait, by (operand bits, BN), for a data-parallel tile
# without overlap (the overlapped epilogue needs 1): the 16-bit 128 x 128 tile waits for each group (s15 section 7:
# +2-6% at 14 problems of M = 256-1024, bf16 and f16, e.g. 512x4096x4096 580 against 555 TFLOP/s; other widths within
# ±1%, fp8 -5 to -14%)
DATA_PARALLEL_PENDING = {(16, 128): 0}
# rule 1: a swapped problem of fewer tiles than a third of the SMs shares its k-tiles over every SM; from a third on,
# its tiles' loads already keep DRAM busy and data-parallel is faster (bf16 and e4m3, 2026-11-26 s12 section 5)
SWAP_STREAMK_SHARE = 3
# ... and past one wave, a decode GEMM whose tiles use under 80% of its waves' SMs (the last wave short: 144 tiles on
# 132 SMs use 55%, 192 use 73%) shares that wave's k-tiles over every SM (stream-K from the default saving): its short
# last wave ran with too few SMs' loads in flight to keep DRAM busy. H200, interleaved, data-parallel -> stream-K:
# bf16 47x18432x57344 163 -> 193 TFLOP/s, 31x18432x14336 112 -> 123, 21x24576x3072 65 -> 72; e4m3 31x18432x14336
# 207 -> 224, 24x24576x28672 183 -> 198; at 224 and 448 tiles (85%) level or slower (e4m3 22x28672x14336 177 -> 172;
# docs/gpu-runs/2026-11-28-s41.log sections 2-4); with at least 48 k-tiles: under that the shared wave's partial sums
# cost more than they save (e4m3 30x24576x2048, 16 k-tiles, 172 -> 157; 25x18432x5120, 40 k-tiles, 144 -> 137)
SWAP_STREAMK_MAX_WAVE_USE = 0.8
SWAP_STREAMK_MIN_KTILES = 48
# ... and with at least 7 k-tiles of the shared wave per SM: at 144 tiles on 132 SMs each of the 12 last tiles is cut
# into 11 pieces, whose joins cost more than 5-6 k-tiles a piece save (bf16 37x18432x4096 113 -> 107, 19x18432x3456
# 60 -> 58; from 7.3 a piece faster: e4m3 22x18432x10240 141 -> 148, 54x18432x11136 323 -> 352; s41 section 10)
SWAP_STREAMK_MIN_SHARED_KTILES = 7
# ... but just past one wave (at most 1.15 waves of 128-row tiles, K-major, no bias) one wave of 256-row tiles, each
# SM streaming twice the rows: at 144 tiles on 132 SMs faster than both forms at 12 of 14 problems (bf16
# 37x18432x4096 113 / 107 -> 128 TFLOP/s, e4m3 54x18432x11136 323 / 352 -> 379, 60x18432x11008 365 / 395 -> 422); at
# 160 tiles level or slower than stream-K (bf16 26x20480x14336 106 -> 100; s41 sections 2-4 and 10)
SWAP_TALL_DECODE_MAX_WAVES = 1.15
SWAP_TALL_DECODE_MAX_STAGES = 6   # as deep as (256 + BN) x 128-byte stages fit: BN 16-40 take 6, 48-64 5
# the swapped kernel's N (the problem's M) past 32 rows: M rounded up to this step, not to 64. A decode GEMM at
# M = 33-56 issued up to twice the wgmma work its rows need, a cost its few CTAs' DRAM stream does not hide (H200,
# interleaved, BN 64 -> M rounded up to 8: bf16 7 of 7 sampled faster, 33x6144x18432 100 -> 116 TFLOP/s,
# 37x1280x18432 60 -> 67; of 22 fresh changed picks 20 faster or level, 43x2048x12288 84 -> 81 the most slower; e4m3
# 15 of 22 faster, 5 level, 2 slower by 1.3-2.5%: 42x9216x3584 182 -> 202, 56x3584x14336 219 -> 240;
# docs/gpu-runs/2026-11-28-s42.log sections 2-3)
SWAP_BN_STEP = 8
NARROW_BN = 64   # the 128 x 64 tile: twice the tiles of 128 x 128 where those leave SMs idle
WIDE_THIRDS_BN = 192   # the 16-bit 128 x 192 tile (TMA store in thirds): waves of 128 x 256 and 128 x 128 fit badly
# fp8 (per-tensor scales) where the model picks the 128 x 112 tile and M spans one 256-row tile at least 3/4 full
# with K of at least FP8_TALL_MIN_K: 256 x 112 tiles (each consumer warpgroup's 128 rows in two 64-row wgmma blocks; a
# chunk and a total of 2 x 56 registers each), 3 stages, the TMA store — the same column tiles in half the CTAs, each
# B tile read by one CTA instead of two: e4m3 256x14336x14336 1018 against 943 TFLOP/s, 256x28672x28672 1071 against
# 990, 256x13824x8192 945 against 894, 256x28672x8192 1000 against 964, 224x14336x8192 845 against 832; at K = 6144
# it lost (927 against 950, 952 against 959). docs/gpu-runs/2026-11-26-s20.log sections 1 and 5. Wider 256-row fp8
# tiles spill (256 x 128: 152 bytes).
FP8_TALL = GemmConfig("e4m3", bm=256, bn=112, stages=3, epilogue="tma", promote=4)
FP8_TALL_ROWS = (192, 256)   # M in (192, 256]
# fp8's 128 x 224 tile (3 stages, TMA store) replaces a data-parallel cost-model pick where its tiles use at least
# FP8_WIDE_FILL_MIN_USE of their waves' SMs and FP8_WIDE_FILL_MIN_GAIN more than the pick's, M spanning at least
# FP8_WIDE_FILL_MIN_ROW_TILES tiles. H200, of 18 random problems so drawn (M 468-10677) 17 faster by 0.1-6.1%, one
# 0.2% slower, geomean +2.5% (e4m3 987x7168x6144 1114 -> 1154 TFLOP/s, 1181x2560x2112 638 -> 677); of 20 fresh
# changed picks 18 faster by up to 19% (1235x2560x3584 817 -> 973, 1751x6144x5120 1102 -> 1135), 2 slower by 1.3%
# and 2.2%, geomean +3.0% (docs/gpu-runs/2026-11-28-s41.log sections 6-7). At two row tiles it lost (256x14336x4096
# 876 against 940, s19 section 1), hence the row bound; it is not a cost-model candidate, whose waves would take it
# elsewhere.
FP8_WIDE_FILL = GemmConfig("e4m3", bn=224, stages=3, epilogue="tma", promote=4)
FP8_WIDE_FILL_MIN_USE = 0.9
FP8_WIDE_FILL_MIN_GAIN = 0.05
FP8_WIDE_FILL_MIN_ROW_TILES = 4
# rule 8: 192-row tiles whose two consumer warpgroups split the columns (each all 192 rows × BN/2: cuBLAS's "coopB"
# 192 x 176 / 192 x 192 / 192 x 208 at 2046x2112x12288, 2199x2112x57344, 2437x16384x6144), 16-bit, costed as the
# 128-row tile of their BN (EFFICIENCY) times 192/128. Where their tiles fill one wave that the 128-row
# tiles quantize badly they lead (bf16, TFLOP/s against the pick: 2112x1920x8192 192 x 160 710 against 564, 2112x
# 1536x8192 192 x 128 696 / 544, 2112x2112x8192 192 x 176 670 / 584, 2112x1728x8192 192 x 144 668 / 611; the
# widths 96 and 112 even); in two waves they lost (4224x2112x4096 192 x 176 609 against 668), fp8's (192 x 64-96, 2 x
# 72 values at most) lost 4-28% at 3 of 4 shapes, and with K = 57344 one wave of them ran at 0.55 of cuBLAS (0.54 in
# clusters of 2 sharing A; at K = 16384 and 24576 0.96-0.98, ahead of the pick). Of 20 random changed picks 14 faster
# by 1-22% (2880x1024x13824 527 -> 642 TFLOP/s, 1174x2560x8192 472 -> 559, 2099x1536x2560 459 -> 529, 2097x2112x14336
# 619 -> 666), the 6 others at K <= 3072, where the epilogue (C staged in row blocks in turn, not overlapped) is a
# larger share: 3 even at K = 2112, 3 slower (1328x2560x1024 321 -> 265, 2060x2112x2048 506 -> 452, 1190x2560x3072
# 517 -> 497): from K = COLUMN_SPLIT_MIN_K to COLUMN_SPLIT_MAX_K only (docs/gpu-runs/2026-11-27-s31.log sections 2-4).
# Both the short-K and the two-wave losses were the staged C's 8-column TMA boxes of 16-byte rows (192 x 144 and
# 192 x 176); stored in full-width rows (epilogue.staged_c_swizzle's ROW) the tiles run level with the 128-row ones
# over several waves (4224x2112x4096 646 against 645), and the rule takes them over any number of waves from K = 2048:
# of 44 random changed picks 34 faster by 1-26%, 2 even, 8 slower by 0.6-3.5% at K 2048-3072, where 14 were faster
# (docs/gpu-runs/2026-11-27-s32.log section 4)
COLUMN_SPLIT_BM = 192
COLUMN_SPLIT_WIDTHS = {16: (96, 112, 128, 144, 160, 176), 8: ()}
COLUMN_SPLIT_STAGES = 4
COLUMN_SPLIT_MIN_K = 2048
COLUMN_SPLIT_MAX_K = 24576
# ... and against rule 7's swapped tiles a column-split pick's cost counts this much more. A fresh sample of 28 changed
# picks (docs/gpu-runs/2026-11-27-s31.log section 4): from M = 512, 16 of 16 faster by 4-29% (2371x1280x12288 501 ->
# 649 TFLOP/s, 2486x1280x4096 509 -> 638, 1863x2112x5120 486 -> 569); under it, where the column-split tile replaced
# the unswapped 128-row tiles or swapped stream-K, 8 of 8 faster by 4-11% (179x11008x12288 370 -> 411, 179x18432x8192
# 428 -> 455), where it replaced a swapped data-parallel tile 4 slower by 2-5% (178x13824x5120 411 -> 389,
# 187x16384x10240 499 -> 480); in a third sample of 23 (section 5) 19 faster by 3-33% (153x18432x4096 268 -> 355,
# 2364x1280x13824 494 -> 648, 1879x2112x10240 485 -> 621), 3 within 0.7%, and 192x14336x14336 over the swapped 128 x
# 192 501 -> 478. The margin gives those 5 back to the swapped tiles and no other (1.08 would give back M 334-348,
# 4-5% faster column-split)
COLUMN_SPLIT_SWAPPED_MARGIN = 1.06
# rule 9: swapped picks of two or more tile columns raster along the columns (consecutive CTAs share a weight tile):
# of 24 random swapped picks (M 158-1456, bf16 and e4m3, s36 log section 9) 17 faster by 0.4-18% (bf16 158x7168x2048
# 250 -> 296 TFLOP/s, 208x4096x7168 364 -> 388; e4m3 347x4096x7168 852 -> 889), 4 within 0.3%, 3 slower by 0.9-2.3%
# (bf16 563x128256x8192 656 -> 641, e4m3 318x16384x16384 1106 -> 1086), geomean x1.021; a second sample of 20 (section
# 10) x1.015: 12 faster by up to 13% (bf16 199x4096x7168 330 -> 374), 4 even, 4 slower by 0.4-6.5%
SWAPPED_GROUP = 1
# ... while a wave of CTAs still holds whole kernel rows of at most this many tile columns (the swapped picks have at
# most 11): rastered along 27 column tiles, unswapped e4m3 7011x5120x27648 fell from 1288 to 965 TFLOP/s, each wave
# streaming all of B again (s36 log section 11)
SWAPPED_GROUP_MAX_COLUMNS = 16
# ... and those of at least this many columns (the widths whose shared memory holds 5 stages) run this many stages,
# split-K ones too (rastered split picks at 136-160 columns, 4 stages against 5: 9 of 9 faster by 1.6-8%, bf16
# 603x1280x57344 557 -> 602 TFLOP/s, 300x3584x28672 506 -> 540, e4m3 289x3584x57344 965 -> 1037; one-column ones,
# which rule 9 leaves unrastered, level in 4 and 5: H200, s40 log section 11; then 26 fresh changed picks, 22 faster
# by up to 7%, 4 slower by 1-2.6%: section 12). H200, s38 log sections 5-6: 4 stages against the 5 of swapped_mid_tile were faster at 52 of 53
# rastered picks, by 2-14% (bf16 460x28672x8192 589 -> 646 TFLOP/s, 1094x2048x9216 564 -> 620, 1201x28672x28672 602
# -> 686; e4m3 930x14336x14336 1167 -> 1234, 450x14336x12288 1083 -> 1176), even at the other; split-K picks (4 of 5)
# and one-column picks (M <= BN, 2 of 4) ran up to 3% faster with 5 (131x11008x7168 391 against 380). The narrower
# rastered tiles keep their 6: against 4 stages 6 of 11 were faster by 1-9% (162x7168x12288 438 against 402), 5 slower
SWAP_RASTERED_STAGES = 4
SWAP_RASTERED_FOUR_STAGES_MIN_BN = 136
# ... and the swapped candidates it rasters enter the cost model without SWAP_MID_SLOWDOWN (as dear per k-tile as the
# unswapped ones) from this many columns, keyed by (element bits, stream-K): fp8's data-parallel ones at any width.
# Of 54 shapes whose pick that changes (two samples, s37 log sections 2-3) the 16-bit ones of 160-240 columns went
# x1.044 and x1.035 in geomean (693x152064x3584 645 -> 707 TFLOP/s), 2-4% down at worst, while the 16-bit 80-152-column
# ones lost up to 36% where N is small (305x1536x7168 299 -> 191); fp8's data-parallel ones under 160 columns went
# x1.032 (201x128256x4096 809 -> 906, 208x28672x8192 801 -> 875; 2% down at worst), its stream-K ones under 160 lost
# up to 11% (582x128256x4096 h128x152 stream-K 1091 -> 973; section 5). Those were 5-stage tiles at 136-152 columns;
# in 4 (SWAP_RASTERED_STAGES) they run at full speed from 136 columns too: of 24 sampled problems whose pick that
# changes (H200, s38 log section 7) 21 faster by 0.5-15% (bf16 296x9216x10240 491 -> 566 TFLOP/s, 816x11008x5120 615
# -> 662; e4m3 402x6144x24576 994 -> 1097), 3 slower by 0.3-1.4%
SWAP_RASTERED_FULL_SPEED_MIN_BN = {(16, False): SWAP_RASTERED_FOUR_STAGES_MIN_BN,
                                   (16, True): SWAP_RASTERED_FOUR_STAGES_MIN_BN,
                                   (8, False): 0, (8, True): SWAP_RASTERED_FOUR_STAGES_MIN_BN}
# Rule 7's 16-bit swapped tiles of SWAP_TALL_MIN_BN to SWAP_TALL_MAX_BN columns over two or more tile columns, under
# SWAP_MID_LARGE_M rows, also come 256 rows tall (each weight tile feeds both consumer warpgroups: a k-tile reads half
# the tokens per flop of the 128-row tiles), data-parallel, in SWAP_TALL_STAGES stages with C staged transposed in
# column blocks. The cost model rates them as the 128-row tile that reads as many bytes per flop (``effective_width``).
# At a full wave they ran 1.09-1.12x the 128-row tiles of their width (bf16 428x11008x13824 256 x 144 663 TFLOP/s
# against 128 x 144's 590, 553x8192x8192 626 against 565-576; s37 log sections 7-8). 256 x 160 lost 0.9-5.1% to 128 x
# 184-256 picks at 10 of 14 problems (sections 9-10); 256 x 184 ran at 466 against 620 for 256 x 152 at 584x8192x8192
# (too few registers, it seems); from M = 1024 they lost 4-7% to the large-M rule's 128 x 184 at 3 of 7 problems
# (sections 9-11)
# rule 10: one wave of small tiles with a deep pipeline. A problem whose whole C fits one wave of 128 x 64-96 or
# 64 x 96-160 tiles (each consumer warpgroup a 64 x BN/2 half: ``warpgroups_along = "n"``) filling at least
# DEEP_MIN_FILL of the SMs takes that tile with DEEP_STAGES stages and the direct epilogue (no staged C: the shared
# memory is all pipeline), swapped or not, where K is DEEP_MIN_K to DEEP_MAX_K and M at least DEEP_MIN_M, unless the
# rules before picked a swapped split-K tile. Such a wave of narrow tiles has little wgmma work per k-tile, so it
# runs at the pace its stages keep loads in flight (bf16 1202x1024x14336, 128 x 80 swapped: 5-7 stages 511-532
# TFLOP/s, 8 stages 571; H200, s40 log sections 2-4; the stage division is not why: a real division at 8 stages cost
# 10%, but the multiply-shift one of 5-7 stages made cheaper changed nothing, section 10). Of 28 random one-wave
# problems (s40 log section 5) the deep tile beat 19 picks by 4-39% (bf16 1053x1024x8192 399 -> 553, 1124x1024x16384
# 473 -> 605, 781x1536x8192 422 -> 545; e4m3 409x2560x18432 760 -> 919, 1092x1024x24576 842 -> 993), tied 3 and lost
# to 7 swapped split-K picks (e4m3 316x2048x28672 901 against 697) and to fp8's unswapped split at K = 57344 (e4m3
# 763x1280x57344 1106 against 979). Among the tiles that fit, the smallest per CTA, then the 64-row one, then swapped:
# at equal area the 64-row tiles ran 0-6% ahead (e4m3 1092x1024x24576 993 against 935), the swapped ones 1-30%
# (e4m3 527x1280x16384 737 against 514)
DEEP_STAGES = 8
# ... a 64-row tile whose warpgroups' wgmma N is under this (64 x 96, 64 x 112) only where it computes fewer MACs per
# CTA than the split-K pick's CTAs: at equal work the wider split tile was ahead (bf16 342x2112x16384 64 x 96 421
# TFLOP/s against 457 for h128x192s4t3ez; 483x1280x9216 407 against 420), with less the deep tile (bf16
# 659x1024x16384 470 against 403; e4m3 426x2112x18432 64 x 112 888 against 838; s40 log sections 5-6). A swapped
# data-parallel pick of the deep tile's own shape keeps its stages and TMA store (e4m3 324x4096x8192 h128x88s6g1k4txT
# 762 against 699 with 8 stages, 649x2048x13824 916 / 912); a swapped deep tile rasters by rule 9 (bf16 781x1536x8192
# 128 x 72: 575 TFLOP/s in raster groups of 1, 553 in groups of 8)
DEEP_NARROW_WGMMA_N = 64
DEEP_WIDTHS = {128: (64, 72, 80, 88, 96), 64: (96, 112, 128, 144, 160)}
DEEP_MIN_FILL = 0.85
# ... K from DEEP_MIN_K (first measured from 8192; from 2048 on, 17 of 19 changed picks at K 1024-7168 faster by
# 1-58%, bf16 343x2112x7168 286 -> 451, e4m3 453x2048x4096 430 -> 476; slower at K = 1536: bf16 344x3584x1536 247 ->
# 237, 349x3584x1536 222 -> 219; s40 log section 8) up to DEEP_MAX_K by element width: 16-bit any (bf16
# 779x1280x36864 464 -> 605, 391x3072x57344 493 -> 599), fp8 32768 (its unswapped split stays ahead at K = 57344:
# e4m3 763x1280x57344 1106 against 979, 502x2048x57344 1137 against 995)
DEEP_MIN_K = 2048
DEEP_MAX_K = {16: None, 8: 32768}
DEEP_MIN_M = 256
SWAP_TALL_MIN_BN = 112
SWAP_TALL_MAX_BN = 144
SWAP_TALL_STAGES = 4
FP8_TALL_MIN_K = 8192


def _candidates(dtype: str, tma_store: bool, bias: bool) -> list:
    """The unswapped configurations of rule 2, data-parallel, without overlap (rules 3 and 4 add those)."""
    base = dict(dtype=dtype, bias=bias)
    if dtype in ("e4m3", "e5m2"):
        if tma_store:
            return [GemmConfig(bn=192, promote=4, epilogue="tma", **base),
                    GemmConfig(bn=128, promote=4, epilogue="tma", **base),
                    GemmConfig(bn=64, stages=8, promote=4, epilogue="tma", **base)] + [
                GemmConfig(bn=bn, stages=stages, promote=4, epilogue="tma", **base)
                for bn, stages in WAVE_FILLING[8].items()]
        return [GemmConfig(bn=128, cluster=2, promote=4, epilogue="rows", **base)]
    if tma_store:
        return [GemmConfig(bn=256, epilogue="tma", epilogue_split=2, **base),
                GemmConfig(bn=192, epilogue="tma", epilogue_split=3, **base),
                GemmConfig(bn=128, stages=6, epilogue="tma", **base),
                GemmConfig(bn=64, stages=8, epilogue="tma", **base)] + [
            _staged_in_fewest_blocks(GemmConfig(bn=bn, stages=stages, epilogue="tma", **base))
            for bn, stages in WAVE_FILLING[16].items()]
    return [GemmConfig(bn=192, cluster=2, epilogue="rows", epilogue_split=3, **base),
            GemmConfig(bn=128, stages=6, epilogue="rows", **base)]


def _staged_in_fewest_blocks(config: GemmConfig) -> GemmConfig:
    """``config`` with the TMA-store epilogue in the fewest column blocks (1 or 2) whose staged C fits shared memory
    beside its stages: the 16-bit 128 x 224 tile with 4 stages stages C in two blocks of 112 columns (``h128x224s4t2``;
    one block needs 237632 bytes). Post: unchanged where one block fits."""
    if config.smem_bytes() <= SMEM_BYTES:
        return config
    return config.replace(epilogue_split=2)


def _width(dtype: str) -> int:
    return 8 * ELEMENT_BYTES[dtype]


def _row_tiles(config: GemmConfig, m: int) -> int:
    """⌈m / BM⌉: the tile rows M spans; 384 rows of 128: 3."""
    return -(-m // config.bm)


def estimated_cost(config: GemmConfig, m: int, n: int, k: int, ctas: int) -> float:
    """The cost model of rule 2: the k-tiles on the critical path of an (m, n, k) problem on ``ctas`` CTAs, each
    weighted by its tile's time relative to the dtype's largest candidate, plus stream-K's partial sums where the
    kernel takes stream-K. E.g. 4096³ bf16 on 132 CTAs: 128 × 256 → 4 waves × 64 k-tiles = 256; 128 × 128 → 8 waves
    × 64 × 0.5/0.9 = 284.4."""
    width = _width(config.dtype)
    largest = max(bn for w, bn in EFFICIENCY if w == width)
    per_ktile = (config.bm / 128) * (config.bn / largest) / efficiency(width, effective_width(config))
    ktiles = -(-k // config.k_tile)
    clusters = max(ctas // config.cluster_ctas, 1)
    rows, columns = config.cluster_tile
    tiles = -(-m // rows) * -(-n // columns)
    step = clusters if config.streamk_every_sm else max(min(tiles, clusters), 1)
    if config.splitk:
        slices = splitk_slices(m, n, k, config, ctas)
        if slices > 1:   # one wave: the units are tiles · S ≤ ctas
            join = STREAMK_FIXUP * config.bn / 256 * (1 + STREAMK_FIXUP_PER_PIECE * max(slices - 2, 0))
            cost = -(-ktiles // slices) * per_ktile * SPLITK_SLOWDOWN + join
            return cost * SPLITK_LONG_K_SHARE if k >= SPLITK_LONG_K[width] else cost
    saved = streamk_ktiles_saved(m, n, k, config, ctas) if config.streamk else 0
    if config.streamk and saved and saved >= config.streamk_min_saving:
        longest = ktiles - saved
        pieces = -(-ktiles // max(longest, 1))
        fixup = STREAMK_FIXUP * config.bn / 256 * (1 + STREAMK_FIXUP_PER_PIECE * max(pieces - 2, 0))
        if width == 16 and STREAMK_FEW_ROW_TILES[0] <= _row_tiles(config, m) <= STREAMK_FEW_ROW_TILES[1]:
            per_ktile *= STREAMK_FEW_ROWS_SLOWDOWN
        shared = longest
        if not (config.swap_ab or config.streamk_every_sm):
            shared *= STREAMK_SHARED_SLOWDOWN.get(config.cluster_ctas, 1.0)
        return (tiles // step * ktiles + shared) * per_ktile + fixup
    return -(-tiles // step) * ktiles * per_ktile


def effective_width(config: GemmConfig) -> float:
    """The width whose ``EFFICIENCY`` rates a tile: its BN, or for a 256-row swapped tile (rule 7) the width of the
    128-row tile that reads as many operand bytes per flop, 1/BN + 1/256 = 1/W + 1/128: W = 256·BN/(256 − BN)
    (256 × 144 → 329.1, rated as the widest measured; 256 × 112 → 199.1). Post: ≥ BN."""
    if config.bm == 256 and config.swap_ab and config.bn < 256:
        return 256 * config.bn / (256 - config.bn)
    return config.bn


def efficiency(width: int, bn: int) -> float:
    """``EFFICIENCY`` of a ``width``-bit tile BN wide, linear between the measured widths around it (a width outside
    them: the nearest): ``efficiency(16, 152)`` = 0.935 (between 144's 0.92 and 160's 0.95)."""
    measured = sorted((b, e) for (w, b), e in EFFICIENCY.items() if w == width)
    if bn <= measured[0][0]:
        return measured[0][1]
    for (b0, e0), (b1, e1) in zip(measured, measured[1:]):
        if bn <= b1:
            return e0 + (e1 - e0) * (bn - b0) / (b1 - b0)
    return measured[-1][1]


def _swapped(m: int, n: int, k: int, dtype: str, a_major: str, b_major: str, bias: bool, out_dtype,
             sm_count: int, tall: bool = True) -> GemmConfig:
    """Rule 1: the kernel's M is n, its N is ``swapped_bn(m, dtype)``; its A is the problem's B; split-K (or
    stream-K on every SM) for fewer than ``sm_count / SWAP_STREAMK_SHARE`` tiles; just past one wave one wave of
    256-row tiles (``SWAP_TALL_DECODE_MAX_WAVES``); stream-K on every SM for a short last wave past the first
    (``SWAP_STREAMK_MAX_WAVE_USE``, ``SWAP_STREAMK_MIN_KTILES``, ``SWAP_STREAMK_MIN_SHARED_KTILES``); else
    data-parallel: e4m3 31×18432×14336 (144 tiles on 132 SMs) → ``h256x32s6k4x``, 24×24576×28672 (192) →
    ``h128x32s8k4skax``, 22×28672×14336 (224) → ``h128x32s8k4x``. ``tall=False``: no 256-row tiles."""
    bn = 64 if a_major == "MN" else swapped_bn(m, dtype)   # an MN-major kernel B is loaded in 64-column boxes
    fp8 = dtype in ("e4m3", "e5m2")
    config = GemmConfig(dtype=dtype, bn=bn, stages=SWAP_STAGES, a_major=b_major, b_major=a_major,
                        promote=4 if fp8 else 1, swap_ab=True, bias=bias, out_dtype=out_dtype)
    tiles = -(-n // 128)
    if tiles * SWAP_STREAMK_SHARE >= sm_count:
        ktiles = -(-k // config.k_tile)
        if tall and sm_count < tiles <= SWAP_TALL_DECODE_MAX_WAVES * sm_count and (a_major, b_major) == ("K", "K") \
                and not bias:
            return config.replace(bm=256, stages=SWAP_TALL_DECODE_MAX_STAGES).with_stages_that_fit()
        shared_per_sm = tiles % sm_count * ktiles / sm_count   # the last wave's k-tiles each SM takes
        if tiles > sm_count and wave_use(tiles, sm_count) < SWAP_STREAMK_MAX_WAVE_USE and \
                ktiles >= SWAP_STREAMK_MIN_KTILES and shared_per_sm >= SWAP_STREAMK_MIN_SHARED_KTILES:
            return config.replace(streamk=True, streamk_every_sm=True)
        return config
    if (a_major, b_major) == ("K", "K") and not bias:
        return config.replace(splitk=True)
    return swapped_streamk(config)


def swapped_bn(m: int, dtype: str) -> int:
    """Rule 1's tile width for an M of at most ``SWAP_AB_MAX_M`` rows (the swapped kernel's N): 16 up to 16 rows, 32
    up to 32, past that M rounded up to ``SWAP_BN_STEP``. ``swapped_bn(34, "bf16")`` = 40, ``swapped_bn(49, "e4m3")``
    = 56, ``swapped_bn(20, "bf16")`` = 32. Post: a multiple of 8 (wgmma's N step), ≥ m, ≤ 64."""
    if m <= 32:
        return 16 if m <= 16 else 32
    return -(-m // SWAP_BN_STEP) * SWAP_BN_STEP


def swapped_streamk(config: GemmConfig) -> GemmConfig:
    """Rule 1's stream-K form of a swapped small-M tile (its k-tiles shared out over every SM, from a saving of
    ``STREAMK_MIN_SAVING`` · BN/256 k-tiles): the pick where split-K is not built (an MN-major operand, a bias), and
    autotune's alternative to the split pick. ``swapped_streamk(h128x16s8zx).name`` = ``h128x16s8ska1x``."""
    return config.replace(splitk=False, streamk=True, streamk_every_sm=True,
                          streamk_min_saving=max(1, round(STREAMK_MIN_SAVING * config.bn / 256)))


def check_problem(op: str, m, n, k, sm_count) -> None:
    """A heuristic's problem: m, n, k ints ≥ 0 and ``sm_count`` an int ≥ 1 (bools are no counts), else TypeError /
    ValueError naming them: ``choose_config: m, n, k must be >= 0, not -1, 5, 5``. Post: the rules' arithmetic
    (waves, tiles per SM) is defined."""
    for name, value in (("m", m), ("n", n), ("k", k), ("sm_count", sm_count)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{op}: {name} must be an int, not {type(value).__name__} {value!r}")
    if min(m, n, k) < 0:
        raise ValueError(f"{op}: m, n, k must be >= 0, not {m}, {n}, {k}")
    if sm_count < 1:
        raise ValueError(f"{op}: sm_count must be ≥ 1 (the SMs the persistent grid fills), not {sm_count}")


def choose_config(m: int, n: int, k: int, dtype: str = "bf16", sm_count: int = H100_SMS, *, a_major: str = "K",
                  b_major: str = "K", bias: bool = False, out_dtype: str | None = None) -> GemmConfig:
    """The configuration for C (m, n) = A (m, k) · Bᵀ (B (n, k)) of ``dtype`` on ``sm_count`` SMs by the rules above
    (``a_major``/``b_major``: "K" for K-contiguous operands, "MN" for an A (k, m) / B (k, n) with m / n contiguous;
    ``bias``: the config adds one; ``out_dtype``: C's type, default the rule of ``GemmConfig``).
    ``choose_config(3001, 2999, 2016, "bf16").name`` = ``h128x192s4c2r3``. Post: deterministic; the config
    validates; its C store is one the output can take (TMA only for 16-byte aligned rows of a contiguous C)."""
    check_problem("choose_config", m, n, k, sm_count)
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"choose_config: dtype must be one of {', '.join(ELEMENT_BYTES)}, not {dtype!r}")
    out_dtype = out_dtype or ("bf16" if dtype in ("e4m3", "e5m2") else dtype)
    try:   # the output types GemmConfig allows for dtype
        GemmConfig(dtype=dtype, out_dtype=out_dtype).validate()
    except ValueError as error:
        raise ValueError(f"choose_config: {error}") from None
    narrow = narrow_split(m, n, k, dtype, out_dtype, a_major, b_major, bias, sm_count)
    rest = None
    if narrow is None or splitk_slices(m, n, k, narrow, sm_count) < NARROW_SPLIT_SWAPPED_MIN_SLICES:
        rest = choice_without_narrow_split(m, n, k, dtype, out_dtype, a_major, b_major, bias, sm_count)
    if narrow is not None and (rest is None or not rest.swap_ab):
        return narrow.validate()
    return rest


def choice_without_narrow_split(m: int, n: int, k: int, dtype: str = "bf16", out_dtype: str | None = None,
                                a_major: str = "K", b_major: str = "K", bias: bool = False,
                                sm_count: int = H100_SMS, column_split: bool = True,
                                deep: bool = True, wave_fills: bool = True) -> GemmConfig:
    """What ``choose_config`` picks by its rules after 3c (the cost model, the swapped mid-M tiles, rule 5) — its
    pick wherever rule 3c does not hold, and autotune's alternative to a rule-3c pick: ``choice_without_narrow_split(
    101, 1024, 24576).name`` = ``h128x56s6g1tzxT`` where ``choose_config`` gives ``h128x64s8tez``. ``column_split=False``:
    without rule 8's tiles (autotune's alternative to a rule-8 pick: ``h128x176s4g1tskxT`` at 2112x1920x8192, where
    the rule picks ``h192x160s4Ct3``). A swapped pick of two or more tile columns rasters by rule 9; rule 10's deep
    one-wave tile replaces the pick where it holds (``deep=False``: not — autotune's alternative to a rule-10 pick).
    ``wave_fills=False``: without rule 1's 256-row decode tiles, fp8's ``FP8_WIDE_FILL`` and rule 7's one-wave
    swapped tiles (autotune's alternative to those: ``h128x160s4k4t`` at e4m3 987x7168x6144, where the rule picks
    ``h128x224s3k4t``). Post: validates."""
    out_dtype = out_dtype or ("bf16" if dtype in ("e4m3", "e5m2") else dtype)
    pick = _choice_by_rules(m, n, k, dtype, out_dtype, a_major, b_major, bias, sm_count, column_split, wave_fills)
    pick = swapped_pipeline_stages(swapped_raster(pick, m)).validate()
    if not deep:
        return pick
    return deep_one_wave(pick, m, n, k, a_major, b_major, sm_count) or pick


def deep_one_wave(pick: GemmConfig, m: int, n: int, k: int, a_major: str = "K", b_major: str = "K",
                  sms: int = H100_SMS) -> GemmConfig | None:
    """Rule 10: the tile of one wave with ``DEEP_STAGES`` stages that replaces ``pick`` for C (m, n) = A·Bᵀ, or None
    where the rule does not hold. It holds for K-major operands, k ≥ ``DEEP_MIN_K`` (fp8: ≤ ``DEEP_MAX_K``), m ≥
    ``DEEP_MIN_M`` and a pick that is not a swapped split-K tile, where some tile of ``DEEP_WIDTHS`` — 128 rows (the
    two consumer warpgroups 64 rows each) or 64 rows (``warpgroups_along = "n"``: each warpgroup BN/2 columns) —
    covers C, as it is or swapped, in ``DEEP_MIN_FILL``·sms to sms tiles with 8 stages and the direct epilogue;
    of those the smallest per CTA (BM·BN), then the 64-row one, then the swapped one, rastered by rule 9. Not over
    a swapped data-parallel pick of the same tile, and a tile whose warpgroups' wgmma N is under
    ``DEEP_NARROW_WGMMA_N`` only with fewer MACs per CTA than a split-K pick's CTAs.
    ``deep_one_wave(h128x256s4t2ez, 1124, 1024, 16384)`` = ``h64x144s8Cg1x`` (16 × 8 tiles of the swapped problem);
    ``deep_one_wave(h128x176s4t, 4096, 4096, 16384)`` = None (no such tile covers C in one wave). Post: None or a
    config that validates, with the pick's dtype, out_dtype and bias."""
    most_k = DEEP_MAX_K[_width(pick.dtype)]
    if k < DEEP_MIN_K or most_k is not None and k > most_k or m < DEEP_MIN_M or (a_major, b_major) != ("K", "K") or \
            (pick.swap_ab and pick.splitk) or pick.scales != "tensor" or pick.grouped != "none":
        return None
    split_work = None
    if pick.splitk:   # the MACs one CTA of the split pick computes
        rows, columns = (n, m) if pick.swap_ab else (m, n)
        split_work = pick.bm * pick.bn * -(-k // splitk_slices(rows, columns, k, pick, sms))
    best, best_key = None, None
    for swap in (False, True):
        rows, columns = (n, m) if swap else (m, n)
        for bm, widths in DEEP_WIDTHS.items():
            for bn in widths:
                tiles = -(-rows // bm) * -(-columns // bn)
                if not DEEP_MIN_FILL * sms <= tiles <= sms:
                    continue
                config = GemmConfig(dtype=pick.dtype, bm=bm, bn=bn, stages=DEEP_STAGES, promote=pick.promote,
                                    warpgroups_along="n" if bm == 64 else "m", swap_ab=swap, bias=pick.bias,
                                    out_dtype=pick.out_dtype)
                try:
                    config.validate()
                except ValueError:
                    continue
                if config.columns < DEEP_NARROW_WGMMA_N and split_work is not None and \
                        bm * bn * k >= split_work:
                    continue
                key = (bm * bn, bm != 64, not swap)
                if best_key is None or key < best_key:
                    best, best_key = config, key
    if best is None or (pick.swap_ab and (best.swap_ab, best.bm, best.bn) == (True, pick.bm, pick.bn)):
        return None
    return swapped_raster(best, m).validate()


def swapped_raster(pick: GemmConfig, m: int) -> GemmConfig:
    """Rule 9: a swapped pick whose kernel spans 2 to ``SWAPPED_GROUP_MAX_COLUMNS`` tile columns (⌈m / BN⌉: the
    problem's M is the kernel's N) rasters its tiles along the columns first (``group = SWAPPED_GROUP``), so that
    consecutive CTAs take the tiles of one kernel row — one BM-row tile of the weights (the kernel's A), the larger
    operand — instead of one column tile of the tokens. ``swapped_raster(h128x80s6txT, 319)`` = ``h128x80s6g1txT``;
    unswapped picks, one-column swapped picks (m ≤ BN) and wider grids are returned unchanged. Post: the same tiles,
    stages and epilogue."""
    if pick.swap_ab and 2 <= -(-m // pick.bn) <= SWAPPED_GROUP_MAX_COLUMNS:
        return pick.replace(group=SWAPPED_GROUP)
    return pick


def swapped_pipeline_stages(config: GemmConfig) -> GemmConfig:
    """Rule 9's stages: a 128-row swapped tile that rule 9 rasters (``group = SWAPPED_GROUP``), split into k-slices
    or not, of at least ``SWAP_RASTERED_FOUR_STAGES_MIN_BN`` columns runs ``SWAP_RASTERED_STAGES`` stages.
    ``swapped_pipeline_stages(h128x152s5g1txT)`` = ``h128x152s4g1txT``, ``h128x136s5g1tzxT`` = ``h128x136s4g1tzxT``;
    ``h128x152s5txT`` (one column, not rastered) and ``h128x104s6g1txT`` (narrower) are returned unchanged. Post:
    the same tile and epilogue, at most its stages."""
    if config.swap_ab and config.bm == 128 and config.group == SWAPPED_GROUP and \
            config.bn >= SWAP_RASTERED_FOUR_STAGES_MIN_BN:
        return config.replace(stages=min(config.stages, SWAP_RASTERED_STAGES))
    return config


def swapped_slowdown(config: GemmConfig, m: int) -> float:
    """How much dearer rule 7 makes a swapped candidate's k-tiles than the cost model's unswapped ones for a problem of
    ``m`` rows: ``SWAP_MID_SLOWDOWN`` (16-bit 1.06, fp8 1.05), except 1.0 from ``SWAP_MID_LARGE_M`` rows and for a
    candidate rule 9 rasters (2 to ``SWAPPED_GROUP_MAX_COLUMNS`` tile columns) of at least
    ``SWAP_RASTERED_FULL_SPEED_MIN_BN`` columns (136; fp8's data-parallel ones any). bf16 h128x104s6txT at m = 602 →
    1.06, h128x152s5txT at m = 602 → 1.0; e4m3 h128x104s6k4txT at m = 201 → 1.0, h128x128s6k4tskxT at m = 582 →
    1.05. Post: 1.0 or ``SWAP_MID_SLOWDOWN``'s."""
    width = _width(config.dtype)
    if m >= SWAP_MID_LARGE_M:
        return 1.0
    least = SWAP_RASTERED_FULL_SPEED_MIN_BN[width, config.streamk]
    if 2 <= -(-m // config.bn) <= SWAPPED_GROUP_MAX_COLUMNS and config.bn >= least:
        return 1.0
    return SWAP_MID_SLOWDOWN[width]


def _choice_by_rules(m, n, k, dtype, out_dtype, a_major, b_major, bias, sm_count, column_split,
                     wave_fills: bool = True) -> GemmConfig:
    """``choice_without_narrow_split`` before rule 9."""
    if m <= SWAP_AB_MAX_M < n:
        return _swapped(m, n, k, dtype, a_major, b_major, bias, out_dtype, sm_count, wave_fills).validate()
    tma_store = n * ELEMENT_BYTES[out_dtype] % 16 == 0
    best, best_cost = _unswapped_pick(m, n, k, dtype, out_dtype, a_major, b_major, bias, sm_count, split_k=True,
                                      column_split=column_split)
    large_m = m >= SWAP_MID_LARGE_M
    min_padding = SWAP_MID_LARGE_M_MIN_PADDING if large_m else SWAP_MID_MIN_PADDING
    if tma_store and a_major == "K" and SWAP_AB_MAX_M < m <= SWAP_MID_MAX_M and \
            (large_m or n >= SWAP_MID_MIN_N_OVER_M * m) and \
            -(-m // 128) * 128 >= (1 + min_padding) * m:
        enough = -(-n // 128) >= sm_count // SWAP_ONE_TILE_FP8_SHARE
        one_past_row = 128 < m <= 128 + SWAP_ONE_TILE_PAST_ROW
        past_row = _past_row_swapped(m, n, k, dtype, bias, out_dtype, sm_count, b_major)
        if past_row is not None and (past_row.splitk or not one_past_row and not best.splitk):
            # one or two swapped tiles just past one (or two) 128-row tiles: split into k-slices where they hold at
            # most half the SMs; two past one also data-parallel unless the cost model picks a split tile (s30 log
            # sections 2, 3, 7)
            return (_split_in_halves(past_row, m, n, k, sm_count) or past_row).validate()
        if (m < SWAP_MID_MIN_BN if _width(dtype) == 16 else m <= SWAP_MID_MIN_BN and enough) or \
                (one_past_row and enough):
            # one swapped tile of M (16-bit under 96 rows, fp8 up to 96, both just past 128): it moves half the L2
            # bytes of the unswapped 128-row tiles (mostly padding) for the same weights, which the wave-based cost
            # model does not see (s21 log sections 9, 11; s29 section 6)
            one = min(_swapped_mid(m, n, k, dtype, bias, out_dtype, sm_count, b_major),
                      key=lambda config: estimated_cost(config, n, m, k, sm_count))
            return (_split_in_halves(one, m, n, k, sm_count) or one).validate()
        narrow_fill = best if best.fp8 and best.bn == FP8_NARROW_FILL_BN else None
        if narrow_fill is not None:   # the swapped tiles are weighed against the pick without it
            best, best_cost = _unswapped_pick(m, n, k, dtype, out_dtype, a_major, b_major, bias, sm_count,
                                              split_k=True, column_split=column_split, narrow_fill=False)
        if best.warpgroups_along == "n":
            best_cost *= COLUMN_SPLIT_SWAPPED_MARGIN
        for config in _swapped_mid(m, n, k, dtype, bias, out_dtype, sm_count, b_major):
            cost = estimated_cost(config, n, m, k, sm_count) * swapped_slowdown(config, m)
            if cost < best_cost - 1e-9:
                best, best_cost = config, cost
        if narrow_fill is not None and not best.swap_ab:
            best = narrow_fill
    if best.swap_ab:
        one_wave = _swapped_one_wave(best, m, n, sm_count) if wave_fills else None
        return (one_wave or _split_in_halves(best, m, n, k, sm_count) or best).validate()
    return _finished(best, m, n, k, sm_count, wave_fills)


def _swapped_one_wave(pick: GemmConfig, m: int, n: int, sms: int) -> GemmConfig | None:
    """Rule 7's one-wave tile: a mid-M swapped stream-K ``pick`` whose tiles span more than one wave but under two
    gives way to the widest of ``swapped_mid_widths`` whose data-parallel tiles fill one wave to at least
    ``SWAP_ONE_WAVE_MIN_FILL``, rastered and staged by rule 9; None where there is none.
    ``_swapped_one_wave(h128x160s4g1tskxT, 775, 4096, 132)`` = ``h128x200s4g1txT`` (160 tiles → 128). Post: a
    swapped data-parallel tile of at most ``sms`` tiles, or None."""
    if not (pick.swap_ab and pick.c_major == "M" and pick.streamk and pick.bm == 128):
        return None
    rows = -(-n // 128)
    if not sms < rows * -(-m // pick.bn) < 2 * sms:
        return None
    for bn in swapped_mid_widths(m, pick.dtype):
        if bn != pick.bn and SWAP_ONE_WAVE_MIN_FILL * sms <= rows * -(-m // bn) <= sms:
            tile = swapped_mid_tile(bn, pick.dtype, pick.bias, pick.out_dtype)
            if tile is not None:
                return swapped_pipeline_stages(swapped_raster(tile.replace(a_major=pick.a_major), m))
    return None


def narrow_split(m: int, n: int, k: int, dtype: str, out_dtype: str, a_major: str, b_major: str, bias: bool,
                 sms: int) -> GemmConfig | None:
    """Rule 3c's pick, or None where it does not hold: the 128 × 64 tile split into k-slices for one row of tiles
    (``SWAP_AB_MAX_M`` < m < ``SPLITK_MIN_M``) with K ≥ ``SPLITK_MIN_K`` whose ⌈n / 64⌉ tiles number at most
    ``NARROW_SPLIT_MAX_SHARE`` of the SMs, K-major operands, C rows TMA-storable, no bias; 16-bit under
    ``NARROW_SPLIT_MIN_M_16BIT`` rows only from ``NARROW_SPLIT_MIN_SLICES_16BIT`` slices. ``narrow_split(101, 1024,
    24576, "bf16", "bf16", "K", "K", False, 132).name`` = ``h128x64s8tez`` (16 tiles, 8 slices; stages released per
    warpgroup), e4m3 ``h128x64s8k4tz`` (released per CTA); at n = 8192 (128 tiles), k = 4096, or bf16 m = 75 with
    n = 2560 (40 tiles, 3 slices) → None. Post: a split-K config of BN = 64 with at least two k-slices per tile, or
    None."""
    if not SWAP_AB_MAX_M < m < SPLITK_MIN_M or k < SPLITK_MIN_K or (a_major, b_major) != ("K", "K") or bias or \
            n * ELEMENT_BYTES[out_dtype] % 16:
        return None
    tiles = -(-n // NARROW_BN)
    if tiles > NARROW_SPLIT_MAX_SHARE * sms:
        return None
    fp8 = _width(dtype) == 8
    if not fp8 and m < NARROW_SPLIT_MIN_M_16BIT and sms // tiles < NARROW_SPLIT_MIN_SLICES_16BIT:
        return None
    base = next(c for c in _candidates(dtype, True, False) if c.bn == NARROW_BN)
    return base.replace(out_dtype=out_dtype, splitk=True, release_per_warpgroup=not fp8)


def _finished(pick: GemmConfig, m: int, n: int, k: int, sms: int, wide_fill: bool = True) -> GemmConfig:
    """An unswapped cost-model pick as the op runs it: ``FP8_TALL`` or (``wide_fill``) ``FP8_WIDE_FILL`` where it
    replaces the pick, else the pick with rule 5's stages; validated."""
    if _fp8_tall(pick, m, n, k, sms):
        return FP8_TALL.replace(dtype=pick.dtype, out_dtype=pick.out_dtype, bias=pick.bias).validate()
    if wide_fill and _fp8_wide_fill(pick, m, n, sms):
        return FP8_WIDE_FILL.replace(dtype=pick.dtype, out_dtype=pick.out_dtype, bias=pick.bias).validate()
    return pick.replace(stages=pipeline_stages(pick, m, n, sms)).validate()


def _unswapped_pick(m, n, k, dtype, out_dtype, a_major, b_major, bias, sms, split_k: bool,
                    column_split: bool = True, narrow_fill: bool = True) -> tuple:
    """Rules 2-3b's and 8's cost model over the unswapped candidates: → (the cheapest config, its cost); ``split_k``:
    with rule 3b's split-K forms among them; ``column_split``: with rule 8's tiles; ``narrow_fill``: with fp8's
    ``FP8_NARROW_FILL_BN``-wide tile."""
    tma_store = n * ELEMENT_BYTES[out_dtype] % 16 == 0
    mn_major = (a_major, b_major) != ("K", "K")
    best, best_cost = None, None
    for base in _candidates(dtype, tma_store, bias):
        base = base.replace(out_dtype=out_dtype, a_major=a_major, b_major=b_major)
        if mn_major:
            base = base.replace(cluster=1)
            if b_major == "MN" and base.bn % 64:
                continue
        if base.bn in WAVE_FILLING[_width(dtype)] and _wave_fill_refused(base, m, n, sms):
            continue
        if not narrow_fill and base.fp8 and base.bn == FP8_NARROW_FILL_BN:
            continue
        for config in [*_variants(base, m, n, k, sms), *(_split_k(base, m, n, k, sms) if split_k else [])]:
            cost = estimated_cost(config, m, n, k, sms)
            if best_cost is None or cost < best_cost - 1e-9:
                best, best_cost = config, cost
    for config in column_split_tiles(n, k, dtype, out_dtype, a_major, b_major, bias) if column_split else ():
        cost = estimated_cost(config, m, n, k, sms)
        if cost < best_cost - 1e-9:
            best, best_cost = config, cost
    return best, best_cost


def column_split_tiles(n: int, k: int, dtype: str, out_dtype: str, a_major: str = "K", b_major: str = "K",
                       bias: bool = False) -> list:
    """Rule 8's candidates: the ``COLUMN_SPLIT_BM``-row tiles whose consumer warpgroups split the columns
    (``warpgroups_along = "n"``: each all 192 rows × BN/2), one of each of ``COLUMN_SPLIT_WIDTHS``, 4 stages, C staged
    in as few blocks as fit beside them (K-major operands, C rows TMA-storable, ``COLUMN_SPLIT_MIN_K`` ≤ K ≤
    ``COLUMN_SPLIT_MAX_K``), for C (M, n) = A·Bᵀ of depth k whatever M: the cost model weighs their waves.
    ``column_split_tiles(1920, 8192, "bf16", "bf16")`` includes ``h192x160s4Ct3``. Post: every entry validates; []
    where the rule does not apply."""
    widths = COLUMN_SPLIT_WIDTHS[_width(dtype)]
    if not widths or (a_major, b_major) != ("K", "K") or not COLUMN_SPLIT_MIN_K <= k <= COLUMN_SPLIT_MAX_K or \
            n * ELEMENT_BYTES[out_dtype] % 16:
        return []
    return [column_split_tile(bn, dtype, bias, out_dtype) for bn in widths]


def column_split_tile(bn: int, dtype: str, bias: bool = False, out_dtype: str | None = None) -> GemmConfig:
    """The ``COLUMN_SPLIT_BM`` × ``bn`` column-split tile of rule 8: ``COLUMN_SPLIT_STAGES`` stages, the TMA-store
    epilogue in the fewest blocks (whole, or each warpgroup's three 64-row blocks in turn) that fit shared memory
    beside them. ``column_split_tile(176, "bf16").name`` = ``h192x176s4Ct3``; ``column_split_tile(128, "bf16").name``
    = ``h192x128s4Ct``. Post: validates."""
    base = GemmConfig(dtype=dtype, bm=COLUMN_SPLIT_BM, bn=bn, stages=COLUMN_SPLIT_STAGES, epilogue="tma",
                      warpgroups_along="n", bias=bias, out_dtype=out_dtype)
    for split in (1, COLUMN_SPLIT_BM // 64):
        config = base.replace(epilogue_split=split)
        if config.smem_bytes() <= SMEM_BYTES:
            return config.validate()
    raise ValueError(f"column_split_tile: no staging of {base.name} fits {SMEM_BYTES} bytes of shared memory")


def unsplit_choice(m: int, n: int, k: int, dtype: str = "bf16", out_dtype: str | None = None, a_major: str = "K",
                   b_major: str = "K", bias: bool = False, sms: int = H100_SMS) -> GemmConfig:
    """The unswapped configuration rules 2-5 choose with no split-K candidate (what a split pick would otherwise have
    been: autotune's alternative to it). ``unsplit_choice(1024, 1536, 18432).name`` = ``h128x96s5t`` where
    ``choose_config`` gives ``h128x192s4t3ez``. Post: validates; never ``splitk``."""
    out_dtype = out_dtype or ("bf16" if dtype in ("e4m3", "e5m2") else dtype)
    best, _ = _unswapped_pick(m, n, k, dtype, out_dtype, a_major, b_major, bias, sms, split_k=False)
    return _finished(best, m, n, k, sms)


def wave_use(tiles: int, sms: int) -> float:
    """The share of the SMs ``tiles`` data-parallel tiles keep busy over their waves: tiles / (waves · sms); 144
    tiles on 132 SMs: 0.545, 126: 0.955. Post: in (0, 1] for tiles ≥ 1."""
    return tiles / (-(-tiles // sms) * sms)


def _fp8_wide_fill(pick: GemmConfig, m: int, n: int, sms: int) -> bool:
    """Whether ``FP8_WIDE_FILL`` (fp8 128 × 224) replaces the cost model's data-parallel ``pick`` (see its comment):
    K-major operands, a TMA store, M over at least ``FP8_WIDE_FILL_MIN_ROW_TILES`` row tiles, and the 224-wide tiles
    using ≥ ``FP8_WIDE_FILL_MIN_USE`` of their waves' SMs, ``FP8_WIDE_FILL_MIN_GAIN`` more than the pick's tiles.
    ``_fp8_wide_fill(h128x160s4k4t, 987, 7168, 132)`` → True (256 tiles using 0.97 of two waves, against 360
    using 0.91 of three); ``_fp8_wide_fill(h128x112s4k4t, 2587, 1280, 132)`` → False (126 tiles and 252 both use
    0.95)."""
    if not (pick.fp8 and pick.scales == "tensor" and pick.bm == 128 and pick.warpgroups_along == "m"
            and pick.bn != FP8_WIDE_FILL.bn and pick.cluster == 1 and (pick.a_major, pick.b_major) == ("K", "K")
            and pick.epilogue == "tma" and not (pick.streamk or pick.splitk)
            and _row_tiles(pick, m) >= FP8_WIDE_FILL_MIN_ROW_TILES):
        return False
    wide = wave_use(_tiles(FP8_WIDE_FILL, m, n), sms)
    return wide >= FP8_WIDE_FILL_MIN_USE and wide >= wave_use(_tiles(pick, m, n), sms) + FP8_WIDE_FILL_MIN_GAIN


def _fp8_tall(pick: GemmConfig, m: int, n: int, k: int, sms: int) -> bool:
    """Whether ``FP8_TALL`` replaces the cost model's ``pick`` (see its comment): an fp8 128 × 112 pick with K-major
    operands, FP8_TALL_ROWS[0] < m ≤ FP8_TALL_ROWS[1], k ≥ FP8_TALL_MIN_K, and the 256 × 112 tiles' last wave holding
    at least ``WAVE_FILL_MIN`` of the SMs. ``_fp8_tall(h128x112s6k4t, 256, 14336, 8192, 132)`` → True (128 tiles); at
    k = 6144, or n = 7168 (64 tiles), → False."""
    return (pick.fp8 and pick.scales == "tensor" and pick.bm == 128 and pick.bn == FP8_TALL.bn and pick.cluster == 1
            and (pick.a_major, pick.b_major) == ("K", "K") and pick.epilogue == "tma"
            and FP8_TALL_ROWS[0] < m <= FP8_TALL_ROWS[1] and k >= FP8_TALL_MIN_K
            and _last_wave_share(FP8_TALL, m, n, sms) >= WAVE_FILL_MIN)


def split_forms(m: int, n: int, k: int, dtype: str, out_dtype: str | None = None, a_major: str = "K",
                b_major: str = "K", bias: bool = False, sms: int = H100_SMS) -> list:
    """The split-K candidates rule 3b weighs for C (m, n) = A (m, k)·Bᵀ, cheapest first by ``estimated_cost`` (the
    split widths of ``dtype`` that give at least two k-slices on ``sms`` SMs), or [] where the rule does not apply.
    ``split_forms(1024, 1536, 8192, "bf16")[0].name`` = ``h128x192s4t3ez``; ``split_forms(1024, 1536, 4096,
    "bf16")`` = [] (K under ``SPLITK_MIN_K``). Post: every entry validates."""
    out_dtype = out_dtype or ("bf16" if dtype in ("e4m3", "e5m2") else dtype)
    tma_store = n * ELEMENT_BYTES[out_dtype] % 16 == 0
    forms = [split for base in _candidates(dtype, tma_store, bias)
             for split in _split_k(base.replace(out_dtype=out_dtype, a_major=a_major, b_major=b_major), m, n, k, sms)]
    return sorted(forms, key=lambda config: estimated_cost(config, m, n, k, sms))


def _split_k(base: GemmConfig, m: int, n: int, k: int, sms: int) -> list:
    """The split-K form of a candidate tile (``SPLITK_WIDTHS`` of its element width, K-major, TMA store, no bias) of
    a problem with K ≥ ``SPLITK_MIN_K`` and M ≥ ``SPLITK_MIN_M`` where its tiles leave room for at least two k-slices
    each, else nothing; the split tile releases its stages once per consumer warpgroup. ``_split_k(h128x192s4t3, 640,
    1536, 13824, 132)`` → [h128x192s4t3ez] (40 tiles, 3 slices); at 1024 × 2048 (88 tiles) → []; fp8
    ``_split_k(h128x192s4k4t, 1024, 1536, 18432, 132)`` → [h128x192s4k4tez] (64 tiles, 2 slices)."""
    if base.bn not in SPLITK_WIDTHS[_width(base.dtype)] or base.epilogue != "tma" or base.bias or \
            (base.a_major, base.b_major) != ("K", "K") or k < SPLITK_MIN_K or m < SPLITK_MIN_M:
        return []
    split = base.replace(splitk=True, cluster=1, overlap=0, streamk=False, streamk_every_sm=False,
                         release_per_warpgroup=True)
    return [split] if splitk_slices(m, n, k, split, sms) >= 2 else []


def _swapped_mid(m: int, n: int, k: int, dtype: str, bias: bool, out_dtype: str, sms: int, b_major: str = "K"):
    """Rule 2's swapped candidates for mid M (``SWAP_MID_MAX_M``): ``swapped_mid_tile`` of each of
    ``swapped_mid_widths(m, dtype)`` (those under ``SWAP_MID_MIN_BN`` only where ⌈n/128⌉ ≥
    ``SWAP_MID_NARROW_MIN_ROW_TILES``), data-parallel and, from ``SWAP_MID_MIN_STREAMK_BN`` columns where it saves
    k-tiles on the kernel's problem (n, m, k), stream-K, and (K ≥ ``SPLITK_MIN_K``, M ≤ ``SWAP_SPLITK_MAX_M``, where
    ``_swapped_split_pays``) split-K.
    ``_swapped_mid(448, 11008, 4096, "bf16", False, "bf16", 132)`` yields h128x224s4t2xT, h128x224s4t2skxT,
    h128x152s5txT, h128x112s6txT, h128x96s6txT, h128x80s6txT; ``_swapped_mid(96, 4096, 14336, ...)`` yields
    h128x96s6txT, h128x96s6tzxT; ``_swapped_mid(80, 5120, 13824, ...)`` yields h128x80s6txT, h128x80s6tzxT (one tile
    of M under ``SWAP_MID_MIN_BN``, at any N)."""
    widths = [bn for bn in swapped_mid_widths(m, dtype)
              if bn >= SWAP_MID_MIN_BN or -(-n // 128) >= SWAP_MID_NARROW_MIN_ROW_TILES]
    one_tile = -(-m // 8) * 8   # M under SWAP_MID_MIN_BN: one tile of M, data-parallel or split-K
    if one_tile < SWAP_MID_MIN_BN and one_tile not in widths:
        widths.append(one_tile)
    for bn in widths:
        base = swapped_mid_tile(bn, dtype, bias, out_dtype)
        if base is None:
            continue
        base = base.replace(a_major=b_major)   # the kernel's A is the problem's B
        if bn in widths:
            yield base
        sk = base.replace(streamk=True)
        if bn in widths and bn >= SWAP_MID_MIN_STREAMK_BN and \
                streamk_ktiles_saved(n, m, k, sk, sms) >= STREAMK_MIN_SAVING:
            yield sk
        split = base.replace(splitk=True, overlap=0)
        if not bias and b_major == "K" and k >= SPLITK_MIN_K and m <= SWAP_SPLITK_MAX_M and \
                _swapped_split_pays(split, n, m, k, sms):
            yield split
        tall = swapped_tall_tile(bn, dtype, out_dtype)
        if tall is not None and bn in widths and not bias and b_major == "K" and bn < m < SWAP_MID_LARGE_M:
            yield tall


def _swapped_split_pays(split: GemmConfig, m: int, n: int, k: int, sms: int) -> bool:
    """Whether a swapped split-K tile of the kernel's problem (m, n, k) (the caller's n, m, k) splits its tiles into
    at least ``SWAP_SPLITK_MIN_SLICES`` k-slices, or into 2 of at least ``SWAP_SPLITK_TWO_SLICES_MIN_KTILES`` k-tiles
    each. bf16 ``h128x80s6tzxT`` at 8192x80x28672 (64 tiles: 2 slices of 224 k-tiles) → True; at 7168x80x10240 (56
    tiles: 2 of 80) → False; e4m3 ``h128x72s6k4tzxT`` at 5120x72x13824 (40 tiles: 3 slices) → True."""
    slices = splitk_slices(m, n, k, split, sms)
    if slices >= SWAP_SPLITK_MIN_SLICES:
        return True
    return slices == 2 and -(-(-(-k // split.k_tile)) // 2) >= SWAP_SPLITK_TWO_SLICES_MIN_KTILES


def _past_row_swapped(m: int, n: int, k: int, dtype: str, bias: bool, out_dtype: str, sms: int,
                      b_major: str = "K") -> GemmConfig | None:
    """Rule 7's swapped tiles for an M past one 128-row tile (the caller holds rule 7's conditions): one tile of
    ⌈m/8⌉·8 for m ≤ 128 + ``SWAP_ONE_TILE_PAST_ROW``, two of ⌈⌈m/2⌉/8⌉·8 up to ``SWAP_TWO_TILES_MAX_M`` and, split
    only, from 257 to ``SWAP_PAST_ROW_SPLIT_MAX_M`` (with K ≥ ``SWAP_TWO_TILES_MIN_K``), each ``swapped_mid_tile``,
    where their tiles (count · ⌈n/128⌉) fit one wave of ``sms``:
    data-parallel where they leave no room for two k-slices (tiles > sms / 2), else split-K where K ≥
    ``SWAP_PAST_ROW_SPLIT_MIN_K``, each slice gets at least ``SWAP_PAST_ROW_MIN_SLICE_KTILES`` k-tiles, B is K-major
    and there is no bias (see ``SWAP_TWO_TILES_MAX_M``'s comment); None where the rule does not hold.
    ``_past_row_swapped(160, 4096, 4096, "bf16", False, "bf16", 132).name`` = ``h128x80s6tzxT`` (64 tiles, 2
    slices); at n = 7168 (112 tiles) ``h128x80s6txT``; ``_past_row_swapped(145, 5120, 28672, ...)`` =
    ``h128x152s5tzxT`` (40 tiles in 3 slices); ``_past_row_swapped(266, 2560, 13824, ...)`` = ``h128x136s5tzxT``; at n = 14336
    (224 tiles), m = 224, e4m3 with m = 160, k = 2048, or m = 130, n = 1024, k = 4096 (8 tiles in 16 slices of 4
    k-tiles) → None."""
    if not (128 < m <= SWAP_TWO_TILES_MAX_M or 2 * 128 < m <= SWAP_PAST_ROW_SPLIT_MAX_M):
        return None
    count = 1 if m <= 128 + SWAP_ONE_TILE_PAST_ROW else 2
    if count == 2 and k < SWAP_TWO_TILES_MIN_K[_width(dtype)]:
        return None
    width = _split_width(m, count)
    base = swapped_mid_tile(width, dtype, bias, out_dtype)
    if base is None or count * -(-n // 128) > sms:
        return None
    base = base.replace(a_major=b_major)   # the kernel's A is the problem's B
    split = base.replace(splitk=True, overlap=0)
    slices = splitk_slices(n, m, k, split, sms)
    if slices < 2:
        return base if m <= SWAP_TWO_TILES_MAX_M else None
    short = -(-(-(-k // split.k_tile)) // slices) < SWAP_PAST_ROW_MIN_SLICE_KTILES
    if bias or b_major != "K" or k < SWAP_PAST_ROW_SPLIT_MIN_K or short:
        return None
    return split


def _split_in_halves(pick: GemmConfig, m: int, n: int, k: int, sms: int) -> GemmConfig | None:
    """Rule 7's halves: a swapped split pick of one tile column (M ≤ BN ≤ 152 columns) in two column tiles of
    ⌈⌈m/2⌉/8⌉·8 (rastered by rule 9 later), split, where they keep at least ``SWAP_HALVES_MIN_UNITS`` of its CTAs
    at work (tiles × slices) and, for M within one 128-row tile, the pick splits into at least
    ``SWAP_HALVES_MIN_SLICES`` k-slices; None otherwise. ``_split_in_halves(h128x136s5tzxT, 135, 2048, 12288, 132)``
    = ``h128x72s6tzxT`` (16 tiles in 8 slices → 32 in 4); at n = 5120 (40 tiles in 3 slices → 80 unsplit) None.
    Post: None, or a split tile of the pick's operands whose two columns cover M."""
    if not (pick.swap_ab and pick.splitk and pick.c_major == "M" and pick.bm == 128 and m <= pick.bn
            and m <= 128 + SWAP_ONE_TILE_PAST_ROW):
        return None
    rows = -(-n // 128)
    slices = splitk_slices(n, m, k, pick, sms)
    halves = swapped_mid_tile(_split_width(m, 2), pick.dtype, pick.bias, pick.out_dtype)
    if halves is None or 2 * rows > sms or (m <= 128 and slices < SWAP_HALVES_MIN_SLICES):
        return None
    two = halves.replace(a_major=pick.a_major, splitk=True, overlap=0)
    return two if 2 * rows * splitk_slices(n, m, k, two, sms) >= SWAP_HALVES_MIN_UNITS * rows * slices else None


def _split_width(m: int, tiles: int) -> int:
    """The swapped kernel's N for M split into ``tiles`` column tiles: ⌈⌈m/tiles⌉/8⌉·8 (wgmma's N step);
    ``_split_width(135, 2)`` = 72. Post: a multiple of 8, ``tiles`` of them cover m."""
    return -(-(-(-m // tiles)) // 8) * 8


def swapped_mid_widths(m: int, dtype: str) -> list:
    """The kernel BNs of a swapped mid-M problem: M split into j = 1 … ``SWAP_MID_MAX_TILES`` = 8 tiles, ⌈M/j⌉
    rounded up to 8, from ``SWAP_MID_MIN_WIDTH`` to ``SWAP_MID_MAX_BN`` (16-bit 256, fp8 192; from M =
    ``SWAP_MID_LARGE_M`` to ``SWAP_MID_LARGE_M_MAX_BN``: fp8 184), each once. ``swapped_mid_widths(448, "bf16")`` =
    [224, 152, 112, 96, 80]; ``swapped_mid_widths(1331, "e4m3")`` = [168] (not 192); 16-bit from M = 1024 also the
    widths of 9 … ``SWAP_MID_LARGE_M_MAX_TILES`` = 12 tiles from ``SWAP_MID_LARGE_M_EXTRA_MIN_BN`` = 176:
    ``swapped_mid_widths(1932, "bf16")`` = [248, 216, 200, 176]. Post: every width is a multiple of 8 covering M in
    at most 12 tiles."""
    large_m = m >= SWAP_MID_LARGE_M
    widest = (SWAP_MID_LARGE_M_MAX_BN if large_m else SWAP_MID_MAX_BN)[_width(dtype)]
    most_tiles = SWAP_MID_LARGE_M_MAX_TILES if large_m and _width(dtype) == 16 else SWAP_MID_MAX_TILES
    widths = []
    for tiles in range(1, most_tiles + 1):
        bn = _split_width(m, tiles)
        narrowest = SWAP_MID_MIN_WIDTH if tiles <= SWAP_MID_MAX_TILES else SWAP_MID_LARGE_M_EXTRA_MIN_BN
        if narrowest <= bn <= widest and bn not in widths:
            widths.append(bn)
    return widths


def swapped_mid_tile(bn: int, dtype: str, bias: bool = False, out_dtype: str | None = None) -> GemmConfig | None:
    """The swapped mid-M tile of kernel width ``bn``: Cᵀ = B·Aᵀ, C stored by TMA as its transpose (``c_major =
    "M"``) in one column block (two for BN over 176 that halve into multiples of 8), as many stages as shared memory
    holds up to ``SWAP_MID_MAX_STAGES``; None where that is under ``SWAP_MID_MIN_STAGES``.
    ``swapped_mid_tile(152, "bf16").name`` = ``h128x152s5txT``; ``swapped_mid_tile(232, "bf16")`` = None (3 stages)."""
    fp8 = dtype in ("e4m3", "e5m2")
    split = 1 if bn <= 176 or (bn // 2) % 8 else 2
    base = GemmConfig(dtype=dtype, bn=bn, epilogue="tma", epilogue_split=split, promote=4 if fp8 else 1,
                      swap_ab=True, c_major="M", bias=bias, out_dtype=out_dtype)
    tile = base.replace(stages=SWAP_MID_MAX_STAGES).with_stages_that_fit()
    return tile if tile.stages >= SWAP_MID_MIN_STAGES else None


def swapped_tall_tile(bn: int, dtype: str, out_dtype: str | None = None) -> GemmConfig | None:
    """Rule 7's 256-row swapped tile of kernel width ``bn`` (16-bit, ``SWAP_TALL_MIN_BN`` ≤ bn ≤
    ``SWAP_TALL_MAX_BN``, else None): ``SWAP_TALL_STAGES`` stages, C stored by TMA as its transpose in the fewest
    column blocks (multiples of 8 columns, at most 9) that fit shared memory beside them.
    ``swapped_tall_tile(144, "bf16").name`` = ``h256x144s4t3xT``; ``swapped_tall_tile(128, "bf16").name`` =
    ``h256x128s4t2xT``; ``swapped_tall_tile(136, "bf16")`` = None (136 splits into no blocks of 8 that fit)."""
    if _width(dtype) != 16 or not SWAP_TALL_MIN_BN <= bn <= SWAP_TALL_MAX_BN:
        return None
    for split in range(1, 10):
        if bn % split or (bn // split) % 8:
            continue
        config = GemmConfig(dtype=dtype, bm=256, bn=bn, stages=SWAP_TALL_STAGES, epilogue="tma",
                            epilogue_split=split, swap_ab=True, c_major="M", out_dtype=out_dtype)
        if config.smem_bytes() <= SMEM_BYTES:
            return config.validate()
    return None


def pipeline_stages(config: GemmConfig, m: int, n: int, sms: int = H100_SMS) -> int:
    """The pipeline depth of an unswapped tile config for an (m, n) problem: its own ``stages`` where M spans fewer
    than ``MANY_ROW_TILES`` tiles (or where it is 4 or fewer, or the 128 x 64 tile's 8), else ``MANY_ROW_STAGES``
    (default 4). ``pipeline_stages(GemmConfig(bn=128, stages=6), 512, 4096)`` = 6;
    ``pipeline_stages(GemmConfig(bn=128, stages=6), 8192, 7680)`` = 4. Post: ≤ ``config.stages``."""
    if _row_tiles(config, m) < MANY_ROW_TILES or config.stages <= MANY_ROW_DEFAULT_STAGES or config.bn == NARROW_BN:
        return config.stages
    return min(config.stages, MANY_ROW_STAGES[_width(config.dtype)].get(config.bn, MANY_ROW_DEFAULT_STAGES))


def _tiles(config: GemmConfig, m: int, n: int) -> int:
    """⌈m / BM⌉ · ⌈n / BN⌉: ``config``'s tiles over C (m, n); 128 x 144 over 1536x8960: 12 · 63 = 756."""
    return _row_tiles(config, m) * -(-n // config.bn)


def _wave_fill_refused(config: GemmConfig, m: int, n: int, sms: int) -> bool:
    """A wave-filling tile is left out where its last wave holds under ``WAVE_FILL_MIN`` of the SMs, in a problem of
    under two waves of its tiles or of at most ``WAVE_FILL_FREE_ROW_TILES`` row tiles. E.g. 128 x 144 on 132 SMs at
    1536x8960 (756 tiles, last wave 0.73): kept; at 384x4096 (87 tiles, 0.66): left out. The widths of
    ``WAVE_FILL_MAX_ROW_TILES`` are also left out where M spans more row tiles than it allows (16-bit 128 x 224
    at 1024x14336: 8 row tiles, left out). Post: False where the last wave holds at least ``WAVE_FILL_MIN`` and M spans
    no more row tiles than that bound."""
    most_rows = WAVE_FILL_MAX_ROW_TILES[_width(config.dtype)].get(config.bn)
    if most_rows is not None and _row_tiles(config, m) > most_rows:
        return True
    tiles = _tiles(config, m, n)
    few = tiles < 2 * sms or _row_tiles(config, m) <= WAVE_FILL_FREE_ROW_TILES
    return few and _last_wave_share(config, m, n, sms) < WAVE_FILL_MIN


def _last_wave_share(config: GemmConfig, m: int, n: int, sms: int) -> float:
    """The share of the SMs the last wave of ``config``'s tiles occupies: 1 for whole waves; 43 tiles on 132 SMs:
    0.33."""
    tiles = _tiles(config, m, n)
    return ((tiles - 1) % sms + 1) / sms if tiles else 1.0


def _variants(base: GemmConfig, m: int, n: int, k: int, sms: int):
    """Rules 3 and 4 applied to a candidate tile: stream-K where it pays (clusters of 2 for long K or two row tiles), else
    data-parallel overlapped with the TMA-store epilogue where a CTA has several tiles. The 128 × 64 tile and the
    16-bit 128 × 192 TMA-store tile run data-parallel without overlap; fp8 takes stream-K only on its 128 × 192
    TMA-store tile in clusters of 1 from ``FP8_STREAMK_MIN_ROW_TILES`` row tiles: the forms measured."""
    if base.bn == NARROW_BN or (base.bn == WIDE_THIRDS_BN and not base.fp8 and base.epilogue == "tma") or \
            base.bn in WAVE_FILLING[_width(base.dtype)]:
        yield base   # the forms measured: 128 x 192's stream-K (32 B of spills) and overlap were no faster
        return
    fp8_streamk = base.bn == FP8_STREAMK_BN and base.epilogue == "tma" and base.cluster == 1 and \
        _row_tiles(base, m) >= FP8_STREAMK_MIN_ROW_TILES
    if not base.fp8 or fp8_streamk:
        pairs = k >= 2 * max(m, n) or _row_tiles(base, m) == STREAMK_CLUSTER_ROW_TILES
        cluster = 2 if pairs and (base.a_major, base.b_major) == ("K", "K") and not base.fp8 else base.cluster
        sk = base.replace(streamk=True, cluster=cluster)
        if base.bn % (8 * cluster) == 0 and streamk_ktiles_saved(m, n, k, sk, sms) >= STREAMK_MIN_SAVING:
            yield sk
            return
    rows, columns = base.cluster_tile
    tiles = -(-m // rows) * -(-n // columns)
    if base.epilogue == "tma" and not base.fp8 and tiles > sms // base.cluster_ctas:
        yield base.replace(overlap=1)   # only a CTA of several tiles has a next tile to overlap the store with
    elif base.epilogue == "tma":
        yield base.replace(pending=DATA_PARALLEL_PENDING.get((_width(base.dtype), base.bn), base.pending))
    else:
        yield base


# block-scaled fp8 (DeepGEMM's fp8_gemm_nt). With the scales loaded from global memory in the consumers (s11's
# kernels), ptxas put the product of a k-tile's just-loaded scales between the stage's arrival and the first QGMMA:
# every k-tile waited an L2 round trip before its wgmmas (late_scales, scale_prefetch and ping-pong only moved that
# wait). scales_smem removes it: the scales arrive with the stage, by TMA, and every read is an ld.shared.
# M <= 64: the swapped kernel (Cᵀ = B·Aᵀ, its 128-row side N, no padded rows) with its scales by TMA (scales_smem)
# and two chunks in flight; kernel-time ratio to cuBLAS block-scaled at M = 64: 1.00-1.18 against 0.80-1.14 for the
# 128 x 128 tiles, M = 16/32 1.11-1.37 against 0.64-1.13 (s14 log section 6). Stream-K on every SM where it saves
# k-tiles and the tiles hold under a third of the SMs (17 or 32 tiles of 2112 or 4096 rows: 1.24-1.61; 56 tiles of
# 7168: 0.95 against 1.06 without)
BLOCK_SCALED_SWAP_MAX_M = 64
BLOCK_SCALED_SWAP_STREAMK_SHARE = 1 / 3
BLOCK_SCALED_TILE = GemmConfig("e4m3", bn=128, stages=5, epilogue="tma", scales="block", overlap=1, scales_smem=True,
                               chunk_ahead=True)
# stream-K for block scales where the last wave holds less than this share of the SMs (it gives up the epilogue's
# overlap: 4096x2112x7168, last wave 12%: 968 against 904 TFLOP/s; 4096x7168x16384, 58%: 1049 against 1074)
BLOCK_SCALED_STREAMK_SHARE = 0.5
BLOCK_SCALED_STREAMK = GemmConfig("e4m3", bn=128, stages=5, epilogue="tma", scales="block", scales_smem=True,
                                  streamk=True, streamk_every_sm=True)
# one row of 128-row tiles (64 < M <= 128) whose 128-wide tiles leave the SMs' last wave under WAVE_FILL_MIN full: 64-wide
# tiles, twice as many CTAs (M = 128: 7168x2048 467 against 387 TFLOP/s kernel time, 7168x16384 629 against 547,
# 24576x1536 514 against 465; at M = 64, where half of each tile's rows are padding, they lost: s14 log section 5).
# Within one wave only where the 64-wide tiles fit in one wave too (128-wide tiles at most half the SMs): with more,
# some SM runs two 64-wide tiles, as long as one 128-wide tile (kernel time, 128-wide against 64-wide: 96 tiles,
# 96x14336x8192 46.7 against 57.4 us; 112x12288x16384 75.9 / 90.6; 128 tiles, 100x16384x24576 142.7 / 172.7,
# 72x16384x16384 100.5 / 122.1; but 64 tiles, 128x8192x7168 29.7 / 26.4; docs/gpu-runs/2026-11-27-s23.log section 12)
BLOCK_SCALED_NARROW_MAX_M = 128
BLOCK_SCALED_NARROW = BLOCK_SCALED_TILE.replace(bn=64, stages=8)
# where the stream-K rules above pick stream-K on every SM and the tiles number at most a half of the SMs, split-K
# instead: the same tile in S = ⌊SMs / tiles⌋ k-slices running together, joined once through the workspace, with two
# chunks in flight, where stream-K's pieces of a tile wait on one another's partial sums in turn. Kernel time, 22 of
# 22 such problems (M 24-384) faster: 112x2048x16384 25.5 -> 18.9 us, 128x4096x7168 19.9 -> 14.9, 224x2048x7168
# 23.8 -> 17.3, 40x2112x18432 26.3 -> 21.3, 64x2112x7168 13.3 -> 12.3, 24x1536x32768 28.5 -> 27.3 (the least);
# docs/gpu-runs/2026-11-27-s23.log section 4. With one slice per tile (more tiles than half the SMs) stream-K stays.
BLOCK_SCALED_SPLITK_MIN_SLICES = 2
# 128 × 192 tiles (one chunk per warpgroup: 96 + 96 accumulator registers leave no room for a second) where their
# waves fill the SMs about as well as the 128 × 128 tiles' (their wave efficiency — tiles / (waves · SMs) — at most
# BLOCK_SCALED_WIDE_MARGIN below), at least BLOCK_SCALED_WIDE_MIN_FILL, with K of at least BLOCK_SCALED_WIDE_MIN_K:
# per tile they run as fast as the 128 × 128 tile with two chunks in flight and load 17% fewer bytes per FLOP, so
# equal waves favour them (4096 × 9216 × 4096 1102 against 1076 TFLOP/s, 6144 × 6144 × 4096 1069 / 1045) and fewer
# waves more so (4096 × 2112 × 7168: 2.7 waves, 1094 against 967, stream-K 984); contiguous groups 1060-1168 against
# 968-1051. Not at K = 512 (4 k-tiles: 766 against 838) nor 8% fewer filled waves (4096 × 4096 × 7168: 1008 against
# 1105; 4096 × 5120 × 5120, 3.5% fewer: 1072 against 1105). Not for masked groups (a group's rows are few: 630-758
# against 702-1042). docs/gpu-runs/2026-11-26-s16.log section 2. From M = 129 on (the rows past the narrow tiles'
# one row of tiles), where they were first measured at M >= 2048: at M 136-480 (21 changed picks, this rule or the
# 256 x 128 tile's below) 21 faster by 1-70% (280x7168x11008 464 -> 790 TFLOP/s, 136x12288x11008 327 -> 494,
# 200x12288x7168 597 -> 781, 392x18432x8192 757 -> 902; docs/gpu-runs/2026-11-27-s23.log section 14).
BLOCK_SCALED_WIDE = GemmConfig("e4m3", bn=192, stages=4, epilogue="tma", scales="block", overlap=1, scales_smem=True)
BLOCK_SCALED_WIDE_MARGIN = 0.03
BLOCK_SCALED_WIDE_MIN_FILL = 0.8
BLOCK_SCALED_WIDE_MIN_K = 8 * 128
BLOCK_SCALED_WIDE_MIN_M = BLOCK_SCALED_NARROW_MAX_M + 1
# 256 x 128 tiles (BM = 256 with block scales: each consumer warpgroup's two 64-row blocks promoted in turn from one
# chunk, DeepGEMM's tile), 3 stages, the plain TMA store, where their waves cost at most BLOCK_SCALED_TALL_GAIN times
# the area-waves (waves x BM x BN) of the 128 x 128 tiles (and of the 128 x 192 tiles where those are taken): per tile
# they run 2-4% faster than the 128 x 128 tile with two chunks in flight (4096x4096x7168 1121 against 1095 TFLOP/s,
# 4096x7168x16384 1140-1157 / 1116, 8192x4096x7168 1120-1131 / 1090) and 9% at K = 512 (4096x32768x512 885 / 811,
# half the tiles' epilogues); where their waves fit worse they lose (4096x2112x7168: 3 waves, 876 against 1074 for
# 128 x 192). docs/gpu-runs/2026-11-26-s18.log section 3. From M = 129 on, as the wide tile (at M 160-480:
# 184x14336x18432 584 -> 702 TFLOP/s, 160x16384x7168 451 -> 546, 168x14336x6144 505 -> 549, 480x7168x7168 921 -> 932;
# docs/gpu-runs/2026-11-27-s23.log section 14).
BLOCK_SCALED_TALL = GemmConfig("e4m3", bm=256, bn=128, stages=3, epilogue="tma", scales="block", scales_smem=True)
BLOCK_SCALED_TALL_GAIN = 1.03
# The tall tiles in clusters of 2 along M (the two CTAs of a grid column share B, each loading half of it multicast),
# where the clusters leave no CTA without rows (an even number of 256-row tiles), each SM runs more than one tile and
# K ≥ BLOCK_SCALED_TALL_CLUSTER_MIN_K: 1-3% faster in three interleaved runs (4096x7168x16384 +2.1 / +2.3 / +2.8%,
# 8192x4096x7168 +1.5-1.6%, 1456x11008x16384 +2.1-2.3%, 20848x24576x2048 +2.2%, 4096x4096x7168 +0.4-0.8%,
# 4096x7168x2048 -0.4 / +0.3%); one tile per SM (864x4096x6144 -1.3 / -1.8%), K = 512 (4096x32768x512 -2 / -3%) and
# an odd number of row tiles (a cluster half idle: 768x5120x2112 -45%, 2800x16384x24576 -15%) lose.
# docs/gpu-runs/2026-11-27-s29.log section 1.
BLOCK_SCALED_TALL_CLUSTER = 2
BLOCK_SCALED_TALL_CLUSTER_MIN_K = 2048
BLOCK_SCALED_TALL_MIN_M = BLOCK_SCALED_NARROW_MAX_M + 1
BLOCK_SCALED_TALL_MIN_K = 4 * 128
BLOCK_SCALED_CANDIDATES = (GemmConfig("e4m3", bn=128, stages=6, epilogue="tma", scales="block", late_scales=True),
                           GemmConfig("e4m3", bn=64, stages=8, epilogue="tma", scales="block", late_scales=True))


def _wave_efficiency(config: GemmConfig, m: int, n: int, sms: int) -> float:
    """tiles / (waves · SMs) of ``config``'s tiles over (m, n): 1 for whole waves; 544 tiles on 132 SMs: 0.82."""
    tiles = _tiles(config, m, n)
    return tiles / (-(-tiles // sms) * sms) if tiles else 1.0


def _split_instead_of_streamk(streamk: GemmConfig, tiles: int, sms: int) -> GemmConfig:
    """``streamk`` (a block-scaled stream-K pick of ``tiles`` tiles) as the op runs it: its split-K form with two
    chunks in flight where ⌊sms / tiles⌋ ≥ ``BLOCK_SCALED_SPLITK_MIN_SLICES`` (see its comment), else itself;
    validated. ``_split_instead_of_streamk(BLOCK_SCALED_STREAMK, 32, 132).name`` = ``h128x128s5tzBSA``; with 100
    tiles: ``h128x128s5tskaBS``."""
    if tiles and sms // tiles >= BLOCK_SCALED_SPLITK_MIN_SLICES:
        return streamk.replace(streamk=False, streamk_every_sm=False, splitk=True, chunk_ahead=True).validate()
    return streamk.validate()


def _wide_block_scaled(m: int, n: int, k: int, sms: int) -> bool:
    """Whether ``BLOCK_SCALED_WIDE``'s rule holds for C (m, n), K = k on ``sms`` SMs (see its comment)."""
    if m < BLOCK_SCALED_WIDE_MIN_M or k < BLOCK_SCALED_WIDE_MIN_K:
        return False
    wide = _wave_efficiency(BLOCK_SCALED_WIDE, m, n, sms)
    return wide >= BLOCK_SCALED_WIDE_MIN_FILL and \
        wide >= _wave_efficiency(BLOCK_SCALED_TILE, m, n, sms) - BLOCK_SCALED_WIDE_MARGIN


def _wave_area(config: GemmConfig, m: int, n: int, sms: int) -> int:
    """waves · BM · BN of ``config``'s tiles over (m, n): the time of the busiest SM in units of one tile element's
    work; 128 x 128 over 4096 x 4096 on 132 SMs: 8 waves · 16384 = 131072."""
    tiles = _tiles(config, m, n)
    return -(-tiles // sms) * config.bm * config.bn


def _tall_block_scaled(m: int, n: int, k: int, sms: int, wide: bool) -> bool:
    """Whether ``BLOCK_SCALED_TALL``'s rule holds for C (m, n), K = k on ``sms`` SMs, the 128 x 192 tiles taken or
    not (``wide``; see its comment): 4096 x 4096 x 7168 → True, 4096 x 2112 x 7168 → False."""
    if m < BLOCK_SCALED_TALL_MIN_M or k < BLOCK_SCALED_TALL_MIN_K:
        return False
    tall = _wave_area(BLOCK_SCALED_TALL, m, n, sms) / BLOCK_SCALED_TALL_GAIN
    return tall <= _wave_area(BLOCK_SCALED_TILE, m, n, sms) and \
        (not wide or tall <= _wave_area(BLOCK_SCALED_WIDE, m, n, sms))


def _tall_pick(m: int, n: int, k: int, sms: int) -> GemmConfig:
    """``BLOCK_SCALED_TALL``, in clusters of ``BLOCK_SCALED_TALL_CLUSTER`` along M where its comment's rule holds:
    4096 x 4096 x 7168 → ``h256x128s3c2tBS`` (16 row tiles, 512 tiles on 132 SMs), 864 x 4096 x 6144 →
    ``h256x128s3tBS`` (128 tiles: one per SM), 3280 x 24576 x 2048 → ``h256x128s3tBS`` (13 row tiles).
    Post: a valid configuration of BM = 256."""
    rows = -(-m // BLOCK_SCALED_TALL.bm)
    if rows % BLOCK_SCALED_TALL_CLUSTER == 0 and k >= BLOCK_SCALED_TALL_CLUSTER_MIN_K and \
            _tiles(BLOCK_SCALED_TALL, m, n) > sms:
        return BLOCK_SCALED_TALL.replace(cluster=BLOCK_SCALED_TALL_CLUSTER).validate()
    return BLOCK_SCALED_TALL.validate()


def choose_block_scaled_config(m: int, n: int, k: int, sm_count: int = H100_SMS, *,
                               grouped: str = "none") -> GemmConfig:
    """The configuration of the block-scaled fp8 GEMM (``ptxgen.kernels.fp8_gemm_nt``) for C (m, n) = A (m, k) · Bᵀ:
    swapped A and B for m ≤ ``BLOCK_SCALED_SWAP_MAX_M`` = 64 < n (the kernel's N is m rounded up to 16, 32 or 64, 8
    stages, the direct epilogue, the scales by TMA with each stage, two chunks in flight — or stream-K on every SM
    where it saves ``streamk_min_saving`` k-tiles and the tiles hold under ``BLOCK_SCALED_SWAP_STREAMK_SHARE`` of
    the SMs); otherwise — dense from M = 65 up and both grouped layouts —
    ``BLOCK_SCALED_TILE``: DeepGEMM's design, 128 × 128 tiles whose scales arrive with their stage by TMA and are
    read by ld.shared (``scales_smem``, 5 stages to fit their rings), promoted as one FMA by the scale product, two
    chunks in flight per consumer warpgroup (``chunk_ahead``: k-tile j + 1's wgmmas queued before k-tile j's
    promotion), the epilogue behind the next tile's first k-tile. Measured (docs/gpu-runs/2026-11-26-s14.log
    section 1, interleaved): chunk_ahead +1-5% over one chunk at M = 256-4096, +18-21% on contiguous groups, +1-24%
    on masked ones (their A scales read in place from DeepGEMM's layout, as (G·KB, M_max) rows). A dense problem whose few tiles leave SMs idle, or which has at least two full waves and a last wave
    holding under ``BLOCK_SCALED_STREAMK_SHARE`` of the SMs, with long K loops — where stream-K on every SM saves at
    least ``streamk_min_saving`` k-tiles — takes ``BLOCK_SCALED_STREAMK`` (the same tile, its k-tiles shared out
    over every SM, each piece promoting its own k-tiles; plain TMA store): M = 64 / 128 at N × K = 2112 × 7168
    1.30×, 4096 × 7168 1.19-1.25×, 7168 × 16384 0.96-1.04× cuBLAS block-scaled against 0.88-0.97× for the tile
    alone; M = 4096, N × K = 2112 × 7168 0.99-1.00× against 0.98× (s13.log section 5, s14.log section 1). Between
    one and two waves stream-K lost: 1024 × 2112 × 7168 (136 tiles) 565 TFLOP/s against 656 for the tile.
    One row of tiles with 64 < M ≤ 128 whose 128-wide tiles fill at most half the SMs, or take more than a wave and
    leave the last one under ``WAVE_FILL_MIN`` of the SMs, takes the same two choices with 64-wide tiles
    (``BLOCK_SCALED_NARROW``, 8 stages): twice the CTAs. Where these
    rules (swapped or not) pick stream-K and each tile gets at least ``BLOCK_SCALED_SPLITK_MIN_SLICES`` of the SMs,
    the same tile runs split over k-slices instead (``_split_instead_of_streamk``). Before the
    stream-K rule, a dense or contiguous problem with M > 128 and K ≥ 1024 whose 128 × 192 tiles fill the waves
    of SMs nearly as well as 128 × 128 tiles (``_wide_block_scaled``) takes ``BLOCK_SCALED_WIDE`` — or, where the
    256 × 128 tiles' area-waves are as small (``_tall_block_scaled``), ``BLOCK_SCALED_TALL``; after the stream-K rule a
    dense problem whose 256 × 128 tiles' area-waves are as small as the 128 × 128 tiles' takes ``BLOCK_SCALED_TALL``
    — in both places in clusters of 2 along M where ``_tall_pick``'s rule holds. The candidates stay valid
    configurations (``config=``).
    ``choose_block_scaled_config(2048, 2112, 7168).name`` = ``h128x128s5tskaBS``;
    ``choose_block_scaled_config(4096, 2112, 7168).name`` = ``h128x192s4to1BS``;
    ``choose_block_scaled_config(4096, 4096, 7168).name`` = ``h256x128s3c2tBS``;
    ``choose_block_scaled_config(16, 7168, 2048).name`` = ``h128x16s8xBSA``;
    ``choose_block_scaled_config(64, 4096, 7168).name`` = ``h128x64s8zxBSA``;
    ``choose_block_scaled_config(128, 4096, 7168).name`` = ``h128x64s8tzBSA``. ``grouped``
    ("contiguous", "masked"; ``m`` the rows of all groups): never swapped (the groups are A's rows).
    Post: deterministic, valid, e4m3 → bf16 with ``scales="block"``."""
    check_problem("choose_block_scaled_config", m, n, k, sm_count)
    if m <= BLOCK_SCALED_SWAP_MAX_M < n and grouped == "none":
        # the kernel computes Cᵀ: its rows are B's (n), its columns A's m rows
        bn = 16 if m <= 16 else 32 if m <= 32 else 64
        swapped = GemmConfig("e4m3", bn=bn, stages=SWAP_STAGES, swap_ab=True, scales="block", scales_smem=True)
        streamk = swapped.replace(streamk=True, streamk_every_sm=True)
        if streamk_ktiles_saved(n, m, k, streamk, sm_count) >= streamk.streamk_min_saving and \
                _last_wave_share(streamk, n, m, sm_count) < BLOCK_SCALED_SWAP_STREAMK_SHARE:
            return _split_instead_of_streamk(streamk, _tiles(streamk, n, m), sm_count)
        return swapped.replace(chunk_ahead=True).validate()
    tile, streamk = BLOCK_SCALED_TILE, BLOCK_SCALED_STREAMK
    wide_tiles = _tiles(tile, m, n)
    if grouped == "none" and tile.bm // 2 < m <= BLOCK_SCALED_NARROW_MAX_M and \
            (2 * wide_tiles <= sm_count or
             wide_tiles > sm_count and _last_wave_share(tile, m, n, sm_count) < WAVE_FILL_MIN):
        tile, streamk = BLOCK_SCALED_NARROW, BLOCK_SCALED_STREAMK.replace(bn=BLOCK_SCALED_NARROW.bn,
                                                                          stages=BLOCK_SCALED_NARROW.stages)
    wide = grouped in ("none", "contiguous") and _wide_block_scaled(m, n, k, sm_count)
    tall = grouped == "none" and _tall_block_scaled(m, n, k, sm_count, wide)
    if wide:
        return _tall_pick(m, n, k, sm_count) if tall else BLOCK_SCALED_WIDE.replace(grouped=grouped).validate()
    tiles = _tiles(streamk, m, n)
    if grouped == "none" and (tiles < sm_count or tiles >= 2 * sm_count) and \
            streamk_ktiles_saved(m, n, k, streamk, sm_count) >= streamk.streamk_min_saving \
            and _last_wave_share(streamk, m, n, sm_count) < BLOCK_SCALED_STREAMK_SHARE:
        # few tiles with long K loops (M <= 128, N up to ~16k, K from ~4k): their k-tiles shared out over every SM.
        # Not between one and two waves: 1024x2112x7168 (136 tiles) ran at 565 TFLOP/s stream-K, 656 as tiles
        return _split_instead_of_streamk(streamk, tiles, sm_count)
    if tall:
        return _tall_pick(m, n, k, sm_count)
    return tile.replace(grouped=grouped).validate()
