#!/usr/bin/env bash
# Checks the layering rules of docs/architecture.md section 1: the pure and
# lower layers never include gateway/, only main.c, instance.c and tests
# include instance.h, uthash comes through common/hash.h, nothing in
# gateway/ or broker/ exits or aborts, and gateway/'s module folders form a
# stack. Prints each broken rule; exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."

bad=0
fail() {
    echo "layers: $*"
    bad=1
}

hits=$(grep -rln '#include "gateway/' common codec crypto config broker tools \
    --include='*.[ch]' || true)
for f in $hits; do
    fail "$f includes gateway/ (a lower layer must not)"
done

for f in $(grep -rl '#include "gateway/instance.h"' --include='*.[ch]' . |
    sed 's|^\./||'); do
    case $f in
    gateway/main.c | gateway/instance.c | tests/*) ;;
    build/*) ;;
    *) fail "$f includes instance.h (modules get a narrow environment)" ;;
    esac
done

for f in $(grep -rl '#include <uthash.h>' --include='*.[ch]' common codec \
    crypto config broker gateway tools tests bench || true); do
    [ "$f" = common/hash.h ] || fail "$f includes <uthash.h>: use common/hash.h"
done

hits=$(grep -nE '(^|[^_a-z])(exit|abort|_exit)\(' gateway/*.c gateway/*/*.c \
    broker/*.c | grep -v '^gateway/main.c' || true)
if [ -n "$hits" ]; then
    fail "exit/abort on a runtime condition:"$'\n'"$hits"
fi

# gateway/ is one folder per module plus the wiring on top (main, instance,
# mqtt_dispatch). A module folder includes its own files and other module
# folders, never the top's, and the folders include each other without a
# circle: they form a stack. A folder's *_int.h is private to it (tests may
# reach in to drive a pure piece).
for f in gateway/*.[ch]; do
    case $f in
    gateway/main.c | gateway/instance.[ch] | gateway/mqtt_dispatch.[ch]) ;;
    *) fail "$f sits at gateway/'s top: put it in its module's folder" ;;
    esac
done
edges=""
for f in gateway/*/*.[ch]; do
    from=$(basename "$(dirname "$f")")
    while read -r inc; do
        [ -n "$inc" ] || continue
        case $inc in
        */*)
            to=${inc%%/*}
            if [ "$to" != "$from" ]; then
                edges+="$to $from"$'\n'
                case $inc in
                *_int.h) fail "$f includes $to's private gateway/$inc" ;;
                esac
            fi
            ;;
        *) fail "$f includes gateway/$inc (the top; a module must not)" ;;
        esac
    done < <(sed -n 's|^#include "gateway/\([a-z_/]*\.h\)".*|\1|p' "$f")
done
for f in $(grep -rl '#include "gateway/[a-z]*/[a-z_]*_int.h"' \
    --include='*.[ch]' common codec crypto config broker tools bench \
    gateway/*.[ch] 2>/dev/null || true); do
    fail "$f includes a module's private header"
done
if ! out=$(printf "%s" "$edges" | sort -u | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    fail "a circle between gateway/ folders:"$'\n'"$out"
fi
exit "$bad"
