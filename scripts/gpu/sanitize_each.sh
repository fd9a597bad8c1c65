#!/usr/bin/env bash
# Runs on the device: one compute-sanitizer tool over every test of a GPU test program, one test
# per process, each under its own time limit, until a total budget is spent. racecheck needs
# minutes for a whole suite; one test at a time, every test that finishes is a result and a slow
# one is named instead of hiding the rest. Writes $OUT/san-<tool>-<program>.tsv (test, exit code,
# seconds, the tool's summary line) and prints the totals.
# Usage: scripts/gpu/sanitize_each.sh TOOL PROGRAM [gtest filter] [per-test seconds] [budget seconds]
#   e.g. scripts/gpu/sanitize_each.sh racecheck tinyfuse_gpu_tests '*FullyFused*' 60 500
set -uo pipefail
tool=${1:?tool: memcheck, racecheck, synccheck or initcheck}
prog=${2:?program under .devcarry/bin}
filter=${3:-*}
per_test=${4:-60}
budget=${5:-500}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -d .devcarry/bin ] || { mkdir -p .devcarry && tar -C .devcarry -xJf .devpack/devcarry.tar.xz; }
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TINYFUSE_QUICK=1  # the qualification's short batch list (sanitizers run 10-100x slower)
bin=.devcarry/bin/$prog
tsv="$OUT/san-$tool-$prog.tsv"
: > "$tsv"
# --gtest_list_tests prints "Suite." then indented test names (parameters after a '#').
mapfile -t tests < <("$bin" --gtest_list_tests --gtest_filter="$filter" |
  awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
start=$SECONDS clean=0 hazards=0 slow=0 skipped=0
for t in "${tests[@]}"; do
  if (( SECONDS - start + per_test > budget )); then skipped=$((skipped + 1)); continue; fi
  t0=$SECONDS
  log=$(timeout "$per_test" compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin" --gtest_filter="$t" 2>&1)
  rc=$?
  summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" <<< "$log" | tail -n 1 | sed 's/^========= //')
  printf '%s\t%s\t%s\t%s\n' "$t" "$rc" "$((SECONDS - t0))" "$summary" >> "$tsv"
  case $rc in
    0) clean=$((clean + 1)) ;;
    124) slow=$((slow + 1)) ;;
    *) hazards=$((hazards + 1)); grep -E "Error|Hazard|FAILED" <<< "$log" | head -n 5 ;;
  esac
done
echo "$tool $prog '$filter': ${#tests[@]} tests: $clean clean, $hazards with errors or failures, $slow past ${per_test} s, $skipped not started (budget ${budget} s)"
