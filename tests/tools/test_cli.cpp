// `tinyfuse learn-image` against hostile input, run in-process: configs and checkpoints nested far
// beyond the stack, files that are not regular files, an output that would replace an input, a
// run that diverges, pictures that cannot be written after training, rendering that runs out of
// memory, snapshots that cannot be written, and the --seed range. Each gets a clear error and
// nothing saved is lost.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "args.h"
#include "learn_image.h"
#include "reconstruct.h"
#include "testing/expect_error.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::cli::UsageError;
namespace fs = std::filesystem;

namespace {

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tinyfuse_cli_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    small_config_ = (dir_ / "small.json").string();
    write(small_config_, R"({"network": {"otype": "PortableMLP", "n_neurons": 8, "n_hidden_layers": 1}})");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // learn-image with `args` plus a quick run's options (unless given) and --out OUT.
  int run(std::vector<std::string> args, const fs::path& out) {
    auto has = [&](const char* o) { return std::find(args.begin(), args.end(), o) != args.end(); };
    if (!has("--steps")) args.insert(args.end(), {"--steps", "2"});
    if (!has("--batch")) args.insert(args.end(), {"--batch", "64"});
    if (!has("--config") && !has("--resume")) args.insert(args.end(), {"--config", small_config_});
    args.insert(args.end(), {"--quiet", "--out", out.string()});
    return cli::run_learn_image(args);
  }

  template <typename E>
  std::string expect_error(std::vector<std::string> args, const fs::path& out, const std::vector<std::string>& needles) {
    return tinyfuse::testing::expect_error_message<E>([&] { run(std::move(args), out); }, needles, "learn-image");
  }

  fs::path dir_;
  std::string small_config_;
};

TEST_F(Cli, DeeplyNestedConfigsAndCheckpointsGetAnErrorNamingTheFile) {
  const fs::path deep = dir_ / "d.json";
  write(deep, std::string(100000, '[') + std::string(100000, ']'));  // the issue's reproducer
  expect_error<ConfigError>({"--config", deep.string()}, dir_ / "out", {"config file \"" + deep.string() + "\"", "kMaxJsonDepth"});
  // A 200 KB file that is not a checkpoint, given to --resume.
  const fs::path not_checkpoint = dir_ / "not_a_checkpoint.tfc";
  std::string bytes(8, '\0');
  const uint64_t n = 200000;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
  write(not_checkpoint, bytes + "{\"a\":" + std::string(n - 6, '[') + "}");
  expect_error<Error>({"--resume", not_checkpoint.string()}, dir_ / "out", {"not_a_checkpoint.tfc", "does not parse"});
  EXPECT_FALSE(fs::exists(dir_ / "out"));  // refused before anything was written
}

TEST_F(Cli, NonRegularFilesAreRefusedAndNeverBlock) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo.string()}) {
    expect_error<Error>({"--config", path}, dir_ / "out", {path, "not a regular file"});
    expect_error<Error>({"--resume", path}, dir_ / "out", {path, "not a regular file"});
    expect_error<Error>({"--image", path}, dir_ / "out", {path, "not a regular file"});
  }
}

TEST_F(Cli, ANumberBeyondDoubleNamesTheFileAndKey) {
  const fs::path config = dir_ / "lr.json";
  write(config, R"({"optimizer": {"learning_rate": 1e400}, "network": {"otype": "PortableMLP"}})");
  expect_error<ConfigError>({"--config", config.string()}, dir_ / "out", {"lr.json", "optimizer.learning_rate", "1e400"});
}

TEST_F(Cli, RepeatedKeysInAConfigFileAreRefused) {
  const fs::path config = dir_ / "dup.json";
  write(config, R"({"network": {"otype": "PortableMLP"}, "network": {"otype": "CutlassMLP"}})");
  expect_error<ConfigError>({"--config", config.string()}, dir_ / "out", {"dup.json", "\"network\"", "appears twice"});
}

TEST_F(Cli, AnOutputNeverReplacesAnInput) {
  // A first run gives a picture to use as --image and a checkpoint to use as --resume.
  ASSERT_EQ(run({}, dir_ / "first"), 0);
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  struct Case {
    std::string option, name;
  };
  const Case cases[] = {{"--image", "loss.png"}, {"--image", "reconstruction.png"}, {"--config", "log.json"},
                        {"--image", "checkpoint.tfc"}, {"--config", "checkpoint.tfc"}};
  for (const Case& c : cases) {
    const fs::path input = out / c.name;
    fs::copy_file(c.option == "--image" ? dir_ / "first" / "target.png" : fs::path(small_config_), input,
                  fs::copy_options::overwrite_existing);
    const std::string before = read(input);
    expect_error<UsageError>({c.option, input.string()}, out, {c.option, "would be overwritten"});
    EXPECT_EQ(read(input), before) << c.name;
    fs::remove(input);
  }
  // The same file under another name (a symbolic link) is found too.
  fs::copy_file(dir_ / "first" / "target.png", out / "loss.png");
  fs::create_symlink(out / "loss.png", dir_ / "picture.png");
  const std::string before = read(out / "loss.png");
  expect_error<UsageError>({"--image", (dir_ / "picture.png").string()}, out, {"would be overwritten"});
  EXPECT_EQ(read(out / "loss.png"), before);
  // Snapshots go to OUT/snapshots: inputs there are refused when --save-every is given.
  fs::create_directories(out / "snapshots");
  fs::copy_file(dir_ / "first" / "target.png", out / "snapshots" / "step-00000001.png");
  expect_error<UsageError>({"--image", (out / "snapshots" / "step-00000001.png").string(), "--save-every", "1"}, out,
                           {"snapshots"});
  // Resuming in place replaces the checkpoint with its continuation: allowed.
  EXPECT_EQ(run({"--resume", (dir_ / "first" / "checkpoint.tfc").string()}, dir_ / "first"), 0);
  EXPECT_EQ(load_model((dir_ / "first" / "checkpoint.tfc").string()).optimizer->step_count(), 4u);
}

TEST_F(Cli, TrainingThatDivergesEndsWithAClearErrorAndKeepsTheEarlierCheckpoint) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(run({}, out), 0);  // an earlier good run's checkpoint
  const std::string checkpoint = read(out / "checkpoint.tfc");
  const fs::path config = dir_ / "diverges.json";
  write(config, R"({"optimizer": {"otype": "SGD", "learning_rate": 1e30},
                    "network": {"otype": "PortableMLP", "n_neurons": 8, "n_hidden_layers": 1}})");
  const std::string msg = expect_error<Error>({"--config", config.string(), "--steps", "50"}, out,
                                              {"training diverged", "at step", "is an earlier one"});
  EXPECT_EQ(read(out / "checkpoint.tfc"), checkpoint);
  const json log = json::parse(read(out / "log.json"));
  EXPECT_LT(log.at("steps_done").get<int>(), 50);
  EXPECT_TRUE(log.at("final_loss").is_null());  // the non-finite loss that stopped it
  EXPECT_TRUE(fs::exists(out / "loss.png"));
  EXPECT_TRUE(fs::exists(out / "reconstruction.png"));
}

TEST_F(Cli, TheCheckpointAndLogAreWrittenEvenWhenThePicturesCannotBe) {
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "reconstruction.png");  // a directory where the picture goes
  expect_error<Error>({}, out, {"training finished", "checkpoint.tfc", "writing the pictures failed"});
  Model m = load_model((out / "checkpoint.tfc").string());
  EXPECT_EQ(m.optimizer->step_count(), 2u);
  const json log = json::parse(read(out / "log.json"));
  EXPECT_EQ(log.at("steps_done"), 2);
  EXPECT_NE(log.at("error").get<std::string>().find("reconstruction.png"), std::string::npos);
}

TEST_F(Cli, ASnapshotThatCannotBeWrittenStopsTheSnapshotsNotTheTraining) {
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "snapshots" / "step-00000001.png");  // a directory where the picture goes
  EXPECT_EQ(run({"--steps", "3", "--save-every", "1"}, out), 0);
  EXPECT_EQ(load_model((out / "checkpoint.tfc").string()).optimizer->step_count(), 3u);
  const json log = json::parse(read(out / "log.json"));
  EXPECT_NE(log.at("snapshot_error").get<std::string>().find("step-00000001.png"), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "snapshots" / "step-00000002.png"));  // no more snapshots after the failure
}

TEST_F(Cli, SeedRangeIsStatedAndHeld) {
  EXPECT_EQ(run({"--seed", "18446744073709551615"}, dir_ / "out"), 0);  // 2^64 - 1: the top of the stated range
  expect_error<UsageError>({"--seed", "18446744073709551616"}, dir_ / "out",
                           {"from 0 to 18446744073709551615", "got 18446744073709551616"});
  expect_error<UsageError>({"--seed", "99999999999999999999999"}, dir_ / "out", {"from 0 to 18446744073709551615"});
}

TEST_F(Cli, CudaWithoutAUsableDeviceGivesAWholeMessage) {
  const std::string msg = expect_error<Error>({"--device", "cuda"}, dir_ / "out", {});
  if (gpu_count() > 0) GTEST_SKIP() << "a GPU is usable here";
#ifdef TINYFUSE_WITH_CUDA
  EXPECT_EQ(msg.rfind("--device cuda: no CUDA device can be used here", 0), 0u) << msg;
#else
  EXPECT_NE(msg.find("this build has no CUDA backend"), std::string::npos) << msg;
#endif
}

// A model whose inference refuses more than `max_rows` rows as out of memory (nothing changed),
// and otherwise writes (x, y, x * y).
class MemoryBoundModel final : public DifferentiableObject {
 public:
  explicit MemoryBoundModel(int64_t max_rows) : max_rows_(max_rows) {}
  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return DType::F32; }
  DType input_dtype() const override { return DType::F32; }
  DType output_dtype() const override { return DType::F32; }
  uint32_t input_width() const override { return 2; }
  uint32_t padded_output_width() const override { return 3; }
  uint32_t output_width() const override { return 3; }
  size_t n_params() const override { return 0; }
  std::vector<ParamSegment> param_segments() const override { return {}; }
  void set_params(const TensorView&, const TensorView&, const TensorView&) override {}
  void initialize_params(Pcg32&, float*, float) override {}
  void inference(const TensorView& input, const TensorView& output) override {
    if (input.rows() > max_rows_) throw OutOfMemoryError(0, "a test batch", "more than the test allows");
    ++calls;
    const float* x = static_cast<const float*>(input.data);
    float* y = static_cast<float*>(output.data);
    for (int64_t r = 0; r < input.rows(); ++r) {
      y[3 * r] = x[2 * r];
      y[3 * r + 1] = x[2 * r + 1];
      y[3 * r + 2] = x[2 * r] * x[2 * r + 1];
    }
  }
  std::unique_ptr<Context> forward(const TensorView&, const TensorView*, bool, bool) override { return nullptr; }
  void backward(const Context&, const TensorView&, const TensorView&, const TensorView&, const TensorView*, bool,
                GradientMode) override {}
  json hyperparams() const override { return json::object(); }
  std::string name() const override { return "MemoryBoundModel"; }
  int calls = 0;

 private:
  int64_t max_rows_;
};

TEST(CliRender, ChunksThatRunOutOfMemoryAreRenderedInHalves) {
  MemoryBoundModel unbounded(INT64_MAX), bounded(1000);
  const jobs::Image a = cli::render_model(unbounded, 300, 200), b = cli::render_model(bounded, 300, 200);
  EXPECT_EQ(a.rgb, b.rgb);
  EXPECT_EQ(unbounded.calls, 1);
  EXPECT_EQ(bounded.calls, (60000 + 937) / 938);  // 60000 rows halved down to 938 per call
  MemoryBoundModel none(0);
  EXPECT_THROW(cli::render_model(none, 4, 4), OutOfMemoryError);  // not even one row fits
}

}  // namespace
