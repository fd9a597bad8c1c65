#!/usr/bin/env bash
# The main job: builds tinyfuse and learns an image (on the GPU if there is one, else on the CPU).
# Extra arguments go to `tinyfuse learn-image` (e.g. --image photo.png --steps 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
# On the GPU when this build has the CUDA backend and a GPU is visible, else on the CPU.
device=cpu
if grep -q '^TINYFUSE_CUDA:BOOL=ON' build/CMakeCache.txt 2>/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  device=cuda
fi
echo "demo: learn-image on the $device backend" >&2
exec build/tools/cli/tinyfuse learn-image --device "$device" --out learn-image-out "$@"
