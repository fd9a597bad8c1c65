#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds everything (CUDA code too when nvcc is
# present) and runs every test. GPU tests run when a GPU is present and report
# "skipped: no GPU" otherwise. The Python package's tests come last (scripts/test-python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/audit.sh build
scripts/hip-compile-check.sh build-hip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "test: GPU present: $(nvidia-smi -L | head -n 1)"
else
  echo "test: no GPU on this machine: GPU tests will report skipped: no GPU"
fi
ctest --test-dir build --output-on-failure -j"$(nproc 2>/dev/null || echo 2)"
scripts/test-python.sh
