"""The verifier: every rule of spec/tile-ir.md, reported as ``file:line:col: op: message``.

Structural rules (values defined before use, region scoping) are checked here; each op's own rules live with its
definition in ``ptxgen.ir.ops`` and use the helpers of ``Verifier``.
"""
from __future__ import annotations

import layoutc as lc

from .gc_pause import gc_paused
from .ir import launch
from .ir.core import Kernel, Module, Region
from .ir.hostexpr import TupleAttr, Word
from .ir.ops import KERNEL_RULES, OPS, attribute_key_problems
from .ir.suggest import did_you_mean
from .ir.text import attribute_text
from .ir.types import ScalarType


class VerifyError(ValueError):
    """The kernel breaks the IR's rules; ``errors`` lists each as (location, op name, message)."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("\n".join(f"{loc}: {name}: {msg}" for loc, name, msg in self.errors))


class Verifier:
    """Walks a kernel, checks scoping and calls each op's rule; op rules report through ``error``."""

    def __init__(self):
        self.errors = []

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
        """The attribute ``name``, which must be present and of one of ``kinds``."""
        if name not in op.attrs:
            self.error(op, f"missing attribute '{name}'")
            return None
        value = op.attrs[name]
        if not isinstance(value, kinds) or (kinds is int and isinstance(value, bool)):
            kind_names = " or ".join(_KIND_TEXT.get(k.__name__, k.__name__)
                                     for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
            self.error(op, f"attribute '{name}' must be {kind_names}, not {attribute_text(value)}")
            return None
        return value

    def word(self, op, name: str, choices) -> str | None:
        value = op.attrs.get(name)
        if value is None:
            self.error(op, f"missing attribute '{name}' (one of {', '.join(choices)})")
            return None
        if str(value) not in choices or not isinstance(value, (Word, str)):
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

    # -- walking -------------------------------------------------------------------------------------------------
    def kernel(self, kernel: Kernel) -> None:
        # the header's rules (name, launch attributes) first: op rules read the CTA's thread count (warpgroup roles)
        # and the cluster size (multicast, pipelines), None where the attribute is broken (reported here already)
        block, cluster = launch.check(kernel, self)
        self.kernel_block = block[0] * block[1] * block[2] if block is not None else None
        self.kernel_cluster = cluster[0] * cluster[1] * cluster[2] if cluster is not None else None
        scope = {id(p) for p in kernel.params}
        self._region(kernel.body, scope)
        # kernel-level rules (ptxgen.ir.ops.kernel_rule): rules relating several ops, run once the ops are checked
        for rule in KERNEL_RULES:
            try:
                rule(kernel, self)
            except _Skip:
                pass

    def _region(self, region: Region, scope: set) -> None:
        scope = set(scope) | {id(a) for a in region.args}
        for index, op in enumerate(region.ops):
            for x in op.operands:
                if id(x) not in scope:
                    self.error(op, f"uses %{x.name} where it is not defined")
            if op.name == "scf.yield" and index != len(region.ops) - 1:
                self.error(op, "scf.yield must be the last op of its region")
            definition = OPS.get(op.name)
            if definition is None:
                self.error(op, f"unknown op '{op.name}'{did_you_mean(op.name, OPS)}")
            else:
                # attribute keys first: a misspelt key is named where it is, and the op's rule (which would only see
                # the attribute missing) does not run
                key_problems = attribute_key_problems(definition, op)
                for problem in key_problems:
                    self.error(op, problem)
                try:
                    if not key_problems:
                        definition.verify(op, self)
                except _Skip:
                    pass
            for r in op.regions:
                self._region(r, scope)
            scope |= {id(r) for r in op.results}


# attribute kinds as the text form writes them (messages never name Python types)
_KIND_TEXT = {"int": "an integer", "float": "a float", "bool": "true or false", "tuple": "a tuple like (1, 0)",
              "str": 'a string "..."', "Layout": "a layout like [(4,2):(2,1)]", "Word": "a word"}


class _Skip(Exception):
    """Stops one op's rule after a structural error that makes the rest meaningless."""


def _is_shape(value) -> bool:
    """A CuTe int tuple of positive ints (brackets in the text; a parenthesised TupleAttr is no shape)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value > 0
    return (isinstance(value, tuple) and not isinstance(value, TupleAttr) and len(value) > 0
            and all(_is_shape(e) for e in value))


@gc_paused
def verify(ir) -> None:
    """Check a Module or Kernel against every rule; raise VerifyError listing each violation as
    ``file:line:col: op: message``. Post: returns None only for IR the interpreter and the lowering accept."""
    v = Verifier()
    kernels = ir.kernels if isinstance(ir, Module) else [ir]
    for k in kernels:
        v.kernel(k)
    if v.errors:
        raise VerifyError(v.errors)


__all__ = ["VerifyError", "Verifier", "verify"]
