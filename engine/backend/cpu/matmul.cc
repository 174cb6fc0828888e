#include "engine/backend/cpu/matmul.h"

#include <cpuid.h>

#include <algorithm>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/matmul_kernels.h"

namespace tributary {

using matmul_internal::Bf16DotKernels;
using matmul_internal::MatMulKernels;

namespace {

// Prefill packs a block of weight rows, widened to f32, into a per-worker
// buffer of about this size, then runs every token tile over it: each weight
// is widened once per call and reused num_tokens times. Tuned for a 1 MiB L2
// (Zen 4), which must also hold the token tiles streaming through: on
// 2048³, 192 KiB gave 73–80 GFLOP/s on one core, 384 KiB 91, 512 KiB 94; the
// model's shapes (K = 1024, 2816, T = 512) were the same (~100–108) for all.
constexpr int64_t kPackBytes = 384 * 1024;
// Threads split the output features in units of this many rows.
constexpr int64_t kRowsPerUnit = 16;
// Below this many multiply-adds a call stays on the calling thread: waking a
// worker costs more than the work.
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;

const MatMulKernels& KernelsFor(MatMulIsa isa) {
  switch (isa) {
    case MatMulIsa::kAvx512:
      return matmul_internal::Avx512Kernels();
    case MatMulIsa::kAvx2:
      return matmul_internal::Avx2Kernels();
    case MatMulIsa::kScalar:
    case MatMulIsa::kAuto:
      break;
  }
  return matmul_internal::ScalarKernels();
}

struct Problem {
  const float* x;
  int64_t num_tokens;
  int64_t in_features;
  const char* w;  // bytes
  ElementType w_type;
  int64_t out_features;
  float* y;
};

// Floats between packed rows: the row rounded up to 16 floats (64 bytes),
// plus 16, so that consecutive rows start on different L1 sets.
int64_t PackStride(int64_t in_features) {
  return (in_features + 15) / 16 * 16 + 16;
}

// Rows of the prefill pack block (a multiple of 8, at least 8).
int64_t PackRows(int64_t in_features) {
  const int64_t rows = kPackBytes / (PackStride(in_features) *
                                     static_cast<int64_t>(sizeof(float)));
  return rows < 8 ? 8 : rows / 8 * 8;
}

// Calls tile(m, t0, o, rows, n_store, next) for the token tiles of
// [t_begin, t_end) over weight rows [o_begin, o_end), whose row o starts at
// row_base + (o − row_origin) · row_bytes; `next` is the next tile's first
// row when prefetch_next (else null). RowPtr: the tile's row pointer type.
template <typename RowPtr, typename Tile>
void ForEachTile(int mr, const int* nr_of_m, int64_t t_begin, int64_t t_end,
                 int64_t o_begin, int64_t o_end, const char* row_base,
                 int64_t row_origin, int64_t row_bytes, bool prefetch_next,
                 const Tile& tile) {
  RowPtr rows[matmul_internal::kMaxTileRows];
  for (int64_t t0 = t_begin; t0 < t_end; t0 += mr) {
    const int m = static_cast<int>(std::min<int64_t>(mr, t_end - t0));
    const int nr = nr_of_m[m];
    for (int64_t o = o_begin; o < o_end; o += nr) {
      // A partial tile repeats its last row; only valid outputs are stored.
      for (int r = 0; r < nr; ++r) {
        rows[r] = reinterpret_cast<RowPtr>(
            row_base + (std::min(o + r, o_end - 1) - row_origin) * row_bytes);
      }
      const char* next = prefetch_next && o + nr < o_end
                             ? row_base + (o + nr - row_origin) * row_bytes
                             : nullptr;
      tile(m, t0, o, rows, static_cast<int>(std::min<int64_t>(nr, o_end - o)),
           next);
    }
  }
}

// Runs token tiles [t_begin, t_end) over weight rows [o_begin, o_end) (see
// ForEachTile) of type row_type.
void RunTiles(const MatMulKernels& kern, const Problem& p, int64_t t_begin,
              int64_t t_end, int64_t o_begin, int64_t o_end,
              const char* row_base, int64_t row_origin, int64_t row_bytes,
              ElementType row_type, bool prefetch_next) {
  ForEachTile<const void*>(
      kern.mr, kern.nr, t_begin, t_end, o_begin, o_end, row_base, row_origin,
      row_bytes, prefetch_next,
      [&](int m, int64_t t0, int64_t o, const void* const* rows, int n_store,
          const char* next) {
        kern.tile(m, p.x + t0 * p.in_features, p.in_features, rows, row_type,
                  p.in_features, p.y + t0 * p.out_features + o, p.out_features,
                  n_store, next);
      });
}

// All tokens × output features [o_begin, o_end). `scratch`: PackRows(K) ·
// PackStride(K) floats, used only in prefill.
void RunRows(const MatMulKernels& kern, const Problem& p, int64_t o_begin,
             int64_t o_end, float* scratch) {
  const int64_t k = p.in_features;
  const int64_t w_row_bytes =
      k * static_cast<int64_t>(ElementTypeSizeBytes(p.w_type));
  if (p.num_tokens <= kern.mr) {
    // Decode (one token tile: every weight is read once anyway): the tiles
    // stream the stored rows directly, widening in registers.
    RunTiles(kern, p, 0, p.num_tokens, o_begin, o_end, p.w, 0, w_row_bytes,
             p.w_type, /*prefetch_next=*/true);
    return;
  }
  // Prefill: widen a block of rows into the scratch buffer (f32 rows too:
  // the copy is cheap next to num_tokens reuses, and its padded stride keeps
  // the rows of a tile off the same L1 sets, which 4 KiB-strided rows are
  // not), then run every token tile over it while it sits in L2.
  const int64_t stride = PackStride(k);
  const int64_t block = PackRows(k);
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    const int64_t oe = std::min(ob + block, o_end);
    for (int64_t o = ob; o < oe; ++o) {
      kern.widen(p.w + o * w_row_bytes, p.w_type, k,
                 scratch + (o - ob) * stride);
    }
    RunTiles(kern, p, 0, p.num_tokens, ob, oe,
             reinterpret_cast<const char*>(scratch), ob,
             stride * static_cast<int64_t>(sizeof(float)), ElementType::kF32,
             /*prefetch_next=*/false);
  }
}

// The bf16 products (MatMulPrecision::kBF16): x already rounded to bf16
// (`xb`, num_tokens × in_features), bf16 weights; all tokens × output
// features [o_begin, o_end). Nothing is widened, so prefill needs no pack
// buffer: it runs every token tile over a block of rows (kPackBytes of
// them) while the block sits in L2.
void RunRowsBf16(const Bf16DotKernels& kern, const Problem& p,
                 const uint16_t* xb, int64_t o_begin, int64_t o_end) {
  const int64_t k = p.in_features;
  const int64_t row_bytes = k * static_cast<int64_t>(sizeof(uint16_t));
  const auto tile = [&](int m, int64_t t0, int64_t o,
                        const uint16_t* const* rows, int n_store,
                        const char* next) {
    kern.tile(m, xb + t0 * k, k, rows, k, p.y + t0 * p.out_features + o,
              p.out_features, n_store, next);
  };
  if (p.num_tokens <= kern.mr) {
    ForEachTile<const uint16_t*>(kern.mr, kern.nr, 0, p.num_tokens, o_begin,
                                 o_end, p.w, 0, row_bytes,
                                 /*prefetch_next=*/true, tile);
    return;
  }
  const int64_t block = std::max<int64_t>(8, kPackBytes / row_bytes / 8 * 8);
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    ForEachTile<const uint16_t*>(kern.mr, kern.nr, 0, p.num_tokens, ob,
                                 std::min(ob + block, o_end), p.w, 0,
                                 row_bytes, /*prefetch_next=*/false, tile);
  }
}

// CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c").
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

struct AlignedFloats {
  void operator()(float* p) const {
    ::operator delete[](p, std::align_val_t{64});
  }
};

// Splits the output features over the pool's threads, kRowsPerUnit rows at
// a time (the calling thread alone below kMinParallelMacs): both precisions.
// run_units(worker, o_begin, o_end).
template <typename RunUnits>
void SplitOutputs(ThreadPool* pool, int64_t macs, int64_t out_features,
                  const RunUnits& run_units) {
  const int max_chunks = macs < kMinParallelMacs ? 1 : ThreadPool::kNoLimit;
  const int64_t num_units = (out_features + kRowsPerUnit - 1) / kRowsPerUnit;
  pool->ParallelForWorker(
      num_units,
      [&](int worker, int64_t begin, int64_t end) {
        run_units(worker, begin * kRowsPerUnit,
                  std::min(end * kRowsPerUnit, out_features));
      },
      max_chunks);
}

void MatMulBf16(MatMulIsa isa, const float* x, int64_t num_tokens,
                int64_t in_features, const uint16_t* w, int64_t out_features,
                float* y, ThreadPool* pool) {
  const Bf16DotKernels& kern = isa == MatMulIsa::kAvx512 &&
                                       MatMulBf16DotSupported()
                                   ? matmul_internal::Avx512Bf16DotKernels()
                                   : matmul_internal::ScalarBf16DotKernels();
  // x rounded once, here, for every worker (num_tokens · in_features
  // conversions against num_tokens · in_features · out_features products).
  std::unique_ptr<uint16_t[]> xb(new uint16_t[num_tokens * in_features]);
  kern.round(x, num_tokens * in_features, xb.get());
  const Problem problem{x,
                        num_tokens,
                        in_features,
                        reinterpret_cast<const char*>(w),
                        ElementType::kBF16,
                        out_features,
                        y};
  if (pool == nullptr) {
    RunRowsBf16(kern, problem, xb.get(), 0, out_features);
    return;
  }
  SplitOutputs(pool, num_tokens * in_features * out_features, out_features,
               [&](int /*worker*/, int64_t o_begin, int64_t o_end) {
                 RunRowsBf16(kern, problem, xb.get(), o_begin, o_end);
               });
}

}  // namespace

const char* MatMulIsaName(MatMulIsa isa) {
  switch (isa) {
    case MatMulIsa::kAuto:
      return "auto";
    case MatMulIsa::kScalar:
      return "scalar";
    case MatMulIsa::kAvx2:
      return "avx2";
    case MatMulIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool MatMulIsaSupported(MatMulIsa isa) {
  switch (isa) {
    case MatMulIsa::kAuto:
    case MatMulIsa::kScalar:
      return true;
    case MatMulIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             HasF16c();
    case MatMulIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") &&
             MatMulIsaSupported(MatMulIsa::kAvx2);
  }
  return false;
}

const char* MatMulPrecisionName(MatMulPrecision precision) {
  return precision == MatMulPrecision::kBF16 ? "bf16" : "f32";
}

absl::StatusOr<MatMulPrecision> ParseMatMulPrecision(absl::string_view name) {
  if (name == "f32") return MatMulPrecision::kF32;
  if (name == "bf16") return MatMulPrecision::kBF16;
  return absl::InvalidArgumentError(absl::StrCat(
      "matmul precision \"", name, "\" is not one of f32, bf16"));
}

bool MatMulBf16DotSupported() {
  static const bool supported = MatMulIsaSupported(MatMulIsa::kAvx512) &&
                                __builtin_cpu_supports("avx512bf16");
  return supported;
}

MatMulIsa BestMatMulIsa() {
  if (MatMulIsaSupported(MatMulIsa::kAvx512)) return MatMulIsa::kAvx512;
  if (MatMulIsaSupported(MatMulIsa::kAvx2)) return MatMulIsa::kAvx2;
  return MatMulIsa::kScalar;
}

MatMulIsa ResolveMatMulIsa(MatMulIsa isa) {
  if (isa == MatMulIsa::kAuto) {
    static const MatMulIsa best = BestMatMulIsa();  // a property of the CPU
    return best;
  }
  return MatMulIsaSupported(isa) ? isa : MatMulIsa::kScalar;
}

void MatMul(const float* x, int64_t num_tokens, int64_t in_features,
            const void* w, ElementType w_type, int64_t out_features, float* y,
            ThreadPool* pool, MatMulPrecision precision) {
  MatMulWithIsa(MatMulIsa::kAuto, x, num_tokens, in_features, w, w_type,
                out_features, y, pool, precision);
}

void MatMulWithIsa(MatMulIsa isa, const float* x, int64_t num_tokens,
                   int64_t in_features, const void* w, ElementType w_type,
                   int64_t out_features, float* y, ThreadPool* pool,
                   MatMulPrecision precision) {
  if (num_tokens <= 0 || out_features <= 0) return;
  if (in_features <= 0) {
    std::fill(y, y + num_tokens * out_features, 0.0f);
    return;
  }
  isa = ResolveMatMulIsa(isa);
  if (precision == MatMulPrecision::kBF16 && w_type == ElementType::kBF16) {
    MatMulBf16(isa, x, num_tokens, in_features,
               static_cast<const uint16_t*>(w), out_features, y, pool);
    return;
  }
  // The vector paths know the three float weight types; anything else goes
  // through the scalar path's LoadAsF32.
  if (w_type != ElementType::kF32 && w_type != ElementType::kBF16 &&
      w_type != ElementType::kF16) {
    isa = MatMulIsa::kScalar;
  }
  const MatMulKernels& kern = KernelsFor(isa);

  const Problem problem{x,
                        num_tokens,
                        in_features,
                        static_cast<const char*>(w),
                        w_type,
                        out_features,
                        y};
  // Decode reads the stored rows directly and needs no buffer.
  const size_t scratch_bytes =
      num_tokens <= kern.mr ? 0
                            : static_cast<size_t>(PackRows(in_features) *
                                                  PackStride(in_features)) *
                                  sizeof(float);
  if (pool == nullptr) {
    std::unique_ptr<float, AlignedFloats> scratch(
        scratch_bytes == 0 ? nullptr
                           : static_cast<float*>(::operator new[](
                                 scratch_bytes, std::align_val_t{64})));
    RunRows(kern, problem, 0, out_features, scratch.get());
    return;
  }
  SplitOutputs(pool, num_tokens * in_features * out_features, out_features,
               [&](int worker, int64_t o_begin, int64_t o_end) {
                 float* scratch = static_cast<float*>(
                     pool->WorkerScratch(worker, scratch_bytes));
                 RunRows(kern, problem, o_begin, o_end, scratch);
               });
}

}  // namespace tributary
