#!/usr/bin/env bash
# Installs every Debian 12 package hybridgw needs to build, test and run the
# demo. Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(
    build-essential cmake pkg-config git ca-certificates
    clang libclang-rt-14-dev clang-format
    libuv1-dev libmosquitto-dev libcjson-dev libssl-dev openssl libopus-dev
    libwebsockets-dev libwebsockets-evlib-uv libcmocka-dev uthash-dev
    mosquitto mosquitto-clients mosquitto-dev jq
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
        grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "setup: all ${#packages[@]} packages present"
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
