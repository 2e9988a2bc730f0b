#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tilepipe::cli {

std::string human_count(double v) {
  if (v >= 1e9) return fmt::format("{:.1f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.1f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.0f} k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string human_duration(double seconds) {
  auto s = static_cast<int64_t>(std::max(0.0, std::round(seconds)));
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

bool Progress::on_terminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

namespace {

/// Seconds from environment variable `name`, or `def` when unset or not a number >= 0.
double seconds_from_env(const char* name, double def) {
  const char* d = std::getenv(name);
  if (!d) return def;
  char* end = nullptr;
  double v = std::strtod(d, &end);
  return end == d || !(v >= 0) ? def : v;
}

}  // namespace

Progress::Progress(double estimate_cycles, bool functional)
    : estimate_(estimate_cycles),
      functional_(functional),
      tty_(on_terminal()),
      delay_s_(seconds_from_env("TILEPIPE_PROGRESS_DELAY", tty_ ? 2.0 : kLogInterval)),
      interval_s_(tty_ ? 0.2 : seconds_from_env("TILEPIPE_PROGRESS_INTERVAL", kLogInterval)),
      start_(Clock::now()) {}

Progress::~Progress() {
  if (drawn_) std::fputs("\r\033[K", stderr);
}

void Progress::update(double cycles) {
  auto now = Clock::now();
  if (!sim_started_) {  // the rate counts simulation only, not building and input generation
    sim_started_ = true;
    sim_start_ = now;
  }
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < delay_s_ ||
      (shown_ && std::chrono::duration<double>(now - last_draw_).count() < interval_s_))
    return;
  last_draw_ = now;
  const double sim_s = std::chrono::duration<double>(now - sim_start_).count();
  const double rate = cycles / std::max(sim_s, 1e-9);  // cycles per wall second
  const bool known = estimate_ > 0 && cycles > 0 && cycles < estimate_;
  const double left_s = known ? (estimate_ - cycles) / rate : 0;
  if (functional_ && known && !warned_ && elapsed + left_s > 60) {
    warned_ = true;
    std::fputs(
        fmt::format("\r\033[Ktilepipe: this functional run needs about {} more ({} of ~{} "
                    "cycles in {:.0f} s); `--mode timing` gives the same cycles without "
                    "computing values, usually in seconds\n",
                    human_duration(left_s), human_count(cycles), human_count(estimate_), sim_s)
            .c_str(),
        stderr);
  }
  std::string line;
  if (estimate_ > 0) {
    double frac = std::min(cycles / estimate_, 1.0);
    constexpr int kWidth = 24;
    int full = static_cast<int>(frac * kWidth);
    line =
        fmt::format("[{}{}] {:3.0f}%  {} / ~{} cycles", std::string(static_cast<size_t>(full), '#'),
                    std::string(static_cast<size_t>(kWidth - full), '.'),
                    std::min(frac * 100, 99.0), human_count(cycles), human_count(estimate_));
    line += known                 ? fmt::format("  ETA {}", human_duration(left_s))
            : cycles >= estimate_ ? std::string("  (past the estimate)")
                                  : std::string();
  } else {
    line = fmt::format("{} cycles", human_count(cycles));
  }
  line += fmt::format("  {} elapsed", human_duration(elapsed));
  if (tty_) {
    std::fputs(("\r\033[Ksimulating " + line).c_str(), stderr);
    drawn_ = true;
  } else {
    // One whole line each time: a log keeps every report, and nothing needs clearing.
    std::fputs(fmt::format("tilepipe: simulating {}, {}/s\n", line,
                           human_count(cycles / std::max(sim_s, 1e-9)))
                   .c_str(),
               stderr);
  }
  shown_ = true;
  std::fflush(stderr);
}

}  // namespace tilepipe::cli
