#!/usr/bin/env bash
# The mamfs demo on real files: a demo state directory, a managed account whose policy requires
# encryption, the licenses in /usr/share/common-licenses encrypted, inspected, decrypted to
# copies and compared, and a protect-data round trip. Builds nothing: `make demo` builds the
# release binary and passes its path.
#
# usage: Tools/demo.sh PATH/TO/mamfs
# Exits non-zero when any check fails.
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
    echo "usage: $0 PATH/TO/mamfs (the release binary: make demo)" >&2
    exit 64
fi
MAMFS="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"

DEMO_DIR="$REPO/build/demo"
STATE="$DEMO_DIR/state"
WORK="$DEMO_DIR/work"
ACCOUNT="8c7f3e1a-0000-4000-8000-000000000001"
UPN="demo@contoso.com"
POLICY="$HERE/demo/policy-encrypt.json"
LICENSES=/usr/share/common-licenses
PHRASE="GNU GENERAL PUBLIC LICENSE"
export MAMFS_STATE="$STATE"
unset MAMFS_PASSPHRASE_FILE

failures=0
step() { printf '\n== %s\n' "$*"; }
# Prints a command as typed (paths relative to the work directory), then runs it.
show() { printf '$ %s\n' "$*"; "$@"; }
mamfs() { "$MAMFS" "$@"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; failures=$((failures + 1)); }

# A fresh state directory with the demo managed account.
setup_state() {
    step "State directory $STATE and the demo managed account"
    rm -rf "$DEMO_DIR"
    mkdir -p "$WORK"
    show mamfs init
    show mamfs enroll "$ACCOUNT" --upn "$UPN" --policy Tools/demo/policy-encrypt.json
    show mamfs accounts
    show mamfs policy show "$UPN"
}

# The main job on real files. (Issue 3 replaces this with a mount over a backing directory.)
run_files_demo() {
    step "Real files from $LICENSES (in $WORK)"
    cd "$WORK"
    mkdir -p plain encrypted decrypted
    local count=0 file name
    for file in "$LICENSES"/*; do
        [[ -f "$file" && ! -L "$file" ]] || continue
        cp "$file" plain/
        count=$((count + 1))
    done
    [[ $count -gt 0 ]] || { fail "no files in $LICENSES"; return; }
    echo "copied $count files into plain/"

    step "Encrypt each file for $UPN (mamfs encrypt -o)"
    echo '$ for f in plain/*; do mamfs encrypt "$f" --account '"$UPN"' -o "encrypted/${f#plain/}"; done'
    for file in plain/*; do
        name="${file#plain/}"
        mamfs encrypt "$file" --account "$UPN" -o "encrypted/$name" || fail "encrypt $name"
    done
    echo '$ mamfs info encrypted/*'
    mamfs info encrypted/*

    step "The stored bytes are ciphertext"
    printf '$ grep -l "%s" plain/* encrypted/*\n' "$PHRASE"
    grep -l "$PHRASE" plain/* encrypted/* || true
    local in_plain in_encrypted
    in_plain="$(grep -l "$PHRASE" plain/* | wc -l || true)"
    in_encrypted="$(grep -l "$PHRASE" encrypted/* | wc -l || true)"
    echo "files containing '$PHRASE': plain $in_plain, encrypted $in_encrypted"
    [[ $in_plain -gt 0 ]] || fail "the phrase is not in the plain files"
    [[ $in_encrypted -eq 0 ]] || fail "the phrase appears in $in_encrypted encrypted files"
    # mamfs info --json says every file is encrypted and owned by the demo account.
    local encrypted_count
    encrypted_count="$(mamfs info --json encrypted/* | grep -c "\"owner\" : \"$ACCOUNT\"" || true)"
    [[ $encrypted_count -eq $count ]] || fail "info: $encrypted_count of $count files owned by $ACCOUNT"

    step "Decrypt to copies (mamfs decrypt -o) and compare with cmp"
    local same=0
    echo '$ for f in encrypted/*; do mamfs decrypt "$f" -o "decrypted/${f#encrypted/}"; cmp "plain/${f#encrypted/}" "decrypted/${f#encrypted/}"; done'
    for file in encrypted/*; do
        name="${file#encrypted/}"
        mamfs decrypt "$file" -o "decrypted/$name" || { fail "decrypt $name"; continue; }
        if cmp -s "plain/$name" "decrypted/$name"; then
            same=$((same + 1))
        else
            fail "$name differs after the round trip"
        fi
    done
    echo "$same of $count decrypted copies are identical to the originals"
    FILES_TOTAL=$count
    FILES_SAME=$same
}

run_data_demo() {
    step "Buffer protection: protect-data / unprotect-data"
    local text="Quarterly results, confidential to Contoso."
    local protected plain
    echo "\$ printf '%s' '$text' | mamfs protect-data --account $UPN --base64"
    protected="$(printf '%s' "$text" | mamfs protect-data --account "$UPN" --base64)"
    echo "protected (base64): ${protected:0:60}..."
    plain="$(printf '%s\n' "$protected" | mamfs unprotect-data --base64)"
    echo "unprotected: $plain"
    [[ "$plain" == "$text" ]] || fail "protect-data round trip"
    [[ "$(printf 'never protected' | mamfs unprotect-data)" == "never protected" ]] \
        || fail "unprotect-data of plain input"
}

summary() {
    step "Summary"
    echo "state:     $STATE"
    echo "files:     ${FILES_TOTAL:-0} encrypted and decrypted, ${FILES_SAME:-0} identical after the round trip"
    if [[ $failures -eq 0 ]]; then
        echo "result:    OK"
    else
        echo "result:    $failures check(s) FAILED"
    fi
}

cd "$REPO"
setup_state
run_files_demo
run_data_demo
summary
[[ $failures -eq 0 ]]
