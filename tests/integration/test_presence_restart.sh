#!/usr/bin/env bash
# Presence through broker restarts (docs/protocol.md section 2.3): the real
# mosquitto with the plugin is killed and started again on its port, first
# without persistence, then with it (its retained onlines of the run before
# kept on disk). Idle stock devices reconnect by themselves; one is killed
# during each outage and never comes back; one comes back with another tool
# list. Checked: the returning ones are initialized again (each sim counts
# the initializes it answered), the missing one is offline within
# mqtt.presence_grace_ms of the link's return, the changed catalog is the
# new one on /api/devices/{id} and its device endpoint is told
# (tools/list_changed), and /api/devices shows "ready" for no device the
# gateway has not read again since the link came back (polled throughout).
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

TOKEN=it-presence-token
GRACE_MS=4000
start_plugin_broker broker || bail "broker with the plugin starts"
BCONF=$GW_TMP/broker.conf
start_backend backend --turn-frames 4 --tts-frames 2
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg"
# The HTTP API and the grace, over the helper's config.
jq --argjson port "$HTTP_PORT" --arg token "$TOKEN" --argjson grace "$GRACE_MS" \
    '.http = {listen: "127.0.0.1", port: $port, token: $token}
     | .mqtt.presence_grace_ms = $grace' "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err"

api() {
    curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE$1"
}

declare -A DEV_PID DEV_ID
# tool_lines NAME: the gateway's completed tool discoveries of the device.
tool_lines() {
    count_lines "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?"
}
state_of() {
    api "/api/devices/${DEV_ID[$1]}" | jq -r '.mcp.state // "absent"'
}
is_ready() { [ "$(state_of "$1")" = ready ]; }
is_absent() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
        -H "Authorization: Bearer $TOKEN" "$BASE/api/devices/${DEV_ID[$1]}")" = 404 ]
}

named_device pr back1 01 --idle
named_device pr back2 02 --idle
named_device pr changed 03 --idle --mcp-reconnect-tools 3
named_device pr gone 04 --idle
for n in back1 back2 changed gone; do
    check "$n is discovered and ready" wait_until 15 is_ready "$n"
done
base_tools=$(api "/api/devices/${DEV_ID[changed]}" | jq -r .tool_count)
check "the device's tools are counted ($base_tools)" test "$base_tools" -gt 0

# A session of the changed device's MCP endpoint, with its GET stream.
SSE=$GW_TMP/changed.sse
hdr=$GW_TMP/mcp.hdr
enc_id=$(jq -rn --arg s "${DEV_ID[changed]}" '$s|@uri')
curl -s --max-time 5 -D "$hdr" -o /dev/null -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}' \
    "$BASE/mcp/devices/$enc_id"
SID=$(awk 'tolower($1) == "mcp-session-id:" { print $2 }' "$hdr" | tr -d '\r')
check "an MCP session on the changed device's endpoint" test -n "$SID"
curl -s -N --max-time 100 -H "Authorization: Bearer $TOKEN" \
    -H "Mcp-Session-Id: $SID" -H 'Accept: text/event-stream' \
    "$BASE/mcp/devices/$enc_id" >"$SSE" 2>/dev/null &
SSE_PID=$!

# poll_outage: during the outage no device may show "ready" (nor be
# confirmed); prints the states seen.
poll_outage() {
    api /api/devices | jq -r '.devices[] | "\(.presence) \(.mcp.state)"' | sort -u
}

# watch_ready NAME BEFORE OUT: until killed, whenever the device shows
# "ready", the gateway must have read its tools again since the outage
# (more than BEFORE discoveries); a violation is written to OUT.
watch_ready() {
    local n=$1 before=$2 out=$3
    while :; do
        if is_ready "$n" && (($(tool_lines "$n") <= before)); then
            echo "$n shown ready with no discovery since the link came back" >>"$out"
        fi
        sleep 0.05
    done
}

# restart PHASE PERSIST: kills the broker (-9) and the device "gone",
# checks the outage, starts the broker with or without persistence, and
# checks the reconciliation.
restart() {
    local phase=$1 persist=$2 ups n viol=$GW_TMP/$1.violations states t0
    local -A before inits
    ups=$(count_lines "$GW_LOG" 'broker link up')
    for n in back1 back2 changed gone; do before[$n]=$(tool_lines "$n"); done
    kill -KILL "$BROKER_PID"
    wait "$BROKER_PID" 2>/dev/null
    kill -KILL "${DEV_PID[gone]}" 2>/dev/null
    check "$phase: the gateway sees the broker go" \
        wait_for_line "$GW_LOG" 'broker link down' 10
    : >"$viol"
    for n in back1 back2 changed; do
        watch_ready "$n" "${before[$n]}" "$viol" &
        WATCH+=($!)
    done
    states=$(poll_outage)
    check "$phase: while the broker is away nothing is ready [$(tr '\n' ',' <<<"$states")]" \
        not grep -qE '(^confirmed| ready$)' <<<"$states"
    if [ "$persist" = yes ]; then
        sed -i 's/^persistence .*/persistence true/' "$BCONF"
        grep -q '^persistence_location' "$BCONF" ||
            printf 'persistence_location %s/\nautosave_interval 1\n%s\n' \
                "$GW_TMP" "user $(id -un)" >>"$BCONF" # root stays root: its files
    fi
    run_mosquitto broker "$BCONF" "$BROKER_PORT" || bail "$phase: the broker restarts"
    BROKER_PID=$MOSQ_PID
    check "$phase: the gateway is back on the broker" \
        wait_for_lines "$GW_LOG" 'broker link up' $((ups + 1)) 20
    t0=$SECONDS
    for n in back1 back2 changed; do
        check "$phase: $n is read again and ready" wait_until 20 \
            bash -c "[ \$(grep -cE 'dev=${DEV_ID[$n]} mcp.* [0-9]+ tools? in' '$GW_LOG') -gt ${before[$n]} ]"
        check "$phase: $n is ready" wait_until 10 is_ready "$n"
    done
    check "$phase: the device that did not come back is offline" \
        wait_until $((GRACE_MS / 1000 + 5)) is_absent gone
    check "$phase: ... within the grace ($((SECONDS - t0)) s <= $((GRACE_MS / 1000 + 3)) s)" \
        test $((SECONDS - t0)) -le $((GRACE_MS / 1000 + 3))
    kill "${WATCH[@]}" 2>/dev/null
    wait "${WATCH[@]}" 2>/dev/null
    WATCH=()
    check "$phase: no device shown ready before it was read again" \
        not test -s "$viol"
    test -s "$viol" && sed 's/^/#   /' "$viol" | sort -u
}
WATCH=()

echo "# a) the broker restarts without persistence"
restart a no
check "a: the changed device's new tool list is on /api/devices/{id}" \
    test "$(api "/api/devices/${DEV_ID[changed]}" | jq -r .tool_count)" -eq $((base_tools + 3))
check "a: its endpoint's clients were told (tools/list_changed)" \
    wait_until 5 grep -q 'notifications/tools/list_changed' "$SSE"
check "a: the gateway logged the one it took offline" \
    grep -qE '1 device not confirmed by the broker within [0-9]+ ms' "$GW_LOG"
check "a: and counted it" \
    test "$(gw_metric "$BASE" hybridgw_devices_presence_expired_total "$TOKEN")" = 1

echo "# b) with persistence: the retained onlines of the run before come back"
# The restart that turns persistence on; then a device that will not come
# back, whose online the broker saves (autosave every second).
restart b0 yes
named_device pr gone 05 --idle
check "b: the new device is ready" wait_until 15 is_ready gone
db=$GW_TMP/mosquitto.db
saved_after() { [ -f "$db" ] && [ "$(stat -c %Y "$db")" -gt "$1" ]; }
check "b: the broker saved its retained state" wait_until 5 saved_after "$(date +%s)"
check "b: the device's online is in the saved state" \
    grep -q "${DEV_ID[gone]}" "$db"
restart b yes
# What the gateway was given at subscribe: the saved online, of the run
# before (the device never came back to end it).
retained=$(mosquitto_sub -h 127.0.0.1 -p "$BROKER_PORT" -u "$PLUGIN_GW_USER" \
    -P "$PLUGIN_GW_PASS" -t "devices/${DEV_ID[gone]}/presence" -C 1 -W 3 2>/dev/null)
check "b: the broker still holds the missing device online [$retained]" \
    grep -q '"state":"online"' <<<"$retained"

kill "$SSE_PID" 2>/dev/null
for n in back1 back2 changed; do
    res=$(end_device "$n")
    check "$n initialized again at each of the 3 restarts ($(jq -c '{i: .mcp.initializes, r: .mqtt_reconnects}' <<<"$res"))" \
        jq_is "$res" '.mcp.initializes' 4
    check "$n reconnected 3 times" jq_is "$res" '.mqtt_reconnects' 3
done
finish
