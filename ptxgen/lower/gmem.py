"""Lowering of gmem.load and gmem.store: the address plan of a thread's values, then the loads or the stores.

``GmemAddresses(lx, view, thread, tv, dtype)`` emits the thread-dependent part once (its coordinates and base pointer,
from ``plans.plan_access``; or, when the TV layout does not split into a thread part plus a constant per value, the
thread's tile index) and gives each value's coordinates, pointer and in-bounds predicate. ``load`` and ``store`` walk
the plan's vector groups: a group of ``width`` values along the contiguous mode is one vector access where the whole
vector is inside the tensor, element by element at the edge.

Example: a ``(2,64)`` f32 tile of a row-major tensor aligned to 16 bytes, tv ``((32,2),2):((4,1),2)``: each thread's
two values are consecutive columns, so ``load`` emits one ``ld.global.v2.f32`` guarded by a branch on "both columns
inside", with the two guarded scalar loads on the edge path.
"""
from __future__ import annotations

from llvmlite import ir

import layoutc as lc

from ..ir.ops import element_bytes
from ..ir.types import ScalarType
from . import ptx_table
from .plans import coordinate_layout, plan_access
from .values import I8, I16, I32, I64, GView, memory_type, pow2_divisor


class GmemAddresses:
    """The addresses of one thread's values of a gmem.load/store (see the module docstring).

    ``width``: values per vector access (1: scalar); ``exact``: the contiguous extent is a multiple of ``width``
    (a vector is all inside or all outside); ``checked``: ``{vector_check = true}`` widened the vectors beyond what
    the specialization proves aligned, so each one also tests its address at run time (``vector_ok``) and falls back
    to elements; ``groups``: the value indices of each access; ``mem_t``, ``esize``:
    the element's LLVM memory type and bytes. Post: ``pointer(v)`` points at the element of value ``v`` and
    ``inside(coords(v))`` holds iff that element is inside the tensor — with ``unchecked`` (``{unchecked = true}``:
    the program guarantees every element is) it is the constant true and no bound is compared."""

    def __init__(self, lx, view: GView, thread, tv, dtype: ScalarType, vector_check: bool = False,
                 unchecked: bool = False):
        b = lx.b
        self.lx, self.view, self.tv, self.dtype = lx, view, tv, dtype
        self.unchecked = unchecked
        tensor = view.tensor
        spec = tensor.spec
        self.rank = tensor.rank
        self.mem_t = memory_type(dtype)
        self.esize = element_bytes(dtype)
        self.c = c = spec.contiguous
        max_width = 1
        if c is not None and spec.aligned and dtype.name != "i1":
            max_width = min(16 // self.esize, pow2_divisor(view.multiples[c]))
        # {vector_check = true}: wider vectors than the specialization proves aligned, each checked at run time
        self.checked = (vector_check and c is not None and dtype.name != "i1" and 16 // self.esize > max_width
                        and plan_access(tv, view.shape, c, 16 // self.esize).width > max_width)
        if self.checked:
            max_width = 16 // self.esize
        plan = plan_access(tv, view.shape, c, max_width)
        self.plan = plan
        # stride-0 modes (an expanded view) move no address: their coordinates only decide "inside"
        self.broadcast = tuple(spec.broadcast) if plan.coords is not None else ()
        self.width = plan.width
        # a checked vector may start anywhere along the contiguous mode: the extent's multiple says nothing of it
        self.exact = self.width > 1 and not self.checked and spec.extent_multiple % self.width == 0
        if not self.checked and self.width > lx.vector_widths.get(tensor.name, 1):
            lx.vector_widths[tensor.name] = self.width
        self.groups = plan.groups
        # thread-dependent coordinates (i32) per mode, and the thread's base pointer
        if plan.coords is not None:
            self.base = [b.add(view.origin[m], lx.emit_layout(plan.coords[m].thread, thread)) for m in range(self.rank)]
            offset = None
            for m in range(self.rank):
                if m in self.broadcast:
                    continue
                term = b.sext(self.base[m], I64)
                if m != c:
                    term = b.mul(term, tensor.stride(m))
                offset = term if offset is None else b.add(offset, term)
            self.thread_ptr = tensor.ptr if offset is None else b.gep(tensor.ptr, [offset], source_etype=self.mem_t)
        else:  # decode each value's tile index at run time
            self.thread = thread
            self.cl = [coordinate_layout(view.shape, m) for m in range(self.rank)]

    def coords(self, v) -> list:
        """The i32 coordinates (one per mode) of value ``v``'s element."""
        lx, b, view, plan = self.lx, self.lx.b, self.view, self.plan
        if plan.coords is not None:
            return [b.add(self.base[m], lx.i32(plan.coords[m].values[v])) if plan.coords[m].values[v] else self.base[m]
                    for m in range(self.rank)]
        idx = lx.emit_tv_index(self.tv, self.thread, v)
        return [b.add(view.origin[m], lx.emit_layout(self.cl[m], idx)) for m in range(self.rank)]

    def pointer(self, v):
        """The global pointer of value ``v``'s element."""
        lx, b, tensor, plan, c = self.lx, self.lx.b, self.view.tensor, self.plan, self.c
        if plan.coords is not None:
            off = None
            for m in range(self.rank):
                val = plan.coords[m].values[v]
                if not val or m in self.broadcast:
                    continue
                term = lx.i64(val) if m == c else b.mul(lx.i64(val), tensor.stride(m))
                off = term if off is None else b.add(off, term)
            return self.thread_ptr if off is None else b.gep(self.thread_ptr, [off], source_etype=self.mem_t)
        cs = self.coords(v)
        off = None
        for m in range(self.rank):
            term = b.sext(cs[m], I64)
            if m != c:
                term = b.mul(term, tensor.stride(m))
            off = term if off is None else b.add(off, term)
        return b.gep(tensor.ptr, [off], source_etype=self.mem_t)

    def inside(self, cs, lane_offset: int = 0, modes=None):
        """The i1 "inside the tensor" of the element at coordinates ``cs``, ``lane_offset`` further along the
        contiguous mode (along ``modes`` only, default all)."""
        b, c, tensor = self.lx.b, self.c, self.view.tensor
        if self.unchecked:
            return ir.Constant(ir.IntType(1), 1)
        preds = []
        for m in (range(self.rank) if modes is None else modes):
            cm = cs[m] if not (m == c and lane_offset) else b.add(cs[m], self.lx.i32(lane_offset))
            preds.append(b.icmp_unsigned("<", cm, tensor.extents[m]))
        return _and_all(b, preds)

    def vector_inside(self, cs, modes=None):
        """The i1 "the whole vector starting at ``cs`` is inside" (its first and last lane, or the first alone where
        the extent is a multiple of the width), along ``modes`` only (default all)."""
        if self.exact:
            return self.inside(cs, modes=modes)
        return _and_all(self.lx.b, [self.inside(cs, modes=modes), self.inside(cs, self.width - 1, modes=modes)])

    def vector_ok(self, cs, ptr, modes=None):
        """The i1 "one vector access from ``ptr`` (coordinates ``cs``) is legal": the whole vector inside (along
        ``modes``) and, for a checked plan (``{vector_check = true}``), ``ptr`` aligned to the vector's bytes."""
        full = self.vector_inside(cs, modes)
        if not self.checked:
            return full
        b = self.lx.b
        low = b.and_(b.ptrtoint(ptr, I64), self.lx.i64(self.width * self.esize - 1))
        return b.and_(full, b.icmp_unsigned("==", low, self.lx.i64(0)))

    def to_mem(self, x):
        return self.lx.b.zext(x, I8) if self.dtype.name == "i1" else x

    def from_mem(self, x):
        return self.lx.b.icmp_unsigned("!=", x, ir.Constant(I8, 0)) if self.dtype.name == "i1" else x


def load(lx, view: GView, thread, tv, dtype: ScalarType, other=0.0, cache: str = "normal",
         vector_check: bool = False, unchecked: bool = False) -> list:
    """gmem.load: the thread's values (value order), ``other`` where an element is outside the tensor; every access
    (vector, edge element) carries ``cache``'s qualifier (``ptx_table.CACHE_QUALIFIERS``: ``streaming`` →
    ``ld.global.cs.v4.b32``), ``normal`` leaves them plain LLVM loads.

    A view with stride-0 modes (``TensorSpec.broadcast``: a bias row expanded over the tile's rows) is read once per
    distinct address: the groups whose coordinates differ only along those modes share one (vector) load, guarded by
    the other modes' bounds, and each value is ``other`` where its own broadcast coordinate is outside. The GEMM
    epilogue's bias through the accumulator's TV layout: one ``bf16x2`` load per column pair instead of one per
    column pair and row. ``vector_check``: ``{vector_check = true}`` (``GmemAddresses``); ``unchecked``:
    ``{unchecked = true}``, every access a plain (vector) load, no bounds compared, no branch. Post: one LLVM value of
    ``dtype``'s register type per value of ``tv``."""
    b = lx.b
    at = GmemAddresses(lx, view, thread, tv, dtype, vector_check, unchecked)
    other_c = lx.const(dtype, other)
    results = [None] * lc.size(tv[1])
    kept = [m for m in range(at.rank) if m not in at.broadcast]
    # values at one element (a TV layout with stride-0 value modes: a per-row scale broadcast over a row's values)
    # are loaded once: LLVM does not merge the guarded loads' diamonds
    same_element = {}
    loaded = {}
    for group in at.groups:
        v0 = group[0]
        if len(group) == 1 and at.plan.coords is not None:
            element = tuple(at.plan.coords[m].values[v0] for m in range(at.rank))
            if element in same_element:
                results[v0] = results[same_element[element]]
                continue
            same_element[element] = v0
        cs = at.coords(v0)
        if not at.broadcast:
            lanes = _load_group(lx, at, group, cs, at.pointer(v0), other_c, cache=cache)
            for v, x in zip(group, lanes):
                results[v] = x
            continue
        key = tuple(at.plan.coords[m].values[v0] for m in kept)
        if key not in loaded:
            loaded[key] = _load_group(lx, at, group, cs, at.pointer(v0), other_c, kept, cache)
        own = at.inside(cs, modes=at.broadcast)
        for v, x in zip(group, loaded[key]):
            results[v] = b.select(own, x, other_c)
    return results


def _load_group(lx, at: GmemAddresses, group, cs, ptr, other_c, modes=None, cache: str = "normal") -> list:
    """The values of one access group (``at.width`` lanes from ``ptr``, coordinates ``cs`` of its first), ``other``
    where outside the tensor along ``modes`` (default all): one vector load where the whole vector is inside, element
    by element at the edge."""
    b = lx.b
    k, mem_t, esize = at.width, at.mem_t, at.esize
    if at.unchecked and not at.checked:
        if k == 1:
            return [at.from_mem(_load(lx, ptr, mem_t, esize, cache))]
        vec = _load(lx, ptr, ir.VectorType(mem_t, k), k * esize, cache)
        return [at.from_mem(b.extract_element(vec, lx.i32(j))) for j in range(k)]
    if k == 1:
        return [_guarded_load(lx, at.inside(cs, modes=modes), ptr, mem_t, esize, other_c, at.from_mem, cache)]
    vt = ir.VectorType(mem_t, k)
    full = at.vector_ok(cs, ptr, modes)
    fast, slow, done = lx.block("vec"), lx.block("vec.edge"), lx.block("vec.done")
    b.cbranch(full, fast, slow)
    b.position_at_end(fast)
    vec = _load(lx, ptr, vt, k * esize, cache)
    fast_end = b.block
    b.branch(done)
    b.position_at_end(slow)
    # the edge path builds the same vector, so the two paths meet in ONE vector phi: a 16-bit pair stays one 32-bit
    # register from the load to its uses (per-element phis would hold each half in a register of its own)
    # (vectors are never of i1, so memory and register types agree here)
    slow_vec = ir.Constant(vt, None)
    for j in range(k):
        if at.exact:
            lane = other_c
        else:
            pj = at.inside(cs, j, modes=modes)
            lane_ptr = ptr if j == 0 else b.gep(ptr, [lx.i64(j)], source_etype=mem_t)
            lane = _guarded_load(lx, pj, lane_ptr, mem_t, esize, other_c, at.from_mem, cache)
        slow_vec = b.insert_element(slow_vec, lane, lx.i32(j))
    slow_end = b.block
    b.branch(done)
    b.position_at_end(done)
    phi = b.phi(vt)
    phi.add_incoming(vec, fast_end)
    phi.add_incoming(slow_vec, slow_end)
    return [b.extract_element(phi, lx.i32(j)) for j in range(k)]


def store(lx, view: GView, thread, tv, dtype: ScalarType, values, cache: str = "normal",
          vector_check: bool = False, unchecked: bool = False) -> None:
    """gmem.store: write the thread's ``values`` (value order) where their elements are inside the tensor, every
    access with ``cache``'s qualifier (``streaming`` → ``st.global.cs.v4.b32``; ``normal``: plain LLVM stores and
    the unqualified predicated store); ``vector_check``: ``{vector_check = true}`` (``GmemAddresses``);
    ``unchecked``: ``{unchecked = true}``, plain (vector) stores without predicates. Post: no element outside the
    tensor is written (with ``unchecked``, given the program's guarantee)."""
    b = lx.b
    at = GmemAddresses(lx, view, thread, tv, dtype, vector_check, unchecked)
    k, mem_t, esize = at.width, at.mem_t, at.esize

    def packed(vt, group):
        vec = ir.Constant(vt, None)
        for j, v in enumerate(group):
            vec = b.insert_element(vec, at.to_mem(values[v]), lx.i32(j))
        return vec

    for group in at.groups:
        v0 = group[0]
        cs = at.coords(v0)
        ptr = at.pointer(v0)
        if at.unchecked and not at.checked:
            _store(lx, ptr, at.to_mem(values[v0]) if k == 1 else packed(ir.VectorType(mem_t, k), group), k * esize,
                   cache)
            continue
        if k == 1:
            _branched_store(lx, at.inside(cs), ptr, at.to_mem(values[v0]), esize, cache)
            continue
        vt = ir.VectorType(mem_t, k)
        full = at.vector_ok(cs, ptr)
        if at.exact and k * esize >= 4:  # all of the vector or none of it: no branch
            _predicated_store(lx, full, ptr, packed(vt, group), k * esize, cache)
            continue
        fast, slow, done = lx.block("vec"), lx.block("vec.edge"), lx.block("vec.done")
        b.cbranch(full, fast, slow)
        b.position_at_end(fast)
        _store(lx, ptr, packed(vt, group), k * esize, cache)
        b.branch(done)
        b.position_at_end(slow)
        if not at.exact:
            for j, v in enumerate(group):
                pj = at.inside(cs, j)
                lane_ptr = ptr if j == 0 else b.gep(ptr, [lx.i64(j)], source_etype=mem_t)
                _branched_store(lx, pj, lane_ptr, at.to_mem(values[v]), esize, cache)
        b.branch(done)
        b.position_at_end(done)


def _and_all(b, preds):
    out = None
    for p in preds:
        out = p if out is None else b.and_(out, p)
    return out


def _guarded_load(lx, pred, ptr, mem_t, esize, other, from_mem, cache="normal"):
    b = lx.b
    then, done = lx.block("ld"), lx.block("ld.done")
    start = b.block
    b.cbranch(pred, then, done)
    b.position_at_end(then)
    val = from_mem(_load(lx, ptr, mem_t, esize, cache))
    b.branch(done)
    b.position_at_end(done)
    phi = b.phi(val.type)
    phi.add_incoming(val, then)
    phi.add_incoming(other, start)
    return phi


def _predicated_store(lx, pred, ptr, vec, nbytes, cache="normal"):
    """Store the vector ``vec`` of ``nbytes`` (4, 8 or 16) bytes at ``ptr`` (aligned to that) where ``pred`` holds:
    ONE predicated ``st.global`` (``ptx_table.st_global_if``), as Triton stores edge tiles. No branch, so a
    fragment's epilogue stays one basic block: gemm_hopper's 64 guarded bf16x2 stores were 64 diamonds, a sizeable
    share of LLVM's time on its cold compile. Only whole vectors (all lanes in or all out) go this way: 128 predicated
    SCALAR stores of an accumulator made ptxas serialize the wgmmas (C7514), so element-wise edges keep their
    branches."""
    b = lx.b
    words = nbytes // 4
    raw = b.bitcast(vec, I32 if words == 1 else ir.VectorType(I32, words))
    parts = [raw] if words == 1 else [b.extract_element(raw, lx.i32(j)) for j in range(words)]
    ptx_table.emit(lx, ptx_table.st_global_if(nbytes, cache), [b.zext(pred, I32), b.ptrtoint(ptr, I64), *parts])


def _branched_store(lx, pred, ptr, value, align, cache="normal"):
    b = lx.b
    then, done = lx.block("st"), lx.block("st.done")
    b.cbranch(pred, then, done)
    b.position_at_end(then)
    _store(lx, ptr, value, align, cache)
    b.branch(done)
    b.position_at_end(done)


# the integer registers of an access of so many bytes (ptx_table's ``ld_global``/``st_global`` operands)
_WORDS = {1: (I16, 1), 2: (I16, 1), 4: (I32, 1), 8: (I32, 2), 16: (I32, 4)}


def _load(lx, ptr, typ, nbytes: int, cache: str):
    """The ``nbytes`` bytes at ``ptr`` (aligned to them) as LLVM type ``typ`` (an element or a vector of them): a
    plain LLVM load for ``normal``, else ``ptx_table.ld_global(nbytes, cache)`` (``ld.global.cs.v4.b32``) and its
    words reinterpreted as ``typ``."""
    b = lx.b
    if cache == "normal":
        return b.load(ptr, typ=typ, align=nbytes)
    word, count = _WORDS[nbytes]
    raw = ptx_table.emit(lx, ptx_table.ld_global(nbytes, cache), [b.ptrtoint(ptr, I64)])
    if count == 1:
        return b.bitcast(b.trunc(raw, I8) if nbytes == 1 else raw, typ)
    vec = ir.Constant(ir.VectorType(word, count), None)
    for j in range(count):
        vec = b.insert_element(vec, b.extract_value(raw, j), lx.i32(j))
    return b.bitcast(vec, typ)


def _store(lx, ptr, value, nbytes: int, cache: str) -> None:
    """Store ``value`` (``nbytes`` bytes: an element or a vector of them) at ``ptr`` (aligned to them): a plain LLVM
    store for ``normal``, else ``ptx_table.st_global(nbytes, cache)`` on its words (``st.global.cs.v4.b32``)."""
    b = lx.b
    if cache == "normal":
        b.store(value, ptr, align=nbytes)
        return
    word, count = _WORDS[nbytes]
    if count == 1:
        raw = b.zext(b.bitcast(value, I8), I16) if nbytes == 1 else b.bitcast(value, word)
        words = [raw]
    else:
        vec = b.bitcast(value, ir.VectorType(word, count))
        words = [b.extract_element(vec, lx.i32(j)) for j in range(count)]
    ptx_table.emit(lx, ptx_table.st_global(nbytes, cache), [b.ptrtoint(ptr, I64), *words])
