#!/usr/bin/env bash
# One GPU session for both generations (reports/gpu/NEXT.md): the vllm-0.26 target (speculators
# 0.3.0, issue 22: the user's job) and the spec-0.9-vllm-0.26 target (speculators 0.9.0 served,
# issue 21). Both wheelhouses travel in one tar, the files they share (vLLM's wheel above all)
# once. `pack` runs here; every other step runs on the GPU machine from the repository root
# (the device tool's working copy), with the machine's own python3 (its CUDA torch), copies
# what it produced to $OUT and exits with the session's own status.
#
#   PYTHON=.nox/tests/bin/python bash reports/gpu/next-session.sh pack   # here: build/gpu-carry
#   bash reports/gpu/next-session.sh facts        # after the first carry: machine facts
#   bash reports/gpu/next-session.sh parts        # after each carry: what has arrived
#   bash reports/gpu/next-session.sh userjob      # vllm-0.26: speculators' own scripts
#   bash reports/gpu/next-session.sh throughput   # vllm-0.26: the user's job end to end
#   bash reports/gpu/next-session.sh served [FAMILIES] [STAGES]   # spec-0.9-vllm-0.26
#   bash reports/gpu/next-session.sh correctness  # vllm-0.26: llama against both oracles
set -uo pipefail

# The machine's temporary folder ($TMPDIR, else where mktemp puts its files): each step is its
# own device call, so the steps find one another's files there.
TMP=${TMPDIR:-$(dirname "$(mktemp -u)")}

CARRY=build/gpu-carry
ROOT=$TMP/pw-wheelhouse
WORK=$TMP/pw-gpu
SERVED_WORK=$TMP/pw-served
REPORT=$WORK/verify-gpu.json
SERVED_REPORT=$SERVED_WORK/verify-gpu-served.json
OUT=${OUT:-$TMP/pw-out}

session() {  # session SECONDS TARGET WHEELHOUSE WORK ARGS…: killed (SIGTERM) after SECONDS
    local seconds=$1 target=$2 wh=$3 work=$4
    shift 4
    PYTHONUNBUFFERED=1 timeout "$seconds" env PYTHONPATH=src python3 -m patchwheel.verify.gpu \
        --target "$target" --wheelhouse "$wh" --manifest-dir "$wh" --use-system-torch \
        --work-dir "$work" "$@"
}

bring_back() {  # the reports, and every log in one archive ($OUT takes at most 8 files)
    mkdir -p "$OUT"
    cp "$WORK"/verify-gpu*.json "$WORK"/verify-gpu*.md "$SERVED_WORK"/verify-gpu*.json \
        "$SERVED_WORK"/verify-gpu*.md "$OUT"/ 2>/dev/null
    (cd "$TMP" && find pw-gpu pw-served -name '*.log' -size -20M 2>/dev/null \
        | tar -czf "$OUT/logs.tar.gz" -T - 2>/dev/null)
    return 0
}

unpack() {
    # Join the carried parts of wheelhouses.tar (sha256-checked), unpack both wheelhouses, join
    # the vLLM wheel's own parts in each (every wheel checked against its SHA256SUMS).
    if [ -f "$ROOT/wh/INSTALL.txt" ] && [ ! -f "$CARRY/wheelhouses.tar.001" ]; then
        return 0  # unpacked by an earlier step on this machine
    fi
    python3 "$CARRY/join.py" "$CARRY" || return 1
    rm -rf "$ROOT" && mkdir -p "$ROOT"
    tar -C "$ROOT" -xf "$CARRY/wheelhouses.tar" && rm -f "$CARRY"/wheelhouses.tar* || return 1
    (cd "$ROOT/wh" && python3 join.py) && (cd "$ROOT/wh-served" && python3 join.py)
}

step=${1:-}
case "$step" in
pack)
    # Here, after `nox -s build` and `nox -s wheelhouse` of both targets (NEXT.md section 1).
    SPECULATORS_GIT=${SPECULATORS_GIT:?set SPECULATORS_GIT to a git clone of speculators (its v0.3.0 tag)}
    rm -rf "$CARRY" && mkdir -p "$CARRY/extra/scripts" "$CARRY/stage"
    for f in data_generation_offline.py build_vocab_mapping.py train.py; do
        git -C "$SPECULATORS_GIT" show "v0.3.0:scripts/$f" >"$CARRY/extra/scripts/$f" || exit 1
    done
    cp -al build/vllm-0.26/wheelhouse "$CARRY/stage/wh"
    cp build/vllm-0.26/manifest.json "$CARRY/stage/wh/"
    mkdir "$CARRY/stage/wh-served"
    for f in build/spec-0.9-vllm-0.26/wheelhouse/*; do
        name=$(basename "$f")
        if [ -f "$CARRY/stage/wh/$name" ] && [ "$name" != INSTALL.txt ] \
            && cmp -s "$f" "$CARRY/stage/wh/$name"; then
            ln "$CARRY/stage/wh/$name" "$CARRY/stage/wh-served/$name"  # stored once in the tar
        else
            cp "$f" "$CARRY/stage/wh-served/$name"
        fi
    done
    cp build/spec-0.9-vllm-0.26/manifest.json "$CARRY/stage/wh-served/"
    tar -C "$CARRY/stage" -cf "$CARRY/wheelhouses.tar" wh wh-served && rm -rf "$CARRY/stage"
    PYTHONPATH=src "${PYTHON:-python3}" -m patchwheel split --size 60MiB "$CARRY" wheelhouses.tar || exit 1
    ls -la "$CARRY" "$CARRY/extra/scripts"
    ;;
facts)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)"
    df -h /dev/shm "$TMP" . ; free -g ; nproc
    ls -la "$CARRY"
    ;;
parts)
    ls -la "$CARRY"
    ;;
userjob)
    unpack || exit 1
    session 560 vllm-0.26 "$ROOT/wh" "$WORK" --report "$REPORT" --stages userjob \
        --speculators-scripts "$CARRY/extra/scripts"
    status=$?
    bring_back
    exit $status
    ;;
throughput)
    unpack || exit 1
    session 570 vllm-0.26 "$ROOT/wh" "$WORK" --report "$REPORT" --stages throughput \
        --baselines default --profile
    status=$?
    bring_back
    exit $status
    ;;
served)
    unpack || exit 1
    families=${2:-llama,qwen3,qwen3_moe,deepseek_v3}
    stages=${3:-throughput,training,correctness}
    session "${SECONDS_LIMIT:-570}" spec-0.9-vllm-0.26 "$ROOT/wh-served" "$SERVED_WORK" --report "$SERVED_REPORT" \
        --stages "$stages" --families "$families" --extraction-eager \
        --generator-report "${GENERATOR_REPORT:-$REPORT}"
    status=$?
    bring_back
    exit $status
    ;;
correctness)
    unpack || exit 1
    session 570 vllm-0.26 "$ROOT/wh" "$WORK" --report "$REPORT" --stages correctness \
        --families llama
    status=$?
    bring_back
    exit $status
    ;;
*)
    echo "usage: $0 pack|facts|parts|userjob|throughput|served [FAMILIES] [STAGES]|correctness" >&2
    exit 2
    ;;
esac
