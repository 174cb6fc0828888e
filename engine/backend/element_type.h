// Element types of the tensors the backends compute with, and the scalar
// conversions between them. Weights may be stored as bf16, f16 or f32; the CPU
// backend computes in f32. (engine/model/dtype.h is the other enum: every
// dtype a safetensors file may hold; the loader maps the three float ones
// onto these.)
#ifndef TRIBUTARY_ENGINE_BACKEND_ELEMENT_TYPE_H_
#define TRIBUTARY_ENGINE_BACKEND_ELEMENT_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tributary {

enum class ElementType : uint8_t { kF32, kBF16, kF16 };

inline size_t ElementTypeSizeBytes(ElementType type) {
  return type == ElementType::kF32 ? 4 : 2;
}

inline const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kF32:
      return "f32";
    case ElementType::kBF16:
      return "bf16";
    case ElementType::kF16:
      return "f16";
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

// Element i of a buffer of `type`, widened to f32.
inline float LoadAsF32(const void* data, ElementType type, size_t i) {
  switch (type) {
    case ElementType::kF32:
      return static_cast<const float*>(data)[i];
    case ElementType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    case ElementType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
  }
  return 0.0f;
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_ELEMENT_TYPE_H_
