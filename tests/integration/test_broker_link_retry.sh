#!/usr/bin/env bash
# The gateway's broker link after a loss: retries every 100-200 ms for the
# first 10 s (a broker restart takes seconds, and device messages published
# before the gateway has subscribed again are lost), then the exponential
# backoff; the link is back at once when the broker is.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

start_broker broker || bail "the broker starts"
start_backend backend
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts"

# delays: the delays (ms) of the gateway's retries logged so far.
delays() {
    sed -nE "s/.*reconnecting to 127\.0\.0\.1:$BROKER_PORT in ([0-9]+) ms.*/\1/p" \
        "$GW_LOG"
}

echo "# 1. the broker goes: the link retries quickly"
ups=$(count_lines "$GW_LOG" 'broker link up')
stop_pid "$BROKER_PID"
check "the gateway sees the broker go" wait_for_line "$GW_LOG" 'broker link down'
check "one line says retries come quickly" wait_for_line "$GW_LOG" \
    "reconnecting to 127\.0\.0\.1:$BROKER_PORT every 100-200 ms for up to 10 s"
check "ten retries within 3 s of the loss" wait_for_lines "$GW_LOG" \
    "reconnecting to 127\.0\.0\.1:$BROKER_PORT in [0-9]+ ms" 10 3
max=$(delays | sort -n | tail -n 1)
check "none of them waits more than 200 ms (longest ${max:-none})" \
    test "${max:-999999}" -le 200

echo "# 2. the broker is back: so is the link"
run_mosquitto broker "$GW_TMP/broker.conf" "$BROKER_PORT" ||
    bail "the broker restarts"
BROKER_PID=$MOSQ_PID
check "the link is up again within 1 s of the broker" \
    wait_for_lines "$GW_LOG" 'broker link up' $((ups + 1)) 1

echo "# 3. a long outage: past 10 s the backoff grows again"
n=$(delays | wc -l)
stop_pid "$BROKER_PID"
check "retries slow down after the quick window" wait_for_line "$GW_LOG" \
    "reconnecting to 127\.0\.0\.1:$BROKER_PORT in ([4-9][0-9]{2}|[0-9]{4,}) ms" 15
quick=$(delays | tail -n +$((n + 1)) | awk '$1 <= 200' | wc -l)
check "the quick ones stopped after about 10 s ($quick of them)" \
    test "$quick" -ge 40 -a "$quick" -le 110

finish
