#!/usr/bin/env bash
# Checks the Debian package `make deb` wrote to OUTDIR:
#  1. its control file: version = BUILT_BIN --version, this machine's architecture, Depends;
#  2. its files are exactly those of `make install DESTDIR=... PREFIX=/usr` (paths, modes,
#     bytes), owned by root;
#  3. installed with dpkg into a scratch root (its own admin directory), the binary links only
#     libraries of packages in Depends (ldd, nothing from the Swift toolchain) and runs with a
#     clean environment;
#  4. one real mount: the installed mount helper runs the installed mamfs (as mount(8) would
#     for `mount -t fuse.mamfs`), a file written through it reads back, is stored encrypted and
#     owned by the account, and the installed mamfs unmounts it;
#  5. apt-get can install it here (simulated: every dependency resolves).
# Exits non-zero on the first failed check. Needs root and /dev/fuse.
# usage: Tools/package/check.sh OUTDIR BUILT_BIN
set -euo pipefail
[[ $# -eq 2 && -x $2 ]] || { echo "usage: $0 OUTDIR BUILT_BIN" >&2; exit 64; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$(cd "$1" && pwd)
built=$2
fail() { echo "package-check: FAIL: $*" >&2; exit 1; }
ok() { echo "package-check: ok: $*"; }

version=$(env -i PATH=/usr/bin:/bin "$built" --version | awk '{ print $2 }')
arch=$(dpkg --print-architecture)
deb="$out/mamfs_${version}_${arch}.deb"
[[ -f $deb ]] || fail "no $deb"
echo "package-check: $deb"

# 1. The control file.
[[ $(dpkg-deb -f "$deb" Package) == mamfs ]] || fail "Package is not mamfs"
[[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "Version $(dpkg-deb -f "$deb" Version) is not $version"
[[ $(dpkg-deb -f "$deb" Architecture) == "$arch" ]] || fail "Architecture is not $arch"
depends=$(dpkg-deb -f "$deb" Depends | tr -d ' ' | tr ',' '\n' | sed 's/(.*//' | sort -u)
for needed in fuse3 libfuse3-3 libssl3 libsqlite3-0 libcurl4 libxml2 libdbus-1-3; do
    grep -qx "$needed" <<<"$depends" || fail "Depends lacks $needed"
done
ok "control: mamfs $version $arch, Depends: $(echo $depends)"

scratch=$(mktemp -d -t mamfs-package-check.XXXXXX)
mountpoint=$scratch/mnt
daemon_pids() {
    local dir cmdline
    for dir in /proc/[0-9]*; do
        cmdline=$(tr '\0' ' ' < "$dir/cmdline" 2>/dev/null) || continue
        [[ $cmdline == *" mount "*" $mountpoint"* ]] && echo "${dir#/proc/}"
    done
    return 0
}
cleanup() {
    if grep -q " $mountpoint " /proc/mounts 2>/dev/null; then
        fusermount3 -u "$mountpoint" 2>/dev/null || fusermount3 -uz "$mountpoint" 2>/dev/null || true
    fi
    local pid
    for pid in $(daemon_pids); do kill "$pid" 2>/dev/null || true; done
    rm -rf "$scratch"
}
trap cleanup EXIT

# 2. The files: those of `make install PREFIX=/usr`, owned by root.
make -s -C "$repo" --no-print-directory install DESTDIR="$scratch/install" PREFIX=/usr INSTALL_BIN="$built" >/dev/null
dpkg-deb -x "$deb" "$scratch/extracted"
listing() { (cd "$1" && find . -mindepth 1 -printf '%y %m %p\n' | sort); }
diff <(listing "$scratch/install") <(listing "$scratch/extracted") >&2 || fail "the package's files differ from make install's (above)"
diff -r "$scratch/install" "$scratch/extracted" >&2 || fail "the package's file contents differ from make install's"
bad_owner=$(dpkg-deb -c "$deb" | awk '$2 != "root/root"')
[[ -z $bad_owner ]] || fail "files not owned by root: $bad_owner"
ok "files: $(find "$scratch/extracted" -type f | wc -l) files, as make install PREFIX=/usr installs them, owned by root"

# 3. Installed into a scratch root with dpkg; libraries and a clean run.
root=$scratch/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# The scratch root has no packages, so its dependencies are checked above and by apt below.
dpkg --root="$root" --force-depends --force-script-chrootless -i "$deb" >/dev/null 2>"$scratch/dpkg.err" \
    || { cat "$scratch/dpkg.err" >&2; fail "dpkg --root -i"; }
[[ $(dpkg --root="$root" -s mamfs | sed -n 's/^Status: //p') == "install ok installed" ]] || fail "dpkg does not list mamfs as installed"
mamfs=$root/usr/bin/mamfs
helper=$root/sbin/mount.fuse.mamfs
[[ -x $mamfs && -x $helper ]] || fail "dpkg did not install usr/bin/mamfs and sbin/mount.fuse.mamfs"
grep -qx 'installed_mamfs="/usr/bin/mamfs"' "$helper" || fail "the helper does not name /usr/bin/mamfs"
echo "package-check: ldd $mamfs"
libraries=$(env -i PATH=/usr/bin:/bin ldd "$mamfs")
sed 's/^/    /' <<<"$libraries"
grep -q "not found" <<<"$libraries" && fail "a library is not found"
grep -qi swift <<<"$libraries" && fail "the binary links a Swift toolchain library"
# Only the libraries the binary itself names (DT_NEEDED) must come from packages in Depends:
# those packages bring their own dependencies (libcurl alone pulls in some twenty more).
needed=$(readelf -d "$mamfs" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[[ -n $needed ]] || fail "readelf lists no NEEDED library"
for name in $needed; do
    library=$(awk -v name="$name" '$1 == name && $2 == "=>" { print $3 }' <<<"$libraries")
    [[ -n $library ]] || library=$(awk -v name="$name" '$1 ~ "/" name "$" { print $1 }' <<<"$libraries")
    [[ -n $library ]] || fail "ldd does not resolve $name"
    owner=$(dpkg -S "$(readlink -f "$library")" 2>/dev/null || dpkg -S "$library" 2>/dev/null) || fail "no package owns $library"
    owner=${owner%%:*}
    grep -qx "$owner" <<<"$depends" || fail "$name ($library) belongs to $owner, which is not in Depends"
done
ok "libraries: each one the binary needs ($(echo $needed)) belongs to a package in Depends"
# libcurl is not among them: the WebDAV remote loads it with dlopen on first use (CCurlLoader).
grep -q "libcurl" <<<"$needed" && fail "the binary names libcurl as NEEDED (it should load it on first use)"
# awk reads the whole list (no early exit): under pipefail a reader that stops early would
# kill ldconfig with SIGPIPE once its output outgrows the pipe, failing the check.
curl_library=$(awk '$1 == "libcurl.so.4" && !found { print $NF; found = 1 }' <<<"$(ldconfig -p)")
[[ -n $curl_library ]] || fail "ldconfig knows no libcurl.so.4"
owner=$(dpkg -S "$(readlink -f "$curl_library")" 2>/dev/null || dpkg -S "$curl_library" 2>/dev/null) || fail "no package owns $curl_library"
owner=${owner%%:*}
grep -qx "$owner" <<<"$depends" || fail "libcurl.so.4 ($curl_library, loaded on first use) belongs to $owner, which is not in Depends"
ok "libcurl.so.4, loaded on first use, belongs to $owner in Depends"
[[ $(env -i PATH=/usr/bin:/bin "$mamfs" --version) == "mamfs $version" ]] || fail "installed mamfs --version"
ok "installed: mamfs --version prints 'mamfs $version' with an empty environment"

# 4. One real mount with the installed helper and binary.
state=$scratch/state backing=$scratch/backing
mkdir -p "$backing" "$mountpoint"
run() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$scratch" MAMFS_BIN="$mamfs" "$@"; }
run "$mamfs" init --state "$state" >/dev/null
account=8c7f3e1a-0000-4000-8000-000000000001
run "$mamfs" enroll "$account" --upn check@contoso.com --policy "$repo/Tools/demo/policy-encrypt.json" --state "$state" >/dev/null
run "$helper" "$backing" "$mountpoint" -o "rw,nofail,account=check@contoso.com,state=$state,log=$scratch/mount.log" \
    || fail "the installed helper did not mount"
grep -q "^$backing $mountpoint fuse.mamfs " /proc/mounts || fail "no fuse.mamfs mount of $backing on $mountpoint"
phrase="package check $(date +%s%N)"
printf '%s\n' "$phrase" > "$mountpoint/note.txt"
[[ $(cat "$mountpoint/note.txt") == "$phrase" ]] || fail "the file does not read back through the mount"
grep -q "$phrase" "$backing/note.txt" && fail "the backing file holds the plaintext"
[[ $(getfattr --only-values -n user.mam.owner "$mountpoint/note.txt") == "$account" ]] || fail "user.mam.owner is not $account"
info=$(run "$mamfs" info --json "$backing/note.txt" --state "$state") || fail "info exits non-zero"
grep -q '"encrypted" : true' <<<"$info" || fail "info does not say encrypted"
run "$mamfs" unmount "$mountpoint" || fail "the installed mamfs did not unmount"
grep -q " $mountpoint " /proc/mounts && fail "still mounted after unmount"
ok "mount: the installed helper and mamfs mounted $backing, the file reads back, is encrypted and owned by $account, unmounted"

# 5. Dependencies resolve for apt-get.
if command -v apt-get >/dev/null; then
    apt-get install -s -q "$deb" >"$scratch/apt.out" 2>&1 || { cat "$scratch/apt.out" >&2; fail "apt-get install -s $deb"; }
    ok "apt-get install -s: $(grep -c '^Inst' "$scratch/apt.out") package(s) to install, dependencies resolve"
fi
echo "package-check: all checks passed"
