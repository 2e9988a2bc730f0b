// Two run / profile reports compared (`tilepipe diff`, docs/cli.md#tilepipe-diff): per-pipe
// busy, wait and instruction-count changes, per-source-line cycle changes, the bound before
// and after, and a paragraph saying what changed. Works on the reports' JSON only, so a
// report written yesterday diffs against a run made now.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tilepipe::prof {

/// Why `report` is not a report written by `run --json` / `profile --json` ("" when it is):
/// an error report, or the first field a diff needs that it lacks.
std::string report_problem(const nlohmann::ordered_json& report);

/// A and B compared. Every number that can change sits under a key containing "delta"
/// (B - A); A's and B's own values beside it. A report diffed with itself has every delta 0
/// and "no_change": true. Per-line deltas are over the lines of both reports (a line of
/// one only counts 0 in the other): with the launch's delta they add up to the cycles'.
nlohmann::ordered_json diff_reports(const nlohmann::ordered_json& a,
                                    const nlohmann::ordered_json& b);

/// The diff as text: what ran, what changed (one paragraph), the pipes, the lines that
/// changed most (`max_lines`).
std::string diff_text(const nlohmann::ordered_json& diff, size_t max_lines = 20);

}  // namespace tilepipe::prof
