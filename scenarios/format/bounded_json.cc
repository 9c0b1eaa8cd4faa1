// parse_bounded_json(): see bounded_json.h.
#include "scenarios/format/bounded_json.h"

#include "core/base/printable.h"

namespace dagsim::scenarios {

namespace {

// Thrown from the parser's callback and caught below: nlohmann lets it through untouched.
struct TooDeep {};

}  // namespace

nlohmann::json parse_bounded_json(std::string_view text, size_t max_depth, ErrorCode code, const std::string& what) {
  using json = nlohmann::json;
  // The callback sees each container as it opens, at the depth of its parent (0 for the top).
  const json::parser_callback_t bound = [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        static_cast<size_t>(depth) >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  // nlohmann takes a NUL byte for the end of the input and ignores what follows; JSON holds none
  // (not even in a string), so one is refused rather than hiding the rest of the file.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(code, printable(what, kPathMax) + ": not JSON: a NUL byte at offset " + std::to_string(nul));
  }
  try {
    return json::parse(text.begin(), text.end(), bound);
  } catch (const TooDeep&) {
    throw Error(code, printable(what, kPathMax) + ": nested deeper than " + std::to_string(max_depth) +
                          " arrays or objects, the limit of this file");
  } catch (const json::exception& e) {
    throw Error(code, printable(what, kPathMax) + ": not JSON: " + printable(e.what(), 400));
  }
}

}  // namespace dagsim::scenarios
