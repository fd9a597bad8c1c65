// Hostile input (docs/ERRORS.md, "Limits"): JSON nested far beyond the stack, configs that grow by
// nesting, repeated keys, numbers beyond double, models larger than the machine, files that are
// not regular files or too large, checkpoints whose config names a huge model, messages cut
// inside a UTF-8 character, and temporary files of interrupted saves. Each gets a clear error of
// the documented type, and nothing saved is lost.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/atomic_file.h"
#include "core/checkpoint_bytes.h"
#include "core/json_text.h"
#include "core/safetensors.h"
#include "core/text.h"
#include "testing/forged_checkpoint.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fs = std::filesystem;

namespace {

// Far deeper than any stack holds when a recursive serializer or comparison walks it.
constexpr size_t kDeep = 100000;

std::string deep_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string deep_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  return s + std::string(depth, '}');
}

// A json value nested `depth` arrays deep, built without recursion.
json deep_value(size_t depth) {
  json v = json::array();
  for (size_t i = 1; i < depth; ++i) v = json::array({std::move(v)});
  return v;
}

// n EMA optimizers wrapped around an Adam, as config text.
std::string nested_ema(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += "{\"otype\":\"EMA\",\"nested\":";
  return s + "{\"otype\":\"Adam\"}" + std::string(n, '}');
}
// n Composite encodings wrapped around an Identity, as config text.
std::string nested_composite(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += "{\"otype\":\"Composite\",\"nested\":[";
  s += "{\"otype\":\"Identity\"}";
  for (size_t i = 0; i < n; ++i) s += "]}";
  return s;
}
std::string model_text(const std::string& section, const std::string& config) {
  return "{\"" + section + "\":" + config + ",\"network\":{\"otype\":\"PortableMLP\",\"n_neurons\":16,\"n_hidden_layers\":1}}";
}

// True when `s` is well-formed UTF-8 (what Python needs to turn a message into str).
bool is_utf8(const std::string& s) { return valid_utf8(s) == s; }

template <typename E, typename F>
E expect_throw(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "expected \"" << n << "\" in: " << msg;
    EXPECT_TRUE(is_utf8(msg)) << msg;
    return e;
  }
  ADD_FAILURE() << "did not throw " << typeid(E).name();
  throw std::logic_error("unreachable");
}

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("tinyfuse_hostile_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

json small_model_config() {
  return {{"loss", {{"otype", "L2"}}},
          {"optimizer", {{"otype", "Adam"}}},
          {"network", {{"otype", "PortableMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}}};
}

}  // namespace

// ---- JSON text -------------------------------------------------------------------------------

TEST(HostileJson, DeepArraysAndObjectsAreRefusedAtTheDepthLimit) {
  for (const std::string& text : {deep_arrays(kDeep), deep_objects(kDeep)}) {
    const auto e = expect_throw<JsonError>([&] { parse_json_text(text); }, {"deeper than 64 levels", "kMaxJsonDepth"});
    EXPECT_FALSE(e.path().empty());
  }
  // The limit itself is accepted, one more level is not.
  EXPECT_NO_THROW(parse_json_text(deep_arrays(kMaxJsonDepth)));
  EXPECT_NO_THROW(parse_json_text(deep_objects(kMaxJsonDepth)));
  EXPECT_THROW(parse_json_text(deep_arrays(kMaxJsonDepth + 1)), JsonError);
  EXPECT_THROW(parse_json_text(deep_objects(kMaxJsonDepth + 1)), JsonError);
}

TEST(HostileJson, RepeatedKeysAreRefusedWithTheirPath) {
  auto e = expect_throw<JsonError>([] { parse_json_text(R"({"network": {}, "network": {}})"); }, {"appears twice"});
  EXPECT_EQ(e.path(), "network");
  e = expect_throw<JsonError>([] { parse_json_text(R"({"a": [1, {"b": 1, "c": 2, "b": 3}]})"); }, {"appears twice"});
  EXPECT_EQ(e.path(), "a[1].b");
  // The same key in different objects is fine.
  EXPECT_NO_THROW(parse_json_text(R"({"a": {"otype": 1}, "b": {"otype": 2}, "c": [{"otype": 3}, {"otype": 4}]})"));
}

TEST(HostileJson, NumbersBeyondDoubleNameTheirKey) {
  const auto e = expect_throw<JsonError>([] { parse_json_text(R"({"optimizer": {"learning_rate": 1e400}})"); },
                                         {"not valid JSON", "1e400"});
  EXPECT_EQ(e.path(), "optimizer.learning_rate");
}

TEST(HostileJson, ExcerptsOfDeepValuesAreBoundedAndSerializeNoMore) {
  const json v = deep_value(kDeep);
  EXPECT_THROW(check_json_depth(v), JsonError);
  const std::string s = json_excerpt(v, 80);
  EXPECT_EQ(s.size(), 80u);
  EXPECT_EQ(s, std::string(77, '[') + "...");
  EXPECT_EQ(json_excerpt(json::parse(R"({"b": [1, 2], "a": "x"})")), R"({"a":"x","b":[1,2]})");
}

TEST(HostileJson, ExcerptsAndMessagesNeverCutInsideACharacter) {
  std::string otype;
  for (int i = 0; i < 60; ++i) otype += "\xC3\xA9";  // "é" x 60: 120 bytes
  for (size_t n = 4; n < 130; ++n) EXPECT_TRUE(is_utf8(json_excerpt(json(otype), n))) << n;
  for (size_t n = 0; n < 130; ++n) EXPECT_TRUE(is_utf8(shorten(otype, n))) << n;
  // The config error of such an otype (the case Python raised UnicodeDecodeError for).
  const auto e = expect_throw<ConfigError>([&] { create_network({{"otype", otype}}, 2, 1); }, {"unknown otype"});
  EXPECT_TRUE(is_utf8(e.value()));
  // Bytes that are not UTF-8 at all are shown, not passed on.
  const Error bad(std::string("bad \xC3 byte \xFF"));
  EXPECT_STREQ(bad.what(), "bad \\xC3 byte \\xFF");
}

// ---- configs ---------------------------------------------------------------------------------

TEST(HostileConfig, DeepConfigTextIsAConfigErrorNamingTheSource) {
  for (const std::string& text : {deep_arrays(kDeep), deep_objects(kDeep)})
    expect_throw<ConfigError>([&] { parse_config(text, "config file \"d.json\""); },
                              {"config file \"d.json\"", "kMaxJsonDepth"});
  expect_throw<ConfigError>([] { parse_config(R"({"loss": {}, "network": {"otype": "MLP", "otype": "PortableMLP"}})", "x"); },
                            {"\"network.otype\"", "appears twice"});
}

TEST(HostileConfig, DeepJsonValuesHandedToTheFactoryAreConfigErrors) {
  // (Moved, never copied: copying a json value recurses over its depth, in tests as anywhere.)
  const json deep = deep_value(kDeep);
  json config = small_model_config();
  config["network"]["n_neurons"] = deep_value(kDeep);
  expect_throw<ConfigError>([&] { create_from_config(2, 1, deep); }, {"kMaxJsonDepth"});
  expect_throw<ConfigError>([&] { create_from_config(2, 1, config); }, {"network.n_neurons", "kMaxJsonDepth"});
  expect_throw<ConfigError>([&] { create_network(deep, 2, 1); }, {"kMaxJsonDepth"});
  expect_throw<ConfigError>([&] { create_encoding(deep, 2); }, {"kMaxJsonDepth"});
  expect_throw<ConfigError>([&] { create_optimizer(deep); }, {"kMaxJsonDepth"});
  expect_throw<ConfigError>([&] { create_loss(deep); }, {"kMaxJsonDepth"});
  expect_throw<ConfigError>([&] { create_network_with_input_encoding(2, 1, deep, config["network"]); }, {"kMaxJsonDepth"});
}

TEST(HostileConfig, NestedOptimizersAreLimited) {
  // 5000 EMAs (130 KB; grew to 20 GB before) fail on the JSON depth, 17 on the nesting limit.
  expect_throw<ConfigError>([] { create_from_config(2, 1, parse_config(model_text("optimizer", nested_ema(5000)))); },
                            {"kMaxJsonDepth"});
  expect_throw<ConfigError>([] { create_from_config(2, 1, parse_config(model_text("optimizer", nested_ema(17)))); },
                            {"kMaxConfigNesting", "optimizer.nested.nested"});
  expect_throw<ConfigError>([] { create_optimizer(parse_config(nested_ema(17))); }, {"kMaxConfigNesting"});
  // The limit itself builds and trains.
  Model m = create_from_config(2, 1, parse_config(model_text("optimizer", nested_ema(kMaxConfigNesting))));
  std::vector<float> x = {0.1f, 0.2f, 0.3f, 0.4f}, y = {0.5f, 0.6f};
  EXPECT_NO_THROW(m.trainer->training_step(TensorView::matrix(x.data(), 2, 2), TensorView::matrix(y.data(), 2, 1)));
}

TEST(HostileConfig, NestedEncodingsAreLimited) {
  expect_throw<ConfigError>([] { create_from_config(2, 1, parse_config(model_text("encoding", nested_composite(300)))); },
                            {"kMaxJsonDepth"});
  expect_throw<ConfigError>([] { create_from_config(2, 1, parse_config(model_text("encoding", nested_composite(17)))); },
                            {"kMaxConfigNesting", "encoding.nested[0].nested[0]"});
  expect_throw<ConfigError>([] { create_encoding(parse_config(nested_composite(17)), 2); }, {"kMaxConfigNesting"});
  EXPECT_NO_THROW(create_encoding(parse_config(nested_composite(kMaxConfigNesting)), 2));
}

TEST(HostileConfig, TheNumberOfEncodingsAndOptimizersIsLimited) {
  auto composite = [](size_t parts) {
    json nested = json::array();
    for (size_t i = 0; i + 1 < parts; ++i) nested.push_back({{"otype", "Identity"}, {"n_dims_to_encode", 0}});
    nested.push_back({{"otype", "Identity"}});  // the input dims
    return json{{"otype", "Composite"}, {"nested", nested}};
  };
  json config = small_model_config();
  config["encoding"] = composite(kMaxConfigObjects);  // with the optimizer: one too many
  expect_throw<ConfigError>([&] { create_from_config(2, 1, config); }, {"kMaxConfigObjects"});
  expect_throw<ConfigError>([&] { create_encoding(composite(kMaxConfigObjects), 2); }, {"kMaxConfigObjects", "encoding.nested[1023]"});
  config["encoding"] = composite(kMaxConfigObjects - 2);
  EXPECT_NO_THROW(create_from_config(2, 1, config));
}

TEST(HostileConfig, ConfigFilesAreReadBounded) {
  TempDir dir;
  expect_throw<Error>([] { read_config_file("/dev/zero"); }, {"/dev/zero", "character device", "not a regular file"});
  expect_throw<Error>([&] { read_config_file(dir.path().string()); }, {"a directory"});
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_throw<Error>([&] { read_config_file(fifo.string()); }, {"FIFO", "not a regular file"});  // does not block
  const fs::path big = dir / "big.json";
  { std::ofstream(big) << "{}"; }
  fs::resize_file(big, kMaxConfigFileBytes + 1);  // sparse: no disk used
  expect_throw<Error>([&] { read_config_file(big.string()); }, {"big.json", "kMaxConfigFileBytes", std::to_string(kMaxConfigFileBytes + 1)});
  write_text(dir / "huge_number.json", R"({"optimizer": {"learning_rate": 1e400}, "network": {}})");
  expect_throw<ConfigError>([&] { read_config_file((dir / "huge_number.json").string()); },
                            {"huge_number.json", "optimizer.learning_rate", "1e400"});
}

// ---- memory ----------------------------------------------------------------------------------

// A model no machine holds: 8 HashGrids of 4.2 G parameters each (2^32 is a grid's limit) side by
// side in a Composite. Building its objects allocates nothing; the Trainer's plan refuses it
// before any of its buffers exist, and says what it counted.
json huge_config(json optimizer) {
  const json grid = {{"otype", "HashGrid"}, {"n_levels", 31}, {"n_features_per_level", 8}, {"log2_hashmap_size", 24},
                     {"base_resolution", 1 << 20}, {"per_level_scale", 1.0}, {"n_dims_to_encode", 2},
                     {"dims_to_encode_begin", 0}};
  return {{"optimizer", std::move(optimizer)},
          {"encoding", {{"otype", "Composite"}, {"nested", json::array({grid, grid, grid, grid, grid, grid, grid, grid})}}},
          {"network", {{"otype", "PortableMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}}};
}

TEST(HostileMemory, TheTrainersPlanCountsEverythingTheModelHolds) {
  struct Case {
    json optimizer;
    DType precision;
    uint64_t bytes_per_param;  // docs/ERRORS.md's formula
    const char* item;          // one item the message must list
  };
  const Case cases[] = {
      // master 4 + params 4 + gradients 4 + Adam moments 8 + step counters 4 + initial values 4
      {{{"otype", "Adam"}}, DType::F32, 28, "Adam optimizer (optimizer) step counters"},
      // the same with f64 params and gradients
      {{{"otype", "Adam"}}, DType::F64, 36, "f64 parameters"},
      // SGD keeps no state
      {{{"otype", "SGD"}}, DType::F32, 16, "gradients"},
      // EMA: + inference parameters 4 + the average 4
      {{{"otype", "EMA"}, {"nested", {{"otype", "Adam"}}}}, DType::F32, 36, "EMA optimizer (optimizer) average"},
      // EMA of EMA of SGD: master, params, gradients, inference parameters, initial values 4 each,
      // the inner average 4, the outer average 4 and its copy of the inner inference weights 4
      {{{"otype", "EMA"}, {"nested", {{"otype", "EMA"}, {"nested", {{"otype", "SGD"}}}}}}, DType::F32, 32,
       "copy of the nested inference weights"},
  };
  for (const Case& c : cases) {
    const json config = huge_config(c.optimizer);
    const size_t n = create_network_with_input_encoding(2, 1, config["encoding"], config["network"])->n_params();
    ASSERT_GT(n, uint64_t{3} << 33);
    const auto e = expect_throw<OutOfMemoryError>([&] { create_from_config(2, 1, config, {Device::CPU, c.precision}); },
                                                  {"a Trainer of", c.item, "nothing was changed"});
    EXPECT_EQ(e.bytes(), n * c.bytes_per_param) << config["optimizer"].dump();
  }
}

// ---- checkpoints -----------------------------------------------------------------------------

// A safetensors file whose header text is `header` (with no data).
std::string raw_safetensors(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header;
}

TEST(HostileCheckpoint, DeepHeadersAndNonCheckpointsAreRefusedWithoutCrashing) {
  Model m = create_from_config(2, 1, small_model_config());
  const auto before = m.trainer->params_host();
  const std::string files[] = {
      raw_safetensors("{\"a\":" + deep_arrays(kDeep) + "}"),
      raw_safetensors("{\"__metadata__\":" + deep_objects(kDeep) + "}"),
      raw_safetensors(R"({"__metadata__": {"format": "tinyfuse-checkpoint"}, "__metadata__": {}})"),
      "{" + deep_arrays(kDeep),  // 200 KB of JSON, not a checkpoint at all
  };
  for (const std::string& f : files) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(f.data());
    expect_throw<Error>([&] { load_checkpoint_bytes(bytes, f.size(), "hostile", m); }, {"hostile", "left unchanged"});
    expect_throw<Error>([&] { load_model_bytes(bytes, f.size(), "hostile"); }, {"hostile"});
  }
  EXPECT_EQ(m.trainer->params_host(), before);
  // The stored config is held to the same limits.
  const std::string deep_config = tinyfuse::testing::checkpoint_with_config(deep_objects(kDeep), 65);
  expect_throw<Error>([&] { load_model_bytes(reinterpret_cast<const uint8_t*>(deep_config.data()), deep_config.size(), "x"); },
                      {"\"config\"", "kMaxJsonDepth"});
}

TEST(HostileCheckpoint, AConfigNamingAHugeModelIsRefusedBeforeTheModelIsBuilt) {
  // 7 KB, valid checksums, a config of 1.06 G parameters (4096 x 64 PortableMLP) but 65 values.
  const std::string config = R"({"network": {"otype": "PortableMLP", "n_neurons": 4096, "n_hidden_layers": 64}})";
  const std::string f = tinyfuse::testing::checkpoint_with_config(config, 65);
  const auto* bytes = reinterpret_cast<const uint8_t*>(f.data());
  expect_throw<Error>([&] { load_model_bytes(bytes, f.size(), "forged"); },
                      {"forged", "holds 65 parameters", "describes a model of 1057239041"});
  // A config the file does match loads.
  const std::string good =
      tinyfuse::testing::checkpoint_with_config(R"({"network": {"otype": "PortableMLP", "n_neurons": 16, "n_hidden_layers": 1}})", 65);
  Model m = load_model_bytes(reinterpret_cast<const uint8_t*>(good.data()), good.size(), "good");
  EXPECT_EQ(m.network->n_params(), 65u);
}

TEST(HostileCheckpoint, CheckpointFilesAreReadBounded) {
  TempDir dir;
  Model m = create_from_config(2, 1, small_model_config());
  expect_throw<Error>([&] { load_checkpoint("/dev/zero", m); }, {"/dev/zero", "character device", "left unchanged"});
  expect_throw<Error>([] { load_model("/dev/zero"); }, {"character device"});
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_throw<Error>([&] { load_model(fifo.string()); }, {"FIFO"});
  const fs::path big = dir / "big.tfc";
  { std::ofstream(big) << "x"; }
  std::error_code ec;
  fs::resize_file(big, uint64_t{1} << 40, ec);  // sparse: a terabyte, more than half of any machine's memory
  if (ec) GTEST_SKIP() << "this filesystem cannot hold a sparse 1 TiB file: " << ec.message();
  expect_throw<Error>([&] { load_model(big.string()); }, {"big.tfc", "half of this machine's memory"});
}

TEST(HostileCheckpoint, ASaveOfAModelWithAHandSetDeepConfigKeepsThePreviousFile) {
  TempDir dir;
  Model m = create_from_config(2, 1, small_model_config());
  const fs::path path = dir / "model.tfc";
  save_checkpoint(path.string(), m);
  const std::string before = read_text(path);
  m.config = json::object({{"deep", deep_value(kDeep)}});
  expect_throw<Error>([&] { save_checkpoint(path.string(), m); }, {"model.config", "kMaxJsonDepth"});
  EXPECT_EQ(read_text(path), before);
}

// ---- temporary files of interrupted saves ----------------------------------------------------

TEST(HostileCheckpoint, StaleTemporaryFilesOfInterruptedSavesAreRemovedAndNothingElse) {
  TempDir dir;
  const fs::path target = dir / "model.tfc";
  const std::string prefix = atomic_temp_prefix(target.string());
  // A pid that is not running: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string dead = std::to_string(child), alive = std::to_string(::getppid());
  auto make = [&](const std::string& name, bool old) {
    const fs::path p = dir / name;
    write_text(p, "partial");
    if (old) {
      const timeval times[2] = {{::time(nullptr) - 2 * kStaleTemporarySeconds, 0}, {::time(nullptr) - 2 * kStaleTemporarySeconds, 0}};
      EXPECT_EQ(::utimes(p.c_str(), times), 0);
    }
    return p;
  };
  const std::string base = fs::path(prefix).filename().string();
  const fs::path stale = make(base + dead + "-0-12345", true);
  const fs::path recent = make(base + dead + "-1-12345", false);               // may still be written
  const fs::path running = make(base + alive + "-0-12345", true);              // its process runs
  const fs::path other_target = make(".other.tfc.tmp-" + dead + "-0-1", true);  // another file's
  const fs::path not_ours = make(base + dead + "-x-1", true);                   // not our naming
  const fs::path own = make("model.tfc.tmp-" + dead + "-0-1", true);           // no leading dot
  Model m = create_from_config(2, 1, small_model_config());
  save_checkpoint(target.string(), m);
  EXPECT_FALSE(fs::exists(stale));
  for (const fs::path& kept : {recent, running, other_target, not_ours, own}) EXPECT_TRUE(fs::exists(kept)) << kept;
  EXPECT_NO_THROW(load_model(target.string()));
  EXPECT_EQ(remove_stale_temporaries(target.string()), 0);
}
