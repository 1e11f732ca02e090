"""SVG pictures of layouts, TV layouts and swizzles (hand-written SVG text; no dependencies).

What each picture shows, in CuTe's ``print_latex`` style:

* ``layout_svg(L)`` — the grid of a layout: rows are mode 0, columns mode 1 (each mode's 1-D coordinate, so nested
  modes are flattened colexicographically), higher modes as panels side by side; each cell holds ``L(row, col)``
  (for ``Sw o off o L`` the index after the outer function) and is coloured by it. ``(8,8):(8,1)`` → an 8×8 grid
  whose row 1 reads ``8 9 ... 15``.
* ``tv_layout_svg(TV, M, N)`` — the M×N tile a TV layout covers; cell ``(m, n)`` with ``m + M·n == TV(t, v)`` is
  labelled ``T{t}`` over ``V{v}`` and coloured by thread (8 colours cycling, like ``print_latex_tv``).
* ``swizzle_svg(Sw<3,4,3>, 'bf16')`` — 8 rows of 128 bytes cut into 16-byte chunks: left the logical chunks, right
  where each lands after the byte-address swizzle, same colours, so row r reads ``c ^ r``.

Every function returns the SVG text (deterministic: the same arguments give the same bytes); ``save_svg`` writes
it, ``check_svg`` parses it with ``xml.etree`` (well-formedness). Large layouts are capped (``max_cells``) and the
title says which rows/columns/panels are shown. Run ``python -m layoutc.picture DIR`` for the showcase pictures.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

from .errors import LayoutError
from .int_tuple import idx2crd, is_int, product
from .layout import Layout
from .swizzle import ComposedLayout, Swizzle

# Eight pastel colours (ColorBrewer Paired/Set3 family) that all carry black text; neighbours contrast in hue.
PALETTE = ("#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#8dd3c7", "#e5c494")
EMPTY = "#ffffff"
GRID = "#4d4d4d"
AXIS = "#555555"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO_ADVANCE = 0.61  # em width of a monospace glyph (DejaVu Sans Mono: 0.602)
SANS_ADVANCE = 0.62  # generous average for the sans serif (so text never overflows its box)

DEFAULT_MAX_CELLS = 2048
DEFAULT_MAX_COLS = 64


# -- small SVG writer ----------------------------------------------------------------------------------------------

def _num(x) -> str:
    """Coordinates printed with at most 2 decimals and no trailing zeros (deterministic, compact)."""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.2f}".rstrip("0").rstrip(".")


class _Svg:
    def __init__(self):
        self.parts = []

    def rect(self, x, y, w, h, fill, cls=None, extra=""):
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<rect{c} x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
                          f'fill="{fill}"{extra}/>')

    def text(self, x, y, s, size, cls=None, anchor="middle", family=None, fill=None, weight=None):
        attrs = [f'x="{_num(x)}"', f'y="{_num(y)}"']
        if cls:
            attrs.insert(0, f'class="{cls}"')
        if size is not None:
            attrs.append(f'font-size="{_num(size)}"')
        if anchor:
            attrs.append(f'text-anchor="{anchor}"')
        if family:
            attrs.append(f'font-family="{family}"')
        if fill:
            attrs.append(f'fill="{fill}"')
        if weight:
            attrs.append(f'font-weight="{weight}"')
        self.parts.append(f'<text {" ".join(attrs)}>{escape(str(s))}</text>')

    def open(self, tag, **attrs):
        a = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        self.parts.append(f"<{tag}{a}>")

    def close(self, tag):
        self.parts.append(f"</{tag}>")

    def render(self, width, height, title):
        w, h = _num(math.ceil(width)), _num(math.ceil(height))
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
                f'font-family="{SANS}">')
        body = [head, f"<title>{escape(title)}</title>", f'<rect width="{w}" height="{h}" fill="#ffffff"/>']
        return "\n".join(body + self.parts + ["</svg>"]) + "\n"


def _text_width(s: str, size: float, mono: bool = True) -> float:
    return len(s) * size * (MONO_ADVANCE if mono else SANS_ADVANCE)


def _baseline(y_center: float, size: float) -> float:
    # Centre a line of text vertically without dominant-baseline (not every renderer honours it).
    return y_center + 0.36 * size


# -- public helpers ------------------------------------------------------------------------------------------------

def save_svg(svg_text: str, path) -> str:
    """Write SVG text to ``path`` (UTF-8, parent folders created) and return the path.

    Pre: ``svg_text`` is well-formed (``check_svg``); a malformed text raises ValueError and writes nothing.
    """
    check_svg(svg_text)
    folder = os.path.dirname(os.fspath(path))
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(svg_text)
    return os.fspath(path)


def check_svg(svg_text: str):
    """Parse SVG text with ``xml.etree`` and return the root element; ValueError when it is not well-formed XML or
    not an ``<svg>`` document."""
    try:
        root = ET.fromstring(svg_text)
    except ET.ParseError as e:
        raise ValueError(f"not well-formed SVG: {e}") from None
    if root.tag not in ("svg", "{http://www.w3.org/2000/svg}svg"):
        raise ValueError(f"root element is <{root.tag}>, not <svg>")
    return root


def _notation(obj) -> str:
    from .notation import to_str
    return to_str(obj)


# -- grid drawing shared by the three pictures ----------------------------------------------------------------------

def _draw_grid(svg, x0, y0, rows, cols, cell_w, cell_h, cell_fn, col_label=None, row_label=None,
               label_size=11, axis_size=10, sublabel_size=None):
    """Draw one grid at (x0, y0) (its top-left cell corner). ``cell_fn(i, j)`` → (fill, label, sublabel or None);
    a fill of None draws an empty white cell with no label. Axis labels go above and to the left."""
    col_label = col_label or str
    row_label = row_label or str
    svg.open("g", fill=AXIS, font_family=MONO, font_size=_num(axis_size))
    for j in range(cols):
        svg.text(x0 + (j + 0.5) * cell_w, y0 - 0.45 * axis_size, col_label(j), None)
    for i in range(rows):
        svg.text(x0 - 0.5 * axis_size, _baseline(y0 + (i + 0.5) * cell_h, axis_size), row_label(i), None,
                 anchor="end")
    svg.close("g")
    labels = []
    svg.open("g", stroke=GRID, stroke_width="0.75")
    for i in range(rows):
        for j in range(cols):
            fill, label, sub = cell_fn(i, j)
            x, y = x0 + j * cell_w, y0 + i * cell_h
            svg.rect(x, y, cell_w, cell_h, fill or EMPTY, cls="cell")
            if fill is not None and label is not None:
                labels.append((x, y, label, sub))
    svg.close("g")
    svg.open("g", font_family=MONO, font_size=_num(label_size), fill="#000000")
    for x, y, label, sub in labels:
        cx = x + cell_w / 2
        if sub is None:
            svg.text(cx, _baseline(y + cell_h / 2, label_size), label, None, cls="label")
        else:
            svg.text(cx, _baseline(y + cell_h * 0.32, label_size), label, None, cls="label")
            svg.text(cx, _baseline(y + cell_h * 0.72, sublabel_size), sub, sublabel_size, cls="sublabel")
    svg.close("g")


def _header(svg, title, notes, x=12, y=8, title_size=14, note_size=11):
    """Title (monospace: it is CuTe notation) and grey note lines; returns the y below them."""
    y += title_size + 2
    svg.text(x, y, title, title_size, cls="title", anchor="start", family=MONO, weight="bold")
    for note in notes:
        y += note_size + 5
        svg.text(x, y, note, note_size, cls="note", anchor="start", fill="#444444")
    return y + 8


def _header_width(title, notes, title_size=14, note_size=11):
    return max([_text_width(title, title_size)] + [_text_width(n, note_size, mono=False) for n in notes]) + 24


def _cap_note(shown, total, what):
    return f"first {shown} of {total} {what}" if shown < total else None


# -- layout_svg ------------------------------------------------------------------------------------------------------

def _grid_structure(layout):
    """(rows, cols, panels, coord(i, j, p)) for a layout: rank ≤ 1 → 1 row; rank 2 → mode 0 × mode 1; rank ≥ 3 →
    panels over the higher modes (their 1-D coordinate, colexicographic)."""
    shape = layout.shape
    if is_int(shape) or len(shape) == 1:
        return 1, product(shape), 1, lambda i, j, p: j
    rows, cols = product(shape[0]), product(shape[1])
    if len(shape) == 2:
        return rows, cols, 1, lambda i, j, p: (i, j)
    rest = tuple(shape[2:])
    return rows, cols, product(rest), lambda i, j, p: (i, j) + tuple(idx2crd(p, rest))


def _caps(rows, cols, panels, max_cells, max_cols):
    """(rows, cols, panels) shown: columns first capped at max_cols, then whole panels, then rows."""
    cols_s = min(cols, max_cols)
    per_panel = rows * cols_s
    if per_panel * panels <= max_cells:
        return rows, cols_s, panels
    if per_panel <= max_cells:
        return rows, cols_s, max(1, max_cells // per_panel)
    return max(1, max_cells // cols_s), cols_s, 1


def _physical(layout, dtype):
    """Element offset (swizzle applied to byte addresses, as smem.byte_address) of a smem layout, per coordinate."""
    from .hopper.dtypes import dtype as lookup
    from .hopper.smem import split_smem_layout
    bits = lookup(dtype).bits
    sw, offset, inner = split_smem_layout(layout)

    def value(coord):
        elem = offset + inner(coord)
        byte = (elem * bits) // 8
        if sw is not None:
            byte = sw(byte)
        return (byte * 8 + (elem * bits) % 8) // bits

    return value, bits


def layout_svg(layout, *, dtype=None, color_by="index", block=None, max_cells=DEFAULT_MAX_CELLS,
               max_cols=DEFAULT_MAX_COLS, title=None, panels_per_row=None) -> str:
    """SVG of a layout's grid: ``layout_svg(Layout((8,8),(8,1)))`` → 8×8 cells, row i reading 8i .. 8i+7.

    - rank ≤ 1 → one row; rank 2 → rows = mode 0, columns = mode 1 (sizes of nested modes, flattened); rank ≥ 3 →
      one panel per 1-D coordinate of modes 2.. (headed ``(_,_,k)``), side by side (``panels_per_row`` wraps them).
    - cell label: ``layout(coord)`` — for ``Sw o off o L`` the index after the outer function. With ``dtype`` (a
      shared-memory layout, swizzle on byte addresses) the label is the physical element offset
      ``byte_address / sizeof(dtype)`` instead, so ``Sw<3,4,3> o 0 o (8,64):(64,1)`` with ``'bf16'`` shows row 1's
      first 8 elements at 72..79.
    - colour: ``color_by='index'`` → palette[(label // block) % 8] (``block`` default 1, or the elements of one
      16-byte chunk when ``dtype`` is given, so swizzled chunks stand out); ``'bank'`` (needs ``dtype``) → the
      4-bank group ``(byte // 16) % 8`` the element lies in; a callable ``f(coord, label)`` → palette index or colour.
    - at most ``max_cells`` cells (``max_cols`` columns): whole panels first, then rows; the notes say
      ``first N of M rows`` (columns, panels).

    Post: well-formed SVG; one ``<rect class="cell">`` per shown cell and one ``<text class="label">`` holding its
    label, both in row-major order per panel; the title is the layout's CuTe notation.
    """
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise LayoutError("layout_svg", (layout,), "a Layout or ComposedLayout is needed")
    if color_by == "bank" and dtype is None:
        raise LayoutError("layout_svg", (layout,), "color_by='bank' needs a dtype (bank = byte address // 4 % 32)")
    rows, cols, panels, coord = _grid_structure(layout)
    rows_s, cols_s, panels_s = _caps(rows, cols, panels, max_cells, max_cols)

    if dtype is None:
        value = layout
        bits = None
    else:
        value, bits = _physical(layout, dtype)
    if block is None:
        block = 1 if dtype is None else max(1, 128 // bits)

    def colour(c, v):
        if callable(color_by):
            k = color_by(c, v)
            return k if isinstance(k, str) else PALETTE[k % len(PALETTE)]
        if color_by == "bank":
            return PALETTE[((v * bits) // 128) % len(PALETTE)]
        if color_by == "index":
            return PALETTE[(v // block) % len(PALETTE)]
        raise LayoutError("layout_svg", (layout,), f"color_by must be 'index', 'bank' or a callable, not {color_by!r}")

    cells = {}
    for p in range(panels_s):
        for i in range(rows_s):
            for j in range(cols_s):
                c = coord(i, j, p)
                v = value(c)
                cells[p, i, j] = (colour(c, v), str(v), None)

    text = title if title is not None else _notation(layout)
    notes = [n for n in (_cap_note(rows_s, rows, "rows"), _cap_note(cols_s, cols, "columns"),
                         _cap_note(panels_s, panels, "panels")) if n]
    notes = ["shown: " + ", ".join(notes)] if notes else []
    if dtype is not None:
        swizzled = isinstance(layout, ComposedLayout)
        notes.append(f"labels: physical element offsets of {dtype}"
                     + (" (swizzle applied to byte addresses)" if swizzled else ""))
    if color_by == "bank":
        notes.append("colour: 16-byte bank group g = banks 4g..4g+3 (byte // 16 % 8)")
    elif color_by == "index" and dtype is not None and block * bits == 128:
        # element offset // (16 B) mod 8 is the byte address's 16-byte group within a 128-byte line: its 4 banks
        notes.append(f"colour: 16-byte chunk (label // {block}) % 8 = bank group g, banks 4g..4g+3")
    elif color_by == "index" and block > 1:
        notes.append(f"colour: label // {block} % 8")

    label_size = 11
    longest = max(len(lbl) for _, lbl, _ in cells.values())
    cell_h = 22
    cell_w = max(cell_h, math.ceil(_text_width("0" * longest, label_size)) + 8)
    axis_size = 10
    row_axis_w = _text_width(str(rows_s - 1), axis_size) + 10
    panel_head = 18 if panels > 1 else 0
    grid_w, grid_h = cols_s * cell_w, rows_s * cell_h
    panel_w = row_axis_w + grid_w
    panel_h = panel_head + axis_size + 8 + grid_h
    per_row = panels_per_row or (panels_s if panels_s <= 4 else math.ceil(math.sqrt(panels_s)))
    gap = 20
    n_rows_of_panels = math.ceil(panels_s / per_row)
    content_w = min(per_row, panels_s) * panel_w + (min(per_row, panels_s) - 1) * gap
    width = max(content_w + 24, _header_width(text, notes))
    svg = _Svg()
    y = _header(svg, text, notes)
    rest_shape = None if panels == 1 else tuple(layout.shape[2:])
    for p in range(panels_s):
        px = 12 + (p % per_row) * (panel_w + gap)
        py = y + (p // per_row) * (panel_h + gap)
        if panels > 1:
            crd = idx2crd(p, rest_shape)
            head = "(_,_," + ",".join(_notation(x) for x in crd) + ")"
            svg.text(px + row_axis_w, py + 13, head, 12, cls="panel-title", anchor="start", family=MONO)
        _draw_grid(svg, px + row_axis_w, py + panel_head + axis_size + 8, rows_s, cols_s, cell_w, cell_h,
                   lambda i, j, p=p: cells[p, i, j], label_size=label_size, axis_size=axis_size)
    height = y + n_rows_of_panels * panel_h + (n_rows_of_panels - 1) * gap + 14
    return svg.render(width, height, text)


# -- tv_layout_svg ---------------------------------------------------------------------------------------------------

def tv_layout_svg(tv_layout, m: int, n: int, *, threads=None, max_cells=DEFAULT_MAX_CELLS,
                  max_cols=DEFAULT_MAX_COLS, title=None) -> str:
    """SVG of the M×N tile a TV layout covers: cell ``(i, j)`` holds ``T{t}`` over ``V{v}`` when
    ``tv(t, v) == i + M·j`` (CuTe's column-major tile index), coloured by ``t % 8`` (8 pastel colours cycling).

    ``tv_layout_svg(Layout(((4,8,4),(2,2,2)),((128,1,16),(64,8,512))), 64, 16, threads=32)`` → warp 0 of the wgmma
    accumulator: rows 0..15 filled, rows 16..63 left white.

    ``threads``: None (all), an int k (threads 0..k-1) or an iterable of thread ids. A cell reached by several
    (t, v) shows the first in thread-major order (the notes count such cells); indices outside the tile are dropped.
    Post: well-formed SVG; one ``<rect class="cell">`` per shown cell (M·N or the cap) in row-major order;
    labels ``T{t}`` (class ``label``) and ``V{v}`` (class ``sublabel``) for covered cells.
    """
    if not isinstance(tv_layout, Layout):
        raise LayoutError("tv_layout_svg", (tv_layout,), "a TV layout (thread, value) → tile index is needed")
    rank1 = is_int(tv_layout.shape) or tv_layout.rank == 1
    if not rank1 and tv_layout.rank != 2:
        raise LayoutError("tv_layout_svg", (tv_layout,), "a TV layout has two top-level modes: (thread, value)")
    n_threads = tv_layout.size if rank1 else product(tv_layout.shape[0])
    n_values = 1 if rank1 else product(tv_layout.shape[1])
    if threads is None:
        thread_ids = range(n_threads)
    elif is_int(threads):
        thread_ids = range(min(threads, n_threads))
    else:
        thread_ids = [t for t in threads if 0 <= t < n_threads]
    owner = {}
    repeated = 0
    dropped = 0
    for t in thread_ids:
        for v in range(n_values):
            idx = tv_layout(t) if rank1 else tv_layout((t, v))
            if not 0 <= idx < m * n:
                dropped += 1
                continue
            key = (idx % m, idx // m)
            if key in owner:
                repeated += 1
            else:
                owner[key] = (t, v)
    rows_s, cols_s, _ = _caps(m, n, 1, max_cells, max_cols)

    def cell(i, j):
        if (i, j) not in owner:
            return None, None, None
        t, v = owner[i, j]
        return PALETTE[t % len(PALETTE)], f"T{t}", f"V{v}"

    text = title if title is not None else _notation(tv_layout)
    ids = list(thread_ids)
    if ids and ids == list(range(ids[0], ids[-1] + 1)):
        shown = f"threads {ids[0]}..{ids[-1]}" if len(ids) > 1 else f"thread {ids[0]}"
    else:
        shown = f"{len(ids)} threads"
    notes = [f"{m}×{n} tile, index m + {m}·n; {shown} of {n_threads}, {n_values} values each; colour: thread % 8"]
    caps = [c for c in (_cap_note(rows_s, m, "rows"), _cap_note(cols_s, n, "columns")) if c]
    if caps:
        notes.append("shown: " + ", ".join(caps))
    if repeated:
        notes.append(f"{repeated} (t,v) pairs hit an already-labelled cell (the first is shown)")
    if dropped:
        notes.append(f"{dropped} (t,v) pairs fall outside the tile")

    label_size, sub_size, axis_size = 11, 9, 10
    longest = max([len(f"T{t}") for t in ids] + [len(f"V{n_values - 1}"), 2])
    cell_w = max(36, math.ceil(_text_width("0" * longest, label_size)) + 12)
    cell_h = 30
    row_axis_w = _text_width(str(rows_s - 1), axis_size) + 10
    grid_w = cols_s * cell_w
    width = max(12 + row_axis_w + grid_w + 12, _header_width(text, notes))
    svg = _Svg()
    y = _header(svg, text, notes)
    gy = y + axis_size + 8
    _draw_grid(svg, 12 + row_axis_w, gy, rows_s, cols_s, cell_w, cell_h, cell,
               label_size=label_size, axis_size=axis_size, sublabel_size=sub_size)
    return svg.render(width, gy + rows_s * cell_h + 14, text)


# -- swizzle_svg -----------------------------------------------------------------------------------------------------

def swizzle_svg(swizzle_or_layout, dtype="bf16", rows=None, row_bytes=None, base: int = 0, title=None) -> str:
    """Before/after picture of a byte-address swizzle: ``swizzle_svg(Swizzle(3,4,3), 'bf16')`` → 8 rows of 128 bytes
    in 16-byte chunks; left the logical (row, chunk) grid, right each chunk at its swizzled place, same colour, so
    row r of the right grid reads chunks ``0^r, 1^r, ..., 7^r``.

    ``swizzle_or_layout``: a Swizzle (acting on byte addresses) or a smem layout ``Sw o off o L`` (its swizzle; its
    offset moves ``base``); a plain Layout means no swizzle. Defaults for ``Sw<B,M,S>``: chunks of 2^M bytes, rows of
    2^(M+B) bytes (the atom's width: 128 for SW128, 32 for SW32), 2^|S| rows. ``base``: absolute byte address of row
    0 (the swizzle sees absolute addresses). Sub-labels give each chunk's element range for ``dtype``.
    Post: well-formed SVG; 2·rows·(row_bytes / chunk) ``<rect class="cell">`` (left grid first, row-major); each right
    cell's label is the logical chunk that lands there.
    """
    from .hopper.dtypes import dtype as lookup
    bits = lookup(dtype).bits
    offset_bytes = 0
    if isinstance(swizzle_or_layout, Swizzle):
        sw = swizzle_or_layout
        what = str(sw)
    elif isinstance(swizzle_or_layout, ComposedLayout) and isinstance(swizzle_or_layout.outer, Swizzle):
        sw = swizzle_or_layout.outer
        offset_bytes = (swizzle_or_layout.offset * bits) // 8
        what = _notation(swizzle_or_layout)
    elif isinstance(swizzle_or_layout, Layout):
        sw = Swizzle(0, 4, 3)
        what = _notation(swizzle_or_layout) + " (no swizzle)"
    else:
        raise LayoutError("swizzle_svg", (swizzle_or_layout,), "a Swizzle or a smem layout is needed")
    chunk = 1 << sw.base
    if row_bytes is None:
        row_bytes = chunk << max(sw.bits, 0) if sw.bits else 128
    if rows is None:
        rows = 1 << abs(sw.shift) if sw.bits else 8
    if row_bytes % chunk or row_bytes <= 0 or rows <= 0:
        raise LayoutError("swizzle_svg", (sw,), f"rows of {row_bytes} bytes do not split into {chunk}-byte chunks")
    start = base + offset_bytes
    cols = row_bytes // chunk

    # Where does logical chunk (r, c) land? Its first byte's swizzled address, relative to the picture's start.
    # Chunks move whole because the swizzle only touches bits ≥ M (the chunk's own bits stay).
    landing = {}
    for r in range(rows):
        for c in range(cols):
            phys = sw(start + r * row_bytes + c * chunk) - start
            landing[phys // row_bytes, (phys % row_bytes) // chunk] = (r, c)
    phys_rows = sorted({pr for pr, _ in landing})
    r_lo, r_hi = phys_rows[0], phys_rows[-1]

    per_chunk = (chunk * 8) // bits if (chunk * 8) % bits == 0 else None

    def elems(c):
        if per_chunk is None or per_chunk == 0:
            return None
        return f"e{c * per_chunk}-{(c + 1) * per_chunk - 1}" if per_chunk > 1 else f"e{c}"

    def left(i, j):
        return PALETTE[j % len(PALETTE)], str(j), elems(j)

    def right(i, j):
        rc = landing.get((i + r_lo, j))
        if rc is None:
            return None, None, None
        return PALETTE[rc[1] % len(PALETTE)], str(rc[1]), elems(rc[1])

    text = title if title is not None else f"{what}: {rows} rows × {row_bytes} B, {chunk}-byte chunks ({dtype})"
    notes = [f"left: logical (row, chunk); right: where each chunk lands, physical byte = {sw}(base + byte), "
             f"base = {start}",
             f"label: logical chunk index; e = {dtype} element columns it holds"]
    banks = row_bytes % 128 == 0 and chunk % 4 == 0 and start % 128 == 0
    if banks:
        notes[-1] += "; b = the banks a physical chunk occupies"
    if chunk == 16 and rows >= 8 and start % 16 == 0:
        notes.append(_column_read_note(sw, start, row_bytes, cols))
    label_size, sub_size, axis_size = 12, 9, 10
    sub_longest = max((len(elems(c) or "") for c in range(cols)), default=0)
    cell_w = max(40, math.ceil(_text_width("0" * sub_longest, sub_size)) + 8)
    cell_h = 34
    row_axis_w = _text_width(str(max(rows, r_hi + 1) - 1), axis_size) + 10
    grid_w = cols * cell_w
    arrow_w = max(70, _text_width(str(sw), 11) + 20)
    head_h = 16
    content_w = 2 * (row_axis_w + grid_w) + arrow_w
    width = max(12 + content_w + 12, _header_width(text, notes))
    svg = _Svg()
    y = _header(svg, text, notes)
    lx = 12 + row_axis_w
    rx = lx + grid_w + arrow_w + row_axis_w
    gy = y + head_h + axis_size + 8 + (axis_size + 4 if banks else 0)
    svg.text(lx, y + 12, "logical (row, chunk)", 12, cls="grid-title", anchor="start", weight="bold")
    svg.text(rx, y + 12, f"physical after {sw}", 12, cls="grid-title", anchor="start", weight="bold")
    _draw_grid(svg, lx, gy, rows, cols, cell_w, cell_h, left, label_size=label_size, axis_size=axis_size,
               sublabel_size=sub_size)
    _draw_grid(svg, rx, gy, r_hi - r_lo + 1, cols, cell_w, cell_h, right, label_size=label_size,
               axis_size=axis_size, sublabel_size=sub_size, row_label=lambda i: str(i + r_lo))
    if banks:
        # Physical chunk j of a 128-byte-aligned row lies in banks (j·chunk/4 ..) mod 32, the same for every row.
        svg.open("g", fill="#777777", font_family=MONO, font_size=_num(8))
        for j in range(cols):
            b0 = (j * chunk // 4) % 32
            svg.text(rx + (j + 0.5) * cell_w, gy - axis_size - 8, f"b{b0}-{b0 + chunk // 4 - 1}", None)
        svg.close("g")
    ay = gy + rows * cell_h / 2
    ax0, ax1 = lx + grid_w + 10, rx - row_axis_w - 10
    svg.parts.append(f'<path d="M{_num(ax0)},{_num(ay)} H{_num(ax1 - 8)}" stroke="#333333" stroke-width="2" '
                     f'fill="none"/>')
    svg.parts.append(f'<path d="M{_num(ax1)},{_num(ay)} l-10,-5 v10 z" fill="#333333"/>')
    svg.text((ax0 + ax1) / 2, ay - 8, str(sw), 11, cls="arrow-label", family=MONO)
    height = gy + max(rows, r_hi - r_lo + 1) * cell_h + 14
    return svg.render(width, height, text)


def _column_read_note(sw, start, row_bytes, cols):
    """What the swizzle buys: 8 lanes each reading the same logical 16-byte chunk of rows 0..7 (ldmatrix-like)."""
    from .hopper.banks import bank_conflicts_addresses

    def worst(f):
        return max(bank_conflicts_addresses([[f(start + r * row_bytes + 16 * c) for r in range(8)]], 16).ways
                   for c in range(cols))

    before, after = worst(lambda a: a), worst(sw)
    return (f"8 lanes reading one logical chunk column of rows 0-7 (16 B each): {before}-way without the swizzle, "
            f"{after}-way with it")


# -- showcase ----------------------------------------------------------------------------------------------------------

def showcase(folder):
    """Write the three showcase pictures (SVG) into ``folder`` and return their paths:
    ``layout_sw128_bf16.svg`` (the bf16 K-major SW128 GMMA atom, physical offsets), ``tv_wgmma_acc_64x16.svg`` (the
    wgmma accumulator, 64×16 for one warp group) and ``swizzle_sw128.svg`` (Sw<3,4,3> on 8 rows of 128 bytes)."""
    from .hopper.fragments import accumulator_tv
    from .hopper.gmma import gmma_atom
    atom = gmma_atom("K", "SW128", "bf16")
    acc = accumulator_tv(16)
    pictures = {
        "layout_sw128_bf16.svg": layout_svg(atom, dtype="bf16"),
        "tv_wgmma_acc_64x16.svg": tv_layout_svg(
            acc, 64, 16, title=f"{_notation(acc)}  (wgmma m64n16 accumulator, one warp group)"),
        "swizzle_sw128.svg": swizzle_svg(Swizzle(3, 4, 3), "bf16"),
    }
    return [save_svg(text, os.path.join(folder, name)) for name, text in pictures.items()]


if __name__ == "__main__":  # python -m layoutc.picture docs/img
    import sys
    for written in showcase(sys.argv[1] if len(sys.argv) > 1 else "."):
        print(written)
