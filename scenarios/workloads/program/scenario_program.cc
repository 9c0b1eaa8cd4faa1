// The program workload of the scenario loader (scenario_program.h): leaf tensors, parameters,
// statements, the backward call and the optimizer, each checked as strictly as the rest of the
// file. Every name has a type, a tensor on the driver or an RRef with its owner, and each use is
// checked against it: RRef arguments after the tensors (on any worker: a callee that does not own
// one gets a fork and fetches its value); to_here only on an RRef; roots only tensors.
#include "scenarios/workloads/program/scenario_program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/base/printable.h"
#include "core/rpc/op_table.h"
#include "core/tensor/dtype.h"
#include "scenarios/format/scenario_devices.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/workloads/program/program_shapes.h"
#include "scenarios/workloads/program/scenario_message_faults.h"
#include "scenarios/workloads/program/scenario_optimizer.h"

namespace dagsim::scenarios::detail {
namespace {

constexpr uint32_t kDriver = 0;
constexpr int64_t kMaxRank = 8;
constexpr int64_t kMaxNumel = kProgramMaxNumel;
// Any finite number (nan and inf are never in range).
constexpr Range kFinite{-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), true, true};

// The non-tensor arguments of a statement, stored in Statement::attributes. `whole`: an index or
// a count, so it must be a whole number (a float such as 2.0 is fine). `range`: what a function
// could ever accept, so a value such as 2^63 is refused here, naming the key, rather than
// wrapping around when the function converts it to an integer (no tensor has more than kMaxRank
// dimensions or kMaxNumel elements along one).
struct AttributeKey {
  std::string_view name;
  bool whole;
  Range range;
};
constexpr double kNumel = static_cast<double>(kMaxNumel);
constexpr Range kDimRange{-static_cast<double>(kMaxRank), static_cast<double>(kMaxRank - 1)};
constexpr Range kCountRange{1, kNumel};
// Every attribute an op of the table reads has a row here (the table's test checks it), with what
// it may be; plus mlp_layer's activation.
constexpr std::array<AttributeKey, 15> kAttributes = {{
    {"dim", true, kDimRange},
    {"dim0", true, kDimRange},
    {"dim1", true, kDimRange},
    {"start", true, Range{-kNumel, kNumel}},
    {"length", true, Range{0, kNumel}},
    {"keepdim", false, kFinite},
    {"exponent", false, kFinite},
    {"split_size", true, kCountRange},
    {"chunks", true, kCountRange},
    {"normalized_dims", true, Range{1, static_cast<double>(kMaxRank)}},
    {"eps", false, Range{0, 1, true, false}},
    {"p", false, Range{0, 1}},
    {"training", false, kFinite},
    {"seed", true, Range{0, 9007199254740992.0}},  // 2^53: exact as a number
    {"activation", true, Range{0, 3}},  // 0 none, 1 tanh, 2 relu, 3 sigmoid
}};

constexpr std::array<std::string_view, 8> kTensorKeys = {"name", "shape", "values", "init", "requires_grad", "on", "dtype", "device"};
constexpr std::array<std::string_view, 8> kParameterKeys = {"name", "shape", "values", "init", "scale", "on", "dtype", "device"};
constexpr std::array<std::string_view, 2> kDtypes = {"float32", "float64"};  // Dtype's order

Dtype read_dtype(const TomlReader& reader, const Table& t) {
  const toml::node* node = t.get("dtype");
  if (node == nullptr) return Dtype::float64;
  return reader.choice(*node, t.key_path("dtype"), kDtypes) == 0 ? Dtype::float32 : Dtype::float64;
}
// A statement's keys: its own, every attribute key, and a relay's `to`.
constexpr std::array<std::string_view, 6> kStatementOwnKeys = {"out", "call", "args", "via", "on", "device"};
constexpr auto kStatementKeys = [] {
  std::array<std::string_view, kStatementOwnKeys.size() + kAttributes.size() + 1> keys{};
  size_t n = 0;
  for (std::string_view k : kStatementOwnKeys) keys[n++] = k;
  for (const AttributeKey& a : kAttributes) keys[n++] = a.name;
  keys[n++] = "to";
  return keys;
}();
constexpr std::array<std::string_view, 5> kBackwardKeys = {"roots", "retain_graph", "calls", "repeat", "mode"};
const KeySetRegistration kTensorKeysListed{{"tensors", "", "", kTensorKeys}};
const KeySetRegistration kParameterKeysListed{{"parameters", "", "", kParameterKeys}};
const KeySetRegistration kStatementKeysListed{{"program", "", "", kStatementKeys}};
const KeySetRegistration kBackwardKeysListed{{"backward", "", "", kBackwardKeys}};
constexpr std::array<std::string_view, 2> kBackwardModes = {"fast", "smart"};
constexpr std::array<std::string_view, 2> kInits = {"uniform", "normal"};
constexpr std::array<std::string_view, 4> kVias = {"local", "rpc_sync", "rpc_async", "remote"};

std::string index_path(std::string_view path, size_t i) { return std::string(path) + "[" + std::to_string(i) + "]"; }

bool is_identifier(std::string_view s) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return !s.empty() && letter(s[0]) && std::all_of(s.begin() + 1, s.end(), [&](char c) { return letter(c) || digit(c); });
}

// What a name stands for: a tensor on the driver, or an RRef owned by `owner`.
struct NameType {
  bool rref = false;
  uint32_t owner = kDriver;
};

// The names defined so far (tensors, parameters, then statement outputs in order), each with its
// type and the path that defined it, for "already defined" messages.
class Defined {
 public:
  const NameType* find(const std::string& name) const {
    auto it = defined_.find(name);
    return it == defined_.end() ? nullptr : &it->second.type;
  }

  // Reads `name` (or `out`) of `t`: an identifier not defined before, of type `type`.
  std::string define(const TomlReader& reader, const Table& t, std::string_view key, NameType type) {
    const toml::node& node = reader.required(t, key);
    return define_one(reader, node, t.key_path(key), t.path, type);
  }
  // Reads `out` of a statement: one name, or an array of distinct names (a call of several results).
  std::vector<std::string> define_outs(const TomlReader& reader, const Table& t, NameType type) {
    const toml::node& node = reader.required(t, "out");
    const std::string path = t.key_path("out");
    if (!node.is_array()) return {define_one(reader, node, path, t.path, type)};
    const toml::array& names = reader.array(node, path);
    if (names.empty()) reader.fail(node, path, "names no result (give one name, or an array of at least one)");
    std::vector<std::string> out;
    for (size_t i = 0; i < names.size(); ++i) out.push_back(define_one(reader, names[i], path + "[" + std::to_string(i) + "]", t.path, type));
    return out;
  }

 private:
  std::string define_one(const TomlReader& reader, const toml::node& node, const std::string& path, const std::string& owner,
                         NameType type) {
    std::string name = reader.string(node, path);
    if (!is_identifier(name)) {
      reader.fail(node, path, quote(name) + " is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (auto it = defined_.find(name); it != defined_.end()) {
      reader.fail(node, path, quote(name) + " is already defined by " + it->second.path);
    }
    defined_.emplace(name, Entry{owner, type});
    return name;
  }

  struct Entry {
    std::string path;
    NameType type;
  };
  std::map<std::string, Entry> defined_;
};

// A leaf's shape and values (`shape`, and `values` or `init`), shared by tensors and parameters.
struct LeafValues {
  Shape shape;
  ProgramTensor::Init init = ProgramTensor::Init::uniform;
  std::vector<double> values;
};

LeafValues read_leaf_values(const TomlReader& reader, const Table& t) {
  LeafValues out;
  const std::string shape_path = t.key_path("shape");
  const toml::array& dims = reader.array(reader.required(t, "shape"), shape_path);
  if (static_cast<int64_t>(dims.size()) > kMaxRank) {
    reader.fail(dims, shape_path, "rank " + std::to_string(dims.size()) + " is more than " + std::to_string(kMaxRank));
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    out.shape.push_back(reader.integer(dims[i], index_path(shape_path, i), 0, kMaxNumel));
  }
  const int64_t numel = saturating_numel(out.shape);
  if (!within_shape_limit(out.shape)) {
    reader.fail(dims, shape_path,
                shape_str(out.shape) + " has more than " + std::to_string(kMaxNumel) + " elements" +
                    (numel > kMaxNumel ? "" : " counting its zeros as ones (an empty tensor's sizes are held too)"));
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
                  std::to_string(elements.size()) + " values; shape " + shape_str(out.shape) + " needs " +
                      std::to_string(numel));
    }
    out.init = ProgramTensor::Init::values;
    for (size_t i = 0; i < elements.size(); ++i) {
      out.values.push_back(reader.number(elements[i], index_path(path, i), kFinite));
    }
  } else {
    const size_t index = reader.opt_choice(t, "init", kInits).value_or(0);
    out.init = index == 0 ? ProgramTensor::Init::uniform : ProgramTensor::Init::normal;
  }
  return out;
}

ProgramTensor read_tensor(const TomlReader& reader, const Table& t, Defined& names) {
  reader.check_keys(t, kTensorKeys, "keys in tensors");
  ProgramTensor tensor;
  tensor.name = names.define(reader, t, "name", NameType{});
  LeafValues leaf = read_leaf_values(reader, t);
  tensor.shape = std::move(leaf.shape);
  tensor.init = leaf.init;
  tensor.values = std::move(leaf.values);
  tensor.requires_grad = reader.opt_boolean(t, "requires_grad").value_or(true);
  tensor.dtype = read_dtype(reader, t);
  if (const toml::node* device = t.get("device")) tensor.device = read_device(reader, *device, t.key_path("device"), reader.gpus());
  if (std::optional<uint32_t> on = reader.opt_node_ref(t, "on"); on && *on != kDriver) {
    reader.fail(*t.get("on"), t.key_path("on"),
                "leaves must live on the driver (" + reader.cluster().node_name(kDriver) +
                    "); a leaf on another worker is a parameter (parameters = [...])");
  }
  return tensor;
}

ProgramParameter read_parameter(const TomlReader& reader, const Table& t, Defined& names) {
  reader.check_keys(t, kParameterKeys, "keys in parameters");
  ProgramParameter p;
  p.on = reader.opt_node_ref(t, "on").value_or(kDriver);
  p.name = names.define(reader, t, "name", NameType{true, p.on});
  LeafValues leaf = read_leaf_values(reader, t);
  p.shape = std::move(leaf.shape);
  p.init = leaf.init;
  p.values = std::move(leaf.values);
  p.dtype = read_dtype(reader, t);
  if (const toml::node* device = t.get("device")) p.device = read_device(reader, *device, t.key_path("device"), reader.gpus());
  if (const toml::node* scale = t.get("scale")) {
    if (p.init == ProgramTensor::Init::values) {
      reader.fail(*scale, t.key_path("scale"), "scales seeded values (init) only; not allowed with values");
    }
    p.scale = reader.number(*scale, t.key_path("scale"), kFinite);
  }
  return p;
}

// The arguments of `s`: tensors first, then RRefs, each one defined. For to_here, exactly one
// RRef. An RRef may go to a call on any worker: its owner reads the value in place, any other
// worker gets a fork of it (PyTorch's protocol, rref_forks.cc) and fetches the value.
void read_args(const TomlReader& reader, const Table& t, const Defined& names, Statement& s) {
  const std::string args_path = t.key_path("args");
  const toml::node& args_node = reader.required(t, "args");
  const toml::array& args = reader.array(args_node, args_path);
  if (args.empty()) reader.fail(args_node, args_path, "must name at least one tensor");
  const bool to_here = s.call == kToHere;
  if (const toml::node* device = t.get("device")) {
    if (to_here) reader.fail(*device, t.key_path("device"), "does not apply to call \"to_here\" (the value comes back through the device maps)");
    s.device = read_device(reader, *device, t.key_path("device"), reader.gpus());
  }
  if (to_here && args.size() != 1) {
    reader.fail(args_node, args_path, "to_here takes exactly one argument, an RRef; got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = reader.string(args[i], index_path(args_path, i));
    const NameType* type = names.find(name);
    if (type == nullptr) reader.fail(args[i], args_path, quote(name) + " is not a tensor or an earlier output");
    if (to_here && !type->rref) {
      reader.fail(args[i], args_path, quote(name) + " is a tensor; to_here takes an RRef (a parameter or a remote result)");
    }
    if (!type->rref) {
      if (!s.rrefs.empty()) {
        reader.fail(args[i], args_path,
                    quote(name) + " is a tensor after the RRef argument " + quote(s.rrefs.back()) +
                        "; RRef arguments come after all tensors (the callee appends their values to the tensors)");
      }
      s.args.push_back(std::move(name));
      continue;
    }
    s.rrefs.push_back(std::move(name));
  }
}

Statement read_statement(const TomlReader& reader, const Table& t, Defined& names) {
  reader.check_keys(t, kStatementKeys, "keys in program");
  Statement s;

  // The call first, then where it runs, then the arguments (checked against where), then the
  // output: a statement cannot use its own output.
  const std::string call_path = t.key_path("call");
  s.call = std::string(program_functions()[reader.choice(reader.required(t, "call"), call_path, program_functions())]);
  const bool to_here = s.call == kToHere;

  if (const toml::node* via = t.get("via")) s.via = static_cast<Via>(reader.choice(*via, t.key_path("via"), kVias));
  const std::string via_name = quote(kVias[static_cast<size_t>(s.via)]);
  if (to_here && s.via != Via::local) {
    reader.fail(*t.get("via"), t.key_path("via"), via_name + " does not apply to call \"to_here\" (the driver fetches the value)");
  }
  if (s.via == Via::local) {
    if (const toml::node* on = t.get("on")) {
      reader.fail(*on, t.key_path("on"), "does not apply to via " + via_name + " (a local call runs on the driver)");
    }
    s.on = kDriver;
  } else {
    s.on = reader.node_ref(reader.required(t, "on", " for via " + via_name), t.key_path("on"));
  }
  read_args(reader, t, names, s);

  for (const AttributeKey& key : kAttributes) {
    const toml::node* node = t.get(key.name);
    if (node == nullptr) continue;
    const std::string path = t.key_path(key.name);
    if (to_here) reader.fail(*node, path, "does not apply to call \"to_here\" (it takes no attributes)");
    const double v = reader.number_or_boolean(*node, path, kFinite);
    if (key.whole && v != std::floor(v)) reader.fail(*node, path, format_number(v) + " is not a whole number");
    if (!key.range.contains(v)) reader.fail(*node, path, number_text(*node) + " is out of range " + key.range.to_string());
    s.attributes.emplace(std::string(key.name), v);
  }
  const bool relay = s.call.starts_with(kRelayPrefix);
  if (relay) {
    const uint32_t to = reader.node_ref(reader.required(t, "to", " for call " + quote(s.call)), t.key_path("to"));
    s.attributes.emplace("to", static_cast<double>(to));
  } else if (const toml::node* to = t.get("to")) {
    reader.fail(*to, t.key_path("to"), "does not apply to call " + quote(s.call) + " (only relay_* calls take it)");
  }

  if (s.via == Via::remote && t.get("out") != nullptr && t.get("out")->is_array()) {
    reader.fail(*t.get("out"), t.key_path("out"), "a remote call gives one RRef: name it with a string");
  }
  s.outs = names.define_outs(reader, t, NameType{s.via == Via::remote, s.on});
  return s;
}

void read_backward(const TomlReader& reader, const toml::node& backward, const Defined& names, Program& out) {
  const Table t{reader.table(backward, "backward"), "backward"};
  reader.check_keys(t, kBackwardKeys, "keys in backward");
  const std::string roots_path = t.key_path("roots");
  const toml::node& roots_node = reader.required(t, "roots");
  const toml::array& roots = reader.array(roots_node, roots_path);
  if (roots.empty()) reader.fail(roots_node, roots_path, "must name at least one tensor");
  for (size_t i = 0; i < roots.size(); ++i) {
    std::string name = reader.string(roots[i], index_path(roots_path, i));
    const NameType* type = names.find(name);
    if (type == nullptr) reader.fail(roots[i], roots_path, quote(name) + " is not a tensor or an output");
    if (type->rref) {
      reader.fail(roots[i], roots_path, quote(name) + " is an RRef; roots must be tensors (fetch it with to_here)");
    }
    if (std::find(out.roots.begin(), out.roots.end(), name) != out.roots.end()) {
      reader.fail(roots[i], roots_path, quote(name) + " is listed twice");
    }
    out.roots.push_back(std::move(name));
  }
  out.retain_graph = reader.opt_boolean(t, "retain_graph").value_or(false);
  out.backward_calls = static_cast<uint32_t>(reader.opt_integer(t, "calls", 1, 100).value_or(1));
  out.backward_repeat = static_cast<uint32_t>(reader.opt_integer(t, "repeat", 1, 1000).value_or(1));
  if (const toml::node* mode = t.get("mode")) out.smart = reader.choice(*mode, t.key_path("mode"), kBackwardModes) == 1;
}

}  // namespace

std::span<const std::string_view> program_functions() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const rpc::OpDef& op : rpc::op_table()) out.push_back(op.name);
    for (std::string_view f : {"relay_add", "relay_sub", "relay_mul", "relay_div", "mlp_layer"}) out.push_back(f);
    out.push_back(kToHere);
    return out;
  }();
  return names;
}

bool is_attribute_key(std::string_view name) {
  return std::any_of(kAttributes.begin(), kAttributes.end(), [&](const AttributeKey& k) { return k.name == name; });
}

// Every statement whose result shape is known now must fit the element limit: refused here, with
// its line, rather than failing an allocation in the run (program_shapes.h).
void check_result_sizes(const TomlReader& reader, const std::vector<const toml::table*>& tables, const Program& program) {
  const std::vector<rpc::OpShapes> shapes = statement_shapes(program);
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i]) continue;
    const Statement& s = program.statements[i];
    for (size_t k = 0; k < shapes[i]->size(); ++k) {
      const Shape& shape = (*shapes[i])[k];
      if (within_shape_limit(shape)) continue;
      const int64_t n = saturating_numel(shape) == 0 ? saturating_extent(shape) : saturating_numel(shape);
      reader.fail(*tables[i], index_path("program", i),
                  quote(s.outs.at(k)) + " = " + s.call + "(...) has shape " + shape_str(shape) + ", " +
                      (n == std::numeric_limits<int64_t>::max() ? "over 2^63" : std::to_string(n)) +
                      (saturating_numel(shape) == 0 ? " elements counting its zeros as ones" : " elements") +
                      "; a tensor has at most " + std::to_string(kMaxNumel));
    }
  }
}

Program read_program(const TomlReader& reader, const Table& top) {
  Program out;
  out.driver = kDriver;
  Defined names;

  if (const toml::node* tensors = top.get("tensors")) {
    const std::vector<const toml::table*> tables = reader.tables(*tensors, "tensors");
    for (size_t i = 0; i < tables.size(); ++i) {
      out.tensors.push_back(read_tensor(reader, Table{*tables[i], index_path("tensors", i)}, names));
    }
  }
  if (const toml::node* parameters = top.get("parameters")) {
    const std::vector<const toml::table*> tables = reader.tables(*parameters, "parameters");
    for (size_t i = 0; i < tables.size(); ++i) {
      out.parameters.push_back(read_parameter(reader, Table{*tables[i], index_path("parameters", i)}, names));
    }
  }
  const std::vector<const toml::table*> statements = reader.tables(*top.get("program"), "program");
  for (size_t i = 0; i < statements.size(); ++i) {
    out.statements.push_back(read_statement(reader, Table{*statements[i], index_path("program", i)}, names));
  }
  check_result_sizes(reader, statements, out);
  read_backward(reader, *top.get("backward"), names, out);

  if (const toml::node* faults = top.get("message_faults")) out.message_faults = read_message_faults(reader, *faults);
  if (const toml::node* optimizer = top.get("optimizer")) {
    if (out.parameters.empty()) {
      reader.fail(*optimizer, "optimizer", "steps parameters, and this program has none (add parameters = [...])");
    }
    out.optimizer = read_optimizer(reader, *optimizer, "optimizer");
  }
  return out;
}

}  // namespace dagsim::scenarios::detail
