# third_party_headers.cmake — where tl/expected.hpp and dlpack/dlpack.h come from: the system's
# (Debian's libexpected-dev, libdlpack-dev) when found, else the copies in third_party/, so that the
# library and `pip install .` build on a distribution that packages neither.
#   TAPEWISE_THIRD_PARTY_HEADERS=AUTO (default) | SYSTEM (fail without them) | VENDORED (never look)
# Sets TAPEWISE_TL_EXPECTED_VENDORED, TAPEWISE_DLPACK_VENDORED and DLPACK_INCLUDE_DIR, and gives
# tapewise_use_tl_expected(target), which puts tl/expected.hpp on target's public include path.
set(TAPEWISE_THIRD_PARTY_HEADERS AUTO CACHE STRING
    "tl-expected and dlpack headers: AUTO (system when found, else third_party), SYSTEM or VENDORED")
set_property(CACHE TAPEWISE_THIRD_PARTY_HEADERS PROPERTY STRINGS AUTO SYSTEM VENDORED)
if(NOT TAPEWISE_THIRD_PARTY_HEADERS MATCHES "^(AUTO|SYSTEM|VENDORED)$")
  message(FATAL_ERROR "TAPEWISE_THIRD_PARTY_HEADERS is '${TAPEWISE_THIRD_PARTY_HEADERS}'; it takes AUTO, SYSTEM or VENDORED")
endif()
set(TAPEWISE_VENDOR_DIR ${CMAKE_CURRENT_LIST_DIR}/../third_party)
cmake_path(NORMAL_PATH TAPEWISE_VENDOR_DIR)

set(TAPEWISE_TL_EXPECTED_VENDORED ON)
set(TAPEWISE_DLPACK_VENDORED ON)
if(NOT TAPEWISE_THIRD_PARTY_HEADERS STREQUAL "VENDORED")
  set(_tapewise_required "")
  if(TAPEWISE_THIRD_PARTY_HEADERS STREQUAL "SYSTEM")
    set(_tapewise_required REQUIRED)
  endif()
  find_package(tl-expected ${_tapewise_required})
  if(tl-expected_FOUND)
    set(TAPEWISE_TL_EXPECTED_VENDORED OFF)
  endif()
  find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h ${_tapewise_required})
  if(DLPACK_INCLUDE_DIR)
    set(TAPEWISE_DLPACK_VENDORED OFF)
  endif()
endif()
if(TAPEWISE_DLPACK_VENDORED)
  # A normal variable shadows find_path's cache entry (NOTFOUND, or a system path under VENDORED).
  set(DLPACK_INCLUDE_DIR ${TAPEWISE_VENDOR_DIR}/dlpack/include)
endif()
foreach(_header IN ITEMS TL_EXPECTED DLPACK)
  set(_tapewise_${_header}_from "the system")
  if(TAPEWISE_${_header}_VENDORED)
    set(_tapewise_${_header}_from "third_party")
  endif()
endforeach()
message(STATUS "tapewise: tl/expected.hpp from ${_tapewise_TL_EXPECTED_from}, dlpack/dlpack.h from ${_tapewise_DLPACK_from}")

# The vendored tl/expected.hpp is installed beside tapewise's own headers, so installed consumers
# compile against the copy the library was built with.
set(TAPEWISE_VENDOR_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tapewise/vendor)
function(tapewise_use_tl_expected target)
  if(TAPEWISE_TL_EXPECTED_VENDORED)
    target_include_directories(${target} SYSTEM PUBLIC
      $<BUILD_INTERFACE:${TAPEWISE_VENDOR_DIR}/tl-expected/include>
      $<INSTALL_INTERFACE:${TAPEWISE_VENDOR_INSTALL_INCLUDEDIR}>)
  else()
    target_link_libraries(${target} PUBLIC tl::expected)
  endif()
endfunction()
