#!/usr/bin/env bash
# hybridgw fleet bench: N idle stock devices online through Mosquitto with
# the plugin, each discovered by the gateway, plus M streaming
# conversations; then a broker restart. Measures gateway and broker memory
# per idle device, the gateway's idle CPU, the time until the fleet is
# back, hello latency during that storm and the conversations' lost
# frames; writes one row at the top of bench/FLEET.md's first table.
#
#   bench/fleet.sh N                 N idle devices (default 2000)
#   FLEET_CONVERSATIONS=M            streaming conversations (default 20)
#   FLEET_IDLE_SECONDS=60            the idle window CPU is measured over
#   FLEET_RAMP=1000                  idle devices connecting per second
#   FLEET_PER_PROCESS=6000           idle devices per load process (each
#                                    costs it three descriptors)
#   FLEET_DEVICE_ARGS=               more options for the idle devices
#                                    (--mcp-extra-tools 3: eight tools)
#   FLEET_KEEPALIVE=240              the devices' MQTT keepalive (the
#                                    firmware's)
#   FLEET_DOWN_SECONDS=2             how long the broker stays away
#   FLEET_REINIT_WAIT=15             seconds to wait, once every device is
#                                    back, for the gateway's re-initialize
#   FLEET_REPORT=bench/FLEET.md      where the row goes
#   FLEET_OUT=out/fleet-N-TIME       raw output (kept; out/ is not tracked)
#
# Everything runs on 127.0.0.1 with the shipped configurations
# (deploy/mosquitto-hybridgw.conf, docker/hybridgw.json) and their secrets
# replaced; the descriptor limit is raised to the hard limit for all.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-2000}
m=${FLEET_CONVERSATIONS:-20}
idle_s=${FLEET_IDLE_SECONDS:-60}
ramp=${FLEET_RAMP:-1000}
per_process=${FLEET_PER_PROCESS:-6000}
read -r -a device_args <<<"${FLEET_DEVICE_ARGS:-}"
keepalive=${FLEET_KEEPALIVE:-240}
down_s=${FLEET_DOWN_SECONDS:-2}
reinit_wait=${FLEET_REINIT_WAIT:-15}
report=${FLEET_REPORT:-bench/FLEET.md}
out=${FLEET_OUT:-out/fleet-$n-$(date -u +%Y%m%dT%H%M%SZ)}
key=fleet-device-key gw_pass=fleet-gateway-secret

scripts/build.sh plain >/dev/null
sim=build/plain/tools/hybridgw-sim
gw=build/plain/gateway/hybridgw
plugin=$PWD/build/plain/broker/hybridgw_broker.so
hz=$(getconf CLK_TCK)
ulimit -n "$(ulimit -Hn)"

. scripts/lib.sh
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { echo "fleet: $*" >&2; }
now_ms() { date +%s%3N; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
metric() { # NAME: the gateway's value, 0 if absent
    curl -s --max-time 5 -H 'Authorization: Bearer fleet' \
        "http://127.0.0.1:$hp/metrics" |
        awk -v k="$1" 'index($0, k " ") == 1 { v = $NF } END { print v + 0 }'
}
# status FILTER: over the fleet's status, the processes' files added up
# (counts summed, times the latest).
status() {
    jq -s -r '{idle: (reduce (.[].idle | to_entries[]) as $e ({};
        .[$e.key] = if ($e.key | endswith("unix_ms"))
            then ([.[$e.key] // 0, $e.value] | max)
            else (.[$e.key] // 0) + $e.value end))} | '"$1" \
        "$out"/fleet.*.status 2>/dev/null || echo 0
}
fleet_is() { # FILTER: true when it holds for the fleet's status
    [[ $(status "$1") == true ]]
}
metric_at_least() { (($(metric "$1") >= $2)); }
listen_overflows() { nstat -az TcpExtListenOverflows | awk 'NR > 1 { print $2 }'; }
replies_sent() { (($(grep -c '"ev":"tts"' "$out/backend.events") >= $1)); }

bp=$("$sim" free-port)
wp=$("$sim" free-port)
up=$("$sim" free-port --udp)
hp=$("$sim" free-port)

# The shipped broker config: its limits, the plugin, its log; our port,
# plugin path and secrets. Mosquitto's max_connections is unlimited (-1)
# by default: said here so the bench shows it is not the limit.
sed -e "s|^listener 1883 0.0.0.0|listener $bp 127.0.0.1|" \
    -e "s|^plugin /.*|plugin $plugin|" \
    -e "s|^plugin_opt_device_key .*|plugin_opt_device_key $key|" \
    -e "s|^plugin_opt_gateway_password .*|plugin_opt_gateway_password $gw_pass|" \
    deploy/mosquitto-hybridgw.conf >"$out/mosquitto.conf"
printf 'max_connections -1\npersistence false\n' >>"$out/mosquitto.conf"
broker_log=$out/mosquitto.log
start_broker() {
    local before
    before=$(grep -c "listen socket on port $bp" "$broker_log" 2>/dev/null || true)
    mosquitto -c "$out/mosquitto.conf" >>"$broker_log" 2>&1 &
    broker=$!
    GW_PIDS+=("$broker")
    wait_for_ready "$broker" "$broker_log" "listen socket on port $bp" \
        $((before + 1))
}
start_broker || exit 1

"$sim" backend --listen "127.0.0.1:$wp" --events "$out/backend.events" \
    --turn-frames 20 --tts-frames 20 --no-decode --log-level warn \
    --latency-log "$out/backend.csv" 2>"$out/backend.log" &
backend=$!
GW_PIDS+=("$backend")
wait_for_ready "$backend" "$out/backend.events" '"ev":"ready"' || exit 1

# The shipped gateway config with our addresses and secrets.
jq --argjson bp "$bp" --argjson up "$up" --argjson hp "$hp" \
    --arg pass "$gw_pass" --arg be "ws://127.0.0.1:$wp/xiaozhi/v1/?from=mqtt_gateway" '
    .mqtt.host = "127.0.0.1" | .mqtt.port = $bp | .mqtt.password = $pass |
    .udp = { bind: "127.0.0.1", port: $up, public_host: "127.0.0.1",
             public_port: $up } |
    .backends[0].url = $be |
    .http = { listen: "127.0.0.1", port: $hp, token: "fleet" }' \
    docker/hybridgw.json >"$out/gw.json"
"$gw" -c "$out/gw.json" 2>"$out/gw.log" &
g=$!
GW_PIDS+=("$g")
wait_for_ready "$g" "$out/gw.log" 'broker link up' || exit 1
wait_for_http "http://127.0.0.1:$hp/healthz" || exit 1
gw_rss0=$(rss_kb "$g") br_rss0=$(rss_kb "$broker")

# The idle fleet: stock devices (device-server topic, no subscription,
# passwords derived from the device key as the OTA server hands them out),
# in processes of at most per_process devices sharing the ramp.
procs=$(((n + per_process - 1) / per_process))
say "$n idle devices in $procs processes, ramp $ramp/s, keepalive $keepalive s"
t_fleet=$(now_ms)
gc_fleet=$(cpu_ticks "$g")
fleet=()
for ((i = 0; i < procs; i++)); do
    k=$(((n - i * per_process) < per_process ? n - i * per_process : per_process))
    "$sim" load --idle-devices "$k" --ramp "$(echo "scale=3; $ramp / $procs" | bc)" \
        --duration 86400 --broker "127.0.0.1:$bp" --key "$key" \
        --keepalive "$keepalive" "${device_args[@]}" \
        --status-file "$out/fleet.$i.status" --stats-json "$out/fleet.$i.json" \
        --log-level warn >"$out/fleet.$i.out" 2>&1 &
    fleet+=($!)
    GW_PIDS+=($!)
done
settle=$((n / ramp + 120))
if ! wait_until "$settle" fleet_is ".idle.discovered == $n"; then
    say "not every device answered an initialize: $(status .idle)"
    exit 1
fi
# A discovery that timed out is not retried: the run goes on with what the
# gateway completed, and the details say how many.
wait_until 60 metric_at_least hybridgw_mcp_discoveries_total "$n" ||
    say "the gateway completed $(metric hybridgw_mcp_discoveries_total)" \
        "discoveries of $n"
gw_disc=$(metric hybridgw_mcp_discoveries_total)
discovery_s=$(status "(.idle.last_initialize_unix_ms - $t_fleet) / 1000")
# The gateway's CPU per device discovered (initialize, tools/list, its
# presence), from the fleet's first connect to the last discovery.
disc_ms=$(printf '%.3f' "$(echo "scale=4; ($(cpu_ticks "$g") - $gc_fleet) * 1000 / $hz / $n" | bc)")
say "all $n discovered $(printf '%.1f' "$discovery_s") s after the first connect"
sleep 3 # the last tools/list answers and their log lines
gw_rss1=$(rss_kb "$g") br_rss1=$(rss_kb "$broker") fleet_kb=0
for p in "${fleet[@]}"; do fleet_kb=$((fleet_kb + $(rss_kb "$p"))); done
fleet_mb=$((fleet_kb / 1024))

# The gateway's CPU with the whole fleet idle.
c0=$(cpu_ticks "$g") t0=$(date +%s.%N)
sleep "$idle_s"
c1=$(cpu_ticks "$g") t1=$(date +%s.%N)
idle_cpu=$(printf "%.2f" "$(echo "scale=4; ($c1 - $c0) * 100 / $hz / ($t1 - $t0)" | bc)")

# M conversations streaming across the broker restart: their audio goes
# over UDP and must not stop while the broker is away.
conv_s=$((m / 100 + down_s + reinit_wait + 40))
if ((m > 0)); then
    "$sim" load --devices "$m" --ramp 100 --duration "$conv_s" \
        --mode realtime --broker "127.0.0.1:$bp" --key "$key" --no-decode \
        --stats-json "$out/conv.json" --packet-log "$out/conv.csv" \
        >"$out/conv.out" 2>&1 &
    conv=$!
    GW_PIDS+=("$conv")
    wait_until $((m / 100 + 60)) metric_at_least hybridgw_sessions "$m" ||
        say "only $(metric hybridgw_sessions) of $m conversations began"
    # The mock backend answers each conversation once, early; the restart
    # comes once those replies are played, into steady streaming (a reply
    # whose "tts start" falls into the outage is lost: see FLEET.md).
    wait_until 60 replies_sent "$m" || say "not every first reply was sent"
fi
sleep 2

# The broker restarts (as systemctl restart: SIGTERM, then start).
say "broker restart"
lo0=$(listen_overflows)
kill -TERM "$broker"
wait_for_exit "$broker" || exit 1
sleep "$down_s"
start_broker || exit 1
t_back=$(now_ms)
# New conversations during the storm: their hellos, answered while the
# whole fleet reconnects and is rediscovered.
if ((m > 0)); then
    "$sim" load --devices "$m" --ramp "$((m * 2))" --duration 15 \
        --mode realtime --broker "127.0.0.1:$bp" --key "$key" --no-decode \
        --stats-json "$out/storm.json" >"$out/storm.out" 2>&1 &
    storm=$!
    GW_PIDS+=("$storm")
fi
# The gateway's own link back (its reconnect backoff): hellos sent before
# it has resubscribed are lost.
gw_link_s=-
if wait_for_lines "$out/gw.log" 'broker link up' 2; then
    link_ms=$(date -d "$(grep 'broker link up' "$out/gw.log" | tail -n 1 |
        cut -d' ' -f1)" +%s%3N)
    gw_link_s=$(printf '%.2f' "$(echo "scale=3; ($link_ms - $t_back) / 1000" | bc)")
fi
if ! wait_until $((n / 100 + 120)) fleet_is ".idle.reconnected == $n"; then
    say "not every device came back: $(status .idle)"
    exit 1
fi
back_s=$(status "(.idle.last_connect_unix_ms - $t_back) / 1000")
# CPU per device brought back: the new broker's (accept, the plugin's
# password check, presence; the conversations' few messages beside).
br_storm_ms=$(printf '%.3f' "$(echo "scale=4; $(cpu_ticks "$broker") * 1000 / $hz / $n" | bc)")
# Handshakes the kernel dropped on a full accept queue (Mosquitto listens
# with a backlog of 100): each waits out a TCP retransmission.
overflows=$(($(listen_overflows) - lo0))
# Re-initialized as new MCP sessions, once the gateway does it.
if wait_until "$reinit_wait" fleet_is ".idle.reinitialized == $n"; then
    back_s=$(status "(.idle.last_initialize_unix_ms - $t_back) / 1000")
fi
reinit_n=$(status .idle.reinitialized)
online_after=$(metric hybridgw_devices_online)
say "all $n back $(printf '%.2f' "$back_s") s after the broker," \
    "re-initialized $reinit_n"

storm_p99=- lost=-
if ((m > 0)); then
    wait_for_exit "$storm" 120 || true
    # Unanswered hellos count as the firmware's 10 s timeout: with more
    # than 1 % of them the p99 is past it.
    storm_p99=$(jq -r 'if .devices.hellos_answered < 0.99 * .devices.requested
        then ">10000" else .hello_latency_ms.p99 * 10 | round / 10 end' \
        "$out/storm.json")
    storm_ok=$(jq -r '"\(.devices.hellos_answered)/\(.devices.requested)"' \
        "$out/storm.json")
    wait_for_exit "$conv" $((conv_s + 120)) || true
    stop_pid "$backend" || true # its packet log complete
    # Uplink frames the backend never got, by (device uuid, sequence),
    # plus downlink frames the devices saw missing from the sequence.
    up_lost=$(awk -F, 'FNR == 1 { file++ }
        file == 1 && $1 == "up" { split($2, p, "@@@"); sent[p[3] "," $3] = 1; n++; next }
        file == 2 && $1 == "up" && (($4 "," $5) in sent) { got++ }
        END { print n - got }' "$out/conv.csv" "$out/backend.csv")
    down_lost=$(jq -r .downlink.lost "$out/conv.json")
    lost=$((up_lost + down_lost))
    conv_ok=$(jq -r '"\(.devices.ok)/\(.devices.requested)"' "$out/conv.json")
fi
for p in "${fleet[@]}"; do
    kill -TERM "$p"
    wait_for_exit "$p" 120 || true
done

gw_per=$(printf '%.1f' "$(echo "scale=2; ($gw_rss1 - $gw_rss0) / $n" | bc)")
br_per=$(printf '%.1f' "$(echo "scale=2; ($br_rss1 - $br_rss0) / $n" | bc)")
row="| $n | $m | $gw_per | $br_per | $idle_cpu | $(printf '%.2f' "$back_s") | $storm_p99 | $lost |"
detail="| $n | $(date -u +%F) | $(git rev-parse --short HEAD) | $keepalive | $ramp | $idle_s | $(printf '%.2f' "$discovery_s") | $gw_disc/$n | $reinit_n/$n | $online_after | $gw_link_s | $overflows | ${storm_ok:--} | ${conv_ok:--} | $disc_ms | $br_storm_ms | $fleet_mb | \`$(basename "$out")\` |"
echo "$row"
echo "$detail"

# The row goes right under the header of the first table, the detail line
# under the second's (the run-details table).
awk -v row="$row" -v detail="$detail" '
    { print }
    /^\|[- |]+\|$/ && !done { tables++
        if (tables == 1) print row
        if (tables == 2) { print detail; done = 1 } }' "$report" >"$out/report.md"
cp "$out/report.md" "$report"
say "row written to $report; raw output in $out"
