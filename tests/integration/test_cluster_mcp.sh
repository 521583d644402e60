#!/usr/bin/env bash
# Any instance serves the API and the MCP server for every device
# (docs/protocol.md section 10.7): three gateways in cluster.mode "hash"
# on one mosquitto with the plugin, nine idle devices. Each device's MCP
# client runs on its owner only (the device is initialized once); the
# others hold its catalog as the owner sent it. A manager-api command
# and MCP calls (the SDK client, on /mcp and /mcp/devices/{id}) through
# every instance reach every device, carried to the owner over the
# broker; a device that answers too late and one that is offline give
# the same errors through a non-owner as through the owner.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
mcp_tools_ready ||
    bail "node and tests/mcp's npm packages are installed (scripts/setup.sh)"

TOKEN=it-bearer-c1u5
MKEY=It-Manager-Cl9x
CALL_MS=2000 # mcp.call_timeout_ms: the late device's case
NAMES=(gw-a gw-b gw-c)

start_plugin_broker broker || bail "the broker starts"
start_backend mock --turn-frames 3 --tts-frames 3 --no-decode ||
    bail "the backend starts"

declare -A HTTP PID LOGF DEV_ID DEV_PID OWNER
for n in "${NAMES[@]}"; do
    write_gateway_config "$GW_TMP/$n.in"
    HTTP[$n]=$(free_port)
    jq --arg n "$n" --argjson h "${HTTP[$n]}" --arg t "$TOKEN" \
        --arg m "$MKEY" --argjson c "$CALL_MS" \
        '.mqtt.client_id = "hybridgw-" + $n | .log.level = "debug"
         | .http = { "port": $h, "token": $t, "manager_key": $m }
         | .mcp = { "call_timeout_ms": $c }
         | .cluster = { "mode": "hash", "instance": $n }' \
        "$GW_TMP/$n.in" >"$GW_TMP/$n.json"
    start_gateway "$n" "$GW_TMP/$n.json" || bail "instance $n starts"
    PID[$n]=$GW_PID
    LOGF[$n]=$GW_LOG
done
base() { echo "http://127.0.0.1:${HTTP[$1]}"; }
metric() { gw_metric "$(base "$1")" "$2" "$TOKEN"; }
sees3() {
    [ "$(metric "$1" 'hybridgw_cluster_instances{state="running"}')" = 3 ]
}
for n in "${NAMES[@]}"; do
    check "$n runs and sees three running instances" wait_until 20 sees3 "$n"
done

sdk() { mcp_client --token "$TOKEN" "$@" 2>>"$GW_TMP/sdk.err"; }
peer_log "$GW_TMP/sdk.err"
tok=$(daily_token "$MKEY")
# mgr INSTANCE PATH BODY: POST with the daily token; prints the status,
# the body goes to $GW_TMP/mgr.json.
mgr() {
    curl -sS --max-time 30 -o "$GW_TMP/mgr.json" -w '%{http_code}' \
        -X POST -H "Authorization: Bearer $tok" \
        -H 'Content-Type: application/json' --data "$3" "$(base "$1")$2"
}
echo_cmd() {
    printf '{"type":"mcp","payload":{"method":"tools/call","params":{"name":"self.sim.echo","arguments":{"text":"%s"}}}}' "$1"
}
# tool_count INSTANCE ID: the device's tool count as INSTANCE knows it.
tool_count() {
    curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$(base "$1")/api/devices/$2" | jq -r '.tool_count // 0'
}
known_everywhere() {
    local x
    for x in "${NAMES[@]}"; do
        [ "$(tool_count "$x" "$1")" -gt 0 ] || return 1
    done
}

echo "# 1. nine devices: one MCP client each, the catalog on every instance"
devs=(d1 d2 d3 d4 d5 d6 d7 d8 d9)
i=0
for d in "${devs[@]}"; do
    i=$((i + 1))
    named_device cl "$d" "3$i" --idle --mcp-echo-tool
done
for d in "${devs[@]}"; do
    id=${DEV_ID[$d]}
    wait_until 20 grep -qE "dev=$id mcp.* [0-9]+ tools? in" \
        "${LOGF[gw-a]}" "${LOGF[gw-b]}" "${LOGF[gw-c]}"
    owner=
    for n in "${NAMES[@]}"; do
        if grep -qE "dev=$id mcp.* [0-9]+ tools? in" "${LOGF[$n]}"; then
            owner="$owner$n "
        fi
    done
    OWNER[$d]=${owner% }
done
for d in "${devs[@]}"; do echo "#   $d: read by ${OWNER[$d]}"; done
bad=0
for d in "${devs[@]}"; do
    case ${OWNER[$d]} in gw-a | gw-b | gw-c) ;; *) bad=$((bad + 1)) ;; esac
done
check "each device's tools were read by exactly one instance" test "$bad" = 0
owners=$(printf '%s\n' "${OWNER[@]}" | sort -u | wc -l)
check "the nine are spread over the three instances ($owners owners)" \
    test "$owners" -eq 3
inits=0
for d in "${devs[@]}"; do
    k=$(grep -c '< mcp initialize ' "$GW_TMP/$d.out" || true)
    [ "$k" = 1 ] || inits=$((inits + 1))
done
check "each device was initialized once, by its owner only" test "$inits" = 0
missing=0
for d in "${devs[@]}"; do
    wait_until 15 known_everywhere "${DEV_ID[$d]}" || missing=$((missing + 1))
done
check "every instance knows every device's tools" test "$missing" = 0
n_a=$(tool_count gw-a "${DEV_ID[d1]}") n_b=$(tool_count gw-b "${DEV_ID[d1]}")
n_c=$(tool_count gw-c "${DEV_ID[d1]}")
check "the same count everywhere ($n_a $n_b $n_c)" \
    test "$n_a" = "$n_b" -a "$n_b" = "$n_c"

echo "# 2. a manager-api command through each instance to each device"
fails=0
for n in "${NAMES[@]}"; do
    for d in "${devs[@]}"; do
        code=$(mgr "$n" "/api/commands/${DEV_ID[$d]}" "$(echo_cmd "$n-$d")")
        if [ "$code" != 200 ] || ! jq -e --arg t "$n-$d" \
            '.success == true and (.. | strings | select(. == $t))' \
            "$GW_TMP/mgr.json" >/dev/null; then
            fails=$((fails + 1))
            echo "#   $n -> $d: $code $(head -c 200 "$GW_TMP/mgr.json")"
        fi
    done
done
check "27 of 27 commands answered with the device's own echo" test "$fails" = 0
for n in "${NAMES[@]}"; do
    out=$(metric "$n" 'hybridgw_cluster_requests_total{direction="out"}')
    in=$(metric "$n" 'hybridgw_cluster_requests_total{direction="in"}')
    echo "#   $n: carried out $out, served for others $in"
    check "$n carried requests out and served others'" test "$out" -gt 0 -a "$in" -gt 0
done

fails=0
for n in "${NAMES[@]}"; do
    code=$(curl -sS --max-time 10 -o "$GW_TMP/push.json" -w '%{http_code}' \
        -X POST -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' \
        --data "{\"type\":\"alert\",\"status\":\"S\",\"message\":\"from $n\",\"emotion\":\"happy\"}" \
        "$(base "$n")/api/devices/${DEV_ID[d1]}/commands")
    [ "$code" = 200 ] &&
        wait_for_line "$GW_TMP/d1.out" "< alert status=S message=from $n " ||
        fails=$((fails + 1))
done
check "an alert to d1 (${OWNER[d1]}'s) through each instance reaches it" \
    test "$fails" = 0
code=$(curl -sS --max-time 20 -o "$GW_TMP/bc.json" -w '%{http_code}' \
    -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data '{"to":{"all":true},"message":{"type":"mcp","payload":{"method":"tools/call","params":{"name":"self.sim.echo","arguments":{"text":"bc"}}}}}' \
    "$(base gw-c)/api/broadcast")
echo "#   broadcast: $code $(jq -c '{sent, failed}' "$GW_TMP/bc.json" 2>/dev/null)"
check "a broadcast tools/call through gw-c is answered by all nine devices" \
    jq -e '.sent == 9 and .failed == 0 and
        ([.results[] | select(.success and (tostring | test("bc")))] | length == 9)' \
    "$GW_TMP/bc.json"

echo "# 3. MCP clients through each instance"
for n in "${NAMES[@]}"; do
    r=$(sdk --url "$(base "$n")/mcp")
    k=$(jq '[.tools[] | select(endswith(".self.sim.echo"))] | length' <<<"$r")
    check "$n's /mcp lists the echo tool of all nine devices ($k)" test "$k" = 9
done
fails=0
for n in "${NAMES[@]}"; do
    for d in "${devs[@]}"; do
        [ "${OWNER[$d]}" = "$n" ] && continue
        r=$(sdk --url "$(base "$n")/mcp/devices/${DEV_ID[$d]}" --no-list \
            --call "self.sim.echo:{\"text\":\"mcp-$n-$d\"}")
        jq -e --arg t "mcp-$n-$d" '.calls[0].text == $t' <<<"$r" >/dev/null ||
            { fails=$((fails + 1)); echo "#   $n -> $d: $r"; }
    done
done
check "/mcp/devices/{id} calls reach the 18 devices another instance owns" \
    test "$fails" = 0
r=$(sdk --url "$(base gw-a)/mcp")
for d in "${devs[@]}"; do [ "${OWNER[$d]}" != gw-a ] && break; done
label=$(jq -r --arg s "$(cut -d@ -f4 <<<"${DEV_ID[$d]}" | tr -d _)" \
    '[.tools[] | select(startswith($s)) | split(".")[0]][0]' <<<"$r")
r=$(sdk --url "$(base gw-a)/mcp" --no-list \
    --call "$label.self.audio_speaker.set_volume:{\"volume\":37}" \
    --call "$label.self.get_device_status")
check "/mcp on gw-a sets $d's volume (owned by ${OWNER[$d]}) and reads it back" \
    jq -e '.calls[0].ok and (.calls[1].text | fromjson |
        .audio_speaker.volume == 37)' <<<"$r"

echo "# 4. the same errors through a non-owner"
named_device cl late 3a --idle --mcp-call-delay-ms 600000
L=${DEV_ID[late]}
wait_until 15 known_everywhere "$L" || true
lo=
for n in "${NAMES[@]}"; do
    grep -qE "dev=$L mcp.* [0-9]+ tools? in" "${LOGF[$n]}" && lo=$n
done
for other in "${NAMES[@]}"; do [ "$other" != "$lo" ] && break; done
echo "#   late is ${lo:-?}'s; asked through $other"
r=$(sdk --url "$(base "$other")/mcp/devices/$L" --no-list \
    --call self.get_device_status)
check "a call through $other to a late device ends -32001" \
    jq_is "$r" '.calls[0].error.code' -32001
check "after the owner's mcp.call_timeout_ms ($(jq .calls[0].ms <<<"$r") ms)" \
    jq -e ".calls[0].ms >= $CALL_MS - 100 and .calls[0].ms < $CALL_MS + 15000" <<<"$r"
status_cmd='{"type":"mcp","payload":{"method":"tools/call","params":{"name":"self.get_device_status","arguments":{}}}}'
code_o=$(mgr "$lo" "/api/commands/$L" "$status_cmd")
body_o=$(jq -c . "$GW_TMP/mgr.json")
code_n=$(mgr "$other" "/api/commands/$L" "$status_cmd")
body_n=$(jq -c . "$GW_TMP/mgr.json")
echo "#   owner: $code_o $body_o"
echo "#   other: $code_n $body_n"
check "the command times out alike through the owner and through another" \
    test "$code_o" = 500 -a "$code_n" = 500 -a "$body_o" = "$body_n"
check "with the timeout's own words" grep -q 'did not answer in time' "$GW_TMP/mgr.json"
end_device late >/dev/null
gone=GID_test@@@02_00_00_00_02_3f@@@cl-never
for n in "${NAMES[@]}"; do
    code=$(mgr "$n" "/api/commands/$gone" "$(echo_cmd x)")
    echo "#   $n: $code $(jq -c . "$GW_TMP/mgr.json")"
    check "an unknown device through $n: 500 saying offline" \
        test "$code" = 500 -a "$(jq -r .error "$GW_TMP/mgr.json")" != null
done

echo "# 5. nothing left waiting, every instance healthy"
for n in "${NAMES[@]}"; do
    check "$n refused no message from the others" \
        test "$(metric "$n" hybridgw_cluster_messages_refused_total)" = 0
    check "$n still answers /healthz" \
        curl -fsS -o /dev/null --max-time 5 "$(base "$n")/healthz"
done
for d in "${devs[@]}"; do end_device "$d" >/dev/null; done
for n in "${NAMES[@]}"; do
    stop_pid "${PID[$n]}"
    check "$n stops cleanly (exit $EXIT_CODE)" test "$EXIT_CODE" = 0
done
finish
