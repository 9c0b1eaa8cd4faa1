// SeedShard: which seeds of a `dagsim check` sweep one shard runs, so a sweep can be split over a
// cluster scheduler's tasks (a Slurm job array, a Kubernetes Indexed Job) and merged back
// (`dagsim merge`, shard_merge.h).
//
// Dealing: the seeds of A..B go round-robin, seed s to shard (s - A) % N, so every shard gets an
// even share of the range whatever its size, and the shards together hold every seed once.
//
// The index: `--shard I/N` gives it; `--shard N` reads it from the scheduler, Slurm's
// SLURM_ARRAY_TASK_ID (less SLURM_ARRAY_TASK_MIN, divided by SLURM_ARRAY_TASK_STEP, where set) or
// Kubernetes' JOB_COMPLETION_INDEX. An array whose task count (SLURM_ARRAY_TASK_COUNT) is not N is
// refused up front, since some shards would never run, or some tasks would have none.
//
// Promises: resolve_shard returns a shard with index < count <= kMaxShards or throws
// Error(invalid_argument) with one printable line saying what is wrong and what to give instead;
// shard_seed_count and shard_seed never overflow, even over all 2^64 seeds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace dagsim::cli {

// More shards than any scheduler runs tasks of one array (Kubernetes allows 10^5 completions).
inline constexpr uint64_t kMaxShards = 100000;

struct SeedShard {
  uint64_t index = 0;
  uint64_t count = 1;
  std::string source = "--shard";  // where the index came from: --shard, SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX

  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// A variable of the process's environment, or null; a test passes its own.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();

// `spec` is "I/N" or "N" (the index then from `env`); "" is the whole sweep, shard 0/1.
SeedShard resolve_shard(const std::string& spec, const EnvLookup& env);

// How many seeds of first..last the shard runs; `*every` is set when that is all 2^64 seeds
// (one shard of the full range), which a uint64_t cannot count.
uint64_t shard_seed_count(uint64_t first, uint64_t last, const SeedShard& shard, bool* every);
// The shard's k-th seed. REQUIRES: k < shard_seed_count(...) (or *every).
inline uint64_t shard_seed(uint64_t first, const SeedShard& shard, uint64_t k) { return first + shard.index + k * shard.count; }
// Whether `seed` of first..last belongs to the shard.
inline bool in_shard(uint64_t first, uint64_t last, const SeedShard& shard, uint64_t seed) {
  return seed >= first && seed <= last && (seed - first) % shard.count == shard.index;
}

// `pattern` with %i as the shard's index, %n as the count and %% as %: where --results writes,
// so one command line serves every task. Any other % is refused (Error(invalid_argument)).
std::string expand_shard_pattern(const std::string& pattern, const SeedShard& shard);

}  // namespace dagsim::cli
