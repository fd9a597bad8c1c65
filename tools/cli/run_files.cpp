#include "run_files.h"

#include <cmath>
#include <stdexcept>
#include <system_error>

#include "args.h"

namespace tinyfuse::cli {

namespace fs = std::filesystem;

void refuse_overwriting_inputs(const std::vector<InputFile>& inputs, const std::vector<fs::path>& outputs,
                               const fs::path& checkpoint, const fs::path& snapshots) {
  for (const InputFile& in : inputs) {
    if (in.path.empty()) continue;
    std::error_code ec;
    const auto same = [&](const fs::path& a, const fs::path& b) { return fs::exists(b, ec) && fs::equivalent(a, b, ec); };
    const auto refuse = [&](const fs::path& out) {
      throw UsageError(in.option + " " + in.path + " is the file this run would write as " + out.string() +
                       "; it would be overwritten: choose another --out directory");
    };
    for (const fs::path& out : outputs)
      if (!out.empty() && same(in.path, out)) refuse(out);
    if (in.option != "--resume" && same(in.path, checkpoint)) refuse(checkpoint);
    const fs::path folder = fs::canonical(in.path, ec).parent_path();
    if (!snapshots.empty() && !ec && same(folder, snapshots))
      throw UsageError(in.option + " " + in.path + " lies in " + snapshots.string() +
                       ", where --save-every writes its snapshots: move it or choose another --out directory");
  }
}

void make_output_directory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create output directory '" + dir.string() + "': " + ec.message());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

nlohmann::ordered_json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

}  // namespace tinyfuse::cli
