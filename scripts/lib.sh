# Shell helpers shared by scripts/demo.sh and bench/run.sh: processes
# started in the background are stopped on exit, and readiness is a
# bounded wait for the line a process writes when it is ready. GW_KEEP=1
# keeps the logs of a run.

GW_TMP=$(mktemp -d)
GW_PIDS=()

gw_cleanup() {
    local pid
    for pid in "${GW_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [[ -n ${GW_KEEP:-} ]]; then
        echo "$(basename "$0"): kept $GW_TMP" >&2
    else
        rm -rf "$GW_TMP"
    fi
}
trap gw_cleanup EXIT

# wait_for FILE REGEX [SECONDS]: exits the script if the line never comes.
wait_for() {
    local deadline=$((SECONDS + ${3:-10}))
    until grep -qE "$2" "$1" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            echo "$(basename "$0"): timed out waiting for /$2/ in $1" >&2
            cat "$1" >&2 || true
            exit 1
        fi
        sleep 0.05
    done
}
