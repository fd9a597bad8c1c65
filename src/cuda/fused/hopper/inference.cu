// FullyFusedMLP inference through the Hopper kernels (wgmma_kernel.cuh, tma_kernel.cuh). CMake
// compiles this unit for sm_90a alone (wgmma exists on no other target; src/cuda/CMakeLists.txt)
// when the build's architectures include 90, and defines TINYFUSE_WGMMA_SM90A for it; otherwise
// it plans nothing, and inference runs the pipelined kernel.
#include "cuda/fused/plan.h"

#if defined(TINYFUSE_WGMMA_SM90A)
#include <cstdint>

#include "cuda/fused/hopper/tma_kernel.cuh"
#include "cuda/fused/hopper/wgmma_kernel.cuh"
#include "cuda/primitives/tensor_maps.h"
#endif

namespace tinyfuse::cuda::fused {

#if defined(TINYFUSE_WGMMA_SM90A)

namespace {

// Warpgroups per block: 64 wide is memory-bound and does best with small blocks (2 per SM),
// 128 wide is compute-bound and does best with 3 warpgroups sharing one copy of the weights
// (measured on the H200, docs/PERFORMANCE.md).
int preferred_groups(int width) { return width == 128 ? 3 : 2; }

// Two input tiles in flight per warp: three or four measured no faster at 2^14 .. 2^22
// (docs/PERFORMANCE.md).
constexpr int kStages = 2;

// A persistent launch of `kernel` (either Hopper kernel) with `groups` warpgroups a block over
// `n_tiles` 64-row tiles; none where the block does not fit the device. The caller adds its
// family's constants (params.wgmma or params.tma).
FusedPlan plan_persistent(FusedKernel kind, const void* kernel, int groups, size_t smem, int64_t n_tiles,
                          const PlanInputs& in) {
  const int threads = groups * wgmma::kGroupThreads;
  const int64_t blocks = persistent_grid_blocks(*in.device, kernel, threads, smem, n_tiles, groups);
  if (blocks < 1) return {};
  FusedPlan p;
  p.kernel = kind;
  p.function = kernel;
  p.blocks = static_cast<unsigned>(blocks);
  p.threads = static_cast<unsigned>(threads);
  p.smem = smem;
  p.params.shape = kernel_shape(in.shape, true);
  p.params.n_tiles = n_tiles;
  return p;
}

// A launch of the row-copying kernel (or, ONEBLOB, the one making OneBlob's features) with
// `groups` warpgroups a block and STAGES input tiles a warp; none where the block does not fit
// the device.
template <typename T, int WIDTH, int STAGES, Epilogue HIDDEN, Epilogue OUT, bool SQUARE, bool ONEBLOB = false>
FusedPlan plan_rows_launch(const PlanInputs& in, const wgmma::Plan& wp, int groups) {
  const void* kernel =
      reinterpret_cast<const void*>(wgmma::inference_kernel<T, WIDTH, STAGES, HIDDEN, OUT, SQUARE, ONEBLOB>);
  const size_t smem = wgmma::launch_smem_bytes(wp, groups, STAGES, in.shape.out_width, static_cast<int>(sizeof(T)));
  FusedPlan p = plan_persistent(ONEBLOB ? FusedKernel::WgmmaOneBlob : FusedKernel::Wgmma, kernel, groups, smem,
                                wp.n_tiles, in);
  p.params.wgmma = wp;
  return p;
}

// As many warpgroups a block as fit with two input stages a warp, up to the preferred number. At
// 128 wide, where that is one warpgroup (five 128-wide layers, W2's network: 164 KB of weights),
// every layer's products wait on its own epilogue: then as many warpgroups as fit with one stage
// a warp (the next tile asked for after layer 0, the output through a stage of its own). W2's
// network kernel at 2^21 rows on an H100: 745 us with one warpgroup, 451 us with three
// (docs/PERFORMANCE.md). Shapes where two stages fit two warpgroups keep them: one stage with
// more is not measured there.
template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, bool SQUARE>
FusedPlan plan_rows_kernel(const PlanInputs& in) {
  const wgmma::Plan wp =
      wgmma::make_plan(WIDTH, in.shape, in.layout.ld_in, in.layout.ld_out, in.batch, static_cast<int>(sizeof(T)));
  for (int groups = preferred_groups(WIDTH); groups >= 1; --groups) {
    const FusedPlan p = plan_rows_launch<T, WIDTH, kStages, HIDDEN, OUT, SQUARE>(in, wp, groups);
    if (p.kernel == FusedKernel::None) continue;
    if constexpr (WIDTH == 128) {
      if (groups == 1)
        for (int more = preferred_groups(WIDTH); more > 1; --more) {
          const FusedPlan q = plan_rows_launch<T, WIDTH, 1, HIDDEN, OUT, SQUARE>(in, wp, more);
          if (q.kernel != FusedKernel::None) return q;
        }
    }
    return p;
  }
  return {};  // too deep for shared memory: the pipelined kernel is asked next
}

// The TMA kernel (tma_kernel.cuh) moves whole 64-row tiles by tensor copies; it needs rows the
// copy engine can describe (tensor_maps.h: encode_row_tiles). Measured against the row-copying
// kernel on an H200 (docs/PERFORMANCE.md): 4.50 -> 4.42, 8.37 -> 7.23, 21.7 -> 20.1, 77.8 -> 70.6
// and 293 -> 273 µs at 2^14 .. 2^22 rows.
template <typename T>
FusedPlan plan_tma_kernel(const PlanInputs& in) {
  if (!row_tiles_possible(in.batch, in.layout.ld_in) || !row_tiles_possible(in.batch, in.layout.ld_out)) return {};
  wgmma::TmaPlan tp;
  tp.weights_bytes = wgmma::all_layers_bytes(wgmma::kTmaWidth, kernel_shape(in.shape, true));
  tp.n_tiles = (in.batch + wgmma::kGroupRows - 1) / wgmma::kGroupRows;
  const size_t smem = wgmma::tma_smem_bytes(tp.weights_bytes, wgmma::kTmaGroups);
  const void* kernel = reinterpret_cast<const void*>(wgmma::tma_inference_kernel<T, Epilogue::Relu, Epilogue::Identity>);
  FusedPlan p = plan_persistent(FusedKernel::WgmmaTma, kernel, wgmma::kTmaGroups, smem, tp.n_tiles, in);
  p.params.tma = tp;  // none (FusedKernel::None) where too deep for shared memory
  return p;
}

// The square ReLU network (input, hidden and output all WIDTH wide, no output activation: the
// benchmark's and the usual production shape) has its own kernels with those widths built in:
// at 64 wide the TMA kernel where the rows allow, else the row-copying square instance.
template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT>
FusedPlan plan_variant(const PlanInputs& in) {
  if constexpr (HIDDEN == Epilogue::Relu && OUT == Epilogue::Identity) {
    if (in.shape.in_width == WIDTH && in.shape.out_width == WIDTH && in.layout.weights_aligned) {
      if constexpr (WIDTH == wgmma::kTmaWidth)
        if (in.options.tma) {
          FusedPlan p = plan_tma_kernel<T>(in);
          if (p.kernel != FusedKernel::None) return p;
        }
      return plan_rows_kernel<T, WIDTH, HIDDEN, OUT, true>(in);
    }
  }
  return plan_rows_kernel<T, WIDTH, HIDDEN, OUT, false>(in);
}

template <typename T, int WIDTH>
// Other hidden activations share one instance (Generic, Generic): with no output activation its
// run-time epilogue gives the Identity epilogue's bits, at the cost of one switch per tile.
FusedPlan plan_width(const PlanInputs& in) {
  const bool relu = in.shape.act == Activation::ReLU, identity_out = in.shape.out_act == Activation::None;
  if (relu && identity_out) return plan_variant<T, WIDTH, Epilogue::Relu, Epilogue::Identity>(in);
  if (relu) return plan_variant<T, WIDTH, Epilogue::Relu, Epilogue::Generic>(in);
  return plan_variant<T, WIDTH, Epilogue::Generic, Epilogue::Generic>(in);
}

template <typename T>
FusedPlan plan_typed(const PlanInputs& in) {
  if (in.shape.width == 64) return plan_width<T, 64>(in);
  if (in.shape.width == 128) return plan_width<T, 128>(in);
  return {};  // 16 and 32 wide: not measured against the mma.sync kernel, which keeps them
}

// Behind OneBlob: one stage a warp, which the features are made in (the output through a stage of
// its own), and as many warpgroups a block as fit up to the preferred number.
template <int WIDTH, Epilogue HIDDEN, Epilogue OUT>
FusedPlan plan_oneblob_kernel(const PlanInputs& in) {
  const wgmma::Plan wp = wgmma::make_plan(WIDTH, in.shape, in.layout.ld_in, in.layout.ld_out, in.batch, 2);
  for (int groups = preferred_groups(WIDTH); groups >= 1; --groups) {
    const FusedPlan p = plan_rows_launch<__half, WIDTH, 1, HIDDEN, OUT, false, true>(in, wp, groups);
    if (p.kernel != FusedKernel::None) return p;
  }
  return {};  // too deep for shared memory: OneBlob's kernel, then the network
}

// The epilogues as plan_width chooses them.
template <int WIDTH>
FusedPlan plan_oneblob_width(const PlanInputs& in) {
  const bool relu = in.shape.act == Activation::ReLU, identity_out = in.shape.out_act == Activation::None;
  if (relu && identity_out) return plan_oneblob_kernel<WIDTH, Epilogue::Relu, Epilogue::Identity>(in);
  if (relu) return plan_oneblob_kernel<WIDTH, Epilogue::Relu, Epilogue::Generic>(in);
  return plan_oneblob_kernel<WIDTH, Epilogue::Generic, Epilogue::Generic>(in);
}

// What every Hopper inference kernel needs of a call: rows of whole 16-byte chunks that its
// stages hold, strides its 32-bit offsets within a warp's 16 rows reach (wgmma::Plan), and a
// device of compute capability 9.0 (sm_90a code runs there only).
bool hopper_call_possible(const PlanInputs& in) {
  if (in.batch <= 0) return false;
  if (in.shape.in_width > kPipelinedMaxIoWidth || in.shape.out_width > kPipelinedMaxIoWidth) return false;
  if (in.shape.in_width % 8 != 0 || in.shape.out_width % 8 != 0) return false;
  constexpr int64_t kMaxLd = int64_t{1} << 26;
  if (in.layout.ld_in <= 0 || in.layout.ld_in >= kMaxLd || in.layout.ld_out <= 0 || in.layout.ld_out >= kMaxLd) return false;
  return in.device->major == 9 && in.device->minor == 0;
}

}  // namespace

FusedPlan plan_hopper_oneblob_inference(const PlanInputs& in) {
  if (in.dtype != DType::F16 || !hopper_call_possible(in)) return {};  // OneBlob writes FP16 features only
  if (in.shape.width == 64) return plan_oneblob_width<64>(in);
  if (in.shape.width == 128) return plan_oneblob_width<128>(in);
  return {};
}

FusedPlan plan_hopper_inference(const PlanInputs& in) {
  if (!hopper_call_possible(in)) return {};
  if (in.dtype == DType::F16) return plan_typed<__half>(in);
  if (in.dtype == DType::BF16) return plan_typed<__nv_bfloat16>(in);
  return {};
}

bool hopper_kernels_built() { return true; }

#else

FusedPlan plan_hopper_inference(const PlanInputs&) { return {}; }
FusedPlan plan_hopper_oneblob_inference(const PlanInputs&) { return {}; }
bool hopper_kernels_built() { return false; }

#endif

}  // namespace tinyfuse::cuda::fused
