// Test hook: which kernel launch_forward runs. By default the streaming kernel wherever it applies
// (stream_launch.h), else fused_forward_kernel; both give the same values bit for bit, which the
// tests check by forcing the general kernel. TINYFUSE_FUSED_FORWARD=general in the environment
// (read once, at the first forward) forces it for the whole process. Plain C++: tests include it.
#pragma once

namespace tinyfuse::cuda::fused {

bool general_forward_forced();
void force_general_forward(bool on);  // overrides the environment from now on

}  // namespace tinyfuse::cuda::fused
