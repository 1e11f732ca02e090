"""The layoutc command line: each subcommand's output on real inputs, and one-line errors with a nonzero exit."""
import pytest

from layoutc.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_atom_builds_the_layout_and_checks_its_descriptor(capsys):
    code, out, _ = run(capsys, "atom", "K", "SW128", "bf16", "--tile", "128,64,3")
    assert code == 0
    assert "tiled      Sw<3,4,3> o 0 o ((8,16),(64,1),(1,3)):((64,512),(1,0),(0,8192))" in out
    assert "coalesced  Sw<3,4,3> o 0 o (128,64,3):(64,1,8192)" in out
    assert "0x4000004000010040" in out        # start 0x400, LBO 16 B, SBO 1024 B, 128B swizzle


def test_atom_refuses_a_transposed_fp8_operand(capsys):
    code, out, err = run(capsys, "atom", "MN", "SW128", "e4m3")
    assert code == 2
    assert "only f16/bf16 support the transpose" in err
    assert len(err.strip().splitlines()) == 1


def test_show_prints_properties_and_grid(capsys):
    code, out, _ = run(capsys, "show", "(4,(2,3)):(2,(1,8))")
    assert code == 0
    assert "size     24   cosize 24   rank 2   depth 2" in out
    assert "coalesce (4,2,3):(2,1,8)" in out


def test_show_with_dtype_shows_physical_slots(capsys):
    code, out, _ = run(capsys, "show", "Sw<3,4,3> o (8,64):(64,1)", "--dtype", "bf16")
    assert code == 0
    row1 = [line for line in out.splitlines() if line.startswith("   1 ")][0].split()
    assert row1[1:9] == ["72", "73", "74", "75", "76", "77", "78", "79"]   # row 1's first chunk is chunk 1


def test_show_writes_svg(capsys, tmp_path):
    path = tmp_path / "l.svg"
    code, out, _ = run(capsys, "show", "(4,8):(8,1)", "--svg", str(path))
    assert code == 0 and path.read_text().startswith("<svg")


def test_desc_and_decode_agree(capsys):
    code, out, _ = run(capsys, "desc", "Sw<3,4,3> o (64,16):(64,1)", "--dtype", "bf16", "--major", "K",
                       "--base", "0x400")
    assert code == 0 and "0x4000004000010040" in out
    code, out, _ = run(capsys, "decode", "0x4000004000010040")
    assert code == 0 and "SBO=1024 B" in out and "SW128" in out


def test_desc_rejects_a_non_atom_layout_with_the_reason(capsys):
    code, _, err = run(capsys, "desc", "(64,16):(16,1)", "--dtype", "bf16", "--major", "K")
    assert code == 2
    assert "8-row stride" in err


def test_tma_parameters(capsys):
    code, out, _ = run(capsys, "tma", "--global", "(4096,4096):(4096,1)", "--box", "Sw<3,4,3> o (8,64):(64,1)",
                       "--dtype", "bf16")
    assert code == 0
    assert "boxDim                   (64, 8)" in out
    assert "CU_TENSOR_MAP_SWIZZLE_128B" in out
    assert "expect-tx bytes per box  1024" in out


def test_tma_swizzle_mismatch_is_one_line(capsys):
    code, _, err = run(capsys, "tma", "--global", "(4096,4096):(4096,1)", "--box", "Sw<3,4,3> o (8,32):(32,1)",
                       "--dtype", "bf16")
    assert code == 2
    assert "not what TMA writes" in err and len(err.strip().splitlines()) == 1


def test_banks(capsys):
    code, out, _ = run(capsys, "banks", "--tv", "((8,4),8):((1,64),8)", "--smem", "Sw<3,4,3> o (8,64):(64,1)",
                       "--dtype", "bf16")
    assert code == 0 and "1-way" in out
    code, out, _ = run(capsys, "banks", "--tv", "((8,4),8):((1,64),8)", "--smem", "(8,64):(64,1)", "--dtype", "bf16")
    assert code == 0 and "8-way" in out


def test_op_applies_algebra(capsys):
    code, out, _ = run(capsys, "op", "composition", "(12,(4,8)):(59,(13,1))", "<3:4,8:2>")
    assert code == 0 and out.strip() == "(3,(2,4)):(236,(26,1))"


@pytest.mark.parametrize("argv, message", [
    (("show", "(2,3):(1,"), "column"),
    (("show", "(2,3):(1)"), "not congruent"),
    (("op", "complement", "(2,2):(1,1)"), "Non-injective"),
    (("decode", "xyz"), "hexadecimal"),
    (("atom", "K", "SW96", "bf16"), "swizzle must be INTER, SW32, SW64 or SW128"),
    (("atom", "K", "SW128", "bf17"), "unknown element type"),
])
def test_bad_input_exits_nonzero_with_one_line(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "layoutc atom K SW128 bf16 --tile 128,64,3" in capsys.readouterr().out
