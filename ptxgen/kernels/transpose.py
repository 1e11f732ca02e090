"""2-D transpose ``out = x.T`` (x (M, N) row-major, out (N, M) row-major) through shared memory, with every TV layout
derived from layoutc and a swizzled thread map that makes both shared-memory accesses conflict-free.

One CTA moves one (BM, BN) = (8·V, 8·V) tile of x (V = 16 bytes of elements: 8 for bf16/f16, 4 for f32; a row of
the tile is 128 bytes, 8 chunks of 16):

1. ``gmem.load`` of the x tile with ``tile_tv(BM, BN)`` — ``layoutc.make_layout_tv`` of threads 8·k per row
   holding V consecutive columns each (one 16-byte vector; a warp reads 4 whole 128-byte row segments), repeated
   over the tile's rows in passes;
2. ``smem.store`` of that fragment into a plain row-major (BM, BN) tile through ``Sw_in o 0 o tile_tv`` (the same TV
   layout composed with a swizzle of the tile index, ``in_swizzle``): row r's 16-byte chunks are XORed by
   ``(r / V) % 8`` — vectors stay whole, so each thread still stores one ``st.shared.v4`` per pass;
3. ``barrier.cta``; ``smem.load`` of the OUT tile (BN, BM) from the transposed view (``smem.permute``) through
   ``Sw_out o 0 o tile_tv(BN, BM)``, ``out_swizzle``: the same physical permutation seen from the transposed
   index. Each thread reads the V elements of one 16-byte output vector — V rows of one column of x, one
   element each — and at every instruction a warp's 8 threads of a row read 8 different chunks: no bank conflict
   (``bank_reports``, asserted by the tests);
4. ``gmem.store`` of that fragment into the out tile with ``tile_tv(BN, BM)``: 16-byte vectors along out's rows.

Ragged edges need nothing more: gmem.load reads 0 and gmem.store skips the elements outside the tensors (each
16-byte vector wholly inside goes as a vector, the edge element by element). Any M, N; vectors need rows whose
byte pitch is a multiple of 16 (else the launcher's specialization picks element accesses).

Rows whose pitch is not a multiple of 16 bytes (N·esize or M·esize, e.g. 8191 x 12289 bf16) start at a different
offset modulo 16 each, so no access wider than an element is aligned in every row. ``access="scalar"`` (what
``transpose`` picks for them) lays the threads out for element accesses instead: ``scalar_tv`` puts a warp's 32
threads on 32 consecutive elements of one row (64 contiguous bytes per bf16 instruction, 128 per f32: whole sectors,
where the vector TV's element accesses spread the same 64 or 128 bytes over 16 sectors), on both the x and the out
side; the smem tile is permuted by an element XOR (``scalar_in_swizzle`` / ``scalar_out_swizzle``: column bits
of one 4-byte bank word upward XOR the row's low 5 bits), so a warp's 32 transposed reads — one column, 32 rows —
fall in 32 different banks and its row writes stay conflict-free.

Out rows whose pitch is not a multiple of 32 bytes (M·esize, e.g. 8191 x 8192 bf16: out rows of 16382 bytes) start
at a different offset inside a 32-byte sector each: a CTA's (BM)-element window of such a row covers partial sectors at
both ends, and each partial sector is written by two CTAs at different times (a read-modify-write in L2 or DRAM).
``access="sector"`` (what ``transpose`` picks for them) moves each CTA's window in out row c to start on a sector:
tile t of row c covers columns ``[t·BM − s_c, (t+1)·BM − s_c)``, s_c = ``(c·M) mod A`` (A = 32 bytes of elements, 16
bf16, 8 f32: row c's start inside its sector), so every sector but the two at a row's ends is written whole, by one
CTA. The grid has ``⌈(M + A − 1)/BM⌉`` tiles along M (the windows of every row still cover [0, M)); a CTA reads the
``BM + A`` x rows ``t·BM − A … (t+1)·BM − 1`` (``scalar_tv`` over (BM + A, BN): what any of its windows needs, rows
outside x read 0) into a tile padded by one bank word per row (``sector_layouts``: pitch BN + 4/esize elements, so a
warp's 32 rows of one column fall in 32 banks, whatever row they start at); the out side runs ``A / (threads/BM)``
passes (``sector_pass_tv``), each thread's values of a pass in out rows of one residue mod A, so their shift s is one
per thread: ``smem.offset`` of the transposed tile by (the pass's first row, A − s) and ``gmem.store`` at the
per-thread origin (n0 + pass row, t·BM − s). Element accesses on both sides (warps on 32 contiguous elements).

``access="sector_vector"`` (selectable; ``transpose`` still picks ``sector``) keeps those windows and stores 16-byte
vectors: inside a window every V-element group starts on a sector boundary plus a multiple of 16 bytes, so one warp
per out row and pass stores the window's 32 vectors (``row_vector_tv``: 512 contiguous bytes) with ``gmem.store
{vector_check = true}`` — ``st.global.v4`` where the address is 16-byte aligned at run time, element stores at the
row's two ends. The tile is (BM, BN) = (32·V, 8·V) (a window is one warp's 32 vectors), the x window of BM + A rows
is read in two parts: rows t·BM … by ``sector_vector_tv`` (16-byte vectors where x's rows are 16-byte aligned; V rows
V apart per warp instruction) and the A rows above by ``scalar_tv`` (``sector_vector_scalar`` reads both by
``scalar_tv``). Shared memory holds the window column-major (an out row's elements contiguous), the column pitch one
16-byte chunk longer than the window, under ``sector_vector_swizzle`` (``Sw<2,2,5>`` on byte addresses): a lane
gathers its V out elements from V consecutive rows of one column, and at each of those V loads a warp's 32 lanes
(rows b + V·l, any run-time b) hit 32 banks; the x side's stores stay conflict-free too (``bank_reports``).

``access="sector_vector_aligned_x"`` (selectable) takes 16-byte x loads where x's rows are not 16-byte aligned either
(8191 x 12289 bf16): x row r starts s_r = (r·N + n0) mod V elements into a 16-byte vector, so the CTA reads the row's
window from column n0 − s_r (a 16-byte boundary), BN + V columns (``gmem.load {vector_check = true}``: vectors, element
loads at the tensor's edges or where x's base or pitch breaks the alignment), and stores it into the tile shifted back
by s_r (``smem.offset``), so the tile holds x's columns n0 … n0 + BN − 1 at fixed columns and the out side is
``sector_vector``'s. s_r depends on r mod V only: warp q takes the rows ≡ q (mod V) (``residue_vector_tv``, V warps:
256 threads for 16-bit types, 128 for f32), so one shift per warp; the 16-byte windows' other V elements per row land
in V − 1 spare columns before the tile and V after (``sector_vector_layouts``), and every store stays conflict-free
for every shift (``bank_reports``).

``access="sector_vector_async_x"`` (selectable) copies those per-row 16-byte windows by ``cpasync.copy`` (cp.async:
no x value in a register between load and smem store, so ~30 registers and as many CTAs as shared memory allows) into
a ROW-major tile whose row pitch ≡ N mod V (``TransposeConfig.x_residue``, ``for_columns``), moved as a whole by the
CTA's run-time shift so that each 16-byte chunk of x lands on a 16-byte chunk of shared memory; commit, wait 0, CTA
barrier, then ``sector_vector``'s out side. Its transposed element reads are 4-way bank conflicted (a warp's lanes
read one word position of 16 bytes: ``bank_reports``); an x whose pitch breaks N mod V still transposes exactly (its
copies go element by element, checked at run time). Measured 83-87% of copy against the pick's 87-92% on the doubly
unaligned 16-bit shapes (docs/gpu-runs/2026-11-26-s19.log section 16): the conflicted reads cost more than the
occupancy gains, so ``transpose`` does not pick it.

``access="sector_vector_pair_x"`` (16-bit types; what ``transpose`` picks, with BM = 64, where x's rows and out's rows
are both unaligned) reads the same per-row windows as ALIGNED 4-byte pairs
of elements (``x_piece_bytes = 8``: 8-byte quads) instead of 16-byte vectors: row r's window starts s_r = (r·N + n0)
mod P elements before n0 (P = 2 or 4: ``TransposeConfig.x_piece``), BN + P columns, stored back by ``smem.offset`` (A,
P − 1 − s_r). Rows ≡ q (mod 8) share s_r, so 8 warps (256 threads) take one residue mod 8 each
(``residue_vector_tv``/``residue_tail_tv`` with ``spacing`` 8) and the lanes along a row (``residue_lanes_per_row``:
up to BN/P) make the pieces' smem stores conflict-free at every shift — a warp instruction reads one row's 128
contiguous bytes at BM = 64 and 256 (whose column pitch is taken ≡ 4 mod 8 for it), two rows' 64 at BM = 128. A pair
stays one 32-bit register from its ``ld.global.b32`` to its two smem stores (gmem.load's vector phi), half the x
registers of ``sector_vector_scalar``'s element loads: BM = 64 and 128 fit 32 registers (8 CTAs of 256 threads per SM)
with no spill. The window's tail (a lane one whole piece of a row, one column per store) and the A head rows (read
in pieces from row m0 − A with the same shift — A·N ≡ 0 mod P —, where a lane split over their A/8 rows per warp is
conflict-free: every tile but BM = 128 quads) are stored conflict-free too: ``bank_reports`` all 1-way.

``TransposeConfig.rows`` (selectable; default 32·V) gives the ``sector_vector*`` accesses a smaller tile, BM =
8·V or 16·V (64 or 128 bf16): fewer x values per thread between load and smem store, so fewer registers and more
CTAs per SM (``sector_vector_residency``). A window is then BM/V lanes' vectors, so a warp writes 32·V/BM out rows per
pass (``row_vector_tv``), taken A apart — rows of one residue mod A share the sector shift s, so still one shift per
warp — and pass k starts at out row ``pass_rows[k]`` (``sector_vector_layouts``). The window's column pitch
(``window_pitch``) puts those rows' columns in different groups of ``sector_vector_swizzle`` so the transposed read
stays conflict-free for every shift; ``sector_vector_tv`` gives each thread fewer rows per (rows, V) block, and
``residue_tail_tv`` splits each x row's tail vector into 32·V/BM aligned pieces (4 or 8 bytes) so all 32 lanes of a
warp load. Some of the smaller tiles' x-side smem stores are 2-way conflicted (``bank_reports``: the pitch serves the
read first).

Example (post-condition: ``out == x.T`` exactly)::

    >>> import numpy as np
    >>> from ptxgen.interp import interpret
    >>> x = np.arange(70 * 45, dtype=np.float32).reshape(70, 45)
    >>> out = np.zeros((45, 70), np.float32)
    >>> interpret(build(TransposeConfig.default("f32")), {"x": x, "out": out})
    >>> bool(np.array_equal(out, x.T))
    True
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import layoutc as lc
from layoutc.hopper import bank_conflicts

from ptxgen.ir.builder import KernelBuilder, cdiv, dim, frag, gtensor, hadd, i32, smem
from ptxgen.ir.ops.gmem import CACHE_HINTS
from ptxgen.ir.suggest import did_you_mean

from .arguments import Arg, overlaps, private_copy, same_kind, stream, writable

ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
VECTOR_BYTES = 16
SECTOR_BYTES = 32   # the unit of a global memory transaction: a partly written sector costs a read-modify-write
BANK_BYTES = 4
SM_SHARED_BYTES = 228 * 1024   # an H100 SM's shared memory, of which each resident CTA also takes 1 KB
SM_THREADS = 2048
SM_REGISTERS = 65536
X_VECTOR_REGISTERS = 80   # per thread: sector_vector's 78 (nvJitLink, bf16, unbounded) rounded to the allocation unit 8
# registers per thread with no spill (nvJitLink) for the smaller sector_vector tiles (TransposeConfig.rows < 32·V), by
# the values a thread holds between its x loads and its smem stores (BM·BN/threads): x read as 16-byte vectors
# (sector_vector, sector_vector_aligned_x; bf16 and f32 alike, e.g. 48 → 1 spare at 5 CTAs of 256 threads for bf16 BM =
# 128, 34 bytes of spill at 40) and element by element (sector_vector_scalar: 146 bytes of spill at 32 registers for
# bf16 BM = 128, 256 threads)
WINDOW_REGISTERS = {4: 32, 8: 32, 16: 32, 32: 48, 64: 80}
SCALAR_WINDOW_REGISTERS = {4: 32, 8: 32, 16: 32, 32: 40, 64: 40}
# per thread for sector_vector_async_x (x copied by cp.async, only the A head rows' few values and the out side's V
# values in registers): nvJitLink, bf16 and f32, 38-39 unbounded; bounded to 32 (8 CTAs of 256 threads) without spill
ASYNC_REGISTERS = 32
ACCESSES = ("vector", "scalar", "sector", "sector_vector", "sector_vector_scalar", "sector_vector_aligned_x",
            "sector_vector_async_x", "sector_vector_pair_x")
# sector windows and 16-byte out stores
SECTOR_VECTOR = ("sector_vector", "sector_vector_scalar", "sector_vector_aligned_x", "sector_vector_async_x",
                 "sector_vector_pair_x")
# x's rows read as per-row windows moved onto 16-byte boundaries (one warp per residue of the row mod V)
RESIDUE_WINDOWS = ("sector_vector_aligned_x", "sector_vector_async_x")
# x's rows read as per-row windows moved onto aligned pieces of x_piece_bytes (4 or 8: two or four 16-bit elements)
PIECE_WINDOWS = ("sector_vector_aligned_x", "sector_vector_async_x", "sector_vector_pair_x")
X_PIECE_BYTES = (4, 8)
WARPS = 8           # sector_vector_pair_x's warps: warp q takes the x rows ≡ q (mod 8), all of one residue mod a piece
CHUNKS = 8          # 16-byte chunks of a 128-byte row: the XOR's 3 bits
# the tile rows of the 16-bit transpose whose x rows and out rows are both unaligned (sector_vector_pair_x, x read in
# aligned pairs): 64, 8 CTAs per SM at 32 registers (H100, % of copy in separate windows, 128 / 256 rows: bf16
# 16383x16385 89.4-90.9 / 86.5 / 73.5, 8191x12289 91.6-92.2 / 88.3 / 74.6; docs/gpu-runs/2026-11-26-s20.log section 6)
UNALIGNED_X_ROWS = 64
WINDOW_VECTORS = (8, 16, 32)   # the sector_vector tile's rows BM in 16-byte vectors (TransposeConfig.rows / V)


@dataclass(frozen=True)
class TransposeConfig:
    """``dtype`` (f32, bf16, f16); ``threads`` per CTA (a multiple of 32 dividing the tile's vectors, at most 8 warps);
    ``pair``: rows per thread's value block (1 or 2; ``tile_tv``): with 2 the transposed smem read takes two elements
    per access; ``access``: ``vector`` (16-byte accesses where rows allow), ``scalar`` (element accesses by warps on
    contiguous elements) or ``sector`` (``scalar``'s accesses, each CTA's out windows starting on 32-byte sectors),
    ``sector_vector`` (sector windows one warp per out row, 16-byte out stores checked at run time; x read through
    ``sector_vector_tv``: 16-byte vectors where x's rows allow), ``sector_vector_scalar`` (the same with x read by
    ``scalar_tv``) or ``sector_vector_aligned_x`` (the same with x read as 16-byte vectors from windows moved onto
    16-byte boundaries per row, whatever x's pitch: ``threads`` = 32·V), ``sector_vector_async_x`` (those windows by
    cp.async) or ``sector_vector_pair_x`` (16-bit types: the windows moved onto 4- or 8-byte boundaries, read as
    aligned pairs or quads of elements, 256 threads); ``rows``: the ``sector_vector*`` tile's rows
    BM (8·V, 16·V or 32·V: 64, 128, 256 for bf16; None = 32·V); ``x_residue``: for ``sector_vector_async_x`` (x's
    row windows copied by cp.async into a row-major tile whose row pitch ≡ N mod V, so every 16-byte chunk of x lands
    on a 16-byte chunk of shared memory), N mod V — ``for_columns(n)`` sets it; None = 1; another N is still correct,
    its copies then go element by element; ``x_piece_bytes``: for ``sector_vector_pair_x`` (16-bit types: x's rows
    read as aligned 4- or 8-byte pieces of 2 or 4 elements from windows moved per row, 256 threads), the piece's bytes,
    4 or 8; None = 4; ``x_cache`` / ``out_cache``: for the ``sector_vector*`` accesses, the cache hint of x's loads /
    out's stores (gmem.load/store's ``cache``, one of ``CACHE_HINTS``; ``normal``: none, the IR unchanged).
    ``validate()`` names the field that breaks a rule."""

    dtype: str = "bf16"
    threads: int = 256
    pair: int = 2
    access: str = "vector"
    rows: int | None = None
    x_residue: int | None = None
    x_piece_bytes: int | None = None
    x_cache: str = "normal"
    out_cache: str = "normal"

    @staticmethod
    def default(dtype: str, aligned: bool = True, out_sectors: bool = True,
                x_aligned: bool = False) -> "TransposeConfig":
        """The configuration ``transpose`` uses: 8 warps for 16-bit types (64 x 64 tiles: 2 vectors per thread), 4 for
        f32 (32 x 32 tiles), each thread a (2, V) block; for rows not 16-byte aligned (``aligned`` False) element
        accesses: where out's rows do not start on 32-byte sectors (``out_sectors`` False) ``access="sector"`` with 8
        warps, or for 16-bit types whose x rows are 16-byte aligned (``x_aligned``) ``"sector_vector"`` (16-byte
        loads and out stores: 94-99% of copy at 8191 x 8192 bf16 against 87-94% for ``sector``, docs/gpu-runs/
        2026-11-26-s14.log section 3), for 16-bit types whose x rows are not aligned either ``"sector_vector_pair_x"``
        with 64-row tiles (x read in aligned 4-byte pairs, 16-byte out stores: 89.4-92.2% of copy in separate
        windows, 90.3-95.3% interleaved at 8191 x 12289, 12289 x 8191 and 16383 x 16385 bf16 and f16, against
        86.5-91.2% / 88.6-93.5% for ``sector_vector_scalar`` with 128-row tiles, 2026-11-26-s20.log section 6); else
        ``access="scalar"``. ``TransposeConfig.default("f32")`` →
        ``TransposeConfig(dtype='f32', threads=128, pair=2)``; ``TransposeConfig.default("f32", False, False)`` →
        ``TransposeConfig(dtype='f32', threads=256, pair=1, access='sector')``; ``TransposeConfig.default("bf16",
        False, False)`` → ``TransposeConfig(dtype='bf16', threads=256, pair=1, access='sector_vector_pair_x',
        rows=64)``."""
        threads = 128 if dtype == "f32" else 256
        if aligned:
            return TransposeConfig(dtype, threads, 2)
        if out_sectors:
            return TransposeConfig(dtype, threads, 1, "scalar")
        if dtype == "f32":
            return TransposeConfig(dtype, 256, 1, "sector")
        if x_aligned:
            return TransposeConfig(dtype, 256, 1, "sector_vector")
        return TransposeConfig(dtype, 256, 1, "sector_vector_pair_x", rows=UNALIGNED_X_ROWS)

    def for_columns(self, n: int) -> "TransposeConfig":
        """The config for an x of ``n`` columns: ``sector_vector_async_x`` gets ``x_residue = n mod V``, any other
        access is returned as it is. ``TransposeConfig("bf16", 256, 1, "sector_vector_async_x", 128)
        .for_columns(8191).x_residue`` → 7. Post: ``validate()`` holds if it held."""
        if self.access != "sector_vector_async_x":
            return self
        return replace(self, x_residue=n % self.vector)

    @property
    def vector(self) -> int:
        """Elements per 16-byte vector: 8 for bf16/f16, 4 for f32 (a thread's value mode ``(V):(1)`` of a row).
        Post: ``vector · element bytes == 16``."""
        return VECTOR_BYTES // ELEMENT_BYTES[self.dtype]

    @property
    def x_piece(self) -> int:
        """Elements of the aligned piece in which the per-row windows of x are read, P: a 16-byte vector for
        ``sector_vector_aligned_x``/``sector_vector_async_x`` (V), ``x_piece_bytes`` (default 4) of elements for
        ``sector_vector_pair_x`` (2 or 4 for bf16/f16). ``TransposeConfig("bf16", 256, 1, "sector_vector_pair_x",
        128).x_piece`` → 2. Post: ``x_piece`` divides ``vector``."""
        if self.access == "sector_vector_pair_x":
            return (self.x_piece_bytes or X_PIECE_BYTES[0]) // ELEMENT_BYTES[self.dtype]
        return self.vector

    @property
    def sector(self) -> int:
        """Elements per 32-byte sector, A: 16 for bf16/f16, 8 for f32 (the unit ``access="sector"`` aligns out's
        windows to). Post: ``sector · element bytes == 32``."""
        return SECTOR_BYTES // ELEMENT_BYTES[self.dtype]

    @property
    def tile(self) -> tuple:
        """(BM, BN): rows and columns of x one CTA moves, 8 16-byte vectors square (64 x 64 bf16, 32 x 32 f32); for
        ``sector_vector``/``sector_vector_scalar``/``sector_vector_aligned_x`` ``rows`` (default 32 vectors) by 8
        (256 x 64 bf16, 128 x 32 f32; ``rows=64``: 64 x 64 bf16): an out row's window is BM/V lanes' 16-byte
        vectors."""
        v = self.vector
        if self.access in SECTOR_VECTOR:
            return self.rows or WINDOW_VECTORS[-1] * v, CHUNKS * v
        return CHUNKS * v, CHUNKS * v

    def validate(self) -> "TransposeConfig":
        """The config itself when its rules hold, else ValueError naming the field: ``TransposeConfig.threads = 96
        must be a multiple of 32, at most 256 (8 warps), …``. Post: the tile's vectors split evenly over
        ``threads × pair`` (e.g. 512 vectors of a 64 x 64 bf16 tile over 256 threads × 2)."""
        if self.dtype not in ELEMENT_BYTES:
            raise ValueError(f"TransposeConfig.dtype must be one of {', '.join(ELEMENT_BYTES)}, not {self.dtype!r}")
        if self.pair not in (1, 2):
            raise ValueError(f"TransposeConfig.pair must be 1 or 2, not {self.pair!r}")
        if self.access not in ACCESSES:
            choices = ", ".join(repr(a) for a in ACCESSES[:-1]) + f" or {ACCESSES[-1]!r}"
            raise ValueError(f"TransposeConfig.access must be {choices}, not {self.access!r}"
                             f"{did_you_mean(str(self.access), ACCESSES)}")
        if self.rows is not None:
            allowed = [k * self.vector for k in WINDOW_VECTORS]
            if self.access not in SECTOR_VECTOR:
                raise ValueError(f"TransposeConfig.rows = {self.rows} applies to access = 'sector_vector', "
                                 f"'sector_vector_scalar', 'sector_vector_aligned_x', 'sector_vector_async_x' or "
                                 f"'sector_vector_pair_x' only, not {self.access!r}")
            if self.rows not in allowed:
                raise ValueError(f"TransposeConfig.rows = {self.rows!r} must be {allowed[0]}, {allowed[1]} or "
                                 f"{allowed[2]} for {self.dtype} (8, 16 or 32 16-byte vectors: the tile's rows, one "
                                 f"out row's window)")
        bm, bn = self.tile
        if self.x_residue is not None and (self.access != "sector_vector_async_x"
                                           or self.x_residue not in range(self.vector)):
            raise ValueError(f"TransposeConfig.x_residue = {self.x_residue!r} applies to access = "
                             f"'sector_vector_async_x' only, as N mod {self.vector} (0 … {self.vector - 1})")
        if self.x_piece_bytes is not None and (self.access != "sector_vector_pair_x"
                                               or self.x_piece_bytes not in X_PIECE_BYTES):
            raise ValueError(f"TransposeConfig.x_piece_bytes = {self.x_piece_bytes!r} applies to access = "
                             f"'sector_vector_pair_x' only, as 4 or 8 (bytes of the aligned pieces x's rows are read in)")
        for field_name in ("x_cache", "out_cache"):
            hint = getattr(self, field_name)
            if hint not in CACHE_HINTS:
                raise ValueError(f"TransposeConfig.{field_name} = {hint!r} must be one of {', '.join(CACHE_HINTS)}"
                                 f"{did_you_mean(str(hint), CACHE_HINTS)}")
            if hint != "normal" and self.access not in SECTOR_VECTOR:
                raise ValueError(f"TransposeConfig.{field_name} = {hint!r} applies to the sector_vector accesses only "
                                 f"({', '.join(repr(a) for a in SECTOR_VECTOR)}), not {self.access!r}")
        if self.access == "sector_vector_pair_x":
            if ELEMENT_BYTES[self.dtype] != 2:
                raise ValueError(f"TransposeConfig.dtype = {self.dtype!r} with access = 'sector_vector_pair_x' must be "
                                 f"bf16 or f16 (pieces of 2 or 4 16-bit elements; f32's rows are aligned to its "
                                 f"4-byte elements already)")
            if self.pair != 1 or self.threads != 32 * WARPS:
                raise ValueError(f"TransposeConfig.threads = {self.threads} with access = 'sector_vector_pair_x' must "
                                 f"be {32 * WARPS} (one warp per residue of x's rows mod {WARPS}), with pair = 1 "
                                 f"(not {self.pair})")
        if self.access in RESIDUE_WINDOWS and (self.pair != 1 or self.threads != 32 * self.vector):
            raise ValueError(f"TransposeConfig.threads = {self.threads} with access = '{self.access}' "
                             f"must be 32 x the {self.vector} {self.dtype} elements of a 16-byte vector "
                             f"({32 * self.vector}: one warp per residue of x's rows mod {self.vector}), with pair = 1 "
                             f"(not {self.pair})")
        if self.access in SECTOR_VECTOR:
            warps = self.threads // 32
            if self.pair != 1 or self.threads % bn or self.threads > 32 * 8 or warps & (warps - 1):
                raise ValueError(f"TransposeConfig.threads = {self.threads} with access = '{self.access}' must be a "
                                 f"multiple of the tile's {bn} columns with a power-of-two number of warps, at most "
                                 f"256 (8 warps), with pair = 1 (not {self.pair})")
            return self
        if self.access in ("scalar", "sector"):
            down = self.threads // bn
            if self.pair != 1 or self.threads % bn or self.threads > 32 * 8 or down & (down - 1):
                raise ValueError(f"TransposeConfig.threads = {self.threads} with access = '{self.access}' must be the "
                                 f"tile's {bn} columns times a power of two, at most 256 (8 warps), with pair = 1 (not "
                                 f"{self.pair})")
            return self
        vectors = bm * bn // self.vector
        if (self.threads % 32 or vectors % (self.threads * self.pair) or self.threads > vectors
                or self.threads > 32 * 8):
            raise ValueError(f"TransposeConfig.threads = {self.threads} must be a multiple of 32, at most 256 (8 warps), "
                             f"whose product with pair = {self.pair} divides the {vectors} 16-byte vectors of a "
                             f"{bm} x {bn} tile")
        return self


def tile_tv(rows: int, cols: int, vector: int, threads: int, pair: int = 1):
    """The TV layout of a (rows, cols) tile (cols = 8·vector) over ``threads`` threads, each holding 16-byte vectors
    of ``vector`` consecutive columns on ``pair`` consecutive rows: ``make_layout_tv`` of one warp — 4·pair rows × 8
    threads, a (pair, vector) value block each, so a warp covers 4 whole 128-byte row segments per value — placed in
    the tile, then ``passes`` (the value mode's outer part) of 4·pair rows each inside a warp's band, the warps stacked
    below each other.

    The row bits the swizzles XOR (``in_swizzle``, ``out_swizzle``: bits 3-5 of the row for 16-bit types, 2-4 for f32)
    come from the thread when there is one pass, so each swizzled map is a thread part plus a constant per value (one
    address per thread); with more passes the smem accesses compute their addresses per vector (still vectors).
    With ``pair = 2`` the transposed read takes the two rows' elements of a column as one 2-element vector.
    ``tile_tv(64, 64, 8, 256)`` = ``(((8,4),8),(8,2)):(((512,1),8),(64,4))``: thread t, value (i, p) → row
    (t//8)%4 + 4p + 8·(t//32), column 8·(t%8) + i; ``tile_tv(64, 64, 8, 256, 2)`` =
    ``(((8,4),8),(2,8)):(((512,2),8),(1,64))``. Post: a bijection of threads × (pair·vector·passes) onto the tile
    (column-major index)."""
    warps = threads // 32
    tiler, warp_tv = lc.make_layout_tv(lc.Layout((4, cols // vector), (cols // vector, 1)),
                                       lc.Layout((pair, vector), (1, pair)))
    passes = rows // (tiler[0] * warps)
    in_tile = lc.composition(lc.Layout(tiler, (1, rows)), warp_tv)   # the warp tiler's indices in the whole tile
    values = in_tile[1] if passes == 1 else lc.make_layout(in_tile[1], lc.Layout(passes, tiler[0]))
    return lc.make_layout(lc.make_layout(in_tile[0], lc.Layout(warps, tiler[0] * passes)), values)


def scalar_tv(rows: int, cols: int, threads: int):
    """The TV layout of a (rows, cols) tile for element accesses: ``make_layout_tv`` of threads ``(threads/cols,
    cols)`` row-major (consecutive threads on consecutive columns of a row: a warp reads 32 contiguous elements) and
    one value each, repeated ``rows·cols/threads`` times down the rows. ``scalar_tv(64, 64, 256)`` =
    ``((64,4),16):((64,1),4)`` — thread t, value p → row t//64 + 4p, column t%64. Pre: cols divides threads.
    Post: a bijection of threads × values onto the tile (column-major index)."""
    down = threads // cols
    tiler, thread_tv = lc.make_layout_tv(lc.Layout((down, cols), (cols, 1)), lc.Layout((1, 1)))
    in_tile = lc.composition(lc.Layout(tiler, (1, rows)), thread_tv)
    return lc.make_layout(in_tile[0], lc.Layout(rows // down, down))


def scalar_in_swizzle(rows: int, cols: int, esize: int):
    """The element XOR on x-tile indices (r + rows·c) for element accesses: column c of row r moves to
    ``c ^ ((r % 32) · w)``, w = 4 / esize elements per bank word (the row's low 5 bits onto the column bits above a
    word). ``scalar_in_swizzle(64, 64, 2)`` = ``Sw<5,0,-7>``, ``scalar_in_swizzle(32, 32, 4)`` = ``Sw<5,0,-5>``."""
    word = (4 // esize).bit_length() - 1
    return lc.Swizzle(5, 0, -(rows.bit_length() - 1 + word))


def scalar_out_swizzle(rows: int, cols: int, esize: int):
    """``scalar_in_swizzle`` seen from the transposed tile (cols, rows), index c + cols·r: the same element
    permutation. ``scalar_out_swizzle(64, 64, 2)`` = ``Sw<5,1,5>``."""
    word = (4 // esize).bit_length() - 1
    return lc.Swizzle(5, word, cols.bit_length() - 1 - word)


def in_swizzle(rows: int, cols: int, vector: int):
    """The XOR on x-tile indices (column-major over (rows, cols): r + rows·c) that moves column chunk c/V of row r to
    chunk (c/V) ^ ((r/V) % 8): source bits log2 V … (bits 3-5 of r/V·V), target the chunk bits of c.
    ``in_swizzle(64, 64, 8)`` = ``Sw<3,3,-6>``."""
    lv = vector.bit_length() - 1
    return lc.Swizzle(3, lv, -(rows.bit_length() - 1))


def out_swizzle(rows: int, cols: int, vector: int):
    """``in_swizzle`` seen from the transposed tile (cols, rows), index c + cols·r: the same element permutation.
    ``out_swizzle(64, 64, 8)`` = ``Sw<3,3,6>``."""
    lv = vector.bit_length() - 1
    return lc.Swizzle(3, lv, cols.bit_length() - 1)


def sector_pass_tv(rows: int, cols: int, threads: int, sector: int):
    """The out tile's TV layout of one pass of ``access="sector"``: ``scalar_tv(rows, cols, threads)`` (threads on
    consecutive columns of a row: a warp writes 32 contiguous elements) with only the values whose rows share the
    thread's residue mod ``sector``: thread t, value q → row t//cols + sector·q, column t%cols. Pass k is the same map
    ``k·(threads/cols)`` rows further (the caller moves the tile's origin). ``sector_pass_tv(64, 64, 256, 16)`` =
    ``((64,4),4):((64,1),16)``. Pre: threads/cols divides sector divides rows. Post: the ``sector/(threads/cols)``
    passes together are a bijection onto the tile (column-major index)."""
    thread_mode = scalar_tv(rows, cols, threads)[0]
    return lc.make_layout(thread_mode, lc.Layout(rows // sector, sector))


def sector_layouts(config: TransposeConfig) -> dict:
    """The layouts of ``access="sector"``: ``load`` (the x window of BM + A rows, ``scalar_tv``), ``smem`` (that window
    in shared memory, rows padded by one 4-byte bank word: pitch BN + 4/esize elements), ``smem_t`` (its transpose),
    ``store`` (``sector_pass_tv``: one pass of the out tile) and ``passes`` (A / (threads/BM)). For
    ``TransposeConfig("bf16", 256, 1, "sector")``: ``load`` = ``((64,4),20):((80,1),4)``, ``smem`` =
    ``(80,64):(66,1)``, ``smem_t`` = ``(64,80):(1,66)``, ``store`` = ``((64,4),4):((64,1),16)``, 4 passes. Post: the
    passes of ``store`` cover the (BN, BM) out tile once; ``load`` is a bijection onto the (BM + A, BN) window."""
    bm, bn = config.tile
    a = config.sector
    rows = bm + a
    pitch = bn + BANK_BYTES // ELEMENT_BYTES[config.dtype]
    return {"load": scalar_tv(rows, bn, config.threads), "smem": lc.Layout((rows, bn), (pitch, 1)),
            "smem_t": lc.Layout((bn, rows), (1, pitch)), "store": sector_pass_tv(bn, bm, config.threads, a),
            "passes": a // (config.threads // bm)}


def sector_vector_tv(rows: int, cols: int, vector: int, threads: int):
    """The x side of ``access="sector_vector"``: ``make_layout_tv`` of the threads over the tile's (rows/V, cols/V)
    grid of (V, V) blocks — V rows of one 16-byte vector each per thread (fewer where the tile has fewer rows than
    the thread grid's V·V·warp rows: ``sector_vector_tv(64, 64, 8, 256)`` =
    ``((4,8,2,4),(2,8)):((512,2,2048,16),(1,64))``, 2 rows per block) — with a warp's lanes on V row blocks × 32/V
    chunks (lane l: block l/(32/V), chunk l%(32/V)), the warps side by side along the chunks, then below each other,
    repeated down the tile. One instruction of a warp reads V rows V apart, 16·32/V contiguous bytes of each (whole
    sectors), which the column-major smem tile of ``sector_vector_layouts`` spreads over 32 banks.
    ``sector_vector_tv(256, 64, 8, 256)`` = ``(((4,8),(2,4)),(8,8)):(((2048,8),(8192,64)),(1,256))``: thread t =
    lane + 32·(c + 2·r), value (q, j) → row 8·(lane/4 + 8r) + q, column 8·(lane%4 + 4c) + j. Pre: V·V·(warps /
    (cols/32)) divides rows, cols/32 divides the warps. Post: a bijection of threads × values onto the (rows, cols)
    tile (column-major index)."""
    lanes_c = 32 // vector                      # a warp's lanes along the chunks of a row
    warps_c = cols // vector // lanes_c
    warps_r = threads // 32 // warps_c
    block_rows = min(vector, rows // (vector * warps_r))
    thread_grid = lc.Layout(((vector, warps_r), (lanes_c, warps_c)), ((lanes_c, 32 * warps_c), (1, 32)))
    tiler, tv = lc.make_layout_tv(thread_grid, lc.Layout((block_rows, vector)))
    repeats = rows // tiler[0]
    in_tile = lc.composition(lc.Layout(tiler, (1, rows)), tv)
    values = in_tile[1] if repeats == 1 else lc.make_layout(in_tile[1], lc.Layout(repeats, tiler[0]))
    return lc.make_layout(in_tile[0], values)


def row_vector_tv(warps: int, cols: int, vector: int, spacing: int = 1):
    """The out side of ``access="sector_vector"`` over a window of ``cols`` = R·V elements (R 16-byte vectors):
    ``make_layout_tv`` of a warp's lanes on (32/R rows, R vectors) row-major holding (1, vector) each — lane l the
    vector l % R of the warp's row l / R, so a warp stores R·16 contiguous bytes of each of its 32/R out rows — those
    rows ``spacing`` apart, warp w's first row w: the tile has ``spacing·(32/R − 1) + warps`` rows (``out_rows``).
    ``row_vector_tv(8, 256, 8)`` = ``((32,8),8):((64,1),8)`` (R = 32: warp w on row w);
    ``row_vector_tv(8, 64, 8, 16)`` = ``(((8,4),8),8):(((448,16),1),56)`` (lane l → row w + 16·(l/8), column
    8·(l%8) + j of a 56-row tile). Post: a bijection onto the tile's rows w + spacing·i (w < warps, i < 32/R) when
    warps ≤ spacing, onto the (warps, cols) tile when R = 32."""
    lanes_c = cols // vector
    rows_in_warp = 32 // lanes_c
    tiler, warp_tv = lc.make_layout_tv(lc.Layout((rows_in_warp, lanes_c), (lanes_c, 1)), lc.Layout((1, vector)))
    rows = out_rows(warps, cols, vector, spacing)
    in_tile = lc.composition(lc.Layout(tiler, (spacing, rows)), warp_tv)
    return lc.make_layout(lc.make_layout(in_tile[0], lc.Layout(warps, 1)), in_tile[1])


def out_rows(warps: int, cols: int, vector: int, spacing: int) -> int:
    """Rows of ``row_vector_tv``'s tile: warp w's 32·V/cols rows are w + spacing·i. ``out_rows(8, 64, 8, 16)`` = 56
    (4 rows per warp), ``out_rows(8, 256, 8, 16)`` = 8 (one). Post: ≥ warps."""
    return spacing * (32 * vector // cols - 1) + warps


def sector_vector_swizzle():
    """The byte-address swizzle of ``sector_vector``'s column-major smem tile: address bits 2-3 (the word within a
    16-byte chunk) XOR bits 7-8. A warp's transposed read — lane l the V elements of one column from row b + V·l,
    element j at instruction j, any run-time b — touches 32 consecutive 16-byte chunks (bits 4-8 of the address run
    through 32 consecutive values, the low bits fixed), which this XOR maps to 32 different banks (bits 4-6 and,
    XORed in, 7-8); the x side's stores stay conflict-free with the column pitch of ``sector_vector_layouts`` (the
    tests assert both with ``bank_reports``). Its pattern repeats every 512 bytes. ``sector_vector_swizzle()`` =
    ``Sw<2,2,5>``."""
    return lc.Swizzle(2, 2, 5)


def residue_lanes_per_row(vector: int, pitch_bytes: int, residue_rows: int = 32, most: int = 8) -> int:
    """The lanes along one x row of ``residue_vector_tv`` (the rest of the warp's 32 lanes on that many rows of one
    residue mod V): the largest of 8, 4, 2, 1 for which a warp's smem stores into ``sector_vector_layouts``'
    column-major window (column pitch ``pitch_bytes``) fall in 32 banks. A lane stores its vector's element i in
    column V·c + i − s of row V·a + q: lanes on consecutive residue rows are 16 bytes apart, lanes on consecutive
    chunks V columns apart, so their 16-byte chunks of the column-major tile are a + c·step, step = V·pitch/16, and
    the window's swizzle (``sector_vector_swizzle``: address bits 7-8 into 2-3) sends 32 different chunk indices mod 32
    to 32 banks, whatever the run-time base (s, q, i). ``residue_lanes_per_row(8, 560)`` = 4 (bf16: step 280 ≡ 24
    mod 32), ``residue_lanes_per_row(4, 560)`` = 8 (f32: step 140 ≡ 12). ``sector_vector_pair_x`` reads pieces
    of ``vector`` = P < V elements (rows still 16 bytes apart: 8 warps, rows ≡ q mod 8) and allows up to ``most`` =
    BN/P lanes along a row: ``residue_lanes_per_row(2, 568, 32, 32)`` = 32 (step 71, odd: a warp on one row's 128
    bytes). Post: the 32 values of a + c·step mod 32 over a < 32/result, c < result are distinct."""
    step = vector * pitch_bytes // VECTOR_BYTES
    for lanes in (lanes for lanes in (32, 16, 8, 4, 2, 1) if lanes <= most and 32 // lanes <= residue_rows):
        if len({(a + c * step) % 32 for a in range(32 // lanes) for c in range(lanes)}) == 32:
            return lanes
    raise ValueError(f"residue_lanes_per_row: no split of a warp's 32 lanes is conflict-free for a column pitch of "
                     f"{pitch_bytes} bytes")


def residue_vector_tv(rows: int, cols: int, vector: int, lanes_c: int, spacing: int | None = None):
    """The x side of ``access="sector_vector_aligned_x"``: warp q on the tile's rows ≡ q (mod V) — rows whose starts
    share one offset inside a 16-byte vector, so one shift per warp — ``make_layout_tv`` of its lanes on
    (32/lanes_c residue rows, ``lanes_c`` 16-byte chunks) row-major holding one vector (1, V) each, repeated over the
    residue rows and the chunks. One instruction of a warp reads 32/lanes_c rows V apart, 16·lanes_c contiguous bytes
    of each. ``residue_vector_tv(256, 64, 8, 4)`` = ``(((4,8),8),(8,(4,2))):(((2048,8),1),(256,(64,8192)))``: thread t =
    lane + 32·q, value (i, (p, h)) → row q + 8·(lane/4 + 8p), column 8·(lane%4 + 4h) + i. ``spacing`` (default V):
    the warps, W, and the rows' residue modulus, where the piece ``vector`` = P is smaller than V
    (``sector_vector_pair_x``: P = 2 or 4 elements, W = 8 warps; rows ≡ q mod 8 are of one residue mod P too). Pre:
    W·32/lanes_c divides rows, P·lanes_c divides cols. Post: a bijection of W warps × values onto the (rows, cols)
    tile (column-major index), each thread's values in rows of one residue mod W, P consecutive columns at a time."""
    spacing = spacing or vector
    lanes_r = 32 // lanes_c
    tiler, warp_tv = lc.make_layout_tv(lc.Layout((lanes_r, lanes_c), (lanes_c, 1)), lc.Layout((1, vector)))
    in_tile = lc.composition(lc.Layout(tiler, (spacing, rows)), warp_tv)   # residue row a → tile row W·a
    repeats = lc.Layout((rows // (spacing * lanes_r), cols // (vector * lanes_c)),
                        (spacing * lanes_r, rows * vector * lanes_c))
    return lc.make_layout(lc.make_layout(in_tile[0], lc.Layout(spacing, 1)), lc.make_layout(in_tile[1], repeats))


def residue_tail_tv(rows: int, vector: int, spacing: int | None = None):
    """The last 16-byte vector of each x row's window for ``access="sector_vector_aligned_x"`` (a (rows, V) tile):
    warp q holds the rows ≡ q (mod V), rows/V of them; ``make_layout_tv`` of its 32 lanes on (rows/V residue rows,
    p = 32·V/rows pieces) row-major, each piece V/p consecutive elements (the whole vector for rows = 32·V; 8 or 4
    bytes for smaller tiles, aligned like the vector), so all 32 lanes load. ``residue_tail_tv(256, 8)`` =
    ``((32,8),8):((8,1),256)`` (lane l on row 8·l + q); ``residue_tail_tv(64, 8)`` = ``(((4,8),8),2):(((128,8),1),
    64)`` (lane l: row 8·(l/4) + q, columns 2·(l%4) + i). ``spacing`` (default V): the warps W and the rows'
    modulus where the piece ``vector`` = P is smaller (``sector_vector_pair_x``'s (rows, P) tail, rows/W rows of P
    elements per warp); where those rows are fewer than a warp's 32 lanes, lane l holds the whole piece of residue row
    l mod rows/W and the lanes beyond them repeat the first ones (a thread stride 0: the same piece loaded and stored
    twice, harmless): ``residue_tail_tv(64, 2, 8)`` = ``(((8,4),8),2):(((8,0),1),64)``. Pre: rows/W divides 32. Post: a map of W
    warps × values ONTO the (rows, P) tile (a bijection where rows·P ≥ 32·W), each warp's rows of one residue mod W."""
    spacing = spacing or vector
    residue_rows = rows // spacing
    pieces = 32 // residue_rows
    if vector < spacing and residue_rows < 32:
        # sector_vector_pair_x, fewer rows than lanes: lane l takes the whole piece (its P elements, one aligned access) of residue row
        # l mod rows/W, the lanes beyond rows/W repeat the first ones. One column per smem store instruction: the
        # rows' words stay 4·W/… apart, which the window's swizzle keeps in distinct banks (bank_reports: 1-way)
        lanes = lc.Layout((residue_rows, pieces), (spacing, 0))
        return lc.make_layout(lc.make_layout(lanes, lc.Layout(spacing, 1)), lc.Layout(vector, rows))
    tiler, warp_tv = lc.make_layout_tv(lc.Layout((residue_rows, pieces), (pieces, 1)),
                                       lc.Layout((1, vector // pieces)))
    in_tile = lc.composition(lc.Layout(tiler, (spacing, rows)), warp_tv)
    return lc.make_layout(lc.make_layout(in_tile[0], lc.Layout(spacing, 1)), in_tile[1])


def window_pitch(rows: int, vector: int, rows_in_warp: int) -> int:
    """The column pitch (elements) of ``sector_vector``'s column-major smem window of ``rows`` rows: one 16-byte chunk
    past the rows, and where a warp reads ``rows_in_warp`` > 1 out rows (columns A apart: A·pitch·esize = 32·pitch
    bytes = 2·pitch chunks) the next pitch whose chunk step 2·pitch is an odd multiple of 32/rows_in_warp: each row's
    R = 32/rows_in_warp consecutive chunks then sit in 8-chunk groups (address bits 7-8, what
    ``sector_vector_swizzle`` XORs into the word bits) distinct mod 4 across the warp's rows, so the 32 lanes hit 32
    banks whatever the run-time shift. ``window_pitch(272, 8, 1)`` = 280, ``window_pitch(80, 8, 4)`` = 92 (step 184
    = 8·23), ``window_pitch(144, 8, 2)`` = 152 (step 304 = 16·19). Post: ≥ rows + vector."""
    pitch = rows + vector
    if rows_in_warp > 1:
        unit = 16 // rows_in_warp          # pitch ≡ unit (mod 2·unit): step 2·pitch an odd multiple of 2·unit
        pitch += (unit - pitch) % (2 * unit)
    return pitch


def _head_piece_lanes(config: TransposeConfig, pitch: int) -> int | None:
    """``sector_vector_pair_x``'s lanes along a head row where the A head rows (A/8 per warp) can be read in pieces
    with conflict-free smem stores (``residue_lanes_per_row`` over them), else None (element loads, ``scalar_tv``):
    bf16 BM = 64 → 32 (pairs) or 16 (quads)."""
    try:
        return residue_lanes_per_row(config.x_piece, pitch * ELEMENT_BYTES[config.dtype], config.sector // WARPS,
                                     config.tile[1] // config.x_piece)
    except ValueError:
        return None


def sector_vector_layouts(config: TransposeConfig) -> dict:
    """The layouts of ``access="sector_vector"``/``"sector_vector_scalar"`` (tile (BM, BN) = (32·V, 8·V)): ``load``
    (x rows t·BM … of the window: ``sector_vector_tv``, or ``scalar_tv`` for ``sector_vector_scalar``), ``head``
    (the A rows above them: ``scalar_tv``), ``smem`` (the (BM + A, BN) window COLUMN-major — an out row's elements
    contiguous — with a column pitch of BM + A + 16 bytes of elements, ``pitch``, and ``sector_vector_swizzle``),
    ``smem_t`` (its transpose), ``load_smem``/``head_smem`` (``load``/``head`` placed at the window's rows A… / 0…),
    ``store`` (``row_vector_tv``: one pass, warp w on out row w), ``store_smem`` (it over the transposed window),
    ``passes`` (BN / warps), ``pass_rows`` (pass k's first out row: k·warps) and ``origin`` (the smem column of x's
    column n0: 0). With ``rows`` = BM < 32·V a warp takes 32·V/BM out rows A apart (``row_vector_tv(warps, BM, V,
    A)``: one shift per warp), ``passes`` = BN·BM/(32·V·warps), ``pass_rows`` = e mod A + A·(32·V/BM)·⌊e/A⌋ for
    e = k·warps, the column pitch ``window_pitch`` (bf16 BM = 64: ``Sw<2,2,5> o 0 o (80,64):(1,92)``, ``store`` =
    ``(((8,4),8),8):(((448,16),1),56)``, passes from out rows 0 and 8). For ``TransposeConfig("bf16", 256,
    1, "sector_vector")``: ``smem`` = ``Sw<2,2,5> o 0 o (272,64):(1,280)``, ``store`` = ``((32,8),8):((64,1),8)``, 8
    passes.

    ``sector_vector_aligned_x`` reads each x row's window from column n0 − s (s: the row's start inside a 16-byte
    vector, one per warp), BN + V wide: ``load`` = ``residue_vector_tv`` over its first BN columns, ``tail`` =
    ``residue_tail_tv`` over its last V (a (BM, V) tile of its own), both stored with the window's column j at smem
    column j − s + ``origin`` (origin = V − 1, through ``smem.offset`` by (A, V − 1 − s); ``tail_smem`` adds BN
    columns), so x's column n0 + c lands in smem column c + origin whatever s; the up to V − 1 elements of a row's
    window before n0 and after n0 + BN − 1 land in the V − 1 columns before and the V after: ``smem`` has BN + 2V − 1
    columns. bf16: ``smem`` = ``Sw<2,2,5> o 0 o (272,79):(1,280)``.

    ``sector_vector_async_x`` copies the same windows by cp.async, so a 16-byte chunk of x must land on a 16-byte
    chunk of shared memory: the tile is ROW-major (x rows contiguous, no swizzle), its row pitch ``pitch`` ≡ N mod V
    (``x_residue``) so that every row's chunks keep x's alignment once the whole tile is moved by the CTA's shift
    b = (m0·N + n0 − origin) mod V columns (a run-time ``smem.offset``); ``smem`` has BN + 3V − 2 columns (origin V − 1,
    b < V, the window's V extra). ``load`` = ``residue_vector_tv`` with 8 lanes along a row (a warp copies whole
    128-byte row segments), ``tail`` as for ``sector_vector_aligned_x``. bf16, BM = 128, N ≡ 1 mod 8: ``smem`` =
    ``(144,86):(89,1)``. The out side's transposed element reads are then 4-way bank conflicted for 16-bit types (a
    warp's 32 lanes read one column of rows of one residue mod V: the same 4-byte word position in 16 bytes, so at
    most 8 banks; ``bank_reports`` says so). Post: the passes of ``store`` cover the (BN, BM) out tile once; ``load``
    and ``head`` (and ``tail``) are bijections onto their tiles."""
    bm, bn = config.tile
    v, a = config.vector, config.sector
    warps = config.threads // 32
    rows = bm + a
    pitch = window_pitch(rows, v, 32 * v // bm)
    aligned_x = config.access in PIECE_WINDOWS
    async_x = config.access == "sector_vector_async_x"
    pairs_x = config.access == "sector_vector_pair_x"
    piece = config.x_piece
    if pairs_x and bm == WINDOW_VECTORS[-1] * v:
        # one out row per warp leaves the pitch free for the read; an odd number of 8-byte units makes the x pieces'
        # chunk step P·pitch·esize/16 odd (P = 2) or twice odd (P = 4): a warp on 32 or 16 pieces of one row
        pitch += (4 - pitch) % 8
    origin = piece - 1 if aligned_x else 0
    cols = bn + 2 * origin + (1 if aligned_x else 0)
    if async_x:
        cols = bn + 3 * v - 2
        residue = 1 if config.x_residue is None else config.x_residue
        pitch = cols + (residue - cols) % v
    # pass k's warps start at out rows e = k·warps + w of the rows ≡ e (mod A) with 32·V/BM rows A apart each
    # (warps divide A): its first row is e mod A plus A·(32·V/BM) per A of e
    pass_rows = [(e % a) + a * (32 * v // bm) * (e // a) for e in range(0, bn * bm // (32 * v), warps)]
    extra = {}
    if async_x:
        load = residue_vector_tv(bm, bn, v, CHUNKS)
    if pairs_x:
        load = residue_vector_tv(bm, bn, piece, residue_lanes_per_row(piece, pitch * ELEMENT_BYTES[config.dtype],
                                                                      bm // WARPS, bn // piece), WARPS)
    if aligned_x:
        if not (async_x or pairs_x):
            load = residue_vector_tv(bm, bn, v, residue_lanes_per_row(v, pitch * ELEMENT_BYTES[config.dtype], bm // v))
        tail = residue_tail_tv(bm, piece, WARPS if pairs_x else None)
        extra = {"tail": tail,
                 # the window's last P columns sit BN columns right of its first: a static offset of the tile index
                 "tail_smem": lc.ComposedLayout(lc.Swizzle(0, 0, 0), rows * bn,
                                                lc.composition(lc.Layout((bm, piece), (1, rows)), tail))}
    elif config.access == "sector_vector":
        load = sector_vector_tv(bm, bn, v, config.threads)
    else:
        load = scalar_tv(bm, bn, config.threads)
    head = scalar_tv(a, bn, config.threads)
    head_lanes = _head_piece_lanes(config, pitch) if pairs_x else None
    if head_lanes:
        # the A head rows read in pieces too, as the x rows below them (rows ≡ q mod 8 keep their shift: A·N ≡ 0 mod P)
        head = residue_vector_tv(a, bn, piece, head_lanes, WARPS)
        head_tail = residue_tail_tv(a, piece, WARPS)
        extra.update({"head_tail": head_tail,
                      "head_tail_smem": lc.ComposedLayout(lc.Swizzle(0, 0, 0), rows * bn,
                                                          lc.composition(lc.Layout((a, piece), (1, rows)), head_tail))})
    store = row_vector_tv(warps, bm, v, a)
    store_rows = out_rows(warps, bm, v, a)
    sw = sector_vector_swizzle()
    head_smem = lc.composition(lc.Layout((a, bn), (1, rows)), head)
    if aligned_x:
        load_smem = lc.composition(lc.Layout((bm, bn), (1, rows)), load)   # moved by smem.offset (A, V − 1 − s)
        if not head_lanes:   # (in pieces the head rows move by smem.offset (0, P − 1 − s))
            head_smem = lc.ComposedLayout(lc.Swizzle(0, 0, 0), rows * origin, head_smem)
    else:
        # the x rows t·BM … sit below the A head rows: the tile index moves by A (a static offset keeps the smem
        # stores' alignment known, so they take 4 bytes where the column holds two of a thread's values)
        load_smem = lc.ComposedLayout(lc.Swizzle(0, 0, 0), a, lc.composition(lc.Layout((bm, bn), (1, rows)), load))
    return {"load": load, "head": head,
            "smem": lc.ComposedLayout(sw, 0, lc.Layout((rows, cols), (1, pitch))),
            "smem_t": lc.ComposedLayout(sw, 0, lc.Layout((cols, rows), (pitch, 1))),
            "load_smem": load_smem, "head_smem": head_smem,
            "store": store, "store_smem": lc.composition(lc.Layout((store_rows, bm), (1, cols)), store),
            "passes": len(pass_rows), "pass_rows": pass_rows, "pitch": pitch, "origin": origin, **extra,
            **({"smem": lc.Layout((rows, cols), (pitch, 1)), "smem_t": lc.Layout((cols, rows), (1, pitch))}
               if async_x else {})}


def layouts(config: TransposeConfig) -> dict:
    """The kernel's layouts: ``load`` (x tile), ``store_smem`` (Sw_in o 0 o load), ``load_smem`` (Sw_out o 0 o
    store), ``store`` (out tile), ``smem`` (the x tile in shared memory, row-major) and ``smem_t`` (its transpose).
    For ``TransposeConfig("bf16")``: ``smem`` = ``(64,64):(64,1)``, ``smem_t`` = ``(64,64):(1,64)``, ``load_smem`` =
    ``Sw<3,3,6> o 0 o (((8,4),8),(2,8)):(((512,2),8),(1,64))``. Post: ``load`` and ``store`` are bijections onto
    their tiles, and ``store_smem``, ``load_smem`` name the same smem element for x's (r, c) and out's (c, r)."""
    if config.access == "sector":
        return sector_layouts(config)
    if config.access in SECTOR_VECTOR:
        return sector_vector_layouts(config)
    bm, bn = config.tile
    v = config.vector
    tile = lc.Layout((bm, bn), (bn, 1))
    if config.access == "scalar":
        esize = ELEMENT_BYTES[config.dtype]
        load, store = scalar_tv(bm, bn, config.threads), scalar_tv(bn, bm, config.threads)
        sw_in, sw_out = scalar_in_swizzle(bm, bn, esize), scalar_out_swizzle(bm, bn, esize)
    else:
        load = tile_tv(bm, bn, v, config.threads, config.pair)
        store = tile_tv(bn, bm, v, config.threads, config.pair)
        sw_in, sw_out = in_swizzle(bm, bn, v), out_swizzle(bm, bn, v)
    return {"load": load, "store": store, "smem": tile, "smem_t": lc.Layout((bn, bm), (1, bn)),
            "store_smem": lc.ComposedLayout(sw_in, 0, load), "load_smem": lc.ComposedLayout(sw_out, 0, store)}


def bank_reports(config: TransposeConfig) -> dict:
    """layoutc's bank-conflict reports of the smem store and the smem load, every warp, at the widths the lowering
    emits (``bank_conflicts``' default). With ``access="sector"`` the load runs once per pass at a per-thread origin
    (``smem.offset`` by the pass's first row and A − s rows of x): a warp's 32 threads share one out row, so one
    origin, and ``load`` holds a report per warp for every pass and every shift s in [0, A) (base = the origin's
    byte offset): what the kernel can meet at run time, not a bound. Post: ``ways == 1`` for all (the tests assert
    it). With ``sector_vector``/``sector_vector_scalar`` the store holds the x rows' and the head rows' reports and
    the load one report per warp, pass and shift s in [0, A) (each warp reads its out row's window from row A − s of
    the transposed tile), at the 2-byte (bf16) or 4-byte width of the element loads the run-time origin allows. With
    ``sector_vector_aligned_x`` the x rows' stores (``load_smem`` and ``tail_smem``) hold a report per warp for every
    shift s in [0, V) of the warp's window (base: the smem.offset (A, V − 1 − s)), and the loads start at the tile's
    origin column V − 1. Pass k's loads start at column ``pass_rows[k]``; with ``rows`` < 32·V a warp's 32·V/BM out
    rows share the shift, so one report per warp, pass and shift still covers them (``ways == 1`` for every load; the
    smaller tiles' stores may report 2). With ``sector_vector_async_x`` (row-major tile) every report is taken for
    each u = (m0·N + n0) mod V, which fixes the CTA's shift b = (u − V + 1) mod V and warp q's s = (u + q·N) mod V
    (N ≡ ``x_residue``): the x rows' cp.async writes (16-byte, or the tail's pieces) at the window (A, V − 1 + b − s),
    the head rows' element stores at column V − 1 + b, and the transposed element reads at every pass, shift and b
    (4-way for 16-bit types: see ``sector_vector_layouts``)."""
    ls = layouts(config)
    dtype = config.dtype
    warps = config.threads // 32
    if config.access == "sector_vector_async_x":
        return _async_bank_reports(config, ls)
    if config.access in SECTOR_VECTOR:
        esize = ELEMENT_BYTES[dtype]
        a, pitch, origin = config.sector, ls["pitch"], ls["origin"]
        if config.access in ("sector_vector_aligned_x", "sector_vector_pair_x"):
            # warp q's x rows start s (any of [0, P)) elements into an aligned piece (16-byte vector, or 4 or 8 bytes
            # for sector_vector_pair_x): its window goes to smem.offset (A, P − 1 − s) of the tile
            x_rows = [bank_conflicts(ls[tv], ls["smem"], dtype, warp=w, base=esize * (a + (origin - s) * pitch))
                      for tv in ("load_smem", "tail_smem") for s in range(config.x_piece) for w in range(warps)]
        else:
            x_rows = [bank_conflicts(ls["load_smem"], ls["smem"], dtype, warp=w) for w in range(warps)]
        if "head_tail" in ls:   # the head rows' pieces at smem.offset (0, P − 1 − s)
            heads = [bank_conflicts(ls[tv], ls["smem"], dtype, warp=w, base=esize * (origin - s) * pitch)
                     for tv in ("head_smem", "head_tail_smem") for s in range(config.x_piece) for w in range(warps)]
        else:
            heads = [bank_conflicts(ls["head_smem"], ls["smem"], dtype, warp=w) for w in range(warps)]
        return {"store": x_rows + heads,
                "load": [bank_conflicts(ls["store_smem"], ls["smem_t"], dtype, esize, warp=w,
                                        base=esize * ((pass_row + origin) * pitch + a - s))
                         for pass_row in ls["pass_rows"] for s in range(a) for w in range(warps)]}
    if config.access == "sector":
        esize = ELEMENT_BYTES[dtype]
        down = config.threads // config.tile[0]
        pitch = lc.stride(ls["smem"])[0]
        return {"store": [bank_conflicts(ls["load"], ls["smem"], dtype, warp=w) for w in range(warps)],
                "load": [bank_conflicts(ls["store"], ls["smem_t"], dtype, warp=w,
                                        base=esize * (down * k + (config.sector - s) * pitch))
                         for k in range(ls["passes"]) for s in range(config.sector) for w in range(warps)]}
    return {name: [bank_conflicts(ls[tv], ls[view], dtype, warp=w) for w in range(warps)]
            for name, tv, view in (("store", "store_smem", "smem"), ("load", "load_smem", "smem_t"))}


def _async_bank_reports(config: TransposeConfig, ls: dict) -> dict:
    """``bank_reports`` of ``sector_vector_async_x`` (see there)."""
    dtype, esize, v, a = config.dtype, ELEMENT_BYTES[config.dtype], config.vector, config.sector
    warps = config.threads // 32
    pitch, origin = ls["pitch"], ls["origin"]
    residue = 1 if config.x_residue is None else config.x_residue
    store, load = [], []
    for u in range(v):
        shift = (u - origin) % v
        for w in range(warps):
            s = (u + w * residue) % v
            window = esize * (a * pitch + origin + shift - s)
            store += [bank_conflicts(ls[tv], ls["smem"], dtype, warp=w, base=window) for tv in ("load_smem", "tail_smem")]
            store.append(bank_conflicts(ls["head_smem"], ls["smem"], dtype, warp=w, base=esize * shift))
    for pass_row in ls["pass_rows"]:
        for shift in range(v):
            for s in range(a):
                load += [bank_conflicts(ls["store_smem"], ls["smem_t"], dtype, esize, warp=w,
                                        base=esize * ((a - s) * pitch + pass_row + origin + shift))
                         for w in range(warps)]
    return {"store": store, "load": load}


def build(config: TransposeConfig = TransposeConfig()):
    """The transpose kernel ``@transpose(%x: gtensor<T, 2>, %out: gtensor<T, 2>)``: grid (⌈N/BN⌉, ⌈M/BM⌉), each CTA
    a (BM, BN) tile through shared memory swizzled by ``in_swizzle`` (``Sw<3,3,-6>`` for bf16). Post: a verified
    Module whose kernel writes ``out = x.T``."""
    config.validate()
    if config.access == "sector":
        return build_sector(config)
    if config.access in SECTOR_VECTOR:
        return build_sector_vector(config)
    dtype = config.dtype
    bm, bn = config.tile
    ls = layouts(config)
    values = lc.size(ls["load"][1])
    kb = KernelBuilder("transpose", grid=(cdiv(dim("x", 1), bn), cdiv(dim("x", 0), bm), 1),
                       block=(config.threads, 1, 1), x=gtensor(dtype, 2), out=gtensor(dtype, 2))
    b = kb.b
    x, out = kb["x"], kb["out"]
    tile = b.smem.alloc(type=smem(dtype, ls["smem"]), name="tile")
    thread, m0, n0 = _block_origin(b, bm, bn)
    x_tile = b.gmem.tile(x, m0, n0, shape=(bm, bn), name="x_tile")
    values_t = frag(dtype, lc.shape(ls["load"][1]))
    xs = b.gmem.load(x_tile, thread, tv=ls["load"], type=values_t, name="xs")
    b.smem.store(tile, thread, xs, tv=ls["store_smem"])
    b.barrier.cta()
    tile_t = b.smem.permute(tile, order=(1, 0), name="tile_t")
    ys = b.smem.load(tile_t, thread, tv=ls["load_smem"], type=frag(dtype, lc.shape(ls["store"][1])), name="ys")
    out_tile = b.gmem.tile(out, n0, m0, shape=(bn, bm), name="out_tile")
    b.gmem.store(out_tile, thread, ys, tv=ls["store"])
    assert values == lc.size(ls["store"][1])
    return kb.module("ptxgen/kernels/transpose")


def _block_origin(b, bm: int, bn: int):
    """(the thread index, x's row m0 = BM·blockIdx.y, x's column n0 = BN·blockIdx.x) of the CTA's (BM, BN) block."""
    thread = b.gpu.thread_id(dim="x", name="thread")
    col_block = b.gpu.block_id(dim="x", name="col_block")
    row_block = b.gpu.block_id(dim="y", name="row_block")
    m0 = b.arith.mul(row_block, b.const(bm, i32, name="bm"), name="m0")
    n0 = b.arith.mul(col_block, b.const(bn, i32, name="bn"), name="n0")
    return thread, m0, n0


def build_sector(config: TransposeConfig):
    """The ``access="sector"`` kernel (same signature as ``build``'s): grid (⌈N/BN⌉, ⌈(M + A − 1)/BM⌉), CTA (n, t)
    reads x rows t·BM − A … (t+1)·BM − 1 of columns n·BN … into a padded smem tile, then writes, in each out row c of
    its block, the BM columns from t·BM − s_c (s_c = (c·M) mod A: the window starts on a 32-byte sector of the row)
    in ``passes`` passes of per-thread origins. Post: a verified Module whose kernel writes ``out = x.T``."""
    dtype = config.dtype
    bm, bn = config.tile
    a = config.sector
    ls = sector_layouts(config)
    rows = bm + a
    down = config.threads // bm
    kb = KernelBuilder("transpose", grid=(cdiv(dim("x", 1), bn), cdiv(hadd(dim("x", 0), a - 1), bm), 1),
                       block=(config.threads, 1, 1), x=gtensor(dtype, 2), out=gtensor(dtype, 2))
    b = kb.b
    x, out = kb["x"], kb["out"]
    tile = b.smem.alloc(type=smem(dtype, ls["smem"]), name="tile")
    thread, m0, n0 = _block_origin(b, bm, bn)
    sector = b.const(a, i32, name="sector")
    x_tile = b.gmem.tile(x, b.arith.sub(m0, sector, name="x_row0"), n0, shape=(rows, bn), name="x_tile")
    xs = b.gmem.load(x_tile, thread, tv=ls["load"], type=frag(dtype, lc.shape(ls["load"][1])), name="xs")
    b.smem.store(tile, thread, xs, tv=ls["load"])
    b.barrier.cta()
    tile_t = b.smem.permute(tile, order=(1, 0), name="tile_t")
    # a thread's out rows in pass k: n0 + k·down + row_in_pass + A·q, all ≡ mod A, so one shift s per thread (and
    # per warp: a warp's threads share row_in_pass)
    row_in_pass = b.arith.div(thread, b.const(bm, i32, name="bm_threads"), name="row_in_pass")
    out_cols = b.gtensor.dim(out, mode=1, name="out_cols")
    low_bits = b.const(a - 1, i32, name="sector_mask")
    values_t = frag(dtype, lc.shape(ls["store"][1]))
    for k in range(ls["passes"]):
        first = b.const(k * down, i32, name=f"pass{k}_row")
        out_row = b.arith.add(b.arith.add(n0, first), row_in_pass, name=f"pass{k}_out_row")
        # s = out_row·M mod A: where the row starts inside its sector (i32 wrap-around keeps the low bits exact)
        shift = b.arith.and_(b.arith.mul(out_row, out_cols), low_bits, name=f"pass{k}_shift")
        x_row = b.arith.sub(sector, shift, name=f"pass{k}_x_row")       # the window's first x row in the tile
        window = b.smem.offset(tile_t, first, x_row, name=f"pass{k}_window")
        ys = b.smem.load(window, thread, tv=ls["store"], type=values_t, name=f"pass{k}_ys")
        out_tile = b.gmem.tile(out, b.arith.add(n0, first, name=f"pass{k}_n0"),
                               b.arith.sub(m0, shift, name=f"pass{k}_m0"), shape=(bn, bm), name=f"pass{k}_out")
        b.gmem.store(out_tile, thread, ys, tv=ls["store"])
    return kb.module("ptxgen/kernels/transpose")


def sector_vector_residency(config: TransposeConfig):
    """The CTAs per SM ``build_sector_vector`` asks ptxas for (``.minnctapersm``), or None for no bound: what shared
    memory and the SM's threads allow, capped by the registers a thread needs without spilling for the values it holds
    between its x loads and its smem stores (BM·BN/threads: ``WINDOW_REGISTERS``, ``SCALAR_WINDOW_REGISTERS``,
    measured with nvJitLink). ``TransposeConfig("bf16", 256, 1, "sector_vector_aligned_x", 64)`` → 8 (16 values, 32
    registers); ``rows`` = 32·V keeps the earlier bounds (``sector_vector``: none; ``sector_vector_aligned_x``: 80
    registers). Post: None or ≥ 1."""
    ls = sector_vector_layouts(config)
    bm, bn = config.tile
    smem_bytes = lc.cosize(ls["smem"]) * ELEMENT_BYTES[config.dtype]
    fits = min(SM_THREADS // config.threads, SM_SHARED_BYTES // (smem_bytes + 1024))
    values = bm * bn // config.threads
    if config.access == "sector_vector_async_x":
        # no x value waits in a register (cp.async): what shared memory and the threads allow, at most the CTAs
        # whose threads fit ASYNC_REGISTERS each
        return min(fits, SM_REGISTERS // (ASYNC_REGISTERS * config.threads))
    if config.access == "sector_vector_pair_x":
        # its x pieces stay packed (two or four 16-bit values per 32-bit register, gmem.load's vector phi): as many
        # CTAs as shared memory and the SM's threads allow, measured with no spill (nvJitLink and the system ptxas,
        # bf16, 4- and 8-byte pieces): BM = 64 and 128 in 32 registers (8 CTAs of 256 threads; unbounded 40-43 and
        # 63 by nvJitLink, 32 by ptxas), BM = 256 in 48 (5 CTAs: its 38-40 KB window; 6 would spill 40 bytes)
        return fits
    if bm == WINDOW_VECTORS[-1] * config.vector:
        # a thread holds BM·BN/threads values between its loads and the smem store. Read element by element
        # (sector_vector_scalar), ptxas fits them in the registers that let as many CTAs stay resident as shared
        # memory allows (nvJitLink, bf16, 256 threads: 147 registers unbounded, 40 with no spill under this bound);
        # as 16-byte vectors (sector_vector) it spills under any bound tighter than its own 78 registers, so it gets
        # none
        if config.access == "sector_vector_scalar":
            return fits
        if config.access == "sector_vector_aligned_x":
            # its run-time checked x vectors (each merged with its element path) leave ptxas free to keep every
            # loaded value apart: 118 registers unbounded (nvJitLink, bf16: 2 CTAs per SM); bounded to
            # sector_vector's own residency, 80 with no spill (spills at 4 CTAs)
            return SM_REGISTERS // (X_VECTOR_REGISTERS * config.threads)
        return None
    table = SCALAR_WINDOW_REGISTERS if config.access == "sector_vector_scalar" else WINDOW_REGISTERS
    if values not in table:         # more values than measured (fewer than 128 threads): no bound
        return None
    return min(fits, SM_REGISTERS // (table[values] * config.threads))


def build_sector_vector(config: TransposeConfig):
    """The ``access="sector_vector"``/``"sector_vector_scalar"`` kernel (``build``'s signature): ``build_sector``'s
    windows (out row c's window of CTA t starts at column t·BM − s_c, s_c = (c·M) mod A, on a 32-byte sector) with
    one warp per out row and pass, each lane one 16-byte vector of it: ``gmem.store {vector_check = true}`` stores
    it as one ``st.global.v4`` (aligned by construction; checked at run time since out's pitch is not) and the row's
    two ends element-wise (with ``rows`` < 32·V a warp stores 32·V/BM such rows, A apart, at once). x's rows
    t·BM … (t+1)·BM − 1 are read by ``load`` (16-byte vectors where x's rows are
    16-byte aligned, for ``sector_vector``; ``_load_x_windows`` for ``sector_vector_aligned_x``), the A rows above by
    ``head``, into the swizzled window. Post: a verified Module whose kernel writes ``out = x.T``."""
    dtype = config.dtype
    bm, bn = config.tile
    a = config.sector
    ls = sector_vector_layouts(config)
    warps = config.threads // 32
    resident = sector_vector_residency(config)
    kb = KernelBuilder("transpose", grid=(cdiv(dim("x", 1), bn), cdiv(hadd(dim("x", 0), a - 1), bm), 1),
                       block=(config.threads, 1, 1), min_ctas_per_sm=resident, x=gtensor(dtype, 2),
                       out=gtensor(dtype, 2))
    b = kb.b
    x, out = kb["x"], kb["out"]
    tile = b.smem.alloc(type=smem(dtype, ls["smem"]), name="tile")
    thread, m0, n0 = _block_origin(b, bm, bn)
    sector = b.const(a, i32, name="sector")
    head_pieces = "head_tail" in ls   # the head rows read in pieces with the x rows (_load_x_windows)
    if not head_pieces:
        x_head = b.gmem.tile(x, b.arith.sub(m0, sector, name="x_head_row0"), n0, shape=(a, bn), name="x_head")
        heads = b.gmem.load(x_head, thread, tv=ls["head"], type=frag(dtype, lc.shape(ls["head"][1])), name="heads",
                            **_hint(config.x_cache))
    async_x = config.access == "sector_vector_async_x"
    tile_shift = None
    if async_x:
        # the whole row-major tile moves by b = (m0·N + n0 − origin) mod V columns, so that x's 16-byte chunks land
        # on 16-byte chunks of shared memory (its row pitch ≡ N mod V)
        x_cols = b.gtensor.dim(x, mode=1, name="x_cols")
        tile_shift = b.arith.and_(b.arith.sub(b.arith.add(b.arith.mul(m0, x_cols), n0), b.const(ls["origin"], i32)),
                             b.const(config.vector - 1, i32, name="tile_shift_mask"), name="tile_shift")
        zero = b.const(0, i32, name="zero")
        b.smem.store(b.smem.offset(tile, zero, tile_shift, name="head_window"), thread, heads, tv=ls["head_smem"])
    elif not head_pieces:
        b.smem.store(tile, thread, heads, tv=ls["head_smem"])
    warp = b.arith.div(thread, b.const(32, i32, name="warp_threads"), name="warp")
    if async_x:
        _copy_x_windows(b, config, ls, x, tile, thread, warp, m0, n0, tile_shift)
    elif config.access in ("sector_vector_aligned_x", "sector_vector_pair_x"):
        _load_x_windows(b, config, ls, x, tile, thread, warp, m0, n0)
    else:
        x_tile = b.gmem.tile(x, m0, n0, shape=(bm, bn), name="x_tile")
        xs = b.gmem.load(x_tile, thread, tv=ls["load"], type=frag(dtype, lc.shape(ls["load"][1])), name="xs",
                         **_hint(config.x_cache))
        b.smem.store(tile, thread, xs, tv=ls["load_smem"])
    b.barrier.cta()
    tile_t = b.smem.permute(tile, order=(1, 0), name="tile_t")
    # warp w writes out rows n0 + pass_rows[k] + w + A·i in pass k (i < 32·V/BM): all ≡ mod A, one shift s per warp
    out_cols = b.gtensor.dim(out, mode=1, name="out_cols")
    low_bits = b.const(a - 1, i32, name="sector_mask")
    values_t = frag(dtype, lc.shape(ls["store"][1]))
    store_rows = out_rows(warps, bm, config.vector, a)
    for k, pass_row in enumerate(ls["pass_rows"]):
        first = b.const(pass_row, i32, name=f"pass{k}_row")
        row0 = b.arith.add(n0, first, name=f"pass{k}_n0")
        out_row = b.arith.add(row0, warp, name=f"pass{k}_out_row")
        # s = out_row·M mod A: where the row starts inside its sector (i32 wrap-around keeps the low bits exact)
        shift = b.arith.and_(b.arith.mul(out_row, out_cols), low_bits, name=f"pass{k}_shift")
        x_row = b.arith.sub(sector, shift, name=f"pass{k}_x_row")       # the window's first x row in the tile
        column = first if not ls["origin"] else b.const(pass_row + ls["origin"], i32, name=f"pass{k}_column")
        if tile_shift is not None:
            column = b.arith.add(column, tile_shift, name=f"pass{k}_shifted_column")
        window = b.smem.offset(tile_t, column, x_row, name=f"pass{k}_window")
        ys = b.smem.load(window, thread, tv=ls["store_smem"], type=values_t, name=f"pass{k}_ys")
        out_tile = b.gmem.tile(out, row0, b.arith.sub(m0, shift, name=f"pass{k}_m0"), shape=(store_rows, bm),
                               name=f"pass{k}_out")
        b.gmem.store(out_tile, thread, ys, tv=ls["store"], vector_check=True, **_hint(config.out_cache))
    return kb.module("ptxgen/kernels/transpose")


def _hint(cache: str) -> dict:
    """The gmem access's ``cache`` attribute for a config's hint: none for ``normal`` (the IR without hints)."""
    return {} if cache == "normal" else {"cache": cache}


def _x_windows(b, config: TransposeConfig, x, warp, m0, n0):
    """Warp q's x window of the tile at (m0, n0): x rows m0 + q + V·a (all ≡ q mod V), whose starts share the offset
    s = ((m0 + q)·N + n0) mod V inside a 16-byte vector (i32 wrap-around keeps the low bits exact), read from column
    n0 − s: → (s, the (BM, BN) gview from there, the (BM, V) gview of the V columns after it)."""
    bm, bn = config.tile
    v = config.x_piece
    x_cols = b.gtensor.dim(x, mode=1, name="x_row_pitch")
    row = b.arith.add(m0, warp, name="x_row")
    x_shift = b.arith.and_(b.arith.add(b.arith.mul(row, x_cols), n0), b.const(v - 1, i32, name="piece_mask"),
                           name="x_shift")
    x_col0 = b.arith.sub(n0, x_shift, name="x_col0")
    x_tile = b.gmem.tile(x, m0, x_col0, shape=(bm, bn), name="x_tile")
    x_tail = b.gmem.tile(x, m0, b.arith.add(x_col0, b.const(bn, i32, name="bn_cols"), name="x_tail_col0"),
                         shape=(bm, v), name="x_tail")
    return x_shift, x_tile, x_tail


def _load_x_windows(b, config: TransposeConfig, ls: dict, x, tile, thread, warp, m0, n0) -> None:
    """``sector_vector_aligned_x``'s x side: warp q reads x rows m0 + q + V·a (all ≡ q mod V: m0 is a multiple of V),
    whose starts share one offset s = ((m0 + q)·N + n0) mod V inside a 16-byte vector (x's base taken as 16-byte
    aligned; i32 wrap-around keeps the low bits exact), from column n0 − s, BN + V columns: ``gmem.load {vector_check
    = true}`` of 16-byte vectors (aligned by construction, checked at run time: element loads where x's pitch or base
    breaks that, or at the tensor's edges), stored at ``smem.offset`` (A, V − 1 − s) of the tile so that x's column
    n0 + c lands in the tile's column c + V − 1 (``sector_vector_layouts``' origin) for every row."""
    dtype = config.dtype
    x_shift, x_tile, x_tail = _x_windows(b, config, x, warp, m0, n0)
    xs = b.gmem.load(x_tile, thread, tv=ls["load"], type=frag(dtype, lc.shape(ls["load"][1])), vector_check=True,
                     name="xs", **_hint(config.x_cache))
    tails = b.gmem.load(x_tail, thread, tv=ls["tail"], type=frag(dtype, lc.shape(ls["tail"][1])), vector_check=True,
                        name="tails", **_hint(config.x_cache))
    window = b.smem.offset(tile, b.const(config.sector, i32, name="x_rows_row"),
                           b.arith.sub(b.const(ls["origin"], i32, name="origin"), x_shift, name="x_window_col"),
                           name="x_window")
    b.smem.store(window, thread, xs, tv=ls["load_smem"])
    b.smem.store(window, thread, tails, tv=ls["tail_smem"])
    if "head_tail" in ls:
        # the A head rows m0 − A …: rows of the same residues mod 8, so the same shift s (A·N ≡ 0 mod P), at window
        # row 0
        x_col0 = b.arith.sub(n0, x_shift, name="head_col0")
        head_row0 = b.arith.sub(m0, b.const(config.sector, i32, name="head_rows"), name="x_head_row0")
        x_head = b.gmem.tile(x, head_row0, x_col0, shape=(config.sector, config.tile[1]), name="x_head")
        x_head_tail = b.gmem.tile(x, head_row0, b.arith.add(x_col0, b.const(config.tile[1], i32, name="head_bn")),
                                  shape=(config.sector, config.x_piece), name="x_head_tail")
        heads = b.gmem.load(x_head, thread, tv=ls["head"], type=frag(dtype, lc.shape(ls["head"][1])),
                            vector_check=True, name="heads", **_hint(config.x_cache))
        head_tails = b.gmem.load(x_head_tail, thread, tv=ls["head_tail"],
                                 type=frag(dtype, lc.shape(ls["head_tail"][1])), vector_check=True, name="head_tails",
                                 **_hint(config.x_cache))
        head_window = b.smem.offset(tile, b.const(0, i32, name="head_window_row"),
                                    b.arith.sub(b.const(ls["origin"], i32, name="head_origin"), x_shift,
                                                name="head_window_col"), name="head_window")
        b.smem.store(head_window, thread, heads, tv=ls["head_smem"])
        b.smem.store(head_window, thread, head_tails, tv=ls["head_tail_smem"])


def _copy_x_windows(b, config: TransposeConfig, ls: dict, x, tile, thread, warp, m0, n0, shift) -> None:
    """``sector_vector_async_x``'s x side: ``_load_x_windows``' per-warp windows (warp q: x rows ≡ q mod V, from column
    n0 − s, s = ((m0 + q)·N + n0) mod V, BN + V columns) copied by ``cpasync.copy {vector_check = true}`` into the
    row-major tile at ``smem.offset`` (A, V − 1 + b − s) (b: the tile's shift), no x value in a register; then
    ``cpasync.commit`` and ``cpasync.wait {pending = 0}`` (the caller's CTA barrier follows)."""
    x_shift, x_tile, x_tail = _x_windows(b, config, x, warp, m0, n0)
    column = b.arith.sub(b.arith.add(b.const(ls["origin"], i32, name="origin"), shift), x_shift, name="x_window_col")
    window = b.smem.offset(tile, b.const(config.sector, i32, name="x_rows_row"), column, name="x_window")
    b.cpasync.copy(x_tile, thread, window, tv=ls["load"], smem_tv=ls["load_smem"], vector_check=True)
    b.cpasync.copy(x_tail, thread, window, tv=ls["tail"], smem_tv=ls["tail_smem"], vector_check=True)
    b.cpasync.commit()
    b.cpasync.wait(pending=0)


_BUILT: dict = {}


def kernel(config: TransposeConfig):
    """``build(config)``, built once per process (``kernel(TransposeConfig())`` is the bf16 module). Post: the same
    Module for equal configurations."""
    if config not in _BUILT:
        _BUILT[config] = build(config)
    return _BUILT[config]


def transpose(x, out=None, *, config: TransposeConfig | None = None):
    """``x.T`` as a new contiguous (N, M) array (or into ``out``, any strides): a torch CUDA tensor runs on the GPU
    (torch's current stream), a numpy array (``ml_dtypes.bfloat16`` for bf16) in the CPU interpreter. The configuration
    defaults to ``TransposeConfig.default(x's dtype)``. A 0-d or 1-d x is its own transpose (torch's and numpy's
    ``x.T``): a copy of it (into ``out`` of x's shape). An ``out`` that shares memory with x (``transpose(s, out=s)``
    of a square s) gets x copied first: the kernel's CTAs would read tiles others had overwritten. Raises TypeError
    for another dtype or a non-array (``Arg``'s checks; ``out`` of another dtype or kind than x's:
    ``transpose: out has dtype numpy float16 but x has numpy float32: out has x's dtype``), ValueError for a rank
    above 2 (``transpose: x must be 2-D (M, N) (or 0-d or 1-d, its own transpose), not of shape (1, 5, 7)``), an
    ``out`` of the wrong shape or a read-only numpy ``out``. Post: out = x.T elementwise."""
    import numpy as np

    arg = Arg("transpose", "x", x)
    dtype = arg.check_dtype("transpose", ("f32", "bf16", "f16"))
    if len(arg.shape) > 2:
        arg.check_rank("transpose", 2, "(M, N) (or 0-d or 1-d, its own transpose)")
    out_arg = None
    if out is not None:
        out_arg = Arg("transpose", "out", out)
        same_kind("transpose", [arg, out_arg])
        if out_arg.dtype != dtype:
            raise TypeError(f"transpose: out has dtype {out_arg.shown} but x has {arg.shown}: out has x's dtype")
        writable("transpose", out_arg)
        out = out_arg.value
        if overlaps(arg, out_arg):
            arg = private_copy("transpose", arg)
    x = arg.value
    if len(arg.shape) < 2:
        if out is None:
            return x.copy() if arg.kind == "numpy" else x.clone()
        if tuple(out.shape) != arg.shape:
            raise ValueError(f"transpose: out has shape {tuple(out.shape)}, but x.T has shape {arg.shape}")
        out[...] = x
        return out
    m, n = (int(s) for s in x.shape)
    config = config or TransposeConfig.default(dtype, rows_aligned(x, out, m, n), out_rows_on_sectors(x, out, m),
                                               rows_aligned(x, None, 0, n))
    if config.x_residue is None:
        config = config.for_columns(n)      # sector_vector_async_x: its tile's pitch follows x's
    if out is None:
        out = np.empty((n, m), x.dtype) if isinstance(x, np.ndarray) else x.new_empty((n, m))
    if tuple(out.shape) != (n, m):
        raise ValueError(f"transpose: out has shape {tuple(out.shape)}, but x.T has shape {(n, m)}")
    if m == 0 or n == 0:
        return out
    if isinstance(x, np.ndarray):
        from ptxgen.interp import interpret
        interpret(kernel(config), {"x": np.ascontiguousarray(x), "out": out})
        return out
    jit_kernel(config)(x=x, out=out, stream=stream())
    return out


def rows_aligned(x, out, m: int, n: int) -> bool:
    """Whether every row of x and of out (given or new) starts 16-byte aligned: x's and out's row pitches (bytes)
    and base addresses multiples of 16 — the condition of ``access="vector"``'s 16-byte accesses (the launcher
    otherwise specializes them to element accesses). A numpy x (the interpreter) counts by its pitches only.
    ``rows_aligned(x, None, 0, n)``: x's rows alone (out's pitch 0)."""
    import numpy as np

    esize = x.itemsize if isinstance(x, np.ndarray) else x.element_size()
    pitches = [n * esize, m * esize]
    if not isinstance(x, np.ndarray):
        pitches += [x.stride(0) * esize, x.data_ptr()]
        if out is not None:
            pitches += [out.stride(0) * esize, out.data_ptr()]
    return all(p % VECTOR_BYTES == 0 for p in pitches)


def out_rows_on_sectors(x, out, m: int) -> bool:
    """Whether every row of out (given or new, (N, M)) starts on a 32-byte sector: its row pitch (bytes) and base
    address multiples of 32 — else a CTA's window of a row covers partial sectors that a neighbour CTA writes too, and
    ``TransposeConfig.default`` picks ``access="sector"`` for unaligned rows. A numpy x (the interpreter) counts by
    out's pitch m·esize only: ``out_rows_on_sectors(np.zeros((16, 3), np.float32), None, 16)`` → True (64 bytes)."""
    import numpy as np

    esize = x.itemsize if isinstance(x, np.ndarray) else x.element_size()
    pitches = [m * esize]
    if out is not None and not isinstance(out, np.ndarray):
        pitches += [out.stride(0) * esize, out.data_ptr()]
    return all(p % SECTOR_BYTES == 0 for p in pitches)


_JITTED: dict = {}


def jit_kernel(config: TransposeConfig):
    """The launchable kernel of ``config`` (``ptxgen.runtime.jit`` of ``kernel(config)``, e.g. the 64 x 64 bf16 tile
    of ``TransposeConfig()``), made once per process. Post: the same object for equal configs."""
    if config not in _JITTED:
        from ptxgen.runtime import jit
        _JITTED[config] = jit(kernel(config))
    return _JITTED[config]
