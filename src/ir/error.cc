// The error hierarchy's shared parts (include/tilepipe/error.h).
#include "tilepipe/error.h"

#include <filesystem>

namespace tilepipe {

std::string Loc::base_name(const char* path) {
  return std::filesystem::path(path).filename().string();
}

std::string Loc::str() const {
  if (file.empty()) return "<unknown>";
  return file + ":" + std::to_string(line);
}

const char* to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::User:
      return "user";
    case ErrorKind::CheckFinding:
      return "check";
    case ErrorKind::Budget:
      return "budget";
    case ErrorKind::Interrupted:
      return "interrupted";
    case ErrorKind::Internal:
      break;
  }
  return "internal";
}

namespace {

std::string input_text(const std::string& message, const Loc& loc) {
  if (loc.file.empty()) return message;
  return loc.file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) +
         ": error: " + message;
}

}  // namespace

InputError::InputError(std::string category_, std::string message_, Loc loc_)
    : Error(ErrorKind::User, input_text(message_, loc_)),
      category(std::move(category_)),
      message(std::move(message_)),
      loc(std::move(loc_)) {}

int exit_code(ErrorKind k) {
  switch (k) {
    case ErrorKind::CheckFinding:
      return kExitCheckFailed;
    case ErrorKind::Internal:
      return kExitInternal;
    case ErrorKind::User:
    case ErrorKind::Budget:
    case ErrorKind::Interrupted:
      break;
  }
  return kExitBadInput;
}

ErrorReport describe_error(std::exception_ptr e) {
  auto internal = [](const std::string& what) {
    return ErrorReport{ErrorKind::Internal, kExitInternal,
                       "tilepipe: internal error: " + what +
                           " (this is a bug in tilepipe; please report it with the command "
                           "that caused it)"};
  };
  try {
    if (e) std::rethrow_exception(e);
    return internal("no exception");
  } catch (const InputError& x) {
    return {x.kind(), exit_code(x.kind()),
            x.loc.file.empty() ? "tilepipe: " + x.message : x.what()};
  } catch (const Error& x) {
    if (x.kind() == ErrorKind::Internal) return internal(x.what());
    return {x.kind(), exit_code(x.kind()), x.what()};
  } catch (const std::bad_alloc&) {
    return {ErrorKind::User, kExitBadInput,
            "tilepipe: out of memory: the run needs more host memory than this machine gives "
            "it; run a smaller shape, or use --mode timing (no tensor values)"};
  } catch (const std::exception& x) {
    return internal(x.what());
  } catch (...) {
    return internal("an exception of unknown type");
  }
}

}  // namespace tilepipe
