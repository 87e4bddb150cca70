/* tapewise/native/node_kernels.h — the table of per-node kernels that tapewise._tapewise hands out in
 * a capsule (tapewise._tapewise._node_kernels()), so that code compiled outside tapewise's own build
 * (tapewise.torch's C++ autograd nodes, torch_nodes.cpp beside this file) runs a node's forward and
 * fused VJP on raw memory, with no Python in between. Plain C: the two sides share no C++ ABI. */
#ifndef TAPEWISE_NODE_KERNELS_H
#define TAPEWISE_NODE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define TAPEWISE_NODE_KERNELS_CAPSULE "tapewise.node_kernels"
#define TAPEWISE_NODE_KERNELS_VERSION 1

/* Where a node runs: the CPU (is_cuda 0), or CUDA device `device` with work queued on `stream` (a
 * cudaStream_t; NULL is the legacy default stream, as PyTorch's default stream is). */
typedef struct tapewise_node_place {
  int is_cuda;
  int device;
  void* stream;
} tapewise_node_place;

/* Both kernels take `numel` contiguous elements of `dtype` (one of the dtype codes below) at each
 * address, `b` and `db` NULL for a unary node, and the node's scalars s0, s1 (0 where unused); `op` is
 * the node's index in the op table. They return 0, or non-zero with a message naming the error written
 * to `error` (NUL-terminated, at most error_size bytes). The caller vouches that every address is
 * memory of the place (host memory, or device memory of that CUDA device): it is not asked of the
 * driver, which would cost about a microsecond an address; null or misaligned addresses are refused.
 * The caller keeps the memory alive; work is queued on the place's stream, not waited for. Safe to
 * call from any thread, without the GIL. */
typedef struct tapewise_node_kernels {
  int version;   /* TAPEWISE_NODE_KERNELS_VERSION */
  size_t size;   /* sizeof(tapewise_node_kernels) as tapewise built it */
  int dtype_float32, dtype_float64, dtype_bfloat16, dtype_float16;
  int (*forward)(tapewise_node_place place, int op, double s0, double s1, const void* a, const void* b, void* out,
                 int64_t numel, int dtype, char* error, size_t error_size);
  int (*vjp)(tapewise_node_place place, int op, double s0, double s1, const void* a, const void* b, const void* g,
             void* da, void* db, int64_t numel, int dtype, char* error, size_t error_size);
} tapewise_node_kernels;

#endif
