"""examples/gemm_hopper.tile, the persistent warp-specialized GEMM (ptxgen.kernels.gemm): text = build(TILE_FILE), correct in the interpreter on
ragged shapes with several tiles per CTA (the iteration counter running across tiles), compiles to HGMMA without
local memory; sched.tile is a bijection grouped by tile rows; on a GPU it matches a float64 reference."""
from __future__ import annotations

import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.ops.sched import grouped_tile
from ptxgen.ir.text import parse_module, print_module, structurally_equal
from ptxgen.kernels.gemm import TILE_FILE, GemmConfig, build, streamk_buffers
from ptxgen.lower import compile_kernel
from ptxgen.runtime.sass import disassemble, instruction_counts, nvdisasm_path
from ptxgen.verify import VerifyError, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def gemm_kernel(dtype: str = "bf16", **fields):
    """The library's kernel of ``GemmConfig(dtype, **fields)``."""
    return build(GemmConfig(dtype, **fields))


def text_module():
    return parse_module((EXAMPLES / "gemm_hopper.tile").read_text(), file="examples/gemm_hopper.tile")


def test_text_is_the_builder_twin():
    module = text_module()
    verify(module)
    assert structurally_equal(module, build(TILE_FILE))
    printed = print_module(module)
    assert print_module(parse_module(printed)) == printed


# the host dtypes of the element types (the interpreter's and the launcher's convention)
HOST = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def rel_err(c, want):
    return np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want)


def run(kernel, m, n, k, sms, dtype="bf16"):
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(HOST[dtype])
    b = rng.standard_normal((n, k)).astype(HOST[dtype])
    c = np.full((m, n), -7.0, dtype=HOST[dtype])
    interpret(kernel, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "sms": sms})
    want = a.astype(np.float64) @ b.astype(np.float64).T
    return rel_err(c, want)


@pytest.mark.parametrize("m, n, k, sms", [(300, 264, 200, 2), (1, 8, 8, 5), (129, 520, 72, 3)])
def test_text_kernel_matches_float64(m, n, k, sms):
    assert run(text_module(), m, n, k, sms) < 1e-2


@pytest.mark.parametrize("args, dtype, shape", [
    (dict(bn=128, stages=3), "bf16", (300, 260, 200, 2)),
    (dict(bm=256, bn=128, stages=2, group=2), "f16", (520, 300, 136, 3)),
    (dict(bn=64, stages=2, pending=0), "bf16", (200, 136, 328, 4)),
    (dict(bn=176, stages=2), "bf16", (136, 360, 72, 2)),                     # direct epilogue: any wgmma N
    (dict(bn=128, stages=2, epilogue="tma"), "bf16", (300, 264, 200, 2)),    # TMA-store epilogue (N % 8 == 0)
    (dict(bn=256, stages=2, cluster=2, epilogue="tma"), "bf16", (129, 512, 72, 2)),
    (dict(bn=256, stages=2, epilogue="tma", epilogue_split=2), "bf16", (129, 520, 72, 2)),   # C staged in halves
    (dict(bn=192, stages=2, epilogue="tma", epilogue_split=3), "f16", (200, 392, 72, 3)),    # ... in 64-column thirds
    (dict(bn=128, stages=2, epilogue="rows"), "bf16", (201, 299, 72, 2)),    # row-coalesced stores, odd N
    (dict(bn=192, stages=2, cluster=2, epilogue="rows", epilogue_split=3), "bf16", (300, 389, 136, 2)),
    # the epilogue behind the next tile's first wgmmas: 2 k-tiles peeled (ragged K: the last k-tile partial), 1 with
    # 1 k-tile per tile (every k-tile peeled), clusters and halves, a CTA without tiles (5 CTAs, 2 tiles)
    (dict(bn=128, stages=2, epilogue="tma", overlap=2), "bf16", (300, 264, 200, 2)),
    (dict(bn=128, stages=3, epilogue="tma", overlap=1), "f16", (520, 264, 64, 3)),
    (dict(bn=128, stages=3, epilogue="tma", overlap=2), "bf16", (520, 264, 64, 3)),
    (dict(bn=256, stages=2, cluster=2, epilogue="tma", epilogue_split=2, overlap=2), "bf16", (129, 520, 72, 2)),
    (dict(bn=128, stages=2, epilogue="tma", overlap=2), "bf16", (200, 8, 16, 5)),
])
def test_builder_variants_match_float64(args, dtype, shape):
    kernel = gemm_kernel(dtype, **args)
    assert run(kernel, *shape, dtype=dtype) < 1e-2


@pytest.mark.parametrize("args, message", [
    (dict(epilogue_split=2), "epilogue_split = 2: column blocks are staged by the 'tma' or 'rows' epilogue"),
    (dict(bn=184, epilogue="rows"), "BN = 184 must split into 1 block of a multiple of 16"),
    (dict(bm=256, bn=128, epilogue="tma", epilogue_split=3), "staged as its 2 64-row wgmma blocks in turn"),
    (dict(bn=256, epilogue="tma", epilogue_split=3), "BN = 256 must split into 3 blocks of a multiple of 8"),
    (dict(bn=240, epilogue="rows", epilogue_split=2), "BN = 240 must split into 2 blocks of a multiple of 16"),
    (dict(overlap=2), "overlap = 2: .* is built for the TMA-store epilogue"),
    (dict(epilogue="tma", overlap=2, streamk=True), "overlap = 2: .* data-parallel tiles"),
    (dict(epilogue="tma", overlap=2, pending=0), "pending=1"),
    (dict(epilogue="tma", overlap=-1), "overlap = -1: 0"),
])
def test_epilogue_split_rules(args, message):
    with pytest.raises(ValueError, match=message):
        gemm_kernel("bf16", **args)


@pytest.mark.parametrize("args, shape, sms", [
    (dict(bn=128), (640, 128, 320), 3),          # 5 tiles on 3 CTAs: 2 left, 10 k-tiles in runs 3, 3, 4
    (dict(bn=128), (512, 128, 512), 3),          # 4 tiles on 3: the last one in runs of 2, 3, 3 (three pieces)
    (dict(bn=128), (603, 120, 296), 3),          # ragged M, N, K
    (dict(bn=128, cluster=2), (1152, 128, 512), 6),
    (dict(bn=128, cluster=2, epilogue="tma"), (1024, 256, 448), 6),
    (dict(bn=256, cluster=2, epilogue="tma", epilogue_split=2), (974, 240, 440), 6),
    (dict(bn=128), (512, 256, 192), 4),          # whole waves: no stream-K work, the workspace untouched
    (dict(bn=128, streamk_min_saving=3), (640, 128, 320), 3),   # runs of 4 save 1 k-tile of 5: data-parallel
    (dict(bn=128, streamk_min_saving=2), (512, 128, 512), 3),   # runs of 3 save 5 of 8: stream-K
    (dict(bn=128), (512, 128, 128), 3),          # 2 k-tiles left for 3 CTAs: the third has no run
    (dict(bn=128), (1792, 128, 320), 6),         # 14 tiles on 6 CTAs: 2 left, 10 k-tiles, runs of 1 and 2
])
def test_streamk_matches_float64(args, shape, sms):
    """Stream-K after the whole waves: the k-tiles of the last partial wave shared out in equal runs across the
    CTAs (clusters), partial sums through the f32 workspace, where that saves at least ``streamk_min_saving``
    k-tiles (0 here unless given); every launch leaves the flags zero."""
    args = {"streamk_min_saving": 0, **args}
    module = gemm_kernel("bf16", stages=2, streamk=True, **args)
    m, n, k = shape
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), -7.0, dtype=ml_dtypes.bfloat16)
    buffers = streamk_buffers(GemmConfig(bn=args["bn"], cluster=args.get("cluster", 1)), sms)
    work = np.full(buffers["work"], np.nan, np.float32)
    flags = np.zeros(buffers["flags"], np.int32)
    interpret(module, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "sms": sms, "work": work, "flags": flags})
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert rel_err(c, want) < 1e-2
    assert not flags.any()
    clusters = sms // args.get("cluster", 1)
    rest = -(-m // (128 * args.get("cluster", 1))) * -(-n // args["bn"]) % clusters
    ktiles = -(-k // 64)
    saving = ktiles - -(-rest * ktiles // max(1, min(clusters, rest * ktiles)))
    assert bool((~np.isnan(work)).any()) == bool(rest and saving >= args["streamk_min_saving"])


def test_fp8_overlap_needs_chunked_promotion():
    """The overlapped epilogue holds C beside the chunk in flight; promote = 1 keeps two accumulators per k-tile."""
    with pytest.raises(ValueError, match="fp8: promote > 1"):
        gemm_kernel("e4m3", bn=128, epilogue="tma", overlap=1, promote=1)


def test_streamk_is_not_for_grouped_block_scales():
    """fp8 takes stream-K with per-tensor scales (tests/ptxgen/test_fp8_streamk.py) and with dense block scales
    (tests/ptxgen/test_fp8_block_streamk.py); a grouped GEMM does not."""
    with pytest.raises(ValueError, match="a contiguous grouped GEMM finds each tile's group"):
        gemm_kernel("e4m3", bn=128, streamk=True, scales="block", grouped="contiguous")


def test_zero_k_stores_zeros():
    """K = 0: no k-tile, no stage to release, the tile is all zeros (the consumers must not wait or release)."""
    c = np.full((64, 300), -7.0, dtype=ml_dtypes.bfloat16)
    a = np.zeros((64, 0), ml_dtypes.bfloat16)
    b = np.zeros((300, 0), ml_dtypes.bfloat16)
    interpret(gemm_kernel(), {"a": a, "b": b, "c": c, "m": 64, "n": 300, "k": 0, "sms": 1})   # direct epilogue
    assert np.array_equal(c, np.zeros_like(c))
    c = np.full((64, 304), -7.0, dtype=ml_dtypes.bfloat16)
    b = np.zeros((304, 0), ml_dtypes.bfloat16)
    interpret(text_module(), {"a": a, "b": b, "c": c, "m": 64, "n": 304, "k": 0, "sms": 1})   # TMA stores
    assert np.array_equal(c, np.zeros_like(c))
    # the overlapped epilogue: no k-tile to peel, every tile stored by the next trip's hook (TMA: N % 8 == 0)
    c = np.full((64, 304), -7.0, dtype=ml_dtypes.bfloat16)
    overlapped = gemm_kernel("bf16", bn=128, stages=2, epilogue="tma", overlap=2)
    interpret(overlapped, {"a": a, "b": np.zeros((304, 0), ml_dtypes.bfloat16), "c": c, "m": 64, "n": 304, "k": 0,
                           "sms": 1})
    assert np.array_equal(c, np.zeros_like(c))


@pytest.mark.parametrize("tiles_m, tiles_n, group", [(3, 2, 2), (7, 5, 3), (1, 9, 8), (16, 16, 8), (5, 1, 8)])
def test_sched_tile_is_a_grouped_bijection(tiles_m, tiles_n, group):
    t = np.arange(tiles_m * tiles_n)
    tm, tn = grouped_tile(t, tiles_m, tiles_n, group)
    assert sorted(zip(tm.tolist(), tn.tolist())) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)]
    # the tiles of one group of rows come before any tile of the next group
    assert np.all(np.diff(tm // group) >= 0)


def test_sched_tile_verifier_rules():
    text = """kernel @k(%t: i32, %f: f32) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %a, %b = sched.tile %t, %t, %f {group = 0} : i32, i32
}
"""
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, file="bad.tile"))
    assert "bad.tile:2:3: sched.tile: the tile columns must be i32, not f32" in str(e.value)
    assert "bad.tile:2:3: sched.tile: group must be >= 1, not 0" in str(e.value)


def test_compiles_to_hgmma_without_local_memory():
    compiled = compile_kernel(text_module())
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in compiled.ptx
    # no read of an accumulator before the wait that completes it: ptxas keeps the wgmmas pipelined (no C7514)
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes in (0, None)
    if nvdisasm_path():
        counts = instruction_counts(disassemble(compiled.cubin), ["HGMMA.64x256x16.F32.BF16", "LDL", "STL"])
        assert counts["HGMMA.64x256x16.F32.BF16"] == 4 and counts["LDL"] == counts["STL"] == 0

def test_overlapped_epilogue_keeps_wgmma_pipelined_and_packed():
    """The epilogue behind the next tile's first wgmmas holds C as 64 packed registers across the tile loop (16-bit
    values carried in pairs): every f32 pair converts with one cvt.rn.bf16x2.f32, no wgmma is serialized (C7514),
    and C goes to smem by 16 stmatrix.x4 per warpgroup."""
    compiled = compile_kernel(gemm_kernel("bf16", bn=256, stages=4, epilogue="tma", epilogue_split=2, overlap=1))
    assert compiled.ptx.count("cvt.rn.bf16x2.f32") == 64 and "cvt.rn.bf16.f32" not in compiled.ptx
    assert "C7514" not in compiled.info_log
    if nvdisasm_path():
        counts = instruction_counts(disassemble(compiled.cubin), ["STSM.16.M88.4", "F2FP.BF16.F32.PACK_AB"])
        assert counts["STSM.16.M88.4"] == 16 and counts["F2FP.BF16.F32.PACK_AB"] == 64


def test_k_steps_of_one_mma_are_one_asm_statement():
    """wgmma.mma 64×256×64 is one inline-asm block of 4 chained m64n256k16 (one PTX line each): the first takes
    scale-d from its operand, the rest accumulate; LLVM sees one call with 128 results instead of four."""
    ptx = compile_kernel(text_module(), defer_assembly=True).ptx
    blocks = [b for b in ptx.split("// begin inline asm")[1:] if "wgmma.mma_async" in b.split("// end inline asm")[0]]
    assert len(blocks) == 1
    lines = [line.strip() for line in blocks[0].split("// end inline asm")[0].splitlines()
             if "wgmma.mma_async" in line]
    assert len(lines) == 4
    assert [line.split("}, ")[-1].split(", ")[2] for line in lines] == ["%scale_d", "%acc", "%acc", "%acc"]
    assert "setp.eq.b32 %acc" in blocks[0]



def test_fp8_compiles_to_qgmma_without_local_memory():
    """The fp8 kernel promoting every k-tile in staggered K-halves: QGMMA m64n128k32 in the SASS (two per K-half, two
    halves per k-tile, on both warpgroup paths), no wgmma serialized (C7514), no local memory."""
    compiled = compile_kernel(gemm_kernel("e4m3", bn=128, stages=4, cluster=2, epilogue="tma", promote=1))
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in compiled.ptx
    assert "C7514" not in compiled.info_log
    assert compiled.spill_bytes in (0, None)
    if nvdisasm_path():
        counts = instruction_counts(disassemble(compiled.cubin), ["QGMMA.64x128x32.F32.E4M3.E4M3", "LDL", "STL"])
        assert counts["QGMMA.64x128x32.F32.E4M3.E4M3"] == 8 and counts["LDL"] == counts["STL"] == 0


def benchmark_variants():
    """(benchmarks/bench_gemm.py, every (dtype, variant) that bench_gemm --sweep, bench_power and bench_staircase
    time)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_gemm
        import bench_power
        import bench_staircase
    finally:
        sys.path.pop(0)
    names = {(dtype, v) for table in (bench_gemm.SWEEP_VARIANTS, bench_power.DEFAULT_VARIANTS)
             for dtype, vs in table.items() for v in vs.split(",")}
    names |= {("bf16", variant) for _step, _what, variant, _per_tile in bench_staircase.STEPS
              if variant.startswith("h")}   # the flagship's steps (step 1 is the simple GEMM)
    return bench_gemm, sorted(names)


BENCH, BENCH_VARIANTS = benchmark_variants()


@pytest.mark.parametrize("dtype, variant", BENCH_VARIANTS)
def test_benchmark_variants_keep_wgmma_pipelined(dtype, variant):
    """Every variant the benchmarks time compiles (contiguous, 16-byte aligned operands, as torch passes them) with no
    wgmma serialized by ptxas (C7514: an accumulator read before the wait that completes it, or one the pass
    pipeline left where ptxas cannot prove it complete). Spills are the GPU's to check (bench_gemm prints the
    driver's local bytes): nvJitLink compiles without the setmaxnreg budgets, so its spill count is not the kernel's."""
    from ptxgen.ir.types import GlobalTensorType
    from ptxgen.lower import Specialization, TensorSpec

    module, _needs_sms = BENCH.variant_kernel(variant, dtype)
    kernel = module.kernels[0]
    spec = Specialization(tuple((p.name, TensorSpec(p.type.rank - 1, True, 16)) for p in kernel.params
                                if isinstance(p.type, GlobalTensorType)))
    compiled = compile_kernel(kernel, spec)
    assert "C7514" not in compiled.info_log


@pytest.mark.gpu
def test_gpu_benchmark_variants_use_no_local_memory():
    """Every variant the benchmarks time, as the driver loads it (its JIT honours setmaxnreg, so the consumers have
    240 registers): no local memory (LOCAL_SIZE_BYTES 0: no spills, no stack)."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = 256, 512, 256
    kinds = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}
    local = {}
    for dtype, variant in BENCH_VARIANTS:
        module, _needs_sms = BENCH.variant_kernel(variant, dtype)
        a = torch.randn(m, k, device="cuda").to(kinds[dtype])
        b = torch.randn(n, k, device="cuda").to(kinds[dtype])
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16 if dtype == "e4m3" else kinds[dtype])
        scales = dict(scale_a=1.0, scale_b=1.0) if dtype == "e4m3" else {}
        site = jit(module).prepare(a=a, b=b, c=c, m=m, n=n, k=k, sms=4, **scales,
                                   **BENCH.variant_buffers(torch, variant, 4))
        local[f"{dtype} {variant}"] = site.compiled.function.attribute("LOCAL_SIZE_BYTES")
    assert local and not any(local.values()), {name: size for name, size in local.items() if size}


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, m, n, k", [
    ("text", 4096, 4096, 4096), ("text", 3001, 3000, 2008), ("text", 129, 264, 72), ("text", 1, 8, 8),
    ("direct", 3001, 2999, 2008), ("direct", 129, 257, 72),      # C rows TMA cannot store: build()'s st.global
])
def test_gpu_matches_float64(kernel, m, n, k):
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    jit(text_module() if kernel == "text" else gemm_kernel())(a=a, b=b, c=c, m=m, n=n, k=k, sms=sms)
    torch.cuda.synchronize()
    want = a.double() @ b.double().T
    assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, args", [
    ("bf16", dict(bn=256, stages=4, epilogue="tma", epilogue_split=2)),
    ("bf16", dict(bn=256, stages=4, cluster=2, epilogue="tma", epilogue_split=2)),
    ("bf16", dict(bn=256, stages=4, cluster=2, epilogue="tma", epilogue_split=2, overlap=2)),
    ("f16", dict(bn=256, stages=3, cluster=2, epilogue="tma", overlap=1)),
    ("e4m3", dict(bn=192, stages=4, cluster=2, epilogue="tma", promote=4)),
    ("e4m3", dict(bn=192, stages=4, epilogue="tma", promote=4, overlap=1)),
    ("e4m3", dict(bn=192, stages=5, cluster=2, epilogue="tma", epilogue_split=3, promote=4)),
    ("e4m3", dict(bn=192, stages=4, cluster=2, epilogue="tma", epilogue_split=3, promote=1)),   # halves, staggered
    ("e4m3", dict(bn=128, stages=4, cluster=2, epilogue="tma", promote=1)),
    ("e4m3", dict(bn=224, stages=5, cluster=2, promote=1)),          # 112 + 112 accumulator registers, direct
])
def test_gpu_benchmark_variants_match_float64(dtype, args):
    """The configurations bench_gemm.py reports, on a ragged shape (C rows 16-byte aligned for the TMA store)."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = 1000, 1064, 1040
    c = torch.full((m, n), -7.0, device="cuda", dtype=torch.float16 if dtype == "f16" else torch.bfloat16)
    assert gpu_relative_error(torch, jit, dtype, args, c, k) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("args, sms", [
    (dict(bn=256, stages=4, epilogue="tma", epilogue_split=2), 6),
    (dict(bn=256, stages=4, cluster=2, epilogue="tma", epilogue_split=2), 6),
    (dict(bn=256, stages=3, cluster=2, epilogue="tma"), 132),
])
def test_gpu_streamk_matches_float64(args, sms):
    """Stream-K (forced: no minimum saving) on a ragged shape whose work leaves a partial last wave (few CTAs force
    it), launched twice on the same flags: each launch correct, the flags zero again after each."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = (1000, 1064, 1040) if sms < 132 else (4096 - 64, 4096 + 8, 1096)
    shapes = streamk_buffers(GemmConfig(bn=args["bn"], cluster=args.get("cluster", 1)), sms)
    work = torch.empty(shapes["work"], device="cuda", dtype=torch.float32)
    flags = torch.zeros(shapes["flags"], device="cuda", dtype=torch.int32)
    for _launch in range(2):
        c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
        assert gpu_relative_error(torch, jit, "bf16", dict(streamk=True, streamk_min_saving=0, **args), c, k,
                                  sms=sms, work=work, flags=flags) < 1e-2
        assert not bool(flags.any())


def gpu_relative_error(torch, jit, dtype, args, c, k, **extra):
    """Run ``build(dtype, **args)`` on fresh random A (M, K), B (N, K) into ``c`` (M, N) (fp8: scales 0.5 and 0.25;
    ``extra``: further arguments, or ``sms`` instead of the device's SM count) → the relative Frobenius error of C
    against float64."""
    (m, n), fp8 = c.shape, dtype == "e4m3"
    kind = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}[dtype]
    a = torch.randn(m, k, device="cuda").to(kind)
    b = torch.randn(n, k, device="cuda").to(kind)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scales = dict(scale_a=0.5, scale_b=0.25) if fp8 else {}
    jit(gemm_kernel(dtype, **args))(a=a, b=b, c=c, m=m, n=n, k=k, **{"sms": sms, **scales, **extra})
    torch.cuda.synchronize()
    want = a.double() @ b.double().T * (0.125 if fp8 else 1.0)
    return (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, args", [
    ("bf16", dict(bn=192, stages=4, cluster=2, epilogue="rows", epilogue_split=3)),
    ("f16", dict(bn=256, stages=3, cluster=2, epilogue="rows", epilogue_split=2)),
    ("e4m3", dict(bn=192, stages=4, cluster=2, epilogue="rows", epilogue_split=3, promote=4)),
])
def test_gpu_rows_epilogue_on_unaligned_rows(dtype, args):
    """The smem-staged, row-coalesced epilogue where C's rows are not 16-byte aligned (N odd): every element written
    once, none outside C (the sentinel column past N survives)."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = 1001, 1063, 1040
    out_kind = torch.float16 if dtype == "f16" else torch.bfloat16
    padded = torch.full((m, n + 1), -7.0, device="cuda", dtype=out_kind)
    assert gpu_relative_error(torch, jit, dtype, args, padded[:, :n], k) < 1e-2
    assert bool((padded[:, n] == -7.0).all())


def test_setmaxnreg_kernels_load_through_the_driver_jit():
    """nvJitLink compiles relocatably and ignores setmaxnreg (ptxas C7504); such kernels are loaded from their PTX by
    the driver's whole-program JIT, which honours it; kernels without it keep nvJitLink's cubin."""
    from ptxgen.runtime.launcher import load_image

    warp_specialized = compile_kernel(text_module(), defer_assembly=True)
    assert "setmaxnreg" in warp_specialized.ptx and load_image(warp_specialized) == "ptx"
    assert not warp_specialized.assembled       # deciding needs no nvJitLink ...
    assert "C7504" in warp_specialized.info_log  # ... which, when asked, says it ignores setmaxnreg
    assert load_image(warp_specialized) == "ptx"
    plain = compile_kernel(parse_module((EXAMPLES / "sqrt_sin.tile").read_text(), file="examples/sqrt_sin.tile"))
    assert load_image(plain) == "cubin"


@pytest.mark.parametrize("a_major, b_major", [("K", "MN"), ("MN", "K"), ("MN", "MN")])
def test_operand_majors_through_layouts(a_major, b_major):
    """A (K, M) and B (K, N) row-major (M / N contiguous) go through the same kernel: only the smem layouts (MN-major
    GMMA atoms, seen by wgmma through smem.permute) and the number of TMA boxes change."""
    m, n, k = 200, 264, 136
    rng = np.random.default_rng()
    a_mk = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b_nk = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    a = a_mk if a_major == "K" else np.ascontiguousarray(a_mk.T)
    b = b_nk if b_major == "K" else np.ascontiguousarray(b_nk.T)
    c = np.full((m, n), -7.0, dtype=ml_dtypes.bfloat16)
    kernel = gemm_kernel("bf16", bn=128, stages=2, a_major=a_major, b_major=b_major)
    interpret(kernel, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "sms": 2})
    want = a_mk.astype(np.float64) @ b_nk.astype(np.float64).T
    assert rel_err(c, want) < 1e-2
    ptx = compile_kernel(kernel).ptx
    trans = (int(a_major == "MN"), int(b_major == "MN"))
    assert f"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    assert f", 1, 1, {trans[0]}, {trans[1]};" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("a_major, b_major", [("K", "MN"), ("MN", "MN")])
def test_gpu_operand_majors(a_major, b_major):
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = 1000, 1032, 520
    a_mk = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b_nk = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = a_mk if a_major == "K" else a_mk.T.contiguous()
    b = b_nk if b_major == "K" else b_nk.T.contiguous()
    c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    jit(gemm_kernel("bf16", a_major=a_major, b_major=b_major))(a=a, b=b, c=c, m=m, n=n, k=k, sms=sms)
    torch.cuda.synchronize()
    want = a_mk.double() @ b_nk.double().T
    assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2


@pytest.mark.parametrize("name, promote, extra", [
    ("e4m3", 1, {}), ("e5m2", 1, {}), ("e4m3", 3, {}),
    ("e4m3", 3, dict(epilogue="tma", overlap=1)),                 # C stored behind the next tile's first wgmmas
    ("e4m3", 2, dict(epilogue="tma", overlap=2, cluster=2)),
])
def test_fp8_with_scales_and_promotion(name, promote, extra):
    """fp8 operands (k-tiles of 128, wgmma k32), per-tensor scales, bf16 C; the products of every ``promote`` k-tiles
    are promoted into a separate f32 total (K = 400: four k-tiles, the last ragged; promote = 3 leaves a last chunk
    of one k-tile; warpgroup 1's chunks start half a chunk earlier)."""
    m, n, k = 200, 136, 400
    rng = np.random.default_rng()
    a = (rng.standard_normal((m, k)) * 2).astype(HOST[name])
    b = (rng.standard_normal((n, k)) * 2).astype(HOST[name])
    c = np.full((m, n), -7.0, dtype=ml_dtypes.bfloat16)
    kernel = gemm_kernel(name, bn=128, stages=3, promote=promote, **extra)
    interpret(kernel, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "sms": 2, "scale_a": 0.5, "scale_b": 0.25})
    want = a.astype(np.float64) @ b.astype(np.float64).T * 0.125
    assert rel_err(c, want) < 1e-2
    ptx = compile_kernel(kernel).ptx
    assert f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{name}.{name}" in ptx


def test_fp8_promotion_interval_is_checked():
    with pytest.raises(ValueError, match="promote must be at least 1"):
        gemm_kernel("e4m3", bn=128, promote=0)


@pytest.mark.gpu
@pytest.mark.parametrize("promote", [1, 4])
def test_gpu_fp8_matches_float64(promote):
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = 1000, 1032, 1024
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    jit(gemm_kernel("e4m3", bn=128, stages=6, promote=promote))(a=a, b=b, c=c, m=m, n=n, k=k, sms=sms, scale_a=0.5,
                                                                scale_b=0.25)
    torch.cuda.synchronize()
    want = a.double() @ b.double().T * 0.125
    assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2
