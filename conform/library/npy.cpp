// conform/library/npy.cpp — the .npy reader and writer (format spec: numpy.lib.format). The header is a
// Python dict literal; we parse exactly the three keys numpy writes and reject everything else.
// numpy has no bfloat16: a bfloat16 array is written as its bits, '<u2', and such a file is read back
// as bfloat16 only where the caller expects bfloat16 (npy.hpp).
#include "npy.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "files.hpp"

namespace tapewise::conform {

static_assert(std::endian::native == std::endian::little,
              "tapewise's host arrays are little-endian, as '<f2'/'<f4'/'<f8'/'<u2' files are");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

using files_detail::file_error;  // "PATH: why", InvalidArgument

// A cursor over the header text with the few token kinds a .npy header dict uses.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool at_end() const { return pos_ == text_.size(); }
  std::optional<std::string> string_literal() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return std::nullopt;
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  std::optional<bool> boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string_view w(word);
      if (text_.substr(pos_, w.size()) == w) {
        pos_ += w.size();
        return value;
      }
    }
    return std::nullopt;
  }
  // A tuple of non-negative integers: (), (n,), (n, m), ... ; a trailing comma is allowed.
  std::optional<std::vector<std::int64_t>> int_tuple(std::string& why) {
    if (!eat('(')) {
      why = "shape is not a tuple";
      return std::nullopt;
    }
    std::vector<std::int64_t> dims;
    while (!eat(')')) {
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == '-') {
        why = "shape has a negative dimension";
        return std::nullopt;
      }
      std::int64_t value = 0;
      std::size_t digits = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const int d = text_[pos_++] - '0';
        if (value > (std::numeric_limits<std::int64_t>::max() - d) / 10) {
          why = "shape dimension overflows int64";
          return std::nullopt;
        }
        value = value * 10 + d;
        ++digits;
      }
      if (digits == 0) {
        why = "shape is not a tuple of integers";
        return std::nullopt;
      }
      dims.push_back(value);
      if (!eat(',')) {
        if (!eat(')')) {
          why = "shape tuple is malformed";
          return std::nullopt;
        }
        break;
      }
    }
    return dims;
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct Header {
  DType dtype = DType::float32;
  Shape shape;
};

// Every dimension and the product of the nonzero ones at most kMaxNpyElements: an empty array
// of shape (0, 2^63-1) is refused too, as numpy refuses to load it.
bool within_element_limit(const Shape& shape) {
  std::int64_t product = 1;
  for (std::int64_t d : shape.dims) {
    if (d > kMaxNpyElements) return false;
    if (d == 0) continue;
    if (product > kMaxNpyElements / d) return false;
    product *= d;
  }
  return true;
}

[[nodiscard]] Result<Header> parse_header(std::string_view text, const std::string& what, bool u2_is_bfloat16) {
  if (text.empty() || text.back() != '\n') return file_error(what, "header does not end with a newline");
  text.remove_suffix(1);
  HeaderParser p(text);
  if (!p.eat('{')) return file_error(what, "header is not a Python dict literal");
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::int64_t>> shape;
  while (!p.eat('}')) {
    const auto key = p.string_literal();
    if (!key) return file_error(what, "header dict has a malformed key");
    if (!p.eat(':')) return file_error(what, "header dict has no ':' after '" + *key + "'");
    std::string why;
    if (*key == "descr") {
      if (descr) return file_error(what, "header repeats 'descr'");
      descr = p.string_literal();
      if (!descr) return file_error(what, "'descr' is not a string (structured dtypes are not supported)");
    } else if (*key == "fortran_order") {
      if (fortran_order) return file_error(what, "header repeats 'fortran_order'");
      fortran_order = p.boolean();
      if (!fortran_order) return file_error(what, "'fortran_order' is not True or False");
    } else if (*key == "shape") {
      if (shape) return file_error(what, "header repeats 'shape'");
      shape = p.int_tuple(why);
      if (!shape) return file_error(what, why);
    } else {
      return file_error(what, "header has an unknown key '" + *key + "'");
    }
    if (!p.eat(',')) {
      if (!p.eat('}')) return file_error(what, "header dict is malformed after '" + *key + "'");
      break;
    }
  }
  p.skip_space();
  if (!p.at_end()) return file_error(what, "header has text after the dict");
  if (!descr || !fortran_order || !shape)
    return file_error(what, "header lacks one of 'descr', 'fortran_order', 'shape'");

  Header h;
  if (*descr == "<f4") {
    h.dtype = DType::float32;
  } else if (*descr == "<f8") {
    h.dtype = DType::float64;
  } else if (*descr == "<f2") {
    h.dtype = DType::float16;
  } else if (*descr == "<u2" && u2_is_bfloat16) {
    h.dtype = DType::bfloat16;
  } else if (*descr == "<u2") {
    return file_error(what, "dtype '<u2' is read only as bfloat16 bits, where bfloat16 is expected (--dtype bfloat16)");
  } else if (*descr == ">f2" || *descr == ">f4" || *descr == ">f8" || *descr == ">u2") {
    return file_error(what, "dtype '" + *descr + "' is big-endian; tapewise reads '<f2', '<f4', '<f8' or '<u2'");
  } else {
    return file_error(what,
                      "dtype '" + *descr +
                          "' is not supported; tapewise reads '<f4' (float32), '<f8' (float64), '<f2' (float16) or "
                          "'<u2' (bfloat16 bits)");
  }
  if (*fortran_order)
    return file_error(what, "array is in Fortran order; write it C-contiguous (numpy.ascontiguousarray)");
  h.shape = Shape(*shape);
  if (h.shape.dims.size() > kMaxNpyDims)
    return file_error(what, "shape has " + std::to_string(h.shape.dims.size()) + " dimensions; the limit is " +
                                std::to_string(kMaxNpyDims));
  if (!within_element_limit(h.shape))
    return file_error(what, "shape " + h.shape.str() + " has too many elements (the limit is 2^28 = " +
                                std::to_string(kMaxNpyElements) + ", per dimension and in total)");
  return h;
}

std::uint32_t read_le(const std::byte* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

// Python's spelling of a shape: (), (3,), (2, 3).
std::string shape_tuple(const Shape& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.dims.size(); ++i) t += (i ? ", " : "") + std::to_string(s.dims[i]);
  if (s.dims.size() == 1) t += ",";
  return t + ")";
}

}  // namespace

namespace {

// Where the data of a file lies, from its leading bytes.
struct Layout {
  Header header;
  std::size_t data_offset = 0;
  std::size_t data_bytes = 0;
};

// The bytes before the header text: magic, 2 version bytes, a 2- or 4-byte header length.
constexpr std::size_t kMaxPrefix = kMagicSize + 2 + 4;

// Header bytes must be printable ASCII, the last one the '\n' numpy ends it with (checked after).
[[nodiscard]] Result<void> check_header_bytes(std::string_view text, const std::string& what) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (i + 1 == text.size() && c == '\n') continue;
    if (c < 0x20 || c > 0x7e)
      return file_error(
          what, "header byte " + std::to_string(i) + " is not printable ASCII (" + escaped(text.substr(i, 1)) + ")");
  }
  return {};
}

// Magic, version, header length and header, from `lead`: the whole file, or its first
// kMaxPrefix + kMaxNpyHeaderBytes bytes.
[[nodiscard]] Result<Layout> parse_layout(std::span<const std::byte> lead, const std::string& what, bool u2_is_bfloat16) {
  if (lead.size() < kMagicSize || std::memcmp(lead.data(), kMagic, kMagicSize) != 0)
    return file_error(what, "not a .npy file (bad magic; expected \\x93NUMPY)");
  if (lead.size() < kMagicSize + 2) return file_error(what, "truncated before the version bytes");
  const int major = static_cast<int>(lead[6]), minor = static_cast<int>(lead[7]);
  if ((major != 1 && major != 2) || minor != 0)
    return file_error(what, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                                " (tapewise reads 1.0 and 2.0)");
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = kMagicSize + 2 + static_cast<std::size_t>(length_bytes);
  if (lead.size() < prefix) return file_error(what, "truncated in the header length");
  const std::size_t header_size = read_le(lead.data() + kMagicSize + 2, length_bytes);
  if (header_size > kMaxNpyHeaderBytes)
    return file_error(what, "header of " + std::to_string(header_size) + " bytes is longer than the limit of " +
                                std::to_string(kMaxNpyHeaderBytes));
  if (lead.size() - prefix < header_size) return file_error(what, "truncated in the header");
  const std::string_view header_text(reinterpret_cast<const char*>(lead.data() + prefix), header_size);
  TAPEWISE_CHECK(check_header_bytes(header_text, what));
  auto header = parse_header(header_text, what, u2_is_bfloat16);
  TAPEWISE_CHECK(header);
  Layout layout;
  layout.header = *header;
  layout.data_offset = prefix + header_size;
  // Within the element limit, so the byte count fits comfortably.
  layout.data_bytes = static_cast<std::size_t>(header->shape.numel()) * dtype_size(header->dtype);
  return layout;
}

// `held`: the bytes after the header.
[[nodiscard]] Result<void> check_data_size(const Layout& layout, std::uint64_t held, const std::string& what) {
  const std::string shape = layout.header.shape.str();
  if (held < layout.data_bytes)
    return file_error(what, "truncated data: shape " + shape + " needs " + std::to_string(layout.data_bytes) +
                                " bytes, the file holds " + std::to_string(held));
  if (held > layout.data_bytes)
    return file_error(what, std::to_string(held - layout.data_bytes) + " bytes after the data of shape " + shape);
  return {};
}

}  // namespace

Result<HostArray> parse_npy(std::span<const std::byte> file, const std::string& what, bool u2_is_bfloat16) {
  auto layout = parse_layout(file, what, u2_is_bfloat16);
  TAPEWISE_CHECK(layout);
  TAPEWISE_CHECK(check_data_size(*layout, file.size() - layout->data_offset, what));
  HostArray out;
  out.shape = layout->header.shape;
  out.dtype = layout->header.dtype;
  const auto* data = file.data() + layout->data_offset;
  out.bytes.assign(data, data + layout->data_bytes);
  return out;
}

Result<HostArray> read_npy(const std::string& path, bool u2_is_bfloat16) {
  auto file = RegularFile::open(path);
  TAPEWISE_CHECK(file);
  std::vector<std::byte> lead(static_cast<std::size_t>(std::min<std::uint64_t>(file->size(), kMaxPrefix + kMaxNpyHeaderBytes)));
  TAPEWISE_CHECK(file->read_at(0, lead));
  auto layout = parse_layout(lead, path, u2_is_bfloat16);
  TAPEWISE_CHECK(layout);
  TAPEWISE_CHECK(check_data_size(*layout, file->size() - layout->data_offset, path));
  HostArray out;
  out.shape = layout->header.shape;
  out.dtype = layout->header.dtype;
  out.bytes.resize(layout->data_bytes);
  TAPEWISE_CHECK(file->read_at(layout->data_offset, out.bytes));
  return out;
}

const char* descr_of(DType dtype) {
  switch (dtype) {
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::bfloat16: return "<u2";  // its bits: numpy has no bfloat16
    case DType::float16: return "<f2";
  }
  return "?";
}

std::vector<std::byte> encode_npy(const HostArray& array) {
  std::string header = std::string("{'descr': '") + descr_of(array.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape_tuple(array.shape) + ", }";
  const bool v2 = header.size() + 1 + kMagicSize + 4 > 65535;
  const std::size_t prefix = kMagicSize + 2 + (v2 ? 4 : 2);
  const std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::vector<std::byte> out;
  out.reserve(total + array.bytes.size());
  for (std::size_t i = 0; i < kMagicSize; ++i) out.push_back(static_cast<std::byte>(kMagic[i]));
  out.push_back(std::byte{static_cast<unsigned char>(v2 ? 2 : 1)});
  out.push_back(std::byte{0});
  const std::uint32_t length = static_cast<std::uint32_t>(header.size());
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out.push_back(static_cast<std::byte>((length >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), array.bytes.begin(), array.bytes.end());
  return out;
}

Result<void> write_npy(const std::string& path, const HostArray& array) {
  return write_output(path, "", encode_npy(array));
}

}  // namespace tapewise::conform
