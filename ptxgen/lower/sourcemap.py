"""From PTX lines back to IR ops.

Every LLVM instruction the lowering builds carries a ``!dbg`` location: the ``file:line:col`` of the op it was
emitted for (ops built in Python without a location get a synthetic one: file ``<@kernel>``, line = the op's
ordinal). The compile unit is ``DebugDirectivesOnly``, so the NVPTX backend writes only ``.file`` / ``.loc``
directives — no DWARF sections, no ``debug`` target flag, optimization unchanged — and ptxas with ``-lineinfo``
would carry them into the cubin for profilers. A ptxas message names a PTX line; the last ``.loc`` above it names
the op.
"""
from __future__ import annotations

import re

from ..ir.core import walk

_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')


def op_locations(kernel) -> dict:
    """op → (file, line, column) for every op of ``kernel`` (synthetic for ops without a source location)."""
    out = {}
    for k, op in enumerate(walk(kernel.body)):
        loc = op.loc
        if loc is not None and loc.line > 0:
            out[op] = (str(loc.file), int(loc.line), max(1, int(loc.column)))
        else:
            out[op] = (f"<@{kernel.name}>", k + 1, 1)
    return out


def ops_at(kernel) -> dict:
    """(file, line, column) → op: the inverse of ``op_locations``."""
    return {loc: op for op, loc in op_locations(kernel).items()}


def source_of(ptx: str, line_no: int):
    """(file, line, column, exact) of the last ``.loc`` at or above 1-based PTX line ``line_no``; None if none.
    A ``.loc`` of line 0 marks code LLVM merged from several ops: the scan goes on upward and ``exact`` is False."""
    lines = ptx.splitlines()
    files = {}
    for text in lines:
        m = _FILE.match(text)
        if m:
            files[int(m.group(1))] = m.group(2)
    exact = True
    for n in range(min(line_no, len(lines)), 0, -1):
        m = _LOC.match(lines[n - 1])
        if m:
            f, line, col = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if line == 0:
                exact = False
                continue
            return files.get(f, f"<file {f}>"), line, col, exact
    return None


def explain(ptx: str, log: str, kernel, name: str = "kernel.ptx") -> list:
    """For each PTX line a ptxas message names (``line N``): ``name:N: <ptx text>  <- op at file:line:col``."""
    by_loc = ops_at(kernel)
    lines = ptx.splitlines()
    out, seen = [], set()
    for m in re.finditer(r"line (\d+)", log):
        n = int(m.group(1))
        if n in seen or not 1 <= n <= len(lines):
            continue
        seen.add(n)
        src = source_of(ptx, n)
        op = by_loc.get(src[:3]) if src else None
        how = "from" if src and src[3] else "near (LLVM merged code of several ops)"
        if op is not None:
            origin = f"{how} {op.name} at {src[0]}:{src[1]}:{src[2]}"
        elif src:
            origin = f"{how} {src[0]}:{src[1]}:{src[2]}"
        else:
            origin = "not attributable to an op"
        out.append(f"  {name}:{n}: {lines[n - 1].strip()}  <- {origin}")
    return out


_DBG = re.compile(r"!dbg !(\d+)")


def llvm_origin(message: str, llvm_ir: str, kernel):
    """The op whose instruction an LLVM message quotes (its ``!dbg !N`` resolved through the module's
    ``!N = !DILocation(line: L, column: C, ...)``), or None when the message names no located instruction."""
    m = _DBG.search(message)
    if m is None:
        return None
    loc = re.search(rf"^!{m.group(1)} = !DILocation\(line: (\d+), column: (\d+)", llvm_ir, re.M)
    if loc is None:
        return None
    line, column = int(loc.group(1)), int(loc.group(2))
    for op, (_file, op_line, op_column) in op_locations(kernel).items():
        if (op_line, op_column) == (line, column):
            return op
    return None
