// Config text and files, read as every tinyfuse front end reads them (factory.h).
#include "core/file_read.h"
#include "core/json_text.h"
#include "core/text.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/limits.h"

namespace tinyfuse {

json parse_config(const std::string& text, const std::string& source) {
  try {
    return parse_json_text(text);
  } catch (const JsonError& e) {
    throw ConfigError(e.path().empty() ? "(top level)" : e.path(), shorten(text, 40), source + ": " + e.rule(),
                      e.accepted());
  }
}

json read_config_file(const std::string& path) {
  const std::string source = "config file \"" + path + "\"";
  return parse_config(read_regular_file(path, kMaxConfigFileBytes, source, "kMaxConfigFileBytes"), source);
}

}  // namespace tinyfuse
