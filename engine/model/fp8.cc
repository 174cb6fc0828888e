#include "engine/model/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tributary {

float E4m3ToF32Reference(uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    return std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // m/8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f,
                           exponent - 7);
  }
  return negative ? -magnitude : magnitude;
}

const std::array<float, 256>& E4m3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = E4m3ToF32Reference(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

uint8_t F32ToE4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7E;
  // The codes' magnitudes increase with the code (0x00 .. 0x7E): find the
  // nearest, ties to the even code (even mantissa).
  const std::array<float, 256>& t = E4m3Table();
  int lo = 0, hi = 0x7E;  // t[lo] <= a < t[hi] once narrowed
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (t[mid] <= a) lo = mid; else hi = mid;
  }
  if (t[hi] <= a) lo = hi;
  int code = lo;
  if (lo < 0x7E && t[lo] != a) {
    const float below = a - t[lo], above = t[lo + 1] - a;
    if (above < below || (above == below && (lo & 1) != 0)) code = lo + 1;
  }
  return static_cast<uint8_t>(sign | code);
}

Fp8BlockWeight QuantizeFp8Block(const float* w, int64_t rows, int64_t cols,
                                int64_t block_rows, int64_t block_cols) {
  const int64_t br = (rows + block_rows - 1) / block_rows;
  const int64_t bc = (cols + block_cols - 1) / block_cols;
  Fp8BlockWeight out;
  out.q.resize(static_cast<size_t>(rows * cols));
  out.scale_inv.assign(static_cast<size_t>(br * bc), 1.0f);
  for (int64_t bi = 0; bi < br; ++bi) {
    for (int64_t bj = 0; bj < bc; ++bj) {
      const int64_t i0 = bi * block_rows, i1 = std::min(rows, i0 + block_rows);
      const int64_t j0 = bj * block_cols, j1 = std::min(cols, j0 + block_cols);
      float amax = 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) amax = std::fmax(amax, std::fabs(w[i * cols + j]));
      }
      const float scale_inv = amax > 0.0f ? amax / kE4m3Max : 1.0f;
      out.scale_inv[bi * bc + bj] = scale_inv;
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) {
          out.q[i * cols + j] = F32ToE4m3(w[i * cols + j] / scale_inv);
        }
      }
    }
  }
  return out;
}

}  // namespace tributary
