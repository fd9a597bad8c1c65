#include "args.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tinyfuse/errors.h"

namespace tinyfuse::cli {

namespace {

const OptionSpec* find_spec(const std::vector<OptionSpec>& specs, const std::string& name) {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

[[noreturn]] void unknown_option(const std::string& name, const std::vector<OptionSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);
  std::string message = "unknown option '--" + name + "'";
  const std::string guess = closest_match(name, names);
  if (!guess.empty()) message += " (did you mean '--" + guess + "'?)";
  throw UsageError(message);
}

}  // namespace

Options Options::parse(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs) {
  Options out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h") {
      out.values_["help"] = "";
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (!arg.empty() && arg[0] == '-') throw UsageError("unknown option '" + arg + "'");
      throw UsageError("unexpected argument '" + arg + "' (options are given as --name value)");
    }
    std::string name = arg.substr(2);
    std::string value;
    bool inline_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec* spec = find_spec(specs, name);
    if (!spec) unknown_option(name, specs);
    if (spec->takes_value) {
      if (!inline_value) {
        if (i + 1 >= args.size()) throw UsageError("option '--" + name + "' needs a value");
        value = args[++i];
      }
    } else if (inline_value) {
      throw UsageError("option '--" + name + "' takes no value");
    }
    out.values_[name] = value;
  }
  return out;
}

std::string Options::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Device Options::get_device() const {
  const std::string device = get("device", "cpu");
  if (device == "cpu") return Device::CPU;
  if (device == "cuda") return Device::CUDA;
  throw UsageError("option '--device' takes cpu or cuda, got '" + device + "'");
}

uint64_t Options::get_uint(const std::string& name, uint64_t fallback, uint64_t lo, uint64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  bool digits = !text.empty();
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) throw UsageError("option '--" + name + "' needs " + range + ", got '" + text + "'");
  // Decimal digits of any length: a value beyond 2^64 - 1 is out of range like any other.
  uint64_t v = 0;
  bool overflow = false;
  for (char c : text)
    overflow = overflow || __builtin_mul_overflow(v, uint64_t{10}, &v) ||
               __builtin_add_overflow(v, static_cast<uint64_t>(c - '0'), &v);
  if (overflow || v < lo || v > hi) throw UsageError("option '--" + name + "' needs " + range + ", got " + text);
  return v;
}

double Options::get_double(const std::string& name, double fallback, double lo, double hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  std::ostringstream range;
  range << "a number from " << lo << " to " << hi;
  // strtod accepts "inf", "nan" and hex floats: only plain decimal notation is taken.
  bool plain = !text.empty();
  for (char c : text) plain = plain && (std::isdigit(static_cast<unsigned char>(c)) || std::strchr("+-.eE", c));
  char* end = nullptr;
  const double v = plain ? std::strtod(text.c_str(), &end) : NAN;
  if (!plain || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi)
    throw UsageError("option '--" + name + "' needs " + range.str() + ", got '" + text + "'");
  return v;
}

}  // namespace tinyfuse::cli
