# dagsim_test(NAME SOURCES... [LIBS ...] [TIMEOUT s]): one gtest binary, each test registered
# with CTest separately and given a timeout, so a hang fails the test instead of the run.
function(dagsim_test name)
  if(NOT DAGSIM_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main dagsim_warnings)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES TIMEOUT ${ARG_TIMEOUT})
endfunction()

if(DAGSIM_BUILD_TESTS)
  add_test(NAME design_rules COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_rules.sh ${PROJECT_SOURCE_DIR})
  set_tests_properties(design_rules PROPERTIES TIMEOUT 60)
endif()
