// Where this binary came from: dagsim's version, the commit it was built from, the build type and
// the compiler, for `dagsim --version` and the JSON report's provenance. The values come from a
// header the build rewrites whenever HEAD moves (cmake/DagsimBuildInfo.cmake, run on every
// build), so they name the commit that was built, not the one that was configured.
#pragma once

#include <string>

namespace dagsim::cli {

struct BuildInfo {
  std::string version;     // the project's version, e.g. 0.1.0
  std::string git_commit;  // HEAD's first 12 hex digits when built; "unknown" outside a git checkout
  std::string build_type;  // CMAKE_BUILD_TYPE (Release, Debug, ...; empty if none was set)
  std::string compiler;    // the compiler's id and version, e.g. "GNU 12.2.0"
};

const BuildInfo& build_info();

// `dagsim --version`: "dagsim 0.1.0 (commit 1a2b3c4d5e6f, Release, GNU 12.2.0)".
std::string version_line();

}  // namespace dagsim::cli
