// The fast CPU element-wise and row-wise ops: vectorised (AVX-512, AVX2 or
// portable, chosen at run time like the matmul) and split over rows on a
// thread pool when the call is large enough.
//
// Each function has the contract of its twin in reference_ops.h (same name,
// same arguments) plus `pool` (may be null: single-threaded) and `isa` (the
// path; kAuto in production, a fixed one in tests). They do the reference's
// f32 operations in the same order, with its f64 sums of squares summed in
// 16 f64 lanes and its e^x evaluated in f64 and rounded once (vec16.inc:
// ExpF, where the reference calls expf): their results are the reference's
// except for the rare value whose f64 intermediate, different in its last
// bits, rounds to the neighbouring f32. Matching the reference this closely
// matters: the decoder's tests compare chunked with whole prefills at a
// tolerance that the rounding noise of the delta rule already nearly fills,
// and an f32 e^x good to 1 ulp was enough to tip some fixtures over it.
//
// Determinism: a row's (an element's) result depends only on its own inputs
// and the row length, never on the number of rows, the other rows, the
// thread count or the split: every row runs the same code in the same order
// (a partial last 16-chunk is zero-padded, never a different code path), and
// a row is never split between threads. The three paths give the same bits.
//
// Cost: memory-bound for the plain ops (a few instructions per 16 floats);
// ops with e^x (SiLU, sigmoid) about 40 instructions per 16 floats. Calls
// below kMinParallelWork run on the calling thread alone, so batch-1 decode
// never pays a thread hand-off.
//
// Thread safety: reentrant; with a pool, concurrent calls serialise on it.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_ELEMENTWISE_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_ELEMENTWISE_H_

#include <cstdint>

#include "engine/backend/cpu/matmul.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/element_type.h"

namespace tributary {
namespace fast {

// Below this many element-operations (elements × a per-op weight: 1 for
// plain arithmetic, 8 for an e^x) a call stays on the calling thread. With
// the pool's workers spinning between the ops of a step a hand-off costs
// about a microsecond, about what 2^15 element-operations take.
constexpr int64_t kMinParallelWork = int64_t{1} << 15;

void RmsNormZeroCentred(const float* x, int64_t num_rows, int64_t dim,
                        const void* w, ElementType w_type, float eps,
                        float* out, ThreadPool* pool,
                        CpuIsa isa = CpuIsa::kAuto);

void GatedRmsNorm(const float* o, const float* z, int64_t num_rows, int64_t dim,
                  const void* w, ElementType w_type, float eps, float* out,
                  ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);

// x ← x + u; when `stats` is not null, stats [num_tokens,
// kResidualStatsColumns] (backend.h), the columns of
// reference::ResidualTokenStats (the dim and the flag as floats).
void ResidualAdd(float* x, const float* u, int64_t num_tokens, int64_t hidden,
                 float* stats, ThreadPool* pool,
                 CpuIsa isa = CpuIsa::kAuto);

void SwiGlu(const float* gate, const float* up, int64_t n, float* out,
            ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);

void SigmoidGate(float* o, const float* gate, int64_t n, ThreadPool* pool,
                 CpuIsa isa = CpuIsa::kAuto);

void L2NormRows(float* x, int64_t num_rows, int64_t dim, float scale,
                ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);

// reference::GdnGates (same arguments): e^x and sigmoid as the other ops
// here (ExpF), ln(1 + e^x) in f64 rounded once (vec16.inc: Log1pD), so the
// reference's bits but for rare ties.
void GdnGates(const float* a, const float* b, int64_t num_tokens,
              int64_t num_heads, const void* a_log, ElementType a_log_type,
              const void* dt_bias, ElementType dt_bias_type, float* g,
              float* beta, ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);

// ids[r] = reference::ArgMaxRow(x + r · width, width) for each of num_rows
// rows: the first largest, −1 for a row with a non-finite element.
void ArgMaxRows(const float* x, int64_t num_rows, int64_t width, int32_t* ids,
                ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);

// One sequence of a causal conv call: the arguments of
// reference::CausalConv1dSilu that differ between sequences.
struct ConvSequence {
  const float* x;  // [num_tokens, channels]
  int64_t num_tokens;
  float* window;  // [kernel − 1, channels], updated
  float* out;     // [num_tokens, channels]
};

// reference::CausalConv1dSilu for each of `num_sequences` sequences sharing
// the weights w [channels, kernel]. Split over (sequence, 16 channels).
void CausalConv1dSilu(const ConvSequence* sequences, int64_t num_sequences,
                      int64_t channels, int64_t kernel, const void* w,
                      ElementType w_type, ThreadPool* pool,
                      CpuIsa isa = CpuIsa::kAuto);

}  // namespace fast
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_ELEMENTWISE_H_
