// read_bounded_file(): the one way a file argument or a file a peer may have written is read
// whole (scenarios, peers files, credentials, records, summaries). It promises that reading never
// waits on a FIFO's writer, never reads a device or a directory, and never holds more than the
// caller's bound (plus one byte, which is how a file that grows while read is caught): anything
// else is Error(code) naming the path, printable, and what is wrong with it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/error.h"

namespace dagsim {

// Reads a regular file of at most `max_bytes`. A directory, a device, a FIFO or socket (refused
// at once, never waited on), a larger file, or one that cannot be opened or read, is refused with
// Error(code): "PATH: cannot read: not a regular file", "PATH: is larger than 4 MiB, the limit of
// KIND" (`kind`: "a scenario file", "a peers file").
std::string read_bounded_file(const std::string& path, size_t max_bytes, ErrorCode code, std::string_view kind);

}  // namespace dagsim
