#include "outputs.h"

#include <iostream>
#include <stdexcept>

#include "cli_parse.h"
#include "tilepipe/chip.h"

namespace tilepipe::cli {

void check_outputs(const std::vector<prof::OutputSpec>& outputs, const std::string& chip,
                   const std::string& rules) {
  std::vector<std::pair<std::string, std::string>> inputs = {{"--chip", chip_config_path(chip)}};
  if (!rules.empty()) inputs.push_back({"--rules", rules});
  try {
    prof::check_outputs(outputs, inputs);
  } catch (const std::runtime_error& e) {
    throw ArgError{e.what()};
  }
}

void print_result(bool as_json, const nlohmann::ordered_json& out, const std::string& text) {
  if (as_json) {
    std::cerr << text;
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << text;
  }
}

}  // namespace tilepipe::cli
