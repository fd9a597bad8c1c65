// What the training commands share about the files of a run: the output directory, refusing an
// output that would replace an input, and small helpers for their logs.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tinyfuse::cli {

// A file a run reads, by the option that named it ("--config", "--resume", ...); empty path: none.
struct InputFile {
  std::string option, path;
};

// Refuses (UsageError) a run whose outputs include one of its inputs (the same file, by any name),
// before anything is written. The checkpoint counts as an output for every input but "--resume":
// a run resumed from OUT/checkpoint.tfc replaces it with its own continuation, which is what
// resuming in place means. `snapshots` (empty: the run writes none) is a folder the run fills; an
// input inside it is refused too.
void refuse_overwriting_inputs(const std::vector<InputFile>& inputs, const std::vector<std::filesystem::path>& outputs,
                               const std::filesystem::path& checkpoint, const std::filesystem::path& snapshots);

// Creates `dir` and its parents; throws std::runtime_error naming it when that fails.
void make_output_directory(const std::filesystem::path& dir);

double seconds_since(std::chrono::steady_clock::time_point t0);

// JSON null for NaN and infinities (JSON has no such numbers).
nlohmann::ordered_json finite_or_null(double v);

}  // namespace tinyfuse::cli
