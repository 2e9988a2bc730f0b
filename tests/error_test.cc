// The one error hierarchy (include/tilepipe/error.h) and its one mapping to exit codes and
// messages (describe_error), which the command line and the Python module both use; and the
// pass options set by name through the passes layer's one table.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "tilepipe/chip.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

template <class E>
ErrorReport report_of(const E& e) {
  return describe_error(std::make_exception_ptr(e));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

UserError run_error(const std::string& kind) {
  Diagnostic d;
  d.loc.file = "k.py";
  d.loc.line = 7;
  d.kind = kind;
  d.message = "what happened";
  return UserError(d);
}

TEST(Errors, InputErrorsAreBadInputNamedByTheTool) {
  for (const ErrorReport& r :
       {report_of(driver::ParamError("--param M=7: expected a multiple of 16")),
        report_of(ConfigError("configs/x.json: key 'die.ai_cores': expected ..."))}) {
    EXPECT_EQ(r.kind, ErrorKind::User);
    EXPECT_EQ(r.exit_code, kExitBadInput);
    EXPECT_EQ(r.message.rfind("tilepipe: ", 0), 0u) << r.message;
  }
}

TEST(Errors, ABuilderErrorIsLocated) {
  ErrorReport r = report_of(lang::BuildError(ir::Loc{"k.cc", 12, 5}, "slice needs 2 indices"));
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_EQ(r.message, "k.cc:12:5: error: slice needs 2 indices");
}

TEST(Errors, AProgramErrorIsItsDiagnostics) {
  UserError e = run_error("capacity");
  ErrorReport r = report_of(e);
  EXPECT_EQ(r.kind, ErrorKind::User);
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_EQ(r.message, e.what());
  EXPECT_TRUE(has(r.message, "k.py:7:0: error: what happened")) << r.message;
}

TEST(Errors, ARunsErrorIsClassifiedByItsDiagnostics) {
  // Found while running: each check kind is a finding (exit 3), a budget or an interrupt
  // is not (exit 2), and the same kinds from the verifier stay user errors.
  for (auto kind : kCheckKinds) {
    driver::SimFailure f(run_error(std::string(kind)));
    EXPECT_EQ(f.kind(), ErrorKind::CheckFinding) << kind;
    EXPECT_EQ(report_of(f).exit_code, kExitCheckFailed) << kind;
    EXPECT_EQ(run_error(std::string(kind)).kind(), ErrorKind::User) << kind;
  }
  for (auto kind : kBudgetKinds) {
    driver::SimFailure f(run_error(std::string(kind)));
    EXPECT_EQ(f.kind(), ErrorKind::Budget) << kind;
    EXPECT_EQ(report_of(f).exit_code, kExitBadInput) << kind;
  }
  driver::SimFailure stopped(run_error(std::string(kInterruptedKind)));
  EXPECT_EQ(stopped.kind(), ErrorKind::Interrupted);
  EXPECT_EQ(report_of(stopped).exit_code, kExitBadInput);
  EXPECT_EQ(driver::SimFailure(run_error("host-data")).kind(), ErrorKind::User);
}

TEST(Errors, ForeignExceptionsAreInternalAndAskForAReport) {
  for (const ErrorReport& r : {report_of(std::logic_error("map::at")),
                               report_of(sim::InvariantError("queue went negative")),
                               report_of(std::out_of_range("vector"))}) {
    EXPECT_EQ(r.kind, ErrorKind::Internal);
    EXPECT_EQ(r.exit_code, kExitInternal);
    EXPECT_EQ(r.message.rfind("tilepipe: internal error: ", 0), 0u) << r.message;
    EXPECT_TRUE(has(r.message, "please report it")) << r.message;
  }
  ErrorReport odd = describe_error(std::make_exception_ptr(42));
  EXPECT_EQ(odd.exit_code, kExitInternal);
  EXPECT_TRUE(has(odd.message, "please report it")) << odd.message;
  EXPECT_EQ(describe_error(nullptr).exit_code, kExitInternal);
}

TEST(Errors, OutOfMemoryIsNotABug) {
  ErrorReport r = report_of(std::bad_alloc());
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_TRUE(has(r.message, "out of memory")) << r.message;
}

TEST(PassOptionTable, EveryOptionIsSetByName) {
  for (const auto& info : passes::option_table()) {
    passes::PassOptions o;
    if (info.flag) {
      const bool before = o.*info.flag;
      passes::set_option(o, info.name, before ? 0 : 1);
      EXPECT_NE(o.*info.flag, before) << info.name;
    } else {
      ASSERT_NE(info.number, nullptr) << info.name;
      passes::set_option(o, info.name, 3);
      EXPECT_EQ(o.*info.number, 3) << info.name;
    }
  }
}

TEST(PassOptionTable, EveryPassSwitchIsAnOption) {
  // --pass / --no-pass name passes; each pass's switch is an option of the table.
  for (const auto& pass : passes::pass_table()) {
    bool found = false;
    for (const auto& info : passes::option_table()) found = found || info.flag == pass.flag;
    EXPECT_TRUE(found) << pass.name;
  }
}

TEST(PassOptionTable, UnknownNamesAndNonSwitchValuesAreUserErrors) {
  passes::PassOptions o;
  try {
    passes::set_option(o, "auto_snyc", 1);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.diagnostics().at(0).kind, "pass-option");
    EXPECT_TRUE(has(e.diagnostics()[0].hint, "auto_sync")) << e.diagnostics()[0].hint;
  }
  EXPECT_THROW(passes::set_option(o, "auto_sync", 2), UserError);
}

}  // namespace
}  // namespace tilepipe
