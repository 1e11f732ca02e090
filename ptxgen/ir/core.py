"""The IR's structure: values, operations with regions, kernels and modules, with source locations.

Everything is plain data; what each operation means (operands, result types, verifier rule, interpreter semantics,
lowering) lives in ``ptxgen.ir.ops``, one definition per op.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MAX_NESTING = 64
"""The deepest nesting the IR takes: parentheses in attribute values, host expressions and CuTe notation (shapes,
layouts), and regions inside regions. Real kernels nest a few levels; deeper input is refused where it is read
(IRSyntaxError ``nesting deeper than 64 levels``) or verified (VerifyError), so that no part of ptxgen — reader,
verifier, printer, interpreter, lowering — recurses without bound."""


def too_deep(value) -> bool:
    """Whether tuples nest in ``value`` deeper than MAX_NESTING levels (a flat tuple is one level); found without
    recursion, so any value — one the Python builder made too — can be asked."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, tuple):
            if depth >= MAX_NESTING:
                return True
            stack.extend((element, depth + 1) for element in item)
    return False


@dataclass(frozen=True)
class Location:
    """Where an op came from: ``kernels/gemm.tile:12:5`` (1-based line and column)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


UNKNOWN = Location("<builder>", 0, 0)


@dataclass(frozen=True)
class Site:
    """Where an error about a kernel rather than one op is reported (a parameter, a kernel-level rule): a location
    and the name shown where an op's would be, ``Site(p.loc, "@gemm")`` → ``file:line:col: @gemm: …``."""

    loc: Location
    name: str


class Value:
    """An SSA value: a kernel parameter, a region argument or an op result. ``name`` is its text name (no ``%``).
    ``spelling`` (a ``ptxgen.ir.names.Spelled`` or None) is how its type was written when that used names
    (``smem<bf16>[#stage]``); it is printed back while it still stands for ``type``."""

    __slots__ = ("name", "type", "owner", "loc", "spelling")

    def __init__(self, name: str, type, owner=None, loc: Location = UNKNOWN, spelling=None):
        self.name = name
        self.type = type
        self.owner = owner
        self.loc = loc
        self.spelling = spelling

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass
class Region:
    """A list of ops with block arguments (a loop's induction variable, a role's nothing)."""

    args: list = field(default_factory=list)
    ops: list = field(default_factory=list)


class Op:
    """One operation: ``%r = arith.add %a, %b : i32``. ``name`` selects its definition in ``ptxgen.ir.ops``.
    ``attrs`` hold resolved values; ``spelling`` maps an attribute key to how it was written where that used names
    or a partition call (``ptxgen.ir.names.Spelled``: ``tv = wgmma_acc(m = 64, n = 128)``), for the printer."""

    __slots__ = ("name", "operands", "attrs", "results", "regions", "loc", "spelling")

    def __init__(self, name: str, operands=(), attrs=None, results=(), regions=(), loc: Location = UNKNOWN,
                 spelling=None):
        self.name = name
        self.operands = list(operands)
        self.attrs = dict(attrs or {})
        self.results = list(results)
        self.regions = list(regions)
        self.loc = loc
        self.spelling = dict(spelling or {})
        for r in self.results:
            r.owner = self

    @property
    def result(self) -> Value:
        """The single result (ops with exactly one)."""
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results")
        return self.results[0]

    def __repr__(self) -> str:
        return f"<Op {self.name} at {self.loc}>"


@dataclass
class Kernel:
    """A kernel: parameters, launch attributes (grid, block threads, cluster) and a body region.

    ``attr_locs`` says where the text form wrote each launch attribute, for errors at the attribute:
    ``{"block": (Location of the key, (Location of each entry of its tuple, ...))}`` (empty for built kernels)."""

    name: str
    params: list
    attrs: dict
    body: Region
    loc: Location = UNKNOWN
    attr_locs: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Module:
    """A text file's kernels, in order, and its module-level name definitions (``ptxgen.ir.names.Definition``, in
    text order; the printer adds those the kernels' spellings use)."""

    kernels: list
    file: str = "<builder>"
    definitions: list = field(default_factory=list, compare=False, repr=False)

    def kernel(self, name: str | None = None) -> Kernel:
        """The kernel named ``name`` (``"gemm"`` for ``@gemm``), or the first one when ``name`` is None.
        Raises ValueError when the module has no kernel, or none of that name (the message lists the kernels)."""
        if not self.kernels:
            raise ValueError(f"{self.file} has no kernel (a module is 'kernel @name(...) {{ ... }}', one or more)")
        if name is None:
            return self.kernels[0]
        for k in self.kernels:
            if k.name == name:
                return k
        present = ", ".join(f"@{k.name}" for k in self.kernels)
        raise ValueError(f"no kernel @{name} in {self.file}; its kernels: {present}")


def walk(region: Region):
    """Every op of ``region`` and of its nested regions, in program order."""
    for op in region.ops:
        yield op
        for r in op.regions:
            yield from walk(r)
