"""CPU tests of the lowering (tile IR → LLVM IR → PTX → cubin), no GPU needed.

- every example (and ALLOPS, which uses every op) lowers generic and specialized; the PTX assembles to a cubin
  with nvJitLink, has no local-memory depot (no spills), and holds the expected instructions: 16-byte vector
  accesses when the tensors are contiguous and aligned, none otherwise; the butterfly of shfl.sync.bfly over
  exactly the lane bits of a row for l2norm;
- a planted PTX error surfaces naming the IR op (and its file:line:col) the bad line was emitted for;
- the static plans (vector grouping, reduction lanes) derived from layouts, ``emit_layout`` executed on the host
  through LLVM's JIT, the transcendental algorithms measured in numpy, the specialization rules and the
  launcher's argument packing.
"""
from __future__ import annotations

import ctypes
import pathlib
import re

import numpy as np
import pytest

import layoutc as lc
from ptxgen.ir.text import parse_module
from ptxgen.lower import (
    KernelCompileError, LoweringError, Specialization, TensorSpec, assemble, compile_kernel, kernel_abi,
    lower_kernel,
)
from ptxgen.lower import mathlib, target
from ptxgen.lower.plans import ReducePlanError, plan_access, plan_reduce, tile_coordinates
from ptxgen.lower.sourcemap import source_of
from ptxgen.runtime import LaunchError, jit

from lower_cases import ALLOPS, DTYPES, HostLX, copy_scale

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
V4_LOAD = re.compile(r"ld\.global(\.\w+)*\.v4\.(f32|b32)")
V4_STORE = re.compile(r"st\.global(\.\w+)*\.v4\.(f32|b32)")


def load(name):
    return parse_module((EXAMPLES / f"{name}.tile").read_text(), file=f"examples/{name}.tile").kernels[0]


def allops():
    return parse_module(ALLOPS, file="tests/ptxgen/lower_cases.py").kernels[0]


def contiguous_spec(kernel, aligned=True, extent_multiple=1):
    return Specialization(tuple(
        (p.name, TensorSpec(p.type.rank - 1, aligned, extent_multiple))
        for p in kernel.params if hasattr(p.type, "rank")))


KERNELS = {"sqrt_sin": lambda: load("sqrt_sin"), "l2norm": lambda: load("l2norm"), "allops": allops}


@pytest.fixture(scope="module")
def compiled():
    cache = {}

    def get(name, which):
        key = (name, which)
        if key not in cache:
            k = KERNELS[name]()
            spec = {"generic": Specialization.generic(), "contiguous": contiguous_spec(k),
                    "exact": contiguous_spec(k, extent_multiple=16)}[which]
            cache[key] = compile_kernel(k, spec)
        return cache[key]

    return get


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("which", ["generic", "contiguous", "exact"])
def test_every_kernel_lowers_and_assembles_without_spills(compiled, name, which):
    c = compiled(name, which)
    assert c.cubin[:4] == b"\x7fELF"
    assert ".target sm_90a" in c.ptx and f".entry {name}(" in c.ptx
    assert "__local_depot" not in c.ptx and "local" not in " ".join(c.ptx_instructions())
    # <= 64 registers: l2norm's 512-thread CTAs then fit two per SM (65536 registers). Its generic specialization
    # (strided or unaligned tensors: predicated scalar accesses with their own addresses) needs more; it only has to
    # launch: 512 threads x 128 registers = 65536.
    limit = 128 if (name, which) == ("l2norm", "generic") else 64
    assert c.registers is not None and c.registers <= limit, c.info_log
    assert c.spill_bytes == 0, c.info_log
    assert f".reqntid {KERNELS[name]().attrs['block'][0]}, 1, 1" in c.ptx


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.tile")), ids=lambda p: p.stem)
def test_every_example_file_lowers(path):
    """Every kernel of every examples/*.tile lowers and assembles, generic and contiguous; a kernel using ops that
    have no lowering yet (the next increment's dialects) is skipped, naming them."""
    from ptxgen.ir.core import walk
    from ptxgen.ir.ops import OPS

    module = parse_module(path.read_text(), file=f"examples/{path.name}")
    for kernel in module.kernels:
        missing = sorted({op.name for op in walk(kernel.body) if not hasattr(OPS[op.name], "lower")})
        if missing:
            pytest.skip(f"@{kernel.name} uses ops without a lowering yet: {', '.join(missing)}")
        for spec in (Specialization.generic(), contiguous_spec(kernel)):
            c = compile_kernel(kernel, spec)
            assert c.spill_bytes == 0 and "__local_depot" not in c.ptx


def test_sqrt_sin_vectorizes_only_when_specialized(compiled):
    generic, contiguous = compiled("sqrt_sin", "generic"), compiled("sqrt_sin", "contiguous")
    assert V4_LOAD.search(contiguous.ptx) and V4_STORE.search(contiguous.ptx)
    assert not V4_LOAD.search(generic.ptx) and not V4_STORE.search(generic.ptx)
    # sin: the polynomial path (fma), not the approximate instruction; sqrt: IEEE
    assert "sin.approx" not in contiguous.ptx and "sqrt.rn.f32" in contiguous.ptx


def test_exact_extent_drops_the_per_element_edge_path(compiled):
    """With the extent a multiple of the vector width, one predicate per vector is exact: no scalar accesses."""
    exact, ragged = compiled("sqrt_sin", "exact"), compiled("sqrt_sin", "contiguous")
    scalar = re.compile(r"(ld|st)\.global\.b32")
    assert not scalar.search(exact.ptx)
    assert scalar.search(ragged.ptx)  # the edge path of a partial last vector
    assert len(exact.ptx_instructions()) < len(ragged.ptx_instructions())


def test_l2norm_reduces_with_a_butterfly_over_the_row_lanes(compiled):
    c = compiled("l2norm", "contiguous")
    masks = [int(m) for m in re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+), 0x1f, -1;", c.ptx)]
    # one CTA-wide frag.reduce of the row: a butterfly over the 5 lane bits, then the 16 warps' partials through
    # shared memory behind a barrier (bar.sync, no shuffle)
    assert sorted(masks) == [1, 2, 4, 8, 16]
    assert re.search(r"bar\.sync\s+\d+, 512;", c.ptx)
    assert len(V4_LOAD.findall(c.ptx)) == 12  # 4 vectors per half: 2 halves in the first loop, 1 in the two-pass loop
    assert len(V4_STORE.findall(c.ptx)) == 12  # 2 halves in the one-pass branch, 1 in the two-pass loop
    assert "rsqrt.approx.f32" in c.ptx
    assert '.pragma "nounroll"' in c.ptx  # unroll = 1 (default) is kept


def test_allops_reductions_and_unroll(compiled):
    c = compiled("allops", "contiguous")
    # 3 reductions of a (2, 64) tile where a row spans a whole warp: 5 lane bits each
    assert c.ptx.count("shfl.sync.bfly.b32") == 15
    assert "max.NaN.f32" in c.ptx and "min.NaN.f32" in c.ptx
    assert "cvt.rn.f16.f32" in c.ptx
    # unroll = 2: the loop body (2 values x exp and exp2 = 4 ex2.approx) twice, plus the remainder iteration
    assert c.ptx.count("ex2.approx") == 12


def test_pass_pipeline_follows_the_unroll_requests(compiled):
    """A module asking for unrolling goes through O1 (the only pipeline that rotates and unrolls loops); every other
    module through the light pipeline, which keeps the loops rolled (the nounroll pragma) and shrinks the module."""
    from ptxgen.lower import target

    unrolled = compiled("allops", "contiguous")
    assert target.pipeline_for(unrolled.llvm_ir) == "O1"
    rolled = compiled("l2norm", "contiguous")
    assert target.pipeline_for(rolled.llvm_ir) == "light"
    assert '.pragma "nounroll"' in rolled.ptx
    light = target.optimize(rolled.llvm_ir)
    assert "unroll.disable" in light and len(light.splitlines()) < len(rolled.llvm_ir.splitlines())


ADJACENT_LOADS = """target triple = "nvptx64-nvidia-cuda"
define i32 @pair(ptr addrspace(1) %p) {
  %q = getelementptr i32, ptr addrspace(1) %p, i64 1
  %a = load i32, ptr addrspace(1) %p, align 8
  %b = load i32, ptr addrspace(1) %q, align 4
  %s = add i32 %a, %b
  ret i32 %s
}
"""


def _vectorizer(on: bool) -> None:
    import llvmlite.binding as llvm

    llvm.set_option("ptxgen", f"-disable-nvptx-load-store-vectorizer={'false' if on else 'true'}")


def test_nvptx_load_store_vectorizer_is_off_and_changes_none_of_our_kernels(compiled):
    """target turns NVPTX's load-store vectorizer off, since the lowering chooses every access width: two adjacent
    aligned scalar loads stay two (LLVM's own would merge them into ld.v2), and the PTX of our kernels — a TMA-store
    and a stream-K GEMM, fp8 block scales, attention, the three example kernels — is the same with it on."""
    from ptxgen.kernels.attention import build as build_attention, choose_config as attention_config
    from ptxgen.kernels.gemm import build as build_gemm
    from ptxgen.kernels.gemm.config import GemmConfig
    from ptxgen.lower import lower_kernel

    target._initialized()
    assert "ld.global.v2" not in target.emit_ptx(ADJACENT_LOADS)
    modules = [lower_kernel(build_gemm(GemmConfig.from_name(name, dtype)), verify=False)
               for name, dtype in (("h128x256s4t2sk", "bf16"), ("h128x80s6g1txT", "bf16"), ("h256x128s3tBS", "e4m3"))]
    modules.append(lower_kernel(build_attention(attention_config("bf16", 128, True, seqlens=(1024, 1024))),
                                verify=False))
    modules += [compiled(name, "contiguous").llvm_ir for name in sorted(KERNELS)]
    with target._LOCK:
        try:
            _vectorizer(True)
            assert "ld.global.v2" in target.emit_ptx(ADJACENT_LOADS)
            with_it = [target.emit_ptx(ir) for ir in modules]
        finally:
            _vectorizer(False)
    assert [target.emit_ptx(ir) for ir in modules] == with_it


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_element_type_loads_casts_and_stores(dtype):
    kernel = parse_module(copy_scale(dtype), file=f"copy_scale_{dtype}.tile").kernels[0]
    generic = compile_kernel(kernel)
    spec = compile_kernel(kernel, Specialization.of(x=TensorSpec(0, True, 16), z=TensorSpec(0, True, 16)))
    for c in (generic, spec):
        assert c.spill_bytes == 0 and "__local_depot" not in c.ptx
    vector = re.compile(r"(ld|st)\.global\.v[24]\.b(32|64)")
    assert not vector.search(generic.ptx)
    assert bool(vector.search(spec.ptx)) == (dtype != "i1")  # i1 is a byte in memory, kept scalar
    if dtype in ("e4m3", "e5m2"):
        assert f"cvt.rn.satfinite.{dtype}x2.f32" in spec.ptx and f"cvt.rn.f16x2.{dtype}x2" in spec.ptx


def test_planted_ptx_error_names_the_ir_op():
    kernel = load("sqrt_sin")
    c = compile_kernel(kernel, contiguous_spec(kernel))
    lines = c.ptx.splitlines()
    # the line right after the .loc of frag.sqrt (examples/sqrt_sin.tile:13:3)
    at = next(i for i, line in enumerate(lines) if re.match(r"\s*\.loc\s+1 13 3\b", line))
    lines.insert(at + 1, "\tbogus.instruction.f32 %r1, %r1;")
    bad = "\n".join(lines) + "\n"
    with pytest.raises(KernelCompileError) as info:
        assemble(bad, kernel)
    text = str(info.value)
    assert "frag.sqrt at examples/sqrt_sin.tile:13:3" in text
    assert "bogus.instruction" in text
    assert source_of(bad, at + 2)[:3] == ("examples/sqrt_sin.tile", 13, 3)


def test_ptx_loc_lines_name_the_ops_of_the_source():
    kernel = load("l2norm")
    c = compile_kernel(kernel, contiguous_spec(kernel))
    assert '.file\t1 "examples/l2norm.tile"' in c.ptx or '.file 1 "examples/l2norm.tile"' in c.ptx
    shfl_line = next(i for i, line in enumerate(c.ptx.splitlines(), 1) if "shfl.sync.bfly" in line)
    src = source_of(c.ptx, shfl_line)
    assert src[:3] == ("examples/l2norm.tile", 32, 5)  # the row's frag.reduce (in the loop)


def test_lowering_error_names_the_op():
    text = (EXAMPLES / "l2norm.tile").read_text().replace(
        "%row_sums = frag.reduce %squares, %thread", "%row_sums = frag.reduce %squares, %row")
    kernel = parse_module(text, file="bad.tile").kernels[0]
    # the verifier rejects it first (a reduction across warps); the lowering's own check, unverified:
    with pytest.raises(LoweringError, match=r"bad\.tile:32:5: frag\.reduce: .*thread operand"):
        lower_kernel(kernel, verify=False)


def test_abi_of_a_gtensor_is_pointer_extents_strides():
    abi = kernel_abi(load("l2norm"))
    assert [(s.param, s.kind, s.mode, s.abi) for s in abi] == [
        ("x", "ptr", 0, "ptr"), ("x", "extent", 0, "i32"), ("x", "extent", 1, "i32"), ("x", "stride", 0, "i64"),
        ("x", "stride", 1, "i64"), ("y", "ptr", 0, "ptr"), ("y", "extent", 0, "i32"), ("y", "extent", 1, "i32"),
        ("y", "stride", 0, "i64"), ("y", "stride", 1, "i64"), ("m", "scalar", 0, "i32"), ("eps", "scalar", 0, "f32")]
    c = compile_kernel(load("l2norm"))
    params = re.findall(r"\.param \.(\w+)", c.ptx)
    assert params == ["u64", "u32", "u32", "u64", "u64", "u64", "u32", "u32", "u64", "u64", "u32", "f32"]


# -- plans ---------------------------------------------------------------------------------------------------


def test_plan_access_groups_contiguous_runs_from_the_layouts():
    tv = lc.parse("((32,4),8):((32,1),4)")  # l2norm: lane l holds columns 8l..8l+7 of row w
    plan = plan_access(tv, (4, 256), 1, 4)
    assert plan.width == 4 and plan.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert plan_access(tv, (4, 256), 1, 2).width == 2  # origin only known to be even
    assert plan_access(tv, (4, 256), 0, 4).width == 1  # column-major tensor: rows are strided
    assert plan_access(tv, (4, 256), None, 4).width == 1  # no stride-1 mode
    # values interleaved across threads: thread t holds t, t+256, ...: no two of a thread's values adjacent
    assert plan_access(lc.parse("(256,4):(1,256)"), 1024, 0, 4).width == 1
    # a thread's run starting at an odd element can't be 8-byte aligned
    assert plan_access(lc.parse("(4,2):(3,1)"), 12, 0, 4).width == 1
    # a thread's values in another order still group: lanes are taken in coordinate order
    swapped = plan_access(lc.parse("(64,(2,2)):(4,(2,1))"), 256, 0, 4)
    assert swapped.width == 4 and swapped.groups == ((0, 2, 1, 3),)


def test_tile_coordinates_are_additive_layouts():
    tv = lc.parse("((32,4),8):((32,1),4)")
    rows, cols = tile_coordinates(tv, (4, 256))
    for t in (0, 5, 37, 127):
        for v in range(8):
            idx = tv((t, v))
            assert rows.thread(t) + rows.values[v] == idx % 4
            assert cols.thread(t) + cols.values[v] == idx // 4


def test_plan_reduce_finds_the_lane_bits_of_a_row():
    assert plan_reduce(lc.parse("((32,4),8):((32,1),4)"), (4, 256), 1).lane_masks == (1, 2, 4, 8, 16)
    # 8 rows x 16 columns, 32 threads: thread (t0, t1) holds row t1, columns 4 t0 .. 4 t0 + 3
    p = plan_reduce(lc.parse("((4,8),4):((32,1),8)"), (8, 16), 1)
    assert p.lane_masks == (1, 2) and p.groups == ((0, 1, 2, 3),)
    # the same tile reduced over columns: each column is spread over lanes 4 bits apart
    p = plan_reduce(lc.parse("((4,8),4):((32,1),8)"), (8, 16), 0)
    assert p.lane_masks == (4, 8, 16) and p.groups == ((0,), (1,), (2,), (3,))


def test_plan_reduce_rejects_rows_that_are_not_a_lane_coset():
    # thread t holds a whole column of a (3,4) tile: every row is on all 4 threads, one value each: fine
    assert plan_reduce(lc.parse("(4,3):(3,1)"), (3, 4), 1).lane_masks == (1, 2)
    # thread t holds elements 2t, 2t+1 of a (3,4) tile: row 0 is value 0 of thread 0 but value 1 of thread 1
    with pytest.raises(ReducePlanError, match="line 0 is held by threads"):
        plan_reduce(lc.parse("(6,2):(2,1)"), (3, 4), 1)


# -- emit_layout, executed on the host through LLVM's JIT ------------------------------------------------------


@pytest.mark.parametrize("text", ["(256,4):(4,1)", "((32,4),8):((32,1),4)", "((3,5),(2,7)):((14,1),(7,70))",
                                  "(6,10):(10,1)", "((2,3),4):((0,8),1)", "7:3", "1:0"])
def test_emit_layout_matches_the_layout(text):
    import llvmlite.binding as llvm
    from llvmlite import ir

    from ptxgen.lower.context import emit_layout

    layout = lc.parse(text)
    mod = ir.Module("emit_layout")
    i32 = ir.IntType(32)
    fn = ir.Function(mod, ir.FunctionType(i32, [i32]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(emit_layout(HostLX(b), layout, fn.args[0]))
    target._initialized()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine()
    m = llvm.parse_assembly(str(mod))
    engine = llvm.create_mcjit_compiler(m, tm)
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(engine.get_function_address("f"))
    assert [f(i) for i in range(lc.size(layout))] == [layout(i) for i in range(lc.size(layout))]
    assert emit_layout(HostLX(b), layout, ir.Constant(i32, lc.size(layout) - 1)).constant == \
        layout(lc.size(layout) - 1)


# -- transcendentals (the algorithms, through the numpy backend) ---------------------------------------------


def _ulp_error(got, want):
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("name, lo, hi", [("sin", -np.pi, np.pi), ("sin", -2.0**17, 2.0**17),
                                          ("cos", -2.0**17, 2.0**17), ("exp", -103.0, 88.7), ("log", 0.5, 2.0)])
def test_transcendental_algorithms_are_within_two_ulp(name, lo, hi):
    rng = np.random.default_rng()
    x = rng.uniform(lo, hi, 200_000).astype(np.float32)
    with np.errstate(all="ignore"):
        got = getattr(mathlib, name)(mathlib.NumpyOps(), x)
    want = getattr(np, name)(x.astype(np.float64))
    err = _ulp_error(got, want)
    bad = (err > 2.0) & (np.abs(got - want) > 2.0**-24)
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])


def test_log_over_the_whole_range_and_specials():
    rng = np.random.default_rng()
    x = np.exp(rng.uniform(np.log(1e-44), np.log(3e38), 200_000)).astype(np.float32)
    with np.errstate(all="ignore"):
        got = mathlib.log(mathlib.NumpyOps(), x)
    assert _ulp_error(got, np.log(x.astype(np.float64))).max() <= 2.0
    with np.errstate(all="ignore"):
        special = mathlib.log(mathlib.NumpyOps(), np.array([0.0, -1.0, np.inf, np.nan], np.float32))
        e = mathlib.exp(mathlib.NumpyOps(), np.array([np.inf, -np.inf, np.nan, 89.0], np.float32))
    assert special[0] == -np.inf and np.isnan(special[1]) and special[2] == np.inf and np.isnan(special[3])
    assert e[0] == np.inf and e[1] == 0.0 and np.isnan(e[2]) and e[3] == np.inf


# -- specialization and the launcher's argument packing (no device) ------------------------------------------


def test_tensor_spec_rules():
    assert TensorSpec.of(0, (1000,), (1,), 4) == TensorSpec(0, True, 8)
    assert TensorSpec.of(4, (1000,), (1,), 4) == TensorSpec(0, False, 8)          # base not 16-byte aligned
    assert TensorSpec.of(0, (5, 300), (300, 1), 4) == TensorSpec(1, True, 4)      # rows of 1200 bytes
    assert TensorSpec.of(0, (5, 301), (301, 1), 4) == TensorSpec(1, False, 1)     # rows of 1204 bytes
    assert TensorSpec.of(0, (5, 300), (1, 5), 4) == TensorSpec(0, False, 1)       # column-major, 20-byte columns
    assert TensorSpec.of(0, (1000,), (2,), 4) == TensorSpec()                      # strided: generic
    assert TensorSpec.of(0, (1, 64), (1, 1), 4) == TensorSpec(1, True, 16)        # extent-1 modes ignored


class FakeCudaArray:
    """A device array stand-in: ``__cuda_array_interface__`` at an arbitrary address."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


def test_launcher_binds_arguments_and_specializes():
    k = jit(parse_module((EXAMPLES / "sqrt_sin.tile").read_text()))
    x, z = FakeCudaArray(0x10000, (1000,)), FakeCudaArray(0x20004, (1000,))
    assert k.argument_values(x=x, z=z, n=1000) == [0x10000, 1000, 1, 0x20004, 1000, 1, 1000]
    spec = k.specialization(x=x, z=z, n=1000)
    assert spec["x"] == TensorSpec(0, True, 8) and spec["z"] == TensorSpec(0, False, 8)
    strided = FakeCudaArray(0x10000, (500,), strides=(8,))
    assert k.specialization(x=strided, z=z, n=500)["x"] == TensorSpec()
    assert k.argument_values(strided, z, 500)[:3] == [0x10000, 500, 2]
    with pytest.raises(LaunchError, match=r"@sqrt_sin: argument %x: the kernel wants f32; .*, not typestr '<f8'"):
        k.argument_values(x=FakeCudaArray(0, (4,), "<f8"), z=z, n=4)
    with pytest.raises(LaunchError, match="@sqrt_sin: missing argument n"):
        k.argument_values(x=x, z=z)
    assert k.written == {"z"}


def test_compiled_kernels_are_cached_per_specialization():
    k = jit(parse_module((EXAMPLES / "sqrt_sin.tile").read_text()))
    a = k.compile(Specialization.of(x=TensorSpec(0, True, 1), z=TensorSpec(0, True, 1)))
    b = k.compile(Specialization.of(x=TensorSpec(0, True, 1), z=TensorSpec(0, True, 1)))
    c = k.compile(Specialization.generic())
    assert a is b and a is not c and a.ptx != c.ptx


def test_launcher_packs_one_argument_block_per_call(monkeypatch):
    """The launch path end to end with the driver replaced by a recorder: the void*[] array points at one 8-byte
    slot per parameter holding the ABI values; the grid follows the host expression; the kernel is compiled once
    per specialization; a prepared call site rewrites only pointer slots."""
    from types import SimpleNamespace

    from ptxgen.runtime import kernel_launch as launch

    launches = []
    abi = ["Q", "i", "q", "Q", "i", "q", "i"]  # sqrt_sin: x (ptr, extent, stride), z (...), n

    class FakeCU:
        class CUstream(int):
            pass

        class CUlaunchConfig:
            attrs, numAttrs = [], 0

        @staticmethod
        def cuLaunchKernelEx(cfg, handle, params, extra):
            ptrs = (ctypes.c_void_p * len(abi)).from_address(params)
            ctype = {"Q": ctypes.c_uint64, "i": ctypes.c_int32, "q": ctypes.c_int64}
            values = [ctype[c].from_address(ptrs[i]).value for i, c in enumerate(abi)]
            launches.append((handle, (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                             (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ), values))
            return (0,)

    class FakeModule:
        def __init__(self, cubin):
            assert cubin[:4] == b"\x7fELF"

        def function(self, name):
            return SimpleNamespace(handle=f"{name}@{id(self)}")

    monkeypatch.setattr(launch, "_cu", lambda: FakeCU)
    monkeypatch.setattr(launch, "Module", FakeModule)
    monkeypatch.setattr(launch, "context", lambda: None)
    monkeypatch.setattr(launch, "current_device", lambda: 0)
    k = jit(parse_module((EXAMPLES / "sqrt_sin.tile").read_text()))
    x, z = FakeCudaArray(0x10000, (1000,)), FakeCudaArray(0x20000, (1000,))
    k(x=x, z=z, n=1000)
    x2, z2 = FakeCudaArray(0x30000, (3001,)), FakeCudaArray(0x40000, (3001,))
    k(x2, z2, 3001)  # odd extent: another specialization
    k(x=FakeCudaArray(0x50004, (3001,)), z=z2, n=3001)  # misaligned x: another one
    assert [g for _, g, _, _ in launches] == [(1, 1, 1), (3, 1, 1), (3, 1, 1)]
    assert all(b == (256, 1, 1) for _, _, b, _ in launches)
    assert launches[0][3] == [0x10000, 1000, 1, 0x20000, 1000, 1, 1000]
    assert launches[1][3] == [0x30000, 3001, 1, 0x40000, 3001, 1, 3001]
    assert len({h for h, _, _, _ in launches}) == 3
    assert len(k._loaded) == 3
    k(x=FakeCudaArray(0x60000, (1000,)), z=FakeCudaArray(0x70000, (1000,)), n=1000)
    assert launches[-1][0] == launches[0][0] and len(k._loaded) == 3  # same specialization: reused
    k(x=x, z=z, n=0)  # empty grid: nothing launched
    assert len(launches) == 4

    site = k.prepare(x=x, z=z, n=1000)
    site()
    site(x=FakeCudaArray(0x80000, (1000,)))
    assert launches[-2][3] == [0x10000, 1000, 1, 0x20000, 1000, 1, 1000]
    assert launches[-1][3] == [0x80000, 1000, 1, 0x20000, 1000, 1, 1000]
    with pytest.raises(LaunchError, match="x differs from the prepared call"):
        site(x=FakeCudaArray(0x80004, (1000,)))  # the kernel was specialized for an aligned x
    with pytest.raises(LaunchError, match="argument does not fit"):
        k(x=x, z=z, n=1 << 40)
