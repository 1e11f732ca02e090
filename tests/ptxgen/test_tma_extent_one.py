"""TMA over global tensors with modes of extent 1 (issue 16, item 6): single rows (1, N), single columns (M, 1), (1, 1)
and rank-3 tensors with an extent-1 mode anywhere, whatever stride torch reports for that mode.

An extent-1 mode's only coordinate is 0, so its stride never moves the address: ``make_tma_params`` may make it TMA's
dim 0 (a column read into a row-major box) and gives it, at a later dim, the dense stride of the dims before it.
Every other box element along such a mode is out of bounds: TMA loads zeros there and a store skips it. Checked
here: the exact TmaParams, the driver's documented constraints on the encoder's arguments, the smem write model, the
interpreter on examples/tma_copy.tile against numpy (out-of-bounds fill included), the launcher's map derivation
for torch-like strides without a device, and (``-m gpu``) the real driver and TMA engine.
"""
from __future__ import annotations

import itertools
import pathlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import layoutc as lc
from layoutc import Layout as L
from layoutc.hopper import byte_address, gmma_smem_layout
from layoutc.hopper.tma import (
    TMA_MAX_BOX_DIM, TMA_MAX_ELEMENT_STRIDE, TMA_MAX_RANK, TmaError, check_tma_params, make_tma_params, tma_boxes,
)
from ptxgen.interp import interpret
from ptxgen.ir.text import parse_module
from ptxgen.runtime import LaunchError, jit
from ptxgen.runtime.launcher import encode_tensor_map

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
K128 = gmma_smem_layout("K", "SW128", "bf16", (128, 64))      # Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))
MN128 = gmma_smem_layout("MN", "SW128", "bf16", (64, 64))
PLAIN = L((16, 256), (256, 1))                                # tma_copy.tile's box
BOX3 = L((2, 8, 64), (64, 128, 1))                            # rank 3: mode 2 innermost, then modes 0 and 1

# name: (global layout, dtype, smem box, mode_order, global_dims, global_strides, box_dims)
CASES = {
    # (1, N) rows: the extent-1 mode M is driver dim 1 with the dense stride N·2 bytes, whatever torch says
    "row (1,4096)": (L((1, 4096), (4096, 1)), "bf16", K128, (1, 0), (4096, 1), (8192,), (64, 128)),
    "row slice of a (.,8192) matrix": (L((1, 4096), (8192, 1)), "bf16", K128, (1, 0), (4096, 1), (8192,), (64, 128)),
    "row stride 0": (L((1, 4096), (0, 1)), "bf16", K128, (1, 0), (4096, 1), (8192,), (64, 128)),
    "row stride 2^50": (L((1, 4096), (2 ** 50, 1)), "bf16", K128, (1, 0), (4096, 1), (8192,), (64, 128)),
    "row (1,300) f32": (L((1, 300), (300, 1)), "f32", PLAIN, (1, 0), (300, 1), (1200,), (256, 16)),
    # (M, 1) columns: the extent-1 mode K is driver dim 0 (the box is K-contiguous), M strides by the row pitch
    "column, 16-byte pitch": (L((4096, 1), (8, 1)), "bf16", K128, (1, 0), (1, 4096), (16,), (64, 128)),
    "column x[:, :1] of (M,4096)": (L((4096, 1), (4096, 1)), "bf16", K128, (1, 0), (1, 4096), (8192,), (64, 128)),
    "column stride 0 along K": (L((4096, 1), (8, 0)), "bf16", K128, (1, 0), (1, 4096), (16,), (64, 128)),
    "column (20,1) f32 pitched": (L((20, 1), (4, 1)), "f32", PLAIN, (1, 0), (1, 20), (16,), (256, 16)),
    # (1, 1): both modes extent 1, the box's contiguous mode is dim 0
    "(1,1)": (L((1, 1), (1, 1)), "f32", PLAIN, (1, 0), (1, 1), (16,), (256, 16)),
    "(1,1) huge strides": (L((1, 1), (2 ** 45, 2 ** 46)), "f32", PLAIN, (1, 0), (1, 1), (16,), (256, 16)),
    # MN-major boxes over column-major globals (mode 0 contiguous)
    "column-major (64,1)": (L((64, 1), (1, 64)), "bf16", MN128, (0, 1), (64, 1), (128,), (64, 64)),
    "column-major row (1,N), ld 8": (L((1, 4096), (1, 8)), "bf16", MN128, (0, 1), (1, 4096), (16,), (64, 64)),
    # rank 3, an extent-1 mode in every position
    "(1,M,N)": (L((1, 100, 64), (6400, 64, 1)), "f32", BOX3, (2, 0, 1), (64, 1, 100), (256, 256), (64, 2, 8)),
    "(1,M,N) batch stride 0": (L((1, 100, 64), (0, 64, 1)), "f32", BOX3, (2, 0, 1), (64, 1, 100), (256, 256),
                               (64, 2, 8)),
    "(B,1,N)": (L((3, 1, 64), (64, 64, 1)), "f32", BOX3, (2, 0, 1), (64, 3, 1), (256, 768), (64, 2, 8)),
    "(B,M,1) pitched": (L((3, 100, 1), (400, 4, 1)), "f32", BOX3, (2, 0, 1), (1, 3, 100), (1600, 16), (64, 2, 8)),
    "(1,M,1)": (L((1, 100, 1), (7, 4, 1)), "f32", BOX3, (2, 0, 1), (1, 1, 100), (16, 16), (64, 2, 8)),
    "(1,1,1)": (L((1, 1, 1), (1, 1, 1)), "f32", BOX3, (2, 0, 1), (1, 1, 1), (16, 16), (64, 2, 8)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_exact_params(name):
    g, dt, box, order, dims, strides, box_dims = CASES[name]
    p = make_tma_params(g, dt, box)
    assert (p.mode_order, p.global_dims, p.global_strides, p.box_dims) == (order, dims, strides, box_dims)
    assert p.rank == lc.rank(g) and p.element_strides == (1,) * p.rank and p.smem_box_layout == box


@pytest.mark.parametrize("name", list(CASES))
def test_one_copy_writes_the_box(name):
    """The write model does not depend on the global extents: every box coordinate lands where the smem layout
    says (the out-of-bounds ones too, with zeros)."""
    g, dt, box, *_ = CASES[name]
    p = make_tma_params(g, dt, box)
    inner = box.inner if isinstance(box, lc.ComposedLayout) else box
    for c in itertools.product(*[range(lc.size(m)) for m in lc.modes(inner)]):
        assert byte_address(box, dt, c) == p.tma_write_address(p.tma_coords(c)), c


def _documented_constraints(args) -> None:
    """cuTensorMapEncodeTiled's documented rules (CUDA driver API, tensor map object management), spelled out here
    independently of check_tma_params: rank 1..5; globalDim 1..2^32; rank-1 globalStrides, each a multiple of 16 and
    below 2^40; boxDim 1..256 with boxDim[0]·elementSize a multiple of 16 and, with a swizzle, within its span;
    elementStrides 1..8."""
    data_type, rank, dims, strides, box, estrides, interleave, swizzle, _l2, _oob = args
    esize = data_type.bits // 8
    assert 1 <= rank <= TMA_MAX_RANK
    assert len(dims) == len(box) == len(estrides) == rank and len(strides) == rank - 1
    assert all(1 <= d <= 2 ** 32 for d in dims)
    assert all(s % 16 == 0 and 0 < s < 2 ** 40 for s in strides)
    assert all(1 <= b <= TMA_MAX_BOX_DIM for b in box)
    assert (box[0] * esize) % 16 == 0
    assert swizzle.span_bytes == 0 or box[0] * esize <= swizzle.span_bytes
    assert all(1 <= e <= TMA_MAX_ELEMENT_STRIDE for e in estrides)
    assert int(interleave) == 0


@pytest.mark.parametrize("name", list(CASES))
def test_encoder_arguments_meet_the_drivers_constraints(name):
    g, dt, box, *_ = CASES[name]
    p = make_tma_params(g, dt, box)
    args = p.as_driver_args()
    _documented_constraints(args)
    check_tma_params(*args)   # the project's validator agrees


@pytest.mark.parametrize("name", list(CASES))
def test_extent_one_dims_carry_the_dense_stride(name):
    """A driver dim of extent 1 past dim 0 carries the bytes the dims before it span, rounded up to 16: what a dense
    tensor in driver order would have there (the stride is never used to address memory)."""
    g, dt, box, *_ = CASES[name]
    p = make_tma_params(g, dt, box)
    reach = p.global_dims[0] * p.elem_bytes
    for d in range(1, p.rank):
        stride = p.global_strides[d - 1]
        if p.global_dims[d] == 1:
            assert stride == -(-reach // 16) * 16, (d, stride, reach)
        reach = max(reach, stride * p.global_dims[d])


def test_cuda_bindings_arguments_of_a_row_and_a_column():
    drv = pytest.importorskip("cuda.bindings.driver")
    for g, dims, strides in ((L((1, 4096), (12345, 1)), [4096, 1], [8192]), (L((4096, 1), (8, 77)), [1, 4096], [16])):
        args = make_tma_params(g, "bf16", K128).cuda_bindings_args(drv, 0x7F0000000000)
        assert args[0] == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 and args[1:3] == (2, 0x7F0000000000)
        assert [int(x) for x in args[3]] == dims and [int(x) for x in args[4]] == strides
        assert [int(x) for x in args[5]] == [64, 128] and [int(x) for x in args[6]] == [1, 1]


@given(stride=st.integers(-(2 ** 62), 2 ** 62), extent=st.integers(1, 2 ** 20))
def test_the_stride_of_an_extent_one_mode_is_irrelevant(stride, extent):
    """Any stride torch may report for a size-1 dim (negative, 0, huge) gives the same map."""
    row = make_tma_params(L((1, 64 * extent), (stride, 1)), "bf16", K128)
    assert row == make_tma_params(L((1, 64 * extent), (64 * extent, 1)), "bf16", K128)
    column = make_tma_params(L((extent, 1), (8, stride)), "bf16", K128)
    assert column == make_tma_params(L((extent, 1), (8, 1)), "bf16", K128)


def test_an_unpadded_column_names_its_row_pitch():
    """A contiguous (M, 1) bf16 column has rows 2 bytes apart: TMA cannot walk that, whichever dim 0 it took."""
    with pytest.raises(TmaError) as info:
        make_tma_params(L((4096, 1), (1, 1)), "bf16", K128)
    assert str(info.value) == ("make_tma_params((4096,1):(1,1), 'bf16', Sw<3,4,3> o 0 o "
                               "((8,16),(64,1)):((64,512),(1,0))): cuTensorMapEncodeTiled: global stride 2 bytes of "
                               "dim 1 is not a multiple of 16")
    with pytest.raises(TmaError, match="global stride 2 bytes of dim 1 is not a multiple of 16$"):
        make_tma_params(L((1, 4096), (1, 1)), "bf16", MN128)   # a column-major (1, N) row: the same for M


def test_no_contiguous_mode_and_no_extent_one_mode_is_still_refused():
    with pytest.raises(TmaError, match=r"no global mode has stride 1 \(strides \(8,2\) elements\): TMA's dim 0 must be "
                                       "contiguous$"):
        make_tma_params(L((4, 4), (8, 2)), "bf16", K128)


def test_tma_boxes_split_a_tile_over_a_single_row():
    b = tma_boxes(L((1, 4096), (4096, 1)), "bf16", gmma_smem_layout("K", "SW128", "bf16", (128, 128)))
    assert [x.mode_offset for x in b.boxes] == [(0, 0), (0, 64)]
    assert (b.params.global_dims, b.params.global_strides, b.params.box_dims) == ((4096, 1), (8192,), (64, 128))


# -- the interpreter: examples/tma_copy.tile on rows and columns -------------------------------------------------------

def tma_copy():
    return parse_module((EXAMPLES / "tma_copy.tile").read_text(), file="examples/tma_copy.tile")


@pytest.mark.parametrize("shape", [(1, 300), (1, 256), (1, 4), (20, 1), (257, 1), (1, 1)])
def test_interpreter_copies_rows_and_columns(shape):
    x = np.random.default_rng().standard_normal(shape).astype(np.float32)
    y = np.full_like(x, -7.0)
    interpret(tma_copy(), {"x": x, "y": y, "m": shape[0], "n": shape[1]})
    assert np.array_equal(y, x)


def test_interpreter_takes_row_and_column_views_of_a_bigger_array():
    big = np.random.default_rng().standard_normal((20, 64)).astype(np.float32)
    for x in (big[3:4, :], big[:, 5:6], big[7:8, 9:10]):
        y = np.full(x.shape, -7.0, np.float32)
        interpret(tma_copy(), {"x": x, "y": y, "m": x.shape[0], "n": x.shape[1]})
        assert np.array_equal(y, x)


def test_out_of_bounds_box_rows_of_a_single_row_load_zeros():
    """x is one row, y sixteen: each 16 x 256 box loaded from x holds x's row and 15 rows of TMA's zero fill, which
    the store writes into y's rows 1..15."""
    x = np.random.default_rng().standard_normal((1, 300)).astype(np.float32)
    y = np.full((16, 300), -7.0, np.float32)
    interpret(tma_copy(), {"x": x, "y": y, "m": 16, "n": 300})
    assert np.array_equal(y[0], x[0]) and not y[1:].any()


def test_out_of_bounds_box_columns_of_a_single_column_load_zeros():
    x = np.random.default_rng().standard_normal((20, 1)).astype(np.float32)
    y = np.full((20, 300), -7.0, np.float32)
    interpret(tma_copy(), {"x": x, "y": y, "m": 20, "n": 300})
    assert np.array_equal(y[:, :1], x) and not y[:, 1:].any()


@pytest.mark.parametrize("shape", [(1, 200), (150, 1), (1, 1)])
def test_interpreter_copies_bf16_rows_and_columns_through_sw128_boxes(shape):
    from ptxgen.kernels import tma_copy as module

    x = np.random.default_rng().standard_normal(shape).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, -7.0)
    interpret(module.build("bf16", 64, 3, swizzle=True), {"x": x, "y": y, "m": shape[0], "n": shape[1]})
    assert np.array_equal(y.view(np.uint16), x.view(np.uint16))


# -- the launcher: maps of device tensors with torch's strides, derived without a device -------------------------------

class DeviceArray:
    """A device tensor stand-in (``__cuda_array_interface__``: strides in bytes) at an arbitrary address."""

    def __init__(self, ptr, shape, strides=None, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


@pytest.mark.parametrize("shape, strides, dims, byte_strides", [
    ((1, 300), (300, 1), (300, 1), (1200,)),          # a contiguous row
    ((1, 300), (1000, 1), (300, 1), (1200,)),         # x[3:4, :300] of a (., 1000) matrix
    ((1, 300), (0, 1), (300, 1), (1200,)),            # expand / broadcast
    ((1, 300), (2 ** 40, 1), (300, 1), (1200,)),      # any stride for the size-1 dim
    ((20, 1), (4, 1), (1, 20), (16,)),                # a pitched column
    ((20, 1), (64, 1), (1, 20), (256,)),              # x[:, :1] of a (20, 64) matrix
    ((20, 1), (8, 12345), (1, 20), (32,)),            # the size-1 dim's stride is anything
    ((1, 1), (1, 1), (1, 1), (16,)),
])
def test_launcher_encodes_rows_and_columns_of_device_tensors(shape, strides, dims, byte_strides):
    from layoutc.hopper import make_tma_params as params_of

    k = jit(tma_copy())
    t, static = k.tmaps["x"]
    assert encode_tensor_map("tma_copy", "x", 0x10000, shape, strides, t, static, encode=False) == bytes(128)
    p = params_of(L(shape, strides), "f32", t.box)
    assert (p.mode_order, p.global_dims, p.global_strides) == (static.mode_order, dims, byte_strides)
    x = DeviceArray(0x10000, shape, tuple(4 * s for s in strides))
    y = DeviceArray(0x20000, shape, tuple(4 * s for s in strides))
    assert k.argument_values(x=x, y=y, m=shape[0], n=shape[1]) == [bytes(128), bytes(128), shape[0], shape[1]]


def test_launcher_refuses_an_unpadded_device_column_naming_the_pitch():
    k = jit(tma_copy())
    with pytest.raises(LaunchError) as info:
        k.argument_values(x=DeviceArray(0x10000, (20, 1)), y=DeviceArray(0x20000, (20, 1)), m=20, n=1)
    assert str(info.value) == ("@tma_copy: argument x: cannot encode tmap<f32, 2>[(16,256):(256,1)] for shape (20, 1) "
                               "with element strides (1, 1): cuTensorMapEncodeTiled: global stride 4 bytes of dim 1 is "
                               "not a multiple of 16")


def test_launcher_pads_numpy_rows_and_columns():
    """numpy arguments are copied to a pitched device buffer, so an (M, 1) column is fine there too."""
    k = jit(tma_copy())
    for shape in ((20, 1), (1, 301), (1, 1)):
        x = np.zeros(shape, np.float32)
        assert k.argument_values(x=x, y=x.copy(), m=shape[0], n=shape[1])[2:] == [shape[0], shape[1]]
        assert k.grid(x=x, y=x.copy(), m=shape[0], n=shape[1]) == (-(-shape[0] // 16), 1, 1)


# -- on the GPU: the real driver, TMA engine and launcher --------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("g", [L((1, 64), (5000, 1)), L((1, 64), (0, 1)), L((24, 1), (8, 1)), L((24, 1), (64, 1)),
                               L((1, 1), (3, 5)), L((1, 24, 64), (0, 64, 1)), L((3, 24, 1), (200, 8, 1)),
                               L((3, 1, 64), (64, 1 << 30, 1))],
                         ids=["row slice", "row stride 0", "column pitched", "column slice", "(1,1)", "(1,M,N)",
                              "(B,M,1)", "(B,1,N)"])
def test_gpu_tma_engine_fills_the_extent_one_mode_with_zeros(g):
    """One TMA load of a box larger than the tensor along its extent-1 mode: in-bounds elements land where the smem
    layout says (tagged with their global offset + 1), every other box element is 0, from a real
    cuTensorMapEncodeTiled map (the smem is pre-filled with 0xFF)."""
    import test_tma as tt

    cu, ck = tt._driver()
    rank = lc.rank(g)
    box = L((16, 64), (64, 1)) if rank == 2 else L((2, 8, 64), (64, 128, 1))
    p = make_tma_params(g, "f32", box)
    n = lc.cosize(g)
    data = b"".join((i + 1).to_bytes(4, "little") for i in range(n))
    smem = tt._tma_load_smem(cu, ck, p, data, [(0, (0,) * rank)])
    shape = lc.shape(g)
    for c in itertools.product(*[range(lc.size(m)) for m in lc.modes(box)]):
        addr = byte_address(box, "f32", c)
        got = int.from_bytes(smem[addr:addr + 4], "little")
        inside = all(ci < ni for ci, ni in zip(c, shape))
        assert got == (g(c) + 1 if inside else 0), (c, got)


@pytest.fixture(scope="module")
def gpu_copy():
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return jit(tma_copy())


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 300), (300, 1), (1, 1), (1, 4096), (4096, 1)])
def test_gpu_launcher_copies_numpy_rows_and_columns(gpu_copy, shape):
    x = np.random.default_rng().standard_normal(shape).astype(np.float32)
    y = np.full_like(x, -7.0)
    gpu_copy(x=x, y=y, m=shape[0], n=shape[1])
    assert np.array_equal(y, x)


@pytest.mark.gpu
def test_gpu_launcher_copies_torch_row_and_column_views(gpu_copy):
    """torch views: rows and columns of bigger matrices (row stride != N; a column's K stride), an expanded row
    (stride 0) and a huge stride for a size-1 dim; y a (16, N) / (M, 256) tensor receives TMA's zero fill."""
    torch = pytest.importorskip("torch")
    big = torch.randn(24, 1000, device="cuda")
    rows = [big[4:5, :300], big[0:1, :1000], torch.randn(300, device="cuda").expand(1, 300),
            torch.randn(300, device="cuda").as_strided((1, 300), (1 << 40, 1))]
    for x in rows:
        y = torch.full((16, x.shape[1]), -7.0, device="cuda")
        gpu_copy(x=x, y=y, m=16, n=x.shape[1])
        torch.cuda.synchronize()
        assert torch.equal(y[:1], x) and not bool(y[1:].any())
    for x in (big[:, :1], big[:, 8:9], torch.randn(24, 8, device="cuda")[:, :1]):
        y = torch.full((24, 256), -7.0, device="cuda")
        gpu_copy(x=x, y=y, m=24, n=256)
        torch.cuda.synchronize()
        # columns 1.. of each box are out of bounds along x's extent-1 mode: zeros, not x's neighbours in memory
        assert torch.equal(y[:, :1], x) and not bool(y[:, 1:].any())


def test_launcher_maps_promote_l2_fills_to_256_bytes(monkeypatch):
    """The kernels' maps ask L2 for 256-byte fills (CuTe and layoutc default to 128): every map the launcher encodes
    goes through ``make_tma_params`` with L2_256B (measured +1.5-3.5% on memory-bound GEMMs, s13 section 6)."""
    import layoutc.hopper as hopper
    from layoutc.hopper import TmaL2Promotion

    seen = []
    real = hopper.make_tma_params

    def spy(*args, **kwargs):
        params = real(*args, **kwargs)
        seen.append(params.l2_promotion)
        return params

    monkeypatch.setattr(hopper, "make_tma_params", spy)
    k = jit(tma_copy())
    t, static = k.tmaps["x"]
    encode_tensor_map("tma_copy", "x", 0x10000, (64, 300), (300, 1), t, static, encode=False)
    assert seen == [TmaL2Promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B]
    assert real(L((64, 300), (300, 1)), "f32", t.box).l2_promotion == TmaL2Promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B
