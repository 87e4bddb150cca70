// cuda/core/log.cpp — TAPEWISE_LOG's level, read once, and the line writer (log.hpp).
#include "core/log.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace tapewise::detail {

std::atomic<int> log_level_read{-1};

namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::off: return "off";
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

// The level a TAPEWISE_LOG value names, case-insensitively; -1 for none.
int parse_level(std::string_view value) {
  std::string lower;
  for (char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "off" || lower == "0") return 0;
  if (lower == "error") return 1;
  if (lower == "warn" || lower == "warning") return 2;
  if (lower == "info" || lower == "1") return 3;
  if (lower == "debug") return 4;
  return -1;
}

}  // namespace

int read_log_level() {
  const char* value = std::getenv("TAPEWISE_LOG");
  const int parsed = value ? parse_level(value) : 0;
  const int level = parsed < 0 ? 0 : parsed;
  // Threads that read it at once store the same level; the one that stores it first says why an
  // unknown value leaves logging off.
  int unread = -1;
  if (log_level_read.compare_exchange_strong(unread, level, std::memory_order_relaxed) && parsed < 0)
    std::fprintf(stderr, "tapewise: TAPEWISE_LOG=%s is not one of off, error, warn, info, debug: logging stays off\n",
                 value);
  return level;
}

void log_line(LogLevel level, const std::string& message) {
  const std::string line = std::string("tapewise[") + level_name(level) + "] " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tapewise::detail
