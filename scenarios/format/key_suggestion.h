// key_suggestion: what an unknown key of a scenario likely meant, for the loader's "unknown key"
// message (TomlReader::check_keys). A user coming from torchrun writes its names first
// (`last_call_timeout`, `join_timeout`, `rdzv_backend`), in seconds where a scenario's `_ms` keys
// take milliseconds; anyone may misspell a key or write it in the wrong table.
//
// Promises: the suggestion is, in this order, the key `allowed` has under torchrun's name or with
// its unit suffix added; a note for a torchrun name a scenario has no key for; else a close
// spelling (within a quarter of the key's length, 1 to 3 edits) and the tables that have the key
// (scenario_keys.h). Empty when none applies. Keys longer than 100 bytes get no spelling
// suggestion (no quadratic work on a hostile key).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace dagsim::scenarios::detail {

// " (did you mean last_call_ms? torchrun's last_call_timeout is in seconds, ...)", or "".
std::string key_suggestion(std::string_view key, std::span<const std::string_view> allowed);

}  // namespace dagsim::scenarios::detail
