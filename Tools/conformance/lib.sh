# Shared by the conformance scripts (sourced): messages, phase timing, and the two mounts they
# test (a managed, encrypting one and an unmanaged one), made and always removed again.
# Needs: MAMFS (the mamfs binary), WORK (a scratch directory for states, backings, mount points).

note() { printf 'conformance: %s\n' "$*"; }
fail() { printf 'conformance: FAIL: %s\n' "$*" >&2; FAILURES=$((${FAILURES:-0} + 1)); }

# Runs "$@" and records its wall time as "NAME SECONDS" in $WORK/times.
timed() {
    local name=$1 start status=0
    shift
    start=$(date +%s)
    "$@" || status=$?
    printf '%s %d\n' "$name" $(($(date +%s) - start)) >> "$WORK/times"
    return $status
}

MANAGED_ACCOUNT=8c7f3e1a-0000-4000-8000-0000000c0f0a
MANAGED_UPN=conformance@contoso.com
MOUNTS=()

# mount_kind KIND: a fresh state, backing directory and mount point for KIND (managed: owned by
# the managed account, encrypting; unmanaged: no --account, plain-tagged), mounted with
# allow_other (pjdfstest acts as other users). Sets MOUNT_POINT and MOUNT_BACKING.
mount_kind() {
    local kind=$1 base=$WORK/$1
    rm -rf "$base"
    mkdir -p "$base/backing" "$base/mnt"
    "$MAMFS" init --state "$base/state" >/dev/null
    local account=()
    if [[ $kind == managed ]]; then
        printf '{"fileEncryptionRequired": true}\n' > "$base/policy.json"
        "$MAMFS" enroll "$MANAGED_ACCOUNT" --upn "$MANAGED_UPN" --policy "$base/policy.json" --state "$base/state" >/dev/null
        account=(--account "$MANAGED_UPN")
    fi
    "$MAMFS" mount "$base/backing" "$base/mnt" "${account[@]}" -o "allow_other,log=$WORK/logs/$kind-mount.log" \
        --state "$base/state" 2>>"$WORK/logs/$kind-mount.log"
    MOUNTS+=("$base/mnt")
    MOUNT_POINT=$base/mnt
    MOUNT_BACKING=$base/backing
}

# daemon_pid MOUNTPOINT: the pid of the `mamfs mount` daemon serving it (from /proc/PID/cmdline).
daemon_pid() {
    local dir arguments
    for dir in /proc/[0-9]*; do
        arguments=$(tr '\0' '\n' 2>/dev/null < "$dir/cmdline") || continue
        if grep -qx -- "$1" <<<"$arguments" && grep -qx mount <<<"$arguments"; then
            echo "${dir#/proc/}"
            return 0
        fi
    done
    return 1
}

# Unmounts every mount made here (lazily if busy) and kills what is left of their daemons.
unmount_all() {
    local mountpoint pid
    for mountpoint in "${MOUNTS[@]}"; do
        pid=$(daemon_pid "$mountpoint") || pid=""
        if grep -q " $mountpoint " /proc/mounts; then
            fusermount3 -u "$mountpoint" 2>/dev/null || fusermount3 -uz "$mountpoint" 2>/dev/null || true
        fi
        if [[ -n $pid ]]; then
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    MOUNTS=()
}
