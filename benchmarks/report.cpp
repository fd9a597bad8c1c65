#include "report.h"

#include "core/atomic_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace tinyfuse::bench {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

namespace {

std::optional<double> percent_of_peak(const Report& r, const CaseResult& c) {
  if (!c.ok || !r.peak || !r.peak->ok) return std::nullopt;
  return 100.0 * c.gflops() / r.peak->gflops();
}

}  // namespace

ojson stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"runs", s.runs}};
}

void print_table(std::ostream& os, const std::vector<std::string>& head, const std::vector<bool>& right,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size() && i < w.size(); ++i) w[i] = std::max(w[i], row[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(i < w.size() && w[i] > cells[i].size() ? w[i] - cells[i].size() : 0, ' ');
      if (i) out += "  ";
      out += right[i] ? pad + cells[i] : cells[i] + (i + 1 < cells.size() ? pad : "");
    }
    os << out << '\n';
  };
  line(head);
  std::vector<std::string> rule;
  for (size_t x : w) rule.emplace_back(x, '-');
  line(rule);
  for (const auto& row : rows) line(row);
}

std::string si(double value) {
  static const char* prefixes[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (std::fabs(value) >= 1000.0 && p < 4) {
    value /= 1000.0;
    ++p;
  }
  return fixed(value, 3) + (p ? std::string(" ") + prefixes[p] : std::string("  "));
}

std::string models_description(const std::vector<uint32_t>& widths) {
  if (widths.size() == 1) return mlp_description(widths.front());
  std::string list;
  for (uint32_t w : widths) list += (list.empty() ? "" : ", ") + std::to_string(w);
  return "n->nx" + std::to_string(kMlpHiddenLayers) + "->n ReLU MLP (output activation None), n = " + list;
}

std::string batch_label(int64_t batch) {
  if (batch > 0 && (batch & (batch - 1)) == 0) {
    int l = 0;
    while ((int64_t{1} << l) < batch) ++l;
    return "2^" + std::to_string(l);
  }
  return std::to_string(batch);
}

namespace {

bool is_gpu(const Report& r) { return r.device != "cpu"; }

// Whether any row carries the copy reference (gpu_bench.cpp: inference rows with as many input as
// output bytes), and that copy's samples/s.
bool has_copy_reference(const Report& r) {
  return std::any_of(r.results.begin(), r.results.end(), [](const CaseResult& c) { return c.copy_seconds.has_value(); });
}
double copy_samples_per_second(const CaseResult& c) { return static_cast<double>(c.batch) / c.copy_seconds->median; }

std::string percent(double v) { return fixed(v, v < 10 ? 1 : 0) + " %"; }
std::string ratio(double v) { return fixed(v, 2) + "x"; }

// PyTorch's eager and compile samples/s of the row's case, then tinyfuse's ratio to each.
void add_torch_cells(std::vector<std::string>& row, const CaseResult& c, const TorchRun& torch) {
  std::vector<std::string> figs, ratios;
  for (const TorchComparison& t : compare_with_torch(c, torch)) {
    figs.push_back(!t.figure ? "n/a" : t.figure->samples_per_s ? si(*t.figure->samples_per_s) : "failed");
    ratios.push_back(t.ratio ? ratio(*t.ratio) : "-");
  }
  row.insert(row.end(), figs.begin(), figs.end());
  row.insert(row.end(), ratios.begin(), ratios.end());
}

void print_gpu_header(std::ostream& os, const Report& r) {
  if (r.gpu) {
    const GpuInfo& g = *r.gpu;
    os << "  gpu      " << g.name << " (sm_" << g.cc_major << g.cc_minor << ", " << g.sm_count << " SMs, "
       << fixed(static_cast<double>(g.memory_bytes) / (1 << 30), 1) << " GiB, L2 "
       << fixed(static_cast<double>(g.l2_bytes) / (1 << 20), 1) << " MiB, bus " << g.pci_bus << "), driver "
       << cuda_version_string(g.driver_version) << ", runtime " << cuda_version_string(g.runtime_version) << '\n';
  }
  os << "  timing   median of " << r.plan.repeats << " timed runs after " << r.plan.warmup
     << " warm-up runs; one pair of CUDA events per run on the benchmark's non-blocking stream, "
     << (r.plan.sync_each_run ? "host waits for each run" : "runs queued back to back") << '\n';
  if (!r.fused_kernels_left_out.empty()) {
    os << "  kernels  FullyFusedMLP without:";
    for (const std::string& k : r.fused_kernels_left_out) os << ' ' << k;
    os << '\n';
  }
  if (r.launch_floor)
    os << "  floor    an empty kernel timed the same way: " << fixed(r.launch_floor->median * 1e6, 1) << " us per run ("
       << (r.launch_floor_host ? fixed(r.launch_floor_host->median * 1e6, 1) : std::string("?"))
       << " us on the host queuing it; medians); us/call (host) = median time per call and, in brackets, the host's time queuing it\n";
  if (has_copy_reference(r))
    os << "  copy     a kernel that only copies each inference call's input to its output (the same bytes), timed the same way"
          " right after it: the best any network could do here, launch included\n";
  os << "  inputs   PCG32 uniform [-1, 1), rotated over >= " << kRotationMinBuffers << " buffers and > "
     << (kRotationMinBytes >> 20) << " MiB per case; training: FP32 targets, L2 loss, Adam, loss read once after the runs\n";
  if (r.ceilings) {
    const Ceilings& c = *r.ceilings;
    os << "  limits   copy " << si(c.copy_bytes_per_s) << "B/s (read + write)";
    if (c.matmul_fp16) os << ", fp16 matmul " << si(*c.matmul_fp16) << "FLOP/s";
    if (c.matmul_fp32) os << ", fp32 matmul " << si(*c.matmul_fp32) << "FLOP/s";
    os << " (" << c.source;
    if (!c.device.empty()) os << ", " << c.device;
    if (!c.date.empty()) os << ", " << c.date;
    os << ")\n";
    os << "           % mem = samples/s x bytes/sample / copy rate; % compute = samples/s x FLOP/sample / matmul rate"
          " of the network's precision\n";
  }
  if (r.torch) {
    const TorchRun& t = *r.torch;
    os << "  pytorch  " << (t.torch_version.empty() ? "?" : t.torch_version) << " (" << t.source;
    if (!t.device.empty()) os << ", " << t.device;
    if (!t.date.empty()) os << ", " << t.date;
    os << "): x eager / x compile = tinyfuse samples/s over PyTorch's, same width, batch, mode and precision\n";
  }
}

void print_gpu_table(std::ostream& os, const Report& r, std::vector<std::string>& errors) {
  std::vector<std::string> head = {"network", "prec", "width", "mode", "batch", "samples/s", "(min - max)", "us/call (host)",
                                   "TFLOP/s"};
  std::vector<bool> right = {false, false, true, false, true, true, true, true, true};
  const bool copies = has_copy_reference(r);
  if (copies) {
    head.insert(head.end(), {"copy samples/s", "% of copy"});
    right.insert(right.end(), {true, true});
  }
  if (r.ceilings) {
    head.insert(head.end(), {"% mem", "% compute", "binds"});
    right.insert(right.end(), {true, true, false});
  }
  if (r.torch) {
    head.insert(head.end(), {"torch eager", "torch compile", "x eager", "x compile"});
    right.insert(right.end(), {true, true, true, true});
  }
  std::vector<std::vector<std::string>> rows;
  for (const CaseResult& c : r.results) {
    std::vector<std::string> row = {c.network, c.precision.empty() ? comparison_precision(c) : c.precision,
                                    std::to_string(c.width), to_string(c.mode), batch_label(c.batch)};
    if (c.ok) {
      const double lo = static_cast<double>(c.batch) / c.seconds.max, hi = static_cast<double>(c.batch) / c.seconds.min;
      row.insert(row.end(), {si(c.samples_per_second()), si(lo) + " - " + si(hi),
                             fixed(c.seconds.median * 1e6, 1) + " (" + fixed(c.host_seconds.median * 1e6, 1) + ")",
                             fixed(c.gflops() * 1e-3, 2)});
      if (!c.loss_finite)
        errors.push_back("warning: " + c.network + " width " + std::to_string(c.width) + " training batch " +
                         batch_label(c.batch) + ": the last loss is not finite (" + std::to_string(c.last_loss) + ")");
    } else {
      row.insert(row.end(), {"failed", "-", "-", "-"});
      errors.push_back("error: " + c.network + " width " + std::to_string(c.width) + " " + to_string(c.mode) +
                       " batch " + batch_label(c.batch) + ": " + c.error);
    }
    if (copies) {
      if (c.ok && c.copy_seconds) {
        const double copy_rate = copy_samples_per_second(c);
        row.insert(row.end(), {si(copy_rate), percent(100.0 * c.samples_per_second() / copy_rate)});
      } else {
        row.insert(row.end(), {"-", "-"});
      }
    }
    if (r.ceilings) {
      if (const auto h = hardware_limit(c, *r.ceilings))
        row.insert(row.end(), {percent(h->percent_of_memory), h->percent_of_compute ? percent(*h->percent_of_compute) : "n/a",
                               h->binding});
      else
        row.insert(row.end(), {"-", "-", "-"});
    }
    if (r.torch) add_torch_cells(row, c, *r.torch);
    rows.push_back(std::move(row));
  }
  print_table(os, head, right, rows);
}

}  // namespace

void print_report(std::ostream& os, const Report& r) {
  os << "tinyfuse-bench " << r.tool_version << ": " << models_description(r.widths);
  os << (is_gpu(r) ? " on " + r.device + "\n" : std::string(", FP32\n"));
  os << "  date     " << r.date.iso_utc << '\n';
  os << "  cpu      " << r.host.cpu_model << " (" << r.host.logical_cpus << " logical CPUs)";
  if (!r.host.hostname.empty()) os << ", host " << r.host.hostname;
  if (!r.host.os.empty()) os << ", " << r.host.os;
  os << '\n';
  if (!is_gpu(r)) {
    os << "  blas     " << r.blas << '\n';
    os << "  threads  " << r.threads << '\n';
  }
  if (r.git) {
    os << "  commit   " << r.git->commit;
    if (r.git->dirty && *r.git->dirty) os << " (with uncommitted changes)";
    os << '\n';
  }
  std::vector<std::string> errors;
  if (is_gpu(r)) {
    print_gpu_header(os, r);
    os << '\n';
    print_gpu_table(os, r, errors);
    for (const std::string& e : errors) os << e << '\n';
    return;
  }
  os << "  timing   median of " << r.plan.repeats << " timed runs after " << r.plan.warmup
     << " warm-up runs (steady_clock), fresh random inputs each run\n";
  if (r.peak) {
    const PeakResult& p = *r.peak;
    os << "  sgemm    " << p.size << "^3 FP32, same BLAS: ";
    if (p.ok)
      os << fixed(p.gflops(), 1) << " GFLOP/s median (" << fixed(p.gflops_min(), 1) << " - " << fixed(p.gflops_max(), 1)
         << "): the hardware limit of the last column\n";
    else
      os << "failed: " << p.error << '\n';
  }
  if (r.torch) {
    const TorchRun& t = *r.torch;
    os << "  pytorch  " << (t.torch_version.empty() ? "?" : t.torch_version) << " (" << t.source
       << (t.date.empty() ? "" : ", " + t.date) << "): eager and torch.compile of the same MLP, and tinyfuse / PyTorch\n";
  }
  os << '\n';

  const bool widths = r.widths.size() > 1;
  std::vector<std::string> head = {"device", "network", "mode", "batch", "samples/s (median)",
                                   "samples/s (min - max)", "GFLOP/s", "% of sgemm peak"};
  std::vector<bool> right = {false, false, false, true, true, true, true, true};
  if (widths) {
    head.insert(head.begin() + 2, "width");
    right.insert(right.begin() + 2, true);
  }
  if (r.torch) {
    head.insert(head.end(), {"torch eager", "torch compile", "x eager", "x compile"});
    right.insert(right.end(), {true, true, true, true});
  }
  std::vector<std::vector<std::string>> rows;
  for (const CaseResult& c : r.results) {
    std::vector<std::string> row = {c.device, c.network, to_string(c.mode), std::to_string(c.batch)};
    if (widths) row.insert(row.begin() + 2, std::to_string(c.width));
    if (c.ok) {
      const double lo = static_cast<double>(c.batch) / c.seconds.max, hi = static_cast<double>(c.batch) / c.seconds.min;
      const auto pct = percent_of_peak(r, c);
      row.insert(row.end(), {si(c.samples_per_second()), si(lo) + " - " + si(hi), fixed(c.gflops(), 2),
                             pct ? fixed(*pct, 1) + " %" : std::string("n/a")});
    } else {
      row.insert(row.end(), {"failed", "-", "-", "-"});
      errors.push_back(c.network + (widths ? " width " + std::to_string(c.width) : std::string()) + " " +
                       to_string(c.mode) + " batch " + std::to_string(c.batch) + ": " + c.error);
    }
    if (r.torch) add_torch_cells(row, c, *r.torch);
    rows.push_back(std::move(row));
  }
  print_table(os, head, right, rows);
  for (const std::string& e : errors) os << "error: " << e << '\n';
}

namespace {

ojson limit_json(const HardwareLimit& h, const CaseResult& c, const Ceilings& ce) {
  ojson j = {{"bytes_per_sample", c.bytes_per_sample},
             {"flop_per_sample", c.flop_per_sample},
             {"copy_bytes_per_s", ce.copy_bytes_per_s},
             {"matmul_precision", c.precision},
             {"matmul_flops_per_s", ce.matmul(c.precision) ? ojson(*ce.matmul(c.precision)) : ojson(nullptr)},
             {"memory_samples_per_s", h.memory_samples_per_s},
             {"compute_samples_per_s", h.compute_samples_per_s ? ojson(*h.compute_samples_per_s) : ojson(nullptr)},
             {"binding", h.binding},
             {"binding_samples_per_s", h.binding_samples_per_s},
             {"percent_of_memory_limit", h.percent_of_memory},
             {"percent_of_compute_limit", h.percent_of_compute ? ojson(*h.percent_of_compute) : ojson(nullptr)},
             {"percent_of_binding_limit", h.percent_of_binding}};
  return j;
}

ojson torch_json(const CaseResult& c, const TorchRun& t) {
  ojson j = ojson::object();
  j["precision"] = comparison_precision(c);
  for (const TorchComparison& cmp : compare_with_torch(c, t)) {
    if (!cmp.figure) {
      j[cmp.variant] = nullptr;
      continue;
    }
    ojson v = ojson::object();
    if (cmp.figure->samples_per_s) {
      v["samples_per_s"] = *cmp.figure->samples_per_s;
      if (cmp.figure->median_s) v["median_s"] = *cmp.figure->median_s;
      v["ratio"] = cmp.ratio ? ojson(*cmp.ratio) : ojson(nullptr);
    } else {
      v["error"] = cmp.figure->error;
    }
    j[cmp.variant] = std::move(v);
  }
  return j;
}

}  // namespace

ojson to_json(const Report& r) {
  const bool gpu = is_gpu(r);
  ojson j;
  j["tool"] = "tinyfuse-bench";
  j["version"] = r.tool_version;
  j["date"] = r.date.iso_utc;
  j["git_commit"] = r.git ? ojson(r.git->commit) : ojson(nullptr);
  j["git_dirty"] = r.git && r.git->dirty ? ojson(*r.git->dirty) : ojson(nullptr);
  j["host"] = {{"cpu_model", r.host.cpu_model},
               {"logical_cpus", r.host.logical_cpus},
               {"hostname", r.host.hostname},
               {"os", r.host.os}};
  j["blas"] = r.blas;
  j["threads"] = r.threads;
  j["device"] = r.device;
  if (gpu) {
    if (r.gpu) {
      const GpuInfo& g = *r.gpu;
      j["gpu"] = {{"index", g.index},
                  {"name", g.name},
                  {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
                  {"sm_count", g.sm_count},
                  {"memory_bytes", g.memory_bytes},
                  {"l2_bytes", g.l2_bytes},
                  {"pci_bus", g.pci_bus},
                  {"driver_version", cuda_version_string(g.driver_version)},
                  {"runtime_version", cuda_version_string(g.runtime_version)}};
    } else {
      j["gpu"] = nullptr;
    }
  }
  ojson nets = ojson::object();
  for (const std::string& n : r.networks) {
    ojson cfg = mlp_network_config(n, r.widths.empty() ? kMlpNeurons : r.widths.front());
    if (r.widths.size() > 1) cfg.erase("n_neurons");  // = width, per result
    nets[n] = cfg;
  }
  ojson training = mlp_training_config(r.networks.empty() ? "CutlassMLP" : r.networks.front());
  training.erase("network");
  j["model"] = {{"description", models_description(r.widths)},
                {"precision", gpu ? "per network: results[].precision" : "f32"},
                {"widths", r.widths},
                {"networks", nets},
                {"training", training}};
  if (gpu) {
    j["timing"] = {
        {"clock", "CUDA events"},
        {"events", "one start/stop pair per run, recorded on the benchmark's non-blocking stream"},
        {"sync_each_run", r.plan.sync_each_run},
        {"fused_kernels_left_out", r.fused_kernels_left_out},
        {"launch_floor_seconds", r.launch_floor ? stats_json(*r.launch_floor) : ojson(nullptr)},
        {"launch_floor_host_seconds", r.launch_floor_host ? stats_json(*r.launch_floor_host) : ojson(nullptr)},
        {"warmup", r.plan.warmup},
        {"repeats", r.plan.repeats},
        {"statistic", "median"},
        {"inputs", "PCG32 uniform [-1, 1) generated once on the host, copied to the device, then copied "
                   "device-to-device into the rotated buffers at different offsets"},
        {"input_rotation", {{"min_buffers", kRotationMinBuffers}, {"min_total_bytes", kRotationMinBytes}}},
        {"training", "Trainer::training_step_async (L2 loss, Adam, FP32 targets); the loss is read back once, "
                     "after the timed runs"},
        {"flop_counting", "forward: 2*sum(in*out) over the layers per sample; training: 3x forward"},
        {"bytes_counting", "inference: input read + output written (network dtypes); training: input read + "
                           "target read (FP32), the least traffic a step needs with parameters amortised over the "
                           "batch and activations kept on chip"}};
  } else {
    j["timing"] = {{"clock", "std::chrono::steady_clock"},
                   {"warmup", r.plan.warmup},
                   {"repeats", r.plan.repeats},
                   {"statistic", "median"},
                   {"flop_counting", "forward: 2*sum(in*out) over the layers per sample; training: 3x forward"}};
  }
  j["batches"] = r.batches;
  if (r.peak) {
    const PeakResult& p = *r.peak;
    ojson pj = {{"m", p.size}, {"n", p.size}, {"k", p.size}, {"dtype", "f32"}, {"status", p.ok ? "ok" : "error"}};
    if (p.ok) {
      pj["seconds"] = stats_json(p.seconds);
      pj["gflops"] = {{"median", p.gflops()}, {"min", p.gflops_min()}, {"max", p.gflops_max()}};
    } else {
      pj["error"] = p.error;
    }
    j["sgemm_peak"] = pj;
  } else {
    j["sgemm_peak"] = nullptr;
  }
  if (gpu) {
    if (r.ceilings) {
      const Ceilings& c = *r.ceilings;
      j["ceilings"] = {{"source", c.source},
                       {"tool", c.tool},
                       {"date", c.date},
                       {"device", c.device},
                       {"copy_bytes_per_s", c.copy_bytes_per_s},
                       {"matmul_flops_per_s",
                        {{"fp16", c.matmul_fp16 ? ojson(*c.matmul_fp16) : ojson(nullptr)},
                         {"fp32", c.matmul_fp32 ? ojson(*c.matmul_fp32) : ojson(nullptr)}}}};
    } else {
      j["ceilings"] = nullptr;
    }
    if (r.torch)
      j["torch_comparison"] = {{"source", r.torch->source},
                               {"tool", r.torch->tool},
                               {"date", r.torch->date},
                               {"torch", r.torch->torch_version},
                               {"device", r.torch->device},
                               {"ratio", "tinyfuse samples/s over PyTorch samples/s, same width, batch, mode and "
                                         "precision (fp16 networks against torch fp16, fp32 against fp32)"}};
    else
      j["torch_comparison"] = nullptr;
  }
  ojson results = ojson::array();
  for (const CaseResult& c : r.results) {
    ojson rj = {{"device", c.device},
                {"network", c.network},
                {"mode", to_string(c.mode)},
                {"width", c.width},
                {"batch", c.batch},
                {"status", c.ok ? "ok" : "error"}};
    // A network that failed to build reports the precision tinyfuse-bench's table expects of it.
    rj["precision"] = comparison_precision(c);
    if (!c.precision.empty())
      rj["dtypes"] = {{"params", c.param_dtype}, {"input", c.input_dtype}, {"output", c.output_dtype}};
    if (c.ok) {
      rj["samples_per_second"] = {{"median", c.samples_per_second()},
                                  {"min", static_cast<double>(c.batch) / c.seconds.max},
                                  {"max", static_cast<double>(c.batch) / c.seconds.min}};
      rj["gflops"] = c.gflops();
      const auto pct = percent_of_peak(r, c);
      rj["percent_of_sgemm_peak"] = pct ? ojson(*pct) : ojson(nullptr);
      rj["flop_per_sample"] = c.flop_per_sample;
      rj["bytes_per_sample"] = c.bytes_per_sample;
      rj["seconds"] = stats_json(c.seconds);
      if (c.mode == Mode::Training) rj["last_loss"] = c.loss_finite ? ojson(c.last_loss) : ojson(nullptr);
      if (gpu) {
        rj["host_seconds"] = stats_json(c.host_seconds);
        if (c.copy_seconds)
          rj["copy_reference"] = {{"seconds", stats_json(*c.copy_seconds)},
                                  {"samples_per_second", copy_samples_per_second(c)},
                                  {"network_fraction_of_copy", c.copy_seconds->median / c.seconds.median}};
        rj["input_buffers"] = c.input_buffers;
        rj["input_bytes"] = c.input_bytes;
        if (c.mode == Mode::Training) rj["loss_finite"] = c.loss_finite;
        if (r.ceilings) {
          const auto h = hardware_limit(c, *r.ceilings);
          rj["hardware_limit"] = h ? limit_json(*h, c, *r.ceilings) : ojson(nullptr);
        }
      }
    } else {
      rj["error"] = c.error;
    }
    if (r.torch) rj["torch"] = torch_json(c, *r.torch);
    results.push_back(std::move(rj));
  }
  j["results"] = std::move(results);
  return j;
}

void prepare_output_folder(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw std::runtime_error("cannot create folder '" + folder + "': " + ec.message());
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw std::runtime_error("cannot write into folder '" + folder + "': " + std::strerror(errno));
}

void write_file_atomically(const std::string& path, const std::string& text) {
  prepare_output_folder(path);
  write_file_atomic(path, text.data(), text.size(), "tinyfuse-bench");  // the library's writer
}

}  // namespace tinyfuse::bench
