#!/usr/bin/env bash
# Runs on the device: one bounded round for a change to the fused MLPs — GPU tests (FILTER), an
# optional compute-sanitizer memcheck + racecheck over SAN (TINYFUSE_QUICK=1), PyTorch's MLP
# baseline and tinyfuse-bench (FullyFusedMLP, Width64FusedMLP; widths 64, 128; 2^14 ... 2^22) in
# the same call (NO_TORCH=1 leaves PyTorch out; BENCH_NETS / BENCH_WIDTHS narrow the benchmark), and ncu per-kernel times of one training step at
# 64 wide, 2^20 rows (clocks and caches left as they run). Logs and JSON under $OUT.
# Usage (from the repository root, after scripts/gpu/prepare_carry.sh; carry .devpack):
#   FILTER='FusedWeightGrads.*' SAN='FusedWeightGrads.*' bash scripts/gpu/round.sh
# The device tool brings back at most 8 files: scripts/gpu/pack_out.sh folds $OUT into one archive
# (run it last, after any extra commands of the same call).
set -u
source "$(dirname "$0")/device_env.sh"
write_card
run_gpu_tests "${FILTER:-*Loss*:*FullyFused*:*FusedStreamForward*:*FusedWgmma*:*TrainingTrajectory*:*Qualification*:*Trainer*}" 300 20
if [ -n "${SAN:-}" ]; then
  for tool in memcheck racecheck; do
    t0=$SECONDS
    TINYFUSE_QUICK=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 $B/tinyfuse_gpu_tests --gtest_brief=1 --gtest_filter="$SAN" > $OUT/san-$tool.log 2>&1
    echo "== $tool exit $? in $((SECONDS - t0)) s; $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/san-$tool.log | tail -n 1)"
  done
fi
if [ -z "${NO_TORCH:-}" ]; then
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 240 python3 benchmarks/torch/torch_mlp.py --out $OUT/torch.json > $OUT/torch.log 2>&1
echo "== torch exit $? in $((SECONDS - t0)) s"
CMP="--ceilings $OUT/torch.json --compare $OUT/torch.json"
fi
t0=$SECONDS
timeout 200 $B/tinyfuse-bench --device cuda --networks ${BENCH_NETS:-FullyFusedMLP,Width64FusedMLP} --widths ${BENCH_WIDTHS:-64,128} --skip-encodings ${CMP:-} --out $OUT/bench.json > $OUT/bench.log 2>&1
echo "== bench exit $? in $((SECONDS - t0)) s"; grep -E "^(FullyFused|Width64)" $OUT/bench.log | head -40
N="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv"
timeout 120 $N $B/tinyfuse-bench --device cuda --networks FullyFusedMLP --widths 64 --batches 20 --warmup 1 --repeats 2 --skip-encodings --out /tmp/p.json > $OUT/ncu-train.csv 2> $OUT/ncu-train.err
echo "== ncu exit $?"
python3 - $OUT/ncu-train.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
for r in rows[1:]:
    print(f"{float(r[v].replace(',', '')) / 1000:9.1f} us  {r[k][:100]}")
PY
# NCU_KERNEL='regex': one launch of that kernel in the 64-wide 2^20 training step, with ncu's
# speed-of-light, memory, compute, warp-state and scheduler sections (what limits it).
if [ -n "${NCU_KERNEL:-}" ]; then
  timeout 180 ncu --clock-control none -k "regex:${NCU_KERNEL}" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    $B/tinyfuse-bench --device cuda --networks FullyFusedMLP --widths 64 --batches 20 --warmup 1 --repeats 2 --skip-encodings \
    --out /tmp/p2.json > $OUT/ncu-detail.txt 2>&1
  echo "== ncu detail exit $?"; grep -E "Duration|Throughput|Pipe|Stall|Issued|Eligible|Registers|Shared Memory" $OUT/ncu-detail.txt | head -40
  # Stall reasons per issued instruction and the executed instruction mix by pipe.
  timeout 120 ncu --clock-control none -k "regex:${NCU_KERNEL}" -c 1 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:smsp__inst_executed_pipe_.*\.sum$,smsp__inst_executed.sum" \
    $B/tinyfuse-bench --device cuda --networks FullyFusedMLP --widths 64 --batches 20 --warmup 1 --repeats 2 --skip-encodings \
    --out /tmp/p3.json > $OUT/ncu-stalls.txt 2>&1
  echo "== ncu stalls exit $?"; grep -E "stalled|inst_executed" $OUT/ncu-stalls.txt | awk '$NF+0 > 0.05' | sort -k3 -g -r | head -30
  # NCU_SOURCE=1: executed instructions and stall samples per SASS instruction (for reading at home).
  if [ -n "${NCU_SOURCE:-}" ]; then
    timeout 150 ncu --clock-control none -k "regex:${NCU_KERNEL}" -c 1 --section SourceCounters --section WarpStateStats \
      --page source --print-source sass --csv \
      $B/tinyfuse-bench --device cuda --networks FullyFusedMLP --widths 64 --batches 20 --warmup 1 --repeats 2 --skip-encodings \
      --out /tmp/p4.json > $OUT/ncu-source.csv 2> $OUT/ncu-source.err
    echo "== ncu source exit $?; $(wc -l < $OUT/ncu-source.csv) lines"
  fi
fi
