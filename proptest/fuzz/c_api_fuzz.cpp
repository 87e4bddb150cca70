// proptest/fuzz/c_api_fuzz.cpp — libFuzzer harness for the C ABI (tapewise/tapewise.h): each input is
// a sequence of C calls on CPU backends — creating and destroying backends, tapes, buffers and
// gradients; leaves with fuzzed shapes, dtypes and byte counts; apply with fuzzed op ids, parent ids
// and scalars; backward with fuzzed ids, seeds and paths; downloads with fuzzed sizes; DLPack in and
// out; and handles that were destroyed, NULL or garbage. The library must answer every call with a
// status and never crash, leak or touch memory it was not given (run under ASan and UBSan).
//
// The harness itself keeps the caller's side of every contract: the memory it passes holds at least
// the bytes it declares, wrapped memory outlives the tapes that view it, a DLPack view is only
// imported back into the tape it came from, and everything is released at the end of each input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <tapewise/tapewise.h>

namespace {

constexpr std::size_t kBlockDoubles = 512;  // every block of caller memory: 4 KiB, 8-byte aligned
constexpr std::size_t kBlockBytes = kBlockDoubles * sizeof(double);
constexpr int kMaxCalls = 512;

// Handles of one type ever made in this input, live or destroyed (destroyed ones stay, to be reused).
template <class Handle>
struct Pool {
  std::vector<Handle*> made;
  // Mostly a made handle (live or destroyed), else NULL or a garbage address (never an object).
  Handle* pick(FuzzedDataProvider& in, void* garbage) const {
    switch (in.ConsumeIntegralInRange(0, 7)) {  // 0 (an exhausted input) picks the common case
      case 6: return static_cast<Handle*>(garbage);
      case 7: return nullptr;
      default: return made.empty() ? nullptr : made[in.ConsumeIntegralInRange<std::size_t>(0, made.size() - 1)];
    }
  }
};

// A DLPack tensor the harness holds: an owning export (a gradient), a view of a tape's value (which
// may only go back into that tape, whose memory it points at), or one the harness built itself.
struct Held {
  DLManagedTensor* tensor;
  tw_tape* view_of;             // non-null for a view
  bool tape_destroyed = false;  // a view whose tape is gone: only its deleter may still run
};

// A DLPack tensor over one of the harness's memory blocks, with fuzzed metadata; the shape it
// declares never exceeds the block.
struct MadeTensor {
  DLManagedTensor managed{};
  std::int64_t shape[4] = {};
  std::int64_t strides[4] = {};
};

class Session {
 public:
  // Starts with a CPU backend and a tape on it, so that short inputs reach deep calls.
  explicit Session(FuzzedDataProvider& in) : in_(in) {
    tw_backend* backend = nullptr;
    tw_tape* tape = nullptr;
    if (tw_backend_create_cpu(&backend) == TW_OK) backends_.made.push_back(backend);
    if (tw_tape_create(backend, &tape) == TW_OK) tapes_.made.push_back(tape);
  }
  ~Session() { release_everything(); }

  void run() {
    for (int call = 0; call < kMaxCalls && in_.remaining_bytes() > 0; ++call) step();
  }

 private:
  void step() {
    switch (in_.ConsumeIntegralInRange(0, 20)) {
      case 0: create_backend(); break;
      case 1: tw_backend_destroy(backends_.pick(in_, garbage_)); break;
      case 2: set_tape_options(); break;
      case 3: create_tape(); break;
      case 4: destroy_tape(); break;
      case 5: case 6: leaf(); break;
      case 7: case 8: case 9: apply(); break;
      case 10: download_value(); break;
      case 11: query_value(); break;
      case 12: case 13: backward(); break;
      case 14: download_gradient(); break;
      case 15: wrap_buffer(); break;
      case 16: tw_buffer_destroy(buffers_.pick(in_, garbage_)); break;
      case 17: tw_gradients_destroy(gradients_.pick(in_, garbage_)); break;
      case 18: export_dlpack(); break;
      case 19: import_dlpack(); break;
      case 20: query_library(); break;
    }
  }

  // --- caller memory ----------------------------------------------------------------------------

  // A fresh block: up to 64 bytes from the input (so that calls after it still get input), then zeros.
  double* block() {
    blocks_.push_back(std::make_unique<double[]>(kBlockDoubles));
    double* data = blocks_.back().get();
    const std::vector<std::uint8_t> bytes = in_.ConsumeBytes<std::uint8_t>(in_.ConsumeIntegralInRange<std::size_t>(0, 64));
    if (!bytes.empty()) std::memcpy(data, bytes.data(), bytes.size());
    return data;
  }
  // A byte count a block really holds: often the right size for `elements` of `dtype`, else a small
  // multiple of 4 (the size of many small values), else any.
  std::size_t declared_bytes(std::int64_t elements, int dtype) {
    const std::int64_t element = dtype == TW_FLOAT32 ? 4 : 8;
    const int choice = in_.ConsumeIntegralInRange(0, 3);
    if (choice < 2 && elements >= 0 && elements <= static_cast<std::int64_t>(kBlockBytes) / element)
      return static_cast<std::size_t>(elements * element);
    if (choice < 3) return 4 * in_.ConsumeIntegralInRange<std::size_t>(0, 32);
    return in_.ConsumeIntegralInRange<std::size_t>(0, kBlockBytes);
  }
  // Usually a node's exact value size (when a block holds it), else a fuzzed one.
  std::size_t value_bytes(tw_tape* tape, std::int64_t id) {
    std::size_t exact = 0;
    if (!in_.ConsumeBool() && tw_tape_value_bytes(tape, id, &exact) == TW_OK && exact <= kBlockBytes) return exact;
    return declared_bytes(-1, TW_FLOAT32);
  }

  // Mostly valid: float32, float64; else an unknown value.
  int dtype() { return in_.ConsumeIntegralInRange(0, 7) == 7 ? in_.ConsumeIntegral<int>() : in_.ConsumeIntegralInRange(0, 1); }
  int path() { return in_.ConsumeIntegralInRange(0, 7) == 7 ? in_.ConsumeIntegral<int>() : in_.ConsumeIntegralInRange(0, 1); }
  // Mostly an id some tape handed out (of whichever tape: the one a call picks may be another) or
  // one past it; sometimes a bare number: negative, small, or anything.
  std::int64_t node_id() {
    switch (in_.ConsumeIntegralInRange(0, 7)) {
      case 6: return in_.ConsumeIntegral<std::int64_t>();
      case 7: return in_.ConsumeIntegralInRange<std::int64_t>(-2, 40);
      default:
        if (ids_.empty()) return in_.ConsumeIntegralInRange<std::int64_t>(0, 7);
        return ids_[in_.ConsumeIntegralInRange<std::size_t>(0, ids_.size() - 1)] + in_.ConsumeIntegralInRange(0, 1);
    }
  }
  // Keeps an id a tape handed out, for node_id().
  void handed_out(tw_status s, std::int64_t id) {
    if (s == TW_OK && ids_.size() < 256) ids_.push_back(id);
  }

  // Fuzzed (dims, ndim): mostly small shapes; sometimes bad ndim, negative or huge dims.
  int shape(std::int64_t* dims) {
    const int ndim = in_.ConsumeIntegralInRange(0, 3) != 3 ? in_.ConsumeIntegralInRange(0, 3)
                                                           : in_.ConsumeIntegralInRange(-2, TW_MAX_NDIM + 2);
    for (int d = 0; d < ndim; ++d)
      dims[d] = in_.ConsumeIntegralInRange(0, 9) == 9 ? in_.ConsumeIntegral<std::int64_t>()
                                                      : in_.ConsumeIntegralInRange<std::int64_t>(0, 4);
    return ndim;
  }
  static std::int64_t elements(const std::int64_t* dims, int ndim) {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) {
      if (dims[d] < 0 || (dims[d] != 0 && n > INT64_MAX / dims[d])) return -1;
      n *= dims[d];
    }
    return n;
  }

  // --- calls ------------------------------------------------------------------------------------

  void create_backend() {
    tw_backend* b = nullptr;
    const tw_status s = in_.ConsumeBool() ? tw_backend_create_cpu(&b)
                                          : tw_backend_create_cuda(in_.ConsumeIntegralInRange(-1, 2), nullptr, &b);
    if (s == TW_OK) backends_.made.push_back(b);
  }

  void set_tape_options() {
    const std::int64_t values[] = {0, 1, 7, 64, 448, 1 << 16, 65537, -5, INT64_MAX};
    tw_tape* tape = tapes_.pick(in_, garbage_);
    if (in_.ConsumeBool()) tw_tape_set_program_threshold(tape, in_.PickValueInArray(values));
    else tw_tape_set_max_pending_nodes(tape, in_.PickValueInArray(values));
    std::int64_t read = 0;
    tw_tape_program_threshold(tape, &read);
    tw_tape_max_pending_nodes(tape, in_.ConsumeBool() ? &read : nullptr);
  }

  void destroy_tape() {
    tw_tape* tape = tapes_.pick(in_, garbage_);
    if (tw_tape_destroy(tape) != TW_OK) return;
    for (Held& h : held_)
      if (h.view_of == tape) h.tape_destroyed = true;
  }

  void create_tape() {
    tw_tape* t = nullptr;
    if (tw_tape_create(backends_.pick(in_, garbage_), &t) == TW_OK) tapes_.made.push_back(t);
  }

  void leaf() {
    tw_tape* tape = tapes_.pick(in_, garbage_);
    std::int64_t dims[TW_MAX_NDIM + 2];
    const int ndim = shape(dims);
    const int type = dtype();
    const std::size_t bytes = declared_bytes(elements(dims, ndim), type);
    double* data = in_.ConsumeIntegralInRange(0, 15) == 15 ? nullptr : block();
    const int requires_grad = !in_.ConsumeBool();
    std::int64_t id = 0;
    std::int64_t* out = in_.ConsumeIntegralInRange(0, 15) == 15 ? nullptr : &id;
    const tw_status s = in_.ConsumeBool() ? tw_tape_leaf_host(tape, data, bytes, dims, ndim, type, requires_grad, out)
                                          : tw_tape_leaf_wrap(tape, data, bytes, dims, ndim, type, requires_grad, out);
    if (out) handed_out(s, id);
  }

  void apply() {
    tw_tape* tape = tapes_.pick(in_, garbage_);
    const int op = in_.ConsumeIntegralInRange(-2, TW_OP_COUNT + 1);
    const std::int64_t parents[3] = {node_id(), node_id(), node_id()};
    const double scalars[3] = {in_.ConsumeFloatingPoint<double>(), in_.ConsumeFloatingPoint<double>(),
                               in_.ConsumeFloatingPoint<double>()};
    // Usually the op's own counts (tw_op_info fails for an unknown op and leaves them), else any.
    int nparents = in_.ConsumeIntegralInRange(-1, 3), nscalars = in_.ConsumeIntegralInRange(-1, 3);
    if (in_.ConsumeIntegralInRange(0, 3) != 3) tw_op_info(op, &nparents, &nscalars);
    std::int64_t id = 0;
    const tw_status s = tw_tape_apply(tape, op, in_.ConsumeIntegralInRange(0, 15) == 15 ? nullptr : parents, nparents,
                                      in_.ConsumeIntegralInRange(0, 15) == 15 ? nullptr : scalars, nscalars, &id);
    handed_out(s, id);
  }

  void download_value() {
    tw_tape* tape = tapes_.pick(in_, garbage_);
    const std::int64_t id = node_id();
    tw_tape_value_host(tape, id, block(), value_bytes(tape, id));
  }

  void query_value() {
    tw_tape* tape = tapes_.pick(in_, garbage_);
    const std::int64_t id = node_id();
    int ndim = 0;
    std::int64_t dims[TW_MAX_NDIM];
    int type = 0;
    std::int64_t n = 0;
    tw_tape_value_shape(tape, id, &ndim, in_.ConsumeBool() ? dims : nullptr, in_.ConsumeIntegralInRange(-1, TW_MAX_NDIM));
    tw_tape_value_dtype(tape, id, &type);
    tw_tape_size(tape, &n);
    tw_tape_pending(tape, &n);
    if (in_.ConsumeBool()) tw_tape_flush(tape);
    char text[256];
    std::size_t needed = 0;
    tw_backend_describe(backends_.pick(in_, garbage_), text, in_.ConsumeIntegralInRange<std::size_t>(0, sizeof text), &needed);
  }

  void backward() {
    tw_tape* tape = tapes_.pick(in_, garbage_);
    const std::int64_t out = node_id();
    const int vjp_path = path();
    const int dense = in_.ConsumeIntegralInRange(0, 2);
    tw_gradients* g = nullptr;
    tw_status s;
    const std::int64_t wanted[3] = {node_id(), node_id(), node_id()};
    const std::size_t wanted_count = in_.ConsumeIntegralInRange<std::size_t>(0, 3);
    const std::int64_t* wanted_ids = in_.ConsumeBool() ? wanted : nullptr;
    switch (in_.ConsumeIntegralInRange(0, 3)) {
      case 0: s = tw_tape_backward_host(tape, out, block(), value_bytes(tape, out), vjp_path, dense, &g); break;
      case 1: s = tw_tape_backward_buffer(tape, out, buffers_.pick(in_, garbage_), vjp_path, dense, &g); break;
      case 2:
        s = tw_tape_backward_host_wanted(tape, out, block(), value_bytes(tape, out), vjp_path, dense, wanted_ids,
                                         wanted_count, &g);
        break;
      default:
        s = tw_tape_backward_buffer_wanted(tape, out, buffers_.pick(in_, garbage_), vjp_path, dense, wanted_ids,
                                           wanted_count, &g);
    }
    if (s == TW_OK) gradients_.made.push_back(g);
  }

  void query_library() {
    tw_status_name(in_.ConsumeIntegral<int>());
    tw_op_name(in_.ConsumeIntegralInRange(-2, TW_OP_COUNT + 1));
    tw_backend* backend = backends_.pick(in_, garbage_);
    int kind = 0;
    std::int64_t count = 0, bytes = 0;
    tw_backend_kind_of(backend, &kind);
    tw_backend_memory_stats(backend, in_.ConsumeIntegralInRange(-1, 3), &count, in_.ConsumeBool() ? &bytes : nullptr);
    tw_backend_memory_reserved(backend, &count, in_.ConsumeBool() ? &bytes : nullptr, nullptr);
    if (in_.ConsumeBool()) tw_backend_set_kept_memory_limit(backend, in_.ConsumeIntegralInRange<std::int64_t>(-3, 1 << 24));
    if (in_.ConsumeBool()) tw_backend_trim(backend, in_.ConsumeBool() ? &bytes : nullptr);
    tw_backend_kept_memory_limit(backend, in_.ConsumeBool() ? &bytes : nullptr);
    tw_backend_synchronize(backend);
    tw_last_error();
    tw_version();
    tw_op_count();
    tw_cuda_available();
  }

  void download_gradient() {
    tw_gradients* g = gradients_.pick(in_, garbage_);
    const std::int64_t id = node_id();
    int has = 0;
    tw_gradients_has(g, id, &has);
    tw_gradients_download(g, id, block(), declared_bytes(-1, TW_FLOAT32));
  }

  void wrap_buffer() {
    std::int64_t dims[TW_MAX_NDIM + 2];
    const int ndim = shape(dims);
    const int type = dtype();
    tw_buffer* b = nullptr;
    if (tw_buffer_wrap(backends_.pick(in_, garbage_), block(), declared_bytes(elements(dims, ndim), type), dims, ndim,
                       type, &b) == TW_OK)
      buffers_.made.push_back(b);
  }

  void export_dlpack() {
    DLManagedTensor* t = nullptr;
    if (in_.ConsumeBool()) {
      tw_tape* tape = tapes_.pick(in_, garbage_);
      if (tw_tape_value_dlpack(tape, node_id(), &t) == TW_OK) held_.push_back({t, tape, false});
    } else {
      if (tw_gradients_dlpack(gradients_.pick(in_, garbage_), node_id(), &t) == TW_OK) held_.push_back({t, nullptr, false});
    }
  }

  // A held tensor (a view only into its own tape) or a freshly made one, into a leaf or a buffer.
  void import_dlpack() {
    Held h{nullptr, nullptr, false};
    if (!held_.empty() && in_.ConsumeBool()) {
      const std::size_t i = in_.ConsumeIntegralInRange<std::size_t>(0, held_.size() - 1);
      h = held_[i];
      held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      h.tensor = make_tensor();
    }
    if (h.tape_destroyed) {  // its memory is gone with its tape
      held_.push_back(h);
      return;
    }
    tw_status s;
    if (h.view_of || in_.ConsumeBool()) {
      tw_tape* tape = h.view_of ? h.view_of : tapes_.pick(in_, garbage_);
      std::int64_t id = 0;
      s = tw_tape_leaf_dlpack(tape, h.tensor, in_.ConsumeBool(), &id);
      handed_out(s, id);
    } else {
      tw_buffer* b = nullptr;
      s = tw_buffer_from_dlpack(backends_.pick(in_, garbage_), h.tensor, &b);
      if (s == TW_OK) buffers_.made.push_back(b);
    }
    if (s != TW_OK) held_.push_back(h);  // still ours
  }

  DLManagedTensor* make_tensor() {
    auto* t = new MadeTensor;
    DLTensor& d = t->managed.dl_tensor;
    d.data = block();
    d.ndim = in_.ConsumeIntegralInRange(-1, 4);
    for (int i = 0; i < 4; ++i) {
      t->shape[i] = in_.ConsumeIntegralInRange<std::int64_t>(0, 4);  // at most 256 elements: within the block
      t->strides[i] = in_.ConsumeIntegralInRange<std::int64_t>(-1, 20);
    }
    d.shape = in_.ConsumeIntegralInRange(0, 7) == 7 ? nullptr : t->shape;
    d.strides = in_.ConsumeBool() ? nullptr : t->strides;
    const std::uint8_t codes[] = {kDLFloat, kDLFloat, kDLInt, kDLBfloat};
    const std::uint8_t bits[] = {32, 64, 16, 8};
    d.dtype = DLDataType{in_.PickValueInArray(codes), in_.PickValueInArray(bits), static_cast<std::uint16_t>(in_.ConsumeIntegralInRange(0, 2))};
    const DLDeviceType devices[] = {kDLCPU, kDLCPU, kDLCUDA, kDLCUDAHost};
    d.device = DLDevice{in_.PickValueInArray(devices), in_.ConsumeIntegralInRange(-1, 1)};
    d.byte_offset = in_.ConsumeBool() ? 0 : 8 * in_.ConsumeIntegralInRange<std::uint64_t>(0, 4);  // within the block's slack
    t->managed.manager_ctx = t;
    t->managed.deleter = [](DLManagedTensor* self) { delete static_cast<MadeTensor*>(self->manager_ctx); };
    return &t->managed;
  }

  // Destroying every handle ever made also tries the destroyed ones again (refused, harmlessly);
  // caller memory goes last, after every view of it.
  void release_everything() {
    for (tw_gradients* g : gradients_.made) tw_gradients_destroy(g);
    for (tw_buffer* b : buffers_.made) tw_buffer_destroy(b);
    for (tw_tape* t : tapes_.made) tw_tape_destroy(t);
    for (tw_backend* b : backends_.made) tw_backend_destroy(b);
    for (Held& h : held_) h.tensor->deleter(h.tensor);
    blocks_.clear();
  }

  FuzzedDataProvider& in_;
  alignas(16) unsigned char garbage_[64] = {};
  Pool<tw_backend> backends_;
  Pool<tw_tape> tapes_;
  Pool<tw_buffer> buffers_;
  Pool<tw_gradients> gradients_;
  std::vector<Held> held_;
  std::vector<std::unique_ptr<double[]>> blocks_;
  std::vector<std::int64_t> ids_;  // ids tapes handed out (node_id)
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Session session(in);
  session.run();
  return 0;
}
