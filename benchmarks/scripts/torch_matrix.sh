#!/usr/bin/env bash
# The torch version matrix (issue 28): one venv per torch version under $VENVS, the pass, lowering and
# runtime tests run in each, one version at a time, one pytest worker, and a line of passed/failed per
# version appended to $RESULTS. CI itself stays on the README's torch 2.13.0; this script is run by hand.
#
#   benchmarks/scripts/torch_matrix.sh setup 2.15.0         make /work/venvs/torch-2.15.0 (idempotent)
#   benchmarks/scripts/torch_matrix.sh run 2.15.0           run the three test folders there
#   benchmarks/scripts/torch_matrix.sh all                  setup + run for every version in VERSIONS
#   benchmarks/scripts/torch_matrix.sh setup libs-latest    torch 2.13.0 + the newest transformers/diffusers
#   benchmarks/scripts/torch_matrix.sh run libs-latest      the library-model tests (tests/models) there
#
# Versions above the machine's pip cap (2.11.0 and 2.15.0 here) install with PIP_CONSTRAINT=/dev/null from
# PyPI: a CUDA build, which runs on the CPU. Set TORCH_INDEX=https://download.pytorch.org/whl/cpu where that
# index is reachable for a CPU build. Extra pytest arguments go in PYTEST_ARGS (e.g. "-k fft").
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
VENVS="${VENVS:-/work/venvs}"
VERSIONS="${VERSIONS:-2.11.0 2.13.0 2.14.1 2.15.0}"
RESULTS="${RESULTS:-$REPO/benchmarks/results/torch_matrix.txt}"
TEST_DIRS="${TEST_DIRS:-tests/passes tests/lowering tests/runtime}"

venv_of() { echo "$VENVS/torch-$1"; }

setup() {
    local version="$1" venv; venv="$(venv_of "$version")"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    local pip=("$venv/bin/python" -m pip install -q)
    if [ "$version" = libs-latest ]; then
        "${pip[@]}" torch==2.13.0
        "${pip[@]}" -e "$REPO[test]"
        # the newest releases pip gives, past the [test] pins
        "${pip[@]}" -U transformers diffusers
    else
        local index=()
        [ -n "${TORCH_INDEX:-}" ] && index=(--index-url "$TORCH_INDEX" --extra-index-url https://pypi.org/simple)
        PIP_CONSTRAINT=/dev/null "${pip[@]}" "${index[@]}" "torch==$version"
        # the project with its own pin: must keep the torch just installed (pip check says if not)
        PIP_CONSTRAINT=/dev/null "${pip[@]}" -e "$REPO[test]"
    fi
    "$venv/bin/python" -c "import torch, transformers, diffusers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'diffusers', diffusers.__version__)"
}

run() {
    local version="$1" venv log dirs; venv="$(venv_of "$version")"
    mkdir -p "$(dirname "$RESULTS")"
    log="$VENVS/torch-$version.log"
    dirs="$TEST_DIRS"; [ "$version" = libs-latest ] && dirs="tests/models"
    # PYTHONPATH: the checkout under test, whatever the venv's editable install points at
    (cd "$REPO" && PYTHONPATH="$REPO/src" nice -n 10 "$venv/bin/python" -m pytest -q -n 1 -p no:cacheprovider \
        ${PYTEST_ARGS:-} $dirs) >"$log" 2>&1 || true
    local versions summary
    versions="$("$venv/bin/python" -c "import torch, transformers, diffusers; print(torch.__version__, transformers.__version__, diffusers.__version__)")"
    summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed)|^=+ .*(passed|failed|error)' "$log" | tail -1)"
    echo "$(date -u +%F) $(git -C "$REPO" rev-parse --short HEAD) $version [$versions] $dirs: $summary" | tee -a "$RESULTS"
    grep -E '^(FAILED|ERROR) ' "$log" || true
}

case "${1:-}" in
    setup) setup "$2" ;;
    run) run "$2" ;;
    all) for v in $VERSIONS; do setup "$v"; run "$v"; done ;;
    *) sed -n 2,16p "$0"; exit 2 ;;
esac
