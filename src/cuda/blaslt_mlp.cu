// BlasLtMLP (FP32 operands, FP32 accumulation) and BlasLtMLPFP16 (FP16 parameters, inputs,
// outputs, activations and gradients; FP32 accumulation in every product and reduction): one
// cuBLASLt (hipBLASLt) matrix product per layer and direction, with the same parameter layout,
// semantics and checks as the CPU PortableMLP (src/cpu/mlp.cpp).
//
// Row-major <-> column-major. Tensors are row-major (batch, features); BLAS-Lt is column-major.
// A row-major r x c matrix with row stride ld has exactly the bytes of the column-major c x r
// matrix (its transpose) with leading dimension ld, so every operand is handed over as its
// transpose and no data moves:
//   X, Y, Z, dY, dZ  (batch x width, row stride ld)  ->  column-major (width x batch), ld
//   W                (out x in, row-major, ld in)    ->  column-major W^T (in x out), ld in
// and each product is rewritten as the product of transposes:
//   forward  Z  = X W^T + b   <=>  Z^T  (out x batch) = op_T(W^T) * X^T       + b 1^T
//            m = out, n = batch, k = in;  A = W^T stored (in x out, ld in) with op T,
//            B = X^T (in x batch, ld ldx) with op N; the bias has m = out entries, one per output
//            feature, which is exactly cuBLASLt's bias (one per row of D, broadcast over columns).
//   dW       dW = dZ^T X      <=>  dW^T (in x out, ld in) = X^T * op_T(dZ^T)
//            m = in, n = out, k = batch;  A = X^T (ld ldx) op N, B = dZ^T (out x batch, ld ldz) op T;
//            beta 0 (Overwrite) or 1 (Accumulate) with C = D = the gradient buffer.
//   dX       dX = dZ W        <=>  dX^T (in x batch, ld ldx') = W^T * dZ^T
//            m = in, n = batch, k = out;  A = W^T (in x out, ld in) op N, B = dZ^T (ld ldz) op N.
// W^T "stored (in x out), ld in" is precisely the row-major W of the parameter buffer.
//
// Epilogues. Hidden ReLU layers use RELU_BIAS (D = max(W x + b, 0)); every other layer uses
// BIAS and, unless its activation is None, an elementwise kernel y = act(z). The ReLU mask in
// backward comes from y (y > 0 exactly where z > 0), so no aux bitmask is needed; other
// activations keep z. If the library cannot fuse the bias (less than 16-byte aligned bias, e.g.
// odd fan-in * fan-out; or no algorithm), a kernel broadcasts the bias into D and the product
// runs plain with beta = 1 (D = W x + b, rounded once as in the epilogue), then ReLU if needed.
// Backward uses plain products (DEFAULT epilogue): dZ = dY * act'(z) is one elementwise kernel,
// and the bias gradient a deterministic two-pass column sum of our own (no atomics), so no
// result depends on the library's BGRAD/DRELU reductions.
//
// Determinism. Every product runs the algorithm cached for its exact problem (shape, lds,
// alignments, epilogue; see blaslt_plan.h) with a caller-owned workspace, which cuBLAS documents
// as bitwise reproducible run to run; the elementwise kernels compute each element from fixed
// inputs; the bias-gradient reduction splits the batch into chunks that depend only on the batch
// size and adds in a fixed order. Inference and forward run the same products (same plans) on
// equally aligned scratch, so they are expected to agree bitwise too (not asserted by the tests).
//
// Memory. forward() keeps, per layer, y (hidden ReLU), z (None and the output layer) or z and y
// (other hidden activations) in one stream-ordered allocation owned by the context; inference()
// and backward() take their scratch (two batch x max-width matrices, plus the bias-gradient
// partial sums) from the stream-ordered pool per call, as does each product's workspace. All work
// is queued on stream_of(input); nothing synchronises the host.
#include "cuda/blaslt_mlp.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/activation_math.h"
#include "cuda/blaslt_plan.h"
#include "cuda/common.cuh"
#include "cuda/gpu_mlp.h"
#include "cuda/staging.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda {

namespace {

constexpr unsigned kMaxBlocks = 1u << 16;  // elementwise kernels loop over the rest
// Bias-gradient reduction: the batch is cut into chunks of at least this many rows (and at most
// kMaxBgradChunks chunks); each chunk is summed by one block, then chunks are added in order.
constexpr int64_t kBgradMinChunkRows = 512;
constexpr int64_t kMaxBgradChunks = 8192;
constexpr int kBgradColumns = 32, kBgradLanes = 8;  // block shape of the first pass
// Batch used to ask the library at construction whether it can run every layer.
constexpr int64_t kProbeBatch = 256;

unsigned elementwise_blocks(int64_t n) { return std::min<unsigned>(blocks_for(n), kMaxBlocks); }

// y = act(z) with z = src (+ bias): z written to z_out and y to y_out when given. src may be
// z_out or y_out (in place): each element is read before it is written, by the same thread.
template <typename T>
__global__ void bias_activation_kernel(int64_t rows, int64_t cols, const T* src, int64_t ld_src, const T* bias,
                                       T* z_out, int64_t ld_z, T* y_out, int64_t ld_y, Activation act) {
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    float v = to_float(src[r * ld_src + c]);
    if (bias) v += to_float(bias[c]);
    const T z = from_float<T>(v);
    if (z_out) z_out[r * ld_z + c] = z;
    if (y_out) y_out[r * ld_y + c] = from_float<T>(activate(act, to_float(z)));
  }
}

// dz = dy * act'(src), where src is z (or y for ReLU, whose derivative y > 0 equals z > 0).
// dz may be dy (in place).
template <typename T>
__global__ void activation_backward_kernel(int64_t rows, int64_t cols, const T* dy, int64_t ld_dy, const T* src,
                                           int64_t ld_src, T* dz, int64_t ld_dz, Activation act) {
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const float g = to_float(dy[r * ld_dy + c]) * activate_derivative(act, to_float(src[r * ld_src + c]));
    dz[r * ld_dz + c] = from_float<T>(g);
  }
}

// First pass of the bias gradient: partial[chunk][c] = sum of dz[r][c] over the chunk's rows.
// Lane t of a column adds rows t, t + 8, ... of the chunk in order; lanes are then added in order.
template <typename T>
__global__ void column_sum_partial_kernel(int64_t rows, int64_t cols, const T* dz, int64_t ld, int64_t chunk_rows,
                                          float* partial) {
  __shared__ float lane_sums[kBgradLanes][kBgradColumns];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kBgradColumns + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r1 = std::min(rows, r0 + chunk_rows);
  float s = 0.0f;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kBgradLanes) s += to_float(dz[r * ld + c]);
  lane_sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int t = 0; t < kBgradLanes; ++t) total += lane_sums[t][threadIdx.x];
    partial[static_cast<int64_t>(blockIdx.y) * cols + c] = total;
  }
}

// Second pass: db[c] (+)= sum over chunks of partial[chunk][c], in chunk order.
template <typename T>
__global__ void column_sum_final_kernel(int64_t cols, int64_t chunks, const float* partial, T* db, bool accumulate) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int64_t j = 0; j < chunks; ++j) s += partial[j * cols + c];
  db[c] = from_float<T>(accumulate ? to_float(db[c]) + s : s);
}

// How the bias-gradient reduction cuts a batch: a function of the batch size alone.
struct BgradSplit {
  int64_t chunk_rows, chunks;
};
BgradSplit bgrad_split(int64_t batch) {
  int64_t chunk = std::max(kBgradMinChunkRows, (batch + kMaxBgradChunks - 1) / kMaxBgradChunks);
  chunk = (chunk + kBgradLanes - 1) / kBgradLanes * kBgradLanes;
  return {chunk, std::max<int64_t>(1, (batch + chunk - 1) / chunk)};
}

template <typename T>
struct BlasLtContext final : Context {
  Buffer arena;  // every kept matrix, stream-ordered on the forward's stream
  int64_t batch = 0;
  // Per layer: what the activation derivative reads (z, or y after a fused ReLU), dense (batch x
  // width), and the activation feeding the next layer (unused for the output layer).
  std::vector<const T*> deriv, act_out;
};

template <typename T>
class BlasLtMlp final : public OnePassGpuMlp<T, BlasLtContext<T>> {
  using Base = OnePassGpuMlp<T, BlasLtContext<T>>;
  using typename Base::Layer;
  using Base::layers_, Base::spec_, Base::n_params_, Base::gradients_, Base::layer_activation, Base::name;

 public:
  BlasLtMlp(MlpSpec spec, json hyperparams) : Base(std::move(spec), std::move(hyperparams)) {
    if (!spec_.biases || spec_.padded_output_width != spec_.output_width)
      throw UnsupportedError("internal: " + spec_.otype + " has biases and an unpadded output");
    for (const auto& l : layers_) max_width_ = std::max(max_width_, l.out);
    check_library_supports_widths();
  }

  // Second derivatives: an FP32 forward recomputed from these parameters, then the shared sweeps
  // (mlp_second_order.h); this network's forward state is FP16 or fused, so it is not reused.
  void backward_backward_input(const Context& ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    this->template recomputed_backward_backward_input<BlasLtContext<T>>(ctx, input, dL_ddLdinput, dL_doutput,
                                                          dL_ddLdoutput, dL_dinput, use_inference_params, mode);
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& /*output*/,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const auto* ctx = dynamic_cast<const BlasLtContext<T>*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward: context does not come from this network's forward()");
    this->check_backward(input, dL_doutput, dL_dinput, mode,
                         [&](int64_t batch) { return ctx->batch == batch && ctx->deriv.size() == layers_.size(); });
    const int64_t batch = input.rows();
    const gpuStream_t s = stream_of(input);
    if (batch == 0) {
      if (mode == GradientMode::Overwrite) TF_GPU_CHECK(gpuMemsetAsync(gradients_, 0, n_params_ * sizeof(T), s));
      return;
    }
    const T* weights = this->weights_for(use_inference_params);
    const bool accumulate = mode == GradientMode::Accumulate;

    // Scratch: two (batch x max width) matrices used in turn for dZ / dY, and the partial sums.
    const size_t mat_bytes = scratch_bytes(static_cast<size_t>(batch) * max_width_ * sizeof(T));
    const BgradSplit split = bgrad_split(batch);
    const size_t partial_bytes = mode == GradientMode::Ignore ? 0 : scratch_bytes(split.chunks * max_width_ * sizeof(float));
    Buffer scratch = Buffer::on_stream(Device::CUDA, 2 * mat_bytes + partial_bytes, input.stream);
    char* base = static_cast<char*>(scratch.data());
    T* buf[2] = {reinterpret_cast<T*>(base), reinterpret_cast<T*>(base + mat_bytes)};
    float* partial = reinterpret_cast<float*>(base + 2 * mat_bytes);

    const T* dy = static_cast<const T*>(dL_doutput.data);  // dL/dy of the current layer
    int64_t ldy = dL_doutput.strides[0];
    int dy_buf = -1;  // which scratch matrix holds dy (-1: dL_doutput)
    for (size_t li = layers_.size(); li-- > 0;) {
      const Layer& l = layers_[li];
      const Activation act = layer_activation(li);
      // dZ: dY itself for None, else computed in place over dY's scratch (or into scratch 0).
      const T* dz = dy;
      int64_t ldz = ldy;
      int dz_buf = dy_buf;
      if (act != Activation::None) {
        dz_buf = dy_buf < 0 ? 0 : dy_buf;
        T* out = buf[dz_buf];
        const int64_t n = batch * l.out;
        activation_backward_kernel<T><<<elementwise_blocks(n), kThreadsPerBlock, 0, s>>>(
            batch, l.out, dy, ldy, ctx->deriv[li], l.out, out, l.out, act);
        TF_GPU_CHECK_LAUNCH("activation_backward_kernel");
        dz = out;
        ldz = l.out;
      }
      const T* x = li == 0 ? static_cast<const T*>(input.data) : ctx->act_out[li - 1];
      const int64_t ldx = li == 0 ? input.strides[0] : layers_[li - 1].out;
      if (mode != GradientMode::Ignore) {
        BlasLtMatmul dw;  // dW^T (in x out) = X^T * op_T(dZ^T)
        dw.dtype = kDType;
        dw.trans_a = false;
        dw.trans_b = true;
        dw.m = l.in;
        dw.n = l.out;
        dw.k = batch;
        dw.a = x;
        dw.lda = ldx;
        dw.b = dz;
        dw.ldb = ldz;
        dw.d = gradients_ + l.weight_offset;
        dw.ldd = l.in;
        dw.beta = accumulate ? 1.0f : 0.0f;
        run_blaslt_matmul(dw, s);
        bias_gradient(dz, ldz, batch, l.out, split, partial, gradients_ + l.bias_offset, accumulate, s);
      }
      if (li > 0 || dL_dinput) {
        BlasLtMatmul dx;  // dX^T (in x batch) = W^T * dZ^T
        dx.dtype = kDType;
        dx.trans_a = false;
        dx.trans_b = false;
        dx.m = l.in;
        dx.n = batch;
        dx.k = l.out;
        dx.a = weights + l.weight_offset;
        dx.lda = l.in;
        dx.b = dz;
        dx.ldb = ldz;
        const int next = dz_buf == 0 ? 1 : 0;
        dx.d = li > 0 ? buf[next] : static_cast<T*>(dL_dinput->data);
        dx.ldd = li > 0 ? static_cast<int64_t>(l.in) : dL_dinput->strides[0];
        dx.beta = 0.0f;
        run_blaslt_matmul(dx, s);
        dy = buf[next];
        ldy = l.in;
        dy_buf = next;
      }
    }
  }

 private:
  static constexpr DType kDType = gpu_dtype_of<T>::value;

  // Rejects at construction any layer width the library cannot multiply (with dense operands on
  // cudaMalloc-aligned memory), naming the config key and what works. Needs a device to ask;
  // without one nothing can run anyway and the first call reports that.
  void check_library_supports_widths() const {
    if (gpu_count() == 0) return;
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& l = layers_[li];
      const bool ok = blaslt_matmul_supported(kDType, true, false, l.out, kProbeBatch, l.in, l.in, l.in, l.out) &&
                      blaslt_matmul_supported(kDType, false, true, l.in, l.out, kProbeBatch, l.in, l.out, l.in) &&
                      blaslt_matmul_supported(kDType, false, false, l.in, kProbeBatch, l.out, l.in, l.out, l.in);
      if (ok) continue;
      // Name the width that is most likely at fault: the hidden width, else the input/output width.
      std::string key = "network.n_neurons";
      uint32_t value = spec_.n_neurons;
      if (li == 0 && (spec_.n_hidden_layers == 0 || spec_.input_width % 8 != 0)) {
        key = "network.n_input_dims";
        value = spec_.input_width;
      } else if (li + 1 == layers_.size() && spec_.padded_output_width % 8 != 0) {
        key = "network.n_output_dims";
        value = spec_.padded_output_width;
      }
      const unsigned multiple = static_cast<unsigned>(16 / dtype_size(kDType));
      throw ConfigError(key, std::to_string(value),
                        spec_.otype + ": cuBLASLt has no " + to_string(kDType) + " algorithm on this device for layer " +
                            std::to_string(li) + " (" + std::to_string(l.in) + " -> " + std::to_string(l.out) + ")",
                        "widths that are multiples of " + std::to_string(multiple) + " (16 bytes of " +
                            to_string(kDType) + "), or PortableMLP for any width");
    }
  }

  void launch_bias_activation(int64_t rows, int64_t cols, const T* src, int64_t ld_src, const T* bias, T* z_out,
                              int64_t ld_z, T* y_out, int64_t ld_y, Activation act, gpuStream_t s) const {
    const int64_t n = rows * cols;
    if (n == 0) return;
    bias_activation_kernel<T><<<elementwise_blocks(n), kThreadsPerBlock, 0, s>>>(rows, cols, src, ld_src, bias, z_out,
                                                                                   ld_z, y_out, ld_y, act);
    TF_GPU_CHECK_LAUNCH("bias_activation_kernel");
  }

  void bias_gradient(const T* dz, int64_t ldz, int64_t batch, uint32_t cols, const BgradSplit& split, float* partial,
                     T* db, bool accumulate, gpuStream_t s) const {
    const dim3 grid((cols + kBgradColumns - 1) / kBgradColumns, static_cast<unsigned>(split.chunks));
    column_sum_partial_kernel<T><<<grid, dim3(kBgradColumns, kBgradLanes), 0, s>>>(batch, cols, dz, ldz,
                                                                                 split.chunk_rows, partial);
    TF_GPU_CHECK_LAUNCH("column_sum_partial_kernel");
    column_sum_final_kernel<T><<<blocks_for(cols), kThreadsPerBlock, 0, s>>>(cols, split.chunks, partial, db, accumulate);
    TF_GPU_CHECK_LAUNCH("column_sum_final_kernel");
  }

  // Forward through every layer. With `keep`, the matrices backward() needs are kept in the
  // context; without, two scratch matrices are used in turn (inference). `output` may be null.
  void run_forward(const TensorView& input, const T* weights, BlasLtContext<T>* keep,
                   const TensorView* output) const override {
    const int64_t batch = input.rows();
    const size_t n_layers = layers_.size();
    const gpuStream_t s = stream_of(input);
    std::vector<T*> z(n_layers), y(n_layers);  // y[l] == z[l] where the activation is in place
    Buffer scratch;
    auto separate_y = [&](size_t li) {
      return li + 1 < n_layers && spec_.activation != Activation::ReLU && spec_.activation != Activation::None;
    };
    if (keep) {
      keep->batch = batch;
      std::vector<size_t> z_off(n_layers), y_off(n_layers);
      size_t bytes = 0;
      for (size_t li = 0; li < n_layers; ++li) {
        const size_t mat = scratch_bytes(static_cast<size_t>(batch) * layers_[li].out * sizeof(T));
        z_off[li] = bytes;
        bytes += mat;
        y_off[li] = z_off[li];
        if (separate_y(li)) {
          y_off[li] = bytes;
          bytes += mat;
        }
      }
      keep->arena = Buffer::on_stream(Device::CUDA, bytes, input.stream);
      char* base = static_cast<char*>(keep->arena.data());
      keep->deriv.resize(n_layers);
      keep->act_out.resize(n_layers);
      for (size_t li = 0; li < n_layers; ++li) {
        z[li] = reinterpret_cast<T*>(base + z_off[li]);
        y[li] = reinterpret_cast<T*>(base + y_off[li]);
        keep->deriv[li] = z[li];  // for hidden ReLU z[li] == y[li] holds y
        keep->act_out[li] = y[li];
      }
    } else {
      const size_t mat = scratch_bytes(static_cast<size_t>(batch) * max_width_ * sizeof(T));
      scratch = Buffer::on_stream(Device::CUDA, 2 * mat, input.stream);
      char* base = static_cast<char*>(scratch.data());
      for (size_t li = 0; li < n_layers; ++li) z[li] = y[li] = reinterpret_cast<T*>(base + (li % 2) * mat);
    }
    if (batch == 0) return;

    const T* x = static_cast<const T*>(input.data);
    int64_t ldx = input.strides[0];
    for (size_t li = 0; li < n_layers; ++li) {
      const Layer& l = layers_[li];
      const bool last = li + 1 == n_layers;
      const Activation act = last ? spec_.output_activation : spec_.activation;
      const T* bias = weights + l.bias_offset;
      BlasLtMatmul mm;  // Z^T (out x batch) = op_T(W^T) * X^T + b
      mm.dtype = kDType;
      mm.trans_a = true;
      mm.trans_b = false;
      mm.m = l.out;
      mm.n = batch;
      mm.k = l.in;
      mm.a = weights + l.weight_offset;
      mm.lda = l.in;
      mm.b = x;
      mm.ldb = ldx;
      // The output layer without an activation writes straight into the caller's output: no
      // extra pass over it (its z is not needed by backward, whose derivative for None is 1).
      const bool direct_out = last && output && act == Activation::None;
      mm.d = direct_out ? static_cast<T*>(output->data) : z[li];
      mm.ldd = direct_out ? output->strides[0] : l.out;
      mm.epilogue = !last && act == Activation::ReLU ? BlasLtEpilogue::ReluBias : BlasLtEpilogue::Bias;
      mm.bias = bias;
      const int64_t w = l.out;
      const bool fused = run_blaslt_matmul(mm, s);
      if (!fused) {
        // The bias broadcast into D, then D = W x + 1 * D: the sum is rounded to T once, exactly
        // as the fused epilogue rounds it (adding the bias to an already rounded product would
        // round twice, which in FP16 moves values near 0 to the other side of a ReLU).
        launch_bias_activation(batch, w, bias, 0, nullptr, static_cast<T*>(mm.d), mm.ldd, nullptr, 0, Activation::None, s);
        mm.epilogue = BlasLtEpilogue::None;
        mm.bias = nullptr;
        mm.beta = 1.0f;
        run_blaslt_matmul(mm, s);
      }
      if (!last) {
        if (act == Activation::ReLU) {
          // Fused: D already holds y = max(z, 0). Unfused: y = max(z, 0) in place.
          if (!fused) launch_bias_activation(batch, w, z[li], w, nullptr, nullptr, 0, z[li], w, act, s);
        } else if (act != Activation::None) {
          // z kept, y = act(z) beside it (in place for inference, where z == y).
          launch_bias_activation(batch, w, z[li], w, nullptr, nullptr, 0, y[li], w, act, s);
        }
        x = y[li];
        ldx = w;
      } else if (output && !direct_out) {
        // Output layer with an activation: z stays in scratch / the context; the output gets act(z).
        launch_bias_activation(batch, w, z[li], w, nullptr, nullptr, 0, static_cast<T*>(output->data),
                               output->strides[0], act, s);
      }
    }
  }

  uint32_t max_width_ = 0;
};

}  // namespace

std::unique_ptr<Network> make_blaslt_mlp(const MlpSpec& spec, json hyperparams, DType precision) {
  if (precision == DType::F32) return std::make_unique<BlasLtMlp<float>>(spec, std::move(hyperparams));
  if (precision == DType::F16) return std::make_unique<BlasLtMlp<__half>>(spec, std::move(hyperparams));
  throw UnsupportedError("BlasLtMLP: precision must be f32 (BlasLtMLP) or f16 (BlasLtMLPFP16), got " +
                         to_string(precision));
}

}  // namespace tinyfuse::cuda
