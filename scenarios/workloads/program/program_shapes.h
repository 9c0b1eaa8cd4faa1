// Result shapes of a program's statements, known at load time (before anything is allocated), so
// a statement whose result would exceed the element limit is refused with the file, line and
// statement instead of exhausting memory in the run (a broadcast of [10^7, 1] and [1, 10^7] is
// 10^14 elements, 800 TB). Inference is deliberately partial: where arguments do not fit the
// function (a shape mismatch, a bad dim) it gives up, since such a statement is an error of the
// run that an `expect_error` check may expect, and nothing downstream of it is inferred either.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/rpc/op_table.h"
#include "core/tensor/dtype.h"
#include "scenarios/workloads/program/program_spec.h"

namespace dagsim::scenarios {

// The most elements any tensor of a program may have: a leaf's shape, and every statement's
// result (docs/scenarios.md).
inline constexpr int64_t kProgramMaxNumel = 10'000'000;

// Elements of `shape`, saturating at INT64_MAX (so 10^7 × 10^7 × 10^7 cannot wrap).
int64_t saturating_numel(const Shape& shape);
// Its sizes multiplied with zeros counted as ones (the extents a kernel walks and the strides it
// computes, empty or not), saturating at INT64_MAX. At least saturating_numel(shape).
int64_t saturating_extent(const Shape& shape);

// The one rule every shape of a program is held to, a leaf's and each inferred statement result's,
// by the loader that both `dagsim validate` and `dagsim run` use, so they refuse the same files:
// its extent (above) is at most kProgramMaxNumel. Holding the extent, not only the elements, is
// what makes every accepted leaf creatable in the run: [0, 10^7, 10^7, 10^7] has no elements, but
// the tensor code refuses a product of sizes past 2^63 and the RPC path one past a reply's lanes.
bool within_shape_limit(const Shape& shape);

// The shapes `call` gives (one per result) for arguments of `shapes` (tensors, then RRef values)
// and `attributes`; nullopt when it does not know or the arguments do not fit.
rpc::OpShapes infer_result_shapes(const std::string& call, const std::vector<Shape>& shapes,
                                  const std::map<std::string, double>& attributes);

// The bytes of float64 tensors a run of `program` certainly holds at once, counted from shapes:
// each leaf and parameter with its gradient, and every statement result whose shape is known
// (held for backward), twice: in the distributed run and in the local oracle. Saturates.
uint64_t counted_tensor_bytes(const Program& program);

// Each statement's result shapes where they can be inferred (leaves and parameters from their
// declared shapes), by statement index; nullopt where not.
std::vector<rpc::OpShapes> statement_shapes(const Program& program);

}  // namespace dagsim::scenarios
