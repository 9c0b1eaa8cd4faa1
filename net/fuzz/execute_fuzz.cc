// net/fuzz/execute_fuzz.cc: the libFuzzer target that *executes* what a peer may send
// (issue 23, item 1), built and run by scripts/fuzz.sh under ASan and UBSan. One input is one call
// of one op of the op table (every op a remote caller may name) on tensors of any shape, degenerate
// ones included ([0, 2^61], [2^20, 0], rank 0 ... 5), with attributes of any value (huge, negative,
// fractional, NaN), encoded as a frame, decoded by the codec as a node decodes it, and run through
// the RPC registry's builtin exactly as RpcAgent::run_function runs it; then, where the result
// requires grad and is small, backward through it. It promises to report (abort, so libFuzzer
// saves the input) any of:
//  - a crash, a leak, an ASan or UBSan report, or a DAGSIM_ASSERT, on any input;
//  - anything thrown but dagsim::Error (an op must refuse bad arguments by name);
//  - a result over the limits a reply has (the registry's size check) that ran anyway.
//
// Input layout (read front to back; past the end every read is zero):
//   byte 0   the op: its index in op_table(), modulo its size
//   byte 1   bits 0-2 the tensor count (0-7), bit 3 float32 (else float64), bit 4 backward
//   per tensor: byte rank (0-5, modulo 6), bit 7 requires grad; per dim a byte: bits 0-6 index
//            kSizes (a small size or a huge one), bit 7 ignored
//   byte     attribute count (0-7); per attribute: byte key (index into the op's attribute names,
//            plus "dim", "keepdim" and an unknown one), byte value kind (kValues), maybe 8 bytes
//   the rest seeds the tensors' values
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/codec.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/gathered_frame.h"
#include "core/rpc/op_table.h"
#include "core/tensor/ops.h"
#include "net/fuzz/fuzz_util.h"

namespace dagsim::rpc::fuzz {
namespace {

using net::fuzz::FuzzInput;
using net::fuzz::fail;
using net::fuzz::tracing;

constexpr int64_t kSizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 16, 0, 1, 2,
                              int64_t{1} << 20, int64_t{1} << 31, int64_t{1} << 40, int64_t{1} << 61,
                              std::numeric_limits<int64_t>::max()};
// Elements past which a tensor is not filled (the input is skipped): values cost time, not coverage.
constexpr int64_t kMaxFilled = 1 << 14;
constexpr size_t kMaxBackwardNumel = 1 << 14;

double attribute_value(FuzzInput& in) {
  switch (in.u8() % 12) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    case 3: return 2;
    case 4: return 0.5;
    case 5: return 1e18;
    case 6: return -1e18;
    case 7: return std::numeric_limits<double>::quiet_NaN();
    case 8: return std::numeric_limits<double>::infinity();
    case 9: return static_cast<double>(int64_t{1} << 40);
    case 10: return -static_cast<double>(in.u8() % 8);
    default: {
      uint64_t bits = uint64_t{in.u32()} | uint64_t{in.u32()} << 32;
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
}

bool run_one(FuzzInput& in) {
  const std::vector<OpDef>& ops = op_table();
  const OpDef& op = ops[in.u8() % ops.size()];
  const uint8_t shape_byte = in.u8();
  const size_t count = shape_byte & 7;
  const Dtype dtype = (shape_byte & 8) ? Dtype::float32 : Dtype::float64;
  const bool backward_too = (shape_byte & 16) != 0;
  CallArgs args;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t rank_byte = in.u8();
    Shape shape(rank_byte % 6);
    for (int64_t& s : shape) s = kSizes[(in.u8() & 0x7f) % std::size(kSizes)];
    int64_t numel = 0;
    try {
      numel = shape_numel(shape);
    } catch (const Error&) {
      return false;  // no such tensor can exist on this side either
    }
    if (numel > kMaxFilled) return false;
    Tensor t = Tensor::empty(shape, dtype);
    const std::span<const uint8_t> seed = in.take(8);
    dispatch_dtype(dtype, [&]<typename T>() {
      T* p = t.data<T>();
      for (int64_t k = 0; k < numel; ++k) p[k] = static_cast<T>(seed.empty() ? 0.25 : (seed[k % seed.size()] - 128) / 16.0);
    });
    if (rank_byte & 0x80) t.set_requires_grad(true);
    args.tensors.push_back(t);
  }
  std::vector<std::string> keys = op.attributes;
  keys.push_back("dim");
  keys.push_back("keepdim");
  keys.push_back("no_such_attribute");
  const size_t attributes = in.u8() % 8;
  for (size_t i = 0; i < attributes; ++i) {
    const std::string& key = keys[in.u8() % keys.size()];
    args.attributes[key] = attribute_value(in);
  }
  // Over the wire as a peer sends it: encoded, then decoded by the codec (with its limits), as the
  // simulator carries it (version 1) and as TCP does (version 2, gathered_frame.h: large tensors
  // alias the received frame, and the op runs on those).
  const Message sent = make_call(1, op.name, args);
  Message received;
  try {
    const Message contiguous = decode(encode(sent));
    const GatheredFrame gathered = encode_gathered(sent);
    Bytes frame = gathered.head;
    for (std::span<const uint8_t> piece : gathered.tail) frame.insert(frame.end(), piece.begin(), piece.end());
    if (frame.size() != gathered.size) fail("a gathered frame's pieces do not add up to its size");
    received = decode(std::move(frame));
    if (received.payload != contiguous.payload || received.tensors.size() != contiguous.tensors.size()) {
      fail("versions 1 and 2 of one message decode differently");
    }
  } catch (const Error&) {
    return false;  // refused on the way: nothing to execute
  }
  const Call call = read_call(received);
  static const FunctionRegistry registry = FunctionRegistry::with_builtins();
  const RpcFunction* function = registry.find(call.function);
  if (function == nullptr) fail("a builtin op is missing from the registry", call.function.c_str());
  CallContext context{nullptr, 1};
  std::vector<Tensor> results;
  try {
    results = (*function)(context, call.args);
  } catch (const Error& e) {
    if (tracing()) std::fprintf(stderr, "%s refused: %s\n", op.name.c_str(), e.what());
    return true;
  } catch (const std::exception& e) {
    fail("an op threw something other than dagsim::Error", e.what());
  }
  // What ran must fit a reply: the registry checks result sizes first.
  if (results.size() > CodecLimits{}.max_tensors) fail("more results than a reply carries", op.name.c_str());
  size_t bytes = 0;
  for (const Tensor& r : results) bytes += r.nbytes();
  if (bytes > CodecLimits{}.max_frame_bytes) fail("a result larger than a reply ran", op.name.c_str());
  if (tracing()) std::fprintf(stderr, "%s gave %zu result(s), %zu bytes\n", op.name.c_str(), results.size(), bytes);
  if (!backward_too) return true;
  for (const Tensor& r : results) {
    if (!r.requires_grad() || static_cast<size_t>(r.numel()) > kMaxBackwardNumel) continue;
    try {
      sum(r).backward();
    } catch (const Error& e) {
      if (tracing()) std::fprintf(stderr, "%s backward refused: %s\n", op.name.c_str(), e.what());
    } catch (const std::exception& e) {
      fail("backward threw something other than dagsim::Error", e.what());
    }
  }
  return true;
}

}  // namespace
}  // namespace dagsim::rpc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dagsim::net::fuzz::FuzzInput in(data, size);
  dagsim::rpc::fuzz::run_one(in);
  return 0;
}
