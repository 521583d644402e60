#!/usr/bin/env bash
# The UDP path doctor (docs/protocol.md section 4.6) on real parts:
# mosquitto with the plugin (which tells the gateway each device's
# address), the gateway, the mock backend and stock devices whose UDP
# path is broken in one way each. Some seconds after its server hello a
# device without valid audio gets one warning line naming it, the address
# it was told and the one the broker saw, and the likely cause; the same
# in GET /api/devices/{id} (udp) and /metrics (hybridgw_udp_doctor_total):
#   a) it never sends UDP: nothing;
#   b) its datagrams do not decrypt: undecryptable;
#   c) they name an ssrc that is not its session's: unknown_ssrc;
#   d) a NAT rebinding midway is followed, and no warning comes;
#   e) it was told a private address this host does not have (and sends
#      where it can): advertised_address;
#   f) udp.doctor_after_s 0 turns the doctor off;
#   g) --check-config warns of a loopback udp.public_host with a udp.bind
#      that is not loopback.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
start_plugin_broker broker || bail "broker with the plugin starts"
# A turn ends only on the device's listen stop, which an endless speaker
# never sends: sessions stay live while the test looks.
start_backend backend --turn-frames 0
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
TOKEN=udp-doctor-token
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg"
# with_udp JQ_ASSIGNMENTS: the config with the HTTP API and these udp keys.
with_udp() {
    jq --argjson port "$HTTP_PORT" --arg token "$TOKEN" \
        ".http = {port: \$port, listen: \"127.0.0.1\", token: \$token} | $1" \
        "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
}
with_udp '.udp.doctor_after_s = 2'
start_gateway gw "$cfg" || bail "gateway starts"
wait_for_http "$BASE/healthz" || bail "the HTTP API answers"
peer_log "$GW_TMP/devices.err"

declare -A DEV_ID DEV_PID
api() { curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE$1"; }
doctor_metric() {
    gw_metric "$BASE" "hybridgw_udp_doctor_total{cause=\"$1\"}" "$TOKEN"
}
active() {
    api "/api/devices/$1" | jq -e '.udp != null' >/dev/null 2>&1
}
# doctor NAME MAC CAUSE DEVICE_ARGS...: a device in a session whose UDP is
# broken so; checks the one warning line, /api and /metrics for CAUSE.
doctor() {
    local name=$1 mac=$2 cause=$3 id before line n doc
    shift 3
    before=$(doctor_metric "$cause")
    named_device udp "$name" "$mac" --frames 0 --turn-timeout 600000 "$@"
    id=${DEV_ID[$name]}
    check "$name: its session is active" wait_until "" active "$id"
    line="dev=$id .*no valid UDP audio [0-9]+ ms after the server hello"
    check "$name: the doctor warns" wait_for_line "$GW_LOG" "$line"
    n=$(count_lines "$GW_LOG" "$line")
    check "$name: once, with cause $cause, naming its MAC, the advertised address and where the broker saw it" \
        test "$n" = 1 -a "$(grep -cE "$line.*mac 02:00:00:00:02:$mac was told udp $ADVERTISED, the broker saw it at 127\.0\.0\.1; cause $cause: " "$GW_LOG")" = 1
    grep -E "$line" "$GW_LOG" | sed 's/^/#   /'
    doc=$(api "/api/devices/$id")
    check "$name: GET /api/devices/{id} has udp.state no_audio and the cause" \
        jq_is "$doc" '[.udp.state, .udp.diagnosis.cause, .udp.advertised] | join(" ")' \
        "no_audio $cause $ADVERTISED"
    echo "#   udp: $(jq -c .udp <<<"$doc")"
    check "$name: hybridgw_udp_doctor_total{cause=\"$cause\"} counts it" \
        test "$(doctor_metric "$cause")" = $((before + 1))
    UDP_DOC=$doc
    end_device "$name" >/dev/null
}

ADVERTISED=127.0.0.1:$GW_UDP_PORT
echo "# a. a device that never sends UDP"
doctor never 11 nothing --no-udp
check "never: no packets, no last packet" \
    jq_is "$UDP_DOC" '[.udp.packets, .udp.last_packet_age_ms] | join(" ")' "0 "

echo "# b. a device whose datagrams do not decrypt"
doctor wrongkey 12 undecryptable --udp-wrong-key
check "wrongkey: the datagrams were counted, from the device" \
    jq_is "$UDP_DOC" '.udp.diagnosis.undecryptable > 0 and (.udp.diagnosis.from | startswith("127.0.0.1:"))' true

echo "# c. a device whose datagrams name another ssrc"
doctor stale 13 unknown_ssrc --udp-stale-ssrc
check "stale: the unknown ssrcs from its address were counted" \
    jq_is "$UDP_DOC" '.udp.diagnosis.unknown_ssrc > 0' true

echo "# d. a NAT rebinding after 10 packets: followed, no warning"
moves=$(gw_metric "$BASE" hybridgw_udp_address_moves_total "$TOKEN")
named_device udp rebind 14 --frames 0 --turn-timeout 600000 --udp-rebind 10
id=${DEV_ID[rebind]}
check "rebind: the gateway follows the device's new port" \
    wait_for_line "$GW_LOG" "dev=$id .*device address moved 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:[0-9]+"
sleep_past() { # the doctor's look has come for the device's session
    api "/api/devices/$id" | jq -e '.udp.state == "ok" and .udp.packets > 40' >/dev/null
}
check "rebind: udp.state ok with its packets counted" wait_until "" sleep_past
check "rebind: hybridgw_udp_address_moves_total counts the move" \
    test "$(gw_metric "$BASE" hybridgw_udp_address_moves_total "$TOKEN")" -gt "$moves"
check "rebind: no doctor line for it" not grep -q "dev=$id .*no valid UDP audio" "$GW_LOG"
echo "#   udp: $(api "/api/devices/$id" | jq -c .udp)"
end_device rebind >/dev/null

echo "# e. told a private address this host does not have"
reload_with() {
    local before
    before=$(count_lines "$GW_LOG" 'config.*reloaded')
    with_udp "$1"
    kill -HUP "$GW_PID"
    wait_for_lines "$GW_LOG" 'config.*reloaded' $((before + 1))
}
reload_with '.udp.public_host = "10.255.255.1"' || bail "the gateway reloads"
ADVERTISED=10.255.255.1:$GW_UDP_PORT
# The device sends where it can reach, 127.0.0.1, to a port nobody reads.
doctor private 15 advertised_address --udp-send-to "127.0.0.1:$(free_port --udp)"
check "private: the line says why" \
    grep -q "cause advertised_address: udp.public_host 10.255.255.1 is a private address, which the device at 127.0.0.1 cannot reach" "$GW_LOG"

echo "# f. udp.doctor_after_s 0: off"
reload_with '.udp.public_host = "127.0.0.1" | .udp.doctor_after_s = 0' ||
    bail "the gateway reloads"
total() { gw_metric "$BASE" hybridgw_udp_doctor_total "$TOKEN"; }
named_device udp off 16 --frames 0 --turn-timeout 600000 --no-udp
id=${DEV_ID[off]}
check "off: its session is active" wait_until "" active "$id"
# Bounded by the session, not by a sleep: its idle timer has a second
# look at the doctor's time, which must stay silent (2 s, as before).
waited() { (($(date +%s%N) / 1000000 >= $1)); }
check "off: 3 s pass" wait_until "" waited $(($(date +%s%N) / 1000000 + 3000))
check "off: no doctor line, udp.state waiting" \
    jq_is "$(api "/api/devices/$id")" '.udp.state' waiting
check "off: no new doctor line" not grep -q "dev=$id .*no valid UDP audio" "$GW_LOG"
end_device off >/dev/null

echo "# g. --check-config"
jq '.udp.bind = "0.0.0.0" | .udp.public_host = "127.0.0.1"' "$cfg" >"$GW_TMP/wild.json"
"$GW" --check-config -c "$GW_TMP/wild.json" >"$GW_TMP/check.out" 2>&1
check "--check-config warns of a loopback udp.public_host on a wildcard udp.bind" \
    grep -q "warning: udp.public_host: 127.0.0.1 is a loopback address while udp.bind 0.0.0.0 is not loopback" \
    "$GW_TMP/check.out"
jq '.udp.bind = "0.0.0.0" | .udp.public_host = "0.0.0.0"' "$cfg" >"$GW_TMP/wild.json"
"$GW" --check-config -c "$GW_TMP/wild.json" >"$GW_TMP/check.out" 2>&1
check "and of an unspecified one" \
    grep -q "warning: udp.public_host: 0.0.0.0 is unspecified" "$GW_TMP/check.out"
"$GW" --check-config -c "$cfg" >"$GW_TMP/check.out" 2>&1
check "but not of loopback on loopback" not grep -q "udp.public_host" "$GW_TMP/check.out"

finish
