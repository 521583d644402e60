#!/usr/bin/env bash
# Devices as clients of MCP servers (docs/protocol.md section 7, outbound
# addressing): mosquitto, the gateway, MCP servers built with the official
# SDK's server classes (tests/mcp/outbound_server.mjs: one answering with
# event streams and a bearer check, one with JSON), and a device played by
# mosquitto_pub / mosquitto_sub, so that every envelope it sends, good or
# bad, is written here. Checks: answers under the device's own ids, progress
# on the response stream, the bearer token, re-initialize after the server
# forgot the session, timeouts (and the cancellation the server hears),
# the device's cancellation, not-allowed and unknown endpoints, answers too
# large for the device or over outbound_max_response_bytes, a server that
# is down or refuses the token, a protocolVersion the gateway does not know
# (never put in a header), the pending bound, notifications bounded by it
# and by a server's max_connections (a server that never answers them),
# idle sessions DELETEd, metrics, and the -32004 of a shutdown with a
# request open.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

mcp_tools_ready ||
    bail "node and tests/mcp's npm packages are installed (scripts/setup.sh)"
command -v mosquitto_pub >/dev/null || bail "mosquitto_pub is installed"

TOKEN=srv-token-5d2e
HTTP_TOKEN=it-outbound-9c1
DEV='GID_test@@@a0_85_e3_f4_49_34@@@0f8e1c2d'
OTHER='GID_test@@@a0_85_e3_f4_49_99@@@0f8e1c2d'

# server NAME ARGS...: an SDK server; sets SRV_PORT.
server() {
    local name=$1
    shift
    peer_log "$GW_TMP/$name.log"
    node "$src/tests/mcp/outbound_server.mjs" --port 0 "$@" \
        >"$GW_TMP/$name.log" 2>&1 &
    wait_for_ready $! "$GW_TMP/$name.log" '^listening [0-9]+' ||
        bail "MCP server $name starts"
    SRV_PORT=$(awk '/^listening/{print $2; exit}' "$GW_TMP/$name.log")
}
server sse --token "$TOKEN"
SSE_PORT=$SRV_PORT
server json --json
JSON_PORT=$SRV_PORT
server hang --json # alone: it counts the requests open at once
HANG_PORT=$SRV_PORT
DOWN_PORT=$(free_port) # nothing listens there

start_broker broker || bail "broker starts"
start_backend backend --turn-frames 5 --tts-frames 4 ||
    bail "mock backend starts"
HTTP_PORT=$(free_port)
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "$(
    cat <<JSON
"mcp": { "outbound_max_pending": 3, "outbound_session_idle_ms": 2500,
           "outbound_max_response_bytes": 65536 },
  "mcp_servers": [
    { "name": "tools", "url": "http://127.0.0.1:$SSE_PORT/mcp",
      "auth": { "scheme": "bearer", "token": "$TOKEN" }, "timeout_ms": 1500 },
    { "name": "jsontools", "url": "http://127.0.0.1:$JSON_PORT/mcp" },
    { "name": "down", "url": "http://127.0.0.1:$DOWN_PORT/mcp" },
    { "name": "badauth", "url": "http://127.0.0.1:$SSE_PORT/mcp",
      "auth": { "scheme": "bearer", "token": "wrong" } },
    { "name": "garbage", "url": "http://127.0.0.1:$JSON_PORT/raw/garbage" },
    { "name": "wrongid", "url": "http://127.0.0.1:$JSON_PORT/raw/wrongid" },
    { "name": "noanswer", "url": "http://127.0.0.1:$JSON_PORT/raw/noanswer" },
    { "name": "status500", "url": "http://127.0.0.1:$JSON_PORT/raw/status500" },
    { "name": "badsid", "url": "http://127.0.0.1:$JSON_PORT/raw/badsid" },
    { "name": "badversion",
      "url": "http://127.0.0.1:$JSON_PORT/raw/badversion" },
    { "name": "unknownversion",
      "url": "http://127.0.0.1:$JSON_PORT/raw/unknownversion" },
    { "name": "hang", "url": "http://127.0.0.1:$HANG_PORT/raw/hang",
      "timeout_ms": 1500, "max_connections": 2 },
    { "name": "hang3", "url": "http://127.0.0.1:$HANG_PORT/raw/hang",
      "timeout_ms": 1500 },
    { "name": "private", "url": "http://127.0.0.1:$SSE_PORT/mcp",
      "auth": { "scheme": "bearer", "token": "$TOKEN" },
      "allow": { "client_ids": ["$OTHER"] } }
  ]
JSON
)"
sed -i "s/\"http\": { \"port\": 0 }/\"http\": { \"port\": $HTTP_PORT, \"token\": \"$HTTP_TOKEN\" }/" "$cfg"
check "the config with mcp_servers loads" "$GW" -c "$cfg" --check-config
start_gateway gw "$cfg" || bail "gateway starts"

# What the gateway publishes to the device, one message a line.
DOWN=$GW_TMP/down.txt
peer_log "$DOWN"
mosquitto_sub -p "$BROKER_PORT" -i it-device-listener -t "devices/$DEV/down" \
    >"$DOWN" 2>&1 &
wait_for_line "$GW_TMP/broker.log" "it-device-listener 0 devices/" ||
    bail "the device listens on its down topic"

# send ENDPOINT PAYLOAD: the device's mcp envelope to ENDPOINT.
send() {
    mosquitto_pub -p "$BROKER_PORT" -i "$DEV" -t "devices/$DEV/up" \
        -m "{\"type\":\"mcp\",\"endpoint\":\"$1\",\"payload\":$2}"
}
# call ENDPOINT ID TOOL ARGS [META]: a tools/call from the device.
call() {
    send "$1" "{\"jsonrpc\":\"2.0\",\"id\":$2,\"method\":\"tools/call\",\"params\":{\"name\":\"$3\",\"arguments\":$4${5:+,\"_meta\":$5}}}"
}
# answer ID: the line answering the device's request ID (as written).
answer() {
    jq -c --argjson id "$1" 'select(.payload.id == $id and
        (.payload | has("result") or has("error")))' "$DOWN" 2>/dev/null |
        tail -n 1
}
# answered ID FILTER: waits for the answer to ID, then FILTER on it.
answered() {
    local id=$1 filter=$2 line
    wait_until "" has_json "$DOWN" "select(.payload.id == $id and
        (.payload | has(\"result\") or has(\"error\")))" || return 1
    line=$(answer "$id")
    [ "$(jq -r "$filter" <<<"$line")" = true ] ||
        { gw_note "answer to $id: $line"; return 1; }
}
stats() {
    curl -fsS --max-time 5 "http://127.0.0.1:$1/stats"
}
stat_at_least() { # PORT FIELD N
    [ "$(stats "$1" | jq -r ".$2")" -ge "$3" ]
}

# ---- through to the server and back ----
send tools '{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"dev","version":"1"}}}'
check "the device's initialize gets the server's initialize result" \
    answered '"init-1"' '.type == "mcp" and .endpoint == "tools" and
        .payload.result.serverInfo.name == "outbound-test"'
send tools '{"jsonrpc":"2.0","method":"notifications/initialized"}'
call tools 7 echo '{"text":"hi"}'
check "a call goes through and comes back under the device's number id" \
    answered 7 '.payload.result.content[0].text == "echo: hi" and
        .endpoint == "tools" and .session_id == ""'
check "the id is written back exactly as the device wrote it" \
    grep -Eq '"id":7[,}]' "$DOWN"
call tools '"s-8"' echo '{"text":"str"}'
check "a string id comes back as that string" \
    answered '"s-8"' '.payload.result.content[0].text == "echo: str"'
check "the session was initialized once for all of that" \
    stat_at_least "$SSE_PORT" initializes 1
check "...and only once" \
    [ "$(stats "$SSE_PORT" | jq -r .initializes)" = 1 ]
check "requests after initialize carry MCP-Protocol-Version" \
    [ "$(stats "$SSE_PORT" | jq -r '.protocol_versions | join(",")')" = 2025-11-25 ]

call tools 9 count '{"steps":3}' '{"progressToken":"tok-9"}'
check "the call with a progress token is answered" \
    answered 9 '.payload.result.content[0].text == "counted 3"'
check "its three progress notifications reached the device, with endpoint" \
    [ "$(jq -c 'select(.endpoint == "tools" and
            .payload.method == "notifications/progress" and
            .payload.params.progressToken == "tok-9")' "$DOWN" | wc -l)" = 3 ]
check "progress came before the answer" \
    [ "$(grep -n 'notifications/progress' "$DOWN" | tail -n 1 | cut -d: -f1)" \
        -lt "$(grep -n '"counted 3"' "$DOWN" | cut -d: -f1)" ]

call tools 10 auth '{}'
check "the bearer token of the config was sent" \
    answered 10 ".payload.result.content[0].text == \"Bearer $TOKEN\""

call jsontools 11 echo '{"text":"json"}'
check "a server answering with application/json works too" \
    answered 11 '.payload.result.content[0].text == "echo: json" and
        .endpoint == "jsontools"'

send tools '{"jsonrpc":"2.0","id":12,"method":"ping"}'
check "ping is answered by the gateway" \
    answered 12 '.payload.result == {}'

# ---- the server forgets the session ----
curl -fsS -X POST "http://127.0.0.1:$SSE_PORT/forget" >/dev/null
call tools 13 echo '{"text":"again"}'
check "after the server forgot the session, the call still goes through" \
    answered 13 '.payload.result.content[0].text == "echo: again"'
check "...it got 404 on the old session" stat_at_least "$SSE_PORT" unknown_session 1
check "...and the gateway initialized again" stat_at_least "$SSE_PORT" initializes 2

# ---- errors ----
call tools 14 slow '{"ms":5000}'
check "a call slower than timeout_ms gets -32001" \
    answered 14 '.payload.error.code == -32001 and
        (.payload.error.message | test("did not answer within 1500 ms"))'
check "...and the server heard notifications/cancelled" \
    wait_until "" stat_at_least "$SSE_PORT" cancelled 1

call private 15 echo '{"text":"x"}'
check "an endpoint this device may not use gets -32007" \
    answered 15 '.payload.error.code == -32007 and
        .payload.error.message == "no MCP server named private for this device"
        and .endpoint == "private"'
call nosuch 16 echo '{"text":"x"}'
check "an unknown endpoint gets the same -32007" \
    answered 16 '.payload.error.code == -32007 and
        .payload.error.message == "no MCP server named nosuch for this device"'

call tools 17 big '{"bytes":9000}'
check "an answer too large for the device gets -32602 with its size" \
    answered 17 '.payload.error.code == -32602 and (.payload.error.message |
        test("too large for the device \\([0-9]+ bytes, limit 8192\\)"))'
call tools 18 big '{"bytes":70000}'
check "an answer over outbound_max_response_bytes gets -32008" \
    answered 18 '.payload.error.code == -32008 and (.payload.error.message |
        test("MCP server tools failed: .*outbound_max_response_bytes"))'

call down 19 echo '{"text":"x"}'
check "a server that is down gets -32008 with the reason" \
    answered 19 '.payload.error.code == -32008 and (.payload.error.message |
        test("^MCP server down failed: connect"))'
call badauth 20 echo '{"text":"x"}'
check "a server refusing the token gets -32008 with the HTTP status" \
    answered 20 '.payload.error.code == -32008 and (.payload.error.message |
        test("HTTP status 401"))'

# Servers that go wrong after a good initialize: -32008 with the reason.
call garbage 26 echo '{}'
check "a body that is not JSON-RPC gets -32008" \
    answered 26 '.payload.error.code == -32008 and (.payload.error.message |
        test("^MCP server garbage failed: the answer is not JSON-RPC"))'
call wrongid 27 echo '{}'
check "an answer to an id the gateway did not send gets -32008" \
    answered 27 '.payload.error.code == -32008 and (.payload.error.message |
        test("id the gateway did not send"))'
call noanswer 28 echo '{}'
check "an event stream that ends with no answer gets -32008" \
    answered 28 '.payload.error.code == -32008 and (.payload.error.message |
        test("ended with no answer"))'
check "...its notification still reached the device" \
    has_json "$DOWN" 'select(.endpoint == "noanswer" and
        .payload.method == "notifications/message" and
        .payload.params.data == "before nothing")'
call status500 29 echo '{}'
check "an HTTP status 500 gets -32008" \
    answered 29 '.payload.error.code == -32008 and (.payload.error.message |
        test("HTTP status 500"))'
call badsid 30 echo '{}'
check "a session id with a space in it fails the initialize (-32008)" \
    answered 30 '.payload.error.code == -32008 and (.payload.error.message |
        test("bad Mcp-Session-Id"))'

# The server's protocolVersion goes into every later request's
# MCP-Protocol-Version header: one with a CRLF in it would add a header.
call badversion 31 echo '{}'
check "a protocolVersion with a CRLF in it fails the initialize (-32008)" \
    answered 31 '.payload.error.code == -32008 and (.payload.error.message |
        test("^MCP server badversion failed: .*protocolVersion"))'
call unknownversion 32 echo '{}'
check "so does a version MCP never had" \
    answered 32 '.payload.error.code == -32008 and (.payload.error.message |
        test("protocolVersion the gateway does not know"))'
check "...nothing went to those servers after initialize" \
    [ "$(stats "$JSON_PORT" | jq -c '[.raw_requests.badversion,
        .raw_requests.unknownversion]')" = '[null,null]' ]
check "...and no request carried the injected header" \
    [ "$(stats "$JSON_PORT" | jq -r .injected)" = 0 ]

# The device withdraws a request: no answer, the server hears of it (the
# JSON server: no timeout_ms of 1500 to end it on its own).
before=$(stats "$JSON_PORT" | jq -r .cancelled)
calls=$(stats "$JSON_PORT" | jq -r .calls)
call jsontools 21 slow '{"ms":3000}'
wait_until "" stat_at_least "$JSON_PORT" calls $((calls + 1))
send jsontools '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21,"reason":"no longer needed"}}'
check "the device's notifications/cancelled reaches the server" \
    wait_until "" stat_at_least "$JSON_PORT" cancelled $((before + 1))

# Over outbound_max_pending (3), whatever the server: the fourth waits for
# nothing.
for id in 22 23 24; do call jsontools "$id" slow '{"ms":2000}'; done
call tools 25 echo '{"text":"over"}'
check "a request over outbound_max_pending gets -32003" \
    answered 25 '.payload.error.code == -32003'
check "...the three before it are answered" \
    answered 24 '.payload.result.content[0].text == "slept 2000"'
check "...none of them got an error" \
    [ "$(for id in 22 23 24; do answer $id; done | jq -r '.payload.error.code // empty' | wc -l)" = 0 ]
check "no answer ever went to the withdrawn request" \
    [ -z "$(answer 21)" ]

# Bad envelopes: refused and logged with the device's id (another device:
# this one's log lines are rate-limited by now), nothing sent.
lines=$(wc -l <"$DOWN")
mosquitto_pub -p "$BROKER_PORT" -i "$OTHER" -t "devices/$OTHER/up" \
    -m '{"type":"mcp","endpoint":"","payload":{"jsonrpc":"2.0","id":30,"method":"ping"}}'
check "an empty endpoint is refused and logged" \
    wait_for_line "$GW_LOG" "dev=$OTHER mcp-out.*endpoint must be a non-empty string"
mosquitto_pub -p "$BROKER_PORT" -i "$OTHER" -t "devices/$OTHER/up" \
    -m '{"type":"mcp","endpoint":"tools","payload":{"id":31,"method":"ping"}}'
check "a payload that is not JSON-RPC is refused and logged" \
    wait_for_line "$GW_LOG" "dev=$OTHER mcp-out.*payload is not JSON-RPC"
check "...neither was answered (to the device listening)" \
    [ "$(wc -l <"$DOWN")" = "$lines" ]

# ---- notifications are bounded ----
# A server that never answers notifications: 300 of them from the device
# at once are 300 connections unless they count. The server's
# max_connections (2) holds first; then the device's outbound_max_pending
# (3) on a server without a low cap. One over either is dropped and
# counted. The held ones end with the gateway's transfer timeout.
fds() { ls "/proc/$GW_PID/fd" | wc -l; }
# fds_peak COND...: the most descriptors the gateway had while waiting (5 s
# at most) for COND; FDS_PEAK.
fds_peak() {
    local i n
    FDS_PEAK=0
    for i in $(seq 1 50); do
        n=$(fds)
        [ "$n" -gt "$FDS_PEAK" ] && FDS_PEAK=$n
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
hang_open() { [ "$(stats "$HANG_PORT" | jq -r .raw_open)" = "$1" ]; }
metric() { gw_metric "http://127.0.0.1:$HTTP_PORT" "$1" "$HTTP_TOKEN"; }
metric_at_least() { [ "$(metric "$1")" -ge "$2" ]; }
# burst ENDPOINT: 300 notifications in one connection to the broker.
burst() {
    for i in $(seq 1 300); do
        echo "{\"type\":\"mcp\",\"endpoint\":\"$1\",\"payload\":{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":$i}}}"
    done | mosquitto_pub -p "$BROKER_PORT" -i "$DEV" -t "devices/$DEV/up" -l
}
call hang 33 echo '{}'
check "the never-answering server answers requests" \
    answered 33 '.payload.result == {}'
wait_until "" hang_open 0
curl -fsS -X POST "http://127.0.0.1:$HANG_PORT/reset-max" >/dev/null
fds_before=$(fds)
burst hang
check "300 notifications: all but max_connections of them dropped, counted" \
    fds_peak metric_at_least 'hybridgw_mcp_outbound_dropped_total{server="hang"}' 250
check "...the server saw max_connections (2) at once, no more" \
    [ "$(stats "$HANG_PORT" | jq -r .raw_max_open)" -eq 2 ]
check "...the gateway's descriptors grew by at most that ($fds_before -> $FDS_PEAK)" \
    [ "$FDS_PEAK" -le $((fds_before + 2 + 2)) ]
check "...the connections gauge stays at the cap" \
    [ "$(metric 'hybridgw_mcp_outbound_connections{server="hang"}')" -le 2 ]
check "...the drops were logged at a limited rate" \
    [ "$(grep -c "dev=$DEV mcp-out.*dropped: 2 connections" "$GW_LOG")" -lt 60 ]
check "the held ones end with the gateway's timeout" wait_until 10 hang_open 0

call hang3 34 echo '{}'
check "a server with the default max_connections answers requests" \
    answered 34 '.payload.result == {}'
curl -fsS -X POST "http://127.0.0.1:$HANG_PORT/reset-max" >/dev/null
burst hang3
check "300 notifications: over outbound_max_pending (3) dropped, counted" \
    wait_until 10 metric_at_least 'hybridgw_mcp_outbound_dropped_total{server="hang3"}' 250
check "...the server saw outbound_max_pending (3) at once, no more" \
    [ "$(stats "$HANG_PORT" | jq -r .raw_max_open)" -eq 3 ]
call jsontools 36 echo '{"text":"meanwhile"}'
check "...they count as the device's: a request meanwhile gets -32003" \
    answered 36 '.payload.error.code == -32003'
check "they end with the gateway's timeout too" wait_until 10 hang_open 0

# ---- idle sessions end with DELETE ----
check "idle sessions are DELETEd after outbound_session_idle_ms" \
    wait_until 20 stat_at_least "$SSE_PORT" deletes 1
check "...the JSON server's too" wait_until 20 stat_at_least "$JSON_PORT" deletes 1

metrics=$(curl -fsS -H "Authorization: Bearer $HTTP_TOKEN" \
    "http://127.0.0.1:$HTTP_PORT/metrics")
check "metrics count requests by server and outcome" \
    grep -q 'hybridgw_mcp_outbound_requests_total{server="tools",outcome="ok"} [1-9]' <<<"$metrics"
check "metrics count failures by reason" \
    grep -q 'hybridgw_mcp_outbound_failures_total{server="down",reason="connect"} 1' <<<"$metrics"
check "metrics count the refused envelopes" \
    grep -q 'hybridgw_mcp_outbound_refused_total 2' <<<"$metrics"
check "metrics count the protocolVersion failures" \
    grep -q 'hybridgw_mcp_outbound_failures_total{server="badversion",reason="protocol_version"} 1' <<<"$metrics"
check "metrics count re-initializes" \
    grep -q 'hybridgw_mcp_outbound_reinitializes_total{server="tools"} 1' <<<"$metrics"

# ---- a simulated esp-mcp device, through a conversation ----
# Its MCP link is initialized by the gateway at its hello; then it calls
# the servers itself, initialize first, as esp-mcp's client does.
SIM_ID='GID_test@@@a0_85_e3_f4_49_40@@@0f8e1c2d'
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --client-id "$SIM_ID" \
    --publish-topic 'devices/{client_id}/up' \
    --subscribe-topic 'devices/{client_id}/down' --mcp-profile esp \
    --mcp-remote-init --mcp-remote 'tools:echo:{"text":"from-sim"}' \
    --mcp-remote 'jsontools:count:{"steps":2}' \
    --mcp-remote 'private:echo:{"text":"x"}' --turns 1 --frames 5 \
    --frame-ms 20 --json >"$GW_TMP/sim.out" 2>"$GW_TMP/sim.err" &
sim_pid=$!
peer_log "$GW_TMP/sim.out" "$GW_TMP/sim.err"
wait_for_exit "$sim_pid" 60
result=$(tail -n 1 "$GW_TMP/sim.out")
device_ok "the simulated device's conversation and MCP run succeed" "$result"
check "its two calls to servers it may use succeeded" \
    jq_is "$result" .mcp_remote_ok 2
check "its call to a server it may not use failed" \
    jq_is "$result" .mcp_remote_err 1

# ---- the device goes offline: its sessions end ----
presence() { # STATE
    mosquitto_pub -p "$BROKER_PORT" -i it-presence -t "devices/$DEV/presence" \
        -m "{\"state\":\"$1\",\"conn\":1}"
}
presence online
wait_for_line "$GW_LOG" "dev=$DEV.* online" 10
deletes=$(stats "$SSE_PORT" | jq -r .deletes)
calls=$(stats "$SSE_PORT" | jq -r .calls)
call tools 35 slow '{"ms":1000}'
wait_until "" stat_at_least "$SSE_PORT" calls $((calls + 1))
presence offline
check "a device going offline ends its session (DELETE)" \
    wait_until 5 stat_at_least "$SSE_PORT" deletes $((deletes + 1))
sleep 1.6 # past its end and its timeout: an answer would have come by now
check "...and its request is dropped, not answered" [ -z "$(answer 35)" ]

# ---- shutdown with a request open ----
calls=$(stats "$SSE_PORT" | jq -r .calls)
call tools 40 slow '{"ms":20000}'
wait_until "" stat_at_least "$SSE_PORT" calls $((calls + 1))
kill -TERM "$GW_PID"
check "shutdown answers the open request with -32004" \
    answered 40 '.payload.error.code == -32004'
check "the gateway exits cleanly" wait_for_exit "$GW_PID"
check "...with status 0" [ "${EXIT_CODE:-1}" = 0 ]
check "...and no sanitizer report" not grep -qE 'ERROR: (Address|Leak)Sanitizer' "$GW_LOG"

finish
