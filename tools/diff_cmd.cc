// `tilepipe diff`: two reports compared (docs/cli.md#tilepipe-diff), from two report files
// or from two runs of one kernel made here.
#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "advise_cmds.h"
#include "cli.h"
#include "outputs.h"
#include "tilepipe/advisor.h"
#include "tilepipe/diff.h"
#include "tilepipe/html.h"

namespace tilepipe::cli {
namespace {

using json = nlohmann::ordered_json;

bool is_report_file(const std::string& s) {
  return s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0;
}

json load_report(const std::string& path, const char* which) {
  const std::string fix =
      "give two reports written by `tilepipe run ... --json` or `tilepipe profile ... --json`, "
      "or one kernel and two --variant / --param-b";
  if (!std::filesystem::is_regular_file(path))
    throw driver::ParamError{
        fmt::format("diff: report {} '{}' {}; {}", which, path,
                    std::filesystem::exists(path) ? "is not a file" : "does not exist", fix)};
  std::ifstream in(path);
  if (!in)
    throw driver::ParamError{
        fmt::format("diff: cannot read report {} '{}': {}", which, path, std::strerror(errno))};
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded())
    throw driver::ParamError{fmt::format("diff: report {} '{}' is not JSON; {}", which, path, fix)};
  if (std::string why = prof::report_problem(j); !why.empty())
    throw driver::ParamError{fmt::format(
        "diff: report {} '{}' is not a run or profile report: {}; {}", which, path, why, fix)};
  return j;
}

/// Two runs of one kernel: A with the first --variant and --param, B with the second
/// --variant (else A's) and --param with --param-b on top. Profiled without the what-ifs.
std::pair<json, json> run_both(const DiffArgs& a) {
  driver::KernelSource k = driver::find_kernel(a.inputs[0]);
  k.profile_variants = false;  // each side is one run
  if (a.variants.size() > 2)
    throw driver::ParamError{fmt::format(
        "diff: {} --variant given; expected at most two, A's and B's (e.g. --variant expert "
        "--variant auto)",
        a.variants.size())};
  std::array<driver::RunRequest, 2> req;
  driver::RawParams raw_b = a.params;
  for (const auto& [n, v] : a.params_b) raw_b[n] = v;
  for (int i = 0; i < 2; ++i) {
    auto& r = req[static_cast<size_t>(i)];
    r.variant = a.variants.empty() ? "" : a.variants[std::min<size_t>(i, a.variants.size() - 1)];
    r.variant = driver::resolve_variant(k, r.variant);
    r.params = driver::resolve_params(k, i == 0 ? a.params : raw_b);
    r.mode = sim::Mode::Timing;
  }
  check_outputs({{"--html", a.html}}, a.chip);
  const ChipConfig chip = load_chip_config(a.chip);
  const prof::RuleSet rules = prof::load_rules();
  std::array<json, 2> out;
  driver::for_each_parallel(2, 2, [&](size_t i) {
    auto rep = driver::profile_kernel(k, req[i], chip, rules, /*verify=*/false);
    out[i] = driver::profile_json(k, rep, req[i], chip);
  });
  return {out[0], out[1]};
}

}  // namespace

int cmd_diff(const DiffArgs& a) {
  json ra, rb;
  if (a.inputs.size() == 2) {
    if (!is_report_file(a.inputs[0]) || !is_report_file(a.inputs[1]))
      throw driver::ParamError{
          fmt::format("diff: '{}' '{}': expected two report files (.json), or one kernel with two "
                      "--variant / --param-b (tilepipe diff fa --variant expert --variant auto)",
                      a.inputs[0], a.inputs[1])};
    if (!a.variants.empty() || !a.params.empty() || !a.params_b.empty())
      throw driver::ParamError{
          "diff: --variant, --param and --param-b choose the runs of a kernel; two report "
          "files were given, which say what ran"};
    try {
      prof::check_outputs({{"--html", a.html}},
                          {{"report A", a.inputs[0]}, {"report B", a.inputs[1]}});
    } catch (const std::runtime_error& e) {
      throw driver::ParamError{e.what()};
    }
    ra = load_report(a.inputs[0], "A");
    rb = load_report(a.inputs[1], "B");
  } else if (a.inputs.size() == 1) {
    if (is_report_file(a.inputs[0]))
      throw driver::ParamError{fmt::format(
          "diff: one report '{}' given; give a second report to compare it with", a.inputs[0])};
    std::tie(ra, rb) = run_both(a);
  } else {
    throw driver::ParamError{fmt::format(
        "diff: {} inputs given; expected two report files or one kernel", a.inputs.size())};
  }
  json d = prof::diff_reports(ra, rb);
  if (!a.html.empty()) {
    json doc = {{"title", "diff: " + ra["kernel"].get<std::string>() + " A vs B"}, {"diff", d}};
    try {
      prof::write_file_atomic(a.html, prof::html_report(doc));
    } catch (const std::runtime_error& e) {
      throw driver::ParamError{e.what()};
    }
    d["html"] = a.html;
  }
  print_result(a.json, d, prof::diff_text(d));
  return 0;
}

}  // namespace tilepipe::cli
