# `cmake --install` puts the `dagsim` command under bin/ (its bash and zsh completion under
# share/), the public headers under include/dagsim/{core,compute,sim,net,scenarios}/..., the libraries under
# lib/, and a CMake package, so another project can `find_package(dagsim)` and link:
#   dagsim::core       the engines (tensor, autograd, rpc, dist_autograd, optim, rendezvous, elastic),
#                      with the host kernels of compute/kernels linked in
#   dagsim::devices    the device backends of compute/device (the simulated GPU)
#   dagsim::sim        the deterministic simulator (SimWorld)
#   dagsim::scenarios  the scenario runner: load a scenario (scenarios/format/scenario_loader.h),
#                      run it and read its result (scenarios/run/runner.h); with the format and the
#                      workloads (dagsim::scenarios_base) and the TCP runtime it can also use
#                      (dagsim::net, dagsim::process, dagsim::etcd)
# cmake/dagsimConfig.cmake.in finds what they link. cmake/consumer is such a project.
include(CMakePackageConfigHelpers)

# In-tree names as the package spells them, so the consumer's CMakeLists reads the same here.
add_library(dagsim::sim ALIAS dagsim_sim)
add_library(dagsim::scenarios ALIAS dagsim_scenario_runner)
set_target_properties(dagsim_sim PROPERTIES EXPORT_NAME sim)
set_target_properties(dagsim_scenarios PROPERTIES EXPORT_NAME scenarios_base)
set_target_properties(dagsim_scenario_runner PROPERTIES EXPORT_NAME scenarios)
set_target_properties(dagsim_net PROPERTIES EXPORT_NAME net)
set_target_properties(dagsim_process PROPERTIES EXPORT_NAME process)
set_target_properties(dagsim_etcd PROPERTIES EXPORT_NAME etcd)

# A sanitized build's library needs the sanitizers' runtime wherever it is linked: a consumer of
# the installed package gets the link option with dagsim::core (the sanitizer tier installs one).
if(DAGSIM_SANITIZE)
  target_link_options(dagsim_core INTERFACE -fsanitize=${DAGSIM_SANITIZE})
endif()

install(TARGETS dagsim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Shell completion, where bash-completion and zsh look for it (scripts/completion/dagsim.bash says
# what it completes; both ask the installed dagsim for its commands and flags).
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/dagsim.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME dagsim)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/_dagsim DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
# Static libraries: a consumer links each one's private dependencies too, so every dagsim library
# the runner links is exported (dagsim_warnings is an empty interface target).
install(TARGETS dagsim_core dagsim_devices dagsim_warnings dagsim_sim dagsim_scenarios dagsim_scenario_runner dagsim_net dagsim_process
                dagsim_etcd EXPORT dagsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Headers keep the tree's layout ("scenarios/run/runner.h"), as dagsim's own files include them.
# scenarios/cli/ is the dagsim program's own (its code is in no exported library, and its headers
# include launch/, which is not installed), so it is left out.
foreach(dir core compute sim net scenarios)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dagsim
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "*_test*" EXCLUDE PATTERN "fuzz" EXCLUDE
          PATTERN "cli" EXCLUDE)
endforeach()
install(EXPORT dagsimTargets NAMESPACE dagsim:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dagsim)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dagsimConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dagsimConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dagsim)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dagsimConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dagsimConfig.cmake ${PROJECT_BINARY_DIR}/dagsimConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dagsim)

if(DAGSIM_BUILD_TESTS)
  add_test(NAME install_consumer
           COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/consumer/check.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(install_consumer PROPERTIES TIMEOUT 300)
endif()
