#include "cpu/mlp.h"

#include <cmath>
#include <new>
#include <vector>

#include "core/activation_math.h"
#include "core/host_memory.h"
#include "core/mlp_base.h"
#include "cpu/blas.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

constexpr int64_t kElementGrain = 16384;  // elements per parallel chunk of elementwise work

// A growable array whose new elements are left uninitialised: every element is written before
// it is read, and zero-filling tens of megabytes per batch costs more than the layer itself.
template <typename T>
class Scratch {
 public:
  void resize(size_t n) {
    if (n > capacity_) {
      try {
        data_.reset(new T[n]);
      } catch (const std::bad_alloc&) {
        throw OutOfMemoryError(n * sizeof(T), "MLP scratch memory", "the allocation failed");
      }
      capacity_ = n;
    }
    size_ = n;
  }
  size_t size() const { return size_; }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  T& operator[](size_t i) { return data_[i]; }
  void swap(Scratch& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

template <typename T>
struct MlpContext : Context {
  // Per layer: pre-activations z and activations y, each (batch, width(layer)), dense.
  std::vector<Scratch<T>> z, y;
};

template <typename T>
class Mlp final : public MlpWithParams<T> {
  using Base = MlpWithParams<T>;
  using typename Base::Layer;
  using Base::layers_, Base::spec_, Base::params_, Base::inference_params_, Base::gradients_, Base::layer_activation;

 public:
  using Base::Base;

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }

  void inference(const TensorView& input, const TensorView& output) override {
    check_io(input, &output);
    // Inference keeps no state, but reusing this thread's buffers avoids touching fresh pages
    // on every call (they grow to the largest batch seen on the thread).
    static thread_local MlpContext<T> ctx;
    run_forward(input, ctx, inference_params_);
    write_output(ctx, output);
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool /*prepare_input_gradients*/) override {
    check_io(input, output);
    auto ctx = std::make_unique<MlpContext<T>>();
    run_forward(input, *ctx, use_inference_params ? inference_params_ : params_);
    if (output) write_output(*ctx, *output);
    return ctx;
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& /*output*/,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const auto* ctx = dynamic_cast<const MlpContext<T>*>(&base_ctx);
    if (!ctx) throw Error(this->name() + "::backward: context does not come from this network's forward()");
    this->check_backward(input, dL_doutput, dL_dinput, mode, [&](int64_t batch) {
      return ctx->z.size() == layers_.size() && (batch == 0 || ctx->z[0].size() == static_cast<size_t>(batch) * layers_[0].out);
    });
    const int64_t batch = input.rows();
    const T* weights = this->weights_for(use_inference_params);
    const T beta = mode == GradientMode::Accumulate ? T(1) : T(0);
    std::vector<T> ones(static_cast<size_t>(batch), T(1));  // bias gradient = dZ^T 1

    // dy of the current layer: starts as dL/doutput (strided), then dense buffers.
    Scratch<T> dz, dx, dy_buf;
    const T* dy = dL_doutput.ptr<T>();
    int64_t ldy = dL_doutput.strides[0];
    for (size_t li = layers_.size(); li-- > 0;) {
      const Layer& l = layers_[li];
      const Activation act = layer_activation(li);
      dz.resize(static_cast<size_t>(batch) * l.out);
      const T* z = ctx->z[li].data();
      parallel_for(batch, rows_per_chunk(l.out), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t o = 0; o < l.out; ++o)
            dz[b * l.out + o] = dy[b * ldy + o] * activate_derivative(act, z[b * l.out + o]);
      });
      const T* x_prev = li == 0 ? input.ptr<T>() : ctx->y[li - 1].data();
      const int64_t ldx = li == 0 ? input.strides[0] : l.in;
      if (mode != GradientMode::Ignore) {
        if (batch > 0) {
          gemm(true, false, l.out, l.in, batch, T(1), dz.data(), l.out, x_prev, ldx, beta, gradients_ + l.weight_offset, l.in);
          if (spec_.biases)
            gemm(true, false, l.out, 1, batch, T(1), dz.data(), l.out, ones.data(), 1, beta, gradients_ + l.bias_offset, 1);
        } else if (mode == GradientMode::Overwrite) {
          std::fill(gradients_ + l.weight_offset, gradients_ + l.weight_offset + static_cast<size_t>(l.out) * l.in, T(0));
          if (spec_.biases) std::fill(gradients_ + l.bias_offset, gradients_ + l.bias_offset + l.out, T(0));
        }
      }
      if (li > 0) {
        dx.resize(static_cast<size_t>(batch) * l.in);
        gemm(false, false, batch, l.in, l.out, T(1), dz.data(), l.out, weights + l.weight_offset, l.in, T(0), dx.data(), l.in);
        dy_buf.swap(dx);  // dL/dy of layer li-1; dx's old storage is reused next time
        dy = dy_buf.data();
        ldy = l.in;
      } else if (dL_dinput) {
        gemm(false, false, batch, l.in, l.out, T(1), dz.data(), l.out, weights + l.weight_offset, l.in, T(0),
             dL_dinput->ptr<T>(), dL_dinput->strides[0]);
      }
    }
  }

 private:
  static int64_t rows_per_chunk(uint32_t width) { return std::max<int64_t>(1, kElementGrain / std::max<uint32_t>(width, 1)); }

  void check_io(const TensorView& input, const TensorView* output) const override {
    Base::check_io(input, output);
    // A batch whose scratch memory cannot fit is refused before anything is allocated or computed:
    // forward keeps z and y of every layer; backward needs three layer-wide buffers and a column.
    int64_t forward_per_row = 0, widest = 0;
    for (const Layer& l : layers_) forward_per_row += 2 * int64_t{l.out}, widest = std::max<int64_t>(widest, l.out);
    const int64_t per_row = std::max(forward_per_row, 3 * widest + 1);
    checked_bytes({input.rows(), per_row, int64_t{sizeof(T)}}, this->name() + " activations of a batch of " + std::to_string(input.rows()));
  }

  void run_forward(const TensorView& input, MlpContext<T>& ctx, const T* weights) const {
    const int64_t batch = input.rows();
    ctx.z.resize(layers_.size());
    ctx.y.resize(layers_.size());
    const T* x = input.ptr<T>();
    int64_t ldx = input.strides[0];
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& l = layers_[li];
      const Activation act = layer_activation(li);
      auto& z = ctx.z[li];
      auto& y = ctx.y[li];
      z.resize(static_cast<size_t>(batch) * l.out);
      y.resize(z.size());
      gemm(false, true, batch, l.out, l.in, T(1), x, ldx, weights + l.weight_offset, l.in, T(0), z.data(), l.out);
      const T* bias = spec_.biases ? weights + l.bias_offset : nullptr;
      parallel_for(batch, rows_per_chunk(l.out), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t o = 0; o < l.out; ++o) {
            T& zz = z[b * l.out + o];
            if (bias) zz += bias[o];
            y[b * l.out + o] = activate(act, zz);
          }
      });
      x = y.data();
      ldx = l.out;
    }
  }

  void write_output(const MlpContext<T>& ctx, const TensorView& output) const {
    const T* y = ctx.y.back().data();
    const uint32_t w = this->padded_output_width();
    T* out = output.ptr<T>();
    const int64_t ld = output.strides[0];
    parallel_for(output.rows(), rows_per_chunk(w), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) std::copy(y + b * w, y + (b + 1) * w, out + b * ld);
    });
  }

};

}  // namespace

template <typename T>
std::unique_ptr<Network> make_mlp(const MlpSpec& spec, json hyperparams) {
  return std::make_unique<Mlp<T>>(spec, std::move(hyperparams));
}

template std::unique_ptr<Network> make_mlp<float>(const MlpSpec&, json);
template std::unique_ptr<Network> make_mlp<double>(const MlpSpec&, json);

}  // namespace tinyfuse::cpu
