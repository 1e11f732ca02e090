"""The CPU interpreter: runs a verified kernel on numpy, CTA by CTA, all threads of a CTA in lock step.

A scalar value is an array over the CTA's threads; a fragment an array (threads, values). ``scf.if`` runs each
region under a mask of the threads that take it; stores write only active threads. Global tensors are numpy
arrays, updated in place. What each op does is defined with the op in ``ptxgen.ir.ops``.

Asynchronous model (spec/tile-ir.md §6):

- Shared memory is one uint8 array per CTA indexed by absolute byte address; the dynamic window starts at
  ``SMEM_BASE`` = 1024 (0x400, as on an H100), allocations follow in program order at their alignment.
- Region execution is resumable: ``_CTA.steps(region)`` is a generator; an op's ``interpret`` may itself be a
  generator, and a blocking op (``mbarrier.wait``, ``tma.store_wait``) yields a ``Wait`` condition. The CTA runs as
  one lock-step stream, so when its stream yields an unmet condition every thread of the CTA is blocked: the
  scheduler then performs steps of asynchronous operations in flight (TMA copies) that can meet it; when none can,
  it raises HangError naming the op, the barrier, its phase and the waiting threads.
- Asynchronous copies happen when the scheduler decides, never at issue. The default schedule (``"lazy"``) is
  deterministic and as late as legal: a copy is performed only when a blocked wait needs it (oldest first), so a
  kernel that reads a stage before waiting sees stale data. ``"eager"`` performs every copy at issue; an int seed
  (or a numpy Generator) performs random copies in random order after any op, and steps the warpgroups of
  ``gpu.roles`` in a random order, for stress tests.
- Races between the threads' shared-memory accesses and copies still in flight (a read of bytes a TMA load may
  still write, a write of bytes a TMA store may still read, a TMA store of bytes written by smem.store without a
  fence.proxy_async) raise RaceError unless ``races="ignore"``; so do generic accesses of one byte by two threads
  that no barrier orders (a read or a TMA copy of what another thread wrote, a write of what another thread read
  or wrote): ``ptxgen.happens_before`` keeps the threads' order from barrier.cta, barrier.named and mbarrier
  arrive/wait.
"""
from __future__ import annotations

import inspect
import itertools

import numpy as np

from .happens_before import HappensBefore
from .ir import launch
from .ir.core import Kernel, Module, Region
from .ir.host_dtypes import host_dtype_mismatch
from .ir.ops import (OPS, SMEM_BASE, describe_threads, describe_waiters, distinct_sorted, numpy_dtype, round_to,
                     smem_plan, value_problem)
from .ir.ops.mbarrier import check_remote_accesses_end
from .ir.ops.roles import RolesWait
from .ir.ops.tma import encode_tensor_map
from .ir.types import GlobalTensorType, ScalarType, TensorMapType
from .verify import verify


class InterpreterError(RuntimeError):
    """The kernel did something at run time the IR forbids (``file:line:col: op: message``)."""


class HangError(InterpreterError):
    """Every thread of a CTA is blocked and nothing in flight can unblock them."""


class RaceError(InterpreterError):
    """A shared-memory access races with an asynchronous copy in flight (or misses a proxy fence)."""


class _CTA:
    """The state of one CTA while it runs: values, the active-thread mask, launch geometry, shared memory and the
    asynchronous operations in flight."""

    def __init__(self, block_index, block_dim, grid_dim, cache, plan=None, schedule="lazy", races="error"):
        self.block_index = block_index
        self.block_dim = block_dim
        self.grid_dim = grid_dim
        self.nthreads = block_dim[0] * block_dim[1] * block_dim[2]
        self.linear_thread = np.arange(self.nthreads, dtype=np.int64)
        bx, by = block_dim[0], block_dim[1]
        self.thread_index = (self.linear_thread % bx, (self.linear_thread // bx) % by, self.linear_thread // (bx * by))
        self.mask = np.ones(self.nthreads, dtype=bool)
        self.values = {}
        self.yielded = None
        self._cache = cache
        self.smem_plan = plan if plan is not None else smem_plan([])
        self.smem = np.zeros(SMEM_BASE + self.smem_plan.total, dtype=np.uint8)
        # thread + 1 of the last generic (st.shared) writer of each byte not yet ordered by fence.proxy_async
        self.generic_writer = np.zeros(self.smem.size, dtype=np.int32)
        # the threads' happens-before order and each byte's last generic accesses (the generic race check)
        self.order = HappensBefore(self.nthreads, self.smem.size) if races == "error" else None
        self.inflight = []      # asynchronous operations in flight, in issue order
        self.state = {}         # op-owned per-CTA state (barrier arrays, bulk groups)
        self.cluster = [self]   # the CTAs of this CTA's cluster, by rank (shared list), and this CTA's rank
        self.rank = 0
        self.exited = False
        self.races = races
        if schedule in ("lazy", "eager"):
            self.schedule, self.rng = schedule, None
        else:
            self.schedule = "random"
            self.rng = schedule if isinstance(schedule, np.random.Generator) else np.random.default_rng(schedule)

    # -- used by op definitions ---------------------------------------------------------------------------------
    def get(self, value):
        try:
            return self.values[id(value)]
        except KeyError:
            raise InterpreterError(f"%{value.name} has no value (it was not computed on this path)") from None

    def set(self, value, data) -> None:
        self.values[id(value)] = data

    def cached(self, key, compute):
        """Memoise per-kernel tables (TV tables, tile coordinates, smem byte offsets) across CTAs."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def fail(self, op, message: str, error=InterpreterError):
        raise error(f"{op.loc}: {op.name}: {message}")

    # -- regions: resumable execution ------------------------------------------------------------------------------
    def steps(self, region: Region, mask=None):
        """Generator running ``region`` for the active threads (restricted to ``mask``): yields the ``Wait`` of each
        blocking op and returns the region's yielded values. An op whose ``interpret`` is a generator is delegated
        to; the mask and yield state are restored whenever it resumes."""
        saved_mask, saved_yield = self.mask, self.yielded
        if mask is not None:
            self.mask = self.mask & mask
        self.yielded = []
        try:
            if self.mask.any():
                for op in region.ops:
                    result = OPS[op.name].interpret(op, self)
                    if inspect.isgenerator(result):
                        yield from self._delegate(result)
                    if self.rng is not None:
                        self.tick()
            elif region.ops and region.ops[-1].name == "scf.yield":
                # no thread takes this path: yield placeholders of the right shape (they are masked away)
                self.yielded = [np.zeros_like(self.get(x)) if id(x) in self.values else None
                                for x in region.ops[-1].operands]
            return self.yielded
        finally:
            self.mask, self.yielded = saved_mask, saved_yield

    def _delegate(self, gen):
        result = None
        while True:
            try:
                wait = gen.send(result)
            except StopIteration as stop:
                return stop.value
            here = (self.mask, self.yielded)
            result = yield wait
            self.mask, self.yielded = here

    def drive(self, gen):
        """Run a ``steps`` generator to completion, serving each Wait it yields; returns its value."""
        try:
            wait = next(gen)
            while True:
                self.wait_for(wait)
                wait = gen.send(None)
        except StopIteration as stop:
            return stop.value

    # -- the scheduler -----------------------------------------------------------------------------------------------
    def wait_for(self, wait) -> None:
        """All threads of the CTA are blocked on ``wait``: perform steps of copies in flight that can help until it
        is met (oldest first, or at random), or raise HangError."""
        while not wait.ready(self):
            helpers = [a for a in self.inflight if wait.helps(self, a)]
            if not helpers:
                lock_step = None if isinstance(wait, RolesWait) else (
                    "every thread of the CTA is blocked (lock step: outside gpu.roles a CTA is one stream), so no "
                    "arrival can come")
                self.fail(wait.where(self), hang_report(wait.headline(self), [wait.hang(self), lock_step],
                                                    self.inflight), HangError)
            self.advance(helpers[0] if self.rng is None else helpers[self.rng.integers(len(helpers))])

    def issue(self, aop) -> None:
        """A thread issued an asynchronous operation: it is in flight until the scheduler performs it. An operation
        that touches other CTAs of the cluster (a multicast copy: ``aop.ctas``) is in flight in each of them, so
        their race checks and waits see it."""
        aop.owners = list(dict.fromkeys([self] + list(getattr(aop, "ctas", ()))))
        for cta in aop.owners:
            cta.inflight.append(aop)
        if self.schedule == "eager":
            while not aop.done:
                self.advance(aop)

    def advance(self, aop) -> None:
        aop.step(self)
        if aop.done:
            for cta in getattr(aop, "owners", [self]):
                if aop in cta.inflight:
                    cta.inflight.remove(aop)

    def tick(self) -> None:
        """Random schedule: perform random steps of copies in flight (each with probability 1/2 in turn)."""
        while self.rng.random() < 0.5:
            candidates = [a for a in self.inflight if getattr(a, "schedulable", True)]
            if not candidates:
                return
            self.advance(candidates[self.rng.integers(len(candidates))])

    def at_barrier(self, op) -> None:
        """The whole CTA reached a barrier: a scheduling point."""
        if self.rng is not None:
            self.tick()

    def finish(self) -> None:
        """The CTA ends: no copy may still be writing or reading its shared memory; stores that have read their
        source complete their global writes."""
        for a in self.inflight:
            if a.writes(self) is not None:
                raise InterpreterError(f"{a.op.loc}: {a.op.name}: the CTA ends while {a.describe()} is still in "
                                       "flight: nothing waited for it")
            if a.reads(self) is not None:
                fix = getattr(a, "fix", "tma.store_wait {pending = 0, read = true}")
                raise InterpreterError(f"{a.op.loc}: {a.op.name}: the CTA ends while {a.describe()} may still be "
                                       f"reading shared memory: {fix} before the end")
        while self.inflight:
            self.advance(self.inflight[0])

    # -- shared memory -------------------------------------------------------------------------------------------------
    def _bytes(self, addresses, esize):
        return np.asarray(addresses, dtype=np.int64)[..., None] + np.arange(esize)

    def smem_read(self, op, what: str, addresses, esize: int, threads=None, group=None):
        """Read of the elements at ``addresses`` (any shape): uint8 of shape (..., esize). A generic (ld.shared) read
        names its thread per row of ``addresses`` (``threads``, for smem.load: (threads, values) addresses); a read
        for a group of threads together (a wgmma's operand tiles for its warpgroup) names the ``group``. Either is
        checked against the other threads' generic writes (``HappensBefore``)."""
        b = self._bytes(addresses, esize)
        self.check_async_access(op, distinct_sorted(b), "read", what)
        if self.order is not None:
            if threads is not None:
                race = self.order.read(op, b, np.asarray(threads, dtype=np.int64).reshape(
                    (-1,) + (1,) * (b.ndim - 1)))
                self._unordered(op, what, race)
            elif group is not None:
                self._unordered(op, what, self.order.read_by_group(b, group), reader=describe_threads(group))
        return self.smem[b]

    def smem_write(self, op, what: str, addresses, raw, threads) -> None:
        """Generic (st.shared) write: ``addresses`` (threads, values), ``raw`` (threads, values, esize) for the
        thread ids ``threads``; later writes of the same byte win."""
        b = self._bytes(addresses, raw.shape[-1])
        self.check_async_access(op, distinct_sorted(b), "write", what)
        if self.order is not None:
            self._unordered(op, what, self.order.write(op, b, np.asarray(threads, dtype=np.int64)[:, None, None]))
        self.smem[b] = raw
        self.generic_writer[b] = (np.asarray(threads)[:, None, None] + 1)

    def smem_dma_write(self, addresses, raw) -> None:
        """An async-proxy (TMA) write of the elements at ``addresses``."""
        b = self._bytes(addresses, raw.shape[-1])
        self.smem[b] = raw
        self.generic_writer[b] = 0
        if self.order is not None:
            self.order.forget(b)

    def check_issue_order(self, op, byteset, what: str, thread: int, access: str) -> None:
        """A TMA copy issued by ``thread`` reads (a store) or writes (a load) ``byteset``: every other thread's generic
        write of those bytes (and, for a load, read) must happen before the issue."""
        if self.order is None:
            return
        if access == "read":
            race = self.order.read_by_group(byteset, [thread])
        else:
            race = self.order.write(op, byteset, np.full(byteset.shape, thread, dtype=np.int64), record=False)
        self._unordered(op, what, race)

    def read_async(self, op, byteset, thread: int) -> None:
        """A TMA store issued by ``thread`` will read ``byteset`` (``HappensBefore.read_async``)."""
        if self.order is not None:
            self.order.read_async(op, byteset, thread)

    def settle_async_read(self, byteset, thread: int) -> None:
        """``thread`` waited for its TMA store of ``byteset`` to finish reading (``HappensBefore.settle``)."""
        if self.order is not None:
            self.order.settle(byteset, thread)

    def _unordered(self, op, what: str, race, reader: str | None = None) -> None:
        """Raise RaceError for an unordered pair of generic accesses (``HappensBefore``'s report), naming both ops,
        their threads and the bytes."""
        if race is None:
            return
        kind, earlier, earlier_op, later, (lo, hi) = race
        did, does = {"write-read": ("wrote", "reads"), "read-write": ("read", "writes"),
                     "write-write": ("wrote", "writes")}[kind]
        me = reader or describe_waiters([later])
        fix = ("a barrier.cta, a barrier.named both reach, or an mbarrier arrive then wait must come between them"
               if earlier_op.name != "tma.store" else
               f"thread {earlier} must wait for that store to read (tma.store_wait {{read = true}}), then a barrier "
               "both reach must come before the write")
        self.fail(op, f"{does} shared memory bytes [{lo}, {hi}) of {what} that {describe_waiters([earlier])} {did} "
                      f"with {earlier_op.name} at {earlier_op.loc}, and nothing orders that "
                      f"{'write' if did == 'wrote' else 'read'} before this {'read' if does == 'reads' else 'write'} "
                      f"by {me}: {fix}", RaceError)

    # -- synchronisation of the threads (the generic race check's happens-before order) -------------------------------
    def synchronize(self, threads) -> None:
        """``threads`` meet at a barrier (barrier.cta, a completed barrier.named, the CTA at barrier.cluster)."""
        if self.order is not None:
            self.order.synchronize(threads)

    def release(self, threads, into):
        """An mbarrier arrival of ``threads``: their clocks joined into ``into`` (the phase's released clock)."""
        return self.order.release(threads, into) if self.order is not None else None

    def acquire(self, threads, released) -> None:
        """``threads`` return from a wait on a completed phase that released ``released``."""
        if self.order is not None:
            self.order.acquire(threads, released)

    def check_async_access(self, op, byteset, access: str, what: str) -> None:
        """Raise RaceError if an access (``"read"`` or ``"write"``) of the sorted unique bytes ``byteset`` races with
        a copy in flight: any access of bytes a TMA load may still write, a write of bytes a TMA store may still read."""
        if self.races == "ignore" or not self.inflight:
            return
        lo, hi = int(byteset[0]), int(byteset[-1])
        for a in self.inflight:
            for other, theirs in ((a.writes(self), "writing"), (a.reads(self) if access == "write" else None,
                                                                 "reading")):
                if other is None or other[0] > hi or other[-1] < lo:
                    continue
                common = np.intersect1d(byteset, other, assume_unique=True)
                if common.size:
                    fix = ("wait on its barrier first" if theirs == "writing"
                           else getattr(a, "fix", "tma.store_wait {read = true} first"))
                    self.fail(op, f"{access}s shared memory bytes [{int(common[0])}, {int(common[-1]) + 1}) of {what} "
                                  f"that {a.describe()} may still be {theirs}: {fix}", RaceError)

    def check_generic_writes(self, op, byteset, what: str, access: str = "read") -> None:
        """An async-proxy access (a TMA store reads, a TMA load writes) of ``byteset``: every generic write to those
        bytes must have been ordered by a fence.proxy_async of its thread."""
        if self.races == "ignore":
            return
        w = self.generic_writer[byteset]
        dirty = np.nonzero(w)[0]
        if dirty.size:
            writers = describe_threads(distinct_sorted(w[dirty]) - 1)
            self.fail(op, f"{access}s bytes of {what} (from byte {int(byteset[dirty[0]])}) that {writers} wrote with "
                          f"smem.store and did not order with fence.proxy_async: TMA {access}s through the async "
                          "proxy", RaceError)

    def fence_generic_writes(self, threads) -> None:
        """fence.proxy_async by ``threads``: their generic writes so far are visible to the async proxy."""
        lut = np.zeros(self.nthreads + 1, dtype=bool)
        lut[np.asarray(threads) + 1] = True
        self.generic_writer[lut[self.generic_writer]] = 0


def hang_report(headline: str, details, inflight) -> str:
    """A HangError's message after the location: ``hang: <headline>`` on the first line (who waits on what and why
    it can never complete), then one indented line per detail (None skipped; a detail may hold several lines) and
    the asynchronous operations in flight that cannot help."""
    lines = [line for d in details if d for line in d.split("\n")]
    if inflight:
        lines += ["in flight, but unable to help: " + "; ".join(a.describe() for a in inflight)]
    else:
        lines += ["no asynchronous copy is in flight"]
    return f"hang: {headline}" + "".join(f"\n  {line}" for line in lines)


def _launch_dims(kernel: Kernel, env: dict, grid):
    """(grid, block) of a launch: the grid evaluated for the arguments (or ``grid``, the caller's override), the
    block from the kernel. A grid the hardware could not run (a negative entry, a division by zero, not a multiple
    of the cluster) raises InterpreterError naming the attribute: ``@k: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m)
    divides by %m = 0``."""
    try:
        if grid is None:
            grid_dim = launch.evaluate_grid(kernel, env)
        else:
            entries = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
            if not 1 <= len(entries) <= 3 or not all(isinstance(g, (int, np.integer)) and not isinstance(g, bool)
                                                     and g >= 0 for g in entries):
                raise ValueError(f"grid must be 1 to 3 integers >= 0, not {grid!r}")
            grid_dim = tuple(int(g) for g in entries) + (1,) * (3 - len(entries))
            launch.check_grid_fits_cluster(kernel, grid_dim)
        return grid_dim, launch.block_dims(kernel)
    except launch.LaunchAttributeError as e:
        raise InterpreterError(str(e)) from None


def _prepare(ir, args: dict, kernel, grid, check: bool, schedule, races):
    """The kernel, its launch geometry, the bound parameter values and the shared-memory plan of a launch."""
    if not isinstance(ir, (Kernel, Module)):
        raise TypeError(f"interpret runs a Module or a Kernel, not {type(ir).__name__}")
    k = ir if isinstance(ir, Kernel) else ir.kernel(kernel or None)
    if check:
        verify(k)
    if races not in ("error", "ignore"):
        raise ValueError(f"races must be 'error' or 'ignore', not {races!r}")
    if isinstance(schedule, str) and schedule not in ("lazy", "eager"):
        raise ValueError(f"schedule must be 'lazy', 'eager', a seed or a numpy Generator, not {schedule!r}")
    if isinstance(schedule, (int, np.integer)) and not isinstance(schedule, bool):
        schedule = np.random.default_rng(int(schedule))
    missing = [p.name for p in k.params if p.name not in args]
    if missing:
        raise InterpreterError(f"@{k.name}: missing arguments {', '.join('%' + m for m in missing)}")
    env, bound = {}, {}
    for p in k.params:
        value = args[p.name]
        if isinstance(p.type, GlobalTensorType):
            if not isinstance(value, np.ndarray) or value.ndim != p.type.rank:
                raise InterpreterError(f"@{k.name}: argument %{p.name} must be a rank-{p.type.rank} numpy array")
            wrong = host_dtype_mismatch(p.name, value.dtype, p.type.dtype, torch=False)
            if wrong:
                raise InterpreterError(f"@{k.name}: {wrong}")
        elif isinstance(p.type, TensorMapType):
            try:
                bound[p.name] = encode_tensor_map(value, p.type, p.name)
            except ValueError as e:
                raise InterpreterError(f"@{k.name}: {e}") from None
        elif isinstance(p.type, ScalarType):
            _check_scalar(k, p, value)
        env[p.name] = value
    grid_dim, block_dim = _launch_dims(k, env, grid)
    return k, grid_dim, block_dim, env, bound, smem_plan(k.body.ops), schedule


def _check_scalar(k, p, value) -> None:
    """A scalar argument is a number its parameter's type holds (``n = 2**40`` does not fit an ``i32``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (int, float)):
        raise InterpreterError(f"@{k.name}: argument %{p.name} must be a number")
    if isinstance(value, bool) and p.type.kind != "pred":
        value = int(value)
    problem = value_problem(value, p.type)
    if problem is not None:
        raise InterpreterError(f"@{k.name}: argument %{p.name}: {problem}")


def _run_cluster(ctas) -> None:
    """Run the CTAs of one cluster concurrently: each CTA is a stream resumed in turn until it blocks; when every CTA
    is blocked, a step of an asynchronous operation in flight (in any of them) that helps one of their waits is
    performed, else the hang is reported naming each CTA's wait."""
    if len(ctas) == 1:
        ctas[0].drive(ctas[0].steps(ctas[0]._body))
        return
    streams = [[cta, cta.steps(cta._body), None, False] for cta in ctas]   # cta, generator, wait, started
    live = list(streams)
    while live:
        progressed = False
        for st in list(live):
            cta, gen, wait, started = st
            if started and wait is not None and not wait.ready(cta):
                continue
            progressed = True
            try:
                st[2] = gen.send(None) if started else next(gen)
                st[3] = True
            except StopIteration:
                cta.exited = True
                live.remove(st)
        if not live or progressed:
            continue
        for cta, _gen, wait, _started in live:
            helpers = [a for other in ctas for a in other.inflight
                       if getattr(a, "schedulable", True) and wait.helps(cta, a)]
            if helpers:
                owner = helpers[0].owners[0] if getattr(helpers[0], "owners", None) else cta
                owner.advance(helpers[0])
                break
        else:
            cta, _gen, wait, _started = live[0]
            details = ["every CTA of the cluster is blocked:"] + [
                f"CTA rank {c.rank} (block {c.block_index}) at {w.op.loc} ({w.op.name}): {w.hang(c)}"
                for c, _g, w, _s in live]
            inflight = [a for c in ctas for a in c.inflight]
            cta.fail(wait.where(cta), hang_report(f"CTA rank {cta.rank}: {wait.headline(cta)}", details,
                                               list(dict.fromkeys(inflight))), HangError)


def _new_cta(k, block_index, grid_dim, block_dim, env, bound, plan, cache, schedule, races) -> _CTA:
    cta = _CTA(block_index, block_dim, grid_dim, cache, plan, schedule, races)
    cta._body = k.body
    for p in k.params:
        value = env[p.name]
        if p.name in bound:
            cta.set(p, bound[p.name])
        elif isinstance(p.type, GlobalTensorType):
            cta.set(p, value)
        elif p.type.is_float:
            # a number for a bf16/f16/fp8 parameter is rounded to its type, as the launcher packs it
            cta.set(p, round_to(np.full(cta.nthreads, value, dtype=np.float32), p.type))
        else:
            cta.set(p, np.full(cta.nthreads, value, dtype=numpy_dtype(p.type)))
    return cta


# the hardware's IEEE arithmetic: inf and NaN operands and results (a NaN input, a max over -inf, an overflow to inf)
# are values the kernel computes with, not conditions to warn about, so numpy's RuntimeWarnings stay off while a kernel
# runs (division by zero in integer ops is the ops' own InterpreterError)
def _ieee_arithmetic():
    return np.errstate(all="ignore")


def interpret(ir, args: dict, kernel: str | None = None, grid=None, check: bool = True, schedule="lazy",
              races: str = "error") -> None:
    """Run a kernel on the CPU: ``interpret(module, {"x": x, "z": z, "n": 4096})``.

    ``args`` maps parameter names (without %) to numpy arrays (gtensor and tmap parameters, modified in place) or
    numbers. An array has the element type's host dtype, as for the launcher (``ptxgen.ir.host_dtypes``:
    ``numpy.float32`` for f32, ``numpy.float16`` for f16, ``ml_dtypes.bfloat16`` for bf16, ``ml_dtypes.float8_e4m3fn``
    / ``float8_e5m2`` for e4m3 / e5m2); any other dtype is an InterpreterError that says what to pass. A number for a
    narrow float parameter is rounded to it. ``grid`` overrides the kernel's grid attribute. ``schedule``: when
    asynchronous copies happen —
    ``"lazy"`` (default; only when a blocked wait needs them), ``"eager"`` (at issue), or a seed / numpy Generator
    (random). ``races``: ``"error"`` (default) raises RaceError on a shared-memory race with a copy in flight,
    ``"ignore"`` lets it happen. Pre: the IR verifies (checked unless ``check=False``).
    Post: global arrays hold what the kernel stored; a runtime violation raises InterpreterError naming the op
    (HangError when the CTA can never go on, RaceError for a race, e.g. ``k.tile:9:3: arith.div: division by zero:
    %n / %t is 5 / 0 in thread 0``); a grid the arguments make invalid (negative, a division by zero, not a multiple
    of the cluster) raises InterpreterError naming the attribute (``@k: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m)
    divides by %m = 0``); a zero grid runs nothing. Errors: VerifyError (the check), InterpreterError, and
    ValueError / TypeError for arguments that are not what it takes (a kernel name the module lacks, a grid that is
    no grid); nothing else.
    """
    k, grid_dim, block_dim, env, bound, plan, schedule = _prepare(ir, args, kernel, grid, check, schedule, races)
    with _ieee_arithmetic():
        _run_grid(k, grid_dim, block_dim, env, bound, plan, schedule, races)


def _run_grid(k, grid_dim, block_dim, env, bound, plan, schedule, races) -> None:
    """``interpret``'s launch: every cluster of the grid, one after another."""
    cache = {}
    cdim = launch.cluster_dims(k)  # the grid is a multiple of it (_launch_dims)
    cluster_grid = [g // c for g, c in zip(grid_dim, cdim)]
    for cz, cy, cx in itertools.product(*(range(n) for n in reversed(cluster_grid))):
        ctas = []
        for rz, ry, rx in itertools.product(*(range(n) for n in reversed(cdim))):
            block = (cx * cdim[0] + rx, cy * cdim[1] + ry, cz * cdim[2] + rz)
            ctas.append(_new_cta(k, block, grid_dim, block_dim, env, bound, plan, cache, schedule, races))
        for rank, cta in enumerate(ctas):
            cta.cluster, cta.rank = ctas, rank
        _run_cluster(ctas)
        if len(ctas) > 1:
            check_remote_accesses_end(ctas)
        for cta in ctas:
            cta.finish()


def run_cta(ir, args: dict, block=(0, 0, 0), kernel: str | None = None, grid=None, check: bool = True,
            schedule="lazy", races: str = "error", finish: bool = True) -> _CTA:
    """Run one CTA (``block`` = its index) like ``interpret`` and return its state, for tests and debugging:
    ``.smem`` (bytes by absolute address), ``.state["barriers"]`` (the BarrierArrays: ``.states[i].phase``,
    ``.pending``, ``.tx``), ``.inflight`` (copies not yet performed), ``.values``. With ``finish=False`` the
    end-of-CTA checks and the remaining global writes of finished-reading TMA stores are skipped."""
    k, grid_dim, block_dim, env, bound, plan, schedule = _prepare(ir, args, kernel, grid, check, schedule, races)
    if launch.cluster_dims(k) != (1, 1, 1):
        raise InterpreterError(f"@{k.name}: run_cta runs one CTA, but the kernel's CTAs run in clusters of "
                               f"{launch.cluster_dims(k)}: use interpret")
    cta = _new_cta(k, tuple(block) + (0,) * (3 - len(block)), grid_dim, block_dim, env, bound, plan, {}, schedule,
                   races)
    with _ieee_arithmetic():
        cta.drive(cta.steps(k.body))
        if finish:
            cta.finish()
    return cta


__all__ = ["HangError", "InterpreterError", "RaceError", "interpret", "run_cta"]
