// `dagsim launch` given a torchrun 1.13 line (issue 50 item 1), on real processes with shell
// workers, so no torch is needed: torchrun's default static backend on one host and on two agents,
// flags that must never reach a worker, and the interpreter named when a worker lacks a module.
// conformance/interop/launch_flags_table.py runs the same lines under torchrun itself.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "launch/launch_test_util.h"

namespace dagsim::cli {
namespace {

class LaunchTorchrunLine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
    // A worker writing what the static backend decides: its ranks, its master, and AGENT (its
    // agent's own variable, to tell which agent started it).
    std::ofstream(dir_ / "worker.sh") << "#!/bin/sh\n"
                                         "for v in RANK GROUP_RANK WORLD_SIZE MASTER_ADDR MASTER_PORT "
                                         "TORCHELASTIC_USE_AGENT_STORE AGENT; do eval \"echo $v=\\$$v\"; done "
                                         "> \"$1/rank_$RANK\"\n";
    fs::permissions(dir_ / "worker.sh", fs::perms::owner_all);
  }
  // `dagsim launch FLAGS --no_python worker.sh OUT` in the shell, after ENV assignments.
  std::string line(const std::string& env, const std::string& flags) const {
    return env + " " + DAGSIM_BINARY + " launch --monitor_interval 0.2 " + flags + " --no_python " +
           (dir_ / "worker.sh").string() + " " + (dir_ / "out").string();
  }
  std::map<int, std::map<std::string, std::string>> ranks() const {
    std::map<int, std::map<std::string, std::string>> out;
    for (const auto& entry : fs::directory_iterator(dir_ / "out")) {
      std::istringstream lines(slurp(entry.path()));
      std::map<std::string, std::string> vars;
      for (std::string l; std::getline(lines, l);) vars[l.substr(0, l.find('='))] = l.substr(l.find('=') + 1);
      out[std::stoi(entry.path().filename().string().substr(5))] = vars;
    }
    return out;
  }
  fs::path dir_;
};

// torchrun's most common line: `--nproc_per_node 2 train.py`, the static backend on 127.0.0.1:P.
TEST_F(LaunchTorchrunLine, StaticIsTheDefaultOnOneHost) {
  const std::string port = std::to_string(free_port());
  const Output run = shell(line("", "--nproc_per_node 2 --master_port " + port));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto r = ranks();
  ASSERT_EQ(r.size(), 2u) << run.out;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(r.at(rank).at("WORLD_SIZE"), "2");
    EXPECT_EQ(r.at(rank).at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(r.at(rank).at("MASTER_PORT"), port) << "the workers meet at the agents' store";
    EXPECT_EQ(r.at(rank).at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  }
}

// Two agents, node rank 1 started first: each agent's workers have its node rank as GROUP_RANK.
TEST_F(LaunchTorchrunLine, TwoStaticAgentsTakeTheirNodeRanks) {
  const std::string port = std::to_string(free_port());
  const std::string common = "--nnodes 2 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port " + port;
  const Output run = shell("{ (" + line("AGENT=1", common + " --node_rank 1") + " > " + (dir_ / "one.log").string() +
                           " 2>&1; echo one=$? >> " + (dir_ / "one.log").string() + ") & sleep 0.5; " +
                           line("AGENT=0", common + " --node_rank 0") + "; echo zero=$?; wait; cat " +
                           (dir_ / "one.log").string() + "; }");
  EXPECT_NE(run.out.find("zero=0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("one=0"), std::string::npos) << run.out;
  const auto r = ranks();
  ASSERT_EQ(r.size(), 4u) << run.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(r.at(rank).at("GROUP_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(r.at(rank).at("AGENT"), std::to_string(rank / 2)) << "rank " << rank << " ran under the wrong agent";
    EXPECT_EQ(r.at(rank).at("WORLD_SIZE"), "4");
  }
}

// Two agents given node rank 1 of 3: the one the rendezvous ranks 2 starts no worker, says why and
// closes the job, so the others stop (the store's host after its linger for the missing agent).
TEST_F(LaunchTorchrunLine, TwoAgentsGivenOneNodeRankCloseTheJob) {
  const std::string port = std::to_string(free_port());
  const std::string common = "--nnodes 3 --master_port " + port;
  std::string command = "{ ";
  for (const char* rank : {"1", "1", "0"}) {
    const std::string log = (dir_ / ("agent_" + std::string(rank) + "_" + std::to_string(command.size()) + ".log")).string();
    // Workers that outlast the refusal, so the others see the close while they train (workers that
    // end first leave their agents at the exit barrier, waiting for the refused one, as torchrun's).
    command += "(" + std::string(DAGSIM_BINARY) + " launch --monitor_interval 0.2 " + common + " --node_rank " + rank +
               " --no_python sh -c 'sleep 10' > " + log + " 2>&1; echo exit=$? >> " + log + ") & sleep 0.3; ";
  }
  const Output run = shell(command + "wait; cat " + (dir_ / "agent_*.log").string() + "; }");
  EXPECT_NE(run.out.find("group rank 2, not its --node_rank 1: two agents were given the same --node_rank; the job is closed"),
            std::string::npos)
      << run.out;
  size_t failed = 0;
  for (size_t at = run.out.find("exit=1"); at != std::string::npos; at = run.out.find("exit=1", at + 1)) ++failed;
  EXPECT_EQ(failed, 3u) << run.out;
}

// The lines: a torchrun flag is taken, an unknown one exits 2 by name before anything
// starts (no worker, no log folder), never becoming the worker's command.
TEST_F(LaunchTorchrunLine, UnknownFlagsNeverReachAWorker) {
  const std::string port = std::to_string(free_port());
  const fs::path logs = dir_ / "logs";
  const Output taken = shell(line("", "--start_method spawn --node_rank 0 --master_addr 127.0.0.1 --master_port " + port));
  EXPECT_EQ(taken.exit_code, 0) << taken.out;
  EXPECT_EQ(ranks().size(), 1u);
  fs::remove_all(dir_ / "out");
  fs::create_directories(dir_ / "out");
  for (const std::string flags : {"--local_addr 127.0.0.1", "--start_method thread", "--master 127.0.0.1",
                                   "--nproc_per_nod3 2", "--frobnicate"}) {
    const Output refused = shell(line("", "--log_dir " + logs.string() + " --master_port " + port + " " + flags));
    EXPECT_EQ(refused.exit_code, 2) << flags << ": " << refused.out;
    EXPECT_NE(refused.out.find(flags.substr(0, flags.find(' '))), std::string::npos) << refused.out;
    EXPECT_TRUE(ranks().empty()) << flags << " started a worker";
    EXPECT_FALSE(fs::exists(logs)) << flags << " made the log folder";
  }
}

// A PATH whose python3 lacks torch: the failure names that interpreter's absolute path, the
// missing module, and --python.
TEST_F(LaunchTorchrunLine, AMissingModuleNamesTheInterpreter) {
  fs::create_directories(dir_ / "bin");
  const fs::path fake = dir_ / "bin" / "python3";
  std::ofstream(fake) << "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n";
  fs::permissions(fake, fs::perms::owner_all);
  const std::string path = "PATH=" + (dir_ / "bin").string() + ":$PATH";
  const std::string launch = std::string(DAGSIM_BINARY) + " launch --standalone --monitor_interval 0.2 ";
  const Output redirected = shell(path + " " + launch + "-r 2 train.py");
  EXPECT_EQ(redirected.exit_code, 1) << redirected.out;
  EXPECT_NE(redirected.out.find("workers run " + fake.string()), std::string::npos) << redirected.out;
  EXPECT_NE(redirected.out.find("the workers ran " + fake.string() +
                                " (python3), which lacks a module (ModuleNotFoundError: No module named 'torch')"),
            std::string::npos)
      << redirected.out;
  EXPECT_NE(redirected.out.find("--python PATH"), std::string::npos) << redirected.out;
  // Its stderr not in a file, the failure still names the interpreter.
  const Output plain = shell(path + " " + launch + "train.py");
  EXPECT_EQ(plain.exit_code, 1) << plain.out;
  EXPECT_NE(plain.out.find("the workers ran " + fake.string() + " (python3)"), std::string::npos) << plain.out;
  // --python chooses another.
  const Output chosen = shell(path + " " + launch + "--python /bin/true train.py");
  EXPECT_EQ(chosen.exit_code, 0) << chosen.out;
}

}  // namespace
}  // namespace dagsim::cli
