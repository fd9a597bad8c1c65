#include "learn_image.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "args.h"
#ifdef TINYFUSE_WITH_CUDA
#include "gpu_sampler.h"
#endif
#include "core/atomic_file.h"
#include "image_files.h"
#include "jobs/default_config.h"
#include "jobs/loss_plot.h"
#include "jobs/test_pattern.h"
#include "progress.h"
#include "reconstruct.h"
#include "run_files.h"
#include "staging.h"
#include "tinyfuse/checkpoint.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/random.h"

namespace tinyfuse::cli {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kDefaultSteps = 1000;  // about 40 s on 2 CPU cores with the default config
constexpr uint64_t kDefaultBatchCpu = uint64_t(1) << 13;
constexpr uint64_t kDefaultBatchCuda = uint64_t(1) << 18;  // what a GPU needs to be busy
constexpr uint64_t kMaxBatch = uint64_t(1) << 22;
constexpr uint64_t kDefaultSeed = 1337;
constexpr uint64_t kSamplingStream = 0x6c6561726eULL;  // batch positions: a stream of their own
constexpr const char* kDefaultOut = "learn-image-out";

struct Settings {
  std::string config_path, image_path, out_dir, resume_path;
  uint64_t steps, batch, seed, save_every;
  Device device;
  bool quiet;
};

Settings read_settings(const Options& o) {
  Settings s;
  s.config_path = o.get("config", "");
  s.image_path = o.get("image", "");
  s.out_dir = o.get("out", kDefaultOut);
  s.resume_path = o.get("resume", "");
  if (s.out_dir.empty()) throw UsageError("option '--out' needs a directory");
  s.steps = o.get_uint("steps", kDefaultSteps, 1, 1000000);
  s.seed = o.get_uint("seed", kDefaultSeed, 0, UINT64_MAX);
  s.save_every = o.get_uint("save-every", 0, 0, UINT64_MAX);
  s.quiet = o.has("quiet");
  s.device = o.get_device();
  s.batch = o.get_uint("batch", s.device == Device::CUDA ? kDefaultBatchCuda : kDefaultBatchCpu, 1, kMaxBatch);
  return s;
}

std::string snapshot_name(uint64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "step-%08llu.png", static_cast<unsigned long long>(step));
  return buf;
}

// Training: every step draws `batch` uniform positions and their bilinear target colours.
struct TrainResult {
  std::vector<float> losses;
  double seconds = 0;
  bool diverged = false;
  std::string snapshot_error;  // why snapshots stopped, if they did
};

// Where each step's batch comes from: drawn on the host and uploaded (CPU), or drawn by a kernel
// from the picture uploaded once (CUDA). Both draw the same positions for a seed.
class BatchSource {
 public:
  BatchSource(const jobs::Image& target, const DifferentiableObject& net, int64_t batch, uint64_t seed)
      : target_(target), batch_(batch), rng_(seed, kSamplingStream) {
#ifdef TINYFUSE_WITH_CUDA
    if (net.device() == Device::CUDA) {
      gpu_ = std::make_unique<GpuImageSampler>(target, batch, net.input_dtype(), seed, kSamplingStream);
      return;
    }
#endif
    positions_ = std::make_unique<StagedMatrix>(batch, 2, net.input_dtype(), net.device());
    colours_ = std::make_unique<StagedMatrix>(batch, 3, DType::F32, net.device());
  }

  void next(TensorView& positions, TensorView& colours) {
#ifdef TINYFUSE_WITH_CUDA
    if (gpu_) {
      gpu_->next(positions, colours);
      return;
    }
#endif
    float* xy = positions_->host();
    for (int64_t i = 0; i < 2 * batch_; ++i) xy[i] = rng_.next_float();
    jobs::sample_bilinear(target_, xy, batch_, colours_->host());
    positions = positions_->upload(batch_);
    colours = colours_->upload(batch_);
  }

 private:
  const jobs::Image& target_;
  int64_t batch_;
  Pcg32 rng_;
  std::unique_ptr<StagedMatrix> positions_, colours_;
#ifdef TINYFUSE_WITH_CUDA
  std::unique_ptr<GpuImageSampler> gpu_;
#endif
};

TrainResult train(Model& model, const jobs::Image& target, const Settings& s, const fs::path& out) {
  DifferentiableObject& net = *model.network;
  const int64_t batch = static_cast<int64_t>(s.batch);
  // A resumed run draws new batches: the sampling seed moves on with the optimizer step count.
  BatchSource batches(target, net, batch, s.seed + model.trainer->optimizer().step_count());
  Progress progress(s.steps, s.batch, Progress::choose_mode(s.quiet));
  if (s.save_every) make_output_directory(out / "snapshots");

  TrainResult r;
  r.losses.reserve(static_cast<size_t>(s.steps));
  for (uint64_t step = 1; step <= s.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    TensorView positions, colours;
    batches.next(positions, colours);
    // Trainer::training_step's three parts, so that a non-finite loss ends the run here (with
    // the parameters of the last good step) instead of as an exception.
    model.trainer->forward_backward(positions, colours);
    const float loss = model.trainer->last_loss();
    if (std::isfinite(loss)) model.trainer->optimizer_step();
    r.seconds += seconds_since(t0);
    r.losses.push_back(loss);
    progress.update(step, loss, r.seconds);
    if (!std::isfinite(loss)) {
      r.diverged = true;
      break;
    }
    if (s.save_every && step % s.save_every == 0 && step < s.steps && r.snapshot_error.empty()) {
      // A snapshot that cannot be written (a full disk, say) stops the snapshots, not the training.
      try {
        save_png(render_model(net, target.width, target.height), (out / "snapshots" / snapshot_name(step)).string());
      } catch (const std::exception& e) {
        r.snapshot_error = "snapshot of step " + std::to_string(step) + ": " + e.what();
      }
    }
  }
  progress.finish();
  return r;
}

struct OutputPaths {
  fs::path reconstruction, loss_plot, log, target;  // target empty when the image came from --image
};

struct RunFacts {
  uint64_t steps_done;
  double train_seconds, wall_seconds, psnr_db;
  size_t n_params;
  double samples_per_second(uint64_t batch) const {
    return train_seconds > 0 ? static_cast<double>(steps_done * batch) / train_seconds : 0.0;
  }
};

// The contents of log.json: what was run, how fast, how well, and the loss of every step.
nlohmann::ordered_json run_log(const Settings& s, const json& config, const jobs::Image& target, const TrainResult& trained,
                               const RunFacts& f, const OutputPaths& paths) {
  using ordered_json = nlohmann::ordered_json;
  const bool builtin = s.image_path.empty();
  ordered_json outputs = {{"reconstruction", paths.reconstruction.string()}, {"loss_plot", paths.loss_plot.string()}};
  if (!paths.target.empty()) outputs["target"] = paths.target.string();
  ordered_json log = {
      {"tinyfuse_version", TINYFUSE_VERSION},
      {"command", "learn-image"},
      {"config_source", !s.resume_path.empty() ? "checkpoint " + s.resume_path
                        : s.config_path.empty() ? std::string("built-in default") : s.config_path},
      {"config", ordered_json::parse(config.dump())},
      {"device", to_string(s.device)},
      {"image",
       {{"source", builtin ? std::string("built-in test pattern") : s.image_path},
        {"width", target.width},
        {"height", target.height}}},
      {"seed", s.seed},
      {"steps", s.steps},
      {"steps_done", f.steps_done},
      {"batch", s.batch},
      {"n_params", f.n_params},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"final_loss", finite_or_null(trained.losses.empty() ? NAN : trained.losses.back())},
      {"psnr_db", finite_or_null(f.psnr_db)},
      {"samples_per_second", f.samples_per_second(s.batch)},
      {"train_time_s", f.train_seconds},
      {"wall_time_s", f.wall_seconds},
      {"outputs", outputs},
  };
  ordered_json& per_step = log["loss_per_step"] = ordered_json::array();
  for (float l : trained.losses) per_step.push_back(finite_or_null(l));
  return log;
}

}  // namespace

const char* learn_image_usage() {
  static const std::string text =
      "usage: tinyfuse learn-image [options]\n"
      "\n"
      "Fits a network to a picture: input = pixel position in [0,1]^2, output = RGB. Each step\n"
      "trains on a batch of random positions with bilinearly interpolated target colours.\n"
      "\n"
      "options:\n"
      "  --config FILE    tiny-cuda-nn JSON config {loss, optimizer, encoding, network}\n"
      "                   (default: a built-in one, recorded in OUT/log.json)\n"
      "  --image FILE     target picture, PNG/JPEG/BMP/TGA (default: a built-in 256x256 test\n"
      "                   pattern, also written to OUT/target.png)\n"
      "  --steps N        training steps (default " + std::to_string(kDefaultSteps) + ")\n"
      "  --batch N        positions per step (default " + std::to_string(kDefaultBatchCpu) + " on cpu, " +
      std::to_string(kDefaultBatchCuda) + " on cuda, where\n"
      "                   the batches are drawn on the GPU)\n"
      "  --device D       cpu or cuda (default cpu)\n"
      "  --out DIR        output directory (default ./" + kDefaultOut + "), created if missing\n"
      "  --seed S         seed of the initial parameters and of the batches (default " + std::to_string(kDefaultSeed) + ")\n"
      "  --resume FILE    continue from a checkpoint (config, parameters, optimizer state); every\n"
      "                   run writes OUT/checkpoint.tfc (FILE itself when it is that file)\n"
      "  --save-every N   also write OUT/snapshots/step-NNNNNNNN.png every N steps\n"
      "  --quiet          no progress output (the summary line is still printed)\n"
      "  -h, --help       show this help\n"
      "\n"
      "Writes OUT/checkpoint.tfc first, then OUT/reconstruction.png (the learned picture at full\n"
      "resolution), OUT/loss.png (loss per step, log scale) and OUT/log.json (config, losses, speed,\n"
      "PSNR). Outputs never replace inputs; a run whose loss stops being finite stops with an error\n"
      "and writes no checkpoint.\n";
  return text.c_str();
}

int run_learn_image(const std::vector<std::string>& args) {
  const auto t_start = std::chrono::steady_clock::now();
  const Options o = Options::parse(args, {{"config", true},
                                          {"image", true},
                                          {"steps", true},
                                          {"batch", true},
                                          {"device", true},
                                          {"out", true},
                                          {"seed", true},
                                          {"save-every", true},
                                          {"resume", true},
                                          {"quiet", false},
                                          {"help", false}});
  if (o.has("help")) {
    std::fputs(learn_image_usage(), stdout);
    return 0;
  }
  const Settings s = read_settings(o);
#ifdef TINYFUSE_WITH_CUDA
  if (s.device == Device::CUDA && gpu_count() == 0)
    throw Error("--device cuda: no CUDA device can be used here (no GPU, or no driver able to run this build's CUDA "
                "runtime); run with --device cpu");
#endif

  // Build the model first: a bad config, device or checkpoint fails before any slow work.
  BuildOptions build;
  build.device = s.device;
  Model model;
  if (!s.resume_path.empty()) {
    // Continue from a checkpoint: its config, parameters and optimizer state. A --config given
    // as well must be the checkpoint's own.
    model = load_model(s.resume_path, build);
    if (!s.config_path.empty() && read_config_file(s.config_path) != model.config)
      throw UsageError("--config differs from the config stored in " + s.resume_path + "; leave --config out to resume");
  } else {
    model = create_from_config(2, 3, s.config_path.empty() ? jobs::default_learn_image_config() : read_config_file(s.config_path),
                               build, s.seed);
  }
  const json& config = model.config;

  const bool builtin = s.image_path.empty();
  const jobs::Image target = builtin ? jobs::make_test_pattern(256) : load_image(s.image_path);
  const fs::path out(s.out_dir);
  const OutputPaths paths{out / "reconstruction.png", out / "loss.png", out / "log.json",
                          builtin ? out / "target.png" : fs::path()};
  const fs::path checkpoint_path = out / "checkpoint.tfc";
  refuse_overwriting_inputs({{"--image", s.image_path}, {"--config", s.config_path}, {"--resume", s.resume_path}},
                            {paths.reconstruction, paths.loss_plot, paths.log, paths.target}, checkpoint_path,
                            s.save_every ? out / "snapshots" : fs::path());
  make_output_directory(out);
  if (builtin) save_png(target, paths.target.string());

  const TrainResult trained = train(model, target, s, out);

  // What is hardest to redo is written first: the trained state (unless training diverged; an
  // earlier checkpoint then survives), then the pictures, of which rendering the model may run
  // out of memory or time, then the log in every case.
  const std::string checkpoint = checkpoint_path.string();
  if (!trained.diverged) save_checkpoint(checkpoint, model);  // atomic: an earlier one survives a failure
  double quality = NAN;
  std::string picture_error;
  try {
    save_png(jobs::render_loss_plot(trained.losses), paths.loss_plot.string());
    const jobs::Image reconstruction = render_model(*model.network, target.width, target.height);
    quality = psnr(reconstruction, target);
    save_png(reconstruction, paths.reconstruction.string());
  } catch (const std::exception& e) {
    picture_error = e.what();
  }
  const RunFacts facts{trained.losses.size(), trained.seconds, seconds_since(t_start), quality,
                       model.network->n_params()};
  nlohmann::ordered_json log = run_log(s, config, target, trained, facts, paths);
  if (!picture_error.empty()) log["error"] = picture_error;
  if (!trained.snapshot_error.empty()) log["snapshot_error"] = trained.snapshot_error;
  const std::string log_text = log.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  write_file_atomic(paths.log.string(), log_text.data(), log_text.size(), "learn-image");

  const float final_loss = trained.losses.empty() ? NAN : trained.losses.back();
  if (trained.diverged)
    throw Error("training diverged: the loss is " + std::to_string(final_loss) + " at step " +
                std::to_string(facts.steps_done) + " (try a lower optimizer.learning_rate); the parameters after step " +
                std::to_string(facts.steps_done - 1) + " are in the outputs in " + out.string() +
                " (no checkpoint was written" + (fs::exists(checkpoint_path) ? ", " + checkpoint + " is an earlier one)" : ")") +
                (picture_error.empty() ? "" : "; writing the pictures failed too: " + picture_error));
  if (!picture_error.empty())
    throw Error("training finished and " + checkpoint + " and " + paths.log.string() +
                " were written, but writing the pictures failed: " + picture_error);

  std::string written = paths.reconstruction.string() + ", " + paths.loss_plot.string() + ", " + paths.log.string() +
                        ", " + checkpoint;
  if (builtin) written += ", " + paths.target.string();
  std::printf("learn-image: %llu steps x %llu samples in %s (%s samples/s), final loss %.4e, PSNR %.2f dB, wall %s; wrote %s\n",
              static_cast<unsigned long long>(facts.steps_done), static_cast<unsigned long long>(s.batch),
              format_duration(facts.train_seconds).c_str(), format_rate(facts.samples_per_second(s.batch)).c_str(),
              final_loss, quality, format_duration(facts.wall_seconds).c_str(), written.c_str());
  if (!trained.snapshot_error.empty())
    std::fprintf(stderr, "learn-image: warning: snapshots stopped: %s\n", trained.snapshot_error.c_str());
  return 0;
}

}  // namespace tinyfuse::cli
