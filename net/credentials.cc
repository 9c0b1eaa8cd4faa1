// Credentials: a run's CA, its node certificates and revocation list, through OpenSSL's X.509
// functions. See credentials.h.
#include "net/credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net {

namespace {

namespace fs = std::filesystem;

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Crl = std::unique_ptr<X509_CRL, Deleter<X509_CRL, X509_CRL_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

[[noreturn]] void fail(const std::string& what) {
  const unsigned long code = ERR_get_error();
  std::string why = what;
  if (code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    why += ": ";
    why += text;
  }
  ERR_clear_error();
  throw errors::invalid_argument(why);
}

void check_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) ok = ok && c > ' ' && c < 127 && c != '/' && c != '\\';
  if (!ok) throw errors::invalid_argument("node name " + printable(name) + ": 1 to 64 printable characters, no spaces or slashes");
}

Key new_key() {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) fail("cannot make an EC P-256 key");
  return key;
}

std::string pem_of(const std::function<int(BIO*)>& write) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) fail("cannot write PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Bio bio_of(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) fail("out of memory");
  return bio;
}

Cert cert_from(const std::string& pem, const std::string& what) {
  Cert cert(PEM_read_bio_X509(bio_of(pem).get(), nullptr, nullptr, nullptr));
  if (!cert) fail(what + ": not a PEM certificate");
  return cert;
}

Key key_from(const std::string& pem, const std::string& what) {
  Key key(PEM_read_bio_PrivateKey(bio_of(pem).get(), nullptr, nullptr, nullptr));
  if (!key) fail(what + ": not a PEM private key");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1) fail("cannot add a certificate extension");
  X509_EXTENSION_free(ext);
}

// A certificate for `name` and `key`, signed by `issuer_key` (self-signed when `issuer` is null).
Cert make_certificate(const std::string& name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, int days, bool ca,
                      uint64_t* serial_out) {
  Cert cert(X509_new());
  if (!cert) fail("out of memory");
  X509_set_version(cert.get(), 2);  // v3
  uint64_t serial = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial)) != 1) fail("no random serial");
  serial &= 0x7fffffffffffffffULL;  // positive
  if (serial_out) *serial_out = serial;
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : subject);
  X509* signer = issuer ? issuer : cert.get();
  add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
  add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (ca) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) fail("cannot sign the certificate of " + printable(name));
  return cert;
}

void write_file(const fs::path& path, const std::string& text, bool secret) {
  const fs::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw errors::invalid_argument(printable(path.string()) + ": cannot write");
    if (secret) fs::permissions(temp, fs::perms::owner_read | fs::perms::owner_write);
    out << text;
    if (!out.flush()) throw errors::invalid_argument(printable(path.string()) + ": cannot write");
  }
  fs::rename(temp, path);
}

std::string read_credential_file(const fs::path& path, bool secret) {
  const std::string text = read_small_file(path.string(), kMaxCredentialFileBytes);
  if (secret) {
    struct stat info{};
    if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(info.st_mode & 0777));
      throw errors::invalid_argument(printable(path.string()) + ": a private key others can read (mode " + mode +
                                     "; chmod 600 it)");
    }
  }
  return text;
}

}  // namespace

std::string read_small_file(const std::string& path, size_t max_bytes) {
  return read_bounded_file(path, max_bytes, ErrorCode::invalid_argument, "a credential file");
}

std::string certificate_name(const std::string& certificate_pem, const std::string& what) {
  const Cert cert = cert_from(certificate_pem, what);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_NAME_entry_count(subject) != 1 || X509_NAME_get_index_by_NID(subject, NID_commonName, -1) < 0) {
    throw errors::invalid_argument(what + ": the certificate's subject is not one common name");
  }
  const ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, 0));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)), static_cast<size_t>(ASN1_STRING_length(cn)));
}

NodeCredential NodeCredential::load(const std::string& dir) {
  const fs::path d(dir);
  NodeCredential c;
  c.certificate_pem = read_credential_file(d / "node.crt", false);
  c.key_pem = read_credential_file(d / "node.key", true);
  c.ca_pem = read_credential_file(d / "ca.crt", false);
  if (fs::exists(d / "revoked.crl")) c.crl_pem = read_credential_file(d / "revoked.crl", false);
  c.name = certificate_name(c.certificate_pem, printable((d / "node.crt").string()));
  check_name(c.name);
  return c;
}

void NodeCredential::save(const std::string& dir) const {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  write_file(fs::path(dir) / "ca.crt", ca_pem, false);
  write_file(fs::path(dir) / "node.crt", certificate_pem, false);
  write_file(fs::path(dir) / "node.key", key_pem, true);
  if (!crl_pem.empty()) write_file(fs::path(dir) / "revoked.crl", crl_pem, false);
}

struct CertificateAuthority::State {
  Key key;
  Cert cert;
  std::string cert_pem;
  std::map<uint64_t, std::string> issued;  // serial -> name
  std::map<uint64_t, std::string> revoked;
  int days = 30;
};

CertificateAuthority::CertificateAuthority(std::unique_ptr<State> state) : state_(std::move(state)) {}
CertificateAuthority::~CertificateAuthority() = default;
CertificateAuthority::CertificateAuthority(CertificateAuthority&&) noexcept = default;
CertificateAuthority& CertificateAuthority::operator=(CertificateAuthority&&) noexcept = default;

CertificateAuthority CertificateAuthority::create(const std::string& label, int days) {
  auto s = std::make_unique<State>();
  s->key = new_key();
  s->cert = make_certificate(label, s->key.get(), nullptr, s->key.get(), days, true, nullptr);
  s->cert_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509(b, s->cert.get()); });
  s->days = days;
  return CertificateAuthority(std::move(s));
}

CertificateAuthority CertificateAuthority::load(const std::string& dir) {
  const fs::path d(dir);
  auto s = std::make_unique<State>();
  s->cert_pem = read_credential_file(d / "ca.crt", false);
  s->cert = cert_from(s->cert_pem, printable((d / "ca.crt").string()));
  s->key = key_from(read_credential_file(d / "ca.key", true), printable((d / "ca.key").string()));
  if (X509_check_private_key(s->cert.get(), s->key.get()) != 1) fail(printable(dir) + ": ca.key is not ca.crt's key");
  for (const char* list : {"issued.txt", "revoked.txt"}) {
    if (!fs::exists(d / list)) continue;
    std::istringstream lines(read_credential_file(d / list, false));
    uint64_t serial = 0;
    std::string name;
    while (lines >> serial >> name) (std::string(list) == "issued.txt" ? s->issued : s->revoked)[serial] = name;
  }
  return CertificateAuthority(std::move(s));
}

void CertificateAuthority::save(const std::string& dir) const {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  write_file(fs::path(dir) / "ca.crt", state_->cert_pem, false);
  write_file(fs::path(dir) / "ca.key", pem_of([&](BIO* b) {
               return PEM_write_bio_PrivateKey(b, state_->key.get(), nullptr, nullptr, 0, nullptr, nullptr);
             }), true);
  for (const auto& [list, entries] : {std::pair{"issued.txt", &state_->issued}, std::pair{"revoked.txt", &state_->revoked}}) {
    std::string text;
    for (const auto& [serial, name] : *entries) text += std::to_string(serial) + " " + name + "\n";
    write_file(fs::path(dir) / list, text, false);
  }
  write_file(fs::path(dir) / "revoked.crl", crl_pem(), false);
}

NodeCredential CertificateAuthority::issue(const std::string& name, int days) {
  check_name(name);
  Key key = new_key();
  uint64_t serial = 0;
  Cert cert = make_certificate(name, key.get(), state_->cert.get(), state_->key.get(), days, false, &serial);
  state_->issued[serial] = name;
  NodeCredential c;
  c.name = name;
  c.certificate_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  c.key_pem = pem_of([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  c.ca_pem = state_->cert_pem;
  if (!state_->revoked.empty()) c.crl_pem = crl_pem();
  return c;
}

void CertificateAuthority::revoke(const std::string& name) {
  bool any = false;
  for (const auto& [serial, holder] : state_->issued) {
    if (holder == name) state_->revoked[serial] = name, any = true;
  }
  if (!any) throw errors::invalid_argument("no certificate was issued to " + printable(name) + " by this CA");
}

const std::string& CertificateAuthority::certificate_pem() const { return state_->cert_pem; }

std::string CertificateAuthority::crl_pem() const {
  Crl crl(X509_CRL_new());
  if (!crl) fail("out of memory");
  X509_CRL_set_version(crl.get(), 1);  // v2
  X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(state_->cert.get()));
  using Time = std::unique_ptr<ASN1_TIME, Deleter<ASN1_TIME, ASN1_TIME_free>>;
  Time now(X509_gmtime_adj(nullptr, -3600));
  Time next(X509_time_adj_ex(nullptr, state_->days, 0, nullptr));
  X509_CRL_set1_lastUpdate(crl.get(), now.get());
  X509_CRL_set1_nextUpdate(crl.get(), next.get());
  for (const auto& [serial, name] : state_->revoked) {
    X509_REVOKED* r = X509_REVOKED_new();
    ASN1_INTEGER* n = ASN1_INTEGER_new();
    ASN1_INTEGER_set_uint64(n, serial);
    X509_REVOKED_set_serialNumber(r, n);
    X509_REVOKED_set_revocationDate(r, now.get());
    ASN1_INTEGER_free(n);
    X509_CRL_add0_revoked(crl.get(), r);
  }
  X509_CRL_sort(crl.get());
  if (X509_CRL_sign(crl.get(), state_->key.get(), EVP_sha256()) == 0) fail("cannot sign the revocation list");
  return pem_of([&](BIO* b) { return PEM_write_bio_X509_CRL(b, crl.get()); });
}

}  // namespace dagsim::net
