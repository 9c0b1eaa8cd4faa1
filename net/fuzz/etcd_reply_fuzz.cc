// net/fuzz/etcd_reply_fuzz.cc: the libFuzzer target for etcd's replies as EtcdStore reads them
// (net/etcd/etcd_reply.h), built and run by scripts/fuzz.sh (target "etcd_reply"). etcd's gateway
// is plain HTTP: whoever answers at the endpoint writes the reply, so the reader trusts nothing. It
// promises to report (abort, so libFuzzer saves the input) any of:
//  - parse_reply, or any reader of a Reply (succeeded, revision, number, first_kv, txn_range,
//    watch) on what it parsed, throwing anything but protocol_error (a nlohmann exception among
//    them), or crashing, leaking, or tripping ASan, UBSan or an assert, on any bytes;
//  - a message holding a control character (text from the reply is escaped), or one that does not
//    name the Reply's `where`;
//  - a parsed reply that is not an object, nests deeper than kMaxReplyDepth (+1 for the values of
//    the deepest container) or holds more than kMaxReplyValues values, or whose dump() fails.
// Input: the reply's body, as is (the committed seeds are replies of etcd 3.4's gateway and
// hostile ones, net/fuzz/corpus/etcd_reply/).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/error.h"
#include "net/etcd/etcd_reply.h"
#include "net/fuzz/fuzz_util.h"

namespace {

using dagsim::net::etcd::Json;
using dagsim::net::etcd::Reply;
namespace etcd = dagsim::net::etcd;
namespace fuzz = dagsim::net::fuzz;

constexpr std::string_view kWhere = "etcd at 127.0.0.1:2379: fuzz call";

void check_message(const dagsim::Error& e, bool named) {
  if (e.code() != dagsim::ErrorCode::protocol_error) fuzz::fail("another error than protocol_error", e.what());
  const std::string what = e.what();
  for (const char c : what) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) fuzz::fail("a control character in a message", what.c_str());
  }
  if (named && what.find(kWhere) == std::string::npos) fuzz::fail("a Reply's error that does not name where", what.c_str());
  if (fuzz::tracing()) std::fprintf(stderr, "refused: %s\n", what.c_str());
}

// Runs `read`; any exception but a named protocol_error fails the run.
template <typename F>
void reading(F read) {
  try {
    read();
  } catch (const dagsim::Error& e) {
    check_message(e, /*named=*/true);
  } catch (const std::exception& e) {
    fuzz::fail("a reader threw a non-dagsim exception", e.what());
  }
}

// The parsed value's depth and value count, without recursion.
void check_shape(const Json& reply) {
  DAGSIM_FUZZ_CHECK(reply.is_object());
  std::vector<std::pair<const Json*, int>> stack{{&reply, 1}};
  uint64_t values = 0;
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    ++values;
    DAGSIM_FUZZ_CHECK(depth <= etcd::kMaxReplyDepth + 1);
    if (v->is_structured()) {
      for (const Json& child : *v) stack.emplace_back(&child, depth + 1);
    }
  }
  DAGSIM_FUZZ_CHECK(values <= etcd::kMaxReplyValues);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Json parsed;
  try {
    parsed = etcd::parse_reply(text);
  } catch (const dagsim::Error& e) {
    check_message(e, /*named=*/false);
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail("parse_reply threw a non-dagsim exception", e.what());
  }
  check_shape(parsed);
  (void)parsed.dump(-1, ' ', false, Json::error_handler_t::replace);  // bounded depth: no stack overflow
  const Reply reply(std::move(parsed), std::string(kWhere));
  reading([&] { (void)reply.succeeded(); });
  reading([&] { (void)reply.revision(); });
  reading([&] { (void)reply.number("count"); });
  reading([&] {
    const etcd::KeyState kv = reply.first_kv();
    if (fuzz::tracing()) std::fprintf(stderr, "first_kv: %zu bytes at %llu\n", kv.value.size(), static_cast<unsigned long long>(kv.mod_revision));
  });
  for (size_t i = 0; i < 3; ++i) reading([&] { (void)reply.txn_range(i); });
  reading([&] {
    const etcd::WatchMessage m = reply.watch();
    if (m.error) {
      for (const char c : *m.error) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) fuzz::fail("a control character in a watch error", m.error->c_str());
      }
    }
    if (fuzz::tracing()) std::fprintf(stderr, "watch: %zu events, created %d, canceled %d\n", m.events.size(), m.created, m.canceled);
  });
  return 0;
}
