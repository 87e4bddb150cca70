// cuda/core/whole_number.hpp — the one reading of a count written in an environment variable or a
// flag (TAPEWISE_CPU_THREADS, TAPEWISE_KEPT_MEMORY_LIMIT's digits, the tests' sweep settings,
// tapewise-exact-check's counts): decimal digits alone, up to a bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tapewise::detail {

// The number `text` writes in decimal digits alone, if it is at most `most`; else nullopt: empty, a
// sign, a space, any other character, or larger (no wrap-around, however many digits).
constexpr std::optional<std::uint64_t> whole_number(std::string_view text, std::uint64_t most = UINT64_MAX) {
  if (text.empty()) return std::nullopt;
  std::uint64_t n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (most - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  return n;
}

static_assert(whole_number("0") == 0u && whole_number("0042") == 42u && whole_number("18446744073709551615") == UINT64_MAX);
static_assert(!whole_number("") && !whole_number("+1") && !whole_number("-1") && !whole_number(" 1") && !whole_number("1 ") &&
              !whole_number("1k") && !whole_number("0x10") && !whole_number("18446744073709551616"));
static_assert(whole_number("64", 64) == 64u && !whole_number("65", 64) && !whole_number("100000000000000000000", 64));

}  // namespace tapewise::detail
