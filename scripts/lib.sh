# Shell helpers shared by scripts/demo.sh, bench/run.sh and the integration
# tests (through tests/integration/lib.sh): a temporary directory and the
# background processes are cleaned up on exit, and every wait is a bounded
# poll for an event (a log line, an answer, an exit), never a fixed sleep.
# GW_KEEP=1 keeps the temporary directory.
# shellcheck shell=bash disable=SC2034 # EXIT_CODE and such are for callers

GW_TMP=$(mktemp -d)
GW_PIDS=() # stopped on exit, with every background job of the script
# The bound of a wait that names none. Generous: it only costs time when
# something is broken, and a loaded two-core machine is slow.
GW_WAIT_S=${GW_WAIT_S:-60}

# gw_note TEXT...: a diagnostic line, a comment in TAP output.
gw_note() {
    printf '# %s\n' "$*" >&2
}

# show_tail FILE [LINES]: the end of a peer's output, for a failure.
show_tail() {
    if [ -s "$1" ]; then
        gw_note "last lines of $1:"
        tail -n "${2:-40}" "$1" | sed 's/^/#   /' >&2
    else
        gw_note "$1: nothing written"
    fi
}

# Stops what the script started: SIGTERM, a bounded grace, then SIGKILL,
# so that a process ignoring SIGTERM cannot hang the exit.
gw_cleanup() {
    local pid deadline
    local pids=("${GW_PIDS[@]}")
    # shellcheck disable=SC2207 # pids are numbers
    pids+=($(jobs -p))
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    deadline=$((SECONDS + 10))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.05
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ -n "${GW_KEEP:-}" ]; then
        gw_note "$(basename "$0"): kept $GW_TMP"
    else
        rm -rf "$GW_TMP"
    fi
}
trap gw_cleanup EXIT

# wait_until SECONDS CMD...: true once CMD succeeds (polled every 50 ms),
# false after SECONDS (GW_WAIT_S when empty). GW_DEADLINE, a value of
# SECONDS, caps every wait when set: a test whose steps fail one after
# another then still reports them before its runner's own timeout.
wait_until() {
    # SECONDS counts whole seconds: one more makes the bound a minimum.
    local deadline=$((SECONDS + ${1:-$GW_WAIT_S} + 1))
    if [ -n "${GW_DEADLINE:-}" ] && ((deadline > GW_DEADLINE)); then
        deadline=$GW_DEADLINE
    fi
    shift
    until "$@"; do
        if ((SECONDS >= deadline)); then
            return 1
        fi
        sleep 0.05
    done
}

# count_lines FILE REGEX: how many lines of FILE match the ERE.
count_lines() {
    local n
    n=$(grep -cE -- "$2" "$1" 2>/dev/null) || true
    echo "${n:-0}"
}

# has_lines FILE REGEX N: true when N lines of FILE match the ERE.
has_lines() {
    (($(count_lines "$1" "$2") >= $3))
}

# wait_for_lines FILE REGEX N [SECONDS]: true once N lines of FILE match,
# counting those written before the call; on a timeout, says so and shows
# the end of FILE.
wait_for_lines() {
    local what="/$2/"
    if wait_until "${4:-}" has_lines "$1" "$2" "$3"; then
        return 0
    fi
    if (($3 > 1)); then
        what="$3 lines of $what"
    fi
    gw_note "timed out after ${4:-$GW_WAIT_S} s waiting for $what in $1"
    show_tail "$1"
    return 1
}

# wait_for_line FILE REGEX [SECONDS]: true once a line of FILE matches.
wait_for_line() {
    wait_for_lines "$1" "$2" 1 "${3:-}"
}

# ready_or_gone PID FILE REGEX N: true once N lines of FILE match or PID
# has exited.
ready_or_gone() {
    has_lines "$2" "$3" "$4" || gone "$1"
}

# wait_for_ready PID FILE REGEX [N] [SECONDS]: true once N (1) lines of
# FILE match, the line a process started in the background writes when it
# is ready; false at once if it exits first, as one that cannot start does.
wait_for_ready() {
    local pid=$1 file=$2 re=$3 n=${4:-1}
    wait_until "${5:-}" ready_or_gone "$pid" "$file" "$re" "$n" || true
    if has_lines "$file" "$re" "$n"; then
        return 0
    fi
    if gone "$pid"; then
        gw_note "pid $pid exited before it wrote /$re/ to $file"
    else
        gw_note "timed out after ${5:-$GW_WAIT_S} s waiting for /$re/ in $file"
    fi
    show_tail "$file"
    return 1
}

# answers URL: true when URL answers 2xx.
answers() {
    curl -fsS -o /dev/null --max-time 5 "$1" 2>/dev/null
}

# wait_for_http URL [SECONDS]: true once URL answers 2xx.
wait_for_http() {
    if wait_until "${2:-}" answers "$1"; then
        return 0
    fi
    gw_note "timed out after ${2:-$GW_WAIT_S} s waiting for $1 to answer"
    return 1
}

# has_json FILE FILTER: true when a JSON line of FILE makes FILTER true
# (lines that are not JSON are skipped).
has_json() {
    jq -R "fromjson? | select($2)" "$1" 2>/dev/null | grep -q .
}

# wait_for_jq FILE FILTER [SECONDS]: true once a JSON line of FILE makes
# FILTER true; on a timeout, says so and shows the end of FILE.
wait_for_jq() {
    if wait_until "${3:-}" has_json "$1" "$2"; then
        return 0
    fi
    gw_note "timed out after ${3:-$GW_WAIT_S} s waiting for a line of $1" \
        "with: $2"
    show_tail "$1"
    return 1
}

# gone PID: true once the process has exited.
gone() {
    ! kill -0 "$1" 2>/dev/null
}

# wait_for_exit PID [SECONDS]: true once PID has exited; sets EXIT_CODE
# (its status, when it is a child of this shell).
wait_for_exit() {
    if ! wait_until "${2:-}" gone "$1"; then
        gw_note "timed out after ${2:-$GW_WAIT_S} s waiting for pid $1 to exit"
        return 1
    fi
    EXIT_CODE=0
    wait "$1" 2>/dev/null || EXIT_CODE=$?
}

# stop_pid PID [SECONDS]: SIGTERM and a bounded wait, SIGKILL after it;
# sets EXIT_CODE; false if it had to be killed.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    if wait_for_exit "$1" "${2:-}"; then
        return 0
    fi
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    EXIT_CODE=137
    return 1
}

# gateway_stats [PID LOG]: asks the gateway (GW_PID, GW_LOG by default)
# for its counters (SIGUSR1) and prints the line it logs.
gateway_stats() {
    local pid=${1:-$GW_PID} log=${2:-$GW_LOG} before
    before=$(count_lines "$log" '\[stats\]')
    kill -USR1 "$pid" || return 1
    wait_for_lines "$log" '\[stats\]' $((before + 1)) || return 1
    grep '\[stats\]' "$log" | tail -n 1
}
