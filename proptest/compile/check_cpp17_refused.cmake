# proptest/compile/check_cpp17_refused.cmake — the ctest a_cpp17_consumer_is_told_cpp20: compiles the
# consumer example as C++17 against the public headers; it must fail with the one message that says
# C++20 is required, and with no other error before it.
# Arguments: -DCOMPILER= -DSOURCE= -DINCLUDES=<list>
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_args "-I${dir}")
endforeach()
execute_process(COMMAND ${COMPILER} -std=c++17 -fsyntax-only ${include_args} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled as C++17, though tapewise needs C++20")
endif()
string(REGEX MATCHALL "error:" errors "${out}")
list(LENGTH errors error_count)
string(FIND "${out}" "tapewise needs C++20" said)
string(FIND "${out}" "error:" first_error)
if(said LESS 0 OR said LESS first_error OR error_count GREATER 2)
  message(FATAL_ERROR "a C++17 consumer is not told plainly that tapewise needs C++20 (${error_count} errors):\n${out}")
endif()
message(STATUS "a C++17 consumer gets ${error_count} error lines, the first: tapewise needs C++20")
