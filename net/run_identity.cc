// RunIdentity: see run_identity.h.
#include "net/run_identity.h"

#include <cstdlib>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/crypto.h"

namespace dagsim::net {

namespace {
bool set(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0';
}
}  // namespace

bool identity_in_environment() {
  return set(kCredentialsVariable) || set("DAGSIM_SECRET") || set("DAGSIM_SECRET_FILE");
}

RunIdentity identity_from_environment(const std::string& name) {
  RunIdentity id;
  if (set(kCredentialsVariable)) {
    const std::string dir = std::getenv(kCredentialsVariable);
    id.source = std::string(kCredentialsVariable) + " " + printable(dir);
    const NodeCredential credential = NodeCredential::load(dir);
    if (credential.name != name) {
      throw errors::invalid_argument(id.source + " holds the certificate of " + quote(credential.name) + ", not of " +
                                     quote(name) + " (each process of a run holds only its own)");
    }
    id.tls = std::make_shared<const TlsContext>(credential);
    return id;
  }
  if (!set("DAGSIM_SECRET") && !set("DAGSIM_SECRET_FILE")) {
    throw errors::invalid_argument(std::string("no credentials for ") + quote(name) + ": set " + kCredentialsVariable +
                                   " to its credential directory (`dagsim credentials issue`; docs/tcp.md)");
  }
  Secret secret = secret_from_environment();
  id.secret = std::move(secret.bytes);
  id.source = std::move(secret.source);
  return id;
}

std::string shared_secret_warning() {
  return "dagsim: warning: a shared secret (DAGSIM_SECRET or DAGSIM_SECRET_FILE) authenticates this run: every process "
         "holding it can speak as any other. Per-node certificates (DAGSIM_CREDENTIALS) are the default; see docs/tcp.md";
}

}  // namespace dagsim::net
