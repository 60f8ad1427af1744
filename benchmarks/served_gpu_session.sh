#!/usr/bin/env bash
# The device calls of benchmarks/served_gpu.py (issue 30): the served paths side by side on the
# GPU machine, from the repository root of the device tool's working copy, with the machine's
# own python3 (its CUDA torch). Here, first (build/gpu-carry, git-ignored):
#
#   nox -s build -- --target spec-0.9-vllm-0.26
#   nox -s wheelhouse -- --target spec-0.9-vllm-0.26 --installed tests/data/h200-freeze.txt \
#       --python-version 3.12 --accept-installed fsspec --accept-installed llvmlite \
#       --accept-installed numba --accept-installed numpy --accept-installed setuptools --split 60MiB
#   pip download --no-deps speculators==0.9.0 -d EXTRA     # the unpatched client
#   pip download --no-deps --only-binary :all: --platform manylinux2014_x86_64 py-spy -d EXTRA
#   bash benchmarks/served_gpu_session.sh pack EXTRA
#
# Then one device call per part, back to back (the machine goes back after 30 s idle):
#   carry build/gpu-carry/wheelhouses.tar.001 + parts.json + join.py:  ... session.sh carry
#   carry each further part:                                           ... session.sh carry
#   the last part:   bash benchmarks/served_gpu_session.sh carry && ... session.sh setup
#   then:            bash benchmarks/served_gpu_session.sh run SHAPE SIDES [CLIENTS]
set -uo pipefail

# The machine's temporary folder ($TMPDIR, else where mktemp puts its files): each step is its
# own device call, so the steps find one another's files there.
TMP=${TMPDIR:-$(dirname "$(mktemp -u)")}

CARRY=build/gpu-carry
PARTS=$TMP/pw-carry
ROOT=$TMP/pw-bench
WORK=$ROOT/work
REPORT=$WORK/served-paths.json
OUT=${OUT:-$TMP/pw-out}

bring_back() {
    mkdir -p "$OUT"
    cp "$REPORT" "$OUT"/ 2>/dev/null
    python3 benchmarks/served_gpu.py render "$REPORT" >"$OUT/served-paths.md" 2>/dev/null
    (cd "$WORK" && find . -maxdepth 2 \( -name '*.log' -o -name '*.folded' -o -name 'startup-*.txt' \) \
        -size -40M | tar -czf "$OUT/logs.tar.gz" -T - 2>/dev/null)
    return 0
}

step=${1:-}
case "$step" in
pack)
    extra=${2:?usage: pack EXTRA_DIR}
    rm -rf "$CARRY" && mkdir -p "$CARRY/stage"
    cp -al build/spec-0.9-vllm-0.26/wheelhouse "$CARRY/stage/wh-served"
    cp build/spec-0.9-vllm-0.26/manifest.json "$CARRY/stage/wh-served/"
    mkdir "$CARRY/stage/extra" && cp "$extra"/*.whl "$CARRY/stage/extra/"
    tar -C "$CARRY/stage" -cf "$CARRY/wheelhouses.tar" wh-served extra && rm -rf "$CARRY/stage"
    .nox/build/bin/patchwheel split --size 60MiB "$CARRY" wheelhouses.tar
    ls -la "$CARRY"
    ;;
carry)
    # Out of the checkout at once: the next call's carry replaces these paths.
    mkdir -p "$PARTS"
    for f in "$CARRY"/wheelhouses.tar.* "$CARRY"/parts.json "$CARRY"/join.py; do
        [ -f "$f" ] && cp "$f" "$PARTS"/
    done
    ls -la "$PARTS"
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
    ;;
setup)
    python3 "$PARTS/join.py" "$PARTS" || exit 1
    rm -rf "$ROOT/unpacked" && mkdir -p "$ROOT/unpacked"
    tar -C "$ROOT/unpacked" -xf "$PARTS/wheelhouses.tar" && rm -rf "$PARTS" || exit 1
    (cd "$ROOT/unpacked/wh-served" && python3 join.py) || exit 1
    python3 benchmarks/served_gpu.py setup --wheelhouse "$ROOT/unpacked/wh-served" --work "$WORK" \
        --upstream-speculators "$(ls "$ROOT"/unpacked/extra/speculators-*.whl)" \
        --py-spy "$(ls "$ROOT"/unpacked/extra/py_spy-*.whl)"
    ;;
run)
    shape=${2:-bench}
    sides=${3:-prefill,offline,served}
    clients=${4:-target,upstream}
    timeout "${SECONDS_LIMIT:-570}" python3 benchmarks/served_gpu.py run --work "$WORK" \
        --shape "$shape" --sides "$sides" --clients "$clients" --report "$REPORT" --profile \
        ${EXTRA_ARGS:-}
    status=$?
    pkill -f 'vllm.entrypoints.cli.main serve' 2>/dev/null
    bring_back
    exit $status
    ;;
*)
    echo "usage: $0 pack EXTRA|carry|setup|run SHAPE SIDES [CLIENTS]" >&2
    exit 2
    ;;
esac
