#!/usr/bin/env bash
# Configures and builds one flavour of the tree into build/<flavour>:
#   plain (default), asan (ASan+UBSan), fuzz (clang + libFuzzer targets).
# -Werror is on when CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=${1:-plain}
werror=OFF
if [ "${CI:-}" = true ]; then
    werror=ON
fi
jobs=$(nproc)

case "$flavour" in
plain)
    cmake -S . -B build/plain -DGW_WERROR="$werror" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    ;;
asan)
    cmake -S . -B build/asan -DGW_WERROR="$werror" -DGW_SANITIZE=ON \
        -DCMAKE_BUILD_TYPE=Debug >/dev/null
    ;;
fuzz)
    CC=clang cmake -S . -B build/fuzz -DGW_WERROR="$werror" -DGW_FUZZ=ON \
        -DGW_TESTS=OFF -DGW_FUZZ_SECONDS="${GW_FUZZ_SECONDS:-10}" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    ;;
*)
    echo "usage: $0 [plain|asan|fuzz]" >&2
    exit 2
    ;;
esac
cmake --build "build/$flavour" -j"$jobs"
