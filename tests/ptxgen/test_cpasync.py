"""cpasync.copy / cpasync.commit / cpasync.wait: the text form's round trip, the verifier's messages, the interpreter
against numpy (ragged edges read as zeros), the cp.async forms in the PTX and nvJitLink assembling it, and a GPU run."""
from __future__ import annotations

import re

import numpy as np
import pytest

import layoutc as lc
from ptxgen.interp import interpret
from ptxgen.ir.builder import KernelBuilder, cdiv, dim, f32, frag, gtensor, i32, smem
from ptxgen.ir.host_dtypes import host_dtype
from ptxgen.ir.ops.cpasync import copy_runs
from ptxgen.ir.text import parse_module, print_module
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.verify import VerifyError, verify

ROW_TV = lc.parse("((8,4),16):((1,128),8)")   # thread (r, q): columns 16·q … 16·q + 15 of row r of an (8, 64) tile


def copy_kernel(dtype: str = "bf16", pitch: int = 64, vector_check: bool = False, l2_prefetch=None):
    """One CTA per (8, 64) tile: cpasync.copy of x's tile into a row-major smem tile of row pitch ``pitch``, commit,
    wait 0, CTA barrier, then smem.load and gmem.store of the same tile into y (so y == x)."""
    kb = KernelBuilder("k", grid=(cdiv(dim("x", 1), 64), cdiv(dim("x", 0), 8), 1), block=(32, 1, 1),
                       x=gtensor(dtype, 2), y=gtensor(dtype, 2))
    b = kb.b
    tile = b.smem.alloc(type=smem(dtype, lc.Layout((8, 64), (pitch, 1))), name="tile")
    t = b.gpu.thread_id(dim="x", name="t")
    m0 = b.arith.mul(b.gpu.block_id(dim="y", name="by"), b.const(8, i32, name="rows"), name="m0")
    n0 = b.arith.mul(b.gpu.block_id(dim="x", name="bx"), b.const(64, i32, name="cols"), name="n0")
    attrs = {}
    if vector_check:
        attrs["vector_check"] = True
    if l2_prefetch:
        attrs["l2_prefetch"] = l2_prefetch
    b.cpasync.copy(b.gmem.tile(kb["x"], m0, n0, shape=(8, 64), name="xt"), t, tile, tv=ROW_TV, **attrs)
    b.cpasync.commit()
    b.cpasync.wait(pending=0)
    b.barrier.cta()
    ys = b.smem.load(tile, t, tv=ROW_TV, type=frag(dtype, 16), name="ys")
    b.gmem.store(b.gmem.tile(kb["y"], m0, n0, shape=(8, 64), name="yt"), t, ys, tv=ROW_TV)
    return kb.module()


def random(shape, dtype, rng):
    return rng.standard_normal(shape).astype(host_dtype(dtype))


def test_text_round_trip():
    module = copy_kernel(vector_check=True, l2_prefetch=128)
    verify(module)
    text = print_module(module)
    assert ("cpasync.copy %xt, %t, %tile {tv = [((8,4),16):((1,128),8)], vector_check = true, l2_prefetch = 128}"
            in text)
    assert "  cpasync.commit\n  cpasync.wait {pending = 0}\n" in text
    assert print_module(parse_module(text)) == text


HEADER = ("kernel @k(%x: gtensor<bf16, 2>) {grid = (1, 1, 1), block = (32, 1, 1)} {\n"
          "  %c0 = arith.const {value = 0} : i32\n"
          "  %s = smem.alloc : smem<bf16>[(8,64):(64,1)]\n"
          "  %g = gmem.tile %x, %c0, %c0 {shape = [(8,64)]} : gview<bf16>[(8,64)]\n")


def errors(body: str) -> list:
    with pytest.raises(VerifyError) as e:
        verify(parse_module(HEADER + body + "}\n", file="m.tile"))
    return str(e.value).splitlines()


@pytest.mark.parametrize("body, message", [
    ("  cpasync.copy %g, %c0, %s {tv = [((8,4),16):((8,128),1)]}\n",
     "m.tile:5:3: cpasync.copy: tv ((8,4),16):((8,128),1) (smem_tv ((8,4),16):((8,128),1)) moves runs of 1 bf16 "
     "element (2 bytes) contiguous in both the tile's last mode and the view (aligned); cp.async copies 4, 8 or 16 "
     "bytes: give each thread aligned runs of at least 2 elements, or use gmem.load and smem.store"),
    ("  cpasync.copy %s, %c0, %s {tv = [((8,4),16):((1,128),8)]}\n",
     "m.tile:5:3: cpasync.copy: the first operand must be a gview, not smem<bf16>[(8,64):(64,1)]"),
    ("  cpasync.copy %g, %c0, %g {tv = [((8,4),16):((1,128),8)]}\n",
     "m.tile:5:3: cpasync.copy: the third operand must be a smem view, not gview<bf16>[(8,64)]"),
    ("  cpasync.copy %g, %c0, %s {tv = [((8,4),16):((1,128),8)], l2_prefetch = 32}\n",
     "m.tile:5:3: cpasync.copy: l2_prefetch must be 64, 128 or 256 (bytes: cp.async's .L2::64B/128B/256B), not 32"),
    ("  cpasync.copy %g, %c0, %s {tv = [((8,4),16):((1,128),8)], smem_tv = [(16,32):(32,1)]}\n",
     "m.tile:5:3: cpasync.copy: tv's value mode 32:1 has 32 values but the fragment (16) has 16"),
    ("  cpasync.wait {pending = 8}\n",
     "m.tile:5:3: cpasync.wait: pending must be 0..7 (cp.async.wait_group's immediate: groups still in flight), "
     "not 8"),
    ("  cpasync.wait\n", "m.tile:5:3: cpasync.wait: missing attribute 'pending'"),
])
def test_verifier_messages(body, message):
    assert errors(body) == [message]


def test_copy_runs():
    """The runs follow both sides: 16 bytes into a row-major tile, 4 bytes where a 2-element row padding breaks the
    16-byte alignment of odd rows, none into a column-major tile."""
    assert copy_runs(ROW_TV, ROW_TV, (8, 64), lc.Layout((8, 64), (64, 1)), 2) == (8, (tuple(range(8)),
                                                                                      tuple(range(8, 16))))
    assert copy_runs(ROW_TV, ROW_TV, (8, 64), lc.Layout((8, 64), (66, 1)), 2)[0] == 2
    assert copy_runs(ROW_TV, ROW_TV, (8, 64), lc.Layout((8, 64), (1, 8)), 2)[0] == 1


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("shape", [(8, 64), (13, 70), (5, 3), (17, 129)])
def test_interpreter_copies_and_zero_fills(dtype, shape):
    """y == x over ragged shapes (the kernel's tiles past x's edges copy zeros into smem, which the store skips); a
    smem tile read back directly shows the zeros."""
    rng = np.random.default_rng(0)
    x = random(shape, dtype, rng)
    y = np.zeros_like(x)
    interpret(copy_kernel(dtype, vector_check=True), {"x": x, "y": y})
    assert np.array_equal(y.astype(np.float32), x.astype(np.float32))


def test_interpreter_writes_zeros_outside():
    """A 3 x 5 x read through an (8, 64) tile over a smem tile first filled with 7: afterwards it holds x and zeros
    everywhere else (src-size's zero fill), read back into an (8, 64) y."""
    kb = KernelBuilder("k", grid=(1, 1, 1), block=(32, 1, 1), x=gtensor("f32", 2), y=gtensor("f32", 2))
    b = kb.b
    tile = b.smem.alloc(type=smem("f32", lc.Layout((8, 64), (64, 1))), name="tile")
    t = b.gpu.thread_id(dim="x", name="t")
    zero = b.const(0, i32, name="zero")
    b.smem.store(tile, t, b.frag.splat(b.const(7.0, f32, name="seven"), type=frag("f32", 16)), tv=ROW_TV)
    b.barrier.cta()
    b.cpasync.copy(b.gmem.tile(kb["x"], zero, zero, shape=(8, 64)), t, tile, tv=ROW_TV)
    b.cpasync.commit()
    b.cpasync.wait(pending=0)
    b.barrier.cta()
    ys = b.smem.load(tile, t, tv=ROW_TV, type=frag("f32", 16))
    b.gmem.store(b.gmem.tile(kb["y"], zero, zero, shape=(8, 64)), t, ys, tv=ROW_TV)
    x = np.arange(1, 16, dtype=np.float32).reshape(3, 5)
    y = np.full((8, 64), -1.0, np.float32)
    interpret(kb.module(), {"x": x, "y": y})
    want = np.zeros((8, 64), np.float32)
    want[:3, :5] = x
    assert np.array_equal(y, want)


def ptx_of(module, aligned: bool):
    spec = Specialization.of(x=TensorSpec(1, aligned, 1), y=TensorSpec(1, aligned, 1))
    return compile_kernel(module.kernels[0], spec)


def test_ptx_forms_and_cubin():
    """Aligned rows: two 16-byte ``cp.async.cg`` per thread, no branch around them (src-size zero-fills the edge);
    ``l2_prefetch = 128`` adds ``.L2::128B``; unaligned rows with ``vector_check``: the same copies behind a run-time
    test, f32 falling back to 4-byte ``cp.async.ca`` per element; bf16 without the check: no cp.async at all (2-byte
    elements go by ld.global + st.shared). Every module assembles (nvJitLink) without spills."""
    aligned = ptx_of(copy_kernel("bf16"), True)
    assert re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", aligned.ptx).__len__() == 2
    assert "cp.async.commit_group;" in aligned.ptx and "cp.async.wait_group 0;" in aligned.ptx
    hinted = ptx_of(copy_kernel("bf16", l2_prefetch=128), True)
    assert len(re.findall(r"cp\.async\.cg\.shared\.global\.L2::128B ", hinted.ptx)) == 2
    checked = ptx_of(copy_kernel("bf16", vector_check=True), False)
    assert len(re.findall(r"cp\.async\.cg\.shared\.global ", checked.ptx)) == 2
    assert "ld.global" in checked.ptx and "st.shared.b16" in checked.ptx
    f32 = ptx_of(copy_kernel("f32", vector_check=True), False)
    assert len(re.findall(r"cp\.async\.cg\.shared\.global ", f32.ptx)) == 4
    assert len(re.findall(r"cp\.async\.ca\.shared\.global \S+ \S+ 4,", f32.ptx)) == 16
    plain = ptx_of(copy_kernel("bf16"), False)
    assert "cp.async.cg" not in plain.ptx and "cp.async.ca" not in plain.ptx
    padded = ptx_of(copy_kernel("bf16", pitch=66), True)
    assert len(re.findall(r"cp\.async\.ca\.shared\.global \S+ \S+ 4,", padded.ptx)) == 8
    for c in (aligned, hinted, checked, f32, plain, padded):
        assert c.cubin is not None and c.spill_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("shape", [(8, 64), (1000, 1003), (37, 4099), (1024, 2048)])
def test_gpu_copy(dtype, shape):
    """On the GPU: y == x exactly (a copy), with vector_check (unaligned pitches take the element path at run time)."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import jit
    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = torch.randn(shape, device="cuda", dtype=torch.float64).to(torch_dtype)
    y = torch.full_like(x, float("nan"))
    jit(copy_kernel(dtype, vector_check=True, l2_prefetch=128))(x=x, y=y)
    torch.cuda.synchronize()
    assert torch.equal(x, y)
