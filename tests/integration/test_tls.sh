#!/usr/bin/env bash
# TLS end to end with a throwaway CA made here by the openssl CLI:
# mosquitto with the plugin on a TLS listener for devices (8883 in a
# deployment) and one for the gateway that also wants its client
# certificate; a stock device over TLS checking the broker's certificate;
# the gateway's MQTT link checking certificate and host name; wss://
# backends checked against backends[].ca_file. A whole conversation with
# audio both ways runs over TLS on both sides; a broker or backend
# certificate from another CA, or for another name, is refused with a log
# line that says so.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
command -v openssl >/dev/null || bail "openssl is installed"

PKI=$GW_TMP/pki
mkdir -p "$PKI"

# ca NAME: a self-signed CA, $PKI/NAME.crt and .key.
ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -days 2 -subj "/CN=hybridgw test $1" -keyout "$PKI/$1.key" \
        -out "$PKI/$1.crt" 2>>"$PKI/openssl.log"
}

# leaf NAME CA SAN [EXT]: a certificate for SAN signed by CA.
leaf() {
    local name=$1 ca=$2 san=$3 ext=${4:-serverAuth}
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=$name" -keyout "$PKI/$name.key" -out "$PKI/$name.csr" \
        2>>"$PKI/openssl.log" &&
        openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" \
            -CAkey "$PKI/$ca.key" -CAcreateserial -days 2 \
            -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' \
                "$san" "$ext") \
            -out "$PKI/$name.crt" 2>>"$PKI/openssl.log"
}

peer_log "$PKI/openssl.log"
{
    ca ca && ca rogue-ca &&
        leaf server ca 'IP:127.0.0.1,DNS:localhost' &&
        leaf rogue rogue-ca 'IP:127.0.0.1,DNS:localhost' &&
        leaf elsewhere ca 'DNS:elsewhere.example' &&
        leaf gateway ca 'DNS:hybridgw' clientAuth
} || bail "the test CA and its certificates are made"
# mosquitto may drop root for its own user before it reads them.
chmod 755 "$GW_TMP" "$PKI"
chmod 644 "$PKI"/*

# ---- the broker: one TLS listener for devices, one for the gateway ----
DEV_PORT=$(free_port)
GWL_PORT=$(free_port)
ROGUE_PORT=$(free_port)
NAME_PORT=$(free_port)
cat >"$GW_TMP/broker.conf" <<CONF
per_listener_settings false
allow_anonymous false
persistence false
set_tcp_nodelay true
log_dest stderr
log_type all
plugin $PLUGIN
plugin_opt_device_key $PLUGIN_KEY
plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS

# devices (8883 in a deployment): the broker's certificate only
listener $DEV_PORT 127.0.0.1
cafile $PKI/ca.crt
certfile $PKI/server.crt
keyfile $PKI/server.key

# the gateway: it shows its client certificate too
listener $GWL_PORT 127.0.0.1
cafile $PKI/ca.crt
certfile $PKI/server.crt
keyfile $PKI/server.key
require_certificate true

# a certificate from another CA
listener $ROGUE_PORT 127.0.0.1
certfile $PKI/rogue.crt
keyfile $PKI/rogue.key

# the right CA, another host name
listener $NAME_PORT 127.0.0.1
certfile $PKI/elsewhere.crt
keyfile $PKI/elsewhere.key
CONF
run_mosquitto broker "$GW_TMP/broker.conf" "$NAME_PORT" ||
    bail "mosquitto starts with four TLS listeners and the plugin"
BLOG=$GW_TMP/broker.log

# ---- wss:// backends: one with the right certificate, one rogue ----
start_backend secure --cert "$PKI/server.crt" --key "$PKI/server.key" \
    --turn-frames 10 --tts-frames 12
SECURE_PORT=$BACKEND_PORT SECURE_EVENTS=$BACKEND_EVENTS
check "the mock backend serves wss://" \
    has_json "$SECURE_EVENTS" '.ev == "ready" and .tls == true'
start_backend rogue --cert "$PKI/rogue.crt" --key "$PKI/rogue.key"
ROGUE_BE_PORT=$BACKEND_PORT ROGUE_EVENTS=$BACKEND_EVENTS

ROGUE_DEV='GID_tls@@@02_00_00_00_00_0f@@@rogue-route'
# gateway_config FILE PORT: the gateway on the broker's PORT over TLS
# with its client certificate; backends over wss:// with the test CA.
gateway_config() {
    GW_UDP_PORT=$(free_port --udp)
    cat >"$1" <<JSON
{
  "instance": "tls",
  "mqtt": { "host": "127.0.0.1", "port": $2, "keepalive": 10,
            "username": "$PLUGIN_GW_USER", "password": "$PLUGIN_GW_PASS",
            "tls": { "enabled": true, "ca_file": "$PKI/ca.crt",
                     "cert_file": "$PKI/gateway.crt",
                     "key_file": "$PKI/gateway.key" } },
  "udp": { "bind": "127.0.0.1", "port": $GW_UDP_PORT,
           "public_host": "127.0.0.1" },
  "backends": [
    { "name": "secure", "ca_file": "$PKI/ca.crt",
      "url": "wss://127.0.0.1:$SECURE_PORT/xiaozhi/v1/?from=mqtt_gateway" },
    { "name": "rogue", "ca_file": "$PKI/ca.crt",
      "url": "wss://127.0.0.1:$ROGUE_BE_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "routes": [
    { "match": { "client_ids": ["$ROGUE_DEV"] }, "backends": ["rogue"] },
    { "backends": ["secure"] } ],
  "http": { "port": 0 },
  "log": { "level": "debug" }
}
JSON
}

echo "# 1. the gateway's link: TLS, checked, with its client certificate"
gateway_config "$GW_TMP/gw.json" "$GWL_PORT"
start_gateway gw "$GW_TMP/gw.json" || bail "the gateway connects over TLS"
check "the broker saw the gateway's account on the TLS listener" \
    grep -q "New client connected from 127.0.0.1:[0-9]* as hybridgw-tls .*u'$PLUGIN_GW_USER'" "$BLOG"

peer_log "$GW_TMP/devices.err"
# device CLIENT_ID PORT ARGS...: a stock device over TLS; its JSON result.
device() {
    local id=$1 port=$2
    shift 2
    "$SIM" device --broker "127.0.0.1:$port" --key "$PLUGIN_KEY" \
        --client-id "$id" --json "$@" 2>>"$GW_TMP/devices.err" | tail -n 1
}

echo "# 2. a stock device over TLS, a whole conversation over wss://"
DEV='GID_tls@@@02_00_00_00_00_01@@@tls-device'
r=$(device "$DEV" "$DEV_PORT" --ca "$PKI/ca.crt" --turns 2 --fast)
device_ok "two turns over TLS on both sides" "$r"
check "uplink audio reached the backend (two turns of 10 frames)" \
    jq -se '[.[] | select(.ev == "turn" and .frames >= 10)] | length == 2' \
    "$SECURE_EVENTS"
check "downlink audio played on the device" \
    jq -e '.downlink.played >= 20 and .downlink.lost == 0' <<<"$r"
check "the backend saw a TLS connection from the gateway" \
    has_json "$SECURE_EVENTS" '.ev == "connect"'

echo "# 3. a device that checks the broker refuses a certificate it cannot trust"
r=$(device 'GID_tls@@@02_00_00_00_00_02@@@wary' "$ROGUE_PORT" \
    --ca "$PKI/ca.crt" --connect-timeout 3000 --turns 1 --fast)
check "the device does not connect to the rogue listener" \
    jq -e '.ok == false' <<<"$r"
check "and says why" grep -q 'certificate verify failed' "$GW_TMP/devices.err"

echo "# 4. a backend certificate from another CA is refused"
r=$(device "$ROGUE_DEV" "$DEV_PORT" --ca "$PKI/ca.crt" --turns 1 --fast \
    --no-reply --hello-timeout 3000)
echo "# $r"
check "the device's session does not start" jq -e '.ok == false' <<<"$r"
check "the gateway names the backend and the verification failure" \
    wait_for_line "$GW_LOG" \
    "dev=$ROGUE_DEV.*backend rogue: connect failed: certificate: "
check "its session ends: backend unavailable" \
    wait_for_line "$GW_LOG" "dev=$ROGUE_DEV.*session ended: backend unavailable"
# Before any server hello the firmware has no channel to close: the
# goodbye arrives and is ignored, as the firmware ignores it.
check "the device gets a goodbye" \
    jq -e '.goodbye_received or .messages.goodbye_ignored >= 1' <<<"$r"
check "the rogue backend never saw a WebSocket" \
    not has_json "$ROGUE_EVENTS" '.ev == "connect"'

echo "# 5. the gateway's link refuses a broker it cannot trust"
# bad_link NAME PORT WHAT: a second gateway on PORT must log a
# certificate failure and never come up.
bad_link() {
    local name=$1 port=$2 pid log=$GW_TMP/$1.log
    gateway_config "$GW_TMP/$name.json" "$port"
    peer_log "$log"
    "$GW" -c "$GW_TMP/$name.json" >"$log" 2>&1 &
    pid=$!
    check "$3: the gateway logs the certificate failure" \
        wait_for_line "$log" "mqtt\] 127.0.0.1:$port: .*certificate verify failed"
    check "$3: with a clear line" \
        wait_for_line "$log" "TLS with 127.0.0.1:$port failed"
    check "$3: its broker link never comes up" \
        not grep -q 'broker link up' "$log"
    check "$3: the broker never got its CONNECT" \
        test "$(count_lines "$BLOG" 'as hybridgw-tls ')" -eq 1
    stop_pid "$pid"
}
bad_link gw-rogue "$ROGUE_PORT" "another CA"
bad_link gw-name "$NAME_PORT" "another host name"

echo "# 6. the first gateway is still serving"
r=$(device 'GID_tls@@@02_00_00_00_00_03@@@after' "$DEV_PORT" \
    --ca "$PKI/ca.crt" --turns 1 --fast)
device_ok "a new device over TLS" "$r"
stop_pid "$GW_PID"
check "the gateway drained with exit 0" test "$EXIT_CODE" -eq 0
finish
