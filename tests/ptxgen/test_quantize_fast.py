"""The wide quantizer kernels (16-byte loads) and the quantizers' repeated GPU call (ptxgen.kernels.quantize): the
wide kernels in the interpreter bit for bit against the numpy references (ragged M and K, every input type, both
scale layouts, an all-zero block, a huge value), their PTX through nvJitLink, the remembered call site of a repeated
signature (with a stand-in for torch: this machine may have no GPU), and the GPU."""
import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.kernels import arguments, per_block_cast_to_fp8, per_token_cast_to_fp8, quantize
from ptxgen.kernels.quantize import (
    build_per_block, build_per_token, per_block_cast_to_fp8_reference, per_token_cast_to_fp8_reference,
)
from test_quantize import torch_or_skip

HOST = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}


def sample(shape, dtype, rng):
    """Values over several magnitudes per row, an all-zero row (and so, for M ≤ 128 rows past it, no zero block)
    and a huge value (f16's 6e4, else 3e38 / 1e4 … ): the scale's division and the codes' saturation both matter."""
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-4, 4, (shape[0], 1)))
    if shape[0] > 2:
        x[1] = 0
        x[2, -1] = 6e4 if dtype == "f16" else 3e30
    return x.astype(HOST[dtype])


def same_bits(q, r):
    return q.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and np.array_equal(q.view(np.uint8), r.view(np.uint8))


def interpreted(module, x, scales):
    m, k = x.shape
    q = np.zeros((m, k), ml_dtypes.float8_e4m3fn)
    interpret(module, {"x": x, "q": q, "scales": scales, "m": m, "k": k})
    return q, scales


@pytest.mark.parametrize("shape", [(1, 128), (37, 300), (70, 16), (129, 1000), (8, 2056)])
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("rows_per_thread", [1, 4, 8])
def test_wide_per_token_is_the_reference_bit_for_bit(shape, dtype, rows_per_thread):
    rng = np.random.default_rng()
    x = sample(shape, dtype, rng)
    m, k = shape
    q, s = interpreted(build_per_token(dtype, "wide", rows_per_thread), x, np.full((m, -(-k // 128)), -1, np.float32))
    qr, sr = per_token_cast_to_fp8_reference(x)
    assert same_bits(q, qr)
    assert np.array_equal(s, sr)


@pytest.mark.parametrize("shape", [(1, 128), (37, 300), (130, 16), (200, 272), (256, 384)])
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_wide_per_block_is_the_reference_bit_for_bit(shape, dtype):
    rng = np.random.default_rng()
    x = sample(shape, dtype, rng)
    m, k = shape
    q, s = interpreted(build_per_block(dtype, "wide"), x, np.full((-(-m // 128), -(-k // 128)), -1, np.float32))
    qr, sr = per_block_cast_to_fp8_reference(x)
    assert same_bits(q, qr)
    assert np.array_equal(s, sr)


def test_wide_per_block_zero_block_and_huge_value():
    """An all-zero 128 × 128 block gets 1e-4/448 and zero codes; the block holding 3e30 gets 3e30/448 and its other
    values flush to 0 (e4m3's smallest subnormal is 2⁻⁹ of 448/amax · x)."""
    x = np.zeros((256, 256), np.float32)
    x[200, 3] = 3e30
    x[130, 0] = 1.0
    x[5:9, 140:150] = -2.5
    q, s = interpreted(build_per_block("f32", "wide"), x, np.zeros((2, 2), np.float32))
    assert s[0, 0] == np.float32(1e-4) / np.float32(448) and not q[:128, :128].astype(np.float32).any()
    assert s[1, 0] == np.float32(3e30) / np.float32(448)
    assert q[200, 3].astype(np.float32) == 448 and q[130, 0].astype(np.float32) == 0
    assert np.all(q[5:9, 140:150].astype(np.float32) == -448)
    qr, sr = per_block_cast_to_fp8_reference(x)
    assert same_bits(q, qr) and np.array_equal(s, sr)


def test_wide_per_token_writes_m_major_scales():
    """DeepGEMM's TMA-aligned layout: the kernel takes the scales' strides (1, aligned M) as they are and leaves the
    padding rows alone."""
    rng = np.random.default_rng()
    x = sample((17, 300), "bf16", rng)
    buffer = np.full((3, 20), 7.0, np.float32)
    _q, s = interpreted(build_per_token("bf16", "wide", 2), x, buffer.T[:17])
    assert np.array_equal(s, per_token_cast_to_fp8_reference(x)[1])
    assert np.all(buffer[:, 17:] == 7.0)


def test_variant_is_checked():
    with pytest.raises(ValueError, match="^quantize: variant must be one of narrow, wide, not 'wdie' "
                                         r"\(did you mean 'wide'\?\)$"):
        build_per_token("bf16", "wdie")
    with pytest.raises(ValueError, match="^quantize: rows_per_thread must be 1, 2, 4 or 8, not 3$"):
        build_per_token("bf16", "wide", 3)


@pytest.mark.parametrize("m, k, rows_per_thread", [(4096, 7168, 4), (128, 7168, 2), (8, 2048, 1), (600, 1024, 2)])
def test_wide_token_tiles_shrink_for_short_inputs(monkeypatch, m, k, rows_per_thread):
    monkeypatch.setitem(quantize.OP_VARIANTS, "token", "wide")
    assert quantize._device_kernel("token", "bf16", m, k) == ("token", "bf16", "wide", rows_per_thread)


@pytest.mark.parametrize("kind", ["token", "block"])
def test_wide_kernels_assemble(kind):
    """nvJitLink assembles them; 16-byte loads (ld.global.v4.b32: 8 bf16) and 8-byte e4m3 stores; the per-block
    kernel fits 3 CTAs of 256 threads per SM (≤ 80 registers: 85 would not round to a multiple of 8 under 65536)."""
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    spec = Specialization.of(x=TensorSpec(1, True, 16), q=TensorSpec(1, True, 16), scales=TensorSpec(1, True, 4))
    module = build_per_token("bf16", "wide") if kind == "token" else build_per_block("bf16", "wide")
    compiled = compile_kernel(module.kernels[0], spec)
    assert "ld.global.v4.b32" in compiled.ptx and "ld.global.v4.b16" not in compiled.ptx
    assert "st.global.v2.b32" in compiled.ptx
    assert "cvt.rn.satfinite.e4m3x2.f32" in compiled.ptx
    if kind == "token":
        assert compiled.spill_bytes == 0 and compiled.registers <= 72
    else:
        # nvJitLink counts a few bytes of spill ptxas' own -v reports as 8; the narrow kernel needs 191 registers
        assert compiled.registers <= 80 and compiled.spill_bytes <= 128


# -- the repeated call, with a stand-in for torch ------------------------------------------------------------------

class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class FakeDevice:
    index = 0


class FakeTensor:
    """What the ops read of a torch CUDA tensor: shape, stride(), numel(), dtype, device, data_ptr()."""
    __module__ = "torch.fake"
    next_address = [1 << 20]
    is_cuda = True
    device = FakeDevice()

    def __init__(self, shape, strides, dtype, address=None):
        self.shape, self._strides, self.dtype = tuple(shape), tuple(strides), dtype
        if address is None:
            address = FakeTensor.next_address[0]
            FakeTensor.next_address[0] += 1 << 20
        self.address = address

    def stride(self):
        return self._strides

    def numel(self):
        return int(np.prod(self.shape))

    def data_ptr(self):
        return self.address

    def get_device(self):
        return 0


class FakeTorch:
    float8_e4m3fn, float32, bfloat16 = FakeDtype("torch.float8_e4m3fn"), FakeDtype("torch.float32"), \
        FakeDtype("torch.bfloat16")

    @staticmethod
    def empty(shape, dtype, device):
        return FakeTensor(shape, arguments.row_major(shape), dtype)

    @staticmethod
    def empty_strided(shape, strides, dtype, device):
        return FakeTensor(shape, strides, dtype)


class FakeBlock:
    def __init__(self, launches):
        self.u64 = [0] * 8
        self.cfg = self.handle = self.address = None
        self.launches = launches

    def cu_launch(self, cfg, handle, address, flags):
        self.launches.append(tuple(self.u64[:3]))
        return (0,)


class FakeSite:
    """A prepared site whose x, q, scales pointer slots are u64 words 0, 1, 2."""

    def __init__(self, launches, arguments):
        self.block_launch = FakeBlock(launches)
        self.arguments = dict(arguments)
        for slot, name in enumerate(("x", "q", "scales")):
            self.block_launch.u64[slot] = arguments[name].data_ptr()

    def tensor_slot(self, name):
        return "gtensor", 8 * ("x", "q", "scales").index(name)

    def __call__(self):
        self.block_launch.cu_launch(None, None, None, 0)


class FakeKernel:
    def __init__(self):
        self.prepared, self.launches = [], []

    def prepare(self, stream, **arguments):
        self.prepared.append((arguments["x"].shape, arguments["x"].stride(), stream))
        return FakeSite(self.launches, arguments)


class AnyKey(dict):
    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel

    def get(self, key, default=None):
        return self.kernel


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch replaced by FakeTorch, every kernel by one FakeKernel; the remembered calls emptied."""
    import sys

    kernel = FakeKernel()
    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    monkeypatch.setattr(arguments, "TORCH", [frozenset({FakeTensor}), FakeTorch.empty, lambda device: 77])
    monkeypatch.setattr(quantize, "_JIT", AnyKey(kernel))
    monkeypatch.setattr(quantize, "_FAST", {})
    return kernel


@pytest.mark.parametrize("op, tma", [(per_token_cast_to_fp8, False), (per_token_cast_to_fp8, True),
                                     (per_block_cast_to_fp8, None)])
def test_a_repeated_signature_takes_the_remembered_site(fake_gpu, op, tma):
    kwargs = {} if tma is None else {"tma_aligned_scales": tma}
    x = FakeTensor((300, 1000), (1000, 1), FakeTorch.bfloat16)
    q, s = op(x, **kwargs)
    assert len(fake_gpu.prepared) == 1 and len(fake_gpu.launches) == 1
    assert fake_gpu.prepared[0] == ((300, 1000), (1000, 1), 77)
    (call,) = quantize._FAST.values()
    assert call.calls == 0
    want_scales = ((300, 8), (1, 300)) if tma else ((300, 8), (8, 1)) if tma is False else ((3, 8), (8, 1))
    assert (s.shape, s.stride()) == want_scales and q.shape == (300, 1000)
    x2 = FakeTensor((300, 1000), (1000, 1), FakeTorch.bfloat16)
    q2, s2 = op(x2, **kwargs)
    assert call.calls == 1 and len(fake_gpu.prepared) == 1
    # the launch took the new input's and the new outputs' addresses
    assert fake_gpu.launches[-1] == (x2.data_ptr(), q2.data_ptr(), s2.data_ptr())
    assert (s2.shape, s2.stride()) == want_scales and q2.address != q.address
    assert call.site.arguments == {}      # the first call's tensors are not kept alive by the site


def test_a_new_signature_is_checked_again(fake_gpu):
    x = FakeTensor((64, 256), (256, 1), FakeTorch.bfloat16)
    per_token_cast_to_fp8(x)
    per_token_cast_to_fp8(FakeTensor((64, 256), (512, 1), FakeTorch.bfloat16))       # other strides
    per_token_cast_to_fp8(FakeTensor((64, 256), (256, 1), FakeTorch.bfloat16, address=(1 << 30) + 2))  # unaligned
    per_token_cast_to_fp8(x, tma_aligned_scales=True)                                 # other scale layout
    assert len(fake_gpu.prepared) == 4 and len(quantize._FAST) == 4
    per_token_cast_to_fp8(FakeTensor((64, 256), (512, 1), FakeTorch.bfloat16))
    assert len(fake_gpu.prepared) == 4 and sum(call.calls for call in quantize._FAST.values()) == 1


def test_another_variant_is_another_signature(fake_gpu, monkeypatch):
    x = FakeTensor((64, 256), (256, 1), FakeTorch.bfloat16)
    per_block_cast_to_fp8(x)
    other = "narrow" if quantize.OP_VARIANTS["block"] == "wide" else "wide"
    monkeypatch.setitem(quantize.OP_VARIANTS, "block", other)
    per_block_cast_to_fp8(x)
    assert len(fake_gpu.prepared) == 2


def test_an_error_after_a_good_call_names_the_argument(fake_gpu):
    per_token_cast_to_fp8(FakeTensor((64, 256), (256, 1), FakeTorch.bfloat16))
    with pytest.raises(TypeError, match=r"^per_token_cast_to_fp8: x has dtype torch\.float64; per_token_cast_to_fp8 "
                                        r"takes bf16 \(torch\.bfloat16"):
        per_token_cast_to_fp8(FakeTensor((64, 256), (256, 1), FakeDtype("torch.float64")))
    with pytest.raises(ValueError, match=r"^per_block_cast_to_fp8: x must be 2-D \(M, K\), not of shape \(64,\)$"):
        per_block_cast_to_fp8(FakeTensor((64,), (1,), FakeTorch.bfloat16))


def test_empty_inputs_launch_nothing_and_are_not_remembered(fake_gpu):
    q, s = per_token_cast_to_fp8(FakeTensor((0, 256), (256, 1), FakeTorch.bfloat16))
    assert q.shape == (0, 256) and s.shape == (0, 2)
    assert not fake_gpu.prepared and not quantize._FAST


# -- the GPU -----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["narrow", "wide"])
@pytest.mark.parametrize("shape", [(4096, 7168), (128, 7168), (1, 512), (133, 384), (300, 1000), (7, 136)])
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_gpu_variants_match_the_references(monkeypatch, variant, shape, dtype):
    """Fresh inputs on the GPU, each op called twice (the checked call, then the remembered one) against the numpy
    references bit for bit, both scale layouts."""
    torch = torch_or_skip()
    monkeypatch.setitem(quantize.OP_VARIANTS, "token", variant)
    monkeypatch.setitem(quantize.OP_VARIANTS, "block", variant)
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    for _ in range(2):
        x = (torch.randn(*shape, device="cuda", dtype=torch.float32) * 3).to(tdtype)
        if shape[0] > 2:
            x[1] = 0
            x[2, -1] = 6e4 if dtype == "f16" else 3e30
        host = x.float().cpu().numpy().astype(HOST[dtype])
        calls = [(lambda: per_token_cast_to_fp8(x), per_token_cast_to_fp8_reference),
                 (lambda: per_token_cast_to_fp8(x, tma_aligned_scales=True), per_token_cast_to_fp8_reference),
                 (lambda: per_block_cast_to_fp8(x), per_block_cast_to_fp8_reference)]
        for run, ref in calls:
            q, s = run()
            torch.cuda.synchronize()
            qr, sr = ref(host)
            assert np.array_equal(s.cpu().numpy(), sr)
            assert np.array_equal(q.view(torch.uint8).cpu().numpy(), qr.view(np.uint8))


@pytest.mark.gpu
def test_gpu_repeated_call_takes_the_remembered_site():
    torch = torch_or_skip()
    x = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16)
    per_token_cast_to_fp8(x)
    key = quantize._fast_key("token", x, False)
    call = quantize._FAST[key]
    before = call.calls
    y = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16)
    q, s = per_token_cast_to_fp8(y)
    torch.cuda.synchronize()
    assert call.calls == before + 1
    qr, sr = per_token_cast_to_fp8_reference(y.float().cpu().numpy().astype(ml_dtypes.bfloat16))
    assert np.array_equal(s.cpu().numpy(), sr)
    assert np.array_equal(q.view(torch.uint8).cpu().numpy(), qr.view(np.uint8))
