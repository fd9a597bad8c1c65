// Where and when a benchmark ran: CPU model, host, OS, date, git commit.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tinyfuse::bench {

struct HostInfo {
  std::string cpu_model;   // /proc/cpuinfo "model name", or "unknown"
  unsigned logical_cpus = 0;
  std::string hostname;
  std::string os;          // "Linux 6.8.0 x86_64"
};
HostInfo read_host_info();

// The CPU's data (or unified) caches from level 2 up, as cpu0 sees them in sysfs: one core's L2,
// the shared L3. Empty when sysfs does not say.
struct CacheLevel {
  std::string name;  // "L2", "L3"
  uint64_t bytes = 0;
};
std::vector<CacheLevel> read_cpu_caches();

// The 1-, 5- and 15-minute load averages (/proc/loadavg): how busy the machine was around a run.
std::optional<std::array<double, 3>> read_load_average();

struct Timestamp {
  std::string iso_utc;  // 2025-01-31T12:34:56Z
  std::string day;      // 2025-01-31 (UTC)
};
Timestamp now_utc();

struct GitState {
  std::string commit;         // short hash
  std::optional<bool> dirty;  // tracked files modified; unknown if git status failed
};
// `git rev-parse --short HEAD` in the source tree the tool was built from (then in the current
// directory); nullopt when git or the repository is not there.
std::optional<GitState> read_git_state();

}  // namespace tinyfuse::bench
