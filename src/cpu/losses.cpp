#include "cpu/losses.h"

#include <cmath>

#include "core/loss_config.h"
#include "core/loss_math.h"
#include "core/view_overlap.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class CpuLoss final : public Loss {
 public:
  explicit CpuLoss(LossKind kind) : kind_(kind) {}
  Device device() const override { return Device::CPU; }
  json hyperparams() const override { return {{"otype", name()}}; }
  std::string name() const override { return loss_names()[static_cast<size_t>(kind_)]; }
  std::optional<LossKind> kind() const override { return kind_; }

  void evaluate(float loss_scale, const TensorView& prediction, const TensorView& target, const TensorView& values,
                const TensorView& gradients, const TensorView* data_pdf) const override {
    check(prediction, target, values, gradients, data_pdf);
    const int64_t batch = prediction.rows();
    parallel_for(batch, 2048, [&](int64_t b0, int64_t b1) {
      rows(loss_scale, batch, prediction, target, values, gradients, data_pdf, b0, b1);
    });
  }

  // evaluate()'s checks: shapes, dtypes and devices of a whole batch.
  void check(const TensorView& prediction, const TensorView& target, const TensorView& values,
             const TensorView& gradients, const TensorView* data_pdf) const {
    const DType dt = dtype_of<T>::value;
    check_matrix(prediction, "prediction", -1, -1, dt, Device::CPU);
    const int64_t batch = prediction.rows(), width = prediction.cols();
    check_matrix(target, "target", batch, -1, dt, Device::CPU);
    const int64_t dims = target.cols();
    if (dims > width)
      throw ShapeError("target: has " + std::to_string(dims) + " columns but the prediction only " + std::to_string(width));
    check_loss_values_shape(values, batch, width);
    check_matrix(values, "values", batch, values.cols() == 1 ? 1 : width, dt, Device::CPU);
    check_matrix(gradients, "gradients", batch, width, dt, Device::CPU);
    if (data_pdf) check_matrix(*data_pdf, "data_pdf", batch, dims, dt, Device::CPU);
    if (kind_ == LossKind::RelativeL2Luminance && dims < 3)
      throw ShapeError("RelativeL2Luminance needs at least 3 output dims (RGB), got " + std::to_string(dims));
  }

  // Rows [b0, b1) of the views (checked) as evaluate() computes them for a batch of `batch` rows:
  // values and gradients are divided by batch * dims whatever rows the views hold.
  void rows(float loss_scale, int64_t batch, const TensorView& prediction, const TensorView& target,
            const TensorView& values, const TensorView& gradients, const TensorView* data_pdf, int64_t b0,
            int64_t b1) const {
    // (The dense loops write gradients before they read the prediction again: views that share
    // memory take the general loop, which reads each element before writing it.)
    const bool disjoint = !views_overlap(gradients, prediction) && !views_overlap(gradients, target) &&
                          !views_overlap(values, prediction) && !views_overlap(values, target) &&
                          (!data_pdf || (!views_overlap(gradients, *data_pdf) && !views_overlap(values, *data_pdf)));
    if (disjoint && prediction.rows_dense() && target.rows_dense() && values.rows_dense() && gradients.rows_dense() &&
        (!data_pdf || data_pdf->rows_dense())) {
#define TINYFUSE_LOSS_CASE(K)                                                                                \
  case K:                                                                                                    \
    if (data_pdf)                                                                                            \
      dense_rows<K, true>(loss_scale, batch, prediction, target, values, gradients, data_pdf, b0, b1);       \
    else                                                                                                     \
      dense_rows<K, false>(loss_scale, batch, prediction, target, values, gradients, data_pdf, b0, b1);      \
    return;
      switch (kind_) {
        TINYFUSE_LOSS_CASE(LossKind::L2)
        TINYFUSE_LOSS_CASE(LossKind::L1)
        TINYFUSE_LOSS_CASE(LossKind::RelativeL2)
        TINYFUSE_LOSS_CASE(LossKind::RelativeL2Luminance)
        TINYFUSE_LOSS_CASE(LossKind::RelativeL1)
        TINYFUSE_LOSS_CASE(LossKind::MAPE)
        TINYFUSE_LOSS_CASE(LossKind::SMAPE)
        TINYFUSE_LOSS_CASE(LossKind::CrossEntropy)
        TINYFUSE_LOSS_CASE(LossKind::Variance)
      }
#undef TINYFUSE_LOSS_CASE
    }
    const int64_t width = prediction.cols(), dims = target.cols();
    const T n = static_cast<T>(batch * dims);
    const T scale = static_cast<T>(loss_scale);
    auto at = [](const TensorView& v, int64_t b, int64_t d) -> T& {
      return static_cast<T*>(v.data)[b * v.strides[0] + d * v.strides[1]];
    };
    const bool row_values = loss_values_per_row(values, width);  // each row's terms summed (loss.h's order), divided once
    for (int64_t b = b0; b < b1; ++b) {
      T lum = 0;
      if (kind_ == LossKind::RelativeL2Luminance) {
        T r = at(prediction, b, 0), g = at(prediction, b, 1), bl = at(prediction, b, 2);
        if (dims >= 6) r += at(prediction, b, 3), g += at(prediction, b, 4), bl += at(prediction, b, 5);
        lum = loss_luminance(r, g, bl);
      }
      T row = 0, group = 0;
      for (int64_t d = 0; d < width; ++d) {
        if (d >= dims) {
          if (!row_values) at(values, b, d) = T(0);
          at(gradients, b, d) = T(0);
        } else {
          const T pdf = data_pdf ? at(*data_pdf, b, d) : T(1);
          LossTerm<T> term = loss_term(kind_, at(prediction, b, d), at(target, b, d), pdf, lum);
          if (row_values)
            group += term.value;
          else
            at(values, b, d) = term.value / n;
          at(gradients, b, d) = scale * term.gradient / n;
        }
        if (d % 8 == 7 || d == width - 1) row += group, group = 0;
      }
      if (row_values) at(values, b, 0) = row / n;
    }
  }

  // rows() for views whose features are adjacent, with the loss and the pdf's presence fixed at
  // compile time, so that the gradients' loop vectorises: the same operations on each element,
  // the same bits. The row sums keep their order (loss.h).
  template <LossKind K, bool PDF>
  void dense_rows(float loss_scale, int64_t batch, const TensorView& prediction, const TensorView& target,
                  const TensorView& values, const TensorView& gradients, const TensorView* data_pdf, int64_t b0,
                  int64_t b1) const {
    const int64_t width = prediction.cols(), dims = target.cols();
    const T n = static_cast<T>(batch * dims);
    const T scale = static_cast<T>(loss_scale);
    const bool row_values = loss_values_per_row(values, width);
    for (int64_t b = b0; b < b1; ++b) {
      const T* __restrict p = static_cast<const T*>(prediction.data) + b * prediction.strides[0];
      const T* __restrict t = static_cast<const T*>(target.data) + b * target.strides[0];
      const T* __restrict w = PDF ? static_cast<const T*>(data_pdf->data) + b * data_pdf->strides[0] : nullptr;
      T* __restrict g = static_cast<T*>(gradients.data) + b * gradients.strides[0];
      T* __restrict v = static_cast<T*>(values.data) + b * values.strides[0];
      T lum = 0;
      if constexpr (K == LossKind::RelativeL2Luminance) {
        T r = p[0], gr = p[1], bl = p[2];
        if (dims >= 6) r += p[3], gr += p[4], bl += p[5];
        lum = loss_luminance(r, gr, bl);
      }
      for (int64_t d = 0; d < dims; ++d) g[d] = scale * loss_term(K, p[d], t[d], PDF ? w[d] : T(1), lum).gradient / n;
      for (int64_t d = dims; d < width; ++d) g[d] = T(0);
      if (row_values) {
        T row = 0, group = 0;
        for (int64_t d = 0; d < width; ++d) {
          if (d < dims) group += loss_term(K, p[d], t[d], PDF ? w[d] : T(1), lum).value;
          if (d % 8 == 7 || d == width - 1) row += group, group = 0;
        }
        v[0] = row / n;
      } else {
        for (int64_t d = 0; d < dims; ++d) v[d] = loss_term(K, p[d], t[d], PDF ? w[d] : T(1), lum).value / n;
        for (int64_t d = dims; d < width; ++d) v[d] = T(0);
      }
    }
  }

 private:
  LossKind kind_;
};

}  // namespace

bool is_cpu_fp32_loss(const Loss& loss) { return dynamic_cast<const CpuLoss<float>*>(&loss) != nullptr; }

void check_loss_views(const Loss& loss, const TensorView& prediction, const TensorView& target, const TensorView& values,
                      const TensorView& gradients, const TensorView* data_pdf) {
  dynamic_cast<const CpuLoss<float>&>(loss).check(prediction, target, values, gradients, data_pdf);
}

void evaluate_loss_rows(const Loss& loss, float loss_scale, int64_t batch, int64_t r0, int64_t n_rows,
                        const float* prediction, float* gradients, int64_t width, const TensorView& target,
                        const TensorView& values, const TensorView* data_pdf) {
  const TensorView p = TensorView::matrix(const_cast<float*>(prediction), n_rows, width);
  const TensorView g = TensorView::matrix(gradients, n_rows, width);
  const TensorView pdf = data_pdf ? data_pdf->rows_slice(r0, n_rows) : TensorView{};
  dynamic_cast<const CpuLoss<float>&>(loss).rows(loss_scale, batch, p, target.rows_slice(r0, n_rows),
                                                  values.rows_slice(r0, n_rows), g, data_pdf ? &pdf : nullptr, 0,
                                                  n_rows);
}

template <typename T>
std::unique_ptr<Loss> make_loss(LossKind kind) {
  return std::make_unique<CpuLoss<T>>(kind);
}

template std::unique_ptr<Loss> make_loss<float>(LossKind);
template std::unique_ptr<Loss> make_loss<double>(LossKind);

}  // namespace tinyfuse::cpu
