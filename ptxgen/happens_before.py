"""The happens-before order of a CTA's threads, for the interpreter's generic shared-memory race check.

Each thread has a vector clock (``clocks[t, u]``: the last step of thread u that thread t is ordered after; a
thread's own entry counts its release points). Synchronisation joins clocks:

- a barrier all its participants wait at (``barrier.cta``, a completed ``barrier.named`` generation, the CTA's side
  of ``barrier.cluster``) orders everything before it in any participant before everything after it in all of them;
- an mbarrier arrival releases the arriving threads' clocks into the barrier's phase; a wait that returns because
  that phase completed acquires them (``mbarrier.wait``, the pipeline waits).

Every shared-memory byte remembers its last generic write (thread, clock, op) and its last read since that write
(a generic read, or a TMA store's read, which counts as its issuing thread's from the ``tma.store_wait`` that sees
it done: until then no other thread is ordered after it). A read of a byte another thread wrote, a write of a byte another thread read or wrote, is a race unless the
earlier access happens before it (the accessing thread's clock covers the earlier thread's clock at the access).
Writes by the async proxy (TMA loads) start the byte afresh: their ordering is the mbarrier protocol's, checked with
the copies in flight.

One read per byte is remembered (the last): a write that is ordered after that read but not after an earlier read
of another thread goes unreported (a missed race, never a false one).
"""
from __future__ import annotations

import numpy as np

# the clock of a read no thread is ordered after yet (a TMA store's, until its issuer waits for it)
UNSETTLED = np.iinfo(np.int32).max


class HappensBefore:
    """Vector clocks of ``nthreads`` threads and the last generic accesses of ``nbytes`` shared-memory bytes.

    ``HappensBefore(128, 4096)``: after ``write(op, bytes, threads)`` by thread 0 of byte 1024, ``races_read`` of
    byte 1024 by thread 1 names thread 0's write until ``synchronize(all threads)``. Post: every check is exact for
    the clocks (a reported pair is unordered; an unreported write/last-read pair is ordered)."""

    def __init__(self, nthreads: int, nbytes: int):
        self.clocks = np.zeros((nthreads, nthreads), dtype=np.int32)
        np.fill_diagonal(self.clocks, 1)
        # per byte: accessing thread + 1 (0: none), that thread's own clock at the access, the op (index into ops)
        self.writer = np.zeros(nbytes, dtype=np.int32)
        self.write_clock = np.zeros(nbytes, dtype=np.int32)
        self.write_op = np.zeros(nbytes, dtype=np.int32)
        self.reader = np.zeros(nbytes, dtype=np.int32)
        self.read_clock = np.zeros(nbytes, dtype=np.int32)
        self.read_op = np.zeros(nbytes, dtype=np.int32)
        self.ops = [None]
        self._op_index = {}
        self.written = False      # no generic write yet: reads need no check

    # -- synchronisation ------------------------------------------------------------------------------------------
    def synchronize(self, threads) -> None:
        """``threads`` all wait at one barrier: each is ordered after everything any of them did before it."""
        threads = np.asarray(threads, dtype=np.int64)
        joined = self.clocks[threads].max(axis=0)
        self.clocks[threads] = joined
        self.clocks[threads, threads] += 1

    def release(self, threads, into) -> np.ndarray:
        """An arrival of ``threads`` on a barrier phase whose released clock is ``into`` (None: none yet): returns
        ``into`` joined with their clocks, and starts a new step for each of them."""
        threads = np.asarray(threads, dtype=np.int64)
        joined = self.clocks[threads].max(axis=0)
        out = joined if into is None else np.maximum(into, joined)
        self.clocks[threads, threads] += 1
        return out

    def acquire(self, threads, released) -> None:
        """``threads`` return from a wait on a phase that released ``released`` (None: nothing)."""
        if released is None:
            return
        threads = np.asarray(threads, dtype=np.int64)
        self.clocks[threads] = np.maximum(self.clocks[threads], released)

    # -- accesses ---------------------------------------------------------------------------------------------------
    def _index(self, op) -> int:
        k = self._op_index.get(id(op))
        if k is None:
            k = self._op_index[id(op)] = len(self.ops)
            self.ops.append(op)
        return k

    def read(self, op, byteset, threads, record: bool = True):
        """A generic read of ``byteset`` (int64 bytes, any shape) by ``threads`` (the thread of each byte, same
        shape). Returns the first race as (kind, earlier thread, earlier op, later thread, bytes) or None; records
        the reads (when ``record``)."""
        b, t = byteset.ravel(), np.broadcast_to(threads, byteset.shape).ravel()
        race = self._unordered(b, t, self.writer, self.write_clock, self.write_op, "write-read") if self.written \
            else None
        if record:
            self.reader[b] = t + 1
            self.read_clock[b] = self.clocks[t, t]
            self.read_op[b] = self._index(op)
        return race

    def read_by_group(self, byteset, group):
        """A read of ``byteset`` on behalf of the threads ``group`` together (a wgmma's operands for its warpgroup, a
        TMA store for its issuing thread): ordered after a write when any of them is. Returns the first race as in
        ``read`` (later thread: the group's first); records nothing (the copy in flight guards its bytes)."""
        if not self.written:
            return None
        b = byteset.ravel()
        w = self.writer[b] - 1
        group = np.asarray(group, dtype=np.int64)
        seen = self.clocks[group].max(axis=0)
        bad = (w >= 0) & ~np.isin(w, group)
        if not bad.any():
            return None
        bad[bad] = seen[w[bad]] < self.write_clock[b[bad]]
        if not bad.any():
            return None
        return self._report(b, w, bad, int(group[0]), self.write_op, "write-read")

    def write(self, op, byteset, threads, record: bool = True):
        """A generic write of ``byteset`` by ``threads`` (as in ``read``): checks it against the last write and the
        last read of each byte, then (when ``record``) makes it the byte's last write. Returns the first race or
        None."""
        b, t = byteset.ravel(), np.broadcast_to(threads, byteset.shape).ravel()
        race = None
        if self.written:
            race = self._unordered(b, t, self.writer, self.write_clock, self.write_op, "write-write")
        if race is None:
            race = self._unordered(b, t, self.reader, self.read_clock, self.read_op, "read-write")
        if record:
            self.writer[b] = t + 1
            self.write_clock[b] = self.clocks[t, t]
            self.write_op[b] = self._index(op)
            self.reader[b] = 0
            self.written = True
        return race

    def read_async(self, op, byteset, thread: int) -> None:
        """A TMA store issued by ``thread`` reads ``byteset`` at some point before the thread's wait that sees it
        done (``settle``): other threads' writes of those bytes race with it until they are ordered after that wait."""
        self.reader[byteset] = thread + 1
        self.read_clock[byteset] = UNSETTLED
        self.read_op[byteset] = self._index(op)

    def settle(self, byteset, thread: int) -> None:
        """``thread`` waited for its TMA store of ``byteset`` to finish reading: the read is now ordered before
        whatever follows in the thread."""
        mine = (self.reader[byteset] == thread + 1) & (self.read_clock[byteset] == UNSETTLED)
        self.read_clock[byteset[mine]] = self.clocks[thread, thread]

    def forget(self, byteset) -> None:
        """The async proxy wrote ``byteset`` (a TMA load): no generic access of the old contents is left to race."""
        self.writer[byteset] = 0
        self.reader[byteset] = 0

    def _unordered(self, b, t, who, clock, ops, kind):
        prev = who[b] - 1
        bad = (prev >= 0) & (prev != t)
        if not bad.any():
            return None
        bad[bad] = self.clocks[t[bad], prev[bad]] < clock[b[bad]]
        if not bad.any():
            return None
        k = int(np.argmax(bad))
        return self._report(b, prev, bad & (t == t[k]), int(t[k]), ops, kind)

    def _report(self, b, prev, bad, later: int, ops, kind):
        """(kind, earlier thread, earlier op, later thread, (first byte, end byte)) of the first unordered pair, with
        the span of the bytes that pair touches."""
        k = int(np.argmax(bad))
        earlier = int(prev[k])
        mine = b[bad & (prev == earlier)]
        return kind, earlier, self.ops[int(ops[b[k]])], later, (int(mine.min()), int(mine.max()) + 1)
