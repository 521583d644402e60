#!/usr/bin/env bash
# Sets up the machine and runs every test: the ctest suite plainly, again
# under ASan+UBSan, then each fuzz target for a bounded time. Ends with one
# line "tests: N passed, N failed" summing the three runs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

logs=build/test-logs
mkdir -p "$logs"
jobs=$(nproc)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
run_suite() { # flavour
    local flavour=$1
    echo "== $flavour: build"
    scripts/build.sh "$flavour"
    echo "== $flavour: ctest"
    (cd "build/$flavour" &&
        ctest --output-on-failure -j"$jobs" --timeout 600) |
        tee "$logs/$flavour.log" || status=1
}

run_suite plain
run_suite asan
run_suite fuzz

passed=0
failed=0
for f in "$logs"/plain.log "$logs"/asan.log "$logs"/fuzz.log; do
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$f" || true)
    if [ -z "$line" ]; then
        echo "no ctest summary in $f" >&2
        status=1
        continue
    fi
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    bad=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
    passed=$((passed + total - bad))
    failed=$((failed + bad))
done
if ((failed > 0)); then
    status=1
fi
echo "tests: $passed passed, $failed failed"
exit "$status"
