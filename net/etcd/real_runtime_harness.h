// run_on_real_runtime: how a test runs fibers on the real runtime (issue 10's pieces, without the
// TCP transport): a fresh OS thread with an IoScheduler, a RealClock and `nodes` ProcessNodes, each
// with an Env of its own, as `dagsim node` has one. `body` runs as a fiber of node 0; the call
// returns once it ended and every node was killed and joined (a fiber still running then, such as
// a keep-alive, unwinds with node_killed). Nodes carry no transport: sends fail at once
// (connection_failed); store backends bring their own sockets on the thread's io_context.
//
// A fresh thread per call, because a thread keeps the first Boost.Fiber scheduler installed on it
// and the test's main thread may run LocalRuntime's. A fiber that ends with an exception fails the
// test (ADD_FAILURE naming the fiber); so does a body that has not ended after `limit`.
#pragma once

#include <boost/asio/io_context.hpp>

#include <functional>
#include <vector>

#include "core/runtime/env.h"
#include "net/real_clock.h"

namespace dagsim::net::etcd {

struct RealRuntime {
  boost::asio::io_context& io;
  RealClock& clock;
  std::vector<runtime::Env*> nodes;  // node i's Env (self = i, name "node<i>")
};

void run_on_real_runtime(size_t nodes, runtime::Duration limit, const std::function<void(RealRuntime&)>& body);

// From a fiber of `rt`: runs fn(i) on a fiber of every node i and returns once all have ended.
void on_every_node(RealRuntime& rt, const std::function<void(size_t)>& fn);

}  // namespace dagsim::net::etcd
