"""scf: structured control flow (counted loops with carried values, per-thread branches, yields)."""
from __future__ import annotations

from math import gcd

import numpy as np


from ..text import attribute_text
from ..types import I1, I32, FragmentType
from . import (
    OpDef, register,
)


MAX_UNROLL = 64  # the largest unroll hint: LLVM's unroller copies the body that many times (1024 exhausts memory)


@register
class For(OpDef):
    name = "scf.for"
    summary = "a counted loop with loop-carried values"
    optional_attrs = ("unroll",)

    def verify(self, op, v):
        if len(op.operands) < 3:
            v.error(op, f"expects lower bound, upper bound and step (and initial carried values), got "
                        f"{len(op.operands)} operands")
            return
        lo, hi, step, *inits = op.operands
        for name, x in (("lower bound", lo), ("upper bound", hi), ("step", step)):
            if x.type != I32:
                v.error(op, f"the {name} must be i32, not {x.type}")
        unroll = op.attrs.get("unroll", 1)
        if not isinstance(unroll, int) or isinstance(unroll, bool) or unroll < 1:
            v.error(op, f"unroll must be an integer >= 1, not {attribute_text(unroll)}")
        elif unroll > MAX_UNROLL:
            v.error(op, f"unroll must be at most {MAX_UNROLL}, not {unroll} (LLVM would unroll the body that many "
                        "times: a code size no kernel wants, and memory LLVM may not have)")
        v.results(op, len(inits))
        region = v.regions(op, 1)[0]
        if region is None:
            return
        if len(region.args) != 1 + len(inits):
            v.error(op, f"the body needs {1 + len(inits)} block arguments (the induction variable and one per "
                        f"carried value), got {len(region.args)}")
            return
        if region.args[0].type != I32:
            v.error(op, f"the induction variable must be i32, not {region.args[0].type}")
        for k, (init, arg, res) in enumerate(zip(inits, region.args[1:], op.results)):
            if not init.type == arg.type == res.type:
                v.error(op, f"carried value {k}: initial {init.type}, block argument {arg.type} and result "
                            f"{res.type} must be the same type")
        v.yields(op, region, [r.type for r in op.results], optional=not op.results)

    def interpret(self, op, ix):
        """SIMT: each thread runs its own iterations. Bounds that agree over the active threads (the usual case)
        step every thread together; bounds that differ (e.g. per warpgroup) run each iteration for the threads
        still inside their range, and a thread's carried values stop changing once it has left."""
        lo, hi, step, *inits = op.operands
        bounds = [np.broadcast_to(np.asarray(ix.get(x), dtype=np.int64), (ix.nthreads,)) for x in (lo, hi, step)]
        active = ix.mask
        if not active.any():
            for res, x in zip(op.results, inits):
                ix.set(res, ix.get(x))
            return
        lo_a, hi_a, step_a = bounds
        if np.any(step_a[active] <= 0):
            ix.fail(op, f"step {int(step_a[active].min())} is not positive")
        region = op.regions[0]
        carried = [ix.get(x) for x in inits]
        if all(np.all(b[active] == b[active][0]) for b in bounds):
            i, hi_v, step_v = (int(b[active][0]) for b in bounds)
            while i < hi_v:
                ix.set(region.args[0], np.full(ix.nthreads, i, dtype=np.int32))
                for arg, val in zip(region.args[1:], carried):
                    ix.set(arg, val)
                carried = yield from ix.steps(region)
                i += step_v
        else:
            i = lo_a.copy()
            while True:
                running = active & (i < hi_a)
                if not running.any():
                    break
                ix.set(region.args[0], i.astype(np.int32))
                for arg, val in zip(region.args[1:], carried):
                    ix.set(arg, val)
                new = yield from ix.steps(region, mask=running)
                carried = [np.where(running.reshape((-1,) + (1,) * (np.ndim(old) - 1)), nv, old)
                           for nv, old in zip(new, carried)]
                i = np.where(running, i + step_a, i)
        for res, val in zip(op.results, carried):
            ix.set(res, val)

    def lower(self, op, lx):
        """A loop with phis: header (i < hi ?) → body → latch (i += step) → header; exit. Carried fragments are one
        phi per value, 16-bit values one phi per PAIR (``_carried``). ``unroll`` becomes loop metadata: 1 →
        unroll.disable, k → unroll.count k (unroll.full when the trip count is static and at most k); LLVM rotates
        the loop and unrolls."""
        b = lx.b
        lo, hi, step, *inits = op.operands
        region = op.regions[0]
        init_vals = [_carried(lx, x.type, lx.get(x)) for x in inits]
        pre = b.block
        header, body, done = lx.block("for.header"), lx.block("for.body"), lx.block("for.exit")
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(lx.get(lo).type, name="i")
        iv.add_incoming(lx.get(lo), pre)
        phis = []
        for vals in init_vals:
            ps = [b.phi(v.type) for v in vals]
            for p, v in zip(ps, vals):
                p.add_incoming(v, pre)
            phis.append(ps)
        b.cbranch(b.icmp_signed("<", iv, lx.get(hi)), body, done)
        b.position_at_end(body)
        args = [(iv, gcd(lx.multiple(lo), lx.multiple(step)))]
        args += [_uncarried(lx, x.type, ps) for x, ps in zip(inits, phis)]
        yielded = lx.lower_region(region, args)
        yielded = [_carried(lx, x.type, y) for x, y in zip(inits, yielded)]
        nxt = b.add(iv, lx.get(step), flags=["nsw"])
        latch = b.block
        back = b.branch(header)
        back.set_metadata("llvm.loop", lx.loop_metadata(self._unroll_hints(op, lx)))
        iv.add_incoming(nxt, latch)
        for x, ps, y in zip(inits, phis, yielded):
            for p, v in zip(ps, y):
                p.add_incoming(v, latch)
        b.position_at_end(done)
        for res, ps in zip(op.results, phis):
            lx.set(res, _uncarried(lx, res.type, ps))

    @staticmethod
    def _unroll_hints(op, lx):
        unroll = int(op.attrs.get("unroll", 1))
        if unroll == 1:
            return [["llvm.loop.unroll.disable"]]
        bounds = [o.owner.attrs["value"] if o.owner is not None and o.owner.name == "arith.const" else None
                  for o in op.operands[:3]]
        if None not in bounds and bounds[2] > 0:
            trips = max(0, -(-(bounds[1] - bounds[0]) // bounds[2]))
            if trips <= unroll:
                return [["llvm.loop.unroll.full"]]
        return [["llvm.loop.unroll.count", lx.i32(unroll)]]


@register
class If(OpDef):
    name = "scf.if"
    summary = "a two-way branch, per thread"
    num_operands = 1

    def verify(self, op, v):
        (p,) = op.operands
        if p.type != I1:
            v.error(op, f"the condition must be i1, not {p.type}")
        if len(op.regions) not in (1, 2):
            v.error(op, f"expects a then region and an optional else region, got {len(op.regions)}")
            return
        if op.results and len(op.regions) != 2:
            v.error(op, "an scf.if with results needs an else region")
        for region in op.regions:
            if region.args:
                v.error(op, "the regions of scf.if take no block arguments")
            v.yields(op, region, [r.type for r in op.results], optional=not op.results)

    def interpret(self, op, ix):
        p = ix.get(op.operands[0]).astype(bool)
        then_vals = yield from ix.steps(op.regions[0], mask=p)
        else_vals = (yield from ix.steps(op.regions[1], mask=~p)) if len(op.regions) == 2 else []
        for k, res in enumerate(op.results):
            a, b = then_vals[k], else_vals[k]
            # a branch no thread took yields None for values it would have defined: the other branch's shape holds
            a = np.zeros_like(b) if a is None else a
            b = np.zeros_like(a) if b is None else b
            cond = p.reshape((-1,) + (1,) * (max(np.ndim(a), np.ndim(b)) - 1))
            ix.set(res, np.where(cond, a, b))

    def lower(self, op, lx):
        """Branches and phis: every thread runs the region its predicate selects (SIMT divergence)."""
        b = lx.b
        then_bb, done = lx.block("if.then"), lx.block("if.end")
        else_bb = lx.block("if.else") if len(op.regions) == 2 else done
        b.cbranch(lx.get(op.operands[0]), then_bb, else_bb)
        ends = []
        for region, bb in zip(op.regions, (then_bb, else_bb)):
            b.position_at_end(bb)
            vals = lx.lower_region(region)
            ends.append((b.block, vals))
            b.branch(done)
        b.position_at_end(done)
        for k, res in enumerate(op.results):
            flats = [(blk, lx.flatten(res.type, vals[k])) for blk, vals in ends]
            merged = []
            for j in range(len(flats[0][1])):
                p = b.phi(flats[0][1][j].type)
                for blk, xs in flats:
                    p.add_incoming(xs[j], blk)
                merged.append(p)
            lx.set(res, lx.unflatten(res.type, merged))


@register
class Yield(OpDef):
    name = "scf.yield"
    summary = "the values a region of scf.for / scf.if hands back"
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond no results: its placement and types are checked by the parent op."""

    def interpret(self, op, ix):
        ix.yielded = [ix.get(x) for x in op.operands]

    def lower(self, op, lx):
        lx.yielded = [lx.get(x) for x in op.operands]


def _paired(t) -> bool:
    return isinstance(t, FragmentType) and t.dtype.bits == 16 and t.size % 2 == 0


def _carried(lx, t, x) -> list:
    """The LLVM values a loop carries for a value of type ``t``: a fragment's scalars, except that 16-bit values go
    in pairs (``pack_pair``). Per scalar, NVPTX gives every 16-bit value a register of its own and ptxas a 32-bit
    register each: a held bf16 tile of 128 values would take 128 registers instead of 64 (and the f32 → bf16
    conversions are then paired, ``cvt.rn.bf16x2.f32``)."""
    vals = lx.flatten(t, x)
    if not _paired(t):
        return vals
    return [lx.pack_pair(vals[j], vals[j + 1]) for j in range(0, len(vals), 2)]


def _uncarried(lx, t, carried):
    """The inverse of ``_carried``: the lowered value of type ``t``."""
    if not _paired(t):
        return lx.unflatten(t, carried)
    return [x for word in carried for x in lx.unpack_pair(word, t.dtype)]
