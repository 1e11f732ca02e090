"""A kernel's header: its name and launch attributes (spec/tile-ir.md §3) — their rules, their (x, y, z) values and
the grid's evaluation at launch.

    kernel @k(%x: gtensor<f32, 1>, %n: i32) {grid = (cdiv(%n, 1024), 1, 1), block = (256, 1, 1)} { ... }

- ``grid = (e, e, e)`` (required): three host expressions (``ptxgen.ir.hostexpr``) over the kernel's integer
  parameters and its tensor parameters' extents, evaluated per launch (``evaluate_grid``);
- ``block = (x, y, z)`` (required): the CTA's threads, three integer literals (static: compiled in as ``.reqntid``);
- ``cluster = (x, y, z)``: CTAs per cluster, three integer literals; default ``(1, 1, 1)``;
- ``non_portable_cluster = true``: allows clusters of 9 to 16 CTAs (CUDA's non-portable cluster sizes; the launcher
  sets ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED``); default ``false``;
- ``min_ctas_per_sm = k``: the compiler keeps the registers low enough for k CTAs per SM (PTX ``.minnctapersm k``,
  CUDA's ``__launch_bounds__`` second argument): an integer literal with k · block threads ≤ 2048 (an SM's threads).

``check(kernel, v)`` is the verifier's rule for the header; the interpreter, the lowering and the launcher read a
verified kernel through ``block_dims``, ``cluster_dims``, ``non_portable_cluster`` and ``evaluate_grid``.
"""
from __future__ import annotations

import numbers
import re

import layoutc as lc
from layoutc.notation import to_str

from .core import walk
from .hostexpr import HOST_EXPRS, CDiv, Const, Dim, HostExpr, HostExprError, ParamRef, Word
from .suggest import did_you_mean
from .types import GlobalTensorType, ScalarType, TensorMapType

ATTRIBUTES = ("grid", "block", "cluster", "non_portable_cluster", "min_ctas_per_sm")
SM_THREADS = 2048  # threads one Hopper SM holds at once
AXES = "xyz"
MAX_BLOCK_THREADS = 1024                    # threads per CTA
WARPGROUP = 128                             # threads per warpgroup (gpu.roles assigns whole ones)
BLOCK_LIMITS = (1024, 1024, 64)             # threads per CTA along x, y, z
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)   # CTAs per grid along x, y, z
PORTABLE_CLUSTER = 8                        # CTAs per cluster any launch may ask for
MAX_CLUSTER = 16                            # with the non-portable opt-in (Hopper)
HOST_INT_TYPES = ("i32", "u32", "i64", "u64")
# PTX identifiers (PTX ISA §4.4) that the text form can also write: a letter, or _ and at least one more character
_PTX_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+")
# names ptxas refuses as identifiers although they match the pattern (tried: every other PTX keyword assembles)
PTX_RESERVED = frozenset({"WARP_SZ"})


class LaunchAttributeError(ValueError):
    """A launch attribute cannot be used: malformed (the kernel was not verified) or, at launch, evaluated to a grid
    the hardware cannot run for the arguments given. The message names the attribute and the expression in IR text:
    ``grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m) divides by %m = 0``."""


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def show(value) -> str:
    """A launch attribute value in the text form's notation: ``show((256, 1, 1)) == "(256, 1, 1)"``,
    ``show(True) == "true"``. Post: never a Python repr of a tuple or an IR class."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple):
        return "(" + ", ".join(show(x) for x in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(show(x) for x in value) + "]"
    return str(value)


def _ctas(n: int) -> str:
    return f"{n} CTA{'' if n == 1 else 's'}"


def _kind(x) -> str:
    """What ``x`` is, for an error saying it is not an integer: ``"the float 256.0"``, ``"the bare word threads"``."""
    if isinstance(x, bool):
        return f"the boolean {show(x)}"
    if isinstance(x, numbers.Integral):
        return f"the integer {show(x)}"
    if isinstance(x, numbers.Real):
        return f"the float {show(x)}"
    if isinstance(x, str):
        return f"the string {show(x)}"
    if isinstance(x, Word):
        return f"the bare word {x}"
    if isinstance(x, HostExpr):
        return f"the host expression {x}"
    if isinstance(x, (tuple, list)):
        return f"the tuple {show(tuple(x))}"
    return f"{show(x)} (a {type(x).__name__})"


def static_triple(value):
    """(x, y, z) of a block or cluster attribute value that is three integers ≥ 1, else None:
    ``static_triple((256, 1, 1)) == (256, 1, 1)``, ``static_triple((0, 1, 1)) is None``."""
    if isinstance(value, tuple) and len(value) == 3 and all(_is_int(x) and x >= 1 for x in value):
        return tuple(int(x) for x in value)
    return None


# -- accessors for verified kernels ------------------------------------------------------------------------------------

def _malformed(kernel, key: str) -> LaunchAttributeError:
    value = kernel.attrs.get(key)
    written = f"{key} = {show(value)}" if value is not None else f"the missing {key}"
    return LaunchAttributeError(f"@{kernel.name}: {written} is not a valid launch attribute (verify the kernel: the "
                                "verifier says why)")


def block_dims(kernel) -> tuple:
    """The CTA's threads (x, y, z) of a verified kernel: ``block = (384, 1, 1)`` → ``(384, 1, 1)``.
    Raises LaunchAttributeError for a block the verifier refuses."""
    dims = static_triple(kernel.attrs.get("block"))
    if dims is None:
        raise _malformed(kernel, "block")
    return dims


def cluster_dims(kernel) -> tuple:
    """CTAs per cluster (x, y, z) of a verified kernel: ``cluster = (2, 1, 1)`` → ``(2, 1, 1)``; ``(1, 1, 1)``
    without the attribute. Raises LaunchAttributeError for a cluster the verifier refuses."""
    value = kernel.attrs.get("cluster")
    if value is None:
        return (1, 1, 1)
    dims = static_triple(value)
    if dims is None:
        raise _malformed(kernel, "cluster")
    return dims


def non_portable_cluster(kernel) -> bool:
    """Whether the kernel opts in to clusters of more than 8 CTAs (``non_portable_cluster = true``)."""
    return kernel.attrs.get("non_portable_cluster", False) is True


def min_ctas_per_sm(kernel) -> int | None:
    """The CTAs per SM the kernel asks the compiler to fit (``min_ctas_per_sm = k``), None when it does not ask."""
    value = kernel.attrs.get("min_ctas_per_sm")
    return value if type(value) is int else None


def grid_exprs(kernel) -> tuple:
    """The grid's three host expressions of a verified kernel: ``grid = (cdiv(%n, 1024), 1, 1)`` →
    ``(CDiv(ParamRef('n'), Const(1024)), Const(1), Const(1))``. Raises LaunchAttributeError for a malformed grid."""
    value = kernel.attrs.get("grid")
    if not isinstance(value, tuple) or len(value) != 3:
        raise _malformed(kernel, "grid")
    exprs = tuple(_as_host(e) for e in value)
    if not all(isinstance(e, HOST_EXPRS) for e in exprs):
        raise _malformed(kernel, "grid")
    return exprs


def _as_host(e):
    """A grid entry as a host expression: a Python int (a hand-built Kernel's) is the constant it stands for."""
    return Const(int(e)) if _is_int(e) else e


def check_grid_fits_cluster(kernel, grid) -> None:
    """Raise LaunchAttributeError unless every entry of the launch's ``grid`` (x, y, z) is a multiple of the
    kernel's cluster: with ``cluster = (2, 1, 1)`` a grid of (3, 1, 1) CTAs cannot form whole clusters."""
    cluster = cluster_dims(kernel)
    if cluster == (1, 1, 1):
        return
    for axis, n, c in zip(AXES, grid, cluster):
        if n % c:
            raise LaunchAttributeError(
                f"@{kernel.name}: grid = {show(kernel.attrs.get('grid'))} is {show(tuple(grid))} for these arguments, "
                f"not a multiple of cluster = {show(cluster)}: {_ctas(n)} along {axis} cannot form whole clusters "
                f"of {c}")


def evaluate_grid(kernel, env) -> tuple:
    """The grid (x, y, z) of a launch of a verified kernel: ``env`` maps parameter names to ints (``%n``) or to
    array-likes with ``.shape`` (``dim(%x, 0)``). ``grid = (cdiv(%n, 1024), 1, 1)`` with n = 4096 → (4, 1, 1).

    Post: every entry is from 0 (an empty launch: nothing runs) to the hardware's limit and a multiple of the
    cluster; otherwise (also for a division by zero) LaunchAttributeError names the attribute and the expression:
    ``@k: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m) divides by %m = 0``."""
    exprs = grid_exprs(kernel)
    grid = []
    for axis, e, limit in zip(AXES, exprs, GRID_LIMITS):
        try:
            n = e.evaluate(env)
        except HostExprError as err:
            raise LaunchAttributeError(f"{_grid_attr(kernel, exprs)}: {err}") from None
        except (TypeError, ValueError, OverflowError) as err:  # an argument that is not a number
            raise LaunchAttributeError(f"{_grid_attr(kernel, exprs)}: {axis} = {e} cannot be evaluated for these "
                                       f"arguments: {err}") from None
        if n < 0:
            raise LaunchAttributeError(f"{_grid_attr(kernel, exprs)}: {axis} = {e} is {n} for these arguments; a grid "
                                       "cannot have a negative number of CTAs")
        if n > limit:
            raise LaunchAttributeError(f"{_grid_attr(kernel, exprs)}: {axis} = {e} is {n} for these arguments, more "
                                       f"than the {limit} CTAs a grid can have along {axis}")
        grid.append(n)
    check_grid_fits_cluster(kernel, grid)
    return tuple(grid)


def _grid_attr(kernel, exprs) -> str:
    # printed only for an error: a launch that is fine pays nothing for the text
    return f"@{kernel.name}: grid = {show(exprs)}"


# -- the verifier's rule ---------------------------------------------------------------------------------------------

class _At:
    """Where a header error is reported: the Verifier's ``error`` takes an object with ``loc`` and ``name``."""

    def __init__(self, loc, name):
        self.loc, self.name = loc, name


class _Header:
    """The verifier's view of one kernel header: locations of attributes and their entries, and ``error``."""

    def __init__(self, kernel, v):
        self.kernel, self.v = kernel, v
        self.locs = getattr(kernel, "attr_locs", None) or {}
        self.name = f"@{kernel.name}"

    def key(self, key: str):
        return self.locs[key][0] if key in self.locs else self.kernel.loc

    def entry(self, key: str, index: int):
        entries = self.locs[key][1] if key in self.locs else ()
        return entries[index] if index < len(entries) else self.key(key)

    def error(self, loc, message: str) -> None:
        self.v.error(_At(loc, self.name), message)


def check(kernel, v):
    """The verifier's rule for a kernel's header; each violation is reported through ``v.error`` at the attribute
    (or the entry) it is about, as ``file:line:col: @k: block = (0, 1, 1): x is 0; ...``.

    Rules: the name is a PTX identifier; the attribute keys are ``grid block cluster non_portable_cluster``; grid and
    block are present; grid is three host expressions whose parameters exist and have the right kind (``%n`` an
    integer scalar, ``dim(%x, m)`` a mode of a tensor parameter), whose constant divisors are > 0 and whose constant
    entries are from 1 to the hardware's limit; block is three integers ≥ 1 with x, y ≤ 1024, z ≤ 64 and 1 to 1024
    threads (a multiple of 128 where the kernel has ``gpu.roles``); cluster is three integers ≥ 1 with at most 8 CTAs
    (16 with ``non_portable_cluster = true``) dividing a constant grid. Returns (block dims or None, cluster dims or None): None where the attribute is broken, so that
    op rules that depend on it stay quiet."""
    h = _Header(kernel, v)
    _check_name(kernel, h)
    attrs = kernel.attrs if isinstance(kernel.attrs, dict) else {}
    for key in attrs:
        if key not in ATTRIBUTES:
            h.error(h.key(key), f"unknown kernel attribute '{key}'{did_you_mean(key, ATTRIBUTES)}: a kernel takes "
                                "grid, block, cluster, non_portable_cluster and min_ctas_per_sm")
    for key, example in (("grid", "grid = (cdiv(%n, 256), 1, 1)"), ("block", "block = (128, 1, 1)")):
        if key not in attrs:
            what = "the CTAs to launch" if key == "grid" else "the threads of a CTA"
            h.error(kernel.loc, f"missing attribute '{key}' ({what}, e.g. {example})")
    grid = _check_grid(h, attrs["grid"]) if "grid" in attrs else None
    block = _check_static(h, "block", attrs["block"]) if "block" in attrs else None
    if block is not None:
        _check_block(h, block)
        if _block_ok(block):
            _check_thread_modes(h, block)
    cluster = (1, 1, 1)
    if "cluster" in attrs:
        cluster = _check_static(h, "cluster", attrs["cluster"])
        if cluster is not None and not _check_cluster(h, cluster, attrs.get("non_portable_cluster", False)):
            cluster = None
    if "non_portable_cluster" in attrs and not isinstance(attrs["non_portable_cluster"], bool):
        h.error(h.entry("non_portable_cluster", 0), "non_portable_cluster must be true or false, not "
                                                    f"{show(attrs['non_portable_cluster'])}")
    if "min_ctas_per_sm" in attrs:
        _check_min_ctas(h, attrs["min_ctas_per_sm"], block if block is not None and _block_ok(block) else None)
    if grid is not None and cluster is not None:
        for i, (axis, n, c) in enumerate(zip(AXES, grid, cluster)):
            if n is not None and n % c:
                h.error(h.entry("grid", i), f"grid = {show(attrs['grid'])} is not a multiple of cluster = "
                                            f"{show(attrs['cluster'])}: {_ctas(n)} along {axis} cannot form "
                                            f"whole clusters of {c}")
    return (block if block is not None and _block_ok(block) else None), cluster


def _check_min_ctas(h, value, block) -> None:
    """``min_ctas_per_sm``: an integer k ≥ 1 whose k CTAs of the block fit one SM's 2048 threads."""
    if type(value) is not int or value < 1:
        h.error(h.entry("min_ctas_per_sm", 0), f"min_ctas_per_sm must be an integer >= 1, not {show(value)}")
        return
    if block is not None and value * block[0] * block[1] * block[2] > SM_THREADS:
        threads = block[0] * block[1] * block[2]
        h.error(h.entry("min_ctas_per_sm", 0), f"min_ctas_per_sm = {value} CTAs of {threads} threads is "
                                                f"{value * threads} threads; an SM holds {SM_THREADS}")


def _check_name(kernel, h) -> None:
    name = kernel.name
    if not isinstance(name, str):
        h.error(kernel.loc, f"the kernel name must be a string, not {_kind(name)}")
        return
    if _PTX_IDENTIFIER.fullmatch(name) and name not in PTX_RESERVED:
        return
    rule = "a letter, or _ and at least one more character, then letters, digits and _"
    if name in PTX_RESERVED:
        why = f"{name} is a name PTX reserves (its predefined warp-size constant)"
    elif not name:
        why = "it is empty"
    elif name == "_":
        why = "a lone _ is not an identifier"
    elif name[0].isdigit():
        why = "it starts with a digit"
    else:
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c == "_"))})
        why = " and ".join(f"'{c}'" for c in bad) + (" is" if len(bad) == 1 else " are") + " not allowed"
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
    fixed = fixed if _PTX_IDENTIFIER.fullmatch(fixed) and fixed not in PTX_RESERVED else f"k_{fixed}"
    h.error(kernel.loc, f"kernel name @{name} is not a PTX identifier ({rule}): {why}; e.g. @{fixed}")


def _triple_shape(h, key: str, value, example: str) -> bool:
    """``value`` is a tuple of three entries; else report it (with the padded form where that is what was meant)."""
    if isinstance(value, tuple) and len(value) == 3:
        return True
    if isinstance(value, list):
        h.error(h.key(key), f"{key} = {show(value)} is a list; write a tuple (x, y, z), e.g. {example}")
        return False
    if not isinstance(value, tuple):
        if _is_int(value) or isinstance(value, HostExpr):
            h.error(h.key(key), f"{key} = {show(value)} is one entry; it takes 3 (x, y, z): "
                                f"{key} = {show((value, 1, 1))}")
        else:
            h.error(h.key(key), f"{key} = {show(value)} is {_kind(value)}, not a tuple (x, y, z), e.g. {example}")
        return False
    n = len(value)
    hint = f"{key} = {show(value + (1,) * (3 - n))}" if 0 < n < 3 else example
    h.error(h.key(key), f"{key} = {show(value)} has {n} entr{'y' if n == 1 else 'ies'}; it takes exactly 3 "
                        f"(x, y, z), e.g. {hint}")
    return False


def _check_static(h, key: str, value):
    """block or cluster: three integer literals ≥ 1; returns them, or None after reporting."""
    example = "block = (128, 1, 1)" if key == "block" else "cluster = (2, 1, 1)"
    if not _triple_shape(h, key, value, example):
        return None
    ok = True
    for i, (axis, x) in enumerate(zip(AXES, value)):
        if not _is_int(x):
            why = (f"{key} is static (compiled into the kernel), only grid is computed at launch"
                   if isinstance(x, HostExpr) else f"{key} takes integer literals")
            h.error(h.entry(key, i), f"{key} = {show(value)}: {axis} is {_kind(x)}, not an integer: {why}")
            ok = False
        elif x < 1:
            unit = "thread" if key == "block" else "CTA"
            h.error(h.entry(key, i), f"{key} = {show(value)}: {axis} is {x}; a {key} has at least 1 {unit} along "
                                     "each axis")
            ok = False
    return tuple(int(x) for x in value) if ok else None


def _block_ok(block) -> bool:
    threads = block[0] * block[1] * block[2]
    return threads <= MAX_BLOCK_THREADS and all(x <= m for x, m in zip(block, BLOCK_LIMITS))


def _check_block(h, block) -> None:
    text = f"block = {show(block)}"
    threads = block[0] * block[1] * block[2]
    if threads > MAX_BLOCK_THREADS:
        h.error(h.key("block"), f"{text} has {threads} threads; a CTA has 1 to {MAX_BLOCK_THREADS}")
        return
    for i, (axis, x, limit) in enumerate(zip(AXES, block, BLOCK_LIMITS)):
        if x > limit:
            h.error(h.entry("block", i), f"{text}: {axis} is {x}; a CTA has at most {limit} threads along {axis}")
    if threads % WARPGROUP and any(op.name == "gpu.roles" for op in walk(h.kernel.body)):
        # the roles op checks that its warpgroups cover the CTA exactly; this names the attribute itself
        h.error(h.key("block"), f"{text} has {threads} threads, not a multiple of {WARPGROUP}: gpu.roles gives "
                                f"each role whole warpgroups of {WARPGROUP} threads")


def _check_thread_modes(h, block) -> None:
    """An op whose thread operand is the thread index itself (``gpu.thread_id {dim = x}``, 0 to block x − 1) must
    not spread its tile over more threads than that: with ``tv = [(256,4):(4,1)]``, ``block = (128, 1, 1)`` would
    leave the elements of threads 128 to 255 untouched, silently. (Fewer threads than the block's are the op's
    run-time rule: a branch or a role may mask the others.) Reported at the op."""
    for op in walk(h.kernel.body):
        tv = op.attrs.get("tv")
        if not isinstance(tv, (lc.Layout, lc.ComposedLayout)) or lc.rank(tv) != 2:
            continue
        for x in op.operands:
            owner = getattr(x, "owner", None)
            if owner is None or owner.name != "gpu.thread_id" or str(owner.attrs.get("dim")) != "x":
                continue
            threads, bx = lc.size(tv[0]), block[0]
            if threads > bx:
                h.v.error(op, f"tv {to_str(tv)} spreads the tile over {threads} threads, but its thread operand "
                              f"%{x.name} (gpu.thread_id x) runs from 0 to {bx - 1} (block = {show(block)}): the "
                              f"elements of threads {bx} to {threads - 1} would never be touched")
            break


def _check_cluster(h, cluster, opt_in) -> bool:
    size = cluster[0] * cluster[1] * cluster[2]
    text = f"cluster = {show(cluster)}"
    if size > MAX_CLUSTER:
        h.error(h.key("cluster"), f"{text} has {size} CTAs; a cluster has at most {MAX_CLUSTER} (with "
                                  f"non_portable_cluster = true; {PORTABLE_CLUSTER} without)")
        return False
    if size > PORTABLE_CLUSTER and opt_in is not True:
        h.error(h.key("cluster"), f"{text} has {size} CTAs, more than the portable {PORTABLE_CLUSTER}: clusters of up "
                                  f"to {MAX_CLUSTER} need the kernel attribute non_portable_cluster = true")
        return False
    return True


def _check_grid(h, value):
    """grid: three well-typed host expressions; returns the constant value of each entry (None where it depends on
    the arguments), or None after reporting."""
    if not _triple_shape(h, "grid", value, "grid = (cdiv(%n, 256), 1, 1)"):
        return None
    text = f"grid = {show(value)}"
    params = {p.name: p for p in h.kernel.params}
    out = []
    for i, (axis, e, limit) in enumerate(zip(AXES, map(_as_host, value), GRID_LIMITS)):
        problems = []
        _check_host(e, params, problems)
        if problems:
            h.error(h.entry("grid", i), f"{text}: {problems[0]}")
            out.append(None)
            continue
        if e.params():
            out.append(None)
            continue
        n = e.evaluate({})
        if n < 1:
            h.error(h.entry("grid", i), f"{text}: {axis} is {n}{'' if isinstance(e, Const) else f' ({e})'}; a grid "
                                        "has at least 1 CTA along each axis")
            out.append(None)
        elif n > limit:
            h.error(h.entry("grid", i), f"{text}: {axis} is {n}; a grid has at most {limit} CTAs along {axis}")
            out.append(None)
        else:
            out.append(n)
    return out


def _check_host(e, params: dict, problems: list) -> None:
    """Append to ``problems`` what is wrong with host expression ``e`` (its nodes, parameters and divisors)."""
    if not isinstance(e, HOST_EXPRS):
        problems.append(f"{_kind(e)} is not an integer or a host expression (%n, dim(%x, 0), cdiv(a, b), min(a, b), "
                        "a * b, a + b)")
        return
    if isinstance(e, Const):
        if not _is_int(e.value):
            problems.append(f"{_kind(e.value)} is not an integer")
        return
    if isinstance(e, ParamRef):
        p = _param(e.name, params, e, problems)
        if p is None:
            return
        if isinstance(p.type, (GlobalTensorType, TensorMapType)):
            problems.append(f"%{e.name} is a {p.type}, not an integer: a tensor's extent is dim(%{e.name}, mode)")
        elif not (isinstance(p.type, ScalarType) and p.type.name in HOST_INT_TYPES):
            problems.append(f"%{e.name} is {p.type}; host expressions take integer parameters "
                            f"({', '.join(HOST_INT_TYPES)})")
        return
    if isinstance(e, Dim):
        p = _param(e.param, params, e, problems)
        if p is None:
            return
        if not isinstance(p.type, (GlobalTensorType, TensorMapType)):
            problems.append(f"{e}: %{e.param} is {p.type}, not a tensor parameter (gtensor or tmap); an integer "
                            f"parameter is written %{e.param}")
        elif not _is_int(e.mode) or not 0 <= e.mode < p.type.rank:
            rank = p.type.rank
            modes = ("whose only mode is 0" if rank == 1 else "whose modes are 0 and 1" if rank == 2
                     else f"whose modes are 0 to {rank - 1}")
            problems.append(f"{e}: %{e.param} is a {p.type}, {modes}")
        return
    for operand in (e.a, e.b):
        _check_host(operand, params, problems)
    if isinstance(e, CDiv) and not problems and not e.b.params():
        divisor = e.b.evaluate({})
        if divisor <= 0:
            problems.append(f"{e}: the divisor must be > 0, not {divisor}")


def _param(name, params: dict, e, problems: list):
    if isinstance(name, str) and name in params:
        return params[name]
    where = "" if isinstance(e, ParamRef) else f"{e}: "
    problems.append(f"{where}%{name} is not a parameter of the kernel{did_you_mean(name, params)}")
    return None


__all__ = ["ATTRIBUTES", "LaunchAttributeError", "block_dims", "check", "check_grid_fits_cluster", "cluster_dims",
           "evaluate_grid", "grid_exprs", "min_ctas_per_sm", "non_portable_cluster", "show", "static_triple"]
