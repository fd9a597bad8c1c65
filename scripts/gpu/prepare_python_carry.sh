#!/usr/bin/env bash
# Builds, here, what the device machine needs to run the Python package's tests and the
# binding-overhead benchmark (it has PyTorch, python3 and no internet): a tinyfuse wheel with the
# CUDA backend for sm_90 and the device's Python (3.12 by default: one abi3 wheel for 3.12+),
# pytest's wheels, and the shared libraries its image lacks, all in .whl/ (git-ignored) for the
# device tool's `carry`. Run scripts/gpu/test_python.sh there.
# Usage: scripts/gpu/prepare_python_carry.sh [python3.12 interpreter]
# REUSE_BUILD_DEV=1: instead of `pip wheel` (a second full CUDA compile, ~30 min on 2 cores), build
# the extension in build-dev/ (scripts/gpu/prepare_carry.sh's build: same library, same sm_90 code)
# and zip it with the package's Python files into a wheel-shaped archive (test_python.sh only
# unpacks it). `pip install .` itself is checked by CI.
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
if [ "${REUSE_BUILD_DEV:-0}" = 1 ]; then
  [ -f build-dev/CMakeCache.txt ] || { echo "prepare_python_carry: run scripts/gpu/prepare_carry.sh first" >&2; exit 1; }
  cmake -S . -B build-dev -DTINYFUSE_PYTHON=ON -DPython_EXECUTABLE="$PWD/$venv/bin/python" >/dev/null
  cmake --build build-dev -j"$(nproc)" --target _native
  stage=$(mktemp -d)
  mkdir -p "$stage/tinyfuse"
  cp python/tinyfuse/*.py "$stage/tinyfuse/"
  cp build-dev/python/_native*.so "$stage/tinyfuse/"
  "$venv/bin/python" - "$stage" .whl/tinyfuse-0.1.0-cp312-abi3-linux_x86_64.whl <<'PY'
import pathlib, sys, zipfile
stage, wheel = pathlib.Path(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(stage.rglob("*")):
        if f.is_file():
            z.write(f, f.relative_to(stage))
PY
  rm -rf "$stage"
else
  launcher=()
  command -v ccache >/dev/null 2>&1 && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  PATH="$PATH:/usr/local/cuda/bin" "$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
    --no-deps -w .whl . -C cmake.define.TINYFUSE_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    -C build-dir=build-python/wheel-cuda-sm90 "${launcher[@]}"
fi
"$venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: -d .whl pytest
# OpenBLAS (the CPU backend's BLAS) and its Fortran runtime are not on the device image.
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .whl/lib/
done
git rev-parse --short HEAD > .whl/commit
ls -la .whl && du -sh .whl
