// Training progress on stderr: a bar redrawn in place on a terminal, plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tinyfuse::cli {

class Progress {
 public:
  enum class Mode {
    Off,    // nothing (--quiet)
    Bar,    // one line redrawn with '\r', at most ~10 times per second
    Lines,  // a line at every tenth of the run (stderr is a file or pipe)
  };
  // Bar when stderr is a terminal, Lines when it is not, Off when quiet.
  static Mode choose_mode(bool quiet);

  Progress(uint64_t total_steps, uint64_t batch_size, Mode mode, std::FILE* stream = stderr);

  // After `steps_done` steps, the last with loss `loss`; `train_seconds` is the time spent
  // training so far (samples/s and the ETA are computed from it).
  void update(uint64_t steps_done, float loss, double train_seconds);
  // Ends the bar's line so later output starts on a fresh one.
  void finish();

 private:
  std::string status_line(uint64_t steps_done, float loss, double train_seconds) const;

  uint64_t total_, batch_;
  Mode mode_;
  std::FILE* stream_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
  uint64_t next_line_step_ = 0;
  size_t last_width_ = 0;
};

// "1m23s", "4.2s".
std::string format_duration(double seconds);
// "1.23M", "456k".
std::string format_rate(double per_second);

}  // namespace tinyfuse::cli
