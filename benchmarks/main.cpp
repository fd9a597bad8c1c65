// tinyfuse-bench: command line, then the runs in order (sgemm peak on the CPU, then every
// network x width x mode x batch), progress on stderr, the table on stdout and the JSON record on disk.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/blas.h"
#include "cpu/parallel.h"
#include "copy_bandwidth.h"
#include "encoding_bench.h"
#include "report.h"
#include "workloads/workload_report.h"
#include "tinyfuse/fused_kernel_options.h"
#include "tinyfuse/errors.h"

#ifndef TINYFUSE_BENCH_VERSION
#define TINYFUSE_BENCH_VERSION "unknown"
#endif

namespace tb = tinyfuse::bench;

namespace {

const char* kUsage =
    "usage: tinyfuse-bench [--device cpu|cuda] [--networks A,B] [--widths 64,128] [--batches 14,16]\n"
    "                      [--out FILE.json] [--repeats N] [--warmup N] [--quick]\n"
    "                      [--ceilings TORCH.json] [--compare TORCH.json] [--queue-runs]\n"
    "                      [--grid-compare TORCH_GRID.json] [--modes inference,training]\n"
    "                      [--skip-mlp] [--skip-encodings] [--fused-kernels L] [--help]\n"
    "       tinyfuse-bench --workloads W1,W2,W3,W4,W4e|all [--device cpu|cuda] [--batches 14] [--modes training]\n"
    "                      [--workload-compare TORCH.json,TCNN.json] [--ceilings TORCH.json] [--workload-dir DIR]\n"
    "                      [--out FILE.json] [--repeats N] [--warmup N] [--quick] [--queue-runs]\n"
    "\n"
    "Throughput of the n->n x2->n ReLU MLP, inference and training (L2 loss, Adam).\n"
    "cpu: PortableMLP and CutlassMLP against the FP32 sgemm rate of the same BLAS, measured in the same run.\n"
    "cuda: PortableMLP, BlasLtMLP and BlasLtMLPFP16 timed with CUDA events, against the copy bandwidth and\n"
    "matmul rates and the PyTorch figures that benchmarks/torch/torch_mlp.py measured.\n"
    "\n"
    "  --device D        cpu (default) or cuda\n"
    "  --networks L      comma-separated otypes (default cpu: PortableMLP,CutlassMLP;\n"
    "                    cuda: PortableMLP,BlasLtMLP,BlasLtMLPFP16)\n"
    "  --widths L        comma-separated widths n, 1..4096 (default cpu: 64; cuda: 64,128)\n"
    "  --batches L       comma-separated log2 batch sizes, 0..24 (default cpu: 14,16; cuda: 14,16,18,20,22)\n"
    "  --out FILE        JSON output (default benchmarks/results/<device>-latest.json); its folder is created\n"
    "  --repeats N       timed runs per measurement; the median is reported (default cpu 10, cuda 50)\n"
    "  --warmup N        untimed runs before them (default cpu 3, cuda 10)\n"
    "  --quick           cpu: --warmup 1 --repeats 3; cuda: --warmup 3 --repeats 10 (explicit values win)\n"
    "  --ceilings FILE   cuda: torch_mlp.py's JSON; its copy bandwidth and matmul rates (fp16 for 16-bit\n"
    "                    networks, fp32 for FP32 ones) give the % of memory / compute limit columns\n"
    "  --compare FILE    torch_mlp.py's JSON (cpu: torch_mlp.py --device cpu); adds PyTorch eager / compile\n"
    "                    samples/s of the same width,\n"
    "                    batch, mode and precision, and the ratio tinyfuse / PyTorch\n"
    "  --queue-runs      cuda: queue the timed runs back to back instead of waiting for each one\n"
    "                    (each still has its own event pair)\n"
    "  --grid-compare F  torch_hashgrid.py's JSON (of the same --device); adds PyTorch eager / compile samples/s of the same\n"
    "                    HashGrid rows and the ratios, and its copy bandwidth (when --ceilings gives none)\n"
    "  --modes L         MLP rows of these modes only: inference, training or both (default both)\n"
    "  --skip-mlp        run only the encoding rows\n"
    "  --skip-encodings  run only the MLP rows\n"
    "  --workloads L     run the workload suite instead of the MLP and encoding rows: W1 image, W2 OneBlob,\n"
    "                    W3 NeRF field, W4 SDF, W4e SDF with the eikonal term (benchmarks/workloads/configs), a\n"
    "                    training step and an inference\n"
    "                    pass each, with checks of what they produce; --batches then overrides every workload's\n"
    "                    default batches (cpu: 2^14 or 2^16; cuda: the issue's)\n"
    "  --workload-compare L  comma-separated JSON files of torch_workloads.py / tcnn_workloads.py (PyTorch\n"
    "                    eager and compile, tinyfuse.tcnn, upstream tiny-cuda-nn JIT off / on): ratios per row\n"
    "  --workload-dir D  where the workload files are (default: the source tree's benchmarks/workloads/configs)\n"
    "  --fused-kernels L cuda: FullyFusedMLP kernel families to leave out (BuildOptions::fused_kernels):\n"
    "                    no-hopper, no-tma, general (the general kernels only), no-folded-loss,\n"
    "                    no-fused-weight-grads, no-one-kernel-step, no-fused-second-order,\n"
    "                    no-encoding-inference\n"
    "  --help, -h        this text\n";

struct UsageError {
  std::string message;
};

struct Options {
  std::string device = "cpu";
  std::optional<std::vector<int>> batch_log2;
  std::optional<std::vector<int>> widths;
  std::optional<std::vector<std::string>> networks;
  std::vector<tb::Mode> modes = {tb::Mode::Inference, tb::Mode::Training};
  std::string out, ceilings, compare, grid_compare;
  std::optional<std::vector<std::string>> workloads;
  std::vector<std::string> workload_compare;
  std::string workload_dir;
  std::optional<int> repeats, warmup;
  bool quick = false;
  bool queue_runs = false;
  bool skip_mlp = false;
  bool skip_encodings = false;
  bool help = false;
  tinyfuse::FusedKernelOptions fused_kernels;
  std::vector<std::string> fused_kernels_left_out;
};

int parse_int(const std::string& flag, const std::string& text, int lo, int hi) {
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < lo || v > hi)
    throw UsageError{"--" + flag + " takes an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + text + "'"};
  return static_cast<int>(v);
}

std::vector<std::string> split_list(const std::string& flag, const std::string& text, const char* example) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw UsageError{"--" + flag + " takes a list like " + example + ", got '" + text + "'"};
    out.push_back(item);
  }
  if (out.empty() || text.back() == ',') throw UsageError{"--" + flag + " takes a list like " + example + ", got '" + text + "'"};
  return out;
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text, const char* example, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& item : split_list(flag, text, example)) out.push_back(parse_int(flag, item, lo, hi));
  return out;
}

Options parse_args(int argc, char** argv) {
  static const std::vector<std::string> known = {"device", "networks", "widths", "batches", "out", "repeats", "warmup",
                                                 "quick", "ceilings", "compare", "queue-runs", "help",
                                                 "grid-compare", "skip-mlp", "skip-encodings", "modes",
                                                 "workloads", "workload-compare", "workload-dir", "fused-kernels"};
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) throw UsageError{"unexpected argument '" + arg + "'"};
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "quick" || name == "queue-runs" || name == "skip-mlp" || name == "skip-encodings") {
      if (has_value) throw UsageError{"--" + name + " takes no value"};
      (name == "quick"        ? o.quick
       : name == "queue-runs" ? o.queue_runs
       : name == "skip-mlp"   ? o.skip_mlp
                              : o.skip_encodings) = true;
      continue;
    }
    bool is_known = false;
    for (const auto& k : known) is_known = is_known || k == name;
    if (!is_known) {
      std::string msg = "unknown option '--" + name + "'";
      const std::string guess = tinyfuse::closest_match(name, known);
      if (!guess.empty()) msg += " (did you mean '--" + guess + "'?)";
      throw UsageError{msg};
    }
    if (!has_value) {
      if (i + 1 >= argc) throw UsageError{"--" + name + " needs a value"};
      value = argv[++i];
    }
    if (name == "device") {
      if (value != "cpu" && value != "cuda") throw UsageError{"--device takes cpu or cuda, got '" + value + "'"};
      o.device = value;
    } else if (name == "batches") {
      o.batch_log2 = parse_int_list(name, value, "14,16", 0, 24);
    } else if (name == "widths") {
      o.widths = parse_int_list(name, value, "64,128", 1, 4096);
    } else if (name == "networks") {
      o.networks = split_list(name, value, "PortableMLP,BlasLtMLP");
    } else if (name == "modes") {
      o.modes.clear();
      for (const std::string& m : split_list(name, value, "inference,training")) {
        if (m != "inference" && m != "training") throw UsageError{"--modes takes inference and/or training, got '" + m + "'"};
        const tb::Mode mode = m == "inference" ? tb::Mode::Inference : tb::Mode::Training;
        if (std::find(o.modes.begin(), o.modes.end(), mode) == o.modes.end()) o.modes.push_back(mode);
      }
    } else if (name == "workloads") {
      o.workloads = split_list(name, value, "W1,W3");
    } else if (name == "workload-compare") {
      o.workload_compare = split_list(name, value, "torch.json,tcnn.json");
    } else if (name == "workload-dir") {
      if (value.empty()) throw UsageError{"--workload-dir needs a folder"};
      o.workload_dir = value;
    } else if (name == "out") {
      if (value.empty()) throw UsageError{"--out needs a file name"};
      o.out = value;
    } else if (name == "grid-compare") {
      if (value.empty()) throw UsageError{"--grid-compare needs a file name"};
      o.grid_compare = value;
    } else if (name == "ceilings" || name == "compare") {
      if (value.empty()) throw UsageError{"--" + name + " needs a file name"};
      (name == "ceilings" ? o.ceilings : o.compare) = value;
    } else if (name == "repeats") {
      o.repeats = parse_int(name, value, 1, 100000);
    } else if (name == "warmup") {
      o.warmup = parse_int(name, value, 0, 100000);
    } else if (name == "fused-kernels") {
      static const std::vector<std::string> choices = {"no-hopper", "no-tma", "general", "no-folded-loss",
                                                       "no-fused-weight-grads", "no-one-kernel-step",
                                                       "no-fused-second-order", "no-encoding-inference"};
      for (const std::string& k : split_list(name, value, "no-tma,no-one-kernel-step")) {
        if (std::find(choices.begin(), choices.end(), k) == choices.end()) {
          std::string msg = "--fused-kernels takes no-hopper, no-tma, general, no-folded-loss, no-fused-weight-grads, "
                            "no-one-kernel-step, no-fused-second-order, no-encoding-inference; got '" + k + "'";
          const std::string guess = tinyfuse::closest_match(k, choices);
          if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
          throw UsageError{msg};
        }
        tinyfuse::FusedKernelOptions& f = o.fused_kernels;
        (k == "no-hopper"             ? f.hopper
         : k == "no-tma"              ? f.tma
         : k == "general"             ? f.pipelined
         : k == "no-folded-loss"      ? f.folded_loss
         : k == "no-fused-weight-grads" ? f.fused_weight_grads
         : k == "no-one-kernel-step"  ? f.one_kernel_step
         : k == "no-encoding-inference" ? f.encoding_inference
                                      : f.fused_second_order) = false;
        o.fused_kernels_left_out.push_back(k);
      }
    }
  }
  if (o.workloads) {
    if (o.networks || o.widths) throw UsageError{"--networks and --widths choose MLP rows; --workloads runs the workload suite only"};
    if (o.skip_mlp || o.skip_encodings) throw UsageError{"--skip-mlp / --skip-encodings choose MLP and encoding rows; --workloads runs the workload suite only"};
    if (!o.compare.empty() || !o.grid_compare.empty())
      throw UsageError{"--compare and --grid-compare compare MLP and encoding rows; the workloads take --workload-compare"};
    if (o.device == "cpu" && !o.ceilings.empty())
      throw UsageError{"--ceilings is for --device cuda (the CPU run measures its own copy and sgemm rates)"};
    if (o.device == "cpu" && o.queue_runs) throw UsageError{"--queue-runs is for --device cuda"};
    return o;
  }
  if (!o.workload_compare.empty() || !o.workload_dir.empty())
    throw UsageError{"--workload-compare and --workload-dir go with --workloads"};
  if (o.device == "cpu") {
    if (!o.ceilings.empty()) throw UsageError{"--ceilings is for --device cuda (the CPU run measures its own sgemm peak)"};
    if (o.queue_runs) throw UsageError{"--queue-runs is for --device cuda"};
    if (!o.fused_kernels_left_out.empty()) throw UsageError{"--fused-kernels is for --device cuda"};
  }
  if (o.skip_mlp && o.skip_encodings) throw UsageError{"--skip-mlp and --skip-encodings together leave nothing to run"};
  if (o.skip_encodings && !o.grid_compare.empty()) throw UsageError{"--grid-compare compares encoding rows: drop --skip-encodings"};
  return o;
}

#ifndef TINYFUSE_BENCH_CUDA
// --device cuda in a build without it: say so plainly instead of a stack of config details.
int no_cuda(const tinyfuse::Error& e) {
  const std::string what = e.what();
  const bool not_built = what.find("no CUDA backend") != std::string::npos ||
                         what.find("without a GPU backend") != std::string::npos;
  if (not_built)
    std::cerr << "tinyfuse-bench: the CUDA backend is not built into this tinyfuse, so --device cuda cannot run.\n"
                 "  Reconfigure with -DTINYFUSE_CUDA=ON (needs nvcc) and rebuild, or use --device cpu.\n"
                 "  (" << what << ")\n";
  else
    std::cerr << "tinyfuse-bench: --device cuda cannot build the benchmark network: " << what << '\n';
  return 1;
}
#endif

std::string progress_suffix(const tb::Report& r, const tb::CaseResult& res) {
  std::string out;
  if (r.ceilings)
    if (const auto h = tb::hardware_limit(res, *r.ceilings)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f %% of the %s limit", h->percent_of_binding, h->binding.c_str());
      out += buf;
    }
  if (r.torch)
    for (const tb::TorchComparison& c : tb::compare_with_torch(res, *r.torch))
      if (c.ratio) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2fx torch %s", *c.ratio, c.variant.c_str());
        out += (out.empty() ? "" : ", ") + std::string(buf);
      }
  return out.empty() ? out : " (" + out + ")";
}

// Writes the run's JSON to `out` (atomically) and gives the exit status: 0 when every part ran, 1
// otherwise; throws std::runtime_error when the file cannot be written.
int write_record(const std::string& out, const tb::ojson& doc, bool all_ok) {
  tb::write_file_atomically(out, doc.dump(2) + "\n");
  std::cerr << "tinyfuse-bench: wrote " << out << '\n';
  return all_ok ? 0 : 1;
}

std::string check_summary(const tb::WorkloadRow& w) {
  std::string bad;
  for (const tb::WorkloadCheck& c : w.checks)
    if (!c.ok) bad += (bad.empty() ? "" : ", ") + c.name;
  return bad.empty() ? "checks ok" : "CHECKS FAILED: " + bad;
}

// The workload suite (--workloads): its rows, table and JSON, with the header `r` already filled.
int run_workloads(const Options& o, tb::Report& r, const std::string& out) {
  const bool gpu = r.device != "cpu";
  tb::WorkloadReport wr;
  wr.header = &r;
  try {
    wr.specs = tb::load_workloads(o.workload_dir.empty() ? tb::default_workload_dir() : o.workload_dir, *o.workloads);
    wr.figures = tb::load_workload_figures(o.workload_compare);
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: " << e.what() << '\n';
    return 1;
  }
  std::unique_ptr<tb::RunTimer> timer;
  if (gpu) {
#ifdef TINYFUSE_BENCH_CUDA
    timer = tb::make_gpu_run_timer(r.plan.sync_each_run);
    if (r.gpu) wr.limits.caches.push_back({"L2", static_cast<double>(r.gpu->l2_bytes)});
    if (r.ceilings) {
      wr.limits.copy_bytes_per_s = r.ceilings->copy_bytes_per_s;
      wr.limits.copy_what = "device copy, " + r.ceilings->source;
      wr.limits.matmul_flops_per_s = r.ceilings->matmul("fp16");
      wr.limits.matmul_what = "fp16 matmul 8192^3, " + r.ceilings->source;
    }
#endif
  } else {
    const std::vector<tb::CacheLevel> caches = tb::read_cpu_caches();
    for (const tb::CacheLevel& c : caches) wr.limits.caches.push_back({c.name, static_cast<double>(c.bytes)});
    timer = tb::make_cpu_run_timer(caches.empty() ? 0 : caches.back().bytes);
    std::cerr << "[copy] 256 MiB memcpy on " << r.threads << " threads (memory limit) ... " << std::flush;
    const tb::CopyRate copy = tb::measure_copy_bandwidth(r.plan);
    if (copy.ok) {
      wr.limits.copy_bytes_per_s = copy.bytes_per_second();
      wr.limits.copy_what = "memcpy of 256 MiB, read + written, same run";
      std::cerr << tb::si(copy.bytes_per_second()) << "B/s\n";
    } else {
      std::cerr << "failed: " << copy.error << '\n';
    }
    if (r.peak && r.peak->ok) {
      wr.limits.matmul_flops_per_s = r.peak->gflops() * 1e9;
      wr.limits.matmul_what = "FP32 sgemm 1024^3, same BLAS, same run";
    }
  }
  wr.clock = timer->clock();
  tb::WorkloadPlan plan;
  plan.timing = r.plan;
  plan.modes = o.modes;
  plan.batch_log2 = o.batch_log2;
  plan.fused_kernels = o.fused_kernels;
  bool all_ok = true;
  wr.load_start = tb::read_load_average();
  for (const tb::WorkloadSpec& w : wr.specs) {
    std::cerr << "[" << w.id << " " << w.name << "] " << w.description << '\n';
    const auto rows = tb::run_workload(w, plan, *timer, 1337, [&](const tb::WorkloadRow& row) {
      std::cerr << "  " << tb::to_string(row.mode) << " batch " << tb::batch_label(row.batch) << ": ";
      if (!row.ok) {
        std::cerr << "failed: " << row.error << '\n';
        return;
      }
      std::cerr << tb::si(row.samples_per_second()) << "samples/s";
      if (row.mode == tb::Mode::Training && !row.losses.empty())
        std::cerr << ", loss " << row.first_loss << " -> " << row.losses.back();
      std::cerr << ", " << check_summary(row) << '\n';
    });
    for (const tb::WorkloadRow& row : rows) all_ok = all_ok && row.ok && row.checks_ok();
    wr.rows.insert(wr.rows.end(), rows.begin(), rows.end());
  }
  wr.load_end = tb::read_load_average();
  tb::print_workload_report(std::cout, wr);
  std::cout << std::flush;
  try {
    tb::ojson doc = tb::to_json(r);
    for (const char* mlp_only : {"model", "batches", "results", "torch_comparison", "timing"}) doc.erase(mlp_only);
    doc["timing"] = {{"clock", wr.clock}, {"warmup", r.plan.warmup}, {"repeats", r.plan.repeats}, {"statistic", "median"},
                     {"training", "one untimed first step, then the warm-up and timed steps (Trainer::training_step_async)"}};
    doc["workloads"] = tb::workload_report_json(wr);
    return write_record(out, doc, all_ok);
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: " << e.what() << '\n';
    return 1;
  }
}

int run(const Options& o) {
  const tinyfuse::Device device = o.device == "cuda" ? tinyfuse::Device::CUDA : tinyfuse::Device::CPU;
  const bool gpu = device != tinyfuse::Device::CPU;
#ifdef TINYFUSE_BENCH_CUDA
  std::unique_ptr<tb::GpuBench> gpu_bench;
  if (gpu) {
    try {
      gpu_bench = std::make_unique<tb::GpuBench>(1337, o.fused_kernels);
    } catch (const std::exception& e) {
      std::cerr << "tinyfuse-bench: --device cuda: no usable GPU: " << e.what() << '\n';
      return 1;
    }
  }
#else
  if (gpu) {
    try {
      tb::probe_device(device);
    } catch (const tinyfuse::Error& e) {
      return no_cuda(e);
    }
    std::cerr << "tinyfuse-bench: this tinyfuse-bench was built without TINYFUSE_BENCH_CUDA; rebuild it with the "
                 "library's CUDA backend (-DTINYFUSE_CUDA=ON)\n";
    return 1;
  }
#endif

  tb::Report r;
  r.tool_version = TINYFUSE_BENCH_VERSION;
  r.date = tb::now_utc();
  r.git = tb::read_git_state();
  r.host = tb::read_host_info();
  r.blas = tinyfuse::cpu::blas_name();
  r.threads = tinyfuse::cpu::num_threads();
  r.device = o.device;
  r.plan.warmup = o.warmup.value_or(gpu ? (o.quick ? 3 : 10) : (o.quick ? 1 : 3));
  r.plan.repeats = o.repeats.value_or(gpu ? (o.quick ? 10 : 50) : (o.quick ? 3 : 10));
  r.plan.sync_each_run = !o.queue_runs;
  r.fused_kernels_left_out = o.fused_kernels_left_out;
  if (o.networks) {
    r.networks = *o.networks;
  } else {
    for (const tb::BenchNetwork& n : tb::bench_networks(device))
      if (n.by_default) r.networks.push_back(n.otype);
  }
  for (const std::string& n : r.networks) {
    bool listed = false;
    for (const tb::BenchNetwork& k : tb::bench_networks(device)) listed = listed || k.otype == n;
    if (!listed)
      std::cerr << "tinyfuse-bench: note: " << n << " is not in tinyfuse-bench's " << o.device
                << " network list; running it anyway\n";
  }
  r.widths.clear();
  if (o.widths)
    for (int w : *o.widths) r.widths.push_back(static_cast<uint32_t>(w));
  else
    r.widths = gpu ? std::vector<uint32_t>{64, 128} : std::vector<uint32_t>{tb::kMlpNeurons};
  const std::vector<int> batch_log2 = o.batch_log2 ? *o.batch_log2 : gpu ? std::vector<int>{14, 16, 18, 20, 22}
                                                                         : std::vector<int>{14, 16};
  for (int l : batch_log2) r.batches.push_back(int64_t{1} << l);
  const std::string out = !o.out.empty() ? o.out
                          : o.workloads ? "benchmarks/results/workloads-" + o.device + "-latest.json"
                                        : "benchmarks/results/" + o.device + "-latest.json";
  try {
    tb::prepare_output_folder(out);
    if (!o.ceilings.empty()) r.ceilings = tb::load_ceilings(o.ceilings);
    if (!o.compare.empty()) r.torch = tb::load_torch_run(o.compare);
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: " << e.what() << '\n';
    return 1;
  }
#ifdef TINYFUSE_BENCH_CUDA
  if (gpu_bench) {
    r.gpu = gpu_bench->info();
    std::cerr << "[gpu] " << r.gpu->name << " (sm_" << r.gpu->cc_major << r.gpu->cc_minor << "), timing with CUDA events, "
              << r.plan.warmup << " warm-up + " << r.plan.repeats << " timed runs per case\n";
    if (r.ceilings && !r.ceilings->device.empty() && r.ceilings->device != r.gpu->name)
      std::cerr << "tinyfuse-bench: warning: the ceilings were measured on '" << r.ceilings->device << "', this is '"
                << r.gpu->name << "'\n";
    if (r.torch && !r.torch->device.empty() && r.torch->device != r.gpu->name)
      std::cerr << "tinyfuse-bench: warning: the PyTorch figures were measured on '" << r.torch->device << "', this is '"
                << r.gpu->name << "'\n";
    const tb::GpuBench::Floor floor = gpu_bench->launch_floor(r.plan);
    r.launch_floor = floor.gpu;
    r.launch_floor_host = floor.host;
    std::cerr << "[floor] an empty kernel, timed the same way: " << floor.gpu.median * 1e6 << " us per run ("
              << floor.host.median * 1e6 << " us on the host)\n";
  }
#endif

  if (!gpu) {
    std::cerr << "[sgemm] " << 1024 << "^3 FP32 matmul (hardware limit) ... " << std::flush;
    r.peak = tb::measure_sgemm_peak(r.plan);
    if (r.peak->ok)
      std::cerr << tb::si(r.peak->gflops() * 1e9) << "FLOP/s\n";
    else
      std::cerr << "failed: " << r.peak->error << '\n';
  }
  if (o.workloads) return run_workloads(o, r, out);

  std::vector<tb::MlpCase> cases;
  for (const auto& net : o.skip_mlp ? std::vector<std::string>{} : r.networks)
    for (uint32_t width : r.widths)
      for (tb::Mode mode : o.modes)
        if (tb::bench_case_applies(device, net, mode, width))
          for (int64_t batch : r.batches) cases.push_back({net, mode, batch, width});
  bool all_ok = !r.peak || r.peak->ok;
  for (size_t i = 0; i < cases.size(); ++i) {
    const tb::MlpCase& c = cases[i];
    std::cerr << "[" << i + 1 << "/" << cases.size() << "] " << c.otype << " width " << c.width << " "
              << tb::to_string(c.mode) << " batch " << (gpu ? tb::batch_label(c.batch) : std::to_string(c.batch))
              << " ... " << std::flush;
    tb::CaseResult res;
#ifdef TINYFUSE_BENCH_CUDA
    if (gpu_bench)
      res = gpu_bench->run(c, r.plan, 1337);
    else
#endif
      res = tb::run_mlp_case(device, c, r.plan, 1337);
    if (res.ok)
      std::cerr << tb::si(res.samples_per_second()) << "samples/s" << progress_suffix(r, res) << '\n';
    else
      std::cerr << "failed: " << res.error << '\n';
    all_ok = all_ok && res.ok;
    r.results.push_back(std::move(res));
  }

  // The grid encodings.
  std::vector<tb::EncodingResult> encodings;
  std::optional<tb::TorchGridRun> torch_grid;
  if (!o.grid_compare.empty()) {
    try {
      torch_grid = tb::load_torch_grid_run(o.grid_compare);
      if ((torch_grid->device == "cpu") != (o.device == "cpu"))
        throw std::runtime_error("--grid-compare file '" + o.grid_compare + "' was measured on '" + torch_grid->device +
                                 "', this run is --device " + o.device + " (torch_hashgrid.py --device " + o.device + ")");
    } catch (const std::exception& e) {
      std::cerr << "tinyfuse-bench: " << e.what() << '\n';
      return 1;
    }
  }
  if (!o.skip_encodings) {
    std::cerr << "[encodings] HashGrid 2D / 3D, 16 levels x 2 features"
              << (gpu ? "" : "; Frequency, TriangleWave, OneBlob, SphericalHarmonics 3D")
              << ", forward and forward+backward ...\n";
#ifdef TINYFUSE_BENCH_CUDA
    if (gpu)
      encodings = tb::run_gpu_encoding_benchmarks(r.plan, r.batches);
    else
#endif
      encodings = tb::run_encoding_benchmarks(device, r.plan, r.batches);
  }
  for (const auto& e : encodings) all_ok = all_ok && e.ok;
  const double copy_bw = r.ceilings ? r.ceilings->copy_bytes_per_s : torch_grid ? torch_grid->copy_bytes_per_s : 0;

  tb::print_report(std::cout, r);
  if (!encodings.empty()) {
    std::cout << "\nencoding              mode               backward       batch      samples/s (median)   params     "
                 "% copy limit  x eager  x compile\n";
    for (const auto& e : encodings) {
      char line[300];
      if (e.ok) {
        const tb::GridComparison c = tb::compare_grid(e, torch_grid ? &*torch_grid : nullptr, copy_bw);
        auto num = [](const std::optional<double>& v, const char* fmt) {
          char b[32];
          if (!v) return std::string("-");
          std::snprintf(b, sizeof b, fmt, *v);
          return std::string(b);
        };
        std::snprintf(line, sizeof line, "%-21s %-18s %-14s %-10lld %18s   %-10zu %12s  %7s  %9s\n", e.name.c_str(),
                      e.mode.c_str(), e.backward_mode.empty() ? "-" : e.backward_mode.c_str(),
                      static_cast<long long>(e.batch), tb::si(e.samples_per_second()).c_str(), e.n_params,
                      num(c.percent_of_copy_limit, "%.1f").c_str(), num(c.x_eager, "%.2f").c_str(),
                      num(c.x_compile, "%.2f").c_str());
      } else {
        std::snprintf(line, sizeof line, "%-21s %-18s %-14s %-10lld failed: %.100s\n", e.name.c_str(), e.mode.c_str(),
                      e.backward_mode.c_str(), static_cast<long long>(e.batch), e.error.c_str());
      }
      std::cout << line;
    }
  }
  std::cout << std::flush;
  try {
    tb::ojson doc = tb::to_json(r);
    if (!encodings.empty()) {
      tb::ojson list = tb::ojson::array();
      for (const auto& e : encodings) {
        tb::ojson rec = {{"encoding", e.name}, {"config", "16 levels x 2 features, log2_hashmap_size 19, base 16, scale 2"},
                         {"mode", e.mode}, {"batch", e.batch}, {"n_params", e.n_params}, {"ok", e.ok},
                         {"median_s", e.seconds.median}, {"min_s", e.seconds.min}, {"max_s", e.seconds.max},
                         {"samples_per_s", e.samples_per_second()}, {"error", e.error}};
        if (gpu) {
          const tb::GridComparison c = tb::compare_grid(e, torch_grid ? &*torch_grid : nullptr, copy_bw);
          auto opt = [](const std::optional<double>& v) { return v ? tb::ojson(*v) : tb::ojson(nullptr); };
          rec["backward_mode"] = e.backward_mode;
          rec["param_dtype"] = e.param_dtype;
          rec["output_dtype"] = e.output_dtype;
          rec["bytes_per_sample"] = e.bytes_per_sample;
          rec["copy_bytes_per_s"] = copy_bw > 0 ? tb::ojson(copy_bw) : tb::ojson(nullptr);
          rec["percent_of_copy_limit"] = opt(c.percent_of_copy_limit);
          rec["torch"] = {{"eager_samples_per_s", opt(c.eager)}, {"compile_samples_per_s", opt(c.compile)},
                          {"x_eager", opt(c.x_eager)}, {"x_compile", opt(c.x_compile)},
                          {"source", o.grid_compare}};
        }
        list.push_back(rec);
      }
      doc["encodings"] = list;
    }
    return write_record(out, doc, all_ok);
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "tinyfuse-bench: " << e.message << "\n\n" << kUsage;
    return 2;
  }
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: " << e.what() << '\n';
    return 1;
  }
}
