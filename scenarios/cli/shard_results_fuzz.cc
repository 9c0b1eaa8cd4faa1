// scenarios/cli/shard_results_fuzz.cc: the libFuzzer target for a shard's results reader
// (shard_results.h), what `dagsim merge` reads from files any task on a cluster may have written;
// built and run by scripts/fuzz.sh (target "shard_results"). The target reports (aborts, so
// libFuzzer saves the input) any of:
//  - parse_shard_results throwing anything but Error(invalid_argument), or crashing, leaking, or
//    tripping ASan, UBSan or an assert, on any bytes;
//  - an error that does not start with the file's name or is not one printable line;
//  - results accepted from text nested deeper than kMaxShardResultsDepth (by its own bracket scan);
//  - results that break what the reader promises: a shard 0 <= index < count <= kMaxShards, every
//    seed in the shard and in order, none twice, exit codes 0..255;
//  - results that, written back (shard_results_json), do not read as themselves.
// Input: the file's bytes, as is.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "scenarios/cli/shard_results.h"

namespace {

constexpr const char* kName = "shard.json";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using dagsim::cli::ShardResults;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ShardResults results;
  try {
    results = dagsim::cli::parse_shard_results(text, kName);
  } catch (const dagsim::Error& e) {
    dagsim::net::fuzz::check_named_refusal(e, kName);
    return 0;
  }
  DAGSIM_FUZZ_CHECK(dagsim::net::fuzz::bracket_depth(text) <= dagsim::cli::kMaxShardResultsDepth);
  DAGSIM_FUZZ_CHECK(results.shard.count >= 1 && results.shard.count <= dagsim::cli::kMaxShards);
  DAGSIM_FUZZ_CHECK(results.shard.index < results.shard.count);
  DAGSIM_FUZZ_CHECK(results.first <= results.last);
  DAGSIM_FUZZ_CHECK(results.outcomes.size() <= size / 2);
  for (size_t i = 0; i < results.outcomes.size(); ++i) {
    const dagsim::cli::SeedOutcome& o = results.outcomes[i];
    DAGSIM_FUZZ_CHECK(dagsim::cli::in_shard(results.first, results.last, results.shard, o.seed));
    DAGSIM_FUZZ_CHECK(o.exit_code >= 0 && o.exit_code <= 255);
    if (i > 0) DAGSIM_FUZZ_CHECK(results.outcomes[i - 1].seed < o.seed);
  }
  // Strings the parser accepted may hold bytes that are not UTF-8: kept as they are.
  const std::string again =
      dagsim::cli::shard_results_json(results).dump(-1, ' ', false, nlohmann::json::error_handler_t::ignore);
  try {
    DAGSIM_FUZZ_CHECK(dagsim::cli::shard_results_json(dagsim::cli::parse_shard_results(again, kName)) ==
                      dagsim::cli::shard_results_json(results));
  } catch (const dagsim::Error& e) {
    dagsim::net::fuzz::fail("the results, written back, were refused", e.what());
  }
  if (dagsim::net::fuzz::tracing()) std::fprintf(stderr, "read %zu seeds\n", results.outcomes.size());
  return 0;
}
