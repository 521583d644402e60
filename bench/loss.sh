#!/usr/bin/env bash
# hybridgw on a lossy network: devices streaming Opus both ways through
# bench/impair_relay (seeded loss, jitter and reorder of UDP, both ways)
# beside a clean link, counting at each step what the network delivered,
# what the backend received (uplink) and what a device that applies the
# firmware's downlink rule accepted and played. Prints a Markdown table;
# bench/LOSS.md holds the figures and what they decided.
#
#   bench/loss.sh                  every profile, LOSS_RUNS times each
#   LOSS_PROFILES="clean:0:0:0 lossy:5:20:1"   name:loss %:jitter ms:reorder %
#   LOSS_RUNS=3 LOSS_DEVICES=50 LOSS_SECONDS=40
#   LOSS_GW=path/to/hybridgw       another gateway binary (a previous build)
#   LOSS_HOLD_MS="60 200"          in-order holds whose latency cost is
#                                  computed from the relay's delivery log
#   LOSS_JITTER=independent        jitter reorders datagrams sent closer
#                                  together than it (default: it does not)
#   LOSS_OUT=file                  also write the table there
#
# Needs root (ip netns). Layout as bench/run.sh's: the gateway and
# mosquitto in one namespace, the devices and the backend each in their
# own. The gateway's UDP socket is bound to 127.0.0.1 of its namespace and
# advertises the relay (udp.public_host/public_port), which listens on the
# devices' veth: only UDP audio is impaired; MQTT and the backend's
# WebSocket go straight.
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
    echo "loss.sh: needs root (network namespaces)" >&2
    exit 1
fi
read -r -a profiles <<<"${LOSS_PROFILES:-clean:0:0:0 lossy:5:20:1 lossier:10:20:1}"
runs=${LOSS_RUNS:-3}
devices=${LOSS_DEVICES:-50}
seconds=${LOSS_SECONDS:-40}
read -r -a holds <<<"${LOSS_HOLD_MS:-60 200}"

scripts/setup.sh >/dev/null
scripts/build.sh plain >/dev/null
gw=${LOSS_GW:-build/plain/gateway/hybridgw}
sim=build/plain/tools/hybridgw-sim
relay_bin=build/plain/bench/impair_relay

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. bench/lib.sh
tmp=$GW_TMP
# shellcheck disable=SC2034 # read by bench/lib.sh
net=netns
bench_netns_up hbloss hl

metric() { # FILE NAME [REASON]
    if [[ -n ${3:-} ]]; then
        awk -v k="$2{reason=\"$3\"}" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$1"
    else
        awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$1"
    fi
}

pct() { # PART WHOLE
    awk -v p="$1" -v w="$2" 'BEGIN { printf "%.2f", (w > 0 ? 100 * p / w : 0) }'
}

# hold_cost LOG MS: what holding uplink in order would have cost, from the
# relay's delivery log (dir,ssrc,sequence,unix_us): each stream released
# in sequence order, a missing packet awaited at most MS after the first
# later one arrived. Prints "share-delayed p50 p99 max lost-late" (delays
# in ms over all delivered packets, delayed or not; lost-late: delivered
# packets that came after the hold gave up on them).
hold_cost() {
    grep '^up,' "$1" | sort -t, -k2,2 -k3,3n |
        awk -F, -v T="$(($2 * 1000))" '
        function flush(   j, p, g, rel, late, dl) {
            if (n == 0) return
            # suffix minimum of arrivals: when the first later one came
            suf[hi + 1] = 1e30
            for (j = hi; j >= lo; j--) {
                suf[j] = suf[j + 1]
                if ((j in a) && a[j] < suf[j]) suf[j] = a[j]
            }
            p = 0
            for (j = lo; j <= hi; j++) {
                g = suf[j + 1] + T
                if (j in a) {
                    if (a[j] <= g || a[j] <= p) {
                        rel = a[j] > p ? a[j] : p
                        dl = (rel - a[j]) / 1000
                        print dl > out
                        if (rel > p) p = rel
                    } else {
                        late++
                        if (g > p) p = g
                    }
                } else if (g < 1e29 && g > p) {
                    p = g
                }
            }
            lost_late += late
            delete a; delete suf; n = 0
        }
        $2 != cur { flush(); cur = $2; lo = $3; n = 0 }
        { if (!($3 in a)) { a[$3] = $4; n++ }; hi = $3 }
        END { flush(); print lost_late + 0 > lateout }
        ' out="$tmp/hold.delays" lateout="$tmp/hold.late"
    sort -n "$tmp/hold.delays" | awk -v late="$(cat "$tmp/hold.late")" '
        { v[NR] = $1; if ($1 > 0) d++ }
        END { if (NR == 0) { print "- - - - -"; exit }
              i50 = int(NR * 0.5); if (i50 < 1) i50 = 1
              i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
              printf "%.2f %.1f %.1f %.1f %d\n", 100 * d / NR, v[i50],
                  v[i99], v[NR], late }'
}

rows=() hold_rows=()
run_one() { # NAME LOSS JITTER REORDER RUN
    local name=$1 loss=$2 jitter=$3 reorder=$4 r=$5
    local dir=$tmp/$name-$r
    mkdir -p "$dir"
    local bp wp up hp rp
    bp=$("${in_gw[@]}" "$sim" free-port)
    wp=$("${in_be[@]}" "$sim" free-port)
    up=$("${in_gw[@]}" "$sim" free-port --udp)
    rp=$("${in_gw[@]}" "$sim" free-port --udp)
    hp=$("${in_gw[@]}" "$sim" free-port)
    printf 'listener %s 0.0.0.0\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\nmax_queued_messages 10000\nlog_dest stderr\nlog_type information\n' \
        "$bp" >"$dir/mosquitto.conf"
    "${in_gw[@]}" mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
    local mq=$!
    GW_PIDS+=("$mq")
    wait_for_ready "$mq" "$dir/mosquitto.log" "listen socket on port $bp" || exit 1
    # 20 uplink frames make a turn, answered with 200 frames (12 s) of TTS.
    "${in_be[@]}" "$sim" backend --listen "$be_ip:$wp" \
        --events "$dir/backend.events" \
        --turn-frames 20 --tts-frames 200 --no-decode --log-level warn \
        --latency-log "$dir/backend.csv" 2>"$dir/backend.log" &
    local be=$!
    GW_PIDS+=("$be")
    wait_for_ready "$be" "$dir/backend.events" '"ev":"ready"' || exit 1
    local jmode=()
    [[ ${LOSS_JITTER:-} == independent ]] && jmode=(--independent)
    "${in_gw[@]}" "$relay_bin" --listen "$gw_ip:$rp" --to "127.0.0.1:$up" \
        --loss "$loss" --jitter-ms "$jitter" --reorder "$reorder" \
        --seed "$r" "${jmode[@]}" --stats "$dir/relay.json" \
        --log "$dir/relay.csv" >"$dir/relay.out" 2>&1 &
    local relay=$!
    GW_PIDS+=("$relay")
    wait_for_ready "$relay" "$dir/relay.out" '^ready' || exit 1
    cat >"$dir/gw.json" <<JSON
{ "instance": "loss",
  "mqtt": { "host": "127.0.0.1", "port": $bp },
  "udp": { "bind": "127.0.0.1", "port": $up, "public_host": "$gw_ip",
           "public_port": $rp },
  "backends": [ { "name": "mock",
    "url": "ws://$be_ip:$wp/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $hp, "token": "bench" },
  "log": { "level": "info" } }
JSON
    "${in_gw[@]}" "$gw" -c "$dir/gw.json" 2>"$dir/gw.log" &
    local g=$!
    GW_PIDS+=("$g")
    wait_for_ready "$g" "$dir/gw.log" 'broker link up' || exit 1
    "${in_dev[@]}" "$sim" load --devices "$devices" --ramp "$devices" \
        --duration "$seconds" --mode realtime --broker "$gw_ip:$bp" \
        --subscribing --publish-topic 'devices/{client_id}/up' --no-decode \
        --stats-json "$dir/load.json" >"$dir/load.out" 2>&1 ||
        { echo "loss.sh: load exited $?:"; tail -n 5 "$dir/load.out"; } >&2
    "${in_gw[@]}" curl -fsS -H 'Authorization: Bearer bench' \
        "http://127.0.0.1:$hp/metrics" >"$dir/metrics"
    kill -TERM "$relay" "$g" "$be" "$mq"
    wait "$relay" "$g" "$be" "$mq" 2>/dev/null || true

    local m=$dir/metrics
    local u_sent u_net u_gw_rx u_be u_replay u_ahead u_unknown u_late u_made
    u_sent=$(jq .uplink.packets "$dir/load.json")
    u_net=$(jq .up.delivered "$dir/relay.json")
    u_gw_rx=$(metric "$m" hybridgw_udp_received_total)
    u_be=$(grep -c '^up,' "$dir/backend.csv" || true)
    u_replay=$(metric "$m" hybridgw_udp_drops_total replay)
    u_ahead=$(metric "$m" hybridgw_udp_drops_total ahead)
    u_unknown=$(metric "$m" hybridgw_udp_drops_total unknown_ssrc)
    u_late=$(metric "$m" hybridgw_udp_late_accepted_total)
    # Gateway-made: delivered by the network, not received by the
    # backend, except what came after its device's goodbye had ended the
    # session (audio the device's own goodbye overtook on the clean path).
    u_made=$((u_net - u_be - u_unknown))
    local d_be d_gw d_net d_acc d_play d_strict d_made
    d_be=$(grep -c '^down,' "$dir/backend.csv" || true)
    d_gw=$(jq .down.received "$dir/relay.json")
    d_net=$(jq .down.delivered "$dir/relay.json")
    d_acc=$(jq .downlink.accepted "$dir/load.json")
    d_play=$(jq .downlink.played "$dir/load.json")
    d_strict=$(jq .downlink.drops.replay "$dir/load.json")
    d_made=$((d_be - d_gw))
    local ok
    ok=$(jq -r '"\(.devices.hellos_answered)/\(.devices.requested)"' "$dir/load.json")
    rows+=("| $name | $r | $ok | $u_sent | $u_net ($(pct $((u_sent - u_net)) "$u_sent") % lost) | $u_be | $u_replay / $u_ahead / $u_late | $u_unknown | **$u_made ($(pct "$u_made" "$u_net") %)** | $d_be | $d_gw | **$d_made ($(pct "$d_made" "$d_be") %)** | $d_net ($(pct $((d_gw - d_net)) "$d_gw") % lost) | $d_acc ($d_strict late) | $d_play ($(pct $((d_net - d_play)) "$d_net") % of delivered unplayed) |")
    local h
    for h in "${holds[@]}"; do
        hold_rows+=("| $name | $r | $h | $(hold_cost "$dir/relay.csv" "$h" | awk '{ printf "%s %% | %s / %s / %s | %s", $1, $2, $3, $4, $5 }') |")
    done
    echo "loss.sh: $name run $r: uplink delivered $u_net, read by the gateway $u_gw_rx, backend $u_be, gateway-made $u_made; downlink backend $d_be, gateway sent $d_gw, delivered $d_net, played $d_play" >&2
}

for r in $(seq 1 "$runs"); do
    for p in "${profiles[@]}"; do
        IFS=: read -r name loss jitter reorder <<<"$p"
        run_one "$name" "$loss" "$jitter" "$reorder" "$r"
    done
done

{
    echo "Generated by \`bench/loss.sh\` ($devices devices, ${seconds} s, $runs runs, jitter ${LOSS_JITTER:-in order}) on $(date -u +%Y-%m-%d), gateway $gw."
    echo
    echo "| profile | run | sessions | uplink sent | delivered by the network | received by the backend | gateway drops replay / ahead, late accepted | after goodbye | gateway-made uplink loss | downlink from the backend | sent by the gateway | gateway-made downlink loss | delivered by the network | accepted by the device (late dropped) | played |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Holding uplink to deliver it in order (computed from the relay's delivery log):"
    echo
    echo "| profile | run | hold ms | packets delayed | added delay ms p50 / p99 / max | delivered but too late for the hold |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${hold_rows[@]}"
} | tee "${LOSS_OUT:-/dev/null}"
