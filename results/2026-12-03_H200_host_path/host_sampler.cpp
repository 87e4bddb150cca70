// The 1,000-node unary chain on the CUDA backend, with a SIGPROF sampler: where the host's time goes.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/time.h>
#include <ctime>
#include <unistd.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <tapewise/tapewise.hpp>
namespace tapewise::detail { void wait_for_compiled_pieces(); }
using namespace tapewise;
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
static constexpr int kMax = 1 << 20;
static unsigned long samples[kMax];
static volatile int nsamples = 0;
static volatile int sampling = 0;
static void on_prof(int, siginfo_t*, void* ctx) {
  if (!sampling) return;
  auto* uc = static_cast<ucontext_t*>(ctx);
  int i = nsamples;
  if (i < kMax) { samples[i] = uc->uc_mcontext.gregs[REG_RIP]; nsamples = i + 1; }
}
int main(int argc, char** argv) {
  const int log2n = argc > 1 ? atoi(argv[1]) : 12;
  const int reps = argc > 2 ? atoi(argv[2]) : 200;
  const char* out = argc > 3 ? argv[3] : "samples.txt";
  auto bep = make_cuda_backend();
  if (!bep) { printf("%s\n", bep.error().str().c_str()); return 1; }
  auto be = *bep;
  printf("%s\n", be->describe().c_str());
  const std::int64_t n = std::int64_t{1} << log2n;
  std::vector<float> xs(n);
  for (std::int64_t i = 0; i < n; ++i) xs[i] = 0.1f + 0.8f * float(i % 1000) / 1000.0f;
  auto x_host = HostArray::of<float>(Shape{n}, xs);
  std::vector<float> ones(n, 1.0f);
  auto ones_host = HostArray::of<float>(Shape{n}, ones);
  auto seed = *be->upload(ones_host, AllocTag::gradient);
  struct sigaction sa{};
  sa.sa_sigaction = on_prof; sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, nullptr);
  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) { perror("timer_create"); return 1; }
  itimerspec its{{0, 40000}, {0, 40000}};
  timer_settime(timer, 0, &its, nullptr);
  double r_sum = 0, b_sum = 0, t_sum = 0;
  clk::time_point start;
  for (int rep = 0; rep < reps + 5; ++rep) {
    if (rep == 1) tapewise::detail::wait_for_compiled_pieces();
    if (rep == 5) { (void)be->synchronize(); start = clk::now(); sampling = 1; r_sum = b_sum = t_sum = 0; }
    auto x = *be->upload(x_host, AllocTag::value);
    auto t0 = clk::now();
    auto t = std::make_unique<Tape>(be);
    NodeId h = *t->leaf(std::move(x));
    const NodeId leaf = h;
    for (int i = 0; i < 1000; ++i) {
      switch (i % 5) {
        case 0: h = *t->sin(h); break;
        case 1: h = *t->tanh(h); break;
        case 2: h = *t->sigmoid(h); break;
        case 3: h = *t->scale(h, 0.9); break;
        default: h = *t->relu(h); break;
      }
    }
    auto t1 = clk::now();
    auto g = t->backward(h, seed, std::span<const NodeId>(&leaf, 1));
    if (!g) { printf("%s\n", g.error().str().c_str()); return 1; }
    auto t2 = clk::now();
    { auto gg = std::move(*g); }
    t.reset();
    auto t3 = clk::now();
    r_sum += us(t0, t1); b_sum += us(t1, t2); t_sum += us(t2, t3);
  }
  (void)be->synchronize();
  sampling = 0;
  const double total = us(start, clk::now());
  printf("2^%d: total %.3f us/node (host record %.3f, backward %.3f, teardown %.3f); %d samples\n", log2n,
         total / reps / 1000, r_sum / reps / 1000, b_sum / reps / 1000, t_sum / reps / 1000, (int)nsamples);
  std::ofstream f(out);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) f << "map " << line << "\n";
  for (int i = 0; i < nsamples; ++i) f << std::hex << samples[i] << "\n";
}
