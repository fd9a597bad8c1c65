#!/usr/bin/env bash
# Runs on the device: the Hopper inference kernel's timeline (tinyfuse-wgmma-timeline: when the
# warps reach each milestone of a call, against a copy of the same bytes; launch shapes, parts
# left out and the TMA kernel's variants timed), then each kernel alone under ncu (KERNELS).
# Usage (repository root, after PACK="tinyfuse-wgmma-timeline" scripts/gpu/prepare_carry.sh
# tinyfuse_wgmma_timeline; carry .devpack): BATCHES=14,16,18 bash scripts/gpu/timeline.sh; bash scripts/gpu/pack_out.sh
set -u
source "$(dirname "$0")/device_env.sh"
write_card
T=$B/tinyfuse-wgmma-timeline
BATCHES=${BATCHES:-14,16,18}
timeout 300 $T --batches "$BATCHES" --calls "${CALLS:-40}" --out "$OUT/timeline.json" > "$OUT/timeline.log" 2>&1
echo "== timeline exit $?"
# The kernels alone: ncu's duration of each of 10 calls per batch (clocks and caches as they run).
for k in ${KERNELS:-}; do
  timeout 120 ncu --clock-control none --cache-control none -k "regex:inference_kernel|copy_kernel" --metrics gpu__time_duration.sum \
    --csv $T --only "$k" --batches "${NCU_BATCHES:-$BATCHES}" --calls 10 > "$OUT/ncu-$k.csv" 2> "$OUT/ncu-$k.err"
  echo "== ncu $k exit $?"
  python3 - "$OUT/ncu-$k.csv" "${NCU_BATCHES:-$BATCHES}" "$k" <<'PY'
import csv, sys, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head, data = rows[0], rows[1:]
sel = [r for r in data if r[head.index("Metric Name")] == "gpu__time_duration.sum"]
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(sel[0][head.index("Metric Unit")], 1e-3) if sel else 1e-3
v = [float(r[head.index("Metric Value")].replace(",", "")) * scale for r in sel]
batches = sys.argv[2].split(",")
per = len(v) // len(batches) if batches else 0
for i, b in enumerate(batches):
    part = v[i * per + 3:(i + 1) * per]  # after the 3 warm-up calls
    if part:
        print(f"{sys.argv[3]} 2^{b}: kernel {statistics.median(part):.2f} us median of {len(part)} (min {min(part):.2f}, max {max(part):.2f})")
PY
done
