# Writes dagsim's provenance header (scenarios/cli/build_info_values.h.in) with the commit HEAD is
# at now. Run with `cmake -P` by the dagsim_build_info target on every build, not only at
# configure time, so `dagsim --version` and the JSON report's provenance name the commit that was
# built. configure_file leaves the header untouched when nothing changed, and Ninja restats it, so
# an unchanged commit recompiles nothing.
#
# Inputs (-D): SOURCE_DIR, TEMPLATE, OUTPUT, PROJECT_VERSION, CMAKE_BUILD_TYPE,
# CMAKE_CXX_COMPILER_ID, CMAKE_CXX_COMPILER_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE DAGSIM_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT DAGSIM_GIT_COMMIT)
  set(DAGSIM_GIT_COMMIT "unknown")  # a source tarball, or no git on PATH
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
