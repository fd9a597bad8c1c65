// libFuzzer target: bytes -> load_checkpoint into each of a few small models (fuzz_models.h) and
// load_model (a model built from the file's config), once as given and once with both CRC-32s
// recomputed, so that mutations get past the checksums to the header, config, optimizer-state
// and parameter checks behind them. Besides crashes and sanitizer reports, a finding is: any
// exception other than tinyfuse::Error, or a failed load that changed the model (parameters,
// optimizer state or loss scale).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <typeinfo>
#include <vector>

#include "core/checkpoint_bytes.h"
#include "core/safetensors.h"
#include "fuzz_models.h"

using namespace tinyfuse;

namespace {

struct Snapshot {
  std::vector<float> params, state;
  float loss_scale;
  uint32_t steps;
  static bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
  bool operator==(const Snapshot& o) const {
    return same(params, o.params) && same(state, o.state) && loss_scale == o.loss_scale && steps == o.steps;
  }
};

Snapshot snapshot(const Model& m) {
  return {m.trainer->params_host(), m.trainer->optimizer().state_data(), m.trainer->loss_scale(),
          m.trainer->optimizer().step_count()};
}

Model fresh(const fuzz::FuzzModel& f) {
  Model m = create_from_config(f.n_input_dims, f.n_output_dims, f.config);
  fuzz::train_a_little(m, f.n_input_dims, f.n_output_dims, 3);
  return m;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_checkpoint: %s\n", what.c_str());
  std::abort();
}

void try_load(const uint8_t* data, size_t size) {
  static std::vector<Model> models = [] {
    std::vector<Model> v;
    for (const auto& f : fuzz::checkpoint_models()) v.push_back(fresh(f));
    return v;
  }();
  for (size_t i = 0; i < models.size(); ++i) {
    const Snapshot before = snapshot(models[i]);
    try {
      load_checkpoint_bytes(data, size, "fuzz input", models[i]);
    } catch (const Error&) {
      if (!(snapshot(models[i]) == before)) finding("a rejected checkpoint changed model " + std::to_string(i));
      continue;
    } catch (const std::exception& e) {
      finding(std::string("unexpected exception ") + typeid(e).name() + ": " + e.what());
    }
    models[i] = fresh(fuzz::checkpoint_models()[i]);  // loaded: start the next input from the same state
  }
  // load_model: the model built from the checkpoint's own config (which must match the file's
  // parameter count before anything is allocated for it).
  try {
    load_model_bytes(data, size, "fuzz input");
  } catch (const Error&) {
  } catch (const std::exception& e) {
    finding(std::string("unexpected exception from load_model ") + typeid(e).name() + ": " + e.what());
  }
}

// The input with both checksums recomputed; empty when it is not a safetensors file at all.
std::vector<uint8_t> with_valid_checksums(const uint8_t* data, size_t size) {
  safetensors::Contents c;
  try {
    c = safetensors::parse(data, size, "fuzz input");
  } catch (const Error&) {
    return {};
  }
  json header = c.header;
  if (!header.contains("__metadata__") || !header["__metadata__"].is_object()) return {};
  const std::vector<uint8_t> section(data + c.data_offset, data + size);
  json& meta = header["__metadata__"];
  meta["crc32"] = safetensors::crc32_hex(safetensors::crc32(section.data(), section.size()));
  meta.erase("header_crc32");
  const std::string crc = safetensors::crc32_hex(safetensors::crc32(header.dump()));
  meta["header_crc32"] = crc;
  return safetensors::serialize(header, section);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try_load(data, size);
  const std::vector<uint8_t> fixed = with_valid_checksums(data, size);
  if (!fixed.empty()) try_load(fixed.data(), fixed.size());
  return 0;
}
