// The outputs of a command, checked before it does any work (prof::check_outputs), with
// the chip config and rules file it reads as inputs no output may overwrite.
#pragma once

#include <string>
#include <vector>

#include "tilepipe/prof.h"

namespace tilepipe::cli {

/// Throws ArgError (exit 2) with prof::check_outputs' message.
void check_outputs(const std::vector<prof::OutputSpec>& outputs, const std::string& chip,
                   const std::string& rules = "");

}  // namespace tilepipe::cli
