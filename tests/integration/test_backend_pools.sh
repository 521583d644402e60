#!/usr/bin/env bash
# Backend pools (docs/protocol.md section 6.1) on real parts: mosquitto,
# three mock backends and a silent one on 127.0.0.1, a port where nothing
# listens, the gateway, simulated devices. Each strategy's distribution
# over many sessions, sticky routing when an unrelated backend leaves,
# failover inside the device's patience (connect refused, no hello), a
# backend killed and brought back, all backends down, and what /healthz
# and /metrics say meanwhile, ping/pong on idle connections, the active
# probe.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

N=${POOL_DEVICES:-300} # sessions per distribution run

start_broker broker || bail "the broker starts"
be_args=(--turn-frames 5 --tts-frames 5 --no-decode)
start_backend a "${be_args[@]}"
a_port=$BACKEND_PORT a_pid=$BACKEND_PID a_events=$BACKEND_EVENTS
start_backend b "${be_args[@]}"
b_port=$BACKEND_PORT b_pid=$BACKEND_PID b_events=$BACKEND_EVENTS
start_backend c "${be_args[@]}"
c_port=$BACKEND_PORT c_pid=$BACKEND_PID c_events=$BACKEND_EVENTS
start_backend silent --no-hello
silent_port=$BACKEND_PORT silent_events=$BACKEND_EVENTS
dead_port=$(free_port) # nothing listens there

url() { echo "ws://127.0.0.1:$1/xiaozhi/v1/?from=mqtt_gateway"; }
cfg=$GW_TMP/gw.json
udp_port=$(free_port --udp)
http_port=$(free_port)
# gw_config STRATEGY: the config, with that strategy on the main route
# (and PROBE_S as health.probe_interval_s, 0 when unset).
gw_config() {
    cat >"$cfg" <<JSON
{
  "instance": "pools",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10 },
  "udp": { "bind": "127.0.0.1", "port": $udp_port, "public_host": "127.0.0.1" },
  "backends": [
    { "name": "a", "url": "$(url "$a_port")", "weight": 1 },
    { "name": "b", "url": "$(url "$b_port")", "weight": 1 },
    { "name": "c", "url": "$(url "$c_port")", "weight": 2 },
    { "name": "silent", "url": "$(url "$silent_port")" },
    { "name": "dead", "url": "$(url "$dead_port")" }
  ],
  "routes": [
    { "match": { "groups": ["GID_fo"] },
      "backends": ["dead", "silent", "b"] },
    { "match": { "groups": ["GID_none"] }, "backends": ["dead", "silent"] },
    { "match": { "groups": ["GID_live"] }, "backends": ["a"] },
    { "match": {}, "backends": ["a", "b", "c"], "strategy": "$1" }
  ],
  "http": { "port": $http_port },
  "limits": { "backend_hello_timeout_ms": 1500, "max_sessions": 2000 },
  "health": { "backoff_ms": 300, "backoff_max_ms": 1000, "ping_interval_s": 2,
              "probe_interval_s": ${PROBE_S:-0} },
  "log": { "level": "info" }
}
JSON
}
gw_config ordered
start_gateway gw "$cfg" || bail "the gateway starts"
wait_for_http "http://127.0.0.1:$http_port/healthz" || bail "the API answers"
peer_log "$GW_TMP/devices.err"

# reload STRATEGY: the main route's strategy changes on SIGHUP.
n_reload=0
reload() {
    gw_config "$1"
    n_reload=$((n_reload + 1))
    kill -HUP "$GW_PID"
    wait_until 10 reloaded "$n_reload" || bail "the gateway reloads"
}
reloaded() { [ "$(grep -c 'reloaded .*gw.json' "$GW_LOG")" -ge "$1" ]; }

connects() { grep -c '"ev":"connect"' "$1"; }
# counts: "a b c" connections so far.
counts() { echo "$(connects "$a_events") $(connects "$b_events") $(connects "$c_events")"; }

# load N: N devices (GID_test: the main route), one turn each; sets
# LOAD to its JSON stats and SPLIT to the connections each backend got.
load() {
    local before after
    read -r -a before <<<"$(counts)"
    "$SIM" load --devices "$1" --broker "127.0.0.1:$BROKER_PORT" --subscribing \
        --publish-topic 'devices/{client_id}/up' --turns 1 --fast --ramp 0 \
        --duration 60 --stats-json "$GW_TMP/load.json" >"$GW_TMP/load.out" 2>&1
    LOAD_RC=$?
    peer_log "$GW_TMP/load.out"
    LOAD=$(cat "$GW_TMP/load.json")
    # A backend writes its connect event on the upgrade, before the hello.
    read -r -a after <<<"$(counts)"
    SPLIT="$((after[0] - before[0])) $((after[1] - before[1])) $((after[2] - before[2]))"
    echo "# $1 sessions: a b c = $SPLIT"
}
# answered N: the load's N devices each got one valid server hello and
# completed their turn. (Not its exit status: under a loaded machine a
# reply's first frame can overtake its tts start, which the firmware
# drops; test_data_plane covers audio.)
answered() {
    check "$1 hellos answered, one each (exit $LOAD_RC)" jq_is "$LOAD" \
        '.devices.hellos_answered == '"$1"' and .devices.hello_duplicate == 0
         and .devices.hello_invalid == 0 and .turns == '"$1" true
}
# within X LO HI
within() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }

n_dev=0
# new_id GROUP: sets ID to a fresh client id in that group.
new_id() {
    n_dev=$((n_dev + 1))
    ID=$(printf '%s@@@02_00_00_01_%02x_%02x@@@dev-%d' "$1" $((n_dev / 256)) \
        $((n_dev % 256)) "$n_dev")
}
device() { plain_device "$@"; }

echo "# 1. ordered (the default): every session to the first backend"
load "$N"
answered "$N"
check "all went to a" test "$SPLIT" = "$N 0 0"

echo "# 2. weighted 1:1:2"
reload weighted
load "$N"
read -r na nb nc <<<"$SPLIT"
answered "$N"
check "every session reached one backend" test $((na + nb + nc)) -eq "$N"
# Expected N/4, N/4, N/2; a binomial's sd is under sqrt(N)/2: 4 sd.
tol=$(awk -v n="$N" 'BEGIN { printf "%d", 2 * sqrt(n) + 1 }')
check "a got about a quarter ($na)" within "$na" $((N / 4 - tol)) $((N / 4 + tol))
check "b got about a quarter ($nb)" within "$nb" $((N / 4 - tol)) $((N / 4 + tol))
check "c got about a half ($nc)" within "$nc" $((N / 2 - tol)) $((N / 2 + tol))

echo "# 3. least active: all at once, spread by active sessions per weight"
reload least
load "$N"
read -r na nb nc <<<"$SPLIT"
answered "$N"
check "every session reached one backend" test $((na + nb + nc)) -eq "$N"
# Sessions overlap only partly: each backend got a fair part, c most.
check "a and b got a fair part ($na, $nb)" \
    test "$na" -ge $((N / 8)) -a "$nb" -ge $((N / 8))
check "c got the most ($nc)" test "$nc" -ge "$na" -a "$nc" -ge "$nb"

echo "# 4. sticky: a device stays on its backend; only c's devices move"
reload sticky
sticky_ids=()
for i in $(seq 1 24); do
    new_id GID_test
    sticky_ids+=("$ID")
done
# run_sticky TAG: one conversation per id, in parallel; prints
# "device-id backend" per id.
run_sticky() {
    local tag=$1 pids=() i=0
    for id in "${sticky_ids[@]}"; do
        device "$id" --turns 1 --fast >"$GW_TMP/sticky-$tag-$i.json" &
        pids+=($!)
        i=$((i + 1))
    done
    wait "${pids[@]}"
    for i in "${!sticky_ids[@]}"; do
        jq -e .ok "$GW_TMP/sticky-$tag-$i.json" >/dev/null || echo "FAILED $i"
    done
}
where() { # ID: the backend its latest connection went to
    local mac
    mac=$(cut -d@ -f4 <<<"$1" | tr _ :)
    for be in a b c; do
        ev=${be}_events
        grep '"ev":"connect"' "${!ev}" | grep -q "\"device-id\":\"$mac\"" &&
            grep '"ev":"connect"' "${!ev}" | grep "\"device-id\":\"$mac\"" |
            tail -n 1 | jq -r .t | sed "s/\$/ $be/"
    done | sort -n | tail -n 1 | cut -d' ' -f2
}
failed=$(run_sticky one)
check "all sticky devices complete" test -z "$failed"
declare -A first
for id in "${sticky_ids[@]}"; do first[$id]=$(where "$id"); done
echo "# first: $(printf '%s\n' "${first[@]}" | sort | uniq -c | tr '\n' ' ')"
failed=$(run_sticky two)
same=0
for id in "${sticky_ids[@]}"; do
    [ "$(where "$id")" = "${first[$id]}" ] && same=$((same + 1))
done
check "all complete again" test -z "$failed"
check "every device came back to the same backend ($same)" \
    test "$same" -eq "${#sticky_ids[@]}"
stop_pid "$c_pid"
failed=$(run_sticky three)
check "with c gone all complete" test -z "$failed"
kept=0 moved=0 wrong=0
for id in "${sticky_ids[@]}"; do
    now=$(where "$id")
    if [ "${first[$id]}" = c ]; then
        [ "$now" != c ] && moved=$((moved + 1)) || wrong=$((wrong + 1))
    elif [ "$now" = "${first[$id]}" ]; then
        kept=$((kept + 1))
    else
        wrong=$((wrong + 1))
    fi
done
echo "# kept $kept, moved $moved, wrong $wrong"
check "devices of a and b stayed, c's moved ($wrong otherwise)" test "$wrong" -eq 0
check "some devices were c's" test "$moved" -gt 0

echo "# 5. failover: connect refused, then no hello, then an answer"
new_id GID_fo
r=$(device "$ID" --turns 1 --fast --hello-timeout 10000)
device_ok "the device gets its hello within the firmware's 10 s" "$r"
check "from b, after dead and silent failed" \
    wait_for_line "$GW_LOG" "dev=$ID.*backend silent: no backend hello within"
check "one server hello only" jq_is "$r" .hellos 1
check "the silent backend's WebSocket was closed" \
    wait_for_line "$silent_events" '"ev":"close"'

metrics() { curl -s "http://127.0.0.1:$http_port/metrics"; }
# metric NAME{LABELS}: its value, 0 when absent.
metric() {
    metrics | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}
metric_ge() { [ "$(metric "$1")" -ge "$2" ]; }
check "/metrics counts dead's connect failures" \
    test "$(metric 'hybridgw_backend_failures_total{backend="dead",reason="connect"}')" -ge 1
check "and silent's missed hellos" \
    test "$(metric 'hybridgw_backend_failures_total{backend="silent",reason="hello_timeout"}')" -ge 1
check "and b's hello latency" \
    test "$(metric 'hybridgw_backend_hello_seconds_count{backend="b"}')" -ge 1
check "b is up" test "$(metric 'hybridgw_backend_state{backend="b",state="up"}')" -eq 1
check "dead is down" \
    test "$(metric 'hybridgw_backend_state{backend="dead",state="up"}')" -eq 0
# Audio each way per backend: the conversations of sections 1-5 spoke to
# a, b and c; dead and silent never carried a frame.
for b in a b c; do
    check "$b's audio counted both ways" test \
        "$(metric "hybridgw_backend_audio_frames_total{backend=\"$b\",direction=\"to\"}")" -gt 0 -a \
        "$(metric "hybridgw_backend_audio_bytes_total{backend=\"$b\",direction=\"from\"}")" -gt 0
done
check "none to the backend that never said hello" \
    test "$(metric 'hybridgw_backend_audio_frames_total{backend="silent",direction="to"}')" -eq 0

echo "# 6. a backend killed mid-run"
reload weighted
# restart NAME PORT: the mock backend again on its port (new events
# file: sets RESTARTED_EVENTS), once it was killed.
restart() {
    RESTARTED_EVENTS=$GW_TMP/$1-again.events
    peer_log "$RESTARTED_EVENTS"
    "$SIM" backend --listen "127.0.0.1:$2" --events "$RESTARTED_EVENTS" \
        "${be_args[@]}" >>"$GW_TMP/$1.log" 2>&1 &
    RESTARTED_PID=$!
    wait_for_ready "$RESTARTED_PID" "$RESTARTED_EVENTS" '"ev":"ready"'
}
# c comes back on its port (killed in 4): one trial session takes it
# back into rotation.
restart c "$c_port"
c_pid=$RESTARTED_PID c_events=$RESTARTED_EVENTS
load 20
check "c is back in rotation after its trial" \
    metric_ge 'hybridgw_backend_state{backend="c",state="up"}' 1
# Devices on a that hold their conversations until the server ends them.
pids=()
for i in 1 2 3 4 5 6; do
    new_id GID_live
    device "$ID" --turns 1 --frames 0 --end server --end-timeout 20000 \
        >"$GW_TMP/live-$i.json" &
    pids+=($!)
done
check "the live devices are on a" wait_until 20 \
    metric_ge 'hybridgw_backend_active_sessions{backend="a"}' 6
devices=$(curl -s "http://127.0.0.1:$http_port/api/devices")
check "/api/devices names a as their sessions' backend" jq_is "$devices" \
    '[.devices[] | select(.client_id | startswith("GID_live"))
      | .session.backend] | map(select(. == "a")) | length' 6
# After its reply a says nothing: health.ping_interval_s (2) later the
# gateway pings, and a's pongs come back.
check "idle backend connections are pinged and answer" \
    wait_until 10 metric_ge hybridgw_backend_pongs_total 6
attempts_a=$(metric 'hybridgw_backend_attempts_total{backend="a"}')
kill -KILL "$a_pid"
load 100
answered 100
tried_a=$(($(metric 'hybridgw_backend_attempts_total{backend="a"}') - attempts_a))
echo "# sessions sent to a after its death: $tried_a"
# In rotation a would get a quarter; out of it, only its trials (one per
# backoff of 300 ms, 600 ms, then 1 s) while the load runs.
check "new sessions avoid a (only trials: $tried_a)" test "$tried_a" -le 8
check "a's abnormal closes are counted" \
    test "$(metric 'hybridgw_backend_failures_total{backend="a",reason="abnormal_close"}')" -ge 1
check "c takes its share meanwhile (${SPLIT##* })" test "${SPLIT##* }" -ge 25
wait "${pids[@]}"
gb=0
for i in 1 2 3 4 5 6; do
    jq -e '.goodbye_received' "$GW_TMP/live-$i.json" >/dev/null && gb=$((gb + 1))
done
echo "# $gb of 6 live devices got a goodbye"
check "every live device got a goodbye ($gb)" test "$gb" -eq 6
restart a "$a_port"
a_pid=$RESTARTED_PID a_events=$RESTARTED_EVENTS
load 20 # the trial
load 100
check "a returns to rotation once back (got ${SPLIT%% *})" test "${SPLIT%% *}" -ge 10

echo "# 7. all backends of a route down"
new_id GID_none
r=$(device "$ID" --turns 1 --fast --hello-timeout 4000)
check "the device gets no hello" jq_is "$r" .hellos 0
# Without an open channel the firmware ignores it, but it was sent.
check "but a goodbye" jq_is "$r" .messages.goodbye_ignored 1
check "the reason is logged" \
    wait_for_line "$GW_LOG" "dev=$ID.*session ended: backend"
health=$(curl -s "http://127.0.0.1:$http_port/healthz")
echo "# $health"
check "/healthz says degraded" jq_is "$health" .status degraded
check "naming the route and its backends" \
    jq_is "$health" \
    '[.degraded[] | select(.route == 1) | .backends[].name] | join(",")' \
    dead,silent
check "with why" jq_is "$health" \
    '.degraded[0].backends[0].last_failure | startswith("connect")' true

echo "# 8. the active probe catches a dead backend before a device does"
b_attempts=$(metric 'hybridgw_backend_attempts_total{backend="b"}')
b_fails=$(metric 'hybridgw_backend_failures_total{backend="b",reason="connect"}')
PROBE_S=1 reload weighted
check "b is up" metric_ge 'hybridgw_backend_state{backend="b",state="up"}' 1
stop_pid "$b_pid"
check "within a few probe rounds b is down" wait_until 10 \
    metric_ge 'hybridgw_backend_state{backend="b",state="down"}' 1
check "counted as a connect failure" \
    metric_ge 'hybridgw_backend_failures_total{backend="b",reason="connect"}' \
    $((b_fails + 1))
check "with no session sent to it" test \
    "$(metric 'hybridgw_backend_attempts_total{backend="b"}')" -eq "$b_attempts"
check "the probe is logged" wait_for_line "$GW_LOG" 'probe b\] failed: connect'

echo "# 9. shutdown"
stop_pid "$GW_PID" 20
check "the gateway exits cleanly (status $EXIT_CODE)" test "$EXIT_CODE" -eq 0
check "no sanitizer report" \
    not grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$GW_LOG"

finish
