#!/usr/bin/env bash
# Runs on the device: where the time of one FullyFusedMLP inference call goes at small batches.
# 64 -> 64 x 2 -> 64 FP16 inference at 2^14 ... 2^22, timed as the anchors were (host waits for
# each run; tinyfuse-bench also times an empty kernel the same way: the launch floor) and queued
# back to back; the kernel alone by ncu (clocks and caches as they run) with its active cycles
# and stall reasons at 2^14, 2^16 and 2^18; and, when GROUP_SWEEP is set ("1 3 ..."), the same
# benchmark under each TINYFUSE_WGMMA_GROUPS setting (warpgroups per block).
# Usage (repository root, after scripts/gpu/prepare_carry.sh; carry .devpack):
#   FILTER='*FusedWgmma*' GROUP_SWEEP='1 3' bash scripts/gpu/latency.sh; bash scripts/gpu/pack_out.sh
set -u
source "$(dirname "$0")/device_env.sh"
write_card
[ -n "${FILTER:-}" ] && run_gpu_tests "$FILTER" 240
BENCH="$B/tinyfuse-bench --device cuda --networks ${NETS:-FullyFusedMLP} --widths ${WIDTHS:-64} --modes inference --skip-encodings --repeats 100"
rows() { grep -E "^\[floor\]" "$1.err"; grep -E "^(FullyFused|Width64)" "$1.log"; }
timeout 120 $BENCH --out $OUT/sync.json > $OUT/sync.log 2> $OUT/sync.err; echo "== sync exit $?"; rows $OUT/sync
timeout 120 $BENCH --queue-runs --out $OUT/queued.json > $OUT/queued.log 2> $OUT/queued.err; echo "== queued exit $?"; rows $OUT/queued
for g in ${GROUP_SWEEP:-}; do
  TINYFUSE_WGMMA_GROUPS=$g timeout 120 $BENCH --networks FullyFusedMLP --out $OUT/g$g.json > $OUT/g$g.log 2> $OUT/g$g.err
  echo "== groups $g exit $?"; rows $OUT/g$g
done
# The kernel alone: duration, SM activity, DRAM traffic and stall reasons per issued instruction.
M="gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,gpc__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,smsp__inst_executed.sum"
for b in 14 16 18; do
  timeout 120 ncu --clock-control none --cache-control none -k regex:inference_kernel -s 5 -c 3 --metrics "$M,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $BENCH --batches $b --warmup 2 --repeats 10 --out /tmp/n$b.json > $OUT/ncu-$b.txt 2>&1
  echo "== ncu 2^$b exit $?"; grep -E "gpu__time|cycles|bytes|inst_executed" $OUT/ncu-$b.txt | tail -9
  grep -E "stalled" $OUT/ncu-$b.txt | tail -40 | awk '$NF+0 > 0.2' | sort -k3 -g -r | head -8
done
# The empty kernel alone: how long the GPU takes to run nothing (the kernel's own floor).
timeout 60 ncu --clock-control none --cache-control none -k regex:empty_kernel -s 5 -c 3 --metrics gpu__time_duration.sum,gpc__cycles_elapsed.max \
  $BENCH --batches 14 --warmup 2 --repeats 10 --out /tmp/ne.json > $OUT/ncu-empty.txt 2>&1
echo "== ncu empty kernel exit $?"; grep -E "gpu__time|cycles" $OUT/ncu-empty.txt | tail -4
timeout 150 ncu --clock-control none --cache-control none -k regex:inference_kernel -s 5 -c 1 --section SourceCounters --section WarpStateStats \
  --page source --print-source sass --csv $BENCH --batches 16 --warmup 2 --repeats 10 --out /tmp/n.json > $OUT/ncu-source-16.csv 2> $OUT/ncu-source.err
echo "== ncu source exit $?; $(wc -l < $OUT/ncu-source-16.csv) lines"
