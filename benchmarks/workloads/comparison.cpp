#include "workloads/comparison.h"

#include <stdexcept>

#include "limits.h"
#include "mlp_bench.h"

namespace tinyfuse::bench {

namespace {

std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::optional<double> num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>()) : std::nullopt;
}

}  // namespace

const WorkloadFigure* WorkloadFigures::find(const std::string& variant, const WorkloadRow& row) const {
  for (const WorkloadFigure& f : figures)
    if (f.variant == variant && f.workload == row.id && f.mode == to_string(row.mode) && f.batch == row.batch &&
        f.device == row.device)
      return &f;
  return nullptr;
}

const WorkloadFigure* WorkloadFigures::upstream(const WorkloadRow& row, bool jit) const {
  const WorkloadFigure* f = find(jit ? kUpstreamJit : kUpstream, row);
  if (!f) f = find(jit ? kUpstreamPythonJit : kUpstreamPython, row);
  if (!f || !f->samples_per_s)
    if (const WorkloadFigure* fd = find(std::string(jit ? kUpstreamPythonJit : kUpstreamPython) + kFiniteDifferenceSuffix, row))
      return fd;
  return f;
}

WorkloadFigures load_workload_figures(const std::vector<std::string>& paths) {
  WorkloadFigures out;
  for (const std::string& path : paths) {
    const json doc = read_json_file(path, "--workload-compare");
    if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
      throw std::runtime_error("--workload-compare file '" + path +
                               "' has no \"results\" array (torch_workloads.py and tcnn_workloads.py write one)");
    out.sources.push_back(path);
    if (const std::string v = str(doc, "torch"); !v.empty()) out.torch_versions.push_back(v);
    for (const json& r : doc["results"]) {
      if (!r.is_object()) continue;
      WorkloadFigure f;
      f.variant = str(r, "variant");
      f.workload = str(r, "workload");
      f.mode = str(r, "mode");
      f.device = str(r, "device");
      f.batch = r.contains("batch") && r["batch"].is_number_integer() ? r["batch"].get<int64_t>() : 0;
      f.samples_per_s = num(r, "samples_per_s");
      if (f.samples_per_s && *f.samples_per_s <= 0) f.samples_per_s.reset();
      f.error = str(r, "error");
      if (!f.samples_per_s && f.error.empty()) f.error = "no figure";
      f.via = str(r, "via");
      f.first_loss = num(r, "first_loss");
      f.last_loss = num(r, "last_loss");
      f.source = path;
      out.figures.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace tinyfuse::bench
