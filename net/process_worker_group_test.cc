// ProcessWorkerGroup (process_worker_group.h) with real processes: torchrun's log layout, the
// error file a failed worker writes quoted in the group's failure (PyTorch's run_sad_function:
// the failure matches the error file), and --tee's prefixed copies on the agent's own output.
#include "net/process_worker_group.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/base/error.h"
#include "net/tcpstore/store_host.h"

namespace dagsim::net {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dagsim-group-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// One agent of one round with `n` workers of role "trainer".
elastic::WorkerGroupSpec spec_of(uint32_t n) {
  elastic::WorkerGroupSpec spec;
  spec.info = {0, 1, 4};
  spec.round.role = "trainer";
  spec.round.run_id = "job";
  spec.round.local_world_size = n;
  spec.round.master_addr = "localhost";
  spec.round.master_port = 29500;
  const std::vector<elastic::AgentRoleInfo> agents = {{"trainer", 0, n}};
  spec.workers = elastic::assign_worker_ranks(agents, 0);
  return spec;
}

// Polls the group on a node fiber until it leaves HEALTHY (a minute at most), then stops it.
elastic::WorkerGroupStatus settle(const ProcessWorkerConfig& config, const elastic::WorkerGroupSpec& spec,
                                  std::vector<elastic::Environment>* environments = nullptr) {
  tcpstore::StoreHost host("agent");
  return host.run([&] {
    ProcessWorkerGroup group(host.clock(), config, spec);
    if (environments != nullptr) *environments = group.environments();
    elastic::WorkerGroupStatus status = group.poll();
    const runtime::TimePoint until = host.clock().now() + 60s;
    while (status.state == elastic::WorkerState::healthy && host.clock().now() < until) {
      host.clock().sleep(5ms);
      status = group.poll();
    }
    group.stop();
    return status;
  });
}

// Workers running `script` under sh, logging under `dir` in a run folder of job "job".
ProcessWorkerConfig shell_config(const TempDir& dir, const std::string& script) {
  ProcessWorkerConfig config;
  config.argv = {"sh", "-c", script};
  config.agent_env = {{"PATH", "/usr/bin:/bin"}};
  config.run_log_dir = make_run_log_dir(dir.path.string(), "job");
  return config;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ProcessWorkerGroup, TheRunFolderIsAlwaysInsideTheLogFolder) {
  // The run id is one path component (issue 49: "--rdzv_id ../../x" wrote above the log folder).
  TempDir dir;
  const fs::path logs = dir.path / "logs";
  for (const std::string id : {"../../x", "/tmp/x", "a/b", ""}) {
    try {
      make_run_log_dir(logs.string(), id);
      ADD_FAILURE() << "the run id " << id << " made a folder";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("cannot name a folder"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(logs)) << "a refused id made the log folder";
  std::vector<fs::path> made;
  for (const std::string id : {"..", ".", "job\nx"}) made.push_back(make_run_log_dir(logs.string(), id));
  for (const fs::path& folder : made) {
    EXPECT_EQ(fs::canonical(folder).parent_path(), fs::canonical(logs)) << folder;
    EXPECT_TRUE(fs::is_directory(folder));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1) << "something was made beside the log folder";
}

TEST(ProcessWorkerGroup, AFailedWorkersErrorFileIsQuotedInTheFailureAndLogsAreInTorchrunsLayout) {
  TempDir dir;
  // Worker 1 writes torchelastic's error file (as @record does) and exits 1; worker 0 succeeds.
  // Worker 1 fails only once worker 0 has written its lines: the group stops its other workers on
  // a failure, and on a busy machine worker 0 might not have run yet.
  const std::string written = (dir.path / "worker0_wrote").string();
  ProcessWorkerConfig config = shell_config(
      dir, "echo out$LOCAL_RANK; echo err$LOCAL_RANK >&2; if [ $LOCAL_RANK = 0 ]; then : > " + written + "; fi; "
           "if [ $LOCAL_RANK = 1 ]; then while [ ! -e " + written + " ]; do sleep 0.01; done; "
           "printf '{\"message\": {\"message\": \"ValueError: bad batch\", \"extraInfo\": {}}}' > $TORCHELASTIC_ERROR_FILE; "
           "exit 1; fi");
  config.redirects = parse_std_streams("--redirects", "3");
  std::vector<elastic::Environment> environments;
  const elastic::WorkerGroupStatus status = settle(config, spec_of(2), &environments);
  ASSERT_EQ(status.state, elastic::WorkerState::failed);
  ASSERT_TRUE(status.failure.has_value());
  const std::string what = status.failure->what();
  EXPECT_NE(what.find("worker 1 (rank 1) of round 4 exited with code 1: ValueError: bad batch"), std::string::npos) << what;
  const fs::path attempt = fs::path(config.run_log_dir) / "attempt_0";
  EXPECT_EQ(environments[1].at("TORCHELASTIC_ERROR_FILE"), (attempt / "1" / "error.json").string());
  EXPECT_EQ(read_file(attempt / "0" / "stdout.log"), "out0\n");
  EXPECT_EQ(read_file(attempt / "1" / "stderr.log"), "err1\n");
  EXPECT_EQ(fs::path(config.run_log_dir).filename().string().rfind("job_", 0), 0u);
}

TEST(ProcessWorkerGroup, AnErrorFileThatIsNotTorchelasticsJsonIsQuotedAsText) {
  TempDir dir;
  const ProcessWorkerConfig config = shell_config(dir, "printf 'plain words\\nand a second line' > $TORCHELASTIC_ERROR_FILE; exit 3");
  const elastic::WorkerGroupStatus status = settle(config, spec_of(1));
  ASSERT_TRUE(status.failure.has_value());
  EXPECT_NE(std::string(status.failure->what()).find("exited with code 3: \"plain words\\nand a second line\""), std::string::npos)
      << status.failure->what();
}

TEST(ProcessWorkerGroup, TeeCopiesEachLineWithTorchrunsPrefix) {
  TempDir dir;
  ProcessWorkerConfig config = shell_config(dir, "echo hello from $LOCAL_RANK; printf 'no newline'");
  config.tee = parse_std_streams("--tee", "0:1");
  ::testing::internal::CaptureStdout();
  const elastic::WorkerGroupStatus status = settle(config, spec_of(2));
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status.state, elastic::WorkerState::succeeded);
  EXPECT_NE(out.find("[trainer0]:hello from 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[trainer0]:no newline\n"), std::string::npos) << out;
  // Local rank 1 is neither teed nor redirected: its output is the agent's own, unprefixed.
  EXPECT_EQ(out.find("[trainer1]:"), std::string::npos) << "only local rank 0 is teed: " << out;
  EXPECT_NE(out.find("hello from 1\n"), std::string::npos) << out;
}

TEST(ProcessWorkerGroup, TeePrintsEachLineOnceWhenAGroupRestartsInTheSameAttempt) {
  // A restart for waiting nodes keeps the restart count, so the second group's workers append to
  // the first group's files: the tee must copy only what the second group wrote (issue 50: the
  // first group's lines came again, same pid, same time).
  TempDir dir;
  ProcessWorkerConfig config = shell_config(dir, "echo started by pid $$");
  config.tee = parse_std_streams("--tee", "1");
  ::testing::internal::CaptureStdout();
  const elastic::WorkerGroupStatus first = settle(config, spec_of(1));
  const elastic::WorkerGroupStatus second = settle(config, spec_of(1));
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(first.state, elastic::WorkerState::succeeded);
  EXPECT_EQ(second.state, elastic::WorkerState::succeeded);
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u) << "each group's one line, once: " << out;
  EXPECT_NE(lines[0], lines[1]) << "the second group printed the first's line: " << out;
  EXPECT_EQ(read_file(fs::path(config.run_log_dir) / "attempt_0" / "0" / "stdout.log"), lines[0].substr(11) + "\n" + lines[1].substr(11) + "\n")
      << "the log keeps both groups' lines";
}

}  // namespace
}  // namespace dagsim::net
