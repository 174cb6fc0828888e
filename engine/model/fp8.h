// Float8 e4m3 ("e4m3fn": 1 sign, 4 exponent bits with bias 7, 3 mantissa
// bits; no infinities, S.1111.111 is NaN, max finite ±448) and Qwen's FP8
// block checkpoints (quantization_config quant_method "fp8", fmt "e4m3",
// weight_block_size [128, 128]): the conversions and the block
// (de)quantization of one [out, in] weight.
//
// The block convention, as the reference implementations apply it:
//   w[i][j] = q[i][j] * weight_scale_inv[i / bm][j / bn]
// with weight_scale_inv of shape [ceil(out / bm), ceil(in / bn)]: the stored
// tensor is the dequantization multiplier despite its name.
//   - transformers, src/transformers/integrations/finegrained_fp8.py:
//     FP8Linear allocates weight_scale_inv as [(out + bm - 1) // bm,
//     (in + bn - 1) // bn] f32; Fp8Dequantize multiplies the f32 weight by
//     the block-broadcast scales; Fp8Quantize stores
//     weight_scale_inv = 1 / (448 / amax) = amax / 448 per block.
//   - vLLM, model_executor/layers/quantization/fp8.py (create_weights):
//     "weight_scale_inv" is a BlockQuantScaleParameter of the same
//     ceil-divided shape.
//   - SGLang, srt/layers/quantization/fp8_utils.py block_quant_dequant:
//     x_s.repeat_interleave(block_n, -2).repeat_interleave(block_k, -1)
//     cropped to [n, k], times x_q in f32, then cast (to bf16 in
//     dequantization.py).
#ifndef TRIBUTARY_ENGINE_MODEL_FP8_H_
#define TRIBUTARY_ENGINE_MODEL_FP8_H_

#include <array>
#include <cstdint>
#include <vector>

namespace tributary {

inline constexpr float kE4m3Max = 448.0f;

// The value of an e4m3 code, computed from its fields (no table): the
// reference the table is checked against.
float E4m3ToF32Reference(uint8_t code);

// The 256 values, built once from E4m3ToF32Reference.
const std::array<float, 256>& E4m3Table();
inline float E4m3ToF32(uint8_t code) { return E4m3Table()[code]; }

// Round to nearest, ties to even (as PyTorch's and ml_dtypes' casts to
// float8_e4m3fn), saturating: |x| beyond 448 gives ±448 (the quantizers
// clamp to ±448 before the cast), NaN gives 0x7F.
uint8_t F32ToE4m3(float x);

// A weight quantized per block: q [rows, cols] e4m3 codes, scale_inv
// [ceil(rows / block_rows), ceil(cols / block_cols)] f32.
struct Fp8BlockWeight {
  std::vector<uint8_t> q;
  std::vector<float> scale_inv;
};

// The quantizer of the published format (transformers' Fp8Quantize, without
// its exact-tiling restriction): per block, amax = max |w|,
// scale_inv = amax / 448 (1 for an all-zero block), q = e4m3(w / scale_inv).
Fp8BlockWeight QuantizeFp8Block(const float* w, int64_t rows, int64_t cols,
                                int64_t block_rows, int64_t block_cols);

// w[i][j] = E4m3ToF32(q[i][j]) * scale_inv(i / block_rows, j / block_cols)
// in f32, where `scale_inv(bi, bj)` reads the scale tensor.
template <typename ScaleAt, typename Store>
void DequantizeFp8Block(const uint8_t* q, int64_t rows, int64_t cols,
                        int64_t block_rows, int64_t block_cols,
                        const ScaleAt& scale_inv, const Store& store) {
  const std::array<float, 256>& table = E4m3Table();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t jb = 0; jb * block_cols < cols; ++jb) {
      const float s = scale_inv(i / block_rows, jb);
      const int64_t end = (jb + 1) * block_cols < cols ? (jb + 1) * block_cols
                                                       : cols;
      for (int64_t j = jb * block_cols; j < end; ++j) {
        store(i * cols + j, table[q[i * cols + j]] * s);
      }
    }
  }
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_FP8_H_
