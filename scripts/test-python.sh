#!/usr/bin/env bash
# The Python package's tests: builds tinyfuse (pip install . into a venv in build-python/venv,
# with PyTorch and pytest) and runs pytest on python/tests. GPU tests run when a GPU is present
# and report "skipped: no GPU" otherwise. scripts/test.sh calls it.
#   PYTHON=python3.12 scripts/test-python.sh     another interpreter
#   TINYFUSE_WHEELHOUSE=DIR scripts/test-python.sh   offline: packages from DIR only
# PyTorch: one already importable by $PYTHON is used as it is (the venv sees system packages);
# otherwise PyPI's `torch` is installed. PyPI has no CPU-only wheel for Linux x86-64: the default
# one brings NVIDIA's CUDA libraries (about 5 GB installed, 1.5 min here) and imports and runs on
# machines without a GPU; the CPU-only wheels live on PyTorch's own index, which CI cannot reach.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
py=${PYTHON:-python3}

# A Debian python3 needs its venv module and headers from apt (pyenv's and others have both).
if ! "$py" -c 'import ensurepip, sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-dev >/dev/null
fi

venv=build-python/venv
if [ ! -x "$venv/bin/python" ]; then
  if "$py" -c 'import torch' 2>/dev/null; then
    "$py" -m venv --system-site-packages "$venv"
  else
    "$py" -m venv "$venv"
  fi
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
[ -n "${TINYFUSE_WHEELHOUSE:-}" ] && pip+=(--no-index --find-links "$TINYFUSE_WHEELHOUSE")

if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "test-python: installing torch from PyPI (the default wheel; see the note at the top)"
  start=$(date +%s)
  "${pip[@]}" install -q "torch>=2.1"
  echo "test-python: torch installed in $(( $(date +%s) - start )) s"
fi
"${pip[@]}" install -q pytest numpy "scikit-build-core>=0.10" "nanobind>=2.0"  # numpy: torch warns without it

# Without a GPU the package is built CPU-only: the CUDA backend's compile (minutes) would buy
# nothing here, and scripts/build.sh compiles it for the C++ suite already.
build_args=()
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "test-python: GPU present: building with the CUDA backend when nvcc is found"
else
  echo "test-python: no GPU on this machine: CPU-only build, GPU tests will report skipped: no GPU"
  build_args+=(-C cmake.define.TINYFUSE_CUDA=OFF)
fi
command -v ccache >/dev/null 2>&1 && build_args+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
"${pip[@]}" install -q --no-build-isolation --no-deps "${build_args[@]}" .

"$venv/bin/python" -c 'import torch, tinyfuse; print(f"test-python: torch {torch.__version__}, tinyfuse {tinyfuse.__version__} (CUDA backend built: {tinyfuse.built_with_cuda})")'
# From python/tests, so that the installed package is imported, not the source folder.
cd python/tests
exec "../../$venv/bin/python" -m pytest -q -rs -p no:cacheprovider .
