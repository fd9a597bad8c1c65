// The error types tinyfuse throws. Every message names what was wrong and what would work.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace tinyfuse {

// Base of everything tinyfuse throws on purpose. The message is always valid UTF-8: bytes of the
// caller's input that are not are shown as "\xNN".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  explicit Error(const char* message);
};

// A JSON config (or a config/device/build combination) that tinyfuse will not run.
// `key` is the dotted path of the offending key ("network.n_neurons"), `value` its JSON text,
// `rule` what it broke and `accepted` what would work.
class ConfigError : public Error {
 public:
  ConfigError(std::string key, std::string value, std::string rule, std::string accepted);
  const std::string& key() const { return key_; }
  const std::string& value() const { return value_; }
  const std::string& rule() const { return rule_; }
  const std::string& accepted() const { return accepted_; }

 private:
  std::string key_, value_, rule_, accepted_;
};

// A tensor handed to a call has the wrong shape, dtype, device or strides.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// The requested operation is not available in this build or on this device.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

// A request for more memory than can be had: the size overflowed, exceeds what the machine has,
// or the allocation failed. Nothing was changed; the process and its models keep working.
// `bytes` is what was needed (SIZE_MAX when the size itself overflowed, 0 when unknown).
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(size_t bytes, const std::string& what, const std::string& why);
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
};

// Closest candidate to `word` by edit distance (case-insensitive), or "" if none is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tinyfuse
