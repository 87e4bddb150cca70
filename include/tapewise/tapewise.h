/** tapewise/tapewise.h — the C ABI of tapewise: plain C99 over the C++ API (implemented in
 * cuda/c_api/c_api.cpp, in the same library), for C programs and foreign-function interfaces (ctypes, …).
 *
 * Rules that hold for every function:
 * - Versions: TW_VERSION (<tapewise/version.h>, included here) is the headers' version, tw_version()
 *   the library's. A binding loading the library at run time calls tw_check_version(TW_VERSION of the
 *   headers it was written against) first and stops unless it returns TW_OK.
 * - Every function except the few that return a string, an int or nothing reports a tw_status;
 *   TW_OK (0) is success. On failure tw_last_error() holds a message for this thread, no output
 *   parameter is written, and the tape keeps its nodes, ids and values, with one exception: a call
 *   that runs the deferred forwards (reading a value, a backward, recording a node above the program
 *   threshold) and then fails has still run them, so tw_tape_pending may then be lower.
 * - No C++ exception ever leaves a function (an unexpected one becomes TW_INTERNAL).
 * - Handles (tw_backend, tw_tape, tw_buffer, tw_gradients) are opaque and owned by the caller, who
 *   releases each with its *_destroy function. A handle that is not live (destroyed, never created, or
 *   of another type) is detected and answered with TW_INVALID_HANDLE, never dereferenced; a NULL handle
 *   is TW_NULL_POINTER, except that destroying NULL is a no-op (TW_OK). (A destroyed handle's address
 *   may be reused by a later handle of the same type, which it then names.)
 * - Tapes, buffers and gradients keep their backend alive: a backend handle may be destroyed while
 *   they are still in use.
 * - Every pointer to caller memory comes with its size in bytes, which must equal exactly the
 *   element count of the shape times the dtype's size (4, 8, 2 or 2), else TW_INVALID_ARGUMENT and nothing
 *   is read or written. Shapes are (dims, ndim) with 0 <= ndim <= TW_MAX_NDIM (dims may be NULL when
 *   ndim is 0: a scalar); a negative dim or an element count that overflows int64 is TW_INVALID_SHAPE.
 * - Zero-copy views (tw_tape_leaf_wrap, tw_buffer_wrap): the caller keeps ownership of the memory,
 *   which must stay allocated and unchanged while a tape holds it as a leaf's value (until the tape is
 *   destroyed) and, for a seed, until the backward that reads it has returned. On CUDA the memory is
 *   device memory of the backend's device and work is queued on the backend's stream: call
 *   tw_backend_synchronize (or order your stream after it) before freeing or overwriting it.
 * - Node ids (int64_t) are opaque: a tape's serial in the high 32 bits, the node's position on it in
 *   the low 32 (ids of one tape ascend with position). Every tape refuses another tape's ids, and every
 *   tw_gradients the ids of a tape other than the one whose backward made it, with
 *   TW_INVALID_NODE_ID and a message naming both tapes; a number no tape handed out (0, a bare
 *   position) is refused too. Use the ids the tape returns, never positions.
 * - Enumerated values other than tw_status (dtype: tw_dtype, path: tw_path, tag: tw_alloc_tag,
 *   kind: tw_backend_kind, op: tw_op) travel as int, in and out, so that any value a caller passes is
 *   well-defined (unknown ones are TW_INVALID_ARGUMENT) and no enum size is part of the ABI.
 * - Threads: a backend may be shared by threads that each use their own tapes, buffers and gradients
 *   (allocation, memory statistics, trim, the kept memory limit, the program threshold and the
 *   kernels are safe to use concurrently). A tape, buffer or gradients handle is used by one thread at a time: even reading a
 *   tape's values may run its deferred work. tw_last_error is per thread.
 * \file */
#ifndef TAPEWISE_TAPEWISE_H
#define TAPEWISE_TAPEWISE_H

#include <stddef.h>
#include <stdint.h>

#include <tapewise/version.h>

#if defined(__GNUC__)
#define TW_API __attribute__((visibility("default")))
#else
#define TW_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* DLPack's tensor (dlpack/dlpack.h): include that header to exchange tensors. A plain comment: a
   Doxygen one after this forward declaration would document the next declaration, tw_backend. */
struct DLManagedTensor;

/** Opaque handle: a backend (CPU or CUDA), its memory and kernels. */
typedef struct tw_backend tw_backend;
/** Opaque handle: a tape of recorded nodes. */
typedef struct tw_tape tw_tape;
/** Opaque handle: a buffer of a backend (a view of caller memory, for backward seeds). */
typedef struct tw_buffer tw_buffer;
/** Opaque handle: the gradients a backward pass returned. */
typedef struct tw_gradients tw_gradients;

/** Status codes. 1..11 are tapewise::ErrorCode + 1, in that enum's order; a new ErrorCode gets the next
 * number below 100. The codes of the C layer itself start at 100. The numbers never change. */
typedef enum tw_status {
  TW_OK = 0,
  TW_INVALID_NODE_ID = 1,      /**< a node id of another tape or outside the tape, or a node with no gradient */
  TW_INVALID_SHAPE = 2,        /**< negative ndim or dim, ndim > TW_MAX_NDIM, element count overflow */
  TW_SHAPE_MISMATCH = 3,       /**< a binary node's inputs differ in shape */
  TW_DTYPE_MISMATCH = 4,       /**< a binary node's inputs differ in dtype, or a DLPack dtype is unusable */
  TW_SEED_SHAPE_MISMATCH = 5,  /**< a backward seed buffer's shape differs from the output's */
  TW_SEED_DTYPE_MISMATCH = 6,  /**< a backward seed buffer's dtype differs from the output's */
  TW_BACKEND_MISMATCH = 7,     /**< memory or a buffer from another backend or device */
  TW_INVALID_ARGUMENT = 8,     /**< unknown op/dtype/path/tag, wrong counts or byte sizes, … */
  TW_OUT_OF_MEMORY = 9,
  TW_DEVICE_UNAVAILABLE = 10,  /**< no usable CUDA device, or a build without CUDA */
  TW_CUDA_FAILURE = 11,
  TW_NULL_POINTER = 100,       /**< a required pointer argument is NULL */
  TW_INVALID_HANDLE = 101,     /**< a handle that is not live (destroyed, garbage, another type) */
  TW_INTERNAL = 102,           /**< an unexpected failure inside the library (a bug: please report it) */
  TW_VERSION_MISMATCH = 103    /**< tw_check_version: the library cannot serve headers of that version */
} tw_status;

/** Element types: IEEE binary32 and binary64, bfloat16 (float32's top 16 bits) and IEEE binary16.
 * The 16-bit formats are stored as their bits (uint16_t); each op computes in float32 and rounds once
 * to 16 bits, as ATen does for BFloat16 and Half. */
typedef enum tw_dtype { TW_FLOAT32 = 0, TW_FLOAT64 = 1, TW_BFLOAT16 = 2, TW_FLOAT16 = 3 } tw_dtype;

/** Which VJP form backward runs: one fused kernel per node, or the spec's stages. Identical results up
 * to NaN: equal bits, or both NaN (a NaN's sign and payload may differ between the paths). */
typedef enum tw_path { TW_PATH_FUSED = 0, TW_PATH_STAGED = 1 } tw_path;

/** What a backend's allocation is for (memory statistics). */
typedef enum tw_alloc_tag { TW_TAG_VALUE = 0, TW_TAG_GRADIENT = 1, TW_TAG_WORKSPACE = 2 } tw_alloc_tag;

/** Which backend a handle is. */
typedef enum tw_backend_kind { TW_BACKEND_CPU = 0, TW_BACKEND_CUDA = 1 } tw_backend_kind;
/** Which exp, log, sin, cos and tanh a backend's kernels call: ATen's libm (CUDA's default), or
 * tapewise's own, the same bits on every backend (the CPU backend's only mode). */
typedef enum tw_math_mode { TW_MATH_ATEN = 0, TW_MATH_EXACT = 1 } tw_math_mode;

/** Op ids: pinned numbers, part of the ABI. A new node takes the next number, appended below; no
 * number is ever reused or moved. The library checks at compile time that each id names the node of
 * that position in the op table (spec/ops.def, installed as <tapewise/ops.def>), so a row inserted
 * in the table's middle, or a row without its id here, fails the build naming the node. TW_OP_COUNT
 * is their number; tw_op_info gives arity and scalar count. */
typedef enum tw_op {
  TW_OP_add = 0,
  TW_OP_sub = 1,
  TW_OP_mul = 2,
  TW_OP_neg = 3,
  TW_OP_scale = 4,
  TW_OP_abs = 5,
  TW_OP_sqrt = 6,
  TW_OP_clamp = 7,
  TW_OP_max = 8,
  TW_OP_min = 9,
  TW_OP_div = 10,
  TW_OP_relu = 11,
  TW_OP_exp = 12,
  TW_OP_sin = 13,
  TW_OP_cos = 14,
  TW_OP_log = 15,
  TW_OP_inv = 16,
  TW_OP_safeLog = 17,
  TW_OP_sigmoid = 18,
  TW_OP_tanh = 19,
  TW_OP_silu = 20,
  TW_OP_gelu = 21,
  TW_OP_softplus = 22,
  TW_OP_COUNT = 23
} tw_op;

/** The most dims a shape may have (tapewise::kMaxNdim). */
#define TW_MAX_NDIM 32

/* --- library ---------------------------------------------------------------------------------- */

/** The message of the last call on this thread that failed, e.g. "tw_tape_apply: InvalidNodeId: add:
 * node id #0 of tape 1 used on tape 2 (an id is valid only on the tape that recorded it)"; every successful call resets it to "". Valid until the next
 * call on this thread. Never NULL. */
TW_API const char* tw_last_error(void);
/** The enumerator's name ("TW_OK", "TW_INVALID_NODE_ID", …); "TW_UNKNOWN_STATUS" for other values. */
TW_API const char* tw_status_name(int status);
/** What a status means, as a sentence ("a node id of another tape or outside the tape, or a node with no gradient"), for
 * messages; tw_last_error() says what went wrong in the call itself. Never NULL. A value that is no
 * tw_status gives "unknown status N (not a tw_status value)", written into a buffer of this thread
 * that the next such call on this thread overwrites; every other string is a constant. Safe to call
 * from any thread. (status travels as int, like tw_status_name's, so that any value is well-defined.) */
TW_API const char* tw_status_string(int status);
/** The library's version as one integer, TW_VERSION's packing (major * 10000 + minor * 100 + patch):
 * the version of the library actually loaded, which may differ from the TW_VERSION a caller was
 * compiled with. */
TW_API int tw_version(void);
/** The library's version as text, e.g. "0.2.0" (tapewise::kVersion). */
TW_API const char* tw_version_string(void);
/** TW_OK when this library serves programs written against headers of version header_version (pass
 * TW_VERSION): the same major version, and then for major 0 the same minor (before 1.0 each minor
 * version is a new ABI, as the shared library's soname, libtapewise.so.0.MINOR, says) and from 1.0 on
 * a library minor at least the header's (newer minors only add). Patch versions never matter. Else
 * TW_VERSION_MISMATCH, and tw_last_error() names both versions; a negative header_version is
 * TW_INVALID_ARGUMENT. */
TW_API tw_status tw_check_version(int header_version);
/** The number of ops (TW_OP_COUNT), and an op's name ("add", …) or NULL for an unknown id. */
TW_API int tw_op_count(void);
/** An op's name ("add", …), or NULL for an unknown id. */
TW_API const char* tw_op_name(int op);
/** An op's number of inputs (1 or 2) and of double scalars (0, 1 or 2); either output may be NULL. */
TW_API tw_status tw_op_info(int op, int* arity, int* scalar_count);
/** 1 when a CUDA device can be opened, else 0 (tw_backend_create_cuda's message says why). */
TW_API int tw_cuda_available(void);

/* --- backends --------------------------------------------------------------------------------- */

/** The CPU backend (the production code compiled for the host), with the default thread count
 * (TAPEWISE_CPU_THREADS, else the CPUs this process may run on; an invalid TAPEWISE_CPU_THREADS gives
 * one thread, and tw_backend_describe says why). */
TW_API tw_status tw_backend_create_cpu(tw_backend** out);
/** The CPU backend running tensors of more than 2^15 elements on `threads` threads, the calling
 * thread included (0: the default, but an invalid TAPEWISE_CPU_THREADS is TW_INVALID_ARGUMENT; 1: the
 * calling thread alone; at most 256, else TW_INVALID_ARGUMENT). Results never depend on the count. */
TW_API tw_status tw_backend_create_cpu_threads(int threads, tw_backend** out);
/** The threads a CPU backend runs large tensors on; 0 for a CUDA backend. */
TW_API tw_status tw_backend_cpu_threads(const tw_backend* backend, int* threads);
/** A CUDA backend on `device`, queueing on `stream` (a cudaStream_t on that device; NULL: its own).
 * TW_DEVICE_UNAVAILABLE where there is no usable GPU, TW_INVALID_ARGUMENT for a bad ordinal. */
TW_API tw_status tw_backend_create_cuda(int device, void* stream, tw_backend** out);
/** tw_backend_create_cuda with a math mode (TW_MATH_ATEN or TW_MATH_EXACT; anything else is
 * TW_INVALID_ARGUMENT). */
TW_API tw_status tw_backend_create_cuda_math(int device, void* stream, int math, tw_backend** out);
/** The backend's math mode: TW_MATH_EXACT for the CPU backend; a CUDA backend's as it was made. */
TW_API tw_status tw_backend_math_mode(const tw_backend* backend, int* out);
/** Releases the handle; tapes, buffers and gradients made from it stay usable. */
TW_API tw_status tw_backend_destroy(tw_backend* backend);
/** TW_BACKEND_CPU or TW_BACKEND_CUDA. */
TW_API tw_status tw_backend_kind_of(const tw_backend* backend, int* out);
/** The cudaStream_t (as void*) a CUDA backend queues all its work on: the caller's stream given to
 * tw_backend_create_cuda, else the stream the backend created for itself, which is never the legacy
 * default stream (so *out is non-NULL for CUDA). NULL for the CPU backend. Use it to order the
 * caller's work after the backend's (cudaStreamWaitEvent) instead of tw_backend_synchronize. The
 * backend's own stream stays valid while the backend lives (while any handle made from it does) and
 * is the backend's to destroy; a caller's stream stays the caller's. */
TW_API tw_status tw_backend_stream(const tw_backend* backend, void** out);
/** Copies the description ("CUDA device 0: NVIDIA H200 (…)") with its NUL into dst. `needed` (may be
 * NULL) receives its size including the NUL, also when the call fails for a short dst (as snprintf
 * reports it); dst = NULL with dst_size = 0 only asks for that size; a dst_size smaller than needed is
 * TW_INVALID_ARGUMENT (nothing written to dst). */
TW_API tw_status tw_backend_describe(const tw_backend* backend, char* dst, size_t dst_size, size_t* needed);
/** Waits for all queued work; reports an asynchronous failure. */
TW_API tw_status tw_backend_synchronize(tw_backend* backend);
/** Live allocations of one tag: their count and bytes (either output may be NULL). Borrowed memory
 * (wrap, DLPack) is not counted. */
TW_API tw_status tw_backend_memory_stats(const tw_backend* backend, int tag, int64_t* live_count,
                                         int64_t* live_bytes);
/** The memory the backend holds for its buffers (any output may be NULL): reserved_bytes, all it holds
 * from the memory underneath (every slab, every large buffer, every released block it keeps, at least
 * the live bytes); slab_bytes, the slabs' part (buffers of up to 256 KiB are carved from slabs);
 * kept_bytes, the part kept for reuse with no buffer in it (at most the kept memory limit). */
TW_API tw_status tw_backend_memory_reserved(const tw_backend* backend, int64_t* reserved_bytes, int64_t* slab_bytes,
                                            int64_t* kept_bytes);
/** Gives back to the system every empty slab and released block the backend keeps for reuse (as
 * PyTorch's empty_cache); live buffers are untouched. released_bytes (may be NULL) receives the bytes
 * given back. A CUDA backend then waits for its stream and returns its pool's unused memory. */
TW_API tw_status tw_backend_trim(tw_backend* backend, int64_t* released_bytes);
/** The most bytes the backend keeps for reuse with no buffer in them, or -1 for no limit: at first
 * TAPEWISE_KEPT_MEMORY_LIMIT when set, else 256 MiB on the CPU and no limit on CUDA. */
TW_API tw_status tw_backend_kept_memory_limit(const tw_backend* backend, int64_t* bytes);
/** Sets the kept memory limit: bytes >= 0, or -1 for no limit (any other negative value is
 * TW_INVALID_ARGUMENT). What is kept beyond it is given back now. */
TW_API tw_status tw_backend_set_kept_memory_limit(tw_backend* backend, int64_t bytes);

/* --- buffers: caller memory as backward seeds -------------------------------------------------- */

/** A zero-copy view of caller memory (host memory for the CPU backend, device memory for CUDA),
 * aligned to the dtype's size; see the lifetime rule of zero-copy views at the top. */
TW_API tw_status tw_buffer_wrap(tw_backend* backend, void* data, size_t data_bytes, const int64_t* shape, int ndim,
                                int dtype, tw_buffer** out);
/** A zero-copy view of a DLPack tensor (C-contiguous float32/float64 on the backend's device). On
 * success the buffer owns the tensor and calls its deleter when destroyed; on failure the caller keeps it.
 * Refused: an unknown device_type (TW_BACKEND_MISMATCH), ndim outside [0, TW_MAX_NDIM]
 * (TW_INVALID_SHAPE), NULL data for a tensor with elements, and a byte_offset that takes data past the
 * end of the address space (TW_INVALID_ARGUMENT). A tensor of no elements may have any strides. */
TW_API tw_status tw_buffer_from_dlpack(tw_backend* backend, struct DLManagedTensor* tensor, tw_buffer** out);
/** Releases a buffer (a view: its memory stays the caller's; DLPack: the tensor's deleter runs). */
TW_API tw_status tw_buffer_destroy(tw_buffer* buffer);

/* --- tapes ------------------------------------------------------------------------------------ */

/** A new empty tape recording on `backend` (which the tape keeps alive). */
TW_API tw_status tw_tape_create(tw_backend* backend, tw_tape** out);
/** Releases the tape, its values and its views of caller memory (wrapped leaves, DLPack leaves). */
TW_API tw_status tw_tape_destroy(tw_tape* tape);
/** Nodes of at most numel elements run as tape programs (default on CUDA 67108864 = 2^26; 0: never). A negative
 * numel is TW_INVALID_ARGUMENT and leaves the tape's threshold as it was. */
TW_API tw_status tw_tape_set_program_threshold(tw_tape* tape, int64_t numel);
/** Reads the tape's program threshold into *out. */
TW_API tw_status tw_tape_program_threshold(const tw_tape* tape, int64_t* out);
/** At most count nodes wait for their forward; recording one more flushes (default 448, one CUDA launch
 * of program steps). A count outside 1 .. 65536 is TW_INVALID_ARGUMENT and changes nothing. */
TW_API tw_status tw_tape_set_max_pending_nodes(tw_tape* tape, int64_t count);
/** Reads the tape's limit of pending nodes into *out. */
TW_API tw_status tw_tape_max_pending_nodes(const tw_tape* tape, int64_t* out);

/** A leaf holding a copy of data (shape, dtype); *out_id receives its node id. */
TW_API tw_status tw_tape_leaf_host(tw_tape* tape, const void* data, size_t data_bytes, const int64_t* shape, int ndim,
                                   int dtype, int requires_grad, int64_t* out_id);
/** A leaf whose value is a zero-copy view of data (see the lifetime rule at the top). */
TW_API tw_status tw_tape_leaf_wrap(tw_tape* tape, void* data, size_t data_bytes, const int64_t* shape, int ndim,
                                   int dtype, int requires_grad, int64_t* out_id);
/** A leaf whose value is a zero-copy view of a DLPack tensor. On success the tape owns the tensor (its
 * deleter runs when the tape is destroyed); on failure the caller keeps it. */
TW_API tw_status tw_tape_leaf_dlpack(tw_tape* tape, struct DLManagedTensor* tensor, int requires_grad,
                                     int64_t* out_id);
/** Records op(parents, scalars): nparents must be the op's arity and nscalars its scalar count
 * (tw_op_info), else TW_INVALID_ARGUMENT; scalars may be NULL when nscalars is 0. The scalars are, in
 * table order: scale (c), clamp (lo, hi), safeLog (eps). Binary ops take parents (a, b). */
TW_API tw_status tw_tape_apply(tw_tape* tape, int op, const int64_t* parents, int nparents, const double* scalars,
                               int nscalars, int64_t* out_id);
/** The number of nodes, and of nodes whose forward is deferred (a tape program not yet run). */
TW_API tw_status tw_tape_size(const tw_tape* tape, int64_t* out);
/** The number of nodes whose forward is deferred (see tw_tape_size). */
TW_API tw_status tw_tape_pending(const tw_tape* tape, int64_t* out);
/** Runs the deferred forwards now (reads do it by themselves). */
TW_API tw_status tw_tape_flush(tw_tape* tape);

/** A node's value: shape (ndim, and dims when not NULL: dims_capacity >= ndim, else
 * TW_INVALID_ARGUMENT; every way in refuses ndim > TW_MAX_NDIM, so TW_MAX_NDIM dims always suffice),
 * dtype, and size in bytes. None of these runs deferred work. */
TW_API tw_status tw_tape_value_shape(const tw_tape* tape, int64_t id, int* ndim, int64_t* dims, int dims_capacity);
/** A node's value's dtype (a tw_dtype); see tw_tape_value_shape. */
TW_API tw_status tw_tape_value_dtype(const tw_tape* tape, int64_t id, int* out);
/** A node's value's size in bytes; see tw_tape_value_shape. */
TW_API tw_status tw_tape_value_bytes(const tw_tape* tape, int64_t id, size_t* out);
/** Copies a node's value to host memory; dst_bytes must equal tw_tape_value_bytes. */
TW_API tw_status tw_tape_value_host(tw_tape* tape, int64_t id, void* dst, size_t dst_bytes);
/** A zero-copy DLPack view of a node's value, valid while the tape lives; the caller calls its
 * deleter (which frees only the DLPack structures) when done with it. */
TW_API tw_status tw_tape_value_dlpack(tw_tape* tape, int64_t id, struct DLManagedTensor** out);

/* --- backward --------------------------------------------------------------------------------- */

/** Reverse pass from node out_id with the seed given as host data of the output's shape and dtype
 * (seed_bytes = tw_tape_value_bytes(out_id)). dense = 0: the sparse (training) convention, only
 * reachable nodes get a gradient, the first contribution kept bit-exact; dense != 0: every node that
 * requires grad gets one, starting from +0. The gradients belong to the caller. */
TW_API tw_status tw_tape_backward_host(tw_tape* tape, int64_t out_id, const void* seed, size_t seed_bytes,
                                       int path, int dense, tw_gradients** out);
/** The same with the seed in a buffer of the tape's backend (same shape and dtype as the output:
 * TW_SEED_SHAPE_MISMATCH / TW_SEED_DTYPE_MISMATCH otherwise). */
TW_API tw_status tw_tape_backward_buffer(tw_tape* tape, int64_t out_id, const tw_buffer* seed, int path,
                                         int dense, tw_gradients** out);
/** tw_tape_backward_host returning only the gradients of the wanted_count ids at `wanted` (NULL only
 * with a count of 0; an id not of this tape: TW_INVALID_NODE_ID, nothing runs): a node's VJP runs only
 * when it leads to a wanted node, and a tape program keeps the other gradients in registers instead
 * of writing them to memory. Each gradient returned is tw_tape_backward_host's, identical up to NaN. */
TW_API tw_status tw_tape_backward_host_wanted(tw_tape* tape, int64_t out_id, const void* seed, size_t seed_bytes,
                                              int path, int dense, const int64_t* wanted, size_t wanted_count,
                                              tw_gradients** out);
/** tw_tape_backward_buffer returning only the gradients of `wanted` (as tw_tape_backward_host_wanted). */
TW_API tw_status tw_tape_backward_buffer_wanted(tw_tape* tape, int64_t out_id, const tw_buffer* seed, int path,
                                                int dense, const int64_t* wanted, size_t wanted_count,
                                                tw_gradients** out);

/** Whether node id received a gradient (ids not of the tape the gradients came from, or recorded
 * after its backward: TW_INVALID_NODE_ID). */
TW_API tw_status tw_gradients_has(const tw_gradients* grads, int64_t id, int* out);
/** Copies a gradient (the node's value's shape and dtype) to host memory; dst_bytes must equal its size
 * in bytes. TW_INVALID_NODE_ID when the node has no gradient. */
TW_API tw_status tw_gradients_download(const tw_gradients* grads, int64_t id, void* dst, size_t dst_bytes);
/** Moves a gradient out as a DLPack tensor (no copy): afterwards tw_gradients_has reports 0 for it.
 * The caller owns the tensor and calls its deleter, which releases the memory. */
TW_API tw_status tw_gradients_dlpack(tw_gradients* grads, int64_t id, struct DLManagedTensor** out);
/** Releases the gradients and every buffer still in them. */
TW_API tw_status tw_gradients_destroy(tw_gradients* grads);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TAPEWISE_TAPEWISE_H */
