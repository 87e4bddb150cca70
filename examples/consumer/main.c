/* examples/consumer/main.c — a C program using tapewise through its C ABI (<tapewise/tapewise.h>):
 * records y = sin(x) * relu(x) on the CPU backend, runs backward with a seed of ones, prints y and
 * dy/dx, checks them, and shows a failing call's status and message (exit status 0 when right). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tapewise/tapewise.h>

/* Stops the program with the library's message when a call fails. */
static void check(tw_status status, const char* what) {
  if (status != TW_OK) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, tw_status_name(status), tw_last_error());
    exit(1);
  }
}

/* dy/dx of sin(x) * relu(x): cos(x) * relu(x) + sin(x) * [x > 0]. */
static double expected_gradient(double x) { return x > 0 ? cos(x) * x + sin(x) : 0.0; }

int main(void) {
  enum { N = 4 };
  const float x_values[N] = {-1.0f, 0.0f, 0.5f, 2.0f};
  const float ones[N] = {1.0f, 1.0f, 1.0f, 1.0f};
  const int64_t shape[1] = {N};
  float y[N], dx[N];
  tw_backend* backend = NULL;
  tw_tape* tape = NULL;
  tw_gradients* grads = NULL;
  int64_t x, sin_x, relu_x, out;
  int i, failures = 0;

  check(tw_check_version(TW_VERSION), "tw_check_version"); /* these headers suit the library loaded */
  printf("tapewise %s, %d ops\n", tw_version_string(), tw_op_count());
  check(tw_backend_create_cpu(&backend), "tw_backend_create_cpu");
  check(tw_tape_create(backend, &tape), "tw_tape_create");
  check(tw_tape_leaf_host(tape, x_values, sizeof x_values, shape, 1, TW_FLOAT32, 1, &x), "leaf x");
  check(tw_tape_apply(tape, TW_OP_sin, &x, 1, NULL, 0, &sin_x), "sin");
  check(tw_tape_apply(tape, TW_OP_relu, &x, 1, NULL, 0, &relu_x), "relu");
  {
    const int64_t parents[2] = {sin_x, relu_x};
    check(tw_tape_apply(tape, TW_OP_mul, parents, 2, NULL, 0, &out), "mul");
  }
  check(tw_tape_value_host(tape, out, y, sizeof y), "value y");
  check(tw_tape_backward_host(tape, out, ones, sizeof ones, TW_PATH_FUSED, 0, &grads), "backward");
  check(tw_gradients_download(grads, x, dx, sizeof dx), "gradient dx");

  for (i = 0; i < N; ++i) {
    const double want_y = sin(x_values[i]) * (x_values[i] > 0 ? x_values[i] : 0.0);
    const double want_dx = expected_gradient(x_values[i]);
    const int ok = fabs(y[i] - want_y) <= 1e-6 && fabs(dx[i] - want_dx) <= 1e-6;
    printf("x = %5.2f   y = %+.7f   dy/dx = %+.7f   %s\n", x_values[i], y[i], dx[i], ok ? "ok" : "WRONG");
    failures += !ok;
  }

  /* A failing call: a status and a message, nothing changed. */
  {
    int64_t bad_parent = 99, ignored;
    const tw_status status = tw_tape_apply(tape, TW_OP_neg, &bad_parent, 1, NULL, 0, &ignored);
    printf("neg(node 99): %s: %s\n", tw_status_name(status), tw_last_error());
    failures += status != TW_INVALID_NODE_ID;
  }

  check(tw_gradients_destroy(grads), "tw_gradients_destroy");
  check(tw_tape_destroy(tape), "tw_tape_destroy");
  check(tw_backend_destroy(backend), "tw_backend_destroy");
  return failures == 0 ? 0 : 1;
}
