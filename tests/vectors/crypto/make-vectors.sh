#!/bin/sh
# Regenerates the crypto test vectors with the openssl command line tool
# and coreutils, independently of the C code they check:
#   tests/vectors/crypto/make-vectors.sh
# Inputs are fixed, so a rerun rewrites identical files.
set -eu
cd "$(dirname "$0")"
export LC_ALL=C TZ=UTC

hex() {
    od -An -v -tx1 | tr -d ' \n'
}

# Field for an empty byte string, so that no line has an empty column.
orempty() {
    if [ -n "$1" ]; then printf '%s' "$1"; else printf '%s' '-'; fi
}

# ---- AES-128-CTR: a UDP packet is header || CTR(key, iv = header, opus).
# The plaintext is filler keystream under an unrelated key, so it is
# arbitrary-looking but reproducible.
FILL_KEY=f0e1d2c3b4a5968778695a4b3c2d1e0f
aes_case() { # key iv len
    plain=$(head -c "$3" /dev/zero |
        openssl enc -aes-128-ctr -K "$FILL_KEY" -iv "$2" -nosalt | hex)
    cipher=$(head -c "$3" /dev/zero |
        openssl enc -aes-128-ctr -K "$FILL_KEY" -iv "$2" -nosalt |
        openssl enc -aes-128-ctr -K "$1" -iv "$2" -nosalt | hex)
    printf '%s %s %s %s\n' "$1" "$2" "$(orempty "$plain")" \
        "$(orempty "$cipher")"
}
{
    echo '# key iv plaintext ciphertext (hex; "-" = empty), made by:'
    echo '#   openssl enc -aes-128-ctr -K <key> -iv <iv> -nosalt'
    echo '# iv = the 16-byte UDP header: 01 00 <len u16> <ssrc> <ts> <seq>'
    key=8a1e0f4c2b6d93a5c7e1f0d2b4a69788
    seq=1
    for len in 0 1 15 16 17 300 1484; do
        aes_case $key "$(printf '0100%04x6b8b456700000000%08x' "$len" "$seq")" \
            "$len"
        seq=$((seq + 1))
    done
    key=00112233445566778899aabbccddeeff
    # sequence about to wrap: the counter carries into the timestamp
    aes_case $key 0100012c1234567800000bb8fffffffe 300
    # timestamp and sequence all ones: the carry reaches the ssrc
    aes_case $key 0100001112345678ffffffffffffffff 17
    # all 128 bits set: the counter wraps to zero
    aes_case $key ffffffffffffffffffffffffffffffff 48
} >aes_ctr_packets.txt

# ---- Device MQTT password: base64(HMAC-SHA256(key, client_id|username)).
pw_case() { # key client_id username
    pw=$(printf '%s|%s' "$2" "$3" |
        openssl dgst -sha256 -mac HMAC -macopt "key:$1" -binary |
        openssl base64 -A)
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$pw"
}
user_ip=$(printf '%s' '{"ip":"192.168.1.23"}' | openssl base64 -A)
user_ip6=$(printf '%s' '{"ip":"2001:db8::7"}' | openssl base64 -A)
{
    echo '# key<TAB>client_id<TAB>username<TAB>password, made by:'
    echo "#   printf '%s|%s' CLIENT_ID USERNAME |"
    echo '#   openssl dgst -sha256 -mac HMAC -macopt key:KEY -binary |'
    echo '#   openssl base64 -A'
    echo "# usernames: printf '%s' '{\"ip\":...}' | openssl base64 -A"
    pw_case 'Xz8pQv2mLr7t' \
        'GID_test@@@a0_85_e3_f4_49_34@@@0f8e3b9c-2d71-4f3a-9a6e-5b1c7d2e8f90' \
        "$user_ip"
    pw_case 'Xz8pQv2mLr7t' \
        'lichuang-dev@@@11_22_33_44_55_66@@@11_22_33_44_55_66' "$user_ip6"
    pw_case 'Another Key, 2025!' 'GID_default@@@de_ad_be_ef_00_01' "$user_ip"
    pw_case 'k' 'GID_test@@@00_00_00_00_00_01@@@x' 'plain-user'
} >device_password.txt

# ---- Backend token: base64url-nopad(HMAC-SHA256(secret,
#      client_id|device_id|ts)) "." ts
tok_case() { # secret client_id device_id ts
    sig=$(printf '%s|%s|%s' "$2" "$3" "$4" |
        openssl dgst -sha256 -mac HMAC -macopt "key:$1" -binary |
        openssl base64 -A | tr '+/' '-_' | tr -d '=')
    printf '%s\t%s\t%s\t%s\t%s.%s\n' "$1" "$2" "$3" "$4" "$sig" "$4"
}
{
    echo '# secret<TAB>client_id<TAB>device_id<TAB>ts<TAB>token, made by:'
    echo "#   printf '%s|%s|%s' CLIENT_ID DEVICE_ID TS |"
    echo '#   openssl dgst -sha256 -mac HMAC -macopt key:SECRET -binary |'
    echo "#   openssl base64 -A | tr '+/' '-_' | tr -d '='"
    tok_case 'server-secret-Abc123' '0f8e3b9c-2d71-4f3a-9a6e-5b1c7d2e8f90' \
        'a0:85:e3:f4:49:34' 1735689600
    tok_case 'server-secret-Abc123' 'default-client-id' 'de:ad:be:ef:00:01' \
        1761955200
    tok_case 'server-secret-Abc123' '11_22_33_44_55_66' '11:22:33:44:55:66' 0
    tok_case 'S3cr3t with spaces' 'default-client-id' '11:22:33:44:55:66' \
        9999999999
    tok_case 'x' 'c' 'd' 1
    tok_case 'server-secret-Abc123' 'default-client-id' 'a0:85:e3:f4:49:34' \
        1700000000
} >backend_token.txt

# ---- Management API daily token: sha256hex(YYYY-MM-DD key), UTC date.
day_case() { # key unix_ts
    d=$(date -u -d "@$2" +%F)
    t=$(printf '%s%s' "$d" "$1" | openssl dgst -sha256 -r | cut -c1-64)
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$d" "$t"
}
{
    echo '# key<TAB>unix_ts<TAB>utc_date<TAB>token, made by:'
    echo '#   d=$(date -u -d @TS +%F)'
    echo "#   printf '%s%s' \"\$d\" KEY | openssl dgst -sha256 -r | cut -c1-64"
    day_case 'MgmtKey-Strong9' 1735689599
    day_case 'MgmtKey-Strong9' 1735689600
    day_case 'MgmtKey-Strong9' 1709164800
    day_case 'Another Key, 2025!' 0
    day_case 'Another Key, 2025!' 1761955199
    day_case 'Z' 4102444800
} >daily_token.txt
