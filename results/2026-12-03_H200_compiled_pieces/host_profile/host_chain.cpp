// The 1,000-node unary chain on the CPU backend at one element: the tape's host costs (record, backward,
// release) without a GPU, for perf. Build: g++ -O2 -g -std=c++20 -Iinclude -Ibuild/include host_chain.cpp
// build/libtapewise.a -L/usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt; run under perf record -g.
#include <chrono>
#include <cstdio>
#include <tapewise/tapewise.hpp>
using namespace tapewise;
int main() {
  auto be = make_cpu_backend();
  std::vector<float> xs(1, 0.5f);
  double best = 1e9;
  for (int rep = 0; rep < 300; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    {
      Tape t(be);
      NodeId x = *t.leaf(HostArray::of<float>(Shape{1}, xs));
      NodeId h = x;
      for (int i = 0; i < 1000; ++i) {
        switch (i % 5) {
          case 0: h = *t.sin(h); break;
          case 1: h = *t.tanh(h); break;
          case 2: h = *t.sigmoid(h); break;
          case 3: h = *t.scale(h, 0.9); break;
          default: h = *t.relu(h); break;
        }
      }
      auto g = t.backward(h, HostArray::of<float>(Shape{1}, xs), std::span<const NodeId>(&x, 1));
      if (!g) { printf("%s\n", g.error().str().c_str()); return 1; }
    }
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  printf("best %.3f us per node (record + backward + release, CPU backend, 1 element)\n", best / 1000);
}
