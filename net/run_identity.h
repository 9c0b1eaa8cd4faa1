// RunIdentity: how this process of a run authenticates, from its environment (issue 49).
//  - DAGSIM_CREDENTIALS names its own credential directory (credentials.h): mutual TLS with a
//    certificate naming it. The default: a local launcher makes a CA for its run and gives each
//    node process its own directory; hand-started nodes get theirs from `dagsim credentials`.
//  - Otherwise DAGSIM_SECRET or DAGSIM_SECRET_FILE: the shared secret (handshake.h), one identity
//    for every process of the run. Kept as the operator's explicit choice, for what it costs less
//    on hosts without kernel TLS (reports/transports.md); a warning says what it gives up.
// The certificate must name the process that loads it: a node given another node's directory is
// refused at once, naming both.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/secure_channel.h"

namespace dagsim::net {

struct RunIdentity {
  std::shared_ptr<const TlsContext> tls;  // null with a shared secret
  std::vector<uint8_t> secret;
  std::string source;  // for messages: "DAGSIM_CREDENTIALS /path" or the secret's source
};

// True when the environment names a credential directory or a shared secret.
bool identity_in_environment();
// The identity `name` (a node's name, or "launcher") runs with. Throws Error(invalid_argument)
// naming the variable or file when neither is set, a file does not load, or the certificate names
// another process.
RunIdentity identity_from_environment(const std::string& name);
// The warning printed once by a process that runs with a shared secret.
std::string shared_secret_warning();

}  // namespace dagsim::net
