# cmake/api_docs.cmake — the HTML API reference, included by the root CMakeLists.txt: target
# tapewise_api_docs, Doxygen over the installed headers only, into <build>/docs/api/html. Option
# TAPEWISE_BUILD_DOCS is off by default, so a build needs no Doxygen. Any Doxygen warning, an
# undocumented public symbol among them, fails the target, so the reference cannot drift from the API.
option(TAPEWISE_BUILD_DOCS "Build the HTML API reference with Doxygen (target tapewise_api_docs)" OFF)
tapewise_require_switches(TAPEWISE_BUILD_DOCS)
if(NOT TAPEWISE_BUILD_DOCS)
  return()
endif()
find_package(Doxygen REQUIRED)
set(DOXYGEN_PROJECT_NAME tapewise)
set(DOXYGEN_PROJECT_NUMBER ${PROJECT_VERSION})
set(DOXYGEN_PROJECT_BRIEF "${PROJECT_DESCRIPTION}")
set(DOXYGEN_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/docs/api)
set(DOXYGEN_GENERATE_HTML YES)
set(DOXYGEN_GENERATE_XML YES)  # tools/api_docs.sh counts the documented symbols from it
set(DOXYGEN_EXTRACT_ALL NO)
set(DOXYGEN_EXTRACT_PRIVATE NO)
set(DOXYGEN_EXTRACT_STATIC YES)
set(DOXYGEN_WARN_IF_UNDOCUMENTED YES)
set(DOXYGEN_WARN_IF_DOC_ERROR YES)
# Parameters are described in prose, not one @param each: a missing @param is not a warning.
set(DOXYGEN_WARN_NO_PARAMDOC NO)
set(DOXYGEN_WARN_AS_ERROR FAIL_ON_WARNINGS)
set(DOXYGEN_QUIET YES)
set(DOXYGEN_FULL_PATH_NAMES YES)
set(DOXYGEN_STRIP_FROM_PATH ${PROJECT_SOURCE_DIR}/include ${TAPEWISE_GENERATED_INCLUDE})
set(DOXYGEN_STRIP_FROM_INC_PATH ${PROJECT_SOURCE_DIR}/include ${TAPEWISE_GENERATED_INCLUDE})
set(DOXYGEN_FILE_PATTERNS *.h *.hpp)
# The op table's rows are expanded where the headers include it, so the reference lists the nodes:
# the filter pastes the rows in, macro expansion turns them into enumerators.
set(DOXYGEN_ENABLE_PREPROCESSING YES)
set(DOXYGEN_SEARCH_INCLUDES YES)
set(DOXYGEN_MACRO_EXPANSION YES)
set(DOXYGEN_FILTER_PATTERNS
    "*/op.hpp=sh ${PROJECT_SOURCE_DIR}/cmake/doxygen_inline_ops.sh ${PROJECT_SOURCE_DIR}/spec/ops.def"
    "*/tapewise.h=sh ${PROJECT_SOURCE_DIR}/cmake/doxygen_inline_ops.sh ${PROJECT_SOURCE_DIR}/spec/ops.def")
set(DOXYGEN_INCLUDE_PATH ${PROJECT_SOURCE_DIR}/include ${TAPEWISE_GENERATED_INCLUDE})
set(DOXYGEN_PREDEFINED __cplusplus)
# Implementation details (detail: declarations the library needs; op_table_rule: the table's
# compile-time checks): public only because templates and inline code need them.
set(DOXYGEN_EXCLUDE_SYMBOLS "tapewise::detail" "tapewise::detail::*" "tapewise::op_table_rule" "tapewise::op_table_rule::*"
    TAPEWISE_OP TAPEWISE_SCALAR_SETS_ TW_API)  # the op table's X-macros, the export attribute
set(DOXYGEN_SORT_MEMBER_DOCS NO)
# A group's comment documents each member (Tape's one call per op).
set(DOXYGEN_DISTRIBUTE_GROUP_DOC YES)
set(DOXYGEN_JAVADOC_AUTOBRIEF YES)
set(DOXYGEN_QT_AUTOBRIEF YES)
set(DOXYGEN_OPTIMIZE_OUTPUT_FOR_C NO)
set(DOXYGEN_HAVE_DOT NO)
set(DOXYGEN_HTML_TIMESTAMP NO)
# The installed headers: the sources, and the generated version headers (never the .in templates).
file(GLOB _tapewise_public_headers CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/tapewise/*.h ${PROJECT_SOURCE_DIR}/include/tapewise/*.hpp)
# The main page (index.html): what the reference covers and where to start.
doxygen_add_docs(tapewise_api_docs ${PROJECT_SOURCE_DIR}/cmake/api_mainpage.dox ${_tapewise_public_headers}
                 ${TAPEWISE_GENERATED_INCLUDE}/tapewise/version.hpp ${TAPEWISE_GENERATED_INCLUDE}/tapewise/version.h
                 COMMENT "API reference (Doxygen, public headers) into ${PROJECT_BINARY_DIR}/docs/api/html")
