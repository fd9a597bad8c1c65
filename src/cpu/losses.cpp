#include "cpu/losses.h"

#include <cmath>

#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

// Per-element value and gradient of one loss, before division by the element count and before
// loss scaling. Denominators of the relative losses are held constant in the gradient, as
// tiny-cuda-nn does (they are a normalisation, not part of the objective's shape).
template <typename T>
struct Term {
  T value, gradient;
};

template <typename T>
Term<T> loss_term(LossKind kind, T p, T t, T pdf, T luminance) {
  using std::abs;
  using std::copysign;
  using std::log;
  const T diff = p - t;
  switch (kind) {
    case LossKind::L2: return {diff * diff / pdf, T(2) * diff / pdf};
    case LossKind::L1: return {abs(diff) / pdf, copysign(T(1), diff) / pdf};
    case LossKind::RelativeL2: {
      T s = T(1) / (p * p + T(0.01)) / pdf;
      return {diff * diff * s, T(2) * diff * s};
    }
    case LossKind::RelativeL2Luminance: {
      T s = T(1) / (luminance * luminance + T(0.01)) / pdf;
      return {diff * diff * s, T(2) * diff * s};
    }
    case LossKind::RelativeL1: {
      T s = T(1) / (abs(p) + T(0.01)) / pdf;
      return {abs(diff) * s, copysign(s, diff)};
    }
    case LossKind::MAPE: {
      T s = T(1) / (abs(t) + T(0.01)) / pdf;
      return {abs(diff) * s, copysign(s, diff)};
    }
    case LossKind::SMAPE: {
      T s = T(1) / (T(0.5) * (abs(t) + abs(p)) + T(0.01)) / pdf;
      return {abs(diff) * s, copysign(s, diff)};
    }
    case LossKind::CrossEntropy: {
      // -t log p, for p a probability the network outputs (e.g. after a Sigmoid).
      T f = -t / pdf;
      return {f * log(p), f / p};
    }
    case LossKind::Variance: {
      // t^2/pdf * (1/p - 1/pdf): the variance of a Monte Carlo estimate when sampling with density p.
      T f = t * t / pdf;
      return {f / p - f / pdf, -f / (p * p)};
    }
  }
  return {T(0), T(0)};
}

template <typename T>
class CpuLoss final : public Loss {
 public:
  explicit CpuLoss(LossKind kind) : kind_(kind) {}
  Device device() const override { return Device::CPU; }
  json hyperparams() const override { return {{"otype", name()}}; }
  std::string name() const override { return loss_names()[static_cast<size_t>(kind_)]; }

  void evaluate(float loss_scale, const TensorView& prediction, const TensorView& target, const TensorView& values,
                const TensorView& gradients, const TensorView* data_pdf) const override {
    const DType dt = dtype_of<T>::value;
    check_matrix(prediction, "prediction", -1, -1, dt, Device::CPU);
    const int64_t batch = prediction.rows(), width = prediction.cols();
    check_matrix(target, "target", batch, -1, dt, Device::CPU);
    const int64_t dims = target.cols();
    if (dims > width)
      throw ShapeError("target: has " + std::to_string(dims) + " columns but the prediction only " + std::to_string(width));
    check_matrix(values, "values", batch, width, dt, Device::CPU);
    check_matrix(gradients, "gradients", batch, width, dt, Device::CPU);
    if (data_pdf) check_matrix(*data_pdf, "data_pdf", batch, dims, dt, Device::CPU);
    if (kind_ == LossKind::RelativeL2Luminance && dims < 3)
      throw ShapeError("RelativeL2Luminance needs at least 3 output dims (RGB), got " + std::to_string(dims));

    const T n = static_cast<T>(batch * dims);
    const T scale = static_cast<T>(loss_scale);
    auto at = [](const TensorView& v, int64_t b, int64_t d) -> T& {
      return static_cast<T*>(v.data)[b * v.strides[0] + d * v.strides[1]];
    };
    parallel_for(batch, 2048, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T lum = 0;
        if (kind_ == LossKind::RelativeL2Luminance) {
          T r = at(prediction, b, 0), g = at(prediction, b, 1), bl = at(prediction, b, 2);
          if (dims >= 6) r += at(prediction, b, 3), g += at(prediction, b, 4), bl += at(prediction, b, 5);
          lum = T(0.299) * r + T(0.587) * g + T(0.114) * bl;
        }
        for (int64_t d = 0; d < width; ++d) {
          if (d >= dims) {
            at(values, b, d) = T(0);
            at(gradients, b, d) = T(0);
            continue;
          }
          const T pdf = data_pdf ? at(*data_pdf, b, d) : T(1);
          Term<T> term = loss_term(kind_, at(prediction, b, d), at(target, b, d), pdf, lum);
          at(values, b, d) = term.value / n;
          at(gradients, b, d) = scale * term.gradient / n;
        }
      }
    });
  }

 private:
  LossKind kind_;
};

}  // namespace

template <typename T>
std::unique_ptr<Loss> make_loss(LossKind kind) {
  return std::make_unique<CpuLoss<T>>(kind);
}

template std::unique_ptr<Loss> make_loss<float>(LossKind);
template std::unique_ptr<Loss> make_loss<double>(LossKind);

}  // namespace tinyfuse::cpu
