#include "tinyfuse/errors.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

#include "core/text.h"

namespace tinyfuse {

Error::Error(const std::string& message) : std::runtime_error(valid_utf8(message)) {}
Error::Error(const char* message) : Error(std::string(message ? message : "")) {}

namespace {
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

ConfigError::ConfigError(std::string key, std::string value, std::string rule, std::string accepted)
    : Error("config error at \"" + key + "\" = " + value + ": " + rule + "; accepted: " + accepted),
      key_(valid_utf8(key)), value_(valid_utf8(value)), rule_(valid_utf8(rule)), accepted_(valid_utf8(accepted)) {}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  const std::string w = lower(word);
  for (const auto& c : candidates) {
    size_t d = edit_distance(w, lower(c));
    if (d < best_d) best_d = d, best = c;
  }
  // Close means at most a third of the letters differ (and at least one edit allowed).
  size_t limit = std::max<size_t>(1, std::max(word.size(), best.size()) / 3);
  return best_d <= limit ? best : std::string();
}

}  // namespace tinyfuse
