// Strict reading of one JSON config object: every key must be known, every value of the right
// type and range; violations throw ConfigError naming the key path, value, rule and what works.
// The one exception is the unknown-key rule, which a caller may relax (UnknownKeySink below).
#pragma once

#include <string>
#include <vector>

#include "tinyfuse/errors.h"
#include "tinyfuse/object.h"

namespace tinyfuse {

// While one is alive on a thread, ConfigReaders built on that thread do not throw for unknown keys:
// each is recorded in `sink` (once per key path) as the ConfigError that would have been thrown,
// and skipped. The factory opens one for BuildOptions::ignored_keys, so the decision is made here
// and only here; nested sinks on a thread record into the innermost.
class UnknownKeySink {
 public:
  explicit UnknownKeySink(std::vector<ConfigError>* sink);
  ~UnknownKeySink();
  UnknownKeySink(const UnknownKeySink&) = delete;
  UnknownKeySink& operator=(const UnknownKeySink&) = delete;

 private:
  std::vector<ConfigError>* previous_;
};

class ConfigReader {
 public:
  // `path` is the dotted location used in messages ("network", "optimizer.nested").
  // `known_keys` are the keys this object accepts besides "otype".
  ConfigReader(const json& config, std::string path, std::vector<std::string> known_keys);

  const std::string& path() const { return path_; }
  std::string key_path(const std::string& key) const;
  bool has(const std::string& key) const { return config_.contains(key); }
  const json& raw(const std::string& key) const { return config_.at(key); }

  bool get_bool(const std::string& key, bool fallback) const;
  // Integers in [lo, hi].
  uint32_t get_uint(const std::string& key, uint32_t fallback, uint32_t lo, uint32_t hi) const;
  // Finite numbers in [lo, hi].
  double get_number(const std::string& key, double fallback, double lo, double hi) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // One of `choices`, compared case-insensitively; returns the canonical spelling.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices) const;
  const json& get_object(const std::string& key) const;

  [[noreturn]] void fail(const std::string& key, const std::string& rule, const std::string& accepted) const;

 private:
  const json& config_;
  std::string path_;
};

// The "otype" of a config object (checked to be a string), canonicalised against `choices`
// case-insensitively, with a close-match suggestion on failure.
std::string read_otype(const json& config, const std::string& path, const std::vector<std::string>& choices);

bool equals_case_insensitive(const std::string& a, const std::string& b);
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

}  // namespace tinyfuse
