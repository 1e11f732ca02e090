"""Warp specialization: warpgroup roles that run concurrently (``gpu.roles``) and named barriers among some of the
CTA's warps (``barrier.named``).

``gpu.roles {names = (producer, consumer), warpgroups = (1, 2), maxnreg = (40, 232)} { ... } { ... }`` gives region
r to the next ``warpgroups[r]`` warpgroups of the CTA (role 0: warpgroup 0; role 1: warpgroups 1 and 2) and first
re-sizes their register files to ``maxnreg[r]`` registers per thread (``setmaxnreg``: down for a TMA producer that
needs few, up for the wgmma consumers). The roles run CONCURRENTLY: in the interpreter each role is its own stream
of execution (lock step inside the role), and the scheduler switches role whenever the running one blocks on a wait,
so a producer can run ahead of its consumers by as many stages as the pipeline has, and a wait no role and no copy
in flight can satisfy is reported as a hang naming every blocked role, its barrier and phase.

A CTA-wide ``barrier.cta`` inside a role would wait for threads that run other code: the verifier refuses it; roles
synchronise through mbarriers and named barriers.
"""
from __future__ import annotations

import numpy as np

from ..core import walk
from ..hostexpr import Word
from ..text import attribute_text
from . import OpDef, SwitchPoint, Wait, arrive_counting, kernel_rule, register

REGISTER_FILE = 65536        # 32-bit registers per SM (one CTA per SM for a warp-specialized kernel)
MIN_REGS, MAX_REGS = 24, 256  # setmaxnreg's range; the count is a multiple of 8
NAMED_BARRIERS = 16          # bar.sync ids 0..15 (0 is the CTA barrier)
MAX_CTA_THREADS = 1024       # threads of the largest CTA


def role_ranges(op) -> list:
    """[(first warpgroup, count)] of each role of a ``gpu.roles`` op, in region order."""
    out, first = [], 0
    for count in op.attrs["warpgroups"]:
        out.append((first, count))
        first += count
    return out


def launch_registers(threads: int) -> int:
    """The per-thread register budget a CTA of ``threads`` threads is compiled for when it alone fills an SM
    (``__launch_bounds__(threads, 1)``): the register file divided by the threads, rounded down to 8, at most 255."""
    return min(255, REGISTER_FILE // threads // 8 * 8)


def launch_pool(threads: int) -> int:
    """The registers a CTA of ``threads`` threads holds from launch on: ``threads × launch_registers(threads)``
    (640 threads: 640 × 96 = 61440). setmaxnreg moves registers between the CTA's warps within this pool only (a
    ``dec`` gives them back to it, an ``inc`` waits until it holds enough), so the roles' budgets must fit it, not
    the whole register file."""
    return threads * launch_registers(threads)


class RolesWait(Wait):
    """Every role of a ``gpu.roles`` is blocked: the roles op waits until any role's wait is met. ``blocked``:
    (stream name, role name, its Wait) of each blocked stream (a warpgroup of a role), in role order; the hang report
    leads with the first."""

    def __init__(self, op, blocked):
        super().__init__(op, np.concatenate([w.threads for _shown, _role, w in blocked]))
        self.blocked = blocked

    def ready(self, ix) -> bool:
        return any(w.ready(ix) for _shown, _role, w in self.blocked)

    def helps(self, ix, aop) -> bool:
        return any(w.helps(ix, aop) for _shown, _role, w in self.blocked)

    def _lead(self, ix):
        """The blocked stream the report leads with: one whose wait no thread could ever help (it lacks only bytes
        no copy will bring, e.g. an expect-tx above what its loads deliver), else the first in role order."""
        return next((b for b in self.blocked if b[2].beyond_threads(ix)), self.blocked[0])

    def where(self, ix):
        return self._lead(ix)[2].where(ix)

    def headline(self, ix, role: str | None = None) -> str:
        _shown, lead_role, w = self._lead(ix)
        return w.headline(ix, lead_role)

    def hang(self, ix) -> str:
        parts = [f"role {shown} at {w.op.loc} ({w.op.name}): {w.hang(ix)}" for shown, _role, w in self.blocked]
        return "every role is blocked:\n" + "\n".join(parts)


@register
class Roles(OpDef):
    name = "gpu.roles"
    summary = "warpgroup roles running concurrently, each with its own register budget (setmaxnreg)"
    required_attrs = ("names", "warpgroups", "maxnreg")
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        groups = v.attr(op, "warpgroups", tuple)
        regs = v.attr(op, "maxnreg", tuple)
        names = v.attr(op, "names", tuple)
        if groups is None or regs is None or names is None:
            return
        n = len(op.regions)
        if n < 2:
            v.error(op, f"needs at least 2 role regions, got {n}")
            return
        for what, t in (("warpgroups", groups), ("maxnreg", regs), ("names", names)):
            if len(t) != n:
                v.error(op, f"{what} has {len(t)} entries but the op has {n} role regions")
                return
        if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in groups):
            v.error(op, f"warpgroups must be positive integers, not {attribute_text(groups)}")
            return
        if not all(isinstance(x, (Word, str)) for x in names) or len({str(x) for x in names}) != n:
            v.error(op, f"names must be {n} distinct words, not {attribute_text(names)}")
            return
        block = getattr(v, "kernel_block", None)
        if block is not None and 128 * sum(groups) != block:
            v.error(op, f"the roles span {sum(groups)} warpgroups = {128 * sum(groups)} threads but the CTA has "
                        f"{block}: every thread has one role")
        for r in regs:
            if not isinstance(r, int) or isinstance(r, bool) or not MIN_REGS <= r <= MAX_REGS or r % 8:
                v.error(op, f"maxnreg {attribute_text(r)} is not a multiple of 8 from {MIN_REGS} to {MAX_REGS} (setmaxnreg)")
                return
        total = sum(128 * g * r for g, r in zip(groups, regs))
        threads = 128 * sum(groups)
        if total > launch_pool(threads):
            shown = " + ".join(f"{128 * g} threads × {r}" for g, r in zip(groups, regs))
            v.error(op, f"the roles ask for {shown} = {total} registers, more than the {launch_pool(threads)} a CTA of "
                        f"{threads} threads launches with ({launch_registers(threads)} per thread): setmaxnreg.inc "
                        "would wait forever")
        for region in op.regions:
            for inner in walk(region):
                if inner.name == "barrier.cta":
                    v.error(inner, "barrier.cta inside a gpu.roles region waits for threads of other roles, which "
                                   "run other code: synchronise roles with mbarriers or barrier.named")
                elif inner.name == "gpu.roles":
                    v.error(inner, "gpu.roles cannot be nested")

    def interpret(self, op, ix):
        base_mask, base_yielded = ix.mask, ix.yielded
        names = [str(x) for x in op.attrs["names"]]
        streams = []
        # one stream per warpgroup: the warpgroups of a role run independently on the GPU (they may be at
        # different iterations, e.g. promoting at different k-tiles), and only barriers order them
        for (first, count), region, name in zip(role_ranges(op), op.regions, names):
            for g in range(first, first + count):
                mask = np.zeros(ix.nthreads, dtype=bool)
                mask[128 * g:128 * (g + 1)] = True
                shown = name if count == 1 else f"{name} (warpgroup {g})"
                streams.append({"name": shown, "role": name, "mask": mask, "region": region, "gen": None,
                                "wait": None, "values": None})
        live = list(streams)
        # Each stream defines the values of its region in its own table (two warpgroups running one region must
        # not overwrite each other's per-thread arrays); what was defined before the roles is shared, read-only (SSA).
        base_values = ix.values
        try:
            while live:
                progressed = False
                # a random schedule also varies which warpgroup runs first after each round of waits
                order = list(live) if ix.rng is None else [live[i] for i in ix.rng.permutation(len(live))]
                for s in order:
                    if s["wait"] is not None and not s["wait"].ready(ix):
                        continue
                    progressed = True
                    ix.mask, ix.yielded = base_mask, base_yielded
                    if s["values"] is None:
                        s["values"] = dict(base_values)
                    ix.values = s["values"]
                    try:
                        if s["gen"] is None:
                            s["gen"] = ix.steps(s["region"], s["mask"])
                            s["wait"] = next(s["gen"])
                        else:
                            s["wait"] = s["gen"].send(None)
                    except StopIteration:
                        live.remove(s)
                    finally:
                        ix.values = base_values
                if live and not progressed:
                    ix.mask, ix.yielded = base_mask, base_yielded
                    yield RolesWait(op, [(s["name"], s["role"], s["wait"]) for s in live])
        finally:
            ix.mask, ix.yielded, ix.values = base_mask, base_yielded, base_values

    def lower(self, op, lx):
        """A branch per role on the warpgroup index (``tid / 128``); each role first re-sizes its registers with
        ``setmaxnreg.inc`` / ``.dec`` relative to the launch budget (``launch_registers``), then runs its region."""
        b = lx.b
        threads = lx.block_dim[0] * lx.block_dim[1] * lx.block_dim[2]
        budget = launch_registers(threads)
        wg = b.lshr(lx.linear_thread(), lx.i32(7))
        end = lx.block("roles.end")
        for k, ((first, count), region, regs) in enumerate(zip(role_ranges(op), op.regions, op.attrs["maxnreg"])):
            body, next_test = lx.block(f"role.{k}"), lx.block(f"role.{k}.else")
            inside = b.icmp_unsigned("<", b.sub(wg, lx.i32(first)), lx.i32(count))
            b.cbranch(inside, body, next_test)
            b.position_at_end(body)
            if regs != budget:
                lx.inline_ptx("setmaxnreg.inc" if regs > budget else "setmaxnreg.dec", [regs])
            lx.lower_region(region)
            b.branch(end)
            b.position_at_end(next_test)
        b.branch(end)
        b.position_at_end(end)


@register
class NamedBarrier(OpDef):
    name = "barrier.named"
    summary = "bar.sync id, threads: wait until `threads` threads (whole warps) reached barrier `id`"
    required_attrs = ("id", "threads")
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        ident = v.attr(op, "id", int)
        count = v.attr(op, "threads", int)
        if ident is not None and not 1 <= ident < NAMED_BARRIERS:
            v.error(op, f"id must be from 1 to {NAMED_BARRIERS - 1} (0 is the CTA barrier), not {ident}")
        if count is not None and (count < 32 or count % 32):
            v.error(op, f"threads must be a positive multiple of 32 (whole warps), not {count}")
        elif count is not None and count > MAX_CTA_THREADS:
            v.error(op, f"threads must be at most {MAX_CTA_THREADS} (a CTA's threads), not {count}")

    def interpret(self, op, ix):
        act, state = arrive_named(op, ix)
        state.setdefault("members", []).append(act)
        wait = arrive_counting(op, act, state, act.size, f"named barrier {op.attrs['id']} (threads)")
        if wait is None:
            complete_named(ix, state)
        else:
            yield wait

    def lower(self, op, lx):
        """``bar.sync id, threads`` (aligned: every waiting thread at this one instruction), or the unaligned
        ``barrier.sync id, threads`` when another ``barrier.named`` of the kernel waits on the same id: the threads
        of one generation then wait at different instructions, which the aligned form forbids (compute-sanitizer's
        synccheck reports it as "Divergent thread(s) in block")."""
        ident = op.attrs["id"]
        sites = sum(1 for o in walk(lx.kernel.body) if o.name == "barrier.named" and o.attrs.get("id") == ident)
        lx.inline_ptx("bar.named" if sites == 1 else "barrier.named.unaligned", [ident, op.attrs["threads"]])


@register
class NamedArrive(OpDef):
    name = "barrier.arrive"
    summary = "bar.arrive id, threads: count the arriving warps toward barrier `id`'s `threads` without waiting"
    required_attrs = ("id", "threads")
    num_operands = 0
    num_results = 0

    def verify(self, op, v):
        NamedBarrier.verify(self, op, v)

    def interpret(self, op, ix):
        act, state = arrive_named(op, ix)
        state["released"] = ix.release(act, state.get("released"))
        if arrive_counting(op, act, state, act.size, f"named barrier {op.attrs['id']} (threads)") is None:
            complete_named(ix, state)
        yield SwitchPoint(op, act)

    def lower(self, op, lx):
        """``bar.arrive id, threads``."""
        lx.inline_ptx("bar.arrive", [op.attrs["id"], op.attrs["threads"]])


@kernel_rule
def _arrivals_awaited(kernel, v):
    """A ``barrier.arrive`` needs a ``barrier.named`` waiting on its id (an arrival nobody waits for orders nothing,
    and its count would be left over), with the same thread count (one barrier counts one number of threads)."""
    waits = {}
    for o in walk(kernel.body):
        if o.name == "barrier.named":
            waits.setdefault(o.attrs.get("id"), o)
    for o in walk(kernel.body):
        if o.name != "barrier.arrive":
            continue
        ident, count = o.attrs.get("id"), o.attrs.get("threads")
        wait = waits.get(ident)
        if wait is None:
            v.error(o, f"no barrier.named waits on barrier {ident}: an arrival nobody waits for orders nothing")
        elif wait.attrs.get("threads") != count:
            v.error(o, f"barrier {ident} counts {count} threads here but {wait.attrs.get('threads')} at the "
                       f"barrier.named at {wait.loc}: one barrier counts one number of threads")


def arrive_named(op, ix):
    """The checks of an arrival (``barrier.named`` or ``barrier.arrive``) at named barrier ``id``: whole warps, one
    thread count per barrier, no more arrivals than it counts. → (the arriving threads, the barrier's state)."""
    ident, count = op.attrs["id"], op.attrs["threads"]
    act = np.nonzero(ix.mask)[0]
    for w in sorted(set((act // 32).tolist())):
        if ix.mask[32 * w:32 * (w + 1)].sum() != min(32, ix.nthreads - 32 * w):
            ix.fail(op, f"warp {w} reaches it with some lanes only: a named barrier counts whole warps")
    state = ix.state.setdefault(("named-barrier", ident), {"arrived": 0, "generation": 0, "expected": count})
    if state["expected"] != count:
        ix.fail(op, f"barrier {ident} is used with {count} threads here and {state['expected']} elsewhere")
    if state["arrived"] + act.size > count:
        ix.fail(op, f"{state['arrived'] + act.size} threads arrived at named barrier {ident}, which expects {count}")
    return act, state


def complete_named(ix, state) -> None:
    """A generation of a named barrier completed: the threads that waited at it (``barrier.named``) are ordered
    after everything they and the generation's ``barrier.arrive`` threads did before arriving."""
    members = state.pop("members", [])
    released = state.pop("released", None)
    if members:
        waiters = np.concatenate(members)
        ix.synchronize(waiters)
        ix.acquire(waiters, released)
