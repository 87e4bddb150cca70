// proptest/compiled_pieces_test.cpp — tape programs' pieces compiled at run time. On the host: the
// runs a piece is cut into cover its steps in order and repeat only equal steps, and the source written
// from them names each step's own code and sources, in the piece's order (the one thing a compiled
// piece fixes that the interpreter reads at run time). With CUDA: NVRTC compiles that source for every
// dtype and launch shape (no GPU needed), and on a GPU, tapes of repeated random blocks of every node
// give the per-node path's bits with the compiled kernels running.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "kernels/piece_source.hpp"
#include "test_support.hpp"
#if TAPEWISE_HAS_CUDA
#include "backends/compiled_pieces.hpp"
#endif

namespace tapewise::detail {
// How RapidCheck shows a step's key in a counterexample: code:sources.
inline void showValue(const StepKey& k, std::ostream& os) {
  os << static_cast<int>(k.code) << ":" << k.sources << ":" << static_cast<int>(k.writes);
}
}  // namespace tapewise::detail

namespace tapewise::testing {
namespace {

using detail::compress_piece;
using detail::PieceLaunch;
using detail::PieceRun;
using detail::piece_source;
using detail::Step;
using detail::StepKey;

// A step with only what a piece's runs and source read: its code, sources and slot writes (a buffer
// where the writes say so: one byte no kernel touches).
Step keyed_step(StepKey key) {
  static std::byte buffer;
  Step s{};
  s.code = key.code;
  s.sources = key.sources;
  for (int k = 0; k < 2; ++k) {
    s.write[k] = detail::slot_write(key.writes, k);
    if (detail::slot_has_buffer(key.writes, k)) s.out[k] = &buffer;
  }
  return s;
}

std::vector<Step> keyed_steps(const std::vector<StepKey>& keys) {
  std::vector<Step> steps;
  for (const StepKey& k : keys) steps.push_back(keyed_step(k));
  return steps;
}

// Keys of a few kinds, so that blocks repeat; codes and sources in their real ranges.
rc::Gen<StepKey> small_key() {
  std::vector<StepKey> kinds;
  for (int code : {kOpCount, kOpCount + 5, kOpCount + 10, 3})
    for (unsigned source : {detail::source_field(detail::kIn0, detail::kFromMemory),
                            detail::source_field(detail::kIn0, detail::register_source(1, 0)),
                            detail::source_field(detail::kIn0, detail::register_source(3, 1))})
      for (unsigned writes : {0u, 0x11u, 0x37u})  // none; a store with a buffer; accumulate, store, both buffers
        kinds.push_back({static_cast<std::uint8_t>(code), static_cast<std::uint16_t>(source), static_cast<std::uint8_t>(writes)});
  return rc::gen::elementOf(kinds);
}

// A draw in [lo, hi], uniform whatever the test's size (RapidCheck scales inRange by it).
int draw(int lo, int hi) { return *rc::gen::resize(100, rc::gen::inRange(lo, hi + 1)); }

// Up to `segments` segments, each a random block (up to `block` steps) repeated up to `repeats`
// times: the shape of a chain's or a graph's program, and noise.
std::vector<StepKey> draw_blocky_keys(int segments, int block, int repeats) {
  std::vector<StepKey> keys;
  for (int s = draw(1, segments); s > 0; --s) {
    const auto keys_of_block = *rc::gen::container<std::vector<StepKey>>(static_cast<std::size_t>(draw(1, block)), small_key());
    for (int r = draw(1, repeats); r > 0; --r) keys.insert(keys.end(), keys_of_block.begin(), keys_of_block.end());
  }
  return keys;
}

RC_GTEST_PROP(PieceSource, RunsCoverTheStepsInOrderAndRepeatOnlyEqualSteps, ()) {
  const std::vector<StepKey> keys = draw_blocky_keys(60, 20, 12);
  const std::vector<Step> steps = keyed_steps(keys);
  const std::vector<PieceRun> runs = compress_piece(steps);
  RC_ASSERT(runs.front().first == 0 && runs.front().length == 1 && runs.front().repeats == 1);
  int at = 0;
  for (const PieceRun& run : runs) {
    RC_ASSERT(run.first == at);
    RC_ASSERT(run.length >= 1 && run.repeats >= 1);
    if (run.repeats > 1) RC_ASSERT(run.length <= detail::kMaxBlockLength);
    for (int r = 1; r < run.repeats; ++r)
      for (int j = 0; j < run.length; ++j) RC_ASSERT(keys[run.first + r * run.length + j] == keys[run.first + j]);
    at += run.length * run.repeats;
  }
  RC_ASSERT(at == static_cast<int>(keys.size()));
}

// A block repeated is written out as a loop, whatever its phase: at most its length three times
// over (the loop, its last repeat, the rest of a block), the steps that would reach ahead past the
// loop's run, and step 0.
RC_GTEST_PROP(PieceSource, ARepeatedBlockIsWrittenOutOnce, ()) {
  const int block_length = draw(1, detail::kMaxBlockLength);
  const auto block = *rc::gen::container<std::vector<StepKey>>(static_cast<std::size_t>(block_length), small_key());
  const int repeats = draw(3, 60);
  const int reach = *rc::gen::element(1, detail::kHistory, detail::kOneLanePrefetchAhead);  // four lanes; one, without and with prefetches
  std::vector<StepKey> keys;
  for (int r = 0; r < repeats; ++r) keys.insert(keys.end(), block.begin(), block.end());
  const int length = static_cast<int>(block.size());
  RC_ASSERT(detail::written_steps(compress_piece(keyed_steps(keys)), reach) <= 3 * length + reach);
}

// The steps a piece's source runs, in order, as (index, code, sources, writes), read back from the source
// text: straight-line steps name their index, a loop's steps an offset from `b`, which the loop's
// head defines. Also checks that each step loads for the step `ahead.load` after it and is prefetched
// for the step `ahead.prefetch` after it, with those steps' sources, and that only steps that near the
// piece's end reach for none.
struct Ran {
  int index;
  int code;
  unsigned sources;
  unsigned writes;
};
std::vector<Ran> steps_the_source_runs(const std::string& source, const std::vector<Step>& steps, detail::Lookahead ahead) {
  const std::regex loop_head(R"(for \(int r = 0; r < (\d+); \+\+r\) \{)");
  const std::regex base(R"(const Step\* b = s \+ (\d+) \+ (\d+) \* r;)");
  const std::regex step_line(R"((tail_step|step)<(\d+), (\d+)u, (\d+)u(?:, (\d+)u)?>\(p, ([sb])\[(\d+)\](?:, ([sb])\[(\d+)\])?\);)");
  const std::regex prefetch_line(R"(p\.prefetch\(load_plan<Index>\(([sb])\[(\d+)\], (\d+)u\)\);)");
  const int count = static_cast<int>(steps.size());
  auto sources_at = [&](int k) { return steps[static_cast<std::size_t>(k)].sources; };
  std::vector<Ran> ran;
  int prefetched = -1;  // the step the line before prefetched for, if any
  // One line of the source, its indices offset by `shift` (a loop's b), else as written (s).
  auto take = [&](const std::string& text, bool in_loop, int shift) {
    std::smatch m;
    if (std::regex_search(text, m, prefetch_line)) {
      RC_ASSERT((m[1] == "b") == in_loop);
      prefetched = shift + std::stoi(m[2]);
      RC_ASSERT(prefetched < count && std::stoul(m[3]) == sources_at(prefetched));
      return;
    }
    RC_ASSERT(std::regex_search(text, m, step_line));
    RC_ASSERT((m[6] == "b") == in_loop);
    const int index = shift + std::stoi(m[7]);
    ran.push_back({index, std::stoi(m[2]), static_cast<unsigned>(std::stoul(m[3])), static_cast<unsigned>(std::stoul(m[4]))});
    if (m[1] == "step") {
      const int loaded = shift + std::stoi(m[9]);
      RC_ASSERT(loaded == index + ahead.load && loaded < count);
      RC_ASSERT(std::stoul(m[5]) == sources_at(loaded));
    } else {
      RC_ASSERT(index + ahead.load >= count);
    }
    const bool prefetches = ahead.prefetch > 0 && index + ahead.prefetch < count;
    RC_ASSERT(prefetched == (prefetches ? index + ahead.prefetch : -1));
    prefetched = -1;
  };
  std::istringstream in(source);
  std::string line;
  std::vector<std::string> body;  // the current loop's lines
  int loop_count = -1, first = 0, length = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, loop_head)) {
      loop_count = std::stoi(m[1]);
      body.clear();
    } else if (loop_count >= 0 && std::regex_search(line, m, base)) {
      first = std::stoi(m[1]);
      length = std::stoi(m[2]);
    } else if (loop_count >= 0 && line == "    }") {
      for (int r = 0; r < loop_count; ++r)
        for (const std::string& text : body) take(text, true, first + length * r);
      loop_count = -1;
    } else if (std::regex_search(line, m, step_line) || std::regex_search(line, m, prefetch_line)) {
      if (loop_count >= 0) body.push_back(line);
      else take(line, false, 0);
    }
  }
  return ran;
}

RC_GTEST_PROP(PieceSource, TheSourceRunsEachStepWithItsOwnCodeAndSources, ()) {
  std::vector<StepKey> keys = draw_blocky_keys(3, 8, 60);
  while (keys.size() < static_cast<std::size_t>(detail::kMinCompiledSteps)) {
    const std::vector<StepKey> again = keys;
    keys.insert(keys.end(), again.begin(), again.end());
  }
  std::vector<Step> steps = keyed_steps(keys);
  for (Step& s : steps) s.numel = 100;
  const int lanes = *rc::gen::element(1, 4);  // one lane loads kHistory steps ahead, four one step
  const PieceLaunch launch{DType::float32, lanes, detail::kStepsPerLaunch, false, lanes == 1 && *rc::gen::arbitrary<bool>()};
  const detail::Lookahead ahead = detail::lookahead(launch);
  RC_TAG(launch.prefetch ? "prefetches" : "no prefetch");
  const auto source = piece_source(steps, 100, 100, launch);
  const bool regular = detail::written_steps(compress_piece(steps), ahead.reach()) <= detail::kMaxWrittenSteps;
  RC_ASSERT(source.has_value() == regular);
  RC_PRE(regular);
  RC_TAG(detail::compress_piece(steps).size() < steps.size() / 4 ? "repeats" : "few repeats");
  const std::vector<Ran> ran = steps_the_source_runs(*source, steps, ahead);
  RC_ASSERT(ran.size() == steps.size());
  for (std::size_t k = 0; k < ran.size(); ++k) {
    RC_ASSERT(ran[k].index == static_cast<int>(k));
    RC_ASSERT(ran[k].code == steps[k].code);
    RC_ASSERT(ran[k].sources == steps[k].sources);
    RC_ASSERT(ran[k].writes == detail::writes_of(steps[k]));
  }
  // The steps before the first to load for, loaded before it runs: step 0 all from memory, the rest
  // by their sources.
  RC_ASSERT(source->find("load_plan<Index>(s[0], " + std::to_string(steps[0].sources) + "u)") != std::string::npos);
  for (int d = 1; d < ahead.load; ++d)
    RC_ASSERT(source->find("p.load_ahead(" + std::to_string(d) + ", load_plan<Index>(s[" + std::to_string(d) + "], " +
                           std::to_string(steps[static_cast<std::size_t>(d)].sources) + "u));") != std::string::npos);
  RC_ASSERT(source->find("p.load_ahead(" + std::to_string(ahead.load)) == std::string::npos);
}

TEST(PieceSource, PiecesTheInterpreterKeeps) {
  const PieceLaunch launch{DType::float32, 1, detail::kStepsPerLaunch, false};
  std::vector<Step> chain;
  const auto from_previous = static_cast<std::uint16_t>(detail::source_field(detail::kIn0, detail::register_source(1, 0)));
  for (int i = 0; i < 100; ++i) chain.push_back(keyed_step({static_cast<std::uint8_t>(i % 5), from_previous, 0x10}));
  EXPECT_TRUE(piece_source(chain, 1000, 1000, launch).has_value());
  EXPECT_FALSE(piece_source(std::span<const Step>(chain).first(detail::kMinCompiledSteps - 1), 1000, 1000, launch))
      << "too short";
  EXPECT_FALSE(piece_source(chain, 1000, 999, launch)) << "steps of different lengths";
  EXPECT_FALSE(piece_source(chain, std::int64_t{1} << 30, std::int64_t{1} << 30, launch)) << "past 32-bit indices";
  std::vector<Step> irregular;  // no block repeats: every step different
  for (int i = 0; i < 100; ++i) irregular.push_back(keyed_step({static_cast<std::uint8_t>(i % 96), static_cast<std::uint16_t>(i), 0}));
  EXPECT_FALSE(piece_source(irregular, 1000, 1000, launch)) << "too irregular";
  EXPECT_TRUE(compress_piece({}).empty());
  EXPECT_FALSE(piece_source({}, 0, 0, launch)) << "no steps";
}

#if TAPEWISE_HAS_CUDA
// A chain's forward steps (sin, tanh, sigmoid, scale, relu: each takes the step before's value from
// its register) and its backward (each VJP takes g from its register and its input from memory).
std::vector<Step> chain_steps(bool backward) {
  const Op ops[] = {Op::sin, Op::tanh, Op::sigmoid, Op::scale, Op::relu};
  std::vector<Step> steps;
  for (int i = 0; i < 60; ++i) {
    const int op = static_cast<int>(ops[i % 5]);
    steps.push_back(keyed_step(backward ? StepKey{static_cast<std::uint8_t>(kOpCount + op),
                                                  static_cast<std::uint16_t>(detail::source_field(detail::kIn0, detail::kFromMemory) |
                                                                              detail::source_field(detail::kGrad, detail::register_source(1, 0))),
                                                  std::uint8_t{0x11}}
                                        : StepKey{static_cast<std::uint8_t>(op),
                                                  static_cast<std::uint16_t>(detail::source_field(detail::kIn0, detail::register_source(1, 0))),
                                                  std::uint8_t{0x10}}));
  }
  return steps;
}

// One lane loads kHistory steps ahead, and from kPrefetchFrom elements prefetches into L1 further
// ahead; four lanes load one step ahead and never prefetch (a lane past a step's numel has no operand).
TEST(PieceSource, OneLanePiecesLoadAheadAndPrefetchFromTheirThreshold) {
  EXPECT_FALSE(detail::piece_prefetches(1, detail::kPrefetchFrom - 1));
  EXPECT_TRUE(detail::piece_prefetches(1, detail::kPrefetchFrom));
  EXPECT_TRUE(detail::piece_prefetches(1, std::int64_t{1} << 16));  // the largest one-lane piece
  EXPECT_FALSE(detail::piece_prefetches(4, std::int64_t{1} << 18));
  const std::vector<Step> steps = chain_steps(false);
  for (bool prefetch : {false, true}) {
    const auto one = piece_source(steps, 5000, 5000, PieceLaunch{DType::float32, 1, detail::kStepsPerLaunch, false, prefetch});
    ASSERT_TRUE(one.has_value());
    EXPECT_NE(one->find("StepPipeline<T, Index, Lanes, EveryStepRuns, " + std::to_string(detail::kHistory) + ">"), std::string::npos);
    EXPECT_EQ(one->find("p.prefetch(") != std::string::npos, prefetch) << *one;
  }
  const auto four = piece_source(chain_steps(true), 5000, 5000, PieceLaunch{DType::float32, 4, detail::kStepsPerLaunch, true, true});
  ASSERT_TRUE(four.has_value());
  EXPECT_NE(four->find("StepPipeline<T, Index, Lanes, EveryStepRuns, 1>"), std::string::npos);
  EXPECT_EQ(four->find("p.prefetch("), std::string::npos) << *four;
}

// In both math modes (exact mode's pieces hold tapewise's own functions, inline PTX among them), as
// compiled_pieces.cpp prefixes the source. Needs NVRTC, not a GPU.
TEST(CompiledPieces, NvrtcCompilesEveryDtypeAndLaunchShape) {
  for (bool exact : {false, true})
    for (DType dtype : kDTypes)
      for (int lanes : {1, 4})
        for (bool prefetch : {false, true}) {
          if (lanes == 4 && prefetch) continue;
          const bool shared = lanes == 4;
          auto source = piece_source(chain_steps(lanes == 4), 5000, 5000,
                                     PieceLaunch{dtype, lanes, detail::kStepsPerLaunch, shared, prefetch});
          ASSERT_TRUE(source.has_value());
          if (exact) source->insert(0, "#define TAPEWISE_MATH_EXACT 1\n");
          auto cubin = detail::compile_piece_source(*source, "sm_90");
          if (!cubin && cubin.error().message.find("NVRTC not found") != std::string::npos)
            GTEST_SKIP() << "NVRTC is not installed: " << cubin.error().message;
          ASSERT_TRUE(cubin) << (exact ? "exact" : "aten") << ", " << dtype_name(dtype) << ", " << lanes << " lanes"
                             << (prefetch ? ", prefetching" : "") << ": " << cubin.error().message;
          EXPECT_GT(cubin->size(), 1000u);
        }
}

// Queues an exact-mode piece for the worker (the slowest to compile: 0.6 s on the development machine)
// and exits the process `delay_ms` into its compilation.
[[noreturn]] void exit_while_compiling(int delay_ms) {
  std::optional<std::string> source =
      piece_source(chain_steps(true), 5000, 5000, PieceLaunch{DType::float64, 1, detail::kStepsPerLaunch, false, true});
  if (!source) std::exit(3);
  source->insert(0, "#define TAPEWISE_MATH_EXACT 1\n");
  detail::compile_in_background(*source, "sm_90");
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  std::exit(0);
}

// A process that exits while the worker compiles exits cleanly: its exit waits for the compilation in
// flight before NVRTC's own statics, made during NVRTC's first compilation, are destroyed
// (compiled_pieces.cpp, start_worker). While the wait was registered before NVRTC's first compilation,
// 14 of 20 such exits (0.1-0.55 s into this piece's compilation) crashed on the development machine, and
// 0 of 30 since. Each exit runs in a fresh process (a threadsafe death test re-runs the binary), in which
// NVRTC has compiled nothing.
TEST(CompiledPieces, AnExitWhileCompilingIsClean) {
  if (const std::string why = detail::nvrtc_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int delay_ms : {100, 200, 300, 400, 500})
    EXPECT_EXIT(exit_while_compiling(delay_ms), ::testing::ExitedWithCode(0), "") << delay_ms << " ms into a compilation";
}

// Forks 100 ms into an exact-mode piece's compilation and times the child's exit: it has no worker
// thread (fork copies only the forking thread), so a wait for the parent's compilation would never
// end before its 30-s bound. Exits 0 when the child exited 0 within 5 s, else 4.
[[noreturn]] void fork_while_compiling() {
  std::optional<std::string> source =
      piece_source(chain_steps(true), 5000, 5000, PieceLaunch{DType::float64, 1, detail::kStepsPerLaunch, false, true});
  if (!source) std::exit(3);
  source->insert(0, "#define TAPEWISE_MATH_EXACT 1\n");
  detail::compile_in_background(*source, "sm_90");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child == 0) std::exit(0);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) std::exit(5);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 && seconds < 5 ? 0 : 4);
}

// A process forked while the worker compiles (a data loader's workers, say) starts with a cache of its
// own, empty, and exits at once. Its copy of the parent's cache counted a compilation in flight that
// no thread of the child would finish, so its exit waited the full 30 s.
TEST(CompiledPieces, AChildForkedWhileCompilingExitsAtOnce) {
  if (const std::string why = detail::nvrtc_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(fork_while_compiling(), ::testing::ExitedWithCode(0), "");
}

TEST(CompiledPieces, ASourceThatDoesNotCompileIsAnErrorWithTheLog) {
  auto cubin = detail::compile_piece_source("#include \"program_kernel.cuh\"\nthis is not CUDA;\n", "sm_90");
  if (!cubin && cubin.error().message.find("NVRTC not found") != std::string::npos) GTEST_SKIP() << cubin.error().message;
  ASSERT_FALSE(cubin);
  EXPECT_NE(cubin.error().message.find("NVRTC could not compile"), std::string::npos) << cubin.error().message;
  EXPECT_NE(cubin.error().message.find("tapewise_piece.cu"), std::string::npos) << cubin.error().message;
}

TEST(CompiledPieces, AnArchitectureNvrtcDoesNotKnowIsAnErrorNamingIt) {
  const auto source = piece_source(chain_steps(false), 5000, 5000, PieceLaunch{DType::float32, 1, detail::kStepsPerLaunch, false});
  ASSERT_TRUE(source.has_value());
  for (const char* arch : {"sm_bogus", "sm_1", "", "sm_90 --fmad=true"}) {
    auto cubin = detail::compile_piece_source(*source, arch);
    if (!cubin && cubin.error().message.find("NVRTC not found") != std::string::npos) GTEST_SKIP() << cubin.error().message;
    ASSERT_FALSE(cubin) << "arch \"" << arch << "\" compiled";
    EXPECT_EQ(cubin.error().code, ErrorCode::CudaFailure);
    EXPECT_NE(cubin.error().message.find(std::string("for ") + arch), std::string::npos) << cubin.error().message;
  }
}

// Sets an environment variable for a scope and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CompiledPieces, TheEnvironmentChoosesAndABadValueIsNamed) {
  {
    ScopedEnv off("TAPEWISE_COMPILED_PIECES", "off");
    ScopedEnv shared("TAPEWISE_PIECE_STEPS", "shared");
    auto c = detail::piece_compilation_from_environment();
    ASSERT_TRUE(c) << c.error().str();
    EXPECT_FALSE(c->enabled);
    EXPECT_TRUE(c->steps_in_shared);
  }
  {
    ScopedEnv bad("TAPEWISE_COMPILED_PIECES", "maybe");
    auto c = detail::piece_compilation_from_environment();
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(c.error().message.find("TAPEWISE_COMPILED_PIECES=maybe"), std::string::npos) << c.error().message;
  }
  {
    ScopedEnv bad("TAPEWISE_PIECE_STEPS", "registers");
    auto c = detail::piece_compilation_from_environment();
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("TAPEWISE_PIECE_STEPS=registers"), std::string::npos) << c.error().message;
  }
  ScopedEnv unset("TAPEWISE_COMPILED_PIECES", "");
  ScopedEnv steps_unset("TAPEWISE_PIECE_STEPS", "");
  auto c = detail::piece_compilation_from_environment();
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->enabled) << "on by default";
  EXPECT_FALSE(c->steps_in_shared) << "steps read from the kernel parameter by default";
}

// A leaf of n elements of `dtype`, a ramp in [-2 scale, 2 scale).
NodeId ramp_leaf(Tape& t, DType dtype, std::int64_t n, double scale) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<double>(i % 397) / 99.0 - 2.0) * scale;
  auto as = [&]<class T>() {
    std::vector<T> out;
    for (double x : v) out.push_back(T(static_cast<float>(x)));
    return must(t.leaf(HostArray::of<T>(Shape{n}, out)));
  };
  switch (dtype) {
    case DType::float32: return as.template operator()<float>();
    case DType::float64: return must(t.leaf(HostArray::of<double>(Shape{n}, v)));
    case DType::bfloat16: return as.template operator()<bfloat16>();
    case DType::float16: return as.template operator()<float16>();
  }
  return -1;
}

// A random block of nodes, repeated: each node takes the running value h (a binary node also the
// leaf of its place in the block, shared by every repeat so its gradient accumulates, or h itself),
// and each repeat ends with tanh, which keeps h in [-1, 1].
struct BlockNode {
  Op op;
  Scalars scalars;
  bool with_leaf;
};
struct BlockCase {
  std::vector<BlockNode> block;
  int repeats;
  DType dtype;
  std::int64_t n;
  std::string describe() const {
    std::string d = std::to_string(repeats) + " x [";
    for (const BlockNode& b : block) d += std::string(op_name(b.op)) + (b.with_leaf ? "(h, leaf) " : " ");
    return d + "tanh] on " + std::to_string(n) + " " + dtype_name(dtype);
  }
};

BlockCase random_case(std::mt19937& rng) {
  BlockCase c;
  const int length = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int k = 0; k < length; ++k) {
    const OpInfo& info = kOps[std::uniform_int_distribution<int>(0, kOpCount - 1)(rng)];
    c.block.push_back({info.op, default_scalars(info), std::uniform_int_distribution<int>(0, 1)(rng) == 1});
  }
  c.repeats = std::uniform_int_distribution<int>(8, 220 / (length + 1))(rng);
  c.dtype = kDTypes[std::uniform_int_distribution<int>(0, kDTypeCount - 1)(rng)];
  const std::int64_t sizes[] = {1, 37, 1000, 4096, 4096, (std::int64_t{1} << 16) + 4097};
  c.n = sizes[std::uniform_int_distribution<int>(0, 5)(rng)];
  return c;
}

// Every value and every gradient of the case's tape, run with `threshold` (0: node by node).
std::vector<HostArray> run_case(const std::shared_ptr<Backend>& be, const BlockCase& c, std::int64_t threshold) {
  Tape t(be);
  TapeOptions options;
  options.program_threshold = threshold;
  must(t.set_options(options));
  NodeId h = ramp_leaf(t, c.dtype, c.n, 0.5);
  std::vector<NodeId> leaves;
  for (std::size_t k = 0; k < c.block.size(); ++k) leaves.push_back(ramp_leaf(t, c.dtype, c.n, 0.25 + 0.125 * static_cast<double>(k)));
  for (int r = 0; r < c.repeats; ++r) {
    for (std::size_t k = 0; k < c.block.size(); ++k) {
      const BlockNode& b = c.block[k];
      const NodeId ids[2] = {h, b.with_leaf ? leaves[k] : h};
      h = must(t.apply(b.op, std::span<const NodeId>(ids, static_cast<std::size_t>(op_info(b.op).arity)), b.scalars));
    }
    h = must(t.tanh(h));
  }
  std::vector<HostArray> out;
  const Buffer& v = *must(t.value_buffer(h));
  auto g = must(t.backward(h, must(be->upload(must(be->download(v))))));
  for (std::size_t at = 0; at < t.size(); ++at) {
    const NodeId id = t.id_at(at);
    out.push_back(must(t.value(id)));
    if (g.has(id)) out.push_back(must(g.host(id)));
  }
  return out;
}

// Element i of an array of any dtype, widened exactly.
double element(const HostArray& x, std::int64_t i) {
  switch (x.dtype) {
    case DType::float32: return x.at<float>(i);
    case DType::float64: return x.at<double>(i);
    case DType::bfloat16: return static_cast<float>(x.at<bfloat16>(i));
    case DType::float16: return static_cast<float>(x.at<float16>(i));
  }
  return 0.0;
}

// The per-node path against programs whose long pieces run compiled: random blocks of every node,
// every dtype, one lane and four (past 2^16 elements), and the compiled kernels did run.
TEST(CompiledPieces, RepeatedRandomBlocksGiveThePerNodeBits) {
  TW_REQUIRE_CUDA(any_cuda);
  std::shared_ptr<Backend> cuda;
  {
    ScopedEnv on("TAPEWISE_COMPILED_PIECES", "1");
    cuda = must(make_cuda_backend());
  }
  const detail::CompiledPieceStats before = detail::compiled_piece_stats();
  std::mt19937 rng(20261203);
  std::int64_t live_gradients = 0;  // finite non-zero gradient elements compared
  for (int k = 0; k < 40; ++k) {
    const BlockCase c = random_case(rng);
    const std::vector<HostArray> per_node = run_case(cuda, c, 0);
    // The first run queues the long pieces for compilation and interprets them; the second runs them compiled.
    for (const char* run : {"first run", "compiled run"}) {
      const std::vector<HostArray> programs = run_case(cuda, c, TapeOptions{}.program_threshold);
      ASSERT_EQ(programs.size(), per_node.size()) << c.describe();
      for (std::size_t a = 0; a < per_node.size(); ++a)
        ASSERT_TRUE(agree(programs[a], per_node[a]))
            << "case " << k << " (" << run << "), " << c.describe() << ": array " << a << ", "
            << first_difference(programs[a], per_node[a]);
      detail::wait_for_compiled_pieces();
    }
    const HostArray& leaf_gradient = per_node[1];
    for (std::int64_t i = 0; i < leaf_gradient.numel(); ++i)
      live_gradients += std::isfinite(element(leaf_gradient, i)) && element(leaf_gradient, i) != 0.0;
  }
  const detail::CompiledPieceStats after = detail::compiled_piece_stats();
  EXPECT_EQ(after.failed - before.failed, 0) << after.last_error;
  EXPECT_GT(after.launches - before.launches, 40) << "the compiled kernels did not run";
  EXPECT_GT(live_gradients, 0) << "every gradient compared was zero or not finite";
  std::printf("compiled pieces: %lld compiled (%.0f ms), %lld launches; interpreted launches: %lld short, %lld uneven, "
              "%lld irregular\n",
              static_cast<long long>(after.compiled - before.compiled), after.compile_ms - before.compile_ms,
              static_cast<long long>(after.launches - before.launches),
              static_cast<long long>(after.interpreted_short - before.interpreted_short),
              static_cast<long long>(after.interpreted_uneven - before.interpreted_uneven),
              static_cast<long long>(after.interpreted_irregular - before.interpreted_irregular));
}
#endif

}  // namespace
}  // namespace tapewise::testing
