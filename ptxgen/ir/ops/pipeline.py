"""pipeline: a ring of shared-memory stages between producers (TMA) and consumers, built on mbarriers.

A ``pipeline<S>`` holds two arrays of S mbarriers: ``full[s]`` (a phase completes when the producer's
arrive-expect-tx arrived and the TMA loads delivered its bytes) and ``empty[s]`` (a phase completes when every
consumer warp released the stage). Iteration ``k`` uses stage ``s = k % S`` in pass ``k / S``; the phase bit a wait
needs is ``(k / S) & 1`` for consumers and its complement for producers, so that on the first pass the producer's
wait on a fresh (never completed) empty barrier passes at once. The ops compute stage and parity from ``k``: a user
never writes a parity, and the ``wrong parity`` bug cannot be written with them (it can with raw mbarrier ops).

Lowering: exactly the mbarrier ops they stand for (hopper-ptx §6.3): ``pipeline.acquire`` = try_wait.parity on
``empty[s]`` + ``mbarrier.arrive.expect_tx`` on ``full[s]``; ``pipeline.wait`` = try_wait.parity on ``full[s]``;
``pipeline.release`` = one ``mbarrier.arrive`` on ``empty[s]`` per warp (by its lane 0).

A pipeline shared by a cluster (``cluster = C`` or the grid ``cluster = (cm, cn)``, cm · cn = C, CTA rank
r = i + cm·j) has its stages written by multicast from the CTAs of its grid row (same i: ``tma.load {multicast =
1}``) and its grid column (same j: ``{multicast = 0}``); ``cluster = C`` is the grid (C, 1), every CTA in one
column. So a stage of CTA r may be refilled only once the consumers of those cm + cn − 1 CTAs released it.
"""
from __future__ import annotations

import numpy as np

from ..text import attribute_text
from ..types import I32, PipelineType
from . import OpDef, SwitchPoint, const_int, register
from .mbarrier import (
    MAX_ARRIVALS, MAX_TX, BarrierArray, BarrierWait, barrier_arrays, check_cluster_visible, note_remote_access,
    peer_array,
)


def cluster_grid(value) -> tuple | None:
    """(cm, cn) of a ``pipeline.alloc``'s ``cluster`` attribute value: ``C`` → (C, 1) (the 1-D form), ``(2, 4)`` →
    (2, 4); None for anything else (not positive integers, not 2 of them). Post: cm, cn ≥ 1."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, 1) if value >= 1 else None
    if (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in value)):
        return int(value[0]), int(value[1])
    return None


def pipeline_grid(pipe) -> tuple | None:
    """(cm, cn) of the pipeline value ``pipe`` (an SSA value of type ``pipeline<S>``), read from its
    ``pipeline.alloc``: (1, 1) without ``cluster``; None when it is not an alloc's result or its grid is malformed
    (the alloc's verifier reports that). E.g. ``%p = pipeline.alloc {…, cluster = (2, 4)}`` → (2, 4)."""
    owner = getattr(pipe, "owner", None)
    if owner is None or owner.name != "pipeline.alloc":
        return None
    return cluster_grid(owner.attrs.get("cluster", 1))


def grid_writers(grid: tuple) -> int:
    """CTAs whose loads land in one CTA's stages: its grid row and column, cm + cn − 1 (itself once).
    ``grid_writers((2, 4))`` = 5, ``grid_writers((4, 1))`` = 4."""
    return grid[0] + grid[1] - 1


def shares_row_or_column(rank: int, other: int, cm: int) -> bool:
    """Whether CTAs ``rank`` and ``other`` of a grid with ``cm`` CTAs along its first mode share i (rank % cm) or j
    (rank / cm). In a (2, 2) grid: rank 0 shares with 0, 1, 2, not with 3."""
    return rank % cm == other % cm or rank // cm == other // cm


def multicast_ranks(rank: int, grid: tuple, mode) -> list:
    """The CTA ranks a load issued by CTA ``rank`` lands in: ``mode`` True → every CTA of the grid; 0 → its grid
    column (same j, every i: cm CTAs); 1 → its grid row (same i, every j: cn CTAs). In a (2, 4) grid, rank 3
    (i = 1, j = 1): mode 0 → [2, 3], mode 1 → [1, 3, 5, 7]."""
    cm, cn = grid
    if mode is True:
        return list(range(cm * cn))
    i, j = rank % cm, rank // cm
    return [ii + cm * j for ii in range(cm)] if mode == 0 else [i + cm * jj for jj in range(cn)]


class PipelineRef:
    """A lowered ``pipeline<S>``: ``full`` and ``empty`` (``lower.shared.BarrierRef``: i32 shared address of barrier 0
    of each array), the stage count and the arrivals a stage's release needs."""

    def __init__(self, full, empty, stages: int, consumers: int):
        self.full, self.empty, self.stages, self.consumers = full, empty, stages, consumers
        self.grid = (1, 1)   # the CTA grid sharing it (``cluster``)
        self.per_warpgroup = False


def _stage_and_parity(lx, k, stages: int, producer: bool):
    """(k % S, the phase bit to wait for): ``(k / S) & 1`` for consumers, its complement for producers."""
    b = lx.b
    s = b.urem(k, lx.i32(stages))
    parity = b.and_(b.udiv(k, lx.i32(stages)), lx.i32(1))
    return s, (b.xor(parity, lx.i32(1)) if producer else parity)


class PipelineValue:
    """Interpreter value of a ``pipeline<S>``: its ``full`` and ``empty`` BarrierArrays (named ``%p.full`` and
    ``%p.empty`` in messages) and the number of stages."""

    def __init__(self, name: str, stages: int, address: int):
        self.name = name
        self.stages = stages
        self.full = BarrierArray(f"{name}.full", stages, address)
        self.empty = BarrierArray(f"{name}.empty", stages, address + 8 * stages)
        self.per_warpgroup = False


def _verify_pipe(op, v, pipe) -> bool:
    if not isinstance(pipe.type, PipelineType):
        v.error(op, f"the first operand must be a pipeline<S>, not {pipe.type}")
        return False
    return True


def _verify_iteration(op, v, k) -> None:
    if k.type != I32:
        v.error(op, f"the iteration index must be i32, not {k.type}")
    c = const_int(k)
    if c is not None and c < 0:
        v.error(op, f"the iteration index must be >= 0, not {c}")


def _uniform_iteration(op, ix, k_value, pipe: PipelineValue):
    """(active threads, k): the waiting threads must agree on the iteration (they wait for one phase)."""
    act = np.nonzero(ix.mask)[0]
    ks = ix.get(k_value)[act].astype(np.int64)
    if len(set(ks.tolist())) > 1:
        ix.fail(op, f"the threads disagree on the iteration index ({sorted(set(ks.tolist()))[:4]}): all active "
                    "threads of a pipeline wait wait for the same stage and phase")
    k = int(ks[0])
    if k < 0:
        ix.fail(op, f"iteration index {k} is negative")
    return act, k


# -- ops -------------------------------------------------------------------------------------------------------------

@register
class Alloc(OpDef):
    name = "pipeline.alloc"
    summary = "a ring of `stages` stages: S full and S empty mbarriers in shared memory"
    required_attrs = ("stages", "consumers")
    # ``per_warpgroup``: a release arrives once per consumer warpgroup (from its first warp; ``consumers`` then
    # counts warpgroups), not once per warp — a wgmma's reads of a stage complete for its whole warpgroup at once,
    # and a multicast pipeline's remote arrivals are a quarter as many
    optional_attrs = ("cluster", "per_warpgroup")
    num_operands = 0
    num_results = 1

    def verify(self, op, v):
        t = op.results[0].type
        if not isinstance(t, PipelineType):
            v.error(op, f"result type must be pipeline<S>, not {t}")
            return
        stages = v.attr(op, "stages", int)
        if stages is not None and stages != t.stages:
            v.error(op, f"stages {stages} differs from the result type's {t.stages}")
        if t.stages < 1:
            v.error(op, f"a pipeline has at least 1 stage, not {t.stages}")
        consumers = v.attr(op, "consumers", int)
        if consumers is not None and not 1 <= consumers <= MAX_ARRIVALS:
            v.error(op, f"consumers (the warps that release each stage) must be from 1 to {MAX_ARRIVALS}, "
                        f"not {consumers}")
        if "cluster" in op.attrs and isinstance(op.attrs["cluster"], tuple):
            raw = op.attrs["cluster"]
            grid = cluster_grid(raw)
            size = getattr(v, "kernel_cluster", None)
            if grid is None:
                v.error(op, f"cluster = {attribute_text(raw)}: a pipeline's CTA grid is (cm, cn), two integers ≥ 1 "
                            "(CTA rank = i + cm·j)")
            elif size is not None and grid[0] * grid[1] != size:
                v.error(op, f"cluster = ({grid[0]}, {grid[1]}): the grid's {grid[0]} × {grid[1]} = "
                            f"{grid[0] * grid[1]} CTAs must be the kernel's cluster of {size} CTAs")
        elif "cluster" in op.attrs:
            c = v.attr(op, "cluster", int)
            size = getattr(v, "kernel_cluster", None)
            if c is not None and size is not None and c not in (1, size):
                v.error(op, f"cluster = {c}: a pipeline is shared by 1 CTA or by the whole cluster of {size} CTAs")
        if "per_warpgroup" in op.attrs:
            v.attr(op, "per_warpgroup", bool)

    def result_types(self, operand_types, attrs):
        return [PipelineType(attrs["stages"])]

    def smem_request(self, op):
        t = op.results[0].type if len(op.results) == 1 else None
        if not isinstance(t, PipelineType) or t.stages < 1:
            return None
        return 16 * t.stages, 8

    def interpret(self, op, ix):
        t = op.results[0].type
        value = PipelineValue(op.results[0].name, t.stages, ix.smem_plan.address[id(op)])
        value.consumers = op.attrs["consumers"]
        value.per_warpgroup = bool(op.attrs.get("per_warpgroup", False))
        value.grid = cluster_grid(op.attrs.get("cluster", 1))
        value.cluster = value.grid[0] * value.grid[1]
        barrier_arrays(ix).extend([value.full, value.empty])
        ix.set(op.results[0], value)

    def lower(self, op, lx):
        """No code: the full barriers at the allocation's address, the empty ones 8·S bytes further."""
        base, _align = lx.smem_address(op)
        stages = op.results[0].type.stages
        ref = PipelineRef(lx.BarrierRef(base, stages), lx.BarrierRef(lx.b.add(base, lx.i32(8 * stages)), stages),
                          stages, op.attrs["consumers"])
        ref.grid = cluster_grid(op.attrs.get("cluster", 1))
        ref.cluster = ref.grid[0] * ref.grid[1]
        ref.per_warpgroup = bool(op.attrs.get("per_warpgroup", False))
        lx.set(op.results[0], ref)


@register
class Init(OpDef):
    name = "pipeline.init"
    summary = ("initialise every stage's barriers (full: 1 arrival; empty: `consumers` × the CTAs writing the "
               "stage) and fence the inits")
    num_operands = 1
    num_results = 0

    def verify(self, op, v):
        (pipe,) = op.operands
        _verify_pipe(op, v, pipe)

    def interpret(self, op, ix):
        p = ix.get(op.operands[0])
        act = np.nonzero(ix.mask)[0].tolist()
        for arr, arrivals in ((p.full, 1), (p.empty, p.consumers * grid_writers(p.grid))):
            for st in arr.states:
                st.__init__()
                st.initialised = True
                st.expected = st.pending = arrivals
                st.init_threads.update(act)
                st.init_op = op
                st.fenced = True  # pipeline.init includes fence.mbarrier_init

    def lower(self, op, lx):
        """``mbarrier.init`` of every full (1 arrival) and empty (``consumers`` × (cm + cn − 1) arrivals: the
        consumers of the CTAs that write the stage) barrier, then ``fence.mbarrier_init.release.cluster``."""
        p = lx.get(op.operands[0])
        for s in range(p.stages):
            lx.inline_ptx("mbarrier.init", [p.full.address(lx, lx.i32(s)), 1])
            lx.inline_ptx("mbarrier.init", [p.empty.address(lx, lx.i32(s)), p.consumers * grid_writers(p.grid)])
        lx.inline_ptx("fence.mbarrier_init", [])


class _PhaseWait(BarrierWait):
    """A BarrierWait whose hang report says which pipeline op and iteration waits."""

    def __init__(self, op, threads, arr, index, parity, iteration: int, stage: int):
        super().__init__(op, threads, arr, index, parity)
        self.context = f" at iteration {iteration} (stage {stage})"
        self.what = f"iteration {iteration} (stage {stage})"

    def hang(self, ix) -> str:
        return f"{self.what}: " + super().hang(ix)


class _StageWait(OpDef):
    """A wait for one phase of stage ``k % S`` (the producer on ``empty``, the consumer on ``full``) that gives the
    stage index; ``after``/``after_lower`` is what the op does once the phase completed."""

    producer = False
    num_operands = 2
    num_results = 1

    def verify(self, op, v):
        pipe, k = op.operands
        t = op.results[0].type
        if not _verify_pipe(op, v, pipe):
            return
        _verify_iteration(op, v, k)
        if t != I32:
            v.error(op, f"the result (the stage index) is i32, not {t}")
        self.verify_attrs(op, v)

    def verify_attrs(self, op, v):
        pass

    def result_types(self, operand_types, attrs):
        return [I32]

    def _barriers(self, p):
        return p.empty if self.producer else p.full

    def interpret(self, op, ix):
        p = ix.get(op.operands[0])
        act, k = _uniform_iteration(op, ix, op.operands[1], p)
        s, parity = k % p.stages, ((k // p.stages) & 1) ^ int(self.producer)
        barriers = self._barriers(p)
        for t in act.tolist():
            barriers.state(ix, op, s, t)
        yield _PhaseWait(op, act, barriers, s, parity, k, s)
        ix.acquire(act, barriers.states[s].released)
        self.after(op, ix, p, s, act)
        ix.set(op.results[0], np.full(ix.nthreads, s, dtype=np.int32))

    def after(self, op, ix, p, s, act):
        pass

    def lower(self, op, lx):
        """A try_wait.parity loop on the stage's barrier for its parity, then ``after_lower``."""
        p = lx.get(op.operands[0])
        s, parity = _stage_and_parity(lx, lx.get(op.operands[1]), p.stages, producer=self.producer)
        lx.barrier_wait(self._barriers(p).address(lx, s), parity)
        self.after_lower(op, lx, p, s)
        lx.set(op.results[0], s)

    def after_lower(self, op, lx, p, s):
        pass


@register
class Acquire(_StageWait):
    name = "pipeline.acquire"
    summary = "producer: wait until stage k % S is empty, then arrive on its full barrier expecting `bytes`"
    required_attrs = ("bytes",)
    producer = True

    def verify_attrs(self, op, v):
        b = v.attr(op, "bytes", int)
        if b is not None and not 1 <= b <= MAX_TX:
            v.error(op, f"bytes must be from 1 to {MAX_TX} (a phase's tx range), not {b}")

    def after(self, op, ix, p, s, act):
        for t in act.tolist():
            p.full.expect_tx(ix, op, s, op.attrs["bytes"], t)
            p.full.arrive(ix, op, s, t)

    def after_lower(self, op, lx, p, s):
        """``mbarrier.arrive.expect_tx`` on ``full[k % S]`` (after waiting on ``empty`` for ``((k / S) & 1) ^ 1``)."""
        lx.inline_ptx("mbarrier.arrive.expect_tx", [p.full.address(lx, s), op.attrs["bytes"]])


@register
class WaitFull(_StageWait):
    name = "pipeline.wait"
    summary = "consumer: wait until stage k % S is full (its TMA bytes arrived); gives the stage index"


@register
class Release(OpDef):
    name = "pipeline.release"
    summary = ("consumer: hand stage s back to the producer (one arrival per warp on empty[s] of each CTA writing "
               "the stage)")
    num_operands = 2
    num_results = 0

    def verify(self, op, v):
        pipe, s = op.operands
        if not _verify_pipe(op, v, pipe):
            return
        if s.type != I32:
            v.error(op, f"the stage index must be i32, not {s.type}")
        c = const_int(s)
        if c is not None and not 0 <= c < pipe.type.stages:
            v.error(op, f"stage {c} is outside the pipeline's {pipe.type.stages} stages")

    def interpret(self, op, ix):
        p = ix.get(op.operands[0])
        act = np.nonzero(ix.mask)[0]
        stages = ix.get(op.operands[1])[act]
        for warp in sorted(set((act // 32).tolist())):
            lanes = act[act // 32 == warp]
            mine = set(stages[act // 32 == warp].tolist())
            if len(mine) > 1:
                ix.fail(op, f"the lanes of warp {warp} release different stages {sorted(mine)}")
            s = int(stages[act // 32 == warp][0])
            if p.per_warpgroup:
                # the warpgroup releases together: its first warp arrives for all its 128 lanes' reads
                group = np.arange(128 * (warp // 4), min(128 * (warp // 4) + 128, ix.nthreads))
                if group.size < 128 or not ix.mask[group].all():
                    ix.fail(op, f"warp {warp} releases without the rest of warpgroup {warp // 4}: %"
                                f"{p.name} (per_warpgroup) is released by whole warpgroups")
                if warp % 4:
                    continue
                lanes = group
            # lane 0 arrives for its warp, after the warp's reads of the stage (the lanes run converged)
            if p.cluster == 1:
                p.empty.arrive(ix, op, s, int(lanes[0]), releasing=lanes)
                continue
            # the stage is filled by multicast from the CTAs of this CTA's grid row and column: lane l arrives on
            # CTA l's empty barrier where CTA l shares this CTA's row or column (each one waits for our release)
            cm = p.grid[0]
            active = set(lanes.tolist())
            idle = [lane for lane in range(p.cluster) if 32 * warp + lane not in active]
            if idle:
                ix.fail(op, f"lane {idle[0]} of warp {warp} is not active: a pipeline shared by a cluster of "
                            f"{p.cluster} CTAs is released by lanes 0 … {p.cluster - 1} of each warp, lane l "
                            "arriving on CTA l's barrier")
            for rank in range(p.cluster):
                if not shares_row_or_column(ix.rank, rank, cm):
                    continue
                if ix.cluster[rank] is ix:
                    p.empty.arrive(ix, op, s, 32 * warp + rank, releasing=lanes)
                    continue
                peer = peer_array(ix, op, p.empty, rank)
                check_cluster_visible(ix, op, peer, s, rank, f"warp {warp} arrives on")
                peer.arrive(ix, op, s, None)
                note_remote_access(ix, op, f"arrives on {peer.label(s)} of CTA rank {rank}")
        yield SwitchPoint(op, act)

    def lower(self, op, lx):
        """Lane 0 of each warp: ``mbarrier.arrive`` on ``empty[s]`` (the other lanes branch around it). A pipeline
        shared by a cluster of C CTAs as the grid (cm, cn): lane l < C of each warp, where CTA l shares this CTA's
        grid row or column (every l < C in the 1-D forms), arrives on ``empty[s]`` of CTA l (``mapa`` + a remote
        ``mbarrier.arrive``): the cm + cn − 1 arrivals of a warp are issued side by side, not one after another."""
        p = lx.get(op.operands[0])
        b = lx.b
        lane = b.and_(lx.linear_thread(), lx.i32(31))
        if p.cluster == 1:
            arrives = b.icmp_unsigned("==", lane, lx.i32(0))
        else:
            arrives = b.icmp_unsigned("<", lane, lx.i32(p.cluster))
            cm, cn = p.grid
            if cm > 1 and cn > 1:
                rank = lx.sreg("cluster.ctarank")
                c_cm = lx.i32(cm)
                same_i = b.icmp_unsigned("==", b.urem(lane, c_cm), b.urem(rank, c_cm))
                same_j = b.icmp_unsigned("==", b.udiv(lane, c_cm), b.udiv(rank, c_cm))
                arrives = b.and_(arrives, b.or_(same_i, same_j))
        if p.per_warpgroup:   # the first warp of each warpgroup: thread bits 5-6 clear
            first_warp = b.icmp_unsigned("==", b.and_(lx.linear_thread(), lx.i32(0x60)), lx.i32(0))
            arrives = b.and_(arrives, first_warp)
        arrive, after = lx.block("release.arrive"), lx.block("release.done")
        b.cbranch(arrives, arrive, after)
        b.position_at_end(arrive)
        address = p.empty.address(lx, lx.get(op.operands[1]))
        if p.cluster == 1:
            lx.inline_ptx("mbarrier.arrive", [address])
        else:  # the empty barrier of CTA `lane` (mapa: its shared::cluster address)
            remote = lx.inline_ptx("mapa.shared", [address, lane])
            lx.inline_ptx("mbarrier.arrive.cluster", [remote])
        b.branch(after)
        b.position_at_end(after)
