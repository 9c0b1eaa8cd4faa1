// Tests of the loader against hostile input (issue 14): files the operating system would hand
// over without end (devices, FIFOs, huge files), nesting that would overflow toml++'s stack,
// numbers past what an attribute or a rate could ever mean, and user strings (keys, names) that
// would break a one-line message. Each is an invalid_scenario naming the file and line, never a
// crash.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "scenarios/format/scenario_test_util.h"
#include "scenarios/format/scenario_text.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHeartbeat = "name = \"h\"\n[heartbeat]\nduration_ms = 1000\n";

std::string load_error(const std::string& path) {
  try {
    load_scenario_file(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_scenario) << e.what();
    return e.detail();
  }
  return "no error";
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dagsim-hostile-loader-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

TEST(ScenarioHostile, OnlyRegularFilesOfBoundedSizeAreRead) {
  EXPECT_EQ(load_error("/dev/zero"), "/dev/zero: cannot read: not a regular file");
  const fs::path dir = scratch("a_dir");
  fs::create_directories(dir);
  EXPECT_EQ(load_error(dir.string()), dir.string() + ": cannot read: is a directory");
  // A FIFO with no writer: refused at once, never waited on.
  const fs::path fifo = scratch("fifo");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(load_error(fifo.string()), fifo.string() + ": cannot read: not a regular file");
  // One byte over the limit (sparse: no disk is spent).
  const fs::path big = scratch("big.toml");
  { std::ofstream(big) << kHeartbeat; }
  fs::resize_file(big, detail::kMaxScenarioBytes + 1);
  EXPECT_EQ(load_error(big.string()), big.string() + ": is larger than 4 MiB, the limit of a scenario file");
  fs::resize_file(big, kHeartbeat.size());
  EXPECT_EQ(load_error(big.string()), "no error");
  EXPECT_EQ(error_of(std::string(detail::kMaxScenarioBytes + 1, '\n')),
            "bad.toml: is larger than 4 MiB, the limit of a scenario file");
  fs::remove_all(dir.parent_path());
}

TEST(ScenarioHostile, DeepNestingIsRefusedBeforeParsing) {
  const std::string limit = "invalid TOML: nested more than 128 levels deep (table headers, dotted keys, arrays and inline tables together)";
  std::string dotted = "a";
  for (int i = 0; i < 100'000; ++i) dotted += ".a";
  EXPECT_EQ(error_of(std::string(kHeartbeat) + "\n" + dotted + " = 1\n"), "bad.toml:5: " + limit);
  EXPECT_EQ(error_of(std::string(kHeartbeat) + "[" + dotted + "]\n"), "bad.toml:4: " + limit);
  EXPECT_EQ(error_of(std::string(kHeartbeat) + "[[" + dotted + "]]\n"), "bad.toml:4: " + limit);
  // Inline tables, each with a dotted key: a few dots each, deep in total.
  std::string inline_tables = "x = ";
  for (int i = 0; i < 100; ++i) inline_tables += "{a.b = ";
  EXPECT_EQ(error_of(std::string(kHeartbeat) + inline_tables + "1" + std::string(100, '}') + "\n"),
            "bad.toml:4: " + limit);
  // At the limit it is TOML's to judge (here: an unknown key), and dots in strings, comments and
  // numbers do not count.
  std::string deep = "a";
  for (int i = 1; i < 128; ++i) deep += ".a";
  EXPECT_EQ(error_of(deep + " = 1\n" + std::string(kHeartbeat)), "bad.toml:1: a: unknown key; allowed top-level keys: "
            "name, description, schedule, max_virtual_time_ms, max_wall_time_ms, max_memory_mib, cluster, network, devices, faults, "
            "random_faults, checks, buggify, "
            "heartbeat, tensors, parameters, program, backward, optimizer, message_faults, model, train, rendezvous, elastic, job");
  const std::string dots(1000, '.');
  EXPECT_EQ(error_of("name = \"" + dots + "\" # " + dots + "\ndescription = '''\n" + dots + "\n'''\n[heartbeat]\n"
                     "duration_ms = 1.5\n"),
            "no error");
}

TEST(ScenarioHostile, IntegerAttributesAreRangeCheckedAsWritten) {
  const std::string head = "name = \"p\"\ntensors = [{ name = \"x\", shape = [2, 3] }]\nbackward = { roots = [\"a\"] }\n";
  auto statement = [&](const std::string& attributes) {
    return error_of(head + "program = [{ out = \"a\", call = \"sum\", args = [\"x\"], " + attributes + " }]\n");
  };
  EXPECT_EQ(statement("dim = 9223372036854775807"),
            "bad.toml:4: program[0].dim: 9223372036854775807 is out of range [-8, 7]");
  EXPECT_EQ(statement("dim = 1e19"), "bad.toml:4: program[0].dim: 1e+19 is out of range [-8, 7]");
  EXPECT_EQ(statement("dim = 1e300"), "bad.toml:4: program[0].dim: 1e+300 is out of range [-8, 7]");
  EXPECT_EQ(statement("dim = -9"), "bad.toml:4: program[0].dim: -9 is out of range [-8, 7]");
  EXPECT_EQ(statement("dim = -8, keepdim = true"), "no error");
  EXPECT_EQ(statement("start = 10000001"), "bad.toml:4: program[0].start: 10000001 is out of range [-10000000, 10000000]");
  EXPECT_EQ(statement("length = -1"), "bad.toml:4: program[0].length: -1 is out of range [0, 10000000]");
  EXPECT_EQ(statement("activation = 4"), "bad.toml:4: program[0].activation: 4 is out of range [0, 3]");
  // Other integers keep their exact text too.
  EXPECT_EQ(error_of("name = \"h\"\n[cluster]\nnodes = 9223372036854775807\n[heartbeat]\n"),
            "bad.toml:3: cluster.nodes: 9223372036854775807 is out of range [1, 1024]");
}

TEST(ScenarioHostile, RandomFaultRatesAreBoundedAtLoadTime) {
  const std::string head = "name = \"h\"\n[heartbeat]\nduration_ms = 5000\n[random_faults]\n";
  EXPECT_EQ(error_of(head + "kill_per_min = 1000000\n"),
            "bad.toml:5: random_faults.kill_per_min: 1000000 per minute over 60000 ms (start_ms to "
            "max_virtual_time_ms) is about 1000000 faults; at most 10000 of each kind are expected in a run");
  EXPECT_EQ(error_of(head + "pause_per_min = 20000\nstart_ms = 1000\nend_ms = 32000\n"),
            "bad.toml:5: random_faults.pause_per_min: 20000 per minute over 31000 ms (start_ms to end_ms) is about "
            "10333 faults; at most 10000 of each kind are expected in a run");
  // Exactly at the bound is allowed: 10^4 expected over the default 60 s.
  EXPECT_EQ(error_of(head + "crash_per_min = 10000\n"), "no error");
  EXPECT_EQ(error_of(head + "partition_per_min = 1000000\nend_ms = 600\n"), "no error");
}

TEST(ScenarioHostile, UserStringsStayOneQuotedShortLine) {
  // A quoted key with ": " reads as one key, not as a second field of the message.
  EXPECT_EQ(error_of(std::string(kHeartbeat) + "[cluster]\n\"nodes: 3\" = 1\n"),
            "bad.toml:5: cluster.\"nodes: 3\": unknown key; allowed keys in [cluster]: nodes, name_prefix, "
            "clock_skew_max_ms, clock_drift_max_ppm");
  // Newlines and escape sequences are escaped.
  EXPECT_EQ(error_of(std::string(kHeartbeat) + "monitor = \"work\\ner\\u001b[2J1\"\n"),
            "bad.toml:4: heartbeat.monitor: unknown node \"work\\ner\\u001b[2J1\"; nodes are worker0..worker1");
  EXPECT_EQ(error_of("name = \"p\"\ntensors = [{ name = \"a\\nb\", shape = [1] }]\nprogram = []\nbackward = {}\n"),
            "bad.toml:2: tensors[0].name: \"a\\nb\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  // A 1 MB key is cut to 80 characters and its length.
  const std::string key(1'000'000, 'k');
  const std::string message = error_of(std::string(kHeartbeat) + key + " = 1\n");
  EXPECT_EQ(message, "bad.toml:4: heartbeat.\"" + std::string(80, 'k') +
                         "...\" (1000000 bytes): unknown key; allowed keys in [heartbeat]: monitor, interval_ms, "
                         "max_attempts, duration_ms, message_bytes")
      << message.substr(0, 200);
}

}  // namespace
}  // namespace dagsim::scenarios
