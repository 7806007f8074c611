#!/usr/bin/env bash
# One device call on the H200: the benchmarks first (their tables are the product), then the CUDA tests.
#   bash benchmarks/h200_suite.sh            (on the device machine, from the repository root)
# Logs and JSON rows go under $OUT; the tables and a one-line-per-step summary are printed last.
# Each step has a time limit (seconds, overridable: ROPE_LIMIT=... etc.) so that one slow step cannot
# take the whole call. A device command may run 10 minutes, and all steps together need more: run them
# in two or three calls with STEPS, e.g. STEPS="rope latency models" then STEPS="fft cuda_tests", then
# STEPS=sanitizer. Issue 29's Triton ops alone: STEPS=kernels (decode_attention.py, row_products.py); its PDL A/B: STEPS=pdl.
# The CUDA tests: STEPS=cuda_tests, then STEPS=cuda_models, then STEPS=cuda_kernels; the gate before dependent launches go on by default:
# STEPS=pdl_tests. Issue 14's figures: STEPS="rope latency overhead" then STEPS=decode1 then STEPS=decode8
# (each decode step compiles the 1.2B model twice: AOTInductor and aotcuda). Bring .whl/ (click, diffusers) where those packages are missing.
# On a machine of several GPUs, LANES runs step lists side by side, one GPU each (the benchmark steps then
# share the host's CPUs with the other lane's compiles, which matters for the launch-bound latency step):
#   LANES="cuda_tests sanitizer;rope latency models fft" bash benchmarks/h200_suite.sh
# CUDA_TESTS narrows the cuda_tests and pdl_tests steps (default: $LOWERING_CUDA_TESTS). Run cuda_tests before sanitizer in one lane:
# the sanitizer's run then finds Inductor's caches warm instead of autotuning under memcheck.
# compute-sanitizer needs a Firecracker machine (the multi-GPU kinds): on gVisor it refuses the device.
set -u
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export OUT=${OUT:-/tmp/aotcuda-out}; mkdir -p "$OUT"
if [ -z "${NO_INSTALL:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
ALL_STEPS="rope pairmul latency overhead kernels decode1 decode8 decode_profile pdl models fft fft_more fft_sweep irfft_bins cuda_tests cuda_models cuda_kernels pdl_tests sanitizer"
# The CUDA tests come in three steps, each meant for one device call: those of the runtime, the lowering and the
# passes (in session 21 their ~40 tests took ~6 minutes on the H200), the library models and serving, and aotcuda's
# own Triton kernels (tests/kernels: their many shapes compile for longer than one call; in session 21 the first 32
# of 115 took the whole 560 s: narrow it with CUDA_KERNEL_TESTS).
LOWERING_CUDA_TESTS="tests/runtime tests/lowering tests/passes"
STEPS=${STEPS:-$ALL_STEPS}
if [ -n "${LANES:-}" ]; then
  IFS=';' read -ra lanes <<< "$LANES"; gpu=0
  for lane in "${lanes[@]}"; do
    STEPS="$lane" LANES= NO_INSTALL=1 NO_TABLES=1 CUDA_VISIBLE_DEVICES=$gpu bash "$0" &
    gpu=$((gpu + 1))
  done
  wait; STEPS=$ALL_STEPS; NO_RUN=1
fi
step() {
  local name=$1 limit=$2; shift 2
  [ -n "${NO_RUN:-}" ] && return 0
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  echo "== $name (GPU ${CUDA_VISIBLE_DEVICES:-all})"; local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s" | tee -a "$OUT/summary.txt"
}
step rope "${ROPE_LIMIT:-200}" python3 benchmarks/rope.py --json "$OUT/rope.json"
step pairmul "${PAIRMUL_LIMIT:-300}" python3 benchmarks/scripts/pair_mul_forms.py --json "$OUT/pairmul.json"
step latency "${LATENCY_LIMIT:-120}" python3 benchmarks/latency.py --json "$OUT/latency.json"
step overhead "${OVERHEAD_LIMIT:-200}" python3 benchmarks/overhead.py --device cuda --json "$OUT/overhead.json"
step kernels "${KERNELS_LIMIT:-300}" bash -c "python3 benchmarks/decode_attention.py --json $OUT/decode_attention.json && python3 benchmarks/row_products.py --json $OUT/row_products.json"
step decode1 "${DECODE_LIMIT:-580}" python3 benchmarks/decode.py --batch 1 --deadline 540 --json "$OUT/decode1.json"
step decode8 "${DECODE_LIMIT:-580}" python3 benchmarks/decode.py --batch 8 --deadline 540 --json "$OUT/decode8.json"
step decode_profile "${PROFILE_LIMIT:-400}" python3 benchmarks/scripts/decode_profile.py --batch 8
# Issue 29's programmatic dependent launch, A/B (AOTCUDA_DEPENDENT_LAUNCH, on by default since session 23; docs/performance.md): its
# CUDA test first, then the decode step without and with it at batch 1 and 8 (four packages built at once).
step pdl "${PDL_LIMIT:-580}" bash -c "python3 -m pytest -q -m cuda -p no:cacheprovider \
  tests/lowering/test_dependent_launch.py && OUT=$OUT/pdl BUILD_LIMIT=300 SEQUENCE=30 ROWS=aotcuda-bind \
  VARIANTS='b1:AOTCUDA_DEPENDENT_LAUNCH=0 b1:default b8:AOTCUDA_DEPENDENT_LAUNCH=0 b8:default' \
  bash benchmarks/scripts/decode_variants.sh"
step models "${MODELS_LIMIT:-240}" python3 benchmarks/models.py --json "$OUT/models.json"
step fft "${FFT_LIMIT:-300}" python3 benchmarks/fft.py --device cuda --programs filter whisper --json "$OUT/fft.json"
step fft_more "${FFT_LIMIT:-300}" python3 benchmarks/fft.py --device cuda --programs stft_dynamic freeu filter_bf16 \
  --json "$OUT/fft_more.json"
step fft_sweep 240 python3 benchmarks/scripts/fft_tiling_sweep.py --budget 180 --json "$OUT/fft_sweep.json"
step irfft_bins 120 python3 benchmarks/scripts/irfft_ignored_bins.py --device cuda
step cuda_tests "${TESTS_LIMIT:-560}" python3 -m pytest -q -rs -m cuda -p no:cacheprovider ${CUDA_TESTS:-$LOWERING_CUDA_TESTS}
step cuda_models "${TESTS_LIMIT:-560}" python3 -m pytest -q -rs -m cuda -p no:cacheprovider tests/models tests/serving
step cuda_kernels "${TESTS_LIMIT:-560}" python3 -m pytest -q -rs -m cuda -p no:cacheprovider ${CUDA_KERNEL_TESTS:-tests/kernels}
# The CUDA tests with dependent launches forced on (the default since session 23, when this gate passed).
step pdl_tests "${TESTS_LIMIT:-560}" env AOTCUDA_DEPENDENT_LAUNCH=1 python3 -m pytest -q -rs -m cuda -p no:cacheprovider \
  ${CUDA_TESTS:-$LOWERING_CUDA_TESTS}
step sanitizer "${SANITIZER_LIMIT:-300}" compute-sanitizer --tool memcheck --error-exitcode 1 \
  python3 -m pytest -q -m cuda -p no:cacheprovider tests/runtime/test_cuda.py
[ -n "${NO_TABLES:-}" ] && exit 0
for f in rope pairmul latency overhead kernels decode1 decode8 decode_profile pdl models fft fft_more fft_sweep irfft_bins; do [ -f "$OUT/$f.log" ] && sed -n '/^|/p' "$OUT/$f.log"; done
for f in cuda_tests cuda_models cuda_kernels pdl_tests; do [ -f "$OUT/$f.log" ] && tail -3 "$OUT/$f.log"; done
[ -f "$OUT/sanitizer.log" ] && grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitizer.log" | tail -3
[ -f "$OUT/summary.txt" ] && cat "$OUT/summary.txt"
python3 benchmarks/h200_summary.py "$OUT"  # the issue-14 targets, one line each, last
# A device call brings back at most 8 files: pack the logs into one when there are more.
if [ "$(ls "$OUT" | wc -l)" -gt 8 ]; then (cd "$OUT" && tar czf logs.tar.gz --remove-files $(ls)); fi
