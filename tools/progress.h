// Progress of a long simulation on a terminal (docs/cli.md#progress): after a delay (2 s,
// or $TILEPIPE_PROGRESS_DELAY seconds) a one-line bar on stderr with the cycles simulated,
// the per cent of an estimate and the time left; a functional run that will take minutes
// says so once, with the time, and suggests `--mode timing`. Nothing at all when stderr is
// not a terminal, so logs, pipes and `--json` output never see it.
#pragma once

#include <chrono>
#include <string>

namespace tilepipe::cli {

class Progress {
 public:
  /// `estimate_cycles` <= 0: unknown (the bar shows cycles and rate only). `functional`:
  /// warn when the run will take minutes.
  Progress(double estimate_cycles, bool functional);
  ~Progress();  // clears the bar
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// True when stderr is a terminal: the only case where a Progress is worth making.
  static bool wanted();
  /// The simulator's callback (sim::SimOptions::progress): cycles simulated so far.
  void update(double cycles);

 private:
  using Clock = std::chrono::steady_clock;
  double estimate_;
  bool functional_;
  double delay_s_;
  Clock::time_point start_, sim_start_, last_draw_;
  bool sim_started_ = false, drawn_ = false, warned_ = false;
};

/// "1.2 M", "340 k": a count for humans.
std::string human_count(double v);
/// "0:07", "12:30", "1:02:03": a duration for humans.
std::string human_duration(double seconds);

}  // namespace tilepipe::cli
