"""The block-scaled fp8 ops' fast path (``ptxgen.kernels.fast_call.FastCall`` as ``fp8`` uses it) on the CPU: with a stand-in torch
(metadata-only CUDA tensors, benchmarks/torch_standin.py) and a stub driver, a repeated call of ``fp8_gemm_nt`` or of
the grouped GEMMs with a known signature launches exactly the argument block the checked path launches for the same
tensors (every pointer, extent, stride and tensor map: the stand-in's map bytes name the address, shape and strides),
and a call that differs in anything a check reads — dtype, shape, strides, 16-byte alignment, expected_m, the stream —
takes the checked path again and raises its error."""
import re

import pytest

from standin_torch import standin_torch


@pytest.fixture
def env(monkeypatch):
    from ptxgen.kernels import fp8

    torch, standin, launches = standin_torch(monkeypatch)
    for name in ("_FAST", "_SITES", "_JIT"):
        monkeypatch.setattr(fp8, name, {})
    return torch, standin, launches


def _checked_calls(monkeypatch):
    """A counter of the checked paths' entries (``_gemm``, ``_contiguous``, ``_masked``)."""
    from ptxgen.kernels import fp8

    calls = []
    for name in ("_gemm", "_contiguous", "_masked"):
        checked = getattr(fp8, name)

        def counting(*args, _checked=checked, _name=name, **kwargs):
            calls.append(_name)
            return _checked(*args, **kwargs)
        monkeypatch.setattr(fp8, name, counting)
    return calls


def _block_of(address):
    """The bytes of the launched argument block whose ``void*`` array is at ``address``."""
    from ptxgen.kernels import fp8

    for site in fp8._SITES.values():
        if site.block_launch.address == address:
            return bytes(site.block_launch.bytes)
    raise AssertionError("the launch came from no prepared call site")


def _operands(torch, standin, case, base):
    """(the op as a function of its tensors, the tensors) of ``case``, at addresses from ``base``."""
    from ptxgen.kernels import fp8_gemm_nt, m_grouped_fp8_gemm_nt_contiguous, m_grouped_fp8_gemm_nt_masked

    e4m3, f32, i32 = torch.float8_e4m3fn, torch.float32, torch.int32
    t = standin.tensor
    if case.startswith("fp8_gemm_nt") and case != "fp8_gemm_nt out=":
        m, n, k = {"fp8_gemm_nt": (256, 512, 1024), "fp8_gemm_nt small M (swap-AB)": (16, 2048, 1024),
                   "fp8_gemm_nt N = 2112 (straddling)": (4096, 2112, 7168)}[case]
        kb, nb = -(-k // 128), -(-n // 128)
        ma = -(-m // 4) * 4
        tensors = (t((m, k), (k, 1), e4m3, base), t((m, kb), (1, ma), f32, base + 0x1000000),   # M-major scales
                   t((n, k), (k, 1), e4m3, base + 0x2000000), t((nb, kb), (kb, 1), f32, base + 0x3000000))
        return (lambda *x: fp8_gemm_nt(*x)), tensors
    if case == "fp8_gemm_nt out=":
        m, n, k = 256, 512, 1024
        tensors = (t((m, k), (k, 1), e4m3, base), t((m, 8), (1, m), f32, base + 0x1000000),   # M-major scales
                   t((n, k), (k, 1), e4m3, base + 0x2000000), t((4, 8), (8, 1), f32, base + 0x3000000),
                   t((m, n), (n, 1), torch.bfloat16, base + 0x4000000))
        return (lambda *x: fp8_gemm_nt(*x)), tensors
    g, n, k = 4, 512, 1024
    b = (t((g, n, k), (n * k, k, 1), e4m3, base + 0x2000000), t((g, 4, 8), (32, 8, 1), f32, base + 0x3000000))
    if case == "contiguous":
        m = 512
        tensors = (t((m, k), (k, 1), e4m3, base), t((m, 8), (1, m), f32, base + 0x1000000)) + b + \
            (t((m,), (1,), i32, base + 0x4000000),)
        return (lambda a, sa, b, sb, idx: m_grouped_fp8_gemm_nt_contiguous(a, sa, b, sb, None, idx)), tensors
    if case == "masked":
        m_max = 256
        tensors = (t((g, m_max, k), (m_max * k, k, 1), e4m3, base),
                   t((g, m_max, 8), (8 * m_max, 1, m_max), f32, base + 0x1000000)) + b + \
            (t((g,), (1,), i32, base + 0x4000000),)
        return (lambda a, sa, b, sb, mm: m_grouped_fp8_gemm_nt_masked(a, sa, b, sb, None, mm, 200)), tensors
    raise ValueError(case)


CASES = ["fp8_gemm_nt", "fp8_gemm_nt small M (swap-AB)", "fp8_gemm_nt N = 2112 (straddling)", "fp8_gemm_nt out=",
         "contiguous", "masked"]


@pytest.mark.parametrize("case", CASES)
def test_repeated_call_launches_the_block_of_the_checked_path(env, monkeypatch, case):
    from ptxgen.kernels import fp8

    torch, standin, launches = env
    op, first = _operands(torch, standin, case, 0x10000000)
    op(*first)                                     # the checked path, which remembers the signature
    assert len(fp8._FAST) == 1
    checked = _checked_calls(monkeypatch)
    _, again = _operands(torch, standin, case, 0x50000000)   # other addresses, the same signature
    standin._NEXT.clear()                          # C gets the same address in both calls below
    c_fast = op(*again)
    assert checked == []                           # the fast path
    fast_block = _block_of(launches[-1])
    fp8._FAST.clear()
    standin._NEXT.clear()
    c_slow = op(*again)
    assert len(checked) == 1                       # the checked path
    assert (c_fast.shape, c_fast.stride(), c_fast.dtype, c_fast.data_ptr()) == \
        (c_slow.shape, c_slow.stride(), c_slow.dtype, c_slow.data_ptr())
    assert _block_of(launches[-1]) == fast_block
    # the block names the new tensors, none of the first call's (pointer slots and maps are 8-byte words)
    words = [int.from_bytes(fast_block[i:i + 8], "little") for i in range(0, len(fast_block), 8)]
    assert 0x50000000 in words and 0x52000000 in words
    assert not any(0x10000000 <= w < 0x15000000 for w in words)


def test_a_first_call_with_a_is_b_keeps_the_roles(env, monkeypatch):
    """A first call whose A and B are one tensor (one address) must not teach the fast path which argument feeds which
    kernel operand by address: a later call of distinct A and B launches the checked path's block."""
    from ptxgen.kernels import fp8, fp8_gemm_nt

    torch, standin, launches = env
    t = standin.tensor
    e4m3, f32 = torch.float8_e4m3fn, torch.float32
    k = 1024
    x = t((16, k), (k, 1), e4m3, 0x10000000)
    s = t((16, 8), (8, 1), f32, 0x11000000)
    sb = t((1, 8), (8, 1), f32, 0x12000000)
    fp8_gemm_nt(x, s, x, sb)
    a, b = t((16, k), (k, 1), e4m3, 0x50000000), t((16, k), (k, 1), e4m3, 0x60000000)
    standin._NEXT.clear()
    fp8_gemm_nt(a, s, b, sb)
    fast_block = _block_of(launches[-1])
    fp8._FAST.clear()
    standin._NEXT.clear()
    fp8_gemm_nt(a, s, b, sb)
    assert _block_of(launches[-1]) == fast_block


def _wrong(torch, standin, what, args):
    t = standin.tensor
    a, sa, b, sb = args
    if what == "b dtype e5m2":
        return a, sa, t(b.shape, b.stride(), torch.float8_e5m2, b.data_ptr()), sb
    if what == "a_scales bf16":
        return a, t(sa.shape, sa.stride(), torch.bfloat16, sa.data_ptr()), b, sb
    if what == "K mismatch":
        return t((a.shape[0], a.shape[1] + 16), (a.shape[1] + 16, 1), a.dtype, a.data_ptr()), sa, b, sb
    if what == "b_scales shape":
        return a, sa, b, t((3, 8), (8, 1), sb.dtype, sb.data_ptr())
    if what == "a on cuda:1":
        return standin.Tensor(a.shape, a.stride(), a.dtype, a.data_ptr(), standin.Device(1)), sa, b, sb
    raise ValueError(what)


@pytest.mark.parametrize("what, error, message", [
    ("b dtype e5m2", TypeError, "fp8_gemm_nt: b has dtype torch.float8_e5m2; fp8_gemm_nt takes e4m3 "
                                "(torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn)"),
    ("a_scales bf16", TypeError, "fp8_gemm_nt: a_scales has dtype torch.bfloat16; the scales are float32 "
                                 "(torch.float32, numpy.float32)"),
    ("K mismatch", ValueError, "fp8_gemm_nt: b has 1024 columns but a has 1040: a (M, K) and b (N, K) share K"),
    ("b_scales shape", ValueError, "fp8_gemm_nt: b_scales must have shape (4, 8) (⌈N/128⌉, ⌈K/128⌉: one per "
                                   "128 × 128 block), not (3, 8)"),
    ("a on cuda:1", ValueError, "fp8_gemm_nt: a is on cuda:1; the ptxgen runtime runs on cuda:0"),
])
def test_a_known_signature_never_hides_a_check(env, what, error, message):
    from ptxgen.kernels import fp8, fp8_gemm_nt

    torch, standin, _ = env
    _, args = _operands(torch, standin, "fp8_gemm_nt", 0x10000000)
    fp8_gemm_nt(*args)
    fp8_gemm_nt(*args)
    assert len(fp8._FAST) == 1
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        fp8_gemm_nt(*_wrong(torch, standin, what, args))


@pytest.mark.parametrize("what", ["a misaligned", "a_scales other strides", "another stream", "expected_m"])
def test_alignment_strides_stream_and_hint_are_part_of_the_signature(env, monkeypatch, what):
    """An operand 8 bytes off the aligned address of the remembered call, scales of other strides, another current
    stream, or (masked) another expected_m: the checked path runs again."""
    from ptxgen.kernels import arguments, fp8

    torch, standin, _ = env
    t = standin.tensor
    case = "masked" if what == "expected_m" else "fp8_gemm_nt"
    op, args = _operands(torch, standin, case, 0x10000000)
    op(*args)
    checked = _checked_calls(monkeypatch)
    _, again = _operands(torch, standin, case, 0x50000000)
    op(*again)
    assert checked == []
    a, sa = again[:2]
    if what == "a misaligned":
        again = (t(a.shape, a.stride(), a.dtype, a.data_ptr() + 8),) + again[1:]
    elif what == "a_scales other strides":
        again = (a, t(sa.shape, (sa.shape[1], 1), sa.dtype, sa.data_ptr())) + again[2:]
    elif what == "another stream":
        arguments.TORCH[2] = lambda device: 7     # the fixture's own list: restored after the test
    else:
        from ptxgen.kernels import m_grouped_fp8_gemm_nt_masked

        op = lambda a, sa, b, sb, mm: m_grouped_fp8_gemm_nt_masked(a, sa, b, sb, None, mm, 64)  # noqa: E731
    op(*again)
    assert len(checked) == 1
    # the new signature is remembered, but for the misaligned A, which the checked path copies (see below), and for
    # row-major scales, which the chosen scales_smem kernel reads through an M-major copy
    assert len(fp8._FAST) == (1 if what in ("a misaligned", "a_scales other strides") else 2)


def test_a_copied_operand_is_not_remembered(env):
    """A whose rows TMA cannot read in place (a row pitch that is no multiple of 16 bytes) is copied by the checked
    path: its kernel view starts elsewhere, so the call is not kept (a fast call would skip the copy)."""
    from ptxgen.kernels import fp8, fp8_gemm_nt

    torch, standin, _ = env
    t = standin.tensor
    _, (a, sa, b, sb) = _operands(torch, standin, "fp8_gemm_nt", 0x10000000)
    strided = t(a.shape, (a.shape[1] + 8, 1), a.dtype, a.data_ptr())
    fp8_gemm_nt(strided, sa, b, sb)
    assert fp8._FAST == {}
