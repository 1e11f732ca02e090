"""The compiler's stages run with the cyclic garbage collector paused, and leave it as they found it."""
from __future__ import annotations

import gc
import pathlib

import pytest

from ptxgen.gc_pause import gc_paused
from ptxgen.ir.text import IRSyntaxError, parse_module
from ptxgen.lower import compile_kernel, target
from ptxgen.verify import verify

SQRT_SIN = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "sqrt_sin.tile").read_text()


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_compile_runs_paused_and_restores_the_collector(collector_on, monkeypatch):
    seen = []
    emit = target.emit_ptx

    def spying(*args, **kwargs):
        seen.append(gc.isenabled())
        return emit(*args, **kwargs)

    monkeypatch.setattr(target, "emit_ptx", spying)
    module = parse_module(SQRT_SIN, "sqrt_sin.tile")
    assert gc.isenabled()
    verify(module)
    assert gc.isenabled()
    compiled = compile_kernel(module.kernels[0], defer_assembly=True)
    assert seen == [False]
    assert gc.isenabled()
    assert ".entry sqrt_sin" in compiled.ptx


def test_an_error_inside_a_paused_stage_restores_the_collector(collector_on):
    with pytest.raises(IRSyntaxError):
        parse_module("kernel @k( {", "bad.tile")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        parse_module(SQRT_SIN, "sqrt_sin.tile")
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_nested_pauses_reenable_only_at_the_outermost(collector_on):
    states = []

    @gc_paused
    def inner():
        states.append(gc.isenabled())

    @gc_paused
    def outer():
        inner()
        states.append(gc.isenabled())

    outer()
    assert states == [False, False]
    assert gc.isenabled()
