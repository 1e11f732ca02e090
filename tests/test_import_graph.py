"""The imports follow the data: text → IR → verified IR → LLVM IR → PTX → cubin → launch, nothing reaching back.

Every import statement of every module under layoutc/ and ptxgen/ is read with ``ast`` — module-level and inside
functions alike (a function-level import is still an import), plus ``importlib.import_module`` / ``__import__`` of a
literal name — and mapped to the unit it reaches. The allowed edges between units:

layoutc (no unit of layoutc imports ptxgen)
- ``layoutc`` (the core algebra, notation and pictures: every module of layoutc/ outside hopper/ and cli.py)
  imports no other unit;
- ``layoutc.hopper`` imports the core;
- ``layoutc.cli`` (the ``layoutc`` command) imports the core and ``layoutc.hopper``.

ptxgen (any unit may import ``layoutc`` and ``layoutc.hopper``, never ``layoutc.cli``)
- leaves, which import nothing of ptxgen and may be imported by any unit: the package root ``ptxgen``,
  ``ptxgen.gc_pause``, ``ptxgen.happens_before`` (the interpreter's race order) and ``ptxgen.nvjitlink`` (the
  PTX → cubin step: ``ptxgen.lower.compile_kernel`` ends with it, ``ptxgen.runtime`` re-exports it);
- ``ptxgen.ir`` (text, builder, types, launch attributes, and each op's definition in ``ptxgen.ir.ops``: its
  lowering receives every lowering helper through ``lx`` instead of importing ``ptxgen.lower``) imports leaves only;
- ``ptxgen.verify`` imports ``ptxgen.ir``;
- ``ptxgen.interp`` and ``ptxgen.lower`` (siblings: neither imports the other) import ``ptxgen.ir`` and
  ``ptxgen.verify``;
- ``ptxgen.runtime`` imports ``ptxgen.ir``, ``ptxgen.verify`` and ``ptxgen.lower``;
- ``ptxgen.kernels`` (the kernel library) may import every unit above.

What crosses from one unit to another is public: no ``from X import _name`` across units (CuTe's placeholder ``_``
is a public name). A unit not in this table fails the test until it is given its place. Imports inside one unit are free (a package's
modules may use each other). The table has no cycle, so neither has the graph between units when the test passes;
``test_no_cycle_between_units`` checks that on the graph itself and names the cycle.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("layoutc", "ptxgen")

LAYOUTC_LIBRARY = {"layoutc", "layoutc.hopper"}
PTXGEN_LEAVES = {"ptxgen", "ptxgen.gc_pause", "ptxgen.happens_before", "ptxgen.nvjitlink"}
ALLOWED = {
    "layoutc": set(),
    "layoutc.hopper": {"layoutc"},
    "layoutc.cli": {"layoutc", "layoutc.hopper"},
    **{leaf: set(LAYOUTC_LIBRARY) for leaf in PTXGEN_LEAVES},
    "ptxgen.ir": LAYOUTC_LIBRARY | PTXGEN_LEAVES,
    "ptxgen.verify": LAYOUTC_LIBRARY | PTXGEN_LEAVES | {"ptxgen.ir"},
    "ptxgen.interp": LAYOUTC_LIBRARY | PTXGEN_LEAVES | {"ptxgen.ir", "ptxgen.verify"},
    "ptxgen.lower": LAYOUTC_LIBRARY | PTXGEN_LEAVES | {"ptxgen.ir", "ptxgen.verify"},
    "ptxgen.runtime": LAYOUTC_LIBRARY | PTXGEN_LEAVES | {"ptxgen.ir", "ptxgen.verify", "ptxgen.lower"},
    "ptxgen.kernels": LAYOUTC_LIBRARY | PTXGEN_LEAVES | {"ptxgen.ir", "ptxgen.verify", "ptxgen.interp", "ptxgen.lower",
                                                         "ptxgen.runtime"},
}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def unit(name: str) -> str:
    """The unit a module belongs to: ``ptxgen.ir.ops.tma`` → ``ptxgen.ir``, ``layoutc.tiling`` → ``layoutc``."""
    parts = name.split(".")
    if parts[0] == "layoutc":
        return "layoutc." + parts[1] if len(parts) > 1 and parts[1] in ("hopper", "cli") else "layoutc"
    return ".".join(parts[:2])


def imports(path: pathlib.Path):
    """(imported module, line, imported name or None) of every import in the file, at any depth; ``from pkg import
    mod`` names ``pkg.mod`` when that is a module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                if is_module(f"{source}.{alias.name}"):
                    yield f"{source}.{alias.name}", node.lineno, None
                else:
                    yield source, node.lineno, alias.name
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if called in ("import_module", "__import__"):
                yield node.args[0].value, node.lineno, None


def edges(names: bool = False):
    """(unit, unit reached, "file:line") of every import between different units of layoutc and ptxgen, once per
    statement; ``names=True``: once per imported name, the name appended (None for a module)."""
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = unit(module_name(path))
            for target, line, name in imports(path):
                if target.split(".")[0] not in PACKAGES or unit(target) == source:
                    continue
                edge = (source, unit(target), f"{path.relative_to(ROOT)}:{line}") + ((name,) if names else ())
                if edge not in out:
                    out.append(edge)
    return out


def test_every_unit_has_a_place():
    units = {unit(module_name(p)) for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    assert units - set(ALLOWED) == set(), \
        f"units without a place in the import order (add them to ALLOWED with their allowed imports): " \
        f"{sorted(units - set(ALLOWED))}"


def test_imports_follow_the_data():
    bad = [f"{where}: {source} imports {target} (allowed: {', '.join(sorted(ALLOWED.get(source, ()))) or 'none'})"
           for source, target, where in edges() if target not in ALLOWED.get(source, set())]
    assert not bad, "imports against the data flow:\n" + "\n".join(bad)


def test_no_private_name_crosses_a_unit():
    bad = [f"{where}: {source} imports {name} from {target}" for source, target, where, name in edges(names=True)
           if name is not None and name.startswith("_") and name != "_"]
    assert not bad, "private names used across units (make them public where they are defined):\n" + "\n".join(bad)


def test_no_cycle_between_units():
    graph = {}
    for source, target, where in edges():
        graph.setdefault(source, {}).setdefault(target, where)
    state, path = {}, []

    def visit(u):
        state[u] = "open"
        path.append(u)
        for v, where in graph.get(u, {}).items():
            if state.get(v) == "open":
                cycle = path[path.index(v):] + [v]
                steps = [f"{a} → {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
                raise AssertionError("a cycle between units: " + "; ".join(steps))
            if v not in state:
                visit(v)
        path.pop()
        state[u] = "done"

    for u in sorted(graph):
        if u not in state:
            visit(u)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    """The reader is not blind where the old back-edges were: a relative import inside a method of an op module,
    ``from ... import name`` of a module, and a package-relative import in an ``__init__``."""
    pkg = tmp_path / "ptxgen"
    (pkg / "ir" / "ops").mkdir(parents=True)
    (pkg / "lower").mkdir()
    for init in (pkg, pkg / "ir", pkg / "ir" / "ops", pkg / "lower"):
        (init / "__init__.py").write_text("")
    (pkg / "lower" / "ptx_table.py").write_text("")
    (pkg / "ir" / "ops" / "wgmma.py").write_text(
        "class Fence:\n    def lower(self, op, lx):\n        from ...lower import ptx_table\n")
    (pkg / "runtime").mkdir()
    (pkg / "runtime" / "__init__.py").write_text("from ..lower import ptx_table\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert list(imports(pkg / "ir" / "ops" / "wgmma.py")) == [("ptxgen.lower.ptx_table", 3, None)]
    assert list(imports(pkg / "runtime" / "__init__.py")) == [("ptxgen.lower.ptx_table", 1, None)]
    assert ("ptxgen.ir", "ptxgen.lower", "ptxgen/ir/ops/wgmma.py:3") in edges()
