// The root-cause report (root_cause.h) and the error file it reads (net/worker_error_file.h):
// torchrun's fields in torchrun's layout, the first observed failure as the root, and a worker's
// file read as the untrusted input it is (bounded in size and nesting, a FIFO never waited on,
// control characters escaped).
#include "launch/root_cause.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dagsim::launch {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dagsim-root-cause-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

// What PyTorch 1.13's @record writes (ErrorHandler.record_exception).
std::string recorded(const std::string& message, const std::string& callstack, const std::string& timestamp) {
  return R"({"message": {"message": ")" + message + R"(", "extraInfo": {"py_callstack": ")" + callstack +
         R"(", "timestamp": ")" + timestamp + R"("}}})";
}

net::WorkerFailureRecord failure(uint32_t rank, int exit_code, int signal, const std::string& error_file) {
  net::WorkerFailureRecord f;
  f.global_rank = rank;
  f.local_rank = rank % 2;
  f.pid = 1000 + static_cast<pid_t>(rank);
  f.exit_code = exit_code;
  f.signal = signal;
  f.seen = std::chrono::system_clock::from_time_t(2'000'000'000);
  if (!error_file.empty()) {
    f.error = net::read_worker_error_file(error_file);
    if (f.error.exists) f.error_file = error_file;
  }
  return f;
}

TEST(RootCause, HasTorchrunsFieldsAndTheFirstObservedFailureIsTheRoot) {
  TempDir dir;
  const std::string early = dir.write("early.json", recorded("ValueError: bad batch", "Traceback (most recent call last):\\n  File \\\"t.py\\\", line 3, in main\\nValueError: bad batch", "1999999990"));
  const std::string late = dir.write("late.json", recorded("RuntimeError: peer gone", "Traceback:\\nRuntimeError: peer gone", "1999999999"));
  // Seen first, but its worker wrote its error later: the root is the earlier error file's.
  const std::string report = format_root_cause("train.py", "node1", {failure(2, 1, 0, late), failure(3, 1, 0, early), failure(0, -1, 9, "")});
  const size_t root = report.find("Root Cause (first observed failure):\n[1]:\n");
  ASSERT_NE(root, std::string::npos) << report;
  EXPECT_EQ(report.rfind("====", 0), 0u) << report;
  EXPECT_NE(report.find("\ntrain.py FAILED\n"), std::string::npos) << report;
  const std::string tail = report.substr(root);
  EXPECT_NE(tail.find("  host      : node1\n"), std::string::npos) << tail;
  EXPECT_NE(tail.find("  rank      : 3 (local_rank: 1)\n"), std::string::npos) << tail;
  EXPECT_NE(tail.find("  exitcode  : 1 (pid: 1003)\n"), std::string::npos) << tail;
  EXPECT_NE(tail.find("  error_file: " + early + "\n"), std::string::npos) << tail;
  EXPECT_NE(tail.find("  traceback : Traceback (most recent call last):\n    File \"t.py\", line 3, in main\n  ValueError: bad batch\n"),
            std::string::npos)
      << tail;
  EXPECT_NE(tail.find("  time      : "), std::string::npos) << tail;
  // The others: a signal named as torchrun names it, a worker without an error file.
  const std::string others = report.substr(0, root);
  EXPECT_NE(others.find("  exitcode  : -9 (SIGKILL) (pid: 1000)\n"), std::string::npos) << others;
  EXPECT_NE(others.find("  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 1000\n"), std::string::npos) << others;
  EXPECT_NE(others.find("  rank      : 2 (local_rank: 0)\n"), std::string::npos) << others;
}

TEST(RootCause, AWorkersFileIsUntrustedInput) {
  TempDir dir;
  // Control characters from the worker never reach the terminal raw.
  const std::string hostile = dir.write("hostile.json", recorded("x", "Traceback:\\u001b[2J\\u0007boom", "1"));
  const std::string report = format_root_cause("t.py", "h", {failure(0, 1, 0, hostile)});
  EXPECT_EQ(report.find('\x1b'), std::string::npos) << report;
  EXPECT_EQ(report.find('\a'), std::string::npos) << report;
  EXPECT_NE(report.find("\\u001b[2J"), std::string::npos) << report;
  // Nested past the bound: refused while parsing, said in place of the traceback.
  const std::string deep = dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  const net::WorkerErrorFile d = net::read_worker_error_file(deep);
  EXPECT_TRUE(d.exists);
  EXPECT_NE(d.problem.find("nested deeper than 8"), std::string::npos) << d.problem;
  EXPECT_NE(format_root_cause("t.py", "h", {failure(0, 1, 0, deep)}).find("(the error file is not torchelastic's: nested deeper"),
            std::string::npos);
  // Larger than the bound: refused by its size, unread.
  const std::string big = dir.write("big.json", std::string(net::kWorkerErrorFileMax + 1, ' '));
  EXPECT_NE(net::read_worker_error_file(big).problem.find("larger than"), std::string::npos) << net::read_worker_error_file(big).problem;
  // A FIFO is refused at once, never waited on.
  const std::string fifo = (dir.path / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(net::read_worker_error_file(fifo).problem.find("not a regular file"), std::string::npos);
  // A field of the wrong type is not taken; text that is not JSON is kept to show.
  EXPECT_EQ(net::read_worker_error_file(dir.write("wrong.json", R"({"message": {"message": 3, "extraInfo": {"py_callstack": []}}})")).traceback, "");
  const net::WorkerErrorFile text = net::read_worker_error_file(dir.write("text.json", "plain words"));
  EXPECT_EQ(text.problem, "not JSON");
  EXPECT_EQ(text.text, "plain words");
  EXPECT_FALSE(net::read_worker_error_file((dir.path / "absent.json").string()).exists);
  // A long traceback keeps its last lines (the exception is the last) and says what it left out.
  std::string stack;
  for (int i = 0; i < 500; ++i) stack += "  frame " + std::to_string(i) + "\\n";
  const std::string lengthy = dir.write("long.json", recorded("E", stack + "ValueError: last", "1"));
  const std::string cut = format_root_cause("t.py", "h", {failure(0, 1, 0, lengthy)});
  EXPECT_NE(cut.find("(301 earlier lines not shown)"), std::string::npos) << cut.substr(0, 400);
  EXPECT_NE(cut.find("  ValueError: last\n"), std::string::npos);
}

}  // namespace
}  // namespace dagsim::launch
