"""gpu: thread, warp, warpgroup, block and grid indices."""
from __future__ import annotations

import numpy as np


from ..types import I32
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
