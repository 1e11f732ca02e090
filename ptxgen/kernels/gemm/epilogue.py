"""C out of the consumers' f32 accumulators: scaled (fp8), plus the bias, converted to ``out_dtype``, and stored —
from the registers through the accumulator's TV layout (``direct``), or staged in swizzled shared memory by
stmatrix and stored by TMA (``tma``) or by warps along rows (``rows``)."""
from __future__ import annotations

import layoutc as lc
from layoutc.hopper import gmma_atom, gmma_smem_layout

from ptxgen.ir.builder import frag, gtensor, i32, partition, tmap
from ptxgen.ir.ops.smem import tile_split

from .config import ELEMENT_BYTES, TMA_STAGED_ROW_BYTES, GemmConfig
from .schedule import tile_origin


def accumulator_block_tv(rows: int, bn: int):
    """The TV layout of a consumer's (rows, BN) accumulator tile, rows = 64·P, named by its partition function:
    ``wgmma_acc(m = rows, n = BN)`` (thread t of the warpgroup, value v + (BN/2)·p → element m + rows·n: CLayout_64xN
    of each m64 block p, stacked along M; ``layoutc.hopper.wgmma_accumulator_tv``). Post: a ``Spelled`` partition
    call whose ``.value`` is that Layout, ``((4,8,4),(2,2,1)):((128,1,16),(64,8,512))`` for (64, 8)."""
    return partition("wgmma_acc", m=rows, n=bn)


def row_tv(rows: int, cols: int):
    """A warpgroup's TV layout of a (rows, cols) tile whose warps each store runs of ``row_width(cols)`` consecutive
    columns, named by its partition function ``copy(threads = (128/W, W), vector = 1, tile = (rows, cols))`` with
    W = ``row_width(cols)``: thread t → row t // W, column t % W; its values step 128/W rows, then W columns
    (``layoutc.hopper.copy_tv``; the ``.value`` of ``row_tv(64, 64)`` is ((64,2),32):((64,1),2)). Post: a bijection
    of 128 threads × rows·cols/128 values onto the tile (cols a multiple of 16, rows a multiple of 128/W)."""
    width = row_width(cols)
    return partition("copy", threads=(128 // width, width), vector=1, tile=(rows, cols))


def row_width(cols: int) -> int:
    """The columns one pass of ``row_tv``'s threads covers along a row: the widest of 64, 32, 16 that divides
    ``cols`` (64: each warp stores 32 consecutive elements of one row; 16: two rows of 16). ``row_width(96)`` = 32."""
    return next(width for width in (64, 32, 16) if cols % width == 0)


# the staged C's swizzles, widest first: a column block is staged in the widest whose row divides it. A block that
# none divides (an odd number of 16-byte runs: BN 104, a column-split 192 × 176's 88-column half; only the TMA-store
# epilogue, whose rows may be 8 columns of a 16-bit C) is staged in plain rows, "ROW": row-major and unswizzled, so
# that one TMA box stores the whole block in rows of its full width. An unswizzled atom's 16-byte rows would cut it
# into 8-column boxes of 16-byte rows, which the TMA store writes to C in half sectors, far more slowly.
STAGED_SWIZZLES = ("SW128", "SW64", "SW32")
ROW = "ROW"


def staged_c_swizzle(config: GemmConfig) -> str:
    """The staged C's (``rows``/``tma``) form: the widest of SW128, SW64, SW32 (K-major atom rows of 128, 64, 32
    bytes) whose row's columns divide a column block (``staged_block``), so that every TMA box (one atom row wide: a
    swizzled box spans at most its swizzle's row) is whole, and a warp's stmatrix writes of 8 rows × 16 bytes still
    cover the 32 banks once; else ``"ROW"`` (the ``tma`` epilogue's blocks of an odd number of 16-byte runs: plain
    row-major rows, which cover the banks once for the same reason, the 8 rows of a stmatrix being an odd number of
    16-byte runs apart). bf16: BN 256 → ``"SW128"``, BN 96 → ``"SW64"``, BN 112 → ``"SW32"``, BN 104 and the 88-column
    half of a column-split 192 × 176 tile → ``"ROW"``. Post: ``staged_c_columns(config)`` divides the column block
    (the config validated: the block is a multiple of one SW32 row, 16 columns of a 16-bit C — for the ``tma``
    epilogue of 16 bytes, 8 columns). A column-major C (``c_major = "M"``) is staged transposed, its atom rows 64 of
    the tile's rows: ``"SW128"``."""
    if config.c_major == "M":
        return "SW128"
    block = config.staged_block[1]
    for swizzle in STAGED_SWIZZLES:
        if block % _atom_columns(swizzle, config.out_dtype) == 0:
            return swizzle
    run = TMA_STAGED_ROW_BYTES // ELEMENT_BYTES[config.out_dtype]   # the columns of one 16-byte run
    if config.epilogue == "tma" and block % run == 0:
        return ROW
    raise ValueError(f"GemmConfig.epilogue_split = {config.epilogue_split}: a column block of {block} "
                     f"{config.out_dtype} columns is no whole number of {TMA_STAGED_ROW_BYTES}-byte runs ({run} "
                     f"columns) for the 'tma' epilogue, nor of SW32 rows "
                     f"({_atom_columns('SW32', config.out_dtype)} columns) for 'rows'")


def _atom_columns(swizzle: str, out_dtype: str) -> int:
    return lc.shape(gmma_atom("K", swizzle, out_dtype).inner)[1]


def staged_c_columns(config: GemmConfig) -> int:
    """Columns of one row of the staged C's atom, one TMA box's width: 64 / 32 / 16 of a 16-bit C for SW128 / SW64 /
    SW32, the whole column block for ``"ROW"``. ``h128x96s6t`` (bf16) → 32, ``h128x104s4t`` → 104. With
    ``c_major = "M"`` a box is the whole column block (its rows in C's transpose): ``h128x152s4tT`` → 152."""
    if config.c_major == "M":
        return config.bn // config.epilogue_split
    swizzle = staged_c_swizzle(config)
    return config.staged_block[1] if swizzle == ROW else _atom_columns(swizzle, config.out_dtype)


# the tile rows of one row of a transposed (c_major = "M") staged C's SW128 atom: one TMA box's inner extent
TRANSPOSED_BOX_ROWS = 64


def staged_c_layout(config: GemmConfig):
    """The CTA's staged C in shared memory (``rows``/``tma``): BM × BN/epilogue_split of ``out_dtype`` in K-major
    atoms of ``staged_c_swizzle`` (``gmma_smem_layout``): bf16 BM 128, BN 96 → ``Sw<2,4,3> o 0 o ((8,16),(32,3)):
    ((32,256),(1,4096))``. A column-major C (``c_major = "M"``) is staged transposed, (BN/epilogue_split, BM) in
    SW128 atoms whose rows are 64 of the tile's rows: bf16 BM 128, BN 152 → ``Sw<3,4,3> o 0 o ((8,19),(64,2)):
    ((64,512),(1,9728))``. With BM = 256 and a split (``staged_block``) the two warpgroups' current 64-row blocks:
    bf16 256 × 128 split in 2 → ``Sw<3,4,3> o 0 o ((8,16),(64,2)):((64,512),(1,8192))``. ``"ROW"``: plain rows,
    bf16 ``h128x104s4t`` → ``Sw<0,4,3> o 0 o (128,104):(104,1)``. Post: a bijection onto
    BM·BN/epilogue_split elements (``smem_bytes`` counts exactly them)."""
    rows, block = config.staged_block
    if config.c_major == "M":
        return gmma_smem_layout("K", "SW128", config.out_dtype, (block, config.bm))
    swizzle = staged_c_swizzle(config)
    if swizzle == ROW:
        return lc.ComposedLayout(lc.Swizzle(0, 4, 3), 0, lc.Layout((2 * rows, block), (block, 1)))
    return gmma_smem_layout("K", swizzle, config.out_dtype, (2 * rows, block))


def c_parameter(config: GemmConfig):
    """The type of the kernel's ``%c``: a TMA map of one consumer warpgroup's staged rows (``staged_block``) × one
    atom row of columns (``staged_c_columns``: 64 bf16 for SW128, 32 for SW64, 16 for SW32, the block for ROW) (``tma``;
    with ``c_major = "M"`` a map of C's transpose, (N, M), whose box is a column block × 64 rows of the tile), else a
    rank-2 gtensor."""
    if config.epilogue == "tma" and config.c_major == "M":
        return tmap(config.out_dtype, 2, tile_split(staged_c_layout(config), 1, TRANSPOSED_BOX_ROWS)[0])
    if config.epilogue == "tma":
        c_rows = tile_split(staged_c_layout(config), 0, config.staged_block[0])[0]   # one warpgroup's staged rows
        c_box = tile_split(c_rows, 1, staged_c_columns(config))[0]               # one TMA store: rows x atom row
        return tmap(config.out_dtype, 2, c_box)
    return gtensor(config.out_dtype, 2)


def stage_column_block(b, c_mine, lt, out, h: int, split: int, rows: int, c_cols: int, out_dtype: str, tag: str,
                       trans: bool = False):
    """Write block ``h`` of ``split`` of the warpgroup's accumulator ``out`` (already ``out_dtype``) into its smem
    rows ``c_mine`` (rows, c_cols) through the accumulator's TV layout: block h is the run of values h·size/split …
    of the fragment (frag.slice; the whole fragment when split = 1) — column block h of a 64-row accumulator, or,
    with R = ``staged_row_blocks`` 64-row wgmma blocks (a split warpgroup of 128 or 192 rows: ``staged_block``'s rows
    = 64), column block h mod split/R of row block h // (split/R). ``trans``: c_mine is the transposed view of a
    K-major tile (``c_major = "M"``), written by ``stmatrix.trans``."""
    values = out.type.size // split
    part = out if split == 1 else b.frag.slice(out, offset=h * values, type=frag(out_dtype, values), name=f"out{tag}")
    # stmatrix.x4: each lane stores 8 values (four 8 × 8 matrices per warp instruction) instead of 2 per st.shared;
    # .x2 where the block's columns are an odd number of 8-column matrices (c_major = "M", e.g. BN = 152)
    num = 4 if c_cols % 16 == 0 else 2
    b.smem.stmatrix(c_mine, lt, part, tv=accumulator_block_tv(rows, c_cols), num=num, trans=trans)


def c_values(g, acc, tm, tn):
    """The finished f32 accumulator of tile (tm, tn) → C's values (``out_dtype``): fp8 times the per-tensor scales
    (block scales were applied in the mainloop), plus the bias (``%bias`` read through the accumulator's TV layout
    at the warpgroup's rows of the tile, out of bounds 0)."""
    b, kb, config = g.b, g.kb, g.config
    if config.fp8 and config.scales == "tensor":
        scale = b.arith.mul(kb["scale_a"], kb["scale_b"], name="scale")
        acc = b.frag.mul(acc, scale, name="scaled")
    if config.bias:
        bias_m0, bias_n0 = tile_origin(g, tm, tn, ("bias_m0", "bias_n0"))
        r0 = b.arith.add(bias_m0, g.row_off, name="bias_r0")
        n0 = warpgroup_column(g, bias_n0, "bias_n0w")
        window = b.gmem.tile(kb["bias"], r0, n0, shape=(config.rows, config.columns), name="bias_tile")
        addend = b.gmem.load(window, g.lt, tv=accumulator_block_tv(config.rows, config.columns),
                             type=frag(config.out_dtype, g.acc_t.shape), name="bias_values")
        acc = b.frag.add(acc, b.frag.cast(addend, type=g.acc_t, name="bias_f32"), name="biased")
    return b.frag.cast(acc, type=frag(config.out_dtype, g.acc_t.shape), name="out")


def warpgroup_column(g, n0, name):
    """The first column of the consumer warpgroup's part of a tile whose first column is ``n0``: ``n0`` itself, or
    (``warpgroups_along = "n"``) ``n0`` + cw·BN/2."""
    if g.config.warpgroups_along == "m":
        return n0
    return g.b.arith.add(n0, g.col_off, name=name)


def store_out(g, out, tm2, tn2):
    """C of the tile (tm2, tn2): its values ``out`` (``c_values``)."""
    b, kb, config = g.b, g.kb, g.config
    rows, columns, split, out_dtype = config.rows, config.columns, config.epilogue_split, config.out_dtype
    c_cols = columns // split
    tile_m0, tile_n0 = tile_origin(g, tm2, tn2, ("tile_m0", "n0c"))
    r0 = b.arith.add(tile_m0, g.row_off, name="r0")
    n0c = warpgroup_column(g, tile_n0, "n0c_wg")
    if config.epilogue == "direct":
        c_tile = b.gmem.tile(kb["c"], r0, n0c, shape=(rows, columns), name="c_tile")
        b.gmem.store(c_tile, g.lt, out, tv=accumulator_block_tv(rows, columns))
    elif config.epilogue == "rows":
        # C rows that TMA cannot store (not 16-byte aligned): the accumulator goes through shared memory so that
        # each warp then stores 32 consecutive elements of one row (2 or 3 sectors per instruction; two rows of 16
        # where a block is an odd number of 16-column runs: ``row_width``) instead of 4 elements in each of 8 rows
        # (8 sectors), one column block at a time; the named barriers over both consumer
        # warpgroups keep a block's writes after the previous block's reads
        c_mine = b.smem.tile(g.sc, g.cw, mode=0, size=rows, name="c_mine")
        part_values = g.acc_t.size // split
        for h in range(split):
            tag = f"_{h}" if split > 1 else ""
            b.barrier.named(id=1, threads=256)
            stage_column_block(b, c_mine, g.lt, out, h, split, rows, c_cols, out_dtype, tag)
            b.barrier.named(id=1, threads=256)
            row_major = b.smem.load(c_mine, g.lt, tv=row_tv(rows, c_cols), type=frag(out_dtype, part_values),
                                    name=f"row_major{tag}")
            col0 = n0c if h == 0 else b.arith.add(n0c, b.const(h * c_cols, i32, name=f"c_block{tag}"),
                                                  name=f"n0c{tag}")
            c_tile = b.gmem.tile(kb["c"], r0, col0, shape=(rows, c_cols), name=f"c_tile{tag}")
            b.gmem.store(c_tile, g.lt, row_major, tv=row_tv(rows, c_cols))
    else:
        # the C rows in smem may be rewritten only once the previous tile's TMA stores have read them: each
        # warpgroup's thread 0 issued (and now waits for) its stores, and a named barrier over both consumer
        # warpgroups (256 threads; bar.sync 1) tells every consumer thread
        # With epilogue_split = S the tile goes out in S column blocks through one (rows, BN/S) buffer per
        # warpgroup: block h is the accumulator's values h·BN/(2S) … (frag.slice), and it is written once
        # block h-1's stores have read the buffer.
        wg_leader = b.arith.cmp(g.lt, g.c0, pred="eq", name="wg_leader")
        if config.c_major == "M":
            store_transposed(g, out, r0, n0c, wg_leader)
            return
        # a split warpgroup of 128 or 192 rows (BM = 256, or a column-split tile): its 64-row wgmma blocks go out in
        # turn (``staged_block``), each in split/(rows/64) column blocks through one 64-row buffer
        block_rows, c_cols = config.staged_block
        column_blocks = split // config.staged_row_blocks
        c_mine = b.smem.tile(g.sc, g.cw, mode=0, size=block_rows, name="c_mine")
        box_cols = staged_c_columns(config)   # one TMA box: the staged rows x one row of the staged atom
        boxes = c_cols // box_cols
        c_col = b.const(box_cols, i32, name=f"c{box_cols}")
        for h in range(split):
            tag = f"_{h}" if split > 1 else ""
            row_block, column_block = divmod(h, column_blocks)
            stage_for_tma(g, wg_leader, c_mine, out, h, tag)
            block_r0 = r0 if row_block == 0 else \
                b.arith.add(r0, b.const(row_block * block_rows, i32, name=f"c_rows{tag}"), name=f"r0{tag}")
            with b.scf.if_(wg_leader).then:
                for j in range(boxes):
                    cj = b.const(j + column_block * boxes, i32, name=f"cj{j}{tag}")
                    box = b.smem.tile(c_mine, b.const(j, i32, name=f"cb{j}{tag}") if column_block else cj, mode=1,
                                      size=box_cols, name=f"c_box{j}{tag}")
                    col = b.arith.add(n0c, b.arith.mul(cj, c_col, name=f"c_off{j}{tag}"),
                                      name=f"c_col{j}{tag}")
                    b.tma.store(kb["c"], box, block_r0, col)
                b.tma.store_commit()
                b.scf.yield_()


def stage_for_tma(g, wg_leader, c_mine, out, h: int, tag: str, trans: bool = False) -> None:
    """Column block ``h`` of ``out`` into the warpgroup's staging buffer ``c_mine`` for TMA stores: its leader waits
    until the previous stores have read the buffer, a named barrier over both consumer warpgroups, the block staged
    (``stage_column_block``), the generic writes fenced before the async proxy's reads, a second barrier."""
    b, config = g.b, g.config
    with b.scf.if_(wg_leader).then:
        b.tma.store_wait(pending=0, read=True)
        b.scf.yield_()
    b.barrier.named(id=1, threads=256)
    rows, columns = config.staged_block
    split = config.epilogue_split
    if trans and split > 1 and rows > 64:
        # a warpgroup of R 64-row wgmma blocks (BM = 256) staged transposed in column blocks: column block h is a
        # run of values of each row block (the accumulator's values run row block by row block), each staged into
        # its 64 rows of the buffer
        per_block = out.type.size // (rows // 64)
        for p in range(rows // 64):
            part = b.frag.slice(out, offset=p * per_block + h * (per_block // split),
                                type=frag(config.out_dtype, per_block // split), name=f"out{tag}_r{p}")
            rows_p = b.smem.tile(c_mine, b.const(p, i32, name=f"c_rb{p}{tag}"), mode=0, size=64,
                                 name=f"c_mine{tag}_r{p}")
            stage_column_block(b, rows_p, g.lt, part, 0, 1, 64, columns, config.out_dtype, f"{tag}_r{p}", trans)
    else:
        stage_column_block(b, c_mine, g.lt, out, h, split, rows, columns, config.out_dtype, tag, trans)
    b.fence.proxy_async()   # the generic smem writes before the async-proxy (TMA) reads
    b.barrier.named(id=1, threads=256)


def store_transposed(g, out, r0, n0c, wg_leader) -> None:
    """The ``tma`` epilogue of a column-major C (``c_major = "M"``): per column block, the warpgroup's rows × block
    columns staged transposed by ``stmatrix.trans`` into its (block, rows) part of the staged C, then stored by TMA
    as (block, 64) boxes of C's transpose at (n0c + block offset, r0 + 64·j); the waits and named barriers as in the
    row-major path (``store_out``)."""
    b, kb, config = g.b, g.kb, g.config
    rows, split = config.rows, config.epilogue_split
    c_cols = config.bn // split
    c_mine = b.smem.tile(g.sc, g.cw, mode=1, size=rows, name="c_mine_t")
    c_rows_major = b.smem.permute(c_mine, order=(1, 0), name="c_mine")
    for h in range(split):
        tag = f"_{h}" if split > 1 else ""
        stage_for_tma(g, wg_leader, c_rows_major, out, h, tag, trans=True)
        with b.scf.if_(wg_leader).then:
            col = n0c if h == 0 else b.arith.add(n0c, b.const(h * c_cols, i32, name=f"ct_block{tag}"),
                                                  name=f"ct_col{tag}")
            for j in range(rows // TRANSPOSED_BOX_ROWS):
                box = b.smem.tile(c_mine, b.const(j, i32, name=f"ct_j{j}{tag}"), mode=1, size=TRANSPOSED_BOX_ROWS,
                                  name=f"ct_box{j}{tag}")
                row = r0 if j == 0 else b.arith.add(r0, b.const(j * TRANSPOSED_BOX_ROWS, i32, name=f"ct_r{j}{tag}"),
                                                    name=f"ct_row{j}{tag}")
                b.tma.store(kb["c"], box, col, row)
            b.tma.store_commit()
            b.scf.yield_()


def drain_tma_stores(g) -> None:
    """The end of the kernel (``tma`` epilogue): thread 0 of each consumer warpgroup, which issued TMA stores, waits
    until the last tile's stores have read shared memory before the CTA ends."""
    b = g.b
    lt = b.arith.rem(g.thread, g.c_wg, name="lt_end")
    first_lane = b.arith.cmp(lt, b.const(0, i32, name="c0_end"), pred="eq", name="first_lane")
    consumer = b.arith.cmp(g.wg, g.c1, pred="ge", name="consumer_wg")
    with b.scf.if_(b.arith.and_(first_lane, consumer, name="issued_stores")).then:
        b.tma.store_wait(pending=0, read=True)
        b.scf.yield_()
