"""gmem.load/store's ``cache`` hints (spec/tile-ir.md §4.4) and the row kernels' ``RowConfig.cache``: the attribute
round-trips through the text, an unknown name is a verifier error naming the op, the value and the names, the
interpreter computes the same values with or without it, and the lowering puts the PTX qualifier on every access it
emits (vectors and edge elements, loads and stores), which nvJitLink assembles for sm_90a. The row kernels with
``cache="stream"`` read x with ``ld.global.cs``, the weight and bias with ``.L1::evict_last`` and write y with
``st.global.cs``, in the default kernel's registers; their results equal the default config's (interpreter and
GPU)."""
from __future__ import annotations

import dataclasses
import re
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import interpret
from ptxgen.ir.ops.gmem import CACHE_HINTS
from ptxgen.ir.text import parse_module, print_module, structurally_equal
from ptxgen.kernels import norms, softmax as softmax_kernel
from ptxgen.kernels.norms import choose_norm_config, layer_norm, rms_norm
from ptxgen.kernels.rowwise import CACHE_POLICIES, CachePolicy, RowConfig, choose_row_config
from ptxgen.kernels.softmax import MAX_VALUES as SOFTMAX_VALUES, softmax
from ptxgen.lower import Specialization, TensorSpec, compile_kernel
from ptxgen.lower.ptx_table import CACHE_QUALIFIERS
from ptxgen.verify import VerifyError, verify

from test_norm_variants import compiled as compiled_norm

# thread t holds 4 consecutive f32 of a 128-element vector: one 16-byte access where aligned, else 4 elements
COPY = """
kernel @copy(%x: gtensor<DT, 1>, %y: gtensor<DT, 1>) {grid = (1, 1, 1), block = (32, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %z = arith.const {value = 0} : i32
  %vx = gmem.tile %x, %z {shape = [(128)]} : gview<DT>[(128)]
  %vy = gmem.tile %y, %z {shape = [(128)]} : gview<DT>[(128)]
  %f = gmem.load %vx, %t {tv = [(32,4):(4,1)], other = 1, cache = LOAD} : frag<DT>[(4)]
  gmem.store %vy, %t, %f {tv = [(32,4):(4,1)], cache = STORE}
}
"""


def copy_module(dtype="f32", load="streaming", store="streaming"):
    return parse_module(COPY.replace("DT", dtype).replace("LOAD", load).replace("STORE", store), file="copy.tile")


def accesses(ptx: str) -> Counter:
    return Counter(re.findall(r"(?:ld|st)\.global\S*", ptx))


def test_the_hints_are_the_lowering_table():
    assert CACHE_HINTS == tuple(CACHE_QUALIFIERS)
    assert CACHE_HINTS[0] == "normal" and CACHE_QUALIFIERS["normal"] == ("", None)


@pytest.mark.parametrize("hint", CACHE_HINTS)
def test_text_round_trip(hint):
    module = copy_module(load=hint, store=hint)
    text = print_module(module)
    assert f"cache = {hint}}}" in text and text.count("cache = ") == 2
    again = parse_module(text, file="again.tile")
    assert print_module(again) == text and structurally_equal(module, again)
    verify(again)


def test_the_builder_writes_the_same_attribute():
    config = RowConfig("f32", 32, 1, cache="stream")
    text = print_module(softmax_kernel.build(config))
    assert "cache = streaming}" in text and text.count("cache = streaming") == 2
    assert "cache" not in print_module(softmax_kernel.build(RowConfig("f32", 32, 1)))


@pytest.mark.parametrize("op, load, store, message", [
    ("gmem.load", "evict_frist", "normal",
     "copy.tile:7:3: gmem.load: attribute 'cache' must be one of normal, evict_first, evict_last, no_allocate, "
     "streaming, l2_evict_first, l2_evict_last, not evict_frist (did you mean 'evict_first'?)"),
    ("gmem.store", "normal", '"streamin"',
     "copy.tile:8:3: gmem.store: attribute 'cache' must be one of normal, evict_first, evict_last, no_allocate, "
     "streaming, l2_evict_first, l2_evict_last, not \"streamin\" (did you mean 'streaming'?)"),
    ("gmem.store", "normal", "3",
     "copy.tile:8:3: gmem.store: attribute 'cache' must be one of normal, evict_first, evict_last, no_allocate, "
     "streaming, l2_evict_first, l2_evict_last, not 3"),
])
def test_an_unknown_hint_is_an_error(op, load, store, message):
    with pytest.raises(VerifyError) as info:
        verify(copy_module(load=load, store=store))
    assert str(info.value) == message


@pytest.mark.parametrize("hint", CACHE_HINTS)
def test_the_interpreter_ignores_the_hint(hint):
    x = np.random.default_rng().standard_normal(100).astype(np.float32)   # 28 elements of the tile are outside
    plain, hinted = np.zeros(100, np.float32), np.zeros(100, np.float32)
    interpret(copy_module(load="normal", store="normal"), {"x": x, "y": plain})
    interpret(copy_module(load=hint, store=hint), {"x": x, "y": hinted})
    assert np.array_equal(plain, x) and np.array_equal(hinted, plain)


@pytest.mark.parametrize("hint", [h for h in CACHE_HINTS if h != "normal"])
@pytest.mark.parametrize("dtype, spec, want", [
    ("f32", TensorSpec(0, True, 16), {".v4.b32": 1}),                  # exact: one vector (predicated store)
    ("f32", TensorSpec(0, True, 1), {".v4.b32": 1, ".b32": 3}),         # ragged: the vector and the edge elements
    ("f32", TensorSpec(0, False, 1), {".b32": 4}),                      # unaligned: elements
    ("bf16", TensorSpec(0, True, 1), {".v2.b32": 1, ".b16": 3}),
    ("e4m3", TensorSpec(0, True, 1), {".b32": 1, ".b8": 3}),
    ("i1", TensorSpec(0, True, 16), {".b8": 4}),
])
def test_every_access_carries_the_qualifier_and_assembles(hint, dtype, spec, want):
    """Loads and stores, vector and edge paths: each global access has the hint's qualifier (and no unqualified one
    is left); nvJitLink assembles the kernel for sm_90a."""
    module = copy_module(dtype, hint, hint)
    kernel = compile_kernel(module.kernels[0], Specialization.of(x=spec, y=spec))
    qualifier, l2 = CACHE_QUALIFIERS[hint]
    expected = Counter({f"{op}.global{qualifier}{kind}": n for op in ("ld", "st") for kind, n in want.items()})
    assert accesses(kernel.ptx) == expected
    if l2:
        assert kernel.ptx.count(f"createpolicy.fractional.L2::{l2}.b64") == sum(expected.values())
    assert kernel.registers is not None and kernel.spill_bytes == 0, kernel.info_log


def test_normal_is_the_plain_access():
    """``cache = normal`` (or none) leaves LLVM's own loads and stores: the PTX of the kernel without hints."""
    spec = Specialization.of(x=TensorSpec(0, True, 1), y=TensorSpec(0, True, 1))
    plain = parse_module(COPY.replace("DT", "f32").replace(", cache = LOAD", "").replace(", cache = STORE", ""),
                         file="copy.tile")
    assert "cache" not in print_module(plain)
    normal = compile_kernel(copy_module("f32", "normal", "normal").kernels[0], spec).ptx
    assert normal == compile_kernel(plain.kernels[0], spec).ptx
    assert accesses(normal) == Counter({"ld.global.v4.b32": 1, "ld.global.b32": 3, "st.global.v4.b32": 1,
                                        "st.global.b32": 3})


# -- the row kernels ------------------------------------------------------------------------------------------------

def test_the_policies():
    assert CACHE_POLICIES["default"] == CachePolicy("normal", "normal", "normal")
    assert CACHE_POLICIES["stream"] == CachePolicy("streaming", "streaming", "evict_last")
    assert {p.x for name, p in CACHE_POLICIES.items() if name != "default"} == {
        "streaming", "evict_first", "no_allocate", "l2_evict_first"}
    assert all(h in CACHE_HINTS for p in CACHE_POLICIES.values() for h in (p.x, p.y, p.params))
    assert RowConfig("bf16", 512, 4).cache == "default"
    assert choose_norm_config(8192, "bf16", "rms", cache="stream").cache == "stream"
    assert norms.as_norm_config(RowConfig("bf16", 512, 4, cache="stream_l2"), "rms").cache == "stream_l2"
    with pytest.raises(TypeError):
        RowConfig("bf16", 512, 4, 1, 2, "stream")   # keyword only: NormConfig's positional fields keep their places


def test_a_bad_policy():
    with pytest.raises(ValueError) as info:
        softmax(np.zeros((2, 64), np.float32), config=RowConfig("f32", 32, 1, cache="streem"))
    assert str(info.value) == ("RowConfig: cache must be one of default, stream, stream_evict_first, "
                               "stream_no_allocate, stream_l2, not 'streem' (did you mean 'stream'?)")


def compiled_softmax(config):
    from ptxgen.runtime import jit
    kern = jit(softmax_kernel.build(config))
    x = np.zeros((config.rows, config.cols), {"f32": np.float32, "bf16": ml_dtypes.bfloat16}[config.dtype])
    return kern.compile(kern.specialization(x=x, y=x.copy(), m=config.rows))


@pytest.mark.parametrize("n", [4096, 8192, 16384])
def test_the_stream_kernels_qualify_x_y_and_the_weights_in_the_default_registers(n):
    """x (4 vectors per thread) read .cs, the weight (and bias) .L1::evict_last, y written .cs; no unqualified global
    access left; registers no more than the default kernel's, no spill."""
    for kind, params in (("rms", 1), ("layer", 2)):
        default = compiled_norm(choose_norm_config(n, "bf16", kind, cache="default"), kind)
        stream = compiled_norm(choose_norm_config(n, "bf16", kind, cache="stream"), kind)
        assert accesses(default.ptx) == Counter({"ld.global.v4.b32": 4 + 4 * params, "st.global.v4.b32": 4})
        assert accesses(stream.ptx) == Counter({"ld.global.cs.v4.b32": 4, "ld.global.L1::evict_last.v4.b32":
                                                4 * params, "st.global.cs.v4.b32": 4})
        assert stream.spill_bytes == 0 and stream.registers <= default.registers, stream.info_log
    row = choose_row_config(n, "bf16", SOFTMAX_VALUES, cache="default")
    default, stream = compiled_softmax(row), compiled_softmax(dataclasses.replace(row, cache="stream"))
    assert accesses(stream.ptx) == Counter({"ld.global.cs.v4.b32": 4, "st.global.cs.v4.b32": 4})
    assert stream.spill_bytes == 0 and stream.registers <= default.registers


@pytest.mark.parametrize("cache, x_load", [("stream_evict_first", "L1::evict_first"),
                                           ("stream_no_allocate", "L1::no_allocate"),
                                           ("stream_l2", "L2::cache_hint")])
def test_the_alternative_spellings(cache, x_load):
    kernel = compiled_norm(choose_norm_config(8192, "bf16", "rms", cache=cache), "rms")
    assert accesses(kernel.ptx) == Counter({f"ld.global.{x_load}.v4.b32": 4, "ld.global.L1::evict_last.v4.b32": 4,
                                            "st.global.cs.v4.b32": 4})
    assert kernel.spill_bytes == 0


def test_a_reloaded_x_keeps_the_first_read_default():
    """x_source="reload": the first read stays plain (the epilogue reads x again from L2), the re-read is .cs."""
    kernel = compiled_norm(choose_norm_config(8192, "bf16", "rms", x_source="reload", cache="stream"), "rms")
    assert accesses(kernel.ptx) == Counter({"ld.global.v4.b32": 4, "ld.global.cs.v4.b32": 4,
                                            "ld.global.L1::evict_last.v4.b32": 4, "st.global.cs.v4.b32": 4})


@pytest.mark.parametrize("cache", [c for c in CACHE_POLICIES if c != "default"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_interpreter_results_equal_the_default(cache, dtype):
    rng = np.random.default_rng()
    m, n = 5, 700
    host = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}[dtype]
    x = (rng.standard_normal((m, n)) * 2 + 1).astype(host)
    w = rng.uniform(0.5, 1.5, n).astype(host)
    b = rng.standard_normal(n).astype(host)
    row = choose_row_config(n, dtype, SOFTMAX_VALUES)
    assert np.array_equal(softmax(x, config=dataclasses.replace(row, cache=cache)), softmax(x, config=row))
    for kind, run in (("rms", lambda c: rms_norm(x, w, 1e-6, config=c)),
                      ("layer", lambda c: layer_norm(x, w, b, 1e-5, config=c))):
        assert np.array_equal(run(choose_norm_config(n, dtype, kind, cache=cache)),
                              run(choose_norm_config(n, dtype, kind)))


def test_the_benchmark_takes_the_policies():
    from test_norm_variants import _bench
    bench = _bench()
    assert bench.parse_variants("cache=stream,cache=stream_l2+values=16") == [
        ("cache=stream", {"cache": "stream"}), ("cache=stream_l2+values=16", {"cache": "stream_l2", "max_values": 16})]


# -- on the GPU, against float64 ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("cache", list(CACHE_POLICIES))
@pytest.mark.parametrize("m, n", [(257, 16384), (1000, 8192), (7, 333)])
def test_every_policy_on_the_gpu(m, n, cache):
    """Each op with each policy against float64 (relative norm), and against the default config's result."""
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    tolerance = 8e-3
    x = (torch.randn(m, n, device="cuda") + 1).to(torch.bfloat16)
    w = torch.rand(n, device="cuda").add_(0.5).to(torch.bfloat16)
    b = torch.randn(n, device="cuda").to(torch.bfloat16)
    row = choose_row_config(n, "bf16", SOFTMAX_VALUES)
    cases = [
        (lambda c: softmax(x, config=c), dataclasses.replace(row, cache=cache), row,
         torch.softmax(x.double(), dim=-1)),
        (lambda c: rms_norm(x, w, 1e-6, config=c), choose_norm_config(n, "bf16", "rms", cache=cache),
         choose_norm_config(n, "bf16", "rms"), F.rms_norm(x.double(), (n,), w.double(), 1e-6)),
        (lambda c: layer_norm(x, w, b, 1e-5, config=c), choose_norm_config(n, "bf16", "layer", cache=cache),
         choose_norm_config(n, "bf16", "layer"), F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)),
    ]
    for run, config, default_config, want in cases:
        got, default = run(config).double(), run(default_config).double()
        assert float((got - want).norm() / want.norm()) < tolerance, config
        assert float((got - default).norm() / default.norm()) < tolerance, config
