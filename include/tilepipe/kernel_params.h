// Kernel parameters (driver layer): specs, values and their parsing from command-line
// text. No IR or simulator dependency, so the parameter parser can be fuzzed on its own
// (fuzz/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepipe/error.h"

namespace tilepipe::driver {

using Params = std::map<std::string, int64_t>;

struct ParamSpec {
  std::string name;
  int64_t def;
  int64_t min, max;
  std::string help;
};

/// A bad parameter or variant: the message says what is allowed.
class ParamError : public InputError {
 public:
  explicit ParamError(std::string message) : InputError("param", std::move(message)) {}
};

/// The defaults of `specs` overlaid with `raw` (name -> decimal text). Throws ParamError on
/// an unknown name, a value that is not a decimal integer, or one outside [min, max].
Params parse_param_values(const std::string& kernel, const std::vector<ParamSpec>& specs,
                          const std::map<std::string, std::string>& raw);

}  // namespace tilepipe::driver
