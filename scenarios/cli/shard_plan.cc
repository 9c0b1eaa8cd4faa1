// Which seeds a shard runs, and where its index comes from (shard_plan.h).
#include "scenarios/cli/shard_plan.h"

#include <cstdlib>
#include <limits>
#include <optional>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::cli {
namespace {

// Decimal digits only, at most 2^64 - 1 (as parse_seed in commands.h, which lives in the binary).
std::optional<uint64_t> whole_number(std::string_view text) {
  uint64_t out = 0;
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (out > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    out = out * 10 + digit;
  }
  return out;
}

// A variable that must be a whole number when it is set; nullopt when unset.
std::optional<uint64_t> env_number(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  if (value == nullptr) return std::nullopt;
  const std::optional<uint64_t> n = whole_number(value);
  if (!n) throw errors::invalid_argument(std::string(name) + "=" + quote(value) + " is not a whole number");
  return n;
}

uint64_t shard_count_of(std::string_view text, const std::string& spec) {
  const std::optional<uint64_t> n = whole_number(text);
  if (!n || *n == 0 || *n > kMaxShards) {
    throw errors::invalid_argument("--shard " + printable(spec) + ": expected I/N or N, N a whole number from 1 to " +
                                   std::to_string(kMaxShards) + " and I from 0 to N-1");
  }
  return *n;
}

// The index Slurm gives an array task: its id's place in the array.
std::optional<uint64_t> slurm_index(const EnvLookup& env, uint64_t count) {
  const std::optional<uint64_t> id = env_number(env, "SLURM_ARRAY_TASK_ID");
  if (!id) return std::nullopt;
  const uint64_t min = env_number(env, "SLURM_ARRAY_TASK_MIN").value_or(0);
  const uint64_t step = env_number(env, "SLURM_ARRAY_TASK_STEP").value_or(1);
  if (*id < min || step == 0 || (*id - min) % step != 0) {
    throw errors::invalid_argument("SLURM_ARRAY_TASK_ID=" + std::to_string(*id) + " is not on the array's steps (SLURM_ARRAY_TASK_MIN=" +
                                   std::to_string(min) + ", SLURM_ARRAY_TASK_STEP=" + std::to_string(step) + ")");
  }
  if (const std::optional<uint64_t> tasks = env_number(env, "SLURM_ARRAY_TASK_COUNT"); tasks && *tasks != count) {
    throw errors::invalid_argument("--shard " + std::to_string(count) + " in a job array of " + std::to_string(*tasks) +
                                   " tasks (SLURM_ARRAY_TASK_COUNT): give the array " + std::to_string(count) +
                                   " tasks (sbatch --array=0-" + std::to_string(count - 1) + "), or --shard " + std::to_string(*tasks));
  }
  return (*id - min) / step;
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

SeedShard resolve_shard(const std::string& spec, const EnvLookup& env) {
  SeedShard shard;
  if (spec.empty()) return shard;
  const size_t slash = spec.find('/');
  if (slash != std::string::npos) {
    shard.count = shard_count_of(std::string_view(spec).substr(slash + 1), spec);
    const std::optional<uint64_t> index = whole_number(std::string_view(spec).substr(0, slash));
    if (!index) shard_count_of("", spec);  // the same message: I is not a whole number
    shard.index = *index;
    shard.source = "--shard";
  } else {
    shard.count = shard_count_of(spec, spec);
    if (const std::optional<uint64_t> index = slurm_index(env, shard.count)) {
      shard.index = *index;
      shard.source = "SLURM_ARRAY_TASK_ID";
    } else if (const std::optional<uint64_t> k8s = env_number(env, "JOB_COMPLETION_INDEX")) {
      shard.index = *k8s;
      shard.source = "JOB_COMPLETION_INDEX";
    } else {
      throw errors::invalid_argument("--shard " + spec + " needs this shard's index: give --shard I/" + spec +
                                     ", or run it as a task of a Slurm job array (SLURM_ARRAY_TASK_ID) or a pod of a "
                                     "Kubernetes Indexed Job (JOB_COMPLETION_INDEX); neither is set");
    }
  }
  if (shard.index >= shard.count) {
    throw errors::invalid_argument("shard index " + std::to_string(shard.index) + " (from " + shard.source + ") is not below the " +
                                   std::to_string(shard.count) + " shards: indices run from 0 to " + std::to_string(shard.count - 1));
  }
  return shard;
}

uint64_t shard_seed_count(uint64_t first, uint64_t last, const SeedShard& shard, bool* every) {
  *every = false;
  const uint64_t total = last - first + 1;  // 0: all 2^64 seeds
  if (total == 0) {
    if (shard.count == 1) {
      *every = true;
      return 0;
    }
    // ceil((2^64 - index) / count), without 2^64.
    return (std::numeric_limits<uint64_t>::max() - shard.index) / shard.count + 1;
  }
  if (shard.index >= total) return 0;
  return (total - shard.index - 1) / shard.count + 1;
}

std::string expand_shard_pattern(const std::string& pattern, const SeedShard& shard) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (next == 'i') {
      out += std::to_string(shard.index);
    } else if (next == 'n') {
      out += std::to_string(shard.count);
    } else if (next == '%') {
      out += '%';
    } else {
      throw errors::invalid_argument("--results " + printable(pattern, kPathMax) +
                                     ": % must be followed by i (the shard's index), n (the shard count) or % (a %)");
    }
    ++i;
  }
  return out;
}

}  // namespace dagsim::cli
