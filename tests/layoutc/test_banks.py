"""Bank-conflict analysis (layoutc.hopper.banks): pinned numbers for the textbook cases and properties.

How to build the TV layouts of the usual patterns with layoutc (tv(t, v) = 1-D coordinate m + M·n of an M×N tile):

* ldmatrix/stmatrix .x4, 4 matrices side by side along the row (lane t: row t%8, 16-byte chunk t//8), bf16 over an
  (8,64) tile: ``Layout(((8,4),8),((1,64),8))`` — the thread mode (8,4):(1,64) walks 8 rows then 4 chunks of 8
  elements (8 columns = 64 indices), the value mode 8:8 walks the 8 elements of a chunk along the row
  (``ldmatrix_access((8,64),'bf16')``).
* the same over a (64,64) tile: ``Layout(((8,4),8),((1,512),64))``; the 16×16 A-fragment order (a0..a3):
  ``ldmatrix_access((64,64),'bf16',(2,2))`` = ``((8,2,2),8):((1,8,512),64)``.
* one column of a 32×32 tile, one f32 per lane: ``Layout(32, 1)`` (lane t → coordinate t = (t, 0)).
* every column in turn, lane t owning row t: ``Layout((32,32),(1,32))``.
* the wgmma accumulator (epilogue ``st.shared`` straight from registers): ``accumulator_tv(N)`` =
  ``((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))``.
"""
import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import layoutc as lc
from layoutc import Layout as L
from layoutc.hopper import byte_address, gmma_atom, gmma_smem_layout
from layoutc.hopper.banks import (
    ACCESS_SIZES, BankReport, bank_conflicts, bank_conflicts_addresses, lanes_per_phase, ldmatrix_access,
    _table_through, max_vector_bytes, stmatrix_access, thread_addresses,
)
from layoutc.hopper.fragments import accumulator_tv
from layoutc.strategies import composable_pairs, layout_values

SW128_BF16 = gmma_atom("K", "SW128", "bf16")          # Sw<3,4,3> o 0 o (8,64):(64,1)
NAIVE_BF16 = L((8, 64), (64, 1))
TILE_64x64 = gmma_smem_layout("K", "SW128", "bf16", (64, 64))
LDM_8x64 = L(((8, 4), 8), ((1, 64), 8))               # lane t: row t%8, chunk t//8 (8 bf16 per chunk)
LDM_64x64 = L(((8, 4), 8), ((1, 512), 64))
ROW_MAJOR_F32 = L((32, 32), (32, 1))
PADDED_F32 = L((32, 32), (33, 1))

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def numbers(r: BankReport):
    return r.access_bytes, len(r.per_access), r.ways, r.wavefronts, r.ideal_wavefronts, r.replays


# -- pinned numbers ----------------------------------------------------------------------------------------------

def test_docstring_examples():
    import doctest

    import layoutc.hopper.banks as banks
    assert doctest.testmod(banks).failed == 0


def test_tv_helpers_are_the_documented_layouts():
    assert ldmatrix_access((8, 64), "bf16") == LDM_8x64
    assert stmatrix_access((64, 64), "bf16") == LDM_64x64
    assert str(ldmatrix_access((64, 64), "bf16", (2, 2))) == "((8,2,2),8):((1,8,512),64)"


def test_sw128_atom_ldmatrix_row_access_is_conflict_free():
    r = bank_conflicts(LDM_8x64, SW128_BF16, "bf16")
    # one 16-byte access; 4 quarter-warp phases, each 8 lanes over 8 distinct bank groups: 1 wavefront each
    assert numbers(r) == (16, 1, 1, 4, 4, 0)
    assert r.lanes_per_phase == 8 and r.per_access[0].phase_ways == (1, 1, 1, 1)
    assert r.conflict_free


def test_naive_row_major_tile_is_8_way():
    r = bank_conflicts(LDM_8x64, NAIVE_BF16, "bf16")
    # rows are 128 bytes apart: the 8 rows of a phase all hit banks 4c..4c+3
    assert numbers(r) == (16, 1, 8, 32, 4, 28)
    a = r.per_access[0]
    assert a.phase_ways == (8, 8, 8, 8)
    assert (a.worst_phase, a.worst_bank, a.worst_words) == (0, 0, (0, 32, 64, 96, 128, 160, 192, 224))
    assert "8-way" in str(r) and "28 replays" in str(r)


def test_sw128_64x64_tiling_is_conflict_free_and_naive_is_8_way():
    assert numbers(bank_conflicts(LDM_64x64, TILE_64x64, "bf16")) == (16, 1, 1, 4, 4, 0)
    a_frag = ldmatrix_access((64, 64), "bf16", (2, 2))
    assert numbers(bank_conflicts(a_frag, TILE_64x64, "bf16")) == (16, 1, 1, 4, 4, 0)
    assert numbers(bank_conflicts(a_frag, L((64, 64), (64, 1)), "bf16")) == (16, 1, 8, 32, 4, 28)


def test_every_row_group_and_chunk_of_the_64x64_tiling_is_conflict_free():
    # 8 lanes read chunk c of rows 8g..8g+7: the swizzle XORs the chunk with the row, so 8 distinct bank groups.
    for g, c in itertools.product(range(8), range(8)):
        lanes = [byte_address(TILE_64x64, "bf16", (8 * g + r, 8 * c)) for r in range(8)]
        assert bank_conflicts_addresses([lanes], 16).ways == 1, (g, c)
        naive = [byte_address(L((64, 64), (64, 1)), "bf16", (8 * g + r, 8 * c)) for r in range(8)]
        assert bank_conflicts_addresses([naive], 16).ways == 8


def test_f32_column_of_row_major_32x32_is_32_way_and_padding_fixes_it():
    column = L(32, 1)  # lane t reads coordinate (t, 0)
    assert numbers(bank_conflicts(column, ROW_MAJOR_F32, "f32", access_bytes=4)) == (4, 1, 32, 32, 1, 31)
    assert numbers(bank_conflicts(column, PADDED_F32, "f32", access_bytes=4)) == (4, 1, 1, 1, 1, 0)
    # the default access width is the widest vector: one f32 here (a single value per lane)
    assert numbers(bank_conflicts(column, ROW_MAJOR_F32, "f32")) == (4, 1, 32, 32, 1, 31)
    # the same with raw addresses: row t starts at 128·t (unpadded) or 132·t (padded)
    assert bank_conflicts_addresses([[128 * t for t in range(32)]], 4).ways == 32
    assert bank_conflicts_addresses([[132 * t for t in range(32)]], 4).ways == 1


def test_all_columns_in_turn():
    rows = L((32, 32), (1, 32))  # lane t owns row t; value v is column v
    assert numbers(bank_conflicts(rows, ROW_MAJOR_F32, "f32", access_bytes=4)) == (4, 32, 32, 1024, 32, 992)
    assert numbers(bank_conflicts(rows, PADDED_F32, "f32", access_bytes=4)) == (4, 32, 1, 32, 32, 0)
    # unforced, a lane's row is contiguous: 16-byte vectors, quarter-warps of 8 rows in the same 4 banks
    assert numbers(bank_conflicts(rows, ROW_MAJOR_F32, "f32")) == (16, 8, 8, 256, 32, 224)
    # padded rows start at 132·t bytes: not 8- or 16-byte aligned, so only 4-byte accesses are possible
    assert max_vector_bytes(rows, PADDED_F32, "f32") == 4
    assert numbers(bank_conflicts(rows, PADDED_F32, "f32")) == (4, 32, 1, 32, 32, 0)


def test_wgmma_accumulator_epilogue_store():
    acc = accumulator_tv(64)
    # bf16 pairs (4 bytes): rows l//4 of a warp all start at chunk 0; SW128 sends row r's chunk 0 to chunk r
    swz = bank_conflicts(acc, TILE_64x64, "bf16")
    assert numbers(swz) == (4, 16, 1, 16, 16, 0)
    assert numbers(bank_conflicts(acc, L((64, 64), (64, 1)), "bf16")) == (4, 16, 8, 128, 16, 112)
    for warp in range(4):
        assert bank_conflicts(acc, TILE_64x64, "bf16", warp=warp).ways == 1
    # f32 pairs (8 bytes, half-warps of rows 0-3): row-major 4-way; SW128 2-way (rows r and r^1 share chunks 0-1)
    assert numbers(bank_conflicts(acc, L((64, 64), (64, 1)), "f32")) == (8, 16, 4, 128, 32, 96)
    sw128_f32 = gmma_smem_layout("K", "SW128", "f32", (64, 64))
    assert numbers(bank_conflicts(acc, sw128_f32, "f32")) == (8, 16, 2, 64, 32, 32)


def test_phase_model_widths():
    assert [lanes_per_phase(b) for b in ACCESS_SIZES] == [32, 32, 32, 16, 8]
    # contiguous lanes: one wavefront per 128 bytes
    for b in ACCESS_SIZES:
        r = bank_conflicts_addresses([[b * lane for lane in range(32)]], b)
        assert (r.ways, r.wavefronts, r.ideal_wavefronts) == (1, max(1, 32 * b // 128), max(1, 32 * b // 128))
    # 8-byte lanes 256 bytes apart: each half-warp puts 16 distinct words into banks 0 and 1
    r = bank_conflicts_addresses([[256 * lane for lane in range(32)]], 8)
    assert (r.ways, r.wavefronts, r.per_access[0].phase_ways) == (16, 32, (16, 16))
    # lanes of different phases never conflict: lane l and l+8 on the same word at 16 B
    r = bank_conflicts_addresses([[16 * (lane % 8) + 4096 * (lane // 8) for lane in range(32)]], 16)
    assert (r.ways, r.wavefronts) == (1, 4)


def test_broadcast_and_inactive_lanes():
    r = bank_conflicts_addresses([[64] * 32], 4)
    assert (r.ways, r.wavefronts, r.replays) == (1, 1, 0)
    # two lanes per word (2-byte accesses) are a broadcast, not a conflict
    assert bank_conflicts_addresses([[2 * lane for lane in range(32)]], 2).ways == 1
    r = bank_conflicts_addresses([[0, None, 128, None]], 4)
    assert (r.ways, r.wavefronts) == (2, 2)
    r = bank_conflicts_addresses([[None] * 32], 16)
    assert (r.ways, r.wavefronts, r.ideal_wavefronts) == (0, 0, 0)
    assert bank_conflicts_addresses([], 4).ways == 0


def test_errors():
    with pytest.raises(lc.LayoutError, match="misaligned"):
        bank_conflicts_addresses([[8]], 16)
    with pytest.raises(lc.LayoutError, match="access_bytes"):
        bank_conflicts_addresses([[0]], 3)
    with pytest.raises(lc.LayoutError, match="33 lanes"):
        bank_conflicts_addresses([[0] * 33], 4)
    with pytest.raises(lc.LayoutError, match=r"not aligned to a 16-byte access \(try access_bytes=4\)"):
        bank_conflicts(L((32, 32), (1, 32)), PADDED_F32, "f32", access_bytes=16)
    with pytest.raises(lc.LayoutError, match="not contiguous"):
        bank_conflicts(L((8, 4), (4, 1)), ROW_MAJOR_F32, "f32", access_bytes=16)  # values walk down a column
    with pytest.raises(lc.LayoutError, match="warp 1"):
        bank_conflicts(LDM_8x64, SW128_BF16, "bf16", warp=1)
    with pytest.raises(lc.LayoutError, match="does not hold whole"):
        bank_conflicts(L(32, 1), ROW_MAJOR_F32, "f64", access_bytes=4)
    with pytest.raises(lc.LayoutError):
        ldmatrix_access((8, 16), "bf16")  # 4 chunks of 8 do not fit 16 columns
    with pytest.raises(lc.LayoutError):
        accumulator_tv(12)


def test_base_address_moves_the_pattern_but_not_the_conflicts():
    # The swizzle sees absolute addresses: a base that is not a multiple of 1024 changes where chunks land (the
    # data no longer matches what TMA/wgmma expect), but this access stays 1-way for any 16-byte-aligned base:
    # chunk c of rows k..k+7 still lands in 8 distinct 16-byte bank groups.
    plain = thread_addresses(LDM_8x64, SW128_BF16, "bf16")
    for base in (1024, 384, 64, 16 * 77):
        moved = thread_addresses(LDM_8x64, SW128_BF16, "bf16", base=base)
        assert (moved == [[a + base for a in lane] for lane in plain]) == (base % 1024 == 0)
        assert bank_conflicts(LDM_8x64, SW128_BF16, "bf16", base=base).ways == 1
    # an 8-byte-aligned base misaligns the 16-byte vectors: the widest access drops to 8 bytes
    assert max_vector_bytes(LDM_8x64, SW128_BF16, "bf16", base=8) == 8


# -- properties --------------------------------------------------------------------------------------------------

DTYPES_16B = ["f64", "f32", "bf16", "f16", "e4m3", "s8", "s4"]


def _intended_access_addresses(layout, t, mn_major, rows0, chunks, rows_total):
    """8 lanes per phase read the same logical 16-byte chunk of 8 consecutive 'rows' (K-major: rows are MN, chunks
    along K; MN-major: rows are K, chunks along MN). ``chunks`` gives each phase's chunk."""
    bits = {"f64": 64, "f32": 32, "bf16": 16, "f16": 16, "e4m3": 8, "s8": 8, "s4": 4}[t]
    per_chunk = 128 // bits
    lanes = []
    for lane in range(32):
        row, chunk = rows0 + lane % 8, chunks[lane // 8]
        coord = (chunk * per_chunk, row) if mn_major else (row, chunk * per_chunk)
        lanes.append(byte_address(layout, t, coord))
    return lanes


@SETTINGS
@given(
    b=st.integers(0, 3), t=st.sampled_from(DTYPES_16B), mn_major=st.booleans(),
    reps=st.tuples(st.integers(1, 3), st.integers(1, 3)), data=st.data(),
)
def test_gmma_atoms_are_conflict_free_for_their_16_byte_row_access(b, t, mn_major, reps, data):
    """Any Sw<B,4,3> GMMA atom, tiled, read by its intended access (8 lanes of a phase = one logical 16-byte chunk
    of 8 consecutive 8-aligned rows) is 1-way."""
    mode = ["INTER", "SW32", "SW64", "SW128"][b]
    atom_shape = gmma_atom("MN" if mn_major else "K", mode, t).shape
    shape = (atom_shape[0] * reps[0], atom_shape[1] * reps[1])
    tile = gmma_smem_layout("MN" if mn_major else "K", mode, t, shape)
    rows_total = shape[1] if mn_major else shape[0]
    n_chunks = (shape[0] if mn_major else shape[1]) * {"f64": 64, "f32": 32, "bf16": 16, "f16": 16, "e4m3": 8,
                                                       "s8": 8, "s4": 4}[t] // 128
    group = data.draw(st.integers(0, rows_total // 8 - 1))
    chunks = data.draw(st.lists(st.integers(0, n_chunks - 1), min_size=4, max_size=4))
    lanes = _intended_access_addresses(tile, t, mn_major, 8 * group, chunks, rows_total)
    r = bank_conflicts_addresses([lanes], 16)
    assert (r.ways, r.wavefronts, r.replays) == (1, 4, 0)


@SETTINGS
@given(b=st.integers(0, 3), t=st.sampled_from(["f32", "bf16", "e4m3", "s4"]), k_base=st.integers(0, 7))
def test_ldmatrix_tv_over_k_major_atom_is_conflict_free(b, t, k_base):
    """The same through bank_conflicts with the TV helper, at any 128-byte-aligned base."""
    mode = ["INTER", "SW32", "SW64", "SW128"][b]
    bits = {"f32": 32, "bf16": 16, "e4m3": 8, "s4": 4}[t]
    per_chunk = 128 // bits
    # enough columns for 4 chunks: tile the atom along K
    width = (16 << b) * 8 // bits
    k = max(width, 4 * per_chunk)
    tile = gmma_smem_layout("K", mode, t, (8, k))
    tv = ldmatrix_access((8, k), t)
    r = bank_conflicts(tv, tile, t, base=128 * k_base)
    assert (r.access_bytes, r.ways, r.wavefronts) == (16, 1, 4)


@st.composite
def address_lists(draw):
    access = draw(st.sampled_from(ACCESS_SIZES))
    n_access = draw(st.integers(1, 3))
    lanes = st.one_of(st.none(), st.integers(0, 511).map(lambda w: w * access))
    return access, [draw(st.lists(lanes, min_size=32, max_size=32)) for _ in range(n_access)]


@SETTINGS
@given(address_lists(), st.data())
def test_permuting_lanes_within_a_phase_changes_nothing(case, data):
    access, accesses = case
    per = lanes_per_phase(access)
    permuted = []
    for lanes in accesses:
        out = []
        for p in range(0, 32, per):
            out += data.draw(st.permutations(lanes[p:p + per]))
        permuted.append(out)
    a, b = bank_conflicts_addresses(accesses, access), bank_conflicts_addresses(permuted, access)
    assert (a.ways, a.wavefronts, a.ideal_wavefronts) == (b.ways, b.wavefronts, b.ideal_wavefronts)
    assert [x.phase_ways for x in a.per_access] == [x.phase_ways for x in b.per_access]


@SETTINGS
@given(address_lists())
def test_report_bounds(case):
    access, accesses = case
    r = bank_conflicts_addresses(accesses, access)
    assert 0 <= r.ideal_wavefronts <= r.wavefronts <= r.ideal_wavefronts * max(r.ways, 1)
    assert r.ways <= lanes_per_phase(access)  # a lane's words lie in distinct banks
    assert r.wavefronts == sum(sum(a.phase_ways) for a in r.per_access)
    assert (r.ways == 0) == all(x is None for lanes in accesses for x in lanes)


@SETTINGS
@given(
    smem=st.sampled_from([SW128_BF16, NAIVE_BF16, TILE_64x64, gmma_smem_layout("MN", "SW64", "bf16", (64, 32))]),
    tv=st.sampled_from([LDM_8x64, L((32, 4), (4, 1)), L((4, 8), (8, 1)), L(((4, 8), 2), ((2, 64), 1)), L(32, 3)]),
    base=st.sampled_from([0, 128, 1024, 2048 + 256]),
)
def test_addresses_through_composition_equal_pointwise(smem, tv, base):
    """smem ∘ tv (layoutc composition, swizzle kept outside) gives the same byte addresses as evaluating
    byte_address(smem, tv(t, v)) point by point."""
    got = thread_addresses(tv, smem, "bf16", base=base)
    threads = min(32, lc.size(tv[0]) if tv.rank == 2 else lc.size(tv))
    values = lc.size(tv[1]) if tv.rank == 2 else 1
    want = [[byte_address(smem, "bf16", tv((t, v)) if tv.rank == 2 else tv(t), base) for v in range(values)]
            for t in range(threads)]
    assert got == want


@given(composable_pairs())
def test_the_tables_through_a_tv_layout_are_its_pointwise_values(pair):
    """``_table_through(outer, tv, n)`` (the fast path of the analysis) is ``outer(tv(i))`` for every i, including
    where ``tv`` reaches past ``outer``'s size (the last mode keeps walking, as ``Layout.__call__``)."""
    outer, tv = pair
    table = _table_through(outer, tv, lc.size(tv))
    if table is None:      # a negative index: the analysis evaluates pointwise
        assert min(layout_values(tv)) < 0
        return
    assert table == [outer(tv(i)) for i in range(lc.size(tv))]


@SETTINGS
@given(composable_pairs(), st.integers(0, 3), st.integers(0, 4), st.integers(0, 3), st.integers(0, 40))
def test_a_swizzled_thread_map_is_tabled_as_its_pointwise_values(pair, bits, base, shift, offset):
    """A swizzled TV layout ``Sw<B,M,S> o off o tv`` (an XOR thread map) takes the table path too: entry i is
    ``outer(Sw(off + tv(i)))``, the pointwise value (past ``outer``'s size its last mode keeps walking)."""
    outer, tv = pair
    assume(min(layout_values(tv)) >= 0)
    swizzled = lc.ComposedLayout(lc.Swizzle(bits, base, shift + bits if bits else shift), offset, tv)
    count = lc.size(tv)
    table = _table_through(outer, swizzled, count)
    assert table is not None
    assert table == [outer(swizzled(i)) for i in range(count)]
