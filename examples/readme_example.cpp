// examples/readme_example.cpp — the C++ example of the README, verbatim (a test keeps them equal).
#include <iostream>
#include <vector>

#include <tapewise/tapewise.hpp>
using namespace tapewise;

int main() {
  auto cuda = make_cuda_backend();                // Result: DeviceUnavailable where there is no GPU
  Tape tape(cuda ? *cuda : make_cpu_backend());
  // .value() throws (tl::bad_expected_access<Error>) on an error; `*` on an unchecked Result does not.
  NodeId x = tape.leaf(HostArray::of<float>(Shape{3}, std::vector<float>{-1.f, 0.f, 2.f})).value();
  NodeId y = tape.mul(tape.sin(x).value(), tape.relu(x).value()).value();
  Result<Gradients> grads = tape.backward(y, HostArray::of<float>(Shape{3}, std::vector<float>{1, 1, 1}));
  if (!grads) {                                   // e.g. "SeedShapeMismatch: backward: seed has shape [2], ..."
    std::cerr << grads.error().str() << "\n";
    return 1;
  }
  HostArray dx = grads->host(x).value();          // gradients are owned by the caller
  for (float v : dx.to_vector<float>()) std::cout << v << " ";
  std::cout << "\n";
}
