#!/usr/bin/env bash
# The gateway's CPU per session with a pcm16 backend next to a v2 one:
# the same N devices streaming Opus both ways (the load generator, real
# time), the same mock backend turns (20 uplink frames, then a 20-frame
# reply, over and over), once with framing v2 (Opus relayed) and once
# with pcm16 (every uplink packet decoded, every downlink frame encoded by
# the gateway). Prints the gateway's CPU (utime + stime from /proc over
# the steady window) per session and the ratio. Everything on 127.0.0.1.
#
#   bench/pcm16_cpu.sh BUILD_DIR [N]     N sessions (default 50)
#   BENCH_SECONDS=30 bench/pcm16_cpu.sh build/mine 100
#
# BUILD_DIR holds a RelWithDebInfo build (gateway/hybridgw and
# tools/hybridgw-sim); a sanitizer build measures the sanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:?usage: bench/pcm16_cpu.sh BUILD_DIR [N]}
n=${2:-50}
seconds=${BENCH_SECONDS:-25}
gw=$build/gateway/hybridgw
sim=$build/tools/hybridgw-sim
hz=$(getconf CLK_TCK)

. scripts/lib.sh
tmp=$GW_TMP

cpu_ticks() { # PID: utime + stime
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# run FRAMING: writes "ticks elapsed_s" of the steady window to
# $tmp/FRAMING/result (in this shell, so that cleanup knows every pid).
run() {
    local framing=$1 dir=$tmp/$1
    mkdir -p "$dir"
    local bp wp up
    bp=$("$sim" free-port)
    wp=$("$sim" free-port)
    up=$("$sim" free-port --udp)
    printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\nmax_queued_messages 10000\nlog_dest stderr\nlog_type information\n' \
        "$bp" >"$dir/mosquitto.conf"
    mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
    local mq=$!
    GW_PIDS+=("$mq")
    wait_for_ready "$mq" "$dir/mosquitto.log" "listen socket on port $bp" ||
        exit 1
    "$sim" backend --listen "127.0.0.1:$wp" --framing "$framing" \
        --events "$dir/backend.events" --turn-frames 20 --tts-frames 20 \
        --no-decode --log-level warn 2>"$dir/backend.log" &
    local be=$!
    GW_PIDS+=("$be")
    wait_for_ready "$be" "$dir/backend.events" '"ev":"ready"' || exit 1
    cat >"$dir/gw.json" <<EOF
{ "instance": "bench",
  "mqtt": { "host": "127.0.0.1", "port": $bp },
  "udp": { "bind": "127.0.0.1", "port": $up, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock", "framing": "$framing",
    "url": "ws://127.0.0.1:$wp/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "port": 0 },
  "limits": { "max_sessions": 100000 },
  "log": { "level": "info" } }
EOF
    "$gw" -c "$dir/gw.json" 2>"$dir/gw.log" &
    local g=$!
    GW_PIDS+=("$g")
    wait_for_ready "$g" "$dir/gw.log" 'broker link up' || exit 1
    local ramp=$((n > 200 ? 200 : n))
    local ramp_s=$(((n + ramp - 1) / ramp + 2))
    "$sim" load --devices "$n" --ramp "$ramp" --duration "$seconds" \
        --mode realtime --broker "127.0.0.1:$bp" --subscribing \
        --publish-topic 'devices/{client_id}/up' --no-decode \
        --stats-json "$dir/load.json" >"$dir/load.out" 2>&1 &
    local load=$!
    GW_PIDS+=("$load")
    sleep "$ramp_s"
    local t0 c0 t1 c1
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$g")
    sleep $((seconds - ramp_s - 2))
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$g")
    wait "$load" || echo "bench: load exited $? (see $dir/load.out)" >&2
    kill -TERM "$g" "$be" "$mq"
    wait "$g" "$be" "$mq" 2>/dev/null || true
    if grep -q 'pcm16: ' "$dir/gw.log"; then
        echo "bench: transcoding trouble in $dir/gw.log" >&2
    fi
    echo "$((c1 - c0)) $(echo "$t1 - $t0" | bc) $(jq -r \
        '"\(.devices.ok)/\(.devices.requested)"' "$dir/load.json")" \
        >"$dir/result"
}

declare -A per_session
for framing in v2 pcm16; do
    run "$framing"
    read -r ticks secs ok <"$tmp/$framing/result"
    # CPU seconds per wall second, per session, in percent of one core.
    per_session[$framing]=$(echo "scale=4; $ticks * 100 / $hz / $secs / $n" | bc)
    printf '%-6s %d sessions: gateway CPU %s %% of a core per session (%d ticks over %.1f s; devices ok %s)\n' \
        "$framing" "$n" "${per_session[$framing]}" "$ticks" "$secs" "$ok"
done
echo "pcm16 / v2: $(echo "scale=2; ${per_session[pcm16]} / ${per_session[v2]}" | bc)"
