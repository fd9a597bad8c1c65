#include "host_info.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>
#include <vector>

#include <sys/utsname.h>
#include <unistd.h>

namespace tinyfuse::bench {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 10, "model name") != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return trim(line.substr(colon + 1));
  }
  return "unknown";
}

// Runs `command` through the shell; its stdout (trimmed) if it exited with status 0.
std::optional<std::string> capture(const std::string& command) {
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  std::array<char, 256> buf;
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), got);
  if (::pclose(p) != 0) return std::nullopt;
  return trim(out);
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

HostInfo read_host_info() {
  HostInfo h;
  h.cpu_model = cpu_model_name();
  h.logical_cpus = std::thread::hardware_concurrency();
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0) h.hostname = name.data();
  struct utsname u;
  if (::uname(&u) == 0) h.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  return h;
}

std::vector<CacheLevel> read_cpu_caches() {
  std::vector<CacheLevel> out;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), type(dir + "type"), size(dir + "size");
    int l = 0;
    std::string t, s;
    if (!(level >> l) || !(type >> t) || !(size >> s)) continue;
    if (l < 2 || t == "Instruction" || s.empty()) continue;
    uint64_t bytes = 0;
    try {
      bytes = std::stoull(s);
    } catch (const std::exception&) {
      continue;
    }
    const char unit = s.back();
    bytes <<= unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    out.push_back({"L" + std::to_string(l), bytes});
  }
  std::sort(out.begin(), out.end(), [](const CacheLevel& a, const CacheLevel& b) { return a.bytes < b.bytes; });
  return out;
}

std::optional<std::array<double, 3>> read_load_average() {
  std::ifstream in("/proc/loadavg");
  std::array<double, 3> v{};
  if (!(in >> v[0] >> v[1] >> v[2])) return std::nullopt;
  return v;
}

Timestamp now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::array<char, 32> iso{}, day{};
  std::strftime(iso.data(), iso.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::strftime(day.data(), day.size(), "%Y-%m-%d", &tm);
  return {iso.data(), day.data()};
}

std::optional<GitState> read_git_state() {
  // Programs built on one machine and run on another (scripts/gpu/tinyfuse-gpu) are told the commit
  // they were built from; the tree they run in may be a copy with other history.
  if (const char* built = std::getenv("TINYFUSE_BUILD_COMMIT"); built && *built) {
    std::string c = built;
    GitState s;
    s.dirty = c.find(" (with uncommitted changes)") != std::string::npos;
    s.commit = c.substr(0, c.find(' '));
    return s;
  }
  std::vector<std::string> dirs;
#ifdef TINYFUSE_SOURCE_DIR
  dirs.push_back(TINYFUSE_SOURCE_DIR);
#endif
  dirs.push_back(".");
  for (const std::string& dir : dirs) {
    const std::string git = "git -C " + shell_quote(dir) + " ";
    auto commit = capture(git + "rev-parse --short HEAD 2>/dev/null");
    if (!commit || commit->empty()) continue;
    GitState s;
    s.commit = *commit;
    if (auto status = capture(git + "status --porcelain --untracked-files=no 2>/dev/null")) s.dirty = !status->empty();
    return s;
  }
  return std::nullopt;
}

}  // namespace tinyfuse::bench
