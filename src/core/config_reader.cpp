#include "core/config_reader.h"

#include "core/json_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace tinyfuse {

bool equals_case_insensitive(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

namespace {

std::string json_text(const json& j) { return json_excerpt(j, 80); }

std::string type_name(const json& j) {
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  return "null";
}

std::string with_suggestion(const std::string& word, const std::vector<std::string>& choices) {
  std::string close = closest_match(word, choices);
  return close.empty() ? "" : " (did you mean \"" + close + "\"?)";
}

thread_local std::vector<ConfigError>* unknown_key_sink = nullptr;

void record_unknown_key(ConfigError e) {
  for (const ConfigError& seen : *unknown_key_sink)
    if (seen.key() == e.key()) return;  // a config read twice (a probe, then the build) reports once
  unknown_key_sink->push_back(std::move(e));
}

}  // namespace

UnknownKeySink::UnknownKeySink(std::vector<ConfigError>* sink) : previous_(unknown_key_sink) {
  unknown_key_sink = sink;
}

UnknownKeySink::~UnknownKeySink() { unknown_key_sink = previous_; }

ConfigReader::ConfigReader(const json& config, std::string path, std::vector<std::string> known_keys)
    : config_(config), path_(std::move(path)) {
  if (!config_.is_object())
    throw ConfigError(path_, json_text(config_), "must be a JSON object", "{\"otype\": ...}");
  known_keys.push_back("otype");
  std::sort(known_keys.begin(), known_keys.end());
  for (auto it = config_.begin(); it != config_.end(); ++it) {
    if (std::binary_search(known_keys.begin(), known_keys.end(), it.key())) continue;
    ConfigError e(key_path(it.key()), json_text(it.value()), "unknown key" + with_suggestion(it.key(), known_keys),
                  join(known_keys));
    if (!unknown_key_sink) throw e;
    record_unknown_key(std::move(e));
  }
}

std::string ConfigReader::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void ConfigReader::fail(const std::string& key, const std::string& rule, const std::string& accepted) const {
  throw ConfigError(key_path(key), has(key) ? json_text(config_.at(key)) : "(missing)", rule, accepted);
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& v = config_.at(key);
  if (!v.is_boolean()) fail(key, "must be a boolean, got " + type_name(v), "true, false");
  return v.get<bool>();
}

uint32_t ConfigReader::get_uint(const std::string& key, uint32_t fallback, uint32_t lo, uint32_t hi) const {
  if (!has(key)) return fallback;
  const json& v = config_.at(key);
  std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v.is_number()) fail(key, "must be an integer, got " + type_name(v), range);
  double d = v.get<double>();
  if (std::floor(d) != d) fail(key, "must be an integer", range);
  if (d < lo || d > hi) fail(key, "out of range", range);
  return static_cast<uint32_t>(d);
}

double ConfigReader::get_number(const std::string& key, double fallback, double lo, double hi) const {
  if (!has(key)) return fallback;
  const json& v = config_.at(key);
  auto fmt = [](double x) {
    if (std::isinf(x)) return std::string(x < 0 ? "-inf" : "inf");
    return json(x).dump();
  };
  std::string range = "a finite number in [" + fmt(lo) + ", " + fmt(hi) + "]";
  if (!v.is_number()) fail(key, "must be a number, got " + type_name(v), range);
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) fail(key, "out of range", range);
  return d;
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const json& v = config_.at(key);
  if (!v.is_string()) fail(key, "must be a string, got " + type_name(v), "a string");
  return v.get<std::string>();
}

std::string ConfigReader::get_choice(const std::string& key, const std::string& fallback,
                                     const std::vector<std::string>& choices) const {
  std::string s = get_string(key, fallback);
  for (const auto& c : choices)
    if (equals_case_insensitive(c, s)) return c;
  fail(key, "unknown value" + with_suggestion(s, choices), join(choices));
}

const json& ConfigReader::get_object(const std::string& key) const {
  if (!has(key)) fail(key, "required key is missing", "a JSON object");
  const json& v = config_.at(key);
  if (!v.is_object()) fail(key, "must be a JSON object, got " + type_name(v), "a JSON object");
  return v;
}

std::string read_otype(const json& config, const std::string& path, const std::vector<std::string>& choices) {
  std::string key = path.empty() ? "otype" : path + ".otype";
  if (!config.is_object())
    throw ConfigError(path, json_text(config), "must be a JSON object with an \"otype\"", join(choices));
  if (!config.contains("otype"))
    throw ConfigError(key, "(missing)", "required key is missing", join(choices));
  const json& v = config.at("otype");
  if (!v.is_string()) throw ConfigError(key, json_text(v), "must be a string", join(choices));
  std::string s = v.get<std::string>();
  for (const auto& c : choices)
    if (equals_case_insensitive(c, s)) return c;
  throw ConfigError(key, json_text(v), "unknown otype" + with_suggestion(s, choices), join(choices));
}

}  // namespace tinyfuse
