#include "tilepipe/kernel_params.h"

#include <fmt/format.h>

#include <charconv>

namespace tilepipe::driver {

Params parse_param_values(const std::string& kernel, const std::vector<ParamSpec>& specs,
                          const std::map<std::string, std::string>& raw) {
  Params p;
  for (const auto& s : specs) p[s.name] = s.def;
  for (const auto& [name, text] : raw) {
    const ParamSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::vector<std::string> names;
      for (const auto& s : specs) names.push_back(s.name);
      throw ParamError{fmt::format("kernel '{}' has no parameter '{}'; parameters: {}", kernel,
                                   name, fmt::join(names, ", "))};
    }
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      throw ParamError{fmt::format("parameter {}={}: expected an integer in [{}, {}]", name, text,
                                   spec->min, spec->max)};
    }
    if (v < spec->min || v > spec->max) {
      throw ParamError{fmt::format("parameter {}={} is out of range: allowed [{}, {}] ({})", name,
                                   v, spec->min, spec->max, spec->help)};
    }
    p[name] = v;
  }
  return p;
}

}  // namespace tilepipe::driver
