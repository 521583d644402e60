#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz (each fuzz_<name>.c) for a chosen
# time, one after the other, each on a copy of its seed corpus outside the
# tree. Prints per target its executions, coverage (cov, ft), corpus size and
# any crash, leak, timeout or out-of-memory input; exits 1 on a finding.
#
#   scripts/fuzz.sh [-b BUILD_DIR] [-w WORK_DIR] [-r RUNS] [-n] [SECONDS] [TARGET...]
#
# SECONDS per target: the argument, else FUZZ_SECONDS, else 60. -r stops a
# target after RUNS executions if that comes first. TARGETs are short names
# (udp_header) or globs (mcp_*), run in the order given; none means all.
# The build dir is build/fuzz (built by scripts/build.sh fuzz) unless -b
# names another, which is configured as a fuzz build if it is not one yet;
# -n skips the build. The work dir (default a new temporary one) keeps each
# target's grown corpus and artifacts: WORK_DIR/<name>/corpus,
# WORK_DIR/<name>/crash-* etc., and its log WORK_DIR/<name>/fuzz.log.
set -euo pipefail

# All in one function, read whole before it runs: editing this file while
# a long run goes on does not change what that run does.
main() {
    local self
    self=$(realpath "$0")
    cd "$(dirname "$self")/.."
    root=$PWD

    usage() {
        sed -n '2,/^set -e/{/^#/s/^# \{0,1\}//p}' "$self" >&2
        exit 2
    }

    build_dir=build/fuzz
    work=""
    runs=""
    build=1
    while getopts "b:w:r:nh" opt; do
        case $opt in
        b) build_dir=$OPTARG ;;
        w) work=$OPTARG ;;
        r) runs=$OPTARG ;;
        n) build=0 ;;
        *) usage ;;
        esac
    done
    shift $((OPTIND - 1))
    seconds=${FUZZ_SECONDS:-60}
    if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
        seconds=$1
        shift
    fi
    if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds == 0)); then
        usage
    fi
    [ -z "$runs" ] || [[ $runs =~ ^[0-9]+$ ]] || usage
    case $build_dir in
    /*) ;;
    *) build_dir=$root/$build_dir ;;
    esac

    if ((build)); then
        if [ "$build_dir" = "$root/build/fuzz" ]; then
            scripts/build.sh fuzz
        else
            if ! grep -qs '^GW_FUZZ:BOOL=ON' "$build_dir/CMakeCache.txt"; then
                CC=clang cmake -S . -B "$build_dir" -DGW_FUZZ=ON -DGW_TESTS=OFF \
                    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
            fi
            cmake --build "$build_dir" -j"$(nproc)"
        fi
    fi

    # Every target in the tree, or those the arguments pick, in their order.
    all=()
    for src in tests/fuzz/fuzz_*.c; do
        name=$(basename "$src" .c)
        all+=("${name#fuzz_}")
    done
    targets=()
    if [ $# -eq 0 ]; then
        targets=("${all[@]}")
    fi
    for want in "$@"; do
        for name in "${all[@]}"; do
            # shellcheck disable=SC2053 # a glob on purpose
            if [[ $name == ${want#fuzz_} && " ${targets[*]} " != *" $name "* ]]; then
                targets+=("$name")
            fi
        done
    done
    if [ ${#targets[@]} -eq 0 ]; then
        echo "fuzz: no target matches $*" >&2
        exit 2
    fi

    if [ -z "$work" ]; then
        work=$(mktemp -d "${TMPDIR:-/tmp}/gw-fuzz.XXXXXX")
    fi
    mkdir -p "$work"
    work=$(cd "$work" && pwd)
    case $work/ in
    "$root"/*)
        echo "fuzz: the work dir must be outside the tree" >&2
        exit 2
        ;;
    esac
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

    echo "fuzz: ${#targets[@]} targets, ${seconds}s each${runs:+ or $runs runs}," \
        "work dir $work"
    printf '%-16s %12s %8s %8s %8s %9s %s\n' target executions cov ft corpus \
        seconds findings
    findings=0
    for name in "${targets[@]}"; do
        bin=$build_dir/tests/fuzz/fuzz_$name
        dir=$work/$name
        mkdir -p "$dir/corpus"
        if [ -d "tests/fuzz/corpus/$name" ]; then
            cp -rn "tests/fuzz/corpus/$name/." "$dir/corpus/"
        fi
        if [ ! -x "$bin" ]; then
            printf '%-16s %s\n' "$name" "not built ($bin)"
            findings=$((findings + 1))
            continue
        fi
        log=$dir/fuzz.log
        start=$(date +%s)
        rc=0
        "$bin" -max_total_time="$seconds" ${runs:+-runs="$runs"} -timeout=10 \
            -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" \
            "$dir/corpus" >"$log" 2>&1 || rc=$?
        took=$(($(date +%s) - start))
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        # The last status line: "#N <event> cov: C ft: F corp: ...".
        # None when it crashed on a seed: nothing to read, not an error here.
        status_line=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" |
            tail -1 || true)
        cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<<"$status_line")
        ft=$(sed -nE 's/.* ft: ([0-9]+) .*/\1/p' <<<"$status_line")
        corpus=$(find "$dir/corpus" -type f | wc -l)
        found=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o \
            -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
        what=none
        if [ -n "$found" ]; then
            what=$(tr '\n' ' ' <<<"$found")
        elif ((rc != 0)); then
            what="exit status $rc, see $log"
        fi
        [ "$what" = none ] || findings=$((findings + 1))
        printf '%-16s %12s %8s %8s %8s %9s %s\n' "$name" "${execs:-?}" \
            "${cov:-?}" "${ft:-?}" "$corpus" "$took" "$what"
    done
    echo "fuzz: $findings of ${#targets[@]} targets with findings; logs in $work"
    ((findings == 0))
}

main "$@"
