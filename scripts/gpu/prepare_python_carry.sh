#!/usr/bin/env bash
# Builds, here, what the device machine needs to run the Python package's tests and the
# binding-overhead benchmark (it has PyTorch, python3 and no internet): a tinyfuse wheel with the
# CUDA backend for sm_90 and the device's Python (3.12 by default: one abi3 wheel for 3.12+),
# pytest's wheels, and the shared libraries its image lacks, all in .whl/ (git-ignored) for the
# device tool's `carry`. Run scripts/gpu/test_python.sh there.
# Usage: scripts/gpu/prepare_python_carry.sh [python3.12 interpreter]
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${1:-}
if [ -z "$py" ]; then
  for candidate in python3.12 /root/.pyenv/versions/3.12*/bin/python; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then py=$candidate; break; fi
  done
fi
[ -n "$py" ] || { echo "prepare_python_carry: no Python 3.12 found; pass one as the argument" >&2; exit 1; }
venv=build-python/venv-wheel
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0"
rm -rf .whl && mkdir -p .whl/lib
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
PATH="$PATH:/usr/local/cuda/bin" "$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
  --no-deps -w .whl . -C cmake.define.TINYFUSE_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
  -C build-dir=build-python/wheel-cuda-sm90 "${launcher[@]}"
"$venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: -d .whl pytest
# OpenBLAS (the CPU backend's BLAS) and its Fortran runtime are not on the device image.
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .whl/lib/
done
git rev-parse --short HEAD > .whl/commit
ls -la .whl && du -sh .whl
