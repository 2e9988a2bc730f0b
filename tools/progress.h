// Progress of a long simulation (docs/cli.md#progress). On a terminal: after a delay (2 s,
// or $TILEPIPE_PROGRESS_DELAY seconds) a one-line bar on stderr with the cycles simulated,
// the per cent of an estimate and the time left; a functional run that will take minutes
// says so once, with the time, and suggests `--mode timing`. When stderr is not a terminal
// (a CI log, a pipe): a plain line every 5 s ($TILEPIPE_PROGRESS_INTERVAL) once the run
// has taken that long, so a long run is seen to be alive; stdout is never touched.
#pragma once

#include <chrono>
#include <string>

namespace tilepipe::cli {

class Progress {
 public:
  /// Seconds between two plain lines when stderr is not a terminal (and before the first).
  static constexpr double kLogInterval = 5.0;
  /// `estimate_cycles` <= 0: unknown (the bar shows cycles and rate only). `functional`:
  /// warn when the run will take minutes.
  Progress(double estimate_cycles, bool functional);
  ~Progress();  // clears the bar
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// True when stderr is a terminal: a bar against an estimate (worth its cost).
  static bool on_terminal();
  /// The simulator's callback (sim::SimOptions::progress): cycles simulated so far.
  void update(double cycles);

 private:
  using Clock = std::chrono::steady_clock;
  double estimate_;
  bool functional_;
  bool tty_;
  double delay_s_, interval_s_;
  Clock::time_point start_, sim_start_, last_draw_;
  bool sim_started_ = false, shown_ = false, drawn_ = false, warned_ = false;
};

/// "1.2 M", "340 k": a count for humans.
std::string human_count(double v);
/// "0:07", "12:30", "1:02:03": a duration for humans.
std::string human_duration(double seconds);

}  // namespace tilepipe::cli
