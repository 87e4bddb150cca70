// cuda/core/log.hpp — TAPEWISE_LOG: lines on stderr saying which path ran (a tape program or node by
// node, a compiled piece or the interpreter, NVRTC missing, a fallback). Off unless the variable asks
// (off, error, warn, info, debug); a log call then costs one relaxed load and a compare, and its
// message is never built. docs/environment.md lists what each level shows.
#pragma once

#include <atomic>
#include <string>

namespace tapewise::detail {

enum class LogLevel : int { off = 0, error = 1, warn = 2, info = 3, debug = 4 };

// The level TAPEWISE_LOG asks for once read_log_level() has run; -1 before.
extern std::atomic<int> log_level_read;
// Reads TAPEWISE_LOG (an unknown value: off, said once on stderr) and returns the level.
int read_log_level();

inline bool log_enabled(LogLevel level) {
  int now = log_level_read.load(std::memory_order_relaxed);
  if (now < 0) [[unlikely]] now = read_log_level();
  return now >= static_cast<int>(level);
}

// Writes "tapewise[info] <message>\n" to stderr in one write, so lines of threads do not interleave.
void log_line(LogLevel level, const std::string& message);

}  // namespace tapewise::detail

// Logs `message` (any expression giving a std::string) at `level` (off, error, warn, info, debug);
// the expression is evaluated only when the level is on.
#define TAPEWISE_LOG(level, message)                                                      \
  do {                                                                                    \
    if (::tapewise::detail::log_enabled(::tapewise::detail::LogLevel::level)) [[unlikely]] \
      ::tapewise::detail::log_line(::tapewise::detail::LogLevel::level, (message));        \
  } while (0)
