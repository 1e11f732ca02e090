"""wgmma smem descriptors: encoding, derivation from CuTe GMMA layouts, stepping, verdicts, and a simulator check that
the descriptor-addressed core matrices are exactly the bytes the layout names."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import layoutc as lc
from layoutc import ComposedLayout, Layout, LayoutError, Swizzle
from layoutc.hopper import byte_address, gmma_atom, gmma_smem_layout
from layoutc.hopper.descriptor import (
    DescriptorError, DescriptorIterator, WgmmaDescriptor, core_matrix_addresses, descriptor_verdict,
    make_descriptor, wgmma_k, wgmma_tiles,
)
from layoutc.hopper.gmma import SwizzleMode

SW128 = Swizzle(3, 4, 3)
BITS = {"bf16": 16, "f16": 16, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "tf32": 32}
WIDTH = {"INTER": 16, "SW32": 32, "SW64": 64, "SW128": 128}


# ---------------------------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------------------------

def test_encode_k_major_sw128_bf16_at_0x400():
    d = make_descriptor(gmma_smem_layout("K", "SW128", "bf16", (128, 64)), "bf16", "K", 0x400)
    assert (d.start_address, d.lbo, d.sbo, d.base_offset, d.swizzle) == (0x400, 16, 1024, 0, SwizzleMode.SW128)
    v = d.encode()
    assert v & 0x3FFF == 0x40                      # start >> 4
    assert (v >> 16) & 0x3FFF == 1                 # LBO: we emit 16 B (field 1) for swizzled K-major, as CUTLASS
    assert (v >> 32) & 0x3FFF == 64                # SBO 1024 B
    assert (v >> 49) & 7 == 0
    assert v >> 62 == 1                            # 128B
    assert v == 0x4000004000010040
    assert int(d) == v
    assert "0x4000004000010040" in str(d) and "SW128" in str(d) and "SBO=1024 B" in str(d)


@pytest.mark.parametrize("value, fields", [
    (0x4000004000010040, (0x400, 16, 1024, 0, SwizzleMode.SW128)),
    (0x0000000800400000, (0x0, 1024, 128, 0, SwizzleMode.INTER)),     # K-major INTER bf16 (64,64)
    (0x8000008000200080, (0x800, 512, 2048, 0, SwizzleMode.SW64)),    # MN-major SW64 bf16 (128,64) at 0x800
    (0xC000001000010010, (0x100, 16, 256, 0, SwizzleMode.SW32)),      # K-major SW32 at 0x100
    (0x400A004000013FFF, (0x3FFF0, 16, 1024, 5, SwizzleMode.SW128)),  # base_offset 5, top of the 18-bit window
    (0xFFFFFFFFFFFFFFFF & ~((3 << 14) | (3 << 30) | (7 << 46) | (1023 << 52)),
     (0x3FFF0, 0x3FFF0, 0x3FFF0, 7, SwizzleMode.SW32)),
])
def test_decode_known_constants(value, fields):
    d = WgmmaDescriptor.decode(value)
    assert (d.start_address, d.lbo, d.sbo, d.base_offset, d.swizzle) == fields
    assert d.encode() == value
    assert WgmmaDescriptor(*fields).encode() == value


def test_layout_type_order():
    # the trap: 128B is 1 and 32B is 3
    assert [WgmmaDescriptor(0, 0, 0, 0, m).layout_type for m in ("INTER", "SW128", "SW64", "SW32")] == [0, 1, 2, 3]


def test_start_address_is_masked_to_18_bits():
    # a cluster-mapped address (rank 1: 0x01000400) must not leak into the LBO field
    d = WgmmaDescriptor(0x01000400, 16, 1024, 0, "SW128")
    assert d.encode() == 0x4000004000010040


@pytest.mark.parametrize("args, match", [
    ((0x408, 16, 1024), "start_address = 0x408 is not 16-byte aligned"),
    ((0x400, 8, 1024), "LBO = 0x8 is not 16-byte aligned"),
    ((0x400, 16, 1 << 18), "SBO = 262144 B does not fit the 14-bit field"),
    ((0x400, -16, 1024), "LBO = -16 is negative"),
    ((0x400, 16, 1024, 8), "base_offset 8 is not in 0..7"),
])
def test_encoding_checks(args, match):
    with pytest.raises(DescriptorError, match=match):
        WgmmaDescriptor(*args)


def test_decode_rejects_reserved_bits_and_range():
    with pytest.raises(DescriptorError, match=r"reserved bits \[14\]"):
        WgmmaDescriptor.decode(1 << 14)
    with pytest.raises(DescriptorError, match=r"reserved bits \[47\]"):
        WgmmaDescriptor.decode(1 << 47)
    with pytest.raises(DescriptorError):
        WgmmaDescriptor.decode(1 << 64)
    assert issubclass(DescriptorError, LayoutError)


_addr = st.integers(0, (1 << 14) - 1).map(lambda x: x << 4)


@given(_addr, _addr, _addr, st.integers(0, 7), st.sampled_from(list(SwizzleMode)))
def test_decode_encode_roundtrip(start, lbo, sbo, bo, mode):
    d = WgmmaDescriptor(start, lbo, sbo, bo, mode)
    v = d.encode()
    assert 0 <= v < 1 << 64
    assert WgmmaDescriptor.decode(v) == d


# ---------------------------------------------------------------------------------------------------------------
# Every atom tiled to stage shapes: LBO/SBO by hand from the reference's §2.3
# ---------------------------------------------------------------------------------------------------------------
# tile_to_shape stacks atoms along MN first (LayoutLeft), an atom being 8 rows of the swizzle width w bytes (8w B).
# K-major swizzled: SBO = next 8-row group = next atom = 8w (256/512/1024); LBO = 16 (emitted, ignored by wgmma).
# K-major INTER:   SBO = next core matrix in MN = 128 B; LBO = next core matrix in K = (MN/8)*128 = 16*MN bytes.
# MN-major swizzled (16-bit): LBO = next w-byte MN chunk = next atom = 8w; SBO = next 8 K-rows = MN*2 bytes * 8 = 16*MN;
#   when the tile is at most one w-byte row wide LBO is unused and emitted as 0, as CUTLASS does.
# MN-major INTER (16-bit): SBO = next 16-B MN chunk = 128 B; LBO = next 8 K-rows = (MN/8)*128 = 16*MN.
# An unused SBO (one 8-row group / one MN chunk) is 0, as in CUTLASS.  The default MN tile is CuTe's 64-row warpgroup
# atom (the whole extent below 64 rows); MN below is the layout's extent.  Exhaustive CUTLASS words:
# tests/layoutc/test_descriptor_cute.py.
S1, S2, S3 = (64, 64), (128, 64, 3), (256, 128)
TABLE = []
for _t in ("bf16", "e4m3", "tf32"):
    for _s in (S1, S2, S3):
        TABLE.append(("K", "INTER", _t, _s, 16 * _s[0], 128, 0))
        TABLE.append(("K", "SW32", _t, _s, 16, 256, 3))
        TABLE.append(("K", "SW64", _t, _s, 16, 512, 2))
for _t in ("bf16", "tf32"):
    for _s in (S1, S2, S3):
        TABLE.append(("K", "SW128", _t, _s, 16, 1024, 1))
for _s in ((64, 128), (128, 256, 2), S3):  # the 8-bit SW128 K atom is 128 wide in K
    TABLE.append(("K", "SW128", "e4m3", _s, 16, 1024, 1))
TABLE += [
    ("K", "SW128", "s8", (64, 128), 16, 1024, 1),
    ("K", "INTER", "u8", (64, 32), 1024, 128, 0),
    ("K", "SW32", "e5m2", (8, 32), 16, 0, 3),             # N = 8: SBO unused, 0 as CUTLASS
    ("K", "INTER", "bf16", (8, 16), 128, 0, 0),            # N = 8: SBO unused, 0 as CUTLASS
]
for _t in ("bf16", "f16"):
    for _s in (S1, S2, S3):
        TABLE.append(("MN", "INTER", _t, _s, 16 * _s[0], 128, 0))
        TABLE.append(("MN", "SW32", _t, _s, 256, 16 * _s[0], 3))
        TABLE.append(("MN", "SW64", _t, _s, 512, 16 * _s[0], 2))
        TABLE.append(("MN", "SW128", _t, _s, 0, 16 * _s[0], 1))     # the 64-row tile is one 128-B row
TABLE += [
    ("MN", "INTER", "bf16", (8, 16), 128, 0, 0),           # one MN chunk: SBO unused → 0
    ("MN", "SW32", "bf16", (16, 32), 0, 256, 3),           # one 32-B row: LBO unused → 0
]


@pytest.mark.parametrize("major, sw, t, shape, lbo, sbo, ltype", TABLE,
                         ids=[f"{r[0]}-{r[1]}-{r[2]}-{'x'.join(map(str, r[3]))}" for r in TABLE])
def test_atom_tilings_table(major, sw, t, shape, lbo, sbo, ltype):
    layout = gmma_smem_layout(major, sw, t, shape)
    base = 0x2000
    d = make_descriptor(layout, t, major, base)
    assert (d.start_address, d.lbo, d.sbo, d.base_offset, d.layout_type) == (base, lbo, sbo, 0, ltype)
    assert d.swizzle is SwizzleMode.of(sw)
    # the descriptor addresses exactly the layout's bytes on the first tile and on the last step of the buffer
    it = DescriptorIterator(layout, t, major, base)
    assert it.uniform and it.descriptor() == d
    for (k, m, s) in ((0, 0, 0), (it.k_steps - 1, it.mn_blocks - 1, it.stages - 1)):
        _check_step(layout, t, major, base, it, k, m, s)


def test_table_covers_all_eight_atoms_and_three_widths():
    kinds = {(r[0], r[1]) for r in TABLE}
    assert len(kinds) == 8
    assert {BITS[r[2]] for r in TABLE if r[0] == "K"} == {8, 16, 32}


# ---------------------------------------------------------------------------------------------------------------
# Stepping
# ---------------------------------------------------------------------------------------------------------------

def _coord(layout, it, k, m, s, i, j):
    c = (m * it.mn + i, k * it.k + j)
    return c + (s,) if layout.rank > 2 else c


def _check_step(layout, t, major, base, it, k, m, s):
    d = it.descriptor(k, m, s)
    sim = core_matrix_addresses(d, t, major, it.mn)
    for i in range(it.mn):
        for j in range(it.k):
            assert sim[i][j] == byte_address(layout, t, _coord(layout, it, k, m, s, i, j), base), (k, m, s, i, j)


def test_k_steps_inside_and_across_sw128_atoms():
    # (128,128) bf16 K-major SW128: 4 k16 steps inside an atom row (+32 B each), then the next K atom, which
    # tile_to_shape put after the 16 MN atoms: +16 * 1024 B.
    layout = gmma_smem_layout("K", "SW128", "bf16", (128, 128))
    it = DescriptorIterator(layout, "bf16", "K", 0x400, mn=64)
    assert it.shape == (1, 2, 8)
    starts = [d.start_address for d in it.k_descriptors()]
    assert starts == [0x400 + 32 * j for j in range(4)] + [0x400 + 16384 + 32 * j for j in range(4)]
    assert [s.delta for s in it][:8] == [0, 2, 4, 6, 1024, 1026, 1028, 1030]
    # m64 block 1 of A: 8 atoms further
    assert it.descriptor(mn_block=1).start_address == 0x400 + 8 * 1024
    for step in it:
        assert step.value == it.first.encode() + step.delta  # uniform: advancing the start field is enough
        assert step.value == step.descriptor.encode()


def test_stages_and_n_blocks():
    layout = gmma_smem_layout("K", "SW128", "bf16", (256, 64, 3))   # a B buffer, N = 256 split into two 128s
    it = DescriptorIterator(layout, "bf16", "K", 0x400, mn=128)
    assert it.shape == (3, 2, 4) and len(it) == 24
    assert it.descriptor(mn_block=1).start_address == 0x400 + 16 * 1024
    assert it.descriptor(stage=2).start_address == 0x400 + 2 * 256 * 64 * 2
    assert it.descriptor(k=3, mn_block=1, stage=1).start_address == 0x400 + 32768 + 16384 + 96
    with pytest.raises(IndexError):
        it.descriptor(stage=3)


def test_mn_major_k_steps():
    # MN-major SW128 bf16 (128,64): a k16 step is two 8-row K groups, i.e. 2 atom rows of K further = 2 * 2048 B
    layout = gmma_smem_layout("MN", "SW128", "bf16", (128, 64))
    it = DescriptorIterator(layout, "bf16", "MN")
    assert [d.start_address for d in it.k_descriptors()] == [0, 4096, 8192, 12288]
    for k in range(4):
        _check_step(layout, "bf16", "MN", 0, it, k, 0, 0)


def test_make_descriptor_takes_the_first_tile():
    layout = gmma_smem_layout("K", "SW64", "bf16", (128, 64, 3))
    assert make_descriptor(layout, "bf16", "K", 0x800, mn=64) == DescriptorIterator(
        layout, "bf16", "K", 0x800, mn=64).descriptor(0, 0, 0)
    v = descriptor_verdict(layout, "bf16", "K", 0x800)
    assert v.ok and v.reasons == [] and v.tile
    tiles = wgmma_tiles(layout, "bf16", "K", mn=64)
    assert isinstance(tiles, ComposedLayout) and tiles.outer == Swizzle(2, 4, 3)
    assert lc.product_each(tiles.inner.shape) == (64 * 16, 2 * 4 * 3)
    assert tiles.inner[0].shape[0] == 64 and lc.size(tiles.inner[0][1]) == 16


def test_wgmma_k():
    assert [wgmma_k(t) for t in ("bf16", "f16", "e4m3", "s8", "tf32")] == [16, 16, 32, 32, 8]
    with pytest.raises(DescriptorError, match="use 'tf32'"):
        wgmma_k("f32")


def test_a_bare_atom_is_one_8_row_group():
    # the (8,64) SW128 atom itself: an N = 8 B tile; SBO is unused and emitted as 0, as CUTLASS does
    v = descriptor_verdict(gmma_atom("K", "SW128", "bf16"), "bf16", "K", 0x400)
    assert v.ok and (v.descriptor.lbo, v.descriptor.sbo) == (16, 0)
    assert any("SBO unused" in n for n in v.notes)
    v = descriptor_verdict(gmma_atom("MN", "SW64", "f16"), "f16", "MN")  # (32,8): K = 8 < 16
    assert v.reasons[0].startswith("K tile too narrow")


def test_plain_layout_is_interleave():
    # a plain Layout (no swizzle) that is the canonical INTER K-major form ((8,m),(8,2)):((8,64),(1,512)) for bf16
    layout = Layout(((8, 8), (8, 2)), ((8, 64), (1, 512)))
    d = make_descriptor(layout, "bf16", "K")
    assert (d.lbo, d.sbo, d.swizzle) == (1024, 128, SwizzleMode.INTER)
    _check_step(layout, "bf16", "K", 0, DescriptorIterator(layout, "bf16", "K"), 0, 0, 0)


# ---------------------------------------------------------------------------------------------------------------
# Hypothesis: descriptor addressing == layout addressing, every step
# ---------------------------------------------------------------------------------------------------------------

@st.composite
def _cases(draw):
    major = draw(st.sampled_from(["K", "MN"]))
    t = draw(st.sampled_from(["bf16", "f16"] if major == "MN" else ["bf16", "e4m3", "s8", "tf32"]))
    sw = draw(st.sampled_from(list(WIDTH)))
    bits, w = BITS[t], WIDTH[sw]
    k_e = 256 // bits
    row = w * 8 // bits  # elements of one swizzle row
    if major == "K":
        mn_unit, k_unit = 8, max(row, k_e)
    else:
        mn_unit, k_unit = row, max(8, k_e)
    mn_ext = mn_unit * draw(st.integers(1, max(1, 128 // mn_unit)))
    k_ext = k_unit * draw(st.integers(1, max(1, (64 * 16 // bits) // k_unit)))
    stages = draw(st.sampled_from([None, 1, 2, 3]))
    shape = (mn_ext, k_ext) if stages is None else (mn_ext, k_ext, stages)
    order = draw(st.sampled_from([lc.LayoutLeft, lc.LayoutRight]))
    layout = gmma_smem_layout(major, sw, t, shape, order)
    repeat = 8 * w if sw != "INTER" else 16
    base = repeat * draw(st.integers(0, 64))
    mns = [m for m in range(mn_unit, min(mn_ext, 256) + 1, mn_unit) if mn_ext % m == 0 and m % 8 == 0]
    default_ok = mn_ext < 64 or mn_ext % 64 == 0  # the default tile: 64 rows, or the whole extent below 64
    mn = draw(st.sampled_from(([None] if default_ok else []) + mns))
    return major, t, sw, shape, layout, base, mn


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_descriptor_addresses_equal_layout_addresses(case):
    major, t, sw, shape, layout, base, mn = case
    it = DescriptorIterator(layout, t, major, base, mn=mn)
    assert it.uniform
    for step in it:
        _check_step(layout, t, major, base, it, step.k, step.mn_block, step.stage)
        assert step.value == it.first.encode() + step.delta


@settings(max_examples=60, deadline=None)
@given(_cases(), st.integers(1, 63))
def test_unaligned_bases_are_refused_never_wrong(case, shift):
    major, t, sw, shape, layout, base, mn = case
    bad = base + 16 * shift
    v = descriptor_verdict(layout, t, major, bad, mn=mn)
    if sw == "INTER" or bad % (8 * WIDTH[sw]) == 0:
        assert v.ok
    else:
        assert not v.ok and v.reasons[0].startswith("misaligned base")


# ---------------------------------------------------------------------------------------------------------------
# Verdicts: the first reason names what is wrong
# ---------------------------------------------------------------------------------------------------------------
K128 = gmma_smem_layout("K", "SW128", "bf16", (64, 64))

BAD = [
    # row-major (64,64) bf16 without swizzle: 128-B rows, but INTER core matrices need 16-B rows
    ("row-major non-atom", Layout((64, 64), (64, 1)), "bf16", "K", 0,
     "8-row stride: rows 0..7 of the tile are 128 B apart, but INTER K-major needs consecutive rows 16 B apart"),
    # SW128 with padded 256-B rows
    ("wrong 8-row stride", ComposedLayout(SW128, 0, Layout((64, 64), (128, 1))), "bf16", "K", 0,
     "8-row stride: rows 0..7 of the tile are 256 B apart, but SW128 K-major needs consecutive rows 128 B apart"),
    ("Sw<3,3,3>", ComposedLayout(Swizzle(3, 3, 3), 0, K128.inner), "bf16", "K", 0,
     "swizzle Sw<3,3,3> is not a wgmma swizzle"),
    ("misaligned base 0x410", K128, "bf16", "K", 0x410,
     "misaligned base: 0x410 is not on the SW128 swizzle repeat (1024 B)"),
    ("base not 16 B", gmma_smem_layout("K", "INTER", "bf16", (64, 64)), "bf16", "K", 0x408,
     "misaligned base: 0x408 is not 16-byte aligned"),
    ("MN-major fp8", gmma_smem_layout("MN", "SW128", "e4m3", (128, 64)), "e4m3", "MN", 0,
     "MN-major operand with e4m3: only f16/bf16 support the transpose"),
    ("MN-major tf32", gmma_smem_layout("MN", "SW32", "tf32", (64, 64)), "tf32", "MN", 0,
     "MN-major operand with tf32"),
    ("K tile too narrow", gmma_smem_layout("K", "INTER", "bf16", (64, 8)), "bf16", "K", 0,
     "K tile too narrow: the layout has K = 8 bf16 (16 B) but one wgmma k-step reads K = 16 bf16 (32 B)"),
    ("dtype/K mismatch", gmma_smem_layout("K", "INTER", "bf16", (64, 24)), "bf16", "K", 0,
     "dtype/K mismatch: K extent 24 is not a multiple of the wgmma k-step of 16 bf16"),
    ("broadcast stride", ComposedLayout(SW128, 0, Layout(((8, 8), 64), ((64, 0), 1))), "bf16", "K", 0,
     "broadcast stride: the MN mode"),
    # 8-row groups at element offsets 0, 1024, 512, 1536: each group is a good atom, the tiling is not one stride
    ("not an atom tiling", ComposedLayout(SW128, 0, Layout(((8, 2, 2), 64), ((64, 1024, 512), 1))), "bf16", "K", 0,
     "stride wgmma cannot express: the 8-row groups of the tile are not evenly spaced"),
    ("MN-major layout as K", gmma_smem_layout("MN", "SW128", "bf16", (64, 64)), "bf16", "K", 0,
     "core-matrix shape: not K-major"),
    ("f32", gmma_smem_layout("K", "SW128", "tf32", (64, 32)), "f32", "K", 0,
     "dtype f32 is not a wgmma smem operand type (use 'tf32'"),
    ("tile starts at row 3", ComposedLayout(SW128, 3 * 64, K128.inner), "bf16", "K", 0,
     "misaligned tile: it starts in row 3 of a 1024-byte SW128 pattern"),
    ("aliasing", Layout(((8, 8), (8, 2)), ((8, 64), (1, 8))), "bf16", "K", 0,
     "maps two 16-byte core-matrix rows to the same smem bytes"),
    ("stride not 16 B", Layout(((8, 8), (8, 2)), ((12, 96), (1, 768))), "bf16", "K", 0,
     "stride wgmma cannot express: the MN stride 12 bf16 = 24 B is not a multiple of 16 B"),
    ("MN narrower than the swizzle row, chunks apart", ComposedLayout(SW128, 0, Layout(((8, 4), (8, 2)),
                                                                                    ((1, 16), (64, 512)))),
     "bf16", "MN", 0, "core-matrix shape: the 4 16-B MN chunks of the tile ((1,4):(1,2) in 16-B units) are not "
     "contiguous inside the 128-byte SW128 row"),
    ("MN tile not 8 rows", Layout((12, 16), (16, 1)), "bf16", "K", 0,
     "core-matrix shape: the MN tile 12 is not a positive multiple of 8 rows"),
    ("rank 1", Layout(64, 1), "bf16", "K", 0, "has rank 1"),
    ("not a smem layout", ComposedLayout(Layout(64, 1), 0, Layout(64, 1)), "bf16", "K", 0, "not a smem layout"),
]


@pytest.mark.parametrize("name, layout, t, major, base, first", BAD, ids=[b[0] for b in BAD])
def test_bad_layout_first_reason(name, layout, t, major, base, first):
    v = descriptor_verdict(layout, t, major, base)
    assert not v.ok and not v and v.descriptor is None
    assert v.reasons[0].startswith(first) or first in v.reasons[0], v.reasons[0]
    with pytest.raises(DescriptorError) as e:
        make_descriptor(layout, t, major, base)
    assert v.reasons[0] in str(e.value)


def test_mn_tile_option_reasons():
    assert descriptor_verdict(K128, "bf16", "K", mn=12).reasons[0].startswith("core-matrix shape: the MN tile 12")
    big = gmma_smem_layout("K", "SW128", "bf16", (512, 64))
    assert descriptor_verdict(big, "bf16", "K").ok                        # > 256 rows: the A tile of 64 is taken
    assert "larger than any wgmma operand" in descriptor_verdict(big, "bf16", "K", mn=512).reasons[0]


def test_uneven_m64_blocks_need_mn_64():
    # two m64 A blocks placed far apart (not one stride over 128 rows): a 128-row tile is refused, the default
    # 64-row tile (CuTe's warpgroup atom) accepts
    inner = Layout(((8, 8, 2), 64), ((64, 512, 16384), 1))
    layout = ComposedLayout(SW128, 0, inner)
    assert "not evenly spaced" in descriptor_verdict(layout, "bf16", "K", mn=128).reasons[0]
    it = DescriptorIterator(layout, "bf16", "K")
    assert it.descriptor(mn_block=1).start_address == 32768
    for m in range(2):
        _check_step(layout, "bf16", "K", 0, it, 0, m, 0)


def test_verdict_notes_and_str():
    v = descriptor_verdict(K128, "bf16", "K", 0x400)
    assert v.ok and any("LBO is ignored" in n for n in v.notes)
    assert str(v).startswith("ok: WgmmaDescriptor(start=0x400")
    bad = descriptor_verdict(K128, "bf16", "K", 0x410)
    assert str(bad).startswith("not a wgmma operand: misaligned base")


def test_iterator_refuses_a_bad_step():
    with pytest.raises(DescriptorError, match="misaligned base"):
        DescriptorIterator(K128, "bf16", "K", 0x410)


def test_simulator_checks():
    d = make_descriptor(K128, "bf16", "K", 0x400)
    a = core_matrix_addresses(d, "bf16", "K", 64)
    assert len(a) == 64 and len(a[0]) == 16
    assert a[1][0] == 0x490 and a[0][0] == 0x400
    assert core_matrix_addresses(d.encode(), "bf16", "K", 64) == a
    with pytest.raises(DescriptorError, match="base_offset"):
        core_matrix_addresses(WgmmaDescriptor(0x400, 16, 1024, 2, "SW128"), "bf16", "K", 64)
    with pytest.raises(DescriptorError, match="MN-major"):
        core_matrix_addresses(d, "e4m3", "MN", 64)
    with pytest.raises(DescriptorError, match="within one wgmma"):
        core_matrix_addresses(d, "bf16", "K", 64, 32)


# ---------------------------------------------------------------------------------------------------------------
# Hypothesis: on arbitrary layouts, an ok verdict is never a wrong descriptor
# ---------------------------------------------------------------------------------------------------------------
_FACTORS = {8: [(8,), (2, 4), (4, 2), (2, 2, 2)], 16: [(16,), (8, 2), (2, 8), (4, 4)],
            32: [(32,), (8, 4), (16, 2), (4, 8)], 64: [(64,), (8, 8), (8, 2, 4), (16, 4)]}
_STRIDES = [0, 1, 2, 4, 8, 16, 24, 32, 64, 128, 256, 512, 1024, 2048]


@st.composite
def _random_layouts(draw):
    major = draw(st.sampled_from(["K", "MN"]))
    t = draw(st.sampled_from(["bf16"] if major == "MN" else ["bf16", "e4m3", "tf32"]))
    k_e = 256 // BITS[t]
    mn = draw(st.sampled_from([8, 16, 32, 64]))
    if draw(st.integers(0, 3)):
        # a canonical tiling with one stride perturbed (or not)
        sw = draw(st.sampled_from([s for s in WIDTH if major == "K" or WIDTH[s] // 2 <= mn]))
        inner = gmma_smem_layout(major, sw, t, (max(mn, 8 if major == "K" else WIDTH[sw] // 2),
                                               max(k_e, WIDTH[sw] * 8 // BITS[t] if major == "K" else 16))).inner
        flat = lc.flatten(inner)
        strides = list(lc.stride(flat)) if isinstance(lc.stride(flat), tuple) else [lc.stride(flat)]
        how = draw(st.sampled_from(["keep", "replace", "double", "swap"]))
        i, j = draw(st.integers(0, len(strides) - 1)), draw(st.integers(0, len(strides) - 1))
        if how == "replace":
            strides[i] = draw(st.sampled_from(_STRIDES))
        elif how == "double":
            strides[i] *= 2
        elif how == "swap":  # e.g. K-first instead of MN-first atom order: often still canonical
            strides[i], strides[j] = strides[j], strides[i]
        inner = Layout(inner.shape, lc.int_tuple.unflatten(tuple(strides), inner.shape)
                       if isinstance(inner.shape, tuple) else strides[0])
        swz = SwizzleMode.of(sw).swizzle
    else:
        mshape = draw(st.sampled_from(_FACTORS[mn]))
        kshape = draw(st.sampled_from(_FACTORS[k_e] if k_e in _FACTORS else [(k_e,)]))
        ms = tuple(draw(st.sampled_from(_STRIDES)) for _ in mshape)
        ks = tuple(draw(st.sampled_from(_STRIDES)) for _ in kshape)
        inner = Layout((mshape, kshape), (ms, ks))
        swz = draw(st.sampled_from([SwizzleMode.of(s).swizzle for s in WIDTH]))
    layout = draw(st.sampled_from([inner, ComposedLayout(swz, 0, inner)]))
    base = 1024 * draw(st.integers(0, 8))
    return major, t, layout, base


@settings(max_examples=400, deadline=None)
@given(_random_layouts())
def test_ok_verdict_is_never_wrong(case):
    major, t, layout, base = case
    v = descriptor_verdict(layout, t, major, base)
    if not v.ok:
        assert v.reasons and v.descriptor is None
        return
    it = DescriptorIterator(layout, t, major, base)
    for step in it:
        _check_step(layout, t, major, base, it, step.k, step.mn_block, step.stage)
