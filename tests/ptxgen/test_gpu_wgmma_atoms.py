"""GPU proof of the Hopper layer: one real ``wgmma.mma_async`` per case reads operands that layoutc laid out.

For every GMMA smem atom kind (INTER, SW32, SW64, SW128) and both majors (K, MN) of A (64x16) and B (Nx16), bf16:

1. the host draws fresh random bf16 A and B, and writes each logical element (mn, k) at
   ``byte_address(layout, 'bf16', (mn, k), base)`` of a byte image (``layout = gmma_smem_layout(...)``; the image holds
   the whole atom-tiled buffer, e.g. (64, 64) for K-major SW128, whose first k16 slice is the wgmma tile);
2. ``make_descriptor(layout, 'bf16', major, base_address=offset)`` describes the tile, with addresses relative to the
   start of dynamic shared memory; the kernel adds ``(smem_base >> 4) & 0x3FFF`` to the start-address field;
3. a one-warpgroup PTX kernel (below, written by hand) copies both images into 1024-aligned dynamic smem with plain
   ld.global/st.shared, fences the generic->async proxy, runs ONE ``wgmma.mma_async ... m64nNk16.f32.bf16.bf16`` with
   scale-d = false (D = A·B), and stores each thread's N/2 accumulators in register order;
4. the host maps ``out[t, i]`` to D's (row, col) through ``accumulator_tv(N)`` (``idx2crd(tv(t, i), (64, N))``) and
   compares with the float64 reference.

Tolerance: relative Frobenius error <= 1e-5. A bf16 x bf16 product has at most 16 significant bits, so every product
is exact in f32; the only error is the f32 accumulation of 16 products (<= ~16 · 2^-24 relative to the sum of |a·b|,
about 1e-6 in the worst case and ~1e-7 typically for random normal data, even allowing for the tensor core's
truncating adder). Any layout mistake (a wrong element, a swapped row or core matrix) moves whole entries and gives a
relative error of order 0.1-1. 1e-5 separates the two by orders of magnitude on both sides.

The CPU-only counterpart (``tests/ptxgen/test_runtime_cpu.py``) compiles every kernel with nvJitLink and emulates what wgmma
reads through the descriptors (``core_matrix_addresses``) from the same images.

Results of each GPU case are appended as JSON lines to ``$WGMMA_RESULTS`` when that variable is set
(``tests/gpu/run_on_device.sh`` prints them as a table).
"""
from __future__ import annotations

import functools
import json
import os
import secrets
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

import layoutc as lc
from layoutc.hopper import Major, SwizzleMode, byte_address, byte_addresses, gmma_atom, gmma_smem_layout
from layoutc.hopper.descriptor import DescriptorIterator, make_descriptor
from layoutc.hopper.fragments import accumulator_tv
from ptxgen.runtime import compile_ptx, gpu_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (ptxgen.runtime.gpu_available() is False)"),
]

DTYPE = "bf16"
M = 64
K16 = 16
THREADS = 128
SMEM_ALIGN = 1024  # every image starts on the SW128 repeat, so base_offset stays 0 for every swizzle
REL_TOL = 1e-5

# ---------------------------------------------------------------------------------------------------------------
# The kernel (PTX 8.0, sm_90a), one per (N, trans-a, trans-b)
# ---------------------------------------------------------------------------------------------------------------

_PTX_TEMPLATE = """\
//
// {name}: one warpgroup, one wgmma.mma_async.m64n{n}k16.f32.bf16.bf16 (SS), D = A*B (scale-d = false).
//   params: A image, B image (global, bytes), out (f32[128][{nreg}]), dbg (u32[4]: smem base address),
//           desc_a, desc_b (descriptors relative to the dynamic smem base; the kernel adds (base >> 4) & 0x3FFF),
//           a_off, a_bytes, b_off, b_bytes (where each image goes in dynamic smem; sizes multiples of 16)
//
.version 8.0
.target sm_90a
.address_size 64

.extern .shared .align 1024 .b8 smem[];

.visible .entry {name}(
    .param .u64 p_a_img,
    .param .u64 p_b_img,
    .param .u64 p_out,
    .param .u64 p_dbg,
    .param .u64 p_desc_a,
    .param .u64 p_desc_b,
    .param .u32 p_a_off,
    .param .u32 p_a_bytes,
    .param .u32 p_b_off,
    .param .u32 p_b_bytes
)
.maxntid 128, 1, 1
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<24>;
    .reg .f32 %d<{nreg}>;

    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;                      // shared-window address of the dynamic smem base

    // thread 0 reports the smem base (the host checks its 1024-byte alignment)
    setp.ne.u32 %p0, %r0, 0;
    @%p0 bra COPY;
    ld.param.u64 %rd0, [p_dbg];
    cvta.to.global.u64 %rd0, %rd0;
    st.global.u32 [%rd0], %r1;
COPY:
{copy_a}
{copy_b}
    // generic-proxy smem writes -> visible to the async proxy (wgmma), then a CTA barrier
    fence.proxy.async.shared::cta;
    bar.sync 0;
    wgmma.fence.sync.aligned;

    // descriptors: start-address field (bits 0-13) += (smem_base >> 4) & 0x3FFF, kept to 14 bits
    cvt.u64.u32 %rd3, %r1;
    shr.u64 %rd3, %rd3, 4;
    and.b64 %rd3, %rd3, 0x3FFF;
    ld.param.u64 %rd4, [p_desc_a];
    and.b64 %rd5, %rd4, 0x3FFF;
    add.u64 %rd5, %rd5, %rd3;
    and.b64 %rd5, %rd5, 0x3FFF;
    and.b64 %rd4, %rd4, 0xFFFFFFFFFFFFC000;
    or.b64 %rd4, %rd4, %rd5;                // A descriptor
    ld.param.u64 %rd6, [p_desc_b];
    and.b64 %rd7, %rd6, 0x3FFF;
    add.u64 %rd7, %rd7, %rd3;
    and.b64 %rd7, %rd7, 0x3FFF;
    and.b64 %rd6, %rd6, 0xFFFFFFFFFFFFC000;
    or.b64 %rd6, %rd6, %rd7;                // B descriptor

    setp.ne.u32 %p2, %r0, %r0;              // scale-d = false: D = A*B, the old d is ignored
    wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16
        {{{dregs}}},
        %rd4, %rd6, %p2, 1, 1, {trans_a}, {trans_b};
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;

    // out[t * {nreg} + i] = d_i
    ld.param.u64 %rd20, [p_out];
    cvta.to.global.u64 %rd20, %rd20;
    mul.wide.u32 %rd21, %r0, {thread_bytes};
    add.u64 %rd20, %rd20, %rd21;
{stores}
    ret;
}}
"""

_COPY_TEMPLATE = """\
    // copy the {what} image: 16 bytes per thread per step, 2048 bytes per warpgroup step
    ld.param.u64 %rd1, [p_{what}_img];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r2, [p_{what}_off];
    ld.param.u32 %r3, [p_{what}_bytes];
    add.u32 %r2, %r2, %r1;
    shl.b32 %r4, %r0, 4;
COPY_{WHAT}:
    setp.ge.u32 %p1, %r4, %r3;
    @%p1 bra COPY_{WHAT}_END;
    cvt.u64.u32 %rd2, %r4;
    add.u64 %rd2, %rd1, %rd2;
    ld.global.v4.u32 {{%r5, %r6, %r7, %r8}}, [%rd2];
    add.u32 %r9, %r2, %r4;
    st.shared.v4.u32 [%r9], {{%r5, %r6, %r7, %r8}};
    add.u32 %r4, %r4, 2048;
    bra COPY_{WHAT};
COPY_{WHAT}_END:"""


def trans_of(major) -> int:
    """imm-trans for a bf16 operand: 0 when K-major (PTX's default: A is MxK row-major, B is KxN column-major, i.e.
    both have K contiguous), 1 when MN-major (transposed)."""
    return 0 if Major.of(major) is Major.K else 1


def kernel_name(n: int, trans_a: int, trans_b: int) -> str:
    return f"wgmma_m64n{n}k16_bf16_ta{trans_a}_tb{trans_b}"


def wgmma_kernel_ptx(n: int, trans_a: int, trans_b: int) -> str:
    """The PTX text of the test kernel for one (N, trans-a, trans-b)."""
    if n % 8 or not 8 <= n <= 256 or trans_a not in (0, 1) or trans_b not in (0, 1):
        raise ValueError(f"no bf16 wgmma m64n{n}k16 with trans ({trans_a}, {trans_b})")
    nreg = n // 2
    dregs = ", ".join(f"%d{i}" for i in range(nreg))
    stores = "\n".join(
        f"    st.global.v4.f32 [%rd20+{16 * j}], {{%d{4 * j}, %d{4 * j + 1}, %d{4 * j + 2}, %d{4 * j + 3}}};"
        for j in range(nreg // 4))
    return _PTX_TEMPLATE.format(
        name=kernel_name(n, trans_a, trans_b), n=n, nreg=nreg, dregs=dregs, trans_a=trans_a, trans_b=trans_b,
        thread_bytes=4 * nreg, stores=stores,
        copy_a=_COPY_TEMPLATE.format(what="a", WHAT="A"), copy_b=_COPY_TEMPLATE.format(what="b", WHAT="B"))


@functools.lru_cache(maxsize=None)
def kernel_cubin(n: int, trans_a: int, trans_b: int):
    """nvJitLink cubin of one kernel, compiled once per session."""
    return compile_ptx(wgmma_kernel_ptx(n, trans_a, trans_b), arch="sm_90a",
                       name=kernel_name(n, trans_a, trans_b) + ".ptx")


# ---------------------------------------------------------------------------------------------------------------
# Cases and host-side data
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """One smem operand: (major, swizzle) of its GMMA atom, the wgmma's MN tile (64 for A, N for B), and the buffer's
    MN extent when that is wider than the tile (``extent``; 0: the tile) with the MN block the wgmma reads (``block``):
    a B of N = 16 read from a 64-wide MN-major SW128 buffer is a tile narrower than one swizzle row."""

    major: Major
    swizzle: SwizzleMode
    mn: int
    extent: int = 0
    block: int = 0

    @property
    def mn_extent(self) -> int:
        return self.extent or self.mn

    @property
    def atom(self):
        return gmma_atom(self.major, self.swizzle, DTYPE)

    @property
    def k_extent(self) -> int:
        """K of the buffer: 16, or the atom's K when the atom is wider (K-major SW64: 32, SW128: 64)."""
        return max(K16, lc.product(self.atom.shape[1]))

    @property
    def layout(self):
        return gmma_smem_layout(self.major, self.swizzle, DTYPE, (self.mn_extent, self.k_extent))

    @property
    def image_bytes(self) -> int:
        """Bytes of the atom-tiled buffer, rounded up to the 1024-byte placement granule."""
        raw = self.layout.cosize * 2
        return -(-raw // SMEM_ALIGN) * SMEM_ALIGN

    @property
    def trans(self) -> int:
        return trans_of(self.major)

    def tag(self) -> str:
        tag = f"{self.major.value}-{self.swizzle.name}"
        return tag + (f"-of{self.extent}-blk{self.block}" if self.extent else "")


@dataclass(frozen=True)
class Case:
    n: int
    a: Operand
    b: Operand
    a_first: bool = True  # A at smem offset 0 (B after it); False: B at 0, A after it (a nonzero 1024-aligned offset)
    pad: int = 0          # extra bytes (multiple of 1024) between the first and the second image
    k_step: int = 0       # which k16 slice of the buffer the wgmma reads (0 = the first; >0 needs K-major, K > 16)

    @property
    def name(self) -> str:
        s = f"n{self.n}_A{self.a.tag()}_B{self.b.tag()}"
        if not self.a_first:
            s += f"_Aoff{self.a_off}"
        if self.k_step:
            s += f"_k{self.k_step}"
        return s

    @property
    def a_off(self) -> int:
        return 0 if self.a_first else self.b.image_bytes + self.pad

    @property
    def b_off(self) -> int:
        return self.a.image_bytes + self.pad if self.a_first else 0

    @property
    def smem_bytes(self) -> int:
        return max(self.a_off + self.a.image_bytes, self.b_off + self.b.image_bytes)

    @property
    def key(self) -> tuple:
        return (self.n, self.a.trans, self.b.trans)


def _cases() -> list:
    sw = list(SwizzleMode)
    cases = []
    # every swizzle kind x every (A major, B major), N = 64: trans-a and trans-b each 0 and 1 for every swizzle
    for mode in sw:
        for am in (Major.K, Major.MN):
            for bm in (Major.K, Major.MN):
                cases.append(Case(64, Operand(am, mode, M), Operand(bm, mode, 64)))
    # fragments: the smallest and largest N (SW128 K-major both)
    for n in (8, 256):
        cases.append(Case(n, Operand(Major.K, SwizzleMode.SW128, M), Operand(Major.K, SwizzleMode.SW128, n)))
    # A at a nonzero 1024-aligned smem offset (after B), swizzled and interleaved, K- and MN-major
    cases.append(Case(64, Operand(Major.K, SwizzleMode.SW128, M), Operand(Major.K, SwizzleMode.SW128, 64),
                      a_first=False, pad=3 * SMEM_ALIGN))
    cases.append(Case(64, Operand(Major.MN, SwizzleMode.SW64, M), Operand(Major.K, SwizzleMode.INTER, 64),
                      a_first=False, pad=SMEM_ALIGN))
    # mixed atoms for A and B
    cases.append(Case(64, Operand(Major.K, SwizzleMode.SW128, M), Operand(Major.MN, SwizzleMode.INTER, 64)))
    cases.append(Case(64, Operand(Major.MN, SwizzleMode.SW32, M), Operand(Major.K, SwizzleMode.SW64, 64)))
    # later k16 steps inside a swizzle row (start address + 32 B per step, base_offset 0)
    cases.append(Case(64, Operand(Major.K, SwizzleMode.SW128, M), Operand(Major.K, SwizzleMode.SW128, 64), k_step=1))
    cases.append(Case(128, Operand(Major.K, SwizzleMode.SW128, M), Operand(Major.K, SwizzleMode.SW128, 128),
                      k_step=3))
    cases.append(Case(64, Operand(Major.K, SwizzleMode.SW64, M), Operand(Major.K, SwizzleMode.SW64, 64), k_step=1))
    # MN-major B tiles narrower than one swizzle row (LBO unused, 0 as CUTLASS writes it), at chunk 0 and further
    # into the row (start + 32 B per N block of 16), and one 16-B MN chunk of an interleaved B (SBO unused, 0)
    for block in (0, 2):
        cases.append(Case(16, Operand(Major.K, SwizzleMode.SW128, M),
                          Operand(Major.MN, SwizzleMode.SW128, 16, extent=64, block=block)))
    cases.append(Case(32, Operand(Major.MN, SwizzleMode.SW128, M),
                      Operand(Major.MN, SwizzleMode.SW64, 32, extent=64, block=1)))
    cases.append(Case(8, Operand(Major.K, SwizzleMode.SW128, M),
                      Operand(Major.MN, SwizzleMode.INTER, 8, extent=64, block=3)))
    return cases


CASES = _cases()
CASE_IDS = [c.name for c in CASES]
KERNEL_KEYS = sorted({c.key for c in CASES})


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bf16 bit patterns (exact)."""
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)


def random_bf16(rng: np.random.Generator, shape) -> tuple:
    """(bf16 bits, their exact float32 values) of fresh random normal numbers (rounded to nearest even by
    ml_dtypes)."""
    values = rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)
    return values.view(np.uint16), values.astype(np.float32)


def operand_image(op: Operand, bits: np.ndarray, offset: int) -> np.ndarray:
    """The smem bytes (uint8[op.image_bytes]) of the buffer holding ``bits`` (shape (mn, k_extent)) when the buffer's
    element offset 0 sits at smem byte ``offset`` (relative to the 1024-aligned dynamic smem base).

    Element (m, k) goes to ``byte_address(layout, 'bf16', (m, k), offset) - offset``: the swizzle acts on the
    absolute address, so this is the hardware's placement for any 1024-aligned base.
    """
    layout = op.layout
    mn, kx = bits.shape
    assert lc.size(layout) == mn * kx
    addrs = np.asarray(byte_addresses(layout, DTYPE, offset), dtype=np.int64) - offset
    # 1-D coordinate i of an (MN, K) layout is colexicographic: i = m + MN*k
    assert addrs[1] == byte_address(layout, DTYPE, (1, 0), offset) - offset
    assert addrs[mn] == byte_address(layout, DTYPE, (0, 1), offset) - offset
    assert addrs.min() >= 0 and addrs.max() + 2 <= op.image_bytes and not (addrs % 2).any()
    assert len(np.unique(addrs)) == addrs.size, "the layout is not injective on the buffer"
    img16 = np.zeros(op.image_bytes // 2, dtype=np.uint16)
    img16[addrs // 2] = bits.reshape(-1, order="F")
    return img16.view(np.uint8)


def operand_descriptor(op: Operand, offset: int, k_step: int):
    """The WgmmaDescriptor of k-step ``k_step`` of MN block ``op.block`` of the buffer at smem offset ``offset``
    (relative addresses); the tile is ``op.mn`` rows (64 for A, N for B)."""
    if k_step == 0 and op.block == 0:
        return make_descriptor(op.layout, DTYPE, op.major, base_address=offset, mn=op.mn)
    return DescriptorIterator(op.layout, DTYPE, op.major, base_address=offset, mn=op.mn).descriptor(
        k=k_step, mn_block=op.block)


@dataclass
class Prepared:
    case: Case
    seed: int
    a_img: np.ndarray
    b_img: np.ndarray
    desc_a: int
    desc_b: int
    a_tile: np.ndarray   # float32 (64, 16): the A the wgmma must read
    b_tile: np.ndarray   # float32 (N, 16)
    a_tile_bits: np.ndarray
    b_tile_bits: np.ndarray
    reference: np.ndarray  # float64 (64, N)


def prepare(case: Case, seed: int | None = None) -> Prepared:
    """Fresh random operands, their smem images, descriptors and the float64 reference for one case."""
    seed = secrets.randbits(32) if seed is None else seed
    rng = np.random.default_rng(seed)
    a_bits, _ = random_bf16(rng, (case.a.mn_extent, case.a.k_extent))
    b_bits, _ = random_bf16(rng, (case.b.mn_extent, case.b.k_extent))
    ks = slice(K16 * case.k_step, K16 * (case.k_step + 1))
    a_rows = slice(case.a.mn * case.a.block, case.a.mn * (case.a.block + 1))
    b_rows = slice(case.b.mn * case.b.block, case.b.mn * (case.b.block + 1))
    a_tile_bits, b_tile_bits = a_bits[a_rows, ks], b_bits[b_rows, ks]
    a_tile, b_tile = bf16_values(a_tile_bits), bf16_values(b_tile_bits)
    reference = a_tile.astype(np.float64) @ b_tile.astype(np.float64).T
    return Prepared(
        case=case, seed=seed,
        a_img=operand_image(case.a, a_bits, case.a_off), b_img=operand_image(case.b, b_bits, case.b_off),
        desc_a=operand_descriptor(case.a, case.a_off, case.k_step).encode(),
        desc_b=operand_descriptor(case.b, case.b_off, case.k_step).encode(),
        a_tile=a_tile, b_tile=b_tile, a_tile_bits=a_tile_bits, b_tile_bits=b_tile_bits, reference=reference)


def add_smem_base(desc: int, smem_base: int) -> int:
    """What the kernel does to a host descriptor: start field (bits 0-13) += (smem_base >> 4) & 0x3FFF, mod 2^14."""
    lo = ((desc & 0x3FFF) + ((smem_base >> 4) & 0x3FFF)) & 0x3FFF
    return (desc & ~0x3FFF & (2 ** 64 - 1)) | lo


@functools.lru_cache(maxsize=None)
def accumulator_rows_cols(n: int) -> tuple:
    """(rows, cols) int arrays of shape (128, N/2): out[t, i] holds D[rows[t, i], cols[t, i]], from the TV layout."""
    tv = accumulator_tv(n)
    rows = np.empty((THREADS, n // 2), dtype=np.int64)
    cols = np.empty((THREADS, n // 2), dtype=np.int64)
    for t in range(THREADS):
        for i in range(n // 2):
            rows[t, i], cols[t, i] = lc.idx2crd(tv(t, i), (M, n))
    return rows, cols


def scatter_accumulators(out: np.ndarray, n: int) -> np.ndarray:
    """D (64 x N, float64) from the per-thread registers ``out`` (128 x N/2) through ``accumulator_tv(N)``."""
    rows, cols = accumulator_rows_cols(n)
    d = np.full((M, n), np.nan)
    d[rows, cols] = out
    return d


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def _record(row: dict) -> None:
    path = os.environ.get("WGMMA_RESULTS")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(row) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_kernels():
    """Every kernel compiled (nvJitLink) and loaded once: {(N, trans_a, trans_b): (Function, how)}."""
    from ptxgen.runtime import CudaError, Module, compute_capability

    cc = compute_capability()
    if cc != (9, 0):
        pytest.skip(f"wgmma needs sm_90a (Hopper, compute capability 9.0); this GPU is {cc}")
    kernels = {}
    for key in KERNEL_KEYS:
        name = kernel_name(*key)
        try:
            module, how = Module(kernel_cubin(*key)), "cubin"
        except CudaError as exc:  # e.g. a driver older than the nvJitLink that built the cubin: JIT the PTX instead
            if exc.result_name == "CUDA_ERROR_INVALID_IMAGE" or "UNSUPPORTED" in exc.result_name or \
                    "NO_BINARY" in exc.result_name:
                module, how = Module(wgmma_kernel_ptx(*key)), f"ptx-jit ({exc.result_name})"
            else:
                raise
        kernels[key] = (module.function(name), how)
    return kernels


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_wgmma_reads_layoutc_atoms(case, gpu_kernels):
    from ptxgen.runtime import DeviceBuffer, launch, set_max_dynamic_smem, synchronize

    p = prepare(case)
    func, how = gpu_kernels[case.key]
    smem = case.smem_bytes
    set_max_dynamic_smem(func, smem)
    a_buf = DeviceBuffer.from_numpy(p.a_img)
    b_buf = DeviceBuffer.from_numpy(p.b_img)
    out_buf = DeviceBuffer(THREADS * (case.n // 2) * 4)
    out_buf.fill_byte(0xFF)  # NaN everywhere: a register the kernel never stores stays visible
    dbg_buf = DeviceBuffer(16)
    dbg_buf.zero()
    try:
        launch(func, grid=1, block=THREADS,
               args=(a_buf, b_buf, out_buf, dbg_buf, p.desc_a, p.desc_b,
                     np.uint32(case.a_off), np.uint32(p.a_img.nbytes), np.uint32(case.b_off), np.uint32(p.b_img.nbytes)),
               smem_bytes=smem)
        synchronize()
        out = out_buf.to_numpy(np.float32, (THREADS, case.n // 2))
        smem_base = int(dbg_buf.to_numpy(np.uint32, (4,))[0])
    finally:
        for b in (a_buf, b_buf, out_buf, dbg_buf):
            b.free()
    got = scatter_accumulators(out.astype(np.float64), case.n)
    err = relative_error(got, p.reference)
    max_abs = float(np.nanmax(np.abs(got - p.reference))) if np.isfinite(got).any() else float("nan")
    row = {"case": case.name, "n": case.n, "A": case.a.tag(), "B": case.b.tag(), "a_off": case.a_off,
           "b_off": case.b_off, "k_step": case.k_step, "trans": [case.a.trans, case.b.trans],
           "desc_a": f"0x{p.desc_a:016x}", "desc_b": f"0x{p.desc_b:016x}", "smem_base": f"0x{smem_base:x}",
           "rel_err": err, "max_abs_err": max_abs, "seed": p.seed, "load": how,
           "ok": bool(err <= REL_TOL and smem_base % SMEM_ALIGN == 0)}
    _record(row)
    assert smem_base % SMEM_ALIGN == 0, (
        f"dynamic smem base 0x{smem_base:x} is not 1024-aligned: the images' swizzle patterns assume it ({row})")
    assert err <= REL_TOL, (
        f"{case.name}: relative Frobenius error {err:.3g} > {REL_TOL} (seed {p.seed}); "
        f"first bad (row, col): {np.argwhere(~np.isclose(got, p.reference, rtol=1e-4, atol=1e-4))[:5].tolist()}; "
        f"{row}")
