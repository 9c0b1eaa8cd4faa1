// Tests of LaunchPlan: each of torchrun's flags means what torchrun's does, and each bad value is
// refused naming the flag before anything starts.
#include "launch/launch_plan.h"

#include <gtest/gtest.h>

#include "core/base/printable.h"
#include "core/base/throws_error_test_util.h"

namespace dagsim::launch {
namespace {

using namespace std::chrono_literals;

LaunchArgs c10d(std::string endpoint = "node0:1234") {
  LaunchArgs args;
  args.rdzv_backend = "c10d";
  args.rdzv_endpoint = std::move(endpoint);
  args.rdzv_id = "job1";
  args.command = {"train.py", "--lr", "0.1"};
  return args;
}

std::string refusal(const LaunchArgs& args) {
  try {
    plan_launch(args, 8);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(LaunchPlan, TorchrunsDefaultsAndTheCommandAsTorchrunRunsIt) {
  const LaunchPlan plan = plan_launch(c10d(), 8);
  EXPECT_EQ(plan.settings.run_id, "job1");
  EXPECT_EQ(plan.settings.min_nodes, 1u);
  EXPECT_EQ(plan.settings.max_nodes, 1u);
  EXPECT_EQ(plan.settings.timeout.join, 600s);
  EXPECT_EQ(plan.settings.timeout.last_call, 30s);
  EXPECT_EQ(plan.settings.timeout.close, 30s);
  EXPECT_EQ(plan.target.read_timeout, 60s);
  EXPECT_EQ(plan.params->backend(), "c10d");
  EXPECT_EQ(plan.target.endpoint, (rendezvous::RendezvousEndpoint{"node0", 1234}));
  EXPECT_FALSE(plan.target.is_host.has_value());
  EXPECT_EQ(plan.agent.local_world_size, 1u);
  EXPECT_EQ(plan.agent.max_restarts, 0u);
  EXPECT_EQ(plan.agent.monitor_interval, 5s);
  EXPECT_EQ(plan.agent.role, "default");
  EXPECT_EQ(plan.grace, 30s);
  EXPECT_EQ(plan.argv, (std::vector<std::string>{"python3", "-u", "train.py", "--lr", "0.1"}));
}

TEST(LaunchPlan, NnodesNprocAndTheEndpointsDefaultPorts) {
  LaunchArgs args = c10d("node0");
  args.nnodes = "2:4";
  args.nproc_per_node = "auto";
  LaunchPlan plan = plan_launch(args, 6);
  EXPECT_EQ(plan.settings.min_nodes, 2u);
  EXPECT_EQ(plan.settings.max_nodes, 4u);
  args.nnodes = "2:20";  // run_test.py's test_min_max_nodes_parse: "1", "2:20"
  EXPECT_EQ(plan_launch(args, 6).settings.max_nodes, 20u);
  args.nnodes = "1";
  EXPECT_EQ(plan_launch(args, 6).settings.min_nodes, 1u);
  EXPECT_EQ(plan_launch(args, 6).settings.max_nodes, 1u);
  args.nnodes = "2:4";
  EXPECT_EQ(plan.agent.local_world_size, 6u);
  EXPECT_EQ(plan.target.endpoint.port, 29400) << "torchrun's default c10d port";
  args.rdzv_backend = "etcd-v2";
  args.nproc_per_node = "3";
  plan = plan_launch(args, 6);
  EXPECT_EQ(plan.params->backend(), "etcd-v2");
  EXPECT_EQ(plan.target.endpoint.port, 2379);
  EXPECT_EQ(plan.agent.local_world_size, 3u);
  args.rdzv_endpoint = "[::1]:7000";
  plan = plan_launch(args, 6);
  EXPECT_EQ(plan.target.endpoint, (rendezvous::RendezvousEndpoint{"::1", 7000}));
  // torchrun's empty endpoint: this host, the default port.
  args.rdzv_backend = "c10d";
  args.rdzv_endpoint = "";
  plan = plan_launch(args, 6);
  EXPECT_EQ(plan.target.endpoint, (rendezvous::RendezvousEndpoint{"localhost", 29400}));
}

TEST(LaunchPlan, RdzvConfSetsTimeoutsAndIsHostAndWarnsOfWhatItIgnores) {
  LaunchArgs args = c10d();
  args.rdzv_conf = "join_timeout=20,last_call_timeout=0.5,read_timeout=7,is_host=False,store_type=TCP,"
                   "keep_alive_interval=1,keep_alive_max_attempt=2,timeout=9";
  const LaunchPlan plan = plan_launch(args, 1);
  EXPECT_EQ(plan.settings.timeout.join, 20s);
  EXPECT_EQ(plan.settings.timeout.last_call, 500ms);
  EXPECT_EQ(plan.target.read_timeout, 7s);
  EXPECT_EQ(plan.target.is_host, false);
  EXPECT_EQ(plan.params->get("timeout"), "9") << "passed on, as torchrun passes it to its handler";
  EXPECT_EQ(plan.settings.keep_alive_interval, 1s);
  EXPECT_EQ(plan.settings.keep_alive_max_attempt, 2u);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("\"timeout\""), std::string::npos) << plan.warnings[0];
}

// c10d's store_type file: the endpoint is the file's path (not HOST:PORT), and read_timeout is
// the TCPStore's only (a file store waits up to 300 s, PyTorch's default).
TEST(LaunchPlan, StoreTypeFileTakesTheEndpointAsAPath) {
  LaunchArgs args = c10d("/shared/jobs/job1.store");
  args.rdzv_conf = "store_type=FILE,read_timeout=7";
  const LaunchPlan plan = plan_launch(args, 1);
  EXPECT_TRUE(plan.target.file_store);
  EXPECT_EQ(plan.target.endpoint.host, "/shared/jobs/job1.store");
  EXPECT_EQ(plan.target.read_timeout, 300s);
}

TEST(LaunchPlan, StandaloneHostsAFreshRunOnAFreePort) {
  LaunchArgs args;
  args.standalone = true;
  args.command = {"x.py"};
  const LaunchPlan a = plan_launch(args, 1);
  const LaunchPlan b = plan_launch(args, 1);
  EXPECT_EQ(a.params->backend(), "c10d");
  EXPECT_EQ(a.target.endpoint, (rendezvous::RendezvousEndpoint{"localhost", 0}));
  EXPECT_EQ(a.target.is_host, true);
  EXPECT_EQ(a.settings.run_id.size(), 32u);
  EXPECT_NE(a.settings.run_id, b.settings.run_id);
}

TEST(LaunchPlan, NoPythonAndModuleBuildTheCommandAsTorchrunDoes) {
  LaunchArgs args = c10d();
  args.no_python = true;
  EXPECT_EQ(plan_launch(args, 1).argv, (std::vector<std::string>{"train.py", "--lr", "0.1"}));
  args.no_python = false;
  args.module = true;
  EXPECT_EQ(plan_launch(args, 1).argv, (std::vector<std::string>{"python3", "-u", "-m", "train.py", "--lr", "0.1"}));
  args.no_python = true;
  EXPECT_NE(refusal(args).find("--no_python and --module"), std::string::npos);
}

// torchrun's default: --nnodes N, the store at MASTER_ADDR:MASTER_PORT (or --rdzv_endpoint), which
// node rank 0 serves and where the workers meet (TORCHELASTIC_USE_AGENT_STORE).
TEST(LaunchPlan, TheStaticBackendIsTorchrunsDefault) {
  LaunchArgs args;
  args.command = {"train.py"};
  args.nnodes = "2";
  args.node_rank = 1;
  args.master_addr = "10.0.0.7";
  args.master_port = 1234;
  LaunchPlan plan = plan_launch(args, 1);
  EXPECT_EQ(plan.params->backend(), "static");
  EXPECT_EQ(plan.params->endpoint(), "10.0.0.7:1234");
  EXPECT_EQ(plan.params->get("rank"), "1");
  EXPECT_EQ(plan.target.is_host, false);
  EXPECT_EQ(plan.static_master, (rendezvous::RendezvousEndpoint{"10.0.0.7", 1234}));
  EXPECT_TRUE(plan.agent.use_agent_store);
  EXPECT_TRUE(plan.warnings.empty());
  args.node_rank = 0;
  args.rdzv_endpoint = "store:99";  // an endpoint given wins, as torchrun's get_rdzv_endpoint
  plan = plan_launch(args, 1);
  EXPECT_EQ(plan.target.is_host, true);
  EXPECT_EQ(plan.static_master, (rendezvous::RendezvousEndpoint{"store", 99}));
  // Any other backend ignores the static flags, as torchrun does, with a warning.
  args = c10d();
  args.node_rank = 1;
  plan = plan_launch(args, 1);
  EXPECT_FALSE(plan.static_master);
  EXPECT_FALSE(plan.agent.use_agent_store);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("static backend only"), std::string::npos);
}

TEST(LaunchPlan, PythonAndRunPathChooseTheWorkersCommand) {
  LaunchArgs args = c10d();
  args.python = "/opt/py/bin/python3";
  EXPECT_EQ(plan_launch(args, 1).argv, (std::vector<std::string>{"/opt/py/bin/python3", "-u", "train.py", "--lr", "0.1"}));
  args.run_path = true;
  args.no_python = true;  // --run_path wins over both, as torchrun's
  args.module = true;
  EXPECT_EQ(plan_launch(args, 1).argv,
            (std::vector<std::string>{"/opt/py/bin/python3", "-u", "-c", kRunPathCode, "train.py", "--lr", "0.1"}));
}

TEST(LaunchPlan, RedirectsAndTeeTakeTorchrunsForms) {
  LaunchArgs args = c10d();
  args.redirects = "3";
  args.tee = "0:1,2:2";
  const LaunchPlan plan = plan_launch(args, 1);
  EXPECT_EQ(plan.redirects.of(0), 3);
  EXPECT_EQ(plan.redirects.of(5), 3);
  EXPECT_EQ(plan.tee.of(0), 1);
  EXPECT_EQ(plan.tee.of(1), 0);
  EXPECT_EQ(plan.tee.of(2), 2);
}

TEST(LaunchPlan, EveryBadValueIsRefusedNamingItsFlag) {
  const auto refused = [](auto edit, const std::string& expected) {
    LaunchArgs args = c10d();
    edit(args);
    const std::string what = refusal(args);
    EXPECT_NE(what.find(expected), std::string::npos) << "expected " << expected << " in: " << what;
  };
  refused([](LaunchArgs& a) { a.nnodes = "4:2"; }, "--nnodes \"4:2\"");
  refused([](LaunchArgs& a) { a.nnodes = "0"; }, "--nnodes");
  refused([](LaunchArgs& a) { a.nnodes = "two"; }, "--nnodes");
  refused([](LaunchArgs& a) { a.nnodes = "2:20:30"; }, "--nnodes \"2:20:30\"");  // run_test.py's min_max parse
  refused([](LaunchArgs& a) { a.nproc_per_node = "0"; }, "--nproc_per_node");
  refused([](LaunchArgs& a) { a.nproc_per_node = "gpu"; }, "no GPUs");
  refused([](LaunchArgs& a) { a.nproc_per_node = "unknown"; }, "--nproc_per_node \"unknown\"");  // run_test.py's
  const auto as_static = [](LaunchArgs& a) {
    a.rdzv_backend = "static";
    a.rdzv_endpoint = "";
  };
  refused([&](LaunchArgs& a) { as_static(a), a.nnodes = "1:2"; }, "--nnodes \"1:2\": the static backend");
  refused([&](LaunchArgs& a) { as_static(a), a.nnodes = "2", a.node_rank = 2; }, "--node_rank \"2\": must be from 0 to 1");
  refused([&](LaunchArgs& a) { as_static(a), a.master_port = 0; }, "--master_port \"0\"");
  refused([](LaunchArgs& a) { a.rdzv_backend = "zk"; }, "dagsim has c10d, dagsim, etcd and etcd-v2");
  refused([](LaunchArgs& a) { a.rdzv_endpoint = "h:99999"; }, "--rdzv_endpoint \"h:99999\": The port number");
  refused([](LaunchArgs& a) { a.rdzv_endpoint = ":80"; }, "--rdzv_endpoint \":80\": The hostname");
  refused([](LaunchArgs& a) { a.rdzv_conf = "join_timeout=-1"; }, "--rdzv_conf \"join_timeout=-1\": The join timeout (-1s) must be positive.");
  refused([](LaunchArgs& a) { a.rdzv_conf = "read_timeout=0"; }, "The read timeout must be a positive integer.");
  refused([](LaunchArgs& a) { a.rdzv_conf = "is_host=maybe"; }, "'is_host' does not represent a valid boolean value");
  refused([](LaunchArgs& a) { a.rdzv_conf = "store_type=zk"; }, "Invalid store type given.");
  refused([](LaunchArgs& a) { a.rdzv_conf = "novalue"; }, "'novalue' must have a value specified");
  refused([](LaunchArgs& a) { a.rdzv_backend = "etcd"; a.rdzv_conf = "protocol=ftp"; }, "The protocol must be HTTP or HTTPS.");
  refused([](LaunchArgs& a) { a.rdzv_id = ""; }, "--rdzv_id \"\": The run id must be a non-empty string.");
  refused([](LaunchArgs& a) { a.monitor_interval_s = 0; }, "--monitor_interval");
  refused([](LaunchArgs& a) { a.role = "two words"; }, "--role");
  refused([](LaunchArgs& a) { a.redirects = "4"; }, "--redirects \"4\"");
  refused([](LaunchArgs& a) { a.tee = "x:1"; }, "--tee");
  refused([](LaunchArgs& a) { a.command.clear(); }, "needs the training script");
}

TEST(LaunchPlan, ARunIdThatIsAPathIsRefusedAndAnyOtherKeptAsIs) {
  // The id names the log folder, <log_dir>/<id>_<random>: a '/' would put it elsewhere.
  for (const std::string& id : std::vector<std::string>{"../../x", "/etc/cron.d/x", "a/b", "x/", std::string("a\0/b", 4)}) {
    LaunchArgs args = c10d();
    args.rdzv_id = id;
    const std::string what = refusal(args);
    EXPECT_NE(what.find("--rdzv_id " + quote(id) + ": the run id names the log folder"), std::string::npos) << what;
  }
  // Anything else is kept byte for byte: other agents (torchrun's too) share it as the store's
  // key prefix. "..", a dot and control characters make no path: "<log_dir>/.._abc123".
  for (const std::string id : {"..", ".", "job 1", "job\x1b[31m\n", "sl\xc3\xbcrm-42"}) {
    LaunchArgs args = c10d();
    args.rdzv_id = id;
    EXPECT_EQ(plan_launch(args, 8).settings.run_id, id);
  }
}

}  // namespace
}  // namespace dagsim::launch
