"""The lowering context ``lx`` handed to every op's ``lower(op, lx)``.

It owns the llvmlite module, the kernel function and the IRBuilder (``lx.b``), and maps IR values to LLVM values:

- a scalar → one LLVM value (plus ``multiple``: a known divisor of an integer, used to prove vector alignment);
- a fragment → a list of LLVM values, colexicographic over the fragment shape;
- a ``gtensor`` parameter → ``values.TensorArg`` (global pointer, i32 extents, i64 strides, its ``TensorSpec``);
- a ``gview`` → ``values.GView`` (the tensor, the i32 origin coordinates and their known multiples, the tile shape);
- a ``tmap`` parameter → ``shared.TmapArg`` (the generic address of its by-value 128-byte ``.param``), a smem view →
  ``shared.SmemRef``, an mbarrier array → ``shared.BarrierRef`` (see ``ptxgen.lower.shared``).

Shared building blocks live here so that each op's ``lower`` stays a few lines: constants, intrinsics, special
registers, ``emit_layout`` (a layout evaluated at a runtime coordinate with div/mod by constants), scalar arithmetic
by kind, conversions, region lowering, gmem loads and stores (``ptxgen.lower.gmem``), cp.async copies
(``ptxgen.lower.cpasync``), smem accesses, TMA copies and barrier waits (``ptxgen.lower.shared``), inline PTX (``inline_ptx``, ``ptx_table``) and the warp-shuffle reduction
(``plans.plan_reduce``). The ops reach every one of them through ``lx`` (methods, and the lowered-value classes
``lx.GView``, ``lx.SmemRef``, ``lx.BarrierRef``) as they reach their operands: ``ptxgen.ir.ops`` imports nothing of
``ptxgen.lower``, whose modules sit after it in the pipeline.

Every LLVM instruction carries the ``!dbg`` location of the op it was emitted for, which the NVPTX backend turns into
``.loc`` lines in the PTX (see ``ptxgen.lower.sourcemap``).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

import layoutc as lc

from ..ir import launch
from ..ir.core import Kernel, Region
from ..ir.ops import OPS, SMEM_BASE, fp8_encode, round_to, smem_plan
from ..ir.ops.tma import map_params
from ..ir.types import FragmentType, GlobalTensorType, ScalarType, SCALARS, TensorMapType
from . import cpasync, gmem, mathlib, ptx_table, shared
from .plans import (
    ReducePlanError, ThreadMap, coordinate_layout, flat, layout_table, mode_sizes, plan_reduce, plan_smem_access,
    tile_coordinates, tv_parts,
)
from .specialize import Specialization, kernel_abi
from .values import BIG_MULTIPLE, F16, F32, GPTR, GView, I1, I8, I16, I32, I64, TensorArg, llvm_type, pack_pair, \
    unpack_pair


class LoweringError(ValueError):
    """An op cannot be lowered as written: ``file:line:col: op: message``."""

    def __init__(self, op, message: str):
        where = f"{op.loc}: {op.name}: " if op is not None else ""
        super().__init__(where + message)
        self.op = op


_ABI = {"ptr": GPTR, "i32": I32, "i64": I64, "f32": F32, "i16": I16, "tmap": ir.PointerType()}
TMAP_BYTES, TMAP_ALIGN = 128, 64  # a CUtensorMap: 128 opaque bytes, passed by value, 64-byte aligned


# ---------------------------------------------------------------------------------------------------- context


class _DistinctLoopMD(ir.values.MDValue):
    """``distinct !{!self, ...}``: the self-referential node ``!llvm.loop`` needs."""

    def descr(self, buf):
        ops = [self.get_reference()] + [o.get_reference() for o in self.operands[1:]]
        buf += ("distinct !{{ {0} }}".format(", ".join(ops)), "\n")


def _column_runs(columns):
    """(w, s) when the sorted constant columns are c₀ + s·⌊i/w⌋ + i mod w (runs of w columns every s, s a power of
    two ≥ w): the m64nN accumulator's row of a thread, 0 1 8 9 16 17 …, is (2, 8); one column is (1, 1). Else None."""
    n = len(columns)
    for width in range(1, n + 1):
        if n % width:
            continue
        stride = columns[width] - columns[0] if width < n else 1 << max(0, (width - 1).bit_length())
        if stride < width or stride & (stride - 1):
            continue
        if all(columns[i] == columns[0] + stride * (i // width) + i % width for i in range(n)):
            return width, stride
    return None


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
        if launch.min_ctas_per_sm(kernel) is not None:  # .minnctapersm: registers for that many CTAs per SM
            set.add(self.fn.attributes, f'"nvvm.minctasm"="{launch.min_ctas_per_sm(kernel)}"')
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.values = {}
        self.multiples = {}
        # gtensor parameter -> the widest vector access lowered on it: what of its spec's extent_multiple the code
        # can depend on (see ptxgen.lower.specialize.canonical)
        self.vector_widths = {}
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

    @staticmethod
    def is_zero(values) -> bool:
        """Whether every LLVM value of ``values`` is the constant zero (a ``frag.splat`` of 0 reaching its use)."""
        return all(isinstance(x, ir.Constant) and not isinstance(x.constant, (str, type(ir.Undefined)))
                   and x.constant == 0 for x in values)

    @staticmethod
    def undefined(value):
        """LLVM's ``undef`` of ``value``'s type: an input whose value the instruction ignores costs no register write."""
        return ir.Constant(value.type, ir.Undefined)

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

    def frag_coords(self, thread, tv, tile) -> list:
        """frag.coords: per tile mode, the i32 coordinate of each of the thread's values. From
        ``plans.tile_coordinates``: the thread part emitted once plus a constant per value, and only constants where
        no thread moves the mode (``tv = ((4,8),(2,4)):((16,1),(64,8))`` over (8, 64): the row is t%8's, the column
        t//8·16 + constants); when the map does not split so, each value's tile index is decoded at run time."""
        coords = tile_coordinates(tv, tile)
        if coords is not None:
            out = []
            for mode in coords:
                base, constants = self._coordinate_parts(mode, thread)
                if isinstance(base, int):   # thread-independent: constants
                    out.append([self.i32(base + c) for c in constants])
                else:
                    out.append([self.b.add(base, self.i32(c)) if c else base for c in constants])
            return out
        index = [self.emit_tv_index(tv, thread, v) for v in range(lc.size(tv[1]))]
        return [[self.emit_layout(coordinate_layout(tile, m), i) for i in index] for m in range(len(mode_sizes(tile)))]

    def mask_past(self, values, thread, limit, fill, tv, tile, slope: int) -> list:
        """frag.mask_past: ``values`` (the thread's, LLVM) with those at tile coordinates where ``col > limit +
        slope·row`` replaced by ``fill``. Where ``plans.tile_coordinates`` splits both modes into a thread part and
        a constant per value, each row's threshold ``limit + slope·row − col_thread`` is formed once and its values
        are compared as constants; where the row's constant columns are runs of ``w`` every ``s`` columns (s a power
        of two: the accumulators' pairs every 8), the visible values of the row are a prefix counted in closed form
        and kept as bits, and each value is a bit test (ptxas turns a run of them into R2P: 7 predicates from one
        register) and a select — about 1.2 instructions per value against 3 for a compare of its coordinate. Other
        layouts: each value's coordinates compared."""
        b = self.b
        coords = tile_coordinates(tv, tile)
        if coords is None:
            rows, cols = self.frag_coords(thread, tv, tile)
            return [b.select(b.icmp_signed(">", col, b.add(limit, b.mul(row, self.i32(slope)))), fill, x)
                    for x, row, col in zip(values, rows, cols)]
        (row_thread, row_offsets), (col_thread, col_offsets) = (
            (self.i32(base) if isinstance(base, int) else base, constants)
            for base, constants in (self._coordinate_parts(mode, thread) for mode in coords))
        # per value: col_t + c > limit + slope·(row_t + r)  ⇔  c > threshold(r) = limit + slope·row_t − col_t + slope·r
        shared_part = b.sub(b.add(limit, b.mul(row_thread, self.i32(slope))), col_thread)
        groups = {}
        for i, (r, c) in enumerate(zip(row_offsets, col_offsets)):
            groups.setdefault(r, []).append((c, i))
        out = list(values)
        for r, members in groups.items():
            members.sort()
            threshold = b.add(shared_part, self.i32(slope * r)) if slope * r else shared_part
            columns = [c for c, _ in members]
            run = _column_runs(columns)
            if run is None:
                for c, i in members:
                    out[i] = b.select(b.icmp_signed(">", self.i32(c), threshold), fill, values[i])
                continue
            width, stride = run
            # visible = #{columns ≤ threshold}: with t = threshold − c₀, w·⌊t/s⌋ + min(t mod s, w − 1) + 1, clamped
            t = b.sub(threshold, self.i32(columns[0]))
            whole = b.mul(b.ashr(t, self.i32(stride.bit_length() - 1)), self.i32(width))
            part = b.and_(t, self.i32(stride - 1))
            part = b.select(b.icmp_signed("<", part, self.i32(width - 1)), part, self.i32(width - 1))
            count = b.add(b.add(whole, part), self.i32(1))
            for word in range(0, len(members), 32):
                n = b.sub(count, self.i32(word))
                n = b.select(b.icmp_signed("<", n, self.i32(0)), self.i32(0), n)
                n = b.select(b.icmp_signed(">", n, self.i32(32)), self.i32(32), n)
                shift = b.zext(b.sub(self.i32(32), n), I64)
                bits = b.trunc(b.lshr(ir.Constant(I64, 0xFFFFFFFF), shift), I32)
                for k, (_c, i) in enumerate(members[word:word + 32]):
                    visible = b.icmp_unsigned("!=", b.and_(bits, self.i32(1 << k)), self.i32(0))
                    out[i] = b.select(visible, values[i], fill)
        return out

    def _coordinate_parts(self, mode, thread):
        """A ``ModeCoords``'s thread part — a Python int where no thread moves the mode, else an i32 emitted from
        ``thread`` — and its constant per value."""
        table = layout_table(mode.thread)
        if np.all(table == table[0]):
            return int(table[0]), mode.values
        return self.emit_layout(mode.thread, thread), mode.values

    def emit_tv_index(self, tv, thread, value: int):
        """The i32 tile index ``tv(t, value)`` of thread ``thread`` (an i32) at a constant value index, for a TV
        layout or a swizzled one (``Sw o offset o TV``: ``Sw(offset + TV0(t) + TV1(value))``, the XOR at run time):
        ``Sw<2,0,5> o 0 o ((4,8),(4,4)):((128,1),(32,8))`` at value 5 → ``x ^ ((x & 3) << 5)`` with
        ``x = 128·(t%4) + t/4 + 40``. Post: equals ``tv((t, value))`` for every thread of the TV layout."""
        sw, offset, inner = tv_parts(tv)
        idx = self.b.add(self.emit_layout(inner[0], thread), self.i32(offset + inner[1](value)))
        return shared.swizzle_address(self, sw, idx)

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

    def llvm_type(self, t: ScalarType):
        """The LLVM register type of scalar type ``t``: ``lx.llvm_type(SCALARS["i64"])`` → ``i64`` (fp8: ``i8``)."""
        return llvm_type(t)

    def pack_pair(self, low, high):
        """Two 16-bit LLVM values as one i32 (``low`` in the low half): ``values.pack_pair``."""
        return pack_pair(self.b, low, high)

    def unpack_pair(self, word, t: ScalarType):
        """The inverse of ``pack_pair``: the (low, high) values of scalar type ``t`` in the i32 ``word``."""
        return unpack_pair(self.b, word, llvm_type(t))

    # -- inline PTX ------------------------------------------------------------------------------------------
    ptx_table = ptx_table  # the table's entry-name builders: lx.ptx_table.wgmma_mma(n, "bf16", 0, 0, ksteps)

    def inline_ptx(self, name: str, args):
        """Emit the ``ptx_table`` entry ``name`` as inline asm on ``args`` (LLVM values or Python ints); returns its
        result. ``lx.inline_ptx("mbarrier.arrive", [address])``."""
        return ptx_table.emit(self, name, args)

    # -- memory ----------------------------------------------------------------------------------------------
    GView = GView  # the lowered gview an op binds: lx.GView(tensor, origin, multiples, shape)

    def gmem_load(self, view: GView, thread, tv, dtype: ScalarType, other=0.0, cache: str = "normal",
                  vector_check: bool = False, unchecked: bool = False) -> list:
        """gmem.load: the thread's values of the tile (``other`` outside the tensor), each access with the ``cache``
        hint's qualifier, vectors checked at run time with ``vector_check``, no bounds compared with ``unchecked``;
        see ``ptxgen.lower.gmem``."""
        return gmem.load(self, view, thread, tv, dtype, other, cache, vector_check, unchecked)

    def gmem_store(self, view: GView, thread, tv, dtype: ScalarType, values, cache: str = "normal",
                   vector_check: bool = False, unchecked: bool = False) -> None:
        """gmem.store: write the thread's ``values`` where they are inside the tensor, each access with the ``cache``
        hint's qualifier, vectors checked at run time with ``vector_check``, no bounds compared with ``unchecked``;
        see ``ptxgen.lower.gmem``."""
        gmem.store(self, view, thread, tv, dtype, values, cache, vector_check, unchecked)

    def cpasync_copy(self, view: GView, thread, ref, tv, smem_tv, dtype: ScalarType, vector_check: bool = False,
                     l2_prefetch: int | None = None) -> None:
        """cpasync.copy: the thread's values of the tile into smem view ``ref`` by cp.async runs (zero fill outside
        the tensor), checked at run time with ``vector_check``; see ``ptxgen.lower.cpasync``."""
        cpasync.copy(self, view, thread, ref, tv, smem_tv, dtype, vector_check, l2_prefetch)

    def frag_reduce(self, values, thread_value, tv, tile, mode: int, kind: str, dtype: ScalarType,
                    scratch=None) -> list:
        """frag.reduce's values (see ``frag_reduce``); ``scratch``: (i32 shared address of the op's planned scratch,
        named barrier id, whether the op is inside a loop) for a reduction across warps, else None."""
        return frag_reduce(self, values, thread_value, tv, tile, mode, kind, dtype, scratch)

    def lane_is_thread_mod_32(self, thread_value) -> bool:
        """Whether the IR value ``thread_value`` gives each thread's hardware lane as ``thread % 32`` (what warp
        shuffles and stmatrix need of their thread operand)."""
        return lane_is_thread_mod_32(self, thread_value)

    # -- shared memory ---------------------------------------------------------------------------------------
    SmemRef, BarrierRef = shared.SmemRef, shared.BarrierRef  # the lowered smem view and mbarrier array ops bind
    lowbit = staticmethod(shared.lowbit)
    plan_smem_access = staticmethod(plan_smem_access)

    def smem_address(self, op) -> tuple:
        """(i32 shared address, known alignment) of a top-level allocation ``op`` at run time: the window plus the
        allocation's offset in the static plan (``window + (plan address - SMEM_BASE)``)."""
        planned = self.smem_plan.address.get(id(op))
        if planned is None:
            self.error("is not in the kernel's shared-memory plan: allocations are top-level ops of the kernel body")
        rel = planned - SMEM_BASE
        addr = self.smem_window if rel == 0 else self.b.add(self.smem_window, self.i32(rel))
        return addr, shared.lowbit(rel)

    def smem_access(self, ref, thread, tv, store=None):
        """smem.load (``store`` None: the loaded values) or smem.store through the physical (swizzled) addresses."""
        return shared.smem_access(self, ref, thread, tv, store)

    def swizzle_address(self, sw, addr):
        """``sw(addr)`` on an i32 shared address at run time (``shared.swizzle_address``)."""
        return shared.swizzle_address(self, sw, addr)

    def view_origin(self, ref):
        """The i32 shared address of smem view ``ref``'s first element before the swizzle (``shared.view_origin``)."""
        return shared.view_origin(self, ref)

    def tma_copy(self, kind: str, tmap, view, coords, barrier=None, multicast=None) -> None:
        """One TMA tile copy, ``kind`` "load" or "store" (``shared.tma_copy``)."""
        shared.tma_copy(self, kind, tmap, view, coords, barrier, multicast)

    def barrier_wait(self, address, parity) -> None:
        """Block until the phase of parity ``parity`` of the mbarrier at ``address`` has completed
        (``shared.barrier_wait``)."""
        shared.barrier_wait(self, address, parity)


# ---------------------------------------------------------------------------------------------------- layouts


def _as_int(x):
    if isinstance(x, int):
        return x
    if isinstance(x, ir.Constant) and isinstance(x.constant, int):
        return x.constant
    return None


def emit_layout(lx, layout, coord):
    """See ``LoweringContext.emit_layout``; a ``plans.ThreadMap`` (a swizzled TV map's thread part) or a swizzled
    layout ``Sw o offset o L`` is emitted as its stages: ``L``, ``+ offset``, the XOR, then the map's ``then``."""
    if isinstance(layout, ThreadMap):
        index = emit_layout(lx, lc.ComposedLayout(layout.swizzle, layout.offset, layout.first), coord)
        return index if layout.then is None else emit_layout(lx, layout.then, index)
    if isinstance(layout, lc.ComposedLayout):
        static = _as_int(coord)
        if static is not None:
            return lx.i32(layout(static))
        index = emit_layout(lx, layout.inner, coord)
        if layout.offset:
            index = lx.b.add(index, lx.i32(layout.offset))
        return shared.swizzle_address(lx, layout.outer, index)
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


# ---------------------------------------------------------------------------------------------------- reduce


def lane_is_thread_mod_32(lx, thread_value) -> bool:
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
                and const.attrs["value"] > 0 and const.attrs["value"] % 32 == 0 and lane_is_thread_mod_32(lx, x))
    return False


def frag_reduce(lx, values, thread_value, tv, tile, mode, kind, dtype, scratch=None):
    """Per thread, a pairwise tree over each group of values in one line; a shfl.sync.bfly butterfly over the plan's
    lane masks; for a line spanning warps (``plan.warp_masks``), the lane of each warp whose moved lane bits are 0
    stores the warp's partial in its scratch slot, ``bar.sync id, threads`` (every thread of the CTA), and every
    thread loads the partials of the warps ``w & ~moved | s`` (s over the span of the warp masks, ascending: the same
    order in every warp, so every thread of a line gets the same bits) and combines them pairwise; inside a loop a
    second ``bar.sync`` keeps the next iteration's stores behind this one's loads."""
    b = lx.b
    if not lane_is_thread_mod_32(lx, thread_value):
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
    if plan.across_warps and scratch is None:
        lx.error("spans warps but has no scratch in the shared-memory plan")

    def combine(a, c):
        return scalar_op(lx, kind, [a, c], work_t)

    def tree(xs):
        while len(xs) > 1:  # pairwise, for ILP (and the same order wherever the same list is combined)
            xs = [combine(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
        return xs[0]

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

    partials = []
    for group in plan.groups:
        acc = tree([convert(lx, values[v], dtype, work_t) if widen else values[v] for v in group])
        for mask in plan.lane_masks:
            acc = combine(acc, shuffle(acc, mask))
        partials.append(acc)
    if plan.across_warps:
        partials = _combine_across_warps(lx, plan, partials, thread_value, work_t, scratch, tree)
    out = list(values)
    for group, acc in zip(plan.groups, partials):
        if widen:
            acc = convert(lx, acc, work_t, dtype)
        for v in group:
            out[v] = acc
    return out


def _combine_across_warps(lx, plan, partials, thread_value, work_t, scratch, tree):
    """Step 3 of ``frag_reduce``: the warps' partials of each group through the scratch (``ReducePlan.slot``)."""
    b = lx.b
    base, barrier_id, looping = scratch
    slot_bytes = 8 if work_t.bits == 64 else 4
    ty = llvm_type(work_t)
    t = lx.get(thread_value)
    lane = b.and_(t, lx.i32(31))
    warp = b.lshr(t, lx.i32(5))
    moved_lanes = sum(plan.lane_masks)
    moved_warps = sum(plan.warp_masks)
    # the packed kept lane bits, the slot's lane part (the same for the writer and the readers of a line)
    packed = lx.i32(0)
    for i, bit in enumerate(plan.kept_lane_bits):
        one = b.and_(b.lshr(lane, lx.i32(bit)) if bit else lane, lx.i32(1))
        packed = b.or_(packed, b.shl(one, lx.i32(i)) if i else one)
    groups = len(plan.groups)
    lane_slots = 1 << len(plan.kept_lane_bits)

    def address(warp_value, group):
        slot = b.add(b.mul(b.add(b.mul(warp_value, lx.i32(groups)), lx.i32(group)), lx.i32(lane_slots)), packed)
        return shared.smem_pointer(lx, b.add(base, b.mul(slot, lx.i32(slot_bytes))))

    writer = b.icmp_unsigned("==", b.and_(lane, lx.i32(moved_lanes)), lx.i32(0))
    store, stored = lx.block("reduce.publish"), lx.block("reduce.published")
    b.cbranch(writer, store, stored)
    b.position_at_end(store)
    for g, acc in enumerate(partials):
        b.store(acc, address(warp, g), align=slot_bytes)
    b.branch(stored)
    b.position_at_end(stored)
    threads = plan.warps * 32
    ptx_table.emit(lx, "bar.named", [barrier_id, threads])
    first = b.and_(warp, lx.i32(~moved_warps))
    offsets = [s for s in range(moved_warps + 1) if s & ~moved_warps == 0]  # the span of the warp masks, ascending
    # one warp's slots are consecutive when a warp writes one slot and the warp masks are the low warp bits: the
    # partials of a line are then read as 16-byte vectors (the scratch is 16-aligned, ``first`` a multiple of them)
    width = 16 // slot_bytes if groups * lane_slots == 1 and moved_warps & (moved_warps + 1) == 0 else 1
    width = min(width, len(offsets))
    out = []
    for g in range(len(partials)):
        loaded = []
        for k in range(0, len(offsets), width):
            s = offsets[k]
            pointer = address(b.or_(first, lx.i32(s)) if s else first, g)
            if width == 1:
                loaded.append(b.load(pointer, typ=ty, align=slot_bytes))
                continue
            vec = b.load(pointer, typ=ir.VectorType(ty, width), align=width * slot_bytes)
            loaded.extend(b.extract_element(vec, lx.i32(j)) for j in range(width))
        out.append(tree(loaded))
    if looping:
        ptx_table.emit(lx, "bar.named", [barrier_id, threads])
    return out
