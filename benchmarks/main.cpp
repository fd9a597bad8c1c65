// tinyfuse-bench: command line, then the runs in order (sgemm peak, then every network x mode x
// batch), progress on stderr, the table on stdout and the JSON record on disk.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/blas.h"
#include "cpu/parallel.h"
#include "report.h"
#include "tinyfuse/errors.h"

#ifndef TINYFUSE_BENCH_VERSION
#define TINYFUSE_BENCH_VERSION "unknown"
#endif

namespace tb = tinyfuse::bench;

namespace {

const char* kUsage =
    "usage: tinyfuse-bench [--device cpu|cuda] [--batches 14,16] [--out FILE.json]\n"
    "                      [--repeats N] [--warmup N] [--quick] [--help]\n"
    "\n"
    "Throughput of the 64->64x2->64 ReLU MLP (PortableMLP, CutlassMLP), inference and training\n"
    "(L2 loss, Adam), compared with the FP32 sgemm rate of the same BLAS measured in the same run.\n"
    "\n"
    "  --device D     cpu (default) or cuda\n"
    "  --batches L    comma-separated log2 batch sizes, 0..24 (default 14,16: 16384 and 65536)\n"
    "  --out FILE     JSON output (default benchmarks/results/<device>-latest.json); its folder is created\n"
    "  --repeats N    timed runs per measurement; the median is reported (default 10)\n"
    "  --warmup N     untimed runs before them (default 3)\n"
    "  --quick        --warmup 1 --repeats 3 (explicit --warmup/--repeats win)\n"
    "  --help, -h     this text\n";

struct UsageError {
  std::string message;
};

struct Options {
  std::string device = "cpu";
  std::vector<int> batch_log2 = {14, 16};
  std::string out;
  std::optional<int> repeats, warmup;
  bool quick = false;
  bool help = false;
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

std::vector<int> parse_batches(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_int("batches", item, 0, 24));
  if (out.empty() || text.back() == ',') throw UsageError{"--batches takes log2 sizes like 14,16, got '" + text + "'"};
  return out;
}

Options parse_args(int argc, char** argv) {
  static const std::vector<std::string> known = {"device", "batches", "out", "repeats", "warmup", "quick", "help"};
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
    if (name == "quick") {
      if (has_value) throw UsageError{"--quick takes no value"};
      o.quick = true;
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
      o.batch_log2 = parse_batches(value);
    } else if (name == "out") {
      if (value.empty()) throw UsageError{"--out needs a file name"};
      o.out = value;
    } else if (name == "repeats") {
      o.repeats = parse_int(name, value, 1, 100000);
    } else if (name == "warmup") {
      o.warmup = parse_int(name, value, 0, 100000);
    }
  }
  return o;
}

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

int run(const Options& o) {
  const tinyfuse::Device device = o.device == "cuda" ? tinyfuse::Device::CUDA : tinyfuse::Device::CPU;
  if (device != tinyfuse::Device::CPU) {
    try {
      tb::probe_device(device);
    } catch (const tinyfuse::Error& e) {
      return no_cuda(e);
    }
  }

  tb::Report r;
  r.tool_version = TINYFUSE_BENCH_VERSION;
  r.date = tb::now_utc();
  r.git = tb::read_git_state();
  r.host = tb::read_host_info();
  r.blas = tinyfuse::cpu::blas_name();
  r.threads = tinyfuse::cpu::num_threads();
  r.device = o.device;
  r.plan.warmup = o.warmup.value_or(o.quick ? 1 : 3);
  r.plan.repeats = o.repeats.value_or(o.quick ? 3 : 10);
  r.networks = {"PortableMLP", "CutlassMLP"};
  for (int l : o.batch_log2) r.batches.push_back(int64_t{1} << l);
  const std::string out = o.out.empty() ? "benchmarks/results/" + o.device + "-latest.json" : o.out;
  try {
    tb::prepare_output_folder(out);
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: --out: " << e.what() << '\n';
    return 1;
  }

  if (device == tinyfuse::Device::CPU) {
    std::cerr << "[sgemm] " << 1024 << "^3 FP32 matmul (hardware limit) ... " << std::flush;
    r.peak = tb::measure_sgemm_peak(r.plan);
    if (r.peak->ok)
      std::cerr << tb::si(r.peak->gflops() * 1e9) << "FLOP/s\n";
    else
      std::cerr << "failed: " << r.peak->error << '\n';
  }

  std::vector<tb::MlpCase> cases;
  for (const auto& net : r.networks)
    for (tb::Mode mode : {tb::Mode::Inference, tb::Mode::Training})
      for (int64_t batch : r.batches) cases.push_back({net, mode, batch});
  bool all_ok = !r.peak || r.peak->ok;
  for (size_t i = 0; i < cases.size(); ++i) {
    const tb::MlpCase& c = cases[i];
    std::cerr << "[" << i + 1 << "/" << cases.size() << "] " << c.otype << " " << tb::to_string(c.mode) << " batch "
              << c.batch << " ... " << std::flush;
    tb::CaseResult res = tb::run_mlp_case(device, c, r.plan, 1337);
    if (res.ok)
      std::cerr << tb::si(res.samples_per_second()) << "samples/s\n";
    else
      std::cerr << "failed: " << res.error << '\n';
    all_ok = all_ok && res.ok;
    r.results.push_back(std::move(res));
  }

  tb::print_report(std::cout, r);
  std::cout << std::flush;
  try {
    tb::write_file_atomically(out, tb::to_json(r).dump(2) + "\n");
    std::cerr << "tinyfuse-bench: wrote " << out << '\n';
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse-bench: " << e.what() << '\n';
    return 1;
  }
  return all_ok ? 0 : 1;
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
