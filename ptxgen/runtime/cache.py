"""A content-addressed disk cache of compiled kernels and of parsed, verified IR text.

A second process that compiles a kernel it (or any earlier process) has compiled before neither lowers it nor runs
nvJitLink: ``JitKernel.compile`` looks in the process-wide dict, then here, and only then compiles (and stores).
``jit_text`` does the same one step earlier, for IR text: a hit skips lark parsing and verification.

>>> from ptxgen.runtime import cache
>>> key = cache.kernel_key(jit_kernel.ir_hash, spec, "sm_90a", ("-O3", "-Xptxas=-v"))   # doctest: +SKIP
>>> cache.lookup(key)                   # None: a miss                           # doctest: +SKIP
>>> cache.store(key, compiled)          # True: written atomically               # doctest: +SKIP
>>> cache.lookup(key).cubin == compiled.cubin                                    # doctest: +SKIP
True

Keys (sha256, hex):

- a kernel: the sha256 of the printed IR of the kernel (``print_kernel``: no locations, no comments), the ``Specialization``,
  the arch, the nvJitLink options and the toolchain (``toolchain()``: ptxgen's version and a digest of the ptxgen
  and layoutc sources, llvmlite's, nvJitLink's and cuda-bindings' versions, Python's major.minor);
- IR text: the text itself, the file name its locations carry, lark's version, ptxgen's sources, Python's.

Hashing ptxgen's own sources (once per process; versions come from the dist-info names on ``sys.path``) means a changed
lowering never reads a stale cubin, in an editable checkout as in an install. Values are pickles framed by a magic and
the sha256 of the payload, so a corrupt or truncated entry (a crash, a full disk, a hand-edited file) is detected and
treated as a miss — never an exception — and rewritten by the next store. Entries are written to a temporary file in the
same directory and renamed over the final name (``os.replace``, atomic on POSIX and Windows), so concurrent processes
read either the whole old entry, the whole new one or none; no fsync: after a power loss a short file fails the
checksum. The same holds between threads (every writer has its own temporary file), so no lock is taken.

Location: ``$PTXGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptxgen``, else ``~/.cache/ptxgen``; ``PTXGEN_CACHE=0``
disables the cache (``cache_dir()`` is then None, lookups miss, stores do nothing). The environment is read on
every call, so a test can point it at a temporary directory. The directory is created ``0o700``: an entry is a
pickle, trusted like the code in the user's own site-packages (the same model as Triton's and Inductor's caches).

The PTX of a cached kernel keeps the ``.file``/``.loc`` debug locations of the compile that produced it (the key
ignores locations, so the same kernel from another file or at other lines is a hit). There is no size limit or
eviction yet: ``clear()`` empties it.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

__all__ = ["cache_dir", "choice_key", "clear", "enabled", "kernel_key", "lookup", "lookup_choice", "lookup_module",
           "stats", "store", "store_choice", "store_module", "text_key", "toolchain"]

MAGIC = b"PTXGENC1"  # the entry format; a new format gets a new magic, and old entries read as misses
FORMAT = 1
_SUFFIX = {"kernel": ".kernel", "module": ".module", "choice": ".choice"}
_STATS = {"hits": 0, "misses": 0, "stores": 0, "corrupt": 0, "errors": 0}
_TOOLCHAIN = None
_WARNED = False


# -- where -------------------------------------------------------------------------------------------------------
def enabled() -> bool:
    """False when ``PTXGEN_CACHE`` is ``0``/``false``/``no``/``off`` (case-insensitive)."""
    return os.environ.get("PTXGEN_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path | None:
    """The cache directory (not created here), or None when the cache is disabled.

    ``PTXGEN_CACHE_DIR=/tmp/c`` → ``Path("/tmp/c")``; unset with ``XDG_CACHE_HOME=/x`` → ``Path("/x/ptxgen")``;
    else ``~/.cache/ptxgen``. Post: None exactly when ``enabled()`` is False."""
    if not enabled():
        return None
    explicit = os.environ.get("PTXGEN_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and os.path.isabs(os.path.expanduser(xdg)) else Path.home() / ".cache"
    return base / "ptxgen"


def _path(root: Path, key: str, kind: str) -> Path:
    # two-character fan-out keeps directories small, as git's object store does
    return root / key[:2] / (key + _SUFFIX[kind])


# -- keys --------------------------------------------------------------------------------------------------------
def _dist_versions() -> dict:
    """{normalized distribution name: version} from the ``*.dist-info`` / ``*.egg-info`` directory names on
    ``sys.path`` (first one wins, as imports do). importlib.metadata would give the same answers but importing it
    costs a cached process many times what listing the site directories does."""
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            for suffix in (".dist-info", ".egg-info"):
                if name.endswith(suffix):
                    dist, _, version = name[:-len(suffix)].partition("-")
                    if version:  # a source tree's bare ``x.egg-info`` names no version
                        found.setdefault(dist.lower().replace("-", "_").replace(".", "_"), version)
    return found


def _dist_version(dists: dict, *names) -> str | None:
    for name in names:
        v = dists.get(name.lower().replace("-", "_"))
        if v:
            return v
    return None


def _source_digest() -> str:
    """sha256 over the relative path and bytes of every .py and .lark file of the ptxgen and layoutc packages."""
    import layoutc

    import ptxgen

    h = hashlib.sha256()
    for pkg in (ptxgen, layoutc):
        root = os.path.dirname(os.path.abspath(pkg.__file__))
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files += [os.path.join(folder, n) for n in names if n.endswith((".py", ".lark"))]
        for path in sorted(files):
            rel = os.path.relpath(path, root).replace(os.sep, "/").encode()
            with open(path, "rb") as f:
                data = f.read()
            h.update(b"%s\0%d\0" % (rel, len(data)))  # lengths keep (a, bc) and (ab, c) apart
            h.update(data)
    return h.hexdigest()


def _nvjitlink_version(dists: dict) -> str:
    # cuda-pathfinder loads the pip wheel's library first; reading its version from the wheel's metadata spares a
    # cached process from loading nvJitLink at all. Without the wheel (a system library), ask the library itself.
    v = _dist_version(dists, "nvidia-nvjitlink", "nvidia-nvjitlink-cu13", "nvidia-nvjitlink-cu12")
    if v is not None:
        return v
    try:
        from ..nvjitlink import nvjitlink_version

        return "lib-" + ".".join(map(str, nvjitlink_version()))
    except Exception:  # no nvJitLink: nothing can be compiled, so nothing is stored under this key anyway
        return "none"


def toolchain() -> dict:
    """What a cached artifact depends on besides its input, computed once per process:
    ``{"python": "3.11", "ptxgen": "0.1.0", "sources": <sha256>, "lark": "1.3.1", "llvmlite": "0.50.0",
    "nvjitlink": "13.5.37", "cuda-bindings": "13.4.4"}``. ``sources`` (ptxgen's and layoutc's .py and .lark files)
    is what makes an edited lowering miss even when the version number did not move. Nothing here imports lark,
    llvmlite or nvJitLink. Post: every value is a str."""
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        dists = _dist_versions()
        _TOOLCHAIN = {
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "ptxgen": _dist_version(dists, "layoutc-ptxgen") or "dev",
            "sources": _source_digest(),
            "lark": _dist_version(dists, "lark", "lark-parser") or "none",
            "llvmlite": _dist_version(dists, "llvmlite") or "none",
            "nvjitlink": _nvjitlink_version(dists),
            "cuda-bindings": _dist_version(dists, "cuda-bindings", "cuda-python") or "none",
        }
    return _TOOLCHAIN


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8")
        h.update(b"%d\0" % len(data))  # length-prefixed: no two part lists hash alike by concatenation
        h.update(data)
    return h.hexdigest()


def kernel_key(ir_sha256: str, spec, arch: str, options) -> str:
    """The key of a compiled kernel: sha256 over the sha256 of its printed IR (``JitKernel.ir_hash``, i.e.
    ``sha256(print_kernel(kernel))``), ``repr(spec)`` (a frozen dataclass: deterministic), the arch, the options in
    order and ``toolchain()``.

    ``kernel_key(k.ir_hash, Specialization.generic(), "sm_90a", ("-O3",))`` → 64 hex digits. Post: equal inputs in
    any process with the same toolchain give the same key; any differing input gives another."""
    tc = toolchain()
    return _digest("kernel", FORMAT, ir_sha256, repr(spec), arch, "\0".join(map(str, options)),
                   *(f"{k}={tc[k]}" for k in sorted(tc)))


def text_key(text: str, file: str) -> str:
    """The key of parsed, verified IR text: sha256 over the text, the file name (the Module's locations carry it),
    lark's version, ptxgen's sources and Python's version. Post: as ``kernel_key``."""
    tc = toolchain()
    return _digest("module", FORMAT, text, file, tc["python"], tc["ptxgen"], tc["sources"], tc["lark"])


def choice_key(problem, device) -> str:
    """The key of a tuned choice (an autotuner's winner, ``ptxgen.kernels.gemm.autotune``): sha256 over ``problem``
    (what the choice is for, e.g. ``("gemm", 16, 4096, 4096, "bf16", ...)``), ``device`` (what it was timed on: the
    device's name, SM count and driver version) and ``toolchain()`` — so that another device, driver, compiler or
    ptxgen source tree (a kernel that changed) times again instead of trusting an old winner.
    Post: as ``kernel_key``."""
    tc = toolchain()
    return _digest("choice", FORMAT, repr(tuple(problem)), repr(tuple(device)), *(f"{k}={tc[k]}" for k in sorted(tc)))


# -- entries -----------------------------------------------------------------------------------------------------
def _warn_once(message: str) -> None:
    global _WARNED
    _STATS["errors"] += 1
    if not _WARNED:  # an unwritable cache slows things down but must not break compiling: say so once
        _WARNED = True
        import warnings

        warnings.warn(f"ptxgen compile cache: {message}", RuntimeWarning, stacklevel=3)


def _read(key: str, kind: str):
    """The unpickled payload of an entry, or None (a miss) when absent, disabled, corrupt or unreadable."""
    root = cache_dir()
    if root is None:
        return None
    path = _path(root, key, kind)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        _STATS["misses"] += 1
        return None
    head = len(MAGIC) + 32
    payload = blob[head:]
    if blob[:len(MAGIC)] != MAGIC or len(blob) < head or hashlib.sha256(payload).digest() != blob[len(MAGIC):head]:
        _STATS["corrupt"] += 1
        _STATS["misses"] += 1
        return None
    try:
        value = pickle.loads(payload)
    except Exception:  # checksummed but unreadable (a class renamed since): a miss, rewritten by the next store
        _STATS["corrupt"] += 1
        _STATS["misses"] += 1
        return None
    if not isinstance(value, dict) or value.get("format") != FORMAT or value.get("kind") != kind:
        _STATS["corrupt"] += 1
        _STATS["misses"] += 1
        return None
    _STATS["hits"] += 1
    return value


def _write(key: str, kind: str, value: dict) -> bool:
    root = cache_dir()
    if root is None:
        return False
    path = _path(root, key, kind)
    try:
        payload = pickle.dumps({"format": FORMAT, "kind": kind, **value}, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # something in the value does not pickle: compile results stay in-process only
        _warn_once(f"cannot pickle a {kind} entry: {exc}")
        return False
    blob = MAGIC + hashlib.sha256(payload).digest() + payload
    tmp = None
    try:
        # the root itself private when we create it (mkdir's mode applies only to the last component)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX[kind], dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)  # atomic: readers see the old entry, the new one or none, never a torn one
        tmp = None
    except OSError as exc:
        _warn_once(f"cannot write {path}: {exc}")
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    _STATS["stores"] += 1
    return True


def lookup(key: str):
    """The ``ptxgen.lower.Compiled`` stored under ``key`` (a ``kernel_key``), or None: absent, disabled, corrupt or
    from another entry format. Never raises for a bad entry.

    >>> c = lookup(kernel_key(k.ir_hash, spec, "sm_90a", opts))     # doctest: +SKIP
    >>> c.registers, c.from_cache                              # doctest: +SKIP
    (90, True)

    Post: a non-None result has ``ptx``, ``cubin`` (a ``Cubin`` with its ``info_log``), ``llvm_ir``, ``spec``,
    ``arch``, ``name``, ``registers``/``spill_bytes`` parsed from the log, and ``from_cache`` True."""
    value = _read(key, "kernel")
    if value is None:
        return None
    try:
        from ..lower import Compiled
        from ..nvjitlink import Cubin

        if value["cubin"] is None:  # stored before nvJitLink ran (a kernel the driver loads from PTX)
            compiled = Compiled(value["name"], value["spec"], value["arch"], value["llvm_ir"], value["ptx"],
                                assembler=_plain_assembler(value["ptx"], value["arch"], value["options"]))
        else:
            cubin = Cubin(value["cubin"], info_log=value["info_log"], arch=value["cubin_arch"])
            compiled = Compiled(value["name"], value["spec"], value["arch"], value["llvm_ir"], value["ptx"], cubin)
    except Exception:  # fields missing or of the wrong type: a miss
        _STATS["corrupt"] += 1
        return None
    compiled.from_cache = True
    widths = value.get("vector_widths")
    compiled.vector_widths = dict(widths) if isinstance(widths, dict) else None
    return compiled


def store(key: str, compiled, options=()) -> bool:
    """Write ``compiled`` (a ``ptxgen.lower.Compiled``, compiled with nvJitLink ``options``) under ``key``,
    atomically; a cubin not yet assembled is stored as absent (``lookup`` then gives one that assembles with
    ``options`` when read). Returns False, with one RuntimeWarning per process, when the cache is disabled (no
    warning then) or cannot be written; never raises for an I/O failure. Post: on True, ``lookup(key)`` in any process gives an equal ptx/cubin/info_log."""
    cubin = compiled.cubin if compiled.assembled else None
    value = {"name": compiled.name, "spec": compiled.spec, "arch": compiled.arch, "llvm_ir": compiled.llvm_ir,
             "ptx": compiled.ptx, "options": tuple(options),
             "cubin": None if cubin is None else bytes(cubin), "info_log": getattr(cubin, "info_log", ""),
             "cubin_arch": getattr(cubin, "arch", compiled.arch), "vector_widths": compiled.vector_widths}
    return _write(key, "kernel", value)


def _plain_assembler(ptx: str, arch: str, options):
    def run():
        from ..nvjitlink import compile_ptx

        return compile_ptx(ptx, arch=arch, options=options)
    return run


def lookup_module(key: str):
    """``(module, ir_hashes)`` stored under ``key`` (a ``text_key``): the parsed and verified ``ptxgen.ir.Module``
    and ``{kernel name: sha256 of print_kernel}``; or None. Post: a non-None Module verified when it was stored
    (only ``store_module`` of verified IR writes one)."""
    value = _read(key, "module")
    if value is None:
        return None
    module, hashes = value.get("module"), value.get("ir_hashes")
    if module is None or not isinstance(hashes, dict):
        _STATS["corrupt"] += 1
        return None
    return module, hashes


def store_module(key: str, module, ir_hashes: dict) -> bool:
    """Write a parsed and VERIFIED Module (the caller's promise: ``jit_text`` stores only after ``verify``) and
    its kernels' printed-IR hashes under ``key``. Returns False when disabled or unwritable. Post: on True,
    ``lookup_module(key)`` gives a Module structurally equal to ``module`` with the same locations."""
    return _write(key, "module", {"module": module, "ir_hashes": dict(ir_hashes)})


def lookup_choice(key: str):
    """The value stored under ``key`` (a ``choice_key``) by ``store_choice``, or None: absent, disabled, corrupt.
    Never raises for a bad entry."""
    value = _read(key, "choice")
    if value is None:
        return None
    if "choice" not in value:
        _STATS["corrupt"] += 1
        return None
    return value["choice"]


def store_choice(key: str, choice) -> bool:
    """Write ``choice`` (plain data: dicts, lists, strings, numbers) under ``key``, atomically. Returns False when
    disabled or unwritable (one RuntimeWarning per process for the latter). Post: on True, ``lookup_choice(key)``
    in any process gives an equal value."""
    return _write(key, "choice", {"choice": choice})


def clear() -> int:
    """Remove every cache entry (and leftover temporary file) under ``cache_dir()``; other files are left alone.
    Returns how many files were removed (0 when disabled or absent). Post: every ``lookup`` misses until the next
    ``store``."""
    root = cache_dir()
    if root is None or not root.is_dir():
        return 0
    removed = 0
    for sub in root.iterdir():
        if not (sub.is_dir() and len(sub.name) == 2):
            continue
        for p in sub.iterdir():
            if p.suffix in _SUFFIX.values() and (p.name.startswith(".tmp-") or len(p.stem) == 64):
                try:
                    p.unlink()
                    removed += 1
                except OSError:
                    pass
        try:
            sub.rmdir()  # only when empty
        except OSError:
            pass
    return removed


def stats() -> dict:
    """Counters since process start: ``hits``, ``misses`` (corrupt entries included), ``stores``, ``corrupt``,
    ``errors`` (failed writes). A copy."""
    return dict(_STATS)
