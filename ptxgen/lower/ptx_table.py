"""The one table of inline-PTX instruction builders: every PTX instruction the lowering emits as inline asm
(because LLVM's NVPTX backend has no intrinsic for it, or none that gives the exact form) is an entry here, and
``emit(lx, name, args)`` is the only place that builds an ``asm`` call. Later increments add wgmma, TMA, mbarrier,
fences and setmaxnreg here.

An entry gives the PTX template (``$0`` the result, ``$1…`` the operands), the LLVM constraint string, the result
and operand LLVM types, and flags:

- ``convergent``: the instruction synchronizes lanes (shfl.sync, wgmma, …); LLVM must not move it across
  control flow that changes which threads execute it;
- ``side_effect``: the instruction has effects beyond its result (memory, barriers): ``asm sideeffect`` with a
  ``~{memory}`` clobber, so LLVM neither drops nor reorders it.

Constraint letters (NVPTX): ``h`` 16-bit, ``r`` 32-bit, ``l`` 64-bit, ``f`` f32 registers; ``n`` an immediate.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

I16, I32 = ir.IntType(16), ir.IntType(32)
F32 = ir.FloatType()


@dataclass(frozen=True)
class PtxInstr:
    template: str
    constraints: str
    result: object
    operands: tuple
    convergent: bool = False
    side_effect: bool = False
    min_ptx: str = "8.0"
    doc: str = ""


TABLE = {
    # warp butterfly exchange: $1 value, $2 xor lane mask (immediate), $3 member mask (immediate)
    "shfl.bfly": PtxInstr("shfl.sync.bfly.b32 $0, $1, $2, 0x1f, $3;", "=r,r,n,n", I32, (I32, I32, I32),
                          convergent=True, doc="value of the lane whose index is this lane's xor mask"),
    # fp8 conversions (sm_89+, PTX 7.8): pack two f32 ($1 high, $2 low) into e4m3x2 / e5m2x2, saturating to finite
    "cvt.e4m3x2.f32": PtxInstr("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", I16, (F32, F32)),
    "cvt.e5m2x2.f32": PtxInstr("cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,f,f", I16, (F32, F32)),
    # and back: two fp8 in a b16 to f16x2 in a b32 (exact)
    "cvt.f16x2.e4m3x2": PtxInstr("cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", I32, (I16,)),
    "cvt.f16x2.e5m2x2": PtxInstr("cvt.rn.f16x2.e5m2x2 $0, $1;", "=r,h", I32, (I16,)),
}


def emit(lx, name: str, args):
    """Build table entry ``name`` as an inline-asm call at ``lx``'s insertion point. ``args`` are LLVM values or
    Python ints (for ``n`` immediates and for ``r``/``l`` operands, turned into constants)."""
    instr = TABLE[name]
    values = []
    for a, t in zip(args, instr.operands):
        values.append(ir.Constant(t, int(a) if int(a) < (1 << 31) else int(a) - (1 << 32))
                      if isinstance(a, int) else a)
    constraints = instr.constraints + (",~{memory}" if instr.side_effect else "")
    asm = ir.InlineAsm(ir.FunctionType(instr.result, [v.type for v in values]), instr.template, constraints,
                       instr.side_effect)
    return lx.b.call(asm, values, attrs=("convergent",) if instr.convergent else ())
