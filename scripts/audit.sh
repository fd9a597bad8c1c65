#!/usr/bin/env bash
# Code-object audit of the built CUDA library (tools/audit/tinyfuse-audit): per kernel and
# architecture registers, shared / local memory, stack, tensor-core and shared-memory instructions,
# barriers. Fails on a spill or a missing tensor-core path (tools/audit/rules.json).
# cuobjdump / nvdisasm come from the CUDA toolkit, or else from PyPI (nvidia-cuda-cuobjdump,
# nvidia-cuda-nvdisasm) into build/audit-tools.
# Usage: scripts/audit.sh [build dir] [extra tinyfuse-audit arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
lib="$build/src/libtinyfuse.a"
if ! grep -q '^TINYFUSE_CUDA:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "audit: skipped: $build is not a CUDA build (no device code to audit)"
  exit 0
fi
[ -f "$lib" ] || { echo "audit: $lib not found: build first (scripts/build.sh)" >&2; exit 1; }

export PATH="$PATH:/usr/local/cuda/bin"
export TINYFUSE_AUDIT_TOOLS_DIR="$PWD/$build/audit-tools"
have() { command -v "$1" >/dev/null 2>&1 || ls "$TINYFUSE_AUDIT_TOOLS_DIR"/nvidia/cu*/bin/"$1" >/dev/null 2>&1; }
if ! have cuobjdump || ! have nvdisasm; then
  # The wheels of the toolkit's major version (13.x for CUDA 13).
  major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  echo "audit: cuobjdump / nvdisasm not in the toolkit: installing nvidia-cuda-cuobjdump==$major.* nvidia-cuda-nvdisasm==$major.* from PyPI"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$TINYFUSE_AUDIT_TOOLS_DIR" \
    "nvidia-cuda-cuobjdump==$major.*" "nvidia-cuda-nvdisasm==$major.*"
fi
python3 tools/audit/tinyfuse-audit "$lib" --json "$build/audit.json" "$@"
echo "audit: JSON in $build/audit.json"
