// One way for tests to expect an error: `f` throws E, and its message names every needle.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>
#include <vector>

namespace tinyfuse::testing {

// The message of the E that `f` throws (each needle expected in it); "" and a failure naming
// `what` when `f` returns instead. Exceptions of other types pass through to the test.
template <typename E, typename F>
std::string expect_error_message(F&& f, const std::vector<std::string>& needles, const std::string& what = "the call") {
  try {
    f();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "expected \"" << n << "\" in: " << msg;
    return msg;
  }
  ADD_FAILURE() << what << " did not throw " << typeid(E).name();
  return "";
}

}  // namespace tinyfuse::testing
