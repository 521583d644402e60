#!/usr/bin/env bash
# hybridgw soak: many simulated devices churning against one gateway for a
# long time, the gateway's resources sampled every minute, and at the end
# a check that nothing leaked and every counter balances.
#
#   bench/soak.sh                       1000 devices for 30 minutes
#   SOAK_MINUTES=5 SOAK_DEVICES=300 bench/soak.sh
#
# The parts: mosquitto with the hybridgw broker plugin (devices log in
# with passwords made from the device key, as stock firmware does), the
# mock backend (hybridgw-sim backend), one gateway, and two load
# generators in churn mode (hybridgw-sim load --churn):
# - the main one: SOAK_DEVICES identities, each conversing (hello, audio
#   up, a spoken reply down), ending, pausing and reconnecting, again and
#   again. Their behaviours are drawn at random (--churn-mix): most say
#   goodbye; some drop UDP and disconnect without a goodbye; some go quiet
#   with MQTT still up (the gateway must time the session out); some
#   publish malformed JSON mid-conversation; some send replayed, forged
#   and junk UDP datagrams; some log in with a wrong password.
# - the "cut" one: SOAK_CUT_DEVICES more identities, killed with SIGKILL
#   every SOAK_CUT_EVERY_S seconds and restarted with the same identities:
#   MQTT connections cut without DISCONNECT, UDP stopping mid-stream.
#
# Every SOAK_SAMPLE_S seconds (60) it samples the gateway's RSS and open
# descriptors (/proc), and from GET /metrics its loop handles, active
# timers, heap in use (glibc builds), live sessions, sessions started and
# ended, backend connections and devices online. When the churn ends and the devices have gone, it
# checks (the verdict):
# - balanced: live sessions 0, sessions started = sum of sessions ended,
#   backend connections 0, devices online 0;
# - nothing leaked: open descriptors and loop handles back to what they
#   were before the first device came, heap in use (glibc mallinfo2) within
#   SOAK_HEAP_SLACK_KB (1024) KiB of it;
# - flat: RSS at the last sample of the churn within SOAK_RSS_TOL_PCT (10)
#   % of the sample at the end of the warm-up (SOAK_WARMUP_MIN, default 5
#   minutes, at most a third of the run), or, when RSS rose more, the heap
#   segment ([heap] in smaps, which bounds that rise: glibc's arena, whose
#   pages RSS counts once touched) within the same tolerance; descriptors,
#   loop handles and heap in use follow the live sessions, which the
#   random churn makes wobble, so what is held flat is their excess over
#   the idle baseline per live session: at every sample after the warm-up
#   within SOAK_FD_TOL_PCT (20) % of its value at the warm-up sample;
# - the gateway exits 0 on SIGTERM, and with a sanitizer build its output
#   has no AddressSanitizer or LeakSanitizer report.
# It writes samples.csv, samples.md (a table), verdict.txt and the peers'
# logs to SOAK_OUT (default: a directory under /tmp, printed) and exits 0
# when the verdict is PASS.
#
# Binaries: SOAK_BUILD_DIR (default build/plain, built if missing) gives
# hybridgw-sim and the broker plugin; SOAK_GW (default the gateway of that
# build) the gateway, e.g. an ASan build's. They are copied to the
# temporary directory first, so a rebuild during the run changes nothing.

# The whole script is one block, read before it runs: editing the file
# during a long run does not change the run.
{
set -euo pipefail
cd "$(dirname "$0")/.."

devices=${SOAK_DEVICES:-1000}
minutes=${SOAK_MINUTES:-30}
sample_s=${SOAK_SAMPLE_S:-60}
cut_devices=${SOAK_CUT_DEVICES:-50}
cut_every=${SOAK_CUT_EVERY_S:-90}
pause_ms=${SOAK_PAUSE_MS:-4000}
udp_idle_ms=${SOAK_UDP_IDLE_MS:-20000}
hold_ms=${SOAK_HOLD_MS:-$((udp_idle_ms + 10000))}
mix=${SOAK_MIX:-goodbye=70,nobye=8,silent=7,badjson=5,badudp=5,badkey=5}
seed=${SOAK_SEED:-$(date +%s)}
rss_tol=${SOAK_RSS_TOL_PCT:-10}
fd_tol=${SOAK_FD_TOL_PCT:-20}
warmup=${SOAK_WARMUP_MIN:-5}
heap_slack=${SOAK_HEAP_SLACK_KB:-1024}
if ((warmup * 3 > minutes)); then
    warmup=$((minutes / 3 > 0 ? minutes / 3 : 1))
fi
build=${SOAK_BUILD_DIR:-build/plain}
if [[ ! -x $build/tools/hybridgw-sim && $build == build/plain ]]; then
    scripts/build.sh plain >/dev/null
fi
gw_src=${SOAK_GW:-$build/gateway/hybridgw}

. scripts/lib.sh
tmp=$GW_TMP
out=${SOAK_OUT:-$(mktemp -d /tmp/hybridgw-soak.XXXXXX)}
mkdir -p "$out"

# Frozen copies: other work may rebuild the tree during a long run.
mkdir -p "$tmp/bin"
cp "$gw_src" "$tmp/bin/hybridgw"
cp "$build/tools/hybridgw-sim" "$tmp/bin/hybridgw-sim"
cp "$build/broker/hybridgw_broker.so" "$tmp/bin/hybridgw_broker.so"
# mosquitto started as root drops to its own user before loading plugins.
chmod a+rx "$tmp" "$tmp/bin"
gw=$tmp/bin/hybridgw
sim=$tmp/bin/hybridgw-sim
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit="$commit with uncommitted changes"
fi
sanitized=no
if ldd "$gw" 2>/dev/null | grep libasan >/dev/null; then
    sanitized=yes
fi

metrics() {
    curl -fsS --max-time 10 -H 'Authorization: Bearer soak' \
        "http://127.0.0.1:$hp/metrics"
}

# metric_sum NAME [FILE]: the sum of every sample of the family NAME.
metric_sum() {
    awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $NF }
        END { printf "%d\n", s }' "${2:-$tmp/m}"
}

# shellcheck disable=SC2317 # called through wait_until
metric_is() {
    metrics >"$tmp/m" 2>/dev/null && [[ $(metric_sum "$1") == "$2" ]]
}

rss_kb() {
    awk '/^VmRSS/ { print $2 }' "/proc/$1/status"
}

fds() {
    find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l
}

# port_open PORT: true when something accepts TCP connections on it.
# heap_segment_kb PID: the size of the process's [heap] mapping (what
# glibc took from the kernel with brk; RSS counts only its touched pages).
heap_segment_kb() {
    awk '/\[heap\]$/ { f = 1 } f && /^Size:/ { print $2; f = 0; n = 1 }
        END { if (!n) print 0 }' "/proc/$1/smaps" 2>/dev/null || echo 0
}

# shellcheck disable=SC2317 # called through wait_until
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

key=soak-device-key
bp=$("$sim" free-port)
wp=$("$sim" free-port)
up=$("$sim" free-port --udp)
hp=$("$sim" free-port)

cat >"$tmp/mosquitto.conf" <<CONF
listener $bp 127.0.0.1
allow_anonymous false
persistence false
set_tcp_nodelay true
max_queued_messages 10000
log_dest stderr
log_type error
log_type warning
plugin $tmp/bin/hybridgw_broker.so
plugin_opt_device_key $key
plugin_opt_gateway_username hybridgw
plugin_opt_gateway_password soak-gateway-secret
CONF
mosquitto -c "$tmp/mosquitto.conf" >"$out/mosquitto.log" 2>&1 &
mosq=$!
GW_PIDS+=("$mosq")
# Errors and warnings only (a connection a second would fill the log):
# ready is when the port accepts.
if ! wait_until 30 port_open "$bp"; then
    show_tail "$out/mosquitto.log"
    exit 1
fi

"$sim" backend --listen "127.0.0.1:$wp" --events "$tmp/backend.events" \
    --turn-frames 20 --tts-frames 20 --no-decode --log-level warn \
    >"$out/backend.log" 2>&1 &
be=$!
GW_PIDS+=("$be")
wait_for_ready "$be" "$tmp/backend.events" '"ev":"ready"' || exit 1
# The events file grows with every turn: the soak only needs "ready".
: >"$tmp/backend.events"

cat >"$tmp/gw.json" <<EOF
{ "instance": "soak",
  "mqtt": { "host": "127.0.0.1", "port": $bp,
            "username": "hybridgw", "password": "soak-gateway-secret" },
  "udp": { "bind": "127.0.0.1", "port": $up, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
    "url": "ws://127.0.0.1:$wp/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $hp, "token": "soak" },
  "limits": { "max_sessions": 100000, "udp_idle_timeout_ms": $udp_idle_ms },
  "log": { "level": "warn" } }
EOF
# A small quarantine: ASan's default (256 MiB of freed blocks held back)
# would read as growth for most of a short run.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=16} \
    "$gw" -c "$tmp/gw.json" >"$out/gateway.log" 2>&1 &
g=$!
GW_PIDS+=("$g")
wait_for_http "http://127.0.0.1:$hp/healthz" || {
    show_tail "$out/gateway.log"
    exit 1
}
wait_until 30 metric_is hybridgw_broker_up 1 || {
    echo "soak: the gateway did not reach the broker" >&2
    show_tail "$out/gateway.log"
    exit 1
}

t0=$SECONDS
header="minute,rss_kb,fds,loop_handles,active_handles,timers,sessions,started,ended,backend_conns,devices_online,udp_drops,refused,audio_packets,heap_kb,heap_segment_kb"
echo "$header" >"$out/samples.csv"

# sample LABEL: one row of samples.csv.
sample() {
    metrics >"$tmp/m" || {
        echo "soak: /metrics did not answer" >&2
        return 1
    }
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$1" \
        "$(rss_kb "$g")" "$(fds "$g")" \
        "$(metric_sum hybridgw_loop_handles)" \
        "$(metric_sum hybridgw_loop_active_handles)" \
        "$(metric_sum hybridgw_loop_active_timers)" \
        "$(metric_sum hybridgw_sessions)" \
        "$(metric_sum hybridgw_sessions_started_total)" \
        "$(metric_sum hybridgw_sessions_ended_total)" \
        "$(metric_sum hybridgw_backend_connections)" \
        "$(metric_sum hybridgw_devices_online)" \
        "$(metric_sum hybridgw_udp_drops_total)" \
        "$(metric_sum hybridgw_messages_refused_total)" \
        "$(metric_sum hybridgw_audio_packets_total)" \
        "$(($(metric_sum hybridgw_heap_in_use_bytes) / 1024))" \
        "$(heap_segment_kb "$g")" >>"$out/samples.csv"
}

sample before
base_fds=$(fds "$g")
base_handles=$(metric_sum hybridgw_loop_handles)
base_heap=$(($(metric_sum hybridgw_heap_in_use_bytes) / 1024))

churn_s=$((minutes * 60))
ramp=$((devices / 10 > 50 ? devices / 10 : 50))
"$sim" load --devices "$devices" --ramp "$ramp" --churn "$churn_s" \
    --churn-mix "$mix" --churn-pause-ms "$pause_ms" \
    --churn-hold-ms "$hold_ms" --junk-udp "127.0.0.1:$up" --seed "$seed" \
    --broker "127.0.0.1:$bp" --key "$key" --duration 120 \
    --log-level error --stats-json "$out/load.json" \
    >"$out/load.out" 2>"$out/load.err" &
load=$!
GW_PIDS+=("$load")

# The cut devices: their own identities (another seed), SIGKILLed and
# restarted until the churn ends.
cut_pid=
cut_runs=0
start_cut() {
    "$sim" load --devices "$cut_devices" --ramp 0 --churn "$churn_s" \
        --churn-mix goodbye=1,nobye=0,silent=0,badjson=0,badudp=0,badkey=0 \
        --churn-pause-ms 1000 --seed $((seed + 1)) \
        --broker "127.0.0.1:$bp" --key "$key" --duration 120 \
        --log-level error >>"$out/cut.out" 2>&1 &
    cut_pid=$!
    cut_runs=$((cut_runs + 1))
}
if ((cut_devices > 0)); then
    start_cut
fi

next_sample=$((t0 + sample_s))
next_cut=$((t0 + cut_every))
end=$((t0 + churn_s))
minute=0
echo "soak: $devices devices (+$cut_devices cut) for $minutes min," \
    "seed $seed, gateway pid $g, output in $out" >&2
while ((SECONDS < end)); do
    if ((cut_devices > 0 && SECONDS >= next_cut)); then
        kill -KILL "$cut_pid" 2>/dev/null || true
        wait "$cut_pid" 2>/dev/null || true
        start_cut
        next_cut=$((SECONDS + cut_every))
    fi
    if ((SECONDS >= next_sample)); then
        minute=$((minute + 1))
        sample "$minute" || break
        tail -n 1 "$out/samples.csv" >&2
        next_sample=$((next_sample + sample_s))
    fi
    if gone "$g" || gone "$load"; then
        echo "soak: a part exited early" >&2
        break
    fi
    sleep 1
done
if ((minute < churn_s / sample_s)) && ! gone "$g"; then
    minute=$((minute + 1)) # the last one falls on the end of the churn
    sample "$minute" || true
fi
churn_end=$SECONDS

# The end: the cut devices go the hard way one last time, the main ones
# end their conversations (the load stops itself when the churn is over;
# silent ones are held at most hold_ms).
if [[ -n $cut_pid ]]; then
    kill -KILL "$cut_pid" 2>/dev/null || true
    wait "$cut_pid" 2>/dev/null || true
fi
load_rc=0
if ! wait_for_exit "$load" $((hold_ms / 1000 + 150)); then
    stop_pid "$load" 30 || true
    load_rc=timeout
else
    load_rc=$EXIT_CODE
fi
# Sessions of devices that went quiet end on the UDP idle timeout.
drained=yes
wait_until $((udp_idle_ms / 1000 + 60)) metric_is hybridgw_sessions 0 ||
    drained=no
wait_until 60 metric_is hybridgw_devices_online 0 || drained=no
wait_until 30 metric_is hybridgw_backend_connections 0 || drained=no
sample after
drain_s=$((SECONDS - churn_end))
end_fds=$(fds "$g")
end_handles=$(metric_sum hybridgw_loop_handles)
end_heap=$(($(metric_sum hybridgw_heap_in_use_bytes) / 1024))
live=$(metric_sum hybridgw_sessions)
started=$(metric_sum hybridgw_sessions_started_total)
ended=$(metric_sum hybridgw_sessions_ended_total)
conns=$(metric_sum hybridgw_backend_connections)
online=$(metric_sum hybridgw_devices_online)
grep -E '^hybridgw_(sessions_ended_total|messages_refused_total|udp_drops_total)' \
    "$tmp/m" | awk '$NF != 0' >"$out/end_counters.txt" || true
cp "$tmp/m" "$out/metrics_end.txt"

stop_pid "$g" 60 || true
gw_rc=$EXIT_CODE

# ---- verdict ----
fail=()
((live == 0)) || fail+=("live sessions $live, not 0")
((started == ended)) || fail+=("sessions started $started != ended $ended")
((conns == 0)) || fail+=("backend connections $conns, not 0")
((online == 0)) || fail+=("devices online $online, not 0")
[[ $drained == yes ]] || fail+=("not drained within the bound")
((started > devices)) || fail+=("only $started sessions started")
((end_fds <= base_fds)) ||
    fail+=("open descriptors $end_fds after the devices left, $base_fds before")
((end_handles <= base_handles)) ||
    fail+=("loop handles $end_handles after the devices left, $base_handles before")
((end_heap <= base_heap + heap_slack)) ||
    fail+=("heap in use $end_heap KiB after the devices left, $base_heap KiB before")
[[ $gw_rc == 0 ]] || fail+=("gateway exited $gw_rc on SIGTERM")
if grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|LeakSanitizer has encountered|runtime error:' \
    "$out/gateway.log" >/dev/null; then
    fail+=("sanitizer report in gateway.log")
fi
# Flatness after the warm-up, over the samples taken during the churn.
# Descriptors and handles follow the live sessions, so what must stay flat
# is what each live session holds above the idle gateway's baseline.
flat=$(awk -F, -v w="$warmup" -v rt="$rss_tol" -v ft="$fd_tol" \
    -v bf="$base_fds" -v bh="$base_handles" -v bm="$base_heap" '
    function per(v, base, live) { return (v - base) / (live > 0 ? live : 1) }
    function off(v, v0) { return v > v0 * (1 + ft / 100) || v < v0 * (1 - ft / 100) }
    NR == 1 || $1 !~ /^[0-9]+$/ { next }
    $1 == w { r0 = $2; s0 = $16; f0 = per($3, bf, $7); h0 = per($4, bh, $7)
              m0 = per($15, bm, $7) }
    $1 > w { last = $2; seg = $16
             f = per($3, bf, $7); h = per($4, bh, $7); m = per($15, bm, $7)
             if (f0 && off(f, f0))
                 bad = bad sprintf(" fds/session@%d=%.2f(%.2f)", $1, f, f0)
             if (h0 && off(h, h0))
                 bad = bad sprintf(" handles/session@%d=%.2f(%.2f)", $1, h, h0)
             if (m0 > 1 && off(m, m0))
                 bad = bad sprintf(" heap KiB/session@%d=%.1f(%.1f)", $1, m, m0) }
    END {
        if (!r0) { print "no sample at the end of the warm-up"; exit }
        # RSS may rise inside a heap segment already taken (pages of it
        # touched for the first time, bounded by its size); that is
        # flat as long as the segment itself does not grow.
        if (last && last > r0 * (1 + rt / 100) &&
            !(s0 > 0 && seg <= s0 * (1 + rt / 100)))
            bad = bad sprintf(" rss %d KiB at the end, %d KiB at minute %d (+%.1f %%), heap segment %d KiB, %d KiB",
                              last, r0, w, (last - r0) * 100 / r0, seg, s0)
        printf "%s\n", bad }' "$out/samples.csv")
[[ -z ${flat// /} ]] || fail+=("not flat:$flat")
if ((${#fail[@]} == 0)); then
    verdict=PASS
else
    verdict=FAIL
fi

# ---- outputs ----
{
    echo "| minute | RSS KiB | fds | loop handles | active handles | timers | live sessions | started | ended | backend conns | devices online | UDP drops | refused | audio packets | heap in use KiB | heap segment KiB | fds per session | handles per session | heap KiB per session |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    tail -n +2 "$out/samples.csv" | awk -F, -v bf="$base_fds" -v bh="$base_handles" -v bm="$base_heap" '
        { l = $7 > 0 ? $7 : 1
          printf "| %s | %.2f | %.2f | %.1f |\n", $0, ($3 - bf) / l, ($4 - bh) / l, ($15 - bm) / l }' |
        sed -e 's/^| /| /' -e 's/,/ | /g'
} >"$out/samples.md"
kinds=$(jq -r '.churn.kinds | to_entries[] |
    "\(.key) \(.value.started) started, \(.value.ok) ok, \(.value.failed) failed"' \
    "$out/load.json" 2>/dev/null || echo "(no load report)")
{
    echo "verdict: $verdict"
    for f in "${fail[@]}"; do
        echo "  - $f"
    done
    echo "commit: $commit; gateway sanitizer build: $sanitized"
    echo "devices: $devices churning + $cut_devices cut (SIGKILL every ${cut_every} s, $cut_runs runs)"
    echo "churn: $minutes min, pause ${pause_ms} ms, silent hold ${hold_ms} ms, udp_idle_timeout_ms $udp_idle_ms, mix $mix, seed $seed"
    echo "load generator exit: $load_rc; drained ${drain_s} s after the churn"
    echo "sessions: started $started, ended $ended, live $live; backend connections $conns; devices online $online"
    echo "descriptors: $base_fds before, $end_fds after; loop handles: $base_handles before, $end_handles after; heap in use: $base_heap KiB before, $end_heap KiB after"
    echo "flat: warm-up $warmup min; RSS within $rss_tol % (or the heap segment within $rss_tol %), fds, handles and heap per live session within $fd_tol % of it; heap after within $heap_slack KiB of before"
    echo "load: $(jq -c '{started: .devices.started, ok: .devices.ok, failed: .devices.failed, bad_messages: .churn.bad_messages, junk_datagrams: .churn.junk_datagrams, up_packets: .uplink.packets, down_played: .downlink.played}' "$out/load.json" 2>/dev/null)"
    echo "by kind:"
    echo "  ${kinds//$'\n'/$'\n'  }"
    echo "non-zero end counters:"
    sed 's/^/  /' "$out/end_counters.txt"
} >"$out/verdict.txt"
cat "$out/samples.md" "$out/verdict.txt"
[[ $verdict == PASS ]]
exit
}
