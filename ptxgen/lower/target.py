"""llvmlite's NVPTX target: LLVM IR text → optimized module → PTX text.

``emit_ptx(llvm_ir, arch)`` parses and verifies the module (a module LLVM's verifier rejects raises ``InvalidModule``,
never aborts the process), runs a short pass pipeline (``pipeline_for``: LLVM's O1
when a loop asks to be unrolled, else instcombine, simplifycfg and GVN), and emits
PTX with the target machine for ``arch`` (``sm_90a``: ``.target sm_90a``, PTX ISA 8.0 — raise ``PTX_FEATURE`` only
when an instruction needs a newer ISA), NVPTX's load-store vectorizer off (the lowering chooses every access width).
llvmlite is not thread-safe: one lock serializes every use.
"""
from __future__ import annotations

import functools
import threading

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURE = "+ptx80"
_LOCK = threading.RLock()


def _llvm():
    import llvmlite.binding as llvm

    return llvm


class InvalidModule(ValueError):
    """LLVM's parser or module verifier rejects the LLVM IR (``.llvm_message`` holds LLVM's words)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.llvm_message = message


@functools.lru_cache(maxsize=None)
def _initialized() -> bool:
    llvm = _llvm()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # LLVM's IR parser verifies a module that carries debug info of the current version while "upgrading" it, and a
    # module that fails aborts the whole process (report_fatal_error: "Broken module found, compilation aborted!").
    # Our modules are always of the current version, so the upgrade has nothing else to do: turn it off and verify
    # with Module.verify, which raises instead. (A process-wide LLVM option: other llvmlite users in the process no
    # longer have old debug info upgraded or stripped either.)
    llvm.set_option("ptxgen", "-disable-auto-upgrade-debug-info")
    # The lowering chooses the width of every access (gmem/smem vectors, ldmatrix, TMA), so NVPTX's IR-level
    # load-store vectorizer has nothing to merge: over the 640 modules the CPU test suite compiles (GEMMs, attention,
    # transposes, norms, elementwise) the PTX is the same without it, and it was ~40% of a stream-K GEMM's PTX
    # emission (docs/gpu-runs/2026-11-28-s36.log section 13). Process-wide, like the option above.
    llvm.set_option("ptxgen", "-disable-nvptx-load-store-vectorizer")
    return True


@functools.lru_cache(maxsize=None)
def target_machine(arch: str = "sm_90a", features: str = PTX_FEATURE):
    """The NVPTX target machine for ``arch`` at -O3 (cached)."""
    _initialized()
    llvm = _llvm()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=features, opt=3)


def data_layout(arch: str = "sm_90a") -> str:
    return str(target_machine(arch).target_data)


def optimize(llvm_ir: str, arch: str = "sm_90a") -> str:
    """The module after the pass pipeline (``pipeline_for``), as text (for inspection)."""
    with _LOCK:
        return str(_optimized(llvm_ir, arch))


# What the lowering leaves for LLVM to clean up: folding of the index arithmetic and of the constant branches of
# specialization (instcombine), the blocks those leave empty (simplifycfg), the address computations repeated per
# access (GVN: without it NVPTX's codegen spends much longer on them), and values computed before a branch but used in
# one arm only (sinking: without it ptxas serializes every wgmma of gemm_hopper's cluster-1 TMA-store variant, C7514;
# after sinking its epilogue converts pairwise, cvt.rn.bf16x2, next to the stores — tests/ptxgen/test_gemm_hopper.py compiles
# every benchmark variant and checks for C7514). Against LLVM's O1 on the gemm_hopper variants: less pass time, the
# same emit time, fewer SASS instructions, no C7514 (the figures: docs/gpu-runs/notes-from-code.md).
LIGHT_PIPELINE = ("instruction_combine", "simplify_cfg", "new_gvn", "sinking")
# unroll requests (scf.for unroll = k) need O1's loop passes (simplify, rotate, unroll)
_UNROLL_REQUEST = ("llvm.loop.unroll.count", "llvm.loop.unroll.full")


def pipeline_for(llvm_ir: str) -> str:
    """``"O1"`` when the module asks for loop unrolling (LLVM's O1 pipeline carries it out), else ``"light"``
    (``LIGHT_PIPELINE``). Post: every ``scf.for unroll = k`` request is honoured."""
    return "O1" if any(key in llvm_ir for key in _UNROLL_REQUEST) else "light"


def verified_module(llvm_ir: str):
    """The parsed llvmlite module of ``llvm_ir`` after LLVM's module verifier. Raises InvalidModule (never aborts):
    ``InvalidModule('Range must not be empty! ...')``. Post: the module is valid LLVM IR."""
    llvm = _llvm()
    _initialized()
    try:
        mod = llvm.parse_assembly(llvm_ir)
    except RuntimeError as e:
        raise InvalidModule(str(e)) from None
    try:
        mod.verify()
    except RuntimeError as e:
        mod.close()
        raise InvalidModule(str(e)) from None
    return mod


def _optimized(llvm_ir: str, arch: str):
    llvm = _llvm()
    tm = target_machine(arch)
    mod = verified_module(llvm_ir)
    pto = llvm.create_pipeline_tuning_options(speed_level=1)
    pb = llvm.create_pass_builder(tm, pto)
    if pipeline_for(llvm_ir) == "O1":
        pb.getModulePassManager().run(mod, pb)
    else:
        passes = llvm.create_new_module_pass_manager()
        for name in LIGHT_PIPELINE:
            getattr(passes, f"add_{name}_pass")()
        passes.run(mod, pb)
    return mod


def emit_ptx(llvm_ir: str, arch: str = "sm_90a") -> str:
    """PTX for the (unoptimized) LLVM IR text ``llvm_ir``. Raises InvalidModule when LLVM rejects it."""
    with _LOCK:
        mod = _optimized(llvm_ir, arch)
        return target_machine(arch).emit_assembly(mod)
