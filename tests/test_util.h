// Shared test helpers: build-and-expect-diagnostic, golden IR comparison, kernel runs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/lang.h"
#include "tilepipe/verify.h"

namespace tilepipe::testing {

inline const ChipConfig& a3() {
  static const ChipConfig c = load_chip_config("a3");
  return c;
}

/// Runs `fn` (which builds and checks a program) and expects a UserError whose text
/// contains every fragment (e.g. the message and "file.cc:LINE").
inline void expect_user_error(const std::function<void()>& fn,
                              const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected a UserError, but the program was accepted";
  } catch (const UserError& e) {
    std::string text = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(text.find(f), std::string::npos) << "missing '" << f << "' in:\n" << text;
  }
}

/// Verifies a program and expects a diagnostic of `kind` whose text has each fragment.
inline void expect_diag(const ir::Program& p, const std::string& kind,
                        const std::vector<std::string>& fragments) {
  auto diags = verify(p, a3());
  const Diagnostic* hit = nullptr;
  for (const auto& d : diags)
    if (d.kind == kind) hit = &d;
  ASSERT_NE(hit, nullptr) << "no '" << kind << "' diagnostic; got " << diags.size()
                          << (diags.empty() ? "" : ": " + diags.front().str());
  std::string text = hit->str();
  for (const auto& f : fragments)
    EXPECT_NE(text.find(f), std::string::npos) << "missing '" << f << "' in:\n" << text;
}

/// "file.cc:N" of the line that calls this, for matching diagnostic locations.
inline std::string here(int line_offset = 0,
                        std::source_location l = std::source_location::current()) {
  return ir::Loc::from(l).file + ":" + std::to_string(static_cast<int>(l.line()) + line_offset);
}

}  // namespace tilepipe::testing
