#!/usr/bin/env bash
# Several instances on one broker (docs/architecture.md section 9,
# docs/protocol.md section 10): one mosquitto with the plugin, three
# gateways in cluster.mode "hash", 300 simulated devices at a time.
# Every hello is answered exactly once (a device counts an extra server
# hello as a failure, and the instances that left it to its owner count
# it too); a second instance with a taken name refuses to run; after a
# kill -9 the others keep their conversations and the dead one's devices
# are served on their next hello, the longest unanswered window is
# measured; a joining instance takes only new conversations.
#
# The gateways' MQTT keepalive is 5 s here (60 s by default): the broker
# notices a dead instance after 1.5 x keepalive, which bounds the window.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
N=${CLUSTER_DEVICES:-300}
KEEPALIVE=5

start_plugin_broker broker || bail "the broker starts"
start_backend mock --turn-frames 3 --tts-frames 3 --no-decode ||
    bail "the backend starts"

declare -A HTTP PID LOGF
# gw_config NAME FILE [CLUSTER_INSTANCE]: a hash-mode config of instance
# NAME (its own MQTT client id, UDP and HTTP ports).
gw_config() {
    local name=$1 file=$2 inst=${3:-$1}
    write_gateway_config "$file.in"
    HTTP[$name]=$(free_port)
    jq --arg n "$name" --arg i "$inst" --argjson h "${HTTP[$name]}" \
        --argjson k "$KEEPALIVE" \
        '.mqtt.keepalive = $k | .mqtt.client_id = "hybridgw-" + $n
         | .http.port = $h | .log.level = "info"
         | .limits = { "max_sessions": 2000, "hello_burst": 20 }
         | .cluster = { "mode": "hash", "instance": $i }' \
        "$file.in" >"$file"
}
# start NAME: starts the instance of that name (config from gw_config).
start() {
    start_gateway "$1" "$GW_TMP/$1.json" || bail "instance $1 starts"
    PID[$1]=$GW_PID
    LOGF[$1]=$GW_LOG
}
metrics() { curl -s --max-time 5 "http://127.0.0.1:${HTTP[$1]}/metrics"; }
# metric NAME KEY: the value of KEY in instance NAME's /metrics, 0 if absent.
metric() {
    metrics "$1" | awk -v k="$2" 'index($0, k " ") == 1 { v = $NF }
        END { print v + 0 }'
}
healthz() { curl -s --max-time 5 "http://127.0.0.1:${HTTP[$1]}/healthz"; }
# sees NAME N: instance NAME is running and sees N instances running.
sees() {
    [ "$(metric "$1" 'hybridgw_cluster_instances{state="running"}')" = "$2" ] &&
        healthz "$1" | jq -e '.cluster.state == "running"' >/dev/null
}
# all_see N NAMES...: each of NAMES sees N running.
all_see() {
    local n=$1 x
    shift
    for x in "$@"; do sees "$x" "$n" || return 1; done
}
# sum KEY NAMES...: KEY summed over the instances.
sum() {
    local k=$1 n=0 x
    shift
    for x in "$@"; do n=$((n + $(metric "$x" "$k"))); done
    echo "$n"
}
# live_is N NAMES...: N sessions open on the instances together.
live_is() {
    local n=$1
    shift
    [ "$(sum hybridgw_sessions "$@")" -eq "$n" ]
}
started() { metric "$1" hybridgw_sessions_started_total; }
ignored() { metric "$1" hybridgw_cluster_hellos_ignored_total; }

# load SEED FILE ARGS...: N devices (identities from SEED) in the
# background; sets LOAD_PID; stats to FILE.
load() {
    local seed=$1 file=$2
    shift 2
    "$SIM" load --devices "$N" --broker "127.0.0.1:$BROKER_PORT" \
        --key "$PLUGIN_KEY" --seed "$seed" --ramp 300 \
        --stats-json "$file" "$@" >"$file.out" 2>&1 &
    LOAD_PID=$!
    peer_log "$file.out"
}
# answered FILE: the load's N devices each got exactly one valid server
# hello and completed their turn. (Not .devices.ok: on a loaded machine a
# reply's first frame can overtake its tts start, which the firmware
# drops; test_data_plane covers audio.)
answered() {
    check "$N hellos answered, one each, $N turns complete" \
        jq_is "$(cat "$1")" '.devices.hellos_answered == '"$N"'
         and .devices.hello_duplicate == 0 and .devices.hello_invalid == 0
         and .turns == '"$N" true
}
# byes NAMES...: sessions ended by the device's goodbye, summed.
byes() { sum 'hybridgw_sessions_ended_total{reason="device goodbye"}' "$@"; }
short=(--turns 1 --fast --duration 30)

for n in gw-a gw-b gw-c; do
    gw_config "$n" "$GW_TMP/$n.json"
    start "$n"
done
for n in gw-a gw-b gw-c; do
    check "$n runs and sees three running instances" wait_until 15 sees "$n" 3
done
healthz gw-a | jq -c .cluster | sed 's/^/#   /'

echo "# 1. $N devices: every hello answered once, by its owner only"
load 101 "$GW_TMP/l1.json" "${short[@]}"
wait "$LOAD_PID"
answered "$GW_TMP/l1.json"
a=$(started gw-a) b=$(started gw-b) c=$(started gw-c)
echo "# sessions: gw-a $a, gw-b $b, gw-c $c"
check "the three started $N sessions in all" test $((a + b + c)) -eq "$N"
check "each took its share (a fifth of them at least)" \
    test "$a" -ge $((N / 5)) -a "$b" -ge $((N / 5)) -a "$c" -ge $((N / 5))
check "each hello was left alone by the two others" \
    test "$(sum hybridgw_cluster_hellos_ignored_total gw-a gw-b gw-c)" -eq $((2 * N))

echo "# 2. the same name twice: the second refuses to run"
gw_config gw-a2 "$GW_TMP/gw-a2.json" gw-a
"$GW" -c "$GW_TMP/gw-a2.json" >"$GW_TMP/gw-a2.log" 2>&1 &
a2=$!
peer_log "$GW_TMP/gw-a2.log"
wait_until 20 not kill -0 "$a2"
wait "$a2"
rc=$?
boot=$(sed -n 's/.*instance gw-a (boot \([0-9a-f]*\)) joining.*/\1/p' \
    "${LOGF[gw-a]}" | head -n 1)
grep 'is taken' "$GW_TMP/gw-a2.log" | sed 's/^/#   /'
check "it exits 1" test "$rc" -eq 1
check "saying the name is taken, by which instance (boot $boot)" \
    grep -q "instance name gw-a is taken: instance boot $boot, started" \
    "$GW_TMP/gw-a2.log"
check "gw-a keeps running, and the others still see three" \
    all_see 3 gw-a gw-b gw-c

echo "# 3. kill -9 of gw-c mid-run"
load 202 "$GW_TMP/l2.json" --duration 8 --frame-ms 60
check "all $N conversations are live" \
    wait_until 30 live_is "$N" gw-a gw-b gw-c
on_c=$(metric gw-c hybridgw_sessions)
on_ab=$((N - on_c))
a0=$(started gw-a) b0=$(started gw-b) bye0=$(byes gw-a gw-b)
# a device gw-c served in the first run (all three running then), not
# connected now
id=$(sed -n 's/.*\[dev=\([^] ]*\)[^]]*\] session active.*/\1/p' "${LOGF[gw-c]}" | head -n 1)
t_kill=$(date +%s%N)
kill -9 "${PID[gw-c]}"
echo "# killed gw-c with $on_c conversations; gw-a and gw-b have $on_ab"
# The dead one's device says hello again and again (1 s patience each)
# until somebody answers: the longest window a hello can go unanswered.
# hello_again ID T0: that device says hello (1 s patience each) until
# somebody answers; sets WINDOW_MS, the time from T0 (ns) to the answer
# (the answered try's start plus its hello latency), and TRIES.
hello_again() {
    local out t_try
    TRIES=0 WINDOW_MS=
    while [ -z "$WINDOW_MS" ] && ((TRIES < 40)); do
        TRIES=$((TRIES + 1))
        t_try=$(date +%s%N)
        out=$("$SIM" device --broker "127.0.0.1:$BROKER_PORT" \
            --key "$PLUGIN_KEY" --client-id "$1" --turns 1 --fast \
            --hello-timeout 1000 --turn-timeout 5000 --json 2>/dev/null |
            tail -n 1)
        if jq -e '.hellos == 1 and .hello_duplicate == 0' <<<"$out" \
            >/dev/null 2>&1; then
            WINDOW_MS=$(jq -r --argjson t "$(((t_try - $2) / 1000000))" \
                '$t + (.latency_ms.connect // 0) + (.latency_ms.hello // 0)
                 | floor' <<<"$out")
        fi
    done
}
# gone_ms OBSERVER NAME T0: ms from T0 (ns) to the log line in which
# OBSERVER saw instance NAME go, or nothing.
gone_ms() {
    local ts
    ts=$(sed -n "s/^\([^ ]*\) info \[cluster\] instance $2 (boot [0-9a-f]*) gone\$/\1/p" \
        "${LOGF[$1]}" | tail -n 1)
    [ -n "$ts" ] && echo $((($(date -d "$ts" +%s%N) - $3) / 1000000))
}
# The broker's detection (1.5 x keepalive, checked on its own clock:
# seen here up to about 4 s later) plus a device's retry (its reconnect,
# 1 s of patience per hello, slower under sanitizers).
notice_ms=$((KEEPALIVE * 1500 + 6000))
bound_ms=$((notice_ms + 3000))
# A killed process's socket closes at once, so the broker sends the will
# at once; a hung one (below) is noticed by the keepalive.
hello_again "$id" "$t_kill"
seen=$(gone_ms gw-a gw-c "$t_kill")
echo "# takeover after kill -9: gw-a saw gw-c gone ${seen:-?} ms after the" \
    "kill; a hello of a device gw-c owned went unanswered for at most" \
    "${WINDOW_MS:-?} ms ($TRIES hellos)"
check "that device has an id" test -n "$id"
check "a device gw-c owned is served again, within ${bound_ms} ms" \
    test -n "$WINDOW_MS" -a "${WINDOW_MS:-0}" -le "$bound_ms"
wait "$LOAD_PID"
dup=$(jq '.devices.hello_duplicate' "$GW_TMP/l2.json")
wait_until 10 live_is 0 gw-a gw-b
byes=$(($(byes gw-a gw-b) - bye0 - 1)) # the probe device's session is one
echo "# conversations of gw-a and gw-b ended by their device's goodbye: $byes"
check "the others' $on_ab conversations went on to their end" \
    test "$byes" -eq "$on_ab"
check "no device heard two hellos" test "$dup" -eq 0
check "gw-a and gw-b saw gw-c go" all_see 2 gw-a gw-b
check "and started no session during the run but the probe's" \
    test $(($(started gw-a) + $(started gw-b) - a0 - b0)) -le 1
load 202 "$GW_TMP/l3.json" "${short[@]}"
wait "$LOAD_PID"
echo "# the same $N devices say hello again"
answered "$GW_TMP/l3.json"

echo "# 3b. gw-b hangs (SIGSTOP): the broker notices by the keepalive"
# a device gw-b served last (gw-a and gw-b running then), not connected now
id=$(sed -n 's/.*\[dev=\([^] ]*\)[^]]*\] session active.*/\1/p' "${LOGF[gw-b]}" | tail -n 1)
t_stop=$(date +%s%N)
kill -STOP "${PID[gw-b]}"
hello_again "$id" "$t_stop"
kill -CONT "${PID[gw-b]}"
seen=$(gone_ms gw-a gw-b "$t_stop")
echo "# takeover of a hung instance: gw-a saw gw-b gone ${seen:-?} ms after" \
    "SIGSTOP (mqtt keepalive ${KEEPALIVE} s: the broker waits 1.5 x" \
    "keepalive = $((KEEPALIVE * 1500)) ms); a hello of a device gw-b owned" \
    "went unanswered for at most ${WINDOW_MS:-?} ms ($TRIES hellos)"
check "gw-a saw it within ${notice_ms} ms" \
    test -n "$seen" -a "${seen:-0}" -le "$notice_ms"
check "that device has an id" test -n "$id"
check "a device gw-b owned is served by gw-a, within ${bound_ms} ms" \
    test -n "$WINDOW_MS" -a "${WINDOW_MS:-0}" -le "$bound_ms"
check "gw-b, woken, comes back: both see two running" \
    wait_until 20 all_see 2 gw-a gw-b

echo "# 4. gw-c joins again: only new conversations go to it"
bye0=$(byes gw-a gw-b)
load 303 "$GW_TMP/l4.json" --duration 8 --frame-ms 60
check "all $N conversations are live on gw-a and gw-b" \
    wait_until 30 live_is "$N" gw-a gw-b
start gw-c
check "gw-c runs and sees three" wait_until 30 sees gw-c 3
check "gw-a and gw-b see it" wait_until 30 all_see 3 gw-a gw-b
wait "$LOAD_PID"
wait_until 10 live_is 0 gw-a gw-b
check "none of the live conversations moved: no extra hello" \
    jq_is "$(cat "$GW_TMP/l4.json")" '.devices.hello_duplicate == 0' true
check "all $N ended by their device's goodbye on gw-a and gw-b" \
    test $(($(byes gw-a gw-b) - bye0)) -eq "$N"
check "gw-c started none of them" test "$(started gw-c)" -eq 0
load 404 "$GW_TMP/l5.json" "${short[@]}"
wait "$LOAD_PID"
answered "$GW_TMP/l5.json"
c=$(started gw-c)
echo "# new conversations: gw-c took $c of $N"
check "gw-c takes its share of new ones" test "$c" -ge $((N / 5))

finish
