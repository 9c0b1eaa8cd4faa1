// BUGGIFY: code-level faults (FoundationDB's buggify(), madsim's buggify). A point is an expression
// that is true when the simulator chooses to perturb the code there:
//
//   if (DAGSIM_BUGGIFY("store.cas_lost_race")) {
//     // answer as if another client's write had come first: legal, so callers must cope
//   }
//
// What a point does must be legal by the contract of the code around it (PyTorch's, or the
// transport's delivery contract): a compare-and-set that loses a race, a reply that comes late, a
// smaller buffer, a timer that fires late. Never something that makes correct code wrong: a run
// with every point on must still pass its checks.
//
// Off outside the simulator. A point is true only while a Context is installed on the calling
// thread (ScopedContext), which only the simulator's runner does, for a scenario with [buggify]
// enabled = true; TCP runs, real jobs and unit tests install none, and every point is false there
// at the cost of one thread-local load.
//
// Seeded and independent. Each point has its own random stream, forked from the run's seed and
// the hash of its name (never the simulator's streams): at the start of a run the point is enabled
// with enable_probability (or by the swarm's choice, run/swarm.h), and each time an enabled point
// is reached it fires with fire_probability. Adding a point, or reaching one more often, never
// shifts another point's draws, and a run with buggify off draws nothing at all, so its trace is
// byte for byte what it was before points existed.
//
// Names follow the probes' rules (lowercase, dotted, area first) and are collected into the same
// generated table (cmake/DagsimProbeTable.cmake): all_point_names() lists every point of the build.
//
// Threading: a Context belongs to the thread that installed it (the simulator runs a whole world
// on one OS thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/prng.h"

namespace dagsim::buggify {

// Every code-level fault point of the build, sorted by name.
std::vector<std::string> all_point_names();

struct Settings {
  // The points that may be enabled; empty: all of the build's.
  std::vector<std::string> points;
  double enable_probability = 0.25;
  double fire_probability = 0.05;
  // When set (the swarm's choice), exactly these points are enabled, and enable_probability is not
  // drawn. Each must be in `points` (or the build's, when `points` is empty).
  std::optional<std::vector<std::string>> enabled;
};

// One run's code-level faults: which points are enabled and how often each fired.
class Context {
 public:
  // REQUIRES: every name in settings.points and settings.enabled is a point of the build.
  Context(uint64_t seed, const Settings& settings);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Whether point `index` (its place in the build's table) fires now; counts it when it does.
  bool fire(std::size_t index);

  std::vector<std::string> enabled_points() const;  // sorted
  std::map<std::string, uint64_t> fired() const;    // points that fired at least once
  uint64_t fired(const std::string& name) const;

 private:
  struct Point {
    bool enabled = false;
    Prng stream{0};
    uint64_t fired = 0;
  };
  double fire_probability_;
  std::vector<Point> points_;  // by table index
};

// Installs `context` on this thread for its lifetime (restoring what was there before).
class ScopedContext {
 public:
  explicit ScopedContext(Context& context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  Context* previous_;
};

// The stream of point `name` for `seed`: its first draw decides whether the point is enabled, the
// rest whether it fires. Exposed for tests.
Prng point_stream(uint64_t seed, const std::string& name);

namespace detail {

// The build's table, defined in the generated probe_table.cc: kPointNames[0..kPointCount) sorted.
extern const char* const kPointNames[];
extern const std::size_t kPointCount;

// The context installed on this thread, if any.
Context* current();

// The index of `name` in kPointNames; asserts, naming the site, for a name not in the table.
std::size_t site_index(const char* name, const char* file, int line);
// kPointCount when absent.
std::size_t find(const std::string& name);

}  // namespace detail
}  // namespace dagsim::buggify

// True when the simulator perturbs the code here (see above). `name` must be a string literal.
#define DAGSIM_BUGGIFY(name)                                                                        \
  ([]() -> bool {                                                                                   \
    ::dagsim::buggify::Context* const dagsim_buggify_context_ = ::dagsim::buggify::detail::current(); \
    if (dagsim_buggify_context_ == nullptr) return false;                                           \
    static const ::std::size_t dagsim_buggify_site_ =                                               \
        ::dagsim::buggify::detail::site_index(name, __FILE__, __LINE__);                            \
    return dagsim_buggify_context_->fire(dagsim_buggify_site_);                                     \
  }())
