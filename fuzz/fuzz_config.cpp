// libFuzzer target: bytes -> parse_config -> create_from_config for a few input/output widths and
// both CPU precisions, then one training step and one inference on a small batch; bytes that
// parse_config refuses (too deep, repeated keys) go to the factory as nlohmann's unlimited reader
// parses them. The only exception allowed out is tinyfuse::Error; anything else, a crash (a stack
// overflow on deep JSON, say) or a sanitizer report is a finding.
#include <cstdio>
#include <cstdlib>
#include <typeinfo>
#include <vector>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

// Models the harness will build: larger ones are skipped (a harness bound on time and memory,
// not a library limit: the library's own limit is the machine's memory, docs/ERRORS.md).
constexpr size_t kMaxParams = size_t(1) << 22;
constexpr int64_t kBatch = 5;

[[noreturn]] void unexpected(const char* what, const char* type) {
  std::fprintf(stderr, "fuzz_config: unexpected exception %s: %s\n", type, what);
  std::abort();
}

// Builds the model's network alone (no parameter memory) to learn its size.
size_t network_params(uint32_t n_in, uint32_t n_out, const json& config, const BuildOptions& options) {
  if (!config.is_object() || !config.contains("network")) return 0;  // create_from_config reports it
  if (config.contains("encoding"))
    return create_network_with_input_encoding(n_in, n_out, config.at("encoding"), config.at("network"), options)->n_params();
  return create_network(config.at("network"), n_in, n_out, options)->n_params();
}

void exercise(const Model& m, uint32_t n_in, uint32_t n_out, DType dtype) {
  const size_t es = dtype_size(dtype);
  std::vector<char> x(kBatch * n_in * es), y(kBatch * n_out * es), out(kBatch * m.network->padded_output_width() * es);
  Pcg32 rng(1);
  for (int64_t i = 0; i < kBatch * n_in; ++i) {
    if (dtype == DType::F64) reinterpret_cast<double*>(x.data())[i] = rng.next_float();
    else reinterpret_cast<float*>(x.data())[i] = rng.next_float();
  }
  for (int64_t i = 0; i < kBatch * n_out; ++i) {
    if (dtype == DType::F64) reinterpret_cast<double*>(y.data())[i] = rng.next_float();
    else reinterpret_cast<float*>(y.data())[i] = rng.next_float();
  }
  const TensorView in = TensorView::matrix(x.data(), dtype, Device::CPU, kBatch, n_in);
  const TensorView target = TensorView::matrix(y.data(), dtype, Device::CPU, kBatch, n_out);
  try {
    m.trainer->training_step(in, target);
  } catch (const Error&) {
    // A non-finite loss (e.g. an Exponential activation overflowing) is refused; fine.
  }
  m.network->inference(in, TensorView::matrix(out.data(), dtype, Device::CPU, kBatch, m.network->padded_output_width()));
}

void build(const json& config, uint32_t n_in, uint32_t n_out, const BuildOptions& options) {
  try {
    if (network_params(n_in, n_out, config, options) > kMaxParams) return;
    Model m = create_from_config(n_in, n_out, config, options);
    exercise(m, n_in, n_out, options.cpu_precision);
  } catch (const Error&) {
    // tinyfuse's errors are the expected outcome for most inputs.
  } catch (const std::exception& e) {
    unexpected(e.what(), typeid(e).name());
  }
}

// The bytes as nlohmann's own reader takes them (no depth limit, the last of repeated keys), for
// the factory's checks of json values built by callers; null when they are not JSON at all.
json unchecked_json(const uint8_t* data, size_t size) {
  try {
    return json::parse(data, data + size);
  } catch (const json::exception&) {
    return nullptr;  // a syntax error, or a number out of range: "1e999"
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json config;
  try {
    // As every front end reads a config (factory.h): depth-limited, repeated keys refused.
    config = parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
  } catch (const ConfigError&) {
    // Refused text: what it parses to with no limits must be refused by the factory as cleanly.
    const json unchecked = unchecked_json(data, size);
    if (!unchecked.is_null()) build(unchecked, 2, 1, {Device::CPU, DType::F32});
    return 0;
  } catch (const std::exception& e) {
    unexpected(e.what(), typeid(e).name());
  }
  build(config, 2, 1, {Device::CPU, DType::F32});
  build(config, 3, 4, {Device::CPU, DType::F64});
  build(config, 16, 3, {Device::CPU, DType::F32});
  build(config, 2, 1, {Device::CUDA, DType::F32});  // a CPU-only build must say so cleanly
  return 0;
}
