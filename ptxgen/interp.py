"""The CPU interpreter: runs a verified kernel on numpy, CTA by CTA, all threads of a CTA in lock step.

A scalar value is an array over the CTA's threads; a fragment an array (threads, values). ``scf.if`` runs each
region under a mask of the threads that take it; stores write only active threads. Global tensors are numpy
arrays, updated in place. What each op does is defined with the op in ``ptxgen.ir.ops``.
"""
from __future__ import annotations

import itertools

import numpy as np

from .ir.core import Kernel, Region
from .ir.ops import OPS, numpy_dtype
from .ir.types import GlobalTensorType, ScalarType
from .verify import verify


class InterpreterError(RuntimeError):
    """The kernel did something at run time the IR forbids (``file:line:col: op: message``)."""


class _CTA:
    """The state of one CTA while it runs: values, the active-thread mask and launch geometry."""

    def __init__(self, block_index, block_dim, grid_dim, cache):
        self.block_index = block_index
        self.block_dim = block_dim
        self.grid_dim = grid_dim
        self.nthreads = block_dim[0] * block_dim[1] * block_dim[2]
        self.linear_thread = np.arange(self.nthreads, dtype=np.int64)
        bx, by = block_dim[0], block_dim[1]
        self.thread_index = (self.linear_thread % bx, (self.linear_thread // bx) % by, self.linear_thread // (bx * by))
        self.mask = np.ones(self.nthreads, dtype=bool)
        self.values = {}
        self.yielded = None
        self._cache = cache

    # -- used by op definitions ---------------------------------------------------------------------------------
    def get(self, value):
        try:
            return self.values[id(value)]
        except KeyError:
            raise InterpreterError(f"%{value.name} has no value (it was not computed on this path)") from None

    def set(self, value, data) -> None:
        self.values[id(value)] = data

    def uniform(self, value, op) -> int:
        """The one value all active threads hold (loop bounds); a divergent value is an error."""
        data = np.asarray(self.get(value))[self.mask]
        if data.size == 0:
            return int(np.asarray(self.get(value)).flat[0])
        if np.any(data != data[0]):
            self.fail(op, f"%{value.name} differs between threads ({sorted(set(data.tolist()))[:4]}...) "
                          "where the interpreter needs one value for the whole CTA")
        return int(data[0])

    def cached(self, key, compute):
        """Memoise per-kernel tables (TV tables, tile coordinates) across CTAs."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def fail(self, op, message: str):
        raise InterpreterError(f"{op.loc}: {op.name}: {message}")

    def run_region(self, region: Region, mask=None) -> list:
        """Run ``region`` for the active threads (restricted to ``mask``); returns its yielded values."""
        saved_mask, saved_yield = self.mask, self.yielded
        if mask is not None:
            self.mask = self.mask & mask
        self.yielded = []
        try:
            if self.mask.any():
                for op in region.ops:
                    OPS[op.name].interpret(op, self)
            elif region.ops and region.ops[-1].name == "scf.yield":
                # no thread takes this path: yield placeholders of the right shape (they are masked away)
                self.yielded = [np.zeros_like(self.get(x)) if id(x) in self.values else None
                                for x in region.ops[-1].operands]
            return self.yielded
        finally:
            self.mask, self.yielded = saved_mask, saved_yield


def _launch_dims(kernel: Kernel, env: dict):
    def triple(value, default):
        if value is None:
            return default
        items = list(value) if isinstance(value, tuple) else [value]
        items += [1] * (3 - len(items))
        return tuple(int(x.evaluate(env)) if hasattr(x, "evaluate") else int(x) for x in items)

    return triple(kernel.attrs.get("grid"), (1, 1, 1)), triple(kernel.attrs.get("block"), (1, 1, 1))


def interpret(ir, args: dict, kernel: str | None = None, grid=None, check: bool = True) -> None:
    """Run a kernel on the CPU: ``interpret(module, {"x": x, "z": z, "n": 4096})``.

    ``args`` maps parameter names (without %) to numpy arrays (gtensor parameters, modified in place) or numbers.
    ``grid`` overrides the kernel's grid attribute. Pre: the IR verifies (checked unless ``check=False``).
    Post: global arrays hold what the kernel stored; a runtime violation raises InterpreterError naming the op.
    """
    k = ir if isinstance(ir, Kernel) else (ir.kernel(kernel) if kernel else ir.kernels[0])
    if check:
        verify(k)
    missing = [p.name for p in k.params if p.name not in args]
    if missing:
        raise InterpreterError(f"@{k.name}: missing arguments {', '.join(missing)}")
    env = {}
    for p in k.params:
        value = args[p.name]
        if isinstance(p.type, GlobalTensorType):
            if not isinstance(value, np.ndarray) or value.ndim != p.type.rank:
                raise InterpreterError(f"@{k.name}: argument {p.name} must be a rank-{p.type.rank} numpy array")
        elif isinstance(p.type, ScalarType) and not np.isscalar(value):
            raise InterpreterError(f"@{k.name}: argument {p.name} must be a number")
        env[p.name] = value
    grid_dim, block_dim = _launch_dims(k, env)
    if grid is not None:
        grid_dim = tuple(grid) + (1,) * (3 - len(grid))
    cache = {}
    for bz, by, bx in itertools.product(range(grid_dim[2]), range(grid_dim[1]), range(grid_dim[0])):
        cta = _CTA((bx, by, bz), block_dim, grid_dim, cache)
        for p in k.params:
            value = env[p.name]
            cta.set(p, value if isinstance(p.type, GlobalTensorType)
                    else np.full(cta.nthreads, value, dtype=numpy_dtype(p.type)))
        cta.run_region(k.body)


__all__ = ["InterpreterError", "interpret"]
