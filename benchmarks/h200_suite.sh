#!/usr/bin/env bash
# One device call on the H200: benchmarks first (their tables are the product), then the CUDA tests.
# Usage there: bash benchmarks/h200_suite.sh  (logs under $OUT; a short summary printed last)
set -u
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/aotcuda-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$?" | tee -a "$OUT/summary.txt"; }
step rope "${ROPE_LIMIT:-200}" python3 benchmarks/rope.py --json "$OUT/rope.json"
step latency "${LATENCY_LIMIT:-120}" python3 benchmarks/latency.py --json "$OUT/latency.json"
step cuda_tests "${TESTS_LIMIT:-200}" python3 -m pytest -q -m cuda -p no:cacheprovider tests
for f in rope latency; do sed -n '/^|/p' "$OUT/$f.log"; done
tail -5 "$OUT/cuda_tests.log"; cat "$OUT/summary.txt"
