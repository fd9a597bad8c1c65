#!/usr/bin/env bash
# The main job: builds what it needs and learns an image, on the GPU if one is visible (and nvcc
# is there to build for it), else on the CPU.
# Extra arguments go to `tinyfuse learn-image` (e.g. --image photo.png --steps 2000).
# Without a GPU only the CPU library and the CLI are compiled (into build-cpu/, a minute or two);
# with one, the CUDA backend for that GPU's architecture alone (into build/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
jobs=$(nproc 2>/dev/null || echo 2)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  device=cuda build=build cuda=ON
  echo "demo: GPU visible ($(nvidia-smi -L | head -n 1)): building the CUDA backend for it" >&2
else
  device=cpu build=build-cpu cuda=OFF
  echo "demo: no GPU visible (or no nvcc): building the CPU backend and the CLI only" >&2
fi
start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTINYFUSE_CUDA=$cuda >/dev/null
cmake --build "$build" -j"$jobs" --target tinyfuse_cli
echo "demo: built in $(( $(date +%s) - start )) s; learn-image on the $device backend" >&2
exec "$build/tools/cli/tinyfuse" learn-image --device "$device" --out learn-image-out "$@"
