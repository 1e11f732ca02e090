"""``{fence = true}`` on wgmma.mma / wgmma.mma_rs (spec/tile-ir.md §4.10): the op's own wgmma.fence, lowered into the
wgmmas' asm statement so that nothing is scheduled between the fence and the first wgmma (ptxas otherwise injects a
warpgroup.arrive, C7519, and in a divergent path serializes every wgmma, C7520); and an accumulator that is the
constant zero lowered as scale-d 0 with undefined inputs (no register writes before the wgmma)."""
import pathlib
import re

import pytest

from ptxgen.ir.text import parse_module, print_module
from ptxgen.kernels.attention import AttentionConfig, build, choose_config
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

GEMM = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "gemm.tile").read_text()
FENCED = GEMM.replace("      wgmma.fence\n", "").replace(
    "wgmma.mma %a_rows, %b_stage, %acc_in :", "wgmma.mma %a_rows, %b_stage, %acc_in {fence = true} :")
# one asm statement: its opening brace, then its lines up to the closing one
STATEMENT = re.compile(r"\{ \.reg \.pred %scale_d[^\n]*\n(?:\t[^\n]*\n)*?\t\}")


def fenced_statements(ptx: str) -> list:
    """(statement starts with its fence, statement) for every asm statement holding a wgmma.mma_async."""
    found = []
    for match in STATEMENT.finditer(ptx):
        text = match.group(0)
        if "wgmma.mma_async" in text:
            first = text.split("\n")[1].strip()
            found.append((first == "wgmma.fence.sync.aligned;", text))
    return found


def test_the_attribute_takes_the_place_of_the_fence_op_and_prints_back():
    module = parse_module(FENCED, file="gemm.tile")
    verify(module)
    text = print_module(module)
    assert "wgmma.mma %a_rows, %b_stage, %acc_in {fence = true} : frag<f32>[64]" in text
    assert print_module(parse_module(text)) == text


def test_without_the_attribute_the_fence_rule_still_names_the_wgmma():
    with pytest.raises(VerifyError) as e:
        verify(parse_module(FENCED.replace(" {fence = true}", ""), file="gemm.tile"))
    assert str(e.value).startswith("gemm.tile:59:7: wgmma.mma: no wgmma.fence is executed before it")


@pytest.mark.parametrize("value, message", [
    ("1", "gemm.tile:59:7: wgmma.mma: attribute 'fence' must be true or false, not 1"),
])
def test_a_fence_that_is_no_boolean_is_refused(value, message):
    with pytest.raises(VerifyError) as e:
        verify(parse_module(FENCED.replace("fence = true", f"fence = {value}"), file="gemm.tile"))
    assert str(e.value) == message


def test_a_misspelt_fence_is_named_with_a_hint():
    with pytest.raises(VerifyError) as e:
        verify(parse_module(FENCED.replace("fence = true", "fenc = true"), file="gemm.tile"))
    assert str(e.value) == "gemm.tile:59:7: wgmma.mma: unknown attribute 'fenc' (did you mean 'fence'?)"


def test_the_fence_is_the_first_instruction_of_the_wgmma_statement():
    ptx = compile_kernel(parse_module(FENCED, file="gemm.tile")).ptx
    assert [first for first, _ in fenced_statements(ptx)] == [True]
    assert ptx.count("wgmma.fence.sync.aligned;") == 1      # no separate fence besides


def test_the_fence_op_alone_stays_a_statement_of_its_own():
    ptx = compile_kernel(parse_module(GEMM, file="gemm.tile")).ptx
    assert [first for first, _ in fenced_statements(ptx)] == [False]
    assert ptx.count("wgmma.fence.sync.aligned;") == 1


ATTENTION = [choose_config("bf16", 64, False, seqlens=(4096, 4096)),           # three consumer warpgroups
             choose_config("bf16", 64, True, seqlens=(1024, 1024)),            # persistent, two
             choose_config("bf16", 128, True, seqlens=(16384, 16384)),
             AttentionConfig("bf16", 64, 128, 2, False, overlap=True, pingpong=True, epilogue="tma",
                             consumer_warpgroups=3, persistent=True, o_buffer=True)]


@pytest.mark.parametrize("config", ATTENTION, ids=["wg3", "wg2-persistent", "d128-16k-causal", "wg3-persistent"])
def test_every_attention_wgmma_group_is_fenced_in_its_own_statement(config):
    """Each S = Q·Kᵀ and P·V group starts with its fence (after the pipeline's wait, the branches of the ping-pong):
    the kernel has no separate wgmma.fence left for ptxas to find registers written after."""
    ptx = compile_kernel(build(config)).ptx
    statements = fenced_statements(ptx)
    assert statements and all(first for first, _ in statements)
    assert ptx.count("wgmma.fence.sync.aligned;") == len(statements)


def test_a_zero_accumulator_is_scale_d_zero_with_undefined_inputs():
    """S = Q·Kᵀ from zero: the statement's scale-d register holds 0 and none of its accumulator registers is
    written before it (LLVM's undef), while P·V's carried O is accumulated (scale-d 1)."""
    ptx = compile_kernel(build(AttentionConfig("bf16", 64, 128, causal=True))).ptx
    scale_of = {}
    for line in ptx.splitlines():
        m = re.match(r"\s*mov\.b32\s+(%r\d+), (\d+);", line)
        if m:
            scale_of[m.group(1)] = int(m.group(2))
    kinds = set()
    for _, text in fenced_statements(ptx):
        register = re.search(r"setp\.ne\.b32 %scale_d, (%r\d+), 0;", text).group(1)
        rs = re.search(r"\}, \{%r", text) is not None
        kinds.add((rs, scale_of.get(register)))
        if not rs:
            first_acc = re.search(r"\{(%r\d+),", text.split("wgmma.mma_async")[1]).group(1)
            assert not re.search(rf"\b(mov|ld|add|mul|cvt)\S*\s+{re.escape(first_acc)},", ptx), first_acc
    assert kinds == {(False, 0), (True, 1)}
