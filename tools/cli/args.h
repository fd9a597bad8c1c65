// Reading "--name value", "--name=value" and "--flag" options of a subcommand.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tinyfuse/common.h"

namespace tinyfuse::cli {

// A mistake on the command line. main() prints it with the usage text and exits with code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string name;  // without the leading "--"
  bool takes_value = false;
};

class Options {
 public:
  // Throws UsageError for unknown options (suggesting the closest known one), a missing value,
  // a value given to a flag, and positional arguments. A repeated option keeps its last value.
  static Options parse(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  // An integer in [lo, hi]; anything else is a UsageError naming the option.
  uint64_t get_uint(const std::string& name, uint64_t fallback, uint64_t lo, uint64_t hi) const;
  // A finite decimal number in [lo, hi] ("0.1", "1e-2"); anything else is a UsageError naming it.
  double get_double(const std::string& name, double fallback, double lo, double hi) const;
  // --device: cpu (the default) or cuda; anything else is a UsageError.
  Device get_device() const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace tinyfuse::cli
