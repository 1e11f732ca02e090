"""One compiled kernel serves every N of a GEMM configuration where the code is the same (ptxgen.runtime.kernel_cache:
specializations are compiled in their canonical form). The direct and rows epilogues store C through a gtensor,
whose specialization's extent multiple is N's power-of-two divisor (up to 16): before, N = 200 (8) and N = 208 (16)
compiled two kernels with the same code. Now a configuration has two forms per gtensor — C's rows 16-byte aligned
(N a multiple of 8 for a 16-bit C) or not — whatever N is, in this process and the next."""
import ml_dtypes
import numpy as np
import pytest

import ptxgen.lower
from ptxgen.kernels.gemm import GemmConfig, run
from ptxgen.lower import Specialization, TensorSpec
from ptxgen.runtime import cache, kernel_cache


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(d))
    monkeypatch.delenv("PTXGEN_CACHE", raising=False)
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})
    monkeypatch.setattr(kernel_cache, "_WIDTHS", {})
    monkeypatch.setattr(run, "_JIT", {})
    return d


def _compiles(monkeypatch):
    calls = []
    compile_kernel = ptxgen.lower.compile_kernel

    def counting(kernel, spec, *args, **kwargs):
        calls.append(str(spec))
        return compile_kernel(kernel, spec, *args, **kwargs)
    monkeypatch.setattr(ptxgen.lower, "compile_kernel", counting)
    return calls


def _spec(config, m, n, k):
    """The specialization a call of C (m, n) = A (m, k)·Bᵀ compiles for (the library's kernel arguments)."""
    a = np.zeros((m, k), ml_dtypes.bfloat16)
    b = np.zeros((n, k), ml_dtypes.bfloat16)
    c = np.zeros((m, n), ml_dtypes.bfloat16)
    bias = np.zeros(n, ml_dtypes.bfloat16)
    args = run.kernel_arguments(config, a, b, c, bias, m, n, k, lambda x: x.T,
                                lambda v, shape, along: np.broadcast_to(v if along else v[:, None], shape))
    if config.streamk:
        args.update(work=np.zeros((1, 1), np.float32), flags=np.zeros(1, np.int32))
    return run.jit_kernel(config).specialization(**args, sms=132)


# the widest access on C (the bias for a TMA-store epilogue): direct 2-element vectors along N; the rows epilogue
# stores single elements (a swapped kernel's C is a transposed view, which numpy arguments, copied to contiguous device
# buffers, cannot show: its GPU specialization is C's mode 0, extent N)
@pytest.mark.parametrize("name, width", [("h128x128s6", 2), ("h128x128s6r", None), ("h128x128s6tb", 2)])
def test_every_n_of_a_configuration_shares_one_kernel_per_alignment(cdir, monkeypatch, name, width):
    """N = 200, 208, 216, 232, 256 (C's rows aligned, extent multiples 8 and 16) share one compiled kernel; N = 201
    and 204 (rows not aligned: multiples 1 and 4) share another; a later process (memory cleared) compiles none."""
    config = GemmConfig.from_name(name)
    kern = run.jit_kernel(config)
    calls = _compiles(monkeypatch)
    aligned = {n: kern.compile(_spec(config, 300, n, 128)) for n in (200, 208, 216, 232)}
    assert len(calls) == 1
    assert len({id(c) for c in aligned.values()}) == 1
    tensor = "bias" if config.bias else "c"
    specs = {str(_spec(config, 300, n, 128)) for n in (200, 208)}
    assert len(specs) == 2                     # the specializations differ: 8 and 16
    got = aligned[200].vector_widths.get(tensor)
    assert got == width, aligned[200].vector_widths
    unaligned = {n: kern.compile(_spec(config, 300, n, 128)) for n in (201, 204)}
    assert len(calls) == 2 and len({id(c) for c in unaligned.values()}) == 1
    assert unaligned[201] is not aligned[200]
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})    # as a new process starts
    monkeypatch.setattr(kernel_cache, "_WIDTHS", {})
    monkeypatch.setattr(run, "_JIT", {})
    again = run.jit_kernel(config).compile(_spec(config, 300, 256, 128))
    assert len(calls) == 2 and again.from_cache
    assert again.ptx == aligned[200].ptx


def test_canonical_caps_each_extent_multiple_at_the_widest_access():
    spec = Specialization.of(c=TensorSpec(1, True, 16), bias=TensorSpec(1, True, 8), work=TensorSpec(1, True, 4))
    assert str(spec.canonical({"c": 2, "bias": 8})) == "c:c1a2,bias:c1a8,work:c1a1"
    assert str(spec.pattern()) == "c:c1a1,bias:c1a1,work:c1a1"
    # the code depends on "is the extent a multiple of this access's width": kept by the cap for every width
    for multiple in (1, 2, 4, 8, 16):
        for widest in (1, 2, 4, 8, 16):
            capped = Specialization.of(c=TensorSpec(1, True, multiple)).canonical({"c": widest})["c"].extent_multiple
            for width in (w for w in (1, 2, 4, 8, 16) if w <= widest):
                assert (multiple % width == 0) == (capped % width == 0)


def test_the_canonical_kernel_is_the_one_its_spec_compiles(cdir):
    """The code of a specialization and of its canonical form is the same, PTX line for line (sqrt_sin: its x and z
    are read and written in 4-element vectors, so 16 and 4 give one kernel, 2 another)."""
    from ptxgen.kernels.elementwise import build
    from ptxgen.lower import compile_kernel

    kernel = build().kernels[0]
    for multiple in (16, 8):
        spec = Specialization.of(x=TensorSpec(0, True, multiple), z=TensorSpec(0, True, multiple))
        compiled = compile_kernel(kernel, spec, defer_assembly=True)
        assert compiled.vector_widths == {"x": 4, "z": 4}
        canonical = compile_kernel(kernel, spec.canonical(compiled.vector_widths), defer_assembly=True)
        assert canonical.ptx == compiled.ptx
    two = Specialization.of(x=TensorSpec(0, True, 2), z=TensorSpec(0, True, 2))
    assert compile_kernel(kernel, two, defer_assembly=True).ptx != canonical.ptx
    assert cache.enabled()
