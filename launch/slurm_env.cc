// Slurm's environment as `dagsim launch`'s defaults (slurm_env.h), and the host-list reader.
#include "launch/slurm_env.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/rendezvous/rendezvous_settings.h"

extern char** environ;

namespace dagsim::launch {

namespace {

struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;  // digits of LO as written: every number of the range is padded to it
};

// A piece of one host-list item: literal name characters, or a bracket group (ranges not empty).
struct Piece {
  std::string text;
  std::vector<Range> ranges;
};
using Item = std::vector<Piece>;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

std::string padded(uint64_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// One pass over the text, left to right; every loop advances the cursor, so the work is linear
// in the text's length, which is bounded before the pass starts.
class HostlistReader {
 public:
  HostlistReader(std::string_view text, std::string_view variable) : text_(text), variable_(variable) {}

  std::vector<Item> read() {
    if (text_.empty()) fail("an empty host list");
    if (text_.size() > kMaxHostlistChars) fail("longer than " + std::to_string(kMaxHostlistChars) + " characters");
    std::vector<Item> items;
    while (true) {
      items.push_back(read_item());
      if (at_ == text_.size()) return items;
      ++at_;  // the ',' that ends the item (read_item stops only there or at the end)
      if (at_ == text_.size()) fail("a comma at the end");
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw errors::invalid_argument(std::string(variable_) + " " + quote(text_, 200) + ": " + why +
                                   " (expected Slurm's host list, such as node[01-04,07],gpu5)");
  }

 private:
  std::string where() const { return " at character " + std::to_string(at_ + 1); }

  Item read_item() {
    Item item;
    size_t name_chars = 0;
    while (at_ < text_.size() && text_[at_] != ',') {
      Piece piece;
      if (text_[at_] == '[') {
        ++at_;
        piece.ranges = read_ranges();
        size_t widest = 0;
        for (const Range& r : piece.ranges) widest = std::max({widest, r.width, std::to_string(r.hi).size()});
        name_chars += widest;
      } else if (name_char(text_[at_])) {
        const size_t start = at_;
        while (at_ < text_.size() && name_char(text_[at_])) ++at_;
        piece.text = std::string(text_.substr(start, at_ - start));
        name_chars += piece.text.size();
      } else {
        fail("unexpected " + quote(text_.substr(at_, 1)) + where());
      }
      item.push_back(std::move(piece));
    }
    if (item.empty()) fail("an empty host name" + where());
    if (name_chars > kMaxHostNameChars) fail("a host name longer than " + std::to_string(kMaxHostNameChars) + " characters");
    return item;
  }

  // After '[': R,R,...] where R is N or LO-HI; consumes the ']'.
  std::vector<Range> read_ranges() {
    std::vector<Range> ranges;
    while (true) {
      Range range;
      const std::string lo = read_number();
      range.width = lo.size();
      range.lo = range.hi = std::stoull(lo);
      if (at_ < text_.size() && text_[at_] == '-') {
        ++at_;
        range.hi = std::stoull(read_number());
        if (range.hi < range.lo) fail("a range from " + lo + " down to " + std::to_string(range.hi) + where());
      }
      ranges.push_back(range);
      if (at_ == text_.size()) fail("a '[' never closed");
      const char c = text_[at_++];
      if (c == ']') return ranges;
      if (c != ',') fail("unexpected " + quote(std::string(1, c)) + " in a range" + " at character " + std::to_string(at_));
    }
  }

  std::string read_number() {
    const size_t start = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
    if (at_ == start) fail("a range without a number" + where());
    if (at_ - start > kMaxRangeDigits) fail("a range number of more than " + std::to_string(kMaxRangeDigits) + " digits");
    return std::string(text_.substr(start, at_ - start));
  }

  std::string_view text_;
  std::string_view variable_;
  size_t at_ = 0;
};

uint64_t numbers_in(const Piece& group) {
  uint64_t n = 0;
  for (const Range& r : group.ranges) n += r.hi - r.lo + 1;  // each at most 10^9: no overflow
  return n;
}

// Appends the item's hosts to `out` until it holds `limit`: the groups count like an odometer,
// the last fastest.
void expand(const Item& item, size_t limit, std::vector<std::string>& out) {
  struct Position {
    size_t range = 0;
    uint64_t value = 0;
  };
  std::vector<Position> at(item.size());
  for (size_t p = 0; p < item.size(); ++p) {
    if (!item[p].ranges.empty()) at[p].value = item[p].ranges[0].lo;
  }
  while (out.size() < limit) {
    std::string host;
    for (size_t p = 0; p < item.size(); ++p) {
      host += item[p].ranges.empty() ? item[p].text : padded(at[p].value, item[p].ranges[at[p].range].width);
    }
    out.push_back(std::move(host));
    // The last group not at its end steps on; every group after it starts again.
    bool stepped = false;
    for (size_t p = item.size(); p-- > 0 && !stepped;) {
      const std::vector<Range>& ranges = item[p].ranges;
      if (ranges.empty()) continue;
      if (at[p].value < ranges[at[p].range].hi) {
        ++at[p].value;
        stepped = true;
      } else if (at[p].range + 1 < ranges.size()) {
        at[p].value = ranges[++at[p].range].lo;
        stepped = true;
      } else {
        at[p] = {0, ranges[0].lo};
      }
    }
    if (!stepped) return;  // every group wrapped, or there is none: the item's hosts are all out
  }
}

const std::string* lookup(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// The first of `names` that is set (Slurm keeps older spellings beside the new ones).
std::pair<const char*, const std::string*> first_set(const std::map<std::string, std::string>& env,
                                                     std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const std::string* value = lookup(env, name)) return {name, value};
  }
  return {nullptr, nullptr};
}

uint64_t whole(const char* variable, const std::string& value, uint64_t lo, uint64_t hi, const std::string& what) {
  const bool digits = !value.empty() && value.size() <= 19 && value.find_first_not_of("0123456789") == std::string::npos;
  const uint64_t v = digits ? std::stoull(value) : 0;
  if (!digits || v < lo || v > hi) {
    throw errors::invalid_argument(std::string(variable) + " " + quote(value, 200) + ": expected " + what + ", a whole number from " +
                                   std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

}  // namespace

Hostlist parse_hostlist(std::string_view text, std::string_view variable, size_t limit) {
  HostlistReader reader(text, variable);
  const std::vector<Item> items = reader.read();
  Hostlist list;
  // Counted before anything is expanded: a product of group sizes, checked against the bound at
  // every step so it never overflows.
  for (const Item& item : items) {
    uint64_t hosts = 1;
    for (const Piece& piece : item) {
      if (piece.ranges.empty()) continue;
      const uint64_t n = numbers_in(piece);
      if (n > kMaxHostlistHosts || hosts > kMaxHostlistHosts / n) reader.fail("more than " + std::to_string(kMaxHostlistHosts) + " hosts");
      hosts *= n;
    }
    list.count += hosts;
    if (list.count > kMaxHostlistHosts) reader.fail("more than " + std::to_string(kMaxHostlistHosts) + " hosts");
  }
  for (const Item& item : items) {
    if (list.hosts.size() >= limit) break;
    expand(item, limit, list.hosts);
  }
  return list;
}

std::vector<std::string> apply_slurm_defaults(LaunchArgs& args, const GivenFlags& given,
                                              const std::map<std::string, std::string>& env) {
  std::vector<std::string> lines;
  const auto [id_variable, job_id] = first_set(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (job_id == nullptr || args.standalone) return lines;
  if (!given.rdzv_id) {
    whole(id_variable, *job_id, 1, UINT64_MAX / 2, "a job id");
    args.rdzv_id = *job_id;
    lines.push_back("from Slurm: --rdzv_id " + args.rdzv_id + " (" + id_variable + ")");
  }
  // Inside an srun step every task is an agent; outside one (sbatch's script, salloc's shell) the
  // job's nodes are what a torchrun user counts.
  const std::string* step_tasks = lookup(env, "SLURM_STEP_NUM_TASKS");
  const uint32_t max_nodes = rendezvous::kMaxRendezvousNodes;
  if (!given.nnodes) {
    const auto [variable, value] =
        step_tasks != nullptr ? std::pair{"SLURM_STEP_NUM_TASKS", step_tasks} : first_set(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"});
    if (value != nullptr) {
      args.nnodes = std::to_string(whole(variable, *value, 1, max_nodes, "the number of agents"));
      lines.push_back("from Slurm: --nnodes " + args.nnodes + " (" + variable +
                      (step_tasks != nullptr ? ": one agent per task of this srun step)" : ": one agent per node of the job)"));
    }
    // Counting tasks is right only if the user meant a task per agent: say so when it differs
    // from torchrun's one agent per node.
    if (step_tasks != nullptr) {
      const std::string* step_nodes = lookup(env, "SLURM_STEP_NUM_NODES");
      const uint64_t tasks = whole("SLURM_STEP_NUM_TASKS", *step_tasks, 1, max_nodes, "the number of agents");
      const uint64_t nodes = step_nodes != nullptr ? whole("SLURM_STEP_NUM_NODES", *step_nodes, 1, max_nodes, "the number of nodes") : tasks;
      if (tasks > nodes) {
        lines.push_back("note: this srun step runs " + std::to_string(tasks) + " agents on " + std::to_string(nodes) +
                        " node(s); torchrun's layout is one agent per node (srun --ntasks-per-node=1), each with "
                        "--nproc_per_node workers");
      }
    }
  }
  if (!given.rdzv_backend && given.static_flags) {
    lines.push_back("kept: --rdzv_backend " + args.rdzv_backend +
                    " (--node_rank, --master_addr or --master_port given: torchrun's static recipe, not Slurm's c10d)");
  } else if (!given.rdzv_backend) {
    args.rdzv_backend = "c10d";
    lines.push_back("from Slurm: --rdzv_backend c10d (a Slurm job's agents meet on the store its first node serves)");
  }
  // Only c10d's store is one an agent serves; an etcd server is wherever the user runs it.
  const bool served = args.rdzv_backend == "c10d" || args.rdzv_backend == "dagsim";
  if (!given.rdzv_endpoint && served) {
    const auto [variable, value] = step_tasks != nullptr ? first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
                                                         : first_set(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    if (value != nullptr) {
      const Hostlist nodes = parse_hostlist(*value, variable, 1);
      args.rdzv_endpoint = nodes.hosts.front();
      lines.push_back("from Slurm: --rdzv_endpoint " + args.rdzv_endpoint + " (the first of " + std::to_string(nodes.count) +
                      " node(s) in " + variable + ", on the backend's default port)");
    }
  }
  return lines;
}

std::map<std::string, std::string> slurm_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t equals = text.find('=');
    if (text.rfind("SLURM_", 0) != 0 || equals == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

}  // namespace dagsim::launch
