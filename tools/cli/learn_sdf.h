// `tinyfuse learn-sdf`: fit a network to the signed distance of a surface (a built-in shape or a
// points file) with the eikonal loss, and write slices of the result, a loss plot, a JSON log with
// the held-out error, and a checkpoint.
#pragma once

#include <string>
#include <vector>

namespace tinyfuse::cli {

// `args` are the words after "learn-sdf". Returns the exit code; throws UsageError for command
// line mistakes and tinyfuse::Error / std::exception for everything else.
int run_learn_sdf(const std::vector<std::string>& args);

const char* learn_sdf_usage();

}  // namespace tinyfuse::cli
