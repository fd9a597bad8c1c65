// Checkpoints as safetensors files: tensors "params" and "optimizer_state" (F32), and in
// "__metadata__" the config, the optimizer's state header and CRC-32s of the data and header.
#include "tinyfuse/checkpoint.h"


#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

#include "api/factory_internal.h"
#include "core/atomic_file.h"
#include "core/checkpoint_bytes.h"
#include "core/file_read.h"
#include "core/host_memory.h"
#include "core/json_text.h"
#include "core/memory_plan.h"
#include "core/optimizers/optimizer_base.h"
#include "core/safetensors.h"
#include "core/text.h"
#include "tinyfuse/errors.h"

#ifndef TINYFUSE_VERSION_STRING
#define TINYFUSE_VERSION_STRING "unknown"
#endif

namespace tinyfuse {

namespace {

constexpr const char* kFormat = "tinyfuse-checkpoint";
constexpr const char* kVersion = "1";
constexpr const char* kParams = "params";
constexpr const char* kOptimizerState = "optimizer_state";

std::string quoted(const std::string& s) { return "\"" + s + "\""; }
// A string read from the file, quoted and cut short when long.
std::string quoted_value(const std::string& s) { return quoted(shorten(s, 80)); }

// A JSON value for messages, cut short when long.
std::string show(const json& v) { return json_excerpt(v, 120); }

std::string iso_utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// JSON text of a float that reads back to the same float.
std::string float_text(float x) { return json(static_cast<double>(x)).dump(); }

// A checkpoint is read whole and its tensors are decoded beside it: both must fit in memory.
std::string read_checkpoint_file(const std::string& path, const std::string& where) {
  return read_regular_file(path, host_memory_bytes() / 2, where,
                           "half of this machine's memory: the file is read whole and its tensors decoded beside it");
}

// The first place where `file` (the checkpoint's) and `model` differ, as
// `key "a.b[2]": X in the checkpoint vs Y in the model`; "" when equal.
std::string first_difference(const json& file, const json& model, const std::string& path) {
  if (file == model) return "";
  const std::string key = path.empty() ? "(top level)" : path;
  if (file.is_object() && model.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : file.items()) keys.insert(k);
    for (const auto& [k, v] : model.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const std::string sub = path.empty() ? k : path + "." + k;
      const bool in_file = file.contains(k), in_model = model.contains(k);
      if (!in_model) return "key " + quoted(sub) + " = " + show(file.at(k)) + " is in the checkpoint but not in the model's config";
      if (!in_file) return "key " + quoted(sub) + " = " + show(model.at(k)) + " is in the model's config but not in the checkpoint";
      std::string d = first_difference(file.at(k), model.at(k), sub);
      if (!d.empty()) return d;
    }
  }
  if (file.is_array() && model.is_array() && file.size() == model.size()) {
    for (size_t i = 0; i < file.size(); ++i) {
      std::string d = first_difference(file[i], model[i], path + "[" + std::to_string(i) + "]");
      if (!d.empty()) return d;
    }
  }
  return "key " + quoted(key) + ": " + show(file) + " in the checkpoint vs " + show(model) + " in the model";
}

// Everything load needs from a file, checked as far as the file alone allows.
struct Checked {
  std::string where;
  json metadata;  // "__metadata__", config and optimizer parsed
  json config, optimizer_header;
  uint64_t n_params = 0;
  uint32_t n_input_dims = 0, n_output_dims = 0;
  float loss_scale = 1.0f;
  std::vector<float> params, optimizer_state;
};

uint64_t parse_uint(const std::string& where, const std::string& key, const std::string& text, uint64_t max) {
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
    throw Error(where + ": metadata " + quoted(key) + " = " + quoted_value(text) + " is not a non-negative integer");
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v > max)
    throw Error(where + ": metadata " + quoted(key) + " = " + text + " is too large (at most " + std::to_string(max) + ")");
  return v;
}

Checked check_bytes(const uint8_t* data, size_t size, const std::string& where) {
  const safetensors::Contents c = safetensors::parse(data, size, where);
  Checked k;
  k.where = where;

  const auto& meta = c.metadata;
  auto fmt = meta.find("format");
  if (!c.has_metadata || fmt == meta.end() || fmt->second != kFormat)
    throw Error(where + ": a valid safetensors file, but not a tinyfuse checkpoint (its __metadata__ " +
                (!c.has_metadata           ? std::string("is missing")
                 : fmt == meta.end()       ? std::string("has no \"format\"")
                                           : "has \"format\": " + quoted_value(fmt->second)) +
                ", expected \"format\": \"" + kFormat + "\")");
  auto version = meta.find("version");
  if (version == meta.end() || version->second != kVersion)
    throw Error(where + ": checkpoint format version " +
                (version == meta.end() ? std::string("(missing)") : quoted_value(version->second)) +
                " is not supported; this tinyfuse (" TINYFUSE_VERSION_STRING ") reads version \"" + kVersion + "\"");
  auto field = [&](const char* key) -> const std::string& {
    auto it = meta.find(key);
    if (it == meta.end()) throw Error(where + ": metadata " + quoted(key) + " is missing");
    return it->second;
  };

  // The header's own checksum: CRC-32 of the canonical (sorted, compact) header JSON without it.
  {
    json h = c.header;
    h["__metadata__"].erase("header_crc32");
    const std::string expected = field("header_crc32");
    const std::string actual = safetensors::crc32_hex(safetensors::crc32(h.dump()));
    if (expected != actual)
      throw Error(where + ": header checksum mismatch: header_crc32 is " + quoted_value(expected) + " but the header hashes to " +
                  quoted(actual) + "; the JSON header is corrupt");
  }

  // Tensors: exactly "params" and "optimizer_state", F32 vectors.
  std::map<std::string, const safetensors::TensorEntry*> tensors;
  for (const auto& t : c.tensors) {
    if (t.name != kParams && t.name != kOptimizerState)
      throw Error(where + ": unexpected tensor " + quoted_value(t.name) + " (a checkpoint holds \"params\" and \"optimizer_state\")");
    if (t.dtype != "F32") throw Error(where + ": tensor " + quoted(t.name) + " has dtype " + t.dtype + ", expected F32");
    if (t.shape.size() != 1)
      throw Error(where + ": tensor " + quoted(t.name) + " has " + std::to_string(t.shape.size()) + " dimensions, expected 1");
    tensors[t.name] = &t;
  }
  for (const char* name : {kParams, kOptimizerState})
    if (!tensors.count(name)) throw Error(where + ": tensor " + quoted(name) + " is missing");

  // Data checksum over the whole data section.
  {
    const std::string expected = field("crc32");
    const std::string actual = safetensors::crc32_hex(
        safetensors::crc32(data + c.data_offset, size - static_cast<size_t>(c.data_offset)));
    if (expected != actual)
      throw Error(where + ": checksum mismatch: crc32 is " + quoted_value(expected) + " but the " +
                  std::to_string(size - c.data_offset) + " bytes of tensor data hash to " + quoted(actual) +
                  "; the data is corrupt");
  }

  k.n_params = parse_uint(where, "n_params", field("n_params"), UINT64_MAX);
  if (tensors[kParams]->shape[0] != k.n_params)
    throw Error(where + ": tensor \"params\" has " + std::to_string(tensors[kParams]->shape[0]) +
                " elements but metadata n_params is " + std::to_string(k.n_params));
  k.n_input_dims = static_cast<uint32_t>(parse_uint(where, "n_input_dims", field("n_input_dims"), UINT32_MAX));
  k.n_output_dims = static_cast<uint32_t>(parse_uint(where, "n_output_dims", field("n_output_dims"), UINT32_MAX));

  auto parse_json = [&](const char* key, bool object) {
    json v;
    try {
      v = parse_json_text(field(key));
    } catch (const JsonError& e) {
      throw Error(where + ": metadata " + quoted(key) + " is not valid JSON text (" + e.what() + ")");
    }
    if (object && !v.is_object()) throw Error(where + ": metadata " + quoted(key) + " must be a JSON object, got " + show(v));
    return v;
  };
  k.config = parse_json("config", true);
  k.optimizer_header = parse_json("optimizer", false);
  const json scale = parse_json("loss_scale", false);
  if (!scale.is_number() || !std::isfinite(scale.get<double>()) || scale.get<double>() <= 0 ||
      !std::isfinite(static_cast<float>(scale.get<double>())))
    throw Error(where + ": metadata \"loss_scale\" = " + show(scale) + " is not a finite number > 0");
  k.loss_scale = static_cast<float>(scale.get<double>());

  const auto* p = tensors[kParams];
  const auto* s = tensors[kOptimizerState];
  k.params = safetensors::read_f32(data + c.data_offset + p->begin, static_cast<size_t>(p->shape[0]));
  for (size_t i = 0; i < k.params.size(); ++i)
    if (!std::isfinite(k.params[i]))
      throw Error(where + ": parameter " + std::to_string(i) + " is " + std::to_string(k.params[i]) + ", not finite");
  k.optimizer_state = safetensors::read_f32(data + c.data_offset + s->begin, static_cast<size_t>(s->shape[0]));

  k.metadata = json::object();
  for (const auto& [key, value] : meta) k.metadata[key] = value;
  k.metadata["config"] = k.config;
  k.metadata["optimizer"] = k.optimizer_header;
  return k;
}

Checked check_file(const std::string& path, const std::string& where) {
  const std::string bytes = read_checkpoint_file(path, where);
  return check_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), where);
}

// Checks that `k` fits `model`, including a dry run of the optimizer state.
void check_fits(const Checked& k, const Model& model) {
  const std::string& where = k.where;
  if (!model.trainer || !model.network)
    throw Error(where + ": the model has no trainer/network (build it with create_from_config)");
  if (model.config.is_null())
    throw Error(where + ": the model has no config to compare with the checkpoint's (build it with create_from_config, "
                        "or use load_model to build it from the checkpoint)");
  const std::string diff = first_difference(k.config, model.config, "");
  if (!diff.empty()) throw Error(where + ": config differs at " + diff);
  const DifferentiableObject& net = model.trainer->model();
  if (net.input_width() != k.n_input_dims || net.output_width() != k.n_output_dims)
    throw Error(where + ": the checkpoint is for " + std::to_string(k.n_input_dims) + " inputs -> " +
                std::to_string(k.n_output_dims) + " outputs, the model has " + std::to_string(net.input_width()) +
                " -> " + std::to_string(net.output_width()));
  if (net.n_params() != k.n_params)
    throw Error(where + ": the checkpoint has " + std::to_string(k.n_params) + " parameters, the model has " +
                std::to_string(net.n_params()));
  Optimizer& opt = model.trainer->optimizer();
  if (const auto* base = dynamic_cast<const OptimizerBase*>(&opt)) {
    try {
      base->check_state(k.optimizer_header, k.optimizer_state.data(), k.optimizer_state.size());
    } catch (const Error& e) {
      throw Error(where + ": optimizer state does not fit the model's optimizer: " + e.what());
    }
  }
}

// Applies a checked state. The optimizer goes first: it is the only step that could refuse
// (for optimizers without a dry check), and it changes nothing when it does.
void apply(const Checked& k, Model& model) {
  Optimizer& opt = model.trainer->optimizer();
  try {
    opt.load_state(k.optimizer_header, k.optimizer_state);
  } catch (const Error& e) {
    throw Error(k.where + ": optimizer state does not fit the model's optimizer: " + e.what());
  }
  model.trainer->set_params_host(k.params);
  model.trainer->set_loss_scale(k.loss_scale);
  // The EMA weights used for inference come from the restored optimizer state.
  if (opt.has_inference_params() && opt.step_count() > 0) opt.write_inference_params(model.trainer->inference_params());
}

// A config value set by hand on a Model is held to the JSON limits before it is serialized.
void check_json_depth_or_throw(const json& config, const std::string& where) {
  try {
    check_json_depth(config);
  } catch (const JsonError& e) {
    throw Error(where + ": model.config " + e.what());
  }
}

std::string unchanged(const Error& e) { return std::string(e.what()) + "; the model was left unchanged"; }

}  // namespace

void save_checkpoint(const std::string& path, const Model& model) {
  const std::string where = "save_checkpoint(" + quoted(path) + ")";
  if (!model.trainer || !model.network) throw Error(where + ": the model has no trainer/network (build it with create_from_config)");
  if (!model.config.is_object())
    throw Error(where + ": model.config is " + show(model.config) +
                "; build the model with create_from_config (which records its config) or set model.config");
  const DifferentiableObject& net = model.trainer->model();
  const Optimizer& opt = model.trainer->optimizer();
  check_json_depth_or_throw(model.config, where);
  {
    // The copies a save makes, checked before any of them is made.
    const size_t n = net.n_params();
    const auto* base = dynamic_cast<const OptimizerBase*>(&opt);
    const size_t s = base ? base->state_size() : 0;
    MemoryPlan plan(where + ": the copies a save makes");
    plan.add("parameters read back", n, 4, true);
    plan.add("optimizer state read back", s, 4, true);
    plan.add("the file's data section", n + s, 4, true);
    plan.add("the whole file", n + s, 4, true);
    plan.check();
  }
  const std::vector<float> params = model.trainer->params_host();
  const std::vector<float> state = opt.state_data();
  std::vector<uint8_t> file;
  try {
    const std::vector<safetensors::TensorOut> tensors = {{kParams, params.data(), params.size()},
                                                         {kOptimizerState, state.data(), state.size()}};
    const std::vector<uint8_t> data = safetensors::data_section(tensors);
    std::map<std::string, std::string> meta = {
        {"format", kFormat},
        {"version", kVersion},
        {"config", model.config.dump()},
        {"optimizer", opt.state_header().dump()},
        {"n_params", std::to_string(params.size())},
        {"n_input_dims", std::to_string(net.input_width())},
        {"n_output_dims", std::to_string(net.output_width())},
        {"loss_scale", float_text(model.trainer->loss_scale())},
        {"param_dtype", to_string(net.param_dtype())},
        {"crc32", safetensors::crc32_hex(safetensors::crc32(data.data(), data.size()))},
        {"created", iso_utc_now()},
        {"tinyfuse_version", TINYFUSE_VERSION_STRING},
    };
    json header = safetensors::make_header(tensors, meta);
    header["__metadata__"]["header_crc32"] = safetensors::crc32_hex(safetensors::crc32(header.dump()));
    file = safetensors::serialize(header, data);
  } catch (const json::exception& e) {
    throw Error(where + ": cannot encode the checkpoint header: " + e.what());
  }
  write_file_atomic(path, file.data(), file.size(), where);
}

void load_checkpoint(const std::string& path, Model& model) {
  const std::string where = "load_checkpoint(" + quoted(path) + ")";
  try {
    const Checked k = check_file(path, where);
    check_fits(k, model);
    apply(k, model);
  } catch (const Error& e) {
    throw Error(unchanged(e));
  }
}

void load_checkpoint_bytes(const uint8_t* data, size_t size, const std::string& name, Model& model) {
  const std::string where = "load_checkpoint(" + name + ")";
  try {
    const Checked k = check_bytes(data, size, where);
    check_fits(k, model);
    apply(k, model);
  } catch (const Error& e) {
    throw Error(unchanged(e));
  }
}

// load_model's part after the file's own checks.
static Model build_from(const Checked& k, const BuildOptions& options) {
  const std::string& where = k.where;
  Model model;
  try {
    model = create_model_objects(k.n_input_dims, k.n_output_dims, k.config, options);
  } catch (const Error& e) {
    throw Error(where + ": cannot build the model from the checkpoint's config: " + e.what());
  }
  // The file's own data says how many parameters it holds: a config naming a larger model is
  // refused before the Trainer allocates that model's memory.
  if (model.network->n_params() != k.n_params)
    throw Error(where + ": the checkpoint holds " + std::to_string(k.n_params) + " parameters but its config describes a "
                "model of " + std::to_string(model.network->n_params()) + "; the file is corrupt or was edited");
  model.trainer = std::make_shared<Trainer>(model.network, model.optimizer, model.loss);
  check_fits(k, model);
  apply(k, model);
  return model;
}

Model load_model(const std::string& path, const BuildOptions& options) {
  const std::string where = "load_model(" + quoted(path) + ")";
  return build_from(check_file(path, where), options);
}

Model load_model_bytes(const uint8_t* data, size_t size, const std::string& name, const BuildOptions& options) {
  return build_from(check_bytes(data, size, "load_model(" + name + ")"), options);
}

json read_checkpoint_metadata(const std::string& path) {
  return check_file(path, "read_checkpoint_metadata(" + quoted(path) + ")").metadata;
}

}  // namespace tinyfuse
