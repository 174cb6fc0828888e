#include "engine/backend/cpu/cpu_isa.h"

#include <cpuid.h>

namespace tributary {
namespace {

// CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c").
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

}  // namespace

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto:
      return "auto";
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool CpuIsaSupported(CpuIsa isa) {
  // Read once: HasF16c executes CPUID, which a virtual machine may trap
  // (~1 µs a call where it does), and every op given an explicit
  // path resolves it (ResolveCpuIsa).
  static const bool avx2 = __builtin_cpu_supports("avx2") &&
                           __builtin_cpu_supports("fma") && HasF16c();
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kAvx512:
      return avx512;
  }
  return false;
}

CpuIsa BestCpuIsa() {
  if (CpuIsaSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (CpuIsaSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

CpuIsa ResolveCpuIsa(CpuIsa isa) {
  if (isa == CpuIsa::kAuto) {
    static const CpuIsa best = BestCpuIsa();  // a property of the CPU
    return best;
  }
  return CpuIsaSupported(isa) ? isa : CpuIsa::kScalar;
}

}  // namespace tributary
