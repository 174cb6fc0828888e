#include "engine/backend/cpu/delta_rule.h"

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
  // RecurrentHead's, or at least a group of RecurrentHeads' (H · dv ≤ 128).
  return std::max(dims.key_dim * dvp + 2 * dvp, int64_t{256});
}

}  // namespace

#define TRIB_KERNELS "engine/backend/cpu/delta_rule_kernels.inc"
#include "engine/backend/cpu/isa_instantiations.inc"
#undef TRIB_KERNELS

}  // namespace delta_rule_internal

bool DeltaRuleTakesRecurrentForm(DeltaRuleForm form, int64_t num_tokens,
                                 int64_t first_position, int64_t key_dim,
                                 int64_t value_dim) {
  if (form == DeltaRuleForm::kAsTransformers) {
    return num_tokens == 1 && first_position > 0;
  }
  // The recurrent form passes over a head's state twice a token; while that
  // state stays in L1 this costs less than the chunked form's extra
  // products (its Gram matrices and substitution), and a token or two never
  // amortise them. bench/cpu/delta_rule_bench, one thread, chunked /
  // recurrent time, a 2-core AVX-512 VM (48 KiB L1), T = 1 … 512 tokens:
  //   dk = dv = 32 (4 KiB a head, the default model): 1.8–4.0;
  //   dk = dv = 64 (16 KiB): 1.15–1.5;
  //   dk = dv = 128 (64 KiB, the 27B): 2.7 at T = 1, 1.9 at 2, 1.1 at 4,
  //   0.6–0.8 at 16 … 512.
  // The cut at two tokens is conservative: at four the two forms are even.
  constexpr int64_t kFewTokens = 2;
  constexpr int64_t kL1StateBytes = 16 * 1024;
  return num_tokens <= kFewTokens ||
         key_dim * value_dim * static_cast<int64_t>(sizeof(float)) <=
             kL1StateBytes;
}

size_t DeltaRuleScratchBytes(const DeltaRuleCall& call) {
  namespace dri = delta_rule_internal;
  const int64_t floats =
      call.recurrent ? dri::RecurrentScratchFloats(call.dims)
                     : dri::MakeLayout(call.dims, call.chunk_size).total;
  return static_cast<size_t>(floats) * sizeof(float);
}

void GatedDeltaRuleHead(const DeltaRuleCall& call, int64_t head, void* scratch,
                        CpuIsa isa) {
  GatedDeltaRuleHeads(call, head, head + 1, scratch, isa);
}

void GatedDeltaRuleHeads(const DeltaRuleCall& call, int64_t head_begin,
                         int64_t head_end, void* scratch, CpuIsa isa) {
  namespace dri = delta_rule_internal;
  if (call.dims.num_tokens <= 0) return;
  // Fast-forgetting heads drive the decays into subnormals: the chunked
  // form's e^(G_i − G_j) across a chunk (it ran ~16× slower), the recurrent
  // form's e^g when a token's own log decay is below −87
  // (flush_denormals.h).
  const ScopedFlushDenormals flush_denormals;
  float* s = static_cast<float*>(scratch);
  const DeltaRuleCall& c = call;
  const int64_t b = head_begin, e = head_end;
  switch (ResolveCpuIsa(isa)) {
    case CpuIsa::kAvx512:
      if (c.recurrent) {
        dri::avx512::RecurrentHeadRange(c.dims, c.q, c.k, c.v, c.g, c.beta,
                                        c.state, c.out, b, e, s);
      } else {
        for (int64_t h = b; h < e; ++h) {
          dri::avx512::ChunkedHead(c.dims, c.chunk_size, c.q, c.k, c.v, c.g,
                                   c.beta, c.state, c.out, h, s);
        }
      }
      return;
    case CpuIsa::kAvx2:
      if (c.recurrent) {
        dri::avx2::RecurrentHeadRange(c.dims, c.q, c.k, c.v, c.g, c.beta,
                                      c.state, c.out, b, e, s);
      } else {
        for (int64_t h = b; h < e; ++h) {
          dri::avx2::ChunkedHead(c.dims, c.chunk_size, c.q, c.k, c.v, c.g,
                                 c.beta, c.state, c.out, h, s);
        }
      }
      return;
    default:
      if (c.recurrent) {
        dri::portable::RecurrentHeadRange(c.dims, c.q, c.k, c.v, c.g, c.beta,
                                          c.state, c.out, b, e, s);
      } else {
        for (int64_t h = b; h < e; ++h) {
          dri::portable::ChunkedHead(c.dims, c.chunk_size, c.q, c.k, c.v, c.g,
                                     c.beta, c.state, c.out, h, s);
        }
      }
      return;
  }
}

void GatedDeltaRule(const DeltaRuleCall& call, ThreadPool* pool,
                    CpuIsa isa) {
  const size_t bytes = DeltaRuleScratchBytes(call);
  const int64_t heads = call.dims.num_value_heads;
  if (pool == nullptr) {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> scratch(
        std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
    GatedDeltaRuleHeads(call, 0, heads, scratch.get(), isa);
    return;
  }
  pool->ParallelForWorker(heads, [&](int worker, int64_t begin, int64_t end) {
    GatedDeltaRuleHeads(call, begin, end, pool->WorkerScratch(worker, bytes),
                        isa);
  });
}

}  // namespace tributary
