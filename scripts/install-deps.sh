#!/usr/bin/env bash
# Installs what building tinyfuse needs on Debian/Ubuntu (as root, or through sudo).
# The CUDA toolkit is not installed here: with nvcc on PATH (or in /usr/local/cuda) the CUDA
# backend is built as well.
set -euo pipefail
packages=(cmake g++ make pkg-config nlohmann-json3-dev libopenblas-dev libstb-dev libgtest-dev zlib1g-dev git)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
