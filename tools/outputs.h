// The outputs of a command, checked before it does any work (prof::check_outputs), with
// the chip config and rules file it reads as inputs no output may overwrite.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tilepipe/prof.h"

namespace tilepipe::cli {

/// Throws ArgError (exit 2) with prof::check_outputs' message.
void check_outputs(const std::vector<prof::OutputSpec>& outputs, const std::string& chip,
                   const std::string& rules = "");

/// A command's result: with --json the JSON object on stdout and `text` on stderr, else
/// `text` on stdout (docs/cli.md, "General rules").
void print_result(bool as_json, const nlohmann::ordered_json& out, const std::string& text);

}  // namespace tilepipe::cli
