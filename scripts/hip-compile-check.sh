#!/usr/bin/env bash
# HIP compile check: builds the GPU backend's HIP units (CMake -DTINYFUSE_HIP=ON, target
# tinyfuse_hip_units) with Debian's HIP toolchain for the targets in CMAKE_HIP_ARCHITECTURES
# (default gfx1030 and gfx90a), checks that each object carries device code for each target, and
# that every HIP unit using warp-level operations states its warp-size assumption (kWarpSize).
# Installs hipcc, libamdhip64-dev and rocm-device-libs when missing (about 37 MB to download,
# 340 MiB installed, 15 s here); skips with a message when they cannot be installed.
# Nothing is run: there is no AMD GPU here. docs/PLATFORMS.md records what was compiled.
# Usage: scripts/hip-compile-check.sh [build dir, default build-hip] [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-hip}
shift || true

# 1. The warp-size rule, on the sources (needs no toolchain): a GPU source other than the
#    CUDA-only width64_kernel.cuh (32-lane warps by
#    construction, never compiled for HIP) that uses shuffles, votes, warp syncs, warpSize or
#    warp-level matrix operations must name kWarpSize (src/cuda/gpu_runtime.h, or fused::kWarpSize
#    in primitives/mma_sync.cuh / primitives/rocwmma.cuh), where its assumption is checked.
warp_ops='__shfl|__ballot|__any_sync|__all_sync|__activemask|__syncwarp|\bwarpSize\b|__lane_id|wmma::|rocwmma::|__builtin_amdgcn_(wmma|mfma)|mma\.sync'
bad=()
while IFS= read -r f; do
  # Uses, not mentions: // comments are left out of the match.
  if sed 's://.*$::' "$f" | grep -Eq "$warp_ops" && ! grep -q 'kWarpSize' "$f"; then bad+=("$f"); fi
done < <(find src/cuda -path src/cuda/width64/width64_kernel.cuh -prune -o \
           -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) -print | sort)
if [ ${#bad[@]} -gt 0 ]; then
  echo "hip-compile-check: FAILED: warp-level operations without a stated warp size (use tinyfuse::gpu::kWarpSize):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "hip-compile-check: warp-size rule holds for src/cuda (except the CUDA-only width64_kernel.cuh)"

# 2. The toolchain.
packages=(hipcc libamdhip64-dev rocm-device-libs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "hip-compile-check: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  start=$(date +%s)
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
           --no-install-recommends "${missing[@]}" >/dev/null; }; then
    echo "hip-compile-check: SKIPPED: could not install Debian's HIP packages (${missing[*]}); nothing compiled for HIP"
    exit 0
  fi
  echo "hip-compile-check: installed in $(( $(date +%s) - start )) s"
fi
if ! command -v hipconfig >/dev/null 2>&1; then
  echo "hip-compile-check: SKIPPED: hipconfig not found after installing ${packages[*]}; nothing compiled for HIP"
  exit 0
fi
echo "hip-compile-check: HIP $(hipconfig --version 2>/dev/null)"

# 3. Configure and compile the HIP units only.
mkdir -p "$build"
cmake -S . -B "$build" -DTINYFUSE_HIP=ON -DTINYFUSE_BUILD_TESTS=OFF -DTINYFUSE_BUILD_TOOLS=OFF \
  -DTINYFUSE_BUILD_BENCHMARKS=OFF "$@" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; echo "hip-compile-check: FAILED: cmake configure" >&2; exit 1; }
start=$(date +%s)
cmake --build "$build" --target tinyfuse_hip_units -j"$(nproc 2>/dev/null || echo 2)"
echo "hip-compile-check: compiled in $(( $(date +%s) - start )) s"

# 4. Each object holds device code for each target (not only the host side).
targets=$(sed -n 's/^targets: //p' "$build/hip_units.txt" | tr ';' ' ')
bundler=$(command -v clang-offload-bundler-15 || command -v clang-offload-bundler || true)
objects=$(find "$build/src/cuda/CMakeFiles/tinyfuse_hip_units.dir" -name '*.o' | sort)
[ -n "$objects" ] || { echo "hip-compile-check: FAILED: no objects built" >&2; exit 1; }
if [ -n "$bundler" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  host_only=()
  declare -A kernels
  for o in $objects; do
    if ! readelf -S "$o" | grep -c '\.hip_fatbin' >/dev/null; then host_only+=("${o##*/}"); continue; fi
    objcopy -O binary --only-section=.hip_fatbin "$o" "$tmp/fatbin"
    bundles=$("$bundler" --list --type=o --input="$tmp/fatbin")
    for t in $targets; do
      grep -q -- "--$t\$" <<<"$bundles" ||
        { echo "hip-compile-check: FAILED: ${o##*/} has no device code for $t" >&2; exit 1; }
      "$bundler" --unbundle --type=o --input="$tmp/fatbin" --targets="hipv4-amdgcn-amd-amdhsa--$t" --output="$tmp/$t.co"
      n=$(readelf -sW "$tmp/$t.co" | awk '/\.kd$/ {print $8}' | sort -u | wc -l)  # kernel descriptors
      kernels[$t]=$(( ${kernels[$t]:-0} + n ))
    done
  done
  for t in $targets; do echo "hip-compile-check: $t: ${kernels[$t]} kernels"; done
  echo "hip-compile-check: every object with kernels carries device code for: $targets" \
       "(host only, no kernels: ${host_only[*]:-none})"
else
  echo "hip-compile-check: clang-offload-bundler not found: device code per target not inspected"
fi
cat "$build/hip_units.txt"
echo "hip-compile-check: OK (compiled, not linked or run: no AMD GPU here; docs/PLATFORMS.md)"
