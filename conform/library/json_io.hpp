// conform/library/json_io.hpp — how the runner reads and writes JSON: every document read is first
// scanned for its nesting depth without recursion (nlohmann copies and dumps values recursively, so a
// file of nested '[' would otherwise overflow the stack), and every document written is serialized
// without throwing on bytes that are not UTF-8 (a path can hold any bytes) before its file is touched.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "files.hpp"

namespace tapewise::conform {

// Deeper than any document the runner reads (graph files and indexes nest four levels).
inline constexpr int kMaxJsonDepth = 64;

// Fails when `text` nests arrays and objects deeper than kMaxJsonDepth; `where` starts the message.
// A linear scan that skips strings: it decides nothing else about the text, which the parser then reads.
[[nodiscard]] inline Result<void> check_json_depth(std::string_view text, const std::string& where) {
  int depth = 0;
  bool in_string = false, escape = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return fail(ErrorCode::InvalidArgument, where + ": not a document the runner reads: arrays and objects nest deeper than " +
                                                    std::to_string(kMaxJsonDepth) + " levels (at byte " + std::to_string(i) + ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

// A DOM of `text`, depth-checked first; parse errors are messages, never exceptions.
[[nodiscard]] inline Result<nlohmann::ordered_json> parse_json_document(const std::string& text,
                                                                        const std::string& where) {
  if (auto deep = check_json_depth(text, where); !deep) return tl::unexpected(deep.error());
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::exception& e) {
    return fail(ErrorCode::InvalidArgument, where + ": not valid JSON: " + escaped_prefix(e.what(), 200));
  }
}

// Bytes of a path or message as a JSON string: valid UTF-8 as it is, each other byte as the text
// \xNN (so a report still names a path that is not UTF-8, readably).
inline std::string utf8_or_escaped(std::string_view raw) {
  std::string out;
  std::size_t i = 0;
  while (i < raw.size()) {
    const auto u = static_cast<unsigned char>(raw[i]);
    const std::size_t len = u < 0x80 ? 1 : (u >> 5) == 0x6 ? 2 : (u >> 4) == 0xe ? 3 : (u >> 3) == 0x1e ? 4 : 0;
    bool valid = len > 0 && i + len <= raw.size() && !(u == 0xc0 || u == 0xc1 || u > 0xf4);
    for (std::size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(raw[i + k]) & 0xc0) == 0x80;
    if (valid) {
      out.append(raw.substr(i, len));
      i += len;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(u));
      out += hex;
      ++i;
    }
  }
  return out;
}

// The text of a report: never throws; a string that is still not UTF-8 gets U+FFFD for its bad bytes.
inline std::string json_document_text(const nlohmann::ordered_json& j, int indent = 2) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

// Serializes first, then writes through the one writer (files.hpp): a failure leaves the old file.
[[nodiscard]] inline Result<void> write_json_output(const std::string& path, const std::string& option,
                                                    const nlohmann::ordered_json& j, int indent = 2) {
  return write_output_text(path, option, json_document_text(j, indent));
}

}  // namespace tapewise::conform
