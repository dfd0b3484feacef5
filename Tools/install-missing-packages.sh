#!/usr/bin/env bash
# Installs, with apt-get (non-interactive), only those of the given Debian packages that are
# missing; runs apt-get update only when something is. Used by `make deps` and `make bench`.
# usage: Tools/install-missing-packages.sh LABEL PACKAGE...
set -euo pipefail
label="$1"; shift
missing=()
for package in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null) || status=""
    [[ $status == *"install ok installed"* ]] || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
sudo=""; [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
echo "$label: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
