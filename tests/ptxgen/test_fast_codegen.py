"""codegen = "fast" (ptxgen.lower.target.CODEGENS): a shorter LLVM emission with the same mainloop, selectable per
GemmConfig (name suffix F), per jit / JitKernel / compile_kernel; the default stays byte-identical and unaffected."""
import re

import pytest

from ptxgen.kernels.gemm import GemmConfig, run
from ptxgen.lower import compile_kernel
from ptxgen.lower import target

STREAMK = "h128x256s4c2t2sk"   # the stream-K config choose_config picks for 4096 x 4096 x 14336 bf16 on 132 SMs


def _compiled(codegen: str):
    kernel = run.kernel_module(GemmConfig.from_name(STREAMK)).kernels[0]
    return compile_kernel(kernel, codegen=codegen)


@pytest.fixture(scope="module")
def both():
    """(default, fast, default again) compiles of the stream-K GEMM, assembled by nvJitLink."""
    return _compiled("default"), _compiled("fast"), _compiled("default")


def test_fast_keeps_the_mainloop_and_changes_only_the_rest(both):
    default, fast, _ = both
    assert fast.ptx != default.ptx          # the stream-K fixup's row indices and the partial stores differ
    # the wgmma instructions with their operands' registers renamed (the numbering shifts with the code before them)
    wgmma = lambda ptx: [re.sub(r"%[a-z]+\d+", "%", line.strip()) for line in ptx.splitlines()  # noqa: E731
                         if "wgmma." in line]
    assert wgmma(fast.ptx) == wgmma(default.ptx) and len(wgmma(default.ptx)) > 4
    assert fast.ptx.count("setmaxnreg") == default.ptx.count("setmaxnreg") == 2


def test_fast_costs_no_registers_or_spills(both):
    default, fast, _ = both
    assert fast.registers <= default.registers
    assert fast.spill_bytes <= default.spill_bytes


def test_fast_leaves_llvm_options_as_they_were(both):
    """-disable-lsr is process-wide in LLVM: a default emission after a fast one is the one before it."""
    default, _, again = both
    assert again.ptx == default.ptx


def test_fast_emission_has_no_loop_strength_reduction():
    """What "fast" removes from NVPTX's pipeline, read off LLVM's pass timing report of one emission."""
    import llvmlite.binding as llvm

    ir = run.kernel_module(GemmConfig.from_name(STREAMK)).kernels[0]
    from ptxgen.lower import lower_kernel

    llvm_ir = lower_kernel(ir, codegen="fast")
    reports = {}
    for codegen in ("default", "fast"):
        llvm.set_time_passes(True)
        try:
            target.emit_ptx(llvm_ir, codegen=codegen)
        finally:
            reports[codegen] = llvm.report_and_reset_timings()
            llvm.set_time_passes(False)
    assert "Loop Strength Reduction" in reports["default"]
    assert "Loop Strength Reduction" not in reports["fast"]


def test_fast_lowering_freezes_the_gmem_base_pointers():
    kernel = run.kernel_module(GemmConfig.from_name(STREAMK)).kernels[0]
    from ptxgen.lower import lower_kernel

    assert " = freeze ptr addrspace(1) " in lower_kernel(kernel, codegen="fast")
    assert "freeze" not in lower_kernel(kernel)


def test_codegen_names_and_errors():
    config = GemmConfig.from_name(STREAMK + "F")
    assert config.codegen == "fast" and config.name == STREAMK + "F"
    assert GemmConfig.from_name(STREAMK).codegen == "default"
    with pytest.raises(ValueError, match=r"^GemmConfig.codegen = 'fats': not one of 'default', 'fast' "
                                         r"\(did you mean 'fast'\?\)$"):
        GemmConfig(codegen="fats").validate()
    with pytest.raises(ValueError, match=r"^codegen = 'quick': not one of 'default', 'fast'$"):
        target.emit_ptx("", codegen="quick")


def test_jit_kernels_of_both_codegens_are_cached_apart(monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE", "0")
    from ptxgen.runtime import jit

    module = run.kernel_module(GemmConfig.from_name(STREAMK))
    default, fast = jit(module), jit(module, codegen="fast")
    assert (default.codegen, fast.codegen) == ("default", "fast")
    assert default.compile().ptx != fast.compile().ptx   # one IR hash, two cache entries


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 4096, 14336), (640, 8192, 4096)])
def test_gpu_fast_codegen_matches_float64(shape):
    """The library's choice compiled with codegen = "fast" (stream-K fixup and partial stores included at
    4096 x 4096 x 14336), fresh random inputs against a float64 reference."""
    from test_kernels_gemm import torch_or_skip, torch_rel_err

    from ptxgen.kernels import matmul
    from ptxgen.kernels.gemm import choose_config

    torch = torch_or_skip()
    m, n, k = shape
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    config = choose_config(m, n, k, "bf16", sms).replace(codegen="fast")
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        c = matmul(a, w.T, config=config)
        torch.cuda.synchronize()
        assert torch_rel_err(torch, c, a.double() @ w.double().T) < 1e-2
