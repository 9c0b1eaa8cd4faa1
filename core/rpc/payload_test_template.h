// The one round-trip test of wire payloads (wire.h), as a typed test template that each folder
// instantiates for its payload structs: every sample survives to_bytes / from_bytes unchanged,
// every truncation of its encoding is rejected with protocol_error saying it is truncated (never
// a crash, never a partial value), and a trailing byte is rejected naming the payload.
//
// A folder specialises PayloadSamples<T> for each struct (a few values, empty and full, that
// differ in every field) and lists the structs in INSTANTIATE_TYPED_TEST_SUITE_P(Folder,
// PayloadRoundTrip, ::testing::Types<...>).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "core/base/error.h"
#include "core/rpc/wire.h"

namespace dagsim::rpc {

// Specialise: static std::vector<T> make();
template <typename T>
struct PayloadSamples;

template <typename T>
class PayloadRoundTrip : public ::testing::Test {};

TYPED_TEST_SUITE_P(PayloadRoundTrip);

TYPED_TEST_P(PayloadRoundTrip, EverySampleRoundTripsAndSamplesDiffer) {
  const std::vector<TypeParam> samples = PayloadSamples<TypeParam>::make();
  ASSERT_GE(samples.size(), 2u) << "give an empty and a full sample at least";
  std::vector<Bytes> encodings;
  for (const TypeParam& sample : samples) {
    const Bytes bytes = to_bytes(sample);
    const TypeParam back = from_bytes<TypeParam>(bytes);
    // Equal encodings: every field the layout describes came back (the layout is one
    // description, so a field written is a field read).
    EXPECT_EQ(to_bytes(back), bytes) << TypeParam::kName;
    for (const Bytes& other : encodings) EXPECT_NE(other, bytes) << TypeParam::kName << ": two samples encode alike";
    encodings.push_back(bytes);
  }
}

TYPED_TEST_P(PayloadRoundTrip, EveryTruncationIsRejected) {
  for (const TypeParam& sample : PayloadSamples<TypeParam>::make()) {
    const Bytes bytes = to_bytes(sample);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      try {
        (void)from_bytes<TypeParam>(std::span(bytes).first(cut));
        ADD_FAILURE() << TypeParam::kName << ": " << cut << " of " << bytes.size() << " bytes decoded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol_error) << e.what();
        EXPECT_NE(e.detail().find("truncated"), std::string::npos) << TypeParam::kName << " cut at " << cut << ": " << e.detail();
      }
    }
  }
}

TYPED_TEST_P(PayloadRoundTrip, TrailingBytesAreRejectedNamingThePayload) {
  for (const TypeParam& sample : PayloadSamples<TypeParam>::make()) {
    Bytes bytes = to_bytes(sample);
    bytes.push_back(0);
    try {
      (void)from_bytes<TypeParam>(bytes);
      ADD_FAILURE() << TypeParam::kName << ": a trailing byte was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::protocol_error);
      EXPECT_EQ(e.detail(), std::string(TypeParam::kName) + ": 1 unexpected trailing bytes");
    }
  }
}

REGISTER_TYPED_TEST_SUITE_P(PayloadRoundTrip, EverySampleRoundTripsAndSamplesDiffer, EveryTruncationIsRejected,
                            TrailingBytesAreRejectedNamingThePayload);

}  // namespace dagsim::rpc
