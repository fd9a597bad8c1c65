#include "core/json_text.h"

#include <unordered_set>
#include <vector>

#include "core/text.h"

namespace tinyfuse {

namespace {

const std::string kDepthRule = "arrays and objects are nested deeper than " + std::to_string(kMaxJsonDepth) +
                               " levels (tinyfuse's limit for JSON documents, kMaxJsonDepth)";
const std::string kDepthAccepted = "JSON nested at most " + std::to_string(kMaxJsonDepth) + " levels deep";

// One open array or object while walking a document, and where its current element sits.
struct Level {
  bool object = false;
  size_t index = 0;  // elements begun so far (arrays)
  std::string key;   // the current element's key (objects)
};

// "a.b[2].c" for the current element of the innermost level.
std::string path_of(const std::vector<Level>& levels) {
  std::string path;
  for (const Level& l : levels) {
    if (l.object) {
      if (l.key.empty() && l.index == 0) break;  // no element begun yet
      path += (path.empty() ? "" : ".") + shorten(l.key, 40);
    } else {
      if (l.index == 0) break;
      path += "[" + std::to_string(l.index - 1) + "]";
    }
  }
  return path;
}

// The parse: a depth and duplicate-key check on every event of nlohmann's callback parser
// (which itself keeps its state on the heap, not the stack).
class LimitedParse {
 public:
  bool on_event(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        element_begins();
        if (static_cast<size_t>(depth) + 1 > kMaxJsonDepth) throw JsonError(path_of(levels_), kDepthRule, kDepthAccepted);
        levels_.push_back({event == json::parse_event_t::object_start, 0, {}});
        keys_.emplace_back();
        break;
      case json::parse_event_t::key: {
        Level& l = levels_.back();
        l.key = parsed.get<std::string>();
        l.index = 1;
        if (!keys_.back().insert(l.key).second)
          throw JsonError(path_of(levels_), "the key appears twice in one object (which one is meant is unknowable)",
                          "each key at most once per object");
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        levels_.pop_back();
        keys_.pop_back();
        break;
      case json::parse_event_t::value:
        element_begins();
        break;
    }
    return true;
  }
  std::string path() const { return path_of(levels_); }

 private:
  void element_begins() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
  }
  std::vector<Level> levels_;
  std::vector<std::unordered_set<std::string>> keys_;
};

}  // namespace

JsonError::JsonError(std::string path, std::string rule, std::string accepted)
    : Error((path.empty() ? std::string() : "at \"" + path + "\": ") + rule),
      path_(std::move(path)), rule_(std::move(rule)), accepted_(std::move(accepted)) {}

json parse_json_text(const char* begin, const char* end) {
  LimitedParse state;
  try {
    return json::parse(begin, end, [&](int depth, json::parse_event_t event, json& parsed) {
      return state.on_event(depth, event, parsed);
    });
  } catch (const json::exception& e) {
    // A syntax error, or a number beyond double's range ("1e400"). nlohmann's message quotes the
    // token it stopped at, which may be long.
    throw JsonError(state.path(), "not valid JSON: " + shorten(valid_utf8(e.what()), 300),
                    "JSON text (RFC 8259) with numbers within double's range");
  }
}

void check_json_depth(const json& value) {
  if (!value.is_structured()) return;
  struct Open {
    const json* value;
    json::const_iterator next;
  };
  std::vector<Open> open = {{&value, value.cbegin()}};
  std::vector<Level> levels = {{value.is_object(), 0, {}}};
  while (!open.empty()) {
    Open& top = open.back();
    if (top.next == top.value->cend()) {
      open.pop_back();
      levels.pop_back();
      continue;
    }
    Level& level = levels.back();
    if (level.object) level.key = top.next.key(), level.index = 1;
    else ++level.index;
    const json& child = *top.next;
    ++top.next;
    if (!child.is_structured()) continue;
    if (open.size() + 1 > kMaxJsonDepth) throw JsonError(path_of(levels), kDepthRule, kDepthAccepted);
    open.push_back({&child, child.cbegin()});
    levels.push_back({child.is_object(), 0, {}});
  }
}

std::string json_excerpt(const json& value, size_t max_bytes) {
  const size_t budget = max_bytes + 1;  // one byte more than fits says that it must be cut
  std::string out;
  auto quoted = [&](const std::string& s) {
    out += json(utf8_prefix(s, budget)).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  struct Open {
    const json* value;
    json::const_iterator next;
    bool first;
  };
  std::vector<Open> open;
  auto emit = [&](const json& v) {
    if (v.is_structured()) {
      out += v.is_object() ? '{' : '[';
      open.push_back({&v, v.cbegin(), true});
    } else if (v.is_string()) {
      quoted(v.get_ref<const std::string&>());
    } else if (v.is_binary()) {
      out += "(binary)";
    } else {
      out += v.dump();
    }
  };
  emit(value);
  while (!open.empty() && out.size() <= budget) {
    Open& top = open.back();
    if (top.next == top.value->cend()) {
      out += top.value->is_object() ? '}' : ']';
      open.pop_back();
      continue;
    }
    if (!top.first) out += ',';
    top.first = false;
    if (top.value->is_object()) {
      quoted(top.next.key());
      out += ':';
    }
    const json& child = *top.next;
    ++top.next;
    emit(child);
  }
  return shorten(out, max_bytes);
}

}  // namespace tinyfuse
