// launch/launch_input_fuzz.cc: the libFuzzer target for what `dagsim launch` reads from outside
// itself besides Slurm's environment (slurm_hostlist_fuzz.cc): its command line and PET_ variables
// (launch_flags.h) and its workers' torchelastic error files (net/worker_error_file.h), built and
// run by scripts/fuzz.sh (target "launch_input"). It promises to report (abort, so libFuzzer saves
// the input) any of:
//  - parse_launch_flags throwing anything but Error(invalid_argument), or crashing, leaking, or
//    tripping ASan, UBSan or an assert, on any tokens and any environment;
//  - a parse that breaks the header's promises: the workers' command is not a suffix of argv,
//    untouched (a worker's argument eaten or changed), or a help request that also names a command;
//  - read_worker_error_file throwing at all (it never throws for what a file holds), or keeping
//    more of the file than its bounds say (text past 4 KiB, a message or traceback longer than
//    the file), or calling a file whose JSON is deeper than the bound well formed.
// Input: byte 0 picks the mode. Bit 7 clear: the rest is '\n'-separated tokens; a token starting
// with '\x01' is an environment variable NAME=VALUE instead of an argument. Bit 7 set: the rest is
// an error file's text, written to a file and read back.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/error.h"
#include "launch/launch_flags.h"
#include "net/fuzz/fuzz_util.h"
#include "net/worker_error_file.h"

namespace {

void check_flags(std::string_view text) {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view token = text.substr(start, end - start);
    if (!token.empty() && token.front() == '\x01') {
      const size_t eq = token.find('=');
      if (eq != std::string_view::npos) env[std::string(token.substr(1, eq - 1))] = std::string(token.substr(eq + 1));
    } else {
      argv.emplace_back(token);
    }
    start = end + 1;
  }
  const dagsim::launch::EnvLookup lookup = [&](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  dagsim::launch::ParsedLaunch parsed;
  try {
    parsed = dagsim::launch::parse_launch_flags(argv, lookup);
  } catch (const dagsim::Error& e) {
    if (e.code() != dagsim::ErrorCode::invalid_argument) dagsim::net::fuzz::fail("another error than invalid_argument", e.what());
    return;
  }
  const std::vector<std::string>& command = parsed.args.command;
  if (parsed.help) {
    DAGSIM_FUZZ_CHECK(command.empty());
    return;
  }
  DAGSIM_FUZZ_CHECK(command.size() <= argv.size());
  const size_t first = argv.size() - command.size();
  for (size_t i = 0; i < command.size(); ++i) DAGSIM_FUZZ_CHECK(command[i] == argv[first + i]);
}

void check_error_file(std::string_view text) {
  static const std::string path = [] {
    char name[] = "/tmp/dagsim_launch_input_fuzz_XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) dagsim::net::fuzz::fail("cannot make a temporary file");
    ::close(fd);
    return std::string(name);
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) dagsim::net::fuzz::fail("cannot write the temporary file");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  dagsim::net::WorkerErrorFile read;
  try {
    read = dagsim::net::read_worker_error_file(path);
  } catch (const std::exception& e) {
    dagsim::net::fuzz::fail("read_worker_error_file threw", e.what());
  }
  DAGSIM_FUZZ_CHECK(read.exists);
  DAGSIM_FUZZ_CHECK(read.text.size() <= 4096);
  DAGSIM_FUZZ_CHECK(read.message.size() <= text.size());
  DAGSIM_FUZZ_CHECK(read.traceback.size() <= text.size());
  // Deeper than the bound: 9 opening brackets in a row before any closing one cannot be accepted.
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  if (deepest > dagsim::net::kWorkerErrorFileDepth) DAGSIM_FUZZ_CHECK(!read.problem.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 0x80) != 0) {
    check_error_file(text);
  } else {
    check_flags(text);
  }
  return 0;
}
