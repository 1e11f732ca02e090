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
  (or a numpy Generator) performs random copies in random order after any op, for stress tests.
- Races between the threads' shared-memory accesses and copies still in flight (a read of bytes a TMA load may
  still write, a write of bytes a TMA store may still read, a TMA store of bytes written by smem.store without a
  fence.proxy_async) raise RaceError unless ``races="ignore"``.
"""
from __future__ import annotations

import inspect
import itertools

import numpy as np

from .ir.core import Kernel, Module, Region
from .ir.ops import OPS, SMEM_BASE, describe_threads, numpy_dtype, smem_plan, value_problem
from .ir.ops.mbarrier import check_remote_accesses_end
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
                if self.inflight:
                    others = "; in flight, but unable to help: " + "; ".join(a.describe() for a in self.inflight)
                else:
                    others = "; no asynchronous copy is in flight"
                self.fail(wait.op, f"hang: {wait.hang(self)}{others}", HangError)
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

    def smem_read(self, op, what: str, addresses, esize: int):
        """Generic (ld.shared) read of the elements at ``addresses`` (any shape): uint8 of shape (..., esize)."""
        b = self._bytes(addresses, esize)
        self.check_async_access(op, np.unique(b), "read", what)
        return self.smem[b]

    def smem_write(self, op, what: str, addresses, raw, threads) -> None:
        """Generic (st.shared) write: ``addresses`` (threads, values), ``raw`` (threads, values, esize) for the
        thread ids ``threads``; later writes of the same byte win."""
        b = self._bytes(addresses, raw.shape[-1])
        self.check_async_access(op, np.unique(b), "write", what)
        self.smem[b] = raw
        self.generic_writer[b] = (np.asarray(threads)[:, None, None] + 1)

    def smem_dma_write(self, addresses, raw) -> None:
        """An async-proxy (TMA) write of the elements at ``addresses``."""
        b = self._bytes(addresses, raw.shape[-1])
        self.smem[b] = raw
        self.generic_writer[b] = 0

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
            writers = describe_threads(np.unique(w[dirty]) - 1)
            self.fail(op, f"{access}s bytes of {what} (from byte {int(byteset[dirty[0]])}) that {writers} wrote with "
                          f"smem.store and did not order with fence.proxy_async: TMA {access}s through the async "
                          "proxy", RaceError)

    def fence_generic_writes(self, threads) -> None:
        """fence.proxy_async by ``threads``: their generic writes so far are visible to the async proxy."""
        lut = np.zeros(self.nthreads + 1, dtype=bool)
        lut[np.asarray(threads) + 1] = True
        self.generic_writer[lut[self.generic_writer]] = 0


def cluster_dims(kernel: Kernel) -> tuple:
    """The kernel's cluster shape (x, y, z) (its ``cluster`` attribute; (1, 1, 1) without one)."""
    value = kernel.attrs.get("cluster")
    if value is None:
        return (1, 1, 1)
    items = [int(x.value) if hasattr(x, "value") else int(x) for x in (value if isinstance(value, tuple) else (value,))]
    return tuple(items + [1] * (3 - len(items)))


def _launch_dims(kernel: Kernel, env: dict):
    def triple(value, default):
        if value is None:
            return default
        items = list(value) if isinstance(value, tuple) else [value]
        items += [1] * (3 - len(items))
        return tuple(int(x.evaluate(env)) if hasattr(x, "evaluate") else int(x) for x in items)

    return triple(kernel.attrs.get("grid"), (1, 1, 1)), triple(kernel.attrs.get("block"), (1, 1, 1))


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
        raise InterpreterError(f"@{k.name}: missing arguments {', '.join(missing)}")
    env, bound = {}, {}
    for p in k.params:
        value = args[p.name]
        if isinstance(p.type, GlobalTensorType):
            if not isinstance(value, np.ndarray) or value.ndim != p.type.rank:
                raise InterpreterError(f"@{k.name}: argument {p.name} must be a rank-{p.type.rank} numpy array")
        elif isinstance(p.type, TensorMapType):
            try:
                bound[p.name] = encode_tensor_map(value, p.type, p.name)
            except ValueError as e:
                raise InterpreterError(f"@{k.name}: {e}") from None
        elif isinstance(p.type, ScalarType):
            _check_scalar(k, p, value)
        env[p.name] = value
    grid_dim, block_dim = _launch_dims(k, env)
    if grid is not None:
        if (not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3
                or not all(isinstance(g, (int, np.integer)) and not isinstance(g, bool) and g >= 1 for g in grid)):
            raise ValueError(f"grid must be 1 to 3 positive integers, not {grid!r}")
        grid_dim = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    return k, grid_dim, block_dim, env, bound, smem_plan(k.body.ops), schedule


def _check_scalar(k, p, value) -> None:
    """A scalar argument is a number its parameter's type holds (``n = 2**40`` does not fit an ``i32``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (int, float)):
        raise InterpreterError(f"@{k.name}: argument {p.name} must be a number")
    if isinstance(value, bool) and p.type.kind != "pred":
        value = int(value)
    problem = value_problem(value, p.type)
    if problem is not None:
        raise InterpreterError(f"@{k.name}: argument {p.name}: {problem}")


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
            first = live[0]
            parts = "; ".join(f"CTA rank {cta.rank} (block {cta.block_index}) at {wait.op.loc} ({wait.op.name}): "
                              f"{wait.hang(cta)}" for cta, _g, wait, _s in live)
            first[0].fail(first[2].op, f"hang: every CTA of the cluster is blocked: {parts}", HangError)


def _new_cta(k, block_index, grid_dim, block_dim, env, bound, plan, cache, schedule, races) -> _CTA:
    cta = _CTA(block_index, block_dim, grid_dim, cache, plan, schedule, races)
    cta._body = k.body
    for p in k.params:
        value = env[p.name]
        if p.name in bound:
            cta.set(p, bound[p.name])
        elif isinstance(p.type, GlobalTensorType):
            cta.set(p, value)
        else:
            cta.set(p, np.full(cta.nthreads, value, dtype=numpy_dtype(p.type)))
    return cta


def interpret(ir, args: dict, kernel: str | None = None, grid=None, check: bool = True, schedule="lazy",
              races: str = "error") -> None:
    """Run a kernel on the CPU: ``interpret(module, {"x": x, "z": z, "n": 4096})``.

    ``args`` maps parameter names (without %) to numpy arrays (gtensor and tmap parameters, modified in place) or
    numbers. ``grid`` overrides the kernel's grid attribute. ``schedule``: when asynchronous copies happen —
    ``"lazy"`` (default; only when a blocked wait needs them), ``"eager"`` (at issue), or a seed / numpy Generator
    (random). ``races``: ``"error"`` (default) raises RaceError on a shared-memory race with a copy in flight,
    ``"ignore"`` lets it happen. Pre: the IR verifies (checked unless ``check=False``).
    Post: global arrays hold what the kernel stored; a runtime violation raises InterpreterError naming the op
    (HangError when the CTA can never go on, RaceError for a race, e.g. ``k.tile:9:3: arith.div: division by zero:
    %n / %t is 5 / 0 in thread 0``). Errors: VerifyError (the check), InterpreterError, and ValueError / TypeError
    for arguments that are not what it takes (a kernel name the module lacks, a grid that is no grid); nothing else.
    """
    k, grid_dim, block_dim, env, bound, plan, schedule = _prepare(ir, args, kernel, grid, check, schedule, races)
    cache = {}
    cdim = cluster_dims(k)
    if any(g % c for g, c in zip(grid_dim, cdim)):
        raise InterpreterError(f"@{k.name}: the grid {grid_dim} is not a multiple of the cluster {cdim}")
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
    if cluster_dims(k) != (1, 1, 1):
        raise InterpreterError(f"@{k.name}: run_cta runs one CTA, but the kernel's CTAs run in clusters of "
                               f"{cluster_dims(k)}: use interpret")
    cta = _new_cta(k, tuple(block) + (0,) * (3 - len(block)), grid_dim, block_dim, env, bound, plan, {}, schedule,
                   races)
    cta.drive(cta.steps(k.body))
    if finish:
        cta.finish()
    return cta


__all__ = ["HangError", "InterpreterError", "RaceError", "interpret", "run_cta"]
