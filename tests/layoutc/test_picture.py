"""SVG pictures (layoutc.picture): well-formed XML, titles in CuTe notation, one cell per coordinate (or the cap),
labels equal to the layout's values, TV labels, swizzle landing places, determinism."""
import xml.etree.ElementTree as ET

import pytest

import layoutc as lc
from layoutc import Layout as L
from layoutc.hopper import byte_address, gmma_atom, gmma_smem_layout
from layoutc.hopper.banks import ldmatrix_access
from layoutc.hopper.fragments import accumulator_tv
from layoutc.hopper.picture import showcase, smem_layout_svg, swizzle_svg
from layoutc.picture import DEFAULT_MAX_CELLS, PALETTE, check_svg, layout_svg, save_svg, tv_layout_svg

NS = "{http://www.w3.org/2000/svg}"
SW128_BF16 = gmma_atom("K", "SW128", "bf16")


def parse(svg):
    return check_svg(svg)


def by_class(root, tag, cls):
    return [e for e in root.iter(NS + tag) if e.get("class") == cls]


def cells(root):
    return by_class(root, "rect", "cell")


def labels(root, cls="label"):
    return [e.text for e in by_class(root, "text", cls)]


def title(root):
    return root.find(NS + "title").text, by_class(root, "text", "title")[0].text


def grid_values(layout, rows, cols):
    return [str(layout((i, j))) for i in range(rows) for j in range(cols)]


LAYOUTS = [
    L((8, 8), (8, 1)),
    L((4, 2), (1, 4)),
    L((2, (2, 2)), (4, (1, 2))),
    L(16, 2),
    L((8,), (3,)),
    L((2, (2, 2), 3), (1, (2, 4), 8)),
    L((3, 2, 2, 2), (1, 3, 6, 12)),
    SW128_BF16,
    lc.ComposedLayout(L((4, 4), (4, 1)), 0, L((4, 4), (1, 4))),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_layout_svg_structure(layout):
    svg = layout_svg(layout)
    root = parse(svg)
    assert title(root) == (str(layout), str(layout))
    assert len(cells(root)) == lc.size(layout)
    assert len(labels(root)) == lc.size(layout)
    assert svg == layout_svg(layout)  # deterministic
    assert layout._repr_svg_() == svg


def test_layout_svg_labels_are_the_indices_row_major():
    a = L((2, (2, 2)), (4, (1, 2)))
    assert labels(parse(layout_svg(a))) == grid_values(a, 2, 4)
    assert labels(parse(layout_svg(L((8, 8), (8, 1)))))[:10] == [str(i) for i in range(10)]
    # rank 1: one row of L(0), L(1), ...
    assert labels(parse(layout_svg(L(16, 2)))) == [str(2 * i) for i in range(16)]
    # a ComposedLayout shows the index after the outer function (here the swizzle acting on the index)
    assert labels(parse(layout_svg(SW128_BF16))) == grid_values(SW128_BF16, 8, 64)


def test_layout_svg_panels_for_higher_modes():
    a = L((2, (2, 2), 3), (1, (2, 4), 8))
    root = parse(layout_svg(a))
    assert labels(root, "panel-title") == ["(_,_,0)", "(_,_,1)", "(_,_,2)"]
    want = [str(a((i, j, p))) for p in range(3) for i in range(2) for j in range(4)]
    assert labels(root) == want
    b = L((3, 2, 2, 2), (1, 3, 6, 12))
    root = parse(layout_svg(b))
    assert labels(root, "panel-title") == ["(_,_,0,0)", "(_,_,1,0)", "(_,_,0,1)", "(_,_,1,1)"]
    assert labels(root) == [str(i + 3 * j + 6 * p) for p in range(4) for i in range(3) for j in range(2)]


def test_layout_svg_physical_offsets_with_dtype():
    root = parse(smem_layout_svg(SW128_BF16, "bf16"))
    got = labels(root)
    want = [str(byte_address(SW128_BF16, "bf16", (i, j)) // 2) for i in range(8) for j in range(64)]
    assert got == want
    assert got[64:72] == [str(v) for v in range(72, 80)]  # row 1's first chunk sits in physical chunk 1
    notes = labels(root, "note")
    assert any("physical element offsets of bf16" in n for n in notes)
    # colour by label // 8 (one colour per 16-byte chunk): row 1, column 0 has the colour of physical chunk 1
    assert cells(root)[64].get("fill") == PALETTE[1]


def test_layout_svg_cap_and_notes():
    tile = gmma_smem_layout("K", "SW128", "bf16", (64, 64))
    root = parse(smem_layout_svg(tile, "bf16"))
    assert len(cells(root)) == DEFAULT_MAX_CELLS == 32 * 64
    assert "shown: first 32 of 64 rows" in labels(root, "note")
    root = parse(layout_svg(tile, max_cells=100))
    assert len(cells(root)) == 64 and "shown: first 1 of 64 rows" in labels(root, "note")
    root = parse(layout_svg(L(1000, 1)))
    assert len(cells(root)) == 64 and "shown: first 64 of 1000 columns" in labels(root, "note")
    root = parse(layout_svg(L((4, 4, 10)), max_cells=50))
    assert len(cells(root)) == 48 and "shown: first 3 of 10 panels" in labels(root, "note")


def test_layout_svg_colouring_options():
    a = L((4, 4), (4, 1))
    fills = [c.get("fill") for c in cells(parse(layout_svg(a)))]
    assert fills == [PALETTE[i % 8] for i in range(16)]
    fills = [c.get("fill") for c in cells(parse(layout_svg(a, color_by=lambda crd, v: "#123456")))]
    assert set(fills) == {"#123456"}
    banks = [c.get("fill") for c in cells(parse(smem_layout_svg(a, "f32", color_by="bank")))]
    assert banks == [PALETTE[i // 4] for i in range(16)]  # 4 f32 = one 16-byte bank group
    with pytest.raises(lc.LayoutError, match=r"color_by='bank' needs the element type: "
                                             r"layoutc\.hopper\.picture\.smem_layout_svg"):
        layout_svg(a, color_by="bank")
    with pytest.raises(lc.LayoutError, match="color_by must be 'index' or a callable, not 'nope'"):
        layout_svg(a, color_by="nope")
    with pytest.raises(lc.LayoutError, match="color_by must be 'index', 'bank' or a callable, not 'nope'"):
        smem_layout_svg(a, "f32", color_by="nope")


def test_tv_layout_svg_wgmma_accumulator():
    tv = accumulator_tv(16)
    svg = tv_layout_svg(tv, 64, 16)
    root = parse(svg)
    assert title(root)[0] == "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"
    assert len(cells(root)) == 64 * 16
    t_labels, v_labels = labels(root), labels(root, "sublabel")
    assert t_labels[0] == "T0" and v_labels[0] == "V0" and t_labels[1] == "T0" and v_labels[1] == "V1"
    # the PTX formula: thread 32w+l, value i → row 16w + l/4 + 8((i/2)%2), column 8(i/4) + 2(l%4) + i%2
    grid = {}
    for t in range(128):
        w, lane = divmod(t, 32)
        for i in range(8):
            row = 16 * w + lane // 4 + 8 * ((i // 2) % 2)
            col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
            grid[row, col] = (f"T{t}", f"V{i}")
    assert list(zip(t_labels, v_labels)) == [grid[i, j] for i in range(64) for j in range(16)]
    fills = [c.get("fill") for c in cells(root)]
    assert fills[0] == PALETTE[0] and fills[2] == PALETTE[1]  # T0, then T1, coloured by thread
    assert svg == tv_layout_svg(tv, 64, 16)


def test_tv_layout_svg_one_warp_and_caps():
    tv = accumulator_tv(16)
    root = parse(tv_layout_svg(tv, 64, 16, threads=32))
    assert len(cells(root)) == 64 * 16
    assert len(labels(root)) == 32 * 8  # only warp 0's cells are labelled; the rest stay white
    assert {c.get("fill") for c in cells(root)[16 * 16:]} == {"#ffffff"}
    assert any("threads 0..31 of 128" in n for n in labels(root, "note"))
    root = parse(tv_layout_svg(tv, 64, 16, max_cells=256))
    assert len(cells(root)) == 256 and any("first 16 of 64 rows" in n for n in labels(root, "note"))
    ldm = ldmatrix_access((16, 16), "bf16", (2, 2))
    root = parse(tv_layout_svg(ldm, 16, 16))
    assert labels(root)[:9] == ["T0"] * 8 + ["T16"]  # row 0: lane 0's 8 values, then matrix 2 (k 8..15)


def test_tv_layout_svg_repeats_and_outside():
    root = parse(tv_layout_svg(L((4, 2), (1, 0)), 2, 2))  # values broadcast; indices 2, 3 land in column 1
    notes = labels(root, "note")
    assert any("4 (t,v) pairs hit an already-labelled cell" in n for n in notes)
    root = parse(tv_layout_svg(L(8, 1), 2, 2))
    assert any("4 (t,v) pairs fall outside the tile" in n for n in labels(root, "note"))


def test_swizzle_svg_sw128():
    svg = swizzle_svg(lc.Swizzle(3, 4, 3), "bf16")
    root = parse(svg)
    assert "Sw<3,4,3>: 8 rows × 128 B" in title(root)[0]
    assert len(cells(root)) == 2 * 8 * 8
    got = labels(root)
    left, right = got[:64], got[64:]
    assert left == [str(c) for r in range(8) for c in range(8)]
    assert right == [str(p ^ r) for r in range(8) for p in range(8)]  # the XOR pattern
    subs = labels(root, "sublabel")
    assert subs[:2] == ["e0-7", "e8-15"] and subs[64 + 8] == "e8-15"
    notes = labels(root, "note")
    assert any("8-way without the swizzle, 1-way with it" in n for n in notes)
    assert svg == swizzle_svg(lc.Swizzle(3, 4, 3), "bf16")


def test_swizzle_svg_from_layouts_and_other_widths():
    root = parse(swizzle_svg(gmma_atom("K", "SW32", "bf16"), "bf16"))
    assert title(root)[0].startswith("Sw<1,4,3> o 0 o (8,16):(16,1): 8 rows × 32 B")
    right = labels(root)[16:]
    assert right == [str(p ^ (r >> 2)) for r in range(8) for p in range(2)]
    root = parse(swizzle_svg(gmma_atom("MN", "SW64", "f32"), "f32"))
    assert len(cells(root)) == 2 * 8 * 4
    root = parse(swizzle_svg(L((8, 8), (8, 1)), "bf16"))  # no swizzle: identity picture
    assert labels(root)[:64] == labels(root)[64:]
    with pytest.raises(lc.LayoutError):
        swizzle_svg("Sw<3,4,3>")


def test_save_and_check(tmp_path):
    svg = layout_svg(L((4, 4)))
    path = save_svg(svg, tmp_path / "sub" / "x.svg")
    assert open(path, encoding="utf-8").read() == svg
    with pytest.raises(ValueError):
        save_svg("<svg><rect></svg>", tmp_path / "bad.svg")
    assert not (tmp_path / "bad.svg").exists()
    with pytest.raises(ValueError):
        check_svg("<html/>")
    assert isinstance(check_svg(svg), ET.Element)


def test_showcase_writes_three_pictures(tmp_path):
    paths = showcase(tmp_path)
    assert [p.rsplit("/", 1)[-1] for p in paths] == [
        "layout_sw128_bf16.svg", "tv_wgmma_acc_64x16.svg", "swizzle_sw128.svg"]
    for p in paths:
        check_svg(open(p, encoding="utf-8").read())
