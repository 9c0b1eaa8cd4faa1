// Rendezvous formation in the deterministic simulator (issue 11 item 8, simulator half):
// N rendezvous nodes (min = max = N) and one store node, over links of 0.5-1 ms (seeded).
//
//   BM_RendezvousFormation/nodes:N/poll_ms:P/spread:S
//     N: a growth sweep 2..1000 (the polling rows stop at 1000); 4096 and 10,000 (event-driven only)
//     are registered only with DAGSIM_RENDEZVOUS_LARGE=1 in the environment, the benchmark tier
//     (scripts/bench_rendezvous.sh runs each in its own process, so peak_rss_mb is its own).
//     P = 0: event-driven waits (the default); P = 1000: PyTorch's fixed 1 s polling.
//     S = 0: every node joins at t = 0; S = 1: joins spread uniformly over the first second.
//   Counters:
//     keep_alive_s   the nodes' heartbeat interval: PyTorch's 5 s up to 2,048 nodes, longer past
//                    that (keep_alive_for() says why);
//     virtual_ms     virtual time from the last join to the last return from next_rendezvous
//                    (the round time; deterministic for a seed);
//     run_wall_s     wall seconds of world.run(), the simulation itself;
//     build_wall_s, teardown_wall_s: building the world and unwinding it afterwards;
//     store_requests every request the nodes made of the store (reads, CAS, watches);
//     cas, cas_conflicts: versioned compare-and-sets, and those that lost their race;
//     watches, watch_changes: event-driven waits, and those answered with a changed state;
//     decodes        states decoded, all nodes together (the backend's cache spares the rest);
//     reply_mb       state bytes the nodes received from the store, as values (MB = 10^6 bytes),
//                    and read_, cas_lost_, cas_won_, watch_reply_mb: the same by what asked;
//     wire_reply_mb  the bytes of those values as the store sent them: deltas where the node held
//                    an earlier version (store_service.h), nothing for a compare-and-set that wrote;
//     deltas_sent    replies sent as deltas;
//     cas_values_mb  the states the compare-and-sets wrote, whole, and request_values_mb the value
//                    bytes the requests carried (a compare-and-set against the version its node
//                    holds sends a delta).
//   The benchmark's own (manual) time is build + run: the wall time of the whole formation.
//
//   BM_RendezvousDeterminism: one spread formation of 64 nodes run twice with one seed; fails
//     unless both give the same virtual round time, the same trace hash and the same counts.
//
// Every benchmark runs one iteration: the figures of interest are virtual (exact for a seed) and
// the biggest formation is the wall figure; the whole binary takes a few minutes on 2 cores.
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "bench/rendezvous_formation.h"

namespace dagsim::bench {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSeed = 42;

double ms(runtime::Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void report(benchmark::State& state, const FormationResult& r) {
  state.counters["virtual_ms"] = ms(r.round_time());
  state.counters["last_join_ms"] = ms(r.last_join);
  state.counters["run_wall_s"] = r.run_wall_s;
  state.counters["build_wall_s"] = r.build_wall_s;
  state.counters["teardown_wall_s"] = r.teardown_wall_s;
  state.counters["store_requests"] = static_cast<double>(r.store.requests);
  state.counters["cas"] = static_cast<double>(r.store.cas);
  state.counters["cas_conflicts"] = static_cast<double>(r.store.cas_conflicts);
  state.counters["watches"] = static_cast<double>(r.store.watches);
  state.counters["watch_changes"] = static_cast<double>(r.store.watch_changes);
  state.counters["decodes"] = static_cast<double>(r.decodes);
  state.counters["reply_mb"] = static_cast<double>(r.store.reply_bytes) / 1e6;
  state.counters["wire_reply_mb"] = static_cast<double>(r.wire_reply_bytes) / 1e6;
  state.counters["deltas_sent"] = static_cast<double>(r.deltas_sent);
  state.counters["cas_values_mb"] = static_cast<double>(r.cas_value_bytes) / 1e6;
  state.counters["request_values_mb"] = static_cast<double>(r.request_value_bytes) / 1e6;
  state.counters["read_reply_mb"] = static_cast<double>(r.store.read_reply_bytes) / 1e6;
  state.counters["cas_lost_reply_mb"] = static_cast<double>(r.store.cas_lost_reply_bytes) / 1e6;
  state.counters["cas_won_reply_mb"] = static_cast<double>(r.store.cas_won_reply_bytes) / 1e6;
  state.counters["watch_reply_mb"] = static_cast<double>(r.store.watch_reply_bytes) / 1e6;
  state.counters["invariants"] = r.invariants_checked ? 1 : 0;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
}

// The heartbeat interval a formation of `nodes` runs with. Up to 2,048 nodes it is PyTorch's
// default (5 s). Past that, as an operator of such a cluster would set it in the rdzv conf
// (`keep_alive_interval`): every heartbeat is a compare-and-set of the one state key, which
// commits about one write per store round trip (0.5-1 ms each way here, so some 700 a second),
// and N nodes beating every 5 s ask for N / 5 writes a second: at 4,096 nodes more than the key
// can commit, so the joins starve and the round never forms (measured: not within 600 s). From
// 4,096 nodes the interval is N * 15 ms, whole seconds (61 s at 4,096, 150 s at 10,000): the
// heartbeats take at most a tenth of the key's writes. PyTorch has the same single key and the
// same limit.
runtime::Duration keep_alive_for(uint32_t nodes) {
  if (nodes <= 2048) return 5s;
  return std::chrono::seconds(nodes * 15 / 1000);
}

void BM_RendezvousFormation(benchmark::State& state) {
  FormationSpec spec;
  spec.nodes = static_cast<uint32_t>(state.range(0));
  spec.keep_alive_interval = keep_alive_for(spec.nodes);
  spec.poll_interval = std::chrono::milliseconds(state.range(1));
  spec.spread_joins = state.range(2) != 0;
  spec.seed = kSeed;
  FormationResult last;
  for (auto _ : state) {
    last = run_formation(spec);
    state.SetIterationTime(last.build_wall_s + last.run_wall_s);
    if (!last.error.empty()) {
      state.SkipWithError(last.error.c_str());
      break;
    }
  }
  report(state, last);
  state.counters["keep_alive_s"] = std::chrono::duration<double>(spec.keep_alive_interval).count();
}

bool large_runs() {
  const char* on = std::getenv("DAGSIM_RENDEZVOUS_LARGE");
  return on != nullptr && std::string(on) == "1";
}

void formation_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"nodes", "poll_ms", "spread"});
  for (int spread : {0, 1}) {
    for (int poll_ms : {0, 1000}) {
      for (int nodes : {2, 4, 8, 16, 64, 256, 1000}) b->Args({nodes, poll_ms, spread});
      if (poll_ms == 0 && large_runs()) {
        for (int nodes : {2048, 4096, 10000}) b->Args({nodes, poll_ms, spread});
      }
    }
  }
}
BENCHMARK(BM_RendezvousFormation)
    ->Apply(formation_args)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The same seed twice: the same round, to the nanosecond and the trace hash.
void BM_RendezvousDeterminism(benchmark::State& state) {
  FormationSpec spec;
  spec.nodes = 64;
  spec.spread_joins = true;
  spec.seed = kSeed;
  for (auto _ : state) {
    const FormationResult a = run_formation(spec);
    const FormationResult b = run_formation(spec);
    state.SetIterationTime(a.build_wall_s + a.run_wall_s + b.build_wall_s + b.run_wall_s);
    if (!a.error.empty() || !b.error.empty()) {
      state.SkipWithError((a.error.empty() ? b.error : a.error).c_str());
      break;
    }
    if (a.round_time() != b.round_time() || a.trace_hash != b.trace_hash || a.store.requests != b.store.requests ||
        a.decodes != b.decodes) {
      state.SkipWithError(("one seed, two runs, two outcomes: " + std::to_string(ms(a.round_time())) + " ms vs " +
                           std::to_string(ms(b.round_time())) + " ms")
                              .c_str());
      break;
    }
    state.counters["virtual_ms"] = ms(a.round_time());
    state.counters["same_trace_hash"] = 1;
  }
}
BENCHMARK(BM_RendezvousDeterminism)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim::bench
