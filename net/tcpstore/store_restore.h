// restore_store_records(): `dagsim store --restore FILE...` (issue 51 item 2, store_restart with
// keep_data): the earlier lives' records (store_recorder.h), replayed in order into the table
// before the store listens, so a restarted store answers what was written before it died.
//
// What is replayed: every write a record shows, with the value it left (set: its value;
// compare_set that wrote: the key's value after it; add: the value after it; delete_key that
// deleted: the key goes). Reads, waits, connections and fault lines change nothing and are skipped.
//
// Promises: a record it cannot replay exactly is refused, Error(invalid_argument) naming
// "FILE:LINE: why", and nothing is served from half a table: a value or key the record summarised
// ({"bytes", "sha256"}: start the store that writes it with --record-value-bytes large enough), a
// record cut at its cap (writes after the cut are lost), a line that is not a record line, a line
// longer than kRecordMaxLineBytes or nested deeper than a record line is. The one exception is an
// unterminated last line that does not parse: the store was killed while writing it, and a write's
// line is flushed whole when applied (store_recorder.h), so it is skipped and counted.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/store/key_value_table.h"

namespace dagsim::net::tcpstore {

struct RestoreSummary {
  size_t files = 0;
  size_t writes = 0;        // lines replayed
  size_t torn_lines = 0;    // unterminated last lines skipped
};

RestoreSummary restore_store_records(const std::vector<std::string>& paths, store::KeyValueTable& table);

}  // namespace dagsim::net::tcpstore
