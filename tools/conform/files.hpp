// tools/conform/files.hpp — how the runner touches the filesystem: bounded reads of regular files
// only, writes that never go through an existing symbolic link, output paths checked before a long
// run, and untrusted text escaped before it reaches a message. Header-only, so that the .npy codec
// library (tapewise_npy), the runner and the fuzz harnesses share it without another library.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tapewise/core.hpp>

namespace tapewise::conform {

// Text from a file or an index, safe to print: printable ASCII as is, anything else as \xNN (so
// a NUL or an escape sequence never reaches the terminal).
inline std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(u));
      out += hex;
    }
  }
  return out;
}

namespace files_detail {

inline tl::unexpected<Error> file_error(const std::string& path, const std::string& why) {
  return fail(ErrorCode::InvalidArgument, path + ": " + why);
}

inline std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Owns a descriptor: closes it on every path out of a function; moves, never copies.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(Fd&& other) noexcept : fd(other.fd) { other.fd = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd, other.fd);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace files_detail

// An open regular file, its size known before any byte is read.
class RegularFile {
 public:
  // Opens without blocking (a FIFO would wait for a writer) and refuses anything but a regular file.
  static Result<RegularFile> open(const std::string& path) {
    RegularFile f;
    f.path_ = path;
    f.fd_.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f.fd_.fd < 0) return files_detail::file_error(path, std::string("cannot open for reading: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd_.fd, &st) != 0) return files_detail::file_error(path, std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      return files_detail::file_error(path, "is " + files_detail::kind_of(st.st_mode) + ", not a regular file");
    f.size_ = static_cast<std::uint64_t>(st.st_size);
    return f;
  }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly out.size() bytes from `offset`; a short file is an error.
  Result<void> read_at(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(fd_.fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return files_detail::file_error(path_, std::string("read error: ") + std::strerror(errno));
      if (n == 0) return files_detail::file_error(path_, "file shrank while being read");
      done += static_cast<std::size_t>(n);
    }
    return {};
  }

 private:
  files_detail::Fd fd_;
  std::string path_;
  std::uint64_t size_ = 0;
};

// The whole of a regular file of at most `max_bytes` bytes (checked before reading).
inline Result<std::string> read_small_file(const std::string& path, std::uint64_t max_bytes) {
  auto file = RegularFile::open(path);
  TAPEWISE_CHECK(file);
  if (file->size() > max_bytes)
    return files_detail::file_error(path, "is " + std::to_string(file->size()) + " bytes; the limit is " +
                                              std::to_string(max_bytes));
  std::string text(static_cast<std::size_t>(file->size()), '\0');
  auto ok = file->read_at(0, std::as_writable_bytes(std::span<char>(text.data(), text.size())));
  TAPEWISE_CHECK(ok);
  return text;
}

// Creates or truncates `path` and writes `bytes`; an existing symbolic link at `path` is refused
// (O_NOFOLLOW), never written through, and so is anything but a regular file.
inline Result<void> write_file_no_follow(const std::string& path, std::span<const std::byte> bytes) {
  files_detail::Fd out;
  out.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (out.fd < 0 && errno == ELOOP)
    return files_detail::file_error(path, "is a symbolic link; refusing to write through it");
  if (out.fd < 0) return files_detail::file_error(path, std::string("cannot open for writing: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(out.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return files_detail::file_error(path, "is " + files_detail::kind_of(st.st_mode) + "; refusing to write to it");
  if (::ftruncate(out.fd, 0) != 0) return files_detail::file_error(path, std::string("cannot truncate: ") + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(out.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return files_detail::file_error(path, std::string("write error: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  if (::close(out.fd) != 0) {
    out.fd = -1;
    return files_detail::file_error(path, std::string("write error: ") + std::strerror(errno));
  }
  out.fd = -1;
  return {};
}

inline Result<void> write_text_no_follow(const std::string& path, std::string_view text) {
  return write_file_no_follow(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

// Whether a report can be written to `path` later: an existing path must be writable and not a
// folder, else its folder must exist and be writable. Creates nothing; run before a long run so that
// a typo fails in a second, not after minutes.
inline Result<void> check_writable_output(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) return fail(ErrorCode::InvalidArgument, option + ": the path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    // A device or FIFO is allowed (--json /dev/stdout); a folder is not.
    if (S_ISDIR(st.st_mode))
      return fail(ErrorCode::InvalidArgument, option + " " + path + ": is a directory, not a file that can be written");
    if (::access(path.c_str(), W_OK) != 0)
      return fail(ErrorCode::InvalidArgument, option + " " + path + ": not writable: " + std::strerror(errno));
    return {};
  }
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(ErrorCode::InvalidArgument, option + " " + path + ": folder " + folder.string() + " does not exist");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return fail(ErrorCode::InvalidArgument,
                option + " " + path + ": folder " + folder.string() + " is not writable: " + std::strerror(errno));
  return {};
}

// A single file name that stays in its folder: not empty, no '/', not "." or "..", no NUL.
inline bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// Whether `inner` (already canonical) is `root` (canonical) or lies below it.
inline bool lies_within(const std::filesystem::path& root, const std::filesystem::path& inner) {
  auto r = root.begin();
  auto i = inner.begin();
  for (; r != root.end(); ++r, ++i)
    if (i == inner.end() || *r != *i) return false;
  return true;
}

}  // namespace tapewise::conform
