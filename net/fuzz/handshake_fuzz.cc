// net/fuzz/handshake_fuzz.cc: the libFuzzer target for net/handshake.{h,cc}, built and run by
// scripts/fuzz.sh. It promises to report (abort, so libFuzzer saves the input) any of:
//  - feed() throwing anything on any bytes (the state machine reads fixed-size messages, so bad
//    input must end in refused, never in an exception), crashing, leaking, or tripping ASan,
//    UBSan or a DAGSIM_ASSERT;
//  - feed() consuming bytes past the handshake's last message or before its first, a side that
//    is done still consuming, output after a refusal, a refusal without a reason;
//  - two honest peers not both establishing; peers that both establish with keys or identities
//    that do not match; a side establishing although a byte of the exchange was changed, a
//    secret, cluster or version differs or the dialer reached the wrong worker (only a refusal
//    or, when the other side refused and closed the connection, waiting, may follow).
//
// Input layout (net/fuzz/make_corpus.py writes seeds in it), parameters fixed where not read:
//   byte 0  mode: 0 listener fed the input, 1 dialer fed the input, 2 a dialer and a listener
//           talking through a channel that flips bytes (byte 0 modulo 3)
//   byte 1  chunk schedule (fuzz_util.h): how the bytes are split between feed() calls
//   byte 2  the cluster's size: 2 + (byte mod 15) workers
//   byte 3  this side's worker id (modulo the size); the dialer's in mode 2
//   mode 0: byte 4 the listener's incarnation; the rest is fed to the listener.
//   mode 1: byte 4 picks the target among the other workers, byte 5 the dialer's incarnation;
//           the rest is fed to the dialer after its hello.
//   mode 2: byte 4 picks the target; byte 5 flags: bit 0 the listener is another worker than the
//           target, bit 1 another secret, bit 2 another cluster id, bit 3 another protocol
//           version; byte 6 the number of flips (bits 0-2), then per flip a u16 position in the
//           200-byte exchange (hello 0-63, challenge 64-159, response 160-199; modulo 200) and a
//           u8 xor mask (0 counts as 1); then up to 32 bytes of the dialer's nonce and 32 of
//           the listener's (zeros where the input ends).
#include <exception>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "net/handshake.h"

namespace dagsim::net::fuzz {
namespace {

// Fixed where the input does not choose them (make_corpus.py computes its seeds' MACs from the
// same values).
constexpr std::string_view kSecret = "dagsim fuzz: the cluster's shared secret";
constexpr uint64_t kClusterId = 0x0123456789abcdefULL;
constexpr size_t kExchangeBytes = kHelloBytes + kChallengeBytes + kResponseBytes;

Nonce nonce_filled_from(uint8_t first) {
  Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(first + i);
  return n;
}

HandshakeParams params_for(uint32_t num_workers, WorkerId self, uint32_t incarnation) {
  HandshakeParams p;
  p.cluster_id = kClusterId;
  p.self = self;
  p.incarnation = incarnation;
  p.num_workers = num_workers;
  p.secret.assign(kSecret.begin(), kSecret.end());
  return p;
}

const char* status_name(Handshake::Status s) {
  switch (s) {
    case Handshake::Status::in_progress: return "in progress";
    case Handshake::Status::established: return "established";
    case Handshake::Status::refused: return "refused";
  }
  return "?";
}

// One side of a connection with everything it was fed and said, checked on every call.
struct Side {
  Handshake handshake;
  size_t fed = 0, consumed = 0, output = 0;

  // take_output(), counted; a refused side says nothing.
  std::vector<uint8_t> take_output() {
    std::vector<uint8_t> out = handshake.take_output();
    if (handshake.status() == Handshake::Status::refused && !out.empty()) fail("a refused side has output");
    output += out.size();
    return out;
  }

  // feed(), checked: all bytes taken while in progress, none once done, and never an exception.
  void feed(std::span<const uint8_t> bytes) {
    const Handshake::Status before = handshake.status();
    size_t used = 0;
    try {
      used = handshake.feed(bytes);
    } catch (const std::exception& e) {
      fail("Handshake::feed threw", e.what());
    } catch (...) {
      fail("Handshake::feed threw something that is not a std::exception");
    }
    DAGSIM_FUZZ_CHECK(used <= bytes.size());
    if (before != Handshake::Status::in_progress) DAGSIM_FUZZ_CHECK(used == 0);
    if (handshake.status() == Handshake::Status::in_progress) DAGSIM_FUZZ_CHECK(used == bytes.size());
    fed += bytes.size();
    consumed += used;
  }

  // feed() in the chunks the schedule picks, while the side is still listening.
  void deliver(std::span<const uint8_t> bytes, ChunkSchedule& chunks) {
    while (!bytes.empty()) {
      const size_t n = std::min(bytes.size(), chunks.next());
      feed(bytes.first(n));
      bytes = bytes.subspan(n);
      if (handshake.status() != Handshake::Status::in_progress) break;  // the rest is the next stream's
    }
  }

  // What holds in every state, whatever the peer sent: a refusal has a reason, an established
  // side knows a peer that is another worker of the cluster, and distinct keys per direction.
  void check_state(uint32_t num_workers, WorkerId self) const {
    const Handshake& h = handshake;
    if (h.status() == Handshake::Status::refused) DAGSIM_FUZZ_CHECK(!h.error().empty());
    if (h.status() != Handshake::Status::established) return;
    DAGSIM_FUZZ_CHECK(h.error().empty());
    DAGSIM_FUZZ_CHECK(h.peer().worker < num_workers && h.peer().worker != self);
    DAGSIM_FUZZ_CHECK(h.claimed_peer() == h.peer().worker);
    DAGSIM_FUZZ_CHECK(h.keys().send != h.keys().receive);
  }

  void trace(const char* who) const {
    std::fprintf(stderr, "%s: %s after %zu bytes fed, %zu consumed, %zu said%s%s\n", who,
                 status_name(handshake.status()), fed, consumed, output, handshake.error().empty() ? "" : ": ",
                 handshake.error().c_str());
  }
};

// Mode 0: a listener fed anything. It reads exactly one hello, then (if it answered with a
// challenge) exactly one response.
void fuzz_listener(FuzzInput& in, ChunkSchedule& chunks, uint32_t num_workers, WorkerId self) {
  const uint32_t incarnation = in.u8();
  Side l{Handshake::accept(params_for(num_workers, self, incarnation), nonce_filled_from(0xa0))};
  DAGSIM_FUZZ_CHECK(l.take_output().empty());  // the dialer speaks first
  const std::span<const uint8_t> bytes = in.rest();
  // Output is taken after every feed, as the transport sends it, so a refusal later in the same
  // feed() may withdraw a challenge (the listener then says nothing at all).
  size_t at = 0;
  while (at < bytes.size() && l.handshake.status() == Handshake::Status::in_progress) {
    const size_t n = std::min(bytes.size() - at, chunks.next());
    l.feed(bytes.subspan(at, n));
    at += n;
    l.take_output();
  }
  l.check_state(num_workers, self);
  DAGSIM_FUZZ_CHECK(l.output == 0 || l.output == kChallengeBytes);
  switch (l.handshake.status()) {
    case Handshake::Status::in_progress:
      DAGSIM_FUZZ_CHECK(l.consumed == l.fed && l.consumed < kHelloBytes + kResponseBytes);
      break;
    case Handshake::Status::established:
      DAGSIM_FUZZ_CHECK(l.consumed == kHelloBytes + kResponseBytes && l.output == kChallengeBytes);
      break;
    case Handshake::Status::refused:
      DAGSIM_FUZZ_CHECK(l.consumed == kHelloBytes || l.consumed == kHelloBytes + kResponseBytes);
      break;
  }
  if (tracing()) l.trace("listener");
}

// Mode 1: a dialer fed anything after its hello. It reads exactly one challenge.
void fuzz_dialer(FuzzInput& in, ChunkSchedule& chunks, uint32_t num_workers, WorkerId self) {
  const WorkerId target = static_cast<WorkerId>((self + 1 + in.u8() % (num_workers - 1)) % num_workers);
  const uint32_t incarnation = in.u8();
  Side d{Handshake::dial(params_for(num_workers, self, incarnation), target, nonce_filled_from(0x30))};
  DAGSIM_FUZZ_CHECK(d.take_output().size() == kHelloBytes);
  d.deliver(in.rest(), chunks);
  d.take_output();
  d.check_state(num_workers, self);
  switch (d.handshake.status()) {
    case Handshake::Status::in_progress:
      DAGSIM_FUZZ_CHECK(d.consumed == d.fed && d.consumed < kChallengeBytes && d.output == kHelloBytes);
      break;
    case Handshake::Status::established:
      DAGSIM_FUZZ_CHECK(d.consumed == kChallengeBytes && d.output == kHelloBytes + kResponseBytes);
      DAGSIM_FUZZ_CHECK(d.handshake.peer().worker == target);
      break;
    case Handshake::Status::refused:
      DAGSIM_FUZZ_CHECK(d.consumed == kChallengeBytes && d.output == kHelloBytes);
      break;
  }
  if (tracing()) d.trace("dialer");
}

// Mode 2: both sides honest, the channel (and optionally the configuration) not.
void fuzz_pair(FuzzInput& in, ChunkSchedule& chunks, uint32_t num_workers, WorkerId dialer_self) {
  const WorkerId target = static_cast<WorkerId>((dialer_self + 1 + in.u8() % (num_workers - 1)) % num_workers);
  const uint8_t flags = in.u8();
  struct Flip {
    size_t position;  // in the 200-byte exchange
    uint8_t mask;
  };
  std::vector<Flip> flips;
  for (size_t i = 0, count = in.u8() & 7; i < count; ++i) {
    const size_t position = in.u16() % kExchangeBytes;
    const uint8_t mask = in.u8();
    flips.push_back({position, mask == 0 ? uint8_t{1} : mask});
  }
  Nonce nonce_a{}, nonce_b{};
  const std::span<const uint8_t> a = in.take(nonce_a.size());
  std::ranges::copy(a, nonce_a.begin());
  const std::span<const uint8_t> b = in.take(nonce_b.size());
  std::ranges::copy(b, nonce_b.begin());

  const WorkerId listener_self = (flags & 1) ? static_cast<WorkerId>((target + 1) % num_workers) : target;
  HandshakeParams dialer_params = params_for(num_workers, dialer_self, 7);
  HandshakeParams listener_params = params_for(num_workers, listener_self, 9);
  if (flags & 2) listener_params.secret.back() ^= 1;
  if (flags & 4) listener_params.cluster_id ^= 1;
  if (flags & 8) listener_params.version = kNetProtocolVersion + 1;
  const bool misconfigured = (flags & 0xf) != 0;

  Side d{Handshake::dial(dialer_params, target, nonce_a)};
  Side l{Handshake::accept(listener_params, nonce_b)};

  // The channel: each direction's byte offset maps into the exchange (dialer to listener: hello,
  // then response; listener to dialer: the challenge).
  // `changed` counts messages that arrive different from how they were sent: two flips of one
  // byte may cancel out, and a flip past a refusal never lands.
  size_t sent_dl = 0, sent_ld = 0, changed = 0;
  auto tamper = [&](std::vector<uint8_t>& bytes, size_t stream_offset, bool dialer_to_listener) {
    const std::vector<uint8_t> sent = bytes;
    for (const Flip& f : flips) {
      size_t at;
      bool dl;
      if (f.position < kHelloBytes) {
        at = f.position, dl = true;
      } else if (f.position < kHelloBytes + kChallengeBytes) {
        at = f.position - kHelloBytes, dl = false;
      } else {
        at = f.position - kChallengeBytes, dl = true;  // the response follows the hello
      }
      if (dl != dialer_to_listener || at < stream_offset || at >= stream_offset + bytes.size()) continue;
      bytes[at - stream_offset] ^= f.mask;
    }
    if (bytes != sent) ++changed;
  };
  auto refused = [&] {
    return d.handshake.status() == Handshake::Status::refused || l.handshake.status() == Handshake::Status::refused;
  };
  for (int round = 0; round < 8 && !refused(); ++round) {
    std::vector<uint8_t> to_listener = d.take_output();
    tamper(to_listener, sent_dl, true);
    sent_dl += to_listener.size();
    l.deliver(to_listener, chunks);
    if (refused()) break;  // a refusal closes the connection: nothing more moves
    std::vector<uint8_t> to_dialer = l.take_output();
    tamper(to_dialer, sent_ld, false);
    sent_ld += to_dialer.size();
    d.deliver(to_dialer, chunks);
    if (to_listener.empty() && to_dialer.empty()) break;
  }
  d.check_state(num_workers, dialer_self);
  l.check_state(num_workers, listener_self);
  if (tracing()) {
    std::fprintf(stderr, "pair: %u workers, %u dials %u, listener %u, flags %#x, %zu flips, %zu messages changed\n",
                 num_workers, unsigned{dialer_self}, unsigned{target}, unsigned{listener_self}, unsigned{flags},
                 flips.size(), changed);
    d.trace("dialer");
    l.trace("listener");
  }

  using S = Handshake::Status;
  const S ds = d.handshake.status(), ls = l.handshake.status();
  // Nothing is left half-done unless the other side refused (and closed the connection).
  if (ds == S::in_progress) DAGSIM_FUZZ_CHECK(ls == S::refused);
  if (ls == S::in_progress) DAGSIM_FUZZ_CHECK(ds == S::refused);
  if (!misconfigured && changed == 0) {
    if (ds != S::established || ls != S::established) fail("two honest peers did not both establish");
  }
  if (misconfigured || changed > 0) {
    if (ds == S::established && ls == S::established) fail("both sides established over a tampered exchange");
  }
  if (ds == S::established) {
    // The challenge's MAC proved the listener: the dialer reached whom it meant to.
    DAGSIM_FUZZ_CHECK(d.handshake.peer().worker == target && target == listener_self);
    DAGSIM_FUZZ_CHECK(d.handshake.peer().incarnation == listener_params.incarnation);
  }
  if (ls == S::established) {
    // The response's MAC proved the dialer, over the exchange both sides saw: same peers, same keys.
    DAGSIM_FUZZ_CHECK(ds == S::established);
    DAGSIM_FUZZ_CHECK(l.handshake.peer().worker == dialer_self);
    DAGSIM_FUZZ_CHECK(l.handshake.peer().incarnation == dialer_params.incarnation);
    DAGSIM_FUZZ_CHECK(d.handshake.keys().send == l.handshake.keys().receive);
    DAGSIM_FUZZ_CHECK(d.handshake.keys().receive == l.handshake.keys().send);
  }
}

}  // namespace
}  // namespace dagsim::net::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim::net::fuzz;
  FuzzInput in(data, size);
  const uint8_t mode = in.u8() % 3;
  ChunkSchedule chunks(in.u8());
  const uint32_t num_workers = 2 + in.u8() % 15;
  const auto self = static_cast<dagsim::WorkerId>(in.u8() % num_workers);
  switch (mode) {
    case 0: fuzz_listener(in, chunks, num_workers, self); break;
    case 1: fuzz_dialer(in, chunks, num_workers, self); break;
    default: fuzz_pair(in, chunks, num_workers, self); break;
  }
  return 0;
}
