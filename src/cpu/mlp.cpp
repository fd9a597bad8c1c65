#include "cpu/mlp.h"

#include <cmath>
#include <new>
#include <type_traits>
#include <vector>

#include "core/activation_math.h"
#include "core/host_memory.h"
#include "core/host_scratch.h"
#include "core/mlp_base.h"
#include "cpu/blas.h"
#include "cpu/elementwise.h"
#include "cpu/losses.h"
#include "cpu/parallel.h"
#include "cpu/tiles/row_tiles.h"

namespace tinyfuse::cpu {

namespace {

constexpr int64_t kElementGrain = 16384;  // elements per parallel chunk of elementwise work

// A growable array whose new elements are left uninitialised: every element is written before
// it is read, and zero-filling tens of megabytes per batch costs more than the layer itself. Its
// memory comes from the host scratch cache, so the buffers of one step are those of the last.
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&& o) noexcept { swap(o); }
  Scratch& operator=(Scratch&& o) noexcept {
    swap(o);
    return *this;
  }
  ~Scratch() { host_scratch_free(data_); }

  void resize(size_t n) {
    if (n > capacity_) {
      host_scratch_free(data_);
      data_ = nullptr;
      capacity_ = 0;
      data_ = static_cast<T*>(host_scratch_alloc(checked_bytes({static_cast<int64_t>(n), int64_t{sizeof(T)}}, "MLP scratch memory"),
                                                 "MLP scratch memory"));
      capacity_ = n;
    }
    size_ = n;
  }
  size_t size() const { return size_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  void swap(Scratch& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

// A column of n ones (the bias gradient is dZ^T 1).
template <typename T>
void fill_ones(Scratch<T>& ones, int64_t n) {
  ones.resize(static_cast<size_t>(n));
  std::fill(ones.data(), ones.data() + n, T(1));
}

// What a forward keeps for the passes after it. backward() and backward_backward_input() read it
// only through layer_input() and preactivation() below: layer l's input (the network input for
// l = 0, else y of layer l-1) and its pre-activation z, from which act'(z) and act''(z) come. An
// engine that keeps less (y alone where act' can be had from it, say) changes those two
// functions and whatever they need, and both passes keep working.
template <typename T>
struct MlpContext : Context {
  // Per layer: pre-activations z and activations y, each (batch, width(layer)), dense.
  std::vector<Scratch<T>> z, y;
};

// Layer li's input rows and their leading dimension.
template <typename T>
std::pair<const T*, int64_t> layer_input(const MlpContext<T>& ctx, const TensorView& input, size_t li,
                                         uint32_t layer_in) {
  if (li == 0) return {input.ptr<T>(), input.strides[0]};
  return {ctx.y[li - 1].data(), layer_in};
}

// Layer li's pre-activations, (batch, width(li)) dense.
template <typename T>
const T* preactivation(const MlpContext<T>& ctx, size_t li) {
  return ctx.z[li].data();
}

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
    if (const TileGemm* kernels = row_tile_kernels()) {
      if constexpr (std::is_same_v<T, float>) {
        tiled_forward(*kernels, tiled_layers(inference_params_), input.ptr<float>(), input.strides[0], input.rows(),
                      nullptr, output.ptr<float>(), output.strides[0]);
        return;
      }
    }
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
    const auto* ctx = context_of(base_ctx, "backward");
    this->check_backward(input, dL_doutput, dL_dinput, mode, [&](int64_t batch) { return same_batch(*ctx, batch); });
    const int64_t batch = input.rows();
    const T* weights = this->weights_for(use_inference_params);
    if (const TileGemm* kernels = row_tile_kernels()) {
      if constexpr (std::is_same_v<T, float>) {
        tiled_backward(*kernels, tiled_layers(weights), input.ptr<float>(), input.strides[0], batch, kept_rows(*ctx),
                       dL_doutput.ptr<float>(), dL_doutput.strides[0],
                       mode == GradientMode::Ignore ? nullptr : gradients_, this->n_params(),
                       mode == GradientMode::Accumulate, dL_dinput ? dL_dinput->ptr<float>() : nullptr,
                       dL_dinput ? dL_dinput->strides[0] : 0);
        return;
      }
    }
    const T beta = mode == GradientMode::Accumulate ? T(1) : T(0);
    Scratch<T> ones;
    if (spec_.biases && mode != GradientMode::Ignore) fill_ones(ones, batch);

    // dy of the current layer: starts as dL/doutput (strided), then dense buffers.
    Scratch<T> dz, dx, dy_buf;
    const T* dy = dL_doutput.ptr<T>();
    int64_t ldy = dL_doutput.strides[0];
    for (size_t li = layers_.size(); li-- > 0;) {
      const Layer& l = layers_[li];
      const Activation act = layer_activation(li);
      dz.resize(static_cast<size_t>(batch) * l.out);
      const T* z = preactivation(*ctx, li);
      parallel_for(batch, rows_per_chunk(l.out), [&](int64_t b0, int64_t b1) {
        activation_backward(act, dy, ldy, z, dz.data(), b0, b1, l.out);
      });
      const auto [x_prev, ldx] = layer_input(*ctx, input, li, l.in);
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

  // The Trainer's pass: on the row-tile engine, forward, loss and backward a tile at a time (the
  // output and loss gradients, scratch to the Trainer, are not written out); else the two calls
  // (also where dL/dinput is asked for, which the tiled pass does not form).
  void forward_backward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss, float loss_scale,
                                  const TensorView& target, const TensorView& values, const TensorView& gradients,
                                  const TensorView* data_pdf, GradientMode mode, const TensorView* dL_dinput) override {
    const TileGemm* kernels = row_tile_kernels();
    if (!kernels || mode == GradientMode::Ignore || !is_cpu_fp32_loss(loss) || dL_dinput)
      return Base::forward_backward_with_loss(input, output, loss, loss_scale, target, values, gradients, data_pdf,
                                              mode, dL_dinput);
    if constexpr (std::is_same_v<T, float>) {
      check_io(input, &output);
      check_loss_views(loss, output, target, values, gradients, data_pdf);
      const int64_t batch = input.rows();
      const int64_t width = this->padded_output_width();
      tiled_training_pass(
          *kernels, tiled_layers(params_), input.ptr<float>(), input.strides[0], batch,
          [&](int64_t r0, int64_t rows, const float* prediction, float* dprediction) {
            evaluate_loss_rows(loss, loss_scale, batch, r0, rows, prediction, dprediction, width, target, values,
                               data_pdf);
          },
          gradients_, this->n_params(), mode == GradientMode::Accumulate);
    }
  }

  // The adjoint of backward(): backward() maps (dL/doutput g, input, params) to dL/dinput
  // through, per layer from the top, dz = dy * act'(z), dy_prev = dz W (dy = g at the top,
  // dL/dinput = dy of the input). Given v = dL2/d(dL/dinput), three sweeps:
  //  1. backward() again for every layer's dz and, where act'' is not 0, c = dy * act''(z);
  //  2. from the input up, the adjoints of that backward: a_in = v, then per layer
  //     bdz = a_in W^T, bz = bdz * c (the adjoint reaching z through act'), a_out = bdz * act'(z);
  //     dL2/dW += dz^T a_in; a_out of the top layer is dL2/dg;
  //  3. bz through the forward pass, from the top down as backward() does (with bz added to
  //     each layer's dz): dL2/dW += dZ^T x, dL2/db = dZ^T 1, and the input's share is dL2/dinput.
  // With piecewise-linear activations every c is 0 and sweep 3 contributes nothing (ReLU's
  // dL/dinput is linear in the weights between kinks; its dependence on the weights and on g
  // still flows through sweep 2).
  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const auto* ctx = context_of(base_ctx, "backward_backward_input");
    this->check_backward_backward(input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode,
                                  [&](int64_t batch) { return same_batch(*ctx, batch); });
    const int64_t batch = input.rows();
    // dz of every layer, c of the curved ones, and three layer-wide buffers.
    int64_t per_row = 0, widest = 0;
    for (size_t li = 0; li < layers_.size(); ++li) {
      const int64_t out = layers_[li].out;
      per_row += activation_is_piecewise_linear(layer_activation(li)) ? out : 2 * out;
      widest = std::max<int64_t>(widest, std::max<int64_t>(out, layers_[li].in));
    }
    checked_bytes({batch, per_row + 3 * widest + 1, int64_t{sizeof(T)}},
                  this->name() + " second-order activations of a batch of " + std::to_string(batch));

    const bool write_params = mode != GradientMode::Ignore;
    const T beta = mode == GradientMode::Accumulate ? T(1) : T(0);
    if (batch == 0) {
      if (mode == GradientMode::Overwrite) std::fill(gradients_, gradients_ + this->n_params(), T(0));
      return;
    }
    const T* weights = this->weights_for(use_inference_params);
    const size_t n_layers = layers_.size();
    auto curved = [&](size_t li) { return !activation_is_piecewise_linear(layer_activation(li)); };
    auto rows = [&](uint32_t width, auto&& body) {
      parallel_for(batch, rows_per_chunk(width), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) body(b);
      });
    };

    // Sweep 1: backward()'s dz per layer, and c where act'' is not 0.
    std::vector<Scratch<T>> dz(n_layers), c(n_layers);
    {
      Scratch<T> dy_buf;
      const T* dy = dL_doutput.ptr<T>();
      int64_t ldy = dL_doutput.strides[0];
      for (size_t li = n_layers; li-- > 0;) {
        const Layer& l = layers_[li];
        const Activation act = layer_activation(li);
        const T* z = preactivation(*ctx, li);
        dz[li].resize(static_cast<size_t>(batch) * l.out);
        if (curved(li)) c[li].resize(dz[li].size());
        T* dzl = dz[li].data();
        T* cl = curved(li) ? c[li].data() : nullptr;
        rows(l.out, [&](int64_t b) {
          for (uint32_t o = 0; o < l.out; ++o) {
            const T g = dy[b * ldy + o], zz = z[b * l.out + o];
            dzl[b * l.out + o] = g * activate_derivative(act, zz);
            if (cl) cl[b * l.out + o] = g * activate_second_derivative(act, zz);
          }
        });
        if (li == 0) break;
        Scratch<T> next;
        next.resize(static_cast<size_t>(batch) * l.in);
        gemm(false, false, batch, l.in, l.out, T(1), dzl, l.out, weights + l.weight_offset, l.in, T(0), next.data(), l.in);
        dy_buf.swap(next);
        dy = dy_buf.data();
        ldy = l.in;
      }
    }

    // Sweep 2: adjoints of backward() from the input up; c[li] becomes bz of layer li.
    {
      Scratch<T> a_buf, bdz;
      const T* a = dL_ddLdinput.ptr<T>();
      int64_t lda = dL_ddLdinput.strides[0];
      for (size_t li = 0; li < n_layers; ++li) {
        const Layer& l = layers_[li];
        const Activation act = layer_activation(li);
        const T* z = preactivation(*ctx, li);
        bdz.resize(static_cast<size_t>(batch) * l.out);
        gemm(false, true, batch, l.out, l.in, T(1), a, lda, weights + l.weight_offset, l.in, T(0), bdz.data(), l.out);
        if (write_params)
          gemm(true, false, l.out, l.in, batch, T(1), dz[li].data(), l.out, a, lda, beta, gradients_ + l.weight_offset, l.in);
        const bool top = li + 1 == n_layers;
        if (top && !dL_ddLdoutput && !curved(li)) break;
        T* out = nullptr;
        int64_t ldo = l.out;
        if (top && dL_ddLdoutput) {
          out = dL_ddLdoutput->ptr<T>();
          ldo = dL_ddLdoutput->strides[0];
        } else if (!top) {
          Scratch<T> next;
          next.resize(static_cast<size_t>(batch) * l.out);
          a_buf.swap(next);
          out = a_buf.data();
        }
        T* cl = curved(li) ? c[li].data() : nullptr;
        const T* bd = bdz.data();
        rows(l.out, [&](int64_t b) {
          for (uint32_t o = 0; o < l.out; ++o) {
            const T v = bd[b * l.out + o];
            if (cl) cl[b * l.out + o] *= v;
            if (out) out[b * ldo + o] = v * activate_derivative(act, z[b * l.out + o]);
          }
        });
        a = a_buf.data();
        lda = l.out;
      }
    }

    // Sweep 3: bz through the forward pass, from the topmost curved layer down. Above it nothing
    // flows: the biases get no second-order gradient there.
    size_t n_flowing = 0;  // layers [0, n_flowing) carry a second-order dZ
    for (size_t li = 0; li < n_layers; ++li)
      if (curved(li)) n_flowing = li + 1;
    Scratch<T> ones;
    if (spec_.biases) fill_ones(ones, batch);
    if (spec_.biases && mode == GradientMode::Overwrite)
      for (size_t li = n_flowing; li < n_layers; ++li)
        std::fill(gradients_ + layers_[li].bias_offset, gradients_ + layers_[li].bias_offset + layers_[li].out, T(0));
    if (n_flowing == 0) {
      if (dL_dinput) fill_rows(*dL_dinput, T(0));
      return;
    }
    Scratch<T> e_buf, dZ;
    const T* e = nullptr;  // adjoint of layer li's output y from the layers above
    for (size_t li = n_flowing; li-- > 0;) {
      const Layer& l = layers_[li];
      const Activation act = layer_activation(li);
      const T* z = preactivation(*ctx, li);
      const T* bz = curved(li) ? c[li].data() : nullptr;
      dZ.resize(static_cast<size_t>(batch) * l.out);
      rows(l.out, [&](int64_t b) {
        for (uint32_t o = 0; o < l.out; ++o) {
          const size_t i = b * l.out + o;
          T v = bz ? bz[i] : T(0);
          if (e) v += e[i] * activate_derivative(act, z[i]);
          dZ[i] = v;
        }
      });
      if (write_params) {
        const auto [x_prev, ldx] = layer_input(*ctx, input, li, l.in);
        gemm(true, false, l.out, l.in, batch, T(1), dZ.data(), l.out, x_prev, ldx, T(1), gradients_ + l.weight_offset, l.in);
        if (spec_.biases)
          gemm(true, false, l.out, 1, batch, T(1), dZ.data(), l.out, ones.data(), 1, beta, gradients_ + l.bias_offset, 1);
      }
      if (li > 0) {
        Scratch<T> next;
        next.resize(static_cast<size_t>(batch) * l.in);
        gemm(false, false, batch, l.in, l.out, T(1), dZ.data(), l.out, weights + l.weight_offset, l.in, T(0), next.data(), l.in);
        e_buf.swap(next);
        e = e_buf.data();
      } else if (dL_dinput) {
        gemm(false, false, batch, l.in, l.out, T(1), dZ.data(), l.out, weights + l.weight_offset, l.in, T(0),
             dL_dinput->ptr<T>(), dL_dinput->strides[0]);
      }
    }
  }

 private:
  // The one place that decides between the engines: the row-tile engine for FP32 wherever this
  // CPU has its kernels, else layer by layer on the BLAS (FP64, the reference, always).
  static const TileGemm* row_tile_kernels() {
    if constexpr (std::is_same_v<T, float>)
      return tile_gemm();
    else
      return nullptr;
  }

  std::vector<TiledLayer> tiled_layers(const T* weights) const {
    std::vector<TiledLayer> out;
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& l = layers_[li];
      out.push_back({l.in, l.out, weights + l.weight_offset, spec_.biases ? weights + l.bias_offset : nullptr,
                     layer_activation(li), l.weight_offset, l.bias_offset});
    }
    return out;
  }

  static LayerRows kept_rows(const MlpContext<T>& ctx) {
    LayerRows rows;
    for (size_t li = 0; li < ctx.z.size(); ++li) {
      rows.z.push_back(const_cast<T*>(ctx.z[li].data()));
      rows.y.push_back(const_cast<T*>(ctx.y[li].data()));
    }
    return rows;
  }

  const MlpContext<T>* context_of(const Context& base_ctx, const char* call) const {
    const auto* ctx = dynamic_cast<const MlpContext<T>*>(&base_ctx);
    if (!ctx) throw Error(this->name() + "::" + call + ": context does not come from this network's forward()");
    return ctx;
  }

  // Whether `ctx` came from a forward() of `batch` rows.
  bool same_batch(const MlpContext<T>& ctx, int64_t batch) const {
    return ctx.z.size() == layers_.size() && (batch == 0 || ctx.z[0].size() == static_cast<size_t>(batch) * layers_[0].out);
  }

  static void fill_rows(const TensorView& t, T value) {
    T* p = t.ptr<T>();
    for (int64_t b = 0; b < t.rows(); ++b) std::fill(p + b * t.strides[0], p + b * t.strides[0] + t.cols(), value);
  }

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
    if (const TileGemm* kernels = row_tile_kernels()) {
      if constexpr (std::is_same_v<T, float>) {
        for (size_t li = 0; li < layers_.size(); ++li) {
          ctx.z[li].resize(static_cast<size_t>(batch) * layers_[li].out);
          ctx.y[li].resize(ctx.z[li].size());
        }
        const LayerRows keep = kept_rows(ctx);
        tiled_forward(*kernels, tiled_layers(weights), input.ptr<float>(), input.strides[0], batch, &keep, nullptr, 0);
        return;
      }
    }
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
        bias_activate(act, z.data(), y.data(), bias, b0, b1, l.out);
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
