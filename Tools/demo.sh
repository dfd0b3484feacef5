#!/usr/bin/env bash
# The mamfs demo on real files: a demo state directory, a managed account whose policy requires
# encryption, a mount over a demo backing directory, the licenses in /usr/share/common-licenses
# copied in and read back, their owner and encryption shown, proof that the backing bytes are
# ciphertext, a CLI decrypt of a backing file; then what MAM is for: a personal file next to the
# work files in the same mount (tagged, left plain), a protect-data round trip, a file-provider
# round trip (placeholder, download encrypted locally, evict, upload of a new file as a plain
# copy, import of a work file decrypted and of a personal file refused), and a selective wipe
# that removes only the work files and their keys (the personal file survives; a copy of a work
# file taken before can no longer be read). Builds nothing: `make demo` builds the release
# binary and passes its path.
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

# MAMFS_DEMO_DIR moves the demo's files (removed and made anew each run) elsewhere.
DEMO_DIR="${MAMFS_DEMO_DIR:-$REPO/build/demo}"
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
show() {
    local words=() word
    for word in "$@"; do [[ -n $word ]] && words+=("$word") || words+=("''"); done
    printf '$ %s\n' "${words[*]}"
    "$@"
}
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

# The main job: a mount over a backing directory, used by ordinary programs.
BACKING="$DEMO_DIR/backing"
MOUNTPOINT="$DEMO_DIR/mnt"
MOUNT_LOG="$DEMO_DIR/mount.log"
MOUNTED=0

unmount_demo() {
    if [[ ${CLOUD_MOUNTED:-0} -eq 1 ]]; then
        "$MAMFS" unmount "$CLOUD" 2>/dev/null || fusermount3 -uz "$CLOUD" 2>/dev/null || true
        CLOUD_MOUNTED=0
    fi
    if [[ $MOUNTED -eq 1 ]]; then
        "$MAMFS" unmount "$MOUNTPOINT" 2>/dev/null || fusermount3 -uz "$MOUNTPOINT" 2>/dev/null || true
        MOUNTED=0
    fi
}

run_mount_demo() {
    step "Mount $BACKING at $MOUNTPOINT for $UPN (files created there belong to the managed account)"
    mkdir -p "$BACKING" "$MOUNTPOINT"
    trap unmount_demo EXIT
    show mamfs mount "$BACKING" "$MOUNTPOINT" --account "$UPN" -o "log=$MOUNT_LOG"
    MOUNTED=1

    step "Real files from $LICENSES copied in with cp -a"
    show cp -a "$LICENSES" "$MOUNTPOINT/licenses"
    local count=0 same=0 file name
    for file in "$LICENSES"/*; do
        [[ -f "$file" && ! -L "$file" ]] || continue
        name="$(basename "$file")"
        count=$((count + 1))
        if cmp -s "$file" "$MOUNTPOINT/licenses/$name"; then same=$((same + 1)); else fail "$name reads back different"; fi
    done
    [[ $count -gt 0 ]] || { fail "no files in $LICENSES"; return; }
    echo "$same of $count files read back identical through the mount"
    show ls -l "$MOUNTPOINT/licenses" | sed -n 1,6p

    step "Owner and encryption, through the mount (xattrs) and on the backing files (mamfs info)"
    show getfattr --absolute-names -n user.mam.owner "$MOUNTPOINT/licenses/GPL-3"
    show getfattr --absolute-names -n user.mam.encrypted "$MOUNTPOINT/licenses/GPL-3"
    [[ "$(getfattr --absolute-names --only-values -n user.mam.owner "$MOUNTPOINT/licenses/GPL-3")" == "$ACCOUNT" ]] \
        || fail "user.mam.owner is not $ACCOUNT"
    show mamfs info "$BACKING/licenses/GPL-3" "$BACKING/licenses/Apache-2.0"
    local owned
    owned="$(mamfs info --json "$BACKING"/licenses/* | grep -c "\"owner\" : \"$ACCOUNT\"" || true)"
    [[ $owned -ge $count ]] || fail "info: only $owned of $count backing files owned by $ACCOUNT"

    step "The backing bytes are ciphertext"
    printf '$ grep -rl "%s" %s | wc -l\n' "$PHRASE" "$MOUNTPOINT"
    local in_mount in_backing
    in_mount="$(grep -rl "$PHRASE" "$MOUNTPOINT" | wc -l || true)"
    echo "$in_mount"
    printf '$ grep -rl "%s" %s | wc -l\n' "$PHRASE" "$BACKING"
    in_backing="$(grep -rl "$PHRASE" "$BACKING" | wc -l || true)"
    echo "$in_backing"
    [[ $in_mount -gt 0 ]] || fail "the phrase is not visible through the mount"
    [[ $in_backing -eq 0 ]] || fail "the phrase appears in $in_backing backing files"

    step "The CLI reads the same backing files: decrypt one to a copy and compare"
    show mamfs decrypt "$BACKING/licenses/GPL-3" -o "$WORK/GPL-3.decrypted"
    cmp -s "$LICENSES/GPL-3" "$WORK/GPL-3.decrypted" && echo "identical to $LICENSES/GPL-3" || fail "CLI decrypt differs"

    FILES_TOTAL=$count
    FILES_SAME=$same
}

# A personal file in the same mount: a directory protected for the unmanaged identity passes it
# on to new files, which stay plain.
PERSONAL_TEXT="Holiday plans: the lake house, 3-17 August. Not work data."
run_personal_demo() {
    step "A personal file next to the work files, in the same mount"
    show mkdir "$MOUNTPOINT/personal"
    show mamfs protect "$MOUNTPOINT/personal" --account ''
    printf '$ echo "%s" > %s\n' "$PERSONAL_TEXT" "$MOUNTPOINT/personal/holiday.txt"
    echo "$PERSONAL_TEXT" > "$MOUNTPOINT/personal/holiday.txt"
    show mamfs info "$BACKING/personal/holiday.txt" "$BACKING/licenses/GPL-3"
    local info
    info="$(mamfs info --json "$BACKING/personal/holiday.txt")"
    grep -q '"owner" : ""' <<<"$info" || fail "the personal file is not tagged unmanaged: $info"
    grep -q '"encrypted" : false' <<<"$info" || fail "the personal file is encrypted: $info"
    grep -q "$PERSONAL_TEXT" "$BACKING/personal/holiday.txt" && echo "the personal file is stored plain (its text is in the backing file)" \
        || fail "the personal file's text is not in its backing file"
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

# A non-replicated file provider of a "cloud" directory for the same account: remote files appear
# as placeholders, are downloaded (and encrypted locally) on first open; what goes up is plain.
REMOTE="$DEMO_DIR/remote"
CACHE="$DEMO_DIR/cloud-cache"
CLOUD="$DEMO_DIR/cloud"
CLOUD_MOUNTED=0
run_provider_demo() {
    step "A file provider: $REMOTE (the cloud, plain files only) mounted at $CLOUD for $UPN"
    mkdir -p "$REMOTE/memos" "$CACHE" "$CLOUD"
    cp "$LICENSES/GPL-3" "$REMOTE/handbook.txt"
    show mamfs mount "$CACHE" "$CLOUD" --remote "$REMOTE" --provider non-replicated --account "$UPN" -o "log=$DEMO_DIR/cloud.log"
    CLOUD_MOUNTED=1
    show mamfs provider status "$CLOUD/handbook.txt" | grep -E '^(item|materialized|owner):'
    grep -q '"materialized" : false' <<<"$(mamfs provider status --json "$CLOUD/handbook.txt")" || fail "handbook.txt is not a placeholder"

    step "First open downloads it; the local copy is encrypted for the account, the cloud copy stays plain"
    show cmp "$CLOUD/handbook.txt" "$REMOTE/handbook.txt" && echo "identical to the cloud copy" || fail "the downloaded file differs"
    show mamfs info "$CACHE/handbook.txt"
    grep -q "$PHRASE" "$CACHE/handbook.txt" && fail "the local copy is plaintext"
    grep -q "$PHRASE" "$REMOTE/handbook.txt" || fail "the cloud copy is not plain"
    show mamfs provider evict "$CLOUD/handbook.txt"
    grep -q '"materialized" : false' <<<"$(mamfs provider status --json "$CLOUD/handbook.txt")" && echo "back to a placeholder" \
        || fail "evict left the contents"

    step "A file written in the mount is uploaded as a plain copy when it is closed"
    local minutes="Minutes of the Contoso planning meeting."
    printf '$ echo "%s" > %s\n' "$minutes" "$CLOUD/memos/minutes.txt"
    echo "$minutes" > "$CLOUD/memos/minutes.txt"
    local waited=0
    until [[ -f "$REMOTE/memos/minutes.txt" ]] || ((waited >= 100)); do sleep 0.1; waited=$((waited + 1)); done
    show cat "$REMOTE/memos/minutes.txt" || true
    [[ "$(cat "$REMOTE/memos/minutes.txt" 2>/dev/null)" == "$minutes" ]] || fail "minutes.txt was not uploaded plain"
    grep -q '"encrypted" : true' <<<"$(mamfs info --json "$CACHE/memos/minutes.txt")" || fail "the local minutes.txt is not encrypted"

    step "Importing files: an encrypted work file is uploaded as a plain copy, a personal one is refused (receiveData: managedOnly)"
    echo "Contoso quarterly report (work)." > "$WORK/report.txt"
    show mamfs encrypt "$WORK/report.txt" --account "$UPN"
    show mamfs provider import "$WORK/report.txt" --to "$CLOUD/memos"
    [[ "$(cat "$REMOTE/memos/report.txt" 2>/dev/null)" == "Contoso quarterly report (work)." ]] || fail "the imported work file is not plain in the cloud"
    echo "My shopping list (personal)." > "$WORK/shopping.txt"
    local status=0
    show mamfs provider import "$WORK/shopping.txt" --to "$CLOUD/memos" || status=$?
    echo "exit code $status"
    [[ $status -eq 77 ]] || fail "importing a personal file exited $status, not 77"
    [[ -e "$REMOTE/memos/shopping.txt" ]] && fail "the refused personal file was uploaded"
    show ls "$REMOTE/memos"
    show mamfs unmount "$CLOUD"
    CLOUD_MOUNTED=0
}

# The selective wipe: the account's files go, its keys are destroyed, personal data stays.
run_wipe_demo() {
    step "Selective wipe of $UPN: the work files go, the personal file stays"
    cp "$BACKING/licenses/GPL-3" "$DEMO_DIR/GPL-3.backup-copy"
    echo "(a copy of an encrypted backing file, as a backup or the trash would keep it: $DEMO_DIR/GPL-3.backup-copy)"
    show mamfs wipe "$UPN"
    show find "$MOUNTPOINT" -type f
    local left
    left="$(find "$BACKING" -type f ! -path "$BACKING/personal/holiday.txt" | wc -l)"
    [[ $left -eq 0 ]] || fail "$left work files are still in the backing directory"
    show cat "$MOUNTPOINT/personal/holiday.txt"
    [[ "$(cat "$MOUNTPOINT/personal/holiday.txt" 2>/dev/null)" == "$PERSONAL_TEXT" ]] && PERSONAL_SURVIVED=yes \
        || fail "the personal file did not survive the wipe"

    step "The wiped account's keys are gone: the copy taken before cannot be decrypted"
    local status=0
    show mamfs decrypt "$DEMO_DIR/GPL-3.backup-copy" -o "$DEMO_DIR/GPL-3.after-wipe" || status=$?
    echo "exit code $status"
    [[ $status -eq 77 ]] || fail "decrypting the copy after the wipe exited $status, not 77"
    [[ -e "$DEMO_DIR/GPL-3.after-wipe" ]] && fail "decrypting the copy after the wipe wrote a file"

    step "Unmount"
    show mamfs unmount "$MOUNTPOINT"
    MOUNTED=0
}

summary() {
    step "Summary"
    echo "state:     $STATE"
    echo "files:     ${FILES_TOTAL:-0} copied into the mount, ${FILES_SAME:-0} read back identical; backing: ciphertext"
    echo "wipe:      work files and keys gone; personal file survived: ${PERSONAL_SURVIVED:-no}"
    if [[ $failures -eq 0 ]]; then
        echo "result:    OK"
    else
        echo "result:    $failures check(s) FAILED"
    fi
}

cd "$REPO"
setup_state
run_mount_demo
run_personal_demo
run_data_demo
run_provider_demo
run_wipe_demo
summary
[[ $failures -eq 0 ]]
