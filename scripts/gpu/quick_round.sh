#!/usr/bin/env bash
# Runs on the device: a bounded first look at new GPU code, each part under its own time limit so
# one slow or hanging part leaves the others' results. Writes logs under $OUT; prints a summary.
# Usage: scripts/gpu/quick_round.sh [part...]
#   parts: fused ff enc grid bench sweep (default: these), and on request:
#   torch   PyTorch MLP baseline + ceilings and the full tinyfuse-bench beside it (qualify.sh bench:
#           torch.json, bench.json, bench.md)
#   grid5x  PyTorch hash-grid baseline and tinyfuse's grid rows beside it (torch-grid.json, grid-bench.*)
#   san     compute-sanitizer memcheck / racecheck (synccheck with part 'sync'), one bounded run per kernel family
#   prof    ncu: per-kernel times of FullyFusedMLP inference and training at 64 wide, batch 2^20
#           (ncu-times.csv); with 'proffull' also full sections of its kernels (ncu-*.txt)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Carried compressed (scripts/gpu/prepare_carry.sh): unpack once.
[ -d .devcarry/bin ] || { mkdir -p .devcarry && tar -C .devcarry -xJf .devpack/devcarry.tar.xz; }
export TINYFUSE_BUILD_COMMIT="$(tr '\n' ' ' < .devcarry/commit)"
B=.devcarry/bin
parts=("${@:-fused ff enc grid bench sweep}")
T=${TORCH_TIMEOUT:-240}
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
want ff && run ff 300 "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter='*FullyFused*:*FusedWgmma*:*FusedStreamForward*:*Qualification*:*TrainingTrajectory*'
want enc && run enc 120 "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter='*Encoding*:*Nwie*:-*Grid*'
want grid && run grid 150 "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter='*Grid*'
want bench && run quick-bench 120 "$B/tinyfuse-bench" --device cuda --networks FullyFusedMLP,Width64FusedMLP,BlasLtMLPFP16 \
  --widths 64,128 --batches 14,16,18,20,22 --repeats 20 --warmup 5 --out "$OUT/quick-bench.json"
want bench && grep -E "^(FullyFused|Width64|BlasLt|HashGrid|Grid)" "$OUT/quick-bench.log" | head -60
want sweep && timeout 100 bash scripts/gpu/blaslt_sweep.sh > /dev/null 2>&1; want sweep && cat "$OUT/blaslt-sweep.txt" 2>/dev/null | head -80
if want torch; then  # qualify.sh's bench step, with the fused networks in the list
  TORCH_TIMEOUT="$T" BENCH_ARGS="--networks FullyFusedMLP,Width64FusedMLP,BlasLtMLPFP16,BlasLtMLP,PortableMLP --widths 64,128" \
    bash scripts/gpu/qualify.sh bench
  echo "== torch + bench: exit $?"
fi
if want grid5x; then
  PYTHONUNBUFFERED=1 timeout "$T" python3 benchmarks/torch/torch_hashgrid.py --out "$OUT/torch-grid.json" > "$OUT/torch-grid.log" 2>&1
  echo "== torch_hashgrid: exit $?"; tail -n 3 "$OUT/torch-grid.log"
  run grid-bench 120 "$B/tinyfuse-bench" --device cuda --skip-mlp --batches 14,16,18,20,22 \
    --grid-compare "$OUT/torch-grid.json" --out "$OUT/grid-bench.json"
  grep -iE "grid" "$OUT/grid-bench.log" | head -40
fi
if want san; then  # SAN_TIMEOUT seconds per run
  S=${SAN_TIMEOUT:-100}
  san() {  # tool binary filter
    local tool=$1 bin=$2 filter=$3 t0=$SECONDS
    TINYFUSE_QUICK=1 timeout "$S" compute-sanitizer --tool "$tool" --error-exitcode 3 "$B/$bin" --gtest_brief=1 \
      --gtest_filter="$filter" > "$OUT/san-$tool-$bin.log" 2>&1
    echo "== $tool $bin '$filter': exit $? in $((SECONDS - t0)) s; $(grep -h 'ERROR SUMMARY' "$OUT/san-$tool-$bin.log" | tail -n 1)"
  }
  san memcheck tinyfuse_fused_tests '*'
  san racecheck tinyfuse_fused_tests '*'
  want sync && san synccheck tinyfuse_fused_tests '*'
  san memcheck tinyfuse_gpu_tests '*FullyFused*:*Grid*:*Encoding*:*Nwie*'
  san racecheck tinyfuse_gpu_tests "${RACE_FILTER:-*FullyFused*:*Grid*:*Encoding*:*Nwie*:*PortableMlp*}"
fi
if want prof; then
  P="$B/tinyfuse-bench --device cuda --networks FullyFusedMLP --widths 64 --batches 20 --warmup 1 --repeats 2 --out /tmp/p.json"
  timeout 120 ncu --metrics gpu__time_duration.sum --csv --launch-count 40 $P > "$OUT/ncu-times.csv" 2> "$OUT/ncu-times.err"
  echo "== ncu times: exit $?"
  python3 - "$OUT/ncu-times.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value")
for r in rows[1:]:
    print(f"{float(r[v].replace(',', '')) / 1000:10.1f} us  {r[k][:110]}")
PY
  want proffull || P=""  # the full sections take minutes: only on request (part 'proffull')
  if [ -n "$P" ]; then
  timeout 200 ncu --set full -k 'regex:stream_forward|fused_forward|fused_backward|weight_grad' --launch-count 5 \
    -o "$OUT/ncu-fused" $P > "$OUT/ncu-full.log" 2>&1
  echo "== ncu full: exit $?"
  ncu --import "$OUT/ncu-fused.ncu-rep" --page details > "$OUT/ncu-details.txt" 2>&1
  grep -E "^  [a-z_:<>0-9A-Za-z]|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Issue Slots Busy|No Eligible" "$OUT/ncu-details.txt" | head -80
  fi
fi
exit 0
