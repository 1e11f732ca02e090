"""The verifier: every rule of spec/tile-ir.md, reported as ``file:line:col: op: message``.

Structural rules (values defined before use, region scoping) are checked here; each op's own rules live with its
definition in ``ptxgen.ir.ops`` and use the helpers of ``Verifier``.
"""
from __future__ import annotations

import layoutc as lc

from .gc_pause import gc_paused
from .ir import launch
from .ir.core import MAX_NESTING, Kernel, Module, Region, Site, too_deep
from .ir.hostexpr import TupleAttr, Word
from .ir.ops import KERNEL_RULES, OPS, attribute_key_problems
from .ir.suggest import did_you_mean
from .ir.text import attribute_text
from .ir.types import GlobalTensorType, ScalarType, TensorMapType, shape_problem, type_problem

# how attribute kinds read in messages, as the text form writes them ("attribute 'mode' must be an integer, not (0)")
_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", tuple: "a tuple like (1, 0)",
               str: 'a string "..."', Word: "a word", lc.Layout: "a layout like [(4,2):(2,1)]"}
INTERNAL_ERROR = "internal verifier error"


class VerifyError(ValueError):
    """The kernel breaks the IR's rules; ``errors`` lists each as (location, op name, message)."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("\n".join(f"{loc}: {name}: {msg}" for loc, name, msg in self.errors))


class Verifier:
    """Walks a kernel, checks scoping and calls each op's rule; op rules report through ``error``."""

    def __init__(self):
        self.errors = []
        self.malformed = set()  # ids of values whose types are not well formed (reported once, at their definition)
        self.failed = set()     # ids of results of ops that failed their checks (or use such results)

    # -- helpers for op rules ----------------------------------------------------------------------------------
    def error(self, op, message: str) -> None:
        self.errors.append((op.loc, op.name, message))

    def operands(self, op, n: int) -> list:
        """The op's operands, requiring exactly ``n`` (padding with placeholders after reporting a mismatch)."""
        if len(op.operands) != n:
            self.error(op, f"expects {n} operand{'s' if n != 1 else ''}, got {len(op.operands)}")
            raise _Skip
        return list(op.operands)

    def results(self, op, n: int) -> list:
        if len(op.results) != n:
            self.error(op, f"expects {n} result{'s' if n != 1 else ''}, got {len(op.results)}")
            raise _Skip
        return [r.type for r in op.results]

    def regions(self, op, n: int) -> list:
        if len(op.regions) != n:
            self.error(op, f"expects {n} region{'s' if n != 1 else ''}, got {len(op.regions)}")
            return [None] * n
        return list(op.regions)

    def attr(self, op, name: str, kinds):
        """The attribute ``name``, which must be present and of one of ``kinds`` (a type or a tuple of types; a
        bool is an int only where ``bool`` is one of them). Reports and returns None otherwise:
        ``attribute 'mode' must be an integer, not (0)``."""
        if name not in op.attrs:
            self.error(op, f"missing attribute '{name}'")
            return None
        value = op.attrs[name]
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            shown = [k for k in kinds if not (k is int and float in kinds)]  # a number covers the integers
            kind_names = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in shown)
            self.error(op, f"attribute '{name}' must be {kind_names}, not {attribute_text(value)}")
            return None
        return value

    def word(self, op, name: str, choices) -> str | None:
        value = op.attrs.get(name)
        if value is None:
            self.error(op, f"missing attribute '{name}' (one of {', '.join(choices)})")
            return None
        if not isinstance(value, (Word, str)) or str(value) not in choices:
            self.error(op, f"attribute '{name}' must be one of {', '.join(choices)}, not {attribute_text(value)}")
            return None
        return str(value)

    def shape_attr(self, op, name: str):
        """A shape attribute (an int tuple in CuTe notation, e.g. ``[(64,64)]``)."""
        value = op.attrs.get(name)
        if value is None:
            self.error(op, f"missing attribute '{name}'")
            return None
        if not _is_shape(value):
            # a parenthesised tuple is a tuple attribute; shapes are CuTe notation, in brackets
            hint = (f" (a shape is written in brackets: [{lc.to_str(value[0] if len(value) == 1 else tuple(value))}])"
                    if isinstance(value, TupleAttr) and _is_shape(tuple(value)) else "")
            self.error(op, f"attribute '{name}' must be a shape of positive ints like [(64,64)], not "
                           f"{attribute_text(value)}{hint}")
            return None
        return value

    def scalar(self, op, t, what: str) -> None:
        if not isinstance(t, ScalarType):
            self.error(op, f"the {what} must be a scalar, not {t}")

    def same_type(self, op, types, what: str) -> None:
        if len(set(types)) > 1:
            self.error(op, f"{what} must have one type, got {', '.join(map(str, types))}")

    def yields(self, op, region: Region, types, optional: bool = False) -> None:
        """``region`` ends with an ``scf.yield`` of ``types`` (may be absent if ``optional`` and types is empty)."""
        last = region.ops[-1] if region.ops else None
        if last is None or last.name != "scf.yield":
            if not optional or types:
                self.error(op, "its region must end with scf.yield")
            return
        got = [x.type for x in last.operands]
        if got != list(types):
            self.error(last, f"yields ({', '.join(map(str, got))}) but {op.name} expects "
                             f"({', '.join(map(str, types))})")

    # -- well-formedness before the rules ----------------------------------------------------------------------------
    def _malformed(self, op) -> bool:
        """Report what no op rule should have to expect — attribute values nested deeper than MAX_NESTING, result
        and block-argument types that are not well formed (``types.type_problem``) — and whether the op has any or
        uses a value of an op that failed its checks (its rule is then skipped: it would only repeat the error)."""
        bad = False
        for key, value in op.attrs.items():
            if too_deep(value):
                self.error(op, f"attribute '{key}' nests deeper than {MAX_NESTING} levels")
                bad = True
        for what, values in (("result", op.results), ("block argument", [a for r in op.regions for a in r.args])):
            for x in values:
                problem = type_problem(x.type)
                if problem:
                    self.error(op, f"{what} %{x.name}: {problem}")
                    self.malformed.add(id(x))
                    bad = True
        return bad or any(id(x) in self.malformed or id(x) in self.failed for x in op.operands)

    def _parameters(self, kernel: Kernel) -> None:
        """Kernel parameters are well-formed gtensors, tmaps or scalars (what the launcher and the lowering pass)."""
        for p in kernel.params:
            at = Site(p.loc, f"@{kernel.name}")
            problem = type_problem(p.type)
            if problem is None and not isinstance(p.type, (GlobalTensorType, TensorMapType, ScalarType)):
                problem = f"a kernel parameter is a gtensor, a tmap or a scalar, not {p.type}"
            if problem:
                self.error(at, f"parameter %{p.name}: {problem}")
                self.malformed.add(id(p))

    def _checked(self, at, rule, *args) -> None:
        """Run an op or kernel rule. A rule must report through ``error``; an exception escaping it is a defect of
        the rule, reported at ``at`` as an internal verifier error (so verify still raises only VerifyError)."""
        try:
            rule(*args)
        except _Skip:
            pass
        except Exception as e:  # noqa: BLE001 — defence in depth; tests/ptxgen/test_fuzz_tile_ir.py asserts it never fires
            self.error(at, f"{INTERNAL_ERROR} ({type(e).__name__}: {str(e)[:200]}) while checking this: please "
                           "report it with the kernel")

    def _signature_then_rule(self, definition, op) -> None:
        """The op's declared operand and result counts (``OpDef.num_operands`` / ``num_results``), then its rule:
        a count that differs is reported (``expects 2 operands, got 3``) and the rule is skipped."""
        if definition.num_operands is not None:
            self.operands(op, definition.num_operands)
        if definition.num_results is not None:
            self.results(op, definition.num_results)
        definition.verify(op, self)

    # -- walking -------------------------------------------------------------------------------------------------
    def kernel(self, kernel: Kernel) -> None:
        # the header's rules (name, launch attributes) first: op rules read the CTA's thread count (warpgroup roles)
        # and the cluster size (multicast, pipelines), None where the attribute is broken (reported here already)
        block, cluster = launch.check(kernel, self)
        self.kernel_block = block[0] * block[1] * block[2] if block is not None else None
        self.kernel_cluster = cluster[0] * cluster[1] * cluster[2] if cluster is not None else None
        scope = {id(p) for p in kernel.params}
        self.malformed, self.failed, errors = set(), set(), len(self.errors)
        self._parameters(kernel)
        self._region(kernel.body, scope)
        if len(self.errors) > errors:  # the kernel rules relate ops that each passed their own rule
            return
        # kernel-level rules (ptxgen.ir.ops.kernel_rule): rules relating several ops, run once the ops are checked
        for rule in KERNEL_RULES:
            self._checked(Site(kernel.loc, f"@{kernel.name}"), rule, kernel, self)

    def _region(self, region: Region, scope: set, depth: int = 1) -> None:
        scope = set(scope) | {id(a) for a in region.args}
        for index, op in enumerate(region.ops):
            for x in op.operands:
                if id(x) not in scope:
                    self.error(op, f"uses %{x.name} where it is not defined")
            if op.name == "scf.yield" and index != len(region.ops) - 1:
                self.error(op, "scf.yield must be the last op of its region")
            definition = OPS.get(op.name)
            before = len(self.errors)
            if definition is None:
                self.error(op, f"unknown op '{op.name}'{did_you_mean(op.name, OPS)}")
                self._malformed(op)
            elif not self._malformed(op):
                # attribute keys first: a misspelt key is named where it is, and the op's rule (which would only see
                # the attribute missing) does not run
                key_problems = attribute_key_problems(definition, op)
                for problem in key_problems:
                    self.error(op, problem)
                if not key_problems:
                    self._checked(op, self._signature_then_rule, definition, op)
            if len(self.errors) > before or any(id(x) in self.failed for x in op.operands):
                # its results are not what the rules of later ops may assume (the error is reported once, here)
                self.failed |= {id(r) for r in op.results}
            if op.regions and depth > MAX_NESTING:
                self.error(op, f"nesting deeper than {MAX_NESTING} levels: its regions are not checked")
            else:
                for r in op.regions:
                    self._region(r, scope, depth + 1)
            scope |= {id(r) for r in op.results}


class _Skip(Exception):
    """Stops one op's rule after a structural error that makes the rest meaningless."""


def _is_shape(value) -> bool:
    """A CuTe int tuple of positive ints (brackets in the text; a parenthesised TupleAttr is no shape)."""
    return not _contains_tuple_attr(value) and shape_problem(value) is None


def _contains_tuple_attr(value) -> bool:
    return isinstance(value, TupleAttr) or (isinstance(value, tuple) and any(_contains_tuple_attr(e) for e in value))


@gc_paused
def verify(ir) -> None:
    """Check a Module or Kernel against every rule; raise VerifyError listing each violation as
    ``file:line:col: op: message`` (``bad.tile:7:3: smem.tile: attribute 'mode' must be an integer, not (0)``), and
    TypeError for an argument that is no IR. No other exception escapes: one raised inside an op rule is reported as
    an internal verifier error at the op (spec/tile-ir.md §5). Post: returns None only for IR the interpreter and the
    lowering accept."""
    if not isinstance(ir, (Module, Kernel)):
        raise TypeError(f"verify checks a Module or a Kernel, not {type(ir).__name__}")
    v = Verifier()
    kernels = ir.kernels if isinstance(ir, Module) else [ir]
    for k in kernels:
        v.kernel(k)
    if v.errors:
        raise VerifyError(v.errors)


__all__ = ["VerifyError", "Verifier", "verify"]
