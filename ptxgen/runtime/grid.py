"""The grid of a launch: the kernel's host expressions (``grid = (cdiv(%n, 1024), 1, 1)``) compiled once to Python
and evaluated per call.

``LaunchGrid(kernel)`` generates ``lambda a, s: ((-(-(int(a['n'])) // (1024))), 1, 1,)`` from the IR's host
expressions (``a``: the arguments by name, ``s``: the tensor arguments' shapes by name); ``host_expr_source`` gives
the same expressions over any names, for the launcher's generated binder. A grid is used when it is one the hardware
runs (``runnable``: every entry from 0 to the limits, a multiple of the cluster); otherwise the expressions are
evaluated again by ``ptxgen.ir.launch.evaluate_grid`` (the interpreter's rule) to raise a LaunchError naming the
attribute and the expression: ``@k: grid = (cdiv(%n, %m), 1, 1): cdiv(%n, %m) divides by %m = 0``.
"""
from __future__ import annotations

from .kernel_launch import LaunchError

__all__ = ["LaunchGrid", "host_expr_source"]


def host_expr_source(expr, value, extent) -> str:
    """Python source of host expression ``expr``: ``value(name)`` is the source of integer parameter ``%name``'s
    value, ``extent(name, mode)`` that of ``dim(%name, mode)``. ``cdiv(%n, 1024)`` with ``value = lambda n:
    f"int(a[{n!r}])"`` → ``(-(-(int(a['n'])) // (1024)))``. Post: the source evaluates as ``expr.evaluate`` does
    (ZeroDivisionError where evaluate raises for a zero divisor)."""
    from ..ir.hostexpr import Add, CDiv, Const, Dim, Min, Mul, ParamRef

    def src(e) -> str:
        if isinstance(e, int):
            return str(int(e))
        if isinstance(e, Const):
            return str(int(e.value))
        if isinstance(e, ParamRef):
            return value(e.name)
        if isinstance(e, Dim):
            return extent(e.param, int(e.mode))
        if isinstance(e, CDiv):
            return f"(-(-({src(e.a)}) // ({src(e.b)})))"
        if isinstance(e, Min):
            return f"min({src(e.a)}, {src(e.b)})"
        if isinstance(e, Mul):
            return f"(({src(e.a)}) * ({src(e.b)}))"
        if isinstance(e, Add):
            return f"(({src(e.a)}) + ({src(e.b)}))"
        raise LaunchError(f"cannot evaluate host expression {e!r}")
    return src(expr)


class LaunchGrid:
    """The grid of a verified kernel's launches: ``exprs`` (its three host expressions), ``cluster``, ``limits``
    (CTAs per grid along x, y, z), ``source`` (the generated function's source) and ``of(args, shapes)``."""

    def __init__(self, kernel, cluster):
        from ..ir import launch

        self.kernel = kernel
        try:
            self.exprs = launch.grid_exprs(kernel)
        except launch.LaunchAttributeError as exc:  # only an unverified kernel (the verifier reports these)
            raise LaunchError(str(exc)) from None
        self.cluster = tuple(cluster)
        self.limits = launch.GRID_LIMITS
        self.source = "lambda a, s: (" + ", ".join(
            host_expr_source(e, lambda n: f"int(a[{n!r}])", lambda n, m: f"s[{n!r}][{m}]") for e in self.exprs) + ",)"
        self._fn = eval(self.source, {"int": int, "min": min})  # generated from the IR's host expressions only

    def runnable_source(self, axes) -> str:
        """Python source of the test that a grid launches something the hardware runs — every entry from 1 to its
        limit and, with a cluster, a multiple of it (an empty or invalid grid takes the checked path) — given the
        source of each entry (``axes``: three Python expressions, e.g. ``["gx", "1", "1"]``). Entries that are
        constants (``self.exprs``) are checked here, once: the test names only the others (``"0 < gx <=
        2147483647"``); "True" when nothing is left to test, "False" when a constant entry fails."""
        from ..ir.hostexpr import Const

        tests = []
        for src, e, limit, c in zip(axes, self.exprs, self.limits, self.cluster):
            if isinstance(e, (int, Const)):
                n = int(e.value if isinstance(e, Const) else e)
                if not (0 < n <= limit and n % c == 0):
                    return "False"
                continue
            tests.append(f"0 < {src} <= {limit}" + (f" and {src} % {c} == 0" if c != 1 else ""))
        return " and ".join(tests) or "True"

    def of(self, args, shapes) -> tuple:
        """The grid (x, y, z) of a call with arguments ``args`` (name → value) and tensor shapes ``shapes`` (name →
        shape): the generated function's value when the hardware runs it (entries from 0 to the limits — 0: an
        empty launch — and a multiple of the cluster); otherwise LaunchError from ``evaluate_grid``."""
        try:
            grid = self._fn(args, shapes)
            x, y, z = grid
            cx, cy, cz = self.cluster
            lx, ly, lz = self.limits
            if (0 <= x <= lx and 0 <= y <= ly and 0 <= z <= lz
                    and (cx == cy == cz == 1 or not (x % cx or y % cy or z % cz))):
                return grid
        except Exception:  # a division by zero, a missing extent: explained below
            pass
        return self.explain(args, shapes)

    def explain(self, args, shapes):
        """Evaluate the grid with ``ptxgen.ir.launch.evaluate_grid``: its grid when valid, else a LaunchError
        naming the attribute and the expression that breaks."""
        from types import SimpleNamespace

        from ..ir import launch

        env = dict(args)
        env.update((name, SimpleNamespace(shape=tuple(shape))) for name, shape in shapes.items())
        try:
            return launch.evaluate_grid(self.kernel, env)
        except launch.LaunchAttributeError as exc:
            raise LaunchError(str(exc)) from None
        except Exception as exc:
            raise LaunchError(f"@{self.kernel.name}: cannot evaluate grid = "
                              f"{launch.show(self.kernel.attrs.get('grid'))} for these arguments: {exc}") from None
