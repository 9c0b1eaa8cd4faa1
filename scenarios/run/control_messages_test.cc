// The control protocol's codec (control_messages.h): every message round-trips, and what a broken
// or hostile peer could send is refused with protocol_error naming the message and the field.
#include "scenarios/run/control_messages.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "core/base/error.h"

namespace dagsim::scenarios::control {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string refusal_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::protocol_error) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return "";
}

TEST(ControlMessages, EveryCommandRoundTripsThroughItsText) {
  const std::vector<Command> commands = {
      control::Setup{"name = \"x\"\n", "ab", 42, "x.toml", "run-1"}, Start{123456789}, Kill{}, Crash{}, Block{3, true},
      Struck{7, false}, Finish{6000}, Exit{}};
  for (const Command& c : commands) {
    const json text = parse_message(encode(c).dump());
    EXPECT_EQ(text.at("op"), std::string(name_of(c)));
    EXPECT_EQ(decode_command(text), c) << text.dump();
  }
}

TEST(ControlMessages, EveryEventRoundTripsThroughItsText) {
  const NodeStats stats{1, 2, 3, 4, 5, 6, 7};
  const std::vector<Event> events = {
      Hello{1, 2, 4242}, Refused{"another scenario"}, Busy{}, Idle{}, WorkloadReport{"step", 5, 9},
      WorkloadReport{"member", 1, std::nullopt}, Stats{stats}, Record{json{{"node", "worker0"}, {"t", {1, 2}}}},
      Failure{-5, "main", "boom"}, ConnectionFailed{0, 12}, Finished{stats}};
  for (const Event& e : events) {
    const json text = parse_message(encode(e).dump());
    EXPECT_EQ(text.at("event"), std::string(name_of(e)));
    EXPECT_EQ(decode_event(text), e) << text.dump();
  }
}

TEST(ControlMessages, ABrokenMessageIsRefusedNamingTheField) {
  EXPECT_NE(refusal_of([] { decode_command(json{{"op", "block"}, {"peer", 1}}); }).find("\"block\": \"blocked\" is missing"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_command(json{{"op", "block"}, {"peer", -1}, {"blocked", true}}); }).find("\"peer\" is not a whole number"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_command(json{{"op", "block"}, {"peer", 1ull << 33}, {"blocked", true}}); }).find("over 2^32"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_command(json{{"op", "finish"}, {"drain_ms", -1}}); }).find("\"drain_ms\" is below 0"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_command(json{{"op", "start"}, {"start_wall_ns", "soon"}}); }).find("\"start_wall_ns\""),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_event(json{{"event", "record"}, {"data", json::array()}}); }).find("\"data\" is not an object"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_event(json{{"event", "stats"}, {"stats", {{"sent", 1}}}}); }).find("stats's stats"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { decode_event(json{{"event", "hello"}, {"node", 1}, {"incarnation", 0}, {"pid", -4}}); }).find("below 0"),
            std::string::npos);
  // An unknown kind is named by its size only: its text came from the peer.
  EXPECT_NE(refusal_of([] { decode_command(json{{"op", "rm -rf"}}); }).find("unknown op (6 bytes)"), std::string::npos);
  EXPECT_NE(refusal_of([] { decode_event(json{{"op", "start"}}); }).find("without a string \"event\""), std::string::npos);
  EXPECT_NE(refusal_of([] { decode_command(json::array()); }).find("not a JSON object"), std::string::npos);
}

TEST(ControlMessages, TextIsBoundedBeforeAnythingWalksIt) {
  EXPECT_NE(refusal_of([] { parse_message("{\"op\":"); }).find("not JSON"), std::string::npos);
  EXPECT_NE(refusal_of([] { parse_message("[1]"); }).find("not a JSON object"), std::string::npos);
  const std::string deep = "{\"op\":\"kill\",\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(refusal_of([&] { parse_message(deep); }).find("nested deeper than 64"), std::string::npos);
  std::string shallow = "{\"op\":\"kill\",\"x\":" + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_EQ(decode_command(parse_message(shallow)), Command{Kill{}});
  const std::string huge(kMaxControlString + 1, 'a');
  EXPECT_NE(refusal_of([&] { decode_event(json{{"event", "refused"}, {"why", huge}}); }).find("over 16777216 bytes"),
            std::string::npos);
}

// The fuzz target (control_fuzz.cc) runs every input through both decoders; its seeds must start
// it from every message of both directions, or a kind added later goes unfuzzed until libFuzzer
// happens on its name. Every seed but the nesting one decodes as a command or an event.
TEST(ControlMessages, TheFuzzSeedsHoldEveryCommandAndEveryEvent) {
  const fs::path corpus = fs::path(__FILE__).parent_path().parent_path().parent_path() / "net" / "fuzz" / "corpus" / "control";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  std::set<size_t> commands, events;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (entry.path().filename() == "deep") {
      refusal_of([&] { parse_message(text); });
      continue;
    }
    const json message = parse_message(text);
    if (message.contains("op")) {
      commands.insert(decode_command(message).index());
    } else {
      events.insert(decode_event(message).index());
    }
  }
  EXPECT_EQ(commands.size(), std::variant_size_v<Command>) << "a command kind has no seed in " << corpus;
  EXPECT_EQ(events.size(), std::variant_size_v<Event>) << "an event kind has no seed in " << corpus;
}

}  // namespace
}  // namespace dagsim::scenarios::control
