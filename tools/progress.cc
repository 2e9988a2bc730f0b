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

bool Progress::wanted() {
  return ::isatty(STDERR_FILENO) == 1;
}

Progress::Progress(double estimate_cycles, bool functional)
    : estimate_(estimate_cycles), functional_(functional), start_(Clock::now()) {
  const char* d = std::getenv("TILEPIPE_PROGRESS_DELAY");
  char* end = nullptr;
  delay_s_ = d ? std::strtod(d, &end) : 2.0;
  if (d && (end == d || !(delay_s_ >= 0))) delay_s_ = 2.0;
}

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
  if (elapsed < delay_s_ || (drawn_ && now - last_draw_ < std::chrono::milliseconds(200))) return;
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
  std::fputs(("\r\033[Ksimulating " + line).c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace tilepipe::cli
