#include "core/config_limits.h"

#include <vector>

#include "core/json_text.h"
#include "tinyfuse/limits.h"

namespace tinyfuse {

namespace {

std::string join_path(const std::string& parent, const std::string& child) {
  if (parent.empty()) return child;
  if (child.empty()) return parent;
  return child[0] == '[' ? parent + child : parent + "." + child;
}

// Every problem is named at the key it was found and quotes the start of what was given there.
void check_depth(const json& config, const std::string& path) {
  try {
    check_json_depth(config);
  } catch (const JsonError& e) {
    throw ConfigError(join_path(path, e.path()), json_excerpt(config, 40), e.rule(), e.accepted());
  }
}

// Counts the configs under `root` (itself and every config in a "nested", at any depth) into
// `count`, refusing more than kMaxConfigNesting levels or kMaxConfigObjects configs.
void count_nested_configs(const json& root, const std::string& path, size_t& count) {
  struct Open {
    const json* config;
    std::string path;
    size_t level;
  };
  if (!root.is_object()) return;  // the section's own reader reports that
  std::vector<Open> todo = {{&root, path, 0}};
  while (!todo.empty()) {
    const Open o = std::move(todo.back());
    todo.pop_back();
    if (++count > kMaxConfigObjects)
      throw ConfigError(o.path, json_excerpt(*o.config, 40),
                        "the config describes more than " + std::to_string(kMaxConfigObjects) +
                            " encodings and optimizers (tinyfuse's limit, kMaxConfigObjects)",
                        "at most " + std::to_string(kMaxConfigObjects) + " encodings and optimizers, nested ones included");
    if (o.level > kMaxConfigNesting)
      throw ConfigError(o.path, json_excerpt(*o.config, 40),
                        "configs are nested more than " + std::to_string(kMaxConfigNesting) +
                            " levels deep (tinyfuse's limit, kMaxConfigNesting)",
                        "at most " + std::to_string(kMaxConfigNesting) + " levels of \"nested\" configs");
    const auto nested = o.config->find("nested");
    if (nested == o.config->end()) continue;
    const std::string nested_path = join_path(o.path, "nested");
    if (nested->is_object()) todo.push_back({&*nested, nested_path, o.level + 1});
    if (nested->is_array())  // last first, so that they are taken in document order
      for (size_t i = nested->size(); i-- > 0;)
        if ((*nested)[i].is_object()) todo.push_back({&(*nested)[i], nested_path + "[" + std::to_string(i) + "]", o.level + 1});
  }
}

}  // namespace

void check_model_config_limits(const json& config) {
  check_depth(config, "");
  if (!config.is_object()) return;
  size_t count = 0;
  for (const char* section : {"encoding", "optimizer"}) {
    const auto it = config.find(section);
    if (it != config.end()) count_nested_configs(*it, section, count);
  }
}

void check_section_config_limits(const json& config, const std::string& path) {
  check_depth(config, path);
  size_t count = 0;
  count_nested_configs(config, path, count);
}

}  // namespace tinyfuse
