// Every report says what it is of, the same way in its three forms: `profile`, `tune` and
// `ladder` name kernel, variant, parameters and chip on the console, in the JSON and in the
// HTML header, and they agree. `tune` lists every rejected config with its reason; a long
// search shows it is alive also when stderr is not a terminal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace tilepipe {
namespace {

using namespace clitest;
using json = nlohmann::json;

/// The HTML header's cell `key` (`<td data-key="KEY">VALUE</td>`).
std::string header_cell(const std::string& html, const std::string& key) {
  const std::string open = "<td data-key=\"" + key + "\">";
  auto at = html.find(open);
  if (at == std::string::npos) return "MISSING " + key;
  at += open.size();
  return html.substr(at, html.find("</td>", at) - at);
}

TEST(ReportHeaders, ProfileConsoleJsonAndHtmlNameTheSameRun) {
  const fs::path page = scratch().file("headers_profile.html");
  const std::string args =
      "profile elementwise --variant mul --param N=65536 --param tile=2048 --no-verify --html '" +
      page.string() + "'";
  CliResult text = cli(args);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(
      text.out.rfind("elementwise [mul] (N=65536 block_num=24 buffers=2 tile=2048) on a3: ", 0), 0u)
      << text.out;
  CliResult js = cli(args + " --json");
  ASSERT_EQ(js.code, 0) << js.err;
  json j = json::parse(js.out);
  EXPECT_EQ(j["kernel"], "elementwise");
  EXPECT_EQ(j["variant"], "mul");
  EXPECT_EQ(j["chip"], "a3");
  EXPECT_EQ(j["params"]["N"], 65536);
  const std::string html = read_text(page);
  EXPECT_EQ(header_cell(html, "kernel"), "elementwise");
  EXPECT_EQ(header_cell(html, "variant"), "mul");
  EXPECT_EQ(header_cell(html, "params"), "N=65536 block_num=24 buffers=2 tile=2048");
  EXPECT_EQ(header_cell(html, "chip"), "a3");
}

TEST(ReportHeaders, LadderStatesItsShapeEverywhere) {
  const fs::path page = scratch().file("headers_ladder.html");
  CliResult r = cli("ladder sfa --param KV_S=2560 --html '" + page.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(first.find("sfa ladder ("), std::string::npos) << first;
  EXPECT_NE(first.find("KV_S=2560"), std::string::npos) << first;
  EXPECT_NE(first.find(") on a3"), std::string::npos) << first;
  const std::string html = read_text(page);
  EXPECT_NE(header_cell(html, "params").find("KV_S=2560"), std::string::npos);
  EXPECT_EQ(header_cell(html, "kernel"), "sfa");
  EXPECT_EQ(header_cell(html, "variant").rfind("every step: ", 0), 0u);
  EXPECT_NE(html.find("<title>sfa optimisation ladder ("), std::string::npos);
}

TEST(ReportHeaders, TuneListsEveryRejectedConfigWithItsReason) {
  const std::string args =
      "tune elementwise --variant add --param N=65536 --space tile=2048,16384 --space "
      "buffers=1,2,3 --no-cache -j 1";
  CliResult js = cli(args + " --json");
  ASSERT_EQ(js.code, 0) << js.err;
  json j = json::parse(js.out);
  ASSERT_EQ(j["rejected_count"], 2);
  ASSERT_EQ(j["rejected"].size(), 2u);
  for (const auto& x : j["rejected"]) {
    EXPECT_EQ(x["params"]["tile"], 16384);
    const std::string reason = x["reason"];
    EXPECT_NE(reason.find("must be <= 32720"), std::string::npos) << reason;
    EXPECT_EQ(reason.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_EQ(j["rejected"][0]["params"]["buffers"], 2);
  EXPECT_EQ(j["rejected"][1]["params"]["buffers"], 3);
  CliResult text = cli(args);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("tune of elementwise [add] (N=65536 block_num=24 buffers=2 tile=4096) "
                           "on a3 (grid, 6 configs)",
                           0),
            0u)
      << text.out;
  EXPECT_NE(
      text.out.find("  rejected {\"N\":65536,\"block_num\":24,\"buffers\":3,\"tile\":16384}: "),
      std::string::npos)
      << text.out;
}

}  // namespace
}  // namespace tilepipe
