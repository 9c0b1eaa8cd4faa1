# `cmake --install` puts the `dagsim` command under bin/ (its bash and zsh completion under
# share/), the public headers under include/dagsim/core/..., the library under lib/, and a CMake
# package, so another project can `find_package(dagsim)` and link dagsim::core.
include(CMakePackageConfigHelpers)

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
install(TARGETS dagsim_core dagsim_warnings EXPORT dagsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dagsim
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "*_test*" EXCLUDE)
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
