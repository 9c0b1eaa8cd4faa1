// Env: everything core/ may ask of the outside world, one per node (DESIGN.md, "The seam").
// Engines take an Env& at construction; there are no globals, so a simulated world holds many
// nodes in one process. Random is dagsim's own Prng: seeded from the scenario in both runtimes
// (workload data must match between sim and TCP), and only security material comes from the OS.
#pragma once

#include <functional>
#include <string>

#include "core/base/ids.h"
#include "core/base/prng.h"
#include "core/runtime/clock.h"
#include "core/runtime/log.h"
#include "core/runtime/spawner.h"
#include "core/runtime/transport.h"

namespace dagsim::runtime {

using Random = Prng;

struct Env {
  WorkerId self;
  std::string name;
  Clock& clock;
  Transport& transport;
  Spawner& spawner;
  Random& random;
  Log& log;
  // Which life of this node: 0 at first start, +1 per restart. Ids a node makes carry it in
  // their high bits, so a restarted node never reuses an id of an earlier life.
  uint32_t incarnation = 0;
  // The runtime's name of a node ("worker3"), for messages; unset in runtimes without names.
  std::function<std::string(WorkerId)> name_of;

  // How messages name node `id`: "worker3" where the runtime names its nodes, else "node 3".
  std::string peer_name(WorkerId id) const { return name_of ? name_of(id) : "node " + std::to_string(id); }
};

}  // namespace dagsim::runtime
