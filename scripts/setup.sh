#!/usr/bin/env bash
# Installs every Debian 12 package hybridgw needs to build, test and run the
# demo (postgresql: the bindings store's tests start a server of their own), and the npm packages of the MCP tests (tests/mcp) and of the
# operator page's browser test (tests/web, which drives Debian's Chromium).
# Safe to run again: it installs only what is missing or stale.
# GW_SETUP_NODE=0 skips the Node.js part and Chromium, as does a tree
# without tests/mcp (the image build, which copies this script alone).
set -euo pipefail

mcp_dir=$(cd "$(dirname "$0")/.." && pwd)/tests/mcp
web_dir=$(dirname "$mcp_dir")/web
node_wanted=${GW_SETUP_NODE:-1}
if [ ! -f "$mcp_dir/package-lock.json" ]; then
    node_wanted=0
fi

packages=(
    build-essential cmake pkg-config git ca-certificates
    clang libclang-rt-14-dev clang-format
    libuv1-dev libmosquitto-dev libcjson-dev libssl-dev openssl nettle-dev libopus-dev
    libwebsockets-dev libwebsockets-evlib-uv libcmocka-dev uthash-dev
    libcurl4-openssl-dev libsqlite3-dev libpq-dev
    mosquitto mosquitto-clients mosquitto-dev jq curl
    postgresql
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
        grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
# Debian's Node.js for the MCP tests; a node and npm already on the PATH
# (another distribution of them) will do as well. The page's test runs
# Debian's Chromium headless (playwright-core downloads no browser).
if [ "$node_wanted" = 1 ]; then
    command -v node >/dev/null || missing+=(nodejs)
    if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null |
        grep -q 'install ok installed'; then
        missing+=(chromium)
    fi
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi
apt_updated=0
apt_install() {
    echo "setup: installing $*"
    if [ "$apt_updated" = 0 ]; then
        "${sudo[@]}" apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
        --no-install-recommends "$@" >/dev/null
}

if ((${#missing[@]} == 0)); then
    echo "setup: all packages present"
else
    apt_install "${missing[@]}"
    echo "setup: done"
fi
# Debian's nodejs comes without npm; other builds of nodejs bundle it and
# conflict with Debian's npm package, so it is asked for only if missing.
if [ "$node_wanted" = 1 ] && ! command -v npm >/dev/null; then
    apt_install npm
fi

# The MCP SDK, exactly as tests/mcp/package-lock.json pins it; installed
# again whenever the lock file changes.
if [ "$node_wanted" = 1 ]; then
    stamp=$mcp_dir/node_modules/.hybridgw-lock.sha256
    want=$(sha256sum "$mcp_dir/package-lock.json" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
        echo "setup: npm ci in tests/mcp"
        (cd "$mcp_dir" && npm ci --no-audit --no-fund --loglevel=error)
        echo "$want" >"$stamp"
    else
        echo "setup: tests/mcp node modules up to date"
    fi
fi

# playwright-core for the operator page's test, as tests/web/package-lock.json
# pins it; a tree without tests/web skips it.
if [ "$node_wanted" = 1 ] && [ -f "$web_dir/package-lock.json" ]; then
    stamp=$web_dir/node_modules/.hybridgw-lock.sha256
    want=$(sha256sum "$web_dir/package-lock.json" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
        echo "setup: npm ci in tests/web"
        (cd "$web_dir" && npm ci --no-audit --no-fund --loglevel=error)
        echo "$want" >"$stamp"
    else
        echo "setup: tests/web node modules up to date"
    fi
fi
