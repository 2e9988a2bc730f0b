// One reader for every JSON file a user gives tilepipe (chip configs, anchors, advice rules,
// fit ranges, reports): a clear one-line error for an empty file, malformed JSON (with the
// line and column) and a key given twice in one object (nlohmann keeps the last silently).
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tilepipe {

/// A JSON input that cannot be used; what() is "ORIGIN: what was found; the fix".
struct JsonInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses `text` (the contents of `origin`, a file name for messages; `what` says what the
/// file should be, e.g. "an anchors file (configs/fidelity.json)"). Throws JsonInputError.
nlohmann::json parse_json_input(const std::string& text, const std::string& origin,
                                const std::string& what);
nlohmann::ordered_json parse_ordered_json_input(const std::string& text, const std::string& origin,
                                                const std::string& what);

}  // namespace tilepipe
