// The strict reader of user JSON files (include/tilepipe/json_input.h).
#include "tilepipe/json_input.h"

#include <fmt/format.h>

#include <set>
#include <vector>

namespace tilepipe {
namespace {

/// Finds the first key that appears twice in one object while parsing (nlohmann keeps only
/// the last one silently, which hides copy-paste mistakes).
template <class Json>
class DuplicateKeyFinder {
 public:
  bool operator()(int /*depth*/, typename Json::parse_event_t event, Json& parsed) {
    using E = typename Json::parse_event_t;
    switch (event) {
      case E::object_start:
        frames_.push_back({{}, {}});
        break;
      case E::array_start:
        frames_.push_back({{}, "[]"});
        break;
      case E::object_end:
      case E::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case E::key:
        if (!frames_.empty() && parsed.is_string()) {
          Frame& top = frames_.back();
          top.key = parsed.template get<std::string>();
          if (!top.seen.insert(top.key).second && duplicate_.empty()) {
            std::vector<std::string> parts;
            for (const Frame& f : frames_) parts.push_back(f.key);
            duplicate_ = fmt::format("{}", fmt::join(parts, "."));
          }
        }
        break;
      case E::value:
        break;
    }
    return true;
  }

  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    std::set<std::string> seen;
    std::string key;
  };
  std::vector<Frame> frames_;
  std::string duplicate_;
};

template <class Json>
Json parse_strict(const std::string& text, const std::string& origin, const std::string& what) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw JsonInputError{fmt::format("{}: the file is empty; expected {}", origin, what)};
  DuplicateKeyFinder<Json> dups;
  Json root;
  try {
    root = Json::parse(text, std::ref(dups), /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const typename Json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line L, column C: ...".
    std::string detail = e.what();
    if (auto pos = detail.find("] "); pos != std::string::npos) detail = detail.substr(pos + 2);
    for (char& c : detail)
      if (c == '\n') c = ' ';
    throw JsonInputError{
        fmt::format("{}: malformed JSON (byte {}): {}; expected {}: fix the "
                    "syntax there",
                    origin, e.byte, detail, what)};
  }
  if (!dups.duplicate().empty())
    throw JsonInputError{fmt::format(
        "{}: the key '{}' is given twice in one object (JSON readers keep only one of the two); "
        "delete one of the two entries",
        origin, dups.duplicate())};
  return root;
}

}  // namespace

nlohmann::json parse_json_input(const std::string& text, const std::string& origin,
                                const std::string& what) {
  return parse_strict<nlohmann::json>(text, origin, what);
}

nlohmann::ordered_json parse_ordered_json_input(const std::string& text, const std::string& origin,
                                                const std::string& what) {
  return parse_strict<nlohmann::ordered_json>(text, origin, what);
}

}  // namespace tilepipe
