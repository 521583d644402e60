#!/usr/bin/env bash
# Checks that the map of the code names what exists (docs/architecture.md
# section 1): in docs/architecture.md and every gateway/ README, each name
# in backticks that looks like a file (a path, or a name ending in .c, .h,
# .sh, .md...) must exist, and each C identifier in backticks that starts
# with gw_ or GW_, or is written as a call (name(), name(args)), must appear
# in the product's source (common codec crypto config gateway broker tools,
# CMake files, scripts), and so must a name in backticks alone that has an
# underscore (a static function, a field, a macro). A glob (mcp_server*.c, gw_list_*) must match
# something. Fenced code blocks are not checked. And every gateway/ folder
# has a README.md and a heading in architecture.md naming gateway/<folder>/,
# every .c/.h/.in file of a folder is named in its README, and every file
# at gateway/'s top is named in architecture.md (or gateway/README.md).
# Prints one line per problem (file:line, the name); exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every file of the tree, tracked or new, never the build's.
{ git ls-files -co --exclude-standard 2>/dev/null ||
    find . \( -path ./.git -o -path './build*' -o -name node_modules \) \
        -prune -o -type f -print | sed 's|^\./||'; } |
    while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done |
    sort -u >"$tmp/files"

# The identifiers of the product's source, and the names its X-macro lists
# make (GW_REFUSE_##name with XX(DRAINING, ...) makes GW_REFUSE_DRAINING).
grep -E '^(common|codec|crypto|config|gateway|broker|tools)/.*\.(c|h|in)$|(^|/)CMakeLists\.txt$|^scripts/' \
    "$tmp/files" >"$tmp/corpus" || true
tr '\n' '\0' <"$tmp/corpus" | xargs -0 cat |
    grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u >"$tmp/ids"
tr '\n' '\0' <"$tmp/corpus" | xargs -0 cat |
    grep -oE 'GW_[A-Z0-9_]*##' | sed 's/##$//' | sort -u >"$tmp/prefixes" || true
tr '\n' '\0' <"$tmp/corpus" | xargs -0 cat |
    grep -oE 'XX\([A-Z][A-Z0-9_]*' | sed 's/^XX(//' | sort -u >"$tmp/entries" || true
while IFS= read -r p; do sed "s/^/$p/" "$tmp/entries"; done \
    <"$tmp/prefixes" >"$tmp/generated"

docs=()
[ -f docs/architecture.md ] && docs+=(docs/architecture.md)
for f in gateway/README.md gateway/*/README.md; do
    [ -f "$f" ] && docs+=("$f")
done

awk -v idsf="$tmp/ids" -v genf="$tmp/generated" -v filesf="$tmp/files" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function glob_re(g,   r) {
    r = g
    gsub(/\./, "\\.", r)
    gsub(/\*/, "[^/]*", r)
    return "^" r "$"
}
function bad(where, what) { print "FAIL " where ": " what; }
# A file name: a path of file-name characters that ends in a known
# extension, or a directory of the tree written with a trailing slash.
function is_path(s,   n, last, c) {
    if (s !~ /^[A-Za-z0-9_.*-]+(\/[A-Za-z0-9_.*-]+)*\/?$/) return 0
    if (s ~ /\/$/) {
        split(s, c, "/")
        return (c[1] in topdir)
    }
    n = split(s, c, "/")
    last = c[n]
    return last ~ /\.(c|h|sh|md|mjs|js|in|txt|json|conf|cmake|py|yaml|yml|html|css)$/
}
function check_path(s, where,   re, i, n, found, c) {
    if (s ~ /\/$/) {
        sub(/\/$/, "", s)
        if (!(s in dir)) bad(where, "directory `" s "/` does not exist")
        return
    }
    if (s ~ /\*/) {
        re = glob_re(s)
        found = 0
        for (i = 1; i <= nfiles && !found; i++) {
            if (s ~ /\//) { if (allf[i] ~ re) found = 1 }
            else { n = split(allf[i], c, "/"); if (c[n] ~ re) found = 1 }
        }
        if (!found) bad(where, "no file matches `" s "`")
        return
    }
    if (s ~ /\//) {
        if (!(s in file) && !((s ".in") in file) && !(s in dir))
            bad(where, "file `" s "` does not exist")
        return
    }
    if (!(s in base) && !((s ".in") in base))
        bad(where, "no file is named `" s "`")
}
function known_prefix(p,   id) {
    if (p in prefix_seen) return prefix_seen[p]
    prefix_seen[p] = 0
    for (id in ids) if (index(id, p) == 1) { prefix_seen[p] = 1; break }
    return prefix_seen[p]
}
function check_ids(s, where,   tok, last, name) {
    while (match(s, /[A-Za-z_][A-Za-z0-9_]*[*(]?/)) {
        tok = substr(s, RSTART, RLENGTH)
        s = substr(s, RSTART + RLENGTH)
        last = substr(tok, length(tok), 1)
        name = tok
        if (last == "*" || last == "(") name = substr(tok, 1, length(tok) - 1)
        if (last == "*") {
            if (name ~ /^(gw_|GW_)/ && !known_prefix(name))
                bad(where, "no identifier starts with `" name "`")
            continue
        }
        if (name ~ /^(gw_|GW_)/ || last == "(") {
            if (!(name in ids))
                bad(where, "`" name "` appears nowhere in the product source")
        }
    }
}
function check(span, where) {
    span = trim(span)
    print "SPAN " FILENAME "\t" span
    if (is_path(span)) check_path(span, where)
    else if (span ~ /^[A-Za-z_][A-Za-z0-9_]*$/ && span ~ /_/ && !(span in ids))
        bad(where, "`" span "` appears nowhere in the product source")
    else check_ids(span, where)
}
FILENAME == idsf || FILENAME == genf { ids[$0] = 1; next }
FILENAME == filesf {
    file[$0] = 1
    allf[++nfiles] = $0
    n = split($0, c, "/")
    base[c[n]] = 1
    p = c[1]
    if (n > 1) topdir[p] = 1
    for (i = 2; i < n; i++) { dir[p] = 1; p = p "/" c[i] }
    if (n > 1) dir[p] = 1
    next
}
FNR == 1 { fence = 0; carry = ""; carry_ln = 0 }
/^[ \t]*```/ { fence = !fence; next }
fence { next }
{
    if (carry != "") { text = carry " " $0; ln = carry_ln }
    else { text = $0; ln = FNR }
    tmp = text
    if (gsub(/`/, "", tmp) % 2 == 1) { carry = text; carry_ln = ln; next }
    carry = ""
    while (match(text, /`[^`]+`/)) {
        span = substr(text, RSTART + 1, RLENGTH - 2)
        text = substr(text, RSTART + RLENGTH)
        check(span, FILENAME ":" ln)
    }
}
' "$tmp/ids" "$tmp/generated" "$tmp/files" "${docs[@]}" >"$tmp/out"

bad=0
fail() {
    echo "docs: $*"
    bad=1
}
while IFS= read -r line; do
    fail "${line#FAIL }"
done < <(grep '^FAIL ' "$tmp/out" || true)
grep '^SPAN ' "$tmp/out" | sed 's/^SPAN //' >"$tmp/spans" || true

# Whether doc names file (its path, or its name alone) in backticks.
names() {
    local doc=$1 f=$2
    awk -F'\t' -v doc="$doc" -v f="$f" -v b="${f##*/}" \
        '$1 == doc && ($2 == f || $2 == b) { found = 1 } END { exit !found }' \
        "$tmp/spans"
}

for d in gateway/*/; do
    d=${d%/}
    [ -f "$d/README.md" ] || fail "$d/: no README.md (what the folder owns, one line per file)"
    grep -qE "^#+ .*$d/" docs/architecture.md 2>/dev/null ||
        fail "$d/: no section of docs/architecture.md names $d/ in its heading"
done
while IFS= read -r f; do
    case $f in
    gateway/*/*)
        d=${f#gateway/}
        d=gateway/${d%%/*}
        [ -f "$d/README.md" ] || continue
        names "$d/README.md" "$f" || fail "$f: named in no README (add its line to $d/README.md)"
        ;;
    gateway/*)
        names docs/architecture.md "$f" || names gateway/README.md "$f" ||
            fail "$f: named nowhere in docs/architecture.md (the top of gateway/)"
        ;;
    esac
done < <(grep -E '^gateway/.*\.(c|h|in)$' "$tmp/files")
exit "$bad"
