#!/usr/bin/env bash
# Checks the layering rules of docs/architecture.md section 1: the pure and
# lower layers never include gateway/, only main.c, instance.c and tests
# include instance.h, uthash comes through common/hash.h, nothing in
# gateway/ or broker/ exits or aborts, and gateway/ modules include each
# other without cycles. Prints each broken rule; exits 1 if any.
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

hits=$(grep -nE '(^|[^_a-z])(exit|abort|_exit)\(' gateway/*.c broker/*.c |
    grep -v '^gateway/main.c' || true)
if [ -n "$hits" ]; then
    fail "exit/abort on a runtime condition:"$'\n'"$hits"
fi

# The module of a gateway file: files that share a prefix form one module;
# mcp_peers (the records a device keeps of who listens to it, and the
# routing of its notifications to them) is part of the device table;
# device calls join sessions and are part of the session module.
module_of() {
    local stem=${1%.*}
    case $stem in
    device_table | mcp_peers) echo device_table ;;
    mcp_server*) echo mcp_server ;;
    udp_* | ssrc_table) echo udp ;;
    backend_*) echo backend ;;
    http_server* | http_request) echo http_server ;;
    http_api*) echo http_api ;;
    session* | counters | device_call) echo session ;;
    *) echo "$stem" ;;
    esac
}
edges=""
for f in gateway/*.[ch]; do
    from=$(module_of "$(basename "$f")")
    for inc in $(sed -n 's|^#include "gateway/\([a-z_]*\.h\)".*|\1|p' "$f"); do
        to=$(module_of "$inc")
        [ "$from" = "$to" ] || edges+="$to $from"$'\n'
    done
done
if ! out=$(printf '%s' "$edges" | tsort 2>&1 >/dev/null); then
    fail "a cycle between gateway/ modules:"$'\n'"$out"
elif [ -n "$out" ]; then
    fail "a cycle between gateway/ modules:"$'\n'"$out"
fi
exit "$bad"
