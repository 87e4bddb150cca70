// conform/library/escaped.hpp — the runner's last guard: an exception that escapes a command (the MPFR
// reference reports a broken precondition by throwing std:: exceptions; a standard container may throw
// std::bad_alloc) ends the process with exit status 2 and a message naming the exception, rather
// than std::terminate's abort.
#pragma once

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>

namespace tapewise::conform {

// The readable name of a type ("std::invalid_argument"), or the mangled one where it cannot be made so.
inline std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                   std::free);
  return status == 0 && readable ? readable.get() : type.name();
}

// `body()`'s exit status; 2 when it throws, with "<program>: internal error: <type>: <what>" on stderr.
template <class Body>
int exit_status_guarded(const char* program, Body&& body) {
  std::string escaped;
  try {
    return body();
  } catch (const std::exception& e) {
    escaped = type_name(typeid(e)) + ": " + e.what();
  } catch (...) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    escaped = (type ? type_name(*type) : std::string("an unknown exception")) + " (not a std::exception)";
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%s: internal error: %s escaped; the run stopped (exit 2)\n", program, escaped.c_str());
  return 2;
}

}  // namespace tapewise::conform
