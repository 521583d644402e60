#!/usr/bin/env bash
# The container recipe run for real, on a Debian 12 host with no image
# registry in reach: installs docker.io, docker-compose and debootstrap if
# missing, starts dockerd if it is not running, makes the local base
# images debian:12 and debian:12-slim with debootstrap (from the Debian
# mirror of this machine's apt sources) unless they exist, builds both
# images of docker/Dockerfile with docker-compose, starts the stack of
# docker/compose.yaml, and holds a conversation with a simulated stock
# device built on this host: zero frames lost, no container restarted.
# Then it takes down what it made and restores what it changed: the stack's
# containers and network, and dockerd with its bridge, iptables rules and
# ip_forward setting if it started dockerd. It keeps the four images (and
# the packages it installed) for the next run.
#
# Not part of CI's default run: it needs root (or sudo), a mirror and
# several minutes. GW_BUILD_DIR (build/plain) is where hybridgw-sim is
# built; GW_KEEP=1 keeps the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
. scripts/lib.sh

t_start=$SECONDS
builddir=${GW_BUILD_DIR:-build/plain}
suite=bookworm
# Debian's docker.io binaries, not another docker CLI earlier in PATH:
# docker-compose runs "docker build" from PATH too.
sys_path=/usr/sbin:/usr/bin:/sbin:/bin
project=hybridgw-ct-$$
stack=$GW_TMP/stack

say() {
    printf 'container-test [%4d s]: %s\n' "$((SECONDS - t_start))" "$*"
}
die() {
    say "FAILED: $*"
    exit 1
}
# Runs as root with Debian's PATH, and the builder each tool picks by
# default (docker-compose 1.29 runs "docker build", the classic builder).
as_root() {
    local e=(env -u DOCKER_BUILDKIT -u COMPOSE_DOCKER_CLI_BUILD
        PATH="$sys_path")
    if [ "$(id -u)" -eq 0 ]; then
        "${e[@]}" "$@"
    else
        sudo "${e[@]}" "$@"
    fi
}
dk() { as_root timeout 600 docker "$@"; } # every docker call is bounded
dc() { # SECONDS ARGS...: docker-compose on the test's stack, bounded
    local t=$1
    shift
    as_root timeout "$t" docker-compose -p "$project" \
        -f "$stack/compose.yaml" "$@"
}
have_image() { dk image inspect "$1" >/dev/null 2>&1; }
docker_up() { as_root timeout 10 docker info >/dev/null 2>&1; }

# ---- teardown: everything below registers what it must undo ------------

stack_up=0
started_dockerd=0
dockerd_pid=""
had_docker0=1
fw_saved=""
ip_forward_was=""
teardown() {
    local rc=$? kept
    set +e
    if [ "$stack_up" = 1 ]; then
        say "taking the stack down"
        docker_compose_down
    fi
    if [ -d "$GW_TMP/rootfs" ]; then
        as_root rm -rf "$GW_TMP/rootfs" # root's files, from debootstrap
    fi
    if docker_up; then
        if have_image "$project:build-stage"; then
            dk rmi "$project:build-stage" >/dev/null
        fi
        kept=$(dk images --format '{{.Repository}}:{{.Tag}}' |
            grep -E '^(debian:12|debian:12-slim|hybridgw:.*)$' | tr '\n' ' ')
        say "images kept: ${kept:-none}"
    fi
    if [ "$started_dockerd" = 1 ]; then
        if [ -n "$dockerd_pid" ]; then
            say "stopping the dockerd this run started"
            as_root kill -TERM "$dockerd_pid"
            wait_until 60 not_running "$dockerd_pid" ||
                as_root kill -KILL "$dockerd_pid"
            wait_until 10 not_running "$dockerd_pid"
        fi
        restore_network
    fi
    say "done in $((SECONDS - t_start)) s: $([ "$rc" = 0 ] && echo ok ||
        echo "FAILED (exit $rc)")"
    gw_cleanup
}
trap teardown EXIT
docker_compose_down() {
    dc 120 down --remove-orphans --timeout 15 >"$GW_TMP/down.log" 2>&1 ||
        show_tail "$GW_TMP/down.log"
}
not_running() { ! as_root kill -0 "$1" 2>/dev/null; }
# dockerd leaves its bridge, its iptables chains and ip_forward=1 behind.
restore_network() {
    if [ "$had_docker0" = 0 ] && ip link show docker0 >/dev/null 2>&1; then
        as_root ip link delete docker0
    fi
    if [ -n "$fw_saved" ]; then
        local t
        for t in filter nat; do
            # A table empty before is emptied; the others are put back.
            if ! grep -q "^\*$t" "$fw_saved"; then
                as_root iptables -t "$t" -F
                as_root iptables -t "$t" -X
            fi
        done
        as_root iptables -P FORWARD "$(awk '/^\*filter/ {f = 1}
            f && /^:FORWARD/ {print $2; exit}' "$fw_saved" | grep . ||
            echo ACCEPT)"
        if [ -s "$fw_saved" ]; then
            as_root iptables-restore <"$fw_saved"
        fi
    fi
    if [ -n "$ip_forward_was" ]; then
        as_root sysctl -q -w "net.ipv4.ip_forward=$ip_forward_was"
    fi
}

# ---- 1. packages -------------------------------------------------------

missing=()
for p in docker.io docker-compose debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
        grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
    say "installing ${missing[*]} (kept afterwards)"
    as_root timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root timeout 900 apt-get install -y \
        -qq --no-install-recommends "${missing[@]}" >"$GW_TMP/apt.log" 2>&1 ||
        {
            show_tail "$GW_TMP/apt.log"
            die "apt-get install ${missing[*]}"
        }
fi
say "$(as_root docker --version);" \
    "docker-compose $(as_root docker-compose version --short 2>/dev/null)"

# ---- 2. dockerd ----------------------------------------------------------

if docker_up; then
    say "dockerd is running"
else
    say "starting dockerd"
    ip link show docker0 >/dev/null 2>&1 || had_docker0=0
    fw_saved=$GW_TMP/iptables.before
    as_root iptables-save >"$fw_saved" 2>/dev/null || true
    ip_forward_was=$(cat /proc/sys/net/ipv4/ip_forward)
    # Its own session, so that this script's cleanup does not signal it
    # before the stack is down; teardown stops it.
    as_root setsid dockerd >"$GW_TMP/dockerd.log" 2>&1 &
    started_dockerd=1
    if ! wait_until 60 docker_up; then
        show_tail "$GW_TMP/dockerd.log"
        dockerd_pid=$(pgrep -n -x dockerd || true)
        die "dockerd did not answer within 60 s"
    fi
    # The daemon itself (sudo may sit between it and this script).
    dockerd_pid=$(as_root cat /var/run/docker.pid)
    say "dockerd $dockerd_pid answers"
fi

# ---- 3. base images ----------------------------------------------------

# debian_mirror SUITE: the first Debian URI this machine's apt sources give
# for SUITE, one-line (.list) or deb822 (.sources) style.
debian_mirror() {
    local f
    {
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] || continue
            awk -v s="$1" '$1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) print $i
            }' "$f"
        done
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] || continue
            awk -v s="$1" '
                function flush() {
                    if (deb && on && uris != "" &&
                        (" " suites " ") ~ (" " s " ")) {
                        split(uris, u, " "); print u[1]
                    }
                    deb = 0; on = 1; uris = ""; suites = ""
                }
                BEGIN { on = 1 }
                /^[[:space:]]*$/ { flush(); next }
                /^#/ { next }
                tolower($1) == "types:" { deb = (" " $0 " ") ~ / deb / }
                tolower($1) == "uris:" { $1 = ""; uris = $0 }
                tolower($1) == "suites:" { $1 = ""; suites = $0 }
                tolower($1) == "enabled:" { on = tolower($2) != "no" }
                END { flush() }' "$f"
        done
    } | head -n 1
}

if have_image debian:12 && have_image debian:12-slim; then
    say "base images debian:12 and debian:12-slim exist"
else
    mirror=$(debian_mirror "$suite")
    [ -n "$mirror" ] || die "no apt source for $suite to debootstrap from"
    rootfs=$GW_TMP/rootfs
    say "debootstrap $suite (minbase) from this machine's apt source"
    as_root timeout 1200 debootstrap --variant=minbase "$suite" "$rootfs" \
        "$mirror" >"$GW_TMP/debootstrap.log" 2>&1 || {
        show_tail "$GW_TMP/debootstrap.log"
        die "debootstrap"
    }
    as_root sh -c "rm -rf '$rootfs'/var/lib/apt/lists/* \
        '$rootfs'/var/cache/apt/archives/*.deb"
    import() { # TAG: the rootfs as an image
        as_root tar -C "$rootfs" -c . |
            as_root timeout 600 docker import --change 'CMD ["bash"]' - \
                "$1" >/dev/null
    }
    have_image debian:12 || import debian:12
    # slim as Debian's own: no documentation, manuals or translations,
    # and dpkg keeps it that way for what the image installs later.
    as_root sh -c "cat >'$rootfs'/etc/dpkg/dpkg.cfg.d/docker-slim <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
find '$rootfs'/usr/share/doc -type f ! -name copyright -delete
rm -rf '$rootfs'/usr/share/man/* '$rootfs'/usr/share/info/*
find '$rootfs'/usr/share/locale -mindepth 1 -maxdepth 1 \
    ! -name locale.alias -exec rm -rf {} +"
    have_image debian:12-slim || import debian:12-slim
    as_root rm -rf "$rootfs"
    say "made debian:12 and debian:12-slim"
fi

# ---- 4. the stack's files and the images -------------------------------

# The shipped compose file and configs, changed only where this host needs
# it: free host ports on 127.0.0.1 (a local broker may hold 1883) and the
# repository as the build context.
compose_src=docker/compose.yaml
dc_check() { as_root timeout 30 docker-compose -f "$compose_src" config -q; }
dc_check || die "docker-compose does not accept $compose_src"
mkdir -p "$stack"
sim=$builddir/tools/hybridgw-sim
say "building hybridgw-sim in $builddir"
if [ ! -f "$builddir/CMakeCache.txt" ]; then
    cmake -S . -B "$builddir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
timeout 900 cmake --build "$builddir" --target hybridgw-sim -j2 \
    >"$GW_TMP/sim-build.log" 2>&1 || {
    show_tail "$GW_TMP/sim-build.log"
    die "building hybridgw-sim"
}
mqtt_port=$("$sim" free-port)
udp_port=$("$sim" free-port --udp)
sed -e "s#^\(  *context:\) \.\.\$#\1 $src#" \
    -e "s#\"1883:1883\"#\"127.0.0.1:$mqtt_port:1883\"#" \
    -e "s#\"8884:8884/udp\"#\"127.0.0.1:$udp_port:8884/udp\"#" \
    "$compose_src" >"$stack/compose.yaml"
for want in "context: $src" "127.0.0.1:$mqtt_port:1883" \
    "127.0.0.1:$udp_port:8884/udp"; do
    grep -qF "$want" "$stack/compose.yaml" ||
        die "$compose_src changed: cannot set '$want' in the test's copy"
done
cp docker/mosquitto.conf "$stack/mosquitto.conf"
jq --argjson p "$udp_port" '.udp.public_port = $p' docker/hybridgw.json \
    >"$stack/hybridgw.json"
# Readable by the containers' users (the copies are this user's files).
chmod 0644 "$stack"/*
chmod 0755 "$stack"
key=$(awk '$1 == "plugin_opt_device_key" {print $2; exit}' \
    docker/mosquitto.conf)

say "building the images (docker-compose build)"
t_build=$SECONDS
dc 2400 build >"$GW_TMP/build.log" 2>&1 || {
    show_tail "$GW_TMP/build.log" 60
    die "docker-compose build"
}
say "images built in $((SECONDS - t_build)) s:" \
    "$(dk images --format '{{.Repository}}:{{.Tag}} {{.Size}}' |
        grep '^hybridgw:' | tr '\n' ' ')"

# The build context held no deployment config: the build stage, rebuilt
# from cache with the same builder, has none of the secret-bearing files.
dk build -q -f docker/Dockerfile --target build -t "$project:build-stage" . \
    >/dev/null 2>"$GW_TMP/stage.log" || {
    show_tail "$GW_TMP/stage.log"
    die "tagging the build stage"
}
leaked=$(dk run --rm --entrypoint /bin/sh "$project:build-stage" -c \
    'ls docker/*.json docker/*.conf deploy/*.conf 2>/dev/null' || true)
[ -z "$leaked" ] || die "secret-bearing configs in the build context: $leaked"
say "the build context held no deployment config"

# ---- 5. the stack and a conversation -----------------------------------

say "starting the stack (project $project)"
stack_up=1
dc 300 up -d --no-build >"$GW_TMP/up.log" 2>&1 || {
    show_tail "$GW_TMP/up.log"
    die "docker-compose up"
}
logs() { dc 30 logs --no-color "$1" >"$GW_TMP/$1.log" 2>&1; }
logged() { # SERVICE REGEX
    logs "$1"
    grep -qE -- "$2" "$GW_TMP/$1.log"
}
ready() {
    logged mosquitto 'mosquitto version .* running' &&
        logged gateway 'broker link up' &&
        logged backend 'listening on ws://'
}
if ! wait_until 60 ready; then
    for s in mosquitto backend gateway; do
        logs "$s"
        show_tail "$GW_TMP/$s.log"
    done
    die "the stack did not come up within 60 s"
fi
say "stack up: broker 127.0.0.1:$mqtt_port, gateway audio" \
    "127.0.0.1:$udp_port/udp"

say "a simulated stock device converses with the containers (3 turns)"
rc=0
timeout 120 "$sim" device --broker "127.0.0.1:$mqtt_port" --key "$key" \
    --turns 3 --json >"$GW_TMP/device.out" 2>"$GW_TMP/device.err" || rc=$?
grep -v '^{' "$GW_TMP/device.out" | sed 's/^/  | /' || true
result=$(tail -n 1 "$GW_TMP/device.out")
jq -e . >/dev/null 2>&1 <<<"$result" || {
    show_tail "$GW_TMP/device.err"
    die "no result from the device (exit $rc)"
}
fails=()
[ "$rc" = 0 ] || fails+=("device exit $rc: $(jq -r .reason <<<"$result")")
jq -e '.turns_done == 3' >/dev/null <<<"$result" || fails+=("turns")
jq -e '.downlink.played > 0' >/dev/null <<<"$result" || fails+=("no audio")
jq -e '.downlink.lost == 0 and .downlink.drops.idle == 0' \
    >/dev/null <<<"$result" || fails+=("downlink frames lost")
jq -e '.downlink.played == .downlink.datagrams' >/dev/null <<<"$result" ||
    fails+=("not every downlink frame played")
for s in mosquitto backend gateway; do
    cid=$(dc 30 ps -q "$s")
    state=$(dk inspect -f '{{.State.Running}} {{.RestartCount}}' "$cid")
    [ "$state" = "true 0" ] ||
        fails+=("$s: running, restarts = $state (crash loop?)")
done
logs gateway
grep -qE 'session ended' "$GW_TMP/gateway.log" ||
    fails+=("the gateway logged no session end")
if ((${#fails[@]} > 0)); then
    for s in mosquitto backend gateway; do
        logs "$s"
        show_tail "$GW_TMP/$s.log"
    done
    die "${fails[*]}"
fi
say "conversation ok: $(jq -r '"\(.turns_done) turns, " +
    "\(.downlink.played) of \(.downlink.datagrams) downlink frames played, " +
    "\(.downlink.lost) lost; tts start \(.latency_ms.tts_start) ms, " +
    "first audio \(.latency_ms.first_audio) ms after speech end"' \
    <<<"$result")"
