#include "learn_sdf.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include "args.h"
#include "core/atomic_file.h"
#include "eikonal_loss.h"
#include "image_files.h"
#include "jobs/default_config.h"
#include "jobs/loss_plot.h"
#include "progress.h"
#include "run_files.h"
#include "sdf_field.h"
#include "sdf_source.h"
#include "staging.h"
#include "tinyfuse/checkpoint.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/random.h"

namespace tinyfuse::cli {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kDefaultSteps = 500;
constexpr uint64_t kDefaultBatch = 2048;  // surface points per step, and as many eikonal points
constexpr uint64_t kMaxBatch = uint64_t(1) << 20;
constexpr uint64_t kDefaultSeed = 1337;
constexpr uint64_t kShapeSeed = 42;  // built-in shapes' point sets: the same for every run
constexpr uint64_t kSamplingStream = 0x736466626174ULL;
constexpr uint64_t kHeldoutStream = 0x686f6c646f7574ULL;
constexpr double kNearSurfaceSigma = 0.05;   // eikonal points near the surface: offsets of this deviation
constexpr double kHeldoutNearSigma = 0.03;   // held-out points near the surface
constexpr int64_t kHeldoutVolumePoints = 16384;
constexpr int64_t kHeldoutOffsetsPerSurfacePoint = 4;
constexpr const char* kDefaultOut = "learn-sdf-out";
constexpr uint64_t kDefaultInitSteps = 50;
constexpr const char* kDefaultShape = "torus";

struct Settings {
  std::string config_path, shape, points_path, out_dir, resume_path;
  uint64_t steps, batch, seed, init_steps;
  EikonalWeights weights;
  Device device;
  bool quiet;
};

Settings read_settings(const Options& o) {
  Settings s;
  s.config_path = o.get("config", "");
  s.points_path = o.get("points", "");
  s.shape = o.get("shape", s.points_path.empty() ? kDefaultShape : "");
  if (o.has("shape") && o.has("points")) throw UsageError("give --shape or --points, not both");
  if (o.has("points") && s.points_path.empty()) throw UsageError("option '--points' needs a file");
  s.out_dir = o.get("out", kDefaultOut);
  s.resume_path = o.get("resume", "");
  if (s.out_dir.empty()) throw UsageError("option '--out' needs a directory");
  s.steps = o.get_uint("steps", kDefaultSteps, 1, 1000000);
  s.batch = o.get_uint("batch", kDefaultBatch, 1, kMaxBatch);
  s.seed = o.get_uint("seed", kDefaultSeed, 0, UINT64_MAX);
  s.init_steps = o.get_uint("init-steps", kDefaultInitSteps, 0, 100000);
  s.weights.surface = o.get_double("surface-weight", s.weights.surface, 0, 1e6);
  s.weights.eikonal = o.get_double("eikonal-weight", s.weights.eikonal, 0, 1e6);
  s.weights.normal = o.get_double("normal-weight", s.weights.normal, 0, 1e6);
  s.quiet = o.has("quiet");
  s.device = o.get_device();
  return s;
}

SdfSource load_source(const Settings& s) {
  if (!s.points_path.empty()) return SdfSource::from_points_file(s.points_path);
  try {
    return SdfSource::built_in(s.shape, kShapeSeed);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("option '--shape': ") + e.what());
  }
}

double gaussian(Pcg32& rng) {
  // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
  const double u = 1.0 - rng.next_double(), v = rng.next_double();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * 3.14159265358979323846 * v);
}

float clamp01(double v) { return static_cast<float>(std::min(1.0, std::max(0.0, v))); }

// The tensors of one step, sized once: `rows` = the surface points then the eikonal points,
// padded to the model's batch granularity (padding rows repeat a surface point and get no loss).
class StepTensors {
 public:
  StepTensors(const DifferentiableObject& net, int64_t n_surface, int64_t n_eikonal)
      : n_surface_(n_surface),
        n_(n_surface + n_eikonal),
        rows_(pad(net, n_)),
        width_(net.padded_output_width()),
        x_(rows_, 3, net.input_dtype(), net.device()),
        out_(rows_, width_, net.output_dtype(), net.device()),
        ones_(rows_, width_, net.output_dtype(), net.device()),
        grad_(rows_, 3, net.input_dtype(), net.device()),
        d_out_(rows_, width_, net.output_dtype(), net.device()),
        v_(rows_, 3, net.input_dtype(), net.device()),
        normals_(static_cast<size_t>(3 * n_surface)) {
    // dL/doutput for the input gradient of the first output: one in column 0.
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t j = 0; j < width_; ++j) ones_.host()[r * width_ + j] = j == 0 ? 1.0f : 0.0f;
    ones_view_ = ones_.upload(rows_);
    std::fill(d_out_.host(), d_out_.host() + rows_ * width_, 0.0f);
    std::fill(v_.host(), v_.host() + rows_ * 3, 0.0f);
  }

  static int64_t pad(const DifferentiableObject& net, int64_t n) {
    const int64_t g = std::max<int64_t>(1, net.batch_granularity());
    return (n + g - 1) / g * g;
  }

  // Surface points with normals, then eikonal points: half uniform in the cube, half near the
  // surface (a training surface point moved by a Gaussian offset).
  void draw(const SdfSource& source, Pcg32& rng) {
    float* x = x_.host();
    source.draw_surface(rng, n_surface_, x, normals_.data());
    const int64_t n_eikonal = n_ - n_surface_;
    std::vector<float> near(3 * (n_eikonal / 2)), unused(near.size());
    source.draw_surface(rng, n_eikonal / 2, near.data(), unused.data());
    for (int64_t i = 0; i < n_eikonal; ++i) {
      float* p = x + 3 * (n_surface_ + i);
      if (i < n_eikonal / 2)
        for (int k = 0; k < 3; ++k) p[k] = clamp01(near[3 * i + k] + kNearSurfaceSigma * gaussian(rng));
      else
        for (int k = 0; k < 3; ++k) p[k] = rng.next_float();
    }
    for (int64_t r = n_; r < rows_; ++r) std::copy(x, x + 3, x + 3 * r);
  }

  // One step's gradients into the model's gradient buffer (overwritten); returns the loss.
  EikonalLossValue gradients(DifferentiableObject& net, const EikonalWeights& w, float loss_scale) {
    const TensorView x = x_.upload(rows_), out = out_.device_view(rows_), grad = grad_.device_view(rows_);
    auto ctx = net.forward(x, &out, false, /*prepare_input_gradients=*/true);
    net.backward(*ctx, x, out, ones_view_, &grad, false, GradientMode::Ignore);  // grad f at every point
    out_.download(rows_);
    grad_.download(rows_);
    const EikonalLossValue loss = eikonal_loss(n_surface_, n_, out_.host(), width_, grad_.host(), normals_.data(), w,
                                               loss_scale, d_out_.host(), v_.host());
    // The loss through f (surface term) and through grad f (eikonal and normal terms).
    net.backward(*ctx, x, out, d_out_.upload(rows_), nullptr, false, GradientMode::Overwrite);
    net.backward_backward_input(*ctx, x, v_.upload(rows_), ones_view_, nullptr, nullptr, false, GradientMode::Accumulate);
    return loss;
  }

  // Geometric initialisation: an L1 step towards the distance to the cube's centre at points
  // uniform in the cube, so that the field starts as a distance (|grad f| = 1) that is positive
  // away from the surface. From a random start the eikonal term folds the field instead, leaving
  // zero level sets far from any surface point (held-out error 0.11 against 0.006 for the torus);
  // a sphere's distance (radius 0.3) leaves its inside behind where no surface point is.
  double init_gradients(DifferentiableObject& net, Pcg32& rng, float loss_scale) {
    float* x = x_.host();
    for (int64_t i = 0; i < 3 * rows_; ++i) x[i] = rng.next_float();
    const TensorView xv = x_.upload(rows_), out = out_.device_view(rows_);
    auto ctx = net.forward(xv, &out, false, false);
    out_.download(rows_);
    double loss = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      if (r >= n_) {  // padding rows: no loss (the training steps rely on their zeros)
        d_out_.host()[r * width_] = 0.0f;
        continue;
      }
      const double d = std::sqrt((x[3 * r] - 0.5) * (x[3 * r] - 0.5) + (x[3 * r + 1] - 0.5) * (x[3 * r + 1] - 0.5) +
                                 (x[3 * r + 2] - 0.5) * (x[3 * r + 2] - 0.5));
      const double e = out_.host()[r * width_] - d;
      loss += std::abs(e) / static_cast<double>(n_);
      d_out_.host()[r * width_] = static_cast<float>(loss_scale * (e > 0 ? 1.0 : e < 0 ? -1.0 : 0.0) / static_cast<double>(n_));
    }
    net.backward(*ctx, xv, out, d_out_.upload(rows_), nullptr, false, GradientMode::Overwrite);
    return loss;
  }

  int64_t samples() const { return n_; }

 private:
  int64_t n_surface_, n_, rows_, width_;
  StagedMatrix x_, out_, ones_, grad_, d_out_, v_;
  TensorView ones_view_;
  std::vector<float> normals_;
};

// Refuses, before anything is written, a model that cannot form the second derivatives a step
// needs (CUDA networks, until they have them): the error says what would work.
void check_second_derivatives(DifferentiableObject& net, const SdfSource& source, const Settings& s) {
  StepTensors probe(net, 1, 1);
  Pcg32 rng(s.seed, kSamplingStream);
  probe.draw(source, rng);
  try {
    probe.gradients(net, s.weights, 0.0f);  // zero loss scale: the gradients are zero, the buffer is overwritten
  } catch (const UnsupportedError& e) {
    throw Error("learn-sdf trains with second derivatives (the eikonal term differentiates the input gradient), and " +
                std::string(e.what()) + (s.device == Device::CUDA ? "; run with --device cpu" : ""));
  }
}

struct TrainResult {
  std::vector<float> losses;
  EikonalLossValue last;
  double seconds = 0, init_seconds = 0, init_loss = NAN;
  bool diverged = false;
};

TrainResult train(Model& model, const SdfSource& source, const Settings& s) {
  DifferentiableObject& net = *model.network;
  StepTensors tensors(net, static_cast<int64_t>(s.batch), static_cast<int64_t>(s.batch));
  // A resumed run draws new batches: the sampling seed moves on with the optimizer step count.
  Pcg32 rng(s.seed + model.trainer->optimizer().step_count(), kSamplingStream);
  Progress progress(s.steps, static_cast<uint64_t>(tensors.samples()), Progress::choose_mode(s.quiet));
  TrainResult r;
  r.losses.reserve(static_cast<size_t>(s.steps));
  // A resumed run continues from its own field: no initialisation.
  const uint64_t init_steps = s.resume_path.empty() ? s.init_steps : 0;
  for (uint64_t step = 0; step < init_steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = tensors.init_gradients(net, rng, model.trainer->loss_scale());
    if (std::isfinite(loss)) model.trainer->optimizer_step();
    r.init_seconds += seconds_since(t0);
    r.init_loss = loss;
  }
  for (uint64_t step = 1; step <= s.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    tensors.draw(source, rng);
    const EikonalLossValue loss = tensors.gradients(net, s.weights, model.trainer->loss_scale());
    // A non-finite loss ends the run with the parameters of the last good step.
    if (std::isfinite(loss.total)) model.trainer->optimizer_step();
    r.seconds += seconds_since(t0);
    r.losses.push_back(static_cast<float>(loss.total));
    r.last = loss;
    progress.update(step, static_cast<float>(loss.total), r.seconds);
    if (!std::isfinite(loss.total)) {
      r.diverged = true;
      break;
    }
  }
  progress.finish();
  return r;
}

// ---- Held-out evaluation ---------------------------------------------------------------------

double mean_abs(const std::vector<float>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::abs(double(a[i]) - b[i]);
  return a.empty() ? NAN : s / static_cast<double>(a.size());
}

// Mean angle in degrees between the model's gradient and the normal at held-out surface points.
double normal_angle_degrees(DifferentiableObject& net, const SurfacePoints& s) {
  const std::vector<float> g = sdf_gradients(net, s.points.data(), s.size());
  double sum = 0;
  for (int64_t i = 0; i < s.size(); ++i) {
    double dot = 0, norm = 0;
    for (int k = 0; k < 3; ++k) dot += double(g[3 * i + k]) * s.normals[3 * i + k], norm += double(g[3 * i + k]) * g[3 * i + k];
    const double c = norm > 0 ? std::max(-1.0, std::min(1.0, dot / std::sqrt(norm))) : -1.0;
    sum += std::acos(c) * 180.0 / 3.14159265358979323846;
  }
  return s.size() ? sum / static_cast<double>(s.size()) : NAN;
}

struct Heldout {
  nlohmann::ordered_json log;
  double mae = NAN;  // the headline number
};

// Built-in shapes: |learned - exact| at points uniform in the cube and near the surface, |learned|
// on the surface. Points files: |learned| at the held-out tenth of the points (in the unit cube's
// units and the file's). Both: the mean angle between the gradient and the normal there.
Heldout evaluate(DifferentiableObject& net, const SdfSource& source) {
  Heldout h;
  const SurfacePoints& surface = source.heldout_surface();
  const std::vector<float> on_surface = sdf_values(net, surface.points.data(), surface.size());
  const double surface_mae = mean_abs(on_surface, std::vector<double>(on_surface.size(), 0.0));
  const double angle = normal_angle_degrees(net, surface);
  if (!source.has_exact_sdf()) {
    h.mae = surface_mae;
    h.log = {{"surface_points", surface.size()},
             {"surface_mae", finite_or_null(surface_mae)},
             {"surface_mae_file_units", finite_or_null(surface_mae / source.scale())},
             {"normal_angle_deg", finite_or_null(angle)},
             {"note", "a points file gives no distances off the surface: mae is |f| at the held-out tenth of its "
                      "points, in unit-cube units"}};
    return h;
  }
  Pcg32 rng(kShapeSeed, kHeldoutStream);
  std::vector<float> volume(3 * kHeldoutVolumePoints), near(3 * surface.size() * kHeldoutOffsetsPerSurfacePoint);
  for (float& v : volume) v = rng.next_float();
  for (size_t i = 0; i < near.size(); ++i)
    near[i] = clamp01(surface.points[(i / (3 * kHeldoutOffsetsPerSurfacePoint)) * 3 + i % 3] + kHeldoutNearSigma * gaussian(rng));
  auto exact = [&](const std::vector<float>& p) {
    std::vector<double> d(p.size() / 3);
    for (size_t i = 0; i < d.size(); ++i) {
      const double q[3] = {p[3 * i], p[3 * i + 1], p[3 * i + 2]};
      d[i] = source.exact_sdf(q);
    }
    return d;
  };
  const std::vector<float> f_volume = sdf_values(net, volume.data(), kHeldoutVolumePoints);
  const std::vector<float> f_near = sdf_values(net, near.data(), static_cast<int64_t>(near.size() / 3));
  const double volume_mae = mean_abs(f_volume, exact(volume)), near_mae = mean_abs(f_near, exact(near));
  const double n_volume = static_cast<double>(f_volume.size()), n_near = static_cast<double>(f_near.size());
  h.mae = (volume_mae * n_volume + near_mae * n_near) / (n_volume + n_near);
  h.log = {{"mae", finite_or_null(h.mae)},
           {"volume_points", f_volume.size()},
           {"volume_mae", finite_or_null(volume_mae)},
           {"near_surface_points", f_near.size()},
           {"near_surface_mae", finite_or_null(near_mae)},
           {"surface_points", surface.size()},
           {"surface_mae", finite_or_null(surface_mae)},
           {"normal_angle_deg", finite_or_null(angle)},
           {"note", "mae: mean |learned - exact distance| over the volume and near-surface points, in unit-cube units"}};
  return h;
}

struct OutputPaths {
  fs::path slices, loss_plot, log;
};

nlohmann::ordered_json run_log(const Settings& s, const json& config, const SdfSource& source, const TrainResult& t,
                               const Heldout& heldout, size_t n_params, double wall_seconds, const OutputPaths& paths) {
  using ordered_json = nlohmann::ordered_json;
  const uint64_t samples = 2 * s.batch;
  ordered_json surface = source.log_entry();
  ordered_json log = {
      {"tinyfuse_version", TINYFUSE_VERSION},
      {"command", "learn-sdf"},
      {"config_source", !s.resume_path.empty() ? "checkpoint " + s.resume_path
                        : s.config_path.empty() ? std::string("built-in default") : s.config_path},
      {"config", ordered_json::parse(config.dump())},
      {"device", to_string(s.device)},
      {"surface", surface},
      {"seed", s.seed},
      {"steps", s.steps},
      {"steps_done", t.losses.size()},
      {"batch", {{"surface_points", s.batch}, {"eikonal_points", s.batch}}},
      {"loss_weights", {{"surface", s.weights.surface}, {"eikonal", s.weights.eikonal}, {"normal", s.weights.normal}}},
      {"n_params", n_params},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"final_loss", finite_or_null(t.losses.empty() ? NAN : t.losses.back())},
      {"final_terms",
       {{"surface_mean_abs", finite_or_null(t.last.surface)},
        {"eikonal_mean_sq", finite_or_null(t.last.eikonal)},
        {"normal_mean_1_minus_cos", finite_or_null(t.last.normal)}}},
      {"heldout", heldout.log},
      {"samples_per_second", t.seconds > 0 ? static_cast<double>(t.losses.size() * samples) / t.seconds : 0.0},
      {"train_time_s", t.seconds},
      {"wall_time_s", wall_seconds},
      {"outputs", {{"slices", paths.slices.string()}, {"loss_plot", paths.loss_plot.string()}}},
  };
  ordered_json& per_step = log["loss_per_step"] = ordered_json::array();
  for (float l : t.losses) per_step.push_back(finite_or_null(l));
  return log;
}

}  // namespace

const char* learn_sdf_usage() {
  static const std::string text =
      "usage: tinyfuse learn-sdf [options]\n"
      "\n"
      "Fits a network f: [0,1]^3 -> R to the signed distance of a surface (negative inside) with\n"
      "the eikonal loss: each step takes N surface points and N other points (half uniform in the\n"
      "cube, half near the surface) and minimises\n"
      "  surface-weight * mean |f| on the surface\n"
      "  + eikonal-weight * mean (|grad f| - 1)^2 at the other points\n"
      "  + normal-weight * mean (1 - cos(grad f, normal)) on the surface,\n"
      "differentiating through grad f (second derivatives).\n"
      "\n"
      "options:\n"
      "  --shape NAME     a built-in shape with an exact distance: torus (default) or union (a\n"
      "                   sphere, a box and a capsule)\n"
      "  --points FILE    a surface given as points with normals instead: text, one point per line,\n"
      "                   'x y z nx ny nz' (Open3D's .xyzn), '#' comment lines; scaled into the cube,\n"
      "                   every tenth point held out\n"
      "  --config FILE    tiny-cuda-nn JSON config {optimizer, encoding, network} (its loss is not\n"
      "                   used; default: a built-in one, recorded in OUT/log.json)\n"
      "  --steps N        training steps (default " + std::to_string(kDefaultSteps) + ")\n"
      "  --batch N        surface points per step, and as many other points (default " + std::to_string(kDefaultBatch) + ")\n"
      "  --surface-weight W, --eikonal-weight W, --normal-weight W\n"
      "                   the loss terms' weights (default 1, 1, 0.1)\n"
      "  --init-steps N   first fit the distance to the cube's centre for N steps (default " +
      std::to_string(kDefaultInitSteps) + "),\n"
      "                   so the field starts positive away from the surface (not when resuming)\n"
      "  --device D       cpu or cuda (default cpu)\n"
      "  --out DIR        output directory (default ./" + kDefaultOut + "), created if missing\n"
      "  --seed S         seed of the initial parameters and of the batches (default " + std::to_string(kDefaultSeed) + ")\n"
      "  --resume FILE    continue from a checkpoint; every run writes OUT/checkpoint.tfc\n"
      "  --quiet          no progress output (the summary line is still printed)\n"
      "  -h, --help       show this help\n"
      "\n"
      "Writes OUT/checkpoint.tfc first, then OUT/slices.png (slices z, y, x = 0.5: the learned zero\n"
      "level set in black, a built-in shape's exact one in white), OUT/loss.png and OUT/log.json\n"
      "(config, losses, speed, and the mean absolute distance error on held-out points). Outputs\n"
      "never replace inputs; a run whose loss stops being finite stops with an error and writes no\n"
      "checkpoint.\n";
  return text.c_str();
}

int run_learn_sdf(const std::vector<std::string>& args) {
  const auto t_start = std::chrono::steady_clock::now();
  const Options o = Options::parse(args, {{"config", true},
                                          {"shape", true},
                                          {"points", true},
                                          {"steps", true},
                                          {"batch", true},
                                          {"surface-weight", true},
                                          {"eikonal-weight", true},
                                          {"normal-weight", true},
                                          {"device", true},
                                          {"out", true},
                                          {"seed", true},
                                          {"init-steps", true},
                                          {"resume", true},
                                          {"quiet", false},
                                          {"help", false}});
  if (o.has("help")) {
    std::fputs(learn_sdf_usage(), stdout);
    return 0;
  }
  const Settings s = read_settings(o);
  if (s.device == Device::CUDA && gpu_count() == 0)
    throw Error("--device cuda: no CUDA device can be used here (no GPU, a build without the CUDA backend, or no "
                "driver able to run this build's CUDA runtime); run with --device cpu");

  // The model and the surface first: a bad config, device, checkpoint or points file fails before
  // any slow work or any output.
  BuildOptions build;
  build.device = s.device;
  Model model;
  if (!s.resume_path.empty()) {
    model = load_model(s.resume_path, build);
    if (!s.config_path.empty() && read_config_file(s.config_path) != model.config)
      throw UsageError("--config differs from the config stored in " + s.resume_path + "; leave --config out to resume");
    if (model.network->input_width() != 3 || model.network->output_width() < 1)
      throw UsageError("--resume " + s.resume_path + " holds a model of " + std::to_string(model.network->input_width()) +
                       " inputs, not a learn-sdf one (3 inputs: a point in the unit cube)");
  } else {
    model = create_from_config(3, 1, s.config_path.empty() ? jobs::default_learn_sdf_config() : read_config_file(s.config_path),
                               build, s.seed);
  }
  const SdfSource source = load_source(s);
  check_second_derivatives(*model.network, source, s);

  const fs::path out(s.out_dir);
  const OutputPaths paths{out / "slices.png", out / "loss.png", out / "log.json"};
  const fs::path checkpoint_path = out / "checkpoint.tfc";
  refuse_overwriting_inputs({{"--config", s.config_path}, {"--points", s.points_path}, {"--resume", s.resume_path}},
                            {paths.slices, paths.loss_plot, paths.log}, checkpoint_path, fs::path());
  make_output_directory(out);

  const TrainResult trained = train(model, source, s);

  // The trained state first (unless training diverged: an earlier checkpoint then survives), then
  // the pictures and the evaluation, which may run out of memory, then the log in every case.
  const std::string checkpoint = checkpoint_path.string();
  if (!trained.diverged) save_checkpoint(checkpoint, model);
  Heldout heldout;
  std::string picture_error;
  try {
    save_png(jobs::render_loss_plot(trained.losses), paths.loss_plot.string());
    save_png(render_sdf_slices(*model.network, source), paths.slices.string());
    heldout = evaluate(*model.network, source);
  } catch (const std::exception& e) {
    picture_error = e.what();
  }
  nlohmann::ordered_json log =
      run_log(s, model.config, source, trained, heldout, model.network->n_params(), seconds_since(t_start), paths);
  if (!picture_error.empty()) log["error"] = picture_error;
  const std::string log_text = log.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  write_file_atomic(paths.log.string(), log_text.data(), log_text.size(), "learn-sdf");

  const float final_loss = trained.losses.empty() ? NAN : trained.losses.back();
  const uint64_t steps_done = trained.losses.size();
  if (trained.diverged)
    throw Error("training diverged: the loss is " + std::to_string(final_loss) + " at step " + std::to_string(steps_done) +
                " (try a lower optimizer.learning_rate); the parameters after step " + std::to_string(steps_done - 1) +
                " are in the outputs in " + out.string() + " (no checkpoint was written" +
                (fs::exists(checkpoint_path) ? ", " + checkpoint + " is an earlier one)" : ")") +
                (picture_error.empty() ? "" : "; writing the pictures failed too: " + picture_error));
  if (!picture_error.empty())
    throw Error("training finished and " + checkpoint + " and " + paths.log.string() +
                " were written, but the pictures or the evaluation failed: " + picture_error);
  const double rate = trained.seconds > 0 ? static_cast<double>(steps_done * 2 * s.batch) / trained.seconds : 0.0;
  std::printf("learn-sdf: %llu steps x %llu points in %s (%s points/s), final loss %.4e, held-out mean |SDF error| "
              "%.4f, wall %s; wrote %s, %s, %s, %s\n",
              static_cast<unsigned long long>(steps_done), static_cast<unsigned long long>(2 * s.batch),
              format_duration(trained.seconds).c_str(), format_rate(rate).c_str(), final_loss, heldout.mae,
              format_duration(seconds_since(t_start)).c_str(), paths.slices.string().c_str(),
              paths.loss_plot.string().c_str(), paths.log.string().c_str(), checkpoint.c_str());
  return 0;
}

}  // namespace tinyfuse::cli
