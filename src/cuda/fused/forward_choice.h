// Test hook: which kernels launch_forward may run. By default the Hopper wgmma kernel for
// inference where it applies (stream_launch.h), then the mma.sync streaming kernel, then
// fused_forward_kernel. All of them give the same values bit for bit (the Hopper kernel's
// equality is measured: test_fused_wgmma.cpp); the tests compare them by forcing a path.
// TINYFUSE_FUSED_FORWARD in the environment (read once, at the first forward): "general" forces
// fused_forward_kernel, "mma" leaves out the Hopper kernel. General also forces the general
// backward (fused_backward_kernel in place of the streaming one, stream_backward_kernel.cuh), so
// the same switch compares both directions. Plain C++: tests include it.
#pragma once

namespace tinyfuse::cuda::fused {

enum class ForwardPath {
  Any,      // the fastest kernel that applies
  NoWgmma,  // the mma.sync kernels only (streaming, then general)
  General,  // fused_forward_kernel and fused_backward_kernel only
};

ForwardPath forward_path();
void force_forward_path(ForwardPath path);  // overrides the environment from now on

// Whether the backward may form the weight gradients inside the streaming kernel where that
// applies (stream_launch.h). Its sums run in another order than weight_grad.cu's, so the two
// agree to FP32 rounding, not bit for bit; tests that compare kernels bitwise switch it off.
// TINYFUSE_FUSED_WGRAD=0 in the environment switches it off.
bool fused_weight_grads();
void force_fused_weight_grads(bool on);  // overrides the environment from now on
// How many backward launches formed the weight gradients inside (tests check the path ran).
unsigned long long fused_weight_grad_launches();
void count_fused_weight_grad_launch();

// Whether FullyFusedMLP may fold a built-in loss into the training forward (the Trainer's
// forward_with_loss, launch_forward_with_loss). Same bits as forward() + Loss::evaluate; the
// switch is for measuring and for tests that compare the two. TINYFUSE_FUSED_LOSS=0 in the
// environment switches it off.
bool fused_loss();
void force_fused_loss(bool on);  // overrides the environment from now on
// How many training forwards evaluated the loss inside (tests check the path ran).
unsigned long long fused_loss_launches();

// Whether FullyFusedMLP may run the Trainer's whole pass (forward, L2 loss, backward with weight
// gradients) in one kernel (forward_backward_with_loss, launch_fused_train_step). Same values and
// gradients as the three-kernel path it replaces where both run on the same grid (the weight
// gradients' summation order depends on it). TINYFUSE_FUSED_STEP=0 in the environment switches it
// off; so does switching off either part it contains (fused_loss(), fused_weight_grads()), so
// that those switches keep meaning what they say.
bool fused_train_step();
void force_fused_train_step(bool on);  // overrides the environment from now on
// How many training passes ran as one kernel (tests check the path ran).
unsigned long long fused_train_step_launches();
void count_fused_train_step_launch();

// Whether Hopper inference of the square 64-wide ReLU network may move whole 64-row tiles by
// tensor copies (TMA, wgmma_tma_kernel.cuh) where the rows allow it; otherwise the row-copying
// wgmma kernel runs. Same values bit for bit (test_fused_wgmma.cpp). TINYFUSE_WGMMA_TMA=0 in the
// environment switches it off (for comparing the two).
bool tma_inference();
void force_tma_inference(bool on);  // overrides the environment from now on
// How many inference launches moved their tiles by tensor copies (tests check the path ran).
unsigned long long tma_inference_launches();
void count_tma_inference_launch();

// Shorthands of the two above.
inline bool general_forward_forced() { return forward_path() == ForwardPath::General; }
inline void force_general_forward(bool on) { force_forward_path(on ? ForwardPath::General : ForwardPath::Any); }

}  // namespace tinyfuse::cuda::fused
