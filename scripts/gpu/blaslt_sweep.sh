#!/usr/bin/env bash
# Runs on the device: BlasLtMLPFP16 / BlasLtMLP throughput under each cuBLASLt tuning knob of
# src/cuda/blaslt_plan.cu (heuristic rank, alignment hint cap, workspace, unfused epilogues), so
# the library's default choice is a measured one. Writes $OUT/blaslt-sweep.txt and one JSON per
# setting. Usage: scripts/gpu/blaslt_sweep.sh (after qualify.sh has written $OUT/torch.json).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TINYFUSE_BUILD_COMMIT="$(tr '\n' ' ' < .devcarry/commit)"
settings=("default" "TINYFUSE_BLASLT_ALGO_RANK=1" "TINYFUSE_BLASLT_ALGO_RANK=2" "TINYFUSE_BLASLT_ALIGN_CAP=16"
          "TINYFUSE_BLASLT_WORKSPACE_MB=4" "TINYFUSE_BLASLT_WORKSPACE_MB=0" "TINYFUSE_BLASLT_UNFUSED=1")
for s in "${settings[@]}"; do
  name=${s//=/-}
  echo "== $s" | tee -a "$OUT/blaslt-sweep.txt"
  env $([ "$s" = default ] || echo "$s") .devcarry/bin/tinyfuse-bench --device cuda --networks BlasLtMLPFP16 \
    --widths 64,128 --batches 20,22 --repeats 15 --warmup 3 --out "$OUT/blaslt-$name.json" 2>&1 |
    grep -E "inference|training" | grep -v "^\[" | tee -a "$OUT/blaslt-sweep.txt"
done
