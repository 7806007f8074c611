#!/usr/bin/env bash
# Issue 14, one device call: compile benchmarks/decode.py's model as several aotcuda packages at once (each a
# batch and Inductor options), then profile each (scripts/decode_profile.py) and time decode.py's rows on it,
# one at a time, so that no timing runs beside a compile.
#   VARIANTS="b1:default b1:combo_kernels=True b8:default" ROWS=aotcuda,aotcuda-graphs,aotcuda-bind \
#     bash benchmarks/scripts/decode_variants.sh           (on the device machine, from the repository root)
# A variant is bBATCH:OPTIONS, OPTIONS "default" or KEY=VALUE[,KEY=VALUE...] (Inductor options over lower()'s;
# a KEY starting with AOTCUDA_ is set in the compile's environment instead).
# MODEL=llama: transformers' LlamaForCausalLM of the same sizes (decode.py's llama-* rows) instead of our decoder.
# Issue 29's pass A/B (sibling products and decode attention on by default, row products off): VARIANTS="b8:default b8:AOTCUDA_SIBLING_PRODUCTS=0 b1:AOTCUDA_DECODE_ATTENTION=0 b1:AOTCUDA_ROW_PRODUCTS=1".
# SEQUENCE=N prints each profile's first N kernels of a step in order. EXTRA="--tiny --device cpu" makes it a CPU smoke run. CODE_FOR names the variant whose generated code (TORCH_LOGS=output_code) is kept. Logs go under $OUT.
set -u
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/aotcuda-out}; mkdir -p "$OUT"; work=$(mktemp -d)
VARIANTS=${VARIANTS:-"b1:default b8:default"}; MODEL=${MODEL:-decoder}
if [ "$MODEL" = llama ]; then KIND=llama; ROWS=${ROWS:-llama-aotcuda,llama-aotcuda-graphs,llama-aotcuda-bind}
else KIND=aotcuda; ROWS=${ROWS:-aotcuda,aotcuda-graphs,aotcuda-bind}; fi
name_of() { echo "$1" | sed 's/[:=,]/_/g'; }
# Inductor options of a variant (AOTCUDA_* entries are environment variables instead: env_of).
options_of() { local o=${1#*:} kv out=""; [ "$o" = default ] && return
  for kv in ${o//,/ }; do case $kv in AOTCUDA_*) ;; *) out="$out $kv" ;; esac; done
  [ -n "$out" ] && echo "--inductor-config$out"; }
env_of() { local o=${1#*:} kv; for kv in ${o//,/ }; do case $kv in AOTCUDA_*) echo "$kv" ;; esac; done; }
t0=$SECONDS
for v in $VARIANTS; do
  n=$(name_of "$v"); b=${v%%:*}; b=${b#b}
  if [ "${CODE_FOR:-}" = "$v" ]; then export TORCH_LOGS=output_code; fi
  # Each build its own Inductor cache: builds running at once must not take each other's coordinate-descent
  # picks (a kernel's cached pick is whichever build wrote it first), so that each is what a user's build is.
  env TORCHINDUCTOR_CACHE_DIR="$work/cache_$n" $(env_of "$v") timeout "${BUILD_LIMIT:-330}" python3 benchmarks/decode.py --build "$KIND" --package "$work/$n.pt2" --batch "$b" $(options_of "$v") ${EXTRA:-} \
    > "$OUT/build_$n.log" 2>&1 &
  unset TORCH_LOGS
done
wait; echo "builds: $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
# BEFORE_TIMING: a command run once the builds end and before anything is timed (e.g. waiting for a test
# run started beside the builds to finish, so that nothing runs beside the timings). Quote it in single
# quotes: it runs with this script's $OUT, and OUT=... set in the same command line is already the new value
# when a later assignment on that line expands (BEFORE_TIMING="... $OUT/var/..." names $OUT/var/var).
# It gets BEFORE_TIMING_LIMIT seconds (default 300): a wait that never ends must not spend the run's device time.
if [ -n "${BEFORE_TIMING:-}" ]; then
  timeout "${BEFORE_TIMING_LIMIT:-300}" bash -c "$BEFORE_TIMING"
  echo "before timing: rc=$? at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
fi
for v in $VARIANTS; do
  n=$(name_of "$v"); b=${v%%:*}; b=${b#b}
  [ -f "$work/$n.pt2" ] || { echo "$n: build failed: $(tail -2 "$OUT/build_$n.log")" | tee -a "$OUT/summary.txt"; continue; }
  grep -h "^built\|^pass " "$OUT/build_$n.log" | tee -a "$OUT/summary.txt"
  python3 benchmarks/scripts/package_launches.py "$work/$n.pt2" | sed "s|$work/||" | tee -a "$OUT/summary.txt"
  timeout 120 python3 benchmarks/scripts/decode_profile.py --model "$MODEL" --batch "$b" --package "$work/$n.pt2" --top 25 --sequence "${SEQUENCE:-0}" ${EXTRA:-} \
    > "$OUT/profile_$n.log" 2>&1; echo "profile $n rc=$?" >> "$OUT/summary.txt"
  timeout 200 python3 benchmarks/decode.py --batch "$b" --prebuilt "$KIND=$work/$n.pt2" --rows "$ROWS" ${EXTRA:-} \
    --json "$OUT/decode_$n.json" > "$OUT/decode_$n.log" 2>&1; echo "decode $n rc=$?" >> "$OUT/summary.txt"
done
for v in $VARIANTS; do
  n=$(name_of "$v"); echo "== $n"
  grep -E "per step|^idle" "$OUT/profile_$n.log"; sed -n '/^| kernel family/,/^$/p' "$OUT/profile_$n.log" | head -12
  grep "^|" "$OUT/decode_$n.log" | grep -v "^|---\|how it runs"
done
cat "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tar.gz --remove-files $(ls | grep -v summary.txt))
