# Sourced on the device by the round scripts (round.sh, latency.sh, timing_modes.sh): unpacks the
# programs scripts/gpu/prepare_carry.sh packed (.devpack) into .devcarry/, sets the library path
# and TINYFUSE_BUILD_COMMIT, names the programs' folder B and the output folder OUT, and writes
# $OUT/card.txt (card, build commit, UTC date, then any lines the caller's command prints).
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
mkdir -p .devcarry && tar -C .devcarry -xJf .devpack/devcarry.tar.xz
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TINYFUSE_BUILD_COMMIT="$(tr '\n' ' ' < .devcarry/commit)"
B=.devcarry/bin

# write_card [command...]: the card record, with the command's output appended when given.
write_card() {
  { nvidia-smi -L; cat .devcarry/commit; date -u +%FT%TZ; if [ $# -gt 0 ]; then "$@"; fi; } > "$OUT/card.txt"
  cat "$OUT/card.txt"
}

# run_gpu_tests FILTER SECONDS [LINES]: tinyfuse_gpu_tests over FILTER into $OUT/tests.log, then
# its exit code, time and the last LINES (8) of its summary.
run_gpu_tests() {
  local t0=$SECONDS
  timeout "$2" "$B/tinyfuse_gpu_tests" --gtest_brief=1 --gtest_filter="$1" > "$OUT/tests.log" 2>&1
  echo "== tests exit $? in $((SECONDS - t0)) s"
  grep -E "^\[  (FAILED|SKIPPED) |tests? ran|PASSED" "$OUT/tests.log" | tail -"${3:-8}"
}
