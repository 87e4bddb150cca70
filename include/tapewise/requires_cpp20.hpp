/// tapewise/requires_cpp20.hpp — one clear error for a consumer compiled as C++17 or older, instead of
/// dozens from the headers below it (std::span, concepts, designated initializers). Every public C++
/// header includes it first.
/// \file
#pragma once

#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#error "tapewise needs C++20: compile with -std=c++20 (CMake: find_package(tapewise) and target_link_libraries(... tapewise::tapewise) ask for it; pkg-config users add -std=c++20)"
// A header that does not exist stops the compiler here, so the line above is the whole story.
#include <tapewise_stops_here_without_cpp20>
#endif
