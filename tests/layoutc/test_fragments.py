"""Register fragments (layoutc.hopper.fragments) checked cell by cell against the PTX ISA's figures, as the Hopper
reference (§1, §3) writes them: the formulas below are the figures' formulas, independent of the layouts' strides."""
import pytest

import layoutc as lc
from layoutc import Layout, LayoutError, _, idx2crd
from layoutc.hopper import fragments as fr

FLOAT_N = list(range(8, 257, 8))
INT_N = [8, 16, 24] + list(range(32, 257, 16))
ARRANGEMENTS = ("rows", "cols", "grid")


def image(tv):
    return sorted(tv(t, v) for t in range(lc.size(tv[0])) for v in range(lc.size(tv[1])))


# -- reference formulas (PTX ISA figures, reference §3) ------------------------------------------------------------

def acc_ref(t, i):
    """D (64xN): thread t, register i -> (row, col); reference §3.1 [H100]."""
    w, l = t // 32, t % 32
    return 16 * w + l // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (l % 4) + i % 2


def a16_ref(t, e):
    """16-bit A (m64k16): element e -> (register, byte lane, row, col); the accumulator formula at N = 16."""
    row, col = acc_ref(t, e)
    return e // 2, 2 * (e % 2), row, col


def a8_ref(t, j, b):
    """8-bit A (m64k32): register j byte b -> (row, col): 4 consecutive K bytes of one row per register."""
    w, l = t // 32, t % 32
    r = 16 * w + l // 4
    return r + 8 * (j % 2), 4 * (l % 4) + b + 16 * (j // 2)


def tf32_ref(t, j):
    w, l = t // 32, t % 32
    return 16 * w + l // 4 + 8 * (j % 2), l % 4 + 4 * (j // 2)


def ldsm_ref(l, j, h, trans):
    """Register j half h of lane l -> (row, col) inside matrix j."""
    if trans:
        return 2 * (l % 4) + h, l // 4
    return l // 4, 2 * (l % 4) + h


def matrix_origin(j, arrangement):
    return {"rows": (8 * j, 0), "cols": (0, 8 * j), "grid": (8 * (j % 2), 8 * (j // 2))}[arrangement]


# -- pinned CuTe layouts ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("made, expected", [
    (lambda: fr.accumulator_tv(256), "((4,8,4),(2,2,32)):((128,1,16),(64,8,512))"),
    (lambda: fr.accumulator_tv(64), "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))"),
    (lambda: fr.accumulator_tv(8), "((4,8,4),(2,2,1)):((128,1,16),(64,8,512))"),
    (lambda: fr.accumulator_tv(256, "f16"), "((4,8,4),(2,2,32)):((128,1,16),(64,8,512))"),
    (lambda: fr.accumulator_tv(48, "s32"), "((4,8,4),(2,2,6)):((128,1,16),(64,8,512))"),
    (lambda: fr.a_fragment_tv("bf16"), "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"),   # ALayout_64x16
    (lambda: fr.a_fragment_tv("f16", 16), "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"),
    (lambda: fr.a_fragment_tv("e4m3"), "((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))"),  # ALayout_64x32
    (lambda: fr.a_fragment_tv("s8"), "((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))"),
    (lambda: fr.a_fragment_tv("tf32"), "((4,8,4),(2,2)):((64,1,16),(8,256))"),          # ALayout_64x8
    (lambda: fr.a_fragment_tv("bf16", 64), "((4,8,4),(2,2,2,4)):((128,1,16),(64,8,512,1024))"),
    (lambda: fr.ldmatrix_tv(1), "((4,8),2):((16,1),8)"),
    (lambda: fr.ldmatrix_tv(1, trans=True), "((4,8),2):((2,8),1)"),
    (lambda: fr.ldmatrix_tv(2), "((4,8),(2,2)):((32,1),(16,8))"),
    (lambda: fr.ldmatrix_tv(4), "((4,8),(2,4)):((64,1),(32,8))"),
    (lambda: fr.ldmatrix_tv(4, arrangement="grid"), "((4,8),(2,2,2)):((32,1),(16,8,128))"),
    (lambda: fr.ldmatrix_address_lanes(4), "(8,4):(1,8)"),
    (lambda: fr.ldmatrix_address_lanes(4, "grid"), "(8,(2,2)):(1,(8,128))"),
    (lambda: fr.accumulator_warp_tv(64, 3), "((4,8),(2,2,8)):((32,1),(16,8,128))"),
])
def test_pinned_layouts(made, expected):
    assert str(made()) == expected


def test_a16_is_accumulator_at_n16():
    assert fr.a_fragment_tv("bf16") == fr.accumulator_tv(16)


# -- accumulator, cell by cell ----------------------------------------------------------------------------------

def check_accumulator(n, acc):
    tv = fr.accumulator_tv(n, acc)
    assert lc.size(tv[0]) == 128 and lc.size(tv[1]) == n // 2
    for t in range(128):
        for i in range(n // 2):
            assert idx2crd(tv(t, i), (64, n)) == acc_ref(t, i), (n, t, i)
    assert image(tv) == list(range(64 * n))


@pytest.mark.parametrize("n", [8, 64, 256])
def test_accumulator_figure_cells(n):
    check_accumulator(n, "f32")


@pytest.mark.parametrize("acc, ns", [("f32", FLOAT_N), ("f16", FLOAT_N), ("s32", INT_N)])
def test_accumulator_every_legal_n(acc, ns):
    assert fr.wgmma_n_values(acc) == tuple(ns)
    for n in ns:
        check_accumulator(n, acc)


def test_n_rules():
    assert len(fr.wgmma_n_values("f32")) == 32 and len(fr.wgmma_n_values("s32")) == 18
    for n in (0, 4, 12, 264, 512, -8, 8.0, True):
        with pytest.raises(LayoutError):
            fr.accumulator_tv(n)
    for n in (40, 56, 72, 248):  # legal for floats, not for integer wgmma
        fr.accumulator_tv(n, "f32")
        with pytest.raises(LayoutError):
            fr.accumulator_tv(n, "s32")
    for bad in ("bf16", "f64", "e4m3"):
        with pytest.raises(LayoutError):
            fr.accumulator_tv(64, bad)
    with pytest.raises(LayoutError):
        fr.accumulator_tv(64, "nope")


@pytest.mark.parametrize("n, f32_regs, f16_regs", [(8, 4, 2), (16, 8, 4), (32, 16, 8), (64, 32, 16), (96, 48, 24),
                                                   (128, 64, 32), (192, 96, 48), (256, 128, 64)])
def test_register_counts(n, f32_regs, f16_regs):
    assert fr.accumulator_num_registers(n) == f32_regs == fr.accumulator_num_registers(n, "s32")
    assert fr.accumulator_num_registers(n, "f16") == f16_regs


@pytest.mark.parametrize("n", [8, 64, 256])
def test_f16_accumulator_pairs(n):
    # .b32 register k holds elements 2k (low half) and 2k+1: the same row, adjacent columns, even column low.
    tv = fr.accumulator_tv(n, "f16")
    regs = {}
    for i in range(n // 2):
        k, half = fr.accumulator_register(i, "f16")
        assert (k, half) == (i // 2, i % 2)
        regs.setdefault(k, []).append((half, i))
    assert sorted(regs) == list(range(fr.accumulator_num_registers(n, "f16")))
    for t in range(128):
        for k, pair in regs.items():
            (h0, lo), (h1, hi) = sorted(pair)
            assert (h0, h1) == (0, 1)
            (r0, c0), (r1, c1) = idx2crd(tv(t, lo), (64, n)), idx2crd(tv(t, hi), (64, n))
            assert r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0
    assert fr.accumulator_register(7) == (7, 0) == fr.accumulator_register(7, "s32")


@pytest.mark.parametrize("n", [8, 24, 256])
def test_accumulator_coords_from_layout(n):
    coords = fr.accumulator_coords(n)
    tv = fr.accumulator_tv(n)
    assert len(coords) == 128 and all(len(row) == n // 2 for row in coords)
    for t in range(128):
        for i in range(n // 2):
            assert coords[t][i] == acc_ref(t, i) == fr.tv_coord(tv, (64, n), t, i)


def test_accumulator_inverse_is_owner():
    # The layout algebra inverts the fragment: left_inverse(tv)(m + 64n) = t + 128 v.
    for n in (8, 64, 256):
        tv = fr.accumulator_tv(n)
        inv = lc.left_inverse(tv)
        owners = fr.tv_owners(tv, 64, n)
        for idx in range(64 * n):
            (t, v), = owners[idx]
            assert inv(idx) == t + 128 * v


# -- A fragments (RS) --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_a16_cells(element):
    tv = fr.a_fragment_tv(element)
    assert fr.a_fragment_k(element) == 16 and lc.size(tv[0]) == 128 and lc.size(tv[1]) == 8
    for t in range(128):
        w, l = t // 32, t % 32
        row0, c0 = 16 * w + l // 4, 2 * (l % 4)
        for e in range(8):
            reg, lane, row, col = a16_ref(t, e)
            assert fr.a_fragment_register(element, e) == (reg, lane)
            assert idx2crd(tv(t, e), (64, 16)) == (row, col)
            # "register j holds A[row0 + 8(j&1)][c0 + 8(j>>1) + {0,1}]"
            assert (row, col) == (row0 + 8 * (reg & 1), c0 + 8 * (reg >> 1) + lane // 2)
    assert image(tv) == list(range(64 * 16))


@pytest.mark.parametrize("element", ["e4m3", "e5m2", "s8", "u8"])
def test_a8_cells(element):
    tv = fr.a_fragment_tv(element)
    assert fr.a_fragment_k(element) == 32 and lc.size(tv[0]) == 128 and lc.size(tv[1]) == 16
    for t in range(128):
        for v in range(16):
            j, b = fr.a_fragment_register(element, v)
            assert (j, b) == (v // 4, v % 4)
            assert idx2crd(tv(t, v), (64, 32)) == a8_ref(t, j, b)
    assert image(tv) == list(range(64 * 32))


def test_tf32_cells():
    tv = fr.a_fragment_tv("tf32")
    assert fr.a_fragment_k("tf32") == 8 and lc.size(tv[0]) == 128 and lc.size(tv[1]) == 4
    for t in range(128):
        for j in range(4):
            assert fr.a_fragment_register("tf32", j) == (j, 0)
            assert idx2crd(tv(t, j), (64, 8)) == tf32_ref(t, j)
    assert image(tv) == list(range(64 * 8))


@pytest.mark.parametrize("element, k", [("bf16", 64), ("e4m3", 128), ("tf32", 32), ("f16", 16)])
def test_a_fragment_k_steps(element, k):
    # k/K wgmmas: step s holds the single-instruction fragment shifted by s·K columns, registers 4s..4s+3.
    one = fr.a_fragment_tv(element)
    kk = fr.a_fragment_k(element)
    tv = fr.a_fragment_tv(element, k)
    per_step = lc.size(one[1])
    assert lc.size(tv[1]) == per_step * (k // kk)
    for t in range(128):
        for v in range(lc.size(tv[1])):
            s, e = divmod(v, per_step)
            r, c = idx2crd(one(t, e), (64, kk))
            assert idx2crd(tv(t, v), (64, k)) == (r, c + s * kk)
            reg, lane = fr.a_fragment_register(element, v)
            assert reg == 4 * s + fr.a_fragment_register(element, e)[0]
    assert image(tv) == list(range(64 * k))


def test_a_fragment_errors():
    for bad in ("f32", "b1", "s32", "f64", "s4"):
        with pytest.raises(LayoutError):
            fr.a_fragment_tv(bad)
    for k in (8, 24, 0, -16, 16.0):
        with pytest.raises(LayoutError):
            fr.a_fragment_tv("bf16", k)
    with pytest.raises(LayoutError):
        fr.a_fragment_register("bf16", -1)


def test_accumulator_feeds_a_fragment():
    # Reference §3.2: the k16 A fragment of D's 16-column slice s is D's registers 8s..8s+7 (same layout at N=16).
    for n in (16, 64, 256):
        d = lc.logical_divide(fr.accumulator_tv(n), (_, 8))          # values -> (8 per slice, N/16 slices)
        for s in range(n // 16):
            part = lc.slice_layout((_, (_, s)), d)
            assert lc.slice_offset((_, (_, s)), d) == 64 * 16 * s     # the slice's first column in D
            assert lc.make_layout(part[0], part[1]) == fr.a_fragment_tv("bf16")


# -- ldmatrix / stmatrix ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_ldmatrix_cells(num, trans, arrangement):
    tv = fr.ldmatrix_tv(num, trans, arrangement)
    shape = fr.ldmatrix_tile_shape(num, arrangement)
    assert shape[0] * shape[1] == 64 * num
    assert lc.size(tv[0]) == 32 and lc.size(tv[1]) == 2 * num
    for l in range(32):
        for v in range(2 * num):
            j, h = fr.ldmatrix_register(v)
            r, c = ldsm_ref(l, j, h, trans)
            r0, c0 = matrix_origin(j, arrangement)
            assert idx2crd(tv(l, v), shape) == (r0 + r, c0 + c), (l, v)
    assert image(tv) == list(range(64 * num))
    assert fr.stmatrix_tv(num, trans, arrangement) == tv
    # .trans is the per-matrix transpose of the plain fragment
    plain = fr.ldmatrix_tv(num, not trans, arrangement)
    for l in range(32):
        for v in range(2 * num):
            j = v // 2
            r0, c0 = matrix_origin(j, arrangement)
            r, c = idx2crd(tv(l, v), shape)
            assert idx2crd(plain(l, v), shape) == (r0 + (c - c0), c0 + (r - r0))


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_ldmatrix_addresses(num, arrangement):
    # lanes 8j..8j+7 supply rows 0..7 of matrix j
    addr = fr.ldmatrix_address_lanes(num, arrangement)
    assert lc.size(addr) == 8 * num
    assert fr.stmatrix_address_lanes(num, arrangement) == addr
    coords = fr.ldmatrix_address_coords(num, arrangement)
    for a in range(8 * num):
        j, r = divmod(a, 8)
        r0, c0 = matrix_origin(j, arrangement)
        assert coords[a] == (r0 + r, c0)
    # the 8 elements of each addressed row are the data the 32 lanes receive: every tile cell is in some lane's row
    shape = fr.ldmatrix_tile_shape(num, arrangement)
    covered = sorted(addr(a) + shape[0] * c for a in range(8 * num) for c in range(8))
    assert covered == list(range(64 * num))


def test_ldmatrix_errors():
    for bad in (0, 3, 8, True):
        with pytest.raises(LayoutError):
            fr.ldmatrix_tv(bad)
    with pytest.raises(LayoutError):
        fr.ldmatrix_tv(4, arrangement="diagonal")
    with pytest.raises(LayoutError):
        fr.ldmatrix_register(-1)


# -- warp views: accumulator blocks are ldmatrix/stmatrix fragments ------------------------------------------------

@pytest.mark.parametrize("n", [8, 64, 256])
def test_accumulator_warp_view(n):
    tv = fr.accumulator_tv(n)
    for w in range(4):
        wt = fr.accumulator_warp_tv(n, w)
        assert lc.size(wt[0]) == 32 and image(wt) == list(range(16 * n))
        for l in range(32):
            for v in range(n // 2):
                m, c = idx2crd(wt(l, v), (16, n))
                assert idx2crd(tv(32 * w + l, v), (64, n)) == (16 * w + m, c)


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_accumulator_blocks_are_ldmatrix(n):
    x1, x2, x4 = fr.ldmatrix_tv(1), fr.ldmatrix_tv(2), fr.ldmatrix_tv(4, arrangement="grid")
    for w in range(4):
        for j in range(n // 8):
            assert fr.accumulator_block_tv(n, j, w) == x2
            assert fr.accumulator_block_tv(n, j, w, half=0) == x1
            assert fr.accumulator_block_tv(n, j, w, half=1) == x1
        # two blocks side by side: one stmatrix.x4 (grid arrangement) stores the warp's 16x16 slab
        pairs = lc.logical_divide(fr.accumulator_warp_tv(n, w), (_, 8))
        for p in range(n // 16):
            slab = lc.slice_layout((_, (_, p)), pairs)
            assert lc.slice_offset((_, (_, p)), pairs) == 256 * p
            assert lc.make_layout(slab[0], slab[1]) == x4


def test_block_values_are_registers():
    # block j, half h of D (f32) = registers 4j+2h, 4j+2h+1 -> packed into f16 register 2j+h = stmatrix.x1's register.
    n = 64
    tv = fr.accumulator_tv(n)
    x1 = fr.ldmatrix_tv(1)
    for t in range(128):
        w, l = divmod(t, 32)
        for j in range(n // 8):
            for h in (0, 1):
                for e in (0, 1):
                    i = 4 * j + 2 * h + e
                    assert fr.accumulator_register(i, "f16") == (2 * j + h, e)
                    r, c = idx2crd(x1(l, e), (8, 8))
                    assert idx2crd(tv(t, i), (64, n)) == (16 * w + 8 * h + r, 8 * j + c)


def test_block_errors():
    with pytest.raises(LayoutError):
        fr.accumulator_block_tv(64, 8)
    with pytest.raises(LayoutError):
        fr.accumulator_block_tv(64, 0, half=2)
    with pytest.raises(LayoutError):
        fr.accumulator_warp_tv(64, 4)


# -- tv_table ----------------------------------------------------------------------------------------------------

def parse_table(text):
    lines = text.splitlines()
    header = [int(x) for x in lines[0].split()]
    rows = []
    for k, line in enumerate(lines[1:]):
        parts = line.split()
        assert int(parts[0]) == k
        rows.append(parts[1:])
    return header, rows


@pytest.mark.parametrize("tv, m, n", [
    (fr.accumulator_tv(8), 64, 8), (fr.accumulator_tv(64), 64, 64), (fr.a_fragment_tv("e4m3"), 64, 32),
    (fr.a_fragment_tv("tf32"), 64, 8), (fr.ldmatrix_tv(4, True, "grid"), 16, 16), (fr.ldmatrix_tv(2, False, "cols"), 8, 16),
])
def test_tv_table_cells(tv, m, n):
    header, rows = parse_table(fr.tv_table(tv, m, n))
    assert header == list(range(n)) and len(rows) == m
    for t in range(lc.size(tv[0])):
        for v in range(lc.size(tv[1])):
            r, c = idx2crd(tv(t, v), (m, n))
            assert rows[r][c] == f"T{t}V{v}"


def test_tv_table_x1_text():
    text = fr.tv_table(fr.ldmatrix_tv(1), 8, 8)
    assert text.splitlines()[0].split() == [str(c) for c in range(8)]
    assert text.splitlines()[1].split() == ["0", "T0V0", "T0V1", "T1V0", "T1V1", "T2V0", "T2V1", "T3V0", "T3V1"]
    assert text.splitlines()[8].split()[-1] == "T31V1"


def test_tv_table_holes_and_broadcast():
    # 2 threads broadcasting the same 2 values over a 2x2 tile: column 1 is unowned, column 0 owned twice
    tv = Layout((2, 2), (0, 1))
    _h, rows = parse_table(fr.tv_table(tv, 2, 2))
    assert rows == [["T0V0+", "."], ["T0V1+", "."]]
    with pytest.raises(LayoutError):
        fr.tv_table(Layout((2, 2), (1, 2)), 1, 2)
    with pytest.raises(LayoutError):
        fr.tv_table(Layout(4, 1), 2, 2)
