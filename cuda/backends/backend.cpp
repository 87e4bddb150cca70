// cuda/backends/backend.cpp — what both backends share: tagged, counted allocation with fault
// injection, host transfers, Buffer's RAII, operand checks, and the names of tags and prims.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>

#include <tapewise/backend.hpp>

#include "backends/engine.hpp"
#include "core/whole_number.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/program.hpp"

namespace tapewise {

const char* alloc_tag_name(AllocTag t) {
  switch (t) {
    case AllocTag::value: return "value";
    case AllocTag::gradient: return "gradient";
    case AllocTag::workspace: return "workspace";
  }
  return "?";
}

const char* prim_name(Prim p) {
  switch (p) {
    case Prim::copy: return "copy";
    case Prim::neg: return "neg";
    case Prim::abs: return "abs";
    case Prim::sign: return "sign";
    case Prim::exp: return "exp";
    case Prim::log: return "log";
    case Prim::sin: return "sin";
    case Prim::cos: return "cos";
    case Prim::tanh: return "tanh";
    case Prim::sigmoid: return "sigmoid";
    case Prim::sigmoid_split: return "sigmoid_split";
    case Prim::reciprocal: return "reciprocal";
    case Prim::sqrt: return "sqrt";
    case Prim::mul_scalar: return "mul_scalar";
    case Prim::add_scalar: return "add_scalar";
    case Prim::rsub_scalar: return "rsub_scalar";
    case Prim::add: return "add";
    case Prim::sub: return "sub";
    case Prim::mul: return "mul";
    case Prim::div: return "div";
    case Prim::fmax: return "fmax";
    case Prim::fmin: return "fmin";
    case Prim::greater: return "greater";
    case Prim::less: return "less";
    case Prim::less_equal: return "less_equal";
    case Prim::where: return "where";
    case Prim::fill: return "fill";
  }
  return "?";
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::move(other.owner_);
    shared_ = other.shared_;
    borrowed_ = other.borrowed_;
    keep_alive_ = std::move(other.keep_alive_);
    data_ = other.data_;
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
    numel_ = other.numel_;
    tag_ = other.tag_;
    other.owner_ = nullptr;
    other.shared_ = nullptr;
    other.borrowed_ = false;
    other.data_ = nullptr;
    other.numel_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (owner_) {
    owner_->release(*this);
    owner_.reset();
    shared_ = nullptr;
    borrowed_ = false;
    keep_alive_.reset();
    data_ = nullptr;
  }
}

// The allocation behind buffers carved by allocate_many, and how many of them are still alive.
struct Buffer::SharedAllocation {
  void* base;
  std::int64_t live_buffers;
};

void Backend::release(Buffer& b) {
  if (b.borrowed_) return;  // the caller's memory: its keep-alive goes with the buffer
  std::lock_guard lock(allocation_mutex_);
  release_locked(b);
}

// One lock for many buffers (a tape's values, a backward's slots). Each released buffer is then
// marked borrowed, so that its reset() only drops the owner: outside the lock, since dropping the last
// owner destroys the backend.
void Backend::release_all(std::span<Buffer* const> buffers) {
  {
    std::lock_guard lock(allocation_mutex_);
    for (Buffer* b : buffers)
      if (b->owner_.get() == this && !b->borrowed_) {
        release_locked(*b);
        b->shared_ = nullptr;
        b->data_ = nullptr;
        b->borrowed_ = true;
      }
  }
  for (Buffer* b : buffers) b->reset();
}

void Backend::release_locked(Buffer& b) {
  if (b.shared_) {
    if (--b.shared_->live_buffers == 0) {
      engine().raw_release(b.shared_->base);
      delete b.shared_;
    }
  } else if (b.data_) {
    engine().raw_release(b.data_);
  }
  count_live(b, -1);
}

namespace {
// The byte size of shape x dtype, or InvalidShape when it cannot be addressed.
[[nodiscard]] Result<std::size_t> byte_size(const Shape& shape, DType dtype) {
  TAPEWISE_CHECK(shape.check());
  const std::int64_t n = shape.numel();
  if (n > std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(dtype_size(dtype)))
    return fail(ErrorCode::InvalidShape, "shape " + shape.str() + " is too large to address in bytes");
  return static_cast<std::size_t>(n) * dtype_size(dtype);
}
}  // namespace

bool Backend::take_injected_failure() { return fail_countdown_ > 0 && --fail_countdown_ == 0; }

detail::Engine& Backend::engine() { return static_cast<detail::Engine&>(*this); }

void detail::Engine::inject_allocation_failure(std::int64_t nth) {
  std::lock_guard lock(allocation_mutex_);
  fail_countdown_ = nth;
}

Result<void> detail::Engine::run_program(const Program& program) {
  const std::int64_t unsealed = first_unsealed_step(program);
  if (unsealed >= 0)
    return fail(ErrorCode::InvalidArgument, "tape program: step " + std::to_string(unsealed) + " of " +
                                                std::to_string(program.steps.size()) +
                                                " was appended and never sealed (Program::seal_last); nothing ran");
  return run_sealed_program(program);
}

MemoryStats Backend::stats() const {
  std::lock_guard lock(allocation_mutex_);
  MemoryStats stats = stats_;
  // The allocator is only read here; the engine hands it out mutable for the releases it makes.
  if (const detail::KeptMemory* memory = const_cast<Backend*>(this)->engine().kept_memory()) {
    stats.reserved_bytes = static_cast<std::int64_t>(memory->reserved_bytes());
    stats.slab_bytes = static_cast<std::int64_t>(memory->slabs().slab_bytes());
    stats.kept_bytes = static_cast<std::int64_t>(memory->kept_bytes());
  }
  return stats;
}

std::size_t Backend::trim() {
  std::size_t given = 0;
  {
    std::lock_guard lock(allocation_mutex_);
    given = engine().release_kept_memory(0);
  }
  // Outside the lock: on CUDA this waits for the stream, which other threads may be feeding.
  engine().return_unused_memory();
  return given;
}

std::size_t Backend::kept_memory_limit() const {
  std::lock_guard lock(allocation_mutex_);
  const detail::KeptMemory* memory = const_cast<Backend*>(this)->engine().kept_memory();
  return memory ? memory->kept_limit() : 0;
}

void Backend::set_kept_memory_limit(std::size_t bytes) {
  std::lock_guard lock(allocation_mutex_);
  detail::KeptMemory* memory = engine().kept_memory();
  if (!memory) return;
  memory->set_kept_limit(bytes);
  engine().release_kept_memory(bytes);
}

Result<std::size_t> detail::kept_memory_limit_from_environment(std::size_t default_bytes) {
  const char* env = std::getenv("TAPEWISE_KEPT_MEMORY_LIMIT");
  if (!env || !*env) return default_bytes;
  const std::string text = env;
  auto refuse = [&] {
    return fail(ErrorCode::InvalidArgument, "TAPEWISE_KEPT_MEMORY_LIMIT='" + text +
                                                "' is not a byte count (a whole number below 2^62, optionally followed by K, M or G for KiB, "
                                                "MiB, GiB)");
  };
  int shift = 0;
  switch (text.back()) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    default: break;
  }
  const auto number = whole_number(std::string_view(text).substr(0, text.size() - (shift ? 1 : 0)),
                                   std::uint64_t{1} << (62 - shift));
  if (!number) return refuse();
  return static_cast<std::size_t>(*number << shift);
}

Result<Buffer> Backend::allocate(const Shape& shape, DType dtype, AllocTag tag) {
  TAPEWISE_CHECK(byte_size(shape, dtype));
  return allocate_valid(shared_from_this(), shape, shape.numel(), dtype, tag);
}

Result<Buffer> Backend::allocate_same(const Buffer& like, AllocTag tag) {
  // A tape's value does not count itself an owner (Engine::allocate_value_into): never copied from.
  if (like.owner_.get() == this && like.owner_.use_count() > 0)
    return allocate_valid(like.owner_, like.shape(), like.numel(), like.dtype(), tag);
  return allocate_valid(shared_from_this(), like.shape(), like.numel(), like.dtype(), tag);
}

Result<Buffer> Backend::allocate_valid(const std::shared_ptr<Backend>& owner, const Shape& shape, std::int64_t numel,
                                       DType dtype, AllocTag tag) {
  Buffer b;
  TAPEWISE_CHECK(allocate_valid_into(owner, shape, numel, dtype, tag, b));
  return b;
}

// The memory first, then the buffer's fields in place: nothing is written to `out` on failure.
Result<void> Backend::allocate_valid_into(const std::shared_ptr<Backend>& owner, const Shape& shape, std::int64_t numel,
                                          DType dtype, AllocTag tag, Buffer& out) {
  const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
  void* data = nullptr;
  {
    // One lock per buffer made: the allocator's state and the stats change together.
    std::lock_guard lock(allocation_mutex_);
    if (take_injected_failure())
      return fail(ErrorCode::OutOfMemory, std::string("injected allocation failure (") + alloc_tag_name(tag) + ", " +
                                              std::to_string(bytes) + " bytes)");
    if (bytes > 0) {
      auto got = engine().raw_allocate(bytes);
      if (!got) return tl::unexpected(std::move(got).error());
      data = *got;
    }
    const int t = static_cast<int>(tag);  // count_live's, before the buffer exists
    stats_.live_count[t] += 1;
    stats_.live_bytes[t] += static_cast<std::int64_t>(bytes);
  }
  out.owner_ = owner;
  out.data_ = data;
  out.shape_ = shape;
  out.dtype_ = dtype;
  out.numel_ = numel;
  out.tag_ = tag;
  return {};
}

Result<std::vector<Buffer>> Backend::allocate_many(std::span<const BufferSpec> parts, AllocTag tag) {
  std::vector<Buffer> buffers;
  TAPEWISE_CHECK(allocate_parts(parts, tag, buffers));
  return buffers;
}

Result<void> Backend::allocate_parts(std::span<const BufferSpec> parts, AllocTag tag, std::vector<Buffer>& buffers) {
  buffers.clear();
  // Each part starts 16-byte aligned, so the 16-byte vector path of every kernel applies to it.
  constexpr std::size_t kAlign = 16;
  auto aligned = [](std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  auto aligned_size = [&](const BufferSpec& part) -> Result<std::size_t> {
    auto size = byte_size(part.shape, part.dtype);
    if (!size) return size;
    return aligned(*size);
  };
  std::size_t total = 0;
  for (const BufferSpec& part : parts) {
    auto size = aligned_size(part);
    TAPEWISE_CHECK(size);
    if (*size > std::numeric_limits<std::size_t>::max() / 2 - total)
      return fail(ErrorCode::InvalidShape, "allocate_many: " + std::to_string(parts.size()) + " parts too large to address in bytes");
    total += *size;
  }
  if (parts.empty()) return {};
  Buffer::SharedAllocation* shared = nullptr;
  {
    std::lock_guard lock(allocation_mutex_);
    if (take_injected_failure())
      return fail(ErrorCode::OutOfMemory, std::string("injected allocation failure (") + alloc_tag_name(tag) + ", " +
                                             std::to_string(parts.size()) + " buffers in one allocation of " +
                                             std::to_string(total) + " bytes)");
    if (total > 0) {
      auto got = engine().raw_allocate(total);
      TAPEWISE_CHECK(got);
      shared = new Buffer::SharedAllocation{*got, 0};
    }
  }
  // The parts' counts in `shared` and the stats change under one lock, once the buffers are made.
  buffers.reserve(parts.size());
  const std::shared_ptr<Backend> owner = shared_from_this();
  std::size_t offset = 0;
  for (const BufferSpec& part : parts) {
    const std::int64_t numel = part.shape.numel();
    const bool empty = numel == 0;  // an empty part owns nothing, as allocate's
    buffers.push_back(adopt(owner, empty ? nullptr : static_cast<std::byte*>(shared->base) + offset,
                            empty ? nullptr : shared, part.shape, numel, part.dtype, tag));
    offset += aligned(static_cast<std::size_t>(numel) * dtype_size(part.dtype));  // checked above
  }
  std::lock_guard lock(allocation_mutex_);
  for (const Buffer& b : buffers) {
    if (b.shared_) shared->live_buffers += 1;
    count_live(b, +1);
  }
  return {};
}

// The one place a Buffer comes to life: its fields. The caller counts it (count_live) under the
// allocation mutex it holds anyway.
Buffer Backend::adopt(const std::shared_ptr<Backend>& owner, void* data, Buffer::SharedAllocation* shared,
                      const Shape& shape, std::int64_t numel, DType dtype, AllocTag tag) {
  Buffer b;
  b.owner_ = owner;
  b.shared_ = shared;
  b.data_ = data;
  b.shape_ = shape;
  b.dtype_ = dtype;
  b.numel_ = numel;
  b.tag_ = tag;
  return b;
}

void Backend::count_live(const Buffer& b, int sign) {
  const int t = static_cast<int>(b.tag_);
  stats_.live_count[t] += sign;
  stats_.live_bytes[t] += sign * static_cast<std::int64_t>(b.bytes());
}

Buffer Backend::adopt_borrowed(void* data, std::shared_ptr<void> keep_alive, const Shape& shape, DType dtype) {
  Buffer b;
  b.owner_ = shared_from_this();
  b.borrowed_ = true;
  b.keep_alive_ = std::move(keep_alive);
  b.data_ = data;
  b.shape_ = shape;
  b.dtype_ = dtype;
  b.numel_ = shape.numel();
  b.tag_ = AllocTag::value;
  return b;
}

Result<Buffer> Backend::wrap(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> keep_alive) {
  auto size = byte_size(shape, dtype);
  TAPEWISE_CHECK(size);
  if (*size > 0) {
    if (!data) return fail(ErrorCode::InvalidArgument, "wrap: null data for shape " + shape.str());
    if (reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) != 0)
      return fail(ErrorCode::InvalidArgument, std::string("wrap: data is not aligned to the ") +
                                                   std::to_string(dtype_size(dtype)) + " bytes of " + dtype_name(dtype));
    TAPEWISE_CHECK(engine().check_caller_memory(data));
  }
  return adopt_borrowed(*size > 0 ? data : nullptr, std::move(keep_alive), shape, dtype);
}

Result<Buffer> Backend::upload(const HostArray& host, AllocTag tag) {
  auto size = byte_size(host.shape, host.dtype);
  if (!size) return fail(size.error().code, "upload: " + size.error().message);
  if (*size != host.bytes.size())
    return fail(ErrorCode::InvalidArgument, "upload: shape " + host.shape.str() + " of " + dtype_name(host.dtype) +
                                                " needs " + std::to_string(*size) + " bytes, host data has " +
                                                std::to_string(host.bytes.size()));
  auto buf = allocate(host.shape, host.dtype, tag);
  if (!buf) return buf;
  if (buf->bytes() > 0) TAPEWISE_CHECK(engine().copy_to_device(buf->data(), host.bytes.data(), buf->bytes()));
  return buf;
}

Result<HostArray> Backend::download(const Buffer& buffer) {
  if (buffer.backend() != this)
    return fail(ErrorCode::BackendMismatch, "download: buffer belongs to another backend");
  HostArray h;
  h.shape = buffer.shape();
  h.dtype = buffer.dtype();
  h.bytes.resize(buffer.bytes());
  if (!h.bytes.empty()) TAPEWISE_CHECK(engine().copy_to_host(h.bytes.data(), buffer.data(), h.bytes.size()));
  return h;
}

const char* math_mode_name(MathMode mode) { return mode == MathMode::exact ? "exact" : "aten"; }

Result<MathMode> math_mode_named(std::string_view name) {
  if (name == "aten") return MathMode::aten;
  if (name == "exact") return MathMode::exact;
  return fail(ErrorCode::InvalidArgument, "unknown math mode '" + std::string(name) + "' (aten or exact)");
}

MathMode math_mode(const Backend& backend) { return detail::engine_of(backend).math(); }

namespace detail {

Result<void> check_operands(const char* what, std::span<const Buffer* const> inputs,
                            std::span<Buffer* const> outputs) {
  const Buffer* first = outputs.empty() ? inputs[0] : outputs[0];
  auto check = [&](const Buffer& b, const char* role, std::size_t i) -> Result<void> {
    if (!b) return fail(ErrorCode::InvalidArgument, std::string(what) + ": " + role + " " + std::to_string(i) + " is an empty buffer");
    if (b.backend() != first->backend())
      return fail(ErrorCode::BackendMismatch, std::string(what) + ": " + role + " " + std::to_string(i) + " belongs to another backend");
    if (b.shape() != first->shape())
      return fail(ErrorCode::ShapeMismatch, std::string(what) + ": " + role + " " + std::to_string(i) + " has shape " + b.shape().str() + ", expected " + first->shape().str());
    if (b.dtype() != first->dtype())
      return fail(ErrorCode::DTypeMismatch, std::string(what) + ": " + role + " " + std::to_string(i) + " is " + dtype_name(b.dtype()) + ", expected " + dtype_name(first->dtype()));
    return {};
  };
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (auto ok = check(*inputs[i], "input", i); !ok) return ok;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (auto ok = check(*outputs[i], "output", i); !ok) return ok;
  return {};
}

}  // namespace detail
}  // namespace tapewise
