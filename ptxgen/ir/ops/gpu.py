"""gpu: thread, warp, warpgroup, block and grid indices; the warp vote."""
from __future__ import annotations

import numpy as np


from ..types import I1, I32
from . import (
    OpDef, register,
)


class _Index(OpDef):
    has_dim = True
    num_operands = 0
    num_results = 1

    def verify(self, op, v):
        t = op.results[0].type
        if t != I32:
            v.error(op, f"result type must be i32, not {t}")
        if self.has_dim:
            v.word(op, "dim", ("x", "y", "z"))

    def result_types(self, operand_types, attrs):
        return [I32]

    def interpret(self, op, ix):
        dim = "xyz".index(str(op.attrs["dim"])) if self.has_dim else 0
        ix.set(op.results[0], self.compute(ix, dim).astype(np.int32))

    def lower(self, op, lx):
        dim = str(op.attrs["dim"]) if self.has_dim else "x"
        kind = self.name.split(".")[1]
        multiple = 1
        if kind == "thread_id":
            r = lx.sreg(f"tid.{dim}")
        elif kind == "block_id":
            r = lx.sreg(f"ctaid.{dim}")
        elif kind == "grid_dim":
            r = lx.sreg(f"nctaid.{dim}")
        elif kind == "cluster_rank":
            r = lx.sreg("cluster.ctarank")
        elif kind == "block_dim":  # static: the kernel's block attribute (the launch must match: .reqntid)
            n = lx.block_dim["xyz".index(dim)]
            r, multiple = lx.i32(n), n
        else:  # lane, warp, warpgroup: from the linear thread index (x fastest), as the interpreter defines them
            t = lx.linear_thread()
            r = {"lane_id": lambda: lx.b.and_(t, lx.i32(31)), "warp_id": lambda: lx.b.lshr(t, lx.i32(5)),
                 "warpgroup_id": lambda: lx.b.lshr(t, lx.i32(7))}[kind]()
        lx.set(op.results[0], r, multiple=multiple)


def _index(name, compute, has_dim=True, summary=""):
    cls = type(name.replace(".", "_").title(), (_Index,), {
        "name": name, "summary": summary, "has_dim": has_dim, "required_attrs": ("dim",) if has_dim else (),
        "compute": staticmethod(compute)})
    register(cls)


_index("gpu.thread_id", lambda ix, d: ix.thread_index[d], summary="the thread's index in the CTA")
_index("gpu.block_id", lambda ix, d: np.full(ix.nthreads, ix.block_index[d]), summary="the CTA's index in the grid")
_index("gpu.block_dim", lambda ix, d: np.full(ix.nthreads, ix.block_dim[d]), summary="threads per CTA")
_index("gpu.grid_dim", lambda ix, d: np.full(ix.nthreads, ix.grid_dim[d]), summary="CTAs per grid")
_index("gpu.lane_id", lambda ix, d: ix.linear_thread % 32, has_dim=False, summary="the lane in the warp")
_index("gpu.warp_id", lambda ix, d: ix.linear_thread // 32, has_dim=False, summary="the warp in the CTA")
_index("gpu.warpgroup_id", lambda ix, d: ix.linear_thread // 128, has_dim=False,
       summary="the warpgroup (4 warps) in the CTA")
_index("gpu.cluster_rank", lambda ix, d: np.full(ix.nthreads, ix.rank), has_dim=False,
       summary="the CTA's rank in its cluster (x fastest)")


@register
class VoteAny(OpDef):
    """``%any = gpu.vote_any %pred : i1``: true in every lane of a warp where ``%pred`` is true in any of its lanes
    (``vote.sync.any``). Executed by whole warps (all 32 lanes together, as the full member mask requires): a
    warp-uniform condition for an ``scf.if`` whose branches the warp then takes as one."""
    name = "gpu.vote_any"
    summary = "true in every lane of the warp if the predicate is true in any lane of it"
    num_operands = 1
    num_results = 1

    def verify(self, op, v):
        (pred,) = op.operands
        if pred.type != I1:
            v.error(op, f"the operand must be an i1 predicate, not {pred.type}")
        if op.results[0].type != I1:
            v.error(op, f"result type must be i1, not {op.results[0].type}")

    def result_types(self, operand_types, attrs):
        return [I1]

    def interpret(self, op, ix):
        pred = np.asarray(ix.get(op.operands[0]), dtype=bool)
        out = np.zeros(ix.nthreads, dtype=bool)
        for warp in sorted(set((np.nonzero(ix.mask)[0] // 32).tolist())):
            lanes = np.arange(32 * warp, 32 * warp + 32)
            lanes = lanes[lanes < ix.nthreads]
            if not ix.mask[lanes].all():
                ix.fail(op, f"warp {warp} runs it with {int(ix.mask[lanes].sum())} of its {lanes.size} lanes: "
                            "vote.sync takes the whole warp")
            out[lanes] = pred[lanes].any()
        ix.set(op.results[0], out)

    def lower(self, op, lx):
        """``vote.sync.any.pred`` over the full warp (through a u32: the predicate widened, the result compared)."""
        b = lx.b
        wide = b.zext(lx.get(op.operands[0]), lx.i32(0).type)
        voted = lx.inline_ptx("vote.any", [wide])
        lx.set(op.results[0], b.icmp_unsigned("!=", voted, lx.i32(0)))
