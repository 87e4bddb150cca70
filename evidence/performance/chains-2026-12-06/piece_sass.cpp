// piece_sass.cpp — a diagnostic, run on the development machine (no GPU): the float32 unary chain's and fan-out's
// backward pieces (100 / 96 nodes, four lanes) compiled by NVRTC for sm_90 twice, each step's slot writes as constants
// (82ceb27) and read at run time (255u, as e3d718c ran them); piece_sass.txt has cuobjdump's registers and SASS counts.
// Built against the build tree: g++ -std=c++20 -O2 -DTAPEWISE_HAS_CUDA=1 -Iinclude -Ibuild/include -I<dir holding
// tapewise/ops.def> -Icuda -Ithird_party -I/usr/local/cuda/include piece_sass.cpp build/libtapewise.a libcudart_static.a -ldl.
#include <cstdio>
#include <fstream>
#include <regex>
#include <tapewise/tapewise.hpp>
#include "backends/compiled_pieces.hpp"
#include "kernels/piece_source.hpp"
#include "tape/backward_program.hpp"
#include "tape/backward_plan.hpp"
#include "tape/tape_internal.hpp"
#include "backends/engine.hpp"
using namespace tapewise;
int main() {
  auto be = make_cpu_backend();
  constexpr std::int64_t n = 1 << 17;
  for (bool fanout : {false, true}) {
    Tape tape(be);
    auto o = tape.options(); o.program_threshold = n; (void)tape.set_options(o);
    const NodeId x = *tape.leaf(HostArray::of(Shape{n}, std::vector<float>(n, 0.5f)));
    NodeId h = x;
    if (fanout) for (int i = 0; i + 6 <= 96; i += 6) { NodeId s=*tape.sin(h), t=*tape.tanh(h), g=*tape.sigmoid(h); h=*tape.scale(*tape.add(*tape.add(s,t),g),0.5);} 
    else for (int i = 0; i < 100; ++i) h = i%5==0?*tape.sin(h):i%5==1?*tape.tanh(h):i%5==2?*tape.sigmoid(h):i%5==3?*tape.scale(h,0.9):*tape.relu(h);
    (void)tape.flush();
    const std::span<const Node> nodes(*tape.node(x), tape.size());
    const auto out = static_cast<NodeId>(node_position(h));
    detail::BackwardPlan plan; plan.wanted.assign(nodes.size(), 0); plan.wanted[0] = 1;
    detail::plan_backward(nodes, out, false, plan);
    const Buffer seed = *be->upload(HostArray::of(Shape{n}, std::vector<float>(n, 1.0f)));
    detail::BackwardProgram builder; detail::Engine& engine = detail::engine_of(*be);
    (void)builder.allocate_slots(engine, plan, nodes, out, false);
    const detail::Program& program = builder.build(plan, nodes, out, seed, n);
    (void)builder.allocate_internal_slots(engine, "backward");
    auto src = detail::piece_source(program.steps, n, n, detail::PieceLaunch{DType::float32, 4, detail::kStepsPerLaunch, true});
    if (!src) { std::puts("no source"); return 1; }
    std::string runtime = std::regex_replace(*src, std::regex(R"(((?:last_)?step<\d+, \d+u, )\d+u)"), "$01255u");
    for (auto [name, s] : {std::pair{"const", *src}, std::pair{"runtime", runtime}}) {
      auto cubin = detail::compile_piece_source(s, "sm_90");
      if (!cubin) { std::printf("compile failed: %s\n", cubin.error().message.c_str()); return 1; }
      std::ofstream(std::string(fanout ? "fanout_" : "unary_") + name + ".cubin", std::ios::binary).write(cubin->data(), cubin->size());
      std::ofstream(std::string(fanout ? "fanout_" : "unary_") + name + ".cu") << s;
    }
    builder.release();
  }
  std::puts("ok");
}
