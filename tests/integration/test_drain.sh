#!/usr/bin/env bash
# Rolling restarts (docs/deploy.md, "Rolling upgrade"): a drain, asked by
# POST /api/drain (http.token) or SIGUSR2, stops new conversations, lets
# the live ones end by themselves up to cluster.drain_deadline_s, then
# says goodbye to the rest, once each, and exits 0. A second request
# changes nothing; SIGTERM during a drain still stops at once. With
# cluster.mode "hash", the hellos a draining instance no longer takes are
# answered by the other instance; and a rolling restart of three instances
# under load, one at a time, cuts no conversation.
# Mosquitto, simulated devices that subscribe (so that a spy on the broker
# sees every goodbye the gateway sends), the mock backend.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

DEADLINE_S=8
TOKEN=drain-test-token

start_broker broker || bail "the broker starts"
BLOG=$GW_TMP/broker.log
start_backend backend --turn-frames 10 --tts-frames 8
events=$BACKEND_EVENTS

# gw_config FILE HTTP_PORT TOKEN [CLUSTER_JSON_MEMBERS]: the test's config.
gw_config() {
    local file=$1 port=$2 token=$3 more=${4:-}
    write_gateway_config "$file.tmp"
    jq --argjson port "$port" --arg token "$token" \
        --argjson dl "$DEADLINE_S" --argjson more "{${more}}" \
        '.http = {listen: "127.0.0.1", port: $port, token: $token}
         | .cluster = ({drain_deadline_s: $dl} + $more)
         | .log.level = "info"' "$file.tmp" >"$file"
}

n_dev=0
# new_id: sets ID to a fresh device client id.
new_id() {
    n_dev=$((n_dev + 1))
    ID=$(printf 'GID_drain@@@02_00_00_00_01_%02x@@@drain-%d' "$n_dev" "$n_dev")
}

peer_log "$GW_TMP/devices.err"
device() {
    plain_device "$@"
}

# api METHOD PATH [CURL_ARGS...]: prints the status, the body to $GW_TMP/api.
api() {
    local method=$1 path=$2
    shift 2
    curl -sS --max-time 5 -o "$GW_TMP/api" -w '%{http_code}' -X "$method" \
        "$@" "http://127.0.0.1:$HTTP_PORT$path"
}

# health: the whole /healthz document (the token shows more than the
# status).
health() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$HTTP_PORT/healthz"
}

# sessions_are N: /healthz says N live sessions.
sessions_are() {
    [ "$(health |
        jq -r .sessions 2>/dev/null)" = "$1" ]
}

# goodbyes ID: goodbyes the gateway published to that device (spy).
goodbyes() {
    grep -c "^devices/$1/down .*\"type\":\"goodbye\"" "$GW_TMP/spy.out"
}

now_ms() { date +%s%3N; }

echo "# 1. --check-config explains a bad cluster.drain_deadline_s"
HTTP_PORT=$(free_port)
cfg=$GW_TMP/gw.json
gw_config "$cfg" "$HTTP_PORT" "$TOKEN"
jq '.cluster.drain_deadline_s = 0' "$cfg" >"$GW_TMP/bad.json"
out=$("$GW" -c "$GW_TMP/bad.json" --check-config 2>&1)
rc=$?
echo "#   $(grep drain_deadline_s <<<"$out" | head -n 1)"
check "a deadline of 0 s is refused (exit 1)" test "$rc" -eq 1
check "naming the key" grep -q 'cluster.drain_deadline_s' <<<"$out"
out=$("$GW" -c "$cfg" --check-config 2>&1)
check "the test's config is valid" test $? -eq 0

# Every goodbye the gateway sends, seen from the gateway's account.
mosquitto_sub -p "$BROKER_PORT" -i it-drain-spy -v -t 'devices/+/down' \
    >"$GW_TMP/spy.out" 2>&1 &
wait_for_line "$BLOG" 'it-drain-spy 0 devices/\+/down' ||
    bail "the spy subscribes"

start_gateway gw "$cfg" || bail "the gateway starts"
wait_for_http "http://127.0.0.1:$HTTP_PORT/healthz" || bail "the API answers"

echo "# 2. POST /api/drain needs the token"
code=$(api POST /api/drain)
check "no token: 401 ($code)" test "$code" = 401
code=$(api POST /api/drain -H "Authorization: Bearer wrong-$TOKEN")
check "a wrong token: 401 ($code)" test "$code" = 401
code=$(api GET /api/drain -H "Authorization: Bearer $TOKEN")
check "GET: 405 ($code)" test "$code" = 405
check "none of them drained" not grep -q 'drain asked' "$GW_LOG"

echo "# 3. two conversations: one ends before the deadline, one would not"
new_id
A=$ID
new_id
B=$ID
# A: two real-time turns, then its own goodbye (a few seconds).
device "$A" --turns 2 --frames 15 --end goodbye >"$GW_TMP/a.json" &
pid_a=$!
# B: one turn, then it waits for the server's goodbye.
device "$B" --turns 1 --fast --end server --end-timeout 60000 \
    >"$GW_TMP/b.json" &
pid_b=$!
check "both conversations are live" wait_until 20 sessions_are 2

echo "# 4. the drain, then a second request and SIGUSR2: nothing changes"
code=$(api POST /api/drain -H "Authorization: Bearer $TOKEN")
t_drain=$(now_ms)
echo "#   $code $(cat "$GW_TMP/api")"
check "202: this request started it" test "$code" = 202
# shellcheck disable=SC2016 # jq's own variables
check "state draining, 2 sessions, deadline $DEADLINE_S s" \
    jq -e --argjson dl "$DEADLINE_S" \
    '.state == "draining" and .started == true and .sessions == 2 and
     .deadline_s == $dl' "$GW_TMP/api"
check "/healthz says draining" \
    jq -e '.cluster.state == "draining"' <(health)
check "logged with the sessions and the deadline" \
    wait_for_line "$GW_LOG" "drain asked by POST /api/drain from 127.0.0.1.*2 sessions live, deadline in $DEADLINE_S s"
sleep 1 # so that a restarted deadline would show
code=$(api POST /api/drain -H "Authorization: Bearer $TOKEN")
echo "#   $code $(cat "$GW_TMP/api")"
# shellcheck disable=SC2016 # jq's own variables
check "again: 200, not started, the deadline not moved" \
    jq -e --argjson dl "$DEADLINE_S" \
    '.state == "draining" and .started == false and .deadline_s < $dl' \
    "$GW_TMP/api"
check "and code 200 ($code)" test "$code" = 200
kill -USR2 "$GW_PID"
check "SIGUSR2 during the drain: said, nothing else" \
    wait_for_line "$GW_LOG" 'drain asked again by SIGUSR2: already draining'
check "one drain started" test "$(grep -c 'drain asked by' "$GW_LOG")" -eq 1

echo "# 5. a new hello during the drain is refused like a full gateway"
new_id
C=$ID
r=$(device "$C" --turns 1 --fast --hello-timeout 2000)
echo "#   device: $(jq -c '{ok, reason, hellos}' <<<"$r")"
check "the device got no server hello" jq_is "$r" .hellos 0
check "it got the refusal's goodbye" wait_until 5 test "$(goodbyes "$C")" -eq 1
check "logged" grep -q "dev=$C\] refused: draining" "$GW_LOG"
m=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$HTTP_PORT/metrics")
check "counted: refused{reason=draining} 1" \
    grep -q '^hybridgw_messages_refused_total{reason="draining"} 1$' <<<"$m"
check "no backend connection for it" \
    not grep -q "\"ev\":\"connect\".*$(cut -d@ -f4 <<<"$C" | tr _ :)" "$events"

echo "# 6. the live conversations are not cut"
wait "$pid_a"
r=$(cat "$GW_TMP/a.json")
device_ok "A finishes its two turns during the drain" "$r"
check "A was never told goodbye" test "$(goodbyes "$A")" -eq 0
check "the gateway still runs after A's end" kill -0 "$GW_PID"

echo "# 7. at the deadline: one goodbye for B, exit 0"
wait_for_exit "$GW_PID" $((DEADLINE_S + 10))
wait "$GW_PID"
rc=$?
t_exit=$(now_ms)
took=$((t_exit - t_drain))
echo "#   exited $took ms after the drain began (deadline ${DEADLINE_S} s)"
check "exit code 0 ($rc)" test "$rc" -eq 0
check "not before the deadline" test "$took" -ge $((DEADLINE_S * 1000 - 200))
wait "$pid_b"
r=$(cat "$GW_TMP/b.json")
device_ok "B ends with the server's goodbye" "$r"
check "B got exactly one goodbye" test "$(goodbyes "$B")" -eq 1
check "B's session ended at the deadline" \
    grep -q "dev=$B.*session ended: drain deadline" "$GW_LOG"
check "the summary counts both" \
    grep -Eq 'drained in [0-9]+ ms: 2 sessions at the start, 1 ended by themselves, 1 cut at the deadline' "$GW_LOG"

echo "# 8. no http.token: POST /api/drain is 403; SIGUSR2 drains an idle one"
HTTP_PORT=$(free_port)
cfg2=$GW_TMP/gw2.json
gw_config "$cfg2" "$HTTP_PORT" ""
start_gateway gw2 "$cfg2" || bail "the gateway starts again"
wait_for_http "http://127.0.0.1:$HTTP_PORT/healthz" || bail "the API answers"
code=$(api POST /api/drain -H "Authorization: Bearer $TOKEN")
check "403 ($code)" test "$code" = 403
check "saying why" grep -q 'set http.token' "$GW_TMP/api"
t0=$(now_ms)
kill -USR2 "$GW_PID"
wait_for_exit "$GW_PID" 5
wait "$GW_PID"
rc=$?
echo "#   exited $(($(now_ms) - t0)) ms after SIGUSR2"
check "nothing to wait for: exit 0 at once ($rc)" test "$rc" -eq 0
check "logged" grep -q 'drain asked by SIGUSR2: no new conversations; 0 sessions live' "$GW_LOG"

echo "# 9. SIGTERM during a drain stops at once"
start_gateway gw3 "$cfg2" || bail "the gateway starts a third time"
new_id
D=$ID
device "$D" --turns 1 --fast --end server --end-timeout 60000 \
    >"$GW_TMP/d.json" &
pid_d=$!
check "D's conversation is live" wait_until 20 sessions_are 1
kill -USR2 "$GW_PID"
wait_for_line "$GW_LOG" 'drain asked by SIGUSR2' >/dev/null
t0=$(now_ms)
kill -TERM "$GW_PID"
wait_for_exit "$GW_PID" 5
wait "$GW_PID"
rc=$?
took=$(($(now_ms) - t0))
echo "#   exited $took ms after SIGTERM"
check "exit 0 ($rc), well before the deadline" \
    test "$rc" -eq 0 -a "$took" -lt $((DEADLINE_S * 1000 / 2))
wait "$pid_d"
check "D got one goodbye" test "$(goodbyes "$D")" -eq 1
check "the drain says it was stopped" grep -q 'drain.*stopped before its end' "$GW_LOG"

echo "# 10. cluster.mode hash: a draining instance's new hellos go to the other"
DEADLINE_S=12
declare -A HP PIDS LOGS
for x in x y; do
    HP[$x]=$(free_port)
    gw_config "$GW_TMP/h$x.json" "${HP[$x]}" "$TOKEN" \
        '"mode": "hash", "instance": "drain-'$x'"'
    jq --arg x "$x" '.mqtt.client_id = "hybridgw-drain-" + $x' \
        "$GW_TMP/h$x.json" >"$GW_TMP/h$x.tmp" && mv "$GW_TMP/h$x.tmp" "$GW_TMP/h$x.json"
    start_gateway "h$x" "$GW_TMP/h$x.json" || bail "instance drain-$x starts"
    PIDS[$x]=$GW_PID
    LOGS[$x]=$GW_LOG
done
# metric X KEY: the value of KEY in instance X's /metrics (0 if absent).
metric() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:${HP[$1]}/metrics" |
        awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }'
}
sees() { [ "$(metric "$1" "hybridgw_cluster_instances{state=\"$2\"}")" = "$3" ]; }
live_on() { metric "$1" hybridgw_sessions; }
both_running() { sees x running 2 && sees y running 2; }
live_total_is() { [ $(($(live_on x) + $(live_on y))) -eq "$1" ]; }
check "each sees two running" wait_until 20 both_running
# Long conversations on both (the ids are fixed, so is who owns them).
long_pids=()
for i in 1 2 3 4 5 6; do
    new_id
    device "$ID" --turns 1 --fast --end server --end-timeout 60000 \
        >"$GW_TMP/long-$i.json" &
    long_pids+=($!)
done
check "six conversations live" wait_until 20 live_total_is 6
on_x=$(live_on x)
on_y=$(live_on y)
echo "#   drain-x has $on_x, drain-y $on_y"
check "drain-x has some of them" test "$on_x" -ge 1
code=$(curl -sS --max-time 5 -o "$GW_TMP/api" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:${HP[x]}/api/drain")
t_drain=$(now_ms)
check "POST /api/drain to drain-x: 202 ($code)" test "$code" = 202
check "drain-y sees drain-x draining" wait_until 10 sees y draining 1
check "drain-x says draining (metric)" \
    test "$(metric x hybridgw_cluster_draining)" = 1
echo "#   new hellos during the drain"
ign0=$(metric x hybridgw_cluster_hellos_ignored_total)
short_ok=0
short_n=8
short_pids=()
for i in $(seq 1 $short_n); do
    new_id
    device "$ID" --turns 1 --fast --hello-timeout 5000 >"$GW_TMP/short-$i.json" &
    short_pids+=($!)
done
wait "${short_pids[@]}"
for i in $(seq 1 $short_n); do
    r=$(cat "$GW_TMP/short-$i.json")
    if jq -e '.ok == true and .hellos == 1' <<<"$r" >/dev/null; then
        short_ok=$((short_ok + 1))
    else
        echo "#   $(jq -c '{client_id, ok, reason, hellos}' <<<"$r")"
    fi
done
check "all $short_n answered, once each ($short_ok)" test "$short_ok" -eq "$short_n"
check "none started on drain-x" \
    test "$(metric x hybridgw_sessions_started_total)" -eq "$on_x"
check "none refused by drain-x (they were drain-y's to answer)" \
    test "$(metric x 'hybridgw_messages_refused_total{reason="draining"}')" = 0
ign=$(($(metric x hybridgw_cluster_hellos_ignored_total) - ign0))
echo "#   drain-x left $ign hellos to drain-y"
check "drain-x left every new hello to drain-y" test "$ign" -eq "$short_n"
check "drain-x's conversations are still there" test "$(live_on x)" -eq "$on_x"
wait_for_exit "${PIDS[x]}" $((DEADLINE_S + 10))
wait "${PIDS[x]}"
rc=$?
took=$(($(now_ms) - t_drain))
echo "#   drain-x exited $took ms after the drain began"
check "drain-x exits 0 ($rc) at the deadline" \
    test "$rc" -eq 0 -a "$took" -ge $((DEADLINE_S * 1000 - 200))
check "its $on_x conversations were cut there" \
    grep -q "drained in [0-9]* ms: $on_x sessions\? at the start, 0 ended by themselves, $on_x cut" "${LOGS[x]}"
check "a progress line came after 10 s" \
    grep -Eq "\[drain\] $on_x sessions? left, 0 ended, [0-9]+ s to the deadline" "${LOGS[x]}"
check "drain-y keeps its $on_y" test "$(live_on y)" -eq "$on_y"
cut=0
n_bye=0
while read -r id; do
    if grep -q "dev=$id sid=.*session ended: drain deadline" "${LOGS[x]}"; then
        cut=$((cut + 1))
        [ "$(goodbyes "$id")" -eq 1 ] && n_bye=$((n_bye + 1))
    fi
done < <(grep -o 'dev=GID_drain[^] ]*' "${LOGS[x]}" | sed 's/dev=//' | sort -u)
check "each cut conversation got exactly one goodbye ($n_bye of $cut)" \
    test "$n_bye" -eq "$on_x" -a "$cut" -eq "$on_x"
# drain-y's goodbyes end the devices still waiting for one.
kill -TERM "${PIDS[y]}"
wait "${PIDS[y]}"
rc=$?
check "drain-y stops with SIGTERM (exit $rc)" test "$rc" -eq 0
wait "${long_pids[@]}"

echo "# 11. a rolling restart of three instances under load: nothing cut"
# The deadline is longer than any conversation here: each drain must end
# because its conversations ended, none at the deadline.
DEADLINE_S=30
# Each device's identity is random and its owner a hash of it: with 24 a
# batch leaves an instance without one once in about 17,000 runs (12 left
# one empty about once in 170).
ROUND_N=24
names=(r-a r-b r-c)
for x in "${names[@]}"; do
    HP[$x]=$(free_port)
    gw_config "$GW_TMP/$x.json" "${HP[$x]}" "$TOKEN" \
        '"mode": "hash", "instance": "'"$x"'"'
    jq --arg x "$x" '.mqtt.client_id = "hybridgw-" + $x' "$GW_TMP/$x.json" \
        >"$GW_TMP/$x.tmp" && mv "$GW_TMP/$x.tmp" "$GW_TMP/$x.json"
    start_gateway "$x" "$GW_TMP/$x.json" || bail "instance $x starts"
    PIDS[$x]=$GW_PID
    LOGS[$x]=$GW_LOG
done
all_running() {
    local x
    for x in "${names[@]}"; do sees "$x" running 3 || return 1; done
}
check "the three see three running" wait_until 20 all_running
# load SEED FILE: ROUND_N devices of two real-time turns each, in the
# background (LOAD_PID).
load() {
    "$SIM" load --devices "$ROUND_N" --broker "127.0.0.1:$BROKER_PORT" \
        --subscribing --publish-topic 'devices/{client_id}/up' --seed "$1" \
        --ramp 0 --turns 2 --frames 12 --duration 30 \
        --stats-json "$2" >"$2.out" 2>&1 &
    LOAD_PID=$!
    peer_log "$2.out"
}
# answered FILE: every device of the batch got one server hello and
# finished both turns.
answered() {
    jq -e --argjson n "$ROUND_N" '.devices.hellos_answered == $n and
        .devices.hello_duplicate == 0 and .turns == 2 * $n' "$1" >/dev/null
}
has_live() { [ "$(live_on "$1")" -ge 1 ]; }
seed=500
for x in "${names[@]}"; do
    seed=$((seed + 1))
    load "$seed" "$GW_TMP/before-$x.json"
    before_pid=$LOAD_PID
    wait_until 20 has_live "$x" ||
        not_ok "$x has conversations before its drain"
    live=$(live_on "$x")
    code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:${HP[$x]}/api/drain")
    seed=$((seed + 1))
    load "$seed" "$GW_TMP/during-$x.json" # new conversations meanwhile
    during_pid=$LOAD_PID
    wait_for_exit "${PIDS[$x]}" $((DEADLINE_S + 5))
    wait "${PIDS[$x]}"
    rc=$?
    wait "$before_pid" "$during_pid"
    line=$(grep 'drained in' "${LOGS[$x]}")
    echo "#   $x: ${line#*\[drain\] }"
    check "$x: drain $code, exit $rc, its $live+ conversations ended by themselves" \
        grep -Eq 'drained in [0-9]+ ms: [1-9][0-9]* sessions? at the start, [1-9][0-9]* ended by themselves, 0 cut' \
        <<<"$line"
    check "$x: exit 0 and 202" test "$rc" -eq 0 -a "$code" = 202
    check "$x: the batch before its drain was whole" answered "$GW_TMP/before-$x.json"
    check "$x: the batch during its drain was whole (the others)" \
        answered "$GW_TMP/during-$x.json"
    check "$x: refused none (the others owned the new ones)" \
        not grep -q 'refused: draining' "${LOGS[$x]}"
    # Back on the "new version": the same name, a new boot.
    start_gateway "$x-2" "$GW_TMP/$x.json" || bail "$x starts again"
    PIDS[$x]=$GW_PID
    LOGS[$x]=$GW_LOG
    check "$x is back: three running" wait_until 20 all_running
done
for x in "${names[@]}"; do
    kill -TERM "${PIDS[$x]}"
done

finish
