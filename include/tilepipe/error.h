// The one error hierarchy of tilepipe (docs/errors.md, docs/architecture.md "Errors"). Every
// layer throws an Error; the command line turns one into its exit code and message in one
// place (describe_error), the Python module into one Python exception (python/ext/errors.cc).
// The base of the lowest layer (ir): nothing here depends on a program, a chip or a run.
//
//   Error                     kind() says which of:
//   +- UserError (verify.h)   a program's diagnostics, each with location, message, notes, fix
//   |  +- SimFailure          ... found while simulating (driver.h): a check finding, a
//   |                         budget, an interrupt or another run-time error
//   +- InputError             a bad input outside a program: flag, parameter, chip config,
//   |  +- ParamError          builder call (BuildError, located), host data
//   |  +- ConfigError, BuildError, cli::UsageError, cli::ArgError
//   +- InternalError          a bug in tilepipe (InvariantError: a broken simulator invariant)
#pragma once

#include <array>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tilepipe {

/// Source location of the DSL call that created a node, or of an error.
struct Loc {
  std::string file;  // base name only: diagnostics stay short and tests stay stable
  int line = 0;
  int column = 0;
  /// From a std::source_location (a template: this header needs no <source_location>, which
  /// the fuzz targets' clang cannot compile with libstdc++ 12).
  template <class SourceLocation>
  static Loc from(const SourceLocation& l) {
    return Loc{base_name(l.file_name()), static_cast<int>(l.line()), static_cast<int>(l.column())};
  }
  static std::string base_name(const char* path);
  std::string str() const;  // "file:line"
  /// The same source position: a statement's blocks and leaves are told apart by it.
  bool operator==(const Loc&) const = default;
};

/// What an error stands for, which decides its exit code and Python exception.
enum class ErrorKind {
  User,          // a bad program, flag, parameter, config or input: the user fixes it
  CheckFinding,  // a run found a race, deadlock, flag misuse (kCheckKinds): the kernel is wrong
  Budget,        // a run passed its cycle or wall-clock budget
  Interrupted,   // a run stopped by Ctrl-C (its cancel flag)
  Internal,      // a bug in tilepipe
};
/// "user", "check", "budget", "interrupted", "internal".
const char* to_string(ErrorKind k);

/// Diagnostic kinds a run finds that make the kernel wrong or hang on the NPU: a race, a
/// deadlock, flag misuse, a T.sync_all some core missed, a run-time slice out of range.
inline constexpr std::array<std::string_view, 8> kCheckKinds = {
    "race",    "deadlock", "unmatched-flag", "cross-flag", "flag-double-set",
    "flag-id", "sync-all", "slice-bounds"};
/// Diagnostic kinds of a run stopped by its budget, and by its cancel flag.
inline constexpr std::array<std::string_view, 2> kBudgetKinds = {"cycle-budget", "wall-budget"};
inline constexpr std::string_view kInterruptedKind = "interrupted";

/// The root: every exception tilepipe throws on purpose.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

/// A bad input outside a program (a flag, a kernel parameter, a chip config, a builder call,
/// host data): `message` says what was expected, what was found and the fix; `loc` is set
/// when the input has a source line (a builder call); `category` names the input ("param",
/// "config", "build", "usage", ...), the kind of the diagnostic a front end shows for it.
class InputError : public Error {
 public:
  InputError(std::string category, std::string message, Loc loc = {});
  std::string category;
  std::string message;
  Loc loc;
};

/// A bug in tilepipe, never the user's: reported with a request to report it.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error(ErrorKind::Internal, what) {}
};

/// Exit codes of the command line: success 0; internal error 1; bad input (flags,
/// parameters, configs, programs, budgets) 2; a check found a problem 3.
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitCheckFailed = 3;

/// How an exception reaches the user: the command line's exit code and stderr text, the
/// `error` of its JSON, the Python exception's message.
struct ErrorReport {
  ErrorKind kind = ErrorKind::Internal;
  int exit_code = kExitInternal;
  std::string message;
};

/// The one mapping of exceptions to reports: an Error by its kind (a located InputError as
/// `file:line: error: ...`, an unlocated one as `tilepipe: ...`, a UserError as its
/// diagnostics); any other std::exception (or none) is an internal error whose message asks
/// for a bug report, never the bare what().
ErrorReport describe_error(std::exception_ptr e);
int exit_code(ErrorKind k);

}  // namespace tilepipe
