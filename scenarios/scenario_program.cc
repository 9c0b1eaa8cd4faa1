// The program workload of the scenario loader (scenario_program.h): leaf tensors, statements and
// the backward call, each checked as strictly as the rest of the file.
#include "scenarios/scenario_program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/tensor/dtype.h"

namespace dagsim::scenarios::detail {
namespace {

constexpr uint32_t kDriver = 0;
constexpr int64_t kMaxRank = 8;
constexpr int64_t kMaxNumel = 10'000'000;
// Any finite number (nan and inf are never in range).
constexpr Range kFinite{-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), true, true};

// The non-tensor arguments of a statement, stored in Statement::attributes. `whole`: an index or
// a count, so it must be a whole number (a float such as 2.0 is fine).
struct AttributeKey {
  std::string_view name;
  bool whole;
};
constexpr std::array<AttributeKey, 7> kAttributes = {{
    {"dim", true},
    {"dim0", true},
    {"dim1", true},
    {"start", true},
    {"length", true},
    {"keepdim", false},
    {"exponent", false},
}};

constexpr std::array<std::string_view, 6> kTensorKeys = {"name", "shape", "values", "init", "requires_grad", "on"};
constexpr std::array<std::string_view, 13> kStatementKeys = {"out",   "call",   "args",    "via",      "on",
                                                             "dim",   "dim0",   "dim1",    "start",    "length",
                                                             "keepdim", "exponent", "to"};
constexpr std::array<std::string_view, 3> kBackwardKeys = {"roots", "retain_graph", "calls"};
constexpr std::array<std::string_view, 2> kInits = {"uniform", "normal"};
constexpr std::array<std::string_view, 3> kVias = {"local", "rpc_sync", "rpc_async"};

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string index_path(std::string_view path, size_t i) { return std::string(path) + "[" + std::to_string(i) + "]"; }

bool is_identifier(std::string_view s) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return !s.empty() && letter(s[0]) && std::all_of(s.begin() + 1, s.end(), [&](char c) { return letter(c) || digit(c); });
}

// The names defined so far (tensors, then statement outputs in order), each with the path that
// defined it, for "already defined" messages.
class Defined {
 public:
  bool contains(const std::string& name) const { return defined_.count(name) != 0; }

  // Reads `name` (or `out`) of `t`: an identifier not defined before.
  std::string define(const TomlReader& reader, const Table& t, std::string_view key) {
    const toml::node& node = reader.required(t, key);
    const std::string path = t.key_path(key);
    std::string name = reader.string(node, path);
    if (!is_identifier(name)) {
      reader.fail(node, path, quoted(name) + " is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (auto it = defined_.find(name); it != defined_.end()) {
      reader.fail(node, path, quoted(name) + " is already defined by " + it->second);
    }
    defined_.emplace(name, t.path);
    return name;
  }

 private:
  std::map<std::string, std::string> defined_;
};

ProgramTensor read_tensor(const TomlReader& reader, const Table& t, Defined& names) {
  reader.check_keys(t, kTensorKeys, "keys in tensors");
  ProgramTensor tensor;
  tensor.name = names.define(reader, t, "name");

  const std::string shape_path = t.key_path("shape");
  const toml::array& dims = reader.array(reader.required(t, "shape"), shape_path);
  if (static_cast<int64_t>(dims.size()) > kMaxRank) {
    reader.fail(dims, shape_path, "rank " + std::to_string(dims.size()) + " is more than " + std::to_string(kMaxRank));
  }
  // Saturates just above the limit, so a huge shape cannot overflow and a 0 still gives 0.
  int64_t numel = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = reader.integer(dims[i], index_path(shape_path, i), 0, kMaxNumel);
    tensor.shape.push_back(dim);
    numel = std::min(numel * dim, kMaxNumel + 1);
  }
  if (numel > kMaxNumel) {
    reader.fail(dims, shape_path,
                shape_str(tensor.shape) + " has more than " + std::to_string(kMaxNumel) + " elements");
  }

  const toml::node* values = t.get("values");
  const toml::node* init = t.get("init");
  if (values != nullptr && init != nullptr) {
    reader.fail(*init, t.key_path("init"), "not allowed with values; give one or the other");
  }
  if (values != nullptr) {
    const std::string path = t.key_path("values");
    const toml::array& elements = reader.array(*values, path);
    if (static_cast<int64_t>(elements.size()) != numel) {
      reader.fail(*values, path,
                  std::to_string(elements.size()) + " values; shape " + shape_str(tensor.shape) + " needs " +
                      std::to_string(numel));
    }
    tensor.init = ProgramTensor::Init::values;
    for (size_t i = 0; i < elements.size(); ++i) {
      tensor.values.push_back(reader.number(elements[i], index_path(path, i), kFinite));
    }
  } else {
    const size_t index = reader.opt_choice(t, "init", kInits).value_or(0);
    tensor.init = index == 0 ? ProgramTensor::Init::uniform : ProgramTensor::Init::normal;
  }

  tensor.requires_grad = reader.opt_boolean(t, "requires_grad").value_or(true);
  if (std::optional<uint32_t> on = reader.opt_node_ref(t, "on"); on && *on != kDriver) {
    reader.fail(*t.get("on"), t.key_path("on"),
                "leaves must live on the driver (" + reader.cluster().node_name(kDriver) + ")");
  }
  return tensor;
}

Statement read_statement(const TomlReader& reader, const Table& t, Defined& names) {
  reader.check_keys(t, kStatementKeys, "keys in program");
  Statement s;

  // The call first, then the arguments, then the output: a statement cannot use its own output.
  const std::string call_path = t.key_path("call");
  s.call = std::string(kProgramFunctions[reader.choice(reader.required(t, "call"), call_path, kProgramFunctions)]);

  const std::string args_path = t.key_path("args");
  const toml::node& args_node = reader.required(t, "args");
  const toml::array& args = reader.array(args_node, args_path);
  if (args.empty()) reader.fail(args_node, args_path, "must name at least one tensor");
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = reader.string(args[i], index_path(args_path, i));
    if (!names.contains(name)) reader.fail(args[i], args_path, quoted(name) + " is not a tensor or an earlier output");
    s.args.push_back(std::move(name));
  }

  if (const toml::node* via = t.get("via")) {
    const std::string path = t.key_path("via");
    if (via->is_string() && via->as_string()->get() == "remote") {
      reader.fail(*via, path, "\"remote\" (RRefs) is not supported yet; allowed: " + join_names(kVias));
    }
    s.via = static_cast<Via>(reader.choice(*via, path, kVias));
  }
  const std::string via_name = quoted(kVias[static_cast<size_t>(s.via)]);
  if (s.via == Via::local) {
    if (const toml::node* on = t.get("on")) {
      reader.fail(*on, t.key_path("on"), "does not apply to via " + via_name + " (a local call runs on the driver)");
    }
    s.on = kDriver;
  } else {
    s.on = reader.node_ref(reader.required(t, "on", " for via " + via_name), t.key_path("on"));
  }

  for (const AttributeKey& key : kAttributes) {
    const toml::node* node = t.get(key.name);
    if (node == nullptr) continue;
    const std::string path = t.key_path(key.name);
    const double v = reader.number_or_boolean(*node, path, kFinite);
    if (key.whole && v != std::floor(v)) reader.fail(*node, path, format_number(v) + " is not a whole number");
    s.attributes.emplace(std::string(key.name), v);
  }
  const bool relay = s.call.starts_with(kRelayPrefix);
  if (relay) {
    const uint32_t to = reader.node_ref(reader.required(t, "to", " for call " + quoted(s.call)), t.key_path("to"));
    s.attributes.emplace("to", static_cast<double>(to));
  } else if (const toml::node* to = t.get("to")) {
    reader.fail(*to, t.key_path("to"), "does not apply to call " + quoted(s.call) + " (only relay_* calls take it)");
  }

  s.out = names.define(reader, t, "out");
  return s;
}

}  // namespace

Program read_program(const TomlReader& reader, const toml::node& tensors, const toml::node& program,
                     const toml::node& backward) {
  Program out;
  out.driver = kDriver;
  Defined names;

  const std::vector<const toml::table*> tensor_tables = reader.tables(tensors, "tensors");
  for (size_t i = 0; i < tensor_tables.size(); ++i) {
    out.tensors.push_back(read_tensor(reader, Table{*tensor_tables[i], index_path("tensors", i)}, names));
  }
  const std::vector<const toml::table*> statements = reader.tables(program, "program");
  for (size_t i = 0; i < statements.size(); ++i) {
    out.statements.push_back(read_statement(reader, Table{*statements[i], index_path("program", i)}, names));
  }

  const Table t{reader.table(backward, "backward"), "backward"};
  reader.check_keys(t, kBackwardKeys, "keys in backward");
  const std::string roots_path = t.key_path("roots");
  const toml::node& roots_node = reader.required(t, "roots");
  const toml::array& roots = reader.array(roots_node, roots_path);
  if (roots.empty()) reader.fail(roots_node, roots_path, "must name at least one tensor");
  for (size_t i = 0; i < roots.size(); ++i) {
    std::string name = reader.string(roots[i], index_path(roots_path, i));
    if (!names.contains(name)) reader.fail(roots[i], roots_path, quoted(name) + " is not a tensor or an output");
    if (std::find(out.roots.begin(), out.roots.end(), name) != out.roots.end()) {
      reader.fail(roots[i], roots_path, quoted(name) + " is listed twice");
    }
    out.roots.push_back(std::move(name));
  }
  out.retain_graph = reader.opt_boolean(t, "retain_graph").value_or(false);
  out.backward_calls = static_cast<uint32_t>(reader.opt_integer(t, "calls", 1, 100).value_or(1));
  return out;
}

}  // namespace dagsim::scenarios::detail
