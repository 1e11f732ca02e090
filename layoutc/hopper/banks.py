"""Shared-memory bank-conflict analysis of a warp's accesses to a (swizzled) smem layout.

The model (what the functions here count)
-----------------------------------------
* Shared memory has 32 banks of 4 bytes: byte address ``a`` lies in word ``a // 4`` and bank ``(a // 4) % 32``.
* One warp instruction (an *access*) has every active lane touch ``access_bytes`` contiguous bytes at an address
  aligned to ``access_bytes`` (1, 2, 4, 8 or 16 bytes; a misaligned address is an error, as on the hardware).
* The hardware splits an access into *phases* of at most 128 bytes: 32 lanes for accesses of up to 4 bytes,
  2 phases of 16 lanes (half-warps, lanes 0-15 then 16-31) for 8 bytes, 4 phases of 8 lanes (quarter-warps)
  for 16 bytes. Conflicts are counted within a phase only; lanes of different phases never conflict.
* Within a phase the distinct 4-byte words touched are served one word per bank per wavefront: lanes reading the
  same word share it (broadcast, no conflict); distinct words in the same bank serialize. A phase therefore takes
  ``max over banks of (distinct words in that bank)`` wavefronts — its *n-way* conflict.
* The *ideal* wavefronts of a phase are ``ceil(distinct words / 32)`` (1 for any non-empty phase of at most 128
  bytes); ``replays = wavefronts - ideal``.

An access is ``ways`` = the worst phase's n-way conflict and ``wavefronts`` = the sum over its phases; a report sums
wavefronts over accesses and keeps the worst ``ways``. This is the CUDA programming guide's model of one
instruction; it ignores effects between instructions and is not calibrated against hardware counters here.

A thread→smem mapping is a TV layout: ``tv(t, v)`` is the 1-D coordinate of the smem tile (colexicographic over the
tile's shape, as everywhere in CuTe) that thread ``t`` touches as its value ``v``. The byte address is then
``byte_address(smem, dtype, tv(t, v), base)`` — the smem layout's outer Swizzle acts on absolute byte addresses.

Examples (pinned in ``tests/layoutc/test_banks.py``): a bf16 K-major ``Sw<3,4,3> o 0 o (8,64):(64,1)`` atom read by
``ldmatrix_access((8,64), 'bf16')`` (``((8,4),8):((1,64),8)``: lane t reads row t%8, 16-byte chunk t//8) is 1-way;
the same access to ``(8,64):(64,1)`` is 8-way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..algebra import composition
from ..errors import LayoutError
from ..int_tuple import is_int, leaves, product
from ..layout import Layout, layout_values
from ..swizzle import ComposedLayout, Swizzle
from .dtypes import dtype as _dtype
from .smem import split_smem_layout

BANKS = 32
BANK_BYTES = 4
PHASE_BYTES = BANKS * BANK_BYTES  # 128: one wavefront serves at most one word per bank
WARP = 32
ACCESS_SIZES = (1, 2, 4, 8, 16)


def lanes_per_phase(access_bytes: int) -> int:
    """Lanes processed together: ``lanes_per_phase(16)`` → 8 (quarter-warps), 8 → 16 (half-warps), ≤ 4 → 32.

    Post: ``lanes_per_phase(b) * max(b, 4) <= 128`` — a phase never asks for more than one word per bank per lane.
    """
    _check_access_bytes(access_bytes)
    return WARP if access_bytes <= BANK_BYTES else PHASE_BYTES // access_bytes


def _check_access_bytes(access_bytes) -> None:
    if access_bytes not in ACCESS_SIZES:
        raise LayoutError("bank_conflicts", (access_bytes,),
                          f"access_bytes must be one of {ACCESS_SIZES} (bytes per lane per instruction)")


@dataclass(frozen=True)
class AccessReport:
    """One warp instruction: ``ways`` (worst phase's n-way conflict), ``wavefronts`` (sum over phases),
    ``ideal_wavefronts``, per-phase ``phase_ways``, and the worst phase's worst bank with its distinct words."""

    ways: int
    wavefronts: int
    ideal_wavefronts: int
    phase_ways: tuple
    worst_phase: int
    worst_bank: int
    worst_words: tuple  # the distinct 4-byte words (byte address // 4) that bank had to serve, sorted

    @property
    def replays(self) -> int:
        return self.wavefronts - self.ideal_wavefronts


@dataclass(frozen=True)
class BankReport:
    """Summary of a warp's accesses: ``ways`` (worst n-way over all accesses; 1 means conflict-free, 0 means no
    active lane), ``wavefronts`` and ``ideal_wavefronts`` (sums), ``replays`` (their difference), ``per_access``
    (one AccessReport per instruction), ``access_bytes`` and ``lanes_per_phase``.

    Post: ``ideal_wavefronts <= wavefronts <= ideal_wavefronts * ways`` whenever every phase touches ≤ 128 bytes.
    """

    access_bytes: int
    lanes_per_phase: int
    per_access: tuple = field(repr=False)
    ways: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0

    @property
    def replays(self) -> int:
        return self.wavefronts - self.ideal_wavefronts

    @property
    def conflict_free(self) -> bool:
        return self.ways <= 1

    def __str__(self) -> str:
        n = len(self.per_access)
        head = (f"{n} access{'es' if n != 1 else ''} of {self.access_bytes} B/lane "
                f"({self.lanes_per_phase} lanes/phase): {self.ways}-way, {self.wavefronts} wavefronts "
                f"(ideal {self.ideal_wavefronts}, {self.replays} replays)")
        lines = [head]
        for i, a in enumerate(self.per_access):
            line = f"  access {i}: {a.ways}-way, {a.wavefronts} wavefronts (ideal {a.ideal_wavefronts})"
            if a.ways > 1:
                words = ", ".join(str(w) for w in a.worst_words[:8]) + (", ..." if len(a.worst_words) > 8 else "")
                line += f"; phase {a.worst_phase} bank {a.worst_bank} serves words {words}"
            lines.append(line)
        return "\n".join(lines)


def _phase_cost(addresses, access_bytes):
    """(ways, ideal wavefronts, worst bank, its words) of one phase's lane byte addresses (None = inactive)."""
    words = set()
    last = access_bytes - 1
    for a in addresses:
        if a is None:
            continue
        words.update(range(a // BANK_BYTES, (a + last) // BANK_BYTES + 1))
    if not words:
        return 0, 0, -1, ()
    per_bank = {}
    for w in words:
        per_bank.setdefault(w % BANKS, []).append(w)
    # Deterministic worst bank: most words, then lowest bank number.
    bank = min(per_bank, key=lambda b: (-len(per_bank[b]), b))
    ideal = -(-len(words) // BANKS)
    return len(per_bank[bank]), ideal, bank, tuple(sorted(per_bank[bank]))


def bank_conflicts_addresses(accesses, access_bytes: int) -> BankReport:
    """The core: one list of lane byte addresses per warp instruction (index = lane, ``None`` = inactive lane).

    ``bank_conflicts_addresses([[128 * t for t in range(32)]], 4).ways`` → 32 (a column of a row-major 32×32 f32
    tile); ``[[132 * t for t in range(32)]]`` (rows padded by one f32) → 1.

    Pre: every address is a non-negative multiple of ``access_bytes`` ∈ {1,2,4,8,16}; at most 32 lanes per access.
    Post: the counts follow the module's model; permuting lanes within a phase changes nothing.
    """
    _check_access_bytes(access_bytes)
    per_phase = lanes_per_phase(access_bytes)
    reports = []
    for k, lanes in enumerate(accesses):
        lanes = list(lanes)
        if len(lanes) > WARP:
            raise LayoutError("bank_conflicts_addresses", (k,), f"access {k} has {len(lanes)} lanes; a warp has 32")
        for lane, a in enumerate(lanes):
            if a is None:
                continue
            if not is_int(a) or a < 0:
                raise LayoutError("bank_conflicts_addresses", (k, lane), f"address {a!r} is not a non-negative int")
            if a % access_bytes:
                raise LayoutError("bank_conflicts_addresses", (k, lane),
                                  f"lane {lane} address {a} is misaligned for a {access_bytes}-byte access")
        phase_ways, wavefronts, ideal = [], 0, 0
        worst = (0, 0, -1, ())  # (ways, phase, bank, words)
        for p in range(0, WARP, per_phase):
            ways, ideal_p, bank, words = _phase_cost(lanes[p:p + per_phase], access_bytes)
            phase_ways.append(ways)
            wavefronts += ways
            ideal += ideal_p
            if ways > worst[0]:
                worst = (ways, p // per_phase, bank, words)
        reports.append(AccessReport(worst[0], wavefronts, ideal, tuple(phase_ways), worst[1], worst[2], worst[3]))
    return BankReport(
        access_bytes=access_bytes,
        lanes_per_phase=per_phase,
        per_access=tuple(reports),
        ways=max((r.ways for r in reports), default=0),
        wavefronts=sum(r.wavefronts for r in reports),
        ideal_wavefronts=sum(r.ideal_wavefronts for r in reports),
    )


# -- TV layouts over smem layouts ------------------------------------------------------------------------------

def _tv_modes(tv_layout):
    """(threads, values) of a TV layout — a Layout or one composed with a swizzle (``Sw o off o TV``: thread t's
    value v is element ``Sw(off + TV(t, v))``, an XOR thread map); a rank-1 layout is one value per thread."""
    swizzled = (isinstance(tv_layout, ComposedLayout) and isinstance(tv_layout.outer, Swizzle)
                and isinstance(tv_layout.inner, Layout))
    if not isinstance(tv_layout, Layout) and not swizzled:
        raise LayoutError("bank_conflicts", (tv_layout,),
                          "the thread→smem mapping must be a Layout (thread, value) or Sw<B,M,S> o offset o Layout")
    if tv_layout.rank == 1 or is_int(tv_layout.shape):
        return tv_layout.size, 1
    if tv_layout.rank != 2:
        raise LayoutError("bank_conflicts", (tv_layout,), "a TV layout has two top-level modes: (thread, value)")
    return product(tv_layout.shape[0]), product(tv_layout.shape[1])


def _groups_of(offsets, k: int):
    """The partition of the value indices into groups of ``k`` that every thread's ``offsets`` (one list per thread)
    place at k consecutive offsets starting at a multiple of k — ordered by thread 0's offsets — or None."""
    first = offsets[0]
    values = len(first)
    if values % k:
        return None
    order = sorted(range(values), key=lambda v: first[v])
    groups = [tuple(order[i:i + k]) for i in range(0, values, k)]
    for row in offsets:
        for g in groups:
            start = row[g[0]]
            if start % k or any(row[v] != start + j for j, v in enumerate(g)):
                return None
    return tuple(groups)


def vector_groups(offsets, max_elements: int) -> tuple:
    """How a thread's values group into vector accesses — THE rule of ptxgen's smem.load/store lowering
    (``ptxgen.lower.plans.plan_smem_access`` calls it) and of ``bank_conflicts``' default access width.

    ``offsets[t][v]``: the element offset of thread t's value v before the smem layout's swizzle (a swizzle that keeps
    aligned blocks of ``max_elements`` whole moves each vector whole). Returns ``(k, groups)``: the widest power of
    two ``k ≤ max_elements`` such that one partition of the value indices into groups of k (in increasing offset of
    thread 0) puts, in EVERY thread, each group's values at k consecutive offsets starting at a multiple of k;
    ``k = 1`` (every value alone) when none does, or when two values share an element.

    ``vector_groups([[0, 1, 2, 3], [4, 5, 6, 7]], 4)`` → ``(4, ((0, 1, 2, 3),))``;
    ``vector_groups([[1, 0, 5, 4]], 4)`` → ``(2, ((1, 0), (3, 2)))`` (vectors need not follow the value order).
    Post: every group of the result is one aligned k-element run in every thread.
    """
    values = len(offsets[0]) if offsets else 0
    singles = tuple((v,) for v in range(values))
    if not values or len(set(offsets[0])) != values:
        return 1, singles
    k = 1
    while k * 2 <= max_elements:
        k *= 2
    while k > 1:
        groups = _groups_of(offsets, k)
        if groups is not None:
            return k, groups
        k //= 2
    return 1, singles


def swizzle_chunk_bytes(sw) -> int:
    """Bytes of an aligned block whose addresses a swizzle moves whole (to one contiguous block): 2^(lowest bit it
    reads or writes); 16 (the widest vector) without one. ``Sw<3,4,3>`` → 16, ``Sw<2,1,3>`` → 2."""
    if sw is None or sw.bits == 0:
        return 16
    masks = sw.yyy_mask | sw.zzz_mask
    return masks & -masks


def lowering_access(tv_layout, smem_layout, dtype, base: int = 0) -> tuple:
    """``(access_bytes, groups)``: the vectors ptxgen's smem.load/store lowering emits for this TV layout over this
    smem layout (``vector_groups`` of every thread's element offsets, at most min(16 bytes, the swizzle's chunk, the
    base's alignment)) — what ``bank_conflicts`` counts by default, so the analysis and the PTX agree.

    ``lowering_access(((8,4),(2,4)):((1,64),(32,8)), (8,64):(64,1), 'bf16')`` → ``(16, ((0, 2, 4, 6, 1, 3, 5, 7),))``
    (a thread's 8 columns of one row, two runs interleaved in value order: one 16-byte vector).
    Post: ``access_bytes == k·esize`` for the k of ``vector_groups``; sub-byte element types give (None, None).
    """
    bits = _dtype(dtype).bits
    if bits % 8:
        return None, None
    esize = bits // 8
    sw, offset, inner = split_smem_layout(smem_layout)
    threads, values = _tv_modes(tv_layout)
    element = _inner_of_tv(inner, tv_layout)
    offsets = [[element(t, v) for v in range(values)] for t in range(threads)]
    base_align = (base & -base) if base else 1024
    elem_offset_align = ((offset * esize) & -(offset * esize)) if offset else 1024
    limit = min(16, swizzle_chunk_bytes(sw), base_align, elem_offset_align) // esize
    k, groups = vector_groups(offsets, max(1, limit))
    return k * esize, groups


def _integral(layout) -> bool:
    """A plain Layout whose strides are integers (no basis elements): its 1-D function is a table of ints."""
    return isinstance(layout, Layout) and all(type(d) is int for d in leaves(layout.stride))


def _integral_map(tv_layout) -> bool:
    """An ``_integral`` Layout, or one composed with a swizzle (``Sw o off o TV``): a map from ints to ints whose
    ``layout_values`` is its table."""
    if isinstance(tv_layout, ComposedLayout):
        return isinstance(tv_layout.outer, Swizzle) and _integral(tv_layout.inner)
    return _integral(tv_layout)


def _table_through(outer, tv_layout, count: int):
    """``[outer(tv(i)) for i < count]`` (i the 1-D coordinate t + threads·v of thread t's value v) by two tables of
    ``layout_values`` — the pointwise ``outer(tv((t, v)))`` costs a coordinate walk per value — or None where
    ``outer`` is not an ``_integral`` Layout or ``tv`` not an ``_integral_map`` (a swizzled thread map is one).
    ``_table_through((4,8):(8,1), (8,4):(4,1), 32)[5]`` = 5 (tv(5) = 20, the coordinate (0, 5) of (4,8):(8,1), which
    maps it to 5). Post: entry i == outer(tv(i))."""
    if not (_integral(outer) and _integral_map(tv_layout)):
        return None
    tv = layout_values(tv_layout, count)
    if min(tv) < 0:
        return None
    at = layout_values(outer, max(tv) + 1)
    return [at[x] for x in tv]


@lru_cache(maxsize=256)
def _element_table(inner, tv_layout, count: int):
    """``_inner_of_tv``'s table of ``inner(tv(i))`` for i < count, a tuple, or None where it is evaluated pointwise.
    Cached: an analysis asks for the same (smem layout, TV layout) once per warp, base and access."""
    table = _table_through(inner, tv_layout, count)
    if table is None and isinstance(tv_layout, Layout):
        try:
            composed = composition(inner, tv_layout)
        except LayoutError:
            composed = None
        if _integral(composed):
            table = layout_values(composed, count)
    return None if table is None else tuple(table)


def _inner_of_tv(inner, tv_layout):
    """A function (t, v) → ``inner(tv(t, v))``, the element offset (before offset and swizzle) of thread t's value v:
    a lookup in ``_table_through``'s table (a swizzled thread map too), or in the table of ``inner ∘ tv`` where CuTe's
    composition gives an ``_integral`` Layout (a basis-stride TV layout, a negative index), else evaluated pointwise
    (a composition a divisibility condition refuses) — the same function each way (composition's post-condition)."""
    threads, values = _tv_modes(tv_layout)
    table = _element_table(inner, tv_layout, threads * values)
    if table is not None:
        return lambda t, v: table[t + threads * v]
    rank1 = tv_layout.rank == 1 or is_int(tv_layout.shape)
    return lambda t, v: inner(tv_layout(t) if rank1 else tv_layout((t, v)))


def _thread_smem_map(tv_layout, smem_layout):
    """A function (t, v) → element offset of thread t's value v (``off + inner(tv(t, v))``, ``_inner_of_tv``) and the
    smem layout's swizzle, which ``_bit_address`` applies to the absolute byte."""
    sw, offset, inner = split_smem_layout(smem_layout)
    element = _inner_of_tv(inner, tv_layout)
    return sw, lambda t, v: offset + element(t, v)


def _bit_address(sw, elem_offset: int, bits: int, base: int) -> int:
    # Same rule as smem.byte_address (swizzle on the absolute byte), kept in bits so sub-byte vectors are exact.
    byte = base + (elem_offset * bits) // 8
    return (sw(byte) if sw is not None else byte) * 8 + (elem_offset * bits) % 8


def thread_addresses(tv_layout, smem_layout, dtype, base: int = 0, warp: int = 0) -> list:
    """Byte addresses ``[[addr(t, v) for v in values] for t in the warp's threads]`` (swizzle applied).

    ``thread_addresses(Layout((32,1),(1,0)), Layout((32,32),(32,1)), 'f32')`` → ``[[0], [128], ..., [3968]]``.
    Post: entry ``[l][v] == byte_address(smem_layout, dtype, tv_layout(32*warp + l, v), base)``.
    """
    bits = _dtype(dtype).bits
    threads, values = _tv_modes(tv_layout)
    sw, elem = _thread_smem_map(tv_layout, smem_layout)
    first = WARP * warp
    if not 0 <= first < threads:
        raise LayoutError("bank_conflicts", (tv_layout, warp), f"warp {warp} has no threads: {threads} threads")
    return [[_bit_address(sw, elem(t, v), bits, base) // 8 for v in range(values)]
            for t in range(first, min(first + WARP, threads))]


def max_vector_bytes(tv_layout, smem_layout, dtype, base: int = 0, warp: int = 0) -> int:
    """The widest access (bytes, ≤ 16) every lane of the warp can use: ``n`` consecutive values per lane that are
    contiguous in bytes (after the swizzle) and aligned to ``n`` elements, ``n`` a power of 2 dividing the value count.

    ``max_vector_bytes(((8,4),8):((1,64),8), Sw<3,4,3> o 0 o (8,64):(64,1), 'bf16')`` → 16.
    Post: at least one byte (sub-byte elements pack to a byte) — LayoutError if even that is impossible.
    """
    bits = _dtype(dtype).bits
    threads, values = _tv_modes(tv_layout)
    sw, elem = _thread_smem_map(tv_layout, smem_layout)
    first = WARP * warp
    lanes = range(first, min(first + WARP, threads))
    addr = [[_bit_address(sw, elem(t, v), bits, base) for v in range(values)] for t in lanes]
    best = 0
    n = 1
    while n * bits <= 128 and values % n == 0:
        width = n * bits
        ok = width % 8 == 0 and width // 8 in ACCESS_SIZES and all(
            row[g] % width == 0 and all(row[g + k] == row[g] + k * bits for k in range(1, n))
            for row in addr for g in range(0, values, n))
        if ok:
            best = width // 8
        elif width >= 8:
            break  # contiguity and alignment only get harder as n grows
        n *= 2
    if best == 0:
        raise LayoutError("bank_conflicts", (tv_layout, smem_layout, str(dtype)),
                          "no lane's values form even one aligned byte: sub-byte values are not packed")
    return best


def bank_conflicts(tv_layout, smem_layout, dtype, access_bytes=None, base: int = 0, warp: int = 0) -> BankReport:
    """Bank conflicts of one warp running a TV layout over a smem layout.

    ``tv_layout``: (thread, value) → 1-D coordinate of the smem tile (``smem_layout``'s domain), a Layout or a
    swizzled thread map ``Sw o off o TV``; ``smem_layout``: a Layout or ``Sw o off o L`` (swizzle on absolute bytes,
    see ``smem.py``); ``warp``: which 32 threads (``32·warp`` onwards); ``base``: the tile's byte address (it matters:
    the swizzle sees absolute addresses); ``access_bytes``: bytes per lane per instruction, default the width
    ptxgen's smem.load/store lowering emits (``lowering_access``: the same rule, so the report counts the PTX's
    instructions). Each lane's values are cut into vectors of ``access_bytes``: the groups of ``vector_groups``
    (values at consecutive addresses, in any value order), else runs of consecutive values; instruction ``k`` has
    lane ``l`` touch vector ``k``.

    >>> from layoutc import Layout
    >>> from layoutc.hopper import gmma_atom
    >>> tv = Layout(((8, 4), 8), ((1, 64), 8))       # lane t: row t%8, elements 8(t//8)..+7 of an (8,64) tile
    >>> bank_conflicts(tv, gmma_atom('K', 'SW128', 'bf16'), 'bf16').ways
    1
    >>> bank_conflicts(tv, Layout((8, 64), (64, 1)), 'bf16').ways
    8

    Post: ``access_bytes`` given → its values must be contiguous and aligned per vector, else LayoutError.
    """
    bits = _dtype(dtype).bits
    threads, values = _tv_modes(tv_layout)
    groups = None
    if access_bytes is None:
        access_bytes, groups = lowering_access(tv_layout, smem_layout, dtype, base)
        if access_bytes is None:   # sub-byte elements: the widest byte-aligned vector
            access_bytes = max_vector_bytes(tv_layout, smem_layout, dtype, base, warp)
    _check_access_bytes(access_bytes)
    if (access_bytes * 8) % bits:
        raise LayoutError("bank_conflicts", (tv_layout, smem_layout, str(dtype)),
                          f"a {access_bytes}-byte access does not hold whole {bits}-bit elements")
    n = access_bytes * 8 // bits
    if values % n:
        raise LayoutError("bank_conflicts", (tv_layout, smem_layout, str(dtype)),
                          f"{values} values per thread do not split into vectors of {n} elements ({access_bytes} B)")
    sw, elem = _thread_smem_map(tv_layout, smem_layout)
    first = WARP * warp
    if not 0 <= first < threads:
        raise LayoutError("bank_conflicts", (tv_layout, warp), f"warp {warp} has no threads: {threads} threads")
    lanes = range(first, min(first + WARP, threads))
    if groups is None and n > 1:
        groups = _groups_of([[elem(t, v) for v in range(values)] for t in lanes], n)
    if groups is None:
        groups = tuple(tuple(range(g, g + n)) for g in range(0, values, n))
    accesses = []
    for g in groups:
        lane_addr = []
        for t in lanes:
            start = _bit_address(sw, elem(t, g[0]), bits, base)
            for k in range(1, n):
                if _bit_address(sw, elem(t, g[k]), bits, base) != start + k * bits:
                    raise LayoutError("bank_conflicts", (tv_layout, smem_layout, str(dtype)),
                                      f"thread {t} values {_values_text(g)} are not contiguous in bytes: "
                                      f"no {access_bytes}-byte vector (try access_bytes="
                                      f"{max_vector_bytes(tv_layout, smem_layout, dtype, base, warp)})")
            if start % (8 * access_bytes):
                raise LayoutError("bank_conflicts", (tv_layout, smem_layout, str(dtype)),
                                  f"thread {t} value {g[0]} at bit {start} (byte {start / 8:g}) is not aligned to a "
                                  f"{access_bytes}-byte access (try access_bytes="
                                  f"{max_vector_bytes(tv_layout, smem_layout, dtype, base, warp)})")
            lane_addr.append(start // 8)
        accesses.append(lane_addr)
    return bank_conflicts_addresses(accesses, access_bytes)


def _values_text(group) -> str:
    """``0..7`` for a run of consecutive value indices, else the list: ``(1, 0, 3)`` → ``1, 0, 3``."""
    if all(b == a + 1 for a, b in zip(group, group[1:])):
        return f"{group[0]}..{group[-1]}"
    return ", ".join(str(v) for v in group)


# -- typical access patterns as TV layouts -----------------------------------------------------------------------

def ldmatrix_access(tile_shape, dtype, matrices=(1, 4)) -> Layout:
    """The addressing of ``ldmatrix``/``stmatrix`` ``.x1/.x2/.x4`` (non-transposed) over an (M, N) tile whose
    coordinate index is ``m + M·n`` (column-major over the tile, CuTe's default), as a TV layout.

    Each lane gives one 16-byte row segment of an 8×(16 B) matrix: lanes ``8j..8j+7`` address rows 0..7 of matrix
    ``j``, and matrix ``j`` sits at row block ``j % R``, 16-byte column block ``j // R`` for ``matrices = (R, C)``
    (``R·C`` ∈ {1, 2, 4}). ``(1, 4)``: lane t → row ``t % 8``, chunk ``t // 8`` (4 matrices side by side, one phase
    per matrix); ``(2, 2)``: the 16×16 A fragment order (a0: rows 0-7 k 0-7, a1: rows 8-15, a2: k 8-15, a3).

    ``ldmatrix_access((8, 64), 'bf16')`` → ``((8,4),8):((1,64),8)``;
    ``ldmatrix_access((64, 64), 'bf16', (2, 2))`` → ``((8,2,2),8):((1,8,512),64)``.
    Post: thread ``t``, value ``v`` → row ``t%8 + 8·((t//8) % R)``, column ``e·((t//8) // R) + v`` with ``e`` the
    elements per 16 bytes; a tile that is too small raises LayoutError.
    """
    bits = _dtype(dtype).bits
    if 128 % bits:
        raise LayoutError("ldmatrix_access", (tile_shape, str(dtype)), "elements must divide 16 bytes")
    per_chunk = 128 // bits
    m, n = tile_shape
    rows, cols = matrices
    if rows * cols not in (1, 2, 4):
        raise LayoutError("ldmatrix_access", (tile_shape, matrices), "x1, x2 or x4: R·C must be 1, 2 or 4")
    if 8 * rows > m or per_chunk * cols > n:
        raise LayoutError("ldmatrix_access", (tile_shape, matrices),
                          f"{rows}×{cols} matrices of 8 rows × {per_chunk} elements do not fit an {m}×{n} tile")
    thread_shape, thread_stride = [8], [1]
    if rows > 1:
        thread_shape.append(rows)
        thread_stride.append(8)
    if cols > 1:
        thread_shape.append(cols)
        thread_stride.append(per_chunk * m)
    t_shape = thread_shape[0] if len(thread_shape) == 1 else tuple(thread_shape)
    t_stride = thread_stride[0] if len(thread_stride) == 1 else tuple(thread_stride)
    return Layout((t_shape, per_chunk), (t_stride, m))


stmatrix_access = ldmatrix_access  # stmatrix addresses the same rows as ldmatrix; only the direction differs
