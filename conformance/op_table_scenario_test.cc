// Every op of the op table (core/rpc/op_table.h), called from a scenario: for each op, a program
// whose one statement calls it by rpc_sync on worker1 with the op's example arguments (its
// tensors as the scenario's leaves, every result named with `out = [...]`), and a loss summing
// every result. The run's gradients must equal local autograd's, and the context must be gone
// everywhere after. With the table's unit test (gradcheck, shapes, RPC), this is "every op is
// gradchecked and callable from a scenario and over RPC".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/rpc/op_table.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"
#include "scenarios/workloads/program/scenario_program.h"

namespace dagsim::conformance {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string scenario_for(const rpc::OpDef& op, const rpc::OpExample& ex, size_t results) {
  std::ostringstream out;
  out << "name = \"op_" << op.name << "\"\n\ntensors = [\n";
  for (size_t i = 0; i < ex.tensors.size(); ++i) {
    const Tensor& t = ex.tensors[i];
    out << "  { name = \"x" << i << "\", shape = [";
    for (size_t d = 0; d < t.shape().size(); ++d) out << (d ? ", " : "") << t.shape()[d];
    out << "], values = [";
    const std::vector<double> v = t.to_vector();
    for (size_t k = 0; k < v.size(); ++k) out << (k ? ", " : "") << number(v[k]);
    out << "], requires_grad = " << (t.requires_grad() ? "true" : "false") << " },\n";
  }
  out << "]\nprogram = [\n  { out = [";
  for (size_t r = 0; r < results; ++r) out << (r ? ", " : "") << "\"r" << r << "\"";
  out << "], call = \"" << op.name << "\", args = [";
  for (size_t i = 0; i < ex.tensors.size(); ++i) out << (i ? ", " : "") << "\"x" << i << "\"";
  out << "], via = \"rpc_sync\", on = \"worker1\"";
  for (const auto& [key, value] : ex.attributes) out << ", " << key << " = " << number(value);
  out << " },\n";
  for (size_t r = 0; r < results; ++r) out << "  { out = \"s" << r << "\", call = \"sum\", args = [\"r" << r << "\"] },\n";
  std::string loss = "s0";
  for (size_t r = 1; r < results; ++r) {
    out << "  { out = \"l" << r << "\", call = \"add\", args = [\"" << loss << "\", \"s" << r << "\"] },\n";
    loss = "l" + std::to_string(r);
  }
  out << "]\nbackward = { roots = [\"" << loss << "\"] }\n\n[cluster]\nnodes = 2\n\n"
      << "[[checks]]\nkind = \"gradients_match_local\"\nrtol = 1e-9\n\n[[checks]]\nkind = \"no_leaked_contexts\"\n";
  return out.str();
}

TEST(OpTableScenarios, EveryOpIsCallableFromAScenarioWithLocalGradients) {
  for (const rpc::OpDef& op : rpc::op_table()) {
    Prng prng(7);
    const rpc::OpExample ex = op.example(prng);
    std::vector<Shape> shapes;
    for (const Tensor& t : ex.tensors) shapes.push_back(t.shape());
    const rpc::OpShapes results = op.shape(shapes, ex.attributes);
    ASSERT_TRUE(results.has_value()) << op.name;
    const std::string text = scenario_for(op, ex, results->size());
    scenarios::Scenario scenario;
    try {
      scenario = scenarios::parse_scenario(text, "op_" + op.name + ".toml");
    } catch (const Error& e) {
      ADD_FAILURE() << op.name << ": the loader refused it: " << e.what() << "\n" << text;
      continue;
    }
    scenarios::RunOptions options;
    options.seed = 1;
    const scenarios::RunResult r = scenarios::run_scenario(scenario, options);
    EXPECT_EQ(r.outcome, "finished") << op.name;
    for (const scenarios::CheckResult& c : r.checks) EXPECT_TRUE(c.passed) << op.name << ": " << c.name << ": " << c.detail << "\n" << text;
  }
}

TEST(OpTableScenarios, EveryOpAndAttributeIsKnownToTheLoader) {
  const auto names = scenarios::detail::program_functions();
  for (const rpc::OpDef& op : rpc::op_table()) {
    EXPECT_NE(std::find(names.begin(), names.end(), op.name), names.end()) << op.name;
    for (const std::string& a : op.attributes) EXPECT_TRUE(scenarios::detail::is_attribute_key(a)) << op.name << ": " << a;
  }
}

}  // namespace
}  // namespace dagsim::conformance
