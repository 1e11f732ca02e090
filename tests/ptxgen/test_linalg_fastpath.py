"""The ops' fast path (``ptxgen.kernels.fast_call.FastCall`` as ``linalg`` uses it) on the CPU: with a stand-in torch (metadata-only CUDA
tensors, benchmarks/torch_standin.py) and a stub driver, a repeated call of a known signature launches exactly the
argument block the checked path launches for the same tensors (every pointer, extent, stride, scalar and tensor map:
the stand-in's map bytes name the address, shape and strides they map), and a call that differs in anything a check
reads — dtype, shape, strides, device, 16-byte alignment, the stream — takes the checked path and raises its error."""
import pytest

from ptxgen.kernels.gemm import GemmConfig
from standin_torch import standin_torch


@pytest.fixture
def env(monkeypatch):
    return standin_torch(monkeypatch)


def _slow_calls(monkeypatch):
    """A counter of the checked path's entries (``_gemm``)."""
    from ptxgen.kernels import linalg

    calls = []
    checked = linalg._gemm

    def counting(*args, **kwargs):
        calls.append(args[0])
        return checked(*args, **kwargs)
    monkeypatch.setattr(linalg, "_gemm", counting)
    return calls


def _block_of(address):
    """The bytes of the launched argument block whose ``void*`` array is at ``address``."""
    from ptxgen.kernels.gemm import run

    for site in run._SITES.values():
        if site.block_launch.address == address:
            return bytes(site.block_launch.bytes)
    raise AssertionError("the launch came from no prepared call site")


def _operands(torch, standin, case, base):
    """The operands of ``case`` at addresses from ``base`` (256-byte aligned), and the op."""
    from ptxgen.kernels import linear, matmul, scaled_mm

    bf16, e4m3 = torch.bfloat16, torch.float8_e4m3fn
    t = standin.tensor
    if case == "matmul a @ b":            # B row-major: the MN-major B path
        m, n, k = 128, 256, 128
        return matmul, (t((m, k), (k, 1), bf16, base), t((k, n), (n, 1), bf16, base + 0x100000))
    if case == "matmul a @ w.T":          # B the transpose of a row-major weight: K-major
        m, n, k = 128, 256, 128
        return matmul, (t((m, k), (k, 1), bf16, base), t((n, k), (k, 1), bf16, base + 0x100000).t())
    if case == "matmul small M (swap-AB)":
        m, n, k = 16, 1024, 1024
        return matmul, (t((m, k), (k, 1), bf16, base), t((n, k), (k, 1), bf16, base + 0x100000).t())
    if case == "linear 3-D x with bias":
        m, n, k = 128, 256, 128
        return linear, (t((2, m // 2, k), (m // 2 * k, k, 1), bf16, base), t((n, k), (k, 1), bf16, base + 0x100000),
                        t((n,), (1,), bf16, base + 0x200000))
    if case == "linear small M with bias (swap-AB)":
        m, n, k = 16, 1024, 1024
        return linear, (t((m, k), (k, 1), bf16, base), t((n, k), (k, 1), bf16, base + 0x100000),
                        t((n,), (1,), bf16, base + 0x200000))
    if case == "scaled_mm":
        m, n, k = 128, 256, 128
        return (lambda a, b: scaled_mm(a, b, 0.5, 0.25)), (t((m, k), (k, 1), e4m3, base),
                                                          t((n, k), (k, 1), e4m3, base + 0x100000).t())
    if case == "matmul forced config (swapped, C by TMA)":
        m, n, k = 100, 512, 128
        config = GemmConfig(bn=104, stages=6, epilogue="tma", swap_ab=True, c_major="M")
        return (lambda a, b: matmul(a, b, config=config)), (t((m, k), (k, 1), bf16, base),
                                                            t((n, k), (k, 1), bf16, base + 0x100000).t())
    if case == "linear forced config with bias":
        m, n, k = 128, 256, 128
        config = GemmConfig(bn=128, stages=6, epilogue="tma", bias=True)
        return (lambda x, w, bias: linear(x, w, bias, config=config)), (
            t((m, k), (k, 1), bf16, base), t((n, k), (k, 1), bf16, base + 0x100000), t((n,), (1,), bf16, base + 0x200000))
    if case == "scaled_mm forced config":
        m, n, k = 128, 256, 128
        config = GemmConfig("e4m3", bn=128, promote=4, epilogue="tma")
        return (lambda a, b: scaled_mm(a, b, 0.5, 0.25, config=config)), (
            t((m, k), (k, 1), e4m3, base), t((n, k), (k, 1), e4m3, base + 0x100000).t())
    raise ValueError(case)


CASES = ["matmul a @ b", "matmul a @ w.T", "matmul small M (swap-AB)", "linear 3-D x with bias",
         "linear small M with bias (swap-AB)", "scaled_mm", "matmul forced config (swapped, C by TMA)",
         "linear forced config with bias", "scaled_mm forced config"]


@pytest.mark.parametrize("case", CASES)
def test_repeated_call_launches_the_block_of_the_checked_path(env, monkeypatch, case):
    from ptxgen.kernels import linalg

    torch, standin, launches = env
    op, first = _operands(torch, standin, case, 0x10000000)
    op(*first)                                     # the checked path, which remembers the signature
    assert len(linalg._FAST) == 1
    slow = _slow_calls(monkeypatch)
    _, again = _operands(torch, standin, case, 0x50000000)   # other addresses, the same signature
    standin._NEXT.clear()                          # C gets the same address in both calls below
    c_fast = op(*again)
    assert slow == []                              # the fast path
    fast_block = _block_of(launches[-1])
    linalg._FAST.clear()
    standin._NEXT.clear()
    c_slow = op(*again)
    assert len(slow) == 1                          # the checked path
    assert (c_fast.shape, c_fast.stride(), c_fast.dtype, c_fast.data_ptr()) == \
        (c_slow.shape, c_slow.stride(), c_slow.dtype, c_slow.data_ptr())
    assert _block_of(launches[-1]) == fast_block
    # and the block names the new tensors, not the first call's (pointer slots and maps are 8-byte words)
    words = [int.from_bytes(fast_block[i:i + 8], "little") for i in range(0, len(fast_block), 8)]
    assert 0x50000000 in words
    assert not any(0x10000000 <= w < 0x10300000 for w in words)


def _wrong(torch, standin, what, a, b):
    """``(a, b)`` of matmul with one property changed."""
    t = standin.tensor
    if what == "b dtype f16":
        return a, t(b.shape, b.stride(), torch.float16, b.data_ptr())
    if what == "a dtype e4m3":
        return t(a.shape, a.stride(), torch.float8_e4m3fn, a.data_ptr()), b
    if what == "K mismatch":
        return t((a.shape[0], a.shape[1] + 8), (a.shape[1] + 8, 1), a.dtype, a.data_ptr()), b
    if what == "b 3-D":
        return a, t((1,) + b.shape, (0,) + b.stride(), b.dtype, b.data_ptr())
    if what == "a on cuda:1":
        return standin.Tensor(a.shape, a.stride(), a.dtype, a.data_ptr(), standin.Device(1)), b
    if what == "a on the CPU":
        return standin.cpu_tensor(a.shape, a.dtype), b
    raise ValueError(what)


@pytest.mark.parametrize("what, error, message", [
    ("b dtype f16", TypeError, "matmul: b has dtype torch.float16 but a has torch.bfloat16: both must have one dtype"),
    ("a dtype e4m3", TypeError, "matmul: a has dtype torch.float8_e4m3fn; matmul takes bf16 (torch.bfloat16, "
                                "ml_dtypes.bfloat16) or f16 (torch.float16, numpy.float16)"),
    ("K mismatch", ValueError, "matmul: b has 128 rows but a has 136 columns: a (M, K) @ b (K, N) needs "
                               "b.shape[0] == K"),
    ("b 3-D", ValueError, "matmul: b must be 2-D (K, N) or 1-D (K,) (a batched b is not supported), not of shape "
                          "(1, 128, 256)"),
    ("a on cuda:1", ValueError, "matmul: a is on cuda:1; the ptxgen runtime runs on cuda:0"),
    ("a on the CPU", TypeError, "matmul: a is a CPU torch tensor; pass CUDA tensors (or numpy arrays, run in the CPU "
                                "interpreter)"),
])
def test_a_known_signature_never_hides_a_check(env, what, error, message):
    """With a fast path remembered for good operands, each bad variation still raises the checked path's error (the
    signature key holds everything the checks read)."""
    import re

    from ptxgen.kernels import linalg, matmul

    torch, standin, _ = env
    a = standin.tensor((128, 128), (128, 1), torch.bfloat16, 0x10000000)
    b = standin.tensor((128, 256), (256, 1), torch.bfloat16, 0x20000000)
    matmul(a, b)
    matmul(a, b)
    assert len(linalg._FAST) == 1
    bad_a, bad_b = _wrong(torch, standin, what, a, b)
    with pytest.raises(error, match=re.escape(message)):
        matmul(bad_a, bad_b)


def test_a_forced_config_is_part_of_the_signature(env):
    """A call forcing a config is remembered under it: the same tensors with another config, or with autotune=True
    (which a forced config refuses), take the checked path."""
    import re

    from ptxgen.kernels import linalg, matmul

    torch, standin, _ = env
    a = standin.tensor((128, 128), (128, 1), torch.bfloat16, 0x10000000)
    w = standin.tensor((256, 128), (128, 1), torch.bfloat16, 0x20000000)
    config = GemmConfig(bn=128, stages=6, epilogue="tma")
    matmul(a, w.t(), config=config)
    matmul(a, w.t(), config=config)
    assert len(linalg._FAST) == 1
    with pytest.raises(ValueError, match=re.escape("matmul: config=h128x128s6t forces a configuration; autotune=True "
                                                   "would choose one")):
        matmul(a, w.t(), config=config, autotune=True)
    with pytest.raises(ValueError, match=re.escape("matmul: config is a e4m3 → bf16 GEMM")):
        matmul(a, w.t(), config=GemmConfig("e4m3", bn=128, promote=4, epilogue="tma"))
    matmul(a, w.t(), config=config.replace(stages=5))
    assert len(linalg._FAST) == 2


@pytest.mark.parametrize("what", ["a misaligned", "b misaligned", "other strides", "another stream"])
def test_alignment_strides_and_stream_are_part_of_the_signature(env, monkeypatch, what):
    """An operand 2 bytes off the aligned address of the remembered call (TMA needs 16), other strides of the same
    shape, or another current stream: the checked path runs again (and remembers the new signature)."""
    from ptxgen.kernels import arguments, linalg, matmul

    torch, standin, _ = env
    t = standin.tensor
    a = t((128, 128), (128, 1), torch.bfloat16, 0x10000000)
    b = t((128, 256), (256, 1), torch.bfloat16, 0x20000000)
    matmul(a, b)
    slow = _slow_calls(monkeypatch)
    matmul(t(a.shape, a.stride(), a.dtype, 0x30000000), t(b.shape, b.stride(), b.dtype, 0x40000000))
    assert slow == []
    sentinel = RuntimeError("the checked path")

    def refuse(*args, **kwargs):
        raise sentinel
    monkeypatch.setattr(linalg, "_gemm", refuse)
    if what == "a misaligned":
        args = t(a.shape, a.stride(), a.dtype, 0x30000002), b
    elif what == "b misaligned":
        args = a, t(b.shape, b.stride(), b.dtype, 0x40000002)
    elif what == "other strides":
        args = t(a.shape, (256, 1), a.dtype, 0x30000000), b
    else:
        arguments.TORCH[2] = lambda device: 7     # the fixture's own list: restored after the test
        args = a, b
    with pytest.raises(RuntimeError) as info:
        matmul(*args)
    assert info.value is sentinel


def test_bench_launch_cpu_times_the_ops_fast_path():
    """``bench_launch.py --cpu`` times matmul/linear's host path with stand-in tensors in a process of its own."""
    import importlib.util
    import json
    import pathlib
    import subprocess
    import sys

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("the real torch is installed: the stand-in needs a process without it")
    root = pathlib.Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_launch.py"), "--cpu-gemm", "--calls", "50",
                          "--rounds", "1"], capture_output=True, text=True, cwd=root, timeout=900,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": str(pathlib.Path.home())})
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(results) == {"128x256x128", "16x1024x1024", "fp8 4096x2112x7168", "fp8 64x7168x2048",
                            "fp8 grouped 4x256x4096x7168"}
    for shape, entry in results.items():
        assert set(entry) == ({"contiguous", "masked"} if "grouped" in shape else {"fp8_gemm_nt"} if "fp8" in shape
                              else {"matmul(a, b)", "matmul(a, w.T)", "linear(x, w)", "linear(x3, w, bias)"})
        assert all(0 < us < 1e4 for us in entry.values())
