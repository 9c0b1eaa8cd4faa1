// What the job runner reads while a job runs (job_triggers.h, job_proc.h): lines of files the job
// may write to (over-long lines, '\r' progress bars, a FIFO or a link in a file's place), the run's
// process trees without reading the whole host's /proc, a paused pid's identity, the store's port.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_triggers.h"

namespace dagsim::scenarios::job {
namespace {

namespace fs = std::filesystem;

struct Dir {
  std::string path;
  Dir() {
    std::string p = (fs::temp_directory_path() / "job-triggers-test-XXXXXX").string();
    path = ::mkdtemp(p.data());
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

std::vector<std::string> drain(LineTail& tail) {
  std::vector<std::string> lines;
  while (tail.poll([&](const std::string& l) { lines.push_back(l); }) > 0) {
  }
  return lines;
}

// Runs f on a thread; a call that has not returned in 10 s is a hang (the test exits at once,
// since the thread cannot be joined).
template <typename F>
void must_return(const char* what, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    std::fprintf(stderr, "%s blocked for 10 s\n", what);
    std::_Exit(1);
  }
  done.get();
}

TEST(LineTail, AnOverLongLineIsItsHeadOnceAndItsTailIsNoLine) {
  Dir d;
  const std::string path = d.path + "/agent0.0.log";
  append(path, "first\n");
  LineTail tail(path);
  EXPECT_EQ(drain(tail), std::vector<std::string>{"first"});
  // A 3 MiB line written in pieces, polled between them.
  const std::string mib(size_t{1} << 20, 'x');
  append(path, mib + "y");
  std::vector<std::string> lines = drain(tail);
  ASSERT_EQ(lines.size(), 1u);  // its head, as soon as it is over the bound
  EXPECT_EQ(lines[0], mib);
  append(path, mib);
  EXPECT_TRUE(drain(tail).empty());
  append(path, mib + "tail of the long line\nstep 5 rank 0\n");
  EXPECT_EQ(drain(tail), std::vector<std::string>{"step 5 rank 0"});
}

TEST(LineTail, ACarriageReturnEndsALine) {
  Dir d;
  const std::string path = d.path + "/log";
  append(path, " 10%|#  |\r 20%|## |\r 30%|###|\r\nstep 3\r\nstep 4\nno end yet");
  LineTail tail(path);
  EXPECT_EQ(drain(tail), (std::vector<std::string>{" 10%|#  |", " 20%|## |", " 30%|###|", "step 3", "step 4"}));
  std::vector<std::string> last;
  tail.finish([&](const std::string& l) { last.push_back(l); });
  EXPECT_EQ(last, std::vector<std::string>{"no end yet"});
}

TEST(LineTail, ATqdmBarOfMegabytesGivesTriggersShortLines) {
  Dir d;
  const std::string path = d.path + "/log";
  std::string bar;
  for (int i = 0; bar.size() < (size_t{3} << 20); ++i) bar += "epoch 1: " + std::to_string(i % 100) + "%|##########| " + std::to_string(i) + "/100000 [00:01<00:00]\r";
  append(path, bar + std::string(size_t{3} << 20, 'z') + "\nstep 7 done\n");
  LineTail tail(path, kMaxTriggerLineBytes);
  const std::regex step("^step 7 (.|\\n)*done$");
  size_t lines = 0;
  bool matched = false;
  tail.poll([&](const std::string& l) {
    ++lines;
    ASSERT_LE(l.size(), kMaxTriggerLineBytes);
    matched = matched || std::regex_search(l, step);
  });
  while (tail.poll([&](const std::string& l) {
    ++lines;
    ASSERT_LE(l.size(), kMaxTriggerLineBytes);
    matched = matched || std::regex_search(l, step);
  }) > 0) {
  }
  EXPECT_TRUE(matched);
  EXPECT_GT(lines, 10000u);
}

TEST(RunFolderFiles, AFifoOrALinkIsNeverWaitedOnNorRead) {
  Dir d;
  const std::string fifo = d.path + "/agent0.0.events.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  append(d.path + "/real", "secret\n");
  fs::create_symlink(d.path + "/real", d.path + "/link");
  must_return("reading a FIFO", [&] {
    LineTail tail(fifo);
    EXPECT_EQ(tail.poll([](const std::string&) { ADD_FAILURE(); }), 0u);
    EXPECT_FALSE(for_each_line(fifo, [](const std::string&) { ADD_FAILURE(); }));
    EXPECT_FALSE(read_head(fifo, 64).has_value());
    EXPECT_EQ(open_regular(fifo), -1);
  });
  EXPECT_FALSE(read_head(d.path + "/link", 64).has_value());
  EXPECT_FALSE(for_each_line(d.path + "/link", [](const std::string&) { ADD_FAILURE(); }));
  EXPECT_EQ(read_head(d.path + "/real", 64), std::optional<std::string>("secret\n"));
  std::vector<std::string> lines;
  EXPECT_TRUE(for_each_line(d.path + "/real", [&](const std::string& l) { lines.push_back(l); }));
  EXPECT_EQ(lines, std::vector<std::string>{"secret"});
}

// A process group of `sh` with two `sleep`s below it, its environment marked with `token`.
pid_t marked_tree(const std::string& token) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::setenv(kMarkerVariable, token.c_str(), 1);
    ::setenv("LOCAL_RANK", "1", 1);
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & sleep 30 & wait", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

void end_tree(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(RunProcesses, TheTreesOfTheRootsOnly) {
  const std::string token = random_token();
  const pid_t a = marked_tree(token);
  const pid_t b = marked_tree(token);  // marked, but not below the roots
  std::vector<MarkedProcess> found;
  for (int i = 0; i < 100 && found.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    found = marked_descendants({a}, token);
  }
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].pid, a);
  for (const MarkedProcess& p : found) {
    EXPECT_EQ(p.local_rank, std::optional<uint32_t>(1));
    if (p.pid != a) {
      EXPECT_EQ(p.ppid, a);
      EXPECT_NE(p.cmdline.find("sleep 30"), std::string::npos) << p.cmdline;
    }
  }
  EXPECT_EQ(descendants_of(a).size(), 2u);
  EXPECT_TRUE(marked_descendants({a}, "another run").empty());
  EXPECT_EQ(marked_processes(token).size(), 6u);  // the final sweep's: both trees
  // A pid is the process it was only with the same start time and the marker.
  const std::optional<uint64_t> start = start_time_of(a);
  ASSERT_TRUE(start.has_value());
  EXPECT_TRUE(same_marked_process(a, *start, token));
  EXPECT_FALSE(same_marked_process(a, *start + 1, token));
  EXPECT_FALSE(same_marked_process(a, *start, "another run"));
  EXPECT_FALSE(same_marked_process(::getpid(), *start_time_of(::getpid()), token));  // not marked
  end_tree(a);
  end_tree(b);
  EXPECT_FALSE(start_time_of(a).has_value());
  EXPECT_FALSE(same_marked_process(a, *start, token));
}

TEST(StorePort, BelowTheEphemeralRangeAndFree) {
  long low = 0, high = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  const uint16_t port = port_below_ephemeral_range();
  if (low > 1040) {
    ASSERT_NE(port, 0);
    EXPECT_LT(port, low);
    EXPECT_TRUE(port_free(port));
  }
}

}  // namespace
}  // namespace dagsim::scenarios::job
