"""The Python builder: the same IR as the text form, from Python.

    from ptxgen.ir.builder import KernelBuilder, gtensor, i32, cdiv

    kb = KernelBuilder("scale", x=gtensor("f32", 1), n=i32, grid=(cdiv("n", 256), 1, 1), block=(256, 1, 1))
    b = kb.b
    t = b.gpu.thread_id(dim="x", name="t")
    ...
    kernel = kb.finish()

Every op is reached generically as ``b.<dialect>.<op>(*operands, name=..., type=..., **attrs)``: the op's
definition gives its result types where they follow from the operands (else pass ``type=``). Python ints and
floats given as operands become ``arith.const`` values of the other operands' type. Ops with regions are context
managers: ``with b.scf.for_(lo, hi, step, acc0) as (i, acc): ... b.scf.yield_(acc2)``; ``b.scf.if_`` returns a
branch object with ``then`` and ``otherwise`` context managers. Trailing underscores (``for_``, ``if_``,
``yield_``) stand for Python keywords.

Names (spec/tile-ir.md §3.1): ``define("rows", 64)`` is the module-level ``#rows = 64`` and
``partition("wgmma_acc", m=128, n=128, warpgroups=2)`` the partition call; either is given wherever an attribute
value goes (``tv=acc``, ``value=rows``) and a definition wherever a type takes a layout, shape or count
(``smem("bf16", stage)``, ``pipeline(stages)``). The op gets the resolved value, and the printer writes the name
(the definitions a kernel uses are printed before it).
"""
from __future__ import annotations

import contextlib

from .core import Kernel, Module, Op, Region, Value
from .hostexpr import Add, CDiv, Const, Dim, Min, Mul, ParamRef, TupleAttr, Word
from .names import Definition, Spelled, canonical_arguments, partition_value
from .text import value_text
from .ops import OPS
from .types import (SCALARS, BarrierType, PipelineType, FragmentType, GlobalTensorType, GlobalViewType, ScalarType, TensorMapType,
                    TensorType)

i1, i32, u32, i64, u64 = (SCALARS[n] for n in ("i1", "i32", "u32", "i64", "u64"))
f16, bf16, f32 = (SCALARS[n] for n in ("f16", "bf16", "f32"))


def _as_attribute(value):
    """A partition argument as the text form writes it: a tuple is a TupleAttr ``(32, 8)``, a str a bare word
    (``type = bf16``); Layouts, ints, bools, Definitions and Spelled values stay."""
    if isinstance(value, str):
        return Word(value)
    if type(value) is tuple or type(value) is list:
        return TupleAttr(_as_attribute(v) for v in value)
    return value


def _resolved(value):
    """(value, Spelled or None) of a builder attribute value that may be or hold Definitions and partitions."""
    if isinstance(value, Definition):
        return value.value, value.spelled
    if isinstance(value, Spelled):
        return value.value, value
    if isinstance(value, TupleAttr):
        parts = [_resolved(v) for v in value]
        plain = TupleAttr(v for v, _ in parts)
        if all(sp is None for _, sp in parts):
            return plain, None
        text = "(" + ", ".join(sp.text if sp is not None else value_text(v) for v, sp in parts) + ")"
        uses = []
        for _, sp in parts:
            uses.extend(d for d in (sp.uses if sp is not None else ()) if d not in uses)
        return plain, Spelled(text, plain, tuple(uses))
    return value, None


def define(name: str, value) -> Definition:
    """The module-level ``#name = value``: ``define("rows", 64)``, ``define("acc", partition("wgmma_acc", m=64,
    n=128))``, ``define("stage", layout)``, ``define("tile", (64, 64))`` (a CuTe shape ``[(64,64)]``, as any tuple
    attribute value of the builder). Post: ``.value`` is the resolved value; the printer writes
    ``#name = <value's text>`` once before the kernels that use it."""
    plain, spelled = _resolved(Word(value) if isinstance(value, str) else value)
    text = spelled.text if spelled is not None else value_text(plain)
    return Definition(name, plain, text, spelled.uses if spelled is not None else ())


def partition(function: str, **arguments) -> Spelled:
    """A TV layout named by its partition function, as the text form's ``wgmma_acc(m = 128, n = 128, warpgroups =
    2)``: ``partition("wgmma_acc", m=128, n=128, warpgroups=2)``, ``partition("copy", threads=(32, 8), vector=8,
    tile=(64, 64))``. Arguments may be Definitions. Post: ``.value`` is the layoutc Layout
    (``ptxgen.ir.names.partition_value``); raises ``ptxgen.ir.names.PartitionError`` as the reader does."""
    values, shown, spellings = {}, {}, []
    for key, value in arguments.items():
        plain, spelled = _resolved(_as_attribute(value))
        values[key] = plain
        shown[key] = spelled.text if spelled is not None else value_text(plain)
        spellings.append(spelled)
    layout = partition_value(function, values, shown)
    text = f"{function}(" + ", ".join(f"{k} = {shown[k]}" for k in canonical_arguments(function, values)) + ")"
    uses = []
    for sp in spellings:
        uses.extend(d for d in (sp.uses if sp is not None else ()) if d not in uses)
    return Spelled(text, layout, tuple(uses))


def _named_type(make, name: str, params: list, bracket=None):
    """``make(*values)``, or a Spelled type when a parameter or the bracket is a Definition."""
    values = [p.value if isinstance(p, Definition) else p for p in params]
    content = bracket.value if isinstance(bracket, Definition) else bracket
    t = make(*values, content) if bracket is not None else make(*values)
    named = [p for p in list(params) + [bracket] if isinstance(p, Definition)]
    if not named:
        return t
    texts = [f"#{p.name}" if isinstance(p, Definition) else str(p) for p in params]
    text = name + "<" + ", ".join(texts) + ">"
    if bracket is not None:
        text += f"[#{bracket.name}]" if isinstance(bracket, Definition) else str(t)[str(t).index("["):]
    return Spelled(text, t, tuple(named))


def _unspelled(t):
    """(type, Spelled or None) of a builder type argument."""
    return (t.value, t) if isinstance(t, Spelled) else (t, None)


def gtensor(dtype: str, rank: int) -> GlobalTensorType:
    """A global tensor parameter type: ``gtensor('f32', 2)`` prints ``gtensor<f32, 2>``."""
    return GlobalTensorType(SCALARS[dtype], rank)


def frag(dtype: str, shape) -> FragmentType:
    """A fragment type: ``frag('f32', (4,))`` prints ``frag<f32>[(4)]`` (a Definition shape: ``frag<f32>[#n]``)."""
    return _named_type(lambda d, sh: FragmentType(SCALARS[d], sh), "frag", [dtype], shape)


def gview(dtype: str, shape) -> GlobalViewType:
    """A global tile view type: ``gview('f32', (64, 64))`` (a Definition shape: ``gview<f32>[#tile]``)."""
    return _named_type(lambda d, sh: GlobalViewType(SCALARS[d], sh), "gview", [dtype], shape)


def _layout(layout):
    if isinstance(layout, str):
        import layoutc as lc
        return lc.parse(layout)
    return layout


def smem(dtype: str, layout) -> TensorType:
    """A shared-memory tensor type: ``smem('f32', 'Sw<3,4,3> o 0 o (64,32):(32,1)')`` (a layout or its CuTe text;
    a Definition: ``smem<f32>[#stage]``)."""
    return _named_type(lambda d, lay: TensorType("smem", SCALARS[d], _layout(lay)), "smem", [dtype], layout)


def tmap(dtype: str, rank: int, box) -> TensorMapType:
    """A TMA tensor-map parameter type: ``tmap('f32', 2, 'Sw<3,4,3> o 0 o (64,32):(32,1)')`` (or a Definition box)."""
    return _named_type(lambda d, r, lay: TensorMapType(SCALARS[d], r, _layout(lay)), "tmap", [dtype, rank], box)


def pipeline(stages: int) -> PipelineType:
    """``pipeline<stages>`` (a Definition: ``pipeline<#stages>``)."""
    return _named_type(PipelineType, "pipeline", [stages])


def mbarrier(count: int) -> BarrierType:
    """An mbarrier array type: ``mbarrier(2)`` prints ``mbarrier<2>``."""
    return _named_type(BarrierType, "mbarrier", [count])


def _host(e):
    if isinstance(e, (Const, ParamRef, Dim, CDiv, Min, Mul, Add)):
        return e
    if isinstance(e, int) and not isinstance(e, bool):
        return Const(e)
    if isinstance(e, str):
        return ParamRef(e)
    raise TypeError(f"a host expression is an int, a parameter name or cdiv/dim/mul/add of those, not {e!r}")


def _host_or_same(e):
    """A grid entry as a host expression where it is one (an int, a parameter name, cdiv/...), else unchanged for
    the verifier to report."""
    try:
        return _host(e)
    except TypeError:
        return e


def cdiv(a, b) -> CDiv:
    """Host expression ⌈a/b⌉ for launch attributes: ``cdiv('n', 1024)``."""
    return CDiv(_host(a), _host(b))


def hmin(a, b) -> Min:
    """Host expression min(a, b): ``hmin(mul(cdiv('m', 128), cdiv('n', 256)), 'sms')``."""
    return Min(_host(a), _host(b))


def hadd(a, b) -> Add:
    """Host expression a + b: ``cdiv(hadd(dim('x', 0), 15), 64)`` (⌈(M + 15)/64⌉)."""
    return Add(_host(a), _host(b))


def mul(a, b) -> Mul:
    """Host expression a · b: ``mul(cdiv('m', 128), cdiv('n', 256))``."""
    return Mul(_host(a), _host(b))


def dim(param: str, mode: int) -> Dim:
    """Host expression: the runtime extent of a tensor parameter's mode: ``dim('x', 0)``."""
    return Dim(param, mode)


class _Dialect:
    def __init__(self, builder, prefix):
        self._builder = builder
        self._prefix = prefix

    def __getattr__(self, name):
        if self._prefix == "scf" and name in ("for_", "if_", "yield_"):
            return getattr(self._builder, name)
        op_name = f"{self._prefix}.{name.rstrip('_')}"
        if op_name not in OPS:
            raise AttributeError(f"no op {op_name}")
        return lambda *operands, **kw: self._builder.op(op_name, *operands, **kw)


class Builder:
    """Appends ops to the current region; ``b.arith.add(x, y)`` builds ``%r = arith.add %x, %y : T``."""

    def __init__(self, region: Region, taken=()):
        self._stack = [region]
        self._counter = 0
        self._names = set(taken)  # every value name of the kernel: the text form defines each one once

    def __getattr__(self, dialect):
        if dialect.startswith("_"):
            raise AttributeError(dialect)
        return _Dialect(self, dialect)

    def _fresh(self, name=None) -> str:
        if name:
            if name in self._names:
                raise ValueError(f"value name %{name} is already defined in this kernel: names are defined once "
                                 "per kernel (spec/tile-ir.md §3), even in sibling regions")
            self._names.add(name)
            return name
        while True:
            self._counter += 1
            if f"v{self._counter}" not in self._names:
                self._names.add(f"v{self._counter}")
                return f"v{self._counter}"

    def const(self, value, type: ScalarType, name=None) -> Value:
        """``%c = arith.const {value = ...} : type``."""
        return self.op("arith.const", value=value, type=type, name=name)

    def _operand(self, x, like):
        if isinstance(x, Value):
            return x
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            t = like.dtype if isinstance(like, (FragmentType, GlobalViewType)) else like
            if t is None:
                t = f32 if isinstance(x, float) else i32
            return self.const(float(x) if t.is_float else x, t)
        raise TypeError(f"an operand is a Value or a number, not {x!r}")

    def op(self, op_name: str, *operands, type=None, name=None, **attrs):
        """Build op ``op_name``; returns its result (one), a tuple of results, or the Op (none).

        ``name`` names the result (a list names several); ``type`` gives result types the op cannot infer.
        """
        result_name = name
        names = result_name if isinstance(result_name, (list, tuple)) else None
        like = next((x.type for x in operands if isinstance(x, Value)), None)
        values = [self._operand(x, like) for x in operands]
        spelling = {}
        for k, v in list(attrs.items()):
            attrs[k], spelled = _resolved(v)
            if spelled is not None:
                spelling[k] = spelled
        attrs = {k: (Word(v) if isinstance(v, str) else v) for k, v in attrs.items()}
        if type is None:
            definition = OPS[op_name]
            infer = getattr(definition, "result_types", None)
            types = [(t, None) for t in infer([v.type for v in values], attrs)] if infer else []
        else:
            types = [_unspelled(t) for t in (list(type) if isinstance(type, (list, tuple)) else [type])]
        results = []
        for k, (t, spelled) in enumerate(types):
            n = names[k] if names else (result_name if len(types) == 1 else None)
            results.append(Value(self._fresh(n), t, spelling=spelled))
        op = Op(op_name, values, attrs, results, spelling=spelling)
        self._stack[-1].ops.append(op)
        if not results:
            return op
        return results[0] if len(results) == 1 else tuple(results)

    @contextlib.contextmanager
    def region(self, region: Region):
        """Append the ops built inside the ``with`` to ``region``."""
        self._stack.append(region)
        try:
            yield region
        finally:
            self._stack.pop()

    # -- region ops ------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def for_(self, lo, hi, step, *inits, unroll: int = 1, args=None, names=None):
        """``scf.for`` over ``[lo, hi)`` by ``step`` carrying ``inits``: the ``with`` yields the block arguments
        (induction variable, then the carried values); the loop's results are ``.results`` afterwards.
        ``args`` names the block arguments, ``names`` the results."""
        inits = [self._operand(x, i32) for x in inits]
        lo, hi, step = (self._operand(x, i32) for x in (lo, hi, step))
        arg_names = list(args) if args else [None] * (1 + len(inits))
        results = [Value(self._fresh(names[k] if names else None), v.type) for k, v in enumerate(inits)]
        body = Region([Value(self._fresh(arg_names[0]), i32)] +
                      [Value(self._fresh(arg_names[k + 1]), v.type) for k, v in enumerate(inits)])
        op = Op("scf.for", [lo, hi, step, *inits], {"unroll": unroll} if unroll != 1 else {}, results, [body])
        self._stack[-1].ops.append(op)
        with self.region(body):
            yield _Loop(op, body.args)

    def if_(self, cond, types=(), names=None):
        """``scf.if``: returns a branch with ``then`` / ``otherwise`` context managers and ``results``. Without result
        types the else region exists only once ``otherwise`` is entered (the text form omits it)."""
        results = [Value(self._fresh(names[k] if names else None), t) for k, t in enumerate(types)]
        op = Op("scf.if", [cond], {}, results, [Region(), Region()] if results else [Region()])
        self._stack[-1].ops.append(op)
        return _Branch(self, op)

    def roles(self, **roles):
        """``gpu.roles``: ``r = b.roles(producer=(1, 40), consumer=(2, 232))`` gives each role (in keyword order) its
        number of warpgroups and its setmaxnreg register count; ``with r["producer"]:`` builds that role's region."""
        attrs = {"names": TupleAttr(Word(n) for n in roles), "warpgroups": TupleAttr(g for g, _r in roles.values()),
                 "maxnreg": TupleAttr(r for _g, r in roles.values())}
        op = Op("gpu.roles", [], attrs, [], [Region() for _ in roles])
        self._stack[-1].ops.append(op)
        return {name: self.region(region) for name, region in zip(roles, op.regions)}

    def yield_(self, *values):
        """``scf.yield``: end the current region of an scf.for / scf.if."""
        self._stack[-1].ops.append(Op("scf.yield", list(values)))


class _Loop(tuple):
    def __new__(cls, op, args):
        obj = super().__new__(cls, args)
        obj.op = op
        return obj

    @property
    def results(self):
        return self.op.results


class _Branch:
    def __init__(self, builder, op):
        self._builder = builder
        self.op = op

    @property
    def then(self):
        return self._builder.region(self.op.regions[0])

    @property
    def otherwise(self):
        if len(self.op.regions) == 1:
            self.op.regions.append(Region())
        return self._builder.region(self.op.regions[1])

    @property
    def results(self):
        return self.op.results


class KernelBuilder:
    """Builds one kernel: ``KernelBuilder(name, grid=..., block=..., cluster=..., non_portable_cluster=...,
    min_ctas_per_sm=..., **params)``; parameters are reachable as ``kb.params['x']`` or ``kb['x']``; ``kb.b`` is the Builder of the body;
    ``finish()`` returns the Kernel (``module()`` a one-kernel Module).

    The launch attributes are kept as given (lists become tuples; grid entries that are ints or parameter names
    become host expressions), so that the verifier judges them exactly as it judges the text form's:
    ``block=(256.0, 1, 1)`` verifies to ``<builder>:0:0: @k: block = (256.0, 1, 1): x is the float 256.0, ...``."""

    def __init__(self, name: str, grid=None, block=None, cluster=None, non_portable_cluster=None, min_ctas_per_sm=None,
                 **params):
        self.params = {p: Value(p, *_unspelled(t)[:1], spelling=_unspelled(t)[1]) for p, t in params.items()}
        attrs = {}
        if grid is not None:
            attrs["grid"] = (tuple(_host_or_same(e) for e in grid) if isinstance(grid, (tuple, list))
                             else _host_or_same(grid))
        for key, value in (("block", block), ("cluster", cluster)):
            if value is not None:
                attrs[key] = tuple(value) if isinstance(value, list) else value
        if non_portable_cluster is not None:
            attrs["non_portable_cluster"] = non_portable_cluster
        if min_ctas_per_sm is not None:
            attrs["min_ctas_per_sm"] = min_ctas_per_sm
        self.kernel = Kernel(name, list(self.params.values()), attrs, Region())
        self.b = Builder(self.kernel.body, taken=self.params)

    def __getitem__(self, name: str) -> Value:
        return self.params[name]

    def finish(self) -> Kernel:
        return self.kernel

    def module(self, file: str = "<builder>") -> Module:
        return Module([self.kernel], file)
