// Code probes: marks on rare branches worth reaching (FoundationDB's CODE_PROBE, TigerBeetle's
// marks). A probe is a statement:
//
//   if (reply.lost_race) {
//     DAGSIM_PROBE("store.cas_lost_race");
//     ...
//   }
//
// Each time the branch runs its probe's count goes up by one. `dagsim run` resets the counts when a
// run starts and writes the ones hit in its records and its JSON report ("probes"), so a sweep can
// say which rare branches its seeds reached and which none did (`dagsim check --probes`).
//
// Names are lowercase and dotted, area first: rpc., dist_autograd., rendezvous., store., etcd.,
// elastic., launch., net., sim. (the full list is in cmake/DagsimProbeTable.cmake). Each name marks
// exactly one site. A site needs no registration: at build time cmake/DagsimProbeTable.cmake scans
// the sources of core/, net/, launch/, scenarios/ and sim/ (tests excepted) for DAGSIM_PROBE and
// DAGSIM_BUGGIFY with a string literal and writes the sorted table of every name in the build
// (build/generated/probe_table.cc); a name used at two sites, or a malformed one, fails the build
// naming both places. So the table lists every probe, hit or not.
//
// Cost and determinism: a site resolves its name to an index in the table once (a function-local
// static, found by binary search on first use); after that a hit is one relaxed atomic increment.
// Counting draws no random number, writes no trace event and changes no control flow, so a run's
// trace hash is the same whether or not its probes are hit. The counts are process-global: one run
// at a time per process is what `dagsim run` and `dagsim check` (a process per seed) do; a test
// that runs two worlds at once reads their counts summed.
//
// Threading: hit() is safe from any thread; reset() and snapshot() are meant for the thread that
// owns the run, between runs or at its end.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dagsim::probe {

// Every probe in the build, sorted by name (from the generated table), hit or not.
std::vector<std::string> all_probe_names();

// Sets every probe's count to zero.
void reset();

// The probes hit since the last reset(), by name (sorted), with how many times each was hit.
// Probes never hit are left out.
std::map<std::string, uint64_t> snapshot();

// The count of one probe since the last reset (0 for a name not in the table).
uint64_t count(const std::string& name);

namespace detail {

// The build's table, defined in the generated probe_table.cc: kProbeNames[0..kProbeCount) sorted.
extern const char* const kProbeNames[];
extern const std::size_t kProbeCount;
extern std::atomic<uint64_t> g_probe_counts[];

// The index of `name` in kProbeNames. A name not in the table is a build that skipped the
// generator (or a test using a name no source marks): asserts, naming the site.
std::size_t site_index(const char* name, const char* file, int line);

inline void hit(std::size_t index) { g_probe_counts[index].fetch_add(1, std::memory_order_relaxed); }

}  // namespace detail
}  // namespace dagsim::probe

// Marks a rare branch. `name` must be a string literal (the build-time scan reads it).
#define DAGSIM_PROBE(name)                                                                  \
  do {                                                                                      \
    static const ::std::size_t dagsim_probe_site_ =                                         \
        ::dagsim::probe::detail::site_index(name, __FILE__, __LINE__);                      \
    ::dagsim::probe::detail::hit(dagsim_probe_site_);                                       \
  } while (0)
