// SecureChannel and Credentials, both ends played in memory: per-node identity (a node speaks only
// as the name in its certificate; every other name it claims is refused by name), revocation,
// another CA, no certificate, tampered records, the plain-after-handshake mode.
#include "net/secure_channel.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <filesystem>

#include "core/base/error.h"

namespace dagsim::net {
namespace {

const std::vector<std::string> kNames = {"worker0", "worker1", "worker2", "worker3"};

struct TestRun {
  CertificateAuthority ca = CertificateAuthority::create("dagsim test CA");
  std::vector<std::shared_ptr<const TlsContext>> contexts;
  TestRun() {
    for (const std::string& name : kNames) contexts.push_back(std::make_shared<TlsContext>(ca.issue(name)));
  }
};

ChannelParams params(WorkerId self, bool plain = false) {
  ChannelParams p;
  p.cluster_id = 0x5eed;
  p.self = self;
  p.incarnation = 3;
  p.names = kNames;
  p.plain_after_handshake = plain;
  return p;
}

// Moves bytes both ways until neither side has anything to say.
void pump(SecureChannel& a, SecureChannel& b) {
  for (int i = 0; i < 50; ++i) {
    const std::vector<uint8_t> ab = a.take_output(), ba = b.take_output();
    if (ab.empty() && ba.empty()) return;
    if (!ab.empty()) b.feed(ab);
    if (!ba.empty()) a.feed(ba);
  }
  FAIL() << "the handshake did not settle";
}

TEST(SecureChannel, TwoNodesOfARunConnectAndKnowEachOther) {
  TestRun run;
  SecureChannel dialer = SecureChannel::dial(run.contexts[2], params(2), 1);
  SecureChannel listener = SecureChannel::accept(run.contexts[1], params(1));
  pump(dialer, listener);
  ASSERT_EQ(listener.status(), SecureChannel::Status::established) << listener.error();
  ASSERT_EQ(dialer.status(), SecureChannel::Status::established) << dialer.error();
  EXPECT_EQ(listener.peer().worker, 2u);
  EXPECT_EQ(listener.peer().incarnation, 3u);
  EXPECT_EQ(dialer.peer().worker, 1u);
  EXPECT_EQ(listener.peer_certificate_name(), "worker2");
  EXPECT_TRUE(listener.peer_authenticated());

  // Data both ways, larger than a TLS record.
  std::vector<uint8_t> big(100000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  dialer.write(big);
  listener.feed(dialer.take_output());
  std::vector<uint8_t> got(big.size());
  size_t filled = 0;
  while (size_t n = listener.read(std::span(got).subspan(filled))) filled += n;
  EXPECT_EQ(filled, big.size());
  EXPECT_EQ(got, big);
  const std::vector<uint8_t> small = {1, 2, 3};
  listener.write(small);
  dialer.feed(listener.take_output());
  std::array<uint8_t, 8> back{};
  EXPECT_EQ(dialer.read(back), 3u);
}

// The issue's test: a node holding its own credentials cannot open a connection as another node.
TEST(SecureChannel, ANodeClaimingAnyOtherNameIsRefusedByName) {
  TestRun run;
  const WorkerId listener_id = 0;
  for (WorkerId claimed = 1; claimed < kNames.size(); ++claimed) {
    if (claimed == 2) continue;  // worker2's own name: the honest case above
    SCOPED_TRACE("claims " + kNames[claimed]);
    // worker2's credential, speaking as `claimed`.
    SecureChannel impostor = SecureChannel::dial(run.contexts[2], params(claimed), listener_id);
    SecureChannel listener = SecureChannel::accept(run.contexts[listener_id], params(listener_id));
    pump(impostor, listener);
    ASSERT_EQ(listener.status(), SecureChannel::Status::refused);
    EXPECT_NE(listener.error().find("certificate names \"worker2\""), std::string::npos) << listener.error();
    EXPECT_NE(listener.error().find("claims to be \"" + kNames[claimed] + "\""), std::string::npos) << listener.error();
    EXPECT_NE(impostor.status(), SecureChannel::Status::established);
  }
}

TEST(SecureChannel, TheDialerRefusesAListenerThatIsNotTheNodeItDialled) {
  TestRun run;
  // worker3's process answers at the address the dialer has for worker1.
  SecureChannel dialer = SecureChannel::dial(run.contexts[0], params(0), 1);
  SecureChannel listener = SecureChannel::accept(run.contexts[3], params(3));
  pump(dialer, listener);
  ASSERT_EQ(dialer.status(), SecureChannel::Status::refused);
  EXPECT_NE(dialer.error().find("dialled \"worker1\""), std::string::npos) << dialer.error();
  EXPECT_NE(dialer.error().find("\"worker3\""), std::string::npos) << dialer.error();
}

TEST(SecureChannel, ACertificateNamingNoNodeOfTheRunIsRefusedByName) {
  TestRun run;
  auto mallory = std::make_shared<TlsContext>(run.ca.issue("mallory"));
  for (WorkerId claimed : {WorkerId{1}, WorkerId{2}}) {
    SecureChannel dialer = SecureChannel::dial(mallory, params(claimed), 0);
    SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0));
    pump(dialer, listener);
    ASSERT_EQ(listener.status(), SecureChannel::Status::refused);
    EXPECT_NE(listener.error().find("certificate names \"mallory\""), std::string::npos) << listener.error();
  }
}

TEST(SecureChannel, ARevokedNodeIsRefusedByName) {
  TestRun run;
  auto worker2 = std::make_shared<TlsContext>(run.ca.issue("worker2"));  // before the revocation
  run.ca.revoke("worker2");
  NodeCredential listener_credential = run.ca.issue("worker0");  // carries the CRL
  ASSERT_FALSE(listener_credential.crl_pem.empty());
  auto listener_tls = std::make_shared<TlsContext>(listener_credential);
  SecureChannel dialer = SecureChannel::dial(worker2, params(2), 0);
  SecureChannel listener = SecureChannel::accept(listener_tls, params(0));
  pump(dialer, listener);
  ASSERT_EQ(listener.status(), SecureChannel::Status::refused);
  EXPECT_NE(listener.error().find("certificate of \"worker2\""), std::string::npos) << listener.error();
  EXPECT_NE(listener.error().find("revoked"), std::string::npos) << listener.error();
  EXPECT_EQ(dialer.status(), SecureChannel::Status::refused);
  // Another node of the run still gets in.
  SecureChannel honest = SecureChannel::dial(run.contexts[1], params(1), 0);
  SecureChannel listener2 = SecureChannel::accept(listener_tls, params(0));
  pump(honest, listener2);
  EXPECT_EQ(listener2.status(), SecureChannel::Status::established) << listener2.error();
}

TEST(SecureChannel, ACertificateFromAnotherCaIsRefused) {
  TestRun run;
  CertificateAuthority other = CertificateAuthority::create("another run's CA");
  auto stranger = std::make_shared<TlsContext>(other.issue("worker2"));
  SecureChannel dialer = SecureChannel::dial(stranger, params(2), 0);
  SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0));
  pump(dialer, listener);
  EXPECT_EQ(listener.status(), SecureChannel::Status::refused);
  EXPECT_FALSE(listener.peer_authenticated()) << "another CA's certificate proves nothing";
  EXPECT_NE(dialer.status(), SecureChannel::Status::established);
}

TEST(SecureChannel, APeerWithoutACertificateIsRefused) {
  TestRun run;
  // A TLS 1.3 client with no certificate at all, through OpenSSL directly.
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(in, -1);
  SSL_set_bio(ssl, in, out);
  SSL_set_connect_state(ssl);
  SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0));
  for (int i = 0; i < 20 && listener.status() == SecureChannel::Status::in_progress; ++i) {
    SSL_do_handshake(ssl);
    std::vector<uint8_t> bytes(BIO_ctrl_pending(out));
    if (!bytes.empty()) BIO_read(out, bytes.data(), static_cast<int>(bytes.size()));
    listener.feed(bytes);
    const std::vector<uint8_t> back = listener.take_output();
    if (!back.empty()) BIO_write(in, back.data(), static_cast<int>(back.size()));
  }
  EXPECT_EQ(listener.status(), SecureChannel::Status::refused);
  EXPECT_NE(listener.error().find("certificate"), std::string::npos) << listener.error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

TEST(SecureChannel, BytesThatAreNotTlsAreRefused) {
  TestRun run;
  SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0));
  const std::string hello = "DGSH this is the retired handshake's hello, not TLS...........";
  listener.feed({reinterpret_cast<const uint8_t*>(hello.data()), hello.size()});
  EXPECT_EQ(listener.status(), SecureChannel::Status::refused);
}

TEST(SecureChannel, AnotherClusterOrVersionIsRefused) {
  TestRun run;
  ChannelParams other = params(1);
  other.cluster_id = 99;
  SecureChannel dialer = SecureChannel::dial(run.contexts[1], other, 0);
  SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0));
  pump(dialer, listener);
  EXPECT_NE(listener.error().find("another cluster"), std::string::npos) << listener.error();
  ChannelParams old = params(1);
  old.version = kChannelVersion - 1;  // the last version, whose RPC frames were contiguous
  SecureChannel dialer2 = SecureChannel::dial(run.contexts[1], old, 0);
  SecureChannel listener2 = SecureChannel::accept(run.contexts[0], params(0));
  pump(dialer2, listener2);
  EXPECT_NE(listener2.error().find("speaks channel version 2, this node 3"), std::string::npos) << listener2.error();
}

TEST(SecureChannel, ATamperedRecordFailsToAuthenticate) {
  TestRun run;
  SecureChannel dialer = SecureChannel::dial(run.contexts[1], params(1), 0);
  SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0));
  pump(dialer, listener);
  ASSERT_EQ(listener.status(), SecureChannel::Status::established);
  const std::vector<uint8_t> data(64, 0x5a);
  dialer.write(data);
  std::vector<uint8_t> record = dialer.take_output();
  record[record.size() / 2] ^= 1;
  listener.feed(record);
  std::array<uint8_t, 64> into{};
  EXPECT_THROW(listener.read(into), Error);
}

TEST(SecureChannel, PlainAfterTheHandshakeNeedsBothEndsAndHandsBackTheFirstPlainBytes) {
  TestRun run;
  SecureChannel dialer = SecureChannel::dial(run.contexts[1], params(1, true), 0);
  SecureChannel listener = SecureChannel::accept(run.contexts[0], params(0, true));
  // The listener's reply and its first plain bytes arrive together.
  dialer.feed({});
  listener.feed(dialer.take_output());
  dialer.feed(listener.take_output());
  listener.feed(dialer.take_output());
  ASSERT_EQ(listener.status(), SecureChannel::Status::established) << listener.error();
  std::vector<uint8_t> reply = listener.take_output();
  const std::vector<uint8_t> plain = {9, 8, 7};
  reply.insert(reply.end(), plain.begin(), plain.end());
  dialer.feed(reply);
  ASSERT_EQ(dialer.status(), SecureChannel::Status::established) << dialer.error();
  EXPECT_EQ(dialer.take_unread(), plain);

  SecureChannel mixed = SecureChannel::dial(run.contexts[1], params(1, true), 0);
  SecureChannel strict = SecureChannel::accept(run.contexts[0], params(0, false));
  pump(mixed, strict);
  EXPECT_NE(strict.error().find("--trusted-network"), std::string::npos) << strict.error();
}

TEST(Credentials, ACredentialThatDoesNotLoadIsRefusedNamingWhatFailed) {
  CertificateAuthority ca = CertificateAuthority::create("dagsim test CA");
  const NodeCredential good = ca.issue("worker0");
  const auto error_of = [](const NodeCredential& c) -> std::string {
    try {
      TlsContext context(c);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  NodeCredential bad = good;
  bad.certificate_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  EXPECT_NE(error_of(bad).find("its certificate does not load"), std::string::npos) << error_of(bad);
  bad = good;
  bad.key_pem = ca.issue("worker1").key_pem;  // another node's key
  EXPECT_NE(error_of(bad).find("its key does not load (key values mismatch)"), std::string::npos) << error_of(bad);
  bad = good;
  bad.ca_pem.clear();
  EXPECT_NE(error_of(bad).find("the CA's certificate does not load"), std::string::npos) << error_of(bad);
  bad = good;
  bad.crl_pem = "garbage";
  EXPECT_NE(error_of(bad).find("the revocation list does not load"), std::string::npos) << error_of(bad);
  EXPECT_EQ(error_of(good), "");
}

TEST(Credentials, DirectoriesRoundTripAndAReadableKeyIsRefused) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "dagsim_credentials_test";
  std::filesystem::remove_all(dir);
  CertificateAuthority ca = CertificateAuthority::create("dagsim test CA");
  ca.issue("worker0").save((dir / "worker0").string());
  ca.save((dir / "ca").string());
  const NodeCredential loaded = NodeCredential::load((dir / "worker0").string());
  EXPECT_EQ(loaded.name, "worker0");
  CertificateAuthority again = CertificateAuthority::load((dir / "ca").string());
  again.revoke("worker0");
  EXPECT_THROW(again.revoke("nobody"), Error);
  std::filesystem::permissions(dir / "worker0" / "node.key", std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  try {
    NodeCredential::load((dir / "worker0").string());
    ADD_FAILURE() << "a key others can read was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node.key"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CertificateAuthority::create("x").issue("bad name"), Error);
  EXPECT_THROW(CertificateAuthority::create("x").issue("../x"), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dagsim::net
