// The HTML report in a real browser: headless Chromium (Debian `chromium`, installed by
// scripts/setup.sh) loads a report written by `tilepipe profile --html`, and the test fails
// on a console error (CSP violation, script error) or a chart that renders no marks.
// Without chromium the test fails in CI (CI=true) and is skipped elsewhere, saying so.
#include <gtest/gtest.h>

#include <regex>

#include "cli_util.h"

namespace tilepipe {
namespace {

using namespace clitest;

/// Runs chromium headless on `page` with `extra` flags; returns its stdout and stderr.
CliResult chromium(const fs::path& page, const std::string& extra) {
  static int n = 0;
  const fs::path profile = scratch().file("chromium_profile_" + std::to_string(n++));
  fs::create_directories(profile);
  return run_captured(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir='" +
      profile.string() + "' " + extra + " 'file://" + page.string() + "'");
}

bool have_chromium() {
  return std::system("command -v chromium >/dev/null 2>&1") == 0;
}

/// The report with a probe: the page's policy also allows inline scripts, an error handler
/// comes first, and a script at the end writes what it measured into the DOM.
std::string with_probe(std::string html) {
  const std::string csp = "default-src 'none';";
  size_t at = html.find(csp);
  EXPECT_NE(at, std::string::npos) << "the report's Content-Security-Policy changed";
  if (at != std::string::npos)
    html.replace(at, csp.size(), "default-src 'none'; script-src 'unsafe-inline';");
  html.replace(html.find("<head>"), 6,
               "<head><script>window.__errs=[];window.addEventListener('error',"
               "function(e){window.__errs.push(String(e.message));});</script>");
  html.replace(html.rfind("</body>"), 7,
               R"(<script>
var charts = document.querySelectorAll('svg[role=img]'), empty = [];
charts.forEach(function (svg, i) {
  var marks = 0;
  svg.querySelectorAll('rect,path,polyline,polygon,circle,line').forEach(function (m) {
    var b = m.getBoundingClientRect();
    if (b.width > 0 || b.height > 0) ++marks;
  });
  var box = svg.getBoundingClientRect();
  if (!(marks > 0 && box.width > 0 && box.height > 0)) empty.push(i);
});
var p = document.createElement('pre');
p.textContent = 'PROBE charts=' + charts.length + ' empty=[' + empty.join(',') + '] errors=[' +
                window.__errs.join('|') + '] END';
document.body.appendChild(p);
</script></body>)");
  return html;
}

TEST(HtmlReportInBrowser, LoadsWithoutErrorsAndEveryChartDrawsMarks) {
  if (!have_chromium()) {
    if (std::getenv("CI")) FAIL() << "chromium is missing: scripts/setup.sh installs it";
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it); skipped";
  }
  const fs::path report = scratch().file("browser_report.html");
  CliResult run =
      cli("profile fa --variant expert --param S=512 --param H=2 --html '" + report.string() + "'");
  ASSERT_EQ(run.code, 0) << run.err;

  // The report as written: no console message (a CSP violation, a script error, a failed
  // load) while it renders.
  CliResult plain = chromium(report, "--enable-logging=stderr --v=0 --dump-dom");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_NE(plain.out.find("<svg"), std::string::npos) << "no chart in the rendered DOM";
  // (Chromium logs every console message as ":INFO:CONSOLE:<line>] \"...\"": the report has
  // no scripts, so any message at all means something went wrong.)
  std::regex console_error(R"(:CONSOLE[:(]\d+\)?\] [^\n]*|Uncaught [^\n]*)");
  std::smatch m;
  EXPECT_FALSE(std::regex_search(plain.err, m, console_error)) << "browser console: " << m.str(0);

  // Every chart draws at least one visible mark, measured by the browser's layout.
  const fs::path probed = scratch().file("browser_report_probe.html");
  std::ofstream(probed) << with_probe(read_text(report));
  CliResult probe = chromium(probed, "--dump-dom");
  ASSERT_EQ(probe.code, 0) << probe.err;
  std::smatch r;
  ASSERT_TRUE(std::regex_search(
      probe.out, r, std::regex(R"(PROBE charts=(\d+) empty=\[([^\]]*)\] errors=\[(.*)\] END)")))
      << "the probe did not run:\n"
      << probe.err;
  EXPECT_GE(std::stoi(r[1]), 3) << "charts in the report";
  EXPECT_EQ(r[2].str(), "") << "charts without a visible mark (by index)";
  EXPECT_EQ(r[3].str(), "") << "script errors";
}

}  // namespace
}  // namespace tilepipe
