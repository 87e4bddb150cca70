// cuda/tape/tape_internal.hpp — what recording (tape.cpp) and reverse mode (backward.cpp) share: how a
// node id is written in messages, and which nodes run as programs.
#pragma once

#include <cstdint>
#include <string>

#include <tapewise/tape.hpp>

namespace tapewise::detail {

inline std::string id_str(NodeId id) { return "#" + std::to_string(id); }

// Nodes of at most `threshold` elements run as programs (TapeOptions::program_threshold; 0: none).
inline bool runs_as_program(std::int64_t numel, std::int64_t threshold) { return threshold > 0 && numel <= threshold; }

}  // namespace tapewise::detail
