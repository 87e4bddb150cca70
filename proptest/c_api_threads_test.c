/* proptest/c_api_threads_test.c — one backend shared by 8 threads, each recording and running backward
 * on tapes of its own through the C ABI (tapewise.h, "Threads"): every thread's values and gradients
 * must be the bits of one thread alone on a backend of one thread, and the backend's memory statistics
 * must return to zero. Half the threads trim the backend's kept memory after each tape while the others
 * allocate from it; at the end everything reserved is kept, and trim gives it all back. The shared backend runs large tensors on 4 threads of its own, so its pool is
 * used by several callers at once.
 * tools/tsan.sh runs it under ThreadSanitizer, which reports any data race inside the library.
 * Exit status 0 on success; a failure prints what differed. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapewise/tapewise.h>

enum { kThreads = 8, kRounds = 6 };

/* Sizes that take each allocation path: 7 and 1000 elements are carved from the backend's slabs,
 * 1 << 17 floats (512 KiB, past the slabs' 256 KiB limit) are allocations of their own. All run
 * their forwards as programs; the staged backward runs node by node, with workspace buffers. */
static const int64_t kSizes[] = {7, 1000, 1 << 17};
enum { kSizeCount = sizeof kSizes / sizeof kSizes[0] };

/* What one recording gives: the output's value and the input's gradient on both VJP paths. */
typedef struct {
  float* value;
  float* grad_fused;
  float* grad_staged;
} Outcome;

static tw_backend* g_backend;     /* shared by the threads: 4 threads of its own */
static tw_backend* g_one_thread;  /* the expected bits: the calling thread alone */
static Outcome g_expected[kSizeCount];
static int g_failed;
static pthread_mutex_t g_report = PTHREAD_MUTEX_INITIALIZER;

static void report(const char* what, int64_t n, const char* detail) {
  pthread_mutex_lock(&g_report);
  fprintf(stderr, "c_api_threads_test: %s (n = %lld): %s\n", what, (long long)n, detail);
  g_failed = 1;
  pthread_mutex_unlock(&g_report);
}

#define CHECK(call, n)                                  \
  do {                                                  \
    if ((call) != TW_OK) {                              \
      report(#call, (n), tw_last_error());              \
      goto done;                                        \
    }                                                   \
  } while (0)

static int download_gradient(tw_tape* tape, int64_t out, int64_t x, const float* seed, int path, float* dst,
                             int64_t n) {
  tw_gradients* grads = NULL;
  const size_t bytes = (size_t)n * sizeof(float);
  int ok = tw_tape_backward_host(tape, out, seed, bytes, path, 0, &grads) == TW_OK &&
           tw_gradients_download(grads, x, dst, bytes) == TW_OK;
  if (!ok) report("backward", n, tw_last_error());
  tw_gradients_destroy(grads);
  return ok;
}

/* y = softplus(sin(x) * x) + x on a tape of its own, then backward both ways; 0 on failure. */
static int record(tw_backend* backend, int64_t n, Outcome* out) {
  const size_t bytes = (size_t)n * sizeof(float);
  float* x_values = malloc(bytes);
  float* seed = malloc(bytes);
  tw_tape* tape = NULL;
  int ok = 0;
  for (int64_t i = 0; i < n; ++i) {
    x_values[i] = (float)sin((double)i * 0.37) * 3.0f;
    seed[i] = 1.0f + (float)(i % 5) * 0.25f;
  }
  int64_t x = -1, s = -1, m = -1, p = -1, y = -1;
  CHECK(tw_tape_create(backend, &tape), n);
  CHECK(tw_tape_leaf_host(tape, x_values, bytes, &n, 1, TW_FLOAT32, 1, &x), n);
  CHECK(tw_tape_apply(tape, TW_OP_sin, &x, 1, NULL, 0, &s), n);
  const int64_t sx[2] = {s, x};
  CHECK(tw_tape_apply(tape, TW_OP_mul, sx, 2, NULL, 0, &m), n);
  CHECK(tw_tape_apply(tape, TW_OP_softplus, &m, 1, NULL, 0, &p), n);
  const int64_t px[2] = {p, x};
  CHECK(tw_tape_apply(tape, TW_OP_add, px, 2, NULL, 0, &y), n);
  CHECK(tw_tape_value_host(tape, y, out->value, bytes), n);
  ok = download_gradient(tape, y, x, seed, TW_PATH_FUSED, out->grad_fused, n) &&
       download_gradient(tape, y, x, seed, TW_PATH_STAGED, out->grad_staged, n);
done:
  tw_tape_destroy(tape);
  free(x_values);
  free(seed);
  return ok;
}

static void outcome_alloc(Outcome* o, int64_t n) {
  o->value = calloc((size_t)n, sizeof(float));
  o->grad_fused = calloc((size_t)n, sizeof(float));
  o->grad_staged = calloc((size_t)n, sizeof(float));
}

static void outcome_free(Outcome* o) {
  free(o->value);
  free(o->grad_fused);
  free(o->grad_staged);
}

/* Equal bits, or both NaN (the results of two runs of one build agree up to NaN). */
static int same(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(isnan(a[i]) && isnan(b[i]))) return 0;
  return 1;
}

static void* worker(void* arg) {
  const int thread = (int)(intptr_t)arg;
  for (int round = 0; round < kRounds; ++round) {
    const int k = (thread + round) % kSizeCount;
    const int64_t n = kSizes[k];
    Outcome got;
    outcome_alloc(&got, n);
    int64_t live = 0;
    if (record(g_backend, n, &got)) {
      if (!same(got.value, g_expected[k].value, n)) report("value differs from one thread's", n, "");
      if (!same(got.grad_fused, g_expected[k].grad_fused, n)) report("fused gradient differs from one thread's", n, "");
      if (!same(got.grad_staged, g_expected[k].grad_staged, n)) report("staged gradient differs from one thread's", n, "");
    }
    if (tw_backend_memory_stats(g_backend, TW_TAG_VALUE, &live, NULL) != TW_OK) report("memory stats", n, tw_last_error());
    /* Giving back kept memory while the other threads allocate from it. */
    int64_t reserved = -1, kept = -1;
    if (thread % 2 == 1 && tw_backend_trim(g_backend, NULL) != TW_OK) report("trim", n, tw_last_error());
    if (tw_backend_memory_reserved(g_backend, &reserved, NULL, &kept) != TW_OK || kept > reserved)
      report("memory reserved", n, tw_last_error());
    outcome_free(&got);
  }
  return NULL;
}

int main(void) {
  int pool = 0;
  if (tw_backend_create_cpu_threads(4, &g_backend) != TW_OK || tw_backend_create_cpu_threads(1, &g_one_thread) != TW_OK ||
      tw_backend_cpu_threads(g_backend, &pool) != TW_OK) {
    fprintf(stderr, "c_api_threads_test: %s\n", tw_last_error());
    return 1;
  }
  if (pool != 4) {
    fprintf(stderr, "c_api_threads_test: the shared backend reports %d threads, not 4\n", pool);
    return 1;
  }
  for (int k = 0; k < kSizeCount; ++k) {
    outcome_alloc(&g_expected[k], kSizes[k]);
    if (!record(g_one_thread, kSizes[k], &g_expected[k])) return 1;
  }
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t)
    if (pthread_create(&threads[t], NULL, worker, (void*)(intptr_t)t) != 0) {
      fprintf(stderr, "c_api_threads_test: pthread_create failed\n");
      return 1;
    }
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  for (int tag = TW_TAG_VALUE; tag <= TW_TAG_WORKSPACE; ++tag) {
    int64_t count = -1, bytes = -1;
    if (tw_backend_memory_stats(g_backend, tag, &count, &bytes) != TW_OK || count != 0 || bytes != 0) {
      fprintf(stderr, "c_api_threads_test: tag %d has %lld live allocations (%lld bytes) after every tape is gone\n",
              tag, (long long)count, (long long)bytes);
      g_failed = 1;
    }
  }
  int64_t reserved = -1, kept = -1, released = -1;
  if (tw_backend_memory_reserved(g_backend, &reserved, NULL, &kept) != TW_OK || reserved != kept ||
      tw_backend_trim(g_backend, &released) != TW_OK || released != kept ||
      tw_backend_memory_reserved(g_backend, &reserved, NULL, NULL) != TW_OK || reserved != 0) {
    fprintf(stderr, "c_api_threads_test: with no buffer live, %lld bytes reserved, %lld kept, %lld given back by trim\n",
            (long long)reserved, (long long)kept, (long long)released);
    g_failed = 1;
  }
  for (int k = 0; k < kSizeCount; ++k) outcome_free(&g_expected[k]);
  tw_backend_destroy(g_backend);
  tw_backend_destroy(g_one_thread);
  if (!g_failed) printf("c_api_threads_test: %d threads x %d rounds on one backend: same results, no leak\n", kThreads, kRounds);
  return g_failed;
}
