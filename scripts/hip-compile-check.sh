#!/usr/bin/env bash
# HIP compile check and code-object audit: builds the GPU backend's HIP units (CMake
# -DTINYFUSE_HIP=ON, target tinyfuse_hip_units) with Debian 12's clang 19 for the AMD targets in
# TINYFUSE_HIP_TARGETS (default gfx1201, gfx1100, gfx942, gfx90a, gfx1030) in one configure and one
# build (one --offload-arch per target), checks that every object carries device code for every
# target, then audits each target's code objects (tools/audit/amd/tinyfuse-audit-amd: per kernel
# registers, LDS, private segment, spills, matrix-core and LDS instruction counts; fails on scratch,
# spills or a fused kernel without matrix-core instructions on a target that has them).
# Also checks that every HIP source using warp-level operations states its warp-size assumption.
#
# Toolchain: Debian's clang-19 (knows gfx11 / gfx12 / gfx942, which the clang 15 behind Debian's
# hipcc does not) with Debian's HIP 5.2 headers and device libraries. Those libraries stop at
# gfx1036: for the newer targets the one file they lack, oclc_isa_version_<id>.bc (one constant,
# __oclc_ISA_version), is generated into the build directory beside links to the others. That is
# a compile-check arrangement, not a runtime. Installs the packages when missing; skips with a
# message when they cannot be installed. Nothing is linked or run: there is no AMD GPU here
# (docs/PLATFORMS.md records what was compiled and audited).
# Usage: scripts/hip-compile-check.sh [build dir, default build-hip] [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-hip}
shift || true
targets=${TINYFUSE_HIP_TARGETS:-"gfx1201;gfx1100;gfx942;gfx90a;gfx1030"}
t0=$(date +%s)

# 1. The warp-size rule, on the sources (needs no toolchain): a GPU source other than the
#    CUDA-only width64_kernel.cuh (32-lane warps by construction, never compiled for HIP) that
#    uses shuffles, votes, warp syncs, warpSize or warp-level matrix operations must name
#    kWarpSize (src/cuda/gpu_runtime.h, or fused::kWarpSize in primitives/mma_sync.cuh /
#    primitives/amd_matrix_ops.cuh), where its assumption is checked.
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
packages=(clang-19 lld-19 llvm-19 clang-tools-19 hipcc libamdhip64-dev rocm-device-libs)
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
    echo "hip-compile-check: SKIPPED: could not install ${missing[*]}; nothing compiled for HIP"
    exit 0
  fi
  echo "hip-compile-check: installed in $(( $(date +%s) - start )) s"
fi
llvm=/usr/lib/llvm-19/bin
for tool in clang++ clang-offload-bundler llvm-as llvm-readelf llvm-objdump; do
  [ -x "$llvm/$tool" ] || { echo "hip-compile-check: SKIPPED: $llvm/$tool missing after installing ${packages[*]}"; exit 0; }
done
command -v hipconfig >/dev/null 2>&1 ||
  { echo "hip-compile-check: SKIPPED: hipconfig not found after installing ${packages[*]}"; exit 0; }
hipver=$(hipconfig --version | sed 's/-.*//')
echo "hip-compile-check: HIP $hipver headers, $("$llvm/clang++" --version | head -n 1)"

# 3. Device libraries: Debian's, plus the ISA-version constant for targets they do not cover.
mkdir -p "$build/amdgcn-bitcode"
bc=$(cd "$build/amdgcn-bitcode" && pwd)
for f in /usr/lib/x86_64-linux-gnu/amdgcn/bitcode/*.bc; do ln -sf "$f" "$bc/"; done
datalayout=$(echo | "$llvm/clang" -x c - -target amdgcn-amd-amdhsa -nogpulib -S -emit-llvm -o - |
             sed -n 's/^target datalayout = //p')
for t in ${targets//;/ }; do
  id=${t#gfx}; id=${id%%:*}
  [ -e "$bc/oclc_isa_version_$id.bc" ] && continue
  # gfx<major><minor><stepping>, the last two one hex digit each: 1201 -> 12001, 942 -> 9402, 90a -> 9010
  ver=$(( ${id:0:${#id}-2} * 1000 + 16#${id: -2:1} * 100 + 16#${id: -1} ))
  printf 'target datalayout = %s\ntarget triple = "amdgcn-amd-amdhsa"\n@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 %d, align 4\n' \
    "$datalayout" "$ver" | "$llvm/llvm-as" -o "$bc/oclc_isa_version_$id.bc"
  echo "hip-compile-check: generated oclc_isa_version_$id.bc (__oclc_ISA_version = $ver)"
done

# 4. One configure, one build: every unit compiled for all targets at once. The compiler by its
#    /usr/bin name: Debian's hip-lang CMake package looks for clang's runtime library beside the
#    compiler's folder (/usr/lib/clang/*, which hipcc's dependencies fill), never used here.
mkdir -p "$build"
cmake -S . -B "$build" -DTINYFUSE_HIP=ON -DTINYFUSE_BUILD_TESTS=OFF -DTINYFUSE_BUILD_TOOLS=OFF \
  -DTINYFUSE_BUILD_BENCHMARKS=OFF -DCMAKE_HIP_COMPILER=/usr/bin/clang++-19 -DCMAKE_HIP_ARCHITECTURES="$targets" \
  -DCMAKE_HIP_FLAGS="--rocm-path=/usr --rocm-device-lib-path=$bc --hip-version=$hipver" "$@" \
  >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; echo "hip-compile-check: FAILED: cmake configure" >&2; exit 1; }
start=$(date +%s)
cmake --build "$build" --target tinyfuse_hip_units -j"$(nproc 2>/dev/null || echo 2)"
echo "hip-compile-check: compiled in $(( $(date +%s) - start )) s"

# 5. Each object holds device code for each target; its code objects go to $build/code-objects/<target>/.
objects=$(find "$build/src/cuda/CMakeFiles/tinyfuse_hip_units.dir" -name '*.o' | sort)
[ -n "$objects" ] || { echo "hip-compile-check: FAILED: no objects built" >&2; exit 1; }
co_dir="$build/code-objects"
rm -rf "$co_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
host_only=()
for o in $objects; do
  # (grep -c, not -q: -q would close the pipe early and pipefail would count readelf's SIGPIPE)
  if ! readelf -SW "$o" | grep -c '\.hip_fatbin' >/dev/null; then host_only+=("${o##*/}"); continue; fi
  objcopy -O binary --only-section=.hip_fatbin "$o" "$tmp/fatbin"
  bundles=$("$llvm/clang-offload-bundler" --list --type=o --input="$tmp/fatbin")
  unit=${o#"$build/src/cuda/CMakeFiles/tinyfuse_hip_units.dir/"}
  unit=${unit%.o}
  for t in ${targets//;/ }; do
    grep -q -- "--$t\$" <<<"$bundles" ||
      { echo "hip-compile-check: FAILED: ${o##*/} has no device code for $t" >&2; exit 1; }
    mkdir -p "$co_dir/$t/$(dirname "$unit")"
    "$llvm/clang-offload-bundler" --unbundle --type=o --input="$tmp/fatbin" \
      --targets="hipv4-amdgcn-amd-amdhsa--$t" --output="$co_dir/$t/$unit.co"
  done
done
echo "hip-compile-check: every object with kernels carries device code for: ${targets//;/ }" \
     "(host only, no kernels: ${host_only[*]:-none})"
cat "$build/hip_units.txt"

# 6. The audit: per kernel and target, to $build/amd-audit.txt and .json.
python3 tools/audit/amd/tinyfuse-audit-amd --llvm-bin "$llvm" --json "$build/amd-audit.json" \
  --report "$build/amd-audit.txt" "$co_dir"
echo "hip-compile-check: OK in $(( $(date +%s) - t0 )) s (compiled and audited, not linked or run: no AMD GPU here; docs/PLATFORMS.md)"
