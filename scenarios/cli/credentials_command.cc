// `dagsim credentials`: a run's certificate authority and its nodes' credentials, for nodes started
// by hand on other hosts (docs/tcp.md, "Nodes on other hosts"). A local `dagsim run --transport
// tcp` makes its own and needs none of this.
//   dagsim credentials ca --ca DIR                       a new CA in DIR (ca.crt, ca.key 0600)
//   dagsim credentials issue --ca DIR --out OUT NAME...  OUT/NAME/: ca.crt, node.crt, node.key,
//                                                        revoked.crl, for each NAME ("launcher"
//                                                        for the launcher)
//   dagsim credentials revoke --ca DIR NAME...           revokes every certificate issued to NAME;
//                                                        DIR/revoked.crl is then copied to every
//                                                        host's credential directory
// Exit 0, or 2 naming the file or name that is wrong. Keys never appear on the command line or in
// output.
#include <cstdio>
#include <filesystem>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/credentials.h"
#include "scenarios/cli/commands.h"

namespace dagsim::cli {

int credentials_command(const CredentialsArgs& args) {
  namespace fs = std::filesystem;
  try {
    if (args.action == "ca") {
      if (fs::exists(fs::path(args.ca_dir) / "ca.key")) {
        throw errors::invalid_argument(printable(args.ca_dir) + " already holds a CA (ca.key): refusing to replace it");
      }
      net::CertificateAuthority::create("dagsim CA", args.days).save(args.ca_dir);
      std::printf("made a CA in %s (ca.crt; keep ca.key on this host only)\n", printable(args.ca_dir).c_str());
      return kPassed;
    }
    if (args.names.empty()) throw errors::invalid_argument("name at least one node (or launcher)");
    net::CertificateAuthority ca = net::CertificateAuthority::load(args.ca_dir);
    if (args.action == "issue") {
      if (args.out_dir.empty()) throw errors::invalid_argument("issue needs --out DIR");
      for (const std::string& name : args.names) {
        const fs::path dir = fs::path(args.out_dir) / name;
        ca.issue(name, args.days).save(dir.string());
        std::printf("issued %s: %s (give it to that process only: DAGSIM_CREDENTIALS=%s)\n", quote(name).c_str(),
                    printable(dir.string()).c_str(), printable(dir.string()).c_str());
      }
    } else {
      for (const std::string& name : args.names) ca.revoke(name);
      std::printf("revoked %zu name(s); copy %s to every host's credential directory\n", args.names.size(),
                  printable((fs::path(args.ca_dir) / "revoked.crl").string()).c_str());
    }
    ca.save(args.ca_dir);  // issued.txt, revoked.txt and the CRL
    return kPassed;
  } catch (const Error& e) {
    std::fprintf(stderr, "dagsim credentials: %s\n", printable(e.detail(), 400).c_str());
    return kBadInput;
  } catch (const fs::filesystem_error& e) {
    std::fprintf(stderr, "dagsim credentials: %s\n", printable(e.what(), 400).c_str());
    return kBadInput;
  }
}

}  // namespace dagsim::cli
