// `tinyfuse`: the command-line front end. Picks a subcommand and turns failures into messages
// and exit codes: 0 success, 1 error, 2 command-line mistake.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "args.h"
#include "learn_image.h"
#include "learn_sdf.h"
#include "tinyfuse/errors.h"

namespace {

using tinyfuse::cli::UsageError;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);
  const char* (*usage)();
};

const Command kCommands[] = {
    {"learn-image", "fit a network to a picture (pixel position -> RGB)", tinyfuse::cli::run_learn_image,
     tinyfuse::cli::learn_image_usage},
    {"learn-sdf", "fit a network to a surface's signed distance (eikonal loss)", tinyfuse::cli::run_learn_sdf,
     tinyfuse::cli::learn_sdf_usage},
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tinyfuse <command> [options]\n"
               "       tinyfuse --help | --version\n"
               "\n"
               "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-14s%s\n", c.name, c.summary);
  std::fprintf(out,
               "\n"
               "Run 'tinyfuse <command> --help' for the options of a command.\n");
}

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

int dispatch(const std::vector<std::string>& args, const Command*& command) {
  if (args.empty()) throw UsageError("no command given");
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(stdout);
    return 0;
  }
  if (first == "--version") {
    std::printf("tinyfuse %s\n", TINYFUSE_VERSION);
    return 0;
  }
  command = find_command(first);
  if (!command) {
    std::vector<std::string> names;
    for (const Command& c : kCommands) names.push_back(c.name);
    std::string message = (first.rfind("-", 0) == 0 ? "unknown option '" : "unknown command '") + first + "'";
    const std::string guess = tinyfuse::closest_match(first, names);
    if (!guess.empty()) message += " (did you mean '" + guess + "'?)";
    throw UsageError(message);
  }
  return command->run(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const Command* command = nullptr;
  try {
    return dispatch(args, command);
  } catch (const UsageError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tinyfuse: %s\n\n", e.what());
    if (command) std::fputs(command->usage(), stderr);
    else print_usage(stderr);
    return 2;
  } catch (const std::exception& e) {
    // tinyfuse::Error (bad config, unsupported device, ...) and I/O failures alike.
    std::fflush(stdout);
    std::fprintf(stderr, "tinyfuse: error: %s\n", e.what());
    return 1;
  }
}
