# Every dependency comes from Debian's packages (scripts/deps.sh installs them).
find_package(Boost 1.74 REQUIRED COMPONENTS fiber context)
find_package(PkgConfig REQUIRED)
# The serial OpenBLAS build: one thread, so gemm results are deterministic run to run.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(Threads REQUIRED)
if(DAGSIM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(rapidcheck REQUIRED)
endif()
if(DAGSIM_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
