// Test helpers for the simulator's own tests: nodes that record what reaches their inbox.
#pragma once

#include <string>
#include <vector>

#include "sim/sim_world.h"

namespace dagsim::sim::testing {

using namespace std::chrono_literals;

struct Received {
  int64_t time_us;
  runtime::Delivery::Kind kind;
  WorkerId peer;
  std::string text;  // the payload as text, or the failure reason
};

inline runtime::Bytes bytes_of(const std::string& s) { return runtime::Bytes(s.begin(), s.end()); }

// A node main that records every delivery into `log` until its node dies.
inline SimWorld::NodeMain recorder(std::vector<Received>& log) {
  return [&log](runtime::Env& env) {
    for (;;) {
      runtime::Delivery d = env.transport.inbox().pop();
      const std::string text = d.kind == runtime::Delivery::Kind::message
                                   ? std::string(d.payload.begin(), d.payload.end())
                                   : d.reason;
      log.push_back({env.clock.now().ns() / 1000, d.kind, d.peer, text});
    }
  };
}

inline std::vector<std::string> texts(const std::vector<Received>& log) {
  std::vector<std::string> out;
  for (const Received& r : log) out.push_back(r.text);
  return out;
}

inline runtime::TimePoint at_ms(int64_t ms) { return runtime::TimePoint{std::chrono::milliseconds(ms)}; }

}  // namespace dagsim::sim::testing
