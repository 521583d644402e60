#!/usr/bin/env bash
# The pcm16 framing end to end on real parts (docs/protocol.md section
# 6.4): a simulated device speaks a 700 Hz tone in Opus, the gateway
# decodes it to PCM for a mock backend that speaks PCM and answers with a
# 440 Hz tone in messages that do not line up with frames; the gateway
# cuts and encodes that to Opus and paces it to the device. Both ends
# measure the frequency of what they got: the tones must be recognisable,
# not just bytes that moved.
# shellcheck disable=SC2016 # $f in the jq filters is jq's, not the shell's
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

# json_true JSON ARGS...: jq -e ARGS on JSON, quietly (for check).
json_true() {
    local json=$1
    shift
    jq -e "$@" >/dev/null <<<"$json"
}

UP_HZ=700
DOWN_HZ=440

start_broker broker || bail "the broker starts"
# 15 reply frames of 60 ms at 24 kHz, sent as 45 and 75 ms messages.
start_backend pcm --framing pcm16 --pcm-tone-hz "$DOWN_HZ" \
    --turn-frames 20 --tts-frames 15 --tts-rate 24000 ||
    bail "the PCM backend starts"
pcm_events=$BACKEND_EVENTS pcm_port=$BACKEND_PORT
# A backend whose hello names no rate: its PCM is at 16 kHz, which only
# the gateway's config (pcm_sample_rate) says. Encoded at any other rate
# the 440 Hz tone would arrive shifted (at 660 Hz for the default 24000).
start_backend norate --framing pcm16 --pcm-tone-hz "$DOWN_HZ" \
    --turn-frames 10 --tts-frames 10 --tts-rate 16000 --no-hello-rate ||
    bail "the PCM backend without a hello rate starts"
norate_port=$BACKEND_PORT
BACKEND_PORT=$pcm_port
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" '"routes": [
    { "match": { "groups": ["GID_norate"] }, "backends": ["norate"] },
    { "backends": ["mock"] } ]'
jq --arg url "ws://127.0.0.1:$norate_port/xiaozhi/v1/" \
    '.backends[0].framing = "pcm16" |
     .backends += [{name: "norate", url: $url, framing: "pcm16",
                    pcm_sample_rate: 16000}]' "$cfg" >"$cfg.new" &&
    mv "$cfg.new" "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts with a pcm16 backend"
peer_log "$GW_TMP/device.err"

ID='GID_pcm@@@02_00_00_00_16_01@@@pcm-1'
res=$("$SIM" device --broker "127.0.0.1:$BROKER_PORT" --subscribing \
    --publish-topic 'devices/{client_id}/up' --client-id "$ID" --json \
    --tone "$UP_HZ" --frames 20 --turns 1 2>>"$GW_TMP/device.err" | tail -n 1)
gw_note "device: $(jq -c '{ok, reason, downlink: (.downlink | {played, lost,
    tone_hz, tone_purity, drops})}' <<<"$res" 2>/dev/null)"
device_ok "a conversation through a pcm16 backend succeeds" "$res"

# Downlink: what the device played is the backend's tone, at its level
# of purity (a clean sine has most of its power at one frequency).
check "the device played at least 14 of the 15 frames" \
    json_true "$res" '.downlink.played >= 14 and .downlink.drops.opus == 0'
check "the device heard ${DOWN_HZ} Hz (within 3 Hz)" \
    json_true "$res" --argjson f "$DOWN_HZ" \
    '.downlink.tone_hz >= $f - 3 and .downlink.tone_hz <= $f + 3'
check "the played tone is clean (purity over 0.8)" \
    json_true "$res" '.downlink.tone_purity > 0.8'

# The backend hello says pcm16 at the device's rate.
hello=$(grep '"ev":"hello"' "$pcm_events" | tail -n 1)
check "the backend hello says format pcm16 at 16000 Hz" \
    json_true "$hello" '.msg.audio_params.format == "pcm16" and
           .msg.audio_params.sample_rate == 16000'

# Uplink: the backend got PCM at 16 kHz, 960 samples per 60 ms message,
# and it is the device's tone.
turn=$(wait_for_line "$pcm_events" '"ev":"turn"' >/dev/null &&
    grep '"ev":"turn"' "$pcm_events" | head -n 1)
gw_note "backend turn: $(jq -c '{frames, bytes, pcm_rate, pcm_samples,
    pcm_hz, pcm_purity, pcm_odd}' <<<"$turn" 2>/dev/null)"
check "the backend got 20 whole PCM frames of 60 ms at 16 kHz" \
    json_true "$turn" '.frames == 20 and .bytes == 20 * 1920 and .pcm_rate == 16000 and
           .pcm_samples == 20 * 960 and .pcm_odd == 0'
check "the backend heard ${UP_HZ} Hz (within 3 Hz)" \
    json_true "$turn" --argjson f "$UP_HZ" \
    '.pcm_hz >= $f - 3 and .pcm_hz <= $f + 3'
check "the uplink tone is clean (purity over 0.8)" \
    json_true "$turn" '.pcm_purity > 0.8'

# Nothing went wrong on the way.
check "the gateway logged no transcoding trouble" \
    not grep -q 'pcm16: ' "$GW_LOG"
check "the gateway dropped no backend audio" \
    not grep -q 'dropped binary message' "$GW_LOG"

# The rate from the config when the backend's hello names none.
ID='GID_norate@@@02_00_00_00_16_02@@@pcm-2'
res=$("$SIM" device --broker "127.0.0.1:$BROKER_PORT" --subscribing \
    --publish-topic 'devices/{client_id}/up' --client-id "$ID" --json \
    --tone "$UP_HZ" --frames 10 --turns 1 2>>"$GW_TMP/device.err" | tail -n 1)
gw_note "device (no hello rate): $(jq -c '{ok, reason, downlink:
    (.downlink | {played, tone_hz, tone_purity})}' <<<"$res" 2>/dev/null)"
device_ok "a conversation through a pcm16 backend without a hello rate" "$res"
check "pcm_sample_rate 16000 applied: the device heard ${DOWN_HZ} Hz" \
    json_true "$res" --argjson f "$DOWN_HZ" \
    '.downlink.played >= 9 and .downlink.tone_hz >= $f - 3 and
     .downlink.tone_hz <= $f + 3'

# A config mistake is caught at load: pcm_sample_rate must be one Opus
# codes at.
jq '.backends[0].pcm_sample_rate = 44100' "$cfg" >"$cfg.bad"
out=$("$GW" --check-config -c "$cfg.bad" 2>&1)
check "--check-config refuses pcm_sample_rate 44100" \
    grep -q 'pcm_sample_rate.*must be 8000, 12000, 16000, 24000 or 48000' \
    <<<"$out"

stop_pid "$GW_PID"
finish
