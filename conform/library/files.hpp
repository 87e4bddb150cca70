// conform/library/files.hpp — how the runner touches the filesystem: bounded reads of regular files
// only; one writer for every output (checked before a long run, never through a symbolic link,
// whole or not at all); untrusted text escaped, and bounded, before it reaches a message.
// Header-only, so that the .npy codec library (tapewise_npy), the runner and the fuzz harnesses
// share it without another library.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
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

// At most the first `limit` bytes of untrusted text, escaped, with how long it was when cut: a
// message quotes a hostile value without copying megabytes of it.
inline std::string escaped_prefix(std::string_view text, std::size_t limit = 60) {
  if (text.size() <= limit) return escaped(text);
  return escaped(text.substr(0, limit)) + "... (" + std::to_string(text.size()) + " bytes)";
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
  [[nodiscard]] static Result<RegularFile> open(const std::string& path) {
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
  [[nodiscard]] Result<void> read_at(std::uint64_t offset, std::span<std::byte> out) const {
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
[[nodiscard]] inline Result<std::string> read_small_file(const std::string& path, std::uint64_t max_bytes) {
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

// ---- writing: every file the runner writes goes through write_output / OutputBatch ---------------
//
// An output path is resolved (resolve_output) before the command's long work, so that a typo, a
// missing folder or a refused path fails in a second. Then:
//  - "-", /dev/stdout, /dev/fd/1 and /proc/self/fd/1 mean the command's standard output
//    (names_standard_output): written through std::cout, in order with the table, whatever stdout
//    is (a file, a pipe, a terminal);
//  - an existing FIFO, character device or socket (/dev/null, a named pipe, /dev/fd/N of a process
//    substitution, also reached through a symbolic link) is a stream: written directly, never
//    truncated or renamed;
//  - anything else is a regular file: written whole to a temporary file in the same folder and
//    renamed over the path, so that the old file stays whole until the new one is, and an
//    interrupted or failed write leaves no truncated file. A symbolic link there (to a file, or
//    dangling) is refused and never written through, as are a folder, a block device, a missing or
//    unwritable folder and an existing file that is not writable.

namespace files_detail {

// Blocks the signals that end a process from outside (and SIGXFSZ, SIGPIPE) while outputs are half
// written, so that an interrupt lands after the temporary files are renamed or removed.
class SignalBlock {
 public:
  SignalBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ, SIGPIPE}) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalBlock() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t old_;
};

[[nodiscard]] inline Result<void> write_all(int fd, std::span<const std::byte> bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return file_error(path, std::string("write error: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return {};
}

inline std::string named(const std::string& option, const std::string& path) {
  return option.empty() ? path : option + " " + path;
}

}  // namespace files_detail

// The descriptor "-" writes to when main has moved the human text to stderr so that standard
// output carries only a machine-read report (--json -, --junit -); -1: std::cout, as usual.
inline int& machine_output_fd() {
  static int fd = -1;
  return fd;
}

// Whether a report path names standard output: "-", or /dev/stdout, /dev/fd/1 or /proc/self/fd/1
// (spelled any way that normalizes to them). These are recognised by name, so that they keep meaning
// the command's standard output after main has moved the human text to stderr.
inline bool names_standard_output(const std::string& path) {
  if (path == "-") return true;
  const std::string normal = std::filesystem::path(path).lexically_normal().string();
  return normal == "/dev/stdout" || normal == "/dev/fd/1" || normal == "/proc/self/fd/1";
}

struct OutputTarget {
  enum class Kind { standard_output, stream, file };
  Kind kind = Kind::file;
  std::string path;
  std::string option;  // names the path in messages ("--json"); may be empty
  mode_t mode = 0;     // file: the mode the written file gets (an existing file's, else 0666 & ~umask)
};

// Where `path` (given as `option`) would be written; creates nothing. See the top of this section.
[[nodiscard]] inline Result<OutputTarget> resolve_output(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  using files_detail::named;
  OutputTarget t{OutputTarget::Kind::file, path, option, 0};
  if (path.empty()) return fail(ErrorCode::InvalidArgument, option + ": the path is empty");
  if (names_standard_output(path)) {
    t.kind = OutputTarget::Kind::standard_output;
    return t;
  }
  const std::string what = named(option, path);
  struct stat link {}, target {};
  const bool exists = ::lstat(path.c_str(), &link) == 0;
  const bool reaches = ::stat(path.c_str(), &target) == 0;
  if (reaches && (S_ISFIFO(target.st_mode) || S_ISCHR(target.st_mode) || S_ISSOCK(target.st_mode))) {
    t.kind = OutputTarget::Kind::stream;
    return t;
  }
  if (exists && S_ISLNK(link.st_mode))
    return fail(ErrorCode::InvalidArgument, what + ": is a symbolic link; refusing to write through it");
  if (exists && S_ISDIR(link.st_mode))
    return fail(ErrorCode::InvalidArgument, what + ": is a directory, not a file that can be written");
  if (exists && !S_ISREG(link.st_mode))
    return fail(ErrorCode::InvalidArgument, what + ": is " + files_detail::kind_of(link.st_mode) + "; refusing to write to it");
  if (exists && ::access(path.c_str(), W_OK) != 0)
    return fail(ErrorCode::InvalidArgument, what + ": not writable: " + std::strerror(errno));
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  struct stat dir {};
  if (::stat(folder.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode))
    return fail(ErrorCode::InvalidArgument, what + ": folder " + folder.string() + " does not exist");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return fail(ErrorCode::InvalidArgument, what + ": folder " + folder.string() + " is not writable: " + std::strerror(errno));
  if (exists) {
    t.mode = link.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    t.mode = 0666 & ~mask;
  }
  return t;
}

[[nodiscard]] inline Result<void> check_output(const std::string& path, const std::string& option) {
  auto target = resolve_output(path, option);
  if (!target) return tl::unexpected(target.error());
  return {};
}

// Several outputs written as one: each file goes to a temporary file as it is added; commit()
// renames them all (and writes the streams). Until then no destination is touched, and a batch
// destroyed uncommitted removes its temporary files: a failure on the last output leaves none of
// the others written.
class OutputBatch {
 public:
  OutputBatch() = default;
  OutputBatch(const OutputBatch&) = delete;
  OutputBatch& operator=(const OutputBatch&) = delete;
  ~OutputBatch() { discard(); }

  [[nodiscard]] Result<void> add(const OutputTarget& target, std::span<const std::byte> bytes) {
    return add_pieces(target, [bytes](const Sink& sink) {
      return sink(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    });
  }

  // As add, with the bytes given piece by piece: `produce` passes each piece, in order, to the sink
  // it is given, so that a large report goes to its temporary file without being held whole.
  using Sink = std::function<Result<void>(std::string_view)>;
  [[nodiscard]] Result<void> add_pieces(const OutputTarget& target,
                                        const std::function<Result<void>(const Sink&)>& produce) {
    if (!signals_) signals_.emplace();
    if (target.kind != OutputTarget::Kind::file) {  // written at commit, in order with the others
      Pending p{target, {}, {}};
      const Sink keep = [&p](std::string_view piece) -> Result<void> {
        const auto* bytes = reinterpret_cast<const std::byte*>(piece.data());
        p.stream_bytes.insert(p.stream_bytes.end(), bytes, bytes + piece.size());
        return {};
      };
      if (auto ok = produce(keep); !ok) return ok;
      pending_.push_back(std::move(p));
      return {};
    }
    Pending p{target, {}, {}};
    namespace fs = std::filesystem;
    fs::path folder = fs::path(target.path).parent_path();
    std::string name = (folder.empty() ? fs::path(".") : folder) / ".tapewise-output-XXXXXX";
    files_detail::Fd fd;
    fd.fd = ::mkstemp(name.data());
    const std::string what = files_detail::named(target.option, target.path);
    if (fd.fd < 0) return files_detail::file_error(what, std::string("cannot create a temporary file beside it: ") + std::strerror(errno));
    p.temp = name;
    pending_.push_back(std::move(p));  // from here on, discard() removes it
    if (::fchmod(fd.fd, target.mode) != 0) return files_detail::file_error(what, std::string("cannot set its mode: ") + std::strerror(errno));
    const Sink write = [&fd, &what](std::string_view piece) {
      return files_detail::write_all(fd.fd, std::as_bytes(std::span<const char>(piece.data(), piece.size())), what);
    };
    if (auto ok = produce(write); !ok) return ok;
    const int closing = fd.fd;
    fd.fd = -1;
    if (::close(closing) != 0) return files_detail::file_error(what, std::string("write error: ") + std::strerror(errno));
    return {};
  }

  [[nodiscard]] Result<void> commit() {
    for (Pending& p : pending_) {
      const std::string what = files_detail::named(p.target.option, p.target.path);
      if (p.target.kind == OutputTarget::Kind::standard_output && machine_output_fd() >= 0) {
        std::cout.flush();  // the human text, now on stderr, keeps its order with the report
        if (auto ok = files_detail::write_all(machine_output_fd(), p.stream_bytes, what); !ok) return ok;
      } else if (p.target.kind == OutputTarget::Kind::standard_output) {
        std::cout.write(reinterpret_cast<const char*>(p.stream_bytes.data()), static_cast<std::streamsize>(p.stream_bytes.size()));
        if (!std::cout.flush()) return files_detail::file_error(what, "cannot write to standard output");
      } else if (p.target.kind == OutputTarget::Kind::stream) {
        files_detail::Fd out;
        out.fd = ::open(p.target.path.c_str(), O_WRONLY | O_CLOEXEC);
        if (out.fd < 0) return files_detail::file_error(what, std::string("cannot open for writing: ") + std::strerror(errno));
        if (auto ok = files_detail::write_all(out.fd, p.stream_bytes, what); !ok) return ok;
      } else if (::rename(p.temp.c_str(), p.target.path.c_str()) != 0) {
        return files_detail::file_error(what, std::string("cannot replace it: ") + std::strerror(errno));
      } else {
        p.temp.clear();
      }
    }
    discard();
    return {};
  }

 private:
  struct Pending {
    OutputTarget target;
    std::string temp;                    // file: the temporary file, until renamed
    std::vector<std::byte> stream_bytes;  // streams: written at commit, in order
  };
  void discard() {
    for (const Pending& p : pending_)
      if (!p.temp.empty()) ::unlink(p.temp.c_str());
    pending_.clear();
    signals_.reset();
  }
  std::vector<Pending> pending_;
  std::optional<files_detail::SignalBlock> signals_;
};

// One output, resolved and written as above.
[[nodiscard]] inline Result<void> write_output(const std::string& path, const std::string& option,
                                               std::span<const std::byte> bytes) {
  auto target = resolve_output(path, option);
  if (!target) return tl::unexpected(target.error());
  OutputBatch batch;
  if (auto ok = batch.add(*target, bytes); !ok) return ok;
  return batch.commit();
}

[[nodiscard]] inline Result<void> write_output_text(const std::string& path, const std::string& option,
                                                    std::string_view text) {
  return write_output(path, option, std::as_bytes(std::span<const char>(text.data(), text.size())));
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
