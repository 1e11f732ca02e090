"""Code that differs between the consumer warpgroups only in an attribute — a named barrier's id is an attribute, not
an operand — built once per warpgroup in branches on the warpgroup's index ``%cw`` (0 … w−1 among the consumers).
"""
from __future__ import annotations

from ptxgen.ir.builder import i32


def warpgroup_tests(g) -> None:
    """``g.is_wg[v]`` = ``%cw == v`` (``%wg_is{v}``) for v = 0 … w−2: the tests of ``by_warpgroup``'s branches, built
    once where the consumers start (the last warpgroup is the one no test took). With w = 2: ``[%wg_is0]``."""
    b = g.b
    g.is_wg = [b.arith.cmp(g.cw, b.const(v, i32, name=f"wg_index{v}"), pred="eq", name=f"wg_is{v}")
               for v in range(g.config.consumer_warpgroups - 1)]


def by_warpgroup(g, body, upto: int | None = None) -> None:
    """``body(v)`` built for consumer warpgroup v, for v = 0 … ``upto``−1 (default every warpgroup), each in the
    branch its warpgroup takes: ``scf.if %wg_is0 {body(0)} else {scf.if %wg_is1 {body(1)} else {body(2)}}`` for 3
    warpgroups; the warpgroups from ``upto`` on build nothing (``by_warpgroup(g, body, upto=1)`` with 2 warpgroups:
    ``scf.if %wg_is0 {body(0)}``). Post: each consumer thread runs the ops of ``body`` of its own warpgroup only."""
    b = g.b
    count = g.config.consumer_warpgroups
    upto = count if upto is None else upto

    def chain(v):
        if v == count - 1:
            body(v)   # the last warpgroup: the branch every test before declined
            return
        branch = b.scf.if_(g.is_wg[v])
        with branch.then:
            body(v)
            b.scf.yield_()
        if v + 1 < upto:
            with branch.otherwise:
                chain(v + 1)
                b.scf.yield_()

    if upto > 0:
        chain(0)


def own_barrier(config, v: int) -> int:
    """Consumer warpgroup v's own named barrier (128 threads: the epilogue's staging, P's staging): after the
    ping-pong's turn barriers 1 … w (3 and 4 with 2 consumer warpgroups; 4, 5 and 6 with 3)."""
    return config.consumer_warpgroups + 1 + v


def warpgroup_barrier(g) -> None:
    """The consumer warpgroup's own named barrier (``own_barrier``, 128 threads): what its threads wrote to shared
    memory before it is seen by all of them (and, after ``fence.proxy_async``, by its wgmmas and TMA stores); it never
    waits for another warpgroup (behind it by part of a section under the ping-pong)."""
    by_warpgroup(g, lambda v: g.b.barrier.named(id=own_barrier(g.config, v), threads=128))
