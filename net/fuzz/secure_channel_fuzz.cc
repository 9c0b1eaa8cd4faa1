// net/fuzz/secure_channel_fuzz.cc: the libFuzzer target for net/secure_channel.{h,cc} (mutual TLS
// 1.3 through OpenSSL, then dagsim's identity exchange), built and run by scripts/fuzz.sh. It
// promises to report (abort, so libFuzzer saves the input) any of:
//  - feed(), take_output(), read() crashing, leaking, tripping ASan, UBSan or a DAGSIM_ASSERT, or
//    throwing anything but Error(protocol_error) from read();
//  - a refusal without a reason; a side that established with a peer other than the one whose
//    certificate it saw, or (listener) with a peer whose claimed name is not its certificate's;
//  - mode 2: two honest peers with nothing changed in transit not both establishing; both
//    establishing although the dialer used another node's certificate, another CA's or one
//    naming no node (a changed byte may be one TLS ignores; any identity must still be true).
//
// Input layout, parameters fixed where not read:
//   byte 0  mode: 0 a listener fed the rest of the input, 1 a dialer fed it after its ClientHello,
//           2 a dialer and a listener talking through a channel that may flip bytes
//   byte 1  chunk schedule (fuzz_util.h): how the bytes are split between feed() calls
//   mode 2: byte 2 flags: bit 0 the dialer holds worker2's certificate but claims to be worker1,
//           bit 1 the dialer's certificate is from another CA, bit 2 mallory's (no node of the
//           run); byte 3 the number of flips (bits 0-2), then per flip a u16 position in the
//           exchanged bytes (modulo 4096) and a u8 xor mask (0 counts as 1).
// Keys are made once per process (key generation is slow, and not what is fuzzed).
#include <exception>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "net/secure_channel.h"

namespace dagsim::net::fuzz {
namespace {

struct Keys {
  CertificateAuthority ca = CertificateAuthority::create("fuzz CA");
  CertificateAuthority other = CertificateAuthority::create("another CA");
  std::vector<std::shared_ptr<const TlsContext>> node;
  std::shared_ptr<const TlsContext> foreign, mallory;
  Keys() {
    for (const char* name : {"worker0", "worker1", "worker2"}) node.push_back(std::make_shared<TlsContext>(ca.issue(name)));
    foreign = std::make_shared<TlsContext>(other.issue("worker1"));
    mallory = std::make_shared<TlsContext>(ca.issue("mallory"));
  }
};

const Keys& keys() {
  static const Keys k;
  return k;
}

ChannelParams params(WorkerId self) {
  ChannelParams p;
  p.cluster_id = 0x0123456789abcdefULL;
  p.self = self;
  p.names = {"worker0", "worker1", "worker2"};
  return p;
}

void check_refusal(const SecureChannel& c) {
  if (c.status() == SecureChannel::Status::refused) DAGSIM_FUZZ_CHECK(!c.error().empty());
}

void check_established(const SecureChannel& c) {
  if (c.status() != SecureChannel::Status::established) return;
  const std::vector<std::string> names = params(0).names;
  DAGSIM_FUZZ_CHECK(c.peer().worker < names.size());
  DAGSIM_FUZZ_CHECK(names[c.peer().worker] == c.peer_certificate_name());
}

// Feeds `bytes` in the schedule's chunks; then, if established, reads what decrypts. With
// `discard`, what the side says back is thrown away (nobody is there to hear it); else it waits
// for take_output().
void feed_all(SecureChannel& c, std::span<const uint8_t> bytes, ChunkSchedule& chunks, bool discard = true) {
  while (!bytes.empty()) {
    const size_t n = std::min(chunks.next(), bytes.size());
    c.feed(bytes.first(n));
    bytes = bytes.subspan(n);
    if (discard) (void)c.take_output();
    check_refusal(c);
    if (c.status() == SecureChannel::Status::established) {
      std::vector<uint8_t> into(4096);
      try {
        while (c.read(into) > 0) {
        }
      } catch (const Error& e) {
        DAGSIM_FUZZ_CHECK(e.code() == ErrorCode::protocol_error);
        return;
      }
    }
  }
  check_established(c);
}

void fuzz_pair(FuzzInput& in, ChunkSchedule& chunks) {
  const uint8_t flags = in.u8();
  const Keys& k = keys();
  std::shared_ptr<const TlsContext> dialer_tls = k.node[1];
  if (flags & 1) dialer_tls = k.node[2];
  if (flags & 2) dialer_tls = k.foreign;
  if (flags & 4) dialer_tls = k.mallory;
  const bool honest = (flags & 7) == 0;
  SecureChannel dialer = SecureChannel::dial(dialer_tls, params(1), 0);
  SecureChannel listener = SecureChannel::accept(k.node[0], params(0));
  struct Flip {
    size_t at;
    uint8_t mask;
  };
  std::vector<Flip> flips(in.u8() & 7);
  for (Flip& f : flips) {
    f.at = in.u16() % 4096;
    const uint8_t m = in.u8();
    f.mask = m == 0 ? 1 : m;
  }
  size_t position = 0;
  bool flipped = false;
  const auto carry = [&](SecureChannel& from, SecureChannel& to) {
    std::vector<uint8_t> bytes = from.take_output();
    for (const Flip& f : flips) {
      if (f.at >= position && f.at < position + bytes.size()) {
        bytes[f.at - position] ^= f.mask;
        flipped = true;
      }
    }
    position += bytes.size();
    if (!bytes.empty()) feed_all(to, bytes, chunks, /*discard=*/false);
  };
  for (int round = 0; round < 8; ++round) {
    carry(dialer, listener);
    carry(listener, dialer);
  }
  check_established(dialer);
  check_established(listener);
  const bool both = dialer.status() == SecureChannel::Status::established &&
                    listener.status() == SecureChannel::Status::established;
  if (honest && !flipped && !both) fail("two honest peers did not both establish", (dialer.error() + " | " + listener.error()).c_str());
  // A flipped byte may land where TLS 1.3 ignores it (a record header's legacy version): what must
  // never happen is an established connection with a false identity, which check_established and
  // this check rule out whatever was flipped.
  if (!honest && both) fail("both ends established although the dialer used a certificate not its own");
}

}  // namespace
}  // namespace dagsim::net::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim::net::fuzz;
  FuzzInput in(data, size);
  const uint8_t mode = in.u8() % 3;
  ChunkSchedule chunks(in.u8());
  const Keys& k = keys();
  if (mode == 0) {
    dagsim::net::SecureChannel listener = dagsim::net::SecureChannel::accept(k.node[0], params(0));
    feed_all(listener, in.rest(), chunks);
  } else if (mode == 1) {
    dagsim::net::SecureChannel dialer = dagsim::net::SecureChannel::dial(k.node[1], params(1), 0);
    (void)dialer.take_output();
    feed_all(dialer, in.rest(), chunks);
  } else {
    fuzz_pair(in, chunks);
  }
  return 0;
}
