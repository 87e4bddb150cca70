// proptest/tape_errors_test.cpp — bad input never corrupts the tape: invalid ids, mismatched
// shapes and dtypes, bad seeds, and allocation failure (injected) each return their error, leave
// the tape exactly as it was, and leak nothing. Runs on every backend present; and a machine
// without a GPU driver is told so.
#include <dlfcn.h>

#include <memory>
#include <thread>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

class TapeErrors : public PerBackend {};

TEST_P(TapeErrors, InvalidIdsAreRejectedAndTapeUnchanged) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host<float>({1, 2, 3})));
  const Snapshot before = snapshot(t);
  for (NodeId bad : {NodeId(-1), NodeId(1), NodeId(99)}) {
    auto r = t.sin(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::InvalidNodeId);
    EXPECT_NE(r.error().message.find("sin"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(std::to_string(bad)), std::string::npos) << r.error().message;
    auto r2 = t.add(x, bad);
    ASSERT_FALSE(r2);
    EXPECT_EQ(r2.error().code, ErrorCode::InvalidNodeId);
    EXPECT_EQ(snapshot(t), before);
  }
  auto v = t.value(5);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ErrorCode::InvalidNodeId);
  for (NodeId bad : {NodeId(-1), NodeId(1), std::numeric_limits<NodeId>::min()}) {
    auto n = t.node(bad);  // an error, not std::out_of_range
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().code, ErrorCode::InvalidNodeId);
  }
  ASSERT_TRUE(t.node(x));
  EXPECT_TRUE(must(t.node(x))->requires_grad);
}

// An id is valid only on the tape that recorded it: every other tape refuses it, at every door that
// takes an id, naming both tapes, and stays as it was; so do gradients of another tape.
TEST_P(TapeErrors, AnotherTapesIdIsRefusedNamingBothTapes) {
  Tape t1(backend), t2(backend);
  const NodeId a = must(t1.leaf(host<float>({1, 2, 3})));
  const NodeId b = must(t2.leaf(host<float>({4, 5, 6})));
  ASSERT_NE(t1.serial(), t2.serial());
  EXPECT_EQ(node_position(a), node_position(b));  // the same position: the old ids were both 0
  EXPECT_EQ(node_tape(a), t1.serial());
  const NodeId y2 = must(t2.sin(b));
  const std::string both = "of tape " + std::to_string(t1.serial()) + " used on tape " + std::to_string(t2.serial());
  const Snapshot before = snapshot(t2);
  const std::size_t pending = t2.pending();
  const HostArray seed = host<float>({1, 1, 1});
  const NodeId wanted[1] = {a};
  const NodeId ab[2] = {b, a};
  std::vector<Error> errors;
  auto keep = [&](auto r) {
    ASSERT_FALSE(r) << "an id of tape " << t1.serial() << " was accepted by tape " << t2.serial();
    errors.push_back(r.error());
  };
  keep(t2.sin(a));
  keep(t2.apply(Op::add, ab));
  keep(t2.value(a));
  keep(t2.value_buffer(a));
  keep(t2.node(a));
  keep(t2.backward(a, seed));
  keep(t2.backward_dense(a, seed));
  keep(t2.backward(y2, seed, wanted));
  for (const Error& e : errors) {
    EXPECT_EQ(e.code, ErrorCode::InvalidNodeId);
    EXPECT_NE(e.message.find(both), std::string::npos) << e.message;
  }
  EXPECT_EQ(snapshot(t2), before);
  EXPECT_EQ(t2.pending(), pending);
  EXPECT_EQ(must(t2.value(b)).to_vector<float>(), (std::vector<float>{4, 5, 6}));
  // Gradients answer for their own tape's ids only.
  const Gradients g = must(t2.backward(y2, seed));
  EXPECT_TRUE(g.has(b));
  EXPECT_FALSE(g.has(a));
  EXPECT_EQ(g.tape_serial(), t2.serial());
  auto h = g.host(a);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code, ErrorCode::InvalidNodeId);
  EXPECT_NE(h.error().message.find(both), std::string::npos) << h.error().message;
  // A moved-to tape takes its source's serial, and so its ids.
  Tape t3 = std::move(t1);
  EXPECT_EQ(must(t3.value(a)).to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST_P(TapeErrors, ShapeAndDTypeMismatchesAreRejected) {
  Tape t(backend);
  const NodeId a = must(t.leaf(host<float>({1, 2, 3})));
  const NodeId b = must(t.leaf(host<float>({1, 2})));
  const NodeId c = must(t.leaf(host<double>({1, 2, 3})));
  const Snapshot before = snapshot(t);
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min}) {
    const NodeId ab[2] = {a, b};
    auto r = t.apply(op, ab);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::ShapeMismatch);
    EXPECT_NE(r.error().message.find("[3]"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("[2]"), std::string::npos) << r.error().message;
    const NodeId ac[2] = {a, c};
    auto r2 = t.apply(op, ac);
    ASSERT_FALSE(r2);
    EXPECT_EQ(r2.error().code, ErrorCode::DTypeMismatch);
    EXPECT_NE(r2.error().message.find("float64"), std::string::npos) << r2.error().message;
    EXPECT_EQ(snapshot(t), before);
  }
  const NodeId one[1] = {a};
  auto arity = t.apply(Op::add, one);
  ASSERT_FALSE(arity);
  EXPECT_EQ(arity.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(snapshot(t), before);
}

TEST_P(TapeErrors, BadSeedsAndOutputIdsAreRejected) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host<float>({1, 2, 3})));
  const NodeId y = must(t.exp(x));
  const Snapshot before = snapshot(t);
  auto wrong_shape = t.backward(y, host<float>({1, 1}));
  ASSERT_FALSE(wrong_shape);
  EXPECT_EQ(wrong_shape.error().code, ErrorCode::SeedShapeMismatch);
  auto wrong_dtype = t.backward(y, host<double>({1, 1, 1}));
  ASSERT_FALSE(wrong_dtype);
  EXPECT_EQ(wrong_dtype.error().code, ErrorCode::SeedDTypeMismatch);
  auto wrong_out = t.backward_dense(7, host<float>({1, 1, 1}));
  ASSERT_FALSE(wrong_out);
  EXPECT_EQ(wrong_out.error().code, ErrorCode::InvalidNodeId);
  EXPECT_EQ(snapshot(t), before);
  auto other = backend->kind() == BackendKind::cpu ? make_cpu_backend() : backend;
  if (other != backend) {
    auto foreign = other->upload(host<float>({1, 1, 1}));
    ASSERT_TRUE(foreign) << foreign.error().str();
    auto r = t.leaf(std::move(*foreign));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::BackendMismatch);
    EXPECT_EQ(snapshot(t), before);
  }
}

TEST_P(TapeErrors, InvalidShapesAndHostSizesAreRejected) {
  Tape t(backend);
  HostArray negative;
  negative.shape = Shape{-2};
  auto r = t.leaf(negative);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidShape);
  HostArray short_data = host<float>({1, 2});
  short_data.shape = Shape{3};
  auto r2 = t.leaf(short_data);
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(t.size(), 0u);
  HostArray huge;
  huge.shape = Shape{std::int64_t(1) << 40, std::int64_t(1) << 40};
  auto r3 = backend->allocate(huge.shape, DType::float32, AllocTag::value);
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().code, ErrorCode::InvalidShape);
}

// An allocation failing at every possible point of recording and backward: a clean OutOfMemory,
// the tape unchanged, and nothing leaked — staged VJPs (many workspace buffers) included.
TEST_P(TapeErrors, InjectedAllocationFailuresLeaveNothingBehind) {
  for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
    for (Op op : {Op::div, Op::safeLog, Op::gelu, Op::max, Op::add}) {
      Tape t(backend);
      const NodeId a = must(t.leaf(host<float>({0.5f, 2.0f, -3.0f})));
      const NodeId b = must(t.leaf(host<float>({1.5f, -2.0f, 4.0f})));
      const Snapshot before_record = snapshot(t);
      inject_allocation_failure(*backend, 1);
      const NodeId ab[2] = {a, b};
      const int arity = op_info(op).arity;
      auto failed = t.apply(op, {ab, static_cast<std::size_t>(arity)}, default_scalars(op_info(op)));
      ASSERT_FALSE(failed);
      EXPECT_EQ(failed.error().code, ErrorCode::OutOfMemory);
      EXPECT_EQ(snapshot(t), before_record);
      const NodeId y = must(t.apply(op, {ab, static_cast<std::size_t>(arity)}, default_scalars(op_info(op))));
      const NodeId z = must(t.mul(y, a));
      const Snapshot before = snapshot(t);
      int failures = 0;
      for (int nth = 1;; ++nth) {
        inject_allocation_failure(*backend, nth);
        auto grads = t.backward(z, host<float>({1, -1, 2}), path);
        inject_allocation_failure(*backend, 0);
        if (grads) break;
        ++failures;
        EXPECT_EQ(grads.error().code, ErrorCode::OutOfMemory) << grads.error().str();
        EXPECT_EQ(snapshot(t), before) << op_name(op) << " failing allocation " << nth;
      }
      // A fused backward over small tensors is one program: the seed and one arena are its only
      // allocations; the per-node paths allocate per contribution and workspace.
      const bool one_program = path == VjpPath::fused && t.options().program_threshold > 0;
      EXPECT_GE(failures, one_program ? 2 : 3) << op_name(op);
      EXPECT_EQ(snapshot(t), before);
    }
  }
}

TEST_P(TapeErrors, AnOpOutsideTheTableIsRejected) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host<float>({1, 2, 3})));
  const Snapshot before = snapshot(t);
  const NodeId ids[2] = {x, x};
  for (int bad : {-1, kOpCount, 200}) {
    auto r = t.apply(static_cast<Op>(bad), ids);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(r.error().message.find(std::to_string(bad)), std::string::npos) << r.error().message;
    EXPECT_EQ(snapshot(t), before);
  }
}

// tape.hpp's one stated exception to "a failing call changes nothing": the pending forwards a
// backward flushed before failing have run. Values and statistics are untouched.
TEST_P(TapeErrors, AFailedStagedBackwardOnlyFlushes) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host<float>({0.5f, 2.0f, -3.0f})));
  const NodeId y = must(t.tanh(must(t.sin(x))));
  const NodeId z = must(t.safeLog(y, 1e-6));
  const bool deferred = t.options().program_threshold > 0;
  EXPECT_EQ(t.pending(), deferred ? 3u : 0u);
  const Snapshot before = snapshot(t);
  inject_allocation_failure(*backend, 4);  // inside the staged VJPs' workspace
  auto grads = t.backward(z, host<float>({1, 1, 1}), VjpPath::staged);
  inject_allocation_failure(*backend, 0);
  ASSERT_FALSE(grads);
  EXPECT_EQ(grads.error().code, ErrorCode::OutOfMemory);
  EXPECT_EQ(snapshot(t), before);
  EXPECT_EQ(t.pending(), 0u);
  Tape fresh(backend);
  const NodeId fx = must(fresh.leaf(host<float>({0.5f, 2.0f, -3.0f})));
  const NodeId fz = must(fresh.safeLog(must(fresh.tanh(must(fresh.sin(fx)))), 1e-6));
  EXPECT_EQ(must(t.value(z)).bytes, must(fresh.value(fz)).bytes);
}

TEST_P(TapeErrors, HostArraysTooLargeToAddressAreRejectedWithTheirShape) {
  Tape t(backend);
  HostArray huge;
  huge.shape = Shape{std::int64_t(1) << 62};
  auto r = t.leaf(huge);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidShape);
  EXPECT_NE(r.error().message.find("4611686018427387904"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("needs 0 bytes"), std::string::npos) << r.error().message;
  EXPECT_EQ(t.size(), 0u);
}

TEST_P(TapeErrors, EverythingIsReleasedWithTheTapeAndGradients) {
  const MemoryStats empty = backend->stats();
  {
    Tape t(backend);
    const NodeId x = must(t.leaf(host<float>({1, 2, 3, 4, 5})));
    const NodeId y = must(t.tanh(must(t.sin(x))));
    auto grads = t.backward(y, host<float>({1, 1, 1, 1, 1}), VjpPath::staged);
    ASSERT_TRUE(grads) << grads.error().str();
    EXPECT_EQ(backend->stats().count(AllocTag::workspace), empty.count(AllocTag::workspace));
    EXPECT_EQ(backend->stats().count(AllocTag::value), empty.count(AllocTag::value) + 3);
    EXPECT_GT(backend->stats().count(AllocTag::gradient), empty.count(AllocTag::gradient));
  }
  EXPECT_EQ(backend->stats(), empty);
}

// What a tape releases in batches (its values, a program backward's unwanted slots) and the node
// storage a thread keeps for its next tape: tapes alive together, ended in either order or on another
// thread, a gradient outliving its tape, and a borrowed leaf among the values.
TEST_P(TapeErrors, AMovedFromTapeRefusesWorkWithoutCrashing) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host<float>({1, 2, 3})));
  Tape moved_to(std::move(t));
  EXPECT_EQ(moved_to.size(), 1u);
  EXPECT_EQ(t.size(), 0u);  // NOLINT(bugprone-use-after-move): what a moved-from tape does is the test
  for (auto leaf : {t.leaf(host<float>({1})), t.leaf(must(backend->upload(host<float>({1}))))}) {
    ASSERT_FALSE(leaf);
    EXPECT_EQ(leaf.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(leaf.error().message.find("moved from"), std::string::npos) << leaf.error().message;
  }
  auto fails_with = [](const auto& result, ErrorCode code) { return !result && result.error().code == code; };
  EXPECT_TRUE(fails_with(t.sin(x), ErrorCode::InvalidNodeId));  // it has no nodes
  EXPECT_TRUE(fails_with(t.value(x), ErrorCode::InvalidNodeId));
  EXPECT_TRUE(fails_with(t.backward(x, host<float>({1, 1, 1})), ErrorCode::InvalidArgument));  // no backend to upload to
  EXPECT_TRUE(fails_with(t.backward_dense(x, host<float>({1, 1, 1})), ErrorCode::InvalidArgument));
  EXPECT_TRUE(t.flush());
  t = std::move(moved_to);  // a moved-from tape takes a tape again
  EXPECT_TRUE(t.sin(x));
}

TEST_P(TapeErrors, TapesEndedInAnyOrderOrThreadReleaseEverything) {
  const MemoryStats empty = backend->stats();
  auto record = [&](Tape& t, int nodes) {
    NodeId h = must(t.leaf(host<float>({0.5f, -1.0f, 2.0f})));
    for (int i = 0; i < nodes; ++i) h = must(i % 2 ? t.sin(h) : t.tanh(h));
    return h;
  };
  Buffer callers = must(backend->upload(host<float>({1.0f, 2.0f, 3.0f})));  // memory the tapes borrow
  Buffer held;
  {
    auto first = std::make_unique<Tape>(backend);
    auto second = std::make_unique<Tape>(backend);
    const NodeId out = record(*first, 600);
    record(*second, 300);
    const NodeId borrowed = must(second->leaf(must(backend->wrap(callers.data(), Shape{3}, DType::float32))));
    EXPECT_EQ(second->size(), 302u);
    const NodeId leaf = first->id_at(0);
    auto grads = first->backward(out, host<float>({1, 1, 1}), std::span<const NodeId>(&leaf, 1));
    ASSERT_TRUE(grads) << grads.error().str();
    held = grads->take(leaf);
    ASSERT_TRUE(held);
    first.reset();  // the larger storage is kept for this thread's next tape
    Tape third(backend);
    EXPECT_EQ(third.size(), 0u) << "a tape starts empty, whatever storage it reuses";
    record(third, 10);
    EXPECT_EQ(third.size(), 11u);
    std::thread([t = std::move(second)]() mutable { t.reset(); }).join();
    (void)borrowed;
  }
  ASSERT_TRUE(backend->synchronize());
  EXPECT_EQ(backend->stats().count(AllocTag::value), empty.count(AllocTag::value) + 1) << "the borrowed memory's owner";
  EXPECT_EQ(backend->stats().count(AllocTag::gradient), empty.count(AllocTag::gradient) + 1) << "the gradient taken";
  auto kept = backend->download(held);
  ASSERT_TRUE(kept) << kept.error().str();
  EXPECT_EQ(kept->numel(), 3);
  held.reset();
  EXPECT_EQ(must(backend->download(callers)).bytes, host<float>({1.0f, 2.0f, 3.0f}).bytes)
      << "a borrowed leaf's memory is the caller's";
  callers.reset();
  EXPECT_EQ(backend->stats(), empty);
}

// A recorded value does not count itself an owner of its backend: the tape holds the backend and
// releases its values first, so recording and releasing touch no shared count. The backend's use
// count stays put while a tape records; a tape assigned over one that held the last reference to its
// backend releases that tape's values before the backend goes; gradients, which outlive their tapes,
// hold their backend themselves.
TEST_P(TapeErrors, RecordedValuesTakeNoCountOfTheBackendAndGoBeforeIt) {
  auto fresh_backend = [&] { return GetParam() == BackendKind::cpu ? make_cpu_backend() : must(make_cuda_backend()); };
  Gradients grads;
  NodeId x = -1;
  std::weak_ptr<Backend> gradients_backend;
  {
    std::shared_ptr<Backend> be = fresh_backend();
    gradients_backend = be;
    Tape t(be);
    x = must(t.leaf(host<float>({0.5f, -1.0f, 2.0f})));
    const long counted = be.use_count();
    NodeId h = x;
    for (int i = 0; i < 20; ++i) h = must(t.sin(h));
    EXPECT_EQ(be.use_count(), counted) << "twenty values recorded, no count taken";
    grads = must(t.backward(h, host<float>({1, 1, 1})));
  }
  ASSERT_FALSE(gradients_backend.expired()) << "the gradients hold their backend";
  EXPECT_EQ(must(grads.host(x)).numel(), 3);
  grads = Gradients();
  EXPECT_TRUE(gradients_backend.expired());

  std::weak_ptr<Backend> replaced_backend;
  Tape assigned_over(fresh_backend());  // the only reference to its backend
  replaced_backend = assigned_over.backend().shared_from_this();
  NodeId h = must(assigned_over.leaf(host<float>({1, 2, 3})));
  for (int i = 0; i < 20; ++i) h = must(assigned_over.tanh(h));
  const MemoryStats before = backend->stats();
  Tape replacement(backend);
  const NodeId y = must(replacement.leaf(host<float>({4, 5, 6})));
  assigned_over = std::move(replacement);  // 21 values released into their backend, then it goes
  EXPECT_TRUE(replaced_backend.expired());
  EXPECT_EQ(must(assigned_over.value(y)).bytes, host<float>({4, 5, 6}).bytes);
  EXPECT_EQ(backend->stats().count(AllocTag::value), before.count(AllocTag::value) + 1);
}

// Shapes hold up to Dims::kInline dims in place and more on the heap; both read, copy, move and
// compare alike, and a tape runs on either.
TEST(ShapeDims, InlineAndSpilledDimsBehaveAlike) {
  for (std::size_t rank : {std::size_t{0}, std::size_t{1}, Dims::kInline, Dims::kInline + 1, std::size_t{kMaxNdim + 3}}) {
    Shape built;
    for (std::size_t d = 0; d < rank; ++d) built.dims.push_back(static_cast<std::int64_t>(d % 3 + 1));
    const std::vector<std::int64_t> as_vector = built.dims;
    ASSERT_EQ(as_vector.size(), rank);
    EXPECT_EQ(Shape(as_vector), built);
    Shape copied = built;
    EXPECT_EQ(copied, built);
    Shape moved = std::move(copied);
    EXPECT_EQ(moved, built);
    EXPECT_TRUE(copied.dims.empty()) << "moved from";
    copied = moved;  // assigned after being moved from
    EXPECT_EQ(copied, built);
    if (rank > 0) {
      copied.dims[rank - 1] += 1;
      EXPECT_FALSE(copied == built);
    }
    Shape longer = built;
    longer.dims.push_back(1);
    EXPECT_FALSE(longer == built);
    EXPECT_EQ(built.valid(), rank <= static_cast<std::size_t>(kMaxNdim));
    if (!built.valid()) {
      auto why = built.check();
      ASSERT_FALSE(why);
      EXPECT_NE(why.error().message.find(std::to_string(rank) + " dims"), std::string::npos) << why.error().message;
    }
  }
  auto be = make_cpu_backend();
  Tape t(be);
  const Shape seven{1, 2, 1, 2, 1, 1, 2};
  HostArray x = HostArray::of<float>(seven, std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.5f, 1.5f, 0.0f});
  const NodeId leaf = must(t.leaf(x));
  const NodeId y = must(t.sin(must(t.mul(leaf, leaf))));
  auto value = t.value(y);
  ASSERT_TRUE(value) << value.error().str();
  EXPECT_EQ(value->shape, seven);
  auto grads = t.backward(y, HostArray::of<float>(seven, std::vector<float>(8, 1.0f)));
  ASSERT_TRUE(grads) << grads.error().str();
  EXPECT_EQ(must(grads->host(leaf)).shape, seven);
}

TEST_P(TapeErrors, EmptyTensorsWork) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host<float>({})));
  const NodeId y = must(t.gelu(x));
  const NodeId z = must(t.max(y, x));
  auto v = t.value(z);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->numel(), 0);
  auto grads = t.backward(z, host<float>({}));
  ASSERT_TRUE(grads) << grads.error().str();
  EXPECT_TRUE(grads->has(x));
}

TW_INSTANTIATE_PER_BACKEND(TapeErrors);

// The CUDA runtime reports a machine with no NVIDIA driver as cudaErrorInsufficientDriver ("driver
// version is insufficient"), which sends the user to update a driver that is not there. CI machines
// have a CUDA build and no driver, so this test has something to check there.
TEST(CudaAvailability, AMachineWithoutADriverIsToldSo) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  if (why.find("TAPEWISE_CUDA=OFF") != std::string::npos) GTEST_SKIP() << why;
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
    GTEST_SKIP() << "an NVIDIA driver is installed (libcuda.so.1 loads): " << why;
  }
  EXPECT_NE(why.find("no NVIDIA driver is installed"), std::string::npos) << why;
  EXPECT_EQ(why.find("insufficient"), std::string::npos) << why;
}

}  // namespace
}  // namespace tapewise::testing
