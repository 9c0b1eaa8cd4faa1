#include "conformance/program_gen.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace dagsim::conformance {

using scenarios::Program;
using scenarios::Statement;
using scenarios::Via;

std::ostream& operator<<(std::ostream& out, const ProgramCase& c) {
  out << "workers=" << c.workers << " latency_max_us=" << c.latency_max.count() / 1000
      << " probe_interval_us=" << c.probe_interval.count() / 1000
      << " schedule=" << (c.random_schedule ? "random" : "fifo") << " seed=" << c.seed << "\n";
  for (const auto& t : c.program.tensors) {
    out << "  tensor " << t.name << (t.requires_grad ? " (grad)" : "") << (t.device.is_cpu() ? "" : " on " + t.device.str()) << "\n";
  }
  const char* via[] = {"local", "rpc_sync", "rpc_async", "remote"};
  for (const Statement& s : c.program.statements) {
    out << "  " << s.out() << " = " << s.call << "(";
    for (size_t i = 0; i < s.args.size(); ++i) out << (i ? ", " : "") << s.args[i];
    for (size_t i = 0; i < s.rrefs.size(); ++i) out << (i || !s.args.empty() ? ", " : "") << "RRef " << s.rrefs[i];
    out << ") via " << via[static_cast<int>(s.via)];
    if (s.via != Via::local) out << " on worker" << s.on;
    if (s.attributes.count("to")) out << " to worker" << s.attributes.at("to");
    if (s.device) out << " on " << s.device->str();
    out << "\n";
  }
  return out;
}

rc::Gen<ProgramCase> gen_program_case() {
  return rc::gen::exec([] {
    ProgramCase c;
    c.workers = *rc::gen::inRange<uint32_t>(2, 7);
    c.latency_max = std::chrono::microseconds(*rc::gen::inRange(0, 5000));
    c.probe_interval = std::chrono::microseconds(*rc::gen::element(100, 1000, 100000));
    c.random_schedule = *rc::gen::arbitrary<bool>();
    c.seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
    Program& p = c.program;
    const int leaves = *rc::gen::inRange(1, 5);
    std::vector<std::string> names;
    for (int i = 0; i < leaves; ++i) {
      scenarios::ProgramTensor t;
      t.name = "t" + std::to_string(i);
      t.shape = {2, 3};
      for (int k = 0; k < 6; ++k) t.values.push_back(*rc::gen::inRange(-8, 9) / 4.0);
      t.requires_grad = i == 0 || *rc::gen::inRange(0, 4) != 0;
      p.tensors.push_back(t);
      names.push_back(t.name);
    }
    std::vector<std::string> rpc_outputs;
    // Remote results (RRefs on their owners), and whether each was used yet: each is used at least
    // once, by to_here or as an RRef argument of a call on any worker (a fork where it does not
    // own it), and whatever used it reaches the loss.
    std::vector<std::string> rrefs;
    std::map<std::string, bool> rref_used;
    const int statements = *rc::gen::inRange(5, 41);
    for (int i = 0; i < statements; ++i) {
      Statement s;
      s.outs = {"v" + std::to_string(i)};
      const int kind = *rc::gen::inRange(0, 12);  // 9 and 11: remote; 10: to_here
      if (kind == 10 && !rrefs.empty()) {
        s.call = scenarios::kToHere;
        s.rrefs = {rrefs[*rc::gen::inRange<size_t>(0, rrefs.size())]};
        rref_used[s.rrefs[0]] = true;
        rpc_outputs.push_back(s.out());
        names.push_back(s.out());
        p.statements.push_back(s);
        continue;
      }
      const char* binary[] = {"add", "sub", "mul"};
      const char* unary[] = {"neg", "tanh", "sigmoid"};
      const char* relay[] = {"relay_add", "relay_mul"};
      auto pick = [&] { return names[*rc::gen::inRange<size_t>(0, names.size())]; };
      if (kind < 4) {
        s.call = binary[kind % 3];
        s.args = {pick(), pick()};  // may repeat: shared inputs
      } else if (kind < 7 || kind >= 9) {
        s.call = unary[kind % 3];
        s.args = {pick()};
      } else {
        s.call = relay[kind - 7];
        s.args = {pick(), pick()};
        s.attributes["to"] = *rc::gen::inRange<uint32_t>(0, c.workers);
      }
      const bool nested = s.call.starts_with(scenarios::kRelayPrefix);
      // The last tensor argument of an op may be an RRef instead, on any worker.
      if (!nested && !rrefs.empty() && *rc::gen::inRange(0, 2) == 0) {
        s.rrefs = {rrefs[*rc::gen::inRange<size_t>(0, rrefs.size())]};
        rref_used[s.rrefs[0]] = true;
        s.args.pop_back();
      }
      const int via = nested ? *rc::gen::inRange(1, 3) : kind >= 9 ? 3 : *rc::gen::inRange(0, 3);
      s.via = static_cast<Via>(via);
      if (s.via != Via::local) s.on = *rc::gen::inRange<uint32_t>(s.via == Via::remote ? 0 : 1, c.workers);
      if (s.via == Via::remote) {
        rrefs.push_back(s.out());
        rref_used[s.out()] = false;
      } else {
        if (s.via != Via::local || !s.rrefs.empty()) rpc_outputs.push_back(s.out());
        names.push_back(s.out());
      }
      p.statements.push_back(s);
    }
    for (const std::string& r : rrefs) {
      if (rref_used.at(r)) continue;
      Statement s{{"here_" + r}, scenarios::kToHere, {}, {}, Via::local, 0};
      s.rrefs = {r};
      rpc_outputs.push_back(s.out());
      p.statements.push_back(s);
    }
    // Every RPC result reaches the loss (an unused one is the hang case, tested on its own);
    // local results nobody uses are the unused branches that stay local.
    // Through t0 (which always requires grad) so the loss always has a graph.
    p.statements.push_back(Statement{{"acc"}, "add", {names.back(), "t0"}, {}, Via::local, 0});
    std::string acc = "acc";
    for (size_t i = 0; i < rpc_outputs.size(); ++i) {
      Statement s{{"acc" + std::to_string(i)}, "add", {acc, rpc_outputs[i]}, {}, Via::local, 0};
      acc = s.out();
      p.statements.push_back(s);
    }
    p.statements.push_back(Statement{{"loss"}, "sum", {acc}, {}, Via::local, 0});
    p.roots = {"loss"};
    return c;
  });
}

}  // namespace dagsim::conformance
