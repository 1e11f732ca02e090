"""mbarrier: arrays of shared-memory barriers with phases, arrival counts and transaction (tx) byte counts; the
init fence; the CTA-wide barrier.

The interpreter's model (spec/tile-ir.md §6, hopper-ptx.md §6): a barrier holds its phase (software sees the
parity), the expected arrivals (set by init, reloaded each phase), the pending arrivals and the tx-count. A phase
completes when the pending arrivals reach 0 and the tx-count is 0; the barrier then flips its parity and reloads
the pending arrivals. ``wait(P)`` returns once the current phase parity differs from ``P``: the phase of parity
``P`` has completed (so ``wait(1)`` on a fresh barrier returns at once).
"""
from __future__ import annotations

import numpy as np

from ..text import attribute_text
from ..types import I1, I32, BarrierType
from . import (
    OpDef, SwitchPoint, Wait, arrive_counting, const_int, describe_threads, describe_waiters, register, waits_verb,
)

MAX_ARRIVALS = (1 << 20) - 1
MAX_TX = (1 << 20) - 1


class BarrierState:
    """One mbarrier: ``phase`` (completed phases; parity = phase & 1), ``expected`` and ``pending`` arrivals,
    ``tx`` (bytes still expected), and who initialised it and whether that init was fenced and published."""

    __slots__ = ("initialised", "expected", "pending", "tx", "phase", "init_threads", "init_op", "fenced",
                 "published", "cluster_published", "clock", "released")

    def __init__(self):
        self.initialised = False
        self.expected = self.pending = self.tx = self.phase = 0
        self.init_threads = set()
        self.init_op = None
        self.fenced = False
        self.published = False
        self.cluster_published = False   # its init was made visible to the other CTAs by a barrier.cluster
        self.clock = None                 # the arrivals' joined vector clocks (the interpreter's happens-before)
        self.released = None              # ``clock`` when the last phase completed: what a wait on it acquires


class BarrierArray:
    """Interpreter value of ``mbarrier<N>``: N barrier states, named ``%name[i]`` in messages."""

    def __init__(self, name: str, count: int, address: int):
        self.name = name
        self.count = count
        self.address = address
        self.states = [BarrierState() for _ in range(count)]

    def label(self, i) -> str:
        return f"%{self.name}[{i}]"

    def describe(self, i) -> str:
        """``phase 2 (parity 0) with 1 of 1 arrivals pending and tx-count 8192 bytes``."""
        st = self.states[i]
        return (f"phase {st.phase} (parity {st.phase & 1}) with {st.pending} of {st.expected} arrivals pending "
                f"and tx-count {st.tx} bytes")

    # -- checked access -------------------------------------------------------------------------------------------
    def state(self, ix, op, i: int, thread=None, by_tma: bool = False) -> BarrierState:
        """Barrier ``i`` for a use by ``thread`` (or by the TMA unit): in range, initialised, and its init visible."""
        if not 0 <= i < self.count:
            ix.fail(op, f"barrier index {i} is outside %{self.name}'s {self.count} barriers")
        st = self.states[i]
        if not st.initialised:
            ix.fail(op, f"{self.label(i)} is used before mbarrier.init")
        if by_tma and not st.fenced:
            ix.fail(op, f"{self.label(i)} is handed to the TMA unit before fence.mbarrier_init made its init "
                        f"(at {st.init_op.loc}) visible to the async proxy")
        if thread is not None and thread not in st.init_threads and not st.published:
            ix.fail(op, f"thread {thread} uses {self.label(i)} before its init (at {st.init_op.loc}, by "
                        f"{describe_threads(st.init_threads)}) was made visible: fence.mbarrier_init, then barrier.cta")
        return st

    def arrive(self, ix, op, i: int, thread: int, releasing=None) -> None:
        """One arrival of ``thread`` (None: a thread of another CTA) on barrier ``i``; it releases the clocks of
        ``releasing`` (default: the thread) to whoever waits on the phase it completes."""
        st = self.state(ix, op, i, thread)
        if st.pending == 0:
            why = (f"the phase still waits for {st.tx} bytes of TMA transactions" if st.tx > 0 else
                   f"the phase received {-st.tx} bytes more than it expected")
            ix.fail(op, f"thread {thread} arrives on {self.label(i)}, which is in {self.describe(i)}: more arrivals "
                        f"than its phase expects ({why})")
        st.pending -= 1
        if thread is not None:
            st.clock = ix.release([thread] if releasing is None else releasing, st.clock)
        self._maybe_complete(st)

    def expect_tx(self, ix, op, i: int, nbytes: int, thread: int) -> None:
        st = self.state(ix, op, i, thread)
        st.tx += nbytes
        if abs(st.tx) > MAX_TX:
            ix.fail(op, f"{self.label(i)}'s tx-count {st.tx} leaves the range ±{MAX_TX} bytes of a phase")

    def complete_tx(self, ix, op, i: int, nbytes: int) -> None:
        st = self.states[i]
        st.tx -= nbytes
        if abs(st.tx) > MAX_TX:
            ix.fail(op, f"{self.label(i)}'s tx-count {st.tx} leaves the range ±{MAX_TX} bytes of a phase")
        self._maybe_complete(st)

    @staticmethod
    def _maybe_complete(st: BarrierState) -> None:
        if st.pending == 0 and st.tx == 0:
            st.phase += 1
            st.pending = st.expected
            st.released = st.clock


def barrier_arrays(ix) -> list:
    """The CTA's barrier arrays (registered by mbarrier.alloc)."""
    return ix.state.setdefault("barriers", [])


def peer_array(ix, op, arr: BarrierArray, rank: int) -> BarrierArray:
    """The barrier array of CTA ``rank`` of ``ix``'s cluster at the same shared-memory offset as ``arr`` (every CTA
    of a kernel has the same allocation plan): what a multicast copy or a remote arrival reaches there."""
    peer = ix.cluster[rank]
    if peer.exited:
        ix.fail(op, f"reaches {arr.label(0)[:-3]} of CTA rank {rank} of the cluster, which has already exited: a "
                    "barrier.cluster before the end keeps every CTA alive until its peers are done with it")
    mine = barrier_arrays(ix)
    theirs = barrier_arrays(peer)
    k = next(i for i, a in enumerate(mine) if a is arr)
    if k >= len(theirs):
        ix.fail(op, f"reaches {arr.label(0)[:-3]} of CTA rank {rank} of the cluster before that CTA allocated and "
                    "initialised it: initialise, fence.mbarrier_init, then barrier.cluster before any cluster use")
    return theirs[k]


def check_cluster_visible(ix, op, arr: BarrierArray, i: int, rank: int, what: str) -> None:
    """A CTA uses barrier ``i`` of ``arr`` that lives in CTA ``rank`` of its cluster: its init must have been made
    visible to the cluster (fence.mbarrier_init, then barrier.cluster)."""
    if not arr.states[i].cluster_published:
        ix.fail(op, f"{what} {arr.label(i)} of CTA rank {rank} of the cluster before a barrier.cluster made its init "
                    "visible to the other CTAs (initialise, fence.mbarrier_init, then barrier.cluster)")


def note_remote_access(ix, op, what: str) -> None:
    """Record that ``ix`` reached into another CTA of its cluster (a remote arrival, a multicast), with the number of
    barrier.cluster it has passed: one made after the last barrier.cluster may find its target exited (checked when
    the cluster ends)."""
    cluster_state(ix).setdefault("remote", []).append((ix.state.get("cluster-epoch", 0), op, ix.rank, what))


def check_remote_accesses_end(ctas) -> None:
    """At the end of a cluster: no CTA reached into a peer after the last barrier.cluster (the peer may have exited,
    and its shared memory with it). Raises InterpreterError naming the first such access."""
    state = ctas[0].state.get("cluster", {})
    final = min(c.state.get("cluster-epoch", 0) for c in ctas)
    for epoch, op, rank, what in state.get("remote", []):
        if epoch >= final:
            ctas[rank].fail(op, f"CTA rank {rank} {what} after the cluster's last barrier.cluster: that CTA may "
                                "already have exited (and its shared memory with it); end the kernel with "
                                "barrier.cluster")


def cluster_state(ix) -> dict:
    """State shared by the CTAs of a cluster (kept by its rank-0 CTA)."""
    return ix.cluster[0].state.setdefault("cluster", {})


def _per_thread(ix, value):
    """(active thread ids, the value of each) in thread order."""
    act = np.nonzero(ix.mask)[0]
    return act, ix.get(value)[act]


def _verify_bars_index(op, v, bars, index):
    if not isinstance(bars.type, BarrierType):
        v.error(op, f"the first operand must be an mbarrier array, not {bars.type}")
        return
    if index.type != I32:
        v.error(op, f"the barrier index must be i32, not {index.type}")
    c = const_int(index)
    if c is not None and not 0 <= c < bars.type.count:
        v.error(op, f"barrier index {c} is outside %{bars.name}'s {bars.type.count} barriers")


# -- ops -------------------------------------------------------------------------------------------------------------

@register
class Alloc(OpDef):
    name = "mbarrier.alloc"
    summary = "an array of mbarriers in shared memory (8 bytes each)"
    required_attrs = ("count",)
    num_operands = 0
    num_results = 1

    def verify(self, op, v):
        t = op.results[0].type
        count = v.attr(op, "count", int)
        if not isinstance(t, BarrierType):
            v.error(op, f"result type must be mbarrier<N>, not {t}")
            return
        if count is not None and count != t.count:
            v.error(op, f"count {count} differs from the result type's {t.count} barriers")
        if t.count < 1:
            v.error(op, f"an mbarrier array holds at least 1 barrier, not {t.count}")

    def result_types(self, operand_types, attrs):
        return [BarrierType(attrs["count"])]

    def smem_request(self, op):
        t = op.results[0].type if len(op.results) == 1 else None
        if not isinstance(t, BarrierType) or t.count < 1:
            return None
        return 8 * t.count, 8

    def interpret(self, op, ix):
        t = op.results[0].type
        arr = BarrierArray(op.results[0].name, t.count, ix.smem_plan.address[id(op)])
        barrier_arrays(ix).append(arr)
        ix.set(op.results[0], arr)

    def lower(self, op, lx):
        """No code: the barriers' shared address (window + planned offset); barrier i is 8·i bytes further."""
        base, _align = lx.smem_address(op)
        lx.set(op.results[0], lx.BarrierRef(base, op.results[0].type.count))


@register
class Init(OpDef):
    name = "mbarrier.init"
    summary = "start a barrier at phase 0 expecting `arrivals` arrivals per phase"
    required_attrs = ("arrivals",)
    num_operands = 2
    num_results = 0

    def verify(self, op, v):
        bars, index = op.operands
        _verify_bars_index(op, v, bars, index)
        k = v.attr(op, "arrivals", int)
        if k is not None and not 1 <= k <= MAX_ARRIVALS:
            v.error(op, f"arrivals must be from 1 to {MAX_ARRIVALS}, not {k}")

    def interpret(self, op, ix):
        arr = ix.get(op.operands[0])
        act, idx = _per_thread(ix, op.operands[1])
        k = op.attrs["arrivals"]
        fresh = set()
        for t, i in zip(act.tolist(), idx.tolist()):
            if not 0 <= i < arr.count:
                ix.fail(op, f"barrier index {i} (thread {t}) is outside %{arr.name}'s {arr.count} barriers")
            st = arr.states[i]
            if i not in fresh:
                st.__init__()
                fresh.add(i)
            st.initialised = True
            st.expected = st.pending = k
            st.init_threads.add(t)
            st.init_op = op

    def lower(self, op, lx):
        """``mbarrier.init.shared::cta.b64 [bar], K`` (K an immediate) per executing thread."""
        k = op.attrs.get("arrivals")
        if not isinstance(k, int) or not 1 <= k <= MAX_ARRIVALS:
            lx.error(f"arrivals must be an integer from 1 to {MAX_ARRIVALS}, not {attribute_text(k)}")
        bars, index = op.operands
        lx.inline_ptx("mbarrier.init", [lx.get(bars).address(lx, lx.get(index)), k])


@register
class FenceInit(OpDef):
    name = "fence.mbarrier_init"
    summary = "make this thread's mbarrier inits visible to other threads (after a barrier.cta) and the TMA unit"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        act = set(np.nonzero(ix.mask)[0].tolist())
        for arr in barrier_arrays(ix):
            for st in arr.states:
                if st.initialised and st.init_threads & act:
                    st.fenced = True

    def lower(self, op, lx):
        """``fence.mbarrier_init.release.cluster``."""
        lx.inline_ptx("fence.mbarrier_init", [])


@register
class Arrive(OpDef):
    name = "mbarrier.arrive"
    summary = "one arrival per active thread on its barrier"
    num_operands = 2
    num_results = 0

    def verify(self, op, v):
        bars, index = op.operands
        _verify_bars_index(op, v, bars, index)

    def interpret(self, op, ix):
        arr = ix.get(op.operands[0])
        act, idx = _per_thread(ix, op.operands[1])
        for t, i in zip(act.tolist(), idx.tolist()):
            arr.arrive(ix, op, i, t)
        yield SwitchPoint(op, act)

    def lower(self, op, lx):
        """``mbarrier.arrive.shared::cta.b64 _, [bar]`` per executing thread."""
        bars, index = op.operands
        lx.inline_ptx("mbarrier.arrive", [lx.get(bars).address(lx, lx.get(index))])


@register
class ArriveExpectTx(OpDef):
    name = "mbarrier.arrive_expect_tx"
    summary = "per active thread: add `bytes` to the barrier's tx-count, then arrive once"
    required_attrs = ("bytes",)
    num_operands = 2
    num_results = 0

    def verify(self, op, v):
        bars, index = op.operands
        _verify_bars_index(op, v, bars, index)
        b = v.attr(op, "bytes", int)
        if b is not None and not 1 <= b <= MAX_TX:
            v.error(op, f"bytes must be from 1 to {MAX_TX} (a phase's tx range), not {b}")

    def interpret(self, op, ix):
        arr = ix.get(op.operands[0])
        act, idx = _per_thread(ix, op.operands[1])
        for t, i in zip(act.tolist(), idx.tolist()):
            arr.expect_tx(ix, op, i, op.attrs["bytes"], t)
            arr.arrive(ix, op, i, t)

    def lower(self, op, lx):
        """``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], B`` (B an immediate) per executing thread."""
        nbytes = op.attrs.get("bytes")
        if not isinstance(nbytes, int) or not 1 <= nbytes <= MAX_TX:
            lx.error(f"bytes must be an integer from 1 to {MAX_TX}, not {attribute_text(nbytes)}")
        bars, index = op.operands
        lx.inline_ptx("mbarrier.arrive.expect_tx", [lx.get(bars).address(lx, lx.get(index)), nbytes])


class BarrierWait(Wait):
    """Threads waiting for the phase of parity ``parity`` of barrier ``index`` of ``arr`` to complete."""

    def __init__(self, op, threads, arr, index, parity):
        super().__init__(op, threads)
        self.arr, self.index, self.parity = arr, index, parity

    def ready(self, ix) -> bool:
        return (self.arr.states[self.index].phase & 1) != self.parity

    def helps(self, ix, aop) -> bool:
        targets = getattr(aop, "targets", None)
        if targets:
            return any(b == (self.arr, self.index) for _cta, b in targets)
        return getattr(aop, "barrier", None) == (self.arr, self.index)

    context = ""   # what the headline adds after the phase (a pipeline op's iteration and stage)

    def beyond_threads(self, ix) -> bool:
        return self.arr.states[self.index].pending == 0

    def headline(self, ix, role: str | None = None) -> str:
        """``role consumer (warps 4-7) waits on %full[0] for parity 1 (phase 1), but no TMA in flight or arrive can
        complete it: 0 of 1 arrivals, 8192 expect-tx bytes pending``."""
        st = self.arr.states[self.index]
        who = describe_waiters(self.threads, role)
        pending = f"{st.pending} of {st.expected} arrivals"
        if st.tx > 0:
            pending += f", {st.tx} expect-tx bytes"
        pending += " pending"
        if st.tx < 0:
            pending += f" and {-st.tx} bytes delivered beyond the expect-tx"
        return (f"{who} {waits_verb(who)} on {self.arr.label(self.index)} for parity {self.parity} (phase "
                f"{st.phase}){self.context}, but no TMA in flight or arrive can complete it: {pending}")

    def hang(self, ix) -> str:
        label = self.arr.label(self.index)
        who = describe_threads(self.threads)
        verb = "waits" if len(self.threads) == 1 else "wait"
        return (f"{who} {verb} on {label} for the phase of parity {self.parity} to complete, but {label} is in "
                f"{self.arr.describe(self.index)} (wait(P) returns once the barrier's current phase parity differs "
                "from P)")


@register
class WaitOp(OpDef):
    name = "mbarrier.wait"
    summary = "block until the barrier's phase of the given parity has completed"
    num_operands = 3
    num_results = 0

    def verify(self, op, v):
        bars, index, parity = op.operands
        _verify_bars_index(op, v, bars, index)
        if parity.type not in (I32, I1):
            v.error(op, f"the parity must be i32 or i1, not {parity.type}")
        c = const_int(parity)
        if c is not None and c not in (0, 1):
            v.error(op, f"the parity must be 0 or 1, not {c}")

    def interpret(self, op, ix):
        arr = ix.get(op.operands[0])
        act, idx = _per_thread(ix, op.operands[1])
        _, par = _per_thread(ix, op.operands[2])
        par = par.astype(np.int64)
        if len(set(idx.tolist())) > 1 or len(set(par.tolist())) > 1:
            pairs = sorted(set(zip(idx.tolist(), par.tolist())))[:4]
            ix.fail(op, f"the waiting threads disagree on (barrier, parity): {pairs}: the interpreter runs a CTA in "
                        "lock step, so all active threads of a wait must wait for the same phase")
        i, p = int(idx[0]), int(par[0])
        if p not in (0, 1):
            ix.fail(op, f"parity {p} is not 0 or 1 (the phase bit is (k / stages) & 1)")
        for t in act.tolist():
            arr.state(ix, op, i, t)
        yield BarrierWait(op, act, arr, i, p)
        ix.acquire(act, arr.states[i].released)

    def lower(self, op, lx):
        """A loop around ``mbarrier.try_wait.parity`` until it reports the phase of that parity complete."""
        bars, index, parity = op.operands
        p = lx.get(parity)
        if parity.type == I1:
            p = lx.b.zext(p, lx.llvm_type(I32))
        lx.barrier_wait(lx.get(bars).address(lx, lx.get(index)), p)


def require_whole_cta(ix, op, which: str) -> None:
    """A barrier every thread of the CTA must reach: fail naming who reached it and who never will."""
    if not ix.mask.all():
        here = np.nonzero(ix.mask)[0]
        away = np.nonzero(~ix.mask)[0]
        ix.fail(op, f"reached by {describe_threads(here)} only: {describe_threads(away)} never arrive ({which} "
                    "barrier inside divergent control flow hangs)")


@register
class CtaBarrier(OpDef):
    name = "barrier.cta"
    summary = "bar.sync 0: every thread of the CTA waits for all the others"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        require_whole_cta(ix, op, "a CTA")
        for arr in barrier_arrays(ix):
            for st in arr.states:
                if st.fenced:
                    st.published = True
        ix.synchronize(np.arange(ix.nthreads))
        ix.at_barrier(op)

    def lower(self, op, lx):
        """``bar.sync 0`` (convergent: every thread of each warp reaches it together)."""
        lx.inline_ptx("bar.sync", [])


@register
class ClusterBarrier(OpDef):
    name = "barrier.cluster"
    summary = "barrier.cluster.arrive + wait: every thread of every CTA of the cluster waits for all the others"
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        """Nothing beyond the signature (no operands, no results)."""

    def interpret(self, op, ix):
        require_whole_cta(ix, op, "a cluster")
        state = cluster_state(ix).setdefault("barrier", {"arrived": 0, "generation": 0, "expected": len(ix.cluster)})
        # every fenced init of this CTA is now visible to the whole cluster (release.cluster / acquire.cluster)
        for arr in barrier_arrays(ix):
            for st in arr.states:
                if st.fenced:
                    st.published = st.cluster_published = True
        ix.state["cluster-epoch"] = ix.state.get("cluster-epoch", 0) + 1
        ix.synchronize(np.arange(ix.nthreads))   # the whole CTA arrives (its side of the cluster-wide order)
        wait = arrive_counting(op, np.nonzero(ix.mask)[0], state, 1, "barrier.cluster (CTAs of the cluster)")
        if wait is not None:
            yield wait

    def lower(self, op, lx):
        """``barrier.cluster.arrive.release.aligned`` then ``barrier.cluster.wait.acquire.aligned``."""
        lx.inline_ptx("barrier.cluster", [])
