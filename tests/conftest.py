"""Shared pytest configuration: hypothesis profiles and the ``gpu`` marker.

Hypothesis profiles (select with the environment variable ``HYPOTHESIS_PROFILE``, default ``dev``):

- ``dev``: 100 examples per property, no deadline, ``filter_too_much`` off (quick local runs);
- ``ci``: 500 examples per property, no deadline, random (not derandomized), ``too_slow`` and ``filter_too_much``
  health checks off (the differential tests discard inputs outside each operation's precondition by design).

The compile cache (``ptxgen.runtime.cache``) is pointed at a temporary directory for the session.

The README's test command runs the suite on every core with pytest-xdist (``-n auto --dist worksteal``): each worker
process imports this file, so each has its own compile-cache directory (no entry is shared, none is written twice at
once) and its own ``tmp_path`` root; worksteal hands each worker a contiguous half of the tests, so a module's
in-process kernel caches serve its tests on one worker, and an idle worker takes tests from the other's tail. The
GPU tests run on the device without ``-n`` (``python -m pytest -q -m gpu tests/``), one process, as before.

Tests are grouped by package: ``tests/layoutc/``, ``tests/ptxgen/`` (``tests/gpu/`` holds the device scripts); the
repository-wide checks (spec doctests, the README quickstart, the import graph) stay here. Both package folders are
on ``sys.path`` so a test module may import a helper from either (``tests/ptxgen/test_tma_extent_one.py`` uses the
raw-driver TMA probe of ``tests/layoutc/test_tma.py``), whichever folder pytest was pointed at.

Tests marked ``@pytest.mark.gpu`` are skipped unless a CUDA GPU is present (checked once, cheaply, through
``cuda.bindings.driver``; any failure to import or initialise the driver means "no GPU").
"""
import os
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

for _package in ("layoutc", "ptxgen"):
    _folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), _package)
    if _folder not in sys.path:
        sys.path.insert(0, _folder)

# filter_too_much off: the differential tests against pycute discard, by design, the inputs outside an operation's
# precondition (assume), and an unlucky random start can discard most of the first few dozen draws; the comparison
# counts printed at the end of the session show how many inputs each property really compared.
# ci: 250 examples a property (fresh ones every run: derandomize off). At 500 the layoutc properties alone took 184 s of
# a 2-core run against 98 s at 100, and the whole run passed CI's 15-minute bound (s36 log section 14).
settings.register_profile(
    "ci", max_examples=250, deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Tests never read or write the user's compile cache (~/.cache/ptxgen): a stale entry there would hide a lowering
# change from the tests, and tests must not leave files behind. One fresh directory per session, removed at exit.
_COMPILE_CACHE = tempfile.TemporaryDirectory(prefix="ptxgen-test-cache-")
os.environ["PTXGEN_CACHE_DIR"] = _COMPILE_CACHE.name

_GPU_PRESENT = None


def cuda_gpu_present() -> bool:
    """True when the CUDA driver initialises and reports at least one device (cached; never raises)."""
    global _GPU_PRESENT
    if _GPU_PRESENT is None:
        _GPU_PRESENT = False
        try:
            from cuda.bindings import driver
        except ImportError:
            return False
        try:
            (err,) = driver.cuInit(0)
            if int(err) == 0:
                err, count = driver.cuDeviceGetCount()
                _GPU_PRESENT = int(err) == 0 and count > 0
        except Exception:  # a broken driver install means no usable GPU, never a collection error
            _GPU_PRESENT = False
    return _GPU_PRESENT


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped when none is present")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or cuda_gpu_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none found through cuda.bindings.driver)")
    for item in gpu_items:
        item.add_marker(skip)


def pytest_sessionfinish(session):
    """An xdist worker hands its pycute differential counters to the controller, which prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    stats = getattr(session.config, "_layoutc_diff_stats", None)
    if workeroutput is not None and stats:
        workeroutput["layoutc_diff_stats"] = {op: dict(counts) for op, counts in stats.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: add up the workers' differential counters (worksteal may split the module between them)."""
    stats = getattr(node, "workeroutput", {}).get("layoutc_diff_stats")
    if not stats:
        return
    total = getattr(node.config, "_layoutc_diff_stats", None)
    if total is None:
        total = node.config._layoutc_diff_stats = {}
    for op, counts in stats.items():
        into = total.setdefault(op, {})
        for name, count in counts.items():
            into[name] = into.get(name, 0) + count


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print the pycute differential's compared/skipped counters when that module ran."""
    stats = getattr(config, "_layoutc_diff_stats", None)
    if not stats:
        return
    terminalreporter.section("layoutc vs pycute differential")
    for op in sorted(stats):
        c = stats[op]
        terminalreporter.write_line(
            f"{op:<28} compared {c.get('compared', 0):>6}   skipped (LayoutError) {c.get('layout_error', 0):>5}"
            f"   skipped (pycute assert) {c.get('pycute_error', 0):>5}   excluded (deviation) {c.get('deviation', 0):>5}")
