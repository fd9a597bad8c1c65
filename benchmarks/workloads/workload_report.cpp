#include "workloads/workload_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace tinyfuse::bench {

namespace {

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
std::string ratio(double v) { return fixed(v, 2) + "x"; }
std::string mib(double bytes) { return fixed(bytes / (1 << 20), 1) + " MiB"; }

ojson opt(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }

// A row's figure of `variant` as a cell, and the ratio row / it.
struct Compared {
  std::string cell = "-", ratio = "-";
  std::optional<double> samples_per_s, x;
};
Compared compare(const WorkloadRow& row, const WorkloadFigure* f) {
  Compared c;
  if (!f) return c;
  if (!f->samples_per_s) {
    c.cell = "failed";
    return c;
  }
  c.samples_per_s = f->samples_per_s;
  c.cell = si(*f->samples_per_s);
  if (f->variant == kUpstreamPython || f->variant == kUpstreamPythonJit) c.cell += " (py)";
  if (f->variant == std::string(kUpstreamPython) + kFiniteDifferenceSuffix ||
      f->variant == std::string(kUpstreamPythonJit) + kFiniteDifferenceSuffix)
    c.cell += " (py, fd)";
  if (row.ok) {
    c.x = row.samples_per_second() / *f->samples_per_s;
    c.ratio = ratio(*c.x);
  }
  return c;
}

std::string failed_checks(const WorkloadRow& row) {
  std::string out;
  for (const WorkloadCheck& c : row.checks)
    if (!c.ok) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

std::string loss_cell(const WorkloadRow& row) {
  if (row.mode == Mode::Training)
    return row.losses.empty() ? "-" : general(row.first_loss) + " -> " + general(row.losses.back());
  return general(row.loss_vs_target) + " (err " + general(row.reference_error) + ")";
}

}  // namespace

RowLimit row_limit(const WorkloadRow& row, const WorkloadLimits& limits) {
  RowLimit l;
  l.dram_bytes_per_sample = row.stream_bytes_per_sample();
  if (row.grid_table_bytes > 0) {
    l.grid_level = "DRAM";
    for (const auto& [name, bytes] : limits.caches)
      if (row.grid_table_bytes <= bytes) {
        l.grid_level = name;
        break;
      }
    if (l.grid_level == "DRAM") l.dram_bytes_per_sample += row.grid_bytes_per_sample;
  }
  if (limits.copy_bytes_per_s && l.dram_bytes_per_sample > 0)
    l.memory_samples_per_s = *limits.copy_bytes_per_s / l.dram_bytes_per_sample;
  if (limits.matmul_flops_per_s && row.flop_per_sample > 0)
    l.compute_samples_per_s = *limits.matmul_flops_per_s / row.flop_per_sample;
  std::optional<double> binding;
  if (l.memory_samples_per_s) binding = l.memory_samples_per_s, l.binding = "memory";
  if (l.compute_samples_per_s && (!binding || *l.compute_samples_per_s < *binding))
    binding = l.compute_samples_per_s, l.binding = "compute";
  if (binding && row.ok) l.percent = 100.0 * row.samples_per_second() / *binding;
  return l;
}

void print_workload_report(std::ostream& os, const WorkloadReport& r) {
  const Report& h = *r.header;
  std::string names;
  for (const WorkloadSpec& w : r.specs) names += (names.empty() ? "" : ", ") + w.id + " " + w.name;
  os << "tinyfuse-bench " << h.tool_version << ": workloads " << names << " on " << h.device << '\n';
  os << "  date     " << h.date.iso_utc << '\n';
  os << "  cpu      " << h.host.cpu_model << " (" << h.host.logical_cpus << " logical CPUs)";
  if (!h.host.hostname.empty()) os << ", host " << h.host.hostname;
  os << '\n';
  if (h.device == "cpu") os << "  blas     " << h.blas << ", " << h.threads << " threads\n";
  if (h.gpu) os << "  gpu      " << h.gpu->name << " (sm_" << h.gpu->cc_major << h.gpu->cc_minor << ", L2 " << mib(h.gpu->l2_bytes) << ")\n";
  if (!h.fused_kernels_left_out.empty()) {
    os << "  kernels  FullyFusedMLP without:";
    for (const std::string& k : h.fused_kernels_left_out) os << ' ' << k;
    os << '\n';
  }
  if (h.git) os << "  commit   " << h.git->commit << (h.git->dirty && *h.git->dirty ? " (with uncommitted changes)" : "") << '\n';
  auto load = [](const std::optional<std::array<double, 3>>& l) {
    return l ? fixed((*l)[0], 2) + " / " + fixed((*l)[1], 2) + " / " + fixed((*l)[2], 2) : std::string("?");
  };
  os << "  load     load average (1 / 5 / 15 min) " << load(r.load_start) << " at the start, " << load(r.load_end)
     << " at the end, on " << h.host.logical_cpus << " logical CPUs\n";
  os << "  timing   " << r.clock << ": median of " << h.plan.repeats << " timed runs after " << h.plan.warmup
     << " warm-up runs; training rows take one more, untimed, first step\n";
  os << "  data     inputs and targets (training) or outputs (inference) cycle through buffers past the caches; every run"
        " reads a batch no earlier run of the cycle touched\n";
  os << "  limits   copy " << (r.limits.copy_bytes_per_s ? si(*r.limits.copy_bytes_per_s) + "B/s (" + r.limits.copy_what + ")" : "-")
     << ", matmul " << (r.limits.matmul_flops_per_s ? si(*r.limits.matmul_flops_per_s) + "FLOP/s (" + r.limits.matmul_what + ")" : "-")
     << "; caches";
  for (const auto& [name, bytes] : r.limits.caches) os << " " << name << " " << mib(bytes);
  os << '\n';
  for (const std::string& s : r.figures.sources) os << "  compare  " << s << '\n';
  os << "  columns  x eager / x compile / x tcnn JIT: tinyfuse-bench's samples/s over theirs; tinyfuse.tcnn: the same"
        " workload through the Python package, tcnn/C++ its share of this figure; tcnn JIT off / on: upstream"
        " tiny-cuda-nn's programs, or its Python package where marked (py), (py, fd) where an eikonal step takes"
        " grad_x f by central differences (no second derivatives upstream), filled on a GPU by scripts/gpu/tinyfuse-gpu"
        " workloads\n\n";

  std::vector<std::string> head = {"workload", "mode", "batch", "samples/s", "(min - max)", "ms/run", "loss", "checks",
                                   "torch eager", "torch compile", "x eager", "x compile", "tinyfuse.tcnn", "tcnn/C++",
                                   "tcnn JIT off", "tcnn JIT on", "x tcnn JIT"};
  std::vector<bool> right = {false, false, true, true, true, true, true, false, true, true, true, true, true, true, true, true, true};
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  for (const WorkloadRow& w : r.rows) {
    std::vector<std::string> row = {w.id + " " + w.name, to_string(w.mode), batch_label(w.batch)};
    if (w.ok) {
      const double lo = double(w.batch) / w.timing.seconds.max, hi = double(w.batch) / w.timing.seconds.min;
      const std::string bad = failed_checks(w);
      row.insert(row.end(), {si(w.samples_per_second()), si(lo) + " - " + si(hi), fixed(w.timing.seconds.median * 1e3, 3),
                             loss_cell(w), bad.empty() ? "ok" : "FAILED: " + bad});
      for (const WorkloadCheck& c : w.checks)
        if (!c.ok) notes.push_back("check failed: " + w.id + " " + to_string(w.mode) + " " + batch_label(w.batch) + " " + c.name + ": " + c.detail);
    } else {
      row.insert(row.end(), {"failed", "-", "-", "-", "-"});
      notes.push_back("error: " + w.id + " " + to_string(w.mode) + " " + batch_label(w.batch) + ": " + w.error);
    }
    const WorkloadFigures& f = r.figures;
    const Compared eager = compare(w, f.find(kTorchEager, w)), comp = compare(w, f.find(kTorchCompile, w)),
                   py = compare(w, f.find(kTinyfuseTcnn, w)), up = compare(w, f.upstream(w, false)),
                   jit = compare(w, f.upstream(w, true));
    // Why a compared figure is missing (W4e's torch.compile step: no double backward).
    for (const char* variant : {kTorchEager, kTorchCompile, kTinyfuseTcnn})
      if (const WorkloadFigure* fig = f.find(variant, w); fig && !fig->samples_per_s)
        notes.push_back(std::string(variant) + " " + w.id + " " + to_string(w.mode) + " " + batch_label(w.batch) + ": " +
                        fig->error);
    row.insert(row.end(), {eager.cell, comp.cell, eager.ratio, comp.ratio, py.cell,
                           py.x ? fixed(100.0 / *py.x, 0) + " %" : "-", up.cell, jit.cell, jit.ratio});
    rows.push_back(std::move(row));
  }
  print_table(os, head, right, rows);

  os << "\nlimits per sample: streams = input read + target read (training) or output written (inference); grid = the"
        " corners' features read (+ FP32 gradients in training), in the level that holds the table\n";
  head = {"workload", "mode", "batch", "streams B", "grid table", "grid B", "FLOP", "memory limit", "compute limit", "binds",
          "% of limit", "buffers"};
  right = {false, false, true, true, true, true, true, true, true, false, true, true};
  rows.clear();
  for (const WorkloadRow& w : r.rows) {
    const RowLimit l = row_limit(w, r.limits);
    rows.push_back({w.id + " " + w.name, to_string(w.mode), batch_label(w.batch), fixed(w.stream_bytes_per_sample(), 0),
                    w.grid_table_bytes > 0 ? mib(w.grid_table_bytes) + " " + l.grid_level : "-",
                    w.grid_bytes_per_sample > 0 ? fixed(w.grid_bytes_per_sample, 0) : "-", si(w.flop_per_sample),
                    l.memory_samples_per_s ? si(*l.memory_samples_per_s) : "-",
                    l.compute_samples_per_s ? si(*l.compute_samples_per_s) : "-", l.binding.empty() ? "-" : l.binding,
                    l.percent ? fixed(*l.percent, *l.percent < 10 ? 2 : 1) + " %" : "-",
                    std::to_string(w.buffers) + " (" + mib(w.rotated_bytes) + ")"});
  }
  print_table(os, head, right, rows);
  for (const std::string& n : notes) os << n << '\n';
}

ojson workload_report_json(const WorkloadReport& r) {
  ojson specs = ojson::array();
  for (const WorkloadSpec& w : r.specs)
    specs.push_back({{"id", w.id}, {"name", w.name}, {"description", w.description}, {"upstream", w.upstream},
                     {"file", w.file}, {"n_input_dims", w.n_input_dims}, {"n_output_dims", w.n_output_dims},
                     {"step", w.step.kind == StepSpec::Kind::Eikonal
                                  ? ojson{{"otype", "Eikonal"}, {"eikonal_weight", w.step.eikonal_weight}}
                                  : ojson{{"otype", "Supervised"}}},
                     {"config", ojson::parse(w.config.dump())}});
  ojson rows = ojson::array();
  for (const WorkloadRow& w : r.rows) {
    ojson j = {{"workload", w.id}, {"name", w.name}, {"mode", to_string(w.mode)}, {"batch", w.batch}, {"device", w.device},
               {"status", w.ok ? "ok" : "error"}};
    if (!w.ok) {
      j["error"] = w.error;
      rows.push_back(std::move(j));
      continue;
    }
    j["samples_per_second"] = {{"median", w.samples_per_second()},
                               {"min", double(w.batch) / w.timing.seconds.max},
                               {"max", double(w.batch) / w.timing.seconds.min}};
    j["seconds"] = stats_json(w.timing.seconds);
    if (w.timing.host) j["host_seconds"] = stats_json(*w.timing.host);
    j["model"] = {{"n_params", w.n_params}, {"param_dtype", w.param_dtype}, {"output_dtype", w.output_dtype},
                  {"padded_output_width", w.padded_output_width}};
    j["rotation"] = {{"buffers", w.buffers}, {"bytes", w.rotated_bytes}};
    const RowLimit l = row_limit(w, r.limits);
    j["limit"] = {{"bytes_per_sample", {{"input", w.input_bytes}, {"target", w.target_bytes}, {"output", w.output_bytes},
                                        {"streams", w.stream_bytes_per_sample()}, {"dram", l.dram_bytes_per_sample}}},
                  {"grid", {{"table_bytes", w.grid_table_bytes}, {"level", l.grid_level},
                            {"bytes_per_sample", w.grid_bytes_per_sample}}},
                  {"flop_per_sample", w.flop_per_sample},
                  {"memory_samples_per_s", opt(l.memory_samples_per_s)},
                  {"compute_samples_per_s", opt(l.compute_samples_per_s)},
                  {"binding", l.binding.empty() ? ojson(nullptr) : ojson(l.binding)},
                  {"percent_of_binding_limit", opt(l.percent)}};
    ojson checks = ojson::array();
    for (const WorkloadCheck& c : w.checks) checks.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
    j["checks"] = checks;
    j["checks_ok"] = w.checks_ok();
    if (w.mode == Mode::Training) {
      j["loss"] = {{"first_step", w.first_loss}, {"host_first_step", w.host_first_loss},
                   {"timed_steps", w.losses}, {"last", w.losses.empty() ? ojson(nullptr) : ojson(w.losses.back())}};
    } else {
      j["trained_steps"] = w.trained_steps;
      j["reference"] = {{"rows", w.reference_rows}, {"max_abs_error", w.reference_error}, {"tolerance", w.reference_tolerance}};
      j["loss_vs_target"] = w.loss_vs_target;
    }
    ojson cmp = ojson::object();
    const std::pair<const char*, const WorkloadFigure*> slots[] = {
        {kTorchEager, r.figures.find(kTorchEager, w)}, {kTorchCompile, r.figures.find(kTorchCompile, w)},
        {kTinyfuseTcnn, r.figures.find(kTinyfuseTcnn, w)}, {"upstream_jit_off", r.figures.upstream(w, false)},
        {"upstream_jit_on", r.figures.upstream(w, true)}};
    for (const auto& [v, f] : slots) {
      if (!f) {
        cmp[v] = nullptr;
        continue;
      }
      ojson fj = {{"samples_per_s", opt(f->samples_per_s)}, {"source", f->source}};
      if (f->samples_per_s) fj["ratio"] = w.samples_per_second() / *f->samples_per_s;
      if (!f->error.empty() && !f->samples_per_s) fj["error"] = f->error;
      if (!f->via.empty()) fj["via"] = f->via;
      fj["variant"] = f->variant;
      cmp[v] = std::move(fj);
    }
    j["compared"] = std::move(cmp);
    rows.push_back(std::move(j));
  }
  ojson limits = {{"copy_bytes_per_s", opt(r.limits.copy_bytes_per_s)}, {"copy", r.limits.copy_what},
                  {"matmul_flops_per_s", opt(r.limits.matmul_flops_per_s)}, {"matmul", r.limits.matmul_what}};
  ojson caches = ojson::array();
  for (const auto& [name, bytes] : r.limits.caches) caches.push_back({{"level", name}, {"bytes", bytes}});
  limits["caches"] = caches;
  limits["model"] = "limit = min(copy rate / DRAM bytes per sample, matmul rate / tensor FLOP per sample); DRAM bytes = "
                    "input + target (training) or output (inference), plus the grid's traffic only when its table is "
                    "larger than the last cache level; a grid in a cache is reported, not counted (no cache bandwidth is "
                    "measured)";
  auto load = [](const std::optional<std::array<double, 3>>& l) { return l ? ojson(*l) : ojson(nullptr); };
  ojson out = {{"clock", r.clock},
               {"load_average", {{"minutes", {1, 5, 15}}, {"start", load(r.load_start)}, {"end", load(r.load_end)}}},
               {"limits", limits}, {"specs", specs},
               {"compared", {{"sources", r.figures.sources}, {"torch", r.figures.torch_versions},
                             {"upstream_slot", "upstream_jit_off / upstream_jit_on: upstream tiny-cuda-nn with JIT fusion "
                                               "off / on, from its own programs (variants tcnn, tcnn-jit) or its Python "
                                               "package (tinycudann, tinycudann-jit), filled on a GPU by "
                                               "scripts/gpu/tinyfuse-gpu workloads; null until then"}}},
               {"rows", rows}};
  return out;
}

}  // namespace tinyfuse::bench
