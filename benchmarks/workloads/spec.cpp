#include "workloads/spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "tinyfuse/factory.h"

#ifndef TINYFUSE_SOURCE_DIR
#define TINYFUSE_SOURCE_DIR "."
#endif

namespace tinyfuse::bench {

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw std::runtime_error("workload file '" + file + "': " + what);
}

const json& field(const json& doc, const char* key, const std::string& file) {
  if (!doc.is_object() || !doc.contains(key)) bad(file, std::string("no \"") + key + "\" field");
  return doc.at(key);
}

std::string text(const json& doc, const char* key, const std::string& file) {
  const json& v = field(doc, key, file);
  if (!v.is_string()) bad(file, std::string("\"") + key + "\" must be a string");
  return v.get<std::string>();
}

uint32_t width(const json& doc, const char* key, const std::string& file) {
  const json& v = field(doc, key, file);
  if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > 4096)
    bad(file, std::string("\"") + key + "\" must be an integer in [1, 4096]");
  return v.get<uint32_t>();
}

std::vector<int> log2_list(const json& doc, const char* key, const std::string& file, const std::string& where) {
  const json& v = field(doc, key, file);
  std::vector<int> out;
  if (!v.is_array()) bad(file, where + "." + key + " must be a list of log2 batch sizes");
  for (const json& e : v) {
    if (!e.is_number_integer() || e.get<int>() < 0 || e.get<int>() > 24)
      bad(file, where + "." + key + " holds " + e.dump() + "; log2 batch sizes are integers in [0, 24]");
    out.push_back(e.get<int>());
  }
  return out;
}

WorkloadSpec::Batches batches(const json& doc, const char* device, const std::string& file) {
  const json& b = field(field(doc, "batches", file), device, file);
  const std::string where = std::string("batches.") + device;
  return {log2_list(b, "training", file, where), log2_list(b, "inference", file, where)};
}

TargetKind target_kind(const std::string& name, const std::string& file) {
  if (name == "image") return TargetKind::Image;
  if (name == "radiance") return TargetKind::Radiance;
  if (name == "sdf") return TargetKind::Sdf;
  bad(file, "\"target\" is '" + name + "'; known: image, radiance, sdf");
}

// The optional "step" field: {"otype": "Eikonal", "eikonal_weight": w} (an SDF workload only).
StepSpec step_spec(const json& doc, TargetKind target, const std::string& file) {
  StepSpec s;
  if (!doc.contains("step")) return s;
  const json& step = doc.at("step");
  if (!step.is_object()) bad(file, "\"step\" must be an object such as {\"otype\": \"Eikonal\", \"eikonal_weight\": 0.1}");
  for (const auto& [key, value] : step.items())
    if (key != "otype" && key != "eikonal_weight") bad(file, "step." + key + " is not a step field (otype, eikonal_weight)");
  const std::string otype = text(step, "otype", file);
  if (otype == "Supervised") return s;
  if (otype != "Eikonal") bad(file, "step.otype is '" + otype + "'; known: Supervised, Eikonal");
  if (target != TargetKind::Sdf) bad(file, "an Eikonal step needs an sdf target");
  const json& w = field(step, "eikonal_weight", file);
  if (!w.is_number() || !(w.get<double>() >= 0) || !std::isfinite(w.get<double>()))
    bad(file, "step.eikonal_weight must be a finite number >= 0");
  s.kind = StepSpec::Kind::Eikonal;
  s.eikonal_weight = w.get<double>();
  return s;
}

}  // namespace

std::string default_workload_dir() { return std::string(TINYFUSE_SOURCE_DIR) + "/benchmarks/workloads/configs"; }

WorkloadSpec parse_workload(const json& doc, const std::string& file) {
  WorkloadSpec w;
  w.file = file;
  w.id = text(doc, "id", file);
  w.name = text(doc, "name", file);
  w.description = text(doc, "description", file);
  w.upstream = text(doc, "upstream", file);
  w.n_input_dims = width(doc, "n_input_dims", file);
  w.n_output_dims = width(doc, "n_output_dims", file);
  w.target = target_kind(text(doc, "target", file), file);
  w.step = step_spec(doc, w.target, file);
  w.config = field(doc, "config", file);
  if (!w.config.is_object()) bad(file, "\"config\" must be an object");
  w.cpu_batches = batches(doc, "cpu", file);
  w.cuda_batches = batches(doc, "cuda", file);
  const bool image_dims = w.n_input_dims == 2 && w.n_output_dims == 3;
  if (w.target == TargetKind::Image && !image_dims) bad(file, "an image workload maps 2 input dims to 3 outputs");
  if (w.target == TargetKind::Radiance && (w.n_input_dims != 6 || w.n_output_dims != 3))
    bad(file, "a radiance workload maps 6 input dims (position, direction) to 3 outputs");
  if (w.target == TargetKind::Sdf && (w.n_input_dims != 3 || w.n_output_dims != 1))
    bad(file, "an sdf workload maps 3 input dims to 1 output");
  if (w.target == TargetKind::Radiance && !w.is_nerf_field())
    bad(file, "a radiance workload needs the NeRF field config (\"density\", \"direction_encoding\", \"color_network\")");
  return w;
}

std::vector<WorkloadSpec> load_workloads(const std::string& dir, const std::vector<std::string>& ids) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("workload folder '" + dir + "' does not exist (--workload-dir)");
  std::vector<WorkloadSpec> all;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path p = entry.path();
    if (p.extension() != ".json" || p.filename().string().rfind('w', 0) != 0) continue;
    json doc;
    try {
      doc = read_config_file(p.string());
    } catch (const std::exception& e) {
      throw std::runtime_error("workload file '" + p.string() + "': " + e.what());
    }
    all.push_back(parse_workload(doc, p.string()));
  }
  std::sort(all.begin(), all.end(), [](const WorkloadSpec& a, const WorkloadSpec& b) { return a.id < b.id; });
  const bool every = ids.empty() || (ids.size() == 1 && ids.front() == "all");
  if (every) return all;
  std::vector<WorkloadSpec> out;
  for (const std::string& id : ids) {
    auto it = std::find_if(all.begin(), all.end(), [&](const WorkloadSpec& w) { return w.id == id; });
    if (it == all.end()) {
      std::string known;
      for (const WorkloadSpec& w : all) known += (known.empty() ? "" : ", ") + w.id;
      throw std::runtime_error("no workload '" + id + "' in '" + dir + "'; known: " + (known.empty() ? "none" : known));
    }
    out.push_back(*it);
  }
  return out;
}

}  // namespace tinyfuse::bench
