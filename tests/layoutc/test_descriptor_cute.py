"""wgmma descriptors bit-exact with CUTLASS's ``make_gmma_desc``, CuTe's element-type names, CuTe's descriptor fragment
(``make_fragment_A(thr_mma.partition_A(sA))``) and the 64-row default tile.

Every expected word below is written out from CUTLASS's rules (include/cute/atom/mma_traits_sm90_gmma.hpp), not from
layoutc: ``make_gmma_desc`` recasts the tile to 16-byte units, divides it by its canonical block -- K-major
``((8,m),(2,1))``, MN-major ``((W,m),(8,2))`` -- and writes the strides of the rest modes; a rest mode of size 1 has
stride 0 (CuTe's complement is ``1:0`` there), the swizzled K-major LBO is the asserted stride 1, base_offset is 0.
On a ``gmma_smem_layout`` (atoms stacked along MN first, each 8 rows of the swizzle width Wb bytes):

- K-major INTER: LBO = next atom in K = (MN/8)·128 B, SBO = next atom in MN = 128 B;
- K-major SW32/64/128: LBO = 16 B (field 1), SBO = 8·Wb B;
- MN-major INTER (16-bit): SBO = next MN chunk = next atom = 128 B, LBO = next 8 K rows = (MN/8)·128 B;
- MN-major SW32/64/128 (16-bit, an atom R = Wb/2 elements wide): LBO = next MN row = next atom = 8·Wb B,
  SBO = next 8 K rows = (MN/R)·8·Wb B;
- and an unused field -- SBO of a tile of one 8-row group (K-major) or one 16-B chunk (MN-major INTER), LBO of a
  tile at most one swizzle row wide (MN-major swizzled) -- is 0.
The word is ``start>>4 | LBO>>4 << 16 | SBO>>4 << 32 | type << 62``, type 0 INTER, 1 SW128, 2 SW64, 3 SW32; base 0x400.
"""
import pytest

import layoutc as lc
from layoutc import ComposedLayout, Layout, LayoutError, Swizzle
from layoutc.cli import main
from layoutc.hopper import (
    DescriptorError, DescriptorIterator, a_fragment_tv, accumulator_tv, bank_conflicts, byte_address, byte_addresses,
    core_matrix_addresses, cute_names, descriptor_fragment, descriptor_verdict, dtype, gmma_atom, gmma_smem_layout,
    make_descriptor, make_tma_params, tma_data_type, wgmma_k, wgmma_tiles,
)
from layoutc.layout import _

BASE = 0x400
BITS = {"f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "tf32": 32}
WB = {"INTER": 16, "SW32": 32, "SW64": 64, "SW128": 128}
K_TYPES = tuple(BITS)            # every wgmma smem operand type reads K-major
MN_TYPES = ("f16", "bf16")       # only 16-bit types transpose

# (swizzle, MN extent, mn tile, word).  K extent: two atoms or two k-steps of 32 B, whichever is wider, so the K
# mode is a real multi-atom tiling; the words hold for every element width (all fields are in bytes).
K_MAJOR = [
    ("INTER", 64, 64, 0x0000000800400040),     # LBO 8·128 = 1024, SBO 128
    ("INTER", 128, 64, 0x0000000800800040),    # LBO 16·128 = 2048
    ("INTER", 256, 64, 0x0000000801000040),    # LBO 4096
    ("INTER", 8, 8, 0x0000000000080040),       # LBO 128, SBO unused -> 0
    ("INTER", 16, 16, 0x0000000800100040),     # LBO 256
    ("INTER", 24, 24, 0x0000000800180040),     # LBO 384 (N = 24: three 8-row groups)
    ("INTER", 128, 128, 0x0000000800800040),
    ("INTER", 256, 256, 0x0000000801000040),
    ("SW32", 64, 64, 0xc000001000010040),      # LBO 16, SBO 256
    ("SW32", 128, 64, 0xc000001000010040),
    ("SW32", 256, 64, 0xc000001000010040),
    ("SW32", 8, 8, 0xc000000000010040),        # SBO unused -> 0
    ("SW32", 16, 16, 0xc000001000010040),
    ("SW32", 24, 24, 0xc000001000010040),
    ("SW32", 128, 128, 0xc000001000010040),
    ("SW32", 256, 256, 0xc000001000010040),
    ("SW64", 64, 64, 0x8000002000010040),      # SBO 512
    ("SW64", 128, 64, 0x8000002000010040),
    ("SW64", 256, 64, 0x8000002000010040),
    ("SW64", 8, 8, 0x8000000000010040),
    ("SW64", 16, 16, 0x8000002000010040),
    ("SW64", 24, 24, 0x8000002000010040),
    ("SW64", 128, 128, 0x8000002000010040),
    ("SW64", 256, 256, 0x8000002000010040),
    ("SW128", 64, 64, 0x4000004000010040),     # SBO 1024
    ("SW128", 128, 64, 0x4000004000010040),
    ("SW128", 256, 64, 0x4000004000010040),
    ("SW128", 8, 8, 0x4000000000010040),
    ("SW128", 16, 16, 0x4000004000010040),
    ("SW128", 24, 24, 0x4000004000010040),
    ("SW128", 128, 128, 0x4000004000010040),
    ("SW128", 256, 256, 0x4000004000010040),
]
# MN-major, K extent 32 (two k16 steps).  mn below one swizzle row (8/16/32 of SW128) is a B of small N.
MN_MAJOR = [
    ("INTER", 64, 64, 0x0000000800400040),     # SBO 128, LBO 8·128 = 1024
    ("INTER", 128, 64, 0x0000000800800040),    # LBO 2048
    ("INTER", 256, 64, 0x0000000801000040),
    ("INTER", 128, 128, 0x0000000800800040),
    ("INTER", 256, 256, 0x0000000801000040),
    ("INTER", 64, 8, 0x0000000000400040),      # one MN chunk: SBO unused -> 0
    ("INTER", 64, 16, 0x0000000800400040),
    ("INTER", 64, 32, 0x0000000800400040),
    ("SW32", 64, 64, 0xc000004000100040),      # R = 16: LBO 256, SBO 4·256 = 1024
    ("SW32", 128, 64, 0xc000008000100040),     # SBO 2048
    ("SW32", 256, 64, 0xc000010000100040),     # SBO 4096
    ("SW32", 128, 128, 0xc000008000100040),
    ("SW32", 256, 256, 0xc000010000100040),
    ("SW32", 64, 8, 0xc000004000000040),       # narrower than a 32-B row: LBO 0
    ("SW32", 64, 16, 0xc000004000000040),      # exactly one row: LBO 0
    ("SW32", 64, 32, 0xc000004000100040),
    ("SW64", 64, 64, 0x8000004000200040),      # R = 32: LBO 512, SBO 2·512 = 1024
    ("SW64", 128, 64, 0x8000008000200040),
    ("SW64", 256, 64, 0x8000010000200040),
    ("SW64", 128, 128, 0x8000008000200040),
    ("SW64", 256, 256, 0x8000010000200040),
    ("SW64", 64, 8, 0x8000004000000040),
    ("SW64", 64, 16, 0x8000004000000040),
    ("SW64", 64, 32, 0x8000004000000040),      # exactly one 64-B row
    ("SW128", 64, 64, 0x4000004000000040),     # R = 64: the A tile is one 128-B row, LBO 0; SBO 1024
    ("SW128", 128, 64, 0x4000008000000040),    # SBO 2·1024
    ("SW128", 256, 64, 0x4000010000000040),    # SBO 4·1024
    ("SW128", 128, 128, 0x4000008000400040),   # two rows: LBO 1024
    ("SW128", 256, 256, 0x4000010000400040),
    ("SW128", 64, 8, 0x4000004000000040),
    ("SW128", 64, 16, 0x4000004000000040),
    ("SW128", 64, 32, 0x4000004000000040),
]
CASES = ([("K", sw, t, (mn_ext, 2 * max(WB[sw], 32) * 8 // BITS[t]), mn, word)
          for sw, mn_ext, mn, word in K_MAJOR for t in K_TYPES]
         + [("MN", sw, t, (mn_ext, 32), mn, word) for sw, mn_ext, mn, word in MN_MAJOR for t in MN_TYPES])


@pytest.mark.parametrize("major, sw, t, shape, mn, word", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}-mn{c[4]}" for c in CASES])
def test_every_field_is_cutlass(major, sw, t, shape, mn, word):
    layout = gmma_smem_layout(major, sw, t, shape)
    d = make_descriptor(layout, t, major, BASE, mn=mn)
    assert d.encode() == word, f"0x{d.encode():016x} != 0x{word:016x}"
    # the iterator's first step is the same word, and every step of the buffer differs only in the start field
    it = DescriptorIterator(layout, t, major, BASE, mn=mn)
    assert it.uniform and all(step.value >> 14 == word >> 14 for step in it)


def test_table_covers_all_atoms_widths_and_unused_fields():
    assert {(c[0], c[1]) for c in CASES} == {(m, s) for m in ("K", "MN") for s in WB}
    assert {BITS[c[2]] for c in CASES} == {8, 16, 32}
    unused_sbo = [c for c in CASES if (c[5] >> 32) & 0x3FFF == 0]
    unused_lbo = [c for c in CASES if (c[5] >> 16) & 0x3FFF == 0]
    assert {c[0] for c in unused_sbo} == {"K", "MN"} and {c[0] for c in unused_lbo} == {"MN"}


def test_unused_fields_are_named_in_the_notes():
    v = descriptor_verdict(gmma_smem_layout("MN", "SW128", "bf16", (128, 64)), "bf16", "MN", BASE)
    assert v.descriptor.lbo == 0
    assert "LBO unused (one 128-byte MN row); emitted 0, as CUTLASS does" in v.notes
    v = descriptor_verdict(gmma_atom("K", "SW64", "e4m3"), "e4m3", "K", BASE)
    assert v.descriptor.sbo == 0 and "SBO unused (one 8-row group); emitted 0, as CUTLASS does" in v.notes
    v = descriptor_verdict(gmma_smem_layout("MN", "SW128", "f16", (64, 16)), "f16", "MN", BASE, mn=16)
    assert ("LBO unused (the tile is narrower than one 128-byte MN row); emitted 0, as CUTLASS does" in v.notes)


# ---------------------------------------------------------------------------------------------------------------
# The default tile: CuTe's 64-row warpgroup atom
# ---------------------------------------------------------------------------------------------------------------

def test_default_mn_is_the_64_row_warpgroup_atom():
    layout = gmma_smem_layout("MN", "SW128", "bf16", (128, 64, 2))
    v = descriptor_verdict(layout, "bf16", "MN", BASE)
    assert v.tile == "(64,(8,2)):(1,(64,1024))"                      # 64 rows, one k16 step (two 8-row K groups)
    assert make_descriptor(layout, "bf16", "MN", BASE) == make_descriptor(layout, "bf16", "MN", BASE, mn=64)
    assert DescriptorIterator(layout, "bf16", "MN", BASE).shape == (2, 2, 4)   # 2 stages, 2 m64 blocks, 4 k-steps
    assert str(wgmma_tiles(layout, "bf16", "MN")).startswith("Sw<3,4,3> o 0 o ((64,(8,2)),(2,4,(1,2))):")
    # below 64 rows the layout is one B tile of N = its extent
    assert descriptor_verdict(gmma_atom("K", "SW128", "bf16"), "bf16", "K").tile == "(8,16):(64,1)"


def test_default_mn_that_does_not_divide_says_pass_mn():
    layout = gmma_smem_layout("K", "SW128", "bf16", (96, 64))
    assert descriptor_verdict(layout, "bf16", "K").reasons[0] == (
        "MN extent 96 of the layout is not a multiple of the MN tile 64 (the default tile is CuTe's 64-row warpgroup "
        "atom of A; for a B operand pass mn=N)")
    assert descriptor_verdict(layout, "bf16", "K", mn=96).ok


# ---------------------------------------------------------------------------------------------------------------
# MN-major tiles narrower than one swizzle row (CUTLASS accepts them)
# ---------------------------------------------------------------------------------------------------------------

def test_narrow_mn_major_tiles_step_inside_the_row():
    # sB (64, 32) bf16 MN-major SW128, N = 16: tiles at MN 0, 16, 32, 48 = 16-B chunks 0, 2, 4, 6 of the same row
    layout = gmma_smem_layout("MN", "SW128", "bf16", (64, 32))
    it = DescriptorIterator(layout, "bf16", "MN", BASE, mn=16)
    assert [it.descriptor(mn_block=m).start_address for m in range(4)] == [0x400, 0x420, 0x440, 0x460]
    for m in range(4):
        for k in range(2):
            d = it.descriptor(k=k, mn_block=m)
            assert (d.lbo, d.sbo) == (0, 1024)
            sim = core_matrix_addresses(d, "bf16", "MN", 16)
            assert all(sim[i][j] == byte_address(layout, "bf16", (16 * m + i, 16 * k + j), BASE)
                       for i in range(16) for j in range(16))


def test_narrow_tile_running_past_its_row_is_refused():
    # 32 MN elements (4 chunks) starting at chunk 6 of the 128-byte row: chunks 8 and 9 would be the next K row's
    inner = gmma_smem_layout("MN", "SW128", "bf16", (64, 16)).inner
    layout = ComposedLayout(Swizzle(3, 4, 3), 48, lc.composition(inner, Layout((32, 16), (1, 64))))
    assert descriptor_verdict(layout, "bf16", "MN", BASE).reasons[0] == (
        "misaligned tile: it starts at 16-B chunk 6 of a 128-byte swizzle row, so its core-matrix rows would run past "
        "the row")


# ---------------------------------------------------------------------------------------------------------------
# CuTe's descriptor fragment
# ---------------------------------------------------------------------------------------------------------------
# CuTe: thrfrg_A = logical_divide(sA, (64, K)) -> zipped_divide by the atom (64, K) -> compose ABLayout<64,K> ->
# split the warpgroups; partition_A slices one thread: (FrgV, MMA_M, MMA_K, PIPE...).  make_fragment_A recasts that to
# uint128_t (16-B units) and replaces mode 0 by 1:0; element c = make_gmma_desc(first tile) + layout(c) on the low word.

def test_fragment_a_k_major_sw128():
    sA = gmma_smem_layout("K", "SW128", "bf16", (128, 64, 4))
    frag = descriptor_fragment(sA, "bf16", "K", "A", base_address=BASE)
    # m64 block = 64 rows x 128 B = 512 units; k16 = 32 B = 2 units; stage = 128 x 64 x 2 B = 1024 units
    assert str(frag) == "GMMA::DescriptorIterator o (1,2,4,(1,4)):(0,512,2,(0,1024))"
    assert str(frag.partition) == "((64,16),2,4,(1,4)):((64,1),4096,16,(0,8192))"
    assert frag.shape == (1, 2, 4, (1, 4)) and frag.rank == 4 and len(frag) == 32
    assert frag.origin == 0x4000004000010040 and frag.descriptor.sbo == 1024
    assert frag(0, 1, 3, 2) == 0x4000004000010040 + 512 + 3 * 2 + 2 * 1024 == 0x4000004000010a46
    assert frag[(0, 0, 1, 0)] == 0x4000004000010042 and frag(5) == frag(0, 1, 2, 0)   # 1-D index, colexicographic
    assert frag.descriptor_at(0, 1, 0, 3).start_address == 0x400 + 8192 + 3 * 16384


def test_fragment_a_mn_major_sw128():
    sA = gmma_smem_layout("MN", "SW128", "bf16", (128, 64, 3))
    frag = descriptor_fragment(sA, "bf16", "MN", "A", base_address=BASE)
    # m64 block = the next 64-wide MN atom column = 1024 B = 64 units; k16 = 2 groups of 8 K rows x 2048 B = 256 units
    assert str(frag) == "GMMA::DescriptorIterator o (1,2,4,(1,3)):(0,64,256,(0,1024))"
    assert frag.origin == 0x4000008000000040          # LBO 0 (one 128-B row), SBO 2048


def test_fragment_b_k_major_whole_n():
    sB = gmma_smem_layout("K", "SW128", "bf16", (256, 64, 2))
    frag = descriptor_fragment(sB, "bf16", "K", "B", base_address=BASE)   # n = 256: one atom covers N
    assert str(frag) == "GMMA::DescriptorIterator o (1,1,4,(1,2)):(0,0,2,(0,2048))"
    assert str(frag.partition) == "((256,16),1,4,(1,2)):((64,1),0,16,(0,16384))"
    assert frag.origin == 0x4000004000010040


def test_fragment_b_mn_major_n128_and_n64():
    sB = gmma_smem_layout("MN", "SW128", "bf16", (128, 64, 3))
    whole = descriptor_fragment(sB, "bf16", "MN", "B", base_address=BASE)
    assert str(whole) == "GMMA::DescriptorIterator o (1,1,4,(1,3)):(0,0,256,(0,1024))"
    assert whole.origin == 0x4000008000400040          # two 128-B MN rows: LBO 1024
    halves = descriptor_fragment(sB, "bf16", "MN", "B", n=64, base_address=BASE)
    assert str(halves) == "GMMA::DescriptorIterator o (1,2,4,(1,3)):(0,64,256,(0,1024))"
    assert halves.origin == 0x4000008000000040


def test_fragment_b_narrow_mn_major_sw64():
    sB = gmma_smem_layout("MN", "SW64", "bf16", (64, 64))
    frag = descriptor_fragment(sB, "bf16", "MN", "B", n=16, base_address=BASE)
    # N blocks of 16: +32 B inside the 64-B row, then the next atom (512 B = 32 units); k16 = 2 x 1024 B = 128 units
    assert str(frag) == "GMMA::DescriptorIterator o (1,(2,2),4):(0,(2,32),128)"
    assert frag.origin == 0x8000004000000040
    assert [frag(0, n, 0) & 0x3FFF for n in range(4)] == [0x40, 0x42, 0x60, 0x62]


def test_fragment_b_interleave_n8():
    sB = gmma_smem_layout("K", "INTER", "bf16", (64, 64))
    frag = descriptor_fragment(sB, "bf16", "K", "B", n=8, base_address=BASE)
    # N block of 8 rows = the next 128-B core matrix (8 units); k16 = two K chunks = 2 x 8 x 128 B = 128 units
    assert str(frag) == "GMMA::DescriptorIterator o (1,8,4):(0,8,128)"
    assert frag.origin == 0x0000000000400040           # LBO 1024, SBO unused -> 0


def test_fragment_two_warpgroups_along_m():
    sA = gmma_smem_layout("K", "SW128", "bf16", (256, 64, 2))
    frags = [descriptor_fragment(sA, "bf16", "K", "A", base_address=0, atom_layout=(2, 1, 1), thread=t)
             for t in (0, 127, 128, 255)]
    assert {str(f) for f in frags} == {"GMMA::DescriptorIterator o (1,2,4,(1,2)):(0,1024,2,(0,2048))"}
    # warpgroup 1 (threads 128..255) starts 64 rows = 8 KiB further
    assert [f.descriptor.start_address for f in frags] == [0, 0, 0x2000, 0x2000]


def test_fragment_fp8_and_tf32():
    frag = descriptor_fragment(gmma_smem_layout("K", "SW128", "e4m3", (64, 128)), "float_e4m3_t", "K",
                               base_address=BASE)
    assert str(frag) == "GMMA::DescriptorIterator o (1,1,4):(0,0,2)" and frag.origin == 0x4000004000010040
    frag = descriptor_fragment(gmma_smem_layout("K", "SW32", "tf32", (64, 16)), "tfloat32_t", "K",
                               base_address=BASE)
    # one 32-B SW32 atom column per k8 step, 8 atoms of 256 B along M before the next column: 2048 B = 128 units
    assert str(frag) == "GMMA::DescriptorIterator o (1,1,2):(0,0,128)" and frag.origin == 0xc000001000010040


def test_fragment_equals_the_iterator_everywhere():
    for major in ("K", "MN"):
        for sw in WB:
            sA = gmma_smem_layout(major, sw, "f16", (128, 64, 2))
            frag = descriptor_fragment(sA, "f16", major, "A", base_address=BASE)
            it = DescriptorIterator(sA, "f16", major, BASE)
            stages, m_blocks, k_steps = it.shape
            assert lc.size(frag.layout) == stages * m_blocks * k_steps
            for s in range(stages):
                for m in range(m_blocks):
                    for k in range(k_steps):
                        assert frag(0, m, k, s) == it.descriptor(k=k, mn_block=m, stage=s).encode()


def test_fragment_slicing_is_cutes():
    frag = descriptor_fragment(gmma_smem_layout("K", "SW128", "bf16", (128, 64, 4)), "bf16", "K", base_address=BASE)
    stage = frag(_, _, _, 2)                      # tCrA(_,_,_,read_stage)
    assert str(stage) == "GMMA::DescriptorIterator o (1,2,4):(0,512,2)"
    assert stage.origin == frag(0, 0, 0, 2) and stage(0, 1, 3) == frag(0, 1, 3, 2)
    assert str(stage.partition) == "((64,16),2,4):((64,1),4096,16)"
    k_block = frag(_, _, 1, 0)                    # tCrA(_,_,k_block,0)
    assert list(k_block) == [0x4000004000010042, 0x4000004000010242]


def test_fragment_prints_like_cute():
    # SW64 bf16 (128, 32, 2): m64 block = 64 x 64 B = 256 units, k16 = 2 units, stage = 128 x 32 x 2 B = 512 units
    frag = descriptor_fragment(gmma_smem_layout("K", "SW64", "bf16", (128, 32, 2)), "bf16", "K", base_address=BASE)
    assert frag.print_tensor() == "\n".join([
        "GMMA::DescriptorIterator o (1,2,2,(1,2)):(0,256,2,(0,512)):",
        "0x8000002000010040 0x8000002000010140",
        "-" * 39,
        "0x8000002000010042 0x8000002000010142",
        "=" * 39,
        "0x8000002000010240 0x8000002000010340",
        "-" * 39,
        "0x8000002000010242 0x8000002000010342",
    ])
    assert frag.descriptor.cute_str() == "\n".join([
        "GmmaDescriptor: 0x8000002000010040",
        "  start_addr :  0x0040",
        "  leading_off:  0x0001 (1)",
        "  stride_off :  0x0020 (32)",
        "  base_offset:  0x0",
        "  layout_type:  0x2 (B64)",
    ])
    assert make_descriptor(gmma_smem_layout("MN", "SW32", "f16", (64, 16)), "f16", "MN").cute_str().endswith(
        "layout_type:  0x3 (B32)")


FRAG_ERRORS = [
    ({"operand": "C"}, "operand 'C' is not 'A' or 'B' (an SS wgmma's smem operands)"),
    ({"operand": "B", "n": 40, "element": "s8"}, "N = 40 is not a legal wgmma N for s8 operands"),
    ({"operand": "A", "atom_layout": (2, 1)}, "atom_layout (2, 1) is not 3 positive ints"),
    ({"operand": "A", "thread": 128}, "thread 128 is not in 0..127 (the TiledMMA's 128 threads)"),
    ({"operand": "A", "atom_layout": (4, 1, 1)},
     "the layout's M extent 128 is not a multiple of the TiledMMA's M tile 256 (4 x the atom's M = 64)"),
    ({"operand": "A", "base_address": 0x480}, "misaligned base: 0x480 is not on the SW128 swizzle repeat"),
    ({"operand": "A", "element": "bfloat61"}, "dtype: unknown element type (did you mean 'bfloat16'?)"),
]


@pytest.mark.parametrize("kwargs, message", FRAG_ERRORS, ids=[m[:30] for _k, m in FRAG_ERRORS])
def test_fragment_errors(kwargs, message):
    kwargs = dict(kwargs)
    element = kwargs.pop("element", "bf16")
    operand = kwargs.pop("operand")
    sA = gmma_smem_layout("K", "SW128", "s8" if element == "s8" else "bf16", (128, 128 if element == "s8" else 64))
    with pytest.raises(DescriptorError) as e:
        descriptor_fragment(sA, element, "K", operand, **kwargs)
    assert message in str(e.value)


def test_fragment_names_the_first_bad_element():
    # stages 8256 elements apart: stage 1 starts in row 1 of a SW128 pattern
    sA = lc.parse("Sw<3,4,3> o ((8,8),(64,1),(1,2)):((64,512),(1,0),(0,8256))")
    with pytest.raises(DescriptorError) as e:
        descriptor_fragment(sA, "bf16", "K", base_address=BASE)
    assert str(e.value).endswith(
        "element (0,0,0,(0,1)): misaligned tile: it starts in row 1 of a 1024-byte SW128 pattern (byte 128); "
        "that needs base_offset != 0, which is refused")


# ---------------------------------------------------------------------------------------------------------------
# CuTe's element-type names, everywhere a dtype is taken
# ---------------------------------------------------------------------------------------------------------------

CUTE = [("half_t", "f16"), ("bfloat16_t", "bf16"), ("tfloat32_t", "tf32"), ("float_e4m3_t", "e4m3"),
        ("float_e5m2_t", "e5m2"), ("int8_t", "s8"), ("uint8_t", "u8"), ("float", "f32"), ("double", "f64"),
        ("int32_t", "s32"), ("uint32_t", "u32"), ("int16_t", "s16"), ("uint16_t", "u16"), ("int64_t", "s64"),
        ("uint64_t", "u64"), ("int4b_t", "s4"), ("uint4b_t", "u4"), ("uint1b_t", "b1"), ("bin1_t", "b1")]


@pytest.mark.parametrize("cute, short", CUTE)
def test_cute_names_and_prefixes(cute, short):
    assert dtype(cute) is dtype(short) and cute_names()[cute] == short
    assert dtype("cute::" + cute) is dtype(short) and dtype("cutlass::" + cute) is dtype(short)


def test_cute_names_reach_every_hopper_function():
    sA = gmma_smem_layout("K", "SW128", "bfloat16_t", (64, 64))
    assert sA == gmma_smem_layout("K", "SW128", "bf16", (64, 64)) and gmma_atom("MN", "SW64", "half_t") == gmma_atom(
        "MN", "SW64", "f16")
    assert make_descriptor(sA, "cute::bfloat16_t", "K") == make_descriptor(sA, "bf16", "K")
    assert descriptor_verdict(sA, "bfloat16_t", "K").ok and DescriptorIterator(sA, "bfloat16_t", "K").shape
    assert [wgmma_k(t) for t in ("half_t", "float_e5m2_t", "int8_t", "tfloat32_t")] == [16, 32, 32, 8]
    assert str(wgmma_tiles(sA, "bfloat16_t", "K")) == str(wgmma_tiles(sA, "bf16", "K"))
    d = make_descriptor(sA, "bf16", "K")
    assert core_matrix_addresses(d, "bfloat16_t", "K", 64) == core_matrix_addresses(d, "bf16", "K", 64)
    assert byte_address(sA, "bfloat16_t", (1, 0)) == 144 and byte_addresses(Layout(4, 1), "float") == [0, 4, 8, 12]
    assert accumulator_tv(64, "float") == accumulator_tv(64, "f32") and accumulator_tv(64, "int32_t")
    assert a_fragment_tv("float_e4m3_t") == a_fragment_tv("e4m3")
    tv = lc.parse("((8,4),8):((1,64),8)")
    assert bank_conflicts(tv, sA, "bfloat16_t").wavefronts == bank_conflicts(tv, sA, "bf16").wavefronts
    assert tma_data_type("uint16_t").name == "CU_TENSOR_MAP_DATA_TYPE_UINT16"
    assert tma_data_type("cutlass::bfloat16_t") == tma_data_type("bf16")
    params = make_tma_params(Layout((4096, 4096), (4096, 1)), "bfloat16_t", gmma_atom("K", "SW128", "bf16"))
    assert params == make_tma_params(Layout((4096, 4096), (4096, 1)), "bf16", gmma_atom("K", "SW128", "bf16"))


def test_unknown_dtype_lists_both_spellings_with_a_hint():
    with pytest.raises(LayoutError) as e:
        dtype("bfloat16_x")
    message = str(e.value)
    assert message.startswith("dtype('bfloat16_x'): unknown element type (did you mean 'bfloat16_t'?); layoutc names: "
                              "b1, bf16, e4m3, ")
    assert "; CuTe names: bfloat16_t, bin1_t, double, float, float_e4m3_t, " in message
    assert "(did you mean 'bf16'?)" in str(pytest.raises(LayoutError, dtype, "BF16").value)        # case-blind
    assert "(did you mean 'half_t'?)" in str(pytest.raises(LayoutError, dtype, "cute::halft").value)
    assert "did you mean" not in str(pytest.raises(LayoutError, dtype, "xyz").value)


def test_cli_takes_cute_names_and_mn(capsys):
    assert main(["atom", "MN", "SW128", "bfloat16_t", "--tile", "128,64", "--mn", "128"]) == 0
    assert "0x4000008000400040" in capsys.readouterr().out
    assert main(["desc", "Sw<3,4,3> o ((64,2),(8,2)):((1,512),(64,1024))", "--dtype", "half_t", "--major", "MN"]) == 0
    out = capsys.readouterr().out
    assert "0x4000008000000040" in out and "note: LBO unused (one 128-byte MN row); emitted 0, as CUTLASS does" in out
    assert main(["show", "Sw<3,4,3> o (8,64):(64,1)", "--dtype", "cute::bfloat16_t"]) == 0
    capsys.readouterr()
    assert main(["atom", "K", "SW128", "bfloat61_t"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("layoutc atom: dtype('bfloat61_t'): unknown element type (did you mean 'bfloat16_t'?)")
    assert len(err.strip().splitlines()) == 1


def test_cli_frag(capsys):
    code = main(["frag", "Sw<3,4,3> o ((8,16),(64,1),(1,2)):((64,512),(1,0),(0,8192))", "--dtype", "bfloat16_t",
                 "--major", "K"])
    out = capsys.readouterr().out
    assert code == 0
    assert "partition  ((64,16),2,4,(1,2)):((64,1),4096,16,(0,8192))" in out
    assert "GMMA::DescriptorIterator o (1,2,4,(1,2)):(0,512,2,(0,1024)):" in out
    assert "GmmaDescriptor: 0x4000004000010040" in out
