"""The 8 GMMA smem atoms for 8-, 16- and 32-bit elements equal CuTe's GMMA::Layout_*_Atom<T>, and their tilings
to stage shapes are CuTe's."""
import pytest

import layoutc as lc
from layoutc.hopper import gmma_atom, gmma_smem_layout

# (major, swizzle) -> (8-bit, 16-bit, 32-bit) inner layouts; the swizzle is Sw<B,4,3> on byte addresses
ATOMS = {
    ("MN", "INTER"): ("(16,8):(1,16)", "(8,8):(1,8)", "(4,8):(1,4)"),
    ("MN", "SW32"): ("(32,8):(1,32)", "(16,8):(1,16)", "(8,8):(1,8)"),
    ("MN", "SW64"): ("(64,8):(1,64)", "(32,8):(1,32)", "(16,8):(1,16)"),
    ("MN", "SW128"): ("(128,8):(1,128)", "(64,8):(1,64)", "(32,8):(1,32)"),
    ("K", "INTER"): ("(8,16):(16,1)", "(8,8):(8,1)", "(8,4):(4,1)"),
    ("K", "SW32"): ("(8,32):(32,1)", "(8,16):(16,1)", "(8,8):(8,1)"),
    ("K", "SW64"): ("(8,64):(64,1)", "(8,32):(32,1)", "(8,16):(16,1)"),
    ("K", "SW128"): ("(8,128):(128,1)", "(8,64):(64,1)", "(8,32):(32,1)"),
}
SWIZZLE_BITS = {"INTER": 0, "SW32": 1, "SW64": 2, "SW128": 3}


@pytest.mark.parametrize("major, swizzle", list(ATOMS))
@pytest.mark.parametrize("width, dtype", [(0, "e4m3"), (1, "bf16"), (2, "tf32")])
def test_atom(major, swizzle, width, dtype):
    want = f"Sw<{SWIZZLE_BITS[swizzle]},4,3> o 0 o {ATOMS[(major, swizzle)][width]}"
    assert lc.to_str(gmma_atom(major, swizzle, dtype)) == want


def test_same_atom_for_types_of_one_width():
    for a, b in (("bf16", "f16"), ("e4m3", "s8"), ("tf32", "f32")):
        assert gmma_atom("K", "SW64", a) == gmma_atom("K", "SW64", b)


@pytest.mark.parametrize("major, shape, want, coalesced", [
    ("MN", (128, 64, 3), "Sw<3,4,3> o 0 o ((64,2),(8,8),(1,3)):((1,512),(64,1024),(0,8192))",
     "Sw<3,4,3> o 0 o ((64,2),(8,8),3):((1,512),(64,1024),8192)"),
    ("K", (128, 64, 3), "Sw<3,4,3> o 0 o ((8,16),(64,1),(1,3)):((64,512),(1,0),(0,8192))",
     "Sw<3,4,3> o 0 o (128,64,3):(64,1,8192)"),
    ("K", (64, 128), "Sw<3,4,3> o 0 o ((8,8),(64,2)):((64,512),(1,4096))",
     "Sw<3,4,3> o 0 o (64,(64,2)):(64,(1,4096))"),
])
def test_bf16_sw128_stage_tilings(major, shape, want, coalesced):
    tiled = gmma_smem_layout(major, "SW128", "bf16", shape)
    assert lc.to_str(tiled) == want
    assert lc.to_str(lc.coalesce(tiled, (1,) * len(shape))) == coalesced



def test_unknown_type_and_swizzle_are_refused():
    with pytest.raises(lc.LayoutError, match="unknown element type"):
        gmma_atom("K", "SW128", "bf17")
    with pytest.raises(lc.LayoutError, match="swizzle must be"):
        gmma_atom("K", "SW256", "bf16")
    with pytest.raises(lc.LayoutError, match="major must be"):
        gmma_atom("N", "SW128", "bf16")
