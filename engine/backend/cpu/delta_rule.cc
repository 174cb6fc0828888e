#include "engine/backend/cpu/delta_rule.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593
#pragma GCC diagnostic ignored "-Wuninitialized"  // the same bug
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tributary {
namespace delta_rule_internal {
namespace {

int64_t RoundUp16(int64_t x) { return (x + 15) / 16 * 16; }

// Offsets (in floats, each a multiple of 16) of the chunked form's scratch.
struct ScratchLayout {
  int64_t cp, dkp, dvp, uwp;
  int64_t s, kt, ktw, kk, qk, uw, vnew, o, cum, total;
};

ScratchLayout MakeLayout(const reference::DeltaRuleDims& dims, int64_t c) {
  ScratchLayout l;
  l.cp = RoundUp16(c);
  l.dkp = RoundUp16(dims.key_dim);
  l.dvp = RoundUp16(dims.value_dim);
  l.uwp = l.dvp + l.dkp;
  const int64_t dk = dims.key_dim;
  int64_t at = 0;
  auto take = [&at](int64_t n) {
    const int64_t here = at;
    at += RoundUp16(n);
    return here;
  };
  l.s = take(dk * l.dvp);
  l.kt = take(dk * l.cp);
  l.ktw = take(dk * l.cp);
  l.kk = take(c * l.cp);
  l.qk = take(c * l.cp);
  l.uw = take(c * l.uwp);
  l.vnew = take(c * l.dvp);
  l.o = take(std::max(c, int64_t{1}) * l.dvp);
  l.cum = take(l.cp);
  l.total = at;
  return l;
}

int64_t RecurrentScratchFloats(const reference::DeltaRuleDims& dims) {
  const int64_t dvp = RoundUp16(dims.value_dim);
  return dims.key_dim * dvp + 2 * dvp;
}

}  // namespace

#define TRIB_KERNELS "engine/backend/cpu/delta_rule_kernels.inc"
#include "engine/backend/cpu/isa_instantiations.inc"
#undef TRIB_KERNELS

}  // namespace delta_rule_internal

size_t DeltaRuleScratchBytes(const DeltaRuleCall& call) {
  namespace dri = delta_rule_internal;
  const int64_t floats =
      call.recurrent ? dri::RecurrentScratchFloats(call.dims)
                     : dri::MakeLayout(call.dims, call.chunk_size).total;
  return static_cast<size_t>(floats) * sizeof(float);
}

void GatedDeltaRuleHead(const DeltaRuleCall& call, int64_t head, void* scratch,
                        MatMulIsa isa) {
  namespace dri = delta_rule_internal;
  if (call.dims.num_tokens <= 0) return;
  float* s = static_cast<float*>(scratch);
  const DeltaRuleCall& c = call;
  switch (ResolveMatMulIsa(isa)) {
    case MatMulIsa::kAvx512:
      if (c.recurrent) {
        dri::avx512::RecurrentHead(c.dims, c.q, c.k, c.v, c.g, c.beta, c.state,
                                   c.out, head, s);
      } else {
        dri::avx512::ChunkedHead(c.dims, c.chunk_size, c.q, c.k, c.v, c.g,
                                 c.beta, c.state, c.out, head, s);
      }
      return;
    case MatMulIsa::kAvx2:
      if (c.recurrent) {
        dri::avx2::RecurrentHead(c.dims, c.q, c.k, c.v, c.g, c.beta, c.state,
                                 c.out, head, s);
      } else {
        dri::avx2::ChunkedHead(c.dims, c.chunk_size, c.q, c.k, c.v, c.g, c.beta,
                               c.state, c.out, head, s);
      }
      return;
    default:
      if (c.recurrent) {
        dri::portable::RecurrentHead(c.dims, c.q, c.k, c.v, c.g, c.beta,
                                     c.state, c.out, head, s);
      } else {
        dri::portable::ChunkedHead(c.dims, c.chunk_size, c.q, c.k, c.v, c.g,
                                   c.beta, c.state, c.out, head, s);
      }
      return;
  }
}

void GatedDeltaRule(const DeltaRuleCall& call, ThreadPool* pool,
                    MatMulIsa isa) {
  const size_t bytes = DeltaRuleScratchBytes(call);
  const int64_t heads = call.dims.num_value_heads;
  if (pool == nullptr) {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> scratch(
        std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
    for (int64_t h = 0; h < heads; ++h) {
      GatedDeltaRuleHead(call, h, scratch.get(), isa);
    }
    return;
  }
  pool->ParallelForWorker(heads, [&](int worker, int64_t begin, int64_t end) {
    void* scratch = pool->WorkerScratch(worker, bytes);
    for (int64_t h = begin; h < end; ++h) {
      GatedDeltaRuleHead(call, h, scratch, isa);
    }
  });
}

}  // namespace tributary
