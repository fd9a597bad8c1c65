#!/usr/bin/env bash
# Runs on the device machine (through the device tool), from the repository root, with the
# programs scripts/gpu/prepare_carry.sh gathered in .devcarry/. Writes everything under $OUT:
#   card.txt            nvidia-smi -L and driver
#   gpu_tests.xml/log   the GPU test suite (qualification included)
#   fused_tests.xml/log the fused-network qualification (Width64FusedMLP, FullyFusedMLP)
#   cpu_tests.log       the CPU suite on that machine
#   sanitizer.log       compute-sanitizer memcheck / racecheck / synccheck on the quick suite (the
#                       out-of-memory test is left out: the sanitizer reports its deliberate OOM)
#   bench.json/.log     tinyfuse-bench --device cuda, torch.json: PyTorch side and ceilings
# Usage: scripts/gpu/qualify.sh [tests|sanitize|bench|all]...
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# Carried compressed (scripts/gpu/prepare_carry.sh): unpack once.
[ -d .devcarry/bin ] || { mkdir -p .devcarry && tar -C .devcarry -xJf .devpack/devcarry.tar.xz; }
export TINYFUSE_BUILD_COMMIT="$(tr '\n' ' ' < .devcarry/commit)"  # what the programs were built from
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
bin=.devcarry/bin
steps=("${@:-all}")
want() { for s in "${steps[@]}"; do [ "$s" = "$1" ] || [ "$s" = all ] && return 0; done; return 1; }
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; cat .devcarry/commit; date -u +%FT%TZ; } > "$OUT/card.txt"
cat "$OUT/card.txt"
status=0
if want tests; then
  "$bin/tinyfuse_gpu_tests" --gtest_output=xml:"$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1 || status=1
  tail -n 25 "$OUT/gpu_tests.log"
  "$bin/tinyfuse_fused_tests" --gtest_output=xml:"$OUT/fused_tests.xml" > "$OUT/fused_tests.log" 2>&1 || status=1
  tail -n 25 "$OUT/fused_tests.log"
  "$bin/tinyfuse_tests" --gtest_brief=1 > "$OUT/cpu_tests.log" 2>&1 || status=1
  tail -n 3 "$OUT/cpu_tests.log"
fi
if want sanitize; then
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool" | tee -a "$OUT/sanitizer.log"
    TINYFUSE_QUICK=1 timeout "${SANITIZER_TIMEOUT:-170}" compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin/tinyfuse_gpu_tests" \
      --gtest_filter="${SANITIZER_FILTER:-*:-GpuMemory.HalfFillAndOutOfMemoryIsAnError}" --gtest_brief=1 >> "$OUT/sanitizer.log" 2>&1
    rc=$?
    echo "== $tool exit code $rc" | tee -a "$OUT/sanitizer.log"
    [ $rc -eq 0 ] || status=1
  done
  grep -E "ERROR SUMMARY|exit code" "$OUT/sanitizer.log"
fi
if want bench; then
  # PyTorch first: its run also measures the ceilings (copy bandwidth, matmul rates) the
  # tinyfuse figures are divided by.
  PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-420}" python3 benchmarks/torch/torch_mlp.py ${TORCH_ARGS:-} --out "$OUT/torch.json" > "$OUT/torch.log" 2>&1 || status=1
  tail -n 3 "$OUT/torch.log"
  "$bin/tinyfuse-bench" --device cuda ${BENCH_ARGS:-} --ceilings "$OUT/torch.json" --compare "$OUT/torch.json" \
    --out "$OUT/bench.json" > "$OUT/bench.log" 2>&1 || status=1
  tail -n 45 "$OUT/bench.log"
  python3 benchmarks/compare_results.py "$OUT/bench.json" "$OUT/torch.json" -o "$OUT/bench.md" || status=1
fi
exit $status
