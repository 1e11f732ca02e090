"""The flagship GEMM: warp-specialized, persistent, pipelined wgmma GEMM for Hopper, built with the Python builder
(examples/gemm_hopper.tile is ``build(**TILE_FILE)`` printed, with comments: clusters of 2, the TMA-store epilogue).

C = A·Bᵀ, A (M, K) and B (N, K) row-major (K contiguous), C (M, N) row-major; f16/bf16 in, f32 accumulation.

- Persistent: ``min(tiles, %sms)`` CTAs; CTA b computes the work items b, b + grid, b + 2·grid, …; ``sched.tile``
  maps a work item to its (m, n) tile in groups of ``group`` tile rows, so that the CTAs running together share A
  and B panels in L2.
- Warp-specialized: ``gpu.roles`` gives warpgroup 0 to the PRODUCER (registers cut to 24, the least setmaxnreg
  allows) whose thread 0 walks every (tile, k-tile) of its CTA with ONE running iteration counter, acquiring pipeline
  stages and issuing the TMA loads of A's BM × 64 and B's BN × 64 boxes (K-major SW128 GMMA atoms); the two CONSUMER
  warpgroups (registers raised to 240: 128·24 + 256·240 = 64 Ki, the whole register file) each own BM/2 rows of the
  tile. Because the counter runs across tiles, the producer fills the stages of the
  next tile while the consumers still store the last one: the epilogue hides behind the next tile's loads.
- Mainloop: per k-tile a consumer waits for the stage, issues its wgmmas (``wgmma.mma`` of (BM/2) × BN × 64: BM/128
  m64 blocks × 4 k16 steps), commits, and waits with ONE group still pending (``wgmma.wait {pending = 1}``), so the
  tensor cores always have the next k-tile queued; only then is the PREVIOUS stage released (its wgmmas are done).
- Epilogue: the f32 accumulator → bf16/f16, stored through the accumulator's TV layout; stores outside C are skipped,
  and TMA's zero fill makes ragged M, N, K free in the mainloop.
"""
from layoutc.hopper import gmma_smem_layout

from ptxgen.ir.builder import KernelBuilder, cdiv, f32, frag, gtensor, hmin, i32, mul, smem, tmap
from ptxgen.ir.ops.smem import permute_layout, stage_sliced, tile_split

SWIZZLE_ROW = 128  # bytes of K per k-tile: one SW128 row (64 f16/bf16, 128 e4m3/e5m2)
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "e4m3": 1, "e5m2": 1}
# Stream-K's partial sums cost a launch about 10 us on the H100 (each CTA writes and reads 128 KiB of f32 and waits
# on its flags), 15 k-tiles of a 128x256 tile (0.7 us each); it pays where it shortens the last wave by more. bf16
# 128x256 clusters of 2, paired against the data-parallel kernel (bench_gemm interleaved timing, 2026-11-25): time
# saved 31.7 us for 62 k-tiles saved (8192^3), 22.4 for 56 (4096x4352x4096: +9.7%), 11.1 for 31, 1.3 for 17, -0.1
# and -1.0 for 15, -5.4 for 7 (4096^3: the last wave 58/66 full).
STREAMK_MIN_SAVING = 20
# the configuration examples/gemm_hopper.tile spells out (bf16, 128 x 256, 4 stages, clusters of 2 sharing B by
# multicast, C through stmatrix and TMA stores)
TILE_FILE = {"cluster": 2, "epilogue": "tma", "epilogue_split": 2}


def k_tile(dtype: str) -> int:
    """Elements of K per k-tile: one 128-byte swizzle row."""
    return SWIZZLE_ROW // ELEMENT_BYTES[dtype]


def accumulator_block_tv(rows: int, bn: int):
    """The TV layout of a consumer's (rows, BN) accumulator tile, rows = 64·P: thread t of the warpgroup, value
    v + (BN/2)·p → element m + rows·n of the tile (CLayout_64xN of each m64 block p, stacked along M)."""
    import layoutc as lc

    p = rows // 64
    return lc.Layout(((4, 8, 4), ((2, 2, bn // 8), p)), ((2 * rows, 1, 16), ((rows, 8, 8 * rows), 64)))


def row_tv(rows: int, cols: int):
    """A warpgroup's TV layout of a (rows, cols) tile whose warps each cover 32 consecutive columns of one row: thread
    t → column t % 64 (+64·j for value block j), row t // 64 (+2 per value), element m + rows·n of the tile.
    ``row_tv(64, 64)`` = ((64,2),(32,1)):((64,1),(2,4096)); post: a bijection of 128 threads × rows·cols/128 values
    onto the tile (cols a multiple of 64, rows even)."""
    import layoutc as lc

    return lc.Layout(((64, 2), (rows // 2, cols // 64)), ((rows, 1), (2, 64 * rows)))


def operand_ring(dtype: str, rows: int, stages: int, major: str):
    bk = k_tile(dtype)
    """(the smem ring of an operand in GLOBAL mode order, the TMA box of one load, loads per stage) for an operand of
    ``rows`` MN rows × one k-tile: ``major = "K"`` — the global tensor is (rows, K) with K contiguous, one box per stage, the
    ring is already (MN, K, stage) for wgmma; ``"MN"`` — the global tensor is (K, rows) with MN contiguous, the ring
    is the MN-major GMMA layout with its modes in (K, MN, stage) order (what TMA writes), loaded in boxes of 64 MN
    columns (one 128-byte SW128 row), and seen by wgmma through ``smem.permute``."""
    if major == "K":
        ring = gmma_smem_layout("K", "SW128", dtype, (rows, bk, stages))
        return ring, stage_sliced(ring), 1
    if major != "MN":
        raise ValueError(f"major must be 'K' or 'MN', not {major!r}")
    # atoms along K first (order (1, 0, 2)): each 64-column MN chunk of a stage is then one contiguous TMA box
    mn = gmma_smem_layout("MN", "SW128", dtype, (rows, bk, stages), order=(1, 0, 2))
    ring = permute_layout(mn, (1, 0, 2))
    return ring, tile_split(stage_sliced(ring), 1, 64)[0], rows // 64


def build(dtype: str = "bf16", bm: int = 128, bn: int = 256, stages: int = 4, group: int = 8, pending: int = 1,
          cluster: int = 1, epilogue: str = "direct", a_major: str = "K", b_major: str = "K", promote: int = 1,
          registers: tuple = (24, 240), epilogue_split: int = 1, streamk: bool = False,
          streamk_min_saving: int = STREAMK_MIN_SAVING, overlap: int = 0):
    """The kernel for one configuration. ``cluster = 2``: CTAs run in pairs along M that share their B panel: each
    CTA loads its own A box and HALF of the B box, multicast into both CTAs' smem (the pipeline's stages are then
    released by the consumers of both CTAs). ``epilogue = "tma"``: each consumer warpgroup writes its bf16 rows
    into a swizzled smem tile and one of its threads stores them with TMA (64-column boxes), asynchronously: the
    warpgroup goes on with the next tile's mainloop while the store drains (C's rows must then be 16-byte aligned:
    N a multiple of 8); ``epilogue_split = S`` stages the tile in S column blocks through a buffer S times smaller
    (BM = 128: 128 × 256 bf16 needs 64 KiB at once, 32 KiB in halves — room for a 4th pipeline stage); ``"direct"``: st.global from the registers through the accumulator's TV layout (any N);
    ``"rows"``: through smem like ``"tma"`` (``epilogue_split`` alike), then st.global by ``row_tv`` — each warp
    writes 32 consecutive elements of a row — for C rows TMA cannot store (not 16-byte aligned).
    ``a_major``/``b_major``: how A and B lie in global memory — ``"K"``: A (M, K) and B (N, K) with K contiguous;
    ``"MN"``: A (K, M) / B (K, N) with M / N contiguous (C = A·B for a row-major B). The kernel is the same; only the
    layouts (and the number of 64-column TMA boxes per stage) change. MN-major operands are built for clusters of 1.
    ``registers``: the (producer, consumer) setmaxnreg budgets; the default gives the consumers all the file leaves
    (fp8 with BN = 192 holds a 96-register chunk and a 96-register total: at 232 it spilled 32 bytes, at 240 none).
    ``dtype`` e4m3/e5m2 (fp8, K-major): k-tiles of 128, C in bf16 = (A·Bᵀ)·scale_a·scale_b with per-tensor f32 scales
    (parameters ``%scale_a``, ``%scale_b``), and the products of every ``promote`` k-tiles (128·promote deep) are
    summed into a separate f32 accumulator: their wgmmas start from zero and the finished chunk is added with ordinary
    f32 adds — DeepGEMM's promotion, since fp8 wgmma accumulates with fewer mantissa bits (``promote = 1``: every
    k-tile, as DeepGEMM; larger intervals stall the tensor cores less often and round more). The two consumer
    warpgroups promote ``promote // 2`` k-tiles apart, so that one's wait-and-add overlaps the other's wgmmas.
    ``streamk``: the tiles of the last, partial wave are shared out by k-tiles (stream-K after data-parallel waves,
    see ``streamk_split``): every cluster takes an equal run of the remaining k-tiles, a tile's runs are summed in
    f32 through the workspace ``%work`` (``streamk_buffers``) and ordered by the flags ``%flags`` (zero before the
    launch, zero again after it); the cluster that runs a tile's last k-tile adds the others' partial sums and stores
    C. A launch takes this path only where it shortens the last wave by at least ``streamk_min_saving`` k-tiles
    (the partial sums cost about 15; ``STREAMK_MIN_SAVING``), else it runs every tile data-parallel. bf16/f16 only.
    ``overlap = P`` (TMA-store epilogue, data-parallel; fp8 with promote > 1): a tile's C leaves the registers as packed
    ``out_dtype`` values and is staged and stored only once the wgmmas of the NEXT tile's first P k-tiles are queued,
    so that the tensor cores work through the epilogue instead of waiting for it (``k_tiles``'s hook); one trip past
    the last tile stores its C."""
    if promote < 1:
        raise ValueError(f"promote must be at least 1 (k-tiles per promotion), not {promote}")
    fp8 = dtype in ("e4m3", "e5m2")
    if overlap < 0:
        raise ValueError(f"overlap must be 0 (no overlap) or the k-tiles queued before the epilogue, not {overlap}")
    if overlap and (epilogue != "tma" or streamk or (fp8 and promote == 1) or pending != 1):
        raise ValueError("overlap (the epilogue behind the next tile's wgmmas) is built for the TMA-store epilogue "
                         "of data-parallel tiles with one k-tile in flight: epilogue='tma', streamk=False, pending=1 "
                         "(fp8: promote > 1)")
    if streamk and fp8:
        raise ValueError("stream-K is built for bf16/f16: fp8's promotion chunks run over whole tiles")
    out_dtype = "bf16" if fp8 else dtype
    bk = k_tile(dtype)
    rows = bm // 2                                   # rows of each of the two consumer warpgroups
    if cluster > 1 and (a_major, b_major) != ("K", "K"):
        raise ValueError("clusters (B multicast) are built for K-major operands; use cluster=1 with MN-major ones")
    a_ring, a_box, a_loads = operand_ring(dtype, bm, stages, a_major)
    b_ring, b_box, b_loads = operand_ring(dtype, bn, stages, b_major)
    b_part = tile_split(b_box, 0, bn // cluster)[0] if cluster > 1 else b_box   # what one CTA loads of B
    a_mk = stage_sliced(a_ring) if a_major == "K" else permute_layout(stage_sliced(a_ring), (1, 0))
    a_rows_t = smem(dtype, tile_split(a_mk, 0, rows)[0])
    stage_bytes = (bm + bn) * bk * ELEMENT_BYTES[dtype]
    acc_t = frag("f32", (bn // 2) * (rows // 64))
    work = mul(cdiv("m", bm * cluster), cdiv("n", bn))
    grid = (hmin(work, "sms"), 1, 1) if cluster == 1 else (mul(hmin(work, cdiv("sms", cluster)), cluster), 1, 1)
    staged = epilogue in ("tma", "rows")
    if epilogue_split < 1 or (staged and bn % (64 * epilogue_split)):
        raise ValueError(f"epilogue_split {epilogue_split}: BN = {bn} must split into blocks of a multiple of 64 "
                         "columns (whole 64-column SW128 atoms of the staged epilogue)")
    if epilogue_split > 1 and (not staged or rows != 64):
        raise ValueError("epilogue_split > 1 stages column blocks of a TMA-store or rows epilogue with BM = 128 (a "
                         "column block is then a run of the accumulator's values)")
    c_cols = bn // epilogue_split                     # columns staged in shared memory at a time
    if staged:
        c_ring = gmma_smem_layout("K", "SW128", out_dtype, (bm, c_cols))  # the CTA's staged C, 64-column SW128 atoms
    if epilogue == "tma":
        c_rows = tile_split(c_ring, 0, rows)[0]                           # one consumer warpgroup's rows
        c_box = tile_split(c_rows, 1, 64)[0]                              # one TMA store: rows x 64 columns
        c_param = tmap(out_dtype, 2, c_box)
    elif epilogue in ("direct", "rows"):
        c_param = gtensor(out_dtype, 2)
    else:
        raise ValueError(f"epilogue must be 'direct', 'rows' or 'tma', not {epilogue!r}")
    kb = KernelBuilder(
        "gemm_hopper", grid=grid, block=(384, 1, 1), cluster=(cluster, 1, 1) if cluster > 1 else None,
        a=tmap(dtype, 2, a_box), b=tmap(dtype, 2, b_part), c=c_param, m=i32, n=i32, k=i32, sms=i32,
        **({"scale_a": f32, "scale_b": f32} if fp8 else {}),
        **({"work": gtensor("f32", 2), "flags": gtensor("i32", 1)} if streamk else {}))
    b = kb.b
    sa = b.smem.alloc(type=smem(dtype, a_ring), align=1024, name="sa")
    sb = b.smem.alloc(type=smem(dtype, b_ring), align=1024, name="sb")
    if staged:
        sc = b.smem.alloc(type=smem(out_dtype, c_ring), align=1024, name="sc")
    if cluster > 1:
        pipe = b.pipeline.alloc(stages=stages, consumers=8, cluster=cluster, name="pipe")
    else:
        pipe = b.pipeline.alloc(stages=stages, consumers=8, name="pipe")
    thread = b.gpu.thread_id(dim="x", name="thread")
    wg = b.gpu.warpgroup_id(name="wg")
    if cluster > 1:
        # the work items are cluster tiles (cluster·BM rows); CTA `rank` of a cluster takes its BM-row part
        c_cluster = b.const(cluster, i32, name="csize")
        rank = b.gpu.cluster_rank(name="rank")
        first = b.arith.div(b.gpu.block_id(dim="x", name="block"), c_cluster, name="first")
        step = b.arith.div(b.gpu.grid_dim(dim="x", name="grid"), c_cluster, name="step")
    else:
        first = b.gpu.block_id(dim="x", name="first")
        step = b.gpu.grid_dim(dim="x", name="step")
    c0 = b.const(0, i32, name="c0")
    c1 = b.const(1, i32, name="c1")
    c_bk = b.const(bk, i32, name="bk")
    c_bm = b.const(bm, i32, name="bm")
    c_bn = b.const(bn, i32, name="bn")
    c_rows = b.const(rows, i32, name="rows")
    c_stages = b.const(stages, i32, name="stages")
    c_wg = b.const(128, i32, name="wgsize")
    tiles_m = b.arith.cdiv(kb["m"], b.const(bm * cluster, i32, name="bmc") if cluster > 1 else c_bm,
                           name="tiles_m")
    tiles_n = b.arith.cdiv(kb["n"], c_bn, name="tiles_n")
    tiles = b.arith.mul(tiles_m, tiles_n, name="tiles")
    ktiles = b.arith.cdiv(kb["k"], c_bk, name="ktiles")
    leader = b.arith.cmp(thread, c0, pred="eq", name="leader")
    with b.scf.if_(leader).then:
        b.pipeline.init(pipe)
        b.scf.yield_()
    if cluster > 1:
        b.barrier.cluster()   # every CTA's barriers are initialised before any multicast or remote release
    else:
        b.barrier.cta()

    if streamk:
        split = streamk_split(b, first, step, tiles, ktiles, c0, c1, cluster, streamk_min_saving)
        rank_or_zero = rank if cluster > 1 else c0
    role = b.roles(producer=(1, registers[0]), consumer=(2, registers[1]))
    with role["producer"]:
        with b.scf.if_(leader).then:
            def produce(t, lo, hi, it):
                """The TMA loads of k-tiles lo … hi-1 of work item t; → the iteration counter after them."""
                tm, tn = b.sched.tile(t, tiles_m, tiles_n, group=group, name=["tm", "tn"])
                if cluster > 1:
                    tm = b.arith.add(b.arith.mul(tm, c_cluster, name="tmc"), rank, name="tm_own")
                m0 = b.arith.mul(tm, c_bm, name="m0")
                n0 = b.arith.mul(tn, c_bn, name="n0")
                if cluster > 1:
                    c_part = b.const(bn // cluster, i32, name="bpart")
                    n_part = b.arith.add(n0, b.arith.mul(rank, c_part, name="part_off"), name="n_part")
                with b.scf.for_(lo, hi, c1, it, args=("kt", "pit"), names=["it_next"]) as loop:
                    kt, pit = loop
                    s = b.pipeline.acquire(pipe, pit, bytes=stage_bytes, name="s")
                    a_dst = b.smem.slice(sa, s, name="a_dst")
                    b_dst = b.smem.slice(sb, s, name="b_dst")
                    kc = b.arith.mul(kt, c_bk, name="kc")
                    if a_major == "K":
                        b.tma.load(kb["a"], a_dst, pipe, s, m0, kc)
                    else:
                        load_mn_major(b, kb["a"], a_dst, pipe, s, kc, m0, a_loads, "a")
                    if b_major == "MN":
                        load_mn_major(b, kb["b"], b_dst, pipe, s, kc, n0, b_loads, "b")
                    elif cluster > 1:
                        b_half = b.smem.tile(b_dst, rank, mode=0, size=bn // cluster, name="b_part_dst")
                        b.tma.load(kb["b"], b_half, pipe, s, n_part, kc, multicast=True)
                    else:
                        b.tma.load(kb["b"], b_dst, pipe, s, n0, kc)
                    b.scf.yield_(b.arith.add(pit, c1, name="pit1"))
                return loop.results[0]

            if streamk:
                with b.scf.for_(c0, split["items"], c1, c0, args=("i", "it"), names=["it_done"]) as (i, it):
                    t, lo, hi = streamk_item(b, split, i, ktiles, c0, "p")
                    b.scf.yield_(produce(t, lo, hi, it))
            else:
                with b.scf.for_(first, tiles, step, c0, args=("t", "it"), names=["it_done"]) as (t, it):
                    b.scf.yield_(produce(t, c0, ktiles, it))
            b.scf.yield_()
    with role["consumer"]:
        cw = b.arith.sub(wg, c1, name="cw")
        lt = b.arith.rem(thread, c_wg, name="lt")
        row_off = b.arith.mul(cw, c_rows, name="row_off")
        fzero = b.const(0.0, f32, name="fzero")
        def consume(ct, lo, hi, cit, hook=None):
            """The wgmmas of k-tiles lo … hi-1 of work item ct from the iteration counter cit on (``hook``: see
            ``k_tiles``); → (the f32 accumulator, completed; the counter after them; the tile's (m, n))."""
            tm2, tn2 = b.sched.tile(ct, tiles_m, tiles_n, group=group, name=["tm2", "tn2"])
            if cluster > 1:
                tm2 = b.arith.add(b.arith.mul(tm2, c_cluster, name="tmc2"), rank, name="tm2_own")
            init = b.frag.splat(fzero, type=acc_t, name="init")

            def issue(acc_in, kit, tag=""):
                """Wait for iteration ``kit``'s stage and queue its wgmmas onto ``acc_in``; → (acc, stage)."""
                s2 = b.pipeline.wait(pipe, kit, name=f"s2{tag}")
                a_stage = b.smem.slice(sa, s2, name=f"a_stage{tag}")
                if a_major == "MN":
                    a_stage = b.smem.permute(a_stage, order=(1, 0), name=f"a_stage_mk{tag}")
                a_rows = b.smem.tile(a_stage, cw, mode=0, size=rows, name=f"a_rows{tag}")
                assert a_rows.type == a_rows_t
                b_stage = b.smem.slice(sb, s2, name=f"b_stage{tag}")
                if b_major == "MN":
                    b_stage = b.smem.permute(b_stage, order=(1, 0), name=f"b_stage_nk{tag}")
                b.wgmma.fence()
                acc_out = b.wgmma.mma(a_rows, b_stage, acc_in, name=f"acc_out{tag}")
                b.wgmma.commit()
                return acc_out, s2

            def k_tiles(lo, hi, acc_start, kit_start, hook=None, tag=""):
                """The wgmmas of k-tiles lo … hi-1 accumulated onto ``acc_start``, each k-tile's stage released once
                the NEXT k-tile's wgmmas are queued (``pending``); → (the accumulator, still in flight unless
                pending = 0, and the iteration counter after hi-1). The last stage is released by the caller.
                ``hook`` (pending = 1): the wgmmas of the first ``overlap`` k-tiles are queued without waiting, then
                ``hook()`` runs while the tensor cores work through them (the previous tile's epilogue), then their
                stages but the last are released. No branch carries the accumulator in flight (C7514): the peeled
                k-tiles are a loop of at most ``overlap`` trips."""
                if hook is not None:
                    c_overlap = b.const(overlap, i32, name=f"overlap{tag}")
                    peel_end = b.arith.min(b.arith.add(lo, c_overlap, name=f"peel_end0{tag}"), hi,
                                           name=f"peel_end{tag}")
                    with b.scf.for_(lo, peel_end, c1, acc_start, kit_start,
                                    args=(f"kp{tag}", f"acc_p{tag}", f"kit_p{tag}"),
                                    names=[f"acc_peeled{tag}", f"kit_peeled{tag}"]) as ploop:
                        _kp, acc_p, kit_p = ploop
                        acc_q, _s = issue(acc_p, kit_p, f"_peel{tag}")
                        b.scf.yield_(acc_q, b.arith.add(kit_p, c1, name=f"kit_p1{tag}"))
                    acc_start, kit_peeled = ploop.results
                    hook()
                    if overlap > 1:
                        b.wgmma.wait(pending=1)
                        # every peeled k-tile but the last is done: their stages go back to the producer
                        kit_last = b.arith.max(b.arith.sub(kit_peeled, c1, name=f"kit_last0{tag}"), kit_start,
                                               name=f"kit_last{tag}")
                        with b.scf.for_(kit_start, kit_last, c1, args=(f"kr{tag}",)) as rloop:
                            (kr,) = rloop
                            b.pipeline.release(pipe, b.arith.rem(kr, c_stages, name=f"kr_s{tag}"))
                            b.scf.yield_()
                    loop_lo, kit_start = peel_end, kit_peeled
                else:
                    loop_lo = lo
                # has_prev and any_k compare with lo: after peeled k-tiles the loop's first trip releases the last one
                with b.scf.for_(loop_lo, hi, c1, acc_start, kit_start,
                                args=(f"kt2{tag}", f"acc_in{tag}", f"kit{tag}"),
                                names=[f"acc{tag}", f"kit_end{tag}"]) as mloop:
                    kt2, acc_in, kit = mloop
                    acc_out, s2 = issue(acc_in, kit, tag)
                    if pending:
                        b.wgmma.wait(pending=pending)
                        # the wgmmas of the previous k-tile are done: hand its stage back to the producer
                        has_prev = b.arith.cmp(kt2, lo, pred="gt", name=f"has_prev{tag}")
                        release_previous(b, pipe, has_prev, kit, c1, c_stages, f"prev{tag}")
                    else:
                        acc_out = b.wgmma.wait(acc_out, pending=0, name=f"acc_done_k{tag}")
                        b.pipeline.release(pipe, s2)
                    b.scf.yield_(acc_out, b.arith.add(kit, c1, name=f"kit1{tag}"))
                acc, kit_end = mloop.results
                if pending:
                    # the accumulators pass through the wait: nothing reads them before the last wgmmas completed
                    acc = b.wgmma.wait(acc, pending=0, name=f"acc_done{tag}")
                    any_k = b.arith.cmp(hi, lo, pred="gt", name=f"any_k{tag}")
                    release_previous(b, pipe, any_k, kit_end, c1, c_stages, f"last{tag}")
                return acc, kit_end

            if fp8 and promote == 1:
                acc, kit_end = promote_every_k_tile(b, pipe, sa, sb, cw, rows, bk, acc_t, init, cit, ktiles, c0, c1,
                                                    c_stages, fzero)
            elif fp8:
                # promotion: the wgmmas of `promote` k-tiles sum into a chunk that starts from zero; the finished
                # chunk joins the f32 total with ordinary adds. The two consumer warpgroups promote half a chunk
                # apart (warpgroup 1's chunks start promote/2 k-tiles earlier, its first one clipped at 0): while
                # one waits for its chunk and adds it, the other's wgmmas keep the tensor cores busy. With a hook
                # the first chunk IS the total (no zero total is live while the hook holds the previous tile's C;
                # without one, a chunk loop from the first chunk on keeps BN = 224's 224 accumulators unspilled).
                c_promote = b.const(promote, i32, name="promote")
                stagger = b.arith.mul(cw, b.const(promote // 2, i32, name="half_chunk"), name="stagger")
                if hook is not None:
                    chunks_from = b.arith.sub(c_promote, stagger, name="second_chunk")
                    first_end = b.arith.min(chunks_from, hi, name="first_end")
                    total0, kit0 = k_tiles(lo, first_end, init, cit, hook, "_first")
                else:
                    chunks_from, total0, kit0 = b.arith.sub(lo, stagger, name="first_chunk"), init, cit
                with b.scf.for_(chunks_from, hi, c_promote, total0, kit0,
                                args=("kchunk", "total_in", "pkit"), names=["total", "kit_done"]) as ploop:
                    kchunk, total_in, pkit = ploop
                    kchunk_lo = b.arith.max(kchunk, lo, name="kchunk_lo")
                    kchunk_end = b.arith.min(b.arith.add(kchunk, c_promote, name="kchunk_next"), hi,
                                             name="kchunk_end")
                    zero = b.frag.splat(fzero, type=acc_t, name="zero")
                    chunk, chunk_kit = k_tiles(kchunk_lo, kchunk_end, zero, pkit)
                    b.scf.yield_(b.frag.add(total_in, chunk, name="total_out"), chunk_kit)
                acc, kit_end = ploop.results
            else:
                acc, kit_end = k_tiles(lo, hi, init, cit, hook)
            return acc, kit_end, tm2, tn2

        def c_values(acc):
            """The finished f32 accumulator → C's values (``out_dtype``; fp8: times the scales)."""
            if fp8:
                scale = b.arith.mul(kb["scale_a"], kb["scale_b"], name="scale")
                acc = b.frag.mul(acc, scale, name="scaled")
            return b.frag.cast(acc, type=frag(out_dtype, acc_t.shape), name="out")

        def store_tile(acc, tm2, tn2):
            """C of the tile (tm2, tn2) from the finished f32 accumulator ``acc``."""
            store_out(c_values(acc), tm2, tn2)

        def store_out(out, tm2, tn2):
            """C of the tile (tm2, tn2): its values ``out`` (``c_values``)."""
            tile_m0 = b.arith.mul(tm2, c_bm, name="tile_m0")
            r0 = b.arith.add(tile_m0, row_off, name="r0")
            n0c = b.arith.mul(tn2, c_bn, name="n0c")
            if epilogue == "direct":
                c_tile = b.gmem.tile(kb["c"], r0, n0c, shape=(rows, bn), name="c_tile")
                b.gmem.store(c_tile, lt, out, tv=accumulator_block_tv(rows, bn))
            elif epilogue == "rows":
                # C rows that TMA cannot store (not 16-byte aligned): the accumulator goes through shared memory so
                # that each warp then stores 32 consecutive elements of one row (2 or 3 sectors per instruction)
                # instead of 4 elements in each of 8 rows (8 sectors), one column block at a time; the named
                # barriers over both consumer warpgroups keep a block's writes after the previous block's reads
                c_mine = b.smem.tile(sc, cw, mode=0, size=rows, name="c_mine")
                part_values = acc_t.size // epilogue_split
                for h in range(epilogue_split):
                    tag = f"_{h}" if epilogue_split > 1 else ""
                    b.barrier.named(id=1, threads=256)
                    stage_column_block(b, c_mine, lt, out, h, epilogue_split, rows, c_cols, out_dtype, tag)
                    b.barrier.named(id=1, threads=256)
                    row_major = b.smem.load(c_mine, lt, tv=row_tv(rows, c_cols), type=frag(out_dtype, part_values),
                                            name=f"row_major{tag}")
                    col0 = n0c if h == 0 else b.arith.add(n0c, b.const(h * c_cols, i32, name=f"c_block{tag}"),
                                                          name=f"n0c{tag}")
                    c_tile = b.gmem.tile(kb["c"], r0, col0, shape=(rows, c_cols), name=f"c_tile{tag}")
                    b.gmem.store(c_tile, lt, row_major, tv=row_tv(rows, c_cols))
            else:
                # the C rows in smem may be rewritten only once the previous tile's TMA stores have read them: each
                # warpgroup's thread 0 issued (and now waits for) its stores, and a named barrier over both consumer
                # warpgroups (256 threads; bar.sync 1) tells every consumer thread
                # With epilogue_split = S the tile goes out in S column blocks through one (rows, BN/S) buffer per
                # warpgroup: block h is the accumulator's values h·BN/(2S) … (frag.slice), and it is written once
                # block h-1's stores have read the buffer.
                wg_leader = b.arith.cmp(lt, c0, pred="eq", name="wg_leader")
                c_mine = b.smem.tile(sc, cw, mode=0, size=rows, name="c_mine")
                c_col = b.const(64, i32, name="c64")
                for h in range(epilogue_split):
                    tag = f"_{h}" if epilogue_split > 1 else ""
                    with b.scf.if_(wg_leader).then:
                        b.tma.store_wait(pending=0, read=True)
                        b.scf.yield_()
                    b.barrier.named(id=1, threads=256)
                    stage_column_block(b, c_mine, lt, out, h, epilogue_split, rows, c_cols, out_dtype, tag)
                    b.fence.proxy_async()   # the generic smem writes before the async-proxy (TMA) reads
                    b.barrier.named(id=1, threads=256)
                    with b.scf.if_(wg_leader).then:
                        for j in range(c_cols // 64):
                            cj = b.const(j + h * (c_cols // 64), i32, name=f"cj{j}{tag}")
                            box = b.smem.tile(c_mine, b.const(j, i32, name=f"cb{j}{tag}") if h else cj, mode=1,
                                              size=64, name=f"c_box{j}{tag}")
                            col = b.arith.add(n0c, b.arith.mul(cj, c_col, name=f"c_off{j}{tag}"),
                                              name=f"c_col{j}{tag}")
                            b.tma.store(kb["c"], box, r0, col)
                        b.tma.store_commit()
                        b.scf.yield_()
        if streamk:
            with b.scf.for_(c0, split["items"], c1, c0, args=("ci", "cit"), names=["cit_done"]) as (i, cit):
                ct, lo, hi = streamk_item(b, split, i, ktiles, c0, "c")
                acc, kit_end, tm2, tn2 = consume(ct, lo, hi, cit)
                finishes = b.arith.cmp(hi, ktiles, pred="eq", name="finishes")
                finish = b.scf.if_(finishes)
                with finish.then:
                    # the tile's last k-tile is ours: the clusters that ran its earlier k-tiles left partial sums
                    joins = b.arith.cmp(lo, c0, pred="gt", name="joins")
                    join = b.scf.if_(joins, types=(acc_t,), names=["whole"])
                    with join.then:
                        b.scf.yield_(streamk_join(b, kb, split, ct, acc, ktiles, rank_or_zero, cw, lt, acc_t))
                    with join.otherwise:
                        b.scf.yield_(acc)
                    store_tile(join.results[0], tm2, tn2)
                    b.scf.yield_()
                with finish.otherwise:
                    streamk_contribute(b, kb, split, ct, acc, rank_or_zero, cw, lt, acc_t)
                    b.scf.yield_()
                b.scf.yield_(kit_end)
        elif overlap:
            # a tile's C is held as packed values and stored by the hook of the next trip, behind that tile's first
            # wgmmas; one trip past the tiles (no k-tiles, tile 0's coordinates) only stores the last one
            held0 = b.frag.cast(b.frag.splat(fzero, type=acc_t, name="held_zero"), type=frag(out_dtype, acc_t.shape),
                                name="held0")
            trips_end = b.arith.select(b.arith.cmp(tiles, c0, pred="gt", name="any_tile"),
                                       b.arith.add(tiles, step, name="tiles_flush"), tiles, name="trips_end")
            with b.scf.for_(first, trips_end, step, c0, held0, c0, c0, args=("ct", "cit", "held", "held_m", "held_n"),
                            names=["cit_done", "held_last", "held_m_last", "held_n_last"]) as loop:
                ct, cit, held, held_m, held_n = loop
                real = b.arith.cmp(ct, tiles, pred="lt", name="real_tile")

                def hook():
                    with b.scf.if_(b.arith.cmp(ct, first, pred="ne", name="holds_c")).then:
                        store_out(held, held_m, held_n)
                        b.scf.yield_()

                acc, kit_end, tm2, tn2 = consume(b.arith.select(real, ct, c0, name="ct_tile"), c0,
                                                 b.arith.select(real, ktiles, c0, name="tile_ktiles"), cit, hook)
                b.scf.yield_(kit_end, c_values(acc), tm2, tn2)
        else:
            with b.scf.for_(first, tiles, step, c0, args=("ct", "cit"), names=["cit_done"]) as (ct, cit):
                acc, kit_end, tm2, tn2 = consume(ct, c0, ktiles, cit)
                store_tile(acc, tm2, tn2)
                b.scf.yield_(kit_end)
    if epilogue == "tma":
        # the last tile's stores must have read shared memory before the CTA ends
        with role_end_wait(b, thread, wg, c1, c_wg):
            b.tma.store_wait(pending=0, read=True)
            b.scf.yield_()
    if cluster > 1:
        b.barrier.cluster()   # no CTA exits while a peer may still multicast into it or release its stages
    return kb.module("examples/gemm_hopper.py")


# Stream-K: a partial sum is one consumer warpgroup's accumulator, its 128 threads × V values stored as V/4 rows of
# WORK_COLUMNS f32 in which thread t holds columns 4t … 4t+3 (16-byte stores, one 512-byte row per warp instruction)
WORK_COLUMNS = 512


def work_tv(values: int):
    """The TV layout of a partial sum over its (values/4, WORK_COLUMNS) block: thread t, value v → row v // 4, column
    4t + v % 4. ``work_tv(128)`` = (128,(4,32)):(128,(32,1)); post: a bijection onto the block."""
    import layoutc as lc

    return lc.Layout((128, (4, values // 4)), (values, (values // 4, 1)))


def streamk_buffers(bm: int, bn: int, cluster: int, ctas: int) -> dict:
    """The shapes of the stream-K kernel's ``work`` (f32, any contents) and ``flags`` (i32, ZERO before the first
    launch; every launch leaves them zero) for a grid of at most ``ctas`` CTAs: each cluster writes at most two
    partial sums (the head of one tile, the tail of another), each of its CTAs' two consumer warpgroups one block;
    one flag per (tile of the last wave, CTA rank, consumer thread)."""
    clusters = ctas // cluster
    values = (bn // 2) * (bm // 2 // 64)
    return {"work": (clusters * 2 * cluster * 2 * (values // 4), WORK_COLUMNS), "flags": (clusters * cluster * 256,)}


def streamk_split(b, first, step, tiles, ktiles, c0, c1, cluster: int, min_saving: int) -> dict:
    """The work of cluster ``first`` of ``step``: the data-parallel tiles first, b, b + step, … below ``dp_tiles``,
    then an equal share of the k-tiles of the last ``tiles - dp_tiles`` tiles (numbered in k-tile order across
    tiles): units = min(step, those k-tiles) clusters take runs [s, e) = [c·total/units, (c+1)·total/units), each
    within at most two tiles (a run is shorter than a tile). ``dp_tiles`` is ``tiles - tiles % step`` (whole waves)
    when the longest run is at least ``min_saving`` k-tiles shorter than a tile, else ``tiles`` (no stream-K). A
    run's pieces go LAST tile first, so that the piece finishing a tile is a cluster's last work: the earlier
    clusters' pieces of that tile were their first (or only) ones. → the values the items and the join need."""
    rest = b.arith.rem(tiles, step, name="rest_tiles")
    rest_ktiles = b.arith.mul(rest, ktiles, name="rest_ktiles")
    rest_units = b.arith.max(b.arith.min(step, rest_ktiles, name="rest_units0"), c1, name="rest_units")
    longest = b.arith.cdiv(rest_ktiles, rest_units, name="longest_run")
    saving = b.arith.sub(ktiles, longest, name="saving")
    pays = b.arith.cmp(saving, b.const(min_saving, i32, name="min_saving"), pred="ge", name="sk_pays")
    sk_tiles = b.arith.select(pays, rest, c0, name="sk_tiles")
    dp_tiles = b.arith.sub(tiles, sk_tiles, name="dp_tiles")
    dp_items = b.arith.cdiv(b.arith.sub(dp_tiles, first, name="dp_left"), step, name="dp_items")
    total = b.arith.mul(sk_tiles, ktiles, name="sk_ktiles")
    units = b.arith.max(b.arith.min(step, total, name="sk_units0"), c1, name="sk_units")
    ktiles_1 = b.arith.max(ktiles, c1, name="ktiles_1")
    start = b.arith.div(b.arith.mul(first, total, name="sk_s0"), units, name="sk_start")
    end = b.arith.div(b.arith.mul(b.arith.add(first, c1, name="sk_next"), total, name="sk_e0"), units, name="sk_end")
    first_tile = b.arith.div(start, ktiles_1, name="sk_first_tile")
    last_tile = b.arith.div(b.arith.sub(end, c1, name="sk_last_k"), ktiles_1, name="sk_last_tile")
    # clusters past the units (fewer k-tiles left than clusters) have no run
    in_sk = b.arith.and_(b.arith.cmp(start, end, pred="lt", name="nonempty_run"),
                         b.arith.cmp(first, units, pred="lt", name="a_unit"), name="in_sk")
    pieces = b.arith.select(in_sk, b.arith.add(b.arith.sub(last_tile, first_tile, name="sk_span"), c1,
                                               name="sk_pieces1"), c0, name="sk_pieces")
    items = b.arith.add(dp_items, pieces, name="items")
    return {"first": first, "step": step, "dp_tiles": dp_tiles, "dp_items": dp_items, "total": total,
            "units": units, "ktiles_1": ktiles_1, "start": start, "end": end, "first_tile": first_tile,
            "last_tile": last_tile, "items": items, "cluster": cluster, "c0": c0, "c1": c1}


def streamk_item(b, split, i, ktiles, c0, tag: str):
    """Work item ``i`` of the cluster: → (work index, first k-tile, end k-tile); values named ``…_{tag}``."""
    sk = b.arith.cmp(i, split["dp_items"], pred="ge", name=f"is_sk_{tag}")
    piece = b.arith.sub(i, split["dp_items"], name=f"piece_{tag}")
    j = b.arith.sub(split["last_tile"], piece, name=f"sk_j_{tag}")
    t_sk = b.arith.add(split["dp_tiles"], j, name=f"t_sk_{tag}")
    t_dp = b.arith.add(split["first"], b.arith.mul(i, split["step"], name=f"dp_off_{tag}"), name=f"t_dp_{tag}")
    jk = b.arith.mul(j, ktiles, name=f"sk_jk_{tag}")
    lo = b.arith.max(b.arith.sub(split["start"], jk, name=f"lo0_{tag}"), c0, name=f"lo_sk_{tag}")
    hi = b.arith.min(b.arith.sub(split["end"], jk, name=f"hi0_{tag}"), ktiles, name=f"hi_sk_{tag}")
    return (b.arith.select(sk, t_sk, t_dp, name=f"t_{tag}"), b.arith.select(sk, lo, c0, name=f"lo_{tag}"),
            b.arith.select(sk, hi, ktiles, name=f"hi_{tag}"))


def _partial_block(b, kb, split, unit, piece, rank, cw, values: int, name: str):
    """The workspace block of the partial sum of (cluster ``unit``, its piece ``piece``, CTA ``rank``, warpgroup
    ``cw``)."""
    c2 = b.const(2, i32, name=f"c2_{name}")
    slot = b.arith.add(b.arith.mul(unit, c2, name=f"slot0_{name}"), piece, name=f"slot_{name}")
    cta = b.arith.add(b.arith.mul(slot, b.const(split["cluster"], i32, name=f"ncta_{name}"), name=f"cta0_{name}"),
                      rank, name=f"cta_{name}")
    block = b.arith.add(b.arith.mul(cta, c2, name=f"wgb0_{name}"), cw, name=f"wgb_{name}")
    row = b.arith.mul(block, b.const(values // 4, i32, name=f"rows_{name}"), name=f"row_{name}")
    return b.gmem.tile(kb["work"], row, split["c0"], shape=(values // 4, WORK_COLUMNS), name=f"block_{name}")


def _flag(b, split, j, rank, cw, lt, name: str):
    """The flag of (last-wave tile j, CTA rank, consumer thread cw·128 + lt)."""
    cta = b.arith.add(b.arith.mul(j, b.const(split["cluster"], i32, name=f"fcta_{name}"), name=f"fj_{name}"), rank,
                      name=f"fr_{name}")
    wgs = b.arith.add(b.arith.mul(cta, b.const(2, i32, name=f"fc2_{name}"), name=f"fw0_{name}"), cw,
                      name=f"fw_{name}")
    return b.arith.add(b.arith.mul(wgs, b.const(128, i32, name=f"f128_{name}"), name=f"ft0_{name}"), lt,
                       name=f"flag_{name}")


def streamk_contribute(b, kb, split, ct, acc, rank, cw, lt, acc_t):
    """A piece that does not finish its tile: store the partial sum, then signal (release) the tile's flag."""
    j = b.arith.sub(ct, split["dp_tiles"], name="cj")
    piece = b.arith.sub(j, split["first_tile"], name="cpiece")
    block = _partial_block(b, kb, split, split["first"], piece, rank, cw, acc_t.size, "own")
    b.gmem.store(block, lt, acc, tv=work_tv(acc_t.size))
    b.gmem.signal(kb["flags"], _flag(b, split, j, rank, cw, lt, "own"), split["c1"])


def streamk_join(b, kb, split, ct, acc, ktiles, rank, cw, lt, acc_t):
    """The piece that finishes its tile: wait until every cluster with an earlier piece of it signalled (acquire),
    add their partial sums (clusters c_lo … this one − 1, in k order), and reset the flag. → the tile's sum."""
    c1 = split["c1"]
    j = b.arith.sub(ct, split["dp_tiles"], name="jj")
    head = b.arith.add(b.arith.mul(j, ktiles, name="jk0"), c1, name="jk1")
    c_lo = b.arith.div(b.arith.sub(b.arith.mul(head, split["units"], name="jku"), c1, name="jku1"), split["total"],
                       name="c_lo")
    others = b.arith.sub(split["first"], c_lo, name="others")
    flag = _flag(b, split, j, rank, cw, lt, "join")
    b.gmem.wait(kb["flags"], flag, others)
    with b.scf.for_(c_lo, split["first"], c1, acc, args=("unit", "sum_in"), names=["sum"]) as loop:
        unit, sum_in = loop
        unit_start = b.arith.div(b.arith.mul(unit, split["total"], name="us0"), split["units"], name="unit_start")
        piece = b.arith.sub(j, b.arith.div(unit_start, split["ktiles_1"], name="unit_tile"), name="unit_piece")
        block = _partial_block(b, kb, split, unit, piece, rank, cw, acc_t.size, "other")
        part = b.gmem.load(block, lt, tv=work_tv(acc_t.size), type=acc_t, name="part")
        b.scf.yield_(b.frag.add(sum_in, part, name="sum_out"))
    b.gmem.signal(kb["flags"], flag, b.arith.sub(split["c0"], others, name="unsignal"))
    return loop.results[0]


def stage_column_block(b, c_mine, lt, out, h: int, split: int, rows: int, c_cols: int, out_dtype: str, tag: str):
    """Write column block ``h`` of ``split`` of the warpgroup's (rows, BN) accumulator ``out`` (already ``out_dtype``)
    into its smem rows ``c_mine`` (rows, c_cols = BN/split) through the accumulator's TV layout: block h is the run
    of values h·size/split … of the fragment (frag.slice; the whole fragment when split = 1)."""
    values = out.type.size // split
    part = out if split == 1 else b.frag.slice(out, offset=h * values, type=frag(out_dtype, values), name=f"out{tag}")
    # stmatrix.x4: each lane stores 8 values (four 8 × 8 matrices per warp instruction) instead of 2 per st.shared
    b.smem.stmatrix(c_mine, lt, part, tv=accumulator_block_tv(rows, c_cols), num=4, trans=False)


def release_previous(b, pipe, cond, kit, c1, c_stages, name):
    """``scf.if cond``: release the stage of iteration ``kit - 1`` (values ``%name``, ``%name_s``)."""
    with b.scf.if_(cond).then:
        prev = b.arith.sub(kit, c1, name=name)
        b.pipeline.release(pipe, b.arith.rem(prev, c_stages, name=f"{name}_s"))
        b.scf.yield_()


def promote_every_k_tile(b, pipe, sa, sb, cw, rows, bk, acc_t, init, cit, ktiles, c0, c1, c_stages, fzero):
    """The fp8 mainloop promoting every k-tile (128 deep, DeepGEMM's interval) with the two consumer warpgroups
    half a k-tile apart: each k-tile's wgmmas are issued as two K-halves (two m64nNk32 each); warpgroup 0's chunk is
    one k-tile, warpgroup 1's is the second half of one k-tile and the first half of the next. When warpgroup 0
    waits for its chunk and adds it, warpgroup 1's second half is still queued on the tensor cores, and the other way
    round. Each warpgroup has its own loop (an accumulator in flight must not pass through the phi of a branch: the
    copies would read it and ptxas would serialize every wgmma, C7514). → (the f32 total, the iteration counter after
    the last k-tile)."""
    half = bk // 2

    def stage_halves(kit, tag):
        s2 = b.pipeline.wait(pipe, kit, name=f"s2{tag}")
        a_rows = b.smem.tile(b.smem.slice(sa, s2, name=f"a_stage{tag}"), cw, mode=0, size=rows, name=f"a_rows{tag}")
        b_stage = b.smem.slice(sb, s2, name=f"b_stage{tag}")
        halves = [(b.smem.tile(a_rows, c, mode=1, size=half, name=f"a_{h}{tag}"),
                   b.smem.tile(b_stage, c, mode=1, size=half, name=f"b_{h}{tag}")) for h, c in (("lo", c0), ("hi", c1))]
        return s2, halves

    first_wg = b.arith.cmp(cw, c0, pred="eq", name="first_wg")
    branch = b.scf.if_(first_wg, types=(acc_t, i32), names=["total", "kit_end"])
    with branch.then:
        with b.scf.for_(c0, ktiles, c1, init, cit, args=("kt0", "total_in0", "kit0"),
                        names=["total0", "kit_end0"]) as loop0:
            _kt, total_in, kit = loop0
            s2, ((a_lo, b_lo), (a_hi, b_hi)) = stage_halves(kit, "_0")
            zero = b.frag.splat(fzero, type=acc_t, name="zero_0")
            b.wgmma.fence()
            whole = b.wgmma.mma(a_lo, b_lo, zero, name="whole_lo")
            whole = b.wgmma.mma(a_hi, b_hi, whole, name="whole")
            b.wgmma.commit()
            whole = b.wgmma.wait(whole, pending=0, name="whole_done")
            b.pipeline.release(pipe, s2)
            b.scf.yield_(b.frag.add(total_in, whole, name="total_out0"), b.arith.add(kit, c1, name="kit_next0"))
        b.scf.yield_(*loop0.results)
    with branch.otherwise:
        # the chunk opened by a k-tile's second half closes with the next k-tile's first half
        zero = b.frag.splat(fzero, type=acc_t, name="zero_1")
        with b.scf.for_(c0, ktiles, c1, init, zero, cit, args=("kt1", "total_in1", "open_in", "kit1"),
                        names=["total1", "open", "kit_end1"]) as loop1:
            kt, total_in, open_in, kit = loop1
            s2, ((a_lo, b_lo), (a_hi, b_hi)) = stage_halves(kit, "_1")
            b.wgmma.fence()
            closing = b.wgmma.mma(a_lo, b_lo, open_in, name="closing")
            b.wgmma.commit()
            closing = b.wgmma.wait(closing, pending=0, name="closing_done")
            has_prev = b.arith.cmp(kt, c0, pred="gt", name="has_prev1")
            release_previous(b, pipe, has_prev, kit, c1, c_stages, "prev1")
            total_out = b.frag.add(total_in, closing, name="total_out1")
            zero_k = b.frag.splat(fzero, type=acc_t, name="zero_k")
            b.wgmma.fence()
            opened = b.wgmma.mma(a_hi, b_hi, zero_k, name="opened")
            b.wgmma.commit()
            b.scf.yield_(total_out, opened, b.arith.add(kit, c1, name="kit_next1"))
        total1, open_chunk, kit_end1 = loop1.results
        # the last k-tile's second half is still in flight (a zero chunk when there was no k-tile)
        open_chunk = b.wgmma.wait(open_chunk, pending=0, name="open_done")
        any_k = b.arith.cmp(ktiles, c0, pred="gt", name="any_k1")
        release_previous(b, pipe, any_k, kit_end1, c1, c_stages, "last1")
        b.scf.yield_(b.frag.add(total1, open_chunk, name="total_all"), kit_end1)
    return branch.results


def load_mn_major(b, tmap_v, dst, pipe, s, kc, mn0, loads, tag):
    """The TMA loads of one MN-major stage: box j writes MN columns 64j … 64j+63 of the (K, MN) stage from global
    coordinate (kc, mn0 + 64j)."""
    c64 = b.const(64, i32, name=f"{tag}_c64")
    for j in range(loads):
        cj = b.const(j, i32, name=f"{tag}_j{j}")
        box = b.smem.tile(dst, cj, mode=1, size=64, name=f"{tag}_box{j}")
        col = b.arith.add(mn0, b.arith.mul(cj, c64, name=f"{tag}_off{j}"), name=f"{tag}_col{j}")
        b.tma.load(tmap_v, box, pipe, s, kc, col)


def role_end_wait(b, thread, wg, c1, c_wg):
    """``scf.if`` for the threads that issued TMA stores: thread 0 of each consumer warpgroup (warpgroups ≥ 1)."""
    lt = b.arith.rem(thread, c_wg, name="lt_end")
    first_lane = b.arith.cmp(lt, b.const(0, i32, name="c0_end"), pred="eq", name="first_lane")
    consumer = b.arith.cmp(wg, c1, pred="ge", name="consumer_wg")
    return b.scf.if_(b.arith.and_(first_lane, consumer, name="issued_stores")).then


if __name__ == "__main__":
    from ptxgen.ir.text import print_module
    print(print_module(build(**TILE_FILE)))
