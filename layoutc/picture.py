"""SVG pictures of layouts and TV layouts (hand-written SVG text; no dependencies), and the grid drawing they share.

What each picture shows, in CuTe's ``print_latex`` style:

* ``layout_svg(L)`` — the grid of a layout: rows are mode 0, columns mode 1 (each mode's 1-D coordinate, so nested
  modes are flattened colexicographically), higher modes as panels side by side; each cell holds ``L(row, col)``
  (for ``Sw o off o L`` the index after the outer function) and is coloured by it. ``(8,8):(8,1)`` → an 8×8 grid
  whose row 1 reads ``8 9 ... 15``.
* ``tv_layout_svg(TV, M, N)`` — the M×N tile a TV layout covers; cell ``(m, n)`` with ``m + M·n == TV(t, v)`` is
  labelled ``T{t}`` over ``V{v}`` and coloured by thread (8 colours cycling, like ``print_latex_tv``).

Every function returns the SVG text (deterministic: the same arguments give the same bytes); ``save_svg`` writes
it, ``check_svg`` parses it with ``xml.etree`` (well-formedness). Large layouts are capped (``max_cells``) and the
title says which rows/columns/panels are shown.

The pictures that need an element type (a shared-memory layout's physical offsets, a swizzle before and after, bank
groups) are Hopper's smem convention and live in ``layoutc.hopper.picture`` (``smem_layout_svg``, ``swizzle_svg``,
``showcase``), drawn with this module's grid; this one imports nothing of ``layoutc.hopper``.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

from .errors import LayoutError
from .int_tuple import idx2crd, is_int, leaves, product
from .layout import Layout
from .swizzle import ComposedLayout

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

def svg_number(x) -> str:
    """Coordinates printed with at most 2 decimals and no trailing zeros (deterministic, compact)."""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.2f}".rstrip("0").rstrip(".")


class Svg:
    """An SVG document being written: ``rect``, ``text``, ``open``/``close`` of a group append to ``parts``;
    ``render(width, height, title)`` → the document text (``<title>`` first, then a white background)."""

    def __init__(self):
        self.parts = []

    def rect(self, x, y, w, h, fill, cls=None, extra=""):
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<rect{c} x="{svg_number(x)}" y="{svg_number(y)}" width="{svg_number(w)}" height="{svg_number(h)}" '
                          f'fill="{fill}"{extra}/>')

    def text(self, x, y, s, size, cls=None, anchor="middle", family=None, fill=None, weight=None):
        attrs = [f'x="{svg_number(x)}"', f'y="{svg_number(y)}"']
        if cls:
            attrs.insert(0, f'class="{cls}"')
        if size is not None:
            attrs.append(f'font-size="{svg_number(size)}"')
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
        w, h = svg_number(math.ceil(width)), svg_number(math.ceil(height))
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
                f'font-family="{SANS}">')
        body = [head, f"<title>{escape(title)}</title>", f'<rect width="{w}" height="{h}" fill="#ffffff"/>']
        return "\n".join(body + self.parts + ["</svg>"]) + "\n"


def text_width(s: str, size: float, mono: bool = True) -> float:
    """An upper estimate of the width of ``s`` at font ``size`` (monospace unless ``mono=False``)."""
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


# -- grid drawing shared by the pictures (here and in layoutc.hopper.picture) -------------------------------------

def draw_grid(svg, x0, y0, rows, cols, cell_w, cell_h, cell_fn, col_label=None, row_label=None,
               label_size=11, axis_size=10, sublabel_size=None):
    """Draw one grid at (x0, y0) (its top-left cell corner). ``cell_fn(i, j)`` → (fill, label, sublabel or None);
    a fill of None draws an empty white cell with no label. Axis labels go above and to the left."""
    col_label = col_label or str
    row_label = row_label or str
    svg.open("g", fill=AXIS, font_family=MONO, font_size=svg_number(axis_size))
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
    svg.open("g", font_family=MONO, font_size=svg_number(label_size), fill="#000000")
    for x, y, label, sub in labels:
        cx = x + cell_w / 2
        if sub is None:
            svg.text(cx, _baseline(y + cell_h / 2, label_size), label, None, cls="label")
        else:
            svg.text(cx, _baseline(y + cell_h * 0.32, label_size), label, None, cls="label")
            svg.text(cx, _baseline(y + cell_h * 0.72, sublabel_size), sub, sublabel_size, cls="sublabel")
    svg.close("g")


def draw_header(svg, title, notes, x=12, y=8, title_size=14, note_size=11):
    """Title (monospace: it is CuTe notation) and grey note lines; returns the y below them."""
    y += title_size + 2
    svg.text(x, y, title, title_size, cls="title", anchor="start", family=MONO, weight="bold")
    for note in notes:
        y += note_size + 5
        svg.text(x, y, note, note_size, cls="note", anchor="start", fill="#444444")
    return y + 8


def header_width(title, notes, title_size=14, note_size=11):
    """The picture width ``draw_header``'s title and notes need (12-unit margins)."""
    return max([text_width(title, title_size)] + [text_width(n, note_size, mono=False) for n in notes]) + 24


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


def layout_svg(layout, *, color_by="index", block=None, max_cells=DEFAULT_MAX_CELLS, max_cols=DEFAULT_MAX_COLS,
               title=None, panels_per_row=None, value=None, notes=()) -> str:
    """SVG of a layout's grid: ``layout_svg(Layout((8,8),(8,1)))`` → 8×8 cells, row i reading 8i .. 8i+7.

    - rank ≤ 1 → one row; rank 2 → rows = mode 0, columns = mode 1 (sizes of nested modes, flattened); rank ≥ 3 →
      one panel per 1-D coordinate of modes 2.. (headed ``(_,_,k)``), side by side (``panels_per_row`` wraps them).
    - cell label: ``layout(coord)`` — for ``Sw o off o L`` the index after the outer function — or ``value(coord)``
      where given (``layoutc.hopper.picture.smem_layout_svg`` labels a shared-memory layout with its physical
      element offsets that way).
    - colour: ``color_by='index'`` → palette[(label // block) % 8] (``block`` default 1); a callable
      ``f(coord, label)`` → palette index or colour.
    - at most ``max_cells`` cells (``max_cols`` columns): whole panels first, then rows; the notes say
      ``first N of M rows`` (columns, panels). ``notes``: more lines under those.

    Post: well-formed SVG; one ``<rect class="cell">`` per shown cell and one ``<text class="label">`` holding its
    label, both in row-major order per panel; the title is the layout's CuTe notation.
    """
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise LayoutError("layout_svg", (layout,), "a Layout or ComposedLayout is needed")
    if color_by == "bank":
        raise LayoutError("layout_svg", (layout,), "color_by='bank' needs the element type: "
                                                   "layoutc.hopper.picture.smem_layout_svg(layout, dtype, "
                                                   "color_by='bank') (bank = byte address // 4 % 32)")
    rows, cols, panels, coord = _grid_structure(layout)
    rows_s, cols_s, panels_s = _caps(rows, cols, panels, max_cells, max_cols)

    if value is None:
        value = layout
    if block is None:
        block = 1

    def colour(c, v):
        if callable(color_by):
            k = color_by(c, v)
            return k if isinstance(k, str) else PALETTE[k % len(PALETTE)]
        if color_by == "index":
            # a layout of coordinates (basis strides) is coloured by the sum of the coordinate's entries
            key = v if type(v) is int else sum(leaves(v))
            return PALETTE[(key // block) % len(PALETTE)]
        raise LayoutError("layout_svg", (layout,), f"color_by must be 'index' or a callable, not {color_by!r}")

    cells = {}
    for p in range(panels_s):
        for i in range(rows_s):
            for j in range(cols_s):
                c = coord(i, j, p)
                v = value(c)
                cells[p, i, j] = (colour(c, v), str(v) if type(v) is int else _notation(v), None)

    text = title if title is not None else _notation(layout)
    caps = [n for n in (_cap_note(rows_s, rows, "rows"), _cap_note(cols_s, cols, "columns"),
                        _cap_note(panels_s, panels, "panels")) if n]
    notes = (["shown: " + ", ".join(caps)] if caps else []) + list(notes)
    if color_by == "index" and block > 1:
        notes.append(f"colour: label // {block} % 8")

    label_size = 11
    longest = max(len(lbl) for _, lbl, _ in cells.values())
    cell_h = 22
    cell_w = max(cell_h, math.ceil(text_width("0" * longest, label_size)) + 8)
    axis_size = 10
    row_axis_w = text_width(str(rows_s - 1), axis_size) + 10
    panel_head = 18 if panels > 1 else 0
    grid_w, grid_h = cols_s * cell_w, rows_s * cell_h
    panel_w = row_axis_w + grid_w
    panel_h = panel_head + axis_size + 8 + grid_h
    per_row = panels_per_row or (panels_s if panels_s <= 4 else math.ceil(math.sqrt(panels_s)))
    gap = 20
    n_rows_of_panels = math.ceil(panels_s / per_row)
    content_w = min(per_row, panels_s) * panel_w + (min(per_row, panels_s) - 1) * gap
    width = max(content_w + 24, header_width(text, notes))
    svg = Svg()
    y = draw_header(svg, text, notes)
    rest_shape = None if panels == 1 else tuple(layout.shape[2:])
    for p in range(panels_s):
        px = 12 + (p % per_row) * (panel_w + gap)
        py = y + (p // per_row) * (panel_h + gap)
        if panels > 1:
            crd = idx2crd(p, rest_shape)
            head = "(_,_," + ",".join(_notation(x) for x in crd) + ")"
            svg.text(px + row_axis_w, py + 13, head, 12, cls="panel-title", anchor="start", family=MONO)
        draw_grid(svg, px + row_axis_w, py + panel_head + axis_size + 8, rows_s, cols_s, cell_w, cell_h,
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
    cell_w = max(36, math.ceil(text_width("0" * longest, label_size)) + 12)
    cell_h = 30
    row_axis_w = text_width(str(rows_s - 1), axis_size) + 10
    grid_w = cols_s * cell_w
    width = max(12 + row_axis_w + grid_w + 12, header_width(text, notes))
    svg = Svg()
    y = draw_header(svg, text, notes)
    gy = y + axis_size + 8
    draw_grid(svg, 12 + row_axis_w, gy, rows_s, cols_s, cell_w, cell_h, cell,
               label_size=label_size, axis_size=axis_size, sublabel_size=sub_size)
    return svg.render(width, gy + rows_s * cell_h + 14, text)
