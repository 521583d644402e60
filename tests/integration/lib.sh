# Shared helpers for the shell integration tests: bounded waits on events
# (a log line, a process exit) instead of fixed sleeps, and TAP-like output.
set -u

GW_TEST_FAILS=0
GW_TEST_PASSES=0
GW_TEST_TMP=$(mktemp -d)
trap 'gw_test_cleanup' EXIT

gw_test_cleanup() {
    local pids
    pids=$(jobs -p)
    if [ -n "$pids" ]; then
        kill $pids 2>/dev/null || true
        wait 2>/dev/null || true
    fi
    rm -rf "$GW_TEST_TMP"
}

ok() {
    GW_TEST_PASSES=$((GW_TEST_PASSES + 1))
    echo "ok - $*"
}

not_ok() {
    GW_TEST_FAILS=$((GW_TEST_FAILS + 1))
    echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# wait_for_line FILE REGEX [SECONDS]: true once FILE has a matching line.
wait_for_line() {
    local file=$1 re=$2 limit=${3:-10}
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if grep -qE "$re" "$file" 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "# timed out waiting for /$re/ in $file" >&2
    sed 's/^/# /' "$file" >&2 || true
    return 1
}

# wait_for_exit PID [SECONDS]: true once PID is gone; sets EXIT_CODE.
wait_for_exit() {
    local pid=$1 limit=${2:-10}
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            EXIT_CODE=$?
            return 0
        fi
        sleep 0.05
    done
    return 1
}

finish() {
    echo "$GW_TEST_PASSES passed, $GW_TEST_FAILS failed"
    [ "$GW_TEST_FAILS" -eq 0 ]
}
