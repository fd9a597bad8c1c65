// Checkpoints: a bitwise round trip (parameters and optimizer state), every way a file can be
// damaged or foreign, config mismatches, atomic saves, and the file read as plain safetensors by
// a parser written here independently of the library.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "core/safetensors.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fs = std::filesystem;

namespace {

// 2 -> 16 -> 1 PortableMLP: 65 parameters, a checkpoint of about 2 KB.
json small_config(json optimizer = {{"otype", "Adam"}, {"learning_rate", 1e-2}}, int n_neurons = 16) {
  return {{"loss", {{"otype", "L2"}}},
          {"optimizer", optimizer},
          {"network", {{"otype", "PortableMLP"}, {"n_neurons", n_neurons}, {"n_hidden_layers", 1}, {"activation", "Tanh"}}}};
}

void make_batch(Pcg32& rng, int64_t batch, std::vector<float>& x, std::vector<float>& y) {
  x.resize(batch * 2);
  y.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    x[2 * b] = rng.next_float() * 2 - 1;
    x[2 * b + 1] = rng.next_float() * 2 - 1;
    y[b] = std::sin(3 * x[2 * b]) * std::cos(2 * x[2 * b + 1]);
  }
}

void train(Model& m, int steps, uint64_t data_seed) {
  Pcg32 rng(data_seed);
  std::vector<float> x, y;
  for (int i = 0; i < steps; ++i) {
    make_batch(rng, 64, x, y);
    m.trainer->training_step(TensorView::matrix(x.data(), 64, 2), TensorView::matrix(y.data(), 64, 1));
  }
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

// Inference outputs (from the inference parameters: the EMA weights for EMA) on a fixed batch.
std::vector<float> infer(Model& m) {
  Pcg32 rng(4242);
  std::vector<float> x, y;
  make_batch(rng, 32, x, y);
  std::vector<float> out(32 * m.network->padded_output_width());
  m.network->inference(TensorView::matrix(x.data(), 32, 2),
                       TensorView::matrix(out.data(), 32, static_cast<int64_t>(m.network->padded_output_width())));
  return out;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes, size_t n = SIZE_MAX) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(std::min(n, bytes.size())));
}

// ---- an independent safetensors reader / writer and CRC-32 ---------------------------------

uint32_t bitwise_crc32(const uint8_t* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}
std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

struct Plain {
  uint64_t n = 0;
  json header;
  std::vector<uint8_t> data;  // the data section
};

Plain plain_parse(const std::vector<uint8_t>& b) {
  Plain p;
  EXPECT_GE(b.size(), 8u);
  for (int i = 0; i < 8; ++i) p.n |= static_cast<uint64_t>(b[i]) << (8 * i);
  EXPECT_LE(8 + p.n, b.size());
  p.header = json::parse(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(p.n));
  p.data.assign(b.begin() + 8 + static_cast<std::ptrdiff_t>(p.n), b.end());
  return p;
}

std::vector<float> plain_tensor(const Plain& p, const std::string& name) {
  const json& t = p.header.at(name);
  EXPECT_EQ(t.at("dtype"), "F32");
  const uint64_t b = t.at("data_offsets")[0], e = t.at("data_offsets")[1];
  EXPECT_LE(e, p.data.size());
  EXPECT_EQ(t.at("shape"), json::array({(e - b) / 4}));
  std::vector<float> out((e - b) / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = (u << 8) | p.data[b + 4 * i + k];
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

std::vector<uint8_t> plain_serialize(const json& header, const std::vector<uint8_t>& data) {
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Recomputes both checksums as docs/CHECKPOINTS.md describes, after an edit.
void reseal(Plain& p) {
  p.header["__metadata__"]["crc32"] = hex32(bitwise_crc32(p.data.data(), p.data.size()));
  p.header["__metadata__"].erase("header_crc32");
  const std::string canon = p.header.dump();
  p.header["__metadata__"]["header_crc32"] =
      hex32(bitwise_crc32(reinterpret_cast<const uint8_t*>(canon.data()), canon.size()));
}

// ---- fixture -------------------------------------------------------------------------------

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();
    for (char& ch : name)
      if (ch == '/') ch = '_';
    dir_ = fs::temp_directory_path() / ("tinyfuse_ckpt_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Everything in dir_ (names), to check that no temporary file is left behind.
  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename().string());
    return names;
  }

  // Loading `file` into `m` fails with an Error naming the file and containing `needle`, and
  // leaves the model's parameters and optimizer state unchanged.
  void expect_rejected(const fs::path& file, Model& m, const std::string& needle = "") {
    const auto params = bits(m.trainer->params_host());
    const auto state = bits(m.optimizer->state_data());
    const json header = m.optimizer->state_header();
    try {
      load_checkpoint(file.string(), m);
      ADD_FAILURE() << "load_checkpoint(" << file << ") did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
      EXPECT_NE(msg.find("left unchanged"), std::string::npos) << msg;
      if (!needle.empty()) EXPECT_NE(msg.find(needle), std::string::npos) << "expected \"" << needle << "\" in: " << msg;
    }
    EXPECT_EQ(bits(m.trainer->params_host()), params);
    EXPECT_EQ(bits(m.optimizer->state_data()), state);
    EXPECT_EQ(m.optimizer->state_header(), header);
  }

  // A trained small model saved to dir_/name.
  fs::path saved(const std::string& name, const json& config = small_config()) {
    Model m = create_from_config(2, 1, config, {}, 5);
    train(m, 5, 1);
    const fs::path p = dir_ / name;
    save_checkpoint(p.string(), m);
    return p;
  }

  fs::path dir_;
};

// ---- round trip ----------------------------------------------------------------------------

class CheckpointRoundTrip : public Checkpoint, public ::testing::WithParamInterface<json> {};

TEST_P(CheckpointRoundTrip, ContinuesTrainingBitwiseIdentically) {
  const json config = small_config(GetParam());
  Model a = create_from_config(2, 1, config, {}, 5);
  train(a, 6, 1);
  const fs::path path = dir_ / "model.tfc";
  save_checkpoint(path.string(), a);

  Model b = create_from_config(2, 1, config, {}, 99);  // different initial parameters
  ASSERT_NE(bits(b.trainer->params_host()), bits(a.trainer->params_host()));
  load_checkpoint(path.string(), b);
  EXPECT_EQ(bits(b.trainer->params_host()), bits(a.trainer->params_host()));
  EXPECT_EQ(bits(b.optimizer->state_data()), bits(a.optimizer->state_data()));
  EXPECT_EQ(b.optimizer->state_header(), a.optimizer->state_header());
  EXPECT_EQ(b.optimizer->step_count(), a.optimizer->step_count());
  EXPECT_EQ(b.trainer->loss_scale(), a.trainer->loss_scale());
  EXPECT_EQ(bits(infer(b)), bits(infer(a)));  // EMA: the averaged weights are restored too

  Model c = load_model(path.string());
  EXPECT_EQ(c.config, config);
  EXPECT_EQ(bits(c.trainer->params_host()), bits(a.trainer->params_host()));

  // Parameters alone are not enough for a bitwise continuation (stateful optimizers).
  Model params_only = create_from_config(2, 1, config, {}, 99);
  params_only.trainer->set_params_host(a.trainer->params_host());

  for (Model* m : {&a, &b, &c, &params_only}) train(*m, 4, 2);
  EXPECT_EQ(bits(b.trainer->params_host()), bits(a.trainer->params_host()));
  EXPECT_EQ(bits(c.trainer->params_host()), bits(a.trainer->params_host()));
  EXPECT_EQ(bits(b.optimizer->state_data()), bits(a.optimizer->state_data()));
  EXPECT_EQ(bits(infer(b)), bits(infer(a)));
  if (GetParam().at("otype") != "SGD")
    EXPECT_NE(bits(params_only.trainer->params_host()), bits(a.trainer->params_host()))
        << "the continuation test cannot tell whether the optimizer state was restored";
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, CheckpointRoundTrip,
    ::testing::Values(json{{"otype", "Adam"}, {"learning_rate", 1e-2}},
                      json{{"otype", "SGD"}, {"learning_rate", 1e-2}},
                      json{{"otype", "EMA"}, {"decay", 0.9}, {"nested", {{"otype", "Adam"}, {"learning_rate", 1e-2}}}},
                      json{{"otype", "ExponentialDecay"}, {"decay_start", 2}, {"decay_interval", 2},
                           {"nested", {{"otype", "Adam"}, {"learning_rate", 1e-2}}}},
                      json{{"otype", "Composite"},
                           {"nested", {{{"otype", "Adam"}, {"learning_rate", 1e-2}, {"n_params_to_optimize", 48}},
                                       {{"otype", "SGD"}, {"learning_rate", 1e-2}, {"n_params_to_optimize", 17}}}}}));

TEST_F(Checkpoint, OverwritingAnExistingCheckpointReplacesIt) {
  Model m = create_from_config(2, 1, small_config(), {}, 5);
  const fs::path path = dir_ / "model.tfc";
  save_checkpoint(path.string(), m);
  train(m, 3, 1);
  save_checkpoint(path.string(), m);
  Model n = load_model(path.string());
  EXPECT_EQ(bits(n.trainer->params_host()), bits(m.trainer->params_host()));
  EXPECT_EQ(listing(), std::set<std::string>{"model.tfc"});
}

TEST_F(Checkpoint, ModelWithInputEncoding) {
  json config = small_config();
  config["encoding"] = {{"otype", "Identity"}};
  Model a = create_from_config(2, 1, config, {}, 5);
  train(a, 3, 1);
  const fs::path path = dir_ / "encoded.tfc";
  save_checkpoint(path.string(), a);
  EXPECT_EQ(read_checkpoint_metadata(path.string()).at("n_input_dims"), "2");
  Model b = load_model(path.string());
  EXPECT_EQ(b.config, config);
  EXPECT_EQ(bits(b.trainer->params_host()), bits(a.trainer->params_host()));
  train(a, 2, 2);
  train(b, 2, 2);
  EXPECT_EQ(bits(b.trainer->params_host()), bits(a.trainer->params_host()));
  // The same network without the encoding is a different config.
  Model plain = create_from_config(2, 1, small_config(), {}, 5);
  expect_rejected(path, plain, "key \"encoding\" = {\"otype\":\"Identity\"} is in the checkpoint but not in the model's config");
}

TEST_F(Checkpoint, LoadModelTakesBuildOptions) {
  const fs::path path = saved("model.tfc");
  BuildOptions f64;
  f64.cpu_precision = DType::F64;
  Model m = load_model(path.string(), f64);
  EXPECT_EQ(m.network->param_dtype(), DType::F64);
  Model ref = load_model(path.string());
  EXPECT_EQ(bits(m.trainer->params_host()), bits(ref.trainer->params_host()));
}

// ---- the file as plain safetensors ---------------------------------------------------------

TEST_F(Checkpoint, IsAPlainSafetensorsFile) {
  const json config = small_config();
  Model m = create_from_config(2, 1, config, {}, 5);
  train(m, 3, 1);
  const fs::path path = dir_ / "model.safetensors";
  save_checkpoint(path.string(), m);
  const std::vector<uint8_t> bytes = read_bytes(path);

  const Plain p = plain_parse(bytes);
  EXPECT_EQ(p.n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(bytes[8 + p.n - 1] == '}' || bytes[8 + p.n - 1] == ' ', true);
  EXPECT_EQ(bits(plain_tensor(p, "params")), bits(m.trainer->params_host()));
  EXPECT_EQ(bits(plain_tensor(p, "optimizer_state")), bits(m.optimizer->state_data()));
  // The tensors cover the data section exactly.
  uint64_t covered = 0;
  for (const auto& [name, t] : p.header.items())
    if (name != "__metadata__") covered += t.at("data_offsets")[1].get<uint64_t>() - t.at("data_offsets")[0].get<uint64_t>();
  EXPECT_EQ(covered, p.data.size());

  const json& meta = p.header.at("__metadata__");
  for (const auto& [k, v] : meta.items()) EXPECT_TRUE(v.is_string()) << k;
  EXPECT_EQ(meta.at("format"), "tinyfuse-checkpoint");
  EXPECT_EQ(meta.at("version"), "1");
  EXPECT_EQ(json::parse(meta.at("config").get<std::string>()), config);
  EXPECT_EQ(json::parse(meta.at("optimizer").get<std::string>()), m.optimizer->state_header());
  EXPECT_EQ(meta.at("n_params"), std::to_string(m.network->n_params()));
  EXPECT_EQ(meta.at("n_input_dims"), "2");
  EXPECT_EQ(meta.at("n_output_dims"), "1");
  EXPECT_EQ(meta.at("crc32"), hex32(bitwise_crc32(p.data.data(), p.data.size())));
  EXPECT_TRUE(std::regex_match(meta.at("created").get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << meta.at("created");
  EXPECT_FALSE(meta.at("tinyfuse_version").get<std::string>().empty());

  // The header checksum, recomputed here as the docs describe it, matches.
  Plain resealed = p;
  reseal(resealed);
  EXPECT_EQ(resealed.header, p.header);

  const json md = read_checkpoint_metadata(path.string());
  EXPECT_EQ(md.at("config"), config);
  EXPECT_EQ(md.at("optimizer"), m.optimizer->state_header());
  EXPECT_EQ(md.at("format"), "tinyfuse-checkpoint");
}

TEST_F(Checkpoint, Crc32MatchesTheStandard) {
  EXPECT_EQ(safetensors::crc32(std::string("123456789")), 0xcbf43926u);
  EXPECT_EQ(safetensors::crc32(std::string("")), 0u);
  std::vector<uint8_t> junk(10000);
  Pcg32 rng(3);
  for (auto& b : junk) b = static_cast<uint8_t>(rng.next_uint() & 0xff);
  EXPECT_EQ(safetensors::crc32(junk.data(), junk.size()), bitwise_crc32(junk.data(), junk.size()));
}

// ---- damaged files -------------------------------------------------------------------------

TEST_F(Checkpoint, TruncatedAtEveryByteIsRejected) {
  const fs::path good = saved("good.tfc");
  const std::vector<uint8_t> bytes = read_bytes(good);
  const Plain p = plain_parse(bytes);
  ASSERT_LT(bytes.size(), 4000u) << "the model is meant to be small";
  Model m = create_from_config(2, 1, small_config(), {}, 77);
  const fs::path cut = dir_ / "cut.tfc";
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE("cut at " + std::to_string(n) + " of " + std::to_string(bytes.size()));
    write_bytes(cut, bytes, n);
    std::string needle;
    if (n == 0)
      needle = "empty";
    else if (n < 8)
      needle = "truncated at byte " + std::to_string(n) + " of at least 8";
    else if (n < 8 + p.n)
      needle = "truncated at byte " + std::to_string(n) + " of at least " + std::to_string(8 + p.n);
    else
      needle = "truncated at byte " + std::to_string(n) + " of " + std::to_string(bytes.size());
    expect_rejected(cut, m, needle);
    if (HasFailure()) break;
  }
  EXPECT_THROW(load_model(cut.string()), Error);
  EXPECT_THROW(read_checkpoint_metadata(cut.string()), Error);
  // Extra bytes at the end are refused as well.
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  write_bytes(cut, longer);
  expect_rejected(cut, m, "unexpected bytes");
}

TEST_F(Checkpoint, FlippedBytesAreRejected) {
  const fs::path good = saved("good.tfc");
  const std::vector<uint8_t> bytes = read_bytes(good);
  const Plain p = plain_parse(bytes);
  Model m = create_from_config(2, 1, small_config(), {}, 77);
  const fs::path bad = dir_ / "bad.tfc";
  int n_tested = 0;
  for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0x10}}) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (mask != 0x01 && i % 7 != 0) continue;
      SCOPED_TRACE("byte " + std::to_string(i) + " ^ " + std::to_string(mask));
      std::vector<uint8_t> b = bytes;
      b[i] ^= mask;
      write_bytes(bad, b);
      expect_rejected(bad, m, i >= 8 + p.n ? "checksum mismatch" : "");
      ++n_tested;
      if (HasFailure()) return;
    }
  }
  EXPECT_GT(n_tested, 2000);
  // The untouched file still loads.
  EXPECT_NO_THROW(load_checkpoint(good.string(), m));
}

TEST_F(Checkpoint, ForeignFilesAreRejected) {
  Model m = create_from_config(2, 1, small_config(), {}, 77);
  const fs::path f = dir_ / "foreign";

  const std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                    0,    0,   0,   16,  0,    0,    0,    16,   8, 6, 0, 0,  0};
  write_bytes(f, png);
  expect_rejected(f, m, "PNG");

  write_bytes(f, {});
  expect_rejected(f, m, "empty");

  write_bytes(f, {'h', 'i', '\n'});
  expect_rejected(f, m, "truncated");

  Pcg32 rng(11);
  for (size_t size : {9u, 100u, 1000u, 5000u}) {
    std::vector<uint8_t> junk(size);
    for (auto& b : junk) b = static_cast<uint8_t>(rng.next_uint() & 0xff);
    write_bytes(f, junk);
    expect_rejected(f, m);
  }

  const std::string text = R"({"loss": {"otype": "L2"}})";
  write_bytes(f, std::vector<uint8_t>(text.begin(), text.end()));
  expect_rejected(f, m, "not a safetensors file");

  // Valid safetensors files that are not tinyfuse checkpoints.
  std::vector<uint8_t> data(8 * 4, 0);
  json header = {{"weight", {{"dtype", "F32"}, {"shape", {2, 4}}, {"data_offsets", {0, 32}}}}};
  write_bytes(f, plain_serialize(header, data));
  expect_rejected(f, m, "not a tinyfuse checkpoint");
  header["__metadata__"] = {{"format", "pt"}};
  write_bytes(f, plain_serialize(header, data));
  expect_rejected(f, m, "not a tinyfuse checkpoint");

  // A safetensors file with overlapping tensors, and one with a hole.
  json overlap = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                  {"b", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}}}};
  write_bytes(f, plain_serialize(overlap, std::vector<uint8_t>(24)));
  expect_rejected(f, m, "overlaps");
  json hole = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
               {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {16, 24}}}}};
  write_bytes(f, plain_serialize(hole, std::vector<uint8_t>(24)));
  expect_rejected(f, m, "hole");

  expect_rejected(dir_ / "does-not-exist.tfc", m, "cannot open");
  expect_rejected(dir_, m, "directory");
  EXPECT_THROW(load_model((dir_ / "does-not-exist.tfc").string()), Error);
}

TEST_F(Checkpoint, UnsupportedVersionIsRejected) {
  Plain p = plain_parse(read_bytes(saved("good.tfc")));
  p.header["__metadata__"]["version"] = "2";
  reseal(p);
  const fs::path f = dir_ / "v2.tfc";
  write_bytes(f, plain_serialize(p.header, p.data));
  Model m = create_from_config(2, 1, small_config(), {}, 77);
  expect_rejected(f, m, "version \"2\" is not supported");
}

// A correctly sealed file whose optimizer state is invalid: the dry check refuses it before the
// parameters are touched.
TEST_F(Checkpoint, InvalidOptimizerStateIsRejectedBeforeAnythingChanges) {
  const Plain good = plain_parse(read_bytes(saved("good.tfc")));
  const json& entry = good.header.at("optimizer_state");
  const size_t begin = entry.at("data_offsets")[0];
  const fs::path f = dir_ / "bad.tfc";
  Model m = create_from_config(2, 1, small_config(), {}, 77);
  train(m, 2, 3);

  Plain p = good;
  const float nan = NAN;
  std::memcpy(&p.data[begin], &nan, 4);  // first moment of parameter 0 (little-endian host)
  reseal(p);
  write_bytes(f, plain_serialize(p.header, p.data));
  expect_rejected(f, m, "optimizer state");

  p = good;
  json opt = json::parse(p.header["__metadata__"]["optimizer"].get<std::string>());
  opt["otype"] = "SGD";
  p.header["__metadata__"]["optimizer"] = opt.dump();
  reseal(p);
  write_bytes(f, plain_serialize(p.header, p.data));
  expect_rejected(f, m, "optimizer state");

  // A non-finite parameter.
  p = good;
  const size_t pbegin = p.header.at("params").at("data_offsets")[0];
  std::memcpy(&p.data[pbegin + 8], &nan, 4);
  reseal(p);
  write_bytes(f, plain_serialize(p.header, p.data));
  expect_rejected(f, m, "parameter 2");

  // n_params that disagrees with the tensor.
  p = good;
  p.header["__metadata__"]["n_params"] = "64";
  reseal(p);
  write_bytes(f, plain_serialize(p.header, p.data));
  expect_rejected(f, m, "n_params");

  // A resealed but otherwise unchanged file loads.
  p = good;
  reseal(p);
  write_bytes(f, plain_serialize(p.header, p.data));
  EXPECT_NO_THROW(load_checkpoint(f.string(), m));
}

// ---- mismatching models --------------------------------------------------------------------

TEST_F(Checkpoint, MismatchingConfigIsRejected) {
  const fs::path path = saved("model.tfc");

  Model wider = create_from_config(2, 1, small_config({{"otype", "Adam"}, {"learning_rate", 1e-2}}, 32), {}, 1);
  expect_rejected(path, wider, "config differs at key \"network.n_neurons\": 16 in the checkpoint vs 32 in the model");

  Model lr = create_from_config(2, 1, small_config({{"otype", "Adam"}, {"learning_rate", 1e-3}}), {}, 1);
  expect_rejected(path, lr, "config differs at key \"optimizer.learning_rate\"");

  Model sgd = create_from_config(2, 1, small_config({{"otype", "SGD"}, {"learning_rate", 1e-2}}), {}, 1);
  expect_rejected(path, sgd, "config differs at key \"optimizer.otype\": \"Adam\" in the checkpoint vs \"SGD\"");

  json extra = small_config();
  extra["network"]["output_activation"] = "None";
  Model ex = create_from_config(2, 1, extra, {}, 1);
  expect_rejected(path, ex, "key \"network.output_activation\" = \"None\" is in the model's config but not in the checkpoint");

  Model inputs = create_from_config(3, 1, small_config(), {}, 1);
  expect_rejected(path, inputs, "the checkpoint is for 2 inputs -> 1 outputs, the model has 3 -> 1");

  Model no_config = create_from_config(2, 1, small_config(), {}, 1);
  no_config.config = json();
  expect_rejected(path, no_config, "no config");
}

// ---- atomic saves --------------------------------------------------------------------------

TEST_F(Checkpoint, SaveIntoAMissingDirectoryFailsCleanly) {
  Model m = create_from_config(2, 1, small_config(), {}, 5);
  const auto before = listing();
  try {
    save_checkpoint((dir_ / "no" / "such" / "dir" / "model.tfc").string(), m);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir"), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(), before);
  EXPECT_FALSE(fs::exists(dir_ / "no"));
}

TEST_F(Checkpoint, SaveOverADirectoryFailsAndLeavesNoTemporaryFile) {
  Model m = create_from_config(2, 1, small_config(), {}, 5);
  fs::create_directory(dir_ / "model.tfc");
  fs::path inside = dir_ / "model.tfc" / "keep";
  write_bytes(inside, {1, 2, 3});
  try {
    save_checkpoint((dir_ / "model.tfc").string(), m);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.tfc"), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(), std::set<std::string>{"model.tfc"});
  EXPECT_TRUE(fs::is_directory(dir_ / "model.tfc"));
  EXPECT_EQ(read_bytes(inside), (std::vector<uint8_t>{1, 2, 3}));
}

TEST_F(Checkpoint, FailedWriteKeepsTheOldCheckpoint) {
  Model m = create_from_config(2, 1, small_config(), {}, 5);
  train(m, 3, 1);
  const fs::path path = dir_ / "model.tfc";
  save_checkpoint(path.string(), m);
  const std::vector<uint8_t> old_bytes = read_bytes(path);
  const auto old_params = m.trainer->params_host();
  train(m, 3, 2);

  // Make write() fail with EFBIG past 256 bytes: a real I/O error in the middle of the save.
  rlimit saved_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  if (saved_limit.rlim_max != RLIM_INFINITY && saved_limit.rlim_max < 256) GTEST_SKIP() << "RLIMIT_FSIZE too low";
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &previous), 0);
  rlimit small = saved_limit;
  small.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    save_checkpoint(path.string(), m);
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved_limit);
  sigaction(SIGXFSZ, &previous, nullptr);

  EXPECT_NE(message.find("write"), std::string::npos) << message;
  EXPECT_NE(message.find("left unchanged"), std::string::npos) << message;
  EXPECT_EQ(listing(), std::set<std::string>{"model.tfc"});
  EXPECT_EQ(read_bytes(path), old_bytes);
  Model n = load_model(path.string());
  EXPECT_EQ(bits(n.trainer->params_host()), bits(old_params));

  // And once the limit is gone the same save works.
  save_checkpoint(path.string(), m);
  load_checkpoint(path.string(), n);
  EXPECT_EQ(bits(n.trainer->params_host()), bits(m.trainer->params_host()));
}

TEST_F(Checkpoint, SaveNeedsAConfig) {
  Model m = create_from_config(2, 1, small_config(), {}, 5);
  m.config = json();
  EXPECT_THROW(save_checkpoint((dir_ / "x.tfc").string(), m), Error);
  EXPECT_TRUE(listing().empty());
  EXPECT_THROW(save_checkpoint("", m), Error);
}

}  // namespace
