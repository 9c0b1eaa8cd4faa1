// parse_launch_flags (launch_flags.h): one table of torchrun 1.13's flags and dagsim's own, read as
// argparse reads them.
#include "launch/launch_flags.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::launch {

namespace {

// Where a value came from, for the refusal: "--max_restarts" or "PET_MAX_RESTARTS".
using Setter = void (*)(LaunchArgs& args, const std::string& value, const std::string& source);

struct Flag {
  std::vector<std::string> names;  // the first is torchrun 1.13's spelling; short flags last
  std::string env;                 // the variable read when the flag is not given
  const char* metavar;             // nullptr: a switch, which takes no value
  const char* default_text;
  const char* help;
  Setter set;
};

Error bad_value(const std::string& source, const std::string& value, const std::string& why) {
  return errors::invalid_argument(source + " " + quote(value) + ": " + why);
}

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

// Python's int(text) for what a user writes: surrounding spaces, a sign, decimal digits.
std::optional<int64_t> python_int(const std::string& raw) {
  const std::string text = trimmed(raw);
  const size_t digits = text.empty() || (text[0] != '-' && text[0] != '+') ? 0 : 1;
  if (text.size() == digits || text.size() > digits + 18) return std::nullopt;
  if (text.find_first_not_of("0123456789", digits) != std::string::npos) return std::nullopt;
  return std::stoll(text);
}

int64_t int_in(const std::string& value, const std::string& source, int64_t lo, int64_t hi) {
  const std::optional<int64_t> v = python_int(value);
  if (!v) throw bad_value(source, value, "invalid int value");
  if (*v < lo || *v > hi) throw bad_value(source, value, "expected " + std::to_string(lo) + " to " + std::to_string(hi));
  return *v;
}

// A count torchrun reads with int() and then requires non-negative (max_restarts, node_rank).
uint32_t count(const std::string& value, const std::string& source) {
  return static_cast<uint32_t>(int_in(value, source, 0, std::numeric_limits<uint32_t>::max()));
}

double python_float(const std::string& value, const std::string& source) {
  const std::string text = trimmed(value);
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) throw bad_value(source, value, "invalid float value");
  return v;
}

// A switch's variable, as check_env reads it: bool(int(value)).
bool switch_value(const std::string& value, const std::string& source) {
  const std::optional<int64_t> v = python_int(value);
  if (!v) throw bad_value(source, value, "a switch's variable is an integer: 1 on, 0 off");
  return *v != 0;
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {{"--nnodes"}, "PET_NNODES", "NNODES", "1:1",
       "Number of agents: N, or MIN:MAX for an elastic job (the static backend takes N only)",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.nnodes = v; }},
      {{"--nproc_per_node", "--nproc-per-node"}, "PET_NPROC_PER_NODE", "NPROC_PER_NODE", "1",
       "Worker processes on this host: a number, or auto/cpu for this host's cores",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.nproc_per_node = v; }},
      {{"--rdzv_backend", "--rdzv-backend"}, "PET_RDZV_BACKEND", "RDZV_BACKEND", "static",
       "static (torchrun's default: --master_addr, --master_port, --node_rank), c10d, dagsim, etcd or etcd-v2",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.rdzv_backend = v; }},
      {{"--rdzv_endpoint", "--rdzv-endpoint"}, "PET_RDZV_ENDPOINT", "RDZV_ENDPOINT", "\"\"",
       "HOST[:PORT] of the rendezvous store (c10d: port 29400 by default; etcd: 2379; static: "
       "MASTER_ADDR:MASTER_PORT when empty)",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.rdzv_endpoint = v; }},
      {{"--rdzv_id", "--rdzv-id"}, "PET_RDZV_ID", "RDZV_ID", "none", "The job's id: agents with the same one form one job",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.rdzv_id = v; }},
      {{"--rdzv_conf", "--rdzv-conf"}, "PET_RDZV_CONF", "RDZV_CONF", "\"\"",
       "KEY=VALUE,...: join_timeout, last_call_timeout, close_timeout, read_timeout, is_host, store_type, "
       "keep_alive_interval, keep_alive_max_attempt; static: timeout",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.rdzv_conf = v; }},
      {{"--standalone"}, "PET_STANDALONE", nullptr, "off",
       "One host: a c10d rendezvous this agent serves on a free port, with a fresh run id (any "
       "--rdzv_backend, --rdzv_endpoint, --rdzv_id is ignored)",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.standalone = switch_value(v, s); }},
      {{"--max_restarts", "--max-restarts"}, "PET_MAX_RESTARTS", "MAX_RESTARTS", "0",
       "Worker group failures before the job fails",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.max_restarts = count(v, s); }},
      {{"--monitor_interval", "--monitor-interval"}, "PET_MONITOR_INTERVAL", "MONITOR_INTERVAL", "5",
       "Seconds between two looks at the workers",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.monitor_interval_s = python_float(v, s); }},
      {{"--start_method", "--start-method"}, "PET_START_METHOD", "{spawn,fork,forkserver}", "spawn",
       "Read and checked, no effect: dagsim's workers are processes started by exec, as torchrun's are "
       "for a script (torchrun uses it only for --run_path's function)",
       [](LaunchArgs& a, const std::string& v, const std::string& s) {
         if (v != "spawn" && v != "fork" && v != "forkserver") {
           throw bad_value(s, v, "invalid choice (choose from 'spawn', 'fork', 'forkserver')");
         }
         a.start_method = v;
       }},
      {{"--role"}, "PET_ROLE", "ROLE", "default", "The workers' role (ROLE_NAME)",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.role = v; }},
      {{"--module", "-m"}, "PET_MODULE", nullptr, "off", "Run SCRIPT as a module: PYTHON -u -m SCRIPT ARGS",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.module = switch_value(v, s); }},
      {{"--no_python", "--no-python"}, "PET_NO_PYTHON", nullptr, "off", "Run SCRIPT itself (a program), not PYTHON -u SCRIPT",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.no_python = switch_value(v, s); }},
      {{"--run_path", "--run-path"}, "PET_RUN_PATH", nullptr, "off",
       "Run SCRIPT with runpy.run_path (PYTHON -u -c 'runpy.run_path(...)' SCRIPT ARGS: __name__ is "
       "\"__main__\", sys.argv is SCRIPT ARGS); wins over --no_python and --module, as torchrun's",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.run_path = switch_value(v, s); }},
      {{"--log_dir", "--log-dir"}, "PET_LOG_DIR", "LOG_DIR", "a new temporary folder",
       "Where the per-rank logs and error files go, under <LOG_DIR>/<RDZV_ID>_<random>",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.log_dir = v; }},
      {{"--redirects", "-r"}, "PET_REDIRECTS", "REDIRECTS", "0",
       "Worker streams written to files: 0 none, 1 stdout, 2 stderr, 3 both, or LOCAL_RANK:N,...",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.redirects = v; }},
      {{"--tee", "-t"}, "PET_TEE", "TEE", "0", "Worker streams written to files and to this terminal (same values)",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.tee = v; }},
      {{"--node_rank", "--node-rank"}, "PET_NODE_RANK", "NODE_RANK", "0",
       "static: this agent's group rank, 0 to NNODES-1; node rank 0 serves the store",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.node_rank = count(v, s); }},
      {{"--master_addr", "--master-addr"}, "PET_MASTER_ADDR", "MASTER_ADDR", "127.0.0.1",
       "static: the host of node rank 0, where the store is; the workers' MASTER_ADDR",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.master_addr = v; }},
      {{"--master_port", "--master-port"}, "PET_MASTER_PORT", "MASTER_PORT", "29500",
       "static: the store's port on MASTER_ADDR; the workers' MASTER_PORT",
       [](LaunchArgs& a, const std::string& v, const std::string& s) {
         a.master_port = static_cast<uint32_t>(int_in(v, s, 0, 65535));
       }},
      {{"--events"}, "PET_EVENTS", "EVENTS", "none", "dagsim: append the agent's events here, one JSON object per line",
       [](LaunchArgs& a, const std::string& v, const std::string&) { a.events_path = v; }},
      {{"--stop_grace", "--stop-grace"}, "PET_STOP_GRACE", "STOP_GRACE", "30",
       "dagsim: seconds from SIGTERM to SIGKILL when stopping workers",
       [](LaunchArgs& a, const std::string& v, const std::string& s) { a.stop_grace_s = python_float(v, s); }},
      {{"--python"}, "DAGSIM_PYTHON", "PYTHON", "PYTHON_EXEC if set, else python3 from PATH",
       "dagsim: the workers' interpreter (torchrun runs the Python that runs torchrun; dagsim is not Python)",
       [](LaunchArgs& a, const std::string& v, const std::string& s) {
         if (v.empty()) throw bad_value(s, v, "the interpreter cannot be empty");
         a.python = v;
       }},
  };
  return table;
}

// Flags users bring from elsewhere, with what to do instead.
std::optional<std::string> known_elsewhere(const std::string& name) {
  if (name == "--local_addr" || name == "--local-addr") {
    return "--local_addr is torchrun 2.x's, not 1.13's: dagsim launch names this host by its fully qualified "
           "domain name, as torchrun 1.13 does";
  }
  if (name == "--use_env" || name == "--use-env") {
    return "--use_env is torch.distributed.launch's: torchrun and dagsim launch always give workers LOCAL_RANK "
           "in their environment";
  }
  if (name == "--local_rank" || name == "--local-rank") {
    return "--local_rank is the workers' argument under torch.distributed.launch: they read LOCAL_RANK from their "
           "environment";
  }
  return std::nullopt;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

Error unknown_option(const std::string& name) {
  if (std::optional<std::string> hint = known_elsewhere(name)) {
    return errors::invalid_argument("unrecognized option " + quote(name) + ": " + *hint);
  }
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& spelling : launch_flag_spellings()) {
    const size_t d = edit_distance(name, spelling);
    if (d < best_distance) best = spelling, best_distance = d;
  }
  std::string text = "unrecognized option " + quote(name);
  if (best_distance <= std::max<size_t>(2, name.size() / 3)) text += " (did you mean " + best + "?)";
  return errors::invalid_argument(text + "; it would not reach the workers: their arguments follow SCRIPT");
}

// The flag a long option names: an exact spelling, else the one flag a unique prefix names.
const Flag& long_flag(const std::string& name) {
  std::vector<const Flag*> matches;
  for (const Flag& flag : flags()) {
    for (const std::string& spelling : flag.names) {
      if (spelling == name) return flag;
    }
  }
  std::vector<std::string> spellings;
  for (const Flag& flag : flags()) {
    for (const std::string& spelling : flag.names) {
      if (spelling.size() > 2 && spelling.starts_with(name)) {
        if (std::find(matches.begin(), matches.end(), &flag) == matches.end()) matches.push_back(&flag);
        spellings.push_back(spelling);
      }
    }
  }
  if (matches.size() == 1) return *matches.front();
  if (matches.empty()) throw unknown_option(name);
  std::string all;
  for (const std::string& s : spellings) all += (all.empty() ? "" : ", ") + s;
  throw errors::invalid_argument("ambiguous option " + quote(name) + " could match " + all);
}

const Flag* short_flag(char c) {
  for (const Flag& flag : flags()) {
    for (const std::string& spelling : flag.names) {
      if (spelling.size() == 2 && spelling[1] == c) return &flag;
    }
  }
  return nullptr;
}

// argparse takes "-5" as a positional when no option looks like a negative number.
bool negative_number(const std::string& token) {
  return token.size() > 1 && token[0] == '-' && python_int(token).has_value();
}

bool is_option(const std::string& token) { return token.size() > 1 && token[0] == '-' && !negative_number(token); }

}  // namespace

std::vector<std::string> launch_flag_spellings() {
  std::vector<std::string> all = {"--help", "-h"};
  for (const Flag& flag : flags()) all.insert(all.end(), flag.names.begin(), flag.names.end());
  return all;
}

ParsedLaunch parse_launch_flags(const std::vector<std::string>& argv, const EnvLookup& env) {
  ParsedLaunch parsed;
  std::vector<const Flag*> given;
  const auto apply = [&](const Flag& flag, const std::string& spelled, std::optional<std::string> value) {
    if (flag.metavar == nullptr && value) {
      throw errors::invalid_argument(spelled + ": ignored explicit argument " + quote(*value) + " (a switch takes no value)");
    }
    flag.set(parsed.args, value.value_or("1"), flag.names.front());
    given.push_back(&flag);
  };
  std::vector<std::string> tokens = argv;
  size_t i = 0;
  for (; i < tokens.size(); ++i) {
    const std::string token = tokens[i];
    if (token == "--") {
      ++i;
      break;
    }
    if (!is_option(token)) break;  // the script: it and all after it are the workers'
    if (token == "-h" || token == "--help") {
      parsed.help = true;
      return parsed;
    }
    const Flag* flag = nullptr;
    std::string spelled;
    std::optional<std::string> attached;
    if (token.starts_with("--")) {
      const size_t eq = token.find('=');
      spelled = token.substr(0, eq);
      if (eq != std::string::npos) attached = token.substr(eq + 1);
      if (spelled.size() > 2 && std::string_view("--help").starts_with(spelled)) {  // no other flag starts --h
        parsed.help = true;
        return parsed;
      }
      flag = &long_flag(spelled);
    } else {
      spelled = token.substr(0, 2);
      flag = short_flag(token[1]);
      if (flag == nullptr) throw unknown_option(token.size() > 2 && token[1] != '=' ? token.substr(0, token.find('=')) : spelled);
      if (token.size() > 2) attached = token[2] == '=' ? token.substr(3) : token.substr(2);
      if (flag->metavar == nullptr && attached) {
        // argparse's "-mt3": a switch, then more short flags in the same token. What follows the
        // switch must be a short flag, as argparse requires ("-m00" is refused there too): were it
        // taken for the script, a token the user never wrote would reach the workers.
        if ((*attached)[0] == '=' || short_flag((*attached)[0]) == nullptr) {
          throw errors::invalid_argument(spelled + ": ignored explicit argument " + quote(*attached) + " (a switch takes no value)");
        }
        apply(*flag, spelled, std::nullopt);
        tokens[i] = "-" + *attached;
        --i;
        continue;
      }
    }
    if (flag->metavar == nullptr) {
      apply(*flag, spelled, attached);
      continue;
    }
    if (!attached) {
      if (i + 1 >= tokens.size() || is_option(tokens[i + 1])) throw errors::invalid_argument(spelled + ": expected one argument");
      attached = tokens[++i];
    }
    apply(*flag, spelled, attached);
  }
  if (i < tokens.size()) parsed.args.command.assign(tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens.end());
  // A flag not given takes its variable, as argparse's defaults do (a bad one is refused only then).
  const auto was_given = [&](const Flag& f) { return std::find(given.begin(), given.end(), &f) != given.end(); };
  for (const Flag& flag : flags()) {
    if (was_given(flag)) continue;
    std::optional<std::string> value = env(flag.env);
    if (!value && flag.env == "DAGSIM_PYTHON") value = env("PYTHON_EXEC");  // torchrun's own override
    if (!value || (value->empty() && flag.metavar != nullptr && flag.env != "DAGSIM_PYTHON")) continue;
    flag.set(parsed.args, *value, flag.env);
    given.push_back(&flag);
  }
  const auto named = [&](const char* name) {
    for (const Flag* f : given) {
      if (f->names.front() == name) return true;
    }
    return false;
  };
  parsed.given = GivenFlags{named("--nnodes"), named("--rdzv_backend"), named("--rdzv_endpoint"), named("--rdzv_id"),
                            named("--node_rank") || named("--master_addr") || named("--master_port")};
  if (parsed.args.command.empty()) {
    throw errors::invalid_argument("the following arguments are required: SCRIPT (the training script, then its arguments)");
  }
  return parsed;
}

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::string launch_help() {
  std::ostringstream out;
  out << "usage: dagsim launch [OPTIONS] SCRIPT [ARGS...]\n"
         "\n"
         "torchrun 1.13's interface on dagsim's elastic agent: run a training script's worker processes on this host,\n"
         "in a job with the other hosts' agents (docs/torchrun.md, docs/cli.md).\n"
         "\n"
         "positional arguments:\n"
         "  SCRIPT [ARGS...]  The training script and its arguments, given to every worker untouched: workers run\n"
         "                    PYTHON -u SCRIPT ARGS (-m: PYTHON -u -m SCRIPT ARGS; --no_python: SCRIPT ARGS).\n"
         "                    The first token that is not an option is SCRIPT; `--` ends the options.\n"
         "\n"
         "options (long flags are also spelled with '-' for '_', as --nproc-per-node; any unique prefix stands\n"
         "for its flag, as --nproc; a flag not given is read from the variable in brackets):\n"
         "  -h, --help  Print this and exit\n";
  for (const Flag& flag : flags()) {
    std::string names;
    for (auto it = flag.names.rbegin(); it != flag.names.rend(); ++it) {
      if (it->size() == 2) names += *it + ", ";
    }
    std::string longs;
    for (const std::string& n : flag.names) {
      if (n.size() > 2) longs += (longs.empty() ? "" : "/") + n;
    }
    names += longs;
    if (flag.metavar != nullptr) names += std::string(" ") + flag.metavar;
    out << "  " << names << "  [" << flag.env << (flag.env == "DAGSIM_PYTHON" ? ", PYTHON_EXEC" : "")
        << "; default: " << flag.default_text << "]\n      " << flag.help << "\n";
  }
  out << "\n"
         "PYTHON, the workers' interpreter: --python, else $DAGSIM_PYTHON, else $PYTHON_EXEC (torchrun's), else\n"
         "python3 from PATH. torchrun runs the Python that runs torchrun; choose the one that has torch.\n"
         "Exit status: 0 the job succeeded, 1 it failed, 2 bad usage (nothing started), 128+N stopped by signal N.\n";
  return out.str();
}

}  // namespace dagsim::launch
