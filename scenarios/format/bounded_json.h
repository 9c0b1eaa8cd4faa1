// parse_bounded_json(): JSON from a file or a peer, parsed with a bound on its nesting, for every
// reader of a JSON file a user names or another process wrote (a sweep's summary, a run's records).
//
// Why: nlohmann's parser keeps its own stack, but what walks the value afterwards (a reader that
// recurses, dump()) does not, and a file of a million '[' costs a million nested values; no file
// dagsim writes nests deeper than a handful. Size is bounded before this, by read_bounded_file()
// (core/base/bounded_file.h), which also refuses FIFOs and devices.
//
// Promises: text nested deeper than `max_depth` (an array or object inside max_depth others) is
// refused as soon as the parser reaches that depth, before it builds anything below it; text that
// is not JSON is refused with the parser's message, and so is text holding a NUL byte (which the
// parser would take for the end, ignoring the rest). Either is Error(code) starting "WHAT: ", with
// WHAT printable. Never throws anything else.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/base/error.h"

namespace dagsim::scenarios {

nlohmann::json parse_bounded_json(std::string_view text, size_t max_depth, ErrorCode code, const std::string& what);

}  // namespace dagsim::scenarios
