#!/usr/bin/env bash
# Runs on the device: the Hopper inference kernel's timeline (tinyfuse-wgmma-timeline: when the
# warps reach each milestone of a call, against a copy of the same bytes; launch shapes swept).
# Usage (repository root, after PACK="tinyfuse-wgmma-timeline" scripts/gpu/prepare_carry.sh
# tinyfuse_wgmma_timeline; carry .devpack): BATCHES=14,16,18 bash scripts/gpu/timeline.sh; bash scripts/gpu/pack_out.sh
set -u
source "$(dirname "$0")/device_env.sh"
write_card
timeout 300 $B/tinyfuse-wgmma-timeline --batches "${BATCHES:-14,16,18}" --calls "${CALLS:-40}" --out "$OUT/timeline.json" > "$OUT/timeline.log" 2>&1
echo "== timeline exit $?"
cat "$OUT/timeline.log"
