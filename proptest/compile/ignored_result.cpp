// proptest/compile/ignored_result.cpp — compiled, never run, by the ctest ignored_result_fails_to_compile
// (check_ignored_result.cmake). Without IGNORED it uses every Result and must compile; with IGNORED=n
// it drops the Result of call n instead, which tapewise's own build flags must refuse to compile.
#include <vector>

#include <tapewise/tapewise.hpp>

using namespace tapewise;

Error make_error() { return Error{ErrorCode::InvalidArgument, "an error dropped on the floor"}; }

int main() {
  std::shared_ptr<Backend> backend = make_cpu_backend();
  Tape tape(backend);
  const HostArray ones = HostArray::of<float>(Shape{2}, std::vector<float>{1.f, 1.f});
  const NodeId x = tape.leaf(ones).value();
  Buffer buffer = backend->allocate(Shape{2}, DType::float32, AllocTag::value).value();
#if IGNORED == 1
  tape.mul(x, x);
#elif IGNORED == 2
  tape.leaf(ones);
#elif IGNORED == 3
  tape.backward(x, ones);
#elif IGNORED == 4
  tape.flush();
#elif IGNORED == 5
  tape.value(x);
#elif IGNORED == 6
  backend->allocate(Shape{2}, DType::float32, AllocTag::value);
#elif IGNORED == 7
  tape.set_options(TapeOptions{});
#elif IGNORED == 8
  backend->synchronize();
#elif IGNORED == 9
  backend->download(buffer);
#elif IGNORED == 10
  make_cuda_backend();
#elif IGNORED == 11
  Shape{2}.check();
#elif IGNORED == 12
  fail(ErrorCode::InvalidArgument, "dropped");
#elif IGNORED == 13
  make_error();
#else
  const NodeId y = tape.mul(x, x).value();
  const Gradients grads = tape.backward(y, ones).value();
  if (!tape.flush() || !tape.leaf(ones) || !tape.value(x) || !tape.set_options(TapeOptions{}) ||
      !backend->synchronize() || !backend->download(buffer) || !Shape{2}.check() || !grads.has(x))
    return 1;
  const bool no_cuda = !make_cuda_backend();
  const Error dropped = make_error();
  const auto failure = fail(ErrorCode::InvalidArgument, "kept");
  return no_cuda && dropped.message.empty() && failure.value().message.empty() ? 1 : 0;
#endif
  return 0;
}
