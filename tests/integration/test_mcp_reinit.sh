#!/usr/bin/env bash
# What an MCP client set up with an esp-mcp device survives a backend's
# initialize relayed to it mid-conversation (docs/protocol.md 7.5): the
# engine (the simulator's --mcp-engine esp-mcp) then forgets its
# subscriptions, log level and the client capabilities discovery declared.
# An SDK client on /mcp/devices/{id} (tests/mcp/reinit.mjs) declares
# sampling and elicitation, subscribes to device://status and sets logging
# to info; after the mock backend's initialize (which declares sampling,
# roots and vision, not elicitation) the device's elicitation and sampling
# must still reach that client, updates and log lines still come, and the
# backend's vision still reaches the device unchanged.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
mcp_tools_ready ||
    bail "node and tests/mcp's npm packages are installed (scripts/setup.sh)"
TOKEN=it-bearer-3f8a2d
MKEY=It-Manager-Rn7Wb2
# The gateway's own vision (discovery's initialize), which the backend's
# must replace on the device, not the other way round.
GW_VISION=http://127.0.0.1:9/gw-vision/explain
BE_VISION=http://127.0.0.1:8003/mcp/vision/explain # tools/sim_backend.h

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --mcp --mcp-protocol 2025-06-18 --mcp-list-delay-ms 0 \
    --turn-frames 10 --tts-frames 4 \
    --mcp-call 'self.sim.echo:{"text":"from-backend"}'
start_gateway_api gw \
    "\"mcp\": { \"call_timeout_ms\": 5000, \"client_capabilities\": { \"vision\": { \"url\": \"$GW_VISION\", \"token\": \"gw-vision-token\" } } }" ||
    bail "gateway starts with its HTTP API"
peer_log "$GW_TMP/devices.err"

declare -A DEV_PID DEV_ID
named_device reinit e 41 --idle --mcp-engine esp-mcp --mcp-echo-tool \
    --turns 0 --frames 20
E=${DEV_ID[e]}
check "the gateway reads the device's catalog" \
    wait_for_line "$GW_LOG" "dev=$E mcp.* prompts/list: [0-9]+ items? in [0-9]+ pages?"

echo "# the MCP client sets up its subscription and level"
fifo=$GW_TMP/go
mkfifo "$fifo"
exec 7<>"$fifo" # a writer from now on: the client's stdin opens at once
left=$((GW_DEADLINE - SECONDS - 20))
node "$src/tests/mcp/reinit.mjs" --base "$BASE" --token "$TOKEN" \
    --device "$E" --deadline-ms $((left * 1000)) <"$fifo" \
    >"$GW_TMP/client.out" 2>&1 &
cpid=$!
check "the client is set up and saw an update and a log line" \
    wait_for_ready "$cpid" "$GW_TMP/client.out" '^# ready'
subs=$(count_lines "$GW_TMP/e.out" '< mcp resources/subscribe')
levels=$(count_lines "$GW_TMP/e.out" '< mcp logging/setLevel')
check "the device was subscribed once and its level set once ($subs, $levels)" \
    test "$subs" -eq 1 -a "$levels" -eq 1

echo "# a conversation: the backend's initialize reaches the device"
kill -USR1 "${DEV_PID[e]}"
check "the backend gets its tools/call answer" \
    wait_for_line "$BACKEND_EVENTS" '"ev":"mcp".*"matched":"tools/call"'
ev=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"initialize"' | tail -n 1)
check "its initialize is answered by the device" \
    jq -e '.payload.result.serverInfo.name == "sim-esp"' <<<"$ev"
# Both went right after the initialize's result, before the backend's
# tools/call: a short bound.
check "the gateway subscribed the device again after it" \
    wait_for_lines "$GW_TMP/e.out" '< mcp resources/subscribe' $((subs + 1)) 5
check "and set its level again" \
    wait_for_lines "$GW_TMP/e.out" '< mcp logging/setLevel' $((levels + 1)) 5

echo go >&7
exec 7>&-
wait_for_exit "$cpid" >/dev/null
report_lines "$GW_TMP/client.out" "${EXIT_CODE:-1}" reinit.mjs

r=$(end_device e)
device_ok "the device ends well (nothing refused by its gates)" "$r"
check "it ran as esp-mcp's engine and was initialized again ($(jq -c \
    '[.mcp_engine, .mcp_reinitializes, .mcp_samplings, .mcp_elicitations]' <<<"$r"))" \
    jq -e '.mcp_engine == "esp-mcp" and .mcp_reinitializes >= 1 and
        .mcp_samplings == 1 and .mcp_elicitations == 1' <<<"$r"
check "the backend's vision reached it unchanged ($(jq -c '.mcp.vision_url' <<<"$r"))" \
    jq -e --arg u "$BE_VISION" '.mcp.vision and .mcp.vision_url == $u and
        .mcp.vision_token == "mock-vision-token"' <<<"$r"
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
