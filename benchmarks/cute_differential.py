"""A random differential campaign of layoutc against CuTe C++ itself (a dev tool, run by hand; never a dependency).

For each operation family it draws random inputs with a seeded RNG, writes one C++ translation unit per batch (each
case prints ``<id> <result>`` with ``cute::print``), compiles it with g++ against the CuTe headers of the
``nvidia-cutlass`` wheel, runs it, computes the same with layoutc and reports every difference: a different result,
layoutc raising where CuTe gives a result, and layoutc giving a result where CuTe refuses to compile (the
``static_assert`` g++ reports for that case). All integers are static (``Int<N>{}``), so CuTe prints ``_N``; the
underscores are dropped before comparing with layoutc's notation.

    python benchmarks/cute_differential.py --seed 19 --cases 120 --families all --freeze /tmp/frozen.json

``--freeze`` writes the cases (inputs in CuTe notation, CuTe's printed result or its refusal) as JSON, the source of
``tests/layoutc/test_cute_differential.py``'s regression data.
"""
import argparse
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import layoutc as lc  # noqa: E402
from layoutc import Layout, LayoutError  # noqa: E402

# CuTe's headers as the nvidia-cutlass wheel installs them (found without importing the package; None without it:
# the tool then cannot compile, but its replay, which the frozen tests use, still imports)
_CUTLASS = importlib.util.find_spec("cutlass_library")
INCLUDE = Path(_CUTLASS.submodule_search_locations[0]) / "source/include" if _CUTLASS else None
# cute/util/debug.hpp includes cuda_runtime_api.h, cutlass.h includes <cuda/std/...> (CCCL, under include/cccl)
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
HEADER = """#include <cstdio>
#include <cute/tensor.hpp>
using namespace cute;
static int buf[1];
int main() {
"""


# -- C++ spelling of layoutc values ------------------------------------------------------------------------------

def cpp_tuple(t, maker="make_shape"):
    if isinstance(t, tuple):
        return f"{maker}({', '.join(cpp_tuple(x, maker) for x in t)})"
    return f"Int<{t}>{{}}"


def cpp_layout(L: Layout) -> str:
    return f"make_layout({cpp_tuple(L.shape)}, {cpp_tuple(L.stride, 'make_stride')})"


def cpp_tiler(t) -> str:
    if isinstance(t, Layout):
        return cpp_layout(t)
    if isinstance(t, tuple):
        return f"make_tile({', '.join(cpp_tiler(x) for x in t)})"
    return f"Int<{t}>{{}}"


def note(x) -> str:
    """CuTe notation of an input, as layoutc's parser reads it back."""
    if isinstance(x, Layout):
        return str(x)
    if isinstance(x, tuple):
        return "(" + ",".join(note(e) for e in x) + ")"
    return str(x)


# -- random inputs ----------------------------------------------------------------------------------------------

def group_leaves(rng, leaves):
    """Nest a flat list into a random profile of rank 1-3, depth <= 2."""
    n = len(leaves)
    if n == 1 and rng.random() < 0.5:
        return leaves[0]
    rank = rng.randint(1, min(3, n))
    cuts = sorted(rng.sample(range(1, n), rank - 1)) if rank > 1 else []
    parts, prev = [], 0
    for c in cuts + [n]:
        chunk = leaves[prev:c]
        parts.append(chunk[0] if len(chunk) == 1 and rng.random() < 0.7 else tuple(chunk))
        prev = c
    return tuple(parts)


def shape_like(profile, leaves):
    it = iter(leaves)

    def walk(p):
        return tuple(walk(x) for x in p) if isinstance(p, tuple) else next(it)
    return walk(profile)


def random_layout(rng, max_leaves=4) -> Layout:
    n = rng.randint(1, max_leaves)
    shapes = [rng.randint(1, 8) for _ in range(n)]
    strides = [rng.choice([0, 1, 2, rng.randint(0, 32)]) for _ in range(n)]
    prof = group_leaves(rng, list(range(n)))
    return Layout(shape_like(prof, shapes), shape_like(prof, strides))


def random_injective(rng, max_leaves=4, gaps=True, zeros=True) -> Layout:
    """A compact column-major layout with random gaps between modes, its leaves permuted and regrouped."""
    n = rng.randint(1, max_leaves)
    shapes = [rng.randint(1, 8) for _ in range(n)]
    strides, span = [], 1
    for s in shapes:
        span *= rng.choice([1, 1, 2, 3]) if gaps else 1
        strides.append(span)
        span *= s
    strides = [0 if s == 1 and zeros and rng.random() < 0.5 else d for s, d in zip(shapes, strides)]
    order = list(range(n))
    rng.shuffle(order)
    prof = group_leaves(rng, list(range(n)))
    return Layout(shape_like(prof, [shapes[i] for i in order]), shape_like(prof, [strides[i] for i in order]))


def random_compact(rng, rank=None) -> Layout:
    rank = rank or rng.randint(1, 3)
    shp = tuple(rng.choice([1, 2, 2, 4, 4, 8, 3]) for _ in range(rank))
    L = lc.make_layout(shp) if rng.random() < 0.5 else lc.make_layout(shp, lc.LayoutRight)
    return L


def leaves(t):
    return [y for x in t for y in leaves(x)] if isinstance(t, tuple) else [t]


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def random_tiler(rng, L: Layout, nice=0.8):
    """A tiler for L: per mode an int dividing the mode's size or a small layout (mostly valid, sometimes not)."""
    ms = lc.modes(L)
    if rng.random() < 0.1:  # a bare int: make_layout(n) in the divides and products, n:1 in composition
        return rng.choice(divisors(lc.size(L))) if rng.random() < nice else rng.randint(1, 8)
    if rng.random() < 0.15:
        return random_injective(rng, 2, zeros=False) if rng.random() < nice else random_layout(rng, 2)
    k = rng.randint(1, len(ms))
    out = []
    for m in ms[:k]:
        sz = lc.size(m)
        r = rng.random()
        if r < 0.5:
            out.append(rng.choice(divisors(sz)) if rng.random() < nice else rng.randint(1, 8))
        elif r < 0.85:
            d = rng.choice(divisors(sz))
            out.append(Layout(d, rng.choice([1, 1, sz // d])) if rng.random() < nice else random_layout(rng, 1))
        else:
            out.append(random_injective(rng, 2, zeros=False))
    return tuple(out)


# -- the families -----------------------------------------------------------------------------------------------
# each draws ([layoutc function, its arguments in CuTe notation...], C++ expression printing the result)

def fam_coalesce(rng):
    L = random_layout(rng)
    if rng.random() < 0.5:
        return ["coalesce", note(L)], f"coalesce({cpp_layout(L)})"
    ms = lc.modes(L)
    prof = tuple(1 if rng.random() < 0.6 or lc.rank(m) == 1 else (1,) * rng.randint(1, lc.rank(m))
                 for m in ms[:rng.randint(1, len(ms))])
    return ["coalesce", note(L), note(prof)], f"coalesce({cpp_layout(L)}, {cpp_tuple(prof)})"


def fam_composition(rng):
    A = random_layout(rng)
    if rng.random() < 0.3:
        t = random_tiler(rng, A)
        return ["composition", note(A), note(t)], f"composition({cpp_layout(A)}, {cpp_tiler(t)})"
    B = random_injective(rng, 3) if rng.random() < 0.5 else random_layout(rng, 3)
    return ["composition", note(A), note(B)], f"composition({cpp_layout(A)}, {cpp_layout(B)})"


def fam_complement(rng):
    L = random_injective(rng) if rng.random() < 0.85 else random_layout(rng)
    if rng.random() < 0.4:
        return ["complement", note(L)], f"complement({cpp_layout(L)})"
    T = rng.randint(1, 160) if rng.random() < 0.7 else (rng.randint(1, 12), rng.randint(1, 12))
    return ["complement", note(L), note(T)], f"complement({cpp_layout(L)}, {cpp_tuple(T)})"


def fam_right_inverse(rng):
    L = random_injective(rng) if rng.random() < 0.5 else random_layout(rng)
    return ["right_inverse", note(L)], f"right_inverse({cpp_layout(L)})"


def fam_left_inverse(rng):
    L = random_injective(rng) if rng.random() < 0.85 else random_layout(rng)
    return ["left_inverse", note(L)], f"left_inverse({cpp_layout(L)})"


def _divide(name):
    def fam(rng):
        L = random_layout(rng) if rng.random() < 0.5 else random_injective(rng)
        t = random_tiler(rng, L)
        return [name, note(L), note(t)], f"{name}({cpp_layout(L)}, {cpp_tiler(t)})"
    fam.__name__ = "fam_" + name
    return fam


def _product(name):
    def fam(rng):
        L = random_layout(rng, 3) if rng.random() < 0.5 else random_injective(rng, 3)
        if name in ("blocked_product", "raked_product") or rng.random() < 0.4:
            t = random_compact(rng) if rng.random() < 0.6 else random_injective(rng, 3)
        else:
            t = tuple(random_compact(rng, 1) if rng.random() < 0.7 else rng.randint(1, 4)
                      for _ in range(rng.randint(1, lc.rank(L))))
        return [name, note(L), note(t)], f"{name}({cpp_layout(L)}, {cpp_tiler(t)})"
    fam.__name__ = "fam_" + name
    return fam


def fam_max_common(rng):
    A = random_layout(rng)
    r = rng.random()
    if r < 0.4:
        B = lc.make_layout(A.shape) if rng.random() < 0.5 else lc.make_layout(A.shape, lc.LayoutRight)
    elif r < 0.7:
        B = Layout(A.shape, shape_like(A.shape, [rng.choice([0, 1, 2, 4, 8, 16]) for _ in leaves(A.shape)]))
    else:
        B = A
    if rng.random() < 0.5:
        return (["max_common_layout", note(A), note(B)], f"max_common_layout({cpp_layout(A)}, {cpp_layout(B)})")
    return (["max_common_vector", note(A), note(B)], f"max_common_vector({cpp_layout(A)}, {cpp_layout(B)})")


def fam_recast(rng):
    L = random_layout(rng)
    n = rng.choice([1, 2, 4, 8])
    if rng.random() < 0.5:
        return ["upcast", note(L), str(n)], f"upcast<{n}>({cpp_layout(L)})"
    return ["downcast", note(L), str(n)], f"downcast<{n}>({cpp_layout(L)})"


def fam_local_tile(rng):
    L = random_injective(rng) if rng.random() < 0.7 else random_layout(rng)
    if rng.random() < 0.5:
        t = tuple(rng.choice(divisors(lc.size(m))) for m in lc.modes(L))
    else:
        t = random_tiler(rng, L)
    try:
        rest = lc.zipped_divide(L, t)[1]
        coord = (rng.randrange(lc.size(rest)) if rng.random() < 0.4 else
                 tuple(rng.randrange(lc.size(m)) for m in lc.modes(rest)))
    except LayoutError:
        coord = 0
    cpp = (f"[&]{{ auto T = make_tensor(&buf[0], {cpp_layout(L)}); auto R = local_tile(T, {cpp_tiler(t)}, "
           f"{cpp_tuple(coord, 'make_coord')}); print(R.layout()); printf(\" %ld\", (long)(R.data() - &buf[0])); "
           f"return 0; }}()")

    return ["local_tile", note(L), note(t), note(coord)], cpp


def fam_local_partition(rng):
    L = random_injective(rng) if rng.random() < 0.7 else random_layout(rng)
    r = lc.rank(L)
    thr = random_compact(rng, r if rng.random() < 0.8 else rng.randint(1, r))
    idx = rng.randrange(lc.size(thr))
    cpp = (f"[&]{{ auto T = make_tensor(&buf[0], {cpp_layout(L)}); auto R = local_partition(T, {cpp_layout(thr)}, "
           f"Int<{idx}>{{}}); print(R.layout()); printf(\" %ld\", (long)(R.data() - &buf[0])); return 0; }}()")

    return ["local_partition", note(L), note(thr), str(idx)], cpp


def fam_make_layout_tv(rng):
    thr = random_compact(rng, 2)
    val = random_compact(rng, 2)
    # CuTe C++ 4.2 has no free make_layout_tv; make_tiled_copy builds the same pair this way (copy_atom.hpp)
    cpp = (f"[&]{{ auto thr = {cpp_layout(thr)}; auto val = {cpp_layout(val)}; "
           f"auto mn = raked_product(thr, val); print(product_each(shape(mn))); printf(\" \"); "
           f"print(right_inverse(mn).with_shape(make_shape(size(thr), size(val)))); return 0; }}()")

    return ["make_layout_tv", note(thr), note(val)], cpp


def fam_tile_to_shape(rng):
    B = random_injective(rng, 3) if rng.random() < 0.7 else random_compact(rng)
    r = lc.rank(B) + rng.randint(0, 1)
    sizes = [lc.size(m) for m in lc.modes(B)] + [1] * (r - lc.rank(B))
    target = tuple(s * rng.choice([1, 2, 3, 4]) if rng.random() < 0.9 else rng.randint(1, 16) for s in sizes)
    if rng.random() < 0.5:
        return (["tile_to_shape", note(B), note(target)], f"tile_to_shape({cpp_layout(B)}, {cpp_tuple(target)})")
    return (["tile_to_shape", note(B), note(target), "LayoutRight"],
            f"tile_to_shape({cpp_layout(B)}, {cpp_tuple(target)}, LayoutRight{{}})")


def fam_identity(rng):
    shp = random_layout(rng).shape
    I = lc.make_identity_layout(shp)
    r = rng.random()
    if r < 0.3:
        return ["make_identity_layout", note(shp)], f"make_identity_layout({cpp_tuple(shp)})"
    t = random_tiler(rng, I)
    op = "logical_divide" if r < 0.55 else "zipped_divide" if r < 0.8 else "composition"
    return [op, note(I), note(t)], f"{op}(make_identity_layout({cpp_tuple(shp)}), {cpp_tiler(t)})"


def nested_tiler(rng, L: Layout):
    """A tiler following L's nesting: a tuple for a tuple mode, with a divisor or a layout per sub-mode."""
    def per(m):
        if lc.rank(m) > 1 and rng.random() < 0.7:
            return tuple(per(x) for x in lc.modes(m)[:rng.randint(1, lc.rank(m))])
        d = rng.choice(divisors(lc.size(m)))
        return d if rng.random() < 0.6 else Layout(d, rng.choice([1, lc.size(m) // d]))
    return tuple(per(m) for m in lc.modes(L)[:rng.randint(1, lc.rank(L))])


def fam_nested_divide(rng):
    L = random_injective(rng, 5) if rng.random() < 0.5 else random_layout(rng, 5)
    t = nested_tiler(rng, L)
    op = rng.choice(["logical_divide", "zipped_divide", "tiled_divide", "flat_divide", "composition",
                     "logical_product"])
    return [op, note(L), note(t)], f"{op}({cpp_layout(L)}, {cpp_tiler(t)})"


def fam_composition_aligned(rng):
    """A ∘ B where B mostly respects A's mode boundaries: A compact over power-of-two shapes."""
    n = rng.randint(1, 4)
    A = random_injective(rng, n) if rng.random() < 0.5 else Layout(
        tuple(rng.choice([1, 2, 4, 8]) for _ in range(n)),
        tuple(rng.choice([0, 1, 2, 4, 8, 16, 32]) for _ in range(n)))
    size_a = lc.size(A)
    shapes, strides, span = [], [], 1
    for _ in range(rng.randint(1, 3)):
        s = rng.choice([1, 2, 2, 4])
        d = span * rng.choice([1, 1, 2])
        if d * s > size_a and rng.random() < 0.8:
            break
        shapes.append(s)
        strides.append(d)
        span = d * s
    if not shapes:
        shapes, strides = [1], [0]
    order = list(range(len(shapes)))
    rng.shuffle(order)
    B = Layout(tuple(shapes[i] for i in order), tuple(strides[i] for i in order)) if len(shapes) > 1 else \
        Layout(shapes[0], strides[0])
    return ["composition", note(A), note(B)], f"composition({cpp_layout(A)}, {cpp_layout(B)})"


def _step(proj):
    return "Step<" + ",".join("X" if p is lc._ else "_1" for p in proj) + ">{}"


def fam_projected_partition(rng):
    """local_tile / local_partition with a projection (CuTe's Step<_1,X,_1>), as a GEMM's A, B and C use them."""
    r = rng.randint(2, 3)
    proj = tuple(lc._ if rng.random() < 0.35 else 1 for _ in range(r))
    if all(p is lc._ for p in proj):
        proj = (1,) + proj[1:]
    kept = sum(p is not lc._ for p in proj)
    L = Layout(tuple(rng.choice([2, 4, 6, 8, 16]) for _ in range(kept)),
               tuple(rng.choice([0, 1, 2, 4, 8, 16, 32]) for _ in range(kept))) if kept > 1 else \
        Layout(rng.choice([2, 4, 8, 16]), rng.choice([1, 2, 4]))
    sizes = [lc.size(m) for m in lc.modes(L)] if kept > 1 else [lc.size(L)]
    if rng.random() < 0.5:
        tiles = iter(sizes)
        tiler = tuple(rng.choice(divisors(next(tiles))) if p is not lc._ else rng.randint(1, 8) for p in proj)
        coord = tuple(rng.randint(0, 1) if p is not lc._ else rng.randint(0, 3) for p in proj)
        cpp = (f"[&]{{ auto T = make_tensor(&buf[0], {cpp_layout(L)}); auto R = local_tile(T, {cpp_tuple(tiler)}, "
               f"{cpp_tuple(coord, 'make_coord')}, {_step(proj)}); print(R.layout()); "
               f"printf(\" %ld\", (long)(R.data() - &buf[0])); return 0; }}()")

        return ["local_tile", note(L), note(tiler), note(coord), note(proj)], cpp
    thr = random_compact(rng, r)
    idx = rng.randrange(lc.size(thr))
    cpp = (f"[&]{{ auto T = make_tensor(&buf[0], {cpp_layout(L)}); auto R = local_partition(T, {cpp_layout(thr)}, "
           f"Int<{idx}>{{}}, {_step(proj)}); print(R.layout()); printf(\" %ld\", (long)(R.data() - &buf[0])); "
           f"return 0; }}()")

    return ["local_partition", note(L), note(thr), str(idx), note(proj)], cpp


def fam_swizzled(rng):
    """Operations on Sw<B,M,S> o off o L (CuTe's make_composed_layout)."""
    b, m = rng.randint(0, 3), rng.randint(0, 4)
    sh = rng.randint(max(b, 1), 4)
    L = random_injective(rng, 3, zeros=False)
    off = rng.choice([0, 0, 0, 8, 16, 32])
    C = lc.ComposedLayout(lc.Swizzle(b, m, sh), off, L)
    # make_composed_layout keeps an identity swizzle Sw<0,M,S>; composition(Sw, off, L) would drop it
    cppC = f"make_composed_layout(Swizzle<{b},{m},{sh}>{{}}, Int<{off}>{{}}, {cpp_layout(L)})"
    r = rng.random()
    if r < 0.3:
        t = random_tiler(rng, L)
        op = rng.choice(["logical_divide", "zipped_divide", "composition", "logical_product"])
        return [op, note(C), note(t)], f"{op}({cppC}, {cpp_tiler(t)})"
    if r < 0.5:
        n = rng.choice([2, 4])
        op = rng.choice(["upcast", "downcast"])
        return [op, note(C), str(n)], f"{op}<{n}>({cppC})"
    if r < 0.7:
        # not drawn: right_inverse / left_inverse of a ComposedLayout (layoutc refuses them, spec §6.4) and filter
        # (CuTe has none for a ComposedLayout; layoutc applies it to the inner layout, spec §3.12)
        return ["coalesce", note(C)], f"coalesce({cppC})"
    if r < 0.85:
        B = random_compact(rng, 1) if rng.random() < 0.5 else Layout(rng.choice([2, 4, 8]), rng.choice([1, 2]))
        return ["composition", note(C), note(B)], f"composition({cppC}, {cpp_layout(B)})"
    A = random_injective(rng, 3, zeros=False)
    return ["composition", note(A), note(C)], f"composition({cpp_layout(A)}, {cppC})"


def fam_identity_partition(rng):
    """local_tile / local_partition of make_identity_tensor(shape): the offset is a coordinate (CuTe's ArithTuple)."""
    shp = tuple(rng.choice([2, 4, 6, 8, 12, 16]) for _ in range(rng.randint(1, 3)))
    I = lc.make_identity_layout(shp)
    head = f"[&]{{ auto T = make_identity_tensor({cpp_tuple(shp)}); auto R = "
    tail = "; print(R.layout()); printf(\" \"); print(R.data()); return 0; }()"
    if rng.random() < 0.5:
        tiler = tuple(rng.choice(divisors(s)) for s in shp[:rng.randint(1, len(shp))])
        coord = tuple(rng.randrange(s // t) for s, t in zip(shp, tiler))
        coord = coord if len(coord) > 1 or rng.random() < 0.5 else coord[0]
        return (["local_tile", note(I), note(tiler), note(coord)],
                head + f"local_tile(T, {cpp_tuple(tiler)}, {cpp_tuple(coord, 'make_coord')})" + tail)
    thr = random_compact(rng, len(shp))
    idx = rng.randrange(lc.size(thr))
    return (["local_partition", note(I), note(thr), str(idx)],
            head + f"local_partition(T, {cpp_layout(thr)}, Int<{idx}>{{}})" + tail)


def fam_wide(rng):
    """Any of the algebra's binary and unary operations on layouts of up to 6 leaves (rank <= 3, depth <= 2)."""
    L = random_layout(rng, 6) if rng.random() < 0.5 else random_injective(rng, 6)
    op = rng.choice(["coalesce", "right_inverse", "left_inverse", "complement", "composition", "logical_divide",
                     "zipped_divide", "logical_product", "blocked_product", "raked_product", "max_common_layout",
                     "max_common_vector", "upcast", "downcast"])
    if op in ("coalesce", "right_inverse", "left_inverse", "complement"):
        return [op, note(L)], f"{op}({cpp_layout(L)})"
    if op in ("upcast", "downcast"):
        n = rng.choice([2, 4])
        return [op, note(L), str(n)], f"{op}<{n}>({cpp_layout(L)})"
    if op in ("max_common_layout", "max_common_vector"):
        B = Layout(L.shape, shape_like(L.shape, [rng.choice([0, 1, 2, 4, 8]) for _ in leaves(L.shape)])) \
            if rng.random() < 0.5 else lc.make_layout(L.shape, rng.choice([lc.LayoutLeft, lc.LayoutRight]))
        return [op, note(L), note(B)], f"{op}({cpp_layout(L)}, {cpp_layout(B)})"
    if op in ("blocked_product", "raked_product", "composition") and rng.random() < 0.6:
        t = random_injective(rng, 4) if rng.random() < 0.5 else random_compact(rng)
    else:
        t = nested_tiler(rng, L) if rng.random() < 0.5 else random_tiler(rng, L)
    return [op, note(L), note(t)], f"{op}({cpp_layout(L)}, {cpp_tiler(t)})"


FAMILIES = {
    "coalesce": fam_coalesce, "composition": fam_composition, "complement": fam_complement,
    "right_inverse": fam_right_inverse, "left_inverse": fam_left_inverse,
    **{n: _divide(n) for n in ("logical_divide", "zipped_divide", "tiled_divide", "flat_divide")},
    **{n: _product(n) for n in ("logical_product", "zipped_product", "tiled_product", "flat_product",
                                "blocked_product", "raked_product")},
    "max_common": fam_max_common, "recast": fam_recast, "local_tile": fam_local_tile,
    "local_partition": fam_local_partition, "make_layout_tv": fam_make_layout_tv, "tile_to_shape": fam_tile_to_shape,
    "identity": fam_identity, "nested_divide": fam_nested_divide, "composition_aligned": fam_composition_aligned,
    "projected_partition": fam_projected_partition, "swizzled": fam_swizzled,
    "identity_partition": fam_identity_partition, "wide": fam_wide,
}


def replay(call: str, args: list) -> str:
    """layoutc's answer to a case, from its function name and its arguments in CuTe notation (``_`` for CuTe's X in
    a projection, ``LayoutRight`` for tile_to_shape's order); the frozen tests replay cases the same way."""
    values = [lc.LayoutRight if a == "LayoutRight" else lc.parse(a) for a in args]
    result = getattr(lc, call)(*values)
    if call in ("local_tile", "local_partition"):
        return f"{result[0]} {lc.to_str(result[1])}"
    if call == "make_layout_tv":
        return f"{lc.to_str(result[0])} {result[1]}"
    return lc.to_str(result) if isinstance(result, (int, tuple)) else str(result)


# -- compile, run, compare --------------------------------------------------------------------------------------

def emit(cases) -> tuple:
    lines, owner = [HEADER], {}
    for i, (_inp, cpp) in enumerate(cases):
        if cpp is None:
            continue
        first = sum(x.count("\n") for x in lines) + 1
        # an immediately called lambda prints its own result; any other expression is printed with cute::print
        shown = cpp if cpp.startswith("[&]") else f"print({cpp})"
        body = f"  {{ printf(\"{i} \"); {shown}; printf(\"\\n\"); fflush(stdout); }}\n"
        lines.append(body)
        owner[first] = i
    lines.append("  return 0;\n}\n")
    return "".join(lines), owner


def cute_results(cases, workdir: Path, tag: str) -> dict:
    """Case id -> ('ok', printed) or ('refused', g++'s first error of that case)."""
    if INCLUDE is None:
        raise SystemExit("cute_differential: CuTe's headers come with the nvidia-cutlass wheel: pip install nvidia-cutlass")
    out, live = {}, list(cases)
    for attempt in range(6):
        src, owner = emit(live)
        cpp = workdir / f"{tag}.cpp"
        exe = workdir / f"{tag}.out"
        cpp.write_text(src)
        p = subprocess.run(["g++", "-std=c++17", "-O0", "-fmax-errors=0", f"-I{INCLUDE}", f"-I{CUDA_INCLUDE}",
                            f"-I{CUDA_INCLUDE}/cccl", str(cpp), "-o", str(exe)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            bad, current = {}, None
            for line in p.stderr.splitlines():
                m = re.match(rf"{re.escape(str(cpp))}:(\d+):", line)
                if m and int(m.group(1)) in owner:
                    current = owner[int(m.group(1))]
                    if "error:" in line:
                        bad.setdefault(current, line.split("error:", 1)[1].strip())
                    else:
                        bad.setdefault(current, None)
                elif "error:" in line and current is not None and bad.get(current) is None:
                    bad[current] = line.split("error:", 1)[1].strip()
            if not bad:
                raise RuntimeError(p.stderr[-4000:])
            for i, msg in bad.items():
                out[i] = ("refused", msg or "error")
                live[i] = (live[i][0], None)
            continue
        r = subprocess.run([str(exe)], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            i, _, val = line.partition(" ")
            if val:
                out[int(i)] = ("ok", normal(val))
        if r.returncode != 0:  # a run-time failure (CuTe's division by zero): the first unanswered case crashed
            pending = [i for i, c in enumerate(live) if c[1] is not None and i not in out]
            if not pending:
                break
            out[pending[0]] = ("refused", f"run-time failure (exit {r.returncode})")
            live = [(c[0], None if i in out else c[1]) for i, c in enumerate(live)]  # run only what is left
            continue
        break
    return out


def normal(s: str) -> str:
    """CuTe's printed form in layoutc's notation: static integers lose their _, a coordinate iterator its ArithTuple."""
    return s.replace("_", "").replace("ArithTuple", "").strip()


def canonical(s: str) -> str:
    # parse both through layoutc's notation where possible so spacing cannot differ
    parts = s.split(" ")
    try:
        return " ".join(str(lc.parse(p)) for p in parts)
    except Exception:
        return s


def run_family(name, fam, rng, n, workdir, frozen, report):
    cases = [fam(rng) for _ in range(n)]
    cute = cute_results(cases, workdir, name)
    counts = {"ok": 0, "refused-both": 0, "mismatch": 0, "other-condition": 0}
    for i, (inp, _cpp) in enumerate(cases):
        kind, val = cute.get(i, ("missing", ""))
        try:
            mine, err = replay(inp[0], inp[1:]), None
        except LayoutError as e:
            mine, err = None, str(e)
        except Exception as e:  # a crash of layoutc is a mismatch too
            mine, err = None, f"{type(e).__name__}: {e}"
        entry = {"family": name, "call": inp[0], "args": inp[1:], "cute": val if kind == "ok" else None,
                 "refused": val if kind != "ok" else None}
        if kind == "ok" and err is None and canonical(normal(val)) == canonical(mine):
            counts["ok"] += 1
        elif kind != "ok" and err is not None and not err.startswith(("TypeError", "AttributeError", "Index")):
            counts["refused-both"] += 1
            entry["layoutc_error"] = err
            condition = (val or "").partition("static assertion failed: ")[2].rstrip(".")
            if condition and condition not in err:  # layoutc refuses, but not naming CuTe's condition
                counts["other-condition"] += 1
                entry["condition_differs"] = True
                report.append(entry)
        else:
            counts["mismatch"] += 1
            entry["layoutc"] = mine if err is None else f"raised: {err}"
            report.append(entry)
        frozen.append(entry)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--cases", type=int, default=120, help="cases per family (one translation unit each)")
    ap.add_argument("--families", default="all", help="comma-separated names, or all: " + ", ".join(FAMILIES))
    ap.add_argument("--freeze", help="write every case and CuTe's answer to this JSON file")
    args = ap.parse_args()
    names = list(FAMILIES) if args.families == "all" else args.families.split(",")
    frozen, report = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rng = random.Random(f"{args.seed}-{name}")
            c = run_family(name, FAMILIES[name], rng, args.cases, Path(tmp), frozen, report)
            print(f"{name:18s} ok {c['ok']:4d}  refused by both {c['refused-both']:4d}  mismatches {c['mismatch']:4d}  "
              f"refusals naming another condition {c['other-condition']:4d}",
                  flush=True)
    for e in report:
        print(json.dumps(e))
    if args.freeze:
        Path(args.freeze).write_text(json.dumps(frozen, indent=0))
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
