"""``frag.exp2 {ftz = true, poly = (k, n), poly_degree = d}`` (spec/tile-ir.md §4.5): value i of the fragment takes
the software exp2 of ``ptxgen.ir.exp2_poly`` (FP32-pipe instructions) where i mod n < k, the MUFU's
``ex2.approx.ftz.f32`` otherwise. The f32 steps' accuracy against float64, the interpreter's values (bit for bit
the numpy steps, the others the correctly rounded 2^x), the verifier's messages, and the PTX of each share."""
import re

import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir import exp2_poly
from ptxgen.ir.text import parse_module
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

TINY = np.finfo(np.float32).tiny


def kernel(attrs: str, values: int = 4) -> str:
    n = 32 * values
    return f"""kernel @k(%x: gtensor<f32, 1>, %y: gtensor<f32, 1>) {{grid = (1, 1, 1), block = (32, 1, 1)}} {{
  %t = gpu.thread_id {{dim = x}} : i32
  %c0 = arith.const {{value = 0}} : i32
  %xv = gmem.tile %x, %c0 {{shape = [{n}]}} : gview<f32>[{n}]
  %yv = gmem.tile %y, %c0 {{shape = [{n}]}} : gview<f32>[{n}]
  %a = gmem.load %xv, %t {{tv = [(32,{values}):({values},1)]}} : frag<f32>[{values}]
  %e = frag.exp2 %a {{{attrs}}} : frag<f32>[{values}]
  gmem.store %yv, %t, %e {{tv = [(32,{values}):({values},1)]}}
}}
"""


def run(attrs: str, x, values: int = 4):
    y = np.zeros(x.size, np.float32)
    interpret(parse_module(kernel(attrs, values), file="e.tile"), {"x": x, "y": y})
    return y


def relative_error(r, x):
    want = np.exp2(np.asarray(x, np.float64))
    return np.abs(r.astype(np.float64) / want - 1)


@pytest.mark.parametrize("degree", exp2_poly.DEGREES)
def test_polynomial_relative_error_over_a_dense_sweep(degree):
    """Below the documented bound over 2·10^6 points of [−127, 0] where 2^x is normal (x ≥ −126), over the reduced
    argument's whole range [−0.5, 0.5], and at a few positive x; degree 3 far below bf16's 2^-9 and f16's 2^-11."""
    o = exp2_poly.NumpyF32()
    bound = exp2_poly.MAX_RELATIVE_ERROR[degree]
    x = np.linspace(-127, 0, 2_000_001, dtype=np.float64).astype(np.float32)
    normal = x >= -126
    r = exp2_poly.exp2(o, x, degree)
    assert r.dtype == np.float32
    worst = relative_error(r[normal], x[normal]).max()
    assert worst < bound and worst > bound / 4   # the bound is the measured error's, not a loose one
    f = np.linspace(-0.5, 0.5, 1_000_001).astype(np.float32)
    assert relative_error(exp2_poly.exp2(o, f, degree), f).max() < bound
    positive = np.float32([1e-30, 0.3, 1, 2.5, 17.75, 100.2, 127.25])
    assert relative_error(exp2_poly.exp2(o, positive, degree), positive).max() < bound
    assert exp2_poly.MAX_RELATIVE_ERROR[3] < 2.0 ** -11 / 4


def test_exact_powers_flushes_and_overflow():
    """Integers give exact powers of two (p(0) = 1); −inf, NaN and every result below 2^-126 give +0 (ftz, as
    ex2.approx.ftz.f32); from 127.5 the result is +inf."""
    o = exp2_poly.NumpyF32()
    ints = np.arange(-126, 128).astype(np.float32)
    assert np.array_equal(exp2_poly.exp2(o, ints), np.exp2(ints.astype(np.float64)).astype(np.float32))
    low = np.float32([-np.inf, -1e30, -150, -127, -126.6, -126.25, -126.0001, np.nan])
    r = exp2_poly.exp2(o, low)
    assert np.array_equal(r, np.zeros(low.size, np.float32)) and not np.signbit(r).any()
    assert exp2_poly.exp2(o, np.float32([-126]))[0] == TINY
    assert np.isposinf(exp2_poly.exp2(o, np.float32([127.5, 128, 1e30, np.inf]))).all()


@pytest.mark.parametrize("poly, degree", [((1, 4), 3), ((3, 8), 3), ((1, 2), 5), ((4, 4), 4), ((0, 3), 3)])
def test_interpreter_takes_the_polynomial_where_i_mod_n_below_k(poly, degree):
    """Value i of each thread's 8 values takes the numpy f32 steps (bit for bit) where i mod n < k, the correctly
    rounded ftz 2^x elsewhere; both within the polynomial's bound, −inf → 0 and results below 2^-126 → 0."""
    rng = np.random.default_rng(7)
    x = (-rng.random(256) * 140).astype(np.float32)
    x[::37] = -np.inf
    x[5::41] = -126.3
    attrs = f"ftz = true, poly = ({poly[0]}, {poly[1]})" + ("" if degree == 3 else f", poly_degree = {degree}")
    y = run(attrs, x, values=8)
    index = np.arange(x.size) % 8
    chosen = index % poly[1] < poly[0]
    steps = exp2_poly.exp2(exp2_poly.NumpyF32(), x, degree)
    exact = np.exp2(x.astype(np.float64)).astype(np.float32)
    exact = np.where(exact < TINY, 0, exact).astype(np.float32)
    assert np.array_equal(y[chosen], steps[chosen])
    assert np.array_equal(y[~chosen], exact[~chosen])
    normal = x >= -126
    assert relative_error(y[normal], x[normal]).max() < exp2_poly.MAX_RELATIVE_ERROR[degree]
    assert (y[~normal] == 0).all() and (y[np.isinf(x)] == 0).all()
    if 0 < poly[0] < poly[1]:
        assert not np.array_equal(y[chosen], exact[chosen])   # the share really is the polynomial


@pytest.mark.parametrize("attrs, message", [
    ("poly = (1, 4)", "attribute 'poly' needs ftz = true (the polynomial flushes results below 2^-126 to zero, as "
                      "ex2.approx.ftz does)"),
    ("ftz = false, poly = (1, 4)", "attribute 'poly' needs ftz = true"),
    ("ftz = true, poly = (5, 4)", "attribute 'poly' must be a tuple (k, n) of integers with n ≥ 1 and 0 ≤ k ≤ n "
                                  "(value i takes the polynomial where i mod n < k), not (5, 4)"),
    ("ftz = true, poly = (1, 0)", "attribute 'poly' must be a tuple (k, n) of integers with n ≥ 1 and 0 ≤ k ≤ n "
                                  "(value i takes the polynomial where i mod n < k), not (1, 0)"),
    ("ftz = true, poly = (-1, 4)", "not (-1, 4)"),
    ("ftz = true, poly = 2", "not 2"),
    ("ftz = true, poly = (1, 2, 3)", "not (1, 2, 3)"),
    ("ftz = true, poly = (true, 2)", "not (true, 2)"),
    ("ftz = true, poly_degree = 4", "attribute 'poly_degree' needs attribute 'poly' (the share of values the "
                                    "polynomial takes)"),
    ("ftz = true, poly = (1, 2), poly_degree = 2", "attribute 'poly_degree' must be one of 3, 4, 5, not 2"),
    ("ftz = true, poly = (1, 2), poly_degree = true", "attribute 'poly_degree' must be one of 3, 4, 5, not true"),
    ("ftz = true, polynomial = (1, 2)", "unknown attribute 'polynomial' (frag.exp2 takes ftz, poly, poly_degree)"),
])
def test_verifier_names_the_attribute(attrs, message):
    with pytest.raises(VerifyError, match=r"e\.tile:7:3: frag\.exp2: .*?" + re.escape(message)):
        verify(parse_module(kernel(attrs), file="e.tile"))


@pytest.mark.parametrize("poly, degree", [((1, 4), 3), ((1, 2), 3), ((4, 4), 3), ((1, 1), 5)])
def test_ptx_of_each_share(poly, degree):
    """The polynomial's values: no ex2 but, per value, max + min, 3 f32 adds (rounding by the magic constant, j,
    f), ``degree`` fma.rn.f32, shl + add.s32 into the exponent field and one mul.rn.ftz.f32; the others one
    ex2.approx.ftz.f32 each. nvJitLink assembles it."""
    values = 8
    attrs = f"ftz = true, poly = ({poly[0]}, {poly[1]})" + ("" if degree == 3 else f", poly_degree = {degree}")
    compiled = compile_kernel(parse_module(kernel(attrs, values), file="e.tile"))
    ptx = compiled.ptx
    chosen = sum(exp2_poly.takes_poly(i, poly) for i in range(values))
    counts = {form: len(re.findall(rf"\b{re.escape(form)}\s", ptx)) for form in
              ("ex2.approx.ftz.f32", "max.f32", "min.f32", "add.rn.f32", "sub.rn.f32", "fma.rn.f32",
               "mul.rn.ftz.f32")}
    assert counts == {"ex2.approx.ftz.f32": values - chosen, "max.f32": chosen, "min.f32": chosen,
                      "add.rn.f32": 2 * chosen, "sub.rn.f32": chosen, "fma.rn.f32": degree * chosen,
                      "mul.rn.ftz.f32": chosen}
    assert "ex2.approx.f32" not in ptx and compiled.spill_bytes == 0


def test_text_round_trip_keeps_the_share():
    from ptxgen.ir.text import print_module

    module = parse_module(kernel("ftz = true, poly = (3, 8), poly_degree = 4"), file="e.tile")
    text = print_module(module)
    assert "poly = (3, 8)" in text and "poly_degree = 4" in text
    assert print_module(parse_module(text, file="e.tile")) == text


@pytest.mark.gpu
@pytest.mark.parametrize("degree", exp2_poly.DEGREES)
def test_gpu_agrees_with_the_interpreter(degree):
    """On the GPU the polynomial's values equal the numpy f32 steps within 1 ulp (numpy rounds an fma's a·b + c from
    float64: a rare double rounding), its zeros (−inf, below 2^-126) are +0 exactly; the MUFU's within 2^-21
    relative of the correctly rounded 2^x (ex2.approx.ftz.f32: 2^-22.5 in the PTX ISA)."""
    from ptxgen.runtime import gpu_available, jit_text

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    rng = np.random.default_rng(degree)
    x = np.concatenate([-rng.random(4096 - 64) * 130, rng.random(48) * 8, np.full(8, -np.inf),
                        np.float32([-126, -126.3, -127, -0.5, 0.5, 0, -1, -125.5])]).astype(np.float32)
    y = np.zeros(x.size, np.float32)
    jit_text(kernel(f"ftz = true, poly = (1, 2), poly_degree = {degree}", values=128))(x=x, y=y)
    chosen = np.arange(x.size) % 2 == 0
    steps = exp2_poly.exp2(exp2_poly.NumpyF32(), x, degree)
    ulps = np.abs(y.view(np.int32).astype(np.int64) - steps.view(np.int32).astype(np.int64))
    assert ulps[chosen].max() <= 1
    assert np.array_equal(y[chosen & (steps == 0)], steps[chosen & (steps == 0)])
    exact = np.exp2(x.astype(np.float64))
    normal = ~chosen & (exact >= TINY)
    assert (np.abs(y[normal] / exact[normal] - 1) < 2.0 ** -21).all()
    assert (y[~chosen & (exact < TINY)] == 0).all()
