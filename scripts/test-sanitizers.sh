#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (leak checks on): a
# separate CPU-only build in ./build-asan. CI runs it after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYFUSE_CUDA=OFF \
  -DTINYFUSE_BUILD_TOOLS=OFF -DTINYFUSE_BUILD_BENCHMARKS=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-asan -j"$(nproc 2>/dev/null || echo 2)" --target tinyfuse_tests
# Every test in its own process, as in scripts/test.sh; the install check is left out (a consumer
# linked without the sanitizer runtime cannot use this build).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" -E install_and_find_package
