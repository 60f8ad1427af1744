#!/usr/bin/env bash
# The device side of reports/gpu/NEXT.md: one step per device call, run from the repository
# root on the GPU machine (the device tool's working copy), with the machine's own python3
# (its CUDA torch). Every step copies what it produced to $OUT (the device tool brings it
# back) and exits with the session's own status.
#
#   bash reports/gpu/next-session.sh facts          # after the first carry: machine facts
#   bash reports/gpu/next-session.sh parts          # after each carry: what has arrived
#   bash reports/gpu/next-session.sh userjob        # unpack + install + speculators' scripts
#   bash reports/gpu/next-session.sh throughput     # + the user's job end to end
#   bash reports/gpu/next-session.sh correctness    # llama against both oracles + training
#   bash reports/gpu/next-session.sh before-after   # optional: 0029's before/after on the GPU
set -uo pipefail

CARRY=build/gpu-carry
ROOT=/tmp/pw-wheelhouse
WH=$ROOT/wheelhouse
WORK=/tmp/pw-gpu
REPORT=$WORK/verify-gpu.json
OUT=${OUT:-/tmp/pw-out}
mkdir -p "$OUT"

session() {  # session SECONDS ARGS…: the GPU session, killed after SECONDS
    local seconds=$1
    shift
    timeout "$seconds" env PYTHONPATH=src python3 -m patchwheel.verify.gpu --target vllm-0.26 \
        --wheelhouse "$WH" --manifest-dir "$WH" --use-system-torch --work-dir "$WORK" "$@"
}

bring_back() {
    cp "$WORK"/verify-gpu*.json "$WORK"/verify-gpu*.md "$OUT"/ 2>/dev/null
    mkdir -p "$OUT/logs"
    for log in "$WORK"/*.log "$WORK"/bench/*.log "$WORK"/user-job/*.log; do
        [ -f "$log" ] && cp "$log" "$OUT/logs/"
    done
    return 0
}

unpack() {
    # Join the carried parts of wheelhouse.tar (sha256-checked), unpack, join the vLLM wheel's
    # own parts (every wheel's sha256 checked against the wheelhouse's SHA256SUMS).
    if [ -f "$WH/INSTALL.txt" ] && [ ! -f "$CARRY/wheelhouse.tar.001" ]; then
        return 0  # unpacked by an earlier step on this machine
    fi
    python3 "$CARRY/join.py" "$CARRY" || return 1
    rm -rf "$ROOT" && mkdir -p "$ROOT"
    tar -C "$ROOT" -xf "$CARRY/wheelhouse.tar" && rm -f "$CARRY/wheelhouse.tar" || return 1
    (cd "$WH" && python3 join.py) || return 1
    cp "$CARRY/extra/manifest.json" "$WH/"
}

step=${1:-}
case "$step" in
facts)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import torch, transformers, rich; print(torch.__version__, torch.version.cuda, transformers.__version__)"
    df -h /dev/shm /tmp . ; free -g ; nproc
    ls -la "$CARRY" "$CARRY/extra"/*
    ;;
parts)
    ls -la "$CARRY"
    ;;
userjob)
    unpack || exit 1
    session 540 --report "$REPORT" --stages userjob --speculators-scripts "$CARRY/extra/scripts"
    status=$?
    bring_back
    exit $status
    ;;
throughput)
    unpack || exit 1
    session 570 --report "$REPORT" --stages throughput --baselines default --profile
    status=$?
    bring_back
    exit $status
    ;;
correctness)
    unpack || exit 1
    session 570 --report "$REPORT" --stages correctness,training --families llama
    status=$?
    bring_back
    exit $status
    ;;
before-after)
    unpack || exit 1
    baseline=$(ls "$CARRY"/extra/baseline/speculators-*.whl)
    session 570 --report "$WORK/verify-gpu-before-after.json" --stages throughput \
        --baselines default --baseline-speculators "$baseline"
    status=$?
    bring_back
    exit $status
    ;;
*)
    echo "usage: $0 facts|parts|userjob|throughput|correctness|before-after" >&2
    exit 2
    ;;
esac
