"""Fuzzing the tile IR's front door: whatever text comes in, ``parse_module`` → ``verify`` → ``interpret`` →
``compile_kernel`` (LLVM IR, PTX, nvJitLink cubin; no GPU needed) → ``jit`` let only their documented error types
out (spec/tile-ir.md §5.1): IRSyntaxError, VerifyError, InterpreterError (HangError, RaceError), LoweringError,
KernelCompileError and LaunchError — never a RecursionError, IndexError, KeyError, TypeError, AttributeError,
ZeroDivisionError, AssertionError, an overflow or an LLVM abort.

Two sources of input: random strings over the IR's own alphabet, and structured mutations of the example kernels
(``examples/*.tile``): tokens deleted, duplicated, swapped; numbers changed to 0, -1, huge or float; element types,
words, value names and op names exchanged; brackets nested hundreds deep; lines dropped or repeated; truncation.
The interpreter runs a mutant on tiny inputs (16 elements per mode, one cluster of CTAs) under a wall-clock budget,
so a mutant that merely loops long is cut off, not reported.

``python tests/ptxgen/test_fuzz_tile_ir.py N [seed]`` runs N mutants outside pytest and prints every escape.
"""
from __future__ import annotations

import contextlib
import pathlib
import random
import re
import signal
import sys
import threading
import traceback

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutc as lc
from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.host_dtypes import host_dtype
from ptxgen.ir.launch import cluster_dims
from ptxgen.ir.core import walk
from ptxgen.ir.hostexpr import TupleAttr, Word
from ptxgen.ir.ops import OPS
from ptxgen.ir.text import IRSyntaxError, parse_module, print_module
from ptxgen.ir.types import SCALARS, GlobalTensorType, ScalarType, TensorMapType
from ptxgen.lower import KernelCompileError, LoweringError, compile_kernel
from ptxgen.runtime.launcher import LaunchError, jit
from ptxgen.verify import INTERNAL_ERROR, VerifyError, verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SOURCES = {p.name: p.read_text() for p in sorted(EXAMPLES.glob("*.tile"))}

INTERNAL = INTERNAL_ERROR  # in a VerifyError: an op rule raised an exception (counted as an escape here)

INTERPRET_BUDGET_S = 2.0   # a mutant whose interpretation takes longer is cut off (a long loop is not an error)
ARGUMENT_EXTENT = 16       # every mode of every tensor argument; every integer scalar argument


# -- mutations ---------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\[[^\[\]\n]*\]|%[A-Za-z0-9_.]+|@[A-Za-z0-9_.]+|-?[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|-?[0-9]+'
                    r'|[A-Za-z_][A-Za-z0-9_.]*|"[^"\n]*"|//[^\n]*|\s+|.', re.S)
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
NUMBERS = ["0", "-1", "1", "2", "3", "7", "8", "16", "127", "128", "255", "256", "1023", "1024", "4096", "65536",
           "2147483647", "2147483648", "9223372036854775808", "1" + "0" * 40, "1.5", "0.0", "-0.0", "1e39", "-1e39",
           "65520.0", "3.4e38", "nan", "inf", "-inf", "true", "(0)", "x"]
DTYPES = sorted(SCALARS)
WORDS = sorted({w for text in SOURCES.values() for w in re.findall(r"\b[a-z_][a-z0-9_]*\b", text)}
               | {"x", "y", "z", "w", "add", "max", "min", "lt", "eq", "ge", "mn", "k", "MN", "K", "true", "false"})
OP_NAMES = sorted(OPS)
ALPHABET = "%@{}()[]<>:=,.-+*/_ \n\"0123456789abcdefgikmnoprstuvwxyzSwTIKMN"


def tokens(text: str) -> list:
    return _TOKEN.findall(text)


def _nest(inner: str, depth: int) -> str:
    return "(" * depth + inner + ")" * depth


def mutate(text: str, pick) -> str:
    """One structured mutation of ``text``; ``pick(n)`` chooses an index in range(n) (a random generator or a
    hypothesis draw, so that hypothesis can shrink the choice)."""
    toks = tokens(text)
    solid = [i for i, t in enumerate(toks) if not t.isspace() and not t.startswith("//")]
    kind = pick(12)
    if not solid:
        return text[:pick(len(text) + 1)]
    at = solid[pick(len(solid))]
    tok = toks[at]
    if kind == 0:                                     # delete a token
        toks[at] = ""
    elif kind == 1:                                   # duplicate a token
        toks[at] = tok + " " + tok
    elif kind == 2:                                   # swap two tokens
        other = solid[pick(len(solid))]
        toks[at], toks[other] = toks[other], toks[at]
    elif kind == 3:                                   # change a number (in a bracket too)
        numbered = [i for i in solid if _NUMBER.fullmatch(toks[i]) or (toks[i][0] == "[" and _NUMBER.search(toks[i]))]
        if numbered:
            at = numbered[pick(len(numbered))]
            found = list(_NUMBER.finditer(toks[at]))
            m = found[pick(len(found))]
            new = NUMBERS[pick(len(NUMBERS))]
            if toks[at].startswith("["):               # CuTe notation has integers only
                new = new if re.fullmatch(r"-?[0-9]+", new) else str(pick(3))
            toks[at] = toks[at][:m.start()] + new + toks[at][m.end():]
    elif kind == 4:                                   # change an element type
        typed = [i for i in solid if toks[i] in SCALARS]
        if typed:
            toks[typed[pick(len(typed))]] = DTYPES[pick(len(DTYPES))]
    elif kind == 5:                                   # change a word
        worded = [i for i in solid if re.fullmatch(r"[a-z_][a-z0-9_]*", toks[i])]
        if worded:
            toks[worded[pick(len(worded))]] = WORDS[pick(len(WORDS))]
    elif kind == 6:                                   # use another value
        names = [i for i in solid if toks[i].startswith("%")]
        if names:
            toks[names[pick(len(names))]] = toks[names[pick(len(names))]]
    elif kind == 7:                                   # another op
        ops = [i for i in solid if toks[i] in OPS]
        if ops:
            toks[ops[pick(len(ops))]] = OP_NAMES[pick(len(OP_NAMES))]
    elif kind == 8:                                   # nest deeply (an attribute value, a shape, a layout)
        depth = (1, 2, 30, 64, 65, 120, 400, 3000)[pick(8)]
        values = [i for k, i in enumerate(solid) if toks[i][0] == "[" or (k and toks[solid[k - 1]] == "=")]
        at = values[pick(len(values))] if values else at
        tok = toks[at]
        if tok.startswith("["):
            toks[at] = "[" + _nest(tok[1:-1], depth) + "]"
        else:
            toks[at] = _nest(tok, depth)
    elif kind == 9:                                   # drop, repeat or swap lines
        lines = "".join(toks).split("\n")
        a, b = pick(len(lines)), pick(len(lines))
        how = pick(3)
        if how == 0:
            del lines[a]
        elif how == 1:
            lines.insert(a, lines[b])
        else:
            lines[a], lines[b] = lines[b], lines[a]
        return "\n".join(lines)
    elif kind == 10:                                  # truncate
        return text[:pick(len(text) + 1)]
    else:                                             # insert a character
        toks[at] = tok + ALPHABET[pick(len(ALPHABET))]
    return "".join(toks)


def mutant(name: str, count: int, pick) -> str:
    text = SOURCES[name]
    for _ in range(count):
        text = mutate(text, pick)
    return text


# -- the pipeline ------------------------------------------------------------------------------------------------

class _OutOfTime(BaseException):
    """The interpretation budget ran out (a BaseException, so no ``except Exception`` of the code under test
    swallows it)."""


@contextlib.contextmanager
def _budget(seconds: float):
    if threading.current_thread() is not threading.main_thread():
        raise _OutOfTime  # no SIGALRM off the main thread: skip the interpretation rather than risk a long run

    def expire(signum, frame):
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def arguments(kernel) -> dict:
    """Tiny arguments for every parameter: tensors of ARGUMENT_EXTENT elements per mode holding small values,
    integer scalars ARGUMENT_EXTENT, float scalars 0.5."""
    rng = np.random.default_rng(0)
    args = {}
    for p in kernel.params:
        t = p.type
        if isinstance(t, (GlobalTensorType, TensorMapType)):
            shape = (ARGUMENT_EXTENT,) * t.rank
            host = host_dtype(t.dtype)  # the one host convention (ml_dtypes for bf16 and fp8)
            args[p.name] = rng.integers(-2, 3, size=shape).astype(host)
        elif isinstance(t, ScalarType):
            args[p.name] = 0.5 if t.is_float else ARGUMENT_EXTENT
    return args


def run_pipeline(text: str, stages=("interpret", "compile", "jit")) -> str:
    """Feed ``text`` through every entry point; returns how far it got ("parse", "verify", "interpret", ...,
    "done"). A documented error ends the run at its stage; anything else propagates."""
    try:
        module = parse_module(text, file="fuzz.tile")
    except IRSyntaxError:
        return "parse"
    try:
        verify(module)
    except VerifyError as e:
        if INTERNAL in str(e):
            raise
        return "verify"
    reached = "done"
    for kernel in module.kernels[:2]:
        if "interpret" in stages:
            try:
                with _budget(INTERPRET_BUDGET_S):
                    interpret(module, arguments(kernel), kernel=kernel.name, grid=cluster_dims(kernel))
            except InterpreterError:
                reached = "interpret"
            except _OutOfTime:
                reached = "interpret (out of time)"
        if "compile" in stages:
            try:
                compile_kernel(kernel, verify=False)
            except (LoweringError, KernelCompileError):
                reached = "compile"
        if "jit" in stages:
            try:
                jit(module, kernel=kernel.name).compile()
            except (LoweringError, KernelCompileError, LaunchError):
                reached = "jit"
    return reached


def escape(text: str, stages=("interpret", "compile", "jit")):
    """None when ``text`` gets through ``run_pipeline`` with documented errors only (and no internal verifier error);
    else (exception, traceback)."""
    try:
        run_pipeline(text, stages)
    except Exception as e:  # noqa: BLE001 — the point: anything undocumented is caught and reported
        return e, "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return None


def _report(text, found):
    error, tb = found
    return f"{type(error).__name__} escaped for:\n{text}\n{tb}"


# -- the properties ------------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=ALPHABET, max_size=200))
def test_random_strings_raise_only_syntax_errors(text):
    found = escape(text, stages=())
    assert found is None, _report(text, found)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(SOURCES)), st.integers(0, 1), st.data())
def test_random_kernel_prefixes_raise_only_documented_errors(name, splice, data):
    """Random text spliced into a real kernel: the parser's error paths past a valid prefix."""
    text = SOURCES[name]
    at = data.draw(st.integers(0, len(text)))
    noise = data.draw(st.text(alphabet=ALPHABET, max_size=20))
    mutated = text[:at] + noise + (text[at:] if splice else "")
    found = escape(mutated, stages=())
    assert found is None, _report(mutated, found)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(SOURCES)), st.integers(1, 3), st.data())
def test_mutated_examples_raise_only_documented_errors(name, count, data):
    text = mutant(name, count, lambda n: data.draw(st.integers(0, max(n - 1, 0))))
    found = escape(text)
    assert found is None, _report(text, found)


# attribute values of every kind the text form can write, and a missing attribute
WRONG_VALUES = [TupleAttr((0,)), Word("x"), 0.0, True, "0", (1, 2), lc.Layout(4, 1), -1, 0, 1, 3, 2 ** 31, 2 ** 70,
                1e39, float("nan"), TupleAttr(()), TupleAttr((Word("x"), 0)), TupleAttr((TupleAttr((1,)),)),
                lc.parse("Sw<3,4,3> o 0 o (8,64):(64,1)"), (64, 64), 64, 1024, TupleAttr((-1, 1)), None]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(SOURCES)), st.data())
def test_any_attribute_value_is_checked_by_the_rules(name, data):
    """Any attribute of any op set to a value of another kind (or removed): the op rules report it — never an
    exception inside a rule (an internal verifier error) — and what verifies runs through the rest of the
    pipeline."""
    module = parse_module(SOURCES[name], file=f"examples/{name}")
    op = data.draw(st.sampled_from([op for k in module.kernels for op in walk(k.body) if op.attrs]))
    key = data.draw(st.sampled_from(sorted(op.attrs)))
    value = data.draw(st.sampled_from(WRONG_VALUES))
    if value is None:
        del op.attrs[key]
    else:
        op.attrs[key] = value
    try:
        verify(module)
    except VerifyError as e:
        assert INTERNAL not in str(e), str(e)
        return
    text = print_module(module)
    found = escape(text)
    assert found is None, _report(text, found)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_unmutated_examples_run_the_whole_pipeline(name):
    """The harness itself: every example parses, verifies, runs in the interpreter on the tiny arguments within the
    budget and compiles — so the mutants above are exercised through every stage, not stopped by the harness."""
    assert run_pipeline(SOURCES[name]) == "done"


def test_the_harness_reports_what_escapes(monkeypatch):
    """An undocumented exception anywhere in the pipeline, or one an op rule raises inside verify, is reported."""
    sqrt_sin = SOURCES["sqrt_sin.tile"]
    assert escape(sqrt_sin) is None

    def broken(op, ix):
        raise KeyError("planted")
    monkeypatch.setattr(OPS["frag.sqrt"], "interpret", broken)
    found = escape(sqrt_sin)
    assert found is not None and isinstance(found[0], KeyError)
    monkeypatch.undo()

    def broken_rule(op, v):
        raise IndexError("planted")
    monkeypatch.setattr(OPS["frag.sin"], "verify", broken_rule)
    found = escape(sqrt_sin)
    assert found is not None and isinstance(found[0], VerifyError) and INTERNAL in str(found[0])


if __name__ == "__main__":
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    reached, escapes = {}, []
    for n in range(total):
        name = rng.choice(sorted(SOURCES))
        text = mutant(name, rng.randint(1, 3), rng.randrange)
        try:
            stage = run_pipeline(text)
        except Exception as e:  # noqa: BLE001
            stage = "ESCAPE " + type(e).__name__
            found = escape(text)
            if found is not None:
                escapes.append((name, text, found))
                print(_report(text, found), flush=True)
        reached[stage] = reached.get(stage, 0) + 1
    print(total, "mutants:", reached, f"{len(escapes)} escapes")
