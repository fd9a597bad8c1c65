// Width64FusedMLP: the Network around the fused kernel (width64_kernel.cuh). It checks every
// argument, picks the kernel variant and grid for the batch, and launches one kernel on the
// input's stream. No allocation and no host synchronisation per call, so inference() can be
// captured into a CUDA graph.
//
// Fail-closed: the shape rules are in core/network_config.cpp (64 -> 64 x 2 -> 64, ReLU, no output
// activation); here the device must run the kernel (compute capability 8.0+, and this binary must
// hold sm_80+ code for it), tensors must be FP16 on the GPU, and forward()/backward() (training)
// throw: this network is inference-only.
#include "cuda/width64/width64_fused_mlp.h"

#include <algorithm>
#include <string>

#include "core/mlp_base.h"
#include "cuda/common.cuh"
#if defined(TINYFUSE_WITH_HIP)
#include "cuda/primitives/amd_matrix_cores.h"
#include "cuda/width64/width64_kernel_hip.cuh"  // matrix-core builtins; activations through LDS between layers
#else
#include "cuda/width64/width64_kernel.cuh"  // mma.sync; activations in registers
#endif
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda {

namespace {

using width64::kRowsPerTile;
using width64::kSharedBytes;
using width64::kWarpsPerBlock;
using width64::width64_fused_kernel;

constexpr const char* kTrainWith =
    "train BlasLtMLPFP16 (or PortableMLP) with the same config and load its parameters: the "
    "12,480-value layout is the same (docs/PARAMETERS.md)";

using LaunchFn = void (*)(unsigned blocks, unsigned threads, gpuStream_t stream, const __half* params, const __half* in, int64_t ld_in,
                         __half* out, int64_t ld_out, int64_t batch);

template <int MT, bool VecIO>
void launch(unsigned blocks, unsigned threads, gpuStream_t stream, const __half* params, const __half* in, int64_t ld_in,
            __half* out, int64_t ld_out, int64_t batch) {
  width64_fused_kernel<MT, VecIO><<<blocks, threads, kSharedBytes<MT>, stream>>>(params, in, ld_in, out, ld_out, batch);
  TF_GPU_CHECK_LAUNCH("width64_fused_kernel");
}

// One kernel instantiation and how many of its blocks fit on an SM.
struct Variant {
  LaunchFn launch = nullptr;
  int blocks_per_sm = 0;
};

// threads: kWarpsPerBlock warps of the device's warp size (32; on AMD 32 or 64 by target).
template <int MT, bool VecIO>
Variant prepare_variant(const std::string& device_name, int threads) {
  Variant v;
  v.launch = &launch<MT, VecIO>;
  const void* fn = reinterpret_cast<const void*>(&width64_fused_kernel<MT, VecIO>);
#if !defined(TINYFUSE_WITH_HIP)
  gpuFuncAttributes attr{};
  TF_GPU_CHECK(gpuFuncGetAttributes(&attr, fn));
  // Code built for an older architecture (a trap there), whether as SASS or JIT-compiled PTX.
  const int built_for = std::min(attr.binaryVersion, attr.ptxVersion);
  if (built_for < 80)
    throw ConfigError("network.otype", "\"Width64FusedMLP\"",
                      "this library holds no sm_80+ code for the Width64FusedMLP kernel (" + device_name +
                          " would run code built for sm_" + std::to_string(built_for) + ")",
                      "rebuild with 80 or 90 in CMAKE_CUDA_ARCHITECTURES, or use BlasLtMLPFP16");
#endif
  TF_GPU_CHECK(gpuFuncSetAttribute(fn, gpuFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes<MT>));
  TF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&v.blocks_per_sm, fn, threads, kSharedBytes<MT>));
  if (v.blocks_per_sm < 1)
    throw UnsupportedError("Width64FusedMLP: its kernel (" + std::to_string(kSharedBytes<MT>) +
                           " bytes of shared memory, " + std::to_string(threads) + " threads) does not fit on " +
                           device_name + "; use BlasLtMLPFP16");
  return v;
}

bool vector_io(const TensorView& t) { return rows_aligned16_16bit(t); }

class Width64FusedMlp final : public MlpBase {
 public:
  Width64FusedMlp(MlpSpec spec, json hyperparams) : MlpBase(std::move(spec), std::move(hyperparams)) {
    if (spec_.input_width != 64 || spec_.n_neurons != 64 || spec_.n_hidden_layers != 2 ||
        spec_.padded_output_width != 64 || spec_.output_width != 64 || !spec_.biases ||
        spec_.activation != Activation::ReLU || spec_.output_activation != Activation::None ||
        n_params() != static_cast<size_t>(width64::kParams))
      throw UnsupportedError("internal: Width64FusedMLP built from a spec that is not 64 -> 64 x 2 -> 64 ReLU");
    // Without a device nothing can run; the first call reports that.
    if (gpu_count() > 0) prepare_device();
  }

  Device device() const override { return Device::CUDA; }
  DType param_dtype() const override { return DType::F16; }
  DType input_dtype() const override { return DType::F16; }
  DType output_dtype() const override { return DType::F16; }

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    params_ = static_cast<const __half*>(checked_param_view(params, "params", false));
    inference_params_ = static_cast<const __half*>(checked_param_view(inference_params, "inference_params", false));
    checked_param_view(gradients, "gradients", true);  // accepted for the Trainer's sake, never written
  }

  void inference(const TensorView& input, const TensorView& output) override {
    if (!inference_params_) throw Error(name() + ": no parameters set; call set_params() (or use a Trainer) first");
    check_matrix(input, "input", -1, 64, DType::F16, Device::CUDA);
    check_rows_dense(input, "input");
    check_matrix(output, "output", input.rows(), 64, DType::F16, Device::CUDA);
    check_rows_dense(output, "output");
    if (!prepared_) prepare_device();
    int current = -1;
    TF_GPU_CHECK(gpuGetDevice(&current));
    if (current != device_)
      throw UnsupportedError(name() + " was set up on GPU " + std::to_string(device_) + " but GPU " +
                             std::to_string(current) + " is current; build one network per device");
    const int64_t batch = input.rows();
    if (batch == 0) return;

    // Two rows of 16 per warp tile, unless that leaves warps without a second tile to overlap
    // with (small batches): then one, which spreads the batch over twice the warps.
    const int64_t tiles32 = (batch + kRowsPerTile<2> - 1) / kRowsPerTile<2>;
    const bool small = tiles32 < 2 * static_cast<int64_t>(sm_count_) * variants_[1][0].blocks_per_sm * kWarpsPerBlock;
    const int mt = small ? 1 : 2;
    const bool vec = vector_io(input) && vector_io(output);
    const Variant& v = variants_[mt - 1][vec ? 1 : 0];
    const int64_t rows_per_tile = small ? kRowsPerTile<1> : kRowsPerTile<2>;
    const int64_t tiles = (batch + rows_per_tile - 1) / rows_per_tile;
    const int64_t blocks = std::min<int64_t>((tiles + kWarpsPerBlock - 1) / kWarpsPerBlock,
                                             static_cast<int64_t>(v.blocks_per_sm) * sm_count_);

    v.launch(static_cast<unsigned>(blocks), static_cast<unsigned>(kWarpsPerBlock * warp_size_), stream_of(input), inference_params_, static_cast<const __half*>(input.data),
             input.strides[0], static_cast<__half*>(output.data), output.strides[0], batch);
  }

  std::unique_ptr<Context> forward(const TensorView&, const TensorView*, bool, bool) override {
    throw UnsupportedError(name() + " is inference-only: forward() (training) is not available; use inference(), or " +
                           kTrainWith);
  }

  void backward(const Context&, const TensorView&, const TensorView&, const TensorView&, const TensorView*, bool,
                GradientMode) override {
    throw UnsupportedError(name() + " is inference-only: backward() (training) is not available; " + kTrainWith);
  }

 private:
  // Checks the current device can run the kernel and sizes the persistent grid for it.
  void prepare_device() {
    TF_GPU_CHECK(gpuGetDevice(&device_));
    TF_GPU_CHECK(gpuDeviceGetAttribute(&sm_count_, gpuDevAttrMultiProcessorCount, device_));
    // The kernel's kWarpSize in its device pass (32 on NVIDIA; 32 or 64 by AMD target).
    TF_GPU_CHECK(gpuDeviceGetAttribute(&warp_size_, gpuDevAttrWarpSize, device_));
#if defined(TINYFUSE_WITH_HIP)
    const std::string arch = current_gfx_arch();
    const std::string device_name = "GPU " + std::to_string(device_) + " (" + arch + ")";
    if (!gfx_has_matrix_cores(arch))
      throw ConfigError("network.otype", "\"Width64FusedMLP\"",
                        std::string("Width64FusedMLP needs matrix cores with 16x16x16 WMMA / MFMA products (") +
                            kMatrixCoreTargets + "); " + device_name + " has none",
                        "PortableMLP");
#else
    int major = 0, minor = 0;
    TF_GPU_CHECK(gpuDeviceGetAttribute(&major, gpuDevAttrComputeCapabilityMajor, device_));
    TF_GPU_CHECK(gpuDeviceGetAttribute(&minor, gpuDevAttrComputeCapabilityMinor, device_));
    const std::string device_name = "GPU " + std::to_string(device_) + " (sm_" + std::to_string(major) +
                                    std::to_string(minor) + ")";
    if (major < 8)
      throw ConfigError("network.otype", "\"Width64FusedMLP\"",
                        "Width64FusedMLP needs compute capability 8.0 or newer (mma.sync m16n8k16, cp.async); " +
                            device_name + " is older",
                        "BlasLtMLPFP16 (the same parameter layout) or PortableMLP");
#endif
    variants_[0][0] = prepare_variant<1, false>(device_name, kWarpsPerBlock * warp_size_);
    variants_[0][1] = prepare_variant<1, true>(device_name, kWarpsPerBlock * warp_size_);
    variants_[1][0] = prepare_variant<2, false>(device_name, kWarpsPerBlock * warp_size_);
    variants_[1][1] = prepare_variant<2, true>(device_name, kWarpsPerBlock * warp_size_);
    prepared_ = true;
  }

  const __half* params_ = nullptr;
  const __half* inference_params_ = nullptr;
  bool prepared_ = false;
  int device_ = -1, sm_count_ = 0, warp_size_ = 32;
  Variant variants_[2][2];  // [rows of 16 per warp tile - 1][vector I/O]
};

}  // namespace

std::unique_ptr<Network> make_width64_fused_mlp(const MlpSpec& spec, json hyperparams) {
  return std::make_unique<Width64FusedMlp>(spec, std::move(hyperparams));
}

}  // namespace tinyfuse::cuda
