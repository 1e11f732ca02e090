"""layoutc.hopper.tma: tensor-map parameters from CuTe layouts, every driver constraint, and the smem write model.

The write model (rows padded to the swizzle span, swizzle on absolute smem addresses, 128-byte destinations) was read
on an H100; the ``gpu`` tests at the end re-check it and the constraints against the real driver and TMA engine.
"""
import ctypes
import itertools

import pytest
from hypothesis import assume, given, settings, strategies as st

import layoutc as lc
from layoutc import Layout as L, _
from layoutc.hopper import byte_address, gmma_smem_layout
from layoutc.hopper.tma import (
    TMA_SMEM_MIN_ALIGN, TmaDataType as DT, TmaError, TmaInterleave as IL, TmaL2Promotion as L2,
    TmaOobFill as OOB, TmaParams, TmaSwizzle as SW, check_global_address, check_tma_params, make_tma_params,
    tma_boxes, tma_data_type,
)

ROW_MAJOR_4K = L((4096, 4096), (4096, 1))
COL_MAJOR_4K = L((4096, 4096), (1, 4096))


def coords(layout):
    """All coordinates of a layout's top-level modes (1-D index per mode), colexicographic."""
    ext = [lc.size(m) for m in lc.modes(layout.inner if isinstance(layout, lc.ComposedLayout) else layout)]
    for rev in itertools.product(*[range(n) for n in reversed(ext)]):
        yield tuple(reversed(rev))


def assert_one_copy_writes(p: TmaParams, smem, dtype, base=0):
    """byte_address of the smem layout == the simulated TMA write, for every box element."""
    dst = base + p.smem_offset_bytes
    for c in coords(smem):
        assert byte_address(smem, dtype, c, base) == p.tma_write_address(p.tma_coords(c), dst), c


# ---------------------------------------------------------------------------------------------------------------
# Enums and element types
# ---------------------------------------------------------------------------------------------------------------

def test_enum_values_match_cuda_bindings():
    drv = pytest.importorskip("cuda.bindings.driver")
    pairs = [(DT, drv.CUtensorMapDataType), (IL, drv.CUtensorMapInterleave), (SW, drv.CUtensorMapSwizzle),
             (L2, drv.CUtensorMapL2promotion), (OOB, drv.CUtensorMapFloatOOBfill)]
    for ours, theirs in pairs:
        assert {m.name: int(m.value) for m in ours} == {m.name: int(m.value) for m in theirs}, ours.__name__


def test_enum_values_spelled_out():
    assert [int(m) for m in DT] == list(range(16))
    assert DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9 and DT.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ == 12
    assert (IL.CU_TENSOR_MAP_INTERLEAVE_NONE, IL.CU_TENSOR_MAP_INTERLEAVE_16B, IL.CU_TENSOR_MAP_INTERLEAVE_32B) == (0, 1, 2)
    assert (SW.CU_TENSOR_MAP_SWIZZLE_NONE, SW.CU_TENSOR_MAP_SWIZZLE_32B, SW.CU_TENSOR_MAP_SWIZZLE_64B,
            SW.CU_TENSOR_MAP_SWIZZLE_128B, SW.CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) == (0, 1, 2, 3, 6)
    assert [int(m) for m in L2] == [0, 1, 2, 3] and [int(m) for m in OOB] == [0, 1]
    assert [SW(v).span_bytes for v in range(4)] == [0, 32, 64, 128]
    assert [SW(v).repeat_bytes for v in range(4)] == [0, 256, 512, 1024]
    assert [SW(v).wgmma_layout_type for v in range(4)] == [0, 3, 2, 1]
    assert str(SW.CU_TENSOR_MAP_SWIZZLE_128B.swizzle) == "Sw<3,4,3>" and SW.CU_TENSOR_MAP_SWIZZLE_NONE.swizzle is None
    assert SW.of_mode("INTER") is SW.CU_TENSOR_MAP_SWIZZLE_NONE and SW.of_mode("sw64") is SW.CU_TENSOR_MAP_SWIZZLE_64B


@pytest.mark.parametrize("name, expected", [
    ("u8", "UINT8"), ("s8", "UINT8"), ("e4m3", "UINT8"), ("e5m2", "UINT8"), ("float8_e4m3fn", "UINT8"),
    ("u16", "UINT16"), ("u32", "UINT32"), ("s32", "INT32"), ("u64", "UINT64"), ("s64", "INT64"),
    ("f16", "FLOAT16"), ("half", "FLOAT16"), ("f32", "FLOAT32"), ("f64", "FLOAT64"), ("bf16", "BFLOAT16"),
    ("f32_ftz", "FLOAT32_FTZ"), ("tf32", "TFLOAT32"), ("tf32_ftz", "TFLOAT32_FTZ"),
])
def test_tma_data_type(name, expected):
    assert tma_data_type(name).short == expected


def test_sub_byte_types_have_no_hopper_tma_type():
    with pytest.raises(TmaError, match=r"s4 \(4-bit\) has no TMA data type"):
        tma_data_type("s4")
    with pytest.raises(TmaError, match="unknown element type 'bogus'"):
        tma_data_type("bogus")


# ---------------------------------------------------------------------------------------------------------------
# Exact parameters
# ---------------------------------------------------------------------------------------------------------------

def test_bf16_row_major_k_major_sw128_128x64():
    smem = gmma_smem_layout("K", "SW128", "bf16", (128, 64))
    p = make_tma_params(ROW_MAJOR_4K, "bf16", smem)
    assert p.as_driver_args() == (9, 2, (4096, 4096), (8192,), (64, 128), (1, 1), 0, 3, 2, 0)
    assert p.data_type is DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 and p.swizzle is SW.CU_TENSOR_MAP_SWIZZLE_128B
    assert p.mode_order == (1, 0) and p.tma_coords((128, 64)) == (64, 128)
    assert (p.box_bytes, p.smem_row_pitch, p.smem_box_span, p.smem_alignment) == (16384, 128, 16384, 1024)
    assert p.swizzle.wgmma_layout_type == 1 and p.swizzle_mode.name == "SW128"
    assert str(p.smem_layout()) == "Sw<3,4,3> o 0 o (128,64):(64,1)"
    assert p.smem_box_layout == smem and p.dtype.name == "bf16"
    assert_one_copy_writes(p, smem, "bf16")


def test_mn_major_sw128_atoms_column_major_global():
    g = L((4096, 1024), (1, 4096))
    smem = gmma_smem_layout("MN", "SW128", "bf16", (64, 64))  # 8 (64,8) atoms along K
    assert str(smem) == "Sw<3,4,3> o 0 o ((64,1),(8,8)):((1,0),(64,512))"
    p = make_tma_params(g, "bf16", smem)
    assert p.as_driver_args() == (9, 2, (4096, 1024), (8192,), (64, 64), (1, 1), 0, 3, 2, 0)
    assert p.mode_order == (0, 1) and p.box_bytes == 8192
    assert_one_copy_writes(p, smem, "bf16")
    # The (64,8) atom itself is one box too.
    atom = make_tma_params(g, "bf16", gmma_smem_layout("MN", "SW128", "bf16", (64, 8)))
    assert atom.box_dims == (64, 8) and atom.box_bytes == 1024


def test_mn_major_128x64_tile_is_boxes_in_its_tiling_order():
    left = gmma_smem_layout("MN", "SW128", "bf16", (128, 64))  # MN atoms first: (64,8) boxes
    b = tma_boxes(COL_MAJOR_4K, "bf16", left)
    assert b.params.box_dims == (64, 8) and len(b.boxes) == 16 and b.expect_tx_bytes == 16384
    assert [(x.mode_offset, x.smem_offset_bytes) for x in b.boxes[:3]] == [((0, 0), 0), ((64, 0), 1024), ((0, 8), 2048)]
    right = gmma_smem_layout("MN", "SW128", "bf16", (128, 64), lc.LayoutRight)  # K atoms first: (64,64) boxes
    b = tma_boxes(COL_MAJOR_4K, "bf16", right)
    assert b.params.box_dims == (64, 64)
    assert [(x.mode_offset, x.smem_offset_bytes) for x in b.boxes] == [((0, 0), 0), ((64, 0), 8192)]


def test_fp8_k_major_sw128_128x128():
    g = L((8192, 4096), (4096, 1))
    smem = gmma_smem_layout("K", "SW128", "e4m3", (128, 128))
    p = make_tma_params(g, "e4m3", smem)
    assert p.as_driver_args() == (0, 2, (4096, 8192), (4096,), (128, 128), (1, 1), 0, 3, 2, 0)
    assert p.data_type is DT.CU_TENSOR_MAP_DATA_TYPE_UINT8 and p.dtype.name == "e4m3"
    assert p.box_bytes == 16384 and p.smem_alignment == 1024
    assert_one_copy_writes(p, smem, "e4m3")


def test_f32_no_swizzle_box():
    g = L((1024, 512), (512, 1))
    smem = L((32, 16), (16, 1))
    p = make_tma_params(g, "f32", smem, l2_promotion=L2.CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
    assert p.as_driver_args() == (7, 2, (512, 1024), (2048,), (16, 32), (1, 1), 0, 0, 3, 0)
    assert (p.box_bytes, p.smem_row_pitch, p.smem_alignment) == (2048, 64, TMA_SMEM_MIN_ALIGN)
    assert str(p.smem_layout()) == "(32,16):(16,1)"
    assert_one_copy_writes(p, smem, "f32")


def test_3d_global_with_a_stage_mode():
    g = L((512, 256, 4), (256, 1, 512 * 256))  # (M, K, L) row-major per batch
    tile = gmma_smem_layout("K", "SW128", "bf16", (128, 64))
    p = make_tma_params(g, "bf16", tile)
    assert p.as_driver_args() == (9, 3, (256, 512, 4), (512, 262144), (64, 128, 1), (1, 1, 1), 0, 3, 2, 0)
    assert p.mode_order == (1, 0, 2) and p.tma_coords((128, 64, 3)) == (64, 128, 3)
    # One stage of a 3-stage pipeline buffer: same map, the box starts 2·16 KiB in.
    stages = gmma_smem_layout("K", "SW128", "bf16", (128, 64, 3))
    s2 = stages(_, _, 2)
    p2 = make_tma_params(g, "bf16", s2)
    assert p2.as_driver_args() == p.as_driver_args() and p2.smem_offset_bytes == 32768
    assert_one_copy_writes(p2, s2, "bf16")
    # Two batch entries in one copy: the stage stride (16 KiB) is exactly 128 rows of 128 bytes.
    two = gmma_smem_layout("K", "SW128", "bf16", (128, 64, 2))
    p3 = make_tma_params(g, "bf16", two)
    assert p3.box_dims == (64, 128, 2) and p3.box_bytes == 32768
    assert_one_copy_writes(p3, two, "bf16")


def test_swizzled_rows_shorter_than_the_span_are_padded():
    # SW128 with 64-byte rows: TMA puts the rows 128 bytes apart (measured on H100), so this layout matches ...
    g = L((256, 256), (256, 1))
    padded = lc.parse("Sw<3,4,3> o 0 o (8,32):(64,1)")
    p = make_tma_params(g, "bf16", padded)
    assert p.box_dims == (32, 8) and p.box_bytes == 512 and p.smem_box_span == 1024
    assert_one_copy_writes(p, padded, "bf16")
    assert p.tma_write_address((0, 1)) == 144  # row 1 at byte 128, its first chunk swapped with chunk 1


def test_absolute_swizzle_any_128_aligned_base():
    smem = gmma_smem_layout("K", "SW128", "bf16", (64, 64))
    p = make_tma_params(ROW_MAJOR_4K, "bf16", smem, base=384)
    assert_one_copy_writes(p, smem, "bf16", base=384)
    assert p.tma_write_address((0, 0), dst=128) == 144  # phase follows the absolute address (H100)


def test_as_driver_args_and_cuda_bindings_args():
    drv = pytest.importorskip("cuda.bindings.driver")
    p = make_tma_params(ROW_MAJOR_4K, "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 64)))
    args = p.cuda_bindings_args(drv, 0x7F0000000000)
    assert args[0] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 and args[1:3] == (2, 0x7F0000000000)
    assert [int(x) for x in args[3]] == [4096, 4096] and [int(x) for x in args[4]] == [8192]
    assert [int(x) for x in args[5]] == [64, 128] and [int(x) for x in args[6]] == [1, 1]
    assert args[8] == drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    one_d = TmaParams(DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, (1000,), (), (64,), (1,))
    assert [int(x) for x in one_d.cuda_bindings_args(drv, 0)[4]] == [4000]  # dummy stride: see the docstring


def test_element_strides_scale_the_box():
    g = L((1024, 512), (512, 1))
    smem = L((32, 16), (16, 1))  # 16 rows loaded, every other row of 32
    p = make_tma_params(g, "f32", smem, element_strides=(1, 2))
    assert p.box_dims == (16, 64) and p.box_counts == (16, 32) and p.box_bytes == 2048


# ---------------------------------------------------------------------------------------------------------------
# Constraint violations, one per test (driver-level messages first, then derivation from layouts)
# ---------------------------------------------------------------------------------------------------------------

BF16 = DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
GOOD = dict(data_type=BF16, rank=2, global_dims=(256, 256), global_strides=(512,), box_dims=(64, 8),
            element_strides=(1, 1), interleave=0, swizzle=3, l2_promotion=2, oob_fill=0)
IL16_3D = dict(GOOD, rank=3, global_dims=(8, 256, 16), global_strides=(16, 4096), box_dims=(8, 8, 8),
               element_strides=(1, 1, 1), interleave=1, swizzle=0)
IL32_3D = dict(GOOD, rank=3, global_dims=(16, 256, 16), global_strides=(32, 8192), box_dims=(16, 8, 8),
               element_strides=(1, 1, 1), interleave=2, swizzle=1)

# (case, overrides of GOOD, message). Each is also refused by the real driver (test_driver_agrees_on_refusals).
VIOLATIONS = [
    ("rank 0", dict(rank=0, global_dims=(), global_strides=(), box_dims=(), element_strides=()),
     "tensor rank 0 is not in 1..5"),
    ("rank 6", dict(rank=6, global_dims=(256,) * 6, global_strides=(512,) * 5, box_dims=(64,) + (1,) * 5,
                    element_strides=(1,) * 6), "tensor rank 6 is not in 1..5"),
    ("interleave rank 2", dict(interleave=1, swizzle=0),
     "tensor rank 2 with CU_TENSOR_MAP_INTERLEAVE_16B: interleaved maps need rank 3..5"),
    ("global dim 0", dict(global_dims=(256, 0)), "global dim 1 is 0: each global dim must be in 1..2\\^32"),
    ("global dim 2^32+1", dict(global_dims=(256, 2 ** 32 + 1)),
     "global dim 1 is 4294967297: each global dim must be in 1..2\\^32"),
    ("stride 6932", dict(global_strides=(6932,)), "global stride 6932 bytes of dim 1 is not a multiple of 16"),
    ("stride 2^40", dict(global_strides=(2 ** 40,)), "global stride 1099511627776 bytes of dim 1 is not below 2\\^40"),
    ("interleave 32B stride 48", dict(IL32_3D, global_strides=(48, 8192)),
     r"global stride 48 bytes of dim 1 is not a multiple of 32 \(interleave 32B\)"),
    ("box dim 300", dict(box_dims=(64, 300)), "box dim 1 is 300: each box dim must be in 1..256"),
    ("box dim 0", dict(box_dims=(64, 0)), "box dim 1 is 0: each box dim must be in 1..256"),
    ("inner box 8 bytes", dict(box_dims=(4, 8), swizzle=0),
     r"inner box 8 bytes \(4 x 2-byte elements\) is not a multiple of 16"),
    ("inner box over the span", dict(box_dims=(128, 8)),
     r"inner box 256 bytes \(128 x 2-byte elements\) exceeds the 128-byte span of CU_TENSOR_MAP_SWIZZLE_128B"),
    ("inner box over the 64B span", dict(box_dims=(40, 8), swizzle=2),
     r"inner box 80 bytes \(40 x 2-byte elements\) exceeds the 64-byte span of CU_TENSOR_MAP_SWIZZLE_64B"),
    ("element stride 9", dict(element_strides=(1, 9)), "element stride 9 of dim 1 is not in 1..8"),
    ("element stride 0 of dim 0", dict(element_strides=(0, 1)), "element stride 0 of dim 0 is not in 1..8"),
    ("Blackwell swizzle", dict(swizzle=4),
     "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B is a Blackwell \\(sm_100\\+\\) swizzle mode"),
    ("packed data type", dict(data_type=13, box_dims=(128, 8), swizzle=0, global_strides=(256,)),
     "data type CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B is a packed sub-byte type for Blackwell"),
    ("NaN fill for UINT8 (fp8)", dict(data_type=0, box_dims=(128, 8), oob_fill=1),
     "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA needs a floating-point data type, not "
     "CU_TENSOR_MAP_DATA_TYPE_UINT8 \\(fp8 and int8 travel as UINT8"),
    ("NaN fill for INT32", dict(data_type=3, box_dims=(32, 8), oob_fill=1),
     "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA needs a floating-point data type, not "
     "CU_TENSOR_MAP_DATA_TYPE_INT32"),
]


@pytest.mark.parametrize("case, overrides, message", VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_driver_constraint(case, overrides, message):
    args = dict(GOOD, **overrides)
    with pytest.raises(TmaError, match="^cuTensorMapEncodeTiled: " + message):
        TmaParams(**args)
    with pytest.raises(TmaError, match=message):
        check_tma_params(*args.values())


def test_good_baselines_pass():
    for args in (GOOD, IL16_3D, IL32_3D):
        TmaParams(**args)


def test_interleave_32b_requires_swizzle_32b():
    # Documented; the H100 driver (580) accepted it anyway, so it is not in VIOLATIONS.
    with pytest.raises(TmaError, match="CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B, not "
                                       "CU_TENSOR_MAP_SWIZZLE_128B"):
        TmaParams(**dict(IL32_3D, swizzle=3))


def test_array_lengths_must_match_rank():
    with pytest.raises(TmaError, match="global_strides has 2 entries, rank 2 needs 1"):
        TmaParams(**dict(GOOD, global_strides=(512, 512)))
    with pytest.raises(TmaError, match="box_dims has 1 entries, rank 2 needs 2"):
        TmaParams(**dict(GOOD, box_dims=(64,)))


def test_enum_values_out_of_range():
    with pytest.raises(TmaError, match="swizzle 7 is not a TmaSwizzle value"):
        TmaParams(**dict(GOOD, swizzle=7))
    with pytest.raises(TmaError, match="data type 16 is not a TmaDataType value"):
        TmaParams(**dict(GOOD, data_type=16))


def test_global_address_alignment():
    assert check_global_address(0x7F0000000010) == 0x7F0000000010
    with pytest.raises(TmaError, match="^cuTensorMapEncodeTiled: global address 0x7f0000000008 is not 16-byte aligned$"):
        check_global_address(0x7F0000000008)
    with pytest.raises(TmaError, match=r"global address 0x7f0000000010 is not 32-byte aligned \(interleave 32B\)"):
        check_global_address(0x7F0000000010, IL.CU_TENSOR_MAP_INTERLEAVE_32B)


def test_make_tma_params_6932_byte_stride():
    g = L((1024, 3466), (3466, 1))  # bf16 rows of 6932 bytes: not padded to 16
    with pytest.raises(TmaError, match="cuTensorMapEncodeTiled: global stride 6932 bytes of dim 1 is not a multiple of 16$"):
        make_tma_params(g, "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 64)))


def test_swizzle_mismatch_64_byte_rows_under_sw128():
    # Dense 64-byte rows with a 128B swizzle: TMA would put those rows 128 bytes apart.
    smem = lc.parse("Sw<3,4,3> o 0 o (8,32):(32,1)")
    with pytest.raises(TmaError) as e:
        make_tma_params(L((256, 256), (256, 1)), "bf16", smem)
    msg = str(e.value)
    assert msg.startswith("make_tma_params((256,256):(256,1), 'bf16', Sw<3,4,3> o 0 o (8,32):(32,1)): the smem layout "
                          "is not what TMA writes: TMA writes Sw<3,4,3> o 0 o (8,32):(64,1)")
    assert "CU_TENSOR_MAP_SWIZZLE_128B: rows 64 bytes long, 128 bytes apart" in msg
    assert "at coordinate (1, 0) the smem layout has byte 64, TMA writes byte 144" in msg


def test_swizzle_mismatch_with_the_requested_map_swizzle():
    smem = gmma_smem_layout("K", "SW64", "bf16", (64, 32))
    with pytest.raises(TmaError, match="the TMA swizzle CU_TENSOR_MAP_SWIZZLE_128B does not match the smem layout's "
                                       r"swizzle Sw<2,4,3> \(CU_TENSOR_MAP_SWIZZLE_64B\): the TMA swizzle and the "
                                       "wgmma descriptor swizzle must change together"):
        make_tma_params(ROW_MAJOR_4K, "bf16", smem, swizzle=SW.CU_TENSOR_MAP_SWIZZLE_128B)
    with pytest.raises(TmaError, match="the TMA swizzle CU_TENSOR_MAP_SWIZZLE_64B does not match the smem layout's "
                                       "swizzle no swizzle"):
        make_tma_params(ROW_MAJOR_4K, "bf16", L((8, 64), (64, 1)), swizzle="SW64")


def test_mn_major_smem_for_a_k_contiguous_global():
    smem = gmma_smem_layout("MN", "SW128", "bf16", (64, 64))
    with pytest.raises(TmaError, match="the smem tile is contiguous along mode 0 but the global tensor along mode 1, "
                                       r"and TMA does not transpose \(K-major vs MN-major\)$"):
        make_tma_params(ROW_MAJOR_4K, "bf16", smem)


def test_tile_wider_than_the_swizzle_span_needs_tma_boxes():
    smem = gmma_smem_layout("K", "SW128", "bf16", (128, 128))
    with pytest.raises(TmaError, match="the smem tile is 256 bytes along the contiguous global mode 1, more than one "
                                       "128-byte row of CU_TENSOR_MAP_SWIZZLE_128B: this tile needs several TMA "
                                       r"copies; tma_boxes\(\) splits it into 2 boxes of \(64, 128\)"):
        make_tma_params(ROW_MAJOR_4K, "bf16", smem)


def test_box_dim_over_256_needs_tma_boxes():
    smem = gmma_smem_layout("K", "SW128", "bf16", (512, 64))
    with pytest.raises(TmaError, match=r"box dim 1 would be 512, over 256: this tile needs several TMA copies; "
                                       r"tma_boxes\(\) splits it into 2 boxes of \(64, 256\)"):
        make_tma_params(ROW_MAJOR_4K, "bf16", smem)


def test_non_dense_tile_points_to_tma_boxes():
    smem = gmma_smem_layout("K", "INTER", "f32", (64, 32))  # INTER: 16-byte core-matrix columns far apart
    with pytest.raises(TmaError, match=r"it is 8 TMA boxes of \(4, 64\): use tma_boxes\(\)$"):
        make_tma_params(ROW_MAJOR_4K, "f32", smem)


def test_no_contiguous_global_mode():
    with pytest.raises(TmaError, match=r"no global mode has stride 1 \(strides \(8192,2\) elements\): TMA's dim 0 "
                                       "must be contiguous"):
        make_tma_params(L((4096, 4096), (8192, 2)), "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 64)))


def test_hierarchical_global_mode():
    with pytest.raises(TmaError, match=r"global mode 0 \(\(64,64\):\(4096,8192\)\) coalesces to \(64,64\):\(4096,8192\), "
                                       "not one strided dimension"):
        make_tma_params(L(((64, 64), 4096), ((4096, 8192), 1)), "bf16", L((8, 64), (64, 1)))


def test_misaligned_box_destination():
    with pytest.raises(TmaError, match="the box starts at smem byte 16, but TMA destinations must be 128-byte aligned"):
        make_tma_params(ROW_MAJOR_4K, "bf16", lc.parse("Sw<3,4,3> o 8 o (8,64):(64,1)"))


def test_smem_stage_mode_must_be_sliced_out():
    with pytest.raises(TmaError, match=r"the smem layout has 3 modes but the global tensor 2: extra smem modes of "
                                       r"sizes \(3,\) have no global dim \(slice a pipeline-stage mode out first"):
        make_tma_params(ROW_MAJOR_4K, "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 64, 3)))


def test_element_index_swizzle_is_not_a_tma_swizzle():
    with pytest.raises(TmaError, match=r"the smem layout's swizzle Sw<3,3,3> is not a TMA swizzle"):
        make_tma_params(ROW_MAJOR_4K, "bf16", lc.parse("Sw<3,3,3> o 0 o (8,64):(64,1)"))


def test_nan_fill_for_fp8_through_make_tma_params():
    smem = gmma_smem_layout("K", "SW128", "e4m3", (128, 128))
    with pytest.raises(TmaError, match="fp8 and int8 travel as UINT8"):
        make_tma_params(L((8192, 4096), (4096, 1)), "e4m3", smem,
                        oob_fill=OOB.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    ok = make_tma_params(ROW_MAJOR_4K, "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 64)),
                         oob_fill=OOB.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    assert ok.oob_fill == 1


def test_transposed_tile_has_no_boxes():
    with pytest.raises(TmaError, match="no TMA box fits this tile: the smem tile is contiguous along mode 0, the "
                                       "global tensor along mode 1"):
        tma_boxes(ROW_MAJOR_4K, "bf16", gmma_smem_layout("MN", "SW128", "bf16", (128, 64)))


def test_tma_errors_are_layout_errors():
    assert issubclass(TmaError, lc.LayoutError) and issubclass(TmaError, ValueError)


# ---------------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------------

# (dtype, bits) pairs GMMA atoms exist for, with every swizzle (64-bit only fills 16-byte rows evenly too).
DTYPES = ["bf16", "f16", "e4m3", "e5m2", "s8", "u8", "f32", "tf32", "s32"]
SWIZZLES = ["INTER", "SW32", "SW64", "SW128"]
BITS = {"bf16": 16, "f16": 16, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "f32": 32, "tf32": 32, "s32": 32}
WIDTH = {"INTER": 16, "SW32": 32, "SW64": 64, "SW128": 128}


@st.composite
def one_box_tilings(draw):
    """A GMMA atom tiling that one TMA copy writes: one atom wide along the contiguous dim, ≤ 256 along the other,
    over a global tensor of matching major-ness, optionally batched."""
    major = draw(st.sampled_from(["K", "MN"]))
    sw = draw(st.sampled_from(SWIZZLES))
    dt = draw(st.sampled_from(DTYPES))
    w = WIDTH[sw] * 8 // BITS[dt]  # elements per swizzle row
    rows = 8 * draw(st.integers(1, 8))
    batched = draw(st.booleans())
    outer = draw(st.integers(1, 64)) * 8
    inner = w * draw(st.integers(1, 8))
    if major == "K":
        tile_shape, shape, stride = (rows, w), (outer, inner), (inner, 1)
    else:
        tile_shape, shape, stride = (w, rows), (inner, outer), (1, inner)
    if batched:
        shape, stride = shape + (3,), stride + (inner * outer,)
    return L(shape, stride), dt, gmma_smem_layout(major, sw, dt, tile_shape)


# The two whole-tile checks below walk every element of every drawn tile (up to 4096): at most 200 examples a run
# (the dev profile's 100 stay), which still meets each major × swizzle × element width (8, 16, 32 bits; × order) a
# few times on average; the CI profile is not derandomized, so each run draws new ones.
WHOLE_TILE = settings(max_examples=min(200, settings.default.max_examples))


@given(one_box_tilings(), st.integers(0, 15))
@WHOLE_TILE
def test_one_copy_writes_the_gmma_tile(case, base_units):
    g, dt, smem = case
    base = 128 * base_units  # any 128-aligned base: both sides swizzle the absolute address
    p = make_tma_params(g, dt, smem, base=base)
    assert p.box_bytes == lc.size(smem) * BITS[dt] // 8
    assert_one_copy_writes(p, smem, dt, base)
    # smem_layout() is the same function as the write model.
    model = p.smem_layout()
    for c in coords(smem):
        padded = c + (0,) * (p.rank - len(c))
        assert byte_address(model, dt, padded, base) == byte_address(smem, dt, c, base)


@st.composite
def multi_box_tilings(draw):
    major = draw(st.sampled_from(["K", "MN"]))
    sw = draw(st.sampled_from(SWIZZLES))
    dt = draw(st.sampled_from(DTYPES))
    w = WIDTH[sw] * 8 // BITS[dt]
    rows = 8 * draw(st.integers(1, 40))
    cols = w * draw(st.integers(1, 3))
    assume(rows * cols <= 4096)
    order = draw(st.sampled_from([lc.LayoutLeft, lc.LayoutRight]))
    if major == "K":
        tile_shape, g = (rows, cols), L((1024, 1024), (1024, 1))
    else:
        tile_shape, g = (cols, rows), L((1024, 1024), (1, 1024))
    return g, dt, gmma_smem_layout(major, sw, dt, tile_shape, order)


@given(multi_box_tilings())
@WHOLE_TILE
def test_tma_boxes_cover_the_tile_exactly_once(case):
    g, dt, tile = case
    b = tma_boxes(g, dt, tile)
    p = b.params
    seen = set()
    box_coords = list(itertools.product(*[range(n) for n in p.box_counts]))
    for box in b.boxes:
        assert (box.smem_offset_bytes % TMA_SMEM_MIN_ALIGN) == 0
        for tc in box_coords:  # driver order
            mode_c = [0] * p.rank
            for d, i in enumerate(p.mode_order):
                mode_c[i] = tc[d]
            tile_c = tuple(o + c for o, c in zip(box.mode_offset, mode_c))
            addr = p.tma_write_address(tc, box.smem_offset_bytes)
            assert addr == byte_address(tile, dt, tile_c), (box, tc)
            seen.add(tile_c)
    assert len(seen) == lc.size(tile) == len(b.boxes) * len(box_coords)
    assert b.expect_tx_bytes == lc.size(tile) * BITS[dt] // 8


@given(st.sampled_from([0, 1, 2, 3]), st.sampled_from([1, 2, 4, 8]), st.integers(1, 4), st.data())
def test_smem_layout_matches_write_model(swz, esize, rank, data):
    dt = {1: DT.CU_TENSOR_MAP_DATA_TYPE_UINT8, 2: DT.CU_TENSOR_MAP_DATA_TYPE_UINT16,
          4: DT.CU_TENSOR_MAP_DATA_TYPE_UINT32, 8: DT.CU_TENSOR_MAP_DATA_TYPE_UINT64}[esize]
    span = SW(swz).span_bytes or 256
    box0 = 16 * data.draw(st.integers(1, span // 16)) // esize
    boxes = (box0,) + tuple(data.draw(st.integers(1, 6)) for _ in range(rank - 1))
    p = TmaParams(dt, rank, (1024,) * rank, tuple(16 * 1024 ** d for d in range(1, rank)), boxes, (1,) * rank,
                  swizzle=swz)
    model = p.smem_layout()
    for c in itertools.product(*[range(n) for n in boxes]):
        assert byte_address(model, p.dtype, c) == p.tma_write_address(c)


# ---------------------------------------------------------------------------------------------------------------
# On a GPU: the real driver and the real TMA engine
# ---------------------------------------------------------------------------------------------------------------

def _driver():
    from cuda.bindings import driver as cu

    def ck(r):
        r = r if isinstance(r, tuple) else (r,)
        assert int(r[0]) == 0, r
        return r[1] if len(r) == 2 else r[1:] if len(r) > 2 else None

    ck(cu.cuInit(0))
    ctx = ck(cu.cuDevicePrimaryCtxRetain(ck(cu.cuDeviceGet(0))))
    ck(cu.cuCtxSetCurrent(ctx))
    return cu, ck


def _encode_raw(cu, addr, a):
    strides = a["global_strides"] or (512,)  # cuda-bindings passes [] as NULL, which the driver refuses
    r = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType(int(a["data_type"])), a["rank"], addr, [cu.cuuint64_t(x) for x in a["global_dims"]],
        [cu.cuuint64_t(x) for x in strides], [cu.cuuint32_t(x) for x in a["box_dims"]],
        [cu.cuuint32_t(x) for x in a["element_strides"]], cu.CUtensorMapInterleave(a["interleave"]),
        cu.CUtensorMapSwizzle(a["swizzle"]), cu.CUtensorMapL2promotion(a["l2_promotion"]),
        cu.CUtensorMapFloatOOBfill(a["oob_fill"]))
    return int(r[0])


@pytest.mark.gpu
def test_driver_agrees_on_refusals():
    cu, ck = _driver()
    ptr = int(ck(cu.cuMemAlloc(1 << 20)))
    try:
        for args in (GOOD, IL16_3D, IL32_3D):
            assert _encode_raw(cu, ptr, args) == 0
        for case, overrides, _msg in VIOLATIONS:
            args = dict(GOOD, **overrides)
            if args["rank"] > 5 or args["rank"] == 0:
                continue  # cuda-bindings refuses such arrays before the driver sees them
            assert _encode_raw(cu, ptr, args) != 0, case
        assert _encode_raw(cu, ptr + 8, GOOD) != 0  # check_global_address's 16 bytes
        assert _encode_raw(cu, ptr + 16, IL32_3D) != 0  # 32 with interleave 32B
        assert _encode_raw(cu, ptr, dict(GOOD, global_dims=(256, 2 ** 32))) == 0  # the limits are inclusive/exclusive
        assert _encode_raw(cu, ptr, dict(GOOD, global_strides=(2 ** 40 - 16,))) == 0
    finally:
        cu.cuMemFree(ptr)


_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 1024 .b8 dsmem[];
.shared .align 8 .b64 mbar;
.visible .entry tma_probe(.param .align 64 .b8 tmap[128], .param .u64 p_out, .param .u64 p_copies,
                          .param .u32 p_ncopies, .param .u32 p_tx, .param .u32 p_total)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ntid.x;
    shl.b32 %r1, %r1, 2;
    ld.param.u32 %r2, [p_total];
    mov.u64 %rd5, dsmem;
    cvt.u32.u64 %r3, %rd5;
    mov.u64 %rd5, mbar;
    cvt.u32.u64 %r4, %rd5;
    mov.u32 %r7, -1;
    shl.b32 %r5, %r0, 2;
FILL:
    setp.ge.u32 %p0, %r5, %r2;
    @%p0 bra FILLED;
    add.u32 %r6, %r3, %r5;
    st.shared.u32 [%r6], %r7;
    add.u32 %r5, %r5, %r1;
    bra FILL;
FILLED:
    setp.eq.u32 %p1, %r0, 0;
    @!%p1 bra SYNC0;
    mbarrier.init.shared::cta.b64 [%r4], 1;
    fence.mbarrier_init.release.cluster;
SYNC0:
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @!%p1 bra WAIT;
    ld.param.u32 %r9, [p_tx];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], %r9;
    mov.u64 %rd0, tmap;
    cvta.param.u64 %rd0, %rd0;
    ld.param.u64 %rd1, [p_copies];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r10, [p_ncopies];
    mov.u32 %r11, 0;
COPY:
    setp.ge.u32 %p2, %r11, %r10;
    @%p2 bra WAIT;
    ld.global.u32 %r12, [%rd1];
    ld.global.u32 %r13, [%rd1+4];
    ld.global.u32 %r14, [%rd1+8];
    ld.global.u32 %r15, [%rd1+12];
    ld.global.u32 %r16, [%rd1+16];
    ld.global.u32 %r17, [%rd1+20];
    add.u32 %r12, %r12, %r3;
    cp.async.bulk.tensor.RANKd.shared::cluster.global.mbarrier::complete_tx::bytes [%r12], [%rd0, {COORDS}], [%r4];
    add.u64 %rd1, %rd1, 24;
    add.u32 %r11, %r11, 1;
    bra COPY;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r4], 0;
    @!%p3 bra WAIT;
    bar.sync 0;
    ld.param.u64 %rd2, [p_out];
    cvta.to.global.u64 %rd2, %rd2;
    shl.b32 %r5, %r0, 2;
DUMP:
    setp.ge.u32 %p0, %r5, %r2;
    @%p0 bra DONE;
    add.u32 %r6, %r3, %r5;
    ld.shared.u32 %r18, [%r6];
    cvt.u64.u32 %rd3, %r5;
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r18;
    add.u32 %r5, %r5, %r1;
    bra DUMP;
DONE:
    ret;
}
"""


def _tma_load_smem(cu, ck, p: TmaParams, global_bytes: bytes, copies):
    """Run TMA copies ``[(dst_byte, driver_coords), ...]`` of map ``p`` over ``global_bytes``; return the smem bytes."""
    import numpy as np

    coords_ptx = ", ".join(f"%r{13 + d}" for d in range(p.rank))
    ptx = _PTX.replace("RANK", str(p.rank)).replace("COORDS", coords_ptx)
    mod = ck(cu.cuModuleLoadData(ptx.encode() + b"\0"))
    fn = ck(cu.cuModuleGetFunction(mod, b"tma_probe"))
    total = max(dst + p.smem_box_span for dst, _c in copies)
    total = -(-total // 1024) * 1024
    ck(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, total))
    table = np.zeros((len(copies), 6), dtype=np.int32)
    for j, (dst, c) in enumerate(copies):
        table[j, 0] = dst
        table[j, 1:1 + len(c)] = c
    dg = ck(cu.cuMemAlloc(len(global_bytes)))
    dc = ck(cu.cuMemAlloc(table.nbytes))
    do = ck(cu.cuMemAlloc(total))
    try:
        ck(cu.cuMemcpyHtoD(dg, global_bytes, len(global_bytes)))
        ck(cu.cuMemcpyHtoD(dc, table.tobytes(), table.nbytes))
        tm = ck(cu.cuTensorMapEncodeTiled(*p.cuda_bindings_args(cu, int(dg))))
        params = ((tm, int(do), int(dc), len(copies), len(copies) * p.box_bytes, total),
                  (None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32))
        ck(cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, total, 0, params, 0))
        ck(cu.cuCtxSynchronize())
        out = bytearray(total)
        ck(cu.cuMemcpyDtoH(out, do, total))
        return bytes(out)
    finally:
        for ptr in (dg, dc, do):
            cu.cuMemFree(ptr)
        cu.cuModuleUnload(mod)


def _check_on_gpu(cu, ck, g, dt, tile, base=0):
    """TMA-load ``tile`` (one copy or tma_boxes) from a global tensor whose elements carry their own offset as a tag,
    and check every element sits at ``byte_address(tile, dt, c, base)`` in shared memory."""
    try:
        p = make_tma_params(g, dt, tile, base=base)
        copies = [(base + p.smem_offset_bytes, p.tma_coords((0,) * p.rank), (0,) * p.rank)]
    except TmaError:
        b = tma_boxes(g, dt, tile, base=base)
        p = b.params
        copies = [(base + x.smem_offset_bytes, p.tma_coords(x.mode_offset), x.mode_offset) for x in b.boxes]
    esize = p.elem_bytes
    n_elems = lc.cosize(g)
    passes = 1 if 256 ** esize >= n_elems else 2
    for k in range(passes):  # 1-byte types need two passes to tag every element uniquely
        tags = [(i >> (8 * esize * k)) & ((1 << (8 * esize)) - 1) for i in range(n_elems)]
        data = b"".join(t.to_bytes(esize, "little") for t in tags)
        smem = _tma_load_smem(cu, ck, p, data, [(dst, c) for dst, c, _o in copies])
        for c in coords(tile):
            off = g(tuple(c) + (0,) * (p.rank - len(c)))
            addr = byte_address(tile, dt, c, base)
            got = int.from_bytes(smem[addr:addr + esize], "little")
            assert got == tags[off], (dt, str(tile), c, addr)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["K SW128 bf16", "MN SW128 bf16", "K SW64 bf16", "MN SW32 f32", "K SW128 e4m3",
                                  "f32 plain", "SW128 64-byte rows", "K SW128 bf16 at 384", "K SW128 bf16 128x128",
                                  "MN SW128 bf16 128x64 boxes", "K INTER bf16 boxes", "3-D stage"])
def test_tma_engine_writes_what_byte_address_says(name):
    cu, ck = _driver()
    k_g, mn_g = L((256, 256), (256, 1)), L((256, 256), (1, 256))
    cases = {
        "K SW128 bf16": (k_g, "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 64)), 0),
        "MN SW128 bf16": (mn_g, "bf16", gmma_smem_layout("MN", "SW128", "bf16", (64, 64)), 0),
        "K SW64 bf16": (k_g, "bf16", gmma_smem_layout("K", "SW64", "bf16", (64, 32)), 0),
        "MN SW32 f32": (mn_g, "f32", gmma_smem_layout("MN", "SW32", "f32", (8, 32)), 0),
        "K SW128 e4m3": (k_g, "e4m3", gmma_smem_layout("K", "SW128", "e4m3", (64, 128)), 0),
        "f32 plain": (L((64, 96), (96, 1)), "f32", L((16, 12), (12, 1)), 0),
        "SW128 64-byte rows": (k_g, "bf16", lc.ComposedLayout(lc.Swizzle(3, 4, 3), 0, L((16, 32), (64, 1))), 0),
        "K SW128 bf16 at 384": (k_g, "bf16", gmma_smem_layout("K", "SW128", "bf16", (64, 64)), 384),
        "K SW128 bf16 128x128": (k_g, "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 128)), 0),
        "MN SW128 bf16 128x64 boxes": (mn_g, "bf16", gmma_smem_layout("MN", "SW128", "bf16", (128, 64)), 0),
        "K INTER bf16 boxes": (k_g, "bf16", gmma_smem_layout("K", "INTER", "bf16", (64, 16)), 0),
        "3-D stage": (L((64, 64, 3), (64, 1, 4096)), "bf16", gmma_smem_layout("K", "SW128", "bf16", (64, 64, 2)), 0),
    }
    _check_on_gpu(cu, ck, *cases[name])


@pytest.mark.gpu
def test_tma_engine_element_strides():
    """Element strides (1,2) and (1,3): the loaded rows land densely, ceil(box/stride) of them, and expect-tx is
    ``box_bytes`` (a wrong count would hang or finish early)."""
    cu, ck = _driver()
    g = L((64, 96), (96, 1))
    data = b"".join(i.to_bytes(4, "little") for i in range(64 * 96))
    for es, rows in ((2, 16), (3, 6)):
        p = make_tma_params(g, "f32", L((rows, 16), (16, 1)), element_strides=(1, es))
        assert p.box_dims == (16, rows * es) and p.box_counts == (16, rows) and p.box_bytes == rows * 64
        smem = _tma_load_smem(cu, ck, p, data, [(0, (0, 0))])
        for m in range(rows):
            for k in range(16):
                a = byte_address(p.smem_box_layout, "f32", (m, k))
                assert int.from_bytes(smem[a:a + 4], "little") == g((es * m, k))
