#!/usr/bin/env bash
# hybridgw benchmark: N devices streaming Opus both ways through the
# gateway (real mosquitto, mock backend and load generator).
# Measures gateway CPU per relayed packet (from /proc), the relay delay
# inside the gateway (its own histogram, from the kernel's receive
# timestamps), end-to-end latency (device send -> backend receive,
# backend send -> device receive, from both sides' packet logs), loss,
# and gateway RSS per session; writes bench/REPORT.md.
#
#   bench/run.sh [N ...]          default: 100 1000
#   BENCH_SECONDS=40 bench/run.sh  streaming time per run (default 30)
#   BENCH_NET=loopback             everything on 127.0.0.1 (the default as
#                                  root is three network namespaces, see
#                                  below; loopback otherwise)
#   BENCH_PERF=/tmp/gw.perf        also profile the gateway over the steady
#                                  window (perf record -g; one file per N)
#   BENCH_GW=path/to/hybridgw      another gateway binary (a previous build,
#                                  for a side-by-side ratio)
#   BENCH_REPORT=file              where the report goes (bench/REPORT.md)
#   BENCH_PIN=0                    let the scheduler place everything (the
#                                  default with 2 or more CPUs is pinned:
#                                  the gateway, and the floor relay after
#                                  it, alone on CPU 0; the broker, devices,
#                                  backend and the veth NAPI threads on the
#                                  others, so the gateway's figures are one
#                                  core's and the floor is measured in the
#                                  same layout)
#   BENCH_NAPI=gw                  with the pinned layout, the NAPI threads
#                                  of the gateway's veth ends on its CPU
#   BENCH_NAPI_RT=0                the NAPI threads at the normal priority
#                                  (the default runs them SCHED_FIFO: they
#                                  take their CPU as soon as a packet comes,
#                                  as a card's interrupt would, instead of
#                                  waiting out the devices' or the backend's
#                                  time slice while the veth ring overflows)
#   BENCH_SYSCALLS=0               skip counting system calls (perf stat on
#                                  the raw_syscalls and syscalls tracepoints,
#                                  the gateway over the steady window and the
#                                  floor relay over its run; on by default
#                                  when perf can)
#
# Network namespaces (BENCH_NET=netns): the gateway and mosquitto share
# one, the devices and the backend each have their own, joined to it by
# veth pairs in the benchmark range 198.18.0.0/15. Each veth end receives
# in its own NAPI kernel thread, so the work of delivering a packet to
# its receiver is not charged to the sender, as with a real network card
# and a real peer. On loopback the sender pays for the receiver's
# protocol work and wakeup too, which inflates the gateway's figure.
set -euo pipefail
cd "$(dirname "$0")/.."

counts=("$@")
if ((${#counts[@]} == 0)); then
    counts=(100 1000)
fi
seconds=${BENCH_SECONDS:-30}
net=${BENCH_NET:-}
if [[ -z $net ]]; then
    net=loopback
    if ((EUID == 0)) && command -v ip >/dev/null; then
        net=netns
    fi
fi

scripts/setup.sh >/dev/null
scripts/build.sh plain >/dev/null
gw=${BENCH_GW:-build/plain/gateway/hybridgw}
report=${BENCH_REPORT:-bench/REPORT.md}
sim=build/plain/tools/hybridgw-sim
floor_bin=build/plain/bench/loopback_floor
hz=$(getconf CLK_TCK)
rows=()
sc_rows=()

. scripts/lib.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. bench/lib.sh
tmp=$GW_TMP

# The pinned layout: the gateway on CPU 0, everything else (this script
# and what it starts, the NAPI threads) on the rest. A NAPI thread woken
# by the gateway's send then runs beside it instead of preempting it,
# and the floor relay meets the same.
pin=${BENCH_PIN:-1}
ncpu=$(nproc)
if ((ncpu < 2)); then
    pin=0
fi
on_gw_cpu=() on_relay_cpu=()
others=
if [[ $pin == 1 ]]; then
    others=1-$((ncpu - 1))
    taskset -pc "$others" $$ >/dev/null
    on_gw_cpu=(taskset -c 0)
    on_relay_cpu=(--relay-cpu 0)
fi
# The NAPI threads run SCHED_FIFO (BENCH_NAPI_RT): a veth ring holds 256
# packets, and at normal priority a thread that waits for the devices' or
# the backend's time slice lets a burst overflow it (3000 sessions:
# 199,068 packets dropped in one run, 4,010 in the next with it).
# BENCH_NAPI=gw puts the NAPI threads of the gateway's own veth ends on
# its CPU: its receive work then shares its core, as a network card's
# interrupts would, and the other CPU keeps only the load's side.
pin_napi() {
    local pid
    [[ $pin == 1 ]] || return 0
    for pid in $(pgrep '^napi/hb' || true); do
        taskset -pc "$others" "$pid" >/dev/null
        if [[ ${BENCH_NAPI_RT:-1} == 1 ]]; then
            chrt -f -p 50 "$pid"
        fi
    done
    if [[ ${BENCH_NAPI:-} == gw ]]; then
        for pid in $(pgrep '^napi/hbgw-' || true); do
            taskset -pc 0 "$pid" >/dev/null
        done
    fi
}

if [[ $net == netns ]]; then
    bench_netns_up hbbench hb
    pin_napi
fi

# relay_hist FILE: the gateway's relay delay histogram ("le count" lines,
# cumulative) from /metrics.
relay_hist() {
    "${in_gw[@]}" curl -fsS -H 'Authorization: Bearer bench' \
        "http://127.0.0.1:$hp/metrics" |
        sed -nE 's/^hybridgw_udp_relay_seconds_bucket\{le="([^"]+)"\} ([0-9]+)$/\1 \2/p' \
            >"$1"
}

user_ticks() { # PID: utime alone
    awk '{ print $14 }' "/proc/$1/stat"
}

# The gateway's relayed audio packets so far (both directions).
relayed() { # PID LOG
    gateway_stats "$1" "$2" |
        sed -E 's/.*audio_up=([0-9]+) audio_down=([0-9]+).*/\1 \2/' |
        awk '{ print $1 + $2 }'
}

# percentiles FILE: "p50 p99 max" of one number per line, in ms.
# The system calls counted one by one: what a relay's loop makes; the
# total (raw_syscalls) counts every other one too. A short list keeps
# perf's setup short, so all counters run over the same time.
sc_events=raw_syscalls:sys_enter
for c in read write readv writev sendto sendmsg sendmmsg recvfrom recvmsg \
    recvmmsg epoll_wait epoll_pwait epoll_ctl clock_nanosleep nanosleep \
    timerfd_settime getpid futex; do
    sc_events+=,syscalls:sys_enter_$c
done
# syscalls_per FILE PACKETS: "total name:n name:n ..." per packet from a
# perf stat -x, file, the five most frequent calls named.
syscalls_per() {
    awk -F, -v p="$2" '$1 ~ /^[0-9]+$/ && $3 == "raw_syscalls:sys_enter" {
            total = $1; next }
        $3 ~ /^syscalls:sys_enter_/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
            name = $3; sub(/^syscalls:sys_enter_/, "", name)
            n[name] = $1 }
        END {
            if (p <= 0 || total == 0) { print "-"; exit }
            out = sprintf("%.2f", total / p)
            for (k = 0; k < 5; k++) {
                best = ""; bv = 0
                for (x in n) if (n[x] > bv) { bv = n[x]; best = x }
                if (best == "") break
                out = out sprintf(" %s:%.2f", best, bv / p)
                delete n[best]
            }
            print out }' "$1"
}
syscalls_on=${BENCH_SYSCALLS:-1}
if [[ -n ${BENCH_PERF:-} ]]; then
    syscalls_on=0 # one perf at a time on the gateway
elif [[ $syscalls_on == 1 ]] &&
    ! perf stat -x, -e 'syscalls:sys_enter_read' -o /dev/null -- true 2>/dev/null; then
    syscalls_on=0
fi
# Hundreds of tracepoints per thread: perf needs the descriptors.
ulimit -n 65536 2>/dev/null || true

percentiles() {
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- - -"; exit }
        p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]
        p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
        printf "%.3f %.3f %.3f\n", p50 / 1000, p99 / 1000, v[NR] / 1000 }'
}

run_one() {
    local n=$1 dir=$tmp/n$1
    mkdir -p "$dir"
    local bp wp up hp
    # Each port free where it is bound: the broker's, the gateway's UDP
    # and HTTP in the gateway's namespace, the backend's in its own.
    bp=$("${in_gw[@]}" "$sim" free-port)
    wp=$("${in_be[@]}" "$sim" free-port)
    up=$("${in_gw[@]}" "$sim" free-port --udp)
    hp=$("${in_gw[@]}" "$sim" free-port)
    printf 'listener %s %s\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\nmax_queued_messages 10000\nlog_dest stderr\nlog_type information\n' \
        "$bp" "$([[ $net == netns ]] && echo 0.0.0.0 || echo 127.0.0.1)" \
        >"$dir/mosquitto.conf"
    "${in_gw[@]}" mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
    GW_PIDS+=($!)
    wait_for_ready $! "$dir/mosquitto.log" "listen socket on port $bp" || exit 1
    "${in_be[@]}" "$sim" backend --listen "$be_ip:$wp" \
        --events "$dir/backend.events" \
        --turn-frames 20 --tts-frames 20 --no-decode --log-level warn \
        --latency-log "$dir/backend.csv" 2>"$dir/backend.log" &
    local be=$!
    GW_PIDS+=("$be")
    wait_for_ready "$be" "$dir/backend.events" '"ev":"ready"' || exit 1
    cat >"$dir/gw.json" <<EOF
{ "instance": "bench",
  "mqtt": { "host": "127.0.0.1", "port": $bp },
  "udp": { "bind": "$gw_ip", "port": $up, "public_host": "$gw_ip" },
  "backends": [ { "name": "mock",
    "url": "ws://$be_ip:$wp/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $hp, "token": "bench" },
  "limits": { "max_sessions": 100000 },
  "log": { "level": "info" } }
EOF
    "${in_gw[@]}" "${on_gw_cpu[@]}" "$gw" -c "$dir/gw.json" 2>"$dir/gw.log" &
    local g=$!
    GW_PIDS+=("$g")
    wait_for_ready "$g" "$dir/gw.log" 'broker link up' || exit 1
    local rss0
    rss0=$(rss_kb "$g")

    local ramp=$((n > 200 ? 200 : n))
    local ramp_s=$(((n + ramp - 1) / ramp + 2))
    local vd0 rb0
    vd0=$(veth_drops)
    rb0=$(rcvbuf_errors)
    "${in_dev[@]}" "$sim" load --devices "$n" --ramp "$ramp" \
        --duration "$seconds" --mode realtime --broker "$gw_ip:$bp" \
        --subscribing \
        --publish-topic 'devices/{client_id}/up' --no-decode \
        --stats-json "$dir/load.json" --packet-log "$dir/device.csv" \
        >"$dir/load.out" 2>&1 &
    local load=$!
    GW_PIDS+=("$load")
    sleep "$ramp_s"
    local t0 c0 u0 r0 k0 t1 c1 u1 r1 k1 rss1
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$g")
    u0=$(user_ticks "$g")
    k0=$(napi_ticks '^napi/hbgw-')
    r0=$(relayed "$g" "$dir/gw.log")
    relay_hist "$dir/relay0"
    if [[ -n ${BENCH_PERF:-} ]]; then
        perf record -F 1000 -g -p "$g" -o "$BENCH_PERF.$n" \
            -- sleep $((seconds - ramp_s - 2)) >/dev/null 2>&1
    elif [[ $syscalls_on == 1 ]]; then
        perf stat -x, -e "$sc_events" -p "$g" \
            -o "$dir/gw.syscalls" -- sleep $((seconds - ramp_s - 2)) \
            >/dev/null 2>&1
    else
        sleep $((seconds - ramp_s - 2))
    fi
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$g")
    u1=$(user_ticks "$g")
    k1=$(napi_ticks '^napi/hbgw-')
    r1=$(relayed "$g" "$dir/gw.log")
    relay_hist "$dir/relay1"
    rss1=$(rss_kb "$g")
    wait "$load" || echo "bench: load exited $? (see $dir/load.out)" >&2
    local vdrops rbdrops
    vdrops=$(($(veth_drops) - vd0))
    rbdrops=$(($(rcvbuf_errors) - rb0))
    kill -TERM "$g" "$be"
    wait "$g" "$be" 2>/dev/null || true

    local packets=$((r1 - r0))
    local us_per_packet pps cpu_pct napi_us
    us_per_packet=$(echo "scale=3; ($c1 - $c0) * 1000000 / $hz / $packets" | bc)
    # Of which in user space: the gateway's own work and its libraries'
    # (the floor has almost none), the rest being the kernel's.
    local user_us
    user_us=$(printf '%.3f' \
        "$(echo "scale=3; ($u1 - $u0) * 1000000 / $hz / $packets" | bc)")
    napi_us=$(echo "scale=3; ($k1 - $k0) * 1000000 / $hz / $packets" | bc)
    [[ $net == netns ]] || napi_us=-
    local rl50 rl99 rlshare
    read -r rl50 rl99 rlshare < <(relay_percentiles "$dir/relay0" "$dir/relay1")
    pps=$(echo "scale=0; $packets / ($t1 - $t0)" | bc)
    cpu_pct=$(echo "scale=1; ($c1 - $c0) * 100 / $hz / ($t1 - $t0)" | bc)

    # Join the packet logs: uplink by (uuid, sequence), downlink likewise.
    awk -F, '
        FNR == 1 { file++ }
        file == 1 { split($2, p, "@@@"); key = p[3] "," $1 "," $3
                    t[key] = $4; next }
        { key = $4 "," $1 "," $5
          if (key in t) {
              d = ($1 == "up") ? $6 - t[key] : t[key] - $6
              print d > (dirout "/lat_" $1) } }
    ' dirout="$dir" "$dir/device.csv" "$dir/backend.csv"
    local up_sent up_recv down_sent down_recv
    up_sent=$(grep -c '^up,' "$dir/device.csv" || true)
    up_recv=$(grep -c '^up,' "$dir/backend.csv" || true)
    down_sent=$(grep -c '^down,' "$dir/backend.csv" || true)
    down_recv=$(grep -c '^down,' "$dir/device.csv" || true)
    read -r up50 up99 upmax < <(percentiles "$dir/lat_up")
    read -r dn50 dn99 dnmax < <(percentiles "$dir/lat_down")
    local rss_per
    rss_per=$(echo "scale=1; ($rss1 - $rss0) / $n" | bc)
    local ok
    ok=$(jq -r '"\(.devices.ok)/\(.devices.requested)"' "$dir/load.json")
    # The same uplink rate through a relay that does nothing but read the
    # datagrams and write each to one of n TCP connections.
    local floor
    local floor_args=()
    if [[ $net == netns ]]; then
        floor_args=(--relay-ip "$gw_ip" --sink-ip "$be_ip"
            --source-netns hbbench-dev --sink-netns hbbench-be)
    fi
    local floor_perf=()
    if [[ $syscalls_on == 1 ]]; then
        floor_perf=(perf stat -x, --no-inherit -e "$sc_events"
            -o "$dir/floor.syscalls" --)
    fi
    # The floor reads as the gateway does at this rate: on every readable
    # event below 2 datagrams a millisecond, else after a pause of the
    # gateway's tick (gateway/audio/udp_uplink.c: 64 datagrams' time, 100 to
    # 400 us).
    local rate=$((n * 1000 / 60)) pause_us=0
    if ((rate >= 2000)); then
        pause_us=$((64 * 1000000 / rate))
        ((pause_us > 400)) && pause_us=400
        ((pause_us < 100)) && pause_us=100
    fi
    "${in_gw[@]}" "${floor_perf[@]}" "$floor_bin" --conns "$n" \
        --rate "$rate" --pause-us "$pause_us" \
        --seconds $((seconds < 12 ? seconds : 12)) \
        "${floor_args[@]}" "${on_relay_cpu[@]}" >"$dir/floor.json"
    floor=$(jq -r .us_per_packet "$dir/floor.json")
    local sc_gw=- sc_floor=-
    if [[ $syscalls_on == 1 ]]; then
        # perf counts while its sleep runs; the window around it is a
        # little longer (perf's setup, the counter reads): the packets of
        # perf's own time are the window's rate times its sleep.
        local perf_packets
        perf_packets=$(echo "scale=0; $packets * ($seconds - $ramp_s - 2) / ($t1 - $t0)" | bc)
        sc_gw=$(syscalls_per "$dir/gw.syscalls" "$perf_packets")
        sc_floor=$(syscalls_per "$dir/floor.syscalls" \
            "$(jq -r .packets_all "$dir/floor.json")")
    fi
    sc_rows+=("| $n | ${sc_gw%% *} | ${sc_floor%% *} | ${sc_gw#* } | ${sc_floor#* } |")
    local ratio
    ratio=$(printf '%.2f' "$(echo "scale=3; $us_per_packet / $floor" | bc)")
    rows+=("| $n | $ok | $pps | $cpu_pct % | **$us_per_packet** | $user_us | $floor | **$ratio** | $napi_us | $rl50 / **$rl99** ($rlshare %) | $up50 / $up99 / $upmax | $dn50 / $dn99 / $dnmax | $((up_sent - up_recv)) of $up_sent | $((down_sent - down_recv)) of $down_sent | $vdrops / $rbdrops | $rss_per |")
    echo "bench: $n sessions: system calls per packet, gateway $sc_gw; floor $sc_floor"
    echo "bench: $n sessions ($net): ${us_per_packet} us/packet (user $user_us; floor $floor; ratio $ratio), relay p99 ${rl99} ms (${rlshare} % <= 1 ms), end-to-end up p99 ${up99} ms, loss up $((up_sent - up_recv)) down $((down_sent - down_recv)) (veth $vdrops, socket buffer $rbdrops), ${rss_per} KiB/session"
}

for n in "${counts[@]}"; do
    run_one "$n"
done

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
if [[ $net == netns ]]; then
    where='the gateway and mosquitto in one network namespace, `hybridgw-sim
load` (the devices) and `hybridgw-sim backend` each in their own, joined
by veth pairs whose ends receive in NAPI kernel threads'
else
    where='everything on 127.0.0.1: the gateway, mosquitto, `hybridgw-sim
backend` and `hybridgw-sim load`'
fi
{
    echo "# hybridgw benchmark"
    echo
    echo "Generated by \`BENCH_NET=$net bench/run.sh ${counts[*]}\` (BENCH_SECONDS=$seconds) on $(date -u +%Y-%m-%d)."
    echo
    echo "Machine: $ncpu cores ($cpu), $(free -g | awk '/^Mem/ { print $2 }') GiB,"
    echo "Linux $(uname -r), mosquitto $(mosquitto -h 2>/dev/null | head -n 1 | awk '{ print $3 }');"
    echo "$where; all share the cores."
    echo
    if [[ $pin == 1 ]]; then
        echo "Pinned: the gateway alone on CPU 0 (so its figures are one core's),"
        napi_how=""
        if [[ ${BENCH_NAPI_RT:-1} == 1 ]]; then
            napi_how+=" (at real-time priority, as a card's interrupts run)"
        fi
        if [[ ${BENCH_NAPI:-} == gw ]]; then
            napi_how+="; those of the gateway's own veth ends on CPU 0"
        fi
        echo "everything else on the other CPUs, the veth NAPI threads included$napi_how;"
        echo "the floor relay likewise."
        echo
    fi
    echo "Each device streams 60 ms Opus frames up without pause (realtime mode);"
    echo "the backend answers each session's first 20 frames with 20 frames of"
    echo "TTS, paced as the xiaozhi server paces them (a realtime device sends"
    echo "no second \`listen start\`, so later turns get no answer): the"
    echo "downlink is one reply per session, the uplink runs throughout."
    echo
    echo "| sessions | ok | packets/s through the gateway | gateway CPU | CPU us per relayed packet | of which user | floor us per packet | gateway / floor | NAPI us per packet | relay delay in the gateway ms p50 / p99 (share <= 1 ms) | uplink end to end ms p50 / p99 / max | downlink end to end ms p50 / p99 / max | uplink lost | downlink lost | dropped by veth / gateway socket buffer | gateway RSS KiB per session |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    if [[ $syscalls_on == 1 ]]; then
        echo "System calls per relayed packet (perf stat: raw_syscalls:sys_enter for"
        echo "all of them, syscalls:sys_enter_<name> for the usual ones; the gateway"
        echo "over the steady window, the floor relay over its whole run), with the"
        echo "five most frequent:"
        echo
        echo "| sessions | gateway | floor | gateway's most frequent | floor's most frequent |"
        echo "|---|---|---|---|---|"
        printf '%s\n' "${sc_rows[@]}"
        echo
    fi
    echo "- CPU: utime+stime of the gateway from /proc over the steady window,"
    echo "  divided by the audio packets it relayed in that window (its own"
    echo "  counters, both directions)."
    echo "- Floor: bench/loopback_floor relays the same uplink rate over the"
    echo "  same network with no gateway logic at all (recvmmsg after a pause"
    echo "  of the gateway's read tick at that rate, then one send() per"
    echo "  datagram on one of N TCP connections to a reader process) and"
    echo "  reports its CPU per packet the same way: what the kernel alone"
    echo "  costs on this machine. It runs right after the gateway, so the"
    echo "  ratio compares two runs a minute apart."
    echo "- Of which user: the gateway's utime alone (its code and libraries);"
    echo "  the rest is the kernel's, about the floor's own."
    echo "- NAPI: with network namespaces, the CPU of the kernel threads that"
    echo "  receive packets for the gateway's side of the veth pairs (its"
    echo "  uplink datagrams, the backend's frames and ACKs), per relayed"
    echo "  packet. A real host spends this in its network card's interrupt"
    echo "  and softirq work, not in the gateway process."
    echo "- Relay delay: the gateway's \`hybridgw_udp_relay_seconds\` histogram"
    echo "  (GET /metrics), the time from the kernel's receive timestamp of a"
    echo "  device datagram (SO_TIMESTAMPNS) to its hand-off to the backend's"
    echo "  socket, over the steady window; percentiles interpolated within"
    echo "  buckets, and the exact share at or under 1 ms."
    echo "- End to end: device send to backend receive (uplink) and backend"
    echo "  send to device receive (downlink), joined from both sides' packet"
    echo "  logs; this adds the network hops and the mock's and load"
    echo "  generator's own scheduling to the relay delay. Downlink includes"
    echo "  the gateway's pacing and its hold after \`tts start\`."
    echo "- Dropped: packets the veth pairs dropped (their rings full) and"
    echo "  datagrams the kernel dropped on the gateway's full UDP receive"
    echo "  buffer (Udp RcvbufErrors), over the whole run: losses that are"
    echo "  not the gateway's doing, or that it could not read in time."
    echo "- Targets: gateway CPU per relayed packet at most 1.3x the floor at"
    echo "  100, 1000 and 3000 sessions; relay delay p99 under 1 ms at 1000;"
    echo "  at most 16 KiB of gateway memory per session at 1000 and 3000;"
    echo "  zero loss."
    if [[ -f bench/NOTES.md ]]; then
        echo
        cat bench/NOTES.md
    fi
} >"$report"
cat "$report"
