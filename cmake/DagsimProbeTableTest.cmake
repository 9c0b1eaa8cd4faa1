# The probe-table generator's own test (CTest probe_table_generator): runs
# cmake/DagsimProbeTable.cmake on small source trees under WORK_DIR and checks that it writes a
# sorted table, keeps the file untouched when the table is unchanged, and refuses a name used at two
# sites, a malformed name and a name that is not a string literal, naming the places.
#
# Inputs (-D): SCRIPT (the generator), WORK_DIR (an empty scratch folder).
cmake_minimum_required(VERSION 3.25)

function(expect_contains text piece what)
  string(FIND "${text}" "${piece}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: expected to find\n  ${piece}\nin\n${text}")
  endif()
endfunction()

function(run_generator tree out_var result_var)
  execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${tree} -DOUTPUT=${tree}/out/probe_table.cc -P ${SCRIPT}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_var} "${out}${err}" PARENT_SCOPE)
  set(${result_var} "${result}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")

# A good tree: probes in two folders, a buggify point, a comment and a test that are not sites.
set(good "${WORK_DIR}/good")
file(WRITE "${good}/core/store/a.cc" "void f() {\n  if (x) { DAGSIM_PROBE(\"store.zeta\"); }\n  // DAGSIM_PROBE(\"store.in_comment\")\n  if (DAGSIM_BUGGIFY(\"store.slow_reply\")) {}\n}\n")
file(WRITE "${good}/sim/b.cc" "void g() { DAGSIM_PROBE(\"sim.alpha\"); DAGSIM_PROBE(\"sim.beta\"); }\n")
file(WRITE "${good}/sim/b_test.cc" "void t() { DAGSIM_PROBE(\"sim.alpha\"); DAGSIM_PROBE(\"bad name\"); }\n")
file(WRITE "${good}/core/base/m.h" "#define DAGSIM_PROBE(name) do {} while (0)\n")
run_generator("${good}" out result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the good tree failed:\n${out}")
endif()
file(READ "${good}/out/probe_table.cc" table)
expect_contains("${table}" "\"sim.alpha\",  // sim/b.cc\n    \"sim.beta\",  // sim/b.cc\n    \"store.zeta\",  // core/store/a.cc\n    nullptr" "sorted probes")
expect_contains("${table}" "kProbeCount = 3;" "probe count")
expect_contains("${table}" "\"store.slow_reply\"" "buggify point")
expect_contains("${table}" "kPointCount = 1;" "point count")
string(FIND "${table}" "store.in_comment" in_comment)
if(NOT in_comment EQUAL -1)
  message(FATAL_ERROR "a probe in a comment was taken as a site")
endif()

# Unchanged table: the file is not rewritten (its timestamp stays).
file(TIMESTAMP "${good}/out/probe_table.cc" before "%s%f")
execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 1.1)
file(APPEND "${good}/sim/b.cc" "// an edit that adds no probe\n")
run_generator("${good}" out result)
file(TIMESTAMP "${good}/out/probe_table.cc" after "%s%f")
if(NOT before STREQUAL after)
  message(FATAL_ERROR "an unchanged table was rewritten (${before} -> ${after})")
endif()

# A name at two sites: fails naming both.
set(dup "${WORK_DIR}/dup")
file(WRITE "${dup}/core/rpc/x.cc" "\n\nvoid f() { DAGSIM_PROBE(\"rpc.twice\"); }\n")
file(WRITE "${dup}/net/y.cc" "void g() {\n  DAGSIM_PROBE(\"rpc.twice\");\n}\n")
run_generator("${dup}" out result)
if(result EQUAL 0)
  message(FATAL_ERROR "a duplicate name was accepted")
endif()
expect_contains("${out}" "core/rpc/x.cc:3" "the first site")
expect_contains("${out}" "net/y.cc:2" "the second site")
if(EXISTS "${dup}/out/probe_table.cc")
  message(FATAL_ERROR "a failed scan wrote a table")
endif()

# Malformed names and a non-literal argument.
set(bad "${WORK_DIR}/bad")
file(WRITE "${bad}/launch/z.cc" "void f() {\n  DAGSIM_PROBE(\"Launch.Upper\");\n  DAGSIM_PROBE(\"nodots\");\n  DAGSIM_PROBE(\"weird.area\");\n  DAGSIM_BUGGIFY(name);\n}\n")
run_generator("${bad}" out result)
if(result EQUAL 0)
  message(FATAL_ERROR "malformed names were accepted")
endif()
expect_contains("${out}" "launch/z.cc:2" "upper case")
expect_contains("${out}" "launch/z.cc:3" "no dots")
expect_contains("${out}" "launch/z.cc:4" "unknown area")
expect_contains("${out}" "launch/z.cc:5" "not a literal")
message(STATUS "probe table generator: all cases passed")
