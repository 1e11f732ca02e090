"""The disk compile cache (ptxgen.runtime.cache) and the IR-text fast path (jit_text / parse_verified), on CPU.

Every test points ``PTXGEN_CACHE_DIR`` at its own ``tmp_path`` (conftest.py already keeps the whole session off the
user's ~/.cache) and empties the process-wide dict of compiled kernels, so what a test observes is the disk.
"""
from __future__ import annotations

import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import layoutc as lc
from layoutc import strategies
from ptxgen.ir.text import IRSyntaxError, parse_module, print_module, structurally_equal
from ptxgen.lower import Specialization, TensorSpec
from ptxgen.runtime import cache, jit, jit_text, kernel_cache, launcher, parse_verified
from ptxgen.verify import VerifyError, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SQRT_SIN = (EXAMPLES / "sqrt_sin.tile").read_text()
ALIGNED = Specialization.of(x=TensorSpec(0, True, 16), z=TensorSpec(0, True, 16))


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    """A private, empty cache directory; the process dict emptied for the test and restored after it."""
    d = tmp_path / "cache"
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(d))
    monkeypatch.delenv("PTXGEN_CACHE", raising=False)
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})
    return d


def _entries(d: pathlib.Path, suffix: str) -> list:
    return sorted(d.rglob(f"*{suffix}")) if d.exists() else []


def _no_compiling(monkeypatch):
    """Make any lowering, PTX emission or nvJitLink run fail the test."""
    import ptxgen.lower
    import ptxgen.lower.target
    import ptxgen.nvjitlink

    def boom(*a, **k):
        raise AssertionError("compiled although the disk cache holds the kernel")

    monkeypatch.setattr(ptxgen.lower, "compile_kernel", boom)
    monkeypatch.setattr(ptxgen.lower.target, "emit_ptx", boom)
    monkeypatch.setattr(ptxgen.nvjitlink, "compile_ptx", boom)


# -- location --------------------------------------------------------------------------------------------------
def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("PTXGEN_CACHE", raising=False)
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("PTXGEN_CACHE_DIR")
    assert cache.cache_dir() == tmp_path / "xdg" / "ptxgen"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: relative paths are ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "ptxgen"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "ptxgen"
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv("PTXGEN_CACHE", off)
        assert cache.cache_dir() is None and not cache.enabled()


# -- kernels ---------------------------------------------------------------------------------------------------
def test_miss_then_hit_without_compiling(cdir, monkeypatch):
    first = jit(parse_module(SQRT_SIN, "examples/sqrt_sin.tile")).compile(ALIGNED)
    assert not first.from_cache
    assert len(_entries(cdir, ".kernel")) == 1
    assert (cdir.stat().st_mode & 0o777) == 0o700 or os.name != "posix"  # made by us: private

    monkeypatch.setattr(kernel_cache, "_COMPILED", {})  # as a new process would start
    _no_compiling(monkeypatch)
    before = cache.stats()["hits"]
    again = jit(parse_module(SQRT_SIN, "examples/sqrt_sin.tile")).compile(ALIGNED)
    assert again.from_cache and cache.stats()["hits"] == before + 1
    assert (again.ptx, bytes(again.cubin), again.cubin.info_log, again.llvm_ir) == \
        (first.ptx, bytes(first.cubin), first.cubin.info_log, first.llvm_ir)
    assert (again.registers, again.spill_bytes, again.spec, again.arch, again.name) == \
        (first.registers, first.spill_bytes, first.spec, first.arch, first.name)
    assert again.cubin.arch == "sm_90a"
    # the process dict answers from now on: the same object
    assert jit(parse_module(SQRT_SIN)).compile(ALIGNED) is again


def test_key_covers_ir_spec_arch_options_and_toolchain(monkeypatch):
    k = jit(parse_module(SQRT_SIN))
    base = cache.kernel_key(k.ir_hash, ALIGNED, "sm_90a", ("-O3", "-Xptxas=-v"))
    assert len(base) == 64 and base == cache.kernel_key(k.ir_hash, ALIGNED, "sm_90a", ("-O3", "-Xptxas=-v"))
    assert "arith.const {value = 1024}" in SQRT_SIN
    other_ir = jit(parse_module(SQRT_SIN.replace("arith.const {value = 1024}", "arith.const {value = 2048}")))
    assert other_ir.ir_hash != k.ir_hash
    # comments and locations are not part of the printed IR: the same entry
    assert jit(parse_module("// another comment\n\n" + SQRT_SIN, "elsewhere.tile")).ir_hash == k.ir_hash
    variants = {
        base,
        cache.kernel_key(other_ir.ir_hash, ALIGNED, "sm_90a", ("-O3", "-Xptxas=-v")),
        cache.kernel_key(k.ir_hash, Specialization.generic(), "sm_90a", ("-O3", "-Xptxas=-v")),
        cache.kernel_key(k.ir_hash, Specialization.of(x=TensorSpec(0, True, 8), z=TensorSpec(0, True, 16)),
                         "sm_90a", ("-O3", "-Xptxas=-v")),
        cache.kernel_key(k.ir_hash, ALIGNED, "sm_90", ("-O3", "-Xptxas=-v")),
        cache.kernel_key(k.ir_hash, ALIGNED, "sm_90a", ("-O3",)),
        cache.kernel_key(k.ir_hash, ALIGNED, "sm_90a", ("-Xptxas=-v", "-O3")),  # order is meaningful to nvJitLink
        cache.kernel_key(k.ir_hash, ALIGNED, "sm_90a", ("-O3-Xptxas=-v",)),     # no concatenation collisions
    }
    assert len(variants) == 8
    # a toolchain change (another nvJitLink, an edited lowering) is another key
    tc = dict(cache.toolchain())
    for field in ("nvjitlink", "llvmlite", "sources", "python"):
        monkeypatch.setattr(cache, "_TOOLCHAIN", {**tc, field: tc[field] + "x"})
        assert cache.kernel_key(k.ir_hash, ALIGNED, "sm_90a", ("-O3", "-Xptxas=-v")) != base
    monkeypatch.setattr(cache, "_TOOLCHAIN", tc)
    assert cache.text_key(SQRT_SIN, "a.tile") != cache.text_key(SQRT_SIN, "b.tile")
    assert cache.text_key(SQRT_SIN, "a.tile") != cache.text_key(SQRT_SIN + "\n", "a.tile")


def test_toolchain_fields():
    tc = cache.toolchain()
    assert set(tc) == {"python", "ptxgen", "sources", "lark", "llvmlite", "nvjitlink", "cuda-bindings"}
    assert all(isinstance(v, str) and v for v in tc.values())
    import lark
    import llvmlite
    assert tc["lark"] == lark.__version__ and tc["llvmlite"] == llvmlite.__version__
    assert len(tc["sources"]) == 64


def test_options_and_arch_are_separate_entries(cdir):
    k1 = jit(parse_module(SQRT_SIN), options=("-O3",))
    k2 = jit(parse_module(SQRT_SIN), options=("-O3", "-Xptxas=-v"))
    a, b = k1.compile(), k2.compile()
    assert not a.from_cache and not b.from_cache
    assert a.registers is None and b.registers is not None  # only -Xptxas=-v prints the resource usage
    assert len(_entries(cdir, ".kernel")) == 2


def test_corrupt_entries_are_misses_and_rewritten(cdir, monkeypatch):
    k = jit(parse_module(SQRT_SIN))
    good = k.compile()
    (path,) = _entries(cdir, ".kernel")
    blob = path.read_bytes()
    key = path.stem
    bad_blobs = [b"", blob[:20], blob[:len(blob) // 2], b"garbage" * 100,
                 blob[:-1] + bytes([blob[-1] ^ 1]),               # one flipped bit in the payload
                 b"PTXGENC0" + blob[8:]]                            # another entry format
    # a well-framed entry whose payload is not what lookup expects: checksummed, still a miss
    payload = pickle.dumps({"format": cache.FORMAT, "kind": "kernel", "name": "x"})
    import hashlib
    bad_blobs.append(cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    payload = b"\x80\x05not a pickle"
    bad_blobs.append(cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    for bad in bad_blobs:
        path.write_bytes(bad)
        corrupt = cache.stats()["corrupt"]
        assert cache.lookup(key) is None
        assert cache.stats()["corrupt"] == corrupt + 1
    path.write_bytes(b"junk")
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})
    again = jit(parse_module(SQRT_SIN)).compile()
    assert not again.from_cache and again.ptx == good.ptx  # recompiled ...
    back = cache.lookup(key)                                   # ... and the entry rewritten whole
    assert back.from_cache and back.ptx == good.ptx and back.registers == good.registers
    assert path.read_bytes().startswith(cache.MAGIC)


def test_unreadable_directory_is_a_miss_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})
    monkeypatch.setattr(cache, "_WARNED", False)
    with pytest.warns(RuntimeWarning, match="compile cache: cannot write"):
        c = jit(parse_module(SQRT_SIN)).compile()
    assert c.ptx and not c.from_cache
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per process, not one per kernel
        monkeypatch.setattr(kernel_cache, "_COMPILED", {})
        jit(parse_module(SQRT_SIN)).compile(ALIGNED)


def test_write_is_atomic(cdir, monkeypatch):
    c = jit(parse_module(SQRT_SIN)).compile()
    key = "ab" + "0" * 62
    replaced = []
    real_replace = os.replace

    def spy(src, dst):
        # the entry is complete in a temporary file of the SAME directory before it gets its name
        assert os.path.dirname(src) == os.path.dirname(dst) and os.path.basename(src).startswith(".tmp-")
        assert not os.path.exists(dst)  # not visible before the rename
        replaced.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    assert cache.store(key, c)
    assert replaced and cache.lookup(key).ptx == c.ptx

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    monkeypatch.setattr(cache, "_WARNED", False)
    key2 = "cd" + "0" * 62
    with pytest.warns(RuntimeWarning, match="No space left"):
        assert not cache.store(key2, c)
    assert cache.lookup(key2) is None
    assert not [p for p in cdir.rglob(".tmp-*")]  # the temporary file was removed


def test_concurrent_writer_never_shows_a_torn_entry(cdir):
    """A second process rewrites one entry in a loop (alternately a small and a large value) while this one reads
    it: every read is a miss or a whole entry, never a corrupt one."""
    c = jit(parse_module(SQRT_SIN)).compile()
    key = "ef" + "1" * 62
    script = textwrap.dedent(f"""
        import pickle, sys
        from ptxgen.runtime import cache
        small, big = pickle.load(sys.stdin.buffer)
        for i in range(300):
            cache.store({key!r}, big if i % 2 else small)
        print("done")
    """)
    import copy
    small = copy.copy(c)
    small.llvm_ir = ""
    big = copy.copy(c)
    big.llvm_ir = c.llvm_ir * 40  # ~0.5 MB: a write that takes a while
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, "PTXGEN_CACHE_DIR": str(cdir)}, cwd=ROOT)
    proc.stdin.write(pickle.dumps((small, big)))
    proc.stdin.close()
    corrupt, seen = cache.stats()["corrupt"], set()
    while proc.poll() is None:
        got = cache.lookup(key)
        if got is not None:
            assert got.ptx == c.ptx
            seen.add(len(got.llvm_ir))
    assert proc.stdout.read().strip() == b"done" and proc.returncode == 0
    assert cache.stats()["corrupt"] == corrupt
    assert seen  # the reader did see entries while they were being rewritten


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("PTXGEN_CACHE", "0")
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})
    c = jit(parse_module(SQRT_SIN)).compile()
    assert not c.from_cache
    assert not cache.store("00" * 32, c) and cache.lookup("00" * 32) is None
    k = jit_text(SQRT_SIN, "examples/sqrt_sin.tile")
    assert structurally_equal(k.kernel, parse_module(SQRT_SIN).kernels[0])
    assert not (tmp_path / "c").exists() and cache.clear() == 0


def test_clear(cdir):
    jit(parse_module(SQRT_SIN)).compile()
    parse_verified(SQRT_SIN, "x.tile")
    (cdir / "README").write_text("someone else's file")  # clear() removes only cache entries
    assert cache.clear() == 2
    assert (cdir / "README").exists() and not _entries(cdir, ".kernel") and not _entries(cdir, ".module")
    assert cache.clear() == 0


# -- IR text ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sqrt_sin", "l2norm", "tma_copy", "gemm"])
def test_text_fast_path_returns_an_equal_module(cdir, monkeypatch, name):
    text = (EXAMPLES / f"{name}.tile").read_text()
    file = f"examples/{name}.tile"
    reference = parse_module(text, file)
    miss = parse_verified(text, file)
    assert len(_entries(cdir, ".module")) == 1
    import ptxgen.ir.text
    import ptxgen.verify

    def boom(*a, **k):
        raise AssertionError("parsed or verified on a cache hit")

    monkeypatch.setattr(ptxgen.ir.text, "parse_module", boom)
    monkeypatch.setattr(ptxgen.verify, "verify", boom)
    hit = parse_verified(text, file)
    assert hit is not miss
    assert structurally_equal(hit, reference) and print_module(hit) == print_module(reference)
    assert hit.file == reference.file
    assert [str(k.loc) for k in hit.kernels] == [str(k.loc) for k in reference.kernels]
    assert str(hit.kernels[0].body.ops[-1].loc) == str(reference.kernels[0].body.ops[-1].loc)


def test_text_errors_are_the_uncached_errors_and_never_cached(cdir):
    bad_syntax = SQRT_SIN.replace("@sqrt_sin", "@sqrt_sin(", 1)
    with pytest.raises(IRSyntaxError) as expected:
        parse_module(bad_syntax, "bad.tile")
    for _ in range(2):  # the second time is a miss again: errors are not cached
        with pytest.raises(IRSyntaxError) as got:
            parse_verified(bad_syntax, "bad.tile")
        assert str(got.value) == str(expected.value)
    for name in ("tma_copy_wrong_expect_tx", "gemm_swizzle_mismatch"):
        text = (EXAMPLES / "bugs" / f"{name}.tile").read_text()
        file = f"examples/bugs/{name}.tile"
        with pytest.raises(VerifyError) as expected:
            verify(parse_module(text, file))
        for _ in range(2):
            with pytest.raises(VerifyError) as got:
                jit_text(text, file)
            assert str(got.value) == str(expected.value) and got.value.errors == expected.value.errors
    assert not _entries(cdir, ".module")


def test_jit_text_second_time_compiles_nothing(cdir, monkeypatch):
    k = jit_text(SQRT_SIN, "examples/sqrt_sin.tile")
    c = k.compile(ALIGNED)
    monkeypatch.setattr(kernel_cache, "_COMPILED", {})
    _no_compiling(monkeypatch)
    k2 = jit(SQRT_SIN)  # a str goes through jit_text (file "<text>": another text entry, the same kernel entry)
    assert k2.ir_hash == k.ir_hash and k2.compile(ALIGNED).from_cache
    k3 = jit_text(SQRT_SIN, "examples/sqrt_sin.tile", kernel="sqrt_sin")
    assert k3.compile(ALIGNED).cubin == c.cubin
    assert k3.grid(x=__import__("numpy").zeros(5000, "f4"), z=__import__("numpy").zeros(5000, "f4"), n=5000) == \
        k.grid(x=__import__("numpy").zeros(5000, "f4"), z=__import__("numpy").zeros(5000, "f4"), n=5000)


_CHILD = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import ptxgen.lower, ptxgen.lower.target, ptxgen.nvjitlink, ptxgen.runtime, ptxgen.ir.text, ptxgen.verify
    from ptxgen.lower import Specialization, TensorSpec
    from ptxgen.runtime import cache, jit_text
    t1 = time.perf_counter()
    calls = []
    def spy(name, fn):
        def wrapped(*a, **k):
            calls.append(name)
            return fn(*a, **k)
        return wrapped
    for mod, attr in ((ptxgen.lower, "compile_kernel"), (ptxgen.lower.target, "emit_ptx"),
                      (ptxgen.nvjitlink, "compile_ptx"), (ptxgen.ir.text, "parse_module"),
                      (ptxgen.verify, "verify")):
        setattr(mod, attr, spy(attr, getattr(mod, attr)))
    spec = Specialization.of(c=TensorSpec(1, True, 16))
    text = open("examples/gemm.tile").read()
    t2 = time.perf_counter()
    c = jit_text(text, "examples/gemm.tile").compile(spec)
    t3 = time.perf_counter()
    print(json.dumps({"imports": t1 - t0, "compile": t3 - t2, "from_cache": c.from_cache, "calls": calls,
                      "registers": c.registers, "stats": cache.stats()}))
""")


def test_second_process_reads_the_disk(cdir):
    """Two fresh processes compile examples/gemm.tile for the same specialization: the second neither parses,
    verifies, lowers nor runs nvJitLink (spies on each record nothing). How much faster that is belongs to
    benchmarks/bench_compile.py: a timed assertion here fails on a loaded machine."""
    env = {**os.environ, "PTXGEN_CACHE_DIR": str(cdir)}
    env.pop("PTXGEN_CACHE", None)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert not first["from_cache"] and "compile_kernel" in first["calls"] and "compile_ptx" in first["calls"]
    assert second["from_cache"] and second["calls"] == [], second
    # the module, the vector widths of the specialization's pattern (kernel_cache: its canonical form) and the kernel
    assert second["stats"]["hits"] == 3 and second["stats"]["stores"] == 0
    assert second["registers"] == first["registers"]


# -- pickling --------------------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.one_of(strategies.layouts(), strategies.composed_layouts(), strategies.swizzles()))
def test_layouts_pickle_equal(layout):
    back = pickle.loads(pickle.dumps(layout, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == layout and hash(back) == hash(layout) and str(back) == str(layout) and type(back) is type(layout)


def test_composed_layouts_and_swizzles_pickle_equal():
    for text in ("Sw<3,4,3> o 0 o (8,64):(64,1)", "Sw<2,4,3> o 0 o ((8,32),(2,2)):((32,1),(256,512))",
                 "Sw<1,4,3> o 16 o (8,16):(16,1)"):
        layout = lc.parse(text)
        back = pickle.loads(pickle.dumps(layout, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == layout and hash(back) == hash(layout) and str(back) == text
        assert back.outer == layout.outer and type(back.outer) is lc.Swizzle
    plain = lc.Layout(((2, 4), 3), ((1, 2), 8))
    hash(plain)  # fills the per-process hash cache, which the pickle leaves out
    assert plain._hash is not None and pickle.loads(pickle.dumps(plain))._hash is None


@pytest.mark.parametrize("path", sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.tile")))
def test_every_example_module_pickles_equal(path):
    module = parse_module((EXAMPLES / path).read_text(), f"examples/{path}")
    back = pickle.loads(pickle.dumps(module, protocol=pickle.HIGHEST_PROTOCOL))
    assert structurally_equal(back, module) and print_module(back) == print_module(module)
    # values stay wired to their defining ops after the round trip
    for k in back.kernels:
        for op in k.body.ops:
            assert all(r.owner is op for r in op.results)


def test_setmaxnreg_kernel_defers_nvjitlink_and_stores_the_cubin_once_read(cdir, monkeypatch):
    """gemm_hopper re-sizes registers (setmaxnreg), so the driver loads its PTX: compiling it runs no nvJitLink, the
    entry is stored without a cubin, and reading the cubin assembles it once and rewrites the entry with it."""
    import ptxgen.nvjitlink as nvjitlink

    text = (EXAMPLES / "gemm_hopper.tile").read_text()
    calls = []
    real = nvjitlink.compile_ptx

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(nvjitlink, "compile_ptx", counted)
    k = jit_text(text, "examples/gemm_hopper.tile")
    c = k.compile()
    assert launcher.load_image(c) == "ptx" and not c.assembled and calls == []
    kernel_cache._COMPILED.clear()
    stored = jit_text(text, "examples/gemm_hopper.tile").compile()
    assert stored.from_cache and not stored.assembled and stored.ptx == c.ptx
    assert stored.registers is not None and stored.assembled and calls == [1]   # ptxas -v: the info log
    kernel_cache._COMPILED.clear()
    again = jit_text(text, "examples/gemm_hopper.tile").compile()
    assert again.assembled and bytes(again.cubin) == bytes(stored.cubin) and calls == [1]


def test_plain_kernel_is_assembled_before_it_is_stored(cdir):
    c = jit_text(SQRT_SIN, "examples/sqrt_sin.tile").compile(ALIGNED)
    assert launcher.load_image(c) == "cubin" and c.assembled
