# proptest/compile/check_ignored_result.cmake — the ctest ignored_result_fails_to_compile: compiles
# ignored_result.cpp with tapewise's unused-result flag, once using every Result (must compile) and once
# with IGNORED=1, where each "// case n" line drops one Result (must fail with one error per case, each
# for that reason and on its own line, and no other error). One failing compile for all the cases, not
# one each: the headers are parsed twice instead of fourteen times (2026-12-07: 31 s of ctest's time).
# Arguments: -DCOMPILER= -DSOURCE= -DFLAG= -DINCLUDES=<list>
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_args "-I${dir}")
endforeach()
# The caret lines quote the source line of each error, whose "// case n" says which case it is.
set(compile ${COMPILER} -std=c++20 -fsyntax-only -fdiagnostics-color=never ${FLAG} ${include_args} ${SOURCE})

execute_process(COMMAND ${compile} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ignored_result.cpp uses every Result, yet does not compile:\n${out}")
endif()

file(STRINGS ${SOURCE} cases REGEX "// case [0-9]+$")
list(LENGTH cases count)
if(count LESS 1)
  message(FATAL_ERROR "no \"// case n\" lines found in ${SOURCE}")
endif()
execute_process(COMMAND ${compile} -DIGNORED=1 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "ignored_result.cpp with IGNORED=1 ignores ${count} Results and still compiles")
endif()
string(REGEX MATCHALL "error:" errors "${out}")
string(REGEX MATCHALL "error: ignoring return(ed)? value" refusals "${out}")
string(REGEX MATCHALL "unused-result" flags_named "${out}")
list(LENGTH errors error_count)
list(LENGTH refusals refusal_count)
list(LENGTH flags_named flag_count)
if(NOT error_count EQUAL count OR NOT refusal_count EQUAL count OR NOT flag_count EQUAL count)
  message(FATAL_ERROR "${count} cases each ignore a Result, but the compiler gave ${error_count} errors, "
                      "${refusal_count} of them for an ignored Result, naming unused-result ${flag_count} "
                      "times (${count} each expected):\n${out}")
endif()
foreach(case_line IN LISTS cases)
  string(REGEX MATCH "// case [0-9]+$" marker "${case_line}")
  if(NOT out MATCHES "${marker}\n")
    message(FATAL_ERROR "no error on the line of ${marker} (${case_line}), which ignores a Result:\n${out}")
  endif()
endforeach()
message(STATUS "${count} ways of ignoring a Result, each refused by ${FLAG}")
