"""SVG pictures of shared-memory layouts as Hopper's smem convention sees them (the swizzle acts on byte addresses):

* ``smem_layout_svg(L, 'bf16')`` — ``layoutc.picture.layout_svg``'s grid labelled with each element's physical offset
  ``byte_address / sizeof(dtype)``, coloured by 16-byte chunk (or bank group);
* ``swizzle_svg(Sw<3,4,3>, 'bf16')`` — 8 rows of 128 bytes cut into 16-byte chunks: left the logical chunks, right
  where each lands after the byte-address swizzle, same colours, so row r reads ``c ^ r``; the note counts the bank
  conflicts of a column read with and without the swizzle;
* ``showcase(DIR)`` — the three pictures of ``docs/img`` (the bf16 SW128 GMMA atom, the wgmma accumulator, SW128).
  Run ``python -m layoutc.hopper.picture DIR``.

Element types are looked up by name (``dtype``); the grid drawing is ``layoutc.picture``'s.
"""
from __future__ import annotations

import math
import os

from ..errors import LayoutError
from ..layout import Layout
from ..notation import to_str
from ..picture import (
    DEFAULT_MAX_CELLS, DEFAULT_MAX_COLS, MONO, PALETTE, Svg, draw_grid, draw_header, header_width, layout_svg,
    save_svg, svg_number, text_width, tv_layout_svg,
)
from ..swizzle import ComposedLayout, Swizzle
from .banks import bank_conflicts_addresses
from .dtypes import dtype as lookup
from .fragments import accumulator_tv
from .gmma import gmma_atom
from .smem import split_smem_layout


def _physical(layout, dtype):
    """Element offset (swizzle applied to byte addresses, as smem.byte_address) of a smem layout, per coordinate."""
    bits = lookup(dtype).bits
    sw, offset, inner = split_smem_layout(layout)

    def value(coord):
        elem = offset + inner(coord)
        byte = (elem * bits) // 8
        if sw is not None:
            byte = sw(byte)
        return (byte * 8 + (elem * bits) % 8) // bits

    return value, bits


# -- smem_layout_svg -------------------------------------------------------------------------------------------------

def smem_layout_svg(layout, dtype, *, color_by="index", block=None, max_cells=DEFAULT_MAX_CELLS,
                    max_cols=DEFAULT_MAX_COLS, title=None, panels_per_row=None) -> str:
    """``layoutc.picture.layout_svg`` of a shared-memory layout (swizzle on byte addresses) whose cells are labelled
    with the physical element offset ``byte_address / sizeof(dtype)``: ``Sw<3,4,3> o 0 o (8,64):(64,1)`` with
    ``'bf16'`` shows row 1's first 8 elements at 72..79.

    - colour: ``color_by='index'`` → palette[(label // block) % 8] (``block`` default the elements of one 16-byte
      chunk, so swizzled chunks stand out); ``'bank'`` → the 4-bank group ``(byte // 16) % 8`` the element lies in;
      a callable ``f(coord, label)`` → palette index or colour.
    - the grid, caps and title as ``layout_svg``; the notes add what the labels and colours mean.

    Post: well-formed SVG; one ``<rect class="cell">`` and one ``<text class="label">`` per shown cell, row-major per
    panel, the label being the element's physical offset.
    """
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise LayoutError("smem_layout_svg", (layout,), "a Layout or ComposedLayout is needed")
    if not (callable(color_by) or color_by in ("index", "bank")):
        raise LayoutError("smem_layout_svg", (layout,),
                          f"color_by must be 'index', 'bank' or a callable, not {color_by!r}")
    value, bits = _physical(layout, dtype)
    if block is None:
        block = max(1, 128 // bits)
    notes = [f"labels: physical element offsets of {dtype}"
             + (" (swizzle applied to byte addresses)" if isinstance(layout, ComposedLayout) else "")]
    if callable(color_by):
        colour = color_by
    elif color_by == "bank":
        notes.append("colour: 16-byte bank group g = banks 4g..4g+3 (byte // 16 % 8)")

        def colour(_coord, label):
            return (label * bits) // 128

    else:
        if block * bits == 128:
            # element offset // (16 B) mod 8 is the byte address's 16-byte group within a 128-byte line: its 4 banks
            notes.append(f"colour: 16-byte chunk (label // {block}) % 8 = bank group g, banks 4g..4g+3")
        elif block > 1:
            notes.append(f"colour: label // {block} % 8")

        def colour(_coord, label):
            return label // block

    return layout_svg(layout, color_by=colour, block=block, max_cells=max_cells, max_cols=max_cols, title=title,
                      panels_per_row=panels_per_row, value=value, notes=notes)


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
    bits = lookup(dtype).bits
    offset_bytes = 0
    if isinstance(swizzle_or_layout, Swizzle):
        sw = swizzle_or_layout
        what = str(sw)
    elif isinstance(swizzle_or_layout, ComposedLayout) and isinstance(swizzle_or_layout.outer, Swizzle):
        sw = swizzle_or_layout.outer
        offset_bytes = (swizzle_or_layout.offset * bits) // 8
        what = to_str(swizzle_or_layout)
    elif isinstance(swizzle_or_layout, Layout):
        sw = Swizzle(0, 4, 3)
        what = to_str(swizzle_or_layout) + " (no swizzle)"
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
    cell_w = max(40, math.ceil(text_width("0" * sub_longest, sub_size)) + 8)
    cell_h = 34
    row_axis_w = text_width(str(max(rows, r_hi + 1) - 1), axis_size) + 10
    grid_w = cols * cell_w
    arrow_w = max(70, text_width(str(sw), 11) + 20)
    head_h = 16
    content_w = 2 * (row_axis_w + grid_w) + arrow_w
    width = max(12 + content_w + 12, header_width(text, notes))
    svg = Svg()
    y = draw_header(svg, text, notes)
    lx = 12 + row_axis_w
    rx = lx + grid_w + arrow_w + row_axis_w
    gy = y + head_h + axis_size + 8 + (axis_size + 4 if banks else 0)
    svg.text(lx, y + 12, "logical (row, chunk)", 12, cls="grid-title", anchor="start", weight="bold")
    svg.text(rx, y + 12, f"physical after {sw}", 12, cls="grid-title", anchor="start", weight="bold")
    draw_grid(svg, lx, gy, rows, cols, cell_w, cell_h, left, label_size=label_size, axis_size=axis_size,
               sublabel_size=sub_size)
    draw_grid(svg, rx, gy, r_hi - r_lo + 1, cols, cell_w, cell_h, right, label_size=label_size,
               axis_size=axis_size, sublabel_size=sub_size, row_label=lambda i: str(i + r_lo))
    if banks:
        # Physical chunk j of a 128-byte-aligned row lies in banks (j·chunk/4 ..) mod 32, the same for every row.
        svg.open("g", fill="#777777", font_family=MONO, font_size=svg_number(8))
        for j in range(cols):
            b0 = (j * chunk // 4) % 32
            svg.text(rx + (j + 0.5) * cell_w, gy - axis_size - 8, f"b{b0}-{b0 + chunk // 4 - 1}", None)
        svg.close("g")
    ay = gy + rows * cell_h / 2
    ax0, ax1 = lx + grid_w + 10, rx - row_axis_w - 10
    svg.parts.append(f'<path d="M{svg_number(ax0)},{svg_number(ay)} H{svg_number(ax1 - 8)}" stroke="#333333" stroke-width="2" '
                     f'fill="none"/>')
    svg.parts.append(f'<path d="M{svg_number(ax1)},{svg_number(ay)} l-10,-5 v10 z" fill="#333333"/>')
    svg.text((ax0 + ax1) / 2, ay - 8, str(sw), 11, cls="arrow-label", family=MONO)
    height = gy + max(rows, r_hi - r_lo + 1) * cell_h + 14
    return svg.render(width, height, text)


def _column_read_note(sw, start, row_bytes, cols):
    """What the swizzle buys: 8 lanes each reading the same logical 16-byte chunk of rows 0..7 (ldmatrix-like)."""
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
    atom = gmma_atom("K", "SW128", "bf16")
    acc = accumulator_tv(16)
    pictures = {
        "layout_sw128_bf16.svg": smem_layout_svg(atom, "bf16"),
        "tv_wgmma_acc_64x16.svg": tv_layout_svg(
            acc, 64, 16, title=f"{to_str(acc)}  (wgmma m64n16 accumulator, one warp group)"),
        "swizzle_sw128.svg": swizzle_svg(Swizzle(3, 4, 3), "bf16"),
    }
    return [save_svg(text, os.path.join(folder, name)) for name, text in pictures.items()]


if __name__ == "__main__":  # python -m layoutc.hopper.picture docs/img
    import sys
    for written in showcase(sys.argv[1] if len(sys.argv) > 1 else "."):
        print(written)
