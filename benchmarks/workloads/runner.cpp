#include "workloads/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>

#include "cpu/parallel.h"
#include "rotation.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/random.h"
#include "workloads/checks.h"
#include "workloads/eikonal_step.h"
#include "workloads/model.h"
#include "workloads/targets.h"

namespace tinyfuse::bench {

bool WorkloadRow::checks_ok() const {
  return std::all_of(checks.begin(), checks.end(), [](const WorkloadCheck& c) { return c.ok; });
}

namespace {

size_t round_to_mib(size_t bytes) { return (bytes + (size_t{1} << 20) - 1) >> 20 << 20; }

class CpuRunTimer final : public RunTimer {
 public:
  explicit CpuRunTimer(size_t largest_cache_bytes) : rotation_(round_to_mib(std::max(kRotationMinBytes, 2 * largest_cache_bytes))) {}
  Device device() const override { return Device::CPU; }
  Stream stream() const override { return nullptr; }
  bool reads_between_runs() const override { return true; }
  Result time(const TimingPlan& plan, const std::function<void(int)>& work,
              const std::function<void(int)>& after) override {
    using clock = std::chrono::steady_clock;
    int run = 0;
    for (int i = 0; i < plan.warmup; ++i) work(run++);
    std::vector<double> seconds;
    for (int i = 0; i < plan.repeats; ++i) {
      const auto t0 = clock::now();
      work(run);
      seconds.push_back(std::chrono::duration<double>(clock::now() - t0).count());
      if (after) after(run);
      ++run;
    }
    return {summarize(std::move(seconds)), std::nullopt};
  }
  void settle() override {}
  size_t rotation_bytes() const override { return rotation_; }
  void evict_caches() override {
    if (scratch_.size() != rotation_) scratch_.assign(rotation_, 0);
    ++stamp_;
    cpu::parallel_for(static_cast<int64_t>(rotation_ >> 20), 1, [&](int64_t begin, int64_t end) {
      std::memset(scratch_.data() + (begin << 20), stamp_, static_cast<size_t>(end - begin) << 20);
    });
  }
  std::string clock() const override { return "std::chrono::steady_clock"; }

 private:
  size_t rotation_;
  std::vector<char> scratch_;
  unsigned char stamp_ = 0;
};

// `count` (rows, cols) matrices of `dtype` in one allocation, each a view on the timer's stream.
struct Slots {
  Buffer memory;
  std::vector<TensorView> views;
  double bytes() const { return static_cast<double>(memory.bytes()); }
};
Slots make_slots(Device device, Stream stream, DType dtype, int count, int64_t rows, int64_t cols) {
  Slots s;
  const size_t one = static_cast<size_t>(rows) * static_cast<size_t>(cols) * dtype_size(dtype);
  s.memory = Buffer(device, one * static_cast<size_t>(count));
  for (int i = 0; i < count; ++i)
    s.views.push_back(TensorView::matrix(static_cast<char*>(s.memory.data()) + one * static_cast<size_t>(i), dtype, device,
                                         rows, cols, stream));
  return s;
}

// A 1-D view as one row (so it copies as one transfer).
TensorView as_row(const TensorView& v) { return TensorView::matrix(v.data, v.dtype, v.device, 1, v.numel(), v.stream); }


std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

class RowRunner {
 public:
  RowRunner(const WorkloadSpec& w, const WorkloadPlan& plan, RunTimer& timer, uint64_t seed)
      : w_(w), plan_(plan), timer_(timer), seed_(seed), cost_(workload_cost(w)), field_(make_target_field(w.target)),
        loss_otype_(w.config.at("loss").value("otype", "RelativeL2")) {}

  WorkloadRow run(Mode mode, int64_t batch) {
    WorkloadRow r;
    r.id = w_.id;
    r.name = w_.name;
    r.device = to_string(timer_.device());
    r.mode = mode;
    r.batch = batch;
    try {
      if (mode == Mode::Training)
        training(batch, r);
      else
        inference(batch, r);
      r.ok = true;
    } catch (const std::exception& e) {
      r.error = e.what();
      try {
        timer_.settle();
      } catch (const std::exception&) {
        // the next row reports what is left
      }
    }
    return r;
  }

 private:
  BuildOptions options() const {
    BuildOptions o;
    o.device = timer_.device();
    o.fused_kernels = plan_.fused_kernels;
    return o;
  }

  // Runs a row makes: the warm-up and timed ones (training adds its first step).
  int runs() const { return plan_.timing.warmup + plan_.timing.repeats; }

  void describe(WorkloadRow& r, const DifferentiableObject& obj, bool training) const {
    r.n_params = obj.n_params();
    r.param_dtype = precision_name(obj.param_dtype());
    r.output_dtype = precision_name(obj.output_dtype());
    r.padded_output_width = obj.padded_output_width();
    const size_t param_bytes = dtype_size(obj.param_dtype());
    r.input_bytes = 4.0 * w_.n_input_dims;
    if (training)
      r.target_bytes = 4.0 * w_.n_output_dims;  // FP32 targets
    else
      r.output_bytes = static_cast<double>(obj.padded_output_width() * dtype_size(obj.output_dtype()));
    r.grid_bytes_per_sample = cost_.grid_bytes_per_sample(param_bytes, training);
    r.grid_table_bytes = cost_.grid_table_bytes(param_bytes);
    r.flop_per_sample = cost_.flop_per_sample(training);
  }

  // How many buffers a row cycles through: past the caches (rotation.h), but never more than
  // it has runs (then every run has a buffer of its own).
  int slot_count(size_t bytes_per_run, int runs) const {
    return std::max(1, std::min(rotation_buffers(bytes_per_run, timer_.rotation_bytes()), runs));
  }

  // The eikonal step's first step, untimed, and its checks. Before it, with the initial
  // parameters: the loss the host computes in FP64 (the CPU model's values and input gradients on
  // the whole batch, eikonal_workload_loss), and central differences of that model's inference on
  // a few eikonal rows. After it: the step's loss against the first, its input gradient
  // against the differences.
  void first_eikonal_step(DifferentiableObject& obj, Trainer& trainer, const EikonalStep& eikonal,
                          const std::vector<float>& x0, const std::vector<float>& y0, int64_t batch,
                          const std::function<void(size_t)>& step, WorkloadRow& r) {
    const std::vector<float> params = trainer.params_host();
    uint32_t width = 0;
    const std::vector<double> f = cpu_reference_outputs(w_, params, x0.data(), batch, &width);
    const std::vector<double> g = cpu_reference_input_gradients(w_, params, x0.data(), batch);
    const double host = eikonal_workload_loss(batch, f.data(), width, g.data(), y0.data(), w_.step.eikonal_weight, 1.0,
                                              nullptr, nullptr);
    // Rows of the eikonal half (the step forms grad_x f there only), from its start and its end.
    const int64_t half = batch / 2, per_end = std::min<int64_t>(8, (batch - half) / 2);
    std::vector<float> rows_x;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < per_end; ++i) rows.push_back(half + i), rows.push_back(batch - 1 - i);
    for (int64_t row : rows) rows_x.insert(rows_x.end(), x0.begin() + 3 * row, x0.begin() + 3 * row + 3);
    // h far below the finest grid cell (1 / 7,000 for W4e) and far above FP64's rounding: the
    // differences cross a cell edge of some level with a chance of about 1e-3 per row.
    constexpr double kStep = 1e-8;
    const std::vector<double> fd = cpu_finite_difference_gradients(w_, params, rows_x.data(), static_cast<int64_t>(rows.size()), kStep);

    step(0);
    r.first_loss = eikonal.last_loss();
    r.host_first_loss = host;
    const double tol = reference_tolerance(obj.param_dtype());
    const double err = std::fabs(r.first_loss - host) / std::max(std::fabs(host), 1e-12);
    r.checks.push_back({"first loss", std::isfinite(r.first_loss) && err <= tol,
                        "eikonal step " + fmt(r.first_loss) + ", host FP64 " + fmt(host) + ": relative error " + fmt(err) +
                            " (tolerance " + fmt(tol) + ")"});
    double gerr = 0, gscale = 0;
    const std::vector<float>& got = eikonal.input_gradients();
    for (size_t i = 0; i < rows.size(); ++i)
      for (int k = 0; k < 3; ++k) {
        const double a = got[static_cast<size_t>(3 * rows[i] + k)], b = fd[3 * i + k];
        gerr = std::max(gerr, std::isfinite(a) ? std::fabs(a - b) : INFINITY);
        gscale = std::max(gscale, std::fabs(b));
      }
    const double gtol = tol * (1.0 + gscale);
    r.checks.push_back({"input gradient", gerr <= gtol,
                        "grad_x f of the first step on " + std::to_string(rows.size()) +
                            " rows against central differences (h 1e-8) of the CPU FP64 model: max error " + fmt(gerr) +
                            " (tolerance " + fmt(gtol) + ")"});
  }

  void training(int64_t batch, WorkloadRow& r) {
    auto m = std::make_shared<WorkloadModel>(build_workload_model(w_, options(), seed_));
    DifferentiableObject& obj = *m->object;
    Trainer& trainer = *m->trainer;
    describe(r, obj, true);
    const Device dev = timer_.device();
    const Stream s = timer_.stream();
    const int count = slot_count(static_cast<size_t>(batch) * static_cast<size_t>(r.input_bytes + r.target_bytes), runs() + 1);
    Slots in = make_slots(dev, s, DType::F32, count, batch, w_.n_input_dims);
    Slots tg = make_slots(dev, s, DType::F32, count, batch, w_.n_output_dims);
    r.buffers = count;
    r.rotated_bytes = in.bytes() + tg.bytes();
    Pcg32 rng(seed_ + static_cast<uint64_t>(batch));
    std::vector<float> x0, y0;  // the first batch, kept for the host's loss
    for (int k = 0; k < count; ++k) {
      std::vector<float> x(static_cast<size_t>(batch) * w_.n_input_dims), y(static_cast<size_t>(batch) * w_.n_output_dims);
      field_->sample(rng, batch, x.data(), y.data());
      copy_tensor(in.views[k], TensorView::matrix(x.data(), batch, w_.n_input_dims));
      copy_tensor(tg.views[k], TensorView::matrix(y.data(), batch, w_.n_output_dims));
      if (k == 0) x0 = std::move(x), y0 = std::move(y);
    }
    timer_.settle();
    timer_.evict_caches();

    // The step the workload trains with (one place: the Trainer's, or the eikonal step).
    std::unique_ptr<EikonalStep> eikonal;
    if (w_.step.kind == StepSpec::Kind::Eikonal)
      eikonal = std::make_unique<EikonalStep>(*m, batch, w_.step.eikonal_weight, s);
    auto step = [&](size_t k) {
      if (eikonal)
        eikonal->run(in.views[k], tg.views[k]);
      else
        trainer.training_step_async(in.views[k], tg.views[k]);
    };
    auto last_loss = [&]() -> double { return eikonal ? eikonal->last_loss() : trainer.last_loss(); };

    // The first step, untimed: its loss against the host's loss of the same model's output.
    if (eikonal)
      first_eikonal_step(obj, trainer, *eikonal, x0, y0, batch, step, r);
    else {
      Buffer out(dev, static_cast<size_t>(batch) * obj.padded_output_width() * dtype_size(obj.output_dtype()));
      const TensorView ov = out.matrix(obj.output_dtype(), batch, obj.padded_output_width(), s);
      obj.inference(in.views[0], ov);
      const std::vector<float> pred = to_host(ov);
      const auto host = host_loss(loss_otype_, pred.data(), obj.padded_output_width(), y0.data(), batch, w_.n_output_dims);
      step(0);
      r.first_loss = trainer.last_loss();
      if (host) {
        r.host_first_loss = *host;
        const double tol = reference_tolerance(obj.param_dtype());
        const double err = std::fabs(r.first_loss - *host) / std::max(std::fabs(*host), 1e-12);
        r.checks.push_back({"first loss", std::isfinite(r.first_loss) && err <= tol,
                            "step " + fmt(r.first_loss) + ", host " + fmt(*host) + ": relative error " + fmt(err) +
                                " (tolerance " + fmt(tol) + ")"});
      } else {
        r.checks.push_back({"first loss", std::isfinite(r.first_loss),
                            "finite only: the host computes L2, L1 and RelativeL2, not " + loss_otype_});
      }
    }

    r.timing = timer_.time(
        plan_.timing, [&](int i) { step(static_cast<size_t>((i + 1) % count)); },
        [&](int) { r.losses.push_back(last_loss()); });
    if (!timer_.reads_between_runs()) r.losses = {last_loss()};

    const bool finite = std::all_of(r.losses.begin(), r.losses.end(), [](double l) { return std::isfinite(l); });
    const size_t tail = std::max<size_t>(1, r.losses.size() / 3);
    double late = 0;
    for (size_t i = r.losses.size() - tail; i < r.losses.size(); ++i) late += r.losses[i];
    late /= static_cast<double>(tail);
    r.checks.push_back({"loss falls", finite && late < r.first_loss,
                        "first step " + fmt(r.first_loss) + ", mean of the last " + std::to_string(tail) +
                            " timed steps " + fmt(late)});
    timer_.settle();
    const double psum = sum_tensor(trainer.params());
    r.checks.push_back({"parameters finite", std::isfinite(psum), "sum " + fmt(psum)});
    trained_ = m;
    trained_steps_ = 1 + runs();
  }

  void inference(int64_t batch, WorkloadRow& r) {
    if (!trained_) {
      trained_ = std::make_shared<WorkloadModel>(build_workload_model(w_, options(), seed_));
      trained_steps_ = 0;
    }
    DifferentiableObject& obj = *trained_->object;
    describe(r, obj, false);
    r.trained_steps = trained_steps_;
    const Device dev = timer_.device();
    const Stream s = timer_.stream();
    const uint32_t width = obj.padded_output_width();
    const int count = slot_count(static_cast<size_t>(batch) * static_cast<size_t>(r.input_bytes + r.output_bytes), runs());
    Slots in = make_slots(dev, s, DType::F32, count, batch, w_.n_input_dims);
    Slots out = make_slots(dev, s, obj.output_dtype(), count, batch, width);
    r.buffers = count;
    r.rotated_bytes = in.bytes() + out.bytes();
    Pcg32 rng(seed_ + 7919 + static_cast<uint64_t>(batch));
    for (int k = 0; k < count; ++k) {
      std::vector<float> x(static_cast<size_t>(batch) * w_.n_input_dims);
      field_->sample(rng, batch, x.data(), nullptr);
      copy_tensor(in.views[k], TensorView::matrix(x.data(), batch, w_.n_input_dims));
      fill_tensor(out.views[k], std::nan(""));  // poisoned: a row the network does not write shows
    }
    timer_.settle();
    timer_.evict_caches();
    r.timing = timer_.time(
        plan_.timing, [&](int i) { obj.inference(in.views[static_cast<size_t>(i % count)], out.views[static_cast<size_t>(i % count)]); },
        nullptr);
    timer_.settle();

    // Every output the runs wrote is finite (padding included).
    const int used = std::min(count, runs());
    bool finite = true;
    for (int k = 0; k < used; ++k) finite = finite && std::isfinite(sum_tensor(out.views[static_cast<size_t>(k)]));
    r.checks.push_back({"finite", finite, "every value of the " + std::to_string(used) + " output buffers the runs wrote"});

    // The last run's outputs, again: the same bits.
    const size_t last = static_cast<size_t>((runs() - 1) % count);
    Buffer again(dev, static_cast<size_t>(batch) * width * dtype_size(obj.output_dtype()));
    const TensorView av = again.matrix(obj.output_dtype(), batch, width, s);
    obj.inference(in.views[last], av);
    const std::vector<float> got = to_host(out.views[last]), repeat = to_host(av);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == repeat[i]);
    r.checks.push_back({"repeatable", differ == 0,
                        std::to_string(differ) + " of " + std::to_string(got.size()) + " values differ from a repeated call"});

    // The first rows against the CPU FP64 model with the same parameters, and against the target.
    const int64_t rows = std::min<int64_t>(plan_.reference_rows, batch);
    const std::vector<float> x = to_host(in.views[last].rows_slice(0, rows));
    std::vector<float> params(obj.n_params());
    if (!params.empty())
      copy_tensor(TensorView::matrix(params.data(), 1, static_cast<int64_t>(params.size())), as_row(trained_->trainer->params()));
    synchronize(dev, nullptr);
    uint32_t ref_width = 0;
    const std::vector<double> ref = cpu_reference_outputs(w_, params, x.data(), rows, &ref_width);
    double err = 0, scale = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (uint32_t j = 0; j < w_.n_output_dims; ++j) {
        const double a = got[static_cast<size_t>(i) * width + j], b = ref[static_cast<size_t>(i) * ref_width + j];
        err = std::max(err, std::isfinite(a) ? std::fabs(a - b) : INFINITY);
        scale = std::max(scale, std::fabs(b));
      }
    r.reference_rows = static_cast<int>(rows);
    r.reference_error = err;
    r.reference_tolerance = reference_tolerance(obj.param_dtype()) * (1.0 + scale);
    r.checks.push_back({"reference", err <= r.reference_tolerance,
                        "first " + std::to_string(rows) + " rows against the CPU FP64 model: max error " + fmt(err) +
                            " (tolerance " + fmt(r.reference_tolerance) + ")"});
    std::vector<float> y(static_cast<size_t>(rows) * w_.n_output_dims);
    target_values(w_.target, x.data(), rows, y.data());
    if (const auto l = host_loss(loss_otype_, got.data(), width, y.data(), rows, w_.n_output_dims)) r.loss_vs_target = *l;
  }

  const WorkloadSpec& w_;
  const WorkloadPlan& plan_;
  RunTimer& timer_;
  uint64_t seed_;
  WorkloadCost cost_;
  std::unique_ptr<TargetField> field_;
  std::string loss_otype_;
  std::shared_ptr<WorkloadModel> trained_;
  int trained_steps_ = 0;
};

}  // namespace

std::unique_ptr<RunTimer> make_cpu_run_timer(size_t largest_cache_bytes) {
  return std::make_unique<CpuRunTimer>(largest_cache_bytes);
}

std::vector<WorkloadRow> run_workload(const WorkloadSpec& w, const WorkloadPlan& plan, RunTimer& timer, uint64_t seed,
                                      const std::function<void(const WorkloadRow&)>& progress) {
  RowRunner runner(w, plan, timer, seed);
  const WorkloadSpec::Batches& defaults = w.batches(timer.device());
  std::vector<WorkloadRow> rows;
  for (Mode mode : {Mode::Training, Mode::Inference}) {
    if (std::find(plan.modes.begin(), plan.modes.end(), mode) == plan.modes.end()) continue;
    const std::vector<int>& logs =
        plan.batch_log2 ? *plan.batch_log2 : mode == Mode::Training ? defaults.training : defaults.inference;
    for (int l : logs) {
      rows.push_back(runner.run(mode, int64_t{1} << l));
      if (progress) progress(rows.back());
    }
  }
  return rows;
}

}  // namespace tinyfuse::bench
