"""A kernel's header (spec/tile-ir.md §3, §5): every bad launch attribute and kernel name is a verifier error at the
attribute (or its entry, or the kernel), the rules' boundaries hold, the builder's kernels are judged the same way,
a grid the arguments make invalid is an InterpreterError / LaunchError naming the attribute and the expression, and
every header the verifier accepts compiles (LLVM never aborts) and runs."""
from __future__ import annotations

import pathlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxgen.interp import InterpreterError, interpret
from ptxgen.ir.builder import KernelBuilder, cdiv, dim, f32, gtensor, i32
from ptxgen.ir.core import Kernel, Region
from ptxgen.ir.hostexpr import Add, CDiv, Const, Dim, Min, Mul, ParamRef, Word
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.runtime import LaunchError, jit
from ptxgen.verify import VerifyError, verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

PARAMS = "%x: gtensor<f32, 2>, %y: gtensor<f32, 1>, %n: i32, %m: i32, %s: f32, %p: i1, %u: u64"
PREFIX = f"kernel @k({PARAMS}) {{"
BODY = "} {\n  %t = gpu.thread_id {dim = x} : i32\n}\n"
OK = "grid = (1, 1, 1), block = (128, 1, 1)"


def header_errors(attrs: str, name: str = "k"):
    """The verifier's errors, as 'file:line:col: @name: message' lines, for a kernel with these attributes."""
    text = PREFIX.replace("@k", f"@{name}") + attrs + BODY
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, "h.tile"))
    return str(e.value).split("\n")


def column(attrs: str, marker: str) -> int:
    """The 1-based column of ``marker`` (its first occurrence in the attributes) in the header line."""
    assert attrs.count(marker) == 1, marker
    return len(PREFIX) + attrs.index(marker) + 1


# (name, attributes, the text the error points at, message fragment)
CORPUS = [
    # the escapes of issue 16
    ("block 0", "grid = (1, 1, 1), block = (0, 1, 1)", "0, 1, 1)",
     "block = (0, 1, 1): x is 0; a block has at least 1 thread along each axis"),
    ("block word", "grid = (1, 1, 1), block = (threads, 1, 1)", "threads",
     "block = (threads, 1, 1): x is the bare word threads, not an integer: block takes integer literals"),
    ("block negative", "grid = (1, 1, 1), block = (-256, 1, 1)", "-256",
     "block = (-256, 1, 1): x is -256; a block has at least 1 thread along each axis"),
    ("cluster 0", "grid = (1, 1, 1), block = (128, 1, 1), cluster = (0, 1, 1)", "0, 1, 1)",
     "cluster = (0, 1, 1): x is 0; a cluster has at least 1 CTA along each axis"),
    ("dim mode out of range", "grid = (dim(%x, 2), 1, 1), block = (128, 1, 1)", "dim(%x, 2)",
     "grid = (dim(%x, 2), 1, 1): dim(%x, 2): %x is a gtensor<f32, 2>, whose modes are 0 and 1"),
    ("dim of a rank-1 tensor", "grid = (dim(%y, 1), 1, 1), block = (128, 1, 1)", "dim(%y, 1)",
     "dim(%y, 1): %y is a gtensor<f32, 1>, whose only mode is 0"),
    ("dim of a scalar", "grid = (dim(%m, 0), 1, 1), block = (128, 1, 1)", "dim(%m, 0)",
     "grid = (dim(%m, 0), 1, 1): dim(%m, 0): %m is i32, not a tensor parameter (gtensor or tmap); an integer "
     "parameter is written %m"),
    ("cdiv by 0", "grid = (cdiv(%n, 0), 1, 1), block = (128, 1, 1)", "cdiv(%n, 0)",
     "grid = (cdiv(%n, 0), 1, 1): cdiv(%n, 0): the divisor must be > 0, not 0"),
    ("cdiv by a constant 0", "grid = (cdiv(%n, 2 * 0), 1, 1), block = (128, 1, 1)", "cdiv",
     "cdiv(%n, 2 * 0): the divisor must be > 0, not 0"),
    ("cdiv by a negative", "grid = (1, cdiv(%n, -4), 1), block = (128, 1, 1)", "cdiv",
     "cdiv(%n, -4): the divisor must be > 0, not -4"),
    ("cdiv of a tensor", "grid = (cdiv(%x, 1024), 1, 1), block = (128, 1, 1)", "cdiv",
     "grid = (cdiv(%x, 1024), 1, 1): %x is a gtensor<f32, 2>, not an integer: a tensor's extent is dim(%x, mode)"),
    ("min of a tensor", "grid = (1, 1, min(%n, %y)), block = (128, 1, 1)", "min",
     "%y is a gtensor<f32, 1>, not an integer"),
    ("float parameter", "grid = (%s + 1, 1, 1), block = (128, 1, 1)", "%s + 1",
     "grid = (%s + 1, 1, 1): %s is f32; host expressions take integer parameters (i32, u32, i64, u64)"),
    ("predicate parameter", "grid = (%p * 2, 1, 1), block = (128, 1, 1)", "%p * 2",
     "%p is i1; host expressions take integer parameters (i32, u32, i64, u64)"),
    ("block float", "grid = (1, 1, 1), block = (256.0, 1, 1)", "256.0",
     "block = (256.0, 1, 1): x is the float 256.0, not an integer: block takes integer literals"),
    ("block 4 entries", "grid = (1, 1, 1), block = (256, 1, 1, 1)", "block",
     "block = (256, 1, 1, 1) has 4 entries; it takes exactly 3 (x, y, z)"),
    ("grid -1", "grid = (-1, 1, 1), block = (128, 1, 1)", "-1",
     "grid = (-1, 1, 1): x is -1; a grid has at least 1 CTA along each axis"),
    ("grid 0 folded", "grid = (1, 2 * 0 + 0, 1), block = (128, 1, 1)", "2 * 0",
     "grid = (1, 2 * 0 + 0, 1): y is 0 (2 * 0 + 0); a grid has at least 1 CTA along each axis"),
    ("block 2048", "grid = (1, 1, 1), block = (2048, 1, 1)", "block",
     "block = (2048, 1, 1) has 2048 threads; a CTA has 1 to 1024"),
    ("misspelt block", "grid = (1, 1, 1), blokc = (128, 1, 1)", "blokc",
     "unknown kernel attribute 'blokc' (did you mean 'block'?): a kernel takes grid, block, cluster, "
     "non_portable_cluster and min_ctas_per_sm"),
    # the rules' boundaries and the other forms
    ("block 1025", "grid = (1, 1, 1), block = (1025, 1, 1)", "block",
     "block = (1025, 1, 1) has 1025 threads; a CTA has 1 to 1024"),
    ("block 32 x 33", "grid = (1, 1, 1), block = (32, 33, 1)", "block",
     "block = (32, 33, 1) has 1056 threads; a CTA has 1 to 1024"),
    ("block z 65", "grid = (1, 1, 1), block = (1, 1, 65)", "65",
     "block = (1, 1, 65): z is 65; a CTA has at most 64 threads along z"),
    ("block host expression", "grid = (1, 1, 1), block = (%n, 1, 1)", "%n, 1, 1)",
     "block = (%n, 1, 1): x is the host expression %n, not an integer: block is static (compiled into the kernel), "
     "only grid is computed at launch"),
    ("block boolean", "grid = (1, 1, 1), block = (true, 1, 1)", "true",
     "x is the boolean true, not an integer"),
    ("block string", "grid = (1, 1, 1), block = (\"256\", 1, 1)", "\"256\"",
     "x is the string \"256\", not an integer"),
    ("block one number", "grid = (1, 1, 1), block = 256", "block",
     "block = 256 is one entry; it takes 3 (x, y, z): block = (256, 1, 1)"),
    ("block 1-tuple", "grid = (1, 1, 1), block = (256)", "block",
     "block = (256) has 1 entry; it takes exactly 3 (x, y, z), e.g. block = (256, 1, 1)"),
    ("block empty", "grid = (1, 1, 1), block = ()", "block", "block = () has 0 entries; it takes exactly 3"),
    ("block boolean value", "grid = (1, 1, 1), block = true", "block",
     "block = true is the boolean true, not a tuple (x, y, z), e.g. block = (128, 1, 1)"),
    ("grid 2 entries", "grid = (cdiv(%n, 1024), 1), block = (128, 1, 1)", "grid",
     "grid = (cdiv(%n, 1024), 1) has 2 entries; it takes exactly 3 (x, y, z), e.g. grid = (cdiv(%n, 1024), 1, 1)"),
    ("grid one expression", "grid = cdiv(%n, 1024), block = (128, 1, 1)", "grid",
     "grid = cdiv(%n, 1024) is one entry; it takes 3 (x, y, z): grid = (cdiv(%n, 1024), 1, 1)"),
    ("grid y 65536", "grid = (1, 65536, 1), block = (128, 1, 1)", "65536",
     "grid = (1, 65536, 1): y is 65536; a grid has at most 65535 CTAs along y"),
    ("grid x 2^31", "grid = (65536 * 32768, 1, 1), block = (128, 1, 1)", "65536",
     "x is 2147483648; a grid has at most 2147483647 CTAs along x"),
    ("cluster 16 without the opt-in", "grid = (16, 1, 1), block = (128, 1, 1), cluster = (16, 1, 1)", "cluster",
     "cluster = (16, 1, 1) has 16 CTAs, more than the portable 8: clusters of up to 16 need the kernel attribute "
     "non_portable_cluster = true"),
    ("cluster 9 without the opt-in", "grid = (9, 1, 1), block = (128, 1, 1), cluster = (9, 1, 1)", "cluster",
     "cluster = (9, 1, 1) has 9 CTAs, more than the portable 8"),
    ("cluster 32 with the opt-in",
     "grid = (32, 1, 1), block = (128, 1, 1), cluster = (4, 4, 2), non_portable_cluster = true", "cluster = (",
     "cluster = (4, 4, 2) has 32 CTAs; a cluster has at most 16 (with non_portable_cluster = true; 8 without)"),
    ("cluster float", "grid = (2, 1, 1), block = (128, 1, 1), cluster = (2.0, 1, 1)", "2.0",
     "cluster = (2.0, 1, 1): x is the float 2.0, not an integer: cluster takes integer literals"),
    ("cluster 2 entries", "grid = (2, 1, 1), block = (128, 1, 1), cluster = (2, 1)", "cluster",
     "cluster = (2, 1) has 2 entries; it takes exactly 3 (x, y, z), e.g. cluster = (2, 1, 1)"),
    ("grid not a multiple of the cluster", "grid = (3, 1, 1), block = (128, 1, 1), cluster = (2, 1, 1)", "3, 1, 1)",
     "grid = (3, 1, 1) is not a multiple of cluster = (2, 1, 1): 3 CTAs along x cannot form whole clusters of 2"),
    ("grid y not a multiple of the cluster", "grid = (cdiv(%n, 64), 1, 1), block = (128, 1, 1), cluster = (1, 2, 1)",
     "1, 1), block", "1 CTA along y cannot form whole clusters of 2"),
    ("non-portable not a boolean", "grid = (1, 1, 1), block = (128, 1, 1), non_portable_cluster = yes", "yes",
     "non_portable_cluster must be true or false, not yes"),
    ("unknown attribute", "grid = (1, 1, 1), block = (128, 1, 1), smem = 4096", "smem",
     "unknown kernel attribute 'smem': a kernel takes grid, block, cluster, non_portable_cluster and min_ctas_per_sm"),
    ("min CTAs per SM not an integer", "grid = (1, 1, 1), block = (128, 1, 1), min_ctas_per_sm = 0", "0",
     "min_ctas_per_sm must be an integer >= 1, not 0"),
    ("min CTAs per SM over the SM", "grid = (1, 1, 1), block = (1024, 1, 1), min_ctas_per_sm = 3", "3",
     "min_ctas_per_sm = 3 CTAs of 1024 threads is 3072 threads; an SM holds 2048"),
    ("misspelt cluster", "grid = (2, 1, 1), block = (128, 1, 1), clustr = (2, 1, 1)", "clustr",
     "unknown kernel attribute 'clustr' (did you mean 'cluster'?)"),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_launch_attribute_is_reported_at_the_attribute(case):
    _name, attrs, marker, fragment = case
    errors = header_errors(attrs)
    assert errors[0].startswith(f"h.tile:1:{column(attrs, marker)}: @k: "), errors
    assert fragment in errors[0], errors


def test_bad_launch_attribute_messages_are_whole():
    """The corpus's fragments are the whole message where the case gives one (no trailing noise)."""
    assert header_errors("grid = (1, 1, 1), block = (0, 1, 1)") == [
        f"h.tile:1:{len(PREFIX) + 28}: @k: block = (0, 1, 1): x is 0; a block has at least 1 thread along each axis"]
    assert header_errors("grid = (cdiv(%n, 0), 1, 1), block = (128, 1, 1)") == [
        f"h.tile:1:{len(PREFIX) + 9}: @k: grid = (cdiv(%n, 0), 1, 1): cdiv(%n, 0): the divisor must be > 0, not 0"]


def test_the_boundaries_verify():
    for attrs in ("grid = (1, 1, 1), block = (1024, 1, 1)", "grid = (1, 1, 1), block = (1, 1, 1)",
                  "grid = (1, 1, 1), block = (1, 1024, 1)", "grid = (1, 1, 1), block = (16, 1, 64)",
                  "grid = (8, 1, 1), block = (128, 1, 1), cluster = (8, 1, 1)",
                  "grid = (4, 2, 2), block = (128, 1, 1), cluster = (2, 2, 2)",
                  "grid = (16, 1, 1), block = (128, 1, 1), cluster = (16, 1, 1), non_portable_cluster = true",
                  "grid = (4, 4, 1), block = (128, 1, 1), cluster = (4, 4, 1), non_portable_cluster = true",
                  "grid = (2, 1, 1), block = (128, 1, 1), cluster = (2, 1, 1), non_portable_cluster = false",
                  "grid = (2147483647, 65535, 65535), block = (128, 1, 1)",
                  "grid = (cdiv(%n, 4) * 2, dim(%x, 1), min(%u, %m + 1)), block = (128, 1, 1), cluster = (2, 1, 1)",
                  "grid = (dim(%y, 0), 1, 1), block = (128, 1, 1)",
                  "grid = (1, 1, 1), block = (512, 1, 1), min_ctas_per_sm = 4"):
        verify(parse_module(PREFIX + attrs + BODY, "h.tile"))


def test_missing_grid_and_block_are_named_at_the_kernel():
    assert header_errors("block = (128, 1, 1)") == [
        "h.tile:1:1: @k: missing attribute 'grid' (the CTAs to launch, e.g. grid = (cdiv(%n, 256), 1, 1))"]
    errors = header_errors("grid = (1, 1, 1), blokc = (128, 1, 1)")
    assert errors[1] == "h.tile:1:1: @k: missing attribute 'block' (the threads of a CTA, e.g. block = (128, 1, 1))"
    with pytest.raises(VerifyError) as e:
        verify(parse_module(f"kernel @k({PARAMS}) {{\n}}\n", "h.tile"))
    assert [line.split(": @k: ")[1].split(" (")[0] for line in str(e.value).split("\n")] == [
        "missing attribute 'grid'", "missing attribute 'block'"]


def test_a_broken_block_silences_the_rules_that_read_it():
    """block = (2048, 1, 1) is reported at the block, not downstream at a TV layout or the roles."""
    text = (EXAMPLES / "gemm.tile").read_text().replace("block = (384, 1, 1)", "block = (2048, 1, 1)")
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, "g.tile"))
    assert [msg for _, _, msg in e.value.errors] == ["block = (2048, 1, 1) has 2048 threads; a CTA has 1 to 1024"]


def test_roles_need_whole_warpgroups():
    text = (EXAMPLES / "gemm.tile").read_text().replace("block = (384, 1, 1)", "block = (320, 1, 1)")
    line = next(i for i, s in enumerate(text.split("\n"), 1) if s.startswith("kernel @gemm"))
    col = text.split("\n")[line - 1].index("block = (320") + 1
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, "g.tile"))
    errors = str(e.value).split("\n")
    assert errors[0] == (f"g.tile:{line}:{col}: @gemm: block = (320, 1, 1) has 320 threads, not a multiple of 128: "
                         "gpu.roles gives each role whole warpgroups of 128 threads")
    assert "gpu.roles: the roles span 3 warpgroups = 384 threads but the CTA has 320" in errors[1]


# -- kernel names --------------------------------------------------------------------------------------------------

RULE = "(a letter, or _ and at least one more character, then letters, digits and _)"


@pytest.mark.parametrize("name, why, fixed", [
    ("sqrt_sin.v2", "'.' is not allowed", "sqrt_sin_v2"),
    ("a.b.c", "'.' is not allowed", "a_b_c"),
    ("9lives", "it starts with a digit", "k_9lives"),
    ("_", "a lone _ is not an identifier", "k__"),
    ("WARP_SZ", "WARP_SZ is a name PTX reserves (its predefined warp-size constant)", "k_WARP_SZ"),
])
def test_a_kernel_name_that_is_not_a_ptx_identifier_is_reported_at_the_kernel(name, why, fixed):
    assert header_errors(OK, name) == [f"h.tile:1:1: @{name}: kernel name @{name} is not a PTX identifier {RULE}: "
                                       f"{why}; e.g. @{fixed}"]


def test_ptx_identifiers_verify_and_assemble():
    """Names that look like PTX keywords are fine (checked by assembling each: only WARP_SZ is refused)."""
    for name in ("_k", "add", "entry", "reg", "u32", "sqrt_sin_v2", "K9"):
        verify(parse_module(PREFIX.replace("@k", f"@{name}") + OK + BODY))
    text = (EXAMPLES / "sqrt_sin.tile").read_text().replace("@sqrt_sin", "@entry")
    assert ".entry entry(" in compile_kernel(parse_module(text).kernels[0]).ptx


# -- the builder's kernels -------------------------------------------------------------------------------------------

def builder_errors(**kw):
    name = kw.pop("name", "k")
    kw.setdefault("grid", (1, 1, 1))
    kw.setdefault("block", (128, 1, 1))
    kernel = KernelBuilder(name, x=gtensor("f32", 2), n=i32, **kw).finish()
    with pytest.raises(VerifyError) as e:
        verify(kernel)
    return str(e.value).split("\n")


@pytest.mark.parametrize("kw, message", [
    (dict(block=(256.0, 1, 1)), "block = (256.0, 1, 1): x is the float 256.0, not an integer: block takes integer "
                                "literals"),
    (dict(block=True), "block = true is the boolean true, not a tuple (x, y, z), e.g. block = (128, 1, 1)"),
    (dict(block=256), "block = 256 is one entry; it takes 3 (x, y, z): block = (256, 1, 1)"),
    (dict(block=(256, 1)), "block = (256, 1) has 2 entries; it takes exactly 3 (x, y, z), e.g. block = (256, 1, 1)"),
    (dict(block=[0, 1, 1]), "block = (0, 1, 1): x is 0; a block has at least 1 thread along each axis"),
    (dict(block=(True, 1, 1)), "block = (true, 1, 1): x is the boolean true, not an integer"),
    (dict(block=(np.int64(2048), 1, 1)), "block = (2048, 1, 1) has 2048 threads; a CTA has 1 to 1024"),
    (dict(grid=(1.5, 1, 1)), "grid = (1.5, 1, 1): the float 1.5 is not an integer or a host expression"),
    (dict(grid=(True, 1, 1)), "grid = (true, 1, 1): the boolean true is not an integer or a host expression"),
    (dict(grid=(cdiv("n", 0), 1, 1)), "grid = (cdiv(%n, 0), 1, 1): cdiv(%n, 0): the divisor must be > 0, not 0"),
    (dict(grid=(dim("xx", 0), 1, 1)), "dim(%xx, 0): %xx is not a parameter of the kernel (did you mean 'x'?)"),
    (dict(grid=("nn", 1, 1)), "grid = (%nn, 1, 1): %nn is not a parameter of the kernel (did you mean 'n'?)"),
    (dict(grid=(dim("x", 2), 1, 1)), "dim(%x, 2): %x is a gtensor<f32, 2>, whose modes are 0 and 1"),
    (dict(grid=(Const(2.5), 1, 1)), "grid = (2.5, 1, 1): the float 2.5 is not an integer"),
    (dict(grid=(0, 1, 1)), "grid = (0, 1, 1): x is 0; a grid has at least 1 CTA along each axis"),
    (dict(cluster=(16, 1, 1), grid=(16, 1, 1)), "cluster = (16, 1, 1) has 16 CTAs, more than the portable 8"),
    (dict(cluster=(2, 1, 1), non_portable_cluster="yes"), "non_portable_cluster must be true or false, not \"yes\""),
    (dict(name="a.b"), "kernel name @a.b is not a PTX identifier"),
    (dict(name=7), "the kernel name must be a string, not the integer 7"),
])
def test_builder_kernels_are_verified_like_text(kw, message):
    errors = builder_errors(**kw)
    assert errors[0].startswith("<builder>:0:0: @"), errors
    assert message in errors[0], errors


def test_builder_launch_attributes_that_verify():
    kb = KernelBuilder("k", x=gtensor("f32", 2), n=i32, grid=(16, cdiv("n", 2), dim("x", 1)), block=[128, 1, 1],
                       cluster=(16, 1, 1), non_portable_cluster=True)
    verify(kb.finish())
    # a hand-built Kernel whose grid holds plain ints stands for the constants
    verify(Kernel("k", [], {"grid": (4, 1, 1), "block": (32, 1, 1)}, Region()))
    with pytest.raises(VerifyError, match=r"<builder>:0:0: @k: unknown kernel attribute 'blokc' \(did you mean "):
        verify(Kernel("k", [], {"grid": (4, 1, 1), "block": (32, 1, 1), "blokc": 3}, Region()))


# -- run time: the grid for these arguments ---------------------------------------------------------------------------

SQRT_SIN = (EXAMPLES / "sqrt_sin.tile").read_text()
GRID_BY_M = parse_module(SQRT_SIN.replace("%n: i32)", "%n: i32, %m: i32)").replace("cdiv(%n, 1024)", "cdiv(%n, %m)"),
                         "s.tile")
GRID_BY_X_IN_PAIRS = parse_module(SQRT_SIN.replace("(cdiv(%n, 1024), 1, 1)", "(dim(%x, 0), 1, 1)")
                                  .replace("(256, 1, 1)}", "(256, 1, 1), cluster = (2, 1, 1)}"), "s.tile")
DIVIDES_BY_ZERO = "@sqrt_sin: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m) divides by %m = 0"
NEGATIVE = ("@sqrt_sin: grid = (cdiv(%n, %m), 1, 1): x = cdiv(%n, %m) is -8 for these arguments; a grid cannot have "
            "a negative number of CTAs")
NOT_IN_PAIRS = ("@sqrt_sin: grid = (dim(%x, 0), 1, 1) is (3, 1, 1) for these arguments, not a multiple of cluster = "
                "(2, 1, 1): 3 CTAs along x cannot form whole clusters of 2")


def arrays(n):
    return np.linspace(0.1, 1.0, n, dtype=np.float32), np.full(n, -1.0, np.float32)


@pytest.mark.parametrize("m, message", [(0, DIVIDES_BY_ZERO), (-1, NEGATIVE)])
def test_the_interpreter_names_the_grid_the_arguments_break(m, message):
    x, z = arrays(8)
    with pytest.raises(InterpreterError) as e:
        interpret(GRID_BY_M, {"x": x, "z": z, "n": 8, "m": m})
    assert str(e.value) == message
    assert (z == -1).all()


def test_the_interpreter_checks_the_runtime_grid_against_the_cluster():
    x, z = arrays(3)
    with pytest.raises(InterpreterError) as e:
        interpret(GRID_BY_X_IN_PAIRS, {"x": x, "z": z, "n": 3})
    assert str(e.value) == NOT_IN_PAIRS
    with pytest.raises(InterpreterError, match=r"is \(3, 1, 1\) for these arguments, not a multiple of cluster"):
        interpret(GRID_BY_X_IN_PAIRS, {"x": x, "z": z, "n": 3}, grid=(3,))  # the caller's grid is checked too
    with pytest.raises(ValueError, match="grid must be 1 to 3 integers >= 0"):
        interpret(GRID_BY_M, {"x": x, "z": z, "n": 3, "m": 1}, grid=(1, -1))


def test_an_empty_grid_runs_nothing():
    x, z = arrays(0)
    interpret(GRID_BY_M, {"x": x, "z": z, "n": 0, "m": 1024})
    x, z = arrays(8)
    interpret(GRID_BY_M, {"x": x, "z": z, "n": 8, "m": 1024}, grid=(0, 1, 1))
    assert (z == -1).all()
    interpret(GRID_BY_M, {"x": x, "z": z, "n": 8, "m": 1024})
    assert np.allclose(z, np.sqrt(np.sin(x)), rtol=1e-6)


class FakeCudaArray:
    """A device array stand-in: ``__cuda_array_interface__`` at an arbitrary address."""

    def __init__(self, ptr, shape):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": "<f4", "strides": None,
                                         "version": 3}


def test_the_launcher_names_the_grid_the_arguments_break():
    """The grid is evaluated before anything is compiled or loaded (no device needed)."""
    k = jit(GRID_BY_M)
    x, z = FakeCudaArray(0x10000, (8,)), FakeCudaArray(0x20000, (8,))
    assert k.grid(x=x, z=z, n=8, m=4) == (2, 1, 1)
    for m, message in ((0, DIVIDES_BY_ZERO), (-1, NEGATIVE)):
        for call in (k.grid, k, k.prepare):
            with pytest.raises(LaunchError) as e:
                call(x=x, z=z, n=8, m=m)
            assert str(e.value) == message
    pairs = jit(GRID_BY_X_IN_PAIRS)
    x3, z3 = FakeCudaArray(0x10000, (3,)), FakeCudaArray(0x20000, (3,))
    with pytest.raises(LaunchError) as e:
        pairs(x=x3, z=z3, n=3)
    assert str(e.value) == NOT_IN_PAIRS
    assert pairs.grid(x=FakeCudaArray(0x10000, (4,)), z=FakeCudaArray(0x20000, (4,)), n=4) == (4, 1, 1)
    big = jit(parse_module(SQRT_SIN.replace("cdiv(%n, 1024), 1, 1", "1, %n, 1")))
    with pytest.raises(LaunchError, match=r"@sqrt_sin: grid = \(1, %n, 1\): y = %n is 65536 for these arguments, "
                                          r"more than the 65535 CTAs a grid can have along y"):
        big.grid(x=x, z=z, n=65536)


def test_the_launcher_opts_in_to_non_portable_clusters(monkeypatch):
    """A kernel with non_portable_cluster = true sets CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED on its
    function before launching in clusters of 16 (the driver replaced by a recorder)."""
    from ptxgen.runtime import kernel_launch as launch

    calls = []

    class FakeCU:
        class CUstream(int):
            pass

        @staticmethod
        def cuLaunchKernelEx(cfg, handle, params, extra):
            dims = [(a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z) for a in cfg.attrs]
            calls.append(("launch", handle, (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ), dims))
            return (0,)

    class FakeModule:
        def __init__(self, image):
            pass

        def function(self, name):
            return SimpleNamespace(handle=name)

    monkeypatch.setattr(launch, "_cu", lambda: FakeCU)
    monkeypatch.setattr(launch, "Module", FakeModule)
    monkeypatch.setattr(launch, "context", lambda: None)
    monkeypatch.setattr(launch, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "allow_non_portable_cluster", lambda f: calls.append(("non-portable", f.handle)))
    text = SQRT_SIN.replace("(256, 1, 1)}", "(256, 1, 1), cluster = (16, 1, 1), non_portable_cluster = true}")
    k = jit(parse_module(text.replace("cdiv(%n, 1024), 1, 1", "16, 1, 1")))
    x, z = FakeCudaArray(0x10000, (64,)), FakeCudaArray(0x20000, (64,))
    k(x=x, z=z, n=64)
    assert calls == [("non-portable", "sqrt_sin"), ("launch", "sqrt_sin", (16, 1, 1), [(16, 1, 1)])]
    text = text.replace(", non_portable_cluster = true", "").replace("(16, 1, 1)", "(8, 1, 1)")
    portable = jit(parse_module(text.replace("cdiv(%n, 1024), 1, 1", "8, 1, 1")))
    calls.clear()
    portable(x=x, z=z, n=64)
    assert calls == [("launch", "sqrt_sin", (8, 1, 1), [(8, 1, 1)])]


def test_the_opt_in_prints_and_parses_back():
    from ptxgen.ir.text import print_module, structurally_equal

    text = SQRT_SIN.replace("cdiv(%n, 1024), 1, 1", "16, 1, 1").replace(
        "(256, 1, 1)}", "(256, 1, 1), cluster = (16, 1, 1), non_portable_cluster = true}")
    module = parse_module(text)
    printed = print_module(module)
    assert "cluster = (16, 1, 1), non_portable_cluster = true} {" in printed
    assert structurally_equal(parse_module(printed), module)
    assert parse_module(printed).kernels[0].attrs["non_portable_cluster"] is True


def test_a_grid_argument_that_is_not_a_number_is_named():
    x, z = arrays(4)
    # the interpreter checks scalar arguments before it evaluates the grid
    with pytest.raises(InterpreterError, match=r"^@sqrt_sin: argument %m must be a number$"):
        interpret(GRID_BY_M, {"x": x, "z": z, "n": 4, "m": "four"})


def test_the_interpreter_runs_clusters_of_16_with_the_opt_in():
    text = """kernel @ranks(%y: gtensor<i32, 1>) {grid = (32, 1, 1), block = (1, 1, 1), cluster = (16, 1, 1), non_portable_cluster = true} {
  %t = gpu.thread_id {dim = x} : i32
  %b = gpu.block_id {dim = x} : i32
  %r = gpu.cluster_rank : i32
  %f = frag.splat %r : frag<i32>[1]
  %g = gmem.tile %y, %b {shape = [1]} : gview<i32>[1]
  gmem.store %g, %t, %f {tv = [(1,1):(0,0)]}
}
"""
    y = np.full(32, -1, np.int32)
    interpret(parse_module(text), {"y": y})
    assert (y == np.arange(32) % 16).all()
    with pytest.raises(VerifyError, match="more than the portable 8"):
        interpret(parse_module(text.replace(", non_portable_cluster = true", "")), {"y": y})


# -- every header the verifier accepts compiles ------------------------------------------------------------------------

THREADS = """kernel @k(%x: gtensor<i32, 1>) {{grid = {grid}, block = {block}{extra}}} {{
  %tx = gpu.thread_id {{dim = x}} : i32
  %ty = gpu.thread_id {{dim = y}} : i32
  %tz = gpu.thread_id {{dim = z}} : i32
  %w = gpu.warp_id : i32
  %s0 = arith.add %tx, %ty : i32
  %s1 = arith.add %s0, %tz : i32
  %s2 = arith.add %s1, %w : i32
  %v = gmem.tile %x, %s2 {{shape = [1]}} : gview<i32>[1]
  %f = gmem.load %v, %tx {{tv = [(1,1):(0,0)]}} : frag<i32>[1]
  gmem.store %v, %tx, %f {{tv = [(1,1):(0,0)]}}
}}
"""


@pytest.mark.parametrize("grid, block, extra", [
    ("(1, 1, 1)", "(1, 1, 1)", ""),
    ("(1, 1, 1)", "(1024, 1, 1)", ""),
    ("(1, 1, 1)", "(1, 1, 64)", ""),
    ("(2147483647, 65535, 65535)", "(33, 3, 7)", ""),
    ("(16, 1, 1)", "(128, 1, 1)", ", cluster = (16, 1, 1), non_portable_cluster = true"),
])
def test_accepted_launch_attributes_compile(grid, block, extra):
    kernel = parse_module(THREADS.format(grid=grid, block=block, extra=extra)).kernels[0]
    compiled = compile_kernel(kernel)
    assert f".reqntid {block[1:-1]}" in compiled.ptx
    assert compiled.cubin[:4] == b"\x7fELF"


def test_unverified_broken_blocks_never_reach_llvm():
    """compile_kernel(verify=False) with block = (0, 1, 1) raised LLVM's abort (the whole process); now an error."""
    from ptxgen.lower.context import LoweringError

    kernel = parse_module(THREADS.format(grid="(1, 1, 1)", block="(0, 1, 1)", extra="")).kernels[0]
    with pytest.raises(LoweringError, match=r"@k: block = \(0, 1, 1\) is not a valid launch attribute"):
        compile_kernel(kernel, verify=False)
    with pytest.raises(InterpreterError, match=r"@k: block = \(0, 1, 1\) is not a valid launch attribute"):
        interpret(kernel, {"x": np.zeros(4, np.int32)}, check=False)


# -- any header value: a verdict, never another exception -------------------------------------------------------------

_leaves = st.one_of(st.integers(-2 ** 40, 2 ** 40), st.integers(0, 70), st.floats(allow_nan=True), st.booleans(),
                    st.text(max_size=3), st.none(), st.builds(Word, st.sampled_from(["threads", "x"])),
                    st.builds(np.int64, st.integers(-5, 2000)))
_names = st.sampled_from(["n", "x", "s", "q", ""])
_hosts = st.recursive(
    st.one_of(st.builds(Const, _leaves), st.builds(ParamRef, _names), st.builds(Dim, _names, _leaves)),
    lambda inner: st.builds(CDiv, inner, inner)
    | st.builds(Mul, inner, inner) | st.builds(Add, inner, inner) | st.builds(Min, inner, st.one_of(inner, _leaves)),
    max_leaves=6)
_values = st.recursive(st.one_of(_leaves, _hosts), lambda inner: st.tuples(inner, inner, inner)
                       | st.lists(inner, max_size=4).map(tuple) | st.lists(inner, max_size=3), max_leaves=8)
_keys = st.sampled_from(["grid", "block", "cluster", "non_portable_cluster", "blokc", "grdi"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=5), st.sampled_from(["k", "a.b", "9", "_", "WARP_SZ", "", "k_1"]))
def test_any_header_gets_a_verdict(attrs, name):
    """Random header values (ints, floats, booleans, strings, words, well- and ill-formed host expressions, tuples
    of any length, lists) on hand-built kernels: the verifier accepts or reports, nothing else escapes."""
    params = KernelBuilder("k", n=i32, x=gtensor("f32", 2), s=f32).finish().params
    kernel = Kernel(name, params, attrs, Region())
    try:
        verify(kernel)
    except VerifyError as e:
        assert all(loc is not None and isinstance(msg, str) and msg for loc, _op, msg in e.errors)


def test_a_block_smaller_than_the_tv_is_reported_at_the_op():
    """sqrt_sin's TV spreads each 1024-element tile over 256 threads: with 128 the upper half would never be written
    (it ran, silently, before); the error names the op, the tv and the block."""
    text = SQRT_SIN.replace("block = (256, 1, 1)", "block = (128, 1, 1)")
    with pytest.raises(VerifyError) as e:
        verify(parse_module(text, "s.tile"))
    tail = ("tv (256,4):(4,1) spreads the tile over 256 threads, but its thread operand %thread (gpu.thread_id x) runs "
            "from 0 to 127 (block = (128, 1, 1)): the elements of threads 128 to 255 would never be touched")
    assert str(e.value).split("\n") == [f"s.tile:11:3: gmem.load: {tail}", f"s.tile:14:3: gmem.store: {tail}"]
    verify(parse_module(SQRT_SIN.replace("block = (256, 1, 1)", "block = (256, 2, 1)"), "s.tile"))


def test_min_ctas_per_sm_prints_back_and_reaches_the_ptx():
    from ptxgen.ir.text import print_module
    from ptxgen.lower import compile_kernel
    text = PREFIX + "grid = (1, 1, 1), block = (256, 1, 1), min_ctas_per_sm = 4" + BODY
    module = parse_module(text, "h.tile")
    assert "min_ctas_per_sm = 4}" in print_module(module)
    assert print_module(parse_module(print_module(module))) == print_module(module)
    assert ".minnctapersm 4" in compile_kernel(module).ptx
    assert ".minnctapersm" not in compile_kernel(parse_module(PREFIX + "grid = (1, 1, 1), block = (256, 1, 1)" + BODY,
                                                              "h.tile")).ptx
