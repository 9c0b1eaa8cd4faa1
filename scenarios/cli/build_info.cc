// The one file that includes the generated provenance header (scenarios/cli/build_info.h says
// why it is kept to one).
#include "scenarios/cli/build_info.h"

#include "scenarios/cli/build_info_values.h"

namespace dagsim::cli {

const BuildInfo& build_info() {
  static const BuildInfo info{DAGSIM_VERSION, DAGSIM_GIT_COMMIT, DAGSIM_BUILD_TYPE, DAGSIM_COMPILER};
  return info;
}

std::string version_line() {
  const BuildInfo& info = build_info();
  std::string line = "dagsim " + info.version + " (commit " + info.git_commit;
  if (!info.build_type.empty()) line += ", " + info.build_type;
  return line + ", " + info.compiler + ")";
}

}  // namespace dagsim::cli
