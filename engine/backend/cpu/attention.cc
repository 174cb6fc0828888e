#include "engine/backend/cpu/attention.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593
#pragma GCC diagnostic ignored "-Wuninitialized"        // the same bug
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "engine/backend/cpu/flush_denormals.h"

namespace tributary {
namespace attention_internal {

using reference::PagedKvView;

#define TRIB_KERNELS "engine/backend/cpu/attention_kernels.inc"
#include "engine/backend/cpu/isa_instantiations.inc"
#undef TRIB_KERNELS

}  // namespace attention_internal

int64_t AttentionUnits(const AttentionCall& call) {
  return call.num_tokens * call.kv.num_kv_heads;
}

size_t AttentionScratchBytes(const AttentionCall& call) {
  const int64_t group = call.num_q_heads / call.kv.num_kv_heads;
  const int64_t keys = call.first_position + call.num_tokens;
  const int64_t floats = (group * keys + 15) / 16 * 16 + 2 * keys + 16;
  return static_cast<size_t>(floats) * sizeof(float);
}

void PagedAttentionUnit(const AttentionCall& call, int64_t unit, void* scratch,
                        CpuIsa isa) {
  namespace ai = attention_internal;
  const int64_t kv_heads = call.kv.num_kv_heads;
  const int64_t group = call.num_q_heads / kv_heads;
  // Token order 0, T−1, 1, T−2, …: any contiguous range of units mixes short
  // and long causal rows.
  const int64_t i = unit / kv_heads, kvh = unit % kv_heads;
  const int64_t t = (i % 2 == 0) ? i / 2 : call.num_tokens - 1 - i / 2;
  // Keys scoring 87–103 below the row's maximum get subnormal weights, and
  // the value pass over them ran 14× slower (4,096 keys, one thread: 12.6
  // against 0.9 ms); flushed, they cost what any key does.
  const ScopedFlushDenormals flush_denormals;
  float* s = static_cast<float*>(scratch);
  switch (ResolveCpuIsa(isa)) {
    case CpuIsa::kAvx512:
      ai::avx512::AttendGroup(call.q, call.num_q_heads, call.first_position,
                              call.kv, call.scale, call.out, t, kvh,
                              kvh * group, group, s);
      return;
    case CpuIsa::kAvx2:
      ai::avx2::AttendGroup(call.q, call.num_q_heads, call.first_position,
                            call.kv, call.scale, call.out, t, kvh, kvh * group,
                            group, s);
      return;
    default:
      ai::portable::AttendGroup(call.q, call.num_q_heads, call.first_position,
                                call.kv, call.scale, call.out, t, kvh,
                                kvh * group, group, s);
      return;
  }
}

void PagedAttention(const AttentionCall& call, ThreadPool* pool,
                    CpuIsa isa) {
  const size_t bytes = AttentionScratchBytes(call);
  const int64_t units = AttentionUnits(call);
  if (pool == nullptr) {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> scratch(
        std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    for (int64_t u = 0; u < units; ++u) {
      PagedAttentionUnit(call, u, scratch.get(), isa);
    }
    return;
  }
  pool->ParallelForWorker(units, [&](int worker, int64_t begin, int64_t end) {
    void* scratch = pool->WorkerScratch(worker, bytes);
    for (int64_t u = begin; u < end; ++u) {
      PagedAttentionUnit(call, u, scratch, isa);
    }
  });
}

}  // namespace tributary
