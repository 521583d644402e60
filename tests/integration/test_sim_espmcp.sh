#!/usr/bin/env bash
# The simulated device's esp-mcp-like profile (--mcp-profile esp) on its
# own: a plain mosquitto, the MCP messages a gateway would send published
# with mosquitto_pub, what the device sends read with mosquitto_sub. Checks
# its envelopes (with "endpoint" for MCP servers), its timers on the real
# loop, its verdict on a violation, and that the stock device is unchanged.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

command -v mosquitto_pub >/dev/null || bail "mosquitto_pub is installed"
start_broker broker || bail "a plain broker starts"
UP=$GW_TMP/up.jsonl
mosquitto_sub -p "$BROKER_PORT" -i sim-espmcp-watch -t device-server >"$UP" &
check "the watcher is subscribed to the devices' topic" \
    wait_for_line "$GW_TMP/broker.log" "sim-espmcp-watch 0 device-server"

# device NAME ARGS...: a subscribing idle device; its transcript and result
# line in $GW_TMP/NAME.out; sets PID and ID.
device() {
    local name=$1
    shift
    ID=espmcp-$name
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --client-id "$ID" \
        --subscribing --idle --json "$@" >"$GW_TMP/$name.out" 2>&1 &
    PID=$!
    peer_log "$GW_TMP/$name.out"
    wait_for_line "$GW_TMP/broker.log" "$ID 0 devices/$ID/down"
}
# mcp PAYLOAD [ENDPOINT]: one mcp envelope to device $ID.
mcp() {
    local msg
    if [ -n "${2:-}" ]; then
        msg=$(jq -cn --argjson p "$1" --arg e "$2" \
            '{type:"mcp", endpoint:$e, payload:$p}')
    else
        msg=$(jq -cn --argjson p "$1" '{type:"mcp", payload:$p}')
    fi
    mosquitto_pub -p "$BROKER_PORT" -t "devices/$ID/down" -m "$msg"
}
# result NAME: the device's JSON result line, or null (no check passes).
result() {
    local line
    line=$(grep '^{' "$GW_TMP/$1.out" | tail -n 1)
    echo "${line:-null}"
}

echo "# a device with every timer and an MCP server to call"
device a --mcp-profile esp --mcp-update-ms 100 --mcp-change-after-ms 200 \
    --mcp-remote 'tools:echo:{"text":"x"}' --mcp-remote-init \
    --mcp-remote-progress
mcp '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'
check "initialize is answered in an mcp envelope (2025-11-25, sim-esp)" \
    wait_for_jq "$UP" '.type == "mcp" and .session_id == "" and
        .payload.id == 1 and .payload.result.protocolVersion == "2025-11-25" and
        .payload.result.serverInfo.name == "sim-esp"'
check "then the MCP server is initialized, its name in \"endpoint\"" \
    wait_for_jq "$UP" '.endpoint == "tools" and .payload.method == "initialize"'
mcp '{"jsonrpc":"2.0","method":"notifications/initialized"}'
mcp '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}' tools
check "its answer brings notifications/initialized to that server" \
    wait_for_jq "$UP" '.endpoint == "tools" and
        .payload.method == "notifications/initialized"'
check "and the tools/call, id 2, progress token 2" \
    wait_for_jq "$UP" '.endpoint == "tools" and .payload.id == 2 and
        .payload.method == "tools/call" and .payload.params.name == "echo" and
        .payload.params.arguments.text == "x" and
        .payload.params._meta.progressToken == 2'
mcp '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}}' tools
mcp '{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"x"}]}}' tools
check "the three list_changed notifications come on the device's clock" \
    wait_for_jq "$UP" '.payload.method == "notifications/prompts/list_changed"'
mcp '{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"device://status"}}'
check "a subscription brings an update every 100 ms" \
    wait_for_lines "$UP" 'notifications/resources/updated' 3
mcp '{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"device://status"}}'
check "unsubscribed" wait_for_jq "$UP" '.payload.id == 3 and .payload.result == {}'
# An endpoint named by a tool's caller is escaped in the envelope.
mcp '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"self.sim.remote","arguments":{"endpoint":"a\"b","tool":"t"}}}'
check "self.sim.remote: the endpoint a\"b is escaped" \
    wait_for_jq "$UP" '.endpoint == "a\"b" and .payload.id == 3'
mcp '{"jsonrpc":"2.0","id":3,"error":{"code":-32007,"message":"no MCP server named a\"b for this device"}}' 'a"b'
check "its error becomes the tool's isError text" \
    wait_for_jq "$UP" '.payload.id == 4 and .payload.result.isError == true and
        (.payload.result.content[0].text | startswith("error -32007: "))'
kill -INT "$PID"
check "device a exits" wait_for_exit "$PID"
check "with status 0 (exit $EXIT_CODE)" test "$EXIT_CODE" -eq 0
r=$(result a)
check "no violation, every request answered" \
    jq -e '.ok and .mcp_profile == "esp" and .mcp_violations == 0 and
        .mcp_unanswered == 0' <<<"$r"
check "its remote call recorded ($(jq -c .mcp_remote <<<"$r"))" \
    jq -e '.mcp_remote == [{"endpoint":"tools","tool":"echo","done":true,
        "ok":true,"text":"x"}] and .mcp_remote_inits == 1 and
        .mcp_remote_ok == 1 and .mcp_remote_err == 1 and
        .mcp_remote_progress == 1' <<<"$r"
check "its counts ($(jq -c '[.mcp_list_changed_sent, .mcp_updates_sent,
    .mcp_subscribed]' <<<"$r"))" \
    jq -e '.mcp_list_changed_sent == 3 and .mcp_updates_sent >= 3 and
        .mcp_subscribed == 1' <<<"$r"

echo "# violations fail the run"
device b --mcp-profile esp
mcp '{"jsonrpc":"2.0","id":"s1","method":"ping"}'
check "a string id is refused" \
    wait_for_line "$GW_TMP/b.out" 'MCP VIOLATION: ping with id "s1"'
mcp '{"jsonrpc":"2.0","id":9,"result":{}}' tools
check "an answer under an id never used is refused" \
    wait_for_line "$GW_TMP/b.out" 'MCP VIOLATION: response id=9 from tools'
kill -INT "$PID"
check "device b exits" wait_for_exit "$PID"
check "with status 1 (exit $EXIT_CODE)" test "$EXIT_CODE" -eq 1
check "naming the first violation" \
    jq -e '.ok == false and .mcp_violations == 2 and
        (.reason | startswith("MCP violations: 2 (first: ping with id"))' \
    <<<"$(result b)"

echo "# the stock device is unchanged"
n=$(wc -l <"$UP")
device c
mcp '{"jsonrpc":"2.0","id":"s1","method":"ping"}'
mcp '{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}'
check "its initialize answer is the firmware's, byte for byte" \
    wait_for_line "$UP" '^\{"session_id":"","type":"mcp","payload":\{"jsonrpc":"2.0","id":5,"result":\{"protocolVersion":"2024-11-05","capabilities":\{"tools":\{\}\},"serverInfo":\{"name":"hybridgw-sim","version":"2.4.2"\}\}\}\}$'
kill -INT "$PID"
check "device c exits 0" wait_for_exit "$PID"
check "(exit $EXIT_CODE)" test "$EXIT_CODE" -eq 0
check "the string id was dropped silently, and only one reply was sent" \
    test "$(($(wc -l <"$UP") - n))" -eq 1
check "its result line has none of the profile's members" \
    jq -e '.ok and .mcp.ignored == 1 and (has("mcp_profile") | not) and
        (has("mcp_violations") | not)' <<<"$(result c)"
finish
