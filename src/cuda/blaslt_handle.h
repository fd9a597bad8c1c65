// One cuBLASLt (hipBLASLt) handle per device, created on first use from any thread.
#pragma once

#include "cuda/gpu_runtime.h"

namespace tinyfuse::cuda {

// The handle for the calling thread's current device. A handle holds no stream or workspace
// (both are passed to every matmul), so one per device is shared by all threads and streams.
// Handles live until the process ends: destroying them during static destruction would race the
// runtime's own shutdown.
gpublasLtHandle_t blaslt_handle();

}  // namespace tinyfuse::cuda
