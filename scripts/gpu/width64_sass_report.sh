#!/usr/bin/env bash
# Width64FusedMLP's kernels in the compiled object: registers, stack / local memory (spills) and
# tensor-core instruction counts per kernel and architecture. Fails when a kernel spills or its
# HMMA count is not 3 layers x 32 mma.sync per 16 rows of its tile (96 x MT). Needs cuobjdump and
# nvdisasm (CUDA toolkit, or the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels) on PATH.
# Usage: scripts/gpu/width64_sass_report.sh [OBJECT]   (default: the build-dev or build object)
set -euo pipefail
cd "$(dirname "$0")/../.."
obj=${1:-}
if [ -z "$obj" ]; then
  for d in build-dev build; do
    f=$d/src/CMakeFiles/tinyfuse.dir/cuda/width64/width64_fused_mlp.cu.o
    [ -f "$f" ] && obj=$f && break
  done
fi
[ -n "$obj" ] && [ -f "$obj" ] || { echo "no width64_fused_mlp.cu.o found; build tinyfuse with CUDA first" >&2; exit 2; }
export PATH="$PATH:/usr/local/cuda/bin"
echo "== resource usage ($obj)"
cuobjdump -res-usage "$obj" | grep -A1 width64_fused_kernel | grep -v '^--'
echo "== SASS instruction counts per kernel"
cuobjdump -sass "$obj" | awk '
  /code for sm_/ { arch = $NF }
  /Function :/ { fn = $NF; key = arch " " fn; keys[++n] = key }
  /HMMA/ { hmma[key]++ } /LDSM/ { ldsm[key]++ } /STSM/ { stsm[key]++ } /LDGSTS/ { cpa[key]++ }
  /[^A-Z]STL[ .]/ { stl[key]++ } /[^A-Z]LDL[ .]/ { ldl[key]++ }
  END {
    bad = 0
    for (i = 1; i <= n; ++i) {
      k = keys[i]
      if (k !~ /width64_fused_kernel/) continue
      split(k, parts, " "); mt = parts[2]; sub(/.*kernelILi/, "", mt); sub(/E.*/, "", mt)
      sm = parts[1]; sub(/sm_/, "", sm); sub(/[a-z]+$/, "", sm)
      want = (sm + 0 >= 80) ? 96 * mt : 0  # older architectures hold a trap only
      printf "%-6s MT=%s %-60s HMMA %4d (want %d)  LDSM %3d  STSM %2d  LDGSTS %3d  STL %d  LDL %d\n",
             parts[1], mt, parts[2], hmma[k], want, ldsm[k], stsm[k], cpa[k], stl[k], ldl[k]
      if (hmma[k] != want || stl[k] > 0 || ldl[k] > 0) bad = 1
    }
    exit bad
  }'
