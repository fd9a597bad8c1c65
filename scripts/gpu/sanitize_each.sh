#!/usr/bin/env bash
# Runs on the device: one compute-sanitizer tool over every test of a GPU test program, one test
# per process, each under its own time limit, until a total budget is spent. racecheck needs
# minutes for a whole suite; one test at a time, every test that finishes is a result and a slow
# one is named instead of hiding the rest. JOBS processes run at once (default 1; the sanitizers
# spend much of their time on the host, and the device has 16 cores). Writes
# $OUT/san-<tool>-<program>.tsv (test, exit code, seconds, the tool's summary line), the log of
# every test with findings under $OUT/san-<tool>-<program>/, and prints the totals.
# Usage: scripts/gpu/sanitize_each.sh TOOL PROGRAM [gtest filter] [per-test seconds] [budget seconds]
#   e.g. JOBS=4 scripts/gpu/sanitize_each.sh racecheck tinyfuse_gpu_tests 'KernelTour.*' 90 400
set -uo pipefail
tool=${1:?tool: memcheck, racecheck, synccheck or initcheck}
prog=${2:?program under .devcarry/bin}
filter=${3:-*}
per_test=${4:-60}
budget=${5:-500}
jobs_max=${JOBS:-1}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -d .devcarry/bin ] || { mkdir -p .devcarry && tar -C .devcarry -xJf .devpack/devcarry.tar.xz; }
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TINYFUSE_QUICK=1  # the qualification's short batch list (sanitizers run 10-100x slower)
bin=.devcarry/bin/$prog
tsv="$OUT/san-$tool-$prog.tsv"
logs="$OUT/san-$tool-$prog"
mkdir -p "$logs"
: > "$tsv"
# --gtest_list_tests prints "Suite." then indented test names (parameters after a '#').
mapfile -t tests < <("$bin" --gtest_list_tests --gtest_filter="$filter" |
  awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
one() {  # test: one sanitizer process; appends its line to the table (short lines: atomic appends)
  local t=$1 t0=$SECONDS log rc summary
  log=$(timeout "$per_test" compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin" --gtest_filter="$t" 2>&1)
  rc=$?
  summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" <<< "$log" | tail -n 1 | sed 's/^========= //')
  printf '%s\t%s\t%s\t%s\n' "$t" "$rc" "$((SECONDS - t0))" "$summary" >> "$tsv"
  if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then printf '%s\n' "$log" > "$logs/${t//\//_}.log"; fi
}
start=$SECONDS not_started=0
for t in "${tests[@]}"; do
  if (( SECONDS - start + per_test > budget )); then not_started=$((not_started + 1)); continue; fi
  while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n; done
  one "$t" &
done
wait
clean=$(awk -F'\t' '$2 == 0' "$tsv" | wc -l)
slow=$(awk -F'\t' '$2 == 124' "$tsv" | wc -l)
bad=$(awk -F'\t' '$2 != 0 && $2 != 124' "$tsv" | wc -l)
awk -F'\t' '$2 != 0' "$tsv" | head -n 20
for f in "$logs"/*.log; do [ -e "$f" ] && grep -E "Error|Hazard|FAILED|Failure" "$f" | head -n 5; done
echo "$tool $prog '$filter': ${#tests[@]} tests: $clean clean, $bad with errors or failures, $slow past ${per_test} s, $not_started not started (budget ${budget} s, ${jobs_max} at once) in $((SECONDS - start)) s"
