#include "engine/backend/cpu/elementwise.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593
#pragma GCC diagnostic ignored "-Wuninitialized"        // the same bug
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/matmul_kernels.h"
#include "engine/backend/cpu/reference_ops.h"

namespace tributary {
namespace elementwise_internal {

#define TRIB_KERNELS "engine/backend/cpu/elementwise_kernels.inc"
#include "engine/backend/cpu/isa_instantiations.inc"
#undef TRIB_KERNELS

namespace {

// The row kernels of one path.
struct Kernels {
  void (*rms_norm)(const float*, int64_t, const float*, float, float*);
  void (*gated_rms_norm)(const float*, const float*, int64_t, const float*,
                         float, float*);
  void (*l2_norm)(float*, int64_t, float);
  void (*residual_add)(float*, const float*, int64_t, float*);
  void (*swiglu)(const float*, const float*, int64_t, float*);
  void (*sigmoid_gate)(float*, const float*, int64_t);
  void (*conv)(const float*, int64_t, int64_t, int64_t, const float*, float*,
               float*, int64_t, int64_t);
  int32_t (*arg_max)(const float*, int64_t);
  void (*gdn_gates)(const float*, const float*, int64_t, const float*,
                    const float*, float*, float*);
};

#define TRIB_KERNELS(ns)                                            \
  Kernels {                                                         \
    &ns::RmsNormRow, &ns::GatedRmsNormRow, &ns::L2NormRow,          \
        &ns::ResidualAddRow, &ns::SwiGluSpan, &ns::SigmoidGateSpan, \
        &ns::ConvChannels, &ns::ArgMaxRow, &ns::GdnGatesSpan        \
  }

const Kernels& KernelsFor(CpuIsa isa) {
  static const Kernels kAvx512 = TRIB_KERNELS(avx512);
  static const Kernels kAvx2 = TRIB_KERNELS(avx2);
  static const Kernels kPortable = TRIB_KERNELS(portable);
  switch (ResolveCpuIsa(isa)) {
    case CpuIsa::kAvx512:
      return kAvx512;
    case CpuIsa::kAvx2:
      return kAvx2;
    default:
      return kPortable;
  }
}

#undef TRIB_KERNELS

// Relative cost of an element of an op with an e^x (vs plain arithmetic).
constexpr int64_t kExpWork = 8;

// fn(begin, end) over [0, n) units: on the calling thread when the call's
// work is small (or there is no pool), else split over the pool.
template <typename Fn>
void ForUnits(ThreadPool* pool, int64_t n, int64_t work, const Fn& fn) {
  if (n <= 0) return;
  if (pool == nullptr || work < fast::kMinParallelWork) {
    fn(int64_t{0}, n);
    return;
  }
  pool->ParallelFor(n, fn);
}

// A weight vector widened to f32 (plus `add`: 1 for the zero-centred norm,
// whose 1 + w is then exactly what the reference multiplies by).
class WidenedWeight {
 public:
  WidenedWeight(const void* w, ElementType type, int64_t n, float add,
                CpuIsa isa)
      : data_(static_cast<size_t>(n)) {
    if (type == ElementType::kF32 || type == ElementType::kBF16 ||
        type == ElementType::kF16) {
      const auto& kern = ResolveCpuIsa(isa) == CpuIsa::kAvx512
                             ? matmul_internal::Avx512Kernels()
                         : ResolveCpuIsa(isa) == CpuIsa::kAvx2
                             ? matmul_internal::Avx2Kernels()
                             : matmul_internal::ScalarKernels();
      kern.widen(w, type, n, data_.data());  // exact
    } else {
      for (int64_t i = 0; i < n; ++i) data_[i] = LoadAsF32(w, type, i);
    }
    if (add != 0.0f) {
      for (float& v : data_) v = add + v;
    }
  }
  const float* data() const { return data_.data(); }

 private:
  std::vector<float> data_;
};

}  // namespace
}  // namespace elementwise_internal

namespace fast {

using elementwise_internal::ForUnits;
using elementwise_internal::KernelsFor;
using elementwise_internal::kExpWork;
using elementwise_internal::WidenedWeight;

void RmsNormZeroCentred(const float* x, int64_t num_rows, int64_t dim,
                        const void* w, ElementType w_type, float eps,
                        float* out, ThreadPool* pool, CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  const WidenedWeight w1(w, w_type, dim, 1.0f, isa);
  ForUnits(pool, num_rows, 2 * num_rows * dim, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      kern.rms_norm(x + r * dim, dim, w1.data(), eps, out + r * dim);
    }
  });
}

void GatedRmsNorm(const float* o, const float* z, int64_t num_rows, int64_t dim,
                  const void* w, ElementType w_type, float eps, float* out,
                  ThreadPool* pool, CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  const WidenedWeight wf(w, w_type, dim, 0.0f, isa);
  ForUnits(pool, num_rows, kExpWork * num_rows * dim,
           [&](int64_t b, int64_t e) {
             for (int64_t r = b; r < e; ++r) {
               kern.gated_rms_norm(o + r * dim, z + r * dim, dim, wf.data(),
                                   eps, out + r * dim);
             }
           });
}

void ResidualAdd(float* x, const float* u, int64_t num_tokens, int64_t hidden,
                 float* stats, ThreadPool* pool, CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  ForUnits(
      pool, num_tokens, 4 * num_tokens * hidden, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          kern.residual_add(
              x + t * hidden, u + t * hidden, hidden,
              stats == nullptr ? nullptr : stats + t * kResidualStatsColumns);
        }
      });
}

namespace {

// Element-wise ops split into 16-element units, so that only the very last
// unit can be partial.
constexpr int64_t kUnit = 16;

}  // namespace

void SwiGlu(const float* gate, const float* up, int64_t n, float* out,
            ThreadPool* pool, CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  ForUnits(pool, (n + kUnit - 1) / kUnit, kExpWork * n,
           [&](int64_t b, int64_t e) {
             const int64_t begin = b * kUnit, end = std::min(e * kUnit, n);
             kern.swiglu(gate + begin, up + begin, end - begin, out + begin);
           });
}

void SigmoidGate(float* o, const float* gate, int64_t n, ThreadPool* pool,
                 CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  ForUnits(pool, (n + kUnit - 1) / kUnit, kExpWork * n,
           [&](int64_t b, int64_t e) {
             const int64_t begin = b * kUnit, end = std::min(e * kUnit, n);
             kern.sigmoid_gate(o + begin, gate + begin, end - begin);
           });
}

void ArgMaxRows(const float* x, int64_t num_rows, int64_t width,
                int32_t* ids, ThreadPool* pool, CpuIsa isa) {
  if (width >= (int64_t{1} << 24)) {  // beyond exact float indices
    for (int64_t r = 0; r < num_rows; ++r) {
      ids[r] = reference::ArgMaxRow(x + r * width, width);
    }
    return;
  }
  const auto& kern = KernelsFor(isa);
  ForUnits(pool, num_rows, num_rows * width, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) ids[r] = kern.arg_max(x + r * width, width);
  });
}

void GdnGates(const float* a, const float* b, int64_t num_tokens,
              int64_t num_heads, const void* a_log, ElementType a_log_type,
              const void* dt_bias, ElementType dt_bias_type, float* g,
              float* beta, ThreadPool* pool, CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  const int64_t n = num_tokens * num_heads;
  if (n <= 0) return;
  // Each head's values, as the reference computes them per gate, repeated
  // for kUnit gates past the last head: the kUnit gates from gate i read
  // them from head i mod num_heads on.
  const int64_t period = num_heads + kUnit;
  std::vector<float> bias(static_cast<size_t>(period));
  std::vector<float> neg_rate(static_cast<size_t>(period));
  for (int64_t h = 0; h < num_heads; ++h) {
    bias[h] = LoadAsF32(dt_bias, dt_bias_type, h);
    neg_rate[h] = -std::exp(LoadAsF32(a_log, a_log_type, h));
  }
  for (int64_t i = num_heads; i < period; ++i) {
    bias[i] = bias[i % num_heads];
    neg_rate[i] = neg_rate[i % num_heads];
  }
  ForUnits(pool, (n + kUnit - 1) / kUnit, 3 * kExpWork * n,
           [&](int64_t b_unit, int64_t e_unit) {
             for (int64_t unit = b_unit; unit < e_unit; ++unit) {
               const int64_t begin = unit * kUnit;
               const int64_t head = begin % num_heads;
               kern.gdn_gates(a + begin, b + begin,
                              std::min(kUnit, n - begin), bias.data() + head,
                              neg_rate.data() + head, g + begin, beta + begin);
             }
           });
}

void L2NormRows(float* x, int64_t num_rows, int64_t dim, float scale,
                ThreadPool* pool, CpuIsa isa) {
  const auto& kern = KernelsFor(isa);
  ForUnits(pool, num_rows, 2 * num_rows * dim, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) kern.l2_norm(x + r * dim, dim, scale);
  });
}

void CausalConv1dSilu(const ConvSequence* sequences, int64_t num_sequences,
                      int64_t channels, int64_t kernel, const void* w,
                      ElementType w_type, ThreadPool* pool, CpuIsa isa) {
  if (num_sequences <= 0 || channels <= 0) return;
  const auto& kern = KernelsFor(isa);
  // The taps transposed to [kernel, channels], so that 16 channels of a tap
  // are one vector load: widened by the vector kernel (WidenedWeight), then
  // transposed into a buffer of the calling thread kept across calls (a
  // decode step makes one call per GDN layer; converting element by element
  // into a fresh vector cost ~1 % of a batched decode step).
  const WidenedWeight taps(w, w_type, channels * kernel, 0.0f, isa);
  // (The workers reach it through this pointer: a thread_local named in
  // the lambda would be each worker's own.)
  thread_local std::vector<float> transposed;
  transposed.resize(static_cast<size_t>(kernel * channels));
  float* const wt = transposed.data();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < kernel; ++j) {
      wt[j * channels + c] = taps.data()[c * kernel + j];
    }
  }
  int64_t num_tokens = 0;
  for (int64_t s = 0; s < num_sequences; ++s) {
    num_tokens += sequences[s].num_tokens;
  }
  const int64_t groups = (channels + kUnit - 1) / kUnit;
  const int64_t window_bytes =
      (kernel - 1) * channels * static_cast<int64_t>(sizeof(float));
  ForUnits(pool, num_sequences * groups,
           (kernel + kExpWork) * num_tokens * channels,
           [&](int64_t b, int64_t e) {
             // The units of one sequence in [b, e) in one call.
             for (int64_t unit = b; unit < e;) {
               const int64_t seq = unit / groups;
               const int64_t last = std::min(e, (seq + 1) * groups);
               const ConvSequence& s = sequences[seq];
               // The next sequence's window, last touched a step ago and
               // long gone from L1/L2 (a decode step's conv waited on it:
               // 3 rows, channels floats apart, too short a stream for the
               // hardware prefetcher).
               if (last < e) {
                 const char* next =
                     reinterpret_cast<const char*>(sequences[seq + 1].window);
                 for (int64_t byte = 0; byte < window_bytes; byte += 64) {
                   __builtin_prefetch(next + byte);
                 }
               }
               kern.conv(s.x, s.num_tokens, channels, kernel, wt,
                         s.window, s.out, unit % groups * kUnit,
                         std::min(channels, (last - seq * groups) * kUnit));
               unit = last;
             }
           });
}

}  // namespace fast
}  // namespace tributary
