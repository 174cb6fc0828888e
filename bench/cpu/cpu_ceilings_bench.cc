// cpu_ceilings_bench: in one run, the machine's ceilings and our MatMul
// against them (design.md §8: performance is a ratio against a ceiling
// measured in the same run).
//   (a) the FMA rate of a thread (12 independent fma chains of the widest
//       vectors, zmm or ymm, 1 and all threads at once: the ceiling of any
//       f32 product; AVX-512 or AVX2 + FMA CPUs), then
//       the same for VDPBF16PS chains where the CPU has AVX512_BF16,
//       f32 GEMM peak on a large square problem: OpenBLAS sgemm and our
//       kernel, 1 and 2 threads; the best is the GEMM ceiling. Where the CPU
//       has AVX512_BF16, also our kernel's bf16 products (MatMulPrecision::
//       kBF16: x rounded to bf16, VDPBF16PS, on weights packed as bf16
//       pairs as the backend packs them), the bf16 ceiling.
//   (b) DRAM read bandwidth: a streaming read of a buffer much larger than
//       L3 with AVX loads, 1 and 2 threads; the best is the memory ceiling.
//   (c) our MatMul on the model's shapes, bf16 weights packed as bf16 pairs
//       as the CPU backend packs them ("ours bf16": f32 products on them,
//       the engine's default): decode (several copies cycled so the
//       working set exceeds L3) as GB/s of weights read
//       and a fraction of (b); prefill T=512 and batched decode T=32 as
//       GFLOP/s and a fraction of (a), with OpenBLAS sgemm on an expanded
//       f32 copy of the weights beside it, and the bf16 products against
//       the bf16 ceiling; and batched decode T=32 again with the weights
//       cycled through copies larger than L3, as a real model's are.
//   (k) on request only: our prefill (f32 products on bf16 pairs) against
//       OpenBLAS by row length, T = 512 tokens × 1024 outputs, K from 256 to
//       5120 inputs, 1 and all threads, as the ratio ours / OpenBLAS of the
//       same shape in the same run.
//   (r) on request only: the ceilings of a tributary-bench roofline, the FMA
//       rate of all threads and their read rate of a --read_bytes buffer
//       (the model's weight bytes), and where the CPU has AVX512_BF16 the
//       VDPBF16PS rate of all threads (the ceiling of a run with bf16
//       products), ending with one JSON line.
// Every number is the best of --reps repetitions (the machine is shared).
// Flags: --reps N (default 5), --gemm_n=N (default 2048), --dram_mib=N
// (default 1024), --threads=N (default 2: the "all cores" column),
// --sections=abc (a subset of a, b, c, k, r to run; ratios need the
// ceilings they divide by; k and r divide by nothing else), --read_bytes=N
// (default 16 MiB).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/matmul.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/element_type.h"

#ifdef TRIBUTARY_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace tributary {
namespace {

struct Flags {
  int reps = 5;
  int64_t gemm_n = 2048;
  int64_t dram_mib = 1024;
  int threads = 2;
  std::string sections = "abc";  // which of (a), (b), (c), (k), (r) to run
  int64_t read_bytes = 16 << 20;  // (r)'s buffer
};

double BestSeconds(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const std::chrono::duration<double> d =
        std::chrono::steady_clock::now() - start;
    best = std::min(best, d.count());
  }
  return best;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<uint16_t> ToBf16(const std::vector<float>& f) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = F32ToBf16(f[i]);
  return h;
}

// w ([out, in] bf16) packed as bf16 pairs, as the CPU backend keeps the
// matrices its bf16 products multiply (matmul.h).
std::vector<uint16_t> PackedPairs(const std::vector<uint16_t>& w, int64_t out,
                                  int64_t in) {
  std::vector<uint16_t> packed(static_cast<size_t>(Bf16PairsElements(out, in)));
  PackBf16Pairs(w.data(), out, in, packed.data(), nullptr);
  return packed;
}

// Enough random bf16 copies of an [out, in] matrix that cycling through them
// reads ~256 MiB (>> the 32 MiB L3): the weights come from memory, as a real
// model's do. Seeds from `seed` on.
std::vector<std::vector<uint16_t>> CopiesBeyondL3(int64_t out, int64_t in,
                                                  uint32_t seed) {
  constexpr int64_t kWorkingSetBytes = int64_t{256} << 20;
  const int64_t bytes = out * in * 2;
  const int64_t copies =
      std::max<int64_t>(1, (kWorkingSetBytes + bytes - 1) / bytes);
  std::vector<std::vector<uint16_t>> ws;
  for (int64_t c = 0; c < copies; ++c) {
    ws.push_back(ToBf16(RandomFloats(out * in, seed + static_cast<uint32_t>(c))));
  }
  return ws;
}

// ---- (a) the FMA rate --------------------------------------------------------

// `iters` rounds of 12 independent chains a = STEP(a, b, c), kept in
// registers (the asm barrier stops the compiler from folding them): what a
// core's units reach with nothing else in the way. Returns a value of the
// chains, so that none is dead. One body for every probe: V is the chains'
// vector type (__m512 or __m256), OP makes the operands b and c (of 0.999999
// and 1e-7, so that the chains stay finite) from a float.
#define TRIB_CHAINS(V, SET1, OP, STEP, ADD, STORE, LANES)                    \
  V a0 = SET1(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,   \
    a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;                           \
  const auto b = OP(0.999999f), c = OP(1e-7f);                               \
  for (int64_t i = 0; i < iters; ++i) {                                      \
    a0 = STEP(a0, b, c); a1 = STEP(a1, b, c); a2 = STEP(a2, b, c);           \
    a3 = STEP(a3, b, c); a4 = STEP(a4, b, c); a5 = STEP(a5, b, c);           \
    a6 = STEP(a6, b, c); a7 = STEP(a7, b, c); a8 = STEP(a8, b, c);           \
    a9 = STEP(a9, b, c); a10 = STEP(a10, b, c); a11 = STEP(a11, b, c);       \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4),  \
                     "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9),       \
                     "+v"(a10), "+v"(a11));                                  \
  }                                                                          \
  const V sum = ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)),                       \
                        ADD(ADD(a4, a5), ADD(a6, a7))),                      \
                    ADD(ADD(a8, a9), ADD(a10, a11)));                        \
  /* (_mm512_reduce_add_ps trips GCC bug 105593) */                          \
  alignas(64) float out[LANES];                                              \
  STORE(out, sum);                                                           \
  return out[0];

// The FMA rate: a = a·b + c, the ceiling of any f32 product.
__attribute__((target("avx512f"))) float FmaChainsAvx512(int64_t iters) {
  TRIB_CHAINS(__m512, _mm512_set1_ps, _mm512_set1_ps, _mm512_fmadd_ps,
              _mm512_add_ps, _mm512_store_ps, 16)
}

// The same on AVX2 + FMA CPUs (16 ymm registers: the 12 chains, b and c).
__attribute__((target("avx2,fma"))) float FmaChainsAvx2(int64_t iters) {
  TRIB_CHAINS(__m256, _mm256_set1_ps, _mm256_set1_ps, _mm256_fmadd_ps,
              _mm256_add_ps, _mm256_store_ps, 8)
}

// AVX-512 BF16's VDPBF16PS, the instruction of the bf16 products
// (MatMulPrecision::kBF16): a += b·c over 16 lanes × 2 bf16 pairs (64
// FLOPs an instruction), the ceiling of a bf16 product. CPUs differ in what
// it costs against an f32 fma (a double-pumped AVX-512 core: the same rate,
// so twice the FLOPs; a full-width AVX-512 core: 1.8–1.9× the f32 FLOPs;
// another AVX-512 VM: a quarter of its rate).
#define TRIB_BF16_PAIRS(x) \
  _mm512_cvtne2ps_pbh(_mm512_set1_ps(x), _mm512_set1_ps(x))
__attribute__((target("avx512f,avx512bf16"))) float Bf16DotChains(
    int64_t iters) {
  TRIB_CHAINS(__m512, _mm512_set1_ps, TRIB_BF16_PAIRS, _mm512_dpbf16_ps,
              _mm512_add_ps, _mm512_store_ps, 16)
}
#undef TRIB_BF16_PAIRS
#undef TRIB_CHAINS

// The best of `reps` seconds of fn(t) run on threads t = 0 … threads − 1 at
// once (one chunk each), its results kept so that none is dead.
double BestSecondsOnThreads(int threads, int reps, ThreadPool* pool,
                            const std::function<float(int64_t)>& fn) {
  std::vector<float> sink(threads);
  const double s = BestSeconds(reps, [&] {
    pool->ParallelForWorker(
        threads,
        [&](int, int64_t begin, int64_t end) {
          for (int64_t t = begin; t < end; ++t) sink[t] = fn(t);
        },
        threads);
  });
  volatile float keep = sink[0];
  (void)keep;
  return s;
}

// Whether this CPU has a probe of its FMA rate: AVX-512 or AVX2 + FMA.
bool HasFmaProbe() {
  return __builtin_cpu_supports("avx512f") ||
         (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
}

// GFLOP/s of the fma chains on `threads` threads at once, per thread, at the
// widest vectors the CPU has (HasFmaProbe).
double FmaRatePerThread(int threads, int reps, ThreadPool* pool) {
  constexpr int64_t kIters = 4'000'000;
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const double s =
      BestSecondsOnThreads(threads, reps, pool, [avx512](int64_t) {
        return avx512 ? FmaChainsAvx512(kIters) : FmaChainsAvx2(kIters);
      });
  const double flops_per_iter = 12.0 * 2 * (avx512 ? 16 : 8);
  return kIters * flops_per_iter / s / 1e9;
}

// GFLOP/s of the VDPBF16PS chains on `threads` threads at once, per
// thread (needs MatMulBf16DotSupported()).
double Bf16DotRatePerThread(int threads, int reps, ThreadPool* pool) {
  constexpr int64_t kIters = 4'000'000;
  const double s = BestSecondsOnThreads(
      threads, reps, pool, [](int64_t) { return Bf16DotChains(kIters); });
  return kIters * 12.0 * 64 / s / 1e9;
}

// ---- (b) DRAM read bandwidth ----------------------------------------------

__attribute__((target("avx2"))) float SumAvx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out,
                  _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : out) s += v;
  return s;
}

float SumScalar(const float* p, size_t n) {
  float s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

// A 64-byte aligned buffer of `floats` floats holding a pattern.
using FloatBuffer = std::unique_ptr<float, void (*)(void*)>;
FloatBuffer PatternFloats(size_t floats) {
  // aligned_alloc wants a size that is a multiple of the alignment.
  FloatBuffer buf(static_cast<float*>(std::aligned_alloc(
                      64, (floats * sizeof(float) + 63) / 64 * 64)),
                  std::free);
  for (size_t i = 0; i < floats; ++i) buf.get()[i] = static_cast<float>(i & 7);
  return buf;
}

// GB/s of `threads` threads at once, each reading its share of buf[0, n)
// `passes` times. Shares are of whole 32-float blocks (SumAvx2 reads
// those); a last partial block is neither read nor counted.
double ReadGBs(const float* buf, size_t n, int threads, int passes, int reps,
               ThreadPool* pool) {
  const bool avx2 = __builtin_cpu_supports("avx2");
  const size_t blocks = n / 32;
  const double s =
      BestSecondsOnThreads(threads, reps, pool, [&](int64_t t) {
        const size_t lo = blocks * t / threads * 32,
                     hi = blocks * (t + 1) / threads * 32;
        float sum = 0;
        for (int pass = 0; pass < passes; ++pass) {
          sum += avx2 ? SumAvx2(buf + lo, hi - lo)
                      : SumScalar(buf + lo, hi - lo);
        }
        return sum;
      });
  return static_cast<double>(blocks * 32 * sizeof(float)) * passes / s / 1e9;
}

// ---- helpers for MatMul timing ----------------------------------------------

double GFlops(int64_t t, int64_t n, int64_t k, double seconds) {
  return 2.0 * t * n * k / seconds / 1e9;
}

#ifdef TRIBUTARY_HAVE_OPENBLAS
// y[T, N] = x[T, K] · W[N, K]ᵀ with W in f32.
void SgemmXWt(const float* x, int64_t t, int64_t k, const float* w, int64_t n,
              float* y) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(t),
              static_cast<int>(n), static_cast<int>(k), 1.0f, x,
              static_cast<int>(k), w, static_cast<int>(k), 0.0f, y,
              static_cast<int>(n));
}
#endif

double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(b[i]));
    max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  }
  return max_abs > 0 ? max_diff / max_abs : max_diff;
}

void Rule() { std::printf("%s\n", std::string(78, '-').c_str()); }

// (r) The ceilings of a tributary-bench run's roofline (its --peak-gflops
// and --read-gbps): the FMA rate of all threads at once, and the rate at
// which all threads at once read a buffer of --read_bytes, each its share,
// 16 passes a repetition. Given the model's weight bytes, that is how fast
// a batch-1 step could read its weights from wherever they stay between
// steps (the last-level cache when they fit, as the default model's 15 MB
// do). Ends with one JSON line for scripts (bench/engine/batching_gain.sh).
int RooflineCeilings(const Flags& flags, ThreadPool& pool_n) {
  Rule();
  if (!HasFmaProbe()) {
    std::fprintf(stderr, "(r) needs AVX-512 or AVX2 + FMA (its FMA chains)\n");
    return 1;
  }
  const double peak = flags.threads *
                      FmaRatePerThread(flags.threads, flags.reps, &pool_n);
  const size_t floats = static_cast<size_t>(flags.read_bytes) / sizeof(float);
  const FloatBuffer buf = PatternFloats(floats);
  const double read =
      ReadGBs(buf.get(), floats, flags.threads, 16, flags.reps, &pool_n);
  std::printf("(r) roofline ceilings, %d threads at once\n", flags.threads);
  std::printf("  fma chains (all threads)     %8.1f GFLOP/s\n", peak);
  std::printf("  read %lld bytes (all threads) %8.2f GB/s\n",
              static_cast<long long>(flags.read_bytes), read);
  if (!MatMulBf16DotSupported()) {
    std::printf("{\"peak_gflops\": %.3f, \"read_gbps\": %.3f}\n", peak,
                read);
    return 0;
  }
  // The bf16 products' ceiling, for runs with --cpu-matmul bf16.
  const double bf16_peak =
      flags.threads *
      Bf16DotRatePerThread(flags.threads, flags.reps, &pool_n);
  std::printf("  bf16 dot chains (all threads) %8.1f GFLOP/s\n", bf16_peak);
  std::printf(
      "{\"peak_gflops\": %.3f, \"read_gbps\": %.3f, "
      "\"bf16_peak_gflops\": %.3f}\n",
      peak, read, bf16_peak);
  return 0;
}

// (k) Our prefill against OpenBLAS by row length (bf16 weights for ours, the
// same values as f32 for OpenBLAS).
void RowLengthSweep(const Flags& flags, ThreadPool& pool1, ThreadPool& pool_n) {
  Rule();
#ifdef TRIBUTARY_HAVE_OPENBLAS
  constexpr int64_t kT = 512, kOut = 1024;
  std::printf(
      "(k) prefill T=%ld x %ld outputs by row length K: GFLOP/s, ours / "
      "OpenBLAS\n",
      static_cast<long>(kT), static_cast<long>(kOut));
  std::printf("  %6s %4s %9s %9s %6s\n", "K", "thr", "ours", "OpenBLAS",
              "ratio");
  for (const int64_t k : {256, 512, 1024, 1536, 2048, 2816, 5120}) {
    const std::vector<float> wf = RandomFloats(kOut * k, 12);
    const std::vector<uint16_t> wb = ToBf16(wf);
    const std::vector<uint16_t> wp = PackedPairs(wb, kOut, k);
    std::vector<float> wbf(wb.size());  // the bf16 values as f32
    for (size_t i = 0; i < wb.size(); ++i) wbf[i] = Bf16ToF32(wb[i]);
    const std::vector<float> x = RandomFloats(kT * k, 13);
    std::vector<float> y(kT * kOut), yb(kT * kOut);
    // OpenBLAS's threads keep spinning for a while after a call, and would
    // take a core from ours: ours runs first, after a pause.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    double ours[2], blas[2];
    for (int ti = 0; ti < 2; ++ti) {
      ThreadPool* pool = ti == 0 ? &pool1 : &pool_n;
      ours[ti] = GFlops(kT, kOut, k, BestSeconds(flags.reps, [&] {
                          MatMul(x.data(), kT, k, wp.data(),
                                 ElementType::kBF16, kOut, y.data(), pool,
                                 MatMulPrecision::kF32,
                                 WeightLayout::kBf16Pairs);
                        }));
    }
    for (int ti = 0; ti < 2; ++ti) {
      openblas_set_num_threads(ti == 0 ? 1 : flags.threads);
      blas[ti] = GFlops(kT, kOut, k, BestSeconds(flags.reps, [&] {
                          SgemmXWt(x.data(), kT, k, wbf.data(), kOut,
                                   yb.data());
                        }));
    }
    for (int ti = 0; ti < 2; ++ti) {
      std::printf("  %6ld %4d %9.1f %9.1f %6.2f\n", static_cast<long>(k),
                  ti == 0 ? 1 : flags.threads, ours[ti], blas[ti],
                  ours[ti] / blas[ti]);
    }
  }
#else
  (void)flags;
  (void)pool1;
  (void)pool_n;
  std::printf("(k) needs OpenBLAS, which this build lacks\n");
#endif
}

int Main(const Flags& flags) {
  ThreadPool pool1(1);
  ThreadPool pool_n(flags.threads);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf(
      "cpu_ceilings_bench: best of %d, %d threads max, MatMul path %s\n",
      flags.reps, flags.threads, CpuIsaName(BestCpuIsa()));
#ifdef TRIBUTARY_HAVE_OPENBLAS
  std::printf("OpenBLAS: OPENBLAS_CORETYPE=%s, core in use: %s, config: %s\n",
              coretype ? coretype : "(unset)", openblas_get_corename(),
              openblas_get_config());
#else
  (void)coretype;
  std::printf("OpenBLAS: not built in\n");
#endif

  const auto want = [&](char c) {
    return flags.sections.find(c) != std::string::npos;
  };
  // (a) GEMM peak. ------------------------------------------------------------
  double gemm_peak = 0;
  double bf16_peak = 0;  // 0: no AVX512_BF16
  if (want('a')) {
    Rule();
    // A chain probe's rate on one thread and on all at once.
    const auto chain_rates = [&](const char* title, const char* label,
                                 double (*rate)(int, int, ThreadPool*)) {
      std::printf("(a) %s (GFLOP/s a thread)\n", title);
      for (int threads : {1, flags.threads}) {
        std::printf("  %-19s %d thr  %8.1f\n", label, threads,
                    rate(threads, flags.reps, threads == 1 ? &pool1 : &pool_n));
      }
    };
    if (HasFmaProbe()) {
      chain_rates("the FMA rate: 12 independent fma chains a thread",
                  "fma chains", &FmaRatePerThread);
    }
    if (MatMulBf16DotSupported()) {
      chain_rates(
          "the bf16 dot rate: 12 independent VDPBF16PS chains a thread",
          "bf16 dot chains", &Bf16DotRatePerThread);
    }
    const int64_t g = flags.gemm_n;
    std::printf("(a) f32 GEMM %ld x %ld x %ld (GFLOP/s)\n",
                static_cast<long>(g), static_cast<long>(g),
                static_cast<long>(g));
    const std::vector<float> ga = RandomFloats(g * g, 1),
                             gb = RandomFloats(g * g, 2);
    std::vector<float> gc(g * g), gc_ours(g * g);
    double ours_gemm[2] = {0, 0};
    for (int ti = 0; ti < 2; ++ti) {
      const int threads = ti == 0 ? 1 : flags.threads;
      ThreadPool* pool = ti == 0 ? &pool1 : &pool_n;
      const double s_ours = BestSeconds(flags.reps, [&] {
        MatMul(ga.data(), g, g, gb.data(), ElementType::kF32, g, gc_ours.data(),
               pool);
      });
      ours_gemm[ti] = GFlops(g, g, g, s_ours);
      gemm_peak = std::max(gemm_peak, ours_gemm[ti]);
      std::printf("  ours (f32 W)        %d thr  %8.1f\n", threads,
                  ours_gemm[ti]);
#ifdef TRIBUTARY_HAVE_OPENBLAS
      openblas_set_num_threads(threads);
      const double s_blas = BestSeconds(flags.reps, [&] {
        SgemmXWt(ga.data(), g, g, gb.data(), g, gc.data());
      });
      const double blas = GFlops(g, g, g, s_blas);
      gemm_peak = std::max(gemm_peak, blas);
      std::printf(
          "  OpenBLAS sgemm      %d thr  %8.1f   (max rel diff vs ours %.1e)\n",
          threads, blas, MaxRelDiff(gc, gc_ours));
#endif
    }
    std::printf("  => GEMM ceiling (best of the above): %.1f GFLOP/s\n",
                gemm_peak);
    if (MatMulBf16DotSupported()) {
      const std::vector<uint16_t> gbb = PackedPairs(ToBf16(gb), g, g);
      for (int ti = 0; ti < 2; ++ti) {
        ThreadPool* pool = ti == 0 ? &pool1 : &pool_n;
        const double sec = BestSeconds(flags.reps, [&] {
          MatMul(ga.data(), g, g, gbb.data(), ElementType::kBF16, g,
                 gc.data(), pool, MatMulPrecision::kBF16,
                 WeightLayout::kBf16Pairs);
        });
        bf16_peak = std::max(bf16_peak, GFlops(g, g, g, sec));
        std::printf("  ours (bf16 products) %d thr %8.1f\n",
                    ti == 0 ? 1 : flags.threads, GFlops(g, g, g, sec));
      }
      std::printf("  => bf16 products ceiling: %.1f GFLOP/s (%.2fx f32)\n",
                  bf16_peak, bf16_peak / gemm_peak);
    }
  }

  // (b) DRAM read bandwidth.
  // ---------------------------------------------------
  double dram_peak = 0;
  if (want('b')) {
    Rule();
    const size_t dram_floats = static_cast<size_t>(flags.dram_mib) << 18;
    FloatBuffer dram = PatternFloats(dram_floats);
    std::printf("(b) DRAM streaming read of %ld MiB (GB/s)\n",
                static_cast<long>(flags.dram_mib));
    for (int threads : {1, flags.threads}) {
      const double gbs =
          ReadGBs(dram.get(), dram_floats, threads, 1, flags.reps,
                  threads == 1 ? &pool1 : &pool_n);
      dram_peak = std::max(dram_peak, gbs);
      std::printf("  read                %d thr  %8.2f\n", threads, gbs);
    }
    dram.reset();
    std::printf("  => DRAM ceiling (best of the above): %.2f GB/s\n",
                dram_peak);
  }
  if (want('r') && RooflineCeilings(flags, pool_n) != 0) return 1;
  if (want('k')) RowLengthSweep(flags, pool1, pool_n);
  if (!want('c')) return 0;

  // (c) MatMul on model shapes.
  // ------------------------------------------------
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  const Shape shapes[] = {{"lm_head/embed 32000x1024", 32000, 1024},
                          {"mlp up/gate 2816x1024", 2816, 1024},
                          {"mlp down 1024x2816", 1024, 2816},
                          {"attn qkv-like 4096x1024", 4096, 1024}};
  Rule();
  std::printf(
      "(c1) decode, bf16 weights: GB/s of weights read, %% of DRAM ceiling\n");
  std::printf("  %-28s %3s %6s %9s %6s %9s %6s\n", "shape [out x in]", "T",
              "copies", "1 thr", "%DRAM", "all thr", "%DRAM");
  for (const Shape& s : shapes) {
    const int64_t bytes = s.out * s.in * 2;
    // Packed as the CPU backend packs bf16 matrices (f32 products on bf16
    // pairs).
    std::vector<std::vector<uint16_t>> ws;
    for (const auto& w : CopiesBeyondL3(s.out, s.in, 100)) {
      ws.push_back(PackedPairs(w, s.out, s.in));
    }
    const int64_t copies = static_cast<int64_t>(ws.size());
    for (int64_t t : {1, 4}) {
      const std::vector<float> x = RandomFloats(t * s.in, 7);
      std::vector<float> y(t * s.out);
      double gbs[2];
      for (int pi = 0; pi < 2; ++pi) {
        ThreadPool* pool = pi == 0 ? &pool1 : &pool_n;
        const double sec = BestSeconds(flags.reps, [&] {
          for (const auto& w : ws) {
            MatMul(x.data(), t, s.in, w.data(), ElementType::kBF16, s.out,
                   y.data(), pool, MatMulPrecision::kF32,
                   WeightLayout::kBf16Pairs);
          }
        });
        gbs[pi] = static_cast<double>(bytes) * copies / sec / 1e9;
      }
      std::printf("  %-28s %3ld %6ld %9.2f %5.1f%% %9.2f %5.1f%%\n", s.name,
                  static_cast<long>(t), static_cast<long>(copies), gbs[0],
                  100.0 * gbs[0] / dram_peak, gbs[1],
                  100.0 * gbs[1] / dram_peak);
    }
  }

  for (const int64_t kT : {int64_t{512}, int64_t{32}}) {
    Rule();
    std::printf(
        "(c2) %s T=%ld, %d threads: GFLOP/s, %% of GEMM ceiling (bf16 "
        "products: of theirs)\n",
        kT == 32 ? "batched decode" : "prefill", static_cast<long>(kT),
        flags.threads);
    std::printf("  %-28s %9s %6s %9s %6s %9s %6s %9s %6s\n",
                "shape [out x in]", "ours bf16", "%peak", "ours f32", "%peak",
                "BLAS f32", "%peak", "bf16 prod", "%peak");
    for (const Shape& s : shapes) {
      const std::vector<float> wf = RandomFloats(s.out * s.in, 9);
      const std::vector<uint16_t> wb = ToBf16(wf);
      const std::vector<uint16_t> wp = PackedPairs(wb, s.out, s.in);
      const std::vector<float> x = RandomFloats(kT * s.in, 10);
      std::vector<float> y(kT * s.out);
      const double s_bf16 = BestSeconds(flags.reps, [&] {
        MatMul(x.data(), kT, s.in, wp.data(), ElementType::kBF16, s.out,
               y.data(), &pool_n, MatMulPrecision::kF32,
               WeightLayout::kBf16Pairs);
      });
      const double s_f32 = BestSeconds(flags.reps, [&] {
        MatMul(x.data(), kT, s.in, wf.data(), ElementType::kF32, s.out,
               y.data(), &pool_n);
      });
      double blas = 0;
#ifdef TRIBUTARY_HAVE_OPENBLAS
      openblas_set_num_threads(flags.threads);
      std::vector<float> yb(kT * s.out);
      blas = GFlops(kT, s.out, s.in, BestSeconds(flags.reps, [&] {
                      SgemmXWt(x.data(), kT, s.in, wf.data(), s.out,
                               yb.data());
                    }));
#endif
      double prod = 0;
      if (bf16_peak > 0) {
        prod = GFlops(kT, s.out, s.in, BestSeconds(flags.reps, [&] {
                        MatMul(x.data(), kT, s.in, wp.data(),
                               ElementType::kBF16, s.out, y.data(), &pool_n,
                               MatMulPrecision::kBF16,
                               WeightLayout::kBf16Pairs);
                      }));
      }
      const double ours_b = GFlops(kT, s.out, s.in, s_bf16);
      const double ours_f = GFlops(kT, s.out, s.in, s_f32);
      std::printf(
          "  %-28s %9.1f %5.1f%% %9.1f %5.1f%% %9.1f %5.1f%% %9.1f %5.1f%%\n",
          s.name, ours_b, 100 * ours_b / gemm_peak, ours_f,
          100 * ours_f / gemm_peak, blas, 100 * blas / gemm_peak, prod,
          bf16_peak > 0 ? 100 * prod / bf16_peak : 0.0);
    }
  }

  // (c3) Batched decode with the weights coming from memory, as in a model
  // larger than the caches: copies cycled as in (c1).
  Rule();
  std::printf(
      "(c3) batched decode T=32 from memory (copies as in c1), %d threads: "
      "GFLOP/s, %% of GEMM ceiling (bf16 products: of theirs)\n",
      flags.threads);
  std::printf("  %-28s %6s %9s %6s %9s %6s\n", "shape [out x in]", "copies",
              "ours bf16", "%peak", "bf16 prod", "%peak");
  for (const Shape& s : shapes) {
    constexpr int64_t kT = 32;
    const std::vector<std::vector<uint16_t>> ws =
        CopiesBeyondL3(s.out, s.in, 200);
    const int64_t copies = static_cast<int64_t>(ws.size());
    const std::vector<float> x = RandomFloats(kT * s.in, 11);
    std::vector<float> y(kT * s.out);
    const auto rate = [&](const std::vector<std::vector<uint16_t>>& copies_of,
                          MatMulPrecision precision, WeightLayout layout) {
      const double sec = BestSeconds(flags.reps, [&] {
        for (const auto& w : copies_of) {
          MatMul(x.data(), kT, s.in, w.data(), ElementType::kBF16, s.out,
                 y.data(), &pool_n, precision, layout);
        }
      });
      return GFlops(kT, s.out, s.in, sec / static_cast<double>(copies));
    };
    std::vector<std::vector<uint16_t>> packed;
    for (const auto& w : ws) packed.push_back(PackedPairs(w, s.out, s.in));
    const double ours_b =
        rate(packed, MatMulPrecision::kF32, WeightLayout::kBf16Pairs);
    double prod = 0.0;
    if (bf16_peak > 0) {
      prod = rate(packed, MatMulPrecision::kBF16, WeightLayout::kBf16Pairs);
    }
    std::printf("  %-28s %6ld %9.1f %5.1f%% %9.1f %5.1f%%\n", s.name,
                static_cast<long>(copies), ours_b, 100 * ours_b / gemm_peak,
                prod, bf16_peak > 0 ? 100 * prod / bf16_peak : 0.0);
  }
  Rule();
  return 0;
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"reps", "gemm_n", "dram_mib", "threads", "sections",
                                   "read_bytes"},
                                  {}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  Flags flags;
  ASSIGN_OR_RETURN(int64_t reps, args.GetInt("reps", flags.reps, 1, 1000));
  ASSIGN_OR_RETURN(flags.gemm_n, args.GetInt("gemm_n", flags.gemm_n, 16, 1 << 15));
  ASSIGN_OR_RETURN(flags.dram_mib, args.GetInt("dram_mib", flags.dram_mib, 64, 1 << 20));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", flags.threads, 1, 1024));
  ASSIGN_OR_RETURN(flags.read_bytes,
                   args.GetInt("read_bytes", flags.read_bytes, 4096, int64_t{1} << 36));
  flags.reps = static_cast<int>(reps);
  flags.threads = static_cast<int>(threads);
  flags.sections = args.GetOr("sections", flags.sections);
  if (flags.sections.find_first_not_of("abckr") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sections takes letters of 'abckr', got '", flags.sections, "'"));
  }
  if (Main(flags) != 0) return absl::InternalError("benchmark failed");
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("cpu_ceilings_bench", [&] {
    return tributary::Run(argc, argv);
  });
}
