// Element types of the tensors the backends compute with, and the scalar
// conversions between them. Weights may be stored as bf16, f16 or f32; the CPU
// backend computes in f32. (engine/model/dtype.h is the other enum: every
// dtype a safetensors file may hold; the loader maps the three float ones
// onto these.)
#ifndef TRIBUTARY_ENGINE_BACKEND_ELEMENT_TYPE_H_
#define TRIBUTARY_ENGINE_BACKEND_ELEMENT_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>

namespace tributary {

// kI32 holds token ids and positions; the float types hold everything else.
enum class ElementType : uint8_t { kF32, kBF16, kF16, kI32 };

inline size_t ElementTypeSizeBytes(ElementType type) {
  return type == ElementType::kF32 || type == ElementType::kI32 ? 4 : 2;
}

inline const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kF32:
      return "f32";
    case ElementType::kBF16:
      return "bf16";
    case ElementType::kF16:
      return "f16";
    case ElementType::kI32:
      return "i32";
  }
  return "?";
}

// bf16 is the top half of an IEEE f32: widening is exact.
inline float Bf16ToF32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even, as PyTorch does; NaN stays NaN (quiet).
inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// IEEE half → f32, exact (subnormals, infinities and NaN included).
inline float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t u;
  if (exponent == 0) {
    if (mantissa == 0) {
      u = sign;
    } else {  // Subnormal: normalise.
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      u = sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) |
          (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else {
    u = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// f32 → IEEE half, round to nearest even; overflow gives ±Inf, NaN stays NaN.
inline uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // ≥ 65520: Inf
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half (or 0)
    float a;
    std::memcpy(&a, &magnitude, sizeof a);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  magnitude += 0xfffu + ((magnitude >> 13) & 1u);  // round to nearest even
  magnitude -= (127u - 15u) << 23;                  // rebias the exponent
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

// Element i of a buffer of `type`, widened to f32.
inline float LoadAsF32(const void* data, ElementType type, size_t i) {
  switch (type) {
    case ElementType::kF32:
      return static_cast<const float*>(data)[i];
    case ElementType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    case ElementType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
    case ElementType::kI32:
      return static_cast<float>(static_cast<const int32_t*>(data)[i]);
  }
  return 0.0f;
}

// Stores `value` as element i of a buffer of `type`, rounded to nearest
// even (kI32: truncated).
inline void StoreFromF32(void* data, ElementType type, size_t i, float value) {
  switch (type) {
    case ElementType::kF32:
      static_cast<float*>(data)[i] = value;
      return;
    case ElementType::kBF16:
      static_cast<uint16_t*>(data)[i] = F32ToBf16(value);
      return;
    case ElementType::kF16:
      static_cast<uint16_t*>(data)[i] = F32ToF16(value);
      return;
    case ElementType::kI32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value);
      return;
  }
}

// `value` as a store in `type` would read it back (the rounding a stored
// value carries).
inline float RoundToType(ElementType type, float value) {
  switch (type) {
    case ElementType::kBF16:
      return Bf16ToF32(F32ToBf16(value));
    case ElementType::kF16:
      return F16ToF32(F32ToF16(value));
    default:
      return value;
  }
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_ELEMENT_TYPE_H_
