"""CPU-only tests of ptxgen.runtime and of the wgmma test's host side (no GPU needed).

- nvJitLink compiles PTX to a cubin without a GPU: a tiny kernel and every wgmma test kernel;
- a planted PTX error raises CompileError quoting ptxas' log and the offending source line;
- ``gpu_available()`` answers a bool and never raises (False on a machine without the driver);
- kernel arguments are packed as the driver expects (u64 pointers, ints, raw bytes);
- the wgmma test's host math, emulated from the DESCRIPTORS: what wgmma reads through ``core_matrix_addresses`` from
  the smem images equals the logical A and B tiles bit for bit, so their product is the float64 reference.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import Major, SwizzleMode
from layoutc.hopper.descriptor import WgmmaDescriptor, core_matrix_addresses
from ptxgen.runtime import CompileError, CudaError, compile_ptx, gpu_available, pack_args
from ptxgen.runtime import driver as rt_driver

import test_gpu_wgmma_atoms as wg

TINY_PTX = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry add_one(
    .param .u64 p_x,
    .param .u32 p_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<2>;

    mov.u32 %r0, %tid.x;
    ld.param.u32 %r1, [p_n];
    setp.ge.u32 %p0, %r0, %r1;
    @%p0 bra DONE;
    ld.param.u64 %rd0, [p_x];
    cvta.to.global.u64 %rd0, %rd0;
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd0, %rd0, %rd1;
    ld.global.f32 %f0, [%rd0];
    add.f32 %f0, %f0, 0f3F800000;
    st.global.f32 [%rd0], %f0;
DONE:
    ret;
}
"""

ELF_MAGIC = b"\x7fELF"


def _has_nvidia_device_node() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


# ---------------------------------------------------------------------------------------------------------------
# nvJitLink
# ---------------------------------------------------------------------------------------------------------------

def test_compile_tiny_kernel():
    cubin = compile_ptx(TINY_PTX)
    assert isinstance(cubin, bytes) and cubin.startswith(ELF_MAGIC)
    assert b"add_one" in cubin
    assert cubin.arch == "sm_90a"
    assert isinstance(cubin.info_log, str)


def test_compile_options_reach_ptxas():
    cubin = compile_ptx(TINY_PTX, options=("-Xptxas=-v",))
    assert "add_one" in cubin.info_log and "registers" in cubin.info_log


@pytest.mark.parametrize("key", sorted(set(wg.KERNEL_KEYS) | {(n, ta, tb) for n in (8, 256) for ta in (0, 1)
                                                               for tb in (0, 1)}),
                         ids=lambda k: wg.kernel_name(*k))
def test_compile_wgmma_kernels(key):
    cubin = wg.kernel_cubin(*key)
    assert cubin.startswith(ELF_MAGIC)
    assert wg.kernel_name(*key).encode() in cubin
    # no ptxas advisory about the wgmma (e.g. serialisation) in the info log
    assert "wgmma" not in cubin.info_log.lower(), cubin.info_log


def test_wgmma_kernel_shape_of_ptx():
    ptx = wg.wgmma_kernel_ptx(64, 1, 0)
    assert ".version 8.0" in ptx and ".target sm_90a" in ptx
    assert ".extern .shared .align 1024 .b8 smem[];" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in ptx
    assert "%p2, 1, 1, 1, 0;" in ptx  # scale-d predicate, imm-scale-a/b = 1, trans-a = 1 (MN), trans-b = 0 (K)
    code = "\n".join(line.split("//")[0] for line in ptx.splitlines())  # instructions only, no comments
    order = [code.index(s) for s in ("st.shared.v4.u32", "fence.proxy.async.shared::cta", "bar.sync 0",
                                    "wgmma.fence.sync.aligned", "wgmma.mma_async", "wgmma.commit_group",
                                    "wgmma.wait_group.sync.aligned 0", "st.global.v4.f32")]
    assert order == sorted(order)
    assert ptx.count("st.global.v4.f32") == 64 // 2 // 4
    with pytest.raises(ValueError):
        wg.wgmma_kernel_ptx(12, 0, 0)


def test_planted_syntax_error_names_the_line():
    lines = TINY_PTX.splitlines()
    bad_line = next(i for i, s in enumerate(lines) if "add.f32" in s)
    lines[bad_line] = "    add.f32 %f0, %f0, %no_such_reg;"
    with pytest.raises(CompileError) as info:
        compile_ptx("\n".join(lines) + "\n", name="planted.ptx")
    msg = str(info.value)
    assert f"line {bad_line + 1}" in msg           # ptxas' own message, 1-based
    assert "%no_such_reg" in msg                     # the offending PTX line is quoted
    assert f"planted.ptx:{bad_line + 1}:" in msg
    assert info.value.log and "error" in info.value.log
    assert any("%no_such_reg" in s for s in info.value.source_lines)


def test_wgmma_needs_sm_90a():
    with pytest.raises(CompileError) as info:
        compile_ptx(wg.wgmma_kernel_ptx(8, 0, 0).replace(".target sm_90a", ".target sm_90"), arch="sm_90")
    assert "wgmma" in str(info.value)


def test_compile_accepts_bytes():
    assert compile_ptx(TINY_PTX.encode()).startswith(ELF_MAGIC)


# ---------------------------------------------------------------------------------------------------------------
# Driver layer without a GPU
# ---------------------------------------------------------------------------------------------------------------

def test_gpu_available_is_a_bool_and_false_here():
    result = gpu_available()
    assert isinstance(result, bool)
    if not _has_nvidia_device_node():
        assert result is False


def test_gpu_available_never_raises(monkeypatch):
    def boom(*args):
        raise OSError("simulated: libcuda.so.1 cannot be loaded")

    monkeypatch.setattr(rt_driver, "_call", boom)
    assert rt_driver.gpu_available() is False

    class Weird(Exception):  # not a CudaError, not an OSError: anything a broken install might raise
        pass

    def weird(*args):
        raise Weird()

    monkeypatch.setattr(rt_driver, "_call", weird)
    assert rt_driver.gpu_available() is False


@pytest.mark.skipif(gpu_available(), reason="checks the no-driver error path")
def test_driver_errors_are_cuda_errors_without_a_gpu():
    with pytest.raises(CudaError) as info:
        rt_driver.Module(compile_ptx(TINY_PTX))
    assert info.value.call == "cuInit"
    assert "cuInit failed" in str(info.value)


def test_cuda_error_names_call_and_result():
    cu = pytest.importorskip("cuda.bindings.driver")
    err = cu.CUresult.CUDA_ERROR_INVALID_VALUE

    def fake_call(*args):
        return (err, None)

    real = cu.cuFuncSetAttribute
    try:
        cu.cuFuncSetAttribute = fake_call  # the result check is what is under test, not the driver
        with pytest.raises(CudaError) as info:
            rt_driver._call("cuFuncSetAttribute", None, None, 0)
    finally:
        cu.cuFuncSetAttribute = real
    assert info.value.call == "cuFuncSetAttribute"
    assert info.value.result_name == "CUDA_ERROR_INVALID_VALUE" and info.value.code == 1
    assert str(info.value).startswith("cuFuncSetAttribute failed: CUDA_ERROR_INVALID_VALUE (1)")


def _param_bytes(addr_of_array: int, i: int, n: int) -> bytes:
    ptrs = (ctypes.c_void_p * (i + 1)).from_address(addr_of_array)
    return ctypes.string_at(ptrs[i], n)


def test_pack_args_layout():
    class FakeBuffer(rt_driver.DeviceBuffer):
        def __init__(self, ptr):  # no driver: just an address
            self._dptr = ptr
            self.nbytes = 16

        def __del__(self):
            pass

    buf = FakeBuffer(0x7F0012345600)
    args = (buf, 0x4000004000010040, 7, -2, 1.5, b"\x01\x02\x03", np.uint32(0xDEADBEEF), ctypes.c_uint16(513))
    addr, keep = pack_args(args)
    assert _param_bytes(addr, 0, 8) == (0x7F0012345600).to_bytes(8, "little")
    assert _param_bytes(addr, 1, 8) == (0x4000004000010040).to_bytes(8, "little")
    assert _param_bytes(addr, 2, 4) == (7).to_bytes(4, "little")          # a .u32 param reads the low 4 bytes
    assert _param_bytes(addr, 3, 8) == (-2).to_bytes(8, "little", signed=True)
    assert _param_bytes(addr, 4, 4) == np.float32(1.5).tobytes()
    assert _param_bytes(addr, 5, 3) == b"\x01\x02\x03"
    assert _param_bytes(addr, 6, 4) == (0xDEADBEEF).to_bytes(4, "little")
    assert _param_bytes(addr, 7, 2) == (513).to_bytes(2, "little")
    assert pack_args(())[0] is None
    with pytest.raises(TypeError):
        pack_args((object(),))


# ---------------------------------------------------------------------------------------------------------------
# The wgmma test's host side, emulated from the descriptors
# ---------------------------------------------------------------------------------------------------------------

def _smem_image(p, smem_base: int) -> np.ndarray:
    """The CTA's shared memory (from address 0) after the kernel's copy, with dynamic smem at ``smem_base``."""
    c = p.case
    smem = np.zeros((smem_base & 0x3FFFF) + c.smem_bytes, dtype=np.uint8)
    lo = smem_base & 0x3FFFF
    smem[lo + c.a_off: lo + c.a_off + p.a_img.nbytes] = p.a_img
    smem[lo + c.b_off: lo + c.b_off + p.b_img.nbytes] = p.b_img
    return smem


def _read_operand(smem: np.ndarray, desc: int, major, mn: int) -> np.ndarray:
    """What wgmma reads for an (mn, 16) bf16 operand through ``desc``: the bf16 bit patterns."""
    addrs = np.asarray(core_matrix_addresses(desc, "bf16", major, mn), dtype=np.int64)
    assert addrs.shape == (mn, 16)
    assert (addrs >= 0).all() and (addrs + 2 <= smem.size).all() and not (addrs % 2).any()
    return smem.view(np.uint16)[addrs // 2]


@pytest.mark.parametrize("smem_base", [0x400, 0x01000400], ids=["base0x400", "cluster-rank1-base"])
@pytest.mark.parametrize("case", wg.CASES, ids=wg.CASE_IDS)
def test_descriptor_emulation_reads_the_logical_operands(case, smem_base):
    p = wg.prepare(case)
    smem = _smem_image(p, smem_base)
    desc_a = wg.add_smem_base(p.desc_a, smem_base)
    desc_b = wg.add_smem_base(p.desc_b, smem_base)
    a_read = _read_operand(smem, desc_a, case.a.major, wg.M)
    b_read = _read_operand(smem, desc_b, case.b.major, case.n)
    np.testing.assert_array_equal(a_read, p.a_tile_bits, err_msg=f"A of {case.name} (seed {p.seed})")
    np.testing.assert_array_equal(b_read, p.b_tile_bits, err_msg=f"B of {case.name} (seed {p.seed})")
    d = wg.bf16_values(a_read).astype(np.float64) @ wg.bf16_values(b_read).astype(np.float64).T
    assert wg.relative_error(d, p.reference) == 0.0
    # The same product in f32 (what the tensor core accumulates in) is within the GPU test's tolerance.
    d32 = (wg.bf16_values(a_read) @ wg.bf16_values(b_read).T).astype(np.float64)
    assert wg.relative_error(d32, p.reference) <= wg.REL_TOL / 10


@pytest.mark.parametrize("case", wg.CASES, ids=wg.CASE_IDS)
def test_emulation_has_teeth(case):
    """A wrong swizzle type, a wrong major or a wrong start in the descriptor reads a different A: the emulation can
    fail, so its passing means something."""
    p = wg.prepare(case)
    smem = _smem_image(p, 0x400)
    good = WgmmaDescriptor.decode(wg.add_smem_base(p.desc_a, 0x400))
    wrong_major = Major.MN if case.a.major is Major.K else Major.K
    others = [m for m in SwizzleMode if m is not good.swizzle]
    variants = [(good.encode(), wrong_major)]
    variants += [(WgmmaDescriptor(good.start_address, good.lbo, good.sbo, 0, m).encode(), case.a.major)
                 for m in others]
    variants.append((good.with_start(good.start_address + 16).encode(), case.a.major))
    for desc, major in variants:
        try:
            a_read = _read_operand(smem, desc, major, wg.M)
        except AssertionError:
            continue  # reads outside smem: wrong as well
        assert not np.array_equal(a_read, p.a_tile_bits), (hex(desc), major)


def test_smem_base_is_added_to_the_start_field_only():
    desc = WgmmaDescriptor(0x2C00, 16, 1024, 0, SwizzleMode.SW128).encode()
    moved = WgmmaDescriptor.decode(wg.add_smem_base(desc, 0x01000400))  # a cluster rank's high bits are masked off
    assert moved == WgmmaDescriptor(0x3000, 16, 1024, 0, SwizzleMode.SW128)


def test_accumulator_map_is_a_bijection():
    for n in sorted({c.n for c in wg.CASES}):
        rows, cols = wg.accumulator_rows_cols(n)
        flat = rows + wg.M * cols
        assert sorted(flat.ravel().tolist()) == list(range(wg.M * n))
        # spot check against the documented thread/register picture (warp w owns rows 16w..16w+15)
        assert rows[37, 0] == 16 * 1 + 5 // 4 and cols[37, 0] == 2 * (5 % 4)
    out = np.arange(128 * 4, dtype=np.float64).reshape(128, 4)
    d = wg.scatter_accumulators(out, 8)
    assert not np.isnan(d).any()


def test_image_places_elements_at_layoutc_byte_addresses():
    op = wg.Operand(Major.K, SwizzleMode.SW128, 64)
    bits = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64, order="F")  # value = m + 64 k
    img = wg.operand_image(op, bits, 2048).view(np.uint16)
    from layoutc.hopper import byte_address
    for (m, k) in [(0, 0), (1, 0), (7, 9), (8, 0), (63, 63), (5, 17)]:
        assert img[(byte_address(op.layout, "bf16", (m, k), 2048) - 2048) // 2] == m + 64 * k
    # row 1 of a SW128 atom: chunk 0 lands in chunk 1 (byte 144 = 128 + 16)
    assert img[144 // 2] == 1
    assert lc.size(op.layout) == 64 * 64
