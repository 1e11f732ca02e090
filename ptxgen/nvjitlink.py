"""PTX → cubin through nvJitLink (``cuda.bindings.nvjitlink``); works without a GPU.

The step between the lowering and the launch, kept below both: ``ptxgen.lower.compile_kernel`` ends with it and
``ptxgen.runtime`` assembles deferred or hand-written PTX with it (re-exported there), while this module imports
nothing of ptxgen, so neither package reaches into the other for it.

>>> cubin = compile_ptx(ptx_text)              # doctest: +SKIP
>>> compile_ptx(ptx_text, options=("-lineinfo",)).info_log   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Iterable


class CompileError(RuntimeError):
    """nvJitLink refused the input: ``.log`` is nvJitLink's error log (ptxas messages with line numbers),
    ``.source_lines`` the offending PTX lines quoted in the message (may be empty)."""

    def __init__(self, message: str, log: str = "", source_lines: tuple = ()):
        super().__init__(message)
        self.log = log
        self.source_lines = tuple(source_lines)


class Cubin(bytes):
    """The linked cubin (a ``bytes``) with nvJitLink's info log attached as ``.info_log`` (ptxas warnings,
    e.g. wgmma serialisation advisories; ``-Xptxas=-v`` resource usage)."""

    info_log: str = ""
    arch: str = ""

    def __new__(cls, data: bytes, info_log: str = "", arch: str = ""):
        obj = super().__new__(cls, data)
        obj.info_log = info_log
        obj.arch = arch
        return obj


_NJ = None


def _nj():
    global _NJ
    if _NJ is None:
        try:
            from cuda.bindings import nvjitlink
        except Exception as exc:  # pragma: no cover - depends on the environment
            raise CompileError(f"nvJitLink is not available: {exc}") from exc
        _NJ = nvjitlink
    return _NJ


def nvjitlink_version() -> tuple:
    """(major, minor) of the loaded nvJitLink library: ``(13, 5)``."""
    return tuple(_nj().version())


def _read_log(nj, handle, size_fn, get_fn) -> str:
    try:
        n = size_fn(handle)
        if n <= 1:
            return ""
        buf = bytearray(n)
        get_fn(handle, buf)
        return bytes(buf).rstrip(b"\0").decode("utf-8", "replace")
    except Exception:  # a log we cannot read must not hide the real error
        return ""


def _quote_lines(log: str, source: str, name: str) -> list:
    """The PTX lines named in ptxas messages such as ``ptxas application ptx input, line 13; error : ...``."""
    import re

    lines = source.splitlines()
    quoted = []
    seen = set()
    for m in re.finditer(r"line (\d+)", log):
        n = int(m.group(1))
        if n in seen or not 1 <= n <= len(lines):
            continue
        seen.add(n)
        quoted.append(f"  {name}:{n}: {lines[n - 1].strip()}")
    return quoted


def compile_ptx(ptx: str | bytes, arch: str = "sm_90a", options: Iterable[str] = (), name: str = "kernel.ptx") -> Cubin:
    """Compile and link one PTX module to a cubin for ``arch`` with nvJitLink.

    Options are nvJitLink option strings (``"-O3"``, ``"-lineinfo"``, ``"-maxrregcount=128"``, ``"-Xptxas=-v"``);
    ``-arch=<arch>`` is added first. Returns a ``Cubin`` (bytes) carrying ``info_log``.
    Raises ``CompileError`` whose message holds nvJitLink's error log and the offending PTX lines.
    """
    nj = _nj()
    if isinstance(ptx, str):
        text = ptx
        data = ptx.encode("utf-8")
    else:
        data = bytes(ptx)
        text = data.decode("utf-8", "replace")
    if not data.endswith(b"\0"):
        data = data + b"\0"
    arch = arch[len("-arch="):] if arch.startswith("-arch=") else arch
    opts = [f"-arch={arch}"] + [str(o) for o in options]
    try:
        handle = nj.create(len(opts), opts)
    except nj.nvJitLinkError as exc:
        raise CompileError(f"nvJitLink create failed with options {opts}: {exc}") from exc
    try:
        try:
            nj.add_data(handle, nj.InputType.PTX, data, len(data), name)
            nj.complete(handle)
        except nj.nvJitLinkError as exc:
            log = _read_log(nj, handle, nj.get_error_log_size, nj.get_error_log)
            info = _read_log(nj, handle, nj.get_info_log_size, nj.get_info_log)
            quoted = _quote_lines(log, text, name)
            parts = [f"nvJitLink failed ({exc}) compiling {name} for {arch}"]
            if log:
                parts.append("error log:\n" + log.rstrip())
            if quoted:
                parts.append("offending PTX lines:\n" + "\n".join(quoted))
            if info:
                parts.append("info log:\n" + info.rstrip())
            raise CompileError("\n".join(parts), log=log, source_lines=quoted) from None
        info = _read_log(nj, handle, nj.get_info_log_size, nj.get_info_log)
        n = nj.get_linked_cubin_size(handle)
        buf = bytearray(n)
        nj.get_linked_cubin(handle, buf)
        return Cubin(bytes(buf), info_log=info, arch=arch)
    finally:
        try:
            nj.destroy(handle)
        except Exception:
            pass
