// Credentials: each process of a run has its own identity (issue 49). A run's certificate
// authority (CA) signs one certificate per node, naming it (the subject's common name is the node's
// name, as in the peers file), and one for the launcher ("launcher"). A node holds only its own key;
// what it presents at every connection is checked against the name it claims (secure_channel.h).
//
//  - CertificateAuthority: an ECDSA P-256 key and a self-signed CA certificate. issue() makes a
//    node's key and certificate (serverAuth and clientAuth: a node both dials and accepts);
//    revoke() adds every certificate issued to a name to the CA's revocation list (a CRL, which
//    nodes load beside the CA's certificate and check at every handshake).
//  - NodeCredential: what one process holds: its name, certificate, key, the CA's certificate and
//    the CRL, as PEM text.
//  - Directories. A CA directory holds ca.crt, ca.key (mode 0600), issued.txt and revoked.txt (one
//    "serial name" line per certificate) and revoked.crl. A node's credential directory holds
//    ca.crt, node.crt, node.key (0600) and revoked.crl. The launcher of a local run makes a CA in
//    the run's temporary folder and gives each node process the path of its own directory
//    (DAGSIM_CREDENTIALS); hand-started nodes get theirs from `dagsim credentials`.
//
// Bounds: a file read is a regular file of at most kMaxCredentialFileBytes (another kind, or a
// larger one, is refused naming it); PEM is parsed by OpenSSL. Errors are Error(invalid_argument)
// naming the file or the name. Security material never comes from the scenario's seed: keys and
// serials come from the OS's generator (OpenSSL's), and validity from the wall clock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dagsim::net {

inline constexpr size_t kMaxCredentialFileBytes = 1 << 20;
inline constexpr const char* kLauncherName = "launcher";
// The environment variable naming a process's credential directory.
inline constexpr const char* kCredentialsVariable = "DAGSIM_CREDENTIALS";

struct NodeCredential {
  std::string name;
  std::string certificate_pem;
  std::string key_pem;
  std::string ca_pem;
  std::string crl_pem;  // empty: nothing revoked

  // Reads `dir` (see above). Refuses a missing file, a special or oversized one, a key that others
  // can read, and a certificate whose name is empty.
  static NodeCredential load(const std::string& dir);
  // Writes it to `dir` (made if missing; the key with mode 0600).
  void save(const std::string& dir) const;
};

class CertificateAuthority {
 public:
  // A fresh CA whose certificate is valid for `days` (from an hour ago: clocks of hosts differ).
  static CertificateAuthority create(const std::string& label, int days = 30);
  // A CA directory written by save().
  static CertificateAuthority load(const std::string& dir);
  void save(const std::string& dir) const;

  ~CertificateAuthority();
  CertificateAuthority(CertificateAuthority&&) noexcept;
  CertificateAuthority& operator=(CertificateAuthority&&) noexcept;

  // A new key and certificate for `name`, valid for `days`. `name`: 1 to 64 printable ASCII
  // characters (what a peers file allows); anything else is refused.
  NodeCredential issue(const std::string& name, int days = 30);
  // Revokes every certificate issued to `name` (none issued: refused, naming it).
  void revoke(const std::string& name);

  const std::string& certificate_pem() const;
  std::string crl_pem() const;  // signed now; lists every revoked serial

 private:
  struct State;
  explicit CertificateAuthority(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The common name of a PEM certificate (for messages and checks); throws naming `what` when the
// text is not one certificate with one common name.
std::string certificate_name(const std::string& certificate_pem, const std::string& what);

// Reads a small regular file whole: refuses special files and files over `max_bytes`, naming the
// path. Used for every credential file.
std::string read_small_file(const std::string& path, size_t max_bytes);

}  // namespace dagsim::net
