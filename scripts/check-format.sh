#!/usr/bin/env bash
# Fails if any C file of the tree differs from .clang-format's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files -co --exclude-standard -- '*.c' '*.h' 2>/dev/null ||
    find common gateway codec crypto config broker tools tests bench \
        -name '*.[ch]' 2>/dev/null)
bad=0
for f in $files; do
    [ -f "$f" ] || continue
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run clang-format -i $f)"
        bad=1
    fi
done
exit "$bad"
