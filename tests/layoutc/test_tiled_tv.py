"""layoutc.hopper.tiled: TiledCopy/TiledMMA-style TV layouts over a whole tile, checked against the PTX ISA's
fragment figures (hopper-ptx.md §3), bijection onto the tile, and agreement with fragments.py for one atom."""
from __future__ import annotations

import pytest

import layoutc as lc
from layoutc import LayoutError, idx2crd
from layoutc.hopper import a_fragment_tv, accumulator_tv, ldmatrix_tile_shape, ldmatrix_tv
from layoutc.hopper.tiled import (copy_tv, ldmatrix_tiled_tv, stmatrix_tiled_tv, tiled_tv, vector_elements,
                                  wgmma_a_tv, wgmma_accumulator_tv)
from ptxgen.ir.ops.wgmma import rs_a_tv
from ptxgen.ir.types import BF16, F16


def table(tv, shape):
    """{(thread, value): (row, col)} of a TV layout over a column-major tile."""
    return {(t, v): idx2crd(tv(t, v), shape) for t in range(lc.size(tv[0])) for v in range(lc.size(tv[1]))}


def assert_bijection(tv, shape):
    m, n = shape
    indices = sorted(tv(t, v) for t in range(lc.size(tv[0])) for v in range(lc.size(tv[1])))
    assert indices == list(range(m * n))


# -- wgmma accumulator over warpgroups ------------------------------------------------------------------------------

def ptx_accumulator(t, i):
    """hopper-ptx.md §3.1 (the PTX ISA's figure, H100-checked), in a warpgroup's own 64 x N tile."""
    w, l = t // 32, t % 32
    return 16 * w + l // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (l % 4) + i % 2


@pytest.mark.parametrize("n", [8, 64, 256])
def test_one_warpgroup_is_clayout_64xn(n):
    tv = wgmma_accumulator_tv(64, n)
    assert tv == accumulator_tv(n)
    assert table(tv, (64, n)) == {(t, i): ptx_accumulator(t, i) for t in range(128) for i in range(n // 2)}


@pytest.mark.parametrize("m, n, w, wn", [(128, 128, 2, 1), (256, 64, 2, 1), (192, 64, 3, 1), (256, 256, 2, 2),
                                         (128, 256, 1, 1)])
def test_accumulator_over_warpgroups_follows_the_ptx_figure(m, n, w, wn):
    tv = wgmma_accumulator_tv(m, n, warpgroups=w, warpgroups_n=wn)
    assert_bijection(tv, (m, n))
    assert lc.size(tv[0]) == 128 * w * wn
    n_atom, p_blocks = n // wn, m // (64 * w)
    for (t, v), (row, col) in table(tv, (m, n)).items():
        wm, wgn, lt = (t // 128) % w, t // (128 * w), t % 128
        p, i = v // (n_atom // 2), v % (n_atom // 2)
        r0, c0 = ptx_accumulator(lt, i)
        # warpgroup (wm, wgn) owns the band of P m-blocks starting at row 64·P·wm, its value block p is m-block p
        assert (row, col) == (64 * (p_blocks * wm + p) + r0, n_atom * wgn + c0)


def test_accumulator_exact_layout():
    assert str(wgmma_accumulator_tv(128, 128, warpgroups=2)) == "(((4,8,4),2),(2,2,16)):(((256,1,16),64),(128,8,1024))"
    assert str(wgmma_accumulator_tv(256, 128, warpgroups=2)) == \
        "(((4,8,4),2),((2,2,16),2)):(((512,1,16),128),((256,8,2048),64))"


def test_accumulator_per_warpgroup_is_the_ir_fragment():
    """Warpgroup w's slice of the tiled TV, re-read in its own (m/W, n) band, is the tile IR's wgmma.mma fragment:
    value v + (n/2)·p of thread t is element accumulator_tv(n)(t, v) of m-block p (spec/tile-ir.md §4.10)."""
    m, n, w = 256, 128, 2
    tv = wgmma_accumulator_tv(m, n, warpgroups=w)
    atom, half = accumulator_tv(n), n // 2
    for g in range(w):
        for t in range(128):
            for v in range(lc.size(tv[1])):
                row, col = idx2crd(tv(t + 128 * g, v), (m, n))
                r, c = idx2crd(atom(t, v % half), (64, n))
                assert (row, col) == (m // w * g + 64 * (v // half) + r, c)


# -- RS A fragment; the FA3 P-in-registers fact ---------------------------------------------------------------------

def test_rs_a_one_warpgroup_is_alayout_and_the_ir_rs_tv():
    assert wgmma_a_tv("bf16", 64, 16) == a_fragment_tv("bf16")
    assert wgmma_a_tv("e4m3", 64, 32) == a_fragment_tv("e4m3")
    assert wgmma_a_tv("bf16", 64, 64) == a_fragment_tv("bf16", 64)
    for t, m, k in [(BF16, 128, 32), (F16, 64, 64), (BF16, 192, 16)]:
        assert table(wgmma_a_tv(str(t), m, k), (m, k)) == table(rs_a_tv(t, m, k), (m, k))


@pytest.mark.parametrize("m, n, w", [(64, 64, 1), (128, 128, 2), (256, 64, 2)])
def test_f32_accumulator_and_16bit_a_fragment_share_rows_and_columns(m, n, w):
    """FlashAttention-3 keeps P = softmax(S) in registers: the f32 accumulator S (m × n) becomes the 16-bit A operand
    (m × k, k = n) of the next wgmma without data movement, because thread t's value v is the same (row, col) in
    both fragments. Shown from the two TV layouts."""
    acc = wgmma_accumulator_tv(m, n, warpgroups=w)
    a = wgmma_a_tv("bf16", m, n, warpgroups=w)
    assert table(acc, (m, n)) == table(a, (m, n))
    assert_bijection(a, (m, n))


def test_8bit_a_fragment_does_not_share_the_accumulator_map():
    """The fact is specific to 16-bit A: an e4m3 A fragment (4 K-bytes per register) holds other columns."""
    acc = table(wgmma_accumulator_tv(64, 32), (64, 32))
    a8 = table(wgmma_a_tv("e4m3", 64, 32), (64, 32))
    assert acc != a8


# -- ldmatrix / stmatrix --------------------------------------------------------------------------------------------

def ptx_ldmatrix(lane, value, trans):
    """hopper-ptx.md §3.3: register j of lane l holds row l/4, cols 2(l%4), 2(l%4)+1 of matrix j (.trans swaps)."""
    j, half = value // 2, value % 2
    r, c = lane // 4, 2 * (lane % 4) + half
    return j, ((c, r) if trans else (r, c))


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_tiled_matches_the_ptx_description(num, trans):
    shape = ldmatrix_tile_shape(num, "grid")
    tile = (shape[0] * 2, shape[1] * 2)
    tv = ldmatrix_tiled_tv(num, tile, warps=(2, 1), trans=trans)
    assert_bijection(tv, tile)
    assert lc.size(tv[0]) == 64
    band_rows = tile[0] // 2
    for (t, v), (row, col) in table(tv, tile).items():
        warp, lane = t // 32, t % 32
        r, vi = v // (2 * num), v % (2 * num)               # instruction r of the warp: its repeats run along N
        j, (mr, mc) = ptx_ldmatrix(lane, vi, trans)
        jm, jn = (j % 2, j // 2) if num > 1 else (0, 0)     # 'grid': matrix j is 8x8 block (j%2, j//2)
        assert (row, col) == (band_rows * warp + 8 * jm + mr, shape[1] * r + 8 * jn + mc)


def test_ldmatrix_tiled_one_atom_is_ldmatrix_tv_and_stmatrix_equals_it():
    assert ldmatrix_tiled_tv(4, (16, 16)) == ldmatrix_tv(4, arrangement="grid")
    assert ldmatrix_tiled_tv(2, (16, 8), trans=True) == ldmatrix_tv(2, True, "grid")
    assert stmatrix_tiled_tv(4, (64, 32), warps=(4, 1)) == ldmatrix_tiled_tv(4, (64, 32), warps=(4, 1))


def test_stmatrix_x4_over_four_warps_is_the_accumulator_slab():
    """stmatrix.x4 per warp (16 x 16 each) over a 64 x 16 slab stores exactly the wgmma accumulator's elements:
    the epilogue needs no shuffle (hopper-ptx.md §3.3)."""
    assert table(stmatrix_tiled_tv(4, (64, 16), warps=(4, 1)), (64, 16)) == table(accumulator_tv(16), (64, 16))
    assert str(ldmatrix_tiled_tv(4, (64, 16), warps=(4, 1))) == "(((4,8),4),(2,2,2)):(((128,1),16),(64,8,512))"


# -- vectorized copies ------------------------------------------------------------------------------------------------

def test_copy_tv_is_make_layout_tv_repeated():
    tiler, tv = copy_tv((32, 8), 8, (64, 64))
    assert tiler == (32, 64)
    assert str(tv) == "((8,32),(8,2)):((512,1),(64,32))"
    _, one_pass = lc.make_layout_tv(lc.Layout((32, 8), (8, 1)), lc.Layout((1, 8), (1, 1)))
    assert table(copy_tv((32, 8), 8, (32, 64))[1], (32, 64)) == table(one_pass, (32, 64))
    assert_bijection(tv, (64, 64))


@pytest.mark.parametrize("threads, vector, tile", [((32, 8), 8, (64, 64)), ((16, 16), 4, (64, 128)),
                                                   ((8, 32), 8, (16, 512)), ((128, 1), 1, (256, 2))])
def test_copy_tv_value_order(threads, vector, tile):
    """Thread t = (tm, tn) row-major holds vectors of `vector` contiguous columns; its values run through a vector,
    then the repeats down M, then along N."""
    tm, tn = threads
    tiler, tv = copy_tv(threads, vector, tile)
    assert tiler == (tm, tn * vector)
    assert_bijection(tv, tile)
    reps_m = tile[0] // tm
    for (t, v), (row, col) in table(tv, tile).items():
        e, rep = v % vector, v // vector
        rm, rn = rep % reps_m, rep // reps_m
        assert (row, col) == (t // tn + tm * rm, vector * (t % tn) + e + tn * vector * rn)


def test_vector_elements():
    assert [vector_elements(16, t) for t in ("bf16", "f32", "e4m3", "f64")] == [8, 4, 16, 2]
    assert vector_elements(4, "f16") == 2
    with pytest.raises(LayoutError, match=r"vector_elements\(12, 'f32'\): a vector access is 1, 2, 4, 8 or 16 bytes"):
        vector_elements(12, "f32")
    with pytest.raises(LayoutError, match=r"vector_elements\(2, 'f32'\): 2 bytes are no whole number of 32-bit f32"):
        vector_elements(2, "f32")


def test_copy_tv_takes_layouts():
    column_major_threads = lc.Layout((32, 8), (1, 32))
    tiler, tv = copy_tv(column_major_threads, lc.Layout((1, 4), (1, 1)), (64, 64))
    assert tiler == (32, 32)
    assert_bijection(tv, (64, 64))
    assert idx2crd(tv(1, 0), (64, 64)) == (1, 0)


def test_tiled_tv_groups_blocked():
    tv = tiled_tv(accumulator_tv(64), (64, 64), (128, 64), (2, 1))
    assert str(tv) == "(((4,8,4),2),(2,2,8)):(((256,1,16),64),(128,8,1024))"
    assert str(tiled_tv(ldmatrix_tv(1), (8, 8), (16, 8))) == "((4,8),(2,2)):((32,1),(16,8))"


# -- errors -----------------------------------------------------------------------------------------------------------

def test_errors_name_the_operation_and_the_condition():
    with pytest.raises(LayoutError, match=r"copy_tv\(\(32,8\), 8, \(48,64\)\): one pass of the threads covers "
                                          r"\(32,64\), which does not divide the 48x64 tile"):
        copy_tv((32, 8), 8, (48, 64))
    with pytest.raises(LayoutError, match=r"wgmma_accumulator_tv\(96, 128, 1, 1\): m = 96 is not a multiple of 64 "
                                          r"rows per warpgroup x 1 warpgroups along M"):
        wgmma_accumulator_tv(96, 128)
    with pytest.raises(LayoutError, match=r"N=264 is not a legal wgmma N for f32"):
        wgmma_accumulator_tv(64, 264)
    with pytest.raises(LayoutError, match=r"wgmma_a_tv\('bf16', 64, 24, 1\): k = 24 is not a multiple of the "
                                          r"instruction K = 16"):
        wgmma_a_tv("bf16", 64, 24)
    with pytest.raises(LayoutError, match=r"wgmma_accumulator_tv\(256, 64, 3, 1\): m = 256 is not a multiple of 64 "
                                          r"rows per warpgroup x 3 warpgroups along M"):
        wgmma_accumulator_tv(256, 64, warpgroups=3)
    with pytest.raises(LayoutError, match=r"tiled_tv\(.*\): 3x1 thread groups cannot share the 4x1 atom blocks of "
                                          r"the 256x64 tile evenly"):
        tiled_tv(accumulator_tv(64), (64, 64), (256, 64), (3, 1))
    with pytest.raises(LayoutError, match=r"ldmatrix/stmatrix move 1, 2 or 4 matrices"):
        ldmatrix_tiled_tv(3, (16, 16))
    with pytest.raises(LayoutError, match=r"copy_tv.*vector must be a positive element count or a value Layout, not 0"):
        copy_tv((32, 8), 0, (64, 64))
