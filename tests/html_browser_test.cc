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

/// The tune report with a probe that measures the heat map as laid out: every text's box
/// (axis names, row and column values, cell labels) against every other's, and each cell's
/// label inside its cell.
std::string with_heat_map_probe(std::string html) {
  html = with_probe(std::move(html));
  html.replace(html.rfind("</body>"), 7, R"(<script>
var svg = document.getElementById('heat-map'), texts = svg.querySelectorAll('text'), overlaps = [];
var boxes = Array.prototype.map.call(texts, function (t) { return t.getBoundingClientRect(); });
for (var i = 0; i < boxes.length; ++i)
  for (var j = i + 1; j < boxes.length; ++j) {
    var a = boxes[i], b = boxes[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 &&
        b.top < a.bottom - 0.5)
      overlaps.push(texts[i].textContent + '/' + texts[j].textContent);
  }
var cells = svg.querySelectorAll('rect.cell'), outside = [];
cells.forEach(function (r) {
  var t = r.nextElementSibling.getBoundingClientRect(), c = r.getBoundingClientRect();
  if (t.left < c.left || t.right > c.right) outside.push(r.nextElementSibling.textContent);
});
var head = document.getElementById('report-header'), fields = [];
['kernel', 'variant', 'params', 'chip'].forEach(function (k) {
  var td = head.querySelector('td[data-key=' + k + ']');
  fields.push(k + '=' + (td ? td.textContent : 'MISSING'));
});
var p = document.createElement('pre');
p.textContent = 'HEAT cells=' + cells.length + ' overlaps=[' + overlaps.join('|') + '] outside=[' +
                outside.join('|') + '] rejected=' +
                document.querySelectorAll('#rejected tr').length + ' header=[' +
                fields.join(';') + '] END';
document.body.appendChild(p);
</script></body>)");
  return html;
}

TEST(HtmlReportInBrowser, TuneHeatMapIsReadableAndTheHeaderSaysWhatWasTuned) {
  // A screenshot (the picture a reader sees) and the layout measured in the DOM: no two
  // texts of the heat map overlap, every label fits its cell, the rejected configs are
  // listed, and the header names kernel, variant, parameters and chip.
  if (!have_chromium()) {
    if (std::getenv("CI")) FAIL() << "chromium is missing: scripts/setup.sh installs it";
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it); skipped";
  }
  const fs::path report = scratch().file("browser_tune.html");
  CliResult run =
      cli("tune elementwise --variant add --space tile=2048,4096,8192,16384 --space "
          "buffers=1,2,3 --no-cache -j 1 --html '" +
          report.string() + "'");
  ASSERT_EQ(run.code, 0) << run.err;
  const fs::path shot = scratch().file("browser_tune.png");
  CliResult pic = chromium(report, "--window-size=1200,900 --screenshot='" + shot.string() + "'");
  ASSERT_EQ(pic.code, 0) << pic.err;
  EXPECT_GT(fs::file_size(shot), 1000u) << "no screenshot";

  const fs::path probed = scratch().file("browser_tune_probe.html");
  std::ofstream(probed) << with_heat_map_probe(read_text(report));
  CliResult probe = chromium(probed, "--dump-dom");
  ASSERT_EQ(probe.code, 0) << probe.err;
  std::smatch r;
  ASSERT_TRUE(std::regex_search(
      probe.out, r,
      std::regex(
          R"(HEAT cells=(\d+) overlaps=\[([^\]]*)\] outside=\[([^\]]*)\] rejected=(\d+) header=\[([^\]]*)\] END)")))
      << "the probe did not run:\n"
      << probe.err;
  EXPECT_EQ(std::stoi(r[1]), 12) << "a cell per config of the 4 x 3 space";
  EXPECT_EQ(r[2].str(), "") << "overlapping texts";
  EXPECT_EQ(r[3].str(), "") << "labels wider than their cell";
  // tile x buffers over 32720 elements (the UB): 16384 x 2 and 16384 x 3.
  EXPECT_EQ(std::stoi(r[4]), 1 + 2) << "the rejected table: a header row and a row each";
  EXPECT_EQ(r[5].str(),
            "kernel=elementwise;variant=add;params=N=1048576 block_num=24 buffers=2 tile=4096;"
            "chip=a3");
}

}  // namespace
}  // namespace tilepipe
