// Which kernel runs each pass of a FullyFusedMLP, and with what launch: decided here, in one
// place (plan.cpp), from the pass, the dtype, the shape, the layout of the call's matrices, the
// device and the network's FusedKernelOptions. A network remembers its last plan per pass and
// reuses it while the batch, layout and device stay the same; the launchers (launch.cpp) launch
// what a plan says and decide nothing.
//
// The kernel families (each in its own folder; docs/ARCHITECTURE.md has the table):
//   general/     fused_forward_kernel, fused_backward_kernel: mma.sync (sm_75+), every shape;
//                the reference the others are checked against, bit for bit. Also
//                fused_second_order_kernel, the second derivatives (every shape).
//   pipelined/   persistent kernels that pipeline rows through shared memory with cp.async
//                (sm_80+): inference and backward; on sm_90+ also the training forward (with the
//                L2, RelativeL2 or L1 loss folded in), the backward that forms the weight gradients
//                itself, and the whole training pass in one kernel.
//   hopper/      inference on warpgroup products (wgmma, sm_90a), whole tiles moved by the copy
//                engine (TMA) for the square 64-wide ReLU network; behind OneBlob, the features
//                made in shared memory from the positions.
//   weight_grad/ the split-K weight-gradient kernels after a backward that writes dZ.
#pragma once

#include <cstdint>

#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/launch_config.h"
#include "cuda/fused/launch_params.h"
#include "cuda/fused/passes.h"
#include "tinyfuse/factory.h"

namespace tinyfuse::cuda::fused {

// The widest input or output the pipelined and Hopper kernels' row stages hold.
constexpr int kPipelinedMaxIoWidth = 256;

// What a call's matrices are like, as far as the choice depends on it (the network stages every
// matrix the kernels read or write to 16-byte aligned rows with strides of a multiple of 8
// elements, so that much always holds).
struct CallLayout {
  int64_t ld_in = 0, ld_out = 0;  // row strides (elements) of input and output
  bool weights_aligned = false;   // the parameters start 16-byte aligned
  bool dL_dinput = false;         // backward: dL/dinput asked for
  bool dz = false;                // backward: every layer's dZ asked for (the weight-gradient kernels read it)
  bool input_ready = true;        // the input as the kernels read it in place (TrainStep takes it unstaged)
  // The loss folded into a training pass (ForwardWithLoss, TrainStep).
  int loss_kind = -1;             // a LossKind, -1 for none or a loss of the caller's own
  int loss_dims = 0;              // target columns
  bool vector_target = false;     // the target 16-byte aligned with a row stride of a multiple of 4
  bool operator==(const CallLayout& o) const {
    return ld_in == o.ld_in && ld_out == o.ld_out && weights_aligned == o.weights_aligned && dL_dinput == o.dL_dinput &&
           dz == o.dz && input_ready == o.input_ready && loss_kind == o.loss_kind && loss_dims == o.loss_dims && vector_target == o.vector_target;
  }
};

// What the planner decides from.
struct PlanInputs {
  FusedPass pass = FusedPass::Inference;
  DType dtype = DType::F16;
  FusedShape shape;
  int64_t batch = 0;
  CallLayout layout;
  const DeviceLimits* device = nullptr;
  FusedKernelOptions options;
};

// A kernel and its launch. The family's own launch values are in `params`.
struct FusedPlan {
  FusedKernel kernel = FusedKernel::None;
  const void* function = nullptr;  // the kernel instance
  unsigned blocks = 0, threads = 0;
  size_t smem = 0;
  LaunchParams params;
};

// The plan for `in` (FusedKernel::None where no single kernel takes the pass: ForwardWithLoss,
// BackwardWeightGrads and TrainStep then fall back to the passes they combine). Throws
// UnsupportedError where even the general kernel cannot run (weights over shared memory).
FusedPlan plan_pass(const PlanInputs& in);

// Each family's part of the choice (its own unit): the plan where the family takes `in`,
// FusedKernel::None where it does not. plan_pass asks them in order of speed.
// The general kernels' plan (launch_config.cpp): weights resident in shared memory when every layer
// fits half of the device's per-block limit (so two blocks share an SM), else staged one layer at a
// time; as many blocks as the SMs hold at once, looping over the tiles. Throws UnsupportedError
// where one layer's weights exceed shared memory.
struct GeneralKernel {
  const void* function;
  int block_rows;             // rows per block and tile
  size_t extra_smem_bytes;    // shared memory after the weights (the HIP kernels' per-wave rows; 0 on CUDA)
};
FusedPlan plan_general(const GeneralKernel& kernel, const PlanInputs& in);
FusedPlan plan_general_forward(const PlanInputs& in);         // Inference, TrainingForward
FusedPlan plan_general_backward(const PlanInputs& in);        // Backward
FusedPlan plan_general_second_order(const PlanInputs& in);    // SecondOrder
FusedPlan plan_pipelined_inference(const PlanInputs& in);     // Inference
FusedPlan plan_pipelined_training_forward(const PlanInputs& in);  // TrainingForward, ForwardWithLoss
FusedPlan plan_pipelined_backward(const PlanInputs& in);      // Backward
FusedPlan plan_pipelined_weight_grads(const PlanInputs& in);  // BackwardWeightGrads
FusedPlan plan_pipelined_train_step(const PlanInputs& in);    // TrainStep
FusedPlan plan_hopper_inference(const PlanInputs& in);        // Inference
FusedPlan plan_hopper_oneblob_inference(const PlanInputs& in);  // EncodedInference

// Launches a plan (launch.cpp). partial: the FP32 weight-gradient partials of the kernels that form
// them (PipelinedWeightGrads, PipelinedTrainStep), else null. Nothing here synchronises the host.
void launch_plan(const FusedPlan& plan, const ForwardArgs& args, float* partial, gpuStream_t stream);
void launch_plan(const FusedPlan& plan, const BackwardArgs& args, float* partial, gpuStream_t stream);
void launch_plan(const FusedPlan& plan, const SecondOrderArgs& args, gpuStream_t stream);
// The FP32 partials a plan's kernel writes (0 for kernels that write none).
size_t plan_partial_floats(const FusedPlan& plan);

// The last plan of each pass, with what it was made for: a network keeps one and asks again only
// when the batch, layout or device changed. It also remembers which kernel the last call of each
// pass ran (tests and benchmarks ask).
class PlanMemory {
 public:
  const FusedPlan& get(const PlanInputs& in) {
    const int i = static_cast<int>(in.pass);
    Entry& e = entries_[i];
    if (!e.valid || e.batch != in.batch || e.device != in.device->ordinal || !(e.layout == in.layout)) {
      e.plan = plan_pass(in);
      e.batch = in.batch;
      e.device = in.device->ordinal;
      e.layout = in.layout;
      e.valid = true;
    }
    last_[i] = e.plan.kernel;
    return e.plan;
  }
  // A call of `pass` that did not ask for a plan (its arguments ruled every kernel out).
  void ran_without_plan(FusedPass pass) { last_[static_cast<int>(pass)] = FusedKernel::None; }
  // The kernel the last call of `pass` ran (None before the first, and where it ran as several).
  FusedKernel last_kernel(FusedPass pass) const { return last_[static_cast<int>(pass)]; }

 private:
  struct Entry {
    FusedPlan plan;
    int64_t batch = 0;
    int device = -1;
    CallLayout layout;
    bool valid = false;
  };
  Entry entries_[kFusedPasses];
  FusedKernel last_[kFusedPasses] = {};
};

}  // namespace tinyfuse::cuda::fused
