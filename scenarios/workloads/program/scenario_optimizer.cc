// The optimizer table of the scenario loader (scenario_optimizer.h). Defaults are PyTorch 1.13's
// (torch.optim.SGD's lr has none, so it is required; Adam's is 1e-3), and values PyTorch rejects
// are rejected here, with the rule in the message.
#include "scenarios/workloads/program/scenario_optimizer.h"

#include "scenarios/format/scenario_keys.h"
#include <array>
#include <limits>
#include <string_view>

namespace dagsim::scenarios::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Range kNonNegative{0, kInf, false, /*hi_open=*/true};
constexpr Range kUnit{0, 1};                                     // dampening
constexpr Range kBeta{0, 1, false, /*hi_open=*/true};            // Adam's betas

constexpr std::array<std::string_view, 2> kKinds = {"sgd", "adam"};
constexpr std::string_view kSgdKeys[] = {"kind", "lr", "momentum", "dampening", "nesterov", "weight_decay"};
constexpr std::string_view kAdamKeys[] = {"kind", "lr", "beta1", "beta2", "eps", "weight_decay"};
constexpr std::string_view kAllKeys[] = {"kind",  "lr",    "momentum", "dampening", "nesterov",
                                         "beta1", "beta2", "eps",      "weight_decay"};
const KeySetRegistration kSgdKeysListed{{"optimizer", "", "kind \"sgd\"", kSgdKeys}};
const KeySetRegistration kAdamKeysListed{{"optimizer", "", "kind \"adam\"", kAdamKeys}};

}  // namespace

ProgramOptimizer read_optimizer(const TomlReader& reader, const toml::node& node, const std::string& path) {
  const Table t{reader.table(node, path), path};
  ProgramOptimizer out;
  const size_t kind = reader.choice(reader.required(t, "kind"), t.key_path("kind"), kKinds);
  out.kind = static_cast<ProgramOptimizer::Kind>(kind);
  const std::string variant = "kind \"" + std::string(kKinds[kind]) + "\"";
  reader.check_variant_keys(t, out.kind == ProgramOptimizer::Kind::sgd ? Names(kSgdKeys) : Names(kAdamKeys), kAllKeys,
                            variant);

  if (out.kind == ProgramOptimizer::Kind::sgd) {
    optim::SgdOptions& o = out.sgd;
    o.lr = reader.number(reader.required(t, "lr", " for " + variant), t.key_path("lr"), kNonNegative);
    o.momentum = reader.opt_number(t, "momentum", kNonNegative).value_or(0);
    o.dampening = reader.opt_number(t, "dampening", kUnit).value_or(0);
    o.weight_decay = reader.opt_number(t, "weight_decay", kNonNegative).value_or(0);
    o.nesterov = reader.opt_boolean(t, "nesterov").value_or(false);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
      reader.fail(*t.get("nesterov"), t.key_path("nesterov"),
                  "Nesterov momentum needs momentum > 0 and dampening = 0 (as PyTorch's SGD)");
    }
    return out;
  }
  optim::AdamOptions& o = out.adam;
  o.lr = reader.opt_number(t, "lr", kNonNegative).value_or(o.lr);
  o.beta1 = reader.opt_number(t, "beta1", kBeta).value_or(o.beta1);
  o.beta2 = reader.opt_number(t, "beta2", kBeta).value_or(o.beta2);
  o.eps = reader.opt_number(t, "eps", kNonNegative).value_or(o.eps);
  o.weight_decay = reader.opt_number(t, "weight_decay", kNonNegative).value_or(o.weight_decay);
  return out;
}

}  // namespace dagsim::scenarios::detail
