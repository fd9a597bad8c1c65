// JSON that tinyfuse is given (config text and files, checkpoint headers, json values handed to
// the factory), read and shown without recursing over its depth: a deeply nested document gets a
// clear error, never a stack overflow, and messages quote a bounded excerpt of a value, never
// the whole of it.
#pragma once

#include <string>

#include "tinyfuse/errors.h"
#include "tinyfuse/limits.h"
#include "tinyfuse/object.h"

namespace tinyfuse {

// A problem found in JSON text or a JSON value. `path` is where ("encoding.nested[2].otype", ""
// for the document itself), `rule` what is wrong, `accepted` what would work.
class JsonError : public Error {
 public:
  JsonError(std::string path, std::string rule, std::string accepted);
  const std::string& path() const { return path_; }
  const std::string& rule() const { return rule_; }
  const std::string& accepted() const { return accepted_; }

 private:
  std::string path_, rule_, accepted_;
};

// Parses [begin, end) as JSON. Throws JsonError for text that is not JSON (a syntax error, a
// number out of double's range), that nests arrays and objects deeper than kMaxJsonDepth, or
// whose objects repeat a key (which one was meant is unknowable; nlohmann's reader would keep
// the last silently).
json parse_json_text(const char* begin, const char* end);
inline json parse_json_text(const std::string& text) { return parse_json_text(text.data(), text.data() + text.size()); }

// Throws JsonError when `value` nests arrays and objects deeper than kMaxJsonDepth.
void check_json_depth(const json& value);

// `value` as compact JSON text of at most `max_bytes` bytes, cut at a character boundary and
// ended with "..." when longer. Only what is shown is serialized; strings that are not valid
// UTF-8 show U+FFFD where the bytes are bad.
std::string json_excerpt(const json& value, size_t max_bytes = 80);

}  // namespace tinyfuse
