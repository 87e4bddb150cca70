// conform/suggest.hpp — "did you mean": the closest of a set of names to one mistyped, by edit
// distance, for unknown subcommands, options and node names alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapewise::conform {

// Levenshtein distance: insertions, deletions and substitutions, each costing one.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The candidate nearest `typed`, when one is near enough to be a plausible typo (at most two edits
// away, or a third of its length for a long name); the first of equals wins, so the order given
// decides ties.
inline std::optional<std::string> closest_name(std::string_view typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, typed.size() / 3) + 1;
  for (const std::string& name : candidates) {
    const std::size_t d = edit_distance(typed, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

// "; did you mean 'x'?" when a candidate is close, else "".
inline std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates) {
  const auto best = closest_name(typed, candidates);
  return best ? "; did you mean '" + *best + "'?" : std::string();
}

}  // namespace tapewise::conform
