// The RPC layer's payloads through the one round-trip template (payload_test_template.h), and the
// bounds both directions share: what a writer refuses (invalid_argument) a reader rejects
// (protocol_error), each naming the field.
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/payload_test_template.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {

template <>
struct PayloadSamples<Call> {
  static std::vector<Call> make() {
    Call full{"matmul", {}};
    full.args.attributes = {{"dim", 1}, {"keepdim", 0.5}};
    full.forks = {RRefForkData{1, 7, 8, 2}, RRefForkData{65535, (uint64_t{3} << 48) | 9, ~uint64_t{0}, 0}};
    full.args.ints = {{"id", -1}, {"step", int64_t{1} << 60}};
    full.args.strings = {{"key", "worker/3"}, {"empty", ""}};
    full.args.blobs = {{"value", Bytes{0, 1, 255}}, {"none", Bytes{}}};
    return {Call{"f", {}}, full};
  }
};

template <>
struct PayloadSamples<RemoteCall> {
  static std::vector<RemoteCall> make() {
    RemoteCall full{uint64_t{1} << 63, PayloadSamples<Call>::make()[1]};
    return {RemoteCall{1, Call{"g", {}}}, full};
  }
};

template <>
struct PayloadSamples<RRefRequest> {
  static std::vector<RRefRequest> make() { return {RRefRequest{0, 0}, RRefRequest{~uint64_t{0}, 5}}; }
};

template <>
struct PayloadSamples<ExceptionPayload> {
  static std::vector<ExceptionPayload> make() {
    return {ExceptionPayload{}, ExceptionPayload{1400, 65535, "Error on Node 65535: no handler"}};
  }
};

using RpcPayloads = ::testing::Types<Call, RemoteCall, RRefRequest, ExceptionPayload>;
INSTANTIATE_TYPED_TEST_SUITE_P(Rpc, PayloadRoundTrip, RpcPayloads);

namespace {

TEST(WirePayloads, TypedCallArgumentsArriveExactly) {
  CallArgs args;
  args.set_id("context", (uint64_t{65535} << 48) | (uint64_t{7} << 32) | 0xfffffffe);  // beyond a double's 53 bits
  args.strings["name"] = "w";
  args.blobs["data"] = Bytes{9, 8};
  const Call back = read_call(make_call(1, "f", args));
  EXPECT_EQ(back.args.id("f", "context"), (uint64_t{65535} << 48) | (uint64_t{7} << 32) | 0xfffffffe);
  EXPECT_EQ(back.args.text("f", "name"), "w");
  EXPECT_EQ(back.args.blob("f", "data"), (Bytes{9, 8}));
  EXPECT_TRUE(throws_error([&] { back.args.integer("f", "name"); }, ErrorCode::invalid_argument,
                           {"f: missing int64 argument 'name' (it was passed with another type)"}));
  EXPECT_EQ(back.args.integer("f", "absent", 3), 3);
}

TEST(WirePayloads, WhatAWriterRefusesAReaderRejects) {
  const std::string long_name(kMaxFunctionName + 1, 'x');
  EXPECT_TRUE(throws_error([&] { make_call(1, long_name, {}); }, ErrorCode::invalid_argument,
                           {"call.function: length 257 exceeds the limit of 256 (the peer would refuse it)"}));
  // The same field forged past the writer: the reader refuses it before reading the bytes.
  Bytes forged;
  WireWriter w(forged);
  w.string(long_name);
  EXPECT_TRUE(throws_error([&] { from_bytes<Call>(forged); }, ErrorCode::protocol_error,
                           {"call.function: length 257 exceeds the limit of 256"}));
  CallArgs many;
  for (size_t i = 0; i <= kMaxAttributes; ++i) many.ints["a" + std::to_string(i)] = 1;
  EXPECT_TRUE(throws_error([&] { make_call(1, "f", many); }, ErrorCode::invalid_argument, {"call.ints: count 65"}));
}

TEST(WirePayloads, ForgedCountsAndFlagsAreRejectedByName) {
  Bytes b;
  WireWriter w(b);
  w.string("f");
  w.u32(60);  // 60 attributes in 0 bytes
  EXPECT_TRUE(throws_error([&] { from_bytes<Call>(b); }, ErrorCode::protocol_error,
                           {"call.attributes: count 60 cannot fit in 0 bytes"}));
  Bytes dup;
  WireWriter d(dup);
  d.string("f");
  d.u32(2);
  for (int i = 0; i < 2; ++i) {
    d.string("dim");
    d.f64(1);
  }
  d.u32(0);
  d.u32(0);
  d.u32(0);
  d.u32(0);
  EXPECT_TRUE(throws_error([&] { from_bytes<Call>(dup); }, ErrorCode::protocol_error, {"call.attributes: a key appears twice"}));
}

}  // namespace
}  // namespace dagsim::rpc
