"""The lowering context ``lx`` handed to every op's ``lower(op, lx)``.

It owns the llvmlite module, the kernel function and the IRBuilder (``lx.b``), and maps IR values to LLVM values:

- a scalar → one LLVM value (plus ``multiple``: a known divisor of an integer, used to prove vector alignment);
- a fragment → a list of LLVM values, colexicographic over the fragment shape;
- a ``gtensor`` parameter → ``TensorArg`` (global pointer, i32 extents, i64 strides, its ``TensorSpec``);
- a ``gview`` → ``GView`` (the tensor, the i32 origin coordinates and their known multiples, the tile shape);
- a ``tmap`` parameter → ``shared.TmapArg`` (the generic address of its by-value 128-byte ``.param``), a smem view →
  ``shared.SmemRef``, an mbarrier array → ``shared.BarrierRef`` (see ``ptxgen.lower.shared``).

Shared building blocks live here so that each op's ``lower`` stays a few lines: constants, intrinsics, special
registers, ``emit_layout`` (a layout evaluated at a runtime coordinate with div/mod by constants), scalar arithmetic
by kind, conversions, region lowering, the gmem access emitter (vector plan from ``plans.plan_access``) and the
warp-shuffle reduction (``plans.plan_reduce``). Every LLVM instruction carries the ``!dbg`` location of the op it
was emitted for, which the NVPTX backend turns into ``.loc`` lines in the PTX (see ``ptxgen.lower.sourcemap``).
"""
from __future__ import annotations

import math
import struct

import numpy as np
from llvmlite import ir

import layoutc as lc

from ..ir import launch
from ..ir.core import Kernel, Region
from ..ir.ops import OPS, fp8_encode, round_to, smem_plan
from ..ir.types import FragmentType, GlobalTensorType, ScalarType, SCALARS, TensorMapType
from . import mathlib, ptx_table, shared
from .plans import ReducePlanError, coordinate_layout, flat, plan_access, plan_reduce
from .specialize import Specialization, kernel_abi

BIG_MULTIPLE = 1 << 30  # the "multiple" of the constant 0


class LoweringError(ValueError):
    """An op cannot be lowered as written: ``file:line:col: op: message``."""

    def __init__(self, op, message: str):
        where = f"{op.loc}: {op.name}: " if op is not None else ""
        super().__init__(where + message)
        self.op = op


# ---------------------------------------------------------------------------------------------------- types


class BFloatType(ir.types._BaseFloatType):
    """LLVM's ``bfloat`` (llvmlite has no such type); constants print as ``0xR....`` (round to nearest even)."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        if math.isnan(value):
            return "0xR7FC0"
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return f"0xR{bits & 0xFFFF:04X}"


BFloatType._create_instance()

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, BF16, F32 = ir.HalfType(), BFloatType(), ir.FloatType()
GPTR = ir.PointerType(addrspace=1)

_LLVM = {"i1": I1, "i32": I32, "u32": I32, "i64": I64, "u64": I64, "f16": F16, "bf16": BF16, "f32": F32,
         "e4m3": I8, "e5m2": I8}
_ABI = {"ptr": GPTR, "i32": I32, "i64": I64, "f32": F32, "i16": I16, "tmap": ir.PointerType()}
TMAP_BYTES, TMAP_ALIGN = 128, 64  # a CUtensorMap: 128 opaque bytes, passed by value, 64-byte aligned


def llvm_type(t: ScalarType):
    """The LLVM register type of a scalar type (fp8 values are kept as their i8 bits)."""
    return _LLVM[t.name]


def memory_type(t: ScalarType):
    """The LLVM type of an element in memory (i1 is one byte)."""
    return I8 if t.name == "i1" else _LLVM[t.name]


def pack_pair(b, low, high):
    """Two 16-bit values as one i32: a ``<2 x T>`` vector (``low`` in the low half) bitcast, not shifts and ors of
    the halves, so that NVPTX converts an f32 pair with one ``cvt.rn.{bf16x2,f16x2}.f32`` into one register and
    ptxas keeps the pair packed (F2FP.PACK_AB). Post: ``unpack_pair(b, pack_pair(b, x, y)) == (x, y)``."""
    vec = ir.Constant(ir.VectorType(low.type, 2), None)
    vec = b.insert_element(b.insert_element(vec, low, ir.Constant(I32, 0)), high, ir.Constant(I32, 1))
    return b.bitcast(vec, I32)


def unpack_pair(b, word, scalar):
    """The inverse of ``pack_pair``: the (low, high) values of LLVM type ``scalar`` in the i32 ``word``."""
    vec = b.bitcast(word, ir.VectorType(scalar, 2))
    return b.extract_element(vec, ir.Constant(I32, 0)), b.extract_element(vec, ir.Constant(I32, 1))


def element_bytes(t: ScalarType) -> int:
    return max(1, t.bits // 8)


def pow2_divisor(n: int) -> int:
    """The largest power of two dividing ``n`` (``BIG_MULTIPLE`` for 0)."""
    n = abs(int(n))
    return (n & -n) if n else BIG_MULTIPLE


class TensorArg:
    """A gtensor parameter in the kernel: ``ptr`` (addrspace 1), ``extents`` (i32), ``strides`` (i64, elements)."""

    def __init__(self, name, dtype, rank, ptr, extents, strides, spec):
        self.name, self.dtype, self.rank = name, dtype, rank
        self.ptr, self.extents, self.strides, self.spec = ptr, extents, strides, spec

    def stride(self, m):
        """Mode ``m``'s stride (the constant 1 for the specialization's contiguous mode)."""
        return ir.Constant(I64, 1) if m == self.spec.contiguous else self.strides[m]


class GView:
    """A gview: the tensor, the per-mode i32 origin and its known multiples, the static tile shape."""

    def __init__(self, tensor, origin, multiples, shape):
        self.tensor, self.origin, self.multiples, self.shape = tensor, origin, multiples, shape


# ---------------------------------------------------------------------------------------------------- context


class _DistinctLoopMD(ir.values.MDValue):
    """``distinct !{!self, ...}``: the self-referential node ``!llvm.loop`` needs."""

    def descr(self, buf):
        ops = [self.get_reference()] + [o.get_reference() for o in self.operands[1:]]
        buf += ("distinct !{{ {0} }}".format(", ".join(ops)), "\n")


class LoweringContext:
    """The state of one kernel's lowering. Ops use ``b`` (the IRBuilder), ``get``/``set``, the helpers below."""

    def __init__(self, kernel: Kernel, spec: Specialization, data_layout: str, locations: dict):
        self.kernel = kernel
        self.spec = spec
        self.locations = locations  # op -> (file, line, column) used for !dbg
        try:  # a verified kernel's; an unverified one with a broken block must not reach LLVM (an empty !range aborts)
            self.block_dim = launch.block_dims(kernel)
            self.cluster_dim = launch.cluster_dims(kernel)
        except launch.LaunchAttributeError as e:
            raise LoweringError(None, str(e)) from None
        self.cluster_size = self.cluster_dim[0] * self.cluster_dim[1] * self.cluster_dim[2]
        self.module = ir.Module(name=kernel.name)
        self.module.triple = "nvptx64-nvidia-cuda"
        self.module.data_layout = data_layout
        abi = kernel_abi(kernel)
        self.fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [_ABI[s.abi] for s in abi]), kernel.name)
        self.fn.calling_convention = "ptx_kernel"
        set.add(self.fn.attributes, '"nvvm.reqntid"="{},{},{}"'.format(*self.block_dim))
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.values = {}
        self.multiples = {}
        self.yielded = None
        self.op = None
        self._intrinsics = {}
        self._sregs = {}
        self._setup_debug_info()
        self._bind_params(abi)
        # the static shared-memory plan (addresses from SMEM_BASE) and the runtime window it is relocated to
        self.smem_plan = smem_plan(kernel.body.ops)
        self.smem_window = shared.emit_window(self) if self.smem_plan.ops else None

    # -- debug locations -------------------------------------------------------------------------------------
    def _setup_debug_info(self):
        m = self.module
        files = sorted({loc[0] for loc in self.locations.values()}) or [self.kernel.loc.file]
        self._difiles = {f: m.add_debug_info("DIFile", {"filename": f, "directory": ""}) for f in files}
        main = self._difiles[str(self.kernel.loc.file)] if str(self.kernel.loc.file) in self._difiles \
            else next(iter(self._difiles.values()))
        cu = m.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_C"), "file": main, "producer": "ptxgen", "isOptimized": True,
            "emissionKind": ir.DIToken("DebugDirectivesOnly")}, is_distinct=True)
        sub_type = m.add_debug_info("DISubroutineType", {"types": m.add_metadata([])})
        self._sp = m.add_debug_info("DISubprogram", {
            "name": self.kernel.name, "file": main, "line": max(0, self.kernel.loc.line), "unit": cu,
            "type": sub_type, "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized")}, is_distinct=True)
        self._scopes = {f: (self._sp if d is main else m.add_debug_info(
            "DILexicalBlockFile", {"scope": self._sp, "file": d, "discriminator": 0})) for f, d in self._difiles.items()}
        self.fn.set_metadata("dbg", self._sp)
        m.add_named_metadata("llvm.dbg.cu", cu)
        m.add_named_metadata("llvm.module.flags", [ir.Constant(I32, 2), "Debug Info Version", ir.Constant(I32, 3)])

    def at(self, op) -> None:
        """Attach ``op``'s location to every instruction built from now on."""
        self.op = op
        loc = self.locations.get(op)
        if loc is None:
            return
        f, line, col = loc
        self.b.debug_metadata = self.module.add_debug_info(
            "DILocation", {"line": line, "column": col, "scope": self._scopes[f]})

    # -- parameters ------------------------------------------------------------------------------------------
    def _bind_params(self, abi):
        args = iter(self.fn.args)
        for p in self.kernel.params:
            if isinstance(p.type, GlobalTensorType):
                r = p.type.rank
                ptr = next(args)
                ptr.name = p.name
                extents = [next(args) for _ in range(r)]
                strides = [next(args) for _ in range(r)]
                for k, (e, s) in enumerate(zip(extents, strides)):
                    e.name, s.name = f"{p.name}.dim{k}", f"{p.name}.stride{k}"
                self.set(p, TensorArg(p.name, p.type.dtype, r, ptr, extents, strides, self.spec[p.name]))
            elif isinstance(p.type, ScalarType):
                a = next(args)
                a.name = p.name
                t = llvm_type(p.type)
                if p.type.name == "i1":
                    v = self.b.icmp_unsigned("!=", a, ir.Constant(I32, 0))
                elif p.type.name in ("e4m3", "e5m2"):
                    v = self.b.trunc(a, I8)
                elif p.type.name in ("f16", "bf16"):
                    v = self.b.bitcast(a, t)
                else:
                    v = a
                self.set(p, v)
            elif isinstance(p.type, TensorMapType):
                self.set(p, self._bind_tmap(p, next(args)))
            else:
                raise LoweringError(None, f"@{self.kernel.name}: parameter %{p.name} of type {p.type} cannot be lowered")

    def _bind_tmap(self, p, a):
        """A tmap parameter is ``ptr byval([128 x i8]) align 64 "nvvm.grid_constant"``: PTX
        ``.param .align 64 .b8 name[128]``, whose generic address (``cvta.param``) TMA reads the map from. Without
        the grid-constant mark, taking the address would make LLVM copy the map to a local stack slot that TMA
        cannot use (reference/llvm-nvptx.md)."""
        from ..ir.ops.tma import map_params

        a.name = p.name
        set.add(a.attributes, f"byval([{TMAP_BYTES} x i8])")
        set.add(a.attributes, '"nvvm.grid_constant"')
        a.attributes.align = TMAP_ALIGN
        try:
            params = map_params(p.type)
        except (lc.LayoutError, ValueError) as exc:
            raise LoweringError(None, f"{p.loc}: @{self.kernel.name}: parameter %{p.name}: {exc}") from None
        return shared.TmapArg(p.name, self.b.ptrtoint(a, I64), p.type, params)

    # -- values ----------------------------------------------------------------------------------------------
    def get(self, value):
        try:
            return self.values[id(value)]
        except KeyError:
            raise LoweringError(self.op, f"%{value.name} has no lowered value") from None

    def set(self, value, x, multiple: int = 1) -> None:
        """Bind IR ``value`` to ``x``; ``multiple``: a known divisor (integers; 1 when nothing is known)."""
        self.values[id(value)] = x
        self.multiples[id(value)] = int(multiple) if multiple else BIG_MULTIPLE

    def multiple(self, value) -> int:
        return self.multiples.get(id(value), 1)

    def error(self, message: str):
        raise LoweringError(self.op, message)

    # -- constants and intrinsics ----------------------------------------------------------------------------
    @staticmethod
    def i32(n):
        return ir.Constant(I32, int(n))

    @staticmethod
    def i64(n):
        return ir.Constant(I64, int(n))

    def const(self, t: ScalarType, value):
        """A constant of scalar type ``t`` (``arith.cast`` rounding for narrow floats; fp8 through the cvt table)."""
        if t.name == "i1":
            return ir.Constant(I1, int(bool(value)))
        if t.is_int:
            v = int(value) & ((1 << t.bits) - 1)
            if t.kind == "int" and v >= 1 << (t.bits - 1):
                v -= 1 << t.bits
            return ir.Constant(llvm_type(t), v)
        if t.name in ("e4m3", "e5m2"):
            return ir.Constant(I8, int(fp8_encode(round_to(np.array([float(value)]), t), t.name)[0]))
        return ir.Constant(llvm_type(t), float(value))

    def intrinsic(self, name: str, ret, args):
        """Declare (once) and return the LLVM function ``name`` of type ``ret(args)``."""
        f = self._intrinsics.get(name)
        if f is None:
            f = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
            self._intrinsics[name] = f
        return f

    def call(self, name: str, ret, args):
        return self.b.call(self.intrinsic(name, ret, [a.type for a in args]), list(args))

    def sreg(self, name: str):
        """A PTX special register (``tid.x``, ``ctaid.y``, ``nctaid.z``, ``laneid``) through its NVVM intrinsic,
        with its value range as metadata (``tid.x < block.x``) so LLVM can fold what the launch shape implies."""
        fn = self.intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
        v = self.b.call(fn, [])
        hi = {"tid.x": self.block_dim[0], "tid.y": self.block_dim[1], "tid.z": self.block_dim[2],
              "laneid": 32}.get(name)
        if hi is not None:
            v.set_metadata("range", self.module.add_metadata([self.i32(0), self.i32(hi)]))
        return v

    def linear_thread(self):
        """The thread's linear index in the CTA (x fastest), folded with the static block shape."""
        bx, by, bz = self.block_dim
        t = self.sreg("tid.x")
        if by > 1 or bz > 1:
            t = self.b.add(t, self.b.mul(self.sreg("tid.y"), self.i32(bx)))
        if bz > 1:
            t = self.b.add(t, self.b.mul(self.sreg("tid.z"), self.i32(bx * by)))
        return t

    # -- layouts ---------------------------------------------------------------------------------------------
    def emit_layout(self, layout, coord):
        """``layout(coord)`` for a 1-D coordinate: an LLVM i32 value or a Python int (folded statically).

        Emitted mode by mode from the layout's flat shape and stride: ``((coord / prefix) % size) * stride``
        with unsigned division by constants (shifts and masks for powers of two); size-1 and stride-0 modes emit
        nothing; the outermost mode needs no ``%`` when the coordinate's range (tid.x < block.x) makes it
        redundant (LLVM folds it from the range metadata). Pre: coord ≥ 0.
        """
        return emit_layout(self, layout, coord)

    # -- regions and control flow ----------------------------------------------------------------------------
    def lower_ops(self, ops) -> None:
        for op in ops:
            definition = OPS.get(op.name)
            lower = getattr(definition, "lower", None)
            if lower is None:
                raise LoweringError(op, "has no lowering yet")
            self.at(op)
            try:
                lower(op, self)
            except (LoweringError, ReducePlanError, lc.LayoutError) as exc:
                if isinstance(exc, LoweringError) and exc.op is not None:
                    raise
                raise LoweringError(op, str(exc)) from exc

    def lower_region(self, region: Region, args=()) -> list:
        """Lower ``region`` at the current insertion point with its block arguments bound to ``args`` (lowered
        values); returns the lowered values of its ``scf.yield`` (empty without one)."""
        for a, x in zip(region.args, args):
            self.set(a, x[0] if isinstance(x, tuple) else x, x[1] if isinstance(x, tuple) else 1)
        saved_yield, saved_op = self.yielded, self.op
        self.yielded = []
        try:
            self.lower_ops(region.ops)
            return self.yielded
        finally:
            self.yielded = saved_yield
            if saved_op is not None:
                self.at(saved_op)

    def block(self, name: str):
        return self.fn.append_basic_block(name)

    def loop_metadata(self, entries) -> ir.values.MDValue:
        """A distinct self-referential ``!llvm.loop`` node holding ``entries`` (lists like
        ``["llvm.loop.unroll.count", i32 4]``)."""
        m = self.module
        items = [m.add_metadata(list(e)) for e in entries]
        node = _DistinctLoopMD(m, [], name=str(len(m.metadata)))
        node.operands = (node,) + tuple(items)
        return node

    @staticmethod
    def flatten(t, x) -> list:
        """A lowered value as a list of LLVM scalars (a fragment's values, or [scalar])."""
        return list(x) if isinstance(t, FragmentType) else [x]

    @staticmethod
    def unflatten(t, xs):
        return list(xs) if isinstance(t, FragmentType) else xs[0]

    # -- arithmetic ------------------------------------------------------------------------------------------
    def scalar_op(self, kind: str, args, t: ScalarType):
        """Elementwise ``kind`` (add sub mul div rem min max and or xor shl shr cdiv fma neg abs exp exp2 log
        sqrt rsqrt sin cos) on LLVM scalars of type ``t``; shared by arith.* and frag.*."""
        return scalar_op(self, kind, args, t)

    def convert(self, x, src: ScalarType, dst: ScalarType):
        """``arith.cast`` semantics on one LLVM scalar."""
        return convert(self, x, src, dst)

    # -- memory ----------------------------------------------------------------------------------------------
    def gmem_access(self, view: GView, thread, tv, dtype: ScalarType, store=None, other=0.0):
        """gmem.load (``store`` None: returns the list of loaded values) or gmem.store (``store``: the values)."""
        return gmem_access(self, view, thread, tv, dtype, store, other)

    def frag_reduce(self, values, thread_value, tv, tile, mode: int, kind: str, dtype: ScalarType) -> list:
        return frag_reduce(self, values, thread_value, tv, tile, mode, kind, dtype)

    # -- shared memory ---------------------------------------------------------------------------------------
    def smem_address(self, op) -> tuple:
        """(i32 shared address, known alignment) of a top-level allocation ``op`` at run time: the window plus the
        allocation's offset in the static plan (``window + (plan address - SMEM_BASE)``)."""
        from ..ir.ops import SMEM_BASE

        planned = self.smem_plan.address.get(id(op))
        if planned is None:
            self.error("is not in the kernel's shared-memory plan: allocations are top-level ops of the kernel body")
        rel = planned - SMEM_BASE
        addr = self.smem_window if rel == 0 else self.b.add(self.smem_window, self.i32(rel))
        return addr, shared.lowbit(rel)

    def smem_access(self, ref, thread, tv, store=None):
        """smem.load (``store`` None: the loaded values) or smem.store through the physical (swizzled) addresses."""
        return shared.smem_access(self, ref, thread, tv, store)


# ---------------------------------------------------------------------------------------------------- layouts


def _as_int(x):
    if isinstance(x, int):
        return x
    if isinstance(x, ir.Constant) and isinstance(x.constant, int):
        return x.constant
    return None


def emit_layout(lx, layout, coord):
    """See ``LoweringContext.emit_layout``."""
    static = _as_int(coord)
    if static is not None:
        return lx.i32(layout(static))
    b = lx.b
    shapes, strides = flat(lc.shape(layout)), flat(lc.stride(layout))
    result = None
    prefix = 1
    for s, d in zip(shapes, strides):
        if s != 1 and d != 0:
            x = coord if prefix == 1 else b.udiv(coord, lx.i32(prefix))
            # the outermost mode's % is exact for coordinates past the layout's size too; LLVM drops it when
            # the coordinate's range (tid.x < block.x from !range) makes it redundant
            x = b.urem(x, lx.i32(s))
            term = x if d == 1 else b.mul(x, lx.i32(d))
            result = term if result is None else b.add(result, term)
        prefix *= s
    return result if result is not None else lx.i32(0)


# ---------------------------------------------------------------------------------------------------- arithmetic


def _signed(t: ScalarType) -> bool:
    return t.kind == "int"


def scalar_op(lx, kind, args, t):
    b = lx.b
    if t.is_float:
        if kind in ("exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos"):
            if t.name != "f32":
                lx.error(f"{kind} is defined for f32 only, not {t}")
            return getattr(mathlib, kind)(mathlib.LLVMOps(lx), args[0])
        ty = llvm_type(t)
        if kind == "add":
            return b.fadd(*args)
        if kind == "sub":
            return b.fsub(*args)
        if kind == "mul":
            return b.fmul(*args)
        if kind == "div":
            return b.fdiv(*args)
        if kind == "rem":
            return b.frem(*args)
        if kind in ("min", "max"):  # NaN-propagating, like numpy.minimum/maximum
            name = "minimum" if kind == "min" else "maximum"
            return lx.call(f"llvm.{name}.{ty.intrinsic_name}", ty, args)
        if kind == "fma":
            return lx.call(f"llvm.fma.{ty.intrinsic_name}", ty, args)
        if kind == "neg":
            return b.fneg(args[0])
        if kind == "abs":
            return lx.call(f"llvm.fabs.{ty.intrinsic_name}", ty, args)
        lx.error(f"{kind} is not defined on {t}")
    ty = llvm_type(t)
    signed = _signed(t)
    if kind == "add":
        return b.add(*args)
    if kind == "sub":
        return b.sub(*args)
    if kind == "mul":
        return b.mul(*args)
    if kind == "div":
        return (b.sdiv if signed else b.udiv)(*args)
    if kind == "rem":
        return (b.srem if signed else b.urem)(*args)
    if kind == "cdiv":  # ceil(a / b) for a >= 0, b > 0
        a, d = args
        return (b.sdiv if signed else b.udiv)(b.add(a, b.sub(d, ir.Constant(ty, 1))), d)
    if kind in ("min", "max"):
        name = ("s" if signed else "u") + kind
        return lx.call(f"llvm.{name}.i{t.bits}", ty, args)
    if kind == "and":
        return b.and_(*args)
    if kind == "or":
        return b.or_(*args)
    if kind == "xor":
        return b.xor(*args)
    if kind == "shl":
        return b.shl(*args)
    if kind == "shr":
        return (b.ashr if signed else b.lshr)(*args)
    if kind == "fma":
        return b.add(b.mul(args[0], args[1]), args[2])
    if kind == "neg":
        return b.neg(args[0])
    if kind == "abs":
        if not signed:
            return args[0]
        return lx.call(f"llvm.abs.i{t.bits}", ty, [args[0], ir.Constant(I1, 0)])
    lx.error(f"{kind} is not defined on {t}")


def convert(lx, x, src: ScalarType, dst: ScalarType):
    b = lx.b
    if src == dst:
        return x
    if dst.name == "i1":
        if src.is_float:
            x = convert(lx, x, src, SCALARS["f32"]) if src.name in ("e4m3", "e5m2") else x
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if src.name in ("e4m3", "e5m2"):
        x = ptx_table.emit(lx, f"cvt.f16x2.{src.name}x2", [b.zext(x, I16)])
        x = b.fpext(b.bitcast(b.trunc(x, I16), F16), F32)
        return convert(lx, x, SCALARS["f32"], dst)
    if dst.name in ("e4m3", "e5m2"):
        f = convert(lx, x, src, SCALARS["f32"])
        pair = ptx_table.emit(lx, f"cvt.{dst.name}x2.f32", [ir.Constant(F32, 0.0), f])
        return b.trunc(pair, I8)
    if src.name == "i1":
        return b.zext(x, llvm_type(dst)) if dst.is_int else b.uitofp(x, llvm_type(dst))
    dt = llvm_type(dst)
    if src.is_int and dst.is_int:
        if dst.bits < src.bits:
            return b.trunc(x, dt)
        if dst.bits > src.bits:
            return (b.sext if _signed(src) else b.zext)(x, dt)
        return x
    if src.is_int:  # int -> float
        return (b.sitofp if _signed(src) else b.uitofp)(x, dt)
    if dst.is_int:  # float -> int, truncating toward zero, saturating (NaN -> 0)
        if src.name != "f32":
            x = b.fpext(x, F32)
        sat = "fptosi" if _signed(dst) else "fptoui"
        return lx.call(f"llvm.{sat}.sat.i{dst.bits}.f32", dt, [x])
    # float -> float
    if src.bits < dst.bits:
        return b.fpext(x, dt)
    if src.bits > dst.bits:
        return b.fptrunc(x, dt)
    return b.fptrunc(b.fpext(x, F32), dt)  # f16 <-> bf16 through f32


# ---------------------------------------------------------------------------------------------------- gmem


def _and_all(b, preds):
    out = None
    for p in preds:
        out = p if out is None else b.and_(out, p)
    return out


def gmem_access(lx, view: GView, thread, tv, dtype, store=None, other=0.0):
    b = lx.b
    tensor = view.tensor
    spec = tensor.spec
    rank = tensor.rank
    mem_t = memory_type(dtype)
    esize = element_bytes(dtype)
    c = spec.contiguous
    max_width = 1
    if c is not None and spec.aligned and dtype.name != "i1":
        max_width = min(16 // esize, pow2_divisor(view.multiples[c]))
    plan = plan_access(tv, view.shape, c, max_width)
    k = plan.width
    exact = k > 1 and spec.extent_multiple % k == 0

    # thread-dependent coordinates (i32) per mode, and the thread's base pointer
    if plan.coords is not None:
        base = [b.add(view.origin[m], lx.emit_layout(plan.coords[m].thread, thread)) for m in range(rank)]

        def coords_of(v):
            return [b.add(base[m], lx.i32(plan.coords[m].values[v])) if plan.coords[m].values[v] else base[m]
                    for m in range(rank)]

        offset = None
        for m in range(rank):
            term = b.sext(base[m], I64)
            if m != c:
                term = b.mul(term, tensor.stride(m))
            offset = term if offset is None else b.add(offset, term)
        thread_ptr = b.gep(tensor.ptr, [offset], source_etype=mem_t)

        def pointer_of(v):
            off = None
            for m in range(rank):
                val = plan.coords[m].values[v]
                if not val:
                    continue
                term = lx.i64(val) if m == c else b.mul(lx.i64(val), tensor.stride(m))
                off = term if off is None else b.add(off, term)
            return thread_ptr if off is None else b.gep(thread_ptr, [off], source_etype=mem_t)
    else:  # decode each value's tile index at run time
        tindex = lx.emit_layout(tv[0], thread)
        value_index = [tv[1](v) for v in range(lc.size(tv[1]))]
        cl = [coordinate_layout(view.shape, m) for m in range(rank)]

        def coords_of(v):
            idx = b.add(tindex, lx.i32(value_index[v]))
            return [b.add(view.origin[m], lx.emit_layout(cl[m], idx)) for m in range(rank)]

        def pointer_of(v, _coords=None):
            cs = coords_of(v)
            off = None
            for m in range(rank):
                term = b.sext(cs[m], I64)
                if m != c:
                    term = b.mul(term, tensor.stride(m))
                off = term if off is None else b.add(off, term)
            return b.gep(tensor.ptr, [off], source_etype=mem_t)

    def inside(cs, lane_offset=0):
        preds = []
        for m in range(rank):
            cm = cs[m] if not (m == c and lane_offset) else b.add(cs[m], lx.i32(lane_offset))
            preds.append(b.icmp_unsigned("<", cm, tensor.extents[m]))
        return _and_all(b, preds)

    def to_mem(x):
        return b.zext(x, I8) if dtype.name == "i1" else x

    def from_mem(x):
        return b.icmp_unsigned("!=", x, ir.Constant(I8, 0)) if dtype.name == "i1" else x

    def packed(vt, group):
        vec = ir.Constant(vt, None)
        for j, v in enumerate(group):
            vec = b.insert_element(vec, to_mem(store[v]), lx.i32(j))
        return vec

    other_c = lx.const(dtype, other) if store is None else None
    nv = lc.size(tv[1])
    results = [None] * nv
    for group in plan.groups:
        v0 = group[0]
        cs = coords_of(v0)
        ptr = pointer_of(v0)
        if k == 1:
            pred = inside(cs)
            if store is None:
                results[v0] = _guarded_load(lx, pred, ptr, mem_t, esize, other_c, from_mem)
            else:
                _branched_store(lx, pred, ptr, to_mem(store[v0]), esize)
            continue
        vt = ir.VectorType(mem_t, k)
        full = inside(cs) if exact else _and_all(b, [inside(cs), inside(cs, k - 1)])
        if store is not None and exact and k * esize >= 4:  # all of the vector or none of it: no branch
            _predicated_store(lx, full, ptr, packed(vt, group), k * esize)
            continue
        fast, slow, done = lx.block("vec"), lx.block("vec.edge"), lx.block("vec.done")
        b.cbranch(full, fast, slow)
        b.position_at_end(fast)
        if store is None:
            vec = b.load(ptr, typ=vt, align=k * esize)
            fast_vals = [from_mem(b.extract_element(vec, lx.i32(j))) for j in range(k)]
        else:
            b.store(packed(vt, group), ptr, align=k * esize)
        fast_end = b.block
        b.branch(done)
        b.position_at_end(slow)
        slow_vals = []
        if not exact:
            for j, v in enumerate(group):
                pj = inside(cs, j)
                lane_ptr = ptr if j == 0 else b.gep(ptr, [lx.i64(j)], source_etype=mem_t)
                if store is None:
                    slow_vals.append(_guarded_load(lx, pj, lane_ptr, mem_t, esize, other_c, from_mem))
                else:
                    _branched_store(lx, pj, lane_ptr, to_mem(store[v]), esize)
        else:
            slow_vals = [other_c] * k if store is None else []
        slow_end = b.block
        b.branch(done)
        b.position_at_end(done)
        if store is None:
            for j, v in enumerate(group):
                phi = b.phi(fast_vals[j].type)
                phi.add_incoming(fast_vals[j], fast_end)
                phi.add_incoming(slow_vals[j], slow_end)
                results[v] = phi
    return results if store is None else None


def _guarded_load(lx, pred, ptr, mem_t, esize, other, from_mem):
    b = lx.b
    then, done = lx.block("ld"), lx.block("ld.done")
    start = b.block
    b.cbranch(pred, then, done)
    b.position_at_end(then)
    val = from_mem(b.load(ptr, typ=mem_t, align=esize))
    b.branch(done)
    b.position_at_end(done)
    phi = b.phi(val.type)
    phi.add_incoming(val, then)
    phi.add_incoming(other, start)
    return phi


def _predicated_store(lx, pred, ptr, vec, nbytes):
    """Store the vector ``vec`` of ``nbytes`` (4, 8 or 16) bytes at ``ptr`` (aligned to that) where ``pred`` holds:
    ONE predicated ``st.global`` (``ptx_table.st_global_if``), as Triton stores edge tiles. No branch, so a
    fragment's epilogue stays one basic block: gemm_hopper's 64 guarded bf16x2 stores were 64 diamonds, 10 ms of
    LLVM's 56 on its cold compile. Only whole vectors (all lanes in or all out) go this way: 128 predicated SCALAR
    stores of an accumulator made ptxas serialize the wgmmas (C7514), so element-wise edges keep their branches."""
    b = lx.b
    words = nbytes // 4
    raw = b.bitcast(vec, I32 if words == 1 else ir.VectorType(I32, words))
    parts = [raw] if words == 1 else [b.extract_element(raw, lx.i32(j)) for j in range(words)]
    ptx_table.emit(lx, ptx_table.st_global_if(nbytes), [b.zext(pred, I32), b.ptrtoint(ptr, I64), *parts])


def _branched_store(lx, pred, ptr, value, align):
    b = lx.b
    then, done = lx.block("st"), lx.block("st.done")
    b.cbranch(pred, then, done)
    b.position_at_end(then)
    b.store(value, ptr, align=align)
    b.branch(done)
    b.position_at_end(done)


# ---------------------------------------------------------------------------------------------------- reduce


def _lane_is_thread_mod_32(lx, thread_value) -> bool:
    """The reduction's thread operand must give the hardware lane as ``thread % 32``."""
    owner = getattr(thread_value, "owner", None)
    if owner is None:
        return False
    bx, by, bz = lx.block_dim
    if owner.name == "gpu.lane_id":
        return True
    if owner.name == "gpu.thread_id" and str(owner.attrs.get("dim")) == "x":
        return (by == 1 and bz == 1) or bx % 32 == 0
    if owner.name == "arith.rem":
        # a thread index within a warpgroup (thread % 128) keeps its lane: the divisor is a multiple of 32
        x, divisor = owner.operands
        const = getattr(divisor, "owner", None)
        return (const is not None and const.name == "arith.const" and isinstance(const.attrs.get("value"), int)
                and const.attrs["value"] > 0 and const.attrs["value"] % 32 == 0 and _lane_is_thread_mod_32(lx, x))
    return False


def frag_reduce(lx, values, thread_value, tv, tile, mode, kind, dtype):
    b = lx.b
    if not _lane_is_thread_mod_32(lx, thread_value):
        lx.error("lowers to warp shuffles: its thread operand must be gpu.thread_id {dim = x} (or gpu.lane_id), "
                 "whose value modulo 32 is the hardware lane")
    plan = plan_reduce(tv, tile, mode)
    nthreads = lx.block_dim[0] * lx.block_dim[1] * lx.block_dim[2]
    if nthreads % 32 == 0:
        member = 0xFFFFFFFF
    elif nthreads < 32:
        member = (1 << nthreads) - 1
    else:
        lx.error(f"the block of {nthreads} threads ends in a partial warp; warp shuffles need whole warps")
    f32 = SCALARS["f32"]
    widen = dtype.name in ("f16", "bf16")
    work_t = f32 if widen else dtype
    if dtype.name in ("e4m3", "e5m2", "i1"):
        lx.error(f"reductions of {dtype} fragments are not supported")

    def combine(a, c):
        return scalar_op(lx, kind, [a, c], work_t)

    def shuffle(x, mask):
        if work_t.bits == 64:
            lo = b.trunc(x, I32)
            hi = b.trunc(b.lshr(x, ir.Constant(I64, 32)), I32)
            lo = ptx_table.emit(lx, "shfl.bfly", [lo, mask, member])
            hi = ptx_table.emit(lx, "shfl.bfly", [hi, mask, member])
            return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        bits = b.bitcast(x, I32) if work_t.is_float else x
        out = ptx_table.emit(lx, "shfl.bfly", [bits, mask, member])
        return b.bitcast(out, F32) if work_t.is_float else out

    out = list(values)
    for group in plan.groups:
        xs = [convert(lx, values[v], dtype, work_t) if widen else values[v] for v in group]
        while len(xs) > 1:  # pairwise tree for ILP
            xs = [combine(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
        acc = xs[0]
        for mask in plan.lane_masks:
            acc = combine(acc, shuffle(acc, mask))
        if widen:
            acc = convert(lx, acc, work_t, dtype)
        for v in group:
            out[v] = acc
    return out
