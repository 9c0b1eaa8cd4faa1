#include "net/envelope.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <sys/mman.h>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/rpc/wire.h"

namespace dagsim::net {

namespace {

constexpr uint8_t kMessageKind = 1;
constexpr size_t kStagingBytes = 64 * 1024;
// A payload at least this long still to come is read straight into its buffer.
constexpr size_t kDirectReadBytes = 16 * 1024;
// A payload at least this long is allocated on pages the kernel may back with 2 MiB huge pages.
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugePayloadBytes = 4 * kHugePageBytes;

// Sizes `payload` to `length` zeros. A large one is first reserved (fresh pages of its own: glibc
// maps an allocation this size apart), then its whole huge pages are marked MADV_HUGEPAGE before
// anything touches them: filling 64 MiB costs 32 page faults instead of 16,384, which were a third
// of a 64 MiB stream's receiving time. The advice is only advice: where the kernel has no huge
// page to give (or THP is off), the pages are ordinary ones, as before.
// REQUIRES: `payload` holds no buffer (verify() hands each one on and leaves none behind).
void size_payload(std::vector<uint8_t>& payload, size_t length) {
  DAGSIM_ASSERT(payload.capacity() == 0);
  if (length >= kHugePayloadBytes) {
    payload.reserve(length);
    const auto start = reinterpret_cast<uintptr_t>(payload.data());
    const uintptr_t first = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
    const uintptr_t last = (start + length) & ~(kHugePageBytes - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
  payload.assign(length, 0);
}

}  // namespace

EnvelopeSealer::EnvelopeSealer(std::optional<Digest> key) {
  if (key) mac_.emplace(*key);
}

SealedEnvelope EnvelopeSealer::seal(std::span<const uint8_t> payload, uint64_t padding) {
  begin(payload.size(), padding);
  update(payload);
  return finish();
}

std::array<uint8_t, kEnvelopeHeaderBytes> EnvelopeSealer::begin(size_t payload_size, uint64_t padding) {
  DAGSIM_ASSERT_MSG(!open_, "an envelope begun before the last one finished");
  DAGSIM_ASSERT(payload_size <= UINT32_MAX);
  std::vector<uint8_t> header;
  header.reserve(kEnvelopeHeaderBytes);
  rpc::WireWriter w(header);
  w.u8(kMessageKind);
  w.u8(0);
  w.u16(0);
  w.u32(static_cast<uint32_t>(payload_size));
  w.u64(padding);
  sealing_ = {};
  std::ranges::copy(header, sealing_.header.begin());
  if (mac_) {
    mac_->begin(seq_);
    mac_->update(sealing_.header);
  }
  open_ = true;
  left_ = payload_size;
  return sealing_.header;
}

void EnvelopeSealer::update(std::span<const uint8_t> piece) {
  DAGSIM_ASSERT(open_ && piece.size() <= left_);
  left_ -= piece.size();
  if (mac_ && !piece.empty()) mac_->update(piece);
}

SealedEnvelope EnvelopeSealer::finish() {
  DAGSIM_ASSERT_MSG(open_ && left_ == 0, "an envelope finished before all of its payload was MACed");
  if (mac_) {
    sealing_.mac = mac_->finish();
    sealing_.mac_bytes = kEnvelopeMacBytes;
  }
  open_ = false;
  ++seq_;
  return sealing_;
}

EnvelopeDecoder::EnvelopeDecoder(std::optional<Digest> key, EnvelopeLimits limits)
    : mac_bytes_(key ? kEnvelopeMacBytes : 0), limits_(limits), staging_(kStagingBytes) {
  if (key) mac_state_.emplace(*key);
}

std::span<uint8_t> EnvelopeDecoder::next_buffer() {
  direct_ = state_ == State::payload && begin_ == end_ && payload_.size() - filled_ >= kDirectReadBytes;
  if (direct_) return std::span<uint8_t>(payload_).subspan(filled_);
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (end_ == staging_.size()) {
    std::memmove(staging_.data(), staging_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  DAGSIM_ASSERT(end_ < staging_.size());
  return std::span<uint8_t>(staging_).subspan(end_);
}

void EnvelopeDecoder::commit(size_t n) {
  if (direct_) {
    direct_ = false;
    DAGSIM_ASSERT(state_ == State::payload && n <= payload_.size() - filled_);
    if (mac_state_) mac_state_->update(std::span<const uint8_t>(payload_).subspan(filled_, n));
    filled_ += n;
    if (filled_ == payload_.size()) finish_payload();
  } else {
    DAGSIM_ASSERT(n <= staging_.size() - end_);
    end_ += n;
  }
  process();
}

void EnvelopeDecoder::push(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    const std::span<uint8_t> into = next_buffer();
    const size_t n = std::min(into.size(), bytes.size());
    std::memcpy(into.data(), bytes.data(), n);
    bytes = bytes.subspan(n);
    commit(n);
  }
}

std::optional<ReceivedEnvelope> EnvelopeDecoder::pop() {
  if (ready_.empty()) return std::nullopt;
  ReceivedEnvelope out = std::move(ready_.front());
  ready_.pop_front();
  return out;
}

bool EnvelopeDecoder::mid_envelope() const { return state_ != State::header || begin_ != end_; }

void EnvelopeDecoder::process() {
  for (;;) {
    const size_t available = end_ - begin_;
    switch (state_) {
      case State::header: {
        if (available < kEnvelopeHeaderBytes) return;
        std::memcpy(header_.data(), staging_.data() + begin_, kEnvelopeHeaderBytes);
        begin_ += kEnvelopeHeaderBytes;
        rpc::WireReader r(header_);
        const uint8_t kind = r.u8("kind");
        const uint8_t flags = r.u8("flags");
        const uint16_t reserved = r.u16("reserved");
        const uint32_t length = r.u32("payload_length");
        const uint64_t padding = r.u64("padding");
        if (kind != kMessageKind || flags != 0 || reserved != 0) {
          throw errors::protocol_error("envelope " + std::to_string(seq_) + ": kind " + std::to_string(kind) + ", flags " +
                                       std::to_string(flags) + ", reserved " + std::to_string(reserved) +
                                       " (expected a message, 1/0/0)");
        }
        if (length > limits_.max_payload_bytes) {
          throw errors::protocol_error("envelope " + std::to_string(seq_) + ": payload_length " + std::to_string(length) +
                                       " exceeds the limit of " + std::to_string(limits_.max_payload_bytes));
        }
        if (padding > limits_.max_padding_bytes) {
          throw errors::protocol_error("envelope " + std::to_string(seq_) + ": padding " + std::to_string(padding) +
                                       " exceeds the limit of " + std::to_string(limits_.max_padding_bytes));
        }
        size_payload(payload_, length);  // checked above; see the file comment
        filled_ = 0;
        if (mac_state_) {
          mac_state_->begin(seq_);  // the payload is MACed piece by piece as it arrives
          mac_state_->update(header_);
        }
        padding_ = padding_left_ = padding;
        state_ = State::payload;
        if (length == 0) finish_payload();
        break;
      }
      case State::payload: {
        const size_t n = std::min(available, payload_.size() - filled_);
        if (n == 0) return;
        std::memcpy(payload_.data() + filled_, staging_.data() + begin_, n);
        if (mac_state_) mac_state_->update(std::span<const uint8_t>(payload_).subspan(filled_, n));
        begin_ += n;
        filled_ += n;
        if (filled_ == payload_.size()) finish_payload();
        break;
      }
      case State::padding: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(available, padding_left_));
        if (n == 0) return;
        begin_ += n;
        padding_left_ -= n;
        if (padding_left_ == 0) state_ = State::mac, mac_filled_ = 0;
        if (state_ == State::mac && mac_bytes_ == 0) verify();
        break;
      }
      case State::mac: {
        const size_t n = std::min(available, mac_bytes_ - mac_filled_);
        if (n == 0) return;
        std::memcpy(mac_.data() + mac_filled_, staging_.data() + begin_, n);
        begin_ += n;
        mac_filled_ += n;
        if (mac_filled_ == mac_bytes_) verify();
        break;
      }
    }
  }
}

void EnvelopeDecoder::finish_payload() {
  mac_filled_ = 0;
  state_ = padding_left_ > 0 ? State::padding : State::mac;
  if (state_ == State::mac && mac_bytes_ == 0) verify();
}

void EnvelopeDecoder::verify() {
  if (mac_state_) {
    const Tag expected = mac_state_->finish();
    if (!equal_in_constant_time(expected, mac_)) {
      DAGSIM_PROBE("net.frame_mac_mismatch");
      throw errors::protocol_error("envelope " + std::to_string(seq_) +
                                   ": its MAC does not verify (forged, replayed, reordered or corrupted)");
    }
  }
  ready_.push_back({std::move(payload_), padding_});
  payload_ = {};
  ++seq_;
  state_ = State::header;
}

}  // namespace dagsim::net
