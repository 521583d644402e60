#!/usr/bin/env bash
# hybridgw benchmark: N devices streaming Opus both ways through the
# gateway (real mosquitto, mock backend and load generator on 127.0.0.1).
# Measures gateway CPU per relayed packet (from /proc), added latency
# (device send -> backend receive, backend send -> device receive, from
# both sides' packet logs), loss, and gateway RSS per session; writes
# bench/REPORT.md.
#
#   bench/run.sh [N ...]          default: 100 1000
#   BENCH_SECONDS=40 bench/run.sh  streaming time per run (default 30)
#   BENCH_PERF=/tmp/gw.perf         also profile the gateway over the steady
#                                  window (perf record -g; one file per N)
set -euo pipefail
cd "$(dirname "$0")/.."

counts=("$@")
if ((${#counts[@]} == 0)); then
    counts=(100 1000)
fi
seconds=${BENCH_SECONDS:-30}

scripts/setup.sh >/dev/null
scripts/build.sh plain >/dev/null
gw=build/plain/gateway/hybridgw
sim=build/plain/tools/hybridgw-sim
floor_bin=build/plain/bench/loopback_floor
hz=$(getconf CLK_TCK)
rows=()

. scripts/lib.sh
tmp=$GW_TMP

cpu_ticks() { # PID: utime + stime
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}

rss_kb() {
    awk '/^VmRSS/ { print $2 }' "/proc/$1/status"
}

# The gateway's relayed audio packets so far (both directions).
relayed() { # PID LOG
    local before
    before=$(grep -c '\[stats\]' "$2" || true)
    kill -USR1 "$1"
    until (($(grep -c '\[stats\]' "$2" || true) > before)); do
        sleep 0.05
    done
    grep '\[stats\]' "$2" | tail -n 1 |
        sed -E 's/.*audio_up=([0-9]+) audio_down=([0-9]+).*/\1 \2/' |
        awk '{ print $1 + $2 }'
}

# percentiles FILE: "p50 p99 max" of one number per line, in ms.
percentiles() {
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- - -"; exit }
        p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]
        p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
        printf "%.3f %.3f %.3f\n", p50 / 1000, p99 / 1000, v[NR] / 1000 }'
}

run_one() {
    local n=$1 dir=$tmp/n$1
    mkdir -p "$dir"
    local bp wp up
    bp=$("$sim" free-port)
    wp=$("$sim" free-port)
    up=$("$sim" free-port --udp)
    printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\nmax_queued_messages 10000\nlog_dest stderr\nlog_type information\n' \
        "$bp" >"$dir/mosquitto.conf"
    mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
    GW_PIDS+=($!)
    wait_for "$dir/mosquitto.log" "listen socket on port $bp"
    "$sim" backend --listen "127.0.0.1:$wp" --events "$dir/backend.events" \
        --turn-frames 20 --tts-frames 20 --no-decode --log-level warn \
        --latency-log "$dir/backend.csv" 2>"$dir/backend.log" &
    local be=$!
    GW_PIDS+=("$be")
    wait_for "$dir/backend.events" '"ev":"ready"'
    cat >"$dir/gw.json" <<EOF
{ "instance": "bench",
  "mqtt": { "host": "127.0.0.1", "port": $bp },
  "udp": { "bind": "127.0.0.1", "port": $up, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
    "url": "ws://127.0.0.1:$wp/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "port": 0 },
  "limits": { "max_sessions": 100000 },
  "log": { "level": "info" } }
EOF
    "$gw" -c "$dir/gw.json" 2>"$dir/gw.log" &
    local g=$!
    GW_PIDS+=("$g")
    wait_for "$dir/gw.log" 'broker link up'
    local rss0
    rss0=$(rss_kb "$g")

    local ramp=$((n > 200 ? 200 : n))
    local ramp_s=$(((n + ramp - 1) / ramp + 2))
    "$sim" load --devices "$n" --ramp "$ramp" --duration "$seconds" \
        --mode realtime --broker "127.0.0.1:$bp" --subscribing \
        --publish-topic 'devices/{client_id}/up' --no-decode \
        --stats-json "$dir/load.json" --packet-log "$dir/device.csv" \
        >"$dir/load.out" 2>&1 &
    local load=$!
    GW_PIDS+=("$load")
    sleep "$ramp_s"
    local t0 c0 r0 t1 c1 r1 rss1
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$g")
    r0=$(relayed "$g" "$dir/gw.log")
    if [[ -n ${BENCH_PERF:-} ]]; then
        perf record -F 1000 -g -p "$g" -o "$BENCH_PERF.$n" \
            -- sleep $((seconds - ramp_s - 2)) >/dev/null 2>&1
    else
        sleep $((seconds - ramp_s - 2))
    fi
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$g")
    r1=$(relayed "$g" "$dir/gw.log")
    rss1=$(rss_kb "$g")
    wait "$load" || echo "bench: load exited $? (see $dir/load.out)" >&2
    kill -TERM "$g" "$be"
    wait "$g" "$be" 2>/dev/null || true

    local packets=$((r1 - r0))
    local us_per_packet pps cpu_pct
    us_per_packet=$(echo "scale=3; ($c1 - $c0) * 1000000 / $hz / $packets" | bc)
    pps=$(echo "scale=0; $packets / ($t1 - $t0)" | bc)
    cpu_pct=$(echo "scale=1; ($c1 - $c0) * 100 / $hz / ($t1 - $t0)" | bc)

    # Join the packet logs: uplink by (uuid, sequence), downlink likewise.
    awk -F, '
        FNR == 1 { file++ }
        file == 1 { split($2, p, "@@@"); key = p[3] "," $1 "," $3
                    t[key] = $4; next }
        { key = $4 "," $1 "," $5
          if (key in t) {
              d = ($1 == "up") ? $6 - t[key] : t[key] - $6
              print d > (dirout "/lat_" $1) } }
    ' dirout="$dir" "$dir/device.csv" "$dir/backend.csv"
    local up_sent up_recv down_sent down_recv
    up_sent=$(grep -c '^up,' "$dir/device.csv" || true)
    up_recv=$(grep -c '^up,' "$dir/backend.csv" || true)
    down_sent=$(grep -c '^down,' "$dir/backend.csv" || true)
    down_recv=$(grep -c '^down,' "$dir/device.csv" || true)
    read -r up50 up99 upmax < <(percentiles "$dir/lat_up")
    read -r dn50 dn99 dnmax < <(percentiles "$dir/lat_down")
    local rss_per
    rss_per=$(echo "scale=1; ($rss1 - $rss0) / $n" | bc)
    local ok
    ok=$(jq -r '"\(.devices.ok)/\(.devices.requested)"' "$dir/load.json")
    # The same uplink rate through a relay that does nothing but read the
    # datagrams and write each to one of n TCP connections.
    local floor
    floor=$("$floor_bin" --conns "$n" --rate $((n * 1000 / 60)) \
        --seconds $((seconds < 12 ? seconds : 12)) | jq -r .us_per_packet)
    rows+=("| $n | $ok | $pps | $cpu_pct % | **$us_per_packet** | $floor | $up50 / **$up99** / $upmax | $dn50 / $dn99 / $dnmax | $((up_sent - up_recv)) of $up_sent | $((down_sent - down_recv)) of $down_sent | $rss_per |")
    echo "bench: $n sessions: ${us_per_packet} us/packet, up p99 ${up99} ms, loss up $((up_sent - up_recv)) down $((down_sent - down_recv)), ${rss_per} KiB/session"
}

for n in "${counts[@]}"; do
    run_one "$n"
done

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
{
    echo "# hybridgw benchmark"
    echo
    echo "Generated by \`bench/run.sh ${counts[*]}\` (BENCH_SECONDS=$seconds) on $(date -u +%Y-%m-%d)."
    echo
    echo "Machine: $(nproc) cores ($cpu), $(free -g | awk '/^Mem/ { print $2 }') GiB,"
    echo "Linux $(uname -r); everything on 127.0.0.1: mosquitto $(mosquitto -h 2>/dev/null | head -n 1 | awk '{ print $3 }'),"
    echo "the gateway, \`hybridgw-sim backend\` and \`hybridgw-sim load\` share the cores."
    echo
    echo "Each device streams 60 ms Opus frames up without pause (realtime mode)"
    echo "and the backend answers every 20 frames with 20 frames of TTS, paced as"
    echo "the xiaozhi server paces them, so audio flows both ways at once."
    echo
    echo "| sessions | ok | packets/s through the gateway | gateway CPU | CPU us per relayed packet | loopback floor us per packet | uplink added latency ms p50 / p99 / max | downlink latency ms p50 / p99 / max | uplink lost | downlink lost | gateway RSS KiB per session |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "- CPU: utime+stime of the gateway from /proc over the steady window,"
    echo "  divided by the audio packets it relayed in that window (its own"
    echo "  counters, both directions)."
    echo "- Loopback floor: bench/loopback_floor relays the same uplink rate"
    echo "  with no gateway logic at all (recvmmsg with the gateway's 2 ms read"
    echo "  pause, then one send() per datagram on one of N TCP connections to"
    echo "  a reader process) and reports its CPU per packet the same way. On"
    echo "  loopback the sender also pays for delivering each TCP segment (the"
    echo "  receiver's protocol work and wakeup run in its send() call), so"
    echo "  this is what the kernel alone costs on this machine."
    echo "- Latency: device send to backend receive (uplink) and backend send"
    echo "  to device receive (downlink), joined from both sides' packet logs;"
    echo "  this includes the loopback hops and the mock's and load generator's"
    echo "  own scheduling, so it bounds what the gateway adds from above."
    echo "  Downlink includes the gateway's pacing, which holds nothing back"
    echo "  while the backend paces itself."
    echo "- Targets: at most 3 us of gateway CPU per relayed packet, p99 added"
    echo "  latency under 2 ms at 1000 sessions, zero loss."
    if [[ -f bench/NOTES.md ]]; then
        echo
        cat bench/NOTES.md
    fi
} >bench/REPORT.md
cat bench/REPORT.md
