// The op table (op_table.h): each entry names a core/tensor op, runs it on CallArgs, infers its
// result shapes and gives an example of valid arguments.
#include "core/rpc/op_table.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/rpc/op_shapes.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {

int64_t integer_attribute(const CallArgs& args, const char* op, const char* name, std::optional<double> fallback) {
  const double v = args.attribute(op, name, fallback);
  if (!(v >= -9.0e15 && v <= 9.0e15) || v != static_cast<double>(static_cast<int64_t>(v))) {
    throw errors::invalid_argument(std::string(op) + ": attribute '" + name + "' must be an integer, got " + std::to_string(v));
  }
  return static_cast<int64_t>(v);
}

namespace {

namespace sh = op_shapes;
using sh::one;

// A float64 example input of `shape` with values in [low, high).
Tensor input(Prng& prng, const Shape& shape, double low = -1.0, double high = 1.0, bool requires_grad = true) {
  Tensor t = rand_uniform(shape, prng, low, high);
  t.set_requires_grad(requires_grad);
  return t;
}

std::vector<Tensor> single(Tensor t) { return {std::move(t)}; }

// The arity check every op opens with, naming the op.
void expect_arity(const std::string& name, size_t min, size_t max, const CallArgs& args) {
  const size_t n = args.tensors.size();
  if (n >= min && n <= max) return;
  const std::string want = max == min ? std::to_string(min)
                           : max == OpDef::kAny ? std::to_string(min) + " or more"
                                                : std::to_string(min) + " or " + std::to_string(max);
  throw errors::invalid_argument(name + ": takes " + want + " tensor argument(s), got " + std::to_string(n));
}

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

// An elementwise op of one tensor; its example values lie in [low, high) (inside its domain, away
// from kinks a finite difference would straddle).
OpDef unary(const char* name, Unary op, double low = -1.0, double high = 1.0) {
  return {name, 1, 1, {},
          [op](CallContext&, const CallArgs& a) { return single(op(a.tensors[0])); },
          [](const std::vector<Shape>& s, const Attributes&) { return one(s[0]); },
          [low, high](Prng& p) { return OpExample{{input(p, {2, 3}, low, high)}, {}}; }};
}

// An elementwise op of two tensors, broadcasting.
OpDef binary(const char* name, Binary op, double low = -1.0, double high = 1.0) {
  return {name, 2, 2, {},
          [op](CallContext&, const CallArgs& a) { return single(op(a.tensors[0], a.tensors[1])); },
          [](const std::vector<Shape>& s, const Attributes&) { return one(sh::broadcast(s[0], s[1])); },
          [low, high](Prng& p) { return OpExample{{input(p, {2, 3}, low, high), input(p, {3}, low, high)}, {}}; }};
}

// A reduction (sum, mean): over all elements, or over `dim` keeping it or not.
OpDef reduction(const char* name, bool is_sum) {
  return {name, 1, 1, {"dim", "keepdim"},
          [name, is_sum](CallContext&, const CallArgs& a) {
            const Tensor& x = a.tensors[0];
            if (a.attributes.count("dim") == 0) return single(is_sum ? sum(x) : mean(x));
            const int64_t dim = integer_attribute(a, name, "dim");
            const bool keepdim = a.attribute(name, "keepdim", 0.0) != 0.0;
            return single(is_sum ? sum(x, dim, keepdim) : mean(x, dim, keepdim));
          },
          [](const std::vector<Shape>& s, const Attributes& at) { return one(sh::reduce(s[0], at)); },
          [](Prng& p) { return OpExample{{input(p, {2, 3})}, {{"dim", 1}}}; }};
}

OpDef softmax_like(const char* name, Tensor (*op)(const Tensor&, int64_t)) {
  return {name, 1, 1, {"dim"},
          [name, op](CallContext&, const CallArgs& a) { return single(op(a.tensors[0], integer_attribute(a, name, "dim"))); },
          [](const std::vector<Shape>& s, const Attributes& at) {
            return sh::dim_index(at, "dim", s[0].size(), std::nullopt) ? one(s[0]) : std::nullopt;
          },
          [](Prng& p) { return OpExample{{input(p, {2, 3})}, {{"dim", 1}}}; }};
}

// split (pieces of split_size) and chunk (chunks pieces) along `dim`: several outputs.
OpDef splitting(const char* name, bool by_chunks) {
  const char* size_key = by_chunks ? "chunks" : "split_size";
  return {name, 1, 1, {size_key, "dim"},
          [name, by_chunks, size_key](CallContext&, const CallArgs& a) {
            const int64_t n = integer_attribute(a, name, size_key), dim = integer_attribute(a, name, "dim", 0);
            return by_chunks ? chunk(a.tensors[0], n, dim) : split(a.tensors[0], n, dim);
          },
          [by_chunks](const std::vector<Shape>& s, const Attributes& at) { return sh::split(s[0], at, by_chunks); },
          [size_key](Prng& p) { return OpExample{{input(p, {5, 2})}, {{size_key, 2}}}; }};
}

// max / min: with `dim`, the values and their indices (two results, as torch.max(a, dim)); without,
// the extremum of all elements.
OpDef extremum(const char* name, bool is_max) {
  return {name, 1, 1, {"dim", "keepdim"},
          [name, is_max](CallContext&, const CallArgs& a) {
            const Tensor& x = a.tensors[0];
            if (a.attributes.count("dim") == 0) return single(is_max ? max(x) : min(x));
            const int64_t dim = integer_attribute(a, name, "dim");
            const bool keepdim = a.attribute(name, "keepdim", 0.0) != 0.0;
            ValuesIndices r = is_max ? max(x, dim, keepdim) : min(x, dim, keepdim);
            return std::vector<Tensor>{r.values, r.indices};
          },
          [](const std::vector<Shape>& s, const Attributes& at) {
            const std::optional<Shape> r = sh::reduce(s[0], at);
            if (!r) return OpShapes();
            return at.count("dim") == 0 ? one(r) : OpShapes(std::vector<Shape>{*r, *r});
          },
          [](Prng& p) { return OpExample{{input(p, {3, 4})}, {{"dim", 1}}}; }};
}

// nll_loss / cross_entropy: input [N, C], target [N] of class indices (not differentiable).
OpDef classification_loss(const char* name, Binary op) {
  return {name, 2, 2, {},
          [op](CallContext&, const CallArgs& a) { return single(op(a.tensors[0], a.tensors[1])); },
          [](const std::vector<Shape>& s, const Attributes&) {
            const bool fits = s[0].size() == 2 && s[1].size() == 1 && s[0][0] == s[1][0];
            return fits ? one(Shape{}) : std::nullopt;
          },
          [](Prng& p) { return OpExample{{input(p, {3, 4}), from_values({3}, {0, 3, 1})}, {}}; }};
}

std::vector<OpDef> make_table() {
  std::vector<OpDef> t;
  t.push_back(binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b); }));
  t.push_back(binary("sub", &sub));
  t.push_back(binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }));
  t.push_back(binary("div", &div, 0.5, 2.0));
  t.push_back(unary("neg", &neg));
  t.push_back(unary("exp", &exp));
  t.push_back(unary("log", &log, 0.5, 2.0));
  t.push_back(unary("sin", &sin));
  t.push_back(unary("cos", &cos));
  t.push_back(unary("tanh", &tanh));
  t.push_back(unary("sigmoid", &sigmoid));
  t.push_back(unary("relu", &relu, 0.1, 1.0));
  t.push_back(unary("clone", &clone));
  t.push_back({"pow", 1, 1, {"exponent"},
               [](CallContext&, const CallArgs& a) { return single(pow(a.tensors[0], a.attribute("pow", "exponent"))); },
               [](const std::vector<Shape>& s, const Attributes&) { return one(s[0]); },
               [](Prng& p) { return OpExample{{input(p, {2, 3}, 0.5, 2.0)}, {{"exponent", 2.5}}}; }});
  t.push_back(reduction("sum", true));
  t.push_back(reduction("mean", false));
  t.push_back(softmax_like("softmax", &softmax));
  t.push_back(softmax_like("log_softmax", &log_softmax));
  t.push_back({"matmul", 2, 2, {},
               [](CallContext&, const CallArgs& a) { return single(matmul(a.tensors[0], a.tensors[1])); },
               [](const std::vector<Shape>& s, const Attributes&) { return one(sh::matmul(s[0], s[1])); },
               [](Prng& p) { return OpExample{{input(p, {2, 3}), input(p, {3, 4})}, {}}; }});
  t.push_back({"bmm", 2, 2, {},
               [](CallContext&, const CallArgs& a) { return single(bmm(a.tensors[0], a.tensors[1])); },
               [](const std::vector<Shape>& s, const Attributes&) {
                 const bool fits = s[0].size() == 3 && s[1].size() == 3 && s[0][0] == s[1][0] && s[0][2] == s[1][1];
                 return fits ? one(Shape{s[0][0], s[0][1], s[1][2]}) : std::nullopt;
               },
               [](Prng& p) { return OpExample{{input(p, {2, 2, 3}), input(p, {2, 3, 2})}, {}}; }});
  t.push_back({"multi_dot", 2, OpDef::kAny, {},
               [](CallContext&, const CallArgs& a) { return single(multi_dot(a.tensors)); },
               [](const std::vector<Shape>& s, const Attributes&) {
                 std::optional<Shape> out = s[0];
                 for (size_t i = 1; i < s.size() && out; ++i) out = sh::matmul(*out, s[i]);
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {3}), input(p, {3, 2}), input(p, {2, 4})}, {}}; }});
  t.push_back({"linear", 2, 3, {},
               [](CallContext&, const CallArgs& a) {
                 return single(linear(a.tensors[0], a.tensors[1], a.tensors.size() == 3 ? a.tensors[2] : Tensor()));
               },
               [](const std::vector<Shape>& s, const Attributes&) { return one(sh::linear(s)); },
               [](Prng& p) { return OpExample{{input(p, {2, 3}), input(p, {4, 3}), input(p, {4})}, {}}; }});
  t.push_back({"mse_loss", 2, 2, {},
               [](CallContext&, const CallArgs& a) { return single(mse_loss(a.tensors[0], a.tensors[1])); },
               [](const std::vector<Shape>& s, const Attributes&) { return s[0] == s[1] ? one(Shape{}) : std::nullopt; },
               [](Prng& p) { return OpExample{{input(p, {2, 3}), input(p, {2, 3})}, {}}; }});
  t.push_back(classification_loss("nll_loss", &nll_loss));
  t.push_back(classification_loss("cross_entropy", &cross_entropy));
  t.push_back({"transpose", 1, 1, {"dim0", "dim1"},
               [](CallContext&, const CallArgs& a) {
                 return single(transpose(a.tensors[0], integer_attribute(a, "transpose", "dim0", 0),
                                         integer_attribute(a, "transpose", "dim1", 1)));
               },
               [](const std::vector<Shape>& s, const Attributes& at) {
                 const auto d0 = sh::dim_index(at, "dim0", s[0].size(), 0.0), d1 = sh::dim_index(at, "dim1", s[0].size(), 1.0);
                 if (!d0 || !d1) return OpShapes();
                 Shape out = s[0];
                 std::swap(out[*d0], out[*d1]);
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {2, 3})}, {}}; }});
  t.push_back({"narrow", 1, 1, {"dim", "start", "length"},
               [](CallContext&, const CallArgs& a) {
                 return single(narrow(a.tensors[0], integer_attribute(a, "narrow", "dim"), integer_attribute(a, "narrow", "start"),
                                      integer_attribute(a, "narrow", "length")));
               },
               [](const std::vector<Shape>& s, const Attributes& at) {
                 const auto d = sh::dim_index(at, "dim", s[0].size(), std::nullopt);
                 auto length = at.find("length");
                 if (!d || length == at.end() || !(length->second >= 0 && length->second <= static_cast<double>(s[0][*d]))) {
                   return OpShapes();
                 }
                 Shape out = s[0];
                 out[*d] = static_cast<int64_t>(length->second);
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {4, 3})}, {{"dim", 0}, {"start", 1}, {"length", 2}}}; }});
  t.push_back({"squeeze", 1, 1, {"dim"},
               [](CallContext&, const CallArgs& a) {
                 if (a.attributes.count("dim") == 0) return single(squeeze(a.tensors[0]));
                 return single(squeeze(a.tensors[0], integer_attribute(a, "squeeze", "dim")));
               },
               [](const std::vector<Shape>& s, const Attributes& at) {
                 Shape out;
                 const auto d = sh::dim_index(at, "dim", s[0].size(), std::nullopt);
                 if (at.count("dim") != 0 && !d) return OpShapes();
                 for (size_t k = 0; k < s[0].size(); ++k) {
                   if (s[0][k] != 1 || (d && k != *d)) out.push_back(s[0][k]);
                 }
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {2, 1, 3})}, {{"dim", 1}}}; }});
  t.push_back({"unsqueeze", 1, 1, {"dim"},
               [](CallContext&, const CallArgs& a) { return single(unsqueeze(a.tensors[0], integer_attribute(a, "unsqueeze", "dim"))); },
               [](const std::vector<Shape>& s, const Attributes& at) {
                 const auto d = sh::dim_index(at, "dim", s[0].size() + 1, std::nullopt);
                 if (!d) return OpShapes();
                 Shape out = s[0];
                 out.insert(out.begin() + static_cast<std::ptrdiff_t>(*d), 1);
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {2, 3})}, {{"dim", 1}}}; }});
  t.push_back({"cat", 1, OpDef::kAny, {"dim"},
               [](CallContext&, const CallArgs& a) { return single(cat(a.tensors, integer_attribute(a, "cat", "dim", 0))); },
               [](const std::vector<Shape>& s, const Attributes& at) { return one(sh::cat(s, at)); },
               [](Prng& p) { return OpExample{{input(p, {2, 3}), input(p, {1, 3})}, {}}; }});
  t.push_back({"stack", 1, OpDef::kAny, {"dim"},
               [](CallContext&, const CallArgs& a) { return single(stack(a.tensors, integer_attribute(a, "stack", "dim", 0))); },
               [](const std::vector<Shape>& s, const Attributes& at) { return one(sh::stack(s, at)); },
               [](Prng& p) { return OpExample{{input(p, {2, 3}), input(p, {2, 3})}, {{"dim", 1}}}; }});
  t.push_back(unary("abs", &abs, 0.1, 1.0));
  t.push_back(unary("sqrt", &sqrt, 0.5, 2.0));
  t.push_back(extremum("max", true));
  t.push_back(extremum("min", false));
  t.push_back({"gather", 2, 2, {"dim"},
               [](CallContext&, const CallArgs& a) { return single(gather(a.tensors[0], integer_attribute(a, "gather", "dim"), a.tensors[1])); },
               [](const std::vector<Shape>& s, const Attributes& at) {
                 const bool fits = s[0].size() == s[1].size() && sh::dim_index(at, "dim", s[0].size(), std::nullopt);
                 return fits ? one(s[1]) : std::nullopt;
               },
               [](Prng& p) { return OpExample{{input(p, {3, 4}), from_values({3, 2}, {0, 3, 1, 1, 2, 0})}, {{"dim", 1}}}; }});
  t.push_back({"index_select", 2, 2, {"dim"},
               [](CallContext&, const CallArgs& a) {
                 return single(index_select(a.tensors[0], integer_attribute(a, "index_select", "dim"), a.tensors[1]));
               },
               [](const std::vector<Shape>& s, const Attributes& at) {
                 const auto d = sh::dim_index(at, "dim", s[0].size(), std::nullopt);
                 if (!d || s[1].size() != 1) return OpShapes();
                 Shape out = s[0];
                 out[*d] = s[1][0];
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {4, 3}), from_values({3}, {3, 0, 3})}, {{"dim", 0}}}; }});
  t.push_back({"embedding", 2, 2, {},
               [](CallContext&, const CallArgs& a) { return single(embedding(a.tensors[0], a.tensors[1])); },
               [](const std::vector<Shape>& s, const Attributes&) {
                 if (s[0].size() != 2) return OpShapes();
                 Shape out = s[1];
                 out.push_back(s[0][1]);
                 return one(out);
               },
               [](Prng& p) { return OpExample{{input(p, {5, 3}), from_values({2, 2}, {4, 0, 2, 4})}, {}}; }});
  t.push_back({"layer_norm", 1, 3, {"normalized_dims", "eps"},
               [](CallContext&, const CallArgs& a) {
                 const Tensor& x = a.tensors[0];
                 const int64_t k = integer_attribute(a, "layer_norm", "normalized_dims", 1);
                 if (k < 1 || k > x.dim()) {
                   throw errors::invalid_argument("layer_norm: normalized_dims " + std::to_string(k) + " for a tensor of " +
                                                  std::to_string(x.dim()) + " dims");
                 }
                 const Shape normalized(x.shape().end() - k, x.shape().end());
                 return single(layer_norm(x, normalized, a.tensors.size() > 1 ? a.tensors[1] : Tensor(),
                                          a.tensors.size() > 2 ? a.tensors[2] : Tensor(), a.attribute("layer_norm", "eps", 1e-5)));
               },
               [](const std::vector<Shape>& s, const Attributes&) { return one(s[0]); },
               [](Prng& p) { return OpExample{{input(p, {2, 4}), input(p, {4}), input(p, {4})}, {}}; }});
  // Seeded: the same seed drops the same elements, on any node and in the local oracle.
  t.push_back({"dropout", 1, 1, {"p", "training", "seed"},
               [](CallContext&, const CallArgs& a) {
                 Prng prng(static_cast<uint64_t>(integer_attribute(a, "dropout", "seed", 0)));
                 return single(dropout(a.tensors[0], a.attribute("dropout", "p", 0.5), a.attribute("dropout", "training", 1.0) != 0.0, prng));
               },
               [](const std::vector<Shape>& s, const Attributes&) { return one(s[0]); },
               [](Prng& p) { return OpExample{{input(p, {3, 4})}, {{"p", 0.4}, {"seed", 17}}}; }});
  t.push_back(splitting("split", false));
  t.push_back(splitting("chunk", true));
  std::sort(t.begin(), t.end(), [](const OpDef& a, const OpDef& b) { return a.name < b.name; });
  return t;
}

}  // namespace

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> table = [] {
    std::vector<OpDef> t = make_table();
    // Every entry runs behind its arity check, so no op sees a wrong number of tensors.
    for (OpDef& op : t) {
      DAGSIM_ASSERT(op.run && op.shape && op.example && op.min_tensors <= op.max_tensors);
      op.run = [name = op.name, min = op.min_tensors, max = op.max_tensors, run = std::move(op.run)](CallContext& c,
                                                                                                   const CallArgs& a) {
        expect_arity(name, min, max, a);
        std::vector<Tensor> out = run(c, a);
        DAGSIM_ASSERT(!out.empty() && std::all_of(out.begin(), out.end(), [](const Tensor& x) { return x.defined(); }));
        return out;
      };
    }
    return t;
  }();
  return table;
}

const OpDef* find_op(std::string_view name) {
  const std::vector<OpDef>& t = op_table();
  auto it = std::lower_bound(t.begin(), t.end(), name, [](const OpDef& op, std::string_view n) { return op.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

}  // namespace dagsim::rpc
