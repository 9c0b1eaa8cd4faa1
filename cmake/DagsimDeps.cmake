# Every dependency comes from Debian's packages (scripts/deps.sh installs them).
find_package(Boost 1.74 REQUIRED COMPONENTS fiber context)
find_package(PkgConfig REQUIRED)
# The serial OpenBLAS build: one thread, so gemm results are deterministic run to run.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# SLEEF: the vectorised libm PyTorch evaluates tanh, exp, log... with (compute/kernels/vector_math.h).
pkg_check_modules(SLEEF REQUIRED IMPORTED_TARGET sleef)
# oneDNN: float32 products (core/tensor/linalg.cc). Its own CMake package drags in OpenCL for a
# GPU runtime dagsim never uses, so the library alone.
find_library(DNNL_LIBRARY dnnl REQUIRED)
find_path(DNNL_INCLUDE_DIR dnnl.h REQUIRED)
# Eigen (headers only): float64 products on AVX-512 CPUs (compute/kernels/gemm_avx512.h).
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(Threads REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(tomlplusplus REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(fmt REQUIRED)
if(DAGSIM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(rapidcheck REQUIRED)
endif()
if(DAGSIM_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
