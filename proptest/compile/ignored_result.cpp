// proptest/compile/ignored_result.cpp — compiled, never run, by the ctest ignored_result_fails_to_compile
// (check_ignored_result.cmake). Without IGNORED it uses every Result and must compile; with IGNORED=1
// each "case" line drops one Result instead, and tapewise's own build flags must refuse every one of
// them, one error a line.
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
#if IGNORED
  tape.mul(x, x);  // case 1
  tape.leaf(ones);  // case 2
  tape.backward(x, ones);  // case 3
  tape.flush();  // case 4
  tape.value(x);  // case 5
  backend->allocate(Shape{2}, DType::float32, AllocTag::value);  // case 6
  tape.set_options(TapeOptions{});  // case 7
  backend->synchronize();  // case 8
  backend->download(buffer);  // case 9
  make_cuda_backend();  // case 10
  Shape{2}.check();  // case 11
  fail(ErrorCode::InvalidArgument, "dropped");  // case 12
  make_error();  // case 13
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
