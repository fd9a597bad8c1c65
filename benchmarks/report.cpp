#include "report.h"

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

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::optional<double> percent_of_peak(const Report& r, const CaseResult& c) {
  if (!c.ok || !r.peak || !r.peak->ok) return std::nullopt;
  return 100.0 * c.gflops() / r.peak->gflops();
}

// Columns of strings, padded to the widest cell; `right` marks the right-aligned (numeric) ones.
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

ojson stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"runs", s.runs}};
}

}  // namespace

std::string si(double value) {
  static const char* prefixes[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (std::fabs(value) >= 1000.0 && p < 4) {
    value /= 1000.0;
    ++p;
  }
  return fixed(value, 3) + (p ? std::string(" ") + prefixes[p] : std::string("  "));
}

void print_report(std::ostream& os, const Report& r) {
  os << "tinyfuse-bench " << r.tool_version << ": " << mlp_description() << ", FP32\n";
  os << "  date     " << r.date.iso_utc << '\n';
  os << "  cpu      " << r.host.cpu_model << " (" << r.host.logical_cpus << " logical CPUs)";
  if (!r.host.hostname.empty()) os << ", host " << r.host.hostname;
  if (!r.host.os.empty()) os << ", " << r.host.os;
  os << '\n';
  os << "  blas     " << r.blas << '\n';
  os << "  threads  " << r.threads << '\n';
  if (r.git) {
    os << "  commit   " << r.git->commit;
    if (r.git->dirty && *r.git->dirty) os << " (with uncommitted changes)";
    os << '\n';
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
  os << '\n';

  const std::vector<std::string> head = {"device", "network", "mode", "batch", "samples/s (median)",
                                         "samples/s (min - max)", "GFLOP/s", "% of sgemm peak"};
  const std::vector<bool> right = {false, false, false, true, true, true, true, true};
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> errors;
  for (const CaseResult& c : r.results) {
    std::vector<std::string> row = {c.device, c.network, to_string(c.mode), std::to_string(c.batch)};
    if (c.ok) {
      const double lo = static_cast<double>(c.batch) / c.seconds.max, hi = static_cast<double>(c.batch) / c.seconds.min;
      const auto pct = percent_of_peak(r, c);
      row.insert(row.end(), {si(c.samples_per_second()), si(lo) + " - " + si(hi), fixed(c.gflops(), 2),
                             pct ? fixed(*pct, 1) + " %" : std::string("n/a")});
    } else {
      row.insert(row.end(), {"failed", "-", "-", "-"});
      errors.push_back(c.network + " " + to_string(c.mode) + " batch " + std::to_string(c.batch) + ": " + c.error);
    }
    rows.push_back(std::move(row));
  }
  print_table(os, head, right, rows);
  for (const std::string& e : errors) os << "error: " << e << '\n';
}

ojson to_json(const Report& r) {
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
  ojson nets = ojson::object();
  for (const std::string& n : r.networks) nets[n] = mlp_network_config(n);
  ojson training = mlp_training_config(r.networks.empty() ? "CutlassMLP" : r.networks.front());
  training.erase("network");
  j["model"] = {{"description", mlp_description()},
                {"precision", "f32"},
                {"networks", nets},
                {"training", training}};
  j["timing"] = {{"clock", "std::chrono::steady_clock"},
                 {"warmup", r.plan.warmup},
                 {"repeats", r.plan.repeats},
                 {"statistic", "median"},
                 {"flop_counting", "forward: 2*sum(in*out) over the layers per sample; training: 3x forward"}};
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
  ojson results = ojson::array();
  for (const CaseResult& c : r.results) {
    ojson rj = {{"device", c.device},
               {"network", c.network},
               {"mode", to_string(c.mode)},
               {"batch", c.batch},
               {"status", c.ok ? "ok" : "error"}};
    if (c.ok) {
      rj["samples_per_second"] = {{"median", c.samples_per_second()},
                                  {"min", static_cast<double>(c.batch) / c.seconds.max},
                                  {"max", static_cast<double>(c.batch) / c.seconds.min}};
      rj["gflops"] = c.gflops();
      const auto pct = percent_of_peak(r, c);
      rj["percent_of_sgemm_peak"] = pct ? ojson(*pct) : ojson(nullptr);
      rj["flop_per_sample"] = c.flop_per_sample;
      rj["seconds"] = stats_json(c.seconds);
      if (c.mode == Mode::Training) rj["last_loss"] = c.last_loss;
    } else {
      rj["error"] = c.error;
    }
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
  auto fail = [&](const std::string& what, const std::string& p, int err) {
    throw std::runtime_error("cannot " + what + " '" + p + "': " + std::strerror(err));
  };
  prepare_output_folder(path);
  // Next to the target, so the rename stays on one file system and replaces it atomically.
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("create", tmp, errno);
  bool good = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
              ::fsync(::fileno(f)) == 0;
  int err = errno;
  if (std::fclose(f) != 0 && good) {
    good = false;
    err = errno;
  }
  if (!good) {
    std::remove(tmp.c_str());
    fail("write", tmp, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    fail("rename a temporary file to", path, err);
  }
}

}  // namespace tinyfuse::bench
