// Tests of Trace: the rolling hash depends on every field and on order, and the Chrome
// trace-event output has the structure Perfetto needs (named tracks, paired flows).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "sim/sim_test_util.h"

namespace dagsim::sim {
namespace {

using namespace testing;

TEST(Trace, HashDependsOnEveryFieldAndOrder) {
  auto hash_of = [](std::vector<std::tuple<int64_t, uint32_t, TraceKind, std::string>> events) {
    Trace trace(false);
    for (auto& [t, node, kind, detail] : events) trace.record(runtime::TimePoint{Duration{t}}, node, kind, detail);
    return trace.hash();
  };
  const uint64_t base = hash_of({{1, 0, TraceKind::send, "a"}, {2, 1, TraceKind::deliver, "b"}});
  EXPECT_EQ(base, hash_of({{1, 0, TraceKind::send, "a"}, {2, 1, TraceKind::deliver, "b"}}));
  EXPECT_NE(base, hash_of({{2, 1, TraceKind::deliver, "b"}, {1, 0, TraceKind::send, "a"}}));
  EXPECT_NE(base, hash_of({{1, 0, TraceKind::send, "a"}, {3, 1, TraceKind::deliver, "b"}}));
  EXPECT_NE(base, hash_of({{1, 0, TraceKind::send, "a"}, {2, 2, TraceKind::deliver, "b"}}));
  EXPECT_NE(base, hash_of({{1, 0, TraceKind::send, "a"}, {2, 1, TraceKind::drop, "b"}}));
  EXPECT_NE(base, hash_of({{1, 0, TraceKind::send, "a"}, {2, 1, TraceKind::deliver, "c"}}));
}

TEST(Trace, HashCoversEveryRecordAcrossBlocks) {
  // Records are hashed a block at a time (trace.h): every record must still move the hash, in the
  // part-filled block as in full ones, and one changed record anywhere must change the end result.
  constexpr int kRecords = 64 * 3 + 5;
  auto run = [](int changed) {
    Trace trace(false);
    std::vector<uint64_t> hashes;
    for (int i = 0; i < kRecords; ++i) {
      trace.record_lazy(runtime::TimePoint{Duration{i}}, 1, TraceKind::send, i == changed ? 7 : 6, uint64_t(i), 2,
                        [] { return std::string(); });
      hashes.push_back(trace.hash());
      EXPECT_EQ(hashes.back(), trace.hash());  // reading it changes nothing
    }
    return hashes;
  };
  const std::vector<uint64_t> base = run(-1);
  std::set<uint64_t> distinct(base.begin(), base.end());
  EXPECT_EQ(distinct.size(), base.size());
  EXPECT_EQ(base, run(-1));
  for (int changed : {0, 63, 64, 100, 191, 192, kRecords - 1}) {
    EXPECT_NE(run(changed).back(), base.back()) << "record " << changed;
    EXPECT_EQ(run(changed)[changed - 1 < 0 ? 0 : changed - 1] == base[changed - 1 < 0 ? 0 : changed - 1], changed > 0);
  }
}

TEST(Trace, ChromeJsonHasNamedTracksAndPairedFlows) {
  SimOptions options;
  options.keep_trace_events = true;
  options.network.latency = LatencyModel::constant(1ms);
  SimWorld world(options);
  std::vector<Received> log;
  world.add_node("alpha", recorder(log));
  world.add_node("beta", recorder(log));
  world.start(0);
  world.start(1);
  world.at(at_ms(1), "send", [&] {
    world.env(0).transport.send(1, bytes_of("x"));
    world.env(1).transport.send(0, bytes_of("y"));
  });
  world.run({.stop_at = at_ms(10)});
  std::stringstream out;
  world.trace().write_chrome_json(out, world.node_names());
  const nlohmann::json doc = nlohmann::json::parse(out.str());
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<int, std::string> thread_names;
  std::map<uint64_t, int> flow_starts, flow_ends;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    ASSERT_TRUE(e.contains("pid"));
    ASSERT_TRUE(e.contains("tid"));
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
    if (ph != "M") {
      ASSERT_TRUE(e.contains("ts")) << e.dump();
    }
    if (ph == "s") flow_starts[e["id"]] = e["tid"];
    if (ph == "f") {
      flow_ends[e["id"]] = e["tid"];
      EXPECT_EQ(e["bp"], "e");
    }
  }
  EXPECT_EQ(thread_names[1], "alpha");
  EXPECT_EQ(thread_names[2], "beta");
  ASSERT_EQ(flow_starts.size(), 2u);
  ASSERT_EQ(flow_ends.size(), 2u);
  for (const auto& [id, tid] : flow_starts) {
    ASSERT_TRUE(flow_ends.count(id)) << "flow " << id << " never finishes";
    EXPECT_NE(flow_ends[id], tid) << "a message flows between two tracks";
  }
}

}  // namespace
}  // namespace dagsim::sim
