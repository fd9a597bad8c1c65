#!/usr/bin/env bash
# The main job: builds tinyfuse and learns an image on the CPU.
# Extra arguments go to `tinyfuse learn-image` (e.g. --image photo.png --steps 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
# The default config (hash grid + FullyFusedMLP) runs on the CPU only until the GPU encodings and
# fused MLPs land; until then the demo runs on the CPU everywhere.
device=cpu
exec build/tools/cli/tinyfuse learn-image --device "$device" --out learn-image-out "$@"
