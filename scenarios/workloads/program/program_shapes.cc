// Statement result shapes at load time (program_shapes.h).
#include "scenarios/workloads/program/program_shapes.h"

#include <algorithm>
#include <limits>

#include "core/rpc/op_table.h"

namespace dagsim::scenarios {

int64_t saturating_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (d < 0) return std::numeric_limits<int64_t>::max();
    n = n > std::numeric_limits<int64_t>::max() / d ? std::numeric_limits<int64_t>::max() : n * d;
  }
  return n;
}

int64_t saturating_extent(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::numeric_limits<int64_t>::max();
    if (d == 0) continue;
    n = n > std::numeric_limits<int64_t>::max() / d ? std::numeric_limits<int64_t>::max() : n * d;
  }
  return n;
}

bool within_shape_limit(const Shape& shape) { return saturating_extent(shape) <= kProgramMaxNumel; }

rpc::OpShapes infer_result_shapes(const std::string& call, const std::vector<Shape>& s,
                                  const std::map<std::string, double>& attributes) {
  if (s.empty()) return std::nullopt;
  // The program's own functions are ops of the table under another name: a relay is its op on
  // another node, mlp_layer a linear (the activation keeps the shape), to_here the identity.
  std::string op = call;
  if (call.starts_with(kRelayPrefix)) op = call.substr(kRelayPrefix.size());
  if (call == "mlp_layer") op = "linear";
  if (call == "to_here") return s.size() == 1 ? rpc::OpShapes(std::vector<Shape>{s[0]}) : std::nullopt;
  const rpc::OpDef* def = rpc::find_op(op);
  if (def == nullptr || s.size() < def->min_tensors || s.size() > def->max_tensors) return std::nullopt;
  return def->shape(s, attributes);
}

uint64_t counted_tensor_bytes(const Program& program) {
  // Every shape here is within the element limit, so the sum of a few thousand cannot overflow.
  uint64_t elements = 0;
  for (const ProgramTensor& t : program.tensors) elements += 2 * static_cast<uint64_t>(saturating_numel(t.shape));
  for (const ProgramParameter& p : program.parameters) elements += 2 * static_cast<uint64_t>(saturating_numel(p.shape));
  for (const rpc::OpShapes& s : statement_shapes(program)) {
    if (!s) continue;
    for (const Shape& r : *s) elements += static_cast<uint64_t>(saturating_numel(r));
  }
  return 2 * sizeof(double) * elements;
}

std::vector<rpc::OpShapes> statement_shapes(const Program& program) {
  std::map<std::string, std::optional<Shape>> known;
  for (const ProgramTensor& t : program.tensors) known[t.name] = t.shape;
  for (const ProgramParameter& p : program.parameters) known[p.name] = p.shape;
  std::vector<rpc::OpShapes> out;
  out.reserve(program.statements.size());
  for (const Statement& st : program.statements) {
    std::vector<Shape> shapes;
    bool all_known = true;
    for (const auto* names : {&st.args, &st.rrefs}) {
      for (const std::string& name : *names) {
        auto it = known.find(name);
        if (it == known.end() || !it->second) {
          all_known = false;
          break;
        }
        shapes.push_back(*it->second);
      }
    }
    rpc::OpShapes results = all_known ? infer_result_shapes(st.call, shapes, st.attributes) : std::nullopt;
    // Results that do not match the names (a run error) give nothing downstream.
    if (results && results->size() != st.outs.size()) results.reset();
    for (size_t i = 0; i < st.outs.size(); ++i) known[st.outs[i]] = results ? std::optional<Shape>((*results)[i]) : std::nullopt;
    out.push_back(std::move(results));
  }
  return out;
}

}  // namespace dagsim::scenarios
