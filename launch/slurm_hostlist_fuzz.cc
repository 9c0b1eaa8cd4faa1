// launch/slurm_hostlist_fuzz.cc: the libFuzzer target for Slurm's host lists and the defaults read
// from Slurm's environment (slurm_env.h), built and run by scripts/fuzz.sh (target
// "slurm_hostlist"). A node list comes from the environment a job is started in, so the reader
// trusts nothing. It promises to report (abort, so libFuzzer saves the input) any of:
//  - parse_hostlist or apply_slurm_defaults throwing anything but Error(invalid_argument), or
//    crashing, leaking, or tripping ASan, UBSan or an assert, on any bytes;
//  - a list read that breaks the header's promises: no host, more hosts expanded than the limit
//    or than the count, a count past kMaxHostlistHosts, a host that is empty, longer than
//    kMaxHostNameChars or holds a character no host name has;
//  - hosts that, written back as a plain list, do not read as themselves.
// Input: byte 0 the expansion limit (1 to 256), then the list's text. With bit 7 of byte 0 set the
// text is instead an environment, NAME=VALUE lines, handed to apply_slurm_defaults.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/base/error.h"
#include "launch/slurm_env.h"
#include "net/fuzz/fuzz_util.h"

namespace {

using dagsim::launch::Hostlist;

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

void check_list(std::string_view text, size_t limit) {
  Hostlist list;
  try {
    list = dagsim::launch::parse_hostlist(text, "SLURM_NODELIST", limit);
  } catch (const dagsim::Error& e) {
    if (e.code() != dagsim::ErrorCode::invalid_argument) dagsim::net::fuzz::fail("another error than invalid_argument", e.what());
    return;
  }
  DAGSIM_FUZZ_CHECK(list.count >= 1);
  DAGSIM_FUZZ_CHECK(list.count <= dagsim::launch::kMaxHostlistHosts);
  DAGSIM_FUZZ_CHECK(list.hosts.size() == std::min<uint64_t>(list.count, limit));
  std::string plain;
  for (const std::string& host : list.hosts) {
    DAGSIM_FUZZ_CHECK(!host.empty() && host.size() <= dagsim::launch::kMaxHostNameChars);
    for (char c : host) DAGSIM_FUZZ_CHECK(host_char(c));
    plain += (plain.empty() ? "" : ",") + host;
  }
  if (list.count > limit) return;
  try {
    const Hostlist again = dagsim::launch::parse_hostlist(plain, "SLURM_NODELIST", limit);
    DAGSIM_FUZZ_CHECK(again.hosts == list.hosts);
  } catch (const dagsim::Error& e) {
    dagsim::net::fuzz::fail("the expanded hosts, written back, did not read as themselves", e.what());
  }
}

void check_env(std::string_view text) {
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos) env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    start = end + 1;
  }
  dagsim::launch::LaunchArgs args;
  try {
    dagsim::launch::apply_slurm_defaults(args, {}, env);
  } catch (const dagsim::Error& e) {
    if (e.code() != dagsim::ErrorCode::invalid_argument) dagsim::net::fuzz::fail("another error than invalid_argument", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 0x80) != 0) {
    check_env(text);
  } else {
    check_list(text, static_cast<size_t>(data[0] & 0x7f) + 1);
  }
  return 0;
}
