#!/usr/bin/env bash
# The first sync of a real tree to a WebDAV server and back, mamfs against `rclone copy` of the
# same tree to the same server in the same run (docs/PERFORMANCE.md, "First sync over WebDAV"):
#   - mamfs up (mount):   a replicated mount on an empty DAV directory, `cp -a` of the tree into
#                         it, then `mamfs provider sync` until a pass finds nothing left to do;
#   - mamfs up (replica): `mamfs provider sync` of a local replica already holding the tree;
#   - mamfs down:         a replicated mount of the filled DAV directory on an empty backing
#                         directory (`mamfs mount` returns once its first pass fetched everything);
#   - rclone up / down:   `rclone copy` of the tree to an empty DAV directory, and back to an empty
#                         local directory.
# Apache httpd with mod_dav_fs serves 127.0.0.1 on a free port from a temp ServerRoot; every step
# starts from a fresh DAV directory (down: filled by the step before), caches dropped. Medians of
# ROUNDS rounds, the ratios mamfs/rclone, and the mount daemons' peak RSS (VmHWM) are printed.
# WebDAV has no symbolic links: the tree is copied without them first (both tools get the same).
# Account: MAMFS_BENCH_ACCOUNT=managed (default: the demo's encrypting policy, so the replica's
# files are encrypted and uploads decrypt them) or unmanaged (plain files).
# Needs root (Apache runs its workers as www-data; FUSE mounts); installs rclone if missing.
#
# usage: Tools/bench/webdav-first-sync.sh PATH/TO/mamfs(release) [TREE=/usr/share/doc] [ROUNDS=3]
set -euo pipefail
MAMFS="$(readlink -f "$1")"; TREE="${2:-/usr/share/doc}"; ROUNDS="${3:-3}"
ACCOUNT_KIND="${MAMFS_BENCH_ACCOUNT:-managed}"
HERE="$(cd "$(dirname "$0")" && pwd)"
MODULES=/usr/lib/apache2/modules
[[ "$(id -u)" -eq 0 ]] || { echo "webdav-first-sync: needs root (Apache workers as www-data, FUSE)" >&2; exit 77; }
command -v rclone >/dev/null || "$HERE/../install-missing-packages.sh" "webdav bench" rclone
for tool in apache2 htpasswd curl rclone fusermount3; do
    command -v "$tool" >/dev/null || { echo "webdav-first-sync: $tool is missing (make deps installs apache2, apache2-utils)" >&2; exit 69; }
done

WORK="$(mktemp -d /var/tmp/mamfs-webdav-bench-XXXXXX)"
chmod 0755 "$WORK"   # Apache's workers traverse it to reach the DAV directory
APACHE_PID=""; DAEMON_PID=""
MNT="$WORK/mnt"
stop_daemon() {
    if grep -qs " $MNT fuse" /proc/mounts; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true; fi
    if [[ -n "$DAEMON_PID" ]]; then
        for _ in $(seq 1 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
        kill "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true
        DAEMON_PID=""
    fi
}
cleanup() {
    stop_daemon
    if [[ -n "$APACHE_PID" ]]; then kill "$APACHE_PID" 2>/dev/null || true; wait "$APACHE_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
seconds() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc -l | awk '{ printf "%.2f", $1 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { echo "$1 / $2" | bc -l | awk '{ printf "%.2f", $1 }'; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# --- The server ---
USER_NAME=bench; PASSWORD="bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
SERVER="$WORK/apache"; DAV="$SERVER/www/dav"
mkdir -p "$SERVER/www" "$SERVER/lock"; chmod 0755 "$SERVER" "$SERVER/www"
chown www-data:www-data "$SERVER/lock"
htpasswd -bcB "$SERVER/htpasswd" "$USER_NAME" "$PASSWORD" 2>/dev/null; chmod 0644 "$SERVER/htpasswd"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat > "$SERVER/httpd.conf" <<EOF
ServerRoot $SERVER
ServerName 127.0.0.1
Listen 127.0.0.1:$PORT
LoadModule mpm_event_module $MODULES/mod_mpm_event.so
LoadModule authz_core_module $MODULES/mod_authz_core.so
LoadModule authn_core_module $MODULES/mod_authn_core.so
LoadModule authn_file_module $MODULES/mod_authn_file.so
LoadModule auth_basic_module $MODULES/mod_auth_basic.so
LoadModule authz_user_module $MODULES/mod_authz_user.so
LoadModule dav_module $MODULES/mod_dav.so
LoadModule dav_fs_module $MODULES/mod_dav_fs.so
User www-data
Group www-data
PidFile $SERVER/httpd.pid
ErrorLog $SERVER/error.log
LogLevel warn
DocumentRoot $SERVER/www
DavLockDB $SERVER/lock/DavLock
LimitRequestBody 0
Timeout 120
<Directory $DAV>
    Dav On
    AuthType Basic
    AuthName "mamfs bench"
    AuthUserFile $SERVER/htpasswd
    Require valid-user
</Directory>
EOF
fresh_dav() { rm -rf "$DAV"; mkdir "$DAV"; chown www-data:www-data "$DAV"; }
fresh_dav
apache2 -f "$SERVER/httpd.conf" -DFOREGROUND &
APACHE_PID=$!
URL="http://127.0.0.1:$PORT/dav/"
for _ in $(seq 1 100); do
    code="$(curl -s -o /dev/null -w '%{http_code}' -u "$USER_NAME:$PASSWORD" -X PROPFIND -H 'Depth: 0' "$URL" || true)"
    [[ "$code" == 207 ]] && break
    kill -0 "$APACHE_PID" 2>/dev/null || { cat "$SERVER/error.log" >&2; exit 70; }
    sleep 0.1
done
[[ "$code" == 207 ]] || { echo "webdav-first-sync: Apache did not answer on $URL" >&2; exit 70; }
# mamfs takes the credentials from the environment, rclone an obscured password on its command line.
export MAMFS_REMOTE_USER="$USER_NAME" MAMFS_REMOTE_PASSWORD="$PASSWORD"
RCLONE=(rclone --webdav-url "$URL" --webdav-vendor other --webdav-user "$USER_NAME"
        --webdav-pass "$(rclone obscure "$PASSWORD")" --config /dev/null -q)

# --- The tree and the state ---
rsync -a -q --no-links "$TREE/" "$WORK/tree/"
files=$(find "$WORK/tree" -type f | wc -l); dirs=$(find "$WORK/tree" -mindepth 1 -type d | wc -l)
export MAMFS_STATE="$WORK/state"
"$MAMFS" init >/dev/null
ACCOUNT=()
if [[ "$ACCOUNT_KIND" == managed ]]; then
    "$MAMFS" enroll 8c7f3e1a-0000-4000-8000-000000000001 --upn bench@contoso.com \
        --policy "$HERE/../demo/policy-encrypt.json" >/dev/null
    ACCOUNT=(--account bench@contoso.com)
fi
echo "tree: $TREE without symlinks ($files files, $dirs directories, $(du -sh "$WORK/tree" | cut -f1)); $ROUNDS rounds;" \
     "account: $ACCOUNT_KIND; server: Apache mod_dav_fs on 127.0.0.1; load: $(cut -d' ' -f1-3 /proc/loadavg)"

# Starts `mamfs mount BACKING MNT --remote URL --provider replicated -f` in the background and
# waits until the mount is there (a replicated mount appears once its first pass is done).
start_mount() {
    mkdir -p "$MNT"
    "$MAMFS" mount "$1" "$MNT" --remote "$URL" --provider replicated "${ACCOUNT[@]}" -f > "$WORK/daemon.log" 2>&1 &
    DAEMON_PID=$!
    until grep -qs " $MNT fuse" /proc/mounts; do
        kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/daemon.log" >&2; exit 70; }
        sleep 0.02
    done
}

# Runs `mamfs provider sync BACKING` until a clean pass that changed nothing (at most 20 passes).
sync_until_clean() {
    for _ in $(seq 1 20); do
        out="$("$MAMFS" provider sync "$1" 2>"$WORK/sync.err")" && [[ "$out" == *": no changes" ]] && return 0
    done
    echo "webdav-first-sync: $1 not in sync after 20 passes: $out $(tail -3 "$WORK/sync.err")" >&2; exit 74
}

# In round 1: the DAV directory (Apache serves it as it is on disk) holds the tree exactly.
check_remote() {
    [[ "$round" -eq 1 ]] || return 0
    diff -r "$WORK/tree" "$DAV/doc" >/dev/null || { echo "webdav-first-sync: $1: the server's copy differs from the tree" >&2; exit 65; }
}

up_mount=(); up_replica=(); down=(); rclone_up=(); rclone_down=(); hwm_up=(); hwm_down=()
for round in $(seq 1 "$ROUNDS"); do
    rm -rf "$WORK/backing" "$WORK/replica" "$WORK/down" "$WORK/rclone-down"
    mkdir -p "$WORK/backing" "$WORK/down" "$WORK/rclone-down"

    # mamfs up through a mount: copy in, then sync until nothing is left.
    fresh_dav; start_mount "$WORK/backing"
    drop_caches; s=$(seconds)
    cp -a "$WORK/tree" "$MNT/doc"
    sync_until_clean "$WORK/backing"
    e=$(seconds); up_mount+=("$(elapsed "$s" "$e")"); hwm_up+=("$(hwm_kib "$DAEMON_PID")")
    stop_daemon
    check_remote "mamfs up (mount)"

    # mamfs up from a filled replica: one CLI pass (the replica is made with the same account).
    fresh_dav
    cp -a "$WORK/backing" "$WORK/replica"; rm -rf "$WORK/replica/.mamfs-provider"
    drop_caches; s=$(seconds)
    "$MAMFS" provider sync "$WORK/replica" --remote "$URL" "${ACCOUNT[@]}" >/dev/null
    e=$(seconds); up_replica+=("$(elapsed "$s" "$e")")
    check_remote "mamfs up (replica)"

    # mamfs down: a fresh replicated mount of the filled remote.
    drop_caches; s=$(seconds)
    start_mount "$WORK/down"
    e=$(seconds); down+=("$(elapsed "$s" "$e")"); hwm_down+=("$(hwm_kib "$DAEMON_PID")")
    if [[ "$round" -eq 1 ]]; then
        diff -r "$WORK/tree" "$MNT/doc" >/dev/null || { echo "webdav-first-sync: the mount's copy differs from the tree" >&2; exit 65; }
    fi
    stop_daemon

    # rclone up and down.
    fresh_dav
    drop_caches; s=$(seconds)
    "${RCLONE[@]}" copy "$WORK/tree" :webdav:doc
    e=$(seconds); rclone_up+=("$(elapsed "$s" "$e")")
    check_remote "rclone up"
    drop_caches; s=$(seconds)
    "${RCLONE[@]}" copy :webdav:doc "$WORK/rclone-down"
    e=$(seconds); rclone_down+=("$(elapsed "$s" "$e")")
    if [[ "$round" -eq 1 ]]; then
        diff -r "$WORK/tree" "$WORK/rclone-down" >/dev/null || { echo "webdav-first-sync: rclone's copy differs from the tree" >&2; exit 65; }
    fi
    echo "round $round: mamfs up (mount: cp + sync) ${up_mount[-1]}s | mamfs up (replica sync) ${up_replica[-1]}s |" \
         "rclone up ${rclone_up[-1]}s | mamfs down (mount) ${down[-1]}s | rclone down ${rclone_down[-1]}s |" \
         "daemon VmHWM up $((hwm_up[-1] / 1024)) MiB, down $((hwm_down[-1] / 1024)) MiB"
done

m_up_mount=$(median "${up_mount[@]}"); m_up_replica=$(median "${up_replica[@]}"); m_down=$(median "${down[@]}")
m_rclone_up=$(median "${rclone_up[@]}"); m_rclone_down=$(median "${rclone_down[@]}")
echo "median of $ROUNDS: up: mamfs mount ${m_up_mount}s, mamfs replica ${m_up_replica}s, rclone ${m_rclone_up}s;" \
     "down: mamfs ${m_down}s, rclone ${m_rclone_down}s"
echo "ratio mamfs/rclone: up (mount: cp + sync) $(ratio "$m_up_mount" "$m_rclone_up"), up (replica sync)" \
     "$(ratio "$m_up_replica" "$m_rclone_up"), down $(ratio "$m_down" "$m_rclone_down")"
echo "daemon peak RSS (VmHWM, max over rounds): up $(( $(printf '%s\n' "${hwm_up[@]}" | sort -n | tail -1) / 1024 )) MiB," \
     "down $(( $(printf '%s\n' "${hwm_down[@]}" | sort -n | tail -1) / 1024 )) MiB"
