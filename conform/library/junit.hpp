// conform/library/junit.hpp — JUnit XML reports (--junit FILE|-): one <testsuite> per subcommand, one
// <testcase> per node and dtype, so that a CI system shows each node's verdict. All text is escaped
// for XML 1.0, whatever bytes a message or a path holds; written through the one writer (files.hpp).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "files.hpp"

namespace tapewise::conform {

struct JunitCase {
  std::string classname;  // tapewise.<subcommand>.<dtype>
  std::string name;       // the node
  std::string failure;    // why it violates the spec, its first line naming the first failing point; empty when it does not
  std::string skipped;    // why it was not graded; empty when it was
  double seconds = 0;     // what grading it took (the testcase's time attribute)
};

namespace junit_detail {

// The code point of the UTF-8 sequence at `i` and its length, or length 0 when it is not one XML
// may carry (malformed, overlong, a surrogate, past U+10FFFF, U+FFFE/U+FFFF, a control but tab/LF/CR).
inline std::size_t xml_char_at(std::string_view s, std::size_t i, char32_t& cp) {
  const auto u = static_cast<unsigned char>(s[i]);
  const std::size_t len = u < 0x80 ? 1 : (u >> 5) == 0x6 ? 2 : (u >> 4) == 0xe ? 3 : (u >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  cp = len == 1 ? u : len == 2 ? (u & 0x1f) : len == 3 ? (u & 0x0f) : (u & 0x07);
  for (std::size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  const char32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff) return 0;
  if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') return 0;
  return len;
}

}  // namespace junit_detail

// Text for an XML attribute or element: & < > " ' as entities; every byte XML cannot carry as the
// visible text \xNN (so a report still shows it, and a parser still reads the file).
inline std::string xml_escaped(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t len = junit_detail::xml_char_at(text, i, cp);
    if (len == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[i])));
      out += hex;
      ++i;
      continue;
    }
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

// A time attribute: seconds with millisecond digits (a negative or absurd value, which no clock
// gives, as 0).
inline std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds >= 0 && seconds < 1e9 ? seconds : 0.0);
  return text;
}

// The document: <testsuites> holding one <testsuite name="tapewise.<suite>">.
inline std::string junit_document(const std::string& suite, const std::vector<JunitCase>& cases) {
  int failures = 0, skipped = 0;
  double total_seconds = 0;
  std::string body;
  for (const JunitCase& c : cases) {
    total_seconds += c.seconds;
    body += "    <testcase classname=\"" + xml_escaped(c.classname) + "\" name=\"" + xml_escaped(c.name) +
            "\" time=\"" + seconds_text(c.seconds) + "\"";
    if (c.failure.empty() && c.skipped.empty()) {
      body += "/>\n";
      continue;
    }
    body += ">\n";
    if (!c.failure.empty()) {
      ++failures;
      const std::string first_line = c.failure.substr(0, c.failure.find('\n'));
      body += "      <failure message=\"" + xml_escaped(first_line) + "\">" + xml_escaped(c.failure) + "</failure>\n";
    } else {
      ++skipped;
      body += "      <skipped message=\"" + xml_escaped(c.skipped) + "\"/>\n";
    }
    body += "    </testcase>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"tapewise." + xml_escaped(suite) +
         "\" tests=\"" + std::to_string(cases.size()) + "\" failures=\"" + std::to_string(failures) +
         "\" errors=\"0\" skipped=\"" + std::to_string(skipped) + "\" time=\"" + seconds_text(total_seconds) + "\">\n" + body + "  </testsuite>\n</testsuites>\n";
}

[[nodiscard]] inline Result<void> write_junit(const std::string& path, const std::string& suite,
                                              const std::vector<JunitCase>& cases) {
  return write_output_text(path, "--junit", junit_document(suite, cases));
}

}  // namespace tapewise::conform
