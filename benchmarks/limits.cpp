#include "limits.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tinyfuse::bench {

namespace {

std::string string_or(const json& j, const char* key, const std::string& fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

std::optional<double> positive_number(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  const double v = j[key].get<double>();
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

}  // namespace

json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + what + " file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const std::exception& e) {
    throw std::runtime_error(what + " file '" + path + "' is not valid JSON: " + e.what());
  }
}

std::optional<double> Ceilings::matmul(const std::string& precision) const {
  if (precision == "fp16") return matmul_fp16;
  if (precision == "fp32") return matmul_fp32;
  return std::nullopt;
}

Ceilings load_ceilings(const std::string& path) {
  const json doc = read_json_file(path, "--ceilings");
  if (!doc.is_object() || !doc.contains("ceilings") || !doc["ceilings"].is_object())
    throw std::runtime_error("--ceilings file '" + path + "' has no \"ceilings\" object (torch_mlp.py writes one)");
  const json& c = doc["ceilings"];
  Ceilings out;
  out.source = path;
  out.tool = string_or(doc, "tool");
  out.date = string_or(doc, "date");
  out.device = string_or(doc, "device");
  const auto copy = positive_number(c, "copy_bytes_per_s");
  if (!copy) throw std::runtime_error("--ceilings file '" + path + "': ceilings.copy_bytes_per_s is missing or not positive");
  out.copy_bytes_per_s = *copy;
  if (c.contains("matmul_flops_per_s")) {
    out.matmul_fp16 = positive_number(c["matmul_flops_per_s"], "fp16");
    out.matmul_fp32 = positive_number(c["matmul_flops_per_s"], "fp32");
  }
  return out;
}

TorchRun load_torch_run(const std::string& path) {
  const json doc = read_json_file(path, "--compare");
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    throw std::runtime_error("--compare file '" + path + "' has no \"results\" array (torch_mlp.py writes one)");
  TorchRun out;
  out.source = path;
  out.tool = string_or(doc, "tool");
  out.date = string_or(doc, "date");
  out.torch_version = string_or(doc, "torch");
  out.device = string_or(doc, "device");
  for (const json& r : doc["results"]) {
    if (!r.is_object()) continue;
    if (string_or(r, "framework", "torch") != "torch") continue;
    TorchFigure f;
    f.variant = string_or(r, "variant");
    f.precision = string_or(r, "precision");
    f.mode = string_or(r, "mode");
    if (r.contains("width") && r["width"].is_number_integer()) f.width = r["width"].get<int64_t>();
    if (r.contains("batch") && r["batch"].is_number_integer()) f.batch = r["batch"].get<int64_t>();
    f.samples_per_s = positive_number(r, "samples_per_s");
    f.median_s = positive_number(r, "median_s");
    f.error = string_or(r, "error");
    if (!f.samples_per_s && f.error.empty()) f.error = "no samples_per_s in the record";
    out.results.push_back(std::move(f));
  }
  return out;
}

const TorchFigure* TorchRun::find(const std::string& variant, const std::string& precision, const std::string& mode,
                                  int64_t width, int64_t batch) const {
  for (const TorchFigure& f : results)
    if (f.variant == variant && f.precision == precision && f.mode == mode && f.width == width && f.batch == batch)
      return &f;
  return nullptr;
}

std::optional<HardwareLimit> hardware_limit(const CaseResult& r, const Ceilings& c) {
  if (!r.ok || r.bytes_per_sample <= 0 || c.copy_bytes_per_s <= 0) return std::nullopt;
  const double sps = r.samples_per_second();
  HardwareLimit h;
  h.memory_samples_per_s = c.copy_bytes_per_s / r.bytes_per_sample;
  h.percent_of_memory = 100.0 * sps / h.memory_samples_per_s;
  h.binding = "memory";
  h.binding_samples_per_s = h.memory_samples_per_s;
  if (const auto rate = c.matmul(r.precision); rate && r.flop_per_sample > 0) {
    h.compute_samples_per_s = *rate / r.flop_per_sample;
    h.percent_of_compute = 100.0 * sps / *h.compute_samples_per_s;
    if (*h.compute_samples_per_s < h.memory_samples_per_s) {
      h.binding = "compute";
      h.binding_samples_per_s = *h.compute_samples_per_s;
    }
  }
  h.percent_of_binding = 100.0 * sps / h.binding_samples_per_s;
  return h;
}

std::string comparison_precision(const CaseResult& r) {
  if (!r.precision.empty()) return r.precision;
  return expected_precision(r.device == "cpu" ? Device::CPU : Device::CUDA, r.network);
}

std::vector<TorchComparison> compare_with_torch(const CaseResult& r, const TorchRun& t) {
  std::vector<TorchComparison> out;
  const std::string precision = comparison_precision(r);
  for (const char* variant : {"eager", "compile"}) {
    TorchComparison c;
    c.variant = variant;
    c.figure = t.find(variant, precision, to_string(r.mode), r.width, r.batch);
    if (r.ok && c.figure && c.figure->samples_per_s) c.ratio = r.samples_per_second() / *c.figure->samples_per_s;
    out.push_back(c);
  }
  return out;
}

}  // namespace tinyfuse::bench
