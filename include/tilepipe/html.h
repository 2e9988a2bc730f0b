// The HTML report: one self-contained file (inline SVG and CSS, the data embedded as JSON,
// a content-security-policy that forbids every external load), readable without
// JavaScript. Built from the JSON documents of `profile`, `ladder` and `tune`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tilepipe::prof {

/// `doc`: {"title", and any of "profile" (profile JSON + "timeline"), "ladder" (ladder
/// JSON + "profiles": per-step profile JSON), "tune" (tune JSON), "diff" (diff_reports'
/// JSON: a side-by-side page)}. Wall-clock fields
/// (*wall_s) are left out, so the same inputs give the same bytes.
std::string html_report(const nlohmann::ordered_json& doc);

}  // namespace tilepipe::prof
