#!/usr/bin/env bash
# Builds the Debian package from an installed tree (make install DESTDIR=ROOT PREFIX=/usr):
# writes ROOT/DEBIAN/control from the template (version from the installed binary, the build
# machine's architecture, the installed size) and md5sums, then OUTDIR/mamfs_VERSION_ARCH.deb
# with dpkg-deb, every file owned by root. Prints the package's path.
# usage: Tools/package/deb.sh ROOT CONTROL_TEMPLATE OUTDIR
set -euo pipefail
[[ $# -eq 3 && -x $1/usr/bin/mamfs && -f $2 ]] || {
    echo "usage: $0 ROOT CONTROL_TEMPLATE OUTDIR (ROOT from make install DESTDIR=ROOT PREFIX=/usr)" >&2
    exit 64
}
root=$1 template=$2 out=$3

# The binary must run without the Swift toolchain: no LD_LIBRARY_PATH, a PATH without it.
version=$(env -i PATH=/usr/bin:/bin "$root/usr/bin/mamfs" --version | awk '$1 == "mamfs" { print $2 }')
[[ $version =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { echo "$0: cannot read the version from $root/usr/bin/mamfs" >&2; exit 70; }
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-"$(git config user.name 2>/dev/null || echo mamfs) <$(git config user.email 2>/dev/null || echo root@localhost)>"}

rm -rf "$root/DEBIAN"
mkdir -p "$root/DEBIAN"
size=$(du -sk --apparent-size "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@INSTALLED_SIZE@|$size|" \
    -e "s|@MAINTAINER@|$maintainer|" "$template" > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

mkdir -p "$out"
deb="$out/mamfs_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
