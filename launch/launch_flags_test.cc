// parse_launch_flags (launch_flags.h) against torchrun 1.13's argparse: each case is what
// torch.distributed.run.get_args_parser().parse_args(argv) gives for the same argv (checked by hand
// with /usr/bin/python3, see conformance/interop/launch_flags_table.py for the side-by-side run).
#include "launch/launch_flags.h"

#include <gtest/gtest.h>

#include <map>

#include "core/base/error.h"

namespace dagsim::launch {
namespace {

using Env = std::map<std::string, std::string>;

ParsedLaunch parse(const std::vector<std::string>& argv, const Env& env = {}) {
  return parse_launch_flags(argv, [env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

std::string refusal(const std::vector<std::string>& argv, const Env& env = {}) {
  try {
    parse(argv, env);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.detail();
  }
  return "(accepted)";
}

TEST(LaunchFlags, TorchrunDefaultsWhenNothingIsGiven) {
  const LaunchArgs a = parse({"train.py"}).args;
  EXPECT_EQ(a.nnodes, "1:1");
  EXPECT_EQ(a.nproc_per_node, "1");
  EXPECT_EQ(a.rdzv_backend, "static");
  EXPECT_EQ(a.rdzv_endpoint, "");
  EXPECT_EQ(a.rdzv_id, "none");
  EXPECT_EQ(a.max_restarts, 0u);
  EXPECT_EQ(a.monitor_interval_s, 5);
  EXPECT_EQ(a.start_method, "spawn");
  EXPECT_EQ(a.role, "default");
  EXPECT_EQ(a.node_rank, 0u);
  EXPECT_EQ(a.master_addr, "127.0.0.1");
  EXPECT_EQ(a.master_port, 29500u);
  EXPECT_EQ(a.python, "python3");
  EXPECT_FALSE(a.standalone || a.module || a.no_python || a.run_path);
  EXPECT_EQ(a.command, (std::vector<std::string>{"train.py"}));
}

TEST(LaunchFlags, EveryFlagInEverySpellingAndForm) {
  const std::vector<std::string> argv = {
      "--nnodes=2", "--nproc-per-node", "3", "--rdzv_backend", "c10d", "--rdzv-endpoint=h:1", "--rdzv_id", "j",
      "--rdzv-conf", "join_timeout=5", "--max-restarts", "2", "--monitor_interval=0.5", "--start-method", "fork",
      "--role", "trainer", "--log-dir", "/tmp/l", "-r3", "-t", "1", "--node-rank", "1", "--master-addr", "10.0.0.1",
      "--master_port=1234", "--events", "e.json", "--stop-grace", "2", "--python", "/usr/bin/python3", "--standalone",
      "--run-path", "train.py"};
  const LaunchArgs a = parse(argv).args;
  EXPECT_EQ(a.nnodes, "2");
  EXPECT_EQ(a.nproc_per_node, "3");
  EXPECT_EQ(a.rdzv_backend, "c10d");
  EXPECT_EQ(a.rdzv_endpoint, "h:1");
  EXPECT_EQ(a.rdzv_id, "j");
  EXPECT_EQ(a.rdzv_conf, "join_timeout=5");
  EXPECT_EQ(a.max_restarts, 2u);
  EXPECT_EQ(a.monitor_interval_s, 0.5);
  EXPECT_EQ(a.start_method, "fork");
  EXPECT_EQ(a.role, "trainer");
  EXPECT_EQ(a.log_dir, "/tmp/l");
  EXPECT_EQ(a.redirects, "3");
  EXPECT_EQ(a.tee, "1");
  EXPECT_EQ(a.node_rank, 1u);
  EXPECT_EQ(a.master_addr, "10.0.0.1");
  EXPECT_EQ(a.master_port, 1234u);
  EXPECT_EQ(a.events_path, "e.json");
  EXPECT_EQ(a.stop_grace_s, 2);
  EXPECT_EQ(a.python, "/usr/bin/python3");
  EXPECT_TRUE(a.standalone);
  EXPECT_TRUE(a.run_path);
  EXPECT_EQ(parse({"-m", "pkg.train"}).args.module, true);
  EXPECT_EQ(parse({"--module", "pkg.train"}).args.module, true);
  EXPECT_EQ(parse({"--no_python", "prog"}).args.no_python, true);
}

TEST(LaunchFlags, TheScriptAndEverythingAfterItAreTheWorkers) {
  EXPECT_EQ(parse({"--nproc_per_node=2", "t.py", "--nnodes", "3", "--", "-x"}).args.command,
            (std::vector<std::string>{"t.py", "--nnodes", "3", "--", "-x"}));
  EXPECT_EQ(parse({"t.py", "--nnodes", "3"}).args.nnodes, "1:1");
  // `--` ends the options; the token after it is the script even when it looks like an option.
  EXPECT_EQ(parse({"--", "-t.py", "-a"}).args.command, (std::vector<std::string>{"-t.py", "-a"}));
  EXPECT_EQ(parse({"--standalone", "--", "--", "x"}).args.command, (std::vector<std::string>{"--", "x"}));
  // argparse takes a negative number for a positional.
  EXPECT_EQ(parse({"-5"}).args.command, (std::vector<std::string>{"-5"}));
  EXPECT_NE(refusal({"--nproc_per_node", "2"}).find("required: SCRIPT"), std::string::npos);
  EXPECT_NE(refusal({"--"}).find("required: SCRIPT"), std::string::npos);
}

TEST(LaunchFlags, UnknownOptionsAreRefusedByNameNeverPassedOn) {
  for (const std::string unknown : {"--local_addr", "--local-addr"}) {
    const std::string why = refusal({unknown, "x", "t.py"});
    EXPECT_NE(why.find(unknown), std::string::npos) << why;
    EXPECT_NE(why.find("torchrun 2.x"), std::string::npos) << why;
  }
  EXPECT_NE(refusal({"--nproc_per_nod3", "2", "t.py"}).find("did you mean --nproc_per_node?"), std::string::npos);
  EXPECT_NE(refusal({"--mastr_port", "2", "t.py"}).find("did you mean --master_port?"), std::string::npos);
  EXPECT_NE(refusal({"--use_env", "t.py"}).find("LOCAL_RANK"), std::string::npos);
  const std::string far = refusal({"--frobnicate", "t.py"});
  EXPECT_NE(far.find("\"--frobnicate\""), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
  EXPECT_NE(refusal({"-x", "t.py"}).find("\"-x\""), std::string::npos);
  EXPECT_NE(refusal({"-nnodes", "2", "t.py"}).find("\"-nnodes\""), std::string::npos);
}

TEST(LaunchFlags, UniquePrefixesStandForTheirFlagAmbiguousOnesAreRefused) {
  EXPECT_EQ(parse({"--nproc", "2", "t.py"}).args.nproc_per_node, "2");  // both spellings, one flag
  EXPECT_EQ(parse({"--max", "1", "t.py"}).args.max_restarts, 1u);
  EXPECT_TRUE(parse({"--no_py", "t.py"}).args.no_python);
  EXPECT_EQ(parse({"--node=1", "--nnodes", "2", "t.py"}).args.node_rank, 1u);
  EXPECT_TRUE(parse({"--he"}).help);
  const std::string master = refusal({"--master", "a", "t.py"});
  EXPECT_NE(master.find("ambiguous option \"--master\" could match --master_addr"), std::string::npos) << master;
  EXPECT_NE(master.find("--master_port"), std::string::npos) << master;
  EXPECT_NE(refusal({"--r", "x", "t.py"}).find("ambiguous"), std::string::npos);
}

// dagsim's own flags do not make a prefix that names one torchrun flag ambiguous.
TEST(LaunchFlags, DagsimsFlagsLeaveTorchrunsPrefixesAsTheyWere) {
  const std::vector<std::string> torchrun = {"--nnodes", "--nproc_per_node", "--rdzv_backend", "--rdzv_endpoint",
                                             "--rdzv_id", "--rdzv_conf", "--standalone", "--max_restarts",
                                             "--monitor_interval", "--start_method", "--role", "--module",
                                             "--no_python", "--run_path", "--log_dir", "--redirects", "--tee",
                                             "--node_rank", "--master_addr", "--master_port"};
  for (const std::string& flag : torchrun) {
    for (size_t n = 3; n <= flag.size(); ++n) {
      const std::string prefix = flag.substr(0, n);
      size_t torchrun_matches = 0;
      for (const std::string& other : torchrun) torchrun_matches += other.starts_with(prefix) ? 1 : 0;
      if (torchrun_matches != 1 && prefix != flag) continue;
      // Unique in torchrun: unique here too (it parses; a switch or a value flag).
      const bool is_switch = flag == "--standalone" || flag == "--module" || flag == "--no_python" || flag == "--run_path";
      std::vector<std::string> argv = {prefix};
      if (!is_switch) argv.push_back(flag == "--start_method" ? "fork" : "1");
      argv.push_back("t.py");
      EXPECT_EQ(refusal(argv).find("ambiguous"), std::string::npos) << prefix;
    }
  }
}

TEST(LaunchFlags, ValuesAreCheckedAsArgparseTypesAndChoicesCheckThem) {
  EXPECT_NE(refusal({"--start_method", "thread", "t.py"}).find("invalid choice"), std::string::npos);
  EXPECT_NE(refusal({"--max_restarts", "x", "t.py"}).find("--max_restarts \"x\": invalid int value"), std::string::npos);
  EXPECT_NE(refusal({"--max_restarts", "-1", "t.py"}).find("--max_restarts"), std::string::npos);
  EXPECT_NE(refusal({"--monitor_interval", "soon", "t.py"}).find("invalid float value"), std::string::npos);
  EXPECT_NE(refusal({"--master_port", "70000", "t.py"}).find("--master_port"), std::string::npos);
  EXPECT_NE(refusal({"--role", "--nnodes", "2", "t.py"}).find("--role: expected one argument"), std::string::npos);
  EXPECT_NE(refusal({"--standalone=1", "t.py"}).find("ignored explicit argument"), std::string::npos);
  EXPECT_NE(refusal({"--python", "", "t.py"}).find("--python"), std::string::npos);
  EXPECT_EQ(parse({"--node_rank", " 1 ", "t.py"}).args.node_rank, 1u);  // int(" 1 ") is 1
}

TEST(LaunchFlags, ShortFlagsTakeAttachedValuesAndCombine) {
  EXPECT_EQ(parse({"-t3", "t.py"}).args.tee, "3");
  EXPECT_EQ(parse({"-t=3", "t.py"}).args.tee, "3");
  EXPECT_EQ(parse({"-r", "0:1,1:2", "t.py"}).args.redirects, "0:1,1:2");
  const LaunchArgs a = parse({"-mt3", "pkg"}).args;
  EXPECT_TRUE(a.module);
  EXPECT_EQ(a.tee, "3");
  // What follows a switch in its token must be short flags, as argparse requires: "-m00" is not
  // the switch then a script "-00" (found by launch_input_fuzz: a token nobody wrote reached the
  // workers).
  EXPECT_NE(refusal({"-m00", "t.py"}).find("-m: ignored explicit argument \"00\""), std::string::npos);
  EXPECT_NE(refusal({"-mx", "t.py"}).find("ignored explicit argument"), std::string::npos);
}

TEST(LaunchFlags, PetVariablesStandForFlagsNotGiven) {
  const Env env = {{"PET_NPROC_PER_NODE", "4"}, {"PET_NNODES", "2"}, {"PET_STANDALONE", "1"}, {"PET_MODULE", "0"},
                   {"PET_NODE_RANK", "1"}, {"PET_MASTER_PORT", "1000"}, {"PET_START_METHOD", "fork"}};
  const ParsedLaunch p = parse({"--nnodes", "3", "t.py"}, env);
  EXPECT_EQ(p.args.nproc_per_node, "4");
  EXPECT_EQ(p.args.nnodes, "3");  // the flag wins
  EXPECT_TRUE(p.args.standalone);
  EXPECT_FALSE(p.args.module);
  EXPECT_EQ(p.args.node_rank, 1u);
  EXPECT_EQ(p.args.master_port, 1000u);
  EXPECT_EQ(p.args.start_method, "fork");
  EXPECT_TRUE(p.given.nnodes);
  EXPECT_FALSE(p.given.rdzv_backend);
  EXPECT_TRUE(parse({"t.py"}, {{"PET_RDZV_BACKEND", "c10d"}}).given.rdzv_backend);
  // A bad variable is refused naming it, unless its flag was given (argparse converts a default
  // only when it is used).
  EXPECT_NE(refusal({"t.py"}, {{"PET_MAX_RESTARTS", "many"}}).find("PET_MAX_RESTARTS"), std::string::npos);
  EXPECT_NE(refusal({"t.py"}, {{"PET_STANDALONE", "yes"}}).find("PET_STANDALONE"), std::string::npos);
  EXPECT_EQ(parse({"--max_restarts", "1", "t.py"}, {{"PET_MAX_RESTARTS", "many"}}).args.max_restarts, 1u);
}

TEST(LaunchFlags, ThePythonComesFromTheFlagThenDagsimPythonThenPythonExec) {
  EXPECT_EQ(parse({"t.py"}, {{"PYTHON_EXEC", "/a"}}).args.python, "/a");
  EXPECT_EQ(parse({"t.py"}, {{"PYTHON_EXEC", "/a"}, {"DAGSIM_PYTHON", "/b"}}).args.python, "/b");
  EXPECT_EQ(parse({"--python", "/c", "t.py"}, {{"PYTHON_EXEC", "/a"}, {"DAGSIM_PYTHON", "/b"}}).args.python, "/c");
  EXPECT_NE(refusal({"t.py"}, {{"DAGSIM_PYTHON", ""}}).find("DAGSIM_PYTHON"), std::string::npos);
}

TEST(LaunchFlags, HelpNamesScriptArgsAndEveryFlagWithItsVariableAndDefault) {
  EXPECT_TRUE(parse({"--help", "--bogus"}).help);
  EXPECT_TRUE(parse({"--nnodes", "2", "-h"}).help);
  EXPECT_FALSE(parse({"t.py", "--help"}).help);  // the script's own --help
  const std::string help = launch_help();
  EXPECT_NE(help.find("usage: dagsim launch [OPTIONS] SCRIPT [ARGS...]"), std::string::npos);
  for (const std::string& spelling : launch_flag_spellings()) EXPECT_NE(help.find(spelling), std::string::npos) << spelling;
  for (const char* env : {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_MASTER_PORT", "DAGSIM_PYTHON", "PYTHON_EXEC"}) {
    EXPECT_NE(help.find(env), std::string::npos) << env;
  }
  EXPECT_NE(help.find("default: 29500"), std::string::npos);
  EXPECT_NE(help.find("default: static"), std::string::npos);
}

}  // namespace
}  // namespace dagsim::launch
