// `tinyfuse learn-image`: fit a network to a picture (2-D pixel position -> RGB) and write the
// reconstruction, a loss plot and a JSON log.
#pragma once

#include <string>
#include <vector>

namespace tinyfuse::cli {

// `args` are the words after "learn-image". Returns the exit code; throws UsageError for command
// line mistakes and tinyfuse::Error / std::exception for everything else.
int run_learn_image(const std::vector<std::string>& args);

const char* learn_image_usage();

}  // namespace tinyfuse::cli
