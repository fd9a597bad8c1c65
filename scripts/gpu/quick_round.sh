#!/usr/bin/env bash
# Runs on the device: a bounded first look at new GPU code, each part under its own time limit so
# one slow or hanging part leaves the others' results. Writes logs under $OUT; prints a summary.
# Usage: scripts/gpu/quick_round.sh [part...]  parts: fused ff enc grid bench sweep (default: all)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Carried compressed (scripts/gpu/prepare_carry.sh): unpack once.
[ -d .devcarry/bin ] || { mkdir -p .devcarry && tar -C .devcarry -xJf .devpack/devcarry.tar.xz; }
export TINYFUSE_BUILD_COMMIT="$(tr '\n' ' ' < .devcarry/commit)"
B=.devcarry/bin
parts=("${@:-fused ff enc grid bench sweep}")
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }
{ nvidia-smi -L; cat .devcarry/commit; date -u +%FT%TZ; } > "$OUT/card.txt"
run() {  # name seconds command...
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests? ran|^\[==========\]" "$OUT/$name.log" | tail -n 12
}
want fused && run fused 150 "$B/tinyfuse_fused_tests" --gtest_brief=1
want ff && run ff 150 "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter='*FullyFused*:*Qualification*:*TrainingTrajectory*'
want enc && run enc 120 "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter='*Encoding*:*Nwie*:-*Grid*'
want grid && run grid 150 "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter='*Grid*'
want bench && run bench 120 "$B/tinyfuse-bench" --device cuda --networks FullyFusedMLP,Width64FusedMLP,BlasLtMLPFP16 \
  --widths 64,128 --batches 14,18,20,22 --repeats 20 --warmup 5 --out "$OUT/quick-bench.json"
want bench && grep -E "^(FullyFused|Width64|BlasLt|HashGrid|Grid)" "$OUT/bench.log" | head -60
want sweep && timeout 100 bash scripts/gpu/blaslt_sweep.sh > /dev/null 2>&1; want sweep && cat "$OUT/blaslt-sweep.txt" 2>/dev/null | head -80
exit 0
