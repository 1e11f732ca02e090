#!/usr/bin/env bash
# Run the GPU tests (pytest -m gpu) on the lent Hopper machine.
#
# Invoked from the repository root:   bash tests/gpu/run_on_device.sh
# Needs: python3 with numpy, pytest, hypothesis, cuda-bindings, nvidia-nvjitlink (present on the device) and the lark
# wheel in ./.whl/ (the device cannot reach PyPI). Writes, when $OUT is set (the device tool's return folder):
#   $OUT/pytest.log             the full pytest output
#   $OUT/wgmma_results.jsonl    one JSON line per wgmma case (descriptors, smem base, errors, seed)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

RESULTS_DIR="${OUT:-/tmp}"
mkdir -p "$RESULTS_DIR"
export WGMMA_RESULTS="$RESULTS_DIR/wgmma_results.jsonl"
rm -f "$WGMMA_RESULTS"

echo "== installing lark from .whl/ into /tmp/site"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || echo "WARNING: pip install of .whl/*.whl failed"
else
    echo "WARNING: no wheel in .whl/ (lark may be missing)"
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"

echo "== device"
nvidia-smi -L || echo "WARNING: nvidia-smi failed"
python3 - <<'PY'
try:
    import cuda.bindings, cuda.bindings.nvjitlink as nj
    print("cuda-bindings", cuda.bindings.__version__, "| nvJitLink", ".".join(map(str, nj.version())))
    from ptxgen.runtime import gpu_available, device_name, compute_capability
    ok = gpu_available()
    print("gpu_available():", ok, "|", (device_name(), compute_capability()) if ok else "")
except Exception as exc:  # diagnostics only
    print("runtime probe failed:", type(exc).__name__, exc)
PY

echo "== pytest -m gpu"
python3 -m pytest -q -m gpu tests/ -p no:cacheprovider --continue-on-collection-errors -rfEs 2>&1 \
    | tee "$RESULTS_DIR/pytest.log"
rc=${PIPESTATUS[0]}

echo "== wgmma cases (relative Frobenius error vs float64, tolerance 1e-5)"
python3 - "$WGMMA_RESULTS" <<'PY'
import json, os, sys
path = sys.argv[1]
if not os.path.exists(path):
    print("no results recorded (did the gpu tests run?)")
    sys.exit(0)
rows = [json.loads(line) for line in open(path) if line.strip()]
print(f"{'case':<36} {'N':>4} {'trans':>5} {'smem base':>10} {'rel err':>10} {'max abs':>10} {'load':>6}  result")
for r in rows:
    print(f"{r['case']:<36} {r['n']:>4} {str(r['trans'][0]) + ',' + str(r['trans'][1]):>5} {r['smem_base']:>10} "
          f"{r['rel_err']:>10.3g} {r['max_abs_err']:>10.3g} {r['load'][:6]:>6}  {'PASS' if r['ok'] else 'FAIL'}")
bad = [r for r in rows if not r["ok"]]
print(f"{len(rows) - len(bad)}/{len(rows)} cases pass" + (": failing " + ", ".join(r["case"] for r in bad) if bad else ""))
for r in bad:
    print("  ", r["case"], "desc_a", r["desc_a"], "desc_b", r["desc_b"], "seed", r["seed"])
PY
echo "== pytest exit code: $rc"
exit "$rc"
