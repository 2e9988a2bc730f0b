// The `tilepipe` command line as a library (contract: docs/cli.md): the binary (tools/main.cc)
// and the Python module (for kernels that are Python files) run the same verbs. Kernel
// sources must be registered with the driver before main() is called.
#pragma once

#include <string>

#include "tilepipe/error.h"

namespace tilepipe::cli {

/// Exit codes (error.h): success 0; internal error 1; bad input (flags, parameters, configs,
/// programs) 2; `check` found a problem 3.
using tilepipe::kExitBadInput;
using tilepipe::kExitCheckFailed;
using tilepipe::kExitInternal;

/// Parses the command line and runs its verb; returns the exit code.
int main(int argc, char** argv);

/// Whether the command line asks for JSON (`--json` anywhere).
bool json_requested(int argc, char** argv);

/// Prints `message` on stderr and, with `json`, {"error", "exit_code"} on stdout (the
/// contract's one JSON object even for failures); returns `code`.
int fail(int code, const std::string& message, bool json);

}  // namespace tilepipe::cli
