# dagsim_test(NAME SOURCES... [LIBS ...] [TIMEOUT s]): one gtest binary, each test registered
# with CTest separately and given a timeout, so a hang fails the test instead of the run.
function(dagsim_test name)
  if(NOT DAGSIM_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "LIBS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main dagsim_warnings)
  set(properties TIMEOUT ${ARG_TIMEOUT})
  if(ARG_LABELS)
    list(APPEND properties LABELS "${ARG_LABELS}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES ${properties})
endfunction()

# A test that runs the dagsim binary (built first): DAGSIM_BINARY names it, DAGSIM_EXAMPLES and
# DAGSIM_CONFORMANCE the scenario folders, and the project root is on the include path (the CLI
# tests' helpers). Takes dagsim_test's arguments.
function(dagsim_binary_test name)
  dagsim_test(${name} ${ARGN})
  if(TARGET ${name})
    add_dependencies(${name} dagsim)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
    target_compile_definitions(${name} PRIVATE DAGSIM_BINARY="$<TARGET_FILE:dagsim>"
                               DAGSIM_EXAMPLES="${PROJECT_SOURCE_DIR}/scenarios/examples"
                               DAGSIM_CONFORMANCE="${PROJECT_SOURCE_DIR}/conformance")
  endif()
endfunction()

if(DAGSIM_BUILD_TESTS)
  add_test(NAME design_rules COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_rules.sh ${PROJECT_SOURCE_DIR})
  set_tests_properties(design_rules PROPERTIES TIMEOUT 60)
endif()
