// Tests of the Slurm defaults (slurm_env.h): the host-list reader against Slurm's forms, its bounds
// and refusals, a randomized comparison with a model of the syntax plus mutated and random inputs
// (each read or refused by name, never anything else), and the defaults' precedence: flags and
// PET_* over Slurm, Slurm over torchrun's defaults, and the step's tasks as the agents' count.
#include "launch/slurm_env.h"

#include <gtest/gtest.h>

#include <random>

#include "core/base/error.h"
#include "launch/launch_plan.h"

namespace dagsim::launch {
namespace {

using Strings = std::vector<std::string>;

Strings all_hosts(const std::string& text) { return parse_hostlist(text, "SLURM_JOB_NODELIST", kMaxHostlistHosts).hosts; }

std::string refusal(const std::string& text, const std::string& variable = "SLURM_JOB_NODELIST") {
  try {
    parse_hostlist(text, variable, kMaxHostlistHosts);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(Hostlist, ReadsSlurmsForms) {
  EXPECT_EQ(all_hosts("node[01-04,07],gpu5"), (Strings{"node01", "node02", "node03", "node04", "node07", "gpu5"}));
  EXPECT_EQ(all_hosts("vm"), (Strings{"vm"}));
  EXPECT_EQ(all_hosts("a,b.example.org,c-1_x"), (Strings{"a", "b.example.org", "c-1_x"}));
  EXPECT_EQ(all_hosts("n[8-11]"), (Strings{"n8", "n9", "n10", "n11"})) << "unpadded: as written";
  EXPECT_EQ(all_hosts("n[08-10]"), (Strings{"n08", "n09", "n10"})) << "padded to the first number's width";
  EXPECT_EQ(all_hosts("n[5]"), (Strings{"n5"}));
  EXPECT_EQ(all_hosts("r[1-2]n[3,5]"), (Strings{"r1n3", "r1n5", "r2n3", "r2n5"})) << "the last group fastest";
  EXPECT_EQ(all_hosts("[1-2]x"), (Strings{"1x", "2x"}));
  EXPECT_EQ(all_hosts("rack[1-2]-gpu"), (Strings{"rack1-gpu", "rack2-gpu"}));
  const Hostlist first = parse_hostlist("node[0001-1000],other[1-24]", "SLURM_NODELIST");
  EXPECT_EQ(first.hosts, (Strings{"node0001"})) << "only the first, by default";
  EXPECT_EQ(first.count, 1024u);
  EXPECT_EQ(parse_hostlist("a[3-4],b", "V", 3).hosts, (Strings{"a3", "a4", "b"}));
  EXPECT_EQ(parse_hostlist("a[3-4],b", "V", 2).hosts, (Strings{"a3", "a4"}));
}

TEST(Hostlist, RefusesMalformedListsNamingTheVariable) {
  const auto refused = [](const std::string& text, const std::string& expected) {
    const std::string what = refusal(text, "SLURM_STEP_NODELIST");
    EXPECT_NE(what.find("SLURM_STEP_NODELIST"), std::string::npos) << text << ": " << what;
    EXPECT_NE(what.find(expected), std::string::npos) << text << ": expected " << expected << " in: " << what;
  };
  refused("", "an empty host list");
  refused("a,", "a comma at the end");
  refused(",a", "an empty host name at character 1");
  refused("a,,b", "an empty host name at character 3");
  refused("node[1-", "a range without a number");
  refused("node[1", "a '[' never closed");
  refused("node[1-3", "a '[' never closed");
  refused("node[]", "a range without a number");
  refused("node[3-1]", "a range from 3 down to 1");
  refused("node[1;2]", "unexpected \";\" in a range");
  refused("node[a]", "a range without a number");
  refused("node]", "unexpected \"]\" at character 5");
  refused("node[[1]]", "a range without a number");
  refused("node 1", "unexpected \" \"");
  refused("node\n", "unexpected \"\\n\"");
  refused("n[1-2-3]", "unexpected \"-\" in a range");
  refused("n[1234567890]", "more than 9 digits");
  refused(std::string(254, 'a'), "a host name longer than 253");
  refused(std::string(250, 'a') + "[1-1000]", "a host name longer than 253");
  refused("n[0-1048576]", "more than 1048576 hosts");
  refused("n[0-1023]m[0-1024]", "more than 1048576 hosts");
  refused("a[0-999999999]b[0-999999999]c[0-999999999]", "more than 1048576 hosts");
  // 2^20 hosts in each of four groups: 2^80, which a product in 64 bits would wrap to 0.
  refused("a[1-1048576]b[1-1048576]c[1-1048576]d[1-1048576]", "more than 1048576 hosts");
  refused("n[1-600000],m[1-600000]", "more than 1048576 hosts");
  refused(std::string(kMaxHostlistChars + 1, 'a'), "longer than 65536 characters");
  EXPECT_EQ(all_hosts("n[0-1048575]").size(), kMaxHostlistHosts) << "the bound itself is read";
}

// A host list drawn from a model of the syntax: the text and, from the same draws, every host it
// names in Slurm's order, so the reader is compared with what the model says, not with itself.
struct Drawn {
  std::string text;
  Strings hosts;
};

Drawn draw_hostlist(std::mt19937_64& rng) {
  const auto pick = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  static const std::string chars = "abcxyz019.-_ABZ";
  Drawn out;
  const size_t items = pick(1, 4);
  for (size_t i = 0; i < items; ++i) {
    Strings hosts{""};
    const size_t pieces = pick(1, 3);
    bool literal_last = false;
    for (size_t p = 0; p < pieces; ++p) {
      // Two literals in a row read as one: the model always alternates.
      if (!literal_last && pick(0, 1) == 0) {
        std::string text;
        for (size_t n = pick(1, 6); n > 0; --n) text += chars[pick(0, chars.size() - 1)];
        out.text += text;
        for (std::string& h : hosts) h += text;
        literal_last = true;
        continue;
      }
      literal_last = false;
      Strings numbers;
      out.text += "[";
      for (size_t r = pick(1, 3); r > 0; --r) {
        const size_t width = pick(1, 4);
        const uint64_t lo = pick(0, width == 1 ? 9 : 99);
        const uint64_t hi = lo + pick(0, 3);
        std::string lo_text = std::to_string(lo);
        lo_text.insert(0, width > lo_text.size() ? width - lo_text.size() : 0, '0');
        out.text += lo_text;
        if (hi != lo || pick(0, 1) == 0) out.text += "-" + std::to_string(hi);
        for (uint64_t v = lo; v <= hi; ++v) {
          std::string text = std::to_string(v);
          text.insert(0, lo_text.size() > text.size() ? lo_text.size() - text.size() : 0, '0');
          numbers.push_back(text);
        }
        out.text += r > 1 ? "," : "]";
      }
      Strings next;
      for (const std::string& h : hosts) {
        for (const std::string& n : numbers) next.push_back(h + n);
      }
      hosts = std::move(next);
    }
    out.text += i + 1 < items ? "," : "";
    out.hosts.insert(out.hosts.end(), hosts.begin(), hosts.end());
  }
  return out;
}

// Read or refused, and nothing else: a list that is read names hosts of name characters only,
// and as many as it counts (up to the limit). Returns whether it was read.
bool read_or_refused(const std::string& text, size_t limit) {
  try {
    const Hostlist list = parse_hostlist(text, "SLURM_JOB_NODELIST", limit);
    EXPECT_GE(list.count, 1u) << text;
    EXPECT_EQ(list.hosts.size(), std::min<uint64_t>(list.count, limit)) << text;
    for (const std::string& host : list.hosts) {
      EXPECT_FALSE(host.empty()) << text;
      EXPECT_LE(host.size(), kMaxHostNameChars) << text;
      EXPECT_EQ(host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"), std::string::npos)
          << text;
    }
    return true;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << text;
    EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST"), std::string::npos) << text;
  }
  return false;
}

TEST(Hostlist, RandomListsReadAsTheirModelSays) {
  std::mt19937_64 rng(48);
  for (int i = 0; i < 5000; ++i) {
    const Drawn drawn = draw_hostlist(rng);
    const Hostlist list = parse_hostlist(drawn.text, "SLURM_JOB_NODELIST", kMaxHostlistHosts);
    ASSERT_EQ(list.hosts, drawn.hosts) << drawn.text;
    ASSERT_EQ(list.count, drawn.hosts.size()) << drawn.text;
    ASSERT_EQ(parse_hostlist(drawn.text, "SLURM_JOB_NODELIST").hosts, Strings{drawn.hosts.front()}) << drawn.text;
  }
}

TEST(Hostlist, MutatedAndRandomTextIsReadOrRefusedByName) {
  std::mt19937_64 rng(4848);
  const auto pick = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  static const std::string alphabet = "[]-,0123456789az. \t\n\x01\xff";
  int read = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = draw_hostlist(rng).text;
    for (size_t edits = pick(1, 4); edits > 0; --edits) {
      const size_t at = pick(0, text.size());
      switch (pick(0, 3)) {
        case 0: text.insert(at, 1, alphabet[pick(0, alphabet.size() - 1)]); break;
        case 1: if (at < text.size()) text.erase(at, 1); break;
        case 2: if (at < text.size()) text[at] = alphabet[pick(0, alphabet.size() - 1)]; break;
        default: text = text.substr(0, at); break;
      }
    }
    read += read_or_refused(text, pick(1, 64));
    if (HasFailure()) return;
  }
  // Both outcomes occur often, so neither path goes untried.
  EXPECT_GT(read, 2000);
  EXPECT_LT(read, 18000);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(pick(0, 40), '\0');
    for (char& c : bytes) c = static_cast<char>(pick(0, 255));
    read_or_refused(bytes, 8);
    if (HasFailure()) return;
  }
}

// What srun gives each task of `srun -N4 --ntasks-per-node=1` (Slurm 22.05's names).
std::map<std::string, std::string> srun_step() {
  return {{"SLURM_JOB_ID", "4242"},           {"SLURM_JOBID", "4242"},          {"SLURM_JOB_NUM_NODES", "8"},
          {"SLURM_NNODES", "8"},              {"SLURM_JOB_NODELIST", "gpu[01-08]"}, {"SLURM_NODELIST", "gpu[01-08]"},
          {"SLURM_STEP_NUM_TASKS", "4"},      {"SLURM_STEP_NUM_NODES", "4"},    {"SLURM_STEP_NODELIST", "gpu[05-08]"},
          {"SLURM_NTASKS", "4"}};
}

LaunchArgs script() {
  LaunchArgs args;
  args.command = {"train.py"};
  return args;
}

TEST(SlurmDefaults, AnSrunStepGivesTheAgentsTheJobIdAndTheStepsFirstNode) {
  LaunchArgs args = script();
  const Strings lines = apply_slurm_defaults(args, {}, srun_step());
  EXPECT_EQ(args.nnodes, "4") << "the step's tasks: every task is an agent";
  EXPECT_EQ(args.rdzv_id, "4242");
  EXPECT_EQ(args.rdzv_endpoint, "gpu05") << "the step's first node runs an agent; the job's may not";
  EXPECT_EQ(args.rdzv_backend, "c10d");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "from Slurm: --rdzv_id 4242 (SLURM_JOB_ID)");
  EXPECT_EQ(lines[1], "from Slurm: --nnodes 4 (SLURM_STEP_NUM_TASKS: one agent per task of this srun step)");
  EXPECT_NE(lines[2].find("--rdzv_backend c10d"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], "from Slurm: --rdzv_endpoint gpu05 (the first of 4 node(s) in SLURM_STEP_NODELIST, on the backend's default port)");
  // What the plan makes of them: a 4-agent c10d job on gpu05's default port, run id the job's.
  const LaunchPlan plan = plan_launch(args, 1);
  EXPECT_EQ(plan.settings.min_nodes, 4u);
  EXPECT_EQ(plan.settings.max_nodes, 4u);
  EXPECT_EQ(plan.settings.run_id, "4242");
  EXPECT_EQ(plan.params->backend(), "c10d");
  EXPECT_EQ(plan.target.endpoint, (rendezvous::RendezvousEndpoint{"gpu05", 29400}));
}

TEST(SlurmDefaults, TorchrunsStaticRecipeKeepsTheStaticBackendAndTheMastersEndpoint) {
  // srun dagsim launch --nnodes 4 --node_rank $SLURM_NODEID --master_addr gpu05 --master_port 29500
  LaunchArgs args = script();
  args.nnodes = "4";
  args.node_rank = 2;
  args.master_addr = "gpu05";
  GivenFlags given;
  given.nnodes = true;
  given.static_flags = true;
  const Strings lines = apply_slurm_defaults(args, given, srun_step());
  EXPECT_EQ(args.rdzv_backend, "static");
  EXPECT_EQ(args.rdzv_endpoint, "") << "static's endpoint is --master_addr:--master_port, not Slurm's first node";
  EXPECT_EQ(args.rdzv_id, "4242");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("kept: --rdzv_backend static"), std::string::npos) << lines[1];
  const LaunchPlan plan = plan_launch(args, 1);
  EXPECT_EQ(plan.target.endpoint, (rendezvous::RendezvousEndpoint{"gpu05", 29500}));
  EXPECT_EQ(plan.target.is_host, false) << "node rank 2 is a client of node rank 0's store";
}

TEST(SlurmDefaults, OutsideAStepTheJobsNodesAndItsFirstNode) {
  std::map<std::string, std::string> env = {{"SLURM_JOBID", "7"}, {"SLURM_NNODES", "3"}, {"SLURM_NODELIST", "c[3-4],d1"},
                                            {"SLURM_NTASKS", "12"}};
  LaunchArgs args = script();
  const Strings lines = apply_slurm_defaults(args, {}, env);
  EXPECT_EQ(args.nnodes, "3") << "sbatch's script: one agent per node, not SLURM_NTASKS";
  EXPECT_EQ(args.rdzv_id, "7");
  EXPECT_EQ(args.rdzv_endpoint, "c3");
  EXPECT_NE(lines[0].find("(SLURM_JOBID)"), std::string::npos);
  EXPECT_NE(lines[1].find("(SLURM_NNODES: one agent per node of the job)"), std::string::npos) << lines[1];
  env["SLURM_JOB_NUM_NODES"] = "5";
  env["SLURM_JOB_NODELIST"] = "e[9-13]";
  args = script();
  apply_slurm_defaults(args, {}, env);
  EXPECT_EQ(args.nnodes, "5") << "the current names first";
  EXPECT_EQ(args.rdzv_endpoint, "e9");
}

TEST(SlurmDefaults, FlagsAndPetVariablesWinAndNothingAppliesOutsideAJob) {
  LaunchArgs args = script();
  args.nnodes = "2:6";
  args.rdzv_id = "mine";
  args.rdzv_endpoint = "head:1234";
  args.rdzv_backend = "dagsim";
  const LaunchArgs before = args;
  const Strings lines = apply_slurm_defaults(args, {true, true, true, true}, srun_step());
  EXPECT_EQ(args.nnodes, before.nnodes);
  EXPECT_EQ(args.rdzv_id, before.rdzv_id);
  EXPECT_EQ(args.rdzv_endpoint, before.rdzv_endpoint);
  EXPECT_EQ(args.rdzv_backend, before.rdzv_backend);
  EXPECT_TRUE(lines.empty());
  // Each flag on its own.
  args = script();
  args.rdzv_endpoint = "given";
  apply_slurm_defaults(args, {.rdzv_endpoint = true}, srun_step());
  EXPECT_EQ(args.rdzv_endpoint, "given");
  EXPECT_EQ(args.nnodes, "4");
  // An etcd backend: its server is the user's to name, not the first node.
  args = script();
  args.rdzv_backend = "etcd";
  apply_slurm_defaults(args, {.rdzv_backend = true}, srun_step());
  EXPECT_EQ(args.rdzv_endpoint, "");
  EXPECT_EQ(args.rdzv_id, "4242");
  // Outside a job, and with --standalone, torchrun's defaults stand.
  for (const bool standalone : {false, true}) {
    args = script();
    args.standalone = standalone;
    std::map<std::string, std::string> env = standalone ? srun_step() : std::map<std::string, std::string>{{"SLURM_NNODES", "3"}};
    EXPECT_TRUE(apply_slurm_defaults(args, {}, env).empty());
    EXPECT_EQ(args.nnodes, LaunchArgs{}.nnodes);
    EXPECT_EQ(args.rdzv_backend, LaunchArgs{}.rdzv_backend);
    EXPECT_EQ(args.rdzv_id, LaunchArgs{}.rdzv_id);
  }
}

TEST(SlurmDefaults, MoreAgentsThanNodesIsNotedAndBadValuesAreRefusedByName) {
  std::map<std::string, std::string> env = srun_step();
  env["SLURM_STEP_NUM_TASKS"] = "2";
  env["SLURM_STEP_NUM_NODES"] = "1";
  env["SLURM_STEP_NODELIST"] = "vm";
  LaunchArgs args = script();
  Strings lines = apply_slurm_defaults(args, {}, env);
  EXPECT_EQ(args.nnodes, "2");
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_NE(lines[2].find("runs 2 agents on 1 node(s)"), std::string::npos) << lines[2];
  args = script();
  lines = apply_slurm_defaults(args, {.nnodes = true}, env);
  EXPECT_EQ(args.nnodes, LaunchArgs{}.nnodes) << "given";
  for (const std::string& line : lines) EXPECT_EQ(line.find("note:"), std::string::npos) << "the count was the user's: " << line;
  const auto refused = [](const std::string& variable, const std::string& value, const std::string& expected) {
    std::map<std::string, std::string> env = srun_step();
    env[variable] = value;
    LaunchArgs args = script();
    try {
      apply_slurm_defaults(args, {}, env);
      ADD_FAILURE() << variable << "=" << value << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(variable + " \"" + value + "\": " + expected), std::string::npos) << e.what();
    }
  };
  refused("SLURM_JOB_ID", "12a", "expected a job id");
  refused("SLURM_STEP_NUM_TASKS", "0", "expected the number of agents, a whole number from 1 to 65536");
  refused("SLURM_STEP_NUM_TASKS", "65537", "expected the number of agents");
  refused("SLURM_STEP_NUM_TASKS", "-1", "expected the number of agents");
  refused("SLURM_STEP_NODELIST", "gpu[05-", "a range without a number");
  refused("SLURM_STEP_NUM_NODES", "x", "expected the number of nodes");
}

}  // namespace
}  // namespace dagsim::launch
