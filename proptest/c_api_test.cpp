// proptest/c_api_test.cpp — the C ABI (tapewise/tapewise.h) against the C++ API: every node gives
// the same bits through both (values and gradients; sparse and dense; fused and staged), every error
// path returns its status and changes nothing, views are zero-copy, DLPack round-trips, and handles
// that are not live are refused. CPU backend always; the CUDA variants skip where no device opens.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <dlpack/dlpack.h>
#ifdef TAPEWISE_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include <tapewise/tapewise.h>
#include <tapewise/version.hpp>

#include "test_support.hpp"

// gtest prints statuses by name.
inline void PrintTo(tw_status s, std::ostream* os) { *os << tw_status_name(s); }

namespace tapewise::testing {
namespace {

#define TW_ASSERT_OK(call) ASSERT_EQ((call), TW_OK) << tw_last_error()
#define TW_EXPECT_OK(call) EXPECT_EQ((call), TW_OK) << tw_last_error()

struct HandleDeleter {
  void operator()(tw_backend* h) const { tw_backend_destroy(h); }
  void operator()(tw_tape* h) const { tw_tape_destroy(h); }
  void operator()(tw_buffer* h) const { tw_buffer_destroy(h); }
  void operator()(tw_gradients* h) const { tw_gradients_destroy(h); }
};
using BackendHandle = std::unique_ptr<tw_backend, HandleDeleter>;
using TapeHandle = std::unique_ptr<tw_tape, HandleDeleter>;
using BufferHandle = std::unique_ptr<tw_buffer, HandleDeleter>;
using GradientsHandle = std::unique_ptr<tw_gradients, HandleDeleter>;

using Bytes = std::vector<std::byte>;

template <class T>
Bytes bytes_of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Bytes c_value(tw_tape* tape, std::int64_t id) {
  std::size_t n = 0;
  EXPECT_EQ(tw_tape_value_bytes(tape, id, &n), TW_OK) << tw_last_error();
  Bytes b(n);
  EXPECT_EQ(tw_tape_value_host(tape, id, b.data(), n), TW_OK) << tw_last_error();
  return b;
}

std::optional<Bytes> c_gradient(tw_tape* tape, tw_gradients* g, std::int64_t id) {
  int has = -1;
  EXPECT_EQ(tw_gradients_has(g, id, &has), TW_OK) << tw_last_error();
  if (!has) return std::nullopt;
  std::size_t n = 0;
  EXPECT_EQ(tw_tape_value_bytes(tape, id, &n), TW_OK) << tw_last_error();
  Bytes b(n);
  EXPECT_EQ(tw_gradients_download(g, id, b.data(), n), TW_OK) << tw_last_error();
  return b;
}

// --- every node: the same bits through the C ABI as through the C++ Tape ------------------------------

// What one recording and backward produced: each node's value and gradient bytes.
struct Outcome {
  std::vector<Bytes> values;
  std::vector<std::optional<Bytes>> grads;
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

struct Case {
  const OpInfo* op;
  DType dtype;
  bool same;  // a binary op applied to (a, a)
  bool dense;
  VjpPath path;
  std::string str() const {
    return std::string(op->name) + (same ? "(a,a)" : "") + " " + dtype_name(dtype) + (dense ? " dense" : " sparse") +
           (path == VjpPath::fused ? " fused" : " staged");
  }
};

// The node's first run set (spec/ops.def), as the C ABI takes it: one double per scalar.
std::vector<double> scalars_for(const OpInfo& op) {
  const Scalars s = default_scalars(op);
  const double values[2] = {s.s0, s.s1};
  return {values, values + op.scalar_count()};
}

// Inputs a, b, c (c does not require grad) and the seed, as bytes of the case's dtype.
struct Inputs {
  std::int64_t n;
  Bytes a, b, c, seed;
};

template <class T>
Inputs make_inputs() {
  std::vector<T> a = special_values<T>(), b = a, c(a.size()), seed(a.size());
  std::rotate(b.begin(), b.begin() + 7, b.end());
  for (std::size_t i = 0; i < a.size(); ++i) {
    c[i] = static_cast<T>(0.25 * static_cast<double>(i) - 2.0);
    seed[i] = static_cast<T>(i % 3 == 0 ? -0.0 : 0.5 + static_cast<double>(i % 5));
  }
  return {static_cast<std::int64_t>(a.size()), bytes_of(a), bytes_of(b), bytes_of(c), bytes_of(seed)};
}

Inputs inputs_for(DType dtype) {
  switch (dtype) {
    case DType::float32: return make_inputs<float>();
    case DType::float64: return make_inputs<double>();
    case DType::bfloat16: return make_inputs<bfloat16>();
    case DType::float16: return make_inputs<float16>();
  }
  throw std::invalid_argument("inputs_for: unknown dtype");
}

// The graph: y = op(a[, b]); z = y * a (a accumulates); w = z + c; backward from w.
Outcome run_cpp(const std::shared_ptr<Backend>& backend, const Case& k) {
  const Inputs in = inputs_for(k.dtype);
  const Shape shape{in.n};
  Tape tape(backend);
  const NodeId a = must(tape.leaf(HostArray{shape, k.dtype, in.a}));
  const NodeId b = must(tape.leaf(HostArray{shape, k.dtype, in.b}));
  const NodeId c = must(tape.leaf(HostArray{shape, k.dtype, in.c}, false));
  const std::vector<double> s = scalars_for(*k.op);
  const NodeId parents[2] = {a, k.same ? a : b};
  const NodeId y = must(tape.apply(k.op->op, {parents, static_cast<std::size_t>(k.op->arity)},
                               Scalars{s.size() > 0 ? s[0] : 0.0, s.size() > 1 ? s[1] : 0.0}));
  const NodeId w = must(tape.add(must(tape.mul(y, a)), c));
  const HostArray seed{shape, k.dtype, in.seed};
  Gradients g = must(k.dense ? tape.backward_dense(w, seed, k.path) : tape.backward(w, seed, k.path));
  Outcome out;
  for (std::size_t at = 0; at < tape.size(); ++at) {
    const NodeId id = tape.id_at(at);
    out.values.push_back(must(tape.value(id)).bytes);
    out.grads.push_back(g.has(id) ? std::optional<Bytes>(must(g.host(id)).bytes) : std::nullopt);
  }
  return out;
}

Outcome run_c(tw_backend* backend, const Case& k) {
  const Inputs in = inputs_for(k.dtype);
  const std::int64_t shape[1] = {in.n};
  const int dtype = static_cast<int>(k.dtype);
  tw_tape* raw = nullptr;
  EXPECT_EQ(tw_tape_create(backend, &raw), TW_OK) << tw_last_error();
  TapeHandle tape(raw);
  std::int64_t a = -1, b = -1, c = -1, y = -1, z = -1, w = -1;
  EXPECT_EQ(tw_tape_leaf_host(raw, in.a.data(), in.a.size(), shape, 1, dtype, 1, &a), TW_OK) << tw_last_error();
  EXPECT_EQ(tw_tape_leaf_host(raw, in.b.data(), in.b.size(), shape, 1, dtype, 1, &b), TW_OK) << tw_last_error();
  EXPECT_EQ(tw_tape_leaf_host(raw, in.c.data(), in.c.size(), shape, 1, dtype, 0, &c), TW_OK) << tw_last_error();
  const std::vector<double> s = scalars_for(*k.op);
  const std::int64_t parents[2] = {a, k.same ? a : b};
  EXPECT_EQ(tw_tape_apply(raw, static_cast<int>(k.op->op), parents, k.op->arity, s.data(), static_cast<int>(s.size()), &y),
            TW_OK) << tw_last_error();
  const std::int64_t ya[2] = {y, a};
  EXPECT_EQ(tw_tape_apply(raw, TW_OP_mul, ya, 2, nullptr, 0, &z), TW_OK) << tw_last_error();
  const std::int64_t zc[2] = {z, c};
  EXPECT_EQ(tw_tape_apply(raw, TW_OP_add, zc, 2, nullptr, 0, &w), TW_OK) << tw_last_error();
  tw_gradients* g = nullptr;
  EXPECT_EQ(tw_tape_backward_host(raw, w, in.seed.data(), in.seed.size(),
                                  k.path == VjpPath::fused ? TW_PATH_FUSED : TW_PATH_STAGED, k.dense ? 1 : 0, &g),
            TW_OK) << tw_last_error();
  GradientsHandle grads(g);
  std::int64_t size = 0;
  EXPECT_EQ(tw_tape_size(raw, &size), TW_OK);
  EXPECT_EQ(size, 6);
  Outcome out;
  for (std::int64_t id : {a, b, c, y, z, w}) {  // the tape's nodes in recording order, as run_cpp reads them
    out.values.push_back(c_value(raw, id));
    out.grads.push_back(c_gradient(raw, g, id));
  }
  return out;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const OpInfo& op : kOps)
    for (bool same : {false, true}) {
      if (same && op.arity == 1) continue;
      for (DType dtype : kDTypes)
        for (bool dense : {false, true})
          for (VjpPath path : {VjpPath::fused, VjpPath::staged}) cases.push_back({&op, dtype, same, dense, path});
    }
  return cases;
}

// A C backend of the parameter's kind with its C++ twin (PerBackend's `backend`, which skips the CUDA
// case where no device exists).
class CApiPerBackend : public PerBackend {
 protected:
  void SetUp() override {
    PerBackend::SetUp();
    if (IsSkipped()) return;
    cpp_backend = backend;
    tw_backend* raw = nullptr;
    if (GetParam() == BackendKind::cpu)
      ASSERT_EQ(tw_backend_create_cpu(&raw), TW_OK) << tw_last_error();
    else
      ASSERT_EQ(tw_backend_create_cuda(0, nullptr, &raw), TW_OK) << tw_last_error();
    c_backend.reset(raw);
  }
  BackendHandle c_backend;
  std::shared_ptr<Backend> cpp_backend;
};
TW_INSTANTIATE_PER_BACKEND(CApiPerBackend);

TEST_P(CApiPerBackend, EveryNodeGivesTheCppTapesBits) {
  for (const Case& k : all_cases()) {
    SCOPED_TRACE(k.str());
    const Outcome want = run_cpp(cpp_backend, k);
    const Outcome got = run_c(c_backend.get(), k);
    ASSERT_EQ(got.values.size(), want.values.size());
    for (std::size_t id = 0; id < want.values.size(); ++id) {
      EXPECT_EQ(got.values[id], want.values[id]) << "value of node " << id;
      EXPECT_EQ(got.grads[id], want.grads[id]) << "gradient of node " << id;
    }
  }
}

TEST_P(CApiPerBackend, SeedBufferGivesTheSameGradientsAsHostSeed) {
  const std::vector<float> x{-1.f, 0.f, 2.f}, seed{1.f, -2.f, 0.5f};
  const std::int64_t shape[1] = {3};
  tw_tape* tape = nullptr;
  TW_ASSERT_OK(tw_tape_create(c_backend.get(), &tape));
  TapeHandle owned(tape);
  std::int64_t leaf = -1, y = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(tape, x.data(), 12, shape, 1, TW_FLOAT32, 1, &leaf));
  TW_ASSERT_OK(tw_tape_apply(tape, TW_OP_sin, &leaf, 1, nullptr, 0, &y));
  tw_gradients* from_host = nullptr;
  TW_ASSERT_OK(tw_tape_backward_host(tape, y, seed.data(), 12, TW_PATH_FUSED, 0, &from_host));
  GradientsHandle g1(from_host);
  // The seed buffer: a DLPack view of a leaf holding the seed (device memory on CUDA too).
  std::int64_t seed_leaf = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(tape, seed.data(), 12, shape, 1, TW_FLOAT32, 0, &seed_leaf));
  DLManagedTensor* view = nullptr;
  TW_ASSERT_OK(tw_tape_value_dlpack(tape, seed_leaf, &view));
  tw_buffer* seed_buffer = nullptr;
  TW_ASSERT_OK(tw_buffer_from_dlpack(c_backend.get(), view, &seed_buffer));
  BufferHandle b(seed_buffer);
  tw_gradients* from_buffer = nullptr;
  TW_ASSERT_OK(tw_tape_backward_buffer(tape, y, seed_buffer, TW_PATH_STAGED, 0, &from_buffer));
  GradientsHandle g2(from_buffer);
  EXPECT_EQ(c_gradient(tape, from_buffer, leaf), c_gradient(tape, from_host, leaf));
}

// Wrapping backend memory (a value's DLPack view: device memory on CUDA) gives a leaf with no copy.
TEST_P(CApiPerBackend, WrapIsZeroCopy) {
  const std::vector<double> x{1.5, -2.0, 0.25, 8.0};
  const std::int64_t shape[2] = {2, 2};
  tw_tape* tape = nullptr;
  TW_ASSERT_OK(tw_tape_create(c_backend.get(), &tape));
  TapeHandle owned(tape);
  std::int64_t leaf = -1, wrapped = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(tape, x.data(), 32, shape, 2, TW_FLOAT64, 1, &leaf));
  DLManagedTensor* view = nullptr;
  TW_ASSERT_OK(tw_tape_value_dlpack(tape, leaf, &view));
  void* memory = view->dl_tensor.data;
  view->deleter(view);
  TW_ASSERT_OK(tw_tape_leaf_wrap(tape, memory, 32, shape, 2, TW_FLOAT64, 1, &wrapped));
  TW_ASSERT_OK(tw_tape_value_dlpack(tape, wrapped, &view));
  EXPECT_EQ(view->dl_tensor.data, memory);
  view->deleter(view);
  EXPECT_EQ(c_value(tape, wrapped), bytes_of(x));
  int ndim = 0;
  std::int64_t dims[2] = {};
  TW_EXPECT_OK(tw_tape_value_shape(tape, wrapped, &ndim, dims, 2));
  EXPECT_EQ(ndim, 2);
  EXPECT_EQ(dims[1], 2);
}

// --- library queries ------------------------------------------------------------------------------------

// The C op ids are ABI: programs compiled against an older header pass these numbers. The list below is
// the released numbering, written out (not derived from the table): a row inserted into spec/ops.def,
// or an id renumbered in tapewise.h, changes what a number means and fails here (and at compile time,
// c_api.cpp's checks); a new node appends its id after the last.
TEST(CApi, OpIdsArePinnedAndAppendOnly) {
  const std::vector<std::pair<int, const char*>> released = {
      {TW_OP_add, "add"},   {TW_OP_sub, "sub"},         {TW_OP_mul, "mul"},         {TW_OP_neg, "neg"},
      {TW_OP_scale, "scale"}, {TW_OP_abs, "abs"},       {TW_OP_sqrt, "sqrt"},       {TW_OP_clamp, "clamp"},
      {TW_OP_max, "max"},   {TW_OP_min, "min"},         {TW_OP_div, "div"},         {TW_OP_relu, "relu"},
      {TW_OP_exp, "exp"},   {TW_OP_sin, "sin"},         {TW_OP_cos, "cos"},         {TW_OP_log, "log"},
      {TW_OP_inv, "inv"},   {TW_OP_safeLog, "safeLog"}, {TW_OP_sigmoid, "sigmoid"}, {TW_OP_tanh, "tanh"},
      {TW_OP_silu, "silu"}, {TW_OP_gelu, "gelu"},       {TW_OP_softplus, "softplus"}};
  ASSERT_GE(tw_op_count(), static_cast<int>(released.size())) << "an op id was removed";
  for (std::size_t id = 0; id < released.size(); ++id) {
    EXPECT_EQ(released[id].first, static_cast<int>(id)) << "TW_OP_" << released[id].second << " moved";
    EXPECT_STREQ(tw_op_name(static_cast<int>(id)), released[id].second) << "op id " << id << " names another node";
  }
}

TEST(CApi, LibraryQueries) {
  EXPECT_STREQ(tw_version_string(), kVersion);
  ASSERT_EQ(tw_op_count(), kOpCount);
  for (const OpInfo& op : kOps) {
    EXPECT_STREQ(tw_op_name(static_cast<int>(op.op)), op.name);
    int arity = 0, scalars = -1;
    TW_EXPECT_OK(tw_op_info(static_cast<int>(op.op), &arity, &scalars));
    EXPECT_EQ(arity, op.arity);
    EXPECT_EQ(scalars, op.scalar_count());
  }
  EXPECT_EQ(tw_op_name(-1), nullptr);
  EXPECT_EQ(tw_op_name(kOpCount), nullptr);
  EXPECT_EQ(tw_op_info(kOpCount, nullptr, nullptr), TW_INVALID_ARGUMENT);
  EXPECT_STREQ(tw_status_name(TW_OK), "TW_OK");
  EXPECT_STREQ(tw_status_name(TW_SEED_DTYPE_MISMATCH), "TW_SEED_DTYPE_MISMATCH");
  EXPECT_STREQ(tw_status_name(TW_INVALID_HANDLE), "TW_INVALID_HANDLE");
  EXPECT_STREQ(tw_status_name(55), "TW_UNKNOWN_STATUS");
  EXPECT_EQ(tw_cuda_available() == 1, cuda_available());
}

TEST(CApi, BackendQueries) {
  tw_backend* raw = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu(&raw));
  BackendHandle backend(raw);
  int kind = TW_BACKEND_CUDA;
  TW_EXPECT_OK(tw_backend_kind_of(raw, &kind));
  EXPECT_EQ(kind, TW_BACKEND_CPU);
  std::size_t needed = 0;
  TW_ASSERT_OK(tw_backend_describe(raw, nullptr, 0, &needed));
  const std::string text = make_cpu_backend()->describe();
  ASSERT_EQ(needed, text.size() + 1);
  std::string small(needed - 1, '#');
  EXPECT_EQ(tw_backend_describe(raw, small.data(), small.size(), nullptr), TW_INVALID_ARGUMENT);
  EXPECT_EQ(small, std::string(needed - 1, '#'));  // nothing written
  // A short buffer still reports the size needed (as snprintf does), so the caller can retry.
  std::size_t retry = 0;
  char eight[8] = "#######";
  EXPECT_EQ(tw_backend_describe(raw, eight, sizeof eight, &retry), TW_INVALID_ARGUMENT);
  EXPECT_EQ(retry, needed);
  EXPECT_STREQ(eight, "#######");
  std::vector<char> dst(needed);
  TW_EXPECT_OK(tw_backend_describe(raw, dst.data(), dst.size(), nullptr));
  EXPECT_EQ(std::string(dst.data()), text);
  TW_EXPECT_OK(tw_backend_synchronize(raw));
  // The CPU backend's threads: asked for, reported, and checked.
  int threads = -1;
  TW_EXPECT_OK(tw_backend_cpu_threads(raw, &threads));
  EXPECT_EQ(threads, cpu_threads(*make_cpu_backend()));
  tw_backend* three = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu_threads(3, &three));
  BackendHandle three_handle(three);
  TW_EXPECT_OK(tw_backend_cpu_threads(three, &threads));
  EXPECT_EQ(threads, 3);
  tw_backend* refused = nullptr;
  EXPECT_EQ(tw_backend_create_cpu_threads(-1, &refused), TW_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("threads -1 is outside 0..256"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_backend_create_cpu_threads(257, &refused), TW_INVALID_ARGUMENT);
  EXPECT_EQ(refused, nullptr);
  EXPECT_EQ(tw_backend_cpu_threads(raw, nullptr), TW_NULL_POINTER);
  // The math mode: the CPU backend's is exact; a CUDA mode that is neither is refused before any device
  // is opened, naming the value.
  int math = -1;
  TW_EXPECT_OK(tw_backend_math_mode(raw, &math));
  EXPECT_EQ(math, TW_MATH_EXACT);
  EXPECT_EQ(tw_backend_math_mode(raw, nullptr), TW_NULL_POINTER);
  EXPECT_EQ(tw_backend_create_cuda_math(0, nullptr, 2, &refused), TW_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("math 2 is neither TW_MATH_ATEN (0) nor TW_MATH_EXACT (1)"), std::string::npos)
      << tw_last_error();
  EXPECT_EQ(refused, nullptr);
  // The tape's options: read back as set; one out of range is refused and the option stays as it was.
  tw_tape* tape = nullptr;
  TW_EXPECT_OK(tw_tape_create(raw, &tape));
  std::int64_t threshold = -1, pending = -1;
  TW_EXPECT_OK(tw_tape_program_threshold(tape, &threshold));
  TW_EXPECT_OK(tw_tape_max_pending_nodes(tape, &pending));
  EXPECT_EQ(threshold, tapewise::kCpuProgramThreshold);  // a CPU backend's tape (CUDA's: 2^26)
  EXPECT_EQ(pending, 4096);
  TW_EXPECT_OK(tw_tape_set_program_threshold(tape, 4096));
  TW_EXPECT_OK(tw_tape_set_max_pending_nodes(tape, 7));
  EXPECT_EQ(tw_tape_set_program_threshold(tape, -1), TW_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("program_threshold -1 is negative"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_tape_set_max_pending_nodes(tape, 0), TW_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("max_pending_nodes 0"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_tape_program_threshold(nullptr, &threshold), TW_NULL_POINTER);
  EXPECT_EQ(tw_tape_max_pending_nodes(tape, nullptr), TW_NULL_POINTER);
  TW_EXPECT_OK(tw_tape_program_threshold(tape, &threshold));
  TW_EXPECT_OK(tw_tape_max_pending_nodes(tape, &pending));
  EXPECT_EQ(threshold, 4096);
  EXPECT_EQ(pending, 7);
  TW_EXPECT_OK(tw_tape_destroy(tape));
  std::int64_t count = -1, bytes = -1;
  TW_EXPECT_OK(tw_backend_memory_stats(raw, TW_TAG_VALUE, &count, &bytes));
  EXPECT_EQ(count, 0);
  EXPECT_EQ(bytes, 0);
  EXPECT_EQ(tw_backend_memory_stats(raw, 3, &count, &bytes), TW_INVALID_ARGUMENT);
  if (!cuda_available()) {
    tw_backend* none = nullptr;
    EXPECT_EQ(tw_backend_create_cuda(0, nullptr, &none), TW_DEVICE_UNAVAILABLE);
    EXPECT_EQ(none, nullptr);
    EXPECT_NE(std::string(tw_last_error()).find("tw_backend_create_cuda"), std::string::npos);
  }
}

// The memory a backend holds, its kept memory limit and trim, through the C door: a released tape's
// slabs are kept and counted, trim gives them back and says how much, and a live buffer is untouched.
TEST(CApi, MemoryReservedKeptLimitAndTrim) {
  unsetenv("TAPEWISE_KEPT_MEMORY_LIMIT");
  tw_backend* raw = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu_threads(1, &raw));
  BackendHandle backend(raw);
  std::int64_t limit = 0;
  TW_EXPECT_OK(tw_backend_kept_memory_limit(raw, &limit));
  EXPECT_EQ(limit, std::int64_t{256} << 20);
  std::int64_t reserved = -1, slabs = -1, kept = -1;
  TW_EXPECT_OK(tw_backend_memory_reserved(raw, &reserved, &slabs, &kept));
  EXPECT_EQ(reserved, 0);
  std::vector<float> ones(std::size_t{1} << 16, 1.0f);  // 256 KiB: 16 to a 4 MiB slab
  const std::int64_t shape[1] = {std::int64_t{1} << 16};
  tw_tape* tape = nullptr;
  TW_ASSERT_OK(tw_tape_create(raw, &tape));
  TW_ASSERT_OK(tw_tape_set_program_threshold(tape, 0));
  std::int64_t x = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(tape, ones.data(), ones.size() * sizeof(float), shape, 1, TW_FLOAT32, 1, &x));
  for (int i = 0; i < 20; ++i) {
    std::int64_t y = -1;
    TW_ASSERT_OK(tw_tape_apply(tape, TW_OP_neg, &x, 1, nullptr, 0, &y));
    x = y;
  }
  TW_EXPECT_OK(tw_backend_memory_reserved(raw, &reserved, &slabs, &kept));
  EXPECT_EQ(slabs, std::int64_t{8} << 20) << "21 values: two 4 MiB slabs";
  EXPECT_EQ(kept, 0);
  TW_EXPECT_OK(tw_tape_destroy(tape));
  TW_EXPECT_OK(tw_backend_memory_reserved(raw, &reserved, nullptr, &kept));
  EXPECT_EQ(kept, std::int64_t{8} << 20);
  EXPECT_EQ(reserved, kept);
  std::int64_t released = -1;
  TW_EXPECT_OK(tw_backend_trim(raw, &released));
  EXPECT_EQ(released, std::int64_t{8} << 20);
  TW_EXPECT_OK(tw_backend_memory_reserved(raw, &reserved, &slabs, &kept));
  EXPECT_EQ(reserved, 0);
  EXPECT_EQ(kept, 0);
  TW_EXPECT_OK(tw_backend_trim(raw, nullptr));
  // The limit: -1 is none, another negative value is refused naming it, and the limit stays.
  TW_EXPECT_OK(tw_backend_set_kept_memory_limit(raw, -1));
  TW_EXPECT_OK(tw_backend_kept_memory_limit(raw, &limit));
  EXPECT_EQ(limit, -1);
  TW_EXPECT_OK(tw_backend_set_kept_memory_limit(raw, 4096));
  EXPECT_EQ(tw_backend_set_kept_memory_limit(raw, -2), TW_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("bytes -2 is negative"), std::string::npos) << tw_last_error();
  TW_EXPECT_OK(tw_backend_kept_memory_limit(raw, &limit));
  EXPECT_EQ(limit, 4096);
  EXPECT_EQ(tw_backend_kept_memory_limit(raw, nullptr), TW_NULL_POINTER);
  EXPECT_EQ(tw_backend_trim(nullptr, &released), TW_NULL_POINTER);
  EXPECT_EQ(tw_backend_memory_reserved(nullptr, &reserved, nullptr, nullptr), TW_NULL_POINTER);
  EXPECT_EQ(tw_backend_set_kept_memory_limit(nullptr, 0), TW_NULL_POINTER);
}

// --- versions, status sentences, the stream ------------------------------------------------------------

TEST(CApiVersion, HeaderAndLibraryVersionsAreTheProjectVersion) {
  EXPECT_EQ(TW_VERSION_MAJOR, TAPEWISE_VERSION_MAJOR);
  EXPECT_EQ(TW_VERSION_MINOR, TAPEWISE_VERSION_MINOR);
  EXPECT_EQ(TW_VERSION_PATCH, TAPEWISE_VERSION_PATCH);
  EXPECT_EQ(TW_VERSION, TW_VERSION_MAJOR * 10000 + TW_VERSION_MINOR * 100 + TW_VERSION_PATCH);
  EXPECT_EQ(tw_version(), TW_VERSION);
  EXPECT_EQ(std::to_string(TW_VERSION_MAJOR) + "." + std::to_string(TW_VERSION_MINOR) + "." +
                std::to_string(TW_VERSION_PATCH),
            tw_version_string());
}

// The packed version of major.minor.patch, as TW_VERSION packs it.
constexpr int packed_version(int major, int minor, int patch) { return major * 10000 + minor * 100 + patch; }

TEST(CApiVersion, CheckVersionAcceptsCompatibleHeadersOnly) {
  TW_EXPECT_OK(tw_check_version(TW_VERSION));
  EXPECT_STREQ(tw_last_error(), "");
  // Patch versions never matter, in either direction.
  TW_EXPECT_OK(tw_check_version(packed_version(TW_VERSION_MAJOR, TW_VERSION_MINOR, 0)));
  TW_EXPECT_OK(tw_check_version(packed_version(TW_VERSION_MAJOR, TW_VERSION_MINOR, 99)));
  // A newer minor than the library's is refused always; an older one only before 1.0.
  EXPECT_EQ(tw_check_version(packed_version(TW_VERSION_MAJOR, TW_VERSION_MINOR + 1, 0)), TW_VERSION_MISMATCH);
  if (TW_VERSION_MINOR > 0) {
    EXPECT_EQ(tw_check_version(packed_version(TW_VERSION_MAJOR, TW_VERSION_MINOR - 1, 0)),
              TW_VERSION_MAJOR == 0 ? TW_VERSION_MISMATCH : TW_OK);
  }
  EXPECT_EQ(tw_check_version(packed_version(TW_VERSION_MAJOR + 1, TW_VERSION_MINOR, TW_VERSION_PATCH)),
            TW_VERSION_MISMATCH);
  // The message names both versions.
  const std::string message = tw_last_error();
  EXPECT_NE(message.find("tw_check_version"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("library ") + kVersion + " (" + std::to_string(TW_VERSION) + ")"),
            std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(TW_VERSION_MAJOR + 1) + "." + std::to_string(TW_VERSION_MINOR) + "." +
                         std::to_string(TW_VERSION_PATCH)),
            std::string::npos) << message;
  EXPECT_EQ(tw_check_version(-1), TW_INVALID_ARGUMENT);
  EXPECT_STREQ(tw_status_name(TW_VERSION_MISMATCH), "TW_VERSION_MISMATCH");
}

TEST(CApiStatus, EveryStatusHasItsOwnSentence) {
  const int statuses[] = {TW_OK, TW_INVALID_NODE_ID, TW_INVALID_SHAPE, TW_SHAPE_MISMATCH, TW_DTYPE_MISMATCH,
                          TW_SEED_SHAPE_MISMATCH, TW_SEED_DTYPE_MISMATCH, TW_BACKEND_MISMATCH,
                          TW_INVALID_ARGUMENT, TW_OUT_OF_MEMORY, TW_DEVICE_UNAVAILABLE, TW_CUDA_FAILURE,
                          TW_NULL_POINTER, TW_INVALID_HANDLE, TW_INTERNAL, TW_VERSION_MISMATCH};
  std::vector<std::string> sentences;
  for (int status : statuses) {
    SCOPED_TRACE(tw_status_name(status));
    EXPECT_STRNE(tw_status_name(status), "TW_UNKNOWN_STATUS");
    const char* sentence = tw_status_string(status);
    ASSERT_NE(sentence, nullptr);
    EXPECT_GT(std::strlen(sentence), 6u);
    EXPECT_EQ(std::string(sentence).rfind("unknown status", 0), std::string::npos) << sentence;
    EXPECT_EQ(tw_status_string(status), sentence) << "a constant, the same pointer each call";
    sentences.push_back(sentence);
  }
  std::sort(sentences.begin(), sentences.end());
  EXPECT_EQ(std::adjacent_find(sentences.begin(), sentences.end()), sentences.end()) << "two statuses share a sentence";
  EXPECT_STREQ(tw_status_string(TW_NULL_POINTER), "a required pointer argument is NULL");
}

TEST(CApiStatus, UnknownStatusesAreNamedByNumber) {
  for (int status : {-1, 12, 55, 99, 104, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()}) {
    const char* sentence = tw_status_string(status);
    ASSERT_NE(sentence, nullptr);
    EXPECT_EQ(std::string(sentence), "unknown status " + std::to_string(status) + " (not a tw_status value)");
  }
}

TEST(CApiBackendStream, CpuBackendHasNoStream) {
  tw_backend* raw = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu(&raw));
  BackendHandle backend(raw);
  void* stream = &raw;
  TW_EXPECT_OK(tw_backend_stream(raw, &stream));
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(tw_backend_stream(raw, nullptr), TW_NULL_POINTER);
  stream = &raw;
  EXPECT_EQ(tw_backend_stream(nullptr, &stream), TW_NULL_POINTER);
  int garbage[16] = {};
  EXPECT_EQ(tw_backend_stream(reinterpret_cast<tw_backend*>(garbage), &stream), TW_INVALID_HANDLE);
  EXPECT_EQ(stream, static_cast<void*>(&raw)) << "a failed call writes no output";
}

TEST(CApiBackendStream, CudaBackendReportsItsStream) {
#ifdef TAPEWISE_HAS_CUDA
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device, GPU test skipped";
  // Its own stream: a real one, not the legacy default stream (NULL).
  tw_backend* own = nullptr;
  TW_ASSERT_OK(tw_backend_create_cuda(0, nullptr, &own));
  BackendHandle own_backend(own);
  void* stream = nullptr;
  TW_EXPECT_OK(tw_backend_stream(own, &stream));
  EXPECT_NE(stream, nullptr);
  // The caller's stream comes back as given.
  cudaStream_t mine = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&mine), cudaSuccess);
  {
    tw_backend* raw = nullptr;
    TW_ASSERT_OK(tw_backend_create_cuda(0, mine, &raw));
    BackendHandle backend(raw);
    void* got = nullptr;
    TW_EXPECT_OK(tw_backend_stream(raw, &got));
    EXPECT_EQ(got, static_cast<void*>(mine));
  }
  EXPECT_EQ(cudaStreamDestroy(mine), cudaSuccess);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// --- error paths: a status, a message, and nothing changed -------------------------------------------------

class CApiErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    tw_backend* be = nullptr;
    ASSERT_EQ(tw_backend_create_cpu(&be), TW_OK);
    backend.reset(be);
    tw_tape* t = nullptr;
    ASSERT_EQ(tw_tape_create(be, &t), TW_OK);
    tape.reset(t);
    const float f3[3] = {1.f, -2.f, 0.5f};
    const double d3[3] = {1.0, 2.0, 3.0};
    const float f2[2] = {4.f, 5.f};
    TW_ASSERT_OK(tw_tape_leaf_host(t, f3, sizeof f3, shape3, 1, TW_FLOAT32, 1, &x));
    TW_ASSERT_OK(tw_tape_leaf_host(t, d3, sizeof d3, shape3, 1, TW_FLOAT64, 1, &d));
    TW_ASSERT_OK(tw_tape_leaf_host(t, f2, sizeof f2, shape2, 1, TW_FLOAT32, 1, &u));
    TW_ASSERT_OK(tw_tape_apply(t, TW_OP_sin, &x, 1, nullptr, 0, &y));
    before = snapshot();
  }

  // The node count and the values of the tape's nodes, x, d, u and y.
  using Snapshot = std::pair<std::int64_t, std::vector<Bytes>>;
  Snapshot snapshot() {
    Snapshot s;
    EXPECT_EQ(tw_tape_size(tape.get(), &s.first), TW_OK);
    for (std::int64_t id : {x, d, u, y}) s.second.push_back(c_value(tape.get(), id));
    return s;
  }

  // `got` is `want`, the message names the function, and the tape is as it was.
  void expect_failure(tw_status got, tw_status want, const char* function) {
    EXPECT_EQ(got, want) << function << ": " << tw_last_error();
    EXPECT_NE(std::string(tw_last_error()).find(function), std::string::npos) << tw_last_error();
    EXPECT_EQ(snapshot(), before) << function << " changed the tape";
  }

  BackendHandle backend;
  TapeHandle tape;
  const std::int64_t shape3[1] = {3}, shape2[1] = {2};
  std::int64_t x = -1, d = -1, u = -1, y = -1;
  Snapshot before;
};

TEST_F(CApiErrors, Leaves) {
  tw_tape* t = tape.get();
  const float data[3] = {1.f, 2.f, 3.f};
  std::int64_t id = -7;
  const std::int64_t negative[1] = {-3}, overflow[2] = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  const std::int64_t too_many_bytes[1] = {std::int64_t{1} << 62};
  const std::int64_t dims33[33] = {};
  auto leaf = [&](const void* p, std::size_t n, const std::int64_t* s, int ndim, int dtype, std::int64_t* out) {
    return tw_tape_leaf_host(t, p, n, s, ndim, dtype, 1, out);
  };
  expect_failure(leaf(nullptr, 12, shape3, 1, TW_FLOAT32, &id), TW_NULL_POINTER, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, shape3, 1, TW_FLOAT32, nullptr), TW_NULL_POINTER, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, nullptr, 1, TW_FLOAT32, &id), TW_NULL_POINTER, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, shape3, -1, TW_FLOAT32, &id), TW_INVALID_SHAPE, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, dims33, 33, TW_FLOAT32, &id), TW_INVALID_SHAPE, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, negative, 1, TW_FLOAT32, &id), TW_INVALID_SHAPE, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, overflow, 2, TW_FLOAT32, &id), TW_INVALID_SHAPE, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, too_many_bytes, 1, TW_FLOAT64, &id), TW_INVALID_SHAPE, "tw_tape_leaf_host");
  expect_failure(leaf(data, 8, shape3, 1, TW_FLOAT32, &id), TW_INVALID_ARGUMENT, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, shape3, 1, TW_FLOAT64, &id), TW_INVALID_ARGUMENT, "tw_tape_leaf_host");
  expect_failure(leaf(data, 12, shape3, 1, 2, &id), TW_INVALID_ARGUMENT, "tw_tape_leaf_host");
  float misaligned[4];
  void* odd = reinterpret_cast<char*>(misaligned) + 1;
  expect_failure(tw_tape_leaf_wrap(t, odd, 12, shape3, 1, TW_FLOAT32, 1, &id), TW_INVALID_ARGUMENT, "tw_tape_leaf_wrap");
  expect_failure(tw_tape_leaf_wrap(t, misaligned, 16, shape3, 1, TW_FLOAT32, 1, &id), TW_INVALID_ARGUMENT, "tw_tape_leaf_wrap");
  expect_failure(tw_tape_leaf_dlpack(t, nullptr, 1, &id), TW_NULL_POINTER, "tw_tape_leaf_dlpack");
  EXPECT_EQ(id, -7);  // no output written by a failing call
}

// An id of another tape is refused at every door that takes an id, naming both tapes, and the tape
// is unchanged; gradients refuse another tape's ids too.
TEST_F(CApiErrors, AnotherTapesIdIsRefusedNamingBothTapes) {
  tw_tape* other_raw = nullptr;
  TW_ASSERT_OK(tw_tape_create(backend.get(), &other_raw));
  TapeHandle other(other_raw);
  const float f3[3] = {7.f, 8.f, 9.f};
  std::int64_t a = -1, a_sin = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(other_raw, f3, sizeof f3, shape3, 1, TW_FLOAT32, 1, &a));
  TW_ASSERT_OK(tw_tape_apply(other_raw, TW_OP_sin, &a, 1, nullptr, 0, &a_sin));
  ASSERT_NE(a, x);  // both are their tape's first node: the tape tells them apart
  tw_tape* t = tape.get();
  auto expect_refused = [&](tw_status got, const char* function) {
    const std::string message = tw_last_error();  // before expect_failure's reads replace it
    EXPECT_NE(message.find(" used on tape "), std::string::npos) << message;
    EXPECT_NE(message.find("of tape "), std::string::npos) << message;
    expect_failure(got, TW_INVALID_NODE_ID, function);
  };
  std::int64_t id = -7;
  const std::int64_t xa[2] = {x, a};
  const float seed[3] = {1.f, 1.f, 1.f};
  float dst[3] = {};
  int ndim = 0, dtype = 0;
  std::size_t bytes = 0;
  tw_gradients* g = nullptr;
  expect_refused(tw_tape_apply(t, TW_OP_sin, &a, 1, nullptr, 0, &id), "tw_tape_apply");
  expect_refused(tw_tape_apply(t, TW_OP_add, xa, 2, nullptr, 0, &id), "tw_tape_apply");
  expect_refused(tw_tape_value_host(t, a, dst, sizeof dst), "tw_tape_value_host");
  expect_refused(tw_tape_value_shape(t, a, &ndim, nullptr, 0), "tw_tape_value_shape");
  expect_refused(tw_tape_value_dtype(t, a, &dtype), "tw_tape_value_dtype");
  expect_refused(tw_tape_value_bytes(t, a, &bytes), "tw_tape_value_bytes");
  expect_refused(tw_tape_backward_host(t, a, seed, sizeof seed, TW_PATH_FUSED, 0, &g), "tw_tape_backward_host");
  expect_refused(tw_tape_backward_host_wanted(t, y, seed, sizeof seed, TW_PATH_FUSED, 0, &a, 1, &g),
                 "tw_tape_backward_host_wanted");
  EXPECT_EQ(id, -7);
  EXPECT_EQ(g, nullptr);
  // The message names the tape the id came from and the tape it was used on, as numbers.
  ASSERT_EQ(tw_tape_apply(t, TW_OP_sin, &a, 1, nullptr, 0, &id), TW_INVALID_NODE_ID);
  const std::string message = tw_last_error();
  const std::uint64_t other_serial = static_cast<std::uint64_t>(a) >> 32, serial = static_cast<std::uint64_t>(x) >> 32;
  EXPECT_NE(message.find("of tape " + std::to_string(other_serial) + " used on tape " + std::to_string(serial)),
            std::string::npos) << message;
  // Gradients of `other` refuse this tape's ids.
  TW_ASSERT_OK(tw_tape_backward_host(other_raw, a_sin, seed, sizeof seed, TW_PATH_FUSED, 0, &g));
  GradientsHandle owned(g);
  int has = -1;
  EXPECT_EQ(tw_gradients_has(g, x, &has), TW_INVALID_NODE_ID);
  EXPECT_NE(std::string(tw_last_error()).find(" used on tape "), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_gradients_download(g, x, dst, sizeof dst), TW_INVALID_NODE_ID);
  EXPECT_EQ(has, -1);
  TW_EXPECT_OK(tw_gradients_has(g, a, &has));
  EXPECT_EQ(has, 1);
}

TEST_F(CApiErrors, Apply) {
  tw_tape* t = tape.get();
  std::int64_t id = -7;
  const std::int64_t xx[2] = {x, x}, xd[2] = {x, d}, xu[2] = {x, u}, far[1] = {99}, negative[1] = {-1};
  const double c[2] = {1.0, 2.0};
  expect_failure(tw_tape_apply(t, -1, &x, 1, nullptr, 0, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_COUNT, &x, 1, nullptr, 0, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_sin, xx, 2, nullptr, 0, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_add, xx, 1, nullptr, 0, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_add, xx, -2, nullptr, 0, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_scale, &x, 1, nullptr, 0, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_scale, &x, 1, c, 2, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_sin, &x, 1, c, 1, &id), TW_INVALID_ARGUMENT, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_scale, &x, 1, nullptr, 1, &id), TW_NULL_POINTER, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_sin, nullptr, 1, nullptr, 0, &id), TW_NULL_POINTER, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_sin, &x, 1, nullptr, 0, nullptr), TW_NULL_POINTER, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_sin, far, 1, nullptr, 0, &id), TW_INVALID_NODE_ID, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_sin, negative, 1, nullptr, 0, &id), TW_INVALID_NODE_ID, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_add, xu, 2, nullptr, 0, &id), TW_SHAPE_MISMATCH, "tw_tape_apply");
  expect_failure(tw_tape_apply(t, TW_OP_mul, xd, 2, nullptr, 0, &id), TW_DTYPE_MISMATCH, "tw_tape_apply");
  EXPECT_EQ(id, -7);
}

TEST_F(CApiErrors, Values) {
  tw_tape* t = tape.get();
  float dst[3] = {7.f, 7.f, 7.f};
  expect_failure(tw_tape_value_host(t, y, dst, 8), TW_INVALID_ARGUMENT, "tw_tape_value_host");
  expect_failure(tw_tape_value_host(t, y, dst, 16), TW_INVALID_ARGUMENT, "tw_tape_value_host");
  expect_failure(tw_tape_value_host(t, d, dst, 12), TW_INVALID_ARGUMENT, "tw_tape_value_host");
  expect_failure(tw_tape_value_host(t, y, nullptr, 12), TW_NULL_POINTER, "tw_tape_value_host");
  expect_failure(tw_tape_value_host(t, 4, dst, 12), TW_INVALID_NODE_ID, "tw_tape_value_host");
  expect_failure(tw_tape_value_host(t, -1, dst, 12), TW_INVALID_NODE_ID, "tw_tape_value_host");
  EXPECT_EQ(dst[0], 7.f);  // never written
  int ndim = -1;
  std::int64_t dims[1] = {-1};
  expect_failure(tw_tape_value_shape(t, y, &ndim, dims, 0), TW_INVALID_ARGUMENT, "tw_tape_value_shape");
  expect_failure(tw_tape_value_shape(t, 9, &ndim, dims, 1), TW_INVALID_NODE_ID, "tw_tape_value_shape");
  expect_failure(tw_tape_value_shape(t, y, nullptr, dims, 1), TW_NULL_POINTER, "tw_tape_value_shape");
  EXPECT_EQ(ndim, -1);
  TW_EXPECT_OK(tw_tape_value_shape(t, y, &ndim, nullptr, 0));
  EXPECT_EQ(ndim, 1);
  TW_EXPECT_OK(tw_tape_value_shape(t, y, &ndim, dims, 1));
  EXPECT_EQ(dims[0], 3);
  EXPECT_STREQ(tw_last_error(), "");  // reset by a success
  int dtype = TW_FLOAT32;
  TW_EXPECT_OK(tw_tape_value_dtype(t, d, &dtype));
  EXPECT_EQ(dtype, TW_FLOAT64);
  expect_failure(tw_tape_value_dtype(t, 4, &dtype), TW_INVALID_NODE_ID, "tw_tape_value_dtype");
  std::size_t bytes = 0;
  expect_failure(tw_tape_value_bytes(t, 4, &bytes), TW_INVALID_NODE_ID, "tw_tape_value_bytes");
  DLManagedTensor* view = nullptr;
  expect_failure(tw_tape_value_dlpack(t, 4, &view), TW_INVALID_NODE_ID, "tw_tape_value_dlpack");
  expect_failure(tw_tape_value_dlpack(t, y, nullptr), TW_NULL_POINTER, "tw_tape_value_dlpack");
  EXPECT_EQ(view, nullptr);
}

TEST_F(CApiErrors, Backward) {
  tw_tape* t = tape.get();
  const float seed[3] = {1.f, 1.f, 1.f};
  auto* const sentinel = reinterpret_cast<tw_gradients*>(std::uintptr_t{0x10});
  tw_gradients* g = sentinel;
  expect_failure(tw_tape_backward_host(t, 4, seed, 12, TW_PATH_FUSED, 0, &g), TW_INVALID_NODE_ID, "tw_tape_backward_host");
  expect_failure(tw_tape_backward_host(t, -1, seed, 12, TW_PATH_FUSED, 0, &g), TW_INVALID_NODE_ID, "tw_tape_backward_host");
  expect_failure(tw_tape_backward_host(t, y, seed, 8, TW_PATH_FUSED, 0, &g), TW_INVALID_ARGUMENT, "tw_tape_backward_host");
  expect_failure(tw_tape_backward_host(t, d, seed, 12, TW_PATH_FUSED, 0, &g), TW_INVALID_ARGUMENT, "tw_tape_backward_host");
  expect_failure(tw_tape_backward_host(t, y, nullptr, 12, TW_PATH_FUSED, 0, &g), TW_NULL_POINTER, "tw_tape_backward_host");
  expect_failure(tw_tape_backward_host(t, y, seed, 12, 2, 0, &g), TW_INVALID_ARGUMENT,
                 "tw_tape_backward_host");
  expect_failure(tw_tape_backward_host(t, y, seed, 12, TW_PATH_FUSED, 0, nullptr), TW_NULL_POINTER, "tw_tape_backward_host");

  // Seed buffers: wrong shape, wrong dtype, another backend.
  float seed2[2] = {1.f, 1.f};
  double seed_d[3] = {1.0, 1.0, 1.0};
  tw_buffer *b2 = nullptr, *bd = nullptr, *other = nullptr;
  TW_ASSERT_OK(tw_buffer_wrap(backend.get(), seed2, sizeof seed2, shape2, 1, TW_FLOAT32, &b2));
  TW_ASSERT_OK(tw_buffer_wrap(backend.get(), seed_d, sizeof seed_d, shape3, 1, TW_FLOAT64, &bd));
  BufferHandle owned2(b2), owned_d(bd);
  tw_backend* second = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu(&second));
  BackendHandle owned_second(second);
  TW_ASSERT_OK(tw_buffer_wrap(second, const_cast<float*>(seed), sizeof seed, shape3, 1, TW_FLOAT32, &other));
  BufferHandle owned_other(other);
  expect_failure(tw_tape_backward_buffer(t, y, b2, TW_PATH_FUSED, 0, &g), TW_SEED_SHAPE_MISMATCH, "tw_tape_backward_buffer");
  expect_failure(tw_tape_backward_buffer(t, y, bd, TW_PATH_STAGED, 1, &g), TW_SEED_DTYPE_MISMATCH, "tw_tape_backward_buffer");
  expect_failure(tw_tape_backward_buffer(t, y, other, TW_PATH_FUSED, 0, &g), TW_BACKEND_MISMATCH, "tw_tape_backward_buffer");
  expect_failure(tw_tape_backward_buffer(t, y, nullptr, TW_PATH_FUSED, 0, &g), TW_NULL_POINTER, "tw_tape_backward_buffer");
  EXPECT_EQ(g, sentinel);

  // Wanted lists: an id off the tape, a NULL list with ids.
  const std::int64_t off_tape[2] = {x, 9};
  expect_failure(tw_tape_backward_host_wanted(t, y, seed, 12, TW_PATH_FUSED, 0, off_tape, 2, &g), TW_INVALID_NODE_ID,
                 "tw_tape_backward_host_wanted");
  expect_failure(tw_tape_backward_host_wanted(t, y, seed, 12, TW_PATH_FUSED, 0, nullptr, 1, &g), TW_NULL_POINTER,
                 "tw_tape_backward_host_wanted");
  expect_failure(tw_tape_backward_buffer_wanted(t, y, b2, TW_PATH_FUSED, 0, off_tape, 1, &g), TW_SEED_SHAPE_MISMATCH,
                 "tw_tape_backward_buffer_wanted");
  EXPECT_EQ(g, sentinel);

  // Buffer creation failures.
  tw_buffer* b = nullptr;
  EXPECT_EQ(tw_buffer_wrap(backend.get(), seed2, 4, shape2, 1, TW_FLOAT32, &b), TW_INVALID_ARGUMENT);
  EXPECT_EQ(tw_buffer_wrap(backend.get(), seed2, 8, shape2, -1, TW_FLOAT32, &b), TW_INVALID_SHAPE);
  EXPECT_EQ(tw_buffer_wrap(backend.get(), seed2, 8, shape2, 1, TW_FLOAT32, nullptr), TW_NULL_POINTER);
  EXPECT_EQ(tw_buffer_from_dlpack(backend.get(), nullptr, &b), TW_NULL_POINTER);
  EXPECT_EQ(b, nullptr);
}

// A backward with a wanted list returns those gradients, with the bits of the full backward, and no
// other; an empty list (NULL, 0) returns none.
TEST_F(CApiErrors, WantedGradientsOnly) {
  tw_tape* t = tape.get();
  std::int64_t z = -1;
  TW_ASSERT_OK(tw_tape_apply(t, TW_OP_exp, &y, 1, nullptr, 0, &z));
  const float seed[3] = {1.f, -0.5f, 2.f};
  for (int dense : {0, 1})
    for (int path : {TW_PATH_FUSED, TW_PATH_STAGED}) {
      tw_gradients *full = nullptr, *only = nullptr, *none = nullptr;
      TW_ASSERT_OK(tw_tape_backward_host(t, z, seed, sizeof seed, path, dense, &full));
      const std::int64_t wanted[1] = {x};
      TW_ASSERT_OK(tw_tape_backward_host_wanted(t, z, seed, sizeof seed, path, dense, wanted, 1, &only));
      TW_ASSERT_OK(tw_tape_backward_host_wanted(t, z, seed, sizeof seed, path, dense, nullptr, 0, &none));
      EXPECT_EQ(c_gradient(t, only, x), c_gradient(t, full, x));
      ASSERT_TRUE(c_gradient(t, only, x).has_value());
      for (std::int64_t id : {d, u, y, z}) {
        EXPECT_FALSE(c_gradient(t, only, id).has_value()) << "node " << id;
        EXPECT_FALSE(c_gradient(t, none, id).has_value()) << "node " << id;
      }
      for (tw_gradients* g : {full, only, none}) TW_EXPECT_OK(tw_gradients_destroy(g));
    }
}

TEST_F(CApiErrors, Gradients) {
  tw_tape* t = tape.get();
  const double seed_d[3] = {1.0, 1.0, 1.0};
  std::int64_t frozen = -1, z = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(t, seed_d, sizeof seed_d, shape3, 1, TW_FLOAT64, 0, &frozen));
  const std::int64_t parents[2] = {d, frozen};
  TW_ASSERT_OK(tw_tape_apply(t, TW_OP_mul, parents, 2, nullptr, 0, &z));
  tw_gradients* g = nullptr;
  TW_ASSERT_OK(tw_tape_backward_host(t, z, seed_d, sizeof seed_d, TW_PATH_FUSED, 0, &g));
  GradientsHandle owned(g);
  int has = -1;
  EXPECT_EQ(tw_gradients_has(g, 6, &has), TW_INVALID_NODE_ID);
  EXPECT_EQ(tw_gradients_has(g, -1, &has), TW_INVALID_NODE_ID);
  EXPECT_EQ(tw_gradients_has(g, d, nullptr), TW_NULL_POINTER);
  EXPECT_EQ(has, -1);
  TW_EXPECT_OK(tw_gradients_has(g, frozen, &has));
  EXPECT_EQ(has, 0);
  TW_EXPECT_OK(tw_gradients_has(g, x, &has));  // not reachable from z
  EXPECT_EQ(has, 0);
  double dst[3] = {7, 7, 7};
  EXPECT_EQ(tw_gradients_download(g, frozen, dst, sizeof dst), TW_INVALID_NODE_ID);
  EXPECT_EQ(tw_gradients_download(g, 99, dst, sizeof dst), TW_INVALID_NODE_ID);
  EXPECT_EQ(tw_gradients_download(g, d, dst, 12), TW_INVALID_ARGUMENT);
  EXPECT_EQ(tw_gradients_download(g, d, nullptr, sizeof dst), TW_NULL_POINTER);
  EXPECT_EQ(dst[0], 7.0);
  TW_EXPECT_OK(tw_gradients_download(g, d, dst, sizeof dst));
  EXPECT_EQ(dst[0], 1.0);
  DLManagedTensor* out = nullptr;
  EXPECT_EQ(tw_gradients_dlpack(g, frozen, &out), TW_INVALID_NODE_ID);
  EXPECT_EQ(tw_gradients_dlpack(g, d, nullptr), TW_NULL_POINTER);
  TW_EXPECT_OK(tw_gradients_has(g, d, &has));  // still there after the failures
  EXPECT_EQ(has, 1);
}

// --- handles ---------------------------------------------------------------------------------------------------

TEST(CApiHandles, DestroyedAndGarbageHandlesAreRefused) {
  tw_backend* backend = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu(&backend));
  tw_tape* tape = nullptr;
  TW_ASSERT_OK(tw_tape_create(backend, &tape));
  const float v[2] = {1.f, 2.f};
  const std::int64_t shape[1] = {2};
  std::int64_t x = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(tape, v, sizeof v, shape, 1, TW_FLOAT32, 1, &x));
  tw_gradients* grads = nullptr;
  TW_ASSERT_OK(tw_tape_backward_host(tape, x, v, sizeof v, TW_PATH_FUSED, 0, &grads));
  tw_buffer* buffer = nullptr;
  TW_ASSERT_OK(tw_buffer_wrap(backend, const_cast<float*>(v), sizeof v, shape, 1, TW_FLOAT32, &buffer));

  // A handle of one type is not a handle of another.
  std::int64_t n = -1;
  EXPECT_EQ(tw_tape_size(reinterpret_cast<tw_tape*>(buffer), &n), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_buffer_destroy(reinterpret_cast<tw_buffer*>(tape)), TW_INVALID_HANDLE);

  TW_ASSERT_OK(tw_gradients_destroy(grads));
  TW_ASSERT_OK(tw_buffer_destroy(buffer));
  TW_ASSERT_OK(tw_tape_destroy(tape));
  TW_ASSERT_OK(tw_backend_destroy(backend));

  int has = 0;
  std::int64_t id = -1;
  tw_tape* t2 = nullptr;
  float dst[2];
  EXPECT_EQ(tw_tape_size(tape, &n), TW_INVALID_HANDLE);
  EXPECT_NE(std::string(tw_last_error()).find("not live"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_tape_apply(tape, TW_OP_neg, &x, 1, nullptr, 0, &id), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_tape_value_host(tape, x, dst, sizeof dst), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_tape_create(backend, &t2), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_backend_synchronize(backend), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_gradients_has(grads, x, &has), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_gradients_download(grads, x, dst, sizeof dst), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_tape_backward_buffer(tape, x, buffer, TW_PATH_FUSED, 0, &grads), TW_INVALID_HANDLE);
  // Destroying twice is refused; destroying NULL is a no-op.
  EXPECT_EQ(tw_tape_destroy(tape), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_backend_destroy(backend), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_buffer_destroy(buffer), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_gradients_destroy(grads), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_tape_destroy(nullptr), TW_OK);
  // Garbage (never dereferenced) and NULL.
  int garbage[16] = {};
  EXPECT_EQ(tw_tape_size(reinterpret_cast<tw_tape*>(garbage), &n), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_backend_destroy(reinterpret_cast<tw_backend*>(garbage)), TW_INVALID_HANDLE);
  EXPECT_EQ(tw_tape_size(nullptr, &n), TW_NULL_POINTER);
  EXPECT_EQ(tw_tape_create(nullptr, &t2), TW_NULL_POINTER);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(t2, nullptr);
}

TEST(CApiHandles, BackendDestroyedWhileInUse) {
  tw_backend* backend = nullptr;
  TW_ASSERT_OK(tw_backend_create_cpu(&backend));
  tw_tape* raw = nullptr;
  TW_ASSERT_OK(tw_tape_create(backend, &raw));
  TapeHandle tape(raw);
  const float v[2] = {-1.f, 3.f}, ones[2] = {1.f, 1.f};
  const std::int64_t shape[1] = {2};
  tw_buffer* seed = nullptr;
  TW_ASSERT_OK(tw_buffer_wrap(backend, const_cast<float*>(ones), sizeof ones, shape, 1, TW_FLOAT32, &seed));
  BufferHandle owned_seed(seed);
  TW_ASSERT_OK(tw_backend_destroy(backend));  // the tape and the buffer still hold it

  std::int64_t x = -1, y = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(raw, v, sizeof v, shape, 1, TW_FLOAT32, 1, &x));
  TW_ASSERT_OK(tw_tape_apply(raw, TW_OP_abs, &x, 1, nullptr, 0, &y));
  tw_gradients* g = nullptr;
  TW_ASSERT_OK(tw_tape_backward_buffer(raw, y, seed, TW_PATH_STAGED, 0, &g));
  tape.reset();  // the gradients outlive the tape too
  float dx[2] = {};
  TW_EXPECT_OK(tw_gradients_download(g, x, dx, sizeof dx));
  EXPECT_EQ(dx[0], -1.f);
  EXPECT_EQ(dx[1], 1.f);
  TW_EXPECT_OK(tw_gradients_destroy(g));
}

// --- zero-copy views and DLPack ---------------------------------------------------------------------------------

// A CPU backend (be) and a tape on it (raw), released after each test.
class CApiViews : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_ASSERT_OK(tw_backend_create_cpu(&be));
    backend.reset(be);
    TW_ASSERT_OK(tw_tape_create(be, &raw));
    tape.reset(raw);
  }
  tw_backend* be = nullptr;
  tw_tape* raw = nullptr;
  BackendHandle backend;
  TapeHandle tape;
};

TEST_F(CApiViews, WrappedLeafIsTheCallersMemory) {
  std::vector<double> data{1.0, -2.0, 4.0};
  const std::int64_t shape[1] = {3};
  std::int64_t x = -1;
  TW_ASSERT_OK(tw_tape_leaf_wrap(raw, data.data(), 24, shape, 1, TW_FLOAT64, 1, &x));
  std::int64_t count = -1;
  TW_ASSERT_OK(tw_backend_memory_stats(be, TW_TAG_VALUE, &count, nullptr));
  EXPECT_EQ(count, 0);  // borrowed, not allocated
  DLManagedTensor* view = nullptr;
  TW_ASSERT_OK(tw_tape_value_dlpack(raw, x, &view));
  EXPECT_EQ(view->dl_tensor.data, data.data());
  EXPECT_EQ(view->dl_tensor.ndim, 1);
  EXPECT_EQ(view->dl_tensor.shape[0], 3);
  EXPECT_EQ(view->dl_tensor.dtype.bits, 64);
  view->deleter(view);
  data[1] = 8.0;  // a view: the tape sees the caller's write
  std::int64_t y = -1;
  TW_ASSERT_OK(tw_tape_apply(raw, TW_OP_neg, &x, 1, nullptr, 0, &y));
  double out[3] = {};
  TW_ASSERT_OK(tw_tape_value_host(raw, y, out, sizeof out));
  EXPECT_EQ(out[1], -8.0);
}

// A caller-owned DLPack tensor over a vector, counting its deleter's calls.
struct OwnedTensor {
  DLManagedTensor managed{};
  std::vector<float> data;
  std::int64_t shape[1] = {0};
  int* deleted = nullptr;
  static OwnedTensor* make(std::vector<float> values, int* deleted) {
    auto* t = new OwnedTensor;
    t->data = std::move(values);
    t->shape[0] = static_cast<std::int64_t>(t->data.size());
    t->deleted = deleted;
    DLTensor& d = t->managed.dl_tensor;
    d.data = t->data.data();
    d.device = DLDevice{kDLCPU, 0};
    d.ndim = 1;
    d.dtype = DLDataType{kDLFloat, 32, 1};
    d.shape = t->shape;
    t->managed.manager_ctx = t;
    t->managed.deleter = [](DLManagedTensor* self) {
      auto* owner = static_cast<OwnedTensor*>(self->manager_ctx);
      ++*owner->deleted;
      delete owner;
    };
    return t;
  }
};

TEST_F(CApiViews, DlpackRoundTrip) {
  int deleted = 0;
  OwnedTensor* owned = OwnedTensor::make({0.5f, -1.5f, 2.f}, &deleted);
  {
    TapeHandle own_tape;  // this test's own tape (raw names it now), so that its release can be watched
    TW_ASSERT_OK(tw_tape_create(be, &raw));
    own_tape.reset(raw);
    std::int64_t x = -1, y = -1;
    TW_ASSERT_OK(tw_tape_leaf_dlpack(raw, &owned->managed, 1, &x));
    TW_ASSERT_OK(tw_tape_apply(raw, TW_OP_sqrt, &x, 1, nullptr, 0, &y));
    DLManagedTensor* view = nullptr;
    TW_ASSERT_OK(tw_tape_value_dlpack(raw, x, &view));
    EXPECT_EQ(view->dl_tensor.data, owned->data.data());
    view->deleter(view);
    // y's value out by DLPack and back in as a leaf of another tape: the same bits.
    DLManagedTensor* y_view = nullptr;
    TW_ASSERT_OK(tw_tape_value_dlpack(raw, y, &y_view));
    std::vector<float> y_host(3);
    TW_ASSERT_OK(tw_tape_value_host(raw, y, y_host.data(), 12));
    tw_tape* other = nullptr;
    TW_ASSERT_OK(tw_tape_create(be, &other));
    TapeHandle other_tape(other);
    std::int64_t back = -1;
    TW_ASSERT_OK(tw_tape_leaf_dlpack(other, y_view, 0, &back));
    EXPECT_EQ(c_value(other, back), bytes_of(y_host));
    // Gradients out by DLPack: moved, not copied.
    const float ones[3] = {1.f, 1.f, 1.f};
    tw_gradients* g = nullptr;
    TW_ASSERT_OK(tw_tape_backward_host(raw, y, ones, sizeof ones, TW_PATH_FUSED, 0, &g));
    GradientsHandle grads(g);
    std::vector<float> dx(3);
    TW_ASSERT_OK(tw_gradients_download(g, x, dx.data(), 12));
    std::int64_t live_before = 0, live_after = 0;
    TW_ASSERT_OK(tw_backend_memory_stats(be, TW_TAG_GRADIENT, &live_before, nullptr));
    DLManagedTensor* dx_tensor = nullptr;
    TW_ASSERT_OK(tw_gradients_dlpack(g, x, &dx_tensor));
    int has = 1;
    TW_EXPECT_OK(tw_gradients_has(g, x, &has));
    EXPECT_EQ(has, 0);
    EXPECT_EQ(std::memcmp(dx_tensor->dl_tensor.data, dx.data(), 12), 0);
    dx_tensor->deleter(dx_tensor);
    TW_ASSERT_OK(tw_backend_memory_stats(be, TW_TAG_GRADIENT, &live_after, nullptr));
    EXPECT_EQ(live_after, live_before - 1);
    EXPECT_EQ(deleted, 0);  // the tape owns the imported tensor
  }
  EXPECT_EQ(deleted, 1);  // released with the tape, once
}

TEST_F(CApiViews, FailedDlpackImportLeavesTheTensorWithTheCaller) {
  int deleted = 0;
  OwnedTensor* owned = OwnedTensor::make({1.f, 2.f}, &deleted);
  owned->managed.dl_tensor.dtype = DLDataType{kDLInt, 32, 1};
  std::int64_t id = -7;
  EXPECT_EQ(tw_tape_leaf_dlpack(raw, &owned->managed, 1, &id), TW_DTYPE_MISMATCH);
  tw_buffer* b = nullptr;
  EXPECT_EQ(tw_buffer_from_dlpack(be, &owned->managed, &b), TW_DTYPE_MISMATCH);
  owned->managed.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  owned->managed.dl_tensor.device = DLDevice{kDLCUDA, 0};
  EXPECT_EQ(tw_tape_leaf_dlpack(raw, &owned->managed, 1, &id), TW_BACKEND_MISMATCH);
  EXPECT_EQ(tw_tape_leaf_dlpack(raw, &owned->managed, 1, nullptr), TW_NULL_POINTER);
  EXPECT_EQ(deleted, 0);
  EXPECT_EQ(id, -7);
  EXPECT_EQ(b, nullptr);
  std::int64_t size = -1;
  TW_EXPECT_OK(tw_tape_size(raw, &size));
  EXPECT_EQ(size, 0);
  owned->managed.deleter(&owned->managed);  // still the caller's
  EXPECT_EQ(deleted, 1);
  // A DLPack buffer, on success, owns its tensor.
  OwnedTensor* seed = OwnedTensor::make({1.f}, &deleted);
  TW_ASSERT_OK(tw_buffer_from_dlpack(be, &seed->managed, &b));
  EXPECT_EQ(deleted, 1);
  TW_ASSERT_OK(tw_buffer_destroy(b));
  EXPECT_EQ(deleted, 2);
}

// A caller's DLPack tensor with every field settable (OwnedTensor's are always well formed).
struct RawTensor {
  DLManagedTensor managed{};
  std::vector<std::int64_t> shape, strides;
  int deleted = 0;
  RawTensor(void* data, std::vector<std::int64_t> dims) : shape(std::move(dims)) {
    DLTensor& t = managed.dl_tensor;
    t.data = data;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape.data();
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { static_cast<RawTensor*>(self->manager_ctx)->deleted += 1; };
  }
};

// Malformed tensors through both DLPack doors: the status, a message naming the field, no leaf,
// no buffer, and the tensor still the caller's.
TEST_F(CApiViews, MalformedDlpackTensorsAreRefusedNamingTheField) {
  float data[6] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  auto expect_refused = [&](RawTensor& t, tw_status want, const std::string& words) {
    std::int64_t id = -7;
    tw_buffer* buffer = nullptr;
    EXPECT_EQ(tw_tape_leaf_dlpack(raw, &t.managed, 1, &id), want) << words << ": " << tw_last_error();
    EXPECT_NE(std::string(tw_last_error()).find(words), std::string::npos) << tw_last_error();
    EXPECT_EQ(tw_buffer_from_dlpack(be, &t.managed, &buffer), want) << words << ": " << tw_last_error();
    EXPECT_NE(std::string(tw_last_error()).find(words), std::string::npos) << tw_last_error();
    EXPECT_EQ(id, -7);
    EXPECT_EQ(buffer, nullptr);
    EXPECT_EQ(t.deleted, 0);
    std::int64_t size = -1;
    TW_EXPECT_OK(tw_tape_size(raw, &size));
    EXPECT_EQ(size, 0);
  };
  RawTensor null_data(nullptr, {6});
  null_data.managed.dl_tensor.byte_offset = 4096;
  expect_refused(null_data, TW_INVALID_ARGUMENT, "data is NULL (byte_offset 4096)");
  RawTensor wrapping(data, {6});
  wrapping.managed.dl_tensor.byte_offset = std::uint64_t{1} << 63;
  expect_refused(wrapping, TW_INVALID_ARGUMENT, "byte_offset 9223372036854775808");
  RawTensor too_many_dims(data, std::vector<std::int64_t>(TW_MAX_NDIM + 1, 1));
  expect_refused(too_many_dims, TW_INVALID_SHAPE, "ndim 33 is outside [0, 32]");
  RawTensor hundred_dims(data, std::vector<std::int64_t>(100, 1));
  expect_refused(hundred_dims, TW_INVALID_SHAPE, "ndim 100");
  RawTensor unknown_device(data, {6});
  const std::int32_t device_type = 99;  // not a DLDeviceType: stored as the int a producer writes
  std::memcpy(&unknown_device.managed.dl_tensor.device.device_type, &device_type, sizeof device_type);
  expect_refused(unknown_device, TW_BACKEND_MISMATCH, "device_type 99");
}

// A tensor of no elements is contiguous whatever its strides (PyTorch gives empty tensors such
// strides), and its data may be NULL.
TEST_F(CApiViews, EmptyDlpackTensorWithAnyStridesIsALeaf) {
  RawTensor empty(nullptr, {0, 3});
  empty.strides = {1, 1};
  empty.managed.dl_tensor.strides = empty.strides.data();
  std::int64_t id = -1;
  TW_ASSERT_OK(tw_tape_leaf_dlpack(raw, &empty.managed, 1, &id));
  int ndim = 0;
  std::int64_t dims[TW_MAX_NDIM] = {};
  TW_EXPECT_OK(tw_tape_value_shape(raw, id, &ndim, dims, TW_MAX_NDIM));
  EXPECT_EQ(ndim, 2);
  EXPECT_EQ(dims[0], 0);
  EXPECT_EQ(dims[1], 3);
  std::size_t bytes = 1;
  TW_EXPECT_OK(tw_tape_value_bytes(raw, id, &bytes));
  EXPECT_EQ(bytes, 0u);
  tape.reset();
  EXPECT_EQ(empty.deleted, 1);
}

TEST_F(CApiViews, PendingNodesAndFlush) {
  const float v[2] = {1.f, 4.f};
  const std::int64_t shape[1] = {2};
  std::int64_t x = -1, y = -1, pending = -1;
  TW_ASSERT_OK(tw_tape_leaf_host(raw, v, sizeof v, shape, 1, TW_FLOAT32, 1, &x));
  TW_ASSERT_OK(tw_tape_apply(raw, TW_OP_sqrt, &x, 1, nullptr, 0, &y));
  TW_ASSERT_OK(tw_tape_pending(raw, &pending));
  EXPECT_EQ(pending, 1);  // small nodes are deferred to a program
  TW_ASSERT_OK(tw_tape_flush(raw));
  TW_ASSERT_OK(tw_tape_pending(raw, &pending));
  EXPECT_EQ(pending, 0);
  float out[2] = {};
  TW_ASSERT_OK(tw_tape_value_host(raw, y, out, sizeof out));
  EXPECT_EQ(out[1], 2.f);
}

}  // namespace
}  // namespace tapewise::testing
