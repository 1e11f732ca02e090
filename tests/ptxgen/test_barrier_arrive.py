"""``barrier.arrive`` (spec/tile-ir.md §4.11): a non-blocking arrival at a named barrier — its threads count toward
the barrier's generation without waiting, and what they did before it happens before what the threads that wait
there (``barrier.named``) do after; the lowering's ``bar.arrive``, and ``barrier.named``'s unaligned
``barrier.sync`` when one id is waited on at several instructions (FA3's ping-pong; compute-sanitizer's synccheck
reports the aligned ``bar.sync`` there as "Divergent thread(s) in block")."""
import re

import numpy as np
import pytest

from ptxgen.interp import HangError, RaceError
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

from test_interp_races import run, two_groups


def arrive_then_wait(arrive: str = "barrier.arrive {id = 1, threads = 64}",
                     wait: str = "barrier.named {id = 1, threads = 64}") -> str:
    """Between the two groups' accesses: warp 0 (threads 0..31) ``arrive``s, warp 1 (32..63) ``wait``s."""
    return ("  %c64 = arith.const {value = 64} : i32\n"
            "  %warp0 = arith.cmp %t, %c32 {pred = lt} : i1\n"
            "  %below64 = arith.cmp %t, %c64 {pred = lt} : i1\n"
            "  %warp1 = arith.and %ge, %below64 : i1\n"
            f"  scf.if %warp0 {{\n    {arrive}\n  }}\n"
            f"  scf.if %below64 {{\n    scf.if %warp1 {{\n      {wait}\n    }}\n  }}\n")


def test_an_arrival_orders_the_arrivers_stores_before_the_waiters_loads():
    # warp 0 stores, arrives (no wait); warp 1 waits at barrier 1 (32 + 32 threads), then reads warp 0's values
    assert np.array_equal(run(two_groups("store", "load", arrive_then_wait()), 32), np.arange(32, dtype=np.float32))


def test_an_arrival_orders_nothing_for_threads_that_did_not_wait():
    # warp 2 neither arrived nor waited: its read of warp 0's values is still a race
    with pytest.raises(RaceError, match=r"reads shared memory bytes \[1024, 1028\) of %s that thread 0 \(warp 0\) "
                                        r"wrote with smem.store at races.tile:15:5, and nothing orders that write "
                                        r"before this read by thread 64 \(warp 2\)"):
        run(two_groups("store", "load", arrive_then_wait()), 64)


def test_the_arriver_is_ordered_after_nothing():
    # the arrow points one way: warp 1 stores after its wait, warp 0 (arrived, never waited) loads those bytes
    # afterwards, and nothing orders warp 1's store before that load
    text = two_groups("load", "store", arrive_then_wait()).replace("scf.if %mine", "scf.if %never", 1)
    text = text.replace("  %tf = arith.cast", "  %never = arith.cmp %lo, %c0 {pred = lt} : i1\n  %tf = arith.cast", 1)
    text = text.rstrip().rstrip("}") + ("  scf.if %mine {\n"
                                        "    %late = smem.load %s, %t {tv = [(32,1):(1,0)]} : frag<f32>[1]\n"
                                        "  }\n}\n")
    with pytest.raises(RaceError, match=r"smem.load: reads shared memory bytes \[1024, 1028\) of %s that thread 32 "
                                        r"\(warp 1\) wrote with smem.store .* by thread 0 \(warp 0\)"):
        run(text, 32)


def test_arrivals_alone_complete_a_generation():
    # warp 0 arrives twice: 64 arrivals complete generation 0 with nobody waiting (as bar.arrive does), so warp 1
    # waits in generation 1, where only its own 32 threads arrive
    text = two_groups("store", "load", arrive_then_wait(arrive="barrier.arrive {id = 1, threads = 64}\n"
                                                               "    barrier.arrive {id = 1, threads = 64}"))
    with pytest.raises(HangError, match=r"races\.tile:27:7: barrier\.named: hang: threads 32\.\.63 \(warp 1\) wait at "
                                        r"named barrier 1 \(threads\), but only 32 of 64 arrived"):
        run(text, 32)


def verify_errors(text: str) -> str:
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, file="arrive.tile"))
    return str(e.value)


def test_an_arrival_nobody_waits_for_is_refused():
    text = two_groups("store", "load", arrive_then_wait(wait="barrier.named {id = 2, threads = 64}"))
    assert re.search(r"arrive\.tile:\d+:5: barrier\.arrive: no barrier\.named waits on barrier 1: an arrival nobody "
                     r"waits for orders nothing", verify_errors(text))


def test_an_arrival_counts_the_barriers_threads():
    text = two_groups("store", "load", arrive_then_wait(arrive="barrier.arrive {id = 1, threads = 96}"))
    assert re.search(r"arrive\.tile:\d+:5: barrier\.arrive: barrier 1 counts 96 threads here but 64 at the "
                     r"barrier\.named at arrive\.tile:\d+:7: one barrier counts one number of threads",
                     verify_errors(text))
    text = two_groups("store", "load", arrive_then_wait(arrive="barrier.arrive {id = 16, threads = 64}"))
    assert "barrier.arrive: id must be from 1 to 15 (0 is the CTA barrier), not 16" in verify_errors(text)


def test_lowering_bar_arrive_and_the_aligned_or_unaligned_wait():
    once = compile_kernel(parse_module(two_groups("store", "load", arrive_then_wait()), file="arrive.tile")).ptx
    assert re.search(r"\bbar\.arrive\s+1, 64;", once) and re.search(r"\bbar\.sync\s+1, 64;", once)
    assert "barrier.sync" not in once
    # the same barrier waited on at two instructions (the ping-pong's turns): the unaligned form at both
    twice = two_groups("store", "load", arrive_then_wait(
        wait="barrier.named {id = 1, threads = 64}\n    }\n    scf.if %never {\n      barrier.named {id = 1, threads = 64}"))
    twice = twice.replace("  %tf = arith.cast", "  %never = arith.cmp %lo, %c0 {pred = lt} : i1\n  %tf = arith.cast", 1)
    ptx = compile_kernel(parse_module(twice, file="arrive.tile")).ptx
    assert len(re.findall(r"\bbarrier\.sync\s+1, 64;", ptx)) == 2 and not re.search(r"\bbar\.sync\s+1,", ptx)
