#!/usr/bin/env bash
# Installs the Debian packages packmamba needs to build, test and run its demo. Idempotent: does nothing when
# everything is present. Needs root (or sudo) the first time.
set -euo pipefail
PKGS=(build-essential cmake pkg-config
      libopenblas-dev libpcre2-dev libjansson-dev zlib1g-dev libutf8proc-dev libzip-dev libcmocka-dev
      openmpi-bin libopenmpi-dev
      gnuplot-nox chromium
      linux-doc-6.1 fortunes fortunes-min)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
