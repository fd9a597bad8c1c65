#!/usr/bin/env bash
# Builds the GPU test and benchmark programs here (nvcc compiles without a GPU) for the H200
# (sm_90) and gathers them, with the shared libraries the device image lacks, into .devcarry/
# (git-ignored) for the device tool's `carry`. Usage: scripts/gpu/prepare_carry.sh [targets...]
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("${@:-tinyfuse_gpu_tests tinyfuse_fused_tests tinyfuse_fused_determinism tinyfuse_tests tinyfuse_bench tinyfuse_cli}")
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DTINYFUSE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTINYFUSE_BUILD_TESTS=ON -DTINYFUSE_BUILD_TOOLS=ON -DTINYFUSE_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build-dev -j"$(nproc)" --target ${targets[*]}
rm -rf .devcarry && mkdir -p .devcarry/bin .devcarry/lib
for f in build-dev/tests/tinyfuse_gpu_tests build-dev/tests/tinyfuse_fused_tests build-dev/tests/tinyfuse_fused_determinism build-dev/tests/tinyfuse_tests build-dev/benchmarks/tinyfuse-bench build-dev/benchmarks/tinyfuse-wgmma-timeline build-dev/benchmarks/tinyfuse-host-costs build-dev/tools/cli/tinyfuse; do
  [ -x "$f" ] && cp "$f" .devcarry/bin/
done
# OpenBLAS (the CPU reference's BLAS) with its Fortran runtime, and stb (the CLI's images), are not
# on the device image.
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libstb.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .devcarry/lib/
done
git rev-parse --short HEAD > .devcarry/commit
git diff --quiet HEAD -- src include tests benchmarks tools || echo "(with uncommitted changes)" >> .devcarry/commit
du -sh .devcarry
# The programs together pass the device tool's 64 MiB carry limit: carry `.devpack` (the same files
# xz-compressed); scripts/gpu/qualify.sh and quick_round.sh unpack it on the device.
# PACK="tinyfuse_gpu_tests tinyfuse-bench" packs only those programs (with lib/ and commit): all
# six passed 64 MiB compressed on 2026-12-03.
rm -rf .devpack && mkdir -p .devpack
members=(.)
if [ -n "${PACK:-}" ]; then members=(./lib ./commit); for p in $PACK; do members+=("./bin/$p"); done; fi
# The programs share most bytes (the device code): a dictionary larger than one program lets xz
# find the second copy (at -9's 64 MiB two 65 MB programs packed to 62 MB; at 192 MiB to 38 MB).
strip --strip-unneeded .devcarry/bin/*
tar -C .devcarry -cf - "${members[@]}" | xz -T1 --lzma2=preset=9,dict=192MiB > .devpack/devcarry.tar.xz
du -sh .devpack
size=$(stat -c %s .devpack/devcarry.tar.xz)
[ "$size" -le $((64 * 1024 * 1024)) ] || echo "prepare_carry.sh: .devpack is $size bytes, over the device tool's 64 MiB carry limit: set PACK to fewer programs" >&2
