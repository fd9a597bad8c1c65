#include "progress.h"

#include <algorithm>
#include <cmath>

#include <unistd.h>

namespace tinyfuse::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  char buf[32];
  if (seconds < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", seconds);
  } else if (seconds < 3600) {
    const long s = std::lround(seconds);
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  } else {
    const long m = std::lround(seconds / 60);
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", m / 60, m % 60);
  }
  return buf;
}

std::string format_rate(double per_second) {
  char buf[32];
  if (!std::isfinite(per_second)) return "?";
  if (per_second >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2fG", per_second / 1e9);
  else if (per_second >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.2fM", per_second / 1e6);
  else if (per_second >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.1fk", per_second / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", per_second);
  return buf;
}

Progress::Mode Progress::choose_mode(bool quiet) {
  if (quiet) return Mode::Off;
  return ::isatty(::fileno(stderr)) ? Mode::Bar : Mode::Lines;
}

Progress::Progress(uint64_t total_steps, uint64_t batch_size, Mode mode, std::FILE* stream)
    : total_(total_steps), batch_(batch_size), mode_(mode), stream_(stream) {}

std::string Progress::status_line(uint64_t steps_done, float loss, double train_seconds) const {
  const double rate = train_seconds > 0 ? static_cast<double>(steps_done) * batch_ / train_seconds : 0.0;
  const double eta = steps_done > 0 ? train_seconds / steps_done * static_cast<double>(total_ - steps_done) : NAN;
  const int digits = static_cast<int>(std::to_string(total_).size());
  char buf[160];
  std::snprintf(buf, sizeof(buf), "step %*llu/%llu  loss %.4e  %s samples/s  elapsed %s  ETA %s", digits,
                static_cast<unsigned long long>(steps_done), static_cast<unsigned long long>(total_), loss,
                format_rate(rate).c_str(), format_duration(train_seconds).c_str(), format_duration(eta).c_str());
  return buf;
}

void Progress::update(uint64_t steps_done, float loss, double train_seconds) {
  if (mode_ == Mode::Off) return;
  const bool last = steps_done >= total_;
  if (mode_ == Mode::Lines) {
    if (steps_done < next_line_step_ && !last) return;
    std::fprintf(stream_, "%s\n", status_line(steps_done, loss, train_seconds).c_str());
    std::fflush(stream_);
    next_line_step_ = steps_done + std::max<uint64_t>(1, total_ / 10);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;

  constexpr int kBarWidth = 24;
  const double fraction = total_ ? static_cast<double>(steps_done) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string line = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "] " +
                     status_line(steps_done, loss, train_seconds);
  const size_t width = line.size();
  if (width < last_width_) line += std::string(last_width_ - width, ' ');  // wipe a longer previous line
  last_width_ = width;
  std::fprintf(stream_, "\r%s", line.c_str());
  std::fflush(stream_);
}

void Progress::finish() {
  if (mode_ == Mode::Bar && drawn_) {
    std::fputc('\n', stream_);
    std::fflush(stream_);
    drawn_ = false;
  }
}

}  // namespace tinyfuse::cli
