#!/usr/bin/env bash
# Fuzzes the JSON config factory and the checkpoint loader with libFuzzer (ASan + UBSan) for
# FUZZ_SECONDS each (default 60), starting from the committed seed corpus in fuzz/corpus/ and the
# hostile seeds fuzz/make_hostile_seeds.cpp writes into build-fuzz/seeds/ (JSON nested 100,000
# deep, nested configs, forged checkpoints; inputs up to 256 KiB, so those depths are reached).
# A separate CPU-only clang build in ./build-fuzz; new corpus entries go to build-fuzz/corpus/,
# never into the repository. On a crash, a sanitizer report, a leak or a timeout the script
# exits non-zero and the reproducer is in build-fuzz/crashes/ (replay it with
# `build-fuzz/fuzz/fuzz_config FILE`); turn it into a regression test (docs/ERRORS.md).
# CI runs it after the sanitizer suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: installing clang (libFuzzer comes with it)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang >/dev/null
fi
seconds="${FUZZ_SECONDS:-60}"
jobs="$(nproc 2>/dev/null || echo 2)"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DTINYFUSE_FUZZ=ON \
  -DTINYFUSE_CUDA=OFF -DTINYFUSE_BUILD_TESTS=OFF -DTINYFUSE_BUILD_TOOLS=OFF -DTINYFUSE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_config fuzz_checkpoint make_hostile_seeds
rm -rf build-fuzz/seeds
build-fuzz/fuzz/make_hostile_seeds build-fuzz/seeds >/dev/null
mkdir -p build-fuzz/crashes
status=0
for target in config checkpoint; do
  mkdir -p "build-fuzz/corpus/$target"
  echo "fuzz: $target for ${seconds}s"
  # -timeout: one input may take at most 30 s; -rss_limit_mb: the harness keeps models small.
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "build-fuzz/fuzz/fuzz_$target" "build-fuzz/corpus/$target" "fuzz/corpus/$target" "build-fuzz/seeds/$target" \
      -dict="fuzz/$target.dict" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
      -max_len=262144 -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$target-" \
      >"build-fuzz/fuzz-$target.log" 2>&1; then
    echo "fuzz: $target FAILED; reproducer(s):"
    ls -1 build-fuzz/crashes/"$target"-* 2>/dev/null || true
    tail -n 60 "build-fuzz/fuzz-$target.log"
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "build-fuzz/fuzz-$target.log" | sed "s/^/fuzz: $target /"
  fi
done
if [ "$status" -eq 0 ]; then echo "fuzz: no crash in ${seconds}s per target"; fi
exit "$status"
