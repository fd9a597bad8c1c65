#!/usr/bin/env bash
# Runs on the device: the same calls timed both ways, on both sides, in one device call. 64 -> 64
# x 2 -> 64 FP16 inference at 2^14 ... 2^22: tinyfuse-bench (FullyFusedMLP, Width64FusedMLP, each
# row with its copy reference: a kernel that only moves the same bytes) and torch_mlp.py (eager,
# CUDA graph, torch.compile), once with the host waiting for each run and once with the runs
# queued back to back. Which of the two reproduces PERF_GOALS' PyTorch anchors says how the
# anchors were timed. FILTER runs GPU tests first; FUSED_SUITE=1 also the seed's fused
# qualification suite (tinyfuse_fused_tests, when packed); COMPARE_ENV ("NAME=value") times
# tinyfuse-bench once more each way with that in its environment (a switch's before / after).
# Usage (repository root, after scripts/gpu/prepare_carry.sh; carry .devpack):
#   FILTER='*FusedWgmma*' bash scripts/gpu/timing_modes.sh; bash scripts/gpu/pack_out.sh
set -u
source "$(dirname "$0")/device_env.sh"
write_card python3 -c 'import torch; print("torch", torch.__version__)'
[ -n "${FILTER:-}" ] && run_gpu_tests "$FILTER" 240
if [ -n "${FUSED_SUITE:-}" ] && [ -x "$B/tinyfuse_fused_tests" ]; then
  timeout 240 "$B/tinyfuse_fused_tests" --gtest_brief=1 > "$OUT/fused-suite.log" 2>&1
  echo "== fused suite exit $?"; grep -E "^\[  (FAILED|SKIPPED) |tests? ran|PASSED" "$OUT/fused-suite.log" | tail -4
fi
BENCH="$B/tinyfuse-bench --device cuda --networks FullyFusedMLP,Width64FusedMLP --widths 64 --modes inference --skip-encodings --repeats ${REPEATS:-100}"
TORCH="python3 benchmarks/torch/torch_mlp.py --widths 64 --modes inference --precisions fp16"
for mode in sync queued; do
  flag=; [ $mode = queued ] && flag=--queue-runs
  timeout 150 $BENCH $flag --out $OUT/bench-$mode.json > $OUT/bench-$mode.log 2> $OUT/bench-$mode.err
  echo "== tinyfuse-bench $mode exit $?"; grep -E "^\[floor\]" $OUT/bench-$mode.err; grep -E "^(FullyFused|Width64)" $OUT/bench-$mode.log
  if [ -n "${COMPARE_ENV:-}" ]; then
    env "$COMPARE_ENV" timeout 150 $BENCH --networks FullyFusedMLP $flag --out $OUT/bench-$mode-compare.json > $OUT/bench-$mode-compare.log 2> $OUT/bench-$mode-compare.err
    echo "== tinyfuse-bench $mode with $COMPARE_ENV exit $?"; grep -E "^\[floor\]" $OUT/bench-$mode-compare.err; grep -E "^FullyFused" $OUT/bench-$mode-compare.log
  fi
  PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-200} $TORCH $flag --out $OUT/torch-$mode.json > $OUT/torch-$mode.log 2>&1
  echo "== torch $mode exit $?"
  python3 - "$OUT/torch-$mode.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    if "median_s" in r:
        print(f'{r["variant"]:8s} 2^{r["batch"].bit_length() - 1:<3d} {r["median_s"] * 1e6:9.1f} us  {r["samples_per_s"] / 1e9:7.3f} G/s')
    else:
        print(r["variant"], r["batch"], r.get("error"))
PY
done
