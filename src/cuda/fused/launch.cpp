// Launching a plan (plan.h): the kernel, grid, block and shared memory the planner chose, with
// the call's arguments in the order of that kernel family's parameters. Nothing is decided here.
// Launches go through the runtime call that returns the launch's own error (cudaLaunchKernel), so
// no cudaGetLastError follows them.
#include "cuda/fused/plan.h"

#include <cstdint>
#include <string>

#if !defined(TINYFUSE_WITH_HIP)
#include "cuda/primitives/tensor_maps.h"
#endif

namespace tinyfuse::cuda::fused {

namespace {

void launch(const FusedPlan& plan, void** params, gpuStream_t stream) {
  const gpuError_t e = gpuLaunchKernel(plan.function, dim3(plan.blocks), dim3(plan.threads), params, plan.smem, stream);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();  // leave no error behind for the next call to find
    ::tinyfuse::gpu::throw_gpu_error(e, to_string(plan.kernel), __FILE__, __LINE__);
  }
}

// The general kernels, forward or backward (`Args`): shape, the call's arguments, the tile count
// and, on HIP, the weights' share of the dynamic shared memory.
template <typename Args>
void launch_general(const FusedPlan& plan, LaunchParams& p, Args& args, gpuStream_t stream) {
#if defined(TINYFUSE_WITH_HIP)
  size_t weight_smem_bytes = static_cast<size_t>(p.weight_bytes);
  void* params[] = {&p.shape, &args, &p.n_tiles, &weight_smem_bytes};
#else
  void* params[] = {&p.shape, &args, &p.n_tiles};
#endif
  launch(plan, params, stream);
}

[[noreturn]] void wrong_arguments(const FusedPlan& plan, const char* which) {
  throw Error(std::string("internal: a ") + to_string(plan.kernel) + " plan launched with " + which);
}

bool aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
// What the pipelined and Hopper kernels read and write with 16-byte copies (launch.h's rules):
// the network stages every matrix so; checked here rather than assumed.
bool rows_ready(const void* p, int64_t ld) { return !p || (aligned(p) && ld % 8 == 0); }
bool forward_ready(const ForwardArgs& a) {
  return rows_ready(a.input, a.ld_in) && rows_ready(a.output, a.ld_out) && aligned(a.hidden_y) && aligned(a.hidden_z) &&
         aligned(a.out_z) && rows_ready(a.loss.gradients, a.loss.ld_grad);
}
bool backward_ready(const BackwardArgs& a) {
  return rows_ready(a.dL_doutput, a.ld_dout) && rows_ready(a.dL_dinput, a.ld_din) && rows_ready(a.input, a.ld_in) &&
         aligned(a.dz) && aligned(a.hidden_deriv) && aligned(a.out_z);
}

}  // namespace

void launch_plan(const FusedPlan& plan, const ForwardArgs& a, float* partial, gpuStream_t stream) {
  if (plan.blocks == 0) return;  // an empty batch
  if (plan.kernel != FusedKernel::General && !forward_ready(a)) wrong_arguments(plan, "unaligned rows");
  if ((plan.kernel == FusedKernel::WgmmaOneBlob) != (a.oneblob.x != nullptr)) wrong_arguments(plan, "the wrong input");
  LaunchParams p = plan.params;  // the kernels take their parameters by value: copies they may point at
  ForwardArgs args = a;
  switch (plan.kernel) {
    case FusedKernel::General:
      return launch_general(plan, p, args, stream);
#if !defined(TINYFUSE_WITH_HIP)
    case FusedKernel::Pipelined:
    case FusedKernel::PipelinedFoldedLoss: {
      void* params[] = {&p.shape, &args, &p.weight_bytes, &p.stage_stride, &p.n_tiles};
      return launch(plan, params, stream);
    }
    case FusedKernel::PipelinedTrainStep: {
      if (!partial) wrong_arguments(plan, "no weight-gradient partials");
      void* params[] = {&p.shape, &args, &p.weight_bytes, &p.n_tiles, &partial};
      return launch(plan, params, stream);
    }
    case FusedKernel::Wgmma:
    case FusedKernel::WgmmaOneBlob: {
      void* params[] = {&p.shape, &args, &p.wgmma};
      return launch(plan, params, stream);
    }
    case FusedKernel::WgmmaTma: {
      // The maps describe this call's rows; the plan chose this kernel only where they can be made.
      CUtensorMap in_map, out_map;
      if (!row_tiles(&in_map, args.input, args.batch, args.ld_in) || !row_tiles(&out_map, args.output, args.batch, args.ld_out))
        wrong_arguments(plan, "rows the copy engine cannot describe");
      const uint16_t* weights = static_cast<const uint16_t*>(args.weights);
      void* params[] = {&in_map, &out_map, &p.shape, &weights, &p.tma};
      return launch(plan, params, stream);
    }
#endif
    default: wrong_arguments(plan, "forward arguments");
  }
}

void launch_plan(const FusedPlan& plan, const BackwardArgs& a, float* partial, gpuStream_t stream) {
  if (plan.blocks == 0) return;
  if (plan.kernel != FusedKernel::General && !backward_ready(a)) wrong_arguments(plan, "unaligned rows");
  LaunchParams p = plan.params;
  BackwardArgs args = a;
  switch (plan.kernel) {
    case FusedKernel::General:
      return launch_general(plan, p, args, stream);
#if !defined(TINYFUSE_WITH_HIP)
    case FusedKernel::Pipelined: {
      void* params[] = {&p.shape, &args, &p.weight_bytes, &p.stage_stride, &p.n_tiles};
      return launch(plan, params, stream);
    }
    case FusedKernel::PipelinedWeightGrads: {
      if (!partial) wrong_arguments(plan, "no weight-gradient partials");
      void* params[] = {&p.shape, &args, &p.weight_bytes, &p.stage_stride, &p.n_tiles, &partial};
      return launch(plan, params, stream);
    }
#endif
    default: wrong_arguments(plan, "backward arguments");
  }
}

void launch_plan(const FusedPlan& plan, const SecondOrderArgs& a, gpuStream_t stream) {
  if (plan.blocks == 0) return;
  if (plan.kernel != FusedKernel::GeneralSecondOrder) wrong_arguments(plan, "second-order arguments");
  LaunchParams p = plan.params;
  SecondOrderArgs args = a;
  args.state_offset = p.weight_bytes;  // the warps' rows follow the weights
  launch_general(plan, p, args, stream);
}

size_t plan_partial_floats(const FusedPlan& plan) {
  return plan.kernel == FusedKernel::PipelinedWeightGrads || plan.kernel == FusedKernel::PipelinedTrainStep
             ? static_cast<size_t>(plan.blocks) * plan.params.partial_floats_per_block
             : 0;
}

}  // namespace tinyfuse::cuda::fused
