"""A consumer warpgroup with no query rows in its work item (``AttentionConfig.skip_empty_rows``): the last query tile
of a sequence whose length is not a multiple of bm = 64·w holds warpgroups whose 64 rows all lie at or past the
sequence's end (Sq = 1024 in 192-row tiles: the sixth tile's rows 960 … 1151, warpgroups 1 and 2 empty). Such a
warpgroup skips its wgmmas, its softmax and its stores: its mainloop runs no tile, and the skeleton of the KV loop
it would have run (``skip``) keeps each synchronisation the others and the producer count on:

- the K and V pipelines' stages: a stage is refilled once every consumer warp released it (``pipeline.release``
  counts 4·w warps), so the empty warpgroup releases every stage the mainloop would, each after its
  ``pipeline.wait`` — a release before the stage's load would complete the previous fill's generation early;
- the ping-pong's turns (``softmax.pingpong_turn``): the same points in the same order (the item's n_end + 1
  sections, none when n_end = 0), so the ring's generations stay paired; its sections are empty, so the warpgroup
  before it in the ring hands on to the one after at once;
- Q's barrier (the caller waits for the item's phase first, as every consumer does, so that a persistent empty
  warpgroup cannot release item i+1's Q before item i's phase completed) and, persistent, the release of Q's tile
  (the mainloop of no tile still builds ``g.q_done``; else the caller's release after the epilogue).

Every warpgroup of an item computes the same n_end (it depends on the query tile's first row and bm, not on a
warpgroup's rows), so the skeleton's loop bound equals the others'. Causal needs nothing more: n_end already stops
at the tile holding the last *valid* row's last visible key (rows_end = min(q0 + bm, Sq)).
"""
from __future__ import annotations

from .softmax import pingpong_turn, pipeline_iteration


def has_rows(g):
    """``%wg_has_rows``: the warpgroup's first query row ``g.row0`` lies inside its sequence (row0 < Sq; varlen: Sq the
    batch entry's length, row0 counted from its first row). Uniform over the warpgroup's 128 threads."""
    return g.b.arith.cmp(g.row0, g.sq, pred="lt", name="wg_has_rows")


def compute_or_skip(g, mainloop, store) -> None:
    """The warpgroup's KV loop and epilogue, or, without rows, only the loop's synchronisations: ``mainloop()`` (→
    O's blocks, m, l) built with the loop bound ``%wg_n_end`` = has_rows ? n_end : 0, then ``skip`` with
    ``%skip_n_end`` = has_rows ? 0 : n_end, then ``store(o, m, l)`` under ``scf.if %wg_has_rows``. One of the two
    loops runs no tile, and the mainloop of no tile runs no section (its tile-0 and last-P·V branches are skipped with
    ``n_end = 0``), so no branch holds a loop: a branch around the mainloop with the skeleton in its else costs the
    consumers' register allocation up to 76 bytes of spills under setmaxnreg 160 (ptxas 12.x, D = 64, three
    warpgroups). Post: every thread of the warpgroup takes the same trips and branch (``has_rows`` is
    warpgroup-uniform, as named barriers and wgmmas need); Q's tile is released once, by the mainloop
    (``g.q_done``)."""
    b = g.b
    rows = has_rows(g)
    n_end = g.n_end
    g.n_end = b.arith.select(rows, n_end, g.c0, name="wg_n_end")
    o, m, l = mainloop()
    g.n_end = n_end
    skip(g, b.arith.select(rows, g.c0, n_end, name="skip_n_end"))
    with b.scf.if_(rows).then:
        store(o, m, l)
        b.scf.yield_()


def wait_release(g, pipeline, kt, tag: str) -> None:
    """Wait for KV tile ``kt``'s stage of ``pipeline`` (``g.pk`` or ``g.pv``) to land, then release it."""
    b = g.b
    stage = b.pipeline.wait(pipeline, pipeline_iteration(g, kt, f"{tag}_it"), name=f"{tag}_stage")
    b.pipeline.release(pipeline, stage)


def skip(g, n_end) -> None:
    """The empty warpgroup's KV loop (``n_end`` tiles): the synchronisations of ``softmax.mainloop`` without its
    wgmmas and arithmetic. Plain loop: per tile K's stage, then V's, waited for and released. Overlap: the sections
    of ``softmax.consume_overlapped`` — tile 0's (K_0), then per tile j ≥ 1 K_j with V_{j-1}, then V_{n_end-1} —
    each framed by the ping-pong's take and pass as there (``pingpong``), the first and last under ``n_end > 0``."""
    b, config = g.b, g.config
    c0, c1 = g.c0, g.c1
    if not config.overlap:
        with b.scf.for_(c0, n_end, c1, args=("skip_kt",)) as (kt,):
            wait_release(g, g.pk, kt, "skip_k")
            wait_release(g, g.pv, kt, "skip_v")
            b.scf.yield_()
        return
    pingpong = config.pingpong
    any_tile = b.arith.cmp(n_end, c0, pred="gt", name="skip_any_tile")

    def section(waits, last=False):
        """One wgmma section's synchronisation: take the turn, wait for the stages it would read, pass the turn
        (the item's last: "pass_last" unless the ring runs on), release the stages."""
        if pingpong:
            pingpong_turn(g, "take")
        stages = [(pipeline, b.pipeline.wait(pipeline, pipeline_iteration(g, kt, f"{tag}_it"), name=f"{tag}_stage"))
                  for pipeline, kt, tag in waits]
        if pingpong:
            pingpong_turn(g, "pass_last" if last and not config.continuous_turns else "pass")
        for pipeline, stage in stages:
            b.pipeline.release(pipeline, stage)

    with b.scf.if_(any_tile).then:
        if pingpong and not config.continuous_turns:
            pingpong_turn(g, "start")
        section([(g.pk, c0, "skip_k_first")])
        b.scf.yield_()
    with b.scf.for_(c1, n_end, c1, args=("skip_kt",)) as (kt,):
        section([(g.pk, kt, "skip_k"), (g.pv, b.arith.sub(kt, c1, name="skip_prev_tile"), "skip_v")])
        b.scf.yield_()
    with b.scf.if_(any_tile).then:
        section([(g.pv, b.arith.sub(n_end, c1, name="skip_last_tile"), "skip_v_last")], last=True)
        b.scf.yield_()
